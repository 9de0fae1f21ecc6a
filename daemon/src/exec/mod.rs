//! The `exec` tool's operation: the caller's text as a program on the session's host, under
//! the request's limits, with complete copies of its streams when asked for, handed off to a
//! command handle when it runs long (see `handoff`).

pub mod handoff;
pub mod request;
pub mod sudo;

use std::path::PathBuf;
use std::sync::Arc;

use sshmcp_local::paths::check_local_root;
use sshmcp_proto::exec::{ByteRange, ExecRequest, ExecResult, StreamOutput, encode_bytes};
use sshmcp_proto::tool::Tool;
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::config::Settings;
use crate::operation::Operation;
use crate::remote::{Output, Program, RunResult};
use crate::session::{Registry, Session};

/// Checks the request before any session is looked at.
pub fn check(req: &ExecRequest) -> Result<std::time::Duration, DaemonError> {
    request::check_command(&req.command)?;
    request::check_cwd(req.cwd.as_deref())?;
    request::check_handoff(&req.handoff)?;
    request::check_limit(req.timeout, req.handoff.after.is_some())
}

/// The local root of a call: the caller's (checked), else the daemon's.
pub fn local_root(given: Option<String>, settings: &Settings) -> Result<PathBuf, DaemonError> {
    match given {
        Some(root) => {
            let root = PathBuf::from(root);
            check_local_root(&root)
                .map_err(|m| DaemonError::new(ErrorCode::InvalidLocalPath, m))?;
            Ok(root)
        }
        None => Ok(settings.local_root.clone()),
    }
}

/// A run's result as `exec` and `sudo_exec` answer it: each stream as text, or as base64 where
/// its bytes are not UTF-8. The wire form is made here, at the tools' edge, never below.
pub fn answer(result: RunResult) -> ExecResult {
    ExecResult {
        exit_code: result.exit_code,
        signal: result.signal,
        duration: result.duration,
        timed_out: result.timed_out,
        stdout: stream(result.stdout),
        stderr: stream(result.stderr),
        handed_off: None,
        handle_id: None,
        pid: None,
    }
}

fn stream(output: Output) -> StreamOutput {
    let captured_bytes = output.bytes.len() as u64;
    let (data, encoding) = encode_bytes(output.bytes);
    StreamOutput {
        data,
        encoding,
        captured_bytes,
        total_bytes: output.total_bytes,
        truncated: output.omitted.is_some(),
        omitted: output.omitted.map(|range| ByteRange {
            start: range.start,
            end: range.end,
        }),
        spool_truncated: output.spooled.as_ref().is_some_and(|s| s.truncated),
        spool_path: output.spooled.map(|s| s.path),
        next_offset: None,
    }
}

/// Runs the command and answers with its streams and exit status.
pub async fn exec(
    session: &Session,
    settings: &Settings,
    req: ExecRequest,
) -> Result<ExecResult, DaemonError> {
    let timeout = check(&req)?;
    let mut program = Program::new(req.command.clone(), timeout, settings.max_output_bytes);
    program.command = true;
    program.cwd = req.cwd;
    let caller = handoff::Caller {
        tool: "exec",
        command: &req.command,
    };
    Ok(handoff::run(
        session,
        settings,
        caller,
        program,
        req.handoff,
        req.local_root,
        req.spool_output,
    )
    .await?)
}

/// `exec`.
pub struct Exec;

impl Operation for Exec {
    const TOOL: Tool = Tool::Exec;
    type Request = ExecRequest;
    type Answer = ExecResult;

    fn check(req: &ExecRequest) -> Result<(), DaemonError> {
        check(req).map(drop)
    }

    async fn run(
        req: ExecRequest,
        session: Arc<Session>,
        registry: &Registry,
    ) -> Result<ExecResult, DaemonError> {
        exec(&session, &registry.settings, req).await
    }
}
