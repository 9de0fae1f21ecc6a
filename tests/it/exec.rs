//! exec through the real binaries: streams, exit codes, cwd, stdin, encodings, timeouts,
//! cancellation, concurrency beyond MaxSessions, spooling.

use serde_json::json;
use sshmcp_tests::process::{unique_sleep, until_matching};
use sshmcp_tests::{SshdOptions, TestEnv};

use crate::{code, connected, connected_with, exec, exec_all, remote_out, remote_until};

/// Lean answers (contract section 0): `printf hi` answers in at most 80 bytes of JSON, its
/// stdout the text itself; an empty stream and fields at their defaults are left out.
#[tokio::test]
async fn a_short_command_answers_in_at_most_80_bytes() {
    let (_env, mcp, s) = connected().await;
    let r = exec(&mcp, &s, "printf hi", json!({})).await;
    let size = r.to_string().len();
    eprintln!("exec printf hi: {size} bytes: {r}");
    assert!(size <= 80, "{size} bytes: {r}");
    let fields: Vec<&String> = r.as_object().unwrap().keys().collect();
    assert_eq!(fields, ["duration", "exit_code", "ok", "stdout"], "{r}");
    assert_eq!((&r["exit_code"], &r["stdout"]), (&json!(0), &json!("hi")));
    let millis = r["duration"].as_f64().unwrap() * 1000.0;
    assert!(
        (millis - millis.round()).abs() < 1e-6,
        "rounded to the ms: {r}"
    );
    mcp.close().await;
}

#[tokio::test]
async fn splits_streams_and_reports_exit_code() {
    let (_env, mcp, s) = connected().await;
    let r = exec(&mcp, &s, "echo out; echo err >&2; exit 3", json!({})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["exit_code"], 3);
    // Lean: no signal, no timeout, each complete stream as its text.
    let fields: Vec<&String> = r.as_object().unwrap().keys().collect();
    assert_eq!(
        fields,
        ["duration", "exit_code", "ok", "stderr", "stdout"],
        "{r}"
    );
    assert_eq!(
        (&r["stdout"], &r["stderr"]),
        (&json!("out\n"), &json!("err\n"))
    );
    assert!(r["duration"].as_f64().unwrap() > 0.0);
    mcp.close().await;
}

/// A command whose shell a signal ends reports the signal's name, whoever sent it, with a
/// null exit code; an exit with a status above 128 is an exit; an `exec`ed program killed by
/// a signal is named too. The channel then serves the next command.
#[tokio::test]
async fn signals_are_named_and_exits_above_128_stay_exits() {
    let (_env, mcp, s) = connected().await;
    for (command, exit_code, signal) in [
        (
            "echo before; kill -USR1 $$; echo not-reached",
            json!(null),
            json!("USR1"),
        ),
        ("kill -SEGV $$", json!(null), json!("SEGV")),
        ("exec sh -c 'kill -TERM $$'", json!(null), json!("TERM")),
        ("exit 138", json!(138), json!(null)),
        // The command's own exit trap replaces the shell's report: a status no signal
        // gives is still an exit.
        ("trap 'true' EXIT; exit 255", json!(255), json!(null)),
    ] {
        let r = exec(&mcp, &s, command, json!({})).await;
        assert_eq!(
            (&r["exit_code"], &r["signal"]),
            (&exit_code, &signal),
            "{command}: {r}"
        );
        assert_eq!(crate::text(&r["stderr"]), "", "{command}: {r}");
    }
    // A child a signal ended is the shell's business: it goes on, says so (dash, the test
    // host's /bin/sh), and exits 137.
    let r = exec(&mcp, &s, "sh -c 'kill -KILL $$'", json!({})).await;
    assert_eq!(
        (&r["exit_code"], &r["signal"]),
        (&json!(137), &json!(null)),
        "{r}"
    );
    assert_eq!(crate::text(&r["stderr"]), "Killed\n", "{r}");
    let r = exec(&mcp, &s, "echo before; kill -USR1 $$", json!({})).await;
    assert_eq!(crate::text(&r["stdout"]), "before\n", "{r}");
    assert_eq!(
        crate::text(&exec(&mcp, &s, "echo next", json!({})).await["stdout"]),
        "next\n"
    );
    mcp.close().await;
}

