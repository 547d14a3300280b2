//! JSON as services send it and as tools return it: accessors that read a result without
//! failing on a missing or mistyped field, and the serde helpers of lenient wire structs and
//! compact results.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// The items of the list `key` of an object; empty when it is missing or not a list.
///
/// ```
/// use quiver_plugin_sdk::support::json::items;
/// let result = serde_json::json!({"issues": [{"number": 1}, {"number": 2}], "total": 2});
/// assert_eq!(items(&result, "issues").len(), 2);
/// assert!(items(&result, "total").is_empty());
/// assert!(items(&result, "nothing").is_empty());
/// ```
pub fn items<'v>(value: &'v Value, key: &str) -> &'v [Value] {
    value.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

/// The count `key` of an object, when it is a whole number (not negative).
pub fn count(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

/// Reads `null` as the type's default (services send `null` for some empty lists and counts):
/// `#[serde(default, deserialize_with = "nullable")]`.
pub fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Whether a count is zero: `#[serde(skip_serializing_if = "is_zero")]` keeps results short.
pub fn is_zero<N: Default + PartialEq>(n: &N) -> bool {
    *n == N::default()
}

/// Whether a flag is false: `#[serde(skip_serializing_if = "is_false")]` keeps results short.
pub fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accessors_never_fail_on_missing_or_mistyped_fields() {
        let v = json!({"list": [1, 2, 3], "n": 7, "neg": -1, "text": "3", "none": null});
        assert_eq!(items(&v, "list"), [json!(1), json!(2), json!(3)]);
        assert!(items(&v, "n").is_empty());
        assert!(items(&json!([1]), "list").is_empty(), "not an object");
        assert_eq!(count(&v, "n"), Some(7));
        assert_eq!(count(&v, "neg"), None);
        assert_eq!(count(&v, "text"), None);
        assert_eq!(count(&v, "none"), None);
        assert_eq!(count(&v, "missing"), None);
    }

    #[test]
    fn null_reads_as_the_default_and_zeros_and_falses_are_skipped() {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default, deserialize_with = "nullable")]
            list: Vec<u32>,
            #[serde(default, deserialize_with = "nullable")]
            n: u64,
        }
        let w: Wire = serde_json::from_value(json!({"list": null, "n": null})).unwrap();
        assert!(w.list.is_empty());
        assert_eq!(w.n, 0);
        let w: Wire = serde_json::from_value(json!({"list": [4], "n": 2})).unwrap();
        assert_eq!((w.list, w.n), (vec![4], 2));
        assert!(is_zero(&0_usize) && is_zero(&0_u64) && !is_zero(&3_u64));
        assert!(is_false(&false) && !is_false(&true));
    }
}
