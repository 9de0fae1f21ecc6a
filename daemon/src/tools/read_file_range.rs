//! `read_file_range`: bytes of a regular file from an offset, at most a length and never more
//! than the daemon's output bound.

use std::sync::Arc;

use sshmcp_proto::inspect::{FileRange, ReadRangeRequest};
use sshmcp_proto::service::tools;
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::inspect::{number, path_bytes, remote_text};
use crate::operation::Operation;
use crate::remote::capture::utf8_head_boundary;
use crate::remote::status::{prelude, run};
use crate::session::{Registry, Session};

/// The program: only a regular file the user may read, then its size, then the range, one
/// byte longer than asked (whether more follows tells `eof`, also where the size is unknown
/// or changing). `tail -c +N` seeks on a regular file, so a far offset costs nothing; one past
/// the end of a file whose size is known reads nothing (a seek past what the file system
/// allows would fail). A size of 0 is unknown under /proc and /sys: those are read.
const READ: &str = include_str!("read_file_range.sh");

/// The program for `read_length` bytes from byte `start` (counted from 1, as `tail -c +N`).
fn script(start: u64, read_length: u64) -> String {
    let prelude = prelude("stat tail head");
    format!("{prelude}_start={start}\n_length={read_length}\n{READ}")
}

pub async fn read(
    session: &Session,
    max_output_bytes: u64,
    req: ReadRangeRequest,
) -> Result<FileRange, DaemonError> {
    let path = path_bytes(&req.path, "path")?;
    if req.length == 0 {
        return Err(DaemonError::new(
            ErrorCode::InvalidArguments,
            "`length` must be at least 1",
        ));
    }
    // `tail -c +N` counts from 1. No file is as long as i64::MAX (the shell's numbers), so a
    // larger offset reads as that one: past the end.
    let start = req.offset.saturating_add(1).min(i64::MAX as u64);
    let length = req.length.min(max_output_bytes);
    // The status line comes first: room for it beside the range and its extra byte.
    let script = script(start, length + 1);
    let (size, mut data) = run(&session.host, script, &path, length + 65).await?;
    let file_size: u64 = number("size", size.trim())?;
    let eof = data.len() as u64 <= length;
    data.truncate(length as usize);
    // A range the bound cut inside a character ends before it, unless nothing would be left.
    let whole = utf8_head_boundary(&data);
    if !eof && whole > 0 && std::str::from_utf8(&data[..whole]).is_ok() {
        data.truncate(whole);
    }
    let (text, encoding) = remote_text(&data);
    Ok(FileRange {
        data: text,
        encoding,
        offset: req.offset,
        bytes_read: data.len() as u64,
        file_size,
        eof,
    })
}

// A call answered so adds nothing to its trail line but how it ended.
impl crate::audit::Answer for sshmcp_proto::inspect::FileRange {}

impl Operation for tools::ReadFileRange {
    fn summary(req: &ReadRangeRequest) -> String {
        format!(
            "{} bytes {}+{}",
            crate::audit::path(&req.path),
            req.offset,
            req.length
        )
    }

    async fn run(
        req: ReadRangeRequest,
        session: Arc<Session>,
        registry: &Registry,
    ) -> Result<FileRange, DaemonError> {
        read(&session, registry.settings.max_output_bytes, req).await
    }
}

// The shells these tests run under are Linux's (`programs::Shells`).
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The program under every shell a host may have as `/bin/sh` (BusyBox with only its
    /// applets): a range inside a file whose name holds a quote and a newline, one past its
    /// end, a directory, and a missing path.
    #[test]
    fn the_program_runs_under_every_posix_shell() {
        use std::os::unix::ffi::OsStrExt as _;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a 'b'\nc");
        std::fs::write(&file, "0123456789").unwrap();
        for (shell, path) in crate::programs::Shells::new().each() {
            let run = |at: &std::path::Path, start: u64, length: u64| {
                let stdin = at.as_os_str().as_bytes();
                let script = script(start, length);
                crate::programs::run_under(&shell, &path, dir.path(), &script, stdin)
            };
            assert_eq!(run(&file, 3, 4), "ok 10\n2345", "{shell:?}");
            assert_eq!(run(&file, 9, 100), "ok 10\n89", "{shell:?}");
            assert_eq!(run(&file, 12, 4), "ok 10\n", "{shell:?}");
            assert_eq!(run(dir.path(), 1, 4), "notfile\n", "{shell:?}");
            assert_eq!(
                run(&dir.path().join("gone"), 1, 4),
                "notfound\n",
                "{shell:?}"
            );
        }
    }
}
