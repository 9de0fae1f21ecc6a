//! A BusyBox host (as on Alpine): a session whose commands run in a root holding only
//! busybox-static as `/bin/sh` and every tool (no GNU options, no rsync, no sudo). Every tool
//! works there or answers `host_tool_missing` naming the program, changing nothing
//! (docs/tools.md, "A BusyBox host").

use serde_json::{Value, json};
use sshmcp_tests::mcp::session_of;
use sshmcp_tests::{McpClient, SshdOptions, TestEnv};

use crate::{code, exec, on_session};

/// A world whose sshd chroots the BusyBox user, an MCP client, and a session as that user.
async fn busybox_session() -> (TestEnv, McpClient, (String, String)) {
    let user = sshmcp_tests::users::busybox_user();
    let env = TestEnv::with(
        &SshdOptions {
            busybox: true,
            ..SshdOptions::default()
        },
        &[],
    );
    let mcp = env.mcp().await;
    let connected = mcp
        .call(
            "connect",
            json!({"host": "127.0.0.1", "user": user, "port": env.sshd.port}),
        )
        .await;
    let s = session_of(&connected);
    (env, mcp, s)
}

/// The message of a `host_tool_missing` failure.
fn missing(answer: &Value) -> String {
    assert_eq!(code(answer), "host_tool_missing", "{answer}");
    answer["error"]["message"].as_str().unwrap().to_string()
}

/// Commands, handles, tasks and host facts work on a BusyBox host: its `/bin/sh` is BusyBox's,
/// a timeout ends the command's group, a slow command is handed off and read to its end, a
/// handle and a task are stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_handles_tasks_and_host_facts_work_on_a_busybox_host() {
    let (_env, mcp, s) = busybox_session().await;
    let r = exec(
        &mcp,
        &s,
        "echo hi; readlink /bin/sh; readlink /bin/sed",
        json!({}),
    )
    .await;
    assert_eq!(r["stdout"], "hi\n/bin/busybox\n/bin/busybox\n", "{r}");

    let secs = sshmcp_tests::process::unique_sleep(60);
    let r = exec(&mcp, &s, &format!("sleep {secs}"), json!({"timeout": 1})).await;
    assert_eq!(
        (&r["timed_out"], &r["signal"]),
        (&json!(true), &json!("TERM")),
        "{r}"
    );
    let (head, tail) = secs.split_at(1);
    let probe = format!("ps -o args | grep -F 'sleep {head}{tail}' | grep -v grep");
    let left = exec(&mcp, &s, &probe, json!({})).await;
    assert_eq!(left["exit_code"], 1, "the group is gone: {left}");

    let r = exec(
        &mcp,
        &s,
        "echo first; sleep 2; echo second",
        json!({"handoff_after": 1}),
    )
    .await;
    assert_eq!(r["handed_off"], true, "{r}");
    let handle = r["handle_id"].clone();
    let done = on_session(
        &mcp,
        &s,
        "command_status",
        json!({"handle_id": handle, "wait_seconds": 30, "stdout_offset": 0}),
    )
    .await;
    assert_eq!(
        (
            &done["status"],
            &done["exit_code"],
            crate::text(&done["stdout"])
        ),
        (&json!("completed"), &json!(0), "first\nsecond\n"),
        "{done}"
    );

    let secs = sshmcp_tests::process::unique_sleep(120);
    let started = on_session(
        &mcp,
        &s,
        "command_start",
        json!({"command": format!("sleep {secs}")}),
    )
    .await;
    let killed = on_session(
        &mcp,
        &s,
        "command_kill",
        json!({"handle_id": started["handle_id"]}),
    )
    .await;
    assert_eq!(killed["result"], "killed", "{killed}");

    let secs = sshmcp_tests::process::unique_sleep(120);
    let task = on_session(
        &mcp,
        &s,
        "task_launch",
        json!({"command": format!("echo task; sleep {secs}")}),
    )
    .await;
    assert_eq!(task["ok"], true, "{task}");
    let pid = task["pid"].clone();
    let status = on_session(&mcp, &s, "task_status", json!({"pid": pid})).await;
    assert_eq!(status["state"], "running", "{status}");
    let killed = on_session(&mcp, &s, "task_kill", json!({"pid": pid})).await;
    assert_eq!(killed["result"], "killed", "{killed}");

    let facts = on_session(&mcp, &s, "host_info", json!({})).await;
    assert_eq!(facts["os"], "BusyBox (the sshmcp tests' host)", "{facts}");
    assert!(facts["cpus"].as_u64().unwrap() >= 1, "{facts}");
    assert_eq!(facts["filesystems"][1]["mount"], "/", "{facts}");
    assert!(facts["filesystems"][1]["free_bytes"].is_u64(), "{facts}");

    let sudo = on_session(&mcp, &s, "sudo_exec", json!({"command": "id"})).await;
    assert_eq!(code(&sudo), "sudo_unavailable", "{sudo}");
    let forward = on_session(
        &mcp,
        &s,
        "forward_start",
        json!({"kind": "dynamic", "listen_port": 0}),
    )
    .await;
    assert_eq!(forward["ok"], true, "{forward}");
    let forwards = on_session(&mcp, &s, "forward_list", json!({})).await;
    assert_eq!(forwards["forwards"][0]["forward_id"], forward["forward_id"]);
    let id = json!({"forward_id": forward["forward_id"]});
    let stopped = on_session(&mcp, &s, "forward_stop", id).await;
    assert_eq!(stopped["ok"], true, "{stopped}");
    let handles = on_session(&mcp, &s, "command_list", json!({})).await;
    let listed = handles["commands"].as_array().unwrap();
    assert!(listed.iter().any(|c| c["handle_id"] == handle), "{handles}");
    let transfers = on_session(&mcp, &s, "transfer_list", json!({})).await;
    assert_eq!(transfers["ok"], true, "{transfers}");
    let closed = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(closed["state"], "closed", "{closed}");
    mcp.close().await;
}

