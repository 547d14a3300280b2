//! Projects (list, get) and search across GitLab or within one project.

use quiver_plugin_sdk::prelude::*;

use crate::client::{paging, uri, Page, ProjectRef, Subject};
use crate::issues::{IssueState, IssueSummary, WireIssue};
use crate::merge_requests::{MergeRequestSummary, WireMergeRequest};
use crate::model::{is_false, nullable, project_arg, project_arg_opt, truncate, truncate_opt};
use crate::GitLab;

/// Longest project description in a listing, in bytes.
const LISTED_DESCRIPTION_MAX_BYTES: usize = 300;
/// Longest project description of `get_project`, in bytes.
const DESCRIPTION_MAX_BYTES: usize = 4 * 1024;
/// Longest matching snippet of a code search hit, in bytes.
const BLOB_MAX_BYTES: usize = 1024;

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// Arguments of `list_projects`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListProjectsArgs {
    /// Only projects whose name or path contains this text.
    pub(crate) search: Option<String>,
    /// Only projects the token's user is a member of (true by default; false lists every
    /// project the token can see, which on gitlab.com is millions).
    pub(crate) membership: Option<bool>,
    /// Only projects the token's user owns.
    pub(crate) owned: Option<bool>,
    /// `false` leaves archived projects out, `true` lists only them; both by default.
    pub(crate) archived: Option<bool>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `get_project`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetProjectArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
}

/// What `search` looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SearchScope {
    /// Issues (title and description).
    Issues,
    /// Merge requests (title and description).
    MergeRequests,
    /// Projects by name (not within a project).
    Projects,
    /// Code: file contents (within a project; across projects only where GitLab has advanced
    /// search).
    Blobs,
}

impl SearchScope {
    fn as_str(self) -> &'static str {
        match self {
            SearchScope::Issues => "issues",
            SearchScope::MergeRequests => "merge_requests",
            SearchScope::Projects => "projects",
            SearchScope::Blobs => "blobs",
        }
    }
}

/// Arguments of `search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchArgs {
    /// What to search: `issues`, `merge_requests`, `projects` or `blobs` (code).
    pub(crate) scope: SearchScope,
    /// The text to search for. For `blobs`, GitLab's filters work too: `filename:*.rs`,
    /// `path:src/`, `extension:toml`.
    #[serde(alias = "query", alias = "q")]
    pub(crate) search: String,
    /// Search within this project: its id (`42`) or full path (`group/subgroup/project`);
    /// across GitLab when unset.
    #[serde(default, alias = "project_id", deserialize_with = "project_arg_opt")]
    pub(crate) project: Option<String>,
    /// For `blobs` within a project: the branch, tag or commit to search (the default branch
    /// when unset).
    #[serde(rename = "ref")]
    pub(crate) git_ref: Option<String>,
    /// For `issues` and `merge_requests`: only `opened` or `closed` ones.
    pub(crate) state: Option<IssueState>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

// ---------------------------------------------------------------------------------------------
// What GitLab sends (only the kept fields)
// ---------------------------------------------------------------------------------------------

/// A project, as the list, get and search endpoints send it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireProject {
    id: u64,
    #[serde(default)]
    path_with_namespace: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    default_branch: Option<String>,
    #[serde(default)]
    visibility: Option<String>,
    #[serde(default)]
    archived: bool,
    #[serde(default, deserialize_with = "nullable")]
    topics: Vec<String>,
    #[serde(default)]
    last_activity_at: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    open_issues_count: Option<u64>,
    #[serde(default)]
    forks_count: Option<u64>,
    #[serde(default)]
    star_count: Option<u64>,
    #[serde(default)]
    http_url_to_repo: Option<String>,
    #[serde(default)]
    web_url: Option<String>,
    #[serde(default)]
    merge_method: Option<String>,
    #[serde(default)]
    only_allow_merge_if_pipeline_succeeds: Option<bool>,
    #[serde(default)]
    only_allow_merge_if_all_discussions_are_resolved: Option<bool>,
    #[serde(default)]
    forked_from_project: Option<WireForkParent>,
    #[serde(default)]
    permissions: Option<WirePermissions>,
}

