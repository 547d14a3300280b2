//! Issues: list, get, comments, search, create, comment, update (close, reopen), labels and
//! assignees.

use http::Method;
use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::http::encode_component;

use crate::client::{paging, repo_path, uri, Subject};
use crate::model::{
    is_false, is_zero, label_names, login, logins, nullable, repository_from_api_url, StateFilter,
    WireLabel, WireUser,
};
use crate::text::{truncate, truncate_opt};
use crate::GitHub;

/// Longest issue or pull request body returned, in bytes.
pub(crate) const BODY_MAX_BYTES: usize = 32 * 1024;
/// Longest comment body returned, in bytes.
pub(crate) const COMMENT_MAX_BYTES: usize = 8 * 1024;

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// Arguments of `list_issues`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListIssuesArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// `open` (the default), `closed` or `all`.
    pub(crate) state: Option<StateFilter>,
    /// Only issues that carry all of these labels, e.g. `["bug"]`.
    pub(crate) labels: Option<Vec<String>>,
    /// Only issues assigned to this login; `none` for unassigned ones, `*` for assigned ones.
    pub(crate) assignee: Option<String>,
    /// Only issues updated at or after this time, ISO 8601 (`2024-05-01T00:00:00Z`).
    pub(crate) since: Option<String>,
    /// Keep pull requests in the listing (flagged `is_pull_request`). GitHub lists pull requests
    /// as issues; by default they are left out and counted in `pull_requests_skipped`.
    #[serde(default)]
    pub(crate) include_pull_requests: bool,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `get_issue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetIssueArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The issue number (pull request numbers work too).
    #[serde(alias = "issue_number")]
    pub(crate) number: u64,
}

/// Arguments of `list_issue_comments`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListIssueCommentsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The issue or pull request number; for a pull request these are the conversation
    /// comments, not the review comments on the diff.
    #[serde(alias = "issue_number")]
    pub(crate) number: u64,
    /// Only comments updated at or after this time, ISO 8601.
    pub(crate) since: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `search_issues`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchIssuesArgs {
    /// GitHub search syntax, e.g. `repo:octocat/Hello-World is:issue is:open crash` or
    /// `org:rust-lang is:pr author:octocat label:bug`.
    #[serde(alias = "query")]
    pub(crate) q: String,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `create_issue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateIssueArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The issue's title.
    pub(crate) title: String,
    /// The issue's description, in Markdown.
    pub(crate) body: Option<String>,
    /// Label names to set (needs push access; unknown labels are created).
    pub(crate) labels: Option<Vec<String>>,
    /// Logins to assign (needs push access).
    pub(crate) assignees: Option<Vec<String>>,
}

/// Arguments of `add_issue_comment`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddIssueCommentArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The issue or pull request number to comment on.
    #[serde(alias = "issue_number")]
    pub(crate) number: u64,
    /// The comment, in Markdown.
    pub(crate) body: String,
}

// ---------------------------------------------------------------------------------------------
// What GitHub sends (only the kept fields)
// ---------------------------------------------------------------------------------------------

/// An issue (or a pull request seen as an issue) as the issues and search endpoints send it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireIssue {
    number: u64,
    title: String,
    state: String,
    #[serde(default)]
    state_reason: Option<String>,
    #[serde(default)]
    user: Option<WireUser>,
    #[serde(default, deserialize_with = "nullable")]
    labels: Vec<WireLabel>,
    #[serde(default, deserialize_with = "nullable")]
    assignees: Vec<WireUser>,
    #[serde(default, deserialize_with = "nullable")]
    comments: u64,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
    #[serde(default)]
    closed_at: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    body: Option<String>,
    /// Present (an object of links) when the "issue" is a pull request.
    #[serde(default)]
    pull_request: Option<Value>,
    #[serde(default)]
    milestone: Option<WireMilestone>,
    #[serde(default)]
    locked: bool,
    #[serde(default)]
    closed_by: Option<WireUser>,
    #[serde(default)]
    repository_url: Option<String>,
    #[serde(default)]
    author_association: Option<String>,
}

