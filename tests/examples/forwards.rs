//! Figures of port forwards (docs/benchmarks.md, "Port forwards"): the throughput of a local
//! forward opened with `forward_start` against one opened with `ssh -S <the session's master>
//! -O forward -L` on the same master, and the latency of one request through each (connect,
//! one byte there and back), with a direct connection as the floor. Real binaries against a
//! throwaway sshd on loopback. Run it with `scripts/perf-forwards.sh` (release build). A
//! measurement, never a test.
#![allow(clippy::too_many_lines)] // A test scenario reads as one story.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::json;
use sshmcp_tests::TestEnv;
use sshmcp_tests::bench::{in_turn, judged_at_least};
use sshmcp_tests::mcp::call_ok as call;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const BULK_BYTES: usize = 512 << 20;
/// Rounds of each forward, after one untimed round of each: both are the same master's
/// listener, so only the machine's noise tells them apart, and more rounds narrow it. An even
/// number, so each goes first as often.
const RUNS: usize = 8;
const PINGS: usize = 300;

/// A server that counts what each connection sends until EOF, then answers the count.
async fn sink() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 1 << 16];
                let mut total = 0u64;
                while let Ok(n @ 1..) = stream.read(&mut buf).await {
                    total += n as u64;
                }
                let _ = stream.write_all(&total.to_be_bytes()).await;
            });
        }
    });
    port
}

/// Seconds to push `BULK_BYTES` through `port` until the far end has counted them all.
async fn bulk(port: u16) -> f64 {
    let chunk = vec![0x5au8; 1 << 20];
    let t = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    for _ in 0..BULK_BYTES / chunk.len() {
        stream.write_all(&chunk).await.unwrap();
    }
    stream.shutdown().await.unwrap();
    let mut count = [0u8; 8];
    stream.read_exact(&mut count).await.unwrap();
    assert_eq!(u64::from_be_bytes(count), BULK_BYTES as u64);
    t.elapsed().as_secs_f64()
}

/// Median microseconds of a new connection through `port` and one byte there and back.
async fn latency(port: u16) -> f64 {
    let mut samples = Vec::with_capacity(PINGS);
    for _ in 0..PINGS {
        let t = Instant::now();
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream.set_nodelay(true).unwrap();
        stream.write_all(b"x").await.unwrap();
        let mut b = [0u8; 1];
        stream.read_exact(&mut b).await.unwrap();
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    median(samples)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `ssh -S CTL -O forward -L`: the same master asked by OpenSSH's own client.
fn raw_forward(control: &PathBuf, target: u16) -> u16 {
    let port = free_port();
    let status = std::process::Command::new("ssh")
        .args(["-F", "/dev/null", "-S"])
        .arg(control)
        .args(["-O", "forward", "-L"])
        .arg(format!("127.0.0.1:{port}:127.0.0.1:{target}"))
        .arg("sshmcp")
        .status()
        .unwrap();
    assert!(status.success());
    port
}

#[tokio::main]
async fn main() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    let s = sshmcp_tests::mcp::session_of(&r);
    let control = env.runtime_dir.join("m").join(&s.0);
    let (sink, echo) = (sink().await, sshmcp_tests::echo::echo_server().await);
    let open = |target: u16| {
        call(
            &mcp,
            &s,
            "forward_start",
            json!({"kind": "local", "target_host": "127.0.0.1", "target_port": target}),
        )
    };
    let ours_bulk = open(sink).await["listen_port"].as_u64().unwrap() as u16;
    let ours_ping = open(echo).await["listen_port"].as_u64().unwrap() as u16;
    let raw_bulk = raw_forward(&control, sink);
    let raw_ping = raw_forward(&control, echo);
    bulk(ours_bulk).await;
    bulk(raw_bulk).await;
    let (mut ours, mut raw) = (vec![], vec![]);
    for round in 0..RUNS {
        let (o, r) = in_turn(round, bulk(ours_bulk), bulk(raw_bulk)).await;
        ours.push(o);
        raw.push(r);
    }
    let mib = (BULK_BYTES >> 20) as f64;
    let (o, r) = (median(ours.clone()), median(raw.clone()));
    let (ratio, verdict) = judged_at_least(r / o, 0.9);
    println!(
        "{mib} MiB through a local forward: forward_start {:.0} MiB/s, ssh -O forward -L \
         {:.0} MiB/s; ratio {}, goal ≥ 0.9×: {} (runs: {ours:.2?} s, {raw:.2?} s)",
        mib / o,
        mib / r,
        ratio,
        verdict
    );
    let (ol, rl, direct) = (
        latency(ours_ping).await,
        latency(raw_ping).await,
        latency(echo).await,
    );
    println!(
        "one request (connect, 1 byte there and back), median of {PINGS}: forward_start \
         {ol:.0} µs, ssh -O forward -L {rl:.0} µs, direct {direct:.0} µs"
    );
    mcp.close().await;
}
