//! Jira fields by name: the site's field list (`GET /rest/api/{2|3}/field`, fetched once and
//! kept), compact rendering of custom field values for reading, and the conversions that let an
//! agent write `{"Story Points": 5, "Team": "Core"}` instead of `customfield_10016` and
//! `{"value": "Core"}`.

use std::collections::HashMap;
use std::sync::Arc;

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::text::truncate;

use crate::adf;
use crate::client::{Api, Subject};
use crate::{Deployment, Jira};

/// Longest text kept for one custom field value, in bytes.
pub(crate) const FIELD_MAX_BYTES: usize = 2 * 1024;

/// Custom field types whose values mean nothing to a reader (ranking keys, the development panel's
/// JSON summary).
const NOISE: &[&str] = &[
    "com.pyxis.greenhopper.jira:gh-lexo-rank",
    "com.atlassian.jira.plugins.jira-development-integration-plugin:devsummarycf",
    "com.atlassian.jira.plugins.jira-development-integration-plugin:devsummary",
];

/// A field's schema, as `/field` and `editmeta`/transition screens describe it.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Schema {
    /// `string`, `number`, `option`, `array`, `user`, `priority`, `date`…
    #[serde(rename = "type", default)]
    pub(crate) kind: Option<String>,
    /// The element type of an `array`.
    #[serde(default)]
    pub(crate) items: Option<String>,
    /// The custom field type key, e.g. `com.atlassian.jira.plugin.system.customfieldtypes:select`.
    #[serde(default)]
    pub(crate) custom: Option<String>,
}

/// One field of the site.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct FieldInfo {
    /// `summary`, `customfield_10016`.
    pub(crate) id: String,
    /// `Summary`, `Story Points`.
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) schema: Option<Schema>,
}

impl FieldInfo {
    fn kind(&self) -> &str {
        self.schema.as_ref().and_then(|s| s.kind.as_deref()).unwrap_or("")
    }

    fn items(&self) -> &str {
        self.schema.as_ref().and_then(|s| s.items.as_deref()).unwrap_or("")
    }

    fn custom_type(&self) -> &str {
        self.schema.as_ref().and_then(|s| s.custom.as_deref()).unwrap_or("")
    }

    /// Whether values of this field are noise to a reader.
    pub(crate) fn is_noise(&self) -> bool {
        NOISE.contains(&self.custom_type())
    }
}

/// The site's fields, by id and by name.
#[derive(Debug, Default)]
pub(crate) struct FieldMap {
    fields: Vec<FieldInfo>,
    by_id: HashMap<String, usize>,
}

impl FieldMap {
    /// The map of a `/field` answer.
    pub(crate) fn new(fields: Vec<FieldInfo>) -> Self {
        let by_id = fields.iter().enumerate().map(|(i, f)| (f.id.clone(), i)).collect();
        Self { fields, by_id }
    }

    /// The field with this id.
    pub(crate) fn get(&self, id: &str) -> Option<&FieldInfo> {
        self.by_id.get(id).map(|&i| &self.fields[i])
    }

