#!/usr/bin/env bash
# Checks and lints the whole workspace, tests included, for macOS on Apple silicon and on
# Intel, from this machine: nothing is linked or run, so no macOS SDK is needed. Installs
# the two targets' standard libraries with rustup when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(aarch64-apple-darwin x86_64-apple-darwin)
if ! command -v rustup >/dev/null 2>&1; then
  echo "checking the macOS builds needs rustup (https://rustup.rs)" >&2
  exit 1
fi
installed=$(rustup target list --installed)
for target in "${targets[@]}"; do
  grep -qx "$target" <<<"$installed" || rustup target add "$target"
done
for target in "${targets[@]}"; do
  echo "== $target"
  cargo clippy --workspace --all-targets --target "$target" -- -D warnings
done
