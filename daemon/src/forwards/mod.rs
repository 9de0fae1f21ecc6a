//! Port forwards: listeners the session's master sets up through its mux protocol, as
//! `ssh -O forward` does (no new connection, no new authentication). The daemon checks what
//! may listen where, keeps each session's list, and closes them; the master carries the data.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use sshmcp_proto::error::ErrorDetails;
use sshmcp_proto::forward::{
    ForwardInfo, ForwardKind, ForwardList, ForwardStartRequest, ForwardStopRequest,
};
use sshmcp_proto::time::rfc3339;
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::config::Settings;
use crate::mux::{self, Forwarding, MuxError, wire};
use crate::remote::status::run_program;
use crate::session::Session;
use crate::session::record::Entry;
use crate::session::record::{from_unix_ms, unix_ms};
use crate::session::work::Work;
use sshmcp_proto::overview::SessionView;
use sshmcp_proto::session::SessionSummary;

/// Where the host listens on a port, as its kernel says: `public ADDR`, `loopback` or `unseen`.
const BOUND: &str = include_str!("bound.sh");

/// The listening addresses allowed without `--allow-public-forwards`.
const LOOPBACK: [&str; 3] = ["127.0.0.1", "::1", "localhost"];
/// How long the host may take to say where it listens for a remote forward.
const CHECK_TIMEOUT: Duration = Duration::from_secs(15);
/// How many free ports a local or dynamic forward on port 0 tries: another program may take
/// the one found before the master binds it.
const FREE_PORT_TRIES: usize = 5;

/// One forward of a session.
struct Forward {
    id: String,
    kind: ForwardKind,
    /// The port in force.
    listen_port: u16,
    /// As the master knows it (with the port asked, 0 for a remote one the server chose):
    /// what closes it.
    opened: Forwarding,
    created_at: SystemTime,
}

impl Forward {
    fn info(&self) -> ForwardInfo {
        let has_target = self.kind != ForwardKind::Dynamic;
        ForwardInfo {
            forward_id: self.id.clone(),
            kind: self.kind,
            listen_host: self.opened.listen_host.clone(),
            listen_port: self.listen_port,
            target_host: has_target.then(|| self.opened.connect_host.clone()),
            target_port: has_target.then_some(self.opened.connect_port),
            created_at: rfc3339(self.created_at),
        }
    }
}

/// One session's forwards, oldest first.
#[derive(Default)]
pub struct Forwards {
    list: Mutex<Vec<Arc<Forward>>>,
    /// Held from the check of a new forward to its listing, and from a close to its removal:
    /// the master answers a forward it already has with success, so two starts alike must
    /// not both reach it, and a stop must not race a start of the same forward.
    changing: tokio::sync::Mutex<()>,
    /// Requests that timed out and are still followed (`ask_master`): the master keeps them
    /// and would answer a request alike at once, with nothing granted yet.
    late: Mutex<Vec<Forwarding>>,
    /// The forwards the person closed (`sshmcp kill`): an agent that names one is told so.
    closed_by_person: crate::session::person_stops::Stopped,
}

impl Forwards {
    fn late_requests(&self) -> MutexGuard<'_, Vec<Forwarding>> {
        self.late
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn locked(&self) -> MutexGuard<'_, Vec<Arc<Forward>>> {
        self.list
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Forgets every forward: the master that held them is gone.
    pub fn clear(&self) {
        self.locked().clear();
    }

    pub fn count(&self) -> u32 {
        self.locked().len() as u32
    }

    /// `forward_list`.
    pub fn list(&self) -> ForwardList {
        ForwardList {
            forwards: self.locked().iter().map(|f| f.info()).collect(),
        }
    }

