//! Lean answers (contract section 0): an answer leaves out each field at its documented
//! default, a complete UTF-8 stream is its text, and fractional numbers (durations, rates)
//! are rounded to three decimals, a duration to the millisecond; each output schema says so. Agents pay for every byte of an answer.

use rmcp::model::JsonObject;
use serde_json::{Map, Value, json};

/// The failure of a call (or of a transfer's copy): optional like any field that can be
/// null, with no default to name (absent means the call did not fail).
const FAILURE: &str = "error";

/// Fields an answer always carries, whatever their value: `exit_code` says how a command
/// ended, null included; the `data` of a stream or a read stays when empty, as the stream
/// may still be cut or binary.
const ALWAYS: &[&str] = &["ok", "exit_code", "data"];

/// Counts, offsets and a rate whose default is 0: idle sessions, fresh or queued copies,
/// reads from the start and empty files are the common case (the instructions say 0 is
/// left out).
const ZERO_DEFAULTS: &[&str] = &[
    "active_commands",
    "active_forwards",
    "active_transfers",
    "bytes_transferred",
    "offset",
    "rate",
    "reused_bytes",
    "size",
];

/// Text fields left out when empty: streams (a complete one is its text) and a login user
/// not learned yet. Every other text is an id, a path or a word, never empty, and stays
/// required in the schemas.
const EMPTY_DEFAULTS: &[&str] = &["stdout", "stderr", "remote_user"];

/// The byte counts of a stream object (a log's tail says its log's `size`): when each is the
/// text's length, the text is all of it.
const COUNTS: &[&str] = &["captured_bytes", "total_bytes", "size"];

/// Makes `answer` lean, in place. The list a listing tool answers with stays when empty:
/// it is the answer, not a detail at its default.
pub fn answer(answer: &mut JsonObject) {
    for value in answer.values_mut() {
        trim_value(value);
    }
    answer.retain(|name, value| value.is_array() || keeps(name, value));
}

fn trim_object(object: &mut Map<String, Value>) {
    for value in object.values_mut() {
        trim_value(value);
    }
    object.retain(|name, value| keeps(name, value));
}

/// Whether a lean answer keeps the field `name` at `value`.
fn keeps(name: &str, value: &Value) -> bool {
    ALWAYS.contains(&name) || !is_default(name, value)
}

