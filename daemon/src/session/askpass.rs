//! The askpass route for prompts, and the one-at-a-time rule for them.
//!
//! Every master start points `SSH_ASKPASS` at this daemon's own binary, which ssh then runs
//! for each prompt:
//! - When the user's session offers a usable route (an askpass program and a display, or an
//!   explicit `SSH_ASKPASS_REQUIRE=force`), the binary is a *relay*: it takes a daemon-wide
//!   lock and becomes the user's askpass program, keeping the lock for as long as the prompt
//!   lives. So each passphrase dialog or key touch belongs to exactly one connect, while
//!   connects that need no prompt, and slow or unreachable hosts, never wait for another.
//! - When there is none, the binary is a *probe*: it records that a prompt was needed and
//!   declines, so the failure can be named exactly (ssh itself says nothing above debug level
//!   when it cannot open a tty).

use std::ffi::OsString;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// Set for the probe: where to record that a prompt was asked for.
const PROBE_MARKER_VAR: &str = "SSHMCP_ASKPASS_PROBE_MARKER";
/// Set for the relay: the user's askpass program.
const RELAY_PROGRAM_VAR: &str = "SSHMCP_ASKPASS_PROGRAM";
/// Set for the relay: the lock file every prompt of this daemon takes.
const RELAY_LOCK_VAR: &str = "SSHMCP_ASKPASS_LOCK";

/// Askpass programs OpenSSH falls back to when `SSH_ASKPASS` is unset.
const DEFAULT_ASKPASS: [&str; 2] = ["/usr/bin/ssh-askpass", "/usr/lib/ssh/ssh-askpass"];

/// When ssh started this process as its askpass program: runs the probe or the relay and
/// returns the exit status (the relay returns only when it could not start the program).
/// Call first thing in `main`.
pub fn run_if_requested() -> Option<u8> {
    if let Some(marker) = std::env::var_os(PROBE_MARKER_VAR) {
        let _ = std::fs::write(PathBuf::from(marker), b"prompt requested\n");
        return Some(1);
    }
    let program = std::env::var_os(RELAY_PROGRAM_VAR)?;
    let lock = std::env::var_os(RELAY_LOCK_VAR)?;
    match relay(Path::new(&program), Path::new(&lock)) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("sshmcpd askpass relay: {e}");
            Some(1)
        }
    }
}

/// Takes the prompt lock, then becomes the user's askpass program with ssh's arguments. The
/// lock's descriptor is kept across the exec, so the lock lasts exactly as long as the
/// prompt (ssh ends a notification prompt by signalling it; that ends the lock too).
fn relay(program: &Path, lock: &Path) -> std::io::Result<std::convert::Infallible> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(lock)?;
    file.lock()?;
    nix::fcntl::fcntl(
        &file,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )?;
    let error = std::process::Command::new(program)
        .args(std::env::args_os().skip(1))
        .env_remove(RELAY_PROGRAM_VAR)
        .env_remove(RELAY_LOCK_VAR)
        .exec();
    drop(file);
    Err(error)
}

fn set(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty())
}

/// The user's askpass program, when their environment lets OpenSSH show a prompt without a
/// terminal.
fn usable_program() -> Option<OsString> {
    let program = std::env::var_os("SSH_ASKPASS")
        .filter(|v| !v.is_empty())
        .or_else(|| {
            DEFAULT_ASKPASS
                .iter()
                .find(|p| Path::new(p).exists())
                .map(OsString::from)
        })?;
    let forced = std::env::var("SSH_ASKPASS_REQUIRE").is_ok_and(|v| v == "force");
    (forced || set("DISPLAY") || set("WAYLAND_DISPLAY")).then_some(program)
}

/// The askpass environment of one master start: the relay in front of the user's program,
/// or the probe recording into `marker` when the user has none. A user who asked ssh never
/// to use askpass gets nothing added.
pub fn env(marker: &Path, lock: &Path) -> Vec<(OsString, OsString)> {
    if std::env::var("SSH_ASKPASS_REQUIRE").is_ok_and(|v| v == "never") {
        return Vec::new();
    }
    // This very binary, even when an upgrade replaced its file since the daemon started (the
    // path would then name a deleted file, or another version).
    let me = crate::platform::own_binary()
        .map(PathBuf::into_os_string)
        .unwrap_or_default();
    let mut vars = vec![
        ("SSH_ASKPASS".into(), me),
        ("SSH_ASKPASS_REQUIRE".into(), "force".into()),
    ];
    match usable_program() {
        Some(program) => {
            vars.push((RELAY_PROGRAM_VAR.into(), program));
            vars.push((RELAY_LOCK_VAR.into(), lock.as_os_str().to_owned()));
        }
        None => vars.push((PROBE_MARKER_VAR.into(), marker.as_os_str().to_owned())),
    }
    vars
}
