//! write_file through the real binaries: whole files written atomically on the host, modes
//! kept, compare-and-swap against other writers, the 1 MiB bound at its edge, and names with
//! any bytes taken literally.

use std::os::unix::process::CommandExt as _;

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sshmcp_tests::McpClient;
use sshmcp_tests::process::unique_sleep;

use crate::{code, connected, fresh_dir, message, on_session, remote_out};

type Session = (String, String);

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn write(mcp: &McpClient, s: &Session, args: Value) -> Value {
    on_session(mcp, s, "write_file", args).await
}

#[tokio::test]
async fn write_file_writes_whole_files_and_replaces_only_when_asked() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "write").await;
    let path = format!("{dir}/a.txt");
    let r = write(&mcp, &s, json!({"path": path, "content": "hello\n"})).await;
    assert_eq!(
        (&r["created"], &r["bytes_written"], &r["sha256"], &r["path"]),
        (
            &json!(true),
            &json!(6),
            &json!(sha256_hex(b"hello\n")),
            &json!(path)
        ),
        "{r}"
    );
    // A new file's mode is what any new file of the user gets.
    let there = remote_out(
        &mcp,
        &s,
        &format!("cat {path}; touch {dir}/t; stat -c %a {path} {dir}/t; rm {dir}/t"),
    )
    .await;
    let lines: Vec<&str> = there.lines().collect();
    assert_eq!((lines[0], lines[1]), ("hello", lines[2]), "{there}");
    // Binary content, as base64.
    let bytes: Vec<u8> = (0..=255u8).collect();
    let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let r = write(
        &mcp,
        &s,
        json!({"path": format!("{dir}/b.bin"), "content": encoded, "encoding": "base64"}),
    )
    .await;
    assert_eq!(r["sha256"], sha256_hex(&bytes), "{r}");
    let there = remote_out(&mcp, &s, &format!("sha256sum < {dir}/b.bin")).await;
    assert_eq!(there, format!("{}  -\n", sha256_hex(&bytes)));
    // Not replaced without overwrite; replaced with it, keeping the old file's mode.
    let r = write(&mcp, &s, json!({"path": path, "content": "other\n"})).await;
    assert_eq!(code(&r), "remote_path_exists", "{r}");
    remote_out(&mcp, &s, &format!("chmod 640 {path}")).await;
    let r = write(
        &mcp,
        &s,
        json!({"path": path, "content": "bye\n", "overwrite": true}),
    )
    .await;
    assert_eq!(r["created"], json!(null), "{r}");
    let there = remote_out(&mcp, &s, &format!("cat {path}; stat -c %a {path}")).await;
    assert_eq!(there, "bye\n640\n");
    // A mode asked for, and missing directories made only when asked.
    let r = write(
        &mcp,
        &s,
        json!({"path": format!("{dir}/run.sh"), "content": "#!/bin/sh\n", "mode": "0755"}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    let deep = format!("{dir}/x/y/z.txt");
    let r = write(&mcp, &s, json!({"path": deep, "content": "deep"})).await;
    assert_eq!(code(&r), "remote_path_not_found", "{r}");
    assert!(message(&r).contains("pass create_dirs: true"), "{r}");
    let r = write(
        &mcp,
        &s,
        json!({"path": deep, "content": "deep", "create_dirs": true}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    // Not a file: refused, whatever the flags.
    for (target, expected) in [
        (dir.to_string(), "invalid_remote_type"),
        (format!("{dir}/"), "invalid_arguments"),
        (format!("{path}/x"), "invalid_remote_type"),
    ] {
        let r = write(
            &mcp,
            &s,
            json!({"path": target, "content": "x", "overwrite": true}),
        )
        .await;
        assert_eq!(code(&r), expected, "{target}: {r}");
        if target.ends_with('/') {
            assert!(message(&r).contains("a file in `dir`: `dir/name`"), "{r}");
        }
    }
    // A symlink is never written through: the message says what to write instead.
    remote_out(&mcp, &s, &format!("ln -s {path} {dir}/link")).await;
    let link = json!({"path": format!("{dir}/link"), "content": "x", "overwrite": true});
    let r = write(&mcp, &s, link).await;
    assert_eq!(code(&r), "invalid_remote_type", "{r}");
    assert!(message(&r).starts_with("a symlink") && message(&r).contains("link_target"));
    remote_out(&mcp, &s, &format!("rm {dir}/link")).await;
    let there = remote_out(
        &mcp,
        &s,
        &format!("stat -c %a {dir}/run.sh; cat {deep}; echo; ls -A {dir}"),
    )
    .await;
    assert_eq!(
        there, "755\ndeep\na.txt\nb.bin\nrun.sh\nx\n",
        "no temporary file left"
    );
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// Compare-and-swap: a write that names the hash it last saw is refused once another process
/// changed the file, and that process's content stays.
#[tokio::test]
async fn a_stale_hash_is_refused_and_the_other_writers_content_stays() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "cas").await;
    let path = format!("{dir}/conf");
    let first = write(&mcp, &s, json!({"path": path, "content": "v1\n"})).await;
    remote_out(&mcp, &s, &format!("echo other > {path}")).await;
    let r = write(
        &mcp,
        &s,
        json!({"path": path, "content": "v2\n", "expected_sha256": first["sha256"]}),
    )
    .await;
    assert_eq!(code(&r), "file_changed", "{r}");
    let now = sha256_hex(b"other\n");
    assert!(
        r["error"]["message"].as_str().unwrap().contains(&now),
        "the current hash is named: {r}"
    );
    assert_eq!(r["error"]["sha256"], now, "and given as a field: {r}");
    assert_eq!(
        remote_out(&mcp, &s, &format!("cat {path}")).await,
        "other\n"
    );
    let r = write(
        &mcp,
        &s,
        json!({"path": path, "content": "v3\n", "expected_sha256": now}),
    )
    .await;
    assert_eq!(
        (&r["ok"], &r["created"]),
        (&json!(true), &json!(null)),
        "{r}"
    );
    assert_eq!(remote_out(&mcp, &s, &format!("cat {path}")).await, "v3\n");
    let r = write(
        &mcp,
        &s,
        json!({"path": format!("{dir}/gone"), "content": "x", "expected_sha256": now}),
    )
    .await;
    assert_eq!(
        code(&r),
        "file_changed",
        "a missing file is no longer what was seen: {r}"
    );
    let said = r["error"]["message"].as_str().unwrap();
    assert!(said.ends_with("leave expected_sha256 out)"), "{r}");
    for bad in ["ABC", &now.to_uppercase(), &now[1..]] {
        let r = write(
            &mcp,
            &s,
            json!({"path": path, "content": "x", "expected_sha256": bad}),
        )
        .await;
        assert_eq!(code(&r), "invalid_arguments", "{bad}: {r}");
    }
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

#[tokio::test]
async fn content_of_exactly_1_mib_is_written_and_one_byte_more_is_refused() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "mib").await;
    let path = format!("{dir}/big");
    let limit = "a".repeat(1 << 20);
    let r = write(&mcp, &s, json!({"path": path, "content": limit})).await;
    assert_eq!(r["bytes_written"], 1 << 20, "{r}");
    let over = "b".repeat((1 << 20) + 1);
    let r = write(
        &mcp,
        &s,
        json!({"path": path, "content": over, "overwrite": true}),
    )
    .await;
    assert_eq!(code(&r), "invalid_arguments", "{r}");
    // Ten times over: refused before it leaves the shim.
    let huge = "c".repeat(10 << 20);
    let r = write(
        &mcp,
        &s,
        json!({"path": path, "content": huge, "overwrite": true}),
    )
    .await;
    assert_eq!(code(&r), "invalid_arguments", "{}", r["error"]);
    let there = remote_out(&mcp, &s, &format!("sha256sum < {path}; ls -A {dir}")).await;
    assert_eq!(
        there,
        format!("{}  -\nbig\n", sha256_hex(limit.as_bytes())),
        "the file is unchanged"
    );
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// A reader hashing the file in a loop while it is rewritten 20 times sees only the two
/// contents written, never a mix or an empty file.
#[tokio::test]
async fn a_reader_never_sees_a_third_content_during_rewrites() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "atomic").await;
    let path = format!("{dir}/f");
    let (a, b) = ("a".repeat(256 << 10), "b".repeat(256 << 10));
    let (ha, hb) = (sha256_hex(a.as_bytes()), sha256_hex(b.as_bytes()));
    write(&mcp, &s, json!({"path": path, "content": a})).await;
    let reader = format!(
        "n=0; while [ ! -e {dir}/stop ]; do h=$(sha256sum < {path}); \
         case $h in {ha}*|{hb}*) n=$((n+1)) ;; *) echo \"third: $h\" ;; esac; \
         [ $n = 1 ] && touch {dir}/reading; done; echo reads $n"
    );
    let h = on_session(&mcp, &s, "command_start", json!({"command": reader})).await;
    assert_eq!(h["ok"], true, "{h}");
    // The rewrites start once the reader reads.
    let probe = format!("[ -e {dir}/reading ] && echo yes");
    assert!(
        crate::remote_until(&mcp, &s, &probe, "yes\n").await,
        "the reader never read"
    );
    for i in 0..20 {
        let content = if i % 2 == 0 { &b } else { &a };
        let r = write(
            &mcp,
            &s,
            json!({"path": path, "content": content, "overwrite": true}),
        )
        .await;
        assert_eq!(r["ok"], true, "{r}");
    }
    remote_out(&mcp, &s, &format!("touch {dir}/stop")).await;
    let r = on_session(
        &mcp,
        &s,
        "command_status",
        json!({"handle_id": h["handle_id"], "wait_seconds": 60}),
    )
    .await;
    let out = crate::text(&r["stdout"]);
    assert!(
        out.starts_with("reads ") && !out.contains("third") && out != "reads 0\n",
        "{r}"
    );
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// Names with any bytes are written literally, and nothing in them runs.
#[tokio::test]
async fn awkward_names_are_written_literally() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "wnames").await;
    let names: Vec<Vec<u8>> = [
        "new\nline",
        "$(touch pwned)",
        "-dash",
        "sp ace 'q\" `x`",
        "back\\slash",
        "w[1]?*",
    ]
    .iter()
    .map(|n| n.as_bytes().to_vec())
    .chain([b"bytes-\xff\xfe".to_vec()])
    .collect();
    for (i, name) in names.iter().enumerate() {
        let mut path = format!("{dir}/").into_bytes();
        path.extend_from_slice(name);
        let path = base64::engine::general_purpose::STANDARD.encode(&path);
        let content = format!("file {i}\n");
        let r = write(
            &mcp,
            &s,
            json!({"path": path, "path_encoding": "base64", "content": content}),
        )
        .await;
        assert_eq!(r["created"], true, "{name:?}: {r}");
        let back = on_session(
            &mcp,
            &s,
            "read_file_range",
            json!({"path": path, "path_encoding": "base64", "length": 100}),
        )
        .await;
        assert_eq!(back["data"], content, "{name:?}: {back}");
    }
    let there = remote_out(
        &mcp,
        &s,
        &format!("find {dir} -type f -printf x | wc -c; ls ~ {dir} | grep -cx pwned; true"),
    )
    .await;
    assert_eq!(there, format!("{}\n0\n", names.len()));
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// A write that fails half-way (the disk fills) leaves the old file as it was and no
/// temporary file behind.
#[tokio::test]
async fn a_failed_write_leaves_the_old_file_and_no_temporary_file() {
    let (_env, mcp, s) = connected().await;
    let dir = format!("/tmp/sshmcp-wfull-{}", unique_sleep(1));
    let _disk = sshmcp_tests::disk::SmallDisk::mount(std::path::Path::new(&dir));
    let path = format!("{dir}/conf");
    write(&mcp, &s, json!({"path": path, "content": "old\n"})).await;
    let r = write(
        &mcp,
        &s,
        json!({"path": path, "content": "x".repeat(1 << 20), "overwrite": true}),
    )
    .await;
    assert_eq!(r["ok"], false, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("No space left"),
        "{r}"
    );
    assert_eq!(
        remote_out(&mcp, &s, &format!("cat {path}; ls -A {dir}")).await,
        "old\nconf\n"
    );
    mcp.close().await;
}

