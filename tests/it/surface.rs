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
        assert!(tool["annotations"]["readOnlyHint"].is_boolean(), "{name}");
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
    assert_eq!(exec["annotations"]["destructiveHint"], true);
    let kill = tools.iter().find(|t| t["name"] == "command_kill").unwrap();
    assert_eq!(kill["annotations"]["destructiveHint"], true);
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
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{read_only}");
    }
    let instructions = mcp.initialize_result["instructions"].as_str().unwrap();
    assert!(instructions.contains("session_key"));
    assert!(
        instructions.contains(&env.local_root.display().to_string()),
        "{instructions}"
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
        "timeout",
        "connection_lost",
        "invalid_session_key",
        "session_not_found",
        "session_not_ready",
        "internal_error",
        "error.code",
        "ok",
        "handoff_after",
        "next_offset",
        "wait_seconds",
        "operation_id",
        "sha256",
        "expected_sha256",
        "sha256sum",
        "echo",
        "sed -i",
        "mv",
        "local",
        "remote",
        "dynamic",
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

#[tokio::test]
async fn invalid_arguments_name_fields_but_never_values_or_unknown_names() {
    let (env, mcp, s) = connected().await;
    let r = mcp.call("exec", json!({"command": "true"})).await;
    assert_eq!(code(&r), "invalid_arguments");
    assert_eq!(
        r["error"]["message"],
        "missing required fields: session_id, session_key"
    );
    let r = exec(&mcp, &s, "true", json!({"zz_secret_field": "v"})).await;
    assert_eq!(r["error"]["message"], "unknown fields were sent");
    assert!(!r.to_string().contains("zz_secret_field"));
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
    assert_eq!(r["error"]["message"], "unknown fields were sent");
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
    let live = serde_json::to_string_pretty(&tools).unwrap() + "\n";
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
