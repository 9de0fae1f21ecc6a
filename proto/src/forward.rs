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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardStopRequest {
    pub auth: SessionAuth,
    pub forward_id: String,
}
crate::session::authed!(ForwardStopRequest);
