//! GitHub Actions beyond logs: workflows, one run, dispatching, re-running and cancelling runs,
//! and artifacts.

use http::Method;
use quiver_plugin_sdk::prelude::*;

use crate::actions::{run_of, Run, WireRun};
use crate::client::{encode_path, paging, repo_path, uri, Subject};
use crate::model::is_false;
use crate::GitHub;

/// Arguments of `list_workflows`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListWorkflowsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of the tools about one run (`get_workflow_run`, `rerun_failed_jobs`,
/// `cancel_workflow_run`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkflowRunArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The run id (`id` of `list_workflow_runs`).
    pub(crate) run_id: u64,
}

/// Arguments of `dispatch_workflow`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DispatchWorkflowArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The workflow's file name (`deploy.yml`) or id; it must have a `workflow_dispatch`
    /// trigger.
    #[serde(alias = "workflow_id")]
    pub(crate) workflow: String,
    /// The branch or tag to run it on, e.g. `main`.
    #[serde(rename = "ref")]
    pub(crate) git_ref: String,
    /// The workflow's inputs by name, e.g. `{"environment": "staging"}`.
    #[serde(default)]
    pub(crate) inputs: Map<String, Value>,
}

/// Arguments of `list_artifacts`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListArtifactsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// Only the artifacts of this run; the repository's when unset.
    pub(crate) run_id: Option<u64>,
    /// Only artifacts with exactly this name.
    pub(crate) name: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// The workflows listing's envelope.
#[derive(Debug, Deserialize)]
pub(crate) struct WireWorkflows {
    #[serde(default)]
    total_count: u64,
    #[serde(default)]
    workflows: Vec<WireWorkflow>,
}

/// A workflow.
#[derive(Debug, Deserialize)]
pub(crate) struct WireWorkflow {
    id: u64,
    #[serde(default)]
    name: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
}

/// What a dispatch may answer (GitHub answers 204 without a body unless asked for the run).
#[derive(Debug, Default, Deserialize)]
struct WireDispatched {
    #[serde(default)]
    workflow_run_id: Option<u64>,
    #[serde(default)]
    html_url: Option<String>,
}

/// The artifacts listing's envelope.
#[derive(Debug, Deserialize)]
pub(crate) struct WireArtifacts {
    #[serde(default)]
    total_count: u64,
    #[serde(default)]
    artifacts: Vec<WireArtifact>,
}

/// An artifact.
#[derive(Debug, Deserialize)]
pub(crate) struct WireArtifact {
    id: u64,
    #[serde(default)]
    name: String,
    #[serde(default)]
    size_in_bytes: u64,
    #[serde(default)]
    expired: bool,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    archive_download_url: Option<String>,
    #[serde(default)]
    workflow_run: Option<WireArtifactRun>,
}

/// The run an artifact came from.
#[derive(Debug, Deserialize)]
pub(crate) struct WireArtifactRun {
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    head_branch: Option<String>,
    #[serde(default)]
    head_sha: Option<String>,
}

/// One workflow.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Workflow {
    /// The workflow id.
    pub(crate) id: u64,
    /// Its name.
    pub(crate) name: String,
    /// Its file name (what `workflow` arguments take), e.g. `ci.yml`.
    pub(crate) file: String,
    /// `active`, `disabled_manually`, `disabled_inactivity`…
    pub(crate) state: Option<String>,
    /// The workflow file on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `list_workflows`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WorkflowList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// How many workflows the repository has.
    pub(crate) total_count: u64,
    /// The workflows of this page.
    pub(crate) workflows: Vec<Workflow>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// Result of `get_workflow_run`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RunDetail {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The run: id, workflow, status, conclusion, branch, commit, trigger and times.
    #[serde(flatten)]
    pub(crate) run: Run,
}

/// Result of `dispatch_workflow`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Dispatched {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The workflow asked to run.
    pub(crate) workflow: String,
    /// The branch or tag it runs on.
    #[serde(rename = "ref")]
    pub(crate) git_ref: String,
    /// The run started, when GitHub says which.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) run_id: Option<u64>,
    /// The run on GitHub, when GitHub says which.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) html_url: Option<String>,
    /// How to find the run.
    pub(crate) note: String,
}

/// Result of `rerun_failed_jobs` and `cancel_workflow_run`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RunAction {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The run acted on.
    pub(crate) run_id: u64,
    /// What GitHub accepted, e.g. `re-running the failed jobs` or `cancelling`.
    pub(crate) accepted: String,
}