/// `forked_from_project`: only the path is kept.
#[derive(Debug, Deserialize)]
pub(crate) struct WireForkParent {
    path_with_namespace: String,
}

/// `permissions`: the token user's access through the project and through its group.
#[derive(Debug, Deserialize)]
pub(crate) struct WirePermissions {
    #[serde(default)]
    project_access: Option<WireAccess>,
    #[serde(default)]
    group_access: Option<WireAccess>,
}

/// One access grant.
#[derive(Debug, Deserialize)]
pub(crate) struct WireAccess {
    access_level: u64,
}

/// A code search hit.
#[derive(Debug, Deserialize)]
pub(crate) struct WireBlob {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    filename: Option<String>,
    #[serde(default, rename = "ref")]
    git_ref: Option<String>,
    #[serde(default)]
    startline: Option<u64>,
    #[serde(default)]
    data: Option<String>,
    #[serde(default)]
    project_id: Option<u64>,
}

// ---------------------------------------------------------------------------------------------
// What the tools return
// ---------------------------------------------------------------------------------------------

/// One project in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ProjectSummary {
    /// The full path (`group/subgroup/project`), to pass as `project`.
    pub(crate) project: String,
    /// The numeric id.
    pub(crate) id: u64,
    /// The description's start (300 bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// The default branch.
    pub(crate) default_branch: Option<String>,
    /// `private`, `internal` or `public`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) visibility: Option<String>,
    /// Set for an archived (read-only) project.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) archived: bool,
    /// When anything last happened in it.
    pub(crate) last_activity_at: Option<String>,
    /// The project on GitLab.
    pub(crate) web_url: Option<String>,
}

/// Result of `list_projects`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ProjectList {
    /// The projects of this page, most recently active first.
    pub(crate) projects: Vec<ProjectSummary>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many match in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// Result of `get_project`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ProjectDetail {
    /// The full path (`group/subgroup/project`).
    pub(crate) project: String,
    /// The numeric id.
    pub(crate) id: u64,
    /// The display name.
    pub(crate) name: Option<String>,
    /// The description (cut at 4 KiB, saying so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// The default branch.
    pub(crate) default_branch: Option<String>,
    /// `private`, `internal` or `public`.
    pub(crate) visibility: Option<String>,
    /// Set for an archived (read-only) project.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) archived: bool,
    /// Topics.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) topics: Vec<String>,
    /// The project it was forked from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) forked_from: Option<String>,
    /// Open issues.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) open_issues_count: Option<u64>,
    /// Forks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) forks_count: Option<u64>,
    /// Stars.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) star_count: Option<u64>,
    /// `merge`, `rebase_merge` or `ff` (fast-forward only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merge_method: Option<String>,
    /// Merge requests need a passing pipeline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) only_allow_merge_if_pipeline_succeeds: Option<bool>,
    /// Merge requests need every thread resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) only_allow_merge_if_all_discussions_are_resolved: Option<bool>,
    /// The token user's role: `guest`, `reporter`, `developer`, `maintainer` or `owner`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) access: Option<&'static str>,
    /// The HTTPS clone URL.
    pub(crate) http_url_to_repo: Option<String>,
    /// The project on GitLab.
    pub(crate) web_url: Option<String>,
    /// When it was created.
    pub(crate) created_at: Option<String>,
    /// When anything last happened in it.
    pub(crate) last_activity_at: Option<String>,
}

/// A code search hit.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct BlobHit {
    /// The project (as given, else its numeric id).
    pub(crate) project: Option<String>,
    /// The file.
    pub(crate) path: Option<String>,
    /// The branch or commit searched.
    #[serde(rename = "ref")]
    pub(crate) git_ref: Option<String>,
    /// The first line of `data` in the file.
    pub(crate) startline: Option<u64>,
    /// The matching lines (cut at 1 KiB).
    pub(crate) data: Option<String>,
}

