//! Planning: Jira Software's boards and sprints (Agile REST 1.0), moving issues into a sprint,
//! and a project's versions.

use quiver_plugin_sdk::prelude::*;
use reqwest::Method;

use crate::client::{check_key, check_project, endpoint, Api, Subject};
use crate::model::{is_false, next_start, page_size, WirePage};
use crate::Jira;

/// Arguments of `list_boards`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListBoardsArgs {
    /// Only boards of this project (key or id), e.g. `PROJ`.
    #[serde(alias = "projectKeyOrId")]
    pub(crate) project: Option<String>,
    /// Only boards whose name contains this text.
    pub(crate) name: Option<String>,
    /// Only boards of this type.
    #[serde(rename = "type")]
    pub(crate) board_type: Option<BoardType>,
    /// Boards per page: 50 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    #[serde(alias = "maxResults")]
    pub(crate) max_results: Option<u32>,
    /// The offset of the first board (the previous page's `next_start_at`).
    #[serde(alias = "startAt")]
    pub(crate) start_at: Option<u32>,
}

/// A board's type.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum BoardType {
    /// Sprints.
    Scrum,
    /// Continuous flow, no sprints.
    Kanban,
    /// Team-managed boards.
    Simple,
}

impl BoardType {
    fn as_str(self) -> &'static str {
        match self {
            BoardType::Scrum => "scrum",
            BoardType::Kanban => "kanban",
            BoardType::Simple => "simple",
        }
    }
}

/// Arguments of `list_sprints`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListSprintsArgs {
    /// The board id (from `list_boards`).
    #[serde(alias = "boardId")]
    pub(crate) board_id: u64,
    /// Only sprints in these states; all by default.
    pub(crate) state: Option<Vec<SprintState>>,
    /// Sprints per page: 50 by default, at most 50.
    #[schemars(range(min = 1, max = 50))]
    #[serde(alias = "maxResults")]
    pub(crate) max_results: Option<u32>,
    /// The offset of the first sprint (the previous page's `next_start_at`).
    #[serde(alias = "startAt")]
    pub(crate) start_at: Option<u32>,
}

/// A sprint's state.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SprintState {
    /// Not started.
    Future,
    /// Running.
    Active,
    /// Completed.
    Closed,
}

impl SprintState {
    fn as_str(self) -> &'static str {
        match self {
            SprintState::Future => "future",
            SprintState::Active => "active",
            SprintState::Closed => "closed",
        }
    }
}

/// Most issues one call moves (the agile API's own limit).
pub(crate) const MAX_ISSUES_PER_MOVE: usize = 50;

/// Arguments of `move_issues_to_sprint`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MoveIssuesToSprintArgs {
    /// The sprint id (from `list_sprints`); the sprint must be active or future.
    #[serde(alias = "sprintId")]
    pub(crate) sprint_id: u64,
    /// The issue keys, e.g. `["PROJ-1", "PROJ-2"]`; at most 50. Each leaves the open sprint it
    /// was in.
    #[schemars(length(min = 1, max = 50))]
    #[serde(alias = "issue_keys", alias = "keys")]
    pub(crate) issues: Vec<String>,
}

/// Arguments of `list_project_versions`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListProjectVersionsArgs {
    /// The project key (or id), e.g. `PROJ`.
    #[serde(alias = "projectKeyOrId", alias = "project_key")]
    pub(crate) project: String,
    /// Only versions in this state; all by default.
    pub(crate) status: Option<VersionStatus>,
    /// Versions per page: 50 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    #[serde(alias = "maxResults")]
    pub(crate) max_results: Option<u32>,
    /// The offset of the first version (the previous page's `next_start_at`).
    #[serde(alias = "startAt")]
    pub(crate) start_at: Option<u32>,
}

/// A version's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum VersionStatus {
    /// Released and not archived.
    Released,
    /// Not released and not archived.
    Unreleased,
    /// Archived.
    Archived,
}

impl VersionStatus {
    fn as_str(self) -> &'static str {
        match self {
            VersionStatus::Released => "released",
            VersionStatus::Unreleased => "unreleased",
            VersionStatus::Archived => "archived",
        }
    }
}

/// A board as the agile API sends it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireBoard {
    id: u64,
    name: String,
    #[serde(rename = "type", default)]
    board_type: Option<String>,
    #[serde(default)]
    location: Option<Value>,
}

/// A sprint as the agile API sends it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireSprint {
    id: u64,
    name: String,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    start_date: Option<String>,
    #[serde(default)]
    end_date: Option<String>,
    #[serde(default)]
    complete_date: Option<String>,
    #[serde(default)]
    goal: Option<String>,
}

/// A version as the project API sends it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireVersion {
    id: String,
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    released: bool,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    overdue: Option<bool>,
    #[serde(default)]
    start_date: Option<String>,
    #[serde(default)]
    release_date: Option<String>,
}

