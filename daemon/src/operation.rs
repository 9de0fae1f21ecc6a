//! What a tool that works on a session's host declares once, beside its operation: which
//! tool it is, what it takes and answers, and the operation itself. The service runs every
//! one the same way (`DaemonService::operate`: the key, the session's state, the policy, the
//! trail), so a tool's knowledge stays in its own file.

use std::future::Future;
use std::sync::Arc;

use sshmcp_proto::DaemonError;
use sshmcp_proto::session::SessionAuth;
use sshmcp_proto::tool::Tool;

use crate::audit::{Answer, Summary};
use crate::session::{Registry, Session};

/// A tool's operation on a session's host.
pub trait Operation {
    const TOOL: Tool;
    type Request: Summary + Authed + Send + 'static;
    type Answer: Answer + Send;

    /// What is wrong with the request whatever the session: refused before the session is
    /// looked at, and never reaches the trail.
    fn check(_: &Self::Request) -> Result<(), DaemonError> {
        Ok(())
    }

    /// The operation, once the call passed the checks.
    fn run(
        req: Self::Request,
        session: Arc<Session>,
        registry: &Registry,
    ) -> impl Future<Output = Result<Self::Answer, DaemonError>> + Send;
}

/// A request that names its session.
pub trait Authed {
    fn auth(&self) -> &SessionAuth;
}

macro_rules! authed {
    ($($request:ty),* $(,)?) => {
        $(impl Authed for $request {
            fn auth(&self) -> &SessionAuth {
                &self.auth
            }
        })*
    };
}

authed!(
    sshmcp_proto::exec::ExecRequest,
    sshmcp_proto::exec::SudoExecRequest,
    sshmcp_proto::inspect::StatRequest,
    sshmcp_proto::inspect::HostInfoRequest,
    sshmcp_proto::inspect::ListRequest,
    sshmcp_proto::inspect::ReadRangeRequest,
    sshmcp_proto::command::CommandStartRequest,
    sshmcp_proto::command::CommandKillRequest,
    sshmcp_proto::task::TaskLaunchRequest,
    sshmcp_proto::task::TaskStatusRequest,
    sshmcp_proto::task::TaskKillRequest,
    sshmcp_proto::transfer::TransferStartRequest,
    sshmcp_proto::files::WriteFileRequest,
    sshmcp_proto::files::EditFileRequest,
    sshmcp_proto::files::MakeDirectoryRequest,
    sshmcp_proto::files::RemovePathRequest,
    sshmcp_proto::files::CopyMoveRequest,
    sshmcp_proto::forward::ForwardStartRequest,
    sshmcp_proto::forward::ForwardStopRequest,
);
