//! Figures of long work (docs/benchmarks.md, "Command handles"): what `handoff_after` costs a
//! quick `exec`, how fast a handle's complete output pages back through `command_status`,
//! the daemon's memory while a handle prints far more than it could hold, and how often
//! progress notifications come. Real binaries against a throwaway sshd on loopback. Run it
//! with `scripts/perf-handles.sh` (release build). A measurement, never a test.
#![allow(clippy::too_many_lines)] // A test scenario reads as one story.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sshmcp_tests::McpClient;
use sshmcp_tests::churn::Footprint;
use sshmcp_tests::mcp::call_ok as call;
use sshmcp_tests::process::status_kib;
use sshmcp_tests::{SshdOptions, TestEnv};

const WARMUP: usize = 20;
const QUICK: usize = 200;
const PAGED_BYTES: u64 = 50 << 20;
const FLOOD_BYTES: u64 = 1 << 30;

fn median_ms(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1000.0
}

/// Median of `QUICK` sequential `exec true` calls with `extra` arguments.
async fn quick_median(mcp: &McpClient, s: &(String, String), extra: Value) -> f64 {
    let mut args = json!({"command": "true"});
    args.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    for _ in 0..WARMUP {
        call(mcp, s, "exec", args.clone()).await;
    }
    let mut samples = Vec::new();
    for _ in 0..QUICK {
        let t = Instant::now();
        call(mcp, s, "exec", args.clone()).await;
        samples.push(t.elapsed());
    }
    median_ms(samples)
}

#[tokio::main]
async fn main() {
    let env = TestEnv::with(&SshdOptions::default(), &[("SSHMCP_LOG", "warn")]);
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    let s = sshmcp_tests::mcp::session_of(&r);

    let plain = quick_median(&mcp, &s, json!({})).await;
    let handoff = quick_median(&mcp, &s, json!({"handoff_after": 60})).await;
    println!("exec `true`, median of {QUICK}: {plain:.2} ms; with handoff_after: {handoff:.2} ms");

    // Paging: the whole output back through next_offset, in pieces of the output cap.
    let command = format!("head -c {PAGED_BYTES} /dev/zero | tr '\\0' x");
    let t = Instant::now();
    let h = call(&mcp, &s, "command_start", json!({"command": command})).await;
    let (mut offset, mut calls) = (0u64, 0u32);
    loop {
        let args = json!({"handle_id": h["handle_id"], "stdout_offset": offset,
                          "wait_seconds": 1});
        let r = call(&mcp, &s, "command_status", args).await;
        calls += 1;
        offset = r["stdout"]["next_offset"].as_u64().unwrap();
        if r["status"] != "running" && offset == r["stdout"]["total_bytes"].as_u64().unwrap() {
            break;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(offset, PAGED_BYTES);
    println!(
        "50 MiB paged back: {secs:.2} s in {calls} command_status calls ({:.0} MiB/s)",
        PAGED_BYTES as f64 / (1 << 20) as f64 / secs
    );

    // Memory: a handle printing 1 GiB; the daemon's resident size sampled as it runs.
    let before = Footprint::of(&env).rss_kib;
    let command = format!("head -c {FLOOD_BYTES} /dev/zero | tr '\\0' x");
    let t = Instant::now();
    let h = call(&mcp, &s, "command_start", json!({"command": command})).await;
    let pid = env.daemon_pid().unwrap();
    let mut peak = before;
    loop {
        let args = json!({"handle_id": h["handle_id"], "max_bytes": 1, "wait_seconds": 0.2});
        let r = call(&mcp, &s, "command_status", args).await;
        peak = peak.max(status_kib(pid, "VmRSS"));
        if r["status"] != "running" {
            assert_eq!(r["stdout"]["total_bytes"], FLOOD_BYTES);
            break;
        }
    }
    println!(
        "1 GiB through a handle: {:.2} s; daemon RSS {} KiB before, {} KiB at most while it ran",
        t.elapsed().as_secs_f64(),
        before,
        peak
    );
    call(
        &mcp,
        &s,
        "command_kill",
        json!({"handle_id": h["handle_id"]}),
    )
    .await;

    // Progress: a 10 s command with a token; the gaps between notifications.
    let args = json!({"session_id": s.0, "session_key": s.1,
                      "command": "for i in 1 2 3 4 5 6 7 8 9 10; do echo $i; sleep 1; done"});
    let t = Instant::now();
    mcp.call_with_progress("exec", args, "bench").await;
    let total = t.elapsed().as_secs_f64();
    let notes = mcp.progress_of("bench").len();
    println!("progress: {notes} notifications during a {total:.1} s exec");
    mcp.close().await;
}
