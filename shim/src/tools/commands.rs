//! The command handle tools: start a command that outlives one call, follow its output,
//! kill it, list the session's history.

use std::time::Duration;

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject, RequestMetaObject};
use rmcp::{Peer, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use sshmcp_proto::DaemonError;
use sshmcp_proto::command::{
    CommandKillRequest, CommandKilled, CommandList, CommandReport, CommandStartRequest,
    CommandStarted, CommandStatusRequest,
};
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::session::SessionAuth;
use tokio_util::sync::CancellationToken;

use super::exec::unless_cancelled;
use crate::answer::{self, Answer};
use crate::args;
use crate::progress::{self, Progress};
use crate::server::Shim;
use crate::signal::Signal;

/// Room beyond a call's own waiting for the daemon to answer.
const MARGIN: Duration = Duration::from_secs(30);

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandStartArgs {
    /// The session to run in (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// Shell text for /bin/sh, at most 1048576 bytes, parsed whole before any of it runs.
    pub command: String,
    /// Remote working directory for this command only: absolute, or relative to the login
    /// directory (`~` is not expanded); `remote_path_not_found` if it does not exist.
    pub cwd: Option<String>,
    /// Hard runtime limit in seconds (0.1..86400): then the whole process group is
    /// terminated and the status is `timed_out`. Default: no limit.
    #[schemars(range(min = 0.1, max = 86400.0))]
    pub timeout: Option<f64>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandStatusArgs {
    /// The session that started the command.
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// From command_start (`handle_id` or `id`) or a handed-off exec or sudo_exec.
    pub handle_id: String,
    /// Seconds to wait for the command to end before answering (0..300; stay below your
    /// client's call limit, e.g. 30); default 0 (answer at once). The answer comes as soon as
    /// it ends.
    #[schemars(range(min = 0.0, max = 300.0))]
    pub wait_seconds: Option<f64>,
    /// Byte offset to read stdout from: the `next_offset` of the previous answer. Absent:
    /// the last `max_bytes` of stdout.
    pub stdout_offset: Option<u64>,
    /// Byte offset to read stderr from, as for stdout.
    pub stderr_offset: Option<u64>,
    /// Bytes per stream to return, at least 1; more than the daemon's output cap (65536 by
    /// default) gives the cap. By default, for each stream, the cap when it is read from its
    /// offset and 4096 when its tail is.
    #[schemars(range(min = 1))]
    pub max_bytes: Option<u64>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandKillArgs {
    /// The session that started the command.
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// The command handle to kill: `handle_id` (or `id`) from command_start, or from a
    /// handed-off exec or sudo_exec. Not a PID.
    pub handle_id: String,
    /// The signal sent to the command's whole process group: a number (1..64) or a name
    /// (`TERM`, `INT`, `HUP`, `QUIT`, `ABRT`, `ALRM`, `KILL`); default 15 (TERM).
    pub signal: Option<Signal>,
    /// When the group has not exited `wait_seconds` after the signal, send SIGKILL (9).
    /// Default false.
    pub force: Option<bool>,
    /// Seconds to wait for the group to exit after the signal (0..60); default 1.
    #[schemars(range(min = 0.0, max = 60.0))]
    pub wait_seconds: Option<f64>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandListArgs {
    /// The session whose commands to list.
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
}

#[tool_router(router = commands_router, vis = "pub(crate)")]
impl Shim {
    /// Start a /bin/sh command that will outlast a tool call and return its `handle_id` as soon
    /// as it started (a command that quick may have ended already: read its `exit_code` with
    /// command_status). It runs as the login user as `exec` does (no TTY, empty stdin, its own
    /// process group), but apart from this call: follow it with `command_status`, stop it with
    /// `command_kill`. Its stdout and stderr are kept whole in files under the local root (up
    /// to the daemon's max-spool-bytes, 1 GiB by default, per stream), deleted with the handle:
    /// when it leaves the history (the last 100 ended handles), or at `disconnect`, which also
    /// kills the session's running commands. Use it for a build, a test suite or a dev server
    /// you stop before disconnecting; `exec` with `handoff_after` for a command that is usually
    /// quick; `task_launch` for a process that must survive a disconnect; `sudo_exec` with
    /// `handoff_after` for long root work. Errors: `remote_path_not_found` (the `cwd` is
    /// missing: check it with stat), `invalid_command` (too long, NUL byte: upload a script and
    /// run that), `invalid_arguments` (timeout out of range), `invalid_local_path` (the local
    /// root cannot hold the output files: tell the user), `channels_busy` (it did not start
    /// within 25 s: running commands and transfers hold all 7 channels they may, or the
    /// remote login shell did not finish; nothing ran: wait for one to end, or kill one, then
    /// retry).
    #[tool(
        input_schema = schema_for_input::<CommandStartArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<CommandStarted>>(),
        annotations(title = "Start a long command", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn command_start(
        &self,
        raw: JsonObject,
        cancel: CancellationToken,
    ) -> CallToolResult {
        answer::respond(
            async {
                let a: CommandStartArgs = args::decode(raw)?;
                let req = CommandStartRequest {
                    auth: SessionAuth {
                        session_id: a.session_id,
                        session_key: a.session_key,
                    },
                    command: a.command,
                    cwd: a.cwd,
                    timeout: a.timeout,
                    local_root: self.local_root_arg(),
                };
                let ctx = context_with_timeout(MARGIN * 2);
                // Cancelled before it answers, the start is dropped: a command still waiting
                // for a channel never runs, and one just started (its handle never given)
                // is stopped.
                let call = self.daemon.call("command_start", |c| async move {
                    c.command_start(ctx, req).await
                });
                unless_cancelled(call, cancel).await
            }
            .await,
        )
    }

    /// Check a command handle and read its output, by offset or as a tail (see the offsets);
    /// long-poll with `wait_seconds` rather than calling in a tight loop. The answer's `status`:
    /// `running`, `completed` (read `exit_code`), `timed_out`, `killed` (by command_kill) or `lost`
    /// (the connection or the daemon died while it ran: its exit is unknown and its process group
    /// may still run; read `pid`). `stdout` and `stderr` are each an object with `data` and
    /// `next_offset` (pass it back to read on), `total_bytes` so far, and `truncated` when the kept
    /// output stopped at the spool cap; once the command has ended, a stream read whole is just its
    /// text (an empty one is left out). Works on ended handles, and on a session that answers
    /// `connection_lost`: read what you need before `disconnect`, which deletes the handle and its
    /// output. Errors: `command_not_found` (not a handle of this session: see command_list; a
    /// task's PID goes to task_status), `invalid_arguments` (an offset past `total_bytes`,
    /// `max_bytes` 0; above the cap it is taken as the cap).
    #[tool(
        input_schema = schema_for_input::<CommandStatusArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<CommandReport>>(),
        annotations(title = "Check a long command", read_only_hint = true,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn command_status(
        &self,
        raw: JsonObject,
        cancel: CancellationToken,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> CallToolResult {
        answer::respond_trimmed(
            async {
                let a: CommandStatusArgs = args::decode(raw)?;
                let auth = SessionAuth {
                    session_id: a.session_id,
                    session_key: a.session_key,
                };
                let ctx = super::waiting(a.wait_seconds, MARGIN);
                let poll = progress::of_run(self.daemon.clone(), auth.clone(), a.handle_id.clone());
                let req = CommandStatusRequest {
                    auth,
                    handle_id: a.handle_id,
                    wait_seconds: a.wait_seconds,
                    stdout_offset: a.stdout_offset,
                    stderr_offset: a.stderr_offset,
                    max_bytes: a.max_bytes,
                };
                let call = self.daemon.call("command_status", |c| async move {
                    c.command_status(ctx, req).await
                });
                let waits = a.wait_seconds.is_some_and(|wait| wait > 0.0);
                let progress = Progress::asked(&meta, peer).filter(|_| waits);
                progress::follow(unless_cancelled(call, cancel), progress, poll).await
            }
            .await,
            whole_streams_as_text,
        )
    }

    /// Terminate a running command handle of this session (for a task_launch PID use
    /// task_kill). Before sending anything it checks on the host whether the command's process
    /// group still runs; then it signals the whole group (as root for a sudo_exec handle;
    /// SIGKILL fallback: `force`). `result`: `killed` (confirmed gone), `already_exited` (gone
    /// as the signal landed), `not_running` (it had ended: nothing was sent),
    /// `failed_to_kill` (still running: call again with `force: true`; if `force_kill_used`
    /// was already true, tell the user), `invalid_pid` (its shell never reported a group:
    /// nothing was sent), `error` (the attempt failed: check command_status). After
    /// `killed`, `already_exited` or `not_running`, command_status reports `killed` for this
    /// handle (an exit code it had stays shown): check command_status first, as a handle that
    /// ended needs no kill. Errors: `command_not_found` (not a handle
    /// of this session, or of one since disconnected: see command_list), `invalid_arguments`
    /// (`signal` or `wait_seconds` out of range).
    #[tool(
        input_schema = schema_for_input::<CommandKillArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<CommandKilled>>(),
        annotations(title = "Kill a long command", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = true, open_world_hint = true)
    )]
    pub async fn command_kill(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: CommandKillArgs = args::decode(raw)?;
                let wait = a.wait_seconds.unwrap_or(1.0).clamp(0.0, 60.0);
                let ctx = context_with_timeout(Duration::from_secs_f64(wait) + MARGIN);
                let req = CommandKillRequest {
                    auth: SessionAuth {
                        session_id: a.session_id,
                        session_key: a.session_key,
                    },
                    handle_id: a.handle_id,
                    signal: a
                        .signal
                        .map(|signal| signal.number())
                        .transpose()
                        .map_err(DaemonError::invalid_arguments)?,
                    force: a.force,
                    wait_seconds: a.wait_seconds,
                };
                self.daemon
                    .call(
                        "command_kill",
                        |c| async move { c.command_kill(ctx, req).await },
                    )
                    .await
            }
            .await,
        )
    }

    /// List this session's command handles, newest first, ended ones included (the last
    /// 100): `commands`, each with `handle_id`, `preview` (the command's first line, cut),
    /// `status` (as command_status gives it), `exit_code`, `started_at` and `ended_at`. Use
    /// it to find a handle you lost track of; read output with command_status. Tasks from task_launch are not listed (nothing lists them:
    /// keep task_launch's `pid` for task_status). Works on a session that answers
    /// `connection_lost`.
    #[tool(
        input_schema = schema_for_input::<CommandListArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<CommandList>>(),
        annotations(title = "List long commands", read_only_hint = true,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn command_list(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: CommandListArgs = args::decode(raw)?;
                let auth = SessionAuth {
                    session_id: a.session_id,
                    session_key: a.session_key,
                };
                let ctx = context_with_timeout(MARGIN);
                self.daemon
                    .call("command_list", |c| async move {
                        c.command_list(ctx, auth).await
                    })
                    .await
            }
            .await,
        )
    }
}

/// Once a handle has ended, a chunk that holds its whole stream as UTF-8 text, not cut at
/// the spool cap, needs no offsets: they go, and the lean answer gives the stream as its
/// text. Any other chunk keeps them (its object is what the output schema describes).
fn whole_streams_as_text(report: &mut JsonObject) {
    if report.get("status").and_then(|s| s.as_str()) == Some("running") {
        return;
    }
    for stream in ["stdout", "stderr"] {
        if let Some(chunk) = report.get_mut(stream).and_then(|c| c.as_object_mut()) {
            let whole = chunk.get("offset").and_then(|o| o.as_u64()) == Some(0)
                && chunk.get("next_offset") == chunk.get("total_bytes")
                && chunk.get("encoding").and_then(|e| e.as_str()) == Some("utf-8")
                && chunk.get("truncated").and_then(|t| t.as_bool()) != Some(true);
            if whole {
                chunk.remove("offset");
                chunk.remove("next_offset");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trimmed(report: serde_json::Value) -> serde_json::Value {
        let mut report = report.as_object().unwrap().clone();
        whole_streams_as_text(&mut report);
        crate::lean::answer(&mut report);
        serde_json::Value::Object(report)
    }

    fn chunk(data: &str, encoding: &str, truncated: bool) -> serde_json::Value {
        json!({"data": data, "encoding": encoding, "offset": 0, "next_offset": 3,
               "total_bytes": 3, "truncated": truncated})
    }

    #[test]
    fn only_an_ended_whole_utf8_stream_becomes_text() {
        let ended = |stdout| json!({"status": "completed", "exit_code": 0, "stdout": stdout});
        assert_eq!(
            trimmed(ended(chunk("abc", "utf-8", false)))["stdout"],
            "abc"
        );
        // Binary, or cut at the spool cap: an object with its offsets, as published.
        for stdout in [chunk("/w==", "base64", false), chunk("abc", "utf-8", true)] {
            let answer = trimmed(ended(stdout));
            assert_eq!(answer["stdout"]["next_offset"], 3, "{answer}");
        }
        let running = json!({"status": "running", "exit_code": null,
                             "stdout": chunk("abc", "utf-8", false)});
        assert_eq!(trimmed(running)["stdout"]["next_offset"], 3);
    }
}
