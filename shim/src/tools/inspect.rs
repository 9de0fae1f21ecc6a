//! The inspection tools about remote files: `stat`, `list_directory` and `read_file_range`,
//! structured answers, read-only.

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
use sshmcp_proto::service::tools;
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
    pub session_id: String,
    pub session_key: String,
    /// Remote path.
    pub path: String,
    /// `path`'s encoding.
    pub path_encoding: Option<Encoding>,
    /// Describe a symlink's target instead.
    pub follow_symlinks: Option<bool>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    pub session_id: String,
    pub session_key: String,
    /// Remote path.
    pub path: String,
    /// `path`'s encoding.
    pub path_encoding: Option<Encoding>,
    /// Entries to skip; default 0.
    pub offset: Option<u64>,
    /// Page size; default 200.
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    pub session_id: String,
    pub session_key: String,
    /// Remote path.
    pub path: String,
    /// `path`'s encoding.
    pub path_encoding: Option<Encoding>,
    /// Byte offset; default 0.
    pub offset: Option<u64>,
    /// Bytes wanted; clamped to the 64 KiB output cap.
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
    /// `char_device`, `block_device`, `other`), `size`, `mode` (octal), `uid`, `gid`, `owner`,
    /// `group`, `mtime`, `atime`, `ctime` (RFC 3339 UTC), a symlink's `link_target`. Errors:
    /// `remote_path_not_found`, `remote_permission_denied` (sudo_exec).
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
                self.daemon.run::<tools::Stat>(ctx, req).await
            }
            .await,
        )
    }

    /// List a remote directory by name, a page at a time; not recursive (or by pattern: exec
    /// `find`). Answer: `entries` (`name`, `type`, `size`, `mode`, `mtime`, `link_target`, as stat;
    /// dotfiles too, no `.`/`..`), `total`, `truncated` if more follow (then ask at `offset` +
    /// entries returned). Errors: `invalid_remote_type` (not a directory),
    /// `remote_permission_denied` (sudo_exec), `host_tool_missing` (use exec).
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
                self.daemon.run::<tools::ListDirectory>(ctx, req).await
            }
            .await,
            without_derivable_paths,
        )
    }

    /// Read a byte range of a remote regular file (symlinks followed). Answer: `data` (text, or
    /// base64 with `encoding: base64` if not UTF-8; a range never ends inside a character: it stops
    /// before it), `bytes_read`, `file_size`, `eof` at the end. Read on at `offset` + `bytes_read`
    /// until `eof`. Whole files over 64 KiB: download_start; search: exec `grep`. Errors:
    /// `invalid_remote_type` (not a regular file), `remote_permission_denied` (sudo_exec).
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
                self.daemon.run::<tools::ReadFileRange>(ctx, req).await
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
