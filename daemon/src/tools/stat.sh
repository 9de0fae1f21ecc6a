# shellcheck shell=sh disable=SC2154 # _p and _sshmcp_fail come from prelude.sh, _follow from the daemon
_format='%f %s %u %g %.9X %.9Y %.9Z
%U
%G'
if [ "$_follow" = 1 ]; then
  _o=$(command stat -L -c "$_format" -- "$_p" 2>&1) || _sshmcp_fail "$_o"
else
  _o=$(command stat -c "$_format" -- "$_p" 2>&1) || _sshmcp_fail "$_o"
fi
printf 'ok\n%s\n' "$_o"
if [ "$_follow" != 1 ] && [ -L "$_p" ]; then command readlink -- "$_p"; fi
