//! The side-by-side performance figures of docs/benchmarks.md: sshmcp, fast-mcp-ssh (the
//! fastest peer) and raw OpenSSH against one throwaway sshd on loopback, in one run, with each
//! goal of issue 6 beside its ratio. The figures set against fast-mcp-ssh's are taken in
//! rounds, the two servers taking turns, so both meet the same spells of a machine whose speed
//! drifts. Run it with `scripts/perf.sh` (release build; installs fast-mcp-ssh from crates.io
//! when missing). A measurement, never a test: it fails on nothing.
//!
//! `perf [FAST_MCP_SSH_BINARY]`; without one, fast-mcp-ssh is left out. `SSHMCP_PERF_LOAD`
//! and `SSHMCP_PERF_RING` run one part alone (see `load` and `ring_sets`).
#![allow(clippy::too_many_lines)] // A test scenario reads as one story.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sshmcp_tests::bench::{in_turn, shown_ratio};
use sshmcp_tests::churn::Footprint;
use sshmcp_tests::process::status_kib;
use sshmcp_tests::ring::{Ring, serve_if_member};
use sshmcp_tests::{McpClient, SshdOptions, TestEnv, bins};

const WARMUP: usize = 20;
const SEQUENTIAL: usize = 200;
const CALLERS: usize = 8;
const CALLS_EACH: usize = 50;
/// Runs of the 10 MiB command per server: each takes about 30 ms, and a median of few swings
/// with the machine's noise.
const BIG_RUNS: usize = 16;
/// The rounds in which the servers take turns (see `sequential_in_turn`), even so that each
/// goes first as often: the SEQUENTIAL calls split into 10 of them, the BIG_RUNS into 4.
const SEQUENTIAL_ROUNDS: usize = 10;
const BIG_ROUNDS: usize = 4;
/// Rounds of CALLERS × CALLS_EACH calls on each server in turn, each round all of them.
const CONCURRENT_ROUNDS: usize = 4;
const BIG_BYTES: usize = 10 * 1024 * 1024;
const HUGE_BYTES: u64 = 1 << 30;
/// The contract's default cap on what exec keeps of each stream.
const DEFAULT_CAP_KIB: u64 = 64;
const STARTS: usize = 10;
/// Calls with a pause before each, as an agent makes them.
const PACED: usize = 50;
/// Sessions whose first exec is timed, each beside its next exec after as long a wait.
const FIRSTS: usize = 9;
const PAUSE: Duration = Duration::from_millis(50);
/// Sessions (and server identities) of the wide run, and concurrent execs on each.
const WIDE_SESSIONS: usize = 100;
const WIDE_EXECS: usize = 10;
/// The hand-overs between processes on an `exec`'s way there and back, at the least: the
/// client, the shim, the daemon, the master, sshd and the program's shell there; the runner,
/// sshd, the master, the daemon, the shim and the client back.
const HANDOVERS: usize = 11;
/// Issue 6's bound on the spread of sequential calls: p99 at most this many times the median.
const P99_GOAL: f64 = 1.5;
/// Sets of SEQUENTIAL rounds in the ring-only mode.
const RING_SETS: usize = 20;
/// The ring member in the runner's place: it gets the byte from the program's shell, the
/// fifth member.
const RUNNER_AT: usize = 6;

/// A server under test, as an agent drives it.
#[derive(Clone)]
enum Server {
    Sshmcp { session: (String, String) },
    Fast,
}

impl Server {
    /// Runs `command`; true when it ran and exited 0.
    async fn exec(&self, mcp: &McpClient, command: &str) -> bool {
        match self {
            Self::Sshmcp { session } => {
                let args = json!({"session_id": session.0, "session_key": session.1,
                                  "command": command, "timeout": 120});
                mcp.call("exec", args).await["exit_code"] == 0
            }
            Self::Fast => {
                let args = json!({"host": "bench", "cmd": command});
                let r = mcp
                    .request("tools/call", json!({"name": "exec", "arguments": args}))
                    .await;
                r["result"]["isError"] != true && r["error"].is_null()
            }
        }
    }
}

/// Percentile `p` (0..=100) of sorted samples, in milliseconds.
fn ms(sorted: &[Duration], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1].as_secs_f64() * 1000.0
}

/// The spread the p99 goal judges, of sorted samples.
fn p99_over_median(sorted: &[Duration]) -> f64 {
    ms(sorted, 99.0) / ms(sorted, 50.0)
}

async fn timed<T, F: std::future::Future<Output = T>>(f: F) -> (Duration, T) {
    let t = Instant::now();
    let value = f.await;
    (t.elapsed(), value)
}

/// A session's first exec, sent as soon as its connect answered, and its next exec after
/// `wait` (as long as the connect took): both come after the processes on the path went idle
/// for as long, so the pair compares the session's first command with the rest and nothing
/// else.
async fn first_and_after_wait(
    mcp: &McpClient,
    server: &Server,
    wait: Duration,
) -> (Duration, Duration) {
    let first = timed(server.exec(mcp, "true")).await.0;
    tokio::time::sleep(wait).await;
    (first, timed(server.exec(mcp, "true")).await.0)
}

/// A server under test with the client that drives it.
type Side = (Arc<McpClient>, Server);

/// The order in which `sides` take their turns in `round`: the first one changes every round,
/// so a drift of the machine favours none.
fn turns(sides: &[Side], round: usize) -> impl Iterator<Item = (usize, &Side)> {
    (0..sides.len()).map(move |k| {
        let i = (k + round) % sides.len();
        (i, &sides[i])
    })
}