async fn edit(mcp: &McpClient, s: &Session, args: Value) -> Value {
    on_session(mcp, s, "edit_file", args).await
}

/// Exact text, special bytes and line ends included, replaced once when it occurs once, never
/// when it occurs 0 or 2 times, and everywhere with replace_all; mode kept, hash answered.
#[tokio::test]
async fn edit_file_replaces_exact_text_once_or_everywhere() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "edit").await;
    let path = format!("{dir}/conf");
    let odd = "a.b*[c]^$\\/&\n  indented";
    let content = format!("first {odd} line\nsecond twice twice\n");
    write(
        &mcp,
        &s,
        json!({"path": path, "content": content, "mode": "0600"}),
    )
    .await;
    let r = edit(
        &mcp,
        &s,
        json!({"path": path, "old_text": odd, "new_text": "R&\\/\nS"}),
    )
    .await;
    let expected = "first R&\\/\nS line\nsecond twice twice\n";
    assert_eq!(
        (&r["replacements"], &r["sha256"]),
        (&json!(1), &json!(sha256_hex(expected.as_bytes()))),
        "{r}"
    );
    let r = edit(
        &mcp,
        &s,
        json!({"path": path, "old_text": "absent", "new_text": "x"}),
    )
    .await;
    assert_eq!(code(&r), "edit_no_match", "{r}");
    let r = edit(
        &mcp,
        &s,
        json!({"path": path, "old_text": "twice", "new_text": "x"}),
    )
    .await;
    assert_eq!(code(&r), "edit_ambiguous_match", "{r}");
    assert_eq!(r["error"]["count"], 2, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("2 times"),
        "{r}"
    );
    let r = edit(
        &mcp,
        &s,
        json!({"path": path, "old_text": "twice", "new_text": "", "replace_all": true}),
    )
    .await;
    assert_eq!(r["replacements"], 2, "{r}");
    let there = remote_out(
        &mcp,
        &s,
        &format!("cat {path}; stat -c %a {path}; ls -A {dir}"),
    )
    .await;
    assert_eq!(there, "first R&\\/\nS line\nsecond  \n600\nconf\n");
    // A stale hash, a missing file, a binary file, empty or oversized text: nothing changes.
    let r = edit(
        &mcp,
        &s,
        json!({"path": path, "old_text": "first", "new_text": "x",
               "expected_sha256": sha256_hex(b"old")}),
    )
    .await;
    assert_eq!(code(&r), "file_changed", "{r}");
    let r = edit(
        &mcp,
        &s,
        json!({"path": format!("{dir}/none"), "old_text": "a", "new_text": "b"}),
    )
    .await;
    assert_eq!(code(&r), "remote_path_not_found", "{r}");
    remote_out(&mcp, &s, &format!("printf 'a\\000b' > {dir}/bin")).await;
    let r = edit(
        &mcp,
        &s,
        json!({"path": format!("{dir}/bin"), "old_text": "a", "new_text": "b"}),
    )
    .await;
    assert_eq!(code(&r), "invalid_remote_type", "{r}");
    let r = edit(
        &mcp,
        &s,
        json!({"path": path, "old_text": "", "new_text": "b"}),
    )
    .await;
    assert_eq!(code(&r), "invalid_arguments", "{r}");
    // An old_text of exactly 4 KiB is taken, one byte more is not.
    let long = "L".repeat(4096);
    write(
        &mcp,
        &s,
        json!({"path": format!("{dir}/long"), "content": format!("<{long}>")}),
    )
    .await;
    let r = edit(
        &mcp,
        &s,
        json!({"path": format!("{dir}/long"), "old_text": long, "new_text": long.to_lowercase()}),
    )
    .await;
    assert_eq!(r["replacements"], 1, "{r}");
    let r = edit(
        &mcp,
        &s,
        json!({"path": format!("{dir}/long"), "old_text": format!("{long}>"), "new_text": "x"}),
    )
    .await;
    assert_eq!(code(&r), "invalid_arguments", "{r}");
    assert_eq!(
        remote_out(&mcp, &s, &format!("cat {path}; ls -A {dir}")).await,
        "first R&\\/\nS line\nsecond  \nbin\nconf\nlong\n",
        "unchanged, and no temporary file left"
    );
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// `edit_file`'s bound at its edge: a file of exactly 64 MiB is edited; one byte more is
/// `file_too_large`, and nothing changes.
#[tokio::test]
async fn a_file_of_exactly_64_mib_is_edited_and_one_byte_more_is_file_too_large() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "edgeedit").await;
    let path = format!("{dir}/edge.txt");
    // 64 MiB in all: 67,108,858 bytes of `a`, then the 6 of `needle`.
    remote_out(
        &mcp,
        &s,
        &format!("yes a | tr -d '\\n' | head -c 67108858 > {path}; printf needle >> {path}"),
    )
    .await;
    let args = json!({"path": path, "old_text": "needle", "new_text": "pinned"});
    let r = edit(&mcp, &s, args.clone()).await;
    assert_eq!(r["replacements"], 1, "{r}");
    remote_out(&mcp, &s, &format!("printf b >> {path}")).await;
    let args = json!({"path": path, "old_text": "pinned", "new_text": "moved"});
    let r = edit(&mcp, &s, args).await;
    assert_eq!(code(&r), "file_too_large", "{r}");
    let tail = remote_out(&mcp, &s, &format!("tail -c 7 {path}")).await;
    assert_eq!(tail, "pinnedb", "nothing was changed");
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// A 50 MiB file is edited on the host: the daemon's peak memory stays far below the file.
#[tokio::test]
async fn a_50_mib_file_is_edited_without_passing_through_the_daemon() {
    let (env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "bigedit").await;
    let path = format!("{dir}/big.log");
    remote_out(
        &mcp,
        &s,
        &format!(
            "yes 'a line of the log, the same each time' | head -c 26214400 > {path}; \
             echo 'THE ONE LINE' >> {path}; \
             yes 'a line of the log, the same each time' | head -c 26214400 >> {path}"
        ),
    )
    .await;
    let r = edit(
        &mcp,
        &s,
        json!({"path": path, "old_text": "THE ONE LINE", "new_text": "the edited line"}),
    )
    .await;
    assert_eq!(r["replacements"], 1, "{r}");
    let there = remote_out(
        &mcp,
        &s,
        &format!("grep -c 'the edited line' {path}; sha256sum < {path}"),
    )
    .await;
    assert_eq!(there, format!("1\n{}  -\n", r["sha256"].as_str().unwrap()));
    let peak = sshmcp_tests::process::status_kib(env.daemon_pid().unwrap(), "VmHWM");
    assert!(peak < 40 << 10, "the daemon's peak was {peak} KiB");
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// The housekeeping tools' failures say what they are and what they left: a move or copy
/// the destination's directory refuses, a directory into itself, a recursive removal
/// stopped part way, a path longer than a host takes.
#[tokio::test]
async fn housekeeping_failures_name_their_cause_and_what_is_left() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "housefail").await;
    remote_out(
        &mcp,
        &s,
        &format!(
            "cd {dir} && echo f > src && mkdir ro d1 tree tree/locked && echo x > tree/other && \
             echo y > tree/locked/kept && chmod 555 ro tree/locked"
        ),
    )
    .await;
    let on = |tool: &'static str, args: Value| {
        let (mcp, s) = (&mcp, &s);
        async move { on_session(mcp, s, tool, args).await }
    };
    for tool in ["move_path", "copy_path"] {
        let args = json!({"source": format!("{dir}/src"), "destination": format!("{dir}/ro/new")});
        let r = on(tool, args).await;
        assert_eq!(code(&r), "remote_permission_denied", "{tool}: {r}");
        let args = json!({"source": format!("{dir}/d1"), "destination": format!("{dir}/d1/in")});
        let r = on(tool, args).await;
        assert_eq!(code(&r), "invalid_arguments", "{tool}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("inside the source"),
            "{r}"
        );
    }
    let r = on(
        "remove_path",
        json!({"path": format!("{dir}/tree"), "recursive": true}),
    )
    .await;
    assert_eq!(code(&r), "remote_permission_denied", "{r}");
    let said = r["error"]["message"].as_str().unwrap();
    assert!(said.contains("part of the tree may be gone"), "{r}");
    // A path that names no entry of its own is never removed.
    for path in [
        "/",
        ".",
        "..",
        &format!("{dir}/d1/"),
        &format!("{dir}/d1/.."),
    ] {
        let args = json!({"path": path, "recursive": true});
        let r = on("remove_path", args).await;
        assert_eq!(code(&r), "invalid_arguments", "{path}: {r}");
    }
    let long = format!("{dir}/{}", "d/".repeat(2048));
    let r = on(
        "make_directory",
        json!({"path": long.trim_end_matches('/'), "parents": true}),
    )
    .await;
    assert_eq!(code(&r), "invalid_arguments", "{r}");
    assert_eq!(
        remote_out(&mcp, &s, &format!("cd {dir} && ls -A . ro d1 tree/locked")).await,
        ".:\nd1\nro\nsrc\ntree\n\nd1:\n\nro:\n\ntree/locked:\nkept\n"
    );
    remote_out(&mcp, &s, &format!("chmod 755 {dir}/tree/locked")).await;
    mcp.close().await;
}

