//! The registry of sessions: connect (identity, limits, serialized authentication, remote
//! facts), disconnect, listing, lookup by key, and the watcher that marks a session lost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sshmcp_proto::error::ErrorDetails;
use sshmcp_proto::limits::{DEFAULT_CONNECT_TIMEOUT_SECS, MAX_CONNECT_TIMEOUT_SECS};
use sshmcp_proto::overview::SessionView;
use sshmcp_proto::policy::PolicyReport;
use sshmcp_proto::session::{
    ConnectRequest, ConnectTarget, Connected, Disconnected, RemoteFacts, SessionAuth, SessionState,
    SessionSummary,
};
use sshmcp_proto::tool::Tool;
use sshmcp_proto::{DaemonError, ErrorCode};
use tokio_util::sync::CancellationToken;

use super::identity::{Resolved, Word, check_word};
use super::master::{self, StartFailure};
use super::{Session, ciphers, host_key, identity, key, record};
use crate::config::Settings;
use crate::local_process::ProcessId;
use crate::mux;
use crate::policy::Policy;
use crate::remote::{self, Program};

/// How long `disconnect` lets running commands terminate before it stops the master anyway.
const DRAIN_ON_CLOSE: Duration = Duration::from_secs(3);
/// How long the lost-watcher waits before it looks at a master whose socket failed again.
const WATCH_RETRY: Duration = Duration::from_secs(1);

/// Every session of this daemon.
pub struct Registry {
    pub settings: Arc<Settings>,
    /// What the tools keep: for each session, and daemon-wide (see `shared`).
    pub(super) tools: super::work::Tools,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Held while the session record is written: one writer at a time, each with a snapshot
    /// taken under it, so the newest state is the one that lands.
    record_writer: Mutex<()>,
    /// Set once shutdown begins: no new sessions.
    closing: CancellationToken,
    /// Told each time a closed session leaves the list.
    closed: tokio::sync::Notify,
    /// Set once the record was written for the next daemon (a handover): what this daemon
    /// does after that must not change it.
    record_final: AtomicBool,
    /// The per-host policy in force, and why the last reload failed if it did.
    policy: std::sync::RwLock<(Arc<Policy>, Option<String>)>,
    /// The host keys each policy entry has seen (see `policy::LearnedKeys`), as kept in
    /// the state directory.
    learned_keys: Mutex<crate::policy::LearnedKeys>,
    /// The audit trail: the service writes the calls to it (when it is on), the registry
    /// what the daemon itself does (its start, reloads, transfers it takes back), always.
    pub trail: Arc<crate::audit::Trail>,
    /// The key hashes of sessions closed within [`CLOSED_KEYS_KEPT`], oldest first: their
    /// keys are still redacted wherever a caller writes them.
    closed_keys: Mutex<std::collections::VecDeque<(std::time::Instant, key::KeyHash)>>,
    /// The sessions the person closed (`sshmcp disconnect`): an agent that calls on one is
    /// told so.
    person_closed: crate::session::person_stops::Stopped,
}

/// How long the log of a master whose connect failed is kept.
const FAILED_LOGS_KEPT: Duration = Duration::from_secs(24 * 3600);

/// How long a closed session's key is still redacted.
const CLOSED_KEYS_KEPT: Duration = Duration::from_secs(24 * 3600);

/// What connect tells of the host: uname, home, user, and the OS's name where it says one.
const FACTS: &str = include_str!("facts.sh");

impl Registry {
    pub fn new(
        settings: Arc<Settings>,
        trail: Arc<crate::audit::Trail>,
        tools: super::work::Tools,
    ) -> Arc<Self> {
        Arc::new(Self {
            tools,
            sessions: Mutex::new(HashMap::new()),
            record_writer: Mutex::new(()),
            closing: CancellationToken::new(),
            closed: tokio::sync::Notify::new(),
            record_final: AtomicBool::new(false),
            policy: std::sync::RwLock::new((Arc::new(settings.policy.clone()), None)),
            closed_keys: Default::default(),
            person_closed: load_person_stops(&settings.person_stopped_file()),
            learned_keys: Mutex::new(load_learned_keys(&settings.learned_keys_file())),
            trail,
            settings,
        })
    }

    /// Whether the policy in force lets `tool` work on `session`: every entry that governs
    /// it, by name or by the host key its master verified.
    pub fn check_policy(&self, tool: Tool, session: &Session) -> Result<(), DaemonError> {
        let learned = self.learned_keys();
        self.policy().check(tool, &session.subject(), &learned)
    }

    /// The entries that govern `session`, and why (`sshmcp watch`); and, for a session whose
    /// host key could not be learned while the policy has entries, that only names match it.
    pub fn governing(&self, session: &Session) -> Vec<String> {
        let policy = self.policy();
        let mut shown = policy.explain(&session.subject(), &self.learned_keys());
        if session.host_key.get().is_none() && policy.entry_count() > 0 {
            shown.push("host key not learned: entries match its names only".into());
        }
        shown
    }

