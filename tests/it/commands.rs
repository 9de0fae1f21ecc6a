//! Command handles through the real binaries: command_start / status / kill / list, exec's
//! hand-off, progress notifications, and handles ending with their session.

use serde_json::{Value, json};
use sshmcp_tests::mcp::session_of;
use sshmcp_tests::process::unique_sleep;
use sshmcp_tests::users::{HANG_FILE, hanging_login_user, slow_login_user};
use sshmcp_tests::{McpClient, SshdOptions, TestEnv};

use crate::{code, connect, connect_watcher, connected, exec, fresh_dir, on_session, remote_out};

type Session = (String, String);

async fn start(mcp: &McpClient, s: &Session, command: &str) -> Value {
    let r = on_session(mcp, s, "command_start", json!({"command": command})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["handle_id"], r["id"], "{r}");
    r
}

async fn status(mcp: &McpClient, s: &Session, handle: &Value, extra: Value) -> Value {
    let mut args = json!({"handle_id": handle});
    if let (Some(args), Some(extra)) = (args.as_object_mut(), extra.as_object()) {
        args.extend(extra.clone());
    }
    on_session(mcp, s, "command_status", args).await
}

/// Waits (long-polling, no sleeps) until the handle's command ended; returns the last status.
async fn until_ended(mcp: &McpClient, s: &Session, handle: &Value) -> Value {
    for _ in 0..6 {
        let r = status(mcp, s, handle, json!({"wait_seconds": 10})).await;
        assert_eq!(r["ok"], true, "{r}");
        if r["status"] != "running" {
            return r;
        }
    }
    panic!("the command did not end within a minute");
}

/// Kills the handle's command with the defaults; its result must be `killed`.
/// Seven handles of `sleep {secs}`: as many as commands may hold of a session's channels, so
/// the next command or copy waits for one.
pub(crate) async fn holding_every_slot(mcp: &McpClient, s: &Session, secs: &str) -> Vec<Value> {
    let mut handles = Vec::new();
    for _ in 0..7 {
        handles.push(start(mcp, s, &format!("sleep {secs}")).await);
    }
    handles
}

pub(crate) async fn killed(mcp: &McpClient, s: &Session, handle: &Value) {
    let k = kill(mcp, s, &handle["handle_id"], json!({})).await;
    assert_eq!(k["result"], "killed", "{k}");
}

async fn kill(mcp: &McpClient, s: &Session, handle: &Value, extra: Value) -> Value {
    let mut args = json!({"handle_id": handle});
    if let (Some(args), Some(extra)) = (args.as_object_mut(), extra.as_object()) {
        args.extend(extra.clone());
    }
    let r = on_session(mcp, s, "command_kill", args).await;
    assert_eq!(r["ok"], true, "{r}");
    r
}

/// Whether no process whose command line holds `needle` is left on the host.
async fn none_left(mcp: &McpClient, s: &Session, needle: &str) -> bool {
    let probe = format!("pgrep -f '{needle}' || echo none");
    crate::text(&exec(mcp, s, &probe, json!({})).await["stdout"]) == "none\n"
}

