//! Projects: finding them, one project's issue types and components, and the create metadata
//! that says which fields an issue type needs before `create_issue` is called.

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::text::truncate;

use crate::client::{check_project, endpoint, Api, Subject};
use crate::model::{is_false, is_zero, next_start, page_size, person, WirePage};
use crate::{Deployment, Jira};

/// Longest project or component description returned, in bytes.
pub(crate) const PROJECT_DESCRIPTION_MAX_BYTES: usize = 2 * 1024;

/// Most allowed values shown for one field of the create metadata.
pub(crate) const ALLOWED_VALUES_SHOWN: usize = 25;

/// Fields `create_issue` always fills from its own arguments.
const SET_BY_CREATE: &[&str] = &["project", "issuetype"];

/// Arguments of `list_projects`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListProjectsArgs {
    /// Only projects whose key or name contains this text (case-insensitive).
    #[serde(alias = "q")]
    pub(crate) query: Option<String>,
    /// Projects per page, by key: 50 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    #[serde(alias = "maxResults")]
    pub(crate) max_results: Option<u32>,
    /// The offset of the first project (the previous page's `next_start_at`).
    #[serde(alias = "startAt")]
    pub(crate) start_at: Option<u32>,
}

/// Arguments of `get_project` and `list_project_components`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProjectArgs {
    /// The project key (or id), e.g. `PROJ`.
    #[serde(alias = "projectKeyOrId", alias = "project_key")]
    pub(crate) project: String,
}

/// Arguments of `get_create_metadata`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetCreateMetadataArgs {
    /// The project key (or id), e.g. `PROJ`.
    #[serde(alias = "projectKeyOrId", alias = "project_key")]
    pub(crate) project: String,
    /// The issue type's name or id (e.g. `Bug`); unset, only the project's issue types are
    /// listed.
    #[serde(alias = "issuetype", alias = "issueType")]
    pub(crate) issue_type: Option<String>,
}

/// A project as `/project/search` and `/project` send it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireProject {
    id: String,
    key: String,
    name: String,
    #[serde(default)]
    project_type_key: Option<String>,
    #[serde(default)]
    project_category: Option<Value>,
    #[serde(default)]
    simplified: bool,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    lead: Option<Value>,
    #[serde(default)]
    issue_types: Vec<WireIssueType>,
    #[serde(default)]
    components: Vec<WireComponent>,
}

/// An issue type of a project or of the create metadata.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WireIssueType {
    id: String,
    name: String,
    #[serde(default)]
    subtask: bool,
}

/// A component as `/project/{key}/components` sends it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireComponent {
    id: String,
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    lead: Option<Value>,
    #[serde(default)]
    real_assignee: Option<Value>,
}

/// `GET /issue/createmeta/{project}/issuetypes`: `issueTypes` on Cloud, `values` on Server/Data
/// Center.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireCreateMetaTypes {
    #[serde(default, alias = "values")]
    issue_types: Vec<WireIssueType>,
}

/// `GET /issue/createmeta/{project}/issuetypes/{id}`: `fields` on Cloud, `values` on Server/
/// Data Center.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireCreateMetaFields {
    #[serde(default, alias = "values")]
    fields: Vec<WireCreateField>,
    #[serde(default)]
    total: Option<u64>,
}

/// One field of the create metadata.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireCreateField {
    field_id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    has_default_value: bool,
    #[serde(default)]
    schema: Option<Value>,
    #[serde(default)]
    allowed_values: Vec<Value>,
}

/// One project in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ProjectSummary {
    /// The project key (for JQL `project = KEY` and the other tools).
    pub(crate) key: String,
    /// Its id.
    pub(crate) id: String,
    /// Its name.
    pub(crate) name: String,
    /// `software`, `business` or `service_desk`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub(crate) project_type: Option<String>,
    /// Its category.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) category: Option<String>,
    /// Set for team-managed (next-gen) projects.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) team_managed: bool,
}

/// Result of `list_projects`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ProjectList {
    /// The projects of this page, by key.
    pub(crate) projects: Vec<ProjectSummary>,
    /// How many projects match.
    pub(crate) total: Option<u64>,
    /// Pass as `start_at` for the next page; null on the last page.
    pub(crate) next_start_at: Option<u64>,
}

