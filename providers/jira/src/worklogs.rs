//! Time tracking: an issue's worklogs, and logging work on it.

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::text::truncate;
use quiver_plugin_sdk::support::time::{format_unix_ms, parse_timestamp_ms};
use reqwest::Method;

use crate::adf;
use crate::client::{check_key, endpoint, Api, Subject};
use crate::issues::rich_text;
use crate::model::{next_start, page_size, person};
use crate::Jira;

/// Longest worklog comment returned, in bytes.
pub(crate) const WORKLOG_COMMENT_MAX_BYTES: usize = 2 * 1024;

/// Arguments of `list_worklogs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListWorklogsArgs {
    /// The issue key, e.g. `PROJ-123`.
    #[serde(alias = "issue_key", alias = "issueKey")]
    pub(crate) key: String,
    /// Worklogs per page, oldest first: 50 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    #[serde(alias = "maxResults")]
    pub(crate) max_results: Option<u32>,
    /// The offset of the first worklog (the previous page's `next_start_at`).
    #[serde(alias = "startAt")]
    pub(crate) start_at: Option<u32>,
}

/// Arguments of `add_worklog`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddWorklogArgs {
    /// The issue key, e.g. `PROJ-123`.
    #[serde(alias = "issue_key", alias = "issueKey")]
    pub(crate) key: String,
    /// The time spent, in Jira's duration format: `3h 30m`, `1d 2h`, `45m` (`w`, `d`, `h`, `m`;
    /// a bare number is minutes; a day and a week are the site's working day and week).
    #[serde(alias = "timeSpent")]
    pub(crate) time_spent: String,
    /// When the work started: `2024-05-07T09:00:00+02:00`, `2024-05-07 09:00` (UTC) or a date;
    /// now when unset.
    pub(crate) started: Option<String>,
    /// What was done, as plain text (Server/Data Center: wiki markup).
    pub(crate) comment: Option<String>,
    /// The issue's new remaining estimate, in the same format (`2h`); by default Jira lowers
    /// the remaining estimate by the time spent.
    pub(crate) remaining_estimate: Option<String>,
}

/// A worklog as Jira sends it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireWorklog {
    id: String,
    #[serde(default)]
    author: Option<Value>,
    #[serde(default)]
    comment: Option<Value>,
    #[serde(default)]
    started: Option<String>,
    #[serde(default)]
    time_spent: Option<String>,
    #[serde(default)]
    time_spent_seconds: Option<u64>,
}

/// `GET /issue/{key}/worklog`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireWorklogs {
    #[serde(default)]
    worklogs: Vec<WireWorklog>,
    #[serde(default)]
    start_at: u64,
    #[serde(default)]
    max_results: Option<u64>,
    #[serde(default)]
    total: Option<u64>,
}

/// One worklog.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Worklog {
    /// The worklog id.
    pub(crate) id: String,
    /// Who logged it (display name).
    pub(crate) author: Option<String>,
    /// When the work started.
    pub(crate) started: Option<String>,
    /// The time spent as Jira shows it, e.g. `3h 30m`.
    pub(crate) time_spent: Option<String>,
    /// The time spent in seconds.
    pub(crate) time_spent_seconds: Option<u64>,
    /// What was done (cut at 2 KiB, saying so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) comment: Option<String>,
}

/// Result of `list_worklogs`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WorklogList {
    /// The issue key.
    pub(crate) key: String,
    /// The worklogs of this page, oldest first.
    pub(crate) worklogs: Vec<Worklog>,
    /// How many worklogs the issue has.
    pub(crate) total: Option<u64>,
    /// The seconds logged by the worklogs of this page.
    pub(crate) page_seconds: u64,
    /// Pass as `start_at` for the next page; null on the last page.
    pub(crate) next_start_at: Option<u64>,
}

/// Result of `add_worklog`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AddedWorklog {
    /// The issue key.
    pub(crate) key: String,
    /// The new worklog.
    #[serde(flatten)]
    pub(crate) worklog: Worklog,
}

fn worklog(w: WireWorklog) -> Worklog {
    Worklog {
        author: w.author.as_ref().and_then(person),
        started: w.started,
        time_spent: w.time_spent,
        time_spent_seconds: w.time_spent_seconds,
        comment: w
            .comment
            .as_ref()
            .and_then(adf::text_of)
            .filter(|t| !t.trim().is_empty())
            .map(|t| truncate(&t, WORKLOG_COMMENT_MAX_BYTES).0),
        id: w.id,
    }
}

/// The result of `list_worklogs`.
pub(crate) fn worklog_list(key: String, page: WireWorklogs) -> WorklogList {
    let next = next_start(page.start_at, page.worklogs.len(), page.max_results, page.total, None);
    let worklogs: Vec<Worklog> = page.worklogs.into_iter().map(worklog).collect();
    WorklogList {
        key,
        page_seconds: worklogs.iter().filter_map(|w| w.time_spent_seconds).sum(),
        worklogs,
        total: page.total,
        next_start_at: next,
    }
}

