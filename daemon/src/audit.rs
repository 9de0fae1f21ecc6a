//! The audit trail: one JSON line per call that reaches a host or changes one, appended to
//! `<state dir>/audit.jsonl` (0600) by a thread of its own, so a call never waits on the disk,
//! and rotated by size. A line that cannot be written (a full disk) is logged once per spell
//! and counted, never turned into a failed call. What each tool's line says of its call is
//! decided here, from the request: the command's first bytes, or the paths, sizes and ids;
//! never a session key and never file contents.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use sshmcp_proto::audit::{
    AUDIT_FILE, AUDIT_GENERATIONS, AUDIT_MESSAGE_BYTES, AUDIT_ROTATE_BYTES, AUDIT_SUMMARY_BYTES,
    AuditEntry, PENDING_FILE, PendingLine, generation,
};
use sshmcp_proto::inspect::RemotePath;

/// The size past which the journal of calls under way is written afresh.
const JOURNAL_COMPACT_BYTES: u64 = 1 << 20;

/// How long the writer gathers lines after the first of a batch.
const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(20);

/// Notes waiting for the writer (a call's beginning and its line: two a call); beyond this a
/// stalled disk loses lines (counted), not calls.
const QUEUE: usize = 8192;

/// How the trail fared since the daemon started.
#[derive(Debug, Default)]
pub struct Counts {
    pub written: AtomicU64,
    /// Lines a write failed for (a full or read-only disk).
    pub failed: AtomicU64,
    /// Lines dropped because the writer fell `QUEUE` lines behind.
    pub dropped: AtomicU64,
}

impl Counts {
    /// The counts as `sshmcp watch` shows them.
    pub fn snapshot(&self) -> sshmcp_proto::overview::AuditCounts {
        sshmcp_proto::overview::AuditCounts {
            written: self.written.load(Ordering::Relaxed),
            lost: self.failed.load(Ordering::Relaxed) + self.dropped.load(Ordering::Relaxed),
        }
    }
}

/// The daemon's end of the trail; cheap to share.
pub struct Trail {
    /// Taken by [`Trail::close`]: the writer drains what is queued, then ends.
    queue: std::sync::Mutex<Option<SyncSender<Note>>>,
    /// The next call's number in the journal of calls under way.
    next_call: AtomicU64,
    /// This daemon's journal of calls under way, written by each call as it begins and ends
    /// and by the writer once the call's line is in the trail (none when it cannot be opened:
    /// a death then loses the lines of the calls under way).
    journal: Arc<std::sync::Mutex<Option<Journal>>>,
    /// Disconnected once the writer thread has ended.
    writer_done: std::sync::Mutex<Receiver<()>>,
    pub counts: Arc<Counts>,
}

impl Trail {
    /// Starts the writer thread for `<state_dir>/audit.jsonl`, after writing the lines of the
    /// calls a daemon before this one never ended (it died under them).
    pub fn start(state_dir: &Path) -> std::io::Result<Self> {
        let (queue, lines) = std::sync::mpsc::sync_channel(QUEUE);
        let counts = Arc::new(Counts::default());
        let live = state_dir.join(AUDIT_FILE);
        // Opened now, so the daemon's descriptors do not change with its first call; a file
        // that cannot be opened yet is tried again (and reported) at the first line.
        let journal = Arc::new(std::sync::Mutex::new(None));
        let mut writer = Writer {
            file: crate::logfile::open_private(&live)
                .ok()
                .map(|(file, _)| file),
            live,
            counts: counts.clone(),
            failing: false,
            journal: journal.clone(),
        };
        writer.recover(state_dir);
        *locked(&journal) = Journal::open(state_dir);
        let (done, writer_done) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("audit".into())
            .spawn(move || {
                writer.run(lines);
                drop(done);
            })?;
        Ok(Self {
            queue: std::sync::Mutex::new(Some(queue)),
            next_call: AtomicU64::new(0),
            journal,
            writer_done: std::sync::Mutex::new(writer_done),
            counts,
        })
    }

    /// Notes in the journal a call that begins, with the line the trail keeps should it never
    /// end (the daemon dying under it), before it reaches a host: its number, for
    /// [`Trail::record`] at its end. One append to a file already open.
    pub fn begin(&self, entry: AuditEntry) -> u64 {
        let call = self.next_call.fetch_add(1, Ordering::Relaxed);
        let mut bytes = Vec::with_capacity(256);
        line(
            &mut bytes,
            &PendingLine::Begun {
                begun: call,
                entry: Box::new(entry),
            },
        );
        if let Some(journal) = locked(&self.journal).as_mut() {
            journal.append(&bytes);
            journal.under_way.insert(call, bytes);
        }
        call
    }

