//! One `exec` from channel to answer: feed the wrapper, drain both streams into bounded
//! captures, and on timeout or cancellation terminate the remote process group.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sshmcp_proto::exec::ExecResult;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::capture::Capture;
use super::channel::{self, OpenError};
use super::spool::Spool;
use super::wrapper::{self, Header, HeaderParser};
use crate::mux::{self, ControlEvent};

/// How long we keep draining after the kill command finished, before giving up on EOF
/// (a daemonized grandchild may hold the pipes open forever).
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(3);
/// How long the kill command itself may take to get a channel and run.
const KILL_BUDGET: Duration = Duration::from_secs(10);

/// Everything one command needs.
pub struct CommandSpec<'a> {
    pub control_path: &'a Path,
    pub slots: &'a Arc<Semaphore>,
    pub command: &'a str,
    pub cwd: Option<&'a str>,
    pub timeout: Duration,
    pub max_output_bytes: u64,
    pub spool: Option<(Spool, Spool)>,
    /// Fired when the session is being closed.
    pub cancel: &'a CancellationToken,
}

/// Why a command produced no answer.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the session's master is gone")]
    ConnectionLost,
    #[error("the working directory does not exist or cannot be entered")]
    NoCwd,
    #[error("the session was closed while the command ran")]
    Cancelled,
    #[error("{0}")]
    Failed(String),
}

/// Terminates the remote process group if the command future is dropped before it finished
/// (the MCP client cancelled the call, or its connection went away).
struct KillOnDrop {
    control_path: PathBuf,
    pgid: Option<u32>,
}

impl KillOnDrop {
    /// Starts terminating the command's process group, if the wrapper has reported it.
    fn spawn_kill(&self) -> Option<tokio::task::JoinHandle<Option<String>>> {
        let (pgid, control_path) = (self.pgid?, self.control_path.clone());
        let rt = tokio::runtime::Handle::try_current().ok()?;
        Some(rt.spawn(async move { kill_group(&control_path, pgid).await }))
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.spawn_kill();
    }
}

/// Runs the kill command for `pgid` on its own channel; returns the signal that ended it.
async fn kill_group(control_path: &Path, pgid: u32) -> Option<String> {
    let deadline = Instant::now() + KILL_BUDGET;
    let mut session =
        channel::open_with_retry(control_path, &wrapper::kill_command(pgid), deadline)
            .await
            .ok()?;
    drop(session.stdin);
    let mut out = String::new();
    let read = session.stdout.read_to_string(&mut out);
    tokio::time::timeout_at(deadline, read).await.ok()?.ok()?;
    let signal = out.trim();
    (!signal.is_empty()).then(|| signal.to_string())
}

fn timed_out_result(
    started: Instant,
    signal: Option<String>,
    stdout: Capture,
    stderr: Capture,
    spools: (Option<String>, Option<String>),
) -> ExecResult {
    ExecResult {
        exit_code: None,
        signal,
        duration: started.elapsed().as_secs_f64(),
        timed_out: true,
        stdout: stdout.finish(spools.0),
        stderr: stderr.finish(spools.1),
    }
}

