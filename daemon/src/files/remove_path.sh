# shellcheck shell=sh disable=SC2154 # _p, _sshmcp_fail (prelude.sh), _exists (files.sh) and _recursive (the daemon) come before
_exists || { echo notfound; exit 0; }
_f=$(command stat -c %f -- "$_p" 2>&1) || _sshmcp_fail "$_f"
if [ -d "$_p" ] && [ ! -L "$_p" ]; then
  if [ "$_recursive" != 1 ]; then
    _e=$(command rmdir -- "$_p" 2>&1) || {
      case $_e in *'Directory not empty') echo 'ok notempty'; exit 0 ;; esac
      _sshmcp_fail "$_e"
    }
  elif command rm -rf --one-file-system --preserve-root=all -- 2>/dev/null; then
    _e=$(command rm -rf --one-file-system --preserve-root=all -- "$_p" 2>&1) ||
      _sshmcp_fail "$_e"
  else
    _e=$(command find "$_p" -xdev -depth \( -type d -exec rmdir -- {} \; \) -o \
      \( ! -type d -exec rm -f -- {} \; \) 2>&1)
    if _exists; then _sshmcp_fail "${_e:-not all of it could be removed}"; fi
  fi
else
  _e=$(command rm -f -- "$_p" 2>&1) || _sshmcp_fail "$_e"
fi
printf 'ok removed %s\n' "$_f"
