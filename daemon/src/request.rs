//! Checks of a command request (`exec`, `sudo_exec`, `command_start`, `task_launch`) against
//! the contract's limits, before anything runs.

use std::path::PathBuf;
use std::time::Duration;

use sshmcp_local::paths::check_local_root;
use sshmcp_proto::command::{MAX_HANDOFF_SECS, MIN_HANDOFF_SECS};
use sshmcp_proto::exec::Handoff;
use sshmcp_proto::limits::{
    DEFAULT_TIMEOUT_SECS, MAX_COMMAND_BYTES, MAX_TIMEOUT_SECS, MIN_TIMEOUT_SECS,
};
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::config::Settings;

/// The command text: at most [`MAX_COMMAND_BYTES`], no NUL (a shell cannot carry one).
pub fn check_command(command: &str) -> Result<(), DaemonError> {
    if command.len() > MAX_COMMAND_BYTES {
        return Err(DaemonError::new(
            ErrorCode::InvalidCommand,
            format!("command is longer than {MAX_COMMAND_BYTES} bytes"),
        ));
    }
    // What the shell takes for blanks: a command of those alone is none.
    if command.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\n')) {
        return Err(DaemonError::new(
            ErrorCode::InvalidCommand,
            "command is empty: give the shell text to run",
        ));
    }
    if command.contains('\0') {
        return Err(DaemonError::new(
            ErrorCode::InvalidCommand,
            "command contains a NUL byte",
        ));
    }
    Ok(())
}

/// The timeout in force: the default when absent, else within 0.1..=86400 seconds.
pub fn check_timeout(timeout: Option<f64>) -> Result<Duration, DaemonError> {
    let secs = timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
    if !secs.is_finite() || !(MIN_TIMEOUT_SECS..=MAX_TIMEOUT_SECS).contains(&secs) {
        return Err(DaemonError::invalid_arguments(format!(
            "timeout must be between {MIN_TIMEOUT_SECS} and {MAX_TIMEOUT_SECS} seconds"
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A runtime limit that is none in practice: `command_start` without `timeout`, and an
/// `exec` with `handoff_after` but no `timeout` (its default would end the handle a minute
/// after the call began, the very thing the hand-off is for).
pub const NO_LIMIT: Duration = Duration::from_secs(365 * 86_400);

/// The longest a command that may become a handle waits for a channel and its login shell:
/// its runtime may be unlimited, its start is not. Below the clients' deadline margin
/// (`EXEC_DEADLINE_MARGIN`), so a hand-off that waits for the start still answers in time.
pub const HANDLE_QUEUE_LIMIT: Duration = Duration::from_secs(25);
const _: () =
    assert!(HANDLE_QUEUE_LIMIT.as_millis() < sshmcp_proto::exec::EXEC_DEADLINE_MARGIN.as_millis());

/// The runtime limit of a command that may become a handle: none when absent and `handle`
/// says it will be one, else as [`check_timeout`].
pub fn check_limit(timeout: Option<f64>, handle: bool) -> Result<Duration, DaemonError> {
    match (timeout, handle) {
        (None, true) => Ok(NO_LIMIT),
        (timeout, _) => check_timeout(timeout),
    }
}

/// `handoff_after` within 1..=86400 seconds; a progress key of at most 256 bytes.
pub fn check_handoff(handoff: &Handoff) -> Result<(), DaemonError> {
    if let Some(after) = handoff.after
        && (!after.is_finite() || !(MIN_HANDOFF_SECS..=MAX_HANDOFF_SECS).contains(&after))
    {
        return Err(DaemonError::invalid_arguments(format!(
            "handoff_after must be between {MIN_HANDOFF_SECS} and {MAX_HANDOFF_SECS} seconds"
        )));
    }
    if handoff.progress_key.as_ref().is_some_and(|k| k.len() > 256) {
        return Err(DaemonError::invalid_arguments(
            "progress key is longer than 256 bytes",
        ));
    }
    Ok(())
}

/// A working directory is a non-empty path; a shell word cannot hold a NUL byte.
pub fn check_cwd(cwd: Option<&str>) -> Result<(), DaemonError> {
    match cwd {
        Some("") => Err(DaemonError::invalid_arguments("cwd must not be empty")),
        Some(c) if c.contains('\0') => Err(DaemonError::invalid_arguments(
            "cwd must not contain a NUL byte",
        )),
        Some(c) if c.starts_with('~') => Err(DaemonError::invalid_arguments(format!(
            "`cwd` {}",
            crate::inspect::NO_TILDE
        ))),
        _ => Ok(()),
    }
}

/// The local root of a call: the caller's (checked), else the daemon's.
pub fn local_root(given: Option<String>, settings: &Settings) -> Result<PathBuf, DaemonError> {
    match given {
        Some(root) => {
            let root = PathBuf::from(root);
            check_local_root(&root)
                .map_err(|m| DaemonError::new(ErrorCode::InvalidLocalPath, m))?;
            Ok(root)
        }
        None => Ok(settings.local_root.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_limit_edges() {
        assert!(check_command(&"a".repeat(MAX_COMMAND_BYTES)).is_ok());
        let err = check_command(&"a".repeat(MAX_COMMAND_BYTES + 1)).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidCommand);
        assert!(check_command("a\0b").is_err());
    }

    #[test]
    fn timeout_edges() {
        assert_eq!(check_timeout(None).unwrap(), Duration::from_secs(60));
        assert!(check_timeout(Some(0.1)).is_ok());
        assert!(check_timeout(Some(86_400.0)).is_ok());
        for bad in [0.09, 86_400.01, f64::NAN, f64::INFINITY, -1.0] {
            assert_eq!(
                check_timeout(Some(bad)).unwrap_err().code,
                ErrorCode::InvalidArguments
            );
        }
    }

    #[test]
    fn a_command_that_may_become_a_handle_has_no_default_limit() {
        assert_eq!(check_limit(None, true).unwrap(), NO_LIMIT);
        assert_eq!(check_limit(None, false).unwrap(), Duration::from_secs(60));
        assert_eq!(
            check_limit(Some(2.0), true).unwrap(),
            Duration::from_secs(2)
        );
        assert!(check_limit(Some(0.0), true).is_err());
    }

    #[test]
    fn handoff_edges() {
        let after = |a| Handoff {
            after: Some(a),
            progress_key: None,
        };
        assert!(check_handoff(&Handoff::default()).is_ok());
        assert!(check_handoff(&after(MIN_HANDOFF_SECS)).is_ok());
        assert!(check_handoff(&after(MAX_HANDOFF_SECS)).is_ok());
        for bad in [0.99, MAX_HANDOFF_SECS + 0.01, f64::NAN] {
            assert_eq!(
                check_handoff(&after(bad)).unwrap_err().code,
                ErrorCode::InvalidArguments
            );
        }
    }

    #[test]
    fn cwd_rules() {
        assert!(check_cwd(None).is_ok());
        assert!(check_cwd(Some("/a b/'c'")).is_ok());
        assert!(check_cwd(Some("")).is_err());
        assert!(check_cwd(Some("a\nb")).is_ok());
        assert!(check_cwd(Some("a\0b")).is_err());
        assert!(check_cwd(Some("~/proj")).is_err());
        assert!(check_cwd(Some("./~")).is_ok());
    }
}
