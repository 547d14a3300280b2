//! Issues: list, get, notes, create, comment, update and close; the labels and milestones
//! they carry.

use quiver_plugin_sdk::prelude::*;

use crate::client::{paging, uri, Page, ProjectRef, Subject};
use crate::model::{
    is_false, is_zero, label_list, labels_value, nullable, project_arg, project_arg_opt, truncate,
    truncate_opt, update_body, username, usernames, StateEvent, WireReferences, WireTitle,
    WireUser, BODY_MAX_BYTES, NOTE_MAX_BYTES,
};
use crate::GitLab;

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// `state` of issue listings.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum IssueState {
    /// Only open ones (`open` is accepted too).
    #[serde(alias = "open")]
    Opened,
    /// Only closed ones.
    Closed,
    /// Both.
    All,
}

impl IssueState {
    /// The query value (`None` for all: GitLab's default).
    pub(crate) fn query(self) -> Option<String> {
        match self {
            IssueState::Opened => Some("opened".into()),
            IssueState::Closed => Some("closed".into()),
            IssueState::All => None,
        }
    }
}

/// Whose issues or merge requests a listing without `project` shows.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Scope {
    /// Created by the token's user (GitLab's default without a project).
    CreatedByMe,
    /// Assigned to the token's user.
    AssignedToMe,
    /// Every one the token can see.
    All,
}

impl Scope {
    /// The query value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Scope::CreatedByMe => "created_by_me",
            Scope::AssignedToMe => "assigned_to_me",
            Scope::All => "all",
        }
    }
}

/// Arguments of `list_issues`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListIssuesArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`). Without it, lists
    /// issues across the projects the token can see (see `scope`).
    #[serde(default, alias = "project_id", deserialize_with = "project_arg_opt")]
    pub(crate) project: Option<String>,
    /// `opened` (the default), `closed` or `all`.
    pub(crate) state: Option<IssueState>,
    /// Only issues that carry all of these labels, e.g. `["bug"]`.
    pub(crate) labels: Option<Vec<String>>,
    /// Only issues assigned to this username; `None` for unassigned ones, `Any` for assigned.
    pub(crate) assignee_username: Option<String>,
    /// Only issues opened by this username.
    pub(crate) author_username: Option<String>,
    /// Only issues whose title or description contains this text.
    pub(crate) search: Option<String>,
    /// Only issues of this milestone (its title).
    pub(crate) milestone: Option<String>,
    /// Only issues updated at or after this time, ISO 8601 (`2024-05-01T00:00:00Z`).
    pub(crate) updated_after: Option<String>,
    /// Without `project`: `created_by_me` (GitLab's default), `assigned_to_me` or `all`.
    pub(crate) scope: Option<Scope>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `get_issue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetIssueArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The issue's number within the project (the 47 of `#47`).
    #[serde(alias = "issue_iid")]
    pub(crate) iid: u64,
}

/// Arguments of `list_issue_notes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListIssueNotesArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The issue's number within the project (the 47 of `#47`).
    #[serde(alias = "issue_iid")]
    pub(crate) iid: u64,
    /// Keep system notes ("assigned to @bob", "mentioned in !19"); left out and counted by
    /// default.
    #[serde(default)]
    pub(crate) include_system: bool,
    /// Newest first (oldest first by default).
    #[serde(default)]
    pub(crate) newest_first: bool,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `create_issue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateIssueArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The issue's title.
    pub(crate) title: String,
    /// The issue's description, in Markdown.
    #[serde(alias = "body")]
    pub(crate) description: Option<String>,
    /// Label names to set (unknown labels are created).
    pub(crate) labels: Option<Vec<String>>,
    /// Numeric user ids to assign.
    pub(crate) assignee_ids: Option<Vec<u64>>,
    /// Make the issue confidential (visible to project members only).
    pub(crate) confidential: Option<bool>,
    /// Due date, `YYYY-MM-DD`.
    pub(crate) due_date: Option<String>,
}

/// Arguments of `create_issue_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateIssueNoteArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The issue's number within the project (the 47 of `#47`).
    #[serde(alias = "issue_iid")]
    pub(crate) iid: u64,
    /// The comment, in Markdown.
    pub(crate) body: String,
    /// Make it an internal note, visible to project members only.
    pub(crate) internal: Option<bool>,
}