#[tokio::test]
async fn runs_as_the_session_user_in_posix_sh_with_empty_stdin() {
    let (env, mcp, s) = connected().await;
    // `cat` must see EOF at once; $0-independent check that this is dash/sh, not bash.
    // The command cannot read its own source either (fd 3 is closed before it runs).
    let command =
        "id -un; cat; echo \"[$BASH_VERSION]\"; [ -e /dev/fd/3 ] && echo fd3 || echo no-fd3";
    let r = exec(&mcp, &s, command, json!({})).await;
    assert_eq!(
        crate::text(&r["stdout"]),
        format!("{}\n[]\nno-fd3\n", env.sshd.user)
    );
    mcp.close().await;
}

#[tokio::test]
async fn cwd_applies_to_one_call_and_missing_cwd_is_an_error() {
    let (_env, mcp, s) = connected().await;
    let r = exec(&mcp, &s, "pwd", json!({"cwd": "/tmp"})).await;
    assert_eq!(crate::text(&r["stdout"]), "/tmp\n");
    let r = exec(&mcp, &s, "pwd", json!({})).await;
    assert_ne!(crate::text(&r["stdout"]), "/tmp\n", "cwd must not persist");
    // The test's own directory: a fixed name in /tmp could be another user's from an
    // earlier run.
    let dir = crate::fresh_dir(&mcp, &s, "cwd").await;
    let r = exec(
        &mcp,
        &s,
        &format!("mkdir -p \"{dir}/sshmcp a'b\" && cd {dir} && touch x"),
        json!({}),
    )
    .await;
    assert_eq!(r["exit_code"], 0, "{r}");
    let r = exec(&mcp, &s, "pwd", json!({"cwd": format!("{dir}/sshmcp a'b")})).await;
    assert_eq!(crate::text(&r["stdout"]), format!("{dir}/sshmcp a'b\n"));
    let r = exec(&mcp, &s, &format!("mkdir -p '{dir}/sshmcp\nnl'"), json!({})).await;
    assert_eq!(r["exit_code"], 0);
    let r = exec(&mcp, &s, "pwd", json!({"cwd": format!("{dir}/sshmcp\nnl")})).await;
    assert_eq!(crate::text(&r["stdout"]), format!("{dir}/sshmcp\nnl\n"));
    let r = exec(&mcp, &s, "echo ran", json!({"cwd": "/no/such/dir"})).await;
    assert_eq!(code(&r), "remote_path_not_found");
    // `-` is a directory of that name, never `cd -`'s previous directory.
    let r = exec(&mcp, &s, "echo ran", json!({"cwd": "-"})).await;
    assert_eq!(code(&r), "remote_path_not_found", "{r}");
    exec(&mcp, &s, "mkdir -p ./-", json!({})).await;
    let r = exec(&mcp, &s, "pwd", json!({"cwd": "-"})).await;
    let pwd = crate::text(&r["stdout"]);
    assert!(pwd.ends_with("/-\n"), "{r}");
    exec(&mcp, &s, "rmdir ./-", json!({})).await;
    mcp.close().await;
}

/// A command of comments or blank lines alone runs (and does nothing); an empty one, or
/// one of blanks only, is refused.
#[tokio::test]
async fn comments_alone_run_and_an_empty_command_is_refused() {
    let (_env, mcp, s) = connected().await;
    for command in ["# nothing to do", "\n\n# two\n"] {
        let r = exec(&mcp, &s, command, json!({})).await;
        assert_eq!(
            (&r["exit_code"], &json!(crate::text(&r["stderr"]))),
            (&json!(0), &json!("")),
            "{command:?}: {r}"
        );
    }
    for command in ["", " \n\t"] {
        let r = exec(&mcp, &s, command, json!({})).await;
        assert_eq!(code(&r), "invalid_command", "{command:?}: {r}");
    }
    mcp.close().await;
}

#[tokio::test]
async fn command_text_reaches_sh_unchanged() {
    let (_env, mcp, s) = connected().await;
    let command = "printf '%s|' \"a  b\" '$HOME' \"it's\" '!x' '\\n'; echo";
    let r = exec(&mcp, &s, command, json!({})).await;
    assert_eq!(crate::text(&r["stdout"]), "a  b|$HOME|it's|!x|\\n|\n");
    mcp.close().await;
}

