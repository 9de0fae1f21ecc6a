//! File transfers: jobs with ids that copy one regular file with rsync over the session's
//! master (never a second connection: see `rsync`), into a private partial file that a retry of
//! the same pair resumes from, verified by SHA-256 on both ends (at the same time) before it is
//! published. The local end (confinement, publishing) is in `local`, the remote end (checks,
//! hashing, publishing) in `remote`.

pub mod local;
pub mod relay;
mod remote;
mod rsync;

use std::collections::{HashSet, VecDeque};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};
use sshmcp_proto::time::rfc3339;
use sshmcp_proto::tool::Tool;
use sshmcp_proto::transfer::{
    TransferDirection, TransferError, TransferList, TransferReport, TransferStartRequest,
    TransferState,
};
use sshmcp_proto::{DaemonError, ErrorCode};
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::inspect;
use crate::remote::Counted;
use crate::remote::kill_channel::{self, KillChannel};
use crate::session::record::Entry;
use crate::session::record::{from_unix_ms, unix_ms};
use crate::session::work::Work;
use crate::session::{Registry, Session};
use futures::future::BoxFuture;
use sshmcp_proto::overview::SessionView;
use sshmcp_proto::session::SessionSummary;

/// Transfers a session keeps for `transfer_list` (running ones are never dropped).
const HISTORY_LEN: usize = 100;

/// The most ended transfers a session's record keeps (their last reports): enough for the
/// callers polling when a daemon restarts, little for a record rewritten at each change.
const ENDED_RECORDED: usize = 16;
/// How long a transfer waits for one of the session's channels.
const SLOT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// The first pause before rsync tries again a channel sshd refused; it doubles up to
/// `REFUSED_PAUSE_MAX` (each try starts rsync and ssh anew).
const REFUSED_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);
const REFUSED_PAUSE_MAX: std::time::Duration = std::time::Duration::from_millis(500);
/// How long a handover or a cancel waits for each copy it stopped to stop writing.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(3);
/// How long a master whose copy ended badly may take to show as exited.
const MASTER_EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A file a transfer writes, as its system identifies it: a local file by its directory's
/// device and inode and its name, a remote one likewise with the host's identity (two paths
/// may reach one file).
#[derive(Clone, PartialEq, Eq, Hash)]
enum Target {
    Local((u64, u64, std::ffi::OsString)),
    Remote(Vec<u8>),
}

/// The destinations of active transfers, daemon-wide: each is owned by one operation.
#[derive(Default)]
pub struct Destinations(Mutex<HashSet<Target>>);

/// A destination held by one operation until it ends.
struct Claim {
    destinations: Arc<Destinations>,
    target: Target,
}