/// A milestone; only the title is kept.
#[derive(Debug, Deserialize)]
pub(crate) struct WireMilestone {
    title: String,
}

/// A comment on an issue or a pull request's conversation.
#[derive(Debug, Deserialize)]
pub(crate) struct WireComment {
    id: u64,
    #[serde(default)]
    user: Option<WireUser>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    author_association: Option<String>,
}

/// The search endpoint's envelope.
#[derive(Debug, Deserialize)]
pub(crate) struct WireSearch {
    #[serde(default)]
    total_count: u64,
    #[serde(default)]
    incomplete_results: bool,
    #[serde(default)]
    items: Vec<WireIssue>,
}

// ---------------------------------------------------------------------------------------------
// What the tools return
// ---------------------------------------------------------------------------------------------

/// One issue in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueSummary {
    /// The issue number.
    pub(crate) number: u64,
    /// The title.
    pub(crate) title: String,
    /// `open` or `closed`.
    pub(crate) state: String,
    /// Why it was closed: `completed`, `not_planned`, `reopened`…
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) state_reason: Option<String>,
    /// The author's login.
    pub(crate) author: Option<String>,
    /// Label names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) labels: Vec<String>,
    /// Assignee logins.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) assignees: Vec<String>,
    /// Number of comments.
    pub(crate) comments: u64,
    /// When it was opened.
    pub(crate) created_at: Option<String>,
    /// When it last changed.
    pub(crate) updated_at: Option<String>,
    /// When it was closed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) closed_at: Option<String>,
    /// Set when the "issue" is a pull request.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) is_pull_request: bool,
    /// The issue's page on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `list_issues`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The issues of this page, newest first.
    pub(crate) issues: Vec<IssueSummary>,
    /// Pull requests GitHub listed on this page and that were left out.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) pull_requests_skipped: usize,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// Result of `get_issue`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueDetail {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// Number, title, state, people, labels and times.
    #[serde(flatten)]
    pub(crate) issue: IssueSummary,
    /// The description, in Markdown (cut at 32 KiB, saying so).
    pub(crate) body: Option<String>,
    /// The milestone's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) milestone: Option<String>,
    /// Whether the conversation is locked.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) locked: bool,
    /// Who closed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) closed_by: Option<String>,
    /// The author's relation to the repository: `OWNER`, `MEMBER`, `CONTRIBUTOR`, `NONE`…
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) author_association: Option<String>,
}

/// One comment.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Comment {
    /// The comment id.
    pub(crate) id: u64,
    /// The author's login.
    pub(crate) author: Option<String>,
    /// The author's relation to the repository: `OWNER`, `MEMBER`, `NONE`…
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) author_association: Option<String>,
    /// When it was written.
    pub(crate) created_at: Option<String>,
    /// When it was edited, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) edited_at: Option<String>,
    /// The text, in Markdown (cut at 8 KiB, saying so).
    pub(crate) body: Option<String>,
    /// The comment on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `list_issue_comments`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommentList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The issue or pull request number.
    pub(crate) number: u64,
    /// The comments of this page, oldest first.
    pub(crate) comments: Vec<Comment>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// One search hit.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SearchHit {
    /// `owner/repo` the issue belongs to.
    pub(crate) repository: Option<String>,
    /// Number, title, state, people, labels and times.
    #[serde(flatten)]
    pub(crate) issue: IssueSummary,
}

/// Result of `search_issues`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SearchResult {
    /// The query as sent.
    pub(crate) query: String,
    /// How many issues match in all.
    pub(crate) total_count: u64,
    /// Set when GitHub's search timed out and the hits may be incomplete.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) incomplete_results: bool,
    /// The hits of this page, best first.
    pub(crate) items: Vec<SearchHit>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// Result of `create_issue`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CreatedIssue {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The new issue's number.
    pub(crate) number: u64,
    /// Its title.
    pub(crate) title: String,
    /// Its labels.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) labels: Vec<String>,
    /// Its assignees.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) assignees: Vec<String>,
    /// Its page on GitHub.
    pub(crate) html_url: Option<String>,
    /// When it was created.
    pub(crate) created_at: Option<String>,
}

