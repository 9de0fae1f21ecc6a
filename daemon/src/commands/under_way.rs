//! One session's `exec` and `sudo_exec` calls under way, for the person: `sshmcp watch` shows
//! them, `sshmcp output` reads them and `sshmcp kill` stops them, by the id the command's
//! handle takes if the call hands it off (so a follower reads on across the hand-off). A call
//! that answered stays findable for a minute, so a follower learns how it ended; what it
//! printed is the observer's tails, bounded whatever the command prints.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use sshmcp_proto::DaemonError;
use sshmcp_proto::command::{CommandReport, CommandState};
use sshmcp_proto::exec::ExecResult;
use sshmcp_proto::overview::ExecView;
use sshmcp_proto::time::rfc3339;
use tokio::sync::{Notify, watch};

use super::output::chunk;
use super::{Ended, locked, preview};
use crate::remote::RunError;
use crate::remote::observer::{Observer, STDERR, STDOUT};

/// How long a call that answered stays findable.
const ENDED_KEPT_FOR: Duration = Duration::from_secs(60);

/// The most ended calls kept at once (each holds its tails).
const ENDED_KEPT: usize = 16;

/// The calls, by a number of their own, in the order they began.
#[derive(Default)]
pub struct UnderWay {
    calls: Mutex<BTreeMap<u64, Call>>,
}

struct Call {
    id: String,
    tool: &'static str,
    preview: String,
    /// When it was asked for, which stands for its start until the run reports one: the
    /// handle a hand-off makes of it then says the same.
    asked_at: SystemTime,
    observer: Arc<Observer>,
    /// Its processes run as root (`sudo_exec`): a stop runs as root.
    as_root: bool,
    /// The person stopped it: an end by a signal is `killed`.
    stopped: bool,
    /// Told when the person stops it before its shell reported a process group to signal.
    cancel: Arc<Notify>,
    end: watch::Sender<Option<Ended>>,
}

/// What a stop needs of a call: its process group, whether it runs as root, and its end
/// if it has one.
pub struct Target {
    pub pid: Option<u32>,
    pub as_root: bool,
    pub ended: Option<String>,
}

