//! The askpass route for prompts. When the user's session offers a usable one (a display and
//! an askpass program, or an explicit `SSH_ASKPASS_REQUIRE=force`), OpenSSH uses it as usual.
//! When it does not, the daemon points `SSH_ASKPASS` at itself in probe mode: the probe only
//! records that a prompt was needed and declines, so the failure can be named exactly (ssh
//! itself says nothing above debug level when it cannot open a tty).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Set in the environment of the probe: where to record that a prompt was asked for.
const PROBE_MARKER_VAR: &str = "SSHMCP_ASKPASS_PROBE_MARKER";

/// Askpass programs OpenSSH falls back to when `SSH_ASKPASS` is unset.
const DEFAULT_ASKPASS: [&str; 2] = ["/usr/bin/ssh-askpass", "/usr/lib/ssh/ssh-askpass"];

/// When this process was started as the askpass probe: records the prompt and returns the
/// exit status (1: the prompt is declined). Call first thing in `main`.
pub fn run_probe_if_requested() -> Option<u8> {
    let marker = std::env::var_os(PROBE_MARKER_VAR)?;
    let _ = std::fs::write(PathBuf::from(marker), b"prompt requested\n");
    Some(1)
}

fn set(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty())
}

/// Whether the user's environment lets OpenSSH show a prompt without a terminal.
pub fn usable_route() -> bool {
    let has_program = set("SSH_ASKPASS") || DEFAULT_ASKPASS.iter().any(|p| Path::new(p).exists());
    let forced = std::env::var("SSH_ASKPASS_REQUIRE").is_ok_and(|v| v == "force");
    has_program && (forced || set("DISPLAY") || set("WAYLAND_DISPLAY"))
}

/// The environment to add to a master's start when there is no usable route: every prompt
/// goes to the probe, which records it in `marker`.
pub fn probe_env(marker: &Path) -> Vec<(OsString, OsString)> {
    let me = std::env::current_exe()
        .map(PathBuf::into_os_string)
        .unwrap_or_default();
    vec![
        ("SSH_ASKPASS".into(), me),
        ("SSH_ASKPASS_REQUIRE".into(), "force".into()),
        (PROBE_MARKER_VAR.into(), marker.as_os_str().to_owned()),
    ]
}
