//! What GitHub calls are worth: a value model for every tool, follow-up argument projection for
//! the read chains, and the host whose rate limit the calls spend.

use quiver_plugin_sdk::model_table::{self, ToolModel as Model};
use quiver_plugin_sdk::projection::MAX_PROJECTIONS_PER_LINK;
use quiver_plugin_sdk::support::json::{count, items};
use quiver_plugin_sdk::{generic_projection, prelude::*};

use crate::actions::FAILED;
use crate::model::split_repository;
use crate::GitHub;

use SideEffectClass::MutatesExternal;
use ValueClass::Critical;

/// This provider's defaults, spread into every row of [`MODELS`] (see [`Model`] for the fields):
/// typical sizes are measured on the recorded fixtures and GitHub's defaults (30 items a page),
/// maximums are what the tool's own caps allow.
const ROW: Model = Model::READ_ONLY;

/// The provider's value models, one row per tool it ships.
///
/// Follow-up probabilities are how often the agent then made the projected call (the first
/// projection, within its next three calls) in recorded sessions of agents working through
/// GitHub's MCP server — the calibration part of `quiver replay`'s split (MCPMark's and
/// Toolathlon's GitHub tasks), smoothed as (used + 1) / (seen + 2). Links those sessions never
/// took within three calls are gone (a pull request's reviews, review comments and check
/// runs); links not seen there keep their earlier priors.
#[rustfmt::skip]
pub(crate) static MODELS: &[Model] = &[
    // Issues.
    Model { tool: "list_issues", typical_kb: 6.0, max_kb: 40.0,
            follow_up: &[("get_issue", 0.04, "$.issues[*].number", "number"),
                         ("list_issue_comments", 0.2, "$.issues[*].number", "number")], ..ROW },
    Model { tool: "get_issue", value_class: Critical, typical_kb: 2.5, max_kb: 36.0,
            field_groups: &[("body", &["body"], 0.8, true)],
            follow_up: &[("list_issue_comments", 0.3, "$.number", "number")], ..ROW },
    Model { tool: "list_issue_comments", typical_kb: 5.0, max_kb: 250.0, ..ROW },
    Model { tool: "search_issues", value_class: Critical, typical_kb: 8.0, max_kb: 40.0,
            latency_ms_p50: 700, freshness_ttl_s: 120, fail_fast_after_n: Some(3),
            follow_up: &[("get_issue", 0.07, "$.items[*].number", "number")], ..ROW },
    Model { tool: "create_issue", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.4, max_kb: 2.0, latency_ms_p50: 600, freshness_ttl_s: 0,
            invalidates: &["list_issues", "search_issues"], ..ROW },
    Model { tool: "add_issue_comment", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.3, max_kb: 1.0, latency_ms_p50: 500, freshness_ttl_s: 0,
            invalidates: &["list_issue_comments", "get_issue", "get_pull_request"], ..ROW },
    // Pull requests.
    Model { tool: "list_pull_requests", typical_kb: 7.0, max_kb: 40.0,
            follow_up: &[("get_pull_request", 0.07, "$.pull_requests[*].number", "number")],
            ..ROW },
    Model { tool: "get_pull_request", value_class: Critical, typical_kb: 3.0, max_kb: 36.0,
            field_groups: &[("body", &["body"], 0.7, true),
                            ("stats", &["commits", "additions", "deletions", "changed_files"],
                             0.3, true)],
            follow_up: &[("list_pull_request_files", 0.12, "$.number", "number")],
            ..ROW },
    Model { tool: "list_pull_request_files", value_class: Critical, typical_kb: 20.0,
            max_kb: 130.0, latency_ms_p50: 500, freshness_ttl_s: 120,
            field_groups: &[("patch", &["files[*].patch"], 0.8, true)], ..ROW },
    Model { tool: "list_pull_request_reviews", typical_kb: 2.0, max_kb: 250.0, ..ROW },
    Model { tool: "list_pull_request_review_comments", typical_kb: 6.0, max_kb: 260.0,
            field_groups: &[("diff_hunk", &["comments[*].diff_hunk"], 0.3, false)], ..ROW },
    // Actions.
    Model { tool: "list_workflow_runs", typical_kb: 8.0, max_kb: 40.0, freshness_ttl_s: 30,
            follow_up: &[("list_workflow_jobs", 0.12, "$.workflow_runs[*].id", "run_id")],
            ..ROW },
    Model { tool: "list_workflow_jobs", typical_kb: 3.0, max_kb: 40.0, freshness_ttl_s: 30,
            follow_up: &[("get_job_logs", 0.45, "$.jobs[*].id", "job_id")], ..ROW },
    Model { tool: "get_job_logs", value_class: Critical, typical_kb: 12.0, max_kb: 72.0,
            latency_ms_p50: 1200, freshness_ttl_s: 300,
            field_groups: &[("error_lines", &["error_lines"], 0.9, true),
                            ("log", &["log"], 0.7, true)], ..ROW },
    // Repository contents.
    Model { tool: "get_file_contents", value_class: Critical, typical_kb: 8.0, max_kb: 70.0,
            freshness_ttl_s: 120,
            follow_up: &[("get_file_contents", 0.4, "$.entries[*].path", "path")], ..ROW },
    // Issue changes.
    Model { tool: "update_issue", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.6, max_kb: 3.0, latency_ms_p50: 600, freshness_ttl_s: 0,
            invalidates: &["get_issue", "list_issues", "search_issues", "get_pull_request",
                           "list_pull_requests"], ..ROW },
    Model { tool: "add_issue_labels", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.2, max_kb: 2.0, latency_ms_p50: 500, freshness_ttl_s: 0,
            invalidates: ISSUE_READS, ..ROW },
    Model { tool: "remove_issue_label", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.2, max_kb: 2.0, latency_ms_p50: 500, freshness_ttl_s: 0,
            invalidates: ISSUE_READS, ..ROW },
    Model { tool: "add_issue_assignees", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.6, max_kb: 3.0, latency_ms_p50: 500, freshness_ttl_s: 0,
            invalidates: ISSUE_READS, ..ROW },
    Model { tool: "remove_issue_assignees", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.6, max_kb: 3.0, latency_ms_p50: 500, freshness_ttl_s: 0,
            invalidates: ISSUE_READS, ..ROW },
    // Pull request changes, the whole diff, and CI on a commit.
    Model { tool: "create_pull_request", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.6, max_kb: 2.0, latency_ms_p50: 900, freshness_ttl_s: 0,
            invalidates: &["list_pull_requests", "search_issues", "list_issues"], ..ROW },
    Model { tool: "update_pull_request", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.6, max_kb: 2.0, latency_ms_p50: 700, freshness_ttl_s: 0,
            invalidates: &["get_pull_request", "list_pull_requests", "search_issues",
                           "get_issue"], ..ROW },
    Model { tool: "merge_pull_request", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.3, max_kb: 1.0, latency_ms_p50: 1500, freshness_ttl_s: 0,
            invalidates: &["get_pull_request", "list_pull_requests", "search_issues", "get_issue",
                           "list_issues", "list_commits", "list_branches", "compare_commits",
                           "get_file_contents"], ..ROW },
    Model { tool: "add_pull_request_reviewers", value_class: Critical,
            side_effect: MutatesExternal, typical_kb: 0.2, max_kb: 1.0, latency_ms_p50: 600,
            freshness_ttl_s: 0, invalidates: &["get_pull_request"], ..ROW },
    Model { tool: "create_pull_request_review", value_class: Critical,
            side_effect: MutatesExternal, typical_kb: 0.5, max_kb: 10.0, latency_ms_p50: 900,
            freshness_ttl_s: 0, invalidates: REVIEW_READS, ..ROW },
    Model { tool: "submit_pull_request_review", value_class: Critical,
            side_effect: MutatesExternal, typical_kb: 0.5, max_kb: 10.0, latency_ms_p50: 700,
            freshness_ttl_s: 0, invalidates: REVIEW_READS, ..ROW },
    Model { tool: "get_pull_request_diff", value_class: Critical, typical_kb: 25.0,
            max_kb: 70.0, latency_ms_p50: 700, freshness_ttl_s: 120,
            field_groups: &[("diff", &["diff"], 0.8, true)], ..ROW },
    Model { tool: "get_commit_status", typical_kb: 1.5, max_kb: 25.0, freshness_ttl_s: 30, ..ROW },
    Model { tool: "list_check_runs", value_class: Critical, typical_kb: 4.0, max_kb: 60.0,
            freshness_ttl_s: 30,
            follow_up: &[("get_job_logs", 0.45, "$.check_runs[*].id", "job_id")], ..ROW },
    // Repositories, code search and file writes.
    Model { tool: "search_repositories", typical_kb: 6.0, max_kb: 50.0, latency_ms_p50: 700,
            freshness_ttl_s: 300, fail_fast_after_n: Some(3),
            follow_up: &[("get_repository", 0.35, "$.items[*].repository", "repo")], ..ROW },
    Model { tool: "get_repository", typical_kb: 1.2, max_kb: 3.0, freshness_ttl_s: 300,
            follow_up: &[("get_file_contents", 0.3, "$.default_branch", "ref")], ..ROW },
    Model { tool: "search_code", value_class: Critical, typical_kb: 8.0, max_kb: 60.0,
            latency_ms_p50: 900, freshness_ttl_s: 300, fail_fast_after_n: Some(3),
            field_groups: &[("fragments", &["items[*].fragments"], 0.7, true)],
            follow_up: &[("get_file_contents", 0.03, "$.items[*].path", "path")], ..ROW },
    Model { tool: "create_file", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.4, max_kb: 1.0, latency_ms_p50: 900, freshness_ttl_s: 0,
            invalidates: FILE_READS, ..ROW },
    Model { tool: "update_file", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.4, max_kb: 1.0, latency_ms_p50: 900, freshness_ttl_s: 0,
            invalidates: FILE_READS, ..ROW },
    // Branches, commits, tags and releases.
    Model { tool: "list_branches", typical_kb: 2.0, max_kb: 10.0, ..ROW },
    Model { tool: "create_branch", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.2, max_kb: 0.5, latency_ms_p50: 800, freshness_ttl_s: 0,
            invalidates: &["list_branches"], ..ROW },
    Model { tool: "list_commits", typical_kb: 5.0, max_kb: 30.0,
            follow_up: &[("get_commit", 0.03, "$.commits[*].sha", "sha")], ..ROW },
    Model { tool: "get_commit", value_class: Critical, typical_kb: 10.0, max_kb: 140.0,
            latency_ms_p50: 500, freshness_ttl_s: 300,
            field_groups: &[("patch", &["files[*].patch"], 0.8, true)], ..ROW },
    Model { tool: "compare_commits", value_class: Critical, typical_kb: 20.0, max_kb: 230.0,
            latency_ms_p50: 900, freshness_ttl_s: 120,
            field_groups: &[("patch", &["files[*].patch"], 0.7, true),
                            ("commits", &["commits"], 0.5, true)],
            follow_up: &[("get_commit", 0.25, "$.commits[*].sha", "sha")], ..ROW },
    Model { tool: "list_tags", typical_kb: 1.5, max_kb: 8.0, freshness_ttl_s: 300,
            follow_up: &[("get_release_by_tag", 0.25, "$.tags[*].name", "tag")], ..ROW },
    Model { tool: "list_releases", typical_kb: 3.0, max_kb: 20.0, freshness_ttl_s: 300,
            follow_up: &[("get_release_by_tag", 0.4, "$.releases[*].tag_name", "tag")], ..ROW },
    Model { tool: "get_latest_release", typical_kb: 4.0, max_kb: 40.0, freshness_ttl_s: 300,
            field_groups: &[("body", &["body"], 0.7, true)], ..ROW },
    Model { tool: "get_release_by_tag", typical_kb: 4.0, max_kb: 40.0, freshness_ttl_s: 300,
            field_groups: &[("body", &["body"], 0.7, true)], ..ROW },
    // Actions: workflows, one run, run control, artifacts.
    Model { tool: "list_workflows", typical_kb: 1.5, max_kb: 12.0, freshness_ttl_s: 300,
            follow_up: &[("list_workflow_runs", 0.4, "$.workflows[*].file", "workflow")],
            ..ROW },
    Model { tool: "get_workflow_run", typical_kb: 0.8, max_kb: 2.0, freshness_ttl_s: 15,
            follow_up: &[("list_workflow_jobs", 0.45, "$.id", "run_id")], ..ROW },
    Model { tool: "dispatch_workflow", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.3, max_kb: 1.0, latency_ms_p50: 700, freshness_ttl_s: 0,
            invalidates: &["list_workflow_runs"], ..ROW },
    Model { tool: "rerun_failed_jobs", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.2, max_kb: 0.5, latency_ms_p50: 700, freshness_ttl_s: 0,
            invalidates: RUN_READS, ..ROW },
    Model { tool: "cancel_workflow_run", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.2, max_kb: 0.5, latency_ms_p50: 600, freshness_ttl_s: 0,
            invalidates: RUN_READS, ..ROW },
    Model { tool: "list_artifacts", typical_kb: 2.0, max_kb: 30.0, ..ROW },
    // Notifications.
    Model { tool: "list_notifications", typical_kb: 5.0, max_kb: 20.0, freshness_ttl_s: 30,
            follow_up: &[("get_issue", 0.3, "$.notifications[*].number", "number"),
                         ("get_pull_request", 0.3, "$.notifications[*].number", "number")],
            ..ROW },
    Model { tool: "mark_notifications_read", side_effect: MutatesExternal, typical_kb: 0.1,
            max_kb: 0.2, latency_ms_p50: 400, freshness_ttl_s: 0,
            invalidates: &["list_notifications"], ..ROW },
    // Security alerts.
    Model { tool: "list_dependabot_alerts", value_class: Critical, typical_kb: 6.0,
            max_kb: 60.0, latency_ms_p50: 600, freshness_ttl_s: 300, ..ROW },
    Model { tool: "list_code_scanning_alerts", value_class: Critical, typical_kb: 6.0,
            max_kb: 70.0, latency_ms_p50: 600, freshness_ttl_s: 300, ..ROW },
];

