//! The client side of the socket, shared by the shim and the CLI: connect to the user's daemon
//! and, when none answers, start one without racing other clients doing the same.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::paths::RuntimePaths;
use sshmcp_proto::service::{DaemonClient, Hello, PROTOCOL_VERSION, context_with_timeout, framed};

/// How long a client waits for a daemon it started to report ready: longer than a new daemon
/// waits for one that is stopping (20 s), plus its re-adoption of the recorded sessions.
const START_TIMEOUT: Duration = Duration::from_secs(45);
/// How long a hello may take on a live daemon.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    // `reason`, not `source`: a source is printed again after the message by anyhow's `{:#}`.
    #[error(
        "cannot use the runtime directory {dir}: {reason}; choose another with `runtime-dir` \
         in the config file (every client reads it) or SSHMCP_RUNTIME_DIR"
    )]
    RuntimeDir { dir: PathBuf, reason: io::Error },
    #[error("could not start the daemon {program}: {reason}")]
    Start { program: PathBuf, reason: String },
    #[error("{}", mismatch(*daemon, *client))]
    VersionMismatch { daemon: u32, client: u32 },
    #[error("cannot reach the daemon at {socket}: {reason}")]
    Unreachable { socket: PathBuf, reason: String },
}

/// What a client whose protocol is not the daemon's tells: which of the two is older, and
/// what brings them together (a newer daemon than its client came with an upgrade, and a
/// restart with this older binary would undo it).
pub fn mismatch(daemon: u32, client: u32) -> String {
    match daemon > client {
        true => format!(
            "the running daemon is newer than this program (protocol {daemon}, this one \
             {client}): an upgrade installed a newer sshmcp; restart the MCP client (or use \
             the newly installed sshmcp) so that it runs the new binaries"
        ),
        false => format!(
            "the running daemon is older than this program (protocol {daemon}, this one \
             {client}); run `sshmcp daemon restart` (its sessions are handed to the new \
             daemon) and retry"
        ),
    }
}

/// A connected client and what the daemon said about itself.
pub struct Connection {
    pub client: DaemonClient,
    pub hello: Hello,
    /// The tools the daemon serves (see [`capabilities`](sshmcp_proto::service::capabilities)).
    pub capabilities: Vec<String>,
    /// A second descriptor of the same socket, only ever peeked at.
    probe: std::os::fd::OwnedFd,
    /// The daemon's process start time (with `hello.pid`, the daemon itself), when it could
    /// be read.
    daemon_started: Option<u64>,
}

impl Connection {
    /// Whether the daemon has closed this connection (it exited, or was restarted). Known
    /// before a call is sent, so a call found this way was never sent and is safe to send on
    /// a new connection. A peek takes nothing from the stream tarpc reads.
    ///
    /// The daemon's process is checked too: a child it forked holds the socket open for the
    /// moment before its exec, and a daemon killed then would look alive to the peek alone.
    pub fn daemon_gone(&self) -> bool {
        let exited = self.daemon_started.is_some_and(|started| {
            crate::platform::read(self.hello.pid)
                .is_none_or(|now| now.start_time != started || matches!(now.state, 'Z' | 'X'))
        });
        exited || self.socket_closed()
    }

    fn socket_closed(&self) -> bool {
        use nix::sys::socket::{MsgFlags, recv};
        let mut byte = [0u8; 1];
        let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
        match recv(
            std::os::fd::AsRawFd::as_raw_fd(&self.probe),
            &mut byte,
            flags,
        ) {
            Ok(0) => true,
            Ok(_) => false,
            // An open, quiet socket has nothing to read yet.
            Err(e) => e != nix::errno::Errno::EAGAIN,
        }
    }
}

/// Connects to the daemon of `paths`, or returns `None` when no daemon is running there.
/// Used where starting one would be pointless (`daemon status`, `daemon stop`, `history`).
///
/// Only a daemon of this user is believed: the runtime directory must be this user's and
/// private (a directory another user made first under `/tmp` could hold a socket of theirs),
/// and the process at the socket's other end must run as this user.
pub async fn connect_existing(paths: &RuntimePaths) -> Result<Option<Connection>, ClientError> {
    paths.check().map_err(|reason| ClientError::RuntimeDir {
        dir: paths.dir.clone(),
        reason: io::Error::other(reason),
    })?;
    match crate::paths::check_private_dir(&paths.dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(reason) => {
            return Err(ClientError::RuntimeDir {
                dir: paths.dir.clone(),
                reason,
            });
        }
    }
    match tokio::net::UnixStream::connect(paths.socket()).await {
        Ok(stream) => {
            check_peer(paths, &stream)?;
            handshake(paths, stream).await.map(Some)
        }
        Err(e) if no_daemon(&e) => Ok(None),
        Err(e) => Err(unreachable(paths, e)),
    }
}

