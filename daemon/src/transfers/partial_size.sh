# shellcheck shell=sh disable=SC2154 # _p and _sshmcp_fail come from prelude.sh
_n=$(command wc -c <"$_p") || _sshmcp_fail "cannot read the partial file"
# BSD's wc pads the count with spaces.
printf 'ok %s\n' "${_n##* }"