/// One artifact.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Artifact {
    /// The artifact id.
    pub(crate) id: u64,
    /// Its name.
    pub(crate) name: String,
    /// Its size in bytes (zipped).
    pub(crate) size_in_bytes: u64,
    /// Set when it expired and can no longer be downloaded.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) expired: bool,
    /// The run that made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) run_id: Option<u64>,
    /// The run's branch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) head_branch: Option<String>,
    /// The run's commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) head_sha: Option<String>,
    /// When it was made.
    pub(crate) created_at: Option<String>,
    /// When it expires.
    pub(crate) expires_at: Option<String>,
    /// The API URL of its zip (needs the token; redirects to a short-lived link).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) archive_download_url: Option<String>,
}

/// Result of `list_artifacts`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ArtifactList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The run asked about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) run_id: Option<u64>,
    /// How many artifacts match in all.
    pub(crate) total_count: u64,
    /// The artifacts of this page, newest first.
    pub(crate) artifacts: Vec<Artifact>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// The `list_workflows` result.
pub(crate) fn workflow_list(
    repository: String,
    wire: WireWorkflows,
    next_page: Option<u32>,
) -> WorkflowList {
    let workflows = wire
        .workflows
        .into_iter()
        .map(|w| Workflow {
            id: w.id,
            name: w.name,
            file: w.path.rsplit('/').next().unwrap_or_default().to_owned(),
            state: w.state,
            html_url: w.html_url,
        })
        .collect();
    WorkflowList { repository, total_count: wire.total_count, workflows, next_page }
}

/// The `list_artifacts` result.
pub(crate) fn artifact_list(
    repository: String,
    run_id: Option<u64>,
    wire: WireArtifacts,
    next_page: Option<u32>,
) -> ArtifactList {
    let artifacts = wire
        .artifacts
        .into_iter()
        .map(|a| {
            let run = a.workflow_run;
            Artifact {
                id: a.id,
                name: a.name,
                size_in_bytes: a.size_in_bytes,
                expired: a.expired,
                run_id: run.as_ref().and_then(|r| r.id),
                head_branch: run.as_ref().and_then(|r| r.head_branch.clone()),
                head_sha: run.and_then(|r| r.head_sha),
                created_at: a.created_at,
                expires_at: a.expires_at,
                archive_download_url: a.archive_download_url.filter(|_| !a.expired),
            }
        })
        .collect();
    ArtifactList { repository, run_id, total_count: wire.total_count, artifacts, next_page }
}

/// A workflow file name or id as one path segment.
fn workflow_segment(workflow: &str) -> Result<String, ToolError> {
    let w = workflow.trim();
    if w.is_empty() || w.contains('/') {
        return Err(ToolError::invalid_arguments(format!(
            "`workflow` is the workflow's file name (`ci.yml`) or id, not a path; got `{w}`"
        )));
    }
    encode_path(w)
}

