//! Wire types of `exec`: the request, and each captured stream with its bounds.

use serde::{Deserialize, Serialize};

use crate::session::SessionAuth;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecRequest {
    pub auth: SessionAuth,
    pub command: String,
    pub cwd: Option<String>,
    /// Seconds; the contract's default when absent.
    pub timeout: Option<f64>,
    pub spool_output: bool,
    /// The caller's local root (absolute), when its person configured one.
    pub local_root: Option<String>,
    pub handoff: Handoff,
}
crate::session::authed!(ExecRequest);

/// What `exec` and `sudo_exec` take beyond the command: when to hand a slow command over to a
/// command handle, and the key a caller follows its progress by.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Handoff {
    /// Seconds (1..=86400) after which a command still running becomes a command handle.
    pub after: Option<f64>,
    /// A caller-chosen key for `progress` while the call runs.
    pub progress_key: Option<String>,
}

/// `sudo_exec`: a command run by root through `sudo -n -k /bin/bash --noprofile --norc -s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SudoExecRequest {
    pub auth: SessionAuth,
    pub command: String,
    pub cwd: Option<String>,
    /// Seconds; the contract's default when absent.
    pub timeout: Option<f64>,
    /// The caller's local root (absolute), when its person configured one: a handed-off
    /// command's output is kept there.
    pub local_root: Option<String>,
    pub handoff: Handoff,
}
crate::session::authed!(SudoExecRequest);

/// How a string carries bytes: `utf-8` (the string is the text itself) or `base64` (the bytes
/// are not valid UTF-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Encoding {
    #[serde(rename = "utf-8")]
    Utf8,
    #[serde(rename = "base64")]
    Base64,
}

impl Encoding {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Utf8 => "utf-8",
            Self::Base64 => "base64",
        }
    }
}

/// A half-open byte range `[start, end)` of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ByteRange {
    /// Offset of the first byte left out.
    pub start: u64,
    /// Offset one past the last byte left out.
    pub end: u64,
}

/// One output stream of a command, bounded: long output keeps its head and its tail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StreamOutput {
    /// The kept output: all of it, or its head followed by its tail when truncated.
    pub data: String,
    /// `utf-8`, or `base64` when the output holds bytes that are not UTF-8.
    pub encoding: Encoding,
    /// Bytes kept in `data` (before any base64).
    pub captured_bytes: u64,
    /// Bytes the command wrote to this stream in all.
    pub total_bytes: u64,
    /// True when bytes were left out between head and tail (see `omitted`).
    pub truncated: bool,
    /// The byte range `data` does not hold: between head and tail when truncated; after a
    /// hand-off, what was written beyond `next_offset`.
    pub omitted: Option<ByteRange>,
    /// Absolute local path of the complete stream, when `spool_output` was asked for.
    pub spool_path: Option<String>,
    /// True when the spool file stopped at the daemon's `max-spool-bytes` (1 GiB by
    /// default): it holds the stream's first bytes only.
    pub spool_truncated: bool,
    /// Only after a hand-off: `data` holds this stream from byte 0 up to here; pass it to
    /// `command_status` as the stream's offset.
    // Left out of JSON answers when absent (the shim drops them); bincode keeps every field.
    #[cfg_attr(feature = "schema", schemars(skip_serializing_if = "Option::is_none"))]
    pub next_offset: Option<u64>,
}

/// What a finished command left: its status and both streams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ExecResult {
    /// Exit status of the command's shell; null when a signal ended that shell, the
    /// command timed out, or it was handed off (still running). A program the shell ran that a signal ended shows as 128 + n here
    /// (the shell's own status), with `signal` null.
    pub exit_code: Option<i32>,
    /// The signal that ended the command's shell (`TERM` or `KILL` from a timeout or
    /// cancellation; otherwise the host's name, such as `SEGV` or `USR1`, or `unknown`),
    /// else null.
    pub signal: Option<String>,
    /// Seconds from the call's start to its answer.
    pub duration: f64,
    /// True when the timeout ended the command (its whole process group was terminated).
    pub timed_out: bool,
    /// The command's standard output as kept.
    pub stdout: StreamOutput,
    /// The command's standard error as kept.
    pub stderr: StreamOutput,
    /// `true` when the command outlived `handoff_after` and became a command handle: it runs
    /// on, `exit_code` is null, and `command_status` follows it. Absent otherwise (never
    /// false).
    // Left out of JSON answers when absent (the shim drops them); bincode keeps every field.
    #[cfg_attr(feature = "schema", schemars(skip_serializing_if = "Option::is_none"))]
    pub handed_off: Option<bool>,
    /// Only after a hand-off: the command handle, for command_status and command_kill.
    // Left out of JSON answers when absent (the shim drops them); bincode keeps every field.
    #[cfg_attr(feature = "schema", schemars(skip_serializing_if = "Option::is_none"))]
    pub handle_id: Option<String>,
    /// Only after a hand-off: the remote process group of the command (its shell's PID);
    /// null until the shell reported it. Stop it with command_kill, not task_kill.
    // Left out of JSON answers when absent (the shim drops them); bincode keeps every field.
    #[cfg_attr(feature = "schema", schemars(skip_serializing_if = "Option::is_none"))]
    pub pid: Option<u32>,
}

/// Bytes as the contract presents them: UTF-8 text when valid, base64 otherwise.
pub fn encode_bytes(bytes: Vec<u8>) -> (String, Encoding) {
    use base64::Engine as _;
    match String::from_utf8(bytes) {
        Ok(text) => (text, Encoding::Utf8),
        Err(e) => (
            base64::engine::general_purpose::STANDARD.encode(e.as_bytes()),
            Encoding::Base64,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_stays_text_and_binary_becomes_base64() {
        assert_eq!(
            encode_bytes(b"h\xc3\xa9".to_vec()),
            ("hé".into(), Encoding::Utf8)
        );
        assert_eq!(
            encode_bytes(vec![0xff, 0x00]),
            ("/wA=".into(), Encoding::Base64)
        );
    }
}
