//! The daemon's side of the tarpc trait: each call checked, routed to the registry or the exec
//! engine, and converted to wire types.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use sshmcp_proto::audit::AuditEntry;
use sshmcp_proto::command::{
    CommandKillRequest, CommandReport, CommandStatusRequest, OutputRequest, ProgressRequest,
    RunProgress, Stopped,
};
use sshmcp_proto::forward::ForwardStopRequest;
use sshmcp_proto::overview::Overview;
use sshmcp_proto::policy::PolicyReport;
use sshmcp_proto::service::{
    Daemon, DaemonStatus, Hello, PROTOCOL_VERSION, ToolMethod, capabilities, tools,
};
use sshmcp_proto::session::{
    Authed as _, ConnectRequest, Connected, Disconnected, SessionAuth, SessionSummary,
};
use sshmcp_proto::tool::Tool;
use sshmcp_proto::{DaemonError, ErrorCode};
use tarpc::context::Context;
use tokio_util::sync::CancellationToken;

use crate::audit::{CallEnd, Trail};
use crate::operation::{Operation, Runs, to_the_end};
use crate::person::{self, Kind};
use crate::session::registry::connection_lost;
use crate::session::{Registry, Session};
use crate::{commands, forwards};

/// The service handed to tarpc; cheap to clone (one per request).
#[derive(Clone)]
pub struct DaemonService {
    pub registry: Arc<Registry>,
    /// Fired to stop the daemon after `shutdown` answered.
    pub stop: CancellationToken,
    pub started_at: Arc<str>,
    /// The audit trail; `None` when the user turned it off.
    pub trail: Option<Arc<Trail>>,
    /// The MCP client this connection serves, as it introduced itself (one per connection).
    client: Arc<std::sync::Mutex<Option<Arc<str>>>>,
    /// Whether this connection's client introduced itself: only such a client (a shim of this
    /// version or later) can read `policy_denied`, appended after older clients were built.
    introduced: Arc<std::sync::atomic::AtomicBool>,
}

/// A call on its way: what the trail will say of it, and when it came.
struct Call {
    tool: Tool,
    summary: String,
    arrived: SystemTime,
    started: Instant,
}

impl Call {
    fn new(tool: Tool, summary: String) -> Self {
        Self {
            tool,
            summary: crate::audit::bounded(summary),
            arrived: SystemTime::now(),
            started: Instant::now(),
        }
    }

    /// The call with every session key taken out of its summary (see
    /// [`Registry::redact_keys`]).
    fn redacted(self, registry: &Registry) -> Self {
        let summary = registry.redact_keys(&self.summary).into_owned();
        Self { summary, ..self }
    }
}

/// Which session and host a trail line is about.
#[derive(Default)]
struct Place {
    session_id: String,
    target: String,
    server_host: String,
    server_port: u16,
}

impl From<&Session> for Place {
    fn from(s: &Session) -> Self {
        Self {
            session_id: s.id.clone(),
            target: s.target.clone(),
            server_host: s.server_host.clone(),
            server_port: s.server_port,
        }
    }
}

/// A call that will have its line in the trail: written when it ends, or, when it is dropped
/// first (its client went away, the daemon stopped), as `cancelled`: it may have reached the
/// host all the same. Its beginning is noted too (see `audit::Trail::begin`), so that a
/// daemon dying under it leaves its line to the next daemon.
struct Audited<'a> {
    service: &'a DaemonService,
    call: Option<Call>,
    place: Place,
    /// Its number in the trail's journal of calls under way.
    number: u64,
}

impl Audited<'_> {
    fn finish(mut self, end: CallEnd) {
        if let Some(call) = self.call.take() {
            self.service
                .write_line(self.number, &call, &self.place, &end);
        }
    }
}

impl Drop for Audited<'_> {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            self.service
                .write_line(self.number, &call, &self.place, &CallEnd::CANCELLED);
        }
    }
}

// A session's open and close run no command.
impl crate::audit::Answer for Connected {}
impl crate::audit::Answer for Disconnected {}

