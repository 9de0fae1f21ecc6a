//! The session tools: connect, disconnect, session_list.

use std::time::Duration;

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sshmcp_proto::DaemonError;
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::session::{
    ConnectRequest, ConnectTarget, Connected, Disconnected, SessionSummary,
};

use crate::answer::{self, Answer};
use crate::args;
use crate::server::Shim;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectArgs {
    /// A Host alias of the user's OpenSSH configuration. Give either this, or host and user.
    pub alias: Option<String>,
    /// Host name or address to connect to (with `user`).
    pub host: Option<String>,
    /// SSH user name (with `host`).
    pub user: Option<String>,
    /// SSH port (with `host`); default 22.
    #[schemars(range(min = 1))]
    pub port: Option<u16>,
    /// Seconds allowed for connecting and authenticating (1..3600); default 60.
    #[schemars(range(min = 1.0, max = 3600.0))]
    pub connect_timeout: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DisconnectArgs {
    /// The session to close.
    pub session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Serialize, JsonSchema)]
pub struct RemoteOut {
    /// `uname -srm` of the remote host.
    pub uname: String,
    /// PRETTY_NAME of /etc/os-release, when present.
    pub os_pretty_name: Option<String>,
    /// The remote login user.
    pub user: String,
    /// The remote home directory.
    pub home: String,
}

#[derive(Serialize, JsonSchema)]
pub struct ConnectOut {
    /// Public id of the new session.
    pub session_id: String,
    /// Secret key of the session, returned only this once: keep it for every later call.
    pub session_key: String,
    pub target: String,
    pub server_host: String,
    pub server_port: u16,
    /// Always `ready`.
    pub state: String,
    pub master_pid: u32,
    pub remote: RemoteOut,
}

impl From<Connected> for ConnectOut {
    fn from(c: Connected) -> Self {
        Self {
            session_id: c.session_id,
            session_key: c.session_key,
            target: c.target,
            server_host: c.server_host,
            server_port: c.server_port,
            state: c.state.as_str().to_string(),
            master_pid: c.master_pid,
            remote: RemoteOut {
                uname: c.remote.uname,
                os_pretty_name: c.remote.os_pretty_name,
                user: c.remote.user,
                home: c.remote.home,
            },
        }
    }
}

#[derive(Serialize, JsonSchema)]
pub struct DisconnectOut {
    pub session_id: String,
    /// Always `closed`.
    pub state: String,
}

impl From<Disconnected> for DisconnectOut {
    fn from(d: Disconnected) -> Self {
        Self {
            session_id: d.session_id,
            state: d.state.as_str().to_string(),
        }
    }
}

#[derive(Serialize, JsonSchema)]
pub struct SessionRow {
    pub session_id: String,
    /// `starting`, `ready`, `lost` or `closing`.
    pub state: String,
    pub target: String,
    pub server_host: String,
    pub server_port: u16,
    pub master_pid: Option<u32>,
    pub created_at: String,
    pub last_used_at: String,
    pub active_commands: u32,
    pub active_transfers: u32,
}

impl From<SessionSummary> for SessionRow {
    fn from(s: SessionSummary) -> Self {
        Self {
            session_id: s.session_id,
            state: s.state.as_str().to_string(),
            target: s.target,
            server_host: s.server_host,
            server_port: s.server_port,
            master_pid: s.master_pid,
            created_at: s.created_at,
            last_used_at: s.last_used_at,
            active_commands: s.active_commands,
            active_transfers: s.active_transfers,
        }
    }
}

#[derive(Serialize, JsonSchema)]
pub struct SessionListOut {
    pub sessions: Vec<SessionRow>,
}

/// Turns the arguments into a target, naming only fields in any complaint.
fn connect_request(a: ConnectArgs) -> Result<ConnectRequest, DaemonError> {
    let invalid = |m: &str| Err(DaemonError::invalid_arguments(m));
    let target = match (a.alias, a.host, a.user) {
        (Some(alias), None, None) if a.port.is_none() => ConnectTarget::Alias { alias },
        (None, Some(host), Some(user)) => ConnectTarget::Direct {
            host,
            user,
            port: a.port,
        },
        (None, Some(_), None) => return invalid("missing required fields: user"),
        (None, None, Some(_)) => return invalid("missing required fields: host"),
        (None, None, None) => return invalid("give either alias, or host and user"),
        _ => return invalid("alias cannot be combined with host, user or port"),
    };
    Ok(ConnectRequest {
        target,
        connect_timeout: a.connect_timeout,
    })
}

#[tool_router(router = session_router, vis = "pub(crate)")]
impl Shim {
    /// Open a new SSH session (one OpenSSH master) to a host of the user's OpenSSH config
    /// (`alias`) or to `host` + `user` [+ `port`]. Returns `session_id` and a one-time secret
    /// `session_key`: keep both, every other tool needs them. One session per server: a second
    /// connect fails with `already_connected` naming the existing session.
    #[tool(
        input_schema = schema_for_input::<ConnectArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<ConnectOut>>(),
        annotations(title = "Connect to an SSH host", read_only_hint = false,
                    destructive_hint = false, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn connect(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let req = connect_request(args::decode(raw)?)?;
                // Authentication may wait behind other connects, then for a dialog.
                let secs = req.connect_timeout.unwrap_or(60.0).clamp(1.0, 3600.0);
                let ctx = context_with_timeout(
                    Duration::from_secs_f64(secs) * 2 + Duration::from_secs(60),
                );
                let c = self
                    .daemon
                    .call(|c| async move { c.connect(ctx, req).await })
                    .await?;
                Ok(ConnectOut::from(c))
            }
            .await,
        )
    }

    /// Close a session by id (no key needed): cancels its running commands and stops its SSH
    /// connection. Answers the final state `closed`.
    #[tool(
        input_schema = schema_for_input::<DisconnectArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<DisconnectOut>>(),
        annotations(title = "Disconnect a session", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn disconnect(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: DisconnectArgs = args::decode(raw)?;
                let ctx = context_with_timeout(Duration::from_secs(60));
                let d = self
                    .daemon
                    .call(|c| async move { c.disconnect(ctx, a.session_id).await })
                    .await?;
                Ok(DisconnectOut::from(d))
            }
            .await,
        )
    }

    /// List every session of the daemon (never keys, never opens SSH): state, target,
    /// server, master pid, times and active work.
    #[tool(
        input_schema = schema_for_input::<NoArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<SessionListOut>>(),
        annotations(title = "List sessions", read_only_hint = true,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn session_list(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                args::decode::<NoArgs>(raw)?;
                let ctx = context_with_timeout(Duration::from_secs(10));
                let rows = self
                    .daemon
                    .call(|c| async move { c.session_list(ctx).await.map(Ok) })
                    .await?;
                Ok(SessionListOut {
                    sessions: rows.into_iter().map(SessionRow::from).collect(),
                })
            }
            .await,
        )
    }
}