/// What labelling or assigning an issue (or a pull request) makes stale.
const ISSUE_READS: &[&str] =
    &["get_issue", "list_issues", "search_issues", "get_pull_request", "list_pull_requests"];
/// What a review makes stale.
const REVIEW_READS: &[&str] =
    &["list_pull_request_reviews", "list_pull_request_review_comments", "get_pull_request"];
/// What a file commit makes stale (the branch moves).
const FILE_READS: &[&str] =
    &["get_file_contents", "list_commits", "list_branches", "compare_commits", "get_commit"];
/// What re-running or cancelling a run makes stale.
const RUN_READS: &[&str] =
    &["list_workflow_runs", "get_workflow_run", "list_workflow_jobs", "list_check_runs"];

/// The row of `tool` (`get_x` or `github.get_x`).
fn model(tool: &str) -> Option<&'static Model> {
    model_table::find(MODELS, "github", tool)
}

/// `get_x` for `get_x` or `github.get_x`.
fn local_name(tool: &str) -> &str {
    model_table::local_name("github", tool)
}

type Args = Map<String, Value>;

/// `{owner, repo, <key>: value}`.
fn args(owner: &str, repo: &str, key: &str, value: Value) -> Args {
    let mut map = repo_args(owner, repo);
    map.insert(key.into(), value);
    map
}

