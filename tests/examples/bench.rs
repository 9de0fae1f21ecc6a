//! Exec round-trip latency through the whole stack (MCP client → sshmcp-mcp → sshmcpd →
//! native mux → sshd) against `ssh -S CTL host true` on the same master in the same run,
//! calls/s with 8 concurrent callers on one session, and the daemon's idle memory. Run with `scripts/bench.sh` (release build); figures go to
//! docs/benchmarks.md.

use std::time::{Duration, Instant};

use serde_json::json;
use sshmcp_tests::TestEnv;

const WARMUP: usize = 20;
const RUNS: usize = 300;
const CALLERS: usize = 8;
const CALLS_EACH: usize = 50;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn summary(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "| {name} | {} | {:.2} | {:.2} | {:.2} |",
        samples.len(),
        ms(percentile(&samples, 50.0)),
        ms(percentile(&samples, 90.0)),
        ms(percentile(&samples, 99.0)),
    );
}

#[tokio::main]
async fn main() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let r = mcp.call("session_list", json!({})).await;
    assert_eq!(r["ok"], true);
    let pid = env.daemon_pid().unwrap();
    let idle_empty = sshmcp_tests::process::status_kib(pid, "VmRSS");
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    let (id, key) = (
        r["session_id"].as_str().unwrap(),
        r["session_key"].as_str().unwrap(),
    );
    let args = json!({"session_id": id, "session_key": key, "command": "true"});

    let mut mcp_samples = Vec::new();
    for i in 0..WARMUP + RUNS {
        let t = Instant::now();
        let r = mcp.call("exec", args.clone()).await;
        let elapsed = t.elapsed();
        assert_eq!(r["exit_code"], 0, "{r}");
        if i >= WARMUP {
            mcp_samples.push(elapsed);
        }
    }

    let control = env.runtime_dir.join("m").join(id);
    let mut ssh_samples = Vec::new();
    for i in 0..WARMUP + RUNS {
        let t = Instant::now();
        let status = std::process::Command::new("ssh")
            .args(["-F", "/dev/null", "-S"])
            .arg(&control)
            .args(["host", "true"])
            .stdin(std::process::Stdio::null())
            .status()
            .unwrap();
        let elapsed = t.elapsed();
        assert!(status.success());
        if i >= WARMUP {
            ssh_samples.push(elapsed);
        }
    }
    let idle_session = sshmcp_tests::process::status_kib(pid, "VmRSS");

    // 8 callers at once on the one session, 50 calls each, all through the one MCP client.
    let mcp = std::sync::Arc::new(mcp);
    let t = Instant::now();
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (mcp, args) = (mcp.clone(), args.clone());
            tokio::spawn(async move {
                let mut failed = 0;
                for _ in 0..CALLS_EACH {
                    if mcp.call("exec", args.clone()).await["exit_code"] != 0 {
                        failed += 1;
                    }
                }
                failed
            })
        })
        .collect();
    let mut failed = 0;
    for caller in callers {
        failed += caller.await.unwrap();
    }
    let concurrent = t.elapsed();

    println!("| path | runs | median ms | p90 ms | p99 ms |");
    println!("|---|---|---|---|---|");
    summary(
        "`exec true` through MCP (sshmcp-mcp → sshmcpd → mux)",
        mcp_samples,
    );
    summary("`ssh -S CTL host true` (fork + exec of ssh)", ssh_samples);
    println!();
    println!();
    let calls = CALLERS * CALLS_EACH;
    println!(
        "{CALLERS} callers × {CALLS_EACH} `exec true`: {:.0} calls/s, {failed} failed",
        calls as f64 / concurrent.as_secs_f64()
    );
    println!(
        "daemon RSS: {idle_empty} KiB idle without sessions, {idle_session} KiB with one idle session after the runs"
    );
    mcp.call("disconnect", json!({"session_id": id})).await;
    if let Ok(mcp) = std::sync::Arc::try_unwrap(mcp) {
        mcp.close().await;
    }
}
