//! GitHub Actions: workflow runs, their jobs, and a job's log.

use quiver_plugin_sdk::prelude::*;

use crate::client::{encode_path, paging, repo_path, uri, Subject};
use crate::model::{login, nullable, WireUser};
use crate::text::{strip_ansi, strip_timestamp, tail_log};
use crate::GitHub;

/// Lines of a job log returned unless the call asks otherwise.
pub(crate) const TAIL_LINES: usize = 200;
/// Most lines of a job log a call may ask for.
const MAX_TAIL_LINES: usize = 5000;
/// Most bytes of a job log returned, whatever `tail_lines` says.
pub(crate) const LOG_MAX_BYTES: usize = 64 * 1024;
/// Conclusions that mean a job or run failed.
pub(crate) const FAILED: &[&str] = &["failure", "timed_out", "startup_failure"];

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// Arguments of `list_workflow_runs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListWorkflowRunsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// Only runs of this workflow: its file name (`ci.yml`) or numeric id.
    pub(crate) workflow: Option<String>,
    /// Only runs for this branch.
    pub(crate) branch: Option<String>,
    /// Only runs with this status or conclusion: `queued`, `in_progress`, `completed`,
    /// `success`, `failure`, `cancelled`, `timed_out`, `action_required`…
    pub(crate) status: Option<String>,
    /// Only runs triggered by this event: `push`, `pull_request`, `schedule`,
    /// `workflow_dispatch`…
    pub(crate) event: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Which jobs of a re-run workflow `list_workflow_jobs` lists.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum JobFilter {
    /// The jobs of the latest attempt (the default).
    Latest,
    /// The jobs of every attempt.
    All,
}

/// Arguments of `list_workflow_jobs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListWorkflowJobsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The workflow run's id (from `list_workflow_runs`).
    pub(crate) run_id: u64,
    /// `latest` (the default) or `all` attempts.
    pub(crate) filter: Option<JobFilter>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `get_job_logs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetJobLogsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The job's id (from `list_workflow_jobs`).
    pub(crate) job_id: u64,
    /// How many lines from the end of the log to return: 200 by default, at most 5000; the
    /// result never exceeds 64 KiB.
    #[schemars(range(min = 1, max = 5000))]
    pub(crate) tail_lines: Option<usize>,
    /// Keep the timestamp GitHub puts at the start of every line (dropped by default).
    #[serde(default)]
    pub(crate) timestamps: bool,
}

// ---------------------------------------------------------------------------------------------
// What GitHub sends (only the kept fields)
// ---------------------------------------------------------------------------------------------

/// The runs listing's envelope.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRuns {
    #[serde(default)]
    total_count: u64,
    #[serde(default)]
    workflow_runs: Vec<WireRun>,
}

/// A workflow run.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRun {
    id: u64,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    display_title: Option<String>,
    #[serde(default)]
    run_number: Option<u64>,
    #[serde(default)]
    run_attempt: Option<u64>,
    #[serde(default)]
    event: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    conclusion: Option<String>,
    #[serde(default)]
    head_branch: Option<String>,
    #[serde(default)]
    head_sha: Option<String>,
    #[serde(default)]
    actor: Option<WireUser>,
    #[serde(default, deserialize_with = "nullable")]
    pull_requests: Vec<WireRunPull>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
}

/// A pull request a run belongs to; only the number is kept.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRunPull {
    number: u64,
}

/// The jobs listing's envelope.
#[derive(Debug, Deserialize)]
pub(crate) struct WireJobs {
    #[serde(default)]
    total_count: u64,
    #[serde(default)]
    jobs: Vec<WireJob>,
}

/// A job of a run.
#[derive(Debug, Deserialize)]
pub(crate) struct WireJob {
    id: u64,
    #[serde(default)]
    name: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    conclusion: Option<String>,
    #[serde(default)]
    started_at: Option<String>,
    #[serde(default)]
    completed_at: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    runner_name: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    steps: Vec<WireStep>,
}

/// A step of a job.
#[derive(Debug, Deserialize)]
pub(crate) struct WireStep {
    #[serde(default)]
    number: u64,
    #[serde(default)]
    name: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    conclusion: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// What the tools return
// ---------------------------------------------------------------------------------------------

/// One workflow run.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Run {
    /// The run id (for `list_workflow_jobs`).
    pub(crate) id: u64,
    /// The workflow's name.
    pub(crate) workflow: Option<String>,
    /// What the run is about (commit message or pull request title).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<String>,
    /// The run's number within its workflow.
    pub(crate) run_number: Option<u64>,
    /// The attempt, when the run was re-run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) run_attempt: Option<u64>,
    /// What triggered it: `push`, `pull_request`, `schedule`…
    pub(crate) event: Option<String>,
    /// `queued`, `in_progress` or `completed`.
    pub(crate) status: Option<String>,
    /// Once completed: `success`, `failure`, `cancelled`, `timed_out`, `skipped`…
    pub(crate) conclusion: Option<String>,
    /// The branch run on.
    pub(crate) head_branch: Option<String>,
    /// The commit run on.
    pub(crate) head_sha: Option<String>,
    /// Who triggered it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) actor: Option<String>,
    /// Numbers of the pull requests the run belongs to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) pull_requests: Vec<u64>,
    /// When it was created.
    pub(crate) created_at: Option<String>,
    /// When it last changed.
    pub(crate) updated_at: Option<String>,
    /// The run on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `list_workflow_runs`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RunList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// How many runs match in all.
    pub(crate) total_count: u64,
    /// The runs of this page, newest first.
    pub(crate) workflow_runs: Vec<Run>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// A step that did not succeed.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct StepOutcome {
    /// The step's number within its job.
    pub(crate) number: u64,
    /// The step's name.
    pub(crate) name: String,
    /// `failure`, `cancelled`, `timed_out`…
    pub(crate) conclusion: Option<String>,
}

/// One job of a run.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Job {
    /// The job id (for `get_job_logs`).
    pub(crate) id: u64,
    /// The job's name.
    pub(crate) name: String,
    /// `queued`, `in_progress`, `completed`, `waiting`…
    pub(crate) status: Option<String>,
    /// Once completed: `success`, `failure`, `cancelled`, `skipped`, `timed_out`…
    pub(crate) conclusion: Option<String>,
    /// When it started.
    pub(crate) started_at: Option<String>,
    /// When it finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) completed_at: Option<String>,
    /// The step running now, for a job in progress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) current_step: Option<String>,
    /// The steps that failed, timed out or were cancelled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) failed_steps: Vec<StepOutcome>,
    /// How many steps the job has.
    pub(crate) step_count: usize,
    /// The runner it ran on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) runner: Option<String>,
    /// The job on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `list_workflow_jobs`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The run the jobs belong to.
    pub(crate) run_id: u64,
    /// How many jobs the run has.
    pub(crate) total_count: u64,
    /// The jobs of this page.
    pub(crate) jobs: Vec<Job>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// Result of `get_job_logs`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobLog {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The job.
    pub(crate) job_id: u64,
    /// Lines in the whole log.
    pub(crate) lines_total: usize,
    /// Lines returned in `log`.
    pub(crate) lines_returned: usize,
    /// What was cut, and how to get more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
    /// `##[error]` lines from anywhere in the log (the first 20).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) error_lines: Vec<String>,
    /// The end of the log, without timestamps and colour codes unless asked.
    pub(crate) log: String,
}

