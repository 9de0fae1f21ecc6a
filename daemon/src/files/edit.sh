# shellcheck shell=sh disable=SC2154 # _p, _sshmcp_fail (prelude.sh), the functions (files.sh) and _expected, _count64, _edit64, _max_file, _max_whole, _old_len, _new_len, _all (the daemon) come before
_target_checks
[ "$_x" = 1 ] || { echo notfound; exit 0; }
[ -r "$_p" ] || { echo denied; exit 0; }
_writable
_n=$(command wc -c <"$_p") || exit 1
[ "$_n" -le "$_max_file" ] || { printf 'ok toolarge %s\n' "$_n"; exit 0; }
[ "$(command tr -dc '\000' <"$_p" | command wc -c)" -eq 0 ] || { echo 'ok binary'; exit 0; }
[ "$(printf 'a\000' | command sed -z 's/a/b/' 2>/dev/null | command tr -d '\000')" = b ] || {
  # No `sed -z` (BusyBox): a file write_file could write goes to the daemon whole,
  # and the daemon writes its edit back only while the file is still what it read.
  [ "$_n" -le "$_max_whole" ] || { printf 'ok wholetoolarge %s\n' "$_n"; exit 0; }
  printf 'ok whole\n'
  command cat -- "$_p"
  exit
}
_i=$(_ident)
if [ -n "$_expected" ]; then _same; fi
_n=$(command wc -c <"$_p") || exit 1
_temporary edit
_c=
trap 'command rm -f -- "$_t" ${_c:+"$_c"}' EXIT
_c=$(command mktemp "$_d/.sshmcp-sed.XXXXXXXXXX" 2>&1) || { _e=$_c; _c=; _sshmcp_fail "$_e"; }
printf %s "$_count64" | command base64 -d >"$_c" || exit 1
_e=$(command sed -z -f "$_c" -- "$_p" 2>&1 >"$_t") || _sshmcp_fail "${_e:-sed failed}"
_r=$(command wc -c <"$_t") || exit 1
_k=$(((_n - _r) / _old_len))
[ "$_k" -gt 0 ] || { echo 'ok nomatch'; exit 0; }
[ "$_k" -eq 1 ] || [ "$_all" = 1 ] || { printf 'ok ambiguous %s\n' "$_k"; exit 0; }
_s=$((_n + _k * (_new_len - _old_len)))
[ "$_s" -le "$_max_file" ] || { printf 'ok outgrows %s\n' "$_s"; exit 0; }
printf %s "$_edit64" | command base64 -d >"$_c" || exit 1
_e=$(command sed -z -f "$_c" -- "$_p" 2>&1 >"$_t") || _sshmcp_fail "${_e:-sed failed}"
_h=$(command sha256sum <"$_t") || exit 1
_keep_owner
_keep_mode
_flush_and_recheck
_replace
printf 'ok edited %s %s\n' "$_k" "${_h%% *}"