/// `{owner, repo}`.
fn repo_args(owner: &str, repo: &str) -> Args {
    let mut map = Map::new();
    map.insert("owner".into(), json!(owner));
    map.insert("repo".into(), json!(repo));
    map
}

fn sha(item: &Value) -> Option<Value> {
    item.get("sha").filter(|s| s.is_string()).cloned()
}

fn is_failed(item: &Value) -> bool {
    item.get("conclusion").and_then(Value::as_str).is_some_and(|c| FAILED.contains(&c))
}

/// The arguments of a known read chain, built from the previous tool's result; `None` when the
/// pair is not one of the provider's chains.
fn chain_args(prev_tool: &str, next: &str, result: &Value) -> Option<Vec<Args>> {
    let repository = result.get("repository").and_then(Value::as_str).and_then(split_repository);
    let number = |item: &Value| item.get("number").filter(|n| n.is_u64()).cloned();
    let for_repo = |values: Vec<(&str, Value)>| -> Vec<Args> {
        let Some((owner, repo)) = repository else { return Vec::new() };
        values.into_iter().map(|(key, v)| args(owner, repo, key, v)).collect()
    };
    let out = match (prev_tool, next) {
        ("list_issues", "get_issue") => for_repo(
            items(result, "issues").iter().filter_map(number).map(|n| ("number", n)).collect(),
        ),
        // Only issues that have comments to read, the most discussed first.
        ("list_issues", "list_issue_comments") => {
            let mut discussed: Vec<&Value> = items(result, "issues")
                .iter()
                .filter(|i| count(i, "comments").unwrap_or(0) > 0)
                .collect();
            discussed.sort_by_key(|i| std::cmp::Reverse(i["comments"].as_u64()));
            for_repo(discussed.into_iter().filter_map(number).map(|n| ("number", n)).collect())
        }
        ("get_issue", "list_issue_comments") if count(result, "comments").unwrap_or(0) > 0 => {
            for_repo(number(result).map(|n| ("number", n)).into_iter().collect())
        }
        ("get_issue", "list_issue_comments") => Vec::new(),
        // Search hits span repositories: each hit names its own.
        ("search_issues", "get_issue") => items(result, "items")
            .iter()
            .filter_map(|hit| {
                let (owner, repo) =
                    hit.get("repository").and_then(Value::as_str).and_then(split_repository)?;
                Some(args(owner, repo, "number", number(hit)?))
            })
            .collect(),
        ("list_pull_requests", "get_pull_request") => for_repo(
            items(result, "pull_requests")
                .iter()
                .filter_map(number)
                .map(|n| ("number", n))
                .collect(),
        ),
        ("get_pull_request", "list_pull_request_files")
            if count(result, "changed_files") != Some(0) =>
        {
            for_repo(number(result).map(|n| ("number", n)).into_iter().collect())
        }
        ("get_pull_request", "list_pull_request_reviews") => {
            for_repo(number(result).map(|n| ("number", n)).into_iter().collect())
        }
        ("get_pull_request", "list_pull_request_review_comments")
            if count(result, "review_comments").unwrap_or(0) > 0 =>
        {
            for_repo(number(result).map(|n| ("number", n)).into_iter().collect())
        }
        ("get_pull_request", "list_pull_request_files" | "list_pull_request_review_comments") => {
            Vec::new()
        }
        // Failed runs first: their jobs are what the agent will look at.
        ("list_workflow_runs", "list_workflow_jobs") => {
            let runs = items(result, "workflow_runs");
            let ordered =
                runs.iter().filter(|r| is_failed(r)).chain(runs.iter().filter(|r| !is_failed(r)));
            for_repo(
                ordered.filter_map(|r| r.get("id").cloned()).map(|id| ("run_id", id)).collect(),
            )
        }
        // Only failed jobs: a passing job's log is rarely worth 12 KiB.
        ("list_workflow_jobs", "get_job_logs") => for_repo(
            items(result, "jobs")
                .iter()
                .filter(|j| is_failed(j))
                .filter_map(|j| j.get("id").cloned())
                .map(|id| ("job_id", id))
                .collect(),
        ),
        ("search_repositories", "get_repository") => items(result, "items")
            .iter()
            .filter_map(|hit| {
                let (owner, repo) =
                    hit.get("repository").and_then(Value::as_str).and_then(split_repository)?;
                Some(repo_args(owner, repo))
            })
            .collect(),
        // The root directory, to see what the repository holds.
        ("get_repository", "get_file_contents") => for_repo(vec![("path", json!(""))]),
        // Code hits span repositories: each names its own.
        ("search_code", "get_file_contents") => items(result, "items")
            .iter()
            .filter_map(|hit| {
                let (owner, repo) =
                    hit.get("repository").and_then(Value::as_str).and_then(split_repository)?;
                Some(args(owner, repo, "path", hit.get("path")?.clone()))
            })
            .collect(),
        // A directory, then the entry read next: its README first (what agents opened first in
        // recorded sessions), then files, then subdirectories, each in listing order — at the
        // same ref.
        ("get_file_contents", "get_file_contents") => {
            let entries = items(result, "entries");
            let is_readme = |e: &&Value| {
                e.get("path")
                    .and_then(Value::as_str)
                    .and_then(|p| p.rsplit('/').next())
                    .is_some_and(|name| name.to_ascii_lowercase().starts_with("readme"))
            };
            let of_kind =
                |kind: &'static str| move |e: &&Value| e.get("type") == Some(&json!(kind));
            let ordered = entries
                .iter()
                .filter(is_readme)
                .chain(entries.iter().filter(|e| !is_readme(e)).filter(of_kind("file")))
                .chain(entries.iter().filter(|e| !is_readme(e)).filter(of_kind("dir")));
            let git_ref = result.get("ref").cloned();
            for_repo(ordered.filter_map(|e| e.get("path").cloned()).map(|p| ("path", p)).collect())
                .into_iter()
                .map(|mut call| {
                    if let Some(git_ref) = &git_ref {
                        call.insert("ref".into(), git_ref.clone());
                    }
                    call
                })
                .collect()
        }
        ("list_commits", "get_commit") => {
            for_repo(items(result, "commits").iter().filter_map(sha).map(|v| ("sha", v)).collect())
        }
        // A comparison lists the oldest commit first; the newest ones are read first.
        ("compare_commits", "get_commit") => for_repo(
            items(result, "commits").iter().rev().filter_map(sha).map(|v| ("sha", v)).collect(),
        ),
        ("list_tags", "get_release_by_tag") => for_repo(
            items(result, "tags")
                .iter()
                .filter_map(|t| t.get("name").cloned())
                .map(|v| ("tag", v))
                .collect(),
        ),
        // Drafts have no tag to look up by until they are published.
        ("list_releases", "get_release_by_tag") => for_repo(
            items(result, "releases")
                .iter()
                .filter(|r| r.get("draft") != Some(&json!(true)))
                .filter_map(|r| r.get("tag_name").cloned())
                .map(|v| ("tag", v))
                .collect(),
        ),
        ("get_pull_request", "list_check_runs") => {
            for_repo(result.get("head_sha").cloned().map(|v| ("ref", v)).into_iter().collect())
        }
        // Only failed GitHub Actions checks: their id is the job id, and their log says why.
        ("list_check_runs", "get_job_logs") => for_repo(
            items(result, "check_runs")
                .iter()
                .filter(|r| is_failed(r) && r.get("app") == Some(&json!("github-actions")))
                .filter_map(|r| r.get("id").cloned())
                .map(|id| ("job_id", id))
                .collect(),
        ),
        // Disabled workflows have no new runs worth reading.
        ("list_workflows", "list_workflow_runs") => for_repo(
            items(result, "workflows")
                .iter()
                .filter(|w| w.get("state").and_then(Value::as_str).is_none_or(|s| s == "active"))
                .filter_map(|w| w.get("file").cloned())
                .map(|v| ("workflow", v))
                .collect(),
        ),
        ("get_workflow_run", "list_workflow_jobs") => {
            for_repo(result.get("id").cloned().map(|id| ("run_id", id)).into_iter().collect())
        }
        // Each notification names its repository; only threads about the next tool's kind.
        ("list_notifications", "get_issue" | "get_pull_request") => {
            let kind = if next == "get_issue" { "Issue" } else { "PullRequest" };
            items(result, "notifications")
                .iter()
                .filter(|n| n.get("type").and_then(Value::as_str) == Some(kind))
                .filter_map(|n| {
                    let (owner, repo) =
                        n.get("repository").and_then(Value::as_str).and_then(split_repository)?;
                    Some(args(owner, repo, "number", number(n)?))
                })
                .collect()
        }
        _ => return None,
    };
    Some(out.into_iter().take(MAX_PROJECTIONS_PER_LINK).collect())
}

