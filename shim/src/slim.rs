//! Tool schemas without bytes no client needs: the `$schema` URI (the MCP default dialect)
//! and, in inputs, `null` beside the type of an optional field (leaving a field out says the
//! same) and the Rust width of numbers (`format`: `int32`, `double`, ...; the descriptions
//! give the ranges, whole bounds without `.0`); each `$ref` to a definition is written out in place, without the
//! definition's own description where the field has one, since a small enum named once costs
//! less inline than as a definition. Clients show every input schema to the model, so each
//! byte costs every agent. A field that is a choice among described constants becomes a
//! plain `enum` when it has a description of its own, which then says what each value does.
//! Descriptions are written as wrapped doc comments: their line breaks become spaces (an
//! escaped newline costs two bytes). Output schemas keep the structure of an answer (types, values, what is required, the
//! defaults a lean answer leaves out) and lose the prose: the clients that show a model
//! anything show it the descriptions, never output schemas, so each tool's description says
//! what its answer holds, and the field prose was 53 KB a client loads for no reader (the
//! wire types keep it as doc comments). Annotations lose the hints that only repeat the
//! protocol's defaults.

use rmcp::model::{JsonObject, ToolAnnotations};
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
                whole_bounds(property);
            }
        }
    }
    if let Some(Value::Object(definitions)) = schema.remove("$defs") {
        for value in schema.values_mut() {
            inline_references(value, &definitions);
        }
    }
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for property in properties.values_mut() {
            if let Value::Object(property) = property {
                constants_as_enum(property);
                if let Some(Value::String(text)) = property.get_mut("description") {
                    *text = unwrapped(text);
                }
            }
        }
    }
}

/// A description written as wrapped lines, as one line.
pub fn unwrapped(text: &str) -> String {
    text.lines().map(str::trim).collect::<Vec<_>>().join(" ")
}

/// Writes a bound that is a whole number without its `.0` (`300.0` is `300` to a schema).
fn whole_bounds(property: &mut JsonObject) {
    for bound in ["minimum", "maximum"] {
        if let Some(Value::Number(n)) = property.get(bound)
            && let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 1e15)
        {
            property.insert(bound.into(), Value::from(f as i64));
        }
    }
}

/// A described field whose `oneOf` offers only string constants, as `{"type": "string",
/// "enum": [...]}`: the values' own descriptions go, the field's says what each does.
fn constants_as_enum(property: &mut JsonObject) {
    if !property.contains_key("description") {
        return;
    }
    let Some(Value::Array(branches)) = property.get("oneOf") else {
        return;
    };
    let constants: Option<Vec<Value>> = branches
        .iter()
        .map(|branch| branch.get("const").filter(|c| c.is_string()).cloned())
        .collect();
    if let Some(constants) = constants {
        property.remove("oneOf");
        property.insert("type".into(), "string".into());
        property.insert("enum".into(), Value::Array(constants));
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
    for keyword in ["title", "description"] {
        schema.remove(keyword);
    }
    for value in schema.values_mut() {
        structure_only(value);
    }
}

/// Leaves out the hints a client assumes when they are absent (MCP: not read-only,
/// destructive, not idempotent, open world), and those it ignores for a read-only tool
/// (destructive, idempotent).
pub fn annotations(annotations: &mut ToolAnnotations) {
    let read_only = annotations.read_only_hint == Some(true);
    if !read_only {
        annotations.read_only_hint = None;
    }
    if read_only || annotations.destructive_hint == Some(true) {
        annotations.destructive_hint = None;
    }
    if read_only || annotations.idempotent_hint == Some(false) {
        annotations.idempotent_hint = None;
    }
    if annotations.open_world_hint == Some(true) {
        annotations.open_world_hint = None;
    }
}

/// Removes every `format`, `title` and `description` keyword under `value` whose value is a
/// string (a number's width, prose); a property that happens to have one of those names is
/// an object and stays.
fn structure_only(value: &mut Value) {
    match value {
        Value::Object(object) => {
            object.retain(|key, value| {
                !(matches!(key.as_str(), "format" | "title" | "description") && value.is_string())
            });
            for inner in object.values_mut() {
                structure_only(inner);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(structure_only),
        _ => {}
    }
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
                "cwd": {"type": ["string", "null"], "description": "Where it\nruns."},
                "timeout": {"type": ["number", "null"], "format": "double", "minimum": 0.1,
                            "maximum": 300.0},
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
            json!({"type": "string", "description": "Where it runs."})
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
        assert_eq!(
            properties["timeout"],
            json!({"type": "number", "minimum": 0.1, "maximum": 300})
        );
    }

    #[test]
    fn a_described_choice_of_constants_becomes_an_enum() {
        let branch = |value: &str| json!({"const": value, "type": "string", "description": "D."});
        let mut schema = json!({
            "properties": {
                "kind": {"$ref": "#/$defs/Kind", "description": "`a` or `b`, each said."},
                "bare": {"$ref": "#/$defs/Kind"}
            },
            "required": ["kind", "bare"],
            "$defs": {"Kind": {"oneOf": [branch("a"), branch("b")]}}
        })
        .as_object()
        .unwrap()
        .clone();
        input(&mut schema);
        assert_eq!(
            schema["properties"]["kind"],
            json!({"type": "string", "enum": ["a", "b"], "description": "`a` or `b`, each said."})
        );
        assert_eq!(
            schema["properties"]["bare"]["oneOf"],
            json!([branch("a"), branch("b")])
        );
    }

    #[test]
    fn outputs_keep_structure_but_not_widths_or_prose_and_not_a_field_named_so() {
        let mut schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "ExecAnswer",
            "description": "An answer.",
            "properties": {
                "size": {"type": "integer", "format": "uint64", "minimum": 0,
                         "description": "Bytes."},
                "format": {"type": "string", "description": "A field."},
                "description": {"type": "string", "title": "A field too."},
                "items": {"type": "array", "items": {"type": "number", "format": "double"}}
            },
            "required": ["size", "description"]
        })
        .as_object()
        .unwrap()
        .clone();
        output(&mut schema);
        assert_eq!(
            Value::Object(schema),
            json!({"properties": {
                "size": {"type": "integer", "minimum": 0},
                "format": {"type": "string"},
                "description": {"type": "string"},
                "items": {"type": "array", "items": {"type": "number"}}
            }, "required": ["size", "description"]})
        );
    }

    #[test]
    fn annotations_keep_only_the_hints_that_differ_from_the_defaults() {
        let hints = |read_only, destructive, idempotent, open_world| {
            let mut annotations = ToolAnnotations::new();
            annotations.read_only_hint = read_only;
            annotations.destructive_hint = Some(destructive);
            annotations.idempotent_hint = Some(idempotent);
            annotations.open_world_hint = Some(open_world);
            annotations
        };
        let mut kill = hints(Some(false), true, true, true);
        annotations(&mut kill);
        assert_eq!(
            serde_json::to_value(&kill).unwrap(),
            json!({"idempotentHint": true})
        );
        let mut stat = hints(Some(true), false, true, false);
        annotations(&mut stat);
        assert_eq!(
            serde_json::to_value(&stat).unwrap(),
            json!({"readOnlyHint": true, "openWorldHint": false})
        );
        let mut unsaid = hints(None, false, false, true);
        annotations(&mut unsaid);
        assert_eq!(
            serde_json::to_value(&unsaid).unwrap(),
            json!({"destructiveHint": false})
        );
    }
}
