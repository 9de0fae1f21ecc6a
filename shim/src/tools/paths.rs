//! The housekeeping tools: `make_directory`, `remove_path`, `copy_path`, `move_path` on the
//! remote host, with paths as data (any bytes, never a shell word).

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use sshmcp_proto::DaemonError;
use sshmcp_proto::exec::Encoding;
use sshmcp_proto::files::{CopyMoveRequest, MakeDirectoryRequest, PathChanged, RemovePathRequest};
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::service::{ToolMethod, tools};
use sshmcp_proto::session::SessionAuth;
use tokio_util::sync::CancellationToken;

use crate::answer::{self, Answer};
use crate::args;
use crate::server::Shim;
use crate::tools::exec::unless_cancelled;
use sshmcp_proto::described::remote_path;

/// The daemon gives the host 300 s (a recursive copy); this leaves room for the call itself.
const DEADLINE: Duration = Duration::from_secs(310);

// No Debug: they hold the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MakeDirectoryArgs {
    pub session_id: String,
    pub session_key: String,
    /// Remote path.
    pub path: String,
    /// `path`'s encoding.
    pub path_encoding: Option<Encoding>,
    /// Also make missing parents; default true.
    pub parents: Option<bool>,
    /// Octal, e.g. `0755`, for the last directory made; default: 0777 less umask.
    #[schemars(regex(pattern = r"^[0-7]{3,4}$"))]
    pub mode: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemovePathArgs {
    pub session_id: String,
    pub session_key: String,
    /// Remote path; not `/`, `.` or `..`.
    pub path: String,
    /// `path`'s encoding.
    pub path_encoding: Option<Encoding>,
    /// Remove a directory with its contents.
    pub recursive: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CopyMoveArgs {
    pub session_id: String,
    pub session_key: String,
    /// File, symlink (as the link) or directory.
    pub source: String,
    /// `source`'s encoding.
    pub source_encoding: Option<Encoding>,
    /// The new path itself, not a directory to put it in.
    pub destination: String,
    /// `destination`'s encoding.
    pub destination_encoding: Option<Encoding>,
    /// Replace an existing file there (never a directory).
    pub overwrite: Option<bool>,
}

fn auth(session_id: String, session_key: String) -> SessionAuth {
    SessionAuth {
        session_id,
        session_key,
    }
}

fn copy_move_request(a: CopyMoveArgs) -> CopyMoveRequest {
    CopyMoveRequest {
        auth: auth(a.session_id, a.session_key),
        source: remote_path(a.source, a.source_encoding),
        destination: remote_path(a.destination, a.destination_encoding),
        overwrite: a.overwrite.unwrap_or(false),
    }
}

/// `changed` is always true for a removal, a copy or a move (each either happens or fails):
/// only make_directory's answer carries it.
const NOT_FOR_CHANGES: &[&str] = &["changed"];

/// A path tool's answer schema: the shared answer's `path` and `type` described as this
/// tool fills them, and `changed` only where it can be false (make_directory).
fn path_schema(path: &str, kind: &str, changed: bool) -> Arc<JsonObject> {
    let schema = answer::schema_describing(
        schema_for_output::<Answer<PathChanged>>(),
        &[("path", path), ("type", kind)],
    );
    match changed {
        true => schema,
        false => answer::schema_without(schema, None, NOT_FOR_CHANGES),
    }
}

impl Shim {
    /// copy_path's and move_path's call, `M` the one of them: the same arguments and answer.
    async fn copy_or_move<M>(&self, raw: JsonObject, cancel: CancellationToken) -> CallToolResult
    where
        M: ToolMethod<Request = CopyMoveRequest, Answer = PathChanged>,
    {
        answer::respond_without(
            async {
                let req = copy_move_request(args::decode(raw)?);
                let call = self.daemon.run::<M>(context_with_timeout(DEADLINE), req);
                unless_cancelled(call, cancel).await
            }
            .await,
            NOT_FOR_CHANGES,
        )
    }
}

#[tool_router(router = paths_router, vis = "pub(crate)")]
impl Shim {
    /// Make a remote directory; one already there is no error (`changed` is true only if made).
    /// Errors: `remote_path_exists` (not a directory), `remote_path_not_found` (a parent is
    /// missing), `remote_permission_denied` (sudo_exec).
    #[tool(
        input_schema = schema_for_input::<MakeDirectoryArgs>().expect("object schema"),
        output_schema = path_schema("The directory as given.", "What is there: `directory`.", true),
        annotations(title = "Make a remote directory", read_only_hint = false,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = true)
    )]
    pub async fn make_directory(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: MakeDirectoryArgs = args::decode(raw)?;
                let mode = match a.mode {
                    Some(m) => Some(u32::from_str_radix(&m, 8).map_err(|_| {
                        DaemonError::invalid_arguments("`mode` must be octal digits, e.g. 0755")
                    })?),
                    None => None,
                };
                let req = MakeDirectoryRequest {
                    auth: auth(a.session_id, a.session_key),
                    path: remote_path(a.path, a.path_encoding),
                    parents: a.parents.unwrap_or(true),
                    mode,
                };
                let ctx = context_with_timeout(DEADLINE);
                self.daemon.run::<tools::MakeDirectory>(ctx, req).await
            }
            .await,
        )
    }

    /// Remove a remote file, symlink (itself) or directory; no wildcards (exec `rm`). Answer:
    /// `type` removed. Errors: `remote_path_not_found` (already gone), `directory_not_empty`
    /// (`recursive: true` if its contents may go), `remote_permission_denied` (sudo_exec);
    /// `internal_error` after 300 s (part may be gone; finish with `rm -rf` via command_start).
    #[tool(
        input_schema = schema_for_input::<RemovePathArgs>().expect("object schema"),
        output_schema = path_schema("The removed path as given.", "What was removed.", false),
        annotations(title = "Remove a remote path", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn remove_path(&self, raw: JsonObject, cancel: CancellationToken) -> CallToolResult {
        answer::respond_without(
            async {
                let a: RemovePathArgs = args::decode(raw)?;
                let req = RemovePathRequest {
                    auth: auth(a.session_id, a.session_key),
                    path: remote_path(a.path, a.path_encoding),
                    recursive: a.recursive.unwrap_or(false),
                };
                let ctx = context_with_timeout(DEADLINE);
                let call = self.daemon.run::<tools::RemovePath>(ctx, req);
                unless_cancelled(call, cancel).await
            }
            .await,
            NOT_FOR_CHANGES,
        )
    }

    /// Copy a remote file, symlink or directory tree on the same host, atomically (as `cp -a`).
    /// Answer: `type` copied. Errors: `remote_path_not_found` (source, or destination's directory),
    /// `remote_path_exists` (see `overwrite`; a directory there: pick a new name),
    /// `remote_permission_denied` (sudo_exec); `internal_error` after 300 s (may leave
    /// `.sshmcp-copy.*` beside the destination: remove_path it; big trees: command_start).
    #[tool(
        input_schema = schema_for_input::<CopyMoveArgs>().expect("object schema"),
        output_schema = path_schema(
            "The copy's path (`destination`) as given.",
            "What was copied.",
            false,
        ),
        annotations(title = "Copy a remote path", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn copy_path(&self, raw: JsonObject, cancel: CancellationToken) -> CallToolResult {
        self.copy_or_move::<tools::CopyPath>(raw, cancel).await
    }

    /// Move or rename a remote file, symlink or directory on the host: one atomic rename on a file
    /// system; across file systems `mv` copies, then removes the source (not atomic). Answer:
    /// `type` moved. Errors: `remote_path_not_found` (source, or destination's directory),
    /// `remote_path_exists` (see `overwrite`; a directory there: pick a new name),
    /// `remote_permission_denied` (sudo_exec); `internal_error` after 300 s (across file systems
    /// the destination may be partial or the source partly removed: stat both before removing
    /// either; big trees: `mv` via command_start).
    #[tool(
        input_schema = schema_for_input::<CopyMoveArgs>().expect("object schema"),
        output_schema = path_schema(
            "The new path (`destination`) as given.",
            "What was moved.",
            false,
        ),
        annotations(title = "Move a remote path", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn move_path(&self, raw: JsonObject, cancel: CancellationToken) -> CallToolResult {
        self.copy_or_move::<tools::MovePath>(raw, cancel).await
    }
}
