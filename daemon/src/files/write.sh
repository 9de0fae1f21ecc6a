# shellcheck shell=sh disable=SC2154 # _p, _sshmcp_fail (prelude.sh), the functions (files.sh) and _expected, _overwrite, _create_dirs, _mode (the daemon) come before
if [ "$_create_dirs" = 1 ]; then
  _e=$(command mkdir -p -- "${_p%/*}/" 2>&1) || _mkdir_fail 1 "$_e"
fi
_target_checks
if [ -n "$_expected" ]; then
  _same
elif [ "$_x" = 1 ] && [ "$_overwrite" = 0 ]; then
  echo exists
  exit 0
fi
_writable
_temporary write
_e=$(command cat 2>&1 >"$_t") || _sshmcp_fail "$_e"
_keep_owner
if [ -n "$_mode" ]; then
  command chmod "$_mode" "$_t" || exit 1
elif [ "$_x" = 1 ]; then
  _keep_mode
else
  command chmod "$(printf '%o' $((0666 & ~0$(umask))))" "$_t" || exit 1
fi
_flush_and_recheck
if [ "$_overwrite" = 1 ] || [ -n "$_expected" ]; then
  _replace
elif ! _e=$(command ln -T -- "$_t" "$_p" 2>&1); then
  if _exists; then echo exists; exit 0; fi
  _sshmcp_fail "$_e"
fi
printf 'ok written %s\n' "$_x"
