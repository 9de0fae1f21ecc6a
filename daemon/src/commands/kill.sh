# shellcheck shell=sh disable=SC2154 # g, _signal, _wait, _force, _after, _look come from the daemon, alive and _gkill from group_alive.sh
waitgone() {
  sleep "$1" &
  t=$!
  while alive; do
    kill -0 "$t" 2>/dev/null || return 1
    sleep 0.1
  done
  kill "$t" 2>/dev/null
  return 0
}
alive || { echo not_running; exit 0; }
# A group nobody saw end may hold another's processes under the same number: looked at only.
[ "$_look" = 1 ] && { echo unconfirmed; exit 0; }
if ! _gkill "-$_signal"; then
  if alive; then echo failed_to_kill; else echo already_exited; fi
  exit 0
fi
waitgone "$_wait" && { echo killed; exit 0; }
if [ "$_force" = 1 ]; then
  _gkill -KILL
  waitgone "$_after" && { echo killed force; exit 0; }
  echo failed_to_kill force
else
  echo failed_to_kill
fi
