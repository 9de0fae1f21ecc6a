//! The tarpc service between clients (shim, CLI) and the daemon, and the transport both ends
//! build over the Unix socket.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tarpc::tokio_serde::formats::Bincode;
use tarpc::tokio_util::codec::LengthDelimitedCodec;

use crate::error::DaemonError;
use crate::exec::{ExecRequest, ExecResult};
use crate::session::{ConnectRequest, Connected, Disconnected, SessionSummary};

/// Bumped on every incompatible change of the trait or a wire type. `hello` stays the first
/// method with an unchanged signature forever, so any two versions can compare numbers.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest frame either end accepts. Output capture is bounded far below this by
/// `--max-output-bytes`; the margin only keeps one oversized answer from killing the connection.
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// The answer to `hello`. Its layout is frozen (see [`PROTOCOL_VERSION`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol_version: u32,
    pub daemon_version: String,
    pub pid: u32,
}

/// What `sshmcp daemon status` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonStatus {
    pub pid: u32,
    pub daemon_version: String,
    pub protocol_version: u32,
    pub started_at: String,
    pub socket: String,
    pub state_dir: String,
    pub log_file: String,
    pub default_local_root: String,
    pub ssh_config: Option<String>,
    pub sessions: u32,
    pub max_sessions: u32,
    pub max_output_bytes: u64,
    pub max_transfers: u32,
}

#[tarpc::service]
pub trait Daemon {
    /// Version probe; must remain the first method.
    async fn hello() -> Hello;
    async fn status() -> DaemonStatus;
    /// Closes every session and stops the daemon once this answer is sent.
    async fn shutdown() -> Result<(), DaemonError>;
    async fn connect(req: ConnectRequest) -> Result<Connected, DaemonError>;
    async fn disconnect(session_id: String) -> Result<Disconnected, DaemonError>;
    async fn session_list() -> Vec<SessionSummary>;
    async fn exec(req: ExecRequest) -> Result<ExecResult, DaemonError>;
}

/// The codec on the wire. Bincode is not self-describing: wire types avoid
/// `skip_serializing_if`, `flatten`, untagged enums and `serde_json::Value`.
pub type Codec<Item, SinkItem> = Bincode<Item, SinkItem>;

/// Frames a connected Unix stream the way both ends expect.
pub fn framed(
    stream: tokio::net::UnixStream,
) -> tarpc::tokio_util::codec::Framed<tokio::net::UnixStream, LengthDelimitedCodec> {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME_BYTES)
        .new_framed(stream)
}

/// A call context whose deadline is `d` from now. tarpc's default is 10 s, and a deadline more
/// than about two years away panics inside tarpc, so callers pass real bounds.
pub fn context_with_timeout(d: Duration) -> tarpc::context::Context {
    let mut ctx = tarpc::context::current();
    ctx.deadline = Instant::now() + d.min(Duration::from_secs(7 * 86_400));
    ctx
}

/// How long a client waits for `exec` beyond the command's own timeout: queuing for a channel
/// and terminating the remote process group both happen inside the daemon after the timeout.
pub const EXEC_DEADLINE_MARGIN: Duration = Duration::from_secs(30);
