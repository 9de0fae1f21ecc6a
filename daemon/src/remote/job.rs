//! One run from channel to result, in its own task: feed the payload, split the streams at
//! their markers into bounded captures, and on a timeout, a caller that went away or the
//! session closing, end the remote process group.
//!
//! The rules that make a stop impossible to lose:
//! - Nothing runs until the payload's closing brace is written, so a stop while the payload is
//!   still being fed closes stdin early and nothing of the program runs.
//! - Once the payload is out, the task stays until the group is known (the markers carry it)
//!   and killed, or the channel closes: a stop before the group is known kills as soon as it
//!   is, not never. Only a login shell that stays silent for `MARKER_WAIT` after the stop is
//!   given up on.
//! - A kill is tried again until it confirms the group gone (see `kill`); the session closing
//!   does not cancel kills, and a kill is never itself killed.
//! - The caller's answer and the task's end are apart: the answer comes when the program is
//!   done (or at most `ANSWER_GRACE` after a stop), while the task keeps its channel slot until
//!   the channel really closes.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::sync::{OwnedSemaphorePermit, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::capture::Capture;
use super::channel::{self, OpenError};
use super::framing::{self, Framing, MarkerScan, Markers};
use super::kill::{self, KILL_BUDGET, Killed};
use super::kill_channel::{self, Kept, KillChannel, Lease};
use super::observer::{self, Observer};
use super::runner::{After, End, LineScan};
use super::spool::{Spool, Spooled};
use super::standby::{Standby, Warm};
use super::{Host, Output, Program, RunError, RunResult};
use crate::mux::{self, ControlEvent};

/// After the program's shell exited, how long its streams may stay quiet but open before the
/// answer goes without them: a background child that holds them would otherwise hold the
/// call. Counted from the last byte, so output still in flight on a slow link is not cut.
const BACKGROUND_GRACE: Duration = Duration::from_millis(200);
/// After a stop, the longest the caller waits for its answer (the kill normally takes a few
/// milliseconds; a stopped master or a stuck login shell may not let it run).
const ANSWER_GRACE: Duration = Duration::from_secs(2);
/// After the kill finished, how long the streams may take to close before the task lets the
/// channel go (a daemonized grandchild may hold them open forever).
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(2);
/// After a stop, how long the task waits for a silent login shell to report the group.
const MARKER_WAIT: Duration = Duration::from_secs(60);
/// Past its queue's bound, or past the moment its text went whole when that is later, how
/// long a program's group may take to be reported.
const START_GRACE: Duration = Duration::from_secs(2);
/// How long a master whose channel ended without a word may take to show as exited.
const MASTER_EXIT_WAIT: Duration = Duration::from_millis(500);
/// A time no timer reaches: the "never" of the loop's optional timers.
const NEVER: Duration = Duration::from_secs(400 * 86_400);
/// The read buffer of a stream at first: most commands print little, and a buffer is zeroed
/// when made.
const FIRST_READ_BYTES: usize = 4096;
/// The read buffer once a read filled the first one.
const BULK_READ_BYTES: usize = 64 * 1024;
/// An output pipe's size once its command prints in bulk: 4 times Linux's default.
const BULK_PIPE_BYTES: i32 = 256 * 1024;

/// Where a run's result goes, counting the run as pending (see `Host::pending`) until it is
/// sent, or dropped.
struct Answer {
    tx: oneshot::Sender<Result<RunResult, RunError>>,
    pending: Option<super::Counted>,
}

impl Answer {
    /// Sends the result (a caller that went away no longer wants it). The run stops counting
    /// as pending first when `group_done` (nothing of the program is left to kill); otherwise
    /// the count comes back, for the caller to keep until the run ends.
    fn send(
        mut self,
        result: Result<RunResult, RunError>,
        group_done: bool,
    ) -> Option<super::Counted> {
        let pending = self.pending.take();
        let pending = if group_done { None } else { pending };
        let _ = self.tx.send(result);
        pending
    }
}

/// Why a run is being stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    TimedOut,
    /// The caller went away, the session is closing, or the spool failed.
    Cancelled,
}

/// One output stream: the marker scan in front, then the bounded capture and the spool.
struct Stream {
    pipe: tokio::net::unix::pipe::Receiver,
    /// The program's second-stage marker, after the framing's (see `Program::gate`).
    gate: Option<MarkerScan>,
    /// Whether the pipe was enlarged for bulk output.
    enlarged: bool,
    buf: Vec<u8>,
    scan: MarkerScan,
    /// The program shell's exit report, taken out after the start marker (see `framing`).
    exit: LineScan,
    /// The end marker (see `runner`).
    end: LineScan,
    capture: Capture,
    spool: Option<Spool>,
    /// The run's followers, and which stream this is to them.
    observer: Option<(Arc<Observer>, usize)>,
    /// The run was given a spool for this stream: once the spool is gone (answered, or
    /// dropped with a failed run), later bytes are not counted for followers, who read the
    /// spool's file.
    spooled: bool,
    eof: bool,
}

impl Stream {
    /// A full read means the command prints in bulk: a larger pipe lets the master and the
    /// daemon wake a quarter as often. Only then: Linux charges every enlarged pipe to the
    /// user's pipe allowance, whose exhaustion shrinks the pipes of all the user's programs.
    /// Best effort: a smaller pipe still works.
    fn enlarge(&mut self) {
        self.enlarged = true;
        crate::platform::enlarge_pipe(std::os::fd::AsFd::as_fd(&self.pipe), BULK_PIPE_BYTES);
    }

    fn new(
        pipe: tokio::net::unix::pipe::Receiver,
        (scan, exit, end): (MarkerScan, LineScan, LineScan),
        program: &Program,
        stream: usize,
    ) -> Self {
        Self {
            gate: None,
            enlarged: false,
            pipe,
            buf: vec![0u8; FIRST_READ_BYTES],
            scan,
            exit,
            end,
            capture: Capture::new(program.max_output_bytes),
            spool: None,
            observer: program.observer.clone().map(|o| (o, stream)),
            spooled: program.spool.is_some(),
            eof: false,
        }
    }

    /// Reads the next chunk into `buf`; 0 at the end of the stream (or a failed read).
    async fn read(&mut self) -> usize {
        self.pipe.read(&mut self.buf).await.unwrap_or(0)
    }

    /// Takes what `read` returned: `n` bytes of `buf`, or the end of the stream. Says whether
    /// bytes came; fails only when the spool cannot be written.
    fn absorb(&mut self, n: usize) -> std::io::Result<bool> {
        if n == 0 {
            self.eof = true;
            self.scan.finish();
            let held = self.take_held();
            self.keep(&held)?;
            if let Some(gate) = self.gate.as_mut() {
                gate.finish();
            }
            return Ok(false);
        }
        if n == self.buf.len() {
            if self.buf.len() < BULK_READ_BYTES {
                self.buf.resize(BULK_READ_BYTES, 0);
            } else if !self.enlarged {
                self.enlarge();
            }
        }
        // Field by field, so the program's bytes stay borrowed from the read buffer (no copy
        // of bulk output).
        let framed = self.scan.feed(&self.buf[..n]);
        let reported = self.exit.feed(&framed);
        let own = self.end.feed(&reported);
        keep(
            &mut self.gate,
            (&mut self.capture, &mut self.spool, self.spooled),
            self.observer.as_ref(),
            &own,
        )?;
        Ok(true)
    }

