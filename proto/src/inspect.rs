//! Wire types of the inspection tools: `stat`, `list_directory` and `read_file_range`.
//! Remote names and paths are bytes: text when they are UTF-8, base64 otherwise.

use serde::{Deserialize, Serialize};

use crate::exec::Encoding;
use crate::session::SessionAuth;

/// The most entries one `list_directory` answer holds.
pub const MAX_LIST_LIMIT: u32 = 1_000;
/// Entries per `list_directory` answer when the caller gives no limit.
pub const DEFAULT_LIST_LIMIT: u32 = 200;

/// A remote path as the caller gave it: text, or base64 of bytes that are not UTF-8 (as
/// `list_directory` returns such names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemotePath {
    pub path: String,
    pub encoding: Encoding,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatRequest {
    pub auth: SessionAuth,
    pub path: RemotePath,
    /// Describe what a symlink points to instead of the link itself.
    pub follow_symlinks: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRequest {
    pub auth: SessionAuth,
    pub path: RemotePath,
    /// Entries to skip, in the listing's order.
    pub offset: u64,
    /// Entries to return at most; the default when absent.
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRangeRequest {
    pub auth: SessionAuth,
    pub path: RemotePath,
    pub offset: u64,
    pub length: u64,
}

/// What kind of file a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FileType {
    File,
    Directory,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Other,
}

/// Bytes from the remote host as JSON text: the text itself when it is UTF-8, else base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RemoteText {
    pub text: String,
    pub encoding: Encoding,
}

/// `stat`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileStat {
    #[serde(rename = "type")]
    pub file_type: FileType,
    /// Bytes (for a symlink: the length of its target).
    pub size: u64,
    /// Permission bits in octal, with setuid, setgid and sticky: `0644`, `4755`.
    pub mode: String,
    pub uid: u32,
    pub gid: u32,
    /// The owner's and group's names, or their numbers when the host has no name for them.
    pub owner: String,
    pub group: String,
    /// RFC 3339 UTC.
    pub mtime: String,
    pub atime: String,
    pub ctime: String,
    /// For a symlink: where it points (not followed).
    pub link_target: Option<RemoteText>,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DirEntry {
    pub name: RemoteText,
    #[serde(rename = "type")]
    pub file_type: FileType,
    pub size: u64,
    pub mode: String,
    /// RFC 3339 UTC.
    pub mtime: String,
    pub link_target: Option<RemoteText>,
}

/// `list_directory`'s answer: one page of the entries, in the listing's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Listing {
    pub entries: Vec<DirEntry>,
    /// Entries in the directory (`.` and `..` not counted).
    pub total: u64,
    /// Where this page starts.
    pub offset: u64,
    /// More entries follow this page: ask again with `offset` + the entries returned.
    pub truncated: bool,
}

/// `read_file_range`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileRange {
    pub data: String,
    pub encoding: Encoding,
    pub offset: u64,
    pub bytes_read: u64,
    pub file_size: u64,
    /// The range returned reaches the end of the file.
    pub eof: bool,
}
