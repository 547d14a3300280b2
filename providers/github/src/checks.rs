//! What CI says about a commit: the combined commit status and the check runs.

use quiver_plugin_sdk::prelude::*;

use crate::actions::FAILED;
use crate::client::{encode_path, paging, repo_path, uri, Subject};
use crate::model::nullable;
use crate::text::truncate_opt;
use crate::GitHub;

/// Longest check run summary kept, in bytes.
const SUMMARY_MAX_BYTES: usize = 1024;

/// Arguments of `get_commit_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetCommitStatusArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// A commit SHA (a pull request's `head_sha`), branch or tag.
    #[serde(rename = "ref", alias = "sha")]
    pub(crate) git_ref: String,
}

/// `filter` of `list_check_runs`.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CheckRunFilter {
    /// The latest run of each check (the default).
    Latest,
    /// Every run, re-runs included.
    All,
}

/// Arguments of `list_check_runs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListCheckRunsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// A commit SHA (a pull request's `head_sha`), branch or tag.
    #[serde(rename = "ref", alias = "sha")]
    pub(crate) git_ref: String,
    /// Only the checks with this name, e.g. `build`.
    pub(crate) check_name: Option<String>,
    /// Only checks that are `queued`, `in_progress` or `completed`.
    pub(crate) status: Option<String>,
    /// `latest` (the default) or `all`.
    pub(crate) filter: Option<CheckRunFilter>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// The combined status endpoint's answer.
#[derive(Debug, Deserialize)]
pub(crate) struct WireCombinedStatus {
    #[serde(default)]
    state: String,
    #[serde(default)]
    sha: Option<String>,
    #[serde(default)]
    total_count: u64,
    #[serde(default, deserialize_with = "nullable")]
    statuses: Vec<WireStatus>,
}

/// One status a service set on the commit.
#[derive(Debug, Deserialize)]
pub(crate) struct WireStatus {
    #[serde(default)]
    context: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    target_url: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
}

/// The check runs listing's envelope.
#[derive(Debug, Deserialize)]
pub(crate) struct WireCheckRuns {
    #[serde(default)]
    total_count: u64,
    #[serde(default)]
    check_runs: Vec<WireCheckRun>,
}

/// A check run.
#[derive(Debug, Deserialize)]
pub(crate) struct WireCheckRun {
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
    details_url: Option<String>,
    #[serde(default)]
    output: Option<WireCheckOutput>,
    #[serde(default)]
    app: Option<WireApp>,
}

/// What a check run reports.
#[derive(Debug, Deserialize)]
pub(crate) struct WireCheckOutput {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    annotations_count: u64,
}

/// The app that ran a check; only the slug is kept.
#[derive(Debug, Deserialize)]
pub(crate) struct WireApp {
    #[serde(default)]
    slug: Option<String>,
}

/// One status of a commit.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Status {
    /// What set it, e.g. `continuous-integration/jenkins`.
    pub(crate) context: String,
    /// `success`, `pending`, `failure` or `error`.
    pub(crate) state: String,
    /// The service's short description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// Where the service shows details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) target_url: Option<String>,
    /// When it was set.
    pub(crate) updated_at: Option<String>,
}

/// Result of `get_commit_status`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommitStatus {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The ref asked for.
    #[serde(rename = "ref")]
    pub(crate) git_ref: String,
    /// The commit it resolved to.
    pub(crate) sha: Option<String>,
    /// `success`, `pending` (also when no status is set) or `failure`. GitHub Actions and other
    /// check-run apps do not appear here: see `list_check_runs`.
    pub(crate) state: String,
    /// How many statuses are set.
    pub(crate) total_count: u64,
    /// The statuses, failures first.
    pub(crate) statuses: Vec<Status>,
}

/// One check run.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CheckRun {
    /// The check run id; for GitHub Actions it is also the job id (for `get_job_logs`).
    pub(crate) id: u64,
    /// The check's name.
    pub(crate) name: String,
    /// The app that ran it, e.g. `github-actions`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) app: Option<String>,
    /// `queued`, `in_progress` or `completed`.
    pub(crate) status: Option<String>,
    /// Once completed: `success`, `failure`, `neutral`, `cancelled`, `skipped`, `timed_out`,
    /// `action_required`.
    pub(crate) conclusion: Option<String>,
    /// The report's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<String>,
    /// The report's summary (cut at 1 KiB).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) summary: Option<String>,
    /// How many annotations (errors and warnings on lines) it made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) annotations: Option<u64>,
    /// When it started.
    pub(crate) started_at: Option<String>,
    /// When it finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) completed_at: Option<String>,
    /// The check on GitHub (or the app's own page).
    pub(crate) html_url: Option<String>,
}

/// Result of `list_check_runs`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CheckRunList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The ref asked for.
    #[serde(rename = "ref")]
    pub(crate) git_ref: String,
    /// How many check runs match in all.
    pub(crate) total_count: u64,
    /// Checks of this page that failed, timed out or need action.
    pub(crate) failed: usize,
    /// Checks of this page still queued or running.
    pub(crate) pending: usize,
    /// The check runs of this page.
    pub(crate) check_runs: Vec<CheckRun>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// The `get_commit_status` result, failures first.
