//! The `sshmcp` binary: a person's view of the daemon. Commands that only look (sessions,
//! status) or stop never start a daemon.

mod cli;
mod render;

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Parser;
use sshmcp_proto::client::{Connection, connect_existing};
use sshmcp_proto::paths::RuntimePaths;
use sshmcp_proto::service::context_with_timeout;

use cli::{Cli, Command, DaemonCommand};

/// Exit status when the daemon is not running and the command needed it.
const EXIT_NOT_RUNNING: u8 = 3;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sshmcp: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sshmcp: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let paths = RuntimePaths::from_env();
    let conn = connect_existing(&paths).await?;
    let out = &mut std::io::stdout().lock();
    match cli.command {
        Command::Sessions { json } => {
            let rows = match &conn {
                Some(c) => {
                    c.client
                        .session_list(context_with_timeout(Duration::from_secs(10)))
                        .await?
                }
                None => Vec::new(),
            };
            if json {
                let rows: Vec<serde_json::Value> = rows.iter().map(session_json).collect();
                writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
            } else {
                write!(out, "{}", render::sessions_table(&rows))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Disconnect { session_id } => {
            let Some(c) = conn else {
                bail!("no daemon is running, so there is no session {session_id}");
            };
            let ctx = context_with_timeout(Duration::from_secs(60));
            match c.client.disconnect(ctx, session_id.clone()).await? {
                Ok(d) => writeln!(out, "session {} {}", d.session_id, d.state.as_str())?,
                Err(e) => bail!("cannot disconnect {session_id}: {} ({})", e.message, e.code),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Daemon {
            command: DaemonCommand::Status { json },
        } => {
            let Some(c) = conn else {
                writeln!(
                    out,
                    "sshmcpd is not running (socket {})",
                    paths.socket().display()
                )?;
                return Ok(ExitCode::from(EXIT_NOT_RUNNING));
            };
            let s = c
                .client
                .status(context_with_timeout(Duration::from_secs(10)))
                .await?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&status_json(&s))?)?;
            } else {
                write!(out, "{}", render::status_text(&s))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Daemon {
            command: DaemonCommand::Stop,
        } => {
            let Some(c) = conn else {
                writeln!(out, "sshmcpd is not running")?;
                return Ok(ExitCode::SUCCESS);
            };
            stop(c, &paths).await?;
            writeln!(out, "sshmcpd stopped; its sessions are closed")?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Asks the daemon to close everything and exit, then waits until its pidfile lock is free.
async fn stop(c: Connection, paths: &RuntimePaths) -> anyhow::Result<()> {
    let ctx = context_with_timeout(Duration::from_secs(120));
    match c.client.shutdown(ctx).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => bail!("the daemon refused to stop: {}", e.message),
        // The daemon may exit before its answer is written; its pidfile lock tells the rest.
        Err(tarpc::client::RpcError::Shutdown) => {}
        Err(e) => return Err(e.into()),
    }
    let pidfile = paths.pidfile();
    let wait = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        match std::fs::File::open(&pidfile) {
            // Blocks until the daemon's exit releases its lock.
            Ok(f) => f.lock_shared(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    });
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .context("the daemon did not exit within 30 s")???;
    Ok(())
}

fn session_json(s: &sshmcp_proto::session::SessionSummary) -> serde_json::Value {
    serde_json::json!({
        "session_id": s.session_id,
        "state": s.state.as_str(),
        "target": s.target,
        "server_host": s.server_host,
        "server_port": s.server_port,
        "master_pid": s.master_pid,
        "created_at": s.created_at,
        "last_used_at": s.last_used_at,
        "active_commands": s.active_commands,
        "active_transfers": s.active_transfers,
    })
}

fn status_json(s: &sshmcp_proto::DaemonStatus) -> serde_json::Value {
    serde_json::json!({
        "pid": s.pid,
        "daemon_version": s.daemon_version,
        "protocol_version": s.protocol_version,
        "started_at": s.started_at,
        "socket": s.socket,
        "state_dir": s.state_dir,
        "log_file": s.log_file,
        "default_local_root": s.default_local_root,
        "ssh_config": s.ssh_config,
        "sessions": s.sessions,
        "max_sessions": s.max_sessions,
        "max_output_bytes": s.max_output_bytes,
        "max_transfers": s.max_transfers,
    })
}
