//! Masters that stop answering and sockets that fail: nothing waits forever, and a session is
//! `lost` only when its master is really gone.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use sshmcp_tests::SshdOptions;
use sshmcp_tests::process::{descendants, gone, run, unique_sleep};

use crate::{code, connected, exec, remote_until};

fn master_pid(connected: &serde_json::Value) -> u32 {
    connected["sessions"][0]["master_pid"].as_u64().unwrap() as u32
}

/// A SIGSTOPped master: a running command still answers at its timeout (plus the stop's
/// grace), a new one within its timeout, the session stays `ready`, and disconnect finishes
/// within its cap and ends the master.
#[tokio::test]
async fn a_stopped_master_wedges_neither_exec_nor_disconnect() {
    let (env, mcp, s) = connected().await;
    let pid = master_pid(&mcp.call("session_list", json!({})).await);
    let secs = unique_sleep(60);
    let args = json!({"session_id": s.0, "session_key": s.1,
                      "command": format!("sleep {secs}"), "timeout": 2});
    let (_, running) = mcp.start_call("exec", args).await;
    let probe = format!("pgrep -f 'sleep {secs}' >/dev/null && echo yes || echo no");
    assert!(remote_until(&mcp, &s, &probe, "yes\n").await);
    kill(Pid::from_raw(pid as i32), Signal::SIGSTOP).unwrap();

    let r = sshmcp_tests::mcp::answer(running).await;
    assert_eq!(r["timed_out"], true, "{r}");
    // The timeout plus the stop's grace (the kill cannot run while the master is stopped).
    assert!(r["duration"].as_f64().unwrap() < 6.0, "{r}");

    let never = format!("{}-never", env.root.path().display());
    let asked = Instant::now();
    let r = exec(&mcp, &s, &format!("touch '{never}'"), json!({"timeout": 3})).await;
    assert_eq!(crate::code(&r), "channels_busy", "nothing ran: {r}");
    assert!(asked.elapsed() < Duration::from_secs(4), "{r}");
    let list = mcp.call("session_list", json!({})).await;
    assert_eq!(list["sessions"][0]["state"], "ready", "stopped is not lost");

    let asked = Instant::now();
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(r["state"], "closed", "{r}");
    assert!(
        asked.elapsed() < Duration::from_secs(12),
        "{:?}",
        asked.elapsed()
    );
    assert!(gone(pid), "the stopped master must be ended");
    // The call that timed out against the stopped master never ran, not even once the
    // master was let go on the way out.
    assert!(
        !std::path::Path::new(&never).exists(),
        "a timed-out call ran later"
    );
    // The command that ran when the master stopped was killed on the way out.
    let (watcher, w) = crate::connect_watcher(&env).await;
    assert!(
        remote_until(&watcher, &w, &probe, "no\n").await,
        "the remote command outlived its session"
    );
    watcher.close().await;
    mcp.close().await;
}

/// Every process serving a test sshd's connections, stopped (a host that froze) until this
/// goes: dropped also when a test fails, so no process stays stopped.
struct Frozen(Vec<u32>);

impl Frozen {
    fn host_of(env: &sshmcp_tests::TestEnv) -> Self {
        Self::stopping(env.sshd.pids().into_iter().flat_map(descendants).collect())
    }

    /// Only the shells sshd started: sshd itself answers on (the master's keepalive passes),
    /// as on a host whose programs hang.
    fn shells_of(env: &sshmcp_tests::TestEnv) -> Self {
        let sshds: Vec<u32> = crate::connection_sshds(env)
            .iter()
            .map(|p| *p as u32)
            .collect();
        let shells = env.sshd.pids().into_iter().flat_map(descendants);
        Self::stopping(shells.filter(|pid| !sshds.contains(pid)).collect())
    }

    fn stopping(pids: Vec<u32>) -> Self {
        assert!(!pids.is_empty(), "no process serves the session");
        let frozen = Self(pids);
        frozen.signal(Signal::SIGSTOP);
        frozen
    }

    fn signal(&self, signal: Signal) {
        for pid in &self.0 {
            let _ = kill(Pid::from_raw(*pid as i32), signal);
        }
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        self.signal(Signal::SIGCONT);
    }
}