/// Each `tool` method of the service's list (`sshmcp_proto::daemon_methods!`), answered by
/// its tool's [`Operation`] through [`DaemonService::operate`].
macro_rules! serve_operations {
    ($(
        $(#[$doc:meta])*
        $form:ident $name:ident($($arg:ident: $ty:ty),*) $(-> $answer:ty)?
            $(=> $tool:ident in $group:ident, $reach:ident)?;
    )*) => {
        $(serve_operation!($form $name $($tool)?);)*
    };
}

macro_rules! serve_operation {
    (tool $name:ident $tool:ident) => {
        async fn $name(
            self,
            _: Context,
            req: <tools::$tool as ToolMethod>::Request,
        ) -> Result<<tools::$tool as ToolMethod>::Answer, DaemonError> {
            self.operate::<tools::$tool>(req).await
        }
    };
    (fn $($rest:tt)*) => {};
}

impl Daemon for DaemonService {
    async fn hello(self, _: Context) -> Hello {
        Hello {
            protocol_version: PROTOCOL_VERSION,
            daemon_version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
        }
    }

    async fn status(self, _: Context) -> DaemonStatus {
        let s = &self.registry.settings;
        DaemonStatus {
            pid: std::process::id(),
            daemon_version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: PROTOCOL_VERSION,
            started_at: self.started_at.to_string(),
            socket: s.runtime.socket().display().to_string(),
            state_dir: s.state_dir.display().to_string(),
            log_file: s.log_file().display().to_string(),
            default_local_root: s.local_root.display().to_string(),
            ssh_config: s.ssh_config.as_ref().map(|p| p.display().to_string()),
            sessions: self.registry.session_count() as u32,
            max_sessions: s.max_sessions,
            max_output_bytes: s.max_output_bytes,
            max_transfers: s.max_transfers,
            max_spool_bytes: s.max_spool_bytes,
        }
    }

    /// Starts the daemon's orderly stop (see `lifecycle::run`): it stops accepting, closes
    /// every session and exits. The answer can be lost in that exit, so clients confirm the
    /// stop by the pidfile lock, not by the answer.
    async fn shutdown(self, _: Context) -> Result<(), DaemonError> {
        tracing::info!("shutdown requested");
        self.registry.stopped_by_person();
        self.stop.cancel();
        Ok(())
    }

    async fn connect(self, _: Context, req: ConnectRequest) -> Result<Connected, DaemonError> {
        let target = self
            .registry
            .redact_keys(&req.target.display())
            .into_owned();
        // A connect that failed has no session; its line names the target alone.
        let place = Place {
            target: target.clone(),
            ..Place::default()
        };
        let mut line = self.audited(Call::new(Tool::Connect, target), place);
        let connected = self.registry.connect(req).await;
        if let Ok(c) = &connected {
            line.place = Place {
                session_id: c.session_id.clone(),
                target: c.target.clone(),
                server_host: c.server_host.clone(),
                server_port: c.server_port,
            };
        }
        let connected = connected.map_err(|mut e| {
            e.message = self.registry.redact_keys(&e.message).into_owned();
            self.closed_by_the_stop(e)
        });
        line.finish(CallEnd::of(connected.as_ref()));
        connected.map_err(|e| self.for_client(e))
    }

    /// To its end: a close, once begun, goes on whatever becomes of the call (see
    /// `Registry::disconnect`), so its trail line says how it ended, not `cancelled`.
    async fn disconnect(self, _: Context, session_id: String) -> Result<Disconnected, DaemonError> {
        to_the_end("disconnect", async move { self.close(session_id).await }).await
    }

    async fn session_list(self, _: Context) -> Vec<SessionSummary> {
        self.registry.list()
    }

    async fn capabilities(self, _: Context) -> Vec<String> {
        capabilities().iter().map(|c| c.to_string()).collect()
    }

    async fn progress(
        self,
        _: Context,
        req: ProgressRequest,
    ) -> Result<Option<RunProgress>, DaemonError> {
        // Follows a call that already passed the policy; reads only the daemon's own state.
        let session = self.registry.authorize_local(&req.auth)?;
        session.touch();
        Ok(crate::commands::Commands::of(&session).progress(&req.key))
    }

    async fn introduce(self, _: Context, client: String) {
        self.introduced
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let name = client_name(&client);
        *self
            .client
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) =
            (!name.trim().is_empty()).then(|| name.into());
    }

    async fn policy(self, _: Context) -> PolicyReport {
        self.registry.policy_report()
    }

    async fn reload_policy(self, _: Context) -> Result<PolicyReport, DaemonError> {
        self.registry.reload_policy()
    }

    async fn output(self, _: Context, req: OutputRequest) -> Result<CommandReport, DaemonError> {
        let (kind, id, session) = person::find(&self.registry, &req.id)?;
        if kind == Kind::Exec {
            return commands::exec_output(&session, &self.registry.settings, &id, &req).await;
        }
        if kind != Kind::Command {
            return Err(DaemonError::invalid_arguments(format!(
                "{id} is a {}: only a command has output to read",
                kind.as_str()
            )));
        }
        let status = CommandStatusRequest {
            auth: unchecked(&session),
            handle_id: id,
            wait_seconds: req.wait_seconds,
            stdout_offset: req.stdout_offset,
            stderr_offset: req.stderr_offset,
            max_bytes: req.max_bytes,
        };
        commands::status(&session, &self.registry.settings, status).await
    }

    async fn stop_by_id(self, _: Context, id: String) -> Result<Stopped, DaemonError> {
        let (kind, id, session) = person::find(&self.registry, &id)?;
        let auth = unchecked(&session);
        // Written to the trail as the agent's own stop would be, with no client: the person's.
        let tool = match kind {
            Kind::Command | Kind::Exec => Tool::CommandKill,
            Kind::Transfer => Tool::TransferCancel,
            Kind::Forward => Tool::ForwardStop,
        };
        let line = self.audited(
            Call::new(tool, format!("{id} (by the person: sshmcp kill)")),
            Place::from(&*session),
        );
        let outcome = match kind {
            Kind::Command => {
                // An ended command stays as it ended: a kill would relabel it `killed`.
                if crate::commands::Commands::of(&session)
                    .find(&id)?
                    .ended()
                    .is_some()
                {
                    let listed = crate::commands::Commands::of(&session).list().commands;
                    let ended = listed.iter().find(|c| c.handle_id == id);
                    let how =
                        ended.map_or("ended".to_string(), |c| c.status.how_it_ended(c.exit_code));
                    let refused = DaemonError::invalid_arguments(format!(
                        "{id} already ended ({how}): nothing to stop"
                    ));
                    line.finish(CallEnd::failed(&refused));
                    return Err(refused);
                }
                let kill = CommandKillRequest {
                    auth,
                    handle_id: id.clone(),
                    signal: None,
                    force: Some(true),
                    wait_seconds: None,
                };
                let killed = commands::kill::kill_for_person(&session, kill).await;
                line.finish(CallEnd::of(killed.as_ref()));
                killed.map(|k| k.result.as_str().to_string())
            }
            Kind::Exec => {
                let stopped = commands::kill::stop_exec(&session, &id).await;
                line.finish(CallEnd::of(stopped.as_ref()));
                stopped.map(|result| result.as_str().to_string())
            }
            Kind::Transfer => {
                let cancelled = crate::transfers::Transfers::of(&session)
                    .cancel_for_person(&id)
                    .await;
                line.finish(CallEnd::of(cancelled.as_ref()));
                cancelled.map(|t| t.state.as_str().to_string())
            }
            Kind::Forward => {
                let stop = ForwardStopRequest {
                    auth,
                    forward_id: id.clone(),
                };
                let stopped = forwards::stop_for_person(&session, stop).await;
                line.finish(CallEnd::of(stopped.as_ref()));
                stopped.map(|_| "closed".to_string())
            }
        }?;
        Ok(Stopped {
            id,
            kind: kind.as_str().into(),
            session_id: session.id.clone(),
            outcome,
        })
    }

    async fn overview(self, _: Context) -> Overview {
        Overview {
            pid: std::process::id(),
            taken_at: sshmcp_proto::time::now_rfc3339(),
            sessions: self.registry.overview(),
            audit: self.trail.as_ref().map(|t| t.counts.snapshot()),
        }
    }

    sshmcp_proto::daemon_methods!(serve_operations);
}

