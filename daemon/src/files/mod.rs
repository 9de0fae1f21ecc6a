//! The tools that change small remote files: each one fixed `/bin/sh` program on the building
//! block, the path written into it as base64 and any data on its stdin or in a private
//! temporary file (never argv, never shell text), publishing by a rename in the file's own
//! directory. The shell pieces both programs share are here.

pub mod edit;
pub mod paths;
pub mod write;

use sshmcp_proto::error::ErrorDetails;
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::inspect;
use crate::remote::status;

fn invalid(message: impl Into<String>) -> DaemonError {
    DaemonError::new(ErrorCode::InvalidArguments, message)
}

/// The path's bytes, which must end with a file name.
fn file_path(path: &sshmcp_proto::inspect::RemotePath) -> Result<Vec<u8>, DaemonError> {
    let path = inspect::path_bytes(path)?;
    match inspect::file_name(&path) {
        Some(_) => Ok(path),
        None => Err(invalid("`path` must end with a file name")),
    }
}

/// A second path, `_q`, for a program that has two: written into it as base64 like the
/// first, and made `./`-relative the same way.
fn second_path(path: &[u8]) -> String {
    use base64::Engine as _;
    format!(
        "_q=$(printf %s '{}' | command base64 -d; printf .); _q=${{_q%.}}\n\
         case $_q in /*) ;; *) _q=./$_q ;; esac\n",
        base64::engine::general_purpose::STANDARD.encode(path)
    )
}

/// Checks `expected_sha256`'s form: 64 lowercase hex digits.
fn check_expected(expected: &Option<String>) -> Result<(), DaemonError> {
    match expected {
        Some(e)
            if !(e.len() == 64 && e.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))) =>
        {
            Err(invalid(
                "`expected_sha256` must be 64 lowercase hex digits (a sha256 from an earlier \
                 answer, or sha256sum)",
            ))
        }
        _ => Ok(()),
    }
}

/// After the prelude: `_d` the directory, which must be one that the session's user may search
/// (else the target's absence would be a guess); the target, if it exists, a regular file and
/// no symlink; `_x` 1 when it exists. The session user's writes and edits take turns (see
/// [`TAKE_TURNS`]). `_ident` names the target's state
/// (device, inode, size, change time to the nanosecond): a rename over it or a write into it
/// changes it. `_same` notes that state in `_i`, then ends the program with `ok changed
/// <hash>` (or `missing`) unless the target's SHA-256 is `expected`; `_changed_now` ends it
/// with the target's current hash.
fn target_checks(expected: &str) -> String {
    format!(
        "_d=${{_p%/*}}; _d=${{_d:-/}}\n\
         _e=$(command stat -L -c %F -- \"$_d\" 2>&1) || _sshmcp_fail \"$_e\"\n\
         [ \"$_e\" = directory ] || {{ echo notdir; exit 0; }}\n\
         [ -x \"$_d\" ] || {{ echo denied; exit 0; }}\n\
         {TAKE_TURNS}\
         if [ -L \"$_p\" ] || {{ [ -e \"$_p\" ] && [ ! -f \"$_p\" ]; }}; then echo notfile; exit 0; fi\n\
         _x=0; [ -e \"$_p\" ] && _x=1; _i=\n\
         _ident() {{ command stat -c '%d:%i:%s:%z' -- \"$_p\" 2>/dev/null; }}\n\
         _changed_now() {{ if [ -e \"$_p\" ]; then _h=$(command sha256sum 2>/dev/null < \"$_p\"); \
         printf 'ok changed %s\\n' \"${{_h%% *}}\"; else echo 'ok changed missing'; fi; exit 0; }}\n\
         _same() {{ [ $_x = 1 ] || {{ echo 'ok changed missing'; exit 0; }}; \
         [ -r \"$_p\" ] || {{ echo denied; exit 0; }}; _i=$(_ident); \
         _h=$(command sha256sum 2>&1 < \"$_p\") || _sshmcp_fail \"$_h\"; _h=${{_h%% *}}; \
         [ \"$_h\" = '{expected}' ] || {{ printf 'ok changed %s\\n' \"$_h\"; exit 0; }}; }}\n"
    )
}

