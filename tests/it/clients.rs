//! MCP clients we did not write drive the real shim: the official Python MCP SDK
//! (`tests/clients/sdk_client.py`) and the MCP Inspector's CLI each call every tool once
//! against the test's sshd.

use std::path::PathBuf;

use serde_json::Value;
use sshmcp_tests::TestEnv;

/// The venv `scripts/test.sh` makes beside the build: `<target dir>/py-mcp`.
fn sdk_python() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let target = exe.ancestors().nth(3).expect("target dir");
    target.join("py-mcp/bin/python")
}

#[tokio::test]
async fn the_python_sdk_calls_every_tool_after_the_initialize_handshake() {
    python_sdk_calls_every_tool("legacy", "2025-11-25").await;
}

#[tokio::test]
async fn the_python_sdk_calls_every_tool_with_per_request_meta() {
    let env = python_sdk_calls_every_tool("modern", "2026-07-28").await;
    // No initialize: the client named itself in each request's `_meta`, and the trail has it.
    let out = env.cli(&["history", "--json", "--limit", "1"]);
    let line: Value = serde_json::from_slice(&out.stdout).expect("a trail line");
    assert!(
        line["client"]
            .as_str()
            .is_some_and(|c| c.starts_with("mcp ")),
        "{line}"
    );
}

/// Runs `tests/clients/sdk_client.py` in `mode` against a world of its own, which it returns.
async fn python_sdk_calls_every_tool(mode: &str, protocol: &str) -> TestEnv {
    let python = sdk_python();
    assert!(
        python.exists(),
        "{} is missing: scripts/test.sh installs the Python MCP SDK there",
        python.display()
    );
    let env = TestEnv::new();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/sdk_client.py");
    let out = tokio::process::Command::new(&python)
        .arg(script)
        .arg(format!("{}-{mode}", std::process::id()))
        .arg(mode)
        .arg("--")
        .arg(sshmcp_tests::bins::path("sshmcp-mcp"))
        .env_clear()
        .envs(env.env_vars())
        .output()
        .await
        .expect("run the SDK client");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}\n{stdout}");
    let summary: Value = serde_json::from_str(&stdout).expect("the client's JSON summary");
    let mut tools: Vec<&str> = summary["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    tools.sort_unstable();
    assert_eq!(
        summary["called"],
        serde_json::json!(tools),
        "every tool, once at least"
    );
    assert_eq!(tools.len(), 29, "{tools:?}");
    assert_eq!(summary["protocolVersion"], protocol);
    env
}

/// The MCP Inspector's CLI that `scripts/test.sh` installs beside the build:
/// `<target dir>/inspector`.
fn inspector() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let target = exe.ancestors().nth(3).expect("target dir");
    target.join("inspector/node_modules/.bin/mcp-inspector")
}

/// One Inspector CLI run against a fresh shim: `method` with `args`, its JSON answer. Every
/// run starts the shim anew; the session lives on in the daemon between runs.
async fn inspect(env: &TestEnv, method: &str, tool: Option<(&str, &[(&str, String)])>) -> Value {
    let mut cmd = tokio::process::Command::new(inspector());
    cmd.arg("--cli")
        .arg(sshmcp_tests::bins::path("sshmcp-mcp"))
        .args(["--method", method]);
    if let Some((name, args)) = tool {
        cmd.args(["--tool-name", name]);
        for (key, value) in args {
            cmd.args(["--tool-arg", &format!("{key}={value}")]);
        }
    }
    let out = cmd
        .env_clear()
        .envs(env.env_vars())
        .output()
        .await
        .expect("run the MCP Inspector CLI");
    assert!(
        out.status.success(),
        "{method} {tool:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the Inspector's JSON")
}