/// A link whose target the user may not read (another user's `/proc/PID/cwd`) is listed with
/// no target, not a failure of the listing.
#[tokio::test]
async fn a_listing_with_unreadable_link_targets_still_lists() {
    let (_env, mcp, s) = connected().await;
    let r = on_session(&mcp, &s, "list_directory", json!({"path": "/proc/1"})).await;
    let entries = r["entries"].as_array().unwrap_or_else(|| panic!("{r}"));
    let cwd = entries.iter().find(|e| e["name"] == "cwd").unwrap();
    assert_eq!(
        (&cwd["type"], &cwd["link_target"]),
        (&json!("symlink"), &json!(null)),
        "{cwd}"
    );
    mcp.close().await;
}

/// make_directory, remove_path, copy_path and move_path on names with any bytes, with nothing
/// in them ever run, and existing paths never replaced unless asked.
#[tokio::test]
async fn housekeeping_tools_take_every_name_literally() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "house").await;
    let b64 = |name: &[u8]| {
        let mut path = format!("{dir}/").into_bytes();
        path.extend_from_slice(name);
        base64::engine::general_purpose::STANDARD.encode(path)
    };
    let names: [&[u8]; 6] = [
        b"new\nline",
        b"$(touch pwned)",
        b"-dash",
        b"sp 'q\" `x`",
        b"w[1]?*\\",
        b"bytes-\xff",
    ];
    for (i, name) in names.iter().enumerate() {
        let d = b64(name);
        let on = |tool: &'static str, args: Value| {
            let (mcp, s) = (&mcp, &s);
            async move { on_session(mcp, s, tool, args).await }
        };
        let r = on(
            "make_directory",
            json!({"path": d, "path_encoding": "base64"}),
        )
        .await;
        assert_eq!(
            (&r["type"], &r["changed"]),
            (&json!("directory"), &json!(true)),
            "{r}"
        );
        let r = on(
            "make_directory",
            json!({"path": d, "path_encoding": "base64"}),
        )
        .await;
        assert_eq!(
            r["changed"],
            json!(null),
            "an existing directory is no change: {r}"
        );
        // A file inside, copied, then moved, then removed with its directory.
        let mut inner = name.to_vec();
        inner.extend_from_slice(b"/f");
        let f = b64(&inner);
        write(
            &mcp,
            &s,
            json!({"path": f, "path_encoding": "base64", "content": format!("{i}")}),
        )
        .await;
        let copy = b64(&[name.to_vec(), b"/copy".to_vec()].concat());
        let r = on(
            "copy_path",
            json!({"source": f, "source_encoding": "base64",
                   "destination": copy, "destination_encoding": "base64"}),
        )
        .await;
        let answered = match r["path_encoding"].as_str() {
            Some("base64") => base64::engine::general_purpose::STANDARD
                .decode(r["path"].as_str().unwrap())
                .unwrap(),
            _ => r["path"].as_str().unwrap().as_bytes().to_vec(),
        };
        let expected = base64::engine::general_purpose::STANDARD
            .decode(&copy)
            .unwrap();
        assert_eq!((&r["type"], answered), (&json!("file"), expected), "{r}");
        let r = on(
            "copy_path",
            json!({"source": f, "source_encoding": "base64",
                   "destination": copy, "destination_encoding": "base64"}),
        )
        .await;
        assert_eq!(code(&r), "remote_path_exists", "{r}");
        let moved = b64(&[name.to_vec(), b"/moved".to_vec()].concat());
        let r = on(
            "move_path",
            json!({"source": copy, "source_encoding": "base64",
                   "destination": moved, "destination_encoding": "base64"}),
        )
        .await;
        assert_eq!(r["ok"], true, "{r}");
        let r = on(
            "move_path",
            json!({"source": f, "source_encoding": "base64",
                   "destination": moved, "destination_encoding": "base64"}),
        )
        .await;
        assert_eq!(
            code(&r),
            "remote_path_exists",
            "a move never replaces unasked: {r}"
        );
        let r = on("remove_path", json!({"path": d, "path_encoding": "base64"})).await;
        assert_eq!(code(&r), "directory_not_empty", "{r}");
        let r = on(
            "remove_path",
            json!({"path": d, "path_encoding": "base64", "recursive": true}),
        )
        .await;
        // A removal either happens or fails: only make_directory's answer says `changed`.
        assert_eq!(r["type"], "directory", "{r}");
        assert!(r.get("changed").is_none(), "{r}");
        let r = on("remove_path", json!({"path": d, "path_encoding": "base64"})).await;
        assert_eq!(code(&r), "remote_path_not_found", "{r}");
    }
    // Overwrite replaces a file but never a directory; a symlink is removed, not its target.
    let (a, b) = (format!("{dir}/a"), format!("{dir}/b"));
    write(&mcp, &s, json!({"path": a, "content": "A"})).await;
    write(&mcp, &s, json!({"path": b, "content": "B"})).await;
    // Into a missing directory: the message says which side may be missing, and what to do.
    let args = json!({"source": a, "destination": format!("{dir}/nodir/a")});
    let r = on_session(&mcp, &s, "copy_path", args).await;
    assert_eq!(code(&r), "remote_path_not_found", "{r}");
    let said = r["error"]["message"].as_str().unwrap();
    assert!(
        said.ends_with("destination directory: make_directory that)"),
        "{r}"
    );
    let r = on_session(
        &mcp,
        &s,
        "move_path",
        json!({"source": a, "destination": b, "overwrite": true}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    remote_out(&mcp, &s, &format!("mkdir {dir}/sub; ln -s {b} {dir}/link")).await;
    let r = on_session(
        &mcp,
        &s,
        "copy_path",
        json!({"source": b, "destination": format!("{dir}/sub"), "overwrite": true}),
    )
    .await;
    assert_eq!(code(&r), "remote_path_exists", "{r}");
    // It says why overwrite did not help, and what to give instead.
    let said = r["error"]["message"].as_str().unwrap();
    assert!(
        said.contains("directory is never replaced") && said.contains("new path itself"),
        "{r}"
    );
    let r = on_session(
        &mcp,
        &s,
        "remove_path",
        json!({"path": format!("{dir}/link")}),
    )
    .await;
    assert_eq!(r["type"], "symlink", "{r}");
    let there = remote_out(
        &mcp,
        &s,
        &format!("cat {b}; echo; ls -A {dir}; ls ~ {dir} | grep -cx pwned; true"),
    )
    .await;
    assert_eq!(there, "A\nb\nsub\n0\n");
    let r = on_session(&mcp, &s, "make_directory", json!({"path": b})).await;
    assert_eq!(code(&r), "remote_path_exists", "{r}");
    // A copy over a symlink replaces the link, never writes through it.
    let (victim, link) = (format!("{dir}/victim"), format!("{dir}/to-victim"));
    remote_out(
        &mcp,
        &s,
        &format!("echo victim > {victim}; ln -s {victim} {link}"),
    )
    .await;
    let r = on_session(
        &mcp,
        &s,
        "copy_path",
        json!({"source": b, "destination": link, "overwrite": true}),
    )
    .await;
    assert_eq!(r["type"], "file", "{r}");
    let r = on_session(
        &mcp,
        &s,
        "make_directory",
        json!({"path": format!("{dir}/private"), "mode": "0700"}),
    )
    .await;
    assert_eq!(r["changed"], true, "{r}");
    let there = remote_out(
        &mcp,
        &s,
        &format!("cat {victim} {link}; stat -c %F {link}; stat -c %a {dir}/private; ls -A {dir} | grep -c sshmcp; true"),
    )
    .await;
    assert_eq!(there, "victim\nAregular file\n700\n0\n");
    let r = on_session(
        &mcp,
        &s,
        "make_directory",
        json!({"path": format!("{dir}/x/y"), "parents": false}),
    )
    .await;
    assert_eq!(code(&r), "remote_path_not_found", "{r}");
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// An overwrite and an edit keep setuid and setgid bits (a chown after the chmod would clear
/// them); an unreadable file is remote_permission_denied, not an error of the tool.
#[tokio::test]
async fn special_mode_bits_are_kept_and_an_unreadable_file_is_denied() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "modes").await;
    let (tool, setgid) = (format!("{dir}/tool"), format!("{dir}/shared"));
    write(
        &mcp,
        &s,
        json!({"path": tool, "content": "v1\n", "mode": "4755"}),
    )
    .await;
    write(
        &mcp,
        &s,
        json!({"path": setgid, "content": "a b\n", "mode": "2775"}),
    )
    .await;
    let r = write(
        &mcp,
        &s,
        json!({"path": tool, "content": "v2\n", "overwrite": true}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    let r = edit(
        &mcp,
        &s,
        json!({"path": setgid, "old_text": "a", "new_text": "c"}),
    )
    .await;
    assert_eq!(r["replacements"], 1, "{r}");
    let there = remote_out(&mcp, &s, &format!("stat -c %a {tool} {setgid}")).await;
    assert_eq!(there, "4755\n2775\n");
    // A file of root's that the session's user may not read (the test runs as root).
    let secret = std::path::PathBuf::from(format!("{dir}/secret"));
    std::fs::write(&secret, "s").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let path = secret.display().to_string();
    let r = edit(
        &mcp,
        &s,
        json!({"path": path, "old_text": "s", "new_text": "t"}),
    )
    .await;
    assert_eq!(code(&r), "remote_permission_denied", "{r}");
    let r = write(
        &mcp,
        &s,
        json!({"path": path, "content": "t", "expected_sha256": sha256_hex(b"s")}),
    )
    .await;
    assert_eq!(code(&r), "remote_permission_denied", "{r}");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "s");
    std::fs::remove_file(&secret).unwrap();
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// Ownership is kept: a file whose group is another of the user's groups keeps it through a
/// write and an edit; a file of another user that the session's user may write would change
/// hands, so that write does not happen.
#[tokio::test]
async fn ownership_is_kept_or_the_file_is_not_replaced() {
    let user = sshmcp_tests::users::test_user();
    sshmcp_tests::users::add_to_group(&user, "sshmcp-share");
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "owner").await;
    let shared = format!("{dir}/shared");
    remote_out(
        &mcp,
        &s,
        &format!("echo one > {shared}; chgrp sshmcp-share {shared}; chmod 664 {shared}"),
    )
    .await;
    let r = write(
        &mcp,
        &s,
        json!({"path": shared, "content": "two\n", "overwrite": true}),
    )
    .await;
    assert_eq!(r["created"], json!(null), "{r}");
    let r = edit(
        &mcp,
        &s,
        json!({"path": shared, "old_text": "two", "new_text": "three"}),
    )
    .await;
    assert_eq!(r["replacements"], 1, "{r}");
    let there = remote_out(
        &mcp,
        &s,
        &format!("cat {shared}; stat -c '%U:%G %a' {shared}"),
    )
    .await;
    assert_eq!(there, format!("three\n{user}:sshmcp-share 664\n"));
    remote_out(&mcp, &s, &format!("rm {shared}")).await;
    // The test runs as root: a file of `nobody`, writable by everyone.
    let theirs = std::path::PathBuf::from(format!("{dir}/theirs"));
    std::fs::write(&theirs, "theirs").unwrap();
    std::fs::set_permissions(&theirs, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let nobody = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("user nobody");
    nix::unistd::chown(&theirs, Some(nobody.uid), Some(nobody.gid)).unwrap();
    let path = theirs.display().to_string();
    let r = write(
        &mcp,
        &s,
        json!({"path": path, "content": "mine", "overwrite": true}),
    )
    .await;
    assert_eq!(code(&r), "remote_permission_denied", "{r}");
    let r = edit(
        &mcp,
        &s,
        json!({"path": path, "old_text": "theirs", "new_text": "mine"}),
    )
    .await;
    assert_eq!(code(&r), "remote_permission_denied", "{r}");
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "theirs");
    let there = remote_out(&mcp, &s, &format!("ls -A {dir}; stat -c %U {path}")).await;
    assert_eq!(
        there, "theirs\nnobody\n",
        "no temporary file left, the owner unchanged"
    );
    std::fs::remove_file(&theirs).unwrap();
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// The file tools under login shells that print before any command (a greeting on both
/// streams, a tcsh rc, stderr merged into stdout): their programs' answers are still whole.
#[tokio::test]
async fn file_tools_work_under_login_shells_that_print() {
    use sshmcp_tests::users::{Chatty, chatty_user};
    for kind in [Chatty::Bash, Chatty::Tcsh, Chatty::MergedBash] {
        let (_env, mcp, s) = crate::logged_in_as(&chatty_user(kind), &[]).await;
        let dir = fresh_dir(&mcp, &s, "chattyfiles").await;
        let path = format!("{dir}/sub/conf");
        let r = on_session(
            &mcp,
            &s,
            "make_directory",
            json!({"path": format!("{dir}/sub")}),
        )
        .await;
        assert_eq!(r["changed"], true, "{kind:?}: {r}");
        let r = write(&mcp, &s, json!({"path": path, "content": "port 8080\n"})).await;
        assert_eq!(r["created"], true, "{kind:?}: {r}");
        let r = edit(
            &mcp,
            &s,
            json!({"path": path, "old_text": "8080", "new_text": "9090",
                   "expected_sha256": r["sha256"]}),
        )
        .await;
        assert_eq!(r["replacements"], 1, "{kind:?}: {r}");
        assert_eq!(
            remote_out(&mcp, &s, &format!("cat {path}")).await,
            "port 9090\n",
            "{kind:?}"
        );
        let r = on_session(
            &mcp,
            &s,
            "remove_path",
            json!({"path": dir, "recursive": true}),
        )
        .await;
        assert_eq!(r["type"], "directory", "{kind:?}: {r}");
        mcp.close().await;
    }
}

/// A file the session's user may not write stays as it is, though its directory would let a
/// rename replace it; a file in a directory the user may not search is denied, never "not
/// found" (the file is there).
#[tokio::test]
async fn a_read_only_file_and_a_closed_directory_are_denied_and_left_as_they_were() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "readonly").await;
    let ro = format!("{dir}/ro.txt");
    write(
        &mcp,
        &s,
        json!({"path": ro, "content": "y\n", "mode": "0444"}),
    )
    .await;
    let r = write(
        &mcp,
        &s,
        json!({"path": ro, "content": "z\n", "overwrite": true}),
    )
    .await;
    assert_eq!(code(&r), "remote_permission_denied", "{r}");
    let r = edit(
        &mcp,
        &s,
        json!({"path": ro, "old_text": "y", "new_text": "z"}),
    )
    .await;
    assert_eq!(code(&r), "remote_permission_denied", "{r}");
    let r = write(&mcp, &s, json!({"path": ro, "content": "z\n"})).await;
    assert_eq!(code(&r), "remote_path_exists", "without overwrite: {r}");
    let closed = format!("{dir}/closed/f");
    remote_out(
        &mcp,
        &s,
        &format!("mkdir {dir}/closed && echo d > {closed} && chmod 600 {dir}/closed"),
    )
    .await;
    let r = edit(
        &mcp,
        &s,
        json!({"path": closed, "old_text": "d", "new_text": "e"}),
    )
    .await;
    assert_eq!(code(&r), "remote_permission_denied", "{r}");
    let r = write(
        &mcp,
        &s,
        json!({"path": closed, "content": "x", "expected_sha256": sha256_hex(b"d\n")}),
    )
    .await;
    assert_eq!(code(&r), "remote_permission_denied", "{r}");
    let there = remote_out(
        &mcp,
        &s,
        &format!("chmod 700 {dir}/closed; cat {ro} {closed}; stat -c %a {ro}; ls -A {dir}"),
    )
    .await;
    assert_eq!(there, "y\nd\n444\nclosed\nro.txt\n");
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}

