//! The one building block for remote work: run a fixed `/bin/sh` program on a session's
//! master, with this stdin, under these limits, and get its exact streams and exit status.
//! `exec` is a program of the caller's text; every later tool is a fixed program plus a parser
//! of its output.
//!
//! Each run is a task of its own, apart from the call that asked for it: a caller that goes
//! away, a timeout, or the session closing stops the run, and the task then ends the remote
//! process group whatever instant that came at (see `job`). The framing that keeps the login
//! shell's noise out of the streams is in `framing`, the shell each channel keeps running for
//! program after program in `runner`, the channel slots in `channel`, the channels waiting
//! for a program in `standby`, the kill in `kill`, the channel kept for kills in
//! `kill_channel`, the bounded capture in `capture`, the
//! complete copies in `spool` and what a followed run has done so far in `observer`.

pub mod capture;
pub mod channel;
pub mod framing;
mod job;
pub mod kill;
pub mod kill_channel;
pub mod observer;
pub mod runner;
pub mod spool;
pub mod standby;
pub mod status;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{Semaphore, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::local_process::ProcessId;

/// Where programs run: one session's master and what every run on it shares.
#[derive(Clone)]
pub struct Host {
    pub control_path: PathBuf,
    /// Channels this master may have open at once (see `channel`).
    pub slots: Arc<Semaphore>,
    /// How many of them callers' commands and transfers may hold (see `channel`): taken
    /// before a slot, held for the run.
    pub command_slots: Arc<Semaphore>,
    /// Fired when the session closes: every run on it stops and kills its program.
    pub closing: CancellationToken,
    /// Runs in progress, kills excluded: the session's active commands.
    pub active: Arc<watch::Sender<u32>>,
    /// The master process, once it is up: only its confirmed death makes a run report the
    /// connection lost (a failed socket call may just be this daemon out of descriptors).
    pub master: Arc<OnceLock<ProcessId>>,
    /// Channels waiting for the next program (see `standby`).
    pub standby: Arc<standby::Standby>,
    /// The channel kept for kills once channels are shared (see `kill_channel`).
    pub kill_channel: Arc<kill_channel::KillChannel>,
    /// Runs not answered yet, kills excluded: what may still need a kill (a command handle
    /// is answered when its program ends).
    pub pending: Arc<AtomicUsize>,
    /// Runs that hold a channel now, its login included (kills included).
    pub running: Arc<AtomicUsize>,
    /// Transfers whose rsync runs or tries to (each holds a channel of the master's).
    pub copies: Arc<AtomicUsize>,
    /// Told when a run of the session ended and let its channel go: an open the server
    /// refused tries again then (see `channel::Retries`).
    pub channel_freed: Arc<tokio::sync::Notify>,
}

impl Host {
    /// No run gets a channel any more: those waiting for one, and later ones, fail at once.
    pub fn close_slots(&self) {
        self.command_slots.close();
        self.slots.close();
    }

    /// A host keeping up to `standby_channels` idle channels for the next programs.
    pub fn new(control_path: PathBuf, standby_channels: usize) -> Self {
        Self {
            control_path,
            slots: Arc::new(Semaphore::new(channel::CHANNEL_SLOTS)),
            command_slots: Arc::new(Semaphore::new(channel::COMMAND_SLOTS)),
            closing: CancellationToken::new(),
            active: Arc::new(watch::channel(0).0),
            master: Arc::new(OnceLock::new()),
            standby: Arc::new(standby::Standby::new(standby_channels)),
            kill_channel: Arc::default(),
            pending: Arc::default(),
            running: Arc::default(),
            copies: Arc::default(),
            channel_freed: Arc::default(),
        }
    }

    /// Whether other work holds a channel of the session, or is on its way to one, beside the
    /// caller's own `own_runs` runs and `own_copies` copies: a run not answered yet (waiting
    /// for its channel, or running) or a transfer's copy. Runs count from their start, so of
    /// two arriving together the later sees the other; a run answered no longer counts while
    /// its channel closes.
    pub fn work_beside(&self, own_runs: usize, own_copies: usize) -> bool {
        self.pending.load(Ordering::Acquire) > own_runs
            || self.copies.load(Ordering::Acquire) > own_copies
    }

    /// How many channels the session's work holds now but the caller's `own_copies` (the kill
    /// channel and waiting standby channels aside): runs' programs and transfers' copies.
    pub fn channels_held(&self, own_copies: usize) -> usize {
        self.running.load(Ordering::Acquire)
            + self
                .copies
                .load(Ordering::Acquire)
                .saturating_sub(own_copies)
    }

    /// Whether the master is known and confirmed gone (exited, or its pid now belongs to
    /// another process).
    pub fn master_gone(&self) -> bool {
        self.master.get().is_some_and(|m| !m.alive())
    }

