#!/usr/bin/env bash
# The bytes a reference agent session of 30 everyday calls puts into the agent's context
# (docs/tools.md, "Lean answers"), through the real binaries against a throwaway sshd.
# A measurement: it never fails on a figure.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cargo build --workspace --bins --examples -q
exec target/debug/examples/answers
