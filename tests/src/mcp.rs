//! An MCP client for tests: drives the real `sshmcp-mcp` over stdio with hand-written
//! JSON-RPC, matches answers to requests by id (so calls can run concurrently), and fails the
//! test if the server ever writes anything but JSON-RPC to stdout.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// Session keys seen in `connect` answers, shared with the test's world.
pub type IssuedKeys = Arc<Mutex<Vec<String>>>;

pub struct McpClient {
    child: Child,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Pending,
    next_id: AtomicU64,
    /// Lines on stdout that were not JSON-RPC: must stay empty.
    stray: Arc<Mutex<Vec<String>>>,
    /// Notifications from the server, in arrival order.
    notifications: Arc<Mutex<Vec<Value>>>,
    pub initialize_result: Value,
}

/// How long any single answer may take in a test before it counts as hung.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

impl McpClient {
    /// Starts `argv` (the shim, possibly behind a wrapper such as `ip netns exec`).
    pub async fn start(
        argv: &[String],
        env: &[(String, String)],
        log_dir: &Path,
        keys: IssuedKeys,
    ) -> Self {
        std::fs::create_dir_all(log_dir).ok();
        static SHIMS: AtomicU64 = AtomicU64::new(0);
        let n = SHIMS.fetch_add(1, Ordering::Relaxed);
        let stderr_log = log_dir.join(format!("shim-{n}.stderr"));
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(stderr_log)
            .unwrap();
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn sshmcp-mcp");
        let stdout = child.stdout.take().unwrap();
        let pending: Pending = Arc::default();
        let stray: Arc<Mutex<Vec<String>>> = Arc::default();
        let notifications: Arc<Mutex<Vec<Value>>> = Arc::default();
        let (p, s, k, n) = (pending.clone(), stray.clone(), keys, notifications.clone());
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let msg: Value = match serde_json::from_str(&line) {
                    Ok(v) => v,
                    Err(_) => {
                        s.lock().unwrap().push(line);
                        continue;
                    }
                };
                if msg.get("id").is_none() {
                    n.lock().unwrap().push(msg);
                    continue;
                }
                if let Some(key) = msg["result"]["structuredContent"]["session_key"].as_str() {
                    k.lock().unwrap().push(key.to_string());
                }
                let waiter = msg
                    .get("id")
                    .and_then(Value::as_u64)
                    .and_then(|id| p.lock().unwrap().remove(&id));
                if let Some(tx) = waiter {
                    let _ = tx.send(msg);
                }
            }
        });
        let mut client = Self {
            stdin: tokio::sync::Mutex::new(child.stdin.take()),
            child,
            pending,
            next_id: AtomicU64::new(1),
            stray,
            notifications,
            initialize_result: Value::Null,
        };
        let init = client
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "sshmcp-tests", "version": "0"}}),
            )
            .await;
        client.initialize_result = init["result"].clone();
        assert!(
            client.initialize_result.is_object(),
            "initialize failed: {init}"
        );
        client.notify("notifications/initialized", json!({})).await;
        client
    }

    async fn send(&self, msg: Value) {
        let mut stdin = self.stdin.lock().await;
        let stdin = stdin.as_mut().expect("stdin open");
        stdin
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .expect("write to shim");
        stdin.flush().await.unwrap();
    }

    /// Sends a request; the receiver yields the whole JSON-RPC response.
    pub async fn start_request(
        &self,
        method: &str,
        params: Value,
    ) -> (u64, oneshot::Receiver<Value>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        (id, rx)
    }

    pub async fn request(&self, method: &str, params: Value) -> Value {
        let (_, rx) = self.start_request(method, params).await;
        wait_answer(rx).await
    }

    pub async fn notify(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// Starts a tool call without waiting; see [`tool_answer`].
    pub async fn start_call(&self, tool: &str, args: Value) -> (u64, oneshot::Receiver<Value>) {
        self.start_request("tools/call", json!({"name": tool, "arguments": args}))
            .await
    }

    /// Calls a tool and returns its structured answer (`{ok, ...}`), checking the envelope.
    pub async fn call(&self, tool: &str, args: Value) -> Value {
        let (_, rx) = self.start_call(tool, args).await;
        tool_answer(wait_answer(rx).await)
    }

    /// Calls a tool with a progress token; the `notifications/progress` for it arrive in
    /// [`McpClient::progress_of`].
    pub async fn call_with_progress(&self, tool: &str, args: Value, token: &str) -> Value {
        let params = json!({"name": tool, "arguments": args, "_meta": {"progressToken": token}});
        let (_, rx) = self.start_request("tools/call", params).await;
        tool_answer(wait_answer(rx).await)
    }

    /// The `params` of every progress notification for `token` so far, in arrival order.
    pub fn progress_of(&self, token: &str) -> Vec<Value> {
        self.notifications
            .lock()
            .unwrap()
            .iter()
            .filter(|m| {
                m["method"] == "notifications/progress" && m["params"]["progressToken"] == token
            })
            .map(|m| m["params"].clone())
            .collect()
    }

    /// How many progress notifications arrived so far, for any token.
    pub fn all_progress(&self) -> usize {
        self.notifications
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .count()
    }

    pub async fn cancel(&self, request_id: u64) {
        self.notify(
            "notifications/cancelled",
            json!({"requestId": request_id, "reason": "test cancels"}),
        )
        .await;
    }

    /// The server process's pid.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("a running server")
    }

    pub async fn list_tools(&self) -> Vec<Value> {
        let r = self.request("tools/list", json!({})).await;
        r["result"]["tools"].as_array().cloned().expect("tools")
    }

    /// Closes stdin, waits for a clean exit, and checks stdout carried only JSON-RPC.
    pub async fn close(mut self) {
        self.stdin.lock().await.take();
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("shim exits after stdin closes")
            .unwrap();
        assert!(status.success(), "shim exit status {status}");
        let stray = self.stray.lock().unwrap().clone();
        assert!(stray.is_empty(), "non-MCP output on stdout: {stray:?}");
    }

    /// Kills the shim process (an agent crashing).
    pub async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }
}