/// `runs` sequential calls of `command` on each side, after up to WARMUP calls of `true`, in
/// `rounds` rounds of `runs / rounds` calls (`runs` a multiple of `rounds`). The sides take
/// turns, and each turn starts with one uncounted `exec true`, which meets whatever the side
/// before left running: the machine's speed drifts over minutes, and each side's samples come
/// from the same spells. Per side: sorted durations and failures.
async fn sequential_in_turn(
    sides: &[Side],
    command: &str,
    runs: usize,
    rounds: usize,
) -> Vec<(Vec<Duration>, usize)> {
    assert_eq!(
        runs % rounds,
        0,
        "{runs} calls cannot split into {rounds} rounds"
    );
    for (mcp, server) in sides {
        for _ in 0..WARMUP.min(runs) {
            server.exec(mcp, "true").await;
        }
    }
    let mut taken = vec![(Vec::new(), 0); sides.len()];
    for round in 0..rounds {
        for (i, (mcp, server)) in turns(sides, round) {
            server.exec(mcp, "true").await;
            for _ in 0..runs / rounds {
                let (d, ok) = timed(server.exec(mcp, command)).await;
                taken[i].0.push(d);
                taken[i].1 += usize::from(!ok);
            }
        }
    }
    for (samples, _) in &mut taken {
        samples.sort();
    }
    taken
}

/// Ends every side's client; one still shared elsewhere ends when its last holder drops it.
async fn close_all(sides: Vec<Side>) {
    for (client, _) in sides {
        if let Ok(client) = Arc::try_unwrap(client) {
            client.close().await;
        }
    }
}

/// `rounds` rounds of `CALLERS` concurrent callers × `CALLS_EACH` `exec true` on each side in
/// turn: per side, calls/s over all its rounds, and failures.
async fn concurrent_in_turn(sides: &[Side], rounds: usize) -> Vec<(f64, usize)> {
    let mut taken = vec![(Duration::ZERO, 0); sides.len()];
    for round in 0..rounds {
        for (i, (mcp, server)) in turns(sides, round) {
            let (took, failed) = concurrent(mcp, server).await;
            taken[i].0 += took;
            taken[i].1 += failed;
        }
    }
    let calls = (rounds * CALLERS * CALLS_EACH) as f64;
    taken
        .into_iter()
        .map(|(took, failed)| (calls / took.as_secs_f64(), failed))
        .collect()
}

/// `CALLERS` concurrent callers × `CALLS_EACH` `exec true`: how long they took, and failures.
async fn concurrent(mcp: &Arc<McpClient>, server: &Server) -> (Duration, usize) {
    let t = Instant::now();
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (mcp, server) = (mcp.clone(), server.clone());
            tokio::spawn(async move {
                let mut failed = 0;
                for _ in 0..CALLS_EACH {
                    failed += usize::from(!server.exec(&mcp, "true").await);
                }
                failed
            })
        })
        .collect();
    let mut failed = 0;
    for c in callers {
        failed += c.await.unwrap();
    }
    (t.elapsed(), failed)
}

/// The command that prints `BIG_BYTES` of text.
fn big_command() -> String {
    format!("head -c {BIG_BYTES} /dev/zero | tr '\\0' x")
}

/// A command printing 1 GiB with the default cap: the daemon's resident memory before it and
/// at most while it ran (sampled every 10 ms), in KiB, and whether it succeeded.
async fn huge_output(env: &TestEnv, mcp: &McpClient, server: &Server) -> (u64, u64, bool) {
    let pid = env.daemon_pid().expect("a running daemon");
    let before = status_kib(pid, "VmRSS");
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = std::thread::spawn({
        let done = done.clone();
        move || {
            let mut most = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                most = most.max(status_kib(pid, "VmRSS"));
                std::thread::sleep(Duration::from_millis(10));
            }
            most
        }
    });
    let ok = server
        .exec(mcp, &format!("head -c {HUGE_BYTES} /dev/zero"))
        .await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    (before, sampler.join().expect("the sampler"), ok)
}

/// Starts `argv` as an MCP server and times start → initialize → first `tools/list`.
async fn start_to_tools_list(
    env: &TestEnv,
    argv: &[String],
    vars: &[(String, String)],
) -> (Duration, McpClient) {
    let t = Instant::now();
    let mcp = McpClient::start(argv, vars, &env.logs_dir(), Default::default()).await;
    assert!(!mcp.list_tools().await.is_empty());
    (t.elapsed(), mcp)
}

/// fast-mcp-ssh's home: a config naming the test sshd as host `bench`, JSON answers, no
/// audit and no guards (neither slows sshmcp either), the key pinned on first use.
fn fast_home(env: &TestEnv) -> PathBuf {
    let home = env.root.path().join("fast-mcp-ssh");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("hosts.toml"),
        format!(
            "[defaults]\noutput = \"json\"\naudit_log = false\nstrict_host_key_checking = \"off\"\n\
             [defaults.guards]\nuse_default_deny = false\nuse_default_confirm = false\n\n\
             [host.bench]\naddr = \"127.0.0.1\"\nuser = \"{}\"\nport = {}\nauth = \"key\"\nkey = \"{}\"\n",
            env.sshd.user,
            env.sshd.port,
            env.sshd.client_key.display()
        ),
    )
    .unwrap();
    home
}

/// fast-mcp-ssh's figures of the run.
struct Peer {
    starts: Vec<Duration>,
    first_exec: Duration,
    seq: Vec<Duration>,
    seq_failed: usize,
    rate: f64,
    rate_failed: usize,
    big: Vec<Duration>,
    rss_kib: u64,
}

/// fast-mcp-ssh's environment: `vars`, and its home with the host to reach.
fn peer_vars(env: &TestEnv, vars: &[(String, String)]) -> Vec<(String, String)> {
    let mut vars = vars.to_vec();
    vars.push((
        "FAST_MCP_SSH_HOME".into(),
        fast_home(env).display().to_string(),
    ));
    vars
}

/// fast-mcp-ssh started over stdio, ready for calls.
async fn start_peer(env: &TestEnv, bin: &std::path::Path, vars: &[(String, String)]) -> McpClient {
    let argv = [bin.display().to_string()];
    McpClient::start(
        &argv,
        &peer_vars(env, vars),
        &env.logs_dir(),
        Default::default(),
    )
    .await
}

