# shellcheck shell=sh disable=SC2154 # _p, _sshmcp_fail (prelude.sh), _own (own.sh) and _tag, _overwrite (the daemon) come before
_t=${_p%/*}/.sshmcp-$_tag.part
if ! _own "$_t"; then
  [ -e "$_t" ] || [ -L "$_t" ] || _sshmcp_fail 'the partial file is gone'
  echo 'ok notown'
  exit 0
fi
if [ "$_overwrite" = 1 ]; then
  if ! _e=$(command mv -f -T -- "$_t" "$_p" 2>&1); then
    if [ -d "$_p" ] && [ ! -L "$_p" ]; then echo notfile; exit 0; fi
    _sshmcp_fail "$_e"
  fi
  echo ok
else
  if _e=$(command ln -T -- "$_t" "$_p" 2>&1); then command rm -f -- "$_t"; echo ok; exit 0; fi
  if [ -e "$_p" ] || [ -L "$_p" ]; then command rm -f -- "$_t"; echo exists; exit 0; fi
  _sshmcp_fail "$_e"
fi
