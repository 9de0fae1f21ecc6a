//! The answer shape every tool shares: `{ok: true, ...}` or `{ok: false, error: {code,
//! message}}`, as structured content with the same JSON as text.

use std::sync::Arc;

use rmcp::model::{CallToolResult, JsonObject};
use schemars::JsonSchema;
use serde::Serialize;
use sshmcp_proto::DaemonError;

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
    // The facts some codes carry (see proto's `ErrorDetails`), left out of the published
    // schema: the descriptions of the tools that give them say so, once, rather than every
    // tool's output schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub forward_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub started: Option<bool>,
    /// With `started`: the streams so far, lean as an `exec` answer's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub stdout: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub stderr: Option<serde_json::Value>,
}

/// `schema` without the answer fields `fields`, for a tool whose shared answer type carries
/// fields that mean nothing for it; `def` names the definition (`$defs`) holding them, None
/// for the answer itself.
pub fn schema_without(
    schema: Arc<JsonObject>,
    def: Option<&str>,
    fields: &[&str],
) -> Arc<JsonObject> {
    let mut schema = (*schema).clone();
    let object = match def {
        None => Some(&mut schema),
        Some(name) => schema
            .get_mut("$defs")
            .and_then(|defs| defs.get_mut(name))
            .and_then(serde_json::Value::as_object_mut),
    };
    if let Some(object) = object {
        if let Some(properties) = object
            .get_mut("properties")
            .and_then(serde_json::Value::as_object_mut)
        {
            properties.retain(|name, _| !fields.contains(&name.as_str()));
        }
        if let Some(required) = object
            .get_mut("required")
            .and_then(serde_json::Value::as_array_mut)
        {
            required.retain(|name| !fields.iter().any(|f| name == f));
        }
    }
    Arc::new(schema)
}

/// `schema` with the fields `fields` of the definition `def` optional: a tool that leaves
/// them out of some answers (its `Described::shape`).
pub fn schema_optional(schema: Arc<JsonObject>, def: &str, fields: &[&str]) -> Arc<JsonObject> {
    let mut schema = (*schema).clone();
    let required = schema
        .get_mut("$defs")
        .and_then(|defs| defs.get_mut(def))
        .and_then(|def| def.get_mut("required"))
        .and_then(serde_json::Value::as_array_mut);
    if let Some(required) = required {
        required.retain(|name| !fields.iter().any(|f| name == f));
    }
    Arc::new(schema)
}

/// `schema` with its answer fields' descriptions replaced, for a tool whose shared answer
/// type describes them for all its tools at once.
pub fn schema_describing(
    schema: Arc<JsonObject>,
    descriptions: &[(&str, &str)],
) -> Arc<JsonObject> {
    let mut schema = (*schema).clone();
    if let Some(properties) = schema
        .get_mut("properties")
        .and_then(serde_json::Value::as_object_mut)
    {
        for (field, text) in descriptions {
            if let Some(property) = properties
                .get_mut(*field)
                .and_then(serde_json::Value::as_object_mut)
            {
                property.insert("description".into(), (*text).into());
            }
        }
    }
    Arc::new(schema)
}

/// The answer for a tool body's outcome, its fields trimmed by `trim` first, then made lean
/// (see `lean`): the result is encoded once, so output is not copied again for the envelope.
pub fn respond_trimmed<T: Serialize>(
    outcome: Result<T, DaemonError>,
    trim: impl FnOnce(&mut JsonObject),
) -> CallToolResult {
    let result = match outcome {
        Ok(result) => result,
        Err(e) => return failure(e),
    };
    match serde_json::to_value(result) {
        Ok(serde_json::Value::Object(mut answer)) => {
            trim(&mut answer);
            crate::lean::answer(&mut answer);
            answer.insert("ok".into(), true.into());
            CallToolResult::structured(answer.into())
        }
        Ok(_) => failure(DaemonError::internal("the answer is no JSON object")),
        Err(e) => failure(DaemonError::internal(format!(
            "cannot encode the answer: {e}"
        ))),
    }
}

/// A failed answer (`isError: true`), with the facts its code carries.
fn failure(e: DaemonError) -> CallToolResult {
    let details = *e.details;
    // The streams as an exec answer gives them: an empty one left out, a whole one its text.
    let mut streams = JsonObject::new();
    for (name, stream) in [("stdout", details.stdout), ("stderr", details.stderr)] {
        if let Some(value) = stream.and_then(|s| serde_json::to_value(s).ok()) {
            streams.insert(name.into(), value);
        }
    }
    crate::lean::answer(&mut streams);
    let answer: Answer<()> = Answer {
        ok: false,
        result: None,
        error: Some(ErrorBody {
            code: e.code.as_str().to_string(),
            message: e.message,
            session_id: details.session_id,
            sha256: details.sha256,
            forward_id: details.forward_id,
            count: details.count,
            started: details.started,
            stdout: streams.remove("stdout"),
            stderr: streams.remove("stderr"),
        }),
    };
    CallToolResult::structured_error(serde_json::to_value(answer).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Arc<JsonObject> {
        let schema = json!({
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "required": ["a", "b"],
            "$defs": {"Part": {
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"]
            }}
        });
        Arc::new(schema.as_object().unwrap().clone())
    }

    /// A field left out goes from the properties and from what is required, of the answer
    /// itself or of a definition inside it; one made optional only from what is required.
    #[test]
    fn fields_leave_a_schema_or_become_optional_where_named() {
        let top = schema_without(schema(), None, &["b"]);
        assert_eq!(top["properties"], json!({"a": {"type": "string"}}));
        assert_eq!(top["required"], json!(["a"]));
        let inner = schema_without(schema(), Some("Part"), &["y"]);
        assert_eq!(inner["$defs"]["Part"]["required"], json!(["x"]));
        assert!(inner["$defs"]["Part"]["properties"].get("y").is_none());
        assert_eq!(inner["required"], json!(["a", "b"]));
        let optional = schema_optional(schema(), "Part", &["x"]);
        assert_eq!(optional["$defs"]["Part"]["required"], json!(["y"]));
        assert!(optional["$defs"]["Part"]["properties"].get("x").is_some());
        // A definition the schema lacks changes nothing.
        assert_eq!(schema_optional(schema(), "Gone", &["x"]), schema());
    }

    /// A tool's own words for a field replace the shared type's; a field it does not hold is
    /// not added.
    #[test]
    fn a_tool_describes_the_fields_it_fills() {
        let described = schema_describing(schema(), &[("a", "what a is here"), ("c", "none")]);
        assert_eq!(
            described["properties"]["a"]["description"],
            "what a is here"
        );
        assert!(described["properties"].get("c").is_none());
        assert!(described["properties"]["b"].get("description").is_none());
    }
}
