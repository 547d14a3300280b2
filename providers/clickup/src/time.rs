//! Time tracking: the time entries of a workspace in a date range, with totals per person;
//! the token user's timer: start it on a task, stop it, see the one running.

use std::collections::BTreeMap;

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::http::unix_now;
use reqwest::Method;

use crate::client::Subject;
use crate::model::{
    check_id, human_ms, id_arg, is_false, iso_from_ms, lenient_string, opt_id_arg, parse_date,
    WireStatus, WireTag, WireUser,
};
use crate::ClickUp;

/// At most this many entries are listed; totals cover them all.
pub(crate) const ENTRIES_MAX: usize = 100;

/// Arguments of `list_time_entries`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListTimeEntriesArgs {
    /// The workspace id (`team_id` from `list_workspaces`).
    #[serde(deserialize_with = "id_arg", alias = "workspace_id")]
    pub(crate) team_id: String,
    /// Start of the range: ISO 8601 or Unix milliseconds. With neither date, ClickUp returns
    /// the last 30 days.
    pub(crate) start_date: Option<String>,
    /// End of the range: ISO 8601 or Unix milliseconds.
    pub(crate) end_date: Option<String>,
    /// Only the entries of these user ids (`user_id` from `list_workspaces`); others' entries
    /// need a workspace owner or admin token. By default, the token's own user.
    #[serde(default)]
    pub(crate) assignees: Vec<u64>,
    /// Only entries on this task.
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) task_id: Option<String>,
    /// Only entries on tasks of this list.
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) list_id: Option<String>,
    /// Only entries on tasks of this folder.
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) folder_id: Option<String>,
    /// Only entries on tasks of this space.
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) space_id: Option<String>,
}

/// `GET /team/{team_id}/time_entries`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTimeEntries {
    #[serde(default)]
    data: Vec<WireTimeEntry>,
}

#[derive(Debug, Deserialize)]
struct WireTimeEntry {
    #[serde(default, deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default)]
    task: Option<WireEntryTask>,
    #[serde(default)]
    user: Option<WireUser>,
    #[serde(default)]
    billable: bool,
    #[serde(default, deserialize_with = "lenient_string")]
    start: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    end: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    duration: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    tags: Vec<WireTag>,
    #[serde(default)]
    task_location: Option<WireLocation>,
}

#[derive(Debug, Deserialize)]
struct WireEntryTask {
    #[serde(default, deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default)]
    custom_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    status: Option<WireStatus>,
}

#[derive(Debug, Deserialize)]
struct WireLocation {
    #[serde(default)]
    list_name: Option<String>,
}

/// One time entry.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TimeEntry {
    /// The task the time was tracked on (absent for time without a task).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_id: Option<String>,
    /// The custom task id, when the workspace uses them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) custom_id: Option<String>,
    /// The task's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_name: Option<String>,
    /// The task's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_status: Option<String>,
    /// The task's list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) list_name: Option<String>,
    /// Who tracked it.
    pub(crate) user: Option<String>,
    /// Start, ISO 8601.
    pub(crate) start: Option<String>,
    /// End, ISO 8601; absent while the timer runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) end: Option<String>,
    /// How long, e.g. `1 h 12 min`, or `running`.
    pub(crate) duration: String,
    /// What was done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// Set for billable time.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) billable: bool,
    /// The entry's tags.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tags: Vec<String>,
}

/// Result of `list_time_entries`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TimeEntryList {
    /// The workspace.
    pub(crate) team_id: String,
    /// The range's start as asked, ISO 8601 (absent: ClickUp's last 30 days).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) start_date: Option<String>,
    /// The range's end as asked, ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) end_date: Option<String>,
    /// How many entries there are in all.
    pub(crate) entries_total: usize,
    /// The time tracked in all (finished entries), e.g. `12 h 30 min`.
    pub(crate) total_duration: String,
    /// The time tracked per person.
    pub(crate) by_user: BTreeMap<String, String>,
    /// The entries (the first 100).
    pub(crate) entries: Vec<TimeEntry>,
    /// Says how many entries were left out, when some were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
}

/// The `list_time_entries` result.
pub(crate) fn time_entry_list(
    team_id: String,
    start_date: Option<String>,
    end_date: Option<String>,
    wire: WireTimeEntries,
) -> TimeEntryList {
    let entries_total = wire.data.len();
    let mut total: u64 = 0;
    let mut per_user: BTreeMap<String, u64> = BTreeMap::new();
    let mut entries = Vec::new();
    for e in wire.data {
        let (_, finished, entry) = time_entry(e);
        if let Some(ms) = finished {
            total += ms;
            let user = entry.user.clone().unwrap_or_else(|| "unknown".into());
            *per_user.entry(user).or_default() += ms;
        }
        if entries.len() < ENTRIES_MAX {
            entries.push(entry);
        }
    }
    let note = (entries_total > ENTRIES_MAX).then(|| {
        format!(
            "{} of {entries_total} entries listed (totals count them all); narrow the date \
             range, or filter by assignees, task, list, folder or space",
            ENTRIES_MAX
        )
    });
    TimeEntryList {
        team_id,
        start_date,
        end_date,
        entries_total,
        total_duration: human_ms(total),
        by_user: per_user.into_iter().map(|(k, v)| (k, human_ms(v))).collect(),
        entries,
        note,
    }
}