    /// What the exit and end scans still hold back (a possible start of their nonces): the
    /// program's, once no more comes.
    fn take_held(&mut self) -> Vec<u8> {
        let from_exit = self.exit.take_held();
        let mut held = self.end.feed(&from_exit).into_owned();
        held.extend(self.end.take_held());
        held
    }

    /// Passes the program's own bytes through the gate into the capture and the spool.
    fn keep(&mut self, own: &[u8]) -> std::io::Result<()> {
        keep(
            &mut self.gate,
            (&mut self.capture, &mut self.spool, self.spooled),
            self.observer.as_ref(),
            own,
        )
    }

    /// The stream's answer: the capture so far (with what the end scan still held) and the
    /// finished spool. Later output (of children that outlive the program) is read and
    /// dropped.
    fn answer(&mut self) -> std::io::Result<Output> {
        let held = self.take_held();
        self.keep(&held)?;
        let limit = self.capture.limit();
        let capture = std::mem::replace(&mut self.capture, Capture::new(limit));
        let spooled: Option<Spooled> = self.spool.take().map(Spool::finish).transpose()?;
        Ok(capture.finish(spooled))
    }
}

/// Passes a stream's own bytes through its gate into its capture and its spool, then counts
/// them for the run's followers.
fn keep(
    gate: &mut Option<MarkerScan>,
    (capture, spool, spooled): (&mut Capture, &mut Option<Spool>, bool),
    observer: Option<&(Arc<Observer>, usize)>,
    own: &[u8],
) -> std::io::Result<()> {
    let own = match gate.as_mut() {
        Some(gate) => gate.feed(own),
        None => own.into(),
    };
    capture.push(&own);
    let kept = match (spool.as_mut(), spooled) {
        (Some(spool), _) => spool.write(&own)?,
        (None, true) => 0,
        (None, false) => own.len(),
    };
    if let Some((observer, stream)) = observer {
        observer.push(*stream, &own[..kept], kept < own.len());
    }
    Ok(())
}

/// The program text on its way to the channel's stdin, written in steps so a stop knows how
/// much of it went out. The stdin stays open afterwards: the channel's shell waits there for
/// its next program.
struct Feed {
    pipe: Option<tokio::net::unix::pipe::Sender>,
    payload: Vec<u8>,
    written: usize,
}

impl Feed {
    fn done(&self) -> bool {
        self.pipe.is_none() || self.written >= self.payload.len()
    }

    /// Writes the next part; closes stdin when the remote side stopped reading.
    async fn step(&mut self) {
        use tokio::io::AsyncWriteExt;
        let Some(pipe) = self.pipe.as_mut() else {
            return std::future::pending().await;
        };
        match pipe.write(&self.payload[self.written..]).await {
            Ok(n) if n > 0 => self.written += n,
            _ => self.pipe = None,
        }
    }

    /// Whether the program's group went out whole: only then can any of it run.
    fn group_sent(&self) -> bool {
        self.payload.len() - self.written <= framing::PAYLOAD_TAIL_AFTER_GROUP
    }
}

/// A stop in progress.
struct Stopping {
    reason: StopReason,
    /// False when the payload was cut before its group (nothing can run), and for control
    /// programs (a kill is never killed): nothing to kill.
    must_kill: bool,
    /// The payload was cut before its group, and the program answers a caller (not a kill's
    /// own): nothing of it ran.
    nothing_ran: bool,
    /// The group holds root processes: the kill runs through sudo.
    kill_as_root: bool,
    kill: Option<JoinHandle<Killed>>,
    killed: Option<Killed>,
    answer_by: Instant,
    /// When the task lets the channel go: after the kill's drain, or when the group never
    /// became known.
    give_up_at: Instant,
}

impl Stopping {
    fn kill_over(&self) -> bool {
        !self.must_kill || self.killed.is_some()
    }

    fn killing(&self) -> bool {
        self.kill.is_some() && self.killed.is_none()
    }
}

/// Runs `program` on `host`; sends the result on `answer` as soon as it is known, then
/// finishes the run's business (a kill, a channel still closing) before returning.
pub(super) async fn drive(
    host: Host,
    program: Program,
    stop: CancellationToken,
    answer: oneshot::Sender<Result<RunResult, RunError>>,
) {
    let _active = (!program.control).then(|| ActiveRun::new(&host));
    let pending = (!program.control).then(|| super::Counted::new(&host.pending));
    let mut answer = Some(Answer {
        tx: answer,
        pending,
    });
    let outcome = run(&host, program, &stop, &mut answer).await;
    // Its channel is closed or waiting again: a run the server refused one may have it.
    host.channel_freed.notify_one();
    if let (Some(answer), Some(outcome)) = (answer, outcome) {
        drop(answer.send(outcome, true));
    }
}

/// Counts a run as active for as long as it lives.
struct ActiveRun(std::sync::Arc<tokio::sync::watch::Sender<u32>>);

impl ActiveRun {
    fn new(host: &Host) -> Self {
        host.active.send_modify(|n| *n += 1);
        Self(host.active.clone())
    }
}

impl Drop for ActiveRun {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

fn spool_err(e: std::io::Error) -> RunError {
    RunError::Failed(format!("cannot write the spool file: {e}"))
}

/// A channel for one attempt, with the slot it holds (none for a kill's own channel).
struct Opened {
    permit: Option<OwnedSemaphorePermit>,
    /// The kill's hold on the session's kill channel, when this is it.
    lease: Option<Lease>,
    session: mux::MuxSession,
    /// The channel was opened for this program (its shell needs its setup).
    fresh: bool,
    /// When its login shell started.
    opened_at: Instant,
    /// Counts the channel as held by a run (see `Host::channels_held`) from the moment it is
    /// the run's, its login included, to the run's end.
    held: super::Counted,
}

/// What one attempt came to. One per attempt, moved once: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Attempt {
    /// Nothing ran: the waiting channel was stale or had ended. A fresh one is needed.
    Retry,
    /// The outcome still to be sent, or None when it was sent already.
    Over(Option<Result<RunResult, RunError>>),
}

