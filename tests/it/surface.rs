//! What an MCP client sees: the tool list and its schemas, the instructions, and the
//! `invalid_arguments` rule (field names only, never values or unknown names).

use serde_json::json;
use sshmcp_tests::TestEnv;

use crate::{code, connected, exec};

#[tokio::test]
async fn tools_publish_strict_inputs_output_schemas_and_annotations() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let tools = mcp.list_tools().await;
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "command_kill",
            "command_list",
            "command_start",
            "command_status",
            "connect",
            "copy_path",
            "disconnect",
            "download_start",
            "edit_file",
            "exec",
            "forward_list",
            "forward_start",
            "forward_stop",
            "host_info",
            "list_directory",
            "make_directory",
            "move_path",
            "read_file_range",
            "remove_path",
            "session_list",
            "stat",
            "sudo_exec",
            "task_kill",
            "task_launch",
            "task_status",
            "transfer_cancel",
            "transfer_list",
            "transfer_status",
            "upload_start",
            "write_file"
        ]
    );
    for tool in &tools {
        let name = &tool["name"];
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
        assert_eq!(tool["inputSchema"]["additionalProperties"], false, "{name}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{name}");
        assert!(
            tool["outputSchema"]["properties"]["ok"].is_object(),
            "{name}"
        );
        assert!(
            tool["outputSchema"]["properties"]["error"].is_object(),
            "{name}"
        );
        assert!(tool["annotations"]["title"].is_string(), "{name}");
        assert!(!tool["description"].as_str().unwrap().is_empty(), "{name}");
    }
    let exec = tools.iter().find(|t| t["name"] == "exec").unwrap();
    let required: Vec<&str> = exec["inputSchema"]["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(required, ["session_id", "session_key", "command"]);
    // A hint left out is the protocol's default: destructive, not idempotent.
    let hint = |tool: &serde_json::Value, name: &str, default: bool| {
        tool["annotations"][name].as_bool().unwrap_or(default)
    };
    assert!(hint(exec, "destructiveHint", true) && !hint(exec, "readOnlyHint", false));
    let kill = tools.iter().find(|t| t["name"] == "command_kill").unwrap();
    assert!(hint(kill, "destructiveHint", true));
    // Stopping what is already stopped changes nothing more: each stop is idempotent.
    for stop in [
        "command_kill",
        "task_kill",
        "forward_stop",
        "transfer_cancel",
        "disconnect",
    ] {
        let tool = tools.iter().find(|t| t["name"] == stop).unwrap();
        assert!(hint(tool, "idempotentHint", false), "{stop}");
    }
    // A forward opens a port that every local user can reach through the session.
    let forward = tools.iter().find(|t| t["name"] == "forward_start").unwrap();
    assert!(hint(forward, "destructiveHint", true));
    for read_only in [
        "session_list",
        "stat",
        "list_directory",
        "read_file_range",
        "command_status",
        "command_list",
        "task_status",
        "transfer_status",
        "transfer_list",
    ] {
        let tool = tools.iter().find(|t| t["name"] == read_only).unwrap();
        assert!(hint(tool, "readOnlyHint", false), "{read_only}");
    }
    let instructions = mcp.initialize_result["instructions"].as_str().unwrap();
    assert!(instructions.contains("session_key"));
    // Clients cut each description and the instructions at 2,048 bytes; the local root comes
    // first, as a client that cuts anything keeps it.
    let root = env.local_root.display().to_string();
    let at = instructions
        .find(&root)
        .expect("the instructions name the local root");
    assert!(at < 400, "the local root at byte {at}: {instructions}");
    assert!(instructions.len() <= 2048, "{} bytes", instructions.len());
    // A client that drops the instructions still learns it where `local_path` is described.
    let mut taking_local_paths = 0;
    for tool in &tools {
        if let Some(field) = tool["inputSchema"]["properties"].get("local_path") {
            let said = field["description"].as_str().unwrap_or("");
            assert!(
                said.starts_with(&format!("Relative to the local root, {root}.")),
                "{}: {said}",
                tool["name"]
            );
            taking_local_paths += 1;
        }
    }
    assert_eq!(taking_local_paths, 2, "download_start and upload_start");
    for tool in &tools {
        let described = tool["description"].as_str().unwrap();
        assert!(
            described.len() <= 2048,
            "{}: {} bytes",
            tool["name"],
            described.len()
        );
    }
    // What the model is shown (no output schemas) and the whole list, in compact JSON.
    let shown: Vec<serde_json::Value> = tools
        .iter()
        .map(|tool| {
            let mut tool = tool.clone();
            tool.as_object_mut().unwrap().remove("outputSchema");
            tool
        })
        .collect();
    let (shown, whole) = (
        json!(shown).to_string().len(),
        json!(tools).to_string().len(),
    );
    eprintln!("tools/list: {whole} bytes, {shown} bytes without output schemas");
    // What Claude Code shows stays within 32 KiB, the whole list within 70 KiB.
    assert!(
        shown <= 32 * 1024 && whole <= 70 * 1024,
        "tools/list grew: {whole} / {shown}"
    );
    // Every tool the instructions name in backquotes exists (or is a field or a state).
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let mentioned = instructions.split('`').skip(1).step_by(2);
    let not_tools = [
        "alias",
        "host",
        "user",
        "session_id",
        "session_key",
        "cwd",
        "cd",
        "local_path",
        "channels_busy",
        "utf-8",
        "timeout",
        "connection_lost",
        "invalid_session_key",
        "session_not_found",
        "session_not_ready",
        "internal_error",
        "policy_denied",
        "error.code",
        "error.started",
        "ok",
        "ok: true",
        "ok: false",
        "exit_code",
        "timed_out",
        "handoff_after",
        "next_offset",
        "wait_seconds",
        "operation_id",
        "sha256",
        "expected_sha256",
        "sha256sum",
        "echo",
        "cat",
        "sed",
        "sudo",
        "mv",
        "local",
        "remote",
        "dynamic",
        "~",
        "*_encoding",
        "base64",
    ];
    for word in mentioned {
        let command = word.starts_with("nohup") || word.starts_with("sshmcp daemon");
        assert!(
            names.contains(&word) || not_tools.contains(&word) || command,
            "the instructions name `{word}`, which is no tool: {instructions}"
        );
    }
    assert!(!instructions.contains("doctor"), "{instructions}");
    mcp.close().await;
}