/// fast-mcp-ssh, on the same sshd as the same user, in the same run: start → first
/// `tools/list`, STARTS times, then a client kept for the figures taken in turn with ours,
/// and the time of its first exec, on which it connects.
async fn start_measured_peer(
    env: &TestEnv,
    bin: &std::path::Path,
    vars: &[(String, String)],
) -> (Vec<Duration>, Duration, McpClient) {
    let (argv, peer) = (vec![bin.display().to_string()], peer_vars(env, vars));
    let mut starts = Vec::new();
    for _ in 0..STARTS {
        let (d, f) = start_to_tools_list(env, &argv, &peer).await;
        starts.push(d);
        f.close().await;
    }
    starts.sort();
    let f = start_peer(env, bin, vars).await;
    let (first_exec, ok) = timed(Server::Fast.exec(&f, "true")).await;
    assert!(
        ok,
        "fast-mcp-ssh cannot run a command; its stderr is in {}",
        env.logs_dir().display()
    );
    (starts, first_exec, f)
}

/// `ssh` with the test sshd's configuration and the master on `control`.
fn ssh_on(config: &std::path::Path, control: &std::path::Path) -> std::process::Command {
    let mut ssh = std::process::Command::new("ssh");
    ssh.arg("-F").arg(config).arg("-S").arg(control);
    ssh
}

/// Raw OpenSSH: a master started as sshmcp starts one, then `ssh -S` per command.
struct Raw {
    control: PathBuf,
    config: PathBuf,
    /// The master's process, which `-O check` names.
    pid: u32,
}

impl Raw {
    /// A master on control socket `name`, and the time `ssh -M -N -f` took.
    fn start(env: &TestEnv, name: &str) -> (Self, Duration) {
        let control = env.root.path().join(name);
        let config = env.sshd.ssh_config.clone();
        let t = Instant::now();
        let ok = ssh_on(&config, &control)
            .args(["-M", "-o", "ControlPersist=no", "-N", "-f", "testbed"])
            .stdin(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        let took = t.elapsed();
        assert!(ok, "raw master");
        // A master that found its socket taken runs without one and still exits 0: only
        // `-O check` shows it listens.
        let check = ssh_on(&config, &control)
            .args(["-O", "check", "testbed"])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&check.stderr);
        let pid = said
            .split_once("(pid=")
            .and_then(|(_, rest)| rest.split(')').next()?.parse().ok())
            .unwrap_or_else(|| panic!("the raw master does not answer on its socket: {said}"));
        (
            Self {
                control,
                config,
                pid,
            },
            took,
        )
    }

    fn exec(&self, command: &str) -> (Duration, bool) {
        let t = Instant::now();
        let out = ssh_on(&self.config, &self.control)
            .args(["testbed", command])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        (t.elapsed(), out.success())
    }

