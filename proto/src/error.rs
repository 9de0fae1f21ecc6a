//! The single wire error: a stable snake_case code plus a short human message.

use serde::{Deserialize, Serialize};

/// Every error identifier of the contract (TOOLS.md section 7). Automation matches on these,
/// never on message text, so a variant's name is frozen once shipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ErrorCode {
    SessionNotFound,
    InvalidSessionKey,
    SessionNotReady,
    SessionClosing,
    SessionClosed,
    AlreadyConnected,
    SessionLimitReached,
    ServerClosing,
    ConnectionStartFailed,
    ConnectionLost,
    InvalidArguments,
    InvalidCommand,
    InvalidLocalPath,
    InvalidRemoteType,
    LocalPathExists,
    RemotePathExists,
    RemotePathNotFound,
    RemotePermissionDenied,
    SudoUnavailable,
    SudoPasswordRequired,
    SudoNotAllowed,
    TransferNotFound,
    TransferConflict,
    TransferLimitReached,
    TransferFailed,
    VerificationFailed,
    CommandNotFound,
    FileChanged,
    EditNoMatch,
    EditAmbiguousMatch,
    ForwardNotFound,
    ForwardFailed,
    ForwardNotAllowed,
    DaemonUnavailable,
    InternalError,
    /// Appended: variants keep their wire index.
    PolicyDenied,
    /// Every channel of the session stayed busy (or its master did not answer) for the call's
    /// whole wait: nothing ran, and a retry is safe.
    ChannelsBusy,
    /// The host lacks a program the tool needs; the message names it.
    HostToolMissing,
    /// `remove_path` of a directory that is not empty, without `recursive`.
    DirectoryNotEmpty,
    /// A file beyond a tool's size bound (`edit_file`'s 64 MiB).
    FileTooLarge,
}

impl ErrorCode {
    /// Every code, in the contract's order: the docs table and tests iterate this.
    pub const ALL: [ErrorCode; 40] = [
        Self::SessionNotFound,
        Self::InvalidSessionKey,
        Self::SessionNotReady,
        Self::SessionClosing,
        Self::SessionClosed,
        Self::AlreadyConnected,
        Self::SessionLimitReached,
        Self::ServerClosing,
        Self::ConnectionStartFailed,
        Self::ConnectionLost,
        Self::InvalidArguments,
        Self::InvalidCommand,
        Self::InvalidLocalPath,
        Self::InvalidRemoteType,
        Self::LocalPathExists,
        Self::RemotePathExists,
        Self::RemotePathNotFound,
        Self::RemotePermissionDenied,
        Self::SudoUnavailable,
        Self::SudoPasswordRequired,
        Self::SudoNotAllowed,
        Self::TransferNotFound,
        Self::TransferConflict,
        Self::TransferLimitReached,
        Self::TransferFailed,
        Self::VerificationFailed,
        Self::CommandNotFound,
        Self::FileChanged,
        Self::EditNoMatch,
        Self::EditAmbiguousMatch,
        Self::ForwardNotFound,
        Self::ForwardFailed,
        Self::ForwardNotAllowed,
        Self::DaemonUnavailable,
        Self::InternalError,
        Self::PolicyDenied,
        Self::ChannelsBusy,
        Self::HostToolMissing,
        Self::DirectoryNotEmpty,
        Self::FileTooLarge,
    ];

    /// The stable identifier shown to agents and scripts.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionNotFound => "session_not_found",
            Self::InvalidSessionKey => "invalid_session_key",
            Self::SessionNotReady => "session_not_ready",
            Self::SessionClosing => "session_closing",
            Self::SessionClosed => "session_closed",
            Self::AlreadyConnected => "already_connected",
            Self::SessionLimitReached => "session_limit_reached",
            Self::ServerClosing => "server_closing",
            Self::ConnectionStartFailed => "connection_start_failed",
            Self::ConnectionLost => "connection_lost",
            Self::InvalidArguments => "invalid_arguments",
            Self::InvalidCommand => "invalid_command",
            Self::InvalidLocalPath => "invalid_local_path",
            Self::InvalidRemoteType => "invalid_remote_type",
            Self::LocalPathExists => "local_path_exists",
            Self::RemotePathExists => "remote_path_exists",
            Self::RemotePathNotFound => "remote_path_not_found",
            Self::RemotePermissionDenied => "remote_permission_denied",
            Self::SudoUnavailable => "sudo_unavailable",
            Self::SudoPasswordRequired => "sudo_password_required",
            Self::SudoNotAllowed => "sudo_not_allowed",
            Self::TransferNotFound => "transfer_not_found",
            Self::TransferConflict => "transfer_conflict",
            Self::TransferLimitReached => "transfer_limit_reached",
            Self::TransferFailed => "transfer_failed",
            Self::VerificationFailed => "verification_failed",
            Self::CommandNotFound => "command_not_found",
            Self::FileChanged => "file_changed",
            Self::EditNoMatch => "edit_no_match",
            Self::EditAmbiguousMatch => "edit_ambiguous_match",
            Self::ForwardNotFound => "forward_not_found",
            Self::ForwardFailed => "forward_failed",
            Self::ForwardNotAllowed => "forward_not_allowed",
            Self::DaemonUnavailable => "daemon_unavailable",
            Self::InternalError => "internal_error",
            Self::PolicyDenied => "policy_denied",
            Self::ChannelsBusy => "channels_busy",
            Self::HostToolMissing => "host_tool_missing",
            Self::DirectoryNotEmpty => "directory_not_empty",
            Self::FileTooLarge => "file_too_large",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What every fallible daemon call returns on failure. Messages are lower case, short, say what
/// to do next, and never carry secrets or raw OpenSSH output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct DaemonError {
    pub code: ErrorCode,
    pub message: String,
    /// What an agent recovers with, as fields: the message is for people. Boxed: most errors
    /// carry none, and every `Result` of the daemon holds this type.
    pub details: Box<ErrorDetails>,
}

/// The facts some codes carry beside their message, so that an agent acts on a field rather
/// than on prose. Each is set only by the code it belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetails {
    /// `already_connected`: the session that owns the server.
    pub session_id: Option<String>,
    /// `file_changed`: the file's SHA-256 now.
    pub sha256: Option<String>,
    /// `forward_failed`: the forward of this session that already listens there.
    pub forward_id: Option<String>,
    /// `edit_ambiguous_match`: how many times `old_text` occurs.
    pub count: Option<u64>,
    /// `connection_lost` of `exec` and `sudo_exec`: the command had started on the host when
    /// the connection went, so it may have done part of its work (or still run). Left out
    /// when it is not known to have started.
    pub started: Option<bool>,
    /// With `started`: what the command printed on each stream until the connection went,
    /// as an `exec` answer's streams.
    pub stdout: Option<crate::exec::StreamOutput>,
    pub stderr: Option<crate::exec::StreamOutput>,
}

impl DaemonError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: Box::default(),
        }
    }

    /// This error with `details` beside its message.
    pub fn with_details(mut self, details: ErrorDetails) -> Self {
        self.details = Box::new(details);
        self
    }

    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArguments, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InternalError, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let s = code.as_str();
            assert!(s.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{s}");
            assert!(seen.insert(s), "duplicate {s}");
        }
    }
}
