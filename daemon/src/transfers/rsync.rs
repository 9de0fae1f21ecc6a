//! rsync over the session's master. Its remote shell is `ssh -S <control socket>` with
//! `ProxyCommand=false`: when the master is gone, ssh's silent fallback to a fresh connection
//! (it would authenticate again, maybe as another user) fails at once instead. ssh runs under
//! our own relay (see `relay`), which drops what a login shell prints before rsync's server
//! starts. `-s` sends the remote path as data, never through a remote shell's parsing. The copy
//! goes into the partial file in place, so a copy stopped half-way resumes from what is there.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

/// Why a copy did not finish.
pub enum Failure {
    Cancelled,
    /// sshd refused rsync's channel (the server allows fewer sessions than the session's
    /// slots): nothing reached the host.
    Refused,
    /// rsync exited with this status (or was ended by a signal: -1), and the last line it
    /// wrote on stderr.
    Exited(i32, String),
    Start(std::io::Error),
}

/// The two ends of one copy.
#[derive(Clone, Copy)]
pub enum Ends<'a> {
    /// A remote file into a local partial file.
    Download { remote: &'a [u8], partial: &'a Path },
    /// An open local file into a remote partial file.
    Upload { source: RawFd, partial: &'a [u8] },
}

/// The descriptor an upload's source has in rsync: rsync reads `/proc/self/fd/3`, the file
/// that was checked, never a path that could be swapped meanwhile.
const SOURCE_FD: RawFd = 3;

/// rsync's remote shell words: the master's socket, and no way to open another connection.
/// The session's own server is named (host and port), so the one thing that stops a fallback
/// connection to it is `ProxyCommand=false` (tested against a listener).
fn ssh_words(control: &Path, (host, port): (&str, u16)) -> Result<Vec<String>, std::io::Error> {
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || ".-_:".contains(c))
    {
        return Err(std::io::Error::other(
            "the server's name holds odd characters",
        ));
    }
    Ok([
        "ssh",
        "-F",
        "/dev/null",
        "-S",
        &control.to_string_lossy(),
        "-o",
        "ControlMaster=no",
        "-o",
        "ProxyCommand=false",
        "-o",
        &format!("HostName={host}"),
        "-o",
        &format!("Port={port}"),
        "-o",
        "BatchMode=yes",
        "-o",
        "LogLevel=ERROR",
    ]
    .map(String::from)
    .to_vec())
}

/// The `-e` value: the relay (this binary), then ssh's words, each quoted for rsync's own
/// splitting of it (single quotes, which rsync honours; a word holding one is refused).
fn remote_shell(relay: &Path, ssh: Vec<String>) -> Result<String, std::io::Error> {
    let mut words = vec![relay.to_string_lossy().into_owned()];
    words.extend(ssh);
    if words.iter().any(|w| w.contains('\'')) {
        return Err(std::io::Error::other(
            "a path rsync's remote shell needs holds a quote",
        ));
    }
    Ok(words
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(" "))
}

/// A remote path as rsync's words: `./` before a relative one (a leading `:` would ask for
/// rsync's daemon mode), and in each name holding one of `* ? [` those and `\` escaped: the
/// remote rsync expands wildcards in source and destination alike, even under `-s`, and
/// undoes the escapes only in such a name (in any other a `\` is a plain byte).
fn remote_words(remote: &[u8]) -> Vec<u8> {
    let mut words = b"sshmcp:".to_vec();
    if !remote.starts_with(b"/") {
        words.extend_from_slice(b"./");
    }
    for (i, name) in remote.split(|b| *b == b'/').enumerate() {
        if i > 0 {
            words.push(b'/');
        }
        let wild = name.iter().any(|b| matches!(b, b'*' | b'?' | b'['));
        for b in name {
            if wild && matches!(b, b'*' | b'?' | b'[' | b'\\') {
                words.push(b'\\');
            }
            words.push(*b);
        }
    }
    words
}

/// Whether rsync can fetch this remote file: one whose name holds both a `\` and one of
/// `* ? [` reaches the local rsync under a name it did not ask for, which it refuses.
pub fn fetchable(remote: &[u8]) -> bool {
    let name = remote.rsplit(|b| *b == b'/').next().unwrap_or(remote);
    !(name.contains(&b'\\') && name.iter().any(|b| matches!(b, b'*' | b'?' | b'[')))
}

