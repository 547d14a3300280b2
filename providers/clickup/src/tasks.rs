//! Tasks: list the tasks of a list, search a workspace's tasks, get one task (subtasks and
//! custom fields by name), create and update tasks.

use std::collections::BTreeMap;

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::json::is_zero;
use quiver_plugin_sdk::support::text::truncate;
use reqwest::Method;

use crate::client::Subject;
use crate::model::{
    check_id, human_ms, id_arg, is_false, iso_from_ms, lenient_string, lenient_u64, opt_id_arg,
    parse_date, user_names, WirePriority, WireRef, WireStatus, WireTag, WireUser,
};
use crate::ClickUp;

/// ClickUp's page size for task listings (fixed by ClickUp).
pub(crate) const TASK_PAGE_SIZE: usize = 100;
/// Longest task description returned, in bytes.
pub(crate) const DESCRIPTION_MAX_BYTES: usize = 16 * 1024;
/// Longest text custom-field value returned, in bytes.
const FIELD_MAX_BYTES: usize = 2 * 1024;

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// How listings are ordered.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OrderBy {
    /// By creation time.
    Created,
    /// By last update (ClickUp's default order is by creation).
    Updated,
    /// By due date.
    DueDate,
    /// By id.
    Id,
}

impl OrderBy {
    fn as_str(self) -> &'static str {
        match self {
            OrderBy::Created => "created",
            OrderBy::Updated => "updated",
            OrderBy::DueDate => "due_date",
            OrderBy::Id => "id",
        }
    }
}

/// A task priority.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Priority {
    /// 1.
    Urgent,
    /// 2.
    High,
    /// 3.
    Normal,
    /// 4.
    Low,
    /// No priority (clears it on `update_task`).
    None,
}

impl Priority {
    fn wire(self) -> Value {
        match self {
            Priority::Urgent => json!(1),
            Priority::High => json!(2),
            Priority::Normal => json!(3),
            Priority::Low => json!(4),
            Priority::None => Value::Null,
        }
    }
}

/// Arguments of `list_tasks`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListTasksArgs {
    /// The list id (`list_id` from `list_lists`).
    #[serde(deserialize_with = "id_arg")]
    pub(crate) list_id: String,
    /// Only tasks in these statuses, e.g. `["to do", "in progress"]` (the space's or list's
    /// status names).
    #[serde(default)]
    pub(crate) statuses: Vec<String>,
    /// Only tasks assigned to these user ids (`user_id` from `list_workspaces`).
    #[serde(default)]
    pub(crate) assignees: Vec<u64>,
    /// Only tasks with all of these tags.
    #[serde(default)]
    pub(crate) tags: Vec<String>,
    /// Include closed tasks (left out by default).
    #[serde(default)]
    pub(crate) include_closed: bool,
    /// Include subtasks (left out by default).
    #[serde(default)]
    pub(crate) include_subtasks: bool,
    /// Only tasks due after this time: ISO 8601 (`2024-05-01`, `2024-05-01T09:00:00Z`) or Unix
    /// milliseconds.
    pub(crate) due_after: Option<String>,
    /// Only tasks due before this time (ISO 8601 or Unix milliseconds).
    pub(crate) due_before: Option<String>,
    /// Only tasks updated after this time (ISO 8601 or Unix milliseconds).
    pub(crate) updated_after: Option<String>,
    /// Only tasks updated before this time (ISO 8601 or Unix milliseconds).
    pub(crate) updated_before: Option<String>,
    /// Order: `created` (ClickUp's default), `updated`, `due_date` or `id`.
    pub(crate) order_by: Option<OrderBy>,
    /// Reverse the order.
    #[serde(default)]
    pub(crate) reverse: bool,
    /// Page number, from 0; ClickUp returns 100 tasks a page.
    pub(crate) page: Option<u32>,
}

