# shellcheck shell=sh disable=SC2154 # _p, _sshmcp_fail (prelude.sh), _own (own.sh) and _size, _mode (the daemon) come before
_u=$(command id -u) || exit 1
if _o=$(command stat -c '%s %h %u %F' -- "$_p" 2>/dev/null); then
  # shellcheck disable=SC2086 # the fields, split on purpose
  set -- $_o
  case $4$5$6 in regularfile | regularemptyfile) _k=1 ;; *) _k=0 ;; esac
  if [ $_k = 0 ] || [ "$1" -gt "$_size" ] || [ "$2" -gt 1 ] || [ "$3" != "$_u" ]; then
    command rm -f -- "$_p" 2>/dev/null
    if [ -e "$_p" ] || [ -L "$_p" ]; then echo 'ok inway'; exit 0; fi
  fi
fi
if ! { [ -e "$_p" ] || [ -L "$_p" ]; }; then
  _m=$(printf '%o' $((0$_mode & ~0$(umask))))
  _k=$(umask)
  umask 077
  set -C
  { command exec 7>"$_p"; } 2>/dev/null || { echo 'ok inway'; exit 0; }
  set +C
  umask "$_k"
  _f="$_p"
  [ -e /proc/self/fd/7 ] && _f=/proc/self/fd/7
  _e=$(command chmod "$_m" -- "$_f" 2>&1) || _sshmcp_fail "$_e"
  exec 7>&-
fi
_own "$_p" || { echo 'ok inway'; exit 0; }
echo 'ok ready'