impl Destinations {
    fn claim(self: &Arc<Self>, target: Target) -> Result<Claim, DaemonError> {
        if !locked(&self.0).insert(target.clone()) {
            return Err(DaemonError::new(
                ErrorCode::TransferConflict,
                "another transfer is writing this destination; wait for it or pick another path",
            ));
        }
        Ok(Claim {
            destinations: self.clone(),
            target,
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        locked(&self.destinations.0).remove(&self.target);
    }
}

/// One session's transfers, newest first; those a record named, to start again once the
/// re-adopted session is listed; and how many copy now (`session_list`'s `active_transfers`).
#[derive(Default)]
pub struct Transfers(
    Mutex<VecDeque<Arc<Operation>>>,
    Mutex<Vec<TransferEntry>>,
    AtomicU32,
);

/// A transfer counted among its session's active ones while it lives.
struct Active(Arc<Transfers>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.2.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Where an operation stands.
struct Progress {
    state: TransferState,
    reused_bytes: Option<u64>,
    sha256: Option<String>,
    final_path: Option<String>,
    error: Option<TransferError>,
    ended_at: Option<SystemTime>,
    /// When the copy last went to running (after a wait for a channel, or a channel sshd
    /// refused, which copied nothing): the time before is not its rate's. A monotonic
    /// clock, as a step of the wall clock is no time the copy took.
    running_since: Option<Instant>,
    /// How long it ran, once it ended.
    ran_for: Option<Duration>,
    /// What a download's partial held when the copy went to running: bytes a resume reuses,
    /// which its rate does not count.
    held_at_run: u64,
    /// The person cancelled it (`sshmcp kill`).
    stopped_by_person: bool,
}

pub struct Operation {
    id: String,
    direction: TransferDirection,
    /// What started it, less the caller's key: what a restarted daemon resumes.
    request: TransferStartRequest,
    local_path: String,
    remote_path: Vec<u8>,
    total: u64,
    bytes: AtomicU64,
    started_at: SystemTime,
    progress: Mutex<Progress>,
    cancel: CancellationToken,
    /// Turns true once the operation ended.
    ended: tokio::sync::watch::Sender<bool>,
    /// Stopped by a handover: the next daemon resumes it.
    handed_over: std::sync::atomic::AtomicBool,
    /// A download's local partial file, whose size tells what arrived when rsync's progress
    /// lags (it reports in bursts, seconds apart) or a copy stopped before it reported.
    partial: Option<PathBuf>,
    /// The last report of a transfer that ended under the daemon before, as it gave it.
    told: Option<TransferReport>,
}

impl Operation {
    fn new(
        resumed: Resumed,
        direction: TransferDirection,
        mut request: TransferStartRequest,
        total: u64,
        cancel: CancellationToken,
    ) -> Self {
        // Kept for a resume, which needs no key: the key is not kept.
        request.auth.session_key = String::new();
        Self {
            id: resumed.id,
            direction,
            local_path: request.local_path.clone(),
            remote_path: inspect::path_bytes(&request.remote_path, "remote_path")
                .unwrap_or_default(),
            request,
            total,
            bytes: AtomicU64::new(0),
            started_at: resumed.started_at,
            progress: Mutex::new(Progress {
                state: TransferState::Queued,
                reused_bytes: None,
                sha256: None,
                final_path: None,
                error: None,
                ended_at: None,
                running_since: None,
                ran_for: None,
                held_at_run: 0,
                stopped_by_person: false,
            }),
            cancel,
            ended: tokio::sync::watch::channel(false).0,
            handed_over: Default::default(),
            partial: None,
            told: None,
        }
    }

    fn report(&self) -> TransferReport {
        if let Some(told) = &self.told {
            return told.clone();
        }
        let p = locked(&self.progress);
        let arrived = match p.state {
            TransferState::Running => self.arrived(),
            _ => 0,
        };
        let bytes = self.bytes.load(Ordering::Relaxed).max(arrived);
        let seconds = p
            .ran_for
            .or_else(|| p.running_since.map(|since| since.elapsed()))
            .map_or(0.0, |ran| ran.as_secs_f64());
        let rate = if seconds > 0.0 {
            bytes.saturating_sub(p.held_at_run) as f64 / seconds
        } else {
            0.0
        };
        let eta = (p.state == TransferState::Running && rate > 0.0)
            .then(|| self.total.saturating_sub(bytes) as f64 / rate);
        let (remote_path, remote_path_encoding) = inspect::remote_text(&self.remote_path);
        TransferReport {
            operation_id: self.id.clone(),
            direction: self.direction,
            local_path: self.local_path.clone(),
            remote_path,
            remote_path_encoding,
            state: p.state,
            bytes_transferred: bytes,
            reused_bytes: p.reused_bytes,
            total_bytes: self.total,
            rate,
            eta,
            sha256: p.sha256.clone(),
            final_path: p.final_path.clone(),
            error: p.error.clone(),
            started_at: rfc3339(self.started_at),
            ended_at: p.ended_at.map(rfc3339),
            // A copy that ended before the cancel could stop it ended its own way.
            stopped_by: (p.stopped_by_person && p.state == TransferState::Cancelled)
                .then(|| sshmcp_proto::service::STOPPED_BY_PERSON.into()),
        }
    }

    fn set_state(&self, state: TransferState) {
        let mut p = locked(&self.progress);
        p.state = state;
        if state == TransferState::Running {
            p.running_since = Some(Instant::now());
            p.held_at_run = self.arrived();
        }
    }

    fn copied(&self, reused_bytes: u64) {
        let mut p = locked(&self.progress);
        p.state = TransferState::Verifying;
        p.reused_bytes = Some(reused_bytes);
    }

    /// Ends the transfer; whoever waits for its end (a cancel, a status with a wait) is told
    /// once the record holds it, so what they answer holds across a crash right after (a
    /// cancelled transfer resumed by the next daemon, a completed one copied again).
    async fn end(&self, session: &Session, outcome: Outcome) {
        self.record_end(outcome);
        session.record.until_written().await;
        self.ended.send_replace(true);
    }

    /// What a download's partial file holds (0 for an upload): what arrived so far.
    fn arrived(&self) -> u64 {
        self.partial.as_ref().map_or(0, |partial| {
            std::fs::metadata(partial).map_or(0, |m| m.len().min(self.total))
        })
    }

    fn record_end(&self, outcome: Outcome) {
        // What arrived, as it stands at the end: a retry of the same pair writes the same
        // partial file on.
        if outcome.is_err() {
            self.bytes.fetch_max(self.arrived(), Ordering::Relaxed);
        }
        let mut p = locked(&self.progress);
        p.ended_at = Some(SystemTime::now());
        p.ran_for = p.running_since.map(|since| since.elapsed());
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

    /// Still to finish: running, or stopped by a handover (not by its caller).
    fn resumable(&self) -> bool {
        let p = locked(&self.progress);
        p.ended_at.is_none()
            || (self.handed_over.load(Ordering::SeqCst) && p.state == TransferState::Cancelled)
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

    /// Puts `op` where `placeholder` is listed.
    fn replace(&self, placeholder: &Arc<Operation>, op: Arc<Operation>) {
        let mut ops = locked(&self.0);
        match ops.iter_mut().find(|o| Arc::ptr_eq(o, placeholder)) {
            Some(slot) => *slot = op,
            None => ops.push_front(op),
        }
    }

    /// The operation `id` after a wait: a resumed transfer's placeholder may have given way
    /// to the transfer meanwhile; `op` when it has left the history since.
    fn found_again(&self, id: &str, op: Arc<Operation>) -> Arc<Operation> {
        self.find(id).unwrap_or(op)
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

    /// The transfer's report, once it ended or `wait` passed, whichever comes first.
    pub async fn status(&self, id: &str, wait: Duration) -> Result<TransferReport, DaemonError> {
        let op = self.find(id)?;
        let mut ended = op.ended.subscribe();
        let _ = tokio::time::timeout(wait, ended.wait_for(|e| *e)).await;
        Ok(self.found_again(id, op).report())
    }

    /// Stops the copy; its partial file stays for a retry to resume from. Answers once the
    /// copy has stopped writing (`STOP_WAIT` at most), so that the answer says `cancelled`
    /// and a retry started at once finds its destination free.
    pub async fn cancel(&self, id: &str) -> Result<TransferReport, DaemonError> {
        self.cancel_as(id, false).await
    }

    /// The person's cancel (`sshmcp kill`), which the report of a transfer it stopped says.
    pub async fn cancel_for_person(&self, id: &str) -> Result<TransferReport, DaemonError> {
        self.cancel_as(id, true).await
    }

    async fn cancel_as(&self, id: &str, person: bool) -> Result<TransferReport, DaemonError> {
        let op = self.find(id)?;
        // One that ended before (the agent's own cancel too) stays as it ended.
        if person {
            let mut progress = locked(&op.progress);
            progress.stopped_by_person = matches!(
                progress.state,
                TransferState::Queued | TransferState::Running | TransferState::Verifying
            );
        }
        op.cancel.cancel();
        let mut ended = op.ended.subscribe();
        let _ = tokio::time::timeout(STOP_WAIT, ended.wait_for(|e| *e)).await;
        Ok(self.found_again(id, op).report())
    }

    pub fn list(&self) -> TransferList {
        TransferList {
            transfers: locked(&self.0).iter().map(|o| o.report()).collect(),
        }
    }

    /// The transfers under way, and apart the newest [`ENDED_RECORDED`] ended ones, each
    /// oldest first, as the session record keeps them.
    pub fn recorded(&self) -> (Vec<TransferEntry>, Vec<TransferEntry>) {
        let ops = locked(&self.0);
        let ended: Vec<&Arc<Operation>> = ops
            .iter()
            .filter(|o| !o.resumable())
            .take(ENDED_RECORDED)
            .collect();
        ops.iter()
            .rev()
            .filter(|o| o.resumable() || ended.iter().any(|e| Arc::ptr_eq(e, o)))
            .map(|o| TransferEntry {
                operation_id: o.id.clone(),
                direction: direction_name(o.direction).into(),
                remote_path: o.request.remote_path.clone(),
                local_path: o.request.local_path.clone(),
                overwrite: o.request.overwrite,
                local_root: o.request.local_root.clone(),
                started_unix_ms: unix_ms(o.started_at),
                total_bytes: o.total,
                ended: (!o.resumable()).then(|| o.report()),
            })
            .partition(|t| t.ended.is_none())
    }

    /// Stops every copy under way, keeping its partial file and its place in the record, and
    /// waits (briefly) until each has stopped writing: the daemon is handing its sessions
    /// over. A copy that completes meanwhile is done, and recorded as ended.
    pub async fn hand_over(&self) {
        let running: Vec<Arc<Operation>> = locked(&self.0)
            .iter()
            .filter(|o| o.running())
            .cloned()
            .collect();
        for op in &running {
            op.handed_over.store(true, Ordering::SeqCst);
            op.cancel.cancel();
        }
        let stopped = running.iter().map(|op| async move {
            let mut ended = op.ended.subscribe();
            let _ = tokio::time::timeout(STOP_WAIT, ended.wait_for(|e| *e)).await;
        });
        futures::future::join_all(stopped).await;
    }
}

fn direction_name(direction: TransferDirection) -> &'static str {
    match direction {
        TransferDirection::Download => "download",
        TransferDirection::Upload => "upload",
    }
}

/// Starts again, under its old id, a transfer a record names: listed at once (queued), then
/// rsync resumes from its partial file in the background, and the copy is verified as any
/// other. A transfer that cannot start again ends failed, saying why.
pub fn resume(
    session: &Arc<Session>,
    settings: Arc<Settings>,
    destinations: Arc<Destinations>,
    entry: TransferEntry,
    registry: &Registry,
) {
    let id = entry.operation_id.clone();
    let mut placeholder = Operation::recorded(session, entry);
    let (direction, req) = (placeholder.direction, placeholder.request.clone());
    let tool = match direction {
        TransferDirection::Upload => Tool::UploadStart,
        TransferDirection::Download => Tool::DownloadStart,
    };
    // Absolute, as every other report says it, also when the resume fails.
    if let Some(root) = &req.local_root {
        placeholder.local_path = Path::new(root).join(&req.local_path).display().to_string();
    }
    let placeholder = Arc::new(placeholder);
    Transfers::of(session).add(placeholder.clone());
    // Taken back under the policy in force now, which may have changed since it started,
    // and written to the trail either way.
    let refused = registry.check_policy(tool, session).err();
    let summary = format!("{} (taken back by a new daemon)", start_summary(&req));
    let outcome = refused.as_ref().map_or("ok", |e| e.code.as_str());
    registry
        .trail
        .note(session.audit_line(tool.name(), summary, outcome));
    let resumed = Resumed {
        id: id.clone(),
        started_at: placeholder.started_at,
        placeholder: Some(placeholder.clone()),
    };
    let session = session.clone();
    tokio::spawn(async move {
        // Whether or not the transfer goes on: the one before's rsync must not write on.
        stop_left_rsync(&session, &id).await;
        if let Some(refused) = refused {
            tracing::warn!(transfer = %id, "not resumed: {}", refused.message);
            not_resumed(&session, &placeholder, refused, "did not").await;
            return;
        }
        let asked = req.clone();
        match begin(
            &session,
            &settings,
            &destinations,
            direction,
            req,
            Some(resumed),
        )
        .await
        {
            Ok(_) => tracing::info!(session = %session.id, transfer = %id, "transfer resumed"),
            Err(e) => {
                let exists = [ErrorCode::LocalPathExists, ErrorCode::RemotePathExists];
                let published = match exists.contains(&e.code) && !asked.overwrite {
                    true => {
                        let daemon = (&*session, &*settings, &destinations);
                        published_already(daemon, direction, &asked).await
                    }
                    false => None,
                };
                match published {
                    Some(end) => {
                        tracing::info!(transfer = %id, "found published by the daemon before");
                        placeholder.end(&session, Ok(end)).await;
                    }
                    None => {
                        tracing::warn!(transfer = %id, "cannot resume: {}", e.message);
                        not_resumed(&session, &placeholder, e, "could not").await;
                    }
                }
            }
        }
    });
}

/// Stops the remote rsync of transfer `id` that a daemon killed outright left: it takes its
/// local rsync along, but the remote end may write on a while (or, stopped, much later): into
/// the partial a copy resumes, or, once published, into the published file itself.
async fn stop_left_rsync(session: &Session, id: &str) {
    match remote::stop_rsync(session, &rsync_marker(id)).await {
        Ok(true) => {}
        Ok(false) => tracing::warn!(
            transfer = %id,
            "the host shows no process's environment (no /proc): an rsync the daemon before \
             left there cannot be found, and may write on until it ends by itself"
        ),
        Err(e) => tracing::warn!(transfer = %id, "{}", e.message),
    }
}

/// The length of an operation id: `tr-` and 16 hex digits.
const OPERATION_ID_LEN: usize = 19;

/// Whether `id` has the form a new operation's id has: it goes into shell text on the host
/// (its rsync's mark), so a record must not smuggle anything else in.
fn is_operation_id(id: &str) -> bool {
    id.len() == OPERATION_ID_LEN
        && id.starts_with("tr-")
        && id[3..]
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What marks transfer `id`'s rsync on the host, for the relay to find where rsync's stream
/// begins and for a stop to find its processes: the same for every daemon that runs the
/// transfer, so a daemon that takes it back finds the one before's.
fn rsync_marker(id: &str) -> String {
    format!("sshmcp-rsync-{id}")
}

/// The SHA-256 and final path of a transfer the daemon before published just before it
/// died, when the record still named it as under way: its destination, which the transfer
/// did not let it replace, holds the source byte for byte.
async fn published_already(
    (session, settings, destinations): (&Session, &Settings, &Arc<Destinations>),
    direction: TransferDirection,
    req: &TransferStartRequest,
) -> Option<(String, String)> {
    let remote_path = inspect::path_bytes(&req.remote_path, "remote_path").ok()?;
    let root = crate::request::local_root(req.local_root.clone(), settings).ok()?;
    let server = format!("{}:{}", session.server_host, session.server_port);
    // The pair's partial file, which a publish cut off between its link and its removal
    // leaves, goes too: no copy will resume from it. The destination is claimed first: a
    // transfer of the same pair started meanwhile owns that partial (then nothing is
    // concluded here).
    match direction {
        TransferDirection::Download => {
            let (size, _) = remote::source_size(session, &remote_path).await.ok()?;
            let destination = local::destination(&root, &req.local_path, true).ok()?;
            let _claim = destinations
                .claim(Target::Local(destination.identity().ok()?))
                .ok()?;
            let final_path = destination.final_path.display().to_string();
            let (copy, source) = tokio::join!(
                local_sha256(std::fs::File::open(&destination.final_path)),
                remote::sha256(session, &remote_path, size)
            );
            let copy = copy
                .ok()
                .filter(|copy| source.ok().as_ref() == Some(copy))?;
            let partial =
                local::partial_path(&root, &server, &remote_path, &destination.final_path);
            if let Ok(partial) = partial {
                let _ = std::fs::remove_file(partial);
            }
            Some((copy, final_path))
        }
        TransferDirection::Upload => {
            let source = local::source(&root, &req.local_path).ok()?;
            let destination = remote::destination(session, &remote_path, true)
                .await
                .ok()?;
            let _claim = destinations
                .claim(Target::Remote(destination.identity.clone()))
                .ok()?;
            let (copy, from) = tokio::join!(
                remote::sha256(session, &destination.path, source.size),
                local_sha256(source.again())
            );
            let copy = copy.ok().filter(|copy| from.ok().as_ref() == Some(copy))?;
            let partial = remote::Partial::of(&server, &source.path, &destination.path);
            let _ = remote::discard(session, &partial).await;
            Some((copy, inspect::remote_text(&destination.path).0))
        }
    }
}

impl Operation {
    /// The operation a record names, as it was started, not yet running again.
    fn recorded(session: &Session, entry: TransferEntry) -> Self {
        let direction = match entry.direction.as_str() {
            "upload" => TransferDirection::Upload,
            _ => TransferDirection::Download,
        };
        let req = TransferStartRequest {
            // Never checked: the session is the daemon's own, and the record holds no key.
            auth: sshmcp_proto::session::SessionAuth {
                session_id: session.id.clone(),
                session_key: String::new(),
            },
            remote_path: entry.remote_path,
            local_path: entry.local_path,
            overwrite: entry.overwrite,
            local_root: entry.local_root,
        };
        let resumed = Resumed {
            id: entry.operation_id,
            started_at: from_unix_ms(entry.started_unix_ms),
            placeholder: None,
        };
        let cancel = session.host.closing.child_token();
        Self::new(resumed, direction, req, entry.total_bytes, cancel)
    }

    /// A transfer that ended under the daemon before: it answers the last report it gave.
    fn told(session: &Session, entry: TransferEntry, report: TransferReport) -> Self {
        let mut op = Self::recorded(session, entry);
        locked(&op.progress).ended_at = Some(SystemTime::now());
        op.ended.send_replace(true);
        op.told = Some(report);
        op
    }
}

/// Ends a transfer a starting daemon took back but `did_not` (or `could not`) resume, why.
async fn not_resumed(session: &Session, placeholder: &Operation, why: DaemonError, did_not: &str) {
    let why = DaemonError::new(
        why.code,
        format!(
            "the daemon restarted and {did_not} resume this transfer: {}",
            why.message
        ),
    );
    placeholder.end(session, Err(failed(why))).await;
}

/// The id and start of a transfer (one taken over from the daemon before, or a new one), and
/// the operation listed in its place until it starts.
struct Resumed {
    id: String,
    started_at: SystemTime,
    placeholder: Option<Arc<Operation>>,
}

/// What one transfer copies from where to where, once both ends were checked.
enum Plan {
    Download {
        /// The remote source.
        source: Vec<u8>,
        /// Its permission bits.
        mode: u32,
        /// The private local partial file.
        partial: PathBuf,
        destination: local::Destination,
    },
    Upload {
        source: local::Source,
        /// The remote destination, absolute, its directory resolved.
        destination: Vec<u8>,
        /// The dot-file beside it that the copy goes into.
        partial: remote::Partial,
    },
}

// A call answered so adds nothing to its trail line but how it ended.
impl crate::audit::Answer for sshmcp_proto::transfer::TransferReport {}
impl crate::audit::Answer for sshmcp_proto::transfer::TransferList {}

/// `download_start` and `upload_start`: checks the source and the destination, then copies
/// in the background.
pub async fn start(
    session: &Arc<Session>,
    settings: &Settings,
    destinations: &Arc<Destinations>,
    direction: TransferDirection,
    req: TransferStartRequest,
) -> Result<TransferReport, DaemonError> {
    begin(session, settings, destinations, direction, req, None).await
}

async fn begin(
    session: &Arc<Session>,
    settings: &Settings,
    destinations: &Arc<Destinations>,
    direction: TransferDirection,
    mut req: TransferStartRequest,
    resumed: Option<Resumed>,
) -> Result<TransferReport, DaemonError> {
    let counted = Transfers::of(session)
        .started(settings.max_transfers)
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
    let remote_path = inspect::path_bytes(&req.remote_path, "remote_path")?;
    // Said at once, not by the copy: on macOS the rsync a launcher's PATH finds is too old.
    rsync::program()
        .await
        .map_err(|why| DaemonError::new(ErrorCode::TransferFailed, why))?;
    let root = crate::request::local_root(req.local_root.clone(), settings)?;
    // A resume must find the same files whatever the next daemon's default root is.
    req.local_root = Some(root.to_string_lossy().into_owned());
    let (plan, total, claim) =
        plan(session, destinations, direction, &req, &root, remote_path).await?;
    let placeholder = resumed.as_ref().and_then(|r| r.placeholder.clone());
    let overwrite = req.overwrite;
    let op = operation(session, resumed, direction, req, total, &plan)?;
    let op = Arc::new(op);
    match placeholder {
        Some(placeholder) => Transfers::of(session).replace(&placeholder, op.clone()),
        None => Transfers::of(session).add(op.clone()),
    }
    session.record.ask();
    let (session, job) = (session.clone(), op.clone());
    tokio::spawn(async move {
        let outcome = copy(&session, &job, &plan, overwrite).await;
        // Free first: a caller that sees the end may start the same destination at once.
        drop((claim, counted));
        job.end(&session, outcome).await;
    });
    Ok(op.report())
}

/// What a transfer copies from where to where, checked on both ends, its size, and the claim
/// on its destination (no two transfers write one file).
async fn plan(
    session: &Session,
    destinations: &Arc<Destinations>,
    direction: TransferDirection,
    req: &TransferStartRequest,
    root: &std::path::Path,
    remote_path: Vec<u8>,
) -> Result<(Plan, u64, Claim), DaemonError> {
    let server = format!("{}:{}", session.server_host, session.server_port);
    Ok(match direction {
        TransferDirection::Download => {
            if !rsync::fetchable(&remote_path) {
                return Err(DaemonError::new(
                    ErrorCode::InvalidArguments,
                    "rsync cannot fetch a file whose name holds both a backslash and one of * ? [: copy \
                     or rename it on the host first (exec)",
                ));
            }
            // A local_path its words make wrong is refused before the host is asked.
            local::confine(root, &req.local_path)?;
            let (total, mode) = remote::source_size(session, &remote_path).await?;
            let destination = local::destination(root, &req.local_path, req.overwrite)?;
            let claim = destinations.claim(Target::Local(destination.identity()?))?;
            let partial = local::partial_path(root, &server, &remote_path, &destination.final_path)
                .map_err(|e| {
                    DaemonError::new(
                        ErrorCode::InvalidLocalPath,
                        format!("cannot make the partial file's directory: {e}"),
                    )
                })?;
            let plan = Plan::Download {
                source: remote_path,
                mode,
                partial,
                destination,
            };
            (plan, total, claim)
        }
        TransferDirection::Upload => {
            let source = local::source(root, &req.local_path)?;
            let remote::Destination { path, identity } =
                remote::destination(session, &remote_path, req.overwrite).await?;
            let claim = destinations.claim(Target::Remote(identity))?;
            let partial = remote::Partial::of(&server, &source.path, &path);
            let total = source.size;
            let plan = Plan::Upload {
                source,
                destination: path,
                partial,
            };
            (plan, total, claim)
        }
    })
}

/// The operation of a transfer: its id (a new one, or the one a resumed transfer had), its
/// cancel, and the paths as resolved, for the reports.
fn operation(
    session: &Session,
    resumed: Option<Resumed>,
    direction: TransferDirection,
    req: TransferStartRequest,
    total: u64,
    plan: &Plan,
) -> Result<Operation, DaemonError> {
    let resumed = match resumed {
        Some(resumed) => resumed,
        None => Resumed {
            id: crate::random::nonce("tr-")
                .map_err(|e| DaemonError::internal(format!("no randomness: {e}")))?
                [..OPERATION_ID_LEN]
                .to_string(),
            started_at: SystemTime::now(),
            placeholder: None,
        },
    };
    let placeholder = resumed.placeholder.clone();
    // A cancel of the placeholder is a cancel of the transfer.
    let cancel = match &placeholder {
        Some(placeholder) => placeholder.cancel.clone(),
        None => session.host.closing.child_token(),
    };
    let mut op = Operation::new(resumed, direction, req, total, cancel);
    // A caller waiting on the placeholder (transfer_status with wait_seconds) waits for the
    // transfer's end.
    if let Some(placeholder) = &placeholder {
        op.ended = placeholder.ended.clone();
    }
    // The paths as resolved, for the reports.
    (op.local_path, op.remote_path) = match plan {
        Plan::Download {
            source,
            destination,
            partial,
            ..
        } => {
            op.partial = Some(partial.clone());
            (destination.final_path.display().to_string(), source.clone())
        }
        Plan::Upload {
            source,
            destination,
            ..
        } => (source.path.display().to_string(), destination.clone()),
    };
    Ok(op)
}

type Outcome = Result<(String, String), (TransferState, DaemonError)>;

/// A slot of the session's channels, held while it is kept.
type Permit = tokio::sync::OwnedSemaphorePermit;

fn cancelled() -> (TransferState, DaemonError) {
    (
        TransferState::Cancelled,
        DaemonError::new(ErrorCode::TransferFailed, "cancelled"),
    )
}

fn failed(e: DaemonError) -> (TransferState, DaemonError) {
    (TransferState::Failed, e)
}

/// The copy, the verification and the publishing of one transfer.
async fn copy(session: &Session, op: &Operation, plan: &Plan, overwrite: bool) -> Outcome {
    // Before the slot: the check of an upload's partial is a program of its own, which takes
    // a channel.
    let checked = tokio::select! {
        checked = prepare_partial(session, plan, op.total) => checked,
        _ = op.cancel.cancelled() => return Err(cancelled()),
    };
    checked.map_err(|e| failed(remote::step_failed("cannot check the partial file", e)))?;
    // The command slot is kept to the end, through the hashing on the host: each transfer
    // then holds at most one of the slots commands may hold, whatever step it is at.
    let (_command_slot, slot) = slots(session, op).await?;
    op.set_state(TransferState::Running);
    let began = Instant::now();
    let reused = run_rsync(session, op, plan, slot).await?;
    op.copied(reused);
    let copy_hash = verify(session, op, plan, began, reused).await?;
    if op.cancel.is_cancelled() {
        return Err(cancelled());
    }
    let final_path = publish(session, op, plan, overwrite, &copy_hash).await?;
    Ok((copy_hash, final_path))
}

/// The slots rsync's channel takes: one of those commands may hold, and one of the session's.
async fn slots(
    session: &Session,
    op: &Operation,
) -> Result<(Permit, Permit), (TransferState, DaemonError)> {
    // rsync's ssh opens a channel on the master like any command: it takes one of the
    // session's slots (one of those commands may hold), so commands and transfers together
    // stay within sshd's MaxSessions.
    let slots = async {
        let by = tokio::time::Instant::now() + SLOT_WAIT;
        let host = &session.host;
        let command_slot = crate::remote::channel::acquire_slot(&host.command_slots, by).await?;
        let slot = crate::remote::channel::acquire_slot(&host.slots, by).await?;
        Ok::<_, crate::remote::channel::OpenError>((command_slot, slot))
    };
    tokio::select! {
        slot = slots => slot.map_err(|_| failed(DaemonError::new(
            ErrorCode::ChannelsBusy,
            "nothing was copied: no channel of the session came free in time (running \
             commands hold them all); a retry is safe once one ends",
        ))),
        _ = op.cancel.cancelled() => Err(cancelled()),
    }
}

/// The copy itself: rsync run (again while sshd refuses its channel, as a command waits for
/// one), its failure told apart. Answers the bytes it reused from an earlier partial.
async fn run_rsync(
    session: &Session,
    op: &Operation,
    plan: &Plan,
    slot: Permit,
) -> Result<u64, (TransferState, DaemonError)> {
    let ends = match plan {
        Plan::Download {
            source, partial, ..
        } => rsync::Ends::Download {
            remote: source,
            partial,
        },
        Plan::Upload {
            source, partial, ..
        } => rsync::Ends::Upload {
            source: source.file.as_raw_fd(),
            partial: &partial.path,
        },
    };
    let server = (session.server_host.as_str(), session.server_port);
    let marker = rsync_marker(&op.id);
    let give_up = Instant::now() + SLOT_WAIT;
    let mut pause = REFUSED_PAUSE;
    let refusals = kill_channel::Refusals::default();
    let host = &session.host;
    let _copying = Counted::new(&host.copies);
    let copied = loop {
        // Beside other work, the kill channel holds its session first (see `kill_channel`).
        if host.work_beside(0, 1) {
            tokio::select! {
                () = KillChannel::ensure(host, give_up.into()) => {}
                _ = op.cancel.cancelled() => return Err(cancelled()),
            }
        }
        let copied = rsync::copy(
            &session.host.control_path,
            server,
            &marker,
            ends,
            (&op.bytes, op.total),
            &op.cancel,
        )
        .await;
        if !matches!(copied, Err(rsync::Failure::Refused)) || Instant::now() + pause >= give_up {
            break copied;
        }
        // The server allows fewer sessions than the slots (see `kill_channel`): the copy
        // waits for one as a command does.
        tracing::debug!(
            "transfer {}: sshd refused rsync's channel; trying again",
            op.id
        );
        let _ = kill_channel::refused(host, &refusals, 1);
        op.set_state(TransferState::Queued);
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = op.cancel.cancelled() => return Err(cancelled()),
        }
        op.set_state(TransferState::Running);
        pause = (pause * 2).min(REFUSED_PAUSE_MAX);
    };
    drop((slot, _copying));
    let failure = match copied {
        Ok(reused) => return Ok(reused),
        Err(rsync::Failure::Cancelled) => {
            // Ended only once nothing writes the partial any more: a retry resumes from it.
            // A closing session cannot run this, and its master ends the remote rsync anyway.
            match remote::stop_rsync(session, &marker).await {
                // Nothing writes the partial any more: what it holds is what arrived. Asked
                // within what is left of the cancel's wait, which answers once this ends.
                Ok(true) => count_remote_partial(session, op, plan, STOP_WAIT / 2).await,
                Ok(false) => {}
                Err(e) => tracing::warn!("transfer {}: {}", op.id, e.message),
            }
            return Err(cancelled());
        }
        Err(rsync::Failure::Refused) => DaemonError::new(
            ErrorCode::ChannelsBusy,
            "nothing was copied: no session of the server came free in time (sshd refused \
             rsync's channel: running commands hold every session it allows); a retry is safe \
             once one ends",
        ),
        Err(rsync::Failure::Exited(code, said)) => {
            count_remote_partial(session, op, plan, Duration::from_secs(5)).await;
            exit_error(session, code, &said, &partial_shown(plan)).await
        }
        Err(rsync::Failure::Start(e)) => {
            DaemonError::new(ErrorCode::TransferFailed, format!("cannot run rsync: {e}"))
        }
    };
    Err(failed(failure))
}

/// An upload whose rsync stopped counts what its partial holds, which a retry of the same
/// pair resumes from, as a download counts its local partial; a host that cannot tell in
/// time leaves the count rsync's progress gave.
async fn count_remote_partial(session: &Session, op: &Operation, plan: &Plan, within: Duration) {
    if let Plan::Upload { partial, .. } = plan {
        match remote::partial_size(session, partial, within).await {
            Ok(size) => op.bytes.store(size.min(op.total), Ordering::Relaxed),
            Err(e) => tracing::debug!("transfer {}: {}", op.id, e.message),
        }
    }
}

/// The copy's SHA-256, once it equals the source's (hashed after the copy); a copy that
/// differs is discarded.
async fn verify(
    session: &Session,
    op: &Operation,
    plan: &Plan,
    began: Instant,
    reused: u64,
) -> Result<String, (TransferState, DaemonError)> {
    let copied_at = Instant::now();
    let copy_hash = async {
        match plan {
            Plan::Download { partial, .. } => {
                // rsync skips what is no regular file and still succeeds: the partial must
                // be one.
                if !is_file(partial) {
                    return Err(DaemonError::new(
                        ErrorCode::InvalidRemoteType,
                        "remote_path stopped being a regular file during the copy",
                    ));
                }
                local_sha256(std::fs::File::open(partial)).await
            }
            Plan::Upload { partial, .. } => remote::sha256(session, &partial.path, op.total).await,
        }
    };
    // The source is hashed after the copy, not while it runs: a change to it during the
    // copy then shows as a mismatch, however the two reads fell.
    let source_hash = async {
        match plan {
            Plan::Download { source, .. } => remote::sha256(session, source, op.total).await,
            Plan::Upload { source, .. } => local_sha256(source.again()).await,
        }
    };
    let (source_hash, copy_hash) = tokio::select! {
        hashes = async { tokio::join!(source_hash, copy_hash) } => hashes,
        _ = op.cancel.cancelled() => return Err(cancelled()),
    };
    let (source_hash, copy_hash) = (source_hash.map_err(failed)?, copy_hash.map_err(failed)?);
    tracing::info!(
        "transfer {}: copied in {:.2} s ({} bytes reused), verified in {:.2} s",
        op.id,
        (copied_at - began).as_secs_f64(),
        reused,
        copied_at.elapsed().as_secs_f64()
    );
    if source_hash != copy_hash {
        // A retry would resume from it, and rsync takes a partial as long as the source for
        // done: only a fresh copy can pass.
        let discarded = match plan {
            Plan::Download { partial, .. } => std::fs::remove_file(partial).is_ok(),
            Plan::Upload { partial, .. } => remote::discard(session, partial).await.is_ok(),
        };
        return Err(failed(not_published(
            "the copy's SHA-256 differs from the source's",
            discarded,
        )));
    }
    Ok(copy_hash)
}

/// Puts the verified copy at its destination: its final path.
async fn publish(
    session: &Session,
    op: &Operation,
    plan: &Plan,
    overwrite: bool,
    copy_hash: &str,
) -> Result<String, (TransferState, DaemonError)> {
    Ok(match plan {
        Plan::Download {
            partial,
            destination,
            mode,
            ..
        } => {
            local::give_copied_mode(partial, *mode).map_err(|e| {
                failed(DaemonError::new(
                    ErrorCode::TransferFailed,
                    format!("cannot set the copy's mode: {e}"),
                ))
            })?;
            let published = destination
                .publish(partial, overwrite, copy_hash, op.cancel.clone())
                .await;
            match published {
                // A copy across file systems that stopped; a mismatch or a destination that
                // appeared says so whatever came meanwhile.
                Err(e) if e.code == ErrorCode::TransferFailed && op.cancel.is_cancelled() => {
                    return Err(cancelled());
                }
                published => published.map_err(failed)?,
            }
            destination.final_path.display().to_string()
        }
        Plan::Upload {
            destination,
            partial,
            ..
        } => {
            remote::publish(session, destination, partial, overwrite)
                .await
                .map_err(failed)?;
            // As the report gives `remote_path`, in its encoding.
            inspect::remote_text(destination).0
        }
    })
}

/// Where a copy's partial file is, for a person to find it (what arrived stays there for a
/// retry, and takes its space meanwhile): on the host for an upload.
fn partial_shown(plan: &Plan) -> String {
    match plan {
        Plan::Download { partial, .. } => partial.display().to_string(),
        // A name that is no UTF-8 shows its other bytes escaped (`\xff`), as a person can
        // still type it.
        Plan::Upload { partial, .. } => match std::str::from_utf8(&partial.path) {
            Ok(path) => format!("{path} on the host"),
            Err(_) => format!("{} on the host", partial.path.escape_ascii()),
        },
    }
}

/// Why rsync exited badly: the master's end (a master killed mid-copy closes its socket a
/// moment before it shows as exited), or rsync's own failure, naming the partial file kept.
async fn exit_error(session: &Session, code: i32, said: &str, partial: &str) -> DaemonError {
    let lost = match session.host.master.get() {
        Some(master) => master.exited_within(MASTER_EXIT_WAIT).await,
        None => false,
    };
    match lost {
        true => crate::remote::lost_error(),
        false => DaemonError::new(
            ErrorCode::TransferFailed,
            format!(
                "rsync failed ({}){}; what arrived is kept for a retry in {partial} (remove \
                 it to give its space back)",
                rsync::exit_meaning(code),
                match said {
                    "" => String::new(),
                    said => format!(": {said}"),
                }
            ),
        ),
    }
}

/// The name part that tells one transfer pair's partial file from another's: the SHA-256 of
/// the server, the source and the destination (each length-prefixed), 32 hex digits.
fn pair_tag(parts: [&[u8]; 3]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    crate::random::hex(&hash.finalize()[..16])
}

/// `verification_failed`: `why`, and whether the partial was removed (a retry would resume
/// from it, and rsync takes a partial as long as the source for done).
pub(super) fn not_published(why: &str, removed: bool) -> DaemonError {
    DaemonError::new(
        ErrorCode::VerificationFailed,
        match removed {
            true => format!(
                "{why}; nothing was published and the copy was removed (a retry starts afresh)"
            ),
            false => format!("{why}; nothing was published"),
        },
    )
}

/// Removes a partial no copy can resume from, before the copy: one longer than the source
/// holds no prefix of it (the source shrank since a copy stopped), and rsync, which only
/// appends to a shorter one, would leave it to fail the verification; one with a second link
/// is the file a publish linked into place before it was cut off, and rsync would write into
/// that file. An upload's partial is then made ready on the host (`remote::prepare_partial`).
async fn prepare_partial(session: &Session, plan: &Plan, size: u64) -> Result<(), DaemonError> {
    use std::os::unix::fs::MetadataExt;
    match plan {
        Plan::Download { partial, .. } => {
            let unusable = std::fs::symlink_metadata(partial)
                .is_ok_and(|m| m.file_type().is_file() && (m.len() > size || m.nlink() > 1));
            match unusable {
                true => match std::fs::remove_file(partial) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        Err(DaemonError::new(ErrorCode::TransferFailed, e.to_string()))
                    }
                    _ => Ok(()),
                },
                false => Ok(()),
            }
        }
        Plan::Upload {
            partial, source, ..
        } => {
            let mode = source.file.metadata().map(|m| m.mode()).map_err(|e| {
                DaemonError::new(
                    ErrorCode::TransferFailed,
                    format!("cannot read the local file's mode: {e}"),
                )
            })?;
            remote::prepare_partial(session, partial, size, mode).await
        }
    }
}

fn is_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

/// A local file's SHA-256, read off the async threads.
async fn local_sha256(opened: std::io::Result<std::fs::File>) -> Result<String, DaemonError> {
    let hashed = tokio::task::spawn_blocking(move || -> std::io::Result<String> {
        let mut file = local::FromStart::new(opened?);
        let hash = local::sha256_of(&mut file, None, &|| false)?;
        Ok(hash.expect("never stopped"))
    })
    .await;
    match hashed {
        Ok(Ok(hex)) => Ok(hex),
        Ok(Err(e)) => Err(DaemonError::new(
            ErrorCode::TransferFailed,
            format!("cannot read the local file to hash it: {e}"),
        )),
        Err(e) => Err(DaemonError::internal(format!("the hash task failed: {e}"))),
    }
}

/// The operation of `download_start` or `upload_start` (`$direction`): one start. A start cut
/// short (its call dropped) leaves nothing to clean: its destination's claim goes with it, and
/// the copy is spawned after the last wait, so a start either made a listed transfer or none.
macro_rules! transfer_start_tool {
    ($tool:ident, $direction:ident) => {
        impl crate::operation::Operation for sshmcp_proto::service::tools::$tool {
            fn summary(req: &sshmcp_proto::transfer::TransferStartRequest) -> String {
                crate::transfers::start_summary(req)
            }

            async fn run(
                req: sshmcp_proto::transfer::TransferStartRequest,
                session: std::sync::Arc<crate::session::Session>,
                registry: &crate::session::Registry,
            ) -> Result<sshmcp_proto::transfer::TransferReport, sshmcp_proto::DaemonError> {
                let destinations = registry.shared::<crate::transfers::Destinations>();
                let settings = &registry.settings;
                let direction = sshmcp_proto::transfer::TransferDirection::$direction;
                crate::transfers::start(&session, settings, &destinations, direction, req).await
            }
        }
    };
}
pub(crate) use transfer_start_tool;

/// What a transfer's start says in the trail (and a start taken back by a new daemon).
pub(crate) fn start_summary(req: &TransferStartRequest) -> String {
    format!(
        "remote {} local {}",
        crate::audit::path(&req.remote_path),
        req.local_path
    )
}

impl Transfers {
    /// Counts a transfer as active until the returned guard goes, if fewer than `max` are:
    /// the check and the count are one step, so transfers started together cannot pass it
    /// all at once.
    fn started(self: &Arc<Self>, max: u32) -> Option<Active> {
        self.2
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Active(self.clone()))
    }

    /// This session's transfers.
    pub fn of(session: &Session) -> Arc<Transfers> {
        session.work::<Transfers>()
    }
}

/// A transfer as the session record keeps it (oldest first, its parts `transfers` under way
/// and `ended_transfers`): its request, less the caller's key, and once it ended its last
/// report (so that a caller polling across a restart learns how it ended).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TransferEntry {
    pub operation_id: String,
    /// `download` or `upload`.
    pub direction: String,
    pub remote_path: sshmcp_proto::inspect::RemotePath,
    pub local_path: String,
    pub overwrite: bool,
    pub local_root: Option<String>,
    pub started_unix_ms: u64,
    /// The source's size as last learned, which a report of the copy taken back gives until
    /// the copy learns it again (0 in a record written before it was kept).
    #[serde(default)]
    pub total_bytes: u64,
    /// Its last report once it ended; none while under way (in a record written before ended
    /// transfers were kept, every transfer is under way).
    #[serde(default)]
    pub ended: Option<sshmcp_proto::transfer::TransferReport>,
}

/// The session record's parts of the transfers: those under way, and those that ended lately.
const UNDER_WAY_PART: &str = "transfers";
const ENDED_PART: &str = "ended_transfers";

impl Work for Transfers {
    fn count(&self, summary: &mut SessionSummary) {
        summary.active_transfers = self.2.load(Ordering::Relaxed);
    }

