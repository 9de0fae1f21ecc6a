//! Which rsync this machine's transfers run: the first rsync 3.1 or later on `PATH`, else in
//! the folders package managers install into, which the bare `PATH` of a GUI launcher leaves
//! out. Transfers need 3.1 (`--info=progress2`; `--append-verify` and `-s` came with 3.0),
//! and macOS ships openrsync or rsync 2.6.9 as `/usr/bin/rsync`.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The oldest rsync whose options transfers use.
const OLDEST: (u32, u32) = (3, 1);

/// How long an rsync may take to state its version: one that hangs (a broken wrapper) is
/// passed over, not waited for by every transfer.
const VERSION_LIMIT: Duration = Duration::from_secs(5);

/// Where Homebrew (Apple silicon, then Intel) and MacPorts put rsync, looked at after `PATH`.
const PACKAGE_DIRS: [&str; 3] = ["/opt/homebrew/bin", "/usr/local/bin", "/opt/local/bin"];

/// What to do when no rsync fits.
pub const INSTALL: &str = "install rsync 3.1 or later (Debian, Ubuntu: apt-get install rsync; \
                       macOS: brew install rsync)";

/// An rsync transfers can run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rsync {
    pub path: PathBuf,
    /// The first line of its `--version`.
    pub version: String,
}

/// Why no rsync fits: each one found, too old or stating no version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoRsync {
    unfit: Vec<String>,
}

impl NoRsync {
    /// What was found, without what to do ([`INSTALL`]).
    pub fn what(&self) -> String {
        match self.unfit.is_empty() {
            true => "no rsync on this machine".into(),
            false => format!(
                "no rsync 3.1 or later on this machine, only {}",
                self.unfit.join(", ")
            ),
        }
    }
}

impl std::fmt::Display for NoRsync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {INSTALL}", self.what())
    }
}

/// The rsync transfers run, or why there is none.
pub fn find() -> Result<Rsync, NoRsync> {
    let mut unfit = Vec::new();
    for path in candidates(std::env::var_os("PATH").as_deref()) {
        // One that cannot run, or hangs, states no version either.
        let text = version_text(&path, VERSION_LIMIT).unwrap_or_default();
        match version_of(&text) {
            Some(version) if version >= OLDEST => {
                let version = text.lines().next().unwrap_or("").trim().to_string();
                return Ok(Rsync { path, version });
            }
            Some((major, minor)) => unfit.push(format!("{} ({major}.{minor})", path.display())),
            None => unfit.push(format!("{} (states no version)", path.display())),
        }
    }
    Err(NoRsync { unfit })
}

/// What `program --version` prints by its end, or within `limit` (then little or nothing),
/// or `None` when it cannot run. It runs in a process group of its own, killed whole once it
/// answered or the limit passed: a wrapper's child that holds the pipe (or hangs) goes with
/// it.
fn version_text(program: &Path, limit: Duration) -> Option<String> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .ok()?;
    let group = nix::unistd::Pid::from_raw(i32::try_from(child.id()).ok()?);
    // Unreaped, the leader's pid (the group's id) is still its own: the kill cannot reach
    // another process group.
    let end = |child: &mut std::process::Child| {
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait();
    };
    let Some(mut stdout) = child.stdout.take() else {
        end(&mut child);
        return None;
    };
    let (sender, said) = std::sync::mpsc::channel();
    // A reader of its own bounds the wait; it ends once the group is gone and the pipe with it.
    let reader = std::thread::Builder::new().spawn(move || {
        let mut text = Vec::new();
        let _ = stdout.read_to_end(&mut text);
        let _ = sender.send(text);
    });
    if reader.is_err() {
        end(&mut child);
        return None;
    }
    let text = said.recv_timeout(limit).ok();
    end(&mut child);
    // What it printed before the end, also when a child of its kept the pipe open.
    let text = text.or_else(|| said.recv_timeout(Duration::from_millis(500)).ok())?;
    Some(String::from_utf8_lossy(&text).into_owned())
}

