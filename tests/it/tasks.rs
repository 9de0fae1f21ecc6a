//! Detached tasks through the real binaries: they outlive disconnects, reconnects and the
//! daemon, are addressed by PID, and a PID that is no longer the task is never signalled.

use serde_json::{Value, json};
use sshmcp_tests::McpClient;
use sshmcp_tests::process::unique_sleep;

use crate::{code, connect, connected, exec, on_session};

type Session = (String, String);

async fn task(mcp: &McpClient, s: &Session, tool: &str, args: Value) -> Value {
    let r = on_session(mcp, s, tool, args).await;
    assert_eq!(r["ok"], true, "{tool}: {r}");
    r
}

/// The task's status once its wrapper recorded an exit status, or after 15 s. The status is
/// recorded when the task's shell exits, which may be before its group ends (a child left
/// running): each call waits up to a second for the end, then looks again.
async fn until_exit_recorded(mcp: &McpClient, s: &Session, pid: u64) -> Value {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let st = task(
            mcp,
            s,
            "task_status",
            json!({"pid": pid, "wait_seconds": 1}),
        )
        .await;
        if st["exit_code"] != json!(null) || std::time::Instant::now() > give_up {
            return st;
        }
    }
}

#[tokio::test]
async fn a_task_outlives_its_session_and_the_daemon_then_dies_by_pid() {
    let (env, mcp, s) = connected().await;
    let secs = unique_sleep(300);
    let launched = task(
        &mcp,
        &s,
        "task_launch",
        json!({"command": format!("echo started; echo warn >&2; sleep {secs}"), "cwd": "/tmp"}),
    )
    .await;
    let pid = launched["pid"].as_u64().unwrap();
    let log = launched["stdout_log"].as_str().unwrap().to_string();
    assert!(
        log.ends_with(&format!("/.sshmcp/tasks/{pid}.out")),
        "{launched}"
    );
    // Private: the directory 0700, the logs 0600.
    let modes = exec(
        &mcp,
        &s,
        &format!("stat -c %a \"$(dirname '{log}')\" '{log}'"),
        json!({}),
    )
    .await;
    assert_eq!(crate::text(&modes["stdout"]), "700\n600\n", "{modes}");
    // The session goes, then the daemon; a new daemon and session find the task running.
    mcp.call("disconnect", json!({"session_id": s.0})).await;
    mcp.close().await;
    assert!(env.cli(&["daemon", "stop"]).status.success());
    let mcp = env.mcp().await;
    let s = connect(&mcp).await;
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let status = loop {
        let st = task(&mcp, &s, "task_status", json!({"pid": pid})).await;
        // The task writes its logs on its own schedule: no event reaches us for that.
        if crate::text(&st["stderr"]) == "warn\n" || std::time::Instant::now() > give_up {
            break st;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(status["state"], "running", "{status}");
    assert_eq!(status["exit_code"], json!(null));
    assert_eq!(crate::text(&status["stdout"]), "started\n", "{status}");
    assert_eq!(crate::text(&status["stderr"]), "warn\n", "{status}");
    let k = task(&mcp, &s, "task_kill", json!({"pid": pid})).await;
    assert_eq!(
        (&k["result"], &k["force_kill_used"]),
        (&json!("killed"), &json!(null)),
        "{k}"
    );
    let probe = format!("pgrep -f 'sleep {secs}' || echo none");
    assert_eq!(
        crate::text(&exec(&mcp, &s, &probe, json!({})).await["stdout"]),
        "none\n"
    );
    // The wrapper recorded the signal's status as the group went.
    let status = until_exit_recorded(&mcp, &s, pid).await;
    assert_eq!(
        (&status["state"], &status["exit_code"]),
        (&json!("exited"), &json!(143)),
        "{status}"
    );
    let again = task(&mcp, &s, "task_kill", json!({"pid": pid})).await;
    assert_eq!(again["result"], "not_running", "{again}");
    mcp.close().await;
}

/// A PID that once was a task but now belongs to another process is not the task: its status
/// is not that process's, and a kill leaves it alone. PIDs that are no task's are refused.
/// `task_status` with `wait_seconds` answers once the task ended: a call made while it runs
/// comes back `exited` with its status after the task was let go. At its limit (300) on an
/// ended task it answers at once; one past it is refused.
#[tokio::test]
async fn task_status_waits_for_the_end() {
    let (_env, mcp, s) = connected().await;
    let mark = crate::TestPath::new(format!("/tmp/sshmcp-taskwait-{}", unique_sleep(1)));
    let command = format!("while [ ! -e {mark} ]; do sleep 0.1; done; exit 4");
    let launched = task(&mcp, &s, "task_launch", json!({ "command": command })).await;
    let pid = launched["pid"].as_u64().unwrap();
    let args = json!({"session_id": s.0, "session_key": s.1, "pid": pid, "wait_seconds": 60});
    let waiting = mcp.start_call("task_status", args).await.1;
    crate::remote_out(&mcp, &s, &format!("touch {mark}")).await;
    let st = sshmcp_tests::mcp::answer(waiting).await;
    assert_eq!(
        (&st["state"], &st["exit_code"]),
        (&json!("exited"), &json!(4)),
        "{st}"
    );
    for (wait, ok) in [(300.0, true), (300.01, false)] {
        let r = on_session(
            &mcp,
            &s,
            "task_status",
            json!({"pid": pid, "wait_seconds": wait}),
        )
        .await;
        match ok {
            true => assert_eq!(r["state"], "exited", "{r}"),
            false => assert_eq!(crate::code(&r), "invalid_arguments", "{r}"),
        }
    }
    mcp.close().await;
}

#[tokio::test]
async fn a_reused_pid_is_never_signalled() {
    let (_env, mcp, s) = connected().await;
    let done = task(&mcp, &s, "task_launch", json!({"command": "exit 4"})).await;
    let old = done["pid"].as_u64().unwrap();
    // Another process, not a task, then given the ended task's records under its own PID:
    // exactly what the host shows when the kernel hands the task's PID to a new process.
    let secs = unique_sleep(300);
    let r = exec(
        &mcp,
        &s,
        &format!(
            "d=$HOME/.sshmcp/tasks; while [ ! -s $d/{old}.exit ]; do sleep 0.01; done
             setsid sleep {secs} </dev/null >/dev/null 2>&1 & q=$!
             cp $d/{old}.start $d/$q.start; cp $d/{old}.exit $d/$q.exit; echo $q"
        ),
        json!({}),
    )
    .await;
    let other: u64 = crate::text(&r["stdout"]).trim().parse().unwrap();
    let k = task(&mcp, &s, "task_kill", json!({"pid": other, "signal": 9})).await;
    assert_eq!(k["result"], "not_running", "{k}");
    let st = task(&mcp, &s, "task_status", json!({"pid": other})).await;
    assert_eq!(
        (&st["state"], &st["exit_code"]),
        (&json!("exited"), &json!(4)),
        "{st}"
    );
    let probe = format!("pgrep -f 'sleep {secs}' >/dev/null && echo alive");
    assert_eq!(
        crate::text(&exec(&mcp, &s, &probe, json!({})).await["stdout"]),
        "alive\n",
        "the other process was not signalled"
    );
    exec(&mcp, &s, &format!("pkill -f 'sleep {secs}'"), json!({})).await;
    // The same with a group whose leader is gone but whose member lives on: a number the
    // task once had, now another group's. Still not the task.
    let secs = unique_sleep(300);
    let r = exec(
        &mcp,
        &s,
        &format!(
            "d=$HOME/.sshmcp/tasks
             q=$(setsid sh -c 'sleep {secs} </dev/null >/dev/null 2>&1 & echo $$')
             cp $d/{old}.start $d/$q.start; cp $d/{old}.exit $d/$q.exit; echo $q"
        ),
        json!({}),
    )
    .await;
    let leaderless: u64 = crate::text(&r["stdout"]).trim().parse().unwrap();
    let k = task(
        &mcp,
        &s,
        "task_kill",
        json!({"pid": leaderless, "signal": 9}),
    )
    .await;
    assert_eq!(k["result"], "not_running", "{k}");
    let st = task(&mcp, &s, "task_status", json!({"pid": leaderless})).await;
    assert_eq!(st["state"], "exited", "{st}");
    let probe = format!("pgrep -f 'sleep {secs}' >/dev/null && echo alive");
    assert_eq!(
        crate::text(&exec(&mcp, &s, &probe, json!({})).await["stdout"]),
        "alive\n",
        "the foreign group was not signalled"
    );
    exec(&mcp, &s, &format!("pkill -f 'sleep {secs}'"), json!({})).await;
    for pid in [1, 0, -1] {
        let k = task(&mcp, &s, "task_kill", json!({"pid": pid})).await;
        assert_eq!(k["result"], "invalid_pid", "{pid}: {k}");
    }
    let st = task(&mcp, &s, "task_status", json!({"pid": 999_999})).await;
    assert_eq!(st["state"], "not_found", "{st}");
    let r = on_session(
        &mcp,
        &s,
        "task_status",
        json!({"pid": old, "tail_bytes": 0}),
    )
    .await;
    assert_eq!(code(&r), "invalid_arguments");
    // Past the cap, the cap: as every size wish.
    let r = on_session(
        &mcp,
        &s,
        "task_status",
        json!({"pid": old, "tail_bytes": 65537}),
    )
    .await;
    assert_eq!(r["exit_code"], 4, "{r}");
    let r = on_session(
        &mcp,
        &s,
        "task_status",
        json!({"pid": old, "tail_bytes": 65536}),
    )
    .await;
    assert_eq!(r["exit_code"], 4, "{r}");
    mcp.close().await;
}

/// A task whose shell left a child behind and exited is still running as its group: the
/// child keeps the group's number from being anyone else's, so the status says so and the
/// kill reaches it.
#[tokio::test]
async fn a_task_whose_leader_left_children_is_still_its_group() {
    let (_env, mcp, s) = connected().await;
    let secs = unique_sleep(300);
    let pid = left_children_run_and_die(&mcp, &s, &secs, &format!("sleep {secs} &")).await;
    let st = task(&mcp, &s, "task_status", json!({"pid": pid})).await;
    assert_eq!(st["state"], "exited", "{st}");
    mcp.close().await;
}

/// A task whose shell exited leaving ten children started with an empty environment
/// (`env -i`, which carries no mark) beside one that carries it: still running, and a kill
/// ends them all within its time, the empty environments read again once for all of them.
#[tokio::test]
async fn children_with_empty_environments_neither_slow_nor_stop_a_kill() {
    let (_env, mcp, s) = connected().await;
    let secs = unique_sleep(300);
    let children =
        format!("for i in 1 2 3 4 5 6 7 8 9 10; do env -i sleep {secs} & done; sleep {secs} &");
    left_children_run_and_die(&mcp, &s, &secs, &children).await;
    mcp.close().await;
}

/// Launches a task whose shell starts `children` (each a `sleep` of `secs`) and exits; once
/// its exit is recorded the task is still `running`, and `task_kill` ends every child.
async fn left_children_run_and_die(
    mcp: &McpClient,
    s: &Session,
    secs: &str,
    children: &str,
) -> u64 {
    let command = format!("{children} echo spawned");
    let launched = task(mcp, s, "task_launch", json!({ "command": command })).await;
    let pid = launched["pid"].as_u64().unwrap();
    // The wrapper records its shell's status as it exits; the children run on.
    let status = until_exit_recorded(mcp, s, pid).await;
    assert_eq!(
        (&status["state"], &status["exit_code"]),
        (&json!("running"), &json!(0)),
        "{status}"
    );
    let k = task(mcp, s, "task_kill", json!({"pid": pid})).await;
    assert_eq!(k["result"], "killed", "{k}");
    let probe = format!("pgrep -f 'sleep {secs}' || echo none");
    assert_eq!(
        crate::text(&exec(mcp, s, &probe, json!({})).await["stdout"]),
        "none\n"
    );
    pid
}

/// A task whose shell exited leaving only children without the mark (300 started with an
/// empty environment, `env -i`, all of them past their exec): nothing shows the group is
/// still the task's, so a kill answers `not_running` within its time, the empty environments
/// read again for a second in all, and leaves them alone.
#[tokio::test]
async fn a_group_of_unmarked_children_is_not_running_and_the_kill_answers_in_time() {
    let (_env, mcp, s) = connected().await;
    let secs = unique_sleep(300);
    let command = format!("for i in $(seq 300); do env -i sleep {secs} & done; echo spawned");
    let launched = task(&mcp, &s, "task_launch", json!({ "command": command })).await;
    let pid = launched["pid"].as_u64().unwrap();
    let status = until_exit_recorded(&mcp, &s, pid).await;
    assert_eq!(status["exit_code"], 0, "{status}");
    // Until each child has become `sleep`, one still carries the mark from its shell.
    let execd = format!("pgrep -c -f '^sleep {secs}'");
    assert!(crate::remote_until(&mcp, &s, &execd, "300\n").await);
    let k = task(&mcp, &s, "task_kill", json!({"pid": pid})).await;
    assert_eq!(k["result"], "not_running", "{k}");
    let left = format!("pgrep -c -f '^sleep {secs}'; pkill -f '^sleep {secs}'");
    assert_eq!(
        crate::text(&exec(&mcp, &s, &left, json!({})).await["stdout"]),
        "300\n"
    );
    mcp.close().await;
}

/// A task takes every signal as a command run by hand would: INT and QUIT are not ignored
/// (as they are for an asynchronous list of a shell), so a program's graceful stop on INT
/// works, and the status the wrapper records is 128 + the signal, for USR1 too. Signals go
/// by name (as answers give them) or by number.
#[tokio::test]
async fn a_task_stops_on_int_and_records_each_signal() {
    let (_env, mcp, s) = connected().await;
    for (signal, name, given) in [
        (2, "INT", json!("INT")),
        (3, "QUIT", json!("SIGQUIT")),
        (10, "USR1", json!(10)),
    ] {
        let secs = unique_sleep(300);
        let command = format!("grep SigIgn /proc/self/status; exec sleep {secs}");
        let launched = task(&mcp, &s, "task_launch", json!({ "command": command })).await;
        let pid = launched["pid"].as_u64().unwrap();
        let k = task(
            &mcp,
            &s,
            "task_kill",
            json!({"pid": pid, "signal": given, "wait_seconds": 10}),
        )
        .await;
        assert_eq!(k["result"], "killed", "{name}: {k}");
        let status = until_exit_recorded(&mcp, &s, pid).await;
        assert_eq!(status["exit_code"], json!(128 + signal), "{name}: {status}");
        // The command itself started with INT and QUIT (bits 1 and 2) not ignored.
        let shown = crate::text(&status["stdout"]);
        let ignored = shown
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .unwrap_or_else(|| panic!("{shown}"));
        assert_eq!(ignored & 0b110, 0, "{shown}");
    }
    mcp.close().await;
}
