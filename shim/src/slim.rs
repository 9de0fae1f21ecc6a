//! Tool schemas without bytes no client needs: the `$schema` URI (the MCP default dialect)
//! and, in inputs, `null` beside the type of an optional field (leaving a field out says the
//! same) and the Rust width of numbers (`format`: `int32`, `double`, ...; the descriptions
//! give the ranges); each `$ref` to a definition is written out in place, without the
//! definition's own description where the field has one, since a small enum named once costs
//! less inline than as a definition. Clients show every input schema to the model, so each
//! byte costs every agent.

use rmcp::model::JsonObject;
use serde_json::Value;

/// Slims an input schema, in place.
pub fn input(schema: &mut JsonObject) {
    schema.remove("$schema");
    let optional: Vec<String> = match (schema.get("properties"), schema.get("required")) {
        (Some(Value::Object(properties)), required) => {
            let required: Vec<&str> = required
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            properties
                .keys()
                .filter(|name| !required.contains(&name.as_str()))
                .cloned()
                .collect()
        }
        _ => Vec::new(),
    };
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for name in optional {
            if let Some(Value::Object(property)) = properties.get_mut(&name) {
                without_null(property);
            }
        }
        for property in properties.values_mut() {
            if let Value::Object(property) = property {
                property.remove("format");
            }
        }
    }
    if let Some(Value::Object(definitions)) = schema.remove("$defs") {
        for value in schema.values_mut() {
            inline_references(value, &definitions);
        }
    }
}

/// Replaces each `{"$ref": "#/$defs/Name", ...}` under `value` by the definition merged into
/// it; the field's own description wins over the definition's.
fn inline_references(value: &mut Value, definitions: &JsonObject) {
    match value {
        Value::Object(object) => {
            let definition = object
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|reference| reference.strip_prefix("#/$defs/"))
                .and_then(|name| definitions.get(name))
                .and_then(Value::as_object);
            if let Some(definition) = definition {
                object.remove("$ref");
                for (key, inner) in definition {
                    object.entry(key.clone()).or_insert_with(|| inner.clone());
                }
            }
            for inner in object.values_mut() {
                inline_references(inner, definitions);
            }
        }
        Value::Array(items) => {
            for item in items {
                inline_references(item, definitions);
            }
        }
        _ => {}
    }
}

/// Slims an output schema, in place.
pub fn output(schema: &mut JsonObject) {
    schema.remove("$schema");
}

/// An optional field's schema without its `null` alternative.
fn without_null(property: &mut JsonObject) {
    let is_null = |v: &Value| v.as_str() == Some("null");
    if let Some(Value::Array(kinds)) = property.get_mut("type") {
        kinds.retain(|kind| !is_null(kind));
        if let [only] = kinds.as_slice() {
            let only = only.clone();
            property.insert("type".into(), only);
        }
    }
    let branches = match property.get("anyOf") {
        Some(Value::Array(branches)) => branches.clone(),
        _ => return,
    };
    let kept: Vec<Value> = branches
        .into_iter()
        .filter(|branch| !is_null(&branch["type"]))
        .collect();
    if let [Value::Object(only)] = kept.as_slice() {
        property.remove("anyOf");
        for (key, value) in only {
            property.entry(key.clone()).or_insert_with(|| value.clone());
        }
    } else {
        property.insert("anyOf".into(), Value::Array(kept));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn optional_inputs_lose_null_and_required_ones_keep_their_type() {
        let mut schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "cwd": {"type": ["string", "null"], "description": "Where."},
                "timeout": {"type": ["number", "null"], "format": "double"},
                "how": {"anyOf": [{"$ref": "#/$defs/Encoding"}, {"type": "null"}],
                        "description": "Encoding."},
                "edits": {"type": "array", "items": {"$ref": "#/$defs/Encoding"}},
                "maybe": {"type": ["string", "null"]}
            },
            "required": ["command", "maybe"],
            "$defs": {"Encoding": {"description": "How.", "enum": ["utf-8", "base64"]}}
        })
        .as_object()
        .unwrap()
        .clone();
        input(&mut schema);
        assert!(!schema.contains_key("$schema"));
        let properties = &schema["properties"];
        assert_eq!(
            properties["cwd"],
            json!({"type": "string", "description": "Where."})
        );
        assert!(!schema.contains_key("$defs"));
        assert_eq!(
            properties["how"],
            json!({"enum": ["utf-8", "base64"], "description": "Encoding."})
        );
        assert_eq!(
            properties["edits"]["items"],
            json!({"enum": ["utf-8", "base64"], "description": "How."})
        );
        assert_eq!(properties["maybe"], json!({"type": ["string", "null"]}));
        assert_eq!(properties["timeout"], json!({"type": "number"}));
    }
}