// ---------------------------------------------------------------------------------------------
// Mapping (pure, so tests can run it on recorded responses)
// ---------------------------------------------------------------------------------------------

/// The `list_workflow_runs` result.
pub(crate) fn run_list(repository: String, runs: WireRuns, next_page: Option<u32>) -> RunList {
    let workflow_runs = runs.workflow_runs.into_iter().map(run_of).collect();
    RunList { repository, total_count: runs.total_count, workflow_runs, next_page }
}

/// One run as the tools return it.
pub(crate) fn run_of(r: WireRun) -> Run {
    Run {
        id: r.id,
        title: r.display_title.filter(|t| Some(t) != r.name.as_ref()),
        workflow: r.name,
        run_number: r.run_number,
        run_attempt: r.run_attempt.filter(|a| *a > 1),
        event: r.event,
        status: r.status,
        conclusion: r.conclusion,
        head_branch: r.head_branch,
        head_sha: r.head_sha,
        actor: login(r.actor),
        pull_requests: r.pull_requests.into_iter().map(|p| p.number).collect(),
        created_at: r.created_at,
        updated_at: r.updated_at,
        html_url: r.html_url,
    }
}

/// The `list_workflow_jobs` result.
pub(crate) fn job_list(
    repository: String,
    run_id: u64,
    jobs: WireJobs,
    next_page: Option<u32>,
) -> JobList {
    let jobs_out = jobs
        .jobs
        .into_iter()
        .map(|j| {
            let step_count = j.steps.len();
            let current_step = j
                .steps
                .iter()
                .find(|s| s.status.as_deref() == Some("in_progress"))
                .map(|s| s.name.clone());
            let failed_steps = j
                .steps
                .into_iter()
                .filter(|s| {
                    let c = s.conclusion.as_deref().unwrap_or("");
                    FAILED.contains(&c) || c == "cancelled"
                })
                .map(|s| StepOutcome { number: s.number, name: s.name, conclusion: s.conclusion })
                .collect();
            Job {
                id: j.id,
                name: j.name,
                status: j.status,
                conclusion: j.conclusion,
                started_at: j.started_at,
                completed_at: j.completed_at,
                current_step,
                failed_steps,
                step_count,
                runner: j.runner_name,
                html_url: j.html_url,
            }
        })
        .collect();
    JobList { repository, run_id, total_count: jobs.total_count, jobs: jobs_out, next_page }
}