/// Result of `add_issue_comment`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CreatedComment {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The issue or pull request commented on.
    pub(crate) number: u64,
    /// The new comment's id.
    pub(crate) id: u64,
    /// The comment on GitHub.
    pub(crate) html_url: Option<String>,
    /// When it was created.
    pub(crate) created_at: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Mapping (pure, so tests can run it on recorded responses)
// ---------------------------------------------------------------------------------------------

impl WireIssue {
    fn is_pull_request(&self) -> bool {
        self.pull_request.as_ref().is_some_and(|v| !v.is_null())
    }

    fn summary(self) -> IssueSummary {
        let is_pull_request = self.is_pull_request();
        IssueSummary {
            number: self.number,
            title: self.title,
            state: self.state,
            state_reason: self.state_reason,
            author: login(self.user),
            labels: label_names(&self.labels),
            assignees: logins(self.assignees),
            comments: self.comments,
            created_at: self.created_at,
            updated_at: self.updated_at,
            closed_at: self.closed_at,
            is_pull_request,
            html_url: self.html_url,
        }
    }
}

/// The `list_issues` result for a page of issues.
pub(crate) fn issue_list(
    repository: String,
    page: Vec<WireIssue>,
    include_pull_requests: bool,
    next_page: Option<u32>,
) -> IssueList {
    let total = page.len();
    let issues: Vec<_> = page
        .into_iter()
        .filter(|i| include_pull_requests || !i.is_pull_request())
        .map(WireIssue::summary)
        .collect();
    IssueList { repository, pull_requests_skipped: total - issues.len(), issues, next_page }
}

/// The `get_issue` result.
pub(crate) fn issue_detail(repository: String, issue: WireIssue) -> IssueDetail {
    let body = truncate_opt(issue.body.clone(), BODY_MAX_BYTES);
    let milestone = issue.milestone.as_ref().map(|m| m.title.clone());
    let locked = issue.locked;
    let closed_by = issue.closed_by.as_ref().map(|u| u.login.clone());
    let author_association = issue.author_association.clone();
    IssueDetail {
        repository,
        issue: issue.summary(),
        body,
        milestone,
        locked,
        closed_by,
        author_association,
    }
}

/// Whether an author with this `author_association` can write to the repository: its owner,
/// a member of its organisation or a collaborator can; a contributor, a first-timer or anyone
/// else cannot. `None` when GitHub did not say.
pub(crate) fn can_write(association: Option<&str>) -> Option<bool> {
    association.map(|a| matches!(a, "OWNER" | "MEMBER" | "COLLABORATOR"))
}

/// One comment, body cut to `max_bytes`.
pub(crate) fn comment(c: WireComment, max_bytes: usize) -> Comment {
    let edited_at = c.updated_at.filter(|u| Some(u) != c.created_at.as_ref());
    Comment {
        id: c.id,
        author: login(c.user),
        author_association: c.author_association.filter(|a| a != "NONE"),
        created_at: c.created_at,
        edited_at,
        body: c.body.map(|b| truncate(&b, max_bytes).0),
        html_url: c.html_url,
    }
}

/// The `list_issue_comments` result.
pub(crate) fn comment_list(
    repository: String,
    number: u64,
    page: Vec<WireComment>,
    next_page: Option<u32>,
) -> CommentList {
    let comments = page.into_iter().map(|c| comment(c, COMMENT_MAX_BYTES)).collect();
    CommentList { repository, number, comments, next_page }
}

