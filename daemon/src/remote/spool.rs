//! Complete copies of a command's streams under the local root's private directory, for
//! `spool_output`, and the removal of those a killed daemon left half-written.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes spool files created in the same millisecond.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// The name's ending while no answer names the file yet: the daemon that writes it removes it
/// if the call fails, and a daemon killed meanwhile cannot, so the next one does (see
/// [`remove_orphans`]).
const UNCLAIMED: &str = ".part";

/// One stream's spool file, bounded by the daemon's `max-spool-bytes` so a command that
/// prints without end cannot fill the local disk. Dropped without [`Spool::finish`] (the call
/// failed, was cancelled, or never ran), it removes its file, unless it was
/// [`retained`](Spool::retained). Written without a buffer: what was written can be read
/// while the command runs (each write is a whole chunk read from the master already).
pub struct Spool {
    path: PathBuf,
    out: File,
    /// Bytes the file may still take.
    room: u64,
    /// Whether bytes were dropped at the cap.
    truncated: bool,
    /// Set by `finish`: the file is an answer's now.
    kept: bool,
    /// Set by `retained`: a failed write (a full disk) ends the copy, not the command, whose
    /// handle reports its output incomplete.
    best_effort: bool,
}

impl Drop for Spool {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A finished spool file.
#[derive(Debug)]
pub struct Spooled {
    /// Absolute path.
    pub path: String,
    /// True when the file stopped at the cap: it holds the stream's first bytes only.
    pub truncated: bool,
}

impl Spool {
    /// Writes what fits under the cap; drops (and records) the rest. Says how many bytes it
    /// kept.
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let fits = bytes
            .len()
            .min(usize::try_from(self.room).unwrap_or(usize::MAX));
        self.truncated |= fits < bytes.len();
        self.room -= fits as u64;
        match self.out.write_all(&bytes[..fits]) {
            Ok(()) => Ok(fits),
            Err(e) if self.best_effort => {
                tracing::warn!(path = %self.path.display(), "output file write failed, the rest is dropped: {e}");
                self.room = 0;
                self.truncated = true;
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file stays whatever becomes of the run (its owner removes it), and a failed write
    /// only ends the copy.
    pub fn retained(mut self) -> io::Result<Self> {
        self.claim()?;
        self.best_effort = true;
        Ok(self)
    }

    /// Flushes; returns the absolute path and whether the cap was reached.
    pub fn finish(mut self) -> io::Result<Spooled> {
        self.out.flush()?;
        if !self.kept {
            self.claim()?;
        }
        Ok(Spooled {
            path: self.path.to_string_lossy().into_owned(),
            truncated: self.truncated,
        })
    }

    /// Gives the file its final name, which it keeps (the open file is written on).
    fn claim(&mut self) -> io::Result<()> {
        let claimed = self.path.with_extension("");
        std::fs::rename(&self.path, &claimed)?;
        self.path = claimed;
        self.kept = true;
        Ok(())
    }
}

/// Removes the unclaimed spool files, under every session's directory of `spools`, of daemons
/// that no longer run: a daemon killed during a call left them, up to the cap a stream. Once
/// per directory in a daemon's life: only a daemon before this one can have left them.
fn remove_orphans(spools: &Path) {
    static SWEPT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut swept = SWEPT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if swept.iter().any(|done| done == spools) {
        return;
    }
    swept.push(spools.to_path_buf());
    drop(swept);
    let Ok(sessions) = std::fs::read_dir(spools) else {
        return;
    };
    for file in sessions
        .flatten()
        .filter_map(|session| std::fs::read_dir(session.path()).ok())
        .flatten()
        .flatten()
    {
        let name = file.file_name();
        let writer = name
            .to_str()
            .and_then(|n| n.strip_suffix(UNCLAIMED))
            .and_then(writer_pid);
        if writer.is_some_and(|pid| crate::local_process::ProcessId::of(pid).is_none()) {
            let _ = std::fs::remove_file(file.path());
        }
    }
}

/// The pid of the daemon that named a spool file `<stamp>-<pid>-<seq>.<stream>`.
fn writer_pid(name: &str) -> Option<u32> {
    let mut fields = name.rsplit('-');
    fields.next()?;
    fields.next()?.parse().ok()
}

/// Creates the stdout and stderr spool files of one command under
/// `<root>/.sshmcp/spool/<session>/`, each holding at most `cap` bytes.
pub fn create_pair(root: &Path, session_id: &str, cap: u64) -> io::Result<(Spool, Spool)> {
    let private = root.join(".sshmcp");
    sshmcp_local::paths::ensure_private_dir(&private)?;
    let spools = private.join("spool");
    own_dir(&spools)?;
    remove_orphans(&spools);
    let dir = spools.join(session_id);
    own_dir(&dir)?;
    let stamp = sshmcp_proto::time::now_rfc3339().replace([':', '.'], "");
    let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let base = format!("{stamp}-{}-{seq}", std::process::id());
    let open = |ext: &str| -> io::Result<Spool> {
        let path = dir.join(format!("{base}.{ext}{UNCLAIMED}"));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        Ok(Spool {
            path,
            out: file,
            room: cap,
            truncated: false,
            kept: false,
            best_effort: false,
        })
    };
    Ok((open("stdout")?, open("stderr")?))
}

/// A directory of the spool inside the private `.sshmcp`, made (0700) if missing, and refused
/// as every private directory is when it is a link or another user's: files written through
/// it would land outside the local root. Spools made before this check are 0755 under their
/// 0700 parent; they are tightened, not refused.
fn own_dir(dir: &Path) -> io::Result<()> {
    if let Ok(meta) = std::fs::symlink_metadata(dir)
        && meta.is_dir()
        && meta.mode() & 0o077 != 0
    {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    sshmcp_local::paths::ensure_private_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::DirBuilderExt as _;

    #[test]
    fn the_cap_keeps_the_first_bytes_exactly_at_and_one_past_it() {
        let root = tempfile::tempdir().unwrap();
        let (mut at, mut past) = create_pair(root.path(), "s1", 10).unwrap();
        at.write(b"01234").unwrap();
        at.write(b"56789").unwrap();
        past.write(b"0123456789A").unwrap();
        past.write(b"more").unwrap();
        let (at, past) = (at.finish().unwrap(), past.finish().unwrap());
        assert!(!at.truncated && past.truncated);
        assert_eq!(std::fs::read(&at.path).unwrap(), b"0123456789");
        assert_eq!(std::fs::read(&past.path).unwrap(), b"0123456789");
    }

    #[test]
    fn a_dead_daemons_unclaimed_files_go_at_the_first_spool_the_rest_stay() {
        let root = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let old = root.path().join(".sshmcp/spool/s4");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&old)
            .unwrap();
        let orphan = old.join(format!("2026-12-06T004709214Z-{dead}-7.stdout.part"));
        let mine = old.join(format!(
            "2026-12-06T004709214Z-{}-7.stdout.part",
            std::process::id()
        ));
        let odd = old.join("notes-x.part");
        for file in [&orphan, &mine, &odd] {
            std::fs::write(file, "half").unwrap();
        }
        let (claimed, live) = create_pair(root.path(), "s3", 10).unwrap();
        let claimed = claimed.finish().unwrap();
        assert!(!orphan.exists(), "a dead daemon's unclaimed file went");
        assert!(odd.exists(), "a name not of a spool's form stays");
        assert!(mine.exists(), "this daemon's unclaimed file stays");
        assert!(live.path().exists(), "this daemon's unclaimed file stays");
        assert!(Path::new(&claimed.path).exists(), "a claimed file stays");
        assert!(!claimed.path.ends_with(UNCLAIMED));
    }

    #[test]
    fn an_unfinished_spool_leaves_no_file() {
        let root = tempfile::tempdir().unwrap();
        let (out, err) = create_pair(root.path(), "s2", 10).unwrap();
        let dir = root.path().join(".sshmcp/spool/s2");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
        drop((out, err));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    }

    #[test]
    fn a_spool_directory_that_is_a_link_is_refused_and_an_older_open_one_tightened() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let private = root.path().join(".sshmcp");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), private.join("spool")).unwrap();
        let refused = create_pair(root.path(), "s3", 10).err().expect("refused");
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied, "{refused}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

        std::fs::remove_file(private.join("spool")).unwrap();
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(private.join("spool"))
            .unwrap();
        std::fs::set_permissions(
            private.join("spool"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        create_pair(root.path(), "s3", 10).unwrap();
        for dir in ["spool", "spool/s3"] {
            let mode = std::fs::metadata(private.join(dir)).unwrap().mode() & 0o777;
            assert_eq!(mode, 0o700, "{dir}");
        }
    }
}