/// `started` as Jira's worklog API takes it (`2024-05-07T07:00:00.000+0000`, the only format
/// both Cloud and Server accept), from whatever an agent wrote.
pub(crate) fn jira_time(started: &str) -> Result<String, ToolError> {
    let ms = parse_timestamp_ms(started).map_err(|e| {
        ToolError::invalid_arguments(format!(
            "`started` is not a time ({e}); write e.g. `2024-05-07T09:00:00+02:00`"
        ))
    })?;
    Ok(utc_jira_time(ms))
}

/// Unix milliseconds as `2024-05-07T07:00:00.000+0000`.
fn utc_jira_time(ms: i64) -> String {
    let rfc3339 = format_unix_ms(ms);
    format!("{}.000+0000", rfc3339.trim_end_matches('Z'))
}

/// Checks a duration (`3h 30m`) before Jira sees it, so a typo is named here.
fn check_duration(field: &str, value: &str) -> Result<String, ToolError> {
    let value = value.trim();
    let ok = !value.is_empty()
        && value.split_whitespace().all(|part| {
            // A bare number is minutes, as Jira reads it.
            let number = part.trim_end_matches(['w', 'd', 'h', 'm']);
            let units = part.len() - number.len();
            units <= 1
                && !number.is_empty()
                && number.parse::<f64>().is_ok_and(|n| n.is_finite() && n >= 0.0)
        });
    if ok {
        Ok(value.to_owned())
    } else {
        Err(ToolError::invalid_arguments(format!(
            "`{field}` must be a duration such as `3h 30m`, `1d` or `45m`; got `{value}`"
        )))
    }
}

impl Jira {
    async fn list_worklogs(
        &self,
        args: ListWorklogsArgs,
        ctx: &ToolContext,
    ) -> Result<WorklogList, ToolError> {
        let key = check_key("key", &args.key)?;
        let path = endpoint(
            &format!("/issue/{key}/worklog"),
            &[
                ("startAt", Some(args.start_at.unwrap_or(0).to_string())),
                ("maxResults", Some(page_size(args.max_results, 50, 100).to_string())),
            ],
        );
        let subject = Subject::of_issue("the worklogs", &key);
        let page: WireWorklogs = self.client.get_json(Api::Core, &path, &subject, ctx).await?;
        Ok(worklog_list(key, page))
    }

    async fn add_worklog(
        &self,
        args: AddWorklogArgs,
        ctx: &ToolContext,
    ) -> Result<AddedWorklog, ToolError> {
        let key = check_key("key", &args.key)?;
        let time_spent = check_duration("time_spent", &args.time_spent)?;
        let remaining =
            args.remaining_estimate.as_deref().map(|r| check_duration("remaining_estimate", r));
        let remaining = remaining.transpose()?;
        let started = match args.started.as_deref().filter(|s| !s.trim().is_empty()) {
            Some(s) => jira_time(s)?,
            None => utc_jira_time(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(0),
            ),
        };
        let mut body = json!({ "timeSpent": time_spent, "started": started });
        if let Some(comment) = args.comment.filter(|c| !c.trim().is_empty()) {
            body["comment"] = rich_text(&comment, self.client.deployment());
        }
        let path = endpoint(
            &format!("/issue/{key}/worklog"),
            &[
                ("adjustEstimate", remaining.as_ref().map(|_| "new".to_owned())),
                ("newEstimate", remaining),
            ],
        );
        let subject = Subject::of_issue("a new worklog", &key);
        let created: WireWorklog =
            self.client.send_json(Method::POST, Api::Core, &path, &body, &subject, ctx).await?;
        Ok(AddedWorklog { key, worklog: worklog(created) })
    }
}

register_tool! {
    provider: Jira,
    name: "list_worklogs",
    group: "worklogs",
    description: "List the work logged on an issue, oldest first: who, when it started, time \
                  spent (text and seconds) and the comment, with the page's total seconds. \
                  Returns `next_start_at` for more.",
    input: ListWorklogsArgs,
    output: WorklogList,
    handler: Jira::list_worklogs,
}

register_tool! {
    provider: Jira,
    name: "add_worklog",
    group: "worklogs",
    description: "Log time on an issue (`3h 30m`), started now or at `started`, with an \
                  optional comment and a new remaining estimate.",
    input: AddWorklogArgs,
    output: AddedWorklog,
    handler: Jira::add_worklog,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn started_times_become_jiras_format_in_utc() {
        assert_eq!(jira_time("2024-05-07T09:00:00+02:00").unwrap(), "2024-05-07T07:00:00.000+0000");
        assert_eq!(jira_time("2024-05-07").unwrap(), "2024-05-07T00:00:00.000+0000");
        assert_eq!(
            jira_time("2024-05-07T09:30:00.000+0200").unwrap(),
            "2024-05-07T07:30:00.000+0000"
        );
        assert!(jira_time("yesterday").unwrap_err().message.contains("`started`"));
    }

    #[test]
    fn durations_are_checked() {
        assert_eq!(check_duration("t", " 3h 30m ").unwrap(), "3h 30m");
        assert_eq!(check_duration("t", "1.5h").unwrap(), "1.5h");
        assert_eq!(check_duration("t", "90").unwrap(), "90", "minutes");
        assert!(check_duration("t", "3hh").is_err());
        assert!(check_duration("t", "3ч").is_err());
        assert!(check_duration("t", "3 hours").is_err());
        assert!(check_duration("t", "").is_err());
    }
}
