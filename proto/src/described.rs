//! What an MCP client shows of each tool of `daemon_methods!`, and how its arguments become
//! its request: declared beside the tool's wire types, so the shim makes its MCP tool with no
//! code of its own. Only the shim builds it (feature `schema`).

use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::exec::Encoding;
use crate::inspect::RemotePath;
use crate::service::ToolMethod;
use crate::session::SessionAuth;

/// A tool's MCP side: its title, description, hints and arguments.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is a tool in daemon_methods!, but it has no `Described` impl",
    note = "declare its MCP side beside its wire types (ARCHITECTURE.md, \"Adding a tool\")"
)]
pub trait Described:
    ToolMethod<
        Request: Send + 'static,
        Answer: serde::Serialize + schemars::JsonSchema + Send + 'static,
    > + 'static
{
    /// The arguments as an agent writes them; their doc comments describe each field in the
    /// input schema.
    type Args: DeserializeOwned + schemars::JsonSchema + Send;

    /// A few words for a person's eyes.
    const TITLE: &'static str;
    /// What the agent reads first (at most 2,048 bytes, what Claude Code keeps): what the tool
    /// does, what its answer holds, and the errors it recovers from.
    const DESCRIPTION: &'static str;
    /// What the client is told of its effects.
    const HINTS: Hints;
    /// Answer fields described as this tool fills them, where the answer type's own words
    /// are another tool's (a type two tools answer with).
    const ANSWER_FIELDS: &'static [(&'static str, &'static str)] = &[];
    /// How long the shim waits for the daemon's answer: beyond any wait asked of the daemon,
    /// see [`deadline`](Self::deadline).
    const DEADLINE: Duration;

    /// How long the shim waits for the daemon's answer to `args`.
    fn deadline(_args: &Self::Args) -> Duration {
        Self::DEADLINE
    }

    /// What its `error` holds when the call fails: the call's error, or, for a tool that
    /// reports a copy, a copy's (which a report whose copy failed also carries).
    const FAILURE: Failure = Failure::Call;

    /// Answer fields this tool never fills usefully, left out of its answers and its output
    /// schema (a type two tools answer with).
    const NOT_IN_ANSWER: &'static [&'static str] = &[];

    /// Fields of types inside the answer (their `$defs` name, then the fields) that this
    /// tool never fills usefully: left out of its output schema; its [`shape`](Self::shape)
    /// takes them out of its answers.
    const NOT_IN_PARTS: &'static [(&'static str, &'static [&'static str])] = &[];

    /// Fields of types inside the answer that [`shape`](Self::shape) leaves out of some
    /// answers: optional in its output schema.
    const SOMETIMES_IN_PARTS: &'static [(&'static str, &'static [&'static str])] = &[];

    /// The answer as the agent gets it, for a tool whose answer holds fields that mean
    /// nothing in some runs: they go before the answer is made lean (the shim's `lean`).
    /// [`NOT_IN_ANSWER`](Self::NOT_IN_ANSWER)'s fields are already gone; those of
    /// [`NOT_IN_PARTS`](Self::NOT_IN_PARTS) are this function's to take out.
    fn shape(_answer: &mut serde_json::Map<String, serde_json::Value>) {}

    /// What the shim tells a client that asked for progress while the call waits.
    fn progress(_req: &Self::Request) -> Option<Followed> {
        None
    }

    /// The request the daemon takes for `args` sent from `here`, or why they make none.
    fn request(args: Self::Args, here: &Here) -> Result<Self::Request, crate::DaemonError>;
}

/// Where a call comes from: what the shim that sends it adds to every request that needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Here {
    /// The local root the person configured for this agent (`--local-root`), if any; else
    /// the daemon's.
    pub local_root: Option<String>,
    /// A fresh key to file the call's run under, when the client asked to be told its
    /// progress (see [`Described::progress`]).
    pub progress_key: Option<String>,
    /// The tools the shim exposes (`--tools`): a request may need another tool to be read.
    pub exposed: std::sync::Arc<[crate::tool::Tool]>,
}

impl Here {
    /// Whether the agent can call `tool` on this shim.
    pub fn exposes(&self, tool: crate::tool::Tool) -> bool {
        self.exposed.contains(&tool)
    }
}

/// What a call's progress notifications follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Followed {
    /// A run the daemon files under `key` (a progress key the request carries from
    /// [`Here::progress_key`], or a handle's id): its output so far, each second.
    Run { auth: SessionAuth, key: String },
    /// Only the seconds the call has waited, each second, after these words.
    Clock(&'static str),
}

/// What a tool's answer's `error` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Why the call did not happen.
    Call,
    /// Why the call did not happen, or why its copy failed ([`TransferError`](crate::transfer::TransferError)).
    Copy,
}

/// MCP's hints of a tool's effects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    /// It changes nothing.
    pub read_only: bool,
    /// It may destroy what was there.
    pub destructive: bool,
    /// Calling it again with the same arguments does nothing more.
    pub idempotent: bool,
    /// It reaches beyond the daemon's own state (the host, the network).
    pub open_world: bool,
}

