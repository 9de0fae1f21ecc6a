//! The MCP tools: those made from their declarations in `sshmcp-proto` (`derived`), and the
//! rest one file per group. Each takes its raw arguments (see `args`), calls the daemon, and
//! shapes the answer (see `answer`).

pub mod commands;
pub mod derived;
pub mod exec;
pub mod inspect;
pub mod session;

use std::time::Duration;

/// The deadline of a status call that may wait `wait_seconds` for its subject's end, beside
/// `margin` for its own work: the wait as the daemon will take it (it refuses a value outside
/// 0..=300, so clamping here only keeps a bad value from making a bad deadline).
pub(crate) fn waiting(wait_seconds: Option<f64>, margin: Duration) -> tarpc::context::Context {
    let wait = sshmcp_proto::described::waited(wait_seconds);
    sshmcp_proto::service::context_with_timeout(wait + margin)
}
