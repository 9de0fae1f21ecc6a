//! The user's per-host policy as the daemon reports it (`sshmcp doctor`, `sshmcp daemon
//! reload`): each `[[policy]]` entry of its config file and the live sessions it matches.
//! (What a read-only host keeps is each tool's [`Reach`](crate::tool::Reach).)

use serde::{Deserialize, Serialize};

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
