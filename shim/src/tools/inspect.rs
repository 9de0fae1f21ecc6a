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
    /// The session's secret key (from connect).
    pub session_key: String,
    /// Remote path, absolute or relative to the login directory; any bytes but NUL.
    pub path: String,
    /// `utf-8` (default) or `base64`: give a name list_directory returned as base64 back as it
    /// came.
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
    /// The session's secret key (from connect).
    pub session_key: String,
    /// Remote directory, absolute or relative to the login directory (a symlink to one is
    /// followed).
    pub path: String,
    /// `utf-8` (default) or `base64`, as for stat.
    pub path_encoding: Option<Encoding>,
    /// Entries to skip; default 0. For the next page pass `offset` + the entries returned.
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
    /// The session's secret key (from connect).
    pub session_key: String,
    /// Remote regular file (a symlink to one is followed).
    pub path: String,
    /// `utf-8` (default) or `base64`, as for stat.
    pub path_encoding: Option<Encoding>,
    /// Byte offset to start at; default 0. Past the end gives no data and `eof: true`.
    pub offset: Option<u64>,
    /// Bytes to return at most, at least 1; the daemon's output cap (64 KiB by default) also
    /// bounds it.
    #[schemars(range(min = 1))]
    pub length: u64,
}

fn auth(session_id: String, session_key: String) -> SessionAuth {
    SessionAuth {
        session_id,
        session_key,
    }
}

fn remote_path(path: String, encoding: Option<Encoding>) -> RemotePath {
    RemotePath {
        path,
        encoding: encoding.unwrap_or(Encoding::Utf8),
    }
}

#[tool_router(router = inspect_router, vis = "pub(crate)")]
impl Shim {
    /// Describe one remote path without running a shell command: `type` (file, directory,
    /// symlink, fifo, socket, char_device, block_device, other), `size`, `mode` (octal
    /// permission bits), `uid`/`gid` with `owner`/`group` names, `mtime`/`atime`/`ctime` (RFC
    /// 3339 UTC) and, for a symlink, `link_target`. Any bytes in the path are safe (no
    /// quoting). Use it to check that a path exists or what it is before acting on it.
    /// Errors: `remote_path_not_found` (nothing there, or a parent is not a directory),
    /// `remote_permission_denied` (a parent directory is not searchable).
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

    /// List one remote directory, one page at a time: each entry's `name` (with `encoding`
    /// `base64` when the name is not UTF-8: pass it back as `path_encoding: base64`),
    /// `type`, `size`, `mode`, `mtime` and `link_target`. Entries come sorted by name bytes,
    /// `.` and `..` left out; `total` counts them all and `truncated` says more follow this
    /// page (ask again with `offset` + the entries returned). Not recursive. Prefer it to
    /// parsing `ls` through exec. Errors: `invalid_remote_type` (not a directory: use stat),
    /// `remote_path_not_found`, `remote_permission_denied`.
    #[tool(
        input_schema = schema_for_input::<ListArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<Listing>>(),
        annotations(title = "List a remote directory", read_only_hint = true,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = true)
    )]
    pub async fn list_directory(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
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
        )
    }

    /// Read part of a remote regular file: at most `length` bytes from `offset`, never more
    /// than the daemon's output cap. `data` is the text itself (`encoding: utf-8`) or base64
    /// for other bytes; `bytes_read`, `file_size`, and `eof` (true when the range returned
    /// reaches the end of the file, an exact final range included). Read a large file in
    /// ranges, or copy it with a transfer; use exec for computed output. Errors:
    /// `invalid_remote_type` (not a regular file: use list_directory for a directory),
    /// `remote_path_not_found`, `remote_permission_denied`.
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
