# shellcheck shell=sh disable=SC2154 # g comes from the daemon, alive from group_alive.sh
kill -TERM "-$g" 2>/dev/null || { echo GONE; exit 0; }
kill -CONT "-$g" 2>/dev/null
sleep 1 & t=$!
while alive; do
  kill -0 "$t" 2>/dev/null || { kill -KILL "-$g" 2>/dev/null; echo KILL; exit 0; }
  sleep 0.05
done
kill "$t" 2>/dev/null
echo TERM
