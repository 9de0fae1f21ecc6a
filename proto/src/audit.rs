//! The audit trail's format: one JSON object per line in `<state dir>/audit.jsonl`, written by
//! the daemon for every call that reaches a host or changes one, and read back by
//! `sshmcp history`. The file and its rotated generations are named here so both ends agree.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The trail's file in the state directory.
pub const AUDIT_FILE: &str = "audit.jsonl";

/// The size past which the trail is rotated: `audit.jsonl` becomes `audit.jsonl.1`, the
/// generation before it `audit.jsonl.2`, and so on.
pub const AUDIT_ROTATE_BYTES: u64 = 10 * 1024 * 1024;

/// Rotated generations kept beside the live file; the oldest beyond them is deleted.
pub const AUDIT_GENERATIONS: usize = 4;

/// Bytes of a command kept in a line's `summary` (cut at a character boundary).
pub const AUDIT_SUMMARY_BYTES: usize = 200;

/// Bytes of an error's message kept in a line's `message` (cut at a character boundary).
pub const AUDIT_MESSAGE_BYTES: usize = 500;

/// The journal of calls under way, beside the trail: every call is noted there as it begins
/// (before it reaches a host), with its outcome before it answers, and once its line is in
/// the trail, so that a daemon that died (SIGKILL, the OOM killer) leaves the next one every
/// call whose line it never wrote, with its real outcome when it had one. Emptied whenever
/// nothing is under way.
pub const PENDING_FILE: &str = "audit.pending";

/// One line of [`PENDING_FILE`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PendingLine {
    /// A call under way, its line as the trail would keep it were it cut off now.
    Begun { begun: u64, entry: Box<AuditEntry> },
    /// The call `finished` answered: its line as the trail keeps it.
    Finished {
        finished: u64,
        entry: Box<AuditEntry>,
    },
    /// The call `ended` is over (its line is in the trail).
    Ended { ended: u64 },
}

/// One call of one tool, as the trail keeps it. Never a session key, never file contents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When the call arrived, RFC 3339 UTC.
    pub time: String,
    pub session_id: String,
    /// The connect target as given (an alias, or `user@host:port`).
    pub target: String,
    pub server_host: String,
    pub server_port: u16,
    pub tool: String,
    /// The command's first 200 bytes, or the path(s), sizes and ids the call named.
    pub summary: String,
    /// How the call went: `ok`; `timed_out` (a command its timeout ended: it answered, with
    /// no exit status); `cancelled` (the call was cut off before it answered); or the error
    /// code it answered, then with [`message`](Self::message).
    pub outcome: String,
    /// The error's message, for an outcome that is an error code (session keys redacted, cut
    /// to [`AUDIT_MESSAGE_BYTES`]); for a kill, its result (`failed_to_kill, SIGKILL sent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The command's exit status, for the calls that have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended the command instead (`TERM`, `KILL`, ...), for the calls that
    /// have one: a command killed answers, and its line says how it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Seconds from the call's arrival to its answer.
    pub duration: f64,
    /// The MCP client's name and version from its `initialize`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// The live trail file and its rotated generations, newest first.
pub fn audit_files(state_dir: &Path) -> Vec<PathBuf> {
    let live = state_dir.join(AUDIT_FILE);
    let mut files = vec![live.clone()];
    files.extend((1..=AUDIT_GENERATIONS).map(|n| generation(&live, n)));
    files
}

/// The `n`th rotated generation of `live` (`audit.jsonl.n`).
pub fn generation(live: &Path, n: usize) -> PathBuf {
    let mut name = live.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_without_exit_code_or_client_leaves_them_out_and_reads_back() {
        let entry = AuditEntry {
            time: "2026-12-01T10:00:00.000Z".into(),
            session_id: "s1".into(),
            target: "prod".into(),
            server_host: "10.0.0.1".into(),
            server_port: 22,
            tool: "stat".into(),
            summary: "/etc/hosts".into(),
            outcome: "ok".into(),
            message: None,
            exit_code: None,
            signal: None,
            duration: 0.002,
            client: None,
        };
        let line = serde_json::to_string(&entry).unwrap();
        assert!(
            !line.contains("exit_code") && !line.contains("client") && !line.contains("message"),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<AuditEntry>(&line).unwrap(), entry);
    }

    #[test]
    fn generations_follow_the_live_file_newest_first() {
        let files = audit_files(Path::new("/s"));
        assert_eq!(files[0], Path::new("/s/audit.jsonl"));
        assert_eq!(files[1], Path::new("/s/audit.jsonl.1"));
        assert_eq!(files.len(), 1 + AUDIT_GENERATIONS);
    }
}