/// Runs one command to its end, its timeout, or the session's cancellation.
pub async fn run_command(spec: CommandSpec<'_>) -> Result<ExecResult, RunError> {
    let started = Instant::now();
    let deadline = started + spec.timeout;
    let mut stdout_cap = Capture::new(spec.max_output_bytes);
    let mut stderr_cap = Capture::new(spec.max_output_bytes);
    let (mut out_spool, mut err_spool) = match spec.spool {
        Some((o, e)) => (Some(o), Some(e)),
        None => (None, None),
    };
    let opened = async {
        let permit = channel::acquire_slot(spec.slots, deadline).await?;
        let session =
            channel::open_with_retry(spec.control_path, wrapper::REMOTE_COMMAND, deadline).await?;
        Ok::<_, OpenError>((permit, session))
    };
    let (_permit, session) = tokio::select! {
        r = opened => match r {
            Ok(pair) => pair,
            Err(OpenError::TimedOut) => {
                let spools = finish_spools(out_spool, err_spool)?;
                return Ok(timed_out_result(started, None, stdout_cap, stderr_cap, spools));
            }
            Err(OpenError::MasterGone) => return Err(RunError::ConnectionLost),
            Err(OpenError::Mux(e)) => return Err(RunError::Failed(e.to_string())),
        },
        _ = spec.cancel.cancelled() => return Err(RunError::Cancelled),
    };
    let mux::MuxSession {
        mut control,
        mut stdin,
        mut stdout,
        mut stderr,
    } = session;
    let payload = wrapper::stdin_payload(spec.cwd, spec.command);
    let feed = async move {
        // A write error means the remote side stopped reading; its exit tells the rest.
        let _ = stdin.write_all(&payload).await;
    };
    tokio::pin!(feed);
    let mut guard = KillOnDrop {
        control_path: spec.control_path.to_path_buf(),
        pgid: None,
    };
    let mut header = HeaderParser::default();
    let (mut fed, mut out_eof, mut err_eof, mut closed) = (false, false, false, false);
    let mut exit_status = None;
    let mut stopping: Option<Stopping> = None;
    let mut out_buf = vec![0u8; 64 * 1024];
    let mut err_buf = vec![0u8; 64 * 1024];
    while !(out_eof && err_eof && closed) {
        let give_up_at = stopping.as_ref().map_or(deadline, |s| s.give_up_at);
        tokio::select! {
            _ = &mut feed, if !fed => fed = true,
            r = stdout.read(&mut out_buf), if !out_eof => match r {
                Ok(0) | Err(_) => out_eof = true,
                Ok(n) => {
                    stdout_cap.push(&out_buf[..n]);
                    if let Some(s) = out_spool.as_mut() { s.write(&out_buf[..n]).map_err(spool_err)?; }
                }
            },
            r = stderr.read(&mut err_buf), if !err_eof => {
                let bytes = match r {
                    Ok(0) | Err(_) => { err_eof = true; header.finish().into() }
                    // Borrowed once the header is past: no copy per read on the hot path.
                    Ok(n) => header.feed(&err_buf[..n]),
                };
                if let Some(Header::Running { pgid }) = header.header() {
                    guard.pgid = Some(pgid);
                    // A stop asked for before the pid was known is carried out now.
                    if let Some(stop) = stopping.as_mut() { stop.kill_if_known(&guard); }
                }
                stderr_cap.push(&bytes);
                if let Some(s) = err_spool.as_mut() { s.write(&bytes).map_err(spool_err)?; }
            },
            ev = control.next_event(), if !closed => match ev {
                Ok(ControlEvent::Exit(status)) => exit_status = Some(status),
                Ok(ControlEvent::Closed) | Err(_) => closed = true,
            },
            _ = tokio::time::sleep_until(deadline), if stopping.is_none() => {
                stopping = Some(Stopping::begin(StopReason::TimedOut, &guard));
            },
            _ = spec.cancel.cancelled(), if stopping.is_none() => {
                stopping = Some(Stopping::begin(StopReason::Cancelled, &guard));
            },
            signal = async { stopping.as_mut().and_then(|s| s.kill.as_mut()).expect("guarded").await },
                if stopping.as_ref().is_some_and(Stopping::killing) => {
                if let Some(stop) = stopping.as_mut() { stop.killed(signal.ok().flatten()); }
            },
            _ = tokio::time::sleep_until(give_up_at), if stopping.is_some() => break,
        }
    }
    // The command is over (or abandoned after the kill): nothing is left to kill on drop.
    guard.pgid = None;
    let spools = finish_spools(out_spool, err_spool)?;
    if let Some(mut stop) = stopping {
        // The streams may close before the kill command reports; its answer names the signal,
        // and waiting for it means the group is gone when we answer.
        stop.finish_kill().await;
        return match stop.reason {
            StopReason::Cancelled => Err(RunError::Cancelled),
            StopReason::TimedOut => Ok(timed_out_result(
                started,
                stop.signal,
                stdout_cap,
                stderr_cap,
                spools,
            )),
        };
    }
    if header.header() == Some(Header::NoCwd) {
        return Err(RunError::NoCwd);
    }
    let signal = match exit_status {
        Some(_) => None,
        // No exit message: the remote shell was killed by a signal, or the master died. The
        // master drops the signal's name, so only liveness can tell the two apart.
        None => match mux::alive_check(spec.control_path).await {
            Ok(_) => Some("unknown".to_string()),
            Err(_) => return Err(RunError::ConnectionLost),
        },
    };
    Ok(ExecResult {
        exit_code: exit_status.map(|s| s as i32),
        signal,
        duration: started.elapsed().as_secs_f64(),
        timed_out: false,
        stdout: stdout_cap.finish(spools.0),
        stderr: stderr_cap.finish(spools.1),
    })
}

/// Why a command is being stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    TimedOut,
    Cancelled,
}

/// A stop in progress: the kill command (once the process group is known), its result, and
/// how long we still wait for the streams to close.
struct Stopping {
    reason: StopReason,
    kill: Option<tokio::task::JoinHandle<Option<String>>>,
    kill_done: bool,
    signal: Option<String>,
    give_up_at: Instant,
}

impl Stopping {
    fn begin(reason: StopReason, guard: &KillOnDrop) -> Self {
        let mut stop = Self {
            reason,
            kill: None,
            kill_done: false,
            signal: None,
            give_up_at: Instant::now() + KILL_BUDGET + DRAIN_AFTER_KILL,
        };
        stop.kill_if_known(guard);
        stop
    }

    /// Starts the kill command once the wrapper has reported its process group.
    fn kill_if_known(&mut self, guard: &KillOnDrop) {
        if self.kill.is_none() {
            self.kill = guard.spawn_kill();
        }
    }

    fn killing(&self) -> bool {
        self.kill.is_some() && !self.kill_done
    }

    fn killed(&mut self, signal: Option<String>) {
        self.kill_done = true;
        self.signal = signal;
        self.give_up_at = self.give_up_at.min(Instant::now() + DRAIN_AFTER_KILL);
    }

    async fn finish_kill(&mut self) {
        if let (Some(handle), false) = (self.kill.as_mut(), self.kill_done) {
            let signal = tokio::time::timeout(KILL_BUDGET, handle)
                .await
                .ok()
                .and_then(|r| r.ok());
            self.killed(signal.flatten());
        }
    }
}

fn spool_err(e: std::io::Error) -> RunError {
    RunError::Failed(format!("cannot write the spool file: {e}"))
}

fn finish_spools(
    out: Option<Spool>,
    err: Option<Spool>,
) -> Result<(Option<String>, Option<String>), RunError> {
    let out = out.map(Spool::finish).transpose().map_err(spool_err)?;
    let err = err.map(Spool::finish).transpose().map_err(spool_err)?;
    Ok((out, err))
}
