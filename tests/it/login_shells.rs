//! Users whose login shell prints before every command (bash above Debian's interactive guard,
//! tcsh with no guard at all): every answer holds exactly the program's own streams, and the
//! framing holds whatever the program does with its streams.

use serde_json::{Value, json};
use sshmcp_tests::McpClient;
use sshmcp_tests::TestEnv;
use sshmcp_tests::process::unique_sleep;
use sshmcp_tests::users::{
    Chatty, chatty_user, rc_dir_user, rc_editing_user, user_without_gnu_find,
};

use crate::{code, exec, logged_in_as, remote_until};

/// A world logged in as the chatty user of `kind`, connected.
async fn chatty(kind: Chatty) -> (TestEnv, McpClient, (String, String)) {
    chatty_with(kind, &[]).await
}

/// Like [`chatty`], with extra environment for the binaries.
async fn chatty_with(
    kind: Chatty,
    extra: &[(&str, &str)],
) -> (TestEnv, McpClient, (String, String)) {
    let (env, mcp, session) = logged_in_as(&chatty_user(kind), extra).await;
    // The startup file did print: the daemon dropped it (and says so at debug level).
    assert!(env.daemon_log_shows("dropped what the login shell printed"));
    (env, mcp, session)
}

fn streams(r: &Value) -> (&str, &str) {
    (crate::text(&r["stdout"]), crate::text(&r["stderr"]))
}

/// The same checks for both login shells: exact streams and status, a timeout within a second
/// of its limit with the group gone, a missing cwd as an error, and MCP cancellation.
async fn behaves_exactly(kind: Chatty) {
    let (_env, mcp, s) = chatty(kind).await;
    let r = exec(&mcp, &s, "echo out; echo err >&2; exit 3", json!({})).await;
    assert_eq!(r["exit_code"], 3, "{r}");
    assert_eq!(
        (&r["stdout"], &r["stderr"]),
        (&json!("out\n"), &json!("err\n")),
        "{r}"
    );

    let secs = unique_sleep(30);
    let r = exec(&mcp, &s, &format!("sleep {secs}"), json!({"timeout": 1})).await;
    assert_eq!(r["timed_out"], true, "{r}");
    assert_eq!(r["signal"], "TERM", "{r}");
    let duration = r["duration"].as_f64().unwrap();
    assert!(
        (1.0..2.0).contains(&duration),
        "within 1 s of the limit: {r}"
    );
    let probe = format!("pgrep -f 'sleep {secs}' || echo gone");
    assert_eq!(
        crate::text(&exec(&mcp, &s, &probe, json!({})).await["stdout"]),
        "gone\n"
    );

    let r = exec(&mcp, &s, "echo ran", json!({"cwd": "/nonexistent"})).await;
    assert_eq!(code(&r), "remote_path_not_found", "{r}");
    let r = exec(&mcp, &s, "pwd", json!({"cwd": "/tmp"})).await;
    assert_eq!(streams(&r), ("/tmp\n", ""), "{r}");
    // The inspection tools' answers are parsed from the same streams.
    let r = crate::on_session(&mcp, &s, "stat", json!({"path": "/"})).await;
    assert_eq!(
        (&r["type"], &r["owner"]),
        (&json!("directory"), &json!("root")),
        "{r}"
    );
    let args = json!({"path": "/etc/hostname", "length": 4096});
    let r = crate::on_session(&mcp, &s, "read_file_range", args).await;
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap();
    assert_eq!(r["data"], hostname, "{r}");

    let secs = unique_sleep(41);
    let args = json!({"session_id": s.0, "session_key": s.1,
                      "command": format!("sleep {secs}"), "timeout": 120});
    let (id, _rx) = mcp.start_call("exec", args).await;
    let probe = format!("pgrep -f 'sleep {secs}' >/dev/null && echo yes || echo no");
    assert!(
        remote_until(&mcp, &s, &probe, "yes\n").await,
        "never started"
    );
    mcp.cancel(id).await;
    assert!(remote_until(&mcp, &s, &probe, "no\n").await, "still runs");
    mcp.close().await;
}

#[tokio::test]
async fn a_chatty_bashrc_changes_nothing() {
    behaves_exactly(Chatty::Bash).await;
}