/// Each `rsync` to try, in order and once each: in `PATH`'s directories, then in
/// [`PACKAGE_DIRS`]. Relative directories are skipped: what they name depends on where the
/// daemon happens to run.
fn candidates(path_var: Option<&OsStr>) -> Vec<PathBuf> {
    let listed = path_var.map(std::env::split_paths).into_iter().flatten();
    let mut all: Vec<PathBuf> = Vec::new();
    for dir in listed.chain(PACKAGE_DIRS.iter().map(PathBuf::from)) {
        let program = dir.join("rsync");
        if dir.is_absolute() && !all.contains(&program) && is_executable(&program) {
            all.push(program);
        }
    }
    all
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The major and minor version `rsync --version` states: `rsync  version 3.2.7  protocol
/// version 31` (`v3.2.4` from git), or openrsync's `rsync version 2.6.9 compatible`.
fn version_of(text: &str) -> Option<(u32, u32)> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        words.find(|word| *word == "rsync")?;
        if words.next()? != "version" {
            return None;
        }
        // Builds from git say `v3.2.4`.
        let number = words.next()?;
        let number = number.strip_prefix('v').unwrap_or(number);
        let mut numbers = number.split('.').map(|n| n.parse::<u32>().ok());
        Some((numbers.next()??, numbers.next()??))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_from_each_rsync_a_machine_may_have() {
        let gnu = "rsync  version 3.2.7  protocol version 31\nCopyright (C) 1996-2022\n";
        assert_eq!(version_of(gnu), Some((3, 2)));
        let from_git = "rsync  version v3.2.4  protocol version 31";
        assert_eq!(version_of(from_git), Some((3, 2)));
        assert_eq!(version_of("rsync  version 3.x  protocol version 31"), None);
        assert_eq!(
            version_of("rsync  version 3.1.0  protocol version 31"),
            Some((3, 1))
        );
        let samba = "rsync  version 2.6.9  protocol version 29\n";
        assert_eq!(version_of(samba), Some((2, 6)));
        let openrsync = "openrsync: protocol version 29\nrsync version 2.6.9 compatible\n";
        assert_eq!(version_of(openrsync), Some((2, 6)));
        assert_eq!(version_of("rsync: unknown option\n"), None);
        assert_eq!(version_of(""), None);
        assert!(Some((3, 0)) < Some(OLDEST) && Some((3, 1)) >= Some(OLDEST));
        assert!(Some((10, 0)) > Some(OLDEST));
    }

    #[test]
    fn an_rsync_that_hangs_is_passed_over_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let version = "echo 'rsync  version 3.2.7  protocol version 31'";
        let script = |name: &str, body: &str| {
            let program = dir.path().join(name);
            std::fs::write(&program, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(
                &program,
                std::os::unix::fs::PermissionsExt::from_mode(0o755),
            )
            .unwrap();
            program
        };
        let hangs = script("hangs", "exec sleep 300");
        let answers = script("answers", version);
        // A child of its keeps the pipe open after the version: it goes with the group.
        let holds = script("holds", &format!("sleep 300 & {version}"));
        let said = version_text(&hangs, Duration::from_millis(300));
        assert_eq!(said.as_deref().and_then(version_of), None);
        let text = version_text(&answers, Duration::from_secs(10)).expect("its version");
        assert_eq!(version_of(&text), Some((3, 2)));
        let text = version_text(&holds, Duration::from_secs(1)).expect("its version");
        assert_eq!(version_of(&text), Some((3, 2)));
        assert_eq!(
            version_text(&dir.path().join("missing"), Duration::from_secs(1)),
            None
        );
    }

    #[test]
    fn candidates_follow_path_then_package_folders_once_each_absolute_only() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("a"), dir.path().join("b"));
        for bin in [&first, &second] {
            std::fs::create_dir(bin).unwrap();
            let rsync = bin.join("rsync");
            std::fs::write(&rsync, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&rsync, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
        // Not executable: skipped.
        std::fs::create_dir(dir.path().join("c")).unwrap();
        std::fs::write(dir.path().join("c/rsync"), "").unwrap();
        let path = std::env::join_paths([
            second.clone(),
            PathBuf::from("relative"),
            dir.path().join("c"),
            first.clone(),
            second.clone(),
        ])
        .unwrap();
        let found = candidates(Some(&path));
        assert_eq!(found[..2], [second.join("rsync"), first.join("rsync")]);
        let rest: Vec<_> = PACKAGE_DIRS
            .iter()
            .map(|d| Path::new(d).join("rsync"))
            .filter(|p| is_executable(p))
            .collect();
        assert_eq!(found[2..], rest[..]);
    }
}
