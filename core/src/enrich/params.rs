//! A tool's parameters read out of its JSON schemas: the top-level inputs and the flattened output
//! leaves, with their types and descriptions, so embeddings and dataflow can reason about single
//! parameters instead of whole schemas.
//!
//! Schemas come from schemars 1 on the provider side, so the reader understands what it emits:
//! `$ref` into `$defs` (or the older `definitions`), `Option<T>` as `anyOf`/`oneOf` with a `null`
//! branch or as `type: ["string", "null"]`, enums as `oneOf` of `const`s or `enum`, and arrays of
//! `$ref`'d items. Anything it cannot make sense of becomes [`ParamType::Unknown`] rather than an
//! error: a schema the reader does not follow must not hide a tool.
//!
//! ```
//! use quiver_core::enrich::params::{inputs, outputs, ParamType};
//! use quiver_core::ToolSpec;
//! use serde_json::json;
//!
//! let spec = ToolSpec {
//!     name: "list_issues".into(),
//!     group: None,
//!     description: "List issues".into(),
//!     input_schema: json!({"type": "object", "properties": {
//!         "owner": {"type": "string"},
//!         "page": {"type": ["integer", "null"]}}}),
//!     output_schema: Some(json!({"type": "object", "properties": {
//!         "issues": {"type": "array", "items": {"$ref": "#/$defs/Issue"}}},
//!         "$defs": {"Issue": {"type": "object", "properties": {"number": {"type": "integer"}}}}})),
//!     sensitive_params: vec![],
//! };
//! let ins: Vec<_> = inputs(&spec).into_iter().map(|p| (p.name, p.ty)).collect();
//! assert_eq!(ins, [("owner".to_string(), ParamType::String), ("page".to_string(), ParamType::Integer)]);
//! assert_eq!(outputs(&spec)[0].path, "issues[].number");
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::ToolSpec;

/// Output schemas are flattened at most this many objects deep; deeper structure is reported as
/// one `object` leaf, since a value buried that far rarely feeds another call directly.
pub const MAX_OUTPUT_DEPTH: usize = 4;

/// `$ref` chains longer than this are treated as unknown, so a self-referencing schema cannot
/// loop.
const MAX_REF_HOPS: usize = 16;

/// The JSON type of a parameter, with `Option` and enums unwrapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamType {
    /// A string, including string enums.
    String,
    /// An integer.
    Integer,
    /// Any number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// An array; [`Param::items`] says of what.
    Array,
    /// An object without properties the reader descended into.
    Object,
    /// A schema the reader could not type (no `type`, a union of several types…).
    Unknown,
}

impl ParamType {
    /// The name JSON schema uses.
    pub fn name(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
            ParamType::Array => "array",
            ParamType::Object => "object",
            ParamType::Unknown => "unknown",
        }
    }
}

/// One input parameter or one output leaf of a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Param {
    /// Where it is: the property name for inputs (`owner`), a path for outputs with `.` between
    /// fields and `[]` for the items of an array (`issues[].number`, `labels[]`).
    pub path: String,
    /// The last field name on the path, without `[]`: `number`, `labels`.
    pub name: String,
    /// Its type. An output path ending in `[]` has the type of one item.
    pub ty: ParamType,
    /// For an array, the type of its items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<ParamType>,
    /// The schema's description (its own, else the one of the definition it refers to).
    pub description: String,
    /// For inputs, whether the schema lists it in `required`; always `false` for outputs.
    #[serde(default)]
    pub required: bool,
}

/// The top-level input parameters, sorted by name (whether serde_json keeps key order depends on
/// a feature some other crate may turn on), with `$ref` and `Option` wrappers resolved. Array inputs keep type [`ParamType::Array`] and name their item type.
pub fn inputs(spec: &ToolSpec) -> Vec<Param> {
    let root = &spec.input_schema;
    let schema = Schema::resolve(root, root);
    let required: Vec<&str> = schema
        .node
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.node.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut params: Vec<Param> = props
        .iter()
        .map(|(name, prop)| {
            let prop = Schema::resolve(prop, root);
            let ty = prop.ty();
            let items = (ty == ParamType::Array).then(|| prop.items(root).ty());
            Param {
                path: name.clone(),
                name: name.clone(),
                ty,
                items,
                description: prop.description.to_owned(),
                required: required.contains(&name.as_str()),
            }
        })
        .collect();
    params.sort_by(|a, b| a.name.cmp(&b.name));
    params
}

