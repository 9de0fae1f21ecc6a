#!/usr/bin/env bash
# Runs the whole test suite: unit tests and the end-to-end tests against a real sshd on
# 127.0.0.1 (each test starts its own). Installs what the tests need first.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
# One test logs in as a user whose login shell is tcsh, to prove commands reach /bin/sh
# unchanged whatever the login shell.
if [ ! -x /usr/bin/tcsh ]; then
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tcsh >/dev/null
  else
    echo "the tests need tcsh: sudo apt-get install -y tcsh" >&2
    exit 1
  fi
fi
# The remote programs are tested under every shell a host may have as /bin/sh: BusyBox (as
# on Alpine) and a strict POSIX shell beside dash and bash, and checked by shellcheck;
# `sshmcp watch` in a real terminal, tmux's.
for tool in busybox:busybox-static posh:posh tmux:tmux shellcheck:shellcheck dash:dash; do
  if ! command -v "${tool%%:*}" >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${tool#*:}" >/dev/null
    else
      echo "the tests need ${tool#*:}: sudo apt-get install -y ${tool#*:}" >&2
      exit 1
    fi
  fi
done
# The real-client tests drive the MCP server with the official Python MCP SDK, from a venv
# beside the build (the tests find it there).
py="${CARGO_TARGET_DIR:-target}/py-mcp"
if ! "$py/bin/python" -c 'import mcp' >/dev/null 2>&1; then
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        python3 python3-venv >/dev/null
    else
      echo "the tests need Python's venv: sudo apt-get install -y python3 python3-venv" >&2
      exit 1
    fi
  fi
  rm -rf "$py"
  python3 -m venv "$py"
  "$py/bin/pip" install -q mcp==2.3.0
fi
# And with the MCP Inspector's CLI, from npm into a folder beside the build (0.15.0 asks for no
# particular Node and runs on Node 20; 0.17 and later ask for Node 22).
inspector="${CARGO_TARGET_DIR:-target}/inspector"
if [ ! -x "$inspector/node_modules/.bin/mcp-inspector" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        nodejs npm >/dev/null
    else
      echo "the tests need Node.js and npm: sudo apt-get install -y nodejs npm" >&2
      exit 1
    fi
  fi
  mkdir -p "$inspector"
  npm install --silent --no-audit --no-fund --prefix "$inspector" \
    @modelcontextprotocol/inspector@0.15.0
fi
# As root the end-to-end tests make test accounts (`sshmcp-*`), a group and a sudoers file
# (README, "Try it"); they all go when the suite ends, whatever its outcome.
# While the suite runs it holds a shared lock, so that another run's cleanup leaves the
# accounts it uses alone.
if [ "$(id -u)" = 0 ]; then
  mkdir -p /var/lib/sshmcp-tests
  chmod 700 /var/lib/sshmcp-tests
  exec 9>/var/lib/sshmcp-tests/run.lock
  flock -s 9
  trap 'flock -u 9; scripts/test-cleanup.sh' EXIT
fi
# The end-to-end tests drive the real binaries: build them all first.
cargo build --workspace --bins
if cargo nextest --version >/dev/null 2>&1; then
  # As an ordinary user, the tests that need root are left out, and said so: each of them
  # would fail (never skip) without it.
  if [ "$(id -u)" != 0 ] && ! [[ " $* " == *" --profile"* ]]; then
    echo "as an ordinary user: the tests that need root are left out (profile unprivileged in" \
      ".config/nextest.toml); run as root for all of them" >&2
    set -- --profile unprivileged "$@"
  fi
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi
