//! Small disks for tests of a full disk: a tmpfs mounted for the length of a test (root only).

use std::path::{Path, PathBuf};

/// A tmpfs unmounted however the test ends; the directory it was mounted on goes too when
/// the mount made it.
pub struct SmallDisk {
    dir: PathBuf,
    made_dir: bool,
}

impl SmallDisk {
    /// A 1 MiB tmpfs at `dir`, writable by everyone (sticky, as `/tmp`), so a remote test user
    /// can fill it too.
    pub fn mount(dir: &Path) -> Self {
        let made_dir = !dir.exists();
        std::fs::create_dir_all(dir).unwrap();
        crate::process::run(
            std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=1m,mode=1777", "tmpfs"])
                .arg(dir),
            "util-linux",
        );
        Self {
            dir: dir.to_path_buf(),
            made_dir,
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let unmounted = std::process::Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if unmounted && self.made_dir {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}