    /// An ended transfer's report is only shown again, never acted on: its paths and message
    /// are kept as the agent may read them, redacted. Those of a transfer under way stay as
    /// they are, for the next daemon to resume it. Apart from the ones under way, so that a
    /// daemon older than `ended_transfers` (which reads none) resumes none of them.
    fn record(&self, entry: &mut Entry, redact: &dyn Fn(&str) -> String) {
        let (under_way, mut ended) = self.recorded();
        for transfer in &mut ended {
            let asked = [&mut transfer.local_path, &mut transfer.remote_path.path];
            let Some(report) = transfer.ended.as_mut() else {
                continue;
            };
            for text in asked
                .into_iter()
                .chain([&mut report.local_path, &mut report.remote_path])
                .chain(report.final_path.as_mut())
                .chain(report.error.as_mut().map(|e| &mut e.message))
            {
                *text = redact(text);
            }
        }
        entry.put(UNDER_WAY_PART, &under_way);
        entry.put(ENDED_PART, &ended);
    }

    fn adopt(&self, _: &Session, entry: &mut Entry, _: bool) {
        let ended: Vec<TransferEntry> = entry.take(ENDED_PART);
        let (mut taken, refused): (Vec<_>, Vec<_>) = entry
            .take::<TransferEntry>(UNDER_WAY_PART)
            .into_iter()
            .chain(ended)
            .partition(|t| is_operation_id(&t.operation_id));
        // Listed again in the order they started.
        taken.sort_by_key(|t| t.started_unix_ms);
        for transfer in refused {
            tracing::warn!(
                "recorded transfer id {:?} is not one this daemon makes; not taken back",
                transfer.operation_id
            );
        }
        *locked(&self.1) = taken;
    }

