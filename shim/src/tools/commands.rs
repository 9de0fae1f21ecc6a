//! `command_status`: a command handle's state and output, with progress notifications while
//! it waits and a whole ended stream as its text (starting, killing and listing handles are
//! derived).

use std::time::Duration;

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject, RequestMetaObject};
use rmcp::{Peer, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use sshmcp_proto::command::{CommandReport, CommandStatusRequest};
use sshmcp_proto::service::tools;
use sshmcp_proto::session::SessionAuth;
use tokio_util::sync::CancellationToken;

use super::unless_cancelled;
use crate::answer::{self, Answer};
use crate::args;
use crate::progress::{self, Progress};
use crate::server::Shim;

/// Room beyond a call's own waiting for the daemon to answer.
const MARGIN: Duration = sshmcp_proto::command::COMMAND_MARGIN;

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandStatusArgs {
    /// The session that started the command.
    pub session_id: String,
    pub session_key: String,
    /// From command_start or a hand-off.
    pub handle_id: String,
    /// Seconds to long-poll for the end (e.g. 30); default 0.
    #[schemars(range(min = 0.0, max = 300.0))]
    pub wait_seconds: Option<f64>,
    /// Offset to read from (the last `next_offset`); absent: the tail.
    pub stdout_offset: Option<u64>,
    /// As `stdout_offset`.
    pub stderr_offset: Option<u64>,
    /// Per stream (cap 64 KiB); default the cap, 4096 for a tail.
    #[schemars(range(min = 1))]
    pub max_bytes: Option<u64>,
}

#[tool_router(router = commands_router, vis = "pub(crate)")]
impl Shim {
    /// Read a command handle's state and output, also after it ended or `connection_lost`.
    /// `status`: `running`, `completed` (`exit_code`), `timed_out`, `killed`, `lost` (connection or
    /// daemon died: it may still run; `kill -- -<pid>` via exec ends its group); `signal` names
    /// what ended it. `stdout`, `stderr`: a plain string is the whole stream, nothing more to read;
    /// else an object with `data` (`encoding: base64` if not UTF-8), `next_offset` (pass back as
    /// that stream's offset: more to read while it is below `total_bytes` or the command runs),
    /// `total_bytes`, `truncated` (1 GiB spool cap hit). Errors: `command_not_found` (see
    /// command_list; a task PID: task_status), `invalid_arguments` (offset past `total_bytes`).
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
                let call = self.daemon.run::<tools::CommandStatus>(ctx, req);
                let waits = a.wait_seconds.is_some_and(|wait| wait > 0.0);
                let progress = Progress::asked(&meta, peer).filter(|_| waits);
                progress::follow(unless_cancelled(call, cancel), progress, poll).await
            }
            .await,
            whole_streams_as_text,
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
