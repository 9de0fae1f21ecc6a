//! The OpenSSH master of one session: its argv, starting it in its own process session so it
//! outlives the daemon, telling failures apart without ever showing its raw stderr, and
//! stopping it.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use sshmcp_proto::session::ConnectTarget;
use tokio_util::sync::CancellationToken;

use super::askpass;
use super::identity::{self, Resolved};
use crate::local_process::ProcessId;
use crate::mux;

/// The exact text the contract requires when a prompt is needed and cannot be shown.
pub const ASKPASS_MESSAGE: &str = "SSH authentication requires an interactive system prompt, but no usable user session environment was available";

/// Keepalives added when the user's configuration has none as frequent, so a dead link
/// makes the session `lost` within a minute rather than when TCP gives up: one every
/// `KEEPALIVE_SECS`, the link given up after `KEEPALIVE_COUNT` unanswered.
const KEEPALIVE_SECS: u32 = 15;
const KEEPALIVE_COUNT: u32 = 3;

/// How long the daemon's keepalives take to give a dead link up.
pub const KEEPALIVE_GIVES_UP_SECS: u32 = KEEPALIVE_SECS * KEEPALIVE_COUNT;

/// `ssh -G` for `target`: evaluates the configuration, connects nowhere.
pub fn resolve_args(ssh_config: Option<&Path>, target: &ConnectTarget) -> Vec<OsString> {
    let mut args = config_args(ssh_config);
    args.extend(["-G".into(), "-T".into()]);
    args.extend(
        identity::target_args(target)
            .into_iter()
            .map(OsString::from),
    );
    args
}

/// The master: authenticates, forks into the background once ready (`-f`), runs no command
/// (`-N`), owns the control socket, and sets up none of the configuration's forwardings.
/// With `report_host_key`, it reports the host key it verifies (see `host_key`).
pub fn master_args(
    ssh_config: Option<&Path>,
    control_path: &Path,
    target: &ConnectTarget,
    add_keepalive: bool,
    ciphers: Option<&str>,
    connect_timeout: Duration,
    report_host_key: Option<OsString>,
) -> Vec<OsString> {
    let mut args = config_args(ssh_config);
    args.extend([
        "-M".into(),
        "-S".into(),
        control_path.as_os_str().to_owned(),
    ]);
    for opt in [
        "ControlMaster=yes",
        "ControlPersist=no",
        "ClearAllForwardings=yes",
        // A forward asked later through the control socket that fails must fail alone.
        "ExitOnForwardFailure=no",
        "RequestTTY=no",
    ] {
        args.extend(["-o".into(), opt.into()]);
    }
    // OpenSSH takes whole seconds: rounded up, so that the daemon's own timer, at the exact
    // `connect_timeout`, is what ends a fractional one (1.9 s ended after 1 s when cut down).
    let secs = (connect_timeout.as_secs_f64().ceil() as u64).max(1);
    args.extend(["-o".into(), format!("ConnectTimeout={secs}").into()]);
    if add_keepalive {
        args.extend([
            "-o".into(),
            format!("ServerAliveInterval={KEEPALIVE_SECS}").into(),
            "-o".into(),
            format!("ServerAliveCountMax={KEEPALIVE_COUNT}").into(),
        ]);
    }
    if let Some(ciphers) = ciphers {
        args.extend(["-o".into(), format!("Ciphers={ciphers}").into()]);
    }
    if let Some(option) = report_host_key {
        args.extend(["-o".into(), option]);
    }
    args.extend(["-N".into(), "-f".into()]);
    args.extend(
        identity::target_args(target)
            .into_iter()
            .map(OsString::from),
    );
    args
}

fn config_args(ssh_config: Option<&Path>) -> Vec<OsString> {
    match ssh_config {
        Some(file) => vec!["-F".into(), file.as_os_str().to_owned()],
        None => Vec::new(),
    }
}

/// Runs `ssh -G` and reads the server's identity from it.
pub async fn resolve(
    ssh_config: Option<&Path>,
    target: &ConnectTarget,
    timeout: std::time::Duration,
) -> Result<Resolved, String> {
    // In a process group of its own: what a `Match exec` of the configuration started goes
    // with it when it takes too long.
    let child = tokio::process::Command::new("ssh")
        .args(resolve_args(ssh_config, target))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run ssh: {e}"))?;
    let group = GroupGuard(child.id());
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(output) => {
            group.disarm();
            output.map_err(|e| format!("cannot run ssh: {e}"))?
        }
        Err(_) => {
            return Err(format!(
                "ssh could not evaluate the target's configuration (ssh -G) within \
                 connect_timeout ({} s): a `Match exec` command of the OpenSSH configuration \
                 may hang",
                timeout.as_secs()
            ));
        }
    };
    if !output.status.success() {
        return Err(format!(
            "ssh could not evaluate the target's configuration (exit status {})",
            output.status.code().unwrap_or(-1)
        ));
    }
    identity::parse_ssh_g(&String::from_utf8_lossy(&output.stdout))
        .ok_or_else(|| "ssh -G gave no hostname, port or user".to_string())
}