// ---------------------------------------------------------------------------------------------
// What GitLab sends (only the kept fields)
// ---------------------------------------------------------------------------------------------

/// An issue, as the list, get and create endpoints send it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireIssue {
    iid: u64,
    #[serde(default)]
    title: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    author: Option<WireUser>,
    #[serde(default, deserialize_with = "nullable")]
    assignees: Vec<WireUser>,
    #[serde(default, deserialize_with = "nullable")]
    labels: Vec<String>,
    #[serde(default)]
    milestone: Option<WireTitle>,
    #[serde(default)]
    user_notes_count: u64,
    #[serde(default)]
    merge_requests_count: u64,
    #[serde(default)]
    confidential: bool,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
    #[serde(default)]
    closed_at: Option<String>,
    #[serde(default)]
    closed_by: Option<WireUser>,
    #[serde(default)]
    due_date: Option<String>,
    #[serde(default)]
    issue_type: Option<String>,
    #[serde(default)]
    task_completion_status: Option<WireTasks>,
    #[serde(default)]
    references: WireReferences,
    #[serde(default)]
    web_url: Option<String>,
}

/// `task_completion_status`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTasks {
    #[serde(default)]
    count: u64,
    #[serde(default)]
    completed_count: u64,
}

/// A note (comment) on an issue or merge request.
#[derive(Debug, Deserialize)]
pub(crate) struct WireNote {
    pub(crate) id: u64,
    #[serde(default)]
    pub(crate) body: Option<String>,
    #[serde(default)]
    pub(crate) author: Option<WireUser>,
    #[serde(default)]
    pub(crate) created_at: Option<String>,
    #[serde(default)]
    pub(crate) updated_at: Option<String>,
    #[serde(default)]
    pub(crate) system: bool,
    #[serde(default)]
    pub(crate) internal: bool,
    #[serde(default)]
    pub(crate) noteable_iid: Option<u64>,
}

// ---------------------------------------------------------------------------------------------
// What the tools return
// ---------------------------------------------------------------------------------------------

/// One issue in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueSummary {
    /// The issue's project, when the listing spans projects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) project: Option<String>,
    /// The issue's number within its project.
    pub(crate) iid: u64,
    /// The title.
    pub(crate) title: String,
    /// `opened` or `closed`.
    pub(crate) state: String,
    /// The author's username.
    pub(crate) author: Option<String>,
    /// Assignee usernames.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) assignees: Vec<String>,
    /// Label names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) labels: Vec<String>,
    /// The milestone's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) milestone: Option<String>,
    /// Comments by people (system notes not counted).
    pub(crate) notes: u64,
    /// Merge requests that mention or close it.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) merge_requests_count: u64,
    /// Set for a confidential issue.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) confidential: bool,
    /// When it was opened.
    pub(crate) created_at: Option<String>,
    /// When it last changed.
    pub(crate) updated_at: Option<String>,
    /// When it was closed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) closed_at: Option<String>,
    /// The issue on GitLab.
    pub(crate) web_url: Option<String>,
}

/// Result of `list_issues`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueList {
    /// The project listed (absent for a listing across projects: each issue names its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) project: Option<String>,
    /// The issues of this page, newest first.
    pub(crate) issues: Vec<IssueSummary>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many issues match in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// Result of `get_issue`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueDetail {
    /// The project (as given).
    pub(crate) project: String,
    /// Number, title, state, people, labels, counts and times.
    #[serde(flatten)]
    pub(crate) issue: IssueSummary,
    /// The description, in Markdown (cut at 32 KiB, saying so).
    pub(crate) description: Option<String>,
    /// Who closed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) closed_by: Option<String>,
    /// The due date.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) due_date: Option<String>,
    /// `issue`, `incident`, `test_case` or `task`, when not a plain issue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) issue_type: Option<String>,
    /// Checklist progress, `done/total`, when the description has tasks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tasks: Option<String>,
}

