//! Fixed remote programs that answer with a status line (what `stat`, `list_directory`,
//! `read_file_range`, the file tools, transfers' remote steps and tasks share): a prelude that
//! checks the tools a program needs and reads the path from stdin, then one line, `ok ...` and
//! its data, or a word that names the failure (`notfound`, `denied`, `missing TOOL`, ...),
//! turned here into the error an agent acts on. A path is never shell text: it comes on stdin
//! or as base64.

use std::time::Duration;

use base64::Engine as _;
use sshmcp_proto::{DaemonError, ErrorCode};

use super::{Host, Output, Program};

/// How long a program may take on the host, unless its caller says otherwise.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(30);

/// What every inspection program starts with: messages in English, the tools it needs (and,
/// for `stat`, its `-c`: macOS and the BSDs have a `stat` without it), the path in `_p`, from
/// stdin or (`_sshmcp_path_in=base64`) decoded from `_sshmcp_path64` (a trailing newline
/// kept; an empty one means `base64`, which decodes it, is missing), made `./`-relative when relative (`stat -- -`
/// would read stdin, and `cd -` means the last directory), and `_sshmcp_fail`, which turns
/// a tool's error into a status line. `stat` ends its message with the system's error text,
/// so the path in it cannot be mistaken for one. Tools run through `command`: a login
/// environment's exported functions cannot stand in for them.
const PRELUDE: &str = include_str!("prelude.sh");

/// The prelude for a program that uses `tools` (words of this crate's, never a user's) and
/// reads the path from stdin.
pub(crate) fn prelude(tools: &str) -> String {
    format!("_sshmcp_tools='{tools}'\n_sshmcp_path_in=stdin\n{PRELUDE}")
}

/// The prelude for a program whose stdin carries data: the path is written into the program
/// as base64, whose letters are no shell syntax, and decoded on the host.
pub(crate) fn prelude_with_path(tools: &str, path: &[u8]) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(path);
    format!(
        "_sshmcp_tools='base64 {tools}'\n_sshmcp_path_in=base64\n_sshmcp_path64='{encoded}'\n\
         {PRELUDE}"
    )
}

/// Runs `script` with the path on stdin; returns what followed an `ok` status line (the
/// rest of that line, and the bytes after it), or the error the status line names.
pub(crate) async fn run(
    host: &Host,
    script: String,
    path: &[u8],
    max_output_bytes: u64,
) -> Result<(String, Vec<u8>), DaemonError> {
    run_within(host, script, path, max_output_bytes, TIMEOUT).await
}

/// [`run`] for a program that may take `timeout` (hashing a large file).
pub(crate) async fn run_within(
    host: &Host,
    script: String,
    path: &[u8],
    max_output_bytes: u64,
    timeout: Duration,
) -> Result<(String, Vec<u8>), DaemonError> {
    run_program(
        host,
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
    host: &Host,
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
    let result = super::run(host, program).await?;
    let shown = || String::from_utf8_lossy(shown).into_owned();
    if result.timed_out {
        return Err(no_answer(timeout, &format!(" for {}", shown())));
    }
    let (out, said) = (whole(result.stdout)?, whole(result.stderr)?);
    let (line, rest) = match out.iter().position(|b| *b == b'\n') {
        Some(newline) => (&out[..newline], out[newline + 1..].to_vec()),
        None => (&out[..], Vec::new()),
    };
    let line = String::from_utf8_lossy(line);
    let (word, detail) = line.split_once(' ').unwrap_or((&line, ""));
    match word {
        // A tool that complained (a file gone between two steps) spoils the answer.
        "ok" if result.exit_code == Some(0) && said.is_empty() => Ok((detail.to_string(), rest)),
        "toolong" | "notfound" | "denied" | "notdir" | "notfile" | "symlink" | "exists"
        | "itself" => {
            let (code, what) = match word {
                "itself" => (
                    ErrorCode::InvalidArguments,
                    "the destination lies inside the source directory",
                ),
                "toolong" => (
                    ErrorCode::InvalidArguments,
                    "a path given is longer than the host allows (a name: 255 bytes at most)",
                ),
                "notfound" => (ErrorCode::RemotePathNotFound, "no such path on the host"),
                "denied" => (
                    ErrorCode::RemotePermissionDenied,
                    "permission denied to the session's user",
                ),
                "notdir" => (ErrorCode::InvalidRemoteType, "not a directory"),
                "symlink" => (
                    ErrorCode::InvalidRemoteType,
                    "a symlink, which this tool never writes through (the file it points to: \
                     stat shows its link_target, relative to the link's directory)",
                ),
                "exists" => (
                    ErrorCode::RemotePathExists,
                    "exists (pass overwrite: true to replace it)",
                ),
                _ => (ErrorCode::InvalidRemoteType, "not a regular file"),
            };
            // An argument's fault names no value (the contract); the host's names its path.
            Err(match code {
                ErrorCode::InvalidArguments => DaemonError::new(code, what),
                _ => DaemonError::new(code, format!("{what}: {}", shown())),
            })
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
pub(crate) fn whole(stream: Output) -> Result<Vec<u8>, DaemonError> {
    match stream.omitted {
        Some(_) => Err(DaemonError::internal(
            "the host's answer was larger than expected",
        )),
        None => Ok(stream.bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A host whose `stat` has no `-c` (macOS, the BSDs) is told so before anything runs; a
    /// GNU or BusyBox `stat` passes.
    #[test]
    fn a_stat_without_dash_c_is_a_missing_tool() {
        let bin = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/bin/cat", bin.path().join("cat")).unwrap();
        let stat = bin.path().join("stat");
        std::fs::write(
            &stat,
            "#!/bin/sh\necho 'stat: illegal option -- c' >&2\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&stat, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let run = |tools: &str, path: &std::ffi::OsStr| {
            let out = std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("{}echo ok", prelude(tools)))
                .env("PATH", path)
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap()
        };
        assert_eq!(run("stat", bin.path().as_os_str()), "missing stat -c\n");
        assert_eq!(
            run("stat", "/usr/bin:/bin".as_ref()),
            "missing base64\n",
            "GNU stat passes"
        );
        assert_eq!(
            run("cat", bin.path().as_os_str()),
            "missing base64\n",
            "only where stat is used"
        );
    }
}
