# shellcheck shell=sh
# _own FILE: whether FILE is the session user's own regular file with one link.
_own() {
  _o=$(command stat -c '%h %u %F' -- "$1" 2>/dev/null) || return 1
  # shellcheck disable=SC2086 # the fields, split on purpose
  set -- $_o
  _u=$(command id -u) || return 1
  [ "$1 $2 $3 $4" = "1 $_u regular file" ] || [ "$1 $2 $3 $4 $5" = "1 $_u regular empty file" ]
}
