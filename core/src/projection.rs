//! Generic argument projection: values picked out of a previous result by a small JSON path, turned
//! into the arguments of a follow-up call.
//!
//! The path language is the subset of JSONPath that follow-up links need: `$` (the root), `.name`
//! or `["name"]` (a field), `[3]` (an index) and `[*]` (every element). `$.items[*].number` picks
//! the number of every item of a list result.

use serde_json::{Map, Value};

/// At most this many follow-up calls are built from one link, whatever the result holds.
pub const MAX_PROJECTIONS_PER_LINK: usize = 3;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A field of an object: `.name` or `["name"]`.
    Field(String),
    /// An element of an array: `[3]`.
    Index(usize),
    /// Every element of an array, every value of an object: `[*]`.
    Every,
}

/// Why a projection path cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("projection `{path}`: {reason}; write e.g. `$.items[*].number`")]
pub struct PathError {
    /// The path as written.
    pub path: String,
    /// What is wrong at which position.
    pub reason: String,
}

/// Reads a path into its steps (`$` alone is the empty path: the value itself).
pub fn parse(path: &str) -> Result<Vec<Step>, PathError> {
    let err = |reason: String| PathError { path: path.to_owned(), reason };
    let rest = path.trim();
    let mut rest = rest.strip_prefix('$').unwrap_or(rest);
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return Err(err(format!("empty field name before `{after}`")));
            }
            steps.push(Step::Field(after[..end].to_owned()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').ok_or_else(|| err("unclosed `[`".to_owned()))?;
            let inner = after[..end].trim();
            steps.push(if inner == "*" {
                Step::Every
            } else if let Ok(i) = inner.parse::<usize>() {
                Step::Index(i)
            } else if let Some(name) = inner
                .strip_prefix('"')
                .and_then(|s| s.strip_suffix('"'))
                .or_else(|| inner.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
            {
                Step::Field(name.to_owned())
            } else {
                return Err(err(format!("`[{inner}]` is neither an index, `*` nor a quoted name")));
            });
            rest = &after[end + 1..];
        } else if steps.is_empty() {
            // A bare first field (`items[*].number`) reads as `$.items[*].number`.
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            steps.push(Step::Field(rest[..end].to_owned()));
            rest = &rest[end..];
        } else {
            return Err(err(format!("unexpected `{rest}`")));
        }
    }
    Ok(steps)
}

/// Every value `path` selects in `value`, in document order.
pub fn select<'v>(value: &'v Value, path: &str) -> Result<Vec<&'v Value>, PathError> {
    let mut current = vec![value];
    for step in parse(path)? {
        current = current
            .into_iter()
            .flat_map(|v| -> Vec<&Value> {
                match (&step, v) {
                    (Step::Field(name), Value::Object(map)) => map.get(name).into_iter().collect(),
                    (Step::Index(i), Value::Array(items)) => items.get(*i).into_iter().collect(),
                    (Step::Every, Value::Array(items)) => items.iter().collect(),
                    (Step::Every, Value::Object(map)) => map.values().collect(),
                    _ => Vec::new(),
                }
            })
            .collect();
    }
    Ok(current)
}

/// Arguments for up to [`MAX_PROJECTIONS_PER_LINK`] follow-up calls: one object `{arg: value}` per
/// distinct non-null value `path` selects, in order.
pub fn project(value: &Value, path: &str, arg: &str) -> Result<Vec<Map<String, Value>>, PathError> {
    let mut seen: Vec<&Value> = Vec::new();
    for v in select(value, path)? {
        if !v.is_null() && !seen.contains(&v) {
            seen.push(v);
        }
        if seen.len() == MAX_PROJECTIONS_PER_LINK {
            break;
        }
    }
    Ok(seen.into_iter().map(|v| Map::from_iter([(arg.to_owned(), v.clone())])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selects_fields_indices_and_wildcards() {
        let v = json!({"items": [{"number": 1}, {"number": 2}, {"title": "x"}], "total": 3});
        assert_eq!(select(&v, "$.total").unwrap(), vec![&json!(3)]);
        assert_eq!(select(&v, "$.items[1].number").unwrap(), vec![&json!(2)]);
        assert_eq!(select(&v, "$.items[*].number").unwrap(), vec![&json!(1), &json!(2)]);
        assert_eq!(select(&v, "items[*][\"number\"]").unwrap(), vec![&json!(1), &json!(2)]);
        assert_eq!(select(&v, "$.missing[*]").unwrap(), Vec::<&Value>::new());
        assert_eq!(select(&json!([5, 6]), "$[*]").unwrap(), vec![&json!(5), &json!(6)]);
    }

    #[test]
    fn projection_is_capped_deduplicated_and_skips_nulls() {
        let v = json!([{"n": 1}, {"n": 1}, {"n": null}, {"n": 2}, {"n": 3}, {"n": 4}]);
        let args = project(&v, "$[*].n", "number").unwrap();
        let numbers: Vec<_> = args.iter().map(|a| a["number"].clone()).collect();
        assert_eq!(numbers, vec![json!(1), json!(2), json!(3)]);
    }

    #[test]
    fn bad_paths_name_the_problem() {
        let e = select(&json!({}), "$.items[").unwrap_err();
        assert!(e.to_string().contains("unclosed `[`"), "{e}");
        let e = select(&json!({}), "$.items[x]").unwrap_err();
        assert!(e.to_string().contains("`[x]`"), "{e}");
    }
}
