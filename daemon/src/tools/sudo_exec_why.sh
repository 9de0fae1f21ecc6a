# shellcheck shell=sh
# No /bin/bash (Alpine, FreeBSD): sudo has nothing to start, whatever the rules say.
[ -x /bin/bash ] || { echo no_bash; exit 0; }
_l=$(LC_ALL=C sudo -n -l /bin/bash --noprofile --norc -s 2>&1); _r=$?
if [ $_r -eq 0 ]; then
  _m=$(LC_ALL=C sudo -n -k /bin/bash --noprofile --norc -s </dev/null 2>&1)
  # sudo's words, and sudo-rs's (Ubuntu's sudo since 25.10).
  case $_m in
    *"password is required"*|*"interactive authentication is required"*) echo password_required;;
    *) echo allowed;;
  esac
elif [ -z "$_l" ]; then echo not_allowed
else
  _v=$(LC_ALL=C sudo -n -v 2>&1)
  case $_v in
    *"may not run sudo"*) echo not_allowed;;
    *"password is required"*|*"interactive authentication is required"*) echo password_required;;
    *) echo other;;
  esac
fi