/// Result of `search`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SearchResult {
    /// What was searched.
    pub(crate) scope: &'static str,
    /// The text searched for.
    pub(crate) search: String,
    /// The project searched in (absent for a search across GitLab).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) project: Option<String>,
    /// Hits on this page.
    pub(crate) count: usize,
    /// Issue hits (each names its project).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) issues: Vec<IssueSummary>,
    /// Merge request hits (each names its project).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) merge_requests: Vec<MergeRequestSummary>,
    /// Project hits.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) projects: Vec<ProjectSummary>,
    /// Code hits.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) blobs: Vec<BlobHit>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many hits in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

// ---------------------------------------------------------------------------------------------
// Mapping (pure, so tests can run it on recorded responses)
// ---------------------------------------------------------------------------------------------

impl WireProject {
    fn summary(&self) -> ProjectSummary {
        ProjectSummary {
            project: self.path_with_namespace.clone(),
            id: self.id,
            description: self
                .description
                .as_deref()
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(|d| truncate(d, LISTED_DESCRIPTION_MAX_BYTES).0),
            default_branch: self.default_branch.clone(),
            visibility: self.visibility.clone(),
            archived: self.archived,
            last_activity_at: self.last_activity_at.clone(),
            web_url: self.web_url.clone(),
        }
    }
}

/// GitLab's access levels by name.
fn access_name(level: u64) -> Option<&'static str> {
    match level {
        50.. => Some("owner"),
        40..=49 => Some("maintainer"),
        30..=39 => Some("developer"),
        20..=29 => Some("reporter"),
        10..=19 => Some("guest"),
        _ => None,
    }
}

/// The `list_projects` result.
pub(crate) fn project_list(page: Vec<WireProject>, at: Page) -> ProjectList {
    ProjectList {
        projects: page.iter().map(WireProject::summary).collect(),
        next_page: at.next_page,
        total: at.total,
    }
}

/// The `get_project` result.
pub(crate) fn project_detail(p: WireProject) -> ProjectDetail {
    let access = p.permissions.as_ref().and_then(|perm| {
        let level = |a: &Option<WireAccess>| a.as_ref().map_or(0, |a| a.access_level);
        access_name(level(&perm.project_access).max(level(&perm.group_access)))
    });
    ProjectDetail {
        project: p.path_with_namespace,
        id: p.id,
        name: p.name,
        description: truncate_opt(p.description, DESCRIPTION_MAX_BYTES),
        default_branch: p.default_branch,
        visibility: p.visibility,
        archived: p.archived,
        topics: p.topics,
        forked_from: p.forked_from_project.map(|f| f.path_with_namespace),
        open_issues_count: p.open_issues_count,
        forks_count: p.forks_count,
        star_count: p.star_count,
        merge_method: p.merge_method,
        only_allow_merge_if_pipeline_succeeds: p.only_allow_merge_if_pipeline_succeeds,
        only_allow_merge_if_all_discussions_are_resolved: p
            .only_allow_merge_if_all_discussions_are_resolved,
        access,
        http_url_to_repo: p.http_url_to_repo,
        web_url: p.web_url,
        created_at: p.created_at,
        last_activity_at: p.last_activity_at,
    }
}

/// The search hits of one scope, read from GitLab's answer.
pub(crate) enum Hits {
    /// `scope=issues`.
    Issues(Vec<WireIssue>),
    /// `scope=merge_requests`.
    MergeRequests(Vec<WireMergeRequest>),
    /// `scope=projects`.
    Projects(Vec<WireProject>),
    /// `scope=blobs`.
    Blobs(Vec<WireBlob>),
}

