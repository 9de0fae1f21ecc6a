#!/usr/bin/env bash
# The figures of long work in docs/benchmarks.md ("Command handles"): hand-off cost, paging
# speed, the daemon's memory under a 1 GiB handle, progress cadence. Release build; needs
# about 1.1 GiB free under the temp directory. A measurement: it never fails on noise.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cargo build --release --workspace --bins --examples -q
exec target/release/examples/handles
