#!/usr/bin/env bash
# The main job, end to end: starts a throwaway sshd on 127.0.0.1, then drives the real
# sshmcp-mcp server over stdio (connect, exec, session_list, disconnect) and the sshmcp CLI
# (sessions, daemon stop, history), printing what happened. Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cargo build --workspace --bins --examples -q
exec target/debug/examples/demo