/// The `search_issues` result.
pub(crate) fn search_result(
    query: String,
    found: WireSearch,
    next_page: Option<u32>,
) -> SearchResult {
    let items = found
        .items
        .into_iter()
        .map(|i| SearchHit {
            repository: i.repository_url.as_deref().and_then(repository_from_api_url),
            issue: i.summary(),
        })
        .collect();
    SearchResult {
        query,
        total_count: found.total_count,
        incomplete_results: found.incomplete_results,
        items,
        next_page,
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

impl GitHub {
    async fn list_issues(
        &self,
        a: ListIssuesArgs,
        ctx: &ToolContext,
    ) -> Result<IssueList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let mut query = vec![
            ("state", a.state.map(|s| s.as_str().to_owned())),
            ("labels", a.labels.filter(|l| !l.is_empty()).map(|l| l.join(","))),
            ("assignee", a.assignee),
            ("since", a.since),
        ];
        query.extend(paging(a.page, a.per_page));
        let uri = uri(&format!("/repos/{repository}/issues"), &query);
        let subject = Subject::listing("the issues", &repository);
        let (page, next) = self.client.get_json::<Vec<WireIssue>>(&uri, &subject, ctx).await?;
        Ok(issue_list(repository, page, a.include_pull_requests, next))
    }

    async fn get_issue(
        &self,
        a: GetIssueArgs,
        ctx: &ToolContext,
    ) -> Result<IssueDetail, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let uri = format!("/repos/{repository}/issues/{}", a.number);
        let subject = Subject::object(format!("issue #{}", a.number), &repository);
        let (issue, _) = self.client.get_json::<WireIssue>(&uri, &subject, ctx).await?;
        let mut strangers = false;
        if let Some(user) = &issue.user {
            let writer = can_write(issue.author_association.as_deref());
            strangers |= writer == Some(false);
            ctx.label_author("/body", &user.login, writer);
        }
        self.label_repository_visibility(&repository, strangers, ctx).await;
        Ok(issue_detail(repository, issue))
    }

    async fn list_issue_comments(
        &self,
        a: ListIssueCommentsArgs,
        ctx: &ToolContext,
    ) -> Result<CommentList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let mut query = vec![("since", a.since)];
        query.extend(paging(a.page, a.per_page));
        let uri = uri(&format!("/repos/{repository}/issues/{}/comments", a.number), &query);
        let subject = Subject::object(format!("issue #{}", a.number), &repository);
        let (page, next) = self.client.get_json::<Vec<WireComment>>(&uri, &subject, ctx).await?;
        let authors = page.iter().map(|c| (c.user.as_ref(), c.author_association.as_deref()));
        self.label_page(&repository, "comments", authors, ctx).await;
        Ok(comment_list(repository, a.number, page, next))
    }

    async fn search_issues(
        &self,
        a: SearchIssuesArgs,
        ctx: &ToolContext,
    ) -> Result<SearchResult, ToolError> {
        if a.q.trim().is_empty() {
            return Err(ToolError::invalid_arguments(
                "`q` is empty; write a GitHub search such as `repo:octo/hello is:open crash`",
            ));
        }
        let mut query = vec![("q", Some(a.q.clone()))];
        query.extend(paging(a.page, a.per_page));
        let uri = uri("/search/issues", &query);
        let subject = Subject::global(format!("the issue search `{}`", a.q));
        let (found, next) = self.client.get_json::<WireSearch>(&uri, &subject, ctx).await?;
        Ok(search_result(a.q, found, next))
    }

    async fn create_issue(
        &self,
        a: CreateIssueArgs,
        ctx: &ToolContext,
    ) -> Result<CreatedIssue, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        if a.title.trim().is_empty() {
            return Err(ToolError::invalid_arguments("`title` is empty; an issue needs a title"));
        }
        let mut body = json!({ "title": a.title });
        if let Some(text) = a.body {
            body["body"] = json!(text);
        }
        if let Some(labels) = a.labels {
            body["labels"] = json!(labels);
        }
        if let Some(assignees) = a.assignees {
            body["assignees"] = json!(assignees);
        }
        let subject = Subject::action("creating an issue", &repository);
        let issue: WireIssue = self
            .client
            .post_json(&format!("/repos/{repository}/issues"), &body, &subject, ctx)
            .await?;
        Ok(CreatedIssue {
            repository,
            number: issue.number,
            title: issue.title,
            labels: label_names(&issue.labels),
            assignees: logins(issue.assignees),
            html_url: issue.html_url,
            created_at: issue.created_at,
        })
    }

    async fn add_issue_comment(
        &self,
        a: AddIssueCommentArgs,
        ctx: &ToolContext,
    ) -> Result<CreatedComment, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        if a.body.trim().is_empty() {
            return Err(ToolError::invalid_arguments("`body` is empty; write the comment"));
        }
        let subject = Subject::object(format!("issue or pull request #{}", a.number), &repository);
        let uri = format!("/repos/{repository}/issues/{}/comments", a.number);
        let created: WireComment =
            self.client.post_json(&uri, &json!({ "body": a.body }), &subject, ctx).await?;
        Ok(CreatedComment {
            repository,
            number: a.number,
            id: created.id,
            html_url: created.html_url,
            created_at: created.created_at,
        })
    }
}

