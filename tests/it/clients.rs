//! MCP clients we did not write drive the real shim: the official Python MCP SDK calls every
//! tool once against the test's sshd (`tests/clients/sdk_client.py`).

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
async fn the_python_sdk_calls_every_tool() {
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
        .arg(std::process::id().to_string())
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
    assert_eq!(summary["protocolVersion"], "2025-11-25");
}