    /// Notes call `call`'s line (from [`Trail::begin`]) in the journal before the call
    /// answers, so a daemon that dies right after leaves it with its real outcome, and queues
    /// it for the trail; never waits on the writer.
    pub fn record(&self, call: u64, entry: AuditEntry) {
        let entry = Box::new(entry);
        let mut bytes = Vec::with_capacity(256);
        line(
            &mut bytes,
            &PendingLine::Finished {
                finished: call,
                entry: entry.clone(),
            },
        );
        if let Some(journal) = locked(&self.journal).as_mut()
            && journal.under_way.contains_key(&call)
        {
            journal.append(&bytes);
            journal.under_way.insert(call, bytes);
        }
        let queue = locked(&self.queue);
        let Some(queue) = queue.as_ref() else {
            // The daemon is stopping: the trail is closed.
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        match queue.try_send(Note(call, entry)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                if self.counts.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!("the audit trail's writer fell behind; lines are being lost");
                }
            }
            Err(TrySendError::Disconnected(_)) => {
                self.counts.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl Trail {
    /// Queues a line that is no call of a caller's (the daemon's start, a reload, a transfer
    /// a starting daemon took back); never waits.
    pub fn note(&self, entry: AuditEntry) {
        let call = self.begin(entry.clone());
        self.record(call, entry);
    }
}

/// A line of the trail about the daemon itself, not a session: `tool` names what happened.
pub fn daemon_line(tool: &str, summary: String, outcome: &str) -> AuditEntry {
    AuditEntry {
        time: sshmcp_proto::time::now_rfc3339(),
        session_id: String::new(),
        target: String::new(),
        server_host: String::new(),
        server_port: 0,
        tool: tool.to_string(),
        summary,
        outcome: outcome.to_string(),
        message: None,
        exit_code: None,
        signal: None,
        duration: 0.0,
        client: None,
    }
}

/// What an answer adds to its call's line: the exit status of the command it ran, or the
/// signal that ended it, and whether a timeout ended that command; or, for an answer that
/// says more than that it was given, what it says (`said`: a kill's result).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<String>,
    pub timed_out: bool,
    pub said: Option<String>,
}

/// A kill's line says what it found and did: `ok` alone would hide a kill that failed, found
/// nothing to signal, or fell back to SIGKILL.
pub fn kill_said(result: sshmcp_proto::command::KillResult, force_kill_used: bool) -> Exit {
    let said = match force_kill_used {
        true => format!("{}, SIGKILL sent", result.as_str()),
        false => result.as_str().to_string(),
    };
    Exit {
        said: Some(said),
        ..Exit::default()
    }
}

/// An answer a call's line is written for. Each answer type says, beside the tools that
/// answer it, whether it carries a command's exit status (an empty impl: it does not), so
/// a new one cannot lose it by a forgotten default.
pub trait Answer {
    fn exit(&self) -> Exit {
        Exit::default()
    }
}

/// How a call ended, as its line in the trail says it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallEnd {
    /// `ok`, `timed_out`, `cancelled`, or an error code.
    pub outcome: &'static str,
    pub exit_code: Option<i32>,
    /// The signal that ended the command, when one did.
    pub signal: Option<String>,
    /// The error's message, for an error code; else what the answer said of itself
    /// ([`Exit::said`]).
    pub message: Option<String>,
}

impl CallEnd {
    /// A call cut off before it answered (its client went, the daemon stopped).
    pub const CANCELLED: CallEnd = CallEnd {
        outcome: "cancelled",
        exit_code: None,
        signal: None,
        message: None,
    };

    /// How a call that answered `answer` ended.
    pub fn of<T: Answer>(answer: Result<&T, &sshmcp_proto::DaemonError>) -> Self {
        match answer.map(Answer::exit) {
            Ok(exit) => CallEnd {
                outcome: if exit.timed_out { "timed_out" } else { "ok" },
                exit_code: exit.code,
                signal: exit.signal,
                message: exit.said,
            },
            Err(e) => Self::failed(e),
        }
    }