/// `--tools` exposes only the chosen groups and tools, and the session tools always; the
/// instructions name only what is exposed; a hidden tool cannot be called; an unknown word
/// stops the shim before it serves, naming the groups.
#[tokio::test]
async fn the_tools_flag_exposes_only_the_chosen_tools() {
    let env = TestEnv::new();
    let mcp = env.mcp_with_args(&["--tools", "inspect,exec"]).await;
    let tools = mcp.list_tools().await;
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    let expected = [
        "connect",
        "disconnect",
        "exec",
        "host_info",
        "list_directory",
        "read_file_range",
        "session_list",
        "stat",
    ];
    assert_eq!(names, expected);
    let instructions = mcp.initialize_result["instructions"].as_str().unwrap();
    for word in instructions.split('`').skip(1).step_by(2) {
        let hidden = ["sudo_exec", "command_start", "write_file", "download_start"];
        assert!(!hidden.contains(&word), "{word}: {instructions}");
    }
    let s = crate::connect(&mcp).await;
    let r = exec(&mcp, &s, "echo exposed", json!({})).await;
    assert_eq!(r["exit_code"], 0, "{r}");
    // A hand-off would leave a handle no exposed tool can read: refused, nothing run.
    let r = exec(&mcp, &s, "echo handed", json!({"handoff_after": 1})).await;
    assert_eq!(code(&r), "invalid_arguments", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("command_status"),
        "{r}"
    );
    let args = json!({"session_id": s.0, "session_key": s.1, "path": "/tmp/x", "content": ""});
    let (_, rx) = mcp
        .start_request(
            "tools/call",
            json!({"name": "write_file", "arguments": args}),
        )
        .await;
    let refused = sshmcp_tests::mcp::wait_answer(rx).await;
    assert!(refused["error"]["message"].is_string(), "{refused}");
    mcp.close().await;
    let mcp = env.mcp_with_args(&["--tools", "read-only"]).await;
    let tools = mcp.list_tools().await;
    let read_only: Vec<&str> = sshmcp_proto::tool::Tool::all()
        .filter(|t| t.kept_read_only())
        .map(|t| t.name())
        .collect();
    assert!(
        tools
            .iter()
            .all(|t| read_only.contains(&t["name"].as_str().unwrap()))
    );
    assert_eq!(tools.len(), read_only.len());
    mcp.close().await;
    let out = env.mcp_refusing(&["--tools", "files,shell"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty(), "{said}");
    assert!(
        said.contains("`shell` is neither a tool nor a group"),
        "{said}"
    );
}

/// An empty `SSHMCP_RUNTIME_DIR` or `SSHMCP_LOCAL_ROOT` counts as unset, as for the CLI (a
/// client config may hold one); a relative runtime directory is refused at launch, where the
/// person who set it sees it, not in every call.
#[tokio::test]
async fn empty_variables_count_as_unset_and_a_relative_runtime_dir_is_refused_at_launch() {
    let env = TestEnv::new();
    let mut vars = env.env_vars();
    vars.push(("SSHMCP_LOCAL_ROOT".into(), String::new()));
    let mcp = env.mcp_with_env(&vars).await;
    let r = mcp.call("session_list", json!({})).await;
    assert_eq!(r["ok"], true, "{r}");
    mcp.close().await;
    let out = env.mcp_refusing(&["--runtime-dir", "relative/run"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && out.stdout.is_empty(), "{said}");
    assert!(said.contains("must be an absolute path"), "{said}");
}

#[tokio::test]
async fn invalid_arguments_name_fields_but_never_values_or_unknown_names() {
    let (env, mcp, s) = connected().await;
    let r = mcp.call("exec", json!({"command": "true"})).await;
    assert_eq!(code(&r), "invalid_arguments");
    assert_eq!(
        r["error"]["message"],
        "missing required fields: session_id, session_key"
    );
    // The fields it takes are named, never the ones sent.
    let r = exec(&mcp, &s, "true", json!({"zz_secret_field": "v"})).await;
    let said = r["error"]["message"].as_str().unwrap();
    assert!(
        said.starts_with("unknown fields were sent (it takes: command, cwd, "),
        "{said}"
    );
    assert!(!r.to_string().contains("zz_secret_field"));
    let r = mcp
        .call("disconnect", json!({"session_id": s.0, "session_key": s.1}))
        .await;
    assert_eq!(
        r["error"]["message"],
        "unknown fields were sent (it takes: session_id)"
    );
    let r = exec(&mcp, &s, "true", json!({"timeout": "SECRET-VALUE"})).await;
    assert_eq!(r["error"]["message"], "invalid value for field: timeout");
    assert!(!r.to_string().contains("SECRET-VALUE"));
    let r = mcp
        .call("connect", json!({"alias": "testbed", "host": "h"}))
        .await;
    assert_eq!(code(&r), "invalid_arguments");
    let r = mcp
        .call(
            "connect",
            json!({"host": "-oProxyCommand=evil", "user": "u"}),
        )
        .await;
    assert_eq!(code(&r), "invalid_arguments");
    assert!(!r.to_string().contains("evil"));
    // Shell syntax in a target could run in a local shell wherever the user's configuration
    // expands %h or %u into a command (OpenSSH before 9.6): refused before ssh sees it.
    let touched = format!("{}-touched", env.root.path().display());
    for args in [
        json!({"host": format!("$(touch {touched})"), "user": "u"}),
        json!({"host": "h", "user": format!("`touch {touched}`")}),
        json!({"alias": format!("box;touch {touched}")}),
        json!({"host": "h|id", "user": "u"}),
    ] {
        let r = mcp.call("connect", args).await;
        assert_eq!(code(&r), "invalid_arguments", "{r}");
        assert!(!r.to_string().contains("touch"), "{r}");
    }
    assert!(!std::path::Path::new(&touched).exists());
    let r = mcp.call("session_list", json!({"x": 1})).await;
    assert_eq!(
        r["error"]["message"],
        "unknown fields were sent (it takes none)"
    );
    mcp.close().await;
}

/// rmcp also speaks the 2026-07-28 revision, which has no initialize handshake: the metadata
/// rides on each request. The tools must work that way too.
#[tokio::test]
async fn stateless_protocol_requests_work_without_initialize() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let env = TestEnv::new();
    let mut child = tokio::process::Command::new(sshmcp_tests::bins::path("sshmcp-mcp"))
        .env_clear()
        .envs(env.env_vars())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "session_list", "arguments": {}, "_meta": meta}});
    stdin
        .write_all(format!("{request}\n").as_bytes())
        .await
        .unwrap();
    let line = lines.next_line().await.unwrap().expect("an answer");
    let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"ok": true, "sessions": []}),
        "{answer}"
    );
    drop(stdin);
    assert!(child.wait().await.unwrap().success());
}

