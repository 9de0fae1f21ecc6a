//! The session tools: connect, disconnect, session_list.

use std::time::Duration;

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject, RequestMetaObject};
use rmcp::{Peer, RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sshmcp_proto::DaemonError;
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::session::{
    ConnectRequest, ConnectTarget, Connected, Disconnected, SessionSummary,
};
use tokio_util::sync::CancellationToken;

use crate::answer::{self, Answer};
use crate::args;
use crate::progress::{self, Progress, Step};
use crate::server::Shim;
use crate::tools::exec::unless_cancelled;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectArgs {
    /// A Host alias of the user's OpenSSH configuration. Give either this, or host and user
    /// (with optional port); mixing them is `invalid_arguments`.
    pub alias: Option<String>,
    /// Host name or address to connect to; `user` is then required.
    pub host: Option<String>,
    /// SSH user name; required with `host`.
    pub user: Option<String>,
    /// SSH port (with `host`); default 22.
    #[schemars(range(min = 1))]
    pub port: Option<u16>,
    /// Seconds allowed for connecting and authenticating (1..3600); default 60. Keep it below
    /// your client's call limit.
    #[schemars(range(min = 1.0, max = 3600.0))]
    pub connect_timeout: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DisconnectArgs {
    /// The session to close (from `connect` or `session_list`).
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
    /// Open a new SSH session (one OpenSSH master) to a Host of the user's OpenSSH config (`alias`)
    /// or to `host` + `user` [+ `port`]. Returns `session_id` and a secret `session_key` shown only
    /// this once: keep both, every session tool needs them (`disconnect` and session_list need no
    /// key). One session per server (its effective HostName and Port; the user is not part of it):
    /// connect once and reuse it, never per command. May wait for a passphrase or key-touch prompt
    /// on the user's desktop; unknown host keys are never accepted. Errors: `already_connected`
    /// (`error.session_id` is the session that owns the server: use it if you hold its key; if
    /// `session_list` shows it `lost`, disconnect it and connect again; otherwise another agent may
    /// be using it: ask the user), `session_limit_reached` (the daemon's max-sessions, 32 by
    /// default: disconnect a session you no longer need), `connection_start_failed`
    /// (authentication, host key or network, or `connect_timeout` ran out: tell the user the
    /// message; retry only after a timeout or an unanswered prompt, with a longer `connect_timeout`
    /// or once the user is there), `invalid_arguments` (the target's fields: see `alias`). A
    /// connect call of yours that was cut off (your client gave up) may have left its session
    /// `starting` or `ready` with no key in your hands: disconnect it and connect again.
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
                    .call("connect", |c| async move { c.connect(ctx, req).await });
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
                progress::follow(call, Progress::asked(&meta, peer), step).await
            }
            .await,
        )
    }

    /// Close a session: kills its running commands, cancels its transfers (partial files kept),
    /// closes its port forwards and stops its SSH connection; its command handles and their
    /// output go with it (read them first), detached tasks keep running. Needs no key, so it
    /// closes any session, another agent's too: close only sessions you opened, or ones that
    /// are `lost`. Use it when the work is done, after `connection_lost`, or when a session's
    /// key is lost. Works in every state, `starting` included. Errors: `session_not_found`
    /// (already closed: nothing to do).
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
                    .call("disconnect", |c| async move {
                        c.disconnect(ctx, a.session_id).await
                    })
                    .await
            }
            .await,
        )
    }

    /// List every session of the daemon, other agents' included (never keys; opens no SSH
    /// connection): `sessions`, each with `session_id`, `state` (`starting`, `ready`, `lost`: its
    /// connection is gone, or `closing`), `target`, `server_host`, `server_port`, `remote_user`,
    /// `created_at`, `last_used_at` and its `active_commands`, `active_transfers` and
    /// `active_forwards` (left out when 0). Use it to find the session an `already_connected`
    /// names, or to spot `lost` ones (`disconnect`, then `connect` again). A listed session is
    /// usable only with the key its `connect` returned.
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
                    .call("session_list", |c| async move {
                        c.session_list(ctx).await.map(Ok)
                    })
                    .await?;
                Ok(SessionListOut { sessions })
            }
            .await,
        )
    }
}
