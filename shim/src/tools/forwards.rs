//! The port forward tools: `forward_start`, `forward_list`, `forward_stop`, set up on the
//! session's own SSH connection.

use std::time::Duration;

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use sshmcp_proto::forward::{
    ForwardInfo, ForwardKind, ForwardList, ForwardStartRequest, ForwardStopRequest,
};
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::session::SessionAuth;

use crate::answer::{self, Answer};
use crate::args;
use crate::server::Shim;

/// The daemon bounds every exchange with the master (a remote forward's included, which
/// waits on the server) at 5 s; this leaves room for the call itself.
const DEADLINE: Duration = Duration::from_secs(30);

// No Debug: they hold the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForwardStartArgs {
    /// The session (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// `local`: reach a service of the host from here (a PostgreSQL on the host's
    /// 127.0.0.1:5432: target `127.0.0.1:5432`, then connect here to
    /// `127.0.0.1:<listen_port>`). `remote`: let the host reach a service of this machine (a
    /// dev server here on port 3000: target `127.0.0.1:3000`, then the host uses
    /// `127.0.0.1:<listen_port>`). `dynamic`: a SOCKS5 proxy here into the host's network
    /// (`socks5h://127.0.0.1:<listen_port>`, so names resolve on the host).
    pub kind: ForwardKind,
    /// The port to listen on: here, or on the host for `remote`. 0 (the default) picks a free
    /// one, given in the answer.
    pub listen_port: Option<u16>,
    /// Where to listen: `127.0.0.1` (default), `::1` or `localhost`. Other addresses only if
    /// the user started the daemon with `--allow-public-forwards`.
    pub listen_host: Option<String>,
    /// Required for `local` and `remote`, omitted for `dynamic`. For `local` a name as the
    /// host resolves it (`127.0.0.1` is the host itself); for `remote` as this machine
    /// resolves it (`127.0.0.1` is this machine).
    pub target_host: Option<String>,
    /// Required for `local` and `remote`, omitted for `dynamic`: the port connections go to.
    #[schemars(range(min = 1, max = 65535))]
    pub target_port: Option<u16>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForwardListArgs {
    /// The session (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForwardStopArgs {
    /// The session (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// The forward to close (from forward_start or forward_list).
    pub forward_id: String,
}

#[tool_router(router = forwards_router, vis = "pub(crate)")]
impl Shim {
    /// Open a port forward on the session's SSH connection (no new login). The answer:
    /// `forward_id` (for forward_stop), `kind`, `listen_host`, `listen_port` (the port chosen
    /// when you passed 0), `target_host` and `target_port` (none for `dynamic`), `created_at`. "Here" and "this
    /// machine" mean the machine running sshmcp: a `local` or `dynamic` forward helps only a
    /// client (psql, curl, a browser) that runs there too; otherwise run the client on the host
    /// with `exec`. The target is first tried when a connection comes. It lasts until
    /// forward_stop, disconnect or a lost connection; anyone on this machine can use a loopback
    /// forward, so stop those you no longer need. Errors (nothing listens then):
    /// `forward_failed` (the message says which): the port is taken (retry with `listen_port`
    /// 0) or below 1024 (pick a higher one), this session already has that listener
    /// (`error.forward_id` names it: use it), or the host's sshd forbids forwarding (tell the user;
    /// retrying will not help). `forward_not_allowed`: use a loopback `listen_host`.
    /// `invalid_arguments`: see `target_host`.
    #[tool(
        input_schema = schema_for_input::<ForwardStartArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<ForwardInfo>>(),
        annotations(title = "Open a port forward", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn forward_start(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: ForwardStartArgs = args::decode(raw)?;
                let req = ForwardStartRequest {
                    auth: SessionAuth {
                        session_id: a.session_id,
                        session_key: a.session_key,
                    },
                    kind: a.kind,
                    listen_port: a.listen_port.unwrap_or(0),
                    listen_host: a.listen_host,
                    target_host: a.target_host,
                    target_port: a.target_port,
                };
                let ctx = context_with_timeout(DEADLINE);
                self.daemon
                    .call("forward_start", |c| async move {
                        c.forward_start(ctx, req).await
                    })
                    .await
            }
            .await,
        )
    }

    /// List this session's open port forwards, each as forward_start answered it; read-only.
    /// Recover a `forward_id` or `listen_port` here (e.g. after forward_failed names a
    /// forward).
    #[tool(
        input_schema = schema_for_input::<ForwardListArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<ForwardList>>(),
        annotations(title = "List port forwards", read_only_hint = true,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn forward_list(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: ForwardListArgs = args::decode(raw)?;
                let auth = SessionAuth {
                    session_id: a.session_id,
                    session_key: a.session_key,
                };
                let ctx = context_with_timeout(DEADLINE);
                self.daemon
                    .call("forward_list", |c| async move {
                        c.forward_list(ctx, auth).await
                    })
                    .await
            }
            .await,
        )
    }

    /// Close a port forward of this session once its client is done with it (`disconnect`
    /// closes all of a session's forwards at once): its port is free again once this answers
    /// (connections already made through it may finish). Answer: the forward as it was. Errors:
    /// `forward_not_found` (not a forward of this session: see forward_list), `forward_failed`
    /// (the SSH connection could not close it: `disconnect` closes it, with all of the
    /// session's commands and transfers).
    #[tool(
        input_schema = schema_for_input::<ForwardStopArgs>().expect("object schema"),
        output_schema = answer::schema_describing(
            schema_for_output::<Answer<ForwardInfo>>(),
            &[
                ("forward_id", "The forward that was closed."),
                ("listen_port", "The port it held, free again now."),
            ],
        ),
        annotations(title = "Close a port forward", read_only_hint = false,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = true)
    )]
    pub async fn forward_stop(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: ForwardStopArgs = args::decode(raw)?;
                let req = ForwardStopRequest {
                    auth: SessionAuth {
                        session_id: a.session_id,
                        session_key: a.session_key,
                    },
                    forward_id: a.forward_id,
                };
                let ctx = context_with_timeout(DEADLINE);
                self.daemon
                    .call(
                        "forward_stop",
                        |c| async move { c.forward_stop(ctx, req).await },
                    )
                    .await
            }
            .await,
        )
    }
}