/// Arguments of `search_tasks`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchTasksArgs {
    /// The workspace id (`team_id` from `list_workspaces`).
    #[serde(deserialize_with = "id_arg", alias = "workspace_id")]
    pub(crate) team_id: String,
    /// Only tasks in these spaces (`space_id` from `list_spaces`).
    #[serde(default)]
    pub(crate) space_ids: Vec<String>,
    /// Only tasks in these folders (`folder_id` from `list_folders`).
    #[serde(default)]
    pub(crate) folder_ids: Vec<String>,
    /// Only tasks in these lists (`list_id` from `list_lists`).
    #[serde(default)]
    pub(crate) list_ids: Vec<String>,
    /// Only tasks in these statuses, e.g. `["in progress"]`.
    #[serde(default)]
    pub(crate) statuses: Vec<String>,
    /// Only tasks assigned to these user ids (`user_id` from `list_workspaces`).
    #[serde(default)]
    pub(crate) assignees: Vec<u64>,
    /// Only tasks with all of these tags.
    #[serde(default)]
    pub(crate) tags: Vec<String>,
    /// Include closed tasks (left out by default).
    #[serde(default)]
    pub(crate) include_closed: bool,
    /// Include subtasks (left out by default).
    #[serde(default)]
    pub(crate) include_subtasks: bool,
    /// Only tasks due after this time: ISO 8601 or Unix milliseconds.
    pub(crate) due_after: Option<String>,
    /// Only tasks due before this time: ISO 8601 or Unix milliseconds.
    pub(crate) due_before: Option<String>,
    /// Only tasks updated after this time: ISO 8601 or Unix milliseconds.
    pub(crate) updated_after: Option<String>,
    /// Only tasks updated before this time: ISO 8601 or Unix milliseconds.
    pub(crate) updated_before: Option<String>,
    /// Order: `created` (ClickUp's default), `updated`, `due_date` or `id`.
    pub(crate) order_by: Option<OrderBy>,
    /// Reverse the order.
    #[serde(default)]
    pub(crate) reverse: bool,
    /// Page number, from 0; ClickUp returns 100 tasks a page.
    pub(crate) page: Option<u32>,
}

/// Arguments of `get_task`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetTaskArgs {
    /// The task id (`task_id` from a listing, e.g. `86cv5pkvr`), or a custom task id such as
    /// `DEV-42` together with `team_id`.
    #[serde(deserialize_with = "id_arg", alias = "id")]
    pub(crate) task_id: String,
    /// The workspace id; needed only when `task_id` is a custom task id (`DEV-42`).
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) team_id: Option<String>,
    /// Include the task's subtasks (default true).
    pub(crate) include_subtasks: Option<bool>,
}

/// Arguments of `create_task`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateTaskArgs {
    /// The list to create the task in (`list_id` from `list_lists`).
    #[serde(deserialize_with = "id_arg")]
    pub(crate) list_id: String,
    /// The task's name.
    pub(crate) name: String,
    /// The description, in Markdown.
    pub(crate) description: Option<String>,
    /// The status name (one of the list's statuses); the list's first status when unset.
    pub(crate) status: Option<String>,
    /// `urgent`, `high`, `normal` or `low`.
    pub(crate) priority: Option<Priority>,
    /// User ids to assign (`user_id` from `list_workspaces`).
    #[serde(default)]
    pub(crate) assignees: Vec<u64>,
    /// Tag names to set.
    #[serde(default)]
    pub(crate) tags: Vec<String>,
    /// Due date: ISO 8601 (a date, or a date and time) or Unix milliseconds.
    pub(crate) due_date: Option<String>,
    /// Start date: ISO 8601 or Unix milliseconds.
    pub(crate) start_date: Option<String>,
    /// Make it a subtask of this task (in the same list).
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) parent: Option<String>,
    /// Notify everyone, the creator included (default false).
    #[serde(default)]
    pub(crate) notify_all: bool,
}

/// Arguments of `update_task`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateTaskArgs {
    /// The task id (or a custom task id such as `DEV-42` together with `team_id`).
    #[serde(deserialize_with = "id_arg", alias = "id")]
    pub(crate) task_id: String,
    /// The workspace id; needed only when `task_id` is a custom task id.
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) team_id: Option<String>,
    /// A new name.
    pub(crate) name: Option<String>,
    /// A new description, in Markdown (replaces the old one).
    pub(crate) description: Option<String>,
    /// A new status name, e.g. `in progress` or `complete`.
    pub(crate) status: Option<String>,
    /// `urgent`, `high`, `normal`, `low`, or `none` to clear it.
    pub(crate) priority: Option<Priority>,
    /// A new due date: ISO 8601 or Unix milliseconds.
    pub(crate) due_date: Option<String>,
    /// A new start date: ISO 8601 or Unix milliseconds.
    pub(crate) start_date: Option<String>,
    /// User ids to add as assignees.
    #[serde(default)]
    pub(crate) add_assignees: Vec<u64>,
    /// User ids to remove from the assignees.
    #[serde(default)]
    pub(crate) remove_assignees: Vec<u64>,
    /// Archive (true) or unarchive (false) the task.
    pub(crate) archived: Option<bool>,
}

// ---------------------------------------------------------------------------------------------
// What ClickUp sends (only the kept fields)
// ---------------------------------------------------------------------------------------------