    fn learned_keys(&self) -> MutexGuard<'_, crate::policy::LearnedKeys> {
        self.learned_keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Notes the host key each of `sessions`' masters verified for every entry matching it
    /// by name, and keeps what is new in the state directory (written outside the lock every
    /// call's check takes).
    fn learn_host_keys(&self, sessions: &[Arc<Session>]) {
        let policy = self.policy();
        let snapshot = {
            let mut learned = self.learned_keys();
            let mut changed = false;
            for session in sessions {
                changed |= policy.learn(&session.subject(), &mut learned);
            }
            changed.then(|| learned.clone())
        };
        if let Some(learned) = snapshot {
            let path = self.settings.learned_keys_file();
            if let Err(e) = save_learned_keys(&path, &learned) {
                tracing::warn!(
                    "cannot keep the policy's host keys in {}: {e}",
                    path.display()
                );
            }
        }
    }

    /// Learns the keys of every live session anew: a policy just read (an entry added in
    /// reply to an incident) or sessions just taken back meet the keys their masters verified.
    pub fn learn_live_host_keys(&self) {
        let live: Vec<Arc<Session>> = self.sessions().values().cloned().collect();
        self.learn_host_keys(&live);
    }

    /// Writes to the trail what the daemon runs with: at each start (`daemon_start`, after
    /// taking back the last daemon's sessions) and reload (`policy_reload`), which config
    /// file is in force, how many policy entries it holds and whether the trail keeps calls,
    /// so a policy lifted or a trail turned off by a restart shows where the person looks.
    pub fn note_settings(&self, tool: &str, failed: Option<&str>) {
        let s = &self.settings;
        let config = s
            .config_file
            .as_ref()
            .map_or("no config file".to_string(), |p| {
                format!("config {}", p.display())
            });
        let mut summary = match failed {
            Some(why) => format!("{config}: not taken, the policy before stays in force: {why}"),
            None => format!("{config}; {} policy entries", self.policy().entry_count()),
        };
        summary.push_str(match s.audit {
            true => "; audit trail on",
            false => "; audit trail off (calls are not written)",
        });
        if tool == "daemon_start" {
            summary.push_str(&format!("; {} sessions taken back", self.session_count()));
        }
        let outcome = match failed {
            Some(_) => "invalid_arguments",
            None => "ok",
        };
        self.trail
            .note(crate::audit::daemon_line(tool, summary, outcome));
    }

    /// Writes the trail's last line of this daemon (see `lifecycle::run`).
    pub fn note_stop(&self, summary: String) {
        self.trail
            .note(crate::audit::daemon_line("daemon_stop", summary, "ok"));
    }

