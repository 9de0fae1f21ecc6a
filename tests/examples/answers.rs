//! What a reference agent session costs the agent's context (docs/tools.md, "Lean answers"):
//! the bytes of `structuredContent` (what Claude Code shows the model) of 30 everyday calls
//! through the real binaries against a throwaway sshd on loopback. Run it with
//! `scripts/answers.sh` (`SHOW=1` prints each answer). A measurement, never a test.
#![allow(clippy::too_many_lines)] // A test scenario reads as one story.

use serde_json::{Value, json};
use sshmcp_tests::mcp::call_ok as call;
use sshmcp_tests::{SshdOptions, TestEnv};

/// The calls made and their answers' sizes, in order.
#[derive(Default)]
struct Tally {
    calls: Vec<(String, usize)>,
}

impl Tally {
    fn note(&mut self, tool: &str, answer: &Value) -> Value {
        if std::env::var_os("SHOW").is_some() {
            eprintln!("{tool}: {answer}");
        }
        self.calls
            .push((tool.to_string(), answer.to_string().len()));
        answer.clone()
    }
}

#[tokio::main]
async fn main() {
    let env = TestEnv::with(&SshdOptions::default(), &[("SSHMCP_LOG", "warn")]);
    let mcp = env.mcp().await;
    let mut tally = Tally::default();
    let r = tally.note(
        "connect",
        &mcp.call("connect", json!({"alias": "testbed"})).await,
    );
    let s = sshmcp_tests::mcp::session_of(&r);
    let dir = format!("/tmp/sshmcp-answers-{}", std::process::id());
    // Ten short commands, the first of which make what the file tools then look at: a
    // directory of 20 entries and a text file of 1,000 short lines (3,893 bytes).
    let commands = [
        format!("mkdir -p {dir} && cd {dir} && touch $(seq -f 'file-%02g.txt' 1 19)"),
        format!("seq 1 1000 > {dir}/log.txt"),
        "uname -sr".to_string(),
        "id -un".to_string(),
        "printf hi".to_string(),
        "echo $HOME".to_string(),
        "df -h / | tail -n 1".to_string(),
        "date -u +%F".to_string(),
        "test -d /etc && echo yes".to_string(),
        "ls /nonexistent-dir 2>&1; true".to_string(),
    ];
    for command in &commands {
        let r = call(&mcp, &s, "exec", json!({"command": command})).await;
        tally.note("exec", &r);
    }
    let at = |name: &str| format!("{dir}/{name}");
    let steps = [
        ("stat", json!({"path": at("log.txt")})),
        ("stat", json!({"path": dir})),
        ("list_directory", json!({"path": dir})),
        (
            "read_file_range",
            json!({"path": at("log.txt"), "length": 4096}),
        ),
        (
            "write_file",
            json!({"path": at("notes.txt"), "content": "first\n"}),
        ),
        (
            "edit_file",
            json!({"path": at("notes.txt"), "old_text": "first", "new_text": "second"}),
        ),
        ("make_directory", json!({"path": at("sub")})),
        (
            "copy_path",
            json!({"source": at("notes.txt"), "destination": at("sub/copy.txt")}),
        ),
        (
            "move_path",
            json!({"source": at("sub/copy.txt"), "destination": at("sub/moved.txt")}),
        ),
    ];
    for (tool, args) in steps {
        let r = call(&mcp, &s, tool, args).await;
        tally.note(tool, &r);
    }
    let r = mcp.call("session_list", json!({})).await;
    tally.note("session_list", &r);
    let h = call(
        &mcp,
        &s,
        "command_start",
        json!({"command": "sleep 1; seq 1 5"}),
    )
    .await;
    tally.note("command_start", &h);
    let id = h["handle_id"].clone();
    let r = call(&mcp, &s, "command_status", json!({"handle_id": id})).await;
    tally.note("command_status", &r);
    let args = json!({"handle_id": id, "wait_seconds": 10});
    let r = call(&mcp, &s, "command_status", args).await;
    tally.note("command_status", &r);
    let r = call(&mcp, &s, "command_list", json!({})).await;
    tally.note("command_list", &r);
    let args = json!({"remote_path": at("log.txt"), "local_path": "answers/log.txt",
                      "overwrite": true});
    let d = call(&mcp, &s, "download_start", args).await;
    tally.note("download_start", &d);
    // Polled until it ends; only the final report counts, as an agent that waits well makes
    // one such call.
    let report = loop {
        let args = json!({"operation_id": d["operation_id"]});
        let r = call(&mcp, &s, "transfer_status", args).await;
        if !["queued", "running", "verifying"].contains(&r["state"].as_str().unwrap_or("")) {
            break r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    tally.note("transfer_status", &report);
    let r = call(&mcp, &s, "transfer_list", json!({})).await;
    tally.note("transfer_list", &r);
    let r = call(
        &mcp,
        &s,
        "remove_path",
        json!({"path": dir, "recursive": true}),
    )
    .await;
    tally.note("remove_path", &r);
    let r = mcp.call("disconnect", json!({"session_id": s.0})).await;
    tally.note("disconnect", &r);
    mcp.close().await;

    let total: usize = tally.calls.iter().map(|(_, bytes)| bytes).sum();
    let mut by_tool: Vec<(String, usize, usize)> = Vec::new();
    for (tool, bytes) in &tally.calls {
        match by_tool.iter_mut().find(|(name, _, _)| name == tool) {
            Some(entry) => {
                entry.1 += 1;
                entry.2 += bytes;
            }
            None => by_tool.push((tool.clone(), 1, *bytes)),
        }
    }
    for (tool, calls, bytes) in &by_tool {
        println!("{tool:16} {calls:2} calls {bytes:6} bytes");
    }
    println!(
        "reference session: {} calls, {total} bytes of structuredContent",
        tally.calls.len()
    );
}
