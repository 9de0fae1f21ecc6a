//! stat, list_directory, read_file_range and host_info through the real binaries: every
//! kind of file, names with every awkward byte, paging a large directory, exact ranges, the
//! host's own facts, and the errors.

use base64::Engine as _;
use serde_json::{Value, json};
use sshmcp_tests::McpClient;

use crate::{code, connected, exec, on_session};

/// Runs a setup command that prints a directory; returns it.
async fn setup(mcp: &McpClient, s: &(String, String), command: &str) -> String {
    let r = exec(mcp, s, command, json!({"timeout": 60})).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    crate::text(&r["stdout"]).trim_end().to_string()
}

/// The bytes a string and its encoding carry.
fn bytes(data: &Value, encoding: &Value) -> Vec<u8> {
    let data = data.as_str().unwrap();
    // A lean answer leaves `utf-8` out.
    match encoding.as_str().unwrap_or("utf-8") {
        "utf-8" => data.as_bytes().to_vec(),
        "base64" => base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap(),
        other => panic!("encoding {other}"),
    }
}

/// A path given as bytes: text when UTF-8, else base64.
fn path_args(path: &[u8]) -> Value {
    match std::str::from_utf8(path) {
        Ok(p) => json!({"path": p}),
        Err(_) => json!({"path": base64::engine::general_purpose::STANDARD.encode(path),
                         "path_encoding": "base64"}),
    }
}

