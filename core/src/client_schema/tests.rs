//! Schemas from real schemars derivations, made client-friendly, and arguments coerced.

use schemars::{schema_for, JsonSchema};
use serde::Deserialize;
use serde_json::{json, Value};

use super::*;

/// Shaped like a provider's input type: optional numbers, an optional enum with documented
/// variants, a nested struct, an optional list.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ListArgs {
    /// Repository owner.
    owner: String,
    /// Page, from 1.
    #[schemars(range(min = 1))]
    page: Option<u32>,
    /// Results per page.
    per_page: Option<u8>,
    /// Which ones.
    state: Option<State>,
    /// Where.
    place: Place,
    /// Labels.
    labels: Option<Vec<String>>,
    /// Count.
    limit: i32,
    /// A flag.
    draft: Option<bool>,
    /// A weight.
    weight: Option<f64>,
    /// When.
    since: Option<String>,
}

/// Open or closed.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum State {
    /// Only open ones.
    Open,
    /// Only closed ones.
    Closed,
}

/// A place.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Place {
    /// Its id.
    id: u64,
    /// Its parent, if any.
    parent: Option<Box<Place>>,
}

fn texts(value: &Value) -> String {
    value.to_string()
}

#[test]
fn input_schemas_have_no_references_custom_formats_or_null_unions() {
    let raw = serde_json::to_value(schema_for!(ListArgs)).unwrap();
    let before = texts(&raw);
    assert!(before.contains("$ref") && before.contains("uint32") && before.contains("\"null\""));

    let schema = input_for_clients(&raw);
    let text = texts(&schema);
    for unwanted in ["$ref", "$defs", "$schema", "\"format\"", "\"null\"", "\"title\""] {
        assert!(!text.contains(unwanted), "{unwanted} in {schema:#}");
    }
    let p = &schema["properties"];
    assert_eq!(
        p["page"],
        json!({"description": "Page, from 1.", "type": "integer", "minimum": 1}),
        "a u32's own limit binds nothing a caller passes"
    );
    assert_eq!(p["per_page"]["maximum"], 255);
    assert_eq!(p["limit"].get("minimum"), None);
    assert_eq!(p["limit"].get("maximum"), None);
    assert_eq!(p["weight"]["type"], "number");
    assert_eq!(p["labels"]["type"], "array");
    assert_eq!(p["labels"]["items"]["type"], "string");
    // The enum, inlined, is a plain `enum`; the variants' descriptions, which the property's own
    // does not name, are folded into it.
    assert_eq!(
        p["state"],
        json!({
            "type": "string",
            "enum": ["open", "closed"],
            "description": "Which ones. (`open`: Only open ones; `closed`: Only closed ones.)",
        })
    );
    // The nested struct is inlined, and its recursive field is left open instead of looping.
    assert_eq!(p["place"]["properties"]["id"]["minimum"], 0);
    assert_eq!(p["place"]["properties"]["parent"], json!({"description": "Its parent, if any."}));
    assert_eq!(schema["additionalProperties"], false);
    let mut required: Vec<&str> =
        schema["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    required.sort_unstable();
    assert_eq!(required, ["limit", "owner", "place"]);
}

#[test]
fn a_required_nullable_property_becomes_optional() {
    let raw = json!({
        "type": "object",
        "properties": {"a": {"type": ["string", "null"]}, "b": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null}},
        "required": ["a", "b"],
    });
    let schema = input_for_clients(&raw);
    assert_eq!(
        schema,
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}})
    );
}

#[test]
fn output_schemas_lose_descriptions_but_keep_structure_and_nulls() {
    let raw = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Issues",
        "type": "object",
        "properties": {
            "issues": {"type": "array", "description": "The issues.", "items": {"$ref": "#/$defs/Issue"}},
            "next_page": {"type": ["integer", "null"], "format": "uint32", "minimum": 0},
        },
        "required": ["issues"],
        "$defs": {"Issue": {
            "type": "object",
            "description": "One issue.",
            "properties": {
                "number": {"type": "integer", "format": "uint64"},
                "description": {"type": "string", "description": "Its body."},
                "closed_at": {"type": ["string", "null"], "format": "date-time"},
            },
            "required": ["number"],
        }},
    });
    let schema = output_for_clients(&raw);
    assert_eq!(
        schema,
        json!({
            "type": "object",
            "properties": {
                "issues": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "number": {"type": "integer"},
                        "description": {"type": "string"},
                        "closed_at": {"type": ["string", "null"], "format": "date-time"},
                    },
                    "required": ["number"],
                }},
                "next_page": {"type": ["integer", "null"]},
            },
            "required": ["issues"],
        })
    );
}

