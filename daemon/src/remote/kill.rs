//! Ending a remote process group: a small program run through the same building block (so
//! the login shell's noise cannot garble its answer) that sends TERM, gives the group a second
//! to go, then sends KILL, and says which signal ended it. A kill is tried again until its
//! answer confirms the group gone, or the master is: a slow login shell, a busy master or a
//! master stopped for a while delay it, they do not cancel it.

use std::time::Duration;

use futures::future::BoxFuture;

use super::{Host, Program};

/// How long one kill attempt may take, from asking for a channel to its answer.
pub const KILL_BUDGET: Duration = Duration::from_secs(4);
/// How long attempts go on before the group is reported as not confirmed gone.
const KILL_RETRY_WINDOW: Duration = Duration::from_secs(120);
/// The pause between attempts.
const KILL_RETRY_PAUSE: Duration = Duration::from_millis(250);

/// Shell functions for process group `$g`: `_gkill SIGNAL` sends SIGNAL (`-0`, `-TERM`,
/// `-15`, ...) to it, and `alive` says whether it still has a live process. Most shells take
/// the group right after the signal, but posh needs `--` before it: `_gkill` puts
/// [`GROUP_OPTION`]'s `$_sshmcp_k` there, which a program sets first. A group counts as gone when only zombies are left in it (where
/// /proc exists): in containers whose init does not reap, a killed process lingers as a
/// zombie and `kill -0` still finds it. A group `kill -0` cannot signal may still hold
/// another user's processes (a command that ran `sudo`): where /proc exists it decides. A live leader answers at once; only a group whose
/// leader is gone or a zombie costs a scan of /proc, which on a busy host takes a good part
/// of a second.
pub const GROUP_ALIVE: &str = include_str!("group_alive.sh");

/// Sets `_sshmcp_k` to what `kill` needs before a negative number, a process group: `--`
/// where the shell takes it, nothing where it does not (dash's `kill` refuses `--`). A shell
/// without a `kill` of its own (posh) runs procps' `kill`, which misreads a group without it:
/// `kill -TERM -12345` signals group 1, every process the user may signal, and its status
/// says nothing sure. So the shell is asked first, with its own PID. The kill programs'
/// tests under posh fail without it.
pub const GROUP_OPTION: &str =
    "if command kill -0 -- $$ 2>/dev/null; then _sshmcp_k=--; else _sshmcp_k=; fi";

/// The kill of process group `$g`: TERM, a second for the group to go, then KILL. CONT
/// follows TERM so a stopped group can act on it. The second is measured by a `sleep`, not
/// by turns of the check, which on a busy host takes a good part of a second.
const KILL_GROUP: &str = include_str!("kill_group.sh");

/// The kill program for process group `pgid`.
pub fn kill_script(pgid: u32) -> String {
    format!("g={pgid}\n{GROUP_OPTION}\n{GROUP_ALIVE}{KILL_GROUP}")
}

/// How a kill ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Killed {
    /// The group is gone; this signal ended it (`TERM` or `KILL`).
    By(String),
    /// The group was gone before any signal.
    AlreadyGone,
    /// No attempt could confirm it: the master is gone, or the retry window passed.
    Unconfirmed,
}

impl Killed {
    /// The signal name an answer reports.
    pub fn signal(&self) -> Option<String> {
        match self {
            Self::By(signal) => Some(signal.clone()),
            Self::AlreadyGone | Self::Unconfirmed => None,
        }
    }
}

/// The program that runs the kill as root, for groups holding root processes: the kill script
/// on the stdin of the one program the sudo rule allows (the user cannot signal them).
pub const AS_ROOT: &str = "sudo -n -k /bin/bash --noprofile --norc -s";

/// Ends process group `pgid` on `host`, trying again until the group or the master is
/// confirmed gone; `as_root` runs the kill through sudo. Boxed: a run starts kills, and a kill
/// is a run.
pub fn kill_group(host: Host, pgid: u32, as_root: bool) -> BoxFuture<'static, Killed> {
    Box::pin(async move {
        if as_root && let Some(killed) = attempt(&host, pgid, true).await {
            return killed;
        }
        // Not as root (or sudo refused the root kill): the user's own kill, retried.
        let give_up = tokio::time::Instant::now() + KILL_RETRY_WINDOW;
        loop {
            if let Some(killed) = attempt(&host, pgid, false).await {
                return killed;
            }
            if host.master_gone() || tokio::time::Instant::now() >= give_up {
                tracing::warn!(pgid, "could not confirm the end of a remote process group");
                return Killed::Unconfirmed;
            }
            tokio::time::sleep(KILL_RETRY_PAUSE).await;
        }
    })
}

/// A control program (it skips the channel queue) running `script` with a short answer, as
/// root through the sudo rule when `as_root`.
pub fn control_program(script: String, as_root: bool, timeout: Duration) -> Program {
    let mut program = match as_root {
        true => {
            let mut p = Program::new(AS_ROOT, timeout, 64);
            p.stdin = Some(script.into_bytes());
            // It runs root processes: its channel is not kept after it (see `job`).
            p.kill_as_root = true;
            p
        }
        false => Program::new(script, timeout, 64),
    };
    program.control = true;
    program
}

/// One kill attempt; None when it gave no answer (no channel, or sudo refused).
async fn attempt(host: &Host, pgid: u32, as_root: bool) -> Option<Killed> {
    let program = control_program(kill_script(pgid), as_root, KILL_BUDGET);
    let result = super::run(host, program).await.ok()?;
    match String::from_utf8_lossy(&result.stdout.bytes).trim() {
        "GONE" => Some(Killed::AlreadyGone),
        signal @ ("TERM" | "KILL") => Some(Killed::By(signal.to_string())),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A local process group running `body`, once `body` printed its first line (a trap set,
    /// a child started).
    pub(crate) fn ready_group(body: &str) -> std::process::Child {
        use std::io::{BufRead, BufReader};
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(body)
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut ready = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut ready)
            .unwrap();
        child
    }

    /// The script against a real local process group, under every shell a host may have as
    /// `/bin/sh`: a sleeping group ends on TERM, one that ignores TERM ends on KILL, and a
    /// group that is gone gets no signal at all.
    #[test]
    fn kills_a_local_group() {
        let shells = crate::programs::Shells::new();
        for (shell, path) in shells.each() {
            let home = tempfile::tempdir().unwrap();
            let run_kill = |pgid: u32| {
                crate::programs::run_under(&shell, &path, home.path(), &kill_script(pgid), b"")
            };
            for (body, expected) in [
                ("sleep 30 & echo ready; wait", "TERM\n"),
                ("trap '' TERM; sleep 30 & echo ready; wait", "KILL\n"),
            ] {
                let mut child = ready_group(body);
                assert_eq!(run_kill(child.id()), expected, "{shell:?}: {body}");
                child.wait().unwrap();
            }
            assert_eq!(
                run_kill(crate::programs::NO_SUCH_GROUP),
                "GONE\n",
                "{shell:?}"
            );
        }
    }
}
