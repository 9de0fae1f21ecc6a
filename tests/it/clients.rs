//! MCP clients we did not write drive the real shim: the official Python MCP SDK
//! (`tests/clients/sdk_client.py`) and the MCP Inspector's CLI each call every tool once
//! against the test's sshd.

use std::path::PathBuf;

use serde_json::Value;
use sshmcp_tests::TestEnv;

/// Where `scripts/test.sh` installs the MCP clients: beside the build, in the target dir.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.ancestors().nth(3).expect("target dir").to_path_buf()
}

/// The Python of the venv `scripts/test.sh` makes beside the build (`<target dir>/py-mcp`),
/// with the MCP SDK; a test fails loudly without it.
fn sdk_python() -> PathBuf {
    let python = target_dir().join("py-mcp/bin/python");
    assert!(
        python.exists(),
        "{} is missing: scripts/test.sh installs the Python MCP SDK there",
        python.display()
    );
    python
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
    assert_eq!(tools.len(), 30, "{tools:?}");
    assert_eq!(summary["protocolVersion"], protocol);
    env
}

/// The MCP Inspector's CLI that `scripts/test.sh` installs beside the build:
/// `<target dir>/inspector`.
fn inspector() -> PathBuf {
    target_dir().join("inspector/node_modules/.bin/mcp-inspector")
}

/// One Inspector CLI run against a fresh shim: `method` with `args`, its JSON answer. Every
/// run starts the shim anew; the session lives on in the daemon between runs.
async fn inspect(env: &TestEnv, method: &str, tool: Option<(&str, &[(&str, String)])>) -> Value {
    inspect_with(&env.env_vars(), method, tool).await
}

/// [`inspect`] with exactly `vars` for the Inspector's environment, which it passes on to the
/// server it starts.
async fn inspect_with(
    vars: &[(String, String)],
    method: &str,
    tool: Option<(&str, &[(&str, String)])>,
) -> Value {
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
        .envs(vars.iter().map(|(k, v)| (k, v)))
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
    assert_eq!(tools.len(), 30, "{tools:?}");

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
    // Removed when the test ends, however it ends; the Inspector's own `rm -r` is a call.
    let dir = crate::TestPath::new(format!(
        "/tmp/sshmcp-inspector-{}",
        sshmcp_tests::process::unique_sleep(1)
    ));
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
    assert_eq!(crate::text(&r["stdout"]), "hi\n");
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
    let r = call!("host_info", [("session_id", id), ("session_key", key)]);
    assert!(r["cpus"].as_u64().is_some_and(|n| n >= 1), "{r}");
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
/// Python's and Rust's on pipes (older Pythons a socket for stdin and a pipe for stdout). The
/// shim serves each: both sockets and both pipes on its one thread (no pool thread between a
/// message and the runtime, whose handoffs would wake a second thread per message), the mixed
/// pairs through tokio's handles; and it never makes the streams' shared descriptions
/// non-blocking, which whoever started it may still use.
#[test]
fn the_shim_serves_socket_pairs_and_pipes_on_its_one_thread() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    use std::process::{Command, Stdio};

    let env = TestEnv::new();
    for (socket_in, socket_out) in [(true, true), (false, false), (true, false), (false, true)] {
        let case = format!("stdin a socket: {socket_in}, stdout a socket: {socket_out}");
        let mut command = Command::new(sshmcp_tests::bins::path("sshmcp-mcp"));
        command
            .env_clear()
            .envs(env.env_vars())
            .stderr(Stdio::null());
        // The shim's end of one stream, and ours when it is a socket pair.
        let end = |socket: bool| -> (Stdio, Option<UnixStream>) {
            match socket {
                true => {
                    let (ours, theirs) = UnixStream::pair().unwrap();
                    (std::os::fd::OwnedFd::from(theirs).into(), Some(ours))
                }
                false => (Stdio::piped(), None),
            }
        };
        let ((stdin, ours_in), (stdout, ours_out)) = (end(socket_in), end(socket_out));
        let mut child = command
            .stdin(stdin)
            .stdout(stdout)
            .spawn()
            .expect("spawn sshmcp-mcp");
        drop(command);
        let mut input: Box<dyn Write> = match ours_in {
            Some(socket) => Box::new(socket),
            None => Box::new(child.stdin.take().unwrap()),
        };
        let mut output: BufReader<Box<dyn std::io::Read>> = BufReader::new(match ours_out {
            Some(socket) => Box::new(socket),
            None => Box::new(child.stdout.take().unwrap()),
        });
        let messages = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"session_list","arguments":{}}}"#,
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
            if message.contains(r#""id":3"#) {
                threads = std::fs::read_dir(format!("/proc/{}/task", child.id()))
                    .unwrap()
                    .map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).unwrap())
                    .collect();
            }
        }
        assert!(
            answers[0]["result"]["serverInfo"].is_object(),
            "{case}: {answers:?}"
        );
        for list in &answers[1..3] {
            assert!(
                list["result"]["tools"]
                    .as_array()
                    .is_some_and(|t| !t.is_empty()),
                "{case}"
            );
        }
        assert_eq!(
            answers[3]["result"]["isError"], false,
            "{case}: {answers:?}"
        );
        if socket_in == socket_out {
            assert_eq!(threads.len(), 1, "{case}, threads: {threads:?}");
        }
        for fd in [0, 1] {
            let info =
                std::fs::read_to_string(format!("/proc/{}/fdinfo/{fd}", child.id())).unwrap();
            let flags = info
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
                .expect("the descriptor's flags");
            assert_eq!(flags & 0o4000, 0, "{case}: fd {fd} made non-blocking");
        }
        drop(input);
        assert!(child.wait().unwrap().success(), "{case}");
    }
}

