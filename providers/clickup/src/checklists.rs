//! Task checklists: list a task's checklists with their items, create a checklist, add an item,
//! and resolve, unresolve, rename or reassign an item.

use quiver_plugin_sdk::prelude::*;
use reqwest::Method;

use crate::client::Subject;
use crate::model::{check_id, id_arg, is_false, lenient_string, lenient_u64, opt_id_arg, WireUser};
use crate::tasks::{lenient_vec, task_ref};
use crate::ClickUp;

/// Arguments of `list_checklists`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListChecklistsArgs {
    /// The task id (`task_id` from a listing or `get_task`), or a custom task id with
    /// `team_id`.
    #[serde(deserialize_with = "id_arg", alias = "id")]
    pub(crate) task_id: String,
    /// The workspace id; needed only when `task_id` is a custom task id (`DEV-42`).
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) team_id: Option<String>,
}

/// Arguments of `create_checklist`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateChecklistArgs {
    /// The task to add the checklist to, or a custom task id with `team_id`.
    #[serde(deserialize_with = "id_arg", alias = "id")]
    pub(crate) task_id: String,
    /// The workspace id; needed only when `task_id` is a custom task id (`DEV-42`).
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) team_id: Option<String>,
    /// The checklist's name, e.g. `Release steps`.
    pub(crate) name: String,
}

/// Arguments of `add_checklist_item`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddChecklistItemArgs {
    /// The checklist (`checklist_id` from `list_checklists` or `create_checklist`).
    #[serde(deserialize_with = "id_arg")]
    pub(crate) checklist_id: String,
    /// The item's text.
    pub(crate) name: String,
    /// Assign the item to this user id (`user_id` from `list_workspaces` or `list_members`).
    pub(crate) assignee: Option<u64>,
}

/// Arguments of `update_checklist_item`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateChecklistItemArgs {
    /// The checklist (`checklist_id` from `list_checklists`).
    #[serde(deserialize_with = "id_arg")]
    pub(crate) checklist_id: String,
    /// The item (`item_id` from `list_checklists`).
    #[serde(deserialize_with = "id_arg", alias = "checklist_item_id")]
    pub(crate) item_id: String,
    /// `true` ticks the item off (resolves it), `false` reopens it.
    pub(crate) resolved: Option<bool>,
    /// A new text for the item.
    pub(crate) name: Option<String>,
    /// Assign the item to this user id.
    pub(crate) assignee: Option<u64>,
    /// Nest the item under this other item of the checklist (`item_id`).
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) parent: Option<String>,
}

/// A checklist as ClickUp sends it (on a task, and in `{"checklist": …}` answers).
#[derive(Debug, Deserialize)]
pub(crate) struct WireChecklist {
    #[serde(default, deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    task_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    resolved: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    unresolved: Option<u64>,
    #[serde(default, deserialize_with = "lenient_vec")]
    items: Vec<WireItem>,
}

#[derive(Debug, Deserialize)]
struct WireItem {
    #[serde(default, deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    assignee: Option<WireUser>,
    #[serde(default)]
    resolved: bool,
    #[serde(default, deserialize_with = "lenient_string")]
    parent: Option<String>,
}

/// `POST /task/{id}/checklist`, `POST /checklist/{id}/checklist_item` and `PUT …/{item_id}`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireChecklistReply {
    checklist: WireChecklist,
}

/// `GET /task/{task_id}`, only its checklists.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTaskChecklists {
    #[serde(default, deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, deserialize_with = "lenient_vec")]
    checklists: Vec<WireChecklist>,
}

/// One checklist item.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ChecklistItem {
    /// The item id, for `update_checklist_item`.
    pub(crate) item_id: String,
    /// Its text.
    pub(crate) name: String,
    /// Set when the item is ticked off.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) resolved: bool,
    /// Who it is assigned to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) assignee: Option<String>,
    /// The item it is nested under.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parent: Option<String>,
}

