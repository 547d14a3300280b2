//! CI: pipelines, their jobs, a job's log, retrying a job, and running or cancelling a
//! pipeline.

use std::collections::BTreeMap;

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::text::{strip_ansi, tail_log};

use crate::client::{paging, uri, Page, ProjectRef, Subject};
use crate::model::{is_false, project_arg, username, WireUser};
use crate::GitLab;

/// Lines of a job log returned unless the call asks otherwise.
pub(crate) const TAIL_LINES: usize = 200;
/// Most lines of a job log a call may ask for.
const MAX_TAIL_LINES: usize = 5000;
/// Most bytes of a job log returned, whatever `tail_lines` says.
pub(crate) const LOG_MAX_BYTES: usize = 64 * 1024;

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// Arguments of `list_pipelines`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListPipelinesArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// Only pipelines of this branch or tag.
    #[serde(rename = "ref", alias = "branch")]
    pub(crate) git_ref: Option<String>,
    /// Only pipelines with this status: `created`, `pending`, `running`, `success`, `failed`,
    /// `canceled`, `skipped`, `manual`, `scheduled`…
    pub(crate) status: Option<String>,
    /// Only pipelines triggered so: `push`, `merge_request_event`, `schedule`, `web`, `api`…
    pub(crate) source: Option<String>,
    /// Only pipelines of this commit.
    pub(crate) sha: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `list_pipeline_jobs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListPipelineJobsArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The pipeline's id (from `list_pipelines`).
    pub(crate) pipeline_id: u64,
    /// Only jobs with these statuses: `failed`, `success`, `running`, `pending`, `canceled`,
    /// `skipped`, `manual`, `created`…
    pub(crate) scope: Option<Vec<String>>,
    /// Include jobs that were retried (only the latest attempt by default).
    #[serde(default)]
    pub(crate) include_retried: bool,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `get_job_log`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetJobLogArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The job's id (from `list_pipeline_jobs`).
    pub(crate) job_id: u64,
    /// How many lines from the end of the log to return: 200 by default, at most 5000; the
    /// result never exceeds 64 KiB.
    #[schemars(range(min = 1, max = 5000))]
    pub(crate) tail_lines: Option<usize>,
}

/// Arguments of `retry_job`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetryJobArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The id of the job to run again (a failed or canceled one).
    pub(crate) job_id: u64,
}

// ---------------------------------------------------------------------------------------------
// What GitLab sends (only the kept fields)
// ---------------------------------------------------------------------------------------------

/// A pipeline in a listing.
#[derive(Debug, Deserialize)]
pub(crate) struct WirePipeline {
    id: u64,
    #[serde(default)]
    iid: Option<u64>,
    #[serde(default)]
    status: String,
    #[serde(default, rename = "ref")]
    git_ref: Option<String>,
    #[serde(default)]
    sha: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
    #[serde(default)]
    web_url: Option<String>,
}

/// A job.
#[derive(Debug, Deserialize)]
pub(crate) struct WireJob {
    id: u64,
    #[serde(default)]
    name: String,
    #[serde(default)]
    stage: Option<String>,
    #[serde(default)]
    status: String,
    #[serde(default)]
    allow_failure: bool,
    #[serde(default)]
    failure_reason: Option<String>,
    #[serde(default, rename = "ref")]
    git_ref: Option<String>,
    #[serde(default)]
    duration: Option<f64>,
    #[serde(default)]
    started_at: Option<String>,
    #[serde(default)]
    finished_at: Option<String>,
    #[serde(default)]
    runner: Option<WireRunner>,
    #[serde(default)]
    user: Option<WireUser>,
    #[serde(default)]
    web_url: Option<String>,
}

/// The runner a job ran on; only its description is kept.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRunner {
    #[serde(default)]
    description: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// What the tools return
// ---------------------------------------------------------------------------------------------

/// One pipeline.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Pipeline {
    /// The pipeline id (for `list_pipeline_jobs`).
    pub(crate) id: u64,
    /// The pipeline's number within the project.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) iid: Option<u64>,
    /// `created`, `pending`, `running`, `success`, `failed`, `canceled`, `skipped`, `manual`…
    pub(crate) status: String,
    /// The branch or tag.
    #[serde(rename = "ref")]
    pub(crate) git_ref: Option<String>,
    /// The commit.
    pub(crate) sha: Option<String>,
    /// What triggered it: `push`, `merge_request_event`, `schedule`, `web`…
    pub(crate) source: Option<String>,
    /// When it was created.
    pub(crate) created_at: Option<String>,
    /// When it last changed.
    pub(crate) updated_at: Option<String>,
    /// The pipeline on GitLab.
    pub(crate) web_url: Option<String>,
}

/// Result of `list_pipelines`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PipelineList {
    /// The project (as given).
    pub(crate) project: String,
    /// The pipelines of this page, newest first.
    pub(crate) pipelines: Vec<Pipeline>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many match in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// One job.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Job {
    /// The job id (for `get_job_log` and `retry_job`).
    pub(crate) id: u64,
    /// The job's name.
    pub(crate) name: String,
    /// Its stage: `build`, `test`, `deploy`…
    pub(crate) stage: Option<String>,
    /// `created`, `pending`, `running`, `success`, `failed`, `canceled`, `skipped`, `manual`.
    pub(crate) status: String,
    /// Set when its failure does not fail the pipeline.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) allow_failure: bool,
    /// Why it failed: `script_failure`, `stuck_or_timeout_failure`, `runner_system_failure`…
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) failure_reason: Option<String>,
    /// How long it ran, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) duration_s: Option<u64>,
    /// When it started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) started_at: Option<String>,
    /// When it finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) finished_at: Option<String>,
    /// The runner it ran on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) runner: Option<String>,
    /// The job on GitLab.
    pub(crate) web_url: Option<String>,
}

/// Result of `list_pipeline_jobs`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobList {
    /// The project (as given).
    pub(crate) project: String,
    /// The pipeline the jobs belong to.
    pub(crate) pipeline_id: u64,
    /// Jobs of this page that failed the pipeline (failed without `allow_failure`).
    pub(crate) failed: usize,
    /// The jobs of this page, latest first.
    pub(crate) jobs: Vec<Job>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many jobs match in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// Result of `get_job_log`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobLog {
    /// The project (as given).
    pub(crate) project: String,
    /// The job.
    pub(crate) job_id: u64,
    /// Lines in the whole log.
    pub(crate) lines_total: usize,
    /// Lines returned in `log`.
    pub(crate) lines_returned: usize,
    /// What was cut, and how to get more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
    /// Error lines from anywhere in the log (`ERROR:`, `error:`, `FAILED`, panics; the first
    /// 20).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) error_lines: Vec<String>,
    /// The end of the log, without colour codes and section markers.
    pub(crate) log: String,
}

/// Result of `retry_job`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RetriedJob {
    /// The project (as given).
    pub(crate) project: String,
    /// The job that was retried.
    pub(crate) retried_job_id: u64,
    /// The new job's id (for `get_job_log` once it ran).
    pub(crate) job_id: u64,
    /// The job's name.
    pub(crate) name: String,
    /// The new job's status (usually `pending`).
    pub(crate) status: String,
    /// The branch or tag it runs on.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub(crate) git_ref: Option<String>,
    /// Who retried it (the token's user).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) user: Option<String>,
    /// The new job on GitLab.
    pub(crate) web_url: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Mapping (pure, so tests can run it on recorded responses)
// ---------------------------------------------------------------------------------------------

/// The `list_pipelines` result.
pub(crate) fn pipeline_list(project: String, page: Vec<WirePipeline>, at: Page) -> PipelineList {
    let pipelines = page
        .into_iter()
        .map(|p| Pipeline {
            id: p.id,
            iid: p.iid,
            status: p.status,
            git_ref: p.git_ref,
            sha: p.sha,
            source: p.source,
            created_at: p.created_at,
            updated_at: p.updated_at,
            web_url: p.web_url,
        })
        .collect();
    PipelineList { project, pipelines, next_page: at.next_page, total: at.total }
}

/// Whether a job failed the pipeline.
pub(crate) fn fails_pipeline(job: &Value) -> bool {
    job.get("status").and_then(Value::as_str) == Some("failed")
        && job.get("allow_failure").and_then(Value::as_bool) != Some(true)
}

/// The `list_pipeline_jobs` result.
pub(crate) fn job_list(project: String, pipeline_id: u64, page: Vec<WireJob>, at: Page) -> JobList {
    let jobs: Vec<Job> = page
        .into_iter()
        .map(|j| Job {
            id: j.id,
            name: j.name,
            stage: j.stage,
            failure_reason: j.failure_reason.filter(|_| j.status == "failed"),
            status: j.status,
            allow_failure: j.allow_failure,
            duration_s: j.duration.map(|d| d.round() as u64),
            started_at: j.started_at,
            finished_at: j.finished_at,
            runner: j.runner.and_then(|r| r.description),
            web_url: j.web_url,
        })
        .collect();
    let failed = jobs.iter().filter(|j| j.status == "failed" && !j.allow_failure).count();
    JobList { project, pipeline_id, failed, jobs, next_page: at.next_page, total: at.total }
}

/// A log line as a terminal shows it: without colour codes, without GitLab's
/// `section_start:…`/`section_end:…` markers, and only the last of `\r`-overwritten segments
/// (progress counters). `None` for a line that held only markers.
pub(crate) fn clean_line(line: &str) -> Option<String> {
    let plain = strip_ansi(line);
    let is_marker = |s: &str| s.starts_with("section_start:") || s.starts_with("section_end:");
    let mut segments = plain.split('\r').filter(|s| !s.is_empty());
    let had_content = !plain.is_empty();
    let shown = segments.clone().rfind(|s| !is_marker(s));
    match shown {
        Some(s) => Some(s.to_owned()),
        None if had_content && segments.any(is_marker) => None,
        None => Some(String::new()),
    }
}

/// Whether a cleaned log line reports an error.
fn is_error_line(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("ERROR")
        || t.starts_with("error:")
        || t.starts_with("error[")
        || t.starts_with("FAILED")
        || t.starts_with("Error:")
        || t.contains("panicked at")
        || t.starts_with("test result: FAILED")
}

/// The `get_job_log` result: the last `tail_lines` lines (at most [`LOG_MAX_BYTES`]), cleaned,
/// and the error lines of the whole log.
pub(crate) fn job_log(project: String, job_id: u64, raw: &str, tail_lines: usize) -> JobLog {
    let tail = tail_log(raw, tail_lines, LOG_MAX_BYTES, clean_line, |_, line| is_error_line(line));
    JobLog {
        project,
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

impl GitLab {
    async fn list_pipelines(
        &self,
        a: ListPipelinesArgs,
        ctx: &ToolContext,
    ) -> Result<PipelineList, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let mut query =
            vec![("ref", a.git_ref), ("status", a.status), ("source", a.source), ("sha", a.sha)];
        query.extend(paging(a.page, a.per_page));
        let path = uri(&format!("/projects/{}/pipelines", p.encoded), &query);
        let subject = Subject::listing("the pipelines", &p.name);
        let (page, at) = self.client.get_json::<Vec<WirePipeline>>(&path, &subject, ctx).await?;
        Ok(pipeline_list(p.name, page, at))
    }

    async fn list_pipeline_jobs(
        &self,
        a: ListPipelineJobsArgs,
        ctx: &ToolContext,
    ) -> Result<JobList, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let mut query: Vec<(&str, Option<String>)> = a
            .scope
            .unwrap_or_default()
            .into_iter()
            .filter(|s| !s.trim().is_empty())
            .map(|s| ("scope[]", Some(s)))
            .collect();
        query.push(("include_retried", a.include_retried.then(|| "true".to_owned())));
        query.extend(paging(a.page, a.per_page));
        let path =
            uri(&format!("/projects/{}/pipelines/{}/jobs", p.encoded, a.pipeline_id), &query);
        let subject = Subject::object(format!("pipeline {}", a.pipeline_id), &p.name);
        let (page, at) = self.client.get_json::<Vec<WireJob>>(&path, &subject, ctx).await?;
        Ok(job_list(p.name, a.pipeline_id, page, at))
    }

    async fn get_job_log(&self, a: GetJobLogArgs, ctx: &ToolContext) -> Result<JobLog, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let path = format!("/projects/{}/jobs/{}/trace", p.encoded, a.job_id);
        let subject =
            Subject::object(format!("job {}", a.job_id), &p.name).not_found_says(format!(
                "no log of job {} in {}: the job does not exist, has not started, its log was \
             erased or expired, or the token cannot see the project",
                a.job_id, p.name
            ));
        let raw = self.client.get_text(&path, &subject, ctx).await?;
        let tail = a.tail_lines.unwrap_or(TAIL_LINES).clamp(1, MAX_TAIL_LINES);
        Ok(job_log(p.name, a.job_id, &raw, tail))
    }

    async fn retry_job(&self, a: RetryJobArgs, ctx: &ToolContext) -> Result<RetriedJob, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let path = format!("/projects/{}/jobs/{}/retry", p.encoded, a.job_id);
        let subject = Subject::object(format!("job {}", a.job_id), &p.name);
        let job: WireJob = self.client.post_json(&path, None, &subject, ctx).await?;
        Ok(RetriedJob {
            project: p.name,
            retried_job_id: a.job_id,
            job_id: job.id,
            name: job.name,
            status: job.status,
            git_ref: job.git_ref,
            user: username(job.user),
            web_url: job.web_url,
        })
    }
}

register_tool! {
    provider: GitLab,
    name: "list_pipelines",
    group: "pipelines",
    description: "List a project's CI pipelines, newest first, with status, ref, commit and \
                  trigger; filter by ref (branch or tag), status, source or commit.",
    input: ListPipelinesArgs,
    output: PipelineList,
    handler: GitLab::list_pipelines,
}

register_tool! {
    provider: GitLab,
    name: "list_pipeline_jobs",
    group: "pipelines",
    description: "List the jobs of a pipeline with stage, status, failure reason and \
                  allow_failure, and how many failed the pipeline; filter by status.",
    input: ListPipelineJobsArgs,
    output: JobList,
    handler: GitLab::list_pipeline_jobs,
}

register_tool! {
    provider: GitLab,
    name: "get_job_log",
    group: "pipelines",
    description: "Get the end of a CI job's log (200 lines by default, at most 64 KiB), \
                  without colour codes or section markers, plus the error lines of the whole \
                  log.",
    input: GetJobLogArgs,
    output: JobLog,
    handler: GitLab::get_job_log,
}

register_tool! {
    provider: GitLab,
    name: "retry_job",
    group: "pipelines",
    description: "Run a failed or canceled CI job again. Returns the new job's id.",
    input: RetryJobArgs,
    output: RetriedJob,
    handler: GitLab::retry_job,
}

// ---------------------------------------------------------------------------------------------
// Running and cancelling a pipeline
// ---------------------------------------------------------------------------------------------

/// Arguments of `create_pipeline`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreatePipelineArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The branch or tag to run the pipeline on, e.g. `main`.
    #[serde(rename = "ref", alias = "branch")]
    pub(crate) git_ref: String,
    /// CI/CD variables for this run, by name: `{"DEPLOY_ENV": "staging"}`.
    pub(crate) variables: Option<BTreeMap<String, String>>,
}

/// Arguments of `cancel_pipeline`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CancelPipelineArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The pipeline's id (from `list_pipelines`).
    pub(crate) pipeline_id: u64,
}

/// Result of `create_pipeline` and `cancel_pipeline`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PipelineRun {
    /// The project (as given).
    pub(crate) project: String,
    /// The pipeline as it is now: id (for `list_pipeline_jobs`), status, ref, commit.
    #[serde(flatten)]
    pub(crate) pipeline: Pipeline,
    /// Who started it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) user: Option<String>,
}

/// A pipeline as the create and cancel endpoints send it: a listed pipeline plus its user.
#[derive(Debug, Deserialize)]
pub(crate) struct WirePipelineDetail {
    #[serde(flatten)]
    pipeline: WirePipeline,
    #[serde(default)]
    user: Option<WireUser>,
}

/// The result of a pipeline created or cancelled.
pub(crate) fn pipeline_run(project: String, p: WirePipelineDetail) -> PipelineRun {
    let mut listed = pipeline_list(project, vec![p.pipeline], Page::default());
    PipelineRun {
        project: listed.project,
        pipeline: listed.pipelines.remove(0),
        user: username(p.user),
    }
}

impl GitLab {
    async fn create_pipeline(
        &self,
        a: CreatePipelineArgs,
        ctx: &ToolContext,
    ) -> Result<PipelineRun, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        if a.git_ref.trim().is_empty() {
            return Err(ToolError::invalid_arguments("`ref` must not be empty"));
        }
        let mut body = json!({"ref": a.git_ref});
        if let Some(vars) = a.variables.filter(|v| !v.is_empty()) {
            let vars: Vec<Value> = vars
                .into_iter()
                .map(|(key, value)| json!({"key": key, "value": value, "variable_type": "env_var"}))
                .collect();
            body["variables"] = Value::Array(vars);
        }
        let path = format!("/projects/{}/pipeline", p.encoded);
        let subject = Subject::action(&format!("running a pipeline on {}", a.git_ref), &p.name);
        let run: WirePipelineDetail =
            self.client.post_json(&path, Some(&body), &subject, ctx).await?;
        Ok(pipeline_run(p.name, run))
    }

    async fn cancel_pipeline(
        &self,
        a: CancelPipelineArgs,
        ctx: &ToolContext,
    ) -> Result<PipelineRun, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let path = format!("/projects/{}/pipelines/{}/cancel", p.encoded, a.pipeline_id);
        let subject = Subject::object(format!("pipeline {}", a.pipeline_id), &p.name);
        let run: WirePipelineDetail = self.client.post_json(&path, None, &subject, ctx).await?;
        Ok(pipeline_run(p.name, run))
    }
}

register_tool! {
    provider: GitLab,
    name: "create_pipeline",
    group: "pipelines",
    description: "Run a CI pipeline on a branch or tag, optionally with CI/CD variables. \
                  Returns the new pipeline's id and status.",
    input: CreatePipelineArgs,
    output: PipelineRun,
    handler: GitLab::create_pipeline,
}

register_tool! {
    provider: GitLab,
    name: "cancel_pipeline",
    group: "pipelines",
    description: "Cancel a running or pending pipeline (all its unfinished jobs). Returns the \
                  pipeline with its new status.",
    input: CancelPipelineArgs,
    output: PipelineRun,
    handler: GitLab::cancel_pipeline,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_lose_colours_section_markers_and_overwritten_progress() {
        let start =
            "section_start:1714987820:step_script\r\u{1b}[0K\u{1b}[0K\u{1b}[36;1mExecuting \
                     \"step_script\"\u{1b}[0;m";
        assert_eq!(clean_line(start).as_deref(), Some("Executing \"step_script\""));
        assert_eq!(clean_line("section_end:1714988100:step_script\r\u{1b}[0K"), None);
        assert_eq!(
            clean_line("Receiving objects:  50% (60/120)\rReceiving objects: 100% (120/120)")
                .as_deref(),
            Some("Receiving objects: 100% (120/120)")
        );
        assert_eq!(clean_line("").as_deref(), Some(""));
        assert_eq!(
            clean_line("\u{1b}[31;1mERROR: Job failed\u{1b}[0;m").as_deref(),
            Some("ERROR: Job failed")
        );
    }

    #[test]
    fn a_long_log_keeps_its_end_and_every_error() {
        let raw: String = (0..300).map(|i| format!("line {i}\n")).collect::<String>()
            + "error: test failed\n\u{1b}[31;1mERROR: Job failed: exit code 1\n";
        let log = job_log("acme/api".into(), 7, &raw, 10);
        assert_eq!((log.lines_total, log.lines_returned), (302, 10));
        assert!(log.log.ends_with("ERROR: Job failed: exit code 1"));
        assert!(log.note.unwrap().contains("292 earlier lines cut"));
        assert_eq!(log.error_lines, ["error: test failed", "ERROR: Job failed: exit code 1"]);

        let wide = "x".repeat(3000);
        let raw: String = (0..100).map(|_| format!("{wide}\n")).collect();
        let log = job_log("acme/api".into(), 7, &raw, 100);
        assert!(log.log.len() <= LOG_MAX_BYTES, "{}", log.log.len());
        assert!(log.note.unwrap().contains("to stay within 64 KiB"));
    }
}
