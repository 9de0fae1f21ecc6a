#!/usr/bin/env bash
# The quick latency check: sshmcp's own figures from the side-by-side benchmark (perf.sh)
# without a peer (raw OpenSSH still runs beside it). Release builds; see docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cargo build --release --workspace --bins --examples -q
exec target/release/examples/perf