impl DaemonService {
    pub fn new(
        registry: Arc<Registry>,
        stop: CancellationToken,
        trail: Option<Arc<Trail>>,
    ) -> Self {
        Self {
            registry,
            stop,
            started_at: sshmcp_proto::time::now_rfc3339().into(),
            trail,
            client: Default::default(),
            introduced: Default::default(),
        }
    }

    /// The service for one client connection: the same daemon, its own introduction.
    pub fn for_connection(&self) -> Self {
        Self {
            client: Default::default(),
            introduced: Default::default(),
            ..self.clone()
        }
    }

    /// Closes a session by its id (`disconnect`), and writes the call to the trail.
    async fn close(&self, session_id: String) -> Result<Disconnected, DaemonError> {
        let session = self.registry.find(&session_id)?;
        let by_person = self
            .client
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_deref()
            == Some(sshmcp_proto::service::PERSON_CLIENT);
        let summary = match by_person {
            true => "(by the person: sshmcp disconnect)".to_string(),
            false => String::new(),
        };
        let line = self.audited(Call::new(Tool::Disconnect, summary), Place::from(&*session));
        let disconnected = match self.allowed(Tool::Disconnect, &session) {
            Ok(()) => self.registry.disconnect(&session_id).await,
            Err(refused) => Err(refused),
        };
        if by_person && disconnected.is_ok() {
            self.registry.closed_by_person(&session_id);
        }
        line.finish(CallEnd::of(disconnected.as_ref()));
        disconnected.map_err(|e| self.for_client(e))
    }