#[tokio::test]
async fn a_chatty_cshrc_changes_nothing() {
    behaves_exactly(Chatty::Tcsh).await;
}

/// Programs that do unusual things with their streams are answered exactly.
#[tokio::test]
async fn the_framing_holds_whatever_the_program_does() {
    let (env, mcp, s) = chatty(Chatty::Bash).await;
    let heredoc = "cat <<EOF\nline $((2+3))\nEOF\ncat <<'RAW' >&2\n$HOME `x`\nRAW";
    let r = exec(&mcp, &s, heredoc, json!({})).await;
    assert_eq!(streams(&r), ("line 5\n", "$HOME `x`\n"), "{r}");

    // Everything the program prints goes to a file: both streams are empty, the file exact.
    let file = format!("{}-redirected", env.root.path().display());
    let r = exec(
        &mcp,
        &s,
        &format!("exec >'{file}' 2>&1; echo to-file; echo err-to-file >&2"),
        json!({}),
    )
    .await;
    assert_eq!((r["exit_code"].clone(), streams(&r)), (json!(0), ("", "")));
    let r = exec(&mcp, &s, &format!("cat '{file}'; rm '{file}'"), json!({})).await;
    assert_eq!(streams(&r), ("to-file\nerr-to-file\n", ""), "{r}");

    let r = exec(&mcp, &s, "exec >&-; echo only-err >&2", json!({})).await;
    assert_eq!(
        (r["exit_code"].clone(), streams(&r)),
        (json!(0), ("", "only-err\n"))
    );
    let r = exec(&mcp, &s, "exec 2>&-; echo only-out", json!({})).await;
    assert_eq!(
        (r["exit_code"].clone(), streams(&r)),
        (json!(0), ("only-out\n", ""))
    );

    // Output that imitates the framing's markers is the program's own.
    let fake = "_sshmcp_00000000000000000000000000000000";
    let r = exec(
        &mcp,
        &s,
        &format!("echo '{fake} run'; echo '{fake} 1' >&2; printf '{fake}'"),
        json!({}),
    )
    .await;
    assert_eq!(
        streams(&r),
        (
            format!("{fake} run\n{fake}").as_str(),
            format!("{fake} 1\n").as_str()
        ),
        "{r}"
    );
    mcp.close().await;
}

/// A background child that keeps the streams open does not hold the answer: it comes right
/// after the shell exits, with the exit code and what was printed; the child is ended at the
/// command's timeout. A child that let go of the streams (nohup, redirected) keeps running.
#[tokio::test]
async fn background_children_neither_hold_the_answer_nor_outlive_the_timeout() {
    let (_env, mcp, s) = chatty(Chatty::Bash).await;
    let held = unique_sleep(50);
    let command = format!("echo before; sleep {held} & echo after; exit 4");
    let r = exec(&mcp, &s, &command, json!({"timeout": 3})).await;
    assert_eq!(r["exit_code"], 4, "{r}");
    assert_eq!(r["timed_out"], json!(null), "{r}");
    assert_eq!(streams(&r), ("before\nafter\n", ""), "{r}");
    assert!(r["duration"].as_f64().unwrap() < 2.0, "{r}");
    let probe = format!("pgrep -f 'sleep {held}' >/dev/null && echo yes || echo no");
    assert_eq!(
        crate::text(&exec(&mcp, &s, &probe, json!({})).await["stdout"]),
        "yes\n"
    );
    assert!(
        remote_until(&mcp, &s, &probe, "no\n").await,
        "the child holding the streams must end at the timeout"
    );

    let detached = unique_sleep(51);
    let command = format!("nohup sleep {detached} >/dev/null 2>&1 & echo started");
    let r = exec(&mcp, &s, &command, json!({"timeout": 1})).await;
    assert_eq!(streams(&r), ("started\n", ""), "{r}");
    let probe = format!("pgrep -f 'sleep {detached}' >/dev/null && echo yes || echo no");
    // Past the first command's timeout, the detached child still runs.
    let r = exec(&mcp, &s, &format!("sleep 1.5; {probe}"), json!({})).await;
    assert_eq!(crate::text(&r["stdout"]), "yes\n", "{r}");
    exec(&mcp, &s, &format!("pkill -f 'sleep {detached}'"), json!({})).await;
    mcp.close().await;
}

