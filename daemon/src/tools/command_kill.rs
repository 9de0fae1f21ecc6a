//! `command_kill`: a command handle's process group signalled if it still runs
//! (`commands::kill`).

use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::command::{CommandKillRequest, CommandKilled};
use sshmcp_proto::service::tools;

use crate::commands::kill::kill;
use crate::operation::{Operation, to_the_end};
use crate::session::{Registry, Session};

/// To its end: a kill, once sent, goes on on the host; a call dropped before its handle was
/// marked `killed` and recorded would leave the command to be reported as ended on its own.
impl Operation for tools::CommandKill {
    fn summary(req: &CommandKillRequest) -> String {
        format!("{} signal {}", req.handle_id, req.signal.unwrap_or(15))
    }

    async fn run(
        req: CommandKillRequest,
        session: Arc<Session>,
        _: &Registry,
    ) -> Result<CommandKilled, DaemonError> {
        to_the_end("command_kill", async move { kill(&session, req).await }).await
    }
}
