//! The daemon's side of the tarpc trait: each call checked, routed to the registry or the exec
//! engine, and converted to wire types.

use std::path::PathBuf;
use std::sync::Arc;

use sshmcp_proto::exec::{ExecRequest, ExecResult};
use sshmcp_proto::service::{Daemon, DaemonStatus, Hello, PROTOCOL_VERSION};
use sshmcp_proto::session::{ConnectRequest, Connected, Disconnected, SessionSummary};
use sshmcp_proto::{DaemonError, ErrorCode};
use tarpc::context::Context;
use tokio_util::sync::CancellationToken;

use crate::config::check_local_root;
use crate::exec::{CommandSpec, RunError, request, run_command, spool};
use crate::session::Registry;
use crate::session::registry::connection_lost;

/// The service handed to tarpc; cheap to clone (one per request).
#[derive(Clone)]
pub struct DaemonService {
    pub registry: Arc<Registry>,
    /// Fired to stop the daemon after `shutdown` answered.
    pub stop: CancellationToken,
    pub started_at: Arc<str>,
}

impl Daemon for DaemonService {
    async fn hello(self, _: Context) -> Hello {
        Hello {
            protocol_version: PROTOCOL_VERSION,
            daemon_version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
        }
    }

    async fn status(self, _: Context) -> DaemonStatus {
        let s = &self.registry.settings;
        DaemonStatus {
            pid: std::process::id(),
            daemon_version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: PROTOCOL_VERSION,
            started_at: self.started_at.to_string(),
            socket: s.runtime.socket().display().to_string(),
            state_dir: s.state_dir.display().to_string(),
            log_file: s.log_file().display().to_string(),
            default_local_root: s.local_root.display().to_string(),
            ssh_config: s.ssh_config.as_ref().map(|p| p.display().to_string()),
            sessions: self.registry.session_count() as u32,
            max_sessions: s.max_sessions,
            max_output_bytes: s.max_output_bytes,
            max_transfers: s.max_transfers,
        }
    }

    /// Closes every session before answering; the daemon then exits. The answer can be
    /// lost in that exit, so clients confirm the stop by the pidfile lock, not by the answer.
    /// The work runs as its own task: a caller that goes away must not leave a daemon that
    /// refuses new sessions but never stops.
    async fn shutdown(self, _: Context) -> Result<(), DaemonError> {
        tracing::info!("shutdown requested");
        let (registry, stop) = (self.registry.clone(), self.stop.clone());
        tokio::spawn(async move {
            registry.close_all().await;
            stop.cancel();
        })
        .await
        .map_err(|e| DaemonError::internal(format!("shutdown failed: {e}")))
    }

    async fn connect(self, _: Context, req: ConnectRequest) -> Result<Connected, DaemonError> {
        self.registry.connect(req).await
    }

    async fn disconnect(self, _: Context, session_id: String) -> Result<Disconnected, DaemonError> {
        self.registry.disconnect(&session_id).await
    }

    async fn session_list(self, _: Context) -> Vec<SessionSummary> {
        self.registry.list()
    }

    async fn exec(self, _: Context, req: ExecRequest) -> Result<ExecResult, DaemonError> {
        request::check_command(&req.command)?;
        request::check_cwd(req.cwd.as_deref())?;
        let timeout = request::check_timeout(req.timeout)?;
        let session = self.registry.authorize(&req.auth)?;
        let settings = &self.registry.settings;
        let spool = if req.spool_output {
            let root = match &req.local_root {
                Some(root) => {
                    let root = PathBuf::from(root);
                    check_local_root(&root)
                        .map_err(|m| DaemonError::new(ErrorCode::InvalidLocalPath, m))?;
                    root
                }
                None => settings.local_root.clone(),
            };
            Some(spool::create_pair(&root, &session.id).map_err(|e| {
                DaemonError::new(
                    ErrorCode::InvalidLocalPath,
                    format!("cannot create spool files under the local root: {e}"),
                )
            })?)
        } else {
            None
        };
        let _running = session.begin_command();
        let outcome = run_command(CommandSpec {
            control_path: &session.control_path,
            slots: &session.slots,
            command: &req.command,
            cwd: req.cwd.as_deref(),
            timeout,
            max_output_bytes: settings.max_output_bytes,
            spool,
            cancel: &session.cancel,
        })
        .await;
        outcome.map_err(|e| match e {
            RunError::ConnectionLost => connection_lost(&session),
            RunError::NoCwd => DaemonError::new(ErrorCode::RemotePathNotFound, e.to_string()),
            RunError::Cancelled => DaemonError::new(ErrorCode::SessionClosed, e.to_string()),
            RunError::Failed(m) => DaemonError::internal(m),
        })
    }
}