/// Refuses a socket served by another user's process.
fn check_peer(paths: &RuntimePaths, stream: &tokio::net::UnixStream) -> Result<(), ClientError> {
    let mine = nix::unistd::geteuid().as_raw();
    let refuse = |why: String| ClientError::RuntimeDir {
        dir: paths.dir.clone(),
        reason: io::Error::new(io::ErrorKind::PermissionDenied, why),
    };
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == mine => Ok(()),
        Ok(cred) => Err(refuse(format!(
            "refusing its socket: it is served by another user's process (uid {})",
            cred.uid()
        ))),
        Err(e) => Err(refuse(format!("cannot tell who serves its socket: {e}"))),
    }
}

/// Connects to the daemon of `paths`, starting `program` first when none answers.
///
/// Several clients may call this at once: they queue on a start lock, each re-tries the socket
/// once it holds the lock, and only the first starts a daemon. The daemon reports its own
/// readiness on a pipe, so nobody polls, but for the socket of a daemon that holds the
/// pidfile without serving yet (see [`socket_within`]). A daemon speaking another protocol is reported, never
/// replaced: it may hold live sessions.
pub async fn connect_or_start(
    paths: &RuntimePaths,
    program: &Path,
) -> Result<Connection, ClientError> {
    let runtime_dir_error = |reason| ClientError::RuntimeDir {
        dir: paths.dir.clone(),
        reason,
    };
    paths
        .check()
        .map_err(|reason| runtime_dir_error(io::Error::other(reason)))?;
    paths.ensure().map_err(runtime_dir_error)?;
    // A daemon that went away between our connect and its hello (it was stopping, or
    // exiting idle) is no daemon: the next one is started, or waited for, below. Past this
    // first look, a daemon that does not answer is an error (a wedged one is not replaced).
    match connect_existing(paths).await {
        Ok(Some(conn)) => return Ok(conn),
        Ok(None) | Err(ClientError::Unreachable { .. }) => {}
        Err(e) => return Err(e),
    }
    let deadline = tokio::time::Instant::now() + START_TIMEOUT;
    loop {
        let holder = {
            let _guard = StartLock::acquire(paths).await.map_err(runtime_dir_error)?;
            if let Some(conn) = connect_existing(paths).await? {
                return Ok(conn);
            }
            let started = spawn_daemon(program, paths).await?;
            if let Some(conn) = connect_existing(paths).await? {
                return Ok(conn);
            }
            match started {
                Started::Ready => {
                    return Err(ClientError::Start {
                        program: program.to_path_buf(),
                        reason: "it reported ready but its socket does not answer".into(),
                    });
                }
                Started::Running(holder) => holder,
            }
        };
        // Another daemon holds the pidfile and does not serve yet: it is starting (waiting
        // for the one before it to stop, taking back sessions) for a client whose call was
        // cut meanwhile. Its socket is waited for, without the start lock (clients queued on
        // it wait side by side, not one after another), and a daemon started again should
        // the pidfile come free instead.
        if let Some(conn) = socket_within(paths, RUNNING_RECHECK).await? {
            return Ok(conn);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ClientError::Start {
                program: program.to_path_buf(),
                reason: format!(
                    "another process ({holder}) holds its pidfile {}, and no daemon answered \
                     on its socket within {}s",
                    paths.pidfile().display(),
                    START_TIMEOUT.as_secs()
                ),
            });
        }
    }
}

/// How long a client waits for the socket of a daemon that holds the pidfile before it tries
/// to start one again.
const RUNNING_RECHECK: Duration = Duration::from_secs(1);

