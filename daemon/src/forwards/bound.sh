# shellcheck shell=sh disable=SC2154 # port comes from the daemon, net from a test
# Where the user's programs listen on TCP port $port, as the host's kernel says: a line
# `public ADDR` for the first address that is not loopback, else `loopback` if every listener
# there is, else `unseen` (none shows, or the host has no way to tell). sshd decides where a
# remote forward listens (as the user): with `GatewayPorts yes` on every address, whatever
# the client asked.
exec 2>/dev/null
export LC_ALL=C
echo ok
net=${net:-/proc/net}
listeners() {
  if [ -r "$net/tcp" ] || [ -r "$net/tcp6" ]; then
    # Linux: each address in hex (its 32-bit words in the host's byte order), the port in
    # four upper-case digits, state 0A for LISTEN, the owner's uid in the eighth column.
    command cat "$net/tcp" "$net/tcp6" |
      command awk -v p="$(printf '%04X' "$port")" -v u="$(command id -u)" '
        $4 == "0A" && (u == "" || $8 == u) { split($2, at, ":"); if (at[2] == p) print at[1] }'
  elif command -v netstat >/dev/null; then
    # macOS and the BSDs (`127.0.0.1.5432`, `*.5432`), or net-tools (`127.0.0.1:5432`).
    command netstat -an | command awk -v p="$port" '
      $1 ~ /^tcp/ && $6 == "LISTEN" {
        a = $4; q = a; sub(/.*[.:]/, "", q)
        if (q == p) { sub(/[.:][^.:]*$/, "", a); print a }
      }'
  fi
}
listeners | command awk '
  function loopback(a) {
    if (a ~ /^[0-9A-F]+$/ && length(a) == 8) return a ~ /^7F/ || a ~ /7F$/
    if (a ~ /^[0-9A-F]+$/ && length(a) == 32)
      return a == "00000000000000000000000001000000" ||
        a == "00000000000000000000000000000001" ||
        (a ~ /^0000000000000000FFFF0000/ && a ~ /7F$/) || a ~ /^00000000000000000000FFFF7F/
    return a ~ /^127\./ || a == "::1" || a ~ /^::ffff:127\./
  }
  { if (!loopback($1)) { print "public " $1; found = 1; exit } seen = 1 }
  END { if (!found) print (seen ? "loopback" : "unseen") }'