/// A task as the task endpoints send it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTask {
    #[serde(deserialize_with = "lenient_string")]
    pub(crate) id: Option<String>,
    #[serde(default)]
    custom_id: Option<String>,
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    text_content: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    markdown_description: Option<String>,
    #[serde(default)]
    status: Option<WireStatus>,
    #[serde(default, deserialize_with = "lenient_string")]
    date_created: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    date_updated: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    date_closed: Option<String>,
    #[serde(default)]
    creator: Option<WireUser>,
    #[serde(default, deserialize_with = "lenient_vec")]
    assignees: Vec<WireUser>,
    #[serde(default, deserialize_with = "lenient_vec")]
    checklists: Vec<WireChecklist>,
    #[serde(default, deserialize_with = "lenient_vec")]
    tags: Vec<WireTag>,
    #[serde(default, deserialize_with = "lenient_string")]
    parent: Option<String>,
    #[serde(default)]
    priority: Option<WirePriority>,
    #[serde(default, deserialize_with = "lenient_string")]
    due_date: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    start_date: Option<String>,
    #[serde(default)]
    points: Option<f64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    time_estimate: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    time_spent: Option<u64>,
    #[serde(default, deserialize_with = "lenient_vec")]
    custom_fields: Vec<WireCustomField>,
    #[serde(default, deserialize_with = "lenient_vec")]
    dependencies: Vec<Value>,
    #[serde(default, deserialize_with = "lenient_vec")]
    linked_tasks: Vec<Value>,
    #[serde(default)]
    list: Option<WireRef>,
    #[serde(default)]
    folder: Option<WireRef>,
    #[serde(default)]
    space: Option<WireRef>,
    #[serde(default, deserialize_with = "lenient_string")]
    team_id: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    archived: bool,
    #[serde(default, deserialize_with = "lenient_vec")]
    pub(crate) subtasks: Vec<WireTask>,
}

/// A checklist on a task.
#[derive(Debug, Deserialize)]
struct WireChecklist {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    resolved: Option<u64>,
    #[serde(default, deserialize_with = "lenient_u64")]
    unresolved: Option<u64>,
}

/// A custom field with its value on a task.
#[derive(Debug, Deserialize)]
struct WireCustomField {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    type_config: Option<Value>,
    #[serde(default)]
    value: Option<Value>,
}

/// `GET /list/{list_id}/task` and `GET /team/{team_id}/task`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTaskPage {
    #[serde(default)]
    tasks: Vec<WireTask>,
    #[serde(default)]
    last_page: Option<bool>,
}

/// Reads an array leniently: null is empty, a lone object is one element, and elements that do
/// not parse are skipped (ClickUp's shapes vary between endpoints and plans).
pub(crate) fn lenient_vec<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    Ok(match Option::<Value>::deserialize(deserializer)? {
        Some(Value::Array(items)) => {
            items.into_iter().filter_map(|v| serde_json::from_value(v).ok()).collect()
        }
        Some(v @ Value::Object(_)) => serde_json::from_value(v).ok().into_iter().collect(),
        _ => Vec::new(),
    })
}

// ---------------------------------------------------------------------------------------------
// What the tools return
// ---------------------------------------------------------------------------------------------

/// One task in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TaskSummary {
    /// The task id, for `get_task`, `list_task_comments` and `update_task`.
    pub(crate) task_id: String,
    /// The workspace's custom task id (`DEV-42`), when it uses them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) custom_id: Option<String>,
    /// The name.
    pub(crate) name: String,
    /// The status name.
    pub(crate) status: Option<String>,
    /// Set when the status closes the task.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) closed: bool,
    /// Assignee names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) assignees: Vec<String>,
    /// `urgent`, `high`, `normal` or `low`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) priority: Option<String>,
    /// Due date, ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) due_date: Option<String>,
    /// Tag names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tags: Vec<String>,
    /// The parent task's id, for a subtask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parent: Option<String>,
    /// When it last changed, ISO 8601.
    pub(crate) date_updated: Option<String>,
}

/// Result of `list_tasks`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TaskList {
    /// The list.
    pub(crate) list_id: String,
    /// The tasks of this page.
    pub(crate) tasks: Vec<TaskSummary>,
    /// This page's number (from 0).
    pub(crate) page: u32,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// One search hit: a task and where it lives.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TaskHit {
    /// Id, name, status, people and dates.
    #[serde(flatten)]
    pub(crate) task: TaskSummary,
    /// The list it is in.
    pub(crate) list_id: Option<String>,
    /// The list's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) list_name: Option<String>,
}

