# shellcheck shell=sh disable=SC2154 # d and p come from the daemon, started from started.sh
marked() {
  v=$(tr '\0' '\n' 2>/dev/null < "/proc/$1/environ") || return 1
  [ -n "$v" ] || return 2
  case "
$v
" in *"
SSHMCP_TASK=$p:$m
"*) return 0 ;; esac
  return 1
}
is_task() {
  [ -f "$d/$p.start" ] || return 1
  read -r m < "$d/$p.start" || return 1
  [ -n "$m" ] || return 1
  l=$(started "$p")
  if [ -n "$l" ]; then [ "$l" = "$m" ]; return; fi
  [ -r /proc/self/stat ] || return 1
  e=
  for f in /proc/[0-9]*/stat; do
    read -r s 2>/dev/null < "$f" || continue
    s=${s##*)}
    # shellcheck disable=SC2086 # the fields after the name, split on purpose
    set -- $s
    { [ "$3" = "$p" ] && [ "$1" != Z ]; } || continue
    q=${f#/proc/}; q=${q%/stat}
    marked "$q" && return 0
    [ $? = 2 ] && e="$e $q"
  done
  [ -n "$e" ] || return 1
  sleep 1 & z=$!
  while [ -n "$e" ] && kill -0 "$z" 2>/dev/null; do
    sleep 0.02; w=$e; e=
    # shellcheck disable=SC2086 # a list of PIDs, split on purpose
    for q in $w; do
      marked "$q" && { kill "$z" 2>/dev/null; wait "$z"; return 0; }
      [ $? = 2 ] && e="$e $q"
    done
  done
  kill "$z" 2>/dev/null; wait "$z"
  return 1
}
