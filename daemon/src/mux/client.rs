//! Talking to one master over its control socket: open a command session with our own pipes as
//! its stdio, check liveness, ask it to terminate, or watch until it goes away.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::time::Duration;

use nix::sys::socket::{ControlMessage, MsgFlags, UnixAddr, sendmsg};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

use super::wire::{self, PacketBuffer, Reply};

/// The longest any exchange with a master may take. A live master answers in well under a
/// millisecond (plus one round trip to sshd when opening a channel); one that says nothing for
/// this long is stopped or wedged.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum MuxError {
    /// The control socket does not accept connections: the master is gone.
    #[error("cannot connect to the master's control socket: {0}")]
    Unreachable(io::Error),
    /// The master answered the request with a failure, e.g. sshd refused the channel.
    #[error("the master refused the request: {0}")]
    Refused(String),
    #[error("unexpected mux reply: {0}")]
    Protocol(String),
    #[error("mux i/o failed: {0}")]
    Io(#[from] io::Error),
    #[error("the master did not answer within {}s", EXCHANGE_TIMEOUT.as_secs())]
    Silent,
}

impl MuxError {
    /// sshd refuses channels beyond MaxSessions (and briefly below it, until it reaps closed
    /// channels); the master words every refused channel open this way. Worth a retry.
    pub fn is_channel_refusal(&self) -> bool {
        matches!(self, Self::Refused(reason) if reason.contains("refused by peer"))
    }
}

/// What the control connection of a running session reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlEvent {
    /// The remote command exited with this status.
    Exit(u32),
    /// The master closed the connection: the channel closed (after an exit message, or
    /// without one when the remote process was killed by a signal), or the master died.
    Closed,
}

/// A command session opened on a master. The remote side writes straight into our pipes;
/// only exit reports travel over `control`.
pub struct MuxSession {
    pub control: SessionControl,
    pub stdin: pipe::Sender,
    pub stdout: pipe::Receiver,
    pub stderr: pipe::Receiver,
}

/// The control connection of one open session.
pub struct SessionControl {
    stream: UnixStream,
    packets: PacketBuffer,
}

impl SessionControl {
    /// The control of a session whose master is a test's own end of `stream`.
    #[cfg(test)]
    pub fn over(stream: UnixStream) -> Self {
        Self {
            stream,
            packets: PacketBuffer::default(),
        }
    }

    /// Whether the master has said nothing about this session yet (no exit, no close): a
    /// waiting channel is still waiting for its program.
    pub fn is_quiet(&self) -> bool {
        // Peeks at the socket itself: tokio's own readiness may not have seen a close yet.
        let mut probe = [0u8; 1];
        let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
        self.packets.is_empty()
            && matches!(
                nix::sys::socket::recv(self.stream.as_raw_fd(), &mut probe, flags),
                Err(nix::errno::Errno::EAGAIN)
            )
    }

    /// Waits for the next thing the master says about this session.
    pub async fn next_event(&mut self) -> io::Result<ControlEvent> {
        loop {
            match self.packets.next_reply().map_err(io::Error::other)? {
                Some(Reply::ExitMessage { status, .. }) => return Ok(ControlEvent::Exit(status)),
                Some(_) => continue,
                None => {}
            }
            let mut buf = [0u8; 512];
            match self.stream.read(&mut buf).await? {
                0 => return Ok(ControlEvent::Closed),
                n => self.packets.push(&buf[..n]),
            }
        }
    }
}

fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    crate::platform::pipe_cloexec()
}