/// The run itself. Returns the outcome still to be sent, or None when it was sent already.
/// Spool files not handed to an answer remove themselves when the run ends.
async fn run(
    host: &Host,
    mut program: Program,
    stop: &CancellationToken,
    answer: &mut Option<Answer>,
) -> Option<Result<RunResult, RunError>> {
    let started = Instant::now();
    let deadline = started + program.timeout;
    let queue_deadline = program
        .queue_timeout
        .map_or(deadline, |queue| deadline.min(started + queue));
    // A kill must run while its session closes: that is when kills are needed most.
    let closing = match program.control {
        true => CancellationToken::new(),
        false => host.closing.clone(),
    };
    let framing = match Framing::new() {
        Ok(f) => f,
        Err(e) => return Some(Err(RunError::Failed(format!("no randomness: {e}")))),
    };
    let _command_slot = match program.command {
        true => {
            let slot = tokio::select! {
                slot = channel::acquire_slot(&host.command_slots, queue_deadline) => slot,
                _ = stop.cancelled() => return Some(Err(RunError::Cancelled)),
                _ = closing.cancelled() => return Some(Err(RunError::Cancelled)),
            };
            match slot {
                Ok(slot) => Some(slot),
                Err(OpenError::TimedOut(why)) => return Some(no_channel_in_time(started, why)),
                Err(_) => return Some(Err(RunError::ConnectionLost)),
            }
        }
        false => None,
    };
    let mut waiting_ok = true;
    loop {
        let opened = tokio::select! {
            r = open(host, &program, queue_deadline, waiting_ok) => r,
            // Nothing was sent yet: nothing runs.
            _ = stop.cancelled() => return Some(Err(RunError::Cancelled)),
            _ = closing.cancelled() => return Some(Err(RunError::Cancelled)),
        };
        let opened = match opened {
            Ok(opened) => opened,
            Err(OpenError::TimedOut(why)) => return Some(no_channel_in_time(started, why)),
            Err(OpenError::SlotsClosed) => return Some(Err(RunError::ConnectionLost)),
            Err(OpenError::Mux(e)) => {
                // A master that died as it was asked ends its socket a moment before it shows
                // as exited: `lost` waits that moment out.
                return Some(Err(if lost(host).await {
                    RunError::ConnectionLost
                } else {
                    RunError::Failed(format!("cannot use the session's master: {e}"))
                }));
            }
        };
        let run = Run {
            host,
            framing: &framing,
            started,
            deadline,
            stop,
            closing: &closing,
        };
        match run.attempt(&mut program, opened, answer).await {
            Attempt::Retry => {
                tracing::debug!("the waiting channel was stale or gone; opening a fresh one");
                waiting_ok = false;
            }
            Attempt::Over(outcome) => return outcome,
        }
    }
}

impl Opened {
    /// A channel that waited for its program, with its slot.
    fn waiting(host: &Host, warm: Warm) -> Self {
        Self {
            permit: Some(warm.permit),
            lease: None,
            session: warm.session,
            fresh: false,
            opened_at: warm.opened_at,
            held: super::Counted::new(&host.running),
        }
    }

    /// The session's kill channel, lent to a kill.
    fn lent(host: &Host, (lease, kept): (Lease, Kept)) -> Self {
        Self {
            permit: None,
            lease: Some(lease),
            session: kept.session,
            fresh: false,
            opened_at: kept.opened_at,
            held: super::Counted::new(&host.running),
        }
    }
}

/// A channel for `program`: a waiting one when `waiting_ok` and one is ready, else a new one.
async fn open(
    host: &Host,
    program: &Program,
    deadline: Instant,
    waiting_ok: bool,
) -> Result<Opened, OpenError> {
    if program.control {
        return open_for_kill(host, deadline, waiting_ok).await;
    }
    // Before a run takes a channel beside other work, the kill channel holds its session: on
    // a server whose sessions the commands could fill, the run then waits, not its kill.
    let beside = host.work_beside(1, 0);
    if beside {
        KillChannel::ensure(host, deadline).await;
    }
    // A waiting channel only needs the program text. Not while the master is stopped: the
    // text would wait in its buffers and run whenever it resumes.
    if waiting_ok
        && !host.master_stopped()
        && let Some(warm) = host.standby.take()
    {
        return Ok(Opened::waiting(host, warm));
    }
    let _opening = host.standby.opening();
    let permit = channel::acquire_slot(&host.slots, deadline).await?;
    // A refusal means sshd allows fewer sessions than our slots (see `kill_channel`).
    let refusals = kill_channel::Refusals::default();
    let refused = || kill_channel::refused(host, &refusals, 0);
    // A channel that came free after a wait goes to the kill channel first when it is wanted
    // (its open was refused): the run waits on, not a kill.
    let mut session = loop {
        let session = channel::open_with_retry(
            &host.control_path,
            framing::BOOTSTRAP,
            deadline,
            channel::Retries::Patient(&host.channel_freed),
            refused,
        )
        .await?;
        match beside {
            true => match host.kill_channel.claim(host, session) {
                Some(session) => break session,
                None => continue,
            },
            false => break session,
        }
    };
    let opened_at = Instant::now();
    let held = super::Counted::new(&host.running);
    // Until the runner is ready only its own text went out: dropping this future (a stop)
    // closes the channel with nothing of the program sent.
    let ready = program.ready_first && runner_ready(&mut session, deadline).await?;
    Ok(Opened {
        permit: Some(permit),
        lease: None,
        session,
        fresh: !ready,
        opened_at,
        held,
    })
}

/// A channel for a kill, which skips the queue: the kill channel when it waits, else a
/// waiting standby channel (on a server with few sessions it may hold the last one), else one
/// of its own, opened while watching for the kill channel to come free (on a full server it
/// is the only channel a kill can get). Waiting channels are left alone while the master is
/// stopped, as for commands.
async fn open_for_kill(
    host: &Host,
    deadline: Instant,
    waiting_ok: bool,
) -> Result<Opened, OpenError> {
    let waiting_ok = waiting_ok && !host.master_stopped();
    if waiting_ok {
        if let Some(lent) = host.kill_channel.lend() {
            return Ok(Opened::lent(host, lent));
        }
        if let Some(warm) = host.standby.take() {
            return Ok(Opened::waiting(host, warm));
        }
    }
    let refused = || host.standby.release_one();
    let own = async {
        let session = channel::open_with_retry(
            &host.control_path,
            framing::BOOTSTRAP,
            deadline,
            channel::Retries::Brisk,
            refused,
        )
        .await?;
        Ok(Opened {
            permit: None,
            lease: None,
            session,
            fresh: true,
            opened_at: Instant::now(),
            held: super::Counted::new(&host.running),
        })
    };
    let kill_channel = async {
        match waiting_ok {
            true => Ok(Opened::lent(host, host.kill_channel.lend_when_free().await)),
            false => std::future::pending().await,
        }
    };
    tokio::select! {
        opened = own => opened,
        opened = kill_channel => opened,
    }
}

/// Sends a new channel the runner's ready text and waits, until `deadline`, for it to say
/// it is ready. False when the login shell ended first: the channel then takes the program as
/// a fresh one, which reports why.
async fn runner_ready(session: &mut mux::MuxSession, deadline: Instant) -> Result<bool, OpenError> {
    let started = tokio::time::timeout_at(deadline, channel::start_runner(session));
    match started.await {
        Ok(started) => started.map_err(|e| OpenError::Mux(mux::MuxError::Io(e))),
        Err(_) => Err(OpenError::TimedOut(channel::NoChannel::LoginSilent)),
    }
}

