//! The hierarchy: workspaces (ClickUp's API calls them teams), their spaces, the folders of a
//! space, lists (in a folder, or directly in a space), and the people who can see a list or a
//! task.

use quiver_plugin_sdk::prelude::*;

use crate::client::Subject;
use crate::model::{
    check_id, id_arg, is_false, iso_from_ms, lenient_string, lenient_u64, opt_id_arg, WireRef,
    WireStatus, WireUser,
};
use crate::ClickUp;

/// At most this many members are listed per workspace.
pub(crate) const MEMBERS_MAX: usize = 100;

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// Arguments of `list_workspaces` (none).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListWorkspacesArgs {}

/// Arguments of `list_spaces`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListSpacesArgs {
    /// The workspace id (`team_id` from `list_workspaces`), e.g. `9012345678`.
    #[serde(deserialize_with = "id_arg", alias = "workspace_id")]
    pub(crate) team_id: String,
    /// List archived spaces instead of active ones.
    #[serde(default)]
    pub(crate) archived: bool,
}

/// Arguments of `list_folders`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListFoldersArgs {
    /// The space id (`space_id` from `list_spaces`).
    #[serde(deserialize_with = "id_arg")]
    pub(crate) space_id: String,
    /// List archived folders instead of active ones.
    #[serde(default)]
    pub(crate) archived: bool,
}

/// Arguments of `list_lists`: give `folder_id` for the lists of one folder, or `space_id` for
/// every list of a space (folderless ones and those in its folders).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListListsArgs {
    /// The space id (`space_id` from `list_spaces`): all lists of the space.
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) space_id: Option<String>,
    /// The folder id (`folder_id` from `list_folders`): the lists of that folder only.
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) folder_id: Option<String>,
    /// List archived lists instead of active ones.
    #[serde(default)]
    pub(crate) archived: bool,
}

/// Arguments of `list_members`: give `list_id` or `task_id`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListMembersArgs {
    /// The list (`list_id` from `list_lists`): the people who can see it.
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) list_id: Option<String>,
    /// The task (`task_id` from a listing): the people who can see it.
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) task_id: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// What ClickUp sends (only the kept fields)
// ---------------------------------------------------------------------------------------------

/// `GET /list/{list_id}/member` and `GET /task/{task_id}/member`: users, not nested.
#[derive(Debug, Deserialize)]
pub(crate) struct WireMembers {
    #[serde(default)]
    members: Vec<WireUser>,
}

/// `GET /team`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTeams {
    #[serde(default)]
    teams: Vec<WireTeam>,
}

#[derive(Debug, Deserialize)]
struct WireTeam {
    #[serde(deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    members: Vec<WireMember>,
}

#[derive(Debug, Deserialize)]
struct WireMember {
    user: WireUser,
}

/// `GET /team/{team_id}/space`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireSpaces {
    #[serde(default)]
    spaces: Vec<WireSpace>,
}

#[derive(Debug, Deserialize)]
struct WireSpace {
    #[serde(deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    private: bool,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    multiple_assignees: bool,
    #[serde(default)]
    statuses: Vec<WireStatus>,
    #[serde(default)]
    features: Option<Value>,
}

/// `GET /space/{space_id}/folder`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireFolders {
    #[serde(default)]
    folders: Vec<WireFolder>,
}

#[derive(Debug, Deserialize)]
struct WireFolder {
    #[serde(deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    hidden: bool,
    #[serde(default, deserialize_with = "lenient_u64")]
    task_count: Option<u64>,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    lists: Vec<WireList>,
}

/// `GET /folder/{folder_id}/list` and `GET /space/{space_id}/list`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireLists {
    #[serde(default)]
    lists: Vec<WireList>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireList {
    #[serde(deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    task_count: Option<u64>,
    #[serde(default, deserialize_with = "lenient_string")]
    due_date: Option<String>,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    folder: Option<WireRef>,
    #[serde(default)]
    statuses: Vec<WireStatus>,
}

// ---------------------------------------------------------------------------------------------
// What the tools return
// ---------------------------------------------------------------------------------------------

