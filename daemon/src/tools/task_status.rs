//! `task_status`: a detached task checked by its PID, its logs' ends read (`tasks`).

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::service::tools;
use sshmcp_proto::task::{TaskReport, TaskStatusRequest};

use crate::operation::Operation;
use crate::session::{Registry, Session};
use crate::tasks::status;

impl Operation for tools::TaskStatus {
    fn summary(req: &TaskStatusRequest) -> String {
        format!("pid {}", req.pid)
    }

    async fn run(
        req: TaskStatusRequest,
        session: Arc<Session>,
        registry: &Registry,
    ) -> Result<TaskReport, DaemonError> {
        status(&session, registry.settings.max_output_bytes, req).await
    }
}