/// The answer of a run that got no channel before its deadline: an error, as nothing ran
/// (`ok: true` always means a command started); its spools go with the program.
fn no_channel_in_time(started: Instant, why: channel::NoChannel) -> Result<RunResult, RunError> {
    Err(RunError::ChannelsBusy {
        waited: started.elapsed().as_secs_f64(),
        why,
    })
}

/// What every attempt of one run shares.
struct Run<'a> {
    host: &'a Host,
    framing: &'a Framing,
    started: Instant,
    deadline: Instant,
    stop: &'a CancellationToken,
    closing: &'a CancellationToken,
}

impl Run<'_> {
    /// Runs `program` on one channel, and keeps the channel for the next program when the
    /// program left it idle.
    async fn attempt(
        &self,
        program: &mut Program,
        opened: Opened,
        answer: &mut Option<Answer>,
    ) -> Attempt {
        let (host, started, deadline) = (self.host, self.started, self.deadline);
        let Opened {
            permit,
            lease,
            session,
            fresh,
            opened_at,
            held: _held,
        } = opened;
        let mux::MuxSession {
            mut control,
            stdin,
            stdout,
            stderr,
        } = session;
        // A program that holds root processes never shares its channel (the shell cannot tell
        // whether they are gone), nor does one whose channel will not be kept: its shell then
        // ends with the program instead of starting the next program's shell for nothing.
        // A kill's channel is kept when it is the kill channel, or the kill channel is wanted.
        let kept_for_kills = program.control && (lease.is_some() || host.kill_channel.takes_back());
        let keep = !program.kill_as_root
            && (permit.is_some() && host.standby.keeps_channels() || kept_for_kills);
        let (mut feed, mut out, mut err) =
            wire(self.framing, program, fresh, keep, (stdin, stdout, stderr));
        let mut state = State::default();
        let far = started + NEVER;
        loop {
            let (answer_timer, give_up_at) = match state
                .settle(
                    host,
                    program,
                    fresh,
                    started,
                    (&mut feed, &mut out, &mut err),
                    answer,
                )
                .await
            {
                Next::Retry => return Attempt::Retry,
                Next::Leave => break,
                Next::Wait {
                    answer_timer,
                    give_up_at,
                } => (answer_timer, give_up_at),
            };
            let killing = state.stopping.as_ref().is_some_and(Stopping::killing);
            let not_stopping = state.stopping.is_none();
            let start_by = state
                .start_by(program, started, feed.group_sent(), (&out, &err))
                .unwrap_or(far);
            tokio::select! {
                _ = feed.step(), if !feed.done() => {}
                n = out.read(), if !out.eof => {
                    absorbed(out.absorb(n), &mut state.quiet_since, &mut state.spool_failure);
                },
                n = err.read(), if !err.eof => {
                    absorbed(err.absorb(n), &mut state.quiet_since, &mut state.spool_failure);
                },
                ev = control.next_event(), if !state.closed => match ev {
                    Ok(ControlEvent::Exit(status)) => {
                        state.exit_status.get_or_insert(status);
                        state.quiet_since = Some(Instant::now());
                    }
                    Ok(ControlEvent::Closed) | Err(_) => state.closed = true,
                },
                _ = tokio::time::sleep_until(deadline.min(start_by)), if not_stopping => {
                    state.stopping = Some(begin_stop(StopReason::TimedOut, &mut feed, program));
                },
                _ = self.stop.cancelled(), if not_stopping => {
                    state.stopping = Some(begin_stop(StopReason::Cancelled, &mut feed, program));
                },
                _ = self.closing.cancelled(), if not_stopping => {
                    state.stopping = Some(begin_stop(StopReason::Cancelled, &mut feed, program));
                },
                killed = async {
                    state.stopping.as_mut().and_then(|s| s.kill.as_mut()).expect("guarded").await
                }, if killing => state.killed(killed.unwrap_or(Killed::Unconfirmed), program),
                _ = tokio::time::sleep_until(answer_timer), if answer_timer < far => {}
                _ = tokio::time::sleep_until(give_up_at), if give_up_at < far => break,
            }
        }
        out.scan.log_noise("stdout");
        err.scan.log_noise("stderr");
        let outcome = state
            .last_word(host, answer.is_some(), started, (&mut out, &mut err))
            .await;
        // A stopped run's channel is not used again, even when its group is gone.
        if both_idle(&out, &err)
            && !state.closed
            && state.stopping.is_none()
            && let Some(stdin) = feed.pipe
        {
            let session = mux::MuxSession {
                control,
                stdin,
                stdout: out.pipe,
                stderr: err.pipe,
            };
            keep_channel(host, Kept { session, opened_at }, permit, lease);
        }
        // Whatever of the group outlived its answer is killed or gone by now.
        drop(state.still_pending);
        Attempt::Over(outcome)
    }
}

/// Keeps a channel whose shell waits for the next program: among the warm ones (a run's),
/// back to the kill it was lent to, or as the kill channel.
fn keep_channel(
    host: &Host,
    kept: Kept,
    permit: Option<OwnedSemaphorePermit>,
    lease: Option<Lease>,
) {
    match (permit, lease) {
        (Some(permit), _) => {
            Standby::put_back(host, Warm::returned(permit, kept.session, kept.opened_at))
        }
        (None, Some(lease)) => lease.give_back(kept),
        (None, None) => drop(host.kill_channel.adopt(kept)),
    }
}

/// The program's way onto a channel: what its shell is fed (the framing around the program,
/// `keep` saying whether the shell waits for the next program after it) and its two output
/// streams, scanned for the framing's markers.
fn wire(
    framing: &Framing,
    program: &mut Program,
    fresh: bool,
    keep: bool,
    (stdin, stdout, stderr): (
        tokio::net::unix::pipe::Sender,
        tokio::net::unix::pipe::Receiver,
        tokio::net::unix::pipe::Receiver,
    ),
) -> (Feed, Stream, Stream) {
    let payload = framing.payload(
        &program.script,
        program.cwd.as_deref(),
        program.stdin.as_deref(),
        keep,
        // A kill runs to its end; anything else ends with its caller.
        match (program.control, program.kill_as_root) {
            (true, _) => framing::Tether::None,
            (false, true) => framing::Tether::ToCallerAsRoot,
            (false, false) => framing::Tether::ToCaller,
        },
    );
    let feed = Feed {
        pipe: Some(stdin),
        payload: match fresh {
            true => framing.fresh_text(&payload),
            // A kill does not depend on the login environment: it skips the check.
            false => framing.warm_text(&payload, !program.control),
        },
        written: 0,
    };
    drop(payload);
    let mut out = Stream::new(
        stdout,
        (
            framing.stdout_scanner(),
            framing.exit_report(),
            framing.stdout_end(),
        ),
        program,
        observer::STDOUT,
    );
    let mut err = Stream::new(
        stderr,
        (
            framing.stderr_scanner(),
            framing.exit_report(),
            framing.stderr_end(),
        ),
        program,
        observer::STDERR,
    );
    if let Some(gate) = program.gate.as_deref() {
        err.gate = Some(MarkerScan::new(gate.as_bytes()));
        out.gate = Some(MarkerScan::new(super::stdout_gate(gate).as_bytes()));
    }
    (out.spool, err.spool) = program.spool.take().unzip();
    (feed, out, err)
}

