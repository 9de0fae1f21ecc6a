//! Wire types of file transfers (`download_start`, `upload_start`, `transfer_status`,
//! `transfer_cancel`, `transfer_list`): jobs with ids, copying with rsync over the session's
//! master.

use serde::{Deserialize, Serialize};

use crate::exec::Encoding;
use crate::inspect::RemotePath;
use crate::session::SessionAuth;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferStartRequest {
    pub auth: SessionAuth,
    pub remote_path: RemotePath,
    /// Relative to the local root (an absolute path must lie inside it): the destination of a
    /// download, the source of an upload.
    pub local_path: String,
    pub overwrite: bool,
    /// The caller's local root (absolute), when its person configured one.
    pub local_root: Option<String>,
}
crate::session::authed!(TransferStartRequest);

/// The MCP side of `download_start` or `upload_start`: the same fields (described for each
/// tool), the same request, a copy's report.
#[cfg(feature = "schema")]
macro_rules! start_described {
    ($tool:ident, $args:ident, $title:literal, $description:expr) => {
        impl crate::described::Described for crate::service::tools::$tool {
            type Args = $args;
            const TITLE: &'static str = $title;
            const DESCRIPTION: &'static str = $description;
            const HINTS: crate::described::Hints = crate::described::Hints::MAY_DESTROY;
            const FAILURE: crate::described::Failure = crate::described::Failure::Copy;
            const ANSWER_FIELDS: &'static [(&'static str, &'static str)] = REPORT_FIELDS;
            const DEADLINE: std::time::Duration = TRANSFER_DEADLINE;

            fn request(
                args: $args,
                here: &crate::described::Here,
            ) -> Result<TransferStartRequest, crate::DaemonError> {
                let remote =
                    crate::described::remote_path(args.remote_path, args.remote_path_encoding);
                Ok(TransferStartRequest {
                    auth: crate::described::auth(args.session_id, args.session_key),
                    remote_path: remote,
                    local_path: args.local_path,
                    overwrite: args.overwrite.unwrap_or(false),
                    local_root: here.local_root.clone(),
                })
            }
        }
    };
}

/// `download_start` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DownloadArgs {
    pub session_id: String,
    pub session_key: String,
    // Said once in the instructions ("Remote paths are ...").
    pub remote_path: String,
    pub remote_path_encoding: Option<Encoding>,
    /// A file, not a directory; missing directories are made. No `..`, symlinks, `.sshmcp`.
    pub local_path: String,
    /// Replace an existing file.
    pub overwrite: Option<bool>,
}

#[cfg(feature = "schema")]
start_described!(
    DownloadStart,
    DownloadArgs,
    "Download a file",
    "Download one remote file \
        (symlinks followed) into the local root as a job (to just read a remote file: read_file_range); \
        answers `operation_id` for transfer_status. The file appears whole at `local_path` once verified; starting it \
        again resumes a failed or cancelled copy. Errors: `remote_path_not_found`, \
        `local_path_exists` (pass `overwrite`), `invalid_local_path` (fix `local_path`), \
        `invalid_remote_type` (not a regular file: tar it via exec), \
        `remote_permission_denied` (sudo_exec a copy you own into a private directory), \
        `transfer_conflict` (another one writes there: wait or cancel it), \
        `transfer_limit_reached` (wait for one to end)."
);

/// `upload_start` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadArgs {
    pub session_id: String,
    pub session_key: String,
    /// A regular file; no `..`, symlinks, `.sshmcp`.
    pub local_path: String,
    /// Remote file path, not a directory.
    pub remote_path: String,
    pub remote_path_encoding: Option<Encoding>,
    /// Replace an existing file.
    pub overwrite: Option<bool>,
}

#[cfg(feature = "schema")]
start_described!(
    UploadStart,
    UploadArgs,
    "Upload a file",
    "Upload one regular file from the \
        local root (put it there first; content you hold under 1 MiB: write_file) to the \
        host as a job: answers `operation_id` for transfer_status. The file appears whole at \
        `remote_path` once verified, with the local file's mode less umask (also replacing; owner: you); starting it \
        again resumes a failed or cancelled copy. Errors: `remote_path_exists` (pass \
        `overwrite`), `remote_path_not_found` (make_directory first), `invalid_local_path` \
        (fix `local_path`), `invalid_remote_type` (a directory there), `invalid_arguments` \
        (`remote_path` names no file), `remote_permission_denied` (upload somewhere writable, move it \
        with sudo_exec), `transfer_conflict` (another one writes there: wait or cancel it), \
        `transfer_limit_reached` (wait for one to end)."
);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferRequest {
    pub auth: SessionAuth,
    pub operation_id: String,
}
crate::session::authed!(TransferRequest);

