//! The daemon's life: single instance through a locked pidfile, the ready report to whoever
//! started us, serving until asked to stop, and an ordered teardown.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixListener;

use sshmcp_local::paths::PidfileText;

use crate::config::Settings;
use crate::server;
use crate::service::DaemonService;
use crate::session::Registry;
use crate::session::work::Tools;

/// The pidfile, locked (flock) for as long as this value lives. It holds our pid, and the word
/// `stopping` once we no longer serve.
pub struct Pidfile {
    path: PathBuf,
    file: File,
    /// The pid of the stopping daemon we waited for, if we did.
    pub succeeded: Option<u32>,
}

impl Pidfile {
    /// Says, to a daemon starting meanwhile, that we are on our way out: it waits for our
    /// lock instead of reporting us as the running daemon.
    fn mark_stopping(&mut self) {
        let marked = self.file.set_len(0).and_then(|()| {
            self.file.rewind()?;
            let text = PidfileText::render(std::process::id(), true);
            self.file.write_all(text.as_bytes())
        });
        if let Err(e) = marked {
            tracing::warn!("cannot mark the pidfile: {e}");
        }
    }
}

impl Drop for Pidfile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// How long a new daemon waits for one that is stopping to be gone: its teardown is capped
/// well below this.
const SUCCESSION_WAIT: Duration = Duration::from_secs(20);

/// The outcome of trying to become the one daemon of a runtime directory.
pub enum Instance {
    /// We hold the lock.
    Mine(Pidfile),
    /// Another daemon does; its pid when readable.
    Running(Option<u32>),
}

/// Takes the pidfile lock. A daemon holding it that is stopping is waited for, so a client
/// arriving during a stop or a restart gets the next daemon instead of an error.
pub fn claim_instance(path: PathBuf) -> io::Result<Instance> {
    let mut succeeded = None;
    loop {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .open(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let found = PidfileText::parse(&text);
                if !found.stopping {
                    return Ok(Instance::Running(found.pid));
                }
                succeeded = found.pid.or(Some(0));
                file = wait_for_lock(file)?;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
        // A daemon that stopped meanwhile removed the file we locked: that lock guards
        // nothing, so start over on the file now at the path.
        if !same_file(&file, &path) {
            continue;
        }
        file.set_len(0)?;
        file.rewind()?;
        file.write_all(PidfileText::render(std::process::id(), false).as_bytes())?;
        return Ok(Instance::Mine(Pidfile {
            path,
            file,
            succeeded,
        }));
    }
}

fn same_file(file: &File, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// Blocks until `file`'s lock is ours, at most [`SUCCESSION_WAIT`]. The kernel releases it
/// the moment its holder exits, so this waits on that event, not on a guess.
fn wait_for_lock(file: File) -> io::Result<File> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(file.lock().map(|()| file));
    });
    rx.recv_timeout(SUCCESSION_WAIT).map_err(|_| {
        io::Error::other(format!(
            "the previous daemon did not finish stopping within {}s",
            SUCCESSION_WAIT.as_secs()
        ))
    })?
}

/// The one status line a starting client waits for on our stdout.
pub struct ReadyReport {
    enabled: bool,
}

impl ReadyReport {
    pub fn new(enabled: bool) -> Self {
        Self { enabled }
    }

    pub fn ready(&self) {
        self.say(&format!("ready {}", std::process::id()));
    }

    pub fn running(&self, pid: Option<u32>) {
        self.say(&format!("running {}", pid.unwrap_or(0)));
    }

    pub fn error(&self, reason: &str) {
        self.say(&format!(
            "error {}",
            sshmcp_proto::text::to_one_line(reason)
        ));
    }

    /// Writes the line, then points stdout at /dev/null so the starter's pipe closes and a
    /// stray print can never reach it.
    fn say(&self, line: &str) {
        if !self.enabled {
            return;
        }
        let mut out = io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
        if let Ok(null) = File::options().write(true).open("/dev/null") {
            let _ = nix::unistd::dup2_stdout(&null);
        }
    }
}

/// Creates the daemon's remaining directories with private modes (`main` already made the
/// runtime and state directories, before logging started).
fn prepare_dirs(settings: &Settings) -> io::Result<()> {
    sshmcp_local::paths::ensure_private_dir(&settings.runtime.masters_dir())?;
    sshmcp_local::paths::ensure_private_dir(&settings.masters_log_dir())?;
    Ok(())
}

