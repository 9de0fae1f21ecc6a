#!/usr/bin/env bash
# The figures of port forwards in docs/benchmarks.md ("Port forwards"): throughput and latency
# of a local forward opened with forward_start against one opened with `ssh -O forward -L` on
# the same master. Release build. A measurement: it never fails on noise.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cargo build --release --workspace --bins --examples -q
exec target/release/examples/forwards
