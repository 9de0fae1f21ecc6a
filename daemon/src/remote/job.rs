//! One run from channel to result, in its own task: feed the payload, split the streams at
//! their markers into bounded captures, and on a timeout, a caller that went away or the
//! session closing, end the remote process group.
//!
//! The rules that make a stop impossible to lose:
//! - Nothing runs until the payload's closing brace is written, so a stop while the payload is
//!   still being fed closes stdin early and nothing of the program runs.
//! - Once the payload is out, the task stays until the group is known (the stderr marker
//!   carries it) and killed, or the channel closes: a stop before the pid is known kills as
//!   soon as it is, not never.
//! - The caller's answer and the task's end are apart: the answer comes when the program is
//!   done (or at most `ANSWER_GRACE` after a stop), while the task keeps its channel slot until
//!   the channel really closes.

use std::time::Duration;

use sshmcp_proto::exec::ExecResult;
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::capture::Capture;
use super::channel::{self, OpenError};
use super::framing::{self, Framing, MarkerScan};
use super::kill::{self, KILL_BUDGET};
use super::spool::{Spool, Spooled};
use super::{Host, Program, RunError};
use crate::mux::{self, ControlEvent};

/// After the program's shell exited, how long its streams may stay open before the answer
/// goes without them: a background child that holds them would otherwise hold the call.
const BACKGROUND_GRACE: Duration = Duration::from_millis(200);
/// After a stop, the longest the caller waits for its answer (the kill normally takes a few
/// milliseconds; a stopped master or a stuck login shell may never let it run).
const ANSWER_GRACE: Duration = Duration::from_secs(2);
/// After the kill finished, how long the streams may take to close before the task lets the
/// channel go (a daemonized grandchild may hold them open forever).
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(2);

type Answer = oneshot::Sender<Result<ExecResult, RunError>>;

/// Why a run is being stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    TimedOut,
    /// The caller went away, or the session is closing.
    Cancelled,
}

/// One output stream: the marker scan in front, then the bounded capture and the spool.
struct Stream {
    pipe: tokio::net::unix::pipe::Receiver,
    scan: MarkerScan,
    capture: Capture,
    spool: Option<Spool>,
    eof: bool,
}

impl Stream {
    /// Takes one read's bytes; returns an error only when the spool cannot be written.
    fn take(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let own = self.scan.feed(bytes);
        self.capture.push(&own);
        if let Some(spool) = self.spool.as_mut() {
            spool.write(&own)?;
        }
        Ok(())
    }

    fn end(&mut self) {
        self.eof = true;
        self.scan.finish();
    }
}

/// The payload on its way to the remote stdin, written in steps so a stop knows how much of
/// it went out.
struct Feed {
    pipe: Option<tokio::net::unix::pipe::Sender>,
    payload: Vec<u8>,
    written: usize,
}

impl Feed {
    fn done(&self) -> bool {
        self.pipe.is_none()
    }