    /// The field an agent means by `name_or_id`: an id, else a name (case-insensitive). Several
    /// fields may share a name; then the agent has to pick an id.
    pub(crate) fn resolve(&self, name_or_id: &str) -> Result<&FieldInfo, ToolError> {
        let wanted = name_or_id.trim();
        if let Some(field) = self.get(wanted) {
            return Ok(field);
        }
        let named: Vec<&FieldInfo> =
            self.fields.iter().filter(|f| f.name.eq_ignore_ascii_case(wanted)).collect();
        match named.as_slice() {
            [one] => Ok(one),
            [] => {
                let mut close: Vec<&str> = self
                    .fields
                    .iter()
                    .filter(|f| {
                        let name = f.name.to_ascii_lowercase();
                        let wanted = wanted.to_ascii_lowercase();
                        !wanted.is_empty() && (name.contains(&wanted) || wanted.contains(&name))
                    })
                    .map(|f| f.name.as_str())
                    .take(5)
                    .collect();
                close.dedup();
                let hint = if close.is_empty() {
                    String::new()
                } else {
                    format!("; similar names: {}", close.join(", "))
                };
                Err(ToolError::invalid_arguments(format!(
                    "jira has no field named `{wanted}` (field names are the ones shown on the \
                     issue screen, e.g. `Story Points`, or ids such as `customfield_10016`){hint}"
                )))
            }
            many => Err(ToolError::invalid_arguments(format!(
                "several jira fields are named `{wanted}`: {}; pass the id instead",
                many.iter().map(|f| f.id.as_str()).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

impl Jira {
    /// The site's field map, fetched on first use and kept for the provider's life (fields are
    /// added rarely; a new one is picked up on restart).
    pub(crate) async fn field_map(&self, ctx: &ToolContext) -> Result<Arc<FieldMap>, ToolError> {
        if let Some(map) = self.fields.lock().ok().and_then(|m| m.clone()) {
            return Ok(map);
        }
        let subject = Subject::other("the field list", "jira has no field list at /field");
        let fields: Vec<FieldInfo> =
            self.client.get_json(Api::Core, "/field", &subject, ctx).await?;
        let map = Arc::new(FieldMap::new(fields));
        if let Ok(mut slot) = self.fields.lock() {
            *slot = Some(map.clone());
        }
        Ok(map)
    }

    /// The field map if it was already fetched: for error messages, which never fetch.
    pub(crate) fn known_fields(&self) -> Option<Arc<FieldMap>> {
        self.fields.lock().ok().and_then(|m| m.clone())
    }
}

/// A field value as a reader needs it: users as display names, options as their values, sprints
/// as `{id, name, state}`, rich text as plain text, empty values as `None`.
pub(crate) fn compact(value: &Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::Bool(_) | Value::Number(_) => Some(value.clone()),
        Value::String(s) => {
            let text = s.trim();
            (!text.is_empty() && text != "{}").then(|| json!(truncate(text, FIELD_MAX_BYTES).0))
        }
        Value::Array(items) => {
            let kept: Vec<Value> = items.iter().filter_map(compact).collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        Value::Object(o) => {
            if o.get("type").and_then(Value::as_str) == Some("doc") {
                return adf::text_of(value).map(|t| json!(truncate(&t, FIELD_MAX_BYTES).0));
            }
            // A sprint: its id is what `search_issues` (`sprint = 12`) and `list_sprints` need.
            if o.contains_key("state")
                && (o.contains_key("boardId") || o.contains_key("originBoardId"))
            {
                return Some(
                    json!({"id": o.get("id"), "name": o.get("name"), "state": o.get("state")}),
                );
            }
            if let Some(name) = o.get("displayName").and_then(Value::as_str) {
                return Some(json!(name));
            }
            if let Some(v) = o.get("value").filter(|v| v.is_string() || v.is_number()) {
                // A cascading select: `Parent / Child`.
                let child = o.get("child").and_then(|c| c.get("value")).and_then(Value::as_str);
                return Some(match (v.as_str(), child) {
                    (Some(v), Some(c)) => json!(format!("{v} / {c}")),
                    _ => v.clone(),
                });
            }
            for key in ["name", "key", "title"] {
                if let Some(v) = o.get(key).and_then(Value::as_str) {
                    return Some(json!(v));
                }
            }
            let kept: serde_json::Map<String, Value> = o
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "self" | "avatarUrls" | "iconUrl" | "id"))
                .filter_map(|(k, v)| compact(v).map(|v| (k.clone(), v)))
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
    }
}

/// A user reference to write: `accountId` on Cloud, the username on Server/Data Center; an empty
/// string or `none` unassigns.
pub(crate) fn user_ref(user: &str, deployment: Deployment) -> Value {
    let user = user.trim();
    if user.is_empty() || user.eq_ignore_ascii_case("none") {
        return Value::Null;
    }
    match deployment {
        Deployment::Cloud => json!({ "accountId": user }),
        Deployment::Server => json!({ "name": user }),
    }
}

/// A value for `field` in the shape Jira's edit and create operations take, from the plainer
/// shape an agent writes: `"High"` for a select becomes `{"value": "High"}`, `"1.2"` for fix
/// versions `[{"name": "1.2"}]`, a user id a user reference, text for a Cloud rich-text field an
/// ADF document. Values already in Jira's shape pass unchanged.
pub(crate) fn to_jira(field: &FieldInfo, value: Value, deployment: Deployment) -> Value {
    let named = |s: &str, key: &str| json!({ key: s });
    let element = |item: Value, kind: &str| -> Value {
        match (kind, &item) {
            ("option", Value::String(s)) => named(s, "value"),
            (
                "version" | "component" | "priority" | "resolution" | "issuetype",
                Value::String(s),
            ) => named(s, "name"),
            ("user", Value::String(s)) => user_ref(s, deployment),
            ("group", Value::String(s)) => named(s, "name"),
            _ => item,
        }
    };
    if field.id == "parent" {
        if let Value::String(s) = &value {
            return named(s, "key");
        }
    }
    let rich_text = matches!(field.id.as_str(), "description" | "environment")
        || field.custom_type().ends_with(":textarea");
    match (field.kind(), value) {
        ("array", Value::Array(items)) => {
            let kind = field.items().to_owned();
            Value::Array(items.into_iter().map(|i| element(i, &kind)).collect())
        }
        ("array", single @ (Value::String(_) | Value::Number(_))) => {
            Value::Array(vec![element(single, field.items())])
        }
        ("number", Value::String(s)) => match s.trim().parse::<f64>() {
            Ok(n) => json!(n),
            Err(_) => Value::String(s),
        },
        ("string", Value::String(s)) if rich_text && deployment == Deployment::Cloud => {
            adf::from_text(&s)
        }
        ("project", Value::String(s)) => named(&s, "key"),
        (kind, value) => element(value, kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(id: &str, name: &str, schema: Value) -> FieldInfo {
        serde_json::from_value(json!({"id": id, "name": name, "custom": id.starts_with("customfield_"), "schema": schema})).unwrap()
    }

    #[test]
    fn values_are_compacted_for_reading() {
        assert_eq!(compact(&json!(null)), None);
        assert_eq!(compact(&json!("{}")), None, "the development panel's empty summary");
        assert_eq!(
            compact(&json!({"self": "x", "value": "High", "id": "10020"})),
            Some(json!("High"))
        );
        assert_eq!(
            compact(&json!({"value": "EMEA", "child": {"value": "Berlin"}})),
            Some(json!("EMEA / Berlin"))
        );
        assert_eq!(
            compact(
                &json!([{"id": 1, "name": "ED Sprint 1", "state": "closed", "boardId": 1, "goal": ""}])
            ),
            Some(json!([{"id": 1, "name": "ED Sprint 1", "state": "closed"}]))
        );
        assert_eq!(
            compact(&json!({"accountId": "5b10", "displayName": "Mia Krystof", "avatarUrls": {}})),
            Some(json!("Mia Krystof"))
        );
        assert_eq!(compact(&json!([])), None);
    }

    #[test]
    fn names_resolve_to_fields_and_ambiguity_is_an_error() {
        let map = FieldMap::new(vec![
            field("summary", "Summary", json!({"type": "string", "system": "summary"})),
            field("customfield_10016", "Story Points", json!({"type": "number"})),
            field("customfield_10030", "Team", json!({"type": "option"})),
            field("customfield_10031", "Team", json!({"type": "string"})),
        ]);
        assert_eq!(map.resolve("story points").unwrap().id, "customfield_10016");
        assert_eq!(map.resolve("customfield_10031").unwrap().name, "Team");
        let err = map.resolve("Team").unwrap_err();
        assert!(err.message.contains("customfield_10030, customfield_10031"), "{}", err.message);
        let err = map.resolve("Story").unwrap_err();
        assert!(err.message.contains("similar names: Story Points"), "{}", err.message);
    }

    #[test]
    fn plain_values_become_jira_shapes() {
        let select =
            field("customfield_1", "Team", json!({"type": "option", "custom": "x:select"}));
        assert_eq!(to_jira(&select, json!("Core"), Deployment::Cloud), json!({"value": "Core"}));
        let versions =
            field("fixVersions", "Fix versions", json!({"type": "array", "items": "version"}));
        assert_eq!(to_jira(&versions, json!("1.2"), Deployment::Cloud), json!([{"name": "1.2"}]));
        let user = field("customfield_2", "Reviewer", json!({"type": "user"}));
        assert_eq!(to_jira(&user, json!("5b10"), Deployment::Cloud), json!({"accountId": "5b10"}));
        assert_eq!(to_jira(&user, json!("jdoe"), Deployment::Server), json!({"name": "jdoe"}));
        let points = field("customfield_3", "Story Points", json!({"type": "number"}));
        assert_eq!(to_jira(&points, json!("5"), Deployment::Cloud), json!(5.0));
        let notes = field(
            "customfield_4",
            "Notes",
            json!({"type": "string", "custom": "com.atlassian.jira.plugin.system.customfieldtypes:textarea"}),
        );
        assert_eq!(to_jira(&notes, json!("hi"), Deployment::Cloud)["type"], "doc");
        assert_eq!(to_jira(&notes, json!("hi"), Deployment::Server), json!("hi"));
        assert_eq!(
            to_jira(&select, json!({"id": "10001"}), Deployment::Cloud),
            json!({"id": "10001"}),
            "Jira's own shape passes"
        );
    }
}
