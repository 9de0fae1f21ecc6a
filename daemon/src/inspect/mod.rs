//! The inspection tools' operations (`stat`, `list_directory`, `read_file_range`): each one
//! fixed `/bin/sh` program on the building block, the path on its stdin (so no byte of it is
//! ever shell text), answering with a status line and then its data, parsed here.
//!
//! The programs need POSIX tools and a few GNU options (`find -printf`, `sort -z`); a host
//! without one (BusyBox, as on Alpine) gets `host_tool_missing` naming what is missing, never a
//! wrong answer.

pub mod host;
pub mod list;
pub mod read;
pub mod stat;

use std::time::{Duration, UNIX_EPOCH};

use base64::Engine as _;
use sshmcp_proto::exec::{Encoding, ExecResult, StreamOutput};
use sshmcp_proto::inspect::{FileType, RemotePath};
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::remote::{self, Program};
use crate::session::Session;

/// How long an inspection may take on the host.
const TIMEOUT: Duration = Duration::from_secs(30);

/// What every inspection program starts with: messages in English, the tools it needs, the
/// path from stdin (a trailing newline kept; an empty one means `base64`, which decodes stdin,
/// is missing), made `./`-relative when relative (`stat -- -` would read stdin, and `cd -`
/// means the last directory), and `_sshmcp_fail`, which turns `stat`'s error into a status
/// line. `stat` ends its message with the system's error text, so the path in it cannot be
/// mistaken for one. Tools run through `command`: a login environment's exported functions
/// cannot stand in for them.
const PRELUDE: &str = "export LC_ALL=C\n\
for _t in {TOOLS}; do command -v \"$_t\" >/dev/null 2>&1 || { printf 'missing %s\\n' \"$_t\"; exit 0; }; done\n\
{PATH}\n\
if [ -z \"$_p\" ]; then echo 'missing base64'; exit 0; fi\n\
case $_p in /*) ;; *) _p=./$_p ;; esac\n\
_sshmcp_fail() { case $1 in *': No such file or directory'|*': Not a directory'|\
*': Too many levels of symbolic links') echo notfound ;; \
*': Permission denied'|*': Operation not permitted') echo denied ;; \
*': File exists'|*'cannot overwrite '*) echo exists ;; \
*': File name too long') echo toolong ;; *': cannot move '*' to a subdirectory of itself, '*|\
*': cannot copy a directory, '*', into itself, '*) echo itself ;; *) printf 'error %s\\n' \"$1\" ;; esac; exit 0; }\n";

/// How the prelude reads the path from stdin.
const PATH_FROM_STDIN: &str = "_p=$(command cat; printf .); _p=${_p%.}";

/// The prelude for a program that uses `tools`.
pub(crate) fn prelude(tools: &str) -> String {
    PRELUDE
        .replace("{TOOLS}", tools)
        .replace("{PATH}", PATH_FROM_STDIN)
}

/// The prelude for a program whose stdin carries data: the path is written into the program
/// as base64, whose letters are no shell syntax, and decoded on the host.
pub(crate) fn prelude_with_path(tools: &str, path: &[u8]) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(path);
    PRELUDE
        .replace("{TOOLS}", &format!("base64 {tools}"))
        .replace(
            "{PATH}",
            &format!("_p=$(printf %s '{encoded}' | command base64 -d; printf .); _p=${{_p%.}}"),
        )
}

/// The path's bytes: text, or base64 for a name that is not UTF-8. Empty paths and NUL bytes
/// name nothing.
pub fn path_bytes(path: &RemotePath) -> Result<Vec<u8>, DaemonError> {
    let bytes = match path.encoding {
        Encoding::Utf8 => path.path.clone().into_bytes(),
        Encoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(&path.path)
            .map_err(|_| invalid("path", "is not valid base64 (path_encoding is base64)"))?,
    };
    if bytes.is_empty() {
        return Err(invalid("path", "is empty"));
    }
    if bytes.contains(&0) {
        return Err(invalid("path", "contains a NUL byte"));
    }
    // A longer path fails every system call with ENAMETOOLONG, but `mkdir -p` walks it a
    // directory at a time and would make most of it before failing.
    if bytes.len() > MAX_PATH_BYTES {
        return Err(invalid(
            "path",
            "is longer than 4095 bytes, the most a host's system calls take",
        ));
    }
    Ok(bytes)
}

