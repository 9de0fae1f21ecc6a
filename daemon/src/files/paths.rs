//! The housekeeping tools: `make_directory`, `remove_path`, `copy_path`, `move_path`. Each is
//! one program whose paths are written into it as base64 (any bytes, never shell text), with
//! GNU coreutils doing the work; what the path is comes back as its `stat` mode.

use sshmcp_proto::files::{CopyMoveRequest, MakeDirectoryRequest, PathChanged, RemovePathRequest};
use sshmcp_proto::{DaemonError, ErrorCode};

use crate::inspect;
use crate::remote::status;
use crate::session::Session;

/// How long a housekeeping program may take (a recursive copy or removal of a large tree).
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Whether a path exists, a dangling symlink included.
const EXISTS: &str = "{ [ -e \"$_p\" ] || [ -L \"$_p\" ]; }";

/// The most bytes an answer may take: the host's complaints name the paths, each up to
/// 4096 bytes, and may name them twice.
const ANSWER_BYTES: u64 = 64 * 1024;

/// What a failed program may have done: nothing, or part of its work (`Partly` says which),
/// since some steps (a recursive removal, `mkdir -p`) do not undo what they did before the
/// failure.
enum OnFailure {
    NothingChanged,
    Partly(&'static str),
}

/// Runs `script` and reads its `ok <word> <hex mode>` answer into what changed at `path`.
/// `lasting`: the program may take long (a tree copied, moved across file systems or
/// removed), and waits for a slot commands may hold (see `remote::channel`).
async fn run(
    session: &Session,
    script: String,
    path: &[u8],
    on_failure: OnFailure,
    lasting: bool,
) -> Result<PathChanged, DaemonError> {
    let (said, _) = status::run_program(
        session,
        script,
        Vec::new(),
        path,
        ANSWER_BYTES,
        TIMEOUT,
        lasting,
    )
    .await
    .map_err(|e| match (on_failure, e.code) {
        (OnFailure::NothingChanged, _) => super::nothing_changed(e),
        (OnFailure::Partly(what), ErrorCode::InternalError | ErrorCode::RemotePermissionDenied)
            if !e.message.starts_with(status::NOTHING_CHANGED) =>
        {
            DaemonError::new(e.code, format!("{}; {what}", e.message))
        }
        (OnFailure::Partly(_), _) => e,
    })?;
    let mut words = said.split(' ');
    let (word, mode) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    if word == "notempty" {
        return Err(DaemonError::new(
            ErrorCode::DirectoryNotEmpty,
            "the directory is not empty; pass recursive: true to remove it with its contents",
        ));
    }
    let mode = u32::from_str_radix(mode, 16)
        .map_err(|_| DaemonError::internal(format!("unexpected answer from the host: {said}")))?;
    let (path, path_encoding) = inspect::remote_text(path);
    Ok(PathChanged {
        path,
        path_encoding,
        file_type: inspect::file_type(mode),
        changed: word != "same",
    })
}

/// `make_directory`: a directory (and with `parents` its missing parents); one that already
/// exists is no change, anything else at the path is `remote_path_exists`.
pub async fn make_directory(
    session: &Session,
    req: MakeDirectoryRequest,
) -> Result<PathChanged, DaemonError> {
    let path = super::file_path(&req.path)?;
    if req.mode.is_some_and(|m| m > 0o7777) {
        return Err(super::invalid("`mode` must be at most four octal digits"));
    }
    let flags = format!(
        "{}{}",
        if req.parents { "-p " } else { "" },
        req.mode.map(|m| format!("-m {m:o} ")).unwrap_or_default()
    );
    let script = format!(
        "{prelude}if {EXISTS}; then\n\
         if [ -d \"$_p\" ] && [ ! -L \"$_p\" ]; then printf 'ok same %s\\n' \"$(command stat -c %f -- \"$_p\")\"; exit 0; fi\n\
         echo exists; exit 0; fi\n\
         _e=$(command mkdir {flags}-- \"$_p\" 2>&1) || _sshmcp_fail \"$_e\"\n\
         printf 'ok made %s\\n' \"$(command stat -c %f -- \"$_p\")\"\n",
        prelude = status::prelude_with_path("mkdir stat", &path),
    );
    let on_failure = match req.parents {
        true => OnFailure::Partly("the parent directories made before the failure stay"),
        false => OnFailure::NothingChanged,
    };
    run(session, script, &path, on_failure, false)
        .await
        .map_err(|e| match e.code {
            ErrorCode::RemotePathExists => DaemonError::new(
                ErrorCode::RemotePathExists,
                "something other than a directory is at this path",
            ),
            _ => e,
        })
}

/// `remove_path`: a file, a symlink (not what it points to) or an empty directory; a
/// directory with contents only with `recursive`.
pub async fn remove_path(
    session: &Session,
    req: RemovePathRequest,
) -> Result<PathChanged, DaemonError> {
    let path = super::file_path(&req.path)?;
    let remove_directory = match req.recursive {
        // BusyBox's rm has no `--one-file-system` (found out with no operand, where GNU's
        // `rm -f` does nothing and succeeds): there `find -xdev -depth` removes the tree from
        // its leaves up, never descending into another file system, whose mount point then
        // stays and fails the call as GNU's rm would.
        true => {
            "if command rm -rf --one-file-system --preserve-root=all -- 2>/dev/null; then\n\
             _e=$(command rm -rf --one-file-system --preserve-root=all -- \"$_p\" 2>&1) || \
             _sshmcp_fail \"$_e\"\n\
             else\n\
             _e=$(command find \"$_p\" -xdev -depth \\( -type d -exec rmdir -- {} \\; \\) -o \
             \\( ! -type d -exec rm -f -- {} \\; \\) 2>&1)\n\
             if [ -e \"$_p\" ] || [ -L \"$_p\" ]; then _sshmcp_fail \"${_e:-not all of it could be removed}\"; fi\n\
             fi"
        }
        false => {
            "_e=$(command rmdir -- \"$_p\" 2>&1) || { case $_e in \
             *'Directory not empty') echo 'ok notempty'; exit 0 ;; esac; _sshmcp_fail \"$_e\"; }"
        }
    };
    let script = format!(
        "{prelude}{EXISTS} || {{ echo notfound; exit 0; }}\n\
         _f=$(command stat -c %f -- \"$_p\" 2>&1) || _sshmcp_fail \"$_f\"\n\
         if [ -d \"$_p\" ] && [ ! -L \"$_p\" ]; then {remove_directory}\n\
         else _e=$(command rm -f -- \"$_p\" 2>&1) || _sshmcp_fail \"$_e\"; fi\n\
         printf 'ok removed %s\\n' \"$_f\"\n",
        prelude = status::prelude_with_path("rm rmdir stat", &path),
    );
    let on_failure = match req.recursive {
        true => OnFailure::Partly(
            "a recursive removal removes all it may before it stops, so part of the tree may be \
             gone (it never crosses into another file system mounted inside)",
        ),
        false => OnFailure::NothingChanged,
    };
    run(session, script, &path, on_failure, req.recursive).await
}

/// `copy_path` (`move_it` false) and `move_path`: a file, a symlink or a whole directory to
/// a destination that does not exist, or (with `overwrite`) is not a directory. A copy is
/// made under a temporary name in the destination's directory first, then moved into place
/// as a move is: so a copy never writes through a symlink at the destination, and a failed
/// one leaves nothing behind. Without `overwrite` the last step is GNU `mv -n`, one
/// `renameat2(RENAME_NOREPLACE)` on one file system: a destination created meanwhile is not
/// replaced.
pub async fn copy_or_move(
    session: &Session,
    req: CopyMoveRequest,
    move_it: bool,
) -> Result<PathChanged, DaemonError> {
    let source = super::file_path(&req.source)?;
    let destination = super::file_path(&req.destination)?;
    // `_s` is what goes into place: the source itself, or its fresh copy.
    let copy = match move_it {
        true => "_s=$_p\n".to_string(),
        false => "_qd=${_q%/*}; _qd=${_qd:-/}\n\
             _t=$(command mktemp -d \"$_qd/.sshmcp-copy.XXXXXXXXXX\" 2>&1) || _sshmcp_fail \"$_t\"\n\
             trap 'command rm -rf -- \"$_t\"' EXIT\n\
             trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM\n\
             _s=$_t/copy\n\
             _e=$(command cp -a -T -- \"$_p\" \"$_s\" 2>&1) || _sshmcp_fail \"$_e\"\n"
            .to_string(),
    };
    let place = match req.overwrite {
        true => "_e=$(command mv -f -T -- \"$_s\" \"$_q\" 2>&1) || _sshmcp_fail \"$_e\"",
        false => {
            "_e=$(command mv -n -T -- \"$_s\" \"$_q\" 2>&1)\n\
             if [ -e \"$_s\" ] || [ -L \"$_s\" ]; then \
             { [ -e \"$_q\" ] || [ -L \"$_q\" ]; } && { echo exists; exit 0; }; \
             _sshmcp_fail \"$_e\"; fi"
        }
    };
    let script = format!(
        "{prelude}{second}{EXISTS} || {{ echo notfound; exit 0; }}\n\
         _f=$(command stat -c %f -- \"$_p\" 2>&1) || _sshmcp_fail \"$_f\"\n\
         if [ -e \"$_q\" ] || [ -L \"$_q\" ]; then\n\
         [ {overwrite} = 1 ] || {{ echo exists; exit 0; }}\n\
         if [ -d \"$_q\" ] && [ ! -L \"$_q\" ]; then echo exists; exit 0; fi; fi\n\
         {copy}{place}\n\
         printf 'ok done %s\\n' \"$_f\"\n",
        prelude = status::prelude_with_path("cp mv mktemp rm stat", &source),
        second = super::second_path(&destination),
        overwrite = u8::from(req.overwrite),
    );
    // Errors name both paths: a missing directory may be the destination's.
    let shown = [source.as_slice(), b" -> ", destination.as_slice()].concat();
    let done = run(session, script, &shown, OnFailure::NothingChanged, true).await;
    done.map(|changed| {
        let (path, path_encoding) = inspect::remote_text(&destination);
        PathChanged {
            path,
            path_encoding,
            ..changed
        }
    })
    .map_err(|e| match e.code {
        ErrorCode::RemotePathExists => DaemonError::new(
            ErrorCode::RemotePathExists,
            "the destination exists; pass overwrite: true to replace a file (a directory is \
             never replaced)",
        ),
        _ => e,
    })
}
