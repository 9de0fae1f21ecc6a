//! The human CLI against a live daemon: sessions table and JSON, disconnect, status, stop.

use serde_json::{Value, json};
use sshmcp_tests::TestEnv;
use std::ffi::OsStr;

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

/// The person's disconnect closes a session; the agent that calls on it next is told the
/// person closed it (so it asks before connecting again), and the trail says who did.
#[tokio::test]
async fn disconnect_by_id_and_clear_errors() {
    let (env, mcp, s) = connected().await;
    let out = env.cli(&["disconnect", &s.0]);
    assert!(out.status.success());
    assert_eq!(stdout(&out), format!("session {} closed\n", s.0));
    let r = crate::exec(&mcp, &s, "true", json!({})).await;
    assert_eq!(crate::code(&r), "session_not_found", "{r}");
    let said = r["error"]["message"].as_str().unwrap();
    assert!(
        said.contains("the person closed it")
            && said.ends_with("ask them before you connect again"),
        "{r}"
    );
    let line = crate::oversight::history_until(&env, &["--session", &s.0], |l| {
        l.iter().any(|l| l["tool"] == "disconnect")
    });
    let line = line.iter().find(|l| l["tool"] == "disconnect").unwrap();
    assert_eq!(
        (&line["summary"], &line["client"]),
        (
            &json!("(by the person: sshmcp disconnect)"),
            &json!("the person (sshmcp)")
        ),
        "{line}"
    );
    let out = env.cli(&["disconnect", &s.0]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("no session {}", s.0)) && err.contains("hint:"),
        "{err}"
    );
    mcp.close().await;
}

