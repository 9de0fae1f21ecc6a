//! Human oversight through the real binaries: the audit trail as `sshmcp history` reads it.

use std::os::unix::fs::PermissionsExt as _;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use sshmcp_tests::{SshdOptions, TestEnv};

use crate::{connected_with, exec};

/// `sshmcp history --json ARGS`, parsed, once it shows at least `at_least` lines: the daemon
/// writes the trail from a thread of its own, just after each call answered.
fn history(env: &TestEnv, args: &[&str], at_least: usize) -> Vec<Value> {
    history_until(env, args, |lines| lines.len() >= at_least)
}

/// `sshmcp history --json ARGS`, parsed, once `ready` holds for its lines (up to 10 s).
pub(crate) fn history_until(
    env: &TestEnv,
    args: &[&str],
    ready: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut argv = vec!["history", "--json", "--limit", "1000"];
        argv.extend_from_slice(args);
        let out = env.cli(&argv);
        assert!(out.status.success(), "{out:?}");
        let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        if ready(&lines) {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "history never got there: {lines:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn an_exec_is_in_the_trail_with_its_session_summary_exit_code_and_client() {
    // Trace logging: no level may write a session key anywhere (every test's end checks
    // every file of its world for the keys it was given).
    let (env, mcp, s) = connected_with(&SshdOptions::default(), &[("SSHMCP_LOG", "trace")]).await;
    let marker = "trail-marker-7f3a";
    let long = format!("echo {marker}; exit 3 # {}", "x".repeat(300));
    let r = exec(&mcp, &s, &long, json!({})).await;
    assert_eq!(r["exit_code"], 3, "{r}");
    let missing = mcp
        .call(
            "stat",
            json!({"session_id": s.0, "session_key": s.1, "path": "/nonexistent-trail"}),
        )
        .await;
    assert_eq!(missing["error"]["code"], "remote_path_not_found");

    let lines = history(&env, &[], 3);
    let (stat, exec_line, connect) = (&lines[0], &lines[1], &lines[2]);
    assert_eq!(connect["tool"], "connect");
    assert_eq!(connect["summary"], "testbed");
    assert_eq!(exec_line["tool"], "exec");
    assert_eq!(exec_line["session_id"], s.0.as_str());
    assert_eq!(exec_line["target"], "testbed");
    assert_eq!(exec_line["server_host"], "127.0.0.1");
    assert_eq!(exec_line["server_port"], env.sshd.port);
    assert_eq!(exec_line["outcome"], "ok");
    assert_eq!(exec_line["exit_code"], 3);
    assert_eq!(exec_line["client"], "sshmcp-tests 0");
    let summary = exec_line["summary"].as_str().unwrap();
    assert!(summary.starts_with(&format!("echo {marker}")), "{summary}");
    // The first 200 bytes, less the last 42 of a word the cut falls in (it could be most of
    // a session key): the command ends in 300 `x`. Then the whole command's size, so that
    // a person knows more ran than the line shows.
    let (kept, said) = summary.split_once('…').expect("the cut is marked");
    assert!(long.starts_with(kept), "{summary}");
    assert_eq!(
        kept.len(),
        200 - 42,
        "a command is kept to its first 200 bytes"
    );
    assert_eq!(said, format!(" [{} bytes in all]", long.len()));
    assert!(exec_line["duration"].as_f64().unwrap() > 0.0);
    assert!(is_trail_time(exec_line["time"].as_str().unwrap()));
    assert_eq!(stat["tool"], "stat");
    assert_eq!(stat["outcome"], "remote_path_not_found");
    assert_eq!(stat["summary"], "/nonexistent-trail");
    assert!(stat.get("exit_code").is_none());

    // What an agent sends cannot drive the person's terminal: escapes are shown, not obeyed.
    let r = exec(&mcp, &s, "true # \u{1b}[2K\rinnocent", json!({})).await;
    assert_eq!(r["exit_code"], 0);
    history(&env, &["--session", &s.0], 4);
    let table = String::from_utf8_lossy(&env.cli(&["history"]).stdout).into_owned();
    assert!(!table.contains('\u{1b}'), "{table:?}");
    assert!(table.contains("\\u{1b}[2K innocent"), "{table}");
    let trail = env.state_dir.join("audit.jsonl");
    let mode = std::fs::metadata(&trail).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let text = std::fs::read_to_string(&trail).unwrap();
    assert!(!text.contains(&s.1), "a session key in the trail");

    // Filters: by session, by target, newest first with a limit, and the table.
    assert_eq!(history(&env, &["--session", &s.0], 4).len(), 4);
    assert!(history(&env, &["--session", "s-none"], 0).is_empty());
    assert_eq!(history(&env, &["--target", "127.0.0.1"], 4).len(), 4);
    let out = env.cli(&["history", "--json", "--limit", "1"]);
    let newest: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!((newest.len(), &newest[0]["tool"]), (1, &json!("exec")));
    let out = env.cli(&["history"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("TIME (UTC) "), "{table}");
    assert!(
        table.contains("exit 3") && table.contains(marker),
        "{table}"
    );
    // A time it cannot read is wrong usage, as clap's own refusals are.
    let out = env.cli(&["history", "--since", "yesterday"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("hint:"));
    mcp.close().await;
}

/// History says how each call went: a command its timeout ended is `timed_out`, a failed
/// call carries its code and why; `--outcome` keeps one outcome, and `--since` reads times
/// as people write them (an offset, a date, a span back from now).
#[tokio::test]
async fn history_says_how_each_call_went_and_reads_times_as_people_write_them() {
    let (env, mcp, s) = connected_with(&SshdOptions::default(), &[]).await;
    let sleep = format!("sleep {}", sshmcp_tests::process::unique_sleep(30));
    let r = exec(&mcp, &s, &sleep, json!({"timeout": 1})).await;
    assert_eq!(r["timed_out"], true, "{r}");
    let port = crate::connect::closed_port();
    let r = mcp
        .call(
            "connect",
            json!({"host": "127.0.0.1", "user": env.sshd.user, "port": port}),
        )
        .await;
    assert_eq!(r["error"]["code"], "connection_start_failed", "{r}");

    let lines = history(&env, &[], 3);
    let (failed, timed_out) = (&lines[0], &lines[1]);
    assert_eq!(
        (&failed["tool"], &failed["outcome"]),
        (&json!("connect"), &json!("connection_start_failed"))
    );
    assert_eq!(failed["message"], r["error"]["message"], "{failed}");
    assert_eq!(
        (&timed_out["tool"], &timed_out["outcome"]),
        (&json!("exec"), &json!("timed_out"))
    );
    assert!(timed_out.get("message").is_none(), "{timed_out}");
    let only = history(&env, &["--outcome", "timed_out"], 1);
    assert_eq!(only.len(), 1, "{only:?}");
    assert_eq!(only[0]["summary"], sleep.as_str());
    let table = String::from_utf8_lossy(&env.cli(&["history"]).stdout).into_owned();
    let why = r["error"]["message"].as_str().unwrap();
    let first_line = why.lines().next().unwrap();
    assert!(
        table
            .lines()
            .any(|l| l.contains("connection_start_failed") && l.contains(first_line)),
        "{table}"
    );

    // The same moment three ways (an hour back, with an offset, in UTC), and today's date:
    // every line is newer.
    let all = lines.len();
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    let utc = sshmcp_proto::time::rfc3339(hour_ago);
    let (date, clock) = (&utc[..10], &utc[11..19]);
    // An hour ago in UTC is this hour at +01:00.
    let this_hour = sshmcp_proto::time::rfc3339(hour_ago + Duration::from_secs(3600));
    let offset = format!("{}T{}+01:00", &this_hour[..10], &this_hour[11..19]);
    for since in ["1h", offset.as_str(), &format!("{date}T{clock}Z")] {
        assert_eq!(
            history(&env, &["--since", since], all).len(),
            all,
            "--since {since}"
        );
    }
    // The date of the oldest line (so a run across midnight holds too).
    let day = lines[all - 1]["time"].as_str().unwrap()[..10].to_string();
    assert_eq!(history(&env, &["--since", &day], all).len(), all);
    let tomorrow =
        sshmcp_proto::time::rfc3339(std::time::SystemTime::now() + Duration::from_secs(86_400));
    assert!(history(&env, &["--since", &tomorrow[..10]], 0).is_empty());

    // A kill's line says what it found, not only that it answered.
    let r = crate::on_session(&mcp, &s, "task_kill", json!({"pid": 1})).await;
    assert_eq!(r["result"], "invalid_pid", "{r}");
    let lines = history_until(&env, &[], |l| {
        l.first().is_some_and(|l| l["tool"] == "task_kill")
    });
    assert_eq!(
        (&lines[0]["outcome"], &lines[0]["message"]),
        (&json!("ok"), &json!("invalid_pid")),
        "{}",
        lines[0]
    );
    mcp.close().await;
}

/// An `exec` under way (an agent waiting for it) shows in `watch` with its first line and the
/// last line of its output so far, and is gone once the call answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_shows_an_exec_under_way_with_its_last_line() {
    let (env, mcp, s) = crate::connected().await;
    let marker = format!("step-{}", std::process::id());
    // The command sleeps until the test kills it: the watcher sees it under way for as long
    // as it looks.
    let secs = sshmcp_tests::process::unique_sleep(60);
    let sleep = format!("sleep {secs}");
    let agent = env.mcp().await;
    // The agent echoes its own session key: the person watching is shown it redacted.
    let key = s.1.clone();
    let waiting = tokio::spawn({
        let (s, command) = (s.clone(), format!("echo {marker} {key}; {sleep}"));
        async move {
            let r = crate::exec(&agent, &s, &command, json!({"timeout": 60})).await;
            agent.close().await;
            r
        }
    });
    let deadline = Instant::now() + Duration::from_secs(15);
    let exec = loop {
        let out = env.cli(&["watch", "--once", "--json"]);
        let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
        let execs = snapshot["sessions"][0]["execs"].clone();
        if execs[0]["last_line"] == format!("{marker} [session key]") {
            assert!(!snapshot.to_string().contains(&key), "{snapshot}");
            break execs[0].clone();
        }
        assert!(Instant::now() < deadline, "never shown: {snapshot}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(exec["tool"], "exec", "{exec}");
    let preview = format!("echo {marker} [session key]; {sleep}");
    assert_eq!(exec["preview"], preview, "{exec}");
    let text = String::from_utf8_lossy(&env.cli(&["watch", "--once"]).stdout).into_owned();
    assert!(
        text.contains(&format!("‹{marker} [session key]›")),
        "{text}"
    );
    assert!(!text.contains(&key), "{text}");
    remote_pkill(&mcp, &s, &secs).await;
    let answered = waiting.await.unwrap();
    assert_eq!(answered["ok"], true, "{answered}");
    let out = env.cli(&["watch", "--once", "--json"]);
    let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(snapshot["sessions"][0]["execs"], json!([]), "{snapshot}");
    mcp.close().await;
}

/// The id `watch` shows for the one `exec` under way once it printed `bytes`.
pub(crate) fn exec_under_way(env: &TestEnv, bytes: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let out = env.cli(&["watch", "--once", "--json"]);
        let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
        let execs = &snapshot["sessions"][0]["execs"];
        if execs[0]["bytes"] == bytes {
            return execs[0]["id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "never shown: {snapshot}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `sshmcp` with `args` started beside the test (a follower), its output piped.
fn cli_child(env: &TestEnv, args: &[&str]) -> std::process::Child {
    std::process::Command::new(sshmcp_tests::bins::path("sshmcp"))
        .args(args)
        .env_clear()
        .envs(env.env_vars())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Closes an MCP client the test's tasks shared, once they are done with it.
async fn close_shared(agent: std::sync::Arc<sshmcp_tests::McpClient>) {
    std::sync::Arc::into_inner(agent)
        .expect("the tasks that shared the client ended")
        .close()
        .await;
}

/// The first line a follower printed on stdout (it reads on while the test goes on).
fn first_line(
    follower: &mut std::process::Child,
) -> (String, std::io::BufReader<std::process::ChildStdout>) {
    use std::io::BufRead as _;
    let mut out = std::io::BufReader::new(follower.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    (line, out)
}

/// What a follower printed after its first line, how it exited and what it said on stderr.
fn rest_of(
    follower: std::process::Child,
    mut out: std::io::BufReader<std::process::ChildStdout>,
) -> (String, Option<i32>, String) {
    use std::io::Read as _;
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let ended = follower.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&ended.stderr).into_owned();
    (rest, ended.status.code(), said)
}

/// An `exec` an agent waits for is read and stopped by the id `watch` shows: `sshmcp output`
/// prints its streams apart, a follower (`-f`) prints what comes while it runs and ends with
/// the call (as killed, or with the command's own exit status), `sshmcp kill` stops it (the
/// agent's call answers with the signal), and a second kill is refused; the trail says the
/// person did it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_and_kill_reach_an_exec_under_way_by_the_id_watch_shows() {
    let (env, mcp, s) = crate::connected().await;
    let marker = format!("under-way-{}", std::process::id());
    let secs = sshmcp_tests::process::unique_sleep(60);
    let agent = std::sync::Arc::new(env.mcp().await);
    let waiting = tokio::spawn({
        let command = format!("echo {marker}-err >&2; echo {marker}; sleep {secs}");
        let (s, agent) = (s.clone(), agent.clone());
        async move { crate::exec(&agent, &s, &command, json!({"timeout": 60})).await }
    });
    let id = exec_under_way(&env, 2 * marker.len() + 6);
    assert!(id.starts_with("cmd-"), "{id}");
    let out = env.cli(&["output", &id[..12]]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{marker}\n"));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("{marker}-err\n")
    );
    let mut follower = cli_child(&env, &["output", "-f", &id]);
    let (line, out) = first_line(&mut follower);
    assert_eq!(line, format!("{marker}\n"));
    let killed = env.cli(&["kill", "--yes", &id]);
    assert!(killed.status.success(), "{killed:?}");
    assert_eq!(
        String::from_utf8_lossy(&killed.stdout),
        format!("command {id} of session {}: killed\n", s.0)
    );
    let answered = waiting.await.unwrap();
    assert_eq!(answered["ok"], true, "{answered}");
    assert!(answered["signal"].is_string(), "{answered}");
    assert_eq!(
        (&answered["exit_code"], &answered["stopped_by"]),
        (&Value::Null, &json!("person")),
        "the agent learns who ended it: {answered}"
    );
    // The trail says how it ended: by that signal, not plainly ok.
    let lines = history_until(&env, &["--session", &s.0], |lines| {
        lines
            .iter()
            .any(|l| l["tool"] == "exec" && l["summary"].as_str().unwrap().contains(&secs))
    });
    let line = lines.iter().find(|l| l["tool"] == "exec").unwrap();
    assert_eq!(line["signal"], answered["signal"], "{line}");
    let (rest, code, said) = rest_of(follower, out);
    assert_eq!((rest.as_str(), code), ("", Some(1)), "{said}");
    assert!(said.contains(&format!("sshmcp: {id} killed")), "{said}");
    let killed_id = id;
    let again = env.cli(&["kill", "--yes", &killed_id]);
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already ended (killed"),
        "{again:?}"
    );

    // A follower of an exec that ends by itself ends with its exit status.
    let go = format!("/tmp/{marker}.go");
    let command = format!(
        "echo {marker}-second; while [ ! -e {go} ]; do sleep 0.05; done; rm -f {go}; exit 4"
    );
    exec(&mcp, &s, &format!("rm -f {go}"), json!({})).await;
    let waiting = tokio::spawn({
        let (s, agent) = (s.clone(), agent.clone());
        async move { crate::exec(&agent, &s, &command, json!({"timeout": 60})).await }
    });
    let id = exec_under_way(&env, marker.len() + "-second\n".len());
    let mut follower = cli_child(&env, &["output", "-f", &id]);
    let (line, out) = first_line(&mut follower);
    assert_eq!(line, format!("{marker}-second\n"));
    exec(&mcp, &s, &format!("touch {go}"), json!({})).await;
    assert_eq!(waiting.await.unwrap()["exit_code"], 4);
    let (rest, code, said) = rest_of(follower, out);
    assert_eq!((rest.as_str(), code), ("", Some(4)), "{said}");
    assert!(
        said.contains(&format!("sshmcp: {id} completed, exit 4")),
        "{said}"
    );

    let by_the_person = format!("{killed_id} (by the person: sshmcp kill)");
    history_until(&env, &["--session", &s.0], |lines| {
        lines
            .iter()
            .any(|l| l["tool"] == "command_kill" && l["summary"] == by_the_person.as_str())
    });
    close_shared(agent).await;
    mcp.close().await;
}

/// A follower of an `exec` reads on across its hand-off (the handle takes the id `watch`
/// showed) to the end, and exits with the command's status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_reads_an_exec_on_across_its_hand_off() {
    let (env, mcp, s) = crate::connected().await;
    let marker = format!("hand-off-{}", std::process::id());
    let go = format!("/tmp/{marker}.go");
    exec(&mcp, &s, &format!("rm -f {go}"), json!({})).await;
    let agent = std::sync::Arc::new(env.mcp().await);
    let command = format!(
        "echo {marker}-first; while [ ! -e {go} ]; do sleep 0.05; done; echo {marker}-second; \
         rm -f {go}; exit 3"
    );
    // Handed off after 5 s: the follower's first read is of the call under way.
    let waiting = tokio::spawn({
        let (s, agent) = (s.clone(), agent.clone());
        async move {
            crate::exec(
                &agent,
                &s,
                &command,
                json!({"handoff_after": 5, "timeout": 60}),
            )
            .await
        }
    });
    let id = exec_under_way(&env, marker.len() + "-first\n".len());
    let mut follower = cli_child(&env, &["output", "-f", &id]);
    let (line, out) = first_line(&mut follower);
    assert_eq!(line, format!("{marker}-first\n"));
    let answered = waiting.await.unwrap();
    assert_eq!(
        (&answered["handed_off"], &answered["handle_id"]),
        (&json!(true), &json!(id)),
        "{answered}"
    );
    exec(&mcp, &s, &format!("touch {go}"), json!({})).await;
    let (rest, code, said) = rest_of(follower, out);
    assert_eq!(
        (rest, code),
        (format!("{marker}-second\n"), Some(3)),
        "{said}"
    );
    close_shared(agent).await;
    mcp.close().await;
}

/// A follower of a handle reads on across a daemon restart: it waits for the next daemon,
/// which took the handle back (its command cut off by the restart, so `lost`), and ends as
/// the handle did.
#[tokio::test]
async fn a_follower_reads_on_across_a_daemon_restart() {
    let (env, mcp, s) = crate::connected().await;
    let marker = format!("restarted-{}", std::process::id());
    let secs = sshmcp_tests::process::unique_sleep(120);
    let command = format!("echo {marker}-first; sleep {secs}");
    let r = crate::on_session(&mcp, &s, "command_start", json!({"command": command})).await;
    let id = r["handle_id"].as_str().unwrap().to_string();
    let mut follower = cli_child(&env, &["output", "-f", &id]);
    let (line, out) = first_line(&mut follower);
    assert_eq!(line, format!("{marker}-first\n"));
    let restarted = env.cli(&["daemon", "restart"]);
    assert!(restarted.status.success(), "{restarted:?}");
    let (rest, code, said) = rest_of(follower, out);
    assert_eq!((rest.as_str(), code), ("", Some(1)), "{said}");
    assert!(said.contains("the daemon went away"), "{said}");
    assert!(said.contains(&format!("sshmcp: {id} lost")), "{said}");
    mcp.close().await;
}

/// An `exec` still waiting for a channel (nothing of it runs yet) is stopped by the person
/// before it starts: it never runs, and the agent's call says the user stopped it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_waiting_for_a_channel_is_stopped_before_it_runs() {
    let (env, mcp, s) = crate::connected_with(&SshdOptions::allowing_sessions(2), &[]).await;
    let secs = sshmcp_tests::process::unique_sleep(120);
    for _ in 0..2 {
        let r = crate::on_session(
            &mcp,
            &s,
            "command_start",
            json!({"command": format!("sleep {secs}")}),
        )
        .await;
        assert_eq!(r["status"], "running", "{r}");
    }
    let marker = format!("never-ran-{}", std::process::id());
    let agent = std::sync::Arc::new(env.mcp().await);
    let waiting = tokio::spawn({
        let (s, agent) = (s.clone(), agent.clone());
        let command = format!("echo {marker}");
        async move { crate::exec(&agent, &s, &command, json!({})).await }
    });
    let deadline = Instant::now() + Duration::from_secs(15);
    let id = loop {
        let out = env.cli(&["watch", "--once", "--json"]);
        let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
        let execs = snapshot["sessions"][0]["execs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if let Some(exec) = execs
            .iter()
            .find(|e| e["preview"] == format!("echo {marker}"))
        {
            break exec["id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "never shown: {snapshot}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = env.cli(&["kill", "--yes", &id]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).ends_with(": cancelled\n"),
        "{out:?}"
    );
    let answered = waiting.await.unwrap();
    assert_eq!(crate::code(&answered), "policy_denied", "{answered}");
    assert!(
        answered["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sshmcp kill"),
        "{answered}"
    );
    mcp.call("disconnect", json!({"session_id": s.0})).await;
    close_shared(agent).await;
    mcp.close().await;
}

/// A tmux server of the test's own (its socket named for the test), killed when dropped.
struct Tmux(String);

impl Tmux {
    fn run(&self, args: &[&str]) -> std::process::Output {
        let out = std::process::Command::new("tmux")
            .args(["-L", &self.0, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux (scripts/test.sh installs it)");
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        out
    }

    /// The pane as shown, with its colours as escape sequences.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-e", "-t", "w"]).stdout)
            .into_owned()
    }

    /// Waits until the pane shows what `shown` accepts (a terminal has no event to wait on).
    fn until(&self, what: &str, shown: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let screen = self.screen();
            if shown(&screen) {
                return screen;
            }
            assert!(Instant::now() < deadline, "never {what}:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["-L", &self.0, "kill-server"])
            .output();
    }
}

/// `sshmcp watch` in a real terminal (tmux): it draws on the alternate screen, colours a
/// command that succeeded green, redraws as an `exec` comes and goes, and on Ctrl-C exits 0
/// with the terminal's own screen back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_in_a_terminal_redraws_in_colour_and_ctrl_c_restores_the_screen() {
    let (env, mcp, s) = crate::connected().await;
    let done = crate::on_session(&mcp, &s, "command_start", json!({"command": "true"})).await;
    let ended = crate::on_session(
        &mcp,
        &s,
        "command_status",
        json!({"handle_id": done["handle_id"], "wait_seconds": 30}),
    )
    .await;
    assert_eq!(ended["status"], "completed", "{ended}");
    let tmux = Tmux(format!(
        "sshmcp-watch-{}",
        sshmcp_tests::process::unique_sleep(1)
    ));
    let bin = sshmcp_tests::bins::path("sshmcp").display().to_string();
    let vars: Vec<String> = env
        .env_vars()
        .into_iter()
        .filter(|(k, _)| k != "TERM" && k != "NO_COLOR")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    // tmux does not always learn a pane's exit status: a shell around watch writes it down
    // (its INT trap keeps it waiting for watch, whose own handling of Ctrl-C is tested).
    let status_file = env.local_root.with_file_name("watch.status");
    let wrapper = format!("trap true INT; \"$@\"; echo $? > {}", status_file.display());
    let mut argv = vec![
        "new-session",
        "-d",
        "-x",
        "300",
        "-y",
        "40",
        "-s",
        "w",
        "sh",
        "-c",
        &wrapper,
        "sh",
        "env",
        "-i",
    ];
    argv.extend(vars.iter().map(String::as_str));
    argv.extend(["TERM=screen", &bin, "watch"]);
    tmux.run(&argv);
    tmux.run(&["set-option", "-t", "w", "remain-on-exit", "on"]);
    let handle = done["handle_id"].as_str().unwrap();
    let frame = tmux.until("the session and its command", |screen| {
        screen.contains(&s.0) && screen.contains(handle)
    });
    assert!(frame.contains("Ctrl-C to quit"), "{frame}");
    let green = frame
        .lines()
        .find(|line| line.contains(handle))
        .unwrap()
        .to_string();
    assert!(green.contains("\x1b[32m"), "not green: {green:?}");

    let marker = format!("redrawn-{}", std::process::id());
    let go = format!("/tmp/{marker}.go");
    exec(&mcp, &s, &format!("rm -f {go}"), json!({})).await;
    let agent = std::sync::Arc::new(env.mcp().await);
    let waiting = tokio::spawn({
        let (s, agent) = (s.clone(), agent.clone());
        let command =
            format!("echo {marker}; while [ ! -e {go} ]; do sleep 0.05; done; rm -f {go}");
        async move { crate::exec(&agent, &s, &command, json!({"timeout": 60})).await }
    });
    tmux.until("the exec under way", |screen| {
        screen.contains(&format!("‹{marker}›"))
    });
    exec(&mcp, &s, &format!("touch {go}"), json!({})).await;
    assert_eq!(waiting.await.unwrap()["exit_code"], 0);
    tmux.until("the exec gone", |screen| {
        !screen.contains(&marker) && screen.contains(&s.0)
    });

    tmux.run(&["send-keys", "-t", "w", "C-c"]);
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Ok(status) = std::fs::read_to_string(&status_file)
            && status.ends_with('\n')
        {
            break status;
        }
        assert!(Instant::now() < deadline, "watch did not exit on Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status, "0\n", "watch's exit status on Ctrl-C");
    let after = tmux.screen();
    assert!(
        !after.contains("Ctrl-C to quit") && !after.contains(&s.0),
        "the terminal's own screen is not back:\n{after}"
    );
    close_shared(agent).await;
    mcp.close().await;
}

/// `sshmcp kill` on a terminal asks first, naming what a prefix stands for (the whole id,
/// the command and its session); "n" stops nothing.
#[tokio::test]
async fn kill_on_a_terminal_names_what_it_would_stop_and_a_no_stops_nothing() {
    let (env, mcp, s) = crate::connected().await;
    let secs = sshmcp_tests::process::unique_sleep(120);
    let started = crate::on_session(
        &mcp,
        &s,
        "command_start",
        json!({"command": format!("sleep {secs}")}),
    )
    .await;
    let handle = started["handle_id"].as_str().unwrap().to_string();
    let tmux = Tmux(format!(
        "sshmcp-kill-{}",
        sshmcp_tests::process::unique_sleep(1)
    ));
    let status_file = env.local_root.with_file_name("kill.status");
    let wrapper = format!("\"$@\"; echo $? > {}", status_file.display());
    let bin = sshmcp_tests::bins::path("sshmcp").display().to_string();
    let vars: Vec<String> = env
        .env_vars()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut argv = vec!["new-session", "-d", "-x", "300", "-y", "10", "-s", "w"];
    argv.extend(["sh", "-c", &wrapper, "sh", "env", "-i"]);
    argv.extend(vars.iter().map(String::as_str));
    argv.extend([bin.as_str(), "kill", &handle[..10]]);
    tmux.run(&argv);
    let asked = format!(
        "stop {handle}, the command `sleep {secs}` of session {} (testbed), which an agent \
         started? [y/N]",
        s.0
    );
    tmux.until("the question", |screen| screen.contains(&asked));
    tmux.run(&["send-keys", "-t", "w", "n", "Enter"]);
    let deadline = Instant::now() + Duration::from_secs(15);
    while !std::fs::read_to_string(&status_file).is_ok_and(|s| s.ends_with('\n')) {
        assert!(Instant::now() < deadline, "kill never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(std::fs::read_to_string(&status_file).unwrap(), "1\n");
    let r = crate::on_session(&mcp, &s, "command_status", json!({"handle_id": handle})).await;
    assert_eq!(r["status"], "running", "{r}");
    crate::on_session(&mcp, &s, "command_kill", json!({"handle_id": handle})).await;
    mcp.close().await;
}

/// The trail's times are RFC 3339 UTC with milliseconds, as `--since` compares them.
fn is_trail_time(time: &str) -> bool {
    time.len() == 24 && time.ends_with('Z') && time.as_bytes()[10] == b'T'
}

/// The trail is turned off by the config file (or a flag), never by the environment a client
/// passes to the daemon it starts; either way each start says which config file, how many
/// policy entries and whether calls are kept.
#[tokio::test]
async fn the_trail_can_be_turned_off_only_by_the_config_and_a_broken_trail_never_fails_a_call() {
    let (_dir, config) = with_config("[[policy]]\nmatch = [\"nowhere\"]\nsudo = false\n");
    let config_var = config.display().to_string();
    let (env, mcp, s) = connected_with(
        &SshdOptions::default(),
        &[("SSHMCP_CONFIG", &config_var), ("SSHMCP_NO_AUDIT", "1")],
    )
    .await;
    let r = exec(&mcp, &s, "echo env-cannot-hide-this", json!({})).await;
    assert_eq!(r["exit_code"], 0);
    let lines = history_until(&env, &[], |lines| {
        lines
            .iter()
            .any(|l| l["summary"] == "echo env-cannot-hide-this")
    });
    let start = lines.iter().find(|l| l["tool"] == "daemon_start").unwrap();
    assert_eq!(
        start["summary"],
        format!("config {config_var}; 1 policy entries; audit trail on; 0 sessions taken back"),
        "{start}"
    );
    std::fs::write(&config, "audit = false\n").unwrap();
    let out = env.cli(&["daemon", "restart"]);
    assert!(out.status.success(), "{out:?}");
    let r = exec(&mcp, &s, "echo not-kept", json!({})).await;
    assert_eq!(r["exit_code"], 0);
    let lines = history_until(&env, &[], |lines| {
        lines.iter().filter(|l| l["tool"] == "daemon_start").count() == 2
    });
    assert_eq!(
        lines[0]["summary"],
        format!(
            "config {config_var}; 0 policy entries; audit trail off (calls are not written); \
             1 sessions taken back"
        ),
        "{lines:?}"
    );
    // The first daemon's last line says why it left and that it left the session up.
    assert_eq!(lines[1]["tool"], "daemon_stop", "{lines:?}");
    assert_eq!(
        lines[1]["summary"], "restart; 1 sessions left up for the next daemon",
        "{lines:?}"
    );
    assert!(lines.iter().all(|l| l["summary"] != "echo not-kept"));
    mcp.close().await;

    // The trail's place taken by a directory: every write fails, every call still answers.
    let env = TestEnv::new();
    std::fs::create_dir_all(env.state_dir.join("audit.jsonl")).unwrap();
    std::fs::set_permissions(&env.state_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mcp = env.mcp().await;
    let s = crate::connect(&mcp).await;
    for _ in 0..3 {
        let r = exec(&mcp, &s, "true", json!({})).await;
        assert_eq!(r["exit_code"], 0, "{r}");
    }
    // Every line lost is counted (connect and three execs), and the spell logged once.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = env.cli(&["watch", "--once", "--json"]);
        let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
        if snapshot["audit"]["lost"].as_u64().unwrap() >= 4 {
            assert_eq!(snapshot["audit"]["written"], 0, "{snapshot}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "lost lines not counted: {snapshot}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = env.daemon_log();
    assert_eq!(
        log.matches("cannot write the audit trail").count(),
        1,
        "logged once per spell"
    );
    mcp.close().await;
}

/// A world whose daemon reads `config` (a config.toml text) from a file the test can rewrite.
fn with_config(config: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, config).unwrap();
    (dir, file)
}

const READ_ONLY_TESTBED: &str = "[[policy]]\nmatch = [\"testbed\"]\nread_only = true\n";

#[tokio::test]
async fn a_reloaded_read_only_policy_refuses_every_change_and_nothing_reaches_the_host() {
    let (_dir, config) = with_config("");
    let config_var = config.display().to_string();
    let (env, mcp, s) =
        connected_with(&SshdOptions::default(), &[("SSHMCP_CONFIG", &config_var)]).await;
    let dir = crate::fresh_dir(&mcp, &s, "policy").await;
    crate::remote_out(
        &mcp,
        &s,
        &format!("printf original > {dir}/keep.txt; chmod 777 {dir}"),
    )
    .await;
    std::fs::create_dir_all(&env.local_root).unwrap();
    std::fs::write(env.local_root.join("up.txt"), "up").unwrap();

    // The policy changes under the live session.
    std::fs::write(&config, READ_ONLY_TESTBED).unwrap();
    let out = env.cli(&["daemon", "reload"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(said.contains("policy reloaded: 1 entries"), "{said}");
    assert!(said.contains(&format!("sessions {}", s.0)), "{said}");

    let keep = format!("{dir}/keep.txt");
    let refused = [
        ("exec", json!({"command": format!("touch {dir}/exec")})),
        ("sudo_exec", json!({"command": format!("touch {dir}/sudo")})),
        (
            "command_start",
            json!({"command": format!("touch {dir}/cmd")}),
        ),
        (
            "task_launch",
            json!({"command": format!("touch {dir}/task")}),
        ),
        (
            "write_file",
            json!({"path": format!("{dir}/write"), "content": "x"}),
        ),
        (
            "edit_file",
            json!({"path": keep, "old_text": "original", "new_text": "changed"}),
        ),
        ("make_directory", json!({"path": format!("{dir}/mk")})),
        ("remove_path", json!({"path": keep})),
        (
            "copy_path",
            json!({"source": keep, "destination": format!("{dir}/copy")}),
        ),
        (
            "move_path",
            json!({"source": keep, "destination": format!("{dir}/moved")}),
        ),
        (
            "upload_start",
            json!({"local_path": "up.txt", "remote_path": format!("{dir}/up")}),
        ),
        (
            "forward_start",
            json!({"kind": "local", "listen_port": 0, "target_host": "127.0.0.1", "target_port": env.sshd.port}),
        ),
        ("command_kill", json!({"handle_id": "cmd-0000000000000000"})),
        ("task_kill", json!({"pid": 1})),
    ];
    for (tool, args) in &refused {
        let r = crate::on_session(&mcp, &s, tool, args.clone()).await;
        refused_by(&r, &["[\"testbed\"]", "read_only = true"]);
    }
    // Nothing reached the host (its disk is this machine's).
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["keep.txt"]);
    assert_eq!(std::fs::read_to_string(&keep).unwrap(), "original");

    // Looking and downloading still work.
    let r = crate::on_session(&mcp, &s, "stat", json!({"path": keep})).await;
    assert_eq!(r["size"], 8, "{r}");
    let r = crate::on_session(&mcp, &s, "list_directory", json!({"path": dir})).await;
    assert_eq!(r["ok"], true, "{r}");
    let r = crate::on_session(
        &mcp,
        &s,
        "read_file_range",
        json!({"path": keep, "length": 8}),
    )
    .await;
    assert_eq!(r["data"], "original", "{r}");
    let r = crate::on_session(
        &mcp,
        &s,
        "download_start",
        json!({"remote_path": keep, "local_path": "keep.txt"}),
    )
    .await;
    let done = crate::transfers::until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(
        crate::on_session(&mcp, &s, "command_list", json!({})).await["ok"],
        true
    );
    // Every refusal is in the trail, with its tool.
    let lines = history_until(&env, &["--session", &s.0], |lines| {
        lines
            .iter()
            .filter(|l| l["outcome"] == "policy_denied")
            .count()
            >= refused.len()
    });
    let mut denied: Vec<&str> = lines
        .iter()
        .filter(|l| l["outcome"] == "policy_denied")
        .map(|l| l["tool"].as_str().unwrap())
        .collect();
    denied.sort_unstable();
    let mut expected: Vec<&str> = refused.iter().map(|(tool, _)| *tool).collect();
    expected.sort_unstable();
    assert_eq!(denied, expected);

    // A file that does not parse keeps the policy in force, and says why.
    std::fs::write(&config, "[[policy]\nmatch = ").unwrap();
    let out = env.cli(&["daemon", "reload"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("stays in force") && err.contains("hint:"),
        "{err}"
    );
    let r = crate::exec(&mcp, &s, "true", json!({})).await;
    assert_eq!(crate::code(&r), "policy_denied");
    let out = env.cli(&["doctor"]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("the last reload failed"), "{report}");
    assert!(
        report.contains("FAIL  config") && report.contains("TOML parse error"),
        "doctor reads the file as the next daemon would: {report}"
    );
    // A restart would stop this daemon for one that cannot start: it does not.
    let before = env.daemon_pid();
    let out = env.cli(&["daemon", "restart"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("left as it is"), "{err}");
    assert_eq!(env.daemon_pid(), before);
    let r = crate::exec(&mcp, &s, "true", json!({})).await;
    assert_eq!(
        crate::code(&r),
        "policy_denied",
        "the same daemon answers: {r}"
    );

    // A file gone (an editor renaming it for a moment) does not lift the policy either.
    std::fs::remove_file(&config).unwrap();
    let out = env.cli(&["daemon", "reload"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let r = crate::exec(&mcp, &s, "true", json!({})).await;
    assert_eq!(crate::code(&r), "policy_denied");

    // SIGHUP reads it again too: an empty policy lets the session change the host again.
    std::fs::write(&config, "").unwrap();
    let reloads = env.daemon_log().matches("policy reloaded").count();
    let pid = env.daemon_pid().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while env.daemon_log().matches("policy reloaded").count() == reloads {
        assert!(Instant::now() < deadline, "SIGHUP did not reload");
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = crate::exec(&mcp, &s, &format!("touch {dir}/after"), json!({})).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(std::path::Path::new(&format!("{dir}/after")).exists());
    mcp.close().await;
}

/// A `policy_denied` answer whose message names each of `rules` (the entry's match, the rule).
fn refused_by(r: &Value, rules: &[&str]) {
    assert_eq!(crate::code(r), "policy_denied", "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        rules.iter().all(|rule| message.contains(rule)),
        "{rules:?}: {message}"
    );
}

#[tokio::test]
async fn a_read_only_address_stays_read_only_under_an_ipv4_mapped_spelling() {
    let (_dir, config) = with_config("[[policy]]\nmatch = [\"127.0.0.1\"]\nread_only = true\n");
    let config_var = config.display().to_string();
    let env = TestEnv::with(&SshdOptions::default(), &[("SSHMCP_CONFIG", &config_var)]);
    let mcp = env.mcp().await;
    for spelling in [
        "::ffff:127.0.0.1",
        "::FFFF:127.0.0.1",
        "0:0:0:0:0:ffff:7f00:1",
    ] {
        // OpenSSH knows a host key by the name it was given.
        env.sshd.trust_host_name(&spelling.to_ascii_lowercase());
        let target = json!({"host": spelling, "user": env.sshd.user, "port": env.sshd.port});
        let r = mcp.call("connect", target).await;
        assert_eq!(r["server_host"], "127.0.0.1", "{spelling}: {r}");
        let s = sshmcp_tests::mcp::session_of(&r);
        let r = exec(&mcp, &s, "echo x > mapped-spelling-wrote-this", json!({})).await;
        refused_by(&r, &["[\"127.0.0.1\"]", "read_only = true"]);
        let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
        assert_eq!(r["state"], "closed", "{r}");
    }
    mcp.close().await;
}

/// A read-only entry that met the server by its address follows its host key: a session
/// reached as `localhost` (another identity, another name) is read-only too, while the first
/// session lives, after it closed and after a restart (the keys an entry saw are kept), and
/// `doctor` and `watch` say which entry governs it and why.
#[tokio::test]
async fn a_read_only_server_stays_read_only_under_another_name_by_its_host_key() {
    let (_dir, config) = with_config("[[policy]]\nmatch = [\"127.0.0.1\"]\nread_only = true\n");
    let config_var = config.display().to_string();
    let env = TestEnv::with(&SshdOptions::default(), &[("SSHMCP_CONFIG", &config_var)]);
    let mcp = env.mcp().await;
    let by_address = crate::connect(&mcp).await;
    let r = exec(&mcp, &by_address, "true", json!({})).await;
    refused_by(&r, &["[\"127.0.0.1\"]", "read_only = true"]);
    let other = json!({"host": "localhost", "user": env.sshd.user, "port": env.sshd.port});
    for round in [
        "while the first lives",
        "after it closed",
        "after a restart",
    ] {
        if round == "after a restart" {
            let out = env.cli(&["daemon", "restart"]);
            assert!(out.status.success(), "{out:?}");
        }
        let r = mcp.call("connect", other.clone()).await;
        assert_eq!(r["server_host"], "localhost", "{round}: {r}");
        let s = sshmcp_tests::mcp::session_of(&r);
        let r = exec(&mcp, &s, "echo x > by-key-wrote-this", json!({})).await;
        refused_by(&r, &["read_only = true", "by its host key"]);
        let fingerprint = env.sshd.host_key_fingerprint();
        if round == "while the first lives" {
            let report = String::from_utf8_lossy(&env.cli(&["doctor"]).stdout).into_owned();
            assert!(
                report.contains(&format!(
                    "match 127.0.0.1: read_only (sessions {}; by host key: sessions {})",
                    by_address.0, s.0
                )),
                "{report}"
            );
            assert!(
                report.contains(&format!("host key {fingerprint}")),
                "{report}"
            );
            let out = env.cli(&["watch", "--once", "--json"]);
            let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
            let views = snapshot["sessions"].as_array().unwrap();
            let view = views
                .iter()
                .find(|v| v["session"]["session_id"] == s.0)
                .unwrap();
            assert_eq!(view["policy"], json!(["127.0.0.1 (by host key)"]), "{view}");
            let r = mcp
                .call("disconnect", json!({"session_id": by_address.0}))
                .await;
            assert_eq!(r["state"], "closed", "{r}");
        }
        let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
        assert_eq!(r["state"], "closed", "{r}");
    }
    mcp.close().await;
}

/// An entry added by a reload (the person's answer to an incident) governs at once every live
/// session of the server it names, also one reached under another name: the reload learns
/// the keys the live sessions' masters verified. A session whose key could not be learned
/// says so in `watch`.
#[tokio::test]
async fn a_reloaded_entry_follows_the_host_keys_of_live_sessions() {
    let (_dir, config) = with_config("");
    let config_var = config.display().to_string();
    let env = TestEnv::with(&SshdOptions::default(), &[("SSHMCP_CONFIG", &config_var)]);
    let mcp = env.mcp().await;
    let _by_address = crate::connect(&mcp).await;
    let other = json!({"host": "localhost", "user": env.sshd.user, "port": env.sshd.port});
    let r = mcp.call("connect", other).await;
    let by_name = sshmcp_tests::mcp::session_of(&r);
    let r = exec(&mcp, &by_name, "true", json!({})).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    std::fs::write(
        &config,
        "[[policy]]\nmatch = [\"127.0.0.1\"]\nread_only = true\n",
    )
    .unwrap();
    let out = env.cli(&["daemon", "reload"]);
    assert!(out.status.success(), "{out:?}");
    let r = exec(&mcp, &by_name, "true", json!({})).await;
    refused_by(&r, &["read_only = true", "by its host key"]);
    mcp.close().await;
}

/// A server reached through a local forward to its SSH port (any address, any port) is still
/// the server its host key says, under the entry that saw that key; and an entry may list
/// a host key itself.
#[tokio::test]
async fn a_forward_to_a_governed_servers_port_reaches_it_under_its_policy() {
    let (_dir, config) = with_config("");
    let config_var = config.display().to_string();
    let env = TestEnv::with(&SshdOptions::default(), &[("SSHMCP_CONFIG", &config_var)]);
    let fingerprint = env.sshd.host_key_fingerprint();
    std::fs::write(
        &config,
        format!(
            "[[policy]]\nmatch = [\"nothing-by-name\"]\nhost_keys = [\"{fingerprint}\"]\n\
             deny = [\"write_file\"]\n"
        ),
    )
    .unwrap();
    let mcp = env.mcp().await;
    let s = crate::connect(&mcp).await;
    let f = crate::on_session(
        &mcp,
        &s,
        "forward_start",
        json!({"kind": "local", "target_host": "127.0.0.1", "target_port": env.sshd.port}),
    )
    .await;
    let port = f["listen_port"].as_u64().expect("a forward") as u16;
    // The tunnel's end is a name OpenSSH has not met: its key is listed for it, as a user
    // would accept it.
    let known = std::fs::read_to_string(&env.sshd.known_hosts).unwrap();
    let key = known.lines().next().unwrap().split_once(' ').unwrap().1;
    std::fs::write(
        &env.sshd.known_hosts,
        format!("{known}[127.0.0.1]:{port} {key}\n"),
    )
    .unwrap();
    let r = mcp
        .call(
            "connect",
            json!({"host": "127.0.0.1", "user": env.sshd.user, "port": port}),
        )
        .await;
    assert_eq!(r["server_port"], port, "{r}");
    let tunneled = sshmcp_tests::mcp::session_of(&r);
    let r = crate::on_session(
        &mcp,
        &tunneled,
        "write_file",
        json!({"path": "tunnel-wrote-this", "content": "x"}),
    )
    .await;
    refused_by(&r, &["deny = [\"write_file\"]", "by its host key"]);
    mcp.close().await;
}

#[tokio::test]
async fn deny_lists_and_sudo_false_apply_by_server_host_and_doctor_shows_them() {
    let (_dir, config) = with_config(
        "[[policy]]\nmatch = [\"127.0.0.*\"]\nsudo = false\n\
         deny = [\"forward_start\", \"disconnect\", \"transfer_status\"]\n\n\
         [[policy]]\nmatch = [\"localhost\"]\ndeny = [\"connect\"]\n\n\
         [[policy]]\nmatch = [\"prod-*\"]\nread_only = true\n",
    );
    let config_var = config.display().to_string();
    let (env, mcp, s) =
        connected_with(&SshdOptions::default(), &[("SSHMCP_CONFIG", &config_var)]).await;
    let r = crate::exec(&mcp, &s, "true", json!({})).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    let r = crate::on_session(&mcp, &s, "sudo_exec", json!({"command": "true"})).await;
    refused_by(&r, &["sudo = false"]);
    let r = crate::on_session(
        &mcp,
        &s,
        "forward_start",
        json!({"kind": "dynamic", "listen_port": 0}),
    )
    .await;
    refused_by(&r, &["deny = [\"forward_start\"]"]);
    // A tool that reads only the daemon's own state is refused the same way, and its line
    // in the trail says what it asked about.
    let r = crate::on_session(
        &mcp,
        &s,
        "transfer_status",
        json!({"operation_id": "tr-refused-here"}),
    )
    .await;
    refused_by(&r, &["deny = [\"transfer_status\"]"]);
    let lines = history_until(&env, &["--session", &s.0], |lines| {
        lines.iter().any(|l| l["tool"] == "transfer_status")
    });
    let line = lines
        .iter()
        .find(|l| l["tool"] == "transfer_status")
        .unwrap();
    assert_eq!(line["outcome"], "policy_denied", "{line}");
    assert_eq!(line["summary"], "tr-refused-here", "{line}");
    // A connect refused by its server's name: no master starts.
    let r = mcp
        .call(
            "connect",
            json!({"host": "localhost", "user": env.sshd.user, "port": env.sshd.port}),
        )
        .await;
    assert_eq!(crate::code(&r), "policy_denied", "{r}");
    assert_eq!(
        mcp.call("session_list", json!({})).await["sessions"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let out = env.cli(&["doctor"]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("3 entries"), "{report}");
    assert!(
        report.contains(&format!(
            "match 127.0.0.*: sudo = false; deny forward_start, disconnect, transfer_status \
             (sessions {})",
            s.0
        )),
        "{report}"
    );
    assert!(
        report.contains("match prod-*: read_only (no live session)"),
        "{report}"
    );
    // The person's disconnect meets the policy too, and reads its refusal as such (a client
    // that did not introduce itself reads it as `invalid_arguments`: a unit test of the
    // service).
    let out = env.cli(&["disconnect", &s.0]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("(policy_denied)")
            && err.contains("refused on this host by the user's policy"),
        "{err}"
    );
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(crate::code(&r), "policy_denied", "{r}");
    mcp.close().await;
}

#[tokio::test]
async fn watch_once_shows_running_commands_and_forwards_and_the_live_view_quits_on_ctrl_c() {
    let (env, mcp, s) = crate::connected().await;
    let out = env.cli(&["watch", "--once", "--json"]);
    let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(snapshot["sessions"][0]["commands"], json!([]), "{snapshot}");
    let marker = format!("sleep {}", sshmcp_tests::process::unique_sleep(60));
    let started = crate::on_session(&mcp, &s, "command_start", json!({"command": marker})).await;
    let forward = crate::on_session(
        &mcp,
        &s,
        "forward_start",
        json!({"kind": "dynamic", "listen_port": 0}),
    )
    .await;
    assert_eq!(forward["ok"], true, "{forward}");

    let out = env.cli(&["watch", "--once", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
    let view = &snapshot["sessions"][0];
    assert_eq!(view["session"]["session_id"], s.0.as_str());
    assert_eq!(
        view["commands"][0]["handle_id"], started["handle_id"],
        "{snapshot} {started}"
    );
    assert_eq!(view["commands"][0]["preview"], marker.as_str());
    assert_eq!(view["forwards"][0]["forward_id"], forward["forward_id"]);
    assert_eq!(snapshot["pid"], env.daemon_pid().unwrap());
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&s.1));
    // A command that ended a moment ago shows how it ended; piped, nothing is coloured.
    let quick = crate::on_session(&mcp, &s, "command_start", json!({"command": "exit 4"})).await;
    let r = crate::on_session(
        &mcp,
        &s,
        "command_status",
        json!({"handle_id": quick["handle_id"], "wait_seconds": 30}),
    )
    .await;
    assert_eq!(r["exit_code"], 4, "{r}");
    let out = env.cli(&["watch", "--once"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(started["handle_id"].as_str().unwrap()) && text.contains(&marker),
        "{text}"
    );
    let quick = quick["handle_id"].as_str().unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains(quick) && l.contains("ended") && l.contains("completed, exit 4")),
        "{text}"
    );
    assert!(!text.contains('\x1b'), "{text:?}");

    // The live view on a terminal (a pty from `script`): it draws on the alternate screen, and
    // Ctrl-C restores the terminal and exits 0.
    // `exec`: the status `script -e` reports is then watch's own, not its shell's.
    let watch = format!(
        "exec {} watch",
        sshmcp_tests::bins::path("sshmcp").display()
    );
    let mut live = std::process::Command::new("script")
        .args(["-qfec", &watch, "/dev/null"])
        .env_clear()
        .envs(env.env_vars())
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("script (util-linux)");
    let mut stdout = live.stdout.take().unwrap();
    let (drawn, first_frame) = std::sync::mpsc::channel();
    // Reads the pty's output to its end, saying when the first frame is complete.
    let reader = std::thread::spawn(move || {
        use std::io::Read as _;
        let (mut buf, mut seen, mut told) = ([0u8; 4096], Vec::new(), false);
        loop {
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => return seen,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
            if !told && String::from_utf8_lossy(&seen).contains("Ctrl-C to quit") {
                told = drawn.send(()).is_ok();
            }
        }
    });
    first_frame
        .recv_timeout(Duration::from_secs(15))
        .expect("the first frame");
    use std::io::Write as _;
    live.stdin.as_mut().unwrap().write_all(b"\x03").unwrap();
    let status = live.wait().unwrap();
    let text = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    assert!(status.success(), "watch exited {status}: {text:?}");
    assert!(
        text.contains("\x1b[?1049h"),
        "no alternate screen: {text:?}"
    );
    assert!(text.contains(&marker), "{text:?}");
    let (drawn_at, restored_at) = (text.find(&marker).unwrap(), text.rfind("\x1b[?1049l"));
    assert!(
        restored_at.is_some_and(|at| at > drawn_at),
        "the terminal was not restored: {text:?}"
    );
    mcp.close().await;
}

#[tokio::test]
async fn a_host_named_directly_meets_its_alias_entries_and_a_cut_call_is_in_the_trail() {
    let (_dir, config) = with_config(READ_ONLY_TESTBED);
    let config_var = config.display().to_string();
    let env = TestEnv::with(&SshdOptions::default(), &[("SSHMCP_CONFIG", &config_var)]);
    let mcp = env.mcp().await;
    // `host: "testbed"` goes through the `Host testbed` block as the alias does.
    let r = mcp
        .call(
            "connect",
            json!({"host": "testbed", "user": env.sshd.user, "port": env.sshd.port}),
        )
        .await;
    let s = sshmcp_tests::mcp::session_of(&r);
    let r = crate::exec(&mcp, &s, "true", json!({})).await;
    assert_eq!(crate::code(&r), "policy_denied", "{r}");
    mcp.close().await;

    // A call whose client goes away mid-way reached the host: its line says `cancelled`.
    std::fs::write(&config, "").unwrap();
    assert!(env.cli(&["daemon", "reload"]).status.success());
    let mcp = env.mcp().await;
    let secs = sshmcp_tests::process::unique_sleep(30);
    let marker = format!("sleep {secs}");
    let (_, _answer) = mcp
        .start_call(
            "exec",
            json!({"session_id": s.0, "session_key": s.1, "command": marker}),
        )
        .await;
    // The host is this machine: the command shows among its processes once it runs.
    let deadline = Instant::now() + Duration::from_secs(10);
    while sshmcp_tests::process::count_matching(&["sleep", &secs]) == 0 {
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    mcp.kill().await;
    let lines = history_until(&env, &["--session", &s.0], |lines| {
        lines.iter().any(|l| l["summary"] == marker.as_str())
    });
    let cut = lines
        .iter()
        .find(|l| l["summary"] == marker.as_str())
        .unwrap();
    assert_eq!(cut["outcome"], "cancelled", "{cut}");
    let mcp = env.mcp().await;
    mcp.call("disconnect", json!({"session_id": s.0})).await;
    mcp.close().await;
}

/// A command under way when the daemon is killed outright (SIGKILL, the OOM killer) ran on
/// the host all the same: the next daemon writes its line, `cancelled`, from the journal of
/// calls under way the dead one left.
#[tokio::test]
async fn a_call_cut_by_a_daemon_crash_is_in_the_trail() {
    let (env, mcp, s) = crate::connected().await;
    let marker = sshmcp_tests::process::unique_sleep(30);
    let command = format!("sleep {marker}");
    let cut = crate::exec(&mcp, &s, &command, json!({}));
    let crash = async {
        // The daemon's journal of calls under way (docs/oversight.md).
        let journaled = || {
            std::fs::read_dir(&env.state_dir)
                .unwrap()
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("audit.pending.")
                })
                .any(|e| {
                    std::fs::read_to_string(e.path())
                        .unwrap_or_default()
                        .contains(&marker)
                })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !journaled() {
            assert!(
                Instant::now() < deadline,
                "the call never reached the journal"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        env.crash_daemon();
    };
    let (r, ()) = tokio::join!(cut, crash);
    assert_eq!(crate::code(&r), "daemon_unavailable", "{r}");
    // Before any daemon runs again, history shows it cut off, from the dead one's journal.
    let out = env.cli(&["history", "--json", "--session", &s.0]);
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = shown
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["summary"] == format!("sleep {marker}"))
        .unwrap_or_else(|| panic!("not shown: {shown}"));
    assert_eq!(line["outcome"], "cancelled", "{line}");
    // The next call starts the next daemon, which writes the line before any other.
    mcp.call("session_list", json!({})).await;
    let lines = history_until(&env, &["--session", &s.0], |lines| {
        lines
            .iter()
            .any(|l| l["summary"] == format!("sleep {marker}"))
    });
    let line = lines
        .iter()
        .find(|l| l["summary"] == format!("sleep {marker}"))
        .unwrap();
    assert_eq!(
        (&line["tool"], &line["outcome"]),
        (&json!("exec"), &json!("cancelled")),
        "{line}"
    );
    assert!(env.daemon_log_shows("a daemon before this one died before writing"));
    let _ = remote_pkill(&mcp, &s, &marker).await;
    mcp.close().await;
}

async fn remote_pkill(mcp: &sshmcp_tests::McpClient, s: &(String, String), marker: &str) -> Value {
    crate::exec(
        mcp,
        s,
        &format!("pkill -f 'sleep {marker}'; true"),
        json!({}),
    )
    .await
}

/// A call that answered just before its daemon was killed is in the trail as it answered,
/// and a file written just before is in it too (each call is journaled as it begins and
/// before it answers, not only when the writer gets to it).
#[tokio::test]
async fn calls_that_answered_just_before_a_crash_are_in_the_trail_as_they_answered() {
    let (env, mcp, s) = crate::connected().await;
    let dir = crate::fresh_dir(&mcp, &s, "crash-trail").await;
    let path = format!("{dir}/written-before-crash");
    let w = crate::on_session(
        &mcp,
        &s,
        "write_file",
        json!({"path": path, "content": "x"}),
    )
    .await;
    assert_eq!(w["ok"], true, "{w}");
    let r = exec(&mcp, &s, "echo crash-trail-7f; exit 3", json!({})).await;
    assert_eq!(r["exit_code"], 3, "{r}");
    env.crash_daemon();
    // The next call starts the next daemon, which writes what the dead one left.
    mcp.call("session_list", json!({})).await;
    let lines = history_until(&env, &["--session", &s.0], |lines| {
        lines
            .iter()
            .any(|l| l["summary"] == "echo crash-trail-7f; exit 3")
            && lines.iter().any(|l| l["tool"] == "write_file")
    });
    // Once, or twice if the daemon died between writing the line and noting it written (a
    // line twice, never none): as it answered either way.
    let exec_lines: Vec<&Value> = lines
        .iter()
        .filter(|l| l["summary"] == "echo crash-trail-7f; exit 3")
        .collect();
    assert!(!exec_lines.is_empty(), "{lines:?}");
    for line in exec_lines {
        assert_eq!(
            (&line["outcome"], &line["exit_code"]),
            (&json!("ok"), &json!(3)),
            "{lines:?}"
        );
    }
    let write = lines.iter().find(|l| l["tool"] == "write_file").unwrap();
    assert_eq!(write["outcome"], "ok", "{write}");
    mcp.close().await;
}

/// `sshmcp history` right after a call answered shows it (no waiting for the trail's writer,
/// which gathers lines for a moment): the daemon's journal holds it already.
#[tokio::test]
async fn history_shows_the_call_that_answered_a_moment_ago() {
    let (env, mcp, s) = crate::connected().await;
    for n in 0..5 {
        let command = format!("echo just-answered-{n}");
        let r = exec(&mcp, &s, &command, json!({})).await;
        assert_eq!(r["exit_code"], 0, "{r}");
        let out = env.cli(&["history", "--json", "--limit", "1", "--session", &s.0]);
        let newest: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(newest["summary"], command, "{newest}");
    }
    mcp.close().await;
}

/// A key of another live session, pasted into a command, is not written to the trail either:
/// every key the daemon holds a hash of is redacted, not only the caller's.
#[tokio::test]
async fn another_sessions_key_in_a_command_is_redacted_from_the_trail() {
    let (env, mcp, s) = crate::connected().await;
    let (watcher, other) = crate::connect_watcher(&env).await;
    let r = crate::exec(&mcp, &s, &format!("test -n {}", other.1), json!({})).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    let lines = history_until(&env, &["--session", &s.0], |lines| {
        lines.iter().any(|l| l["tool"] == "exec")
    });
    let line = lines.iter().find(|l| l["tool"] == "exec").unwrap();
    assert_eq!(line["summary"], "test -n [session key]", "{line}");
    let trail = std::fs::read_to_string(env.state_dir.join("audit.jsonl")).unwrap();
    assert!(!trail.contains(&other.1), "{trail}");
    watcher.close().await;
    mcp.close().await;
}

/// An agent that pastes its session key into another field (a command, a forward's host)
/// finds it neither in the trail nor in an error message (and the test's world checks every
/// file for it at its end).
#[tokio::test]
async fn a_session_key_pasted_into_a_field_is_written_nowhere() {
    let (env, mcp, s) = crate::connected().await;
    let key = s.1.clone();
    let r = crate::exec(&mcp, &s, &format!("test -n {key}"), json!({})).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    // A handle's preview, as the session record keeps it (written before the answer).
    let r = crate::on_session(
        &mcp,
        &s,
        "command_start",
        json!({"command": format!("test -n {key}")}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    let record = std::fs::read_to_string(env.runtime_dir.join("sessions.json")).unwrap();
    assert!(record.contains("test -n [session key]"), "{record}");
    assert!(!record.contains(&key), "{record}");
    let r = crate::on_session(
        &mcp,
        &s,
        "forward_start",
        json!({"kind": "dynamic", "listen_host": key}),
    )
    .await;
    assert_eq!(crate::code(&r), "forward_not_allowed", "{r}");
    assert!(!r.to_string().contains(&key), "{r}");
    // As a forward's target: refused (a forward is recorded as asked, for its close).
    let args = json!({"kind": "local", "target_host": key, "target_port": 9});
    let r = crate::on_session(&mcp, &s, "forward_start", args).await;
    assert_eq!(crate::code(&r), "invalid_arguments", "{r}");
    assert!(!r.to_string().contains(&key), "{r}");
    // A command under way shows the person its preview, not the key.
    let snapshot =
        String::from_utf8_lossy(&env.cli(&["watch", "--once", "--json"]).stdout).into_owned();
    assert!(snapshot.contains("[session key]"), "{snapshot}");
    assert!(!snapshot.contains(&key), "{snapshot}");
    let frame = String::from_utf8_lossy(&env.cli(&["watch", "--once"]).stdout).into_owned();
    assert!(!frame.contains(&key), "{frame}");
    // In a path sent base64-encoded too: the trail shows the path decoded, the key redacted.
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("/tmp/no-{key}"));
    let args = json!({"path": encoded, "path_encoding": "base64"});
    let r = crate::on_session(&mcp, &s, "stat", args).await;
    assert_eq!(crate::code(&r), "remote_path_not_found", "{r}");
    let lines = history_until(&env, &["--session", &s.0], |lines| lines.len() >= 5);
    let summaries: Vec<&str> = lines
        .iter()
        .map(|l| l["summary"].as_str().unwrap())
        .collect();
    assert!(
        summaries.contains(&"test -n [session key]"),
        "{summaries:?}"
    );
    assert!(
        summaries.contains(&"/tmp/no-[session key]"),
        "{summaries:?}"
    );
    // The session record, as it stands while the daemon runs (a stop empties it).
    let record = std::fs::read_to_string(env.runtime_dir.join("sessions.json")).unwrap();
    assert!(!record.contains(&key), "{record}");
    mcp.close().await;
}

/// Settings a start would refuse, though they read well (a log filter no level matches, in
/// the environment the new daemon would take from this shell): `daemon restart` leaves the
/// running daemon as it is, and `doctor` names the problem.
#[tokio::test]
async fn a_restart_into_settings_a_start_refuses_keeps_the_running_daemon() {
    let (env, mcp, s) = crate::connected().await;
    let log = [("SSHMCP_LOG", std::ffi::OsStr::new("info,sshmcpd=verbose"))];
    let cli = |args: &[&str]| env.cli_with(args, &log);
    let before = env.daemon_pid();
    let out = cli(&["daemon", "restart"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("log filter") && err.contains("left as it is"),
        "{err}"
    );
    assert_eq!(env.daemon_pid(), before);
    assert_eq!(crate::remote_out(&mcp, &s, "echo same").await, "same\n");
    let out = cli(&["doctor"]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.contains("FAIL  config") && report.contains("log filter"),
        "{report}"
    );
    mcp.close().await;
}

/// A disconnect its client cancels once the session is closing goes on to its end: the
/// session closes, its command is gone, and its trail line says `ok`, not `cancelled`.
#[tokio::test]
async fn a_disconnect_cancelled_while_it_closes_still_closes_and_says_so() {
    let (env, mcp, s) = crate::connected().await;
    // A command that ignores TERM keeps the close waiting for it to drain.
    let secs = sshmcp_tests::process::unique_sleep(300);
    let command = format!("trap '' TERM; sleep {secs}");
    let args = json!({"session_id": s.0, "session_key": s.1, "command": command});
    let started = mcp.call("command_start", args).await;
    assert_eq!(started["ok"], true, "{started}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while sshmcp_tests::process::count_matching(&["sleep", &secs]) == 0 {
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (call, answer) = mcp
        .start_call("disconnect", json!({"session_id": s.0}))
        .await;
    let state = || async {
        let list = mcp.call("session_list", json!({})).await;
        list["sessions"][0]["state"].clone()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while state().await != "closing" {
        assert!(Instant::now() < deadline, "the session never began closing");
    }
    mcp.cancel(call).await;
    drop(answer);
    let lines = history_until(&env, &["--session", &s.0], |lines| {
        lines.iter().any(|l| l["tool"] == "disconnect")
    });
    let line = lines.iter().find(|l| l["tool"] == "disconnect").unwrap();
    assert_eq!(line["outcome"], "ok", "{line}");
    let gone = mcp.call("session_list", json!({})).await;
    assert_eq!(gone["sessions"], json!([]), "{gone}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while sshmcp_tests::process::count_matching(&["sleep", &secs]) != 0 {
        assert!(
            Instant::now() < deadline,
            "the command outlived its session"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    mcp.close().await;
}