pub(crate) fn commit_status(
    repository: String,
    git_ref: String,
    wire: WireCombinedStatus,
) -> CommitStatus {
    let rank = |state: &str| match state {
        "failure" | "error" => 0,
        "pending" => 1,
        _ => 2,
    };
    let mut statuses: Vec<Status> = wire
        .statuses
        .into_iter()
        .map(|s| Status {
            context: s.context,
            state: s.state,
            description: s.description.filter(|d| !d.is_empty()),
            target_url: s.target_url.filter(|u| !u.is_empty()),
            updated_at: s.updated_at,
        })
        .collect();
    statuses.sort_by_key(|s| rank(&s.state));
    CommitStatus {
        repository,
        git_ref,
        sha: wire.sha,
        state: wire.state,
        total_count: wire.total_count,
        statuses,
    }
}

/// The `list_check_runs` result.
pub(crate) fn check_run_list(
    repository: String,
    git_ref: String,
    wire: WireCheckRuns,
    next_page: Option<u32>,
) -> CheckRunList {
    let check_runs: Vec<CheckRun> = wire
        .check_runs
        .into_iter()
        .map(|r| {
            let output = r.output;
            CheckRun {
                id: r.id,
                name: r.name,
                app: r.app.and_then(|a| a.slug),
                status: r.status,
                conclusion: r.conclusion,
                title: output.as_ref().and_then(|o| o.title.clone()).filter(|t| !t.is_empty()),
                summary: truncate_opt(
                    output.as_ref().and_then(|o| o.summary.clone()),
                    SUMMARY_MAX_BYTES,
                ),
                annotations: output.map(|o| o.annotations_count).filter(|n| *n > 0),
                started_at: r.started_at,
                completed_at: r.completed_at,
                html_url: r.html_url.or(r.details_url),
            }
        })
        .collect();
    let failed = check_runs
        .iter()
        .filter(|r| {
            let c = r.conclusion.as_deref().unwrap_or("");
            FAILED.contains(&c) || c == "action_required"
        })
        .count();
    let pending = check_runs.iter().filter(|r| r.status.as_deref() != Some("completed")).count();
    CheckRunList {
        repository,
        git_ref,
        total_count: wire.total_count,
        failed,
        pending,
        check_runs,
        next_page,
    }
}

fn ref_segment(git_ref: &str) -> Result<String, ToolError> {
    let git_ref = git_ref.trim();
    if git_ref.is_empty() {
        return Err(ToolError::invalid_arguments(
            "`ref` is empty; give a commit SHA (a pull request's head_sha), branch or tag",
        ));
    }
    encode_path(git_ref)
}

impl GitHub {
    async fn get_commit_status(
        &self,
        a: GetCommitStatusArgs,
        ctx: &ToolContext,
    ) -> Result<CommitStatus, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let git_ref = a.git_ref.trim().to_owned();
        let path = format!("/repos/{repository}/commits/{}/status", ref_segment(&git_ref)?);
        // 100 statuses: the combined status pages them, and one page is every context in practice.
        let uri = uri(&path, &[("per_page", Some("100".to_owned()))]);
        let subject = Subject::object(format!("commit `{git_ref}`"), &repository);
        let (wire, _) = self.client.get_json::<WireCombinedStatus>(&uri, &subject, ctx).await?;
        Ok(commit_status(repository, git_ref, wire))
    }

    async fn list_check_runs(
        &self,
        a: ListCheckRunsArgs,
        ctx: &ToolContext,
    ) -> Result<CheckRunList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let git_ref = a.git_ref.trim().to_owned();
        let path = format!("/repos/{repository}/commits/{}/check-runs", ref_segment(&git_ref)?);
        let filter = a.filter.map(|f| match f {
            CheckRunFilter::Latest => "latest".to_owned(),
            CheckRunFilter::All => "all".to_owned(),
        });
        let mut query =
            vec![("check_name", a.check_name), ("status", a.status), ("filter", filter)];
        query.extend(paging(a.page, a.per_page));
        let subject = Subject::object(format!("commit `{git_ref}`"), &repository);
        let (wire, next) =
            self.client.get_json::<WireCheckRuns>(&uri(&path, &query), &subject, ctx).await?;
        Ok(check_run_list(repository, git_ref, wire, next))
    }
}

register_tool! {
    provider: GitHub,
    name: "get_commit_status",
    group: "pulls",
    description: "Get the combined commit status of a SHA, branch or tag (`success`, `pending`, \
                  `failure`) with each status set by external CI, failures first. GitHub Actions \
                  results are check runs: see `list_check_runs`.",
    input: GetCommitStatusArgs,
    output: CommitStatus,
    handler: GitHub::get_commit_status,
}

register_tool! {
    provider: GitHub,
    name: "list_check_runs",
    group: "pulls",
    description: "List the check runs (GitHub Actions jobs and other check apps) of a SHA, \
                  branch or tag with status, conclusion and summary, counting failed and \
                  pending ones.",
    input: ListCheckRunsArgs,
    output: CheckRunList,
    handler: GitHub::list_check_runs,
}