#[tokio::test]
async fn binary_output_is_base64_and_text_stays_text() {
    let (_env, mcp, s) = connected().await;
    let r = exec(
        &mcp,
        &s,
        "printf '\\377\\000A'; printf 'h\\303\\251' >&2",
        json!({}),
    )
    .await;
    assert_eq!(r["stdout"]["encoding"], "base64");
    assert_eq!(crate::text(&r["stdout"]), "/wBB");
    assert_eq!(r["stderr"], "hé", "UTF-8 is text: {r}");
    mcp.close().await;
}

#[tokio::test]
async fn timeout_terminates_the_remote_process_group() {
    let (_env, mcp, s) = connected().await;
    let (inner, outer) = (unique_sleep(30), unique_sleep(31));
    let command = format!("sh -c 'sleep {inner}; echo marker' & sleep {outer}; echo never");
    let r = exec(&mcp, &s, &command, json!({"timeout": 0.5})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["timed_out"], true);
    assert_eq!(r["exit_code"], json!(null));
    assert_eq!(r["signal"], "TERM", "sleep ends on TERM: {r}");
    assert!(r["duration"].as_f64().unwrap() < 10.0);
    let probe = format!("pgrep -f 'sleep ({inner}|{outer})' || echo none");
    let left = exec(&mcp, &s, &probe, json!({})).await;
    assert_eq!(
        crate::text(&left["stdout"]),
        "none\n",
        "the whole group must be gone"
    );
    mcp.close().await;
}

#[tokio::test]
async fn mcp_cancellation_kills_the_remote_command() {
    let (_env, mcp, s) = connected().await;
    let secs = unique_sleep(41);
    let args = json!({"session_id": s.0, "session_key": s.1,
                      "command": format!("sleep {secs}; echo finished"), "timeout": 120});
    let (id, _rx) = mcp.start_call("exec", args).await;
    let probe = &format!("pgrep -f 'sleep {secs}' >/dev/null && echo yes || echo no");
    // Wait until the command really runs remotely before cancelling.
    assert!(
        remote_until(&mcp, &s, probe, "yes\n").await,
        "the command never started"
    );
    mcp.cancel(id).await;
    assert!(
        remote_until(&mcp, &s, probe, "no\n").await,
        "the cancelled command still runs"
    );
    mcp.close().await;
}

#[tokio::test]
async fn twelve_concurrent_execs_beyond_max_sessions_all_succeed_on_one_connection() {
    let (env, mcp, s) = connected_with(&SshdOptions::allowing_sessions(10), &[]).await;
    let accepted_before = env.sshd.accepted_connections();
    let commands: Vec<String> = (0..12)
        .map(|i| format!("sleep 0.5; echo $(id -un) {i}"))
        .collect();
    for (i, r) in exec_all(&mcp, &s, &commands).await.iter().enumerate() {
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["exit_code"], 0, "{r}");
        assert_eq!(
            crate::text(&r["stdout"]),
            format!("{} {i}\n", env.sshd.user)
        );
        // A queued call starts when a channel frees (about 0.5 s), not when an idle channel
        // that kept its slot closes (5 s).
        assert!(r["duration"].as_f64().unwrap() < 4.0, "{r}");
    }
    assert_eq!(
        env.sshd.accepted_connections(),
        accepted_before,
        "no call may fall back to a fresh SSH connection"
    );
    mcp.close().await;
}

