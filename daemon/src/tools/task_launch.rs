//! `task_launch`: a detached process that outlives sessions, started on the host (`tasks`).

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::service::tools;
use sshmcp_proto::task::{TaskLaunchRequest, TaskLaunched};

use crate::operation::Operation;
use crate::session::{Registry, Session};
use crate::tasks::launch;

impl Operation for tools::TaskLaunch {
    fn summary(req: &TaskLaunchRequest) -> String {
        crate::audit::command(&req.command)
    }

    async fn run(
        req: TaskLaunchRequest,
        session: Arc<Session>,
        registry: &Registry,
    ) -> Result<TaskLaunched, DaemonError> {
        launch(&session, registry.settings.max_output_bytes, req).await
    }
}
