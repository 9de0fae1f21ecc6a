//! Where the daemon's socket, lock, pidfile, state and logs live, and the checks that make a
//! runtime directory safe to trust.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::platform::MAX_SOCKET_PATH;

/// A local root must be absolute, without `..`, and neither `/` nor the home directory nor a
/// directory above it (`HOME`'s or the user database's home), however spelled: a local path
/// confined to such a root could still reach `~/.ssh`. The daemon refuses any other, and the
/// CLI's checks and suggestions say the same. A root that exists is compared as it resolves,
/// so `/home/me/.`, `/tmp/../home` or a link to the home directory is caught.
pub fn check_local_root(root: &Path) -> Result<(), String> {
    if !root.is_absolute() {
        return Err("the local root must be an absolute path".into());
    }
    if root
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return Err("the local root must not hold `..`".into());
    }
    let resolved = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let root = resolved(root);
    // The homes are found once: the user database may be a slow directory service, and
    // every call that names a local root comes here.
    static HOMES: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    let homes = HOMES.get_or_init(|| {
        let account = nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten()
            .map(|user| user.dir);
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .into_iter()
            .chain(account)
            .filter(|home| home.is_absolute())
            .map(|home| resolved(&home))
            .collect()
    });
    if root == Path::new("/") || homes.iter().any(|home| home.starts_with(&root)) {
        return Err(
            "the local root must not be /, the home directory or a directory above it".into(),
        );
    }
    Ok(())
}

/// The per-user runtime directory and the files in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimePaths {
    pub dir: PathBuf,
}

impl RuntimePaths {
    /// `SSHMCP_RUNTIME_DIR`, else the config file's `runtime-dir`, else `sshmcp` in the
    /// user's runtime base (see `platform::user_runtime_base`: `/run/user/UID` on Linux, the
    /// user's temporary directory on macOS), else `/tmp/sshmcp-$UID`. Never `XDG_RUNTIME_DIR`:
    /// a terminal has it and a GUI launcher or a bare-environment client often does not, and
    /// every client must find the one daemon.
    pub fn from_env() -> Self {
        Self::resolve(path_from_env("SSHMCP_RUNTIME_DIR"))
    }

    /// Like [`from_env`](Self::from_env) with an explicit override taking the place of the
    /// environment variable. Without one, the config file's `runtime-dir` comes next: a client
    /// must find the socket where a daemon configured there listens.
    ///
    /// Where the user's runtime base came since a daemon started in `/tmp/sshmcp-$UID` (a
    /// login made `/run/user/UID` after a daemon started without one), a daemon running
    /// there, or a record of sessions a daemon there left, is the one found: one daemon per
    /// user, whenever its clients came. Clients resolve again each time they connect.
    pub fn resolve(explicit: Option<PathBuf>) -> Self {
        let chosen = explicit
            .filter(|p| !p.as_os_str().is_empty())
            .or_else(|| ConfiguredDirs::read().runtime_dir);
        let uid = nix::unistd::getuid().as_raw();
        let given = chosen.is_some();
        let preferred = Self::choose(chosen, crate::platform::user_runtime_base(uid), uid);
        match given {
            true => preferred,
            false => preferred.or_running(Self::choose(None, None, uid)),
        }
    }

    /// This directory, unless it is unused (no daemon listens, no sessions recorded) and
    /// `fallback`, a private directory of this user's, is in use.
    fn or_running(self, fallback: Self) -> Self {
        let found_apart = self != fallback
            && !self.in_use()
            && check_private_dir(&fallback.dir).is_ok()
            && fallback.in_use();
        match found_apart {
            true => fallback,
            false => self,
        }
    }

    /// Whether a daemon listens here, or one left sessions recorded here for the next to
    /// take back (it was killed). Nothing is locked: a daemon starting meanwhile takes the
    /// pidfile's lock undisturbed.
    fn in_use(&self) -> bool {
        let listening = std::os::unix::net::UnixStream::connect(self.socket()).is_ok();
        listening
            || std::fs::read_to_string(self.record())
                .is_ok_and(|record| record.contains("\"session_id\""))
    }

    /// The choice itself: explicit, else `sshmcp` in the user's runtime base, else
    /// `/tmp/sshmcp-$UID`.
    fn choose(explicit: Option<PathBuf>, base: Option<PathBuf>, uid: u32) -> Self {
        let set = |p: &PathBuf| !p.as_os_str().is_empty();
        let dir = explicit
            .filter(set)
            .or_else(|| base.filter(set).map(|d| d.join("sshmcp")))
            .unwrap_or_else(|| PathBuf::from(format!("/tmp/sshmcp-{uid}")));
        Self { dir }
    }

