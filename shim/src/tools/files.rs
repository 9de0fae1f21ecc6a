//! The tools that change small remote files: `write_file` (a whole file) and `edit_file` (a
//! literal replacement), atomic, guarded by an optional expected hash.

use std::time::Duration;

use base64::Engine as _;
use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use sshmcp_proto::DaemonError;
use sshmcp_proto::described::remote_path;
use sshmcp_proto::exec::Encoding;
use sshmcp_proto::files::{
    EditFileRequest, FileEdited, FileWritten, MAX_WRITE_BYTES, WriteFileRequest,
};
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::service::tools;
use sshmcp_proto::session::SessionAuth;

use crate::answer::{self, Answer};
use crate::args;
use crate::server::Shim;

/// The daemon gives the host 60 s; this leaves room for the call itself.
const DEADLINE: Duration = Duration::from_secs(70);

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    pub session_id: String,
    pub session_key: String,
    /// Remote path.
    pub path: String,
    /// `path`'s encoding.
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

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    pub session_id: String,
    pub session_key: String,
    /// Remote path.
    pub path: String,
    /// `path`'s encoding.
    pub path_encoding: Option<Encoding>,
    /// Exact text, whitespace included; at most 4 KiB. Add lines to make it unique.
    pub old_text: String,
    /// The replacement (empty deletes); at most 64 KiB.
    pub new_text: String,
    /// Replace every occurrence.
    pub replace_all: Option<bool>,
    /// Edit only if the file's SHA-256 is still this (else `file_changed`). From an earlier
    /// `sha256` or `sha256sum`.
    pub expected_sha256: Option<String>,
}

#[tool_router(router = files_router, vis = "pub(crate)")]
impl Shim {
    /// Write a whole remote file atomically; `content` is data, never shell. Answer:
    /// `bytes_written`, `sha256`, `created` if new. An existing file keeps its mode and owner. Part
    /// of a file: edit_file. Errors: `remote_path_exists` (set `overwrite`), `file_changed`
    /// (`error.sha256` is current: read again, redo, retry with it), `remote_path_not_found` (set
    /// `create_dirs`), `invalid_remote_type` (a symlink: write its `link_target`),
    /// `remote_permission_denied` (sudo_exec), `invalid_arguments` (over 1 MiB: upload_start).
    #[tool(
        input_schema = schema_for_input::<WriteArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<FileWritten>>(),
        annotations(title = "Write a remote file", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn write_file(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: WriteArgs = args::decode(raw)?;
                let content = match a.encoding.unwrap_or(Encoding::Utf8) {
                    Encoding::Utf8 => a.content.into_bytes(),
                    Encoding::Base64 => base64::engine::general_purpose::STANDARD
                        .decode(&a.content)
                        .map_err(|_| {
                            DaemonError::invalid_arguments(
                                "`content` is not valid base64 (encoding is base64)",
                            )
                        })?,
                };
                // Checked here too: content far over the bound would not even reach the
                // daemon (its frame limit), and would fail as a transport error.
                if content.len() > MAX_WRITE_BYTES {
                    return Err(DaemonError::invalid_arguments(format!(
                        "`content` holds {} bytes; at most {MAX_WRITE_BYTES} (1 MiB) are written \
                         at once (upload_start copies larger files)",
                        content.len()
                    )));
                }
                let mode = match a.mode {
                    Some(m) => Some(u32::from_str_radix(&m, 8).map_err(|_| {
                        DaemonError::invalid_arguments("`mode` must be octal digits, e.g. 0644")
                    })?),
                    None => None,
                };
                let req = WriteFileRequest {
                    auth: SessionAuth {
                        session_id: a.session_id,
                        session_key: a.session_key,
                    },
                    path: remote_path(a.path, a.path_encoding),
                    content,
                    mode,
                    create_dirs: a.create_dirs.unwrap_or(false),
                    overwrite: a.overwrite.unwrap_or(false),
                    expected_sha256: a.expected_sha256,
                };
                let ctx = context_with_timeout(DEADLINE);
                self.daemon.run::<tools::WriteFile>(ctx, req).await
            }
            .await,
        )
    }

    /// Replace exact text in a remote text file, atomically: `old_text` must occur once unless
    /// `replace_all`. Answer: `replacements`, `sha256`. Keeps mode and owner. Whole or new file:
    /// write_file. Errors: `edit_no_match` (read the file, copy exactly), `edit_ambiguous_match`
    /// (`error.count` hits: add context or `replace_all`), `file_changed` (read again, redo),
    /// `invalid_remote_type` (a symlink: edit its `link_target`; not text: write_file it whole),
    /// `remote_permission_denied` (sudo_exec), `file_too_large` (over 64 MiB: download_start, edit,
    /// upload_start), `invalid_arguments` (empty `old_text`, or over its limit: split the edit).
    #[tool(
        input_schema = schema_for_input::<EditArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<FileEdited>>(),
        annotations(title = "Edit a remote file", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn edit_file(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: EditArgs = args::decode(raw)?;
                let req = EditFileRequest {
                    auth: SessionAuth {
                        session_id: a.session_id,
                        session_key: a.session_key,
                    },
                    path: remote_path(a.path, a.path_encoding),
                    old_text: a.old_text,
                    new_text: a.new_text,
                    replace_all: a.replace_all.unwrap_or(false),
                    expected_sha256: a.expected_sha256,
                };
                // The host may take two minutes on a 64 MiB file.
                let ctx = context_with_timeout(Duration::from_secs(130));
                self.daemon.run::<tools::EditFile>(ctx, req).await
            }
            .await,
        )
    }
}
