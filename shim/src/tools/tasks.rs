//! The detached task tools: launch a process that outlives sessions, check it, kill it, all by
//! its remote PID.

use std::time::Duration;

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use sshmcp_proto::DaemonError;
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::session::SessionAuth;
use sshmcp_proto::task::{
    TaskKillRequest, TaskKilled, TaskLaunchRequest, TaskLaunched, TaskReport, TaskStatusRequest,
};
use tokio_util::sync::CancellationToken;

use super::exec::unless_cancelled;
use crate::answer::{self, Answer};
use crate::args;
use crate::server::Shim;
use crate::signal::Signal;

/// Room for a task program on the host, beyond a kill's own waiting.
const MARGIN: Duration = Duration::from_secs(60);

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskLaunchArgs {
    /// Any session to the host (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// Shell text for /bin/sh, at most 1048576 bytes.
    pub command: String,
    /// Remote working directory for the task: absolute, or relative to the login directory
    /// (`~` is not expanded); `remote_path_not_found` if it does not exist.
    pub cwd: Option<String>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskStatusArgs {
    /// Any session to the host the task runs on, as the user that launched it.
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// The task's PID, from task_launch (above 1: 1 or below is `not_found`).
    pub pid: i64,
    /// Bytes of each log's end to return, at least 1; more than the daemon's output cap
    /// (65536 by default) gives the cap. Default 4096.
    #[schemars(range(min = 1))]
    pub tail_bytes: Option<u64>,
    /// Seconds to wait for the task to stop running before answering (0..300; stay below
    /// your client's call limit, e.g. 30); default 0 (answer at once). The answer comes
    /// within a second of its end.
    #[schemars(range(min = 0.0, max = 300.0))]
    pub wait_seconds: Option<f64>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskKillArgs {
    /// Any session to the host the task runs on, as the user that launched it.
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// The task's PID, from task_launch (above 1: 1 or below answers `invalid_pid`).
    pub pid: i64,
    /// The signal sent to the task's whole process group: a number (1..64) or a name
    /// (`TERM`, `INT`, `HUP`, `QUIT`, `ABRT`, `ALRM`, `KILL`); default 15 (TERM).
    pub signal: Option<Signal>,
    /// When the group has not exited `wait_seconds` after the signal, send SIGKILL (9).
    /// Default false.
    pub force: Option<bool>,
    /// Seconds to wait for the group to exit after the signal (0..60); default 1.
    #[schemars(range(min = 0.0, max = 60.0))]
    pub wait_seconds: Option<f64>,
}

fn auth(session_id: String, session_key: String) -> SessionAuth {
    SessionAuth {
        session_id,
        session_key,
    }
}

#[tool_router(router = tasks_router, vis = "pub(crate)")]
impl Shim {
    /// Launch a detached background process on the host that survives disconnects, reconnects
    /// and daemon restarts: a server you leave running, a watcher, a job that runs for hours.
    /// It runs `/bin/sh` on the command as the login user, in its own session and process
    /// group, stdin from /dev/null, with no time limit; stdout and stderr go to log files
    /// private to the remote user (`<home>/.sshmcp/tasks/PID.out` and `.err`, absolute paths
    /// returned; never removed by sshmcp, nor bounded: remove them with remove_path once read,
    /// and send a chatty server's output elsewhere). It records its exit status when it ends.
    /// Keep the `pid`: nothing lists tasks. Use `command_start` instead for work you follow
    /// and stop within this session (output kept locally, killed on disconnect). Errors:
    /// `remote_path_not_found` (the `cwd` is missing: check it with stat), `invalid_command`
    /// (over 1 MiB, or a NUL byte: upload a script and run that), `host_tool_missing` (no
    /// setsid on the host: tell the user), `internal_error` (no writable ~/.sshmcp/tasks: tell
    /// the user; one that names a PID may still run: check it with task_status before
    /// launching again). task_status with the
    /// `pid` confirms it runs.
    #[tool(
        input_schema = schema_for_input::<TaskLaunchArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<TaskLaunched>>(),
        annotations(title = "Launch a detached task", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn task_launch(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: TaskLaunchArgs = args::decode(raw)?;
                let req = TaskLaunchRequest {
                    auth: auth(a.session_id, a.session_key),
                    command: a.command,
                    cwd: a.cwd,
                };
                let ctx = context_with_timeout(MARGIN);
                self.daemon
                    .call(
                        "task_launch",
                        |c| async move { c.task_launch(ctx, req).await },
                    )
                    .await
            }
            .await,
        )
    }

    /// Check a task from task_launch by its `pid` (for a command handle use command_status).
    /// `state`: `running`, `exited` (it ended, or its PID now belongs to another process: a
    /// reused PID is never taken for the task) or `not_found` (no task of this user had this
    /// PID). `exit_code` once recorded (128 + n after signal n; null after KILL); the log
    /// paths; `stdout` and `stderr`: each log's last `tail_bytes` (read more with
    /// read_file_range on the log path). Long-poll with `wait_seconds` (the answer comes
    /// within a second of its end) rather than calling in a tight loop. Errors:
    /// `invalid_arguments` (`tail_bytes` 0, `wait_seconds` out of range; a `tail_bytes` above
    /// the cap is taken as the cap).
    #[tool(
        input_schema = schema_for_input::<TaskStatusArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<TaskReport>>(),
        annotations(title = "Check a detached task", read_only_hint = true,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = true)
    )]
    pub async fn task_status(&self, raw: JsonObject, cancel: CancellationToken) -> CallToolResult {
        answer::respond(
            async {
                let a: TaskStatusArgs = args::decode(raw)?;
                let req = TaskStatusRequest {
                    auth: auth(a.session_id, a.session_key),
                    pid: a.pid,
                    tail_bytes: a.tail_bytes,
                    wait_seconds: a.wait_seconds,
                };
                let ctx = super::waiting(a.wait_seconds, MARGIN);
                // A client that gives up on a wait stops it: the daemon's call goes with it.
                let call =
                    self.daemon.call(
                        "task_status",
                        |c| async move { c.task_status(ctx, req).await },
                    );
                unless_cancelled(call, cancel).await
            }
            .await,
        )
    }

    /// Terminate a task from task_launch by its `pid` (for a command handle use command_kill).
    /// It first checks on the host that the PID is still the task sshmcp launched (its start
    /// time matches): any other PID, one since reused by another process or a command handle's
    /// included, answers `not_running` and is never signalled (which then says nothing about
    /// whether such a process runs). Then it works as command_kill does: the signal to the
    /// task's whole process group, SIGKILL after `wait_seconds` when `force`, the same `result`
    /// values and `force_kill_used`. Errors: `invalid_arguments` (`signal` or `wait_seconds`
    /// out of range).
    #[tool(
        input_schema = schema_for_input::<TaskKillArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<TaskKilled>>(),
        annotations(title = "Kill a detached task", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = true, open_world_hint = true)
    )]
    pub async fn task_kill(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: TaskKillArgs = args::decode(raw)?;
                let wait = a.wait_seconds.unwrap_or(1.0).clamp(0.0, 60.0);
                let req = TaskKillRequest {
                    auth: auth(a.session_id, a.session_key),
                    pid: a.pid,
                    signal: a
                        .signal
                        .map(|signal| signal.number())
                        .transpose()
                        .map_err(DaemonError::invalid_arguments)?,
                    force: a.force,
                    wait_seconds: a.wait_seconds,
                };
                let ctx = context_with_timeout(Duration::from_secs_f64(wait) + MARGIN);
                self.daemon
                    .call("task_kill", |c| async move { c.task_kill(ctx, req).await })
                    .await
            }
            .await,
        )
    }
}