/// What one attempt has learned of its channel so far, between two events.
#[derive(Default)]
struct State {
    /// The channel closed.
    closed: bool,
    exit_status: Option<u32>,
    /// Since when the streams have been quiet after the shell exited.
    quiet_since: Option<Instant>,
    stopping: Option<Stopping>,
    spool_failure: Option<RunError>,
    /// The run's count as pending, when its answer went while its group may live on.
    still_pending: Option<super::Counted>,
    /// When the program's text had gone whole.
    sent_at: Option<Instant>,
}

/// What an attempt does after settling what it has learned.
enum Next {
    /// Nothing ran: a fresh channel is needed.
    Retry,
    /// The channel is done with.
    Leave,
    /// It waits for the next event, or until these times (`started + NEVER` for none).
    Wait {
        answer_timer: Instant,
        give_up_at: Instant,
    },
}

impl State {
    /// Acts on what the streams and the channel said so far: tells the followers, answers
    /// when the program ended (or was stopped, or its spool failed), starts a stop's kill,
    /// and says what comes next.
    async fn settle(
        &mut self,
        host: &Host,
        program: &mut Program,
        fresh: bool,
        started: Instant,
        (feed, out, err): (&mut Feed, &mut Stream, &mut Stream),
        answer: &mut Option<Answer>,
    ) -> Next {
        let far = started + NEVER;
        if let Some(observer) = program.observer.as_ref() {
            follow(observer, out, err, group_end_visible(program));
        }
        let streams_done = out.eof && err.eof;
        let end = ended(out, err);
        if let Some(end) = &end
            && self.exit_status.is_none()
        {
            self.exit_status = Some(end.status);
            self.quiet_since = Some(Instant::now());
        }
        // Both streams ended (by their end marker, or closed): the program's group is
        // done with them.
        let streams_ended = end.is_some()
            && (out.end.end().is_some() || out.eof)
            && (err.end.end().is_some() || err.eof);
        // The channel's shell waits for its next program: nothing more comes.
        let idle = both_idle(out, err);
        // Nothing ran: the waiting channel found its login files changed, or it had
        // ended before it read the program.
        let nothing_ran = Markers::read(&out.scan, &err.scan).stale
            || !fresh
                && (self.closed || streams_done)
                && out.scan.marker().is_none()
                && err.scan.marker().is_none();
        if nothing_ran && self.stopping.is_none() {
            program.spool = out.spool.take().zip(err.spool.take());
            return Next::Retry;
        }
        // The program's own end: its end markers, or its shell exited and its streams
        // closed, or a background child holds them, quiet, past the grace.
        let program_done = streams_ended
            || (self.exit_status.is_some() || self.closed) && streams_done
            || self
                .quiet_since
                .is_some_and(|at| at.elapsed() >= BACKGROUND_GRACE);
        if let Some(failure) = self.spool_failure.take() {
            // The complete copy asked for cannot be kept: the run is abandoned and ended.
            drop_spools(out, err);
            if let Some(a) = answer.take() {
                self.still_pending = a.send(Err(failure), false);
            }
            if self.stopping.is_none() {
                self.stopping = Some(begin_stop(StopReason::Cancelled, feed, program));
            }
        }
        // A channel left idle goes back before the answer does (after the loop), so a
        // command sent right after the answer finds it waiting.
        if answer.is_some() && self.stopping.is_none() && program_done && !idle {
            let result = complete(host, out, err, self.exit_status, started).await;
            // A group that outlived its program (a background child) is killed at the
            // timeout: the run counts as pending until then.
            let group_done = end.as_ref().is_some_and(|e| e.after != After::Left);
            if let Some(a) = answer.take() {
                self.still_pending = a.send(result, group_done);
            }
        }
        if let Some(stop) = self.stopping.as_mut() {
            if stop.kill.is_none() && stop.must_kill {
                start_kill(stop, host, out, err);
            }
            // Nothing to kill (nothing of the program ran): the answer goes now.
            // Otherwise it waits for the kill, at most until `answer_by`.
            if answer.is_some()
                && (!stop.must_kill
                    || stop.kill_over() && (self.closed || streams_done || streams_ended)
                    || Instant::now() >= stop.answer_by)
            {
                let result = stopped_result(stop, started, out, err);
                if let Some(a) = answer.take() {
                    self.still_pending = a.send(result, !stop.killing());
                }
            }
        }
        // The runner says the group is empty and its channel waits, after the answer went:
        // the kill has nothing left to end, and may be waiting for the very channel this run
        // holds (a server allowing one or two sessions, each a command's). It goes, and the
        // channel with it.
        if let Some(stop) = self.stopping.as_mut()
            && stop.killing()
            && answer.is_none()
            && end.as_ref().is_some_and(|e| e.after == After::Idle)
        {
            if let Some(kill) = stop.kill.take() {
                kill.abort();
            }
            self.killed(Killed::AlreadyGone, program);
        }
        let killing = self.stopping.as_ref().is_some_and(Stopping::killing);
        // The kill's answer names the signal, and waiting for it means the group is gone.
        // An end marker came but the other stream neither ended nor closed (a startup
        // file swapped them): past the grace, the channel is let go.
        let stuck = end.as_ref().is_some_and(|e| e.after != After::Left)
            && answer.is_none()
            && self
                .quiet_since
                .is_some_and(|at| at.elapsed() >= BACKGROUND_GRACE);
        if (self.closed && streams_done || idle || stuck) && !killing {
            return Next::Leave;
        }
        let answer_timer = match (&self.stopping, answer.is_some(), self.quiet_since) {
            (Some(s), true, _) => s.answer_by,
            // The grace that answers, or that lets a stuck channel go.
            (None, answering, Some(at))
                if answering || end.is_some_and(|e| e.after != After::Left) =>
            {
                at + BACKGROUND_GRACE
            }
            _ => far,
        };
        let give_up_at = self.stopping.as_ref().map_or(far, |s| s.give_up_at);
        Next::Wait {
            answer_timer,
            give_up_at,
        }
    }

    /// When a program whose start is bounded (it may outlive its call, or it is long file
    /// work) gives up on a host that has it but does not say it started: a host that froze,
    /// or a connection that stalled while the master's keepalive still passes. The bound
    /// counts from the call (with a grace), but leaves at least the grace after the text went
    /// whole (a large one on a slow link takes its time). None while it is still being sent,
    /// once it started or is stopping, and for a program with no bound.
    fn start_by(
        &mut self,
        program: &Program,
        started: Instant,
        sent: bool,
        (out, err): (&Stream, &Stream),
    ) -> Option<Instant> {
        if sent {
            self.sent_at.get_or_insert_with(Instant::now);
        }
        let (queue, sent_at) = (program.queue_timeout?, self.sent_at?);
        let unstarted = Markers::read(&out.scan, &err.scan).group.is_none();
        (self.stopping.is_none() && unstarted).then(|| (started + queue).max(sent_at) + START_GRACE)
    }

