//! Processes the tests run or look at: running a setup command that must succeed, finding
//! processes by command line or parent, waiting for one to exit, and reading its memory
//! figures.

use std::process::Command;
use std::time::{Duration, Instant};

/// Runs a setup command; panics with its stderr (and `hint`, what to install) when it fails.
pub fn run(cmd: &mut Command, hint: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?} ({hint}): {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How many live processes have a command line containing every one of `needles`
/// (a zombie has an empty command line, so it never counts).
pub fn count_matching(needles: &[&str]) -> usize {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|c| {
            let c = String::from_utf8_lossy(c);
            needles.iter().all(|n| c.contains(n))
        })
        .count()
}

/// The live processes whose environment holds `entry` (`NAME=value`) exactly: what a
/// daemon marks its remote rsync with, where the command line tells nothing.
pub fn with_environment(entry: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let environ = std::fs::read(e.path().join("environ")).ok()?;
            let has = environ.split(|b| *b == 0).any(|v| v == entry.as_bytes());
            (has && any_thread_alive(pid)).then_some(pid)
        })
        .collect()
}

/// Waits (up to 10 s) until `pid` has exited; a zombie counts as exited (its parent may be an
/// init that does not reap). Every thread must be through: the leader turns zombie while the
/// others may still be closing the process's descriptors. Processes we did not start give no
/// exit event to wait on.
pub fn gone(pid: u32) -> bool {
    let give_up = Instant::now() + Duration::from_secs(10);
    while Instant::now() < give_up {
        if !any_thread_alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn any_thread_alive(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit_once(')').is_some_and(|(_, rest)| {
                !matches!(rest.trim_start().chars().next(), Some('Z' | 'X'))
            })
        })
    })
}

/// Waits (up to 10 s) until exactly `count` processes have every one of `needles` in their
/// command lines: a process of the host's that starts or ends gives no event to wait on.
pub async fn until_matching(needles: &[&str], count: usize) -> bool {
    let give_up = Instant::now() + Duration::from_secs(10);
    while count_matching(needles) != count {
        if Instant::now() > give_up {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Every live descendant of `pid` (children, their children, ...): the processes that serve
/// one sshd's connections, which a test stops to play a host that froze.
pub fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| {
            let child: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // The fields after the command name: state, then the parent's PID.
            let (_, rest) = stat.rsplit_once(')')?;
            let parent = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((child, parent))
        })
        .collect();
    let mut found = vec![pid];
    let mut next = 0;
    while next < found.len() {
        let of = found[next];
        found.extend(parents.iter().filter(|(_, p)| *p == of).map(|(c, _)| *c));
        next += 1;
    }
    found.split_off(1)
}

/// A memory figure of `/proc/PID/status` in KiB, e.g. `VmRSS` or `VmHWM` (peak).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("process status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// A sleep length no other test of this run uses (`30.01234567`): run as `sleep <it>`, it is a
/// marker that finds this test's remote processes with `pgrep -f`, never a leftover of
/// another test or an earlier run.
pub fn unique_sleep(secs: u32) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{secs}.{:04}{:04}",
        std::process::id() % 10_000,
        (nanos / 1000 + n) % 10_000
    )
}