/// One note.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Note {
    /// The note id.
    pub(crate) id: u64,
    /// The author's username.
    pub(crate) author: Option<String>,
    /// The text, in Markdown (cut at 8 KiB, saying so).
    pub(crate) body: String,
    /// When it was written.
    pub(crate) created_at: Option<String>,
    /// When it was edited, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) edited_at: Option<String>,
    /// Set for a system note (an event GitLab recorded, not a comment).
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) system: bool,
    /// Set for an internal note (project members only).
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) internal: bool,
}

/// Result of `list_issue_notes`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct NoteList {
    /// The project (as given).
    pub(crate) project: String,
    /// The issue's number.
    pub(crate) iid: u64,
    /// The notes of this page.
    pub(crate) notes: Vec<Note>,
    /// System notes of this page left out (ask with `include_system`).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) system_notes_skipped: u64,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many notes the issue has in all, system notes included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// Result of `create_issue`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CreatedIssue {
    /// The project (as given).
    pub(crate) project: String,
    /// The new issue's number.
    pub(crate) iid: u64,
    /// Its title.
    pub(crate) title: String,
    /// Labels set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) labels: Vec<String>,
    /// Assignees set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) assignees: Vec<String>,
    /// The issue on GitLab.
    pub(crate) web_url: Option<String>,
    /// When it was created.
    pub(crate) created_at: Option<String>,
}

/// Result of `create_issue_note` and `create_merge_request_note`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CreatedNote {
    /// The project (as given).
    pub(crate) project: String,
    /// The issue's or merge request's number.
    pub(crate) iid: u64,
    /// The new note's id.
    pub(crate) note_id: u64,
    /// Who wrote it (the token's user).
    pub(crate) author: Option<String>,
    /// When it was written.
    pub(crate) created_at: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Mapping (pure, so tests can run it on recorded responses)
// ---------------------------------------------------------------------------------------------

impl WireIssue {
    /// The listing entry; `with_project` names the issue's project (listings across projects).
    pub(crate) fn summary(&self, with_project: bool) -> IssueSummary {
        IssueSummary {
            project: if with_project { self.references.project() } else { None },
            iid: self.iid,
            title: self.title.clone(),
            state: self.state.clone(),
            author: self.author.as_ref().map(|u| u.username.clone()),
            assignees: self.assignees.iter().map(|u| u.username.clone()).collect(),
            labels: self.labels.clone(),
            milestone: self.milestone.as_ref().map(|m| m.title.clone()),
            notes: self.user_notes_count,
            merge_requests_count: self.merge_requests_count,
            confidential: self.confidential,
            created_at: self.created_at.clone(),
            updated_at: self.updated_at.clone(),
            closed_at: self.closed_at.clone(),
            web_url: self.web_url.clone(),
        }
    }
}

/// The `list_issues` result.
pub(crate) fn issue_list(project: Option<String>, page: Vec<WireIssue>, at: Page) -> IssueList {
    let across = project.is_none();
    IssueList {
        issues: page.iter().map(|i| i.summary(across)).collect(),
        project,
        next_page: at.next_page,
        total: at.total,
    }
}

/// The `get_issue` result.
pub(crate) fn issue_detail(project: String, i: WireIssue) -> IssueDetail {
    let issue = i.summary(false);
    IssueDetail {
        project,
        issue,
        description: truncate_opt(i.description, BODY_MAX_BYTES),
        closed_by: username(i.closed_by),
        due_date: i.due_date,
        issue_type: i.issue_type.filter(|t| t != "issue"),
        tasks: i
            .task_completion_status
            .filter(|t| t.count > 0)
            .map(|t| format!("{}/{}", t.completed_count, t.count)),
    }
}