    /// The forwards as the session record keeps them.
    pub fn recorded(&self) -> Vec<ForwardEntry> {
        self.locked()
            .iter()
            .map(|f| ForwardEntry {
                forward_id: f.id.clone(),
                kind: f.kind.as_str().to_string(),
                listen_host: f.opened.listen_host.clone(),
                listen_port: f.listen_port,
                opened_port: f.opened.listen_port,
                target_host: f.opened.connect_host.clone(),
                target_port: f.opened.connect_port,
                created_unix_ms: unix_ms(f.created_at),
            })
            .collect()
    }

    /// Takes back the forwards a record names: the master that holds them outlived the
    /// daemon that opened them.
    pub fn adopt(&self, entries: Vec<ForwardEntry>) {
        let forwards = entries.into_iter().filter_map(|e| {
            let kind = [
                ForwardKind::Local,
                ForwardKind::Remote,
                ForwardKind::Dynamic,
            ]
            .into_iter()
            .find(|k| k.as_str() == e.kind)?;
            Some(Arc::new(Forward {
                id: e.forward_id,
                kind,
                listen_port: e.listen_port,
                opened: Forwarding {
                    kind: mux_kind(kind),
                    listen_host: e.listen_host,
                    listen_port: e.opened_port,
                    connect_host: e.target_host,
                    connect_port: e.target_port,
                },
                created_at: from_unix_ms(e.created_unix_ms),
            }))
        });
        self.locked().extend(forwards);
    }
}

fn mux_kind(kind: ForwardKind) -> u32 {
    match kind {
        ForwardKind::Local => wire::FWD_LOCAL,
        ForwardKind::Remote => wire::FWD_REMOTE,
        ForwardKind::Dynamic => wire::FWD_DYNAMIC,
    }
}

fn failed(message: impl Into<String>) -> DaemonError {
    DaemonError::new(ErrorCode::ForwardFailed, message)
}

/// A host OpenSSH can take as a listening or target address: a name, an IPv4 or IPv6
/// address, or `*` (every address, public forwards only).
fn check_host(what: &str, host: &str) -> Result<(), DaemonError> {
    let fine = !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':' | b'*'));
    match fine {
        true => Ok(()),
        false => Err(DaemonError::invalid_arguments(format!(
            "{what} must be a host name or an IP address"
        ))),
    }
}

/// The request's own checks; returns the listening host. `localhost` (in any case, as host
/// names go) is taken as 127.0.0.1: OpenSSH would count a listener on either of its
/// addresses as done, and a port busy on the other would then reach someone else's program.
fn check(req: &ForwardStartRequest, settings: &Settings) -> Result<String, DaemonError> {
    let listen_host = match req.listen_host.as_deref() {
        None => "127.0.0.1".to_string(),
        Some(host) if host.eq_ignore_ascii_case("localhost") => "127.0.0.1".to_string(),
        Some(host) => host.to_string(),
    };
    check_host("listen_host", &listen_host)?;
    if !settings.allow_public_forwards && !LOOPBACK.contains(&listen_host.as_str()) {
        return Err(DaemonError::new(
            ErrorCode::ForwardNotAllowed,
            format!(
                "forwards listen on 127.0.0.1, ::1 or localhost only, unless the daemon runs \
                 with --allow-public-forwards (the user's choice): {listen_host} is none of them"
            ),
        ));
    }
    match (req.kind, &req.target_host, req.target_port) {
        (ForwardKind::Dynamic, None, None) => Ok(listen_host),
        (ForwardKind::Dynamic, _, _) => Err(DaemonError::invalid_arguments(
            "a dynamic forward has no target_host or target_port: the SOCKS client names \
             each destination",
        )),
        (_, Some(host), Some(port)) if port > 0 => {
            check_host("target_host", host)?;
            Ok(listen_host)
        }
        _ => Err(DaemonError::invalid_arguments(
            "local and remote forwards need target_host and target_port (1-65535)",
        )),
    }
}

