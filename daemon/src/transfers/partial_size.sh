# shellcheck shell=sh disable=SC2154 # _p and _sshmcp_fail come from prelude.sh
# The file's own size (no -L), read from its inode: BusyBox's wc would read it all.
_o=$(command stat -c %s -- "$_p" 2>&1) || _sshmcp_fail "$_o"
printf 'ok %s\n' "$_o"
