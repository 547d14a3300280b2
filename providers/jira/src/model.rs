//! Pieces of Jira's JSON shared by several tools, read leniently: an issue's `fields` stay a JSON
//! map (its keys depend on the site's custom fields) read through small accessors, and paged
//! listings share one envelope.

use quiver_plugin_sdk::prelude::*;
pub(crate) use quiver_plugin_sdk::support::json::{is_false, is_zero};

/// An issue's `fields` object.
pub(crate) type Fields = Map<String, Value>;

/// `fields[key]` as a string.
pub(crate) fn text(fields: &Fields, key: &str) -> Option<String> {
    fields.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The `name` of the object at `fields[key]` (status, priority, issue type, resolution).
pub(crate) fn name(fields: &Fields, key: &str) -> Option<String> {
    fields.get(key).and_then(name_of)
}

/// The `name` of an object.
pub(crate) fn name_of(value: &Value) -> Option<String> {
    value.get("name").and_then(Value::as_str).map(str::to_owned)
}

/// A person as a reader knows them: the display name (Server sends `name` too; Cloud hides it).
pub(crate) fn person(value: &Value) -> Option<String> {
    value
        .get("displayName")
        .or_else(|| value.get("name"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The person at `fields[key]` (assignee, reporter).
pub(crate) fn person_at(fields: &Fields, key: &str) -> Option<String> {
    fields.get(key).and_then(person)
}

/// The names of a list of objects (components, versions), or the strings of a list (labels).
pub(crate) fn names(fields: &Fields, key: &str) -> Vec<String> {
    fields
        .get(key)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned).or_else(|| name_of(i)))
                .collect()
        })
        .unwrap_or_default()
}

/// The status category's key of `fields.status`: `new`, `indeterminate` or `done`.
pub(crate) fn status_category(fields: &Fields) -> Option<String> {
    fields
        .get("status")
        .and_then(|s| s.get("statusCategory"))
        .and_then(|c| c.get("key"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// A paged listing (`startAt`, `maxResults`, `total`, `isLast`, `values`): the agile API and
/// project versions.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WirePage<T> {
    #[serde(default = "Vec::new")]
    pub(crate) values: Vec<T>,
    #[serde(default)]
    pub(crate) start_at: u64,
    #[serde(default)]
    pub(crate) max_results: Option<u64>,
    #[serde(default)]
    pub(crate) total: Option<u64>,
    #[serde(default)]
    pub(crate) is_last: Option<bool>,
}

/// The `startAt` of the next page, or `None` on the last one. Jira says so with `isLast`, or
/// with `total`; without either, a short page is the last.
pub(crate) fn next_start(
    start_at: u64,
    count: usize,
    max_results: Option<u64>,
    total: Option<u64>,
    is_last: Option<bool>,
) -> Option<u64> {
    let next = start_at + count as u64;
    let more = match (is_last, total) {
        (Some(last), _) => !last,
        (None, Some(total)) => next < total,
        (None, None) => count > 0 && max_results.is_none_or(|m| count as u64 >= m),
    };
    (more && count > 0).then_some(next)
}

/// `max_results` within `1..=max`, `default` when unset.
pub(crate) fn page_size(requested: Option<u32>, default: u32, max: u32) -> u32 {
    requested.unwrap_or(default).clamp(1, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_page_follows_is_last_then_total_then_a_full_page() {
        assert_eq!(next_start(0, 50, Some(50), Some(120), Some(false)), Some(50));
        assert_eq!(next_start(100, 20, Some(50), Some(120), Some(true)), None);
        assert_eq!(next_start(0, 50, Some(50), Some(120), None), Some(50));
        assert_eq!(next_start(100, 20, Some(50), Some(120), None), None);
        assert_eq!(next_start(0, 50, Some(50), None, None), Some(50));
        assert_eq!(next_start(0, 7, Some(50), None, None), None);
        assert_eq!(next_start(0, 0, Some(50), None, Some(false)), None, "an empty page ends");
    }
}