/// `forward_start`.
pub async fn start(
    session: &Arc<Session>,
    settings: &Settings,
    req: ForwardStartRequest,
) -> Result<ForwardInfo, DaemonError> {
    let listen_host = check(&req, settings)?;
    if session.host.master_stopped() {
        return Err(DaemonError::internal(
            "the session's ssh master is stopped (SIGSTOP); continue it (kill -CONT) or \
             disconnect",
        ));
    }
    let forwards = Forwards::of(session);
    let _changing = forwards.changing.lock().await;
    let mut opened = Forwarding {
        kind: mux_kind(req.kind),
        listen_host: listen_host.clone(),
        listen_port: req.listen_port,
        // A dynamic forward is a listener whose connect port is 0; the master still wants a
        // connect host, and `ssh -D` names it `socks`.
        connect_host: req.target_host.clone().unwrap_or_else(|| "socks".into()),
        connect_port: req.target_port.unwrap_or(0),
    };
    if forwards.late_requests().contains(&opened) {
        return Err(failed(
            "an earlier forward_start alike timed out and its request still waits for the \
             host's answer (it is withdrawn when that comes): try again once the host answers",
        ));
    }
    // The master answers a forward it already has with success and keeps one listener, so
    // a second one alike would be an alias that a forward_stop of either closes.
    if let Some(same) = forwards.locked().iter().find(|f| {
        let same_side = (f.kind == ForwardKind::Remote) == (req.kind == ForwardKind::Remote);
        let same_port = match req.listen_port {
            0 => f.opened == opened,
            port => f.listen_port == port,
        };
        same_side && f.opened.listen_host == listen_host && same_port
    }) {
        return Err(failed(format!(
            "{} already listens on {listen_host}:{} for this session: use it if it forwards \
             where you want (forward_list), else forward_stop it first or pass listen_port: 0",
            same.id, same.listen_port
        ))
        .with_details(ErrorDetails {
            forward_id: Some(same.id.clone()),
            ..ErrorDetails::default()
        }));
    }
    let listen_port = match req.kind {
        ForwardKind::Remote => match ask_master(session, &opened).await {
            Ok(allocated) => {
                let port = allocated.unwrap_or(req.listen_port);
                if !settings.allow_public_forwards {
                    listens_on_loopback(session, &opened, port).await?;
                }
                port
            }
            Err(MuxError::Refused(_)) => {
                let port = match req.listen_port {
                    0 => "a port".to_string(),
                    port => format!("port {port}"),
                };
                return Err(failed(format!(
                    "the host's sshd refused to listen on {port} of {listen_host} (the port is \
                     in use there, below 1024 for a user who is not root, or its \
                     AllowTcpForwarding or PermitListen forbids it)"
                )));
            }
            Err(e) => return Err(mux_failure(session, e)),
        },
        ForwardKind::Local | ForwardKind::Dynamic => {
            open_here(session, &mut opened, req.listen_port).await?
        }
    };
    let id = crate::random::nonce("fw-")
        .map_err(|e| DaemonError::internal(format!("no randomness: {e}")))?;
    let forward = Arc::new(Forward {
        id: id[..19].to_string(),
        kind: req.kind,
        listen_port,
        opened,
        created_at: SystemTime::now(),
    });
    forwards.locked().push(forward.clone());
    // The forward the answer names is in the record before it: a daemon that died right
    // after would otherwise leave the master's listener open with no forward to stop it by.
    session.record.until_written().await;
    tracing::info!(session = %session.id, forward = %forward.id, kind = req.kind.as_str(), listen_port, "forward opened");
    Ok(forward.info())
}