    /// How a call that answered the error `e` ended.
    pub fn failed(e: &sshmcp_proto::DaemonError) -> Self {
        CallEnd {
            outcome: e.code.as_str(),
            exit_code: None,
            signal: None,
            message: Some(sshmcp_proto::text::cut(&e.message, AUDIT_MESSAGE_BYTES).to_string()),
        }
    }
}

fn locked<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Trail {
    /// Writes what is queued and ends the writer, waiting at most `cap` (the daemon's exit
    /// would otherwise lose the last calls' lines).
    pub fn close(&self, cap: std::time::Duration) {
        drop(
            self.queue
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .take(),
        );
        let done = self
            .writer_done
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = done.recv_timeout(cap) {
            tracing::warn!("the audit trail's last lines were not written in time");
        }
    }
}

/// What the writer is given: the number and line of a call that ended. Boxed: the queue's
/// slots are allocated and touched up front, so each is kept to a pointer's size.
pub struct Note(u64, Box<AuditEntry>);

struct Writer {
    live: PathBuf,
    /// The open live file.
    file: Option<std::fs::File>,
    counts: Arc<Counts>,
    /// Inside a spell of failed writes (logged once, at its start).
    failing: bool,
    /// The journal the calls write (see [`Trail`]); the writer notes there the calls whose
    /// lines reached the trail.
    journal: Arc<std::sync::Mutex<Option<Journal>>>,
}

/// This daemon's journal of calls under way: a file of its own, `audit.pending.<pid>.<n>`,
/// locked (`flock`) as long as the daemon lives. Another daemon sharing the state directory
/// (started for another runtime directory) neither empties it nor takes it for a dead one's;
/// a daemon that starts takes over only the journals no live daemon holds.
struct Journal {
    file: std::fs::File,
    path: PathBuf,
    /// The calls it holds as begun whose lines are not in the trail yet, each with its
    /// latest line (what a compaction writes again).
    under_way: std::collections::HashMap<u64, Vec<u8>>,
    /// Inside a spell of failed writes (logged once, at its start).
    failing: bool,
}

impl Journal {
    fn open(state_dir: &Path) -> Option<Self> {
        // One per trail: a process holds one (a test may start several).
        static TRAILS: AtomicU64 = AtomicU64::new(0);
        let n = TRAILS.fetch_add(1, Ordering::Relaxed);
        let path = state_dir.join(format!("{PENDING_FILE}.{}.{n}", std::process::id()));
        // Emptied only once held: what a file of that name held was taken over already.
        let opened = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
            .and_then(|file| {
                file.try_lock().map_err(std::io::Error::other)?;
                file.set_len(0)?;
                Ok(file)
            });
        match opened {
            Ok(file) => Some(Self {
                file,
                path,
                under_way: Default::default(),
                failing: false,
            }),
            Err(e) => {
                tracing::warn!(
                    "cannot keep the journal of calls under way {}: {e}",
                    path.display()
                );
                None
            }
        }
    }

    /// Appends `bytes` (whole lines, in one write: the file is opened for appending, so
    /// lines never interleave). A journal that cannot be written loses only what a death
    /// would have left to the next daemon.
    fn append(&mut self, bytes: &[u8]) {
        match self.file.write_all(bytes) {
            Ok(()) => self.failing = false,
            Err(e) => {
                if !std::mem::replace(&mut self.failing, true) {
                    tracing::warn!("cannot write the journal of calls under way: {e}");
                }
            }
        }
    }

    /// Notes that the lines of `calls` are in the trail (or lost and counted: either way
    /// those calls are over), and empties the journal once nothing is under way, so it only
    /// ever holds what is going on; past [`JOURNAL_COMPACT_BYTES`] (calls that overlap without
    /// end) it is written afresh with the calls still under way. A death between the trail's
    /// write and this one leaves a line twice, never none.
    fn settle(&mut self, calls: &[u64]) {
        let mut ended = vec![];
        for call in calls {
            if self.under_way.remove(call).is_some() {
                line(&mut ended, &PendingLine::Ended { ended: *call });
            }
        }
        let long = self
            .file
            .metadata()
            .is_ok_and(|m| m.len() > JOURNAL_COMPACT_BYTES);
        if self.under_way.is_empty() || long {
            if let Err(e) = self.file.set_len(0) {
                tracing::debug!("cannot empty the journal of calls under way: {e}");
            }
            let still: Vec<u8> = self.under_way.values().flatten().copied().collect();
            if !still.is_empty() {
                self.append(&still);
            }
        } else if !ended.is_empty() {
            self.append(&ended);
        }
    }
}

impl Writer {
    fn run(mut self, notes: Receiver<Note>) {
        while let Ok(first) = notes.recv() {
            // The lines of the next moment go in the same write: under load the thread
            // wakes (and its callers wake it) a few dozen times a second, not once per call.
            std::thread::sleep(BATCH_WINDOW);
            let batch: Vec<Note> = std::iter::once(first).chain(notes.try_iter()).collect();
            let mut bytes = Vec::with_capacity(batch.len() * 256);
            let mut calls = Vec::with_capacity(batch.len());
            for Note(call, entry) in batch {
                line(&mut bytes, &entry);
                calls.push(call);
            }
            self.write_lines(&bytes);
            if let Some(journal) = locked(&self.journal).as_mut() {
                journal.settle(&calls);
            }
        }
        // Closed: what was under way is in the journal as cancelled, for the next daemon;
        // with nothing under way, the journal goes.
        let mut journal = locked(&self.journal);
        if journal.as_ref().is_some_and(|j| j.under_way.is_empty())
            && let Some(journal) = journal.take()
        {
            let _ = std::fs::remove_file(&journal.path);
        }
    }

