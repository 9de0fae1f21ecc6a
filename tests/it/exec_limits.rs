//! Every exec limit at its edge: command size, timeout range, output cap; and memory that
//! stays bounded whatever a command prints.

use serde_json::json;
use sshmcp_tests::SshdOptions;

use crate::{code, connected, connected_with, exec};

const MIB: usize = 1_048_576;

/// A command of exactly `len` bytes that prints `ok`: a comment pads it (so it cannot travel
/// as one argv string: Linux caps those at 128 KiB).
fn command_of_len(len: usize) -> String {
    let head = "echo ok #";
    format!("{head}{}", "x".repeat(len - head.len()))
}

#[tokio::test]
async fn one_mebibyte_command_runs_and_one_byte_more_is_refused() {
    let (_env, mcp, s) = connected().await;
    let r = exec(&mcp, &s, &command_of_len(MIB), json!({})).await;
    assert_eq!(
        r["ok"],
        true,
        "{}",
        r.to_string().chars().take(300).collect::<String>()
    );
    assert_eq!(crate::text(&r["stdout"]), "ok\n");
    let r = exec(&mcp, &s, &command_of_len(MIB + 1), json!({})).await;
    assert_eq!(code(&r), "invalid_command");
    mcp.close().await;
}

#[tokio::test]
async fn timeout_range_edges() {
    let (_env, mcp, s) = connected().await;
    let r = exec(&mcp, &s, "true", json!({"timeout": 0.1})).await;
    assert_eq!(r["ok"], true, "{r}");
    let r = exec(&mcp, &s, "true", json!({"timeout": 0.09})).await;
    assert_eq!(code(&r), "invalid_arguments");
    assert!(r["error"]["message"].as_str().unwrap().contains("timeout"));
    let r = exec(&mcp, &s, "true", json!({"timeout": 86400})).await;
    assert_eq!(r["ok"], true, "{r}");
    let r = exec(&mcp, &s, "true", json!({"timeout": 86400.5})).await;
    assert_eq!(code(&r), "invalid_arguments");
    mcp.close().await;
}

#[tokio::test]
async fn output_exactly_at_the_cap_is_whole_and_one_byte_more_is_truncated() {
    let (_env, mcp, s) = connected_with(
        &SshdOptions::default(),
        &[("SSHMCP_MAX_OUTPUT_BYTES", "1000")],
    )
    .await;
    let r = exec(&mcp, &s, "head -c 1000 /dev/zero | tr '\\0' a", json!({})).await;
    assert_eq!(r["stdout"], "a".repeat(1000), "whole: the text itself");
    let r = exec(&mcp, &s, "head -c 1001 /dev/zero | tr '\\0' a", json!({})).await;
    assert_eq!(r["stdout"]["truncated"], true);
    assert_eq!(r["stdout"]["total_bytes"], 1001);
    assert_eq!(r["stdout"]["captured_bytes"], 1000);
    assert_eq!(r["stdout"]["omitted"], json!({"start": 500, "end": 501}));
    // Head and tail are kept: the beginning and the end are both visible.
    let r = exec(&mcp, &s, "seq 1 100000", json!({})).await;
    let data = crate::text(&r["stdout"]);
    assert!(data.starts_with("1\n2\n3\n"));
    assert!(data.ends_with("99999\n100000\n"));
    mcp.close().await;
}

#[tokio::test]
async fn huge_output_keeps_daemon_memory_bounded() {
    let (env, mcp, s) = connected().await;
    let r = exec(
        &mcp,
        &s,
        "head -c 300000000 /dev/zero",
        json!({"timeout": 120}),
    )
    .await;
    assert_eq!(
        r["stdout"]["total_bytes"], 300_000_000u64,
        "{}",
        r["stdout"]["total_bytes"]
    );
    assert_eq!(r["stdout"]["truncated"], true);
    let pid = env.daemon_pid().expect("daemon pid");
    let hwm_kb = sshmcp_tests::process::status_kib(pid, "VmHWM");
    assert!(
        hwm_kb < 100 * 1024,
        "daemon peak RSS {hwm_kb} kB for 300 MB of output"
    );
    mcp.close().await;
}