/// One board.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Board {
    /// The board id (for `list_sprints`).
    pub(crate) id: u64,
    /// Its name.
    pub(crate) name: String,
    /// `scrum`, `kanban` or `simple`; only scrum boards have sprints.
    #[serde(rename = "type")]
    pub(crate) board_type: Option<String>,
    /// The project it belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) project: Option<String>,
}

/// Result of `list_boards`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct BoardList {
    /// The boards of this page.
    pub(crate) boards: Vec<Board>,
    /// How many boards match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
    /// Pass as `start_at` for the next page; null on the last page.
    pub(crate) next_start_at: Option<u64>,
}

/// One sprint.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Sprint {
    /// The sprint id (JQL: `sprint = 12`).
    pub(crate) id: u64,
    /// Its name.
    pub(crate) name: String,
    /// `future`, `active` or `closed`.
    pub(crate) state: Option<String>,
    /// When it started (or is planned to).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) start_date: Option<String>,
    /// When it ends (or ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) end_date: Option<String>,
    /// When it was completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) complete_date: Option<String>,
    /// Its goal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) goal: Option<String>,
}

/// Result of `list_sprints`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SprintList {
    /// The board id.
    pub(crate) board_id: u64,
    /// The sprints of this page, oldest first.
    pub(crate) sprints: Vec<Sprint>,
    /// Pass as `start_at` for the next page; null on the last page.
    pub(crate) next_start_at: Option<u64>,
}

/// Result of `move_issues_to_sprint`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MovedToSprint {
    /// The sprint id.
    pub(crate) sprint_id: u64,
    /// The issues now in the sprint.
    pub(crate) issues: Vec<String>,
}

/// One version.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Version {
    /// The version id.
    pub(crate) id: String,
    /// Its name (use it in `fields: {"Fix versions": ["…"]}` or JQL `fixVersion = "…"`).
    pub(crate) name: String,
    /// Whether it is released.
    pub(crate) released: bool,
    /// Whether it is archived.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) archived: bool,
    /// Whether its release date has passed unreleased.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) overdue: bool,
    /// Its start date.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) start_date: Option<String>,
    /// Its (planned) release date.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) release_date: Option<String>,
    /// Its description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
}

/// Result of `list_project_versions`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct VersionList {
    /// The project key.
    pub(crate) project: String,
    /// The versions of this page, newest first.
    pub(crate) versions: Vec<Version>,
    /// How many versions match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
    /// Pass as `start_at` for the next page; null on the last page.
    pub(crate) next_start_at: Option<u64>,
}

fn page_next<T>(page: &WirePage<T>) -> Option<u64> {
    next_start(page.start_at, page.values.len(), page.max_results, page.total, page.is_last)
}

