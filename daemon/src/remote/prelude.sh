# shellcheck shell=sh disable=SC2154 # _sshmcp_tools, _sshmcp_path_in and _sshmcp_path64 come from the daemon
export LC_ALL=C
# shellcheck disable=SC2086 # a list of tool names, split on purpose
for _t in $_sshmcp_tools; do
  command -v "$_t" >/dev/null 2>&1 || { printf 'missing %s\n' "$_t"; exit 0; }
done
case " $_sshmcp_tools " in
  *" stat "*) command stat -c %s -- / >/dev/null 2>&1 || { echo 'missing stat -c'; exit 0; } ;;
esac
if [ "$_sshmcp_path_in" = base64 ]; then
  _p=$(printf %s "$_sshmcp_path64" | command base64 -d; printf .)
else
  _p=$(command cat; printf .)
fi
_p=${_p%.}
if [ -z "$_p" ]; then echo 'missing base64'; exit 0; fi
case $_p in /*) ;; *) _p=./$_p ;; esac
_sshmcp_fail() {
  case $1 in
    *': No such file or directory' | *': Not a directory' | *': Too many levels of symbolic links') echo notfound ;;
    *': Permission denied' | *': Operation not permitted') echo denied ;;
    *': File exists' | *'cannot overwrite '*) echo exists ;;
    *': File name too long') echo toolong ;;
    *': cannot move '*' to a subdirectory of itself, '* | *': cannot copy a directory, '*', into itself, '*) echo itself ;;
    *) printf 'error %s\n' "$1" ;;
  esac
  exit 0
}
