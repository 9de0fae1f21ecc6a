//! Wire types of command handles (`command_start`, `command_status`, `command_kill`,
//! `command_list`) and of following a run while it goes (`progress`).

use serde::{Deserialize, Serialize};

use crate::exec::Encoding;
use crate::session::SessionAuth;

/// Longest `command_status` long-poll, in seconds.
pub const MAX_WAIT_SECS: f64 = 300.0;
/// Shortest and longest `handoff_after`, in seconds.
pub const MIN_HANDOFF_SECS: f64 = 1.0;
pub const MAX_HANDOFF_SECS: f64 = 86_400.0;
/// Bytes of a stream's tail `command_status` returns when neither an offset nor `max_bytes`
/// is given.
pub const DEFAULT_TAIL_BYTES: u64 = 4096;
/// Commands `command_list` keeps, newest first (running ones are never dropped).
pub const HISTORY_LEN: usize = 100;
/// Bytes of a command kept as its preview in `command_list`.
pub const PREVIEW_BYTES: usize = 120;
/// Longest `command_kill` wait before the SIGKILL fallback, in seconds.
pub const MAX_KILL_WAIT_SECS: f64 = 60.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandStartRequest {
    pub auth: SessionAuth,
    pub command: String,
    pub cwd: Option<String>,
    /// Hard runtime limit in seconds; none when absent.
    pub timeout: Option<f64>,
    /// The caller's local root (absolute), when its person configured one.
    pub local_root: Option<String>,
}
crate::session::authed!(CommandStartRequest);

/// `command_start` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandStartArgs {
    pub session_id: String,
    pub session_key: String,
    /// Shell text for /bin/sh, at most 1 MiB.
    pub command: String,
    /// Remote working directory; default: home.
    pub cwd: Option<String>,
    /// Seconds until the process group is killed (`timed_out`); default none.
    #[schemars(range(min = 0.1, max = 86400.0))]
    pub timeout: Option<f64>,
}

/// Cancelled before it answers, the start is dropped: a command still waiting for a channel
/// never runs, and one just started (its handle never given) is stopped.
#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::CommandStart {
    type Args = CommandStartArgs;
    const TITLE: &'static str = "Start a long command";
    const DESCRIPTION: &'static str = "Start a /bin/sh command in the \
        background as the login user (no TTY, empty stdin) and answer at once: `handle_id`, \
        `pid` (process group, once known), `status` (`running` or how it ended). Then \
        command_status (`wait_seconds`). Output is kept whole in the local root (up to \
        1 GiB a stream) until the handle leaves the history (last 100 ended) or disconnect. \
        Likely quick: exec with `handoff_after`; as root: sudo_exec with it; must outlive \
        the session: task_launch. Errors: `remote_path_not_found` (no such `cwd`), \
        `invalid_command` (too long, NUL: as exec), `invalid_local_path` (local root \
        unusable: tell the user).";
    const HINTS: crate::described::Hints = crate::described::Hints::STARTS;
    /// Its wait for a channel (25 s) and its start on the host.
    const DEADLINE: std::time::Duration = COMMAND_MARGIN.saturating_mul(2);

    fn request(
        args: CommandStartArgs,
        here: &crate::described::Here,
    ) -> Result<CommandStartRequest, crate::DaemonError> {
        Ok(CommandStartRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            command: args.command,
            cwd: args.cwd,
            timeout: args.timeout,
            local_root: here.local_root.clone(),
        })
    }
}

/// Where a command handle stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CommandState {
    /// Still running.
    Running,
    /// Ended by itself: see `exit_code`.
    Completed,
    /// Its `timeout` ended it (the whole process group was terminated).
    TimedOut,
    /// command_kill was called on it and it is gone (it may have ended by itself first: see
    /// `exit_code`), or a disconnect under way ended it.
    Killed,
    /// The SSH connection died, or the daemon that ran it stopped (a crash, a restart), while
    /// it ran: its exit is unknown and its process group may still run on the host. After a
    /// daemon restart `command_kill` still reaches it. After a dead connection, first read its
    /// `pid` and the output you need with command_status (disconnecting discards both), then
    /// disconnect, connect again and check it with `exec` (`kill -0 -PID`, then
    /// `kill -TERM -PID`; `sudo_exec` for a root command).
    Lost,
}

