//! Transfers through the real binaries: rsync over the session's master, verified by SHA-256
//! on both ends, published whole inside the local root, and every escape refused.

use serde_json::{Value, json};
use sshmcp_tests::McpClient;
use sshmcp_tests::process::unique_sleep;

use crate::{code, connect_watcher, connected, exec, fresh_dir, on_session, remote_out};

type Session = (String, String);

/// Polls transfer_status until the transfer ended (a copy runs in rsync on its own schedule:
/// no event reaches an MCP client), for up to a minute.
pub(crate) async fn until_ended(mcp: &McpClient, s: &Session, id: &Value) -> Value {
    // One call: transfer_status answers when the transfer ends (60 s at most here).
    let args = json!({"operation_id": id, "wait_seconds": 60});
    let r = on_session(mcp, s, "transfer_status", args).await;
    assert_eq!(r["ok"], true, "{r}");
    let state = r["state"].as_str().unwrap();
    assert!(
        !["running", "verifying", "queued"].contains(&state),
        "the transfer never ended: {r}"
    );
    r
}

/// The transfer's report now (transfer_status without a wait).
async fn status_now(mcp: &McpClient, s: &Session, id: &Value) -> Value {
    on_session(mcp, s, "transfer_status", json!({"operation_id": id})).await
}

