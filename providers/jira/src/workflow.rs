//! Workflow: the transitions an issue can take now, and taking one by name, id or target status.

use quiver_plugin_sdk::prelude::*;
use reqwest::Method;

use crate::client::{check_key, Api, Subject};
use crate::fields::{to_jira, FieldInfo, Schema};
use crate::issues::rich_text;
use crate::model::is_false;
use crate::Jira;

/// Arguments of `list_transitions`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListTransitionsArgs {
    /// The issue key, e.g. `PROJ-123`.
    #[serde(alias = "issue_key", alias = "issueKey")]
    pub(crate) key: String,
}

/// Arguments of `transition_issue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TransitionIssueArgs {
    /// The issue key, e.g. `PROJ-123`.
    #[serde(alias = "issue_key", alias = "issueKey")]
    pub(crate) key: String,
    /// The transition's name (`Start Progress`), its id (`21`), or the status it leads to
    /// (`Done`), as `list_transitions` shows them.
    pub(crate) transition: String,
    /// A comment to add with the transition, as plain text.
    pub(crate) comment: Option<String>,
    /// Fields the transition's screen asks for, by name or id, e.g. `{"Resolution": "Fixed"}`.
    pub(crate) fields: Option<Map<String, Value>>,
}

/// A field on a transition's screen (`expand=transitions.fields`).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WireTransitionField {
    #[serde(default)]
    required: bool,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    schema: Option<Schema>,
}

/// A transition as Jira sends it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireTransition {
    id: String,
    name: String,
    #[serde(default)]
    to: Option<Value>,
    #[serde(default)]
    has_screen: bool,
    #[serde(default)]
    fields: Map<String, Value>,
}

impl WireTransition {
    fn to_status(&self) -> Option<&str> {
        self.to.as_ref().and_then(|t| t.get("name")).and_then(Value::as_str)
    }

    fn screen_fields(&self) -> Vec<(String, WireTransitionField)> {
        self.fields
            .iter()
            .filter_map(|(id, f)| {
                serde_json::from_value::<WireTransitionField>(f.clone())
                    .ok()
                    .map(|f| (id.clone(), f))
            })
            .collect()
    }
}

/// `GET /issue/{key}/transitions`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTransitions {
    #[serde(default)]
    transitions: Vec<WireTransition>,
}

/// One transition.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Transition {
    /// The transition id.
    pub(crate) id: String,
    /// Its name, e.g. `Start Progress`.
    pub(crate) name: String,
    /// The status it leads to.
    pub(crate) to_status: Option<String>,
    /// That status's category: `new`, `indeterminate` or `done`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) to_category: Option<String>,
    /// Fields its screen requires (pass them as `fields` of `transition_issue`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) required_fields: Vec<String>,
    /// Set when the transition shows a screen (it may take `fields` and a `comment`).
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) has_screen: bool,
}

/// Result of `list_transitions`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TransitionList {
    /// The issue key.
    pub(crate) key: String,
    /// The transitions the issue can take now.
    pub(crate) transitions: Vec<Transition>,
}

/// Result of `transition_issue`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Transitioned {
    /// The issue key.
    pub(crate) key: String,
    /// The transition taken.
    pub(crate) transition: String,
    /// The status the issue is in now.
    pub(crate) to_status: Option<String>,
}

