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
    /// Print the end of the daemon's log.
    Logs {
        /// How many lines from the end.
        #[arg(long, short = 'n', default_value_t = 50)]
        lines: usize,
    },
}