/// The `search` result.
pub(crate) fn search_result(
    scope: SearchScope,
    search: String,
    project: Option<String>,
    hits: Hits,
    at: Page,
) -> SearchResult {
    let mut result = SearchResult {
        scope: scope.as_str(),
        search,
        project,
        count: 0,
        issues: Vec::new(),
        merge_requests: Vec::new(),
        projects: Vec::new(),
        blobs: Vec::new(),
        next_page: at.next_page,
        total: at.total,
    };
    match hits {
        Hits::Issues(page) => result.issues = page.iter().map(|i| i.summary(true)).collect(),
        Hits::MergeRequests(page) => {
            result.merge_requests = page.iter().map(|m| m.summary(true)).collect()
        }
        Hits::Projects(page) => result.projects = page.iter().map(WireProject::summary).collect(),
        Hits::Blobs(page) => {
            let searched = result.project.clone();
            result.blobs = page
                .into_iter()
                .map(|b| BlobHit {
                    project: searched.clone().or(b.project_id.map(|id| id.to_string())),
                    path: b.path.or(b.filename),
                    git_ref: b.git_ref,
                    startline: b.startline,
                    data: b.data.map(|d| truncate(&d, BLOB_MAX_BYTES).0),
                })
                .collect()
        }
    }
    result.count = result.issues.len()
        + result.merge_requests.len()
        + result.projects.len()
        + result.blobs.len();
    result
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

impl GitLab {
    async fn list_projects(
        &self,
        a: ListProjectsArgs,
        ctx: &ToolContext,
    ) -> Result<ProjectList, ToolError> {
        // Membership needs a user; without a token the filter would only earn a 401.
        let membership = a.membership.unwrap_or(self.client.has_token());
        let mut query = vec![
            ("search", a.search),
            ("membership", membership.then(|| "true".to_owned())),
            ("owned", a.owned.filter(|o| *o).map(|_| "true".to_owned())),
            ("archived", a.archived.map(|a| a.to_string())),
            ("order_by", Some("last_activity_at".to_owned())),
        ];
        query.extend(paging(a.page, a.per_page));
        let subject = Subject::global("the projects");
        let (page, at) = self
            .client
            .get_json::<Vec<WireProject>>(&uri("/projects", &query), &subject, ctx)
            .await?;
        Ok(project_list(page, at))
    }

    async fn get_project(
        &self,
        a: GetProjectArgs,
        ctx: &ToolContext,
    ) -> Result<ProjectDetail, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let subject = Subject::global(format!("project {}", p.name))
            .not_found_says(format!("no project {} (or the token cannot see it)", p.name));
        let (project, _) = self
            .client
            .get_json::<WireProject>(&format!("/projects/{}", p.encoded), &subject, ctx)
            .await?;
        Ok(project_detail(project))
    }

    async fn search(&self, a: SearchArgs, ctx: &ToolContext) -> Result<SearchResult, ToolError> {
        if a.search.trim().is_empty() {
            return Err(ToolError::invalid_arguments("`search` must not be empty"));
        }
        let project = a.project.as_deref().map(ProjectRef::parse).transpose()?;
        if project.is_some() && a.scope == SearchScope::Projects {
            return Err(ToolError::invalid_arguments(
                "scope `projects` searches across GitLab: leave `project` out",
            ));
        }
        let state = a
            .state
            .filter(|_| matches!(a.scope, SearchScope::Issues | SearchScope::MergeRequests))
            .and_then(IssueState::query);
        let mut query = vec![
            ("scope", Some(a.scope.as_str().to_owned())),
            ("search", Some(a.search.clone())),
            ("ref", a.git_ref.filter(|_| project.is_some() && a.scope == SearchScope::Blobs)),
            ("state", state),
        ];
        query.extend(paging(a.page, a.per_page));
        let (path, subject) = match &project {
            Some(p) => (
                format!("/projects/{}/search", p.encoded),
                Subject::action(&format!("searching {}", a.scope.as_str()), &p.name),
            ),
            None => {
                ("/search".to_owned(), Subject::global(format!("a search of {}", a.scope.as_str())))
            }
        };
        let uri = uri(&path, &query);
        let c = &self.client;
        let (hits, at) = match a.scope {
            SearchScope::Issues => {
                let (page, at) = c.get_json(&uri, &subject, ctx).await?;
                (Hits::Issues(page), at)
            }
            SearchScope::MergeRequests => {
                let (page, at) = c.get_json(&uri, &subject, ctx).await?;
                (Hits::MergeRequests(page), at)
            }
            SearchScope::Projects => {
                let (page, at) = c.get_json(&uri, &subject, ctx).await?;
                (Hits::Projects(page), at)
            }
            SearchScope::Blobs => {
                let (page, at) = c.get_json(&uri, &subject, ctx).await?;
                (Hits::Blobs(page), at)
            }
        };
        Ok(search_result(a.scope, a.search, project.map(|p| p.name), hits, at))
    }
}