/// The file tools on a BusyBox host: reads, listings, writes, edits (its sed has no `-z`: the
/// daemon edits the file) and path changes (a tree's removal too) work; copying a file
/// either way names the program the host lacks and changes nothing.
#[tokio::test]
async fn file_tools_work_on_a_busybox_host_or_name_what_it_lacks() {
    let (env, mcp, s) = busybox_session().await;
    let dir = format!("/tmp/sshmcp-bb-{}", sshmcp_tests::process::unique_sleep(1));
    let file = format!("{dir}/a.txt");
    let call = |tool: &'static str, args: Value| on_session(&mcp, &s, tool, args);

    let made = call(
        "make_directory",
        json!({"path": format!("{dir}/sub/deeper"), "parents": true}),
    )
    .await;
    assert_eq!(made["ok"], true, "{made}");
    let written = call("write_file", json!({"path": file, "content": "one\ntwo\n"})).await;
    assert_eq!(written["ok"], true, "{written}");
    let stat = call("stat", json!({"path": file})).await;
    assert_eq!(
        (&stat["type"], &stat["size"]),
        (&json!("file"), &json!(8)),
        "{stat}"
    );
    let read = call(
        "read_file_range",
        json!({"path": file, "offset": 4, "length": 100}),
    )
    .await;
    assert_eq!(
        (&read["data"], &read["eof"]),
        (&json!("two\n"), &json!(true)),
        "{read}"
    );
    // An overwrite keeps the old file's mode.
    exec(&mcp, &s, &format!("chmod 640 {file}"), json!({})).await;
    let over = call(
        "write_file",
        json!({"path": file, "content": "one\ntwo\n", "overwrite": true}),
    )
    .await;
    assert_eq!(over["ok"], true, "{over}");
    let stat = call("stat", json!({"path": file})).await;
    assert_eq!(stat["mode"], "0640", "{stat}");
    let stale = call(
        "write_file",
        json!({"path": file, "content": "x", "expected_sha256": "0".repeat(64)}),
    )
    .await;
    assert_eq!(code(&stale), "file_changed", "{stale}");
    assert_eq!(stale["error"]["sha256"], written["sha256"], "{stale}");

    let copied = call(
        "copy_path",
        json!({"source": file, "destination": format!("{dir}/sub/b.txt")}),
    )
    .await;
    assert_eq!(copied["ok"], true, "{copied}");
    let tree = call(
        "copy_path",
        json!({"source": format!("{dir}/sub"), "destination": format!("{dir}/sub2")}),
    )
    .await;
    assert_eq!(tree["type"], "directory", "{tree}");
    let moved = call(
        "move_path",
        json!({"source": format!("{dir}/sub2/b.txt"), "destination": format!("{dir}/c.txt")}),
    )
    .await;
    assert_eq!(moved["ok"], true, "{moved}");
    let removed = call("remove_path", json!({"path": format!("{dir}/c.txt")})).await;
    assert_eq!(removed["type"], "file", "{removed}");
    let removed = call("remove_path", json!({"path": format!("{dir}/sub2/deeper")})).await;
    assert_eq!(removed["type"], "directory", "{removed}");

    let listed = call("list_directory", json!({"path": dir, "limit": 2})).await;
    let names: Vec<&str> = listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a.txt", "sub"], "{listed}");
    assert_eq!(
        (&listed["total"], &listed["truncated"]),
        (&json!(3), &json!(true)),
        "{listed}"
    );
    assert_eq!(listed["entries"][1]["type"], "directory", "{listed}");
    let edited = call(
        "edit_file",
        json!({"path": file, "old_text": "two", "new_text": "three"}),
    )
    .await;
    assert_eq!(edited["replacements"], 1, "{edited}");
    let hashed = exec(
        &mcp,
        &s,
        &format!("sha256sum {file}; stat -c %a {file}"),
        json!({}),
    )
    .await;
    let hashed = crate::text(&hashed["stdout"]);
    assert_eq!(
        hashed.split_whitespace().next(),
        edited["sha256"].as_str(),
        "{edited}"
    );
    assert!(hashed.ends_with("\n640\n"), "the mode is kept: {hashed}");
    let stale = json!({"path": file, "old_text": "one", "new_text": "1",
                       "expected_sha256": written["sha256"]});
    let stale = call("edit_file", stale).await;
    assert_eq!(code(&stale), "file_changed", "{stale}");
    assert_eq!(stale["error"]["sha256"], edited["sha256"], "{stale}");
    let ambiguous = call(
        "edit_file",
        json!({"path": file, "old_text": "e", "new_text": "E"}),
    )
    .await;
    assert_eq!(
        (code(&ambiguous), &ambiguous["error"]["count"]),
        ("edit_ambiguous_match", &json!(3)),
        "{ambiguous}"
    );
    // A tree goes without GNU's rm: from its leaves up, on its own file system.
    exec(
        &mcp,
        &s,
        &format!("ln -s {file} {dir}/sub/deeper/link"),
        json!({}),
    )
    .await;
    let tree = call(
        "remove_path",
        json!({"path": format!("{dir}/sub"), "recursive": true}),
    )
    .await;
    assert_eq!(tree["type"], "directory", "{tree}");
    std::fs::create_dir_all(&env.local_root).unwrap();
    std::fs::write(env.local_root.join("up.txt"), "up\n").unwrap();
    let down = call(
        "download_start",
        json!({"remote_path": file, "local_path": "down.txt"}),
    )
    .await;
    let said = missing(&down);
    assert!(
        said.contains("`rsync`") && said.contains("spool_output"),
        "{down}"
    );
    // A local_path wrong by its words is said first, whatever the host lacks.
    let outside = call(
        "download_start",
        json!({"remote_path": file, "local_path": "../down.txt"}),
    )
    .await;
    assert_eq!(code(&outside), "invalid_local_path", "{outside}");
    let up = call(
        "upload_start",
        json!({"local_path": "up.txt", "remote_path": format!("{dir}/up.txt")}),
    )
    .await;
    let said = missing(&up);
    assert!(
        said.contains("`rsync`") && said.contains("write_file"),
        "{up}"
    );

    // Nothing was changed by the refusals (the file is whole, no upload came), and the tree
    // is gone but not what its link pointed to.
    let left = exec(
        &mcp,
        &s,
        &format!("cat {file}; ls {dir}/up.txt; ls -d {dir}/sub"),
        json!({}),
    )
    .await;
    assert_eq!(left["stdout"], "one\nthree\n", "{left}");
    assert!(!env.local_root.join("down.txt").exists());
    exec(&mcp, &s, &format!("rm -r {dir}"), json!({})).await;
    mcp.close().await;
}