    /// One remote `/bin/sh` kept on the master and fed `command` and a marker per call, `runs`
    /// calls after the warm-up, sorted. No MCP, no daemon, no markers of ours: with `:` it is
    /// the channel's round trip alone, with `/bin/sh -c true` the round trip and a shell
    /// started on the call's path (sshmcp starts the next command's shell ahead), each with
    /// the spread this machine gives it.
    fn shell_floor(&self, command: &str, runs: usize) -> Vec<Duration> {
        use std::io::{BufRead, Write};
        let mut shell = ssh_on(&self.config, &self.control)
            .args(["testbed", "exec /bin/sh"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut feed = shell.stdin.take().unwrap();
        let mut answers = std::io::BufReader::new(shell.stdout.take().unwrap());
        // One write per call: the line reaches the shell whole.
        let (line, mut answer) = (format!("{command}; echo floor\n"), String::new());
        let mut call = || {
            let t = Instant::now();
            feed.write_all(line.as_bytes()).unwrap();
            // Before the marker, in the first call: what the shell's startup files printed,
            // perhaps without a newline of its own.
            while !answer.ends_with("floor\n") {
                answer.clear();
                let read = answers.read_line(&mut answer).unwrap();
                assert!(read > 0, "the remote shell ended");
            }
            answer.clear();
            t.elapsed()
        };
        for _ in 0..WARMUP {
            call();
        }
        let mut samples: Vec<Duration> = (0..runs).map(|_| call()).collect();
        samples.sort();
        drop(feed);
        let _ = shell.wait();
        samples
    }
}

impl Drop for Raw {
    /// Stops the master and waits (up to 5 s) until its process is gone, so the next figure
    /// does not share the CPUs with its exit and sshd's end of its connection.
    fn drop(&mut self) {
        let _ = ssh_on(&self.config, &self.control)
            .args(["-O", "exit", "testbed"])
            .output();
        let proc_dir = PathBuf::from(format!("/proc/{}", self.pid));
        let deadline = Instant::now() + Duration::from_secs(5);
        while proc_dir.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

struct Row {
    figure: String,
    sshmcp: String,
    fast: String,
    raw: String,
    ratio: Option<f64>,
    goal: &'static str,
    /// Whether the goal holds, when there is one to judge.
    met: Option<bool>,
}

fn print(rows: &[Row]) {
    println!("| figure | sshmcp | fast-mcp-ssh | raw OpenSSH | ratio | goal | met |");
    println!("|---|---|---|---|---|---|---|");
    for r in rows {
        // The goal's text tells which way it points.
        let at_least = r.goal.contains('≥');
        let ratio = r.ratio.map_or("–".into(), |x| {
            format!("{}×", shown_ratio(x, r.met != Some(false), at_least))
        });
        let met = match r.met {
            Some(true) => "yes",
            Some(false) => "no",
            None => "–",
        };
        println!(
            "| {} | {} | {} | {} | {ratio} | {} | {met} |",
            r.figure, r.sshmcp, r.fast, r.raw, r.goal
        );
    }
}

/// Two machines on this one: sshd, and so every remote process (its children), on the last
/// CPU; this process, and so the client side it starts (shim, daemon, masters), on the
/// others. Needs `taskset` (util-linux), and CPUs numbered from 0 for this process to use.
fn split_cpus(env: &TestEnv) -> Result<(), String> {
    let last = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    if last == 0 {
        return Err("one CPU only".into());
    }
    let pin = |cpus: &str, pid: u32| {
        let status = std::process::Command::new("taskset")
            .args(["-a", "-p", "-c", cpus, &pid.to_string()])
            .stdout(std::process::Stdio::null())
            .status()
            .map_err(|e| format!("taskset: {e}"))?;
        match status.success() {
            true => Ok(()),
            false => Err(format!("taskset -c {cpus} {pid} failed")),
        }
    };
    for pid in env.sshd.pids() {
        pin(&last.to_string(), pid)?;
    }
    pin(&format!("0-{}", last - 1), std::process::id())
}

/// A throwaway sshd and a daemon that takes, from this process's environment, what compares
/// builds and settings: the log level, `SSHMCP_STANDBY_CHANNELS`, `SSHMCP_NO_AUDIT` (`1` turns
/// the audit trail off) and `SSHMCP_DAEMON` (a wrapper such as valgrind, or another build).
fn test_env() -> TestEnv {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let log = std::env::var("SSHMCP_LOG").unwrap_or("warn".into());
    let (standby, no_audit, daemon) = (
        var("SSHMCP_STANDBY_CHANNELS"),
        var("SSHMCP_NO_AUDIT"),
        var("SSHMCP_DAEMON"),
    );
    TestEnv::with(
        &SshdOptions::default(),
        &[
            ("SSHMCP_LOG", &log),
            ("SSHMCP_STANDBY_CHANNELS", &standby),
            ("SSHMCP_NO_AUDIT", &no_audit),
            ("SSHMCP_DAEMON", &daemon),
        ],
    )
}

/// With `SSHMCP_PERF_LOAD=SECONDS`: only callers on one session for that long, for a profiler to
/// watch (`perf record -a`); prints the calls/s and the median, p90 and p99 call.
/// `SSHMCP_PERF_CALLERS` (8), `SSHMCP_PERF_PAUSE_MS` before each call (0) and `SSHMCP_PERF_COMMAND`
/// (`true`, or `big` for the 10 MiB command) shape the load, `SSHMCP_NO_AUDIT=1` turns the audit
/// trail off, `SSHMCP_PERF_WATCH=1` runs `sshmcp watch --json` beside it, `SSHMCP_PERF_SPLIT=1`
/// gives sshd's side a CPU of its own; `SSHMCP_PERF_KEEP_LOG=PATH` keeps the daemon's log,
/// `SSHMCP_PERF_DUMP=PATH` every call's time in µs, in the order the calls ended per caller;
/// `SSHMCP_DAEMON` names the daemon to start (a `valgrind` wrapper, or another build to compare).
/// With one caller it prints how the calls, in sets of SEQUENTIAL in a row, stand against the p99
/// goal. With `SSHMCP_LOG=sshmcpd=debug` it also prints how long the calls took inside the daemon,
/// and with one caller what the rest of each call took.
async fn load(seconds: u64) {
    let var = |name: &str| std::env::var(name).ok();
    let callers: usize = var("SSHMCP_PERF_CALLERS")
        .and_then(|s| s.parse().ok())
        .unwrap_or(CALLERS);
    let pause = Duration::from_millis(
        var("SSHMCP_PERF_PAUSE_MS")
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
    );
    assert!(
        seconds > 0 && callers > 0,
        "SSHMCP_PERF_LOAD and SSHMCP_PERF_CALLERS must be at least 1"
    );
    let command = match var("SSHMCP_PERF_COMMAND").as_deref() {
        None => "true".to_string(),
        Some("big") => big_command(),
        Some(other) => other.to_string(),
    };
    let env = test_env();
    if var("SSHMCP_PERF_SPLIT").as_deref() == Some("1")
        && let Err(why) = split_cpus(&env)
    {
        panic!("SSHMCP_PERF_SPLIT: {why}");
    }
    let mcp = Arc::new(env.mcp().await);
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    let server = Server::Sshmcp {
        session: sshmcp_tests::mcp::session_of(&r),
    };
    // `SSHMCP_PERF_WATCH=1`: a person watching (`sshmcp watch --json`, a snapshot a second)
    // during the load, to compare with nobody watching.
    let mut watcher = var("SSHMCP_PERF_WATCH").filter(|v| v == "1").map(|_| {
        std::process::Command::new(bins::path("sshmcp"))
            .args(["watch", "--json"])
            .env_clear()
            .envs(env.env_vars())
            .stdout(std::fs::File::create(env.logs_dir().join("watch.jsonl")).expect("watch file"))
            .spawn()
            .expect("sshmcp watch")
    });
    let until = Instant::now() + Duration::from_secs(seconds);
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (mcp, server, command) = (mcp.clone(), server.clone(), command.clone());
            tokio::spawn(async move {
                let mut took = Vec::new();
                while Instant::now() < until {
                    // Even a zero sleep waits for the timer's next tick (about 1 ms).
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                    took.push(timed(server.exec(&mcp, &command)).await.0);
                }
                took
            })
        })
        .collect();
    let mut took = Vec::new();
    for task in tasks {
        took.extend(task.await.unwrap());
    }
    if let Some(watcher) = watcher.as_mut() {
        let _ = watcher.kill();
        let _ = watcher.wait();
        let seen = std::fs::read_to_string(env.logs_dir().join("watch.jsonl")).unwrap_or_default();
        println!(
            "sshmcp watch took {} snapshots meanwhile",
            seen.lines().count()
        );
    }
    if let Some(path) = var("SSHMCP_PERF_DUMP") {
        let lines: String = took
            .iter()
            .map(|d| format!("{}\n", d.as_micros()))
            .collect();
        std::fs::write(path, lines).expect("the dump");
    }
    println!(
        "{} calls/s over {seconds} s, {}",
        took.len() as u64 / seconds,
        percentiles(took.clone())
    );
    // With one caller, the calls in the order they were made, cut into sets as long as the
    // side-by-side run's: the goal's p99, set after set.
    if callers == 1 && took.len() >= SEQUENTIAL {
        let ratios = took
            .chunks_exact(SEQUENTIAL)
            .map(|set| {
                let mut set = set.to_vec();
                set.sort();
                p99_over_median(&set)
            })
            .collect();
        println!(
            "sets of {SEQUENTIAL} calls in a row: {}",
            sets_against_goal(ratios)
        );
    }
    let log = logged_calls(&env, took.len()).await;
    let inside = daemon_account(&log);
    if !inside.is_empty() {
        // With one caller the calls end in the order they were made, as the daemon logs them.
        print_daemon_account(&inside, (callers == 1).then_some(&took[..]));
    }
    // `SSHMCP_PERF_KEEP_LOG=PATH` keeps the daemon's log (with `SSHMCP_LOG=debug`, say).
    if let Some(path) = var("SSHMCP_PERF_KEEP_LOG") {
        std::fs::write(path, log).expect("the log copy");
    }
}

/// The median, p90 and p99 of `times`.
fn percentiles(mut times: Vec<Duration>) -> String {
    times.sort();
    format!(
        "median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms",
        ms(&times, 50.0),
        ms(&times, 90.0),
        ms(&times, 99.0)
    )
}

/// How sets of SEQUENTIAL calls (or rounds) in a row stand against the p99 goal, from each
/// set's p99 / median: how many are above it, and the middle set's ratio.
fn sets_against_goal(mut ratios: Vec<f64>) -> String {
    let over = ratios.iter().filter(|r| **r > P99_GOAL).count();
    ratios.sort_by(f64::total_cmp);
    format!(
        "{over} of {} sets above {P99_GOAL}×; the middle set's p99/median {}×",
        ratios.len(),
        spread_shown(ratios[ratios.len() / 2])
    )
}

/// A p99 / median ratio as printed, rounded away from the goal when it misses.
fn spread_shown(ratio: f64) -> String {
    shown_ratio(ratio, ratio <= P99_GOAL, false)
}

/// The daemon's log once it holds a "call done" line for each of `calls` execs, or as it is
/// after 2 s: a thread of the daemon's writes the log, so its last lines may land a moment
/// after the last answer. At once when the log times no call (no `SSHMCP_LOG=sshmcpd=debug`).
async fn logged_calls(env: &TestEnv, calls: usize) -> String {
    let give_up = Instant::now() + Duration::from_secs(2);
    loop {
        let log = env.daemon_log();
        let logged = daemon_account(&log).len();
        if logged == 0 || logged >= calls || Instant::now() >= give_up {
            return log;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How long each `exec` took inside the daemon, in the order they ended: the "call done"
/// lines its log has with `SSHMCP_LOG=sshmcpd=debug`, timed from the call's start in the
/// daemon's service (the request decoded, its arguments checked) to its result.
fn daemon_account(log: &str) -> Vec<Duration> {
    log.lines()
        .filter(|line| line.contains("call done") && line.contains("tool=\"exec\""))
        .filter_map(|line| line.rsplit_once("seconds=")?.1.trim().parse().ok())
        .map(Duration::from_secs_f64)
        .collect()
}

/// Prints where the calls' time went: inside the daemon (its way to the host and back
/// included), and, given every call's time in the order the calls ended, the rest of each
/// call (this client, MCP, the shim, the daemon's socket, its request's decoding, its audit
/// line and its answer's encoding).
fn print_daemon_account(inside: &[Duration], took_in_order: Option<&[Duration]>) {
    println!("inside the daemon: {}", percentiles(inside.to_vec()));
    match took_in_order {
        Some(took) if took.len() == inside.len() => {
            let rest = took
                .iter()
                .zip(inside)
                .map(|(all, daemon)| all.saturating_sub(*daemon))
                .collect();
            println!("the rest of each call: {}", percentiles(rest));
        }
        Some(took) => println!(
            "the rest of each call: not paired ({} calls, {} timed in the daemon's log)",
            took.len(),
            inside.len()
        ),
        None => {}
    }
}

fn main() {
    // Before any runtime: a ring member is a small process that only works and hands on.
    serve_if_member();
    match std::env::var("SSHMCP_PERF_RING").map(|s| s.parse()) {
        Ok(Ok(micros)) => ring_sets(Duration::from_micros(micros)),
        _ => measure(),
    }
}

#[tokio::main]
async fn measure() {
    if let Some(seconds) = std::env::var("SSHMCP_PERF_LOAD")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return load(seconds).await;
    }
    let fast_bin: Option<PathBuf> = std::env::args().nth(1).map(PathBuf::from);
    let env = test_env();
    let shim = vec![bins::path("sshmcp-mcp").display().to_string()];
    let vars = env.env_vars();
    let mut rows = Vec::new();

    // Start to first tools/list: cold (no daemon; the shim starts one only on a tool call,
    // so cold and warm differ only when a call comes first) and warm.
    let mut starts = Vec::new();
    for _ in 0..STARTS {
        let (d, mcp) = start_to_tools_list(&env, &shim, &vars).await;
        starts.push(d);
        mcp.close().await;
    }
    starts.sort();
    let peer = match &fast_bin {
        Some(bin) => Some(start_measured_peer(&env, bin, &vars).await),
        None => None,
    };

    // Connect with the daemon cold: the first call of a new shim starts the daemon too.
    let t = Instant::now();
    let mcp = McpClient::start(&shim, &vars, &env.logs_dir(), Default::default()).await;
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    let connect_cold = t.elapsed();
    let session = sshmcp_tests::mcp::session_of(&r);
    let server = Server::Sshmcp { session };
    // A second session, to another identity of the same sshd: the daemon's memory with two.
    let other = mcp
        .call(
            "connect",
            json!({"host": "localhost", "user": env.sshd.user, "port": env.sshd.port}),
        )
        .await;
    // The raw baselines first: the raw master's start goes on in sshd for a while after
    // `ssh -f` returns, and calls measured beside it wait for the CPU it takes; its own
    // figures, after a first command that waits that setup out, let it settle.
    let (raw, raw_master) = Raw::start(&env, "raw.ctl");
    assert!(raw.exec("true").1, "the raw master's first command");
    let mut raw_seq: Vec<Duration> = (0..SEQUENTIAL).map(|_| raw.exec("true").0).collect();
    raw_seq.sort();
    let mut raw_big: Vec<Duration> = (0..BIG_RUNS).map(|_| raw.exec(&big_command()).0).collect();
    raw_big.sort();
    let round_trip = raw.shell_floor(":", SEQUENTIAL);
    let with_shell = raw.shell_floor("/bin/sh -c true", SEQUENTIAL);

    // The figures set against fast-mcp-ssh's, the two servers taking turns.
    let mcp = Arc::new(mcp);
    let mut sides = vec![(mcp.clone(), server.clone())];
    let peer_alone = peer.map(|(starts, first_exec, f)| {
        sides.push((Arc::new(f), Server::Fast));
        (starts, first_exec)
    });
    let mut seqs = sequential_in_turn(&sides, "true", SEQUENTIAL, SEQUENTIAL_ROUNDS).await;
    let (seq, seq_failed) = seqs.remove(0);
    // Right after, while the machine is as it was: a ring as long as our median call.
    let ring = Ring::new(
        HANDOVERS,
        Duration::from_secs_f64(ms(&seq, 50.0) / 1000.0),
        None,
    )
    .rounds(WARMUP, SEQUENTIAL);
    // An agent thinks between calls: the same with a pause before each.
    let mut paced = Vec::new();
    for _ in 0..PACED {
        tokio::time::sleep(PAUSE).await;
        paced.push(timed(server.exec(&mcp, "true")).await.0);
    }
    paced.sort();
    let mut rates = concurrent_in_turn(&sides, CONCURRENT_ROUNDS).await;
    let (rate, rate_failed) = rates.remove(0);
    let mut bigs = sequential_in_turn(&sides, &big_command(), BIG_RUNS, BIG_ROUNDS).await;
    let (big, big_failed) = bigs.remove(0);
    let shim_rss = status_kib(mcp.pid(), "VmRSS");
    // The peer's figures are the second side's.
    let fast = peer_alone.map(|(starts, first_exec)| {
        let ((seq, seq_failed), (rate, rate_failed), (big, _)) =
            (seqs.remove(0), rates.remove(0), bigs.remove(0));
        Peer {
            starts,
            first_exec,
            seq,
            seq_failed,
            rate,
            rate_failed,
            big,
            rss_kib: status_kib(sides[1].0.pid(), "VmRSS"),
        }
    });
    let huge = huge_output(&env, &mcp, &server).await;
    let with_sessions = Footprint::of(&env).rss_kib;
    mcp.call("disconnect", json!({"session_id": other["session_id"]}))
        .await;
    // Connect with the daemon running, and the session's first exec, against raw OpenSSH's
    // master start with its first command, in turn (each first in every other round), each
    // after the other's session ended. A connection's first channel waits for sshd's
    // post-authentication setup (~45 ms): raw OpenSSH's connect with a first command is the
    // fair baseline for a connect that gathers facts.
    let (mut connects, mut raw_connects) = (Vec::new(), Vec::new());
    let (mut first_execs, mut after_waits) = (Vec::new(), Vec::new());
    for round in 0..FIRSTS {
        let ours = async {
            let (connect, r) = timed(mcp.call(
                "connect",
                json!({"host": "localhost", "user": env.sshd.user, "port": env.sshd.port}),
            ))
            .await;
            let fresh = Server::Sshmcp {
                session: sshmcp_tests::mcp::session_of(&r),
            };
            let (first, after_wait) = first_and_after_wait(&mcp, &fresh, connect).await;
            mcp.call("disconnect", json!({"session_id": r["session_id"]}))
                .await;
            (connect, first, after_wait)
        };
        // A socket of its own: the one before may not be removed yet when `-O exit` returns.
        let raw = async {
            let (extra, master) = Raw::start(&env, &format!("raw-connect-{round}.ctl"));
            let (first, ok) = extra.exec("true");
            assert!(ok, "the raw master's first command");
            master + first
        };
        let ((connect, first, after_wait), raw_connect) = in_turn(round, ours, raw).await;
        connects.push(connect);
        first_execs.push(first);
        after_waits.push(after_wait);
        raw_connects.push(raw_connect);
    }
    first_execs.sort();
    after_waits.sort();
    connects.sort();
    raw_connects.sort();
    if let Ok(path) = std::env::var("SSHMCP_PERF_KEEP_LOG") {
        std::fs::write(path, env.daemon_log()).expect("the log copy");
    }

    let f = |x: f64| format!("{x:.2} ms");
    let fast_col = |g: &dyn Fn(&Peer) -> String| fast.as_ref().map_or("not run".into(), g);
    let ratio_to_fast =
        |ours: f64, pick: &dyn Fn(&Peer) -> f64| fast.as_ref().map(|x| ours / pick(x));

    let median = ms(&seq, 50.0);
    let r = ratio_to_fast(median, &|x| ms(&x.seq, 50.0));
    rows.push(Row {
        figure: format!("exec `true`, median ({SEQUENTIAL} sequential)"),
        sshmcp: f(median),
        fast: fast_col(&|x| f(ms(&x.seq, 50.0))),
        raw: format!("{} (`ssh -S`)", f(ms(&raw_seq, 50.0))),
        ratio: r,
        goal: "≤ 1.0× fast-mcp-ssh",
        met: r.map(|r| r <= 1.0),
    });
    rows.push(Row {
        figure: format!(
            "exec `true`, median with {} ms between calls (as an agent calls)",
            PAUSE.as_millis()
        ),
        sshmcp: f(ms(&paced, 50.0)),
        fast: "–".into(),
        raw: "–".into(),
        ratio: r.map(|_| ms(&paced, 50.0) / median),
        goal: "–",
        met: None,
    });
    let p99 = ms(&seq, 99.0);
    rows.push(Row {
        figure: "exec `true`, p99".into(),
        sshmcp: format!("{} ({seq_failed} failed)", f(p99)),
        fast: fast_col(&|x| format!("{} ({} failed)", f(ms(&x.seq, 99.0)), x.seq_failed)),
        raw: f(ms(&raw_seq, 99.0)),
        ratio: Some(p99 / median),
        goal: "p99 ≤ 1.5× our median",
        met: Some(p99 / median <= P99_GOAL),
    });
    for (figure, floor) in [
        (
            format!(
                "a remote `/bin/sh` on the master fed `:`, {SEQUENTIAL} sequential: median / p99"
            ),
            &round_trip,
        ),
        (
            "the same fed `/bin/sh -c true` (a shell started on the call's path)".into(),
            &with_shell,
        ),
        (
            "no SSH: as many local processes as a call's hand-overs pass a byte around a ring of pipes, with our median's work a round".into(),
            &ring,
        ),
    ] {
        let (floor_median, floor_p99) = (ms(floor, 50.0), ms(floor, 99.0));
        rows.push(Row {
            figure,
            sshmcp: "–".into(),
            fast: "–".into(),
            raw: format!("{} / {}", f(floor_median), f(floor_p99)),
            ratio: Some(p99_over_median(floor)),
            goal: "–",
            met: None,
        });
    }
    let r = fast.as_ref().map(|x| rate / x.rate);
    rows.push(Row {
        figure: format!("{CALLERS} callers × {CALLS_EACH}, calls/s"),
        sshmcp: format!("{rate:.0} ({rate_failed} failed)"),
        fast: fast_col(&|x| format!("{:.0} ({} failed)", x.rate, x.rate_failed)),
        raw: "–".into(),
        ratio: r,
        goal: "≥ 1.0× fast-mcp-ssh, 0 failed",
        met: r.map(|r| r >= 1.0 && rate_failed == 0),
    });
    let big_median = ms(&big, 50.0);
    let r = ratio_to_fast(big_median, &|x| ms(&x.big, 50.0));
    rows.push(Row {
        figure: format!("10 MiB of output, median of {BIG_RUNS}"),
        sshmcp: format!("{} ({big_failed} failed)", f(big_median)),
        fast: fast_col(&|x| f(ms(&x.big, 50.0))),
        raw: format!("{} (all 10 MiB)", f(ms(&raw_big, 50.0))),
        ratio: r,
        goal: "≤ 1.0× fast-mcp-ssh",
        met: r.map(|r| r <= 1.0),
    });
    let cold = connect_cold.as_secs_f64() * 1000.0;
    let raw_ms = raw_master.as_secs_f64() * 1000.0;
    rows.push(Row {
        figure: "connect, daemon cold (shim start → answer)".into(),
        sshmcp: f(cold),
        fast: fast_col(&|x| {
            format!(
                "lazy; first exec {}",
                f(x.first_exec.as_secs_f64() * 1000.0)
            )
        }),
        raw: format!("{} (`ssh -M -N -f`)", f(raw_ms)),
        ratio: Some(cold / raw_ms),
        goal: "–",
        met: None,
    });
    let (warm, raw_first) = (ms(&connects, 50.0), ms(&raw_connects, 50.0));
    rows.push(Row {
        figure: format!("connect, daemon running (remote facts included), median of {FIRSTS}"),
        sshmcp: f(warm),
        fast: "–".into(),
        raw: format!("{} (master + first `ssh -S true`)", f(raw_first)),
        ratio: Some(warm / raw_first),
        goal: "≤ 1.1× raw (master start + first command)",
        met: Some(warm / raw_first <= 1.1),
    });
    let first = ms(&first_execs, 50.0);
    let after_wait = ms(&after_waits, 50.0);
    rows.push(Row {
        figure: format!("first exec right after its connect, median of {FIRSTS} sessions"),
        sshmcp: format!(
            "{}; the same sessions' next exec after as long a wait {}; {:.2}× the back-to-back median",
            f(first),
            f(after_wait),
            first / median
        ),
        fast: "–".into(),
        raw: "–".into(),
        ratio: Some(first / after_wait),
        goal: "no slower than the rest (≤ 1.0× an exec after the same wait)",
        met: Some(first <= after_wait),
    });
    let (huge_before, huge_most, huge_ok) = huge;
    let growth = huge_most.saturating_sub(huge_before);
    let bound = 2 * DEFAULT_CAP_KIB;
    rows.push(Row {
        figure: "1 GiB of output: the daemon's memory growth (VmRSS, sampled every 10 ms)".into(),
        sshmcp: format!(
            "{growth} KiB ({huge_before} → at most {huge_most} KiB){}",
            if huge_ok { "" } else { ", the command failed" }
        ),
        fast: "–".into(),
        raw: "–".into(),
        ratio: None,
        goal: "within 2× the cap (2 × 64 KiB)",
        met: Some(huge_ok && growth <= bound),
    });
    let start = ms(&starts, 50.0);
    rows.push(Row {
        figure: format!("start → first `tools/list`, median of {STARTS}"),
        sshmcp: f(start),
        fast: fast_col(&|x| f(ms(&x.starts, 50.0))),
        raw: "–".into(),
        ratio: None,
        goal: "≤ 50 ms",
        met: Some(start <= 50.0),
    });
    let idle = Footprint::of(&env);
    rows.push(Row {
        figure: "memory (VmRSS)".into(),
        sshmcp: format!(
            "shim {} KiB; daemon {} KiB with 2 sessions, {} KiB with 1",
            shim_rss, with_sessions, idle.rss_kib
        ),
        fast: fast_col(&|x| format!("{} KiB", x.rss_kib)),
        raw: "–".into(),
        ratio: None,
        goal: "daemon ≤ 15 MB, shim ≤ 10 MB",
        met: Some(idle.rss_kib <= 15 * 1024 && shim_rss <= 10 * 1024),
    });
    drop((raw, mcp));
    close_all(sides).await;

    // The wide run: WIDE_SESSIONS identities (sshd listens on 16 ports a process), each with
    // WIDE_EXECS concurrent execs.
    let wide = wide_run().await;

    println!();
    print(&rows);
    println!();
    println!("{wide}");
    // Last, after the rest is printed: it pins this process to its CPUs for good.
    println!();
    println!("{}", split_run(fast_bin.as_deref()).await);
}

/// With `SSHMCP_PERF_RING=MICROS`: only the ring of HANDOVERS processes with MICROS of work a
/// round, RING_SETS sets of SEQUENTIAL rounds, each set's median, p99 and their ratio: how
/// often this machine keeps a path of as many hand-overs and as long a round within 1.5×.
/// With `SSHMCP_PERF_RING_SHELL=1` the member in the runner's place starts `/bin/sh -c :`
/// after handing the byte on, as the runner starts the next call's shell.
fn ring_sets(round: Duration) {
    let shell_at =
        (std::env::var("SSHMCP_PERF_RING_SHELL").as_deref() == Ok("1")).then_some(RUNNER_AT);
    let mut ring = Ring::new(HANDOVERS, round, shell_at);
    let mut ratios = Vec::new();
    for set in 1..=RING_SETS {
        let times = ring.rounds(WARMUP, SEQUENTIAL);
        let ratio = p99_over_median(&times);
        ratios.push(ratio);
        println!(
            "set {set:2}: median {:.2} ms, p99 {:.2} ms, p99/median {}×",
            ms(&times, 50.0),
            ms(&times, 99.0),
            spread_shown(ratio)
        );
    }
    println!("{}", sets_against_goal(ratios));
}

/// The sequential `exec true` again, on a fresh sshd whose processes (sshd, the login and
/// program shells) run on the last CPU only, while the client, the servers and the master
/// run on the others: the two machines of a deployment, on one (without a network between
/// them). Beside the figure on shared CPUs, it tells how much of the spread comes from both
/// ends taking turns on the same CPUs; 200 calls make a rough p99, so load mode with
/// `SSHMCP_PERF_SPLIT` measures it closer.
async fn split_run(fast_bin: Option<&std::path::Path>) -> String {
    let env = test_env();
    if let Err(why) = split_cpus(&env) {
        return format!("Each end on CPUs of its own: not measured ({why})");
    }
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    let server = Server::Sshmcp {
        session: sshmcp_tests::mcp::session_of(&r),
    };
    let mut sides = vec![(Arc::new(mcp), server)];
    if let Some(bin) = fast_bin {
        let f = start_peer(&env, bin, &env.env_vars()).await;
        sides.push((Arc::new(f), Server::Fast));
    }
    let mut seqs = sequential_in_turn(&sides, "true", SEQUENTIAL, SEQUENTIAL_ROUNDS).await;
    close_all(sides).await;
    let spread = |seq: &[Duration], failed: usize| {
        format!(
            "median {:.2} ms, p99 {:.2} ms, p99/median {:.2}× ({failed} failed)",
            ms(seq, 50.0),
            ms(seq, 99.0),
            p99_over_median(seq)
        )
    };
    let (ours, ours_failed) = seqs.remove(0);
    let fast = seqs
        .pop()
        .map_or("not run".into(), |(seq, failed)| spread(&seq, failed));
    format!(
        "Each end on CPUs of its own (sshd and everything it starts on the last CPU, the rest \
         on the others), {SEQUENTIAL} sequential `exec true` in turn: sshmcp {}; \
         fast-mcp-ssh {fast}",
        spread(&ours, ours_failed)
    )
}

/// 100 sessions on 100 server identities, 10 concurrent `exec true` on each, all at once.
async fn wide_run() -> String {
    let opts = SshdOptions {
        extra_ports: WIDE_SESSIONS - 1,
        ..SshdOptions::default()
    };
    let env = TestEnv::with(
        &opts,
        &[("SSHMCP_LOG", "warn"), ("SSHMCP_MAX_SESSIONS", "128")],
    );
    let mcp = Arc::new(env.mcp().await);
    let mut connects = Vec::new();
    for port in env.sshd.ports.clone() {
        let (mcp, user) = (mcp.clone(), env.sshd.user.clone());
        connects.push(tokio::spawn(async move {
            let r = mcp
                .call(
                    "connect",
                    json!({"host": "127.0.0.1", "user": user, "port": port}),
                )
                .await;
            sshmcp_tests::mcp::session_of(&r)
        }));
    }
    let mut sessions = Vec::new();
    for c in connects {
        sessions.push(c.await.unwrap());
    }
    let t = Instant::now();
    let mut calls = Vec::new();
    for session in &sessions {
        for _ in 0..WIDE_EXECS {
            let (mcp, server) = (
                mcp.clone(),
                Server::Sshmcp {
                    session: session.clone(),
                },
            );
            calls.push(tokio::spawn(async move {
                timed(server.exec(&mcp, "true")).await
            }));
        }
    }
    let mut samples = Vec::new();
    let mut failed = 0;
    for c in calls {
        let (d, ok) = c.await.unwrap();
        samples.push(d);
        failed += usize::from(!ok);
    }
    let wall = t.elapsed();
    samples.sort();
    let daemon_rss = Footprint::of(&env).rss_kib;
    let line = format!(
        "{WIDE_SESSIONS} sessions × {WIDE_EXECS} concurrent `exec true`: {} calls in {:.2} s, \
         {failed} failed, median {:.1} ms, p99 {:.1} ms; daemon {daemon_rss} KiB with {WIDE_SESSIONS} sessions",
        samples.len(),
        wall.as_secs_f64(),
        ms(&samples, 50.0),
        ms(&samples, 99.0)
    );
    for s in &sessions {
        mcp.call("disconnect", json!({"session_id": s.0})).await;
    }
    if let Ok(mcp) = Arc::try_unwrap(mcp) {
        mcp.close().await;
    }
    line
}
