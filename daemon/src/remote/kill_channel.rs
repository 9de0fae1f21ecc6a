//! The channel a session keeps for kills once its work runs side by side. sshd allows each
//! connection `MaxSessions` sessions (10 by default, as few as 1 on some servers), and a
//! command holds its channel until its processes are gone: commands side by side can hold
//! every session the server allows, and the kill a timeout needs would then find none. So as
//! soon as a run or a copy needs a channel while other work goes on (see
//! `Host::work_beside`), the session opens one more first and keeps it, with its runner
//! waiting (see `runner`), for kills only.
//!
//! The rules:
//! - It is opened before the run that asked for it takes a channel, so on a full server the
//!   run waits in the queue, never the kill. A refused open gives back a waiting standby
//!   channel and tries again for `OPEN_WINDOW`. When the server still has no session free (or
//!   the channel ended: a root kill's channel is not kept), it is wanted: the next run that
//!   asks opens it again, and the first channel a waiting run gets, or a run leaves idle,
//!   becomes it.
//! - Only kills take it; one that finds it lent waits for it while it opens a channel of its
//!   own, and takes whichever comes first. It is never dated out: a kill does not depend on
//!   the login environment, so its program skips the check of the login files.
//! - On a server allowing one or two sessions, it would leave no command, or one at a time
//!   (none beside a long command handle): a command refused for `FORGO_AFTER` while the
//!   session holds at most one channel besides it makes it close, for the session's life.
//!   There a kill waits for a channel to come free, as it did before.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::Host;
use super::channel;
use super::framing::BOOTSTRAP;
use super::standby;
use crate::mux::MuxSession;

/// How long the kill channel may take to start its runner (its login shell reads the startup
/// files first).
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an open of the kill channel may retry refusals, giving back standby channels.
const OPEN_WINDOW: Duration = Duration::from_secs(1);
/// How long a command's refusals must go on while the session holds at most one channel
/// besides the kill channel before it is forgone: sshd frees the session of a channel that
/// just closed only a little later, and refuses until then.
const FORGO_AFTER: Duration = Duration::from_secs(1);

/// The kill channel's open channel and when its login shell started.
pub struct Kept {
    pub session: MuxSession,
    pub opened_at: Instant,
}

/// Where the session's kill channel stands.
enum State {
    /// Not needed: the session's work has not run side by side yet.
    Unneeded,
    /// Needed, but the server had no session free, or it ended.
    Wanted,
    /// Being opened: runs that asked for it wait.
    Opening,
    /// Open, its runner starting: it holds its sshd session.
    Starting,
    /// Waiting for a kill.
    Waiting(Kept),
    /// Running a kill.
    Lent,
    /// Not kept: the server allows two sessions or fewer.
    Forgone,
}

/// A session's kill channel.
pub struct KillChannel {
    state: Mutex<State>,
    changed: Notify,
}

impl Default for KillChannel {
    fn default() -> Self {
        Self {
            state: Mutex::new(State::Unneeded),
            changed: Notify::new(),
        }
    }
}

/// A kill's hold on the kill channel. Dropped without [`give_back`](Lease::give_back) (the
/// channel ended, or its program did not leave it idle), the channel is wanted again.
pub struct Lease(Arc<KillChannel>);

impl Lease {
    /// Returns the channel, idle again, for the next kill (unless it was forgone meanwhile).
    pub fn give_back(self, kept: Kept) {
        let mut state = self.0.state();
        if matches!(*state, State::Lent) {
            *state = State::Waiting(kept);
            drop(state);
            self.0.changed.notify_waiters();
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut state = self.0.state();
        if matches!(*state, State::Lent) {
            *state = State::Wanted;
            drop(state);
            self.0.changed.notify_waiters();
        }
    }
}

impl KillChannel {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn set(&self, new: State) {
        *self.state() = new;
        self.changed.notify_waiters();
    }

    /// Makes sure the kill channel holds its session before a run takes one beside other
    /// work: opens it when there is none, and waits (until `deadline`) while it opens.
    pub async fn ensure(host: &Host, deadline: Instant) {
        let this = &host.kill_channel;
        loop {
            let changed = this.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut state = this.state();
                match *state {
                    State::Unneeded | State::Wanted => {
                        tracing::debug!("opening the channel kept for kills");
                        *state = State::Opening;
                        let host = host.clone();
                        tokio::spawn(async move { open(&host).await });
                    }
                    State::Opening => {}
                    _ => return,
                }
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return;
            }
        }
    }