    /// Whether the master is stopped (SIGSTOP): it forwards nothing until it continues.
    pub fn master_stopped(&self) -> bool {
        self.master.get().is_some_and(ProcessId::stopped)
    }
}

/// Counts one piece of work in a counter of the session's for as long as it lives.
pub struct Counted(Arc<AtomicUsize>);

impl Counted {
    pub fn new(counter: &Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::AcqRel);
        Self(counter.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A program to run: shell text for `/bin/sh`, and the limits it runs under.
pub struct Program {
    /// Shell text, run as one group after the working directory is entered. No NUL byte.
    pub script: String,
    /// The program's stdin; empty when absent.
    pub stdin: Option<Vec<u8>>,
    pub cwd: Option<String>,
    /// From the call's start: queuing for a channel counts.
    pub timeout: Duration,
    /// The longest wait for a channel, when shorter than `timeout`: a command that may run
    /// for days does not wait that long to start. It bounds the whole start (with a short
    /// grace): a host that has the program but does not report it started within it is given
    /// up on as at a timeout.
    pub queue_timeout: Option<Duration>,
    /// A channel opened for this program is sent the program only once its login shell is
    /// through and its runner says it is ready (as the kill channel is): a stop until then
    /// sends nothing, so nothing of the program ever runs. For programs that may outlive
    /// their call (handles), whose stop can come at any moment before they start. Others are
    /// sent with the channel's setup: a round trip less on a new channel (the login itself
    /// may then count against a short timeout on a slow link).
    pub ready_first: bool,
    /// Bytes kept of each stream (head and tail halves).
    pub max_output_bytes: u64,
    /// Complete copies of both streams, when asked for.
    pub spool: Option<(spool::Spool, spool::Spool)>,
    /// The caller's own command (exec, sudo_exec, a handle), which may hold its channel for
    /// as long as it runs: it takes one of the slots commands may hold (see `channel`).
    pub command: bool,
    /// A control program (a kill): it skips the channel queue and is not counted as active,
    /// so it runs even while every slot is taken by the commands it is meant to end.
    pub control: bool,
    /// The program runs root processes (sudo): once its gate opened, its kill runs as root
    /// too, through the same sudo rule.
    pub kill_as_root: bool,
    /// A second-stage marker (a nonce): the program's inner stage (root's bash under sudo)
    /// prints it on stderr, then [`stdout_gate`] of it on stdout, as it starts; only what
    /// follows them is the command's output. Either one seen means the stage started (a
    /// startup file may have merged stderr into stdout, where both then arrive); when
    /// neither appears the run fails with [`RunError::NotStarted`].
    pub gate: Option<String>,
    /// Followers of the run (progress, a command handle), when it has any.
    pub observer: Option<Arc<observer::Observer>>,
}

impl Program {
    /// A program with the usual settings: no stdin, no working directory, no spool.
    pub fn new(script: impl Into<String>, timeout: Duration, max_output_bytes: u64) -> Self {
        Self {
            script: script.into(),
            stdin: None,
            cwd: None,
            timeout,
            queue_timeout: None,
            ready_first: false,
            max_output_bytes,
            spool: None,
            command: false,
            control: false,
            kill_as_root: false,
            gate: None,
            observer: None,
        }
    }
}

/// What a run that ended left: how it ended and both output streams, as bytes. The wire form
/// (text or base64) is made by the tools that answer with it (`exec`), never here.
#[derive(Debug)]
pub struct RunResult {
    /// The program's exit status, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended the program's shell, when one did.
    pub signal: Option<String>,
    /// Seconds from the run's start to its end.
    pub duration: f64,
    /// The timeout ended it (its whole group).
    pub timed_out: bool,
    pub stdout: Output,
    pub stderr: Output,
}

/// One output stream as a run kept it, under its capture's budget.
#[derive(Debug)]
pub struct Output {
    /// The head and the tail of the stream (all of it unless `omitted`), each cut at a
    /// character boundary where bytes were left out between them.
    pub bytes: Vec<u8>,
    /// Bytes the stream held.
    pub total_bytes: u64,
    /// The byte range left out between head and tail, when the stream outgrew the budget.
    pub omitted: Option<std::ops::Range<u64>>,
    /// The complete copy, when the program asked for one.
    pub spooled: Option<spool::Spooled>,
}

/// Why a run produced no result.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The master is confirmed gone.
    #[error("the session's master is gone")]
    ConnectionLost,
    /// The master is confirmed gone, and the command had started before it went: what it
    /// printed until then (stdout, stderr).
    #[error("the session's master is gone, after the command started")]
    LostAfterStart(Box<(Output, Output)>),
    #[error("the working directory does not exist or cannot be entered")]
    NoCwd,
    /// The session closed while the program ran (it was killed).
    #[error("the session was closed while the command ran")]
    Cancelled,
    /// The login shell ended before it started `/bin/sh` (its startup files exited, or it
    /// cannot run commands).
    #[error(
        "the remote login shell ended (status {0}) before it ran the command; \
         check the startup files of the remote user's shell, or whether that shell runs \
         commands at all (/bin/false and nologin do not)"
    )]
    LoginShell(String),
    /// The run timed out after the host had the whole program but before it reported the
    /// program's start: the host may have started it, or may still.
    #[error("{UNCONFIRMED}")]
    Unconfirmed,
    /// The program's gate never opened: its inner stage did not start. What the program said
    /// on stdout, and the start of its stderr, tell why.
    #[error("the command did not start")]
    NotStarted { said: String, stderr: String },
    /// No channel came in time: every one stayed busy, the master did not answer, or a new
    /// channel's login did not finish. Nothing ran.
    #[error("{}", channels_busy_message(*.waited, *.why))]
    ChannelsBusy {
        waited: f64,
        why: channel::NoChannel,
    },
    /// The person stopped the call (`sshmcp kill`) before its command reported a process
    /// group: whatever started was ended with its channel.
    #[error(
        "the user stopped this command (sshmcp kill) before it started; ask them before \
         running it again"
    )]
    StoppedByPerson,
    /// The local files for the run's output could not be made.
    #[error("{0}")]
    LocalFiles(String),
    #[error("{0}")]
    Failed(String),
}