/// An issue type.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct IssueType {
    /// Its id.
    pub(crate) id: String,
    /// Its name, e.g. `Bug` (what `create_issue` takes as `issue_type`).
    pub(crate) name: String,
    /// Set for sub-task types (their issues need a `parent`).
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) subtask: bool,
}

/// Result of `get_project`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ProjectDetail {
    /// The project key.
    pub(crate) key: String,
    /// Its id.
    pub(crate) id: String,
    /// Its name.
    pub(crate) name: String,
    /// `software`, `business` or `service_desk`.
    #[serde(rename = "type")]
    pub(crate) project_type: Option<String>,
    /// Its category.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) category: Option<String>,
    /// The project lead's display name.
    pub(crate) lead: Option<String>,
    /// Its description (cut at 2 KiB, saying so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// The issue types issues of the project may have.
    pub(crate) issue_types: Vec<IssueType>,
    /// Component names (details: `list_project_components`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) components: Vec<String>,
    /// Set for team-managed (next-gen) projects.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) team_managed: bool,
    /// The project's page.
    pub(crate) url: String,
}

/// One component.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Component {
    /// Its id.
    pub(crate) id: String,
    /// Its name (what `create_issue` takes in `components`).
    pub(crate) name: String,
    /// Its description (cut at 2 KiB, saying so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// The component lead's display name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) lead: Option<String>,
    /// Who new issues of the component are assigned to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) default_assignee: Option<String>,
}

/// Result of `list_project_components`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ComponentList {
    /// The project key.
    pub(crate) project: String,
    /// The components, as Jira orders them.
    pub(crate) components: Vec<Component>,
}

/// One field an issue type's create screen has.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CreateField {
    /// The field id (`summary`, `customfield_10016`); `create_issue` takes it or the name.
    pub(crate) id: String,
    /// The field's name, e.g. `Story Points`.
    pub(crate) name: String,
    /// Whether an issue cannot be created without it.
    pub(crate) required: bool,
    /// The value type: `string`, `number`, `date`, `user`, `option`, `array of option`…
    #[serde(rename = "type")]
    pub(crate) value_type: Option<String>,
    /// The values it accepts (names or values, the first 25).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) allowed_values: Vec<String>,
    /// How many more values it accepts than are shown.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) more_values: usize,
    /// Set when Jira fills it in when left out.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) has_default: bool,
}

/// Result of `get_create_metadata`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CreateMetadata {
    /// The project key.
    pub(crate) project: String,
    /// The issue type whose fields are listed; null when none was asked for.
    pub(crate) issue_type: Option<String>,
    /// The project's issue types (pass one as `issue_type` to see its fields).
    pub(crate) issue_types: Vec<IssueType>,
    /// The issue type's fields, required ones first (project and issue type, which
    /// `create_issue` sets itself, left out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) fields: Vec<CreateField>,
    /// Set when Jira has more fields than one page lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
}

fn category(value: &Option<Value>) -> Option<String> {
    value.as_ref().and_then(|c| c.get("name")).and_then(Value::as_str).map(str::to_owned)
}

fn description(text: Option<String>) -> Option<String> {
    text.map(|d| d.trim().to_owned())
        .filter(|d| !d.is_empty())
        .map(|d| truncate(&d, PROJECT_DESCRIPTION_MAX_BYTES).0)
}

fn project_summary(p: WireProject) -> ProjectSummary {
    ProjectSummary {
        category: category(&p.project_category),
        key: p.key,
        id: p.id,
        name: p.name,
        project_type: p.project_type_key,
        team_managed: p.simplified,
    }
}

fn issue_type(t: &WireIssueType) -> IssueType {
    IssueType { id: t.id.clone(), name: t.name.clone(), subtask: t.subtask }
}

/// The result of `list_projects` from Cloud's page.
pub(crate) fn project_page(page: WirePage<WireProject>) -> ProjectList {
    let next =
        next_start(page.start_at, page.values.len(), page.max_results, page.total, page.is_last);
    ProjectList {
        total: page.total,
        next_start_at: next,
        projects: page.values.into_iter().map(project_summary).collect(),
    }
}

