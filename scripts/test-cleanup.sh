#!/usr/bin/env bash
# Removes what the end-to-end tests made on this machine as root: the test accounts (their
# processes ended first, their homes with them), the groups and the system files listed in
# the harness's ledger (tests/src/users.rs, LEDGER). scripts/test.sh runs it when the suite
# ends; run it yourself after running the tests another way. Only what the ledger lists goes:
# an account that was there before the suite stays.
set -euo pipefail
ledger=/var/tmp/sshmcp-tests-made
[ -f "$ledger" ] || exit 0
[ "$(id -u)" = 0 ] || { echo "removing the test users needs root" >&2; exit 1; }
removed=0
# Users first: a group that is some user's primary group cannot go before that user.
for kind in user group path; do
  while read -r what name; do
    [ "$what" = "$kind" ] || continue
    case $kind in
      user)
        id -u "$name" >/dev/null 2>&1 || continue
        pkill -KILL -u "$name" 2>/dev/null || true
        # userdel refuses a user that still owns a process; killed ones go within moments.
        for _ in $(seq 50); do pgrep -u "$name" >/dev/null || break; sleep 0.1; done
        userdel -r "$name" >/dev/null 2>&1 || userdel "$name"
        ;;
      group) getent group "$name" >/dev/null && groupdel "$name" ;;
      path) rm -rf -- "$name" ;;
    esac
    removed=$((removed + 1))
  done <"$ledger"
done
rm -f -- "$ledger" /tmp/sshmcp-test-users.lock
echo "removed what the tests made: $removed accounts, groups and files (scripts/test-cleanup.sh)" >&2
