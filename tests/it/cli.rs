//! The human CLI against a live daemon: sessions table and JSON, disconnect, status, stop.

use serde_json::{Value, json};
use sshmcp_tests::TestEnv;

use crate::{connect, connected};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn sessions_lists_as_table_and_json_without_keys() {
    let (env, mcp, s) = connected().await;
    let out = env.cli(&["sessions"]);
    assert!(out.status.success());
    let table = stdout(&out);
    assert!(
        table.starts_with("SESSION ") && table.contains(" STATE "),
        "{table}"
    );
    assert!(table.contains(&s.0) && table.contains("testbed"));
    let out = env.cli(&["sessions", "--json"]);
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["session_id"], s.0.as_str());
    assert_eq!(rows[0]["state"], "ready");
    assert!(!stdout(&out).contains(&s.1));
    mcp.close().await;
}

#[tokio::test]
async fn disconnect_by_id_and_clear_errors() {
    let (env, mcp, s) = connected().await;
    let out = env.cli(&["disconnect", &s.0]);
    assert!(out.status.success());
    assert_eq!(stdout(&out), format!("session {} closed\n", s.0));
    let out = env.cli(&["disconnect", &s.0]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("session_not_found"), "{err}");
    mcp.close().await;
}

#[tokio::test]
async fn status_and_stop_close_every_master() {
    let env = TestEnv::new();
    let out = env.cli(&["daemon", "status"]);
    assert_eq!(out.status.code(), Some(3), "not running yet");
    assert!(stdout(&out).contains("not running"));
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    let master = r["master_pid"].as_u64().unwrap();
    let out = env.cli(&["daemon", "status", "--json"]);
    assert!(out.status.success());
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["sessions"], 1);
    assert_eq!(status["pid"], env.daemon_pid().unwrap());
    assert_eq!(
        status["tools"],
        json!([
            "connect",
            "disconnect",
            "session_list",
            "exec",
            "sudo_exec",
            "stat",
            "list_directory",
            "read_file_range",
            "command_start",
            "command_status",
            "command_kill",
            "command_list",
            "progress",
            "task_launch",
            "task_status",
            "task_kill",
            "download_start",
            "transfer_status",
            "transfer_cancel",
            "transfer_list",
            "upload_start",
            "write_file",
            "edit_file",
            "make_directory",
            "remove_path",
            "copy_path",
            "move_path"
        ]),
        "the capabilities of the handshake"
    );
    let out = env.cli(&["daemon", "status"]);
    assert!(stdout(&out).contains("is running"));
    assert!(
        stdout(&out).contains("tools:       connect, disconnect, session_list, exec, sudo_exec")
    );
    let out = env.cli(&["daemon", "stop"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        sshmcp_tests::process::gone(master as u32),
        "daemon stop must close the master"
    );
    assert!(!env.runtime_dir.join("sshmcpd.sock").exists());
    assert_eq!(env.cli(&["daemon", "status"]).status.code(), Some(3));
    // The shim notices its daemon went away and starts a fresh one for its next call.
    let r = mcp.call("session_list", json!({})).await;
    assert_eq!(r["sessions"], json!([]), "{r}");
    connect(&mcp).await;
    mcp.close().await;
}

#[tokio::test]
async fn daemon_start_and_logs() {
    let env = TestEnv::new();
    let out = env.cli(&["daemon", "start"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout(&out).contains("is running"));
    let pid = env.daemon_pid().expect("started");
    let again = env.cli(&["daemon", "start"]);
    assert!(again.status.success());
    assert_eq!(env.daemon_pid(), Some(pid), "a running daemon is reused");
    let out = env.cli(&["daemon", "logs", "-n", "5"]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("daemon ready"), "{}", stdout(&out));
}

/// The command names `--help` lists under "Commands:".
fn listed_commands(args: &[&str]) -> Vec<String> {
    let out = std::process::Command::new(sshmcp_tests::bins::path("sshmcp"))
        .args(args)
        .output()
        .unwrap();
    stdout(&out)
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

#[test]
fn help_lists_exactly_the_commands() {
    assert_eq!(
        listed_commands(&["--help"]),
        [
            "sessions",
            "disconnect",
            "daemon",
            "mcp-config",
            "completions",
            "help"
        ]
    );
    assert_eq!(
        listed_commands(&["daemon", "--help"]),
        ["status", "start", "stop", "restart", "logs", "help"]
    );
}

/// The config file's `runtime-dir` is where the CLI and the shim look for the daemon (and
/// where the daemon they start listens), with no environment variable saying so.
#[tokio::test]
async fn clients_find_the_daemon_where_the_config_file_puts_it() {
    let env = TestEnv::with(
        &sshmcp_tests::SshdOptions::default(),
        &[("SSHMCP_RUNTIME_DIR", "")],
    );
    let config = env.home.join(".config/sshmcp/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        format!("runtime-dir = \"{}\"\n", env.runtime_dir.display()),
    )
    .unwrap();
    let out = env.cli(&["daemon", "start"]);
    assert!(out.status.success(), "{out:?}");
    assert!(env.runtime_dir.join("sshmcpd.sock").exists());
    let mcp = env.mcp().await;
    connect(&mcp).await;
    let out = env.cli(&["sessions", "--json"]);
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        rows.as_array().unwrap().len(),
        1,
        "the CLI sees the shim's session"
    );
    mcp.close().await;
}

/// `completions` prints a script the shell accepts; `mcp-config` prints, for each client,
/// what adds this installation's MCP server, with absolute paths. Neither needs a daemon.
#[tokio::test]
async fn completions_and_mcp_config_need_no_daemon() {
    let env = TestEnv::new();
    let out = env.cli(&["completions", "bash"]);
    assert!(out.status.success());
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("sshmcp.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let checked = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .status()
        .unwrap();
    assert!(checked.success(), "bash -n refused the completion script");
    assert!(stdout(&out).contains("mcp-config"));
    let shim = sshmcp_tests::bins::path("sshmcp-mcp").display().to_string();
    let out = env.cli(&[
        "mcp-config",
        "claude-code",
        "--local-root",
        "/srv/agent files",
    ]);
    assert_eq!(
        stdout(&out),
        format!("claude mcp add sshmcp -- {shim} --local-root '/srv/agent files'\n")
    );
    for (client, file) in [
        ("claude-desktop", "claude_desktop_config.json"),
        ("cursor", "mcp.json"),
    ] {
        let out = env.cli(&["mcp-config", client]);
        assert!(out.status.success(), "{client}");
        let entry: Value = serde_json::from_slice(&out.stdout).unwrap();
        let server = &entry["mcpServers"]["sshmcp"];
        assert_eq!(server["command"], json!(shim), "{client}: {entry}");
        assert_eq!(server["args"][0], "--local-root", "{client}: {entry}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(file),
            "{client}"
        );
    }
    assert!(env.daemon_pid().is_none(), "no daemon was started");
}