/// The result of `list_boards`.
pub(crate) fn board_list(page: WirePage<WireBoard>) -> BoardList {
    let next_start_at = page_next(&page);
    BoardList {
        total: page.total,
        next_start_at,
        boards: page
            .values
            .into_iter()
            .map(|b| Board {
                id: b.id,
                name: b.name,
                board_type: b.board_type,
                project: b
                    .location
                    .as_ref()
                    .and_then(|l| l.get("projectKey"))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
            .collect(),
    }
}

/// The result of `list_sprints`.
pub(crate) fn sprint_list(board_id: u64, page: WirePage<WireSprint>) -> SprintList {
    let next_start_at = page_next(&page);
    SprintList {
        board_id,
        next_start_at,
        sprints: page
            .values
            .into_iter()
            .map(|s| Sprint {
                id: s.id,
                name: s.name,
                state: s.state,
                start_date: s.start_date,
                end_date: s.end_date,
                complete_date: s.complete_date,
                goal: s.goal.filter(|g| !g.trim().is_empty()),
            })
            .collect(),
    }
}

/// The result of `list_project_versions`; `status` is applied here too, since Server/Data Center
/// ignores the parameter.
pub(crate) fn version_list(
    project: String,
    page: WirePage<WireVersion>,
    status: Option<VersionStatus>,
) -> VersionList {
    let next_start_at = page_next(&page);
    let keep = |v: &WireVersion| match status {
        None => true,
        Some(VersionStatus::Archived) => v.archived,
        Some(VersionStatus::Released) => v.released && !v.archived,
        Some(VersionStatus::Unreleased) => !v.released && !v.archived,
    };
    VersionList {
        project,
        total: page.total,
        next_start_at,
        versions: page
            .values
            .into_iter()
            .filter(keep)
            .map(|v| Version {
                id: v.id,
                name: v.name,
                released: v.released,
                archived: v.archived,
                overdue: v.overdue.unwrap_or(false),
                start_date: v.start_date,
                release_date: v.release_date,
                description: v.description.filter(|d| !d.trim().is_empty()),
            })
            .collect(),
    }
}

impl Jira {
    async fn list_boards(
        &self,
        args: ListBoardsArgs,
        ctx: &ToolContext,
    ) -> Result<BoardList, ToolError> {
        let project = args.project.as_deref().map(check_project).transpose()?;
        let path = endpoint(
            "/board",
            &[
                ("startAt", Some(args.start_at.unwrap_or(0).to_string())),
                ("maxResults", Some(page_size(args.max_results, 50, 100).to_string())),
                ("projectKeyOrId", project.clone()),
                ("name", args.name.filter(|n| !n.trim().is_empty())),
                ("type", args.board_type.map(|t| t.as_str().to_owned())),
            ],
        );
        let subject = match &project {
            Some(p) => Subject::other(
                format!("the boards of {p}"),
                format!("no project {p} in jira (or the account cannot see it)"),
            ),
            None => Subject::other(
                "the boards",
                "jira has no agile API here (boards need Jira Software)",
            ),
        };
        let page = self.client.get_json(Api::Agile, &path, &subject, ctx).await?;
        Ok(board_list(page))
    }

    async fn list_sprints(
        &self,
        args: ListSprintsArgs,
        ctx: &ToolContext,
    ) -> Result<SprintList, ToolError> {
        let states = args
            .state
            .filter(|s| !s.is_empty())
            .map(|s| s.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(","));
        let path = endpoint(
            &format!("/board/{}/sprint", args.board_id),
            &[
                ("startAt", Some(args.start_at.unwrap_or(0).to_string())),
                ("maxResults", Some(page_size(args.max_results, 50, 50).to_string())),
                ("state", states),
            ],
        );
        let subject = Subject::other(
            format!("the sprints of board {}", args.board_id),
            format!("no board {} in jira (or the account cannot see it)", args.board_id),
        );
        let page = self.client.get_json(Api::Agile, &path, &subject, ctx).await?;
        Ok(sprint_list(args.board_id, page))
    }

    async fn move_issues_to_sprint(
        &self,
        args: MoveIssuesToSprintArgs,
        ctx: &ToolContext,
    ) -> Result<MovedToSprint, ToolError> {
        if args.issues.is_empty() || args.issues.len() > MAX_ISSUES_PER_MOVE {
            return Err(ToolError::invalid_arguments(format!(
                "`issues` must name 1 to {MAX_ISSUES_PER_MOVE} issues; got {}",
                args.issues.len()
            )));
        }
        let issues =
            args.issues.iter().map(|k| check_key("issues", k)).collect::<Result<Vec<_>, _>>()?;
        let subject = Subject::other(
            format!("moving {} to sprint {}", issues.join(", "), args.sprint_id),
            format!("no sprint {} in jira (or the account cannot see it)", args.sprint_id),
        );
        self.client
            .send(
                Method::POST,
                Api::Agile,
                &format!("/sprint/{}/issue", args.sprint_id),
                &json!({ "issues": issues }),
                &subject,
                ctx,
            )
            .await?;
        Ok(MovedToSprint { sprint_id: args.sprint_id, issues })
    }

    async fn list_project_versions(
        &self,
        args: ListProjectVersionsArgs,
        ctx: &ToolContext,
    ) -> Result<VersionList, ToolError> {
        let project = check_project(&args.project)?;
        let path = endpoint(
            &format!("/project/{project}/version"),
            &[
                ("startAt", Some(args.start_at.unwrap_or(0).to_string())),
                ("maxResults", Some(page_size(args.max_results, 50, 100).to_string())),
                ("orderBy", Some("-sequence".into())),
                ("status", args.status.map(|s| s.as_str().to_owned())),
            ],
        );
        let subject = Subject::other(
            format!("the versions of {project}"),
            format!("no project {project} in jira (or the account cannot see it)"),
        );
        let page = self.client.get_json(Api::Core, &path, &subject, ctx).await?;
        Ok(version_list(project, page, args.status))
    }
}

register_tool! {
    provider: Jira,
    name: "list_boards",
    group: "planning",
    description: "List Jira Software boards (id, name, type, project), optionally of one \
                  project, by name or type. Scrum boards have sprints: see `list_sprints`.",
    input: ListBoardsArgs,
    output: BoardList,
    handler: Jira::list_boards,
}

register_tool! {
    provider: Jira,
    name: "list_sprints",
    group: "planning",
    description: "List a scrum board's sprints (id, name, state, dates, goal), optionally only \
                  `active`, `future` or `closed` ones. Search a sprint's issues with JQL \
                  `sprint = <id>`.",
    input: ListSprintsArgs,
    output: SprintList,
    handler: Jira::list_sprints,
}

register_tool! {
    provider: Jira,
    name: "list_project_versions",
    group: "planning",
    description: "List a project's versions (releases), newest first: name, released/archived, \
                  start and release dates; optionally only released, unreleased or archived.",
    input: ListProjectVersionsArgs,
    output: VersionList,
    handler: Jira::list_project_versions,
}

register_tool! {
    provider: Jira,
    name: "move_issues_to_sprint",
    group: "planning",
    description: "Move issues (up to 50 keys) into an active or future sprint; each leaves the \
                  open sprint it was in. Closed sprints cannot take issues.",
    input: MoveIssuesToSprintArgs,
    output: MovedToSprint,
    handler: Jira::move_issues_to_sprint,
}
