# shellcheck shell=sh disable=SC2154 # _p and _sshmcp_fail come from prelude.sh, _skip and _limit from the daemon
_o=$(command stat -L -c %F -- "$_p" 2>&1) || _sshmcp_fail "$_o"
[ "$_o" = directory ] || { echo notdir; exit 0; }
# -P: `..` after a symlink is its target's parent, as stat takes it.
{ CDPATH='' command cd -P -- "$_p" >/dev/null 2>&1 && [ -r . ]; } || { echo denied; exit 0; }
if ! command find . -maxdepth 0 -printf '' 2>/dev/null ||
  [ "$(printf 'a\0' | command sort -z | command tail -z -n +1 | command head -z -n 1 |
    command wc -c)" -ne 2 ]; then
  echo 'ok all'
  for _f in .* *; do
    case $_f in . | ..) continue ;; esac
    [ -e "$_f" ] || [ -L "$_f" ] || continue
    _s=$(command stat -c 'x%f/%s/%a/@%Y' -- "$_f" 2>/dev/null) || continue
    _l=
    # The x keeps a target's own trailing newlines from the substitution; then it and
    # readlink's newline go.
    case $_s in xa*) _l=$(command readlink -- "$_f" 2>/dev/null && echo x) && _l=${_l%??} ;; esac
    printf '%s/%s/%s\0' "$_f" "$_s" "$_l"
  done
  exit 0
fi
_find() {
  {
    TZ=UTC0 command find . -mindepth 1 -maxdepth 1 "$@" 2>&1 >&3 3>&- |
      command grep -v -e ': No such file or directory$' -e ': Permission denied$' >&2 3>&-
  } 3>&1
}
printf 'ok %s\n' "$(_find -printf x | command wc -c)"
_find -printf '%P/%y/%s/%m/%TY-%Tm-%TdT%TH:%TM:%TS/%l\0' |
  command sort -z -t/ -k1,1 | command tail -z -n "+$_skip" | command head -z -n "$_limit"
