//! The MCP tools: those made from their declarations in `sshmcp-proto` (`derived`), and the
//! rest one file per group. Each takes its raw arguments (see `args`), calls the daemon, and
//! shapes the answer (see `answer`).

pub mod commands;
pub mod derived;
pub mod exec;
pub mod session;

use std::time::Duration;

use sshmcp_proto::{DaemonError, ErrorCode};
use tokio_util::sync::CancellationToken;

/// The deadline of a status call that may wait `wait_seconds` for its subject's end, beside
/// `margin` for its own work: the wait as the daemon will take it (it refuses a value outside
/// 0..=300, so clamping here only keeps a bad value from making a bad deadline).
pub(crate) fn waiting(wait_seconds: Option<f64>, margin: Duration) -> tarpc::context::Context {
    let wait = sshmcp_proto::described::waited(wait_seconds);
    sshmcp_proto::service::context_with_timeout(wait + margin)
}

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