    fn write_lines(&mut self, bytes: &[u8]) {
        let n = bytes.iter().filter(|b| **b == b'\n').count() as u64;
        match self.append(bytes) {
            Ok(()) => {
                self.counts.written.fetch_add(n, Ordering::Relaxed);
                if std::mem::take(&mut self.failing) {
                    tracing::info!("the audit trail is written again");
                }
            }
            Err(e) => {
                self.counts.failed.fetch_add(n, Ordering::Relaxed);
                self.file = None;
                if !std::mem::replace(&mut self.failing, true) {
                    tracing::warn!(
                        "cannot write the audit trail {}: {e}; calls go on, lost lines \
                         are counted",
                        self.live.display()
                    );
                }
            }
        }
    }

    /// Writes to the trail, as `cancelled`, the lines of the calls that dead daemons' journals
    /// left begun and never ended, then removes those journals. A journal a live daemon holds
    /// (its lock) is left alone.
    fn recover(&mut self, state_dir: &Path) {
        let Ok(dir) = std::fs::read_dir(state_dir) else {
            return;
        };
        let prefix = format!("{PENDING_FILE}.");
        for entry in dir.flatten() {
            if !entry.file_name().to_string_lossy().starts_with(&prefix) {
                continue;
            }
            let path = entry.path();
            let Ok(mut file) = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(&path)
            else {
                continue;
            };
            // Held: its daemon lives. Gone meanwhile: another daemon took it over.
            use std::os::unix::fs::MetadataExt as _;
            if file.try_lock().is_err() || file.metadata().is_ok_and(|m| m.nlink() == 0) {
                continue;
            }
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut file, &mut text);
            self.recover_from(&text);
            let _ = std::fs::remove_file(&path);
        }
    }

    fn recover_from(&mut self, text: &str) {
        let mut left = std::collections::BTreeMap::new();
        for note in text
            .lines()
            .filter_map(|l| serde_json::from_str::<PendingLine>(l).ok())
        {
            match note {
                PendingLine::Begun { begun: call, entry } => {
                    left.insert(call, entry);
                }
                PendingLine::Finished { finished, entry } => {
                    left.insert(finished, entry);
                }
                PendingLine::Ended { ended } => {
                    left.remove(&ended);
                }
            }
        }
        if left.is_empty() {
            return;
        }
        let mut bytes = vec![];
        for entry in left.values() {
            line(&mut bytes, entry);
        }
        let cut = left.values().filter(|e| e.outcome == "cancelled").count();
        tracing::warn!(
            "a daemon before this one died before writing {} call(s) to the audit trail: \
             they go in now ({cut} cut off by its death, as cancelled)",
            left.len()
        );
        self.write_lines(&bytes);
    }

    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        // The descriptor must still be the file at the path (a trail someone moved or removed
        // is started afresh where they will look for it), and its size is read afresh: another
        // daemon, one handing over, may append too.
        let mut len = match self.file.as_ref().and_then(|f| size_if_at(f, &self.live)) {
            Some(len) => len,
            None => self.reopen()?,
        };
        if len > 0 && len + bytes.len() as u64 > AUDIT_ROTATE_BYTES {
            self.file = None;
            rotate(&self.live)?;
            len = self.reopen()?;
        }
        let file = self.file.as_mut().expect("opened above");
        if let Err(e) = file.write_all(bytes) {
            // A line cut short would spoil the next batch's first: back to the last whole one.
            let _ = file.set_len(len);
            return Err(e);
        }
        Ok(())
    }

    /// Opens the live file afresh; its size.
    fn reopen(&mut self) -> std::io::Result<u64> {
        self.file = None;
        let (file, len) = crate::logfile::open_private(&self.live)?;
        self.file = Some(file);
        Ok(len)
    }
}

