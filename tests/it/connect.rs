//! Sessions through the real binaries: connect, identity and limits, failure classes,
//! disconnect, lost masters, sharing between shims.

use serde_json::json;
use sshmcp_tests::process::{count_matching, until_matching};
use sshmcp_tests::{SshdOptions, TestEnv};

use crate::{code, connect, connected, exec, first_session_until};

#[tokio::test]
async fn connect_reports_the_session_and_remote_facts() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["state"], "ready");
    assert_eq!(r["target"], "testbed");
    assert_eq!(r["server_host"], "127.0.0.1");
    assert_eq!(r["server_port"], env.sshd.port);
    assert_eq!(r["remote"]["user"], env.sshd.user.as_str());
    assert!(r["remote"]["uname"].as_str().unwrap().starts_with("Linux"));
    assert!(r["remote"]["home"].as_str().unwrap().starts_with('/'));
    assert_eq!(r["session_key"].as_str().unwrap().len(), 43);
    let pid = r["master_pid"].as_u64().unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    mcp.close().await;
}

#[tokio::test]
async fn one_session_per_server_identity() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let (id, _key) = connect(&mcp).await;
    // The same HostName and Port through a direct pair instead of the alias: the same server.
    let direct = json!({"host": "127.0.0.1", "user": env.sshd.user, "port": env.sshd.port});
    let r = mcp.call("connect", direct).await;
    assert_eq!(code(&r), "already_connected");
    let said = r["error"]["message"].as_str().unwrap();
    // Whose login it is: an agent asking for another user must not take it for its own.
    let user = format!("logged in as {}", env.sshd.user);
    assert!(said.contains(&id) && said.contains(&user), "{r}");
    assert_eq!(
        r["error"]["session_id"], id,
        "the session to use, as a field: {r}"
    );
    // Every spelling of the address is that address.
    for spelling in [
        "127.1",
        "2130706433",
        "0x7f000001",
        "127.000.000.001",
        "::ffff:127.0.0.1",
        "::FFFF:127.0.0.1",
        "::ffff:7f00:1",
        "0:0:0:0:0:ffff:7f00:1",
    ] {
        let other = json!({"host": spelling, "user": env.sshd.user, "port": env.sshd.port});
        let r = mcp.call("connect", other).await;
        assert_eq!(code(&r), "already_connected", "{spelling}: {r}");
        assert!(r["error"]["message"].as_str().unwrap().contains(&id), "{r}");
    }
    env.sshd.add_host_block(&format!(
        "Host upper\n  HostName LOCALHOST\n  Port {}\n  User {}",
        env.sshd.port, env.sshd.user
    ));
    // "localhost" is another identity (DNS is not resolved) ...
    let r = mcp.call("connect", json!({"alias": "upper"})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["server_host"], "localhost");
    // ... and the same one whatever its case.
    let lower = json!({"host": "localhost", "user": env.sshd.user, "port": env.sshd.port});
    let r = mcp.call("connect", lower).await;
    assert_eq!(code(&r), "already_connected");
    mcp.close().await;
}

/// A master's log stays bounded on disk: a closed session's goes with it, and a failed
/// connect's stays (it says why) for the person to read.
#[tokio::test]
async fn a_closed_sessions_master_log_goes_and_a_failed_connects_stays() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let logs = env.state_dir.join("masters");
    let (id, _key) = connect(&mcp).await;
    let log = logs.join(format!("{id}.log"));
    assert!(log.exists(), "{}", log.display());
    let r = mcp.call("disconnect", json!({"session_id": id})).await;
    assert_eq!(r["state"], "closed", "{r}");
    assert!(!log.exists(), "the closed session's master log is kept");
    let closed_port = closed_port();
    let r = mcp
        .call(
            "connect",
            json!({"host": "127.0.0.1", "user": env.sshd.user, "port": closed_port}),
        )
        .await;
    assert_eq!(code(&r), "connection_start_failed", "{r}");
    let kept: Vec<_> = std::fs::read_dir(&logs).unwrap().flatten().collect();
    assert_eq!(kept.len(), 1, "the failed connect's log");
    mcp.close().await;
}

