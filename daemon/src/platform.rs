//! What differs between the operating systems the daemon runs on (Linux, macOS), each behind
//! one function, so the rest of the daemon reads the same everywhere: pipes made close-on-
//! exec, a child that dies with its parent, a rename that never replaces, moving bytes
//! between descriptors, a larger pipe, this binary's own file, the open descriptors, and
//! whether the CPU does AES.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

/// A pipe whose ends are closed on exec.
pub fn pipe_cloexec() -> std::io::Result<(OwnedFd, OwnedFd)> {
    #[cfg(target_os = "linux")]
    {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(std::io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    {
        // No pipe2: the flag is set right after (a fork in between could inherit the ends
        // until its exec; nothing here forks without exec).
        let (read, write) = nix::unistd::pipe()?;
        for fd in [&read, &write] {
            nix::fcntl::fcntl(
                fd,
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
            )?;
        }
        Ok((read, write))
    }
}

/// For a child about to exec (async-signal-safe): asks the kernel to kill it when the thread
/// that forked it ends. Linux only; elsewhere a child outlives a parent killed outright, and
/// ends when its pipes do.
///
/// # Safety
/// Only between fork and exec, as `pre_exec` runs it.
pub unsafe fn die_with_parent() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a plain system call on this process.
        if unsafe { nix::libc::prctl(nix::libc::PR_SET_PDEATHSIG, nix::libc::SIGKILL) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Renames `from` (in `from_dir`) to `to` (in `to_dir`) unless `to` exists: `EEXIST` then.
/// `EINVAL` where the file system has no such rename (NFS, some FUSE).
pub fn rename_noreplace<F: AsFd, T: AsFd>(
    from_dir: F,
    from: &OsStr,
    to_dir: T,
    to: &OsStr,
) -> nix::Result<()> {
    #[cfg(target_os = "linux")]
    {
        nix::fcntl::renameat2(
            from_dir,
            from,
            to_dir,
            to,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        )
    }
    #[cfg(target_os = "macos")]
    {
        use std::os::fd::AsRawFd as _;
        let (from, to) = (c_string(from)?, c_string(to)?);
        // SAFETY: two valid C strings and two open descriptors.
        let done = unsafe {
            nix::libc::renameatx_np(
                from_dir.as_fd().as_raw_fd(),
                from.as_ptr(),
                to_dir.as_fd().as_raw_fd(),
                to.as_ptr(),
                nix::libc::RENAME_EXCL,
            )
        };
        nix::errno::Errno::result(done).map(drop)
    }
}

#[cfg(target_os = "macos")]
fn c_string(s: &OsStr) -> nix::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt as _;
    std::ffi::CString::new(s.as_bytes()).map_err(|_| nix::errno::Errno::EINVAL)
}

/// Moves up to `len` bytes from `from` to `to`: inside the kernel where it can (Linux's
/// `splice`), else through a buffer. `Ok(0)` at the end of `from`; `EAGAIN` when `to` is
/// full (nothing was taken from `from` then).
pub fn move_bytes(from: BorrowedFd, to: BorrowedFd, len: usize) -> nix::Result<usize> {
    #[cfg(target_os = "linux")]
    {
        nix::fcntl::splice(
            from,
            None,
            to,
            None,
            len,
            nix::fcntl::SpliceFFlags::SPLICE_F_MOVE,
        )
    }
    #[cfg(not(target_os = "linux"))]
    {
        // `to` takes what it can now: wait for room before reading, so no byte read is
        // left over when it is full.
        let mut ready = [nix::poll::PollFd::new(to, nix::poll::PollFlags::POLLOUT)];
        if nix::poll::poll(&mut ready, nix::poll::PollTimeout::ZERO)? == 0 {
            return Err(nix::errno::Errno::EAGAIN);
        }
        let mut buf = vec![0u8; len.min(64 * 1024)];
        let n = nix::unistd::read(from, &mut buf)?;
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            match nix::unistd::write(to, rest) {
                Ok(written) => rest = &rest[written..],
                Err(nix::errno::Errno::EAGAIN) => {
                    let mut ready = [nix::poll::PollFd::new(to, nix::poll::PollFlags::POLLOUT)];
                    let _ = nix::poll::poll(&mut ready, nix::poll::PollTimeout::NONE);
                }
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }
}

/// Asks for a pipe of `bytes` (best effort: Linux only; a smaller pipe still works).
pub fn enlarge_pipe(pipe: BorrowedFd, bytes: i32) {
    #[cfg(target_os = "linux")]
    {
        let _ = nix::fcntl::fcntl(pipe, nix::fcntl::FcntlArg::F_SETPIPE_SZ(bytes));
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (pipe, bytes);
}

/// This binary's file, for what a master runs long after this daemon may be gone (a rekey's
/// host key check): `/proc/PID/exe` would by then name whatever process took the PID, and
/// OpenSSH ends the connection when that check fails. When an upgrade replaced the file
/// since this daemon started, the path names the new binary, which reports as well; only
/// when no file is there any more, [`own_binary`], then the binary's only name.
pub fn lasting_binary() -> std::io::Result<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let link = std::fs::read_link("/proc/self/exe")?;
        let bytes = link.as_os_str().as_bytes();
        let path = PathBuf::from(std::ffi::OsStr::from_bytes(
            bytes.strip_suffix(b" (deleted)").unwrap_or(bytes),
        ));
        match path.is_file() {
            true => Ok(path),
            false => own_binary(),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        std::env::current_exe()
    }
}

/// This very binary, even when an upgrade replaced its file since the daemon started (Linux
/// keeps it reachable as `/proc/PID/exe`); elsewhere its path as started.
pub fn own_binary() -> std::io::Result<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        Ok(PathBuf::from(format!("/proc/{}/exe", std::process::id())))
    }
    #[cfg(not(target_os = "linux"))]
    {
        std::env::current_exe()
    }
}

/// Where this process's open descriptors are listed by number (and opened again by name).
pub const OWN_FDS_DIR: &str = if cfg!(target_os = "linux") {
    "/proc/self/fd"
} else {
    "/dev/fd"
};

/// This process's umask, read without setting it (umask(2) can only be read by setting it,
/// for every thread at once): Linux says it in `/proc/self/status` (since 4.7); `None`
/// elsewhere.
pub fn umask() -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("Umask:"))?;
        u32::from_str_radix(line["Umask:".len()..].trim(), 8).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Whether this CPU does AES in hardware (AES-GCM is then the cheaper cipher for bulk data).
