//! Opening command channels on a master without ever exceeding what sshd allows: a per-session
//! slot limit below the server's MaxSessions, and a short retry of the refusals sshd still
//! sends near its limit (it frees a slot only after the client has seen EOF).

use std::path::Path;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::mux::{self, MuxError, MuxSession};

/// Channels one session keeps open at once: OpenSSH's default MaxSessions is 10, and sshd
/// refuses a little before its limit, so we stay two below it and queue the rest.
pub const CHANNEL_SLOTS: usize = 8;

/// Why a channel could not be had.
#[derive(Debug)]
pub enum OpenError {
    /// The deadline passed while waiting for a slot or retrying refusals.
    TimedOut,
    /// The master does not answer: the session is lost.
    MasterGone,
    Mux(MuxError),
}

/// Waits for one of the session's slots until `deadline`.
pub async fn acquire_slot(
    slots: &std::sync::Arc<Semaphore>,
    deadline: Instant,
) -> Result<OwnedSemaphorePermit, OpenError> {
    match tokio::time::timeout_at(deadline, slots.clone().acquire_owned()).await {
        Ok(Ok(permit)) => Ok(permit),
        Ok(Err(_closed)) => Err(OpenError::MasterGone),
        Err(_) => Err(OpenError::TimedOut),
    }
}

/// Opens a session running `command`, retrying channel refusals with a short backoff until
/// `deadline`.
pub async fn open_with_retry(
    control_path: &Path,
    command: &str,
    deadline: Instant,
) -> Result<MuxSession, OpenError> {
    let mut backoff = Duration::from_millis(1);
    loop {
        match mux::open_session(control_path, command).await {
            Ok(session) => return Ok(session),
            Err(e) if e.is_channel_refusal() => {
                if Instant::now() + backoff >= deadline {
                    return Err(OpenError::TimedOut);
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(50));
            }
            Err(MuxError::Unreachable(_)) => return Err(OpenError::MasterGone),
            Err(e) => return Err(OpenError::Mux(e)),
        }
    }
}
