//! Wire types of detached tasks (`task_launch`, `task_status`, `task_kill`): remote processes
//! that outlive sessions and this daemon, addressed by remote PID.

use serde::{Deserialize, Serialize};

use crate::command::KillResult;
use crate::exec::Encoding;
use crate::session::SessionAuth;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskLaunchRequest {
    pub auth: SessionAuth,
    pub command: String,
    pub cwd: Option<String>,
}
crate::session::authed!(TaskLaunchRequest);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TaskLaunched {
    /// The task's remote PID: task_status and
    /// task_kill take it, from any later session to this host.
    pub pid: u32,
    /// Remote path of the task's stdout log.
    pub stdout_log: String,
    /// Remote path of the task's stderr log.
    pub stderr_log: String,
    /// RFC 3339 UTC.
    pub started_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatusRequest {
    pub auth: SessionAuth,
    pub pid: i64,
    /// Bytes of each log's end to return; the daemon's default when absent.
    pub tail_bytes: Option<u64>,
    /// Seconds (0..=300) to wait for the task to stop running before answering; none answers
    /// at once.
    pub wait_seconds: Option<f64>,
}
crate::session::authed!(TaskStatusRequest);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
/// Whether the task runs.
pub enum TaskState {
    /// The PID still shows the task's start marker: it runs.
    Running,
    /// The task ended (or its PID now belongs to another process).
    Exited,
    /// No task sshmcp launched as this user had this PID (or its files are gone): check the
    /// host and the user you connected as.
    NotFound,
}

/// The end of one log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LogTail {
    /// The last bytes of the log (cut at a character boundary).
    pub data: String,
    /// `utf-8`, or `base64` when `data` holds bytes that are not UTF-8.
    pub encoding: Encoding,
    /// The log's size in bytes.
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TaskReport {
    /// The PID asked about.
    pub pid: i64,
    /// Whether the task runs (see each value).
    pub state: TaskState,
    /// The exit status of the task's shell, once it recorded it (128 + n after signal n of
    /// HUP, INT, QUIT, USR1, USR2, PIPE, ALRM, TERM; null after KILL and other signals). A shell that exited leaving children in its group
    /// shows its status while `state` is still `running`.
    pub exit_code: Option<i32>,
    /// Remote path of the stdout log; null when `state` is `not_found`.
    pub stdout_log: Option<String>,
    /// Remote path of the stderr log; null when `state` is `not_found`.
    pub stderr_log: Option<String>,
    /// The end of the stdout log; null when `state` is `not_found`.
    pub stdout: Option<LogTail>,
    /// The end of the stderr log; null when `state` is `not_found`.
    pub stderr: Option<LogTail>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskKillRequest {
    pub auth: SessionAuth,
    pub pid: i64,
    pub signal: Option<i32>,
    pub force: Option<bool>,
    pub wait_seconds: Option<f64>,
}
crate::session::authed!(TaskKillRequest);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TaskKilled {
    /// The PID asked about.
    pub pid: i64,
    /// As command_kill's.
    pub result: KillResult,
    /// The signal number asked for (sent unless `result` is `not_running` or `invalid_pid`).
    pub signal: i32,
    /// True iff the SIGKILL fallback was attempted.
    pub force_kill_used: bool,
    /// When the kill finished (RFC 3339 UTC).
    pub timestamp: String,
}
