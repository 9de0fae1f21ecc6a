//! Processes on this machine that the daemon did not start as children (each master is forked
//! by `ssh -f`): named by pid and start time, so a pid the kernel has since given to another
//! process is never signalled, and never taken for a live master.

use std::time::Duration;

use nix::sys::signal::Signal;

/// A process as it was when first seen: its pid and its start time (clock ticks since boot,
/// field 22 of `/proc/PID/stat`), which a recycled pid does not share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessId {
    pub pid: u32,
    start_time: u64,
}

impl ProcessId {
    /// The process `pid` now is, if it exists and is not a zombie.
    pub fn of(pid: u32) -> Option<Self> {
        let stat = sshmcp_local::platform::read(pid)?;
        (stat.state != 'Z').then_some(Self {
            pid,
            start_time: stat.start_time,
        })
    }

    /// The process a record named by pid and start time, as it was then: [`alive`] says
    /// whether it still is.
    ///
    /// [`alive`]: ProcessId::alive
    pub fn recorded(pid: u32, start_time: u64) -> Self {
        Self { pid, start_time }
    }

    pub fn start_time(&self) -> u64 {
        self.start_time
    }

    /// Whether this very process still runs (a zombie counts as gone: in containers whose
    /// init does not reap, an exited process lingers as one).
    pub fn alive(&self) -> bool {
        sshmcp_local::platform::read(self.pid)
            .is_some_and(|s| s.start_time == self.start_time && s.state != 'Z')
    }

    /// Whether this process is stopped (by a signal, or a tracer).
    pub fn stopped(&self) -> bool {
        sshmcp_local::platform::read(self.pid)
            .is_some_and(|s| s.start_time == self.start_time && matches!(s.state, 'T' | 't'))
    }

    /// Sends `signal` only if the pid still names this process; says whether it was sent.
    pub fn signal(&self, signal: Signal) -> bool {
        self.alive()
            && nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid as i32), signal).is_ok()
    }

    /// Waits up to `limit` for the process to be gone. It is not our child, so there is no
    /// exit event to wait on: a short poll of /proc is the honest option.
    pub async fn exited_within(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if !self.alive() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_process_is_itself_and_a_recycled_pid_is_not() {
        let me = ProcessId::of(std::process::id()).unwrap();
        assert!(me.alive());
        let impostor = ProcessId {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!impostor.alive());
        assert!(!impostor.signal(Signal::SIGTERM), "never signalled");
    }

    #[tokio::test]
    async fn an_exited_child_is_gone() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let id = ProcessId::of(child.id()).unwrap();
        assert!(id.signal(Signal::SIGKILL));
        // Not reaped yet: a zombie already counts as gone.
        assert!(id.exited_within(Duration::from_secs(5)).await);
        child.wait().unwrap();
        assert!(!id.alive());
    }
}