impl ToolEnricher for GitHub {
    fn value_model(&self, tool: &str) -> Option<ValueModelLayer> {
        model(tool).map(|m| m.layer(Some(&self.host)))
    }

    fn project_args(&self, prev_tool: &str, prev_result: &Value, link: &FollowUpLink) -> Vec<Args> {
        let (prev_tool, next) = (local_name(prev_tool), local_name(&link.tool));
        // The provider's own chain, unless the user re-pointed the link's projection.
        let customised = model_table::is_customised(MODELS, "github", prev_tool, link);
        if !customised {
            if let Some(args) = chain_args(prev_tool, next, prev_result) {
                return args;
            }
        }
        // Any other link: its generic projection, with the repository filled in from the result
        // when the next tool is one of ours and the projection did not name it.
        let mut projected = generic_projection(prev_result, link);
        let repository =
            prev_result.get("repository").and_then(Value::as_str).and_then(split_repository);
        if let (Some((owner, repo)), Some(_)) = (repository, model(next)) {
            for a in &mut projected {
                a.entry("owner").or_insert_with(|| json!(owner));
                a.entry("repo").or_insert_with(|| json!(repo));
            }
        }
        projected
    }

    fn rate_limit_host(&self, _tool: &str, _args: &Value) -> Option<String> {
        Some(self.host.clone())
    }
}