/// A checklist with its items.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ChecklistDetail {
    /// The checklist id, for `add_checklist_item` and `update_checklist_item`.
    pub(crate) checklist_id: String,
    /// Its name.
    pub(crate) name: Option<String>,
    /// Items ticked off.
    pub(crate) resolved: u64,
    /// Items in all.
    pub(crate) total: u64,
    /// The items, in ClickUp's order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) items: Vec<ChecklistItem>,
}

/// Result of `list_checklists`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ChecklistList {
    /// The task.
    pub(crate) task_id: String,
    /// The task's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_name: Option<String>,
    /// Its checklists (none when it has none).
    pub(crate) checklists: Vec<ChecklistDetail>,
}

/// Result of `create_checklist`, `add_checklist_item` and `update_checklist_item`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ChecklistChanged {
    /// The task the checklist is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_id: Option<String>,
    /// The item added or changed, when one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) item_id: Option<String>,
    /// The checklist as it is now.
    pub(crate) checklist: ChecklistDetail,
}

fn checklist_detail(c: WireChecklist) -> ChecklistDetail {
    let resolved = c.resolved.unwrap_or(0);
    ChecklistDetail {
        checklist_id: c.id.unwrap_or_default(),
        name: c.name,
        resolved,
        total: resolved + c.unresolved.unwrap_or(0),
        items: c
            .items
            .into_iter()
            .map(|i| ChecklistItem {
                item_id: i.id.unwrap_or_default(),
                name: i.name.unwrap_or_default(),
                resolved: i.resolved,
                assignee: i.assignee.as_ref().map(WireUser::name),
                parent: i.parent,
            })
            .collect(),
    }
}

/// The `list_checklists` result.
pub(crate) fn checklist_list(task_id: String, wire: WireTaskChecklists) -> ChecklistList {
    ChecklistList {
        task_id: wire.id.unwrap_or(task_id),
        task_name: wire.name,
        checklists: wire.checklists.into_iter().map(checklist_detail).collect(),
    }
}

/// The result of a checklist write; `item_id` is the item changed, or for a new item the last
/// one with its text (ClickUp answers with the whole checklist, not the new item's id).
pub(crate) fn checklist_changed(wire: WireChecklistReply, item: ItemOf<'_>) -> ChecklistChanged {
    let task_id = wire.checklist.task_id.clone();
    let checklist = checklist_detail(wire.checklist);
    let item_id = match item {
        ItemOf::None => None,
        ItemOf::Id(id) => Some(id.to_owned()),
        ItemOf::Named(name) => {
            checklist.items.iter().rev().find(|i| i.name == name).map(|i| i.item_id.clone())
        }
    };
    ChecklistChanged { task_id, item_id, checklist }
}

