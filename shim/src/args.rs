//! Decoding tool arguments under the contract's rule: messages name the schema fields that are
//! missing or invalid, say when unknown fields were sent, and never repeat a value or an
//! unknown field's name (serde's own messages do both).

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use sshmcp_proto::DaemonError;

/// Decodes `args` into `T`, or fails with `invalid_arguments`.
pub fn decode<T: DeserializeOwned + JsonSchema + 'static>(
    args: JsonObject,
) -> Result<T, DaemonError> {
    decode_message(args).map_err(DaemonError::invalid_arguments)
}

/// The decoding itself; the error is the message.
fn decode_message<T: DeserializeOwned + JsonSchema + 'static>(
    args: JsonObject,
) -> Result<T, String> {
    let schema = rmcp::handler::server::common::schema_for_type::<T>();
    let mut known: Vec<&str> = schema
        .get("properties")
        .and_then(|p| p.as_object())
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    known.sort_unstable();
    let mut missing: Vec<&str> = schema
        .get("required")
        .and_then(|r| r.as_array())
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str())
                .filter(|f| !args.contains_key(*f))
                .collect()
        })
        .unwrap_or_default();
    missing.sort_unstable();
    let unknown_sent = args.keys().any(|k| !known.contains(&k.as_str()));
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!("missing required fields: {}", missing.join(", ")));
    }
    if unknown_sent {
        // The fields the tool takes, never the ones sent: a caller that passed a key where
        // none is taken (`disconnect`) sees what to send instead.
        problems.push(match known.is_empty() {
            true => "unknown fields were sent (it takes none)".to_string(),
            false => format!("unknown fields were sent (it takes: {})", known.join(", ")),
        });
    }
    if problems.is_empty() {
        match serde_path_to_error::deserialize::<_, T>(serde_json::Value::Object(args)) {
            Ok(value) => return Ok(value),
            Err(e) => {
                let field = e.path().iter().next().map(|seg| seg.to_string());
                match field.filter(|f| known.contains(&f.as_str())) {
                    Some(f) => problems.push(format!("invalid value for field: {f}")),
                    None => problems.push("the arguments do not match the schema".to_string()),
                }
            }
        }
    }
    Err(problems.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Probe {
        session_id: String,
        session_key: String,
        timeout: Option<f64>,
    }

    fn obj(v: serde_json::Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn names_missing_fields() {
        let err = decode_message::<Probe>(obj(serde_json::json!({}))).unwrap_err();
        assert_eq!(err, "missing required fields: session_id, session_key");
    }

    #[test]
    fn unknown_fields_are_not_named() {
        let args = serde_json::json!({"session_id": "a", "session_key": "b", "s3cr3t_name": 1});
        let err = decode_message::<Probe>(obj(args)).unwrap_err();
        assert_eq!(
            err,
            "unknown fields were sent (it takes: session_id, session_key, timeout)"
        );
        assert!(!err.contains("s3cr3t_name"));
    }

    #[test]
    fn invalid_values_are_not_echoed() {
        let args =
            serde_json::json!({"session_id": "a", "session_key": "b", "timeout": "SECRETVALUE"});
        let err = decode_message::<Probe>(obj(args)).unwrap_err();
        assert_eq!(err, "invalid value for field: timeout");
    }

    #[test]
    fn decodes_valid_input() {
        let args = serde_json::json!({"session_id": "a", "session_key": "b"});
        assert_eq!(decode_message::<Probe>(obj(args)).unwrap().timeout, None);
    }
}