/// Linux's `PATH_MAX` less its terminating NUL.
pub(crate) const MAX_PATH_BYTES: usize = 4095;

fn invalid(field: &str, why: &str) -> DaemonError {
    DaemonError::new(ErrorCode::InvalidArguments, format!("`{field}` {why}"))
}

/// The last part of a path when it names a file: not empty (a trailing `/`), `.` or `..`.
pub fn file_name(path: &[u8]) -> Option<&[u8]> {
    let name = &path[path.iter().rposition(|b| *b == b'/').map_or(0, |i| i + 1)..];
    (!matches!(name, b"" | b"." | b"..")).then_some(name)
}

/// Bytes as JSON text: the text itself when UTF-8, else base64.
pub fn remote_text(bytes: &[u8]) -> (String, Encoding) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (text.to_string(), Encoding::Utf8),
        Err(_) => (
            base64::engine::general_purpose::STANDARD.encode(bytes),
            Encoding::Base64,
        ),
    }
}

/// Runs `script` with the path on stdin; returns what followed an `ok` status line (the
/// rest of that line, and the bytes after it), or the error the status line names.
pub(crate) async fn run(
    session: &Session,
    script: String,
    path: &[u8],
    max_output_bytes: u64,
) -> Result<(String, Vec<u8>), DaemonError> {
    run_within(session, script, path, max_output_bytes, TIMEOUT).await
}

/// [`run`] for a program that may take `timeout` (hashing a large file).
pub(crate) async fn run_within(
    session: &Session,
    script: String,
    path: &[u8],
    max_output_bytes: u64,
    timeout: Duration,
) -> Result<(String, Vec<u8>), DaemonError> {
    run_program(
        session,
        script,
        path.to_vec(),
        path,
        max_output_bytes,
        timeout,
        false,
    )
    .await
}

/// The answer of a program that ran out of `timeout` (`about` says what for): a host, or a
/// file system of it, that does not answer (a hung network mount), or a stalled connection.
/// (A program that got no channel in time is `channels_busy`, before this.)
pub(crate) fn no_answer(timeout: Duration, about: &str) -> DaemonError {
    DaemonError::internal(format!(
        "the host did not answer within {} s{about}: it, or a file system of it, may be stuck \
         (a hung network mount), or the session's connection stalled (session_list shows \
         whether it is still ready)",
        timeout.as_secs()
    ))
}

/// How an error that is sure nothing changed on the host begins: callers that would add what
/// may have changed leave it as it is.
pub(crate) const NOTHING_CHANGED: &str = "nothing was changed";

/// How long a `command` program (below) waits for one of the slots commands may hold.
const COMMAND_QUEUE: Duration = Duration::from_secs(25);