register_tool! {
    provider: GitHub,
    name: "list_issues",
    group: "issues",
    description: "List a repository's issues (pull requests left out unless asked), newest \
                  first, with labels, assignees and comment counts; filter by state, labels, \
                  assignee or update time. Returns `next_page` for more.",
    input: ListIssuesArgs,
    output: IssueList,
    handler: GitHub::list_issues,
}

register_tool! {
    provider: GitHub,
    name: "get_issue",
    group: "issues",
    description: "Get one issue (or pull request, seen as an issue) with its body, labels, \
                  assignees, milestone and state.",
    input: GetIssueArgs,
    output: IssueDetail,
    handler: GitHub::get_issue,
}

register_tool! {
    provider: GitHub,
    name: "list_issue_comments",
    group: "issues",
    description: "List the comments of an issue, or the conversation comments of a pull \
                  request, oldest first.",
    input: ListIssueCommentsArgs,
    output: CommentList,
    handler: GitHub::list_issue_comments,
}

register_tool! {
    provider: GitHub,
    name: "search_issues",
    group: "issues",
    description: "Search issues and pull requests across GitHub with GitHub's search syntax \
                  (`repo:`, `org:`, `is:open`, `is:pr`, `label:`, `author:`…). Each hit names \
                  its repository.",
    input: SearchIssuesArgs,
    output: SearchResult,
    handler: GitHub::search_issues,
}

register_tool! {
    provider: GitHub,
    name: "create_issue",
    group: "issues",
    description: "Create an issue in a repository, optionally with labels and assignees. \
                  Returns the new issue's number and URL.",
    input: CreateIssueArgs,
    output: CreatedIssue,
    handler: GitHub::create_issue,
}

register_tool! {
    provider: GitHub,
    name: "add_issue_comment",
    group: "issues",
    description: "Add a comment to an issue or to a pull request's conversation.",
    input: AddIssueCommentArgs,
    output: CreatedComment,
    handler: GitHub::add_issue_comment,
}

// ---------------------------------------------------------------------------------------------
// Changing an issue
// ---------------------------------------------------------------------------------------------

/// `state` of `update_issue`.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum IssueState {
    /// Reopen it.
    Open,
    /// Close it.
    Closed,
}

/// Why an issue is closed or reopened.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StateReason {
    /// Done (the default when closing).
    Completed,
    /// Will not be done.
    NotPlanned,
    /// A duplicate of another issue.
    Duplicate,
    /// Reopened.
    Reopened,
}

/// Arguments of `update_issue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateIssueArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The issue number (a pull request's number changes its title, body, labels and
    /// assignees too).
    #[serde(alias = "issue_number")]
    pub(crate) number: u64,
    /// A new title.
    pub(crate) title: Option<String>,
    /// A new description, in Markdown (replaces the old one).
    pub(crate) body: Option<String>,
    /// `closed` to close the issue, `open` to reopen it.
    pub(crate) state: Option<IssueState>,
    /// Why: `completed`, `not_planned`, `duplicate` (closing) or `reopened`.
    pub(crate) state_reason: Option<StateReason>,
    /// The whole new set of label names (replaces the old set; `[]` removes all). To add or
    /// remove one, use `add_issue_labels` / `remove_issue_label`.
    pub(crate) labels: Option<Vec<String>>,
    /// The whole new set of assignee logins (replaces the old set; `[]` removes all).
    pub(crate) assignees: Option<Vec<String>>,
    /// The milestone number to set.
    pub(crate) milestone: Option<u64>,
}