/// Arguments of `start_timer`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StartTimerArgs {
    /// The workspace id (`team_id` from `list_workspaces`).
    #[serde(deserialize_with = "id_arg", alias = "workspace_id")]
    pub(crate) team_id: String,
    /// The task to track time on: its own id (`task_id` from a listing, not a custom id such
    /// as `DEV-42`). Workspaces on the Free Forever and Unlimited plans need one.
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) task_id: Option<String>,
    /// What is being done.
    pub(crate) description: Option<String>,
    /// Mark the time billable.
    #[serde(default)]
    pub(crate) billable: bool,
    /// Time-tracking labels (Business plan and above).
    #[serde(default)]
    pub(crate) tags: Vec<String>,
}

/// Arguments of `stop_timer`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TimerArgs {
    /// The workspace id (`team_id` from `list_workspaces`).
    #[serde(deserialize_with = "id_arg", alias = "workspace_id")]
    pub(crate) team_id: String,
}

/// Arguments of `get_running_timer`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetRunningTimerArgs {
    /// The workspace id (`team_id` from `list_workspaces`).
    #[serde(deserialize_with = "id_arg", alias = "workspace_id")]
    pub(crate) team_id: String,
    /// Another member's user id (`user_id` from `list_workspaces`); by default the token's
    /// own user. Others' timers need a workspace owner or admin token.
    pub(crate) assignee: Option<u64>,
}

/// `POST …/time_entries/start`, `POST …/time_entries/stop`, `GET …/time_entries/current`:
/// `{"data": entry}`, or `{"data": null}` when no timer runs.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTimer {
    #[serde(default)]
    data: Option<WireTimeEntry>,
}

/// Result of `start_timer`, `stop_timer` and `get_running_timer`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Timer {
    /// The workspace.
    pub(crate) team_id: String,
    /// Whether the timer runs now.
    pub(crate) running: bool,
    /// The time entry's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) timer_id: Option<String>,
    /// The entry: task, person, start, end, duration (`running` while it runs).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub(crate) entry: Option<TimeEntry>,
    /// How long the timer has run so far, e.g. `25 min`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) elapsed: Option<String>,
}

fn time_entry(e: WireTimeEntry) -> (Option<String>, Option<u64>, TimeEntry) {
    let user = e.user.as_ref().map(WireUser::name);
    // A running timer has a negative duration (minus its start time).
    let ms = e.duration.as_deref().and_then(|d| d.trim().parse::<i64>().ok());
    let finished = ms.filter(|ms| *ms >= 0).map(|ms| ms as u64);
    let task = e.task.as_ref();
    let entry = TimeEntry {
        task_id: task.and_then(|t| t.id.clone()),
        custom_id: task.and_then(|t| t.custom_id.clone()),
        task_name: task.and_then(|t| t.name.clone()),
        task_status: task.and_then(|t| t.status.as_ref()).and_then(|s| s.status.clone()),
        list_name: e.task_location.as_ref().and_then(|l| l.list_name.clone()),
        user,
        start: iso_from_ms(e.start.as_deref()),
        end: finished.and(iso_from_ms(e.end.as_deref())),
        duration: finished.map(human_ms).unwrap_or_else(|| "running".into()),
        description: e.description.filter(|d| !d.trim().is_empty()),
        billable: e.billable,
        tags: e.tags.into_iter().map(|t| t.name).collect(),
    };
    (e.id, finished, entry)
}

/// The timer result; `now_ms` dates the elapsed time of a running timer.
pub(crate) fn timer(team_id: String, wire: WireTimer, now_ms: u64) -> Timer {
    let Some(e) = wire.data else {
        return Timer { team_id, running: false, timer_id: None, entry: None, elapsed: None };
    };
    let start_ms = e.start.as_deref().and_then(|s| s.trim().parse::<u64>().ok());
    let (timer_id, finished, entry) = time_entry(e);
    let running = finished.is_none();
    let elapsed =
        if running { start_ms.map(|start| human_ms(now_ms.saturating_sub(start))) } else { None };
    Timer { team_id, running, timer_id, entry: Some(entry), elapsed }
}

impl ClickUp {
    async fn start_timer(&self, a: StartTimerArgs, ctx: &ToolContext) -> Result<Timer, ToolError> {
        check_id("team_id", &a.team_id)?;
        let mut body = json!({ "billable": a.billable });
        if let Some(task_id) = a.task_id {
            check_id("task_id", &task_id)?;
            // The timer takes no `custom_task_ids` switch: only a task's own id names it.
            if task_id.contains('-') {
                return Err(ToolError::invalid_arguments(format!(
                    "`{task_id}` looks like a custom task id; start_timer takes the task's own \
                     id (`task_id` from list_tasks, search_tasks or get_task)"
                )));
            }
            body["tid"] = json!(task_id);
        }
        if let Some(description) = a.description.filter(|d| !d.trim().is_empty()) {
            body["description"] = json!(description);
        }
        if !a.tags.is_empty() {
            let tags: Vec<Value> = a.tags.iter().map(|t| json!({ "name": t })).collect();
            body["tags"] = Value::Array(tags);
        }
        let subject = Subject::action("starting a timer in", "workspace", &a.team_id);
        let path = format!("/team/{}/time_entries/start", a.team_id);
        let wire = self.client.send_json(Method::POST, &path, &[], &body, &subject, ctx).await?;
        Ok(timer(a.team_id, wire, unix_now() * 1000))
    }

