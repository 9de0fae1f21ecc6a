#!/usr/bin/env bash
# Installs what sshmcp's demo and tests need on Debian/Ubuntu: OpenSSH server and client,
# rsync, sudo and iproute2 (network namespaces for the link-loss test). As root it installs
# them with apt; otherwise it prints the command to run.
set -euo pipefail

missing=()
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
command -v sudo >/dev/null 2>&1 || missing+=(sudo)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)

if [ ${#missing[@]} -gt 0 ]; then
  pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
  else
    echo "sshmcp needs: $pkgs" >&2
    echo "install them with: sudo apt-get install -y $pkgs" >&2
    exit 1
  fi
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "sshmcp needs a Rust toolchain (1.89 or newer): https://rustup.rs" >&2
  exit 1
fi

# A root sshd refuses to start without its privilege separation directory.
if [ "$(id -u)" = 0 ]; then
  mkdir -p /run/sshd && chmod 0755 /run/sshd
fi
