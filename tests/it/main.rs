//! End-to-end tests: the real `sshmcp-mcp`, `sshmcpd` and `sshmcp` binaries, OpenSSH and a
//! real sshd on 127.0.0.1. Each test owns a temp root and its own daemon, so they run in
//! parallel.
#![allow(clippy::too_many_lines)] // A test scenario reads as one story.

mod busybox;
mod cli;
mod clients;
mod commands;
mod connect;
mod daemon;
mod exec;
mod exec_limits;
mod files;
mod forwards;
mod inspect;
mod lifecycle;
mod login_shells;
mod oversight;
mod sudo;
mod surface;
mod tasks;
mod transfers;
mod wedged;

use serde_json::{Value, json};
pub use sshmcp_tests::mcp::text;
use sshmcp_tests::mcp::{answer, session_of};
use sshmcp_tests::{McpClient, SshdOptions, TestEnv};

/// Connects to the `testbed` alias and returns (session_id, session_key).
pub async fn connect(mcp: &McpClient) -> (String, String) {
    session_of(&mcp.call("connect", json!({"alias": "testbed"})).await)
}

/// Runs `command` with extra exec arguments merged in.
pub async fn exec(
    mcp: &McpClient,
    session: &(String, String),
    command: &str,
    extra: Value,
) -> Value {
    let mut args = json!({"command": command});
    if let (Some(args), Some(extra)) = (args.as_object_mut(), extra.as_object()) {
        args.extend(extra.clone());
    }
    on_session(mcp, session, "exec", args).await
}

/// Calls `tool` on the session with `args` (an object) and the session's id and key.
pub async fn on_session(
    mcp: &McpClient,
    session: &(String, String),
    tool: &str,
    args: Value,
) -> Value {
    let mut all = json!({"session_id": session.0, "session_key": session.1});
    if let (Some(all), Some(args)) = (all.as_object_mut(), args.as_object()) {
        all.extend(args.clone());
    }
    mcp.call(tool, all).await
}

/// What `command` prints on the host; it must succeed.
pub async fn remote_out(mcp: &McpClient, s: &(String, String), command: &str) -> String {
    let r = exec(mcp, s, command, json!({})).await;
    assert_eq!(r["exit_code"], 0, "{command}: {r}");
    crate::text(&r["stdout"]).to_string()
}

/// A fresh remote directory of the test's own, `/tmp/sshmcp-<what>-<unique>`, removed with
/// everything in it when the test ends, however it ends (the host is this machine).
pub async fn fresh_dir(mcp: &McpClient, s: &(String, String), what: &str) -> TestPath {
    let dir = format!(
        "/tmp/sshmcp-{what}-{}",
        sshmcp_tests::process::unique_sleep(1)
    );
    remote_out(mcp, s, &format!("mkdir {dir}")).await;
    TestPath(dir)
}

/// A file or directory a test made on the host: its path, and its removal on drop (some
/// hold a GiB).
pub struct TestPath(String);

impl TestPath {
    pub fn new(path: String) -> Self {
        Self(path)
    }
}