/// Why a run got no channel, for the agent to act on: nothing ran, so a retry is safe.
fn channels_busy_message(waited: f64, why: channel::NoChannel) -> String {
    match why {
        channel::NoChannel::MasterSilent => format!(
            "nothing ran: the session's SSH master did not answer a request for a channel \
             within {waited:.0} s (stopped, or its connection stalled; session_list shows \
             whether the session is still ready). A retry is safe"
        ),
        channel::NoChannel::LoginSilent => format!(
            "nothing ran: a new channel's login shell did not finish starting within \
             {waited:.0} s (a startup file of the remote user's shell may hang). A retry is \
             safe"
        ),
        channel::NoChannel::NotTaken => format!(
            "nothing ran: the host did not take the whole command within {waited:.0} s (its \
             connection stalled, or it reads slowly; session_list shows whether the session is \
             still ready). A retry is safe"
        ),
        channel::NoChannel::Busy => format!(
            "nothing ran: every channel of the session stayed busy for {waited:.0} s (running \
             commands, transfers and long file work hold them, and so do the background \
             children an answered exec left holding its output, until that exec's timeout; a \
             server whose MaxSessions is below 10 has fewer). A retry is safe once one ends: \
             command_list and transfer_list show them, command_kill ends one, disconnect ends \
             all"
        ),
    }
}

/// A run going on in its own task. Dropping it stops the run (its task then ends the remote
/// process group, also when that group is not known yet), unless it was detached.
pub struct Running {
    result: oneshot::Receiver<Result<RunResult, RunError>>,
    stop: Option<tokio_util::sync::DropGuard>,
}

/// What a detached run will answer.
pub type Outcome = oneshot::Receiver<Result<RunResult, RunError>>;

impl Running {
    /// Waits for the result. Cancel-safe: dropped before it answers, the run goes on until
    /// this `Running` is dropped.
    pub async fn result(&mut self) -> Result<RunResult, RunError> {
        let result = (&mut self.result)
            .await
            .unwrap_or_else(|_| Err(RunError::Failed("the run ended without a result".into())));
        // Answered: what the run still does (a channel closing, children that outlive the
        // program until its timeout) is its own business now.
        if let Some(stop) = self.stop.take() {
            stop.disarm();
        }
        result
    }

    /// The run's outcome, and what stops it when dropped (unless disarmed): a run that will be
    /// detached once a step is over (its start), and stopped should its owner go first.
    pub fn split(self) -> (Outcome, Option<tokio_util::sync::DropGuard>) {
        (self.result, self.stop)
    }

    /// Lets the run go on without an owner: only its timeout or the session closing stop it.
    pub fn detach(mut self) -> Outcome {
        if let Some(stop) = self.stop.take() {
            stop.disarm();
        }
        self.result
    }
}

/// The gate's line on stdout: another nonce than stderr's, so that with the streams merged
/// the stderr line is noise before it rather than a second gate.
pub fn stdout_gate(gate: &str) -> String {
    format!("{gate}o")
}

/// Starts `program` on `host`.
pub fn start(host: &Host, program: Program) -> Running {
    let stop = CancellationToken::new();
    let (answer, result) = oneshot::channel();
    tokio::spawn(job::drive(host.clone(), program, stop.clone(), answer));
    Running {
        result,
        stop: Some(stop.drop_guard()),
    }
}

/// Runs `program` on `host` and waits for its result. Dropping this future stops the run.
pub async fn run(host: &Host, program: Program) -> Result<RunResult, RunError> {
    start(host, program).result().await
}