/// On a server allowing three sessions, two handles running and a third waiting for a
/// channel: `command_kill` still ends each, through the session kept for kills, and the third
/// starts in the session the first one freed.
#[tokio::test]
async fn command_kill_ends_handles_on_a_server_their_sessions_fill() {
    let opts = SshdOptions::allowing_sessions(3);
    let env = TestEnv::with(&opts, &[]);
    let mcp = env.mcp().await;
    let s = connect(&mcp).await;
    let secs = unique_sleep(300);
    let command = format!("sleep {secs}");
    let first = start(&mcp, &s, &command).await;
    let second = start(&mcp, &s, &command).await;
    let refusals = || env.sshd.log_text().matches("no more sessions").count();
    let before = refusals();
    let args = json!({"session_id": s.0, "session_key": s.1, "command": command});
    let third = mcp.start_call("command_start", args).await.1;
    // The server refused the third its channel: the kills below find every session taken
    // but the one kept for them.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while refusals() == before {
        assert!(
            std::time::Instant::now() < give_up,
            "sshd refused no channel"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for handle in [&first, &second] {
        killed(&mcp, &s, handle).await;
    }
    let third = sshmcp_tests::mcp::answer(third).await;
    assert_eq!(third["ok"], true, "{third}");
    killed(&mcp, &s, &third).await;
    assert!(none_left(&mcp, &s, &format!("sleep {secs}")).await);
    mcp.close().await;
}

/// A command that waited for a channel says when it started, not when it was asked for: the
/// eighth command starts once one of seven ends, and its `started_at` comes after that end.
#[tokio::test]
async fn a_command_that_waited_for_a_channel_says_when_it_started() {
    let (_env, mcp, s) = connected().await;
    let secs = unique_sleep(300);
    let mut handles = holding_every_slot(&mcp, &s, &secs).await;
    let args = json!({"session_id": s.0, "session_key": s.1, "command": format!("sleep {secs}")});
    let waiting = mcp.start_call("command_start", args).await.1;
    let freed = handles.pop().unwrap();
    killed(&mcp, &s, &freed).await;
    let ended = until_ended(&mcp, &s, &freed["handle_id"]).await;
    let eighth = sshmcp_tests::mcp::answer(waiting).await;
    assert_eq!(eighth["status"], "running", "{eighth}");
    let (started, freed_at) = (
        eighth["started_at"].as_str().unwrap(),
        ended["ended_at"].as_str().unwrap(),
    );
    assert!(
        started >= freed_at,
        "started {started}, a channel freed {freed_at}"
    );
    handles.push(eighth);
    for handle in &handles {
        killed(&mcp, &s, handle).await;
    }
    assert!(none_left(&mcp, &s, &format!("sleep {secs}")).await);
    mcp.close().await;
}

/// Commands hold at most seven of the session's eight channels, however long they run: with
/// seven handles running and a command waiting for a channel, stat, a listing and a task's
/// status still answer at once; a copy (long work too) and the waiting command give up
/// having run nothing, as `channels_busy`.
#[tokio::test]
async fn brief_tools_answer_while_commands_hold_every_channel_they_may() {
    let (_env, mcp, s) = connected().await;
    let secs = unique_sleep(300);
    let handles = holding_every_slot(&mcp, &s, &secs).await;
    let args = json!({"session_id": s.0, "session_key": s.1, "command": "echo ran",
                      "timeout": 5});
    let waiting = mcp.start_call("exec", args).await.1;
    let r = on_session(&mcp, &s, "stat", json!({"path": "/etc/hostname"})).await;
    assert_eq!(r["type"], "file", "{r}");
    let r = on_session(&mcp, &s, "list_directory", json!({"path": "/etc"})).await;
    assert_eq!(r["ok"], true, "{r}");
    let r = on_session(&mcp, &s, "task_status", json!({"pid": 999_999})).await;
    assert_eq!(r["state"], "not_found", "{r}");
    // A copy may take long: it waits for a command's slot like a command, 25 s at most.
    let args = json!({"source": "/etc/hostname", "destination": "/tmp/sshmcp-never-copied"});
    let r = on_session(&mcp, &s, "copy_path", args).await;
    assert_eq!(code(&r), "channels_busy", "{r}");
    let said = r["error"]["message"].as_str().unwrap();
    assert!(said.starts_with("nothing ran: every channel"), "{r}");
    let r = sshmcp_tests::mcp::answer(waiting).await;
    assert_eq!(code(&r), "channels_busy", "{r}");
    for handle in &handles {
        killed(&mcp, &s, handle).await;
    }
    assert!(none_left(&mcp, &s, &format!("sleep {secs}")).await);
    mcp.close().await;
}

/// Long work the client cancels while it waits for a channel never runs: a recursive removal
/// and a command handle, queued behind seven handles, are gone once one of those ends. A copy
/// asked after them waits behind them (the queue is first come, first served), so when it is
/// done they would have run.
#[tokio::test]
async fn cancelled_work_waiting_for_a_channel_never_runs() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "cancelq").await;
    remote_out(
        &mcp,
        &s,
        &format!("mkdir {dir}/victim && echo x > {dir}/victim/f"),
    )
    .await;
    let secs = unique_sleep(300);
    let handles = holding_every_slot(&mcp, &s, &secs).await;
    let remove = json!({"session_id": s.0, "session_key": s.1,
                        "path": format!("{dir}/victim"), "recursive": true});
    let (removal, _never) = mcp.start_call("remove_path", remove).await;
    let marker = format!("{dir}/started");
    let begin = json!({"session_id": s.0, "session_key": s.1,
                       "command": format!("touch {marker}")});
    let (begun, _never) = mcp.start_call("command_start", begin).await;
    // The handle exists, waiting for a channel, when the cancel comes.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !on_session(&mcp, &s, "command_list", json!({})).await["commands"][0]["preview"]
        .as_str()
        .is_some_and(|p| p.starts_with("touch"))
    {
        assert!(std::time::Instant::now() < give_up, "the handle never came");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    mcp.cancel(removal).await;
    mcp.cancel(begun).await;
    killed(&mcp, &s, &handles[0]).await;
    let args = json!({"source": format!("{dir}/victim/f"), "destination": format!("{dir}/copy")});
    let r = on_session(&mcp, &s, "copy_path", args).await;
    assert_eq!(r["type"], "file", "the removal ran: {r}");
    let listed = remote_out(&mcp, &s, &format!("ls {dir}")).await;
    assert_eq!(listed, "copy\nvictim\n", "the command ran");
    // Nor does a handle stay for it.
    let listed = on_session(&mcp, &s, "command_list", json!({})).await;
    let previews: Vec<&str> = listed["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["preview"].as_str().unwrap())
        .collect();
    assert!(!previews.iter().any(|p| p.starts_with("touch")), "{listed}");
    assert_eq!(previews.len(), handles.len(), "{listed}");
    for handle in &handles[1..] {
        killed(&mcp, &s, handle).await;
    }
    assert!(none_left(&mcp, &s, &format!("sleep {secs}")).await);
    mcp.close().await;
}

/// A kill whose call the client cancels once the signal landed still marks the handle
/// `killed`: the kill goes on on the host, and so does the daemon's record of it. The command
/// takes its time to die (its TERM trap leaves a mark, then lingers), so the cancel comes
/// while the kill waits for the end.
#[tokio::test]
async fn a_kill_cancelled_after_its_signal_still_marks_the_handle_killed() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "killcancel").await;
    let mark = format!("{dir}/term");
    let secs = unique_sleep(300);
    let handle = start(
        &mcp,
        &s,
        &format!("trap 'touch {mark}; sleep 8; exit 0' TERM; sleep {secs} & wait"),
    )
    .await;
    let args = json!({"session_id": s.0, "session_key": s.1,
                      "handle_id": handle["handle_id"], "wait_seconds": 20});
    let (kill_call, answer) = mcp.start_call("command_kill", args).await;
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while remote_out(&mcp, &s, &format!("test -e {mark} && echo yes || echo no")).await != "yes\n" {
        assert!(std::time::Instant::now() < give_up, "the TERM never came");
    }
    mcp.cancel(kill_call).await;
    drop(answer);
    let ended = until_ended(&mcp, &s, &handle["handle_id"]).await;
    assert_eq!(ended["status"], "killed", "{ended}");
    assert!(none_left(&mcp, &s, &format!("sleep {secs}")).await);
    mcp.close().await;
}

/// On a server allowing two sessions, a command handle running: keeping a session aside for
/// kills would leave no command beside it, so none is kept, and commands still run.
#[tokio::test]
async fn commands_run_beside_a_handle_on_a_server_with_two_sessions() {
    let opts = SshdOptions::allowing_sessions(2);
    let env = TestEnv::with(&opts, &[]);
    let mcp = env.mcp().await;
    let s = connect(&mcp).await;
    let secs = unique_sleep(300);
    let handle = start(&mcp, &s, &format!("sleep {secs}")).await;
    for _ in 0..2 {
        let r = exec(&mcp, &s, "echo beside", json!({"timeout": 10})).await;
        assert_eq!(crate::text(&r["stdout"]), "beside\n", "{r}");
    }
    assert!(env.daemon_log_shows("none is kept for kills"));
    killed(&mcp, &s, &handle).await;
    assert!(none_left(&mcp, &s, &format!("sleep {secs}")).await);
    mcp.close().await;
}