register_tool! {
    provider: GitLab,
    name: "list_projects",
    group: "projects",
    description: "List the projects the token's user is a member of (most recently active \
                  first), with path, default branch and visibility; filter by name. Returns \
                  `next_page` for more.",
    input: ListProjectsArgs,
    output: ProjectList,
    handler: GitLab::list_projects,
}

register_tool! {
    provider: GitLab,
    name: "get_project",
    group: "projects",
    description: "Get one project by id or path: default branch, visibility, merge method and \
                  merge checks, your access level, counts and clone URL.",
    input: GetProjectArgs,
    output: ProjectDetail,
    handler: GitLab::get_project,
}

register_tool! {
    provider: GitLab,
    name: "search",
    group: "projects",
    description: "Search GitLab, or one project, for issues, merge requests, projects or code \
                  (`blobs`). Hits name their project and number, ready for get_issue or \
                  get_merge_request.",
    input: SearchArgs,
    output: SearchResult,
    handler: GitLab::search,
}

// ---------------------------------------------------------------------------------------------
// Users
// ---------------------------------------------------------------------------------------------

/// Arguments of `search_users`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchUsersArgs {
    /// A name, username or public email to look for, e.g. `alice`.
    #[serde(alias = "query", alias = "q", alias = "username")]
    pub(crate) search: String,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Users per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// A user as `/users` sends it to anyone.
#[derive(Debug, Deserialize)]
pub(crate) struct WireUserBasic {
    id: u64,
    #[serde(default)]
    username: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    web_url: Option<String>,
}

/// One user.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct User {
    /// The numeric id (for `assignee_ids` and `reviewer_ids`).
    pub(crate) id: u64,
    /// The username (as results name people, and for `@` mentions).
    pub(crate) username: String,
    /// The display name.
    pub(crate) name: Option<String>,
    /// `blocked`, `deactivated`…, when the account is not active.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) state: Option<String>,
    /// The profile on GitLab.
    pub(crate) web_url: Option<String>,
}

/// Result of `search_users`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct UserList {
    /// The text searched for.
    pub(crate) search: String,
    /// The users of this page.
    pub(crate) users: Vec<User>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many users match in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// The `search_users` result.
pub(crate) fn user_list(search: String, page: Vec<WireUserBasic>, at: Page) -> UserList {
    let users = page
        .into_iter()
        .map(|u| User {
            id: u.id,
            username: u.username,
            name: u.name,
            state: u.state.filter(|s| s != "active"),
            web_url: u.web_url,
        })
        .collect();
    UserList { search, users, next_page: at.next_page, total: at.total }
}

impl GitLab {
    async fn search_users(
        &self,
        a: SearchUsersArgs,
        ctx: &ToolContext,
    ) -> Result<UserList, ToolError> {
        let search = a.search.trim().trim_start_matches('@').to_owned();
        if search.is_empty() {
            return Err(ToolError::invalid_arguments("`search` must not be empty"));
        }
        let mut query = vec![("search", Some(search.clone()))];
        query.extend(paging(a.page, a.per_page));
        let subject = Subject::global(format!("users matching `{search}`"));
        let (page, at) = self
            .client
            .get_json::<Vec<WireUserBasic>>(&uri("/users", &query), &subject, ctx)
            .await?;
        Ok(user_list(search, page, at))
    }
}

register_tool! {
    provider: GitLab,
    name: "search_users",
    group: "projects",
    description: "Find GitLab users by name, username or public email, with the numeric `id` \
                  that assignee_ids and reviewer_ids take.",
    input: SearchUsersArgs,
    output: UserList,
    handler: GitLab::search_users,
}
