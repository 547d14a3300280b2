//! Issues: JQL search, one issue with its custom fields by name, create, update, link.

use std::collections::BTreeMap;

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::text::truncate;
use reqwest::Method;

use crate::adf;
use crate::client::{check_key, check_project, endpoint, Api, Subject};
use crate::fields::{compact, to_jira, user_ref, FieldMap};
use crate::model::{
    is_zero, name, names, next_start, page_size, person_at, status_category, text, Fields,
};
use crate::{Deployment, Jira};

/// Longest description returned, in bytes.
pub(crate) const DESCRIPTION_MAX_BYTES: usize = 32 * 1024;

/// The fields a search asks for: what a hit shows.
const SEARCH_FIELDS: &[&str] =
    &["summary", "status", "issuetype", "assignee", "priority", "updated", "labels"];

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// Arguments of `search_issues`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchIssuesArgs {
    /// A JQL query, e.g. `project = PROJ AND status != Done ORDER BY updated DESC` or
    /// `assignee = currentUser() AND sprint in openSprints()`. Jira Cloud rejects unbounded
    /// queries: include a restriction such as `project = …`.
    #[serde(alias = "query")]
    pub(crate) jql: String,
    /// Extra fields to show for each hit, by name or id (e.g. `["Story Points", "Sprint"]`);
    /// summary, status, type, assignee, priority, labels and update time are always shown.
    pub(crate) fields: Option<Vec<String>>,
    /// Hits per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    #[serde(alias = "maxResults")]
    pub(crate) max_results: Option<u32>,
    /// Jira Cloud: the `next_page_token` of the previous page.
    #[serde(alias = "nextPageToken")]
    pub(crate) next_page_token: Option<String>,
    /// Jira Server/Data Center: the offset of the first hit (the previous page's
    /// `next_start_at`).
    #[serde(alias = "startAt")]
    pub(crate) start_at: Option<u32>,
}

/// Arguments of `get_issue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetIssueArgs {
    /// The issue key, e.g. `PROJ-123` (a numeric issue id works too).
    #[serde(alias = "issue_key", alias = "issueKey")]
    pub(crate) key: String,
    /// Only these custom fields, by name or id (e.g. `["Story Points"]`); by default every
    /// non-empty custom field is shown.
    pub(crate) custom_fields: Option<Vec<String>>,
}

/// Arguments of `create_issue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateIssueArgs {
    /// The project key, e.g. `PROJ`.
    pub(crate) project: String,
    /// The issue type's name: `Task` (the default), `Bug`, `Story`, `Epic`, `Sub-task`…
    pub(crate) issue_type: Option<String>,
    /// The title.
    pub(crate) summary: String,
    /// The description, as plain text (Server/Data Center: wiki markup).
    pub(crate) description: Option<String>,
    /// Labels (no spaces).
    pub(crate) labels: Option<Vec<String>>,
    /// The priority's name, e.g. `High`.
    pub(crate) priority: Option<String>,
    /// Who to assign: the account id on Jira Cloud, the username on Server/Data Center.
    pub(crate) assignee: Option<String>,
    /// The parent issue key, for a sub-task or an epic's child.
    pub(crate) parent: Option<String>,
    /// Component names.
    pub(crate) components: Option<Vec<String>>,
    /// Other fields by name or id, e.g. `{"Story Points": 5, "Team": "Core", "Fix versions":
    /// ["1.2"]}`. Plain values are put into Jira's shapes (options, versions, users, rich text);
    /// Jira's own shapes (`{"value": "Core"}`, `{"id": "10001"}`) pass unchanged.
    pub(crate) fields: Option<Map<String, Value>>,
}

/// Arguments of `update_issue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateIssueArgs {
    /// The issue key, e.g. `PROJ-123`.
    #[serde(alias = "issue_key", alias = "issueKey")]
    pub(crate) key: String,
    /// A new title.
    pub(crate) summary: Option<String>,
    /// A new description, as plain text (Server/Data Center: wiki markup). Replaces the old one.
    pub(crate) description: Option<String>,
    /// The new labels (replaces them all).
    pub(crate) labels: Option<Vec<String>>,
    /// The priority's name, e.g. `High`.
    pub(crate) priority: Option<String>,
    /// Who to assign: the account id on Jira Cloud, the username on Server/Data Center; `none`
    /// unassigns.
    pub(crate) assignee: Option<String>,
    /// Other fields by name or id, e.g. `{"Story Points": 8, "Sprint": 12}`; `null` clears a
    /// field. Plain values are put into Jira's shapes as in `create_issue`.
    pub(crate) fields: Option<Map<String, Value>>,
}