/// The daemon of `paths` once its socket answers within `wait`, looked at every 50 ms: the
/// daemon that holds the pidfile has no way to tell this client when it serves.
async fn socket_within(
    paths: &RuntimePaths,
    wait: Duration,
) -> Result<Option<Connection>, ClientError> {
    let until = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Some(conn) = connect_existing(paths).await? {
            return Ok(Some(conn));
        }
    }
    Ok(None)
}

/// What a started daemon reported.
enum Started {
    Ready,
    /// Another process holds the pidfile: "pid N", as the report named it.
    Running(String),
}

/// Where the daemon binary is: `SSHMCP_DAEMON`, else `sshmcpd` beside the running
/// executable, else `sshmcpd` on `PATH`.
pub fn daemon_program() -> PathBuf {
    if let Some(p) = crate::paths::path_from_env("SSHMCP_DAEMON") {
        return p;
    }
    std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name("sshmcpd"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("sshmcpd"))
}

async fn handshake(
    paths: &RuntimePaths,
    stream: tokio::net::UnixStream,
) -> Result<Connection, ClientError> {
    let probe = std::os::fd::AsFd::as_fd(&stream)
        .try_clone_to_owned()
        .map_err(|e| unreachable(paths, e))?;
    let transport =
        tarpc::serde_transport::new(framed(stream), sshmcp_proto::service::Codec::default());
    let client = DaemonClient::new(tarpc::client::Config::default(), transport).spawn();
    let unreachable = |e: tarpc::client::RpcError| ClientError::Unreachable {
        socket: paths.socket(),
        reason: e.to_string(),
    };
    let hello = client
        .hello(context_with_timeout(HELLO_TIMEOUT))
        .await
        .map_err(unreachable)?;
    if hello.protocol_version != PROTOCOL_VERSION {
        return Err(ClientError::VersionMismatch {
            daemon: hello.protocol_version,
            client: PROTOCOL_VERSION,
        });
    }
    let capabilities = client
        .capabilities(context_with_timeout(HELLO_TIMEOUT))
        .await
        .map_err(unreachable)?;
    let daemon_started = crate::platform::read(hello.pid).map(|stat| stat.start_time);
    Ok(Connection {
        client,
        hello,
        capabilities,
        probe,
        daemon_started,
    })
}

/// A socket that is missing or refuses connections has no daemon behind it (a refused
/// connection means the socket file is left over from a daemon that died).
fn no_daemon(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    )
}

fn unreachable(paths: &RuntimePaths, e: io::Error) -> ClientError {
    ClientError::Unreachable {
        socket: paths.socket(),
        reason: e.to_string(),
    }
}

/// The exclusive start lock, released on drop (closing the file releases the flock).
struct StartLock {
    _file: std::fs::File,
}

impl StartLock {
    async fn acquire(paths: &RuntimePaths) -> io::Result<Self> {
        let path = paths.start_lock();
        tokio::task::spawn_blocking(move || {
            use std::os::unix::fs::OpenOptionsExt;
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .open(path)?;
            file.lock()?;
            Ok(StartLock { _file: file })
        })
        .await
        .map_err(io::Error::other)?
    }
}