impl UnderWay {
    /// Shows the call of `tool` running `command`, seen by `observer`, until the guard says
    /// how it ended (or is dropped: the call was cut).
    pub fn begin(
        self: &Arc<Self>,
        tool: &'static str,
        command: &str,
        observer: Arc<Observer>,
        as_root: bool,
    ) -> Result<Shown, DaemonError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = super::new_id()?;
        let cancel = Arc::new(Notify::new());
        let call = Call {
            id: id.clone(),
            tool,
            preview: preview(command),
            asked_at: SystemTime::now(),
            observer,
            as_root,
            stopped: false,
            cancel: cancel.clone(),
            end: watch::channel(None).0,
        };
        let mut calls = locked(&self.calls);
        forget_old(&mut calls);
        let call_preview = call.preview.clone();
        calls.insert(number, call);
        Ok(Shown {
            under_way: self.clone(),
            number,
            id,
            preview: call_preview,
            cancel,
        })
    }

    /// The calls under way, oldest first.
    pub fn views(&self) -> Vec<ExecView> {
        locked(&self.calls)
            .values()
            .filter(|call| call.end.borrow().is_none())
            .map(|call| {
                let seen = call.observer.seen();
                ExecView {
                    id: call.id.clone(),
                    tool: call.tool.to_string(),
                    preview: call.preview.clone(),
                    started_at: rfc3339(seen.started_at.unwrap_or(call.asked_at)),
                    bytes: seen.total(),
                    last_line: seen.last_line(),
                }
            })
            .collect()
    }

    /// The ids of the calls under way and of those that answered in the last minute.
    pub fn ids(&self) -> Vec<String> {
        let mut calls = locked(&self.calls);
        forget_old(&mut calls);
        calls.values().map(|call| call.id.clone()).collect()
    }

    /// What a stop of call `id` needs, if this session has it.
    pub fn target(&self, id: &str) -> Option<Target> {
        let calls = locked(&self.calls);
        let call = calls.values().find(|call| call.id == id)?;
        let ended = call
            .end
            .borrow()
            .as_ref()
            .map(|e| e.state.how_it_ended(e.exit_code));
        Some(Target {
            pid: call.observer.pid(),
            as_root: call.as_root,
            ended,
        })
    }

    /// Call `id` is being stopped by the person: its end by a signal is `killed`; `cancel`
    /// when it has no process group to signal yet (nothing runs, or its channel is dropped).
    pub fn stopped(&self, id: &str, cancel: bool) {
        if let Some(call) = locked(&self.calls).values_mut().find(|call| call.id == id) {
            call.stopped = true;
            if cancel {
                call.cancel.notify_one();
            }
        }
    }

    /// The person's stop of call `id` did not take: what ends it is not theirs.
    pub fn stop_failed(&self, id: &str) {
        if let Some(call) = locked(&self.calls).values_mut().find(|call| call.id == id) {
            call.stopped = false;
        }
    }

    /// Call `id` as a command handle's report: its output from `offsets` (else the last
    /// `sizes` bytes) as far as its tails hold it, once it ended or printed more, or after
    /// `wait`; none if this session has no such call.
    pub async fn report(
        &self,
        id: &str,
        wait: Duration,
        offsets: [Option<u64>; 2],
        sizes: [u64; 2],
    ) -> Option<Result<CommandReport, DaemonError>> {
        let (observer, mut end, asked_at) = {
            let calls = locked(&self.calls);
            let call = calls.values().find(|call| call.id == id)?;
            (call.observer.clone(), call.end.subscribe(), call.asked_at)
        };
        if end.borrow().is_none() && !wait.is_zero() {
            // Done waiting once there is something past the offsets read from.
            let mut seen = observer.subscribe();
            let unread = |s: &crate::remote::observer::Seen| {
                (0..2).any(|stream| s.bytes[stream] > offsets[stream].unwrap_or(0))
            };
            let more = async {
                tokio::select! {
                    _ = end.wait_for(Option::is_some) => {}
                    _ = seen.wait_for(unread) => {}
                }
            };
            let _ = tokio::time::timeout(wait, more).await;
        }
        // The end first: bytes counted before it are all there is once it ended.
        let ended = end.borrow().clone();
        let seen = observer.seen();
        // No tails any more: the call was handed off meanwhile, and its handle (of this id)
        // holds every byte in its files.
        let handed_off = std::cell::Cell::new(false);
        let piece = |stream: usize| {
            chunk(
                stream,
                offsets[stream],
                sizes[stream],
                seen.bytes[stream],
                |start, end| {
                    Ok(observer.tail(stream, start, end).unwrap_or_else(|| {
                        handed_off.set(true);
                        (end, Vec::new())
                    }))
                },
            )
        };
        let report = (|| {
            Ok(CommandReport {
                handle_id: id.to_string(),
                pid: seen.pid,
                status: ended.as_ref().map_or(CommandState::Running, |e| e.state),
                exit_code: ended.as_ref().and_then(|e| e.exit_code),
                signal: ended.as_ref().and_then(|e| e.signal.clone()),
                started_at: rfc3339(seen.started_at.unwrap_or(asked_at)),
                ended_at: ended.as_ref().map(|e| rfc3339(e.at)),
                stopped_by: None,
                stdout: piece(STDOUT)?,
                stderr: piece(STDERR)?,
            })
        })();
        (!handed_off.get()).then_some(report)
    }
}

/// Forgets the calls that answered over a minute ago, and the oldest ended beyond
/// [`ENDED_KEPT`].
fn forget_old(calls: &mut BTreeMap<u64, Call>) {
    let now = SystemTime::now();
    let old = |call: &Call| {
        call.end
            .borrow()
            .as_ref()
            .is_some_and(|e| now.duration_since(e.at).unwrap_or_default() > ENDED_KEPT_FOR)
    };
    calls.retain(|_, call| !old(call));
    let mut ended: Vec<u64> = calls
        .iter()
        .filter(|(_, call)| call.end.borrow().is_some())
        .map(|(number, _)| *number)
        .collect();
    let over = ended.len().saturating_sub(ENDED_KEPT);
    for number in ended.drain(..over) {
        calls.remove(&number);
    }
}

