//! The daemon's own log file: private (0600), appended to, and rotated by size, so a daemon
//! that runs for months with debug logging on keeps a bounded amount of disk. The current
//! file and one generation before it (`daemon.log.1`) are kept. `sshmcp daemon logs -f` reads
//! a file that shrank from its start again.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// The size past which the log starts afresh, its old content moved to `<log>.1`.
pub const ROTATE_BYTES: u64 = 10 * 1024 * 1024;

/// The log as a writer (for `tracing_appender::non_blocking`, which calls it from one thread).
pub struct RotatingLog {
    path: PathBuf,
    file: std::fs::File,
    len: u64,
    limit: u64,
}

impl RotatingLog {
    /// Opens `path` for appending, private to the user even when it existed wider.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        Self::with_limit(path, ROTATE_BYTES)
    }

    fn with_limit(path: &Path, limit: u64) -> std::io::Result<Self> {
        let (file, len) = open_private(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            len,
            limit,
        })
    }

    /// The generation before the current file.
    pub fn previous(path: &Path) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(".1");
        PathBuf::from(name)
    }

    /// Moves the current file to `<log>.1` (replacing the one there) and starts a new one.
    fn rotate(&mut self) -> std::io::Result<()> {
        std::fs::rename(&self.path, Self::previous(&self.path))?;
        (self.file, self.len) = open_private(&self.path)?;
        Ok(())
    }
}

impl Write for RotatingLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // A record that would pass the limit goes into a fresh file; a log that cannot be
        // rotated (its directory read-only) goes on growing rather than losing lines.
        if self.len > 0 && self.len + buf.len() as u64 > self.limit {
            let _ = self.rotate();
        }
        let n = self.file.write(buf)?;
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Opens `path` for appending (not through a symlink), private to the user even when it
/// existed wider; with its size. The daemon's log and the audit trail both are.
pub fn open_private(path: &Path) -> std::io::Result<(std::fs::File, u64)> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    let meta = file.metadata()?;
    if meta.permissions().mode() & 0o777 != 0o600 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok((file, meta.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rotates_at_its_limit_keeping_one_generation_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.log");
        std::fs::write(&path, "old\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut log = RotatingLog::with_limit(&path, 10).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        log.write_all(b"12345\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n12345\n");
        log.write_all(b"abcdef\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "abcdef\n");
        let previous = RotatingLog::previous(&path);
        assert_eq!(std::fs::read_to_string(&previous).unwrap(), "old\n12345\n");
        log.write_all(b"ghijkl\n").unwrap();
        assert_eq!(std::fs::read_to_string(&previous).unwrap(), "abcdef\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "ghijkl\n");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&previous), 0o600);
    }
}