/// A note as results show it.
pub(crate) fn note(n: WireNote) -> Note {
    Note {
        id: n.id,
        author: username(n.author),
        body: truncate(n.body.as_deref().unwrap_or(""), NOTE_MAX_BYTES).0,
        edited_at: n.updated_at.filter(|u| Some(u) != n.created_at.as_ref()),
        created_at: n.created_at,
        system: n.system,
        internal: n.internal,
    }
}

/// The `list_issue_notes` result.
pub(crate) fn note_list(
    project: String,
    iid: u64,
    page: Vec<WireNote>,
    include_system: bool,
    at: Page,
) -> NoteList {
    let (kept, system): (Vec<_>, Vec<_>) =
        page.into_iter().partition(|n| include_system || !n.system);
    NoteList {
        project,
        iid,
        notes: kept.into_iter().map(note).collect(),
        system_notes_skipped: system.len() as u64,
        next_page: at.next_page,
        total: at.total,
    }
}

/// The result of a created note.
pub(crate) fn created_note(project: String, iid: u64, n: WireNote) -> CreatedNote {
    CreatedNote {
        project,
        iid: n.noteable_iid.unwrap_or(iid),
        note_id: n.id,
        author: username(n.author),
        created_at: n.created_at,
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

impl GitLab {
    async fn list_issues(
        &self,
        a: ListIssuesArgs,
        ctx: &ToolContext,
    ) -> Result<IssueList, ToolError> {
        let project = a.project.as_deref().map(ProjectRef::parse).transpose()?;
        let mut query = vec![
            ("state", a.state.unwrap_or(IssueState::Opened).query()),
            ("labels", label_list(a.labels)),
            ("assignee_username", a.assignee_username),
            ("author_username", a.author_username),
            ("search", a.search),
            ("milestone", a.milestone),
            ("updated_after", a.updated_after),
            ("scope", a.scope.filter(|_| project.is_none()).map(|s| s.as_str().to_owned())),
        ];
        query.extend(paging(a.page, a.per_page));
        let (path, subject) = match &project {
            Some(p) => {
                (format!("/projects/{}/issues", p.encoded), Subject::listing("the issues", &p.name))
            }
            None => ("/issues".to_owned(), Subject::global("the issues")),
        };
        let (page, at) =
            self.client.get_json::<Vec<WireIssue>>(&uri(&path, &query), &subject, ctx).await?;
        Ok(issue_list(project.map(|p| p.name), page, at))
    }

    async fn get_issue(
        &self,
        a: GetIssueArgs,
        ctx: &ToolContext,
    ) -> Result<IssueDetail, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let path = format!("/projects/{}/issues/{}", p.encoded, a.iid);
        let subject = Subject::object(format!("issue #{}", a.iid), &p.name);
        let (issue, _) = self.client.get_json::<WireIssue>(&path, &subject, ctx).await?;
        let texts = issue.author.iter().map(|a| ("/description".to_owned(), a)).collect();
        self.label_authors(&p, texts, ctx).await;
        Ok(issue_detail(p.name, issue))
    }

    async fn list_issue_notes(
        &self,
        a: ListIssueNotesArgs,
        ctx: &ToolContext,
    ) -> Result<NoteList, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let mut query = vec![
            ("sort", Some(if a.newest_first { "desc" } else { "asc" }.to_owned())),
            ("order_by", Some("created_at".to_owned())),
        ];
        query.extend(paging(a.page, a.per_page));
        let path = uri(&format!("/projects/{}/issues/{}/notes", p.encoded, a.iid), &query);
        let subject = Subject::object(format!("issue #{}", a.iid), &p.name);
        let (page, at) = self.client.get_json::<Vec<WireNote>>(&path, &subject, ctx).await?;
        // By their place in the result, which leaves system notes out unless asked.
        let texts = page
            .iter()
            .filter(|n| a.include_system || !n.system)
            .enumerate()
            .filter_map(|(i, n)| Some((format!("/notes/{i}/body"), n.author.as_ref()?)))
            .collect();
        self.label_authors(&p, texts, ctx).await;
        Ok(note_list(p.name, a.iid, page, a.include_system, at))
    }

    async fn create_issue(
        &self,
        a: CreateIssueArgs,
        ctx: &ToolContext,
    ) -> Result<CreatedIssue, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        if a.title.trim().is_empty() {
            return Err(ToolError::invalid_arguments("`title` must not be empty"));
        }
        let mut body = Map::new();
        body.insert("title".into(), json!(a.title));
        if let Some(d) = a.description {
            body.insert("description".into(), json!(d));
        }
        if let Some(labels) = label_list(a.labels) {
            body.insert("labels".into(), json!(labels));
        }
        if let Some(ids) = a.assignee_ids.filter(|i| !i.is_empty()) {
            body.insert("assignee_ids".into(), json!(ids));
        }
        if let Some(c) = a.confidential {
            body.insert("confidential".into(), json!(c));
        }
        if let Some(d) = a.due_date {
            body.insert("due_date".into(), json!(d));
        }
        let path = format!("/projects/{}/issues", p.encoded);
        let subject = Subject::action("creating an issue", &p.name);
        let issue: WireIssue =
            self.client.post_json(&path, Some(&Value::Object(body)), &subject, ctx).await?;
        Ok(CreatedIssue {
            project: p.name,
            iid: issue.iid,
            title: issue.title,
            labels: issue.labels,
            assignees: usernames(issue.assignees),
            web_url: issue.web_url,
            created_at: issue.created_at,
        })
    }

    async fn create_issue_note(
        &self,
        a: CreateIssueNoteArgs,
        ctx: &ToolContext,
    ) -> Result<CreatedNote, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        if a.body.trim().is_empty() {
            return Err(ToolError::invalid_arguments("`body` must not be empty"));
        }
        let mut body = json!({"body": a.body});
        if let Some(internal) = a.internal {
            body["internal"] = json!(internal);
        }
        let path = format!("/projects/{}/issues/{}/notes", p.encoded, a.iid);
        let subject = Subject::object(format!("issue #{}", a.iid), &p.name);
        let note: WireNote = self.client.post_json(&path, Some(&body), &subject, ctx).await?;
        Ok(created_note(p.name, a.iid, note))
    }
}