#[tokio::test]
async fn spool_output_keeps_complete_streams_under_the_local_root() {
    let (env, mcp, s) = connected_with(
        &SshdOptions::default(),
        &[("SSHMCP_MAX_OUTPUT_BYTES", "100")],
    )
    .await;
    let r = exec(
        &mcp,
        &s,
        "seq 1 5000; echo e >&2",
        json!({"spool_output": true}),
    )
    .await;
    assert_eq!(r["stdout"]["truncated"], true);
    let path = r["stdout"]["spool_path"].as_str().expect("spool path");
    assert!(
        path.starts_with(&env.local_root.join(".sshmcp/spool").display().to_string()),
        "{path}"
    );
    let expected: String = (1..=5000).map(|i| format!("{i}\n")).collect();
    assert_eq!(std::fs::read_to_string(path).unwrap(), expected);
    let err = r["stderr"]["spool_path"].as_str().unwrap();
    assert_eq!(std::fs::read_to_string(err).unwrap(), "e\n");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(env.local_root.join(".sshmcp"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    mcp.close().await;
}

#[tokio::test]
async fn wrong_key_and_unknown_session_are_refused() {
    let (_env, mcp, s) = connected().await;
    let r = exec(
        &mcp,
        &(s.0.clone(), "not-the-key".into()),
        "true",
        json!({}),
    )
    .await;
    assert_eq!(code(&r), "invalid_session_key");
    assert!(!r.to_string().contains("not-the-key"));
    let r = exec(
        &mcp,
        &("s0000000000".into(), s.1.clone()),
        "true",
        json!({}),
    )
    .await;
    assert_eq!(code(&r), "session_not_found");
    mcp.close().await;
}

#[tokio::test]
async fn a_shim_that_dies_mid_command_takes_the_command_with_it() {
    let (env, first, s) = connected().await;
    let secs = unique_sleep(43);
    let args = json!({"session_id": s.0, "session_key": s.1,
                      "command": format!("sleep {secs}"), "timeout": 120});
    let (_id, _rx) = first.start_call("exec", args).await;
    let watcher = env.mcp().await;
    let probe = &format!("pgrep -f 'sleep {secs}' >/dev/null && echo yes || echo no");
    assert!(
        remote_until(&watcher, &s, probe, "yes\n").await,
        "the command never started"
    );
    // The agent crashes: its connection to the daemon closes and the call's work is aborted.
    first.kill().await;
    assert!(
        remote_until(&watcher, &s, probe, "no\n").await,
        "the orphaned command still runs"
    );
    watcher.close().await;
}

#[tokio::test]
async fn refusals_near_a_low_max_sessions_are_retried_not_surfaced() {
    let (env, mcp, s) = connected_with(&SshdOptions::allowing_sessions(2), &[]).await;
    let commands: Vec<String> = (0..8).map(|i| format!("sleep 0.2; echo {i}")).collect();
    for (i, r) in exec_all(&mcp, &s, &commands).await.iter().enumerate() {
        assert_eq!(crate::text(&r["stdout"]), format!("{i}\n"), "{r}");
    }
    assert!(
        env.sshd.log_text().contains("no more sessions"),
        "sshd did refuse channels"
    );
    mcp.close().await;
}

/// Commands waiting for a channel on a server allowing two sessions ask it a few times a
/// second at most, not dozens (each refusal is a line in the server's log), and still run as
/// soon as a channel comes free.
#[tokio::test]
async fn waiting_for_a_channel_asks_the_server_a_few_times_a_second() {
    let (env, mcp, s) = connected_with(&SshdOptions::allowing_sessions(2), &[]).await;
    let refusals = || env.sshd.log_text().matches("no more sessions").count();
    let before = refusals();
    let started = std::time::Instant::now();
    let commands: Vec<String> = (0..4).map(|i| format!("sleep 4; echo {i}")).collect();
    for (i, r) in exec_all(&mcp, &s, &commands).await.iter().enumerate() {
        assert_eq!(crate::text(&r["stdout"]), format!("{i}\n"), "{r}");
    }
    let seconds = started.elapsed().as_secs_f64();
    let refused = refusals() - before;
    assert!(
        refused as f64 <= 3.0 * seconds + 12.0,
        "{refused} refusals in {seconds:.1} s"
    );
    // They waited for channels, not out their timeouts (60 s).
    assert!(
        seconds < 30.0,
        "the waiting commands ran late: {seconds:.1} s"
    );
    mcp.close().await;
}

/// The command reaches /bin/sh unchanged even when the login shell is csh-like, whose quoting
/// and `!` history rules differ from sh's. Needs root to create the tcsh user.
#[tokio::test]
async fn commands_run_in_sh_whatever_the_login_shell() {
    let env = TestEnv::new();
    let user = sshmcp_tests::users::user_with_shell("sshmcp-tcsh", "/usr/bin/tcsh");
    env.sshd.add_host_block(&format!(
        "Host tcshbed\n  HostName 127.0.0.1\n  Port {}\n  User {user}",
        env.sshd.port
    ));
    let mcp = env.mcp().await;
    let r = mcp.call("connect", json!({"alias": "tcshbed"})).await;
    assert_eq!(r["ok"], true, "{r}");
    let s = sshmcp_tests::mcp::session_of(&r);
    let r = exec(
        &mcp,
        &s,
        "getent passwd \"$(id -un)\" | cut -d: -f7",
        json!({}),
    )
    .await;
    assert_eq!(crate::text(&r["stdout"]), "/usr/bin/tcsh\n", "{r}");
    let command = "x='!$ \"q\" `b`'; for w in a 'b c'; do printf '%s|' \"$w\"; done; echo \"$x\"";
    let r = exec(&mcp, &s, command, json!({"cwd": "/tmp"})).await;
    assert_eq!(crate::text(&r["stdout"]), "a|b c|!$ \"q\" `b`\n", "{r}");
    mcp.close().await;
}

/// A call that cannot get a channel within its own timeout is `channels_busy` (never
/// `ok: true`) and never runs.
#[tokio::test]
async fn a_call_queued_past_its_timeout_is_channels_busy_and_never_runs() {
    let (env, mcp, s) = connected().await;
    // Beside the temp root, where the remote test user may write.
    let marker = std::path::PathBuf::from(format!("{}-queued", env.root.path().display()));
    // Eight long commands hold every channel slot of the session.
    let mut holders = Vec::new();
    for _ in 0..8 {
        let args = json!({"session_id": s.0, "session_key": s.1, "command": "sleep 2"});
        holders.push(mcp.start_call("exec", args).await.1);
    }
    let first_session = |row: &serde_json::Value| row["active_commands"] == 8;
    assert!(crate::first_session_until(&mcp, first_session).await);
    let command = format!("touch '{}'", marker.display());
    let r = exec(&mcp, &s, &command, json!({"timeout": 0.3})).await;
    assert_eq!(code(&r), "channels_busy", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("nothing ran"),
        "{r}"
    );
    for rx in holders {
        let r = sshmcp_tests::mcp::answer(rx).await;
        assert_eq!(r["exit_code"], 0, "{r}");
    }
    assert!(!marker.exists(), "the queued command must never run");
    // The same command with a free channel does run: the check above could have failed.
    let r = exec(&mcp, &s, &command, json!({})).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();
    mcp.close().await;
}

/// A spooled stream stops at `max-spool-bytes`, exactly at the limit and one past it, and
/// says so; a call that fails leaves no spool file behind.
#[tokio::test]
async fn spool_files_are_capped_and_removed_when_the_call_fails() {
    let (env, mcp, s) = connected_with(
        &SshdOptions::default(),
        &[("SSHMCP_MAX_SPOOL_BYTES", "1000")],
    )
    .await;
    let spool = json!({"spool_output": true});
    // `head -c N` prints exactly N bytes.
    let r = exec(&mcp, &s, "yes | head -c 1000", spool.clone()).await;
    let path = r["stdout"]["spool_path"].as_str().unwrap().to_string();
    assert_eq!(r["stdout"]["spool_truncated"], json!(null), "{r}");
    assert_eq!(std::fs::read(&path).unwrap().len(), 1000);
    let r = exec(&mcp, &s, "yes | head -c 1001", spool.clone()).await;
    let path = r["stdout"]["spool_path"].as_str().unwrap().to_string();
    assert_eq!(r["stdout"]["spool_truncated"], true, "{r}");
    assert_eq!(
        r["stdout"]["total_bytes"], 1001,
        "the answer still counts all"
    );
    assert_eq!(std::fs::read(&path).unwrap().len(), 1000);
    assert_eq!(r["stderr"]["spool_truncated"], json!(null));

    let dir = env.local_root.join(".sshmcp/spool").join(&s.0);
    let files = || std::fs::read_dir(&dir).unwrap().count();
    let before = files();
    let mut failing = spool.clone();
    failing["cwd"] = json!("/nonexistent");
    let r = exec(&mcp, &s, "echo never", failing).await;
    assert_eq!(code(&r), "remote_path_not_found");
    assert_eq!(files(), before, "no spool file left by a failed call");
    mcp.close().await;
}

/// On a server that allows few sessions (MaxSessions 2, taken by the command and a standby
/// channel), a timeout still kills the command: the kill may use the standby channel, and a
/// refused channel gives one back.
#[tokio::test]
async fn a_timeout_kills_even_when_the_server_allows_few_sessions() {
    let opts = SshdOptions::allowing_sessions(2);
    let (_env, mcp, s) = connected_with(&opts, &[]).await;
    crate::assert_timeout_kills(&mcp, &s, "exec").await;
    mcp.close().await;
}

/// On a server whose `MaxSessions` the running commands could fill (3 here), commands side by
/// side leave one session for kills: every one of them that times out is killed, and nothing
/// of them is left on the host. The fourth queues and still runs.
#[tokio::test]
async fn timeouts_kill_commands_side_by_side_on_a_server_with_few_sessions() {
    timeouts_kill_side_by_side(None, 3, 4, 2).await;
}

/// Sends `commands` sleeps with a 2 s timeout at once, as `user` (the test user when None),
/// on a server allowing `max_sessions`: at least `killed` of them run and answer `timed_out`,
/// killed by TERM, the rest answer `channels_busy` having run nothing, and none is left on
/// the host.
pub async fn timeouts_kill_side_by_side(
    user: Option<&str>,
    max_sessions: u32,
    commands: usize,
    killed: usize,
) -> TestEnv {
    let opts = SshdOptions::allowing_sessions(max_sessions);
    let (env, mcp, s) = match user {
        None => connected_with(&opts, &[]).await,
        Some(user) => crate::logged_in_with(user, &opts, &[]).await,
    };
    let secs = unique_sleep(41);
    let mut pending = Vec::new();
    for _ in 0..commands {
        let args = json!({"session_id": s.0, "session_key": s.1, "timeout": 2,
                          "command": format!("sleep {secs}")});
        pending.push(mcp.start_call("exec", args).await.1);
    }
    let mut signals = Vec::new();
    for rx in pending {
        let r = sshmcp_tests::mcp::answer(rx).await;
        match r["ok"] == true {
            true => assert_eq!(r["timed_out"], true, "{r}"),
            false => assert_eq!(code(&r), "channels_busy", "{r}"),
        }
        signals.push(r["signal"].clone());
    }
    // The commands that got a channel were killed; one that waited out its timeout in the
    // queue ran nothing (no signal).
    let by_term = signals.iter().filter(|s| **s == json!("TERM")).count();
    assert!(by_term >= killed, "{signals:?}");
    assert!(
        signals.iter().all(|s| *s == json!("TERM") || s.is_null()),
        "{signals:?}"
    );
    // A command that got its channel just as its timeout came is killed a little after its
    // answer.
    let (watcher, w) = crate::connect_watcher(&env).await;
    let probe = format!("pgrep -f 'sleep {secs}' || echo gone");
    assert!(remote_until(&watcher, &w, &probe, "gone\n").await);
    // The session still runs commands.
    assert_eq!(remote_out(&mcp, &s, "echo still").await, "still\n");
    watcher.close().await;
    mcp.close().await;
    env
}

/// On a server allowing three sessions, two commands running and a third waiting for a
/// channel: `disconnect` ends them all, through the session kept for kills.
#[tokio::test]
async fn disconnect_kills_commands_on_a_server_their_sessions_fill() {
    let opts = SshdOptions::allowing_sessions(3);
    let (env, mcp, s) = connected_with(&opts, &[]).await;
    let secs = unique_sleep(43);
    let mut pending = Vec::new();
    for _ in 0..3 {
        let args = json!({"session_id": s.0, "session_key": s.1,
                          "command": format!("sleep {secs}")});
        pending.push(mcp.start_call("exec", args).await.1);
    }
    let (watcher, w) = crate::connect_watcher(&env).await;
    let running = format!("[ \"$(pgrep -fc 'sleep {secs}')\" = 2 ] && echo two || echo not");
    assert!(remote_until(&watcher, &w, &running, "two\n").await);
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(r["ok"], true, "{r}");
    for rx in pending {
        let r = sshmcp_tests::mcp::answer(rx).await;
        assert_eq!(r["ok"], false, "{r}");
    }
    let probe = format!("pgrep -f 'sleep {secs}' || echo gone");
    assert_eq!(remote_out(&watcher, &w, &probe).await, "gone\n");
    watcher.close().await;
    mcp.close().await;
}

/// On a server that allows one session per connection, commands side by side still all run
/// (one at a time): nothing kept for kills holds the only session.
#[tokio::test]
async fn commands_side_by_side_all_run_on_a_server_with_one_session() {
    let opts = SshdOptions::allowing_sessions(1);
    let (env, mcp, s) = connected_with(&opts, &[]).await;
    let commands: Vec<String> = (0..3).map(|i| format!("sleep 0.2; echo {i}")).collect();
    for (i, r) in exec_all(&mcp, &s, &commands).await.iter().enumerate() {
        assert_eq!(crate::text(&r["stdout"]), format!("{i}\n"), "{r}");
    }
    assert!(env.daemon_log_shows("none is kept for kills"));
    assert_eq!(remote_out(&mcp, &s, "echo still").await, "still\n");
    mcp.close().await;
}

/// A process that left the command's group but kept its stdout, and wrote there while the
/// channel waited: the next command does not take that channel, so what the process writes
/// while that command runs is not in its answer either. (A process that stays silent until
/// then is the documented gap.)
#[tokio::test]
async fn output_written_while_a_channel_waits_keeps_the_next_command_off_it() {
    let (env, mcp, s) = connected().await;
    let (watcher, w) = crate::connect_watcher(&env).await;
    let tag = unique_sleep(61);
    let file = |step: &str| format!("/tmp/sshmcp-{step}.{tag}");
    let (go1, done1, go2, done2) = (file("go1"), file("done1"), file("go2"), file("done2"));
    let wait = |f: &str| format!("while [ ! -e {f} ]; do sleep 0.05; done");
    // It writes once while the channel waits, and once more while the next command runs (in
    // a child of its own, so a closed channel cannot end it before it says it wrote).
    let escape = format!(
        "setsid sh -c '{}; echo LATE1; touch {done1}; {}; sh -c \"echo LATE2\"; \
         touch {done2}' & echo started",
        wait(&go1),
        wait(&go2)
    );
    let r = exec(&mcp, &s, &escape, json!({})).await;
    assert_eq!(crate::text(&r["stdout"]), "started\n", "{r}");
    exec(&watcher, &w, &format!("touch {go1}"), json!({})).await;
    let probe = format!("[ -e {done1} ] && echo yes || echo no");
    assert!(
        remote_until(&watcher, &w, &probe, "yes\n").await,
        "never wrote"
    );
    let next = format!("touch {go2}; {}; echo next", wait(&done2));
    let r = exec(&mcp, &s, &next, json!({"timeout": 20})).await;
    assert_eq!(crate::text(&r["stdout"]), "next\n", "{r}");
    exec(
        &watcher,
        &w,
        &format!("rm -f /tmp/sshmcp-*.{tag}"),
        json!({}),
    )
    .await;
    watcher.close().await;
    mcp.close().await;
}

/// Lean answers: the answer of `exec true` (what an agent reads most often) stays within 400
/// bytes of JSON, so a long session of small commands does not fill the agent's context.
#[tokio::test]
async fn exec_true_answers_in_at_most_400_bytes() {
    let (_env, mcp, s) = crate::connected().await;
    let r = crate::exec(&mcp, &s, "true", serde_json::json!({})).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    let text = serde_json::to_string(&r).unwrap();
    assert!(text.len() <= 400, "{} bytes: {text}", text.len());
    mcp.close().await;
}

/// On a server allowing two sessions, the session keeps none for kills once a second command
/// needs it; two commands then hold both, and their timeouts find no channel to kill them
/// with (the answers say `timed_out` with no signal). Once the commands end by themselves,
/// the session runs commands again at once: the kills, still waiting for a channel, held
/// the very channels the ended commands' shells kept waiting, for two minutes.
#[tokio::test]
async fn commands_that_fill_a_two_session_server_past_their_timeout_wedge_nothing() {
    let opts = SshdOptions::allowing_sessions(2);
    let (env, mcp, s) = connected_with(&opts, &[("SSHMCP_LOG", "debug")]).await;
    let secs = unique_sleep(7);
    // The sleep's own command line, its arguments apart.
    let own = format!("sleep\0{secs}");
    let args = json!({"session_id": s.0, "session_key": s.1, "timeout": 4,
                      "command": format!("sleep {secs}")});
    let (_, first) = mcp.start_call("exec", args.clone()).await;
    assert!(until_matching(&[&own], 1).await, "the first command runs");
    let (_, second) = mcp.start_call("exec", args).await;
    assert!(env.daemon_log_shows("none is kept for kills"));
    assert!(
        until_matching(&[&own], 2).await,
        "the second command runs too"
    );
    for pending in [first, second] {
        let r = sshmcp_tests::mcp::answer(pending).await;
        assert_eq!(r["timed_out"], true, "{r}");
    }
    assert!(until_matching(&[&own], 0).await, "the commands ended");
    let r = exec(&mcp, &s, "echo free", json!({"timeout": 4})).await;
    assert_eq!(crate::text(&r["stdout"]), "free\n", "{r}");
    mcp.close().await;
}
