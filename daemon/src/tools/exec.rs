//! `exec`: one command run on the session's host and waited for (`exec::exec`), handed off to
//! a command handle when it outlives `handoff_after`.

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::exec::{ExecRequest, ExecResult};
use sshmcp_proto::service::tools;

use crate::exec::{check, exec};
use crate::operation::Operation;
use crate::session::{Registry, Session};

impl Operation for tools::Exec {
    fn summary(req: &ExecRequest) -> String {
        crate::audit::command(&req.command)
    }

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