fn transition(t: &WireTransition) -> Transition {
    let mut required: Vec<String> = t
        .screen_fields()
        .into_iter()
        .filter(|(_, f)| f.required)
        .map(|(id, f)| f.name.unwrap_or(id))
        .collect();
    required.sort();
    Transition {
        id: t.id.clone(),
        name: t.name.clone(),
        to_status: t.to_status().map(str::to_owned),
        to_category: t
            .to
            .as_ref()
            .and_then(|to| to.get("statusCategory"))
            .and_then(|c| c.get("key"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        required_fields: required,
        has_screen: t.has_screen,
    }
}

/// The result of `list_transitions`.
pub(crate) fn transition_list(key: String, wire: &WireTransitions) -> TransitionList {
    TransitionList { key, transitions: wire.transitions.iter().map(transition).collect() }
}

/// The transition an agent means: an id, a name, or a target status (case-insensitive), in that
/// order; a status several transitions lead to is ambiguous.
fn pick<'t>(
    transitions: &'t [WireTransition],
    wanted: &str,
    key: &str,
) -> Result<&'t WireTransition, ToolError> {
    let wanted = wanted.trim();
    if let Some(t) = transitions.iter().find(|t| t.id == wanted) {
        return Ok(t);
    }
    if let Some(t) = transitions.iter().find(|t| t.name.eq_ignore_ascii_case(wanted)) {
        return Ok(t);
    }
    let to: Vec<&WireTransition> = transitions
        .iter()
        .filter(|t| t.to_status().is_some_and(|s| s.eq_ignore_ascii_case(wanted)))
        .collect();
    let available = || {
        transitions
            .iter()
            .map(|t| format!("{} (id {}, → {})", t.name, t.id, t.to_status().unwrap_or("?")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match to.as_slice() {
        [one] => Ok(one),
        [] if transitions.is_empty() => Err(ToolError::invalid_arguments(format!(
            "{key} has no transitions the account may take now"
        ))),
        [] => Err(ToolError::invalid_arguments(format!(
            "{key} has no transition `{wanted}` now; available: {}",
            available()
        ))),
        _ => Err(ToolError::invalid_arguments(format!(
            "several transitions of {key} lead to `{wanted}`; pass one by name or id: {}",
            available()
        ))),
    }
}

impl Jira {
    async fn fetch_transitions(
        &self,
        key: &str,
        ctx: &ToolContext,
    ) -> Result<WireTransitions, ToolError> {
        let path = format!("/issue/{key}/transitions?expand=transitions.fields");
        let subject = Subject::of_issue("the transitions", key);
        self.client.get_json(Api::Core, &path, &subject, ctx).await
    }

    async fn list_transitions(
        &self,
        args: ListTransitionsArgs,
        ctx: &ToolContext,
    ) -> Result<TransitionList, ToolError> {
        let key = check_key("key", &args.key)?;
        let wire = self.fetch_transitions(&key, ctx).await?;
        Ok(transition_list(key, &wire))
    }

    async fn transition_issue(
        &self,
        args: TransitionIssueArgs,
        ctx: &ToolContext,
    ) -> Result<Transitioned, ToolError> {
        let key = check_key("key", &args.key)?;
        let wire = self.fetch_transitions(&key, ctx).await?;
        let chosen = pick(&wire.transitions, &args.transition, &key)?.clone();
        let deployment = self.client.deployment();
        let mut body = json!({ "transition": { "id": chosen.id } });
        if let Some(fields) = args.fields.filter(|f| !f.is_empty()) {
            // The screen's own fields first (they carry their schema); others by the site's map.
            let screen = chosen.screen_fields();
            let mut values = Map::new();
            for (name, value) in fields {
                let on_screen = screen.iter().find(|(id, f)| {
                    *id == name || f.name.as_deref().is_some_and(|n| n.eq_ignore_ascii_case(&name))
                });
                let info = match on_screen {
                    Some((id, f)) => FieldInfo {
                        id: id.clone(),
                        name: f.name.clone().unwrap_or_else(|| id.clone()),
                        schema: f.schema.clone(),
                    },
                    None => self.field_map(ctx).await?.resolve(&name)?.clone(),
                };
                values.insert(info.id.clone(), to_jira(&info, value, deployment));
            }
            body["fields"] = Value::Object(values);
        }
        if let Some(comment) = args.comment.filter(|c| !c.trim().is_empty()) {
            body["update"] =
                json!({ "comment": [{ "add": { "body": rich_text(&comment, deployment) } }] });
        }
        let subject = Subject::of_issue(&format!("the transition `{}`", chosen.name), &key);
        self.client
            .send(
                Method::POST,
                Api::Core,
                &format!("/issue/{key}/transitions"),
                &body,
                &subject,
                ctx,
            )
            .await?;
        Ok(Transitioned {
            key,
            to_status: chosen.to_status().map(str::to_owned),
            transition: chosen.name,
        })
    }
}

register_tool! {
    provider: Jira,
    name: "list_transitions",
    group: "workflow",
    description: "List the workflow transitions an issue can take now: id, name, the status \
                  each leads to, and the fields its screen requires.",
    input: ListTransitionsArgs,
    output: TransitionList,
    handler: Jira::list_transitions,
}

register_tool! {
    provider: Jira,
    name: "transition_issue",
    group: "workflow",
    description: "Move an issue through its workflow by transition name, id or target status \
                  (e.g. `Done`), optionally with a comment and the fields the transition \
                  requires (`{\"Resolution\": \"Fixed\"}`).",
    input: TransitionIssueArgs,
    output: Transitioned,
    handler: Jira::transition_issue,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transitions() -> Vec<WireTransition> {
        serde_json::from_value(json!([
            {"id": "11", "name": "To Do", "to": {"name": "To Do"}},
            {"id": "21", "name": "Start Progress", "to": {"name": "In Progress"}},
            {"id": "31", "name": "Resolve", "to": {"name": "Done"}},
            {"id": "41", "name": "Close", "to": {"name": "Done"}}
        ]))
        .unwrap()
    }

    #[test]
    fn transitions_are_picked_by_id_name_or_target_status() {
        let all = transitions();
        assert_eq!(pick(&all, "21", "P-1").unwrap().name, "Start Progress");
        assert_eq!(pick(&all, "start progress", "P-1").unwrap().id, "21");
        assert_eq!(pick(&all, "in progress", "P-1").unwrap().id, "21");
        let err = pick(&all, "Done", "P-1").unwrap_err();
        assert!(err.message.contains("several transitions"), "{}", err.message);
        let err = pick(&all, "Reopen", "P-1").unwrap_err();
        assert!(err.message.contains("Resolve (id 31, → Done)"), "{}", err.message);
    }
}
