//! The command line grammar of `sshmcp`.

use clap::{Parser, Subcommand};

/// Manage the sshmcp daemon and its SSH sessions.
#[derive(Debug, Parser)]
#[command(
    name = "sshmcp",
    version,
    propagate_version = true,
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The exit codes, shown under `--help` (and in docs/cli.md).
pub const EXIT_CODES: &str = "\
Exit codes:
  0  done
  1  the command failed (the message says why, and what to do)
  2  the command line is wrong (usage)
  3  the daemon is not running (daemon status)
  4  doctor found a problem";

/// A value of the command line this program reads itself that it cannot take (a time, an
/// outcome): wrong usage, as clap's own refusals, so it exits 2.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every session of the daemon, starting it if needed (session keys are never shown).
    Sessions {
        /// Print JSON (the rows of the session_list tool) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Close sessions: cancel their commands and transfers, stop their SSH masters.
    ///
    /// Agents holding a closed session's key get `session_not_found` from then on; its
    /// command handles and their output files go with it, detached tasks keep running. Close
    /// `lost` sessions this way before connecting again.
    Disconnect {
        /// The session id, as `sshmcp sessions` shows it.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        session_id: Option<String>,
        /// Close every session.
        #[arg(long)]
        all: bool,
        /// Do not ask for confirmation (needed with --all when stdin is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Show the audit trail: what agents did on which host, newest first.
    ///
    /// The daemon writes one line per call that reaches a host (connect, disconnect, exec,
    /// sudo_exec, the command, task, file, transfer and forward tools) to audit.jsonl in its
    /// state directory, with the session, target, tool, a summary (a command's first 200
    /// bytes, or paths and sizes), the outcome (ok, timed_out, cancelled, or the error code,
    /// with why after the summary), the exit code and the MCP client's name.
    History {
        /// Only the calls of the sessions whose id begins with this (a whole id, or a prefix).
        #[arg(long = "session", value_name = "ID")]
        session: Option<String>,
        /// Only calls on this host: its connect target (alias or user@host:port) or server
        /// name, exactly.
        #[arg(long, value_name = "T")]
        target: Option<String>,
        /// Only calls at or after this time: RFC 3339 with any offset
        /// (2026-12-05T07:45:23Z, 2026-12-05T08:45:23+01:00), a date (2026-12-05, from
        /// midnight UTC), or a span back from now (30m, 1h, 2d, 1h30m).
        #[arg(long, value_name = "WHEN")]
        since: Option<String>,
        /// Only calls that went this way: ok, timed_out, cancelled, or an error code (such as
        /// policy_denied or connection_start_failed).
        #[arg(long, value_name = "OUTCOME")]
        outcome: Option<String>,
        /// Show at most this many calls.
        #[arg(long, value_name = "N", default_value_t = 50, value_parser = at_least_one)]
        limit: usize,
        /// Print the trail's own JSON objects, one per line, instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Watch the sessions live: running commands with their elapsed time, transfers with
    /// their progress, forwards; redrawn every second until Ctrl-C.
    ///
    /// It reads what the daemon already holds, so watching costs the agents nothing and
    /// reaches no host. It never starts a daemon.
    Watch {
        /// Print one snapshot and exit (exit 3 when the daemon is not running).
        #[arg(long)]
        once: bool,
        /// Print JSON: with --once one object, else one line per second.
        #[arg(long)]
        json: bool,
    },
    /// Print a command's output: a command handle's (started by command_start, or an exec
    /// or sudo_exec handed off), or an exec or sudo_exec under way (its last 64 KiB of each
    /// stream), running or ended, stdout to stdout and stderr to stderr.
    ///
    /// It needs no session key: the daemon is yours. With --follow it prints what comes until
    /// the command ends (across an exec's hand-off), then says how it ended (on stderr), and
    /// exits with its exit status.
    Output {
        /// The command's id, or a unique prefix of it (as `sshmcp watch` shows it).
        id: String,
        /// Keep printing until the command ends.
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Stop a command, a transfer or a forward of any session, as the agent's own kill,
    /// cancel or stop would (asking first on a terminal).
    ///
    /// A command's process group gets TERM, then KILL if it holds on (an exec under way then
    /// answers its agent with the signal); a transfer keeps its partial file; a forward's
    /// port is free once this answers. The agent then reads the same state as after its own
    /// stop.
    Kill {
        /// The id (`cmd-…`, `tr-…`, `fw-…`), or a unique prefix of it.
        id: String,
        /// Do not ask.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Check this machine's setup, saying how to fix each problem
    ///
    /// It looks at ssh and rsync, the runtime and state directories and their modes, the
    /// socket, the daemon's default local root and ssh config (as the running daemon uses
    /// them, else as a daemon started now would take them from the environment and the
    /// config file), and whether the daemon answers. A daemon that is not running is no
    /// problem: clients start it.
    Doctor {
        /// Print JSON: one object per check (`check`, `ok`, `said` or `problem` and `fix`).
        #[arg(long)]
        json: bool,
    },
    /// Inspect, start, stop or restart the daemon, or read its log.
    Daemon {
        #[command(subcommand)]
        command: DaemonCommand,
    },
    /// Print what adds sshmcp to an MCP client, with this installation's absolute paths.
    McpConfig {
        /// The client: `claude-code` gets the command to run, `claude-desktop` and `cursor`
        /// the JSON entry for their configuration file (where it goes is said on stderr).
        /// Without one, the clients and what each gets.
        client: Option<McpClient>,
        /// The directory the agent's downloads, uploads and command output live in; default
        /// the one a daemon started now would take (its config file's, the environment's,
        /// else its own default).
        #[arg(long)]
        local_root: Option<std::path::PathBuf>,
    },
    /// Print the end of the daemon's log (as `sshmcp daemon logs`).
    Logs {
        /// How many lines from the end.
        #[arg(long, short = 'n', default_value_t = 50)]
        lines: usize,
        /// Keep printing lines as the daemon writes them (until interrupted).
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// The config file: where it is, what it says, whether a daemon would take it.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Print a completion script for a shell (e.g. `sshmcp completions bash >
    /// ~/.local/share/bash-completion/completions/sshmcp`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// MCP clients `mcp-config` knows.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum McpClient {
    ClaudeCode,
    ClaudeDesktop,
    Cursor,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the config file's path (`SSHMCP_CONFIG`, else the default), said to be missing
    /// on stderr when it is.
    Path,
    /// Print the config file.
    Show,
    /// Check that a daemon started now would take the file and its settings (exit 1 and the
    /// reason when not).
    Check,
}

#[derive(Debug, Subcommand)]
pub enum DaemonCommand {
    /// Show whether the daemon runs, where, and with which settings.
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start the daemon if none runs (agents' MCP servers also start it on first use).
    Start,
    /// Close every session and stop the daemon (asking first, on a terminal, when there are
    /// sessions).
    ///
    /// Command handles and their output files go with their sessions; detached tasks keep
    /// running. The next agent call starts a new daemon, with no sessions. It says how many
    /// sessions and running commands it ended.
    Stop {
        /// Do not ask.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Replace the daemon with this installation's, for upgrades: sessions and transfers
    /// carry over.
    ///
    /// Commands running at that moment are cut off (their handles then say `lost`, an exec's
    /// agent is told its command ended; the restart names them). The new daemon takes its settings from this shell's environment
    /// and config.toml.
    Restart,
    /// Read the config file's [[policy]] entries again, without dropping sessions (as SIGHUP
    /// does).
    ///
    /// The next call of every session is checked against the new policy. A file that does
    /// not parse leaves the policy before in force, and this says why (exit 1). Other
    /// settings of the file need `sshmcp daemon restart`.
    Reload,
    /// Print the end of the daemon's log.
    Logs {
        /// How many lines from the end.
        #[arg(long, short = 'n', default_value_t = 50)]
        lines: usize,
        /// Keep printing lines as the daemon writes them (until interrupted).
        #[arg(long, short = 'f')]
        follow: bool,
    },
}

/// A count of at least one, said in words when it is not.
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("must be a whole number, at least 1".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A count is a whole number from 1; anything else is refused in words.
    #[test]
    fn a_count_is_at_least_one() {
        assert_eq!(at_least_one("1"), Ok(1));
        assert_eq!(at_least_one("250"), Ok(250));
        for bad in ["0", "-1", "1.5", "", "ten"] {
            assert_eq!(
                at_least_one(bad),
                Err("must be a whole number, at least 1".into()),
                "{bad}"
            );
        }
    }
}
