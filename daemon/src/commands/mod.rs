//! Command handles: commands that outlive one tool call (`command_start`, or an `exec` handed
//! off after `handoff_after`). Each runs on the same building block as `exec`; its complete
//! streams go to files under the local root's private directory (see `output`), and the
//! session keeps its history until the session ends. The kill is in `kill`.

pub mod kill;
pub mod output;
pub mod under_way;

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use sshmcp_proto::command::{
    CommandList, CommandReport, CommandStartRequest, CommandStarted, CommandState,
    CommandStatusRequest, CommandSummary, DEFAULT_TAIL_BYTES, HISTORY_LEN, MAX_WAIT_SECS,
    PREVIEW_BYTES, RunProgress,
};
use sshmcp_proto::exec::ExecResult;
use sshmcp_proto::time::rfc3339;
use sshmcp_proto::{DaemonError, ErrorCode};
use tokio::sync::watch;

use crate::config::Settings;
use crate::remote::observer::{Observer, STDERR, STDOUT};
use crate::remote::{self, Outcome, Program, RunError, RunResult};
use crate::request;
use crate::session::Session;
use crate::session::record::Entry;
use crate::session::record::{RecordDue, from_unix_ms, unix_ms};
use crate::session::work::Work;
use output::OutputFiles;
use sshmcp_proto::overview::SessionView;

/// One session's command handles, the runs followed by a caller's progress key, and the
/// `exec` calls under way (for `sshmcp watch`).
pub struct Commands {
    /// Newest first.
    history: Mutex<VecDeque<Arc<Handle>>>,
    followed: Mutex<HashMap<String, Arc<Observer>>>,
    pub under_way: Arc<under_way::UnderWay>,
    /// Asked when a handle starts or ends: the session record must say so.
    record: Arc<RecordDue>,
    /// The spool directories the session's runs wrote to: those left empty go with the
    /// session (a handle removed early, a failed spooled exec, leave nothing else to).
    spool_dirs: Mutex<std::collections::BTreeSet<PathBuf>>,
    /// Output files of runs that neither a handle nor an answer names yet (an `exec` before
    /// its hand-off): the record keeps them, so that the next daemon removes those of a
    /// daemon killed meanwhile, which nobody else could.
    unnamed_output: Mutex<Vec<[PathBuf; 2]>>,
}