    /// Refuses a runtime directory no client and daemon could share: a relative one (each
    /// process would take it from its own working directory; the daemon's is `/`), and one too
    /// long for Unix sockets (107 bytes; OpenSSH creates each master's socket under a
    /// temporary name 17 bytes longer than the final one). Checked before anything is made.
    pub fn check(&self) -> Result<(), String> {
        if !self.dir.is_absolute() {
            return Err(format!(
                "the runtime directory {} must be an absolute path",
                self.dir.display()
            ));
        }
        // `<dir>/m/<11-byte session id>.<16 random characters>`
        let longest = self.masters_dir().join("s0123456789").as_os_str().len() + 17;
        if longest > MAX_SOCKET_PATH {
            return Err(format!(
                "the runtime directory {} is too long for Unix sockets: at most {} bytes",
                self.dir.display(),
                self.dir.as_os_str().len() - (longest - MAX_SOCKET_PATH)
            ));
        }
        Ok(())
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("sshmcpd.sock")
    }

    /// Held (flock) by the running daemon for its whole life; holds its pid.
    /// The sessions a daemon keeps for the next one (its layout is the daemon's).
    pub fn record(&self) -> PathBuf {
        self.dir.join(RECORD_FILE)
    }

    pub fn pidfile(&self) -> PathBuf {
        self.dir.join("sshmcpd.pid")
    }

    /// Held by a client while it starts a daemon, so concurrent starters queue.
    pub fn start_lock(&self) -> PathBuf {
        self.dir.join("start.lock")
    }

    /// Taken by the askpass relay for as long as a prompt is shown: one prompt at a time.
    pub fn askpass_lock(&self) -> PathBuf {
        self.dir.join("askpass.lock")
    }

    /// Control sockets of the OpenSSH masters; kept short for the 108-byte socket path limit.
    pub fn masters_dir(&self) -> PathBuf {
        self.dir.join("m")
    }

    /// Creates the directory (0700) if needed and refuses one that another user could
    /// tamper with.
    pub fn ensure(&self) -> io::Result<()> {
        ensure_private_dir(&self.dir)
    }
}

/// What the daemon's pidfile says: its pid, and whether it is on its way out. The daemon
/// writes it, a new daemon and the CLI read it; this is the one place of its layout,
/// `PID\n` or `PID stopping\n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidfileText {
    pub pid: Option<u32>,
    pub stopping: bool,
}

impl PidfileText {
    const STOPPING: &str = "stopping";

    pub fn parse(text: &str) -> Self {
        let mut words = text.split_whitespace();
        Self {
            pid: words.next().and_then(|w| w.parse().ok()),
            stopping: words.next() == Some(Self::STOPPING),
        }
    }

    /// The pidfile's whole text for `pid`.
    pub fn render(pid: u32, stopping: bool) -> String {
        match stopping {
            true => format!("{pid} {}\n", Self::STOPPING),
            false => format!("{pid}\n"),
        }
    }
}

/// The daemon's log, in the state directory.
pub const LOG_FILE: &str = "sshmcpd.log";

/// The record of the sessions and what runs in them, in the runtime directory: what the next
/// daemon adopts.
const RECORD_FILE: &str = "sessions.json";

/// The daemon's state directory: `SSHMCP_STATE_DIR`, else the config file's `state-dir`, else
/// `$XDG_STATE_HOME/sshmcp` (`~/.local/state/sshmcp`).
pub fn state_dir_from_env() -> Option<PathBuf> {
    path_from_env("SSHMCP_STATE_DIR")
        .or_else(|| ConfiguredDirs::read().state_dir)
        .or_else(|| xdg_dir("XDG_STATE_HOME", ".local/state"))
}

/// The directories the config file sets, as every client reads them (the daemon reads the
/// whole file in its own settings).
#[derive(Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ConfiguredDirs {
    runtime_dir: Option<PathBuf>,
    state_dir: Option<PathBuf>,
}

impl ConfiguredDirs {
    /// From `SSHMCP_CONFIG`, else the default config file; nothing when absent or unreadable
    /// (the daemon reports a broken file; a client only looks for its socket).
    fn read() -> Self {
        config_file()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map(|text| Self::parse(&text))
            .unwrap_or_default()
    }

    fn parse(text: &str) -> Self {
        toml::from_str(text).unwrap_or_default()
    }
}

/// The daemon's default local root when nobody configured one: a dedicated folder under the
/// user's data directory, never `/` nor the bare home directory.
pub fn default_local_root() -> Option<PathBuf> {
    xdg_dir("XDG_DATA_HOME", ".local/share").map(|d| d.join("root"))
}

