# shellcheck shell=sh disable=SC2154 # d and word come from the daemon
umask 077
mkdir -p "$d" 2>/dev/null; chmod 700 "$HOME/.sshmcp" "$d" 2>/dev/null
{ [ -d "$d" ] && [ -w "$d" ]; } || { echo nodir; exit 0; }
command -v setsid >/dev/null 2>&1 || { echo nosetsid; exit 0; }
t=$d/launch.$word
# A launch stopped (its call cancelled) leaves neither the command's text nor its PID file.
trap 'rm -f "$t.pid" "$t"; exit 129' HUP
trap 'rm -f "$t.pid" "$t"; exit 130' INT
trap 'rm -f "$t.pid" "$t"; exit 143' TERM
command cat > "$t" || { echo nowrite; exit 0; }
# shellcheck disable=SC2016 # the wrapper's own program, expanded when it runs
wrapper='
d=$1
rm -f "$d/$$.out" "$d/$$.err" "$d/$$.exit" "$d/$$.start"
set -C
command exec >"$d/$$.out" 2>"$d/$$.err" || { echo 0 > "$2.pid"; exit 1; }
set +C
exec 3>&2 2>/dev/null
echo $$ > "$2.pid.new" && mv -f "$2.pid.new" "$2.pid"
mv -f "$2" "$d/$$.cmd" || exit 1
echo "$3" > "$d/$$.launch"
{STARTED}
started $$ > "$d/$$.start.new" && mv -f "$d/$$.start.new" "$d/$$.start"
read -r m < "$d/$$.start"
export SSHMCP_TASK="$$:$m"
trap : HUP INT QUIT USR1 USR2 PIPE ALRM TERM
/bin/sh "$d/$$.cmd" 2>&3 3>&-
echo $? > "$d/$$.exit"
rm -f "$d/$$.cmd"
'
setsid -f /bin/sh -c "$wrapper" sshmcp-task "$d" "$t" "$word" </dev/null >/dev/null 2>&1 ||
setsid setsid /bin/sh -c "$wrapper" sshmcp-task "$d" "$t" "$word" </dev/null >/dev/null 2>&1
p=
ours() {
  [ -n "$p" ] || { [ -s "$t.pid" ] && read -r p < "$t.pid"; } || return 1
  [ "$p" != 0 ] && read -r w 2>/dev/null < "$d/$p.launch" && [ "$w" = "$word" ] &&
    [ -s "$d/$p.start" ]
}
sleep 20 & z=$!
while ! ours && [ "$p" != 0 ] && kill -0 $z 2>/dev/null; do sleep 0.02; done
kill $z 2>/dev/null
[ -n "$p" ] || rm -f "$t"
ours; rm -f "$t.pid" "$t"
[ "$p" = 0 ] && { echo nologs; exit 0; }
ours || { echo "nostart $p"; exit 0; }
printf 'ok %s %s\n' "$p" "$d"
