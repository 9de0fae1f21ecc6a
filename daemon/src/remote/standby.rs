//! Channels waiting for a program. Each runs the channel's shell (see `runner`) and waits
//! on its stdin, so a command that takes one skips the mux exchange, sshd's channel open, and
//! the start of the login shell: most of what a command costs. A channel comes back here
//! after each program that left it idle (the daemon's `standby-channels`, 1 by default, wait
//! while they stay fresh; more, `IDLE_TRIM`); each holds a channel slot while it waits. None
//! is opened ahead of need: its login would run beside the next command, which may be
//! editing the login files that the channel dates only once its login shell has read them
//! (see `runner`).
//!
//! The rules that keep them invisible:
//! - A waiting channel is only ever fed a whole program text: until then its shell runs
//!   nothing. Dropping one closes its stdin, and the shell, reading the end of its input,
//!   exits.
//! - A program on a waiting channel sees what the programs before it left in the login files:
//!   the channel's shell checks them first and runs nothing if one changed (see `runner`).
//! - One whose login shell started longer than `MAX_AGE` ago, or whose master has said
//!   anything about it (it ended), is dropped instead of used.
//! - Beyond the target, channels that came back wait at most `IDLE_TRIM`; with a target of 0
//!   none is kept at all.
//! - None is kept while a command opens a channel of its own, and a refused channel open
//!   gives one back: a command never waits for a slot or an sshd session that a waiting
//!   channel holds.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::Host;
use super::kill_channel::Kept;
use crate::mux::MuxSession;

/// A channel whose login shell started longer ago than this is closed rather than used: what
/// the login environment computes (beyond its files) is at most this old.
const MAX_AGE: Duration = Duration::from_secs(60);
/// How long a channel beyond the target may wait for a program before it closes.
const IDLE_TRIM: Duration = Duration::from_secs(5);

/// A channel waiting for its program, with the slot it holds (none for a kill's own channel,
/// which is never kept).
pub struct Warm {
    pub permit: OwnedSemaphorePermit,
    pub session: MuxSession,
    /// When its login shell started.
    pub opened_at: Instant,
    idle_since: Instant,
}

impl Warm {
    /// A channel that just ran a program and is idle again.
    pub fn returned(permit: OwnedSemaphorePermit, session: MuxSession, opened_at: Instant) -> Self {
        Self {
            permit,
            session,
            opened_at,
            idle_since: Instant::now(),
        }
    }
}

/// A session's standby channels.
pub struct Standby {
    /// How many to keep (the daemon's `standby-channels`).
    target: usize,
    ready: Mutex<Ready>,
    /// Runs opening a channel of their own now (waiting for a slot, or for sshd to accept
    /// one): while any does, no channel that comes back is kept.
    opening: AtomicUsize,
    /// Set while a trim waits: one at a time per session.
    trimming: AtomicBool,
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
            opening: AtomicUsize::new(0),
            trimming: AtomicBool::new(false),
        }
    }

    fn ready(&self) -> std::sync::MutexGuard<'_, Ready> {
        self.ready
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether a waiting channel may take a program: young enough, not ended, and nothing
    /// written on its streams while it waited (a process that left the last program's group
    /// still holds them).
    fn fresh(warm: &Warm) -> bool {
        warm.opened_at.elapsed() < MAX_AGE
            && warm.session.control.is_quiet()
            && silent(&warm.session.stdout)
            && silent(&warm.session.stderr)
    }

    /// A usable waiting channel, the latest idle first, if one is ready; old or ended ones are
    /// dropped on the way.
    pub fn take(&self) -> Option<Warm> {
        let mut ready = self.ready();
        while let Some(warm) = ready.channels.pop_back() {
            if Self::fresh(&warm) {
                return Some(warm);
            }
        }
        None
    }

    /// Gives one standby channel back (its slot, and its sshd session): a channel open was
    /// refused, so the server allows fewer sessions than the slots. False when none waited.
    pub fn release_one(&self) -> bool {
        self.ready().channels.pop_back().is_some()
    }

    /// Whether channels are kept for later commands at all (a target above 0).
    pub fn keeps_channels(&self) -> bool {
        self.target > 0
    }

    /// Marks a run as opening a channel of its own until the guard drops.
    pub fn opening(&self) -> Opening<'_> {
        self.opening.fetch_add(1, Ordering::AcqRel);
        Opening(self)
    }

    fn contended(&self) -> bool {
        self.opening.load(Ordering::Acquire) > 0
    }

    /// Keeps a channel that ran a program and waits for the next one; closes it when the
    /// session keeps none (closed, or a target of 0).
    pub fn put_back(host: &Host, warm: Warm) {
        // A wanted kill channel comes first: it is what lets a kill run on a full server.
        let Some(warm) = adopted(host, warm) else {
            return;
        };
        let standby = &host.standby;
        let mut ready = standby.ready();
        // A command waiting for a slot gets this one's (it opens its own channel): waiting
        // channels never keep a command from running.
        if ready.closed || standby.target == 0 || standby.contended() {
            return;
        }
        ready.channels.push_back(warm);
        let over_target = ready.channels.len() > standby.target;
        drop(ready);
        if over_target && !standby.trimming.swap(true, Ordering::AcqRel) {
            let host = host.clone();
            tokio::spawn(async move { trim(&host).await });
        }
    }

    /// Drops every standby channel and keeps none from now on (the session is closing or
    /// lost).
    pub fn close(&self) {
        let mut ready = self.ready();
        ready.closed = true;
        ready.channels.clear();
    }
}