impl Drop for Commands {
    fn drop(&mut self) {
        // The handles first, and their files with them (unless kept or left for the next
        // daemon); a directory still holding anything is refused.
        locked(&self.history).clear();
        for dir in locked(&self.spool_dirs).iter() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Commands {
    pub fn new(record: Arc<RecordDue>) -> Self {
        Self {
            history: Default::default(),
            followed: Default::default(),
            under_way: Default::default(),
            record,
            spool_dirs: Default::default(),
            unnamed_output: Default::default(),
        }
    }

    /// Keeps `files` in the record as named by no handle or answer, until the guard is
    /// [`named`](UnnamedOutput::named) or dropped; returns once the record holds them (or
    /// could not be written in time), before the run writes to them.
    pub async fn unnamed(self: &Arc<Self>, files: &[PathBuf; 2]) -> UnnamedOutput {
        locked(&self.unnamed_output).push(files.clone());
        let unnamed = UnnamedOutput {
            commands: self.clone(),
            files: files.clone(),
        };
        self.record.until_written().await;
        unnamed
    }

    /// Removes the output files a record names as unnamed: the daemon that wrote them died
    /// before an answer or a handle named them, so nobody can read or remove them but this
    /// daemon. Only a stream's file of this session's spool directory is touched, and none a
    /// handle took back (the handles are adopted first).
    fn remove_unnamed(&self, session_id: &str, unnamed: Vec<[PathBuf; 2]>) {
        let handles: Vec<PathBuf> = locked(&self.history)
            .iter()
            .flat_map(|h| h.files.paths().clone())
            .collect();
        let a_stream = |path: &PathBuf| {
            path.extension()
                .is_some_and(|ext| ext == "stdout" || ext == "stderr")
        };
        for path in unnamed.iter().flatten() {
            if output::is_spool_file(path, session_id) && a_stream(path) && !handles.contains(path)
            {
                match std::fs::remove_file(path) {
                    Ok(()) => {
                        tracing::info!(session = %session_id, path = %path.display(), "removed the output file of a run whose daemon died before naming it")
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        tracing::warn!(session = %session_id, path = %path.display(), "cannot remove the output file of a run whose daemon died before naming it: {e}")
                    }
                }
                if let Some(dir) = path.parent() {
                    self.spooling_in(dir);
                }
            }
        }
    }

    /// Notes that a run of the session writes to spool directory `dir`.
    pub fn spooling_in(&self, dir: &Path) {
        locked(&self.spool_dirs).insert(dir.to_path_buf());
    }

    /// Leaves every handle's output files when the handles go: the daemon is handing them to
    /// the next one.
    pub fn leave_files(&self) {
        for handle in locked(&self.history).iter() {
            handle.files.leave_for_next_daemon();
        }
    }

    /// The history as the session record keeps it.
    pub fn recorded(&self) -> Vec<CommandEntry> {
        locked(&self.history).iter().map(|h| h.recorded()).collect()
    }

    /// Takes back the handles a record names. One that was running when its daemon stopped
    /// ends `lost`: its exit is unknown, and the output it printed until then is kept. Output
    /// files are taken only where a handle of `session_id` keeps them (they are read, and
    /// removed with the handle).
    pub fn adopt(&self, session: &Session, entries: Vec<CommandEntry>) {
        let session_id = session.id.as_str();
        let now = SystemTime::now();
        let handles = entries.into_iter().filter(|entry| {
            let ours = entry.output.iter().all(|p| output::is_spool_file(p, session_id));
            if !ours {
                tracing::warn!(handle = %entry.handle_id, "recorded output files are not a handle's; handle dropped");
            }
            ours
        });
        let handles = handles.map(|entry| {
            if let Some(dir) = entry.output[0].parent() {
                self.spooling_in(dir);
            }
            let bytes = entry
                .output
                .clone()
                .map(|path| std::fs::metadata(path).map_or(0, |m| m.len()));
            let (state, at) = match parse_state(&entry.status) {
                Some(CommandState::Running) | None => (CommandState::Lost, now),
                Some(state) => (state, entry.ended_unix_ms.map_or(now, from_unix_ms)),
            };
            let ended = Ended {
                state,
                exit_code: entry.exit_code,
                signal: entry.signal,
                at,
                error: None,
            };
            Arc::new(Handle {
                id: entry.handle_id,
                preview: entry.preview,
                asked_at: from_unix_ms(entry.started_unix_ms),
                observer: Arc::new(Observer::finished(entry.pid, entry.group_left, bytes)),
                files: OutputFiles::adopt(
                    entry.output,
                    entry.output_kept,
                    session.host.closing.clone(),
                ),
                end: watch::channel(Some(ended)).0,
                ending: Default::default(),
                as_root: entry.as_root,
                kill_confirmed: AtomicBool::new(false),
                stopped_by_person: AtomicBool::new(entry.stopped_by_person),
                kills: watch::channel(0).0,
            })
        });
        locked(&self.history).extend(handles);
    }

    /// Adds `handle` as the newest; beyond [`HISTORY_LEN`] ended handles the oldest go (with
    /// their files). Running handles always stay, beside them.
    fn add(&self, handle: Arc<Handle>) {
        let mut history = locked(&self.history);
        history.push_front(handle);
        while history.iter().filter(|h| h.ended().is_some()).count() > HISTORY_LEN {
            if let Some(oldest_ended) = history.iter().rposition(|h| h.ended().is_some()) {
                history.remove(oldest_ended);
            }
        }
        self.record.ask();
    }

    fn remove(&self, id: &str) {
        locked(&self.history).retain(|h| h.id != id);
        self.record.ask();
    }

    /// The handle `id` of this session: `command_not_found` otherwise.
    pub fn find(&self, id: &str) -> Result<Arc<Handle>, DaemonError> {
        locked(&self.history)
            .iter()
            .find(|h| h.id == id)
            .cloned()
            .ok_or_else(|| {
                DaemonError::new(
                    ErrorCode::CommandNotFound,
                    "no command with this handle_id in this session's history (handles end \
                     with their session; command_list shows them)",
                )
            })
    }

    pub fn list(&self) -> CommandList {
        CommandList {
            commands: locked(&self.history).iter().map(|h| h.summary()).collect(),
        }
    }

    /// Follows `observer` under `key` until the guard is dropped.
    pub fn follow(self: &Arc<Self>, key: String, observer: Arc<Observer>) -> Following {
        locked(&self.followed).insert(key.clone(), observer);
        Following {
            commands: self.clone(),
            key,
        }
    }

    /// What the run followed under `key` (a progress key, or a handle id) has done so far.
    pub fn progress(&self, key: &str) -> Option<RunProgress> {
        let observer = locked(&self.followed).get(key).cloned().or_else(|| {
            locked(&self.history)
                .iter()
                .find(|h| h.id == key)
                .map(|h| h.observer.clone())
        })?;
        let seen = observer.seen();
        Some(RunProgress {
            bytes: seen.total(),
            last_line: seen.last_line(),
        })
    }
}

/// A run followed under a progress key; dropping it stops following.
pub struct Following {
    commands: Arc<Commands>,
    key: String,
}

impl Drop for Following {
    fn drop(&mut self) {
        locked(&self.commands.followed).remove(&self.key);
    }
}

/// How a handle's command ended.
#[derive(Clone)]
pub struct Ended {
    state: CommandState,
    exit_code: Option<i32>,
    signal: Option<String>,
    at: SystemTime,
    /// Why the run failed, when it did (the master died, the session closed).
    error: Option<DaemonError>,
}

impl Ended {
    fn from_outcome(outcome: Result<Exit, RunError>) -> Self {
        let (state, exit_code, signal, error) = match outcome {
            Ok(r) if r.timed_out => (CommandState::TimedOut, None, r.signal, None),
            Ok(r) => (CommandState::Completed, r.exit_code, r.signal, None),
            Err(RunError::Cancelled) => (CommandState::Killed, None, None, None),
            Err(e) => (CommandState::Lost, None, None, Some(DaemonError::from(e))),
        };
        Self {
            state,
            exit_code,
            signal,
            at: SystemTime::now(),
            error,
        }
    }
}

/// How a run ended, as a handle's end (or an `exec` call's) reads it.
pub struct Exit {
    timed_out: bool,
    exit_code: Option<i32>,
    signal: Option<String>,
}

impl From<&RunResult> for Exit {
    fn from(r: &RunResult) -> Self {
        Self {
            timed_out: r.timed_out,
            exit_code: r.exit_code,
            signal: r.signal.clone(),
        }
    }
}

impl From<&ExecResult> for Exit {
    fn from(r: &ExecResult) -> Self {
        Self {
            timed_out: r.timed_out,
            exit_code: r.exit_code,
            signal: r.signal.clone(),
        }
    }
}

/// One command handle.
pub struct Handle {
    pub id: String,
    preview: String,
    /// When it was asked for, which stands for its start until the run reports one (see
    /// [`Handle::started_at`]).
    asked_at: SystemTime,
    pub observer: Arc<Observer>,
    files: OutputFiles,
    end: watch::Sender<Option<Ended>>,
    /// The end, known to the session record before `end` shows it to anyone: an agent that
    /// saw a handle end finds it ended after a crash too.
    ending: std::sync::OnceLock<Ended>,
    /// The command holds root processes (a handed-off `sudo_exec`): its kill runs as root.
    pub as_root: bool,
    /// Set when `command_kill` found the command gone: from then on its status is `killed`.
    kill_confirmed: AtomicBool,
    /// Set when the person's kill ended it (`sshmcp kill`), which its report says.
    stopped_by_person: AtomicBool,
    /// Kills of this command under way: a status that saw the command end waits for their
    /// verdict, which makes it `killed` when they ended it.
    kills: watch::Sender<usize>,
}

/// A kill of a handle's command under way, counted while it lives (see [`Handle::wait`]).
pub struct KillUnderWay<'a>(&'a Handle);

impl Drop for KillUnderWay<'_> {
    fn drop(&mut self) {
        self.0.kills.send_modify(|n| *n -= 1);
    }
}