    /// A tool's operation (see [`Operation`]): the request checked, then run where the
    /// operation says.
    async fn operate<O: Operation>(&self, req: O::Request) -> Result<O::Answer, DaemonError> {
        O::check(&req)?;
        match O::RUNS {
            Runs::OnHost => self.on_host::<O>(req).await,
            Runs::InDaemon => {
                let session = self.local_session::<O>(&req)?;
                O::run(req, session, &self.registry).await
            }
            Runs::InDaemonWritten => {
                let session = self.local_session::<O>(&req)?;
                let call = Call::new(O::TOOL, O::summary(&req)).redacted(&self.registry);
                let line = self.audited(call, Place::from(&*session));
                let outcome = O::run(req, session, &self.registry).await;
                line.finish(CallEnd::of(outcome.as_ref()));
                outcome
            }
        }
    }

    /// The one path of every tool that works on a host: check the key, the session's state
    /// and the policy, run the operation, mark the session lost when the operation found the
    /// master gone, and write the call to the audit trail (a refusal by the policy too).
    async fn on_host<O: Operation>(&self, req: O::Request) -> Result<O::Answer, DaemonError> {
        let tool = O::TOOL;
        let call = Call::new(tool, O::summary(&req));
        let started = call.started;
        let session = self.registry.authorize(req.auth())?;
        let call = call.redacted(&self.registry);
        let line = self.audited(call, Place::from(&*session));
        if let Err(refused) = self.allowed(tool, &session) {
            return Err(self.refuse(line, refused));
        }
        session.touch();
        let outcome = O::run(req, session.clone(), &self.registry).await;
        session.touch();
        let outcome = outcome.map_err(|mut e| match e.code {
            // A host that never confirmed the call's start stalled: the master's keepalive
            // judges whether the session is lost, not this call.
            ErrorCode::ConnectionLost if crate::remote::unconfirmed(&e) => e,
            // The session is lost; an error that says the command had started keeps saying
            // so.
            ErrorCode::ConnectionLost => match e.details.started {
                Some(true) => {
                    session.mark_lost();
                    e
                }
                _ => connection_lost(&session),
            },
            _ => {
                e.message = self.registry.redact_keys(&e.message).into_owned();
                self.closed_by_the_stop(e)
            }
        });
        tracing::debug!(
            tool = tool.name(),
            session = %session.id,
            outcome = outcome.as_ref().err().map_or("ok", |e| e.code.as_str()),
            seconds = started.elapsed().as_secs_f64(),
            "call done"
        );
        line.finish(CallEnd::of(outcome.as_ref()));
        outcome
    }

    /// `session_closed` of a call whose session the stop's teardown closed under it says who
    /// did (`server_closing`); any other error is as it is.
    fn closed_by_the_stop(&self, e: DaemonError) -> DaemonError {
        match e.code {
            ErrorCode::SessionClosed if self.registry.is_closing() => DaemonError {
                code: ErrorCode::ServerClosing,
                message: format!(
                    "the daemon is stopping, and closed the session: {}",
                    e.message
                ),
                details: e.details,
            },
            _ => e,
        }
    }

    /// The session `req` names for a tool that needs no SSH (see
    /// [`Registry::authorize_local`]), once the policy allows the tool there (a refusal is
    /// written to the trail).
    fn local_session<O: Operation>(&self, req: &O::Request) -> Result<Arc<Session>, DaemonError> {
        let session = self.registry.authorize_local(req.auth())?;
        if let Err(refused) = self.allowed(O::TOOL, &session) {
            let call = Call::new(O::TOOL, O::summary(req)).redacted(&self.registry);
            let line = self.audited(call, Place::from(&*session));
            return Err(self.refuse(line, refused));
        }
        session.touch();
        Ok(session)
    }

    /// Whether the policy in force lets `tool` work on `session`.
    fn allowed(&self, tool: Tool, session: &Session) -> Result<(), DaemonError> {
        self.registry.check_policy(tool, session)
    }