    /// `text` with the key of every live session, and of every session closed in the last
    /// day, replaced (see [`key::redact`]): an agent may paste any key into a command, a
    /// path or a host, and no key may reach the trail, a log or an error message.
    pub fn redact_keys<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        let mut known: Vec<key::KeyHash> = self.sessions().values().map(|s| s.key_hash()).collect();
        let mut closed = self
            .closed_keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        while closed
            .front()
            .is_some_and(|(at, _)| at.elapsed() > CLOSED_KEYS_KEPT)
        {
            closed.pop_front();
        }
        known.extend(closed.iter().map(|(_, hash)| *hash));
        drop(closed);
        key::redact(text, &known)
    }

    pub(super) fn sessions(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every session, oldest first, with what runs on it now (`sshmcp watch`).
    pub fn overview(&self) -> Vec<SessionView> {
        self.oldest_first()
            .iter()
            .map(|s| {
                let mut view = SessionView::of(s.summary(), self.governing(s));
                s.works().iter().for_each(|w| w.show(&mut view));
                self.redact_view(view)
            })
            .collect()
    }

    /// `view` with every session key taken out of every text in it: what agents wrote (a
    /// command, a path, a forward's host) or commands printed. An agent may echo or paste its
    /// own key; a person watching must not be shown it.
    fn redact_view(&self, view: SessionView) -> SessionView {
        fn each_text(value: &mut serde_json::Value, redact: &dyn Fn(&mut String)) {
            match value {
                serde_json::Value::String(text) => redact(text),
                serde_json::Value::Array(items) => {
                    items.iter_mut().for_each(|item| each_text(item, redact));
                }
                serde_json::Value::Object(fields) => {
                    fields.values_mut().for_each(|item| each_text(item, redact));
                }
                _ => {}
            }
        }
        let redact = |text: &mut String| {
            if let std::borrow::Cow::Owned(clean) = self.redact_keys(text) {
                *text = clean;
            }
        };
        let redacted = serde_json::to_value(&view).and_then(|mut value| {
            each_text(&mut value, &redact);
            serde_json::from_value(value)
        });
        // A text redacted is still text of its field: this cannot fail. Were it to, the
        // session is shown without what runs on it rather than with a key.
        redacted.unwrap_or_else(|e| {
            tracing::error!("cannot redact a session's view: {e}");
            SessionView::of(view.session, view.policy)
        })
    }

    /// The daemon-wide state of type `T` the tools keep (see `work::Tools`).
    pub fn shared<T: std::any::Any + Send + Sync>(&self) -> Arc<T> {
        self.tools
            .shared
            .iter()
            .find_map(|item| item.clone().downcast::<T>().ok())
            .unwrap_or_else(|| panic!("no {} in the daemon", std::any::type_name::<T>()))
    }

    /// Every session, oldest first (by id within one instant), as listings show them.
    pub fn oldest_first(&self) -> Vec<Arc<Session>> {
        let mut sessions: Vec<Arc<Session>> = self.sessions().values().cloned().collect();
        sessions.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        sessions
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .0
            .clone()
    }

    /// Reads the config file's policy again (`sshmcp daemon reload`, SIGHUP). A file that
    /// does not parse leaves the policy in force, and the report says why. Sessions are
    /// untouched: the next call of each is checked against the new policy.
    pub fn reload_policy(&self) -> Result<PolicyReport, DaemonError> {
        let read = self.settings.reload_policy();
        let failed = {
            let mut slot = self
                .policy
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match read {
                Ok(policy) => {
                    *slot = (Arc::new(policy), None);
                    None
                }
                Err(e) => {
                    slot.1 = Some(e.clone());
                    Some(e)
                }
            }
        };
        if failed.is_none() {
            self.learn_live_host_keys();
        }
        self.note_settings("policy_reload", failed.as_deref());
        match failed {
            None => {
                let report = self.policy_report();
                tracing::info!(entries = report.entries.len(), "policy reloaded");
                Ok(report)
            }
            Some(e) => {
                tracing::warn!("policy not reloaded, the one before stays in force: {e}");
                Err(DaemonError::new(
                    ErrorCode::InvalidArguments,
                    format!("the config file was not taken, the policy before stays in force: {e}"),
                ))
            }
        }
    }

    /// The policy in force, each entry with the live sessions it matches.
    pub fn policy_report(&self) -> PolicyReport {
        let (policy, error) = self
            .policy
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        let live: Vec<Arc<Session>> = self.sessions().values().cloned().collect();
        let sessions: Vec<(String, crate::policy::Subject<'_>)> =
            live.iter().map(|s| (s.id.clone(), s.subject())).collect();
        let source = self
            .settings
            .config_file
            .as_ref()
            .map(|path| path.display().to_string());
        let learned = self.learned_keys();
        policy.report(source, &sessions, &learned, error)
    }

    pub fn session_count(&self) -> usize {
        self.sessions().len()
    }

    pub fn list(&self) -> Vec<SessionSummary> {
        self.oldest_first().iter().map(|s| s.summary()).collect()
    }

    /// The session `auth` names, if the key is right and it can run work now.
    pub fn authorize(&self, auth: &SessionAuth) -> Result<Arc<Session>, DaemonError> {
        let session = self.find(&auth.session_id)?;
        session.authorize(&auth.session_key)?;
        Ok(session)
    }

    /// Like [`Registry::authorize`] for what needs no SSH (a command handle's state and its
    /// output kept on the local disk): a lost session still answers.
    pub fn authorize_local(&self, auth: &SessionAuth) -> Result<Arc<Session>, DaemonError> {
        let session = self.find(&auth.session_id)?;
        match session.authorize(&auth.session_key) {
            Err(e) if e.code == ErrorCode::ConnectionLost => Ok(session),
            other => other.map(|()| session),
        }
    }

    /// Whether the daemon is on its way out (stopping or handing over): it opens no session.
    pub fn is_closing(&self) -> bool {
        self.closing.is_cancelled()
    }

    pub fn find(&self, id: &str) -> Result<Arc<Session>, DaemonError> {
        self.sessions().get(id).cloned().ok_or_else(|| {
            let message = match self.person_closed.told(id) {
                Some(when) => format!(
                    "no session has this session_id: the person closed it {when}: ask them \
                     before you connect again"
                ),
                None => "no session has this session_id: it was closed, or never made \
                         (session_list lists them; connect makes a new one)"
                    .to_string(),
            };
            DaemonError::new(ErrorCode::SessionNotFound, message)
        })
    }

    /// Remembers that the person closed session `id` (see [`Registry::find`]).
    pub fn closed_by_person(&self, id: &str) {
        self.person_closed
            .remember(id, crate::session::person_stops::How::Disconnect);
        self.save_person_stops();
    }

    /// The person stops the daemon (`sshmcp daemon stop`): its sessions are remembered as
    /// closed by them, so an agent that calls on one is told so by the next daemon too and
    /// not left to connect again at once.
    pub fn stopped_by_person(&self) {
        for id in self.sessions().keys() {
            self.person_closed
                .remember(id, crate::session::person_stops::How::DaemonStop);
        }
        self.save_person_stops();
    }

    /// Keeps what the person closed in the state directory, for every later daemon.
    fn save_person_stops(&self) {
        let path = self.settings.person_stopped_file();
        let written = serde_json::to_vec(&self.person_closed.all())
            .map_err(std::io::Error::other)
            .and_then(|bytes| record::write_bytes(&path, &bytes));
        if let Err(e) = written {
            tracing::warn!(
                "cannot note the sessions the person closed in {}: {e}",
                path.display()
            );
        }
    }

    /// What a connect learns before it reserves its server: the target's identity (the
    /// policy may refuse it already) and the ciphers to offer.
    async fn before_reserving(
        &self,
        target: &ConnectTarget,
        timeout: Duration,
    ) -> Result<(Resolved, Option<String>), DaemonError> {
        let ssh_config = self.settings.ssh_config.as_deref();
        let resolved = master::resolve(ssh_config, target, timeout)
            .await
            .map_err(|m| DaemonError::new(ErrorCode::ConnectionStartFailed, m))?;
        let subject = crate::policy::Subject {
            target: &target.display(),
            server_host: &resolved.host,
            host_key: None,
        };
        self.policy()
            .check(Tool::Connect, &subject, &self.learned_keys())?;
        // Learning OpenSSH's own list may take a moment once.
        let ciphers = match self.settings.keep_cipher_order {
            true => None,
            false => ciphers::preferred(resolved.ciphers.as_deref()).await,
        };
        Ok((resolved, ciphers))
    }

    /// Opens a session: resolve the identity, reserve it, authenticate (one at a time), learn
    /// the remote facts, then start watching the master.
    pub async fn connect(self: &Arc<Self>, req: ConnectRequest) -> Result<Connected, DaemonError> {
        let timeout = check_connect_request(&req)?;
        // `connect_timeout` bounds the whole call, as its field promises: each step gets what
        // the ones before left.
        let deadline = std::time::Instant::now() + timeout;
        // A stop, begun or coming meanwhile, ends these steps at once: the stop answers the
        // calls in flight, and this one has no session yet for it to close.
        let (resolved, ciphers) = tokio::select! {
            biased;
            () = self.closing.cancelled() => return Err(shutting_down()),
            steps = self.before_reserving(&req.target, timeout) => steps?,
        };
        let (session, session_key) = self.reserve(&req.target, &resolved)?;
        // Undoes the reservation unless connect completes, also when the caller goes away
        // mid-way and this future is dropped: a half-made session must not own its server.
        let _reservation = Reservation {
            registry: self.clone(),
            session: session.clone(),
        };
        let (master_pid, remote) = self
            .authenticate(&session, &req.target, &resolved, ciphers.as_deref(), deadline)
            .await
            .inspect_err(|e| {
                tracing::info!(session = %session.id, code = %e.code, "connect failed: {}", e.message);
            })?;
        tracing::info!(session = %session.id, target = %session.target, master_pid, host_key = session.host_key.get().map(String::as_str), "session ready");
        self.spawn_watcher(&session);
        self.spawn_recorder(&session);
        self.persist();
        Ok(Connected {
            session_id: session.id.clone(),
            session_key,
            target: session.target.clone(),
            server_host: session.server_host.clone(),
            server_port: session.server_port,
            state: SessionState::Ready,
            master_pid,
            remote,
        })
    }

    /// Claims the server identity and a session slot, or says who holds it.
    fn reserve(
        &self,
        target: &ConnectTarget,
        resolved: &identity::Resolved,
    ) -> Result<(Arc<Session>, String), DaemonError> {
        let io_err = |e: std::io::Error| DaemonError::internal(format!("cannot create a key: {e}"));
        let (session_key, key_hash) = key::new_session_key().map_err(io_err)?;
        // A key pasted into the target is not shown wherever the session is (taken before
        // the lock: redaction reads the sessions).
        let shown_target = self.redact_keys(&target.display()).into_owned();
        let mut sessions = self.sessions();
        // Checked again under the lock: a stop closes the sessions it lists after it set
        // `closing`, so a connect that passed the first check while the stop began either
        // is listed or stops here.
        if self.is_closing() {
            return Err(shutting_down());
        }
        if let Some(owner) = sessions
            .values()
            .find(|s| s.server_host == resolved.host && s.server_port == resolved.port)
        {
            // Its user too: one session a server whatever the user, so an agent that asked
            // for another must not take it for its own login.
            let user = owner.remote_user();
            let logged_in = match user.is_empty() {
                true => String::new(),
                false => format!(", logged in as {user}"),
            };
            return Err(DaemonError::new(
                ErrorCode::AlreadyConnected,
                format!(
                    "session {} already owns {}:{} (state {}{logged_in}; one session a server, \
                     whatever the user); use it, or disconnect it first",
                    owner.id,
                    resolved.host,
                    resolved.port,
                    owner.state().as_str()
                ),
            )
            .with_details(ErrorDetails {
                session_id: Some(owner.id.clone()),
                ..ErrorDetails::default()
            }));
        }
        if sessions.len() >= self.settings.max_sessions as usize {
            return Err(DaemonError::new(
                ErrorCode::SessionLimitReached,
                format!(
                    "the daemon holds its maximum of {} sessions; disconnect one first",
                    self.settings.max_sessions
                ),
            ));
        }
        let id = loop {
            let id = key::new_session_id().map_err(io_err)?;
            if !sessions.contains_key(&id) {
                break id;
            }
        };
        let control_path = self.settings.runtime.masters_dir().join(&id);
        let session = Arc::new(Session::new(
            id.clone(),
            key_hash,
            shown_target,
            (resolved.host.clone(), resolved.port),
            crate::remote::Host::new(control_path, self.settings.standby_channels),
            std::time::SystemTime::now(),
            &*self.tools.make_work,
        ));
        sessions.insert(id, session.clone());
        Ok((session, session_key))
    }

    async fn authenticate(
        &self,
        session: &Arc<Session>,
        target: &ConnectTarget,
        resolved: &Resolved,
        ciphers: Option<&str>,
        deadline: std::time::Instant,
    ) -> Result<(u32, RemoteFacts), DaemonError> {
        let left = || deadline.saturating_duration_since(std::time::Instant::now());
        let closed = || {
            DaemonError::new(
                ErrorCode::SessionClosed,
                "the session was disconnected while connecting",
            )
        };
        let start_failed = |m: String| DaemonError::new(ErrorCode::ConnectionStartFailed, m);
        // The host key is learned through the master's own check, where OpenSSH can say it.
        let report_host_key = match resolved.known_hosts_command {
            true => None,
            false if host_key::supported().await => host_key::master_option(),
            false => None,
        };
        let args = master::master_args(
            self.settings.ssh_config.as_deref(),
            &session.host.control_path,
            target,
            !resolved.has_keepalive,
            ciphers,
            left(),
            report_host_key,
        );
        self.remove_old_master_logs();
        let log = self.master_log(&session.id);
        // Read once the master is up; a start failed or given up (a disconnect, a cancel)
        // after the key check leaves none behind either.
        let reported = RemovedWhenDone(master::host_key_file(&log));
        // Prompts take turns daemon-wide inside the askpass relay; the rest runs in parallel.
        let lock = self.settings.runtime.askpass_lock();
        let clock = std::time::Instant::now();
        let started = master::start(args, &log, &lock, left(), &session.host.closing).await;
        let master_ms = clock.elapsed().as_secs_f64() * 1000.0;
        match started {
            Ok(()) => {}
            Err(StartFailure::Cancelled) => return Err(closed()),
            Err(StartFailure::Failed(message)) => {
                return Err(start_failed(start_failure(target, message)));
            }
        }
        let control_path = &session.host.control_path;
        let master = match mux::alive_check(control_path).await {
            Ok(pid) => ProcessId::of(pid),
            Err(e) => {
                master::stop(control_path, None).await;
                return Err(start_failed(format!("the master did not answer: {e}")));
            }
        };
        let Some(master) = master else {
            master::stop(control_path, None).await;
            return Err(start_failed("the master exited at once".into()));
        };
        let _ = session.host.master.set(master);
        // The key the master verified: its policy entries learn it, and an entry that
        // governs the server by it may refuse the connect itself.
        if let Some(key) = std::fs::read_to_string(&reported.0)
            .ok()
            .and_then(|text| host_key::fingerprint(&text))
        {
            let _ = session.host_key.set(key);
        }
        drop(reported);
        self.learn_host_keys(std::slice::from_ref(session));
        if let Err(refused) = self.check_policy(Tool::Connect, session) {
            master::stop(control_path, Some(master)).await;
            return Err(refused);
        }
        // The first channel of a connection waits about 45 ms for sshd to finish its post-
        // authentication setup (raw `ssh -S` shows the same); the facts pay it.
        // Its channel comes back idle and waits for the first command.
        let clock = std::time::Instant::now();
        let facts = self.remote_facts(session, left()).await;
        let facts_ms = clock.elapsed().as_secs_f64() * 1000.0;
        tracing::debug!(session = %session.id, master_ms, facts_ms, "connect steps");
        if session.host.closing.is_cancelled() || session.state() != SessionState::Starting {
            master::stop(control_path, Some(master)).await;
            return Err(closed());
        }
        match facts {
            Ok(facts) => {
                let _ = session.remote_user.set(facts.user.clone());
                // Only from `starting`: a disconnect (or a stop) that came since the check
                // above has the session, and it is not made ready under it.
                if !session.transition(SessionState::Starting, SessionState::Ready) {
                    master::stop(control_path, Some(master)).await;
                    return Err(closed());
                }
                Ok((master.pid, facts))
            }
            Err(message) => {
                master::stop(control_path, Some(master)).await;
                Err(start_failed(message))
            }
        }
    }

    /// Where the master of session `id` writes (its stderr: private, never shown to callers).
    fn master_log(&self, id: &str) -> std::path::PathBuf {
        self.settings.masters_log_dir().join(format!("{id}.log"))
    }

    /// Removes the logs of masters whose connect failed more than [`FAILED_LOGS_KEPT`] ago
    /// (a closed session's goes at its close; a failed connect's stays for the person to
    /// read why), so the directory stays bounded.
    fn remove_old_master_logs(&self) {
        let Ok(dir) = std::fs::read_dir(self.settings.masters_log_dir()) else {
            return;
        };
        let live: Vec<String> = self.sessions().keys().cloned().collect();
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let id = name.split('.').next().unwrap_or_default();
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|at| at.elapsed().is_ok_and(|age| age > FAILED_LOGS_KEPT));
            if old && !live.iter().any(|l| l == id) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// Runs one small program on the new master: uname, home, user, OS name, within `left`
    /// of the connect's time but [`FACTS_FLOOR`] at the least (30 s at most).
    async fn remote_facts(&self, session: &Session, left: Duration) -> Result<RemoteFacts, String> {
        let within = left.clamp(FACTS_FLOOR, Duration::from_secs(30));
        let program = Program::new(FACTS, within, 16 * 1024);
        let result = remote::run(&session.host, program).await.map_err(|e| {
            match matches!(e, remote::RunError::Unconfirmed) {
                true => format!(
                    "logged in, but the host's login shell did not start a command within {} s \
                     (a slow shell startup file?)",
                    within.as_secs()
                ),
                false => format!("the master could not run a command: {e}"),
            }
        })?;
        let text = String::from_utf8_lossy(&result.stdout.bytes);
        let mut lines = text.lines();
        let mut next = || lines.next().unwrap_or("").to_string();
        let (uname, home, user, pretty) = (next(), next(), next(), next());
        Ok(RemoteFacts {
            uname,
            os_pretty_name: (!pretty.is_empty()).then_some(pretty),
            user,
            home,
        })
    }

    /// Holds a control connection to the master; when the master closes it and its process
    /// is confirmed gone, a ready session becomes `lost`. A socket that fails while the
    /// process lives (this daemon out of descriptors, a stopped master) is tried again.
    pub(super) fn spawn_watcher(self: &Arc<Self>, session: &Arc<Session>) {
        let registry = Arc::downgrade(self);
        let session = session.clone();
        tokio::spawn(async move {
            let Some(master) = session.master() else {
                return;
            };
            loop {
                let watched = mux::watch_until_closed(&session.host.control_path).await;
                // A master closes its control connections as it exits: give it a moment.
                if !master.alive() || master.exited_within(Duration::from_secs(2)).await {
                    break;
                }
                if let Err(e) = watched {
                    tracing::debug!(session = %session.id, "cannot watch the master: {e}");
                }
                if session.host.closing.is_cancelled() {
                    return;
                }
                tokio::time::sleep(WATCH_RETRY).await;
            }
            if session.mark_lost() {
                tracing::warn!(session = %session.id, "master exited; session lost");
                if let Some(registry) = registry.upgrade() {
                    registry.persist();
                }
            }
        });
    }

    /// Writes the record whenever the session's part of it changed (a command handle started
    /// or ended), until the session closes. Changes that come while a write is under way are
    /// written together by the next.
    pub(super) fn spawn_recorder(self: &Arc<Self>, session: &Arc<Session>) {
        let registry = Arc::downgrade(self);
        let (record, closing) = (session.record.clone(), session.host.closing.clone());
        tokio::spawn(async move {
            loop {
                let asked = tokio::select! {
                    asked = record.next() => asked,
                    _ = closing.cancelled() => break,
                };
                match registry.upgrade() {
                    Some(registry) => registry.persist(),
                    None => break,
                }
                record.done(asked);
            }
            // No write will come for this session: nobody may wait for one.
            record.done(u64::MAX);
        });
    }

    /// Closes a session in any state: cancels its work, stops its master, forgets it. The
    /// closing runs as its own task, so it completes even if the caller goes away meanwhile
    /// (a session stuck in `closing` could never be closed again).
    pub async fn disconnect(
        self: &Arc<Self>,
        session_id: &str,
    ) -> Result<Disconnected, DaemonError> {
        let session = self.find(session_id)?;
        let previous = session.begin_closing();
        if previous == SessionState::Closing {
            return Err(DaemonError::new(
                ErrorCode::SessionClosing,
                "the session is already being closed",
            ));
        }
        // A daemon that dies mid-way leaves it recorded as closing: the next one stops its
        // master instead of taking it back.
        self.persist();
        let registry = self.clone();
        tokio::spawn(async move { registry.finish_closing(&session).await })
            .await
            .map_err(|e| DaemonError::internal(format!("closing the session failed: {e}")))?;
        Ok(Disconnected {
            session_id: session_id.to_string(),
            state: SessionState::Closed,
        })
    }

    async fn finish_closing(&self, session: &Session) {
        // A stopped master could run none of the kills: it is about to end anyway.
        if let Some(master) = session.master() {
            master.signal(nix::sys::signal::Signal::SIGCONT);
        }
        session.host.closing.cancel();
        session.host.standby.close();
        let _ = tokio::time::timeout(DRAIN_ON_CLOSE, session.commands_drained()).await;
        // Also for a session still starting: its master may have come up meanwhile.
        master::stop(&session.host.control_path, session.master()).await;
        session.host.close_slots();
        self.forget(&session.id);
        // A session that was up said what its master had to say already: its log goes.
        let log = self.master_log(&session.id);
        let _ = std::fs::remove_file(log.with_extension("prompt"));
        let _ = std::fs::remove_file(log);
        self.closed_keys
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push_back((std::time::Instant::now(), session.key_hash()));
        self.persist();
        tracing::info!(session = %session.id, "session closed");
    }

    /// Refuses new sessions and closes every existing one (daemon stop).
    /// Takes a closed session off the list, and tells `close_all`.
    fn forget(&self, id: &str) {
        self.sessions().remove(id);
        self.closed.notify_waiters();
    }

    pub async fn close_all(self: &Arc<Self>) {
        self.closing.cancel();
        let ids: Vec<String> = self.sessions().keys().cloned().collect();
        let closes = ids.iter().map(|id| self.disconnect(id));
        futures::future::join_all(closes).await;
        // A session a disconnect was already closing answered `session_closing` at once:
        // the stop waits for that close too, so that what it says it closed is closed.
        loop {
            let closed = self.closed.notified();
            tokio::pin!(closed);
            closed.as_mut().enable();
            if self.sessions().is_empty() {
                return;
            }
            closed.await;
        }
    }

    /// Refuses new sessions and leaves every master up for the next daemon (daemon restart):
    /// the record is written last, as the state the next daemon starts from.
    /// Transfers under way are stopped with their partial files kept (and stay recorded, for
    /// the next daemon to resume), command handles keep their output files, and the record
    /// is written one last time.
    pub async fn hand_over(self: &Arc<Self>) {
        self.closing.cancel();
        let sessions: Vec<Arc<Session>> = self.sessions().values().cloned().collect();
        let stops = sessions
            .iter()
            .flat_map(|s| s.works().iter().map(|w| w.hand_over()));
        futures::future::join_all(stops).await;
        for session in &sessions {
            session.works().iter().for_each(|w| w.handed_over());
        }
        self.seal_record();
    }

    /// Writes the record a last time and keeps it so: what this daemon still does on its way
    /// out (closes that outlived the teardown's cap) must not overwrite what the next daemon
    /// reads and writes.
    pub fn seal_record(&self) {
        let _writing = self.record_lock();
        if !self.record_final.swap(true, Ordering::SeqCst) {
            self.write_record();
        }
    }

    fn record_lock(&self) -> MutexGuard<'_, ()> {
        self.record_writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn persist(&self) {
        let _writing = self.record_lock();
        if !self.record_final.load(Ordering::SeqCst) {
            self.write_record();
        }
    }

    /// Writes the record; the caller holds the writer lock.
    fn write_record(&self) {
        let sessions: Vec<Arc<Session>> = self.sessions().values().cloned().collect();
        let redact = |text: &str| self.redact_keys(text).into_owned();
        if let Err(e) = record::write(&self.settings.record_file(), &sessions, redact) {
            tracing::warn!("cannot write the session record: {e}");
        }
    }
}

/// A session reserved by a connect in progress. Dropped while the session is still
/// `starting` (the connect failed, or its caller went away and the connect was dropped), it
/// forgets the session and stops any master the attempt left behind. A session that became
/// `ready`, or that `disconnect` took over, is left alone.
struct Reservation {
    registry: Arc<Registry>,
    session: Arc<Session>,
}

/// The error of a connect that comes while the daemon stops.
fn shutting_down() -> DaemonError {
    DaemonError::new(ErrorCode::ServerClosing, "the daemon is shutting down")
}

/// A file removed when this goes, however the function that holds it ends.
struct RemovedWhenDone(std::path::PathBuf);

impl Drop for RemovedWhenDone {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let session = &self.session;
        if session.state() != SessionState::Starting {
            return;
        }
        session.host.closing.cancel();
        session.host.standby.close();
        self.registry.forget(&session.id);
        let (control_path, master) = (session.host.control_path.clone(), session.master());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { master::stop(&control_path, master).await });
        }
    }
}

