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
}

/// How `data` carries the bytes: as text when they are valid UTF-8, else base64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Encoding {
    Utf8,
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
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

/// One stream of a finished command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamOutput {
    /// The kept bytes: the whole stream, or its head followed by its tail when truncated.
    pub data: String,
    pub encoding: Encoding,
    pub captured_bytes: u64,
    pub total_bytes: u64,
    pub truncated: bool,
    /// The bytes left out between head and tail, when truncated.
    pub omitted: Option<ByteRange>,
    /// The complete stream on local disk, when `spool_output` was asked for.
    pub spool_path: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecResult {
    /// None when the command was killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that ended the command (`TERM`, `KILL`, ...), when one did and it is known.
    pub signal: Option<String>,
    /// Seconds from the call's start to its end.
    pub duration: f64,
    pub timed_out: bool,
    pub stdout: StreamOutput,
    pub stderr: StreamOutput,
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
