# shellcheck shell=sh disable=SC2154 # _p and _sshmcp_fail come from prelude.sh
command -v rsync >/dev/null 2>&1 || { echo 'ok norsync'; exit 0; }
_o=$(command stat -L -c '%s %a %F' -- "$_p" 2>&1) || _sshmcp_fail "$_o"
case ${_o#* * } in 'regular file' | 'regular empty file') ;; *) echo notfile; exit 0 ;; esac
[ -r "$_p" ] || { echo denied; exit 0; }
_s=${_o%% *}
_o=${_o#* }
printf 'ok %s %s\n' "$_s" "${_o%% *}"
