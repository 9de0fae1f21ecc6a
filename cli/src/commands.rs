//! What each CLI command does: connect to the daemon (or not), call it, render the answer.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use sshmcp_local::client::{Connection, connect_existing, connect_or_start, daemon_program};
use sshmcp_local::paths::RuntimePaths;
use sshmcp_proto::service::context_with_timeout;

use crate::cli::{Command, DaemonCommand};
use crate::render;

/// Exit status when the daemon is not running and the command needed it.
pub const EXIT_NOT_RUNNING: u8 = 3;
/// Deadline of the quick calls (listing, status).
const QUICK: Duration = Duration::from_secs(10);

pub async fn run(command: Command) -> anyhow::Result<ExitCode> {
    let paths = RuntimePaths::from_env();
    // `sshmcp logs` is `sshmcp daemon logs`, shorter.
    let command = match command {
        Command::Logs { lines, follow } => Command::Daemon {
            command: DaemonCommand::Logs { lines, follow },
        },
        other => other,
    };
    // A restart must work on a daemon of any protocol version (that is what upgrades need),
    // so it speaks to the daemon's process, not its socket.
    if let Command::Daemon {
        command: DaemonCommand::Restart,
    } = command
    {
        return restart(&paths, &mut std::io::stdout().lock()).await;
    }
    let out = &mut std::io::stdout().lock();
    // What shows or closes sessions starts the daemon: a new one re-adopts the sessions a
    // crashed one left.
    match command {
        Command::Sessions { json } => return sessions(&paths, json, out).await,
        // clap lets `--all` come only without an id: no id means all.
        Command::Disconnect {
            session_id, yes, ..
        } => return disconnect(&paths, session_id, yes, out).await,
        Command::Doctor { json } => return crate::doctor::run(&paths, json, out).await,
        Command::Watch { once, json } => return crate::watch::run(&paths, once, json, out).await,
        Command::Output { id, follow } => {
            return crate::work::output(&paths, id, follow, out).await;
        }
        Command::Kill { id, yes } => return crate::work::kill(&paths, id, yes, out).await,
        Command::History {
            session,
            target,
            since,
            outcome,
            limit,
            json,
        } => {
            let filter = crate::history::Filter::new(session, target, since, outcome, limit)?;
            return history(&paths, filter, json, out).await;
        }
        _ => {}
    }
    // The log is a file: a daemon this client cannot speak to still has one to read.
    let conn = match (&command, connect_existing(&paths).await) {
        (
            Command::Daemon {
                command: DaemonCommand::Logs { .. },
            },
            Err(_),
        ) => None,
        (_, conn) => conn?,
    };
    match command {
        Command::Sessions { .. }
        | Command::Disconnect { .. }
        | Command::Doctor { .. }
        | Command::Watch { .. }
        | Command::Output { .. }
        | Command::Kill { .. }
        | Command::History { .. } => {
            unreachable!("handled above")
        }
        Command::Daemon { command } => match command {
            DaemonCommand::Status { json } => status(conn, &paths, json, out).await,
            DaemonCommand::Start => start(conn, &paths, out).await,
            DaemonCommand::Stop { yes } => stop(conn, &paths, yes, out).await,
            DaemonCommand::Logs { lines, follow } => logs(conn, lines, follow, out).await,
            DaemonCommand::Reload => reload(conn, out).await,
            DaemonCommand::Restart => unreachable!("handled above"),
        },
        Command::McpConfig { .. } | Command::Config { .. } | Command::Completions { .. } => {
            unreachable!("handled by local::run before the daemon is asked")
        }
        Command::Logs { .. } => unreachable!("made `daemon logs` above"),
    }
}

