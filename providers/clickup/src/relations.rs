//! How tasks relate: the subtasks of a task, and dependencies ("waiting on" / "blocking")
//! between two tasks.

use quiver_plugin_sdk::prelude::*;
use reqwest::Method;

use crate::client::Subject;
use crate::model::{check_id, id_arg, opt_id_arg};
use crate::tasks::{task_ref, TaskSummary, WireTask};
use crate::ClickUp;

/// Arguments of `list_subtasks`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListSubtasksArgs {
    /// The parent task id, or a custom task id with `team_id`.
    #[serde(deserialize_with = "id_arg", alias = "id", alias = "parent")]
    pub(crate) task_id: String,
    /// The workspace id; needed only when `task_id` is a custom task id (`DEV-42`).
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) team_id: Option<String>,
}

/// Arguments of `add_dependency`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddDependencyArgs {
    /// The task the dependency is added to, or a custom task id with `team_id`.
    #[serde(deserialize_with = "id_arg", alias = "id")]
    pub(crate) task_id: String,
    /// The workspace id; needed only when the task ids are custom task ids (`DEV-42`).
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) team_id: Option<String>,
    /// `task_id` waits on this task: it must be done first.
    #[serde(default, deserialize_with = "opt_id_arg", alias = "waiting_on")]
    pub(crate) depends_on: Option<String>,
    /// This task waits on `task_id`: `task_id` blocks it.
    #[serde(default, deserialize_with = "opt_id_arg", alias = "blocking")]
    pub(crate) dependency_of: Option<String>,
}

/// Result of `list_subtasks`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SubtaskList {
    /// The parent task.
    pub(crate) task_id: String,
    /// Its name.
    pub(crate) name: String,
    /// Its list, where `create_task` with `parent` puts new subtasks.
    pub(crate) list_id: Option<String>,
    /// How many subtasks are still open.
    pub(crate) open: usize,
    /// The subtasks, with status, assignees, priority and due date.
    pub(crate) subtasks: Vec<TaskSummary>,
}

/// Result of `add_dependency`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct DependencyAdded {
    /// The task that waits.
    pub(crate) waiting: String,
    /// The task it waits on.
    pub(crate) waits_on: String,
}

/// The `list_subtasks` result.
pub(crate) fn subtask_list(task_id: String, wire: WireTask) -> SubtaskList {
    let subtasks: Vec<TaskSummary> = wire.subtasks.iter().map(WireTask::summary).collect();
    SubtaskList {
        task_id: wire.id.clone().unwrap_or(task_id),
        name: wire.name.clone().unwrap_or_default(),
        list_id: wire.list_id(),
        open: subtasks.iter().filter(|s| !s.closed).count(),
        subtasks,
    }
}

impl ClickUp {
    async fn list_subtasks(
        &self,
        a: ListSubtasksArgs,
        ctx: &ToolContext,
    ) -> Result<SubtaskList, ToolError> {
        let mut query = task_ref(&a.task_id, a.team_id.as_deref())?;
        query.push(("include_subtasks", "true".into()));
        let subject = Subject::of("the subtasks", "task", &a.task_id);
        let path = format!("/task/{}", a.task_id);
        let wire = self.client.get_json(&path, &query, &subject, ctx).await?;
        Ok(subtask_list(a.task_id, wire))
    }

    async fn add_dependency(
        &self,
        a: AddDependencyArgs,
        ctx: &ToolContext,
    ) -> Result<DependencyAdded, ToolError> {
        let query = task_ref(&a.task_id, a.team_id.as_deref())?;
        let (key, other) = match (a.depends_on, a.dependency_of) {
            (Some(other), None) => ("depends_on", other),
            (None, Some(other)) => ("dependency_of", other),
            _ => {
                return Err(ToolError::invalid_arguments(
                    "give exactly one of `depends_on` (the task `task_id` waits on) or \
                     `dependency_of` (the task that waits on `task_id`)",
                ))
            }
        };
        check_id(key, &other)?;
        if other == a.task_id {
            return Err(ToolError::invalid_arguments(format!(
                "a task cannot depend on itself; give another task in `{key}`"
            )));
        }
        let subject = Subject::action("adding a dependency to", "task", &a.task_id);
        let path = format!("/task/{}/dependency", a.task_id);
        let body = json!({ key: other });
        self.client.request(Method::POST, &path, &query, Some(&body), &subject, ctx).await?;
        Ok(if key == "depends_on" {
            DependencyAdded { waiting: a.task_id, waits_on: other }
        } else {
            DependencyAdded { waiting: other, waits_on: a.task_id }
        })
    }
}

register_tool! {
    provider: ClickUp,
    name: "list_subtasks",
    group: "tasks",
    description: "List the subtasks of a ClickUp task with status, assignees, priority and due \
                  date, and how many are open. New subtasks are made with `create_task` and \
                  `parent`.",
    input: ListSubtasksArgs,
    output: SubtaskList,
    handler: ClickUp::list_subtasks,
}

register_tool! {
    provider: ClickUp,
    name: "add_dependency",
    group: "tasks",
    description: "Make one ClickUp task wait on another: `depends_on` names the task that must \
                  be done first, or `dependency_of` the task that `task_id` blocks.",
    input: AddDependencyArgs,
    output: DependencyAdded,
    handler: ClickUp::add_dependency,
}