/// Starts the daemon detached (own session, null stdin/stderr, cwd `/`) and waits for the
/// one line it writes on its stdout pipe: `ready PID`, `running PID` (another daemon holds
/// the pidfile) or `error REASON`.
async fn spawn_daemon(program: &Path, paths: &RuntimePaths) -> Result<Started, ClientError> {
    let start_err = |reason: String| ClientError::Start {
        program: program.to_path_buf(),
        reason,
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg("--runtime-dir")
        .arg(&paths.dir)
        .arg("--report-ready")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // An empty setting counts as unset, as for the clients (a client config may hold one);
    // the daemon's flags would refuse it.
    for (name, _) in std::env::vars_os().filter(|(name, value)| {
        name.to_str().is_some_and(|n| n.starts_with("SSHMCP_")) && value.is_empty()
    }) {
        cmd.env_remove(name);
    }
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| nix::unistd::setsid().map(drop).map_err(io::Error::from));
    }
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => start_err(format!(
            "{e}: sshmcpd is looked for beside this program, then on PATH; install the two \
             together, or set SSHMCP_DAEMON to its path"
        )),
        _ => start_err(e.to_string()),
    })?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| start_err("no stdout pipe".into()))?;
    // The daemon outlives us; a waiter reaps it should it exit while we still run.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    let mut line = String::new();
    let mut reader = BufReader::new(stdout);
    let read = reader.read_line(&mut line);
    match tokio::time::timeout(START_TIMEOUT, read).await {
        Err(_) => Err(start_err(format!(
            "no ready report within {}s",
            START_TIMEOUT.as_secs()
        ))),
        Ok(Err(e)) => Err(start_err(e.to_string())),
        Ok(Ok(_)) => {
            let line = line.trim_end();
            if line.starts_with("ready ") {
                Ok(Started::Ready)
            } else if let Some(pid) = line.strip_prefix("running ") {
                Ok(Started::Running(format!("pid {pid}")))
            } else if let Some(reason) = line.strip_prefix("error ") {
                Err(start_err(sshmcp_proto::text::from_one_line(reason)))
            } else {
                Err(start_err("it exited before reporting ready".into()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::{SinkExt, StreamExt};
    use tarpc::{ClientMessage, Response};

    use super::*;
    use sshmcp_proto::service::{Codec, DaemonRequest, DaemonResponse};

    /// An older client is told to restart itself (a restart of the daemon with it would undo
    /// the upgrade), an older daemon to be restarted.
    #[test]
    fn a_mismatch_says_which_side_is_older() {
        let newer_daemon = mismatch(9, 8);
        assert!(
            newer_daemon.contains("restart the MCP client"),
            "{newer_daemon}"
        );
        assert!(!newer_daemon.contains("daemon restart"), "{newer_daemon}");
        let older_daemon = mismatch(7, 8);
        assert!(
            older_daemon.contains("sshmcp daemon restart"),
            "{older_daemon}"
        );
    }

    /// A daemon of another protocol version answers `hello`: the client reports the mismatch
    /// and leaves that daemon alone.
    #[tokio::test]
    async fn a_daemon_of_another_protocol_is_reported_not_replaced() {
        let dir = std::env::temp_dir().join(format!("sshmcp-client-{}", std::process::id()));
        let paths = RuntimePaths::resolve(Some(dir.clone()));
        paths.ensure().unwrap();
        let listener = tokio::net::UnixListener::bind(paths.socket()).unwrap();
        let fake = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let codec = Codec::<ClientMessage<DaemonRequest>, Response<DaemonResponse>>::default();
            let mut transport = tarpc::serde_transport::new(framed(stream), codec);
            while let Some(Ok(message)) = transport.next().await {
                if let ClientMessage::Request(request) = message {
                    let hello = Hello {
                        protocol_version: 999,
                        daemon_version: "9".into(),
                        pid: 1,
                    };
                    let response = Response {
                        request_id: request.id,
                        message: Ok(DaemonResponse::Hello(hello)),
                    };
                    transport.send(response).await.unwrap();
                }
            }
        });
        let err = connect_or_start(&paths, Path::new("/nonexistent/sshmcpd"))
            .await
            .err()
            .unwrap();
        assert!(
            matches!(
                err,
                ClientError::VersionMismatch {
                    daemon: 999,
                    client: PROTOCOL_VERSION
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("restart the MCP client"), "{err}");
        assert!(
            paths.socket().exists(),
            "the other daemon's socket is left alone"
        );
        fake.abort();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn no_daemon_and_no_program_is_a_clear_start_error() {
        let dir = std::env::temp_dir().join(format!("sshmcp-client-none-{}", std::process::id()));
        let paths = RuntimePaths::resolve(Some(dir.clone()));
        let err = connect_or_start(&paths, Path::new("/nonexistent/sshmcpd"))
            .await
            .err()
            .unwrap();
        assert!(matches!(err, ClientError::Start { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent/sshmcpd"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The reason is said once: a chain printer (anyhow's `{:#}`) finds no source to print
    /// after the message again.
    #[test]
    fn a_runtime_directory_refusal_says_its_reason_once() {
        let err = ClientError::RuntimeDir {
            dir: "/run/x".into(),
            reason: io::Error::other("refusing /run/x: its mode lets other users in"),
        };
        assert!(std::error::Error::source(&err).is_none());
        assert_eq!(
            err.to_string(),
            "cannot use the runtime directory /run/x: refusing /run/x: its mode lets other users \
             in; choose another with `runtime-dir` in the config file (every client reads it) \
             or SSHMCP_RUNTIME_DIR"
        );
    }
}
