//! What `sshmcp watch` shows: every session with its `exec` calls under way, its running (and
//! just ended) commands, its transfers under
//! way and its forwards, from state the daemon already holds (nothing reaches a host).

use serde::{Deserialize, Serialize};

use crate::command::CommandSummary;
use crate::forward::ForwardInfo;
use crate::session::SessionSummary;
use crate::transfer::TransferReport;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    /// The daemon's pid.
    pub pid: u32,
    /// When the snapshot was taken, RFC 3339 UTC.
    pub taken_at: String,
    /// Oldest first.
    pub sessions: Vec<SessionView>,
    /// How the audit trail fared since the daemon started; `None` when it is off.
    pub audit: Option<AuditCounts>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionView {
    pub session: SessionSummary,
    /// Its command handles still running, and those that ended in the last minute (their
    /// status and exit code say how), newest first.
    pub commands: Vec<CommandSummary>,
    /// Its `exec` and `sudo_exec` calls under way (not handed off), oldest first.
    pub execs: Vec<ExecView>,
    /// Its transfers not yet ended (queued, running, verifying), newest first.
    pub transfers: Vec<TransferReport>,
    pub forwards: Vec<ForwardInfo>,
    /// The policy entries that govern it, each as `match (by name)` or `match (by host key)`.
    pub policy: Vec<String>,
}

impl SessionView {
    /// The session governed by `policy`, with nothing yet of what runs on it (each tool adds
    /// its own).
    pub fn of(session: SessionSummary, policy: Vec<String>) -> Self {
        Self {
            session,
            commands: Vec::new(),
            execs: Vec::new(),
            transfers: Vec::new(),
            forwards: Vec::new(),
            policy,
        }
    }
}

/// One `exec` or `sudo_exec` call under way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecView {
    /// What `sshmcp output` and `sshmcp kill` take; the command handle's id if the call
    /// hands its command off.
    pub id: String,
    /// `exec` or `sudo_exec`.
    pub tool: String,
    /// The command's first line, cut.
    pub preview: String,
    /// When the call began, RFC 3339 UTC.
    pub started_at: String,
    /// Bytes of output so far, both streams.
    pub bytes: u64,
    /// The last line of output so far (cut to 200 bytes).
    pub last_line: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditCounts {
    /// Lines written.
    pub written: u64,
    /// Lines lost: a write failed (a full disk) or the writer fell behind.
    pub lost: u64,
}
