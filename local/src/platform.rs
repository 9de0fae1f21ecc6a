//! What differs between the operating systems clients and the daemon run on: a local
//! process's state and start time, which together with its pid name one process a recycled
//! pid does not share (Linux: `/proc/PID/stat`; macOS: `proc_pidinfo`), and the file a
//! process runs. The daemon checks its masters and tasks this way, clients the daemon they
//! are connected to, and `sshmcp daemon restart` the process it signals.

use std::path::PathBuf;

/// The longest path a Unix socket can be bound to: `sun_path` holds 108 bytes on Linux and
/// 104 on macOS, its NUL included.
pub const MAX_SOCKET_PATH: usize = if cfg!(target_os = "linux") { 107 } else { 103 };

/// What the system says of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `D`, `T`, `Z` (zombie), ...
    pub state: char,
    /// When it started, in the system's own unit (Linux: clock ticks after boot; macOS:
    /// microseconds since the epoch): only ever compared with itself.
    pub start_time: u64,
}

/// The process `pid` as it is now; `None` once it is gone (reaped).
pub fn read(pid: u32) -> Option<Stat> {
    #[cfg(target_os = "linux")]
    {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        parse(&text)
    }
    #[cfg(target_os = "macos")]
    {
        use nix::libc;
        // SAFETY: a plain C struct the call fills; zeroed is a valid value of it.
        let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
        // SAFETY: `info` is as large as the size given.
        let got = unsafe {
            libc::proc_pidinfo(
                pid as libc::c_int,
                libc::PROC_PIDTBSDINFO,
                0,
                (&mut info as *mut libc::proc_bsdinfo).cast(),
                size,
            )
        };
        if got != size {
            return None;
        }
        let state = match info.pbi_status {
            1 | 2 => 'R',
            4 => 'T',
            5 => 'Z',
            _ => 'S',
        };
        Some(Stat {
            state,
            start_time: info.pbi_start_tvsec * 1_000_000 + info.pbi_start_tvusec,
        })
    }
}

/// The file process `pid` runs, as the system names it (Linux shows a file replaced since
/// with ` (deleted)` after its name).
pub fn executable(pid: u32) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_link(format!("/proc/{pid}/exe")).ok()
    }
    #[cfg(target_os = "macos")]
    {
        use nix::libc;
        let mut buf = vec![0u8; libc::PROC_PIDPATHINFO_MAXSIZE as usize];
        // SAFETY: the buffer is as large as the size given.
        let len = unsafe {
            libc::proc_pidpath(
                pid as libc::c_int,
                buf.as_mut_ptr().cast(),
                buf.len() as u32,
            )
        };
        if len <= 0 {
            return None;
        }
        buf.truncate(len as usize);
        let path: std::ffi::OsString = std::os::unix::ffi::OsStringExt::from_vec(buf);
        Some(PathBuf::from(path))
    }
}

/// Where this user's runtime directories belong, whatever the environment says: a client
/// started by a GUI launcher with only `PATH` and `HOME` must find the daemon a terminal's
/// client finds. Linux: `/run/user/UID` (systemd's, the usual `XDG_RUNTIME_DIR`) when it is
/// this user's and private; macOS: the user's own cache directory (`confstr`, `TMPDIR`'s
/// sibling `…/C/`), not the temporary one, whose files the system removes once nobody has
/// read them for 3 days (a quiet daemon's socket and pidfile among them, and then a second
/// daemon would start beside the first). `None` elsewhere, or when there is none.
pub fn user_runtime_base(uid: u32) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        let dir = PathBuf::from(format!("/run/user/{uid}"));
        let meta = std::fs::symlink_metadata(&dir).ok()?;
        let private = meta.is_dir() && meta.uid() == uid && meta.permissions().mode() & 0o077 == 0;
        private.then_some(dir)
    }
    #[cfg(target_os = "macos")]
    {
        let _ = uid;
        use nix::libc;
        let mut buf = vec![0u8; 1024];
        // SAFETY: the buffer is as large as the size given.
        let len = unsafe {
            libc::confstr(
                libc::_CS_DARWIN_USER_CACHE_DIR,
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if len == 0 || len > buf.len() {
            return None;
        }
        buf.truncate(len - 1);
        let path: std::ffi::OsString = std::os::unix::ffi::OsStringExt::from_vec(buf);
        Some(PathBuf::from(path))
    }
}

/// Fields after the parenthesised command name (which may itself hold spaces or parentheses):
/// the state is the first, the start time the 20th.
#[cfg(any(target_os = "linux", test))]
pub fn parse(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start_time = fields.nth(18)?.parse().ok()?;
    Some(Stat { state, start_time })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_state_and_start_time_past_odd_names() {
        let line = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1 2 3";
        let stat = parse(line).unwrap();
        assert_eq!((stat.state, stat.start_time), ('S', 987_654));
    }

    #[test]
    fn this_process_reads_as_running_and_its_file_is_known() {
        let me = read(std::process::id()).unwrap();
        assert!(matches!(me.state, 'R' | 'S'));
        assert_eq!(read(std::process::id()).unwrap().start_time, me.start_time);
        let exe = executable(std::process::id()).unwrap();
        assert_eq!(
            exe.file_name(),
            std::env::current_exe().unwrap().file_name()
        );
    }
}