/// Keeps a remote forward only where the host listens for it on loopback alone, else closes
/// it: sshd, not the client, decides where a remote forward listens, and with `GatewayPorts
/// yes` that is every address, whatever was asked. A forward that cannot be checked (no
/// channel came, the host did not answer) is closed too; one the host shows no listener for
/// (it has no way to tell) is kept, and the log says so.
async fn listens_on_loopback(
    session: &Session,
    opened: &Forwarding,
    port: u16,
) -> Result<(), DaemonError> {
    let script = format!("port={port}\n{BOUND}");
    let said = run_program(
        &session.host,
        script,
        Vec::new(),
        b"the forward's listener",
        4096,
        CHECK_TIMEOUT,
        false,
    )
    .await;
    let (refused, closed) = match said {
        Ok((_, out)) => match public_listener(&String::from_utf8_lossy(&out)) {
            Listener::Loopback => return Ok(()),
            Listener::Unseen => {
                tracing::info!(session = %session.id, port, "no listener shown for a remote forward: kept, not checked");
                return Ok(());
            }
            Listener::Public(address) => (
                DaemonError::new(
                    ErrorCode::ForwardNotAllowed,
                    format!(
                        "once the remote forward opened, the host listened on {address} port \
                         {port}, beyond loopback (an sshd with GatewayPorts yes listens for \
                         remote forwards on every address, whatever was asked)"
                    ),
                ),
                "closed it; only a daemon run with --allow-public-forwards keeps such a forward",
            ),
        },
        Err(e) => (
            e,
            "where the host listens for it is not known, so it was closed",
        ),
    };
    match mux::close_forward(&session.host.control_path, opened).await {
        Ok(()) => Err(DaemonError {
            message: format!("{}: {closed}", refused.message),
            ..refused
        }),
        Err(e) => Err(DaemonError {
            message: format!(
                "{}; closing it failed too ({e}): it may still listen until the session is \
                 disconnected",
                refused.message
            ),
            ..refused
        }),
    }
}

/// What `bound.sh` saw listening on a port.
enum Listener {
    /// Every listener there is on loopback.
    Loopback,
    /// No listener shows: the host has no way to tell (or hides it).
    Unseen,
    /// A listener beyond loopback, at this address.
    Public(String),
}

/// `bound.sh`'s answer.
fn public_listener(out: &str) -> Listener {
    match out.lines().find_map(|line| line.strip_prefix("public ")) {
        Some(address) => Listener::Public(shown_address(address)),
        None if out.lines().any(|line| line == "loopback") => Listener::Loopback,
        None => Listener::Unseen,
    }
}

/// An address as the kernel's `/proc/net/tcp*` gives it (hex, each 32-bit word in this
/// byte order), or as `netstat` does (kept).
fn shown_address(word: &str) -> String {
    let words: Option<Vec<[u8; 4]>> = match word.len() {
        8 | 32 if word.bytes().all(|b| b.is_ascii_hexdigit()) => Some(
            word.as_bytes()
                .chunks(8)
                .map(|chunk| {
                    let hex = std::str::from_utf8(chunk).unwrap_or("0");
                    u32::from_str_radix(hex, 16).unwrap_or(0).to_le_bytes()
                })
                .collect(),
        ),
        _ => None,
    };
    match words.as_deref() {
        Some([v4]) => std::net::Ipv4Addr::from(*v4).to_string(),
        Some(v6) if v6.len() == 4 => {
            let bytes: [u8; 16] = v6.concat().try_into().unwrap_or([0; 16]);
            std::net::Ipv6Addr::from(bytes).to_string()
        }
        _ => word.to_string(),
    }
}

/// Opens a forward that listens on this machine. The master's answer carries no port, so a
/// port 0 is a free one found here first (tried again if someone takes it meanwhile).
async fn open_here(
    session: &Arc<Session>,
    opened: &mut Forwarding,
    asked: u16,
) -> Result<u16, DaemonError> {
    let tries = if asked == 0 { FREE_PORT_TRIES } else { 1 };
    for _ in 0..tries {
        if asked == 0 {
            opened.listen_port = free_port(&opened.listen_host)?;
        }
        match ask_master(session, opened).await {
            Ok(_) => return Ok(opened.listen_port),
            Err(MuxError::Refused(_)) => continue,
            Err(e) => return Err(mux_failure(session, e)),
        }
    }
    Err(failed(match asked {
        0 => format!("no free port on {} could be bound", opened.listen_host),
        port => format!(
            "cannot listen on {}:{port} on this machine (the port is in use, or reserved \
             below 1024)",
            opened.listen_host
        ),
    }))
}

