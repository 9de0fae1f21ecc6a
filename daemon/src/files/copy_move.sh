# shellcheck shell=sh disable=SC2154 # _p, _sshmcp_fail (prelude.sh), the functions (files.sh) and _q64, _move, _overwrite (the daemon) come before
_second_path
_exists || { echo notfound; exit 0; }
_f=$(command stat -c %f -- "$_p" 2>&1) || _sshmcp_fail "$_f"
if [ -e "$_q" ] || [ -L "$_q" ]; then
  [ "$_overwrite" = 1 ] || { echo exists; exit 0; }
  if [ -d "$_q" ] && [ ! -L "$_q" ]; then echo exists; exit 0; fi
fi
# _s is what goes into place: the source itself, or its fresh copy.
if [ "$_move" = 1 ]; then
  _s=$_p
else
  _qd=${_q%/*}
  _qd=${_qd:-/}
  _t=$(command mktemp -d "$_qd/.sshmcp-copy.XXXXXXXXXX" 2>&1) || _sshmcp_fail "$_t"
  trap 'command rm -rf -- "$_t"' EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
  _s=$_t/copy
  _e=$(command cp -a -T -- "$_p" "$_s" 2>&1) || _sshmcp_fail "$_e"
fi
if [ "$_overwrite" = 1 ]; then
  _e=$(command mv -f -T -- "$_s" "$_q" 2>&1) || _sshmcp_fail "$_e"
else
  _e=$(command mv -n -T -- "$_s" "$_q" 2>&1)
  if [ -e "$_s" ] || [ -L "$_s" ]; then
    { [ -e "$_q" ] || [ -L "$_q" ]; } && { echo exists; exit 0; }
    _sshmcp_fail "$_e"
  fi
fi
printf 'ok done %s\n' "$_f"
