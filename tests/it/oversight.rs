//! Human oversight through the real binaries: the audit trail as `sshmcp history` reads it.

use std::os::unix::fs::PermissionsExt as _;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sshmcp_tests::{SshdOptions, TestEnv};

use crate::{connected_with, exec};

/// `sshmcp history --json ARGS`, parsed, once it shows at least `at_least` lines: the daemon
/// writes the trail from a thread of its own, just after each call answered.
fn history(env: &TestEnv, args: &[&str], at_least: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut argv = vec!["history", "--json"];
        argv.extend_from_slice(args);
        let out = env.cli(&argv);
        assert!(out.status.success(), "{out:?}");
        let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        if lines.len() >= at_least {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "history shows {} of {at_least} lines: {lines:?}",
            lines.len()
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
    assert_eq!(
        summary.len(),
        200,
        "a command is kept to its first 200 bytes"
    );
    assert!(exec_line["duration"].as_f64().unwrap() > 0.0);
    assert!(is_trail_time(exec_line["time"].as_str().unwrap()));
    assert_eq!(stat["tool"], "stat");
    assert_eq!(stat["outcome"], "remote_path_not_found");
    assert_eq!(stat["summary"], "/nonexistent-trail");
    assert!(stat.get("exit_code").is_none());

    let trail = env.state_dir.join("audit.jsonl");
    let mode = std::fs::metadata(&trail).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let text = std::fs::read_to_string(&trail).unwrap();
    assert!(!text.contains(&s.1), "a session key in the trail");

    // Filters: by session, by target, newest first with a limit, and the table.
    assert_eq!(history(&env, &["--session", &s.0], 3).len(), 3);
    assert!(history(&env, &["--session", "s-none"], 0).is_empty());
    assert_eq!(history(&env, &["--target", "127.0.0.1"], 3).len(), 3);
    let newest = history(&env, &["--limit", "1"], 1);
    assert_eq!((newest.len(), &newest[0]["tool"]), (1, &json!("stat")));
    let out = env.cli(&["history"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("TIME "), "{table}");
    assert!(
        table.contains("exit 3") && table.contains(marker),
        "{table}"
    );
    let out = env.cli(&["history", "--since", "yesterday"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("hint:"));
    mcp.close().await;
}

/// The trail's times are RFC 3339 UTC with milliseconds, as `--since` compares them.
fn is_trail_time(time: &str) -> bool {
    time.len() == 24 && time.ends_with('Z') && time.as_bytes()[10] == b'T'
}

#[tokio::test]
async fn the_trail_can_be_turned_off_and_a_broken_trail_never_fails_a_call() {
    let (env, mcp, s) = connected_with(&SshdOptions::default(), &[("SSHMCP_NO_AUDIT", "1")]).await;
    let r = exec(&mcp, &s, "true", json!({})).await;
    assert_eq!(r["exit_code"], 0);
    assert!(!env.state_dir.join("audit.jsonl").exists());
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
    let deadline = Instant::now() + Duration::from_secs(10);
    while !env.daemon_log_shows("cannot write the audit trail") {
        assert!(Instant::now() < deadline, "the failure was not logged");
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
