#!/usr/bin/env bash
# Every performance figure of issue 6 (docs/benchmarks.md) in one run: sshmcp, fast-mcp-ssh
# and raw OpenSSH against one throwaway sshd on loopback, each goal beside its ratio; then a
# 1 GiB transfer each way against raw rsync over the same master, and a local forward against
# `ssh -O forward -L` on the same master. Release builds; installs fast-mcp-ssh from crates.io
# into target/peers when missing; the transfers need about 4 GiB free under the temp
# directory. A measurement: it never fails on noise.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
peers=target/peers
if [ ! -x "$peers/bin/fast-mcp-ssh" ]; then
  cargo install --quiet --locked --version 0.5.1 --root "$peers" fast-mcp-ssh
fi
cargo build --release --workspace --bins --examples -q
target/release/examples/perf "$peers/bin/fast-mcp-ssh"
echo
echo "Transfers (goal: raw rsync / sshmcp ≥ 0.8× each way, verification included):"
target/release/examples/transfers
echo
# The transfers leave a GiB or two unwritten in the page cache: written back now, not by the
# machine during the forwards' rounds.
sync
echo "Port forwards (goal: forward_start ≥ 0.9× the throughput of ssh -O forward -L):"
target/release/examples/forwards
