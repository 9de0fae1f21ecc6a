//! The shim's connection to the daemon: made (and the daemon started) on first use, and made
//! again, the daemon started again if need be, when the daemon went away between calls.
//! tarpc clients never reconnect by themselves.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use sshmcp_local::client::{Connection, connect_or_start, daemon_program};
use sshmcp_local::paths::RuntimePaths;
use sshmcp_proto::service::ToolMethod;
use sshmcp_proto::tool::Tool;
use sshmcp_proto::{DaemonClient, DaemonError, ErrorCode};
use tarpc::client::RpcError;
use tarpc::context::Context;

pub struct DaemonLink {
    /// The runtime directory the MCP client gave (`--runtime-dir`), if any: the directory
    /// itself is resolved at each connection, where the user's daemon is then.
    runtime_dir: Option<PathBuf>,
    program: PathBuf,
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// The MCP client's name and version, told to every daemon connection for its audit
    /// trail.
    client: std::sync::OnceLock<String>,
    /// What the connected daemon was started with that this server's environment asks
    /// otherwise (see [`settings_note`]).
    settings_note: std::sync::Mutex<Option<String>>,
}

impl DaemonLink {
    pub fn new(runtime_dir: Option<PathBuf>) -> Self {
        Self {
            runtime_dir,
            program: daemon_program(),
            connection: tokio::sync::Mutex::new(None),
            client: std::sync::OnceLock::new(),
            settings_note: std::sync::Mutex::new(None),
        }
    }