pub async fn wait_answer(rx: oneshot::Receiver<Value>) -> Value {
    tokio::time::timeout(ANSWER_TIMEOUT, rx)
        .await
        .expect("answer in time")
        .expect("answer")
}

/// The structured answer of a tool call, after checking the MCP envelope: the same JSON as
/// text content, and `isError` exactly when `ok` is false.
pub fn tool_answer(response: Value) -> Value {
    let result = &response["result"];
    let structured = result["structuredContent"].clone();
    assert!(structured.is_object(), "no structuredContent: {response}");
    let text = result["content"][0]["text"].as_str().expect("text content");
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), structured);
    let ok = structured["ok"].as_bool().expect("ok flag");
    assert_eq!(
        result["isError"].as_bool().unwrap_or(false),
        !ok,
        "{response}"
    );
    structured
}

/// The structured answer of a call started with [`McpClient::start_call`].
pub async fn answer(rx: oneshot::Receiver<Value>) -> Value {
    tool_answer(wait_answer(rx).await)
}

/// The text of a stream in an answer: a lean answer gives a complete UTF-8 stream as its
/// text, any other as an object with `data` (base64 when `encoding` says so), and leaves an
/// empty one out.
pub fn text(stream: &Value) -> &str {
    stream
        .as_str()
        .or_else(|| stream["data"].as_str())
        .unwrap_or("")
}

/// The (session_id, session_key) pair of a successful `connect` answer.
pub fn session_of(connected: &Value) -> (String, String) {
    let field = |name: &str| {
        connected[name]
            .as_str()
            .unwrap_or_else(|| panic!("connect failed: {connected}"))
            .to_string()
    };
    (field("session_id"), field("session_key"))
}

/// Calls `tool` on session `s` with `args` (an object) merged in, and insists on `ok`: for the
/// measurement examples, where a failure ends the run.
pub async fn call_ok(mcp: &McpClient, s: &(String, String), tool: &str, args: Value) -> Value {
    let mut all = json!({"session_id": s.0, "session_key": s.1});
    if let (Some(all), Some(args)) = (all.as_object_mut(), args.as_object()) {
        all.extend(args.clone());
    }
    let r = mcp.call(tool, all).await;
    assert_eq!(r["ok"], true, "{tool}: {r}");
    r
}