impl GitHub {
    async fn list_workflows(
        &self,
        a: ListWorkflowsArgs,
        ctx: &ToolContext,
    ) -> Result<WorkflowList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let path = format!("/repos/{repository}/actions/workflows");
        let subject = Subject::listing("the workflows", &repository);
        let (wire, next) = self
            .client
            .get_json::<WireWorkflows>(&uri(&path, &paging(a.page, a.per_page)), &subject, ctx)
            .await?;
        Ok(workflow_list(repository, wire, next))
    }

    async fn get_workflow_run(
        &self,
        a: WorkflowRunArgs,
        ctx: &ToolContext,
    ) -> Result<RunDetail, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let uri = format!("/repos/{repository}/actions/runs/{}", a.run_id);
        let subject = Subject::object(format!("workflow run {}", a.run_id), &repository);
        let (run, _) = self.client.get_json::<WireRun>(&uri, &subject, ctx).await?;
        Ok(RunDetail { repository, run: run_of(run) })
    }

    async fn dispatch_workflow(
        &self,
        a: DispatchWorkflowArgs,
        ctx: &ToolContext,
    ) -> Result<Dispatched, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let segment = workflow_segment(&a.workflow)?;
        let git_ref = a.git_ref.trim().to_owned();
        if git_ref.is_empty() {
            return Err(ToolError::invalid_arguments("`ref` is empty; name a branch or tag"));
        }
        let workflow = a.workflow.trim().to_owned();
        let mut body = json!({ "ref": git_ref });
        if !a.inputs.is_empty() {
            body["inputs"] = Value::Object(a.inputs);
        }
        let subject = Subject::object(format!("workflow `{workflow}`"), &repository);
        let uri = format!("/repos/{repository}/actions/workflows/{segment}/dispatches");
        let reply = self.client.request(Method::POST, &uri, Some(&body), &subject, ctx).await?;
        let answer: WireDispatched = if reply.body.trim().is_empty() {
            WireDispatched::default()
        } else {
            self.client.parse(&reply, &subject)?
        };
        let note = match answer.workflow_run_id {
            Some(id) => format!("run {id} started; follow it with get_workflow_run"),
            None => format!(
                "github queued the run; it shows up in a few seconds in list_workflow_runs with \
                 workflow=`{workflow}`, event=`workflow_dispatch`, branch=`{git_ref}`"
            ),
        };
        Ok(Dispatched {
            repository,
            workflow,
            git_ref,
            run_id: answer.workflow_run_id,
            html_url: answer.html_url,
            note,
        })
    }

    async fn act_on_run(
        &self,
        a: WorkflowRunArgs,
        action: &str,
        accepted: &str,
        ctx: &ToolContext,
    ) -> Result<RunAction, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let subject = Subject::object(format!("workflow run {}", a.run_id), &repository);
        let uri = format!("/repos/{repository}/actions/runs/{}/{action}", a.run_id);
        self.client.request(Method::POST, &uri, None, &subject, ctx).await?;
        Ok(RunAction { repository, run_id: a.run_id, accepted: accepted.to_owned() })
    }

    async fn rerun_failed_jobs(
        &self,
        a: WorkflowRunArgs,
        ctx: &ToolContext,
    ) -> Result<RunAction, ToolError> {
        self.act_on_run(
            a,
            "rerun-failed-jobs",
            "re-running the failed jobs and their dependents",
            ctx,
        )
        .await
    }

    async fn cancel_workflow_run(
        &self,
        a: WorkflowRunArgs,
        ctx: &ToolContext,
    ) -> Result<RunAction, ToolError> {
        self.act_on_run(a, "cancel", "cancelling", ctx).await
    }

    async fn list_artifacts(
        &self,
        a: ListArtifactsArgs,
        ctx: &ToolContext,
    ) -> Result<ArtifactList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let (path, subject) = match a.run_id {
            Some(id) => (
                format!("/repos/{repository}/actions/runs/{id}/artifacts"),
                Subject::object(format!("workflow run {id}"), &repository),
            ),
            None => (
                format!("/repos/{repository}/actions/artifacts"),
                Subject::listing("the artifacts", &repository),
            ),
        };
        let mut query = vec![("name", a.name)];
        query.extend(paging(a.page, a.per_page));
        let (wire, next) =
            self.client.get_json::<WireArtifacts>(&uri(&path, &query), &subject, ctx).await?;
        Ok(artifact_list(repository, a.run_id, wire, next))
    }
}

register_tool! {
    provider: GitHub,
    name: "list_workflows",
    group: "actions",
    description: "List a repository's GitHub Actions workflows: id, name, file name and state.",
    input: ListWorkflowsArgs,
    output: WorkflowList,
    handler: GitHub::list_workflows,
}

register_tool! {
    provider: GitHub,
    name: "get_workflow_run",
    group: "actions",
    description: "Get one workflow run's status and conclusion (to follow a run after \
                  dispatching, re-running or cancelling it).",
    input: WorkflowRunArgs,
    output: RunDetail,
    handler: GitHub::get_workflow_run,
}

register_tool! {
    provider: GitHub,
    name: "dispatch_workflow",
    group: "actions",
    description: "Start a workflow that has a `workflow_dispatch` trigger on a branch or tag, \
                  with its inputs.",
    input: DispatchWorkflowArgs,
    output: Dispatched,
    handler: GitHub::dispatch_workflow,
}

register_tool! {
    provider: GitHub,
    name: "rerun_failed_jobs",
    group: "actions",
    description: "Re-run the failed jobs of a completed workflow run (and the jobs that depend \
                  on them).",
    input: WorkflowRunArgs,
    output: RunAction,
    handler: GitHub::rerun_failed_jobs,
}

register_tool! {
    provider: GitHub,
    name: "cancel_workflow_run",
    group: "actions",
    description: "Cancel a queued or running workflow run.",
    input: WorkflowRunArgs,
    output: RunAction,
    handler: GitHub::cancel_workflow_run,
}

register_tool! {
    provider: GitHub,
    name: "list_artifacts",
    group: "actions",
    description: "List the artifacts of a workflow run (or of the repository): name, size, \
                  expiry, the run's branch and commit.",
    input: ListArtifactsArgs,
    output: ArtifactList,
    handler: GitHub::list_artifacts,
}