    /// Says, when it is so, that the daemon serving this server reads another ssh config
    /// than this server's environment names: a connect that failed may owe it that.
    pub fn settings_note(&self) -> Option<String> {
        self.settings_note
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Notes the MCP client's name and version, once: the first call that gives one counts.
    pub fn name_client(&self, who: impl FnOnce() -> Option<(String, String)>) {
        if self.client.get().is_none()
            && let Some((name, version)) = who()
        {
            let _ = self.client.set(format!("{name} {version}"));
        }
    }

    /// A connection whose daemon has not closed it: the current one, or a new one when the
    /// daemon went away since the last call (a crash, `sshmcp daemon restart`).
    async fn connected(&self) -> Result<Arc<Connection>, DaemonError> {
        let mut slot = self.connection.lock().await;
        if let Some(conn) = slot.as_ref() {
            if !conn.daemon_gone() {
                return Ok(conn.clone());
            }
            tracing::info!("the daemon closed the connection; connecting again");
        }
        *slot = None;
        let paths = RuntimePaths::resolve(self.runtime_dir.clone());
        let conn = connect_or_start(&paths, &self.program).await.map_err(|e| {
            // The client's log keeps it whole, for the person; an agent reads one line: a
            // TOML error's where and what.
            tracing::warn!("no daemon: {e}");
            let said = sshmcp_proto::text::first_and_last_line(&e.to_string());
            DaemonError::new(ErrorCode::DaemonUnavailable, said)
        })?;
        // A daemon that cannot take the introduction (an older one) still serves the calls.
        // The introduction also tells the daemon this shim reads `policy_denied`, so it is
        // made even when the MCP client gave no name.
        let client = self.client.get().cloned().unwrap_or_default();
        if conn.capabilities.iter().any(|c| c == "introduce")
            && let Err(e) = conn
                .client
                .introduce(tarpc::context::current(), client)
                .await
        {
            tracing::warn!("cannot tell the daemon this client's name: {e}");
        }
        let note = settings_note(&conn).await;
        if let Some(note) = &note {
            tracing::warn!("{note}");
        }
        *self
            .settings_note
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = note;
        let conn = Arc::new(conn);
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Runs one call of the tool `M` (see [`call_method`](Self::call_method)) under `ctx`'s
    /// deadline.
    pub async fn run<M: ToolMethod>(
        &self,
        ctx: Context,
        req: M::Request,
    ) -> Result<M::Answer, DaemonError> {
        self.call(M::TOOL, |c| async move { M::send(&c, ctx, req).await })
            .await
    }

    /// Runs one call of `tool` (see [`call_method`](Self::call_method)).
    pub async fn call<T, F, Fut>(&self, tool: Tool, f: F) -> Result<T, DaemonError>
    where
        F: FnOnce(DaemonClient) -> Fut,
        Fut: Future<Output = Result<Result<T, DaemonError>, RpcError>>,
    {
        self.call_method(tool.name(), f).await
    }

    /// Runs one call of the daemon's method `tool`. A daemon older than this shim that does
    /// not serve it is told apart from a failure. A call is sent once: when the connection
    /// fails after it was sent, it may have reached the daemon, and running a command twice is
    /// worse than saying so. The next call connects again.
    pub async fn call_method<T, F, Fut>(&self, tool: &str, f: F) -> Result<T, DaemonError>
    where
        F: FnOnce(DaemonClient) -> Fut,
        Fut: Future<Output = Result<Result<T, DaemonError>, RpcError>>,
    {
        let conn = self.connected().await?;
        if !conn.capabilities.iter().any(|c| c == tool) {
            return Err(DaemonError::new(
                ErrorCode::DaemonUnavailable,
                format!(
                    "the running daemon is older than this server and does not offer {tool}; \
                     run `sshmcp daemon restart` (sessions are kept) and retry"
                ),
            ));
        }
        match f(conn.client.clone()).await {
            Ok(answer) => answer,
            Err(RpcError::DeadlineExceeded) => Err(DaemonError::new(
                ErrorCode::DaemonUnavailable,
                format!(
                    "the daemon did not answer {tool} in time (it may be stopped or stuck: \
                     `sshmcp daemon status` tells); it may or may not have taken effect, so it \
                     was not repeated: check (session_list, command_list, transfer_list) before \
                     retrying"
                ),
            )),
            Err(e) => {
                let mut slot = self.connection.lock().await;
                if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn)) {
                    *slot = None;
                }
                // A command ends with the daemon that ran it (its channel's relay kills its
                // group), unless it had been handed off, which the answer would have said.
                let effect = match tool {
                    "exec" | "sudo_exec" => {
                        "its command was ended with it, possibly part way (a daemon restart or \
                         crash), and not repeated: check what it did before running it again"
                    }
                    _ => {
                        "it may or may not have taken effect, so it was not repeated: check \
                         (session_list, command_list, transfer_list) before retrying"
                    }
                };
                Err(DaemonError::new(
                    ErrorCode::DaemonUnavailable,
                    format!(
                        "the connection to the daemon broke while {tool} was under way ({e}); \
                         {effect}"
                    ),
                ))
            }
        }
    }
}

/// A daemon takes its settings when it starts, from the client that started it; another MCP
/// client's server whose environment names another ssh config is served with the daemon's
/// (one daemon per user). Said, not hidden: the hosts that config names are unknown to it.
async fn settings_note(conn: &Connection) -> Option<String> {
    let asked = sshmcp_local::paths::path_from_env("SSHMCP_SSH_CONFIG")?;
    let status = conn.client.status(tarpc::context::current()).await.ok()?;
    let running = status.ssh_config.map(PathBuf::from);
    let canonical = |p: &PathBuf| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
    if running.as_ref().map(canonical) == Some(canonical(&asked)) {
        return None;
    }
    Some(format!(
        "the running daemon (pid {}) reads {} as its ssh config, not {} that this MCP server's \
         SSHMCP_SSH_CONFIG names: a daemon takes its settings when it starts, and another \
         client started it; tell the user: `sshmcp daemon restart` run with that variable set \
         (sessions are kept), or `ssh-config` in sshmcp's config file for every start",
        status.pid,
        running.map_or("the user's default".to_string(), |p| p
            .display()
            .to_string()),
        asked.display(),
    ))
}