/// Result of `search_tasks`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TaskSearch {
    /// The workspace.
    pub(crate) team_id: String,
    /// The matching tasks of this page.
    pub(crate) tasks: Vec<TaskHit>,
    /// This page's number (from 0).
    pub(crate) page: u32,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// A checklist's progress.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Checklist {
    /// Its name.
    pub(crate) name: Option<String>,
    /// Items done.
    pub(crate) resolved: u64,
    /// Items in all.
    pub(crate) total: u64,
}

/// A subtask.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Subtask {
    /// Its task id.
    pub(crate) task_id: String,
    /// Its name.
    pub(crate) name: String,
    /// Its status.
    pub(crate) status: Option<String>,
    /// Set when its status closes it.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) closed: bool,
    /// Its assignees.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) assignees: Vec<String>,
}

/// Result of `get_task`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TaskDetail {
    /// The task id.
    pub(crate) task_id: String,
    /// The custom task id (`DEV-42`), when the workspace uses them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) custom_id: Option<String>,
    /// The name.
    pub(crate) name: String,
    /// The status name.
    pub(crate) status: Option<String>,
    /// `open`, `custom`, `closed` or `done`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status_type: Option<String>,
    /// The workspace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) team_id: Option<String>,
    /// The space.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) space_id: Option<String>,
    /// The folder's name (absent for lists directly in a space).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) folder: Option<String>,
    /// The list.
    pub(crate) list_id: Option<String>,
    /// The list's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) list_name: Option<String>,
    /// Who created it.
    pub(crate) creator: Option<String>,
    /// Assignee names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) assignees: Vec<String>,
    /// `urgent`, `high`, `normal` or `low`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) priority: Option<String>,
    /// Tag names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tags: Vec<String>,
    /// The parent task's id, for a subtask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parent: Option<String>,
    /// Created, ISO 8601.
    pub(crate) date_created: Option<String>,
    /// Last changed, ISO 8601.
    pub(crate) date_updated: Option<String>,
    /// Closed, ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) date_closed: Option<String>,
    /// Start date, ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) start_date: Option<String>,
    /// Due date, ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) due_date: Option<String>,
    /// Time estimate, e.g. `2 h 30 min`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) time_estimate: Option<String>,
    /// Time tracked so far, e.g. `1 h 12 min`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) time_spent: Option<String>,
    /// Sprint points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) points: Option<f64>,
    /// Set for an archived task.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) archived: bool,
    /// The description, as Markdown when ClickUp has it (cut at 16 KiB, saying so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// Custom fields that have a value, by field name: drop-downs and labels as option names,
    /// people as names, dates as ISO 8601.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) custom_fields: BTreeMap<String, Value>,
    /// Checklists and their progress.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) checklists: Vec<Checklist>,
    /// Subtasks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) subtasks: Vec<Subtask>,
    /// How many tasks this one depends on or blocks.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) dependencies: usize,
    /// How many tasks are linked to it.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) linked_tasks: usize,
    /// The task in ClickUp.
    pub(crate) url: Option<String>,
}

/// Result of `create_task` and `update_task`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TaskChanged {
    /// The task id.
    pub(crate) task_id: String,
    /// The custom task id, when the workspace uses them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) custom_id: Option<String>,
    /// Its name.
    pub(crate) name: String,
    /// Its status.
    pub(crate) status: Option<String>,
    /// Its assignees.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) assignees: Vec<String>,
    /// Its priority.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) priority: Option<String>,
    /// Its due date, ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) due_date: Option<String>,
    /// Its tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tags: Vec<String>,
    /// The list it is in.
    pub(crate) list_id: Option<String>,
    /// The task in ClickUp.
    pub(crate) url: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Mapping (pure, so tests can run it on recorded responses)
// ---------------------------------------------------------------------------------------------

fn tag_names(tags: &[WireTag]) -> Vec<String> {
    tags.iter().map(|t| t.name.clone()).collect()
}

impl WireTask {
    pub(crate) fn summary(&self) -> TaskSummary {
        let status = self.status.clone().unwrap_or_default();
        TaskSummary {
            task_id: self.id.clone().unwrap_or_default(),
            custom_id: self.custom_id.clone(),
            name: self.name.clone().unwrap_or_default(),
            closed: status.is_closed(),
            status: status.status,
            assignees: user_names(&self.assignees),
            priority: self.priority.as_ref().and_then(WirePriority::name),
            due_date: iso_from_ms(self.due_date.as_deref()),
            tags: tag_names(&self.tags),
            parent: self.parent.clone(),
            date_updated: iso_from_ms(self.date_updated.as_deref()),
        }
    }

    pub(crate) fn list_id(&self) -> Option<String> {
        self.list.as_ref().and_then(|l| l.id.clone())
    }

