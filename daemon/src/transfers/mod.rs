//! File transfers: jobs with ids that copy one regular file with rsync over the session's
//! master (never a second connection: see `rsync`), into a private partial file that a retry of
//! the same pair resumes from, verified by SHA-256 on both ends (at the same time) before it is
//! published. Downloads so far; the local end (confinement, publishing) is in `local`.

pub mod local;
mod rsync;

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use sha2::{Digest, Sha256};
use sshmcp_proto::inspect::{FileType, StatRequest};
use sshmcp_proto::time::rfc3339;
use sshmcp_proto::transfer::{
    TransferDirection, TransferError, TransferList, TransferReport, TransferStartRequest,
    TransferState,
};
use sshmcp_proto::{DaemonError, ErrorCode};
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::inspect;
use crate::session::Session;

/// Transfers a session keeps for `transfer_list` (running ones are never dropped).
const HISTORY_LEN: usize = 100;
/// How long a transfer waits for one of the session's channels.
const SLOT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// How long a master whose copy ended badly may take to show as exited.
const MASTER_EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The destinations of active transfers, daemon-wide: each is owned by one operation.
#[derive(Default)]
pub struct Destinations(Mutex<HashSet<PathBuf>>);

/// A destination held by one operation until it ends.
struct Claim {
    destinations: Arc<Destinations>,
    path: PathBuf,
}