/// A member of a workspace.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Member {
    /// The user id, as `assignees` filters and `create_task` take it.
    pub(crate) user_id: Option<u64>,
    /// The user's name.
    pub(crate) username: String,
}

/// Result of `list_members`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MemberList {
    /// The list asked about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) list_id: Option<String>,
    /// The task asked about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_id: Option<String>,
    /// How many people can see it.
    pub(crate) member_count: usize,
    /// The people (the first 100), as `user_id` and name for assignments.
    pub(crate) members: Vec<Member>,
}

/// One workspace.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Workspace {
    /// The workspace id, `team_id` in every other tool.
    pub(crate) team_id: String,
    /// Its name.
    pub(crate) name: Option<String>,
    /// How many members it has.
    pub(crate) member_count: usize,
    /// Its members (the first 100), for assignee filters and assignments.
    pub(crate) members: Vec<Member>,
}

/// Result of `list_workspaces`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WorkspaceList {
    /// The workspaces the token can reach.
    pub(crate) workspaces: Vec<Workspace>,
}

/// One space.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Space {
    /// The space id, for `list_folders`, `list_lists` and `search_tasks` filters.
    pub(crate) space_id: String,
    /// Its name.
    pub(crate) name: Option<String>,
    /// The task statuses of the space, in workflow order (lists may override them).
    pub(crate) statuses: Vec<String>,
    /// Set when only invited members can see it.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) private: bool,
    /// Set when tasks may have several assignees.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) multiple_assignees: bool,
    /// Set for an archived space.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) archived: bool,
    /// The ClickApps switched on (`time_tracking`, `tags`, `custom_fields`, `points`…).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) features: Vec<String>,
}

/// Result of `list_spaces`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SpaceList {
    /// The workspace.
    pub(crate) team_id: String,
    /// Its spaces.
    pub(crate) spaces: Vec<Space>,
}

/// One folder.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Folder {
    /// The folder id, for `list_lists`.
    pub(crate) folder_id: String,
    /// Its name.
    pub(crate) name: Option<String>,
    /// How many tasks its lists hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_count: Option<u64>,
    /// How many lists it has.
    pub(crate) list_count: usize,
    /// The names of its lists (`list_lists` gives their ids and task counts).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) lists: Vec<String>,
    /// Set for an archived folder.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) archived: bool,
}

/// Result of `list_folders`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct FolderList {
    /// The space.
    pub(crate) space_id: String,
    /// Its folders.
    pub(crate) folders: Vec<Folder>,
}

/// One list.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ListSummary {
    /// The list id, for `list_tasks` and `create_task`.
    pub(crate) list_id: String,
    /// Its name.
    pub(crate) name: Option<String>,
    /// The folder it is in; absent for lists directly in the space.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) folder: Option<String>,
    /// How many tasks it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_count: Option<u64>,
    /// Its due date, ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) due_date: Option<String>,
    /// Its own statuses, when it overrides the space's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) statuses: Vec<String>,
    /// Set for an archived list.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) archived: bool,
}

/// Result of `list_lists`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ListList {
    /// The space asked about, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) space_id: Option<String>,
    /// The folder asked about, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) folder_id: Option<String>,
    /// The lists: folderless ones first, then those of each folder.
    pub(crate) lists: Vec<ListSummary>,
}

// ---------------------------------------------------------------------------------------------
// Mapping (pure, so tests can run it on recorded responses)
// ---------------------------------------------------------------------------------------------

fn status_names(statuses: &[WireStatus]) -> Vec<String> {
    statuses.iter().filter_map(|s| s.status.clone()).collect()
}

/// The `list_workspaces` result.
pub(crate) fn workspace_list(wire: WireTeams) -> WorkspaceList {
    let workspaces = wire
        .teams
        .into_iter()
        .map(|t| Workspace {
            team_id: t.id.unwrap_or_default(),
            name: t.name,
            member_count: t.members.len(),
            members: t
                .members
                .iter()
                .take(MEMBERS_MAX)
                .map(|m| Member {
                    user_id: m.user.id.as_deref().and_then(|id| id.parse().ok()),
                    username: m.user.name(),
                })
                .collect(),
        })
        .collect();
    WorkspaceList { workspaces }
}

