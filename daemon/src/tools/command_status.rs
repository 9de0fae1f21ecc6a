//! `command_status`: a command handle's state and output, read from the daemon's own state
//! and the handle's output files (`commands::status`), waiting for its end when asked.

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::command::{CommandReport, CommandStatusRequest};
use sshmcp_proto::service::tools;

use crate::commands::status;
use crate::operation::{Operation, Runs};
use crate::session::{Registry, Session};

impl Operation for tools::CommandStatus {
    const RUNS: Runs = Runs::InDaemon;

    fn summary(req: &CommandStatusRequest) -> String {
        req.handle_id.clone()
    }

    async fn run(
        req: CommandStatusRequest,
        session: Arc<Session>,
        registry: &Registry,
    ) -> Result<CommandReport, DaemonError> {
        status(&session, &registry.settings, req).await
    }
}
