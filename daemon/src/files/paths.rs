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
        &session.host,
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

/// Makes a directory (`-p` with `$_parents`, `-m` with `$_mode`); a directory already there
/// is `ok same`.
const MAKE_DIRECTORY: &str = include_str!("make_directory.sh");

/// Removes a file, a symlink or a directory (with its contents when `$_recursive`).
/// BusyBox's rm has no `--one-file-system` (found out with no operand, where GNU's `rm -f`
/// does nothing and succeeds): there `find -xdev -depth` removes the tree from its leaves up,
/// never descending into another file system, whose mount point then stays and fails the
/// call as GNU's rm would.
const REMOVE_PATH: &str = include_str!("remove_path.sh");

/// Copies (`$_move` 0) or moves the path to `_q`; see [`copy_or_move`].
const COPY_MOVE: &str = include_str!("copy_move.sh");

/// The program that makes a directory at `path`.
pub(super) fn make_directory_program(path: &[u8], parents: bool, mode: Option<u32>) -> String {
    super::program(
        "mkdir stat",
        path,
        &[
            ("_parents", u8::from(parents).to_string()),
            ("_mode", super::octal(mode)),
        ],
        MAKE_DIRECTORY,
    )
}

/// The program that removes what is at `path`.
pub(super) fn remove_program(path: &[u8], recursive: bool) -> String {
    super::program(
        "rm rmdir stat",
        path,
        &[("_recursive", u8::from(recursive).to_string())],
        REMOVE_PATH,
    )
}

/// The program that copies (or with `move_it` moves) `source` to `destination`.
pub(super) fn copy_move_program(
    source: &[u8],
    destination: &[u8],
    overwrite: bool,
    move_it: bool,
) -> String {
    super::program(
        "cp mv mktemp rm stat",
        source,
        &[
            ("_q64", super::encoded(destination)),
            ("_move", u8::from(move_it).to_string()),
            ("_overwrite", u8::from(overwrite).to_string()),
        ],
        COPY_MOVE,
    )
}

/// `make_directory`: a directory (and with `parents` its missing parents); one that already
/// exists is no change, anything else at the path is `remote_path_exists`.
pub async fn make_directory(
    session: &Session,
    req: MakeDirectoryRequest,
) -> Result<PathChanged, DaemonError> {
    let path = super::file_path(&req.path, "path", false)?;
    if req.mode.is_some_and(|m| m > 0o7777) {
        return Err(super::invalid("`mode` must be at most four octal digits"));
    }
    let script = make_directory_program(&path, req.parents, req.mode);
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
    let path = super::file_path(&req.path, "path", false)?;
    let script = remove_program(&path, req.recursive);
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
    let source = super::file_path(&req.source, "source", false)?;
    let destination = super::file_path(&req.destination, "destination", false)?;
    let overwrite = req.overwrite;
    let script = copy_move_program(&source, &destination, overwrite, move_it);
    // Errors name both paths: a missing directory may be the destination's.
    let shown = [source.as_slice(), b" -> ", destination.as_slice()].concat();
    let done = run(session, script, &shown, OnFailure::NothingChanged, true)
        .await
        .map_err(|mut e| {
            if e.code == ErrorCode::RemotePathNotFound {
                e.message.push_str(
                    " (a missing source, or a missing destination directory: make_directory that)",
                );
            }
            e
        });
    done.map(|changed| {
        let (path, path_encoding) = inspect::remote_text(&destination);
        PathChanged {
            path,
            path_encoding,
            ..changed
        }
    })
    .map_err(|e| match e.code {
        // With `overwrite` only a directory stops it: say so, or the agent passes it again.
        ErrorCode::RemotePathExists if overwrite => DaemonError::new(
            ErrorCode::RemotePathExists,
            "a directory is never replaced, nor does one replace a file: give the new path \
             itself (inside the directory, for a copy or move into it)",
        ),
        ErrorCode::RemotePathExists => DaemonError::new(
            ErrorCode::RemotePathExists,
            "the destination exists; pass overwrite: true to replace a file (a directory is \
             never replaced: give the new path itself, inside it)",
        ),
        _ => e,
    })
}

// A call answered so adds nothing to its trail line but how it ended.
impl crate::audit::Answer for sshmcp_proto::files::PathChanged {}

/// The operation of `copy_path` or `move_path` (`$moving`): one program, the same summary.
macro_rules! copy_or_move_tool {
    ($tool:ident, $moving:literal) => {
        impl crate::operation::Operation for sshmcp_proto::service::tools::$tool {
            fn summary(req: &sshmcp_proto::files::CopyMoveRequest) -> String {
                let path = crate::audit::path;
                format!("{} → {}", path(&req.source), path(&req.destination))
            }

            async fn run(
                req: sshmcp_proto::files::CopyMoveRequest,
                session: std::sync::Arc<crate::session::Session>,
                _: &crate::session::Registry,
            ) -> Result<sshmcp_proto::files::PathChanged, sshmcp_proto::DaemonError> {
                crate::files::paths::copy_or_move(&session, req, $moving).await
            }
        }
    };
}
pub(crate) use copy_or_move_tool;
