//! The `exec` tool's operation: the caller's text as a program on the session's host, under
//! the request's limits, with complete copies of its streams when asked for.

pub mod request;
pub mod sudo;

use std::path::PathBuf;

use sshmcp_proto::exec::{ExecRequest, ExecResult};
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::config::{Settings, check_local_root};
use crate::remote::{self, Program, spool};
use crate::session::Session;

/// Checks the request before any session is looked at.
pub fn check(req: &ExecRequest) -> Result<std::time::Duration, DaemonError> {
    request::check_command(&req.command)?;
    request::check_cwd(req.cwd.as_deref())?;
    request::check_timeout(req.timeout)
}

/// Runs the command and answers with its streams and exit status.
pub async fn exec(
    session: &Session,
    settings: &Settings,
    req: ExecRequest,
) -> Result<ExecResult, DaemonError> {
    let timeout = check(&req)?;
    let mut program = Program::new(req.command, timeout, settings.max_output_bytes);
    program.cwd = req.cwd;
    if req.spool_output {
        let root = match req.local_root {
            Some(root) => {
                let root = PathBuf::from(root);
                check_local_root(&root)
                    .map_err(|m| DaemonError::new(ErrorCode::InvalidLocalPath, m))?;
                root
            }
            None => settings.local_root.clone(),
        };
        let cap = settings.max_spool_bytes;
        program.spool = Some(spool::create_pair(&root, &session.id, cap).map_err(|e| {
            DaemonError::new(
                ErrorCode::InvalidLocalPath,
                format!("cannot create spool files under the local root: {e}"),
            )
        })?);
    }
    Ok(remote::run(&session.host, program).await?)
}
