//! sudo_exec through the real binaries: root with a NOPASSWD rule, and each refusal.

use serde_json::{Value, json};
use sshmcp_tests::McpClient;
use sshmcp_tests::mcp::call_ok;
use sshmcp_tests::process::{count_matching, unique_sleep, until_matching};
use sshmcp_tests::users::{SudoRule, sudo_user};
use sshmcp_tests::{SshdOptions, TestEnv};

use crate::code;

async fn sudo(mcp: &McpClient, s: &(String, String), command: &str, extra: Value) -> Value {
    let mut args = json!({"session_id": s.0, "session_key": s.1, "command": command});
    if let (Some(args), Some(extra)) = (args.as_object_mut(), extra.as_object()) {
        args.extend(extra.clone());
    }
    mcp.call("sudo_exec", args).await
}

#[tokio::test]
async fn a_nopasswd_user_runs_commands_as_root_with_their_exit_codes() {
    let user = sudo_user(SudoRule::NoPassword);
    let (_env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let r = sudo(
        &mcp,
        &s,
        "id -u; echo \"$BASH_VERSION\" | cut -c1; echo err >&2; exit 7",
        json!({}),
    )
    .await;
    assert_eq!(r["exit_code"], 7, "{r}");
    assert_eq!(crate::text(&r["stdout"]), "0\n5\n", "root, in bash: {r}");
    assert_eq!(crate::text(&r["stderr"]), "err\n", "{r}");
    // sudo_exec takes no `spool_output`: its streams carry no spool fields.
    for stream in ["stdout", "stderr"] {
        assert!(r[stream].get("spool_path").is_none(), "{r}");
        assert!(r[stream].get("spool_truncated").is_none(), "{r}");
    }
    // The command's stdin is empty: reading it cannot eat the command's own next lines.
    let r = sudo(&mcp, &s, "read x; echo \"[$x]\"\necho second", json!({})).await;
    assert_eq!(crate::text(&r["stdout"]), "[]\nsecond\n", "{r}");
    let r = sudo(&mcp, &s, "pwd", json!({"cwd": "/tmp"})).await;
    assert_eq!(crate::text(&r["stdout"]), "/tmp\n", "{r}");
    // A directory only root may enter is out of reach: the user enters it before sudo.
    let r = sudo(&mcp, &s, "true", json!({"cwd": "/root"})).await;
    assert_eq!(code(&r), "remote_path_not_found", "{r}");
    assert!(crate::message(&r).contains("`cd` in the command"), "{r}");
    // A command that fails under sudo is an ordinary answer, even one that prints sudo's
    // own words.
    let r = sudo(
        &mcp,
        &s,
        "echo 'sudo: a password is required' >&2; exit 1",
        json!({}),
    )
    .await;
    assert_eq!(r["exit_code"], 1, "{r}");
    // Root's shell ended by a signal is named (an exit above 128 under sudo reads as one: see
    // docs/tools.md).
    let r = sudo(&mcp, &s, "kill -USR1 $$", json!({})).await;
    assert_eq!(
        (&r["exit_code"], &r["signal"]),
        (&json!(null), &json!("USR1")),
        "{r}"
    );
    mcp.close().await;
}

#[tokio::test]
async fn a_user_whose_sudo_wants_a_password_is_told_so() {
    let user = sudo_user(SudoRule::PasswordRequired);
    let (_env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let r = sudo(&mcp, &s, "id -u", json!({})).await;
    assert_eq!(code(&r), "sudo_password_required", "{r}");
    mcp.close().await;
}

/// A user whose rules let `sudo -l` list bash without a password (one rule is NOPASSWD) but
/// whose rule for bash wants one: told a password is required, in sshmcp's words (never
/// sudo's raw text).
#[tokio::test]
async fn a_password_rule_beside_a_nopasswd_one_is_told_so() {
    let user = sudo_user(SudoRule::PasswordRequiredBesideId);
    let (_env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let r = sudo(&mcp, &s, "id -u", json!({})).await;
    assert_eq!(code(&r), "sudo_password_required", "{r}");
    let said = r["error"]["message"].as_str().unwrap();
    assert!(said.contains("NOPASSWD") && !said.contains("sudo:"), "{r}");
    mcp.close().await;
}

/// A startup file that merges stderr into stdout: the command runs as root once, and the
/// answer is its own (streams merged as the login shell left them), handed off too.
#[tokio::test]
async fn merged_streams_still_give_the_root_commands_answer() {
    let user = sudo_user(SudoRule::NoPasswordMergedStreams);
    let (_env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let r = sudo(&mcp, &s, "id -u; echo err >&2; exit 7", json!({})).await;
    assert_eq!(
        (
            &r["exit_code"],
            &json!(crate::text(&r["stdout"])),
            &json!(crate::text(&r["stderr"]))
        ),
        (&json!(7), &json!("0\nerr\n"), &json!("")),
        "{r}"
    );
    let secs = unique_sleep(30);
    let r = sudo(
        &mcp,
        &s,
        &format!("echo early; sleep {secs}"),
        json!({"handoff_after": 1}),
    )
    .await;
    assert_eq!(r["handed_off"], true, "{r}");
    // The handle shows the command as given, not the sudo program that runs it.
    let listed = call_ok(&mcp, &s, "command_list", json!({})).await;
    let preview = format!("echo early; sleep {secs}");
    assert_eq!(
        listed["commands"][0]["preview"],
        preview.as_str(),
        "{listed}"
    );
    let k = mcp
        .call(
            "command_kill",
            json!({"session_id": s.0, "session_key": s.1, "handle_id": r["handle_id"]}),
        )
        .await;
    assert_eq!(k["result"], "killed", "{k}");
    mcp.close().await;
}

#[tokio::test]
async fn a_user_with_rules_for_other_commands_only_is_not_allowed() {
    let user = sudo_user(SudoRule::OnlyId);
    let (_env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let r = sudo(&mcp, &s, "id -u", json!({})).await;
    assert_eq!(code(&r), "sudo_not_allowed", "{r}");
    // With a hand-off asked for, the refusal is still the call's answer, not a handle.
    let r = sudo(&mcp, &s, "id -u", json!({"handoff_after": 1})).await;
    assert_eq!(code(&r), "sudo_not_allowed", "{r}");
    mcp.close().await;
}

#[tokio::test]
async fn a_user_in_no_sudoers_rule_is_not_allowed() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let s = crate::connect(&mcp).await;
    let r = sudo(&mcp, &s, "id -u", json!({})).await;
    assert_eq!(code(&r), "sudo_not_allowed", "{r}");
    mcp.close().await;
}

/// A timeout ends a command running as root too: the kill runs as root, through the same
/// sudo rule (the user's own kill reaches only sudo, which passes it to bash alone).
#[tokio::test]
async fn a_timeout_ends_a_command_running_as_root() {
    let user = sudo_user(SudoRule::NoPassword);
    let (_env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    crate::assert_timeout_kills(&mcp, &s, "sudo_exec").await;
    mcp.close().await;
}

/// A root command that ignores TERM, running when its daemon is killed outright: the
/// channel's relay ends it through sudo as a living daemon would (the user's own KILL cannot
/// reach root's processes).
#[tokio::test]
async fn a_root_command_ends_with_its_dead_daemon() {
    let user = sudo_user(SudoRule::NoPassword);
    let (env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let marker = sshmcp_tests::process::unique_sleep(300);
    let args = json!({
        "session_id": s.0, "session_key": s.1,
        "command": format!("trap '' TERM; sleep {marker}"), "timeout": 600
    });
    let (_, pending) = mcp.start_call("sudo_exec", args).await;
    assert!(
        sshmcp_tests::process::until_matching(&[&marker], 1).await,
        "the root command never started"
    );
    env.crash_daemon();
    drop(pending);
    assert!(
        sshmcp_tests::process::until_matching(&[&marker], 0).await,
        "the root command outlived its daemon"
    );
    mcp.close().await;
}

#[tokio::test]
async fn a_host_without_sudo_says_so() {
    let opts = sshmcp_tests::SshdOptions {
        without_sudo: true,
        ..sshmcp_tests::SshdOptions::default()
    };
    let env = TestEnv::with(&opts, &[]);
    let mcp = env.mcp().await;
    let s = crate::connect(&mcp).await;
    let r = crate::exec(&mcp, &s, "command -v sudo || echo none", json!({})).await;
    assert_eq!(crate::text(&r["stdout"]), "none\n", "sudo is hidden: {r}");
    let r = sudo(&mcp, &s, "id -u", json!({})).await;
    assert_eq!(code(&r), "sudo_unavailable", "{r}");
    mcp.close().await;
}

/// A root command handed off after a second becomes a handle whose kill runs as root: the
/// user alone could not signal it, nor see what it left behind when it ended.
#[tokio::test]
async fn a_handed_off_root_command_is_killed_as_root() {
    let user = sudo_user(SudoRule::NoPassword);
    let (_env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let secs = sshmcp_tests::process::unique_sleep(300);
    let r = sudo(
        &mcp,
        &s,
        &format!("id -u; sleep {secs}"),
        json!({"handoff_after": 1}),
    )
    .await;
    assert_eq!(
        (&r["handed_off"], &json!(crate::text(&r["stdout"]))),
        (&json!(true), &json!("0\n")),
        "{r}"
    );
    let args = json!({"session_id": s.0, "session_key": s.1, "handle_id": r["handle_id"]});
    let k = mcp.call("command_kill", args.clone()).await;
    assert_eq!(k["result"], "killed", "{k}");
    let probe = json!({"session_id": s.0, "session_key": s.1,
                       "command": format!("pgrep -f 'sleep {secs}' || echo none")});
    assert_eq!(
        crate::text(&mcp.call("exec", probe).await["stdout"]),
        "none\n"
    );
    let mut wait = args;
    wait["wait_seconds"] = json!(10);
    let st = mcp.call("command_status", wait).await;
    assert_eq!(st["status"], "killed", "{st}");
    // A root command that ended and left a root child in its group: the kill still reaches
    // it (the user's own check cannot see root's processes, so it is not trusted).
    let left = sshmcp_tests::process::unique_sleep(300);
    let r = sudo(
        &mcp,
        &s,
        &format!("sleep {left} >/dev/null 2>&1 & sleep 1.5; echo done"),
        json!({"handoff_after": 1}),
    )
    .await;
    assert_eq!(r["handed_off"], true, "{r}");
    let args = json!({"session_id": s.0, "session_key": s.1, "handle_id": r["handle_id"],
                      "wait_seconds": 10});
    let st = mcp.call("command_status", args.clone()).await;
    assert_eq!(st["status"], "completed", "{st}");
    let k = mcp.call("command_kill", args).await;
    assert_eq!(k["result"], "killed", "{k}");
    let probe = json!({"session_id": s.0, "session_key": s.1,
                       "command": format!("pgrep -f 'sleep {left}' || echo none")});
    assert_eq!(
        crate::text(&mcp.call("exec", probe).await["stdout"]),
        "none\n"
    );
    mcp.close().await;
}

/// A command's answer that says its timeout ended it with TERM.
fn timed_out_by_term(r: Value) {
    assert_eq!(
        (&r["timed_out"], &r["signal"]),
        (&json!(true), &json!("TERM")),
        "{r}"
    );
}

/// On a server allowing three sessions, root commands side by side: a root kill ends the
/// channel it ran on (a channel that ran root processes is not kept), so the channel kept for
/// kills is had again before the next command takes a session, and every timeout still kills.
#[tokio::test]
async fn root_commands_filling_a_server_with_few_sessions_are_all_killed() {
    let user = sudo_user(SudoRule::NoPassword);
    let opts = SshdOptions::allowing_sessions(3);
    let (env, mcp, s) = crate::logged_in_with(&user, &opts, &[]).await;
    let (watcher, w) = crate::connect_watcher(&env).await;
    let secs = unique_sleep(301);
    let call = |timeout: u64| {
        json!({"session_id": s.0, "session_key": s.1, "timeout": timeout,
               "command": format!("sleep {secs}")})
    };
    let sleeping =
        |n: u32| format!("[ \"$(pgrep -fc 'sleep {secs}')\" = {n} ] && echo yes || echo no");
    let a = mcp.start_call("sudo_exec", call(2)).await.1;
    let b = mcp.start_call("sudo_exec", call(10)).await.1;
    assert!(crate::remote_until(&watcher, &w, &sleeping(2), "yes\n").await);
    // The third waits for a session: the server's third is the kill channel's.
    let c = mcp.start_call("sudo_exec", call(12)).await.1;
    let three = |row: &Value| row["active_commands"] == 3;
    assert!(crate::first_session_until(&mcp, three).await);
    timed_out_by_term(sshmcp_tests::mcp::answer(a).await);
    let d = mcp.start_call("sudo_exec", call(12)).await.1;
    assert!(crate::first_session_until(&mcp, three).await);
    timed_out_by_term(sshmcp_tests::mcp::answer(b).await);
    for rx in [c, d] {
        let r = sshmcp_tests::mcp::answer(rx).await;
        assert_eq!(r["timed_out"], true, "{r}");
        assert!(r["signal"] == "TERM" || r["signal"].is_null(), "{r}");
    }
    assert!(crate::remote_until(&watcher, &w, &sleeping(0), "yes\n").await);
    watcher.close().await;
    mcp.close().await;
}

/// Commands one after the other, root ones included (whose channels close after them), open
/// no channel for kills, on a server allowing one session as on one allowing ten, and no
/// channel they do not use: each root command takes the channel the command before it left,
/// and each other command opens one, which it leaves for the next.
#[tokio::test]
async fn commands_one_after_the_other_open_only_the_channels_they_use() {
    let user = sudo_user(SudoRule::NoPassword);
    for max_sessions in [1, 10] {
        let opts = SshdOptions::allowing_sessions(max_sessions);
        let (env, mcp, s) = crate::logged_in_with(&user, &opts, &[]).await;
        let sessions = || env.sshd.log_text().matches("Starting session:").count();
        // A channel found stale (a test beside this one wrote in the shared user's home)
        // opens a fresh one in its place, and says so.
        let stale = || {
            env.daemon_log()
                .matches("the waiting channel was stale or gone")
                .count()
        };
        let (before, stale_before) = (sessions(), stale());
        for _ in 0..5 {
            let r = sudo(&mcp, &s, "true", json!({})).await;
            assert_eq!(r["exit_code"], 0, "{r}");
            let r = crate::exec(&mcp, &s, "true", json!({})).await;
            assert_eq!(r["exit_code"], 0, "{r}");
        }
        let reopened = stale() - stale_before;
        assert_eq!(
            sessions() - before,
            5 + reopened,
            "MaxSessions {max_sessions}"
        );
        assert!(
            !env.daemon_log()
                .contains("opening the channel kept for kills"),
            "MaxSessions {max_sessions}"
        );
        mcp.close().await;
    }
}

/// A kill whose group keeps only root's processes (the command ran `sudo` itself, whose
/// shell dies of the TERM and leaves its `sleep`) cannot end them as the session's user: it
/// says `failed_to_kill`, also with `force`, never `killed`.
#[tokio::test]
async fn a_kill_that_leaves_roots_processes_in_the_group_says_it_failed() {
    let user = sudo_user(SudoRule::NoPassword);
    let (_env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let sleep = unique_sleep(91);
    let command = format!("sudo -n /bin/sh -c 'sleep {sleep}; true'");
    let started = call_ok(&mcp, &s, "command_start", json!({"command": command})).await;
    // The sleep's own command line: its arguments apart (the shells' lines hold it as one).
    let own = format!("sleep\0{sleep}");
    assert!(until_matching(&[&own], 1).await, "root's sleep started");
    let args = json!({"handle_id": started["handle_id"], "wait_seconds": 1, "force": true});
    let r = call_ok(&mcp, &s, "command_kill", args).await;
    assert_eq!(r["result"], "failed_to_kill", "{r}");
    assert_eq!(r["force_kill_used"], true, "{r}");
    assert_eq!(count_matching(&[&own]), 1, "root's sleep still runs");
    // As root, it ends.
    let pattern = format!("slee[p] {sleep}");
    let r = sudo(&mcp, &s, &format!("pkill -f '{pattern}'"), json!({})).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(until_matching(&[&own], 0).await);
    mcp.close().await;
}

/// A root command that ignores TERM (and HUP) outlives a kill: its handle stays `running`, as its
/// kill said (`failed_to_kill`), because the user's shell leading its group waits for sudo
/// rather than ending the run by dying of the TERM; a forced kill then ends it, as root.
#[tokio::test]
async fn a_root_command_that_outlives_a_kill_stays_running() {
    let user = sudo_user(SudoRule::NoPassword);
    let (_env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let secs = unique_sleep(300);
    let r = sudo(
        &mcp,
        &s,
        &format!("trap '' TERM HUP; echo ready; while :; do sleep {secs}; done"),
        json!({"handoff_after": 1}),
    )
    .await;
    assert_eq!(r["handed_off"], true, "{r}");
    let handle = json!({"handle_id": r["handle_id"]});
    let mut kill = handle.clone();
    kill["wait_seconds"] = json!(2);
    let k = call_ok(&mcp, &s, "command_kill", kill.clone()).await;
    assert_eq!(k["result"], "failed_to_kill", "{k}");
    // HUP by its number: sudo passes it on to root's shell too, and holds on.
    let mut by_number = kill.clone();
    by_number["signal"] = json!(1);
    let k = call_ok(&mcp, &s, "command_kill", by_number).await;
    assert_eq!(k["result"], "failed_to_kill", "{k}");
    let st = call_ok(&mcp, &s, "command_status", handle.clone()).await;
    assert_eq!(
        (&st["status"], &st["signal"]),
        (&json!("running"), &Value::Null),
        "{st}"
    );
    let own = format!("sleep\0{secs}");
    assert_eq!(count_matching(&[&own]), 1, "root's loop still runs");
    kill["force"] = json!(true);
    let k = call_ok(&mcp, &s, "command_kill", kill).await;
    assert_eq!(k["result"], "killed", "{k}");
    assert!(until_matching(&[&own], 0).await, "root's loop ended");
    let mut wait = handle;
    wait["wait_seconds"] = json!(10);
    let st = call_ok(&mcp, &s, "command_status", wait).await;
    assert_eq!(st["status"], "killed", "{st}");
    mcp.close().await;
}