/// A cancel that arrives after the command was sent but before its group is known (the login
/// shell is still starting) ends the command as soon as it starts: it never runs on unowned.
#[tokio::test]
async fn a_cancel_before_the_group_is_known_still_ends_the_command() {
    // A fresh channel per command: its slow login shell opens the window this test needs.
    let fresh = [("SSHMCP_STANDBY_CHANNELS", "0")];
    let (env, mcp, s) = chatty_with(Chatty::SlowBash, &fresh).await;
    let marker = format!("{}-started", env.root.path().display());
    let secs = unique_sleep(44);
    let channels = |env: &TestEnv| env.sshd.log_text().matches("Starting session:").count();
    let before = channels(&env);
    let args = json!({"session_id": s.0, "session_key": s.1, "timeout": 120,
                      "command": format!("touch '{marker}'; sleep {secs}")});
    let (id, _rx) = mcp.start_call("exec", args).await;
    // The channel is open and the command on its way; the login shell sleeps half a second.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while channels(&env) == before && std::time::Instant::now() < give_up {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(
        channels(&env) > before,
        "the command's channel never opened"
    );
    mcp.cancel(id).await;
    let started = format!("test -e '{marker}' && echo yes || echo no");
    assert!(
        remote_until(&mcp, &s, &started, "yes\n").await,
        "it never started"
    );
    let probe = format!("pgrep -f 'sleep {secs}' >/dev/null && echo yes || echo no");
    assert!(
        remote_until(&mcp, &s, &probe, "no\n").await,
        "it runs on unowned"
    );
    std::fs::remove_file(&marker).ok();
    mcp.close().await;
}

/// A startup file that sends stderr to stdout for good: the command's stderr lands in stdout
/// (the login shell's doing), the markers are still told apart, and a timeout still kills.
/// Such a channel serves one command, so commands back to back each take the channel opened
/// ahead while the one before ran, often before its login shell is done: every one is exact.
#[tokio::test]
async fn a_startup_file_that_merges_the_streams_still_frames_and_kills() {
    let (_env, mcp, s) = chatty(Chatty::MergedBash).await;
    for i in 0..10 {
        let r = exec(
            &mcp,
            &s,
            &format!("echo out{i}; echo err >&2; exit 5"),
            json!({}),
        )
        .await;
        assert_eq!(r["exit_code"], 5, "{r}");
        assert_eq!(streams(&r), (&*format!("out{i}\nerr\n"), ""), "{r}");
    }
    crate::assert_timeout_kills(&mcp, &s, "exec").await;
    mcp.close().await;
}

/// Commands share a channel (the same runner shell is the parent of each command's shell, on
/// a host whose `/bin/sh` is dash), yet each sees what the one before left in the startup
/// files: the channel that waited finds the file changed, runs nothing, and a fresh channel
/// runs the command. Each command's shell holds no descriptor of the channel's plumbing.
#[tokio::test]
async fn commands_share_a_channel_yet_see_a_changed_startup_file() {
    let (_env, mcp, s) = logged_in_as(&rc_editing_user(), &[]).await;
    let probe = "echo \"$PPID ${SSHMCP_RC_MARK-unset}\"; \
                 for fd in 3 4 5 6 7 8 9; do [ -e /proc/$$/fd/$fd ] && echo \"open $fd\"; done; true";
    let first = exec(&mcp, &s, probe, json!({})).await;
    let second = exec(&mcp, &s, probe, json!({})).await;
    let (first, second) = (streams(&first).0, streams(&second).0);
    assert!(first.ends_with(" unset\n"), "{first}");
    assert_eq!(first, second, "one channel, nothing else open");
    let r = exec(
        &mcp,
        &s,
        "echo 'export SSHMCP_RC_MARK=seen' >> ~/.bashrc",
        json!({}),
    )
    .await;
    assert_eq!(r["exit_code"], 0, "{r}");
    let third = exec(&mcp, &s, probe, json!({})).await;
    let third = streams(&third).0;
    assert!(third.ends_with(" seen\n"), "{third}");
    assert_ne!(
        first.split(' ').next(),
        third.split(' ').next(),
        "a fresh channel"
    );
    mcp.close().await;
}