/// On a server allowing three sessions, with a login shell that takes 2 s: a command runs, a
/// handle's channel is still in its login, and the next command is refused meanwhile. The
/// handle's channel counts as held, so the session keeps its channel for kills (three
/// sessions are not two): the next command waits and runs nothing, and the handle is killed.
#[tokio::test]
async fn a_handle_in_its_login_counts_as_holding_a_channel() {
    let opts = SshdOptions::allowing_sessions(3);
    let (env, mcp, s) = crate::logged_in_with(&slow_login_user(), &opts, &[]).await;
    let tag = unique_sleep(300);
    let (started, go) = (
        format!("/tmp/sshmcp-started.{tag}"),
        format!("/tmp/sshmcp-go.{tag}"),
    );
    let first = format!("touch {started}; while [ ! -e {go} ]; do sleep 0.05; done");
    let args = json!({"session_id": s.0, "session_key": s.1, "command": first, "timeout": 60});
    let first = mcp.start_call("exec", args).await.1;
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !std::path::Path::new(&started).exists() {
        assert!(
            std::time::Instant::now() < give_up,
            "the first command never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The handle opens the kill channel, then a channel of its own, whose login takes 2 s.
    let sessions = || env.sshd.log_text().matches("Starting session:").count();
    let before = sessions();
    let args = json!({"session_id": s.0, "session_key": s.1, "command": format!("sleep {tag}")});
    let handle = mcp.start_call("command_start", args).await.1;
    while sessions() < before + 2 {
        assert!(
            std::time::Instant::now() < give_up,
            "the handle opened no channel"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let r = exec(&mcp, &s, "echo beside", json!({"timeout": 3})).await;
    assert_eq!(code(&r), "channels_busy", "{r}");
    assert!(!env.daemon_log().contains("none is kept for kills"));
    let handle = sshmcp_tests::mcp::answer(handle).await;
    assert_eq!(handle["ok"], true, "{handle}");
    killed(&mcp, &s, &handle).await;
    std::fs::write(&go, "").unwrap();
    assert_eq!(sshmcp_tests::mcp::answer(first).await["exit_code"], 0);
    for file in [&started, &go] {
        std::fs::remove_file(file).unwrap();
    }
    let r = exec(&mcp, &s, "echo after", json!({})).await;
    assert_eq!(crate::text(&r["stdout"]), "after\n", "{r}");
    mcp.close().await;
}

/// Every `result` of command_kill that a real command can produce on demand, and the status
/// each leaves behind (`already_exited` needs a race: see the kill program's own test).
#[tokio::test]
async fn command_kill_results_on_real_commands() {
    let (_env, mcp, s) = connected().await;

    // A command that exits by itself: confirmed not running, nothing sent.
    let done = start(&mcp, &s, "echo hi").await;
    let ended = until_ended(&mcp, &s, &done["handle_id"]).await;
    assert_eq!(
        (
            &ended["status"],
            &ended["exit_code"],
            &json!(crate::text(&ended["stdout"]))
        ),
        (&json!("completed"), &json!(0), &json!("hi\n")),
        "{ended}"
    );
    let k = kill(&mcp, &s, &done["handle_id"], json!({})).await;
    assert_eq!(
        (&k["result"], &k["force_kill_used"], &k["signal"]),
        (&json!("not_running"), &json!(null), &json!(15)),
        "{k}"
    );
    assert_eq!(k["pid"], done["pid"]);
    let after = status(&mcp, &s, &done["handle_id"], json!({})).await;
    assert_eq!(after["status"], "killed", "{after}");

    // A pipeline ended by TERM: the whole group goes.
    let secs = unique_sleep(300);
    let piped = start(&mcp, &s, &format!("sleep {secs} | cat")).await;
    assert!(piped["pid"].as_u64().unwrap() > 1, "{piped}");
    assert_eq!(piped["status"], "running");
    let k = kill(&mcp, &s, &piped["handle_id"], json!({})).await;
    assert_eq!(
        (&k["result"], &k["force_kill_used"]),
        (&json!("killed"), &json!(null)),
        "{k}"
    );
    assert!(none_left(&mcp, &s, &format!("sleep {secs}")).await);
    let after = until_ended(&mcp, &s, &piped["handle_id"]).await;
    assert_eq!(after["status"], "killed", "{after}");
    assert!(after["ended_at"].is_string(), "{after}");

    // A command that ignores TERM: not killed without force, killed by the fallback with it.
    let secs = unique_sleep(300);
    let stubborn = start(&mcp, &s, &format!("trap '' TERM; sleep {secs}")).await;
    let k = kill(
        &mcp,
        &s,
        &stubborn["handle_id"],
        json!({"wait_seconds": 0.5}),
    )
    .await;
    assert_eq!(
        (&k["result"], &k["force_kill_used"]),
        (&json!("failed_to_kill"), &json!(null)),
        "{k}"
    );
    let still = status(&mcp, &s, &stubborn["handle_id"], json!({})).await;
    assert_eq!(still["status"], "running", "{still}");
    // A running command's stream that has had no byte is left out, as an empty one is.
    assert_eq!(
        (&still["stdout"], &still["stderr"]),
        (&json!(null), &json!(null)),
        "{still}"
    );
    let k = kill(
        &mcp,
        &s,
        &stubborn["handle_id"],
        json!({"wait_seconds": 0.5, "force": true}),
    )
    .await;
    assert_eq!(
        (&k["result"], &k["force_kill_used"]),
        (&json!("killed"), &json!(true)),
        "{k}"
    );
    assert!(none_left(&mcp, &s, &format!("sleep {secs}")).await);
    assert_eq!(
        until_ended(&mcp, &s, &stubborn["handle_id"]).await["status"],
        "killed"
    );

    // The history, newest first, with previews.
    let list = on_session(&mcp, &s, "command_list", json!({})).await;
    let commands = list["commands"].as_array().unwrap();
    let ids: Vec<&Value> = commands.iter().map(|c| &c["handle_id"]).collect();
    assert_eq!(
        ids,
        [
            &stubborn["handle_id"],
            &piped["handle_id"],
            &done["handle_id"]
        ],
        "{list}"
    );
    assert_eq!(commands[2]["preview"], "echo hi");
    assert!(commands.iter().all(|c| c["status"] == "killed"), "{list}");
    mcp.close().await;
}

/// Handles belong to their session: another session's handle is not found, wrong values are
/// refused at their limits, and disconnect kills the commands of its handles.
#[tokio::test]
async fn handles_belong_to_their_session_and_end_with_it() {
    let (env, mcp, s) = connected().await;
    let secs = unique_sleep(300);
    let h = start(&mcp, &s, &format!("sleep {secs}")).await;
    let (watcher, w) = connect_watcher(&env).await;
    for tool in ["command_status", "command_kill"] {
        let r = on_session(&watcher, &w, tool, json!({"handle_id": h["handle_id"]})).await;
        assert_eq!(code(&r), "command_not_found", "{r}");
    }
    let r = on_session(&mcp, &s, "command_status", json!({"handle_id": "cmd-nope"})).await;
    assert_eq!(code(&r), "command_not_found");
    // Limits, exactly at and one past each; a size wish past the cap is taken as the cap.
    let id = &h["handle_id"];
    for (tool, args, ok) in [
        (
            "command_status",
            json!({"handle_id": id, "max_bytes": 65536}),
            true,
        ),
        (
            "command_status",
            json!({"handle_id": id, "max_bytes": 65537}),
            true,
        ),
        (
            "command_status",
            json!({"handle_id": id, "max_bytes": 0}),
            false,
        ),
        (
            "command_status",
            json!({"handle_id": id, "wait_seconds": 300.01}),
            false,
        ),
        (
            "command_status",
            json!({"handle_id": id, "stdout_offset": 1}),
            false,
        ),
        (
            "command_kill",
            json!({"handle_id": id, "signal": 65}),
            false,
        ),
        ("command_kill", json!({"handle_id": id, "signal": 0}), false),
        // USR1's number differs between Linux and BSD: only fixed names are taken.
        (
            "command_kill",
            json!({"handle_id": id, "signal": "USR1"}),
            false,
        ),
        // A name whose third byte falls inside a character: refused, the server stays up
        // for the calls after it.
        (
            "command_kill",
            json!({"handle_id": id, "signal": "SI\u{e9}"}),
            false,
        ),
        (
            "command_kill",
            json!({"handle_id": id, "wait_seconds": 60.01}),
            false,
        ),
        (
            "exec",
            json!({"command": "true", "handoff_after": 0.99}),
            false,
        ),
        (
            "exec",
            json!({"command": "true", "handoff_after": 86400.01}),
            false,
        ),
    ] {
        let r = on_session(&mcp, &s, tool, args.clone()).await;
        match ok {
            true => assert_eq!(r["ok"], true, "{args}: {r}"),
            false => assert_eq!(code(&r), "invalid_arguments", "{args}: {r}"),
        }
    }
    let spool = env.local_root.join(".sshmcp/spool").join(&s.0);
    assert!(spool.exists(), "the handles' files are there");
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert!(none_left(&watcher, &w, &format!("sleep {secs}")).await);
    // Its handles' files went, and their directory with them.
    assert!(
        sshmcp_tests::env::until_absent(&spool).await,
        "{}",
        spool.display()
    );
    let s2 = connect(&mcp).await;
    let r = on_session(&mcp, &s2, "command_status", json!({"handle_id": id})).await;
    assert_eq!(code(&r), "command_not_found");
    mcp.close().await;
    watcher.close().await;
}

/// 50 MiB read back through `next_offset` in pieces of the output cap is the command's
/// output byte for byte, with no gap and no repeat.
#[tokio::test]
async fn incremental_reads_reassemble_a_50_mib_output() {
    let (_env, mcp, s) = connected().await;
    // Lines of varying length, so a gap or a repeat anywhere shows.
    let h = start(&mcp, &s, "seq 1 7000000; echo tail >&2").await;
    let expected: String = (1..=7_000_000).map(|i| format!("{i}\n")).collect();
    assert!(expected.len() > 50 << 20);
    let mut got = String::with_capacity(expected.len());
    let mut offset = 0u64;
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        assert!(
            std::time::Instant::now() < give_up,
            "paging never reached the end"
        );
        let r = status(
            &mcp,
            &s,
            &h["handle_id"],
            json!({"stdout_offset": offset, "wait_seconds": 1}),
        )
        .await;
        assert_eq!(r["ok"], true, "{r}");
        // A running stream with no byte yet is left out: an empty page.
        let out = &r["stdout"];
        assert_eq!(out["offset"].as_u64().unwrap_or(0), offset);
        assert_eq!(out["encoding"], json!(null), "utf-8 goes without saying");
        got.push_str(out["data"].as_str().unwrap_or(""));
        offset = out["next_offset"].as_u64().unwrap_or(offset);
        if r["status"] != "running" && offset == out["total_bytes"].as_u64().unwrap() {
            assert_eq!(
                (&r["status"], &r["exit_code"]),
                (&json!("completed"), &json!(0))
            );
            assert_eq!(crate::text(&r["stderr"]), "tail\n");
            break;
        }
    }
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "the reassembled output differs");
    // Without an offset: the tail.
    let tail = status(&mcp, &s, &h["handle_id"], json!({"max_bytes": 8})).await;
    assert_eq!(crate::text(&tail["stdout"]), &"6999999\n7000000\n"[8..]);
    mcp.close().await;
}

/// Output of three-byte characters stays text however a bound cuts it: pages of a handle's
/// output (the cap, or `max_bytes`), exec's kept head and tail, and a file range clamped to
/// the cap each end on a character boundary, and the pages join to the whole.
#[tokio::test]
async fn bounds_that_cut_inside_characters_keep_the_text() {
    let (_env, mcp, s) = connected().await;
    // 40,000 × "━" (3 bytes): the 64 KiB cap falls one byte into a character.
    let print = "printf '━%.0s' $(seq 40000)";
    let expected = "━".repeat(40_000);
    let h = start(&mcp, &s, print).await;
    let done = status(&mcp, &s, &h["handle_id"], json!({"wait_seconds": 30})).await;
    assert_eq!(done["status"], "completed", "{done}");
    let (mut got, mut offset) = (String::new(), 0);
    while offset < expected.len() as u64 {
        let r = status(&mcp, &s, &h["handle_id"], json!({"stdout_offset": offset})).await;
        let out = &r["stdout"];
        assert_eq!(
            out["encoding"],
            json!(null),
            "at {offset}: {}",
            out["next_offset"]
        );
        got.push_str(out["data"].as_str().unwrap());
        offset = out["next_offset"].as_u64().unwrap();
    }
    assert!(got == expected, "the pages differ from the output");
    let args = json!({"stdout_offset": 3, "max_bytes": 4});
    let r = status(&mcp, &s, &h["handle_id"], args).await;
    assert_eq!(
        (
            &json!(crate::text(&r["stdout"])),
            &r["stdout"]["next_offset"]
        ),
        (&json!("━"), &json!(6)),
        "{}",
        r["stdout"]
    );
    let r = exec(&mcp, &s, print, json!({})).await;
    assert_eq!(
        (&r["stdout"]["encoding"], &r["stdout"]["truncated"]),
        (&json!(null), &json!(true)),
        "{}",
        r["stdout"]["omitted"]
    );
    let file = fresh_dir(&mcp, &s, "utf8cut").await;
    remote_out(&mcp, &s, &format!("{{ {print}; }} > {file}/bars")).await;
    let r = on_session(
        &mcp,
        &s,
        "read_file_range",
        json!({"path": format!("{file}/bars"), "length": 100_000}),
    )
    .await;
    assert_eq!(
        (&r["encoding"], &r["bytes_read"], &r["eof"]),
        (&json!(null), &json!(65_535), &json!(null)),
        "{}",
        r["bytes_read"]
    );
    mcp.close().await;
}

/// A hand-off that finds the output ending inside a character gives what comes before it,
/// and reads the character whole from `next_offset`: nothing was cut, so nothing says so.
#[tokio::test]
async fn a_hand_off_inside_a_character_holds_it_back_without_calling_it_cut() {
    let (_env, mcp, s) = connected().await;
    let go = crate::TestPath::new(format!("/tmp/sshmcp-go-{}", unique_sleep(1)));
    let command =
        format!("printf 'abc\\303'; until [ -e {go} ]; do sleep 0.05; done; printf '\\251 ok\\n'");
    let r = exec(&mcp, &s, &command, json!({"handoff_after": 1})).await;
    assert_eq!(r["handed_off"], true, "{r}");
    let out = &r["stdout"];
    assert_eq!(
        (&out["data"], &out["next_offset"], &out["total_bytes"]),
        (&json!("abc"), &json!(3), &json!(4)),
        "{r}"
    );
    assert!(
        out.get("truncated").is_none() && out.get("omitted").is_none(),
        "{r}"
    );
    remote_out(&mcp, &s, &format!("touch {go}")).await;
    let args = json!({"stdout_offset": 3, "wait_seconds": 10});
    let st = status(&mcp, &s, &r["handle_id"], args).await;
    assert_eq!(st["status"], "completed", "{st}");
    assert_eq!(st["stdout"]["data"], "é ok\n", "{st}");
    mcp.close().await;
}

/// An exec still running after `handoff_after` answers at once as a handle; the output so
/// far plus what command_status reads from `next_offset` is the whole output, exit code
/// included. Without a hand-off the answer has no hand-off fields.
#[tokio::test]
async fn exec_hands_off_without_losing_a_byte() {
    let (_env, mcp, s) = connected().await;
    let command = "i=0; while [ $i -lt 30 ]; do i=$((i+1)); echo line $i; echo err $i >&2; \
                   sleep 0.1; done; exit 7";
    let r = exec(&mcp, &s, command, json!({"handoff_after": 1})).await;
    assert_eq!(
        (&r["ok"], &r["handed_off"]),
        (&json!(true), &json!(true)),
        "{r}"
    );
    assert!(r["pid"].as_u64().unwrap() > 1, "{r}");
    assert_eq!(r["exit_code"], json!(null));
    let mut out = crate::text(&r["stdout"]).to_string();
    let mut err = crate::text(&r["stderr"]).to_string();
    assert!(out.starts_with("line 1\n"), "{r}");
    let (mut o, mut e) = (
        r["stdout"]["next_offset"].clone(),
        r["stderr"]["next_offset"].clone(),
    );
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        assert!(
            std::time::Instant::now() < give_up,
            "paging never reached the end"
        );
        let st = status(
            &mcp,
            &s,
            &r["handle_id"],
            json!({"stdout_offset": o, "stderr_offset": e, "wait_seconds": 10}),
        )
        .await;
        out.push_str(crate::text(&st["stdout"]));
        err.push_str(crate::text(&st["stderr"]));
        (o, e) = (
            st["stdout"]["next_offset"].clone(),
            st["stderr"]["next_offset"].clone(),
        );
        if st["status"] != "running"
            && o == st["stdout"]["total_bytes"]
            && e == st["stderr"]["total_bytes"]
        {
            assert_eq!(
                (&st["status"], &st["exit_code"]),
                (&json!("completed"), &json!(7)),
                "{st}"
            );
            break;
        }
    }
    let expect = |word: &str| {
        (1..=30)
            .map(|i| format!("{word} {i}\n"))
            .collect::<String>()
    };
    assert_eq!(out, expect("line"));
    assert_eq!(err, expect("err"));
    // With spool_output the handle's files are the spool: named at once, whole at the end,
    // and kept after the handle.
    let r = exec(
        &mcp,
        &s,
        "echo a; sleep 1.5; echo b",
        json!({"handoff_after": 1, "spool_output": true}),
    )
    .await;
    assert_eq!(r["handed_off"], true, "{r}");
    let spool = r["stdout"]["spool_path"].as_str().unwrap().to_string();
    until_ended(&mcp, &s, &r["handle_id"]).await;
    assert_eq!(std::fs::read_to_string(&spool).unwrap(), "a\nb\n");
    // Quick enough: an ordinary answer, with no hand-off fields at all.
    let quick = exec(&mcp, &s, "echo quick", json!({"handoff_after": 5})).await;
    assert_eq!(crate::text(&quick["stdout"]), "quick\n");
    for absent in ["handed_off", "handle_id", "pid"] {
        assert!(quick.get(absent).is_none(), "{quick}");
    }
    assert!(quick["stdout"].get("next_offset").is_none(), "{quick}");
    // A timeout at handoff_after ends the command first, with no hand-off, even one whose
    // kill outlasts the hand-off's moment; a timeout above it lets the hand-off come.
    let at = exec(
        &mcp,
        &s,
        "trap '' TERM; sleep 5",
        json!({"timeout": 1, "handoff_after": 1}),
    )
    .await;
    assert_eq!(at["timed_out"], true, "{at}");
    assert!(at.get("handed_off").is_none(), "{at}");
    let above = exec(
        &mcp,
        &s,
        "sleep 5",
        json!({"timeout": 3, "handoff_after": 1}),
    )
    .await;
    assert_eq!(above["handed_off"], true, "{above}");
    let ended = until_ended(&mcp, &s, &above["handle_id"]).await;
    assert_eq!(ended["status"], "timed_out", "{ended}");
    mcp.close().await;
}

/// A command is handed off only once it started: with a login shell slower than
/// `handoff_after`, the hand-off waits for it and carries the PID; a start that fails (a
/// missing cwd) is the call's error, for `exec` and `command_start` alike. The slow connect
/// sends progress.
#[tokio::test]
async fn a_handoff_waits_for_the_start_and_a_failed_start_is_the_calls_error() {
    // No channel waits ready: the command's own login shell is the slow one.
    let env = TestEnv::with(&SshdOptions::default(), &[("SSHMCP_STANDBY_CHANNELS", "0")]);
    let user = slow_login_user();
    env.sshd.add_host_block(&format!(
        "Host slow\n  HostName 127.0.0.1\n  Port {}\n  User {user}",
        env.sshd.port
    ));
    let mcp = env.mcp().await;
    // Its connect lasts as long as the login shell (the remote facts): progress comes.
    let r = mcp
        .call_with_progress("connect", json!({"alias": "slow"}), "tok-connect")
        .await;
    let s = session_of(&r);
    let notes = mcp.progress_of("tok-connect");
    assert!(!notes.is_empty(), "{r}");
    let message = notes[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("starting the SSH connection"),
        "{message}"
    );
    let secs = unique_sleep(300);
    let r = exec(
        &mcp,
        &s,
        &format!("sleep {secs}"),
        json!({"handoff_after": 1}),
    )
    .await;
    assert_eq!(r["handed_off"], true, "{r}");
    assert!(r["pid"].as_u64().unwrap() > 1, "{r}");
    killed(&mcp, &s, &r).await;
    assert!(none_left(&mcp, &s, &format!("sleep {secs}")).await);
    for (tool, args) in [
        (
            "exec",
            json!({"command": "true", "cwd": "/nonexistent", "handoff_after": 1}),
        ),
        (
            "command_start",
            json!({"command": "true", "cwd": "/nonexistent"}),
        ),
    ] {
        let r = on_session(&mcp, &s, tool, args).await;
        assert_eq!(code(&r), "remote_path_not_found", "{tool}: {r}");
    }
    let list = on_session(&mcp, &s, "command_list", json!({})).await;
    assert_eq!(
        list["commands"].as_array().unwrap().len(),
        1,
        "no handle stays: {list}"
    );
    // Not in the record either: a daemon killed right after the answers brings back only the
    // handle that ran, and `killed` as its kill said (not how its command ended).
    env.crash_daemon();
    let list = on_session(&mcp, &s, "command_list", json!({})).await;
    let commands = list["commands"].as_array().unwrap();
    assert_eq!(commands.len(), 1, "no handle came back: {list}");
    assert_eq!(commands[0]["status"], "killed", "{list}");
    mcp.close().await;
}

/// A kill's answer is what a daemon killed right after it says too: the record holds
/// `killed` before the answer comes, not the command's end by a signal.
#[tokio::test]
async fn a_kill_holds_across_a_crash_right_after_its_answer() {
    let (env, mcp, s) = connected().await;
    let h = start(&mcp, &s, &format!("sleep {}", unique_sleep(60))).await;
    killed(&mcp, &s, &h).await;
    env.crash_daemon();
    let r = status(&mcp, &s, &h["handle_id"], json!({})).await;
    assert_eq!(r["status"], "killed", "{r}");
    mcp.close().await;
}

/// A hand-off's answer holds across a crash right after it: the handle it names is in the
/// record, and comes back `lost` (its channel's relay ended the command with the daemon),
/// never `command_not_found`.
#[tokio::test]
async fn a_handoff_holds_across_a_crash_right_after_its_answer() {
    let (env, mcp, s) = connected().await;
    let command = format!("echo early; sleep {}", unique_sleep(60));
    let r = exec(&mcp, &s, &command, json!({"handoff_after": 1})).await;
    assert_eq!(r["handed_off"], true, "{r}");
    env.crash_daemon();
    let r = status(&mcp, &s, &r["handle_id"], json!({})).await;
    assert_eq!(r["status"], "lost", "{r}");
    mcp.close().await;
}

/// An `exec` whose daemon is killed before its hand-off leaves no output files: until an
/// answer or a handle names them the record does, and the next daemon removes them, also
/// those `spool_output` would have kept (no answer ever named them).
#[tokio::test]
async fn a_crash_before_the_handoff_leaves_no_output_files() {
    let (env, mcp, s) = connected().await;
    let files = || env.spool_files(&s.0);
    for spool_output in [false, true] {
        let caller = env.mcp().await;
        let secs = unique_sleep(300);
        let args = json!({"session_id": s.0, "session_key": s.1, "handoff_after": 120,
                          "command": format!("echo early; sleep {secs}"),
                          "spool_output": spool_output});
        let (_id, _answer) = caller.start_call("exec", args).await;
        let probe = format!("pgrep -f 'sleep {secs}' >/dev/null && echo yes || echo no");
        assert!(
            crate::remote_until(&mcp, &s, &probe, "yes\n").await,
            "the command never started"
        );
        assert_eq!(files().len(), 2, "its output files: {:?}", files());
        env.crash_daemon();
        // The next daemon takes the session back before it answers a call.
        let r = on_session(&mcp, &s, "command_list", json!({})).await;
        assert_eq!(r["commands"], json!([]), "{r}");
        assert_eq!(
            files(),
            Vec::<std::path::PathBuf>::new(),
            "spool_output {spool_output}"
        );
        caller.kill().await;
    }
    // Files an answer named stay across a crash right after it.
    let spooled = json!({"handoff_after": 60, "spool_output": true});
    let r = exec(&mcp, &s, "echo done", spooled).await;
    let named = r["stdout"]["spool_path"].as_str().expect("a spool path");
    env.crash_daemon();
    let r = on_session(&mcp, &s, "command_list", json!({})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(std::fs::read_to_string(named).unwrap(), "done\n");
    mcp.close().await;
}

/// Removes the hang file however the test ends: a file left behind would hang every later
/// login of that user.
struct HangFile;

impl HangFile {
    fn create() -> Self {
        std::fs::write(HANG_FILE, "").unwrap();
        Self
    }
}

impl Drop for HangFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(HANG_FILE);
    }
}