/// [`run_within`] for a program whose stdin is not the path: the path (`shown`) is only named
/// in errors. A `command` may take long (a copy of a large tree): it waits for one of the
/// slots commands may hold (see `remote::channel`), at most [`COMMAND_QUEUE`], and then fails
/// saying so, having changed nothing.
pub(crate) async fn run_program(
    session: &Session,
    script: String,
    stdin: Vec<u8>,
    shown: &[u8],
    max_output_bytes: u64,
    timeout: Duration,
    command: bool,
) -> Result<(String, Vec<u8>), DaemonError> {
    let mut program = Program::new(script, timeout, max_output_bytes);
    program.stdin = Some(stdin);
    program.command = command;
    if command {
        program.queue_timeout = Some(COMMAND_QUEUE);
    }
    // No channel in time is `channels_busy`: nothing ran.
    let result: ExecResult = remote::run(&session.host, program).await?;
    let shown = || String::from_utf8_lossy(shown).into_owned();
    if result.timed_out {
        return Err(no_answer(timeout, &format!(" for {}", shown())));
    }
    let out = stream_bytes(&result.stdout)?;
    let said = stream_bytes(&result.stderr)?;
    let (line, rest) = match out.iter().position(|b| *b == b'\n') {
        Some(newline) => (&out[..newline], out[newline + 1..].to_vec()),
        None => (&out[..], Vec::new()),
    };
    let line = String::from_utf8_lossy(line);
    let (word, detail) = line.split_once(' ').unwrap_or((&line, ""));
    match word {
        // A tool that complained (a file gone between two steps) spoils the answer.
        "ok" if result.exit_code == Some(0) && said.is_empty() => Ok((detail.to_string(), rest)),
        "toolong" | "notfound" | "denied" | "notdir" | "notfile" | "exists" | "itself" => {
            let (code, what) = match word {
                "itself" => (
                    ErrorCode::InvalidArguments,
                    "the destination lies inside the source directory",
                ),
                "toolong" => (
                    ErrorCode::InvalidArguments,
                    "the path is longer than the host allows",
                ),
                "notfound" => (ErrorCode::RemotePathNotFound, "no such path on the host"),
                "denied" => (
                    ErrorCode::RemotePermissionDenied,
                    "permission denied to the session's user",
                ),
                "notdir" => (ErrorCode::InvalidRemoteType, "not a directory"),
                "exists" => (
                    ErrorCode::RemotePathExists,
                    "exists (pass overwrite: true to replace it)",
                ),
                _ => (ErrorCode::InvalidRemoteType, "not a regular file"),
            };
            Err(DaemonError::new(code, format!("{what}: {}", shown())))
        }
        "missing" => Err(DaemonError::new(
            ErrorCode::HostToolMissing,
            format!(
                "the host lacks `{detail}`, which this tool needs: do the work with exec and \
                 the host's own tools, or install it there"
            ),
        )),
        "error" => Err(DaemonError::internal(format!("the host said: {detail}"))),
        _ => Err(DaemonError::internal(format!(
            "unexpected answer from the host ({}): {}",
            match result.exit_code {
                Some(code) => format!("exit status {code}"),
                None => "no exit status".to_string(),
            },
            String::from_utf8_lossy(&said)
        ))),
    }
}

/// A stream's complete bytes; an answer cut by the capture bound is an error, not data.
pub(crate) fn stream_bytes(stream: &StreamOutput) -> Result<Vec<u8>, DaemonError> {
    if stream.truncated {
        return Err(DaemonError::internal(
            "the host's answer was larger than expected",
        ));
    }
    match stream.encoding {
        Encoding::Utf8 => Ok(stream.data.clone().into_bytes()),
        Encoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(&stream.data)
            .map_err(|e| DaemonError::internal(format!("bad capture: {e}"))),
    }
}

/// The type bits of a `st_mode`.
pub(crate) fn file_type(mode: u32) -> FileType {
    match mode & 0o170_000 {
        0o100_000 => FileType::File,
        0o040_000 => FileType::Directory,
        0o120_000 => FileType::Symlink,
        0o010_000 => FileType::Fifo,
        0o140_000 => FileType::Socket,
        0o020_000 => FileType::CharDevice,
        0o060_000 => FileType::BlockDevice,
        _ => FileType::Other,
    }
}

/// Permission bits (with setuid, setgid, sticky) as four octal digits.
fn mode_string(mode: u32) -> String {
    format!("{:04o}", mode & 0o7777)
}