impl std::ops::Deref for TestPath {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<std::path::Path> for TestPath {
    fn as_ref(&self) -> &std::path::Path {
        self.0.as_ref()
    }
}

impl serde::Serialize for TestPath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl std::fmt::Display for TestPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Drop for TestPath {
    fn drop(&mut self) {
        if std::fs::remove_dir_all(&self.0).is_err() {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// The error code of a failed answer.
pub fn code(answer: &Value) -> &str {
    assert_eq!(answer["ok"], false, "expected a failure: {answer}");
    answer["error"]["code"].as_str().unwrap()
}

/// A failure's message.
pub fn message(answer: &Value) -> &str {
    assert_eq!(answer["ok"], false, "expected a failure: {answer}");
    answer["error"]["message"].as_str().unwrap()
}

/// A world plus a connected MCP client and session, for the many tests that need just that.
pub async fn connected() -> (TestEnv, McpClient, (String, String)) {
    connected_with(&SshdOptions::default(), &[]).await
}

/// Like [`connected`], with sshd options and extra environment for the binaries.
pub async fn connected_with(
    opts: &SshdOptions,
    extra: &[(&str, &str)],
) -> (TestEnv, McpClient, (String, String)) {
    let env = TestEnv::with(opts, extra);
    let mcp = env.mcp().await;
    let session = connect(&mcp).await;
    (env, mcp, session)
}

/// Polls the remote host with `probe` until it prints `expected`, for up to 15 s (a remote
/// process has no event to wait on).
pub async fn remote_until(
    mcp: &McpClient,
    s: &(String, String),
    probe: &str,
    expected: &str,
) -> bool {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while std::time::Instant::now() < give_up {
        if crate::text(&exec(mcp, s, probe, json!({})).await["stdout"]) == expected {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    false
}

/// Polls `session_list` until `ready` holds for its first session, for up to 15 s (the daemon
/// pushes no events to MCP clients, and a link loss takes seconds to notice).
pub async fn first_session_until(mcp: &McpClient, ready: impl Fn(&Value) -> bool) -> bool {
    nth_session_until(mcp, 0, ready).await
}

/// Like [`first_session_until`] for the `n`th session of the listing (null while absent).
pub async fn nth_session_until(mcp: &McpClient, n: usize, ready: impl Fn(&Value) -> bool) -> bool {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while std::time::Instant::now() < give_up {
        let list = mcp.call("session_list", json!({})).await;
        if ready(&list["sessions"][n]) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    false
}

/// Starts every command at once on one MCP client, then returns their answers in order.
pub async fn exec_all(mcp: &McpClient, s: &(String, String), commands: &[String]) -> Vec<Value> {
    let mut pending = Vec::new();
    for command in commands {
        let args = json!({"session_id": s.0, "session_key": s.1, "command": command});
        pending.push(mcp.start_call("exec", args).await.1);
    }
    let mut answers = Vec::new();
    for rx in pending {
        answers.push(answer(rx).await);
    }
    answers
}

/// A second session on the same sshd (through its other name, `localhost`: a server identity
/// of its own) to look at the remote host while the first is busy or gone.
pub async fn connect_watcher(env: &TestEnv) -> (McpClient, (String, String)) {
    let mcp = env.mcp().await;
    let args = json!({"host": "localhost", "user": env.sshd.user, "port": env.sshd.port});
    let r = mcp.call("connect", args).await;
    assert_eq!(r["ok"], true, "{r}");
    let session = session_of(&r);
    (mcp, session)
}

/// Runs a sleep through `tool` (`exec` or `sudo_exec`) with a one-second timeout and checks
/// it ends as a timeout should: answered `timed_out` with `TERM`, and nothing of it left on
/// the host.
pub async fn assert_timeout_kills(mcp: &McpClient, s: &(String, String), tool: &str) {
    let secs = sshmcp_tests::process::unique_sleep(31);
    let args = json!({"session_id": s.0, "session_key": s.1, "timeout": 1,
                      "command": format!("sleep {secs}")});
    let r = mcp.call(tool, args).await;
    assert_eq!(
        (r["timed_out"].clone(), r["signal"].clone()),
        (json!(true), json!("TERM")),
        "{r}"
    );
    let probe = format!("pgrep -f 'sleep {secs}' || echo gone");
    assert_eq!(
        crate::text(&exec(mcp, s, &probe, json!({})).await["stdout"]),
        "gone\n"
    );
}

/// A world whose `other` alias logs in as `user`, connected.
pub async fn logged_in_as(
    user: &str,
    extra: &[(&str, &str)],
) -> (TestEnv, McpClient, (String, String)) {
    logged_in_with(user, &SshdOptions::default(), extra).await
}

/// Like [`logged_in_as`], with sshd options.
pub async fn logged_in_with(
    user: &str,
    opts: &SshdOptions,
    extra: &[(&str, &str)],
) -> (TestEnv, McpClient, (String, String)) {
    let env = TestEnv::with(opts, extra);
    env.sshd.add_host_block(&format!(
        "Host other\n  HostName 127.0.0.1\n  Port {}\n  User {user}",
        env.sshd.port
    ));
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "other"})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["remote"]["user"], user, "remote facts are exact too: {r}");
    let session = session_of(&r);
    (env, mcp, session)
}

/// The sshd processes serving `env`'s connections (the listener's descendants named sshd).
pub fn connection_sshds(env: &sshmcp_tests::TestEnv) -> Vec<i32> {
    let named_sshd = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.starts_with("sshd"))
    };
    env.sshd
        .pids()
        .into_iter()
        .flat_map(sshmcp_tests::process::descendants)
        .filter(named_sshd)
        .map(|pid| pid as i32)
        .collect()
}