/// A handle in the making: its files and observer, attached to a program before it starts.
pub struct Prepared {
    observer: Arc<Observer>,
    files: OutputFiles,
    asked_at: SystemTime,
}

impl Prepared {
    /// Gives `program` complete output files under `root` and an observer (keeping one it
    /// has already).
    pub fn attach(
        program: &mut Program,
        root: &Path,
        session: &Session,
        settings: &Settings,
    ) -> Result<Self, DaemonError> {
        let (files, spools) = OutputFiles::create(
            root,
            &session.id,
            settings.max_spool_bytes,
            session.host.closing.clone(),
        )?;
        if let Some(dir) = files.paths()[0].parent() {
            Commands::of(session).spooling_in(dir);
        }
        program.spool = Some(spools);
        let observer = program
            .observer
            .get_or_insert_with(Default::default)
            .clone();
        Ok(Self {
            observer,
            files,
            asked_at: SystemTime::now(),
        })
    }

    pub fn observer(&self) -> &Arc<Observer> {
        &self.observer
    }

    /// The stdout and stderr files.
    pub fn output_paths(&self) -> &[PathBuf; 2] {
        self.files.paths()
    }

    /// The files the output goes to stay after the run and its handle (`spool_output`).
    pub fn keep_files(&mut self) {
        self.files.keep();
    }

    /// The handle of the run whose result comes on `outcome`, in `session`'s history.
    pub fn into_handle(
        self,
        session: &Session,
        id: String,
        preview: String,
        outcome: Outcome,
        as_root: bool,
    ) -> Result<Arc<Handle>, DaemonError> {
        let handle = Arc::new(Handle {
            id,
            preview,
            asked_at: self.asked_at,
            observer: self.observer,
            files: self.files,
            end: watch::channel(None).0,
            ending: Default::default(),
            as_root,
            kill_confirmed: AtomicBool::new(false),
            stopped_by_person: AtomicBool::new(false),
            kills: watch::channel(0).0,
        });
        Commands::of(session).add(handle.clone());
        let (follower, record) = (handle.clone(), Commands::of(session).record.clone());
        tokio::spawn(async move {
            // The record keeps the group once it is known: a daemon that dies after that
            // leaves the next one a handle whose command it can still reach (`command_kill`,
            // a disconnect). It was written when the handle came, before the group.
            let mut seen = follower.observer.subscribe();
            let pid_known = async move {
                let _ = seen.wait_for(|s| s.pid.is_some()).await;
            };
            let mut outcome = std::pin::pin!(outcome);
            let outcome = tokio::select! {
                outcome = &mut outcome => outcome,
                () = pid_known => {
                    record.ask();
                    outcome.await
                }
            };
            let outcome = outcome
                .unwrap_or_else(|_| Err(RunError::Failed("the run ended without a result".into())));
            let ended = Ended::from_outcome(outcome.map(|r| Exit::from(&r)));
            let _ = follower.ending.set(ended.clone());
            record.until_written().await;
            follower.end.send_replace(Some(ended));
        });
        Ok(handle)
    }
}

