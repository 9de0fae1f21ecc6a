//! The path and field handling the tools about remote files share (`stat`, `list_directory`,
//! `read_file_range` and the file tools): each of those runs one fixed
//! `/bin/sh` program on the building block, the path on its stdin (so no byte of it is ever
//! shell text), answering with a status line (`remote::status`) and then its data.
//!
//! The programs need POSIX tools and a few GNU options (`find -printf`, `sort -z`); a host
//! without one (BusyBox, as on Alpine) gets `host_tool_missing` naming what is missing, never a
//! wrong answer.

use std::time::{Duration, UNIX_EPOCH};

use base64::Engine as _;
use sshmcp_proto::exec::Encoding;
use sshmcp_proto::inspect::{FileType, RemotePath};
use sshmcp_proto::{DaemonError, ErrorCode};

/// The path's bytes: text, or base64 for a name that is not UTF-8. Empty paths and NUL bytes
/// name nothing. `field` is the argument the path came in (`path`, `source`, ...), which an
/// error names.
pub fn path_bytes(path: &RemotePath, field: &str) -> Result<Vec<u8>, DaemonError> {
    let bytes = match path.encoding {
        Encoding::Utf8 => path.path.clone().into_bytes(),
        Encoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(&path.path)
            .map_err(|_| {
                invalid(
                    field,
                    &format!("is not valid base64 ({field}_encoding is base64)"),
                )
            })?,
    };
    if bytes.is_empty() {
        return Err(invalid(field, "is empty"));
    }
    if bytes.contains(&0) {
        return Err(invalid(field, "contains a NUL byte"));
    }
    if bytes.starts_with(b"~") {
        return Err(invalid(field, NO_TILDE));
    }
    // A longer path fails every system call with ENAMETOOLONG, but `mkdir -p` walks it a
    // directory at a time and would make most of it before failing.
    if bytes.len() > MAX_PATH_BYTES {
        return Err(invalid(
            field,
            "is longer than 4095 bytes, the most a host's system calls take",
        ));
    }
    Ok(bytes)
}

/// Why a path that begins with `~` is refused: no shell sees it, so it would name a file
/// called `~` in the login directory, which an agent then believes missing, or makes (and
/// later cleans up with `rm -rf ~`).
pub const NO_TILDE: &str = "starts with `~`, which is not expanded: give it relative to home \
     (`proj/x`) or absolute; a name that begins with `~`: `./~name`";

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

/// What an agent is told of a path that ends in no name (`dir/`, `.`, `..`), given in
/// `field`, for a tool that takes only a file there (`files_only`) or any path.
pub fn names_nothing(field: &str, files_only: bool) -> DaemonError {
    let instead = match files_only {
        true => "a file in `dir`: `dir/name`",
        false => "for `dir/`, give `dir` or `dir/name`",
    };
    DaemonError::new(
        ErrorCode::InvalidArguments,
        format!("`{field}` must end with a name, not `/`, `.` or `..` ({instead})"),
    )
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
pub(crate) fn mode_string(mode: u32) -> String {
    format!("{:04o}", mode & 0o7777)
}

/// Seconds since the epoch (a fraction allowed) as RFC 3339 UTC; times before 1970 read as
/// the epoch.
pub(crate) fn time(secs: &str) -> Result<String, DaemonError> {
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

pub(crate) fn number<T: std::str::FromStr>(field: &str, text: &str) -> Result<T, DaemonError> {
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
        let ok = |path| path_bytes(&path, "path").unwrap();
        assert_eq!(ok(p("/a b", Encoding::Utf8)), b"/a b");
        assert_eq!(ok(p("/w==", Encoding::Base64)), [0xff]);
        assert_eq!(ok(p("./~", Encoding::Utf8)), b"./~");
        assert_eq!(ok(p("a/~", Encoding::Utf8)), b"a/~");
        let longest = "d/".repeat(2047) + "d";
        assert_eq!(ok(p(&longest, Encoding::Utf8)).len(), 4095);
        for bad in [
            p(&(longest + "d"), Encoding::Utf8),
            p("", Encoding::Utf8),
            p("a\0b", Encoding::Utf8),
            p("!", Encoding::Base64),
            p("~", Encoding::Utf8),
            p("~/proj", Encoding::Utf8),
            p("~other/x", Encoding::Utf8),
            p("fg==", Encoding::Base64),
        ] {
            // The error names the argument the path came in.
            let refused = path_bytes(&bad, "source").unwrap_err();
            assert_eq!(refused.code, ErrorCode::InvalidArguments);
            assert!(
                refused.message.starts_with("`source` "),
                "{}",
                refused.message
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
}
