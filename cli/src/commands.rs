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
    // A restart must work on a daemon of any protocol version (that is what upgrades need),
    // so it speaks to the daemon's process, not its socket.
    if let Command::Daemon {
        command: DaemonCommand::Restart,
    } = command
    {
        return restart(&paths, &mut std::io::stdout().lock()).await;
    }
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
            DaemonCommand::Restart => unreachable!("handled above"),
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
        // The daemon may close the connection before its answer is written; its pidfile
        // lock tells the rest.
        Err(_) => {}
    }
    wait_for_exit(paths).await?;
    writeln!(out, "sshmcpd stopped; its sessions are closed")?;
    Ok(ExitCode::SUCCESS)
}

/// Waits until the daemon holding the pidfile exits: the kernel releases its lock then.
async fn wait_for_exit(paths: &RuntimePaths) -> anyhow::Result<()> {
    let pidfile = paths.pidfile();
    let wait = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        match std::fs::File::open(&pidfile) {
            Ok(f) => f.lock_shared(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    });
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .context("the daemon did not exit within 30 s; see `sshmcp daemon logs`")???;
    Ok(())
}

/// The pid of the daemon holding the pidfile lock, or `None` when no daemon holds it.
fn running_daemon(paths: &RuntimePaths) -> anyhow::Result<Option<u32>> {
    let pidfile = paths.pidfile();
    let file = match std::fs::File::open(&pidfile) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", pidfile.display())),
    };
    match file.try_lock_shared() {
        // Nobody holds it: what the file says is left over.
        Ok(()) => Ok(None),
        Err(std::fs::TryLockError::WouldBlock) => {
            let text = std::fs::read_to_string(&pidfile)?;
            let pid = text.split_whitespace().next().and_then(|w| w.parse().ok());
            pid.map(Some)
                .with_context(|| format!("{} names no pid: {text:?}", pidfile.display()))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

/// Hands every session to a new daemon: the running one (whatever its version) is asked with
/// SIGUSR1 to exit leaving its masters up, then a daemon of this installation starts and
/// re-adopts them.
async fn restart(paths: &RuntimePaths, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let old = running_daemon(paths)?;
    if let Some(pid) = old {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGUSR1,
        )
        .with_context(|| format!("cannot signal the daemon (pid {pid})"))?;
        wait_for_exit(paths).await?;
    }
    let c = connect_or_start(paths, &daemon_program()).await?;
    let s = c.client.status(context_with_timeout(QUICK)).await?;
    let kept = match s.sessions {
        1 => "1 session kept".to_string(),
        n => format!("{n} sessions kept"),
    };
    match old {
        Some(pid) => writeln!(out, "sshmcpd restarted (pid {pid} -> {}); {kept}", s.pid)?,
        None => writeln!(
            out,
            "sshmcpd was not running; started (pid {}); {kept}",
            s.pid
        )?,
    }
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