/// The result of `list_projects` from Server's whole list, filtered and paged here.
pub(crate) fn project_slice(
    all: Vec<WireProject>,
    query: Option<&str>,
    start_at: u64,
    max: u64,
) -> ProjectList {
    let query = query.map(str::to_lowercase);
    let mut matching: Vec<WireProject> = all
        .into_iter()
        .filter(|p| {
            query.as_deref().is_none_or(|q| {
                p.key.to_lowercase().contains(q) || p.name.to_lowercase().contains(q)
            })
        })
        .collect();
    matching.sort_by(|a, b| a.key.cmp(&b.key));
    let total = matching.len() as u64;
    let page: Vec<ProjectSummary> = matching
        .into_iter()
        .skip(start_at as usize)
        .take(max as usize)
        .map(project_summary)
        .collect();
    let next = next_start(start_at, page.len(), Some(max), Some(total), None);
    ProjectList { projects: page, total: Some(total), next_start_at: next }
}

/// The result of `get_project`.
pub(crate) fn project_detail(p: WireProject, site: &str) -> ProjectDetail {
    ProjectDetail {
        url: format!("{site}browse/{}", p.key),
        category: category(&p.project_category),
        lead: p.lead.as_ref().and_then(person),
        description: description(p.description),
        issue_types: p.issue_types.iter().map(issue_type).collect(),
        components: p.components.into_iter().map(|c| c.name).collect(),
        key: p.key,
        id: p.id,
        name: p.name,
        project_type: p.project_type_key,
        team_managed: p.simplified,
    }
}

/// The result of `list_project_components`.
pub(crate) fn component_list(project: String, wire: Vec<WireComponent>) -> ComponentList {
    ComponentList {
        project,
        components: wire
            .into_iter()
            .map(|c| Component {
                lead: c.lead.as_ref().and_then(person),
                default_assignee: c.real_assignee.as_ref().and_then(person),
                description: description(c.description),
                id: c.id,
                name: c.name,
            })
            .collect(),
    }
}

/// What an allowed value is called: an option's `value`, a version's or priority's `name`.
fn allowed_name(value: &Value) -> Option<String> {
    ["value", "name", "key"]
        .iter()
        .find_map(|k| value.get(k).and_then(Value::as_str))
        .map(str::to_owned)
}

/// A field's value type: `option`, or `array of option` for a list.
fn value_type(schema: &Option<Value>) -> Option<String> {
    let schema = schema.as_ref()?;
    let kind = schema.get("type").and_then(Value::as_str)?;
    Some(match (kind, schema.get("items").and_then(Value::as_str)) {
        ("array", Some(items)) => format!("array of {items}"),
        _ => kind.to_owned(),
    })
}

/// The fields of the create metadata, required ones first, in Jira's order otherwise.
pub(crate) fn create_fields(wire: Vec<WireCreateField>) -> Vec<CreateField> {
    let mut fields: Vec<CreateField> = wire
        .into_iter()
        .filter(|f| !SET_BY_CREATE.contains(&f.field_id.as_str()))
        .map(|f| {
            let names: Vec<String> = f.allowed_values.iter().filter_map(allowed_name).collect();
            CreateField {
                name: f.name.unwrap_or_else(|| f.field_id.clone()),
                id: f.field_id,
                required: f.required,
                value_type: value_type(&f.schema),
                more_values: names.len().saturating_sub(ALLOWED_VALUES_SHOWN),
                allowed_values: names.into_iter().take(ALLOWED_VALUES_SHOWN).collect(),
                has_default: f.has_default_value,
            }
        })
        .collect();
    // A stable sort keeps Jira's screen order within each half.
    fields.sort_by_key(|f| !f.required);
    fields
}

fn project_subject(what: &str, project: &str) -> Subject {
    Subject::other(
        format!("{what} {project}"),
        format!("no project {project} in jira (or the account cannot see it)"),
    )
}

impl Jira {
    async fn list_projects(
        &self,
        args: ListProjectsArgs,
        ctx: &ToolContext,
    ) -> Result<ProjectList, ToolError> {
        let query = args.query.map(|q| q.trim().to_owned()).filter(|q| !q.is_empty());
        let start_at = args.start_at.unwrap_or(0);
        let max = page_size(args.max_results, 50, 100);
        let subject = Subject::other("the projects", "jira has no project list here");
        match self.client.deployment() {
            Deployment::Cloud => {
                let path = endpoint(
                    "/project/search",
                    &[
                        ("startAt", Some(start_at.to_string())),
                        ("maxResults", Some(max.to_string())),
                        ("orderBy", Some("key".into())),
                        ("query", query),
                    ],
                );
                let page = self.client.get_json(Api::Core, &path, &subject, ctx).await?;
                Ok(project_page(page))
            }
            // Server/Data Center lists every project at once, unpaged and unfiltered.
            Deployment::Server => {
                let all = self.client.get_json(Api::Core, "/project", &subject, ctx).await?;
                Ok(project_slice(all, query.as_deref(), start_at.into(), max.into()))
            }
        }
    }