/// A call shown under way. Say how it ended with [`Shown::finish`], or that its command
/// became a handle with [`Shown::handed_off`]; dropped otherwise, the call was cut (its
/// client went, and the run with it).
pub struct Shown {
    under_way: Arc<UnderWay>,
    number: u64,
    id: String,
    /// The command as the agent gave it, cut to its preview (a sudo_exec's program is its
    /// wrapper, which no person or agent wants to read).
    preview: String,
    cancel: Arc<Notify>,
}

impl Shown {
    /// The id of the call, which its handle takes if it is handed off.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The call's command preview, which its handle keeps if it is handed off.
    pub fn preview(&self) -> &str {
        &self.preview
    }

    /// Whether the person stopped the call (`sshmcp kill`).
    pub fn stopped_by_person(&self) -> bool {
        locked(&self.under_way.calls)
            .get(&self.number)
            .is_some_and(|call| call.stopped)
    }

    /// Resolves when the person stops the call before it has a process group to signal.
    pub async fn cancelled(&self) {
        self.cancel.notified().await;
    }

    /// The call's command became a handle (of this id): the handle shows it from now on, from
    /// its files, so the tails go.
    pub fn handed_off(&self) {
        if let Some(call) = locked(&self.under_way.calls).remove(&self.number) {
            call.observer.drop_tails();
        }
    }

    /// The call answered `result`.
    pub fn finish(self, result: &Result<ExecResult, RunError>) {
        let outcome = match result {
            Ok(result) => Ok(super::Exit::from(result)),
            // Cut by its client or stopped by the person: `killed`.
            Err(RunError::Cancelled | RunError::StoppedByPerson) => Err(RunError::Cancelled),
            Err(e) => Err(RunError::Failed(e.to_string())),
        };
        self.end(Ended::from_outcome(outcome));
    }

    fn end(&self, mut ended: Ended) {
        let calls = locked(&self.under_way.calls);
        let Some(call) = calls.get(&self.number) else {
            return;
        };
        // Only an end by a signal is the person's doing: a timeout or a lost connection
        // stays what it was.
        if call.stopped && ended.state == CommandState::Completed && ended.signal.is_some() {
            ended.state = CommandState::Killed;
        }
        call.end.send_if_modified(|end| {
            let first = end.is_none();
            if first {
                *end = Some(ended);
            }
            first
        });
    }
}

impl Drop for Shown {
    fn drop(&mut self) {
        self.end(Ended::from_outcome(Err(RunError::Cancelled)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A follower waiting on a call that is handed off meanwhile is sent on to the handle
    /// (`None` here), never told that bytes the handle's files hold were not kept.
    #[tokio::test]
    async fn a_read_across_a_hand_off_goes_on_to_the_handle() {
        let under_way = Arc::new(UnderWay::default());
        let observer = Arc::new(Observer::keeping_tails());
        let shown = under_way
            .begin("exec", "echo first; echo second", observer.clone(), false)
            .unwrap();
        observer.push(STDOUT, b"first\n", false);
        let read = tokio::spawn({
            let (under_way, id) = (under_way.clone(), shown.id().to_string());
            async move {
                under_way
                    .report(&id, Duration::from_secs(30), [Some(6), Some(0)], [64, 64])
                    .await
            }
        });
        tokio::task::yield_now().await;
        shown.handed_off();
        observer.push(STDOUT, b"second\n", false);
        assert!(read.await.unwrap().is_none());
    }

    /// Read before the hand-off, a call's output comes from its tails, each stream apart.
    #[tokio::test]
    async fn a_call_under_way_reads_from_its_tails() {
        let under_way = Arc::new(UnderWay::default());
        let observer = Arc::new(Observer::keeping_tails());
        let shown = under_way
            .begin("exec", "make", observer.clone(), false)
            .unwrap();
        observer.push(STDOUT, b"out\n", false);
        observer.push(STDERR, b"err\n", false);
        let report = under_way
            .report(shown.id(), Duration::ZERO, [Some(0), Some(0)], [64, 64])
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (report.stdout.data, report.stderr.data),
            ("out\n".into(), "err\n".into())
        );
        assert_eq!(report.status, CommandState::Running);
    }
}
