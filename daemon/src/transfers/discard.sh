# shellcheck shell=sh disable=SC2154 # _p and _sshmcp_fail come from prelude.sh
_e=$(command rm -f -- "$_p" 2>&1) || _sshmcp_fail "$_e"
echo ok
