//! Figures of transfers (docs/benchmarks.md, "Transfers"): a 1 GiB file each way through
//! `upload_start` / `download_start`, verification and publishing included, against raw
//! `rsync -e "ssh -S <the session's master>"` of the same file in the same run. Real binaries
//! against a throwaway sshd on loopback. Run it with `scripts/perf-transfers.sh` (release
//! build). A measurement, never a test.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sshmcp_tests::McpClient;
use sshmcp_tests::mcp::call_ok as call;
use sshmcp_tests::{SshdOptions, TestEnv};

const FILE_BYTES: u64 = 1 << 30;
const RUNS: usize = 5;

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

/// Runs `work` and returns what it cost. The page cache is written back first: otherwise the
/// copy before leaves a GiB of dirty pages whose writeback lands in this one's time, and the
/// copies' times vary by a factor of three.
async fn costed<F: std::future::Future<Output = ()>>(work: F) -> Cost {
    nix::unistd::sync();
    let (cpu, t) = (busy_core_seconds(), Instant::now());
    work.await;
    Cost {
        wall: t.elapsed().as_secs_f64(),
        cpu: busy_core_seconds() - cpu,
    }
}

/// One transfer through the MCP server, from its start to `completed`.
async fn through_sshmcp(mcp: &McpClient, s: &(String, String), tool: &str, args: Value) {
    let r = call(mcp, s, tool, args).await;
    loop {
        let st = call(
            mcp,
            s,
            "transfer_status",
            json!({"operation_id": r["operation_id"]}),
        )
        .await;
        // Each poll is a call that takes CPU from the copy on these two cores: polled as an
        // agent would, seldom while the copy has far to go, and then every 10 ms.
        let eta = st["eta"].as_f64().unwrap_or(0.0);
        let pause = Duration::from_secs_f64((eta / 2.0).clamp(0.01, 0.25));
        match st["state"].as_str().unwrap() {
            "completed" => return,
            "running" | "verifying" => tokio::time::sleep(pause).await,
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
    let (mut up, mut up_raw, mut dl, mut dl_raw) = (vec![], vec![], vec![], vec![]);
    // rsync's arguments: the upload's source and target, the download's source and target.
    let raw_args = [
        source.display().to_string(),
        format!("sshmcp:{}", raw_remote.display()),
        format!("sshmcp:{}", remote.display()),
        raw_down.display().to_string(),
    ];
    for round in 0..RUNS {
        remove(&remote);
        remove(&raw_remote);
        remove(&down);
        remove(&raw_down);
        let upload = costed(through_sshmcp(
            &mcp,
            &s,
            "upload_start",
            json!({"local_path": "bench.bin", "remote_path": remote.display().to_string()}),
        ));
        let raw_upload = costed(raw_rsync(&shell, &raw_args[0], &raw_args[1]));
        // Each goes first every other round, so a drift of the machine favours neither.
        if round % 2 == 0 {
            up.push(upload.await);
            up_raw.push(raw_upload.await);
        } else {
            up_raw.push(raw_upload.await);
            up.push(upload.await);
        }
        // The download's source is sshmcp's upload, there in every round by now.
        let download = costed(through_sshmcp(
            &mcp,
            &s,
            "download_start",
            json!({"remote_path": remote.display().to_string(), "local_path": "down.bin"}),
        ));
        let raw_download = costed(raw_rsync(&shell, &raw_args[2], &raw_args[3]));
        if round % 2 == 0 {
            dl.push(download.await);
            dl_raw.push(raw_download.await);
        } else {
            dl_raw.push(raw_download.await);
            dl.push(download.await);
        }
    }
    let gib = FILE_BYTES as f64 / (1u64 << 30) as f64;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let walls = |v: &[Cost]| format!("{:.2?}", v.iter().map(|c| c.wall).collect::<Vec<_>>());
    let (up_raw_runs, dl_raw_runs) = (up_raw.clone(), dl_raw.clone());
    for (what, ours, raw) in [("upload", up, up_raw), ("download", dl, dl_raw)] {
        let (o, r) = (median(ours.clone()), median(raw.clone()));
        println!(
            "1 GiB {what}: sshmcp {:.2} s ({:.0} MiB/s, verified), raw rsync {:.2} s; \
             ratio raw/sshmcp {:.2}, goal ≥ 0.8×: {} (runs: sshmcp {}, raw {})",
            o.wall,
            gib * 1024.0 / o.wall,
            r.wall,
            r.wall / o.wall,
            if r.wall / o.wall >= 0.8 {
                "met"
            } else {
                "not met"
            },
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
    }
    // The daemon's own account of each transfer: the copy, then what the verification added.
    let log = env.daemon_log();
    let accounts: Vec<&str> = log.lines().filter(|l| l.contains("copied in")).collect();
    for line in &accounts {
        println!("  {}", line.split("transfer ").nth(1).unwrap_or(line));
    }
    // The copy's SHA-256 can only be taken once the copy is whole: however fast the copy, the
    // verification comes after it.
    let mut verifications: Vec<f64> = accounts
        .iter()
        .filter_map(|l| {
            l.split("verified in ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    if !verifications.is_empty() {
        verifications.sort_by(f64::total_cmp);
        let v = verifications[verifications.len() / 2];
        let (up_raw, dl_raw) = (median(up_raw_runs).wall, median(dl_raw_runs).wall);
        println!(
            "  Verification, median {v:.2} s, after the copy: with copies exactly as fast as raw \
             rsync's, the best ratio is {:.2} up, {:.2} down",
            up_raw / (up_raw + v),
            dl_raw / (dl_raw + v),
        );
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
