//! The shim's standard streams as the MCP transport, read and written on the runtime's own
//! thread whenever they can be polled.
//!
//! tokio's `stdin()` and `stdout()` hand every read and write to a pool thread and back: two
//! thread wakeups per message, which on an idle machine cost more than the call itself. MCP
//! clients start servers on pipes (Python, the Rust SDK) or on Unix socket pairs (Node's
//! libuv): rmcp polls pipes through descriptors it opens afresh, and stream sockets are polled
//! here. Anything else (a terminal, a file, one socket and one pipe) keeps tokio's handles.

use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use nix::sys::socket::{MsgFlags, Shutdown, SockType, getsockopt, recv, send, shutdown, sockopt};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

pub type Reader = Box<dyn AsyncRead + Send + Unpin>;
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// The transport for `serve`: polled sockets when stdin and stdout both are stream sockets,
/// otherwise rmcp's pipe transport (which falls back to tokio's handles itself).
pub fn streams() -> (Reader, Writer) {
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    if is_stream_socket(stdin.as_fd()) && is_stream_socket(stdout.as_fd()) {
        let input = Socket::new(stdin.as_fd(), Interest::READABLE);
        let output = Socket::new(stdout.as_fd(), Interest::WRITABLE);
        if let (Ok(input), Ok(output)) = (input, output) {
            return (Box::new(input), Box::new(output));
        }
    }
    let (input, output) = rmcp::transport::stdio_pipes();
    (Box::new(input), Box::new(output))
}

/// Whether `fd` is a stream socket (a Unix socket pair's end, or TCP): anything but a
/// socket fails `SO_TYPE` with `ENOTSOCK`.
fn is_stream_socket(fd: BorrowedFd<'_>) -> bool {
    getsockopt(&fd, sockopt::SockType).is_ok_and(|kind| kind == SockType::Stream)
}

/// A copy of a standard stream's socket, read and written with `MSG_DONTWAIT`: the socket's
/// open description, which whoever started the shim may share, keeps its blocking mode.
struct Socket(AsyncFd<OwnedFd>);

impl Socket {
    /// Registers a copy of `fd` with the runtime for `interest`.
    fn new(fd: BorrowedFd<'_>, interest: Interest) -> io::Result<Self> {
        let copy = fd.try_clone_to_owned()?;
        // SAFETY: an owned descriptor stays open, on the same description, until the
        // AsyncFd that owns it is dropped.
        let registered = unsafe { AsyncFd::register_with_interest(copy, interest) };
        registered.map(Self).map_err(|e| e.into_parts().1)
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let read = ready.try_io(|fd| {
                recv(fd.as_raw_fd(), unfilled, MsgFlags::MSG_DONTWAIT).map_err(io::Error::from)
            });
            if let Ok(result) = read {
                return Poll::Ready(result.map(|n| buf.advance(n)));
            }
        }
    }
}

/// A client gone answers EPIPE, never SIGPIPE: Linux says so per send; elsewhere (macOS has
/// no such flag) the Rust runtime's ignored SIGPIPE does.
#[cfg(target_os = "linux")]
const NO_SIGNAL: MsgFlags = MsgFlags::MSG_NOSIGNAL;
#[cfg(not(target_os = "linux"))]
const NO_SIGNAL: MsgFlags = MsgFlags::empty();

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut ready = ready!(self.0.poll_write_ready(cx))?;
            let flags = MsgFlags::MSG_DONTWAIT | NO_SIGNAL;
            let written =
                ready.try_io(|fd| send(fd.as_raw_fd(), data, flags).map_err(io::Error::from));
            if let Ok(result) = written {
                return Poll::Ready(result);
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(shutdown(self.0.as_raw_fd(), Shutdown::Write).map_err(io::Error::from))
    }
}