/// The policy's learned host keys as the state directory keeps them; none when the file is
/// missing or unreadable (logged: the entries then follow names until they see keys again).
fn load_learned_keys(path: &std::path::Path) -> crate::policy::LearnedKeys {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!("ignoring the policy's host keys in {}: {e}", path.display());
            Default::default()
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Default::default(),
        Err(e) => {
            tracing::warn!(
                "cannot read the policy's host keys in {}: {e}",
                path.display()
            );
            Default::default()
        }
    }
}

/// What earlier daemons remembered the person closed (see [`Registry::stopped_by_person`]):
/// only session ids of the daemon's own form, as the file is told back to agents.
fn load_person_stops(path: &std::path::Path) -> crate::session::person_stops::Stopped {
    let stopped = crate::session::person_stops::Stopped::default();
    if let Ok(bytes) = std::fs::read(path) {
        let ones: Vec<crate::session::person_stops::StoppedOne> = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| {
                tracing::warn!("ignoring {}: {e}", path.display());
                Vec::new()
            });
        ones.into_iter()
            .filter(|one| key::is_session_id(&one.id))
            .for_each(|one| stopped.add(one));
    }
    stopped
}

fn save_learned_keys(
    path: &std::path::Path,
    learned: &crate::policy::LearnedKeys,
) -> std::io::Result<()> {
    record::write_bytes(path, serde_json::to_string_pretty(learned)?.as_bytes())
}