/// The `get_job_logs` result: the last `tail_lines` lines (at most [`LOG_MAX_BYTES`]), without
/// timestamps (unless asked) and colour codes, and the `##[error]` lines of the whole log.
pub(crate) fn job_log(
    repository: String,
    job_id: u64,
    raw: &str,
    tail_lines: usize,
    timestamps: bool,
) -> JobLog {
    let clean = |line: &str| {
        let line = if timestamps { line } else { strip_timestamp(line) };
        Some(strip_ansi(line))
    };
    let tail = tail_log(raw, tail_lines, LOG_MAX_BYTES, clean, |raw, _| raw.contains("##[error]"));
    JobLog {
        repository,
        job_id,
        lines_total: tail.lines_total,
        lines_returned: tail.lines_returned,
        note: tail.note,
        error_lines: tail.error_lines,
        log: tail.text,
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

impl GitHub {
    async fn list_workflow_runs(
        &self,
        a: ListWorkflowRunsArgs,
        ctx: &ToolContext,
    ) -> Result<RunList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let path = match a.workflow.as_deref().map(str::trim).filter(|w| !w.is_empty()) {
            Some(w) if w.contains('/') => {
                return Err(ToolError::invalid_arguments(format!(
                    "`workflow` is the workflow's file name (`ci.yml`) or id, not a path; got `{w}`"
                )))
            }
            Some(w) => format!("/repos/{repository}/actions/workflows/{}/runs", encode_path(w)?),
            None => format!("/repos/{repository}/actions/runs"),
        };
        let mut query = vec![("branch", a.branch), ("status", a.status), ("event", a.event)];
        query.extend(paging(a.page, a.per_page));
        let subject = match &a.workflow {
            Some(w) => Subject::object(format!("workflow `{w}`"), &repository),
            None => Subject::listing("the workflow runs", &repository),
        };
        let (runs, next) =
            self.client.get_json::<WireRuns>(&uri(&path, &query), &subject, ctx).await?;
        Ok(run_list(repository, runs, next))
    }

    async fn list_workflow_jobs(
        &self,
        a: ListWorkflowJobsArgs,
        ctx: &ToolContext,
    ) -> Result<JobList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let mut query = vec![(
            "filter",
            a.filter.map(|f| match f {
                JobFilter::Latest => "latest".to_owned(),
                JobFilter::All => "all".to_owned(),
            }),
        )];
        query.extend(paging(a.page, a.per_page));
        let uri = uri(&format!("/repos/{repository}/actions/runs/{}/jobs", a.run_id), &query);
        let subject = Subject::object(format!("workflow run {}", a.run_id), &repository);
        let (jobs, next) = self.client.get_json::<WireJobs>(&uri, &subject, ctx).await?;
        Ok(job_list(repository, a.run_id, jobs, next))
    }

    async fn get_job_logs(
        &self,
        a: GetJobLogsArgs,
        ctx: &ToolContext,
    ) -> Result<JobLog, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let uri = format!("/repos/{repository}/actions/jobs/{}/logs", a.job_id);
        let subject =
            Subject::object(format!("job {}", a.job_id), &repository).not_found_says(format!(
                "no log of job {} in {repository}: the job does not exist, its logs expired \
                 (GitHub keeps them 90 days by default), or the token cannot see the repository",
                a.job_id
            ));
        // GitHub answers with a 302 to a short-lived blob URL; octocrab follows it (and drops
        // the token when the redirect leaves GitHub's origin).
        let raw = self.client.get_text(&uri, &subject, ctx).await?;
        let tail = a.tail_lines.unwrap_or(TAIL_LINES).clamp(1, MAX_TAIL_LINES);
        Ok(job_log(repository, a.job_id, &raw, tail, a.timestamps))
    }
}

register_tool! {
    provider: GitHub,
    name: "list_workflow_runs",
    group: "actions",
    description: "List a repository's GitHub Actions workflow runs, newest first, with status, \
                  conclusion, branch, commit and trigger; filter by workflow, branch, status or \
                  event.",
    input: ListWorkflowRunsArgs,
    output: RunList,
    handler: GitHub::list_workflow_runs,
}

register_tool! {
    provider: GitHub,
    name: "list_workflow_jobs",
    group: "actions",
    description: "List the jobs of a workflow run with their status, conclusion and the steps \
                  that failed.",
    input: ListWorkflowJobsArgs,
    output: JobList,
    handler: GitHub::list_workflow_jobs,
}

register_tool! {
    provider: GitHub,
    name: "get_job_logs",
    group: "actions",
    description: "Get the end of a workflow job's log (200 lines by default, at most 64 KiB), \
                  without timestamps or colour codes, plus every `##[error]` line of the log.",
    input: GetJobLogsArgs,
    output: JobLog,
    handler: GitHub::get_job_logs,
}