/// rsync's arguments for `ends`. `--copy-links`: a remote symlink to a file is copied as the
/// file, as `stat` and the hash see it, and the source descriptor's name (`/proc/self/fd/3`,
/// macOS `/dev/fd/3`) is followed.
/// `--append-verify`: a partial is taken as the source's first bytes and only the rest is sent
/// (rsync's block search over a large unmatched rest costs seconds per GiB), then rsync
/// checks the whole file and sends it again when it differs. A partial as long as the source
/// is left as it is: the verification judges it.
/// The remote command first prints `marker` and a newline, after which the relay passes the
/// stream on, and marks the remote rsync with it (to stop it: `remote::stop_rsync`).
fn args(shell: String, marker: &str, ends: &Ends) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "-s",
        "--append-verify",
        "--copy-links",
        "--inplace",
        "--partial",
        "--info=progress2",
        "--stats",
    ]
    .map(OsString::from)
    .to_vec();
    // The marker is printed from two halves: a shell tracing its commands (`set -x` in a
    // startup file, stderr merged into stdout) shows the halves apart, never the marker.
    let (head, tail) = marker.split_at(marker.len() / 2);
    args.push(
        format!(
            "--rsync-path=printf '%s%s\\n' {head} {tail}; exec env {}={marker} rsync",
            super::remote::RSYNC_MARK_VAR
        )
        .into(),
    );
    args.push("-e".into());
    args.push(shell.into());
    match ends {
        Ends::Download { remote, partial } => {
            args.push(OsString::from_vec(remote_words(remote)));
            args.push(partial.as_os_str().to_owned());
        }
        Ends::Upload { partial, .. } => {
            let fds = crate::platform::OWN_FDS_DIR;
            args.push(format!("{fds}/{SOURCE_FD}").into());
            args.push(OsString::from_vec(remote_words(partial)));
        }
    }
    args
}

/// The rsync this machine's transfers run ([`sshmcp_local::rsync`]), or why there is none.
/// Found once; a machine without one is looked at again at each transfer, so installing it
/// needs no daemon restart.
pub async fn program() -> Result<std::path::PathBuf, String> {
    static FOUND: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    if let Some(path) = FOUND.get() {
        return Ok(path.clone());
    }
    let found = tokio::task::spawn_blocking(sshmcp_local::rsync::find)
        .await
        .map_err(|e| format!("looking for rsync failed: {e}"))?
        .map_err(|none| none.to_string())?;
    tracing::info!("transfers run {} ({})", found.path.display(), found.version);
    Ok(FOUND.get_or_init(|| found.path).clone())
}

