//! Tags and custom fields of a task: add or remove a tag, list a list's custom fields (with the
//! option ids drop-downs and labels take), set or clear a custom field's value.

use quiver_plugin_sdk::prelude::*;
use reqwest::Method;

use crate::client::Subject;
use crate::model::{check_id, id_arg, is_false, lenient_string, opt_id_arg};
use crate::tasks::{lenient_vec, task_ref};
use crate::ClickUp;

/// Longest tag name ClickUp is sent, in characters.
const TAG_MAX_CHARS: usize = 100;

/// Arguments of `add_task_tag` and `remove_task_tag`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskTagArgs {
    /// The task id, or a custom task id with `team_id`.
    #[serde(deserialize_with = "id_arg", alias = "id")]
    pub(crate) task_id: String,
    /// The workspace id; needed only when `task_id` is a custom task id (`DEV-42`).
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) team_id: Option<String>,
    /// The tag's name, e.g. `bug`. Adding a tag the space does not have yet creates it.
    #[serde(alias = "tag", alias = "tag_name")]
    pub(crate) name: String,
}

/// Arguments of `list_custom_fields`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListCustomFieldsArgs {
    /// The list whose tasks the fields apply to (`list_id` from `list_lists` or `get_task`).
    #[serde(deserialize_with = "id_arg")]
    pub(crate) list_id: String,
}

/// Arguments of `set_custom_field`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetCustomFieldArgs {
    /// The task id, or a custom task id with `team_id`.
    #[serde(deserialize_with = "id_arg", alias = "id")]
    pub(crate) task_id: String,
    /// The workspace id; needed only when `task_id` is a custom task id (`DEV-42`).
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) team_id: Option<String>,
    /// The field (`field_id` from `list_custom_fields`).
    #[serde(deserialize_with = "id_arg")]
    pub(crate) field_id: String,
    /// The value, as the field's type takes it: text, URL, email or phone as a string; number,
    /// money or rating as a number; a drop-down as one `option_id`; labels as a list of
    /// `option_id`s; a date as Unix milliseconds; people as `{"add": [user ids], "rem": […]}`;
    /// a checkbox as true/false. `null` clears the field.
    pub(crate) value: Value,
    /// For a date field: show the time of day too (default false: the date only).
    #[serde(default)]
    pub(crate) with_time: bool,
}

/// `GET /list/{list_id}/field`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireFields {
    #[serde(default, deserialize_with = "lenient_vec")]
    fields: Vec<WireField>,
}

#[derive(Debug, Deserialize)]
struct WireField {
    #[serde(default, deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    type_config: Option<Value>,
    #[serde(default)]
    required: Option<bool>,
}

/// An option of a drop-down or labels field.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct FieldOption {
    /// The id `set_custom_field` takes.
    pub(crate) option_id: String,
    /// The option's name (a label's text).
    pub(crate) name: String,
}

/// A custom field.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CustomField {
    /// The field id, for `set_custom_field`.
    pub(crate) field_id: String,
    /// Its name.
    pub(crate) name: String,
    /// Its type: `short_text`, `text`, `number`, `currency`, `drop_down`, `labels`, `date`,
    /// `users`, `checkbox`, `url`, `email`, `phone`, `emoji`, `manual_progress`, `location`…
    #[serde(rename = "type")]
    pub(crate) kind: Option<String>,
    /// Set when every task of the list must have a value.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) required: bool,
    /// The options of a drop-down or labels field.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) options: Vec<FieldOption>,
}

/// Result of `list_custom_fields`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CustomFieldList {
    /// The list.
    pub(crate) list_id: String,
    /// The custom fields its tasks can have.
    pub(crate) fields: Vec<CustomField>,
}

/// Result of `add_task_tag` and `remove_task_tag`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TagChanged {
    /// The task.
    pub(crate) task_id: String,
    /// The tag added or removed.
    pub(crate) tag: String,
}

/// Result of `set_custom_field`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CustomFieldSet {
    /// The task.
    pub(crate) task_id: String,
    /// The field.
    pub(crate) field_id: String,
    /// The value sent (absent when the field was cleared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) value: Option<Value>,
    /// Set when the field was cleared.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) cleared: bool,
}

/// The `list_custom_fields` result.
pub(crate) fn custom_field_list(list_id: String, wire: WireFields) -> CustomFieldList {
    let fields = wire
        .fields
        .into_iter()
        .map(|f| {
            let options = f
                .type_config
                .as_ref()
                .and_then(|c| c.get("options"))
                .and_then(Value::as_array)
                .map(|options| {
                    options
                        .iter()
                        .filter_map(|o| {
                            let id = o.get("id")?.as_str()?;
                            // Drop-down options have a `name`, labels a `label`.
                            let name = o.get("name").or_else(|| o.get("label"))?.as_str()?;
                            Some(FieldOption { option_id: id.to_owned(), name: name.to_owned() })
                        })
                        .collect()
                })
                .unwrap_or_default();
            CustomField {
                field_id: f.id.unwrap_or_default(),
                name: f.name.unwrap_or_default(),
                kind: f.kind,
                required: f.required.unwrap_or(false),
                options,
            }
        })
        .collect();
    CustomFieldList { list_id, fields }
}

