# shellcheck shell=sh disable=SC2154 # _p, _q64 and _expected come from the daemon, _sshmcp_fail from prelude.sh
# The pieces the file programs share (see files/mod.rs).
_exists() { [ -e "$_p" ] || [ -L "$_p" ]; }
# Why mkdir (with parents when $1 is 1) failed, $2 its words: a file that is no directory in
# the way is `notdir` (GNU and BusyBox say "Not a directory", GNU says "File exists" of the
# last directory with -p), else as any tool's failure.
_mkdir_fail() {
  case $2 in
    *': Not a directory') echo notdir; exit 0 ;;
    *': File exists') [ "$1" = 1 ] && { echo notdir; exit 0; } ;;
  esac
  _sshmcp_fail "$2"
}
_second_path() {
  _q=$(printf %s "$_q64" | command base64 -d; printf .)
  _q=${_q%.}
  case $_q in /*) ;; *) _q=./$_q ;; esac
}
_take_turns() {
  if [ -n "$HOME" ] && command -v flock >/dev/null 2>&1 &&
    (umask 077; command mkdir -p -- "$HOME/.sshmcp") 2>/dev/null &&
    (umask 077; : >>"$HOME/.sshmcp/files.lock") 2>/dev/null; then
    exec 6>>"$HOME/.sshmcp/files.lock"
    _k=0
    until command flock -n 6 2>/dev/null; do
      [ $? -eq 1 ] || break
      _k=$((_k + 1))
      [ "$_k" -lt 400 ] || {
        echo 'error another write or edit of this user held its lock for 20 s; nothing was changed'
        exit 0
      }
      command sleep 0.05
    done
  fi
}
_target_checks() {
  _d=${_p%/*}
  _d=${_d:-/}
  _e=$(command stat -L -c %F -- "$_d" 2>&1) || _sshmcp_fail "$_e"
  [ "$_e" = directory ] || { echo notdir; exit 0; }
  [ -x "$_d" ] || { echo denied; exit 0; }
  # From here, the target by its name alone: a temporary file's name beside it is longer,
  # and its whole path could pass the host's limit where the target's does not.
  # -P: `..` after a symlink is its target's parent, as stat and every tool take it.
  CDPATH='' command cd -P -- "$_d" 2>/dev/null || { echo denied; exit 0; }
  _p=./${_p##*/}
  _d=.
  _take_turns
  if [ -L "$_p" ]; then echo symlink; exit 0; fi
  if [ -e "$_p" ] && [ ! -f "$_p" ]; then echo notfile; exit 0; fi
  _x=0
  [ -e "$_p" ] && _x=1
  _i=
}
_ident() { command stat -c '%d:%i:%s:%z' -- "$_p" 2>/dev/null; }
_changed_now() {
  if [ -e "$_p" ]; then
    _h=$(command sha256sum 2>/dev/null <"$_p")
    printf 'ok changed %s\n' "${_h%% *}"
  else
    echo 'ok changed missing'
  fi
  exit 0
}
_same() {
  [ "$_x" = 1 ] || { echo 'ok changed missing'; exit 0; }
  [ -r "$_p" ] || { echo denied; exit 0; }
  _i=$(_ident)
  _h=$(command sha256sum 2>&1 <"$_p") || _sshmcp_fail "$_h"
  _h=${_h%% *}
  [ "$_h" = "$_expected" ] || { printf 'ok changed %s\n' "$_h"; exit 0; }
}
_writable() {
  if [ "$_x" = 1 ] && [ ! -w "$_p" ]; then echo denied; exit 0; fi
}
_temporary() {
  _t=$(command mktemp "$_d/.sshmcp-$1.XXXXXXXXXX" 2>&1) || _sshmcp_fail "$_t"
  trap 'command rm -f -- "$_t"' EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
_keep_owner() {
  if [ "$_x" = 1 ]; then
    # BusyBox's chown has no --reference: the owner as numbers then.
    command chown --reference="$_p" "$_t" 2>/dev/null ||
      command chown "$(command stat -c %u:%g -- "$_p")" "$_t" 2>/dev/null ||
      [ "$(command stat -c %u:%g "$_p")" = "$(command stat -c %u:%g "$_t")" ] ||
      { echo denied; exit 0; }
  fi
}
_keep_mode() {
  { _m=$(command stat -c %a -- "$_p") && command chmod "$_m" "$_t"; } || exit 1
}
_flush_and_recheck() {
  command sync -- "$_t" 2>/dev/null
  if [ -n "$_i" ] && [ "$(_ident)" != "$_i" ]; then _changed_now; fi
}
_replace() {
  _e=$(command mv -f -T -- "$_t" "$_p" 2>&1) || _sshmcp_fail "$_e"
}