/// What agents see, kept in review: the full `tools/list` (names, descriptions, schemas,
/// annotations). After an intended change, regenerate with
/// `SSHMCP_UPDATE_SNAPSHOTS=1 cargo nextest run -E 'test(tools_list_snapshot)'`.
#[tokio::test]
async fn tools_list_snapshot() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let mut tools = mcp.list_tools().await;
    tools.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    // The tools that take a `local_path` name this test's local root, a temporary directory.
    let root = env.local_root.display().to_string();
    let live = serde_json::to_string_pretty(&tools)
        .unwrap()
        .replace(&root, "<local root>")
        + "\n";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots/tools_list.json");
    if std::env::var_os("SSHMCP_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(path, &live).unwrap();
    }
    let stored = std::fs::read_to_string(path).expect("snapshot (see this test's doc)");
    assert!(
        live == stored,
        "tools/list changed; review and update {path}"
    );
    mcp.close().await;
}

/// Every property of a schema, nested and in definitions, carries a description.
fn undescribed(node: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    let Some(object) = node.as_object() else {
        return;
    };
    if let Some(props) = object.get("properties").and_then(|p| p.as_object()) {
        for (name, prop) in props {
            let said = SAID_ONCE.contains(&name.as_str())
                || name.ends_with(ENCODING_SAID_ONCE)
                || PATHS_SAID_ONCE.contains(&name.as_str())
                || prop["description"]
                    .as_str()
                    .is_some_and(|d| !d.trim().is_empty());
            if !said {
                out.push(format!("{path}.{name}"));
            }
            undescribed(prop, &format!("{path}.{name}"), out);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(inner) = object.get(key) {
            undescribed(inner, &format!("{path}[]"), out);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for inner in object
            .get(key)
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            undescribed(inner, path, out);
        }
    }
    for (name, def) in object
        .get("$defs")
        .and_then(|d| d.as_object())
        .into_iter()
        .flatten()
    {
        undescribed(def, &format!("{path}#{name}"), out);
    }
}

/// Fields the instructions describe once for every tool that takes them (connect answers
/// both; "pass both to the session's tools"): a description on each of 27 tools would cost
/// 1.4 KB of what the model reads and say nothing new. A tool whose session field means more
/// (any session to the host, the session that started the command) still says so.
const SAID_ONCE: &[&str] = &["session_id", "session_key"];

/// The remote path a tool works on, which the instructions say once ("Remote paths are
/// absolute or relative to home"): "Remote path." on seven fields told a reader nothing more.
const PATHS_SAID_ONCE: &[&str] = &["path", "remote_path"];

/// How a remote path that is not UTF-8 is given (`path_encoding`, `source_encoding`, ...),
/// which the instructions say once (`*_encoding`: `base64`): "`path`'s encoding." on each of
/// 13 fields cost 0.5 KB of what the model reads, beside a name and an enum that say it.
const ENCODING_SAID_ONCE: &str = "_encoding";

/// Every string value a schema allows (`enum` and `const`): words a description may quote.
fn schema_words(node: &serde_json::Value, out: &mut std::collections::HashSet<String>) {
    match node {
        serde_json::Value::Object(object) => {
            for (key, value) in object {
                match (key.as_str(), value) {
                    ("properties", serde_json::Value::Object(props)) => {
                        out.extend(props.keys().cloned());
                    }
                    ("const", serde_json::Value::String(s)) => {
                        out.insert(s.clone());
                    }
                    ("enum", serde_json::Value::Array(values)) => {
                        out.extend(values.iter().filter_map(|v| v.as_str().map(String::from)));
                    }
                    _ => {}
                }
                schema_words(value, out);
            }
        }
        serde_json::Value::Array(values) => values.iter().for_each(|v| schema_words(v, out)),
        _ => {}
    }
}

/// What agents read, held to the standard of `TOOL-DESCRIPTIONS.md`: every input field
/// described, every tool annotated with a title, and no description quoting (in backquotes) a
/// tool, field, value, error code or `sshmcp` command that does not exist. Output schemas are
/// structure only (no client shows them to a model; each description says what its answer
/// holds, and docs/tools.md names every answer field, a test below holds it).
#[tokio::test]
async fn every_field_is_described_and_every_quoted_name_exists() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let tools = mcp.list_tools().await;
    let instructions = mcp.initialize_result["instructions"].as_str().unwrap();
    assert!(
        SAID_ONCE.iter().all(|field| instructions.contains(field))
            && instructions.contains(&format!("`*{ENCODING_SAID_ONCE}`"))
            && instructions.contains("Remote paths are absolute"),
        "{instructions}"
    );
    let mut missing = Vec::new();
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        undescribed(&tool["inputSchema"], &format!("{name}:input"), &mut missing);
        let output = tool["outputSchema"].to_string();
        if output.contains("\"description\":\"") {
            missing.push(format!("{name}: an output schema without prose"));
        }
        if !tool["annotations"]["title"].is_string() {
            missing.push(format!("{name}: annotations with a title"));
        }
    }
    assert!(missing.is_empty(), "undescribed: {missing:#?}");

    let mut known: std::collections::HashSet<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    for tool in &tools {
        schema_words(tool, &mut known);
    }
    let errors =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/errors.md")).unwrap();
    known.extend(
        errors
            .lines()
            .filter_map(|l| l.strip_prefix("| `")?.split('`').next().map(String::from)),
    );
    let help = |args: &[&str]| {
        let out = std::process::Command::new(sshmcp_tests::bins::path("sshmcp"))
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .skip_while(|l| *l != "Commands:")
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next().map(String::from))
            .collect::<Vec<_>>()
    };
    let commands = help(&["--help"]);
    let daemon_commands = help(&["daemon", "--help"]);
    let instructions = mcp.initialize_result["instructions"].as_str().unwrap();
    let mut texts = vec![instructions.to_string()];
    for tool in &tools {
        let mut descriptions = std::collections::HashSet::new();
        collect_descriptions(tool, &mut descriptions);
        texts.extend(descriptions);
    }
    let mut unknown = Vec::new();
    for text in &texts {
        for quoted in text.split('`').skip(1).step_by(2) {
            let words: Vec<&str> = quoted.split_whitespace().collect();
            match words.as_slice() {
                ["sshmcp", "daemon", sub, ..] if !daemon_commands.iter().any(|c| c == sub) => {
                    unknown.push(quoted.to_string())
                }
                ["sshmcp", sub, ..] if *sub != "daemon" && !commands.iter().any(|c| c == sub) => {
                    unknown.push(quoted.to_string())
                }
                [word] if is_snake_name(word) && !known.contains(*word) => {
                    unknown.push(word.to_string())
                }
                _ => {}
            }
        }
    }
    unknown.sort();
    unknown.dedup();
    assert!(
        unknown.is_empty(),
        "quoted names that exist nowhere: {unknown:?}"
    );
    mcp.close().await;
}

