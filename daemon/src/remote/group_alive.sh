# shellcheck shell=sh disable=SC2154 # g and _sshmcp_k come from the daemon
_gkill() {
  # shellcheck disable=SC2086 # -- or nothing
  kill "$1" $_sshmcp_k "-$g" 2>/dev/null
}
alive() {
  # shellcheck disable=SC2086 # -- or nothing
  if _e=$(LC_ALL=C kill -0 $_sshmcp_k "-$g" 2>&1); then
    [ -r /proc/self/stat ] || return 0
  else
    # No process this user may signal: none left ("No such process", in the C locale's
    # words), or only another user's (root's, when the command ran sudo itself), which
    # only /proc tells.
    case $_e in *'No such process'*) return 1 ;; esac
    [ -r /proc/self/stat ] || return 1
  fi
  if read -r s 2>/dev/null < "/proc/$g/stat"; then
    s=${s##*)}
    # shellcheck disable=SC2086 # the fields after the name, split on purpose
    set -- $s
    [ "$1" != Z ] && [ "$3" = "$g" ] && return 0
  fi
  for f in /proc/[0-9]*/stat; do
    read -r s 2>/dev/null < "$f" || continue
    s=${s##*)}
    # shellcheck disable=SC2086 # the fields after the name, split on purpose
    set -- $s
    [ "$3" = "$g" ] && case $1 in Z) ;; *) return 0;; esac
  done
  return 1
}