#[test]
fn a_description_that_names_every_choice_is_not_repeated() {
    let raw = json!({"type": "object", "properties": {"state": {
        "description": "`open` (the default), `closed` or `all`.",
        "oneOf": [
            {"const": "open", "type": "string", "description": "Only open ones."},
            {"const": "closed", "type": "string", "description": "Only closed ones."},
            {"const": "all", "type": "string", "description": "Both."},
        ],
    }}});
    let schema = input_for_clients(&raw);
    assert_eq!(
        schema["properties"]["state"],
        json!({
            "description": "`open` (the default), `closed` or `all`.",
            "type": "string",
            "enum": ["open", "closed", "all"],
        })
    );
    // Alternatives that are not all constants are left alone.
    let mixed = json!({"oneOf": [{"const": "a"}, {"type": "integer"}]});
    assert_eq!(input_for_clients(&mixed), mixed);
    // In an output schema the constants become an enum too, without descriptions.
    assert_eq!(
        output_for_clients(&raw)["properties"]["state"],
        json!({"type": "string", "enum": ["open", "closed", "all"]})
    );
}

#[test]
fn stringified_arguments_are_coerced_per_the_schema() {
    let schema = input_for_clients(&serde_json::to_value(schema_for!(ListArgs)).unwrap());
    let mut args = json!({
        "owner": "1347", "page": "2", "per_page": " 30 ", "draft": "true", "weight": "0.5",
        "labels": "[\"bug\", \"p1\"]", "limit": "-3", "place": "{\"id\": 7}", "since": "2024",
        "state": "open",
    })
    .as_object()
    .unwrap()
    .clone();
    let mut changed = coerce_arguments(&schema, &mut args);
    changed.sort_unstable();
    assert_eq!(changed, ["draft", "labels", "limit", "page", "per_page", "place", "weight"]);
    assert_eq!(
        Value::Object(args),
        json!({
            "owner": "1347", "page": 2, "per_page": 30, "draft": true, "weight": 0.5,
            "labels": ["bug", "p1"], "limit": -3, "place": {"id": 7}, "since": "2024",
            "state": "open",
        })
    );
    // The raw schemars schema (references, null unions) is read the same way.
    let raw = serde_json::to_value(schema_for!(ListArgs)).unwrap();
    let mut args = json!({"page": "5", "state": "closed"}).as_object().unwrap().clone();
    assert_eq!(coerce_arguments(&raw, &mut args), ["page"]);
    assert_eq!(args["page"], 5);
}

#[test]
fn what_does_not_parse_is_left_for_the_tool_to_refuse() {
    let schema = json!({"type": "object", "properties": {
        "n": {"type": "integer"}, "b": {"type": "boolean"}, "a": {"type": "array"}, "x": {}
    }});
    let mut args = json!({"n": "12abc", "b": "yes", "a": "{}", "x": "5", "unknown": "1"})
        .as_object()
        .unwrap()
        .clone();
    let before = args.clone();
    assert!(coerce_arguments(&schema, &mut args).is_empty());
    assert_eq!(args, before);
}

#[test]
fn only_what_projection_can_drop_becomes_optional() {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "issues": {"type": "array", "items": {
                "type": "object",
                "properties": {"number": {"type": "integer"}, "body": {"type": "string"}},
                "required": ["number", "body"],
            }},
            "head": {"anyOf": [
                {"type": "object", "properties": {"sha": {"type": "string"}, "ref": {"type": "string"}}, "required": ["ref", "sha"]},
                {"type": "null"},
            ]},
            "total": {"type": "integer"},
        },
        "required": ["issues", "head", "total", "body"],
    });
    make_optional(&mut schema, &["issues[*].body", "head.sha", "body", "not a [path", "nowhere.x"]);
    assert_eq!(schema["properties"]["issues"]["items"]["required"], json!(["number"]));
    assert_eq!(schema["properties"]["head"]["anyOf"][0]["required"], json!(["ref"]));
    assert_eq!(schema["required"], json!(["issues", "head", "total"]));
}