    fn changed(self) -> TaskChanged {
        let list_id = self.list_id();
        let s = self.summary();
        TaskChanged {
            task_id: s.task_id,
            custom_id: s.custom_id,
            name: s.name,
            status: s.status,
            assignees: s.assignees,
            priority: s.priority,
            due_date: s.due_date,
            tags: s.tags,
            list_id,
            url: self.url,
        }
    }
}

fn next_page(page: u32, last_page: Option<bool>, returned: usize) -> Option<u32> {
    let more = last_page.map(|last| !last).unwrap_or(returned >= TASK_PAGE_SIZE);
    more.then_some(page + 1)
}

/// The `list_tasks` result.
pub(crate) fn task_list(list_id: String, page: u32, wire: WireTaskPage) -> TaskList {
    let next_page = next_page(page, wire.last_page, wire.tasks.len());
    let tasks = wire.tasks.iter().map(WireTask::summary).collect();
    TaskList { list_id, tasks, page, next_page }
}

/// The `search_tasks` result.
pub(crate) fn task_search(team_id: String, page: u32, wire: WireTaskPage) -> TaskSearch {
    let next_page = next_page(page, wire.last_page, wire.tasks.len());
    let tasks = wire
        .tasks
        .iter()
        .map(|t| TaskHit {
            task: t.summary(),
            list_id: t.list_id(),
            list_name: t.list.as_ref().and_then(|l| l.name.clone()),
        })
        .collect();
    TaskSearch { team_id, tasks, page, next_page }
}