/// A port nothing listens on (bound a moment, then let go).
pub(crate) fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A daemon takes its ssh config when it starts. An MCP server whose environment names
/// another (its client was launched otherwise) is served with the daemon's, and a connect
/// that fails says so; one whose environment matches is told nothing of it.
#[tokio::test]
async fn a_failed_connect_names_the_daemons_other_ssh_config() {
    let env = TestEnv::new();
    let first = env.mcp().await;
    assert_eq!(first.call("session_list", json!({})).await["ok"], true);
    let other = env.root.path().join("other_ssh_config");
    std::fs::write(&other, "Host elsewhere\n  HostName 127.0.0.1\n").unwrap();
    let mut vars = env.env_vars();
    for (name, value) in &mut vars {
        if name == "SSHMCP_SSH_CONFIG" {
            *value = other.display().to_string();
        }
    }
    let second = env.mcp_with_env(&vars).await;
    let refused = json!({"host": "127.0.0.1", "user": env.sshd.user, "port": closed_port()});
    let r = second.call("connect", refused.clone()).await;
    assert_eq!(code(&r), "connection_start_failed", "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&other.display().to_string()) && message.contains("SSHMCP_SSH_CONFIG"),
        "{message}"
    );
    let untold = |r: &serde_json::Value| {
        assert_eq!(code(r), "connection_start_failed", "{r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(!message.contains("SSHMCP_SSH_CONFIG"), "{r}");
    };
    untold(&first.call("connect", refused.clone()).await);
    // An empty one counts as unset: nothing to tell (the later value wins).
    vars.push(("SSHMCP_SSH_CONFIG".into(), String::new()));
    let third = env.mcp_with_env(&vars).await;
    untold(&third.call("connect", refused).await);
    third.close().await;
    first.close().await;
    second.close().await;
}

#[tokio::test]
async fn session_limit_counts_every_session() {
    let env = TestEnv::with(&SshdOptions::default(), &[("SSHMCP_MAX_SESSIONS", "1")]);
    let mcp = env.mcp().await;
    connect(&mcp).await;
    let other = json!({"host": "localhost", "user": env.sshd.user, "port": env.sshd.port});
    let r = mcp.call("connect", other).await;
    assert_eq!(code(&r), "session_limit_reached");
    mcp.close().await;
}

#[tokio::test]
async fn failures_have_concise_classes_and_never_raw_stderr() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let closed_port = closed_port();
    let r = mcp
        .call(
            "connect",
            json!({"host": "127.0.0.1", "user": "x", "port": closed_port}),
        )
        .await;
    assert_eq!(code(&r), "connection_start_failed");
    assert_eq!(r["error"]["message"], "the connection was refused");
    let empty_kh = env.root.path().join("empty_known_hosts");
    std::fs::write(&empty_kh, "").unwrap();
    env.sshd.add_host_block(&format!(
        "Host unknownkey\n  HostName localhost\n  Port {}\n  User {}\n  UserKnownHostsFile {}",
        env.sshd.port,
        env.sshd.user,
        empty_kh.display()
    ));
    let r = mcp.call("connect", json!({"alias": "unknownkey"})).await;
    assert_eq!(code(&r), "connection_start_failed");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("host key is not known"),
        "{r}"
    );
    // A known_hosts entry with another key for this server: a changed host key.
    let wrong_kh = env.root.path().join("wrong_known_hosts");
    let other_key = std::fs::read_to_string(env.sshd.client_key.with_extension("pub")).unwrap();
    let other_key: Vec<&str> = other_key.split_whitespace().take(2).collect();
    std::fs::write(
        &wrong_kh,
        format!("[localhost]:{} {}\n", env.sshd.port, other_key.join(" ")),
    )
    .unwrap();
    env.sshd.add_host_block(&format!(
        "Host changedkey\n  HostName localhost\n  Port {}\n  User {}\n  UserKnownHostsFile {}",
        env.sshd.port,
        env.sshd.user,
        wrong_kh.display()
    ));
    let r = mcp.call("connect", json!({"alias": "changedkey"})).await;
    assert_eq!(code(&r), "connection_start_failed");
    assert_eq!(
        r["error"]["message"],
        "the server's host key has changed; check the server, then fix known_hosts"
    );
    let r = mcp
        .call(
            "connect",
            json!({"host": "127.0.0.1", "user": "nosuchuser", "port": env.sshd.port}),
        )
        .await;
    assert_eq!(code(&r), "connection_start_failed");
    assert_eq!(
        r["error"]["message"],
        "authentication was refused by the server"
    );
    // No identity was left reserved by the failures.
    let r = mcp.call("session_list", json!({})).await;
    assert_eq!(r["sessions"], json!([]));
    mcp.close().await;
}

#[tokio::test]
async fn a_needed_prompt_without_askpass_route_has_the_exact_message() {
    let env = TestEnv::new();
    let key = env.sshd.authorize_new_key("locked_key", "correct horse");
    // `locked` is outside the shared `Host *` defaults, so this key is the only identity.
    env.sshd.add_host_block(&format!(
        "Host locked\n  HostName localhost\n  Port {}\n  User {}\n  IdentityFile {}\n  \
         IdentitiesOnly yes\n  UserKnownHostsFile {}\n  StrictHostKeyChecking yes\n  BatchMode no",
        env.sshd.port,
        env.sshd.user,
        key.display(),
        env.sshd.known_hosts.display()
    ));
    let r = mcp_connect(&env, "locked").await;
    assert_eq!(code(&r), "connection_start_failed");
    assert_eq!(
        r["error"]["message"],
        "SSH authentication requires an interactive system prompt, but no usable user session environment was available"
    );
}

