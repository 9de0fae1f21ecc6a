//! Figures of transfers (docs/benchmarks.md, "Transfers"): a 1 GiB file each way through
//! `upload_start` / `download_start`, verification and publishing included, against raw
//! `rsync -e "ssh -S <the session's master>"` of the same file in the same run. Real binaries
//! against a throwaway sshd on loopback. Run it with `scripts/perf-transfers.sh` (release
//! build). A measurement, never a test.
#![allow(clippy::too_many_lines)] // A test scenario reads as one story.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sshmcp_tests::McpClient;
use sshmcp_tests::bench::{in_turn, judged_at_least};
use sshmcp_tests::mcp::call_ok as call;
use sshmcp_tests::{SshdOptions, TestEnv};

const FILE_BYTES: u64 = 1 << 30;
/// Counted rounds, after one that is not: an even number, so each side goes first as often.
const RUNS: usize = 6;

/// Wall seconds and the machine's busy core-seconds (every process: both ends of the copy,
/// the hashes, ssh and sshd share the one machine).
#[derive(Clone, Copy)]
struct Cost {
    wall: f64,
    cpu: f64,
}

/// The machine's busy CPU time so far, in core-seconds, from `/proc/stat`.
fn busy_core_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let ticks: Vec<f64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|t| t.parse().unwrap())
        .collect();
    // user nice system idle iowait irq softirq steal: idle and iowait are not work.
    let busy: f64 = ticks.iter().take(8).sum::<f64>() - ticks[3] - ticks[4];
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100);
    busy / hz as f64
}

/// Runs `work` and returns what it cost, with what it returned. The page cache is written
/// back first, so a copy does not pay for the writeback of the GiB the one before it wrote.
async fn costed<T, F: std::future::Future<Output = T>>(work: F) -> (Cost, T) {
    nix::unistd::sync();
    let (cpu, t) = (busy_core_seconds(), Instant::now());
    let out = work.await;
    let cost = Cost {
        wall: t.elapsed().as_secs_f64(),
        cpu: busy_core_seconds() - cpu,
    };
    (cost, out)
}

/// One transfer through the MCP server, from its start to `completed`; its operation id.
async fn through_sshmcp(mcp: &McpClient, s: &(String, String), tool: &str, args: Value) -> String {
    let r = call(mcp, s, tool, args).await;
    let id = r["operation_id"].as_str().unwrap().to_string();
    loop {
        let st = call(mcp, s, "transfer_status", json!({"operation_id": id})).await;
        // Each poll is a call that takes CPU from the copy and the hashes on these two cores:
        // polled as an agent would, seldom while the copy has far to go (at half its `eta`),
        // every 10 ms near its end, and every 25 ms while it is verified (about 0.75 s).
        let pause = match st["eta"].as_f64() {
            Some(eta) => (eta / 2.0).clamp(0.01, 0.25),
            None if st["state"] == "verifying" => 0.025,
            None => 0.01,
        };
        match st["state"].as_str().unwrap() {
            "completed" => return id,
            "queued" | "running" | "verifying" => {
                tokio::time::sleep(Duration::from_secs_f64(pause)).await
            }
            _ => panic!("the transfer did not complete: {st}"),
        }
    }
}

/// One raw rsync over the session's master, from `from` to `to`.
async fn raw_rsync(shell: &str, from: &str, to: &str) {
    let status = tokio::process::Command::new("rsync")
        .args(["-s", "--inplace", "-e", shell, from, to])
        .status()
        .await
        .unwrap();
    assert!(status.success());
}

/// The control socket of the one session's master.
fn control_socket(env: &TestEnv) -> PathBuf {
    let dir = env.runtime_dir.join("m");
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            use std::os::unix::fs::FileTypeExt;
            std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket())
        })
        .expect("the master's socket")
}

/// One direction's counted copies: sshmcp's, with their operation ids (to find each one in
/// the daemon's log), and raw rsync's.
#[derive(Default)]
struct Copies {
    ours: Vec<Cost>,
    raw: Vec<Cost>,
    ids: Vec<String>,
}

impl Copies {
    /// Keeps one round's pair of copies, unless it is round 0: a run's first copies are slower
    /// on both sides.
    fn keep(&mut self, round: usize, ((ours, id), (raw, ())): ((Cost, String), (Cost, ()))) {
        if round > 0 {
            self.ours.push(ours);
            self.raw.push(raw);
            self.ids.push(id);
        }
    }
}

/// What the daemon's log says of operation `id`: the seconds of its copy and of its
/// verification.
fn account(log: &str, id: &str) -> Option<(f64, f64)> {
    let line = log
        .lines()
        .find(|l| l.contains(&format!("transfer {id}: copied in ")))?;
    let seconds_after =
        |label: &str| -> Option<f64> { line.split(label).nth(1)?.split(' ').next()?.parse().ok() };
    Some((seconds_after("copied in ")?, seconds_after("verified in ")?))
}

/// The run of median wall time.
fn median(mut v: Vec<Cost>) -> Cost {
    v.sort_by(|a, b| a.wall.total_cmp(&b.wall));
    v[v.len() / 2]
}

fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