/// Arguments of `add_issue_labels`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddIssueLabelsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The issue or pull request number.
    #[serde(alias = "issue_number")]
    pub(crate) number: u64,
    /// Label names to add to those it has, e.g. `["bug", "p1"]`.
    pub(crate) labels: Vec<String>,
}

/// Arguments of `remove_issue_label`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RemoveIssueLabelArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The issue or pull request number.
    #[serde(alias = "issue_number")]
    pub(crate) number: u64,
    /// The label name to remove, e.g. `needs-triage`.
    #[serde(alias = "name")]
    pub(crate) label: String,
}

/// Arguments of `add_issue_assignees` and `remove_issue_assignees`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct IssueAssigneesArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The issue or pull request number.
    #[serde(alias = "issue_number")]
    pub(crate) number: u64,
    /// Logins, e.g. `["octocat"]` (at most 10 assignees per issue).
    pub(crate) assignees: Vec<String>,
}

/// Result of `update_issue`, `add_issue_assignees` and `remove_issue_assignees`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct UpdatedIssue {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The issue as it is now: number, title, state, people, labels and times.
    #[serde(flatten)]
    pub(crate) issue: IssueSummary,
}

/// Result of `add_issue_labels` and `remove_issue_label`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueLabels {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The issue or pull request number.
    pub(crate) number: u64,
    /// All the labels it has now.
    pub(crate) labels: Vec<String>,
}

/// Names that are not blank, trimmed.
fn names(field: &str, values: Vec<String>) -> Result<Vec<String>, ToolError> {
    let names: Vec<String> =
        values.into_iter().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()).collect();
    if names.is_empty() {
        return Err(ToolError::invalid_arguments(format!("`{field}` is empty; name at least one")));
    }
    Ok(names)
}

