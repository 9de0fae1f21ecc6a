# shellcheck shell=sh disable=SC2154 # _p, _sshmcp_fail (prelude.sh), _exists (files.sh) and _parents, _mode (the daemon) come before
if _exists; then
  if [ -d "$_p" ] && [ ! -L "$_p" ]; then
    printf 'ok same %s\n' "$(command stat -c %f -- "$_p")"
    exit 0
  fi
  echo exists
  exit 0
fi
set --
[ "$_parents" = 1 ] && set -- -p
[ -n "$_mode" ] && set -- "$@" -m "$_mode"
_e=$(command mkdir "$@" -- "$_p" 2>&1) || _mkdir_fail "$_parents" "$_e"
printf 'ok made %s\n' "$(command stat -c %f -- "$_p")"
