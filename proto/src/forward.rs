//! Wire types of port forwards: listeners set up on a session's master through its mux
//! protocol, as `ssh -O forward` does, with no new connection and no new authentication.

use serde::{Deserialize, Serialize};

use crate::session::SessionAuth;

/// What a forward does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ForwardKind {
    /// Listens here, connects from the host (`ssh -L`).
    Local,
    /// Listens on the host, connects from here (`ssh -R`).
    Remote,
    /// A SOCKS5 proxy here, connecting from the host (`ssh -D`).
    Dynamic,
}

impl ForwardKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Remote => "remote",
            Self::Dynamic => "dynamic",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardStartRequest {
    pub auth: SessionAuth,
    pub kind: ForwardKind,
    /// 0: a free port is chosen.
    pub listen_port: u16,
    /// Default `127.0.0.1`.
    pub listen_host: Option<String>,
    /// Required for `local` and `remote`; none for `dynamic`.
    pub target_host: Option<String>,
    pub target_port: Option<u16>,
}
crate::session::authed!(ForwardStartRequest);

/// `forward_start` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForwardStartArgs {
    pub session_id: String,
    pub session_key: String,
    /// `local` (`ssh -L`: listen here, connect from the host: target `127.0.0.1:5432` is
    /// then here at `127.0.0.1:<listen_port>`), `remote` (`ssh -R`: the reverse) or `dynamic`
    /// (`ssh -D`: a SOCKS5 proxy here).
    pub kind: ForwardKind,
    /// Its port there; 0 (default): a free one.
    pub listen_port: Option<u16>,
    /// Where it listens (the host, for `remote`): `127.0.0.1` (default), `::1`, `localhost`;
    /// others if the user allows.
    pub listen_host: Option<String>,
    /// Required for `local` and `remote`; resolved on the host for `local`, here for `remote`.
    pub target_host: Option<String>,
    /// Required for `local` and `remote`.
    #[schemars(range(min = 1, max = 65535))]
    pub target_port: Option<u16>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::ForwardStart {
    type Args = ForwardStartArgs;
    const TITLE: &'static str = "Open a port forward";
    const DESCRIPTION: &'static str = "Open a port forward over the session, for programs on the machine running \
        sshmcp (\"here\"; one request: exec `curl` on the host). \
        `local` and `dynamic` listen here, for any local user. Answers `forward_id` and the `listen_port` in force. \
        The target is tried only when a client connects. Lasts until forward_stop or disconnect. Errors (nothing listens): `forward_failed` \
        (`error.message` says why: port taken: pass `listen_port: 0`; under 1024: pick higher; \
        this session has it: `error.forward_id`; sshd forbids it: tell the user), \
        `forward_not_allowed` (`listen_host` not loopback, or a `remote` one sshd opens on \
        every address (GatewayPorts): tell the user).";
    const HINTS: crate::described::Hints = crate::described::Hints::STARTS;
    const DEADLINE: std::time::Duration = FORWARD_DEADLINE;

    fn request(
        args: ForwardStartArgs,
        _: &crate::described::Here,
    ) -> Result<ForwardStartRequest, crate::DaemonError> {
        Ok(ForwardStartRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            kind: args.kind,
            listen_port: args.listen_port.unwrap_or(0),
            listen_host: args.listen_host,
            target_host: args.target_host,
            target_port: args.target_port,
        })
    }
}

/// How long a client waits for a forward tool: the daemon bounds every exchange with the
/// master (a remote forward's included, which waits on the server) at 5 s; this leaves room
/// for the call itself.
#[cfg(feature = "schema")]
pub const FORWARD_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// One forward of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ForwardInfo {
    /// Names the forward for `forward_stop`.
    pub forward_id: String,
    /// `local`, `remote` or `dynamic`, as asked.
    pub kind: ForwardKind,
    /// Where it listens: here for `local` and `dynamic` (connect to
    /// `listen_host:listen_port`), on the host for `remote` (the host connects to it).
    pub listen_host: String,
    /// The port in force (the one chosen when 0 was asked).
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub listen_port: u16,
    /// Where each connection goes (null for `dynamic`: the SOCKS client says).
    pub target_host: Option<String>,
    /// The port each connection goes to (null for `dynamic`).
    pub target_port: Option<u16>,
    /// RFC 3339 UTC.
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ForwardList {
    /// This session's forwards, oldest first.
    pub forwards: Vec<ForwardInfo>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::ForwardList {
    type Args = crate::described::SessionArgs;
    const TITLE: &'static str = "List port forwards";
    const DESCRIPTION: &'static str = "List this session's open forwards, to find a lost \
        `forward_id` or check before forward_start: `forwards`, each with `forward_id`, `kind`, \
        `listen_host`, `listen_port`, `target_host`, `target_port`.";
    const HINTS: crate::described::Hints = crate::described::Hints::READS_DAEMON;
    const DEADLINE: std::time::Duration = FORWARD_DEADLINE;

    fn request(
        args: crate::described::SessionArgs,
        _: &crate::described::Here,
    ) -> Result<SessionAuth, crate::DaemonError> {
        Ok(args.into())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardStopRequest {
    pub auth: SessionAuth,
    pub forward_id: String,
}
crate::session::authed!(ForwardStopRequest);

/// `forward_stop` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForwardStopArgs {
    pub session_id: String,
    pub session_key: String,
    /// From forward_start or forward_list.
    pub forward_id: String,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::ForwardStop {
    type Args = ForwardStopArgs;
    const TITLE: &'static str = "Close a port forward";
    const DESCRIPTION: &'static str = "Close a port forward; its port is free once this answers \
        (`forward_id`, `listen_port`). `forward_not_found`: see forward_list; `forward_failed`: \
        the port stays until disconnect, which ends all the session's work.";
    const HINTS: crate::described::Hints = crate::described::Hints::SETS_HOST;
    const ANSWER_FIELDS: &'static [(&'static str, &'static str)] = &[
        ("forward_id", "The forward that was closed."),
        ("listen_port", "The port it held, free again now."),
    ];
    const DEADLINE: std::time::Duration = FORWARD_DEADLINE;

    fn request(
        args: ForwardStopArgs,
        _: &crate::described::Here,
    ) -> Result<ForwardStopRequest, crate::DaemonError> {
        Ok(ForwardStopRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            forward_id: args.forward_id,
        })
    }
}
