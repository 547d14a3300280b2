//! Tool schemas as every MCP client accepts them, and arguments as the tools expect them.
//!
//! Providers describe their inputs and outputs with schemars, which writes JSON Schema 2020-12 with
//! its own extensions: `$ref`s into `$defs`, custom `format`s for Rust's number types (`uint32`,
//! `double`…), `["string", "null"]` unions and `anyOf [X, {type: null}]` for `Option`s. Strict
//! function-calling APIs reject references and null unions, and the TypeScript SDK warns about each
//! unknown format on every `tools/list`. So, for clients:
//!
//! - [`input_for_clients`]: references inlined, `$defs`/`$schema`/the root `title` gone, number
//!   formats turned into `minimum`/`maximum` bounds (other unknown formats dropped, standard ones
//!   kept), null unions made plain optional (the property leaves `required`), `default: null` gone,
//!   a choice written as `oneOf` constants (schemars' documented enum variants) made an `enum`, the
//!   variants' descriptions folded into the property's when it does not already name every value.
//!   Descriptions stay: they are what the model reads.
//! - [`output_for_clients`]: references inlined, `description`, `title`, `$schema` and unknown
//!   formats gone, numeric bounds gone (they are the server's own guarantee: a client checking
//!   `structuredContent` learns nothing from `minimum: 0`), constants made an `enum`. An output
//!   schema is for checking `structuredContent`; the model reads the result itself, whose field
//!   names say what the descriptions said. Null unions stay: a result's field may be null, and the
//!   schema must say so.
//! - [`coerce_arguments`]: at the boundary, a string argument where the schema wants an integer,
//!   a number, a boolean, an array or an object is parsed into one (the MCP Inspector's CLI sends
//!   every argument as a string). Anything else is left for the tool to refuse.
//!
//! A reference to itself (a recursive type) is inlined once and then left as `{}` — any value —
//! rather than growing without end. Pure: no IO.

use serde_json::{Map, Value};

/// The `format`s of JSON Schema 2020-12 (and the OpenAPI ones clients know); anything else is a
/// schemars extension.
const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Keywords whose value is one subschema.
const SCHEMA_KEYWORDS: [&str; 9] = [
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
];
/// Keywords whose value is a list of subschemas.
const SCHEMA_LIST_KEYWORDS: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value maps names to subschemas.
const SCHEMA_MAP_KEYWORDS: [&str; 3] = ["properties", "patternProperties", "dependentSchemas"];

/// An input schema for clients; see the [module docs](self).
pub fn input_for_clients(schema: &Value) -> Value {
    let mut out = inline_references(schema);
    if let Some(map) = out.as_object_mut() {
        map.remove("title");
    }
    clean_input(&mut out);
    // After the null unions are gone, so that an optional enum's choices sit beside the
    // property's own description.
    walk(&mut out, &mut |map| constants_to_enum(map, true));
    out
}

/// Cleans an input schema in place, children first; returns whether it admitted null.
fn clean_input(schema: &mut Value) -> bool {
    let Some(map) = schema.as_object_mut() else { return false };
    let mut nullable_properties = Vec::new();
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if clean_input(property) {
                nullable_properties.push(name.clone());
            }
        }
    }
    for_each_subschema_but_properties(map, &mut |sub| {
        clean_input(sub);
    });
    map.remove("$schema");
    numeric_format_to_bounds(map);
    if map.get("default") == Some(&Value::Null) {
        map.remove("default");
    }
    // Optional is how a client leaves a nullable property out.
    if let Some(Value::Array(required)) = map.get_mut("required") {
        required
            .retain(|r| !r.as_str().is_some_and(|r| nullable_properties.iter().any(|n| n == r)));
        if required.is_empty() {
            map.remove("required");
        }
    }
    strip_null(map)
}

/// An output schema for clients; see the [module docs](self).
pub fn output_for_clients(schema: &Value) -> Value {
    let mut out = inline_references(schema);
    walk(&mut out, &mut |map| {
        map.remove("$schema");
        if map.get("description").is_some_and(Value::is_string) {
            map.remove("description");
        }
        if map.get("title").is_some_and(Value::is_string) {
            map.remove("title");
        }
        if map.get("format").and_then(Value::as_str).is_some_and(|f| !is_standard_format(f)) {
            map.remove("format");
        }
        if map.get("type").is_some_and(|t| t == "integer" || t == "number" || t.is_array()) {
            for bound in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
                map.remove(bound);
            }
        }
        constants_to_enum(map, false);
    });
    out
}