/// A command whose login shell hangs past the start limit fails to start, and no byte of it
/// ever runs, not even once the login shell is through: it is sent only to a ready runner.
#[tokio::test]
async fn a_command_whose_login_shell_hangs_never_runs() {
    let env = TestEnv::with(&SshdOptions::default(), &[("SSHMCP_STANDBY_CHANNELS", "0")]);
    let user = hanging_login_user();
    env.sshd.add_host_block(&format!(
        "Host hang\n  HostName 127.0.0.1\n  Port {}\n  User {user}",
        env.sshd.port
    ));
    let mcp = env.mcp().await;
    let s = session_of(&mcp.call("connect", json!({"alias": "hang"})).await);
    let marker = format!("/tmp/sshmcp-never-{}", unique_sleep(1));
    let hang = HangFile::create();
    let r = on_session(
        &mcp,
        &s,
        "command_start",
        json!({"command": format!("touch {marker}")}),
    )
    .await;
    drop(hang);
    assert_eq!(code(&r), "channels_busy", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nothing ran"),
        "{r}"
    );
    let list = on_session(&mcp, &s, "command_list", json!({})).await;
    assert_eq!(list["commands"], json!([]), "no handle stays: {list}");
    // The login shell finishes its sleep in its own time (no event reaches the test).
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while sshmcp_tests::process::count_matching(&["sleep 33"]) > 0 {
        assert!(
            std::time::Instant::now() < give_up,
            "the login shell never ended"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let ran = exec(
        &mcp,
        &s,
        &format!("test -e {marker} && echo ran || echo never"),
        json!({}),
    )
    .await;
    assert_eq!(crate::text(&ran["stdout"]), "never\n", "{ran}");
    mcp.close().await;
}

/// Past the daemon's max-spool-bytes a handle keeps the stream's first bytes, says so, and
/// paging ends there instead of waiting for bytes that were never kept.
#[tokio::test]
async fn a_stream_past_the_spool_cap_is_kept_truncated_and_paging_ends() {
    let env = TestEnv::with(
        &SshdOptions::default(),
        &[("SSHMCP_MAX_SPOOL_BYTES", "1000")],
    );
    let mcp = env.mcp().await;
    let s = connect(&mcp).await;
    let h = start(&mcp, &s, "seq 1 2000").await;
    let r = until_ended(&mcp, &s, &h["handle_id"]).await;
    let full: String = (1..=2000).map(|i| format!("{i}\n")).collect();
    let tail = &r["stdout"];
    assert_eq!(
        (&tail["total_bytes"], &tail["truncated"]),
        (&json!(1000), &json!(true)),
        "{r}"
    );
    let r = status(&mcp, &s, &h["handle_id"], json!({"stdout_offset": 0})).await;
    // A cut stream stays an object with its offsets, however whole the read.
    assert_eq!(crate::text(&r["stdout"]), &full[..1000], "{r}");
    assert_eq!(
        (&r["stdout"]["truncated"], &r["stdout"]["next_offset"]),
        (&json!(true), &json!(1000)),
        "{r}"
    );
    mcp.close().await;
}

/// A client that sends a progress token gets `notifications/progress` during a 6 s command:
/// increasing values, the output's lines as messages, in order. One without a token gets none.
#[tokio::test]
async fn progress_notifications_follow_a_long_command() {
    let (_env, mcp, s) = connected().await;
    let command = "for i in 1 2 3 4 5 6; do echo step $i; sleep 1; done";
    let args = json!({"session_id": s.0, "session_key": s.1, "command": command});
    let r = mcp
        .call_with_progress("exec", args.clone(), "tok-exec")
        .await;
    assert_eq!(r["exit_code"], 0, "{r}");
    let notes = mcp.progress_of("tok-exec");
    assert!(
        notes.len() >= 4,
        "a notification at least every 2 s: {notes:?}"
    );
    let values: Vec<f64> = notes
        .iter()
        .map(|n| n["progress"].as_f64().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    let steps: Vec<u32> = notes
        .iter()
        .filter_map(|n| n["message"].as_str()?.strip_prefix("step ")?.parse().ok())
        .collect();
    assert!(
        steps.len() >= 3 && steps.windows(2).all(|w| w[0] <= w[1]),
        "{notes:?}"
    );
    // A long-polling command_status reports progress too.
    let h = start(&mcp, &s, "for i in 1 2 3; do echo tick $i; sleep 1; done").await;
    let args = json!({"session_id": s.0, "session_key": s.1, "handle_id": h["handle_id"],
                      "wait_seconds": 30});
    let r = mcp
        .call_with_progress("command_status", args, "tok-status")
        .await;
    assert_eq!(r["status"], "completed", "{r}");
    let notes = mcp.progress_of("tok-status");
    assert!(!notes.is_empty(), "{notes:?}");
    assert!(
        notes
            .iter()
            .all(|n| n["message"].as_str().unwrap().starts_with("tick")),
        "{notes:?}"
    );
    // No token, no notifications at all.
    let before = mcp.all_progress();
    exec(&mcp, &s, "sleep 2.5", json!({})).await;
    assert_eq!(mcp.all_progress(), before);
    mcp.close().await;
}

/// A handle whose master dies while its command runs says `lost`, with its output so far.
#[tokio::test]
async fn a_handle_whose_master_died_is_lost() {
    let (env, mcp, s) = connected().await;
    let secs = unique_sleep(300);
    let h = start(&mcp, &s, &format!("echo before; sleep {secs}")).await;
    let list = mcp.call("session_list", json!({})).await;
    let master = list["sessions"][0]["master_pid"].as_i64().unwrap() as i32;
    // The output reached the handle before the master goes.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(15);
    // A running stream with no byte yet is left out of the answer.
    while status(&mcp, &s, &h["handle_id"], json!({})).await["stdout"].is_null() {
        assert!(std::time::Instant::now() < give_up);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(master),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let r = until_ended(&mcp, &s, &h["handle_id"]).await;
    assert_eq!(r["status"], "lost", "{r}");
    assert_eq!(crate::text(&r["stdout"]), "before\n", "{r}");
    // The command itself outlived its connection (nothing could reach it): end it.
    let (watcher, w) = connect_watcher(&env).await;
    exec(&watcher, &w, &format!("pkill -f 'sleep {secs}'"), json!({})).await;
    assert!(none_left(&watcher, &w, &format!("sleep {secs}")).await);
    watcher.close().await;
    mcp.close().await;
}

/// A kill through a master that stopped answering (SIGSTOP) cannot say what happened:
/// `error`, and the command is left as it was; once the master answers again the kill works.
#[tokio::test]
async fn a_kill_through_a_stopped_master_is_an_error_then_works() {
    use nix::sys::signal::{Signal, kill as signal};
    let (_env, mcp, s) = connected().await;
    let secs = unique_sleep(300);
    let h = start(&mcp, &s, &format!("sleep {secs}")).await;
    let list = mcp.call("session_list", json!({})).await;
    let master =
        nix::unistd::Pid::from_raw(list["sessions"][0]["master_pid"].as_i64().unwrap() as i32);
    signal(master, Signal::SIGSTOP).unwrap();
    let k = kill(&mcp, &s, &h["handle_id"], json!({"wait_seconds": 0})).await;
    signal(master, Signal::SIGCONT).unwrap();
    assert_eq!(
        (&k["result"], &k["force_kill_used"]),
        (&json!("error"), &json!(null)),
        "{k}"
    );
    assert_eq!(
        status(&mcp, &s, &h["handle_id"], json!({})).await["status"],
        "running"
    );
    killed(&mcp, &s, &h).await;
    assert!(none_left(&mcp, &s, &format!("sleep {secs}")).await);
    mcp.close().await;
}

/// An agent that crashes before the hand-off takes its command with it (the call was still
/// its own); one that crashes after leaves a handle, which another client of the session
/// follows and kills.
#[tokio::test]
async fn a_client_that_vanishes_before_the_handoff_takes_the_command_after_it_does_not() {
    let (env, first, s) = connected().await;
    let watcher = env.mcp().await;
    let before = unique_sleep(300);
    let args = json!({"session_id": s.0, "session_key": s.1,
                      "command": format!("sleep {before}"), "handoff_after": 60});
    let (_id, _rx) = first.start_call("exec", args).await;
    let probe = |secs: &str| format!("pgrep -f 'sleep {secs}' >/dev/null && echo yes || echo no");
    assert!(
        crate::remote_until(&watcher, &s, &probe(&before), "yes\n").await,
        "the command never started"
    );
    first.kill().await;
    assert!(
        crate::remote_until(&watcher, &s, &probe(&before), "no\n").await,
        "the command outlived the call it belonged to"
    );
    let second = env.mcp().await;
    let after = unique_sleep(300);
    let r = exec(
        &second,
        &s,
        &format!("sleep {after}"),
        json!({"handoff_after": 1}),
    )
    .await;
    assert_eq!(r["handed_off"], true, "{r}");
    second.kill().await;
    let st = status(&watcher, &s, &r["handle_id"], json!({})).await;
    assert_eq!(st["status"], "running", "the handle is the session's: {st}");
    assert_eq!(
        kill(&watcher, &s, &r["handle_id"], json!({})).await["result"],
        "killed"
    );
    assert!(none_left(&watcher, &s, &format!("sleep {after}")).await);
    watcher.close().await;
}

/// A local disk that fills while a handle writes its output ends the copy, not the command:
/// the command completes with its exit code and the stream says it was truncated.
#[tokio::test]
async fn a_full_local_disk_truncates_a_handles_output_and_the_command_completes() {
    let (env, mcp, s) = connected().await;
    let _disk = sshmcp_tests::disk::SmallDisk::mount(&env.local_root);
    let h = start(&mcp, &s, "head -c 3000000 /dev/zero | tr '\\0' x; exit 3").await;
    let r = until_ended(&mcp, &s, &h["handle_id"]).await;
    assert_eq!(
        (&r["status"], &r["exit_code"]),
        (&json!("completed"), &json!(3)),
        "{r}"
    );
    assert_eq!(r["stdout"]["truncated"], true, "{r}");
    assert!(
        r["stdout"]["total_bytes"].as_u64().unwrap() < 3_000_000,
        "{r}"
    );
    mcp.close().await;
}

/// A login shell that prints on both streams: a command sent to a runner that said ready is
/// not touched by that noise, whether it starts as a handle or is handed off.
#[tokio::test]
async fn a_chatty_login_shell_leaves_handles_clean() {
    use sshmcp_tests::users::{Chatty, chatty_user};
    let (_env, mcp, s) = crate::logged_in_as(
        &chatty_user(Chatty::Bash),
        &[("SSHMCP_STANDBY_CHANNELS", "0")],
    )
    .await;
    let h = start(&mcp, &s, "echo out; echo err >&2").await;
    let r = until_ended(&mcp, &s, &h["handle_id"]).await;
    assert_eq!(
        (
            &json!(crate::text(&r["stdout"])),
            &json!(crate::text(&r["stderr"])),
            &r["exit_code"]
        ),
        (&json!("out\n"), &json!("err\n"), &json!(0)),
        "{r}"
    );
    let r = exec(
        &mcp,
        &s,
        "echo a; sleep 1.5; echo b",
        json!({"handoff_after": 1}),
    )
    .await;
    assert_eq!(
        (&r["handed_off"], &json!(crate::text(&r["stdout"]))),
        (&json!(true), &json!("a\n")),
        "{r}"
    );
    let st = until_ended(&mcp, &s, &r["handle_id"]).await;
    let rest = status(
        &mcp,
        &s,
        &r["handle_id"],
        json!({"stdout_offset": r["stdout"]["next_offset"]}),
    )
    .await;
    assert_eq!(
        (&st["status"], &json!(crate::text(&rest["stdout"]))),
        (&json!("completed"), &json!("b\n")),
        "{rest}"
    );
    mcp.close().await;
}

/// A `command_start` waiting on a host that stopped answering, its session disconnected
/// meanwhile: `session_closed`, as `exec` says, never a claim that 25 s passed.
#[tokio::test]
async fn a_start_cut_by_a_disconnect_says_the_session_closed() {
    use nix::sys::signal::{Signal, kill};
    let (env, mcp, s) = connected().await;
    let sshds = crate::connection_sshds(&env);
    let signal = |sig| {
        for pid in &sshds {
            let _ = kill(nix::unistd::Pid::from_raw(*pid), sig);
        }
    };
    signal(Signal::SIGSTOP);
    let started = on_session(&mcp, &s, "command_start", json!({"command": "sleep 100"}));
    let cut = async {
        // The handle is listed once the daemon took the call, before its command starts.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while on_session(&mcp, &s, "command_list", json!({})).await["commands"] == json!([]) {
            assert!(std::time::Instant::now() < give_up, "the start never came");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        mcp.call("disconnect", json!({"session_id": s.0})).await
    };
    let (r, closed) = tokio::join!(started, cut);
    signal(Signal::SIGCONT);
    assert_eq!(closed["ok"], true, "{closed}");
    assert_eq!(code(&r), "session_closed", "{r}");
    mcp.close().await;
}

/// A status waiting on a handle that another client's `command_kill` ends answers `killed`,
/// as every status after the kill does: the command's end comes a moment before the kill's
/// verdict, and the waiter waits for the verdict too.
#[tokio::test]
async fn a_waiting_status_sees_another_clients_kill_as_killed() {
    let (env, mcp, s) = connected().await;
    let other = env.mcp().await;
    let secs = unique_sleep(30);
    let handle = start(&mcp, &s, &format!("sleep {secs}")).await;
    let id = handle["handle_id"].clone();
    assert!(
        sshmcp_tests::process::until_matching(&[&format!("sleep\0{secs}")], 1).await,
        "the command runs"
    );
    let wait = json!({"session_id": s.0, "session_key": s.1, "handle_id": id, "wait_seconds": 30});
    let (_, waiting) = other.start_call("command_status", wait).await;
    let killed = on_session(&mcp, &s, "command_kill", json!({"handle_id": id})).await;
    assert_eq!(killed["result"], "killed", "{killed}");
    let seen = sshmcp_tests::mcp::answer(waiting).await;
    assert_eq!(seen["status"], "killed", "{seen}");
    other.close().await;
    mcp.close().await;
}

/// A session whose only spooled runs left nothing (a start that failed, a spooled exec that
/// failed, also one that would have been handed off) leaves no empty spool directory behind it either.
#[tokio::test]
async fn a_session_leaves_no_empty_spool_directory() {
    let (env, mcp, s) = connected().await;
    let spool = env.local_root.join(".sshmcp/spool").join(&s.0);
    let nowhere = json!({"command": "true", "cwd": "/nonexistent-sshmcp"});
    let r = on_session(&mcp, &s, "command_start", nowhere).await;
    assert_eq!(code(&r), "remote_path_not_found", "{r}");
    let spooled = json!({"cwd": "/nonexistent-sshmcp", "spool_output": true});
    let r = exec(&mcp, &s, "true", spooled).await;
    assert_eq!(code(&r), "remote_path_not_found", "{r}");
    // Its files made for a hand-off are kept only once an answer or a handle names them.
    let handed = json!({"cwd": "/nonexistent-sshmcp", "spool_output": true, "handoff_after": 5});
    let r = exec(&mcp, &s, "true", handed).await;
    assert_eq!(code(&r), "remote_path_not_found", "{r}");
    assert!(spool.exists(), "the runs made it");
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(r["state"], "closed", "{r}");
    assert!(
        sshmcp_tests::env::until_absent(&spool).await,
        "{}",
        spool.display()
    );
    mcp.close().await;
}