impl CommandState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::TimedOut => "timed_out",
            Self::Killed => "killed",
            Self::Lost => "lost",
        }
    }

    /// How a command in this state ended, as people read it: `completed, exit 3`, or the
    /// state (`killed`, `timed_out`, ...).
    pub fn how_it_ended(self, exit_code: Option<i32>) -> String {
        match (self, exit_code) {
            (Self::Completed, Some(code)) => format!("completed, exit {code}"),
            (state, _) => state.as_str().to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommandStarted {
    /// The handle for command_status, command_kill and command_list.
    pub handle_id: String,
    /// The same value as `handle_id`.
    pub id: String,
    /// The remote process group of the command (its shell leads it); null until the remote
    /// shell reported it (a slow login shell).
    pub pid: Option<u32>,
    /// `running`, or already how it ended when it was that quick.
    pub status: CommandState,
    /// RFC 3339 UTC.
    pub started_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandStatusRequest {
    pub auth: SessionAuth,
    pub handle_id: String,
    /// Seconds to wait for the command to end (0..=300); 0 or absent answers at once.
    pub wait_seconds: Option<f64>,
    pub stdout_offset: Option<u64>,
    pub stderr_offset: Option<u64>,
    /// Bytes per stream (1..=the daemon's output cap); when absent, the cap for a stream read
    /// from an offset and [`DEFAULT_TAIL_BYTES`] for a tail.
    pub max_bytes: Option<u64>,
}
crate::session::authed!(CommandStatusRequest);

/// `command_status` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandStatusArgs {
    /// The session that started the command.
    pub session_id: String,
    pub session_key: String,
    /// From command_start or a hand-off.
    pub handle_id: String,
    /// Seconds to long-poll for the end (e.g. 30); default 0.
    #[schemars(range(min = 0.0, max = 300.0))]
    pub wait_seconds: Option<f64>,
    /// Offset to read from (the last `next_offset`, or 0); absent: the tail.
    pub stdout_offset: Option<u64>,
    /// As `stdout_offset`.
    pub stderr_offset: Option<u64>,
    /// Per stream: default 4096 for a tail, else 64 KiB (the cap).
    #[schemars(range(min = 1))]
    pub max_bytes: Option<u64>,
}

/// A call that waits for the end tells the client the output so far, each second.
#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::CommandStatus {
    type Args = CommandStatusArgs;
    const TITLE: &'static str = "Check a long command";
    const DESCRIPTION: &'static str = "Read a command handle's state and output, also after \
        it ended or its session was lost. `status`: `running`, `completed` (`exit_code`), \
        `timed_out`, `killed`, `lost` (connection or daemon died; it may still run: exec `ps -Ao pgid,args` finds it, group `pid`; exec `kill -- -<pid>` stops it, sudo_exec for a sudo_exec handle); `signal` names what ended it. `stdout`, `stderr`: a string if the command ended and its whole stream fits `max_bytes`; else an object \
        with `data` (`encoding: base64` if not UTF-8), `next_offset` (pass back as that \
        stream's offset: more to read while it is below `total_bytes` or the command runs), \
        `total_bytes`, `truncated` (1 GiB spool cap hit). Errors: `command_not_found` (see \
        command_list; a task PID: task_status), `invalid_arguments` (offset past \
        `total_bytes`).";
    const HINTS: crate::described::Hints = crate::described::Hints::READS_DAEMON;
    const DEADLINE: std::time::Duration = COMMAND_MARGIN;

    fn deadline(args: &CommandStatusArgs) -> std::time::Duration {
        crate::described::waited(args.wait_seconds) + COMMAND_MARGIN
    }

    fn progress(req: &CommandStatusRequest) -> Option<crate::described::Followed> {
        let waits = req.wait_seconds.is_some_and(|wait| wait > 0.0);
        waits.then(|| crate::described::Followed::Run {
            auth: req.auth.clone(),
            key: req.handle_id.clone(),
        })
    }

    /// Once a handle has ended, a chunk that holds its whole stream as UTF-8 text, not cut
    /// at the spool cap, needs no offsets: they go, and the lean answer gives the stream as
    /// its text. Any other chunk keeps them (its object is what the output schema
    /// describes), but a running command's stream that has had no byte yet is left out, as
    /// an empty stream is (unless the spool already stopped keeping it): a poll while it works
    /// costs only its state.
    fn shape(report: &mut serde_json::Map<String, serde_json::Value>) {
        if report.get("status").and_then(|s| s.as_str()) == Some("running") {
            report.retain(|name, chunk| {
                !(matches!(name.as_str(), "stdout" | "stderr")
                    && chunk.get("total_bytes").and_then(|t| t.as_u64()) == Some(0)
                    && chunk.get("truncated").and_then(|t| t.as_bool()) != Some(true))
            });
            return;
        }
        for stream in ["stdout", "stderr"] {
            if let Some(chunk) = report.get_mut(stream).and_then(|c| c.as_object_mut()) {
                let whole = chunk.get("offset").and_then(|o| o.as_u64()) == Some(0)
                    && chunk.get("next_offset") == chunk.get("total_bytes")
                    && chunk.get("encoding").and_then(|e| e.as_str()) == Some("utf-8")
                    && chunk.get("truncated").and_then(|t| t.as_bool()) != Some(true);
                if whole {
                    chunk.remove("offset");
                    chunk.remove("next_offset");
                }
            }
        }
    }

    fn request(
        args: CommandStatusArgs,
        _: &crate::described::Here,
    ) -> Result<CommandStatusRequest, crate::DaemonError> {
        Ok(CommandStatusRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            handle_id: args.handle_id,
            wait_seconds: args.wait_seconds,
            stdout_offset: args.stdout_offset,
            stderr_offset: args.stderr_offset,
            max_bytes: args.max_bytes,
        })
    }
}

/// A piece of one stream's complete output, addressed by byte offsets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StreamChunk {
    /// The stream's bytes `offset`..`next_offset` (never cut inside a character).
    pub data: String,
    /// `utf-8`, or `base64` when `data` holds bytes that are not UTF-8.
    pub encoding: Encoding,
    /// Offset of the first byte of `data` in the stream.
    pub offset: u64,
    /// Pass this back as the stream's offset to read on without a gap or a repeat.
    pub next_offset: u64,
    /// Bytes of this stream kept so far.
    pub total_bytes: u64,
    /// True when the stream outgrew the daemon's max-spool-bytes (or the local disk filled):
    /// only its first `total_bytes` were kept.
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommandReport {
    /// The handle asked about.
    pub handle_id: String,
    /// The command's remote process group (its shell's PID); null until the shell reported
    /// it.
    pub pid: Option<u32>,
    /// Where the handle stands (see each value).
    pub status: CommandState,
    /// The command's exit status, once it exited by itself; else null.
    pub exit_code: Option<i32>,
    /// The signal that ended the command's shell (`TERM`, `KILL`, ...), else null.
    pub signal: Option<String>,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// When the command ended (RFC 3339 UTC); null while it runs.
    pub ended_at: Option<String>,
    /// `person` when the person killed it (`sshmcp kill`); else null.
    pub stopped_by: Option<String>,
    /// A piece of the command's complete stdout.
    pub stdout: StreamChunk,
    /// A piece of the command's complete stderr.
    pub stderr: StreamChunk,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandKillRequest {
    pub auth: SessionAuth,
    pub handle_id: String,
    /// Signal number (1..=64); 15 (TERM) when absent.
    pub signal: Option<i32>,
    pub force: Option<bool>,
    /// Seconds to wait for the command to go before the SIGKILL fallback (0..=60); 1 when
    /// absent.
    pub wait_seconds: Option<f64>,
}
crate::session::authed!(CommandKillRequest);

/// `command_kill` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandKillArgs {
    /// The session that started the command.
    pub session_id: String,
    pub session_key: String,
    /// From command_start or a hand-off; not a PID.
    pub handle_id: String,
    /// TERM (default), HUP, INT, QUIT, ABRT, ALRM, KILL (`SIG` prefix ok), or 1..64.
    pub signal: Option<crate::signal::Signal>,
    /// SIGKILL if still running after `wait_seconds`.
    pub force: Option<bool>,
    /// Seconds to wait for the exit; default 1.
    #[schemars(range(min = 0.0, max = 60.0))]
    pub wait_seconds: Option<f64>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::CommandKill {
    type Args = CommandKillArgs;
    const TITLE: &'static str = "Kill a long command";
    const DESCRIPTION: &'static str = "Signal a command handle's process \
        group (as root for a sudo_exec one) if it still runs; a task PID: task_kill. \
        `result`: `killed`, `already_exited` (ended as the signal came), \
        `not_running` (had ended: nothing sent), `failed_to_kill` (still runs after `wait_seconds`: raise it, or `force: true`; then tell the user), \
        `invalid_pid` (no PID known yet: nothing sent; command_status, then retry), `error` \
        (state unknown, e.g. a `lost` handle's, whose group is never signalled: see command_status); `force_kill_used`: SIGKILL sent. Errors: `command_not_found` (see command_list).";
    const HINTS: crate::described::Hints = crate::described::Hints::STOPS;
    const DEADLINE: std::time::Duration = COMMAND_MARGIN;

    fn deadline(args: &CommandKillArgs) -> std::time::Duration {
        crate::described::kill_waited(args.wait_seconds) + COMMAND_MARGIN
    }

    fn request(
        args: CommandKillArgs,
        _: &crate::described::Here,
    ) -> Result<CommandKillRequest, crate::DaemonError> {
        Ok(CommandKillRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            handle_id: args.handle_id,
            signal: crate::signal::Signal::number_of(args.signal)?,
            force: args.force,
            wait_seconds: args.wait_seconds,
        })
    }
}

/// How long a client waits for the daemon beyond a command call's own waiting.
#[cfg(feature = "schema")]
pub const COMMAND_MARGIN: std::time::Duration = std::time::Duration::from_secs(30);

/// What a kill came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum KillResult {
    /// Nothing was signalled: confirmed not running (task_kill: or not the task sshmcp
    /// launched).
    NotRunning,
    /// Confirmed terminated, by the signal or the SIGKILL fallback.
    Killed,
    /// Gone by the time the signal landed.
    AlreadyExited,
    /// Still running after the signal (and SIGKILL when forced): not terminal; call again
    /// with `force: true`, or, when `force_kill_used` was already true, tell the user (the
    /// process is stuck, e.g. in the kernel).
    FailedToKill,
    /// No valid process id to signal (a command whose shell ended without reporting one; a
    /// task PID of 1 or below): nothing was signalled.
    InvalidPid,
    /// The attempt itself failed: the real state is unknown; check command_status or
    /// task_status.
    Error,
}

impl KillResult {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotRunning => "not_running",
            Self::Killed => "killed",
            Self::AlreadyExited => "already_exited",
            Self::FailedToKill => "failed_to_kill",
            Self::InvalidPid => "invalid_pid",
            Self::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommandKilled {
    /// The handle asked about.
    pub handle_id: String,
    /// The process group the kill addressed; null when none was known.
    pub pid: Option<u32>,
    /// What the kill found and did (see each value).
    pub result: KillResult,
    /// The signal number asked for (sent unless `result` is `not_running` or `invalid_pid`).
    pub signal: i32,
    /// True iff the SIGKILL fallback was attempted.
    pub force_kill_used: bool,
    /// When the kill finished (RFC 3339 UTC).
    pub timestamp: String,
}

/// One command handle of this session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommandSummary {
    /// For command_status and command_kill.
    pub handle_id: String,
    /// The first line of the command text (at most 120 bytes; `…` when there is more).
    pub preview: String,
    /// Where the handle stands (see each value).
    pub status: CommandState,
    /// Its exit status once it exited by itself, else null.
    pub exit_code: Option<i32>,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC; null while it runs.
    pub ended_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CommandList {
    /// This session's handles, newest first: every running one and the last 100 ended.
    pub commands: Vec<CommandSummary>,
}

/// `command_list` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandListArgs {
    pub session_id: String,
    pub session_key: String,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::CommandList {
    type Args = CommandListArgs;
    const TITLE: &'static str = "List long commands";
    const DESCRIPTION: &'static str = "List this session's command \
        handles (command_start's, and execs handed off), newest first, incl. the last 100 ended, to find a lost `handle_id`: \
        `commands`, each with `handle_id`, `preview` (the command's first line), `status` \
        (as command_status), `exit_code`, `started_at`, `ended_at`. Tasks are not listed (a \
        lost task PID: see task_launch).";
    const HINTS: crate::described::Hints = crate::described::Hints::READS_DAEMON;
    const DEADLINE: std::time::Duration = COMMAND_MARGIN;

    fn request(
        args: CommandListArgs,
        _: &crate::described::Here,
    ) -> Result<SessionAuth, crate::DaemonError> {
        Ok(crate::described::auth(args.session_id, args.session_key))
    }
}

/// Following a run while it goes: `key` is the progress key a caller gave `exec` or
/// `sudo_exec`, or a handle id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressRequest {
    pub auth: SessionAuth,
    pub key: String,
}

/// What a run has done so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunProgress {
    /// Bytes of output so far, both streams.
    pub bytes: u64,
    /// The last line of output, at most 200 bytes (lossy UTF-8).
    pub last_line: String,
}

