# shellcheck shell=sh
uname -srm
printf '%s\n' "$HOME"
id -un
if [ -r /etc/os-release ]; then
  # shellcheck disable=SC1091 # the host's own file
  . /etc/os-release
  # shellcheck disable=SC2154 # os-release sets it
  printf '%s\n' "$PRETTY_NAME"
fi