#[tokio::test]
async fn stat_describes_each_kind_of_file_and_names_what_went_wrong() {
    let (env, mcp, s) = connected().await;
    let d = setup(
        &mcp,
        &s,
        "d=$(mktemp -d) && cd \"$d\" && printf hello >f && chmod 640 f && mkdir sub && \
         ln -s f link && mkfifo fifo && mkdir locked && touch locked/x && chmod 000 locked && \
         touch -d '1960-06-01 00:00:00.25 UTC' old && echo \"$d\"",
    )
    .await;
    let stat = |path: String, follow: bool| {
        let mcp = &mcp;
        let s = &s;
        async move {
            on_session(
                mcp,
                s,
                "stat",
                json!({"path": path, "follow_symlinks": follow}),
            )
            .await
        }
    };
    let r = stat(format!("{d}/f"), false).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(
        (&r["type"], &r["size"], &r["mode"]),
        (&json!("file"), &json!(5), &json!("0640"))
    );
    assert_eq!(r["owner"], env.sshd.user, "{r}");
    assert!(r["mtime"].as_str().unwrap().ends_with('Z'), "{r}");
    assert_eq!(r["link_target"], Value::Null);
    // Times before 1970 are what they are, not the epoch.
    let r = stat(format!("{d}/old"), false).await;
    assert_eq!(r["mtime"], "1960-06-01T00:00:00.250Z", "{r}");
    let r = on_session(&mcp, &s, "list_directory", json!({"path": d})).await;
    let old = r["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "old");
    assert_eq!(old.unwrap()["mtime"], "1960-06-01T00:00:00.250Z", "{r}");
    let r = stat(format!("{d}/link"), false).await;
    assert_eq!(
        (&r["type"], &r["link_target"]),
        (&json!("symlink"), &json!("f")),
        "{r}"
    );
    assert_eq!(
        r["link_target_encoding"],
        json!(null),
        "utf-8 is left out: {r}"
    );
    let r = stat(format!("{d}/link"), true).await;
    assert_eq!((&r["type"], &r["size"]), (&json!("file"), &json!(5)), "{r}");
    assert_eq!(stat(format!("{d}/sub"), false).await["type"], "directory");
    assert_eq!(stat(format!("{d}/fifo"), false).await["type"], "fifo");
    assert_eq!(stat("/dev/null".into(), false).await["type"], "char_device");
    for missing in [format!("{d}/nope"), format!("{d}/f/under-a-file")] {
        assert_eq!(code(&stat(missing, false).await), "remote_path_not_found");
    }
    assert_eq!(
        code(&stat(format!("{d}/locked/x"), false).await),
        "remote_permission_denied"
    );
    let r = on_session(&mcp, &s, "stat", json!({"path": ""})).await;
    assert_eq!(code(&r), "invalid_arguments");
    // `~` is not expanded: refused, rather than taken as a file named `~` in home, and the
    // error names the argument that held it.
    for (tool, field, args) in [
        ("stat", "path", json!({"path": "~/.profile"})),
        (
            "write_file",
            "path",
            json!({"path": "~/x", "content": "x", "create_dirs": true}),
        ),
        ("make_directory", "path", json!({"path": "~"})),
        ("exec", "cwd", json!({"command": "true", "cwd": "~/"})),
        (
            "copy_path",
            "source",
            json!({"source": "~/.profile", "destination": format!("{d}/p")}),
        ),
        (
            "move_path",
            "destination",
            json!({"source": format!("{d}/f"), "destination": "~/f"}),
        ),
        (
            "download_start",
            "remote_path",
            json!({"remote_path": "~/.profile", "local_path": "tilde"}),
        ),
    ] {
        let r = on_session(&mcp, &s, tool, args).await;
        assert_eq!(code(&r), "invalid_arguments", "{tool}: {r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains("not expanded"), "{r}");
        assert!(message.starts_with(&format!("`{field}` ")), "{tool}: {r}");
    }
    let made = exec(
        &mcp,
        &s,
        "test -e \"$HOME/~\" && echo made || echo none",
        json!({}),
    )
    .await;
    assert_eq!(made["stdout"], "none\n", "{made}");
    exec(
        &mcp,
        &s,
        &format!("chmod 700 '{d}/locked'; rm -rf '{d}'"),
        json!({}),
    )
    .await;
    mcp.close().await;
}

/// Names with a space, a newline, a tab, a leading dash, quotes, a command substitution, a
/// backslash and bytes that are not UTF-8: each listed exactly, each stat'ed by the name the
/// listing gave, and nothing in them runs.
#[tokio::test]
async fn awkward_names_are_listed_and_stated_exactly_and_never_run() {
    let (_env, mcp, s) = connected().await;
    let names: Vec<&[u8]> = vec![
        b"a space",
        b"new\nline",
        b"tab\there",
        b"-dash",
        b"quote'd",
        b"dq\"x",
        b"$(touch pwned)",
        b"back\\slash",
        b"\xff\xfe",
        b"trailing newline\n",
    ];
    // Each name as printf octal escapes, so the setup itself never quotes one.
    let escaped: Vec<String> = names
        .iter()
        .map(|n| n.iter().map(|b| format!("\\{b:03o}")).collect())
        .collect();
    let touches: String = escaped
        .iter()
        .map(|e| format!("n=$(printf '{e}.'); touch -- \"${{n%.}}\" && "))
        .collect();
    let d = setup(
        &mcp,
        &s,
        &format!("d=$(mktemp -d) && cd \"$d\" && {touches} echo \"$d\""),
    )
    .await;
    let r = on_session(&mcp, &s, "list_directory", json!({"path": d})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(
        (&r["total"], &r["truncated"]),
        (&json!(names.len()), &json!(null)),
        "{r}"
    );
    let listed: Vec<Vec<u8>> = r["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| bytes(&e["name"], &e["name_encoding"]))
        .collect();
    // In byte order, as listed.
    let mut expected: Vec<Vec<u8>> = names.iter().map(|n| n.to_vec()).collect();
    expected.sort();
    assert_eq!(listed, expected, "{r}");
    for entry in r["entries"].as_array().unwrap() {
        assert_eq!(
            (&entry["type"], &entry["size"]),
            (&json!("file"), &json!(null)),
            "{entry}"
        );
        let mut path = format!("{d}/").into_bytes();
        path.extend(bytes(&entry["name"], &entry["name_encoding"]));
        // A name that is not UTF-8 comes with its path as base64, to pass back unchanged; a
        // UTF-8 one with none (the agent joins directory and name).
        if entry["name_encoding"] == "base64" {
            assert_eq!(entry["path_encoding"], "base64", "{entry}");
            assert_eq!(
                bytes(&entry["path"], &entry["path_encoding"]),
                path,
                "{entry}"
            );
            let args = json!({"path": entry["path"], "path_encoding": entry["path_encoding"]});
            let r = on_session(&mcp, &s, "stat", args).await;
            assert_eq!(
                (&r["ok"], &r["type"]),
                (&json!(true), &json!("file")),
                "{r} {entry}"
            );
        } else {
            assert_eq!(entry["path"], json!(null), "{entry}");
        }
        let r = on_session(&mcp, &s, "stat", path_args(&path)).await;
        assert_eq!(r["ok"], true, "{r} {entry}");
    }
    // A command substitution in a name would have run in the login directory or the listed
    // one.
    let probe = format!("ls -d ~/pwned '{d}/pwned' 2>/dev/null; true");
    let r = exec(&mcp, &s, &probe, json!({})).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    assert_eq!(
        r.get("stdout"),
        None,
        "nothing ran, so no stdout at all: {r}"
    );
    exec(&mcp, &s, &format!("rm -rf '{d}'"), json!({})).await;
    mcp.close().await;
}

/// A directory of 10,000 entries, read in pages of the largest limit: every entry once, in
/// order, `truncated` until the last page; limits at and past their bounds.
#[tokio::test]
async fn a_large_directory_comes_in_pages_without_gaps_or_repeats() {
    let (_env, mcp, s) = connected().await;
    let d = setup(
        &mcp,
        &s,
        "d=$(mktemp -d) && cd \"$d\" && seq -w 1 10000 | xargs touch && echo \"$d\"",
    )
    .await;
    let mut seen: Vec<String> = Vec::new();
    loop {
        let args = json!({"path": d, "offset": seen.len(), "limit": 1000});
        let r = on_session(&mcp, &s, "list_directory", args).await;
        assert_eq!(
            (&r["ok"], &r["total"]),
            (&json!(true), &json!(10_000)),
            "{r}"
        );
        let page = r["entries"].as_array().unwrap();
        assert_eq!(page.len(), 1000);
        seen.extend(page.iter().map(|e| e["name"].as_str().unwrap().to_string()));
        assert_eq!(
            r["truncated"].as_bool().unwrap_or(false),
            seen.len() < 10_000
        );
        if seen.len() >= 10_000 {
            break;
        }
    }
    let expected: Vec<String> = (1..=10_000).map(|i| format!("{i:05}")).collect();
    assert_eq!(seen, expected);
    let past = json!({"path": d, "offset": 10_000});
    let r = on_session(&mcp, &s, "list_directory", past).await;
    assert_eq!(
        (&r["entries"], &r["truncated"]),
        (&json!([]), &json!(null)),
        "{r}"
    );
    for limit in [0, 1001] {
        let args = json!({"path": d, "limit": limit});
        let r = on_session(&mcp, &s, "list_directory", args).await;
        assert_eq!(code(&r), "invalid_arguments", "{limit}: {r}");
    }
    let r = on_session(
        &mcp,
        &s,
        "list_directory",
        json!({"path": format!("{d}/00001")}),
    )
    .await;
    assert_eq!(code(&r), "invalid_remote_type");
    exec(&mcp, &s, &format!("rm -rf '{d}'"), json!({"timeout": 60})).await;
    mcp.close().await;
}

/// Ranges at the start, in the middle, the exact final range, past the end, of a binary
/// file, at the output cap and one past it; a directory, an unreadable file and a missing one.
#[tokio::test]
async fn read_file_range_returns_exact_ranges_and_no_more_than_the_cap() {
    let (_env, mcp, s) = connected().await;
    let d = setup(
        &mcp,
        &s,
        "d=$(mktemp -d) && cd \"$d\" && printf 0123456789 >ten && \
         i=0; while [ $i -lt 256 ]; do printf \"\\\\$(printf %o $i)\"; i=$((i+1)); done >bin && \
         head -c 100000 /dev/zero | tr '\\0' x >big && printf no >unreadable && \
         chmod 000 unreadable && echo \"$d\"",
    )
    .await;
    let read = |file: &str, offset: u64, length: u64| {
        let args = json!({"path": format!("{d}/{file}"), "offset": offset, "length": length});
        let (mcp, s) = (&mcp, &s);
        async move { on_session(mcp, s, "read_file_range", args).await }
    };
    let cases = [
        (0, 4, "0123", false),
        (4, 3, "456", false),
        (6, 4, "6789", true),
        (6, 100, "6789", true),
        (20, 5, "", true),
    ];
    for (offset, length, data, eof) in cases {
        let r = read("ten", offset, length).await;
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(
            (&r["data"], &r["eof"], &r["file_size"], &r["offset"]),
            (
                &json!(data),
                &json!(eof.then_some(true)),
                &json!(10),
                // 0, where a read starts by default, goes without saying.
                &json!(Some(offset).filter(|o| *o > 0))
            ),
            "{offset}+{length}: {r}"
        );
        assert_eq!(r["bytes_read"], data.len());
    }
    let r = read("bin", 0, 256).await;
    assert_eq!(
        (&r["encoding"], &r["eof"]),
        (&json!("base64"), &json!(true)),
        "{r}"
    );
    let got = base64::engine::general_purpose::STANDARD
        .decode(r["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(got, (0..=255u8).collect::<Vec<_>>());
    // The daemon's cap (64 KiB by default): exactly at it, and one past it.
    for length in [65_536, 65_537] {
        let r = read("big", 0, length).await;
        assert_eq!(
            (&r["bytes_read"], &r["eof"]),
            (&json!(65_536), &json!(null)),
            "{r}"
        );
    }
    assert_eq!(code(&read(".", 0, 1).await), "invalid_remote_type");
    assert_eq!(
        code(&read("unreadable", 0, 1).await),
        "remote_permission_denied"
    );
    assert_eq!(code(&read("missing", 0, 1).await), "remote_path_not_found");
    assert_eq!(code(&read("ten", 0, 0).await), "invalid_arguments");
    exec(&mcp, &s, &format!("rm -rf '{d}'"), json!({})).await;
    mcp.close().await;
}

/// Relative paths are taken from the login directory, as they are: a file named `-` is that
/// file (not stdin), and `~` is no shorthand (refused). A file whose
/// size `stat` does not know (/proc) still ends only at its real end; an offset past the end
/// gives nothing, however large.
#[tokio::test]
async fn relative_paths_pseudo_files_and_huge_offsets() {
    let (_env, mcp, s) = connected().await;
    let home = setup(
        &mcp,
        &s,
        "cd && rm -rf sshmcp-rel && mkdir -p sshmcp-rel/src && \
         printf dash > sshmcp-rel/- && touch sshmcp-rel/src/real && pwd",
    )
    .await;
    let r = on_session(&mcp, &s, "stat", json!({"path": "sshmcp-rel/-"})).await;
    assert_eq!((&r["type"], &r["size"]), (&json!("file"), &json!(4)), "{r}");
    let r = on_session(
        &mcp,
        &s,
        "read_file_range",
        json!({"path": "sshmcp-rel/-", "length": 9}),
    )
    .await;
    assert_eq!(
        (&r["data"], &r["eof"]),
        (&json!("dash"), &json!(true)),
        "{r}"
    );
    let r = on_session(
        &mcp,
        &s,
        "list_directory",
        json!({"path": "sshmcp-rel/src"}),
    )
    .await;
    assert_eq!(r["entries"][0]["name"], "real", "{r}");
    assert_eq!(
        r["entries"][0]["path"],
        json!(null),
        "joined by the agent: {r}"
    );
    let r = on_session(&mcp, &s, "stat", json!({"path": "~/sshmcp-rel"})).await;
    assert_eq!(code(&r), "invalid_arguments", "{r}");
    let r = on_session(
        &mcp,
        &s,
        "stat",
        json!({"path": format!("{home}/sshmcp-rel")}),
    )
    .await;
    assert_eq!(r["type"], "directory", "{r}");

    let mut whole = Vec::new();
    loop {
        let args = json!({"path": "/proc/self/status", "offset": whole.len(), "length": 100});
        let r = on_session(&mcp, &s, "read_file_range", args).await;
        assert_eq!(r["file_size"], 0, "{r}");
        whole.extend(bytes(&r["data"], &r["encoding"]));
        if r["eof"] == true {
            break;
        }
        assert_eq!(r["bytes_read"], 100, "{r}");
    }
    assert!(
        String::from_utf8_lossy(&whole).contains("\nPid:"),
        "read to the end"
    );
    // Past the end, however far (beyond what ext4 lets a file seek to, beyond i64): nothing.
    for offset in [1u64 << 45, u64::MAX] {
        let args = json!({"path": "sshmcp-rel/-", "offset": offset, "length": 1});
        let r = on_session(&mcp, &s, "read_file_range", args).await;
        assert_eq!(
            (&r["data"], &r["bytes_read"], &r["eof"]),
            (&json!(""), &json!(0), &json!(true)),
            "{r}"
        );
        let args = json!({"path": "sshmcp-rel", "offset": offset});
        let r = on_session(&mcp, &s, "list_directory", args).await;
        assert_eq!(
            (&r["entries"], &r["total"], &r["truncated"]),
            (&json!([]), &json!(2), &json!(null)),
            "{r}"
        );
    }
    exec(&mcp, &s, "rm -rf ~/sshmcp-rel", json!({})).await;
    mcp.close().await;
}

/// host_info tells a Linux host's facts; by default the space of home and `/`; for paths
/// asked, each in order, a missing one with only its path, a newline only part of a name;
/// 16 paths at most.
#[tokio::test]
async fn host_info_tells_the_hosts_facts_and_the_space_of_each_path() {
    let (_env, mcp, s) = connected().await;
    let r = on_session(&mcp, &s, "host_info", json!({})).await;
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["os"].as_str().is_some_and(|o| !o.is_empty()), "{r}");
    assert!(
        r["kernel"]
            .as_str()
            .is_some_and(|k| k.starts_with("Linux ")),
        "{r}"
    );
    assert!(r["arch"].as_str().is_some_and(|a| !a.is_empty()), "{r}");
    assert!(r["cpus"].as_u64().is_some_and(|n| n >= 1), "{r}");
    let (total, available) = (
        r["memory_total"].as_u64().unwrap(),
        r["memory_available"].as_u64().unwrap(),
    );
    assert!(total >= available && available > 0, "{r}");
    assert_eq!(r["load"].as_array().map(Vec::len), Some(3), "{r}");
    assert!(r["uptime"].as_f64().is_some_and(|u| u > 0.0), "{r}");
    let filesystems = r["filesystems"].as_array().unwrap();
    let paths: Vec<&str> = filesystems
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    let home = setup(&mcp, &s, "echo \"$HOME\"").await;
    assert_eq!(paths, [home.as_str(), "/"], "{r}");
    for fs in filesystems {
        let (total, free) = (
            fs["total_bytes"].as_u64().unwrap(),
            fs["free_bytes"].as_u64().unwrap(),
        );
        assert!(total >= free && total > 0, "{fs}");
        assert!(
            fs["mount"].as_str().is_some_and(|m| m.starts_with('/')),
            "{fs}"
        );
    }

    let dir = setup(
        &mcp,
        &s,
        "d=$(mktemp -d '/tmp/-sshmcp host info.XXXXXX') && echo \"$d\"",
    )
    .await;
    let gone = format!("{dir}/no such dir");
    let r = on_session(&mcp, &s, "host_info", json!({"paths": [dir, gone]})).await;
    let filesystems = r["filesystems"].as_array().unwrap();
    assert_eq!(filesystems[0]["path"], dir.as_str(), "{r}");
    assert!(filesystems[0]["free_bytes"].is_u64(), "{r}");
    assert_eq!(filesystems[1], json!({"path": gone}), "{r}");

    // At the bound, and one past it.
    let sixteen = vec![dir.clone(); 16];
    let r = on_session(&mcp, &s, "host_info", json!({"paths": sixteen})).await;
    assert_eq!(r["filesystems"].as_array().map(Vec::len), Some(16), "{r}");
    let seventeen = vec![dir.clone(); 17];
    let r = on_session(&mcp, &s, "host_info", json!({"paths": seventeen})).await;
    assert_eq!(code(&r), "invalid_arguments", "{r}");
    let r = on_session(&mcp, &s, "host_info", json!({"paths": ["/tmp\u{0}"]})).await;
    assert_eq!(code(&r), "invalid_arguments", "{r}");
    // A newline is part of a name, never a second path.
    let odd = format!("{dir}/a\nb");
    setup(&mcp, &s, &format!("mkdir '{odd}' && echo made")).await;
    let r = on_session(&mcp, &s, "host_info", json!({"paths": [odd]})).await;
    assert_eq!(r["filesystems"][0]["path"], odd.as_str(), "{r}");
    assert!(r["filesystems"][0]["total_bytes"].is_u64(), "{r}");
    setup(&mcp, &s, &format!("rm -r '{dir}' && echo done")).await;
    mcp.close().await;
}

/// A path of exactly 4,095 bytes reaches the host, one of 4,096 does not; a name longer than
/// the host takes is refused without the path repeated (invalid arguments name no values).
#[tokio::test]
async fn the_path_limit_at_its_edge_and_a_name_too_long() {
    let (_env, mcp, s) = connected().await;
    let mut path = String::from("/tmp");
    while path.len() + 201 < 4095 {
        path.push('/');
        path.push_str(&"d".repeat(200));
    }
    path.push('/');
    path.push_str(&"e".repeat(4095 - path.len()));
    assert_eq!(path.len(), 4095);
    let r = on_session(&mcp, &s, "stat", json!({"path": path})).await;
    assert_eq!(code(&r), "remote_path_not_found", "{r}");
    let r = on_session(&mcp, &s, "stat", json!({"path": format!("{path}e")})).await;
    assert_eq!(code(&r), "invalid_arguments", "{r}");
    let name = "n".repeat(256);
    for tool in ["stat", "make_directory"] {
        let r = on_session(&mcp, &s, tool, json!({"path": format!("/tmp/{name}")})).await;
        assert_eq!(code(&r), "invalid_arguments", "{tool}: {r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(!message.contains(&name), "{tool}: {message}");
    }
    mcp.close().await;
}