    /// `e` as this connection's client can read it (see [`readable`]).
    fn for_client(&self, e: DaemonError) -> DaemonError {
        readable(
            e,
            self.introduced.load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// The guard that writes `call`'s line.
    fn audited(&self, call: Call, place: Place) -> Audited<'_> {
        let number = match &self.trail {
            Some(trail) => trail.begin(self.line(&call, &place, &CallEnd::CANCELLED)),
            None => 0,
        };
        Audited {
            service: self,
            call: Some(call),
            place,
            number,
        }
    }

    /// Ends `line` with the policy's refusal and gives the refusal as this client reads it.
    fn refuse(&self, line: Audited<'_>, refused: DaemonError) -> DaemonError {
        line.finish(CallEnd::failed(&refused));
        self.for_client(refused)
    }

    /// Queues the trail's line for call `number` at `place`, ended as `end` says.
    fn write_line(&self, number: u64, call: &Call, place: &Place, end: &CallEnd) {
        if let Some(trail) = &self.trail {
            trail.record(number, self.line(call, place, end));
        }
    }

    /// The trail's line for `call` at `place`, ended now as `end` says.
    fn line(&self, call: &Call, place: &Place, end: &CallEnd) -> AuditEntry {
        let client = self
            .client
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .as_deref()
            .map(str::to_string);
        AuditEntry {
            time: sshmcp_proto::time::rfc3339(call.arrived),
            session_id: place.session_id.clone(),
            target: place.target.clone(),
            server_host: place.server_host.clone(),
            server_port: place.server_port,
            tool: call.tool.name().to_string(),
            summary: call.summary.clone(),
            outcome: end.outcome.to_string(),
            message: end.message.clone(),
            exit_code: end.exit_code,
            signal: end.signal.clone(),
            duration: call.started.elapsed().as_secs_f64(),
            client,
        }
    }
}

/// The auth of a call the person makes with no key: never checked (the session is found
/// by the person's id), and naming the session only.
fn unchecked(session: &Session) -> SessionAuth {
    SessionAuth {
        session_id: session.id.clone(),
        session_key: String::new(),
    }
}

/// Bytes of a client's name the trail keeps.
const CLIENT_NAME_BYTES: usize = 100;

/// A client's name as the trail keeps it: it comes from the agent's side, so control
/// characters become spaces and it is cut to [`CLIENT_NAME_BYTES`].
/// `e` as a client can read it: one that did not introduce itself predates `policy_denied`
/// (its variant would break its decoding), so it gets the same message as
/// `invalid_arguments`.
fn readable(e: DaemonError, introduced: bool) -> DaemonError {
    match e.code {
        ErrorCode::PolicyDenied if !introduced => {
            DaemonError::new(ErrorCode::InvalidArguments, e.message)
        }
        _ => e,
    }
}

fn client_name(given: &str) -> String {
    let mut name = String::new();
    for c in given.chars() {
        if name.len() + c.len_utf8() > CLIENT_NAME_BYTES {
            break;
        }
        name.push(if c.is_control() { ' ' } else { c });
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that did not introduce itself (one older than `policy_denied`) reads a
    /// refusal as `invalid_arguments`, with the same message; one that did reads it as is.
    #[test]
    fn a_refusal_reaches_a_client_as_it_can_read_it() {
        let refused = || DaemonError::new(ErrorCode::PolicyDenied, "refused");
        let old = readable(refused(), false);
        assert_eq!(
            (old.code, old.message.as_str()),
            (ErrorCode::InvalidArguments, "refused")
        );
        assert_eq!(readable(refused(), true).code, ErrorCode::PolicyDenied);
        let other = DaemonError::new(ErrorCode::SessionNotFound, "gone");
        assert_eq!(readable(other, false).code, ErrorCode::SessionNotFound);
    }

    /// A client's name as the trail shows it: control characters are spaces, and a long
    /// name is cut at a character within the limit.
    #[test]
    fn a_client_name_is_one_printable_line_within_its_limit() {
        assert_eq!(
            client_name("claude-code 2.1\n\u{1b}[31m"),
            "claude-code 2.1  [31m"
        );
        let long = "é".repeat(CLIENT_NAME_BYTES);
        let cut = client_name(&long);
        assert_eq!(cut.len(), CLIENT_NAME_BYTES);
        assert_eq!(
            client_name(&"x".repeat(CLIENT_NAME_BYTES + 1)).len(),
            CLIENT_NAME_BYTES
        );
        let odd = format!("a{}", "é".repeat(CLIENT_NAME_BYTES));
        assert_eq!(client_name(&odd).len(), CLIENT_NAME_BYTES - 1);
    }
}