/// Copies one end into the other's partial file, counting bytes into `bytes` from rsync's
/// progress, until it ends or `cancel` fires (then rsync and its ssh are killed; the partial
/// stays). Answers the bytes rsync did not have to send (the partial's, when it resumed).
pub async fn copy(
    control: &Path,
    server: (&str, u16),
    marker: &str,
    ends: Ends<'_>,
    (bytes, total): (&AtomicU64, u64),
    cancel: &CancellationToken,
) -> Result<u64, Failure> {
    // This very binary, even when an upgrade replaced its file since the daemon started.
    let relay = crate::platform::own_binary().map_err(Failure::Start)?;
    let shell = ssh_words(control, server)
        .and_then(|ssh| remote_shell(&relay, ssh))
        .map_err(Failure::Start)?;
    let program = program()
        .await
        .map_err(|why| Failure::Start(std::io::Error::other(why)))?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args(shell, marker, &ends))
        .env(super::relay::MARKER_VAR, marker)
        // Progress and statistics numbers as they are parsed here, whatever the user's locale.
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let source = match ends {
        Ends::Upload { source, .. } => Some(source),
        Ends::Download { .. } => None,
    };
    // SAFETY: prctl, dup2 and fcntl are async-signal-safe and touch no memory of the parent.
    unsafe {
        command.pre_exec(move || {
            use nix::libc;
            // A daemon killed outright takes its copies along: the thread that spawns rsync
            // is one of the runtime's workers, which live as long as the daemon (Linux sends
            // this signal when the forking thread ends, so no worker may become a blocking
            // thread that retires: the daemon never calls `block_in_place`).
            crate::platform::die_with_parent()?;
            // The copy at SOURCE_FD loses close-on-exec (dup2 onto itself keeps it: fcntl).
            if let Some(source) = source
                && (libc::dup2(source, SOURCE_FD) < 0
                    || libc::fcntl(SOURCE_FD, libc::F_SETFD, 0) < 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(Failure::Start)?;
    let group = child.id().map(|pid| nix::unistd::Pid::from_raw(pid as i32));
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (mut out, mut err) = (Lines::default(), Lines::default());
    let mut refused = false;
    let (mut out_buf, mut err_buf) = (vec![0u8; 4096], vec![0u8; 4096]);
    let mut sent = total;
    let (mut out_open, mut err_open) = (true, true);
    loop {
        tokio::select! {
            read = stdout.read(&mut out_buf), if out_open => match read {
                Ok(n @ 1..) => out.feed(&out_buf[..n], |line| {
                    if let Some(done) = progress_bytes(line) {
                        // rsync counts a file it sends again (a failed whole-file check)
                        // twice: the report never says more than the file holds.
                        bytes.store(done.min(total), Ordering::Relaxed);
                    } else if let Some(literal) = literal_bytes(line) {
                        sent = literal;
                    }
                }),
                _ => out_open = false,
            },
            read = stderr.read(&mut err_buf), if err_open => match read {
                Ok(n @ 1..) => err.feed(&err_buf[..n], |line| refused |= is_refusal(line)),
                _ => err_open = false,
            },
            // Only after its output ended: the statistics come last, and an exit seen first
            // would lose them.
            status = child.wait(), if !out_open && !err_open => {
                return match status {
                    Ok(s) if s.success() => {
                        bytes.store(total, Ordering::Relaxed);
                        Ok(total.saturating_sub(sent))
                    }
                    // rsync says 255 (its ssh failed) or, when it saw the stream end before
                    // its ssh was gone, 12: either way nothing reached the host.
                    Ok(_) if refused => Err(Failure::Refused),
                    Ok(s) => Err(Failure::Exited(s.code().unwrap_or(-1), err.last_said())),
                    Err(e) => Err(Failure::Start(e)),
                };
            }
            _ = cancel.cancelled() => {
                if let Some(group) = group {
                    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
                }
                let _ = child.wait().await;
                return Err(Failure::Cancelled);
            }
        }
    }
}

/// Whether a line of rsync's stderr is ssh's mux client reporting a session the master could
/// not open because sshd refused the channel (OpenSSH's words in `mux.c`), at the start of the
/// line: the same stream carries the remote side's messages, which may quote anything.
fn is_refusal(line: &[u8]) -> bool {
    line.starts_with(
        b"mux_client_request_session: session request failed: Session open refused by peer",
    )
}

/// Lines of one of rsync's streams (`\r` ends a progress line), each at most `LINE_MAX`
/// bytes; the last complete one is kept.
#[derive(Default)]
struct Lines {
    line: Vec<u8>,
    last: Vec<u8>,
}

const LINE_MAX: usize = 4096;

impl Lines {
    fn feed(&mut self, bytes: &[u8], mut each: impl FnMut(&[u8])) {
        for b in bytes {
            match b {
                b'\r' | b'\n' => {
                    each(&self.line);
                    if !self.line.is_empty() {
                        std::mem::swap(&mut self.last, &mut self.line);
                    }
                    self.line.clear();
                }
                b if self.line.len() < LINE_MAX => self.line.push(*b),
                _ => {}
            }
        }
    }

    /// The last line said, or what was said after it without a newline.
    fn last_said(&self) -> String {
        let line = if self.line.is_empty() {
            &self.last
        } else {
            &self.line
        };
        String::from_utf8_lossy(line).trim().to_string()
    }
}

/// What an rsync exit status means, for an error message.
pub fn exit_meaning(code: i32) -> String {
    let why = match code {
        -1 => "ended by a signal",
        11 => "a file could not be read or written: a full disk, or a directory gone",
        12 => "its data stream broke",
        23 | 24 => "the file could not be copied whole",
        30 => "a timeout",
        255 => "its ssh failed",
        _ => "an error",
    };
    format!("exit status {code}: {why}")
}

/// The byte count of one `--info=progress2` line (`  1,234,567  12%  1.23MB/s  0:00:05`).
fn progress_bytes(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line).ok()?;
    let first = text.split_whitespace().next()?;
    let digits: String = first.chars().filter(|c| *c != ',').collect();
    digits.parse().ok()
}

/// The byte count of the `--stats` line `Literal data: 1,234 bytes`: the file's bytes sent.
fn literal_bytes(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line)
        .ok()?
        .strip_prefix("Literal data: ")?;
    let digits: String = text
        .split_whitespace()
        .next()?
        .chars()
        .filter(|c| *c != ',')
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linux sends a child's parent-death signal when the *thread* that forked it ends: a
    /// runtime worker turned into a blocking thread by `block_in_place` may retire, and the
    /// rsyncs it spawned would be killed under a running transfer. No daemon code turns one.
    #[test]
    fn no_runtime_worker_is_turned_into_a_blocking_thread() {
        let needle = concat!("block_in", "_place");
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut dirs = vec![src];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let calls = text
                        .lines()
                        .filter(|l| l.contains(&format!("{needle}(")))
                        .count();
                    assert_eq!(calls, 0, "{} calls {needle}", path.display());
                }
            }
        }
    }

    #[test]
    fn progress_lines_give_their_byte_count() {
        assert_eq!(
            progress_bytes(b"     32,768   0%    0.00kB/s    0:00:00"),
            Some(32_768)
        );
        assert_eq!(
            progress_bytes(b" 67,108,864 100%  301.02MB/s    0:00:00 (xfr#1, to-chk=0/1)"),
            Some(67_108_864)
        );
        assert_eq!(progress_bytes(b"sending incremental file list"), None);
        assert_eq!(progress_bytes(b""), None);
    }

    #[test]
    fn only_the_mux_clients_refusal_is_a_refusal() {
        let said =
            b"mux_client_request_session: session request failed: Session open refused by peer";
        assert!(is_refusal(said));
        assert!(!is_refusal(
            b"mux_client_request_session: session request failed: boom"
        ));
        assert!(!is_refusal(
            b"rsync error: unexplained error (code 255) at io.c(285)"
        ));
        let quoted = [b"file has vanished: \"/tmp/".as_slice(), said, b"\""].concat();
        assert!(!is_refusal(&quoted));
    }

    #[test]
    fn stats_give_the_bytes_sent() {
        assert_eq!(literal_bytes(b"Literal data: 500,160 bytes"), Some(500_160));
        assert_eq!(literal_bytes(b"Matched data: 499,840 bytes"), None);
    }

    #[test]
    fn remote_paths_are_one_argument_and_no_shell_word() {
        let shell = "'relay' 'ssh'".to_string();
        let download = args(
            shell.clone(),
            "m",
            &Ends::Download {
                remote: b"-x $(y) 'z'",
                partial: Path::new("/r/p"),
            },
        );
        assert!(download.contains(&OsString::from("-s")));
        assert_eq!(
            download[download.len() - 2],
            OsString::from("sshmcp:./-x $(y) 'z'")
        );
        assert_eq!(download[download.len() - 1], OsString::from("/r/p"));
        let upload = args(
            shell,
            "m",
            &Ends::Upload {
                source: 7,
                partial: b"/d/.sshmcp-1.part",
            },
        );
        let source = format!("{}/3", crate::platform::OWN_FDS_DIR);
        assert_eq!(upload[upload.len() - 2], OsString::from(source));
        assert_eq!(
            upload[upload.len() - 1],
            OsString::from("sshmcp:/d/.sshmcp-1.part")
        );
        let shell_path = "--rsync-path=printf '%s%s\\n' sshmcp- rsync-1; \
                          exec env SSHMCP_RSYNC=sshmcp-rsync-1 rsync";
        let ends = Ends::Upload {
            source: 7,
            partial: b"/p",
        };
        let marked = args(String::new(), "sshmcp-rsync-1", &ends);
        assert!(marked.contains(&shell_path.into()), "{marked:?}");
    }

    #[test]
    fn the_remote_shell_quotes_each_word_and_refuses_a_quote() {
        let ssh = ssh_words(Path::new("/run/m/s 1"), ("127.0.0.1", 22)).unwrap();
        let shell = remote_shell(Path::new("/bin/sshmcpd"), ssh).unwrap();
        assert!(shell.starts_with("'/bin/sshmcpd' 'ssh' '-F' '/dev/null' '-S' '/run/m/s 1'"));
        assert!(shell.contains("'ProxyCommand=false'"));
        let ssh = ssh_words(Path::new("/run/it's"), ("h", 22)).unwrap();
        assert!(remote_shell(Path::new("/bin/sshmcpd"), ssh).is_err());
        assert!(ssh_words(Path::new("/run/m"), ("a b", 22)).is_err());
    }

    #[test]
    fn wildcards_and_a_leading_colon_are_taken_literally() {
        assert_eq!(remote_words(b"/d/x[1]*?"), br"sshmcp:/d/x\[1]\*\?".to_vec());
        assert_eq!(remote_words(b":odd"), b"sshmcp:./:odd".to_vec());
        // A backslash is escaped only in a name that holds a wildcard.
        assert_eq!(remote_words(br"a\b"), br"sshmcp:./a\b".to_vec());
        assert_eq!(
            remote_words(br"m[1]\z/a\b"),
            br"sshmcp:./m\[1]\\z/a\b".to_vec()
        );
        assert!(fetchable(br"m[1]\z/a\b") && fetchable(b"/d/x[1]"));
        assert!(!fetchable(br"/d/f[2]\g"));
    }

    /// The remote shell with no master behind its socket, pointed at a listener standing in
    /// for the server: ssh gives up and the listener never sees a connection (without
    /// `ProxyCommand=false`, ssh falls back to connecting by itself).
    #[test]
    fn a_gone_master_never_makes_ssh_connect_by_itself() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let words = ssh_words(&dir.path().join("no-master"), ("127.0.0.1", port)).unwrap();
        let status = std::process::Command::new(&words[0])
            .args(&words[1..])
            // Only so that a fallback, were there one, would end instead of waiting forever
            // for the listener's banner.
            .args(["-o", "ConnectTimeout=2", "sshmcp", "true"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(!status.success());
        assert_eq!(
            listener.accept().map_err(|e| e.kind()).err(),
            Some(std::io::ErrorKind::WouldBlock),
            "ssh connected by itself"
        );
    }
}