/// The session user's writes and edits take turns, so that two given the same
/// `expected_sha256` cannot both pass the check before either renames: a lock (`flock`,
/// where the host has it) on a file of the user's own, `~/.sshmcp/files.lock`, which no
/// other user can hold, held until the program ends. `flock -n` in a loop, 20 s at most: the
/// BusyBox one has no `-w`. Where the lock cannot be had otherwise (no flock, no writable
/// home, a flock that fails with another status than 1, its "held by another"), the change
/// goes ahead without it.
const TAKE_TURNS: &str = "if [ -n \"$HOME\" ] && command -v flock >/dev/null 2>&1 && \
     (umask 077; command mkdir -p -- \"$HOME/.sshmcp\") 2>/dev/null && \
     (umask 077; : >> \"$HOME/.sshmcp/files.lock\") 2>/dev/null; then \
     exec 6>>\"$HOME/.sshmcp/files.lock\"; _k=0; \
     until command flock -n 6 2>/dev/null; do [ $? -eq 1 ] || break; _k=$((_k + 1)); \
     [ $_k -lt 400 ] || { echo 'error another write or edit of this user held its lock for \
     20 s; nothing was changed'; exit 0; }; command sleep 0.05; done; fi\n";

/// An existing target the session's user may not write is refused, as the shell would refuse
/// to write into it: the rename that replaces it needs only the directory's write permission.
const WRITABLE: &str = "if [ $_x = 1 ] && [ ! -w \"$_p\" ]; then echo denied; exit 0; fi\n";

/// A temporary file `_t` beside the target, removed however the program ends: a signal (the
/// daemon's timeout, a cancel) ends it through `exit`, which runs the trap.
fn temporary(what: &str) -> String {
    format!(
        "_t=$(command mktemp \"$_d/.sshmcp-{what}.XXXXXXXXXX\" 2>&1) || _sshmcp_fail \"$_t\"\n\
         trap 'command rm -f -- \"$_t\"' EXIT\n\
         trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM\n"
    )
}

/// Gives `_t` the old file's owner first (a `chown` clears setuid and setgid, so the mode
/// comes after it); a change that cannot keep the owner does not happen.
const KEEP_OWNER: &str = "if [ $_x = 1 ]; then command chown --reference=\"$_p\" \"$_t\" 2>/dev/null || \
     [ \"$(command stat -c %u:%g \"$_p\")\" = \"$(command stat -c %u:%g \"$_t\")\" ] || \
     { echo denied; exit 0; }; fi\n";

/// Gives `_t` the old file's mode, setuid, setgid and sticky bits included (after the owner:
/// a `chown` clears the first two). `stat -c %a` and a numeric `chmod`, not GNU's
/// `chmod --reference`, which BusyBox's lacks.
const KEEP_MODE: &str =
    "_m=$(command stat -c %a -- \"$_p\") && command chmod \"$_m\" \"$_t\" || exit 1\n";

/// Flushes `_t`, then, when the target's state was noted, ends the program if it moved since:
/// the last step before the rename, so the window left is a few system calls.
const FLUSH_AND_RECHECK: &str = "command sync -- \"$_t\" 2>/dev/null\n\
     if [ -n \"$_i\" ] && [ \"$(_ident)\" != \"$_i\" ]; then _changed_now; fi\n";

/// Replaces the target with `_t`.
const REPLACE: &str = "_e=$(command mv -f -T -- \"$_t\" \"$_p\" 2>&1) || _sshmcp_fail \"$_e\"\n";

/// The host's own failure (a full disk, a read-only file system) names what happened.
fn nothing_changed(e: DaemonError) -> DaemonError {
    match e.code {
        ErrorCode::InternalError if !e.message.starts_with(status::NOTHING_CHANGED) => {
            DaemonError::internal(format!(
                "{}: {}",
                status::NOTHING_CHANGED,
                e.message.trim_start_matches("the host said: ")
            ))
        }
        _ => e,
    }
}

/// The error of an `ok changed <hash>` answer.
fn changed(detail: &str) -> DaemonError {
    match detail {
        "missing" => DaemonError::new(
            ErrorCode::FileChanged,
            "the file no longer exists; nothing was changed",
        ),
        hash => DaemonError::new(
            ErrorCode::FileChanged,
            format!(
                "the file changed since expected_sha256: its sha256 is now {hash}; nothing was \
                 changed (read it again, then retry with the new hash)"
            ),
        )
        .with_details(ErrorDetails {
            sha256: Some(hash.to_string()),
            ..ErrorDetails::default()
        }),
    }
}