async fn sessions(
    paths: &RuntimePaths,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let c = connect_or_start(paths, &daemon_program()).await?;
    let rows = c.client.session_list(context_with_timeout(QUICK)).await?;
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
    } else {
        let table = render::sessions_table(&rows, std::time::SystemTime::now(), terminal_width());
        write!(out, "{table}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The width to fit: the terminal's when stdout is one, else `COLUMNS` when set, else none.
pub fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        let mut size = nix::libc::winsize {
            ws_row: 0,
            ws_col: 0,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCGWINSZ fills the winsize it is given and touches nothing else.
        let read = unsafe { nix::libc::ioctl(1, nix::libc::TIOCGWINSZ, &mut size) };
        if read == 0 && size.ws_col > 0 {
            return Some(size.ws_col.into());
        }
    }
    std::env::var("COLUMNS").ok()?.parse().ok()
}

async fn disconnect(
    paths: &RuntimePaths,
    session_id: Option<String>,
    yes: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let c = match connect_existing(paths).await? {
        Some(c) => c,
        // No daemon runs: one is started only for what its record holds (the new daemon
        // takes those sessions back, and then closes them); a typo starts nothing.
        None => {
            let recorded = recorded_session_ids(paths);
            match &session_id {
                Some(id) => {
                    unique_id(id, &recorded, "session").map_err(|e| {
                        anyhow::anyhow!(
                            "{e}\nhint: no daemon runs, and its record holds no such session"
                        )
                    })?;
                }
                None if recorded.is_empty() => {
                    writeln!(out, "no sessions")?;
                    return Ok(ExitCode::SUCCESS);
                }
                None => {}
            }
            connect_or_start(paths, &daemon_program()).await?
        }
    };
    // The daemon then tells an agent that calls on a session closed here that the person
    // closed it, and the trail names who did.
    if c.capabilities.iter().any(|cap| cap == "introduce") {
        let person = sshmcp_proto::service::PERSON_CLIENT.to_string();
        c.client
            .introduce(context_with_timeout(QUICK), person)
            .await?;
    }
    let rows = c.client.session_list(context_with_timeout(QUICK)).await?;
    let ids = match session_id {
        Some(id) => {
            let live: Vec<String> = rows.into_iter().map(|r| r.session_id).collect();
            match unique_id(&id, &live, "session") {
                Ok(full) => vec![full],
                Err(e) => bail!("{e}\nhint: `sshmcp sessions` lists the sessions there are"),
            }
        }
        None => {
            if rows.is_empty() {
                writeln!(out, "no sessions")?;
                return Ok(ExitCode::SUCCESS);
            }
            if !yes && !confirmed(rows.len())? {
                writeln!(out, "nothing closed")?;
                return Ok(ExitCode::FAILURE);
            }
            rows.into_iter().map(|r| r.session_id).collect()
        }
    };
    let mut failed = false;
    for id in ids {
        let ctx = context_with_timeout(Duration::from_secs(60));
        match c.client.disconnect(ctx, id.clone()).await? {
            Ok(d) => writeln!(out, "session {} {}", d.session_id, d.state.as_str())?,
            Err(e) => {
                failed = true;
                eprintln!(
                    "sshmcp: cannot disconnect {id}: {} ({})\nhint: `sshmcp sessions` lists the sessions there are",
                    e.message, e.code
                );
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The one id of `ids` that `given` names: the id itself, or the only one it begins (as git
/// and docker take a unique prefix).
pub fn unique_id(given: &str, ids: &[String], what: &str) -> Result<String, String> {
    // Every id begins with nothing: an empty one (an unset variable) names none.
    if given.is_empty() {
        return Err(format!("an empty {what} id names no {what}"));
    }
    if ids.iter().any(|id| id == given) {
        return Ok(given.to_string());
    }
    let matching: Vec<&String> = ids.iter().filter(|id| id.starts_with(given)).collect();
    match matching.as_slice() {
        [only] => Ok((*only).clone()),
        [] => Err(format!("no {what} {given}")),
        many => Err(format!(
            "{given} begins {} {what}s ({}): give more of it",
            many.len(),
            many.iter()
                .map(|id| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Asks on the terminal whether to close `n` sessions; refuses to guess when there is none.
fn confirmed(n: usize) -> anyhow::Result<bool> {
    match ask(&format!(
        "close all {n} session(s), with their running commands and transfers?"
    ))? {
        Some(yes) => Ok(yes),
        None => bail!(
            "disconnect --all closes {n} session(s) and stdin is not a terminal to confirm it on\n\
             hint: add --yes to close them all without asking"
        ),
    }
}

/// `question`'s answer from the terminal; none when stdin is no terminal.
pub fn ask(question: &str) -> anyhow::Result<Option<bool>> {
    use std::io::{BufRead, IsTerminal};
    if !std::io::stdin().is_terminal() {
        return Ok(None);
    }
    eprint!("{question} [y/N] ");
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(Some(matches!(answer.trim(), "y" | "Y" | "yes")))
}

async fn status(
    conn: Option<Connection>,
    paths: &RuntimePaths,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let Some(c) = conn else {
        // Stdout stays empty under --json: a script reads the exit status.
        let said = format!(
            "sshmcpd is not running (socket {})",
            paths.socket().display()
        );
        match json {
            true => eprintln!("{said}"),
            false => writeln!(out, "{said}")?,
        }
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
    yes: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let c = match conn {
        Some(c) => c,
        None => match recorded_session_ids(paths).len() {
            0 => {
                writeln!(out, "sshmcpd is not running")?;
                return Ok(ExitCode::SUCCESS);
            }
            // A daemon that died (SIGKILL, OOM) left its masters and their forwards up: the
            // one started here adopts them, and the stop below closes them.
            n => {
                writeln!(
                    out,
                    "sshmcpd was not running, but {n} session(s) it recorded may still be up; \
                     starting one to close them"
                )?;
                connect_or_start(paths, &daemon_program()).await?
            }
        },
    };
    // What the stop ends, said before (and asked about, on a terminal) and after.
    let rows = c.client.session_list(context_with_timeout(QUICK)).await?;
    let commands: u32 = rows.iter().map(|r| r.active_commands).sum();
    let transfers: u32 = rows.iter().map(|r| r.active_transfers).sum();
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let ends = format!(
        "{} session{}, {commands} running command{} and {transfers} transfer{}",
        rows.len(),
        plural(rows.len()),
        plural(commands as usize),
        plural(transfers as usize)
    );
    // Without a terminal to ask on, a script meant it.
    let question = format!("stop sshmcpd, closing {ends}?");
    if !rows.is_empty() && !yes && ask(&question)? == Some(false) {
        writeln!(out, "nothing stopped")?;
        return Ok(ExitCode::FAILURE);
    }
    // Taken before asking, so the wait is on this daemon's pidfile, not a successor's.
    let holder = lock_holder(paths)?;
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
    if let Some(holder) = holder {
        holder.exited().await?;
    }
    writeln!(out, "sshmcpd stopped; it closed {ends}")?;
    Ok(ExitCode::SUCCESS)
}

/// The sessions the record in the runtime directory lists (none when it is missing or
/// unreadable: the daemon that would adopt them would set it aside too).
fn recorded_session_ids(paths: &RuntimePaths) -> Vec<String> {
    std::fs::read(paths.record())
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|record| {
            let sessions = record["sessions"].as_array()?.iter();
            Some(
                sessions
                    .filter_map(|s| s["session_id"].as_str().map(str::to_string))
                    .collect(),
            )
        })
        .unwrap_or_default()
}

/// The daemon holding the pidfile lock: its pid, read from the very file it locked.
struct Holder {
    pid: u32,
    file: std::fs::File,
}

impl Holder {
    /// Waits until this daemon exits: the kernel releases its lock then. The lock is tried,
    /// not waited on: a blocked wait on a thread would keep the CLI from exiting after it
    /// gave up (a stopped daemon never lets go).
    async fn exited(self) -> anyhow::Result<()> {
        let give_up = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            match self.file.try_lock_shared() {
                Ok(()) => return Ok(()),
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < give_up,
                "the daemon did not exit within 30 s\nhint: `sshmcp daemon logs` shows why"
            );
            // The kernel tells no other process when a lock is let go: it looks again.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether the pid still names an `sshmcpd` (its executable may have been replaced by an
    /// upgrade, which Linux shows as ` (deleted)`).
    fn is_daemon(&self) -> bool {
        sshmcp_local::platform::executable(self.pid).is_some_and(|exe| {
            exe.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("sshmcpd"))
        })
    }
}

/// The daemon holding the pidfile lock, or `None` when no daemon holds it.
fn lock_holder(paths: &RuntimePaths) -> anyhow::Result<Option<Holder>> {
    use std::io::Read;
    let pidfile = paths.pidfile();
    let mut file = match std::fs::File::open(&pidfile) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", pidfile.display())),
    };
    match file.try_lock_shared() {
        // Nobody holds it: what the file says is left over.
        Ok(()) => Ok(None),
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            file.read_to_string(&mut text)?;
            let pid = sshmcp_local::paths::PidfileText::parse(&text)
                .pid
                .with_context(|| format!("{} names no pid: {text:?}", pidfile.display()))?;
            Ok(Some(Holder { pid, file }))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

/// Hands every session to a new daemon: the running one (whatever its version) is asked with
/// SIGUSR1 to exit leaving its masters up, then a daemon of this installation starts and
/// re-adopts them.
async fn restart(paths: &RuntimePaths, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    // The running daemon stops only for one that can start: a config file broken since would
    // leave every agent without a daemon.
    crate::doctor::check_config().map_err(|why| {
        anyhow::anyhow!(
            "the new daemon would not start ({why}); the running one was left as it is\n\
             hint: correct the config file, then sshmcp daemon restart"
        )
    })?;
    // An older sshmcp found first on PATH would put an older daemon in a newer one's place.
    let existing = connect_existing(paths).await;
    let newer = match &existing {
        Err(sshmcp_local::client::ClientError::VersionMismatch { daemon, client })
            if daemon > client =>
        {
            Some(format!("protocol {daemon}, this one {client}"))
        }
        Ok(Some(c)) if older_than(env!("CARGO_PKG_VERSION"), &c.hello.daemon_version) => {
            Some(format!(
                "version {}, this one {}",
                c.hello.daemon_version,
                env!("CARGO_PKG_VERSION")
            ))
        }
        _ => None,
    };
    if let Some(newer) = newer {
        bail!(
            "the running daemon is newer than this sshmcp ({newer}): a restart with this one \
             would put an older daemon in its place; nothing was signalled\nhint: run the \
             sshmcp installed with the daemon, or, to go back to this version, `sshmcp daemon \
             stop` (it closes every session) first"
        );
    }
    let (cut, cut_execs) = match &existing {
        Ok(Some(c)) => running_commands(c).await,
        _ => Default::default(),
    };
    drop(existing);
    let holder = lock_holder(paths)?;
    let old = holder.as_ref().map(|h| h.pid);
    if let Some(holder) = holder {
        anyhow::ensure!(
            holder.is_daemon(),
            "the pidfile's pid {} is no sshmcpd; nothing was signalled\nhint: `sshmcp doctor`",
            holder.pid
        );
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(holder.pid as i32),
            nix::sys::signal::Signal::SIGUSR1,
        )
        .with_context(|| format!("cannot signal the daemon (pid {})", holder.pid))?;
        holder.exited().await?;
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
    if !cut.is_empty() {
        writeln!(
            out,
            "{} running command{} cut off (their handles now say `lost`): {}",
            cut.len(),
            if cut.len() == 1 { " was" } else { "s were" },
            cut.join(", ")
        )?;
    }
    if !cut_execs.is_empty() {
        writeln!(
            out,
            "{} exec call{} cut off (the command ended; its agent is told): {}",
            cut_execs.len(),
            if cut_execs.len() == 1 {
                " was"
            } else {
                "s were"
            },
            cut_execs.join(", ")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether version `a` (`MAJOR.MINOR.PATCH`, a suffix after `-` ignored) comes before `b`.
fn older_than(a: &str, b: &str) -> bool {
    let numbers = |v: &str| -> Vec<u64> {
        let release = v.split('-').next().unwrap_or(v);
        release.split('.').map(|n| n.parse().unwrap_or(0)).collect()
    };
    numbers(a) < numbers(b)
}

/// The command handles running now and the exec calls under way, each as `id (first line)`:
/// what a restart cuts off. None when the daemon cannot say (one too old to ask).
async fn running_commands(c: &Connection) -> (Vec<String>, Vec<String>) {
    if !c.capabilities.iter().any(|m| m == "overview") {
        return Default::default();
    }
    let Ok(o) = c.client.overview(context_with_timeout(QUICK)).await else {
        return Default::default();
    };
    let handles = o
        .sessions
        .iter()
        .flat_map(|view| &view.commands)
        .filter(|command| command.status == sshmcp_proto::command::CommandState::Running)
        .map(|command| format!("{} ({})", command.handle_id, command.preview))
        .collect();
    let execs = o
        .sessions
        .iter()
        .flat_map(|view| &view.execs)
        .map(|exec| format!("{} ({})", exec.id, exec.preview))
        .collect();
    (handles, execs)
}

async fn reload(conn: Option<Connection>, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let Some(c) = conn else {
        writeln!(
            out,
            "sshmcpd is not running; it reads the policy when it starts"
        )?;
        return Ok(ExitCode::from(EXIT_NOT_RUNNING));
    };
    if !c.capabilities.iter().any(|t| t == "reload_policy") {
        bail!(
            "the running daemon is older than this CLI and cannot reload its policy\nhint: \
             `sshmcp daemon restart` (sessions are kept) reads the config file afresh"
        );
    }
    match c.client.reload_policy(context_with_timeout(QUICK)).await? {
        Ok(report) => {
            writeln!(
                out,
                "policy reloaded: {} entries ({})",
                report.entries.len(),
                report.source.as_deref().unwrap_or("no config file")
            )?;
            write!(out, "{}", render::policy_entries(&report))?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => bail!(
            "{} ({})\nhint: fix the file, then run `sshmcp daemon reload` again",
            e.message,
            e.code
        ),
    }
}

/// The daemon's state directory: the running daemon's, else the one this environment gives
/// (the trail and the log are files, there whether or not the daemon runs).
async fn state_dir(conn: Option<&Connection>) -> anyhow::Result<PathBuf> {
    match conn {
        Some(c) => Ok(c
            .client
            .status(context_with_timeout(QUICK))
            .await?
            .state_dir
            .into()),
        None => sshmcp_local::paths::state_dir_from_env()
            .context("no state directory: set SSHMCP_STATE_DIR or HOME"),
    }
}

async fn history(
    paths: &RuntimePaths,
    filter: crate::history::Filter,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    // A daemon this client cannot believe (another user's directory or socket) names no
    // state directory: the trail read is then this environment's own.
    let conn = match connect_existing(paths).await {
        Ok(conn) => conn,
        Err(e) => {
            eprintln!("sshmcp: not asking the daemon where its trail is: {e}");
            None
        }
    };
    let dir = state_dir(conn.as_ref()).await?;
    let (entries, unreadable) = crate::history::read(&dir, &filter)
        .with_context(|| format!("cannot read the audit trail in {}", dir.display()))?;
    if unreadable > 0 {
        eprintln!("sshmcp: {unreadable} unreadable lines of the trail skipped");
    }
    crate::history::print(&entries, json, terminal_width(), out)?;
    Ok(ExitCode::SUCCESS)
}

async fn logs(
    conn: Option<Connection>,
    lines: usize,
    follow: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let log = state_dir(conn.as_ref())
        .await?
        .join(sshmcp_local::paths::LOG_FILE);
    let read = |from: u64| -> anyhow::Result<(Vec<u8>, u64)> {
        use std::io::{Read, Seek};
        let mut file = std::fs::File::open(&log).with_context(|| {
            format!(
                "cannot read {}\nhint: the daemon writes it once started (`sshmcp daemon start`)",
                log.display()
            )
        })?;
        let len = file.metadata()?.len();
        // A log that shrank was replaced: read it from its start.
        let from = if len < from { 0 } else { from };
        file.seek(std::io::SeekFrom::Start(from))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok((bytes, from))
    };
    let (text, _) = read(0)?;
    let mut offset = text.len() as u64;
    let text = String::from_utf8_lossy(&text);
    let all: Vec<&str> = text.lines().collect();
    for line in &all[all.len().saturating_sub(lines)..] {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    if !follow {
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        // The log is a plain file another process appends to: looking again a few times a
        // second is what `tail -f` does too.
        tokio::time::sleep(Duration::from_millis(250)).await;
        let (more, from) = read(offset)?;
        offset = from + more.len() as u64;
        out.write_all(&more)?;
        out.flush()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_their_numbers() {
        assert!(older_than("0.1.0", "0.1.1"));
        assert!(older_than("0.9.0", "0.10.0"));
        assert!(older_than("0.1.0-rc1", "0.2.0"));
        assert!(!older_than("0.1.1", "0.1.1"));
        assert!(!older_than("1.0.0", "0.99.0"));
    }

    #[test]
    fn an_id_is_named_whole_or_by_a_unique_prefix() {
        let ids: Vec<String> = ["sc47a1", "sc47b2", "s9"].map(String::from).to_vec();
        assert_eq!(unique_id("s9", &ids, "session").unwrap(), "s9");
        assert_eq!(unique_id("sc47a", &ids, "session").unwrap(), "sc47a1");
        let e = unique_id("sc47", &ids, "session").unwrap_err();
        assert!(
            e.contains("2 sessions") && e.contains("sc47a1, sc47b2"),
            "{e}"
        );
        assert_eq!(unique_id("x", &ids, "session").unwrap_err(), "no session x");
        assert!(
            unique_id("", &ids[..1], "session").is_err(),
            "an unset variable"
        );
    }
}
