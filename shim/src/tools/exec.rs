//! The exec tool: one non-interactive /bin/sh command per call.

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject, RequestMetaObject};
use rmcp::{Peer, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use sshmcp_proto::exec::{ExecRequest, ExecResult, Handoff, SudoExecRequest};
use sshmcp_proto::limits::DEFAULT_TIMEOUT_SECS;
use sshmcp_proto::service::{EXEC_DEADLINE_MARGIN, context_with_timeout};
use sshmcp_proto::session::SessionAuth;
use sshmcp_proto::{DaemonError, ErrorCode};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use crate::answer::{self, Answer};
use crate::args;
use crate::progress::{self, Progress};
use crate::server::Shim;

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    /// The session to run in (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// Shell text for /bin/sh, at most 1048576 bytes, parsed whole before any of it runs (a
    /// syntax error anywhere, such as an unterminated here-document, runs nothing).
    pub command: String,
    /// Remote working directory for this call only: absolute, or relative to the login
    /// directory (`~` is not expanded); `remote_path_not_found` if it does not exist.
    pub cwd: Option<String>,
    /// Seconds before the remote process group is terminated (0.1..86400), a handed-off
    /// command's too; default 60, or no limit with `handoff_after`.
    #[schemars(range(min = 0.1, max = 86400.0))]
    pub timeout: Option<f64>,
    /// Also write the complete streams to files under the local root and return their
    /// paths; default false. The files stay until you delete them on this machine (no tool
    /// does).
    pub spool_output: Option<bool>,
    /// Seconds (1..86400; stay below your client's call limit, e.g. 30): if the command
    /// still runs then, the answer comes at once with `handed_off: true`, `handle_id`, `pid`
    /// and the output so far, and `command_status` continues from each stream's
    /// `next_offset`. A `timeout` at or below it means no hand-off.
    #[schemars(range(min = 1.0, max = 86400.0))]
    pub handoff_after: Option<f64>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SudoExecArgs {
    /// The session to run in (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// Shell text for root's bash, at most 1048576 bytes, parsed whole before any of it runs.
    pub command: String,
    /// Remote working directory for this call only: absolute, or relative to the login
    /// directory (`~` is not expanded); `remote_path_not_found` if it does not exist.
    pub cwd: Option<String>,
    /// Seconds before the remote process group is terminated (0.1..86400), a handed-off
    /// command's too; default 60, or no limit with `handoff_after`.
    #[schemars(range(min = 0.1, max = 86400.0))]
    pub timeout: Option<f64>,
    /// Seconds (1..86400; stay below your client's call limit, e.g. 30): if the command
    /// still runs then, the answer comes at once as a command handle, as for exec. A
    /// `timeout` at or below it means no hand-off.
    #[schemars(range(min = 1.0, max = 86400.0))]
    pub handoff_after: Option<f64>,
}

/// The call's deadline: the command's own timeout (or its hand-off, when sooner) plus room
/// for queuing and the kill.
fn deadline(timeout: Option<f64>, handoff_after: Option<f64>) -> tarpc::context::Context {
    let secs = match (timeout, handoff_after) {
        (Some(t), Some(h)) => t.min(h),
        (None, Some(h)) => h,
        (t, None) => t.unwrap_or(DEFAULT_TIMEOUT_SECS),
    };
    let command = Duration::try_from_secs_f64(secs).unwrap_or(Duration::ZERO);
    context_with_timeout(command + EXEC_DEADLINE_MARGIN)
}

/// A stream's fields about `spool_output`, which sudo_exec does not take.
const SPOOL_FIELDS: &[&str] = &["spool_path", "spool_truncated"];

/// The answer of `exec` and `sudo_exec`: the fields of a hand-off only when there was one,
/// the spool's only when the tool spools.
fn exec_answer(outcome: Result<ExecResult, DaemonError>, spools: bool) -> CallToolResult {
    let handed_off = outcome.as_ref().is_ok_and(|r| r.handed_off.is_some());
    answer::respond_trimmed(outcome, |fields| {
        if !handed_off {
            for key in ["handed_off", "handle_id", "pid"] {
                fields.remove(key);
            }
        }
        for stream in ["stdout", "stderr"] {
            if let Some(stream) = fields.get_mut(stream).and_then(|s| s.as_object_mut()) {
                if !handed_off {
                    stream.remove("next_offset");
                }
                if !spools {
                    stream.retain(|name, _| !SPOOL_FIELDS.contains(&name.as_str()));
                }
            }
        }
    })
}

/// What `exec` and `sudo_exec` arguments share: the session, the limit, the hand-off.
trait ExecLike: serde::de::DeserializeOwned + JsonSchema + 'static {
    /// Whether the tool takes `spool_output`.
    const SPOOLS: bool;

    /// The session's id and key, the timeout and `handoff_after`.
    fn parts(&mut self) -> (SessionAuth, Option<f64>, Option<f64>);
}

