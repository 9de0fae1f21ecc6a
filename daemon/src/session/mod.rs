//! Sessions: one OpenSSH master each, their lifecycle and the registry that owns them.

pub mod adopt;
pub mod agent;
pub mod askpass;
pub mod ciphers;
pub mod host_key;
pub mod identity;
pub mod key;
pub mod master;
pub mod person_stops;
pub mod record;
pub mod registry;
pub mod work;

use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

use sshmcp_proto::session::{SessionState, SessionSummary};
use sshmcp_proto::time::rfc3339;
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::local_process::ProcessId;
use crate::remote::Host;
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
    pub created_at: SystemTime,
    /// The remote login user, once connect learned it.
    remote_user: std::sync::OnceLock<String>,
    /// The fingerprint of the host key its master verified, when it could be learned (see
    /// `host_key`): the policy follows it.
    pub host_key: std::sync::OnceLock<String>,
    /// Where its programs run: the master's socket, channel slots, the closing signal
    /// (`disconnect` fires it: runs end, a pending connect gives up) and the runs in flight.
    pub host: Host,
    /// Asked to write the record when what it holds of this session changed.
    pub record: std::sync::Arc<record::RecordDue>,
    /// What the tools keep for it (command handles, transfers, forwards), each found by its
    /// type (see `work`).
    work: Vec<std::sync::Arc<dyn work::Work>>,
    inner: Mutex<Inner>,
}

struct Inner {
    state: SessionState,
    last_used: SystemTime,
}

impl Session {
    /// A line of the trail about this session that no caller's call wrote (a transfer a
    /// starting daemon took back).
    pub fn audit_line(
        &self,
        tool: &str,
        summary: String,
        outcome: &str,
    ) -> sshmcp_proto::audit::AuditEntry {
        sshmcp_proto::audit::AuditEntry {
            session_id: self.id.clone(),
            target: self.target.clone(),
            server_host: self.server_host.clone(),
            server_port: self.server_port,
            ..crate::audit::daemon_line(tool, summary, outcome)
        }
    }

    /// What the session is to the policy.
    pub fn subject(&self) -> crate::policy::Subject<'_> {
        crate::policy::Subject {
            target: &self.target,
            server_host: &self.server_host,
            host_key: self.host_key.get().map(String::as_str),
        }
    }

    /// The hash of its key (for redaction: the key itself is never kept).
    pub fn key_hash(&self) -> KeyHash {
        self.key_hash
    }

    fn new(
        id: String,
        key_hash: KeyHash,
        target: String,
        (server_host, server_port): (String, u16),
        host: Host,
        created_at: SystemTime,
        make_work: &work::MakeWork,
    ) -> Self {
        let record = std::sync::Arc::new(record::RecordDue::default());
        let work = make_work(&record);
        Self {
            id,
            key_hash,
            target,
            server_host,
            server_port,
            created_at,
            remote_user: Default::default(),
            host_key: Default::default(),
            host,
            record,
            work,
            inner: Mutex::new(Inner {
                state: SessionState::Starting,
                last_used: created_at,
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
        self.master().map(|m| m.pid)
    }

    /// The master process, once it is up.
    pub fn master(&self) -> Option<ProcessId> {
        self.host.master.get().copied()
    }

    pub fn remote_user(&self) -> String {
        self.remote_user.get().cloned().unwrap_or_default()
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

    /// A ready session whose master is confirmed gone becomes `lost`: no channel opens on it
    /// again, and its forwards went with the master. Says whether it changed.
    pub(crate) fn mark_lost(&self) -> bool {
        let lost = self.transition(SessionState::Ready, SessionState::Lost);
        if lost {
            self.host.close_slots();
            self.host.standby.close();
            self.work.iter().for_each(|w| w.master_lost());
        }
        lost
    }

    /// Marks the session closing whatever its state; returns the state it had.
    fn begin_closing(&self) -> SessionState {
        let mut inner = self.lock();
        std::mem::replace(&mut inner.state, SessionState::Closing)
    }

    pub fn touch(&self) {
        self.touched_at(SystemTime::now());
    }

    /// Sets when it was last used (a re-adopted session: as its record says).
    pub fn touched_at(&self, at: SystemTime) {
        self.lock().last_used = at;
    }

    pub fn last_used(&self) -> SystemTime {
        self.lock().last_used
    }

    /// Checks the caller's key, then that the session can run work now.
    pub fn authorize(&self, key: &str) -> Result<(), DaemonError> {
        if !self.key_hash.matches(key) {
            return Err(DaemonError::new(
                ErrorCode::InvalidSessionKey,
                "session_key does not belong to this session: pass the key its connect \
                 answered with (yours, key lost: disconnect needs none, then connect again; \
                 another's: ask the user)",
            ));
        }
        match self.state() {
            SessionState::Ready => Ok(()),
            SessionState::Starting => Err(DaemonError::new(
                ErrorCode::SessionNotReady,
                "the session is still authenticating; retry when connect has answered",
            )),
            SessionState::Lost => Err(crate::remote::lost_error()),
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

    /// Waits until no command runs on this session.
    async fn commands_drained(&self) {
        let mut rx = self.host.active.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    pub fn summary(&self) -> SessionSummary {
        let inner = self.lock();
        let mut summary = SessionSummary {
            session_id: self.id.clone(),
            state: inner.state,
            target: self.target.clone(),
            server_host: self.server_host.clone(),
            server_port: self.server_port,
            master_pid: self.master_pid(),
            remote_user: self.remote_user(),
            created_at: rfc3339(self.created_at),
            last_used_at: rfc3339(inner.last_used),
            active_commands: *self.host.active.borrow(),
            active_transfers: 0,
            active_forwards: 0,
        };
        drop(inner);
        self.work.iter().for_each(|w| w.count(&mut summary));
        summary
    }

    /// The tools' state of type `T` in this session. Every session a daemon makes holds each
    /// tool's (see `lifecycle::tools`, and its test).
    pub fn work<T: work::Work>(&self) -> std::sync::Arc<T> {
        self.work
            .iter()
            .find_map(|w| {
                let any: std::sync::Arc<dyn std::any::Any + Send + Sync> = w.clone();
                any.downcast::<T>().ok()
            })
            .unwrap_or_else(|| panic!("no {} in the session", std::any::type_name::<T>()))
    }

    /// Every tool's state in this session.
    pub fn works(&self) -> &[std::sync::Arc<dyn work::Work>] {
        &self.work
    }
}