pub fn cpu_has_aes() -> bool {
    #[cfg(target_os = "linux")]
    {
        hardware_aes(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default())
    }
    #[cfg(not(target_os = "linux"))]
    {
        // Every Apple CPU that runs a supported macOS has the AES instructions.
        true
    }
}

/// Whether `/proc/cpuinfo` lists AES instructions (`flags` on x86, `Features` on ARM).
#[cfg(any(target_os = "linux", test))]
fn hardware_aes(cpuinfo: &str) -> bool {
    cpuinfo.lines().any(|line| {
        let (key, value) = line.split_once(':').unwrap_or((line, ""));
        matches!(key.trim(), "flags" | "Features") && value.split_whitespace().any(|f| f == "aes")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::errno::Errno;

    #[test]
    fn aes_is_found_on_x86_and_arm_and_not_in_other_words() {
        assert!(hardware_aes(
            "processor\t: 0\nflags\t\t: fpu sse2 aes avx2\n"
        ));
        assert!(hardware_aes("Features\t: fp asimd aes pmull sha1\n"));
        assert!(!hardware_aes(
            "flags\t\t: fpu sse2 vaes_like avx2\nmodel name\t: aes\n"
        ));
        assert!(!hardware_aes(""));
    }

    #[test]
    fn a_noreplace_rename_refuses_an_existing_name() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        std::fs::write(dir.path().join("a"), "a").unwrap();
        std::fs::write(dir.path().join("b"), "b").unwrap();
        let (a, b, c) = (OsStr::new("a"), OsStr::new("b"), OsStr::new("c"));
        assert_eq!(rename_noreplace(&d, a, &d, b), Err(Errno::EEXIST));
        rename_noreplace(&d, a, &d, c).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("c")).unwrap(), "a");
    }

    #[test]
    fn bytes_move_between_pipes_to_the_end() {
        let (from_read, from_write) = pipe_cloexec().unwrap();
        let (to_read, to_write) = pipe_cloexec().unwrap();
        nix::unistd::write(&from_write, b"hello").unwrap();
        drop(from_write);
        let mut moved = 0;
        while let Ok(n @ 1..) = move_bytes(from_read.as_fd(), to_write.as_fd(), 1 << 20) {
            moved += n;
        }
        assert_eq!(moved, 5);
        let mut buf = [0u8; 8];
        assert_eq!(nix::unistd::read(to_read.as_fd(), &mut buf), Ok(5));
        assert_eq!(&buf[..5], b"hello");
    }
}