/// Which item a checklist write is about.
pub(crate) enum ItemOf<'a> {
    /// None: the checklist itself.
    None,
    /// The item with this id.
    Id(&'a str),
    /// The (new) item with this text.
    Named(&'a str),
}

fn check_text(field: &str, value: &str) -> Result<(), ToolError> {
    if value.trim().is_empty() {
        return Err(ToolError::invalid_arguments(format!("`{field}` is empty")));
    }
    Ok(())
}

impl ClickUp {
    async fn list_checklists(
        &self,
        a: ListChecklistsArgs,
        ctx: &ToolContext,
    ) -> Result<ChecklistList, ToolError> {
        let query = task_ref(&a.task_id, a.team_id.as_deref())?;
        let subject = Subject::of("the checklists", "task", &a.task_id);
        let path = format!("/task/{}", a.task_id);
        let wire = self.client.get_json(&path, &query, &subject, ctx).await?;
        Ok(checklist_list(a.task_id, wire))
    }

    async fn create_checklist(
        &self,
        a: CreateChecklistArgs,
        ctx: &ToolContext,
    ) -> Result<ChecklistChanged, ToolError> {
        let query = task_ref(&a.task_id, a.team_id.as_deref())?;
        check_text("name", &a.name)?;
        let subject = Subject::action("creating a checklist on", "task", &a.task_id);
        let path = format!("/task/{}/checklist", a.task_id);
        let body = json!({ "name": a.name });
        let wire = self.client.send_json(Method::POST, &path, &query, &body, &subject, ctx).await?;
        Ok(checklist_changed(wire, ItemOf::None))
    }

    async fn add_checklist_item(
        &self,
        a: AddChecklistItemArgs,
        ctx: &ToolContext,
    ) -> Result<ChecklistChanged, ToolError> {
        check_id("checklist_id", &a.checklist_id)?;
        check_text("name", &a.name)?;
        let mut body = json!({ "name": a.name });
        if let Some(assignee) = a.assignee {
            body["assignee"] = json!(assignee);
        }
        let subject = Subject::action("adding an item to", "checklist", &a.checklist_id);
        let path = format!("/checklist/{}/checklist_item", a.checklist_id);
        let wire = self.client.send_json(Method::POST, &path, &[], &body, &subject, ctx).await?;
        Ok(checklist_changed(wire, ItemOf::Named(&a.name)))
    }

    async fn update_checklist_item(
        &self,
        a: UpdateChecklistItemArgs,
        ctx: &ToolContext,
    ) -> Result<ChecklistChanged, ToolError> {
        check_id("checklist_id", &a.checklist_id)?;
        check_id("item_id", &a.item_id)?;
        let mut body = Map::new();
        if let Some(resolved) = a.resolved {
            body.insert("resolved".into(), json!(resolved));
        }
        if let Some(name) = a.name {
            check_text("name", &name)?;
            body.insert("name".into(), json!(name));
        }
        // Editing takes the assignee as a string, where adding an item takes a number.
        if let Some(assignee) = a.assignee {
            body.insert("assignee".into(), json!(assignee.to_string()));
        }
        if let Some(parent) = a.parent {
            check_id("parent", &parent)?;
            body.insert("parent".into(), json!(parent));
        }
        if body.is_empty() {
            return Err(ToolError::invalid_arguments(
                "nothing to change: give `resolved` (true ticks the item off, false reopens it), \
                 `name`, `assignee` or `parent`",
            ));
        }
        let subject = Subject::action("updating item", "checklist", &a.checklist_id);
        let path = format!("/checklist/{}/checklist_item/{}", a.checklist_id, a.item_id);
        let body = Value::Object(body);
        let wire = self.client.send_json(Method::PUT, &path, &[], &body, &subject, ctx).await?;
        Ok(checklist_changed(wire, ItemOf::Id(&a.item_id)))
    }
}

register_tool! {
    provider: ClickUp,
    name: "list_checklists",
    group: "tasks",
    description: "List the checklists of a ClickUp task with every item: its id, text, whether \
                  it is ticked off, and its assignee. Gives the `checklist_id` and `item_id` the \
                  checklist tools take.",
    input: ListChecklistsArgs,
    output: ChecklistList,
    handler: ClickUp::list_checklists,
}

register_tool! {
    provider: ClickUp,
    name: "create_checklist",
    group: "tasks",
    description: "Create an empty checklist on a ClickUp task; returns its `checklist_id` for \
                  `add_checklist_item`.",
    input: CreateChecklistArgs,
    output: ChecklistChanged,
    handler: ClickUp::create_checklist,
}

register_tool! {
    provider: ClickUp,
    name: "add_checklist_item",
    group: "tasks",
    description: "Add an item to a ClickUp checklist, optionally assigned to a user; returns the \
                  checklist with the new item's `item_id`.",
    input: AddChecklistItemArgs,
    output: ChecklistChanged,
    handler: ClickUp::add_checklist_item,
}

register_tool! {
    provider: ClickUp,
    name: "update_checklist_item",
    group: "tasks",
    description: "Resolve (tick off) or unresolve a ClickUp checklist item, or change its text, \
                  assignee or parent item. Only the given fields change.",
    input: UpdateChecklistItemArgs,
    output: ChecklistChanged,
    handler: ClickUp::update_checklist_item,
}
