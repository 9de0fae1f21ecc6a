//! Wire types of the inspection tools: `stat`, `list_directory`, `read_file_range` and
//! `host_info`.
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
crate::session::authed!(StatRequest);

/// `stat` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatArgs {
    pub session_id: String,
    pub session_key: String,
    // Said once in the instructions ("Remote paths are ...").
    pub path: String,
    pub path_encoding: Option<Encoding>,
    /// Describe a symlink's target instead.
    pub follow_symlinks: Option<bool>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::Stat {
    type Args = StatArgs;
    const TITLE: &'static str = "Describe a remote path";
    const DESCRIPTION: &'static str = "Describe one remote path: `type` (`file`, `directory`, \
        `symlink`, `fifo`, `socket`, `char_device`, `block_device`, `other`), `size`, `mode` \
        (octal), `uid`, `gid`, `owner`, `group`, `mtime`, `atime`, `ctime` (RFC 3339 UTC), a \
        symlink's `link_target`. Errors: `remote_path_not_found`, `remote_permission_denied` \
        (sudo_exec).";
    const HINTS: crate::described::Hints = crate::described::Hints::READS_HOST;
    const DEADLINE: std::time::Duration = INSPECT_DEADLINE;

    fn request(
        args: StatArgs,
        _: &crate::described::Here,
    ) -> Result<StatRequest, crate::DaemonError> {
        Ok(StatRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            path: crate::described::remote_path(args.path, args.path_encoding),
            follow_symlinks: args.follow_symlinks.unwrap_or(false),
        })
    }
}

/// How long a client waits for an inspection tool: the daemon gives the host 30 s, and this
/// leaves room for the call itself.
#[cfg(feature = "schema")]
pub const INSPECT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(40);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRequest {
    pub auth: SessionAuth,
    pub path: RemotePath,
    /// Entries to skip, in the listing's order.
    pub offset: u64,
    /// Entries to return at most; the default when absent.
    pub limit: Option<u32>,
}
crate::session::authed!(ListRequest);