/// How long an unanswered request to open a forward is followed: a master (or, for a remote
/// forward, the server behind it) that answers this late still gets the forward withdrawn.
const LATE_ANSWER_WAIT: Duration = Duration::from_secs(600);

/// Asks the master to open `opened`, answering within the mux's exchange timeout. The
/// request runs in a task of its own, so that neither that timeout nor a caller that went
/// away (its call dropped) leaves the master or the server listening unlisted: an answer
/// that comes later, a success, is withdrawn (the forward named as it was asked, which is
/// how the master knows a remote port it let the server choose). Meanwhile a start alike is
/// refused: the master would answer it at once from the pending request.
async fn ask_master(session: &Arc<Session>, opened: &Forwarding) -> Result<Option<u16>, MuxError> {
    let (control, forwarding) = (session.host.control_path.clone(), opened.clone());
    let mut asked =
        tokio::spawn(
            async move { mux::open_forward(&control, &forwarding, LATE_ANSWER_WAIT).await },
        );
    let late = match tokio::time::timeout(mux::EXCHANGE_TIMEOUT, &mut asked).await {
        Ok(Ok(answer)) => return answer,
        Ok(Err(e)) => {
            return Err(MuxError::Protocol(format!(
                "the request's task failed: {e}"
            )));
        }
        Err(_) => asked,
    };
    Forwards::of(session).late_requests().push(opened.clone());
    let (session, pending) = (session.clone(), opened.clone());
    tokio::spawn(async move {
        let answered = late.await;
        // Withdrawn before a start alike may ask again.
        let forwards = Forwards::of(&session);
        let _changing = forwards.changing.lock().await;
        if let Ok(Ok(_)) = answered {
            let closed = mux::close_forward(&session.host.control_path, &pending).await;
            tracing::info!(
                "a forward the master opened after its request timed out was withdrawn: {closed:?}"
            );
        }
        let mut late = forwards.late_requests();
        if let Some(at) = late.iter().position(|f| *f == pending) {
            late.remove(at);
        }
    });
    Err(MuxError::Silent)
}

