//! The exec tool: one non-interactive /bin/sh command per call.

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sshmcp_proto::exec::{ExecRequest, ExecResult, StreamOutput};
use sshmcp_proto::limits::DEFAULT_TIMEOUT_SECS;
use sshmcp_proto::service::{EXEC_DEADLINE_MARGIN, context_with_timeout};
use sshmcp_proto::session::SessionAuth;
use sshmcp_proto::{DaemonError, ErrorCode};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use crate::answer::{self, Answer};
use crate::args;
use crate::server::Shim;

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    /// The session to run in (from connect).
    pub session_id: String,
    /// The session's secret key (from connect).
    pub session_key: String,
    /// Shell command text for /bin/sh, at most 1048576 bytes. Stdin is empty.
    pub command: String,
    /// Remote working directory for this call only; an error if it does not exist.
    pub cwd: Option<String>,
    /// Seconds before the remote process group is terminated (0.1..86400); default 60.
    #[schemars(range(min = 0.1, max = 86400.0))]
    pub timeout: Option<f64>,
    /// Also write the complete streams to files under the local root and return their paths.
    pub spool_output: Option<bool>,
}

#[derive(Serialize, JsonSchema)]
pub struct OmittedRange {
    /// First byte left out.
    pub start: u64,
    /// One past the last byte left out.
    pub end: u64,
}

#[derive(Serialize, JsonSchema)]
pub struct StreamOut {
    /// The kept output: all of it, or its head followed by its tail when truncated.
    pub data: String,
    /// `utf-8` (data is the text) or `base64` (the bytes were not valid UTF-8).
    pub encoding: String,
    pub captured_bytes: u64,
    pub total_bytes: u64,
    pub truncated: bool,
    /// The byte range left out between head and tail, when truncated.
    pub omitted: Option<OmittedRange>,
    /// Absolute local path of the complete stream, with spool_output.
    pub spool_path: Option<String>,
}

impl From<StreamOutput> for StreamOut {
    fn from(s: StreamOutput) -> Self {
        Self {
            data: s.data,
            encoding: s.encoding.as_str().to_string(),
            captured_bytes: s.captured_bytes,
            total_bytes: s.total_bytes,
            truncated: s.truncated,
            omitted: s.omitted.map(|r| OmittedRange {
                start: r.start,
                end: r.end,
            }),
            spool_path: s.spool_path,
        }
    }
}

#[derive(Serialize, JsonSchema)]
pub struct ExecOut {
    /// Exit status; null when the command was killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that ended it (`TERM`, `KILL`, or `unknown`), else null.
    pub signal: Option<String>,
    /// Seconds the call took.
    pub duration: f64,
    /// True when the timeout terminated the remote process group.
    pub timed_out: bool,
    pub stdout: StreamOut,
    pub stderr: StreamOut,
}

impl From<ExecResult> for ExecOut {
    fn from(r: ExecResult) -> Self {
        Self {
            exit_code: r.exit_code,
            signal: r.signal,
            duration: r.duration,
            timed_out: r.timed_out,
            stdout: r.stdout.into(),
            stderr: r.stderr.into(),
        }
    }
}

#[tool_router(router = exec_router, vis = "pub(crate)")]
impl Shim {
    /// Run one non-interactive, non-PTY /bin/sh command on the session's host and return its
    /// exit code and separate stdout/stderr (bounded: long output keeps head and tail). No shell
    /// state persists between calls; use `cwd` for the directory. Cancelling the call kills the
    /// remote command.
    #[tool(
        input_schema = schema_for_input::<ExecArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<ExecOut>>(),
        annotations(title = "Run a shell command", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn exec(&self, raw: JsonObject, cancel: CancellationToken) -> CallToolResult {
        answer::respond(
            async {
                let a: ExecArgs = args::decode(raw)?;
                let timeout = a.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
                let deadline = Duration::try_from_secs_f64(timeout).unwrap_or(Duration::ZERO)
                    + EXEC_DEADLINE_MARGIN;
                let req = ExecRequest {
                    auth: SessionAuth {
                        session_id: a.session_id,
                        session_key: a.session_key,
                    },
                    command: a.command,
                    cwd: a.cwd,
                    timeout: a.timeout,
                    spool_output: a.spool_output.unwrap_or(false),
                    local_root: self.local_root_arg(),
                };
                let ctx = context_with_timeout(deadline);
                // Dropping the call on cancellation makes tarpc cancel it in the daemon, whose
                // command guard then kills the remote process group.
                let call = self.daemon.call(|c| async move { c.exec(ctx, req).await });
                let result = tokio::select! {
                    r = call => r?,
                    _ = cancel.cancelled() => {
                        return Err(DaemonError::new(ErrorCode::InternalError, "cancelled"));
                    }
                };
                Ok(ExecOut::from(result))
            }
            .await,
        )
    }
}
