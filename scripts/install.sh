#!/usr/bin/env bash
# Installs sshmcp in one command: builds the three release binaries (sshmcpd, sshmcp-mcp,
# sshmcp) and puts them side by side in ~/.local/bin, or PREFIX/bin, making the folder; then
# says whether that folder is on PATH and what to run next. Run it again to upgrade (then
# `sshmcp daemon restart`: sessions are kept).
#
# usage: scripts/install.sh [--prefix DIR]        (needs Rust's cargo: https://rustup.rs)
set -euo pipefail
cd "$(dirname "$0")/.."

prefix="${PREFIX:-$HOME/.local}"
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    *) echo "usage: scripts/install.sh [--prefix DIR]" >&2; exit 2 ;;
  esac
done
cargo=${CARGO:-cargo}
if ! command -v "$cargo" >/dev/null 2>&1; then
  echo "scripts/install.sh needs Rust's cargo: https://rustup.rs" >&2
  exit 1
fi
"$cargo" build --release --locked -p sshmcpd -p sshmcp-mcp -p sshmcp --bins
built="${CARGO_TARGET_DIR:-target}/release"
bin="$prefix/bin"
mkdir -p "$bin"
for name in sshmcpd sshmcp-mcp sshmcp; do
  install -m 0755 "$built/$name" "$bin/$name"
done
echo "installed sshmcpd, sshmcp-mcp and sshmcp in $bin"
case ":$PATH:" in
  *":$bin:"*) ;;
  *) echo "$bin is not on your PATH: add  export PATH=\"$bin:\$PATH\"  to your shell's profile" ;;
esac
echo "next, the line that adds sshmcp to your MCP client:  $bin/sshmcp mcp-config"