/// `list_directory` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    pub session_id: String,
    pub session_key: String,
    // Said once in the instructions ("Remote paths are ...").
    pub path: String,
    pub path_encoding: Option<Encoding>,
    /// Entries to skip; default 0.
    pub offset: Option<u64>,
    /// Page size; default 200.
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::ListDirectory {
    type Args = ListArgs;
    const TITLE: &'static str = "List a remote directory";
    const DESCRIPTION: &'static str = "List a remote directory (through a symlink too), sorted by name, a page at a time; not recursive, no patterns (exec `find`). Answer: `entries` (`name`, `type`, `size`, \
        `mode`, `mtime`, `link_target`, as stat; dotfiles too, no `.`/`..`; a name not UTF-8 \
        is base64 (`name_encoding`), with a base64 `path` to pass on), `total`, \
        `truncated` if more follow (then ask at `offset` + entries returned). Errors: \
        `remote_path_not_found`, `invalid_remote_type` (not a directory), `remote_permission_denied` (sudo_exec), \
        `host_tool_missing` (use exec).";
    const HINTS: crate::described::Hints = crate::described::Hints::READS_HOST;
    const DEADLINE: std::time::Duration = INSPECT_DEADLINE;
    const SOMETIMES_IN_PARTS: &'static [(&'static str, &'static [&'static str])] =
        &[("DirEntry", &["path"])];

    /// An entry whose name and directory are UTF-8 needs no `path`: the agent joins the
    /// directory it listed and the name. Only a path that must travel as base64 stays.
    fn shape(listing: &mut serde_json::Map<String, serde_json::Value>) {
        let Some(entries) = listing.get_mut("entries").and_then(|e| e.as_array_mut()) else {
            return;
        };
        for entry in entries.iter_mut().filter_map(|e| e.as_object_mut()) {
            let utf8 = |field: &str| entry.get(field).and_then(|e| e.as_str()) == Some("utf-8");
            if utf8("name_encoding") && utf8("path_encoding") {
                entry.remove("path");
                entry.remove("path_encoding");
            }
        }
    }

    fn request(
        args: ListArgs,
        _: &crate::described::Here,
    ) -> Result<ListRequest, crate::DaemonError> {
        Ok(ListRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            path: crate::described::remote_path(args.path, args.path_encoding),
            offset: args.offset.unwrap_or(0),
            limit: args.limit,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRangeRequest {
    pub auth: SessionAuth,
    pub path: RemotePath,
    pub offset: u64,
    pub length: u64,
}
crate::session::authed!(ReadRangeRequest);

/// `read_file_range` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    pub session_id: String,
    pub session_key: String,
    // Said once in the instructions ("Remote paths are ...").
    pub path: String,
    pub path_encoding: Option<Encoding>,
    /// Byte offset; default 0.
    pub offset: Option<u64>,
    /// Bytes wanted; clamped to the 64 KiB output cap.
    #[schemars(range(min = 1))]
    pub length: u64,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::ReadFileRange {
    type Args = ReadArgs;
    const TITLE: &'static str = "Read part of a remote file";
    const DESCRIPTION: &'static str = "Read a byte range of a remote regular file (symlinks \
        followed). Answer: `data` (text, or base64 with `encoding: base64` if not UTF-8; a range \
        never ends inside a character: it stops before it), `bytes_read`, `file_size`, `eof` at \
        the end. Read on at `offset` + `bytes_read` until `eof`. Whole files over 64 KiB: \
        download_start; search: exec `grep`. Errors: `remote_path_not_found`, \
        `invalid_remote_type` (not a regular file), `remote_permission_denied` (sudo_exec).";
    const HINTS: crate::described::Hints = crate::described::Hints::READS_HOST;
    const DEADLINE: std::time::Duration = INSPECT_DEADLINE;

    fn request(
        args: ReadArgs,
        _: &crate::described::Here,
    ) -> Result<ReadRangeRequest, crate::DaemonError> {
        Ok(ReadRangeRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            path: crate::described::remote_path(args.path, args.path_encoding),
            offset: args.offset.unwrap_or(0),
            length: args.length,
        })
    }
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

/// `stat`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileStat {
    /// What the path is (for a symlink not followed: `symlink`).
    #[serde(rename = "type")]
    pub file_type: FileType,
    /// Bytes (for a symlink: the length of its target).
    pub size: u64,
    /// Permission bits in octal, with setuid, setgid and sticky: `0644`, `4755`.
    pub mode: String,
    /// Numeric owner.
    pub uid: u32,
    /// Numeric group.
    pub gid: u32,
    /// The owner's name, or the number when the host has no name for it.
    pub owner: String,
    /// The group's name, or the number when the host has no name for it.
    pub group: String,
    /// Last content change, RFC 3339 UTC.
    pub mtime: String,
    /// Last access, RFC 3339 UTC.
    pub atime: String,
    /// Last metadata change, RFC 3339 UTC.
    pub ctime: String,
    /// For a symlink: where it points (not followed), as stored.
    pub link_target: Option<String>,
    /// How `link_target` carries its bytes: `utf-8`, or `base64` when they are not UTF-8.
    pub link_target_encoding: Option<Encoding>,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DirEntry {
    /// The entry's name in the directory.
    pub name: String,
    /// How `name` carries its bytes: `utf-8`, or `base64` when they are not UTF-8.
    pub name_encoding: Encoding,
    /// Only when the name or the directory's path is not UTF-8: the directory's path joined
    /// with the name, as base64 (see `path_encoding`); give both to `stat`, `read_file_range`
    /// or `list_directory` as they are. Otherwise join the directory you listed and `name`.
    pub path: String,
    /// How `path` carries its bytes: `utf-8`, or `base64` when they are not UTF-8.
    pub path_encoding: Encoding,
    /// What the entry itself is (a symlink is not followed: `symlink`).
    #[serde(rename = "type")]
    pub file_type: FileType,
    /// Bytes of the entry itself (a symlink: the length of its target).
    pub size: u64,
    /// Permission bits in octal, as in `stat`.
    pub mode: String,
    /// Last content change, RFC 3339 UTC.
    pub mtime: String,
    /// For a symlink: where it points, as stored; null when the user may not read it.
    pub link_target: Option<String>,
    /// How `link_target` carries its bytes, when there is one.
    pub link_target_encoding: Option<Encoding>,
}

/// `list_directory`'s answer: one page of the entries, in the listing's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Listing {
    /// This page's entries, sorted by name bytes.
    pub entries: Vec<DirEntry>,
    /// Entries in the directory now (`.` and `..` not counted).
    pub total: u64,
    /// Where this page starts in the sorted entries.
    pub offset: u64,
    /// More entries follow this page (nothing was lost): ask with `offset` + the entries
    /// returned.
    pub truncated: bool,
}

/// `read_file_range`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileRange {
    /// The bytes read, as text or base64 (see `encoding`).
    pub data: String,
    /// `utf-8` when the bytes read are valid UTF-8 by themselves, else `base64`: decode each
    /// range by its own encoding before joining ranges.
    pub encoding: Encoding,
    /// Where the range starts, as asked.
    pub offset: u64,
    /// Bytes returned.
    pub bytes_read: u64,
    /// The file's size as the host's `stat` reported it before the read (0 for many files
    /// under /proc and /sys, whose size is unknown until read).
    pub file_size: u64,
    /// Nothing follows the range returned: the end of the file was reached (an exact final
    /// range included).
    pub eof: bool,
}