    /// Whatever is still to say as the attempt ends (the channel closed before a stop could
    /// answer), unless the answer went already.
    async fn last_word(
        &self,
        host: &Host,
        answering: bool,
        started: Instant,
        (out, err): (&mut Stream, &mut Stream),
    ) -> Option<Result<RunResult, RunError>> {
        if !answering {
            return None;
        }
        Some(match self.stopping.as_ref() {
            Some(stop) => stopped_result(stop, started, out, err),
            None => complete(host, out, err, self.exit_status, started).await,
        })
    }

    /// The stop's kill came back: the group is gone, unless the kill could not confirm it.
    fn killed(&mut self, killed: Killed, program: &Program) {
        if let Some(stop) = self.stopping.as_mut() {
            if let Some(observer) = program.observer.as_ref()
                && killed != Killed::Unconfirmed
                && group_end_visible(program)
            {
                observer.set_group_left(false);
            }
            stop.killed = Some(killed);
            stop.give_up_at = Instant::now() + DRAIN_AFTER_KILL;
        }
    }
}

/// Tells the run's followers what the markers say so far: the group, the start, and at the
/// end whether the group outlived the program.
fn follow(observer: &Observer, out: &Stream, err: &Stream, group_end_visible: bool) {
    let (has_pid, started, ended_known) = observer.marks();
    if !has_pid || !started {
        let markers = Markers::read(&out.scan, &err.scan);
        if let (false, Some(group)) = (has_pid, markers.group) {
            observer.set_pid(group);
        }
        if !started && markers.started && gate_open(out, err) {
            observer.set_started();
        }
    }
    if !ended_known
        && group_end_visible
        && let Some(end) = ended(out, err)
    {
        observer.set_group_left(end.after == After::Left);
    }
}

/// Whether the program's inner stage started: it has no gate, or either stream showed its
/// gate line.
fn gate_open(out: &Stream, err: &Stream) -> bool {
    let seen = |s: &Stream| s.gate.as_ref().map(|g| g.marker().is_some());
    match (seen(out), seen(err)) {
        (None, None) => true,
        (out, err) => out == Some(true) || err == Some(true),
    }
}

/// Whether what the runner or a kill says of the group's end can be trusted: not for a
/// program with root processes, which the user's own check cannot see (`kill -0` is refused).
fn group_end_visible(program: &Program) -> bool {
    !program.kill_as_root
}

/// Whether both end markers say the channel's shell waits for its next program.
fn both_idle(out: &Stream, err: &Stream) -> bool {
    let idle = |s: &Stream| s.end.end().is_some_and(|e| e.after == After::Idle);
    idle(out) && idle(err)
}

/// Bytes that came after the shell exited restart the quiet grace; a spool that cannot be
/// written fails the run.
fn absorbed(
    absorbed: std::io::Result<bool>,
    quiet_since: &mut Option<Instant>,
    spool_failure: &mut Option<RunError>,
) {
    match absorbed {
        Ok(true) => *quiet_since = quiet_since.map(|_| Instant::now()),
        Ok(false) => {}
        Err(e) => {
            spool_failure.get_or_insert(spool_err(e));
        }
    }
}

fn begin_stop(reason: StopReason, feed: &mut Feed, program: &Program) -> Stopping {
    // Closing stdin now means a group not yet sent whole never runs. A group sent whole
    // keeps its stdin until the run is over: its end would have the channel's relay kill the
    // group too (see `runner::RELAY`), racing the kill below, which reports the signal.
    if !feed.group_sent() {
        feed.pipe = None;
    }
    let must_kill = feed.group_sent() && !program.control;
    let now = Instant::now();
    Stopping {
        reason,
        must_kill,
        nothing_ran: !feed.group_sent() && !program.control,
        kill_as_root: program.kill_as_root,
        kill: None,
        killed: None,
        answer_by: now + ANSWER_GRACE,
        give_up_at: now
            + if must_kill {
                MARKER_WAIT
            } else {
                DRAIN_AFTER_KILL
            },
    }
}

/// Starts the kill once the group is known; as root only once the inner stage started (a
/// root kill sudo refuses would leave the user's own processes alone).
fn start_kill(stop: &mut Stopping, host: &Host, out: &Stream, err: &Stream) {
    if let Some(group) = Markers::read(&out.scan, &err.scan).group {
        let as_root = stop.kill_as_root && gate_open(out, err);
        stop.kill = Some(tokio::spawn(kill::kill_group(host.clone(), group, as_root)));
        // The kill has its own budget; the drain starts when it is over.
        stop.answer_by = stop
            .answer_by
            .max(Instant::now() + KILL_BUDGET.min(ANSWER_GRACE));
        stop.give_up_at = Instant::now() + NEVER;
    }
}

/// The answer of a stopped run: timed out with what was captured, or cancelled. A run timed
/// out before the host reported its program's group is no timed-out command (`ok: true`
/// always means a command started): nothing ran when the payload was cut, and otherwise the
/// host has the program but never said it started (its connection stalled, or a fresh
/// channel's login is that slow), so it may still start, and is then killed as soon as it shows.
fn stopped_result(
    stop: &Stopping,
    started: Instant,
    out: &mut Stream,
    err: &mut Stream,
) -> Result<RunResult, RunError> {
    let unconfirmed = stop.must_kill && Markers::read(&out.scan, &err.scan).group.is_none();
    match stop.reason {
        StopReason::Cancelled => {
            drop_spools(out, err);
            Err(RunError::Cancelled)
        }
        StopReason::TimedOut if stop.nothing_ran => {
            drop_spools(out, err);
            Err(RunError::ChannelsBusy {
                waited: started.elapsed().as_secs_f64(),
                why: channel::NoChannel::NotTaken,
            })
        }
        StopReason::TimedOut if unconfirmed => {
            drop_spools(out, err);
            Err(RunError::Unconfirmed)
        }
        StopReason::TimedOut => Ok(RunResult {
            exit_code: None,
            signal: stop.killed.as_ref().and_then(Killed::signal),
            duration: started.elapsed().as_secs_f64(),
            timed_out: true,
            stdout: out.answer().map_err(spool_err)?,
            stderr: err.answer().map_err(spool_err)?,
        }),
    }
}