/// Both argument structs hold the same fields under the same names.
macro_rules! exec_like {
    ($($args:ty => $spools:expr),*) => {$(
        impl ExecLike for $args {
            const SPOOLS: bool = $spools;

            fn parts(&mut self) -> (SessionAuth, Option<f64>, Option<f64>) {
                let auth = SessionAuth {
                    session_id: std::mem::take(&mut self.session_id),
                    session_key: std::mem::take(&mut self.session_key),
                };
                (auth, self.timeout, self.handoff_after)
            }
        }
    )*};
}

exec_like!(ExecArgs => true, SudoExecArgs => false);

impl Shim {
    /// An exec-like call: decoded, given its deadline and hand-off settings, followed under a
    /// fresh progress key when the client asked for progress, and cancelled with the client's
    /// request.
    async fn exec_like<A, F, Fut>(
        &self,
        raw: JsonObject,
        cancel: CancellationToken,
        progress: Option<Progress>,
        call: F,
    ) -> CallToolResult
    where
        A: ExecLike,
        F: FnOnce(A, SessionAuth, Handoff, tarpc::context::Context) -> Fut,
        Fut: std::future::Future<Output = Result<ExecResult, DaemonError>>,
    {
        exec_answer(
            async {
                let mut a: A = args::decode(raw)?;
                let (auth, timeout, handoff_after) = a.parts();
                let ctx = deadline(timeout, handoff_after);
                let key = progress.as_ref().map(|_| progress::new_key());
                let poll = progress::of_run(
                    self.daemon.clone(),
                    auth.clone(),
                    key.clone().unwrap_or_default(),
                );
                let handoff = Handoff {
                    after: handoff_after,
                    progress_key: key,
                };
                let run = unless_cancelled(call(a, auth, handoff, ctx), cancel);
                progress::follow(run, progress, poll).await
            }
            .await,
            A::SPOOLS,
        )
    }
}

/// Runs a daemon call until it answers or the MCP client cancels. Dropping the call on
/// cancellation makes tarpc cancel it in the daemon, whose run then kills the remote process
/// group.
pub(crate) async fn unless_cancelled<T>(
    call: impl std::future::Future<Output = Result<T, DaemonError>>,
    cancel: CancellationToken,
) -> Result<T, DaemonError> {
    tokio::select! {
        r = call => r,
        _ = cancel.cancelled() => Err(DaemonError::new(ErrorCode::InternalError, "cancelled")),
    }
}