/// A new command's id: `cmd-` and 16 hex digits.
pub fn new_id() -> Result<String, DaemonError> {
    let id = crate::random::nonce("cmd-")
        .map_err(|e| DaemonError::internal(format!("no randomness: {e}")))?;
    Ok(id[..20].to_string())
}

/// The first line of `command`, at most [`PREVIEW_BYTES`] with the `…` that says more
/// follows (cut at a character boundary).
fn preview(command: &str) -> String {
    let line = command.trim_start().lines().next().unwrap_or("");
    let more = line.len() > PREVIEW_BYTES || line.len() < command.trim().len();
    let room = match more {
        true => PREVIEW_BYTES - "…".len(),
        false => PREVIEW_BYTES,
    };
    // A person is shown it: never the start of a session key the cut would hide from the
    // redaction.
    let kept = sshmcp_proto::text::cut_clear(line, room);
    let more = more || kept.len() < line.len();
    format!("{kept}{}", if more { "…" } else { "" })
}

/// A state as [`CommandState::as_str`] names it.
fn parse_state(name: &str) -> Option<CommandState> {
    [
        CommandState::Running,
        CommandState::Completed,
        CommandState::TimedOut,
        CommandState::Killed,
        CommandState::Lost,
    ]
    .into_iter()
    .find(|s| s.as_str() == name)
}

impl Handle {
    fn recorded(&self) -> CommandEntry {
        let ended = self.ended().or_else(|| self.ending.get().cloned());
        CommandEntry {
            handle_id: self.id.clone(),
            preview: self.preview.clone(),
            started_unix_ms: unix_ms(self.started_at()),
            pid: self.pid(),
            as_root: self.as_root,
            output: self.files.paths().clone(),
            output_kept: self.files.kept(),
            group_left: self.observer.seen().group_left,
            status: match (self.status(), &ended) {
                (CommandState::Running, Some(ended)) => ended.state,
                (status, _) => status,
            }
            .as_str()
            .to_string(),
            exit_code: ended.as_ref().and_then(|e| e.exit_code),
            signal: ended.as_ref().and_then(|e| e.signal.clone()),
            ended_unix_ms: ended.map(|e| unix_ms(e.at)),
            stopped_by_person: self.stopped_by_person.load(Ordering::SeqCst),
        }
    }

    pub fn ended(&self) -> Option<Ended> {
        self.end.borrow().clone()
    }

    pub fn status(&self) -> CommandState {
        match (self.kill_confirmed.load(Ordering::SeqCst), self.ended()) {
            (true, _) => CommandState::Killed,
            (false, Some(ended)) => ended.state,
            (false, None) => CommandState::Running,
        }
    }

    /// Marks the command killed (a kill confirmed it gone).
    pub fn confirm_killed(&self) {
        self.kill_confirmed.store(true, Ordering::SeqCst);
    }

    /// Marks the command as one the person's kill is ending (`true`, before its signal, so
    /// a status that sees it end sees whose kill it was), or did not end after all.
    pub fn person_kills(&self, ending: bool) {
        self.stopped_by_person.store(ending, Ordering::SeqCst);
    }

    fn kills_under_way(&self) -> bool {
        *self.kills.borrow() > 0
    }

