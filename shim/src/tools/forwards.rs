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
use sshmcp_proto::service::tools;
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
    pub session_id: String,
    pub session_key: String,
    /// `local` (`ssh -L`: listen here, connect from the host; target `127.0.0.1:5432` is the host's
    /// PostgreSQL, here at `127.0.0.1:<listen_port>`), `remote` (`ssh -R`: the reverse) or
    /// `dynamic` (`ssh -D`: a SOCKS5 proxy here).
    pub kind: ForwardKind,
    /// Here, or on the host for `remote`; 0 (default): a free one.
    pub listen_port: Option<u16>,
    /// `127.0.0.1` (default), `::1`, `localhost`; others only if the user allowed them.
    pub listen_host: Option<String>,
    /// Required for `local` and `remote`; resolved on the host for `local`, here for `remote`.
    pub target_host: Option<String>,
    /// Required for `local` and `remote`.
    #[schemars(range(min = 1, max = 65535))]
    pub target_port: Option<u16>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForwardListArgs {
    pub session_id: String,
    pub session_key: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForwardStopArgs {
    pub session_id: String,
    pub session_key: String,
    /// From forward_start or forward_list.
    pub forward_id: String,
}

#[tool_router(router = forwards_router, vis = "pub(crate)")]
impl Shim {
    /// Open a port forward on the session's SSH connection. "Here" is the machine running sshmcp:
    /// `local` and `dynamic` serve only clients running here. Answers `forward_id` (for
    /// forward_stop) and the `listen_port` in force. The target is tried only when a client
    /// connects. Lasts until forward_stop or disconnect; local users can use it too. Errors
    /// (nothing listens): `forward_failed` (`error.message` says why: port taken: pass
    /// `listen_port: 0`; under 1024: pick higher; this session has it: `error.forward_id`; sshd
    /// forbids it: tell the user), `forward_not_allowed` (`listen_host` not loopback, or the
    /// host's sshd listens on every address: tell the user).
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
                self.daemon.run::<tools::ForwardStart>(ctx, req).await
            }
            .await,
        )
    }

    /// List this session's open forwards, to find a lost `forward_id` or check before
    /// forward_start: `forwards`, each with `forward_id`, `kind`, `listen_host`, `listen_port`,
    /// `target_host`, `target_port`.
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
                self.daemon.run::<tools::ForwardList>(ctx, auth).await
            }
            .await,
        )
    }

    /// Close a port forward; its port is free once this answers (`forward_id`, `listen_port`).
    /// `forward_not_found`: see forward_list; `forward_failed`: the port stays until disconnect,
    /// which ends all the session's work.
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
                self.daemon.run::<tools::ForwardStop>(ctx, req).await
            }
            .await,
        )
    }
}
