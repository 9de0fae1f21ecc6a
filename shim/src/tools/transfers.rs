//! The transfer tools: start a download or an upload as a job, follow it, cancel it, list
//! them. File bytes never travel in MCP messages.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use sshmcp_proto::exec::Encoding;
use sshmcp_proto::inspect::RemotePath;
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::session::SessionAuth;
use sshmcp_proto::transfer::{
    TransferError, TransferList, TransferReport, TransferRequest, TransferStartRequest,
    TransferStatusRequest,
};
use tokio_util::sync::CancellationToken;

use super::exec::unless_cancelled;
use super::inspect::remote_path;
use crate::answer::{self, Answer};
use crate::args;
use crate::server::Shim;

/// The start checks the source on the host (30 s at most there); the other calls are local.
const DEADLINE: Duration = Duration::from_secs(45);

/// The answer schema of a tool that reports one transfer: its `error` also says why a copy
/// failed, which the shared field's description does not.
fn report_schema() -> Arc<JsonObject> {
    answer::schema_describing(
        schema_for_output::<Answer<TransferReport, TransferError>>(),
        &[(
            "error",
            "With `ok: false`: why the call did not happen. With `ok: true` and `state` \
             `failed`: why the copy failed. Act on its `code`.",
        )],
    )
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DownloadArgs {
    /// The session (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// The remote file: absolute, or relative to the login directory (`~` is not expanded);
    /// any bytes but NUL. A symlink to a file is followed.
    pub remote_path: String,
    /// `utf-8` (default), or `base64` when `remote_path` is the base64 of the path's bytes.
    pub remote_path_encoding: Option<Encoding>,
    /// The file to write, relative to the local root (missing directories are made), e.g.
    /// `logs/syslog`: a file path, not a directory. An absolute path must lie inside the root.
    /// `..`, symlinks and the private `.sshmcp` directory are refused.
    pub local_path: String,
    /// Replace an existing local file; default false.
    pub overwrite: Option<bool>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadArgs {
    /// The session (from connect).
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// The local file to send, relative to the local root (an absolute path must lie inside
    /// it): a regular file. `..`, symlinks and the private `.sshmcp` directory are refused.
    pub local_path: String,
    /// The file to write on the host, e.g. `/srv/app/app.tar.gz`: a file path, not a
    /// directory. Absolute, or relative to the login
    /// directory (`~` is not expanded); any bytes but NUL.
    pub remote_path: String,
    /// `utf-8` (default), or `base64` when `remote_path` is the base64 of the path's bytes.
    pub remote_path_encoding: Option<Encoding>,
    /// Replace an existing remote file; default false.
    pub overwrite: Option<bool>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferArgs {
    /// The session that started the transfer.
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// From download_start or upload_start.
    pub operation_id: String,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferStatusArgs {
    /// The session that started the transfer.
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
    /// From download_start or upload_start.
    pub operation_id: String,
    /// Seconds to wait for the transfer to end before answering (0..300; stay below your
    /// client's call limit, e.g. 30); default 0 (answer at once). The answer comes as soon as
    /// it ends.
    #[schemars(range(min = 0.0, max = 300.0))]
    pub wait_seconds: Option<f64>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferListArgs {
    /// The session whose transfers to list.
    pub session_id: String,
    /// Its key, from connect.
    pub session_key: String,
}

fn transfer_request(a: TransferArgs) -> TransferRequest {
    TransferRequest {
        auth: SessionAuth {
            session_id: a.session_id,
            session_key: a.session_key,
        },
        operation_id: a.operation_id,
    }
}

impl Shim {
    fn start_request(
        &self,
        (session_id, session_key): (String, String),
        remote_path: RemotePath,
        local_path: String,
        overwrite: Option<bool>,
    ) -> TransferStartRequest {
        TransferStartRequest {
            auth: SessionAuth {
                session_id,
                session_key,
            },
            remote_path,
            local_path,
            overwrite: overwrite.unwrap_or(false),
            local_root: self.local_root_arg(),
        }
    }
}

#[tool_router(router = transfers_router, vis = "pub(crate)")]
impl Shim {
    /// Download one remote regular file into the local root as a background job: it answers at once
    /// with an `operation_id`; follow it with transfer_status and `wait_seconds` (e.g. 30) until
    /// `completed`, `failed` or `cancelled`. rsync copies over the session's own SSH connection
    /// (never a new login) into a private partial file; the file appears at `local_path` whole, and
    /// only once both ends' SHA-256 agree. Calling it again with the same `remote_path` and
    /// `local_path` resumes a failed or cancelled copy (one that failed `verification_failed`
    /// starts afresh). Use it for files of any size instead of printing them with `exec` or paging
    /// them with read_file_range. Never uses sudo. A file that changes during the copy (a live log)
    /// ends `verification_failed`: copy a snapshot (`cp`) first. Errors: `invalid_local_path`
    /// (outside the local root, through `..` or a symlink, or in `.sshmcp`), `local_path_exists`
    /// (pass `overwrite: true`), `invalid_remote_type` (not a regular file),
    /// `remote_path_not_found` (check the path with stat), `remote_permission_denied` (make a copy
    /// your user owns with sudo_exec, e.g. `install -m 600 -o USER SRC DIR/` into a directory only
    /// your user can read, not /tmp, download that and remove it after), `transfer_conflict`
    /// (another transfer writes that destination: wait for it, or pick another),
    /// `transfer_limit_reached` (the daemon's max-transfers, 4 by default, run on this session:
    /// wait for one to end).
    #[tool(
        input_schema = schema_for_input::<DownloadArgs>().expect("object schema"),
        output_schema = report_schema(),
        annotations(title = "Download a file", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn download_start(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: DownloadArgs = args::decode(raw)?;
                let req = self.start_request(
                    (a.session_id, a.session_key),
                    remote_path(a.remote_path, a.remote_path_encoding),
                    a.local_path,
                    a.overwrite,
                );
                let ctx = context_with_timeout(DEADLINE);
                self.daemon
                    .call("download_start", |c| async move {
                        c.download_start(ctx, req).await
                    })
                    .await
            }
            .await,
        )
    }

    /// Upload one regular file from the local root to the host as a background job: it answers at
    /// once with an `operation_id`; follow it with transfer_status and `wait_seconds` (e.g. 30)
    /// until `completed`, `failed` or `cancelled`. rsync copies over the session's own SSH
    /// connection (never a new login) into a hidden partial file beside the destination; the file
    /// appears at `remote_path` whole, only once both ends' SHA-256 agree, and never replaces a
    /// file created there meanwhile. Calling it again with the same `local_path` and `remote_path`
    /// resumes a failed or cancelled copy (one that failed `verification_failed` or
    /// `remote_path_exists` starts afresh). Use it for files of any size instead of pasting
    /// contents into `exec`; a small text file is simpler with write_file. Never uses sudo. Errors:
    /// `invalid_local_path` (missing, not a regular file, or outside the local root: put the file
    /// under the local root and pass its path relative to it), `invalid_arguments` (`remote_path`
    /// ends in `/`: name the file), `remote_path_exists` (pass `overwrite: true`),
    /// `invalid_remote_type` (the destination is no regular file, or its parent no directory),
    /// `remote_path_not_found` (its directory is missing: make it with make_directory),
    /// `remote_permission_denied` (upload somewhere writable, then move it with sudo_exec),
    /// `transfer_conflict` (another transfer writes there: wait for it, or pick another),
    /// `transfer_limit_reached` (the daemon's max-transfers, 4 by default, run on this session:
    /// wait for one to end).
    #[tool(
        input_schema = schema_for_input::<UploadArgs>().expect("object schema"),
        output_schema = report_schema(),
        annotations(title = "Upload a file", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn upload_start(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: UploadArgs = args::decode(raw)?;
                let req = self.start_request(
                    (a.session_id, a.session_key),
                    remote_path(a.remote_path, a.remote_path_encoding),
                    a.local_path,
                    a.overwrite,
                );
                let ctx = context_with_timeout(DEADLINE);
                self.daemon
                    .call(
                        "upload_start",
                        |c| async move { c.upload_start(ctx, req).await },
                    )
                    .await
            }
            .await,
        )
    }

    /// Where a transfer of this session stands, from its `operation_id`: its `state`
    /// (`queued`, `running`, `verifying`, then `completed`, `failed` or `cancelled`),
    /// `bytes_transferred` of `total_bytes`, `eta`, and once completed the verified `sha256`
    /// and the `final_path`. Long-poll with `wait_seconds` (the answer comes when it ends)
    /// rather than calling in a tight loop. A `failed` report's `error.code`:
    /// `transfer_failed` (start the same transfer again: it resumes), `verification_failed`
    /// (the source changed: copy a snapshot), `channels_busy` (no channel came free: retry
    /// once commands end), `connection_lost` (reconnect, start again), `local_path_exists` or
    /// `remote_path_exists` (pass `overwrite` if it may go). Errors: `transfer_not_found` (not
    /// an operation of this session: transfer_list shows them), `invalid_arguments`
    /// (`wait_seconds` out of range).
    #[tool(
        input_schema = schema_for_input::<TransferStatusArgs>().expect("object schema"),
        output_schema = report_schema(),
        annotations(title = "Check a transfer", read_only_hint = true,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn transfer_status(
        &self,
        raw: JsonObject,
        cancel: CancellationToken,
    ) -> CallToolResult {
        answer::respond(
            async {
                let a: TransferStatusArgs = args::decode(raw)?;
                let ctx = super::waiting(a.wait_seconds, DEADLINE);
                let req = TransferStatusRequest {
                    auth: SessionAuth {
                        session_id: a.session_id,
                        session_key: a.session_key,
                    },
                    operation_id: a.operation_id,
                    wait_seconds: a.wait_seconds,
                };
                // A client that gives up on a wait stops it: the daemon's call goes with it.
                let call = self.daemon.call("transfer_status", |c| async move {
                    c.transfer_status(ctx, req).await
                });
                unless_cancelled(call, cancel).await
            }
            .await,
        )
    }

    /// Stop a transfer of this session; only when the copy must not go on. Its partial file
    /// stays (a download's in the local root's private `.sshmcp` directory, an upload's hidden
    /// beside the destination). Answers the transfer's state (it becomes `cancelled` a moment
    /// later: confirm with transfer_status; a transfer that already ended stays as it was).
    /// Errors: `transfer_not_found` (not this session's: transfer_list shows them).
    #[tool(
        input_schema = schema_for_input::<TransferArgs>().expect("object schema"),
        output_schema = report_schema(),
        annotations(title = "Cancel a transfer", read_only_hint = false,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn transfer_cancel(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let req = transfer_request(args::decode(raw)?);
                let ctx = context_with_timeout(DEADLINE);
                self.daemon
                    .call("transfer_cancel", |c| async move {
                        c.transfer_cancel(ctx, req).await
                    })
                    .await
            }
            .await,
        )
    }

    /// List this session's transfers (every running one and the last 100 ended), each as
    /// transfer_status reports it: recover a lost `operation_id` here.
    #[tool(
        input_schema = schema_for_input::<TransferListArgs>().expect("object schema"),
        output_schema = schema_for_output::<Answer<TransferList>>(),
        annotations(title = "List transfers", read_only_hint = true,
                    destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    pub async fn transfer_list(&self, raw: JsonObject) -> CallToolResult {
        answer::respond(
            async {
                let a: TransferListArgs = args::decode(raw)?;
                let auth = SessionAuth {
                    session_id: a.session_id,
                    session_key: a.session_key,
                };
                let ctx = context_with_timeout(DEADLINE);
                self.daemon
                    .call("transfer_list", |c| async move {
                        c.transfer_list(ctx, auth).await
                    })
                    .await
            }
            .await,
        )
    }
}