/// Opens a session running `command` through the remote login shell.
///
/// The master takes the three fds with a blocking wait inside its single event loop, so the
/// packet and the fds go out back to back; any error drops the socket at once, which unblocks
/// the master.
pub async fn open_session(control_path: &Path, command: &str) -> Result<MuxSession, MuxError> {
    let mut control = UnixStream::connect(control_path)
        .await
        .map_err(MuxError::Unreachable)?;
    let (stdin_remote, stdin_local) = pipe_pair()?;
    let (stdout_local, stdout_remote) = pipe_pair()?;
    let (stderr_local, stderr_remote) = pipe_pair()?;
    let mut request = wire::hello();
    request.extend(wire::new_session(1, command.as_bytes()));
    control.write_all(&request).await?;
    for fd in [&stdin_remote, &stdout_remote, &stderr_remote] {
        send_fd(&control, fd.as_raw_fd()).await?;
    }
    // Our copies of the remote ends must go, or EOF never arrives.
    drop((stdin_remote, stdout_remote, stderr_remote));
    let mut packets = PacketBuffer::default();
    expect_hello(&mut control, &mut packets).await?;
    match read_reply(&mut control, &mut packets).await? {
        Reply::SessionOpened { .. } => Ok(MuxSession {
            control: SessionControl {
                stream: control,
                packets,
            },
            stdin: pipe::Sender::from_owned_fd(stdin_local)?,
            stdout: pipe::Receiver::from_owned_fd(stdout_local)?,
            stderr: pipe::Receiver::from_owned_fd(stderr_local)?,
        }),
        Reply::Refused { reason, .. } => Err(MuxError::Refused(reason)),
        other => Err(MuxError::Protocol(format!("{other:?}"))),
    }
}

/// Asks the master for its pid: a cheap (~0.1 ms) proof that it is alive.
pub async fn alive_check(control_path: &Path) -> Result<u32, MuxError> {
    bounded(alive_connection(control_path))
        .await
        .map(|(_, pid)| pid)
}

/// Asks the master to exit, closing its connection to the server.
pub async fn terminate(control_path: &Path) -> Result<(), MuxError> {
    bounded(async {
        let (mut control, mut packets) =
            request(control_path, wire::simple_request(wire::C_TERMINATE, 1)).await?;
        match read_reply(&mut control, &mut packets).await? {
            Reply::Ok { .. } => Ok(()),
            Reply::Refused { reason, .. } => Err(MuxError::Refused(reason)),
            other => Err(MuxError::Protocol(format!("{other:?}"))),
        }
    })
    .await
}

/// One forwarding as the master knows it: `ssh -O forward` and `ssh -O cancel` name it the
/// same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarding {
    /// `wire::FWD_LOCAL`, `FWD_REMOTE` or `FWD_DYNAMIC`.
    pub kind: u32,
    pub listen_host: String,
    pub listen_port: u16,
    /// `socks` for a dynamic forward, whose connect port is 0.
    pub connect_host: String,
    pub connect_port: u16,
}

impl Forwarding {
    fn packet(&self, kind: u32) -> Vec<u8> {
        wire::forward(
            kind,
            1,
            self.kind,
            (&self.listen_host, self.listen_port.into()),
            (&self.connect_host, self.connect_port.into()),
        )
    }
}

/// Asks the master to set up `forwarding`. For a remote forward asked with port 0 the answer
/// is the port the server allocated; otherwise none.
pub async fn open_forward(
    control_path: &Path,
    forwarding: &Forwarding,
    within: Duration,
) -> Result<Option<u16>, MuxError> {
    bounded_by(within, async {
        let packet = forwarding.packet(wire::C_OPEN_FWD);
        let (mut control, mut packets) = request(control_path, packet).await?;
        match read_reply(&mut control, &mut packets).await? {
            Reply::Ok { .. } => Ok(None),
            Reply::RemotePort { port, .. } => u16::try_from(port)
                .map(Some)
                .map_err(|_| MuxError::Protocol(format!("allocated port {port}"))),
            Reply::Refused { reason, .. } => Err(MuxError::Refused(reason)),
            other => Err(MuxError::Protocol(format!("{other:?}"))),
        }
    })
    .await
}

