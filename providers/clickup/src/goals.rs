//! Goals (read only): the goals of a workspace with their progress, and one goal with its key
//! results (targets).

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::text::truncate;

use crate::client::Subject;
use crate::model::{
    check_id, id_arg, is_false, iso_from_ms, lenient_string, lenient_u64, user_names, WireUser,
};
use crate::tasks::lenient_vec;
use crate::ClickUp;

/// Longest goal description returned, in bytes.
const GOAL_DESCRIPTION_MAX_BYTES: usize = 4 * 1024;

/// Arguments of `list_goals`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListGoalsArgs {
    /// The workspace id (`team_id` from `list_workspaces`).
    #[serde(deserialize_with = "id_arg", alias = "workspace_id")]
    pub(crate) team_id: String,
    /// Include goals that are done (left out by default).
    #[serde(default)]
    pub(crate) include_completed: bool,
}

/// Arguments of `get_goal`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetGoalArgs {
    /// The goal id (`goal_id` from `list_goals`, a UUID).
    #[serde(deserialize_with = "id_arg", alias = "id")]
    pub(crate) goal_id: String,
}

/// `GET /team/{team_id}/goal`: goals outside folders, and folders with their goals.
#[derive(Debug, Deserialize)]
pub(crate) struct WireGoals {
    #[serde(default, deserialize_with = "lenient_vec")]
    goals: Vec<WireGoal>,
    #[serde(default, deserialize_with = "lenient_vec")]
    folders: Vec<WireGoalFolder>,
}

#[derive(Debug, Deserialize)]
struct WireGoalFolder {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, deserialize_with = "lenient_vec")]
    goals: Vec<WireGoal>,
}

/// A goal, in a listing or (with key results) alone.
#[derive(Debug, Deserialize)]
pub(crate) struct WireGoal {
    #[serde(default, deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    percent_completed: Option<u64>,
    #[serde(default, deserialize_with = "lenient_string")]
    start_date: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    due_date: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    key_result_count: Option<u64>,
    #[serde(default)]
    archived: bool,
    #[serde(default, deserialize_with = "lenient_vec")]
    owners: Vec<WireUser>,
    #[serde(default, deserialize_with = "lenient_vec")]
    key_results: Vec<WireKeyResult>,
    #[serde(default)]
    pretty_url: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireKeyResult {
    #[serde(default, deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    unit: Option<String>,
    #[serde(default)]
    completed: bool,
    #[serde(default, deserialize_with = "lenient_u64")]
    percent_completed: Option<u64>,
    #[serde(default, deserialize_with = "lenient_string")]
    steps_current: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    steps_end: Option<String>,
    #[serde(default)]
    task_ids: Vec<Value>,
    #[serde(default, deserialize_with = "lenient_vec")]
    owners: Vec<WireUser>,
    #[serde(default)]
    last_action: Option<WireAction>,
}

#[derive(Debug, Deserialize)]
struct WireAction {
    #[serde(default)]
    note: Option<String>,
}

/// `GET /goal/{goal_id}`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireGoalReply {
    goal: WireGoal,
}

/// One goal in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct GoalSummary {
    /// The goal id, for `get_goal`.
    pub(crate) goal_id: String,
    /// Its name.
    pub(crate) name: String,
    /// Progress, 0 to 100.
    pub(crate) percent_completed: Option<u64>,
    /// Due date, ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) due_date: Option<String>,
    /// The goal folder it is in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) folder: Option<String>,
    /// How many key results (targets) it has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) key_results: Option<u64>,
    /// Set for an archived goal.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) archived: bool,
}

/// Result of `list_goals`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct GoalList {
    /// The workspace.
    pub(crate) team_id: String,
    /// Its goals, those in folders included.
    pub(crate) goals: Vec<GoalSummary>,
}

/// A key result (target) of a goal.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct KeyResult {
    /// The key result id.
    pub(crate) key_result_id: String,
    /// Its name.
    pub(crate) name: String,
    /// `number`, `currency`, `boolean`, `percentage` or `automatic` (done with its tasks).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub(crate) kind: Option<String>,
    /// Progress, 0 to 100.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) percent_completed: Option<u64>,
    /// Where it stands against its target, e.g. `60 / 100 %`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) progress: Option<String>,
    /// Set when it is met.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) completed: bool,
    /// Its owners.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) owners: Vec<String>,
    /// The tasks that count towards it (`task_id`s for `get_task`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) task_ids: Vec<String>,
    /// The note of its last update.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) last_note: Option<String>,
}