/// Appends `value` as one JSON line: strings and numbers, so serializing cannot fail.
fn line(bytes: &mut Vec<u8>, value: &impl serde::Serialize) {
    if serde_json::to_writer(&mut *bytes, value).is_ok() {
        bytes.push(b'\n');
    }
}

/// `file`'s size, while it is still the file at `path` (not a symlink).
fn size_if_at(file: &std::fs::File, path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt as _;
    let (open, there) = (file.metadata().ok()?, std::fs::symlink_metadata(path).ok()?);
    (open.dev() == there.dev() && open.ino() == there.ino()).then_some(open.len())
}

/// Shifts every generation one up (the oldest kept is replaced), then the live file to `.1`.
fn rotate(live: &Path) -> std::io::Result<()> {
    for n in (1..AUDIT_GENERATIONS).rev() {
        match std::fs::rename(generation(live, n), generation(live, n + 1)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    std::fs::rename(live, generation(live, 1))
}

/// The most bytes of any call's summary: more than two of the longest paths a tool takes as
/// [`path`] shows them (4,095 bytes, four each where they are not UTF-8), and the words
/// between them, so no valid request's summary is cut, and an oversized argument of a call
/// refused before its checks (an id, a path) cannot flood the trail and push older lines out
/// of its generations.
const SUMMARY_MOST_BYTES: usize = 34 * 1024;

/// The first [`AUDIT_SUMMARY_BYTES`] of a command, cut at a character boundary: what a line
/// says of a call that runs one. A longer command says so, with its whole size: a person must
/// not take a first line padded out to the bound for all that ran.
pub fn command(text: &str) -> String {
    let kept = cut(text, AUDIT_SUMMARY_BYTES);
    match kept.len() < text.len() {
        true => format!("{kept}… [{} bytes in all]", text.len()),
        false => kept,
    }
}

/// `summary` within [`SUMMARY_MOST_BYTES`]: every call's summary passes here.
pub fn bounded(summary: String) -> String {
    match summary.len() <= SUMMARY_MOST_BYTES {
        true => summary,
        false => cut(&summary, SUMMARY_MOST_BYTES),
    }
}

/// The first `bound` bytes of a caller's `text`, cut at a character boundary, and never
/// ending in the start of a session key.
fn cut(text: &str, bound: usize) -> String {
    sshmcp_proto::text::cut_clear(text, bound).to_string()
}

/// A remote path as people read it: a base64-encoded one decoded, so that what it names is
/// seen (and a session key in it is met by the redaction as in any text); one that is not
/// UTF-8 marked `bytes:`, its bytes beyond printable ASCII as `\xNN` and a backslash or quote
/// after a backslash, so two such paths never read alike; one that does not decode as the caller gave it, marked
/// `base64:`.
pub fn path(p: &RemotePath) -> String {
    use base64::Engine as _;
    match p.encoding {
        sshmcp_proto::exec::Encoding::Utf8 => p.path.clone(),
        sshmcp_proto::exec::Encoding::Base64 => {
            match base64::engine::general_purpose::STANDARD.decode(&p.path) {
                Ok(bytes) => match String::from_utf8(bytes) {
                    Ok(text) => text,
                    Err(e) => format!("bytes:{}", e.as_bytes().escape_ascii()),
                },
                Err(_) => format!("base64:{}", p.path),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command its timeout ended answered, yet the trail says `timed_out`; an error keeps
    /// its message, cut at a character boundary.
    #[test]
    fn a_calls_end_says_timed_out_or_why_it_failed() {
        let nothing = || crate::remote::capture::Capture::new(1).finish(None);
        let mut answer = crate::exec::answer(crate::remote::RunResult {
            exit_code: Some(0),
            signal: None,
            duration: 0.1,
            timed_out: false,
            stdout: nothing(),
            stderr: nothing(),
        });
        assert_eq!(CallEnd::of(Ok(&answer)).outcome, "ok");
        // A command a signal ended answered: its line says which.
        answer.exit_code = None;
        answer.signal = Some("TERM".into());
        let end = CallEnd::of(Ok(&answer));
        assert_eq!((end.outcome, end.signal.as_deref()), ("ok", Some("TERM")));
        answer.signal = None;
        answer.timed_out = true;
        answer.exit_code = None;
        let end = CallEnd::of(Ok(&answer));
        assert_eq!(
            (end.outcome, end.exit_code, end.message),
            ("timed_out", None, None)
        );
        // A kill answered: its line says what it found and did, a SIGKILL fallback included.
        let kill = |result, force_kill_used| sshmcp_proto::task::TaskKilled {
            pid: 7,
            result,
            signal: 15,
            force_kill_used,
            timestamp: String::new(),
        };
        use sshmcp_proto::command::KillResult;
        let end = CallEnd::of(Ok(&kill(KillResult::FailedToKill, false)));
        assert_eq!(
            (end.outcome, end.message.as_deref()),
            ("ok", Some("failed_to_kill"))
        );
        let end = CallEnd::of(Ok(&kill(KillResult::Killed, true)));
        assert_eq!(end.message.as_deref(), Some("killed, SIGKILL sent"));
        // One ASCII byte first: a byte-wise cut at the bound would split the last `é`.
        let long = format!("x{}", "é".repeat(AUDIT_MESSAGE_BYTES));
        let e =
            sshmcp_proto::DaemonError::new(sshmcp_proto::ErrorCode::ConnectionStartFailed, long);
        let end = CallEnd::of::<sshmcp_proto::exec::ExecResult>(Err(&e));
        assert_eq!(end.outcome, "connection_start_failed");
        let message = end.message.unwrap();
        assert_eq!(message.len(), AUDIT_MESSAGE_BYTES - 1);
        assert!(message.starts_with('x') && message[1..].chars().all(|c| c == 'é'));
    }

    fn entry(n: usize) -> AuditEntry {
        AuditEntry {
            time: sshmcp_proto::time::now_rfc3339(),
            session_id: format!("s{n}"),
            target: "t".into(),
            server_host: "h".into(),
            server_port: 22,
            tool: "exec".into(),
            summary: "x".repeat(150),
            outcome: "ok".into(),
            message: None,
            exit_code: Some(0),
            signal: None,
            duration: 0.001,
            client: None,
        }
    }

    /// Every summary is bounded: one exactly at the bound stays whole, a longer one is cut
    /// there (at a character boundary), whatever the tool.
    #[test]
    fn a_summary_is_kept_whole_up_to_its_bound_and_cut_past_it() {
        let at = "p".repeat(SUMMARY_MOST_BYTES);
        assert_eq!(bounded(at.clone()), at);
        let past = format!("{}é", "p".repeat(SUMMARY_MOST_BYTES - 1));
        assert_eq!(bounded(past), "p".repeat(SUMMARY_MOST_BYTES - 1));
        assert_eq!(bounded("/".repeat(1 << 20)).len(), SUMMARY_MOST_BYTES);
        // A word cut at the bound may be a key's start: its last 42 characters go too.
        assert_eq!(bounded("x".repeat(1 << 20)).len(), SUMMARY_MOST_BYTES - 42);
    }

    #[test]
    fn a_command_is_cut_at_200_bytes_on_a_character_boundary_and_says_its_size() {
        assert_eq!(command(&"a".repeat(200)), "a".repeat(200));
        // A key cut in two keeps none of its 43 characters.
        let cut = format!("{}… [201 bytes in all]", "a".repeat(158));
        assert_eq!(command(&"a".repeat(201)), cut);
        let (key, _) = crate::session::key::new_session_key().unwrap();
        let text = format!("{} {key}", "x".repeat(180));
        let cut = format!("{} … [224 bytes in all]", "x".repeat(180));
        assert_eq!(command(&text), cut);
        // 199 ASCII bytes, then a 2-byte character that would end at byte 201.
        let text = format!("{}é", "a".repeat(199));
        assert_eq!(
            command(&text),
            format!("{}… [201 bytes in all]", "a".repeat(199))
        );
    }

    /// A path sent base64-encoded is shown as what it names; one that is not UTF-8 with its
    /// other bytes escaped; base64 that does not decode as sent. Two of the longest such paths
    /// stay whole.
    #[test]
    fn a_base64_path_is_shown_decoded() {
        use base64::Engine as _;
        let encoded = |bytes: &[u8]| RemotePath {
            path: base64::engine::general_purpose::STANDARD.encode(bytes),
            encoding: sshmcp_proto::exec::Encoding::Base64,
        };
        assert_eq!(path(&encoded(b"/tmp/caf\xc3\xa9")), "/tmp/café");
        assert_eq!(path(&encoded(b"/tmp/a\xffb")), "bytes:/tmp/a\\xffb");
        assert_ne!(path(&encoded(b"/tmp/a\xff")), path(&encoded(b"/tmp/a\xfe")));
        let undecodable = RemotePath {
            path: "not base64!".into(),
            encoding: sshmcp_proto::exec::Encoding::Base64,
        };
        assert_eq!(path(&undecodable), "base64:not base64!");
        let longest = path(&encoded(&[0xff; crate::inspect::MAX_PATH_BYTES]));
        let two = format!("{longest} → {longest}");
        assert_eq!(bounded(two.clone()), two);
    }

    /// A writer of `live` that has not opened it yet.
    fn closed_writer(live: &Path) -> Writer {
        Writer {
            live: live.to_path_buf(),
            file: None,
            counts: Arc::default(),
            failing: false,
            journal: Arc::default(),
        }
    }

    #[test]
    fn lines_are_appended_private_and_rotated_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join(AUDIT_FILE);
        let mut writer = closed_writer(&live);
        let line = {
            let mut b = serde_json::to_vec(&entry(0)).unwrap();
            b.push(b'\n');
            b
        };
        let per_file = (AUDIT_ROTATE_BYTES as usize) / line.len();
        for _ in 0..per_file {
            writer.append(&line).unwrap();
        }
        assert!(!generation(&live, 1).exists(), "rotated before the limit");
        writer.append(&line).unwrap();
        assert_eq!(
            std::fs::metadata(generation(&live, 1)).unwrap().len(),
            (per_file * line.len()) as u64
        );
        assert_eq!(std::fs::metadata(&live).unwrap().len(), line.len() as u64);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&live).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Rotations beyond the kept generations drop the oldest.
        for _ in 0..AUDIT_GENERATIONS + 1 {
            writer.file = None;
            rotate(&live).ok();
            writer.append(&line).unwrap();
        }
        assert!(generation(&live, AUDIT_GENERATIONS).exists());
        assert!(!generation(&live, AUDIT_GENERATIONS + 1).exists());
    }

    #[test]
    fn a_trail_moved_away_is_started_afresh_at_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join(AUDIT_FILE);
        let mut writer = closed_writer(&live);
        writer.append(b"first\n").unwrap();
        std::fs::rename(&live, dir.path().join("kept")).unwrap();
        writer.append(b"second\n").unwrap();
        assert_eq!(std::fs::read_to_string(&live).unwrap(), "second\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("kept")).unwrap(),
            "first\n"
        );
    }

    #[test]
    fn closing_writes_what_is_queued() {
        let dir = tempfile::tempdir().unwrap();
        let trail = Trail::start(dir.path()).unwrap();
        for n in 0..10 {
            let call = trail.begin(entry(n));
            trail.record(call, entry(n));
        }
        trail.close(std::time::Duration::from_secs(10));
        let text = std::fs::read_to_string(dir.path().join(AUDIT_FILE)).unwrap();
        assert_eq!(text.lines().count(), 10);
        assert_eq!(trail.counts.written.load(Ordering::Relaxed), 10);
    }

    /// A call still under way at a batch's write is in the journal; a daemon that dies then
    /// leaves it, and the next one writes its line (`cancelled`) and empties the journal.
    #[test]
    fn the_calls_a_dead_daemon_left_under_way_reach_the_trail() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join(AUDIT_FILE);
        let journals = || -> Vec<PathBuf> {
            std::fs::read_dir(dir.path())
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().contains(PENDING_FILE))
                .collect()
        };
        let trail = Trail::start(dir.path()).unwrap();
        let journal = journals().pop().expect("the daemon's journal");
        let mut cut = entry(2);
        cut.outcome = "cancelled".into();
        trail.begin(cut);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !std::fs::read_to_string(&journal)
            .unwrap()
            .contains("\"s2\"")
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the call never reached the journal"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // Another daemon sharing the state directory meanwhile: the journal is held, and
        // left alone.
        let other = Trail::start(dir.path()).unwrap();
        assert!(!live.exists() || std::fs::read_to_string(&live).unwrap().is_empty());
        other.close(std::time::Duration::from_secs(10));
        assert!(
            std::fs::read_to_string(&journal)
                .unwrap()
                .contains("\"s2\"")
        );
        // A daemon that died with that journal: the same lines in a file no one holds (the
        // lock of a process that died goes with it). The first daemon lives on, unclosed.
        let dead = dir.path().join(format!("{PENDING_FILE}.4000000.0"));
        std::fs::copy(&journal, &dead).unwrap();
        std::mem::forget(trail);
        let next = Trail::start(dir.path()).unwrap();
        let lines: Vec<AuditEntry> = std::fs::read_to_string(&live)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(
            (lines[0].session_id.as_str(), lines[0].outcome.as_str()),
            ("s2", "cancelled")
        );
        assert!(!dead.exists(), "the dead daemon's journal is taken over");
        assert!(journal.exists(), "a live daemon's is left alone");
        // A call that ends leaves nothing under way, and a closed daemon no journal.
        let call = next.begin(entry(3));
        next.record(call, entry(3));
        next.close(std::time::Duration::from_secs(10));
        assert_eq!(journals(), [journal]);
        assert_eq!(std::fs::read_to_string(&live).unwrap().lines().count(), 2);
    }

    /// The journal of the one daemon whose state directory is `dir`.
    fn journal_in(dir: &Path) -> PathBuf {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().contains(PENDING_FILE))
            .expect("the daemon's journal")
    }

    /// Calls that keep overlapping (one never ends) cannot empty the journal: past its bound
    /// it is written afresh with only what is under way.
    #[test]
    fn a_journal_that_never_empties_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let trail = Trail::start(dir.path()).unwrap();
        let journal = journal_in(dir.path());
        let mut long = entry(1);
        long.outcome = "cancelled".into();
        trail.begin(long);
        for n in 0..4000 {
            let call = trail.begin(entry(n));
            trail.record(call, entry(n));
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while trail.counts.written.load(Ordering::Relaxed) < 4000 {
            assert!(std::time::Instant::now() < deadline, "the writer is behind");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let size = std::fs::metadata(&journal).unwrap().len();
        assert!(size < JOURNAL_COMPACT_BYTES + 512 * 1024, "{size} bytes");
        let text = std::fs::read_to_string(&journal).unwrap();
        assert!(text.contains("\"s1\""), "the call under way stays");
        trail.close(std::time::Duration::from_secs(10));
    }

    /// A call is in the journal as soon as it begins, before it reaches a host.
    #[test]
    fn a_call_is_journaled_before_it_runs() {
        let dir = tempfile::tempdir().unwrap();
        let trail = Trail::start(dir.path()).unwrap();
        let journal = journal_in(dir.path());
        let call = trail.begin(entry(4));
        let text = std::fs::read_to_string(&journal).unwrap();
        assert!(text.contains(&format!("\"begun\":{call},")), "{text}");
        trail.close(std::time::Duration::from_secs(10));
    }

    /// A call that answered just before its daemon died is in the next daemon's trail with
    /// its real outcome, one that had only begun (and may have changed a host) as cancelled,
    /// and one whose line the dead daemon wrote is not written again.
    #[test]
    fn a_dead_daemons_answered_and_begun_calls_reach_the_trail_as_they_were() {
        let dir = tempfile::tempdir().unwrap();
        let mut answered = entry(5);
        answered.exit_code = Some(7);
        let mut cut = entry(6);
        (cut.outcome, cut.exit_code) = ("cancelled".into(), None);
        let mut text = vec![];
        for note in [
            PendingLine::Begun {
                begun: 1,
                entry: Box::new(cut.clone()),
            },
            PendingLine::Finished {
                finished: 1,
                entry: Box::new(answered),
            },
            PendingLine::Begun {
                begun: 2,
                entry: Box::new(cut),
            },
            PendingLine::Begun {
                begun: 3,
                entry: Box::new(entry(8)),
            },
            PendingLine::Finished {
                finished: 3,
                entry: Box::new(entry(8)),
            },
            PendingLine::Ended { ended: 3 },
        ] {
            line(&mut text, &note);
        }
        std::fs::write(dir.path().join(format!("{PENDING_FILE}.4000001.0")), text).unwrap();
        let next = Trail::start(dir.path()).unwrap();
        next.close(std::time::Duration::from_secs(10));
        let lines: Vec<AuditEntry> = std::fs::read_to_string(dir.path().join(AUDIT_FILE))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let seen: Vec<(&str, &str, Option<i32>)> = lines
            .iter()
            .map(|l| (l.session_id.as_str(), l.outcome.as_str(), l.exit_code))
            .collect();
        assert_eq!(seen, [("s5", "ok", Some(7)), ("s6", "cancelled", None)]);
    }

    #[test]
    fn a_failing_disk_counts_lines_instead_of_failing() {
        let dir = tempfile::tempdir().unwrap();
        // The live file's place is a directory: every open fails.
        std::fs::create_dir(dir.path().join(AUDIT_FILE)).unwrap();
        let trail = Trail::start(dir.path()).unwrap();
        trail.record(0, entry(1));
        trail.record(1, entry(2));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while trail.counts.failed.load(Ordering::Relaxed) < 2 {
            assert!(std::time::Instant::now() < deadline, "no failure counted");
            std::thread::yield_now();
        }
        assert_eq!(trail.counts.written.load(Ordering::Relaxed), 0);
    }
}