/// Asks the master to close `forwarding`, named as it was opened.
pub async fn close_forward(control_path: &Path, forwarding: &Forwarding) -> Result<(), MuxError> {
    bounded(async {
        let packet = forwarding.packet(wire::C_CLOSE_FWD);
        let (mut control, mut packets) = request(control_path, packet).await?;
        match read_reply(&mut control, &mut packets).await? {
            Reply::Ok { .. } => Ok(()),
            Reply::Refused { reason, .. } => Err(MuxError::Refused(reason)),
            other => Err(MuxError::Protocol(format!("{other:?}"))),
        }
    })
    .await
}

/// Bounds one exchange by [`EXCHANGE_TIMEOUT`].
async fn bounded<T>(
    exchange: impl std::future::Future<Output = Result<T, MuxError>>,
) -> Result<T, MuxError> {
    bounded_by(EXCHANGE_TIMEOUT, exchange).await
}

async fn bounded_by<T>(
    within: Duration,
    exchange: impl std::future::Future<Output = Result<T, MuxError>>,
) -> Result<T, MuxError> {
    tokio::time::timeout(within, exchange)
        .await
        .unwrap_or(Err(MuxError::Silent))
}

/// Holds an idle control connection open and returns when the master closes it, which it only
/// does when it exits: the event that turns a session `lost`, with no polling.
pub async fn watch_until_closed(control_path: &Path) -> Result<(), MuxError> {
    let (mut control, _pid) = bounded(alive_connection(control_path)).await?;
    let mut buf = [0u8; 256];
    while control.read(&mut buf).await? > 0 {}
    Ok(())
}

/// A control connection that has just answered an ALIVE_CHECK, and the master's pid.
async fn alive_connection(control_path: &Path) -> Result<(UnixStream, u32), MuxError> {
    let (mut control, mut packets) =
        request(control_path, wire::simple_request(wire::C_ALIVE_CHECK, 1)).await?;
    match read_reply(&mut control, &mut packets).await? {
        Reply::Alive { pid, .. } => Ok((control, pid)),
        other => Err(MuxError::Protocol(format!("{other:?}"))),
    }
}

async fn request(
    control_path: &Path,
    packet: Vec<u8>,
) -> Result<(UnixStream, PacketBuffer), MuxError> {
    let mut control = UnixStream::connect(control_path)
        .await
        .map_err(MuxError::Unreachable)?;
    let mut bytes = wire::hello();
    bytes.extend(packet);
    control.write_all(&bytes).await?;
    let mut packets = PacketBuffer::default();
    expect_hello(&mut control, &mut packets).await?;
    Ok((control, packets))
}

async fn expect_hello(
    control: &mut UnixStream,
    packets: &mut PacketBuffer,
) -> Result<(), MuxError> {
    match read_reply(control, packets).await? {
        Reply::Hello {
            version: wire::MUX_VERSION,
        } => Ok(()),
        other => Err(MuxError::Protocol(format!("expected hello, got {other:?}"))),
    }
}

async fn read_reply(
    control: &mut UnixStream,
    packets: &mut PacketBuffer,
) -> Result<Reply, MuxError> {
    loop {
        if let Some(reply) = packets
            .next_reply()
            .map_err(|e| MuxError::Protocol(e.to_string()))?
        {
            return Ok(reply);
        }
        let mut buf = [0u8; 512];
        match control.read(&mut buf).await? {
            0 => return Err(MuxError::Unreachable(io::ErrorKind::UnexpectedEof.into())),
            n => packets.push(&buf[..n]),
        }
    }
}

