//! Channels opened ahead of need. Each runs the bootstrap and waits on its stdin for a
//! payload, so a command that takes one skips the mux exchange, sshd's channel open, and the
//! start of the login shell and of `/bin/sh`: most of what a command costs. Each is used once,
//! for one program, exactly like a channel opened for it; it holds a channel slot while it
//! waits, and a few are kept per session (the daemon's `standby-channels`, 1 by default).
//!
//! The rules that keep them invisible:
//! - A standby channel is only ever fed a whole payload: until then its shell runs nothing.
//!   Dropping one closes its stdin, and the shell, reading an empty script, exits.
//! - Its login shell read its startup files after the last command of the session finished
//!   (channels are opened only once a run has ended, and one opened before the latest end is
//!   dropped), so a command sees what the commands before it left, as with a fresh channel.
//! - One waiting longer than `MAX_AGE`, or whose master has said anything about it (it ended),
//!   is dropped instead of used.
//! - None is opened or kept while a command opens a channel of its own, and a refused channel
//!   open gives one back: a command never waits for a slot or an sshd session that a standby
//!   channel holds.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::Host;
use super::framing::BOOTSTRAP;
use crate::mux::{self, MuxSession};

/// A standby channel older than this is replaced rather than used.
const MAX_AGE: Duration = Duration::from_secs(60);

/// A channel waiting for its program, with the slot it holds.
pub struct Warm {
    pub permit: OwnedSemaphorePermit,
    pub session: MuxSession,
    opened_at: Instant,
    /// The session's run ends counted when this channel was opened.
    generation: u64,
}

/// A session's standby channels.
pub struct Standby {
    /// How many to keep (the daemon's `standby-channels`).
    target: usize,
    ready: Mutex<Ready>,
    /// Set while a fill runs: one at a time per session.
    filling: AtomicBool,
    /// Runs opening a channel of their own now (waiting for a slot, or for sshd to accept
    /// one): while any does, no standby channel is opened or kept.
    opening: AtomicUsize,
    /// Run ends so far: a channel opened before the latest is stale.
    generation: AtomicU64,
    /// Woken when a fill pushes a channel or ends.
    changed: tokio::sync::Notify,
}

#[derive(Default)]
struct Ready {
    channels: VecDeque<Warm>,
    /// Set when the session closes or is lost: nothing is kept any more.
    closed: bool,
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
            generation: AtomicU64::new(0),
            changed: tokio::sync::Notify::new(),
        }
    }

    fn ready(&self) -> std::sync::MutexGuard<'_, Ready> {
        self.ready
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn fresh(&self, warm: &Warm) -> bool {
        warm.generation == self.generation.load(Ordering::Acquire)
            && warm.opened_at.elapsed() < MAX_AGE
            && warm.session.control.is_quiet()
    }

    /// A usable standby channel, oldest first, if one is ready; stale or ended ones are
    /// dropped on the way.
    pub fn take(&self) -> Option<Warm> {
        let mut ready = self.ready();
        while let Some(warm) = ready.channels.pop_front() {
            if self.fresh(&warm) {
                return Some(warm);
            }
        }
        None
    }

    /// Like [`take`](Self::take), but when a fill is under way and `alone` (no other run on
    /// the session), waits for its channel (until `deadline`, at most a second) instead of
    /// opening one beside it: back-to-back commands would otherwise start two shells each.
    pub async fn take_soon(&self, alone: bool, deadline: Instant) -> Option<Warm> {
        let give_up = deadline.min(Instant::now() + Duration::from_secs(1));
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(warm) = self.take() {
                return Some(warm);
            }
            if !alone || !self.filling.load(Ordering::Acquire) {
                return None;
            }
            if tokio::time::timeout_at(give_up, changed).await.is_err() {
                return None;
            }
        }
    }

    /// Gives one standby channel back (its slot, and its sshd session): a channel open was
    /// refused, so the server allows fewer sessions than the slots.
    pub fn release_one(&self) {
        drop(self.ready().channels.pop_back());
    }

    /// Marks a run as opening a channel of its own until the guard drops.
    pub fn opening(&self) -> Opening<'_> {
        self.opening.fetch_add(1, Ordering::AcqRel);
        Opening(self)
    }

    fn contended(&self) -> bool {
        self.opening.load(Ordering::Acquire) > 0
    }

    /// Counts a run's end: channels opened before it are stale from now on.
    pub fn run_ended(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Drops every standby channel and keeps none from now on (the session is closing or
    /// lost).
    pub fn close(&self) {
        let mut ready = self.ready();
        ready.closed = true;
        ready.channels.clear();
    }
}

/// Tops the session's standby channels up to their target in the background.
pub fn refill(host: &Host) {
    let host = host.clone();
    tokio::spawn(async move { fill(&host).await });
}

/// Opens standby channels until there are enough, a run opens its own, or no slot is free;
/// returns when done (at once when another fill is under way).
pub async fn fill(host: &Host) {
    let standby = &host.standby;
    if standby.target == 0 || standby.filling.swap(true, Ordering::AcqRel) {
        return;
    }
    loop {
        let generation = standby.generation.load(Ordering::Acquire);
        {
            let mut ready = standby.ready();
            ready.channels.retain(|warm| standby.fresh(warm));
            if ready.closed || ready.channels.len() >= standby.target || standby.contended() {
                break;
            }
        }
        let Ok(permit) = host.slots.clone().try_acquire_owned() else {
            break;
        };
        let opened = tokio::time::timeout(
            mux::EXCHANGE_TIMEOUT,
            mux::open_session(&host.control_path, BOOTSTRAP),
        )
        .await;
        let Ok(Ok(session)) = opened else {
            break;
        };
        let warm = Warm {
            permit,
            session,
            opened_at: Instant::now(),
            generation,
        };
        let mut ready = standby.ready();
        // A run that began opening its own channel meanwhile gets the slot, and a closed
        // session keeps nothing: the channel closes unused.
        if ready.closed || standby.contended() {
            break;
        }
        ready.channels.push_back(warm);
        drop(ready);
        standby.changed.notify_waiters();
    }
    standby.filling.store(false, Ordering::Release);
    standby.changed.notify_waiters();
}