register_tool! {
    provider: GitLab,
    name: "list_issues",
    group: "issues",
    description: "List a project's issues (or, without `project`, the issues across projects \
                  the token can see), newest first, with state, labels, assignees and note \
                  counts; filter by state, labels, assignee, author, milestone or text. Returns \
                  `next_page` for more.",
    input: ListIssuesArgs,
    output: IssueList,
    handler: GitLab::list_issues,
}

register_tool! {
    provider: GitLab,
    name: "get_issue",
    group: "issues",
    description: "Get one issue by its number (`iid`) with its description, labels, \
                  assignees, milestone, task progress and counts.",
    input: GetIssueArgs,
    output: IssueDetail,
    handler: GitLab::get_issue,
}

register_tool! {
    provider: GitLab,
    name: "list_issue_notes",
    group: "issues",
    description: "List the comments (notes) on an issue, oldest first; system notes are left \
                  out unless asked for.",
    input: ListIssueNotesArgs,
    output: NoteList,
    handler: GitLab::list_issue_notes,
}

register_tool! {
    provider: GitLab,
    name: "create_issue",
    group: "issues",
    description: "Create an issue in a project with a title, description, labels and \
                  assignees. Returns its number and URL.",
    input: CreateIssueArgs,
    output: CreatedIssue,
    handler: GitLab::create_issue,
}

