//! The user's per-host policy as the daemon reports it (`sshmcp doctor`, `sshmcp daemon
//! reload`): each `[[policy]]` entry of its config file and the live sessions it matches;
//! and the tools a read-only host keeps, which the daemon enforces and the shim's
//! instructions name.

use serde::{Deserialize, Serialize};

/// The tools a read-only host still serves: they change nothing on it. Everything else,
/// tools added later included, is refused there.
pub const READ_ONLY_TOOLS: &[&str] = &[
    "connect",
    "disconnect",
    "session_list",
    "stat",
    "list_directory",
    "read_file_range",
    "download_start",
    "command_status",
    "command_list",
    "task_status",
    "transfer_status",
    "transfer_list",
    "transfer_cancel",
    "forward_list",
    "forward_stop",
];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyReport {
    /// The config file the policy was read from; `None` when there is none.
    pub source: Option<String>,
    pub entries: Vec<PolicyEntryView>,
    /// Why the last reload failed, when it did: the policy before it stays in force.
    pub reload_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyEntryView {
    /// The entry's `match` globs.
    pub patterns: Vec<String>,
    pub read_only: bool,
    pub sudo: bool,
    pub deny: Vec<String>,
    /// The live sessions it applies to by name.
    pub sessions: Vec<String>,
    /// The host key fingerprints it follows: listed in the file, and seen on the sessions it
    /// matched by name.
    pub host_keys: Vec<String>,
    /// The live sessions it applies to by host key only (another name reached the server).
    pub sessions_by_key: Vec<String>,
}