/// `transfer_cancel` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferArgs {
    pub session_id: String,
    pub session_key: String,
    /// From download_start or upload_start.
    pub operation_id: String,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::TransferCancel {
    type Args = TransferArgs;
    const TITLE: &'static str = "Cancel a transfer";
    const DESCRIPTION: &'static str = "Stop a transfer; its partial stays \
        (a download's under the local root's `.sshmcp/partial`, an upload's as \
        `.sshmcp-*.part` beside `remote_path`), so starting it again resumes (not resuming: remove_path an upload's, delete a download's locally). Answers its \
        report (`state` `cancelled`, or how it had ended). `transfer_not_found`: see \
        transfer_list.";
    const HINTS: crate::described::Hints = crate::described::Hints {
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    const FAILURE: crate::described::Failure = crate::described::Failure::Copy;
    const ANSWER_FIELDS: &'static [(&'static str, &'static str)] = REPORT_FIELDS;
    const DEADLINE: std::time::Duration = TRANSFER_DEADLINE;

    fn request(
        args: TransferArgs,
        _: &crate::described::Here,
    ) -> Result<TransferRequest, crate::DaemonError> {
        Ok(TransferRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            operation_id: args.operation_id,
        })
    }
}

/// A transfer report's `error`, as the tools that answer with one describe it.
#[cfg(feature = "schema")]
pub const REPORT_FIELDS: &[(&str, &str)] = &[(
    "error",
    "With `ok: false`: why the call did not happen. With `ok: true` and `state` `failed`: why \
     the copy failed. Act on its `code`.",
)];

/// How long a client waits for a transfer tool: a start checks the source on the host (30 s
/// at most there); the other calls are local.
#[cfg(feature = "schema")]
pub const TRANSFER_DEADLINE: std::time::Duration = std::time::Duration::from_secs(45);

/// `transfer_status`: the transfer, and how long to wait for it to end before answering.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferStatusRequest {
    pub auth: SessionAuth,
    pub operation_id: String,
    /// Seconds (0..=300, as command_status's); none answers at once.
    pub wait_seconds: Option<f64>,
}
crate::session::authed!(TransferStatusRequest);