/// How a run's failure reads on the wire. `ConnectionLost` is the session's business too: the
/// service marks the session lost when an operation answers with it.
impl From<RunError> for sshmcp_proto::DaemonError {
    fn from(e: RunError) -> Self {
        use sshmcp_proto::{DaemonError, ErrorCode};
        match e {
            RunError::ConnectionLost => lost_error(),
            RunError::LostAfterStart(_) => lost_after_start(),
            RunError::Unconfirmed => DaemonError::new(ErrorCode::ConnectionLost, UNCONFIRMED),
            RunError::NoCwd => DaemonError::new(ErrorCode::RemotePathNotFound, e.to_string()),
            RunError::Cancelled => DaemonError::new(ErrorCode::SessionClosed, e.to_string()),
            RunError::StoppedByPerson => DaemonError::new(ErrorCode::PolicyDenied, e.to_string()),
            RunError::LocalFiles(_) => DaemonError::new(ErrorCode::InvalidLocalPath, e.to_string()),
            RunError::ChannelsBusy { .. } => {
                DaemonError::new(ErrorCode::ChannelsBusy, e.to_string())
            }
            RunError::LoginShell(_) | RunError::NotStarted { .. } | RunError::Failed(_) => {
                DaemonError::internal(e.to_string())
            }
        }
    }
}

/// Why a call whose host never confirmed its start failed: `connection_lost` without
/// `started` (not known to have started), about a connection that stalled, while the master
/// lives and its keepalive judges whether the session is lost.
const UNCONFIRMED: &str = "the host did not confirm in time whether this call's work started: \
    its connection stalled, the host froze, or a new channel's login took that long \
    (session_list shows whether the session is still ready; a ready one needs no reconnect, \
    and its other work goes on). The host may still do the work once it goes on: check what \
    it did before running it again";

/// Whether `e` is the failure of a call whose host never confirmed its start (the session is
/// not lost for it).
pub fn unconfirmed(e: &sshmcp_proto::DaemonError) -> bool {
    // A caller may say more around it (a forward's check of its listener does).
    e.code == sshmcp_proto::ErrorCode::ConnectionLost && e.message.contains(UNCONFIRMED)
}

/// The error of a call whose command had started when its session's connection went: it
/// says so as a field, since a command run again may do its work twice.
pub fn lost_after_start() -> sshmcp_proto::DaemonError {
    sshmcp_proto::DaemonError::new(
        sshmcp_proto::ErrorCode::ConnectionLost,
        "the session's ssh connection was lost while the command ran: it had started, and may \
         have done part of its work (or still run); disconnect, connect again, and check what \
         it did before running it again",
    )
    .with_details(sshmcp_proto::error::ErrorDetails {
        started: Some(true),
        ..Default::default()
    })
}

/// The error of a call whose session's connection is gone.
pub fn lost_error() -> sshmcp_proto::DaemonError {
    sshmcp_proto::DaemonError::new(
        sshmcp_proto::ErrorCode::ConnectionLost,
        "the session's ssh connection is gone; disconnect it, then connect again",
    )
}

#[cfg(test)]
mod tests {
    use sshmcp_proto::{DaemonError, ErrorCode};

    use super::*;

    /// Each way a run fails reaches the agent as the code it acts on; a command known to
    /// have started says so, and a start the host never confirmed is told apart by its words.
    #[test]
    fn each_run_error_is_the_code_an_agent_acts_on() {
        let busy = RunError::ChannelsBusy {
            waited: 25.0,
            why: channel::NoChannel::Busy,
        };
        for (e, code) in [
            (RunError::ConnectionLost, ErrorCode::ConnectionLost),
            (RunError::Unconfirmed, ErrorCode::ConnectionLost),
            (RunError::NoCwd, ErrorCode::RemotePathNotFound),
            (RunError::Cancelled, ErrorCode::SessionClosed),
            (busy, ErrorCode::ChannelsBusy),
            (
                RunError::Failed("no result".into()),
                ErrorCode::InternalError,
            ),
        ] {
            assert_eq!(DaemonError::from(e).code, code);
        }
        assert!(unconfirmed(&DaemonError::from(RunError::Unconfirmed)));
        assert!(!unconfirmed(&DaemonError::from(RunError::ConnectionLost)));
        assert_eq!(lost_after_start().details.started, Some(true));
        assert_eq!(lost_error().details.started, None);
        for why in [
            channel::NoChannel::Busy,
            channel::NoChannel::MasterSilent,
            channel::NoChannel::LoginSilent,
            channel::NoChannel::NotTaken,
        ] {
            let message = channels_busy_message(25.4, why);
            assert!(message.starts_with("nothing ran"), "{message}");
            assert!(message.contains("25 s"), "{message}");
        }
    }
}
