//! Complete copies of a command's streams under the local root's private directory, for
//! `spool_output`.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes spool files created in the same millisecond.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// One stream's spool file.
pub struct Spool {
    path: PathBuf,
    out: BufWriter<File>,
}

impl Spool {
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)
    }

    /// Removes the file: a run that gives no output leaves no spool behind.
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.path);
    }

    /// Flushes and returns the absolute path.
    pub fn finish(mut self) -> io::Result<String> {
        self.out.flush()?;
        Ok(self.path.to_string_lossy().into_owned())
    }
}

/// Creates the stdout and stderr spool files of one command under
/// `<root>/.sshmcp/spool/<session>/`.
pub fn create_pair(root: &Path, session_id: &str) -> io::Result<(Spool, Spool)> {
    let private = root.join(".sshmcp");
    sshmcp_proto::paths::ensure_private_dir(&private)?;
    let dir = private.join("spool").join(session_id);
    std::fs::create_dir_all(&dir)?;
    let stamp = sshmcp_proto::time::now_rfc3339().replace([':', '.'], "");
    let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let base = format!("{stamp}-{}-{seq}", std::process::id());
    let open = |ext: &str| -> io::Result<Spool> {
        let path = dir.join(format!("{base}.{ext}"));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        Ok(Spool {
            path,
            out: BufWriter::new(file),
        })
    };
    Ok((open("stdout")?, open("stderr")?))
}