    /// Writes the next part; closes stdin once all of it is out (the sourcing shell reads to
    /// EOF), or when the remote side stopped reading.
    async fn step(&mut self) {
        use tokio::io::AsyncWriteExt;
        let Some(pipe) = self.pipe.as_mut() else {
            return std::future::pending().await;
        };
        match pipe.write(&self.payload[self.written..]).await {
            Ok(n) if n > 0 => self.written += n,
            _ => self.pipe = None,
        }
        if self.written >= self.payload.len() {
            self.pipe = None;
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
    /// False when the payload was cut before its group: nothing can run, nothing to kill.
    group_sent: bool,
    kill: Option<JoinHandle<Option<String>>>,
    kill_done: bool,
    signal: Option<String>,
    answer_by: Instant,
    give_up_at: Option<Instant>,
}

/// Runs `program` on `host`; sends the result on `answer` as soon as it is known, then
/// finishes the run's business (a kill, a channel still closing) before returning.
pub(super) async fn drive(host: Host, program: Program, stop: CancellationToken, answer: Answer) {
    let _active = (!program.control).then(|| ActiveRun::new(&host));
    let mut answer = Some(answer);
    let outcome = run(&host, program, &stop, &mut answer).await;
    if let (Some(answer), Some(outcome)) = (answer, outcome) {
        let _ = answer.send(outcome);
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

/// The run itself. Returns the outcome still to be sent, or None when it was sent already.
async fn run(
    host: &Host,
    program: Program,
    stop: &CancellationToken,
    answer: &mut Option<Answer>,
) -> Option<Result<ExecResult, RunError>> {
    let started = Instant::now();
    let deadline = started + program.timeout;
    let framing = match Framing::new() {
        Ok(f) => f,
        Err(e) => return Some(Err(RunError::Failed(format!("no randomness: {e}")))),
    };
    let (out_spool, err_spool) = match program.spool {
        Some((o, e)) => (Some(o), Some(e)),
        None => (None, None),
    };
    let opened = async {
        let permit = match program.control {
            true => None,
            false => Some(channel::acquire_slot(&host.slots, deadline).await?),
        };
        let session =
            channel::open_with_retry(&host.control_path, framing::BOOTSTRAP, deadline).await?;
        Ok::<_, OpenError>((permit, session))
    };
    let opened = tokio::select! {
        r = opened => r,
        // Nothing was sent yet: nothing runs.
        _ = stop.cancelled() => return Some(Err(RunError::Cancelled)),
        _ = host.closing.cancelled() => return Some(Err(RunError::Cancelled)),
    };
    let (_permit, session) = match opened {
        Ok(pair) => pair,
        Err(OpenError::TimedOut) => {
            // Nothing ran: no channel could be had within the timeout.
            let paths = match finish_spools((out_spool, err_spool)) {
                Ok(paths) => paths,
                Err(e) => return Some(Err(e)),
            };
            let empty = || Capture::new(program.max_output_bytes);
            return Some(Ok(ExecResult {
                exit_code: None,
                signal: None,
                duration: started.elapsed().as_secs_f64(),
                timed_out: true,
                stdout: empty().finish(paths.0),
                stderr: empty().finish(paths.1),
            }));
        }
        Err(OpenError::SlotsClosed) => return Some(Err(RunError::ConnectionLost)),
        Err(OpenError::Mux(e)) => {
            discard_spools((out_spool, err_spool));
            return Some(Err(if host.master_gone() {
                RunError::ConnectionLost
            } else {
                RunError::Failed(format!("cannot use the session's master: {e}"))
            }));
        }
    };
    let mux::MuxSession {
        mut control,
        stdin,
        stdout,
        stderr,
    } = session;
    let mut feed = Feed {
        pipe: Some(stdin),
        payload: framing.payload(
            &program.script,
            program.cwd.as_deref(),
            program.stdin.as_deref(),
        ),
        written: 0,
    };
    let mut out = Stream {
        pipe: stdout,
        scan: framing.scanner(),
        capture: Capture::new(program.max_output_bytes),
        spool: out_spool,
        eof: false,
    };
    let mut err = Stream {
        pipe: stderr,
        scan: framing.scanner(),
        capture: Capture::new(program.max_output_bytes),
        spool: err_spool,
        eof: false,
    };
    let mut closed = false;
    let mut exit_status: Option<u32> = None;
    let mut exited_at: Option<Instant> = None;
    let mut stopping: Option<Stopping> = None;
    let mut spool_failure: Option<RunError> = None;
    let mut out_buf = vec![0u8; 64 * 1024];
    let mut err_buf = vec![0u8; 64 * 1024];
    let far = started + Duration::from_secs(400 * 86_400);
    loop {
        let streams_done = out.eof && err.eof;
        // The program's own end: its shell exited and its streams closed, or a background
        // child holds them past the grace.
        let program_done = (exit_status.is_some() || closed) && streams_done
            || exited_at.is_some_and(|at| at.elapsed() >= BACKGROUND_GRACE);
        if let Some(failure) = spool_failure.take() {
            // The complete copy asked for cannot be kept: the run is abandoned and ended.
            if let Some(a) = answer.take() {
                let _ = a.send(Err(failure));
            }
            if stopping.is_none() {
                stopping = Some(begin_stop(
                    StopReason::Cancelled,
                    &mut feed,
                    host,
                    &err.scan,
                ));
            }
        }
        if answer.is_some() && stopping.is_none() && program_done {
            let result = complete(host, &mut out, &mut err, exit_status, started).await;
            if let Some(a) = answer.take() {
                let _ = a.send(result);
            }
        }
        if let Some(stop) = stopping.as_mut() {
            let kill_over = stop.kill_done || !stop.group_sent;
            if answer.is_some()
                && (kill_over && (closed || streams_done) || Instant::now() >= stop.answer_by)
            {
                let result = stopped_result(stop, started, &mut out, &mut err);
                if let Some(a) = answer.take() {
                    let _ = a.send(result);
                }
            }
            if kill_over && stop.give_up_at.is_none() {
                stop.give_up_at = Some(Instant::now() + DRAIN_AFTER_KILL);
            }
        }
        let killing = stopping
            .as_ref()
            .is_some_and(|s| s.kill.is_some() && !s.kill_done);
        // The kill's answer names the signal, and waiting for it means the group is gone.
        if closed && streams_done && !killing {
            break;
        }
        let answer_timer = match (&stopping, answer.is_some()) {
            (Some(s), true) => s.answer_by,
            _ => match exited_at {
                Some(at) if answer.is_some() => at + BACKGROUND_GRACE,
                _ => far,
            },
        };
        let give_up_at = stopping.as_ref().and_then(|s| s.give_up_at).unwrap_or(far);
        tokio::select! {
            _ = feed.step(), if !feed.done() => {}
            r = out.pipe.read(&mut out_buf), if !out.eof => match r {
                Ok(0) | Err(_) => out.end(),
                Ok(n) => if let Err(e) = out.take(&out_buf[..n]) {
                    spool_failure.get_or_insert(spool_err(e));
                },
            },
            r = err.pipe.read(&mut err_buf), if !err.eof => {
                match r {
                    Ok(0) | Err(_) => err.end(),
                    Ok(n) => if let Err(e) = err.take(&err_buf[..n]) {
                        spool_failure.get_or_insert(spool_err(e));
                    },
                }
                // A stop asked for before the group was known is carried out now.
                if let Some(stop) = stopping.as_mut() {
                    start_kill(stop, host, &err.scan);
                }
            },
            ev = control.next_event(), if !closed => match ev {
                Ok(ControlEvent::Exit(status)) => {
                    exit_status = Some(status);
                    exited_at = Some(Instant::now());
                }
                Ok(ControlEvent::Closed) | Err(_) => closed = true,
            },
            _ = tokio::time::sleep_until(deadline), if stopping.is_none() => {
                stopping = Some(begin_stop(StopReason::TimedOut, &mut feed, host, &err.scan));
            },
            _ = stop.cancelled(), if stopping.is_none() => {
                stopping = Some(begin_stop(StopReason::Cancelled, &mut feed, host, &err.scan));
            },
            _ = host.closing.cancelled(), if stopping.is_none() => {
                stopping = Some(begin_stop(StopReason::Cancelled, &mut feed, host, &err.scan));
            },
            signal = async { stopping.as_mut().and_then(|s| s.kill.as_mut()).expect("guarded").await },
                if killing => {
                if let Some(stop) = stopping.as_mut() {
                    stop.kill_done = true;
                    stop.signal = signal.ok().flatten();
                }
            },
            _ = tokio::time::sleep_until(answer_timer), if answer_timer < far => {}
            _ = tokio::time::sleep_until(give_up_at), if give_up_at < far => break,
        }
    }
    log_noise(&out.scan, "stdout");
    log_noise(&err.scan, "stderr");
    // Whatever is still to say (the channel closed before a stop could answer).
    match (answer.is_some(), stopping.as_mut()) {
        (false, _) => None,
        (true, Some(stop)) => Some(stopped_result(stop, started, &mut out, &mut err)),
        (true, None) => Some(complete(host, &mut out, &mut err, exit_status, started).await),
    }
}

fn begin_stop(reason: StopReason, feed: &mut Feed, host: &Host, scan: &MarkerScan) -> Stopping {
    // Closing stdin now means a group not yet sent whole never runs.
    feed.pipe = None;
    let group_sent = feed.group_sent();
    let mut stop = Stopping {
        reason,
        group_sent,
        kill: None,
        kill_done: false,
        signal: None,
        answer_by: Instant::now() + ANSWER_GRACE,
        give_up_at: None,
    };
    start_kill(&mut stop, host, scan);
    stop
}

/// Starts the kill once the group is known (and only if the program's group could run).
fn start_kill(stop: &mut Stopping, host: &Host, scan: &MarkerScan) {
    if stop.kill.is_some() || !stop.group_sent {
        return;
    }
    if let Some(pgid) = scan.marker().and_then(|m| m.parse::<u32>().ok()) {
        stop.kill = Some(tokio::spawn(kill::kill_group(host.clone(), pgid)));
        // The kill has its own budget; the drain starts when it is over.
        stop.answer_by = stop
            .answer_by
            .max(Instant::now() + KILL_BUDGET.min(ANSWER_GRACE));
    }
}

/// The answer of a stopped run: timed out with what was captured, or cancelled.
fn stopped_result(
    stop: &Stopping,
    started: Instant,
    out: &mut Stream,
    err: &mut Stream,
) -> Result<ExecResult, RunError> {
    match stop.reason {
        StopReason::Cancelled => {
            discard_spools((out.spool.take(), err.spool.take()));
            Err(RunError::Cancelled)
        }
        StopReason::TimedOut => {
            let (stdout, stderr) = take_streams(out, err)?;
            Ok(ExecResult {
                exit_code: None,
                signal: stop.signal.clone(),
                duration: started.elapsed().as_secs_f64(),
                timed_out: true,
                stdout,
                stderr,
            })
        }
    }
}

/// The answer of a run that ended by itself.
async fn complete(
    host: &Host,
    out: &mut Stream,
    err: &mut Stream,
    exit_status: Option<u32>,
    started: Instant,
) -> Result<ExecResult, RunError> {
    if out.scan.marker().is_none() && err.scan.marker().is_none() {
        discard_spools((out.spool.take(), err.spool.take()));
        return Err(match exit_status {
            Some(status) => RunError::LoginShell(status.to_string()),
            None if lost(host).await => RunError::ConnectionLost,
            None => RunError::LoginShell("unknown".into()),
        });
    }
    if out.scan.marker() == Some("nocwd") {
        discard_spools((out.spool.take(), err.spool.take()));
        return Err(RunError::NoCwd);
    }
    let signal = match exit_status {
        Some(_) => None,
        // No exit message: the remote shell was killed by a signal (the master drops its
        // name), or the master died.
        None if lost(host).await => return Err(RunError::ConnectionLost),
        None => Some("unknown".to_string()),
    };
    let (stdout, stderr) = take_streams(out, err)?;
    Ok(ExecResult {
        exit_code: exit_status.map(|s| s as i32),
        signal,
        duration: started.elapsed().as_secs_f64(),
        timed_out: false,
        stdout,
        stderr,
    })
}

/// Whether the master is gone: confirmed by its process when known, else by its socket.
async fn lost(host: &Host) -> bool {
    match host.master.get() {
        Some(master) => !master.alive(),
        None => {
            let check = mux::alive_check(&host.control_path);
            !matches!(
                tokio::time::timeout(Duration::from_secs(5), check).await,
                Ok(Ok(_))
            )
        }
    }
}

fn take_streams(
    out: &mut Stream,
    err: &mut Stream,
) -> Result<
    (
        sshmcp_proto::exec::StreamOutput,
        sshmcp_proto::exec::StreamOutput,
    ),
    RunError,
> {
    let limit = out.capture.limit();
    let out_cap = std::mem::replace(&mut out.capture, Capture::new(limit));
    let err_cap = std::mem::replace(&mut err.capture, Capture::new(limit));
    let paths = finish_spools((out.spool.take(), err.spool.take()))?;
    Ok((out_cap.finish(paths.0), err_cap.finish(paths.1)))
}

fn finish_spools(
    spools: (Option<Spool>, Option<Spool>),
) -> Result<(Option<Spooled>, Option<Spooled>), RunError> {
    let out = spools.0.map(Spool::finish).transpose().map_err(spool_err)?;
    let err = spools.1.map(Spool::finish).transpose().map_err(spool_err)?;
    Ok((out, err))
}

/// A run that gives no output leaves no spool files behind.
fn discard_spools(spools: (Option<Spool>, Option<Spool>)) {
    for spool in [spools.0, spools.1].into_iter().flatten() {
        spool.discard();
    }
}

/// What the login shell printed before the markers: dropped from answers, kept for debugging.
fn log_noise(scan: &MarkerScan, stream: &str) {
    let (bytes, sample) = scan.noise();
    if bytes > 0 {
        tracing::debug!(
            stream,
            bytes,
            sample = %String::from_utf8_lossy(sample).escape_debug(),
            "dropped what the login shell printed"
        );
    }
}