    /// The kill channel for a kill, if it waits and is still usable (a channel that ended is
    /// let go, and wanted again).
    pub fn lend(self: &Arc<Self>) -> Option<(Lease, Kept)> {
        let mut state = self.state();
        let kept = match std::mem::replace(&mut *state, State::Lent) {
            State::Waiting(kept) => kept,
            other => {
                *state = other;
                return None;
            }
        };
        let lease = Lease(self.clone());
        if standby::open_for_kills(&kept.session) {
            tracing::debug!("a kill takes the channel kept for kills");
            return Some((lease, kept));
        }
        drop(state);
        drop(lease);
        None
    }

    /// Like [`lend`](Self::lend), but waits while the channel is lent, opening or starting;
    /// never answers when there is none.
    pub async fn lend_when_free(self: &Arc<Self>) -> (Lease, Kept) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(lent) = self.lend() {
                return lent;
            }
            changed.await;
        }
    }

    /// Whether a channel given back now would be kept (lent, or wanted).
    pub fn takes_back(&self) -> bool {
        matches!(*self.state(), State::Wanted | State::Lent)
    }

    /// Keeps `kept` as the kill channel when one is wanted; otherwise hands it back.
    pub fn adopt(&self, kept: Kept) -> Option<Kept> {
        let mut state = self.state();
        if !matches!(*state, State::Wanted) {
            return Some(kept);
        }
        *state = State::Waiting(kept);
        drop(state);
        self.changed.notify_waiters();
        None
    }

    /// Takes `session`, a channel a run just got after a wait, when the kill channel is
    /// wanted: its runner starts in the background. Otherwise hands it back.
    pub fn claim(&self, host: &Host, session: MuxSession) -> Option<MuxSession> {
        let mut state = self.state();
        if !matches!(*state, State::Wanted) {
            return Some(session);
        }
        *state = State::Starting;
        drop(state);
        self.changed.notify_waiters();
        let host = host.clone();
        tokio::spawn(async move { start(&host, session).await });
        None
    }

    /// Closes the kill channel for good (waiting, starting or lent: a lent one closes after
    /// its kill): the server allows two sessions or fewer.
    fn forgo(&self) {
        let mut state = self.state();
        if matches!(*state, State::Waiting(_) | State::Starting | State::Lent) {
            tracing::debug!("the server allows two sessions or fewer: none is kept for kills");
            *state = State::Forgone;
            drop(state);
            self.changed.notify_waiters();
        }
    }
}

/// A run's or a copy's refused channel opens so far (see [`refused`]).
#[derive(Default)]
pub struct Refusals {
    /// Since when the session has held at most one channel besides the kill channel.
    tight_since: Mutex<Option<Instant>>,
}

/// What a refused channel open does: a waiting standby channel gives its session back (the
/// answer is whether one did). When none waits, and refusals have gone on for `FORGO_AFTER`
/// while the session's work but the caller's `own_copies` held at most one channel, the
/// server allows two sessions or fewer, and the kill channel is forgone.
pub fn refused(host: &Host, refusals: &Refusals, own_copies: usize) -> bool {
    if host.standby.release_one() {
        return true;
    }
    let mut tight_since = refusals
        .tight_since
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if host.channels_held(own_copies) > 1 {
        *tight_since = None;
        return false;
    }
    if tight_since.get_or_insert_with(Instant::now).elapsed() >= FORGO_AFTER {
        host.kill_channel.forgo();
    }
    false
}

/// Opens the kill channel and starts its runner; on failure it is wanted from the next idle
/// channel.
async fn open(host: &Host) {
    let this = &host.kill_channel;
    let deadline = Instant::now() + OPEN_WINDOW;
    let refused = || host.standby.release_one();
    let retries = channel::Retries::Patient(&host.channel_freed);
    let opened =
        channel::open_with_retry(&host.control_path, BOOTSTRAP, deadline, retries, refused).await;
    let Ok(session) = opened else {
        tracing::debug!("no session free for the kill channel yet");
        return this.set(State::Wanted);
    };
    this.set(State::Starting);
    start(host, session).await;
}