/// The output leaves: every scalar reachable through object properties and array items, at most
/// [`MAX_OUTPUT_DEPTH`] objects deep; `[]` in the path marks array items. Sorted by path; empty
/// when the tool has no output schema.
pub fn outputs(spec: &ToolSpec) -> Vec<Param> {
    let mut out = Vec::new();
    if let Some(root) = &spec.output_schema {
        let schema = Schema::resolve(root, root);
        flatten(&schema, root, "", 0, &mut out);
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// A stable hex SHA-256 of the input and output schemas in canonical JSON (object keys sorted,
/// no whitespace), so a cache can tell a changed tool from an unchanged one whatever order a
/// provider's serialiser writes keys in.
pub fn schema_fingerprint(spec: &ToolSpec) -> String {
    let mut text = String::from("{\"input\":");
    canonical(&spec.input_schema, &mut text);
    text.push_str(",\"output\":");
    match &spec.output_schema {
        Some(output) => canonical(output, &mut text),
        None => text.push_str("null"),
    }
    text.push('}');
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn flatten(schema: &Schema<'_>, root: &Value, prefix: &str, depth: usize, out: &mut Vec<Param>) {
    let Some(props) = schema.node.get("properties").and_then(Value::as_object) else {
        // An output that is not an object (a bare array or scalar) is one leaf at the root.
        if prefix.is_empty() && schema.ty() != ParamType::Object {
            leaf(schema, root, "", "", depth, out);
        }
        return;
    };
    for (name, prop) in props {
        let prop = Schema::resolve(prop, root);
        let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        leaf(&prop, root, &path, name, depth, out);
    }
}

fn leaf(
    prop: &Schema<'_>,
    root: &Value,
    path: &str,
    name: &str,
    depth: usize,
    out: &mut Vec<Param>,
) {
    let ty = prop.ty();
    let has_props = prop.node.get("properties").and_then(Value::as_object).is_some();
    match ty {
        ParamType::Object if has_props && depth + 1 < MAX_OUTPUT_DEPTH => {
            flatten(prop, root, path, depth + 1, out);
        }
        ParamType::Array => {
            let items = prop.items(root);
            let item_ty = items.ty();
            let item_path = format!("{path}[]");
            let item_has_props = items.node.get("properties").and_then(Value::as_object).is_some();
            if item_ty == ParamType::Object && item_has_props && depth + 1 < MAX_OUTPUT_DEPTH {
                flatten(&items, root, &item_path, depth + 1, out);
            } else {
                let description =
                    if prop.description.is_empty() { items.description } else { prop.description };
                out.push(Param {
                    path: item_path,
                    name: name.to_owned(),
                    ty: item_ty,
                    items: None,
                    description: description.to_owned(),
                    required: false,
                });
            }
        }
        _ => out.push(Param {
            path: path.to_owned(),
            name: name.to_owned(),
            ty,
            items: None,
            description: prop.description.to_owned(),
            required: false,
        }),
    }
}

/// A schema node with references and `Option` wrappers followed, and the first description met
/// on the way (the property's own wins over the definition's).
struct Schema<'a> {
    node: &'a Value,
    description: &'a str,
}

impl<'a> Schema<'a> {
    fn resolve(node: &'a Value, root: &'a Value) -> Self {
        let mut node = node;
        let mut description = "";
        for _ in 0..MAX_REF_HOPS {
            if description.is_empty() {
                description = node.get("description").and_then(Value::as_str).unwrap_or("");
            }
            if let Some(target) = node.get("$ref").and_then(Value::as_str) {
                match lookup(root, target) {
                    Some(next) => {
                        node = next;
                        continue;
                    }
                    None => break,
                }
            }
            // `Option<T>`: one non-null branch of anyOf/oneOf, or a one-element allOf.
            let branches = ["anyOf", "oneOf", "allOf"]
                .iter()
                .find_map(|key| node.get(*key).and_then(Value::as_array));
            if let Some(branches) = branches {
                let non_null: Vec<&Value> = branches
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                    .collect();
                if non_null.len() == 1 && node.get("type").is_none() {
                    node = non_null[0];
                    continue;
                }
            }
            break;
        }
        Schema { node, description }
    }

    fn ty(&self) -> ParamType {
        type_of(self.node)
    }

    fn items(&self, root: &'a Value) -> Schema<'a> {
        match self.node.get("items") {
            Some(items) => Schema::resolve(items, root),
            None => Schema { node: &Value::Null, description: "" },
        }
    }
}

fn type_of(node: &Value) -> ParamType {
    match node.get("type") {
        Some(Value::String(t)) => named(t),
        Some(Value::Array(types)) => {
            let non_null: Vec<&str> =
                types.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect();
            match non_null.as_slice() {
                [one] => named(one),
                // `integer` and `number` together are a number.
                [a, b] if [*a, *b].contains(&"integer") && [*a, *b].contains(&"number") => {
                    ParamType::Number
                }
                _ => ParamType::Unknown,
            }
        }
        _ => {
            if node.get("properties").is_some() {
                return ParamType::Object;
            }
            if let Some(values) = node.get("enum").and_then(Value::as_array) {
                return uniform(values.iter().map(json_type));
            }
            if let Some(value) = node.get("const") {
                return json_type(value);
            }
            // An enum of documented constants: every branch typed alike.
            let branches =
                ["oneOf", "anyOf"].iter().find_map(|key| node.get(*key).and_then(Value::as_array));
            match branches {
                Some(branches) => uniform(
                    branches
                        .iter()
                        .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                        .map(type_of),
                ),
                None => ParamType::Unknown,
            }
        }
    }
}

fn uniform(mut types: impl Iterator<Item = ParamType>) -> ParamType {
    let Some(first) = types.next() else { return ParamType::Unknown };
    if types.all(|t| t == first) {
        first
    } else {
        ParamType::Unknown
    }
}

fn json_type(value: &Value) -> ParamType {
    match value {
        Value::String(_) => ParamType::String,
        Value::Number(n) if n.is_i64() || n.is_u64() => ParamType::Integer,
        Value::Number(_) => ParamType::Number,
        Value::Bool(_) => ParamType::Boolean,
        Value::Array(_) => ParamType::Array,
        Value::Object(_) => ParamType::Object,
        Value::Null => ParamType::Unknown,
    }
}

fn named(t: &str) -> ParamType {
    match t {
        "string" => ParamType::String,
        "integer" => ParamType::Integer,
        "number" => ParamType::Number,
        "boolean" => ParamType::Boolean,
        "array" => ParamType::Array,
        "object" => ParamType::Object,
        _ => ParamType::Unknown,
    }
}

/// Follows a local reference (`#/$defs/Name`, `#/definitions/Name`, any `#/a/b` pointer).
fn lookup<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}