async fn mcp_connect(env: &TestEnv, alias: &str) -> serde_json::Value {
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": alias})).await;
    mcp.close().await;
    r
}

#[tokio::test]
async fn disconnect_closes_and_forgets() {
    let (_env, mcp, s) = connected().await;
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(r, json!({"ok": true, "session_id": s.0, "state": "closed"}));
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(code(&r), "session_not_found");
    let r = exec(&mcp, &s, "true", json!({})).await;
    assert_eq!(code(&r), "session_not_found");
    // The server can be connected again afterwards.
    connect(&mcp).await;
    mcp.close().await;
}

#[tokio::test]
async fn disconnect_cancels_running_commands() {
    let (env, mcp, s) = connected().await;
    let secs = sshmcp_tests::process::unique_sleep(42);
    let args = json!({"session_id": s.0, "session_key": s.1,
                      "command": format!("sleep {secs}"), "timeout": 120});
    let (_, rx) = mcp.start_call("exec", args).await;
    let running = first_session_until(&mcp, |row| row["active_commands"] == 1).await;
    assert!(running, "the command never started");
    let probe = format!("pgrep -f 'sleep {secs}' >/dev/null && echo yes || echo no");
    let watcher = crate::connect_watcher(&env).await;
    assert!(crate::remote_until(&watcher.0, &watcher.1, &probe, "yes\n").await);
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(r["state"], "closed");
    let answer = sshmcp_tests::mcp::answer(rx).await;
    assert_eq!(code(&answer), "session_closed");
    assert!(
        crate::remote_until(&watcher.0, &watcher.1, &probe, "no\n").await,
        "disconnect must end the remote command"
    );
    watcher.0.close().await;
    mcp.close().await;
}

#[tokio::test]
async fn a_killed_master_makes_the_session_lost() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    let s = sshmcp_tests::mcp::session_of(&r);
    let pid = r["master_pid"].as_i64().unwrap() as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let lost = first_session_until(&mcp, |row| row["state"] == "lost").await;
    assert!(lost, "the session never became lost");
    let r = exec(&mcp, &s, "true", json!({})).await;
    assert_eq!(code(&r), "connection_lost");
    // It does not reconnect by itself, and still owns its server until disconnected.
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    assert_eq!(code(&r), "already_connected");
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(r["state"], "closed");
    connect(&mcp).await;
    mcp.close().await;
}

