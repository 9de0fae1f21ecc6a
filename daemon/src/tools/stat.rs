//! `stat`: one path's metadata from `stat -c`, and a symlink's target from `readlink`.

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::inspect::{FileStat, FileType, StatRequest};
use sshmcp_proto::service::tools;

use crate::inspect::{file_type, mode_string, number, path_bytes, remote_text, time};
use crate::operation::Operation;
use crate::remote::status::{prelude, run};
use crate::session::{Registry, Session};

/// The program: `stat` (following symlinks when `follow`), then a link's target. One line
/// for the numbers (times to the nanosecond) and one for each name (names hold no newline).
const STAT: &str = include_str!("stat.sh");

fn script(follow: bool) -> String {
    let prelude = prelude("stat readlink");
    format!("{prelude}_follow={}\n{STAT}", u8::from(follow))
}

pub async fn stat(session: &Session, req: StatRequest) -> Result<FileStat, DaemonError> {
    let path = path_bytes(&req.path, "path")?;
    let (_, out) = run(&session.host, script(req.follow_symlinks), &path, 64 * 1024).await?;
    parse(&out)
}

/// Reads the three lines of the stat program and, for a symlink, its target (readlink's line).
fn parse(out: &[u8]) -> Result<FileStat, DaemonError> {
    let mut lines = out.splitn(4, |b| *b == b'\n');
    let mut line = || String::from_utf8_lossy(lines.next().unwrap_or_default()).into_owned();
    let (fields, owner, group) = (line(), line(), line());
    let rest = lines.next().unwrap_or_default();
    let f: Vec<&str> = fields.split(' ').collect();
    let [raw_mode, size, uid, gid, atime, mtime, ctime] = f[..] else {
        return Err(DaemonError::internal(format!("bad stat line: {fields:?}")));
    };
    let mode = u32::from_str_radix(raw_mode, 16)
        .map_err(|_| DaemonError::internal(format!("bad mode: {raw_mode:?}")))?;
    let file_type = file_type(mode);
    let (link_target, link_target_encoding) = match file_type {
        FileType::Symlink => {
            let (text, encoding) = remote_text(rest.strip_suffix(b"\n").unwrap_or(rest));
            (Some(text), Some(encoding))
        }
        _ => (None, None),
    };
    // GNU stat says UNKNOWN for an id without a name.
    let name_or = |name: String, id: &str| match name.as_str() {
        "UNKNOWN" => id.to_string(),
        _ => name,
    };
    Ok(FileStat {
        file_type,
        size: number("size", size)?,
        mode: mode_string(mode),
        uid: number("uid", uid)?,
        gid: number("gid", gid)?,
        owner: name_or(owner, uid),
        group: name_or(group, gid),
        mtime: time(mtime)?,
        atime: time(atime)?,
        ctime: time(ctime)?,
        link_target,
        link_target_encoding,
    })
}

// A call answered so adds nothing to its trail line but how it ended.
impl crate::audit::Answer for sshmcp_proto::inspect::FileStat {}

impl Operation for tools::Stat {
    fn summary(req: &StatRequest) -> String {
        crate::audit::path(&req.path)
    }

    async fn run(
        req: StatRequest,
        session: Arc<Session>,
        _: &Registry,
    ) -> Result<FileStat, DaemonError> {
        stat(&session, req).await
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use sshmcp_proto::exec::Encoding;

    use super::*;

    #[test]
    fn a_symlink_keeps_every_byte_of_its_target() {
        let out = b"a1ff 9 1000 54321 10.5 20.000000000 30\nme\nUNKNOWN\n/t\nx\xff y\n";
        let s = parse(out).unwrap();
        assert_eq!(s.file_type, FileType::Symlink);
        assert_eq!((s.mode.as_str(), s.size, s.uid), ("0777", 9, 1000));
        assert_eq!((s.owner.as_str(), s.group.as_str()), ("me", "54321"));
        assert_eq!(s.atime, "1970-01-01T00:00:10.500Z");
        assert_eq!(s.mtime, "1970-01-01T00:00:20.000Z");
        assert_eq!(s.link_target_encoding, Some(Encoding::Base64));
        let target = s.link_target.unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(target)
            .unwrap();
        assert_eq!(bytes, b"/t\nx\xff y");
    }

    /// The program under every shell a host may have as `/bin/sh` (BusyBox with only its
    /// applets): a file whose name holds a quote and a newline, a symlink to it read and
    /// followed, and a missing path.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_program_runs_under_every_posix_shell() {
        use std::os::unix::ffi::OsStrExt as _;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a 'b'\nc");
        std::fs::write(&file, "hello").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        for (shell, path) in crate::programs::Shells::new().each() {
            let run = |at: &std::path::Path, follow: bool| {
                let stdin = at.as_os_str().as_bytes();
                crate::programs::run_under(&shell, &path, dir.path(), &script(follow), stdin)
            };
            let stat = |at: &std::path::Path, follow: bool| {
                let out = run(at, follow);
                let answer = out
                    .strip_prefix("ok\n")
                    .unwrap_or_else(|| panic!("{shell:?}: {out}"));
                parse(answer.as_bytes()).unwrap()
            };
            let s = stat(&file, false);
            assert_eq!((s.file_type, s.size), (FileType::File, 5), "{shell:?}");
            let s = stat(&link, false);
            assert_eq!(s.file_type, FileType::Symlink, "{shell:?}");
            assert_eq!(s.link_target, Some(file.display().to_string()), "{shell:?}");
            let s = stat(&link, true);
            assert_eq!((s.file_type, s.size), (FileType::File, 5), "{shell:?}");
            assert_eq!(
                run(&dir.path().join("gone"), false),
                "notfound\n",
                "{shell:?}"
            );
        }
    }

    #[test]
    fn a_file_has_no_target_and_a_bad_line_is_an_error() {
        let s = parse(b"81a4 5 0 0 1 2 3\nroot\nroot\n").unwrap();
        assert_eq!((s.file_type, s.mode.as_str()), (FileType::File, "0644"));
        assert!(s.link_target.is_none() && s.link_target_encoding.is_none());
        assert!(parse(b"81a4 5\nroot\nroot\n").is_err());
    }
}
