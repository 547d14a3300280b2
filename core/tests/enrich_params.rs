//! Reading parameters out of tool schemas the way schemars writes them: `$ref` into `$defs`,
//! `Option` as `anyOf`/`oneOf` with null or `type: [T, "null"]`, enums, arrays of referenced
//! items, nesting past the depth cap; and the schema fingerprint caches key on.

use expect_test::{expect, Expect};
use quiver_core::enrich::params::{inputs, outputs, schema_fingerprint, Param};
use quiver_core::ToolSpec;
use serde_json::{json, Value};

fn spec(input: Value, output: Option<Value>) -> ToolSpec {
    ToolSpec {
        name: "t".into(),
        group: None,
        description: "A tool.".into(),
        input_schema: input,
        output_schema: output,
        sensitive_params: vec![],
    }
}

fn show(params: &[Param]) -> String {
    params
        .iter()
        .map(|p| {
            let items = p.items.map(|t| format!("<{}>", t.name())).unwrap_or_default();
            let req = if p.required { " required" } else { "" };
            format!("{} ({}) {}{items}{req}: {}\n", p.path, p.name, p.ty.name(), p.description)
        })
        .collect()
}

fn check_inputs(input: Value, expect: Expect) {
    expect.assert_eq(&show(&inputs(&spec(input, None))));
}

fn check_outputs(output: Value, expect: Expect) {
    expect.assert_eq(&show(&outputs(&spec(json!({"type": "object"}), Some(output)))));
}

#[test]
fn inputs_unwrap_options_refs_and_enums() {
    // The shape of github.list_issues' arguments as schemars 1 emits them.
    check_inputs(
        json!({
            "$defs": {
                "StateFilter": {
                    "description": "`state` of listings.",
                    "oneOf": [
                        {"const": "open", "type": "string"},
                        {"const": "closed", "type": "string"},
                        {"const": "all", "type": "string"}
                    ]
                },
                "Owner": {"type": "string", "description": "Repository owner."}
            },
            "type": "object",
            "properties": {
                "owner": {"$ref": "#/$defs/Owner"},
                "repo": {"type": "string", "description": "Repository name."},
                "state": {"anyOf": [{"$ref": "#/$defs/StateFilter"}, {"type": "null"}], "description": "`open` (the default)."},
                "page": {"type": ["integer", "null"], "format": "uint32", "description": "Page number."},
                "labels": {"type": ["array", "null"], "items": {"type": "string"}, "description": "Label names."},
                "assignee_ids": {"type": "array", "items": {"$ref": "#/definitions/Id"}},
                "draft": {"oneOf": [{"type": "boolean"}, {"type": "null"}]},
                "weight": {"type": ["integer", "number"]},
                "anything": {}
            },
            "definitions": {"Id": {"type": "integer"}},
            "required": ["owner", "repo"]
        }),
        expect![[r#"
            anything (anything) unknown: 
            assignee_ids (assignee_ids) array<integer>: 
            draft (draft) boolean: 
            labels (labels) array<string>: Label names.
            owner (owner) string required: Repository owner.
            page (page) integer: Page number.
            repo (repo) string required: Repository name.
            state (state) string: `open` (the default).
            weight (weight) number: 
        "#]],
    );
}

#[test]
fn outputs_flatten_items_nested_objects_and_scalar_arrays() {
    check_outputs(
        json!({
            "$defs": {
                "Issue": {
                    "type": "object",
                    "description": "One issue.",
                    "properties": {
                        "number": {"type": "integer", "description": "The issue number."},
                        "labels": {"type": "array", "items": {"type": "string"}, "description": "Label names."},
                        "milestone": {"anyOf": [{"$ref": "#/$defs/Milestone"}, {"type": "null"}]}
                    }
                },
                "Milestone": {"type": "object", "properties": {"title": {"type": ["string", "null"]}}}
            },
            "type": "object",
            "properties": {
                "issues": {"type": "array", "items": {"$ref": "#/$defs/Issue"}},
                "next_page": {"type": ["integer", "null"]},
                "diff_refs": {"type": "object", "properties": {"head_sha": {"type": "string"}}},
                "custom_fields": {"type": "object", "additionalProperties": true}
            }
        }),
        expect![[r#"
            custom_fields (custom_fields) object: 
            diff_refs.head_sha (head_sha) string: 
            issues[].labels[] (labels) string: Label names.
            issues[].milestone.title (title) string: 
            issues[].number (number) integer: The issue number.
            next_page (next_page) integer: 
        "#]],
    );
}

#[test]
fn outputs_stop_descending_at_the_depth_cap() {
    let deep = json!({"type": "object", "properties": {
        "a": {"type": "object", "properties": {
            "b": {"type": "array", "items": {"type": "object", "properties": {
                "c": {"type": "object", "properties": {
                    "d": {"type": "object", "properties": {"e": {"type": "string"}}}}}}}}}}}});
    check_outputs(
        deep,
        expect![[r#"
        a.b[].c.d (d) object: 
    "#]],
    );
}

#[test]
fn self_referencing_schemas_do_not_loop() {
    let looping = json!({"$defs": {"Node": {"$ref": "#/$defs/Node"}},
        "type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}});
    let params = inputs(&spec(looping, None));
    assert_eq!(params.len(), 1);
    assert_eq!(params[0].ty.name(), "unknown");
}

#[test]
fn a_tool_without_output_schema_has_no_outputs() {
    assert!(outputs(&spec(json!({"type": "object"}), None)).is_empty());
    assert!(inputs(&spec(json!({"type": "object"}), None)).is_empty());
}

#[test]
fn fingerprint_ignores_key_order_and_sees_every_change() {
    let a = spec(
        serde_json::from_str(
            r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}"#,
        )
        .unwrap(),
        Some(json!({"type": "object"})),
    );
    let b = spec(
        serde_json::from_str(
            r#"{"properties":{"b":{"type":"integer"},"a":{"type":"string"}},"type":"object"}"#,
        )
        .unwrap(),
        Some(json!({"type": "object"})),
    );
    let fa = schema_fingerprint(&a);
    assert_eq!(fa.len(), 64);
    assert!(fa.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(fa, schema_fingerprint(&b));
    // The description of the tool is not a schema; the output schema is.
    let mut described = a.clone();
    described.description = "Something else.".into();
    assert_eq!(fa, schema_fingerprint(&described));
    let mut without_output = a.clone();
    without_output.output_schema = None;
    assert_ne!(fa, schema_fingerprint(&without_output));
    let mut retyped = a.clone();
    retyped.input_schema["properties"]["b"]["type"] = json!("string");
    assert_ne!(fa, schema_fingerprint(&retyped));
}
