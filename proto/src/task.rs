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

/// `task_launch` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskLaunchArgs {
    pub session_id: String,
    pub session_key: String,
    /// Shell text for /bin/sh, at most 1 MiB.
    pub command: String,
    /// Remote working directory; default: home.
    pub cwd: Option<String>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::TaskLaunch {
    type Args = TaskLaunchArgs;
    const TITLE: &'static str = "Launch a detached task";
    const DESCRIPTION: &'static str = "Launch a detached /bin/sh process \
        that survives disconnects and daemon restarts: login user, stdin /dev/null, no time \
        limit (to end with the session: command_start). Answer: `pid` (keep it; lost: `ls \
        ~/.sshmcp/tasks` via exec, files named by PID), `stdout_log`, `stderr_log` (absolute \
        remote paths, unbounded, never removed: remove_path them after it exits). Errors: \
        `remote_path_not_found` (no such `cwd`), `invalid_command` (too long, NUL), \
        `host_tool_missing` (no setsid: tell the user), `internal_error` (no writable \
        ~/.sshmcp/tasks: tell the user; if it names a PID, task_status it first).";
    const HINTS: crate::described::Hints = crate::described::Hints::STARTS;
    const DEADLINE: std::time::Duration = TASK_MARGIN;

    fn request(
        args: TaskLaunchArgs,
        _: &crate::described::Here,
    ) -> Result<TaskLaunchRequest, crate::DaemonError> {
        Ok(TaskLaunchRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            command: args.command,
            cwd: args.cwd,
        })
    }
}

/// How long a client waits for a task program on the host, beyond a wait or a kill's own
/// waiting.
#[cfg(feature = "schema")]
pub const TASK_MARGIN: std::time::Duration = std::time::Duration::from_secs(60);

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

/// `task_status` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskStatusArgs {
    /// Any session to the host, as the task's user.
    pub session_id: String,
    pub session_key: String,
    /// From task_launch.
    pub pid: i64,
    /// Bytes of each log's end (cap 64 KiB); default 4096.
    #[schemars(range(min = 1))]
    pub tail_bytes: Option<u64>,
    /// Seconds to long-poll for the end (e.g. 30); default 0.
    #[schemars(range(min = 0.0, max = 300.0))]
    pub wait_seconds: Option<f64>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::TaskStatus {
    type Args = TaskStatusArgs;
    const TITLE: &'static str = "Check a detached task";
    const DESCRIPTION: &'static str = "Check a task_launch task by `pid` \
        (a command handle: command_status). `state`: `running`, `exited` (ended, or PID \
        reused), `not_found` (no task of this user had it). `exit_code` (null: unknown, \
        never success; 128+n after a trappable signal n; no `signal` field); \
        `stdout_log`, `stderr_log`: its log paths; `stdout`, `stderr`: their tails (a whole log: \
        a string; else `data`, `encoding: base64` if not UTF-8, `size` of the whole log); \
        more: read_file_range.";
    const HINTS: crate::described::Hints = crate::described::Hints::READS_HOST;
    const DEADLINE: std::time::Duration = TASK_MARGIN;

    fn deadline(args: &TaskStatusArgs) -> std::time::Duration {
        crate::described::waited(args.wait_seconds) + TASK_MARGIN
    }

    fn request(
        args: TaskStatusArgs,
        _: &crate::described::Here,
    ) -> Result<TaskStatusRequest, crate::DaemonError> {
        Ok(TaskStatusRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            pid: args.pid,
            tail_bytes: args.tail_bytes,
            wait_seconds: args.wait_seconds,
        })
    }
}

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

/// `task_kill` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskKillArgs {
    /// Any session to the host, as the task's user.
    pub session_id: String,
    pub session_key: String,
    /// From task_launch.
    pub pid: i64,
    /// TERM (default), HUP, INT, QUIT, ABRT, ALRM, KILL (`SIG` prefix ok), or 1..64.
    pub signal: Option<crate::signal::Signal>,
    /// SIGKILL if still running after `wait_seconds`.
    pub force: Option<bool>,
    /// Seconds to wait for the exit; default 1.
    #[schemars(range(min = 0.0, max = 60.0))]
    pub wait_seconds: Option<f64>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::TaskKill {
    type Args = TaskKillArgs;
    const TITLE: &'static str = "Kill a detached task";
    const DESCRIPTION: &'static str = "Signal a task_launch task's \
        process group by `pid` if the PID is still that task (a command handle: \
        command_kill). `result`: `killed`, `already_exited`, `not_running` (PID no longer \
        that task: nothing sent), `failed_to_kill` (still runs after `wait_seconds`: raise it, or `force: true`; then \
        tell the user), `invalid_pid` (1 or below), `error` (state unknown: task_status, then retry); \
        `force_kill_used`: SIGKILL sent.";
    const HINTS: crate::described::Hints = crate::described::Hints::STOPS;
    const DEADLINE: std::time::Duration = TASK_MARGIN;

    fn deadline(args: &TaskKillArgs) -> std::time::Duration {
        crate::described::kill_waited(args.wait_seconds) + TASK_MARGIN
    }

    fn request(
        args: TaskKillArgs,
        _: &crate::described::Here,
    ) -> Result<TaskKillRequest, crate::DaemonError> {
        Ok(TaskKillRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            pid: args.pid,
            signal: crate::signal::Signal::number_of(args.signal)?,
            force: args.force,
            wait_seconds: args.wait_seconds,
        })
    }
}

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
