# shellcheck shell=sh
exec 2>/dev/null
export LC_ALL=C
echo ok
_say() { printf '%s %s\n' "$1" "$2"; }
for _f in /etc/os-release /usr/lib/os-release; do
  [ -r "$_f" ] || continue
  while IFS= read -r _l || [ -n "$_l" ]; do
    case $_l in PRETTY_NAME=* | NAME=* | VERSION_ID=*) _say osr "$_l" ;; esac
  done <"$_f"
  break
done
command -v sw_vers >/dev/null && _say os "$(command sw_vers -productName) $(command sw_vers -productVersion)"
_say kernel "$(command uname -sr)"
_say arch "$(command uname -m)"
_say cpus "$(command getconf _NPROCESSORS_ONLN || command nproc || command sysctl -n hw.ncpu)"
if [ -r /proc/meminfo ]; then
  while read -r _n _v _r; do
    case $_n in
      MemTotal:) _say mem_total_kib "$_v" ;;
      MemAvailable:) _say mem_available_kib "$_v" ;;
    esac
  done </proc/meminfo
else
  _say mem_total "$(command sysctl -n hw.memsize || command sysctl -n hw.physmem64 || command sysctl -n hw.physmem)"
fi
if [ -r /proc/loadavg ]; then
  read -r _1 _5 _15 _r </proc/loadavg && _say load "$_1 $_5 $_15"
else
  _say load "$(command sysctl -n vm.loadavg | command tr -d '{}')"
fi
if [ -r /proc/uptime ]; then
  read -r _u _r </proc/uptime && _say uptime "$_u"
else
  _b=$(command sysctl -n kern.boottime)
  _b=${_b#*sec = }
  _b=${_b%%,*}
  case $_b in '' | *[!0-9]*) ;; *) _say uptime "$(($(command date +%s) - _b))" ;; esac
fi
_t='command'
command -v timeout >/dev/null && _t='command timeout 5'
_fs() {
  _say fs "$2"
  $_t df -Pk -- "$1" | { read -r _h; read -r _d && _say df "$_d"; }
}
_any=
while IFS= read -r _e; do
  _any=1
  _p=$(printf "%b." "$_e")
  _fs "${_p%.}"
done
if [ -z "$_any" ]; then
  _h=${HOME:-$(pwd)}
  _fs "$_h" "$_h"
  _fs / /
fi
exit 0