/// The person's read of a command handle (`sshmcp output`): no key, as the daemon's user is
/// the person's; `id` is a handle's id, or a unique prefix of one, in any session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputRequest {
    pub id: String,
    /// As [`CommandStatusRequest`]'s.
    pub wait_seconds: Option<f64>,
    pub stdout_offset: Option<u64>,
    pub stderr_offset: Option<u64>,
    pub max_bytes: Option<u64>,
}

/// What the person's stop (`sshmcp kill`) did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopped {
    /// The whole id of what was stopped.
    pub id: String,
    /// `command`, `transfer` or `forward`.
    pub kind: String,
    pub session_id: String,
    /// As the agent then reads it: a kill's result (`killed`, `already_exited`, ...), a
    /// transfer's state, or `closed` for a forward.
    pub outcome: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A completed command is told with its exit code; any other end by its state alone.
    #[test]
    fn how_a_command_ended_reads_as_people_say_it() {
        assert_eq!(
            CommandState::Completed.how_it_ended(Some(3)),
            "completed, exit 3"
        );
        assert_eq!(CommandState::Killed.how_it_ended(Some(0)), "killed");
        assert_eq!(CommandState::TimedOut.how_it_ended(None), "timed_out");
        assert_eq!(CommandState::Completed.how_it_ended(None), "completed");
    }
}