#[tokio::test]
async fn two_shims_share_one_daemon_and_one_session() {
    let env = TestEnv::new();
    let a = env.mcp().await;
    let b = env.mcp().await;
    let s = connect(&a).await;
    let r = exec(&b, &s, "echo from-b", json!({})).await;
    assert_eq!(crate::text(&r["stdout"]), "from-b\n");
    let list = b.call("session_list", json!({})).await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);
    assert!(
        !list.to_string().contains(&s.1),
        "session_list must never show a key"
    );
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn a_session_outlives_the_shim_that_opened_it() {
    let env = TestEnv::new();
    let first = env.mcp().await;
    let s = connect(&first).await;
    first.kill().await;
    let out = env.cli(&["sessions"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(table.contains(&s.0) && table.contains("ready"), "{table}");
    let second = env.mcp().await;
    let r = exec(&second, &s, "echo still-here", json!({})).await;
    assert_eq!(crate::text(&r["stdout"]), "still-here\n");
    let out = env.cli(&["disconnect", &s.0]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = exec(&second, &s, "true", json!({})).await;
    assert_eq!(code(&r), "session_not_found");
    second.close().await;
}

#[tokio::test]
async fn a_silent_server_times_out_within_connect_timeout() {
    let env = TestEnv::new();
    let (silent, port) = silent_server();
    let mcp = env.mcp().await;
    let args =
        json!({"host": "127.0.0.1", "user": env.sshd.user, "port": port, "connect_timeout": 1});
    let r = mcp.call("connect", args).await;
    assert_eq!(code(&r), "connection_start_failed");
    assert_eq!(r["error"]["message"], "the connection timed out");
    let r = mcp.call("session_list", json!({})).await;
    assert_eq!(r["sessions"], json!([]));
    drop(silent);
    mcp.close().await;
}

/// A daemon killed while a connect authenticates leaves no ssh behind that nothing owns (the
/// next daemon looks for leftover masters only as it starts): the foreground ssh dies with it.
#[tokio::test]
async fn a_daemon_killed_during_a_connect_leaves_no_ssh() {
    let env = TestEnv::new();
    let (silent, port) = silent_server();
    let mcp = env.mcp().await;
    let target =
        json!({"host": "127.0.0.1", "user": env.sshd.user, "port": port, "connect_timeout": 60});
    let (_, pending) = mcp.start_call("connect", target).await;
    let masters_dir = env.runtime_dir.join("m").display().to_string();
    assert!(
        until_matching(&[&masters_dir], 1).await,
        "ssh authenticates"
    );
    env.crash_daemon();
    assert!(
        until_matching(&[&masters_dir], 0).await,
        "ssh outlived its daemon"
    );
    drop(pending);
    drop(silent);
    mcp.close().await;
}

/// Sessions still authenticating own their server, count toward the limit, show as
/// `starting`, can be disconnected, and authenticate side by side (only prompts take turns).
#[tokio::test]
async fn starting_sessions_own_their_server_count_and_authenticate_in_parallel() {
    let env = TestEnv::with(&SshdOptions::default(), &[("SSHMCP_MAX_SESSIONS", "2")]);
    // Two servers that accept TCP but never answer: their connects stay in authentication.
    let (silent_a, port_a) = silent_server();
    let (silent_b, port_b) = silent_server();
    let mcp = env.mcp().await;
    let target = |port: u16| json!({"host": "127.0.0.1", "user": env.sshd.user, "port": port, "connect_timeout": 60});
    let (_, pending_a) = mcp.start_call("connect", target(port_a)).await;
    let (_, pending_b) = mcp.start_call("connect", target(port_b)).await;
    assert!(first_session_until(&mcp, |_| true).await);
    let second = |row: &serde_json::Value| row.is_object();
    assert!(crate::nth_session_until(&mcp, 1, second).await);
    let rows = mcp.call("session_list", json!({})).await["sessions"].clone();
    let rows = rows.as_array().unwrap().clone();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows.iter()
            .all(|r| r["state"] == "starting" && r["master_pid"].is_null())
    );
    // Both are authenticating at once: two ssh masters for this daemon.
    let masters_dir = env.runtime_dir.join("m").display().to_string();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while count_matching(&[&masters_dir]) < 2 && std::time::Instant::now() < give_up {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        count_matching(&[&masters_dir]),
        2,
        "authentication runs in parallel"
    );
    let id_a = rows.iter().find(|r| r["server_port"] == port_a).unwrap()["session_id"].clone();
    let r = mcp.call("connect", target(port_a)).await;
    assert_eq!(code(&r), "already_connected");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains(id_a.as_str().unwrap()),
        "{r}"
    );
    assert!(
        r["error"]["message"].as_str().unwrap().contains("starting"),
        "{r}"
    );
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    assert_eq!(code(&r), "session_limit_reached");
    for row in &rows {
        let r = mcp
            .call("disconnect", json!({"session_id": row["session_id"]}))
            .await;
        assert_eq!(r["state"], "closed", "{r}");
    }
    for pending in [pending_a, pending_b] {
        let r = sshmcp_tests::mcp::answer(pending).await;
        assert_eq!(code(&r), "session_closed", "{r}");
    }
    connect(&mcp).await;
    drop((silent_a, silent_b));
    mcp.close().await;
}

/// A command under way when its master dies answers `connection_lost` saying it had started
/// (`error.started`: run again, it might do its work twice) and what it printed so far. A call after that started nothing,
/// and says nothing of it.
// Two workers: `exec_under_way` waits by blocking, while the exec's call goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cut_by_a_dead_master_says_it_had_started() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    let s = sshmcp_tests::mcp::session_of(&r);
    let master = r["master_pid"].as_i64().unwrap() as i32;
    let marker = format!("begun-{}", std::process::id());
    let secs = sshmcp_tests::process::unique_sleep(60);
    let agent = env.mcp().await;
    let waiting = tokio::spawn({
        let (s, command) = (s.clone(), format!("echo {marker}; sleep {secs}"));
        async move {
            let r = exec(&agent, &s, &command, json!({"timeout": 60})).await;
            agent.close().await;
            r
        }
    });
    // Under way once watch shows its first line of output.
    crate::oversight::exec_under_way(&env, marker.len() + 1);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(master),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let r = waiting.await.unwrap();
    assert_eq!(code(&r), "connection_lost", "{r}");
    assert_eq!(r["error"]["started"], true, "{r}");
    // What it printed until then, as an exec answer gives it.
    assert_eq!(r["error"]["stdout"], format!("{marker}\n"), "{r}");
    assert!(r["error"].get("stderr").is_none(), "{r}");
    let r = exec(&mcp, &s, "true", json!({})).await;
    assert_eq!(code(&r), "connection_lost", "{r}");
    assert!(r["error"].get("started").is_none(), "{r}");
    mcp.close().await;
}