/// Arguments of `list_child_issues`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListChildIssuesArgs {
    /// The parent's key: an epic (its stories, tasks and bugs) or any issue (its sub-tasks),
    /// e.g. `PROJ-7`.
    #[serde(alias = "issue_key", alias = "issueKey", alias = "epic_key", alias = "parent")]
    pub(crate) key: String,
    /// Children per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    #[serde(alias = "maxResults")]
    pub(crate) max_results: Option<u32>,
    /// Jira Cloud: the `next_page_token` of the previous page.
    #[serde(alias = "nextPageToken")]
    pub(crate) next_page_token: Option<String>,
    /// Jira Server/Data Center: the offset of the first child (the previous page's
    /// `next_start_at`).
    #[serde(alias = "startAt")]
    pub(crate) start_at: Option<u32>,
}

/// Arguments of `link_issues`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LinkIssuesArgs {
    /// The issue the link reads from, e.g. `PROJ-1` in "PROJ-1 blocks PROJ-2".
    pub(crate) from_key: String,
    /// The link type's name: `Blocks`, `Relates`, `Duplicate`, `Cloners`… (the site's types).
    #[serde(rename = "type", alias = "link_type")]
    pub(crate) link_type: String,
    /// The issue the link points to, e.g. `PROJ-2` in "PROJ-1 blocks PROJ-2".
    pub(crate) to_key: String,
    /// A comment to add with the link, as plain text.
    pub(crate) comment: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// What Jira sends (only the kept fields)
// ---------------------------------------------------------------------------------------------

/// An issue as search and `GET /issue` send it; `fields` stays a map (custom fields vary).
#[derive(Debug, Deserialize)]
pub(crate) struct WireIssue {
    pub(crate) key: String,
    #[serde(default)]
    pub(crate) fields: Fields,
}

/// The search envelopes: `/rest/api/3/search/jql` (`isLast`, `nextPageToken`) and
/// `/rest/api/2/search` (`startAt`, `maxResults`, `total`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireSearch {
    #[serde(default)]
    pub(crate) issues: Vec<WireIssue>,
    #[serde(default)]
    pub(crate) start_at: u64,
    #[serde(default)]
    pub(crate) max_results: Option<u64>,
    #[serde(default)]
    pub(crate) total: Option<u64>,
    #[serde(default)]
    pub(crate) is_last: Option<bool>,
    #[serde(default)]
    pub(crate) next_page_token: Option<String>,
}

/// What `POST /issue` answers.
#[derive(Debug, Deserialize)]
pub(crate) struct WireCreated {
    pub(crate) id: String,
    pub(crate) key: String,
}

/// Which page of a search to read.
#[derive(Debug, Default)]
pub(crate) struct SearchPage {
    /// Hits per page (20 by default, at most 100).
    pub(crate) max_results: Option<u32>,
    /// Cloud: the previous page's token.
    pub(crate) next_page_token: Option<String>,
    /// Server/Data Center: the offset of the first hit.
    pub(crate) start_at: Option<u32>,
}

// ---------------------------------------------------------------------------------------------
// What the tools return
// ---------------------------------------------------------------------------------------------

/// One search hit.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueSummary {
    /// The issue key, e.g. `PROJ-123`.
    pub(crate) key: String,
    /// The title.
    pub(crate) summary: Option<String>,
    /// The workflow status, e.g. `In Progress`.
    pub(crate) status: Option<String>,
    /// The status category: `new`, `indeterminate` (in progress) or `done`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status_category: Option<String>,
    /// The issue type, e.g. `Bug`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) issue_type: Option<String>,
    /// The assignee's display name.
    pub(crate) assignee: Option<String>,
    /// The priority, e.g. `High`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) priority: Option<String>,
    /// Labels.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) labels: Vec<String>,
    /// When it last changed.
    pub(crate) updated: Option<String>,
    /// The extra fields asked for, by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) fields: BTreeMap<String, Value>,
}