#[cfg(test)]
mod tests {
    use quiver_plugin_sdk::core_types::defaults::prior_for;
    use quiver_plugin_sdk::core_types::value_model::{resolve, LayerSource};
    use quiver_plugin_sdk::Provider;

    use super::*;
    use crate::{
        actions, checks, commits, issues, notifications, pulls, repos, workflows, GitHubConfig,
    };

    fn fixture(name: &str) -> String {
        let path = format!("{}/../../tests/data/github/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn wire<T: serde::de::DeserializeOwned>(name: &str) -> T {
        serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn github(base_url: Option<&str>) -> GitHub {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let _entered = runtime.enter();
        GitHub::new(GitHubConfig { base_url: base_url.map(str::to_owned), ..Default::default() })
            .unwrap()
    }

    /// The provider's link, or — for chains real sessions never took, which the provider no
    /// longer ships but still projects when a user adds them — a user's link without a path.
    fn link(prev: &str, next: &str) -> FollowUpLink {
        let layer = github(None).value_model(prev).unwrap();
        layer.follow_up.unwrap_or_default().into_iter().find(|l| l.tool == next).unwrap_or(
            FollowUpLink {
                tool: next.to_owned(),
                probability: 0.5,
                projection: None,
                projection_arg: None,
            },
        )
    }

    fn project(prev: &str, result: &impl Serialize, next: &str) -> Vec<Value> {
        let result = serde_json::to_value(result).unwrap();
        github(None)
            .project_args(prev, &result, &link(prev, next))
            .into_iter()
            .map(Value::Object)
            .collect()
    }

    fn issue_list() -> issues::IssueList {
        issues::issue_list("octocat/Hello-World".into(), wire("issues_list.json"), false, Some(2))
    }

    #[test]
    fn every_tool_has_a_model_and_no_other_name_does() {
        let gh = github(None);
        let tools = GitHub::tools();
        assert_eq!(tools.len(), 53, "{:?}", tools.iter().map(|t| &t.name).collect::<Vec<_>>());
        for tool in &tools {
            let layer =
                gh.value_model(&tool.name).unwrap_or_else(|| panic!("{} has no model", tool.name));
            layer.validate().unwrap_or_else(|e| panic!("{}: {e}", tool.name));
            assert!(tool.group.is_some(), "{} has no group", tool.name);
        }
        assert_eq!(MODELS.len(), tools.len(), "a model for a tool that does not exist");
        assert!(gh.value_model("no_such_tool").is_none());
        assert!(gh.value_model("github.get_issue").is_some(), "qualified names resolve too");
    }

    #[test]
    fn follow_ups_and_invalidations_name_tools_that_exist() {
        let gh = github(None);
        let names: Vec<String> = GitHub::tools().into_iter().map(|t| t.name).collect();
        for tool in &names {
            let layer = gh.value_model(tool).unwrap();
            for l in layer.follow_up.iter().flatten() {
                assert!(names.contains(&l.tool), "{tool} → {} does not exist", l.tool);
            }
            for t in layer.invalidates.iter().flatten() {
                assert!(names.contains(t), "{tool} invalidates unknown {t}");
            }
        }
    }

    #[test]
    fn mutations_are_never_speculated_after_merging_with_the_built_in_priors() {
        let gh = github(None);
        for tool in GitHub::tools() {
            let (rule, prior) = prior_for(&tool.name);
            let provider = gh.value_model(&tool.name).unwrap();
            let merged = resolve(&[
                (LayerSource::BuiltIn(rule), &prior),
                (LayerSource::Provider("github".into()), &provider),
            ])
            .model;
            if model(&tool.name).unwrap().mutates() {
                assert_eq!(
                    merged.side_effect_class,
                    SideEffectClass::MutatesExternal,
                    "{}",
                    tool.name
                );
                assert!(!merged.may_speculate(), "{} may be speculated", tool.name);
                assert_eq!(merged.cost_model.freshness_ttl_s, Some(0), "{} is cached", tool.name);
                assert!(!merged.invalidates.is_empty(), "{} invalidates nothing", tool.name);
            } else {
                assert_eq!(merged.side_effect_class, SideEffectClass::ReadOnly, "{}", tool.name);
                assert!(merged.may_speculate(), "{} cannot be speculated", tool.name);
            }
        }
        let create = gh.value_model("create_issue").unwrap();
        assert_eq!(create.invalidates.unwrap(), ["list_issues", "search_issues"]);
        let comment = gh.value_model("add_issue_comment").unwrap();
        assert_eq!(
            comment.invalidates.unwrap(),
            ["list_issue_comments", "get_issue", "get_pull_request"]
        );
    }

    #[test]
    fn rate_limit_host_is_the_configured_host() {
        let args = json!({"owner": "o", "repo": "r"});
        assert_eq!(
            github(None).rate_limit_host("get_issue", &args).as_deref(),
            Some("api.github.com")
        );
        let ghe = github(Some("https://ghe.example.com/api/v3"));
        assert_eq!(ghe.rate_limit_host("list_issues", &args).as_deref(), Some("ghe.example.com"));
        assert_eq!(
            ghe.value_model("get_issue").unwrap().rate_limit_host.as_deref(),
            Some("ghe.example.com")
        );
    }

    #[test]
    fn list_issues_leads_to_the_first_issues_and_to_the_discussed_ones() {
        let list = issue_list();
        assert_eq!(list.pull_requests_skipped, 1, "the pull request in the listing is left out");
        assert_eq!(
            project("list_issues", &list, "get_issue"),
            [
                json!({"owner": "octocat", "repo": "Hello-World", "number": 1347}),
                json!({"owner": "octocat", "repo": "Hello-World", "number": 1346}),
                json!({"owner": "octocat", "repo": "Hello-World", "number": 1340}),
            ]
        );
        // #1346 has no comments; #1340 (5) comes before #1347 (2).
        let numbers: Vec<_> = project("list_issues", &list, "list_issue_comments")
            .iter()
            .map(|a| a["number"].clone())
            .collect();
        assert_eq!(numbers, [json!(1340), json!(1347)]);
    }

    #[test]
    fn get_issue_leads_to_its_comments_only_when_it_has_some() {
        let issue = issues::issue_detail("octocat/Hello-World".into(), wire("issue.json"));
        assert_eq!(
            project("get_issue", &issue, "list_issue_comments"),
            [json!({"owner": "octocat", "repo": "Hello-World", "number": 1347})]
        );
        let mut quiet = serde_json::to_value(&issue).unwrap();
        quiet["comments"] = json!(0);
        assert!(project("get_issue", &quiet, "list_issue_comments").is_empty());
    }

    #[test]
    fn search_hits_lead_to_issues_in_their_own_repositories() {
        let found = issues::search_result("crash".into(), wire("search_issues.json"), None);
        assert_eq!(
            project("search_issues", &found, "get_issue"),
            [
                json!({"owner": "XAMPPRocky", "repo": "octocrab", "number": 937}),
                json!({"owner": "octocat", "repo": "Spoon-Knife", "number": 12}),
            ]
        );
    }

    #[test]
    fn pull_request_chains_build_at_most_three_calls_and_skip_empty_ones() {
        let list =
            pulls::pull_list("octocat/Hello-World".into(), wire("pull_requests_list.json"), None);
        assert_eq!(list.pull_requests.len(), 4);
        let calls = project("list_pull_requests", &list, "get_pull_request");
        assert_eq!(calls.len(), 3, "capped at three");
        assert_eq!(calls[1], json!({"owner": "octocat", "repo": "Hello-World", "number": 1350}));

        let pull = pulls::pull_detail("octocat/Hello-World".into(), wire("pull_request.json"));
        let one = [json!({"owner": "octocat", "repo": "Hello-World", "number": 1347})];
        assert_eq!(project("get_pull_request", &pull, "list_pull_request_files"), one);
        assert_eq!(project("get_pull_request", &pull, "list_pull_request_reviews"), one);
        assert_eq!(project("get_pull_request", &pull, "list_pull_request_review_comments"), one);
        let mut quiet = serde_json::to_value(&pull).unwrap();
        quiet["review_comments"] = json!(0);
        let comments = project("get_pull_request", &quiet, "list_pull_request_review_comments");
        assert!(comments.is_empty(), "no review comments, nothing to fetch");
    }

    #[test]
    fn actions_chains_prefer_failures() {
        let runs =
            actions::run_list("artichoke/artichoke".into(), wire("workflow_runs.json"), None);
        let run_ids: Vec<_> = project("list_workflow_runs", &runs, "list_workflow_jobs")
            .iter()
            .map(|a| a["run_id"].clone())
            .collect();
        assert_eq!(run_ids[0], json!(1245374530), "the failed run comes first");
        assert_eq!(run_ids.len(), 3);

        let jobs = actions::job_list(
            "artichoke/artichoke".into(),
            1245374530,
            wire("workflow_jobs.json"),
            None,
        );
        assert_eq!(
            project("list_workflow_jobs", &jobs, "get_job_logs"),
            [json!({"owner": "artichoke", "repo": "artichoke", "job_id": 399444497})],
            "only the failed job's log is worth fetching"
        );
    }

    #[test]
    fn repository_and_code_hits_lead_into_their_own_repositories() {
        let found = repos::repository_search("rust".into(), wire("search_repositories.json"), None);
        assert_eq!(
            project("search_repositories", &found, "get_repository"),
            [
                json!({"owner": "XAMPPRocky", "repo": "octocrab"}),
                json!({"owner": "octocat", "repo": "Hello-World"}),
            ]
        );
        let repo = repos::repository_detail(wire("repository.json"));
        assert_eq!(
            project("get_repository", &repo, "get_file_contents"),
            [json!({"owner": "octocat", "repo": "Hello-World", "path": ""})],
            "the root directory"
        );
        let code = repos::code_search("personal_token".into(), wire("search_code.json"), None);
        assert_eq!(
            project("search_code", &code, "get_file_contents"),
            [json!({"owner": "XAMPPRocky", "repo": "octocrab", "path": "README.md"})]
        );
    }

    #[test]
    fn commit_listings_lead_to_commits_newest_first() {
        let list = commits::commit_list("owner/my_repo".into(), wire("commits_list.json"), None);
        assert_eq!(
            project("list_commits", &list, "get_commit"),
            [
                json!({"owner": "owner", "repo": "my_repo",
                       "sha": "24606b5f326a1356f031dd06431cfb0beddd475f"}),
                json!({"owner": "owner", "repo": "my_repo",
                       "sha": "7cf97159fe31b0e011bbb24109b5e10d278f551f"}),
            ]
        );
        let cmp = commits::comparison(
            "owner/my_repo".into(),
            "main".into(),
            "topic".into(),
            wire("compare.json"),
            0,
            None,
        );
        let shas: Vec<_> = project("compare_commits", &cmp, "get_commit")
            .iter()
            .map(|a| a["sha"].clone())
            .collect();
        assert_eq!(
            shas,
            [
                json!("24606b5f326a1356f031dd06431cfb0beddd475f"),
                json!("7cf97159fe31b0e011bbb24109b5e10d278f551f")
            ],
            "a comparison lists the oldest first; the newest is read first"
        );
    }

    #[test]
    fn tags_and_published_releases_lead_to_their_release() {
        let tags = commits::tag_list("octocat/Hello-World".into(), wire("tags.json"), None);
        assert_eq!(
            project("list_tags", &tags, "get_release_by_tag"),
            [
                json!({"owner": "octocat", "repo": "Hello-World", "tag": "v0.2"}),
                json!({"owner": "octocat", "repo": "Hello-World", "tag": "v0.1"}),
            ]
        );
        let releases =
            commits::release_list("XAMPPRocky/octocrab".into(), wire("releases_list.json"), None);
        assert_eq!(
            project("list_releases", &releases, "get_release_by_tag"),
            [json!({"owner": "XAMPPRocky", "repo": "octocrab", "tag": "v0.38.0"})],
            "the draft has no release to look up by tag"
        );
    }

    #[test]
    fn a_pull_request_leads_to_its_checks_and_failed_actions_checks_to_their_logs() {
        let pull = pulls::pull_detail("octocat/Hello-World".into(), wire("pull_request.json"));
        assert_eq!(
            project("get_pull_request", &pull, "list_check_runs"),
            [json!({"owner": "octocat", "repo": "Hello-World",
                    "ref": "6dcb09b5b57875f334f61aebed695e2e4193db5e"})]
        );
        let checks = checks::check_run_list(
            "XAMPPRocky/octocrab".into(),
            "main".into(),
            wire("check_runs.json"),
            None,
        );
        assert_eq!(
            project("list_check_runs", &checks, "get_job_logs"),
            [json!({"owner": "XAMPPRocky", "repo": "octocrab", "job_id": 16354767496u64})],
            "only the failed GitHub Actions check; the passing one and Codecov have no job log"
        );
    }

    #[test]
    fn active_workflows_lead_to_their_runs_and_a_run_to_its_jobs() {
        let list =
            workflows::workflow_list("octo-org/octo-repo".into(), wire("workflows.json"), None);
        assert_eq!(
            project("list_workflows", &list, "list_workflow_runs"),
            [
                json!({"owner": "octo-org", "repo": "octo-repo", "workflow": "blank.yaml"}),
                json!({"owner": "octo-org", "repo": "octo-repo", "workflow": "linter.yaml"}),
            ],
            "the disabled workflow is skipped"
        );
        let run = workflows::RunDetail {
            repository: "artichoke/artichoke".into(),
            run: actions::run_of(wire("workflow_run.json")),
        };
        assert_eq!(
            project("get_workflow_run", &run, "list_workflow_jobs"),
            [json!({"owner": "artichoke", "repo": "artichoke", "run_id": 1245374530})]
        );
    }

    #[test]
    fn notifications_lead_to_the_issue_or_pull_request_they_are_about() {
        let list = notifications::notification_list(wire("notifications.json"), None);
        assert_eq!(
            project("list_notifications", &list, "get_issue"),
            [json!({"owner": "octokit", "repo": "octokit.rb", "number": 123})]
        );
        assert_eq!(
            project("list_notifications", &list, "get_pull_request"),
            [json!({"owner": "octocat", "repo": "Hello-World", "number": 1347})]
        );
    }

    #[test]
    fn writes_invalidate_the_reads_they_change() {
        let gh = github(None);
        let invalidates = |tool: &str| gh.value_model(tool).unwrap().invalidates.unwrap();
        assert!(invalidates("merge_pull_request").contains(&"get_pull_request".to_owned()));
        assert!(invalidates("update_file").contains(&"get_file_contents".to_owned()));
        assert!(invalidates("rerun_failed_jobs").contains(&"list_check_runs".to_owned()));
        assert_eq!(invalidates("mark_notifications_read"), ["list_notifications"]);
        assert_eq!(invalidates("create_branch"), ["list_branches"]);
    }

    #[test]
    fn unknown_and_customised_links_fall_back_to_the_generic_projection() {
        let gh = github(None);
        let list = serde_json::to_value(issue_list()).unwrap();
        let custom = FollowUpLink {
            tool: "github.get_issue".into(),
            probability: 0.5,
            projection: Some("$.issues[1].number".into()),
            projection_arg: Some("number".into()),
        };
        assert_eq!(
            gh.project_args("github.list_issues", &list, &custom),
            [json!({"number": 1346, "owner": "octocat", "repo": "Hello-World"})
                .as_object()
                .unwrap()
                .clone()]
        );
        let elsewhere = FollowUpLink {
            tool: "jira.get_issue".into(),
            probability: 0.5,
            projection: Some("$.issues[0].title".into()),
            projection_arg: Some("summary".into()),
        };
        assert_eq!(
            gh.project_args("list_issues", &list, &elsewhere),
            [json!({"summary": "Found a bug"}).as_object().unwrap().clone()],
            "another provider's tool gets no owner/repo"
        );
    }

    #[test]
    fn a_directory_leads_to_its_readme_then_its_files_then_its_subdirectories() {
        let dir = json!({
            "repository": "octocat/Hello-World", "path": "docs", "ref": "v2", "type": "dir",
            "entries": [
                {"path": "docs/api", "type": "dir"},
                {"path": "docs/guide.md", "type": "file", "size": 10},
                {"path": "docs/README.md", "type": "file", "size": 20},
            ]
        });
        let calls = project("get_file_contents", &dir, "get_file_contents");
        let paths: Vec<&str> = calls.iter().map(|c| c["path"].as_str().unwrap()).collect();
        assert_eq!(paths, ["docs/README.md", "docs/guide.md", "docs/api"]);
        assert!(calls.iter().all(|c| c["ref"] == "v2" && c["owner"] == "octocat"), "{calls:?}");
        // A file leads nowhere: the chain does not apply.
        let file = json!({"repository": "octocat/Hello-World", "path": "a.md", "type": "file"});
        assert!(project("get_file_contents", &file, "get_file_contents").is_empty());
    }
}
