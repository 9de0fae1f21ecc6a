#!/usr/bin/env bash
# Measures exec latency through MCP against `ssh -S` on the same master, and the daemon's
# idle memory, with release builds. Prints a markdown table (see docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cargo build --release --workspace --bins --examples -q
exec target/release/examples/bench