/// A port nothing listens on at `host` right now.
fn free_port(host: &str) -> Result<u16, DaemonError> {
    let host = if host == "*" { "0.0.0.0" } else { host };
    std::net::TcpListener::bind((host, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| failed(format!("cannot find a free port on {host}: {e}")))
}

/// A master that cannot be asked: gone (the session is lost), or silent (it waits on a host
/// that froze, or a connection that stalled).
fn mux_failure(session: &Session, e: MuxError) -> DaemonError {
    match (session.host.master_gone(), e) {
        (true, _) => crate::session::registry::connection_lost(session),
        (false, MuxError::Silent) => DaemonError::new(
            ErrorCode::ForwardFailed,
            "the session's master did not answer the request in time (the host may have \
             frozen, or its connection stalled; session_list shows whether the session is \
             still ready); forward_list shows the forwards in place",
        ),
        (false, e) => DaemonError::internal(format!(
            "the session's master did not take the request: {e}"
        )),
    }
}

/// `forward_stop`: closes the listener. A local or dynamic port is free once this answers; a
/// remote one once the server has acted on the cancel the master sent it.
pub async fn stop(session: &Session, req: ForwardStopRequest) -> Result<ForwardInfo, DaemonError> {
    close(session, req, false).await
}

/// The person's close (`sshmcp kill`), which the agent is told of when it names the forward.
pub async fn stop_for_person(
    session: &Session,
    req: ForwardStopRequest,
) -> Result<ForwardInfo, DaemonError> {
    close(session, req, true).await
}

async fn close(
    session: &Session,
    req: ForwardStopRequest,
    by_person: bool,
) -> Result<ForwardInfo, DaemonError> {
    let forwards = Forwards::of(session);
    let _changing = forwards.changing.lock().await;
    let forward = forwards
        .locked()
        .iter()
        .find(|f| f.id == req.forward_id)
        .cloned()
        .ok_or_else(|| {
            let message = match forwards.closed_by_person.told(&req.forward_id) {
                Some(when) => format!(
                    "no forward with this forward_id in this session: the person closed it \
                     {when}: ask them before you open it again"
                ),
                None => "no forward with this forward_id in this session (forward_list shows \
                         them)"
                    .to_string(),
            };
            DaemonError::new(ErrorCode::ForwardNotFound, message)
        })?;
    match mux::close_forward(&session.host.control_path, &forward.opened).await {
        Ok(()) => {}
        // The master no longer has it: closed is what was asked. Any other refusal may leave
        // it listening, so it stays listed.
        Err(MuxError::Refused(reason)) if reason == "port not forwarded" => {
            tracing::info!(forward = %forward.id, "the master had no such forward");
        }
        Err(MuxError::Refused(reason)) => {
            return Err(failed(format!("the master could not close it: {reason}")));
        }
        Err(e) => return Err(mux_failure(session, e)),
    }
    // Remembered before it leaves the list: an agent never finds it just gone.
    if by_person {
        forwards
            .closed_by_person
            .remember(&forward.id, crate::session::person_stops::How::Kill);
    }
    forwards.locked().retain(|f| !Arc::ptr_eq(f, &forward));
    session.record.ask();
    tracing::info!(session = %session.id, forward = %forward.id, "forward closed");
    Ok(forward.info())
}

// A call answered so adds nothing to its trail line but how it ended.
impl crate::audit::Answer for sshmcp_proto::forward::ForwardInfo {}
impl crate::audit::Answer for sshmcp_proto::forward::ForwardList {}

impl Forwards {
    /// This session's forwards.
    pub fn of(session: &Session) -> Arc<Forwards> {
        session.work::<Forwards>()
    }
}

/// A port forward as the session record keeps it (oldest first, its part `forwards`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ForwardEntry {
    pub forward_id: String,
    /// `local`, `remote` or `dynamic`.
    pub kind: String,
    pub listen_host: String,
    /// The port in force.
    pub listen_port: u16,
    /// The port as the master was asked (0 for a remote port the server chose): what closes it.
    pub opened_port: u16,
    /// `socks` and 0 for a dynamic forward (as `ssh -D` names it to the master).
    pub target_host: String,
    pub target_port: u16,
    pub created_unix_ms: u64,
}

/// The session record's part of the forwards.
const PART: &str = "forwards";

impl Work for Forwards {
    fn master_lost(&self) {
        self.clear();
    }

    fn count(&self, summary: &mut SessionSummary) {
        summary.active_forwards = self.count();
    }

    fn record(&self, entry: &mut Entry, _: &dyn Fn(&str) -> String) {
        entry.put(PART, &self.recorded());
    }

    /// Only a live master still holds its forwards.
    fn adopt(&self, _: &Session, entry: &mut Entry, ready: bool) {
        if ready {
            Forwards::adopt(self, entry.take(PART));
        }
    }