    async fn stop_timer(&self, a: TimerArgs, ctx: &ToolContext) -> Result<Timer, ToolError> {
        check_id("team_id", &a.team_id)?;
        let subject = Subject::action("stopping the timer in", "workspace", &a.team_id);
        let path = format!("/team/{}/time_entries/stop", a.team_id);
        let wire =
            self.client.send_json(Method::POST, &path, &[], &json!({}), &subject, ctx).await?;
        Ok(timer(a.team_id, wire, unix_now() * 1000))
    }

    async fn get_running_timer(
        &self,
        a: GetRunningTimerArgs,
        ctx: &ToolContext,
    ) -> Result<Timer, ToolError> {
        check_id("team_id", &a.team_id)?;
        let query: Vec<(&str, String)> =
            a.assignee.iter().map(|id| ("assignee", id.to_string())).collect();
        let subject = Subject::of("the running timer", "workspace", &a.team_id);
        let path = format!("/team/{}/time_entries/current", a.team_id);
        let wire = self.client.get_json(&path, &query, &subject, ctx).await?;
        Ok(timer(a.team_id, wire, unix_now() * 1000))
    }

    async fn list_time_entries(
        &self,
        a: ListTimeEntriesArgs,
        ctx: &ToolContext,
    ) -> Result<TimeEntryList, ToolError> {
        check_id("team_id", &a.team_id)?;
        let mut query: Vec<(&'static str, String)> =
            vec![("include_location_names", "true".into())];
        let start = a.start_date.as_deref().map(|d| parse_date("start_date", d)).transpose()?;
        let end = a.end_date.as_deref().map(|d| parse_date("end_date", d)).transpose()?;
        if let (Some(s), Some(e)) = (start, end) {
            if e < s {
                return Err(ToolError::invalid_arguments(
                    "`end_date` is before `start_date`; swap them",
                ));
            }
        }
        if let Some(s) = start {
            query.push(("start_date", s.to_string()));
        }
        if let Some(e) = end {
            query.push(("end_date", e.to_string()));
        }
        if !a.assignees.is_empty() {
            let ids: Vec<String> = a.assignees.iter().map(u64::to_string).collect();
            query.push(("assignee", ids.join(",")));
        }
        let locations = [
            ("task_id", a.task_id),
            ("list_id", a.list_id),
            ("folder_id", a.folder_id),
            ("space_id", a.space_id),
        ];
        let given: Vec<_> = locations.into_iter().filter_map(|(k, v)| Some((k, v?))).collect();
        if given.len() > 1 {
            return Err(ToolError::invalid_arguments(
                "ClickUp filters time entries by one of `task_id`, `list_id`, `folder_id`, \
                 `space_id` at a time; give only one",
            ));
        }
        for (key, id) in given {
            check_id(key, &id)?;
            query.push((key, id));
        }
        let subject = Subject::of("the time entries", "workspace", &a.team_id);
        let path = format!("/team/{}/time_entries", a.team_id);
        let wire = self.client.get_json(&path, &query, &subject, ctx).await?;
        let iso = |ms: Option<i64>| ms.and_then(|ms| iso_from_ms(Some(&ms.to_string())));
        Ok(time_entry_list(a.team_id, iso(start), iso(end), wire))
    }
}

register_tool! {
    provider: ClickUp,
    name: "list_time_entries",
    group: "time_tracking",
    description: "List the time tracked in a ClickUp workspace over a date range (the last 30 \
                  days by default), for the token's user or given assignees, optionally of one \
                  task, list, folder or space; with totals per person.",
    input: ListTimeEntriesArgs,
    output: TimeEntryList,
    handler: ClickUp::list_time_entries,
}

register_tool! {
    provider: ClickUp,
    name: "start_timer",
    group: "time_tracking",
    description: "Start the token user's ClickUp timer, on a task and with a description when \
                  given (a timer already running is stopped by ClickUp first).",
    input: StartTimerArgs,
    output: Timer,
    handler: ClickUp::start_timer,
}

register_tool! {
    provider: ClickUp,
    name: "stop_timer",
    group: "time_tracking",
    description: "Stop the token user's running ClickUp timer; returns the finished time entry \
                  with its duration.",
    input: TimerArgs,
    output: Timer,
    handler: ClickUp::stop_timer,
}

register_tool! {
    provider: ClickUp,
    name: "get_running_timer",
    group: "time_tracking",
    description: "Get the timer running now in a ClickUp workspace (the token user's, or a \
                  member's): task, start and time elapsed; `running: false` when none runs.",
    input: GetRunningTimerArgs,
    output: Timer,
    handler: ClickUp::get_running_timer,
}
