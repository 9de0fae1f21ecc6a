//! The command line grammar of `sshmcp`.

use clap::{Parser, Subcommand};

/// Manage the sshmcp daemon and its SSH sessions.
#[derive(Debug, Parser)]
#[command(name = "sshmcp", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every session of the daemon (never keys).
    Sessions {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Close a session: cancel its commands and stop its SSH connection.
    Disconnect {
        /// The session id, as `sshmcp sessions` shows it.
        session_id: String,
    },
    /// Inspect, start or stop the daemon, or read its log.
    Daemon {
        #[command(subcommand)]
        command: DaemonCommand,
    },
    /// Print what adds sshmcp to an MCP client, with this installation's absolute paths.
    McpConfig {
        /// The client: `claude-code` gets the command to run, `claude-desktop` and `cursor`
        /// the JSON entry for their configuration file (where it goes is said on stderr).
        client: McpClient,
        /// The directory the agent's downloads, uploads and command output live in; default
        /// `~/sshmcp-files`.
        #[arg(long)]
        local_root: Option<std::path::PathBuf>,
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
pub enum DaemonCommand {
    /// Show whether the daemon runs, where, and with which settings.
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start the daemon if none runs (agents' MCP servers also start it on first use).
    Start,
    /// Close every session and stop the daemon.
    Stop,
    /// Replace the daemon by this installation's, keeping every session (for upgrades).
    Restart,
    /// Print the end of the daemon's log.
    Logs {
        /// How many lines from the end.
        #[arg(long, short = 'n', default_value_t = 50)]
        lines: usize,
    },
}
