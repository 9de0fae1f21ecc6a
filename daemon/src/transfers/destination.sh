# shellcheck shell=sh disable=SC2154 # _p, _sshmcp_fail (prelude.sh) and _overwrite (the daemon) come before
unset CDPATH
command -v rsync >/dev/null 2>&1 || { echo 'ok norsync'; exit 0; }
_d=${_p%/*}
_d=${_d:-/}
_e=$(command stat -L -c %F -- "$_d" 2>&1) || _sshmcp_fail "$_e"
[ "$_e" = directory ] || { echo notdir; exit 0; }
if [ -L "$_p" ] || { [ -e "$_p" ] && [ ! -f "$_p" ]; }; then echo notfile; exit 0; fi
if [ -e "$_p" ] && [ "$_overwrite" = 0 ]; then echo exists; exit 0; fi
# -P: `..` after a symlink is its target's parent, where the checks above looked.
{ cd -P -- "$_d" 2>/dev/null && [ -w . ]; } || { echo denied; exit 0; }
_c=$(pwd -P; printf .)
_c=${_c%?.}
_i=$(command cat /etc/machine-id 2>/dev/null) || _i=
[ -n "$_i" ] || _i=$(uname -n)
printf 'ok %s %s\n%s' "$_i" "$(command stat -c %d:%i .)" "$_c"