    fn resume(&self, session: &Arc<Session>, registry: &Arc<Registry>) {
        for transfer in std::mem::take(&mut *locked(&self.1)) {
            if let Some(report) = transfer.ended.clone() {
                self.add(Arc::new(Operation::told(session, transfer, report)));
                continue;
            }
            let (settings, destinations) = (registry.settings.clone(), registry.shared());
            resume(session, settings, destinations, transfer, registry);
        }
    }

    fn show(&self, view: &mut SessionView) {
        let listed = self.list().transfers.into_iter();
        view.transfers = listed.filter(|t| t.ended_at.is_none()).collect();
    }

    fn hand_over(&self) -> BoxFuture<'_, ()> {
        Box::pin(Transfers::hand_over(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resumed download's rate counts what its copy moved, not the bytes its partial held
    /// already, which its `bytes_transferred` does count.
    #[test]
    fn a_resumed_downloads_rate_counts_only_what_moved() {
        let dir = tempfile::tempdir().unwrap();
        let partial = dir.path().join("p.part");
        std::fs::write(&partial, vec![0u8; 600]).unwrap();
        let request = TransferStartRequest {
            auth: sshmcp_proto::session::SessionAuth {
                session_id: "s1".into(),
                session_key: String::new(),
            },
            remote_path: sshmcp_proto::inspect::RemotePath {
                path: "/r".into(),
                encoding: sshmcp_proto::exec::Encoding::Utf8,
            },
            local_path: "l".into(),
            overwrite: false,
            local_root: None,
        };
        let resumed = Resumed {
            id: "tr-0123456789abcdef".into(),
            started_at: SystemTime::now(),
            placeholder: None,
        };
        let mut op = Operation::new(
            resumed,
            TransferDirection::Download,
            request,
            1000,
            CancellationToken::new(),
        );
        op.partial = Some(partial);
        op.set_state(TransferState::Running);
        op.bytes.store(1000, Ordering::Relaxed);
        op.record_end(Ok(("hash".into(), "/l".into())));
        let ran = locked(&op.progress).ran_for.unwrap().as_secs_f64();
        let report = op.report();
        assert_eq!(report.bytes_transferred, 1000);
        let moved = report.rate * ran;
        assert!(
            (moved - 400.0).abs() < 1.0,
            "{} B/s over {ran} s",
            report.rate
        );
    }

    /// A transfer as every daemon so far wrote it in the session record reads back, and is
    /// written again, field for field (one written before `total_bytes` and `ended` were kept
    /// reads as under way, size unknown): records cross daemon versions.
    #[test]
    fn a_recorded_transfer_keeps_its_layout() {
        let written = serde_json::json!({
            "operation_id": "tr-0123456789abcdef", "direction": "upload",
            "remote_path": {"path": "/tmp/x", "encoding": "utf-8"}, "local_path": "x",
            "overwrite": true, "local_root": null, "started_unix_ms": 2, "total_bytes": 4096,
            "ended": null
        });
        let entry: TransferEntry = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(serde_json::to_value(&entry).unwrap(), written);
        let mut older = written.as_object().unwrap().clone();
        older.remove("total_bytes");
        older.remove("ended");
        let entry: TransferEntry = serde_json::from_value(older.into()).unwrap();
        assert_eq!((entry.total_bytes, entry.ended.is_none()), (0, true));
    }

    /// A pair's tag names the server, the source and the destination: each part counts, and
    /// where one part ends is part of it (`ab`+`c` is not `a`+`bc`).
    #[test]
    fn only_ids_of_the_daemons_own_form_are_operation_ids() {
        assert!(is_operation_id("tr-0123456789abcdef"));
        for bad in [
            "tr-0123456789abcde",
            "tr-0123456789abcdef0",
            "tr-0123456789ABCDEF",
            "tr-01234567;touch x",
            "xx-0123456789abcdef",
            "tr-0123456789abcdé",
        ] {
            assert!(!is_operation_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_pair_tag_tells_every_part_and_its_bounds() {
        let tag = pair_tag([b"h:22", b"/src", b"/dst"]);
        assert_eq!(tag.len(), 32);
        assert_eq!(tag, pair_tag([b"h:22", b"/src", b"/dst"]));
        for other in [
            pair_tag([b"h:23", b"/src", b"/dst"]),
            pair_tag([b"h:22", b"/srd", b"/dst"]),
            pair_tag([b"h:22", b"/src", b"/dsu"]),
            pair_tag([b"h:22/", b"src", b"/dst"]),
        ] {
            assert_ne!(tag, other);
        }
    }
}