/// One daemon per user, whatever launched the client: the CLI in a terminal (with an
/// `XDG_RUNTIME_DIR` of its own) starts the daemon; an MCP server a launcher started with only
/// `PATH` and `HOME` finds that daemon and opens a session there, which the terminal's CLI
/// lists, as does the MCP Inspector started with only `PATH` and `HOME`. All use the default
/// runtime directory (no `SSHMCP_RUNTIME_DIR`), where no other test goes.
#[tokio::test]
async fn a_bare_environment_client_finds_the_terminals_daemon_and_sessions() {
    let mut env = TestEnv::with(&Default::default(), &[("SSHMCP_RUNTIME_DIR", "")]);
    let default = sshmcp_local::paths::RuntimePaths::resolve(None).dir;
    assert!(
        !default.join("sshmcpd.sock").exists(),
        "a daemon already uses {}: stop it first",
        default.display()
    );
    env.runtime_dir = default;
    let mut terminal = env.env_vars();
    terminal.push(("XDG_RUNTIME_DIR".into(), "/run/user/a-terminals-own".into()));
    let cli = |args: &[&str]| {
        std::process::Command::new(sshmcp_tests::bins::path("sshmcp"))
            .args(args)
            .env_clear()
            .envs(terminal.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap()
    };
    let out = cli(&["daemon", "start"]);
    assert!(out.status.success(), "{out:?}");
    let bare = vec![
        (
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_default(),
        ),
        ("HOME".to_string(), env.home.display().to_string()),
    ];
    let mcp = env.mcp_with_env(&bare).await;
    let (id, _key) = crate::connect(&mcp).await;
    let out = cli(&["sessions", "--json"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&id),
        "{out:?}"
    );
    mcp.close().await;
}

/// An agent of the Python MCP SDK works while the person watches and steps in with the CLI:
/// `sessions` lists the agent's session, `watch` shows its `exec` under way with an id,
/// `output` reads what it printed, `kill` stops it, and the agent's call answers with the
/// signal; `history` then has the agent's exec and the person's kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_sdk_agent_works_beside_the_persons_cli() {
    use std::io::BufRead as _;
    let python = sdk_python();
    let env = TestEnv::new();
    let marker = format!("beside-{}", std::process::id());
    let secs = sshmcp_tests::process::unique_sleep(60);
    let mut agent = std::process::Command::new(&python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/clients/sdk_agent.py"))
        .arg(format!("echo {marker}; sleep {secs}"))
        .arg("--")
        .arg(sshmcp_tests::bins::path("sshmcp-mcp"))
        .env_clear()
        .envs(env.env_vars())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the SDK agent");
    let mut said = std::io::BufReader::new(agent.stdout.take().unwrap()).lines();
    let connected: Value = serde_json::from_str(&said.next().unwrap().unwrap()).unwrap();
    let session = connected["session_id"].as_str().unwrap().to_string();
    let listed = env.cli(&["sessions", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["session_id"], session, "{listed}");

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let id = loop {
        let out = env.cli(&["watch", "--once", "--json"]);
        let snapshot: Value = serde_json::from_slice(&out.stdout).unwrap();
        let exec = &snapshot["sessions"][0]["execs"][0];
        if exec["last_line"] == marker.as_str() {
            break exec["id"].as_str().unwrap().to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never shown: {snapshot}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let out = env.cli(&["output", &id]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{marker}\n"));
    let out = env.cli(&["kill", "--yes", &id]);
    assert!(out.status.success(), "{out:?}");
    let answered: Value = serde_json::from_str(&said.next().unwrap().unwrap()).unwrap();
    assert_eq!(
        (&answered["ok"], &answered["exit_code"]),
        (&serde_json::json!(true), &Value::Null),
        "{answered}"
    );
    assert!(answered["signal"].is_string(), "{answered}");
    assert!(agent.wait().unwrap().success());

    let by_the_person = format!("{id} (by the person: sshmcp kill)");
    crate::oversight::history_until(&env, &["--session", &session], |lines| {
        lines.iter().any(|l| l["tool"] == "exec")
            && lines
                .iter()
                .any(|l| l["tool"] == "command_kill" && l["summary"] == by_the_person.as_str())
    });
}
