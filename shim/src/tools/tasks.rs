//! The detached task tools: launch a process that outlives sessions, check it, kill it, all by
//! its remote PID.

use std::time::Duration;

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use sshmcp_proto::DaemonError;
use sshmcp_proto::described::auth;
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::service::tools;
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
    pub session_key: String,
    /// Shell text for /bin/sh, at most 1 MiB.
    pub command: String,
    /// Remote working directory; default: home.
    pub cwd: Option<String>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
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

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskKillArgs {
    /// Any session to the host, as the task's user.
    pub session_id: String,
    pub session_key: String,
    /// From task_launch.
    pub pid: i64,
    /// TERM (default), HUP, INT, QUIT, ABRT, ALRM, KILL, or 1..64.
    pub signal: Option<Signal>,
    /// SIGKILL if still running after `wait_seconds`.
    pub force: Option<bool>,
    /// Seconds to wait for the exit; default 1.
    #[schemars(range(min = 0.0, max = 60.0))]
    pub wait_seconds: Option<f64>,
}

#[tool_router(router = tasks_router, vis = "pub(crate)")]
impl Shim {
    /// Launch a detached /bin/sh process that survives disconnects and daemon restarts: login user,
    /// stdin /dev/null, no time limit (to end with the session: command_start). Answer: `pid`
    /// (keep it; lost: `ls ~/.sshmcp/tasks` via exec, files named by PID), `stdout_log`,
    /// `stderr_log` (absolute remote paths, unbounded, never removed: remove_path them once read).
    /// Errors: `remote_path_not_found` (no such `cwd`), `invalid_command` (too long, NUL),
    /// `host_tool_missing` (no setsid: tell the user), `internal_error` (no writable
    /// ~/.sshmcp/tasks: tell the user; if it names a PID, task_status it first).
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
                self.daemon.run::<tools::TaskLaunch>(ctx, req).await
            }
            .await,
        )
    }

    /// Check a task_launch task by `pid` (a command handle: command_status). `state`: `running`,
    /// `exited` (ended, or PID reused), `not_found` (no task of this user had it). `exit_code`:
    /// null until recorded (128+n after a trappable signal n; stays null after KILL; no `signal`
    /// field); `stdout_log`, `stderr_log`: its log paths; `stdout`, `stderr`: their tails (`data`,
    /// `encoding: base64` if not UTF-8, `size` of the whole log); more: read_file_range on the log
    /// path.
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
                let call = self.daemon.run::<tools::TaskStatus>(ctx, req);
                unless_cancelled(call, cancel).await
            }
            .await,
        )
    }

    /// Signal a task_launch task's process group by `pid` if the PID is still that task (a command
    /// handle: command_kill). `result`: `killed`, `already_exited`, `not_running` (PID no longer
    /// that task: nothing sent), `failed_to_kill` (retry with `force: true`; after that, tell the
    /// user), `invalid_pid` (1 or below), `error` (see task_status); `force_kill_used`: SIGKILL
    /// sent.
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
                self.daemon.run::<tools::TaskKill>(ctx, req).await
            }
            .await,
        )
    }
}
