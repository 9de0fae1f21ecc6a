//! Channels opened ahead of need. Each runs the bootstrap and waits on its stdin for a
//! payload, so a command that takes one skips the mux exchange, sshd's channel open, and the
//! start of the login shell and of `/bin/sh`: most of what a command costs. Each is used once,
//! for one program, exactly like a channel opened for it; it holds a channel slot while it
//! waits, and a few are kept per session (the daemon's `standby-channels`, 2 by default).
//!
//! A standby channel is only ever fed a whole payload: until then its shell runs nothing.
//! One that has been waiting too long, or whose master has said anything about it (it ended),
//! is dropped instead of used; dropping closes its stdin, and the shell, reading an empty
//! script, exits.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::Host;
use super::framing::BOOTSTRAP;
use crate::mux::{self, MuxSession};

/// A standby channel older than this is replaced rather than used: the login shell read its
/// startup files when it opened, and they may have changed since.
const MAX_AGE: Duration = Duration::from_secs(60);

/// A channel waiting for its program, with the slot it holds.
pub struct Warm {
    pub permit: OwnedSemaphorePermit,
    pub session: MuxSession,
    opened_at: Instant,
}

/// A session's standby channels.
pub struct Standby {
    /// How many to keep (the daemon's `standby-channels`).
    target: usize,
    ready: Mutex<Vec<Warm>>,
    /// Set while a refill task runs: one at a time per session.
    filling: AtomicBool,
    /// Runs opening a channel of their own now (waiting for a slot, or for sshd to accept
    /// one): while any does, no standby channel is opened or kept, so a standby channel never
    /// takes the slot or the sshd session a command is waiting for.
    opening: AtomicUsize,
}

/// Counts a run as opening a channel for as long as it lives.
pub struct Opening<'a>(&'a Standby);

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        self.0.opening.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Standby {
    pub fn new(target: usize) -> Self {
        Self {
            target,
            ready: Mutex::default(),
            filling: AtomicBool::new(false),
            opening: AtomicUsize::new(0),
        }
    }

    fn ready(&self) -> std::sync::MutexGuard<'_, Vec<Warm>> {
        self.ready
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A live standby channel, if one is ready. Stale or ended ones are dropped on the way.
    pub fn take(&self) -> Option<Warm> {
        let mut ready = self.ready();
        while let Some(warm) = ready.pop() {
            if warm.opened_at.elapsed() < MAX_AGE && warm.session.control.is_quiet() {
                return Some(warm);
            }
        }
        None
    }

    /// Marks a run as opening a channel of its own until the guard drops.
    pub fn opening(&self) -> Opening<'_> {
        self.opening.fetch_add(1, Ordering::AcqRel);
        Opening(self)
    }

    fn contended(&self) -> bool {
        self.opening.load(Ordering::Acquire) > 0
    }

    /// Drops every standby channel (the session is closing or lost).
    pub fn clear(&self) {
        self.ready().clear();
    }
}

/// Tops the session's standby channels up to their target in the background, using
/// only slots no run holds or waits for: a command never waits behind a standby channel.
pub fn refill(host: &Host) {
    if host.closing.is_cancelled() || host.standby.filling.swap(true, Ordering::AcqRel) {
        return;
    }
    let host = host.clone();
    tokio::spawn(async move {
        fill(&host).await;
        host.standby.filling.store(false, Ordering::Release);
    });
}

/// Opens standby channels until there are enough or no slot is spare; returns when done.
pub async fn fill(host: &Host) {
    loop {
        let standby = &host.standby;
        if standby.ready().len() >= standby.target
            || standby.contended()
            || host.closing.is_cancelled()
        {
            return;
        }
        let Ok(permit) = host.slots.clone().try_acquire_owned() else {
            return;
        };
        let opened = tokio::time::timeout(
            mux::EXCHANGE_TIMEOUT,
            mux::open_session(&host.control_path, BOOTSTRAP),
        )
        .await;
        let Ok(Ok(session)) = opened else {
            return;
        };
        // A run that began waiting meanwhile gets the slot: this channel closes unused.
        if host.closing.is_cancelled() || standby.contended() {
            return;
        }
        host.standby.ready().push(Warm {
            permit,
            session,
            opened_at: Instant::now(),
        });
    }
}