#[tokio::test]
async fn the_mcp_inspector_cli_calls_every_tool() {
    assert!(
        inspector().exists(),
        "{} is missing: scripts/test.sh installs the MCP Inspector there",
        inspector().display()
    );
    let env = TestEnv::new();
    let listed = inspect(&env, "tools/list", None).await;
    let mut tools: Vec<String> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    tools.sort_unstable();
    assert_eq!(tools.len(), 29, "{tools:?}");

    let mut called = std::collections::BTreeSet::new();
    // Calls `tool`; the answer's structured content, which must be `ok` or fail with one of
    // `codes`.
    macro_rules! call {
        ($tool:expr, [$(($k:expr, $v:expr)),* $(,)?] $(, $code:expr)*) => {{
            let args: Vec<(&str, String)> = vec![$(($k, $v.to_string())),*];
            let r = inspect(&env, "tools/call", Some(($tool, &args))).await;
            let answer = r["structuredContent"].clone();
            let codes: &[&str] = &[$($code),*];
            assert!(
                answer["ok"] == true || codes.contains(&answer["error"]["code"].as_str().unwrap_or("")),
                "{}: {r}",
                $tool
            );
            called.insert($tool.to_string());
            answer
        }};
    }
    let c = call!("connect", [("alias", "testbed")]);
    let (id, key) = (
        c["session_id"].as_str().unwrap().to_string(),
        c["session_key"].as_str().unwrap().to_string(),
    );
    let dir = format!(
        "/tmp/sshmcp-inspector-{}",
        sshmcp_tests::process::unique_sleep(1)
    );
    let file = format!("{dir}/a.txt");
    call!("session_list", []);
    let r = call!(
        "exec",
        [
            ("session_id", id),
            ("session_key", key),
            ("command", "echo hi")
        ]
    );
    assert_eq!(r["stdout"]["data"], "hi\n");
    // The test user has no sudo rights: a clear refusal is the expected answer.
    call!(
        "sudo_exec",
        [
            ("session_id", id),
            ("session_key", key),
            ("command", "true")
        ],
        "sudo_password_required",
        "sudo_not_allowed",
        "sudo_unavailable"
    );
    call!(
        "make_directory",
        [("session_id", id), ("session_key", key), ("path", dir)]
    );
    call!(
        "write_file",
        [
            ("session_id", id),
            ("session_key", key),
            ("path", file),
            ("content", "hello")
        ]
    );
    call!(
        "edit_file",
        [
            ("session_id", id),
            ("session_key", key),
            ("path", file),
            ("old_text", "hello"),
            ("new_text", "world")
        ]
    );
    call!(
        "stat",
        [("session_id", id), ("session_key", key), ("path", file)]
    );
    call!(
        "list_directory",
        [("session_id", id), ("session_key", key), ("path", dir)]
    );
    let r = call!(
        "read_file_range",
        [
            ("session_id", id),
            ("session_key", key),
            ("path", file),
            ("length", 100)
        ]
    );
    assert_eq!(r["data"], "world");
    call!(
        "copy_path",
        [
            ("session_id", id),
            ("session_key", key),
            ("source", file),
            ("destination", format!("{dir}/b.txt"))
        ]
    );
    call!(
        "move_path",
        [
            ("session_id", id),
            ("session_key", key),
            ("source", format!("{dir}/b.txt")),
            ("destination", format!("{dir}/c.txt"))
        ]
    );
    let h = call!(
        "command_start",
        [
            ("session_id", id),
            ("session_key", key),
            ("command", "sleep 30")
        ]
    );
    let handle = h["handle_id"].as_str().unwrap().to_string();
    call!(
        "command_status",
        [
            ("session_id", id),
            ("session_key", key),
            ("handle_id", handle)
        ]
    );
    call!("command_list", [("session_id", id), ("session_key", key)]);
    call!(
        "command_kill",
        [
            ("session_id", id),
            ("session_key", key),
            ("handle_id", handle)
        ]
    );
    let t = call!(
        "task_launch",
        [
            ("session_id", id),
            ("session_key", key),
            ("command", "sleep 30")
        ]
    );
    let pid = t["pid"].to_string();
    call!(
        "task_status",
        [("session_id", id), ("session_key", key), ("pid", pid)]
    );
    call!(
        "task_kill",
        [("session_id", id), ("session_key", key), ("pid", pid)]
    );
    // A transfer polled until it ended (each poll is a new Inspector run): it must complete.
    macro_rules! until_done {
        ($op:expr) => {{
            let mut tries = 0;
            loop {
                let st = call!(
                    "transfer_status",
                    [
                        ("session_id", id),
                        ("session_key", key),
                        ("operation_id", $op)
                    ]
                );
                match st["state"].as_str().unwrap() {
                    "queued" | "running" | "verifying" if tries < 50 => tries += 1,
                    state => {
                        assert_eq!(state, "completed", "{st}");
                        break;
                    }
                }
            }
        }};
    }
    let down = call!(
        "download_start",
        [
            ("session_id", id),
            ("session_key", key),
            ("remote_path", file),
            ("local_path", "inspector.txt")
        ]
    );
    until_done!(down["operation_id"].as_str().unwrap());
    let up = call!(
        "upload_start",
        [
            ("session_id", id),
            ("session_key", key),
            ("local_path", "inspector.txt"),
            ("remote_path", format!("{dir}/up.txt"))
        ]
    );
    let op = up["operation_id"].as_str().unwrap().to_string();
    until_done!(op);
    call!("transfer_list", [("session_id", id), ("session_key", key)]);
    call!(
        "transfer_cancel",
        [
            ("session_id", id),
            ("session_key", key),
            ("operation_id", op)
        ]
    );
    let f = call!(
        "forward_start",
        [
            ("session_id", id),
            ("session_key", key),
            ("kind", "dynamic")
        ]
    );
    call!("forward_list", [("session_id", id), ("session_key", key)]);
    call!(
        "forward_stop",
        [
            ("session_id", id),
            ("session_key", key),
            ("forward_id", f["forward_id"].as_str().unwrap())
        ]
    );
    // One file: the Inspector sends an optional boolean (`recursive`, typed boolean-or-null)
    // as a string, which the strict schema refuses.
    call!(
        "remove_path",
        [
            ("session_id", id),
            ("session_key", key),
            ("path", format!("{dir}/c.txt"))
        ]
    );
    let r = call!(
        "exec",
        [
            ("session_id", id),
            ("session_key", key),
            ("command", format!("rm -r {dir}"))
        ]
    );
    assert_eq!(r["exit_code"], 0, "{r}");
    call!("disconnect", [("session_id", id)]);
    assert_eq!(
        called.into_iter().collect::<Vec<_>>(),
        tools,
        "every tool, once at least"
    );
}

