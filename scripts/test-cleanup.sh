#!/usr/bin/env bash
# Removes what the end-to-end tests made on this machine as root: the sudoers rule and the
# other files first, then the test accounts (their processes ended first, their homes with
# them), then the groups, as the harness's ledger lists them (tests/src/users.rs, LEDGER).
# scripts/test.sh runs it when the suite ends; run it yourself after running the tests another
# way. Only what the ledger lists goes, and only names the harness uses: an account that was
# there before the suite stays. While another test run is under way, nothing is removed.
set -uo pipefail
dir=/var/lib/sshmcp-tests
ledger=$dir/made
[ -e "$ledger" ] || exit 0
[ "$(id -u)" = 0 ] || { echo "removing the test users needs root" >&2; exit 1; }
# Root removes what the ledger names: it must be root's alone, or anyone could choose.
if [ -L "$dir" ] || [ -L "$ledger" ] || [ "$(stat -c %u:%a "$dir")" != 0:700 ] \
  || [ "$(stat -c %u:%a "$ledger")" != 0:600 ]; then
  echo "refusing $ledger: it and $dir must be root's alone (0600, 0700)" >&2
  exit 1
fi
# scripts/test.sh holds this lock shared while its suite runs.
exec 9>"$dir/run.lock"
if ! flock -n -x 9; then
  echo "another test run is under way: the test accounts stay until it ends" >&2
  exit 0
fi
# No test process adds to the ledger while it is read.
exec 8>"$dir/users.lock"
flock -x 8
removed=0
failed=0
fail() { echo "scripts/test-cleanup.sh: $*" >&2; failed=1; }
for kind in path user group; do
  while read -r what name; do
    [ "$what" = "$kind" ] || continue
    case $kind:$name in
      path:/etc/sudoers.d/sshmcp-tests | path:/var/tmp/sshmcp-busybox-like \
        | path:/var/lib/sshmcp-tests/busybox) ;;
      user:sshmcp-* | group:sshmcp-*)
        case ${name#sshmcp-} in *[!a-z0-9-]* | '') fail "not a test name: $kind $name"; continue ;; esac ;;
      *) fail "not something the tests make: $kind $name"; continue ;;
    esac
    case $kind in
      path)
        [ -e "$name" ] || [ -L "$name" ] || continue
        rm -rf -- "$name" || { fail "could not remove $name"; continue; }
        ;;
      user)
        id -u "$name" >/dev/null 2>&1 || continue
        # By real and effective uid: a sudo the user started runs as root on its behalf.
        pkill -KILL -U "$name"; pkill -KILL -u "$name"
        # userdel refuses a user that still owns a process; killed ones go within moments.
        for _ in $(seq 50); do
          pgrep -U "$name" >/dev/null || pgrep -u "$name" >/dev/null || break
          sleep 0.1
        done
        userdel -r "$name" >/dev/null 2>&1
        if id -u "$name" >/dev/null 2>&1; then
          userdel "$name" || { fail "could not remove user $name"; continue; }
        fi
        ;;
      group)
        getent group "$name" >/dev/null || continue
        groupdel "$name" || { fail "could not remove group $name"; continue; }
        ;;
    esac
    removed=$((removed + 1))
  done <"$ledger"
done
[ "$failed" = 0 ] && rm -f -- "$ledger"
echo "removed what the tests made: $removed accounts, groups and files (scripts/test-cleanup.sh)" >&2
exit "$failed"