/// Without `sed -z` the daemon edits files of up to 1 MiB: one of exactly 1 MiB is edited, an
/// edit that would make it one byte larger is refused, and so is any edit of a file one byte
/// past the limit, naming it; the refusals change nothing.
#[tokio::test]
async fn edits_on_a_busybox_host_are_bounded_at_one_mib() {
    let (_env, mcp, s) = busybox_session().await;
    let dir = format!("/tmp/sshmcp-bb-{}", sshmcp_tests::process::unique_sleep(1));
    let file = format!("{dir}/big");
    let mib = 1 << 20;
    let made = format!(
        "mkdir -p {dir} && head -c {} /dev/zero | tr '\\0' a >{file} && printf Z >>{file}",
        mib - 1
    );
    assert_eq!(exec(&mcp, &s, &made, json!({})).await["exit_code"], 0);
    let edit = |old: &str, new: &str| {
        on_session(
            &mcp,
            &s,
            "edit_file",
            json!({"path": file, "old_text": old, "new_text": new}),
        )
    };
    let r = edit("Z", "Y").await;
    assert_eq!(r["replacements"], 1, "{r}");
    let r = edit("Y", "YY").await;
    assert_eq!(code(&r), "file_too_large", "{r}");
    exec(&mcp, &s, &format!("printf b >>{file}"), json!({})).await;
    let r = edit("Y", "X").await;
    assert!(missing(&r).contains("1 MiB"), "{r}");
    let left = exec(
        &mcp,
        &s,
        &format!("wc -c <{file}; tail -c 2 {file}; rm -r {dir}"),
        json!({}),
    )
    .await;
    assert_eq!(crate::text(&left["stdout"]), format!("{}\nYb", mib + 1));
    mcp.close().await;
}