/// The options of a drop-down or labels field: `type_config.options`.
fn options(config: Option<&Value>) -> &[Value] {
    config
        .and_then(|c| c.get("options"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A custom field's value as a reader wants it; `None` when the field is empty.
fn custom_field_value(field: &WireCustomField) -> Option<Value> {
    let value = field.value.as_ref().filter(|v| match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => true,
    })?;
    let options = options(field.type_config.as_ref());
    let option_named = |key: &Value| -> Option<String> {
        let key = text_of(key)?;
        options.iter().find_map(|o| {
            let id = o.get("id").and_then(text_of);
            let index = o.get("orderindex").and_then(text_of);
            (id.as_deref() == Some(&*key) || index.as_deref() == Some(&*key))
                .then(|| o.get("name").or_else(|| o.get("label")).and_then(text_of))
                .flatten()
        })
    };
    let names = |items: &Value, key: &str| -> Value {
        let list: Vec<Value> = items
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| match i {
                Value::Object(o) => o.get(key).or_else(|| o.get("id")).cloned(),
                other => Some(other.clone()),
            })
            .collect();
        Value::Array(list)
    };
    let resolved = match field.kind.as_deref().unwrap_or("") {
        "drop_down" => option_named(value).map(Value::String).unwrap_or_else(|| value.clone()),
        "labels" => Value::Array(
            value
                .as_array()
                .into_iter()
                .flatten()
                .map(|id| option_named(id).map(Value::String).unwrap_or_else(|| id.clone()))
                .collect(),
        ),
        "users" => names(value, "username"),
        "tasks" => names(value, "name"),
        "attachment" => names(value, "title"),
        "date" => text_of(value)
            .and_then(|ms| iso_from_ms(Some(&ms)))
            .map(Value::String)
            .unwrap_or_else(|| value.clone()),
        "checkbox" => Value::Bool(
            matches!(value, Value::Bool(true)) || text_of(value).as_deref() == Some("true"),
        ),
        "number" | "currency" | "emoji" => match value {
            Value::String(s) => {
                s.parse::<f64>().map(|f| json!(f)).unwrap_or_else(|_| value.clone())
            }
            other => other.clone(),
        },
        "progress" | "automatic_progress" => value
            .get("percent_completed")
            .or_else(|| value.get("percent_complete"))
            .cloned()
            .unwrap_or_else(|| value.clone()),
        "location" => value.get("formatted_address").cloned().unwrap_or_else(|| value.clone()),
        _ => match value {
            Value::Object(o) if o.contains_key("value") => o["value"].clone(),
            other => other.clone(),
        },
    };
    Some(match resolved {
        Value::String(s) => Value::String(truncate(&s, FIELD_MAX_BYTES).0),
        other => other,
    })
}

/// The `get_task` result.
pub(crate) fn task_detail(task: WireTask) -> TaskDetail {
    let status = task.status.clone().unwrap_or_default();
    let description = task
        .markdown_description
        .clone()
        .filter(|d| !d.trim().is_empty())
        .or_else(|| task.text_content.clone().filter(|d| !d.trim().is_empty()))
        .or_else(|| task.description.clone().filter(|d| !d.trim().is_empty()))
        .map(|d| truncate(&d, DESCRIPTION_MAX_BYTES).0);
    let mut custom_fields = BTreeMap::new();
    for field in &task.custom_fields {
        if let (Some(name), Some(value)) = (field.name.clone(), custom_field_value(field)) {
            custom_fields.insert(name, value);
        }
    }
    let checklists = task
        .checklists
        .iter()
        .map(|c| {
            let resolved = c.resolved.unwrap_or(0);
            Checklist {
                name: c.name.clone(),
                resolved,
                total: resolved + c.unresolved.unwrap_or(0),
            }
        })
        .collect();
    let subtasks = task
        .subtasks
        .iter()
        .map(|s| {
            let status = s.status.clone().unwrap_or_default();
            Subtask {
                task_id: s.id.clone().unwrap_or_default(),
                name: s.name.clone().unwrap_or_default(),
                closed: status.is_closed(),
                status: status.status,
                assignees: user_names(&s.assignees),
            }
        })
        .collect();
    TaskDetail {
        task_id: task.id.clone().unwrap_or_default(),
        custom_id: task.custom_id.clone(),
        name: task.name.clone().unwrap_or_default(),
        status: status.status.clone(),
        status_type: status.kind.clone(),
        team_id: task.team_id.clone(),
        space_id: task.space.as_ref().and_then(|s| s.id.clone()),
        folder: task.folder.as_ref().filter(|f| !f.hidden).and_then(|f| f.name.clone()),
        list_id: task.list_id(),
        list_name: task.list.as_ref().and_then(|l| l.name.clone()),
        creator: task.creator.as_ref().map(WireUser::name),
        assignees: user_names(&task.assignees),
        priority: task.priority.as_ref().and_then(WirePriority::name),
        tags: tag_names(&task.tags),
        parent: task.parent.clone(),
        date_created: iso_from_ms(task.date_created.as_deref()),
        date_updated: iso_from_ms(task.date_updated.as_deref()),
        date_closed: iso_from_ms(task.date_closed.as_deref()),
        start_date: iso_from_ms(task.start_date.as_deref()),
        due_date: iso_from_ms(task.due_date.as_deref()),
        time_estimate: task.time_estimate.filter(|t| *t > 0).map(human_ms),
        time_spent: task.time_spent.filter(|t| *t > 0).map(human_ms),
        points: task.points,
        archived: task.archived,
        description,
        custom_fields,
        checklists,
        subtasks,
        dependencies: task.dependencies.len(),
        linked_tasks: task.linked_tasks.len(),
        url: task.url,
    }
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

/// The path segment and query that address a task: a native id as is, a custom task id
/// (`DEV-42`) with `custom_task_ids=true&team_id=…`.
pub(crate) fn task_ref(
    task_id: &str,
    team_id: Option<&str>,
) -> Result<Vec<(&'static str, String)>, ToolError> {
    check_id("task_id", task_id)?;
    if !task_id.contains('-') {
        return Ok(Vec::new());
    }
    match team_id {
        Some(team) => {
            check_id("team_id", team)?;
            Ok(vec![("custom_task_ids", "true".into()), ("team_id", team.to_owned())])
        }
        None => Err(ToolError::invalid_arguments(format!(
            "`{task_id}` looks like a custom task id; give `team_id` (from list_workspaces) too, \
             or use the task's own id (`task_id` from list_tasks or search_tasks)"
        ))),
    }
}

/// The filters both listings share, as ClickUp's query parameters.
#[allow(clippy::too_many_arguments)]
fn filter_query(
    statuses: &[String],
    assignees: &[u64],
    tags: &[String],
    include_closed: bool,
    include_subtasks: bool,
    dates: [(&str, &Option<String>); 4],
    order_by: Option<OrderBy>,
    reverse: bool,
    page: u32,
) -> Result<Vec<(&'static str, String)>, ToolError> {
    let mut q: Vec<(&'static str, String)> = vec![("page", page.to_string())];
    q.extend(statuses.iter().map(|s| ("statuses[]", s.clone())));
    q.extend(assignees.iter().map(|a| ("assignees[]", a.to_string())));
    q.extend(tags.iter().map(|t| ("tags[]", t.clone())));
    if include_closed {
        q.push(("include_closed", "true".into()));
    }
    if include_subtasks {
        q.push(("subtasks", "true".into()));
    }
    let params = ["due_date_gt", "due_date_lt", "date_updated_gt", "date_updated_lt"];
    for ((field, value), param) in dates.into_iter().zip(params) {
        if let Some(text) = value {
            q.push((param, parse_date(field, text)?.to_string()));
        }
    }
    if let Some(order) = order_by {
        q.push(("order_by", order.as_str().into()));
    }
    if reverse {
        q.push(("reverse", "true".into()));
    }
    Ok(q)
}

fn check_name(field: &str, value: &str) -> Result<(), ToolError> {
    if value.trim().is_empty() {
        return Err(ToolError::invalid_arguments(format!("`{field}` is empty")));
    }
    Ok(())
}

fn check_ids(field: &str, ids: &[String]) -> Result<(), ToolError> {
    ids.iter().try_for_each(|id| check_id(field, id))
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

impl ClickUp {
    async fn list_tasks(&self, a: ListTasksArgs, ctx: &ToolContext) -> Result<TaskList, ToolError> {
        check_id("list_id", &a.list_id)?;
        let page = a.page.unwrap_or(0);
        let mut query = vec![("archived", "false".to_owned())];
        query.extend(filter_query(
            &a.statuses,
            &a.assignees,
            &a.tags,
            a.include_closed,
            a.include_subtasks,
            [
                ("due_after", &a.due_after),
                ("due_before", &a.due_before),
                ("updated_after", &a.updated_after),
                ("updated_before", &a.updated_before),
            ],
            a.order_by,
            a.reverse,
            page,
        )?);
        let subject = Subject::of("the tasks", "list", &a.list_id);
        let path = format!("/list/{}/task", a.list_id);
        let wire = self.client.get_json(&path, &query, &subject, ctx).await?;
        Ok(task_list(a.list_id, page, wire))
    }

    async fn search_tasks(
        &self,
        a: SearchTasksArgs,
        ctx: &ToolContext,
    ) -> Result<TaskSearch, ToolError> {
        check_id("team_id", &a.team_id)?;
        check_ids("space_ids", &a.space_ids)?;
        check_ids("folder_ids", &a.folder_ids)?;
        check_ids("list_ids", &a.list_ids)?;
        let page = a.page.unwrap_or(0);
        let mut query = filter_query(
            &a.statuses,
            &a.assignees,
            &a.tags,
            a.include_closed,
            a.include_subtasks,
            [
                ("due_after", &a.due_after),
                ("due_before", &a.due_before),
                ("updated_after", &a.updated_after),
                ("updated_before", &a.updated_before),
            ],
            a.order_by,
            a.reverse,
            page,
        )?;
        query.extend(a.space_ids.iter().map(|id| ("space_ids[]", id.clone())));
        query.extend(a.folder_ids.iter().map(|id| ("project_ids[]", id.clone())));
        query.extend(a.list_ids.iter().map(|id| ("list_ids[]", id.clone())));
        let subject = Subject::of("the tasks", "workspace", &a.team_id);
        let path = format!("/team/{}/task", a.team_id);
        let wire = self.client.get_json(&path, &query, &subject, ctx).await?;
        Ok(task_search(a.team_id, page, wire))
    }

    async fn get_task(&self, a: GetTaskArgs, ctx: &ToolContext) -> Result<TaskDetail, ToolError> {
        let mut query = task_ref(&a.task_id, a.team_id.as_deref())?;
        query.push(("include_subtasks", a.include_subtasks.unwrap_or(true).to_string()));
        query.push(("include_markdown_description", "true".into()));
        let subject = Subject::object("task", &a.task_id);
        let path = format!("/task/{}", a.task_id);
        let wire: WireTask = self.client.get_json(&path, &query, &subject, ctx).await?;
        // The description is its creator's; ClickUp does not say whether they may edit it.
        if let Some(creator) = &wire.creator {
            ctx.label_author("/description", creator.name(), None);
        }
        Ok(task_detail(wire))
    }

    async fn create_task(
        &self,
        a: CreateTaskArgs,
        ctx: &ToolContext,
    ) -> Result<TaskChanged, ToolError> {
        check_id("list_id", &a.list_id)?;
        check_name("name", &a.name)?;
        let mut body = json!({ "name": a.name, "notify_all": a.notify_all });
        if let Some(description) = a.description {
            body["markdown_content"] = json!(description);
        }
        if let Some(status) = a.status {
            body["status"] = json!(status);
        }
        if let Some(priority) = a.priority.filter(|p| *p != Priority::None) {
            body["priority"] = priority.wire();
        }
        if !a.assignees.is_empty() {
            body["assignees"] = json!(a.assignees);
        }
        if !a.tags.is_empty() {
            body["tags"] = json!(a.tags);
        }
        if let Some(due) = &a.due_date {
            body["due_date"] = json!(parse_date("due_date", due)?);
            body["due_date_time"] = json!(due.contains(['T', 't', ' ']));
        }
        if let Some(start) = &a.start_date {
            body["start_date"] = json!(parse_date("start_date", start)?);
            body["start_date_time"] = json!(start.contains(['T', 't', ' ']));
        }
        if let Some(parent) = a.parent {
            check_id("parent", &parent)?;
            body["parent"] = json!(parent);
        }
        let subject = Subject::action("creating a task in", "list", &a.list_id);
        let path = format!("/list/{}/task", a.list_id);
        let task: WireTask =
            self.client.send_json(Method::POST, &path, &[], &body, &subject, ctx).await?;
        Ok(task.changed())
    }

    async fn update_task(
        &self,
        a: UpdateTaskArgs,
        ctx: &ToolContext,
    ) -> Result<TaskChanged, ToolError> {
        let query = task_ref(&a.task_id, a.team_id.as_deref())?;
        let mut body = Map::new();
        if let Some(name) = a.name {
            check_name("name", &name)?;
            body.insert("name".into(), json!(name));
        }
        if let Some(description) = a.description {
            body.insert("markdown_content".into(), json!(description));
        }
        if let Some(status) = a.status {
            check_name("status", &status)?;
            body.insert("status".into(), json!(status));
        }
        if let Some(priority) = a.priority {
            body.insert("priority".into(), priority.wire());
        }
        if let Some(due) = &a.due_date {
            body.insert("due_date".into(), json!(parse_date("due_date", due)?));
            body.insert("due_date_time".into(), json!(due.contains(['T', 't', ' '])));
        }
        if let Some(start) = &a.start_date {
            body.insert("start_date".into(), json!(parse_date("start_date", start)?));
            body.insert("start_date_time".into(), json!(start.contains(['T', 't', ' '])));
        }
        if !a.add_assignees.is_empty() || !a.remove_assignees.is_empty() {
            body.insert(
                "assignees".into(),
                json!({ "add": a.add_assignees, "rem": a.remove_assignees }),
            );
        }
        if let Some(archived) = a.archived {
            body.insert("archived".into(), json!(archived));
        }
        if body.is_empty() {
            return Err(ToolError::invalid_arguments(
                "nothing to change: give at least one of `name`, `description`, `status`, \
                 `priority`, `due_date`, `start_date`, `add_assignees`, `remove_assignees`, \
                 `archived`",
            ));
        }
        let subject = Subject::action("updating", "task", &a.task_id);
        let path = format!("/task/{}", a.task_id);
        let body = Value::Object(body);
        let task: WireTask =
            self.client.send_json(Method::PUT, &path, &query, &body, &subject, ctx).await?;
        Ok(task.changed())
    }
}

register_tool! {
    provider: ClickUp,
    name: "list_tasks",
    group: "tasks",
    description: "List the tasks of a ClickUp list (100 a page, from page 0) with status, \
                  assignees, priority, due date and tags; filter by statuses, assignees, tags, \
                  due or update dates; closed tasks and subtasks only when asked. Returns \
                  `next_page` for more.",
    input: ListTasksArgs,
    output: TaskList,
    handler: ClickUp::list_tasks,
}

register_tool! {
    provider: ClickUp,
    name: "search_tasks",
    group: "tasks",
    description: "Find tasks across a ClickUp workspace, filtered by spaces, folders, lists, \
                  statuses, assignees, tags and due or update dates (100 a page, from page 0). \
                  Each hit names its list.",
    input: SearchTasksArgs,
    output: TaskSearch,
    handler: ClickUp::search_tasks,
}

register_tool! {
    provider: ClickUp,
    name: "get_task",
    group: "tasks",
    description: "Get one ClickUp task: description, status, people, dates, time estimate and \
                  tracked time, custom fields by name, checklists and subtasks.",
    input: GetTaskArgs,
    output: TaskDetail,
    handler: ClickUp::get_task,
}

register_tool! {
    provider: ClickUp,
    name: "create_task",
    group: "tasks",
    description: "Create a task in a ClickUp list, optionally with a Markdown description, \
                  status, priority, assignees, tags, dates or a parent task. Returns the new \
                  task's id and URL.",
    input: CreateTaskArgs,
    output: TaskChanged,
    handler: ClickUp::create_task,
}

register_tool! {
    provider: ClickUp,
    name: "update_task",
    group: "tasks",
    description: "Change a ClickUp task: name, description, status, priority, dates, \
                  assignees (add/remove) or archived state. Only the given fields change.",
    input: UpdateTaskArgs,
    output: TaskChanged,
    handler: ClickUp::update_task,
}