/// Result of `search_issues`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SearchResult {
    /// The query.
    pub(crate) jql: String,
    /// The hits of this page, in the query's order.
    pub(crate) issues: Vec<IssueSummary>,
    /// How many issues match (Server/Data Center only: Cloud's search does not count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
    /// Jira Cloud: pass as `next_page_token` for the next page; null on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_page_token: Option<String>,
    /// Jira Server/Data Center: pass as `start_at` for the next page; null on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_start_at: Option<u64>,
    /// Whether this is the last page.
    pub(crate) is_last: bool,
}

/// A link to another issue.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueLink {
    /// How this issue relates to the other, e.g. `blocks`, `is blocked by`, `relates to`.
    pub(crate) relation: String,
    /// The other issue's key.
    pub(crate) key: String,
    /// The other issue's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) summary: Option<String>,
    /// The other issue's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<String>,
}

/// A sub-task or the parent.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueRef {
    /// The issue key.
    pub(crate) key: String,
    /// Its title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) summary: Option<String>,
    /// Its status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<String>,
}

/// Result of `get_issue`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueDetail {
    /// The issue key, e.g. `PROJ-123`.
    pub(crate) key: String,
    /// The project key.
    pub(crate) project: Option<String>,
    /// The title.
    pub(crate) summary: Option<String>,
    /// The issue type, e.g. `Bug`.
    pub(crate) issue_type: Option<String>,
    /// The workflow status, e.g. `In Progress`.
    pub(crate) status: Option<String>,
    /// The status category: `new`, `indeterminate` (in progress) or `done`.
    pub(crate) status_category: Option<String>,
    /// How it was resolved, e.g. `Fixed`; null while unresolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) resolution: Option<String>,
    /// The priority, e.g. `High`.
    pub(crate) priority: Option<String>,
    /// The assignee's display name; null when unassigned.
    pub(crate) assignee: Option<String>,
    /// The reporter's display name.
    pub(crate) reporter: Option<String>,
    /// Labels.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) labels: Vec<String>,
    /// Component names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) components: Vec<String>,
    /// Fix version names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) fix_versions: Vec<String>,
    /// The parent (an epic, or the issue of a sub-task).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parent: Option<IssueRef>,
    /// When it was created.
    pub(crate) created: Option<String>,
    /// When it last changed.
    pub(crate) updated: Option<String>,
    /// When it was resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) resolved: Option<String>,
    /// The due date.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) due: Option<String>,
    /// The description as plain text (cut at 32 KiB, saying so).
    pub(crate) description: Option<String>,
    /// Links to other issues.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) links: Vec<IssueLink>,
    /// Sub-tasks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) subtasks: Vec<IssueRef>,
    /// Number of comments (read them with `list_comments`).
    pub(crate) comments: u64,
    /// Number of attachments.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) attachments: u64,
    /// Non-empty custom fields by name, values compacted (users → names, options → values,
    /// rich text → text, sprints → `{id, name, state}`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) custom_fields: BTreeMap<String, Value>,
    /// Set when custom field names could not be read (ids are shown instead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
    /// The issue's page.
    pub(crate) url: String,
}

/// Result of `list_child_issues`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ChildIssues {
    /// The parent's key.
    pub(crate) key: String,
    /// The children, as search hits (the query that found them is `jql`).
    #[serde(flatten)]
    pub(crate) found: SearchResult,
}

/// Result of `create_issue`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CreatedIssue {
    /// The new issue's key.
    pub(crate) key: String,
    /// Its numeric id.
    pub(crate) id: String,
    /// Its page.
    pub(crate) url: String,
}

/// Result of `update_issue`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct UpdatedIssue {
    /// The issue key.
    pub(crate) key: String,
    /// The fields set, by name.
    pub(crate) updated: Vec<String>,
    /// The issue's page.
    pub(crate) url: String,
}

/// Result of `link_issues`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct LinkedIssues {
    /// The issue the link reads from.
    pub(crate) from_key: String,
    /// The link type.
    #[serde(rename = "type")]
    pub(crate) link_type: String,
    /// The issue the link points to.
    pub(crate) to_key: String,
}

