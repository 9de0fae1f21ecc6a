#!/usr/bin/env bash
# The side-by-side performance figures of issue 6 (docs/benchmarks.md): sshmcp, fast-mcp-ssh
# and raw OpenSSH against one throwaway sshd on loopback, in one run, each goal beside its
# ratio. Release builds; installs fast-mcp-ssh from crates.io into target/peers when missing.
# A measurement: it never fails on noise.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
peers=target/peers
if [ ! -x "$peers/bin/fast-mcp-ssh" ]; then
  cargo install --quiet --locked --version 0.5.1 --root "$peers" fast-mcp-ssh
fi
cargo build --release --workspace --bins --examples -q
exec target/release/examples/perf "$peers/bin/fast-mcp-ssh"
