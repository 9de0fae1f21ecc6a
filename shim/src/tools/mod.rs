//! The MCP tools: those made from their declarations in `sshmcp-proto` (`derived`), and the
//! rest one file per group. Each takes its raw arguments (see `args`), calls the daemon, and
//! shapes the answer (see `answer`).

pub mod derived;
pub mod session;

use sshmcp_proto::{DaemonError, ErrorCode};
use tokio_util::sync::CancellationToken;

/// Runs a daemon call until it answers or the MCP client cancels. Dropping the call on
/// cancellation makes tarpc cancel it in the daemon, whose run then kills the remote process
/// group (an operation that must finish runs `to_the_end` there).
pub(crate) async fn unless_cancelled<T>(
    call: impl std::future::Future<Output = Result<T, DaemonError>>,
    cancel: CancellationToken,
) -> Result<T, DaemonError> {
    tokio::select! {
        r = call => r,
        _ = cancel.cancelled() => Err(DaemonError::new(ErrorCode::InternalError, "cancelled")),
    }
}
