//! A command handle's complete output: one file per stream under the local root's private
//! directory, written by the run as it reads, read back in pieces by byte offset, and removed
//! with the handle.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use sshmcp_proto::command::StreamChunk;
use sshmcp_proto::exec::encode_bytes;
use sshmcp_proto::{DaemonError, ErrorCode};
use tokio_util::sync::CancellationToken;

use crate::remote::capture::{utf8_head_boundary, utf8_tail_boundary};
use crate::remote::spool::{self, Spool};

/// The two files (stdout, stderr); dropping this removes them unless they were kept, or left
/// for the next daemon.
pub struct OutputFiles {
    paths: [PathBuf; 2],
    kept: AtomicBool,
    /// The daemon is handing its sessions over: the next one adopts the handle, and removes
    /// the files with it as this one would have.
    left: AtomicBool,
    /// The session's end: files removed after it take their session's spool directory with
    /// them when nothing else is left in it (no new file comes there any more).
    session_closed: CancellationToken,
}

impl Drop for OutputFiles {
    fn drop(&mut self) {
        if !self.kept() && !self.left.load(Ordering::SeqCst) {
            for path in &self.paths {
                let _ = std::fs::remove_file(path);
            }
            if self.session_closed.is_cancelled()
                && let Some(dir) = self.paths[0].parent()
            {
                // Refused while it holds anything (another handle's files, a kept spool).
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// Whether `path` has the shape of a handle's file of `session_id`:
/// `<absolute root>/.sshmcp/spool/<session_id>/<name>`, with no `..` anywhere.
pub fn is_spool_file(path: &Path, session_id: &str) -> bool {
    use std::path::Component;
    let mut up = path.components().rev();
    path.is_absolute()
        && !path.components().any(|c| c == Component::ParentDir)
        && matches!(up.next(), Some(Component::Normal(_)))
        && up.next() == Some(Component::Normal(session_id.as_ref()))
        && up.next() == Some(Component::Normal("spool".as_ref()))
        && up.next() == Some(Component::Normal(".sshmcp".as_ref()))
}

impl OutputFiles {
    /// Creates the files under `<root>/.sshmcp/spool/<session>/`, each holding at most `cap`
    /// bytes, and the spools the run writes them through; `session_closed` is the session's
    /// end.
    pub fn create(
        root: &Path,
        session_id: &str,
        cap: u64,
        session_closed: CancellationToken,
    ) -> Result<(Self, (Spool, Spool)), DaemonError> {
        let (out, err) = spool::create_pair(root, session_id, cap).map_err(|e| {
            DaemonError::new(
                ErrorCode::InvalidLocalPath,
                format!("cannot create the output files under the local root: {e}"),
            )
        })?;
        let retained = |spool: Spool| {
            spool.retained().map_err(|e| {
                DaemonError::new(
                    ErrorCode::InvalidLocalPath,
                    format!("cannot name the output files under the local root: {e}"),
                )
            })
        };
        let out = retained(out)?;
        let err = retained(err).inspect_err(|_| {
            let _ = std::fs::remove_file(out.path());
        })?;
        let files = Self {
            paths: [out.path().to_path_buf(), err.path().to_path_buf()],
            kept: AtomicBool::new(false),
            left: AtomicBool::new(false),
            session_closed,
        };
        Ok((files, (out, err)))
    }

    /// The files a record names, as the daemon that wrote them left them.
    pub fn adopt(paths: [PathBuf; 2], kept: bool, session_closed: CancellationToken) -> Self {
        Self {
            paths,
            kept: AtomicBool::new(kept),
            left: AtomicBool::new(false),
            session_closed,
        }
    }

    pub fn paths(&self) -> &[PathBuf; 2] {
        &self.paths
    }

    pub fn kept(&self) -> bool {
        self.kept.load(Ordering::SeqCst)
    }

    /// Leaves the files where they are when this goes: an answer names them
    /// (`spool_output`).
    pub fn keep(&self) {
        self.kept.store(true, Ordering::SeqCst);
    }

    /// Leaves the files where they are when this goes, for the next daemon, which adopts the
    /// handle: kept or not, as they were.
    pub fn leave_for_next_daemon(&self) {
        self.left.store(true, Ordering::SeqCst);
    }

    /// The absolute path of `stream`'s file, when the files are kept.
    pub fn kept_path(&self, stream: usize) -> Option<String> {
        self.kept()
            .then(|| self.paths[stream].to_string_lossy().into_owned())
    }

    /// Up to `max` bytes of `stream`, of which `total` were written so far: from `offset`,
    /// else the last `max` (see [`chunk`]).
    pub fn chunk(
        &self,
        stream: usize,
        offset: Option<u64>,
        max: u64,
        total: u64,
    ) -> Result<StreamChunk, DaemonError> {
        chunk(stream, offset, max, total, |start, end| {
            let bytes = read_range(&self.paths[stream], start, end).map_err(|e| {
                DaemonError::internal(format!("cannot read the command's output file: {e}"))
            })?;
            Ok((start, bytes))
        })
    }
}

/// Up to `max` bytes of `stream`, of which `total` were written so far: from `offset`, else
/// the last `max`. `read` gives the bytes of a range and the offset of the first, which is
/// later than asked where the bytes before went (an `exec`'s tail). A cut never splits a
/// character (unless the piece would then be empty), so text stays text.
pub fn chunk(
    stream: usize,
    offset: Option<u64>,
    max: u64,
    total: u64,
    read: impl FnOnce(u64, u64) -> Result<(u64, Vec<u8>), DaemonError>,
) -> Result<StreamChunk, DaemonError> {
    let start = match offset {
        Some(o) if o > total => {
            return Err(DaemonError::invalid_arguments(format!(
                "{}_offset is past the end of the output ({total} bytes so far)",
                ["stdout", "stderr"][stream]
            )));
        }
        Some(o) => o,
        None => total.saturating_sub(max),
    };
    let end = total.min(start.saturating_add(max));
    let (mut first, mut bytes) = read(start, end)?;
    // A character still being written (or cut by `max`) waits for the next read.
    let keep = utf8_head_boundary(&bytes);
    if keep > 0 {
        bytes.truncate(keep);
    }
    // A piece that does not begin where a read left off may begin inside a character.
    if (offset.is_none() || first > start) && first > 0 {
        let skip = utf8_tail_boundary(&bytes);
        if skip < bytes.len() {
            bytes.drain(..skip);
            first += skip as u64;
        }
    }
    let next_offset = first + bytes.len() as u64;
    let (data, encoding) = encode_bytes(bytes);
    Ok(StreamChunk {
        data,
        encoding,
        offset: first,
        next_offset,
        total_bytes: total,
        truncated: false,
    })
}

/// Bytes `[start, end)` of the file, fewer where it is shorter (it stops at the spool cap).
fn read_range(path: &Path, start: u64, end: u64) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let want = usize::try_from(end - start).unwrap_or(usize::MAX);
    let mut bytes = vec![0u8; want];
    let mut got = 0;
    while got < want {
        match file.read_at(&mut bytes[got..], start + got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    bytes.truncate(got);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files_with(stdout: &[u8]) -> (tempfile::TempDir, OutputFiles) {
        let root = tempfile::tempdir().unwrap();
        let (files, (mut out, _err)) =
            OutputFiles::create(root.path(), "s", 1 << 20, Default::default()).unwrap();
        out.write(stdout).unwrap();
        (root, files)
    }

    #[test]
    fn offsets_read_on_without_gap_or_repeat() {
        let text = b"0123456789";
        let (_root, files) = files_with(text);
        let mut offset = 0;
        let mut whole = String::new();
        while offset < 10 {
            let c = files.chunk(0, Some(offset), 3, 10).unwrap();
            assert_eq!(c.offset, offset);
            whole.push_str(&c.data);
            offset = c.next_offset;
        }
        assert_eq!(whole, "0123456789");
        let at_end = files.chunk(0, Some(10), 3, 10).unwrap();
        assert_eq!((at_end.data.as_str(), at_end.next_offset), ("", 10));
        let past = files.chunk(0, Some(11), 3, 10).unwrap_err();
        assert_eq!(past.code, ErrorCode::InvalidArguments);
    }

    #[test]
    fn without_an_offset_the_tail_comes() {
        let (_root, files) = files_with(b"0123456789");
        let c = files.chunk(0, None, 4, 10).unwrap();
        assert_eq!((c.data.as_str(), c.offset, c.next_offset), ("6789", 6, 10));
        // Only what was counted so far is read, whatever the file holds beyond it.
        let c = files.chunk(0, None, 4, 5).unwrap();
        assert_eq!((c.data.as_str(), c.offset, c.next_offset), ("1234", 1, 5));
    }

    #[test]
    fn cuts_keep_characters_whole() {
        let (_root, files) = files_with("aéé".as_bytes()); // 5 bytes
        let c = files.chunk(0, Some(0), 2, 5).unwrap();
        assert_eq!((c.data.as_str(), c.next_offset), ("a", 1));
        let c = files.chunk(0, Some(1), 3, 5).unwrap();
        assert_eq!((c.data.as_str(), c.next_offset), ("é", 3));
        let tail = files.chunk(0, None, 3, 5).unwrap();
        assert_eq!((tail.data.as_str(), tail.offset), ("é", 3));
    }

    #[test]
    fn only_a_sessions_spool_files_pass_for_its_handles() {
        let ok = Path::new("/r/.sshmcp/spool/s0123456789/2026-1.out");
        assert!(is_spool_file(ok, "s0123456789"));
        for bad in [
            "/r/.sshmcp/spool/s0123456789",
            "/r/.sshmcp/spool/sOTHER/2026-1.out",
            "/r/.sshmcp/spool/s0123456789/../../../etc/passwd",
            "r/.sshmcp/spool/s0123456789/x",
            "/home/me/.ssh/id_ed25519",
        ] {
            assert!(!is_spool_file(Path::new(bad), "s0123456789"), "{bad}");
        }
    }

    #[test]
    fn dropping_the_files_removes_them() {
        let (_root, files) = files_with(b"x");
        let path = files.paths[0].clone();
        assert!(path.exists());
        drop(files);
        assert!(!path.exists());
    }
}