#[tool_router(router = exec_router, vis = "pub(crate)")]
impl Shim {
    /// Run one non-interactive /bin/sh command on the session's host and return its exit code and
    /// separate stdout/stderr. `ok: true` means the command ran: read `exit_code` (always
    /// there; null when a signal ended it, `signal` then names it, e.g. `TERM`; `timed_out: true`
    /// after the timeout). `stdout` and `stderr` are the text itself; an empty one is left out;
    /// one that was cut, spooled or is not UTF-8 is an object with `data` (head and tail kept),
    /// `encoding`, `total_bytes`, `truncated`, `omitted` (the byte range left out) and
    /// `spool_path` (the whole stream in a local file) as apply. Up to 7 commands run at once on one session, on its channels, shared
    /// with handles and transfers; more wait for one within their `timeout`, and one that got none
    /// is `channels_busy`: nothing ran, a retry is safe. No TTY and an empty stdin (a password
    /// prompt fails; for root use sudo_exec). No shell state persists between calls: use `cwd`, not
    /// `cd`. Each stream keeps at most the daemon's output cap (64 KiB by default, half head, half
    /// tail); `spool_output` keeps everything in local files. A timeout, or cancelling the call,
    /// kills the command's whole process group (TERM, then KILL); background jobs still holding its
    /// output are killed then too (use task_launch for a process that must keep running). Clients
    /// often give up on a call after about a minute, losing its result: when a command may be slow
    /// (builds, tests, upgrades) pass `handoff_after`; for work known to be long use command_start.
    /// To read or change files use read_file_range, write_file or edit_file, not `cat` or `echo`.
    /// Errors: `remote_path_not_found` (the `cwd` is missing: check it with stat),
    /// `invalid_command` (over 1 MiB, or a NUL byte: upload a script with upload_start and run
    /// that), `invalid_local_path` (the local root cannot hold the spool or hand-off files: tell
    /// the user), `invalid_arguments` (a value out of range).
    #[tool(
        input_schema = schema_for_input::<ExecArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<ExecResult>>(),
        annotations(title = "Run a shell command", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn exec(
        &self,
        raw: JsonObject,
        cancel: CancellationToken,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> CallToolResult {
        let call = |a: ExecArgs, auth, handoff, ctx| {
            let req = ExecRequest {
                auth,
                command: a.command,
                cwd: a.cwd,
                timeout: a.timeout,
                spool_output: a.spool_output.unwrap_or(false),
                local_root: self.local_root_arg(),
                handoff,
            };
            self.daemon
                .call("exec", move |c| async move { c.exec(ctx, req).await })
        };
        self.exec_like(raw, cancel, Progress::asked(&meta, peer), call)
            .await
    }

    /// Run one command as root: `sudo -n -k` starts `/bin/bash --noprofile --norc -s` (bash,
    /// not /bin/sh; sudo's own PATH and root's HOME) and the command runs in it with an empty
    /// stdin, so it works only where the host's sudoers allows that program without a password;
    /// no password is ever asked for or sent. `cwd` is entered as the login user, before sudo.
    /// Otherwise the same limits, answer, timeout and cancellation as `exec`, without
    /// `spool_output` (a handed-off root command is killed as root by `command_kill`); `ok:
    /// true` means the command ran as root: read `exit_code`. Use `exec` for everything that
    /// needs no root. Errors: `sudo_password_required` (stop and ask the user for a NOPASSWD
    /// rule; never pipe a password through `exec`), `sudo_not_allowed` (the host's sudoers,
    /// not the user's policy, denies bash as root; `sudo -n -l` through `exec` lists what it
    /// allows),
    /// `sudo_unavailable` (no sudo on the host); the message quotes sudo. `policy_denied`: the
    /// user forbids root on this host; do not try `sudo` through `exec`, ask the user. Also
    /// exec's `remote_path_not_found` (cwd), `invalid_command`, `invalid_local_path` (hand-off
    /// files) and `invalid_arguments`, acted on as exec says.
    #[tool(
        input_schema = schema_for_input::<SudoExecArgs>().expect("object schema"),
        output_schema = answer::schema_without(
            schema_for_output::<Answer<ExecResult>>(),
            Some("StreamOutput"),
            SPOOL_FIELDS,
        ),
        annotations(title = "Run a command as root", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn sudo_exec(
        &self,
        raw: JsonObject,
        cancel: CancellationToken,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> CallToolResult {
        let call = |a: SudoExecArgs, auth, handoff, ctx| {
            let req = SudoExecRequest {
                auth,
                command: a.command,
                cwd: a.cwd,
                timeout: a.timeout,
                local_root: self.local_root_arg(),
                handoff,
            };
            self.daemon.call(
                "sudo_exec",
                move |c| async move { c.sudo_exec(ctx, req).await },
            )
        };
        self.exec_like(raw, cancel, Progress::asked(&meta, peer), call)
            .await
    }
}