/// A link that goes down makes the session `lost` once the master's keepalives give up (here
/// the configuration asks for 1 s × 2; the daemon adds 15 s × 3 when it asks for none).
/// Needs root for the network namespaces.
#[tokio::test]
async fn a_dead_link_makes_the_session_lost() {
    let env = TestEnv::across_network(&[]);
    env.sshd.add_host_block(&format!(
        "Host netbed\n  HostName {}\n  Port {}\n  User {}\n  ServerAliveInterval 1\n  ServerAliveCountMax 2",
        env.sshd.addr, env.sshd.port, env.sshd.user
    ));
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "netbed"})).await;
    assert_eq!(r["ok"], true, "{r}");
    let s = sshmcp_tests::mcp::session_of(&r);
    let r = exec(&mcp, &s, "echo across", json!({})).await;
    assert_eq!(crate::text(&r["stdout"]), "across\n");
    env.netns.as_ref().unwrap().set_link(false);
    let lost = first_session_until(&mcp, |row| row["state"] == "lost").await;
    assert!(lost, "the session never became lost");
    let r = exec(&mcp, &s, "true", json!({})).await;
    assert_eq!(code(&r), "connection_lost");
    mcp.close().await;
}

/// An agent that dies while its connect is authenticating leaves no half-made session behind
/// to block the server.
#[tokio::test]
async fn an_abandoned_connect_leaves_nothing_behind() {
    let env = TestEnv::new();
    let (silent, port) = silent_server();
    let args =
        json!({"host": "127.0.0.1", "user": env.sshd.user, "port": port, "connect_timeout": 60});
    let first = env.mcp().await;
    let (_, _pending) = first.start_call("connect", args.clone()).await;
    let watcher = env.mcp().await;
    assert!(first_session_until(&watcher, |row| row["state"] == "starting").await);
    first.kill().await;
    assert!(
        first_session_until(&watcher, |row| row.is_null()).await,
        "the abandoned session must go away"
    );
    // The server is free again (this connect then times out by itself, quickly).
    let mut retry = args;
    retry["connect_timeout"] = json!(1);
    let r = watcher.call("connect", retry).await;
    assert_eq!(r["error"]["message"], "the connection timed out", "{r}");
    drop(silent);
    watcher.close().await;
}

/// A disconnect whose caller dies half-way still finishes: the session must not stay
/// `closing` forever. (The command ignores TERM, so closing takes a second.)
#[tokio::test]
async fn an_abandoned_disconnect_still_finishes() {
    let (env, runner, s) = connected().await;
    let args = json!({"session_id": s.0, "session_key": s.1,
                      "command": "trap '' TERM; sleep 30", "timeout": 120});
    let (_, _running) = runner.start_call("exec", args).await;
    assert!(first_session_until(&runner, |row| row["active_commands"] == 1).await);
    let closer = env.mcp().await;
    let (_, _pending) = closer
        .start_call("disconnect", json!({"session_id": s.0}))
        .await;
    assert!(first_session_until(&runner, |row| row["state"] == "closing").await);
    closer.kill().await;
    assert!(
        first_session_until(&runner, |row| row.is_null()).await,
        "the session must finish closing"
    );
    connect(&runner).await;
    runner.close().await;
}

/// A server that accepts TCP (the kernel completes the handshake) but never sends an SSH
/// banner: connects to it stay in authentication until their timeout. Keep the listener alive.
fn silent_server() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    (listener, port)
}

/// A host that swallows every packet does not delay a connect to another: the second is
/// ready within a second while the first still waits for its server. Needs root.
#[tokio::test]
async fn a_black_holed_host_never_delays_another_connect() {
    let env = TestEnv::across_network(&[]);
    let hole = env.netns.as_ref().unwrap().black_hole();
    env.sshd.add_host_block(&format!(
        "Host netbed\n  HostName {}\n  Port {}\n  User {}",
        env.sshd.addr, env.sshd.port, env.sshd.user
    ));
    let mcp = env.mcp().await;
    let args = json!({"host": hole, "user": env.sshd.user, "port": 22, "connect_timeout": 15});
    let (_, stuck) = mcp.start_call("connect", args).await;
    assert!(first_session_until(&mcp, |row| row["state"] == "starting").await);
    let asked = std::time::Instant::now();
    let r = mcp.call("connect", json!({"alias": "netbed"})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(1),
        "ready after {:?}",
        asked.elapsed()
    );
    let list = mcp.call("session_list", json!({})).await;
    let states: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["state"].as_str().unwrap())
        .collect();
    assert!(
        states.contains(&"starting"),
        "the first still waits: {list}"
    );
    for row in list["sessions"].as_array().unwrap() {
        mcp.call("disconnect", json!({"session_id": row["session_id"]}))
            .await;
    }
    let r = sshmcp_tests::mcp::answer(stuck).await;
    assert_eq!(code(&r), "session_closed", "{r}");
    mcp.close().await;
}

