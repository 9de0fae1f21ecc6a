//! What each CLI command does: connect to the daemon (or not), call it, render the answer.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use sshmcp_proto::client::{Connection, connect_existing, connect_or_start, daemon_program};
use sshmcp_proto::paths::RuntimePaths;
use sshmcp_proto::service::context_with_timeout;

use crate::cli::{Command, DaemonCommand};
use crate::render;

/// Exit status when the daemon is not running and the command needed it.
const EXIT_NOT_RUNNING: u8 = 3;
/// Deadline of the quick calls (listing, status).
const QUICK: Duration = Duration::from_secs(10);

pub async fn run(command: Command) -> anyhow::Result<ExitCode> {
    let paths = RuntimePaths::from_env();
    let conn = connect_existing(&paths).await?;
    let out = &mut std::io::stdout().lock();
    match command {
        Command::Sessions { json } => sessions(conn, json, out).await,
        Command::Disconnect { session_id } => disconnect(conn, session_id, out).await,
        Command::Daemon { command } => match command {
            DaemonCommand::Status { json } => status(conn, &paths, json, out).await,
            DaemonCommand::Start => start(conn, &paths, out).await,
            DaemonCommand::Stop => stop(conn, &paths, out).await,
            DaemonCommand::Logs { lines } => logs(conn, lines, out).await,
        },
        Command::McpConfig { .. } | Command::Completions { .. } => {
            unreachable!("handled by local::run before the daemon is asked")
        }
    }
}

async fn sessions(
    conn: Option<Connection>,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let rows = match &conn {
        Some(c) => c.client.session_list(context_with_timeout(QUICK)).await?,
        None => Vec::new(),
    };
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
    } else {
        write!(out, "{}", render::sessions_table(&rows))?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn disconnect(
    conn: Option<Connection>,
    session_id: String,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
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

async fn status(
    conn: Option<Connection>,
    paths: &RuntimePaths,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let Some(c) = conn else {
        writeln!(
            out,
            "sshmcpd is not running (socket {})",
            paths.socket().display()
        )?;
        return Ok(ExitCode::from(EXIT_NOT_RUNNING));
    };
    let s = c.client.status(context_with_timeout(QUICK)).await?;
    if json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&render::status_json(&s, &c.capabilities))?
        )?;
    } else {
        write!(out, "{}", render::status_text(&s, &c.capabilities))?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn start(
    conn: Option<Connection>,
    paths: &RuntimePaths,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let c = match conn {
        Some(c) => c,
        None => connect_or_start(paths, &daemon_program()).await?,
    };
    let s = c.client.status(context_with_timeout(QUICK)).await?;
    write!(out, "{}", render::status_text(&s, &c.capabilities))?;
    Ok(ExitCode::SUCCESS)
}

/// Asks the daemon to close everything and exit, then waits until its pidfile lock is free.
async fn stop(
    conn: Option<Connection>,
    paths: &RuntimePaths,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let Some(c) = conn else {
        writeln!(out, "sshmcpd is not running")?;
        return Ok(ExitCode::SUCCESS);
    };
    match c
        .client
        .shutdown(context_with_timeout(Duration::from_secs(120)))
        .await
    {
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
    writeln!(out, "sshmcpd stopped; its sessions are closed")?;
    Ok(ExitCode::SUCCESS)
}

async fn logs(
    conn: Option<Connection>,
    lines: usize,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let log: PathBuf = match &conn {
        Some(c) => c
            .client
            .status(context_with_timeout(QUICK))
            .await?
            .log_file
            .into(),
        None => sshmcp_proto::paths::state_dir_from_env()
            .context("no state directory: set SSHMCP_STATE_DIR or HOME")?
            .join("sshmcpd.log"),
    };
    let text =
        std::fs::read_to_string(&log).with_context(|| format!("cannot read {}", log.display()))?;
    let all: Vec<&str> = text.lines().collect();
    for line in &all[all.len().saturating_sub(lines)..] {
        writeln!(out, "{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}
