//! Wire types of the session tools: connect, disconnect, session_list.

use serde::{Deserialize, Serialize};

/// What `connect` should reach: a Host of the user's OpenSSH config, or an explicit pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConnectTarget {
    Alias {
        alias: String,
    },
    Direct {
        host: String,
        user: String,
        port: Option<u16>,
    },
}

impl ConnectTarget {
    /// The target as the caller named it, for listings (`alias`, or `user@host[:port]`).
    pub fn display(&self) -> String {
        match self {
            Self::Alias { alias } => alias.clone(),
            Self::Direct {
                host,
                user,
                port: Some(port),
            } => format!("{user}@{host}:{port}"),
            Self::Direct {
                host,
                user,
                port: None,
            } => format!("{user}@{host}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectRequest {
    pub target: ConnectTarget,
    /// Seconds allowed for authentication; the daemon's default when absent.
    pub connect_timeout: Option<f64>,
}

/// The lifecycle of a session: `starting` (authenticating), `ready`, `lost` (its SSH
/// connection is gone), `closing`; `closed` only appears in `disconnect`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    Starting,
    Ready,
    Lost,
    Closing,
    Closed,
}

impl SessionState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Ready => "ready",
            Self::Lost => "lost",
            Self::Closing => "closing",
            Self::Closed => "closed",
        }
    }
}

/// Facts about the remote host, gathered once at connect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RemoteFacts {
    /// `uname -srm` of the remote host.
    pub uname: String,
    /// PRETTY_NAME of the remote /etc/os-release, when present.
    pub os_pretty_name: Option<String>,
    /// The remote login user.
    pub user: String,
    /// The remote home directory.
    pub home: String,
}

/// The answer to a successful `connect`. It is the only place a session key ever appears.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Connected {
    /// Public id of the new session.
    pub session_id: String,
    /// Secret key of the session: pass it with `session_id` to every later call.
    pub session_key: String,
    /// The target as given (the alias, or `user@host[:port]`), as session_list shows it.
    pub target: String,
    /// The server's effective host name (from the OpenSSH configuration), lower case.
    pub server_host: String,
    /// The server's effective port.
    pub server_port: u16,
    /// `ready`: the session is usable now (session_list shows its later states).
    pub state: SessionState,
    /// Local pid of the session's OpenSSH master.
    pub master_pid: u32,
    /// Facts about the remote host, learned once at connect.
    pub remote: RemoteFacts,
}

// Hand-written so the key never lands in a log line through `{:?}`.
impl std::fmt::Debug for Connected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connected")
            .field("session_id", &self.session_id)
            .field("session_key", &"<redacted>")
            .field("target", &self.target)
            .field("server_host", &self.server_host)
            .field("server_port", &self.server_port)
            .field("state", &self.state)
            .field("master_pid", &self.master_pid)
            .field("remote", &self.remote)
            .finish()
    }
}

/// One row of `session_list`: never a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SessionSummary {
    /// The session's public id.
    pub session_id: String,
    /// `starting` (authenticating), `ready`, `lost` (its SSH connection is gone: disconnect
    /// it) or `closing`.
    pub state: SessionState,
    /// The target as given at connect.
    pub target: String,
    /// The server's effective host name.
    pub server_host: String,
    /// The server's effective port.
    pub server_port: u16,
    /// Local pid of the session's OpenSSH master; null until it is up.
    pub master_pid: Option<u32>,
    /// The remote login user; empty until connect has learned it.
    pub remote_user: String,
    /// RFC 3339 UTC.
    pub created_at: String,
    /// RFC 3339 UTC: the last call that used the session.
    pub last_used_at: String,
    /// Commands running on the session now.
    pub active_commands: u32,
    /// Transfers running on the session now.
    pub active_transfers: u32,
    /// Port forwards open on the session now.
    pub active_forwards: u32,
}

/// The answer to `disconnect`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Disconnected {
    /// The closed session's id.
    pub session_id: String,
    /// `closed`: the session is gone and its key no longer works.
    pub state: SessionState,
}

/// The pair every operational tool carries: which session, and proof the caller owns it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionAuth {
    pub session_id: String,
    pub session_key: String,
}

// Hand-written so the key never lands in a log line through `{:?}`.
impl std::fmt::Debug for SessionAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionAuth")
            .field("session_id", &self.session_id)
            .field("session_key", &"<redacted>")
            .finish()
    }
}

/// A request that names its session: every tool's request but `connect`'s.
pub trait Authed {
    fn auth(&self) -> &SessionAuth;
}

/// `command_list` and its like take the pair alone.
impl Authed for SessionAuth {
    fn auth(&self) -> &SessionAuth {
        self
    }
}

/// `impl Authed` for requests that carry the pair as `auth`.
macro_rules! authed {
    ($($request:ty),* $(,)?) => {
        $(impl $crate::session::Authed for $request {
            fn auth(&self) -> &$crate::session::SessionAuth {
                &self.auth
            }
        })*
    };
}
pub(crate) use authed;