/// `$XDG_CONFIG_HOME/sshmcp/config.toml`.
/// The config file clients and a daemon started from this environment read:
/// `SSHMCP_CONFIG`, else [`default_config_file`] (which may not exist).
pub fn config_file() -> Option<PathBuf> {
    path_from_env("SSHMCP_CONFIG").or_else(default_config_file)
}

/// The path an environment variable names; an empty one counts as unset, in every client and
/// the daemon alike (a client's config may well hold `"SSHMCP_RUNTIME_DIR": ""`).
pub fn path_from_env(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

pub fn default_config_file() -> Option<PathBuf> {
    xdg_dir("XDG_CONFIG_HOME", ".config").map(|d| d.join("config.toml"))
}

/// sshmcp's directory of the XDG base directory layout, on macOS too: there the platform's
/// own folders would leave the daemon without a state directory (Apple has none) and put the
/// config file where the documentation does not say, so a person's policy would go unread.
fn xdg_dir(variable: &str, under_home: &str) -> Option<PathBuf> {
    let home = directories::BaseDirs::new().map(|dirs| dirs.home_dir().to_path_buf());
    xdg_dir_of(path_from_env(variable), home, under_home)
}

/// [`xdg_dir`] from the variable's value and the home directory: a relative value is
/// ignored, as the XDG specification asks.
fn xdg_dir_of(value: Option<PathBuf>, home: Option<PathBuf>, under_home: &str) -> Option<PathBuf> {
    value
        .filter(|dir| dir.is_absolute())
        .or_else(|| home.map(|home| home.join(under_home)))
        .map(|dir| dir.join("sshmcp"))
}

/// Creates `dir` with mode 0700 (and its parents), then checks that it is a real directory
/// (not a symlink), owned by us, and not readable or writable by anyone else.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    check_private_dir(dir)
}