impl Destinations {
    fn claim(self: &Arc<Self>, path: &Path) -> Result<Claim, DaemonError> {
        if !locked(&self.0).insert(path.to_path_buf()) {
            return Err(DaemonError::new(
                ErrorCode::TransferConflict,
                "another transfer is writing this destination; wait for it or pick another path",
            ));
        }
        Ok(Claim {
            destinations: self.clone(),
            path: path.to_path_buf(),
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        locked(&self.destinations.0).remove(&self.path);
    }
}

/// One session's transfers, newest first.
#[derive(Default)]
pub struct Transfers(Mutex<VecDeque<Arc<Operation>>>);

/// Where an operation stands.
struct Progress {
    state: TransferState,
    sha256: Option<String>,
    final_path: Option<String>,
    error: Option<TransferError>,
    ended_at: Option<SystemTime>,
}

pub struct Operation {
    id: String,
    total: u64,
    bytes: AtomicU64,
    began: Instant,
    started_at: SystemTime,
    progress: Mutex<Progress>,
    cancel: CancellationToken,
}

impl Operation {
    fn report(&self) -> TransferReport {
        let p = locked(&self.progress);
        let bytes = self.bytes.load(Ordering::Relaxed);
        let seconds = p
            .ended_at
            .and_then(|end| end.duration_since(self.started_at).ok())
            .unwrap_or_else(|| self.began.elapsed())
            .as_secs_f64();
        let rate = if seconds > 0.0 {
            bytes as f64 / seconds
        } else {
            0.0
        };
        let eta = (p.state == TransferState::Running && rate > 0.0)
            .then(|| self.total.saturating_sub(bytes) as f64 / rate);
        TransferReport {
            operation_id: self.id.clone(),
            direction: TransferDirection::Download,
            state: p.state,
            bytes_transferred: bytes,
            total_bytes: self.total,
            rate,
            eta,
            sha256: p.sha256.clone(),
            final_path: p.final_path.clone(),
            error: p.error.clone(),
            started_at: rfc3339(self.started_at),
            ended_at: p.ended_at.map(rfc3339),
        }
    }

    fn set_state(&self, state: TransferState) {
        locked(&self.progress).state = state;
    }

    fn end(&self, outcome: Result<(String, String), (TransferState, DaemonError)>) {
        let mut p = locked(&self.progress);
        p.ended_at = Some(SystemTime::now());
        match outcome {
            Ok((sha256, final_path)) => {
                p.state = TransferState::Completed;
                p.sha256 = Some(sha256);
                p.final_path = Some(final_path);
            }
            Err((state, e)) => {
                p.state = state;
                p.error = (state == TransferState::Failed).then(|| TransferError {
                    code: e.code.as_str().to_string(),
                    message: e.message,
                });
            }
        }
    }

    fn running(&self) -> bool {
        locked(&self.progress).ended_at.is_none()
    }
}

impl Transfers {
    fn add(&self, op: Arc<Operation>) {
        let mut ops = locked(&self.0);
        ops.push_front(op);
        while ops.len() > HISTORY_LEN {
            match ops.iter().rposition(|o| !o.running()) {
                Some(oldest) => ops.remove(oldest),
                None => break,
            };
        }
    }

    fn find(&self, id: &str) -> Result<Arc<Operation>, DaemonError> {
        locked(&self.0)
            .iter()
            .find(|o| o.id == id)
            .cloned()
            .ok_or_else(|| {
                DaemonError::new(
                    ErrorCode::TransferNotFound,
                    "no transfer with this operation_id in this session (transfer_list shows them)",
                )
            })
    }

    pub fn status(&self, id: &str) -> Result<TransferReport, DaemonError> {
        Ok(self.find(id)?.report())
    }

    /// Stops the copy; its partial file stays for a retry to resume from.
    pub fn cancel(&self, id: &str) -> Result<TransferReport, DaemonError> {
        let op = self.find(id)?;
        op.cancel.cancel();
        Ok(op.report())
    }

    pub fn list(&self) -> TransferList {
        TransferList {
            transfers: locked(&self.0).iter().map(|o| o.report()).collect(),
        }
    }
}

/// `download_start`: checks the source and the destination, then copies in the background.
pub async fn download(
    session: &Arc<Session>,
    settings: &Settings,
    destinations: &Arc<Destinations>,
    req: TransferStartRequest,
) -> Result<TransferReport, DaemonError> {
    let counted = session
        .transfer_started(settings.max_transfers)
        .ok_or_else(|| {
            DaemonError::new(
                ErrorCode::TransferLimitReached,
                format!(
                    "this session already runs {} transfers (the daemon's max-transfers); \
                     wait for one to end",
                    settings.max_transfers
                ),
            )
        })?;
    let remote = inspect::path_bytes(&req.remote_path)?;
    let source = inspect::stat::stat(
        session,
        StatRequest {
            auth: req.auth.clone(),
            path: req.remote_path.clone(),
            follow_symlinks: true,
        },
    )
    .await?;
    if source.file_type != FileType::File {
        return Err(DaemonError::new(
            ErrorCode::InvalidRemoteType,
            "remote_path is not a regular file (transfers copy single files)",
        ));
    }
    let root = crate::exec::local_root(req.local_root.clone(), settings)?;
    let destination = local::destination(&root, &req.local_path, req.overwrite)?;
    let claim = destinations.claim(&destination.final_path)?;
    let server = format!("{}:{}", session.server_host, session.server_port);
    let partial =
        local::partial_path(&root, &server, &remote, &destination.final_path).map_err(|e| {
            DaemonError::new(
                ErrorCode::InvalidLocalPath,
                format!("cannot make the partial file's directory: {e}"),
            )
        })?;
    let id = crate::session::key::nonce("tr-")
        .map_err(|e| DaemonError::internal(format!("no randomness: {e}")))?;
    let op = Arc::new(Operation {
        id: id[..19].to_string(),
        total: source.size,
        bytes: AtomicU64::new(0),
        began: Instant::now(),
        started_at: SystemTime::now(),
        progress: Mutex::new(Progress {
            state: TransferState::Running,
            sha256: None,
            final_path: None,
            error: None,
            ended_at: None,
        }),
        cancel: session.host.closing.child_token(),
    });
    session.transfers.add(op.clone());
    let (session, job) = (session.clone(), op.clone());
    tokio::spawn(async move {
        let outcome = copy(
            &session,
            &job,
            &remote,
            &partial,
            &destination,
            req.overwrite,
        )
        .await;
        // Free first: a caller that sees the end may start the same destination at once.
        drop((claim, counted));
        job.end(outcome);
    });
    Ok(op.report())
}

/// The copy, the verification and the publishing of one download.
async fn copy(
    session: &Session,
    op: &Operation,
    remote: &[u8],
    partial: &Path,
    destination: &local::Destination,
    overwrite: bool,
) -> Result<(String, String), (TransferState, DaemonError)> {
    let failed = |e| (TransferState::Failed, e);
    let cancelled = || {
        (
            TransferState::Cancelled,
            DaemonError::new(ErrorCode::TransferFailed, "cancelled"),
        )
    };
    // rsync's ssh opens a channel on the master like any command: it takes one of the
    // session's slots, so commands and transfers together stay within sshd's MaxSessions.
    let slot = tokio::select! {
        slot = crate::remote::channel::acquire_slot(
            &session.host.slots,
            tokio::time::Instant::now() + SLOT_WAIT,
        ) => slot.map_err(|_| failed(DaemonError::new(
            ErrorCode::TransferFailed,
            "no channel of the session came free in time (running commands hold them all)",
        )))?,
        _ = op.cancel.cancelled() => return Err(cancelled()),
    };
    let server = (session.server_host.as_str(), session.server_port);
    let copied = rsync::download(
        &session.host.control_path,
        server,
        remote,
        partial,
        (&op.bytes, op.total),
        &op.cancel,
    )
    .await;
    drop(slot);
    match copied {
        Ok(()) => {}
        Err(rsync::Failure::Cancelled) => return Err(cancelled()),
        Err(rsync::Failure::Exited(code)) => {
            // A master killed mid-copy closes its socket a moment before it shows as exited.
            let lost = match session.host.master.get() {
                Some(master) => master.exited_within(MASTER_EXIT_WAIT).await,
                None => false,
            };
            return Err(failed(match lost {
                true => crate::session::lost_error(),
                false => DaemonError::new(
                    ErrorCode::TransferFailed,
                    format!(
                        "rsync failed (exit status {code}); the partial file is kept for a retry"
                    ),
                ),
            }));
        }
        Err(rsync::Failure::Start(e)) => {
            return Err(failed(DaemonError::new(
                ErrorCode::TransferFailed,
                format!("cannot run rsync: {e}"),
            )));
        }
    }
    op.set_state(TransferState::Verifying);
    let hashes = async { tokio::join!(remote_sha256(session, remote), local_sha256(partial)) };
    let (remote_hash, local_hash) = tokio::select! {
        hashes = hashes => hashes,
        _ = op.cancel.cancelled() => return Err(cancelled()),
    };
    let (remote_hash, local_hash) = (remote_hash.map_err(failed)?, local_hash.map_err(failed)?);
    if remote_hash != local_hash {
        return Err(failed(DaemonError::new(
            ErrorCode::VerificationFailed,
            "the copy's SHA-256 differs from the source's; nothing was published",
        )));
    }
    if op.cancel.is_cancelled() {
        return Err(cancelled());
    }
    destination.publish(partial, overwrite).map_err(failed)?;
    Ok((local_hash, destination.final_path.display().to_string()))
}

/// The source's SHA-256 on the host: `openssl dgst` where there is one (four times faster
/// than coreutils there), else `sha256sum`. The path travels on stdin, and the file is hashed
/// from stdin too: both tools mark the digest of an odd file name with a backslash.
async fn remote_sha256(session: &Session, remote: &[u8]) -> Result<String, DaemonError> {
    let script = format!(
        "{}if command -v openssl >/dev/null 2>&1; then \
         _h=$(command openssl dgst -sha256 -r < \"$_p\" 2>&1) || _sshmcp_fail \"$_h\"; \
         else _h=$(command sha256sum < \"$_p\" 2>&1) || _sshmcp_fail \"$_h\"; fi\n\
         printf 'ok %s\\n' \"${{_h%% *}}\"\n",
        inspect::prelude("sha256sum")
    );
    let (hash, _) = inspect::run(session, script, remote, 4096).await?;
    Ok(hash.trim().to_ascii_lowercase())
}

/// The partial's SHA-256, read off the async threads.
async fn local_sha256(partial: &Path) -> Result<String, DaemonError> {
    let path = partial.to_path_buf();
    let hashed = tokio::task::spawn_blocking(move || -> std::io::Result<String> {
        use std::io::Read;
        let mut file = std::fs::File::open(path)?;
        let mut hash = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            match file.read(&mut buf)? {
                0 => break,
                n => hash.update(&buf[..n]),
            }
        }
        Ok(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
    })
    .await;
    match hashed {
        Ok(Ok(hex)) => Ok(hex),
        Ok(Err(e)) => Err(DaemonError::new(
            ErrorCode::TransferFailed,
            format!("cannot read the partial file: {e}"),
        )),
        Err(e) => Err(DaemonError::internal(format!("the hash task failed: {e}"))),
    }
}