register_tool! {
    provider: GitLab,
    name: "create_issue_note",
    group: "issues",
    description: "Add a comment (note) to an issue.",
    input: CreateIssueNoteArgs,
    output: CreatedNote,
    handler: GitLab::create_issue_note,
}

// ---------------------------------------------------------------------------------------------
// Changing an issue (update, close), and the labels and milestones issues carry
// ---------------------------------------------------------------------------------------------

/// Arguments of `update_issue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateIssueArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The issue's number within the project (the 47 of `#47`).
    #[serde(alias = "issue_iid")]
    pub(crate) iid: u64,
    /// A new title.
    pub(crate) title: Option<String>,
    /// A new description, in Markdown (replaces the old one).
    #[serde(alias = "body")]
    pub(crate) description: Option<String>,
    /// `close` or `reopen` it.
    pub(crate) state_event: Option<StateEvent>,
    /// Replace all labels with these (`[]` removes them all).
    pub(crate) labels: Option<Vec<String>>,
    /// Labels to add, keeping the others.
    pub(crate) add_labels: Option<Vec<String>>,
    /// Labels to remove, keeping the others.
    pub(crate) remove_labels: Option<Vec<String>>,
    /// Replace the assignees with these numeric user ids (`[]` unassigns all; ids come from
    /// `search_users`).
    pub(crate) assignee_ids: Option<Vec<u64>>,
    /// The numeric id of the milestone to set (from `list_milestones`); 0 removes it.
    pub(crate) milestone_id: Option<u64>,
    /// Due date, `YYYY-MM-DD` (an empty string removes it).
    pub(crate) due_date: Option<String>,
    /// Make it confidential (project members only) or not.
    pub(crate) confidential: Option<bool>,
    /// Lock the discussion (only project members may comment).
    pub(crate) discussion_locked: Option<bool>,
}

/// Arguments of `close_issue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CloseIssueArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The issue's number within the project (the 47 of `#47`).
    #[serde(alias = "issue_iid")]
    pub(crate) iid: u64,
}

/// Arguments of `list_labels`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListLabelsArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// Only labels whose name contains this text.
    pub(crate) search: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Labels per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// `state` of milestone listings.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MilestoneState {
    /// Open ones (`opened` and `open` are accepted too).
    #[serde(alias = "opened", alias = "open")]
    Active,
    /// Closed ones.
    Closed,
    /// Both.
    All,
}

/// Arguments of `list_milestones`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListMilestonesArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// `active` (the default), `closed` or `all`.
    pub(crate) state: Option<MilestoneState>,
    /// Only milestones whose title or description contains this text.
    pub(crate) search: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Milestones per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// A label, with the counts `with_counts=true` adds.
#[derive(Debug, Deserialize)]
pub(crate) struct WireLabel {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    open_issues_count: Option<u64>,
    #[serde(default)]
    open_merge_requests_count: Option<u64>,
    #[serde(default)]
    priority: Option<u64>,
    #[serde(default)]
    is_project_label: Option<bool>,
}

/// A milestone.
#[derive(Debug, Deserialize)]
pub(crate) struct WireMilestone {
    id: u64,
    #[serde(default)]
    iid: Option<u64>,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    state: String,
    #[serde(default)]
    start_date: Option<String>,
    #[serde(default)]
    due_date: Option<String>,
    #[serde(default)]
    expired: Option<bool>,
    #[serde(default)]
    web_url: Option<String>,
}

/// Result of `update_issue` and `close_issue`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ChangedIssue {
    /// The project (as given).
    pub(crate) project: String,
    /// Number, title, state, people, labels, milestone and times, as they are now.
    #[serde(flatten)]
    pub(crate) issue: IssueSummary,
    /// Who closed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) closed_by: Option<String>,
    /// The due date.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) due_date: Option<String>,
}

/// One label.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Label {
    /// The name, as issues and merge requests carry it.
    pub(crate) name: String,
    /// What it is for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// Open issues carrying it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) open_issues: Option<u64>,
    /// Open merge requests carrying it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) open_merge_requests: Option<u64>,
    /// Its priority (lower first), when prioritised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) priority: Option<u64>,
    /// Set for a label inherited from a group.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) group_label: bool,
}