/// Starts the kill channel's runner on `session`, then keeps it, unless it was given up
/// meanwhile (closed at once then).
async fn start(host: &Host, mut session: MuxSession) {
    let this = &host.kill_channel;
    let opened_at = Instant::now();
    let ready = tokio::time::timeout(READY_TIMEOUT, channel::start_runner(&mut session));
    let given_up = async {
        loop {
            let changed = this.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !matches!(*this.state(), State::Starting) {
                return;
            }
            changed.await;
        }
    };
    let ready = tokio::select! {
        ready = ready => matches!(ready, Ok(Ok(true))),
        () = given_up => return,
    };
    let mut state = this.state();
    if matches!(*state, State::Starting) {
        *state = match ready {
            true => State::Waiting(Kept { session, opened_at }),
            false => State::Wanted,
        };
        drop(state);
        this.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::OwnedFd;

    use tokio::net::unix::pipe;

    use super::*;
    use crate::mux::client::SessionControl;

    /// A kept channel over local pipes and a socket pair, the test holding the master's ends:
    /// dropping `master` is the master closing the session.
    struct Fake {
        kept: Kept,
        master: tokio::net::UnixStream,
        _far: [OwnedFd; 3],
    }

    fn fake() -> Fake {
        let pipe = crate::platform::pipe_cloexec;
        let (stdin_far, stdin) = pipe().unwrap();
        let (stdout, stdout_far) = pipe().unwrap();
        let (stderr, stderr_far) = pipe().unwrap();
        let (ours, master) = tokio::net::UnixStream::pair().unwrap();
        let session = MuxSession {
            control: SessionControl::over(ours),
            stdin: pipe::Sender::from_owned_fd(stdin).unwrap(),
            stdout: pipe::Receiver::from_owned_fd(stdout).unwrap(),
            stderr: pipe::Receiver::from_owned_fd(stderr).unwrap(),
        };
        Fake {
            kept: Kept {
                session,
                opened_at: Instant::now(),
            },
            master,
            _far: [stdin_far, stdout_far, stderr_far],
        }
    }

    fn wanted() -> Arc<KillChannel> {
        let channel = Arc::new(KillChannel::default());
        channel.set(State::Wanted);
        channel
    }

    #[tokio::test]
    async fn only_a_wanted_channel_keeps_one_and_a_kill_gives_it_back() {
        let channel = Arc::new(KillChannel::default());
        let fake = fake();
        assert!(!channel.takes_back(), "unneeded: nothing is kept");
        let kept = channel
            .adopt(fake.kept)
            .expect("handed back while unneeded");
        channel.set(State::Wanted);
        assert!(channel.takes_back());
        assert!(channel.adopt(kept).is_none(), "kept once wanted");
        assert!(!channel.takes_back(), "waiting: a second one is not kept");

        let (lease, kept) = channel.lend().expect("a waiting channel is lent");
        assert!(channel.lend().is_none(), "lent to one kill at a time");
        assert!(channel.takes_back());
        lease.give_back(kept);
        let (lease, _kept) = channel.lend().expect("given back, it waits again");
        // A kill that cannot give it back (its program did not leave it idle) wants a new one.
        drop(lease);
        assert!(matches!(*channel.state(), State::Wanted));
        drop(fake.master);
    }

    /// A channel whose session the master closed while it waited is let go at the next kill,
    /// and wanted again.
    #[tokio::test]
    async fn a_channel_that_ended_while_it_waited_is_let_go() {
        let channel = wanted();
        let fake = fake();
        assert!(channel.adopt(fake.kept).is_none());
        drop(fake.master);
        assert!(channel.lend().is_none());
        assert!(matches!(*channel.state(), State::Wanted));
    }

    /// On a server allowing two sessions or fewer the channel is forgone for good: not lent,
    /// not kept, and a kill under way does not bring it back.
    #[tokio::test]
    async fn a_forgone_channel_is_never_lent_or_kept_again() {
        let channel = wanted();
        let (first, second) = (fake(), fake());
        assert!(channel.adopt(first.kept).is_none());
        let (lease, kept) = channel.lend().unwrap();
        channel.forgo();
        lease.give_back(kept);
        assert!(matches!(*channel.state(), State::Forgone));
        assert!(channel.lend().is_none());
        assert!(!channel.takes_back());
        assert!(channel.adopt(second.kept).is_some());
        drop((first.master, second.master));
    }

    /// A kill that finds the channel lent waits for it, and takes it once given back. (The
    /// race the waiter's early `enable` guards against, a give-back between its look and its
    /// wait, is not reproduced here: it needs the two on separate threads at one instant.)
    #[tokio::test]
    async fn a_kill_waits_for_the_lent_channel() {
        let channel = wanted();
        let fake = fake();
        assert!(channel.adopt(fake.kept).is_none());
        let (lease, kept) = channel.lend().unwrap();
        let waiting = channel.lend_when_free();
        tokio::pin!(waiting);
        assert!(
            futures::poll!(waiting.as_mut()).is_pending(),
            "lent: the kill waits"
        );
        lease.give_back(kept);
        let limit = Duration::from_secs(10);
        let (_lease, _kept) = tokio::time::timeout(limit, waiting).await.expect("woken");
        assert!(matches!(*channel.state(), State::Lent));
        drop(fake.master);
    }
}
