//! The churn figures of docs/reliability.md: `clients` MCP clients (default 50), each on its
//! own server identity, cycle connect → exec → disconnect for `seconds` (default 60); the
//! daemon's descriptors, children, masters and memory are printed before and after.
//!
//! `cargo run --release -p sshmcp-tests --example churn -- [clients] [seconds]` (as root: it
//! creates the test user and starts its own sshd on loopback).
#![allow(clippy::too_many_lines)] // A test scenario reads as one story.

use std::time::Duration;

use sshmcp_tests::churn::{Footprint, churn};
use sshmcp_tests::{SshdOptions, TestEnv};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let clients: usize = args.next().map_or(50, |a| a.parse().expect("clients"));
    let seconds: u64 = args.next().map_or(60, |a| a.parse().expect("seconds"));
    let opts = SshdOptions {
        extra_ports: clients - 1,
        ..SshdOptions::default()
    };
    let env = TestEnv::with(
        &opts,
        &[("SSHMCP_LOG", "info"), ("SSHMCP_MAX_SESSIONS", "64")],
    );
    assert!(env.cli(&["daemon", "start"]).status.success());
    let idle = Footprint::of(&env);
    // One short round first: what the daemon allocates once (threads, pools) is not churn.
    churn(&env, clients, 1, Duration::from_secs(60)).await;
    let warm = Footprint::settle_to(&env, idle).await;
    let report = churn(&env, clients, u64::MAX, Duration::from_secs(seconds)).await;
    let after = Footprint::settle_to(&env, idle).await;
    println!(
        "clients {clients}, {:.1} s: {} cycles, {} failed ({:.1} cycles/s)",
        report.elapsed.as_secs_f64(),
        report.cycles,
        report.failures,
        report.cycles as f64 / report.elapsed.as_secs_f64()
    );
    println!("| | fds | children | masters | RSS KiB |");
    println!("|---|---|---|---|---|");
    for (name, f) in [
        ("idle, before any client", idle),
        ("after one round", warm),
        ("after the churn", after),
    ] {
        println!(
            "| {name} | {} | {} | {} | {} |",
            f.fds, f.children, f.masters, f.rss_kib
        );
    }
}