/// A name in snake_case with at least one underscore: how tools, fields and codes are spelled.
fn is_snake_name(word: &str) -> bool {
    word.contains('_')
        && word.starts_with(|c: char| c.is_ascii_lowercase())
        && word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn collect_descriptions(node: &serde_json::Value, out: &mut std::collections::HashSet<String>) {
    match node {
        serde_json::Value::Object(object) => {
            for (key, value) in object {
                if let ("description", serde_json::Value::String(s)) = (key.as_str(), value) {
                    out.insert(s.clone());
                }
                collect_descriptions(value, out);
            }
        }
        serde_json::Value::Array(values) => {
            values.iter().for_each(|v| collect_descriptions(v, out))
        }
        _ => {}
    }
}

/// `docs/tools.md` cannot drift from what agents see: every tool of the live `tools/list` has
/// a section (a `## ` heading naming it) that names each of its input properties in
/// backquotes.
#[tokio::test]
async fn docs_tools_md_covers_every_tool_parameter_answer_field_and_error_code() {
    let env = TestEnv::new();
    let mcp = env.mcp().await;
    let tools = mcp.list_tools().await;
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/tools.md")).unwrap();
    let sections: Vec<(Vec<String>, String)> = doc
        .split("\n## ")
        .skip(1)
        .map(|section| {
            let (heading, body) = section.split_once('\n').unwrap_or((section, ""));
            let names = heading
                .split(',')
                .map(|n| n.trim().trim_matches('`').to_string());
            (names.collect(), body.to_string())
        })
        .collect();
    let errors =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/errors.md")).unwrap();
    // Each code is the first cell of a row of the table; other cells name tools and options.
    let codes: Vec<&str> = errors
        .lines()
        .filter_map(|row| row.strip_prefix("| `")?.split_once('`'))
        .map(|(code, _)| code)
        .collect();
    assert!(codes.contains(&"channels_busy"), "codes read: {codes:?}");
    let mut gaps = Vec::new();
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        let Some((_, body)) = sections
            .iter()
            .find(|(names, _)| names.iter().any(|n| n == name))
        else {
            gaps.push(format!("{name}: no section"));
            continue;
        };
        let params = tool["inputSchema"]["properties"].as_object();
        for param in params.into_iter().flat_map(|p| p.keys()) {
            let shared = param == "session_id" || param == "session_key";
            if !shared && !body.contains(&format!("`{param}`")) {
                gaps.push(format!("{name}: {param}"));
            }
        }
        // Its answer's fields (beyond the envelope's `ok` and `error`).
        let fields = tool["outputSchema"]["properties"].as_object();
        for field in fields.into_iter().flat_map(|p| p.keys()) {
            let envelope = field == "ok" || field == "error";
            if !envelope && !body.contains(&format!("`{field}`")) {
                gaps.push(format!("{name}: answer field {field}"));
            }
        }
        // The error codes its description names.
        let description = tool["description"].as_str().unwrap_or("");
        for code in backquoted(description) {
            if codes.contains(&code) && !body.contains(&format!("`{code}`")) {
                gaps.push(format!("{name}: error code {code}"));
            }
        }
    }
    assert!(gaps.is_empty(), "docs/tools.md lacks: {gaps:#?}");
    mcp.close().await;
}

/// The backquoted words of `text`, in order.
fn backquoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// A daemon binary that cannot be found is told so to the agent with where it was looked
/// for and what to set, and written to the MCP server's stderr, the client's log, for the
/// person.
#[tokio::test]
async fn a_missing_daemon_binary_says_where_it_was_looked_for() {
    let env = TestEnv::new();
    let mut vars = env.env_vars();
    vars.push(("SSHMCP_DAEMON".into(), "/nonexistent/sshmcpd".into()));
    let mcp = env.mcp_with_env(&vars).await;
    let r = mcp.call("session_list", json!({})).await;
    assert_eq!(code(&r), "daemon_unavailable", "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("SSHMCP_DAEMON"), "{message}");
    mcp.close().await;
    let logged: String = std::fs::read_dir(env.logs_dir())
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(logged.contains("no daemon: could not start"), "{logged}");
}