/// The least time the host's facts get once logged in, whatever `connect_timeout` has left:
/// a session the user may just have typed a passphrase for is not given up over a login
/// shell that starts slowly (its startup files, a directory service answering `id`).
const FACTS_FLOOR: Duration = Duration::from_secs(15);

/// The connect request's own checks; returns the connect's timeout.
fn check_connect_request(req: &ConnectRequest) -> Result<Duration, DaemonError> {
    let invalid = DaemonError::invalid_arguments;
    match &req.target {
        ConnectTarget::Alias { alias } => check_word(Word::Alias, alias).map_err(invalid)?,
        ConnectTarget::Direct { host, user, port } => {
            check_word(Word::Host, host).map_err(invalid)?;
            check_word(Word::User, user).map_err(invalid)?;
            if *port == Some(0) {
                return Err(invalid("port must be between 1 and 65535".into()));
            }
        }
    }
    let secs = req.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT_SECS);
    if !secs.is_finite() || !(1.0..=MAX_CONNECT_TIMEOUT_SECS).contains(&secs) {
        return Err(invalid(format!(
            "connect_timeout must be between 1 and {MAX_CONNECT_TIMEOUT_SECS} seconds"
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// What a failed start of `target`'s master says: an alias that no Host of the configuration
/// names is taken by OpenSSH as a host name, which then resolves to nothing.
fn start_failure(target: &ConnectTarget, message: String) -> String {
    match target {
        ConnectTarget::Alias { .. } if message == master::NOT_RESOLVED => format!(
            "{message}: is the alias a Host of the user's OpenSSH config? (else connect with \
             `host` and `user`)"
        ),
        _ => message,
    }
}

/// A run found the session's master confirmed gone: the session is lost, the call fails.
pub fn connection_lost(session: &Session) -> DaemonError {
    session.mark_lost();
    crate::remote::lost_error()
}

#[cfg(test)]
mod tests {
    use sshmcp_proto::limits::{DEFAULT_CONNECT_TIMEOUT_SECS, MAX_CONNECT_TIMEOUT_SECS};
    use sshmcp_proto::session::ConnectTarget;

    use super::*;

    fn direct(port: Option<u16>, timeout: Option<f64>) -> ConnectRequest {
        ConnectRequest {
            target: ConnectTarget::Direct {
                host: "example.org".into(),
                user: "me".into(),
                port,
            },
            connect_timeout: timeout,
        }
    }

    /// An alias that resolves to nothing is asked about; a host, or another failure, is not.
    #[test]
    fn an_unresolved_alias_asks_whether_it_is_in_the_config() {
        let alias = ConnectTarget::Alias {
            alias: "typo".into(),
        };
        let said = start_failure(&alias, master::NOT_RESOLVED.into());
        assert!(
            said.starts_with(master::NOT_RESOLVED) && said.contains("a Host of"),
            "{said}"
        );
        let direct = direct(Some(22), None).target;
        assert_eq!(
            start_failure(&direct, master::NOT_RESOLVED.into()),
            master::NOT_RESOLVED
        );
        let refused = "the connection was refused".to_string();
        assert_eq!(start_failure(&alias, refused.clone()), refused);
    }

    /// `connect_timeout` is taken from 1 s to its maximum, exactly at each edge, and its
    /// default when absent; port 0 and a timeout past an edge (or not a number) are
    /// `invalid_arguments`.
    #[test]
    fn a_connect_request_is_held_to_its_limits() {
        let secs =
            |timeout| check_connect_request(&direct(Some(22), timeout)).map(|d| d.as_secs_f64());
        assert_eq!(secs(None).unwrap(), DEFAULT_CONNECT_TIMEOUT_SECS);
        assert_eq!(secs(Some(1.0)).unwrap(), 1.0);
        assert_eq!(
            secs(Some(MAX_CONNECT_TIMEOUT_SECS)).unwrap(),
            MAX_CONNECT_TIMEOUT_SECS
        );
        for bad in [
            0.999,
            MAX_CONNECT_TIMEOUT_SECS + 0.001,
            f64::NAN,
            f64::INFINITY,
        ] {
            let e = check_connect_request(&direct(Some(22), Some(bad))).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArguments, "{bad}");
        }
        let e = check_connect_request(&direct(Some(0), None)).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        let alias = ConnectRequest {
            target: ConnectTarget::Alias {
                alias: "testbed".into(),
            },
            connect_timeout: None,
        };
        assert!(check_connect_request(&alias).is_ok());
    }

    /// The facts program under every shell a host may have as `/bin/sh` (BusyBox with only
    /// its applets): the kernel's three words, the home, the user, and the OS's name where
    /// the machine has an os-release.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_facts_program_runs_under_every_posix_shell() {
        let home = tempfile::tempdir().unwrap();
        let user = std::process::Command::new("id")
            .arg("-un")
            .output()
            .unwrap();
        let user = String::from_utf8(user.stdout).unwrap();
        // The name the machine's os-release gives, as the program reads it (when readable).
        let pretty = std::fs::read_to_string("/etc/os-release").ok().map(|text| {
            let line = text.lines().find_map(|l| l.strip_prefix("PRETTY_NAME="));
            line.unwrap_or_default().trim_matches('"').to_string()
        });
        for (shell, path) in crate::programs::Shells::new().each() {
            let out = crate::programs::run_under(&shell, &path, home.path(), FACTS, b"");
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(
                lines.len(),
                3 + usize::from(pretty.is_some()),
                "{shell:?}: {out}"
            );
            assert_eq!(lines[0].split(' ').count(), 3, "{shell:?}: {out}");
            assert!(lines[0].starts_with("Linux "), "{shell:?}: {out}");
            assert_eq!(lines[1], home.path().display().to_string(), "{shell:?}");
            assert_eq!(lines[2], user.trim(), "{shell:?}");
            assert_eq!(lines.get(3).copied(), pretty.as_deref(), "{shell:?}");
        }
    }
}