/// Adds Host `alias` (reaching the test sshd as `host`) whose key is locked with the
/// passphrase `correct horse`: its connect needs a prompt.
fn add_locked_host(env: &TestEnv, alias: &str, host: &str) {
    let key = env
        .sshd
        .authorize_new_key(&format!("{alias}_key"), "correct horse");
    env.sshd.add_host_block(&format!(
        "Host {alias}\n  HostName {host}\n  Port {}\n  User {}\n  IdentityFile {}\n  \
         IdentitiesOnly yes\n  UserKnownHostsFile {}\n  StrictHostKeyChecking yes\n  BatchMode no",
        env.sshd.port,
        env.sshd.user,
        key.display(),
        env.sshd.known_hosts.display()
    ));
}

/// A connect given up after the master checked the server's key (here: disconnected while
/// its passphrase prompt is shown) leaves no reported host key behind.
#[tokio::test]
async fn a_connect_given_up_after_the_key_check_leaves_no_host_key_file() {
    let probe_dir = tempfile::tempdir().unwrap();
    let shown = probe_dir.path().join("shown");
    let askpass = probe_dir.path().join("askpass");
    let script = format!("#!/bin/sh\n: > '{}'\nexec sleep 30\n", shown.display());
    std::fs::write(&askpass, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&askpass, std::fs::Permissions::from_mode(0o755)).unwrap();
    let askpass_path = askpass.display().to_string();
    let env = TestEnv::with(
        &SshdOptions::default(),
        &[("SSH_ASKPASS", &askpass_path), ("DISPLAY", ":99")],
    );
    add_locked_host(&env, "locked1", "127.0.0.1");
    let mcp = env.mcp().await;
    let (_, pending) = mcp.start_call("connect", json!({"alias": "locked1"})).await;
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !shown.exists() {
        assert!(
            std::time::Instant::now() < give_up,
            "the prompt never showed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let masters = env.state_dir.join("masters");
    let host_keys = || {
        std::fs::read_dir(&masters)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".hostkey"))
            .count()
    };
    assert_eq!(host_keys(), 1, "the master reported the key it checked");
    let listed = mcp.call("session_list", json!({})).await;
    let id = listed["sessions"][0]["session_id"].clone();
    let r = mcp.call("disconnect", json!({"session_id": id})).await;
    assert_eq!(r["state"], "closed", "{r}");
    let r = sshmcp_tests::mcp::answer(pending).await;
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(host_keys(), 0, "the reported key stayed");
    mcp.close().await;
}

