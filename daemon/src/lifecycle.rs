//! The daemon's life: single instance through a locked pidfile, the ready report to whoever
//! started us, serving until asked to stop, and an ordered teardown.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::server;
use crate::service::DaemonService;
use crate::session::Registry;

/// The pidfile, locked (flock) for as long as this value lives.
pub struct Pidfile {
    path: PathBuf,
    _file: File,
}

impl Drop for Pidfile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The outcome of trying to become the one daemon of a runtime directory.
pub enum Instance {
    /// We hold the lock.
    Mine(Pidfile),
    /// Another daemon does; its pid when readable.
    Running(Option<u32>),
}

pub fn claim_instance(path: PathBuf) -> io::Result<Instance> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => {
            file.set_len(0)?;
            file.rewind()?;
            writeln!(file, "{}", std::process::id())?;
            Ok(Instance::Mine(Pidfile { path, _file: file }))
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            Ok(Instance::Running(text.trim().parse().ok()))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
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
        self.say(&format!("error {}", reason.replace('\n', " ")));
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
    sshmcp_proto::paths::ensure_private_dir(&settings.runtime.masters_dir())?;
    sshmcp_proto::paths::ensure_private_dir(&settings.masters_log_dir())?;
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

/// Serves until `shutdown` is called or SIGTERM/SIGINT arrives; every session is closed on the
/// way out. Masters survive only a crash of the daemon, never an orderly stop.
pub async fn run(settings: Settings, report: &ReadyReport) -> io::Result<()> {
    prepare_dirs(&settings)?;
    let listener = bind(&settings)?;
    let socket = settings.runtime.socket();
    let registry = Registry::new(Arc::new(settings));
    let stop = CancellationToken::new();
    let service = DaemonService {
        registry: registry.clone(),
        stop: stop.clone(),
        started_at: sshmcp_proto::time::now_rfc3339().into(),
    };
    tracing::info!(pid = std::process::id(), socket = %socket.display(), "daemon ready");
    report.ready();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let serving = server::serve(listener, service, stop.clone());
    tokio::pin!(serving);
    tokio::select! {
        _ = &mut serving => {}
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: stopping"),
    }
    stop.cancel();
    registry.close_all().await;
    let _ = std::fs::remove_file(&socket);
    tracing::info!("daemon stopped");
    Ok(())
}