/// `oneOf`/`anyOf` whose every alternative is one constant (how schemars writes an enum whose
/// variants carry doc comments) as a plain `enum`, which every client and strict function-calling
/// API takes. With `keep_descriptions`, the variants' descriptions are appended to the schema's
/// own unless it already names every value.
fn constants_to_enum(map: &mut Map<String, Value>, keep_descriptions: bool) {
    for key in ["oneOf", "anyOf"] {
        let Some(Value::Array(alternatives)) = map.get(key) else { continue };
        let is_constant = |a: &Value| {
            a.as_object().is_some_and(|a| {
                a.contains_key("const")
                    && a.keys()
                        .all(|k| matches!(k.as_str(), "const" | "description" | "type" | "title"))
            })
        };
        if alternatives.is_empty() || !alternatives.iter().all(is_constant) {
            continue;
        }
        let values: Vec<Value> = alternatives.iter().map(|a| a["const"].clone()).collect();
        let described: Vec<(String, String)> = alternatives
            .iter()
            .filter_map(|a| {
                let text = a.get("description")?.as_str()?;
                Some((value_text(&a["const"]), text.trim_end_matches('.').to_string()))
            })
            .collect();
        let types: Vec<&str> = values.iter().map(json_type).collect();
        map.remove(key);
        if !map.contains_key("type") && types.windows(2).all(|w| w[0] == w[1]) {
            map.insert("type".into(), Value::from(types[0]));
        }
        if keep_descriptions && !described.is_empty() {
            let own = map.get("description").and_then(Value::as_str).unwrap_or("");
            let names_all = values.iter().all(|v| own.contains(&format!("`{}`", value_text(v))));
            if !names_all {
                let choices: Vec<String> =
                    described.iter().map(|(value, text)| format!("`{value}`: {text}")).collect();
                let joined = choices.join("; ");
                let text = if own.is_empty() {
                    format!("{joined}.")
                } else {
                    format!("{own} ({joined}.)")
                };
                map.insert("description".into(), Value::from(text));
            }
        }
        map.insert("enum".into(), Value::Array(values));
        return;
    }
}

/// A constant as a description names it: strings bare, anything else as JSON.
fn value_text(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_string)
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Takes the fields at `paths` (the paths of field groups left out by default, in the syntax of
/// [`crate::projection`]: `body`, `head.sha`, `issues[*].body`) out of the `required` lists of an
/// output schema, since response projection may delete them; everything else the schema promises
/// stays promised. A path that does not parse or that the schema does not describe changes
/// nothing.
pub fn make_optional(schema: &mut Value, paths: &[&str]) {
    for path in paths {
        if let Ok(steps) = crate::projection::parse(path) {
            unrequire(schema, &steps);
        }
    }
}

fn unrequire(schema: &mut Value, steps: &[crate::projection::Step]) {
    use crate::projection::Step;
    let Some(map) = schema.as_object_mut() else { return };
    // A nullable object keeps its shape in one of its alternatives.
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(alternatives)) = map.get_mut(key) {
            alternatives.iter_mut().for_each(|a| unrequire(a, steps));
        }
    }
    let Some((first, rest)) = steps.split_first() else { return };
    match first {
        Step::Field(name) if rest.is_empty() => {
            if let Some(Value::Array(required)) = map.get_mut("required") {
                required.retain(|r| r.as_str() != Some(name.as_str()));
                if required.is_empty() {
                    map.remove("required");
                }
            }
        }
        Step::Field(name) => {
            if let Some(property) = map.get_mut("properties").and_then(|p| p.get_mut(name.as_str()))
            {
                unrequire(property, rest);
            }
        }
        Step::Every | Step::Index(_) => {
            // Elements of an array, or values of a map-like object.
            if let Some(items) = map.get_mut("items") {
                unrequire(items, rest);
            } else if let Some(values) = map.get_mut("additionalProperties") {
                unrequire(values, rest);
            }
        }
    }
}

fn is_standard_format(format: &str) -> bool {
    STANDARD_FORMATS.contains(&format)
}

