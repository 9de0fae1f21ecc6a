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

/// rsync's remote shell: the master's socket, and no way to open another connection.
fn remote_shell(control: &Path) -> Result<String, std::io::Error> {
    let control = control.to_string_lossy();
    if control.contains(['\'', '"', '\\']) {
        return Err(std::io::Error::other(
            "the control socket's path holds a quote",
        ));
    }
    Ok(format!(
        "ssh -F /dev/null -S '{control}' -o ControlMaster=no -o ProxyCommand=false \
         -o BatchMode=yes -o LogLevel=ERROR"
    ))
}

/// The arguments of a download of `remote` into `partial`.
fn download_args(
    control: &Path,
    remote: &[u8],
    partial: &Path,
) -> Result<Vec<OsString>, std::io::Error> {
    let mut source = b"sshmcp:".to_vec();
    source.extend_from_slice(remote);
    Ok(vec![
        "-s".into(),
        "--inplace".into(),
        "--partial".into(),
        "--info=progress2".into(),
        "-e".into(),
        remote_shell(control)?.into(),
        OsString::from_vec(source),
        partial.as_os_str().to_owned(),
    ])
}

/// Copies `remote` into `partial`, counting bytes into `bytes` from rsync's progress, until it
/// ends or `cancel` fires (then rsync and its ssh are killed; the partial stays).
pub async fn download(
    control: &Path,
    remote: &[u8],
    partial: &Path,
    bytes: &AtomicU64,
    cancel: &CancellationToken,
) -> Result<(), Failure> {
    let args = download_args(control, remote, partial).map_err(Failure::Start)?;
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
                    Ok(s) if s.success() => Ok(()),
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
        let args =
            download_args(Path::new("/run/m/s1"), b"-x $(y) 'z'", Path::new("/r/p")).unwrap();
        assert!(args.contains(&OsString::from("-s")));
        assert_eq!(args[6], OsString::from("sshmcp:-x $(y) 'z'"));
        let shell = args[5].to_string_lossy();
        assert!(shell.contains("ProxyCommand=false") && shell.contains("-S '/run/m/s1'"));
        assert!(download_args(Path::new("/run/it's"), b"x", Path::new("/p")).is_err());
    }
}
