//! `task_kill`: a detached task's process group signalled if its PID is still that task
//! (`tasks`).

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::service::tools;
use sshmcp_proto::task::{TaskKillRequest, TaskKilled};

use crate::operation::Operation;
use crate::session::{Registry, Session};
use crate::tasks::kill;

impl Operation for tools::TaskKill {
    fn summary(req: &TaskKillRequest) -> String {
        format!("pid {} signal {}", req.pid, req.signal.unwrap_or(15))
    }

    async fn run(
        req: TaskKillRequest,
        session: Arc<Session>,
        _: &Registry,
    ) -> Result<TaskKilled, DaemonError> {
        kill(&session, req).await
    }
}
