//! Pieces of GitLab's JSON shared by several tools, read leniently: each wire struct names only
//! the fields the provider keeps, every optional field has a default, and anything else GitLab
//! sends (avatars, `_links`, `time_stats`, emoji counts) is skipped while parsing.

use quiver_plugin_sdk::prelude::*;
use serde::Deserializer;

pub(crate) use quiver_plugin_sdk::support::json::{is_false, is_zero, nullable};
pub(crate) use quiver_plugin_sdk::support::text::{truncate, truncate_opt};

/// Longest issue or merge request description returned, in bytes.
pub(crate) const BODY_MAX_BYTES: usize = 32 * 1024;
/// Longest note returned, in bytes.
pub(crate) const NOTE_MAX_BYTES: usize = 8 * 1024;

/// A user as GitLab nests it (`author`, `assignees[]`, `merged_by`…); only the username is kept.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WireUser {
    pub(crate) username: String,
    /// The user's number, which the membership lookup of lockdown takes.
    #[serde(default)]
    pub(crate) id: Option<u64>,
}

/// Anything with a title (a milestone).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WireTitle {
    pub(crate) title: String,
}

/// `references`: `{"short": "#47", "relative": "#47", "full": "acme/api#47"}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct WireReferences {
    #[serde(default)]
    pub(crate) full: Option<String>,
}

impl WireReferences {
    /// The project path of a full reference: `acme/api` of `acme/api#47` or `acme/api!19`.
    pub(crate) fn project(&self) -> Option<String> {
        let full = self.full.as_deref()?;
        let (project, _) = full.rsplit_once(['#', '!'])?;
        (!project.is_empty()).then(|| project.to_owned())
    }
}

/// The username of an optional user.
pub(crate) fn username(user: Option<WireUser>) -> Option<String> {
    user.map(|u| u.username)
}

/// The usernames of a list of users.
pub(crate) fn usernames(users: Vec<WireUser>) -> Vec<String> {
    users.into_iter().map(|u| u.username).collect()
}

/// Reads a project given as a string (`"acme/api"`, `"42"`) or a number (`42`).
pub(crate) fn project_arg<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Project {
        Text(String),
        Id(u64),
    }
    match Project::deserialize(deserializer) {
        Ok(Project::Text(s)) => Ok(s),
        Ok(Project::Id(n)) => Ok(n.to_string()),
        Err(_) => Err(serde::de::Error::custom(
            "`project` must be a project id (42) or a full path (\"group/project\")",
        )),
    }
}

/// An optional project, as [`project_arg`] reads it.
pub(crate) fn project_arg_opt<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    struct Wrapper(#[serde(deserialize_with = "project_arg")] String);
    Ok(Option::<Wrapper>::deserialize(deserializer)?.map(|Wrapper(s)| s))
}

/// `state_event` of an issue or merge request update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StateEvent {
    /// Close it.
    Close,
    /// Reopen it.
    Reopen,
}

impl StateEvent {
    /// The value GitLab wants.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            StateEvent::Close => "close",
            StateEvent::Reopen => "reopen",
        }
    }
}

/// Adds the fields that have a value to a request body.
pub(crate) fn insert_present(body: &mut Map<String, Value>, fields: Vec<(&str, Option<Value>)>) {
    for (key, value) in fields {
        if let Some(value) = value {
            body.insert(key.to_owned(), value);
        }
    }
}

/// The body of an update: the fields given, or an error naming every field that could have
/// been, when none was (a PUT with an empty body would change nothing and say nothing).
pub(crate) fn update_body(
    fields: Vec<(&str, Option<Value>)>,
) -> Result<Map<String, Value>, ToolError> {
    let names: Vec<String> = fields.iter().map(|(key, _)| format!("`{key}`")).collect();
    let mut body = Map::new();
    insert_present(&mut body, fields);
    if body.is_empty() {
        return Err(ToolError::invalid_arguments(format!(
            "nothing to update: give at least one of {}",
            names.join(", ")
        )));
    }
    Ok(body)
}

/// Labels as a body field wants them, replacing the present ones: `bug,ui` (`""` for none).
pub(crate) fn labels_value(labels: Option<Vec<String>>) -> Option<Value> {
    labels.map(|l| Value::from(l.join(",")))
}

/// Labels as GitLab's query parameter wants them: `bug,ui`.
pub(crate) fn label_list(labels: Option<Vec<String>>) -> Option<String> {
    labels.filter(|l| !l.is_empty()).map(|l| l.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_their_project() {
        let r = |full: &str| WireReferences { full: Some(full.into()) }.project();
        assert_eq!(r("acme/backend/api#47").as_deref(), Some("acme/backend/api"));
        assert_eq!(r("acme/api!19").as_deref(), Some("acme/api"));
        assert_eq!(r("#47"), None);
        assert_eq!(WireReferences::default().project(), None);
    }

    #[test]
    fn projects_may_be_given_as_numbers() {
        #[derive(Deserialize)]
        struct A {
            #[serde(deserialize_with = "project_arg")]
            project: String,
            #[serde(default, deserialize_with = "project_arg_opt")]
            other: Option<String>,
        }
        let a: A = serde_json::from_value(json!({"project": 42, "other": "acme/api"})).unwrap();
        assert_eq!((a.project.as_str(), a.other.as_deref()), ("42", Some("acme/api")));
        let a: A = serde_json::from_value(json!({"project": "acme/api"})).unwrap();
        assert_eq!(a.other, None);
        let e = serde_json::from_value::<A>(json!({"project": [1]})).err().unwrap();
        assert!(e.to_string().contains("full path"), "{e}");
    }
}
