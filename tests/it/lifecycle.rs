//! The daemon's life across crashes, restarts and stops: sessions re-adopted with their ids
//! and keys, a shim that reconnects by itself, a clean stop, and a torn record survived.

use serde_json::{Value, json};
use sshmcp_tests::TestEnv;
use sshmcp_tests::mcp::{answer, session_of};
use sshmcp_tests::process::{count_matching, gone, unique_sleep, until_matching};

use crate::{code, connect, connected, exec, on_session, remote_out};

fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).unwrap();
}

/// Waits until a process whose command line holds `needle` runs on this machine (the test's
/// sshd is local): a remote command sends no event of its own to wait on.
async fn until_running(needle: &str) {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while count_matching(&[needle]) == 0 {
        assert!(
            std::time::Instant::now() < give_up,
            "{needle} never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Starts an `exec` of `sleep <secs>` after `before` (with `extra` arguments) and waits until
/// the sleep runs; the answer still to come, and the sleep's marker.
async fn exec_sleeping(
    mcp: &sshmcp_tests::McpClient,
    s: &(String, String),
    (before, secs): (&str, u32),
    extra: Value,
) -> (tokio::sync::oneshot::Receiver<Value>, String) {
    let sleep = unique_sleep(secs);
    let mut args = json!({"session_id": s.0, "session_key": s.1,
                          "command": format!("{before}sleep {sleep}")});
    if let (Some(args), Some(extra)) = (args.as_object_mut(), extra.as_object()) {
        args.extend(extra.clone());
    }
    let (_, pending) = mcp.start_call("exec", args).await;
    until_running(&sleep).await;
    (pending, sleep)
}

/// Stops the daemon with the CLI while `pending` is under way; that call's answer.
async fn answer_after_a_stop(
    env: &TestEnv,
    pending: tokio::sync::oneshot::Receiver<Value>,
) -> Value {
    let out = env.cli(&["daemon", "stop"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    answer(pending).await
}

async fn sessions(mcp: &sshmcp_tests::McpClient) -> Vec<Value> {
    let r = mcp.call("session_list", json!({})).await;
    assert_eq!(r["ok"], true, "{r}");
    r["sessions"].as_array().unwrap().clone()
}

#[tokio::test]
async fn after_a_crash_the_same_shim_gets_its_sessions_back_with_their_keys() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "testbed"})).await;
    let s = session_of(&r);
    let master = r["master_pid"].as_u64().unwrap();
    let before = sessions(&mcp).await;
    let crashed = env.crash_daemon();
    // The very next call of the same shim starts a daemon, which re-adopted the session.
    let after = sessions(&mcp).await;
    assert_ne!(env.daemon_pid(), Some(crashed), "a new daemon");
    assert_eq!(after.len(), 1);
    for field in [
        "session_id",
        "target",
        "server_port",
        "master_pid",
        "created_at",
    ] {
        assert_eq!(after[0][field], before[0][field], "{field} kept");
    }
    assert_eq!(after[0]["state"], "ready");
    assert_eq!(after[0]["master_pid"], master);
    assert_eq!(remote_out(&mcp, &s, "echo same key").await, "same key\n");
    assert!(env.daemon_log_shows("session re-adopted"));
    // A wrong key is still refused: the hash came back, not a blank check.
    let wrong = (s.0.clone(), format!("{}x", s.1));
    assert_eq!(
        code(&exec(&mcp, &wrong, "true", json!({})).await),
        "invalid_session_key"
    );
    mcp.close().await;
}

#[tokio::test]
async fn a_master_that_died_while_the_daemon_was_down_is_lost() {
    let (env, mcp, s) = connected().await;
    let master = sessions(&mcp).await[0]["master_pid"].as_u64().unwrap() as u32;
    env.crash_daemon();
    signal(master, nix::sys::signal::Signal::SIGKILL);
    assert!(gone(master), "the master died");
    let after = sessions(&mcp).await;
    assert_eq!(after[0]["session_id"], s.0.as_str());
    assert_eq!(after[0]["state"], "lost");
    assert_eq!(
        code(&exec(&mcp, &s, "true", json!({})).await),
        "connection_lost"
    );
    // Lost is not stuck: disconnect, then connect again.
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(r["state"], "closed", "{r}");
    connect(&mcp).await;
    mcp.close().await;
}

#[tokio::test]
async fn a_call_cut_by_a_crash_is_not_repeated_and_the_next_call_works() {
    let (env, mcp, s) = connected().await;
    let (pending, _) = exec_sleeping(&mcp, &s, ("", 60), json!({})).await;
    env.crash_daemon();
    let cut = answer(pending).await;
    assert_eq!(code(&cut), "daemon_unavailable");
    let message = cut["error"]["message"].as_str().unwrap();
    assert!(message.contains("not repeated"), "{message}");
    assert_eq!(remote_out(&mcp, &s, "echo next").await, "next\n");
    mcp.close().await;
}

#[tokio::test]
async fn restart_hands_every_session_to_the_new_daemon() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let s = session_of(&mcp.call("connect", json!({"alias": "testbed"})).await);
    let handle = on_session(
        &mcp,
        &s,
        "command_start",
        json!({"command": "echo handed over"}),
    )
    .await;
    let ended = on_session(
        &mcp,
        &s,
        "command_status",
        json!({"handle_id": handle["handle_id"], "wait_seconds": 30}),
    )
    .await;
    assert_eq!(ended["status"], "completed", "{ended}");
    // A command running at the restart is cut off, and the restart names it.
    let sleep = format!("sleep {}", sshmcp_tests::process::unique_sleep(120));
    let running = on_session(&mcp, &s, "command_start", json!({"command": sleep})).await;
    let running = running["handle_id"].as_str().unwrap().to_string();
    // So is an exec under way (another agent's), whose agent learns its command ended.
    let exec_secs = sshmcp_tests::process::unique_sleep(120);
    let other = env.mcp().await;
    let exec_args = json!({"command": format!("sleep {exec_secs}")});
    let (other_s, exec_sleep) = (s.clone(), format!("sleep {exec_secs}"));
    let under_way = tokio::spawn(async move {
        let r = on_session(&other, &other_s, "exec", exec_args).await;
        other.close().await;
        r
    });
    let exec_own = format!("sleep\0{exec_secs}");
    assert!(
        until_matching(&[&exec_own], 1).await,
        "the exec's sleep runs"
    );
    let before = sessions(&mcp).await;
    let old = env.daemon_pid().unwrap();
    let out = env.cli(&["daemon", "restart"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("1 session kept"), "{said}");
    assert!(
        said.contains(&format!(
            "1 running command was cut off (their handles now say `lost`): {running} ({sleep})"
        )),
        "{said}"
    );
    assert!(
        said.contains("1 exec call was cut off (the command ended; its agent is told): ")
            && said.contains(&format!("({exec_sleep})")),
        "{said}"
    );
    let cut_exec = under_way.await.unwrap();
    assert_eq!(code(&cut_exec), "daemon_unavailable", "{cut_exec}");
    assert!(
        crate::message(&cut_exec).contains("its command was ended with it"),
        "{cut_exec}"
    );
    assert!(
        until_matching(&[&exec_own], 0).await,
        "the exec's sleep ended"
    );
    assert!(gone(old), "the old daemon exited");
    assert_ne!(env.daemon_pid(), Some(old));
    let after = sessions(&mcp).await;
    assert_eq!(after.len(), 1);
    assert_eq!(after[0]["session_id"], before[0]["session_id"]);
    assert_eq!(
        after[0]["master_pid"], before[0]["master_pid"],
        "the same master"
    );
    assert_eq!(after[0]["state"], "ready");
    assert_ne!(before[0]["last_used_at"], before[0]["created_at"]);
    assert_eq!(
        after[0]["last_used_at"], before[0]["last_used_at"],
        "when it was last used is kept"
    );
    assert_eq!(remote_out(&mcp, &s, "echo kept").await, "kept\n");
    let cut = on_session(&mcp, &s, "command_status", json!({"handle_id": running})).await;
    assert_eq!(cut["status"], "lost", "{cut}");
    let r = on_session(
        &mcp,
        &s,
        "command_status",
        json!({"handle_id": handle["handle_id"], "stdout_offset": 0}),
    )
    .await;
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(
        crate::text(&r["stdout"]),
        "handed over\n",
        "the output files stayed"
    );
    // Left for the new daemon, not kept for good: they go with their session.
    let spool = env.local_root.join(".sshmcp/spool").join(&s.0);
    assert_eq!(
        std::fs::read_dir(&spool).unwrap().count(),
        4,
        "two handles' files"
    );
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert!(
        sshmcp_tests::env::until_absent(&spool).await,
        "the session's output files went with it, and their directory"
    );
    mcp.close().await;
}

#[tokio::test]
async fn stop_leaves_no_process_socket_or_pidfile() {
    let (env, mcp, s) = connected().await;
    let master = sessions(&mcp).await[0]["master_pid"].as_u64().unwrap() as u32;
    let daemon = env.daemon_pid().unwrap();
    remote_out(&mcp, &s, "true").await;
    let out = env.cli(&["daemon", "stop"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(gone(daemon) && gone(master));
    assert!(
        !env.runtime_dir.join("sshmcpd.sock").exists(),
        "socket removed"
    );
    assert!(
        !env.runtime_dir.join("sshmcpd.pid").exists(),
        "pidfile removed"
    );
    let runtime = env.runtime_dir.display().to_string();
    assert_eq!(
        count_matching(&[&runtime]),
        0,
        "no ssh of the daemon is left"
    );
    let record: Value =
        serde_json::from_slice(&std::fs::read(env.runtime_dir.join("sessions.json")).unwrap())
            .unwrap();
    assert_eq!(record["sessions"], json!([]), "nothing left to re-adopt");
    mcp.close().await;
}

/// A client that arrives while the daemon is stopping gets the next daemon. The stop is made
/// slow by a command that ignores SIGTERM, which the closing session waits for.
#[tokio::test]
async fn a_client_arriving_during_a_stop_waits_for_the_next_daemon() {
    let (env, mcp, s) = connected().await;
    let master = sessions(&mcp).await[0]["master_pid"].as_u64().unwrap() as u32;
    let old = env.daemon_pid().unwrap();
    let sleep = unique_sleep(60);
    let stubborn = format!("trap '' TERM; sleep {sleep}; sleep {sleep}");
    let _pending = mcp
        .start_call(
            "exec",
            json!({"session_id": s.0, "session_key": s.1, "command": stubborn}),
        )
        .await;
    until_running(&sleep).await;
    let cli = {
        let (bin, vars) = (sshmcp_tests::bins::path("sshmcp"), env.env_vars());
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(bin)
                .args(["daemon", "stop"])
                .env_clear()
                .envs(vars)
                .output()
                .unwrap()
        })
    };
    let pidfile = env.runtime_dir.join("sshmcpd.pid");
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !std::fs::read_to_string(&pidfile)
        .unwrap_or_default()
        .contains("stopping")
    {
        assert!(
            std::time::Instant::now() < give_up,
            "the daemon began stopping"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let late = env.mcp().await;
    let r = late.call("session_list", json!({})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(
        r["sessions"],
        json!([]),
        "the old daemon closed its session"
    );
    assert_ne!(env.daemon_pid(), Some(old));
    assert!(
        env.daemon_log_shows(&format!("previous={old}")),
        "it waited"
    );
    assert!(cli.await.unwrap().status.success());
    late.close().await;
    assert!(gone(master));
    mcp.close().await;
}

#[tokio::test]
async fn a_torn_record_is_set_aside_and_the_daemon_starts() {
    let env = TestEnv::new();
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&env.runtime_dir)
        .unwrap();
    let torn = r#"{"version": 1, "sessions": [{"session_id": "s01234"#;
    std::fs::write(env.runtime_dir.join("sessions.json"), torn).unwrap();
    let mcp = env.mcp().await;
    let s = connect(&mcp).await;
    assert_eq!(remote_out(&mcp, &s, "echo fine").await, "fine\n");
    assert!(env.daemon_log_shows("session record unusable"));
    let aside: Vec<_> = std::fs::read_dir(&env.runtime_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("unusable"))
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(std::fs::read_to_string(aside[0].path()).unwrap(), torn);
    mcp.close().await;
}

#[tokio::test]
async fn command_handles_outlive_a_crash_the_interrupted_one_says_lost() {
    let (env, mcp, s) = connected().await;
    let sleep = unique_sleep(60);
    let cut = on_session(
        &mcp,
        &s,
        "command_start",
        json!({"command": format!("echo before; sleep {sleep}")}),
    )
    .await;
    let cut_id = cut["handle_id"].as_str().unwrap().to_string();
    let done = on_session(
        &mcp,
        &s,
        "command_start",
        json!({"command": "echo finished"}),
    )
    .await;
    let done_id = done["handle_id"].as_str().unwrap().to_string();
    let ended = on_session(
        &mcp,
        &s,
        "command_status",
        json!({"handle_id": done_id, "wait_seconds": 30}),
    )
    .await;
    assert_eq!(ended["status"], "completed", "{ended}");
    until_running(&sleep).await;
    env.crash_daemon();
    let status = |id: String| {
        on_session(
            &mcp,
            &s,
            "command_status",
            json!({"handle_id": id, "stdout_offset": 0}),
        )
    };
    let r = status(cut_id.clone()).await;
    assert_eq!(r["status"], "lost", "{r}");
    assert_eq!(r["pid"], cut["pid"]);
    assert_eq!(
        crate::text(&r["stdout"]),
        "before\n",
        "output until the crash kept"
    );
    assert!(r["ended_at"].is_string());
    let r = status(done_id.clone()).await;
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["exit_code"], 0);
    assert_eq!(crate::text(&r["stdout"]), "finished\n");
    // An ended handle's group was seen empty: nothing is ever sent to that number again.
    let r = on_session(&mcp, &s, "command_kill", json!({"handle_id": done_id})).await;
    assert_eq!(r["result"], "not_running", "{r}");
    let list = on_session(&mcp, &s, "command_list", json!({})).await;
    let ids: Vec<&str> = list["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["handle_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [done_id.as_str(), cut_id.as_str()], "newest first");
    mcp.close().await;
}

/// The only handle of a session, its daemon killed right after `command_start` answered:
/// nobody could follow the command any more, so it ends with the daemon (its channel's relay
/// ends it), and the next daemon lists it `lost`, with its PID, and finds nothing to kill.
#[tokio::test]
async fn a_handle_running_at_a_crash_ends_with_the_daemon_and_stays_listed() {
    let (env, mcp, s) = connected().await;
    let sleep = unique_sleep(120);
    let started = on_session(
        &mcp,
        &s,
        "command_start",
        json!({"command": format!("sleep {sleep}")}),
    )
    .await;
    assert!(started["pid"].is_u64(), "{started}");
    env.crash_daemon();
    assert!(
        sshmcp_tests::process::until_matching(&[&sleep], 0).await,
        "the command outlived its daemon"
    );
    let id = started["handle_id"].clone();
    let r = on_session(&mcp, &s, "command_status", json!({"handle_id": id})).await;
    assert_eq!(
        (&r["status"], &r["pid"]),
        (&json!("lost"), &started["pid"]),
        "{r}"
    );
    let k = on_session(&mcp, &s, "command_kill", json!({"handle_id": id})).await;
    assert_eq!(k["result"], "not_running", "{k}");
    mcp.close().await;
}

/// A handle lost at a crash, whose process group's number another group of the session's
/// user has taken since: `command_kill` looks and sends nothing, answering `error`, and the
/// other group runs on. (The record is made to name the other group: the kernel hands a
/// number out again only once every process of the old group is gone and reaped.)
#[tokio::test]
async fn a_lost_handles_group_number_taken_by_another_is_never_signalled() {
    use std::os::unix::process::CommandExt;
    let (env, mcp, s) = connected().await;
    let sleep = unique_sleep(120);
    let args = json!({"command": format!("sleep {sleep}")});
    let started = on_session(&mcp, &s, "command_start", args).await;
    let id = started["handle_id"].clone();
    let other = unique_sleep(120);
    let mut stranger = std::process::Command::new("setsid");
    stranger.args(["sleep", &other]);
    if nix::unistd::getuid().is_root() {
        let user = nix::unistd::User::from_name(&env.sshd.user)
            .unwrap()
            .unwrap();
        stranger.uid(user.uid.as_raw()).gid(user.gid.as_raw());
    }
    let mut stranger = stranger.spawn().unwrap();
    env.crash_daemon();
    let record = env.runtime_dir.join("sessions.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    let handles = doc["sessions"][0]["commands"].as_array_mut().unwrap();
    let handle = handles.iter_mut().find(|h| h["handle_id"] == id).unwrap();
    handle["pid"] = json!(stranger.id());
    std::fs::write(&record, doc.to_string()).unwrap();
    let args = json!({"handle_id": id, "force": true});
    let k = on_session(&mcp, &s, "command_kill", args).await;
    assert_eq!(
        (&k["ok"], &k["result"]),
        (&json!(true), &json!("error")),
        "{k}"
    );
    assert!(
        stranger.try_wait().unwrap().is_none(),
        "the other group was signalled"
    );
    stranger.kill().unwrap();
    stranger.wait().unwrap();
    mcp.close().await;
}

/// A session whose daemon died closing it (the record says `closing`) is not taken back, and
/// its handles' output files go with it, as its disconnect would have removed them; the files
/// `spool_output` kept stay.
#[tokio::test]
async fn a_session_whose_daemon_died_closing_it_leaves_no_output_files() {
    let (env, mcp, s) = connected().await;
    let files = || env.spool_files(&s.0);
    let args = json!({"command": format!("echo out; sleep {}", unique_sleep(120))});
    let started = on_session(&mcp, &s, "command_start", args).await;
    assert_eq!(started["ok"], true, "{started}");
    let args = json!({"command": format!("echo kept; sleep {}", unique_sleep(120)),
                      "handoff_after": 1, "spool_output": true});
    let handed = on_session(&mcp, &s, "exec", args).await;
    assert_eq!(handed["handed_off"], true, "{handed}");
    let mut kept: Vec<std::path::PathBuf> = ["stdout", "stderr"]
        .iter()
        .map(|stream| {
            handed[stream]["spool_path"]
                .as_str()
                .expect("a kept file")
                .into()
        })
        .collect();
    kept.sort();
    assert_eq!(files().len(), 4, "both handles' files: {:?}", files());
    env.crash_daemon();
    let record = env.runtime_dir.join("sessions.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    doc["sessions"][0]["state"] = json!("closing");
    std::fs::write(&record, doc.to_string()).unwrap();
    // The next daemon reads the record before it answers.
    assert_eq!(sessions(&mcp).await, Vec::<Value>::new());
    assert_eq!(files(), kept);
    mcp.close().await;
}

/// What a master runs at each rekey to check the host's key is still this daemon's binary
/// once the daemon is gone: a path of the binary's file, not `/proc/PID/exe` of a dead
/// daemon, which by then names whatever process took its PID (and OpenSSH ends the
/// connection when that check fails).
#[tokio::test]
async fn a_masters_host_key_check_outlives_its_daemon() {
    use std::os::unix::fs::MetadataExt;
    let (env, mcp, _s) = connected().await;
    let master = sessions(&mcp).await[0]["master_pid"].as_u64().unwrap();
    let cmdline = std::fs::read(format!("/proc/{master}/cmdline")).unwrap();
    let option = String::from_utf8_lossy(&cmdline)
        .split('\0')
        .find_map(|arg| arg.strip_prefix("KnownHostsCommand=").map(String::from))
        .expect("the master checks host keys through the daemon");
    let program = option.split('"').nth(1).expect("a quoted program");
    env.crash_daemon();
    assert!(!program.starts_with("/proc/"), "{option}");
    let (ours, runs) = (
        std::fs::metadata(sshmcp_tests::bins::path("sshmcpd")).unwrap(),
        std::fs::metadata(program).unwrap(),
    );
    assert_eq!(
        (ours.dev(), ours.ino()),
        (runs.dev(), runs.ino()),
        "{option}"
    );
    mcp.close().await;
}

/// An `exec` under way when its daemon is killed cannot be answered any more: it ends with
/// the daemon instead of running on unseen past its timeout, and the next daemon's session
/// counts no command.
#[tokio::test]
async fn an_exec_in_flight_at_a_crash_ends_with_the_daemon() {
    let (env, mcp, s) = connected().await;
    let (pending, sleep) = exec_sleeping(&mcp, &s, ("", 77), json!({"timeout": 5})).await;
    env.crash_daemon();
    assert!(
        sshmcp_tests::process::until_matching(&[&sleep], 0).await,
        "the command outlived its daemon"
    );
    drop(pending);
    let r = exec(&mcp, &s, "echo after", json!({})).await;
    assert_eq!(crate::text(&r["stdout"]), "after\n", "{r}");
    assert_eq!(sessions(&mcp).await[0]["active_commands"], json!(null), "0");
    mcp.close().await;
}

/// A connect still resolving its target (here a `Match exec` of 5 s, longer than the stop
/// waits for answers) when the daemon is asked to stop opens no session that would outlive
/// the daemon: it answers `server_closing` at once, and no master of the daemon is left.
#[tokio::test]
async fn a_connect_resolving_at_a_stop_opens_no_session() {
    let env = TestEnv::new();
    let sleep = unique_sleep(5);
    env.sshd.add_host_block(&format!(
        "Match host slowpoke exec \"sleep {sleep}\"\n\nHost slowpoke\n  HostName 127.0.0.1\n  \
         Port {}\n  User {}",
        env.sshd.port, env.sshd.user
    ));
    let mcp = env.mcp().await;
    let (_, pending) = mcp
        .start_call("connect", json!({"alias": "slowpoke"}))
        .await;
    until_running(&format!("sleep {sleep}")).await;
    let r = answer_after_a_stop(&env, pending).await;
    assert_eq!(code(&r), "server_closing", "{r}");
    let runtime = env.runtime_dir.display().to_string();
    assert_eq!(
        count_matching(&[&runtime]),
        0,
        "a master of the stopped daemon runs"
    );
    mcp.close().await;
}

/// A daemon killed during an `exec` with `spool_output` cannot remove its half-written spool
/// files (up to the cap a stream); the next daemon removes them the next time it spools there.
#[tokio::test]
async fn a_killed_daemons_half_written_spool_files_go_with_the_next_spool() {
    let (env, mcp, s) = connected().await;
    let spooled = json!({"spool_output": true});
    let (pending, _) = exec_sleeping(&mcp, &s, ("echo begun; ", 79), spooled).await;
    let dir = env.local_root.join(".sshmcp/spool").join(&s.0);
    let files = || {
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let half_written = files();
    assert_eq!(half_written.len(), 2, "{half_written:?}");
    env.crash_daemon();
    drop(pending);
    assert_eq!(files(), half_written, "nothing removed them yet");
    let r = exec(&mcp, &s, "echo next", json!({"spool_output": true})).await;
    let spooled = r["stdout"]["spool_path"]
        .as_str()
        .expect("spooled")
        .to_string();
    assert_eq!(std::fs::read_to_string(&spooled).unwrap(), "next\n");
    let now = files();
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(
        now.iter().all(|name| !half_written.contains(name)),
        "{now:?} {half_written:?}"
    );
    mcp.close().await;
}

/// An `exec` under way when the daemon is asked to stop is stopped with its session, and its
/// client is told so (`server_closing`) rather than left to guess whether it ran.
#[tokio::test]
async fn an_exec_in_flight_at_a_stop_is_told_the_daemon_stopped_it() {
    let (env, mcp, s) = connected().await;
    let (pending, sleep) = exec_sleeping(&mcp, &s, ("", 78), json!({})).await;
    let r = answer_after_a_stop(&env, pending).await;
    assert_eq!(code(&r), "server_closing", "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("stopping"), "{message}");
    assert!(
        sshmcp_tests::process::until_matching(&[&sleep], 0).await,
        "the command outlived the stop"
    );
    mcp.close().await;
}

/// Two crashes, each with every channel of a `MaxSessions 2` server busy with a long command:
/// the channels come free with the dead daemons' commands, and `exec` runs at once.
#[tokio::test]
async fn after_two_crashes_with_every_channel_busy_exec_runs_within_its_timeout() {
    let env = TestEnv::with(&sshmcp_tests::SshdOptions::allowing_sessions(2), &[]);
    let mcp = env.mcp().await;
    let s = connect(&mcp).await;
    for _ in 0..2 {
        let sleeps = [unique_sleep(300), unique_sleep(300)];
        let mut pending = Vec::new();
        for sleep in &sleeps {
            let args = json!({"session_id": s.0, "session_key": s.1, "command": format!("sleep {sleep}"), "timeout": 600});
            pending.push(mcp.start_call("exec", args).await.1);
        }
        for sleep in &sleeps {
            until_running(sleep).await;
        }
        env.crash_daemon();
        drop(pending);
    }
    let r = exec(&mcp, &s, "echo alive", json!({"timeout": 20})).await;
    assert_eq!(crate::text(&r["stdout"]), "alive\n", "{r}");
    mcp.close().await;
}

/// `sshmcp daemon stop` after a crash: the masters the dead daemon left up, and their
/// forwards, are closed too (a daemon is started to adopt and close them).
#[tokio::test]
async fn daemon_stop_after_a_crash_closes_what_the_dead_daemon_left() {
    let (env, mcp, s) = connected().await;
    let f = on_session(&mcp, &s, "forward_start", json!({"kind": "dynamic"})).await;
    let port = f["listen_port"].as_u64().unwrap() as u16;
    let master = sessions(&mcp).await[0]["master_pid"].as_u64().unwrap() as u32;
    env.crash_daemon();
    assert!(
        std::path::Path::new(&format!("/proc/{master}")).exists(),
        "a crash leaves the master up"
    );
    let out = env.cli(&["daemon", "stop"]);
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("starting one to close them"), "{said}");
    assert!(gone(master), "the master is closed");
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "the forward still listens"
    );
    assert!(env.daemon_pid().is_none());
    drop(mcp);
}

/// A daemon with no session and no client exits after its idle period; a session, however
/// idle, keeps it.
#[tokio::test]
async fn an_idle_daemon_exits_but_a_session_keeps_it() {
    let env = TestEnv::with(&Default::default(), &[("SSHMCP_IDLE_EXIT", "1")]);
    let mcp = env.mcp().await;
    let s = connect(&mcp).await;
    let daemon = env.daemon_pid().unwrap();
    mcp.close().await;
    assert!(env.daemon_log_shows("sessions keep the daemon"));
    let stat = std::fs::read_to_string(format!("/proc/{daemon}/stat")).unwrap_or_default();
    assert!(
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        "a session keeps the daemon: {stat}"
    );
    let out = env.cli(&["disconnect", &s.0]);
    assert!(out.status.success());
    assert!(gone(daemon), "idle with nothing to keep it: it exits");
    assert!(env.daemon_log_shows("idle for 1s with no session or client"));
    assert!(!env.runtime_dir.join("sshmcpd.sock").exists());
}
