# shellcheck shell=sh disable=SC2154 # _p and _sshmcp_fail come from prelude.sh, _start and _length from the daemon
_o=$(command stat -L -c '%F %s' -- "$_p" 2>&1) || _sshmcp_fail "$_o"
case $_o in 'regular file '* | 'regular empty file '*) ;; *) echo notfile; exit 0 ;; esac
[ -r "$_p" ] || { echo denied; exit 0; }
printf 'ok %s\n' "${_o##* }"
[ "${_o##* }" -gt 0 ] && [ "$_start" -gt "${_o##* }" ] && exit 0
command tail -c "+$_start" -- "$_p" | command head -c "$_length"