/// Result of `get_goal`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct GoalDetail {
    /// The goal id.
    pub(crate) goal_id: String,
    /// Its name.
    pub(crate) name: String,
    /// Progress, 0 to 100.
    pub(crate) percent_completed: Option<u64>,
    /// The description (cut at 4 KiB, saying so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// Start date, ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) start_date: Option<String>,
    /// Due date, ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) due_date: Option<String>,
    /// Its owners.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) owners: Vec<String>,
    /// Set for an archived goal.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) archived: bool,
    /// Its key results (targets).
    pub(crate) key_results: Vec<KeyResult>,
    /// The goal in ClickUp.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) url: Option<String>,
}

fn goal_summary(g: WireGoal, folder: Option<&str>) -> GoalSummary {
    GoalSummary {
        goal_id: g.id.unwrap_or_default(),
        name: g.name.unwrap_or_default(),
        percent_completed: g.percent_completed,
        due_date: iso_from_ms(g.due_date.as_deref()),
        folder: folder.map(str::to_owned),
        key_results: g.key_result_count,
        archived: g.archived,
    }
}

/// The `list_goals` result.
pub(crate) fn goal_list(team_id: String, wire: WireGoals) -> GoalList {
    let mut goals: Vec<GoalSummary> =
        wire.goals.into_iter().map(|g| goal_summary(g, None)).collect();
    for folder in wire.folders {
        let name = folder.name;
        goals.extend(folder.goals.into_iter().map(|g| goal_summary(g, name.as_deref())));
    }
    GoalList { team_id, goals }
}

/// `60 / 100 %`: the current value against the target, when ClickUp gives both.
fn progress(kr: &WireKeyResult) -> Option<String> {
    let (current, end) = (kr.steps_current.as_deref()?, kr.steps_end.as_deref()?);
    let unit = kr.unit.as_deref().map(str::trim).filter(|u| !u.is_empty());
    Some(match unit {
        Some(unit) => format!("{current} / {end} {unit}"),
        None => format!("{current} / {end}"),
    })
}

/// The `get_goal` result.
pub(crate) fn goal_detail(wire: WireGoalReply) -> GoalDetail {
    let g = wire.goal;
    let key_results = g
        .key_results
        .iter()
        .map(|kr| KeyResult {
            key_result_id: kr.id.clone().unwrap_or_default(),
            name: kr.name.clone().unwrap_or_default(),
            kind: kr.kind.clone(),
            percent_completed: kr.percent_completed,
            progress: progress(kr),
            completed: kr.completed,
            owners: user_names(&kr.owners),
            task_ids: kr
                .task_ids
                .iter()
                .filter_map(|t| match t {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })
                .collect(),
            last_note: kr
                .last_action
                .as_ref()
                .and_then(|a| a.note.clone())
                .filter(|n| !n.trim().is_empty()),
        })
        .collect();
    GoalDetail {
        goal_id: g.id.unwrap_or_default(),
        name: g.name.unwrap_or_default(),
        percent_completed: g.percent_completed,
        description: g
            .description
            .filter(|d| !d.trim().is_empty())
            .map(|d| truncate(&d, GOAL_DESCRIPTION_MAX_BYTES).0),
        start_date: iso_from_ms(g.start_date.as_deref()),
        due_date: iso_from_ms(g.due_date.as_deref()),
        owners: user_names(&g.owners),
        archived: g.archived,
        key_results,
        url: g.pretty_url,
    }
}

impl ClickUp {
    async fn list_goals(&self, a: ListGoalsArgs, ctx: &ToolContext) -> Result<GoalList, ToolError> {
        check_id("team_id", &a.team_id)?;
        let query = vec![("include_completed", a.include_completed.to_string())];
        let subject = Subject::of("the goals", "workspace", &a.team_id);
        let path = format!("/team/{}/goal", a.team_id);
        let wire = self.client.get_json(&path, &query, &subject, ctx).await?;
        Ok(goal_list(a.team_id, wire))
    }

    async fn get_goal(&self, a: GetGoalArgs, ctx: &ToolContext) -> Result<GoalDetail, ToolError> {
        check_id("goal_id", &a.goal_id)?;
        let subject = Subject::object("goal", &a.goal_id);
        let path = format!("/goal/{}", a.goal_id);
        let wire = self.client.get_json(&path, &[], &subject, ctx).await?;
        Ok(goal_detail(wire))
    }
}

register_tool! {
    provider: ClickUp,
    name: "list_goals",
    group: "goals",
    description: "List the goals of a ClickUp workspace (those in goal folders too) with \
                  progress, due date and number of key results; done goals only when asked.",
    input: ListGoalsArgs,
    output: GoalList,
    handler: ClickUp::list_goals,
}

register_tool! {
    provider: ClickUp,
    name: "get_goal",
    group: "goals",
    description: "Get one ClickUp goal: description, dates, owners, progress, and each key \
                  result (target) with its progress and the tasks that count towards it.",
    input: GetGoalArgs,
    output: GoalDetail,
    handler: ClickUp::get_goal,
}