/// One `sendmsg` per fd with a one-byte payload: the master reserves room for a single
/// SCM_RIGHTS fd per message.
async fn send_fd(control: &UnixStream, fd: RawFd) -> io::Result<()> {
    loop {
        control.writable().await?;
        let sent = control.try_io(Interest::WRITABLE, || {
            let payload = [0u8; 1];
            let iov = [io::IoSlice::new(&payload)];
            let fds = [fd];
            let cmsg = [ControlMessage::ScmRights(&fds)];
            sendmsg::<UnixAddr>(control.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
                .map_err(io::Error::from)
        });
        match sent {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::os::unix::net::{UnixListener, UnixStream as StdStream};

    use nix::sys::socket::{ControlMessageOwned, recvmsg};

    use super::*;

    /// A field of a reply packet as the master writes it.
    enum Field<'a> {
        U32(u32),
        Text(&'a str),
    }

    fn reply(fields: &[Field]) -> Vec<u8> {
        let mut body = Vec::new();
        for field in fields {
            match field {
                Field::U32(v) => body.extend_from_slice(&v.to_be_bytes()),
                Field::Text(s) => {
                    body.extend_from_slice(&(s.len() as u32).to_be_bytes());
                    body.extend_from_slice(s.as_bytes());
                }
            }
        }
        let mut packet = (body.len() as u32).to_be_bytes().to_vec();
        packet.extend(body);
        packet
    }

    fn master_hello() -> Vec<u8> {
        reply(&[Field::U32(wire::MSG_HELLO), Field::U32(wire::MUX_VERSION)])
    }

    /// A master on a control socket in a temp dir: it takes one client, reads exactly the
    /// request the test expects, and hands the connection to `then` (in a thread of its own,
    /// as the real master's event loop is not the client's).
    fn master(
        expected: Vec<u8>,
        then: impl FnOnce(StdStream) + Send + 'static,
    ) -> (
        tempfile::TempDir,
        std::path::PathBuf,
        std::thread::JoinHandle<()>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control");
        let listener = UnixListener::bind(&path).unwrap();
        let thread = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            // A client that sends too little fails the test instead of hanging it.
            conn.set_read_timeout(Some(LIMIT)).unwrap();
            let mut request = vec![0u8; expected.len()];
            conn.read_exact(&mut request).unwrap();
            assert_eq!(request, expected, "the client's request");
            then(conn);
        });
        (dir, path, thread)
    }

    fn simple(kind: u32) -> Vec<u8> {
        let mut bytes = wire::hello();
        bytes.extend(wire::simple_request(kind, 1));
        bytes
    }

    /// How long any step of these tests may take before it fails as a hang.
    const LIMIT: Duration = Duration::from_secs(10);

    /// `step`, failing the test if it takes longer than [`LIMIT`].
    async fn within<T>(step: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(LIMIT, step)
            .await
            .expect("a step of the test hung")
    }

    /// The one fd the client sends with a one-byte message, close-on-exec at once so that no
    /// child another test spawns keeps a pipe open.
    fn receive_fd(conn: &StdStream) -> OwnedFd {
        let mut byte = [0u8; 1];
        let mut iov = [io::IoSliceMut::new(&mut byte)];
        let mut space = nix::cmsg_space!([RawFd; 1]);
        #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
        let flags = MsgFlags::MSG_CMSG_CLOEXEC;
        #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
        let flags = MsgFlags::empty();
        let msg = recvmsg::<UnixAddr>(conn.as_raw_fd(), &mut iov, Some(&mut space), flags).unwrap();
        let fd = msg
            .cmsgs()
            .unwrap()
            .find_map(|c| match c {
                ControlMessageOwned::ScmRights(fds) => fds.first().copied(),
                _ => None,
            })
            .expect("an fd");
        // SAFETY: SCM_RIGHTS gave this process a new descriptor that nothing else owns.
        let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
        nix::fcntl::fcntl(
            &fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .unwrap();
        fd
    }

    #[tokio::test]
    async fn a_live_master_answers_its_pid_and_a_gone_one_is_unreachable() {
        let (_dir, path, master) = master(simple(wire::C_ALIVE_CHECK), |mut conn| {
            let mut answer = master_hello();
            answer.extend(reply(&[
                Field::U32(wire::S_ALIVE),
                Field::U32(1),
                Field::U32(4242),
            ]));
            conn.write_all(&answer).unwrap();
        });
        assert_eq!(within(alive_check(&path)).await.unwrap(), 4242);
        master.join().unwrap();
        // The socket file stays, but nobody listens on it now.
        assert!(matches!(
            alive_check(&path).await,
            Err(MuxError::Unreachable(_))
        ));
    }

    #[tokio::test]
    async fn a_master_that_says_nothing_is_given_up_and_a_wrong_hello_refused() {
        let forwarding = Forwarding {
            kind: wire::FWD_LOCAL,
            listen_host: "127.0.0.1".into(),
            listen_port: 8080,
            connect_host: "db".into(),
            connect_port: 5432,
        };
        let mut expected = wire::hello();
        expected.extend(forwarding.packet(wire::C_OPEN_FWD));
        let (quiet, wake) = std::sync::mpsc::channel::<()>();
        let (_dir, path, master_thread) = master(expected.clone(), move |_conn| {
            // Holds the connection open, answering nothing, until the test has its answer.
            let _ = wake.recv();
        });
        let asked = std::time::Instant::now();
        let silent = open_forward(&path, &forwarding, Duration::from_millis(200)).await;
        assert!(matches!(silent, Err(MuxError::Silent)), "{silent:?}");
        // Given up at its own bound, far below the default one.
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "{:?}",
            asked.elapsed()
        );
        drop(quiet);
        master_thread.join().unwrap();

        let (_dir, path, master_thread) = master(expected, |mut conn| {
            let old = reply(&[Field::U32(wire::MSG_HELLO), Field::U32(3)]);
            conn.write_all(&old).unwrap();
        });
        let wrong = within(open_forward(&path, &forwarding, EXCHANGE_TIMEOUT)).await;
        assert!(matches!(wrong, Err(MuxError::Protocol(_))), "{wrong:?}");
        master_thread.join().unwrap();
    }

    /// A remote forward asked with port 0 answers the port the server chose; a port no TCP
    /// port can be is the master's mistake, not a port.
    #[tokio::test]
    async fn a_remote_forward_answers_the_port_the_server_chose() {
        let forwarding = Forwarding {
            kind: wire::FWD_REMOTE,
            listen_host: "localhost".into(),
            listen_port: 0,
            connect_host: "127.0.0.1".into(),
            connect_port: 22,
        };
        let mut expected = wire::hello();
        expected.extend(forwarding.packet(wire::C_OPEN_FWD));
        for (port, answer) in [(40_001, Some(40_001)), (70_000, None)] {
            let (_dir, path, master_thread) = master(expected.clone(), move |mut conn| {
                let mut bytes = master_hello();
                bytes.extend(reply(&[
                    Field::U32(wire::S_REMOTE_PORT),
                    Field::U32(1),
                    Field::U32(port),
                ]));
                conn.write_all(&bytes).unwrap();
            });
            let opened = within(open_forward(&path, &forwarding, EXCHANGE_TIMEOUT)).await;
            match answer {
                Some(port) => assert_eq!(opened.unwrap(), Some(port)),
                None => assert!(matches!(opened, Err(MuxError::Protocol(_))), "{opened:?}"),
            }
            master_thread.join().unwrap();
        }
    }

    /// The master gets our three pipes' far ends as the session's stdio, after the request;
    /// what the remote side writes there reaches our ends, our stdin reaches it, and the exit
    /// report and the close come over the control connection.
    #[tokio::test]
    async fn a_session_runs_on_our_pipes_and_reports_its_exit() {
        let mut expected = wire::hello();
        expected.extend(wire::new_session(1, b"echo hi"));
        let (_dir, path, master_thread) = master(expected, |mut conn| {
            let stdin = std::fs::File::from(receive_fd(&conn));
            let mut stdout = std::fs::File::from(receive_fd(&conn));
            let mut stderr = std::fs::File::from(receive_fd(&conn));
            let mut answer = master_hello();
            answer.extend(reply(&[
                Field::U32(wire::S_SESSION_OPENED),
                Field::U32(1),
                Field::U32(7),
            ]));
            conn.write_all(&answer).unwrap();
            stdout.write_all(b"out").unwrap();
            stderr.write_all(b"err").unwrap();
            drop((stdout, stderr));
            let mut input = String::new();
            { stdin }.read_to_string(&mut input).unwrap();
            assert_eq!(input, "in");
            let exit = reply(&[
                Field::U32(wire::S_EXIT_MESSAGE),
                Field::U32(7),
                Field::U32(3),
            ]);
            conn.write_all(&exit).unwrap();
        });
        let mut session = within(open_session(&path, "echo hi")).await.unwrap();
        let read_all = |pipe: pipe::Receiver| async move {
            let mut text = String::new();
            let mut pipe = pipe;
            pipe.read_to_string(&mut text).await.unwrap();
            text
        };
        within(session.stdin.write_all(b"in")).await.unwrap();
        drop(session.stdin);
        assert_eq!(within(read_all(session.stdout)).await, "out");
        assert_eq!(within(read_all(session.stderr)).await, "err");
        let mut control = session.control;
        let exit = within(control.next_event()).await.unwrap();
        assert_eq!(exit, ControlEvent::Exit(3));
        master_thread.join().unwrap();
        let closed = within(control.next_event()).await.unwrap();
        assert_eq!(closed, ControlEvent::Closed);
    }

    /// sshd's refusal of a channel past MaxSessions is worth a retry; other refusals are not.
    #[tokio::test]
    async fn a_refused_channel_says_why_and_only_a_full_server_is_retried() {
        for (reason, retry) in [
            (
                "open failed: administratively prohibited: open failed",
                false,
            ),
            ("session open refused by peer", true),
        ] {
            let mut expected = wire::hello();
            expected.extend(wire::new_session(1, b"true"));
            let (_dir, path, master_thread) = master(expected, move |mut conn| {
                for _ in 0..3 {
                    drop(receive_fd(&conn));
                }
                let mut answer = master_hello();
                answer.extend(reply(&[
                    Field::U32(wire::S_FAILURE),
                    Field::U32(1),
                    Field::Text(reason),
                ]));
                conn.write_all(&answer).unwrap();
            });
            let refused = within(open_session(&path, "true")).await.err().unwrap();
            assert!(
                matches!(&refused, MuxError::Refused(why) if why == reason),
                "{refused:?}"
            );
            assert_eq!(refused.is_channel_refusal(), retry, "{reason}");
            master_thread.join().unwrap();
        }
    }

    /// The watch of a master ends when the master closes its connection, which it does only
    /// when it exits.
    #[tokio::test]
    async fn the_watch_ends_when_the_master_goes() {
        let (gone, wake) = std::sync::mpsc::channel::<()>();
        let (answered, was_answered) = tokio::sync::oneshot::channel::<()>();
        let (_dir, path, master_thread) = master(simple(wire::C_ALIVE_CHECK), move |mut conn| {
            let mut answer = master_hello();
            answer.extend(reply(&[
                Field::U32(wire::S_ALIVE),
                Field::U32(1),
                Field::U32(1),
            ]));
            conn.write_all(&answer).unwrap();
            let _ = answered.send(());
            let _ = wake.recv();
        });
        let mut watch = tokio::spawn(async move { watch_until_closed(&path).await });
        within(was_answered).await.unwrap();
        // A master that lives keeps the watch going.
        let early = tokio::time::timeout(Duration::from_millis(100), &mut watch).await;
        assert!(early.is_err(), "the watch ended while the master lived");
        drop(gone);
        within(watch).await.unwrap().unwrap();
        master_thread.join().unwrap();
    }
}
