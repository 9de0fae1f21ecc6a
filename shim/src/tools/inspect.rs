//! The inspection tools: `stat`, `list_directory` and `read_file_range`, structured answers
//! about remote files, read-only.

use std::time::Duration;

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use sshmcp_proto::exec::Encoding;
use sshmcp_proto::inspect::{
    FileRange, FileStat, ListRequest, Listing, ReadRangeRequest, RemotePath, StatRequest,
};
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::session::SessionAuth;

use crate::answer::{self, Answer};
use crate::args;
use crate::server::Shim;

/// The daemon gives the host 30 s; this leaves room for the call itself.
const DEADLINE: Duration = Duration::from_secs(40);

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatArgs {
    /// The session (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// Remote path: absolute, or relative to the login directory (`~` is not expanded); any
    /// bytes but NUL.
    pub path: String,
    /// `utf-8` (default), or `base64` when `path` is the base64 of the path's bytes (for a
    /// list_directory entry that came with `path_encoding`, pass its `path` and
    /// `path_encoding` unchanged).
    pub path_encoding: Option<Encoding>,
    /// Describe what a symlink points to instead of the link itself; default false.
    pub follow_symlinks: Option<bool>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// The session (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// Remote directory: absolute, or relative to the login directory (`~` is not
    /// expanded); a symlink to a directory is followed.
    pub path: String,
    /// `utf-8` (default), or `base64` when `path` is the base64 of the path's bytes.
    pub path_encoding: Option<Encoding>,
    /// Entries to skip in the sorted listing; default 0.
    pub offset: Option<u64>,
    /// Entries to return, 1..1000; default 200.
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The session (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// Remote regular file: absolute, or relative to the login directory (`~` is not
    /// expanded); a symlink to one is followed.
    pub path: String,
    /// `utf-8` (default), or `base64` when `path` is the base64 of the path's bytes.
    pub path_encoding: Option<Encoding>,
    /// Byte offset to start at; default 0. Past the end gives no data and `eof: true`.
    pub offset: Option<u64>,
    /// Bytes wanted, at least 1. A length above the daemon's output cap (64 KiB by default)
    /// is clamped to it, not refused.
    #[schemars(range(min = 1))]
    pub length: u64,
}

fn auth(session_id: String, session_key: String) -> SessionAuth {
    SessionAuth {
        session_id,
        session_key,
    }
}

pub(crate) fn remote_path(path: String, encoding: Option<Encoding>) -> RemotePath {
    RemotePath {
        path,
        encoding: encoding.unwrap_or(Encoding::Utf8),
    }
}

#[tool_router(router = inspect_router, vis = "pub(crate)")]
impl Shim {
    /// Describe one remote path: `type` (`file`, `directory`, `symlink`, `fifo`, `socket`,
    /// `char_device`, `block_device`, `other`), `size`, `mode` (octal, e.g. `0644`), `uid`,
    /// `gid`, `owner`, `group`, `mtime`, `atime`, `ctime` (RFC 3339 UTC) and a symlink's
    /// `link_target`. Use it to check that a path exists and what it is before acting on it;
    /// a directory's entries come from list_directory, a file's bytes from read_file_range.
    /// Read-only. Errors: `remote_path_not_found` (nothing there, a parent is not a directory,
    /// or a symlink loop), `remote_permission_denied` (a parent directory is not searchable by
    /// the session's user: `sudo_exec` can look as root), `host_tool_missing` naming the GNU
    /// coreutils program the host lacks (use `exec` with what it has).
    #[tool(
        input_schema = schema_for_input::<StatArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<FileStat>>(),
        annotations(title = "Describe a remote path", read_only_hint = true,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = true)
    )]
    pub async fn stat(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: StatArgs = args::decode(raw)?;
                let req = StatRequest {
                    auth: auth(a.session_id, a.session_key),
                    path: remote_path(a.path, a.path_encoding),
                    follow_symlinks: a.follow_symlinks.unwrap_or(false),
                };
                let ctx = context_with_timeout(DEADLINE);
                self.daemon
                    .call("stat", |c| async move { c.stat(ctx, req).await })
                    .await
            }
            .await,
        )
    }

    /// List one remote directory's entries, a page at a time, sorted by name bytes:
    /// `entries` (each `name`, `type`, `size`, `mode`, `mtime`, and `link_target` for a
    /// symlink; a name that is not UTF-8 comes as base64 with `name_encoding` and its full
    /// `path`), `total` entries in the directory, and `truncated` when more follow (ask again
    /// with `offset` + the entries returned). Pages are read fresh, not a
    /// snapshot: entries added or removed between calls shift later pages. Not recursive (use
    /// exec with `find` for a tree). Prefer it to parsing `ls` through exec; read-only. Errors:
    /// `invalid_remote_type` (not a directory: use stat), `remote_path_not_found` (check the
    /// path with stat), `remote_permission_denied` (not readable or not searchable by the
    /// session's user: `sudo_exec` can list as root), `host_tool_missing` naming the GNU
    /// findutils program the host lacks (use `exec`).
    #[tool(
        input_schema = schema_for_input::<ListArgs>().expect("object schema"),
        output_schema = answer::schema_optional(
            schema_for_output::<Answer<Listing>>(),
            "DirEntry",
            &["path"],
        ),
        annotations(title = "List a remote directory", read_only_hint = true,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = true)
    )]
    pub async fn list_directory(&self, raw: JsonObject) -> CallToolResult {
        answer::respond_trimmed(
            async {
                let a: ListArgs = args::decode(raw)?;
                let req = ListRequest {
                    auth: auth(a.session_id, a.session_key),
                    path: remote_path(a.path, a.path_encoding),
                    offset: a.offset.unwrap_or(0),
                    limit: a.limit,
                };
                let ctx = context_with_timeout(DEADLINE);
                self.daemon
                    .call("list_directory", |c| async move {
                        c.list_directory(ctx, req).await
                    })
                    .await
            }
            .await,
            without_derivable_paths,
        )
    }

    /// Read exact bytes of one remote regular file, binary-safe: at most `length` bytes from
    /// `offset`. The answer: `data` (the text, or base64 with `encoding: base64` when the bytes are
    /// not UTF-8), `bytes_read`, `file_size`, and `eof` when nothing follows. For a whole file
    /// larger than one call's cap (64 KiB by default) use download_start instead. To read on
    /// through a file, call again at `offset` + `bytes_read` until `eof` is true. Use exec instead
    /// for lines, searches (`grep`, `tail -n`) or many files; `cat` through exec loses the middle
    /// of output beyond the cap. Read-only. Errors: `invalid_remote_type` (not a regular file:
    /// list_directory for a directory), `remote_path_not_found` (check the path with stat),
    /// `remote_permission_denied` (the session's user may not read it: as root, `sudo_exec` with
    /// `dd if=PATH bs=32768 skip=N count=1 status=none`, one block per call, until a block comes
    /// back short), `host_tool_missing` naming the GNU coreutils program the host lacks (use
    /// `exec`).
    #[tool(
        input_schema = schema_for_input::<ReadArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<FileRange>>(),
        annotations(title = "Read part of a remote file", read_only_hint = true,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = true)
    )]
    pub async fn read_file_range(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: ReadArgs = args::decode(raw)?;
                let req = ReadRangeRequest {
                    auth: auth(a.session_id, a.session_key),
                    path: remote_path(a.path, a.path_encoding),
                    offset: a.offset.unwrap_or(0),
                    length: a.length,
                };
                let ctx = context_with_timeout(DEADLINE);
                self.daemon
                    .call("read_file_range", |c| async move {
                        c.read_file_range(ctx, req).await
                    })
                    .await
            }
            .await,
        )
    }
}

/// An entry whose name and directory are UTF-8 needs no `path`: the agent joins the directory
/// it listed and the name. Only a path that must travel as base64 stays.
fn without_derivable_paths(listing: &mut JsonObject) {
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