/// Node's clients (Claude Code, Cursor, the Inspector) start a server on Unix socket pairs,
/// Python's and Rust's on pipes. The shim serves both on its one thread: no pool thread
/// between a message and the runtime, whose handoffs would wake a second thread per message.
#[test]
fn the_shim_serves_socket_pairs_and_pipes_on_its_one_thread() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    use std::process::{Command, Stdio};

    let env = TestEnv::new();
    for sockets in [true, false] {
        let mut command = Command::new(sshmcp_tests::bins::path("sshmcp-mcp"));
        command
            .env_clear()
            .envs(env.env_vars())
            .stderr(Stdio::null());
        let (mut input, output): (Box<dyn Write>, Box<dyn std::io::Read>) = if sockets {
            let (ours_in, theirs_in) = UnixStream::pair().unwrap();
            let (ours_out, theirs_out) = UnixStream::pair().unwrap();
            command
                .stdin(std::os::fd::OwnedFd::from(theirs_in))
                .stdout(std::os::fd::OwnedFd::from(theirs_out));
            (Box::new(ours_in), Box::new(ours_out))
        } else {
            command.stdin(Stdio::piped()).stdout(Stdio::piped());
            (Box::new(std::io::sink()), Box::new(std::io::empty()))
        };
        let mut child = command.spawn().expect("spawn sshmcp-mcp");
        let mut output = match child.stdout.take() {
            Some(pipe) => BufReader::new(Box::new(pipe) as Box<dyn std::io::Read>),
            None => BufReader::new(output),
        };
        if let Some(pipe) = child.stdin.take() {
            input = Box::new(pipe);
        }
        drop(command);
        let messages = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"session_list","arguments":{}}}"#,
        ];
        let mut answers = Vec::new();
        let mut threads = Vec::new();
        for message in messages {
            writeln!(input, "{message}").unwrap();
            input.flush().unwrap();
            if message.contains(r#""id""#) {
                let mut line = String::new();
                output.read_line(&mut line).expect("an answer");
                answers.push(serde_json::from_str::<Value>(&line).expect("JSON-RPC"));
            }
            // Counted before the first tool call: starting the daemon takes its start lock on
            // a pool thread, once.
            if message.contains("tools/list") {
                threads = std::fs::read_dir(format!("/proc/{}/task", child.id()))
                    .unwrap()
                    .map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).unwrap())
                    .collect();
            }
        }
        assert!(
            answers[0]["result"]["serverInfo"].is_object(),
            "{answers:?}"
        );
        assert!(
            answers[1]["result"]["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty())
        );
        assert_eq!(answers[2]["result"]["isError"], false, "{answers:?}");
        assert_eq!(threads.len(), 1, "sockets: {sockets}, threads: {threads:?}");
        drop(input);
        assert!(child.wait().unwrap().success(), "sockets: {sockets}");
    }
}
