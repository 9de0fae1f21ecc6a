//! The answer shape every tool shares: `{ok: true, ...}` or `{ok: false, error: {code,
//! message}}`, as structured content with the same JSON as text.

use rmcp::model::CallToolResult;
use schemars::JsonSchema;
use serde::Serialize;
use sshmcp_proto::{DaemonError, ErrorCode};

/// The published output schema of a tool whose success fields are `T` and whose failures
/// are `E` (a transfer's report carries its copy's failure in the same place).
#[derive(Serialize, JsonSchema)]
pub struct Answer<T, E = ErrorBody> {
    /// True on success (the result fields are present); false with `error` on failure.
    pub ok: bool,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub result: Option<T>,
    /// With `ok: false`: why the call did not happen; act on its `code`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<E>,
}

/// Why a call failed.
#[derive(Serialize, JsonSchema)]
pub struct ErrorBody {
    /// A stable identifier: automation matches on this, never on `message`.
    pub code: String,
    /// A short human explanation.
    pub message: String,
}

/// The answer for a tool body's outcome.
pub fn respond<T: Serialize>(outcome: Result<T, DaemonError>) -> CallToolResult {
    match outcome {
        Ok(result) => success(result),
        Err(e) => failure(e.code, e.message),
    }
}

/// A successful answer.
fn success<T: Serialize>(result: T) -> CallToolResult {
    let answer: Answer<T> = Answer {
        ok: true,
        result: Some(result),
        error: None,
    };
    match serde_json::to_value(answer) {
        Ok(value) => CallToolResult::structured(value),
        Err(e) => failure(
            ErrorCode::InternalError,
            format!("cannot encode the answer: {e}"),
        ),
    }
}

/// A failed answer (`isError: true`).
fn failure(code: ErrorCode, message: impl Into<String>) -> CallToolResult {
    let answer: Answer<()> = Answer {
        ok: false,
        result: None,
        error: Some(ErrorBody {
            code: code.as_str().to_string(),
            message: message.into(),
        }),
    };
    CallToolResult::structured_error(serde_json::to_value(answer).unwrap_or_default())
}
