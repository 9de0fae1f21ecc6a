# shellcheck shell=sh disable=SC2154 # d, p and n come from the daemon, is_task from is_task.sh
exec 3>&2 2>/dev/null
[ -f "$d/$p.start" ] || { echo not_found; exit 0; }
if is_task; then s=running; else s=exited; fi
e=-
[ -f "$d/$p.exit" ] && read -r e _ < "$d/$p.exit"
case $e in ''|*[!0-9]*) e=- ;; esac
o=0; r=0
[ -f "$d/$p.out" ] && o=$(wc -c < "$d/$p.out")
[ -f "$d/$p.err" ] && r=$(wc -c < "$d/$p.err")
o=$((${o:-0} + 0))
r=$((${r:-0} + 0))
printf '%s %s %s %s %s\n' "$s" "$e" "$o" "$r" "$d"
[ -f "$d/$p.out" ] && tail -c "$n" "$d/$p.out"
[ -f "$d/$p.err" ] && tail -c "$n" "$d/$p.err" >&3
exit 0