    fn show(&self, view: &mut SessionView) {
        view.forwards = self.list().forwards;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sshmcp_proto::session::SessionAuth;

    /// A forward as every daemon so far wrote it in the session record reads back, and is
    /// written again, field for field: records cross daemon versions.
    #[test]
    fn a_recorded_forward_keeps_its_layout() {
        let written = serde_json::json!({
            "forward_id": "fw-0123456789abcdef", "kind": "remote", "listen_host": "127.0.0.1",
            "listen_port": 40000, "opened_port": 0, "target_host": "localhost",
            "target_port": 8080, "created_unix_ms": 3
        });
        let entry: ForwardEntry = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(serde_json::to_value(&entry).unwrap(), written);
    }

    #[test]
    fn kernel_addresses_read_as_people_write_them() {
        assert_eq!(shown_address("0100007F"), "127.0.0.1");
        assert_eq!(shown_address("00000000"), "0.0.0.0");
        assert_eq!(shown_address(&"0".repeat(32)), "::");
        assert_eq!(shown_address("00000000000000000000000001000000"), "::1");
        assert_eq!(shown_address("*"), "*");
        assert_eq!(shown_address("::1"), "::1");
    }

    /// Where the user's programs listen, under every shell a host may have as `/bin/sh`: from
    /// Linux's tables (IPv4 and IPv6, a mapped loopback address, either byte order, another
    /// user's listener left aside), else from `netstat` (BSD's layout and net-tools').
    #[cfg(target_os = "linux")]
    #[test]
    fn the_listener_check_runs_under_every_posix_shell() {
        let net = tempfile::tempdir().unwrap();
        let uid = nix::unistd::getuid().as_raw();
        let line = |n: u32, address: &str, state: &str, owner: u32| {
            format!(
                "   {n}: {address} 00000000:0000 {state} 00000000:00000000 00:00000000 \
                 00000000 {owner:>6}        0 1 1\n"
            )
        };
        let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when \
                      retrnsmt   uid  timeout inode\n";
        let tcp = [
            line(0, "0100007F:1F90", "0A", uid),
            line(1, "00000000:1F91", "0A", uid),
            line(2, "0A000001:1F92", "01", uid),
            line(3, "00000000:1F95", "0A", uid + 1),
            line(4, "7F000001:1F96", "0A", uid),
        ]
        .concat();
        let tcp6 = [
            line(0, "00000000000000000000000001000000:1F90", "0A", uid),
            line(1, "0000000000000000FFFF00000100007F:1F93", "0A", uid),
            line(2, "00000000000000000000000000000000:1F94", "0A", uid),
            line(3, "00000000000000000000000000000001:1F97", "0A", uid),
        ]
        .concat();
        std::fs::write(net.path().join("tcp"), format!("{header}{tcp}")).unwrap();
        std::fs::write(net.path().join("tcp6"), format!("{header}{tcp6}")).unwrap();
        let bin = tempfile::tempdir().unwrap();
        let netstat = bin.path().join("netstat");
        std::fs::write(
            &netstat,
            "#!/bin/sh\ncat <<'E'\nActive Internet connections (including servers)\n\
             Proto Recv-Q Send-Q  Local Address          Foreign Address        (state)\n\
             tcp4       0      0  127.0.0.1.8080         *.*                    LISTEN\n\
             tcp46      0      0  *.8081                 *.*                    LISTEN\n\
             tcp6       0      0  ::1.8082               *.*                    LISTEN\n\
             tcp4       0      0  10.0.0.1.22            10.0.0.2.5000          ESTABLISHED\n\
             tcp        0      0  127.0.0.1:8083         0.0.0.0:*              LISTEN\n\
             tcp6       0      0  :::8084                :::*                   LISTEN\n\
             udp        0      0  0.0.0.0:8085           0.0.0.0:*\nE\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&netstat, std::fs::Permissions::from_mode(0o755)).unwrap();
        let home = tempfile::tempdir().unwrap();
        let shells = crate::programs::Shells::new();
        for (shell, path) in shells.each() {
            let with_netstat = format!("{}:{path}", bin.path().display());
            let said = |net: &std::path::Path, port: u16| {
                let script = format!("net='{}'\nport={port}\n{BOUND}", net.display());
                crate::programs::run_under(&shell, &with_netstat, home.path(), &script, b"")
            };
            let linux = [
                (8080, "loopback"),
                (8081, "public 00000000"),
                (8082, "unseen"),
                (8083, "loopback"),
                (8084, "public 00000000000000000000000000000000"),
                (8085, "unseen"),
                (8086, "loopback"),
                (8087, "loopback"),
                (9999, "unseen"),
            ];
            for (port, answer) in linux {
                let said = said(net.path(), port);
                assert_eq!(said, format!("ok\n{answer}\n"), "{shell:?} {port}");
            }
            // BusyBox runs its own `netstat` whatever PATH says; a BusyBox host has /proc/net,
            // read first.
            if path == shells.busybox_path() {
                continue;
            }
            let none = std::path::Path::new("/nonexistent-net");
            let netstat = [
                (8080, "loopback"),
                (8081, "public *"),
                (8082, "loopback"),
                (22, "unseen"),
                (8083, "loopback"),
                (8084, "public ::"),
                (8085, "unseen"),
            ];
            for (port, answer) in netstat {
                let said = said(none, port);
                assert_eq!(said, format!("ok\n{answer}\n"), "{shell:?} {port}");
            }
        }
    }

    fn req(
        kind: ForwardKind,
        listen: Option<&str>,
        target: Option<(&str, u16)>,
    ) -> ForwardStartRequest {
        ForwardStartRequest {
            auth: SessionAuth {
                session_id: "s".into(),
                session_key: "k".into(),
            },
            kind,
            listen_port: 0,
            listen_host: listen.map(String::from),
            target_host: target.map(|t| t.0.to_string()),
            target_port: target.map(|t| t.1),
        }
    }

    fn settings(allow_public: bool) -> Settings {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        std::fs::write(&config, "").unwrap();
        let flags = crate::config::Flags {
            state_dir: Some(dir.path().join("state")),
            local_root: Some(dir.path().join("root")),
            config: Some(config),
            allow_public_forwards: allow_public,
            ..Default::default()
        };
        Settings::load(&flags).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn loopback_only_unless_allowed() {
        let strict = settings(false);
        for host in LOOPBACK {
            assert!(check(&req(ForwardKind::Dynamic, Some(host), None), &strict).is_ok());
        }
        for default in [None, Some("localhost"), Some("LocalHost")] {
            let r = req(ForwardKind::Dynamic, default, None);
            assert_eq!(check(&r, &strict).unwrap(), "127.0.0.1");
        }
        for host in [
            "0.0.0.0",
            "*",
            "10.0.0.1",
            "::",
            "example.com",
            "127.0.0.1.evil",
            "0",
            "localhost.",
            "127.0.0.2",
        ] {
            let e = check(&req(ForwardKind::Dynamic, Some(host), None), &strict).unwrap_err();
            assert_eq!(e.code, ErrorCode::ForwardNotAllowed, "{host}");
        }
        let open = settings(true);
        assert!(check(&req(ForwardKind::Dynamic, Some("0.0.0.0"), None), &open).is_ok());
    }

    #[test]
    fn targets_are_needed_exactly_where_they_mean_something() {
        let s = settings(false);
        let code = |r: ForwardStartRequest| check(&r, &s).err().map(|e| e.code);
        assert_eq!(
            code(req(ForwardKind::Local, None, Some(("db", 5432)))),
            None
        );
        assert_eq!(
            code(req(ForwardKind::Remote, None, Some(("::1", 80)))),
            None
        );
        for bad in [
            req(ForwardKind::Local, None, None),
            req(ForwardKind::Remote, None, Some(("db", 0))),
            req(ForwardKind::Dynamic, None, Some(("db", 1))),
            req(ForwardKind::Local, None, Some(("db;rm -rf /", 1))),
            req(ForwardKind::Local, Some("127.0.0.1 "), Some(("db", 1))),
        ] {
            assert_eq!(code(bad), Some(ErrorCode::InvalidArguments));
        }
    }
}