/// Result of `list_labels`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct LabelList {
    /// The project (as given).
    pub(crate) project: String,
    /// The labels of this page, by name.
    pub(crate) labels: Vec<Label>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many labels there are in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// One milestone.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Milestone {
    /// The numeric id (for `milestone_id` of update_issue and update_merge_request).
    pub(crate) id: u64,
    /// Its number within the project.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) iid: Option<u64>,
    /// The title (for `milestone` of list_issues).
    pub(crate) title: String,
    /// `active` or `closed`.
    pub(crate) state: String,
    /// What it is for (cut at 300 bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// When it starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) start_date: Option<String>,
    /// When it is due.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) due_date: Option<String>,
    /// Set when its due date has passed.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) expired: bool,
    /// The milestone on GitLab.
    pub(crate) web_url: Option<String>,
}

/// Result of `list_milestones`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MilestoneList {
    /// The project (as given).
    pub(crate) project: String,
    /// The milestones of this page.
    pub(crate) milestones: Vec<Milestone>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many milestones match in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// Longest label or milestone description in a listing, in bytes.
const LISTED_DESCRIPTION_MAX_BYTES: usize = 300;

/// The result of a changed issue, as GitLab answered.
pub(crate) fn changed_issue(project: String, i: WireIssue) -> ChangedIssue {
    ChangedIssue {
        project,
        issue: i.summary(false),
        closed_by: username(i.closed_by).filter(|_| i.state == "closed"),
        due_date: i.due_date,
    }
}

/// The `list_labels` result.
pub(crate) fn label_list_result(project: String, page: Vec<WireLabel>, at: Page) -> LabelList {
    let labels = page
        .into_iter()
        .map(|l| Label {
            name: l.name,
            description: truncate_opt(
                l.description.filter(|d| !d.trim().is_empty()),
                LISTED_DESCRIPTION_MAX_BYTES,
            ),
            open_issues: l.open_issues_count,
            open_merge_requests: l.open_merge_requests_count,
            priority: l.priority,
            group_label: l.is_project_label == Some(false),
        })
        .collect();
    LabelList { project, labels, next_page: at.next_page, total: at.total }
}

/// The `list_milestones` result.
pub(crate) fn milestone_list(project: String, page: Vec<WireMilestone>, at: Page) -> MilestoneList {
    let milestones = page
        .into_iter()
        .map(|m| Milestone {
            id: m.id,
            iid: m.iid,
            title: m.title,
            state: m.state,
            description: truncate_opt(
                m.description.filter(|d| !d.trim().is_empty()),
                LISTED_DESCRIPTION_MAX_BYTES,
            ),
            start_date: m.start_date,
            due_date: m.due_date,
            expired: m.expired.unwrap_or(false),
            web_url: m.web_url,
        })
        .collect();
    MilestoneList { project, milestones, next_page: at.next_page, total: at.total }
}

impl GitLab {
    /// PUTs the changes of an issue and maps GitLab's answer.
    async fn put_issue(
        &self,
        project: &str,
        iid: u64,
        body: Map<String, Value>,
        ctx: &ToolContext,
    ) -> Result<ChangedIssue, ToolError> {
        let p = ProjectRef::parse(project)?;
        let path = format!("/projects/{}/issues/{}", p.encoded, iid);
        let subject = Subject::object(format!("issue #{iid}"), &p.name);
        let issue: WireIssue =
            self.client.put_json(&path, &Value::Object(body), &subject, ctx).await?;
        Ok(changed_issue(p.name, issue))
    }