/// The most paths one `host_info` asks about.
pub const MAX_HOST_INFO_PATHS: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfoRequest {
    pub auth: SessionAuth,
    /// The paths whose file systems to measure (text, no newline); empty: home and `/`.
    pub paths: Vec<String>,
}
crate::session::authed!(HostInfoRequest);

/// `host_info` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostInfoArgs {
    pub session_id: String,
    pub session_key: String,
    /// Paths whose file systems to measure (at most 16); default home and `/`.
    pub paths: Option<Vec<String>>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::HostInfo {
    type Args = HostInfoArgs;
    const TITLE: &'static str = "Describe the host";
    const DESCRIPTION: &'static str = "Describe the host (before heavy work): `os`, `kernel`, \
        `arch`, `cpus`, `memory_total`, `memory_available` (bytes), `load` (1, 5, 15 min), \
        `uptime` (s), `filesystems` (list, per path: `path`, `mount`, `total_bytes`, \
        `free_bytes` for the user; a path it cannot reach: only `path`). Unknown facts are left \
        out.";
    const HINTS: crate::described::Hints = crate::described::Hints::READS_HOST;
    const DEADLINE: std::time::Duration = INSPECT_DEADLINE;

    fn request(
        args: HostInfoArgs,
        _: &crate::described::Here,
    ) -> Result<HostInfoRequest, crate::DaemonError> {
        Ok(HostInfoRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            paths: args.paths.unwrap_or_default(),
        })
    }
}

/// What a host tells of itself. A fact the host cannot tell is left out, never guessed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HostInfo {
    /// The operating system: `PRETTY_NAME` of `/etc/os-release`, else the product name and
    /// version (macOS), else the kernel's name and release.
    pub os: Option<String>,
    /// The kernel's name and release (`uname -sr`).
    pub kernel: Option<String>,
    /// The machine's architecture (`uname -m`): x86_64, aarch64, arm64, ...
    pub arch: Option<String>,
    /// Processors online.
    pub cpus: Option<u32>,
    /// Bytes of memory.
    pub memory_total: Option<u64>,
    /// Bytes of memory available to new work without swapping (Linux's `MemAvailable`).
    pub memory_available: Option<u64>,
    /// Load averages over 1, 5 and 15 minutes.
    pub load: Option<Vec<f64>>,
    /// Seconds since boot.
    pub uptime: Option<f64>,
    /// The file system of each path asked about (home and `/` when none), in order.
    pub filesystems: Vec<FileSystemSpace>,
}

/// The space of the file system holding one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileSystemSpace {
    /// The path as asked (`~` for the home directory asked by default).
    pub path: String,
    /// Where that file system is mounted; left out when the host could not tell (a path that
    /// does not exist, or one the user may not reach).
    pub mount: Option<String>,
    /// Its size in bytes.
    pub total_bytes: Option<u64>,
    /// Bytes the session's user may still write there.
    pub free_bytes: Option<u64>,
}
