//! A machine's floor under a call's spread: processes that hand a byte around a ring of pipes,
//! each after a fixed amount of work, as a call is handed from process to process on its way
//! to the remote shell and back. No SSH, no MCP and no code of sshmcp's on the way: what
//! spreads the rounds is the machine (its scheduler, and the hypervisor under it).

use std::io::{BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// In a ring member's environment: the steps of work it does before handing the byte on.
const MEMBER_VAR: &str = "SSHMCP_RING_STEPS";
/// Set in one member's environment: after handing the byte on, it starts a `/bin/sh` and waits
/// for it, as sshmcp's remote runner starts the next call's shell while the answer travels
/// back.
const SHELL_VAR: &str = "SSHMCP_RING_STARTS_SHELL";

/// Work that a preemption lengthens: a count of steps, never a time to reach, which would hide
/// the time the CPU was taken away.
fn work(steps: u64) {
    let mut x = 1u64;
    for _ in 0..steps {
        x = std::hint::black_box(
            x.wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407),
        );
    }
}

/// Steps of `work` per microsecond on this machine: the fastest of a few timed runs, since
/// being preempted only ever slows one down.
fn steps_per_microsecond() -> f64 {
    const STEPS: u64 = 2_000_000;
    (0..5)
        .map(|_| {
            let t = Instant::now();
            work(STEPS);
            STEPS as f64 / (t.elapsed().as_secs_f64() * 1e6)
        })
        .fold(0.0, f64::max)
}

/// In a process started as a ring member: serves the ring until it is killed (the ring
/// dropped) or its input ends (the process that started it gone), then exits. Anywhere else
/// it returns at once; a program that builds a ring calls it first thing in `main`.
pub fn serve_if_member() {
    let Some(steps) = std::env::var(MEMBER_VAR).ok().and_then(|s| s.parse().ok()) else {
        return;
    };
    let starts_shell = std::env::var_os(SHELL_VAR).is_some();
    let (mut input, mut output) = (std::io::stdin().lock(), std::io::stdout().lock());
    let mut byte = [0u8];
    while input.read_exact(&mut byte).is_ok() {
        work(steps);
        if output
            .write_all(&byte)
            .and_then(|()| output.flush())
            .is_err()
        {
            break;
        }
        if starts_shell {
            let _ = Command::new("/bin/sh").args(["-c", ":"]).status();
        }
    }
    std::process::exit(0);
}

/// This process and the members it started, in a ring of pipes.
pub struct Ring {
    feed: ChildStdin,
    answers: BufReader<ChildStdout>,
    members: Vec<Child>,
    steps: u64,
}

impl Ring {
    /// A ring of `handovers` hand-overs a round (this process and `handovers - 1` members,
    /// each this program run again) with `work` a round, shared evenly between them. A round
    /// takes longer than `work` by what the hand-overs take. With `shell_at`, the member
    /// that receives the byte at that hand-over (1 for the first member) starts `/bin/sh -c :`
    /// after handing it on, beside the rest of the round.
    pub fn new(handovers: usize, work: Duration, shell_at: Option<usize>) -> Self {
        assert!(handovers >= 2, "a ring of one hands nothing over");
        assert!(
            shell_at.is_none_or(|at| (1..handovers).contains(&at)),
            "no member receives the byte at hand-over {shell_at:?}"
        );
        let steps = (steps_per_microsecond() * work.as_secs_f64() * 1e6 / handovers as f64) as u64;
        let program = std::env::current_exe().expect("this program's path");
        let (mut feed, mut previous, mut members) = (None, None::<ChildStdout>, Vec::new());
        for position in 1..handovers {
            let input = previous.take().map_or_else(Stdio::piped, Stdio::from);
            let mut member = Command::new(&program);
            if shell_at == Some(position) {
                member.env(SHELL_VAR, "1");
            }
            let mut member = member
                .env(MEMBER_VAR, steps.to_string())
                .stdin(input)
                .stdout(Stdio::piped())
                .spawn()
                .expect("a ring member");
            feed = feed.or_else(|| member.stdin.take());
            previous = member.stdout.take();
            members.push(member);
        }
        Self {
            feed: feed.expect("the first member's input"),
            answers: BufReader::new(previous.expect("the last member's output")),
            members,
            steps,
        }
    }

    /// `runs` rounds after `warmup` uncounted ones, sorted: this process does its share of
    /// the work, hands the byte on, and waits for it to come back around.
    pub fn rounds(&mut self, warmup: usize, runs: usize) -> Vec<Duration> {
        let mut round = || {
            let t = Instant::now();
            work(self.steps);
            let mut byte = [b'x'];
            self.feed.write_all(&byte).expect("the ring's first member");
            self.answers
                .read_exact(&mut byte)
                .expect("the ring's last member");
            t.elapsed()
        };
        for _ in 0..warmup {
            round();
        }
        let mut times: Vec<Duration> = (0..runs).map(|_| round()).collect();
        times.sort();
        times
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        for member in &mut self.members {
            let _ = member.kill();
            let _ = member.wait();
        }
    }
}
