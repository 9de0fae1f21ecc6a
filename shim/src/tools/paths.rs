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
use sshmcp_proto::session::SessionAuth;
use tokio_util::sync::CancellationToken;

use super::inspect::remote_path;
use crate::answer::{self, Answer};
use crate::args;
use crate::server::Shim;
use crate::tools::exec::unless_cancelled;

/// The daemon gives the host 300 s (a recursive copy); this leaves room for the call itself.
const DEADLINE: Duration = Duration::from_secs(310);

// No Debug: they hold the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MakeDirectoryArgs {
    /// The session (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// The directory to make: absolute, or relative to the login directory (`~` is not
    /// expanded); any bytes but NUL.
    pub path: String,
    /// `utf-8` (default), or `base64` when `path` is the base64 of the path's bytes.
    pub path_encoding: Option<Encoding>,
    /// Make missing parent directories too; default true.
    pub parents: Option<bool>,
    /// Permission bits as octal digits, e.g. `0755` (default: 0777 less the umask): only for
    /// the last directory made, and an existing directory keeps its own.
    #[schemars(regex(pattern = r"^[0-7]{3,4}$"))]
    pub mode: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemovePathArgs {
    /// The session (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// What to remove: a file, a symlink (never what it points to) or a directory; absolute,
    /// or relative to the login directory (`~` is not expanded). It must end with a name: `/`,
    /// `.`, `..` and a trailing `/` are refused (`invalid_arguments`).
    pub path: String,
    /// `utf-8` (default), or `base64` when `path` is the base64 of the path's bytes.
    pub path_encoding: Option<Encoding>,
    /// Remove a directory with everything in it; default false (only an empty one).
    pub recursive: Option<bool>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CopyMoveArgs {
    /// The session (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// The path to take: a file, a symlink (as the link) or a whole directory;
    /// absolute, or relative to the login directory (`~` is not expanded); any bytes but NUL.
    pub source: String,
    /// `utf-8` (default), or `base64` when `source` is the base64 of the path's bytes.
    pub source_encoding: Option<Encoding>,
    /// The new path itself, not a directory to put it in (`/srv/app/new.conf`): absolute, or
    /// relative to the login directory (`~` is not expanded); any bytes but NUL.
    pub destination: String,
    /// `utf-8` (default), or `base64` when `destination` is the base64 of the path's bytes.
    pub destination_encoding: Option<Encoding>,
    /// Replace an existing destination file; default false.
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

#[tool_router(router = paths_router, vis = "pub(crate)")]
impl Shim {
    /// Make a directory on the remote host (and its missing parents: see `parents`). A
    /// directory already there is no error: the answer's `changed` is then left out (false);
    /// it is true when the directory was made. Before a write, write_file's `create_dirs` does
    /// this itself. Acts as the session's user, never sudo (root's paths need `sudo_exec`).
    /// Errors: `remote_path_exists` (something that is no directory is there: stat it, then
    /// remove it or pick another path), `remote_path_not_found` (a parent is missing and
    /// `parents` is false), `remote_permission_denied` (use sudo_exec, or ask the user).
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
                self.daemon
                    .call("make_directory", |c| async move {
                        c.make_directory(ctx, req).await
                    })
                    .await
            }
            .await,
        )
    }

    /// Remove a remote file, symlink or directory (see `path` and `recursive`), for good. The
    /// path is taken literally: no wildcards (to remove by pattern, list the directory first,
    /// or use `rm` through exec). The host gets 300 s: a tree that takes longer is stopped
    /// part-way (`internal_error`; remove it with command_start and `rm -rf`). Acts as the
    /// session's user, never sudo (root's paths need `sudo_exec`). Errors:
    /// `remote_path_not_found` (already gone: nothing to do), `directory_not_empty` (pass
    /// `recursive: true` if its contents may go), `remote_permission_denied` (use sudo_exec,
    /// or ask the user). The answer: the removed `path` and the `type` it had.
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
                let call =
                    self.daemon.call(
                        "remove_path",
                        |c| async move { c.remove_path(ctx, req).await },
                    );
                unless_cancelled(call, cancel).await
            }
            .await,
            NOT_FOR_CHANGES,
        )
    }

    /// Copy a remote file, symlink or whole directory to a new path on the same host (`cp -a`:
    /// modes, times and links kept). The copy is made under a temporary name beside the
    /// destination, then moved into place, so the destination never holds half a copy and a
    /// copy that fails removes its own. The host gets 300 s: a copy that takes longer is
    /// stopped (`internal_error`), which may leave a `.sshmcp-copy.*` directory beside the
    /// destination (remove it with remove_path; copy a tree that large with command_start and
    /// `cp -a`). Acts as the session's user, never sudo
    /// (root's paths need `sudo_exec`). Between the host and this machine use download_start /
    /// upload_start. Errors: `remote_path_not_found` (the source, or the destination's
    /// directory: stat the source; if it exists, make_directory the destination's directory),
    /// `remote_path_exists` (pass `overwrite: true` for a
    /// file; a directory there: remove it or pick another destination),
    /// `remote_permission_denied` (use sudo_exec, or ask the user).
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
        answer::respond_without(
            async {
                let req = copy_move_request(args::decode(raw)?);
                let ctx = context_with_timeout(DEADLINE);
                let call = self
                    .daemon
                    .call("copy_path", |c| async move { c.copy_path(ctx, req).await });
                unless_cancelled(call, cancel).await
            }
            .await,
            NOT_FOR_CHANGES,
        )
    }

    /// Move or rename a remote file, symlink or directory to a new path on the same host: one
    /// atomic rename within a file system (across file systems `mv` copies, then removes the
    /// source: not atomic). The host gets 300 s: a move across file systems that takes longer
    /// is stopped (`internal_error`), which may leave part of the tree at the destination and
    /// the source whole (move a tree that large with command_start and `mv`). Acts as the
    /// session's user, never sudo (root's paths need `sudo_exec`). Between the host and this
    /// machine use download_start / upload_start. Errors: `remote_path_not_found` (the source,
    /// or the destination's directory: stat the source; if it exists, make_directory the
    /// destination's directory), `remote_path_exists` (pass
    /// `overwrite: true` for a file; a directory there: remove it or pick another destination),
    /// `remote_permission_denied` (use sudo_exec, or ask the user).
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
        answer::respond_without(
            async {
                let req = copy_move_request(args::decode(raw)?);
                let ctx = context_with_timeout(DEADLINE);
                let call = self
                    .daemon
                    .call("move_path", |c| async move { c.move_path(ctx, req).await });
                unless_cancelled(call, cancel).await
            }
            .await,
            NOT_FOR_CHANGES,
        )
    }
}
