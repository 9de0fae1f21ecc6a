//! The `exec` tool's operation: the caller's text as a program on the session's host, under
//! the request's limits, with complete copies of its streams when asked for, handed off to a
//! command handle when it runs long (see `handoff`).

pub mod handoff;
pub mod request;
pub mod sudo;

use std::path::PathBuf;

use sshmcp_proto::exec::{ExecRequest, ExecResult};
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::config::Settings;
use crate::remote::Program;
use crate::session::Session;
use sshmcp_local::paths::check_local_root;

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
