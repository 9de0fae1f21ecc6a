//! What tools keep for each session, in slots the session does not interpret: a daemon gives
//! each new session the tools' state (`Registry::new`'s `Tools`), each tool finds its own by
//! its type, and the session calls the hooks below at the moments that concern all of it
//! (its master lost, its record written or read back, `sshmcp watch`, a hand-over).

use std::any::Any;
use std::sync::Arc;

use futures::future::BoxFuture;
use sshmcp_proto::overview::SessionView;
use sshmcp_proto::session::SessionSummary;

use super::record::{Entry, RecordDue};
use super::{Registry, Session};

/// A tool's state in one session.
pub trait Work: Any + Send + Sync {
    /// The session's master is gone: what lived on it went with it.
    fn master_lost(&self) {}

    /// What `session_list` counts of it.
    fn count(&self, _summary: &mut SessionSummary) {}

    /// What the session's record keeps of it, as its own part of `entry` (`Entry::put`):
    /// `redact` takes session keys an agent pasted out of text that is only shown again.
    fn record(&self, _entry: &mut Entry, _redact: &dyn Fn(&str) -> String) {}

    /// Takes back what a record kept, as a starting daemon re-adopts the session (`ready`:
    /// its master still runs), before the session is listed; also for a session recorded
    /// mid-way, which is then dropped (its `closing` cancelled). So it only takes state back:
    /// it spawns nothing and touches no master and no record (that is `resume`'s).
    fn adopt(&self, _session: &Session, _entry: &mut Entry, _ready: bool) {}

    /// Goes on with what it took back, once the session is listed.
    fn resume(&self, _session: &Arc<Session>, _registry: &Arc<Registry>) {}

    /// What `sshmcp watch` shows of it.
    fn show(&self, _view: &mut SessionView) {}

    /// The daemon hands over to the next one: what runs stops, what the next one resumes is
    /// kept.
    fn hand_over(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// Every tool of every session handed over: the last look before the record is sealed.
    fn handed_over(&self) {}
}

/// Makes the tools' state for a new session; it is given the session's record flag, to raise
/// when what the record keeps changed.
pub type MakeWork = dyn Fn(&Arc<RecordDue>) -> Vec<Arc<dyn Work>> + Send + Sync;

/// What a daemon's tools keep: per session (made for each), and daemon-wide.
pub struct Tools {
    pub make_work: Box<MakeWork>,
    pub shared: Vec<Arc<dyn Any + Send + Sync>>,
}