/// A tag name as one URL path segment: every byte but the unreserved ones percent-encoded, so
/// `needs review` or `a/b` stay one segment.
fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn check_tag(name: &str) -> Result<String, ToolError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(ToolError::invalid_arguments("`name` is empty; give the tag's name"));
    }
    if name.chars().count() > TAG_MAX_CHARS {
        return Err(ToolError::invalid_arguments(format!(
            "`name` is longer than {TAG_MAX_CHARS} characters; give the tag's name"
        )));
    }
    Ok(name.to_owned())
}

impl ClickUp {
    async fn tag_request(
        &self,
        method: Method,
        a: TaskTagArgs,
        ctx: &ToolContext,
    ) -> Result<TagChanged, ToolError> {
        let query = task_ref(&a.task_id, a.team_id.as_deref())?;
        let tag = check_tag(&a.name)?;
        let doing = if method == Method::DELETE { "removing a tag from" } else { "tagging" };
        let subject = Subject::action(doing, "task", &a.task_id);
        let path = format!("/task/{}/tag/{}", a.task_id, path_segment(&tag));
        let body = (method == Method::POST).then(|| json!({}));
        self.client.request(method, &path, &query, body.as_ref(), &subject, ctx).await?;
        Ok(TagChanged { task_id: a.task_id, tag })
    }

    async fn add_task_tag(
        &self,
        a: TaskTagArgs,
        ctx: &ToolContext,
    ) -> Result<TagChanged, ToolError> {
        self.tag_request(Method::POST, a, ctx).await
    }

    async fn remove_task_tag(
        &self,
        a: TaskTagArgs,
        ctx: &ToolContext,
    ) -> Result<TagChanged, ToolError> {
        self.tag_request(Method::DELETE, a, ctx).await
    }

    async fn list_custom_fields(
        &self,
        a: ListCustomFieldsArgs,
        ctx: &ToolContext,
    ) -> Result<CustomFieldList, ToolError> {
        check_id("list_id", &a.list_id)?;
        let subject = Subject::of("the custom fields", "list", &a.list_id);
        let path = format!("/list/{}/field", a.list_id);
        let wire = self.client.get_json(&path, &[], &subject, ctx).await?;
        Ok(custom_field_list(a.list_id, wire))
    }

    async fn set_custom_field(
        &self,
        a: SetCustomFieldArgs,
        ctx: &ToolContext,
    ) -> Result<CustomFieldSet, ToolError> {
        let query = task_ref(&a.task_id, a.team_id.as_deref())?;
        check_id("field_id", &a.field_id)?;
        let path = format!("/task/{}/field/{}", a.task_id, a.field_id);
        if a.value.is_null() {
            let subject = Subject::action("clearing a custom field of", "task", &a.task_id);
            self.client.request(Method::DELETE, &path, &query, None, &subject, ctx).await?;
            return Ok(CustomFieldSet {
                task_id: a.task_id,
                field_id: a.field_id,
                value: None,
                cleared: true,
            });
        }
        let mut body = json!({ "value": a.value });
        if a.with_time {
            body["value_options"] = json!({ "time": true });
        }
        let subject = Subject::action("setting a custom field of", "task", &a.task_id);
        self.client.request(Method::POST, &path, &query, Some(&body), &subject, ctx).await?;
        Ok(CustomFieldSet {
            task_id: a.task_id,
            field_id: a.field_id,
            value: Some(a.value),
            cleared: false,
        })
    }
}

register_tool! {
    provider: ClickUp,
    name: "add_task_tag",
    group: "tasks",
    description: "Add a tag to a ClickUp task (a tag the space lacks is created).",
    input: TaskTagArgs,
    output: TagChanged,
    handler: ClickUp::add_task_tag,
}

register_tool! {
    provider: ClickUp,
    name: "remove_task_tag",
    group: "tasks",
    description: "Remove a tag from a ClickUp task (the tag stays in the space).",
    input: TaskTagArgs,
    output: TagChanged,
    handler: ClickUp::remove_task_tag,
}

register_tool! {
    provider: ClickUp,
    name: "list_custom_fields",
    group: "tasks",
    description: "List the custom fields of a ClickUp list: id, name, type, whether required, \
                  and the option ids of drop-downs and labels, as `set_custom_field` takes them.",
    input: ListCustomFieldsArgs,
    output: CustomFieldList,
    handler: ClickUp::list_custom_fields,
}

register_tool! {
    provider: ClickUp,
    name: "set_custom_field",
    group: "tasks",
    description: "Set the value of a custom field on a ClickUp task (field and option ids from \
                  `list_custom_fields`), or clear it with `value: null`. Replaces the old value.",
    input: SetCustomFieldArgs,
    output: CustomFieldSet,
    handler: ClickUp::set_custom_field,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_names_stay_one_path_segment() {
        assert_eq!(path_segment("bug"), "bug");
        assert_eq!(path_segment("needs review"), "needs%20review");
        assert_eq!(path_segment("a/b?c#d"), "a%2Fb%3Fc%23d");
        assert_eq!(path_segment("ünï"), "%C3%BCn%C3%AF");
    }
}
