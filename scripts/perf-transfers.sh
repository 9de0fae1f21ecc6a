#!/usr/bin/env bash
# The figures of transfers in docs/benchmarks.md ("Transfers"): a 1 GiB file each way through
# upload_start / download_start against raw rsync over the same master, in one run. Release
# build; needs about 4 GiB free under the temp directory. A measurement: it never fails on
# noise.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cargo build --release --workspace --bins --examples -q
exec target/release/examples/transfers