fn local_sha256(path: &std::path::Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

/// Seconds from `from` to `to`, two of an answer's timestamps.
fn seconds_between(from: &Value, to: &Value) -> f64 {
    let at = |t: &Value| sshmcp_proto::time::parse_rfc3339(t.as_str().unwrap()).unwrap();
    at(to).duration_since(at(from)).unwrap().as_secs_f64()
}

/// A transfer that waited for a channel gives the rate of its copy, not of its wait: queued
/// for a second behind seven commands, its copy ran a second less than the time from
/// `started_at` to `ended_at`, and its rate says so.
#[tokio::test]
async fn a_transfer_that_waited_for_a_channel_gives_its_copys_rate() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "queued").await;
    exec(
        &mcp,
        &s,
        &format!("head -c 4194304 /dev/urandom > {dir}/f"),
        json!({}),
    )
    .await;
    let secs = unique_sleep(300);
    let handles = crate::commands::holding_every_slot(&mcp, &s, &secs).await;
    let r = on_session(
        &mcp,
        &s,
        "download_start",
        json!({"remote_path": format!("{dir}/f"), "local_path": "queued.bin"}),
    )
    .await;
    // The wait measured: a second, queued the whole time, the last look after it.
    let asked = std::time::Instant::now();
    loop {
        let over = asked.elapsed() >= std::time::Duration::from_secs(1);
        let st = status_now(&mcp, &s, &r["operation_id"]).await;
        assert_eq!(st["state"], "queued", "{st}");
        if over {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for handle in &handles {
        crate::commands::killed(&mcp, &s, handle).await;
    }
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    // The copy ran at most `whole` less the second it was seen queued (less the two
    // timestamps' millisecond cuts): its rate is at least the bytes over that.
    let whole = seconds_between(&done["started_at"], &done["ended_at"]);
    let rate = done["rate"].as_f64().unwrap();
    assert!(
        rate * (whole - 0.998) >= 4_194_304.0,
        "{rate} B/s over {whole} s: {done}"
    );
    mcp.close().await;
}

#[tokio::test]
async fn a_64_mib_download_arrives_verified_and_whole() {
    let (env, mcp, s) = connected().await;
    let remote = crate::TestPath::new(format!("/tmp/sshmcp-dl-{} file", unique_sleep(1)));
    let made = exec(
        &mcp,
        &s,
        &format!("head -c 67108864 /dev/urandom > '{remote}' && sha256sum < '{remote}'"),
        json!({}),
    )
    .await;
    let remote_hash = crate::text(&made["stdout"])[..64].to_string();
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
    // `wait_seconds` exactly at its limit, on an ended transfer, answers at once; past it is
    // refused.
    let id = &r["operation_id"];
    for (wait, ok) in [(300.0, true), (300.01, false)] {
        let args = json!({"operation_id": id, "wait_seconds": wait});
        let status = on_session(&mcp, &s, "transfer_status", args).await;
        match ok {
            true => assert_eq!(status["state"], "completed", "{status}"),
            false => assert_eq!(code(&status), "invalid_arguments", "{status}"),
        }
    }
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
    let other = status_now(&watcher, &w, &r["operation_id"]).await;
    assert_eq!(code(&other), "transfer_not_found");
    exec(&mcp, &s, &format!("rm -f '{remote}'"), json!({})).await;
    watcher.close().await;
    mcp.close().await;
}

/// A Mac whose launcher's PATH finds only the rsync macOS ships (openrsync, or 2.6.9): a
/// transfer says at once what to install, lists nothing, and once rsync 3.1 or later is
/// there, runs without a daemon restart.
#[tokio::test]
async fn with_only_the_rsync_macos_ships_a_transfer_says_what_to_install() {
    let bin = tempfile::tempdir().unwrap();
    sshmcp_tests::local_tools::link_tools(bin.path(), &["ssh"]);
    sshmcp_tests::local_tools::write_macos_rsync(bin.path());
    let path = bin.path().to_str().unwrap();
    let (env, mcp, s) = crate::connected_with(&Default::default(), &[("PATH", path)]).await;
    let remote = format!("/tmp/sshmcp-macos-rsync-{}", unique_sleep(1));
    remote_out(&mcp, &s, &format!("printf 'from the host' > {remote}")).await;
    let args = json!({"remote_path": remote, "local_path": "macos/file"});
    let r = on_session(&mcp, &s, "download_start", args.clone()).await;
    assert_eq!(code(&r), "transfer_failed", "{r}");
    let said = r["error"]["message"].as_str().unwrap();
    let old = format!("only {}/rsync (2.6)", bin.path().display());
    assert!(
        said.contains("no rsync 3.1 or later") && said.contains(&old),
        "{r}"
    );
    assert!(said.contains("macOS: brew install rsync"), "{r}");
    let listed = on_session(&mcp, &s, "transfer_list", json!({})).await;
    assert_eq!(listed["transfers"], json!([]), "{listed}");

    std::fs::remove_file(bin.path().join("rsync")).unwrap();
    sshmcp_tests::local_tools::link_tools(bin.path(), &["rsync"]);
    let r = on_session(&mcp, &s, "download_start", args).await;
    assert_eq!(r["ok"], true, "{r}");
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    let copied = std::fs::read(env.local_root.join("macos/file")).unwrap();
    assert_eq!(copied, b"from the host");
    remote_out(&mcp, &s, &format!("rm -f {remote}")).await;
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
    let unreadable = fresh_dir(&mcp, &s, "unreadable").await;
    remote_out(
        &mcp,
        &s,
        &format!("echo secret > {unreadable}/f; chmod 000 {unreadable}/f"),
    )
    .await;
    for (remote, expected) in [
        ("/etc", "invalid_remote_type"),
        ("/nonexistent/x", "remote_path_not_found"),
        (&format!("{unreadable}/f"), "remote_permission_denied"),
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
    let r = status_now(&mcp, &s, &json!("tr-nope")).await;
    assert_eq!(code(&r), "transfer_not_found");
    mcp.close().await;
}

/// A master killed mid-copy ends the transfer `failed` with `connection_lost`, and rsync's
/// ssh never opens a connection of its own: sshd saw one connection, the session's.
#[tokio::test]
async fn a_master_killed_mid_copy_fails_the_transfer_without_a_second_login() {
    let (env, mcp, s) = connected().await;
    let (remote, r) = a_download_under_way(&mcp, &s, "sparse.bin", false).await;
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
    // Counted by the line sshd logs as a connection starts: a write to the killed master can
    // also log "Broken pipe" for "Connection from user ...".
    let connections = env.sshd.log_text();
    let connections = connections
        .lines()
        .filter(|l| l.starts_with("Connection from "))
        .count();
    assert_eq!(connections, 1);
    let (watcher, w) = connect_watcher(&env).await;
    exec(&watcher, &w, &format!("rm -f {remote}"), json!({})).await;
    watcher.close().await;
    mcp.close().await;
}

/// Starts a download of a fresh 1 GiB remote file (pseudo-random with `random`, else sparse)
/// and waits until rsync's first bytes came; returns the remote path and the answer of
/// download_start.
async fn a_download_under_way(
    mcp: &McpClient,
    s: &Session,
    local: &str,
    random: bool,
) -> (crate::TestPath, Value) {
    let remote = crate::TestPath::new(format!("/tmp/sshmcp-sparse-{}", unique_sleep(1)));
    let fill = if random {
        " && shred -n 1 "
    } else {
        " && true "
    };
    remote_out(mcp, s, &format!("truncate -s 1G {remote}{fill}{remote}")).await;
    let r = on_session(
        mcp,
        s,
        "download_start",
        json!({"remote_path": remote, "local_path": local}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    until_bytes_flow(mcp, s, &r).await;
    (remote, r)
}

/// A source changed under the copy (its first bytes, already sent) no longer matches what
/// arrived: `verification_failed`, nothing published.
#[tokio::test]
async fn a_source_changed_during_the_copy_fails_verification() {
    let (env, mcp, s) = connected().await;
    let (remote, r) = a_download_under_way(&mcp, &s, "changed.bin", false).await;
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
    let partials = std::fs::read_dir(env.local_root.join(".sshmcp/partial")).unwrap();
    assert_eq!(
        partials.count(),
        0,
        "the spoiled copy is not kept to resume from"
    );
    exec(&mcp, &s, &format!("rm -f {remote}"), json!({})).await;
    mcp.close().await;
}

/// Waits up to `secs` until no rsync writes `partial` (its end is no event a test can wait
/// on), else fails with `why`.
async fn until_no_rsync_writes(partial: &std::path::Path, secs: u64, why: &str) {
    let needle = partial.display().to_string();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while sshmcp_tests::process::count_matching(&["rsync", &needle]) > 0 {
        assert!(std::time::Instant::now() < give_up, "{why}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A transfer the person cancels (`sshmcp kill`) says so, in its status and in the list:
/// an agent must not take it for a failure and start it again unasked.
#[tokio::test]
async fn a_transfer_the_person_cancels_says_so() {
    let (env, mcp, s) = connected().await;
    let (_remote, r) = a_download_under_way(&mcp, &s, "by-person.bin", false).await;
    let out = env.cli(&["kill", "--yes", r["operation_id"].as_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let ended = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(
        (&ended["state"], &ended["stopped_by"]),
        (&json!("cancelled"), &json!("person")),
        "{ended}"
    );
    let listed = on_session(&mcp, &s, "transfer_list", json!({})).await;
    assert_eq!(listed["transfers"][0]["stopped_by"], "person", "{listed}");
    mcp.close().await;
}

/// A cancelled copy keeps its partial; the same download again resumes from it and
/// completes verified.
#[tokio::test]
async fn a_cancelled_download_resumes_and_verifies() {
    let (env, mcp, s) = connected().await;
    let (remote, r) = a_download_under_way(&mcp, &s, "resumed.bin", true).await;
    let c = on_session(
        &mcp,
        &s,
        "transfer_cancel",
        json!({"operation_id": r["operation_id"]}),
    )
    .await;
    assert_eq!(c["ok"], true, "{c}");
    let cancelled = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(
        (&cancelled["state"], &cancelled["stopped_by"]),
        (&json!("cancelled"), &Value::Null),
        "the agent's own cancel: {cancelled}"
    );
    let partials: Vec<_> = std::fs::read_dir(env.local_root.join(".sshmcp/partial"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(partials.len(), 1, "the partial stays");
    let arrived = partials[0].metadata().unwrap().len();
    // The report counts at least what arrived, however far rsync's own progress lagged.
    let counted = cancelled["bytes_transferred"].as_u64().unwrap_or(0);
    assert!(counted >= arrived, "{arrived} bytes arrived: {cancelled}");
    let again = on_session(
        &mcp,
        &s,
        "download_start",
        json!({"remote_path": remote, "local_path": "resumed.bin"}),
    )
    .await;
    let done = until_ended(&mcp, &s, &again["operation_id"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    // All that had arrived was kept, but its last block (rsync's blocks are 32 KiB here).
    let reused = done["reused_bytes"].as_u64().unwrap_or(0);
    assert!(
        reused <= arrived && reused + (1 << 20) > arrived,
        "{arrived} bytes had arrived: {done}"
    );
    let published = std::fs::metadata(env.local_root.join("resumed.bin")).unwrap();
    assert_eq!(published.len(), 1 << 30);
    // The mode an uninterrupted copy gets (the source's 0644, less the umask 022), not the
    // 0600 rsync gives a file until its copy completes.
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&published.permissions()) & 0o777,
        0o644
    );
    exec(&mcp, &s, &format!("rm -f {remote}"), json!({})).await;
    mcp.close().await;
}

/// A copy cancelled part-way, then a source that shrank below what had arrived (a rebuilt
/// file, a rotated log): the partial is no prefix of the new source, and rsync would leave it
/// as it is. It is dropped before the copy, so the first retry completes, each way.
#[tokio::test]
async fn a_partial_longer_than_its_shrunk_source_is_dropped_before_the_copy() {
    // A user of its own: no other test's rsync runs as it.
    let user = sshmcp_tests::users::user_with_shell("sshmcp-shrunk", "/bin/bash");
    let (env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let (dir, r) = an_upload_under_way(&env, &mcp, &s, "app.bin", false).await;
    cancel_and_wait(&mcp, &s, &r).await;
    let arrived = remote_out(&mcp, &s, &format!("stat -c %s {dir}/.sshmcp-*.part")).await;
    assert!(
        arrived.trim().parse::<u64>().unwrap() > 10,
        "the partial must be longer than the new source: {arrived}"
    );
    std::fs::write(env.local_root.join("app.bin"), "new build\n").unwrap();
    let done = upload(
        &mcp,
        &s,
        json!({"local_path": "app.bin", "remote_path": format!("{dir}/app.bin")}),
    )
    .await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["reused_bytes"], json!(null), "0: {done}");
    let there = remote_out(&mcp, &s, &format!("ls -A {dir}; cat {dir}/app.bin")).await;
    assert_eq!(there, "app.bin\nnew build\n");

    let (remote, r) = a_download_under_way(&mcp, &s, "log.bin", false).await;
    cancel_and_wait(&mcp, &s, &r).await;
    let partials: Vec<_> = std::fs::read_dir(env.local_root.join(".sshmcp/partial"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(partials.len(), 1, "the partial stays");
    assert!(
        partials[0].metadata().unwrap().len() > 8,
        "the partial must be longer than the new source"
    );
    remote_out(&mcp, &s, &format!("printf 'rotated\\n' > {remote}")).await;
    let again = on_session(
        &mcp,
        &s,
        "download_start",
        json!({"remote_path": remote, "local_path": "log.bin"}),
    )
    .await;
    let done = until_ended(&mcp, &s, &again["operation_id"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(
        std::fs::read_to_string(env.local_root.join("log.bin")).unwrap(),
        "rotated\n"
    );
    remote_out(&mcp, &s, &format!("rm -r {dir} {remote}")).await;
    mcp.close().await;
}

/// A partial with a second name (a publish by link, cut off before it removed the partial,
/// leaves the published file so) is never resumed: rsync would write into the other file.
#[tokio::test]
async fn a_partial_with_a_second_link_is_never_written_into() {
    // A user of its own: no other test's rsync runs as it.
    let user = sshmcp_tests::users::user_with_shell("sshmcp-linked", "/bin/bash");
    let (env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let (dir, r) = an_upload_under_way(&env, &mcp, &s, "big.bin", false).await;
    cancel_and_wait(&mcp, &s, &r).await;
    let linked = format!("cd {dir} && ln .sshmcp-*.part other && stat -c %s other");
    let before = remote_out(&mcp, &s, &linked).await;
    let done = upload(
        &mcp,
        &s,
        json!({"local_path": "big.bin", "remote_path": format!("{dir}/big.bin")}),
    )
    .await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["reused_bytes"], json!(null), "0: {done}");
    let after = remote_out(&mcp, &s, &format!("stat -c %s {dir}/other {dir}/big.bin")).await;
    assert_eq!(
        after,
        format!("{before}1073741824\n"),
        "the other name is untouched"
    );
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// A destination on a file system of its own inside the local root (a mounted disk) takes no
/// rename from the private directory: the verified copy goes over and is moved into place
/// whole, with or without `overwrite`. A publish that cannot finish leaves nothing half-made:
/// a full disk fails the transfer, keeps the partial and leaves no hidden file; a file
/// planted under the hidden name (a hard link to another of the user's files, a FIFO) is
/// neither written into nor waited on.
#[tokio::test]
async fn a_download_into_a_mount_inside_the_root_is_published_whole_or_not_at_all() {
    let (env, mcp, s) = connected().await;
    let remote = crate::TestPath::new(format!("/tmp/sshmcp-xdevfull-{}", unique_sleep(1)));
    // Twice the small disk's size.
    remote_out(&mcp, &s, &format!("head -c 2097152 /dev/zero > {remote}")).await;
    std::fs::create_dir_all(&env.local_root).unwrap();
    let mnt = env.local_root.join("mnt");
    let _disk = sshmcp_tests::disk::SmallDisk::mount(&mnt);
    let args = json!({"remote_path": remote, "local_path": "mnt/data"});
    let r = on_session(&mcp, &s, "download_start", args.clone()).await;
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(
        (&done["state"], &done["error"]["code"]),
        (&json!("failed"), &json!("transfer_failed")),
        "{done}"
    );
    assert_eq!(std::fs::read_dir(&mnt).unwrap().count(), 0, "nothing left");
    let partial = std::fs::read_dir(env.local_root.join(".sshmcp/partial"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .next()
        .expect("the partial stays");
    let staged = mnt.join(format!(
        ".sshmcp-{}.publish",
        partial.trim_end_matches(".part")
    ));
    // The same pair again, with a small source: the hidden name is the same.
    remote_out(&mcp, &s, &format!("printf 'small\\n' > {remote}")).await;
    std::fs::write(mnt.join("victim"), "mine").unwrap();
    std::fs::hard_link(mnt.join("victim"), &staged).unwrap();
    let r = on_session(&mcp, &s, "download_start", args.clone()).await;
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(
        std::fs::read_to_string(mnt.join("data")).unwrap(),
        "small\n"
    );
    assert_eq!(std::fs::read_to_string(mnt.join("victim")).unwrap(), "mine");
    let partials = std::fs::read_dir(env.local_root.join(".sshmcp/partial")).unwrap();
    assert_eq!(partials.count(), 0, "the partial is gone");
    nix::unistd::mkfifo(&staged, nix::sys::stat::Mode::S_IRWXU).unwrap();
    remote_out(&mcp, &s, &format!("printf 'again\\n' > {remote}")).await;
    let mut args = args;
    args["overwrite"] = json!(true);
    let r = on_session(&mcp, &s, "download_start", args).await;
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(
        std::fs::read_to_string(mnt.join("data")).unwrap(),
        "again\n"
    );
    let names: Vec<_> = std::fs::read_dir(&mnt)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names.len(), 2, "data and victim only: {names:?}");
    mcp.close().await;
}

/// A running transfer counts in `session_list`; disconnect cancels it, keeps its partial and
/// leaves no rsync behind.
#[tokio::test]
async fn disconnect_cancels_a_transfer_and_keeps_its_partial() {
    let (env, mcp, s) = connected().await;
    let (remote, _r) = a_download_under_way(&mcp, &s, "cut.bin", false).await;
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
    // rsync is killed as the copy is cancelled.
    until_no_rsync_writes(&partial, 15, "rsync outlived the session").await;
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
    let dir = crate::TestPath::new(format!("/tmp/sshmcp-odd-{}", unique_sleep(1)));
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
    // A relative name with a leading colon is a file of the login directory, not rsync's
    // daemon syntax.
    let colon = format!(":c-{}", unique_sleep(1));
    remote_out(&mcp, &s, &format!("echo colon > '{colon}'")).await;
    let r = on_session(
        &mcp,
        &s,
        "download_start",
        json!({"remote_path": colon, "local_path": "c.txt", "remote_path_encoding": "utf-8"}),
    )
    .await;
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(
        std::fs::read_to_string(env.local_root.join("c.txt")).unwrap(),
        "colon\n"
    );
    remote_out(&mcp, &s, &format!("rm './{colon}'")).await;
    // With one copy under way, a burst of starts is refused whole: the limit is one.
    let (sparse, running) = a_download_under_way(&mcp, &s, "running.bin", false).await;
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

/// Writes `bytes` random bytes to `path` (its directory made).
fn random_file(path: &std::path::Path, bytes: u64) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let out = std::fs::File::create(path).unwrap();
    let status = std::process::Command::new("head")
        .args(["-c", &bytes.to_string(), "/dev/urandom"])
        .stdout(out)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Starts an upload and waits for its end.
async fn upload(mcp: &McpClient, s: &Session, args: Value) -> Value {
    let r = on_session(mcp, s, "upload_start", args).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["direction"], "upload", "{r}");
    until_ended(mcp, s, &r["operation_id"]).await
}

#[tokio::test]
async fn a_64_mib_upload_arrives_verified_and_replaces_only_with_overwrite() {
    let (env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "up").await;
    let local = env.local_root.join("up/big.bin");
    random_file(&local, 64 << 20);
    let hash = local_sha256(&local);
    let remote = format!("{dir}/big file");
    let done = upload(
        &mcp,
        &s,
        json!({"local_path": "up/big.bin", "remote_path": remote}),
    )
    .await;
    assert_eq!(
        (&done["state"], &done["sha256"], &done["final_path"]),
        (&json!("completed"), &json!(hash), &json!(remote)),
        "{done}"
    );
    assert_eq!(
        (&done["bytes_transferred"], &done["reused_bytes"]),
        (&json!(64 << 20), &json!(null)),
        "{done}"
    );
    let there = remote_out(&mcp, &s, &format!("sha256sum < '{remote}'; ls -A {dir}")).await;
    assert_eq!(
        there,
        format!("{hash}  -\nbig file\n"),
        "no partial is left"
    );
    // The same again is refused without overwrite, and replaces the file with it.
    let small = env.local_root.join("up/small.txt");
    std::fs::write(&small, "new\n").unwrap();
    let again = json!({"local_path": "up/small.txt", "remote_path": remote});
    let r = on_session(&mcp, &s, "upload_start", again.clone()).await;
    assert_eq!(code(&r), "remote_path_exists", "{r}");
    let mut over = again;
    over["overwrite"] = json!(true);
    assert_eq!(upload(&mcp, &s, over).await["state"], "completed");
    let there = remote_out(&mcp, &s, &format!("cat '{remote}'; ls -A {dir}")).await;
    assert_eq!(there, "new\nbig file\n");
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// On a server allowing three sessions, held by a running command, the channel kept for
/// kills and the channel the upload's checks left waiting: sshd refuses rsync's channel, and
/// the upload tries again (the waiting channel gives its session back) instead of failing,
/// and arrives whole while the command still runs.
#[tokio::test]
async fn an_upload_beside_a_command_on_a_server_with_three_sessions_arrives() {
    let opts = sshmcp_tests::SshdOptions::allowing_sessions(3);
    let env = sshmcp_tests::TestEnv::with(&opts, &[]);
    let mcp = env.mcp().await;
    let s = crate::connect(&mcp).await;
    let dir = fresh_dir(&mcp, &s, "up3").await;
    let local = env.local_root.join("up3/small.bin");
    random_file(&local, 1 << 20);
    // The command runs until the test lets it go (the host is this machine).
    let go = std::path::PathBuf::from(format!("{}-go", env.root.path().display()));
    let wait = format!("while [ ! -e '{}' ]; do sleep 0.05; done", go.display());
    let args = json!({"session_id": s.0, "session_key": s.1, "command": wait, "timeout": 60});
    let running = mcp.start_call("exec", args).await.1;
    let busy = |row: &Value| row["active_commands"] == 1;
    assert!(crate::first_session_until(&mcp, busy).await);
    let remote = format!("{dir}/small.bin");
    let done = upload(
        &mcp,
        &s,
        json!({"local_path": "up3/small.bin", "remote_path": remote}),
    )
    .await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["sha256"], local_sha256(&local), "{done}");
    assert!(env.daemon_log_shows("sshd refused rsync's channel; trying again"));
    std::fs::write(&go, "").unwrap();
    assert_eq!(sshmcp_tests::mcp::answer(running).await["exit_code"], 0);
    std::fs::remove_file(&go).unwrap();
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// Starts an upload of a fresh 1 GiB local file (pseudo-random with `random`, else sparse)
/// into a fresh remote directory and waits until rsync's first bytes went; returns the
/// directory and the answer.
async fn an_upload_under_way(
    env: &sshmcp_tests::TestEnv,
    mcp: &McpClient,
    s: &Session,
    name: &str,
    random: bool,
) -> (crate::TestPath, Value) {
    let dir = fresh_dir(mcp, s, "upsparse").await;
    std::fs::create_dir_all(&env.local_root).unwrap();
    let path = env.local_root.join(name);
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(1 << 30).unwrap();
    if random {
        sshmcp_tests::process::run(
            std::process::Command::new("shred")
                .args(["-n", "1"])
                .arg(&path),
            "coreutils",
        );
    }
    let r = on_session(
        mcp,
        s,
        "upload_start",
        json!({"local_path": name, "remote_path": format!("{dir}/{name}")}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    until_bytes_flow(mcp, s, &r).await;
    (dir, r)
}

/// Cancels the transfer `r` started: the answer comes once the copy stopped, and says so.
async fn cancel_and_wait(mcp: &McpClient, s: &Session, r: &Value) -> Value {
    let cancelled = on_session(
        mcp,
        s,
        "transfer_cancel",
        json!({"operation_id": r["operation_id"]}),
    )
    .await;
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    cancelled
}

/// Waits until a transfer's first bytes went (rsync's progress; no event reaches the test).
async fn until_bytes_flow(mcp: &McpClient, s: &Session, r: &Value) {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let st = status_now(mcp, s, &r["operation_id"]).await;
        if st["bytes_transferred"].as_u64().unwrap_or(0) > 0 {
            assert_eq!(st["state"], "running", "the copy must still run: {st}");
            return;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "no byte ever came: {st}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// A cancelled upload keeps its hidden partial beside the destination; the same upload again
/// keeps what arrived (rsync's matched data) and completes verified.
#[tokio::test]
async fn a_cancelled_upload_resumes_from_what_arrived() {
    // A user of its own: no other test's rsync runs as it.
    let user = sshmcp_tests::users::user_with_shell("sshmcp-upcancel", "/bin/bash");
    let (env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let (dir, r) = an_upload_under_way(&env, &mcp, &s, "resumed.bin", true).await;
    let cancelled = cancel_and_wait(&mcp, &s, &r).await;
    // The remote rsync is gone too (it could write into the partial under a retry).
    let marked = "grep -l SSHMCP_RSYNC= /proc/[0-9]*/environ 2>/dev/null; true";
    assert_eq!(
        remote_out(&mcp, &s, marked).await,
        "",
        "a remote rsync is left"
    );
    let left = remote_out(&mcp, &s, &format!("ls -A {dir}")).await;
    assert!(
        left.starts_with(".sshmcp-") && left.ends_with(".part\n") && left.lines().count() == 1,
        "the partial stays, hidden: {left:?}"
    );
    let arrived: u64 = remote_out(&mcp, &s, &format!("stat -c %s {dir}/{}", left.trim()))
        .await
        .trim()
        .parse()
        .unwrap();
    // The report counts what arrived, not rsync's last progress line, which lags behind.
    assert_eq!(cancelled["bytes_transferred"], arrived, "{cancelled}");
    let done = upload(
        &mcp,
        &s,
        json!({"local_path": "resumed.bin", "remote_path": format!("{dir}/resumed.bin")}),
    )
    .await;
    assert_eq!(done["state"], "completed", "{done}");
    let reused = done["reused_bytes"].as_u64().unwrap_or(0);
    // All that had arrived was kept, but its last block (rsync's blocks are 32 KiB here).
    assert!(
        reused <= arrived && reused + (1 << 20) > arrived,
        "{arrived} bytes had arrived: {done}"
    );
    let there = remote_out(
        &mcp,
        &s,
        &format!("ls -A {dir}; stat -c %s {dir}/resumed.bin"),
    )
    .await;
    assert_eq!(there, "resumed.bin\n1073741824\n");
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// An upload's partial has a name other users of the host can work out. In a sticky
/// directory all may write (as /tmp), a file of that name that another user made is in the
/// way: the upload fails and nothing of the user's goes into it or is published through it.
/// Where the user may remove it, it goes, and the copy arrives in the user's own file, with
/// the source's mode less the host's umask.
#[tokio::test]
async fn a_partial_another_user_made_is_never_written_into_nor_published() {
    let user = sshmcp_tests::users::user_with_shell("sshmcp-upowner", "/bin/bash");
    let (env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let (dir, r) = an_upload_under_way(&env, &mcp, &s, "owned.bin", false).await;
    cancel_and_wait(&mcp, &s, &r).await;
    let partial = remote_out(&mcp, &s, &format!("ls -A {dir}")).await;
    let partial = format!("{dir}/{}", partial.trim());
    // As root: the partial becomes another user's, writable by all, in a sticky directory of
    // root's.
    let root_does = |command: String| {
        sshmcp_tests::process::run(
            std::process::Command::new("sh").args(["-c", &command]),
            "coreutils",
        )
    };
    root_does(format!(
        "chown nobody '{partial}' && chmod 666 '{partial}' && chown root {dir} && chmod 1777 {dir}"
    ));
    let args = json!({"local_path": "owned.bin", "remote_path": format!("{dir}/owned.bin")});
    let done = upload(&mcp, &s, args.clone()).await;
    assert_eq!(
        (&done["state"], &done["error"]["code"]),
        (&json!("failed"), &json!("transfer_failed")),
        "{done}"
    );
    assert!(
        done["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in the way"),
        "{done}"
    );
    let there = remote_out(
        &mcp,
        &s,
        &format!("ls -A {dir}; stat -c '%U %s' '{partial}'"),
    )
    .await;
    assert_eq!(
        there,
        format!(
            "{}\nnobody {}\n",
            partial.rsplit('/').next().unwrap(),
            std::fs::metadata(&partial).unwrap().len()
        ),
        "nothing published, the other user's file untouched"
    );
    // The user's own directory: the other user's file is removed, and the copy arrives.
    root_does(format!("chown {user} {dir} && chmod 755 {dir}"));
    std::fs::set_permissions(
        env.local_root.join("owned.bin"),
        std::os::unix::fs::PermissionsExt::from_mode(0o766),
    )
    .unwrap();
    let done = upload(&mcp, &s, args).await;
    assert_eq!(
        (&done["state"], &done["reused_bytes"]),
        (&json!("completed"), &json!(null)),
        "{done}"
    );
    let there = remote_out(
        &mcp,
        &s,
        &format!("ls -A {dir}; stat -c '%U %a' {dir}/owned.bin"),
    )
    .await;
    // The source's mode less the host's umask (022).
    assert_eq!(there, format!("owned.bin\n{user} 744\n"));
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// A destination that another process creates after the upload's check, while the copy is
/// being verified: the link fails, the partial is removed, and only then the transfer ends
/// `remote_path_exists`; the other file is never replaced.
#[tokio::test]
async fn a_destination_created_during_an_upload_is_never_replaced() {
    let (user, hook) = sshmcp_tests::users::user_with_hashing_hook("sshmcp-hookrace");
    let (env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let dir = fresh_dir(&mcp, &s, "race").await;
    std::fs::write(&hook, format!("printf theirs > {dir}/dest\n")).unwrap();
    std::fs::create_dir_all(&env.local_root).unwrap();
    std::fs::write(env.local_root.join("mine.txt"), "mine").unwrap();
    let done = upload(
        &mcp,
        &s,
        json!({"local_path": "mine.txt", "remote_path": format!("{dir}/dest")}),
    )
    .await;
    assert_eq!(
        (&done["state"], &done["error"]["code"]),
        (&json!("failed"), &json!("remote_path_exists")),
        "{done}"
    );
    let there = remote_out(&mcp, &s, &format!("ls -A {dir}; cat {dir}/dest")).await;
    assert_eq!(there, "dest\ntheirs", "no partial left, nothing replaced");
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// A directory that takes the destination's name during an upload with `overwrite` is no
/// file to replace: `invalid_remote_type`, the directory untouched, the partial kept.
#[tokio::test]
async fn a_directory_in_the_destinations_place_is_never_replaced() {
    let (user, hook) = sshmcp_tests::users::user_with_hashing_hook("sshmcp-hookdir");
    let (env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let dir = fresh_dir(&mcp, &s, "dirrace").await;
    remote_out(&mcp, &s, &format!("echo old > {dir}/dest")).await;
    std::fs::write(
        &hook,
        format!("rm -f {dir}/dest; mkdir {dir}/dest; echo theirs > {dir}/dest/f\n"),
    )
    .unwrap();
    std::fs::create_dir_all(&env.local_root).unwrap();
    std::fs::write(env.local_root.join("mine.txt"), "mine").unwrap();
    let done = upload(
        &mcp,
        &s,
        json!({"local_path": "mine.txt", "remote_path": format!("{dir}/dest"), "overwrite": true}),
    )
    .await;
    assert_eq!(
        (&done["state"], &done["error"]["code"]),
        (&json!("failed"), &json!("invalid_remote_type")),
        "{done}"
    );
    let there = remote_out(&mcp, &s, &format!("cd {dir} && LC_ALL=C ls -A; cat dest/f")).await;
    let mut names = there.lines();
    assert!(
        names
            .next()
            .is_some_and(|n| n.starts_with(".sshmcp-") && n.ends_with(".part")),
        "the partial stays: {there:?}"
    );
    assert_eq!(names.collect::<Vec<_>>(), ["dest", "theirs"], "{there:?}");
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// A partial corrupted after the copy (before its hash) is caught: `verification_failed`,
/// nothing published, and the partial removed, so the retry copies afresh and completes.
#[tokio::test]
async fn a_corrupted_partial_is_caught_and_discarded() {
    let (user, hook) = sshmcp_tests::users::user_with_hashing_hook("sshmcp-hookcorrupt");
    let (env, mcp, s) = crate::logged_in_as(&user, &[]).await;
    let dir = fresh_dir(&mcp, &s, "corrupt").await;
    std::fs::write(
        &hook,
        format!("for f in {dir}/.sshmcp-*.part; do printf X | dd of=\"$f\" conv=notrunc 2>/dev/null; done\n"),
    )
    .unwrap();
    let local = env.local_root.join("data.bin");
    random_file(&local, 4 << 20);
    // The hook writes an X over the first byte: that byte must be something else.
    let mut bytes = std::fs::read(&local).unwrap();
    bytes[0] = b'A';
    std::fs::write(&local, bytes).unwrap();
    let args = json!({"local_path": "data.bin", "remote_path": format!("{dir}/data.bin")});
    let done = upload(&mcp, &s, args.clone()).await;
    assert_eq!(
        (&done["state"], &done["error"]["code"]),
        (&json!("failed"), &json!("verification_failed")),
        "{done}"
    );
    assert_eq!(remote_out(&mcp, &s, &format!("ls -A {dir}")).await, "");
    let done = upload(&mcp, &s, args).await;
    assert_eq!(
        (&done["state"], &done["reused_bytes"]),
        (&json!("completed"), &json!(null)),
        "{done}"
    );
    let there = remote_out(
        &mcp,
        &s,
        &format!("sha256sum < {dir}/data.bin; ls -A {dir}"),
    )
    .await;
    assert_eq!(there, format!("{}  -\ndata.bin\n", local_sha256(&local)));
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

#[tokio::test]
async fn upload_sources_outside_the_root_and_bad_destinations_are_refused() {
    let (env, mcp, s) = connected().await;
    let root = &env.local_root;
    std::fs::create_dir_all(root.join("dir")).unwrap();
    std::fs::write(root.join("ok.txt"), "ok").unwrap();
    std::os::unix::fs::symlink("/tmp", root.join("out")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("link")).unwrap();
    nix::unistd::mkfifo(&root.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    for local in [
        "../x",
        "/etc/passwd",
        "out/hostname",
        "link",
        "fifo",
        "dir",
        "missing",
        ".sshmcp/x",
    ] {
        let r = on_session(
            &mcp,
            &s,
            "upload_start",
            json!({"local_path": local, "remote_path": "/tmp/sshmcp-never"}),
        )
        .await;
        assert_eq!(code(&r), "invalid_local_path", "{local}: {r}");
    }
    for (remote, overwrite, expected) in [
        ("/nonexistent/x", false, "remote_path_not_found"),
        ("/tmp", true, "invalid_remote_type"),
        ("/etc/hostname/x", false, "invalid_remote_type"),
        ("/tmp/", false, "invalid_arguments"),
        ("/etc/hostname", false, "remote_path_exists"),
        ("/etc/hostname", true, "remote_permission_denied"),
        ("/etc/sshmcp-new", false, "remote_permission_denied"),
    ] {
        let r = on_session(
            &mcp,
            &s,
            "upload_start",
            json!({"local_path": "ok.txt", "remote_path": remote, "overwrite": overwrite}),
        )
        .await;
        assert_eq!(code(&r), expected, "{remote}: {r}");
        if expected == "remote_path_not_found" {
            let said = r["error"]["message"].as_str().unwrap();
            assert!(said.contains("make_directory"), "what to do: {r}");
        }
    }
    // The source is the file that was checked, even when a symlink takes its name at once.
    random_file(&root.join("swap.bin"), 1 << 20);
    let hash = local_sha256(&root.join("swap.bin"));
    let remote = crate::TestPath::new(format!("/tmp/sshmcp-swap-{}", unique_sleep(1)));
    let r = on_session(
        &mcp,
        &s,
        "upload_start",
        json!({"local_path": "swap.bin", "remote_path": remote}),
    )
    .await;
    std::fs::rename(root.join("swap.bin"), root.join("swapped.bin")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("swap.bin")).unwrap();
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(
        (&done["state"], &done["sha256"]),
        (&json!("completed"), &json!(hash))
    );
    let there = remote_out(&mcp, &s, &format!("sha256sum < {remote}; rm {remote}")).await;
    assert_eq!(there, format!("{hash}  -\n"));
    mcp.close().await;
}

/// One destination has one writer across sessions: a local file even when the other client's
/// local root reaches it through a symlink, and a remote file even when the other session
/// reached the server by another name.
#[tokio::test]
async fn one_destination_has_one_writer_across_sessions() {
    let (env, mcp, s) = connected().await;
    let (watcher, w) = connect_watcher(&env).await;
    let (sparse, r) = a_download_under_way(&mcp, &s, "shared.bin", false).await;
    let other = on_session(
        &watcher,
        &w,
        "download_start",
        json!({"remote_path": sparse, "local_path": "shared.bin"}),
    )
    .await;
    assert_eq!(code(&other), "transfer_conflict", "{other}");
    let linked = env.local_root.with_extension("link");
    std::os::unix::fs::symlink(&env.local_root, &linked).unwrap();
    let third = env
        .mcp_with_args(&["--local-root", linked.to_str().unwrap()])
        .await;
    let args = json!({"remote_path": sparse, "local_path": "shared.bin", "overwrite": true});
    let other = on_session(&third, &s, "download_start", args).await;
    assert_eq!(code(&other), "transfer_conflict", "{other}");
    third.close().await;
    on_session(
        &mcp,
        &s,
        "transfer_cancel",
        json!({"operation_id": r["operation_id"]}),
    )
    .await;
    until_ended(&mcp, &s, &r["operation_id"]).await;
    let (dir, r) = an_upload_under_way(&env, &mcp, &s, "up.bin", false).await;
    let other = on_session(
        &watcher,
        &w,
        "upload_start",
        json!({"local_path": "up.bin", "remote_path": format!("{dir}/up.bin")}),
    )
    .await;
    assert_eq!(code(&other), "transfer_conflict", "{other}");
    on_session(
        &mcp,
        &s,
        "transfer_cancel",
        json!({"operation_id": r["operation_id"]}),
    )
    .await;
    until_ended(&mcp, &s, &r["operation_id"]).await;
    remote_out(&mcp, &s, &format!("rm -r {dir} {sparse}")).await;
    watcher.close().await;
    mcp.close().await;
}

/// rsync reads its protocol from the first byte its remote shell passes on: what a login
/// shell prints before it (a greeting above the guard, a tcsh rc, stderr merged into stdout)
/// is dropped, and both directions work.
#[tokio::test]
async fn transfers_work_under_login_shells_that_print() {
    use sshmcp_tests::users::{Chatty, chatty_user};
    for kind in [Chatty::Bash, Chatty::Tcsh, Chatty::MergedBash] {
        let (env, mcp, s) = crate::logged_in_as(&chatty_user(kind), &[]).await;
        let dir = fresh_dir(&mcp, &s, "chatty").await;
        let local = env.local_root.join("up.bin");
        random_file(&local, 1 << 20);
        let remote = format!("{dir}/up.bin");
        let done = upload(
            &mcp,
            &s,
            json!({"local_path": "up.bin", "remote_path": remote}),
        )
        .await;
        assert_eq!(done["state"], "completed", "{kind:?}: {done}");
        let r = on_session(
            &mcp,
            &s,
            "download_start",
            json!({"remote_path": remote, "local_path": "down.bin"}),
        )
        .await;
        let done = until_ended(&mcp, &s, &r["operation_id"]).await;
        assert_eq!(done["state"], "completed", "{kind:?}: {done}");
        assert_eq!(
            std::fs::read(env.local_root.join("down.bin")).unwrap(),
            std::fs::read(&local).unwrap()
        );
        remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
        mcp.close().await;
    }
}

/// A disk that fills, on either end, or a remote directory that vanishes ends the transfer
/// `failed` with `transfer_failed` and publishes nothing; a full disk keeps what the partial
/// got.
#[tokio::test]
async fn a_full_disk_or_a_vanished_directory_fails_the_transfer_and_publishes_nothing() {
    use sshmcp_tests::disk::SmallDisk;
    let (env, mcp, s) = connected().await;
    let n = unique_sleep(1);
    // The remote end: a 1 MiB disk as the destination's directory.
    let full = format!("/tmp/sshmcp-rfull-{n}");
    let _remote_disk = SmallDisk::mount(std::path::Path::new(&full));
    random_file(&env.local_root.join("four.bin"), 4 << 20);
    let done = upload(
        &mcp,
        &s,
        json!({"local_path": "four.bin", "remote_path": format!("{full}/four.bin")}),
    )
    .await;
    assert_eq!(
        (&done["state"], &done["error"]["code"]),
        (&json!("failed"), &json!("transfer_failed")),
        "{done}"
    );
    let left = remote_out(&mcp, &s, &format!("ls -A {full}")).await;
    assert!(
        left.starts_with(".sshmcp-") && left.lines().count() == 1,
        "{left:?}"
    );
    // The message names the partial that takes the disk's space, for whoever must free it.
    let kept = format!("{full}/{} on the host", left.trim_end());
    let message = done["error"]["message"].as_str().unwrap();
    assert!(message.contains(&kept), "{message}");
    // A remote directory removed during the copy.
    let (dir, r) = an_upload_under_way(&env, &mcp, &s, "gone.bin", false).await;
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(
        (&done["state"], &done["error"]["code"]),
        (&json!("failed"), &json!("transfer_failed")),
        "{done}"
    );
    // The local end: the local root is a 1 MiB disk.
    let remote = crate::TestPath::new(format!("/tmp/sshmcp-four-{n}"));
    remote_out(
        &mcp,
        &s,
        &format!("head -c 4194304 /dev/urandom > {remote}"),
    )
    .await;
    let _local_disk = SmallDisk::mount(&env.local_root);
    let r = on_session(
        &mcp,
        &s,
        "download_start",
        json!({"remote_path": remote, "local_path": "four.bin"}),
    )
    .await;
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(
        (&done["state"], &done["error"]["code"]),
        (&json!("failed"), &json!("transfer_failed")),
        "{done}"
    );
    assert!(
        !env.local_root.join("four.bin").exists(),
        "nothing published"
    );
    let partial = std::fs::read_dir(env.local_root.join(".sshmcp/partial"))
        .unwrap()
        .flatten()
        .next()
        .expect("the partial stays")
        .path();
    assert!(
        partial.metadata().unwrap().len() > 0,
        "what arrived is kept"
    );
    let message = done["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&partial.display().to_string()),
        "{message}"
    );
    remote_out(&mcp, &s, &format!("rm {remote}")).await;
    mcp.close().await;
}

/// A daemon killed outright (SIGKILL: no cleanup of its own) takes its rsync along; the
/// partial stays, and the next daemon resumes the transfer from it under the same id, to a
/// verified end.
#[tokio::test]
async fn a_transfer_cut_by_a_crash_resumes_in_the_next_daemon() {
    let (env, mcp, s) = connected().await;
    let remote = crate::TestPath::new(format!("/tmp/sshmcp-orphan-{}", unique_sleep(1)));
    remote_out(&mcp, &s, &format!("truncate -s 2G {remote}")).await;
    let r = on_session(
        &mcp,
        &s,
        "download_start",
        json!({"remote_path": remote, "local_path": "orphan.bin"}),
    )
    .await;
    until_bytes_flow(&mcp, &s, &r).await;
    let partial = std::fs::read_dir(env.local_root.join(".sshmcp/partial"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let needle = partial.display().to_string();
    // rsync and the receiver it forks.
    assert!(sshmcp_tests::process::count_matching(&["rsync", &needle]) > 0);
    env.crash_daemon();
    // The kernel signals rsync as the daemon goes.
    until_no_rsync_writes(&partial, 10, "rsync outlived its daemon").await;
    assert!(partial.exists(), "the partial stays");
    // The next call starts a daemon, which resumed the transfer; its first report already
    // knows the size.
    let args = json!({"operation_id": r["operation_id"]});
    let first = on_session(&mcp, &s, "transfer_status", args).await;
    assert_eq!(first["total_bytes"], 2u64 << 30, "{first}");
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert!(done["reused_bytes"].as_u64().unwrap() > 0, "{done}");
    assert_eq!(done["started_at"], r["started_at"], "the same transfer");
    // The daemon hashed what arrived; the source's own hash must be the same.
    let sum = remote_out(&mcp, &s, &format!("sha256sum {remote}")).await;
    assert_eq!(done["sha256"], &sum[..64]);
    assert!(env.daemon_log_shows("transfer resumed"));
    std::fs::remove_file(env.local_root.join("orphan.bin")).unwrap();
    remote_out(&mcp, &s, &format!("rm {remote}")).await;
    mcp.close().await;
}

/// A daemon that published an upload and died before its record said so: the next daemon
/// stops the remote rsync the one before left behind (it could still write into the file it
/// published), finds the destination holding the source byte for byte, and reports the
/// transfer completed, not failed for a destination that exists.
#[tokio::test]
async fn an_upload_published_just_before_a_crash_ends_completed_and_its_old_rsync_stopped() {
    let (env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "uppub").await;
    std::fs::create_dir_all(&env.local_root).unwrap();
    let source = env.local_root.join("pub.bin");
    std::fs::File::create(&source)
        .unwrap()
        .set_len(256 << 20)
        .unwrap();
    let destination = format!("{dir}/pub.bin");
    let args = json!({"local_path": "pub.bin", "remote_path": destination});
    let r = on_session(&mcp, &s, "upload_start", args).await;
    assert_eq!(r["ok"], true, "{r}");
    // Its remote rsync, stopped as soon as it shows: the copy cannot end meanwhile, and the
    // process outlives the daemon as a slow one would.
    let marker = format!(
        "SSHMCP_RSYNC=sshmcp-rsync-{}",
        r["operation_id"].as_str().unwrap()
    );
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut stopped: Vec<u32> = Vec::new();
    while stopped.is_empty() || sshmcp_tests::process::with_environment(&marker) != stopped {
        for pid in sshmcp_tests::process::with_environment(&marker) {
            let pid_t = nix::unistd::Pid::from_raw(pid as i32);
            nix::sys::signal::kill(pid_t, nix::sys::signal::Signal::SIGSTOP).unwrap();
            if !stopped.contains(&pid) {
                stopped.push(pid);
            }
        }
        stopped.sort_unstable();
        assert!(std::time::Instant::now() < give_up, "no remote rsync");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let st = status_now(&mcp, &s, &r["operation_id"]).await;
    assert!(st["ended_at"].is_null(), "the copy must still run: {st}");
    // What the daemon before did last: the published file.
    std::fs::copy(&source, &destination).unwrap();
    env.crash_daemon();
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["sha256"], local_sha256(&source), "{done}");
    assert_eq!(done["final_path"], destination, "{done}");
    assert!(
        stopped.iter().all(|pid| sshmcp_tests::process::gone(*pid)),
        "the old remote rsync was stopped"
    );
    assert!(env.daemon_log_shows("found published by the daemon before"));
    // The partial the frozen copy had begun goes too: no copy will resume from it.
    let left = remote_out(&mcp, &s, &format!("ls -A {dir}")).await;
    assert_eq!(left, "pub.bin\n");
    mcp.close().await;
}

/// A transfer the next daemon cannot resume (its destination was taken meanwhile) ends
/// failed, saying why, and its report names the local file as every other report does:
/// absolute.
#[tokio::test]
async fn a_transfer_that_cannot_resume_after_a_crash_says_why() {
    let (env, mcp, s) = connected().await;
    let (remote, r) = a_download_under_way(&mcp, &s, "taken.bin", false).await;
    env.crash_daemon();
    std::fs::write(env.local_root.join("taken.bin"), "someone else's").unwrap();
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(
        (&done["state"], &done["error"]["code"]),
        (&json!("failed"), &json!("local_path_exists")),
        "{done}"
    );
    assert!(
        done["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not resume"),
        "{done}"
    );
    assert_eq!(
        done["local_path"],
        env.local_root.join("taken.bin").display().to_string(),
        "{done}"
    );
    remote_out(&mcp, &s, &format!("rm {remote}")).await;
    mcp.close().await;
}

/// `daemon restart` hands a transfer under way to the new daemon: the old one records it and
/// stops its rsync, the new one resumes from the partial file, under the same id.
#[tokio::test]
async fn a_restart_hands_a_transfer_over() {
    let (env, mcp, s) = connected().await;
    let (remote, r) = a_download_under_way(&mcp, &s, "handed.bin", false).await;
    let out = env.cli(&["daemon", "restart"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert!(
        done["reused_bytes"].as_u64().unwrap() > 0,
        "resumed: {done}"
    );
    let sum = remote_out(&mcp, &s, &format!("sha256sum {remote}")).await;
    assert_eq!(done["sha256"], &sum[..64]);
    assert!(env.daemon_log_shows("transfer resumed"));
    // A caller polling across the next daemon's start (here after a crash) learns the same
    // end, and the list still holds it: once the record holds it (written just after).
    let record = env.runtime_dir.join("sessions.json");
    let sha = done["sha256"].as_str().unwrap();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(&record).is_ok_and(|r| r.contains(sha)) {
        assert!(
            std::time::Instant::now() < give_up,
            "the end never reached the record"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // Apart from the transfers under way: a daemon older than this list resumes none of it.
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    let session = &kept["sessions"][0];
    assert_eq!(session["transfers"], json!([]), "{kept}");
    assert_eq!(
        session["ended_transfers"][0]["ended"]["sha256"], sha,
        "{kept}"
    );
    env.crash_daemon();
    let args = json!({"operation_id": r["operation_id"]});
    let again = on_session(&mcp, &s, "transfer_status", args).await;
    assert_eq!(again, done);
    let listed = on_session(&mcp, &s, "transfer_list", json!({})).await;
    assert_eq!(listed["transfers"][0]["sha256"], done["sha256"], "{listed}");
    std::fs::remove_file(env.local_root.join("handed.bin")).unwrap();
    remote_out(&mcp, &s, &format!("rm {remote}")).await;
    mcp.close().await;
}

/// A transfer a new daemon takes back meets the policy in force then, not the one it started
/// under: a restart after the user denied downloads from this host ends it `policy_denied`
/// with nothing published, and the trail says so.
#[tokio::test]
async fn a_transfer_taken_back_after_a_restart_meets_the_policy_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "").unwrap();
    let config_var = config.display().to_string();
    let (env, mcp, s) = crate::connected_with(
        &sshmcp_tests::SshdOptions::default(),
        &[("SSHMCP_CONFIG", &config_var)],
    )
    .await;
    let (remote, r) = a_download_under_way(&mcp, &s, "refused.bin", false).await;
    std::fs::write(
        &config,
        "[[policy]]\nmatch = [\"testbed\"]\ndeny = [\"download_start\"]\n",
    )
    .unwrap();
    let out = env.cli(&["daemon", "restart"]);
    assert!(out.status.success(), "{out:?}");
    let done = until_ended(&mcp, &s, &r["operation_id"]).await;
    assert_eq!(
        (&done["state"], &done["error"]["code"]),
        (&json!("failed"), &json!("policy_denied")),
        "{done}"
    );
    assert!(!env.local_root.join("refused.bin").exists());
    let taken_back = |l: &Value| {
        l["summary"]
            .as_str()
            .is_some_and(|s| s.ends_with("(taken back by a new daemon)"))
    };
    let lines = crate::oversight::history_until(&env, &["--session", &s.0], |lines| {
        lines.iter().any(taken_back)
    });
    let line = lines.iter().find(|l| taken_back(l)).unwrap();
    assert_eq!(
        (&line["tool"], &line["outcome"]),
        (&json!("download_start"), &json!("policy_denied")),
        "{line}"
    );
    remote_out(&mcp, &s, &format!("rm {remote}")).await;
    mcp.close().await;
}

/// Remote names with any bytes go up and come back unchanged, through rsync's own parsing of
/// its remote arguments (wildcards, backslashes, a directory holding both) and never through
/// a shell; the one name rsync cannot fetch is refused up front.
#[tokio::test]
async fn odd_remote_names_go_up_and_come_back() {
    use base64::Engine as _;
    let (env, mcp, s) = connected().await;
    let dir = crate::TestPath::new(format!("/tmp/sshmcp-names-{}", unique_sleep(1)));
    let odd_dir = format!("{dir}/d[1]*\\x");
    remote_out(&mcp, &s, &format!("mkdir -p '{odd_dir}'")).await;
    std::fs::create_dir_all(&env.local_root).unwrap();
    let names: Vec<Vec<u8>> = [
        "back\\slash",
        "new\nline",
        "$(touch pwned)",
        "-dash",
        "sp ace 'q\" `x`",
        "w[1]?*",
        "d[1]*\\x/inside\\dir",
    ]
    .iter()
    .map(|n| n.as_bytes().to_vec())
    .chain([b"bytes-\xff\xfe".to_vec()])
    .collect();
    for (i, name) in names.iter().enumerate() {
        let mut remote = format!("{dir}/").into_bytes();
        remote.extend_from_slice(name);
        let remote = base64::engine::general_purpose::STANDARD.encode(&remote);
        let content = format!("file {i}\n");
        std::fs::write(env.local_root.join(format!("up-{i}")), &content).unwrap();
        let done = upload(
            &mcp,
            &s,
            json!({"local_path": format!("up-{i}"), "remote_path": remote,
                   "remote_path_encoding": "base64"}),
        )
        .await;
        assert_eq!(done["state"], "completed", "{name:?}: {done}");
        // Published where it was named, said as `remote_path` is (a path that is no UTF-8
        // in its base64).
        assert_eq!(done["final_path"], done["remote_path"], "{name:?}: {done}");
        let r = on_session(
            &mcp,
            &s,
            "download_start",
            json!({"remote_path": remote, "remote_path_encoding": "base64",
                   "local_path": format!("down-{i}")}),
        )
        .await;
        let done = until_ended(&mcp, &s, &r["operation_id"]).await;
        assert_eq!(done["state"], "completed", "{name:?}: {done}");
        assert_eq!(
            std::fs::read_to_string(env.local_root.join(format!("down-{i}"))).unwrap(),
            content
        );
    }
    // Every file is where it was named, nothing ran, no partial is left.
    let there = remote_out(
        &mcp,
        &s,
        &format!(
            "find {dir} -type f -printf x | wc -c; ls -A {dir} | grep -c sshmcp; ls ~ | grep -c pwned; true"
        ),
    )
    .await;
    assert_eq!(there, format!("{}\n0\n0\n", names.len()));
    let mixed = format!("{dir}/f[2]\\g");
    remote_out(&mcp, &s, &format!("echo x > '{mixed}'")).await;
    let r = on_session(
        &mcp,
        &s,
        "download_start",
        json!({"remote_path": mixed, "local_path": "mixed"}),
    )
    .await;
    assert_eq!(code(&r), "invalid_arguments", "{r}");
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}