/// The answer of a run that ended by itself.
async fn complete(
    host: &Host,
    out: &mut Stream,
    err: &mut Stream,
    exit_status: Option<u32>,
    started: Instant,
) -> Result<RunResult, RunError> {
    let markers = Markers::read(&out.scan, &err.scan);
    if out.scan.marker().is_none() && err.scan.marker().is_none() {
        drop_spools(out, err);
        return Err(match exit_status {
            Some(status) => RunError::LoginShell(status.to_string()),
            None if lost(host).await => RunError::ConnectionLost,
            None => RunError::LoginShell("unknown".into()),
        });
    }
    if markers.no_cwd {
        drop_spools(out, err);
        return Err(RunError::NoCwd);
    }
    if !gate_open(out, err) {
        // What came before the gates, all of it: the scans still hold back a possible start
        // of their gate, which no end of the stream flushed (the channel serves on). What
        // sudo said is on stderr, or on stdout when a startup file merged the streams.
        let before_gate = |s: &mut Stream| {
            s.gate.as_mut().map_or(String::new(), |g| {
                g.finish();
                String::from_utf8_lossy(g.noise().1).into_owned()
            })
        };
        let (said, on_stderr) = (before_gate(out), before_gate(err));
        let stderr = match on_stderr.trim().is_empty() {
            true => said.clone(),
            false => on_stderr,
        };
        drop_spools(out, err);
        return Err(RunError::NotStarted { said, stderr });
    }
    let (exit_code, signal) = match (ended(out, err), exit_status) {
        (Some(end), _) => exit_or_signal(&end, exited(out, err)),
        (None, Some(status)) => (Some(status as i32), None),
        // No end marker and no exit message: the channel's shell was killed by a signal (the
        // master drops its name), or the master died.
        // What it printed is kept (its spools too): the caller may say it.
        (None, None) if lost(host).await => {
            let printed = (
                out.answer().map_err(spool_err)?,
                err.answer().map_err(spool_err)?,
            );
            return Err(RunError::LostAfterStart(Box::new(printed)));
        }
        (None, None) => (None, Some("unknown".to_string())),
    };
    Ok(RunResult {
        exit_code,
        signal,
        duration: started.elapsed().as_secs_f64(),
        timed_out: false,
        stdout: out.answer().map_err(spool_err)?,
        stderr: err.answer().map_err(spool_err)?,
    })
}

/// The program's end, from either stream's end marker.
fn ended(out: &Stream, err: &Stream) -> Option<End> {
    out.end.end().or_else(|| err.end.end())
}

/// The status the program shell reported as it exited, from either stream.
fn exited(out: &Stream, err: &Stream) -> Option<u32> {
    [out, err]
        .iter()
        .find_map(|s| s.exit.rest().and_then(|r| r.parse().ok()))
}

/// The answer's `exit_code` and `signal`: a shell that reported the status it ended with
/// exited; one that did not (or reported another: bash runs the exit trap before it lets a
/// signal end it) was ended by a signal when its status says so (named by the host), else
/// exited (an `exec` of another program replaces the shell and its report, and so does an
/// exit trap of the command's own). A status the host names no signal for, above 128 plus
/// Linux's highest signal (64), is no signal anywhere: an exit (`exit 255` under a trap).
pub(super) fn exit_or_signal(end: &End, reported: Option<u32>) -> (Option<i32>, Option<String>) {
    const HIGHEST_SIGNAL_STATUS: u32 = 128 + 64;
    match reported {
        Some(status) if status == end.status => (Some(status as i32), None),
        _ if end.status > 128 && (end.signal.is_some() || end.status <= HIGHEST_SIGNAL_STATUS) => (
            None,
            Some(end.signal.clone().unwrap_or_else(|| "unknown".into())),
        ),
        _ => (Some(end.status as i32), None),
    }
}

/// A failed run's spool files go before its answer does (each removes its file on drop).
fn drop_spools(out: &mut Stream, err: &mut Stream) {
    out.spool = None;
    err.spool = None;
}

/// Whether the master is gone: confirmed by its process when known, else by its socket. Asked
/// only when a channel ended without a word, which is what a dying master does: the kernel
/// closes a killed process's descriptors a moment before it shows it gone, so that moment is
/// waited out.
async fn lost(host: &Host) -> bool {
    match host.master.get() {
        Some(master) => master.exited_within(MASTER_EXIT_WAIT).await,
        None => mux::alive_check(&host.control_path).await.is_err(),
    }
}

/// The run loop over a fake channel: a local `/bin/sh` in the remote shell's place (its login
/// shell having printed noise, then `exec /bin/sh` as a master's channel runs), its streams on
/// pipes, and the test as the master, saying on the control socket how the shell exited.
#[cfg(test)]
mod tests {
    use std::os::fd::OwnedFd;
    use std::process::Stdio;

    use tokio::io::AsyncWriteExt as _;
    use tokio::net::unix::pipe;

    use super::*;