/// The `list_spaces` result.
pub(crate) fn space_list(team_id: String, wire: WireSpaces) -> SpaceList {
    let spaces = wire
        .spaces
        .into_iter()
        .map(|s| {
            let features = s
                .features
                .as_ref()
                .and_then(Value::as_object)
                .map(|f| {
                    f.iter()
                        .filter(|(_, v)| v.get("enabled").and_then(Value::as_bool) == Some(true))
                        .map(|(k, _)| k.clone())
                        .collect()
                })
                .unwrap_or_default();
            Space {
                space_id: s.id.unwrap_or_default(),
                name: s.name,
                statuses: status_names(&s.statuses),
                private: s.private,
                multiple_assignees: s.multiple_assignees,
                archived: s.archived,
                features,
            }
        })
        .collect();
    SpaceList { team_id, spaces }
}

/// The `list_folders` result.
pub(crate) fn folder_list(space_id: String, wire: WireFolders) -> FolderList {
    let folders = wire
        .folders
        .into_iter()
        .filter(|f| !f.hidden)
        .map(|f| Folder {
            folder_id: f.id.unwrap_or_default(),
            name: f.name,
            task_count: f.task_count,
            list_count: f.lists.len(),
            lists: f.lists.into_iter().filter_map(|l| l.name).collect(),
            archived: f.archived,
        })
        .collect();
    FolderList { space_id, folders }
}

fn list_summary(l: WireList, folder: Option<String>) -> ListSummary {
    let folder = folder.or_else(|| l.folder.filter(|f| !f.hidden).and_then(|f| f.name));
    ListSummary {
        list_id: l.id.unwrap_or_default(),
        name: l.name,
        folder,
        task_count: l.task_count,
        due_date: iso_from_ms(l.due_date.as_deref()),
        statuses: status_names(&l.statuses),
        archived: l.archived,
    }
}

/// The lists of one folder.
pub(crate) fn folder_lists(folder_id: String, wire: WireLists) -> ListList {
    let lists = wire.lists.into_iter().map(|l| list_summary(l, None)).collect();
    ListList { space_id: None, folder_id: Some(folder_id), lists }
}

/// Every list of a space: the folderless ones, then those nested in its folders.
pub(crate) fn space_lists(
    space_id: String,
    folderless: WireLists,
    folders: WireFolders,
) -> ListList {
    let mut lists: Vec<ListSummary> =
        folderless.lists.into_iter().map(|l| list_summary(l, None)).collect();
    for folder in folders.folders {
        let name = folder.name.clone().filter(|_| !folder.hidden);
        lists.extend(folder.lists.into_iter().map(|l| list_summary(l, name.clone())));
    }
    ListList { space_id: Some(space_id), folder_id: None, lists }
}

/// The `list_members` result.
pub(crate) fn member_list(
    list_id: Option<String>,
    task_id: Option<String>,
    wire: WireMembers,
) -> MemberList {
    MemberList {
        list_id,
        task_id,
        member_count: wire.members.len(),
        members: wire
            .members
            .iter()
            .take(MEMBERS_MAX)
            .map(|u| Member {
                user_id: u.id.as_deref().and_then(|id| id.parse().ok()),
                username: u.name(),
            })
            .collect(),
    }
}

