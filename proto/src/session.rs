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
    /// Seconds allowed for the whole connect, prompts included; the daemon's default when
    /// absent.
    pub connect_timeout: Option<f64>,
}

/// `connect` as an agent calls it.
#[cfg(feature = "schema")]
#[derive(Debug, Deserialize, schemars::JsonSchema)]
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
    /// Seconds to connect and log in, prompts included; default 45.
    #[schemars(range(min = 1.0, max = 3600.0))]
    pub connect_timeout: Option<f64>,
}

/// Cancelled, the call is dropped: the daemon's connect then gives up its reservation and
/// stops the master it was starting. The one step a connect takes that lasts is the master's
/// start, so a client that asked for progress is told the seconds it has waited.
#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::Connect {
    type Args = ConnectArgs;
    const TITLE: &'static str = "Connect to an SSH host";
    const DESCRIPTION: &'static str = "Open an SSH session (`alias`, or `host` + `user`; ask the user if unsure). Answers once ready: \
        `session_id`, `session_key` and `remote` (`uname`, `user`, `home`). \
        A passphrase or key-touch prompt goes to the user's screen (their askpass), never \
        to you; it waits for them. Errors: `already_connected` \
        (`error.session_id` has the server: use it if you hold its key; disconnect it if it \
        is `lost` or left by a cut-off connect of yours (its `created_at` in session_list); else ask the user), \
        `session_limit_reached` (disconnect one you no longer need), \
        `connection_start_failed` (`error.message`: unknown host key, login refused, unreachable: tell the \
        user; timed out: a longer `connect_timeout`, under your client's limit).";
    const HINTS: crate::described::Hints = crate::described::Hints::OPENS;
    /// Beyond twice the connect timeout: authentication may wait behind other connects,
    /// then for a dialog.
    const DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

    fn deadline(args: &ConnectArgs) -> std::time::Duration {
        let secs = args
            .connect_timeout
            .unwrap_or(crate::limits::DEFAULT_CONNECT_TIMEOUT_SECS);
        let secs = if secs.is_finite() {
            secs.clamp(1.0, crate::limits::MAX_CONNECT_TIMEOUT_SECS)
        } else {
            crate::limits::DEFAULT_CONNECT_TIMEOUT_SECS
        };
        std::time::Duration::from_secs_f64(secs) * 2 + Self::DEADLINE
    }

    fn progress(_: &ConnectRequest) -> Option<crate::described::Followed> {
        Some(crate::described::Followed::Clock(
            "starting the SSH connection (authentication, host key check)",
        ))
    }

    /// The target, naming only fields in any complaint.
    fn request(
        args: ConnectArgs,
        _: &crate::described::Here,
    ) -> Result<ConnectRequest, crate::DaemonError> {
        let invalid = |m: &str| Err(crate::DaemonError::invalid_arguments(m));
        let target = match (args.alias, args.host, args.user) {
            (Some(alias), None, None) if args.port.is_none() => ConnectTarget::Alias { alias },
            (None, Some(host), Some(user)) => ConnectTarget::Direct {
                host,
                user,
                port: args.port,
            },
            (None, Some(_), None) => return invalid("missing required fields: user"),
            (None, None, Some(_)) => return invalid("missing required fields: host"),
            (None, None, None) => return invalid("give either alias, or host and user"),
            _ => return invalid("alias cannot be combined with host, user or port"),
        };
        Ok(ConnectRequest {
            target,
            connect_timeout: args.connect_timeout,
        })
    }
}

/// `disconnect` as an agent calls it.
#[cfg(feature = "schema")]
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DisconnectArgs {
    /// From `connect` or `session_list`.
    pub session_id: String,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::Disconnect {
    type Args = DisconnectArgs;
    const TITLE: &'static str = "Disconnect a session";
    const DESCRIPTION: &'static str = "Close a session in any state: kill its commands and \
        drop their output (read it first), cancel its transfers (partials kept), close its \
        forwards; tasks survive. Answers `state` `closed`. Needs no key: close only yours or \
        `lost` ones. `session_not_found`: already closed.";
    const HINTS: crate::described::Hints = crate::described::Hints::STOPS;
    const DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

    fn request(
        args: DisconnectArgs,
        _: &crate::described::Here,
    ) -> Result<String, crate::DaemonError> {
        Ok(args.session_id)
    }
}

/// `session_list` as an agent calls it: with nothing.
#[cfg(feature = "schema")]
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionListArgs {}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::SessionList {
    type Args = SessionListArgs;
    const TITLE: &'static str = "List sessions";
    const DESCRIPTION: &'static str = "List all the daemon's sessions, other agents' too (keys never shown): use before connect. `sessions`, each with `session_id`, `state` (`starting`, `ready`, `lost` \
        (master gone), `closing`), `target` (as given to connect), `server_host`, \
        `server_port` (what it resolved to), `remote_user`, `created_at`, `last_used_at`, \
        `active_*` counts (commands, transfers, forwards).";
    const HINTS: crate::described::Hints = crate::described::Hints::READS_DAEMON;
    const DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

    fn request(_: SessionListArgs, _: &crate::described::Here) -> Result<(), crate::DaemonError> {
        Ok(())
    }
}

/// `session_list`'s answer as a tool gives it (the method answers the list itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SessionList {
    /// Every session of the daemon, oldest first.
    pub sessions: Vec<SessionSummary>,
}

/// Written here, as the macro makes one only for a method that takes a request and answers a
/// `Result`: `session_list` takes none and cannot fail.
impl crate::service::ToolMethod for crate::service::tools::SessionList {
    const TOOL: crate::tool::Tool = crate::tool::Tool::SessionList;
    type Request = ();
    type Answer = SessionList;

    async fn send(
        client: &crate::service::DaemonClient,
        ctx: tarpc::context::Context,
        (): (),
    ) -> Result<Result<SessionList, crate::DaemonError>, tarpc::client::RpcError> {
        let sessions = client.session_list(ctx).await?;
        Ok(Ok(SessionList { sessions }))
    }
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