    async fn get_project(
        &self,
        args: ProjectArgs,
        ctx: &ToolContext,
    ) -> Result<ProjectDetail, ToolError> {
        let project = check_project(&args.project)?;
        let subject = project_subject("project", &project);
        let path = format!("/project/{project}");
        let wire = self.client.get_json(Api::Core, &path, &subject, ctx).await?;
        Ok(project_detail(wire, self.client.site()))
    }

    async fn list_project_components(
        &self,
        args: ProjectArgs,
        ctx: &ToolContext,
    ) -> Result<ComponentList, ToolError> {
        let project = check_project(&args.project)?;
        let subject = project_subject("the components of", &project);
        let path = format!("/project/{project}/components");
        let wire = self.client.get_json(Api::Core, &path, &subject, ctx).await?;
        Ok(component_list(project, wire))
    }

    async fn get_create_metadata(
        &self,
        args: GetCreateMetadataArgs,
        ctx: &ToolContext,
    ) -> Result<CreateMetadata, ToolError> {
        let project = check_project(&args.project)?;
        let subject = project_subject("the create metadata of", &project);
        let path = format!("/issue/createmeta/{project}/issuetypes?maxResults=100");
        let types: WireCreateMetaTypes =
            self.client.get_json(Api::Core, &path, &subject, ctx).await?;
        let issue_types: Vec<IssueType> = types.issue_types.iter().map(issue_type).collect();
        let Some(wanted) = args.issue_type.as_deref().map(str::trim).filter(|t| !t.is_empty())
        else {
            return Ok(CreateMetadata {
                project,
                issue_type: None,
                issue_types,
                fields: Vec::new(),
                note: None,
            });
        };
        let chosen = types
            .issue_types
            .iter()
            .find(|t| t.id == wanted)
            .or_else(|| types.issue_types.iter().find(|t| t.name.eq_ignore_ascii_case(wanted)))
            .ok_or_else(|| {
                let names: Vec<&str> = types.issue_types.iter().map(|t| t.name.as_str()).collect();
                ToolError::invalid_arguments(format!(
                    "project {project} has no issue type `{wanted}` the account may create; \
                     available: {}",
                    names.join(", ")
                ))
            })?;
        let path = format!("/issue/createmeta/{project}/issuetypes/{}?maxResults=200", chosen.id);
        let subject = project_subject(&format!("the {} fields of", chosen.name), &project);
        let wire: WireCreateMetaFields =
            self.client.get_json(Api::Core, &path, &subject, ctx).await?;
        let listed = wire.fields.len() as u64;
        let note = wire
            .total
            .filter(|&t| t > listed)
            .map(|t| format!("{listed} of {t} fields listed; the rest are optional or unknown"));
        Ok(CreateMetadata {
            project,
            issue_type: Some(chosen.name.clone()),
            issue_types,
            fields: create_fields(wire.fields),
            note,
        })
    }
}

register_tool! {
    provider: Jira,
    name: "list_projects",
    group: "projects",
    description: "List the projects the account can see (key, name, type, category), \
                  optionally those whose key or name contains `query`. Returns `next_start_at` \
                  for more.",
    input: ListProjectsArgs,
    output: ProjectList,
    handler: Jira::list_projects,
}

register_tool! {
    provider: Jira,
    name: "get_project",
    group: "projects",
    description: "Get one project: name, type, lead, description, its issue types and \
                  component names.",
    input: ProjectArgs,
    output: ProjectDetail,
    handler: Jira::get_project,
}

register_tool! {
    provider: Jira,
    name: "list_project_components",
    group: "projects",
    description: "List a project's components: id, name, description, lead and default \
                  assignee.",
    input: ProjectArgs,
    output: ComponentList,
    handler: Jira::list_project_components,
}

register_tool! {
    provider: Jira,
    name: "get_create_metadata",
    group: "projects",
    description: "Which fields an issue type needs in a project before `create_issue`: each \
                  field's id, name, whether it is required, its type and allowed values. \
                  Without `issue_type`, lists the project's issue types.",
    input: GetCreateMetadataArgs,
    output: CreateMetadata,
    handler: Jira::get_create_metadata,
}
