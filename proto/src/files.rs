//! Wire types of the tools that change small remote files (`write_file`): content carried on
//! the channel's stdin, published by a rename, guarded by an optional expected hash.

use serde::{Deserialize, Serialize};

use crate::exec::Encoding;
use crate::inspect::RemotePath;
use crate::session::SessionAuth;

/// The most content one `write_file` carries (after base64 decoding).
pub const MAX_WRITE_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteFileRequest {
    pub auth: SessionAuth,
    pub path: RemotePath,
    /// The file's new bytes, at most [`MAX_WRITE_BYTES`].
    pub content: Vec<u8>,
    /// Permission bits for the file (a new one, or instead of the old file's).
    pub mode: Option<u32>,
    pub create_dirs: bool,
    pub overwrite: bool,
    /// Write only if the file's SHA-256 (lowercase hex) is still this.
    pub expected_sha256: Option<String>,
}
crate::session::authed!(WriteFileRequest);

/// `write_file` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    pub session_id: String,
    pub session_key: String,
    // Said once in the instructions ("Remote paths are ...").
    pub path: String,
    pub path_encoding: Option<Encoding>,
    /// The whole file; at most 1 MiB decoded.
    pub content: String,
    /// `base64`: `content` is base64 (binary).
    pub encoding: Option<Encoding>,
    /// Octal, e.g. `0644`, set exactly; default: 0666 less umask if new, else kept.
    #[schemars(regex(pattern = r"^[0-7]{3,4}$"))]
    pub mode: Option<String>,
    /// Make missing parent directories.
    pub create_dirs: Option<bool>,
    /// Replace an existing file.
    pub overwrite: Option<bool>,
    /// Write only if the file's SHA-256 is still this (else `file_changed`); implies `overwrite`.
    /// From an earlier `sha256` or `sha256sum`.
    pub expected_sha256: Option<String>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::WriteFile {
    type Args = WriteArgs;
    const TITLE: &'static str = "Write a remote file";
    const DESCRIPTION: &'static str = "Write a whole remote file \
        atomically; `content` is data, never shell. Answer: `bytes_written`, `sha256`, \
        `created` if new. Keeps the owner. Part of a file: \
        edit_file. Errors: `remote_path_exists` (set `overwrite`), `file_changed` \
        (`error.sha256` is current: read again, redo, retry with it), \
        `remote_path_not_found` (set `create_dirs`), `invalid_remote_type` (a symlink: write \
        its `link_target`, relative to its directory), `remote_permission_denied` (sudo_exec `cp` from a copy you wrote), `invalid_arguments` \
        (over 1 MiB: upload_start).";
    const HINTS: crate::described::Hints = crate::described::Hints::MAY_DESTROY;
    /// The daemon gives the host 60 s; this leaves room for the call itself.
    const DEADLINE: std::time::Duration = std::time::Duration::from_secs(70);

    fn request(
        args: WriteArgs,
        _: &crate::described::Here,
    ) -> Result<WriteFileRequest, crate::DaemonError> {
        use base64::Engine as _;
        let content = match args.encoding.unwrap_or(Encoding::Utf8) {
            Encoding::Utf8 => args.content.into_bytes(),
            Encoding::Base64 => base64::engine::general_purpose::STANDARD
                .decode(&args.content)
                .map_err(|_| {
                    crate::DaemonError::invalid_arguments(
                        "`content` is not valid base64 (encoding is base64)",
                    )
                })?,
        };
        // Checked here too: content far over the bound would not even reach the daemon (its
        // frame limit), and would fail as a transport error.
        if content.len() > MAX_WRITE_BYTES {
            return Err(crate::DaemonError::invalid_arguments(format!(
                "`content` holds {} bytes; at most {MAX_WRITE_BYTES} (1 MiB) are written at once \
                 (upload_start copies larger files)",
                content.len()
            )));
        }
        Ok(WriteFileRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            path: crate::described::remote_path(args.path, args.path_encoding),
            content,
            mode: crate::described::octal_mode(args.mode, "0644")?,
            create_dirs: args.create_dirs.unwrap_or(false),
            overwrite: args.overwrite.unwrap_or(false),
            expected_sha256: args.expected_sha256,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileWritten {
    /// The path as given.
    pub path: String,
    /// `utf-8`, or `base64` when `path` is the base64 of a name that is not UTF-8.
    pub path_encoding: Encoding,
    /// The content's length in bytes.
    pub bytes_written: u64,
    /// The SHA-256 of the new content: pass it as `expected_sha256` to change the file again
    /// only if nobody else did meanwhile.
    pub sha256: String,
    /// True when the file did not exist before.
    pub created: bool,
}

/// The longest `old_text` of one `edit_file`: the host's sed compiles it into a pattern, and
/// a 16 KiB one took it 5 s and 2 GiB.
pub const MAX_OLD_TEXT_BYTES: usize = 4096;

/// The longest `new_text` of one `edit_file`.
pub const MAX_NEW_TEXT_BYTES: usize = 64 * 1024;

/// The largest file `edit_file` edits (the host holds it whole while it edits).
pub const MAX_EDIT_FILE_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditFileRequest {
    pub auth: SessionAuth,
    pub path: RemotePath,
    pub old_text: String,
    pub new_text: String,
    pub replace_all: bool,
    /// Edit only if the file's SHA-256 (lowercase hex) is still this.
    pub expected_sha256: Option<String>,
}
crate::session::authed!(EditFileRequest);

/// `edit_file` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    pub session_id: String,
    pub session_key: String,
    // Said once in the instructions ("Remote paths are ...").
    pub path: String,
    pub path_encoding: Option<Encoding>,
    /// Exact text, whitespace included; at most 4 KiB.
    pub old_text: String,
    /// The replacement (empty deletes); at most 64 KiB.
    pub new_text: String,
    /// Replace every occurrence.
    pub replace_all: Option<bool>,
    /// Edit only if the file's SHA-256 is still this (else `file_changed`). From an earlier
    /// `sha256` or `sha256sum`.
    pub expected_sha256: Option<String>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::EditFile {
    type Args = EditArgs;
    const TITLE: &'static str = "Edit a remote file";
    const DESCRIPTION: &'static str = "Replace exact text in a remote \
        text file, atomically: `old_text` must occur once unless `replace_all`. Answer: \
        `replacements`, `sha256`. Keeps mode and owner. Whole or new file: write_file. \
        Errors: `remote_path_not_found`, `edit_no_match` (read the file, copy exactly), \
        `edit_ambiguous_match` (`error.count` hits: add context or `replace_all`), \
        `file_changed` (`error.sha256` is current: read again, redo), `invalid_remote_type` (a symlink: edit its \
        `link_target`, relative to its directory; NUL bytes: write_file it whole), `remote_permission_denied` (sudo_exec `cp` from a copy you wrote), `file_too_large` (over \
        64 MiB: download_start, edit, upload_start), `invalid_arguments` (empty `old_text`, \
        or over its limit: split the edit).";
    const HINTS: crate::described::Hints = crate::described::Hints::MAY_DESTROY;
    /// The host may take two minutes on a 64 MiB file.
    const DEADLINE: std::time::Duration = std::time::Duration::from_secs(130);

    fn request(
        args: EditArgs,
        _: &crate::described::Here,
    ) -> Result<EditFileRequest, crate::DaemonError> {
        Ok(EditFileRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            path: crate::described::remote_path(args.path, args.path_encoding),
            old_text: args.old_text,
            new_text: args.new_text,
            replace_all: args.replace_all.unwrap_or(false),
            expected_sha256: args.expected_sha256,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileEdited {
    /// The path as given.
    pub path: String,
    /// `utf-8`, or `base64` when `path` is the base64 of a name that is not UTF-8.
    pub path_encoding: Encoding,
    /// How many occurrences of `old_text` were replaced.
    pub replacements: u64,
    /// The SHA-256 of the edited file: pass it as `expected_sha256` to change the file again
    /// only if nobody else did meanwhile.
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MakeDirectoryRequest {
    pub auth: SessionAuth,
    pub path: RemotePath,
    /// Make missing parents too.
    pub parents: bool,
    /// Permission bits of a directory made (default: 0777 less the umask).
    pub mode: Option<u32>,
}
crate::session::authed!(MakeDirectoryRequest);

/// `make_directory` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MakeDirectoryArgs {
    pub session_id: String,
    pub session_key: String,
    // Said once in the instructions ("Remote paths are ...").
    pub path: String,
    pub path_encoding: Option<Encoding>,
    /// Also make missing parents; default true.
    pub parents: Option<bool>,
    /// Octal, e.g. `0755`, for the last directory made; default: 0777 less umask.
    #[schemars(regex(pattern = r"^[0-7]{3,4}$"))]
    pub mode: Option<String>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::MakeDirectory {
    type Args = MakeDirectoryArgs;
    const TITLE: &'static str = "Make a remote directory";
    const DESCRIPTION: &'static str = "Make a remote directory: `changed: true` if made; one already there is left as is, `mode` too. Errors: \
        `remote_path_exists` (not a directory), `remote_path_not_found` (a parent is \
        missing), `remote_permission_denied` (sudo_exec).";
    const HINTS: crate::described::Hints = crate::described::Hints::SETS_HOST;
    const ANSWER_FIELDS: &'static [(&'static str, &'static str)] = &[
        ("path", "The directory as given."),
        ("type", "What is there: `directory`."),
    ];
    const DEADLINE: std::time::Duration = PATHS_DEADLINE;

    fn request(
        args: MakeDirectoryArgs,
        _: &crate::described::Here,
    ) -> Result<MakeDirectoryRequest, crate::DaemonError> {
        Ok(MakeDirectoryRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            path: crate::described::remote_path(args.path, args.path_encoding),
            parents: args.parents.unwrap_or(true),
            mode: crate::described::octal_mode(args.mode, "0755")?,
        })
    }
}

/// How long a client waits for a path tool: the daemon gives the host 300 s (a recursive
/// copy), and this leaves room for the call itself.
#[cfg(feature = "schema")]
pub const PATHS_DEADLINE: std::time::Duration = std::time::Duration::from_secs(310);

/// `changed` is always true for a removal, a copy or a move (each either happens or fails):
/// only make_directory's answer carries it.
#[cfg(feature = "schema")]
const NOT_FOR_CHANGES: &[&str] = &["changed"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovePathRequest {
    pub auth: SessionAuth,
    pub path: RemotePath,
    /// Remove a directory with everything in it.
    pub recursive: bool,
}
crate::session::authed!(RemovePathRequest);

/// `remove_path` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemovePathArgs {
    pub session_id: String,
    pub session_key: String,
    /// Remote path; not `/`, `.` or `..`.
    pub path: String,
    pub path_encoding: Option<Encoding>,
    /// Remove a directory with its contents.
    pub recursive: Option<bool>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::RemovePath {
    type Args = RemovePathArgs;
    const TITLE: &'static str = "Remove a remote path";
    const DESCRIPTION: &'static str = "Remove a remote file, symlink \
        (itself) or directory; no wildcards (exec `rm`; a tree that may take over 30 s: `rm -rf` \
        via command_start). Answer: `type` removed. Errors: \
        `remote_path_not_found` (already gone, or a wrong path), `directory_not_empty` (`recursive: true` if \
        its contents may go), `remote_permission_denied` (sudo_exec); `internal_error` after \
        300 s (part may be gone: finish with `rm -rf`).";
    const HINTS: crate::described::Hints = crate::described::Hints::MAY_DESTROY;
    const ANSWER_FIELDS: &'static [(&'static str, &'static str)] = &[
        ("path", "The removed path as given."),
        ("type", "What was removed."),
    ];
    const NOT_IN_ANSWER: &'static [&'static str] = NOT_FOR_CHANGES;
    const DEADLINE: std::time::Duration = PATHS_DEADLINE;

    fn request(
        args: RemovePathArgs,
        _: &crate::described::Here,
    ) -> Result<RemovePathRequest, crate::DaemonError> {
        Ok(RemovePathRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            path: crate::described::remote_path(args.path, args.path_encoding),
            recursive: args.recursive.unwrap_or(false),
        })
    }
}

/// `copy_path` and `move_path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyMoveRequest {
    pub auth: SessionAuth,
    pub source: RemotePath,
    pub destination: RemotePath,
    /// Replace an existing destination file (a directory is never replaced).
    pub overwrite: bool,
}
crate::session::authed!(CopyMoveRequest);

/// `copy_path` and `move_path` as an agent calls them.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CopyMoveArgs {
    pub session_id: String,
    pub session_key: String,
    /// File, symlink (as the link) or directory.
    pub source: String,
    pub source_encoding: Option<Encoding>,
    /// The new path itself, not a directory to put it in.
    pub destination: String,
    pub destination_encoding: Option<Encoding>,
    /// Replace an existing file there (never a directory).
    pub overwrite: Option<bool>,
}

#[cfg(feature = "schema")]
impl From<CopyMoveArgs> for CopyMoveRequest {
    fn from(args: CopyMoveArgs) -> CopyMoveRequest {
        CopyMoveRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            source: crate::described::remote_path(args.source, args.source_encoding),
            destination: crate::described::remote_path(args.destination, args.destination_encoding),
            overwrite: args.overwrite.unwrap_or(false),
        }
    }
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::CopyPath {
    type Args = CopyMoveArgs;
    const TITLE: &'static str = "Copy a remote path";
    const DESCRIPTION: &'static str = "Copy a remote file, symlink or \
        directory tree on the same host, atomically (as `cp -a`; a tree that may take over 30 s: \
        `cp -a` via command_start). Answer: `type` copied. \
        Errors: `remote_path_not_found` (source, or destination's directory: \
        make_directory), `remote_path_exists` (see `overwrite`; a directory there: pick a new \
        name), `remote_permission_denied` (sudo_exec); `internal_error` after 300 s (may leave \
        `.sshmcp-copy.*` beside the destination: remove_path it).";
    const HINTS: crate::described::Hints = crate::described::Hints::MAY_DESTROY;
    const ANSWER_FIELDS: &'static [(&'static str, &'static str)] = &[
        ("path", "The copy's path (`destination`) as given."),
        ("type", "What was copied."),
    ];
    const NOT_IN_ANSWER: &'static [&'static str] = NOT_FOR_CHANGES;
    const DEADLINE: std::time::Duration = PATHS_DEADLINE;

    fn request(
        args: CopyMoveArgs,
        _: &crate::described::Here,
    ) -> Result<CopyMoveRequest, crate::DaemonError> {
        Ok(args.into())
    }
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::MovePath {
    type Args = CopyMoveArgs;
    const TITLE: &'static str = "Move a remote path";
    const DESCRIPTION: &'static str = "Move or rename a remote file, \
        symlink or directory: one atomic rename on a file system; across file \
        systems `mv` copies, then removes the source (not atomic; a tree that may take over 30 s: \
        `mv` via command_start). Answer: `type` moved. \
        Errors: `remote_path_not_found` (source, or destination's directory: \
        make_directory), `remote_path_exists` (see `overwrite`; a directory there: pick a new \
        name), `remote_permission_denied` (sudo_exec); `internal_error` after 300 s (across file \
        systems the destination may be partial or the source partly removed: stat both \
        before removing either).";
    const HINTS: crate::described::Hints = crate::described::Hints::MAY_DESTROY;
    const ANSWER_FIELDS: &'static [(&'static str, &'static str)] = &[
        ("path", "The new path (`destination`) as given."),
        ("type", "What was moved."),
    ];
    const NOT_IN_ANSWER: &'static [&'static str] = NOT_FOR_CHANGES;
    const DEADLINE: std::time::Duration = PATHS_DEADLINE;

    fn request(
        args: CopyMoveArgs,
        _: &crate::described::Here,
    ) -> Result<CopyMoveRequest, crate::DaemonError> {
        Ok(args.into())
    }
}

/// What a housekeeping tool did to a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PathChanged {
    /// The path acted on as given: the directory made, the path removed, or the copy's or
    /// move's destination.
    pub path: String,
    /// `utf-8`, or `base64` when `path` is the base64 of a name that is not UTF-8.
    pub path_encoding: Encoding,
    /// What it is (or was, once removed).
    #[serde(rename = "type")]
    pub file_type: crate::inspect::FileType,
    /// False only when make_directory found the directory already there (its mode is then
    /// left as it is).
    pub changed: bool,
}