/// An id is taken whole or by any unique prefix; with no daemon running, an id its record
/// does not hold (a typo) starts no daemon just to say so; an empty id (an unset variable)
/// names nothing.
#[tokio::test]
async fn disconnect_takes_a_unique_prefix_and_a_typo_starts_no_daemon() {
    let env = TestEnv::new();
    let out = env.cli(&["disconnect", "s0123"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no session s0123") && err.contains("no daemon runs"),
        "{err}"
    );
    assert!(env.daemon_pid().is_none(), "a typo started a daemon");
    let mcp = env.mcp().await;
    let s = crate::connect(&mcp).await;
    let out = env.cli(&["disconnect", ""]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("an empty session id names no session"),
        "{out:?}"
    );
    let out = env.cli(&["disconnect", &s.0[..4]]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout(&out), format!("session {} closed\n", s.0));
    mcp.close().await;
}

#[tokio::test]
async fn status_and_stop_close_every_master() {
    let env = TestEnv::new();
    let out = env.cli(&["daemon", "status"]);
    assert_eq!(out.status.code(), Some(3), "not running yet");
    assert!(stdout(&out).contains("not running"));
    // A JSON snapshot asked of no daemon: nothing on stdout a JSON reader would choke on.
    let out = env.cli(&["watch", "--once", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(stdout(&out), "", "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not running"));
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    let master = r["master_pid"].as_u64().unwrap();
    let s = sshmcp_tests::mcp::session_of(&r);
    let out = env.cli(&["daemon", "status", "--json"]);
    assert!(out.status.success());
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["sessions"], 1);
    assert_eq!(status["pid"], env.daemon_pid().unwrap());
    // The agents' tools, group by group; none of the daemon's internal calls.
    let tools: Vec<&str> = sshmcp_proto::tool::Tool::all().map(|t| t.name()).collect();
    assert_eq!(status["tools"], json!(tools));
    for internal in sshmcp_proto::service::INTERNAL_METHODS {
        assert!(
            !status["tools"].to_string().contains(internal),
            "{internal}"
        );
    }
    let out = env.cli(&["daemon", "status"]);
    assert!(stdout(&out).contains("is running"));
    assert!(stdout(&out).contains(
        "tools:       connect, disconnect, session_list, exec, sudo_exec, command_start"
    ));
    let out = env.cli(&["daemon", "stop"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout(&out),
        "sshmcpd stopped; it closed 1 session, 0 running commands and 0 transfers\n"
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
    // That daemon knows the person closed the session: the agent is told so, not to connect
    // again at once.
    let r = crate::on_session(&mcp, &s, "exec", json!({"command": "true"})).await;
    assert_eq!(crate::code(&r), "session_not_found", "{r}");
    let said = crate::message(&r);
    assert!(
        said.contains("the person closed it at") && said.contains("(sshmcp daemon stop)"),
        "{r}"
    );
    // And every daemon after it.
    let out = env.cli(&["daemon", "restart"]);
    assert!(out.status.success(), "{out:?}");
    let r = crate::on_session(&mcp, &s, "exec", json!({"command": "true"})).await;
    assert!(crate::message(&r).contains("(sshmcp daemon stop)"), "{r}");
    connect(&mcp).await;
    mcp.close().await;
}

/// A restart against a daemon that cannot exit (stopped) gives up after its 30 s and ends,
/// saying so, instead of waiting on; the daemon, let go on, hands over and exits.
#[tokio::test]
async fn a_restart_gives_up_on_a_stopped_daemon_and_ends() {
    let (env, mcp, _s) = connected().await;
    let pid = nix::unistd::Pid::from_raw(env.daemon_pid().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let restart = tokio::process::Command::new(sshmcp_tests::bins::path("sshmcp"))
        .args(["daemon", "restart"])
        .env_clear()
        .envs(env.env_vars())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .output();
    let ended = tokio::time::timeout(std::time::Duration::from_secs(120), restart).await;
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let ended = ended.expect("the restart never ended").unwrap();
    let said = String::from_utf8_lossy(&ended.stderr);
    assert!(!ended.status.success(), "{said}");
    assert!(said.contains("did not exit within 30 s"), "{said}");
    assert!(
        sshmcp_tests::process::gone(pid.as_raw() as u32),
        "it exits once let go"
    );
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
    // `sshmcp logs` is the same, shorter.
    let short = env.cli(&["logs", "-n", "5"]);
    assert!(short.status.success());
    assert!(
        stdout(&short).contains("daemon ready"),
        "{}",
        stdout(&short)
    );
}

/// What people read, kept in review: `--help` of the CLI and of its commands. After an
/// intended change, regenerate with
/// `SSHMCP_UPDATE_SNAPSHOTS=1 cargo nextest run -E 'test(help_snapshot)'`.
#[test]
fn help_snapshot() {
    let mut live = String::new();
    for args in [
        &["--help"][..],
        &["sessions", "--help"],
        &["disconnect", "--help"],
        &["doctor", "--help"],
        &["daemon", "--help"],
        &["daemon", "logs", "--help"],
        &["mcp-config", "--help"],
    ] {
        let out = std::process::Command::new(sshmcp_tests::bins::path("sshmcp"))
            .args(args)
            .env("COLUMNS", "100")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        live += &format!("$ sshmcp {}\n{}\n", args.join(" "), stdout(&out));
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/cli_help.txt");
    if std::env::var_os("SSHMCP_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(path, &live).unwrap();
    }
    let stored = std::fs::read_to_string(path).expect("snapshot (see this test's doc)");
    assert!(live == stored, "--help changed; review and update {path}");
}

/// The table holds what a person looks for, and fits the width it is given.
#[tokio::test]
async fn the_sessions_table_fits_the_terminal() {
    let (env, mcp, s) = connected().await;
    let out = env.cli_with(&["sessions"], &[("COLUMNS", OsStr::new("78"))]);
    let table = stdout(&out);
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap()
        .split("  ")
        .filter(|c| !c.is_empty())
        .collect();
    let header: Vec<&str> = header.iter().map(|c| c.trim()).collect();
    assert_eq!(
        header,
        [
            "SESSION", "STATE", "TARGET", "SERVER", "USER", "AGE", "LAST USE", "CMDS", "XFERS",
            "FWDS"
        ]
    );
    let row = lines.next().unwrap();
    assert!(row.starts_with(&format!("{}  ready  ", s.0)), "{table}");
    assert!(table.lines().all(|l| l.chars().count() <= 78), "{table}");
    assert!(row.contains("…"), "cut to fit: {table}");
    let wide = stdout(&env.cli(&["sessions"]));
    assert!(
        wide.contains("  testbed  127.0.0.1:"),
        "uncut without a width: {wide}"
    );
    let user = sshmcp_tests::users::test_user();
    assert!(
        wide.contains(&format!("  {user}  ")),
        "the remote user: {wide}"
    );
    mcp.close().await;
}

#[tokio::test]
async fn disconnect_all_asks_unless_told_not_to() {
    let (env, mcp, s) = connected().await;
    let out = env.cli(&["disconnect", "--all"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a terminal") && err.contains("hint: add --yes"),
        "{err}"
    );
    let listed = mcp.call("session_list", json!({})).await;
    assert_eq!(
        listed["sessions"][0]["state"], "ready",
        "nothing was closed"
    );
    let out = env.cli(&["disconnect", "--all", "--yes"]);
    assert!(out.status.success());
    assert_eq!(stdout(&out), format!("session {} closed\n", s.0));
    let out = env.cli(&["disconnect", "--all", "--yes"]);
    assert_eq!(stdout(&out), "no sessions\n");
    let out = env.cli(&["disconnect", "s0123456789", "--all"]);
    assert_eq!(out.status.code(), Some(2), "an id and --all: usage error");
    mcp.close().await;
}

#[tokio::test]
async fn logs_follow_prints_lines_as_they_come() {
    let env = TestEnv::new();
    assert!(env.cli(&["daemon", "start"]).status.success());
    let mut follower = std::process::Command::new(sshmcp_tests::bins::path("sshmcp"))
        .args(["daemon", "logs", "-f", "-n", "1"])
        .env_clear()
        .envs(env.env_vars())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = follower.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mcp = env.mcp().await;
    let s = connect(&mcp).await;
    let wanted = format!("session ready session={}", s.0);
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let left = give_up.saturating_duration_since(std::time::Instant::now());
        let line = rx.recv_timeout(left).expect("the line came through -f");
        if line.contains(&wanted) {
            break;
        }
    }
    follower.kill().unwrap();
    follower.wait().unwrap();
    mcp.close().await;
}

/// `doctor` passes on a good setup, and names each problem with its fix: a runtime directory
/// others may enter, and no rsync on PATH.
#[tokio::test]
async fn doctor_finds_a_loose_runtime_dir_and_a_missing_rsync() {
    let env = TestEnv::new();
    let out = env.cli(&["doctor"]);
    assert!(out.status.success(), "{}", stdout(&out));
    // The same checks as JSON, for scripts.
    let json_out = env.cli(&["doctor", "--json"]);
    assert!(json_out.status.success(), "{json_out:?}");
    let checks: Value = serde_json::from_slice(&json_out.stdout).unwrap();
    let names: Vec<&str> = checks
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"rsync") && names.contains(&"config"),
        "{checks}"
    );
    assert!(
        checks.as_array().unwrap().iter().all(|c| c["ok"] == true),
        "{checks}"
    );
    assert!(
        stdout(&out).contains("ok    rsync       rsync  version"),
        "{}",
        stdout(&out)
    );
    std::fs::create_dir_all(&env.runtime_dir).unwrap();
    std::fs::set_permissions(
        &env.runtime_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    // A PATH with ssh, bash and only the rsync macOS ships (openrsync, or 2.6.9), which lacks
    // the options transfers use.
    let bin = env.root.path().join("bin-old-rsync");
    sshmcp_tests::local_tools::link_tools(&bin, &["ssh", "bash"]);
    sshmcp_tests::local_tools::write_macos_rsync(&bin);
    let out = env.cli_with(&["doctor"], &[("PATH", bin.as_os_str())]);
    let said = stdout(&out);
    assert_eq!(out.status.code(), Some(4), "{said}");
    let old = format!("only {}/rsync (2.6)", bin.display());
    assert!(
        said.contains("FAIL  rsync       no rsync 3.1 or later on this machine")
            && said.contains(&old),
        "{said}"
    );
    assert!(said.contains("macOS: brew install rsync"), "{said}");
    assert!(said.contains("mode 755 lets other users in"), "{said}");
    assert!(
        said.contains(&format!("fix: chmod 700 {}", env.runtime_dir.display())),
        "{said}"
    );
    assert!(said.contains("ok    ssh "), "{said}");
    // A daemon would not start there either: the config check says so.
    assert!(
        said.contains("FAIL  config      runtime directory: refusing"),
        "{said}"
    );
    assert!(
        said.contains("fix: correct that directory as its own line above says"),
        "{said}"
    );
    assert!(said.contains("3 problem(s) found"), "{said}");
    let out = env.cli_with(&["doctor", "--json"], &[("PATH", bin.as_os_str())]);
    assert_eq!(out.status.code(), Some(4));
    let checks: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rsync = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "rsync")
        .unwrap();
    assert_eq!(rsync["ok"], false, "{rsync}");
    assert!(
        rsync["fix"]
            .as_str()
            .unwrap()
            .contains("apt-get install rsync"),
        "{rsync}"
    );
    // A relative runtime directory, which every other command refuses: doctor says so on
    // its own line, and shows the local root this environment asks for, not a default.
    let relative = [("SSHMCP_RUNTIME_DIR", OsStr::new("relative/run"))];
    let out = env.cli_with(&["doctor"], &relative);
    let said = stdout(&out);
    assert_eq!(out.status.code(), Some(4), "{said}");
    assert!(
        said.contains("FAIL  runtime dir the runtime directory relative/run must be an absolute"),
        "{said}"
    );
    let root = format!("ok    local root  {}", env.local_root.display());
    assert!(said.contains(&root), "{said}");
}

/// With no daemon running, `doctor` shows the settings a daemon started now would take,
/// config file included (where it used to show the environment's alone), and starts none.
#[tokio::test]
async fn doctor_without_a_daemon_reads_the_config_file() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("agent files");
    let ssh_config = dir.path().join("ssh_config");
    std::fs::write(&ssh_config, "Host x\n  Port 2222\n").unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "local-root = {:?}\nssh-config = {:?}\n",
            root.display().to_string(),
            ssh_config.display().to_string()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(sshmcp_tests::bins::path("sshmcp"))
        .arg("doctor")
        .env_clear()
        .envs(
            env.env_vars()
                .into_iter()
                .filter(|(k, _)| k != "SSHMCP_LOCAL_ROOT" && k != "SSHMCP_SSH_CONFIG"),
        )
        .env("SSHMCP_CONFIG", &config)
        .output()
        .unwrap();
    let said = stdout(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!("ok    local root  {}", root.display())),
        "{said}"
    );
    assert!(
        said.contains(&format!("ok    ssh config  {}", ssh_config.display())),
        "{said}"
    );
    assert!(said.contains(&config.display().to_string()), "{said}");
    assert!(env.daemon_pid().is_none(), "doctor started a daemon");
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
    // With no client it names the clients, and the command for each.
    let out = env.cli(&["mcp-config"]);
    assert!(out.status.success(), "{out:?}");
    for client in ["claude-code", "claude-desktop", "cursor"] {
        assert!(
            stdout(&out).contains(&format!("sshmcp mcp-config {client}")),
            "{}",
            stdout(&out)
        );
    }
    // A count out of range is said in words.
    let out = env.cli(&["history", "--limit", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("at least 1"),
        "{out:?}"
    );
    let shim = sshmcp_tests::bins::path("sshmcp-mcp").display().to_string();
    let out = env.cli(&[
        "mcp-config",
        "claude-code",
        "--local-root",
        "/srv/agent files",
    ]);
    // The environment that finds this CLI's daemon is pinned, so that a client launched
    // without it (a GUI's bare environment) finds the same one.
    let var = |name: &str| {
        let vars = env.env_vars();
        vars.into_iter().find(|(k, _)| k == name).expect(name).1
    };
    let pinned = format!(
        "-e SSHMCP_RUNTIME_DIR={} -e SSHMCP_STATE_DIR={} -e SSHMCP_SSH_CONFIG={}",
        var("SSHMCP_RUNTIME_DIR"),
        var("SSHMCP_STATE_DIR"),
        var("SSHMCP_SSH_CONFIG")
    );
    assert_eq!(
        stdout(&out),
        format!("claude mcp add sshmcp {pinned} -- {shim} --local-root '/srv/agent files'\n")
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
        let dir = var("SSHMCP_RUNTIME_DIR");
        assert_eq!(
            server["env"]["SSHMCP_RUNTIME_DIR"], dir,
            "{client}: {entry}"
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(file),
            "{client}"
        );
    }
    // A root the daemon would refuse on every call is refused here, and nothing printed.
    let vars = env.env_vars();
    let home = &vars
        .iter()
        .find(|(k, _)| k == "HOME")
        .expect("the CLI's HOME")
        .1;
    let above = std::path::Path::new(home)
        .parent()
        .unwrap()
        .display()
        .to_string();
    for root in ["/", home.as_str(), above.as_str()] {
        let out = env.cli(&["mcp-config", "claude-code", "--local-root", root]);
        assert!(!out.status.success(), "{root}: {out:?}");
        assert_eq!(stdout(&out), "", "{root}");
        let said = String::from_utf8_lossy(&out.stderr);
        let why = "must not be /, the home directory or a directory above it";
        assert!(said.contains(why), "{root}: {out:?}");
    }
    // The config file: where, what, and whether a daemon would take it.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "max-sessions = 3\n").unwrap();
    let with_config = |args: &[&str]| env.cli_with(args, &[("SSHMCP_CONFIG", config.as_os_str())]);
    let out = with_config(&["config", "path"]);
    assert_eq!(stdout(&out), format!("{}\n", config.display()));
    assert_eq!(
        stdout(&with_config(&["config", "show"])),
        "max-sessions = 3\n"
    );
    let out = with_config(&["config", "check"]);
    assert!(out.status.success(), "{out:?}");
    std::fs::write(&config, "max-sessions = \"x\"\n").unwrap();
    let out = with_config(&["config", "check"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TOML parse error") && err.contains("\n  1 | max-sessions = \"x\""),
        "{err}"
    );
    assert!(env.daemon_pid().is_none(), "no daemon was started");
}

/// A reader that went away (`sshmcp sessions | head -0`) is no failure: exit 0, nothing on
/// stderr, where before it said "Broken pipe" and pointed at `sshmcp doctor`.
#[tokio::test]
async fn a_closed_pipe_ends_the_cli_quietly() {
    let (env, mcp, _s) = crate::connected().await;
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(sshmcp_tests::bins::path("sshmcp"))
        .args(["sessions"])
        .env_clear()
        .envs(env.env_vars())
        .stdout(writer)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    mcp.close().await;
}

/// A runtime directory another user made first (where `/tmp/sshmcp-UID` would be, with no
/// `XDG_RUNTIME_DIR`), holding whatever they serve there: the CLI believes no daemon there,
/// says why, and `history` reads this user's own trail, not one the other user's daemon names.
#[tokio::test]
async fn the_cli_refuses_a_runtime_directory_another_user_made() {
    let (env, mcp, s) = connected().await;
    let r = crate::exec(&mcp, &s, "echo own-trail-marker", json!({})).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    let user = sshmcp_tests::users::test_user();
    let foreign = env.root.path().join("foreign-run");
    std::fs::create_dir(&foreign).unwrap();
    let status = std::process::Command::new("chown")
        .arg(&user)
        .arg(&foreign)
        .status()
        .unwrap();
    assert!(status.success());
    let run = |args: &[&str]| env.cli_with(args, &[("SSHMCP_RUNTIME_DIR", foreign.as_os_str())]);
    let out = run(&["daemon", "status"]);
    assert!(!out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("owned by another user"), "{said}");
    assert!(said.contains("choose another with `runtime-dir`"), "{said}");
    let lines = crate::oversight::history_until(&env, &["--session", &s.0], |lines| {
        lines
            .iter()
            .any(|l| l["summary"] == "echo own-trail-marker")
    });
    assert!(!lines.is_empty());
    let out = run(&["history", "--json", "--session", &s.0]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("own-trail-marker"),
        "{out:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("owned by another user"),
        "{out:?}"
    );
    // doctor's fix is one this user can carry out: not a chmod of another user's directory.
    let out = run(&["doctor"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("have root remove"), "{said}");
    assert!(!said.contains("chmod 700"), "{said}");
    mcp.close().await;
}

/// `sshmcp output` prints a command handle's streams apart, found by a prefix of its id, and
/// with `-f` follows it to its end and exits with its status; `sshmcp kill` stops a command
/// or a forward of an agent's session, with no key, as the agent's own stop would, and the
/// trail says the person did it.
#[tokio::test]
async fn output_and_kill_reach_an_agents_work_without_its_key() {
    let (env, mcp, s) = connected().await;
    let started = crate::on_session(
        &mcp,
        &s,
        "command_start",
        json!({"command": "echo out1; echo err1 >&2; sleep 1; echo out2; exit 3"}),
    )
    .await;
    let handle = started["handle_id"].as_str().unwrap().to_string();
    let out = env.cli(&["output", "-f", &handle[..10]]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(stdout(&out), "out1\nout2\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("err1\n") && err.contains(&format!("sshmcp: {handle} completed, exit 3")),
        "{err}"
    );
    // Once it ended, the whole of it, without following; and it stays as it ended.
    let out = env.cli(&["output", &handle]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout(&out), "out1\nout2\n");
    let out = env.cli(&["kill", "-y", &handle]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already ended (completed, exit 3)"),
        "{out:?}"
    );
    let r = crate::on_session(&mcp, &s, "command_status", json!({"handle_id": handle})).await;
    assert_eq!(
        (&r["status"], &r["exit_code"], &r["stopped_by"]),
        (&json!("completed"), &json!(3), &Value::Null),
        "{r}"
    );
    // Many pages of output, every byte once and in order.
    let long =
        crate::on_session(&mcp, &s, "command_start", json!({"command": "seq 1 40000"})).await;
    let long = long["handle_id"].as_str().unwrap().to_string();
    let r = crate::on_session(
        &mcp,
        &s,
        "command_status",
        json!({"handle_id": long, "wait_seconds": 30}),
    )
    .await;
    assert_eq!(r["status"], "completed", "{r}");
    let expected: String = (1..=40000).map(|n| format!("{n}\n")).collect();
    for args in [
        &["output", long.as_str()][..],
        &["output", "-f", long.as_str()],
    ] {
        let out = env.cli(args);
        assert!(out.status.success(), "{args:?}: {:?}", out.status);
        assert!(
            stdout(&out) == expected,
            "{args:?}: {} bytes",
            out.stdout.len()
        );
    }

    let sleep = format!("sleep {}", sshmcp_tests::process::unique_sleep(120));
    let running = crate::on_session(&mcp, &s, "command_start", json!({"command": sleep})).await;
    let running = running["handle_id"].as_str().unwrap().to_string();
    // An agent already waiting for its end learns who stopped it too.
    let waiting = {
        let (other, s, running) = (env.mcp().await, s.clone(), running.clone());
        tokio::spawn(async move {
            let args = json!({"handle_id": running, "wait_seconds": 60});
            let r = crate::on_session(&other, &s, "command_status", args).await;
            other.close().await;
            r
        })
    };
    let out = env.cli(&["kill", "--yes", &running[..10]]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout(&out),
        format!("command {running} of session {}: killed\n", s.0)
    );
    for r in [
        waiting.await.unwrap(),
        crate::on_session(&mcp, &s, "command_status", json!({"handle_id": running})).await,
    ] {
        assert_eq!(
            (&r["status"], &r["stopped_by"]),
            (&json!("killed"), &json!("person")),
            "the agent learns who stopped it: {r}"
        );
    }
    // So does the next daemon's.
    assert!(env.cli(&["daemon", "restart"]).status.success());
    let r = crate::on_session(&mcp, &s, "command_status", json!({"handle_id": running})).await;
    assert_eq!(r["stopped_by"], "person", "{r}");

    let forward = crate::on_session(
        &mcp,
        &s,
        "forward_start",
        json!({"kind": "dynamic", "listen_port": 0}),
    )
    .await;
    let forward = forward["forward_id"].as_str().unwrap().to_string();
    let out = env.cli(&["output", &forward]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("only a command has output"),
        "{out:?}"
    );
    let out = env.cli(&["kill", "-y", &forward]);
    assert!(stdout(&out).ends_with(": closed\n"), "{out:?}");
    let r = crate::on_session(&mcp, &s, "forward_list", json!({})).await;
    assert_eq!(r["forwards"], json!([]), "{r}");
    // The agent that names it learns who closed it.
    let r = crate::on_session(&mcp, &s, "forward_stop", json!({"forward_id": forward})).await;
    assert_eq!(crate::code(&r), "forward_not_found", "{r}");
    assert!(
        crate::message(&r).contains("the person closed it at"),
        "{r}"
    );

    let out = env.cli(&["kill", "-y", "cmd-nosuch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no command, transfer or forward"),
        "{out:?}"
    );
    let lines = crate::oversight::history_until(&env, &["--session", &s.0], |lines| {
        lines.iter().any(|l| {
            l["tool"] == "forward_stop"
                && l["summary"]
                    .as_str()
                    .is_some_and(|s| s.contains("by the person"))
        })
    });
    let kill = lines
        .iter()
        .find(|l| l["tool"] == "command_kill")
        .expect("the person's kill in the trail");
    assert!(kill.get("client").is_none(), "{kill}");
    assert_eq!(
        kill["summary"],
        format!("{running} (by the person: sshmcp kill)")
    );
    mcp.close().await;
}