/// Calls `visit` on every schema object of `schema`, children first.
fn walk(schema: &mut Value, visit: &mut impl FnMut(&mut Map<String, Value>)) {
    let Some(map) = schema.as_object_mut() else { return };
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        properties.values_mut().for_each(|s| walk(s, visit));
    }
    for_each_subschema_but_properties(map, &mut |sub| walk(sub, visit));
    visit(map);
}

/// Calls `f` on each direct subschema of a schema object except those under `properties`.
fn for_each_subschema_but_properties(map: &mut Map<String, Value>, f: &mut impl FnMut(&mut Value)) {
    for key in SCHEMA_KEYWORDS {
        match map.get_mut(key) {
            // `items: [a, b]` (draft 7 tuples) is a list of subschemas.
            Some(Value::Array(list)) => list.iter_mut().for_each(&mut *f),
            Some(other) => f(other),
            None => {}
        }
    }
    for key in SCHEMA_LIST_KEYWORDS {
        if let Some(Value::Array(list)) = map.get_mut(key) {
            list.iter_mut().for_each(&mut *f);
        }
    }
    for key in SCHEMA_MAP_KEYWORDS {
        if key == "properties" {
            continue;
        }
        if let Some(Value::Object(named)) = map.get_mut(key) {
            named.values_mut().for_each(&mut *f);
        }
    }
}

/// `schema` with every local reference (`#/$defs/X`, `#/definitions/X`, any `#/…` pointer)
/// replaced by what it points to, siblings of the `$ref` kept (they win), and the definitions
/// removed. A reference to a definition being inlined (recursion) becomes `{}`; one that points
/// nowhere stays as it is.
fn inline_references(schema: &Value) -> Value {
    let mut out = expand(schema, schema, &mut Vec::new());
    if let Some(map) = out.as_object_mut() {
        map.remove("$defs");
        map.remove("definitions");
    }
    out
}

fn expand(node: &Value, root: &Value, stack: &mut Vec<String>) -> Value {
    match node {
        Value::Object(map) => {
            if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                let target = reference.strip_prefix('#').and_then(|pointer| root.pointer(pointer));
                if let Some(target) = target {
                    if stack.iter().any(|r| r == reference) {
                        return Value::Object(Map::new());
                    }
                    stack.push(reference.to_owned());
                    let mut inlined = expand(target, root, stack);
                    stack.pop();
                    if let Value::Object(inlined_map) = &mut inlined {
                        for (key, value) in map {
                            if key != "$ref" {
                                inlined_map.insert(key.clone(), expand(value, root, stack));
                            }
                        }
                    }
                    return inlined;
                }
            }
            let mut out = Map::with_capacity(map.len());
            for (key, value) in map {
                // Definitions are only reached through references.
                if key == "$defs" || key == "definitions" {
                    continue;
                }
                out.insert(key.clone(), expand(value, root, stack));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| expand(v, root, stack)).collect()),
        other => other.clone(),
    }
}

/// `format: uint32` and its kin as the bounds they mean; other non-standard formats dropped.
fn numeric_format_to_bounds(map: &mut Map<String, Value>) {
    let Some(format) = map.get("format").and_then(Value::as_str) else { return };
    if is_standard_format(format) {
        return;
    }
    let bounds: Option<(i64, Option<u64>)> = match format {
        "uint8" => Some((0, Some(u64::from(u8::MAX)))),
        "uint16" => Some((0, Some(u64::from(u16::MAX)))),
        // The limits of 32-bit and wider types bind nothing a caller passes (a page, a count, an
        // id); a value past them still gets the tool's own error. Only the sign is worth saying.
        "uint32" | "uint" | "uint64" | "uint128" | "usize" => Some((0, None)),
        "int8" => Some((i64::from(i8::MIN), Some(i8::MAX as u64))),
        "int16" => Some((i64::from(i16::MIN), Some(i16::MAX as u64))),
        _ => None,
    };
    map.remove("format");
    if let Some((min, max)) = bounds {
        // A bound the schema already states is at least as tight (schemars writes `minimum: 0`
        // for unsigned types; a provider's `range` is tighter still).
        map.entry("minimum").or_insert(Value::from(min));
        if let Some(max) = max {
            map.entry("maximum").or_insert(Value::from(max));
        }
    }
}

/// Whether `schema` only admits null: `{type: null}`, `{const: null}` or `{enum: [null]}`.
fn is_null_schema(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else { return false };
    map.get("type") == Some(&Value::from("null"))
        || map.get("const") == Some(&Value::Null)
        || map.get("enum").and_then(Value::as_array).is_some_and(|e| e == &[Value::Null])
}