/// Prompts take turns daemon-wide: two connects that each need a passphrase run their
/// askpass dialogs one after the other, never at once, and both succeed.
#[tokio::test]
async fn passphrase_prompts_take_turns() {
    let probe_dir = tempfile::tempdir().unwrap();
    let log = probe_dir.path().join("prompts.log");
    let askpass = probe_dir.path().join("askpass");
    std::fs::write(
        &askpass,
        format!(
            "#!/bin/sh\necho \"start $$\" >> '{log}'\nsleep 0.4\necho \"end $$\" >> '{log}'\n\
             echo 'correct horse'\n",
            log = log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&askpass, std::fs::Permissions::from_mode(0o755)).unwrap();
    let askpass_path = askpass.display().to_string();
    let env = TestEnv::with(
        &SshdOptions::default(),
        &[("SSH_ASKPASS", &askpass_path), ("DISPLAY", ":99")],
    );
    // Two names of one sshd are two server identities (DNS is not resolved).
    for (alias, host) in [("locked1", "127.0.0.1"), ("locked2", "localhost")] {
        add_locked_host(&env, alias, host);
    }
    let mcp = env.mcp().await;
    let (_, first) = mcp.start_call("connect", json!({"alias": "locked1"})).await;
    let (_, second) = mcp.start_call("connect", json!({"alias": "locked2"})).await;
    for pending in [first, second] {
        let r = sshmcp_tests::mcp::answer(pending).await;
        assert_eq!(r["ok"], true, "{r}");
    }
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    for pair in lines.chunks(2) {
        let (start, end) = (&pair[0], &pair[1]);
        assert_eq!(
            start.replace("start", "end"),
            *end,
            "a prompt ran while another was shown: {lines:?}"
        );
    }
    mcp.close().await;
}

/// A daemon whose binary an upgrade replaced while it runs (as `install` does: a new file
/// under the name) still prompts through itself: askpass is the running binary, not the name
/// it was started by, which now names another file (the old one is deleted).
#[tokio::test]
async fn a_daemon_whose_binary_was_replaced_still_prompts() {
    let dir = tempfile::tempdir().unwrap();
    let askpass = dir.path().join("askpass");
    std::fs::write(&askpass, "#!/bin/sh\necho 'correct horse'\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&askpass, std::fs::Permissions::from_mode(0o755)).unwrap();
    let daemon = dir.path().join("sshmcpd");
    std::fs::copy(sshmcp_tests::bins::path("sshmcpd"), &daemon).unwrap();
    let (askpass_path, daemon_path) = (askpass.display().to_string(), daemon.display().to_string());
    let env = TestEnv::with(
        &SshdOptions::default(),
        &[
            ("SSH_ASKPASS", &askpass_path),
            ("DISPLAY", ":99"),
            ("SSHMCP_DAEMON", &daemon_path),
        ],
    );
    add_locked_host(&env, "locked", "127.0.0.1");
    let mcp = env.mcp().await;
    assert_eq!(mcp.call("session_list", json!({})).await["ok"], true);
    // The upgrade: a new file takes the name.
    let new = dir.path().join("sshmcpd.new");
    std::fs::copy(&daemon, &new).unwrap();
    std::fs::rename(&new, &daemon).unwrap();
    let r = mcp.call("connect", json!({"alias": "locked"})).await;
    assert_eq!(r["ok"], true, "{r}");
    mcp.close().await;
}

/// A master offers AES-GCM first where this CPU does AES in hardware (cheaper than
/// ChaCha20-Poly1305 for bulk output), as long as the user's configuration leaves OpenSSH's
/// cipher list as it is; a list the user chose is what the master offers, and the daemon's
/// `keep-cipher-order` keeps OpenSSH's own order.
#[tokio::test]
async fn the_master_prefers_aes_gcm_unless_the_configuration_chose_ciphers() {
    let debug = SshdOptions {
        log_level: "DEBUG1",
        ..SshdOptions::default()
    };
    let agreed = |env: &TestEnv| -> Vec<String> {
        env.sshd
            .log_text()
            .lines()
            .filter_map(|l| l.split("kex: client->server cipher: ").nth(1))
            .map(|rest| rest.split(' ').next().unwrap_or_default().to_string())
            .collect()
    };
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let aes = cpuinfo.lines().any(|l| {
        (l.starts_with("flags") || l.starts_with("Features"))
            && l.split_whitespace().any(|f| f == "aes")
    });
    let openssh_first = "chacha20-poly1305@openssh.com";
    let expected = if aes {
        "aes128-gcm@openssh.com"
    } else {
        openssh_first
    };
    let (env, mcp, session) = crate::connected_with(&debug, &[]).await;
    assert_eq!(agreed(&env), [expected]);
    let r = mcp
        .call("disconnect", json!({"session_id": session.0}))
        .await;
    assert_eq!(r["ok"], true, "{r}");

    let config = std::fs::read_to_string(&env.sshd.ssh_config).unwrap();
    std::fs::write(
        &env.sshd.ssh_config,
        format!("Ciphers aes256-ctr\n{config}"),
    )
    .unwrap();
    connect(&mcp).await;
    assert_eq!(agreed(&env), [expected, "aes256-ctr"]);
    mcp.close().await;

    let (env, mcp, _) = crate::connected_with(&debug, &[("SSHMCP_KEEP_CIPHER_ORDER", "1")]).await;
    assert_eq!(agreed(&env), [openssh_first]);
    mcp.close().await;
}

/// A configuration whose `Match exec` hangs: the connect fails within its `connect_timeout`
/// (not the daemon's call deadline, minutes later), saying why, and what the match started
/// is gone with it.
#[tokio::test]
async fn a_hanging_match_exec_fails_the_connect_within_its_timeout() {
    let env = TestEnv::new();
    let secs = sshmcp_tests::process::unique_sleep(100);
    env.sshd.add_host_block(&format!(
        "Match originalhost hangingmatch exec \"sleep {secs}\"\n  HostName 127.0.0.1"
    ));
    let mcp = env.mcp().await;
    let r = mcp
        .call(
            "connect",
            json!({"alias": "hangingmatch", "connect_timeout": 1}),
        )
        .await;
    assert_eq!(code(&r), "connection_start_failed", "{r}");
    let said = r["error"]["message"].as_str().unwrap();
    assert!(said.contains("Match exec"), "{r}");
    assert!(
        until_matching(&["sleep", &secs], 0).await,
        "the match's command lives on"
    );
    mcp.close().await;
}

/// `connect_timeout` bounds the whole connect, not each of its steps: a `Match exec` of 2 s,
/// which both the resolving `ssh -G` and the master run, leaves the master less than it
/// needs of 3.5 s, though each step alone would fit.
#[tokio::test]
async fn connect_timeout_bounds_the_whole_connect() {
    let env = TestEnv::new();
    let secs = sshmcp_tests::process::unique_sleep(2);
    env.sshd.add_host_block(&format!(
        "Match originalhost slowmatch exec \"sleep {secs}\"\n  HostName 127.0.0.1\n  Port {}\n  \
         User {}",
        env.sshd.port, env.sshd.user
    ));
    let mcp = env.mcp().await;
    let began = std::time::Instant::now();
    let r = mcp
        .call(
            "connect",
            json!({"alias": "slowmatch", "connect_timeout": 3.5}),
        )
        .await;
    let took = began.elapsed();
    assert_eq!(code(&r), "connection_start_failed", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{r}"
    );
    assert!(took < std::time::Duration::from_secs(5), "{took:?}: {r}");
    assert!(
        until_matching(&["sleep", &secs], 0).await,
        "the match's command lives on"
    );
    mcp.close().await;
}

/// The test configuration says `BatchMode yes`, which Debian's OpenSSH takes to mean
/// keepalives every 300 s: the master still gets the daemon's, every 15 s.
#[tokio::test]
async fn a_master_gets_keepalives_unless_the_configuration_asks_as_often() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    let pid = r["master_pid"].as_u64().unwrap_or_else(|| panic!("{r}"));
    let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let argv = String::from_utf8_lossy(&argv).replace('\0', " ");
    assert!(argv.contains("ServerAliveInterval=15"), "{argv}");
    env.sshd.add_host_block(&format!(
        "Host frequent\n  HostName 127.0.0.1\n  Port {}\n  User {}\n  ServerAliveInterval 5",
        env.sshd.port, env.sshd.user
    ));
    mcp.call("disconnect", json!({"session_id": r["session_id"]}))
        .await;
    let r = mcp.call("connect", json!({"alias": "frequent"})).await;
    let pid = r["master_pid"].as_u64().unwrap_or_else(|| panic!("{r}"));
    let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let argv = String::from_utf8_lossy(&argv).replace('\0', " ");
    assert!(!argv.contains("ServerAliveInterval=15"), "{argv}");
    mcp.close().await;
}

/// A connect the MCP client cancels while the login shell is still starting gives up at once:
/// its reservation goes (the server may be connected again) and so does its master.
#[tokio::test]
async fn a_cancelled_connect_leaves_no_session_and_no_master() {
    let user = sshmcp_tests::users::slow_login_user();
    let env = TestEnv::new();
    env.sshd.add_host_block(&format!(
        "Host other\n  HostName 127.0.0.1\n  Port {}\n  User {user}",
        env.sshd.port
    ));
    let mcp = env.mcp().await;
    let (id, _answer) = mcp.start_call("connect", json!({"alias": "other"})).await;
    assert!(first_session_until(&mcp, |s| s["state"] == "starting").await);
    mcp.cancel(id).await;
    assert!(
        first_session_until(&mcp, |s| s.is_null()).await,
        "the session stayed"
    );
    let runtime = env.runtime_dir.display().to_string();
    // `-M` as an argument of its own: the world's directory name may hold `-M` too, and
    // the daemon's command line names that directory.
    assert!(
        until_matching(&["ssh", "\0-M\0", &runtime], 0).await,
        "the master lives on"
    );
    mcp.close().await;
}

/// A connect cancelled while ssh is still authenticating (here waiting on a ProxyCommand that
/// never speaks) leaves nothing ssh started: the proxy goes with it, as on a timeout.
#[tokio::test]
async fn a_connect_cancelled_during_authentication_leaves_no_process() {
    let env = TestEnv::new();
    let secs = sshmcp_tests::process::unique_sleep(300);
    env.sshd.add_host_block(&format!(
        "Host viaproxy\n  HostName 127.0.0.1\n  Port {}\n  User {}\n  ProxyCommand sleep {secs}",
        env.sshd.port, env.sshd.user
    ));
    let mcp = env.mcp().await;
    let args = json!({"alias": "viaproxy", "connect_timeout": 120});
    let (id, _answer) = mcp.start_call("connect", args).await;
    let proxy = ["sleep", secs.as_str()];
    assert!(until_matching(&proxy, 1).await, "the proxy never started");
    mcp.cancel(id).await;
    assert!(until_matching(&proxy, 0).await, "the proxy lives on");
    assert!(
        first_session_until(&mcp, |s| s.is_null()).await,
        "the session stayed"
    );
    mcp.close().await;
}