/// The answer of a call whose host never confirmed its start: `connection_lost`, not known
/// to have started, and the session not taken for lost.
async fn unconfirmed(mcp: &sshmcp_tests::mcp::McpClient, r: &serde_json::Value) {
    assert_eq!(code(r), "connection_lost", "{r}");
    assert_eq!(r["error"]["started"], serde_json::Value::Null, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not confirm"),
        "{r}"
    );
    let list = mcp.call("session_list", json!({})).await;
    assert_eq!(
        list["sessions"][0]["state"], "ready",
        "a stall is not a loss: {list}"
    );
}

/// A session whose channel waits for the next command (an exec left it there), so the next
/// command is sent at once: what a host that then freezes has been given.
async fn connected_with_a_waiting_channel() -> (
    sshmcp_tests::TestEnv,
    sshmcp_tests::mcp::McpClient,
    (String, String),
) {
    let (env, mcp, s) = connected().await;
    assert_eq!(exec(&mcp, &s, "true", json!({})).await["exit_code"], 0);
    (env, mcp, s)
}

/// Once the host goes on, the unconfirmed command (`sleep 3; touch WORK`) is killed as it
/// shows: its work is never done, a while after it would have been.
async fn never_did_its_work(mcp: &sshmcp_tests::mcp::McpClient, s: &(String, String), work: &str) {
    let probe = format!("sleep 5; test -e '{work}' && echo worked || echo stopped");
    let r = exec(mcp, s, &probe, json!({})).await;
    assert_eq!(
        r["stdout"], "stopped\n",
        "the unconfirmed command ran on: {r}"
    );
}

/// A host that stops answering once it has a command (every process of its sshd stopped,
/// as a frozen host or a network that dropped out): the command's timeout answers
/// `connection_lost` not known to have started, not a timed-out command; the session stays
/// `ready`; and once the host answers again, the command is stopped as it shows, before it
/// does its work.
#[tokio::test]
async fn a_frozen_host_leaves_a_sent_command_unconfirmed() {
    let (env, mcp, s) = connected_with_a_waiting_channel().await;
    let frozen = Frozen::host_of(&env);
    let work = format!("{}-work", env.root.path().display());
    let r = exec(
        &mcp,
        &s,
        &format!("sleep 3; touch '{work}'"),
        json!({"timeout": 1}),
    )
    .await;
    // A command that needs a new channel gets none: the master's request goes unanswered,
    // which the answer says (not that every channel is busy), and nothing ran.
    let busy = exec(&mcp, &s, &format!("touch '{work}'"), json!({"timeout": 2})).await;
    // So does a remote forward, which needs the host's word.
    let args = json!({"session_id": s.0, "session_key": s.1, "kind": "remote",
                      "target_host": "127.0.0.1", "target_port": 9});
    let forward = mcp.call("forward_start", args).await;
    drop(frozen);
    unconfirmed(&mcp, &r).await;
    assert_eq!(code(&busy), "channels_busy", "{busy}");
    let message = busy["error"]["message"].as_str().unwrap();
    assert!(message.contains("did not answer"), "{busy}");
    assert_eq!(code(&forward), "forward_failed", "{forward}");

    never_did_its_work(&mcp, &s, &work).await;
    mcp.close().await;
}

/// A remote forward on a host whose programs hang (sshd answers, its shells do not): the
/// forward's check of its listener never confirms its start, which is no lost session.
#[tokio::test]
async fn a_hanging_host_fails_a_remote_forward_and_keeps_the_session() {
    let (env, mcp, s) = connected_with_a_waiting_channel().await;
    let hanging = Frozen::shells_of(&env);
    let args = json!({"session_id": s.0, "session_key": s.1, "kind": "remote",
                      "target_host": "127.0.0.1", "target_port": 9});
    let r = mcp.call("forward_start", args).await;
    drop(hanging);
    unconfirmed(&mcp, &r).await;
    assert_eq!(exec(&mcp, &s, "echo on", json!({})).await["stdout"], "on\n");
    mcp.close().await;
}