/// Hands `warm` to the kill channel when one is wanted (its slot goes free: the kill channel
/// holds none); otherwise gives it back.
fn adopted(host: &Host, warm: Warm) -> Option<Warm> {
    let Warm {
        permit,
        session,
        opened_at,
        idle_since,
    } = warm;
    let kept = host.kill_channel.adopt(Kept { session, opened_at })?;
    Some(Warm {
        permit,
        session: kept.session,
        opened_at,
        idle_since,
    })
}

/// Whether nothing can be read from a waiting channel's stream: no bytes, no end. Reads one
/// byte if there is one (the channel is then dropped anyway). The pipe is non-blocking.
fn silent(pipe: &tokio::net::unix::pipe::Receiver) -> bool {
    matches!(
        nix::unistd::read(pipe, &mut [0u8; 1]),
        Err(nix::errno::Errno::EAGAIN)
    )
}

/// Whether a waiting channel that only kills use has not ended (its master said nothing about
/// it, neither stream ended), dropping what waits on its streams (the login shell's noise): a
/// kill's answer is read from its own markers, so noise does not matter to it. The pipes are
/// non-blocking.
pub fn open_for_kills(session: &MuxSession) -> bool {
    session.control.is_quiet() && drained(&session.stdout) && drained(&session.stderr)
}

/// Reads `pipe` until it has nothing more now; false when it ended, or when more than a login
/// shell's noise waits there (64 KiB: something still writes on the channel, a process a
/// program left behind).
fn drained(pipe: &tokio::net::unix::pipe::Receiver) -> bool {
    const NOISE_MAX: usize = 64 * 1024;
    let mut buf = [0u8; 4096];
    let mut dropped = 0;
    while dropped <= NOISE_MAX {
        match nix::unistd::read(pipe, &mut buf) {
            Err(nix::errno::Errno::EAGAIN) => return true,
            Err(nix::errno::Errno::EINTR) => {}
            Ok(n @ 1..) => dropped += n,
            Ok(0) | Err(_) => return false,
        }
    }
    false
}

/// Closes the channels beyond the target that waited `IDLE_TRIM`, the longest idle first,
/// until the session keeps no more than its target.
async fn trim(host: &Host) {
    let standby = &host.standby;
    loop {
        tokio::time::sleep(IDLE_TRIM).await;
        let mut ready = standby.ready();
        while ready.channels.len() > standby.target
            && ready
                .channels
                .front()
                .is_some_and(|w| w.idle_since.elapsed() >= IDLE_TRIM)
        {
            ready.channels.pop_front();
        }
        if ready.channels.len() <= standby.target {
            standby.trimming.store(false, Ordering::Release);
            return;
        }
    }
}

/// Linux only: the test writes past 64 KiB into a pipe made larger, which other systems
/// cannot.
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A pipe's reading end as a channel's stream, and its writing end.
    fn pipe() -> (tokio::net::unix::pipe::Receiver, std::fs::File) {
        let (read, write) = crate::platform::pipe_cloexec().unwrap();
        let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(read).unwrap();
        (receiver, std::fs::File::from(write))
    }

    #[tokio::test]
    async fn a_drain_drops_noise_and_tells_an_end_or_a_writer_apart() {
        use std::io::Write;
        let (stream, mut writer) = pipe();
        assert!(drained(&stream), "nothing waits");
        writer.write_all(b"chatty rc on stderr\n").unwrap();
        assert!(drained(&stream), "noise is dropped");
        assert!(silent(&stream), "and gone");
        // Exactly 64 KiB is still noise; one byte more is something writing.
        writer.write_all(&vec![b'x'; 64 * 1024]).unwrap();
        assert!(drained(&stream));
        crate::platform::enlarge_pipe(std::os::fd::AsFd::as_fd(&writer), 128 * 1024);
        writer.write_all(&vec![b'x'; 64 * 1024 + 1]).unwrap();
        assert!(!drained(&stream), "past 64 KiB");
        let (ended, writer) = pipe();
        drop(writer);
        assert!(!drained(&ended), "an ended stream");
    }
}