fn archived_query(archived: bool) -> Vec<(&'static str, String)> {
    vec![("archived", archived.to_string())]
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

impl ClickUp {
    async fn list_workspaces(
        &self,
        _a: ListWorkspacesArgs,
        ctx: &ToolContext,
    ) -> Result<WorkspaceList, ToolError> {
        let subject = Subject::global("workspaces");
        let wire = self.client.get_json::<WireTeams>("/team", &[], &subject, ctx).await?;
        Ok(workspace_list(wire))
    }

    async fn list_spaces(
        &self,
        a: ListSpacesArgs,
        ctx: &ToolContext,
    ) -> Result<SpaceList, ToolError> {
        check_id("team_id", &a.team_id)?;
        let subject = Subject::of("the spaces", "workspace", &a.team_id);
        let path = format!("/team/{}/space", a.team_id);
        let wire = self.client.get_json(&path, &archived_query(a.archived), &subject, ctx).await?;
        Ok(space_list(a.team_id, wire))
    }

    async fn list_folders(
        &self,
        a: ListFoldersArgs,
        ctx: &ToolContext,
    ) -> Result<FolderList, ToolError> {
        check_id("space_id", &a.space_id)?;
        let subject = Subject::of("the folders", "space", &a.space_id);
        let path = format!("/space/{}/folder", a.space_id);
        let wire = self.client.get_json(&path, &archived_query(a.archived), &subject, ctx).await?;
        Ok(folder_list(a.space_id, wire))
    }

    async fn list_lists(&self, a: ListListsArgs, ctx: &ToolContext) -> Result<ListList, ToolError> {
        let query = archived_query(a.archived);
        match (a.space_id, a.folder_id) {
            (_, Some(folder_id)) => {
                check_id("folder_id", &folder_id)?;
                let subject = Subject::of("the lists", "folder", &folder_id);
                let path = format!("/folder/{folder_id}/list");
                let wire = self.client.get_json(&path, &query, &subject, ctx).await?;
                Ok(folder_lists(folder_id, wire))
            }
            (Some(space_id), None) => {
                check_id("space_id", &space_id)?;
                let subject = Subject::of("the lists", "space", &space_id);
                let folderless = format!("/space/{space_id}/list");
                let folders = format!("/space/{space_id}/folder");
                let (folderless, folders) = tokio::join!(
                    self.client.get_json::<WireLists>(&folderless, &query, &subject, ctx),
                    self.client.get_json::<WireFolders>(&folders, &query, &subject, ctx),
                );
                Ok(space_lists(space_id, folderless?, folders?))
            }
            (None, None) => Err(ToolError::invalid_arguments(
                "give `space_id` (every list of a space) or `folder_id` (the lists of one \
                 folder); ids come from list_spaces and list_folders",
            )),
        }
    }

    async fn list_members(
        &self,
        a: ListMembersArgs,
        ctx: &ToolContext,
    ) -> Result<MemberList, ToolError> {
        let (kind, id) = match (&a.list_id, &a.task_id) {
            (Some(list_id), None) => ("list", list_id),
            (None, Some(task_id)) => ("task", task_id),
            _ => {
                return Err(ToolError::invalid_arguments(
                    "give one of `list_id` (who can see a list) or `task_id` (who can see a \
                     task)",
                ))
            }
        };
        check_id(&format!("{kind}_id"), id)?;
        let subject = Subject::of("the members", kind, id);
        let path = format!("/{kind}/{id}/member");
        let wire = self.client.get_json(&path, &[], &subject, ctx).await?;
        Ok(member_list(a.list_id, a.task_id, wire))
    }
}

register_tool! {
    provider: ClickUp,
    name: "list_workspaces",
    group: "hierarchy",
    description: "List the ClickUp workspaces the token can reach (`team_id` for other tools), \
                  with their members' user ids and names.",
    input: ListWorkspacesArgs,
    output: WorkspaceList,
    handler: ClickUp::list_workspaces,
}

register_tool! {
    provider: ClickUp,
    name: "list_spaces",
    group: "hierarchy",
    description: "List the spaces of a ClickUp workspace with their task statuses and enabled \
                  features.",
    input: ListSpacesArgs,
    output: SpaceList,
    handler: ClickUp::list_spaces,
}

register_tool! {
    provider: ClickUp,
    name: "list_folders",
    group: "hierarchy",
    description: "List the folders of a ClickUp space with their task counts and list names.",
    input: ListFoldersArgs,
    output: FolderList,
    handler: ClickUp::list_folders,
}

register_tool! {
    provider: ClickUp,
    name: "list_lists",
    group: "hierarchy",
    description: "List ClickUp lists with their ids and task counts: every list of a space \
                  (`space_id`; folderless lists and those in folders) or those of one folder \
                  (`folder_id`).",
    input: ListListsArgs,
    output: ListList,
    handler: ClickUp::list_lists,
}

register_tool! {
    provider: ClickUp,
    name: "list_members",
    group: "hierarchy",
    description: "List the people who can see a ClickUp list or task, with the user ids that \
                  assignments take.",
    input: ListMembersArgs,
    output: MemberList,
    handler: ClickUp::list_members,
}