impl Hints {
    /// A tool that only reads the host.
    pub const READS_HOST: Hints = Hints {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: true,
    };

    /// A tool that only reads the daemon's own state (a session's lists).
    pub const READS_DAEMON: Hints = Hints {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };

    /// A tool that changes the host, to a state it reaches once (a directory made, a forward
    /// closed): again with the same arguments, it does nothing more.
    pub const SETS_HOST: Hints = Hints {
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: true,
    };

    /// A tool that stops something on the host (a kill): it ends work, and again with the
    /// same arguments it does nothing more.
    pub const STOPS: Hints = Hints {
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: true,
    };

    /// A tool that opens something new with each call (a session), destroying nothing.
    pub const OPENS: Hints = Hints {
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: true,
    };

    /// A tool that starts something on the host (a task, a forward): each call starts
    /// another, and what it starts may change or expose what was there, so it is marked as
    /// one that may destroy.
    pub const STARTS: Hints = Hints::MAY_DESTROY;

    /// A tool that may destroy what was there on the host (a file replaced, a path removed).
    pub const MAY_DESTROY: Hints = Hints {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    };
}

/// The arguments of a tool that takes only its session.
// No Debug: it holds the session key.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionArgs {
    pub session_id: String,
    pub session_key: String,
}

impl From<SessionArgs> for SessionAuth {
    fn from(args: SessionArgs) -> SessionAuth {
        auth(args.session_id, args.session_key)
    }
}

/// Shown every tool by [`visit_described`](crate::service::visit_described).
pub trait Visitor {
    fn visit<T: Described>(&mut self);
}

/// The session an agent names with its two arguments.
pub fn auth(session_id: String, session_key: String) -> SessionAuth {
    SessionAuth {
        session_id,
        session_key,
    }
}

/// A remote path an agent gives as `path` and, for one that is not UTF-8, `path_encoding`.
pub fn remote_path(path: String, encoding: Option<Encoding>) -> RemotePath {
    RemotePath {
        path,
        encoding: encoding.unwrap_or(Encoding::Utf8),
    }
}

/// A file mode an agent gives as octal digits (`example` shows one), or `invalid_arguments`.
pub fn octal_mode(mode: Option<String>, example: &str) -> Result<Option<u32>, crate::DaemonError> {
    mode.map(|m| {
        u32::from_str_radix(&m, 8).map_err(|_| {
            crate::DaemonError::invalid_arguments(format!(
                "`mode` must be octal digits, e.g. {example}"
            ))
        })
    })
    .transpose()
}

/// The wait an agent asks of a status call as the daemon will take it: it refuses a value
/// outside 0..=300, so this bound only keeps a bad value from making a bad deadline.
pub fn waited(wait_seconds: Option<f64>) -> Duration {
    let wait = wait_seconds.unwrap_or(0.0);
    let wait = if wait.is_finite() {
        wait.clamp(0.0, crate::command::MAX_WAIT_SECS)
    } else {
        0.0
    };
    Duration::from_secs_f64(wait)
}

/// How long a kill waits for the exit, as the daemon takes an agent's `wait_seconds`
/// (default 1 s, at most 60).
pub fn kill_waited(wait_seconds: Option<f64>) -> Duration {
    Duration::from_secs_f64(wait_seconds.unwrap_or(1.0).clamp(0.0, 60.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mode is octal digits, or refused with an example; none stays none.
    #[test]
    fn a_mode_is_octal_digits() {
        assert_eq!(
            octal_mode(Some("0755".into()), "0644").unwrap(),
            Some(0o755)
        );
        assert_eq!(octal_mode(None, "0644").unwrap(), None);
        for bad in ["rwx", "0789", "", "-1"] {
            let refused = octal_mode(Some(bad.into()), "0644").unwrap_err();
            assert_eq!(refused.code, crate::ErrorCode::InvalidArguments, "{bad}");
            assert!(
                refused.message.ends_with("e.g. 0644"),
                "{bad}: {}",
                refused.message
            );
        }
    }

    /// A status call's wait is what the daemon will take: 0 by default, at most 300 s, and a
    /// value that is no number waits not at all; a kill waits 1 s by default, at most 60.
    #[test]
    fn waits_are_bounded_as_the_daemon_bounds_them() {
        let secs = Duration::from_secs_f64;
        assert_eq!(waited(None), secs(0.0));
        assert_eq!(waited(Some(2.5)), secs(2.5));
        assert_eq!(waited(Some(300.0)), secs(300.0));
        assert_eq!(waited(Some(301.0)), secs(300.0));
        assert_eq!(waited(Some(-1.0)), secs(0.0));
        assert_eq!(waited(Some(f64::INFINITY)), secs(0.0));
        assert_eq!(kill_waited(None), secs(1.0));
        assert_eq!(kill_waited(Some(60.0)), secs(60.0));
        assert_eq!(kill_waited(Some(61.0)), secs(60.0));
        assert_eq!(kill_waited(Some(-3.0)), secs(0.0));
    }
}
