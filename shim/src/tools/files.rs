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
use sshmcp_proto::exec::Encoding;
use sshmcp_proto::files::{
    EditFileRequest, FileEdited, FileWritten, MAX_WRITE_BYTES, WriteFileRequest,
};
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::session::SessionAuth;

use super::inspect::remote_path;
use crate::answer::{self, Answer};
use crate::args;
use crate::server::Shim;

/// The daemon gives the host 60 s; this leaves room for the call itself.
const DEADLINE: Duration = Duration::from_secs(70);

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The session (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// The remote file to write: absolute, or relative to the login directory (`~` is not
    /// expanded); any bytes but NUL.
    pub path: String,
    /// `utf-8` (default), or `base64` when `path` is the base64 of the path's bytes.
    pub path_encoding: Option<Encoding>,
    /// The whole new content, at most 1 MiB (1,048,576 bytes after decoding).
    pub content: String,
    /// `utf-8` (default), or `base64` when `content` is the base64 of the bytes (binary).
    pub encoding: Option<Encoding>,
    /// Permission bits as octal digits, e.g. `0644` or `755`: for a new file (default: 0666
    /// less the umask), or to change an existing one's (default: kept).
    #[schemars(regex(pattern = r"^[0-7]{3,4}$"))]
    pub mode: Option<String>,
    /// Make missing parent directories; default false.
    pub create_dirs: Option<bool>,
    /// Replace an existing file; default false (`remote_path_exists`).
    pub overwrite: Option<bool>,
    /// Write only if the file's SHA-256 (64 lowercase hex digits) is still this (from an
    /// earlier write_file or edit_file, or `sha256sum` through exec): else `file_changed` and
    /// nothing is written. Implies replacing it.
    pub expected_sha256: Option<String>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// The session (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// The remote text file to change (at most 64 MiB): absolute, or relative to the login
    /// directory (`~` is not expanded); any bytes but NUL.
    pub path: String,
    /// `utf-8` (default), or `base64` when `path` is the base64 of the path's bytes.
    pub path_encoding: Option<Encoding>,
    /// The exact text to find (not a pattern), whitespace and line ends included; at most
    /// 4 KiB. Include enough surrounding lines that it occurs once.
    pub old_text: String,
    /// What replaces it (may be empty: the text is deleted); at most 64 KiB.
    pub new_text: String,
    /// Replace every occurrence; default false (then `old_text` must occur exactly once).
    pub replace_all: Option<bool>,
    /// Edit only if the file's SHA-256 (64 lowercase hex digits) is still this (from an
    /// earlier write_file or edit_file, or `sha256sum` through exec): else `file_changed` and
    /// nothing is changed.
    pub expected_sha256: Option<String>,
}

#[tool_router(router = files_router, vis = "pub(crate)")]
impl Shim {
    /// Write a whole file on the remote host, atomically: the content travels as data (no
    /// shell, no quoting) into a temporary file renamed over the target, so a reader sees the
    /// old file or the new one, never half. The answer: `path`, `bytes_written`, the new
    /// content's `sha256` (pass it as `expected_sha256` next time) and `created` when no file
    /// was there. An existing file keeps its mode and owner (not its ACLs or extended
    /// attributes). Use it instead of `exec` with `echo`/heredocs; to change
    /// part of a file use edit_file. Acts as the session's user, never sudo (root's files need
    /// `sudo_exec`). Errors: `remote_path_exists` (pass `overwrite: true`, or `expected_sha256`
    /// to replace only what you saw), `file_changed` (`error.sha256` is the current hash: read
    /// the file again, redo the change, retry with that hash; also when the file is gone),
    /// `remote_path_not_found` (the directory is missing: pass `create_dirs: true`),
    /// `invalid_remote_type` (the path is a symlink, whose target you can write instead: `stat`
    /// gives `link_target`; or a directory or device: pick another path),
    /// `remote_permission_denied` (no write access to the directory, or another user's file,
    /// whose owner would change: use sudo_exec, or ask the user), `invalid_arguments`
    /// (`content` too large: nothing is written; use upload_start).
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
                self.daemon
                    .call(
                        "write_file",
                        |c| async move { c.write_file(ctx, req).await },
                    )
                    .await
            }
            .await,
        )
    }

    /// Replace an exact piece of text in a remote text file, atomically: `old_text` must occur
    /// exactly once unless `replace_all: true`. The answer: `path`, `replacements` and the
    /// new content's `sha256`. The edit happens on the host in one step; the
    /// result is renamed over the file, keeping its mode and owner (not its ACLs or extended
    /// attributes), so a reader never sees half of it, and a file changed by someone else during
    /// the edit is never overwritten. Use it instead of `sed -i` through `exec`; to replace a whole
    /// file or make a new one, use write_file. Acts as the session's user, never sudo: a root-owned
    /// file needs `sudo_exec`. Errors: `edit_no_match` (read the file again and copy the text
    /// exactly), `edit_ambiguous_match` (`error.count` occurrences: add surrounding lines, or
    /// `replace_all`), `file_changed` (someone changed the file since your hash, `error.sha256`
    /// now: read it again and redo the edit), `remote_path_not_found` (check the path with stat),
    /// `invalid_remote_type` (the path is a symlink, whose target you can edit instead: `stat`
    /// gives `link_target`; no regular file; or NUL bytes in it), `remote_permission_denied` (no
    /// write access to the directory, or another user's file: use sudo_exec, or ask the user),
    /// `invalid_arguments` (a text or the file over its limit, nothing changed: split the edit; a
    /// file over 64 MiB: download_start, edit here, upload_start).
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
                self.daemon
                    .call("edit_file", |c| async move { c.edit_file(ctx, req).await })
                    .await
            }
            .await,
        )
    }
}