/// Where the master started with `log_path` reports its host key (see `host_key`).
pub fn host_key_file(log_path: &Path) -> std::path::PathBuf {
    log_path.with_extension("hostkey")
}

/// How a start attempt ended when it did not succeed.
#[derive(Debug, PartialEq, Eq)]
pub enum StartFailure {
    /// A concise, status-only reason (see [`classify`]).
    Failed(String),
    Cancelled,
}

/// What a connect whose host name no resolver knows says.
pub const NOT_RESOLVED: &str = "the host name could not be resolved";

/// Starts the master and waits until it is authenticated and backgrounded. Its stdio goes to
/// `log_path` (private; never shown to callers), it runs in its own process session so a
/// daemon crash or stop does not take it down, and a timeout or cancellation kills the whole
/// attempt.
pub async fn start(
    args: Vec<OsString>,
    log_path: &Path,
    askpass_lock: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<(), StartFailure> {
    let host_key_file = host_key_file(log_path);
    let _ = std::fs::remove_file(&host_key_file);
    let failed = |e: io::Error| StartFailure::Failed(format!("cannot start ssh: {e}"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(log_path)
        .map_err(failed)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(log_path, std::fs::Permissions::from_mode(0o600)).map_err(failed)?;
    let marker = log_path.with_extension("prompt");
    let _ = std::fs::remove_file(&marker);
    let mut cmd = tokio::process::Command::new("ssh");
    cmd.envs(askpass::env(&marker, askpass_lock));
    let (var, file) = super::host_key::report_env(&host_key_file);
    cmd.env(var, file);
    if let Some(agent) = super::agent::for_master().await {
        cmd.env(super::agent::VAR, agent);
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(failed)?)
        .stderr(log)
        .kill_on_drop(true);
    #[cfg(target_os = "linux")]
    let daemon = nix::unistd::getpid();
    // SAFETY: setsid, prctl and getppid are async-signal-safe and touch no memory of the
    // parent.
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setsid().map_err(io::Error::from)?;
            // A daemon killed while ssh authenticates must not leave a master nothing owns:
            // the foreground ssh dies with it. The master it forks once authenticated (`-f`)
            // does not inherit this, and outlives the daemon as sessions do.
            #[cfg(target_os = "linux")]
            {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(io::Error::from)?;
                if nix::unistd::getppid() != daemon {
                    return Err(io::Error::other("the daemon is gone"));
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(failed)?;
    // Declared after the child, so dropped before it: the group still has its leader.
    let group = GroupGuard(child.id());
    let status = tokio::select! {
        s = child.wait() => s.map_err(failed)?,
        _ = tokio::time::sleep(timeout) => {
            return Err(StartFailure::Failed("the connection timed out".into()));
        }
        _ = cancel.cancelled() => return Err(StartFailure::Cancelled),
    };
    // ssh is gone: its group may be another's by now, and holds the master on success.
    group.disarm();
    if status.success() {
        return Ok(());
    }
    let stderr = read_tail(log_path);
    let prompt_needed = marker.exists();
    Err(StartFailure::Failed(classify(
        &stderr,
        prompt_needed,
        status.code(),
    )))
}

/// The process group of an ssh still running (the foreground ssh and anything it forked: a
/// ProxyCommand, the askpass relay, a `Match exec` command), killed when this is dropped
/// unless disarmed: a start or a resolve given up (out of time, or its caller cancelled or
/// gone, which drops it mid-way) leaves nothing behind.
struct GroupGuard(Option<u32>);

impl GroupGuard {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take().and_then(|pid| i32::try_from(pid).ok()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The end of the master's log, enough to recognise its last words.
fn read_tail(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let start = bytes.len().saturating_sub(16 * 1024);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

/// Maps OpenSSH's stderr (and whether the askpass probe saw a prompt) to a short status: the
/// raw text never leaves the daemon. The order matters: an unknown host key under
/// `StrictHostKeyChecking ask` also asks for a prompt, and a declined passphrase prompt is
/// followed by "Permission denied".
pub fn classify(stderr: &str, prompt_needed: bool, status: Option<i32>) -> String {
    let has = |needle: &str| stderr.contains(needle);
    if has("REMOTE HOST IDENTIFICATION HAS CHANGED") {
        "the server's host key has changed; check the server, then fix known_hosts".into()
    } else if has("Host key verification failed") || has("host key is known") {
        "the server's host key is not known; add it to known_hosts first".into()
    } else if prompt_needed || has("read_passphrase: can't open /dev/tty") {
        ASKPASS_MESSAGE.into()
    } else if has("Permission denied") || has("Too many authentication failures") {
        "authentication was refused by the server".into()
    } else if has("Connection refused") {
        "the connection was refused".into()
    } else if has("timed out") {
        "the connection timed out".into()
    } else if has("Could not resolve hostname") || has("Name or service not known") {
        NOT_RESOLVED.into()
    } else {
        match status {
            Some(code) => format!("the ssh master exited with status {code}"),
            None => "the ssh master was killed by a signal".into(),
        }
    }
}

/// Stops a master: asks it over the control socket, then makes sure through its process
/// (TERM with CONT, so a stopped master can act on it, then KILL). Signals go only to the
/// process the master was when it came up, never to whatever now has its pid.
pub async fn stop(control_path: &Path, master: Option<ProcessId>) {
    // A live master answers at once; a stopped one would hold us for the whole exchange bound.
    let asked = matches!(
        tokio::time::timeout(STOP_ASK, mux::terminate(control_path)).await,
        Ok(Ok(()))
    );
    if let Some(master) = master
        && !(asked && master.exited_within(STOP_WAIT).await)
    {
        master.signal(Signal::SIGTERM);
        master.signal(Signal::SIGCONT);
        if !master.exited_within(STOP_WAIT).await {
            master.signal(Signal::SIGKILL);
            master.exited_within(STOP_WAIT).await;
        }
    }
    let _ = std::fs::remove_file(control_path);
}

/// How long a master may take to answer the request to exit.
const STOP_ASK: Duration = Duration::from_secs(1);
/// How long a master may take to exit after each request or signal.
const STOP_WAIT: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fractional_connect_timeout_is_rounded_up_for_ssh() {
        let target = ConnectTarget::Alias {
            alias: "box".into(),
        };
        for (secs, option) in [(1.0, "ConnectTimeout=1"), (1.9, "ConnectTimeout=2")] {
            let args = master_args(
                None,
                Path::new("/r/m/s1"),
                &target,
                false,
                None,
                Duration::from_secs_f64(secs),
                None,
            );
            assert!(args.iter().any(|a| a == option), "{secs}: {args:?}");
        }
    }

    #[test]
    fn master_argv() {
        let target = ConnectTarget::Alias {
            alias: "box".into(),
        };
        let args = master_args(
            Some(Path::new("/c")),
            Path::new("/r/m/s1"),
            &target,
            true,
            Some("aes128-gcm@openssh.com,aes128-ctr"),
            Duration::from_secs(30),
            Some("KnownHostsCommand=\"/bin/sshmcpd\" --host-key-report %I %t %K".into()),
        );
        let args: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let joined = args.join(" ");
        assert!(
            joined.starts_with("-F /c -M -S /r/m/s1 -o ControlMaster=yes"),
            "{joined}"
        );
        assert!(joined.contains("-o ConnectTimeout=30"));
        assert!(joined.contains("ServerAliveInterval=15"));
        assert!(joined.contains(
            "-o Ciphers=aes128-gcm@openssh.com,aes128-ctr \
             -o KnownHostsCommand=\"/bin/sshmcpd\" --host-key-report %I %t %K -N"
        ));
        assert!(joined.ends_with("-N -f -- box"), "{joined}");
    }

    #[test]
    fn failure_classes() {
        assert!(
            classify("Host key verification failed.\r\n", true, Some(255)).contains("not known")
        );
        assert!(
            classify(
                "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@",
                false,
                Some(255)
            )
            .contains("changed")
        );
        let denied = "u@h: Permission denied (publickey).";
        assert_eq!(classify(denied, true, Some(255)), ASKPASS_MESSAGE);
        assert!(classify(denied, false, Some(255)).contains("refused"));
        assert!(
            classify(
                "ssh: connect to host 127.0.0.1 port 1: Connection refused",
                false,
                Some(255)
            )
            .contains("connection was refused")
        );
        assert!(
            classify(
                "ssh: Could not resolve hostname x: Name or service not known",
                false,
                Some(255)
            )
            .contains("resolved")
        );
        assert_eq!(
            classify("weird secret text", false, Some(3)),
            "the ssh master exited with status 3"
        );
    }
}
