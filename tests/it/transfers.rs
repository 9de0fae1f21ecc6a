//! Transfers through the real binaries: rsync over the session's master, verified by SHA-256
//! on both ends, published whole inside the local root, and every escape refused.

use serde_json::{Value, json};
use sshmcp_tests::McpClient;
use sshmcp_tests::process::unique_sleep;

use crate::{code, connect_watcher, connected, exec, on_session};

type Session = (String, String);

/// Polls transfer_status until the transfer ended (a copy runs in rsync on its own schedule:
/// no event reaches an MCP client), for up to a minute.
async fn until_ended(mcp: &McpClient, s: &Session, id: &Value) -> Value {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let r = on_session(mcp, s, "transfer_status", json!({"operation_id": id})).await;
        assert_eq!(r["ok"], true, "{r}");
        if !["running", "verifying", "queued"].contains(&r["state"].as_str().unwrap()) {
            return r;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "the transfer never ended: {r}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

fn local_sha256(path: &std::path::Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

#[tokio::test]
async fn a_64_mib_download_arrives_verified_and_whole() {
    let (env, mcp, s) = connected().await;
    let remote = format!("/tmp/sshmcp-dl-{} file", unique_sleep(1));
    let made = exec(
        &mcp,
        &s,
        &format!("head -c 67108864 /dev/urandom > '{remote}' && sha256sum < '{remote}'"),
        json!({}),
    )
    .await;
    let remote_hash = made["stdout"]["data"].as_str().unwrap()[..64].to_string();
    let r = on_session(
        &mcp,
        &s,
        "download_start",
        json!({"remote_path": remote, "local_path": "dl/big.bin"}),
    )
    .await;
    assert_eq!(
        (&r["ok"], &r["total_bytes"]),
        (&json!(true), &json!(67108864)),
        "{r}"
    );
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    let target = env.local_root.join("dl/big.bin");
    assert_eq!(
        (&done["state"], &done["sha256"], &done["final_path"]),
        (
            &json!("completed"),
            &json!(remote_hash),
            &json!(target.display().to_string())
        ),
        "{done}"
    );
    assert_eq!(done["bytes_transferred"], 67108864);
    assert_eq!(local_sha256(&target), remote_hash);
    let partials = std::fs::read_dir(env.local_root.join(".sshmcp/partial"))
        .unwrap()
        .count();
    assert_eq!(partials, 0, "the partial became the file");
    // The same again is refused without overwrite, done with it.
    let again = json!({"remote_path": remote, "local_path": "dl/big.bin"});
    let r = on_session(&mcp, &s, "download_start", again.clone()).await;
    assert_eq!(code(&r), "local_path_exists");
    let mut over = again;
    over["overwrite"] = json!(true);
    let r = on_session(&mcp, &s, "download_start", over).await;
    assert_eq!(
        until_ended(&mcp, &s, &r["operation_id"]).await["state"],
        "completed"
    );
    let list = on_session(&mcp, &s, "transfer_list", json!({})).await;
    assert_eq!(list["transfers"].as_array().unwrap().len(), 2, "{list}");
    assert_eq!(list["transfers"][0]["operation_id"], r["operation_id"]);
    // Another session does not see it.
    let (watcher, w) = connect_watcher(&env).await;
    let other = on_session(
        &watcher,
        &w,
        "transfer_status",
        json!({"operation_id": r["operation_id"]}),
    )
    .await;
    assert_eq!(code(&other), "transfer_not_found");
    exec(&mcp, &s, &format!("rm -f '{remote}'"), json!({})).await;
    watcher.close().await;
    mcp.close().await;
}

#[tokio::test]
async fn destinations_that_leave_the_local_root_and_sources_that_are_no_file_are_refused() {
    let (env, mcp, s) = connected().await;
    std::fs::create_dir_all(&env.local_root).unwrap();
    std::os::unix::fs::symlink("/tmp", env.local_root.join("out")).unwrap();
    let remote = "/etc/hostname";
    for (local, expected) in [
        ("../x", "invalid_local_path"),
        ("/etc/x", "invalid_local_path"),
        ("out/x", "invalid_local_path"),
        (".sshmcp/x", "invalid_local_path"),
        ("a/../../x", "invalid_local_path"),
    ] {
        let r = on_session(
            &mcp,
            &s,
            "download_start",
            json!({"remote_path": remote, "local_path": local}),
        )
        .await;
        assert_eq!(code(&r), expected, "{local}: {r}");
    }
    for (remote, expected) in [
        ("/etc", "invalid_remote_type"),
        ("/nonexistent/x", "remote_path_not_found"),
    ] {
        let r = on_session(
            &mcp,
            &s,
            "download_start",
            json!({"remote_path": remote, "local_path": "y"}),
        )
        .await;
        assert_eq!(code(&r), expected, "{remote}: {r}");
    }
    let r = on_session(
        &mcp,
        &s,
        "transfer_status",
        json!({"operation_id": "tr-nope"}),
    )
    .await;
    assert_eq!(code(&r), "transfer_not_found");
    mcp.close().await;
}

/// A master killed mid-copy ends the transfer `failed` with `connection_lost`, and rsync's
/// ssh never opens a connection of its own: sshd saw one connection, the session's.
#[tokio::test]
async fn a_master_killed_mid_copy_fails_the_transfer_without_a_second_login() {
    let (env, mcp, s) = connected().await;
    let (remote, r) = a_copy_under_way(&mcp, &s, "sparse.bin").await;
    let list = mcp.call("session_list", json!({})).await;
    let master = list["sessions"][0]["master_pid"].as_i64().unwrap() as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(master),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(
        (&done["state"], &done["error"]["code"]),
        (&json!("failed"), &json!("connection_lost")),
        "{done}"
    );
    assert!(
        !env.local_root.join("sparse.bin").exists(),
        "nothing was published"
    );
    // rsync's ssh names the session's server: without `ProxyCommand=false` it would have
    // connected to it when the master went.
    assert_eq!(env.sshd.log_text().matches("Connection from").count(), 1);
    let (watcher, w) = connect_watcher(&env).await;
    exec(&watcher, &w, &format!("rm -f {remote}"), json!({})).await;
    watcher.close().await;
    mcp.close().await;
}

/// Starts a download of a fresh 1 GiB sparse file and waits until rsync's first bytes came;
/// returns the remote path and the answer of download_start.
async fn a_copy_under_way(mcp: &McpClient, s: &Session, local: &str) -> (String, Value) {
    let remote = format!("/tmp/sshmcp-sparse-{}", unique_sleep(1));
    exec(mcp, s, &format!("truncate -s 1G {remote}"), json!({})).await;
    let r = on_session(
        mcp,
        s,
        "download_start",
        json!({"remote_path": remote, "local_path": local}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    // Once bytes flow (rsync's progress; no event reaches the test).
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let st = on_session(
            mcp,
            s,
            "transfer_status",
            json!({"operation_id": r["operation_id"]}),
        )
        .await;
        if st["bytes_transferred"].as_u64().unwrap() > 0 {
            assert_eq!(st["state"], "running", "the copy must still run: {st}");
            return (remote, r);
        }
        assert!(
            std::time::Instant::now() < give_up,
            "no byte ever came: {st}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// A source changed under the copy (its first bytes, already sent) no longer matches what
/// arrived: `verification_failed`, nothing published.
#[tokio::test]
async fn a_source_changed_during_the_copy_fails_verification() {
    let (env, mcp, s) = connected().await;
    let (remote, r) = a_copy_under_way(&mcp, &s, "changed.bin").await;
    exec(
        &mcp,
        &s,
        &format!("printf changed | dd of={remote} conv=notrunc 2>/dev/null"),
        json!({}),
    )
    .await;
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(
        (&done["state"], &done["error"]["code"]),
        (&json!("failed"), &json!("verification_failed")),
        "{done}"
    );
    assert!(
        !env.local_root.join("changed.bin").exists(),
        "nothing was published"
    );
    exec(&mcp, &s, &format!("rm -f {remote}"), json!({})).await;
    mcp.close().await;
}

/// A cancelled copy keeps its partial; the same download again resumes from it and
/// completes verified.
#[tokio::test]
async fn a_cancelled_download_resumes_and_verifies() {
    let (env, mcp, s) = connected().await;
    let (remote, r) = a_copy_under_way(&mcp, &s, "resumed.bin").await;
    let c = on_session(
        &mcp,
        &s,
        "transfer_cancel",
        json!({"operation_id": r["operation_id"]}),
    )
    .await;
    assert_eq!(c["ok"], true, "{c}");
    assert_eq!(
        until_ended(&mcp, &s, &r["operation_id"]).await["state"],
        "cancelled"
    );
    let partials: Vec<_> = std::fs::read_dir(env.local_root.join(".sshmcp/partial"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(partials.len(), 1, "the partial stays");
    let again = on_session(
        &mcp,
        &s,
        "download_start",
        json!({"remote_path": remote, "local_path": "resumed.bin"}),
    )
    .await;
    let done = until_ended(&mcp, &s, &again["operation_id"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(
        std::fs::metadata(env.local_root.join("resumed.bin"))
            .unwrap()
            .len(),
        1 << 30
    );
    exec(&mcp, &s, &format!("rm -f {remote}"), json!({})).await;
    mcp.close().await;
}

/// A running transfer counts in `session_list`; disconnect cancels it, keeps its partial and
/// leaves no rsync behind.
#[tokio::test]
async fn disconnect_cancels_a_transfer_and_keeps_its_partial() {
    let (env, mcp, s) = connected().await;
    let (remote, _r) = a_copy_under_way(&mcp, &s, "cut.bin").await;
    let list = mcp.call("session_list", json!({})).await;
    assert_eq!(list["sessions"][0]["active_transfers"], 1, "{list}");
    let partial_dir = env.local_root.join(".sshmcp/partial");
    let partial = std::fs::read_dir(&partial_dir)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    assert_eq!(r["ok"], true, "{r}");
    // rsync is killed as the copy is cancelled; its end is the daemon's, not an event here.
    let needle = partial.display().to_string();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while sshmcp_tests::process::count_matching(&["rsync", &needle]) > 0 {
        assert!(
            std::time::Instant::now() < give_up,
            "rsync outlived the session"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(partial.exists(), "the partial stays for a later resume");
    std::fs::remove_file(&remote).ok();
    mcp.close().await;
}

/// The remote path is taken literally (no wildcard, a leading colon is a name) and a symlink
/// to a file is copied as the file; transfers started together stay within max-transfers.
#[tokio::test]
async fn odd_remote_names_are_literal_and_the_limit_holds_under_a_burst() {
    let (env, mcp, s) = crate::connected_with(
        &sshmcp_tests::SshdOptions::default(),
        &[("SSHMCP_MAX_TRANSFERS", "1")],
    )
    .await;
    let dir = format!("/tmp/sshmcp-odd-{}", unique_sleep(1));
    exec(
        &mcp,
        &s,
        &format!(
            "mkdir -p {dir} && cd {dir} && echo bracket > 'x[1]' && echo one > x1 && \
             echo target > t && ln -s t link && echo colon > ':c'"
        ),
        json!({}),
    )
    .await;
    for (remote, local, content) in [
        (format!("{dir}/x[1]"), "b.txt", "bracket\n"),
        (format!("{dir}/link"), "l.txt", "target\n"),
    ] {
        let r = on_session(
            &mcp,
            &s,
            "download_start",
            json!({"remote_path": remote, "local_path": local}),
        )
        .await;
        let done = until_ended(&mcp, &s, &r["operation_id"]).await;
        assert_eq!(done["state"], "completed", "{remote}: {done}");
        assert_eq!(
            std::fs::read_to_string(env.local_root.join(local)).unwrap(),
            content
        );
    }
    let r = on_session(
        &mcp,
        &s,
        "download_start",
        json!({"remote_path": ":c", "local_path": "c.txt", "remote_path_encoding": "utf-8"}),
    )
    .await;
    // Relative to the login directory: there is no `:c` there.
    assert_eq!(code(&r), "remote_path_not_found", "{r}");
    // With one copy under way, a burst of starts is refused whole: the limit is one.
    let (sparse, running) = a_copy_under_way(&mcp, &s, "running.bin").await;
    let mut pending = Vec::new();
    for i in 0..4 {
        let args = json!({"session_id": s.0, "session_key": s.1,
                          "remote_path": format!("{dir}/t"), "local_path": format!("burst{i}")});
        pending.push(mcp.start_call("download_start", args).await.1);
    }
    for rx in pending {
        let r = sshmcp_tests::mcp::answer(rx).await;
        assert_eq!(code(&r), "transfer_limit_reached", "{r}");
    }
    on_session(
        &mcp,
        &s,
        "transfer_cancel",
        json!({"operation_id": running["operation_id"]}),
    )
    .await;
    assert_eq!(
        until_ended(&mcp, &s, &running["operation_id"]).await["state"],
        "cancelled"
    );
    exec(&mcp, &s, &format!("rm -f {sparse}"), json!({})).await;
    exec(&mcp, &s, &format!("rm -rf {dir}"), json!({})).await;
    mcp.close().await;
}