    /// Counts a kill of the command as under way until the guard goes.
    pub fn kill_begins(&self) -> KillUnderWay<'_> {
        self.kills.send_modify(|n| *n += 1);
        KillUnderWay(self)
    }

    pub fn pid(&self) -> Option<u32> {
        self.observer.pid()
    }

    /// Waits until the command ended, and any kill under way said whether it ended it, or
    /// `wait` passed: a status that answered as soon as a kill's signal ended the command
    /// would say `completed` of a command killed.
    pub async fn wait(&self, wait: Duration) {
        let (mut end, mut kills) = (self.end.subscribe(), self.kills.subscribe());
        let ended_and_judged = async {
            let _ = end.wait_for(Option::is_some).await;
            let _ = kills.wait_for(|n| *n == 0).await;
        };
        let _ = tokio::time::timeout(wait, ended_and_judged).await;
    }

    /// When the command started: once the run reported it, that moment (a command that waited
    /// for a channel started after it was asked for); before, or for a handle taken back,
    /// when it was asked for or recorded.
    fn started_at(&self) -> SystemTime {
        self.observer.started_at().unwrap_or(self.asked_at)
    }

    /// Waits until the command started, or ended (it may end before it could start).
    async fn wait_started(&self) {
        let mut seen = self.observer.subscribe();
        let mut end = self.end.subscribe();
        tokio::select! {
            _ = seen.wait_for(|s| s.started) => {}
            _ = end.wait_for(Option::is_some) => {}
        }
    }

    fn summary(&self) -> CommandSummary {
        let ended = self.ended();
        CommandSummary {
            handle_id: self.id.clone(),
            preview: self.preview.clone(),
            status: self.status(),
            exit_code: ended.as_ref().and_then(|e| e.exit_code),
            started_at: rfc3339(self.started_at()),
            ended_at: ended.map(|e| rfc3339(e.at)),
        }
    }

    /// The command's state and a piece of each stream (see [`OutputFiles::chunk`]): `sizes`
    /// bytes of each, from its offset or else its tail.
    pub fn report(
        &self,
        offsets: [Option<u64>; 2],
        sizes: [u64; 2],
    ) -> Result<CommandReport, DaemonError> {
        // The end first: bytes counted before it are all there is once it ended.
        let ended = self.ended();
        let seen = self.observer.seen();
        let chunk = |stream: usize| {
            let mut chunk =
                self.files
                    .chunk(stream, offsets[stream], sizes[stream], seen.bytes[stream])?;
            chunk.truncated = seen.dropped[stream];
            Ok::<_, DaemonError>(chunk)
        };
        Ok(CommandReport {
            handle_id: self.id.clone(),
            pid: seen.pid,
            status: self.status(),
            exit_code: ended.as_ref().and_then(|e| e.exit_code),
            signal: ended.as_ref().and_then(|e| e.signal.clone()),
            started_at: rfc3339(self.started_at()),
            ended_at: ended.map(|e| rfc3339(e.at)),
            stopped_by: (self.stopped_by_person.load(Ordering::SeqCst)
                && self.status() == CommandState::Killed)
                .then(|| sshmcp_proto::service::STOPPED_BY_PERSON.into()),
            stdout: chunk(STDOUT)?,
            stderr: chunk(STDERR)?,
        })
    }

    /// The first `max_bytes` of `stream` so far, as an `exec` answer's stream with the offset
    /// to continue from.
    pub fn so_far(
        &self,
        stream: usize,
        max_bytes: u64,
    ) -> Result<sshmcp_proto::exec::StreamOutput, DaemonError> {
        let seen = self.observer.seen();
        let total = seen.bytes[stream];
        let chunk = self.files.chunk(stream, Some(0), max_bytes, total)?;
        // Cut by `max_bytes`: a chunk short only of a character still arriving (its first
        // bytes held back) lost nothing, and is read on from `next_offset`.
        let truncated = total > max_bytes && chunk.next_offset < total;
        Ok(sshmcp_proto::exec::StreamOutput {
            captured_bytes: chunk.next_offset,
            total_bytes: total,
            truncated,
            omitted: truncated.then_some(sshmcp_proto::exec::ByteRange {
                start: chunk.next_offset,
                end: total,
            }),
            spool_path: self.files.kept_path(stream),
            spool_truncated: seen.dropped[stream],
            next_offset: Some(chunk.next_offset),
            data: chunk.data,
            encoding: chunk.encoding,
        })
    }
}

/// How long a status of an ended command waits at most for the verdict of a kill under way.
const KILL_VERDICT_WAIT: Duration = Duration::from_secs(2);

/// The handle of a `command_start` still waiting for its command to start: dropped with the
/// call (its client cancelled or went away), nothing ran, and no handle stays.
struct Unstarted(Option<(Arc<Commands>, String)>);