// ---------------------------------------------------------------------------------------------
// Mapping
// ---------------------------------------------------------------------------------------------

/// A search hit, with the extra `fields` (`(id, name)`) asked for.
pub(crate) fn issue_summary(issue: WireIssue, extra: &[(String, String)]) -> IssueSummary {
    let f = &issue.fields;
    IssueSummary {
        summary: text(f, "summary"),
        status: name(f, "status"),
        status_category: status_category(f),
        issue_type: name(f, "issuetype"),
        assignee: person_at(f, "assignee"),
        priority: name(f, "priority"),
        labels: names(f, "labels"),
        updated: text(f, "updated"),
        fields: extra
            .iter()
            .filter_map(|(id, label)| f.get(id).and_then(compact).map(|v| (label.clone(), v)))
            .collect(),
        key: issue.key,
    }
}

/// The result of a search page.
pub(crate) fn search_result(
    jql: String,
    page: WireSearch,
    extra: &[(String, String)],
    deployment: Deployment,
) -> SearchResult {
    let count = page.issues.len();
    let (next_page_token, next_start_at, is_last) = match deployment {
        Deployment::Cloud => {
            let token = page.next_page_token.filter(|t| !t.is_empty());
            let last = page.is_last.unwrap_or(token.is_none()) || token.is_none();
            (if last { None } else { token }, None, last)
        }
        Deployment::Server => {
            let next = next_start(page.start_at, count, page.max_results, page.total, page.is_last);
            (None, next, next.is_none())
        }
    };
    SearchResult {
        jql,
        issues: page.issues.into_iter().map(|i| issue_summary(i, extra)).collect(),
        total: page.total,
        next_page_token,
        next_start_at,
        is_last,
    }
}

