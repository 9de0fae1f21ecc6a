//! The transfer starts, `download_start` and `upload_start`: a copy as a job, its local end
//! under this shim's local root (following, cancelling and listing them are derived). File
//! bytes never travel in MCP messages.

use std::sync::Arc;

use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use sshmcp_proto::described::remote_path;
use sshmcp_proto::exec::Encoding;
use sshmcp_proto::service::context_with_timeout;
use sshmcp_proto::service::{ToolMethod, tools};
use sshmcp_proto::session::SessionAuth;
use sshmcp_proto::transfer::{
    REPORT_FIELDS, TRANSFER_DEADLINE, TransferError, TransferReport, TransferStartRequest,
};

use crate::answer::{self, Answer};
use crate::args;
use crate::server::Shim;

/// The answer schema of a tool that reports one transfer: its `error` also says why a copy
/// failed, which the shared field's description does not.
fn report_schema() -> Arc<JsonObject> {
    answer::schema_describing(
        schema_for_output::<Answer<TransferReport, TransferError>>(),
        REPORT_FIELDS,
    )
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DownloadArgs {
    pub session_id: String,
    pub session_key: String,
    /// Remote path.
    pub remote_path: String,
    /// `remote_path`'s encoding.
    pub remote_path_encoding: Option<Encoding>,
    /// A file, not a directory; missing directories are made. No `..`, symlinks, `.sshmcp`.
    pub local_path: String,
    /// Replace an existing file.
    pub overwrite: Option<bool>,
}

// No Debug: it holds the session key.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadArgs {
    pub session_id: String,
    pub session_key: String,
    /// A regular file; no `..`, symlinks, `.sshmcp`.
    pub local_path: String,
    /// Remote file path, not a directory.
    pub remote_path: String,
    /// `remote_path`'s encoding.
    pub remote_path_encoding: Option<Encoding>,
    /// Replace an existing file.
    pub overwrite: Option<bool>,
}

/// download_start's and upload_start's arguments: the same fields, described for each tool.
trait StartArgs: serde::de::DeserializeOwned + JsonSchema + 'static {
    fn request(self, local_root: Option<String>) -> TransferStartRequest;
}

macro_rules! start_args {
    ($($args:ty),*) => {$(
        impl StartArgs for $args {
            fn request(self, local_root: Option<String>) -> TransferStartRequest {
                TransferStartRequest {
                    auth: SessionAuth {
                        session_id: self.session_id,
                        session_key: self.session_key,
                    },
                    remote_path: remote_path(self.remote_path, self.remote_path_encoding),
                    local_path: self.local_path,
                    overwrite: self.overwrite.unwrap_or(false),
                    local_root,
                }
            }
        }
    )*};
}

start_args!(DownloadArgs, UploadArgs);

impl Shim {
    /// download_start's and upload_start's call, `M` the one of them and `A` its arguments.
    async fn start<M, A>(&self, raw: JsonObject) -> CallToolResult
    where
        M: ToolMethod<Request = TransferStartRequest, Answer = TransferReport>,
        A: StartArgs,
    {
        answer::respond(
            async {
                let req = args::decode::<A>(raw)?.request(self.local_root_arg());
                self.daemon
                    .run::<M>(context_with_timeout(TRANSFER_DEADLINE), req)
                    .await
            }
            .await,
        )
    }
}

#[tool_router(router = transfers_router, vis = "pub(crate)")]
impl Shim {
    /// Download one remote regular file (symlinks followed) into the local root as a job: answers
    /// `operation_id` for transfer_status. The file appears whole at `local_path` once verified;
    /// starting it again resumes a failed or cancelled copy. Errors: `local_path_exists` (pass
    /// `overwrite`), `invalid_local_path` (fix `local_path`), `invalid_remote_type` (not a regular
    /// file: tar it via exec), `remote_permission_denied` (sudo_exec a copy you own into a private
    /// directory), `transfer_conflict` (another one writes there: wait or cancel it),
    /// `transfer_limit_reached` (wait for one to end).
    #[tool(
        input_schema = schema_for_input::<DownloadArgs>().expect("object schema"),
        output_schema = report_schema(),
        annotations(title = "Download a file", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn download_start(&self, raw: JsonObject) -> CallToolResult {
        self.start::<tools::DownloadStart, DownloadArgs>(raw).await
    }

    /// Upload one regular file from the local root (put it there first; content you hold under 1
    /// MiB: write_file) to the host as a job: answers `operation_id` for transfer_status. The file
    /// appears whole at `remote_path` once verified, with the local file's mode less umask;
    /// starting it again resumes a failed or cancelled copy. Errors: `remote_path_exists` (pass
    /// `overwrite`), `remote_path_not_found` (make_directory first), `invalid_local_path` (fix
    /// `local_path`), `invalid_remote_type` (a directory there), `invalid_arguments` (fix
    /// `remote_path`), `remote_permission_denied` (upload somewhere writable, move it with
    /// sudo_exec), `transfer_conflict` (another one writes there: wait or cancel it),
    /// `transfer_limit_reached` (wait for one to end).
    #[tool(
        input_schema = schema_for_input::<UploadArgs>().expect("object schema"),
        output_schema = report_schema(),
        annotations(title = "Upload a file", read_only_hint = false,
                    destructive_hint = true, idempotent_hint = false, open_world_hint = true)
    )]
    pub async fn upload_start(&self, raw: JsonObject) -> CallToolResult {
        self.start::<tools::UploadStart, UploadArgs>(raw).await
    }
}