/// The ownership and mode checks of [`ensure_private_dir`], without creating anything.
pub fn check_private_dir(dir: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(dir)?;
    let refuse = |why: &str| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("refusing {}: {why}", dir.display()),
        ))
    };
    if meta.file_type().is_symlink() {
        return refuse("it is a symlink");
    }
    if !meta.is_dir() {
        return refuse("it is not a directory");
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return refuse("it is owned by another user");
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return refuse("its mode lets other users in (want 0700)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::PidfileText;

    #[test]
    fn the_pidfile_reads_back_as_written() {
        for stopping in [false, true] {
            let text = PidfileText::render(4242, stopping);
            let read = PidfileText::parse(&text);
            assert_eq!(
                (read.pid, read.stopping),
                (Some(4242), stopping),
                "{text:?}"
            );
        }
        assert_eq!(PidfileText::parse("").pid, None);
        assert!(!PidfileText::parse("12 running").stopping);
    }

    use super::*;

    #[test]
    fn each_default_directory_is_the_xdg_one_on_every_platform() {
        let home = Some(PathBuf::from("/home/u"));
        let dir = |value: Option<&str>| {
            xdg_dir_of(value.map(PathBuf::from), home.clone(), ".local/state")
        };
        assert_eq!(
            dir(None),
            Some(PathBuf::from("/home/u/.local/state/sshmcp"))
        );
        assert_eq!(
            dir(Some("/xdg/state")),
            Some(PathBuf::from("/xdg/state/sshmcp"))
        );
        assert_eq!(
            dir(Some("relative")),
            Some(PathBuf::from("/home/u/.local/state/sshmcp"))
        );
        assert_eq!(xdg_dir_of(None, None, ".config"), None);
        // With a home directory, as every user has, each default exists (on macOS the
        // platform's folders once left the state directory out).
        assert!(state_dir_from_env().is_some());
        assert!(default_config_file().is_some_and(|f| f.ends_with("sshmcp/config.toml")));
        assert!(default_local_root().is_some_and(|r| r.ends_with("sshmcp/root")));
    }

    #[test]
    fn a_local_root_is_absolute_and_neither_root_nor_home_however_spelled() {
        assert!(check_local_root(Path::new("relative")).is_err());
        assert!(check_local_root(Path::new("/")).is_err());
        assert!(check_local_root(Path::new("/srv/agent")).is_ok());
        assert!(check_local_root(Path::new("/srv/../srv/agent")).is_err());
        let home = nix::unistd::User::from_uid(nix::unistd::getuid())
            .expect("user database")
            .expect("this user")
            .dir;
        let link = std::env::temp_dir().join(format!("sshmcp-root-link-{}", std::process::id()));
        std::os::unix::fs::symlink(&home, &link).expect("link to home");
        let spellings = [
            home.clone(),
            home.join("."),
            PathBuf::from(format!("{}/", home.display())),
            link.clone(),
        ];
        let above = home.parent().expect("home has a parent").to_path_buf();
        let refused: Vec<bool> = spellings
            .iter()
            .chain([&above])
            .map(|root| check_local_root(root).is_err())
            .collect();
        std::fs::remove_file(&link).expect("link removed");
        assert_eq!(refused, [true; 5], "{spellings:?}, {above:?}");
        assert!(check_local_root(&home.join("agent-files")).is_ok());
    }

    #[test]
    fn runtime_dir_choice() {
        let base = Some(PathBuf::from("/run/user/7"));
        let p = RuntimePaths::choose(Some("/x/y".into()), base.clone(), 7);
        assert_eq!(p.socket(), PathBuf::from("/x/y/sshmcpd.sock"));
        assert_eq!(
            RuntimePaths::choose(None, base, 7).dir,
            PathBuf::from("/run/user/7/sshmcp")
        );
        assert_eq!(
            RuntimePaths::choose(None, None, 7).dir,
            PathBuf::from("/tmp/sshmcp-7")
        );
        let empty = Some(PathBuf::new());
        assert_eq!(
            RuntimePaths::choose(empty.clone(), empty, 7).dir,
            PathBuf::from("/tmp/sshmcp-7")
        );
    }

    /// A daemon that runs in the fallback directory is found there while none runs in the
    /// preferred one; a fallback another user could have made is never taken.
    #[test]
    fn a_daemon_running_in_the_fallback_directory_is_found() {
        let top = tempfile::tempdir().unwrap();
        let dir = |name: &str| {
            let d = top.path().join(name);
            ensure_private_dir(&d).unwrap();
            RuntimePaths { dir: d }
        };
        let (preferred, fallback) = (dir("run"), dir("tmp"));
        assert_eq!(preferred.clone().or_running(fallback.clone()), preferred);
        let listening = std::os::unix::net::UnixListener::bind(fallback.socket()).unwrap();
        assert_eq!(preferred.clone().or_running(fallback.clone()), fallback);
        // Not when it is not private.
        std::fs::set_permissions(&fallback.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(preferred.clone().or_running(fallback.clone()), preferred);
        std::fs::set_permissions(&fallback.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        // Nor when one runs in the preferred directory too.
        let other = std::os::unix::net::UnixListener::bind(preferred.socket()).unwrap();
        assert_eq!(preferred.clone().or_running(fallback.clone()), preferred);
        drop((other, listening));
        std::fs::remove_file(preferred.socket()).unwrap();
        std::fs::remove_file(fallback.socket()).unwrap();
        assert_eq!(preferred.clone().or_running(fallback.clone()), preferred);
        // A killed daemon's record of sessions, for the next one to take back, counts too;
        // an emptied one does not.
        std::fs::write(fallback.record(), r#"{"version":1,"sessions":[]}"#).unwrap();
        assert_eq!(preferred.clone().or_running(fallback.clone()), preferred);
        let kept = r#"{"version":1,"sessions":[{"session_id":"s0123456789"}]}"#;
        std::fs::write(fallback.record(), kept).unwrap();
        assert_eq!(preferred.clone().or_running(fallback.clone()), fallback);
    }

    #[test]
    fn configured_dirs_come_from_the_file_among_other_keys() {
        let dirs = ConfiguredDirs::parse("max-sessions = 3\nruntime-dir = \"/r\"\n");
        assert_eq!(dirs.runtime_dir, Some(PathBuf::from("/r")));
        assert_eq!(dirs.state_dir, None);
        assert_eq!(
            ConfiguredDirs::parse("not toml ["),
            ConfiguredDirs::default()
        );
    }

    #[test]
    fn runtime_dir_length_edge() {
        // "/m/s0123456789" is 14 bytes and OpenSSH adds 17 (76 bytes on Linux, 72 on macOS).
        let most = MAX_SOCKET_PATH - 14 - 17;
        let fits = RuntimePaths {
            dir: PathBuf::from(format!("/{}", "a".repeat(most - 1))),
        };
        assert!(fits.check().is_ok());
        let over = RuntimePaths {
            dir: PathBuf::from(format!("/{}", "a".repeat(most))),
        };
        let err = over.check().unwrap_err();
        assert!(err.contains(&format!("at most {most} bytes")), "{err}");
        let relative = RuntimePaths {
            dir: PathBuf::from("relative/dir"),
        };
        assert!(relative.check().unwrap_err().contains("absolute"));
    }

    #[test]
    fn private_dir_checks() {
        let base = std::env::temp_dir().join(format!("sshmcp-paths-{}", std::process::id()));
        let dir = base.join("rt");
        ensure_private_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(check_private_dir(&dir).is_err());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = base.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(check_private_dir(&link).is_err());
        assert!(check_private_dir(&dir).is_ok());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