    async fn update_issue(
        &self,
        a: UpdateIssueArgs,
        ctx: &ToolContext,
    ) -> Result<ChangedIssue, ToolError> {
        ProjectRef::parse(&a.project)?;
        if a.title.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(ToolError::invalid_arguments("`title` must not be empty"));
        }
        let body = update_body(vec![
            ("title", a.title.map(Value::from)),
            ("description", a.description.map(Value::from)),
            ("state_event", a.state_event.map(|s| Value::from(s.as_str()))),
            ("labels", labels_value(a.labels)),
            ("add_labels", label_list(a.add_labels).map(Value::from)),
            ("remove_labels", label_list(a.remove_labels).map(Value::from)),
            ("assignee_ids", a.assignee_ids.map(|i| json!(i))),
            ("milestone_id", a.milestone_id.map(Value::from)),
            ("due_date", a.due_date.map(Value::from)),
            ("confidential", a.confidential.map(Value::from)),
            ("discussion_locked", a.discussion_locked.map(Value::from)),
        ])?;
        self.put_issue(&a.project, a.iid, body, ctx).await
    }

    async fn close_issue(
        &self,
        a: CloseIssueArgs,
        ctx: &ToolContext,
    ) -> Result<ChangedIssue, ToolError> {
        let mut body = Map::new();
        body.insert("state_event".into(), json!(StateEvent::Close.as_str()));
        self.put_issue(&a.project, a.iid, body, ctx).await
    }

    async fn list_labels(
        &self,
        a: ListLabelsArgs,
        ctx: &ToolContext,
    ) -> Result<LabelList, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let mut query = vec![("search", a.search), ("with_counts", Some("true".to_owned()))];
        query.extend(paging(a.page, a.per_page));
        let path = uri(&format!("/projects/{}/labels", p.encoded), &query);
        let subject = Subject::listing("the labels", &p.name);
        let (page, at) = self.client.get_json::<Vec<WireLabel>>(&path, &subject, ctx).await?;
        Ok(label_list_result(p.name, page, at))
    }

    async fn list_milestones(
        &self,
        a: ListMilestonesArgs,
        ctx: &ToolContext,
    ) -> Result<MilestoneList, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let state = match a.state.unwrap_or(MilestoneState::Active) {
            MilestoneState::Active => Some("active".to_owned()),
            MilestoneState::Closed => Some("closed".to_owned()),
            MilestoneState::All => None,
        };
        let mut query = vec![("state", state), ("search", a.search)];
        query.extend(paging(a.page, a.per_page));
        let path = uri(&format!("/projects/{}/milestones", p.encoded), &query);
        let subject = Subject::listing("the milestones", &p.name);
        let (page, at) = self.client.get_json::<Vec<WireMilestone>>(&path, &subject, ctx).await?;
        Ok(milestone_list(p.name, page, at))
    }
}

register_tool! {
    provider: GitLab,
    name: "update_issue",
    group: "issues",
    description: "Change an issue: title, description, labels (replace, add or remove), \
                  assignees, milestone, due date, confidentiality, or close/reopen it. Returns \
                  it as it is now.",
    input: UpdateIssueArgs,
    output: ChangedIssue,
    handler: GitLab::update_issue,
}

register_tool! {
    provider: GitLab,
    name: "close_issue",
    group: "issues",
    description: "Close an issue (update_issue with `state_event: reopen` reopens it).",
    input: CloseIssueArgs,
    output: ChangedIssue,
    handler: GitLab::close_issue,
}

register_tool! {
    provider: GitLab,
    name: "list_labels",
    group: "issues",
    description: "List a project's labels (its own and its groups') with description and \
                  open issue and merge request counts: the names issues and merge requests \
                  take.",
    input: ListLabelsArgs,
    output: LabelList,
    handler: GitLab::list_labels,
}

register_tool! {
    provider: GitLab,
    name: "list_milestones",
    group: "issues",
    description: "List a project's milestones (active ones by default) with dates and state; \
                  each has the numeric `id` that `milestone_id` takes and the title list_issues \
                  filters by.",
    input: ListMilestonesArgs,
    output: MilestoneList,
    handler: GitLab::list_milestones,
}