/// Binds the socket (removing a stale one: we hold the instance lock, so it is stale) with
/// mode 0600 inside the 0700 runtime directory.
fn bind(settings: &Settings) -> io::Result<UnixListener> {
    let socket = settings.runtime.socket();
    match std::fs::remove_file(&socket) {
        Ok(()) => tracing::info!("removed a stale socket"),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(&socket)?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// How long the stop waits for the audit trail's last lines.
const AUDIT_CLOSE_CAP: Duration = Duration::from_secs(2);

/// How long the stop waits, after the teardown, for the answers of the calls that were in
/// flight to be written: the teardown has ended them, so this is only the writing.
const ANSWERS_CAP: Duration = Duration::from_secs(2);

/// Why the daemon leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    /// `sshmcp daemon stop`, SIGTERM, SIGINT, or idle: every session is closed.
    Stop,
    /// `sshmcp daemon restart` (SIGUSR1): the masters stay up and the next daemon re-adopts
    /// them from the record.
    HandOver,
}

/// How long the teardown may take before the daemon exits anyway; a session whose master
/// would not close by then stays recorded as closing, and the next daemon stops that master.
const TEARDOWN_CAP: Duration = Duration::from_secs(12);

/// Re-adopts the last daemon's sessions, then serves until asked to stop (the `shutdown` call,
/// SIGTERM/SIGINT, idleness) or to hand over (SIGUSR1). On the way out it stops accepting at
/// once, then closes every session (or, handing over, stops only its own jobs and keeps the
/// masters), within [`TEARDOWN_CAP`].
pub async fn run(
    settings: Settings,
    report: &ReadyReport,
    pidfile: &mut Pidfile,
) -> io::Result<()> {
    if let Some(pid) = pidfile.succeeded {
        tracing::info!(
            previous = pid,
            "waited for the previous daemon to finish stopping"
        );
    }
    // Handled from the start: a restart or a stop asked for while sessions are being taken
    // back must not kill the daemon half-way.
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hand_over = signal(SignalKind::user_defined1())?;
    let mut hangup = signal(SignalKind::hangup())?;
    prepare_dirs(&settings)?;
    let socket = settings.runtime.socket();
    let idle_exit = settings.idle_exit;
    // Started whether or not it keeps calls: it says, at each start and reload, what the
    // daemon runs with (see `Registry::note_settings`).
    let trail = Arc::new(crate::audit::Trail::start(&settings.state_dir)?);
    let registry = Registry::new(Arc::new(settings.clone()), trail.clone(), tools());
    // Before the socket exists: a client that connects finds every session there is (the
    // clients starting us wait on our ready report, the others on the start lock).
    registry.readopt().await;
    registry.note_settings("daemon_start", None);
    // SIGHUP reads the policy again, as `sshmcp daemon reload` does (it logs the outcome).
    let reloading = registry.clone();
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            tracing::info!("SIGHUP: reading the policy again");
            let _ = reloading.reload_policy();
        }
    });
    let listener = bind(&settings)?;
    let ending = server::Ending::default();
    let calls_trail = settings.audit.then(|| trail.clone());
    let service = DaemonService::new(registry.clone(), ending.stop.clone(), calls_trail);
    tracing::info!(pid = std::process::id(), socket = %socket.display(), "daemon ready");
    report.ready();
    let clients = tokio::sync::watch::channel(0usize).0;
    let mut serving = Box::pin(server::serve(
        listener,
        service,
        ending.clone(),
        clients.clone(),
    ));
    let (exit, cause) = tokio::select! {
        _ = &mut serving => (Exit::Stop, "asked to stop"),
        _ = term.recv() => { tracing::info!("SIGTERM: stopping"); (Exit::Stop, "SIGTERM") }
        _ = interrupt.recv() => { tracing::info!("SIGINT: stopping"); (Exit::Stop, "SIGINT") }
        _ = hand_over.recv() => {
            tracing::info!("SIGUSR1: handing the sessions over");
            (Exit::HandOver, "restart")
        }
        _ = idle(&registry, clients.subscribe(), idle_exit) => (Exit::Stop, "idle"),
    };
    pidfile.mark_stopping();
    ending.stop.cancel();
    // Handing over, a call in flight is cut now, as a crash would cut it (its client says it
    // may or may not have run). Stopping, it runs on until the teardown closes its session,
    // so its client learns the daemon stopped it.
    if exit == Exit::HandOver {
        ending.abort.cancel();
    }
    // The listener goes with the accept loop, and the socket file with it: new clients start
    // (or wait for) the next daemon instead of queueing on this one.
    drop(serving);
    let _ = std::fs::remove_file(&socket);
    let teardown = async {
        match exit {
            Exit::Stop => registry.close_all().await,
            Exit::HandOver => registry.hand_over().await,
        }
    };
    let sessions = registry.session_count();
    let in_time = tokio::time::timeout(TEARDOWN_CAP, teardown).await.is_ok();
    if !in_time {
        tracing::warn!(
            "teardown took over {}s; sessions still closing are recorded so, for the next \
             daemon to stop their masters",
            TEARDOWN_CAP.as_secs()
        );
    }
    let mut connected = clients.subscribe();
    let mut all_gone = async || {
        tokio::time::timeout(ANSWERS_CAP, connected.wait_for(|n| *n == 0))
            .await
            .is_ok()
    };
    if !all_gone().await {
        tracing::warn!("calls still in flight after the teardown are cut");
    }
    // Whatever is left is cut, and dropped (a connect's reservation undone) before the record
    // is sealed.
    ending.abort.cancel();
    all_gone().await;
    registry.seal_record();
    registry.note_stop(stop_summary(exit, cause, sessions, in_time));
    let _ = tokio::task::spawn_blocking(move || trail.close(AUDIT_CLOSE_CAP)).await;
    tracing::info!(?exit, "daemon stopped");
    Ok(())
}

