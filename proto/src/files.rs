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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovePathRequest {
    pub auth: SessionAuth,
    pub path: RemotePath,
    /// Remove a directory with everything in it.
    pub recursive: bool,
}
crate::session::authed!(RemovePathRequest);

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