impl Unstarted {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Unstarted {
    fn drop(&mut self) {
        if let Some((commands, id)) = self.0.take() {
            commands.remove(&id);
        }
    }
}

/// `command_start`: starts the command as a handle and answers once it started (its working
/// directory entered), or with the reason it could not start.
pub async fn start(
    session: &Session,
    settings: &Settings,
    req: CommandStartRequest,
) -> Result<CommandStarted, DaemonError> {
    request::check_command(&req.command)?;
    request::check_cwd(req.cwd.as_deref())?;
    let timeout = request::check_limit(req.timeout, true)?;
    let root = request::local_root(req.local_root, settings)?;
    // The output is read from the files: the run's own capture would only hold memory.
    let mut program = Program::new(req.command.as_str(), timeout, 0);
    program.command = true;
    program.cwd = req.cwd;
    program.queue_timeout = Some(request::HANDLE_QUEUE_LIMIT);
    program.ready_first = true;
    let prepared = Prepared::attach(&mut program, &root, session, settings)?;
    // Until it started, the run is this call's: a call dropped meanwhile (its client cancelled
    // or went away) stops it, so a command still waiting for a channel never runs.
    let (outcome, until_started) = remote::start(&session.host, program).split();
    let handle = prepared.into_handle(session, new_id()?, preview(&req.command), outcome, false)?;
    let unstarted = Unstarted(Some((Commands::of(session), handle.id.clone())));
    // Bounded: the run gets a channel and its login shell within `HANDLE_QUEUE_LIMIT`, or
    // ends without having sent anything.
    handle.wait_started().await;
    unstarted.disarm();
    if let Some(until_started) = until_started {
        until_started.disarm();
    }
    if !handle.observer.seen().started
        && let Some(ended) = handle.ended()
    {
        // It never ran (a missing cwd, no channel in time, a lost master): the call failed,
        // and no handle stays, in the record either (a daemon that died before its next
        // write would bring it back `lost`, as if the command might have run).
        Commands::of(session).remove(&handle.id);
        session.record.until_written().await;
        // A run cut before it started ends `killed` with no error only when its session
        // closed meanwhile (nothing else stops a detached run).
        if ended.state == CommandState::Killed {
            return Err(RunError::Cancelled.into());
        }
        return Err(ended.error.unwrap_or_else(|| {
            DaemonError::new(ErrorCode::ChannelsBusy, format!(
                "nothing ran: the command did not start within {} s: no channel of the session came free \
                 (running commands hold them all) or the remote login shell did not finish",
                request::HANDLE_QUEUE_LIMIT.as_secs()
            ))
        }));
    }
    // The answer names a handle that a crash right after it would not lose track of.
    session.record.until_written().await;
    Ok(CommandStarted {
        handle_id: handle.id.clone(),
        id: handle.id.clone(),
        pid: handle.pid(),
        status: handle.status(),
        started_at: rfc3339(handle.started_at()),
    })
}

/// `command_status`: the handle's state and output, after waiting up to `wait_seconds` for
/// its end.
pub async fn status(
    session: &Session,
    settings: &Settings,
    req: CommandStatusRequest,
) -> Result<CommandReport, DaemonError> {
    let wait = check_wait(req.wait_seconds)?;
    let offsets = [req.stdout_offset, req.stderr_offset];
    let sizes = read_sizes(offsets, req.max_bytes, settings)?;
    let handle = Commands::of(session).find(&req.handle_id)?;
    if !wait.is_zero() {
        handle.wait(wait).await;
    }
    // A command that ended while a kill of it is under way waits for the kill's verdict
    // (briefly, even without `wait_seconds`, and whenever the kill began): the end comes a
    // moment before it, and must not read `completed` when the kill ended it.
    if handle.ended().is_some() && handle.kills_under_way() {
        handle.wait(KILL_VERDICT_WAIT).await;
    }
    handle.report(offsets, sizes)
}

/// The person's read of an `exec` call `id` under way (or that answered in the last minute),
/// as `command_status` reads a handle, from what its tails hold: `sshmcp output`.
pub async fn exec_output(
    session: &Session,
    settings: &Settings,
    id: &str,
    req: &sshmcp_proto::command::OutputRequest,
) -> Result<CommandReport, DaemonError> {
    let wait = check_wait(req.wait_seconds)?;
    let offsets = [req.stdout_offset, req.stderr_offset];
    let sizes = read_sizes(offsets, req.max_bytes, settings)?;
    match Commands::of(session)
        .under_way
        .report(id, wait, offsets, sizes)
        .await
    {
        Some(report) => report,
        // Handed off meanwhile: the handle, of the same id, goes on.
        None => Commands::of(session).find(id)?.report(offsets, sizes),
    }
}

/// How many bytes of each stream a read from `offsets` takes: `max_bytes` (at most the
/// output cap), else the cap from an offset and a small tail without one.
fn read_sizes(
    offsets: [Option<u64>; 2],
    max_bytes: Option<u64>,
    settings: &Settings,
) -> Result<[u64; 2], DaemonError> {
    let max_bytes = check_max_bytes(max_bytes, settings.max_output_bytes)?;
    Ok(offsets.map(|offset| {
        max_bytes.unwrap_or(match offset {
            Some(_) => settings.max_output_bytes.max(1),
            None => DEFAULT_TAIL_BYTES.min(settings.max_output_bytes.max(1)),
        })
    }))
}

/// `wait_seconds` (0..=300 s, none is 0) as a duration: how long a status call may wait for
/// what it follows to end.
pub(crate) fn check_wait(wait: Option<f64>) -> Result<Duration, DaemonError> {
    let secs = wait.unwrap_or(0.0);
    if !secs.is_finite() || !(0.0..=MAX_WAIT_SECS).contains(&secs) {
        return Err(DaemonError::invalid_arguments(format!(
            "wait_seconds must be between 0 and {MAX_WAIT_SECS}"
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `max_bytes` when given: at least 1, and above the output cap taken as the cap (the rule of
/// every size wish, as `read_file_range`'s `length`: the answer shows what came).
fn check_max_bytes(max: Option<u64>, cap: u64) -> Result<Option<u64>, DaemonError> {
    match max {
        Some(0) => Err(DaemonError::invalid_arguments(
            "max_bytes must be at least 1",
        )),
        max => Ok(max.map(|n| n.min(cap))),
    }
}

// A call answered so adds nothing to its trail line but how it ended (a report's exit
// code is its command's, told when asked, not the call's).
impl crate::audit::Answer for sshmcp_proto::command::CommandStarted {}
impl crate::audit::Answer for sshmcp_proto::command::CommandReport {}
impl crate::audit::Answer for sshmcp_proto::command::CommandList {}

/// One command handle as the session record keeps it (newest first, its part `commands`):
/// enough to answer for it after the daemon that ran it is gone (its output stays in its
/// files).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommandEntry {
    pub handle_id: String,
    pub preview: String,
    pub started_unix_ms: u64,
    pub pid: Option<u32>,
    pub as_root: bool,
    /// The stdout and stderr files.
    pub output: [PathBuf; 2],
    /// The files outlive the handle (`spool_output` named them in an answer).
    pub output_kept: bool,
    /// Whether processes of its group outlived it, when its end said (see
    /// `remote::observer::Seen::group_left`): a group seen empty is never signalled again.
    #[serde(default)]
    pub group_left: Option<bool>,
    /// `running`, or the state it ended in.
    pub status: String,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub ended_unix_ms: Option<u64>,
    /// The person's kill ended it (`sshmcp kill`); written only then, so a record keeps the
    /// layout older daemons read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped_by_person: bool,
}

impl Commands {
    /// This session's command handles.
    pub fn of(session: &Session) -> Arc<Commands> {
        session.work::<Commands>()
    }
}

/// The session record's part of the command handles.
const PART: &str = "commands";

/// The session record's part of the output files no handle or answer names yet.
const UNNAMED_PART: &str = "unnamed_output";

/// Output files the record keeps as named by no handle or answer yet (see
/// [`Commands::unnamed`]); dropped, the record no longer does (the run removes its files, as
/// none named are kept).
pub struct UnnamedOutput {
    commands: Arc<Commands>,
    files: [PathBuf; 2],
}

impl UnnamedOutput {
    /// A handle or an answer names the files now: returns once the record no longer keeps
    /// them as unnamed, so that a daemon killed after the answer leaves them be (unless the
    /// record could not be written: a full disk, a daemon handing over).
    pub async fn named(self) {
        let record = self.commands.record.clone();
        drop(self);
        record.until_written().await;
    }
}

impl Drop for UnnamedOutput {
    fn drop(&mut self) {
        locked(&self.commands.unnamed_output).retain(|files| *files != self.files);
        self.commands.record.ask();
    }
}

impl Work for Commands {
    fn record(&self, entry: &mut Entry, redact: &dyn Fn(&str) -> String) {
        // The unnamed files before the handles: a hand-off adds its handle, then drops its
        // files from these, so a record written meanwhile names them at least once.
        let unnamed = locked(&self.unnamed_output).clone();
        if !unnamed.is_empty() {
            entry.put(UNNAMED_PART, &unnamed);
        }
        let mut commands = self.recorded();
        for command in &mut commands {
            command.preview = redact(&command.preview);
        }
        entry.put(PART, &commands);
    }

    fn adopt(&self, session: &Session, entry: &mut Entry, _: bool) {
        let unnamed = entry.take(UNNAMED_PART);
        // The handles first: files a handle names are never removed as unnamed.
        Commands::adopt(self, session, entry.take(PART));
        self.remove_unnamed(&session.id, unnamed);
    }

    fn show(&self, view: &mut SessionView) {
        let listed = self.list().commands.into_iter();
        view.commands = listed
            .filter(|c| c.status == CommandState::Running || ended_lately(c))
            .collect();
        view.execs = self.under_way.views();
    }

    /// Output files stay for the next daemon, which adopts the handles (those of commands
    /// handed off while transfers stopped too).
    fn handed_over(&self) {
        self.leave_files();
    }
}

/// How long an ended command stays in the overview, with how it ended.
const ENDED_SHOWN: Duration = Duration::from_secs(60);

/// Whether `c` ended within [`ENDED_SHOWN`].
fn ended_lately(c: &sshmcp_proto::command::CommandSummary) -> bool {
    let ended = c
        .ended_at
        .as_deref()
        .and_then(sshmcp_proto::time::parse_rfc3339);
    ended.is_some_and(|at| at.elapsed().is_ok_and(|ago| ago <= ENDED_SHOWN))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handle as every daemon so far wrote it in the session record reads back, and is
    /// written again, field for field: records cross daemon versions.
    #[test]
    fn a_recorded_handle_keeps_its_layout() {
        let written = serde_json::json!({
            "handle_id": "cmd-0123456789abcdef", "preview": "make", "started_unix_ms": 1,
            "pid": 77, "as_root": false, "output": ["/r/o", "/r/e"], "output_kept": false,
            "group_left": null, "status": "running", "exit_code": null, "signal": null,
            "ended_unix_ms": null
        });
        let entry: CommandEntry = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(serde_json::to_value(&entry).unwrap(), written);
    }

    /// A handle as the history holds it, ended (completed) or running; its files are none.
    fn handle(id: usize, ended: bool) -> Arc<Handle> {
        handle_with(
            id,
            ended,
            ["/nonexistent/o".into(), "/nonexistent/e".into()],
        )
    }

    /// A handle as [`handle`], whose output is in `files`.
    fn handle_with(id: usize, ended: bool, files: [PathBuf; 2]) -> Arc<Handle> {
        let end = ended.then(|| Ended {
            state: CommandState::Completed,
            exit_code: Some(0),
            signal: None,
            at: SystemTime::now(),
            error: None,
        });
        Arc::new(Handle {
            id: format!("cmd-{id}"),
            preview: String::new(),
            asked_at: SystemTime::now(),
            observer: Arc::new(Observer::finished(None, None, [0, 0])),
            files: OutputFiles::adopt(files, true, Default::default()),
            end: watch::channel(end).0,
            ending: Default::default(),
            as_root: false,
            kill_confirmed: AtomicBool::new(false),
            stopped_by_person: AtomicBool::new(false),
            kills: watch::channel(0).0,
        })
    }

    /// A record's unnamed output files go, but only a stream's file of the session's spool
    /// directory that no handle took back.
    #[test]
    fn only_unnamed_stream_files_of_the_sessions_spool_go() {
        let root = tempfile::tempdir().unwrap();
        let spool = root.path().join(".sshmcp/spool/s1");
        std::fs::create_dir_all(&spool).unwrap();
        let pair = |base: &str| {
            [
                spool.join(format!("{base}.stdout")),
                spool.join(format!("{base}.stderr")),
            ]
        };
        let (handles, stray) = (pair("a"), pair("b"));
        let others = [root.path().join("outside.stdout"), spool.join("c.txt")];
        for path in handles.iter().chain(&stray).chain(&others) {
            std::fs::write(path, "x").unwrap();
        }
        let commands = Commands::new(Default::default());
        commands.add(handle_with(0, true, handles.clone()));
        commands.remove_unnamed("s1", vec![handles.clone(), stray.clone(), others.clone()]);
        assert!(handles.iter().chain(&others).all(|p| p.exists()));
        assert!(stray.iter().all(|p| !p.exists()));
    }

    /// The history holds every running handle and, beside them, the last HISTORY_LEN that
    /// ended (a running one took an ended one's place).
    #[test]
    fn the_history_keeps_every_running_handle_and_the_last_ended_ones() {
        let commands = Commands::new(Default::default());
        commands.add(handle(0, false));
        for id in 1..=HISTORY_LEN + 2 {
            commands.add(handle(id, true));
        }
        let ids: Vec<String> = locked(&commands.history)
            .iter()
            .map(|h| h.id.clone())
            .collect();
        assert_eq!(ids.len(), HISTORY_LEN + 1);
        assert!(ids.contains(&"cmd-0".to_string()), "the running one stays");
        assert_eq!(ids[HISTORY_LEN - 1], "cmd-3", "the oldest ended kept");
    }

    #[test]
    fn previews_are_one_cut_line() {
        assert_eq!(preview("make -j4"), "make -j4");
        // A key the cut falls in keeps none of its start (the redaction knows whole keys).
        let at_cut = format!("echo {} {}", "y".repeat(PREVIEW_BYTES - 20), "k".repeat(43));
        assert_eq!(
            preview(&at_cut),
            format!("echo {} …", "y".repeat(PREVIEW_BYTES - 20))
        );
        assert_eq!(preview("  cd x\nmake"), "cd x…");
        let long = "é".repeat(PREVIEW_BYTES);
        let p = preview(&long);
        assert!(p.len() <= PREVIEW_BYTES && p.ends_with('…'));
        // At the bound whole; one past it, cut with room for the `…`.
        let at = ".".repeat(PREVIEW_BYTES);
        assert_eq!(preview(&at), at);
        let past = preview(&format!("{at}."));
        assert_eq!(past, format!("{}…", &at[..PREVIEW_BYTES - 3]));
        assert_eq!(past.len(), PREVIEW_BYTES);
    }

    #[test]
    fn wait_and_max_bytes_edges() {
        assert!(check_wait(Some(MAX_WAIT_SECS)).is_ok());
        assert!(check_wait(Some(0.0)).is_ok());
        for bad in [MAX_WAIT_SECS + 0.01, -0.1, f64::NAN] {
            assert_eq!(
                check_wait(Some(bad)).unwrap_err().code,
                ErrorCode::InvalidArguments
            );
        }
        assert_eq!(check_max_bytes(Some(64), 64).unwrap(), Some(64));
        assert_eq!(check_max_bytes(Some(65), 64).unwrap(), Some(64), "clamped");
        assert_eq!(check_max_bytes(Some(1), 64).unwrap(), Some(1));
        assert_eq!(check_max_bytes(None, 64).unwrap(), None);
        assert_eq!(
            check_max_bytes(Some(0), 64).unwrap_err().code,
            ErrorCode::InvalidArguments
        );
    }
}
