//! The session tools: connect, disconnect, session_list.

use std::time::Duration;

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject, RequestMetaObject};
use rmcp::{Peer, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::session::{
    ConnectRequest, ConnectTarget, Connected, Disconnected, SessionSummary,
};
use sshmcp_proto::tool::Tool;
use sshmcp_proto::{DaemonError, ErrorCode};
use tokio_util::sync::CancellationToken;

use crate::answer::{self, Answer};
use crate::args;
use crate::progress::{self, Progress, Step};
use crate::server::Shim;
use crate::tools::unless_cancelled;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectArgs {
    /// A Host of ~/.ssh/config (may set user, port); not with `host`, `user`, `port`.
    pub alias: Option<String>,
    /// Name or address.
    pub host: Option<String>,
    /// Login name; required with `host`.
    pub user: Option<String>,
    /// With `host`; default 22.
    #[schemars(range(min = 1))]
    pub port: Option<u16>,
    /// Seconds to connect and log in; default 60 (lower it if your client gives up at 60 s).
    #[schemars(range(min = 1.0, max = 3600.0))]
    pub connect_timeout: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DisconnectArgs {
    /// From `connect` or `session_list`.
    pub session_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Serialize, JsonSchema)]
pub struct SessionListOut {
    /// Every session of the daemon, oldest first.
    pub sessions: Vec<SessionSummary>,
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
    /// Open an SSH session to a Host of the user's OpenSSH config (`alias`; ask the user which) or
    /// to `host` + `user`. Answers once ready: `session_id`, `session_key` (shown only here) and
    /// `remote` (`uname`, `user`, `home`). May wait for a passphrase or key-touch prompt. Errors:
    /// `already_connected` (`error.session_id` has the server: use it if you hold its key;
    /// disconnect it if it is `lost` or left by a cut-off connect of yours; else ask the user),
    /// `session_limit_reached` (disconnect one you no longer need), `connection_start_failed`
    /// (unknown host key, login refused, unreachable: tell the user; after a timeout, a longer
    /// `connect_timeout` if your client waits).
    #[tool(
        input_schema = schema_for_input::<ConnectArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<Connected>>(),
        annotations(title = "Connect to an SSH host", read_only_hint = false,
                    destructive_hint = false, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn connect(
        &self,
        raw: JsonObject,
        cancel: CancellationToken,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> CallToolResult {
        answer::respond(
            async {
                let req = connect_request(args::decode(raw)?)?;
                // Authentication may wait behind other connects, then for a dialog.
                let secs = req.connect_timeout.unwrap_or(60.0).clamp(1.0, 3600.0);
                let ctx = context_with_timeout(
                    Duration::from_secs_f64(secs) * 2 + Duration::from_secs(60),
                );
                // Cancelled, the call is dropped: the daemon's connect then gives up its
                // reservation and stops the master it was starting.
                let call = self
                    .daemon
                    .call(Tool::Connect, |c| async move { c.connect(ctx, req).await });
                let call = unless_cancelled(call, cancel);
                // The one step a connect takes that lasts is the master's start.
                let step = |seconds: u32| async move {
                    Some(Step {
                        value: f64::from(seconds),
                        message: format!(
                            "starting the SSH connection (authentication, host key check): \
                             {seconds} s"
                        ),
                    })
                };
                progress::follow(call, Progress::asked(&meta, peer), step)
                    .await
                    .map_err(|mut e| {
                        if e.code == ErrorCode::ConnectionStartFailed
                            && let Some(note) = self.daemon.settings_note()
                        {
                            e.message = format!("{} ({note})", e.message);
                        }
                        e
                    })
            }
            .await,
        )
    }

    /// Close a session in any state: kill its commands and drop their output (read it first),
    /// cancel its transfers (partials kept), close its forwards; tasks survive. Answers `state`
    /// `closed`. Needs no key: close only yours or `lost` ones. `session_not_found`: already
    /// closed.
    #[tool(
        input_schema = schema_for_input::<DisconnectArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<Disconnected>>(),
        annotations(title = "Disconnect a session", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = true, open_world_hint = true)
    )]
    pub async fn disconnect(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: DisconnectArgs = args::decode(raw)?;
                let ctx = context_with_timeout(Duration::from_secs(60));
                self.daemon
                    .call(Tool::Disconnect, |c| async move {
                        c.disconnect(ctx, a.session_id).await
                    })
                    .await
            }
            .await,
        )
    }

    /// List all the daemon's sessions, other agents' too, never keys: before connect (one session
    /// per server; without its key you cannot use another's).
    /// `sessions`, each with `session_id`, `state` (`starting`, `ready`, `lost`: disconnect it if
    /// yours, `closing`), `target` (as given to connect), `server_host`, `server_port` (what it
    /// resolved to), `remote_user`, `created_at`, `last_used_at`, `active_commands`,
    /// `active_transfers`, `active_forwards`.
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
                let sessions = self
                    .daemon
                    .call(Tool::SessionList, |c| async move {
                        c.session_list(ctx).await.map(Ok)
                    })
                    .await?;
                Ok(SessionListOut { sessions })
            }
            .await,
        )
    }
}