fn issue_ref(value: &Value) -> Option<IssueRef> {
    let key = value.get("key").and_then(Value::as_str)?.to_owned();
    let fields = value.get("fields");
    Some(IssueRef {
        key,
        summary: fields.and_then(|f| f.get("summary")).and_then(Value::as_str).map(str::to_owned),
        status: fields
            .and_then(|f| f.get("status"))
            .and_then(|s| s.get("name"))
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// `issuelinks` as relations read from this issue: an entry with `outwardIssue` reads "this
/// issue <outward> other" (`blocks`), one with `inwardIssue` "this issue <inward> other"
/// (`is blocked by`).
fn links(fields: &Fields) -> Vec<IssueLink> {
    let Some(entries) = fields.get("issuelinks").and_then(Value::as_array) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|link| {
            let kind = link.get("type");
            let (other, verb) = match (link.get("outwardIssue"), link.get("inwardIssue")) {
                (Some(other), _) => (other, "outward"),
                (None, Some(other)) => (other, "inward"),
                _ => return None,
            };
            let relation = kind
                .and_then(|t| t.get(verb))
                .and_then(Value::as_str)
                .or_else(|| kind.and_then(|t| t.get("name")).and_then(Value::as_str))
                .unwrap_or("relates to")
                .to_owned();
            let other = issue_ref(other)?;
            Some(IssueLink {
                relation,
                key: other.key,
                summary: other.summary,
                status: other.status,
            })
        })
        .collect()
}

/// The custom fields of an issue by name; `only` restricts them to the given ids.
fn custom_fields(
    fields: &Fields,
    map: Option<&FieldMap>,
    only: Option<&[String]>,
) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for (id, value) in fields {
        if !id.starts_with("customfield_") || only.is_some_and(|ids| !ids.contains(id)) {
            continue;
        }
        let info = map.and_then(|m| m.get(id));
        if info.is_some_and(|i| i.is_noise()) {
            continue;
        }
        let Some(value) = compact(value) else { continue };
        let name = info.map(|i| i.name.clone()).unwrap_or_else(|| id.clone());
        // Two fields of one name: keep both, the second under `Name (customfield_…)`.
        let label = if out.contains_key(&name) { format!("{name} ({id})") } else { name };
        out.insert(label, value);
    }
    out
}

/// The result of `get_issue`.
pub(crate) fn issue_detail(
    issue: WireIssue,
    map: Option<&FieldMap>,
    only: Option<&[String]>,
    site: &str,
) -> IssueDetail {
    let f = &issue.fields;
    let count = |key: &str| -> u64 {
        match f.get(key) {
            Some(Value::Array(items)) => items.len() as u64,
            Some(Value::Object(o)) => o
                .get("total")
                .and_then(Value::as_u64)
                .or_else(|| o.get("comments").and_then(Value::as_array).map(|c| c.len() as u64))
                .unwrap_or(0),
            _ => 0,
        }
    };
    IssueDetail {
        project: f
            .get("project")
            .and_then(|p| p.get("key"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        summary: text(f, "summary"),
        issue_type: name(f, "issuetype"),
        status: name(f, "status"),
        status_category: status_category(f),
        resolution: name(f, "resolution"),
        priority: name(f, "priority"),
        assignee: person_at(f, "assignee"),
        reporter: person_at(f, "reporter"),
        labels: names(f, "labels"),
        components: names(f, "components"),
        fix_versions: names(f, "fixVersions"),
        parent: f.get("parent").and_then(issue_ref),
        created: text(f, "created"),
        updated: text(f, "updated"),
        resolved: text(f, "resolutiondate"),
        due: text(f, "duedate"),
        description: f
            .get("description")
            .and_then(adf::text_of)
            .map(|t| truncate(&t, DESCRIPTION_MAX_BYTES).0),
        links: links(f),
        subtasks: f
            .get("subtasks")
            .and_then(Value::as_array)
            .map(|s| s.iter().filter_map(issue_ref).collect())
            .unwrap_or_default(),
        comments: count("comment"),
        attachments: count("attachment"),
        custom_fields: custom_fields(f, map, only),
        note: None,
        url: format!("{site}browse/{}", issue.key),
        key: issue.key,
    }
}

/// `fields` of a create or update: the named arguments, then `extra` by name or id.
fn field_values(
    named: Vec<(&str, Value)>,
    extra: Option<Map<String, Value>>,
    map: Option<&FieldMap>,
    deployment: Deployment,
) -> Result<(Map<String, Value>, Vec<String>), ToolError> {
    let mut fields = Map::new();
    let mut labels = Vec::new();
    for (id, value) in named {
        labels.push(id.to_owned());
        fields.insert(id.to_owned(), value);
    }
    if let (Some(extra), Some(map)) = (extra, map) {
        for (name, value) in extra {
            let field = map.resolve(&name)?;
            if fields.contains_key(&field.id) {
                return Err(ToolError::invalid_arguments(format!(
                    "`{name}` is set twice (also by its own argument)"
                )));
            }
            labels.push(field.name.clone());
            fields.insert(field.id.clone(), to_jira(field, value, deployment));
        }
    }
    Ok((fields, labels))
}

/// Rich text for this deployment: ADF on Cloud, the string on Server/Data Center.
pub(crate) fn rich_text(text: &str, deployment: Deployment) -> Value {
    match deployment {
        Deployment::Cloud => adf::from_text(text),
        Deployment::Server => json!(text),
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

impl Jira {
    async fn search_issues(
        &self,
        args: SearchIssuesArgs,
        ctx: &ToolContext,
    ) -> Result<SearchResult, ToolError> {
        let jql = args.jql.trim().to_owned();
        if jql.is_empty() {
            return Err(ToolError::invalid_arguments(
                "`jql` is empty; write a query such as `project = PROJ ORDER BY updated DESC`",
            ));
        }
        // Extra fields: ids pass as they are; names need the field map.
        let mut extra: Vec<(String, String)> = Vec::new();
        if let Some(wanted) = args.fields.filter(|f| !f.is_empty()) {
            let map = self.field_map(ctx).await?;
            for name in wanted {
                let field = map.resolve(&name)?;
                extra.push((field.id.clone(), field.name.clone()));
            }
        }
        let page = SearchPage {
            max_results: args.max_results,
            next_page_token: args.next_page_token,
            start_at: args.start_at,
        };
        // Jira's own message usually quotes the query again: a long one is shown once, whole,
        // by Jira, and only its start here.
        let shown = short_query(&jql);
        let subject = Subject::other(
            format!("the search `{shown}`"),
            format!("jira found nothing for `{shown}`"),
        );
        self.run_search(jql, &extra, page, &subject, ctx).await
    }

    /// One page of a JQL search: `/search/jql` by token on Cloud, `/search` by offset on
    /// Server/Data Center.
    pub(crate) async fn run_search(
        &self,
        jql: String,
        extra: &[(String, String)],
        page: SearchPage,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<SearchResult, ToolError> {
        let deployment = self.client.deployment();
        let mut requested: Vec<&str> = SEARCH_FIELDS.to_vec();
        requested.extend(extra.iter().map(|(id, _)| id.as_str()));
        let max = page_size(page.max_results, 20, 100).to_string();
        let fields = requested.join(",");
        let path = match deployment {
            Deployment::Cloud => endpoint(
                "/search/jql",
                &[
                    ("jql", Some(jql.clone())),
                    ("maxResults", Some(max)),
                    ("fields", Some(fields)),
                    ("nextPageToken", page.next_page_token.filter(|t| !t.is_empty())),
                ],
            ),
            Deployment::Server => endpoint(
                "/search",
                &[
                    ("jql", Some(jql.clone())),
                    ("startAt", Some(page.start_at.unwrap_or(0).to_string())),
                    ("maxResults", Some(max)),
                    ("fields", Some(fields)),
                ],
            ),
        };
        let found: WireSearch = self.client.get_json(Api::Core, &path, subject, ctx).await?;
        Ok(search_result(jql, found, extra, deployment))
    }

    async fn get_issue(
        &self,
        args: GetIssueArgs,
        ctx: &ToolContext,
    ) -> Result<IssueDetail, ToolError> {
        let key = check_key("key", &args.key)?;
        let issue: WireIssue = self
            .client
            .get_json(Api::Core, &format!("/issue/{key}"), &Subject::issue(&key), ctx)
            .await?;
        // The description is its creator's (others may edit it; Jira keeps no author per field).
        let creator = issue.fields.get("creator").or_else(|| issue.fields.get("reporter"));
        let texts = creator.map(|c| ("/description".to_owned(), c)).into_iter().collect();
        self.label_authors(&key, texts, ctx).await;
        let has_custom = issue.fields.keys().any(|k| k.starts_with("customfield_"));
        let (map, note) = if has_custom || args.custom_fields.is_some() {
            match self.field_map(ctx).await {
                Ok(map) => (Some(map), None),
                // The issue is worth returning without names.
                Err(e) if args.custom_fields.is_none() => {
                    (None, Some(format!("custom field names unavailable ({e}); ids shown")))
                }
                Err(e) => return Err(e),
            }
        } else {
            (None, None)
        };
        let only = match (&args.custom_fields, &map) {
            (Some(names), Some(map)) => Some(
                names
                    .iter()
                    .map(|n| map.resolve(n).map(|f| f.id.clone()))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            _ => None,
        };
        let mut detail = issue_detail(issue, map.as_deref(), only.as_deref(), self.client.site());
        detail.note = note;
        Ok(detail)
    }

    async fn list_child_issues(
        &self,
        args: ListChildIssuesArgs,
        ctx: &ToolContext,
    ) -> Result<ChildIssues, ToolError> {
        let key = check_key("key", &args.key)?;
        let page = || SearchPage {
            max_results: args.max_results,
            next_page_token: args.next_page_token.clone(),
            start_at: args.start_at,
        };
        let subject = Subject::of_issue("the child issues", &key);
        let parent = format!("parent = {key} ORDER BY key ASC");
        let found = match self.client.deployment() {
            // Cloud reads every level through `parent` (epics' children and sub-tasks alike).
            Deployment::Cloud => self.run_search(parent, &[], page(), &subject, ctx).await?,
            // Server/Data Center ties stories to epics through the Epic Link field, which Jira
            // without Jira Software lacks (and rejects in JQL): then only sub-tasks are children.
            Deployment::Server => {
                let either = format!("parent = {key} OR \"Epic Link\" = {key} ORDER BY key ASC");
                match self.run_search(either, &[], page(), &subject, ctx).await {
                    Err(e) if e.kind == ToolErrorKind::InvalidArguments => {
                        self.run_search(parent, &[], page(), &subject, ctx).await?
                    }
                    other => other?,
                }
            }
        };
        Ok(ChildIssues { key, found })
    }

    async fn create_issue(
        &self,
        args: CreateIssueArgs,
        ctx: &ToolContext,
    ) -> Result<CreatedIssue, ToolError> {
        let project = check_project(&args.project)?;
        let deployment = self.client.deployment();
        let mut named: Vec<(&str, Value)> = vec![
            ("project", json!({ "key": project })),
            ("issuetype", json!({ "name": args.issue_type.as_deref().unwrap_or("Task") })),
            ("summary", json!(args.summary)),
        ];
        if let Some(d) = &args.description {
            named.push(("description", rich_text(d, deployment)));
        }
        if let Some(labels) = args.labels {
            named.push(("labels", json!(labels)));
        }
        if let Some(p) = &args.priority {
            named.push(("priority", json!({ "name": p })));
        }
        if let Some(a) = &args.assignee {
            named.push(("assignee", user_ref(a, deployment)));
        }
        if let Some(parent) = &args.parent {
            named.push(("parent", json!({ "key": check_key("parent", parent)? })));
        }
        if let Some(components) = args.components {
            let list: Vec<Value> = components.iter().map(|c| json!({ "name": c })).collect();
            named.push(("components", Value::Array(list)));
        }
        let map = match &args.fields {
            Some(f) if !f.is_empty() => Some(self.field_map(ctx).await?),
            _ => None,
        };
        let (fields, _) = field_values(named, args.fields, map.as_deref(), deployment)?;
        let subject = Subject::other(
            format!("creating an issue in {project}"),
            format!("no project {project} in jira (or the account cannot create issues in it)"),
        );
        let created: WireCreated = self
            .client
            .send_json(
                Method::POST,
                Api::Core,
                "/issue",
                &json!({ "fields": fields }),
                &subject,
                ctx,
            )
            .await
            .map_err(|e| self.name_fields(e))?;
        Ok(CreatedIssue {
            url: format!("{}browse/{}", self.client.site(), created.key),
            key: created.key,
            id: created.id,
        })
    }

    async fn update_issue(
        &self,
        args: UpdateIssueArgs,
        ctx: &ToolContext,
    ) -> Result<UpdatedIssue, ToolError> {
        let key = check_key("key", &args.key)?;
        let deployment = self.client.deployment();
        let mut named: Vec<(&str, Value)> = Vec::new();
        if let Some(s) = args.summary {
            named.push(("summary", json!(s)));
        }
        if let Some(d) = &args.description {
            named.push(("description", rich_text(d, deployment)));
        }
        if let Some(labels) = args.labels {
            named.push(("labels", json!(labels)));
        }
        if let Some(p) = &args.priority {
            named.push(("priority", json!({ "name": p })));
        }
        if let Some(a) = &args.assignee {
            named.push(("assignee", user_ref(a, deployment)));
        }
        let map = match &args.fields {
            Some(f) if !f.is_empty() => Some(self.field_map(ctx).await?),
            _ => None,
        };
        let (fields, updated) = field_values(named, args.fields, map.as_deref(), deployment)?;
        if fields.is_empty() {
            return Err(ToolError::invalid_arguments(
                "nothing to update: set `summary`, `description`, `labels`, `priority`, \
                 `assignee` or `fields`",
            ));
        }
        self.client
            .send(
                Method::PUT,
                Api::Core,
                &format!("/issue/{key}"),
                &json!({ "fields": fields }),
                &Subject::issue(&key),
                ctx,
            )
            .await
            .map_err(|e| self.name_fields(e))?;
        Ok(UpdatedIssue { url: format!("{}browse/{key}", self.client.site()), key, updated })
    }

    async fn link_issues(
        &self,
        args: LinkIssuesArgs,
        ctx: &ToolContext,
    ) -> Result<LinkedIssues, ToolError> {
        let from = check_key("from_key", &args.from_key)?;
        let to = check_key("to_key", &args.to_key)?;
        let link_type = args.link_type.trim().to_owned();
        // Jira shows the link's outward description ("blocks") on `inwardIssue` and the inward
        // one ("is blocked by") on `outwardIssue`: "A blocks B" is inwardIssue A, outwardIssue B.
        let mut body = json!({
            "type": { "name": link_type },
            "inwardIssue": { "key": from },
            "outwardIssue": { "key": to },
        });
        if let Some(comment) = args.comment.filter(|c| !c.trim().is_empty()) {
            body["comment"] = json!({ "body": rich_text(&comment, self.client.deployment()) });
        }
        let subject = Subject::other(
            format!("linking {from} to {to}"),
            format!("no issue {from} or {to} in jira (or the account cannot see them)"),
        );
        self.client.send(Method::POST, Api::Core, "/issueLink", &body, &subject, ctx).await?;
        Ok(LinkedIssues { from_key: from, link_type, to_key: to })
    }

    /// Jira reports field errors by id (`customfield_10016: …`); with the field map at hand the
    /// message names them too.
    fn name_fields(&self, mut error: ToolError) -> ToolError {
        if let Some(map) = self.known_fields() {
            let mut message = error.message.clone();
            for part in error.message.split(['(', ';', ' ']) {
                let id = part.trim_end_matches(':');
                if id.starts_with("customfield_") {
                    if let Some(field) = map.get(id) {
                        message =
                            message.replace(&format!("{id}:"), &format!("{id} ({}):", field.name));
                    }
                }
            }
            error.message = message;
        }
        error
    }
}

register_tool! {
    provider: Jira,
    name: "search_issues",
    group: "issues",
    description: "Search issues with JQL (e.g. `project = PROJ AND status != Done ORDER BY \
                  updated DESC`). Each hit has key, summary, status, type, assignee, priority, \
                  labels and update time, plus any extra `fields` asked for by name. Returns \
                  `next_page_token` (Cloud) or `next_start_at` (Server) for more.",
    input: SearchIssuesArgs,
    output: SearchResult,
    handler: Jira::search_issues,
}

register_tool! {
    provider: Jira,
    name: "get_issue",
    group: "issues",
    description: "Get one issue by key: status, people, priority, labels, versions, parent, \
                  links, sub-tasks, the description as plain text, comment count, and every \
                  non-empty custom field by name (e.g. `Story Points`, `Sprint`).",
    input: GetIssueArgs,
    output: IssueDetail,
    handler: Jira::get_issue,
}

register_tool! {
    provider: Jira,
    name: "list_child_issues",
    group: "issues",
    description: "List the children of an issue: an epic's stories, tasks and bugs, or an \
                  issue's sub-tasks, each with key, summary, status, type and assignee. Returns \
                  `next_page_token` (Cloud) or `next_start_at` (Server) for more.",
    input: ListChildIssuesArgs,
    output: ChildIssues,
    handler: Jira::list_child_issues,
}

register_tool! {
    provider: Jira,
    name: "create_issue",
    group: "issues",
    description: "Create an issue in a project: summary, type, description (plain text), \
                  labels, priority, assignee, parent, components, and other fields by name \
                  (`{\"Story Points\": 5}`). Returns the new key.",
    input: CreateIssueArgs,
    output: CreatedIssue,
    handler: Jira::create_issue,
}

register_tool! {
    provider: Jira,
    name: "update_issue",
    group: "issues",
    description: "Change an issue's fields: summary, description, labels, priority, assignee, \
                  and any other field by name or id (`{\"Story Points\": 8}`); `null` clears a \
                  field. Status changes go through `transition_issue`.",
    input: UpdateIssueArgs,
    output: UpdatedIssue,
    handler: Jira::update_issue,
}

register_tool! {
    provider: Jira,
    name: "link_issues",
    group: "issues",
    description: "Link two issues with a link type, read as \"from_key <type> to_key\" (e.g. \
                  from PROJ-1, type `Blocks`, to PROJ-2: PROJ-1 blocks PROJ-2), optionally with \
                  a comment.",
    input: LinkIssuesArgs,
    output: LinkedIssues,
    handler: Jira::link_issues,
}

/// The first 80 characters of a JQL query, for messages, with `…` when there is more.
fn short_query(jql: &str) -> String {
    match jql.char_indices().nth(80) {
        Some((end, _)) => format!("{}…", &jql[..end]),
        None => jql.to_owned(),
    }
}