/// The trail's `daemon_stop` line: why the daemon left and what became of its sessions, so
/// that a person reading `sshmcp history` sees where one daemon's calls end.
fn stop_summary(exit: Exit, cause: &str, sessions: usize, in_time: bool) -> String {
    let sessions = match (exit, in_time) {
        (Exit::HandOver, _) => format!("{sessions} sessions left up for the next daemon"),
        (Exit::Stop, true) => format!("{sessions} sessions closed"),
        (Exit::Stop, false) => format!(
            "{sessions} sessions closing after {}s, recorded for the next daemon to stop",
            TEARDOWN_CAP.as_secs()
        ),
    };
    format!("{cause}; {sessions}")
}

/// Resolves once the daemon has had no session and no client for `limit` (never when `limit`
/// is `None`). Sessions open only through a client, so a quiet spell with no client that ends
/// with no session is idle throughout.
async fn idle(
    registry: &Registry,
    mut clients: tokio::sync::watch::Receiver<usize>,
    limit: Option<Duration>,
) {
    let Some(limit) = limit else {
        return std::future::pending().await;
    };
    loop {
        let _ = clients.wait_for(|n| *n == 0).await;
        clients.mark_unchanged();
        tokio::select! {
            _ = tokio::time::sleep(limit) => {
                let sessions = registry.session_count();
                if sessions == 0 && *clients.borrow() == 0 {
                    tracing::info!("idle for {}s with no session or client: exiting", limit.as_secs());
                    return;
                }
                tracing::debug!(sessions, "no client for {}s, but sessions keep the daemon", limit.as_secs());
            }
            _ = clients.changed() => {}
        }
    }
}

/// What the tools keep: each session's command handles, transfers and forwards, and the
/// destinations of every transfer under way, daemon-wide.
fn tools() -> Tools {
    Tools {
        make_work: Box::new(|record| {
            vec![
                Arc::new(crate::commands::Commands::new(record.clone())),
                Arc::new(crate::transfers::Transfers::default()),
                Arc::new(crate::forwards::Forwards::default()),
            ]
        }),
        shared: vec![Arc::new(crate::transfers::Destinations::default())],
    }
}

#[cfg(test)]
mod tests {
    use std::any::Any;

    use super::*;

    /// Every tool's state is in each new session, and the daemon-wide state in the registry:
    /// `Session::work` and `Registry::shared` find them (a tool left out would panic there).
    #[test]
    fn each_session_gets_every_tools_state() {
        let tools = tools();
        let work = (tools.make_work)(&Default::default());
        let has = |found: &dyn Fn(&Arc<dyn crate::session::work::Work>) -> bool| {
            work.iter().filter(|w| found(w)).count() == 1
        };
        let is =
            |w: &Arc<dyn crate::session::work::Work>| -> Arc<dyn Any + Send + Sync> { w.clone() };
        assert!(has(&|w| is(w)
            .downcast::<crate::commands::Commands>()
            .is_ok()));
        assert!(has(&|w| is(w)
            .downcast::<crate::transfers::Transfers>()
            .is_ok()));
        assert!(has(&|w| is(w)
            .downcast::<crate::forwards::Forwards>()
            .is_ok()));
        let shared = tools.shared.iter().cloned();
        let destinations =
            shared.filter_map(|s| s.downcast::<crate::transfers::Destinations>().ok());
        assert_eq!(destinations.count(), 1);
    }

    #[test]
    fn the_stop_line_says_why_and_what_became_of_the_sessions() {
        assert_eq!(
            stop_summary(Exit::Stop, "SIGTERM", 2, true),
            "SIGTERM; 2 sessions closed"
        );
        assert_eq!(
            stop_summary(Exit::Stop, "idle", 1, false),
            "idle; 1 sessions closing after 12s, recorded for the next daemon to stop"
        );
        assert_eq!(
            stop_summary(Exit::HandOver, "restart", 3, false),
            "restart; 3 sessions left up for the next daemon"
        );
    }
}