/// A file that `~/.bashrc` sources from `~/.bashrc.d`, edited in place (its directory keeps
/// its time): the channel that waited finds it changed, and a fresh channel runs the next
/// command in the new environment.
#[tokio::test]
async fn a_file_the_bashrc_sources_from_its_directory_edited_in_place_is_seen() {
    let (_env, mcp, s) = logged_in_as(&rc_dir_user(), &[]).await;
    let set = |value: &str| {
        format!("mkdir -p ~/.bashrc.d && echo 'export SSHMCP_RC_DIR={value}' > ~/.bashrc.d/env.sh")
    };
    let probe = "echo \"$PPID ${SSHMCP_RC_DIR-unset}\"";
    assert_eq!(exec(&mcp, &s, &set("one"), json!({})).await["exit_code"], 0);
    // A channel started in the clock tick of the edit counts it as changed since (and the
    // first run on this machine makes the directory): wait for one that serves two commands
    // in a row.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut last = String::new();
    loop {
        let said = exec(&mcp, &s, probe, json!({})).await;
        let said = streams(&said).0.to_string();
        assert!(said.ends_with(" one\n"), "{said}");
        if said == last {
            break;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "no channel served twice"
        );
        last = said;
    }
    assert_eq!(exec(&mcp, &s, &set("two"), json!({})).await["exit_code"], 0);
    let third = exec(&mcp, &s, probe, json!({})).await;
    let third = streams(&third).0;
    assert!(third.ends_with(" two\n"), "{third}");
    mcp.close().await;
}

/// Where the login environment has `SHLVL` and the host has bash, a channel's runner hands
/// over to bash (job control gives each program's shell its own group for a fork, where
/// `setsid` costs an exec); with a dash login shell (no `SHLVL`) it stays dash and uses
/// `setsid`. Either way every program leads a group of its own and sees the same login
/// environment, on a fresh channel (whose first program dash runs) as on a shared one.
#[tokio::test]
async fn programs_lead_their_own_groups_in_the_login_environment_whoever_runs_them() {
    let dash = sshmcp_tests::users::user_with_shell("sshmcp-dash", "/bin/dash");
    for (user, runner) in [(None, "bash"), (Some(dash), "sh")] {
        let (_env, mcp, s) = match &user {
            None => crate::connected().await,
            Some(user) => logged_in_as(user, &[]).await,
        };
        // `_` is left out: bash names the program it starts there.
        let probe = |pause: &str| {
            format!(
                "g=$(ps -o pgid= -p $$); echo \"group ${{g##* }} of $$\"; \
                 echo \"runner $(cat /proc/$PPID/comm) $PPID\"; env | grep -v '^_=' | sort; \
                 sleep {pause}"
            )
        };
        // Long enough that the second of two calls at once cannot wait for the first's
        // channel: it opens its own.
        let mut answers = crate::exec_all(&mcp, &s, &[probe("0.3"), probe("0.3")]).await;
        // Then command after command on one channel. A test elsewhere that adds a user changes
        // `/etc`, which sends a waiting channel's command to a fresh one: until two in a row
        // share their runner.
        let lines_of = |r: &Value| -> Vec<String> {
            assert_eq!(r["ok"], true, "{r}");
            let out = crate::text(&r["stdout"]);
            out.lines().map(str::to_string).collect()
        };
        answers.push(exec(&mcp, &s, &probe("0"), json!({})).await);
        for _ in 0..20 {
            answers.push(exec(&mcp, &s, &probe("0"), json!({})).await);
            let last = &answers[answers.len() - 2..];
            if lines_of(&last[0])[1] == lines_of(&last[1])[1] {
                break;
            }
        }
        let outputs: Vec<Vec<String>> = answers.iter().map(lines_of).collect();
        for lines in &outputs {
            let (group, pid) = lines[0].split_once(" of ").unwrap();
            assert_eq!(group, format!("group {pid}"), "{lines:?}");
            assert_eq!(lines[2..], outputs[0][2..], "the same environment");
        }
        let runners: Vec<&str> = outputs.iter().map(|lines| lines[1].as_str()).collect();
        let n = runners.len();
        assert_eq!(runners[n - 2], runners[n - 1], "one channel: {runners:?}");
        assert!(
            runners[n - 1].starts_with(&format!("runner {runner} ")),
            "{runners:?}"
        );
        // Of the two at once, the one on a channel of its own was run by dash; the dash
        // user's runner is dash throughout.
        let dash_ran = |r: &&str| r.starts_with("runner sh ");
        match user {
            None => assert!(runners[..2].iter().any(dash_ran), "{runners:?}"),
            Some(_) => assert!(runners.iter().all(dash_ran), "{runners:?}"),
        }
        mcp.close().await;
    }
}

