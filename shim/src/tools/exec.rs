//! The exec tool: one non-interactive /bin/sh command per call.

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject, RequestMetaObject};
use rmcp::{Peer, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use sshmcp_proto::DaemonError;
use sshmcp_proto::exec::{ExecRequest, ExecResult, Handoff, SudoExecRequest};
use sshmcp_proto::limits::DEFAULT_TIMEOUT_SECS;
use sshmcp_proto::service::tools;
use sshmcp_proto::service::{EXEC_DEADLINE_MARGIN, context_with_timeout};
use sshmcp_proto::session::SessionAuth;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use super::unless_cancelled;
use crate::answer::{self, Answer};
use crate::args;
use crate::progress::{self, Progress};
use crate::server::Shim;

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    pub session_id: String,
    pub session_key: String,
    /// Shell text for /bin/sh, at most 1 MiB; a syntax error anywhere runs nothing.
    pub command: String,
    /// Remote working directory; default: home.
    pub cwd: Option<String>,
    /// Seconds until the process group is killed (also after a hand-off); default 60, none
    /// with `handoff_after`.
    #[schemars(range(min = 0.1, max = 86400.0))]
    pub timeout: Option<f64>,
    /// Also save whole streams as local files (`spool_path`); delete them with your own shell.
    pub spool_output: Option<bool>,
    /// Seconds (e.g. 30, under your client's call limit) until a running command is handed
    /// off; none if `timeout` <= it.
    #[schemars(range(min = 1.0, max = 86400.0))]
    pub handoff_after: Option<f64>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SudoExecArgs {
    pub session_id: String,
    pub session_key: String,
    /// Shell text for root's bash, at most 1 MiB.
    pub command: String,
    /// As in exec; entered before sudo.
    pub cwd: Option<String>,
    /// As in exec.
    #[schemars(range(min = 0.1, max = 86400.0))]
    pub timeout: Option<f64>,
    /// As in exec.
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
                // A handed-off command is read with command_status: without it (`--tools`),
                // its result could never be read.
                if handoff_after.is_some() && !self.exposes(sshmcp_proto::tool::Tool::CommandStatus)
                {
                    return Err(DaemonError::invalid_arguments(
                        "handoff_after needs command_status, which this server does not expose \
                         (--tools); leave it out, or use a timeout",
                    ));
                }
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

#[tool_router(router = exec_router, vis = "pub(crate)")]
impl Shim {
    /// Run one /bin/sh command as the login user and wait (no TTY, empty stdin; root: sudo_exec).
    /// `exit_code` is null if a signal ended the shell (`signal` names it; `timed_out: true` after
    /// `timeout`). `stdout`, `stderr`: the text; if cut, not UTF-8 or spooled, an object: `data`
    /// (head and tail if cut), `encoding`, `total_bytes`, `truncated` (over the 64 KiB cap),
    /// `omitted` (`start`, `end` of bytes left out), `spool_path`. Timeout or cancel kills the
    /// whole process group, background jobs too (to keep one: task_launch). Maybe slow? Pass
    /// `handoff_after`: still running then, it answers `handed_off: true`, `handle_id`, output so
    /// far, each stream's `next_offset`: go on with command_status. Errors: `remote_path_not_found`
    /// (no such `cwd`), `invalid_command` (too long or NUL: upload_start a script, run it),
    /// `invalid_local_path` (local root unusable: tell the user).
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
            self.daemon.run::<tools::Exec>(ctx, req)
        };
        self.exec_like(raw, cancel, Progress::asked(&meta, peer), call)
            .await
    }

    /// Run one command as root in bash via `sudo -n` (no login shell: sudoers sets `PATH`, `HOME`),
    /// only where the host's sudoers needs no password (none is ever sent). Answer, `timeout`,
    /// hand-off and kills as exec (command_kill kills as root); no `spool_output`. No root needed:
    /// exec. Errors: `sudo_password_required` (ask the user for a NOPASSWD rule; never pipe a
    /// password in), `sudo_not_allowed` (sudoers denies it; `sudo -n -l` via exec lists what it
    /// may), `sudo_unavailable` (no sudo), `policy_denied` (root is forbidden here: ask the user);
    /// others as exec.
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
            self.daemon.run::<tools::SudoExec>(ctx, req)
        };
        self.exec_like(raw, cancel, Progress::asked(&meta, peer), call)
            .await
    }
}
