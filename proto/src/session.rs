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

/// The lifecycle of a session. `Closed` only appears in `disconnect`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
pub struct RemoteFacts {
    /// `uname -srm`.
    pub uname: String,
    /// `PRETTY_NAME` of `/etc/os-release`, when the host has one.
    pub os_pretty_name: Option<String>,
    /// The login user, as the remote side sees it.
    pub user: String,
    pub home: String,
}

/// The answer to a successful `connect`. It is the only place a session key ever appears.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connected {
    pub session_id: String,
    pub session_key: String,
    pub target: String,
    pub server_host: String,
    pub server_port: u16,
    pub state: SessionState,
    pub master_pid: u32,
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
pub struct SessionSummary {
    pub session_id: String,
    pub state: SessionState,
    pub target: String,
    pub server_host: String,
    pub server_port: u16,
    pub master_pid: Option<u32>,
    pub created_at: String,
    pub last_used_at: String,
    pub active_commands: u32,
    pub active_transfers: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disconnected {
    pub session_id: String,
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
