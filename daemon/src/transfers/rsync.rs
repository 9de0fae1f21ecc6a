//! rsync over the session's master. Its remote shell is `ssh -S <control socket>` with
//! `ProxyCommand=false`: when the master is gone, ssh's silent fallback to a fresh connection
//! (it would authenticate again, maybe as another user) fails at once instead. `-s` sends the
//! remote path as data, never through a remote shell's parsing. The copy goes into the
//! partial file in place, so a copy stopped half-way resumes from what is there.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

/// Why a copy did not finish.
pub enum Failure {
    Cancelled,
    /// rsync exited with this status (or was ended by a signal: -1).
    Exited(i32),
    Start(std::io::Error),
}

/// rsync's remote shell: the master's socket, and no way to open another connection. The
/// session's own server is named (host and port), so the one thing that stops a fallback
/// connection to it is `ProxyCommand=false` (tested against a listener).
fn remote_shell(control: &Path, (host, port): (&str, u16)) -> Result<String, std::io::Error> {
    let control = control.to_string_lossy();
    if control.contains(['\'', '"', '\\']) {
        return Err(std::io::Error::other(
            "the control socket's path holds a quote",
        ));
    }
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || ".-_:".contains(c))
    {
        return Err(std::io::Error::other(
            "the server's name holds odd characters",
        ));
    }
    Ok(format!(
        "ssh -F /dev/null -S '{control}' -o ControlMaster=no -o ProxyCommand=false \
         -o HostName={host} -o Port={port} -o BatchMode=yes -o LogLevel=ERROR"
    ))
}

/// The remote path as rsync's source words: `./` before a relative one (a leading `:` would
/// ask for rsync's daemon mode), and its wildcard characters escaped (the remote rsync
/// expands `* ? [` even under `-s`).
fn source(remote: &[u8]) -> Vec<u8> {
    let mut words = b"sshmcp:".to_vec();
    if !remote.starts_with(b"/") {
        words.extend_from_slice(b"./");
    }
    for b in remote {
        if matches!(b, b'*' | b'?' | b'[' | b'\\') {
            words.push(b'\\');
        }
        words.push(*b);
    }
    words
}

/// The arguments of a download of `remote` into `partial`. `--copy-links`: a symlink to a
/// file is copied as the file, as `stat` and the hash see it.
fn download_args(
    control: &Path,
    server: (&str, u16),
    remote: &[u8],
    partial: &Path,
) -> Result<Vec<OsString>, std::io::Error> {
    Ok(vec![
        "-s".into(),
        "--copy-links".into(),
        "--inplace".into(),
        "--partial".into(),
        "--info=progress2".into(),
        "-e".into(),
        remote_shell(control, server)?.into(),
        OsString::from_vec(source(remote)),
        partial.as_os_str().to_owned(),
    ])
}

/// Copies `remote` into `partial`, counting bytes into `bytes` from rsync's progress, until it
/// ends or `cancel` fires (then rsync and its ssh are killed; the partial stays).
pub async fn download(
    control: &Path,
    server: (&str, u16),
    remote: &[u8],
    partial: &Path,
    (bytes, total): (&AtomicU64, u64),
    cancel: &CancellationToken,
) -> Result<(), Failure> {
    let args = download_args(control, server, remote, partial).map_err(Failure::Start)?;
    let mut child = tokio::process::Command::new("rsync")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(Failure::Start)?;
    let group = child.id().map(|pid| nix::unistd::Pid::from_raw(pid as i32));
    let mut stdout = child.stdout.take().expect("piped");
    let mut buf = vec![0u8; 4096];
    let mut line = Vec::new();
    let mut open = true;
    loop {
        tokio::select! {
            read = stdout.read(&mut buf), if open => match read {
                Ok(n @ 1..) => {
                    for b in &buf[..n] {
                        match b {
                            b'\r' | b'\n' => {
                                if let Some(done) = progress_bytes(&line) {
                                    bytes.store(done, Ordering::Relaxed);
                                }
                                line.clear();
                            }
                            b => line.push(*b),
                        }
                    }
                }
                _ => open = false,
            },
            status = child.wait() => {
                return match status {
                    // rsync skips what is no regular file and still succeeds: the partial
                    // must be one.
                    Ok(s) if s.success() && is_file(partial) => {
                        bytes.store(total, Ordering::Relaxed);
                        Ok(())
                    }
                    Ok(s) if s.success() => Err(Failure::Exited(0)),
                    Ok(s) => Err(Failure::Exited(s.code().unwrap_or(-1))),
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

fn is_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

/// The byte count of one `--info=progress2` line (`  1,234,567  12%  1.23MB/s  0:00:05`).
fn progress_bytes(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line).ok()?;
    let first = text.split_whitespace().next()?;
    let digits: String = first.chars().filter(|c| *c != ',').collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_remote_path_is_one_argument_and_no_shell_word() {
        let server = ("127.0.0.1", 22);
        let args = download_args(
            Path::new("/run/m/s1"),
            server,
            b"-x $(y) 'z'",
            Path::new("/r/p"),
        )
        .unwrap();
        assert!(args.contains(&OsString::from("-s")));
        assert_eq!(args[7], OsString::from("sshmcp:./-x $(y) 'z'"));
        let shell = args[6].to_string_lossy();
        assert!(shell.contains("ProxyCommand=false") && shell.contains("-S '/run/m/s1'"));
        assert!(download_args(Path::new("/run/it's"), server, b"x", Path::new("/p")).is_err());
        assert!(download_args(Path::new("/run/m"), ("a b", 22), b"x", Path::new("/p")).is_err());
    }

    #[test]
    fn wildcards_and_a_leading_colon_are_taken_literally() {
        assert_eq!(source(b"/d/x[1]*?"), br"sshmcp:/d/x\[1]\*\?".to_vec());
        assert_eq!(source(b":odd"), b"sshmcp:./:odd".to_vec());
        assert_eq!(source(br"a\b"), br"sshmcp:./a\\b".to_vec());
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
        let shell = remote_shell(&dir.path().join("no-master"), ("127.0.0.1", port)).unwrap();
        let mut words: Vec<&str> = shell.split_whitespace().collect();
        // The control path is quoted for rsync's own word splitting.
        let control = dir.path().join("no-master").display().to_string();
        words[4] = &control;
        let status = std::process::Command::new(words[0])
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