fn trim_value(value: &mut Value) {
    match value {
        Value::Object(object) => {
            // Read before the counts are trimmed: a count of 0 (an empty stream, or a size the
            // host could not tell) is a fact here, not a default.
            let whole = counts_whole(object);
            trim_object(object);
            if let Some(text) = complete_text(object).filter(|_| whole) {
                *value = Value::String(text);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(trim_value),
        Value::Number(number) => {
            if let Some(rounded) = number
                .as_f64()
                .filter(|_| number.is_f64())
                .and_then(|seconds| {
                    serde_json::Number::from_f64((seconds * 1000.0).round() / 1000.0)
                })
            {
                *number = rounded;
            }
        }
        _ => {}
    }
}

/// Whether `value` is the documented default of the field `name`: null, false, an empty
/// list, an empty text of [`EMPTY_DEFAULTS`], `utf-8` for an encoding, and 0 for the counts
/// of [`ZERO_DEFAULTS`].
fn is_default(name: &str, value: &Value) -> bool {
    match value {
        Value::Number(n) => ZERO_DEFAULTS.contains(&name) && n.as_f64() == Some(0.0),
        Value::Null | Value::Bool(false) => true,
        Value::String(text) => {
            (text.is_empty() && EMPTY_DEFAULTS.contains(&name))
                || (name.ends_with("encoding") && text == "utf-8")
        }
        Value::Array(items) => items.is_empty(),
        Value::Bool(true) | Value::Object(_) => false,
    }
}

/// Whether `object` is a stream (`data` and a byte count) whose counts show nothing was left
/// out of its `data`.
fn counts_whole(object: &Map<String, Value>) -> bool {
    let Some(data) = object.get("data").and_then(Value::as_str) else {
        return false;
    };
    let whole = |name: &&str| {
        object
            .get(*name)
            .is_none_or(|count| count.as_u64() == Some(data.len() as u64))
    };
    COUNTS.iter().any(|count| object.contains_key(*count)) && COUNTS.iter().all(whole)
}

/// The text of a trimmed stream object whose counts showed it whole: only `data` (UTF-8) is
/// left beside the counts.
fn complete_text(object: &Map<String, Value>) -> Option<String> {
    let data = object.get("data")?.as_str()?;
    let only_counts = object
        .keys()
        .all(|name| name == "data" || COUNTS.contains(&name.as_str()));
    only_counts.then(|| data.to_string())
}

/// Makes an output schema say what a lean answer holds: each field that can be at its
/// default is optional and names that default (JSON Schema's `default`), and a stream may be
/// its text (default: empty).
pub fn schema(schema: &mut JsonObject) {
    let streams = stream_definitions(schema);
    describe_object(schema, &streams, true);
    if let Some(Value::Object(defs)) = schema.get_mut("$defs") {
        for def in defs.values_mut() {
            if let Value::Object(def) = def {
                describe_object(def, &streams, false);
            }
        }
    }
}

/// The names of the definitions that are stream objects (they have `data` and a byte count).
fn stream_definitions(schema: &JsonObject) -> Vec<String> {
    let Some(Value::Object(defs)) = schema.get("$defs") else {
        return Vec::new();
    };
    defs.iter()
        .filter(|(_, def)| {
            let properties = &def["properties"];
            properties.get("data").is_some()
                && COUNTS.iter().any(|count| properties.get(*count).is_some())
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// Describes the properties of one object schema; `top` for the answer itself, whose lists
/// stay when empty.
fn describe_object(object: &mut JsonObject, streams: &[String], top: bool) {
    let Some(Value::Object(properties)) = object.get_mut("properties") else {
        return;
    };
    let mut optional = Vec::new();
    for (name, property) in properties.iter_mut() {
        let Value::Object(property) = property else {
            continue;
        };
        if ALWAYS.contains(&name.as_str()) {
            continue;
        }
        if let Some(stream) = stream_ref(property, streams) {
            property.clear();
            property.insert("anyOf".into(), json!([{"type": "string"}, stream]));
            property.insert("default".into(), json!(""));
            optional.push(name.clone());
        } else if name == FAILURE {
            optional.push(name.clone());
        } else if let Some(default) =
            default_of(name, property).filter(|_| !(top && is_list(property)))
        {
            property.insert("default".into(), default);
            optional.push(name.clone());
        }
    }
    if let Some(Value::Array(required)) = object.get_mut("required") {
        required.retain(|name| !optional.iter().any(|o| name == o));
    }
}

/// Whether the property is a list (and never null).
fn is_list(property: &JsonObject) -> bool {
    property.get("type").and_then(Value::as_str) == Some("array")
}

/// The stream definition the property refers to, directly or beside `null`, as a schema of
/// its own (`{"$ref": ...}`).
fn stream_ref(property: &JsonObject, streams: &[String]) -> Option<Value> {
    let is_stream = |reference: &Value| {
        let reference = reference.as_str().unwrap_or("");
        streams
            .iter()
            .any(|name| reference == format!("#/$defs/{name}"))
    };
    if let Some(reference) = property.get("$ref").filter(|r| is_stream(r)) {
        return Some(serde_json::json!({ "$ref": reference }));
    }
    let branches = property.get("anyOf")?.as_array()?;
    let reference = branches
        .iter()
        .find_map(|b| b.get("$ref").filter(|r| is_stream(r)))?;
    let only_null_beside = branches
        .iter()
        .all(|b| b.get("$ref") == Some(reference) || b["type"] == "null");
    only_null_beside.then(|| serde_json::json!({ "$ref": reference }))
}

/// The default a lean answer leaves the property out at, if it can take one. A field that
/// may be null or false is left out at either; `false` names both.
fn default_of(name: &str, property: &JsonObject) -> Option<Value> {
    if name.ends_with("encoding") {
        return Some(json!("utf-8"));
    }
    if ZERO_DEFAULTS.contains(&name) {
        return Some(json!(0));
    }
    let mut types = Vec::new();
    collect_types(&Value::Object(property.clone()), &mut types);
    let has = |kind: &str| types.iter().any(|t| t == kind);
    match (has("null"), has("boolean")) {
        (_, true) => Some(json!(false)),
        (true, false) => Some(Value::Null),
        (false, false) if has("array") => Some(json!([])),
        (false, false) if has("string") && EMPTY_DEFAULTS.contains(&name) => Some(json!("")),
        (false, false) => None,
    }
}

/// The JSON types a property schema admits, through `anyOf`/`oneOf` (references name no
/// default: definitions are objects or enums).
fn collect_types(schema: &Value, types: &mut Vec<String>) {
    match &schema["type"] {
        Value::String(kind) => types.push(kind.clone()),
        Value::Array(kinds) => {
            types.extend(kinds.iter().filter_map(Value::as_str).map(str::to_string))
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            branches
                .iter()
                .for_each(|branch| collect_types(branch, types));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lean(value: Value) -> Value {
        let Value::Object(mut object) = value else {
            panic!("an object")
        };
        answer(&mut object);
        Value::Object(object)
    }

    #[test]
    fn a_short_command_answers_in_a_few_bytes() {
        let full = json!({
            "ok": true, "exit_code": 0, "signal": null, "duration": 0.002_345_678,
            "timed_out": false,
            "stdout": {"data": "hi", "encoding": "utf-8", "captured_bytes": 2, "total_bytes": 2,
                       "truncated": false, "omitted": null, "spool_path": null,
                       "spool_truncated": false},
            "stderr": {"data": "", "encoding": "utf-8", "captured_bytes": 0, "total_bytes": 0,
                       "truncated": false, "omitted": null, "spool_path": null,
                       "spool_truncated": false},
        });
        let answer = lean(full);
        assert_eq!(
            answer,
            json!({"ok": true, "exit_code": 0, "duration": 0.002, "stdout": "hi"})
        );
        assert!(answer.to_string().len() <= 80, "{answer}");
    }

    #[test]
    fn a_cut_or_binary_stream_stays_an_object_with_the_facts_that_apply() {
        let cut = json!({"exit_code": null, "stdout": {
            "data": "ab", "encoding": "utf-8", "captured_bytes": 2, "total_bytes": 9,
            "truncated": true, "omitted": {"start": 1, "end": 8}, "spool_path": null}});
        let answer = lean(cut);
        assert_eq!(
            answer["stdout"],
            json!({"data": "ab", "captured_bytes": 2, "total_bytes": 9, "truncated": true,
                   "omitted": {"start": 1, "end": 8}})
        );
        assert!(answer.as_object().unwrap().contains_key("exit_code"));
        let binary = json!({"stdout": {"data": "/w==", "encoding": "base64",
                                        "captured_bytes": 1, "total_bytes": 1}});
        assert_eq!(lean(binary)["stdout"]["encoding"], "base64");
        let chunk = json!({"stdout": {"data": "a", "encoding": "utf-8", "offset": 0,
                                       "next_offset": 1, "total_bytes": 1}});
        assert_eq!(lean(chunk)["stdout"]["next_offset"], 1);
    }

    /// An empty log's tail is an empty stream, left out; a tail whose log size is 0 (the
    /// host could not tell it) but that holds bytes stays an object, never the whole log.
    #[test]
    fn a_count_of_zero_is_read_before_it_goes() {
        let tails = json!({"stdout": {"data": "", "encoding": "utf-8", "size": 0},
                           "stderr": {"data": "late", "encoding": "utf-8", "size": 0}});
        assert_eq!(lean(tails), json!({"stderr": {"data": "late"}}));
    }

    #[test]
    fn zero_goes_only_where_it_is_a_default() {
        let stat = json!({"size": 0, "uid": 0, "mode": "0644", "total": 3, "eof": true,
                          "entries": [], "link_target": null, "name_encoding": "base64",
                          "nested": {"commands": [], "n": 0, "active_commands": 0,
                                     "rate": 0.0, "reused_bytes": 7, "offset": 0}});
        assert_eq!(
            lean(stat),
            json!({"uid": 0, "mode": "0644", "total": 3, "eof": true,
                   "entries": [], "name_encoding": "base64",
                   "nested": {"n": 0, "reused_bytes": 7}})
        );
    }

    #[test]
    fn the_schema_makes_defaults_optional_and_streams_text_or_object() {
        let mut schema = json!({
            "type": "object",
            "properties": {
                "ok": {"type": "boolean"},
                "exit_code": {"type": ["integer", "null"]},
                "duration": {"type": "number"},
                "timed_out": {"type": "boolean", "description": "True when it ran out of time."},
                "stdout": {"$ref": "#/$defs/StreamOutput", "description": "Its output."},
                "tail": {"anyOf": [{"$ref": "#/$defs/StreamOutput"}, {"type": "null"}]}
            },
            "required": ["ok", "exit_code", "duration", "timed_out", "stdout", "tail"],
            "$defs": {"StreamOutput": {"type": "object", "properties": {
                "data": {"type": "string"}, "total_bytes": {"type": "integer"},
                "encoding": {"$ref": "#/$defs/Encoding"}},
                "required": ["data", "total_bytes", "encoding"]}}
        })
        .as_object()
        .unwrap()
        .clone();
        super::schema(&mut schema);
        assert_eq!(schema["required"], json!(["ok", "exit_code", "duration"]));
        assert_eq!(schema["properties"]["timed_out"]["default"], json!(false));
        let stdout = &schema["properties"]["stdout"];
        assert_eq!(stdout["anyOf"][0], json!({"type": "string"}));
        assert_eq!(stdout["anyOf"][1]["$ref"], "#/$defs/StreamOutput");
        assert_eq!(stdout["default"], json!(""));
        assert_eq!(
            schema["properties"]["tail"]["anyOf"], stdout["anyOf"],
            "null or a stream"
        );
        let stream = &schema["$defs"]["StreamOutput"];
        assert_eq!(stream["required"], json!(["data", "total_bytes"]));
    }
}