impl GitHub {
    async fn update_issue(
        &self,
        a: UpdateIssueArgs,
        ctx: &ToolContext,
    ) -> Result<UpdatedIssue, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let mut body = Map::new();
        if let Some(title) = a.title {
            if title.trim().is_empty() {
                return Err(ToolError::invalid_arguments("`title` is empty; an issue needs one"));
            }
            body.insert("title".into(), json!(title));
        }
        if let Some(text) = a.body {
            body.insert("body".into(), json!(text));
        }
        if let Some(state) = a.state {
            let state = match state {
                IssueState::Open => "open",
                IssueState::Closed => "closed",
            };
            body.insert("state".into(), json!(state));
        }
        if let Some(reason) = a.state_reason {
            let reason = match reason {
                StateReason::Completed => "completed",
                StateReason::NotPlanned => "not_planned",
                StateReason::Duplicate => "duplicate",
                StateReason::Reopened => "reopened",
            };
            body.insert("state_reason".into(), json!(reason));
        }
        if let Some(labels) = a.labels {
            body.insert("labels".into(), json!(labels));
        }
        if let Some(assignees) = a.assignees {
            body.insert("assignees".into(), json!(assignees));
        }
        if let Some(milestone) = a.milestone {
            body.insert("milestone".into(), json!(milestone));
        }
        if body.is_empty() {
            return Err(ToolError::invalid_arguments(
                "nothing to change: set `title`, `body`, `state`, `state_reason`, `labels`, \
                 `assignees` or `milestone`",
            ));
        }
        let subject = Subject::object(format!("issue #{}", a.number), &repository);
        let uri = format!("/repos/{repository}/issues/{}", a.number);
        let issue: WireIssue = self
            .client
            .write_json(Method::PATCH, &uri, Some(&Value::Object(body)), &subject, ctx)
            .await?;
        Ok(UpdatedIssue { repository, issue: issue.summary() })
    }

    async fn add_issue_labels(
        &self,
        a: AddIssueLabelsArgs,
        ctx: &ToolContext,
    ) -> Result<IssueLabels, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let labels = names("labels", a.labels)?;
        let subject = Subject::object(format!("issue or pull request #{}", a.number), &repository);
        let uri = format!("/repos/{repository}/issues/{}/labels", a.number);
        let now: Vec<WireLabel> = self
            .client
            .write_json(Method::POST, &uri, Some(&json!({ "labels": labels })), &subject, ctx)
            .await?;
        Ok(IssueLabels { repository, number: a.number, labels: label_names(&now) })
    }

    async fn remove_issue_label(
        &self,
        a: RemoveIssueLabelArgs,
        ctx: &ToolContext,
    ) -> Result<IssueLabels, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let label = a.label.trim();
        if label.is_empty() || label == "." || label == ".." {
            return Err(ToolError::invalid_arguments(format!(
                "`label` must be a label's name; got `{label}`"
            )));
        }
        let subject = Subject::object(format!("issue or pull request #{}", a.number), &repository)
            .not_found_says(format!(
                "issue or pull request #{} in {repository} has no label `{label}` (or there is \
                 no such issue, or the token cannot see the repository)",
                a.number
            ));
        let uri =
            format!("/repos/{repository}/issues/{}/labels/{}", a.number, encode_component(label));
        let now: Vec<WireLabel> =
            self.client.write_json(Method::DELETE, &uri, None, &subject, ctx).await?;
        Ok(IssueLabels { repository, number: a.number, labels: label_names(&now) })
    }

    async fn change_assignees(
        &self,
        method: Method,
        a: IssueAssigneesArgs,
        ctx: &ToolContext,
    ) -> Result<UpdatedIssue, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let assignees = names("assignees", a.assignees)?;
        let subject = Subject::object(format!("issue or pull request #{}", a.number), &repository);
        let uri = format!("/repos/{repository}/issues/{}/assignees", a.number);
        let body = json!({ "assignees": assignees });
        let issue: WireIssue =
            self.client.write_json(method, &uri, Some(&body), &subject, ctx).await?;
        Ok(UpdatedIssue { repository, issue: issue.summary() })
    }

    async fn add_issue_assignees(
        &self,
        a: IssueAssigneesArgs,
        ctx: &ToolContext,
    ) -> Result<UpdatedIssue, ToolError> {
        self.change_assignees(Method::POST, a, ctx).await
    }

    async fn remove_issue_assignees(
        &self,
        a: IssueAssigneesArgs,
        ctx: &ToolContext,
    ) -> Result<UpdatedIssue, ToolError> {
        self.change_assignees(Method::DELETE, a, ctx).await
    }
}

register_tool! {
    provider: GitHub,
    name: "update_issue",
    group: "issues",
    description: "Change an issue: title, body, labels or assignees (each replaced whole), \
                  milestone, or state — `closed` to close it (with `state_reason` `completed`, \
                  `not_planned` or `duplicate`), `open` to reopen it.",
    input: UpdateIssueArgs,
    output: UpdatedIssue,
    handler: GitHub::update_issue,
}

register_tool! {
    provider: GitHub,
    name: "add_issue_labels",
    group: "issues",
    description: "Add labels to an issue or pull request, keeping those it has. Returns all \
                  its labels.",
    input: AddIssueLabelsArgs,
    output: IssueLabels,
    handler: GitHub::add_issue_labels,
}

register_tool! {
    provider: GitHub,
    name: "remove_issue_label",
    group: "issues",
    description: "Remove one label from an issue or pull request. Returns the labels left.",
    input: RemoveIssueLabelArgs,
    output: IssueLabels,
    handler: GitHub::remove_issue_label,
}

register_tool! {
    provider: GitHub,
    name: "add_issue_assignees",
    group: "issues",
    description: "Assign people to an issue or pull request, keeping those assigned. Logins \
                  without access are silently ignored by GitHub: check `assignees` in the \
                  result.",
    input: IssueAssigneesArgs,
    output: UpdatedIssue,
    handler: GitHub::add_issue_assignees,
}

register_tool! {
    provider: GitHub,
    name: "remove_issue_assignees",
    group: "issues",
    description: "Unassign people from an issue or pull request. Returns who stays assigned.",
    input: IssueAssigneesArgs,
    output: UpdatedIssue,
    handler: GitHub::remove_issue_assignees,
}