/// `transfer_status` as an agent calls it.
// No Debug: it holds the session key.
#[cfg(feature = "schema")]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransferStatusArgs {
    pub session_id: String,
    pub session_key: String,
    /// From download_start or upload_start.
    pub operation_id: String,
    /// Seconds to wait for the end (e.g. 30); default 0.
    #[schemars(range(min = 0.0, max = 300.0))]
    pub wait_seconds: Option<f64>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::TransferStatus {
    type Args = TransferStatusArgs;
    const TITLE: &'static str = "Check a transfer";
    const DESCRIPTION: &'static str = "Report a transfer: `state` \
        (`queued`, `running`, `verifying`, `completed`, `failed`, `cancelled`), \
        `bytes_transferred` of `total_bytes`, `eta` (s), then `final_path` (absolute; local \
        for a download). A `failed` one (still `ok: true`) has `error.code`: `transfer_failed` (start it again to \
        resume), `verification_failed` (the source changed: copy a snapshot), \
        `local_path_exists` or `remote_path_exists` (pass `overwrite`); others: start again \
        once fixed. `transfer_not_found`: see transfer_list.";
    const HINTS: crate::described::Hints = crate::described::Hints::READS_DAEMON;
    const FAILURE: crate::described::Failure = crate::described::Failure::Copy;
    const ANSWER_FIELDS: &'static [(&'static str, &'static str)] = REPORT_FIELDS;
    const DEADLINE: std::time::Duration = TRANSFER_DEADLINE;

    fn deadline(args: &TransferStatusArgs) -> std::time::Duration {
        crate::described::waited(args.wait_seconds) + TRANSFER_DEADLINE
    }

    fn request(
        args: TransferStatusArgs,
        _: &crate::described::Here,
    ) -> Result<TransferStatusRequest, crate::DaemonError> {
        Ok(TransferStatusRequest {
            auth: crate::described::auth(args.session_id, args.session_key),
            operation_id: args.operation_id,
            wait_seconds: args.wait_seconds,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
/// Which way the file goes.
pub enum TransferDirection {
    /// Remote host to the local root.
    Download,
    /// Local root to the remote host.
    Upload,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
/// Where a transfer stands.
pub enum TransferState {
    /// Waiting for one of the session's channels (running commands hold them all).
    Queued,
    /// rsync is copying into the partial file.
    Running,
    /// Both ends are being hashed (SHA-256) before publishing.
    Verifying,
    /// Verified and published at `final_path`.
    Completed,
    /// Ended with `error`; the partial file is kept for a retry to resume from (not after
    /// `verification_failed` or `remote_path_exists`: the retry starts afresh).
    Failed,
    /// Stopped by transfer_cancel or disconnect; the partial file is kept.
    Cancelled,
}

impl TransferState {
    /// The state's name, as the wire writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Verifying => "verifying",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// Why the call did not happen (`ok: false`), or, in a report whose `state` is `failed`,
/// why the copy failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TransferError {
    /// A stable identifier to act on. A failed copy's: `transfer_failed` (rsync or a disk
    /// failed, the message says which: start the same transfer again to resume),
    /// `verification_failed` (the source changed during the copy: copy a snapshot, then start
    /// again), `channels_busy` (no channel came free: nothing was copied; start it again once
    /// commands end), `connection_lost` (disconnect, connect, start again), `local_path_exists` or
    /// `remote_path_exists` (a file appeared at the destination and was left alone: pass
    /// `overwrite` if it may go), `invalid_remote_type` or `invalid_local_path` (a path
    /// changed under the copy: check it).
    pub code: String,
    /// A short human explanation.
    pub message: String,
}

/// One transfer of this session, as transfer_status reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TransferReport {
    /// Keep it: pass it to transfer_status and transfer_cancel (this session only).
    pub operation_id: String,
    /// `download` (host to the local root) or `upload` (local root to the host).
    pub direction: TransferDirection,
    /// The local file (absolute): the destination of a download, the source of an upload.
    pub local_path: String,
    /// The remote file: the source of a download as given, the destination of an upload
    /// (absolute, its directory resolved).
    pub remote_path: String,
    /// `utf-8`, or `base64` when `remote_path` is the base64 of a path that is not UTF-8.
    pub remote_path_encoding: Encoding,
    /// Where the transfer stands (see each value).
    pub state: TransferState,
    /// Bytes copied so far (rsync's count; a resumed copy counts what it reused too).
    pub bytes_transferred: u64,
    /// Bytes this copy did not send again because an earlier, stopped copy's partial file
    /// already held them (counted in `bytes_transferred` too); 0 for a fresh copy, null until
    /// the copy ended.
    pub reused_bytes: Option<u64>,
    /// The source file's size.
    pub total_bytes: u64,
    /// Bytes per second over the copy so far.
    pub rate: f64,
    /// Seconds left at the current rate; null when unknown or done.
    pub eta: Option<f64>,
    /// The SHA-256 (hex) both ends agreed on, once verified.
    pub sha256: Option<String>,
    /// The published file's absolute path (local for a download, remote for an upload, in
    /// `remote_path_encoding`), once completed.
    pub final_path: Option<String>,
    /// Null unless `state` is `failed`: why the copy failed.
    pub error: Option<TransferError>,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC; null while it goes on.
    pub ended_at: Option<String>,
    /// `person` when the person cancelled it (`sshmcp kill`); else null.
    #[serde(default)]
    pub stopped_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TransferList {
    /// This session's transfers, newest first.
    pub transfers: Vec<TransferReport>,
}

#[cfg(feature = "schema")]
impl crate::described::Described for crate::service::tools::TransferList {
    type Args = crate::described::SessionArgs;
    const TITLE: &'static str = "List transfers";
    const DESCRIPTION: &'static str = "List this session's transfers, \
        newest first, the last 100, to find a lost `operation_id`: `transfers`, each with \
        `operation_id`, `direction`, `remote_path`, `local_path` and the rest of \
        transfer_status's report.";
    const HINTS: crate::described::Hints = crate::described::Hints::READS_DAEMON;
    const DEADLINE: std::time::Duration = TRANSFER_DEADLINE;

    fn request(
        args: crate::described::SessionArgs,
        _: &crate::described::Here,
    ) -> Result<SessionAuth, crate::DaemonError> {
        Ok(args.into())
    }
}
