//! Sessions: one OpenSSH master each, their lifecycle and the registry that owns them.

pub mod askpass;
pub mod identity;
pub mod key;
pub mod master;
pub mod record;
pub mod registry;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use sshmcp_proto::session::{SessionState, SessionSummary};
use sshmcp_proto::time::rfc3339;
use sshmcp_proto::{DaemonError, ErrorCode};
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use key::KeyHash;

pub use registry::Registry;

/// One session: the identity it owns, its master, and the work running on it.
pub struct Session {
    pub id: String,
    key_hash: KeyHash,
    /// The target as the caller named it.
    pub target: String,
    pub server_host: String,
    pub server_port: u16,
    pub control_path: PathBuf,
    pub created_at: SystemTime,
    /// Command channels this session may have open at once (see `exec::channel`).
    pub slots: Arc<Semaphore>,
    /// Fired by `disconnect`: running commands terminate, a pending connect gives up.
    pub cancel: CancellationToken,
    /// Commands in flight; `disconnect` waits for it to reach zero before stopping the master.
    active_commands: watch::Sender<u32>,
    active_transfers: AtomicU32,
    inner: Mutex<Inner>,
}

struct Inner {
    state: SessionState,
    master_pid: Option<u32>,
    last_used: SystemTime,
}

/// Counts one running command for as long as it lives.
pub struct CommandGuard {
    session: Arc<Session>,
}

impl Drop for CommandGuard {
    fn drop(&mut self) {
        self.session.active_commands.send_modify(|n| *n -= 1);
        self.session.touch();
    }
}

impl Session {
    fn new(
        id: String,
        key_hash: KeyHash,
        target: String,
        server_host: String,
        server_port: u16,
        control_path: PathBuf,
    ) -> Self {
        let now = SystemTime::now();
        Self {
            id,
            key_hash,
            target,
            server_host,
            server_port,
            control_path,
            created_at: now,
            slots: Arc::new(Semaphore::new(crate::exec::channel::CHANNEL_SLOTS)),
            cancel: CancellationToken::new(),
            active_commands: watch::channel(0).0,
            active_transfers: AtomicU32::new(0),
            inner: Mutex::new(Inner {
                state: SessionState::Starting,
                master_pid: None,
                last_used: now,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn state(&self) -> SessionState {
        self.lock().state
    }

    pub fn master_pid(&self) -> Option<u32> {
        self.lock().master_pid
    }

    fn set_ready(&self, master_pid: u32) {
        let mut inner = self.lock();
        inner.state = SessionState::Ready;
        inner.master_pid = Some(master_pid);
    }

    /// Moves to `to` only from `from`; says whether it did.
    fn transition(&self, from: SessionState, to: SessionState) -> bool {
        let mut inner = self.lock();
        let moved = inner.state == from;
        if moved {
            inner.state = to;
        }
        moved
    }

    /// Marks the session closing whatever its state; returns the state it had.
    fn begin_closing(&self) -> SessionState {
        let mut inner = self.lock();
        std::mem::replace(&mut inner.state, SessionState::Closing)
    }

    pub fn touch(&self) {
        self.lock().last_used = SystemTime::now();
    }

    /// Checks the caller's key, then that the session can run work now.
    pub fn authorize(&self, key: &str) -> Result<(), DaemonError> {
        if !self.key_hash.matches(key) {
            return Err(DaemonError::new(
                ErrorCode::InvalidSessionKey,
                "session_key does not belong to this session",
            ));
        }
        match self.state() {
            SessionState::Ready => Ok(()),
            SessionState::Starting => Err(DaemonError::new(
                ErrorCode::SessionNotReady,
                "the session is still authenticating; retry when connect has answered",
            )),
            SessionState::Lost => Err(lost_error()),
            SessionState::Closing => Err(DaemonError::new(
                ErrorCode::SessionClosing,
                "the session is closing",
            )),
            SessionState::Closed => Err(DaemonError::new(
                ErrorCode::SessionClosed,
                "the session is closed",
            )),
        }
    }

    /// Registers a running command until the guard drops.
    pub fn begin_command(self: &Arc<Self>) -> CommandGuard {
        self.active_commands.send_modify(|n| *n += 1);
        self.touch();
        CommandGuard {
            session: self.clone(),
        }
    }

    /// Waits until no command runs on this session.
    async fn commands_drained(&self) {
        let mut rx = self.active_commands.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    pub fn summary(&self) -> SessionSummary {
        let inner = self.lock();
        SessionSummary {
            session_id: self.id.clone(),
            state: inner.state,
            target: self.target.clone(),
            server_host: self.server_host.clone(),
            server_port: self.server_port,
            master_pid: inner.master_pid,
            created_at: rfc3339(self.created_at),
            last_used_at: rfc3339(inner.last_used),
            active_commands: *self.active_commands.borrow(),
            active_transfers: self.active_transfers.load(Ordering::Relaxed),
        }
    }
}

/// The answer of every operational tool once the master is gone.
pub fn lost_error() -> DaemonError {
    DaemonError::new(
        ErrorCode::ConnectionLost,
        "the session's ssh connection is gone; disconnect it, then connect again",
    )
}
