//! Opening command channels on a master without ever exceeding what sshd allows: a per-session
//! slot limit below the server's MaxSessions, a short retry of the refusals sshd still sends
//! near its limit (it frees a slot only after the client has seen EOF), and a bound on every
//! exchange with the master, which may be stopped or wedged; and readying a new channel's
//! runner before its program (the kill channel, a handle's program).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::mux::{self, MuxError, MuxSession};

/// Channels one session keeps open at once: OpenSSH's default MaxSessions is 10, and sshd
/// refuses a little before its limit, so we stay two below it and queue the rest.
pub const CHANNEL_SLOTS: usize = 8;

/// Of those, the most that callers' commands (and transfers) may hold: the last one stays
/// for the daemon's own brief programs, so a stat or a task's status never waits behind
/// commands that run for hours.
pub const COMMAND_SLOTS: usize = CHANNEL_SLOTS - 1;

/// Why no channel came before a deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoChannel {
    /// Every slot stayed taken, or the server kept refusing.
    Busy,
    /// The master did not answer a request for a channel.
    MasterSilent,
    /// A new channel's login shell did not say it was ready.
    LoginSilent,
    /// The channel did not take the whole program (its connection stalled, or the host reads
    /// it slowly): the program never ran, as it runs only once it came whole.
    NotTaken,
}

/// Why a channel could not be had.
#[derive(Debug)]
pub enum OpenError {
    /// The deadline passed (see [`NoChannel`]).
    TimedOut(NoChannel),
    /// The session's slots were closed: its master was confirmed gone.
    SlotsClosed,
    /// The master's socket failed in a way a retry will not mend (it may be gone, or this
    /// daemon may be out of descriptors: the caller tells the two apart).
    Mux(MuxError),
}

/// Waits for one of the session's slots until `deadline`.
pub async fn acquire_slot(
    slots: &Arc<Semaphore>,
    deadline: Instant,
) -> Result<OwnedSemaphorePermit, OpenError> {
    match tokio::time::timeout_at(deadline, slots.clone().acquire_owned()).await {
        Ok(Ok(permit)) => Ok(permit),
        Ok(Err(_closed)) => Err(OpenError::SlotsClosed),
        Err(_) => Err(OpenError::TimedOut(NoChannel::Busy)),
    }
}

/// How an open retries sshd's refusals.
#[derive(Clone, Copy)]
pub enum Retries<'a> {
    /// Briskly, for a kill, which must not wait: 1 ms doubling to 50 ms.
    Brisk,
    /// Patiently, for work that waits its turn: every refusal is a line in the server's log,
    /// so a session waiting on a full server asks about once a second at most (25 ms
    /// doubling to 1 s), and again as soon as `freed` says a channel of the session closed.
    Patient(&'a tokio::sync::Notify),
}

impl Retries<'_> {
    fn first_and_most(self) -> (Duration, Duration) {
        match self {
            Self::Brisk => (Duration::from_millis(1), Duration::from_millis(50)),
            Self::Patient(_) => (Duration::from_millis(25), Duration::from_secs(1)),
        }
    }

    /// Waits `backoff`, or less when a channel came free.
    async fn pause(self, backoff: Duration) {
        match self {
            Self::Brisk => tokio::time::sleep(backoff).await,
            Self::Patient(freed) => {
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = freed.notified() => {}
                }
            }
        }
    }
}

/// How long a request for a channel goes unanswered before a call cut by its deadline says
/// the master did not answer, rather than that every channel stayed busy.
const SILENT_AFTER: Duration = Duration::from_secs(1);

/// Opens a session running `command`, retrying channel refusals (as `retries` says; `refused`
/// is called on each, and says whether it let one of the session's channels go, which the
/// next try then soon finds free) and silent masters until `deadline`. An attempt cut short
/// leaves nothing running: the caller writes the program only once the channel is open.
pub async fn open_with_retry(
    control_path: &Path,
    command: &str,
    deadline: Instant,
    retries: Retries<'_>,
    refused: impl Fn() -> bool,
) -> Result<MuxSession, OpenError> {
    let (first, most) = retries.first_and_most();
    let mut backoff = first;
    let (mut silent, mut refused_once) = (false, false);
    loop {
        let asked_at = Instant::now();
        let attempt_deadline = deadline.min(asked_at + mux::EXCHANGE_TIMEOUT);
        let attempt = mux::open_session(control_path, command);
        match tokio::time::timeout_at(attempt_deadline, attempt).await {
            Ok(Ok(session)) => return Ok(session),
            Ok(Err(e)) if e.is_channel_refusal() => {
                refused_once = true;
                let freed_one = refused();
                if Instant::now() >= deadline {
                    return Err(OpenError::TimedOut(NoChannel::Busy));
                }
                let wait = match freed_one {
                    true => first,
                    false => {
                        let grown = (backoff * 2).min(most);
                        std::mem::replace(&mut backoff, grown)
                    }
                };
                // The last try comes at the deadline, not a backoff before it.
                retries.pause(wait.min(deadline - Instant::now())).await;
            }
            Ok(Err(e)) => return Err(OpenError::Mux(e)),
            // Cut by the call's own deadline: silent if an attempt had run its whole exchange
            // time before, or this one went a second unanswered and sshd never refused (a
            // frozen host answers nothing, a full server refuses at once).
            Err(_) if Instant::now() >= deadline => {
                let unanswered = !refused_once && asked_at.elapsed() >= SILENT_AFTER;
                return Err(OpenError::TimedOut(match silent || unanswered {
                    true => NoChannel::MasterSilent,
                    false => NoChannel::Busy,
                }));
            }
            Err(_) => {
                silent = true;
                tracing::debug!("the master did not answer a session request; retrying");
            }
        }
    }
}

/// Reads `stdout` up to the line starting with `nonce`, dropping (and logging) what the login
/// shell printed before it; false when the stream ends first.
async fn said(stdout: &mut tokio::net::unix::pipe::Receiver, nonce: &str) -> bool {
    use tokio::io::AsyncReadExt;
    let mut scan = super::framing::MarkerScan::new(nonce.as_bytes());
    let mut buf = vec![0u8; 4096];
    while scan.marker().is_none() {
        match stdout.read(&mut buf).await {
            Ok(n @ 1..) => drop(scan.feed(&buf[..n])),
            _ => return false,
        }
    }
    scan.log_noise("stdout");
    true
}

/// Sends a new channel the runner's ready text and waits for the runner to say it has read
/// it whole (see `runner`). False when the login shell ended first.
pub async fn start_runner(session: &mut MuxSession) -> std::io::Result<bool> {
    use tokio::io::AsyncWriteExt;
    let ready = crate::random::nonce("_sshmcp_")?;
    let text = super::runner::ready_text(&ready);
    if session.stdin.write_all(text.as_bytes()).await.is_err() {
        return Ok(false);
    }
    Ok(said(&mut session.stdout, &ready).await)
}