#[tokio::main]
async fn main() {
    let env = TestEnv::with(
        &SshdOptions::default(),
        &[("SSHMCP_LOG", "warn,sshmcpd::transfers=info")],
    );
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    let s = sshmcp_tests::mcp::session_of(&r);
    let shell = format!(
        "ssh -F /dev/null -S {} -o ControlMaster=no -o HostName=127.0.0.1 -o Port={}",
        control_socket(&env).display(),
        env.sshd.port
    );
    std::fs::create_dir_all(&env.local_root).unwrap();
    let source = env.local_root.join("bench.bin");
    std::fs::File::create(&source)
        .unwrap()
        .set_len(FILE_BYTES)
        .unwrap();
    sshmcp_tests::process::run(
        std::process::Command::new("shred")
            .args(["-n", "1"])
            .arg(&source),
        "coreutils",
    );
    let remote_dir = std::env::temp_dir().join(format!("sshmcp-bench-{}", std::process::id()));
    call(
        &mcp,
        &s,
        "exec",
        json!({"command": format!("mkdir -p {}", remote_dir.display())}),
    )
    .await;
    let remote = remote_dir.join("bench.bin");
    let raw_remote = remote_dir.join("raw.bin");
    let down = env.local_root.join("down.bin");
    let raw_down = env.local_root.join("raw-down.bin");
    let (mut up, mut dl) = (Copies::default(), Copies::default());
    let (source_arg, raw_remote_arg) = (
        source.display().to_string(),
        format!("sshmcp:{}", raw_remote.display()),
    );
    let (remote_arg, raw_down_arg) = (
        format!("sshmcp:{}", remote.display()),
        raw_down.display().to_string(),
    );
    for round in 0..=RUNS {
        remove(&remote);
        remove(&raw_remote);
        remove(&down);
        remove(&raw_down);
        let upload = in_turn(
            round,
            costed(through_sshmcp(
                &mcp,
                &s,
                "upload_start",
                json!({"local_path": "bench.bin", "remote_path": remote.display().to_string()}),
            )),
            costed(raw_rsync(&shell, &source_arg, &raw_remote_arg)),
        );
        up.keep(round, upload.await);
        // The download's source is sshmcp's upload, there in every round by now.
        let download = in_turn(
            round,
            costed(through_sshmcp(
                &mcp,
                &s,
                "download_start",
                json!({"remote_path": remote.display().to_string(), "local_path": "down.bin"}),
            )),
            costed(raw_rsync(&shell, &remote_arg, &raw_down_arg)),
        );
        dl.keep(round, download.await);
    }
    let gib = FILE_BYTES as f64 / (1u64 << 30) as f64;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let walls = |v: &[Cost]| format!("{:.2?}", v.iter().map(|c| c.wall).collect::<Vec<_>>());
    let log = env.daemon_log();
    for (what, Copies { ours, raw, ids }) in [("upload", up), ("download", dl)] {
        let (o, r) = (median(ours.clone()), median(raw.clone()));
        let (ratio, verdict) = judged_at_least(r.wall / o.wall, 0.8);
        println!(
            "1 GiB {what}: sshmcp {:.2} s ({:.0} MiB/s, verified), raw rsync {:.2} s; \
             ratio raw/sshmcp {}, goal ≥ 0.8×: {} (runs: sshmcp {}, raw {})",
            o.wall,
            gib * 1024.0 / o.wall,
            r.wall,
            ratio,
            verdict,
            walls(&ours),
            walls(&raw),
        );
        // However the verification were scheduled, the work it adds has to run on the same
        // cores: the machine cannot finish sooner than its busy core-seconds over its cores.
        let floor = (o.cpu / cores).max(r.wall);
        println!(
            "  CPU, both ends on this machine's {cores} cores: sshmcp {:.2} core-s, raw rsync \
             {:.2} core-s ({:.0} % of the cores busy during the raw copy); with every idle \
             moment filled, sshmcp could not end before {floor:.2} s: best ratio {:.2}",
            o.cpu,
            r.cpu,
            100.0 * r.cpu / (r.wall * cores),
            r.wall / floor,
        );
        // The daemon's own account of each counted copy: the copy, then the verification,
        // which reads the finished copy back, so it follows the copy however fast that is.
        let accounts: Vec<(f64, f64)> = ids.iter().filter_map(|id| account(&log, id)).collect();
        let (mut copies, mut checks): (Vec<f64>, Vec<f64>) = accounts.into_iter().unzip();
        if !checks.is_empty() {
            println!(
                "  the daemon's account: copied in {copies:.2?} s, verified in {checks:.2?} s"
            );
            copies.sort_by(f64::total_cmp);
            checks.sort_by(f64::total_cmp);
            let (copy, check) = (copies[copies.len() / 2], checks[checks.len() / 2]);
            println!(
                "  medians: copy {copy:.2} s ({:.2}× raw rsync's time), verification {check:.2} s: \
                 with a copy as fast as raw rsync's, the best ratio is {:.2}",
                copy / r.wall,
                r.wall / (r.wall + check),
            );
        }
    }
    call(
        &mcp,
        &s,
        "exec",
        json!({"command": format!("rm -rf {}", remote_dir.display())}),
    )
    .await;
    mcp.close().await;
}
