# shellcheck shell=sh
started() {
  if [ -r "/proc/$1/stat" ]; then
    read -r s 2>/dev/null < "/proc/$1/stat" || return 1
    s=${s##*)}
    # shellcheck disable=SC2086 # the fields after the name, split on purpose
    set -- $s
    [ "$1" = Z ] && return 1
    echo "${20}"
  else
    ps -o lstart= -p "$1" 2>/dev/null
  fi
}
