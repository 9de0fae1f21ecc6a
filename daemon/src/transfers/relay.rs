//! The remote shell rsync runs: this binary, started by rsync with ssh's arguments, runs ssh
//! and drops everything the remote login shell printed before rsync's server started. rsync
//! reads its protocol from the first byte, so a `~/.bashrc` that greets (conda, nvm, a motd)
//! would otherwise break every transfer with "protocol version mismatch". The remote command
//! prints a marker unique to the transfer just before it becomes rsync; what follows the
//! marker is rsync's, and is passed on untouched.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::CommandExt;
use std::process::{ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// Set in rsync's environment to the transfer's marker; its presence makes this binary the
/// relay.
pub const MARKER_VAR: &str = "SSHMCP_RSYNC_MARKER";

/// How long the remote login shell may take to start rsync: the time a command's channel gets
/// before its start fails, and more.
const MARKER_WAIT: Duration = Duration::from_secs(60);

/// When rsync started this process as its remote shell: relays and returns ssh's exit status.
/// Call first thing in `main`.
pub fn run_if_requested() -> Option<u8> {
    let marker = std::env::var_os(MARKER_VAR)?;
    Some(match relay(marker) {
        Ok(status) => status,
        Err(e) => {
            eprintln!("sshmcpd rsync relay: {e}");
            255
        }
    })
}

fn relay(marker: OsString) -> std::io::Result<u8> {
    let mut line = marker.into_vec();
    line.push(b'\n');
    let mut args = std::env::args_os().skip(1);
    let program = args
        .next()
        .ok_or_else(|| std::io::Error::other("no program to run"))?;
    die_with_parent()?;
    let mut command = Command::new(program);
    command
        .args(args)
        .env_remove(MARKER_VAR)
        .stdout(Stdio::piped());
    // SAFETY: only a system call on the child, between fork and exec.
    unsafe {
        command.pre_exec(|| crate::platform::die_with_parent());
    }
    let mut ssh = command.spawn()?;
    let mut from = ssh.stdout.take().expect("piped");
    if let Err(e) = pass_on(&mut from, &line) {
        // ssh would hold its channel, and the remote shell, with nobody reading.
        let _ = ssh.kill();
        let _ = ssh.wait();
        return Err(e);
    }
    drop(from);
    Ok(ssh.wait()?.code().map_or(255, |c| c as u8))
}

/// Makes this process end with the rsync that started it. The daemon's death kills that
/// rsync, but the receiver rsync forked would go on writing the partial as long as ssh and
/// this relay feed it: each link of the chain dies with the one before.
fn die_with_parent() -> std::io::Result<()> {
    let parent = nix::unistd::getppid();
    // SAFETY: a plain system call on this process, which starts no thread before it.
    unsafe { crate::platform::die_with_parent()? };
    // The parent may have gone before the call: then nothing would ever signal us.
    if nix::unistd::getppid() != parent {
        return Err(std::io::Error::other(
            "rsync ended before its remote shell started",
        ));
    }
    Ok(())
}

/// Drops what comes before `marker`, then copies the rest to our stdout.
fn pass_on(from: &mut ChildStdout, marker: &[u8]) -> std::io::Result<()> {
    let Some(rest) = skip_to(from, marker, MARKER_WAIT)? else {
        return Ok(());
    };
    let to = std::io::stdout();
    write_all(to.as_fd(), &rest)?;
    // The rest moves from ssh's pipe to rsync's socket inside the kernel: a download passes
    // every byte of the file through here.
    loop {
        match crate::platform::move_bytes(from.as_fd(), to.as_fd(), 1 << 20) {
            Ok(0) => return Ok(()),
            Ok(_) | Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => wait_writable(to.as_fd())?,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Waits until `fd` takes more bytes.
fn wait_writable(fd: BorrowedFd) -> std::io::Result<()> {
    let mut ready = [PollFd::new(fd, PollFlags::POLLOUT)];
    match poll(&mut ready, PollTimeout::NONE) {
        Ok(_) | Err(Errno::EINTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Writes all of `bytes` to `fd`, waiting whenever it is full. rsync's socket reaches ssh as
/// its stdin and us as our stdout, one open file that ssh makes non-blocking: a write can
/// find it full at any time.
fn write_all(fd: BorrowedFd, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        match nix::unistd::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::EAGAIN) => wait_writable(fd)?,
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Reads until `marker` went by; answers what came after it, or None when the stream ended
/// first. A marker that has not come within `wait` never will (a login shell that hangs, or
/// one that did not run the command): rsync must not wait on it forever.
fn skip_to(
    from: &mut ChildStdout,
    marker: &[u8],
    wait: Duration,
) -> std::io::Result<Option<Vec<u8>>> {
    let give_up = Instant::now() + wait;
    let mut scan = MarkerScan::new(marker);
    let mut buf = [0u8; 8192];
    loop {
        let left = give_up.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::other(format!(
                "the remote login shell did not start rsync within {} s",
                wait.as_secs()
            )));
        }
        let millis = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
        let mut ready = [PollFd::new(from.as_fd(), PollFlags::POLLIN)];
        match poll(&mut ready, PollTimeout::from(millis)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(e) => return Err(e.into()),
        }
        match from.read(&mut buf)? {
            0 => return Ok(None),
            n => {
                if let Some(rest) = scan.feed(&buf[..n]) {
                    return Ok(Some(rest));
                }
            }
        }
    }
}

/// A search for the marker across reads, keeping no more than a cut marker's bytes.
struct MarkerScan<'a> {
    marker: &'a [u8],
    seen: Vec<u8>,
}

impl<'a> MarkerScan<'a> {
    fn new(marker: &'a [u8]) -> Self {
        MarkerScan {
            marker,
            seen: Vec::new(),
        }
    }

    /// Takes the next bytes read; once the marker went by, answers what followed it.
    fn feed(&mut self, bytes: &[u8]) -> Option<Vec<u8>> {
        self.seen.extend_from_slice(bytes);
        let marker = self.marker;
        if let Some(at) = self.seen.windows(marker.len()).position(|w| w == marker) {
            return Some(self.seen.split_off(at + marker.len()));
        }
        let keep = self.seen.len().min(marker.len() - 1);
        self.seen.drain(..self.seen.len() - keep);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_precedes_the_marker_is_dropped_however_the_reads_fall() {
        let stream = b"hello from .bashrc\nsshmcp-rsync-12 almost\nno newline:sshmcp-rsync-123\n\x1e\x00\x00\x00rest";
        for size in [1, 2, 7, 4096] {
            let mut scan = MarkerScan::new(b"sshmcp-rsync-123\n");
            let mut chunks = stream.chunks(size);
            let mut got = chunks.find_map(|c| scan.feed(c)).expect("the marker");
            got.extend(chunks.flatten());
            assert_eq!(got, b"\x1e\x00\x00\x00rest", "reads of {size}");
        }
        let mut silent = MarkerScan::new(b"sshmcp-rsync-123\n");
        assert_eq!(
            silent.feed(b"no marker here, and more than a marker's length"),
            None
        );
        assert!(silent.seen.len() < 17, "only a cut marker's bytes are kept");
    }
}