/// `command_start` on a host that froze once it had the command: the start is given up at
/// its bound (25 s, before the master's keepalive and the client's deadline) as unconfirmed,
/// no handle stays, and the command, once the host goes on, is stopped before its work.
#[tokio::test]
async fn a_frozen_host_bounds_a_command_start() {
    let (env, mcp, s) = connected_with_a_waiting_channel().await;
    let frozen = Frozen::host_of(&env);
    let work = format!("{}-work", env.root.path().display());
    let args = json!({"session_id": s.0, "session_key": s.1,
                      "command": format!("sleep 3; touch '{work}'")});
    let r = mcp.call("command_start", args).await;
    drop(frozen);
    unconfirmed(&mcp, &r).await;
    let list = mcp
        .call(
            "command_list",
            json!({"session_id": s.0, "session_key": s.1}),
        )
        .await;
    assert_eq!(list["commands"], json!([]), "no handle stays: {list}");

    never_did_its_work(&mcp, &s, &work).await;
    mcp.close().await;
}

/// `sshmcp daemon stop` with a stopped master finishes within its cap too.
#[tokio::test]
async fn daemon_stop_finishes_with_a_stopped_master() {
    let (env, mcp, _s) = connected().await;
    let pid = master_pid(&mcp.call("session_list", json!({})).await);
    kill(Pid::from_raw(pid as i32), Signal::SIGSTOP).unwrap();
    let asked = Instant::now();
    let out = env.cli(&["daemon", "stop"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        asked.elapsed() < Duration::from_secs(12),
        "{:?}",
        asked.elapsed()
    );
    assert!(gone(pid));
    drop(mcp);
}

/// A socket call that fails inside the daemon (here: out of descriptors) fails that call with
/// a clear error; the session stays `ready` and works again once descriptors are back.
#[tokio::test]
async fn a_failed_socket_call_does_not_lose_a_healthy_session() {
    // Without standby channels every call must open a channel (and so fail here).
    let no_standby = [("SSHMCP_STANDBY_CHANNELS", "0")];
    let (env, mcp, s) = crate::connected_with(&SshdOptions::default(), &no_standby).await;
    let daemon = env.daemon_pid().expect("daemon pid");
    let open = std::fs::read_dir(format!("/proc/{daemon}/fd"))
        .unwrap()
        .count();
    // The soft limit only: the hard one cannot be raised back.
    let soft_limit = |n: &str| {
        run(
            std::process::Command::new("prlimit")
                .arg(format!("--pid={daemon}"))
                .arg(format!("--nofile={n}:")),
            "util-linux",
        )
    };
    let before = std::fs::read_to_string(format!("/proc/{daemon}/limits")).unwrap();
    let soft = before
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .expect("the soft limit")
        .to_string();
    soft_limit(&open.to_string());
    let r = exec(&mcp, &s, "echo hi", json!({"timeout": 5})).await;
    soft_limit(&soft);
    assert_eq!(code(&r), "internal_error", "{r}");
    let list = mcp.call("session_list", json!({})).await;
    assert_eq!(
        list["sessions"][0]["state"], "ready",
        "a healthy session stays ready"
    );
    let r = exec(&mcp, &s, "echo back", json!({})).await;
    assert_eq!(crate::text(&r["stdout"]), "back\n", "{r}");
    mcp.close().await;
}

/// A daemon that stops answering (SIGSTOP) wedges no call: at the call's deadline it answers
/// `daemon_unavailable`, saying the daemon did not answer and that the call was not repeated;
/// let go on, the daemon serves again.
#[tokio::test]
async fn a_stopped_daemon_is_unavailable_at_the_calls_deadline() {
    let (env, mcp, _s) = connected().await;
    let daemon = Pid::from_raw(env.daemon_pid().expect("daemon pid") as i32);
    kill(daemon, Signal::SIGSTOP).unwrap();
    let r = mcp.call("session_list", json!({})).await;
    kill(daemon, Signal::SIGCONT).unwrap();
    assert_eq!(code(&r), "daemon_unavailable", "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("did not answer session_list in time"),
        "{message}"
    );
    let list = mcp.call("session_list", json!({})).await;
    assert_eq!(list["sessions"][0]["state"], "ready", "{list}");
    mcp.close().await;
}
