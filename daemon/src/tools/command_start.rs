//! `command_start`: a command started as a handle that outlives the call (`commands`).

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::command::{CommandStartRequest, CommandStarted};
use sshmcp_proto::service::tools;

use crate::commands::start;
use crate::operation::Operation;
use crate::session::{Registry, Session};

impl Operation for tools::CommandStart {
    fn summary(req: &CommandStartRequest) -> String {
        crate::audit::command(&req.command)
    }

    async fn run(
        req: CommandStartRequest,
        session: Arc<Session>,
        registry: &Registry,
    ) -> Result<CommandStarted, DaemonError> {
        start(&session, &registry.settings, req).await
    }
}