    /// A fake channel for one attempt, and the task that plays its master.
    fn fake_channel(host: &Host, fresh: bool, login: &str) -> (Opened, JoinHandle<()>) {
        let (stdin_tx, stdin_rx) = pipe::pipe().unwrap();
        let (stdout_tx, stdout_rx) = pipe::pipe().unwrap();
        let (stderr_tx, stderr_rx) = pipe::pipe().unwrap();
        let far = |fd: OwnedFd| Stdio::from(fd);
        let mut shell = tokio::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("{login}{}", framing::BOOTSTRAP))
            .stdin(far(stdin_rx.into_blocking_fd().unwrap()))
            .stdout(far(stdout_tx.into_blocking_fd().unwrap()))
            .stderr(far(stderr_tx.into_blocking_fd().unwrap()))
            .process_group(0)
            .spawn()
            .unwrap();
        let (ours, master) = tokio::net::UnixStream::pair().unwrap();
        // The master says how the shell exited, then closes the session.
        let master = tokio::spawn(async move {
            let mut master = master;
            let status = shell.wait().await.unwrap().code().unwrap_or(255) as u32;
            let mut packet = Vec::new();
            packet.extend_from_slice(&12u32.to_be_bytes());
            packet.extend_from_slice(&mux::wire::S_EXIT_MESSAGE.to_be_bytes());
            packet.extend_from_slice(&1u32.to_be_bytes());
            packet.extend_from_slice(&status.to_be_bytes());
            let _ = master.write_all(&packet).await;
        });
        let opened = Opened {
            permit: None,
            lease: None,
            session: mux::MuxSession {
                control: mux::client::SessionControl::over(ours),
                stdin: stdin_tx,
                stdout: stdout_rx,
                stderr: stderr_rx,
            },
            fresh,
            opened_at: Instant::now(),
            held: super::super::Counted::new(&host.running),
        };
        (opened, master)
    }

    /// One attempt of `program` on a fake channel: what it came to, unless its answer came
    /// first (a stopped run goes on to kill its group, which this fake master cannot), and
    /// the answer it sent.
    async fn attempt(
        program: &mut Program,
        fresh: bool,
        login: &str,
        stop: &CancellationToken,
    ) -> (Option<Attempt>, Option<Result<RunResult, RunError>>) {
        let host = Host::new("/nonexistent/sshmcp-fake-master".into(), 0);
        let (opened, master) = fake_channel(&host, fresh, login);
        let framing = Framing::new().unwrap();
        let started = Instant::now();
        let (tx, rx) = oneshot::channel();
        let mut answer = Some(Answer { tx, pending: None });
        let closing = CancellationToken::new();
        let run = Run {
            host: &host,
            framing: &framing,
            started,
            deadline: started + program.timeout,
            stop,
            closing: &closing,
        };
        let mut rx = rx;
        let (came, answered) = {
            let attempting = run.attempt(program, opened, &mut answer);
            tokio::pin!(attempting);
            tokio::select! {
                came = &mut attempting => (Some(came), None),
                answered = &mut rx => (None, answered.ok()),
            }
        };
        drop(answer);
        master.abort();
        let answered = match answered {
            Some(answered) => Some(answered),
            None => rx.await.ok(),
        };
        (came, answered)
    }

    fn text(output: &Output) -> String {
        String::from_utf8_lossy(&output.bytes).into_owned()
    }

    /// A program's streams and exit status come back apart and exact, whatever its login
    /// shell printed first.
    #[tokio::test]
    async fn a_program_answers_its_streams_and_exit_status() {
        let mut program = Program::new(
            "printf out; printf err >&2; exit 3",
            Duration::from_secs(30),
            1024,
        );
        let stop = CancellationToken::new();
        let login = "echo noise; echo noise >&2; ";
        let (_, answer) = attempt(&mut program, true, login, &stop).await;
        let result = answer.expect("an answer").expect("a result");
        assert_eq!(
            (text(&result.stdout), text(&result.stderr)),
            ("out".into(), "err".into())
        );
        assert_eq!((result.exit_code, result.timed_out), (Some(3), false));
    }

    /// Output past the budget keeps its head and tail and says what was left out; the run
    /// still answers with the exit status.
    #[tokio::test]
    async fn output_past_the_budget_keeps_head_and_tail() {
        let script = "i=0; while [ $i -lt 2000 ]; do echo line-$i; i=$((i+1)); done";
        let mut program = Program::new(script, Duration::from_secs(30), 1000);
        let stop = CancellationToken::new();
        let (_, answer) = attempt(&mut program, true, "", &stop).await;
        let result = answer.expect("an answer").expect("a result");
        let out = text(&result.stdout);
        assert!(
            out.starts_with("line-0\n") && out.ends_with("line-1999\n"),
            "{out}"
        );
        assert!(
            result.stdout.bytes.len() <= 1000,
            "{}",
            result.stdout.bytes.len()
        );
        let omitted = result.stdout.omitted.clone().expect("a gap");
        let printed: usize = (0..2000).map(|i| format!("line-{i}\n").len()).sum();
        let (total, kept) = (result.stdout.total_bytes, result.stdout.bytes.len() as u64);
        assert_eq!(total, printed as u64);
        assert_eq!(omitted.end - omitted.start + kept, total);
        assert_eq!(result.exit_code, Some(0));
    }

    /// A waiting channel whose shell ended before it read the program is no run: the
    /// attempt says to retry on a fresh channel, and nothing was answered.
    #[tokio::test]
    async fn a_waiting_channel_that_ended_is_a_retry() {
        let mut program = Program::new("echo never", Duration::from_secs(30), 1024);
        let stop = CancellationToken::new();
        let (came, answer) = attempt(&mut program, false, "exit 0; ", &stop).await;
        assert!(matches!(came, Some(Attempt::Retry)));
        assert!(answer.is_none(), "nothing answered");
    }

    /// A program past its timeout is stopped, and the answer, with what it printed before,
    /// says it timed out; it comes within the stop's answer grace though this fake master
    /// cannot confirm the group's kill (which goes on after it).
    #[tokio::test]
    async fn a_program_past_its_timeout_is_stopped_and_says_so() {
        let mut program = Program::new("echo started; sleep 30", Duration::from_millis(500), 1024);
        let stop = CancellationToken::new();
        let (_, answer) = attempt(&mut program, true, "", &stop).await;
        let result = answer.expect("an answer").expect("a result");
        assert!(result.timed_out, "{:?}", result.exit_code);
        assert_eq!(text(&result.stdout), "started\n");
        assert!(result.duration < 10.0, "{}", result.duration);
    }

    /// A timeout before the host reported the program's group is no timed-out command: the
    /// program went whole to a shell still busy with its login (as on a host that froze), so
    /// it may yet start, and the answer says its start is unconfirmed.
    #[tokio::test]
    async fn a_timeout_before_the_start_leaves_it_unconfirmed() {
        let mut program = Program::new(":", Duration::from_millis(300), 1024);
        let stop = CancellationToken::new();
        let (_, answer) = attempt(&mut program, true, "sleep 10; ", &stop).await;
        let answer = answer.expect("an answer");
        assert!(matches!(answer, Err(RunError::Unconfirmed)), "{answer:?}");
    }

    /// A program whose start is bounded (a handle's, with no runtime limit) gives up on a
    /// host that has it but does not report it started, at the bound and not at its timeout.
    #[tokio::test]
    async fn a_bounded_start_gives_up_on_a_host_that_never_starts_it() {
        let mut program = Program::new(":", Duration::from_secs(600), 1024);
        program.queue_timeout = Some(Duration::from_millis(100));
        let stop = CancellationToken::new();
        let asked = Instant::now();
        let (_, answer) = attempt(&mut program, true, "sleep 20; ", &stop).await;
        let answer = answer.expect("an answer");
        assert!(matches!(answer, Err(RunError::Unconfirmed)), "{answer:?}");
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "{:?}",
            asked.elapsed()
        );
    }

    /// A bounded start is counted once the program went whole: one the shell reads only
    /// after the bound (a slow link, a large program) still runs.
    #[tokio::test]
    async fn a_bounded_start_waits_for_the_program_to_go_whole() {
        let script = format!(": '{}'; echo ran", "x".repeat(300_000));
        let mut program = Program::new(script, Duration::from_secs(600), 1024);
        program.queue_timeout = Some(Duration::from_millis(100));
        let stop = CancellationToken::new();
        let (_, answer) = attempt(&mut program, true, "sleep 3; ", &stop).await;
        let result = answer.expect("an answer").expect("a result");
        assert_eq!(text(&result.stdout), "ran\n");
    }

    /// A timeout while the program was still being fed (the shell read none of it, and it
    /// outgrew the pipe) cuts it: nothing ran, which the answer says.
    #[tokio::test]
    async fn a_timeout_before_the_program_went_whole_ran_nothing() {
        let script = format!(": '{}'", "x".repeat(300_000));
        let mut program = Program::new(script, Duration::from_millis(300), 1024);
        let stop = CancellationToken::new();
        let (_, answer) = attempt(&mut program, true, "sleep 10; ", &stop).await;
        let answer = answer.expect("an answer");
        assert!(
            matches!(
                answer,
                Err(RunError::ChannelsBusy {
                    why: channel::NoChannel::NotTaken,
                    ..
                })
            ),
            "{answer:?}"
        );
    }

    /// A caller that stopped the run before it began gets `Cancelled`.
    #[tokio::test]
    async fn a_run_its_caller_stopped_answers_cancelled() {
        let mut program = Program::new("sleep 30", Duration::from_secs(30), 1024);
        let stop = CancellationToken::new();
        stop.cancel();
        let (_, answer) = attempt(&mut program, true, "", &stop).await;
        let answer = answer.expect("an answer");
        assert!(matches!(answer, Err(RunError::Cancelled)), "{answer:?}");
    }
}