/// Seconds since the epoch (a fraction allowed) as RFC 3339 UTC; times before 1970 read as
/// the epoch.
fn time(secs: &str) -> Result<String, DaemonError> {
    let secs: f64 = secs
        .parse()
        .map_err(|_| DaemonError::internal(format!("bad time from the host: {secs:?}")))?;
    let at = match secs < 0.0 {
        true => Duration::try_from_secs_f64(-secs)
            .ok()
            .and_then(|before| UNIX_EPOCH.checked_sub(before)),
        false => Duration::try_from_secs_f64(secs)
            .ok()
            .and_then(|after| UNIX_EPOCH.checked_add(after)),
    };
    let at = at.ok_or_else(|| DaemonError::internal(format!("bad time from the host: {secs}")))?;
    Ok(sshmcp_proto::time::rfc3339(at))
}

fn number<T: std::str::FromStr>(field: &str, text: &str) -> Result<T, DaemonError> {
    text.parse()
        .map_err(|_| DaemonError::internal(format!("bad {field} from the host: {text:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_decode_and_refuse_what_names_nothing() {
        let p = |path: &str, encoding| RemotePath {
            path: path.into(),
            encoding,
        };
        assert_eq!(path_bytes(&p("/a b", Encoding::Utf8)).unwrap(), b"/a b");
        assert_eq!(path_bytes(&p("/w==", Encoding::Base64)).unwrap(), [0xff]);
        let longest = "d/".repeat(2047) + "d";
        assert_eq!(
            path_bytes(&p(&longest, Encoding::Utf8)).unwrap().len(),
            4095
        );
        for bad in [
            p(&(longest + "d"), Encoding::Utf8),
            p("", Encoding::Utf8),
            p("a\0b", Encoding::Utf8),
            p("!", Encoding::Base64),
        ] {
            assert_eq!(
                path_bytes(&bad).unwrap_err().code,
                ErrorCode::InvalidArguments
            );
        }
    }

    #[test]
    fn modes_give_types_and_octal_permissions() {
        assert_eq!(file_type(0o100_644), FileType::File);
        assert_eq!(file_type(0o040_755), FileType::Directory);
        assert_eq!(file_type(0o120_777), FileType::Symlink);
        assert_eq!(mode_string(0o104_755), "4755");
        assert_eq!(mode_string(0o100_600), "0600");
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(time("0").unwrap(), "1970-01-01T00:00:00.000Z");
        assert_eq!(time("1733011200.25").unwrap(), "2024-12-01T00:00:00.250Z");
        assert!(time("x").is_err());
    }

    #[test]
    fn text_is_utf8_or_base64() {
        assert_eq!(remote_text(b"caf\xc3\xa9").1, Encoding::Utf8);
        let (text, encoding) = remote_text(b"\xff");
        assert_eq!((text.as_str(), encoding), ("/w==", Encoding::Base64));
    }

    /// The prelude run by a local `/bin/sh`, the path on stdin as the building block gives it:
    /// a relative path becomes `./`-relative, and stat's errors become status words.
    #[test]
    fn the_prelude_reads_the_path_whole_and_classifies_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("-"), "x").unwrap();
        std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
        let run = |path: &[u8]| {
            let script = format!(
                "{}printf '[%s]\\n' \"$_p\"; _o=$(stat -L -c %s -- \"$_p\" 2>&1) || \
                 _sshmcp_fail \"$_o\"; echo \"ok $_o\"",
                prelude("stat")
            );
            let mut child = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(script)
                .current_dir(dir.path())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            child.stdin.take().unwrap().write_all(path).unwrap();
            String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
        };
        assert_eq!(run(b"-"), "[./-]\nok 1\n");
        assert_eq!(run(b"trailing\n"), "[./trailing\n]\nnotfound\n");
        assert_eq!(run(b"loop"), "[./loop]\nnotfound\n");
        assert_eq!(
            run(&[b'x'; 300]),
            format!("[./{}]\ntoolong\n", "x".repeat(300))
        );
        assert_eq!(run(b""), "missing base64\n");
    }
}
