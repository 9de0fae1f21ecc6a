//! Churn: many MCP clients connecting, running a command and disconnecting in a loop, and the
//! daemon's footprint (descriptors, child processes, masters, memory) before and after. Used
//! by the churn test (short) and `examples/churn.rs` (the figures in docs/reliability.md).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::TestEnv;
use crate::mcp::session_of;
use crate::process::status_kib;

/// What the daemon holds at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Open descriptors.
    pub fds: usize,
    /// Processes whose parent is the daemon, zombies included (an unreaped child is a leak).
    pub children: usize,
    /// Live ssh masters of this daemon.
    pub masters: usize,
    /// Resident memory, KiB.
    pub rss_kib: u64,
}

impl Footprint {
    /// The daemon's footprint now.
    pub fn of(env: &TestEnv) -> Self {
        let pid = env.daemon_pid().expect("a running daemon");
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count();
        let parent = format!("PPid:\t{pid}\n");
        let children = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("status")).ok())
            .filter(|status| status.contains(&parent))
            .count();
        let masters_dir = env.runtime_dir.join("m").display().to_string();
        let masters = crate::process::count_matching(&[&masters_dir]);
        Self {
            fds,
            children,
            masters,
            rss_kib: status_kib(pid, "VmRSS"),
        }
    }

    /// Waits (up to 10 s) until descriptors, children and masters are back to `baseline`'s:
    /// a closed client's connection is torn down a moment after the client exits.
    pub async fn settle_to(env: &TestEnv, baseline: Footprint) -> Self {
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            let now = Self::of(env);
            let settled = now.fds <= baseline.fds
                && now.children <= baseline.children
                && now.masters <= baseline.masters;
            if settled || Instant::now() >= give_up {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// What a churn run did.
#[derive(Debug, Clone, Copy)]
pub struct ChurnReport {
    /// Connect + exec + disconnect cycles completed.
    pub cycles: u64,
    /// Cycles in which any call did not answer as expected.
    pub failures: u64,
    pub elapsed: Duration,
}

/// `clients` MCP clients, client `i` on sshd port `i`, each cycling connect → `echo` →
/// disconnect until `until` (or `cycles` times, whichever comes first).
pub async fn churn(env: &TestEnv, clients: usize, cycles: u64, until: Duration) -> ChurnReport {
    assert!(env.sshd.ports.len() >= clients, "one sshd port per client");
    let started = Instant::now();
    let deadline = started + until;
    let mut tasks = Vec::new();
    for i in 0..clients {
        let mcp = env.mcp().await;
        let target = json!({"host": "127.0.0.1", "user": env.sshd.user,
                            "port": env.sshd.ports[i]});
        tasks.push(tokio::spawn(async move {
            let (mut done, mut failed) = (0u64, 0u64);
            while done < cycles && Instant::now() < deadline {
                let r = mcp.call("connect", target.clone()).await;
                done += 1;
                if r["ok"] != true {
                    failed += 1;
                    continue;
                }
                let s = session_of(&r);
                let args = json!({"session_id": s.0, "session_key": s.1,
                                  "command": format!("echo {i}")});
                let out = mcp.call("exec", args).await;
                let closed = mcp.call("disconnect", json!({"session_id": s.0})).await;
                if crate::mcp::text(&out["stdout"]) != format!("{i}\n")
                    || closed["state"] != "closed"
                {
                    failed += 1;
                }
            }
            mcp.close().await;
            (done, failed)
        }));
    }
    let (mut cycles_done, mut failures) = (0, 0);
    for task in tasks {
        let (done, failed) = task.await.expect("client task");
        cycles_done += done;
        failures += failed;
    }
    ChurnReport {
        cycles: cycles_done,
        failures,
        elapsed: started.elapsed(),
    }
}
