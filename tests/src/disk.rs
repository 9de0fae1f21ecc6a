//! Small disks for tests of a full disk: a tmpfs mounted for the length of a test (root only).

use std::path::{Path, PathBuf};

/// A tmpfs unmounted however the test ends.
pub struct SmallDisk(PathBuf);

impl SmallDisk {
    /// A 1 MiB tmpfs at `dir`, writable by everyone (sticky, as `/tmp`), so a remote test user
    /// can fill it too.
    pub fn mount(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        crate::process::run(
            std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=1m,mode=1777", "tmpfs"])
                .arg(dir),
            "util-linux",
        );
        Self(dir.to_path_buf())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}
