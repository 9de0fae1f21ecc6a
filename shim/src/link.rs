//! The shim's connection to the daemon: made (and the daemon started) on first use, dropped
//! when the daemon goes away so the next call reconnects. tarpc clients never reconnect.

use std::future::Future;
use std::path::PathBuf;

use sshmcp_proto::client::{connect_or_start, daemon_program};
use sshmcp_proto::paths::RuntimePaths;
use sshmcp_proto::{DaemonClient, DaemonError, ErrorCode};
use tarpc::client::RpcError;

pub struct DaemonLink {
    paths: RuntimePaths,
    program: PathBuf,
    client: tokio::sync::Mutex<Option<Linked>>,
}

/// A live connection and the tools its daemon serves.
#[derive(Clone)]
struct Linked {
    client: DaemonClient,
    capabilities: Vec<String>,
}

impl DaemonLink {
    pub fn new(paths: RuntimePaths) -> Self {
        Self {
            paths,
            program: daemon_program(),
            client: tokio::sync::Mutex::new(None),
        }
    }

    async fn linked(&self) -> Result<Linked, DaemonError> {
        let mut slot = self.client.lock().await;
        if let Some(linked) = slot.as_ref() {
            return Ok(linked.clone());
        }
        let conn = connect_or_start(&self.paths, &self.program)
            .await
            .map_err(|e| DaemonError::new(ErrorCode::DaemonUnavailable, e.to_string()))?;
        let linked = Linked {
            client: conn.client,
            capabilities: conn.capabilities,
        };
        *slot = Some(linked.clone());
        Ok(linked)
    }

    /// Runs one call of `tool`. A daemon older than this shim that does not serve the tool is
    /// told apart from a failure. A transport failure is reported, not retried: the call may
    /// have reached the daemon, and running a command twice is worse than asking again.
    pub async fn call<T, F, Fut>(&self, tool: &str, f: F) -> Result<T, DaemonError>
    where
        F: FnOnce(DaemonClient) -> Fut,
        Fut: Future<Output = Result<Result<T, DaemonError>, RpcError>>,
    {
        let linked = self.linked().await?;
        if !linked.capabilities.iter().any(|c| c == tool) {
            return Err(DaemonError::new(
                ErrorCode::DaemonUnavailable,
                format!(
                    "the running daemon is older than this server and does not offer {tool}; \
                     restart it with `sshmcp daemon stop` once its sessions are no longer needed"
                ),
            ));
        }
        match f(linked.client).await {
            Ok(answer) => answer,
            Err(RpcError::DeadlineExceeded) => Err(DaemonError::new(
                ErrorCode::InternalError,
                "the daemon did not answer in time",
            )),
            Err(e) => {
                *self.client.lock().await = None;
                Err(DaemonError::new(
                    ErrorCode::DaemonUnavailable,
                    format!("the connection to the daemon failed ({e}); retry the call"),
                ))
            }
        }
    }
}