/// A command whose shell is stopped (SIGSTOP) has not ended, on a channel bash runs too (with
/// job control on, bash's `wait` returns at a stop): it is answered once it continues and
/// ends. A test elsewhere that adds a user changes `/etc`, which sends a waiting channel's
/// command to a fresh one, first run by dash: the command is tried until bash ran it.
#[tokio::test]
async fn a_stopped_command_is_answered_only_once_it_ends() {
    let (_env, mcp, s) = crate::connected().await;
    let mut runners = Vec::new();
    while runners.len() < 5 && runners.last() != Some(&"bash".to_string()) {
        let pid_file = crate::TestPath::new(format!("/tmp/sshmcp-stopped-{}", unique_sleep(1)));
        let warm = remote_until(&mcp, &s, "cat /proc/$PPID/comm", "bash\n").await;
        assert!(warm, "a channel bash runs");
        let command = format!(
            "echo $$ > {}; cat /proc/$PPID/comm; kill -STOP $$; echo resumed",
            &*pid_file
        );
        let args = json!({"session_id": s.0, "session_key": s.1, "command": command});
        let (_, stopped) = mcp.start_call("exec", args).await;
        let state = format!(
            "ps -o stat= -p \"$(cat {} 2>/dev/null)\" | cut -c1",
            &*pid_file
        );
        assert!(
            remote_until(&mcp, &s, &state, "T\n").await,
            "the shell stopped"
        );
        let cont = format!("kill -CONT \"$(cat {})\"", &*pid_file);
        let r = exec(&mcp, &s, &cont, json!({})).await;
        assert_eq!(r["exit_code"], 0, "{r}");
        let r = sshmcp_tests::mcp::answer(stopped).await;
        assert_eq!(
            (&r["exit_code"], &r["signal"]),
            (&json!(0), &json!(null)),
            "{r}"
        );
        let out = crate::text(&r["stdout"]);
        let runner = out
            .strip_suffix("\nresumed\n")
            .unwrap_or_else(|| panic!("{r}"));
        runners.push(runner.to_string());
    }
    assert_eq!(
        runners.last().map(String::as_str),
        Some("bash"),
        "{runners:?}"
    );
    mcp.close().await;
}

/// A host whose `find` lacks `-printf` (as BusyBox's): list_directory lists all the same,
/// through the shell's glob and `stat -c`, sorted by name and counted as GNU's listing is.
#[tokio::test]
async fn a_host_without_gnu_find_still_lists() {
    let (_env, mcp, s) = logged_in_as(&user_without_gnu_find(), &[]).await;
    let r = crate::on_session(
        &mcp,
        &s,
        "list_directory",
        json!({"path": "/", "limit": 1000}),
    )
    .await;
    let names: Vec<&str> = r["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "by name");
    let etc = r["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "etc");
    assert_eq!(etc.map(|e| &e["type"]), Some(&json!("directory")), "{r}");
    let counted = crate::exec(&mcp, &s, "ls -A / | wc -l", json!({})).await;
    let counted: u64 = crate::text(&counted["stdout"]).trim().parse().unwrap();
    assert_eq!(r["total"], counted, "{r}");
    let r = crate::on_session(&mcp, &s, "stat", json!({"path": "/"})).await;
    assert_eq!(r["type"], "directory", "{r}");
    mcp.close().await;
}

/// A login shell that prints on both streams, on a server whose sessions the commands could
/// fill (3): the channel kept for kills still serves them (what the login printed on it is
/// dropped as on any channel), and every command that ran is killed at its timeout.
#[tokio::test]
async fn timeouts_kill_commands_side_by_side_under_a_chatty_login() {
    let user = chatty_user(Chatty::Bash);
    let env = crate::exec::timeouts_kill_side_by_side(Some(&user), 3, 4, 2).await;
    assert!(env.daemon_log_shows("a kill takes the channel kept for kills"));
}
