# shellcheck shell=sh disable=SC2154 # g comes from the daemon, alive and _gkill from group_alive.sh
_gkill -TERM || { echo GONE; exit 0; }
_gkill -CONT
sleep 1 & t=$!
while alive; do
  kill -0 "$t" 2>/dev/null || { _gkill -KILL; echo KILL; exit 0; }
  sleep 0.05
done
kill "$t" 2>/dev/null
echo TERM
