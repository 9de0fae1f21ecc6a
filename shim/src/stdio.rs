//! The shim's standard streams as the MCP transport, read and written on the runtime's own
//! thread whenever they can be polled.
//!
//! tokio's `stdin()` and `stdout()` hand every read and write to a pool thread and back: two
//! thread wakeups per message, which on an idle machine cost more than the call itself. MCP
//! clients start servers on pipes (Python, the Rust SDK) or on Unix socket pairs (Node's
//! libuv): rmcp polls pipes through descriptors of its own, and sockets are polled here. A
//! terminal or a file keeps tokio's handles.

use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileTypeExt as _;

use tokio::io::{AsyncRead, AsyncWrite};

pub type Reader = Box<dyn AsyncRead + Send + Unpin>;
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// The transport for `serve`: sockets when stdin and stdout both are, otherwise rmcp's pipe
/// transport (which falls back to tokio's handles itself).
pub fn streams() -> (Reader, Writer) {
    if let (Some(input), Some(output)) = (
        polled_socket(std::io::stdin().as_fd()),
        polled_socket(std::io::stdout().as_fd()),
    ) {
        return (Box::new(input), Box::new(output));
    }
    let (input, output) = rmcp::transport::stdio_pipes();
    (Box::new(input), Box::new(output))
}

/// A copy of `fd` registered with the runtime, when it is a socket. Non-blocking mode is set
/// on the socket's open description, which only this process and its children share (the
/// client holds the pair's other end); the daemon is started with stdin and stdout of its
/// own, and nothing else here reads stdin or writes stdout.
fn polled_socket(fd: BorrowedFd<'_>) -> Option<tokio::net::UnixStream> {
    let copy: OwnedFd = fd.try_clone_to_owned().ok()?;
    let kind = std::fs::File::from(copy.try_clone().ok()?)
        .metadata()
        .ok()?;
    if !kind.file_type().is_socket() {
        return None;
    }
    let socket = std::os::unix::net::UnixStream::from(copy);
    socket.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(socket).ok()
}