/// Eight clients at once, each with the same `expected_sha256` (or the same edit of the same
/// text): exactly one changes the file, and every other is told it changed, round after
/// round. The user's writes and edits take turns.
#[tokio::test]
async fn of_eight_writers_with_one_hash_exactly_one_succeeds() {
    let (_env, mcp, s) = connected().await;
    let dir = fresh_dir(&mcp, &s, "cas8").await;
    let path = format!("{dir}/cas.txt");
    for round in 0..4 {
        let base = write(
            &mcp,
            &s,
            json!({"path": path, "content": "base\n", "overwrite": true}),
        )
        .await;
        let expected = &base["sha256"];
        let calls = (0..8).map(|i| {
            let (mcp, s, path) = (&mcp, &s, &path);
            async move {
                match round % 2 {
                    0 => {
                        let content = format!("writer {i}\n");
                        let args = json!({"path": path, "content": content, "expected_sha256": expected});
                        write(mcp, s, args).await
                    }
                    _ => {
                        let args = json!({"path": path, "old_text": "base", "new_text": format!("editor {i}"), "expected_sha256": expected});
                        edit(mcp, s, args).await
                    }
                }
            }
        });
        let answers = futures::future::join_all(calls).await;
        let won: Vec<usize> = (0..8).filter(|i| answers[*i]["ok"] == true).collect();
        assert_eq!(won.len(), 1, "round {round}: {answers:?}");
        for a in answers.iter().filter(|a| a["ok"] != true) {
            assert_eq!(code(a), "file_changed", "round {round}: {a}");
        }
        let who = if round % 2 == 0 { "writer" } else { "editor" };
        assert_eq!(
            remote_out(&mcp, &s, &format!("cat {path}")).await,
            format!("{who} {}\n", won[0])
        );
    }
    // Another user's lock on the directory (anyone who may read it can take one) holds
    // nothing up: the turns are taken on a file of the user's own.
    let mut holder = std::process::Command::new("flock")
        .args(["-x", &dir, "sleep", "60"])
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::process::Command::new("flock")
        .args(["-n", &dir, "true"])
        .status()
        .unwrap()
        .success()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the lock was never taken"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let r = write(
        &mcp,
        &s,
        json!({"path": path, "content": "free\n", "overwrite": true}),
    )
    .await;
    let group = nix::unistd::Pid::from_raw(holder.id() as i32);
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    let _ = holder.wait();
    assert_eq!(r["ok"], true, "{r}");
    remote_out(&mcp, &s, &format!("rm -r {dir}")).await;
    mcp.close().await;
}
