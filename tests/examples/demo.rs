//! The README's demo: a throwaway sshd, then the real `sshmcp-mcp` over stdio and the
//! `sshmcp` CLI (sessions, stop, the audit trail), each step printed. Run it with `scripts/demo.sh`.
#![allow(clippy::too_many_lines)] // A test scenario reads as one story.

use serde_json::{Value, json};
use sshmcp_tests::TestEnv;

fn show(step: &str, answer: &Value) {
    println!(
        "\n== {step}\n{}",
        serde_json::to_string_pretty(answer).unwrap()
    );
}

#[tokio::main]
async fn main() {
    let env = TestEnv::new();
    println!(
        "started a throwaway sshd on 127.0.0.1:{} (user {}, config {})",
        env.sshd.port,
        env.sshd.user,
        env.sshd.ssh_config.display()
    );
    let mcp = env.mcp().await;
    let tools: Vec<String> = mcp
        .list_tools()
        .await
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    println!(
        "sshmcp-mcp is up (it started the daemon); tools: {}",
        tools.join(", ")
    );

    let mut connected = mcp.call("connect", json!({"alias": "testbed"})).await;
    let id = connected["session_id"]
        .as_str()
        .expect("connected")
        .to_string();
    let key = connected["session_key"].as_str().unwrap().to_string();
    // The key is a secret: show only that one was issued.
    connected["session_key"] = json!(format!("{}… (secret, returned once)", &key[..4]));
    show("connect {\"alias\": \"testbed\"}", &connected);

    let run = |command: &str, extra: Value| {
        let mut args = json!({"session_id": id, "session_key": key, "command": command});
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        args
    };
    let r = mcp
        .call(
            "exec",
            run("uname -sr; id -un; echo oops >&2; exit 3", json!({})),
        )
        .await;
    show("exec: uname -sr; id -un; echo oops >&2; exit 3", &r);
    let r = mcp
        .call("exec", run("sleep 30", json!({"timeout": 1})))
        .await;
    show(
        "exec: sleep 30 with timeout 1 (the remote process group is killed)",
        &r,
    );
    let r = mcp.call("session_list", json!({})).await;
    show("session_list (never shows keys)", &r);

    let out = env.cli(&["sessions"]);
    println!(
        "\n== sshmcp sessions\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let r = mcp.call("disconnect", json!({"session_id": id})).await;
    show("disconnect", &r);
    mcp.close().await;
    // The daemon writes the trail from a thread of its own: a stop writes what is queued.
    let out = env.cli(&["daemon", "stop"]);
    println!(
        "\n== sshmcp daemon stop\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = env.cli(&["history"]);
    println!(
        "\n== sshmcp history (the audit trail: what the agent did, newest first)\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