/// A nullable schema made non-null; returns whether it was nullable. Handles `type` lists,
/// `anyOf`/`oneOf` with a null alternative (a lone remaining alternative is merged into the
/// parent, the parent's keywords winning), and `null` among `enum` values.
fn strip_null(map: &mut Map<String, Value>) -> bool {
    let mut nullable = false;
    if let Some(Value::Array(types)) = map.get_mut("type") {
        let before = types.len();
        types.retain(|t| t != "null");
        nullable |= types.len() != before;
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(alternatives)) = map.get_mut(key) else { continue };
        let before = alternatives.len();
        alternatives.retain(|a| !is_null_schema(a));
        if alternatives.len() == before {
            continue;
        }
        nullable = true;
        if alternatives.len() == 1 {
            let only = alternatives.remove(0);
            map.remove(key);
            if let Value::Object(only) = only {
                for (k, v) in only {
                    map.entry(k).or_insert(v);
                }
            }
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        let before = values.len();
        values.retain(|v| !v.is_null());
        nullable |= values.len() != before;
    }
    nullable
}

/// Coerces string arguments into what `schema` (an input schema, after [`input_for_clients`] or
/// not) says each property is: integers, numbers, booleans, arrays and objects. A string that does
/// not parse, or a property the schema also allows to be a string, is left as it is. Returns the
/// names of the arguments changed.
pub fn coerce_arguments(schema: &Value, arguments: &mut Map<String, Value>) -> Vec<String> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut changed = Vec::new();
    for (name, value) in arguments.iter_mut() {
        let Value::String(text) = value else { continue };
        let Some(property) = properties.get(name) else { continue };
        let types = property_types(property, schema);
        if types.is_empty() || types.iter().any(|t| t == "string") {
            continue;
        }
        if let Some(parsed) = parse_as(text.trim(), &types) {
            *value = parsed;
            changed.push(name.clone());
        }
    }
    changed
}

/// The JSON types a property admits: its `type` (one or a list), or its `anyOf`/`oneOf`
/// alternatives' types, following a local `$ref`; empty when the schema does not say.
fn property_types(property: &Value, root: &Value) -> Vec<String> {
    fn collect(schema: &Value, root: &Value, depth: usize, out: &mut Vec<String>) {
        if depth > 8 {
            return;
        }
        let Some(map) = schema.as_object() else { return };
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            if let Some(target) = reference.strip_prefix('#').and_then(|p| root.pointer(p)) {
                collect(target, root, depth + 1, out);
            }
        }
        match map.get("type") {
            Some(Value::String(t)) => out.push(t.clone()),
            Some(Value::Array(ts)) => {
                out.extend(ts.iter().filter_map(Value::as_str).map(str::to_owned))
            }
            _ => {}
        }
        if let Some(values) = map.get("enum").and_then(Value::as_array) {
            // An enum of strings admits strings, whatever `type` says or does not.
            if values.iter().any(Value::is_string) {
                out.push("string".into());
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(alternatives) = map.get(key).and_then(Value::as_array) {
                for alternative in alternatives {
                    collect(alternative, root, depth + 1, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    collect(property, root, 0, &mut out);
    out
}

/// `text` as the first of `types` it parses as.
fn parse_as(text: &str, types: &[String]) -> Option<Value> {
    for t in types {
        let parsed =
            match t.as_str() {
                "integer" => text
                    .parse::<i64>()
                    .map(Value::from)
                    .ok()
                    .or_else(|| text.parse::<u64>().ok().map(Value::from)),
                "number" => text.parse::<i64>().map(Value::from).ok().or_else(|| {
                    text.parse::<f64>().ok().filter(|f| f.is_finite()).map(Value::from)
                }),
                "boolean" => match text {
                    "true" => Some(Value::Bool(true)),
                    "false" => Some(Value::Bool(false)),
                    _ => None,
                },
                "array" => serde_json::from_str::<Value>(text).ok().filter(Value::is_array),
                "object" => serde_json::from_str::<Value>(text).ok().filter(Value::is_object),
                "null" => (text == "null").then_some(Value::Null),
                _ => None,
            };
        if parsed.is_some() {
            return parsed;
        }
    }
    None
}

#[cfg(test)]
mod tests;
