# shellcheck shell=sh disable=SC2154 # port comes from the daemon, net from a test
# Where the host listens on TCP port $port, as its kernel says: a line `public ADDR` for the
# first address that is not loopback, else `loopback` if every listener there is, else
# `unseen` (none shows, or the host has no way to tell). sshd decides where a remote forward
# listens: with `GatewayPorts yes` on every address, whatever the client asked.
exec 2>/dev/null
export LC_ALL=C
echo ok
net=${net:-/proc/net}
if [ -r "$net/tcp" ] || [ -r "$net/tcp6" ]; then
  # Linux: local addresses in hex, IPv4 in the kernel's byte order (127.x.y.z ends in 7F),
  # the port in four upper-case digits; state 0A is LISTEN.
  command cat "$net/tcp" "$net/tcp6" | command awk -v p="$(printf '%04X' "$port")" '
    $4 == "0A" {
      split($2, at, ":")
      if (at[2] != p) next
      a = at[1]
      if (length(a) == 8) lo = substr(a, 7, 2) == "7F"
      else lo = a == "00000000000000000000000001000000" ||
        (substr(a, 1, 24) == "0000000000000000FFFF0000" && substr(a, 31, 2) == "7F")
      if (!lo) { print "public " a; found = 1; exit }
      seen = 1
    }
    END { if (!found) print (seen ? "loopback" : "unseen") }'
elif command -v netstat >/dev/null; then
  # macOS and the BSDs: `127.0.0.1.5432`, `*.5432`, `::1.5432` in the fourth column.
  command netstat -an -p tcp | command awk -v p="$port" '
    $6 == "LISTEN" {
      a = $4; q = a; sub(/.*\./, "", q)
      if (q != p) next
      sub(/\.[^.]*$/, "", a)
      if (a !~ /^127\./ && a != "::1") { print "public " a; found = 1; exit }
      seen = 1
    }
    END { if (!found) print (seen ? "loopback" : "unseen") }'
else
  echo unseen
fi
