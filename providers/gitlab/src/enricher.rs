//! What GitLab calls are worth: a value model for every tool, follow-up argument projection for
//! the read chains, and the host whose rate limit the calls spend.

use quiver_plugin_sdk::model_table::{self, ToolModel as Model};
use quiver_plugin_sdk::projection::MAX_PROJECTIONS_PER_LINK;
use quiver_plugin_sdk::support::json::{self, items};
use quiver_plugin_sdk::{generic_projection, prelude::*};

use crate::pipelines::fails_pipeline;
use crate::GitLab;

use SideEffectClass::MutatesExternal;
use ValueClass::{Critical, Supporting};

/// This provider's defaults, spread into every row of [`MODELS`] (see [`Model`] for the fields):
/// typical sizes are measured on the recorded fixtures at GitLab's default page size (20 items),
/// maximums are what the tool's own caps allow at default arguments.
const ROW: Model = Model::READ_ONLY;

/// A mutation: never cached, never speculated (see [`Model::layer`]).
const WRITE: Model = Model {
    value_class: Critical,
    side_effect: MutatesExternal,
    typical_kb: 0.4,
    max_kb: 2.0,
    latency_ms_p50: 600,
    freshness_ttl_s: 0,
    ..ROW
};

/// The provider's value models, one row per tool it ships.
#[rustfmt::skip]
pub(crate) static MODELS: &[Model] = &[
    // Projects and search.
    Model { tool: "list_projects", typical_kb: 3.0, max_kb: 30.0, latency_ms_p50: 450,
            freshness_ttl_s: 300,
            follow_up: &[("get_project", 0.3, "$.projects[*].project", "project")], ..ROW },
    Model { tool: "get_project", typical_kb: 1.0, max_kb: 8.0, freshness_ttl_s: 600, ..ROW },
    Model { tool: "search_users", typical_kb: 2.4, max_kb: 12.0, freshness_ttl_s: 600, ..ROW },
    Model { tool: "search", value_class: Critical, typical_kb: 6.0, max_kb: 40.0,
            latency_ms_p50: 900, freshness_ttl_s: 120, fail_fast_after_n: Some(3),
            follow_up: &[("get_issue", 0.4, "$.issues[*].iid", "iid"),
                         ("get_merge_request", 0.4, "$.merge_requests[*].iid", "iid")], ..ROW },
    // Issues.
    Model { tool: "list_issues", typical_kb: 5.0, max_kb: 40.0,
            follow_up: &[("get_issue", 0.45, "$.issues[*].iid", "iid"),
                         ("list_issue_notes", 0.2, "$.issues[*].iid", "iid")], ..ROW },
    Model { tool: "get_issue", value_class: Critical, typical_kb: 2.0, max_kb: 36.0,
            field_groups: &[("description", &["description"], 0.8, true)],
            follow_up: &[("list_issue_notes", 0.4, "$.iid", "iid")], ..ROW },
    Model { tool: "list_issue_notes", typical_kb: 4.0, max_kb: 170.0, ..ROW },
    Model { tool: "create_issue", invalidates: &["list_issues", "search"], ..WRITE },
    Model { tool: "create_issue_note", typical_kb: 0.2, max_kb: 1.0,
            invalidates: &["list_issue_notes", "get_issue", "list_issues"], ..WRITE },
    Model { tool: "update_issue", typical_kb: 0.4,
            invalidates: &["get_issue", "list_issues", "list_issue_notes", "search",
                           "list_labels", "list_milestones"], ..WRITE },
    Model { tool: "close_issue", typical_kb: 0.4,
            invalidates: &["get_issue", "list_issues", "list_issue_notes", "search",
                           "list_labels", "list_milestones"], ..WRITE },
    Model { tool: "list_labels", typical_kb: 2.0, max_kb: 12.0, freshness_ttl_s: 600, ..ROW },
    Model { tool: "list_milestones", typical_kb: 4.0, max_kb: 25.0, freshness_ttl_s: 600,
            follow_up: &[("list_issues", 0.25, "$.milestones[*].title", "milestone")], ..ROW },
    // Merge requests.
    Model { tool: "list_merge_requests", typical_kb: 7.0, max_kb: 40.0,
            follow_up: &[("get_merge_request", 0.5, "$.merge_requests[*].iid", "iid"),
                         ("list_merge_request_discussions", 0.2, "$.merge_requests[*].iid",
                          "iid")], ..ROW },
    Model { tool: "get_merge_request", value_class: Critical, typical_kb: 2.5, max_kb: 36.0,
            freshness_ttl_s: 30,
            field_groups: &[("description", &["description"], 0.7, true),
                            ("merge_state", &["detailed_merge_status", "has_conflicts",
                              "blocking_discussions_resolved", "head_pipeline", "can_merge"],
                             0.8, true),
                            ("diff_refs", &["diff_refs"], 0.2, false)],
            follow_up: &[("get_merge_request_changes", 0.55, "$.iid", "iid"),
                         ("list_merge_request_discussions", 0.35, "$.iid", "iid"),
                         ("get_merge_request_approvals", 0.25, "$.iid", "iid")], ..ROW },
    Model { tool: "list_merge_request_discussions", typical_kb: 6.0, max_kb: 200.0, ..ROW },
    Model { tool: "get_merge_request_changes", value_class: Critical, typical_kb: 18.0,
            max_kb: 130.0, latency_ms_p50: 600, freshness_ttl_s: 120,
            field_groups: &[("diff", &["files[*].diff"], 0.8, true)], ..ROW },
    Model { tool: "get_merge_request_approvals", typical_kb: 0.5, max_kb: 4.0,
            freshness_ttl_s: 30, ..ROW },
    Model { tool: "create_merge_request",
            invalidates: &["list_merge_requests", "search", "list_pipelines"], ..WRITE },
    Model { tool: "create_merge_request_note", typical_kb: 0.2, max_kb: 1.0,
            invalidates: &["list_merge_request_discussions", "get_merge_request",
                           "list_merge_requests"], ..WRITE },
    Model { tool: "update_merge_request", typical_kb: 0.5,
            invalidates: &["get_merge_request", "list_merge_requests", "search",
                           "get_merge_request_approvals"], ..WRITE },
    Model { tool: "merge_merge_request", typical_kb: 0.5, latency_ms_p50: 1500,
            invalidates: &["get_merge_request", "list_merge_requests", "search",
                           "list_branches", "list_commits", "compare_refs", "list_pipelines",
                           "list_repository_tree", "get_file"], ..WRITE },
    Model { tool: "approve_merge_request", typical_kb: 0.3,
            invalidates: &["get_merge_request_approvals", "get_merge_request",
                           "list_merge_requests"], ..WRITE },
    Model { tool: "unapprove_merge_request", typical_kb: 0.3,
            invalidates: &["get_merge_request_approvals", "get_merge_request",
                           "list_merge_requests"], ..WRITE },
    Model { tool: "resolve_merge_request_discussion", value_class: Supporting, typical_kb: 0.2,
            max_kb: 1.0,
            invalidates: &["list_merge_request_discussions", "get_merge_request",
                           "list_merge_requests"], ..WRITE },
    // Repository.
    Model { tool: "list_repository_tree", typical_kb: 1.0, max_kb: 6.0, freshness_ttl_s: 120,
            follow_up: &[("get_file", 0.4, "$.entries[*].path", "path")], ..ROW },
    Model { tool: "get_file", value_class: Critical, typical_kb: 3.0, max_kb: 66.0,
            freshness_ttl_s: 120, field_groups: &[("content", &["content"], 0.9, true)],
            ..ROW },
    Model { tool: "create_file", value_class: Supporting,
            invalidates: &["get_file", "list_repository_tree", "list_commits", "list_branches",
                           "compare_refs", "search"], ..WRITE },
    Model { tool: "update_file", value_class: Supporting,
            invalidates: &["get_file", "list_repository_tree", "list_commits", "list_branches",
                           "compare_refs", "search"], ..WRITE },
    Model { tool: "list_branches", typical_kb: 4.0, max_kb: 20.0, freshness_ttl_s: 60,
            follow_up: &[("compare_refs", 0.15, "$.branches[*].name", "to")], ..ROW },
    Model { tool: "create_branch", value_class: Supporting, typical_kb: 0.2, max_kb: 1.0,
            invalidates: &["list_branches"], ..WRITE },
    Model { tool: "list_commits", typical_kb: 5.5, max_kb: 30.0, freshness_ttl_s: 60,
            follow_up: &[("get_commit", 0.35, "$.commits[*].sha", "sha")], ..ROW },
    Model { tool: "get_commit", value_class: Critical, typical_kb: 4.0, max_kb: 130.0,
            latency_ms_p50: 700, freshness_ttl_s: 3600,
            field_groups: &[("diff", &["files[*].diff"], 0.8, true)], ..ROW },
    Model { tool: "compare_refs", value_class: Critical, typical_kb: 8.0, max_kb: 420.0,
            latency_ms_p50: 900, freshness_ttl_s: 60,
            field_groups: &[("diff", &["files[*].diff"], 0.8, true)], ..ROW },
    Model { tool: "list_tags", typical_kb: 3.4, max_kb: 17.0, freshness_ttl_s: 300, ..ROW },
    Model { tool: "list_releases", typical_kb: 20.0, max_kb: 150.0, freshness_ttl_s: 300, ..ROW },
    // Pipelines.
    Model { tool: "list_pipelines", typical_kb: 4.0, max_kb: 30.0, freshness_ttl_s: 30,
            follow_up: &[("list_pipeline_jobs", 0.5, "$.pipelines[*].id", "pipeline_id")],
            ..ROW },
    Model { tool: "list_pipeline_jobs", typical_kb: 4.0, max_kb: 40.0, freshness_ttl_s: 30,
            follow_up: &[("get_job_log", 0.45, "$.jobs[*].id", "job_id")], ..ROW },
    Model { tool: "get_job_log", value_class: Critical, typical_kb: 12.0, max_kb: 72.0,
            latency_ms_p50: 1000, freshness_ttl_s: 300,
            field_groups: &[("error_lines", &["error_lines"], 0.9, true),
                            ("log", &["log"], 0.7, true)], ..ROW },
    Model { tool: "retry_job", value_class: Supporting, typical_kb: 0.3, max_kb: 1.0,
            invalidates: &["list_pipeline_jobs", "list_pipelines", "get_merge_request"],
            ..WRITE },
    Model { tool: "create_pipeline", value_class: Supporting, typical_kb: 0.3, max_kb: 1.0,
            invalidates: &["list_pipelines", "get_merge_request"], ..WRITE },
    Model { tool: "cancel_pipeline", value_class: Supporting, typical_kb: 0.3, max_kb: 1.0,
            invalidates: &["list_pipelines", "list_pipeline_jobs", "get_merge_request"],
            ..WRITE },
];

/// The row of `tool` (`get_x` or `gitlab.get_x`).
fn model(tool: &str) -> Option<&'static Model> {
    model_table::find(MODELS, "gitlab", tool)
}

/// `get_x` for `get_x` or `gitlab.get_x`.
fn local_name(tool: &str) -> &str {
    model_table::local_name("gitlab", tool)
}

type Args = Map<String, Value>;

/// `{project, <key>: value}`.
fn args(project: &Value, key: &str, value: Value) -> Args {
    let mut map = Map::new();
    map.insert("project".into(), project.clone());
    map.insert(key.into(), value);
    map
}

/// The count `key` of an item, 0 when it has none.
fn count(item: &Value, key: &str) -> u64 {
    json::count(item, key).unwrap_or(0)
}

/// The arguments of a known read chain, built from the previous tool's result; `None` when the
/// pair is not one of the provider's chains.
fn chain_args(prev_tool: &str, next: &str, result: &Value) -> Option<Vec<Args>> {
    let listed = result.get("project").filter(|p| p.is_string());
    // An item names its own project in listings across projects; else the listing's applies.
    let project_of = |item: &'_ Value| -> Option<Value> {
        item.get("project").filter(|p| p.is_string()).or(listed).cloned()
    };
    let by = |list: Vec<&Value>, key: &str, arg: &str| -> Vec<Args> {
        list.into_iter()
            .filter_map(|item| {
                let value = item.get(key).filter(|v| v.is_u64())?.clone();
                Some(args(&project_of(item)?, arg, value))
            })
            .collect()
    };
    let all = |key: &str| items(result, key).iter().collect::<Vec<_>>();
    // The most discussed first, those without comments left out.
    let discussed = |key: &str| {
        let mut list: Vec<&Value> =
            items(result, key).iter().filter(|i| count(i, "notes") > 0).collect();
        list.sort_by_key(|i| std::cmp::Reverse(count(i, "notes")));
        list
    };
    let this = || vec![result];
    let out = match (prev_tool, next) {
        ("list_projects", "get_project") => items(result, "projects")
            .iter()
            .filter_map(|p| p.get("project").filter(|v| v.is_string()))
            .map(|p| {
                let mut a = Map::new();
                a.insert("project".into(), p.clone());
                a
            })
            .collect(),
        ("search", "get_issue") => by(all("issues"), "iid", "iid"),
        ("search", "get_merge_request") => by(all("merge_requests"), "iid", "iid"),
        ("list_issues", "get_issue") => by(all("issues"), "iid", "iid"),
        ("list_issues", "list_issue_notes") => by(discussed("issues"), "iid", "iid"),
        ("get_issue", "list_issue_notes") if count(result, "notes") > 0 => by(this(), "iid", "iid"),
        ("get_issue", "list_issue_notes") => Vec::new(),
        ("list_merge_requests", "get_merge_request") => by(all("merge_requests"), "iid", "iid"),
        ("list_merge_requests", "list_merge_request_discussions") => {
            by(discussed("merge_requests"), "iid", "iid")
        }
        ("get_merge_request", "get_merge_request_changes") => {
            let none = result.get("changes_count").and_then(Value::as_str) == Some("0");
            if none {
                Vec::new()
            } else {
                by(this(), "iid", "iid")
            }
        }
        ("get_merge_request", "list_merge_request_discussions") if count(result, "notes") > 0 => {
            by(this(), "iid", "iid")
        }
        ("get_merge_request", "list_merge_request_discussions") => Vec::new(),
        // Approvals matter only while the merge request is open.
        ("get_merge_request", "get_merge_request_approvals") => {
            if result.get("state").and_then(Value::as_str) == Some("opened") {
                by(this(), "iid", "iid")
            } else {
                Vec::new()
            }
        }
        // Files, not folders or submodules, read at the ref that was listed.
        ("list_repository_tree", "get_file") => {
            let git_ref = result.get("ref").filter(|r| r.is_string());
            let project = listed?;
            items(result, "entries")
                .iter()
                .filter(|e| e.get("type").and_then(Value::as_str) == Some("file"))
                .filter_map(|e| e.get("path").filter(|p| p.is_string()))
                .map(|path| {
                    let mut a = args(project, "path", path.clone());
                    if let Some(r) = git_ref {
                        a.insert("ref".into(), r.clone());
                    }
                    a
                })
                .collect()
        }
        ("list_commits", "get_commit") => items(result, "commits")
            .iter()
            .filter_map(|c| c.get("sha").filter(|s| s.is_string()))
            .filter_map(|sha| Some(args(listed?, "sha", sha.clone())))
            .collect(),
        // What a branch other than the default one adds to it; merged branches add nothing.
        ("list_branches", "compare_refs") => {
            let branches = items(result, "branches");
            let Some(base) = branches
                .iter()
                .find(|b| b.get("default").and_then(Value::as_bool) == Some(true))
                .and_then(|b| b.get("name"))
            else {
                return Some(Vec::new());
            };
            let flag = |b: &Value, key: &str| b.get(key).and_then(Value::as_bool) == Some(true);
            branches
                .iter()
                .filter(|b| !flag(b, "default") && !flag(b, "merged"))
                .filter_map(|b| {
                    let mut a = args(listed?, "from", base.clone());
                    a.insert("to".into(), b.get("name")?.clone());
                    Some(a)
                })
                .collect()
        }
        // Issues of the milestones still open.
        ("list_milestones", "list_issues") => items(result, "milestones")
            .iter()
            .filter(|m| m.get("state").and_then(Value::as_str) == Some("active"))
            .filter_map(|m| Some(args(listed?, "milestone", m.get("title")?.clone())))
            .collect(),
        // Failed pipelines first: their jobs are what the agent will look at.
        ("list_pipelines", "list_pipeline_jobs") => {
            let failed = |p: &&Value| p.get("status").and_then(Value::as_str) == Some("failed");
            let pipelines = all("pipelines");
            let ordered = pipelines
                .iter()
                .copied()
                .filter(failed)
                .chain(pipelines.iter().copied().filter(|p| !failed(p)))
                .collect();
            by(ordered, "id", "pipeline_id")
        }
        // Only failed jobs, those that fail the pipeline first: a passing job's log is rarely
        // worth 12 KiB.
        ("list_pipeline_jobs", "get_job_log") => {
            let jobs = all("jobs");
            let failed = |j: &&Value| j.get("status").and_then(Value::as_str) == Some("failed");
            let ordered = jobs
                .iter()
                .copied()
                .filter(|j| fails_pipeline(j))
                .chain(jobs.iter().copied().filter(|j| failed(j) && !fails_pipeline(j)))
                .collect();
            by(ordered, "id", "job_id")
        }
        _ => return None,
    };
    Some(out.into_iter().take(MAX_PROJECTIONS_PER_LINK).collect())
}

impl ToolEnricher for GitLab {
    fn value_model(&self, tool: &str) -> Option<ValueModelLayer> {
        model(tool).map(|m| m.layer(Some(&self.host)))
    }

    fn project_args(&self, prev_tool: &str, prev_result: &Value, link: &FollowUpLink) -> Vec<Args> {
        let (prev_tool, next) = (local_name(prev_tool), local_name(&link.tool));
        // The provider's own chain, unless the user re-pointed the link's projection.
        let customised = model_table::is_customised(MODELS, "gitlab", prev_tool, link);
        if !customised {
            if let Some(args) = chain_args(prev_tool, next, prev_result) {
                return args;
            }
        }
        // Any other link: its generic projection, with the project filled in from the result
        // when the next tool is one of ours and the projection did not name it.
        let mut projected = generic_projection(prev_result, link);
        let project = prev_result.get("project").filter(|p| p.is_string());
        if let (Some(project), Some(_)) = (project, model(next)) {
            for a in &mut projected {
                a.entry("project").or_insert_with(|| project.clone());
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
    use crate::client::Page;
    use crate::{issues, merge_requests, pipelines, projects, repository, GitLabConfig};
    use SideEffectClass::ReadOnly;

    fn fixture(name: &str) -> String {
        let path = format!("{}/../../tests/data/gitlab/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn wire<T: serde::de::DeserializeOwned>(name: &str) -> T {
        serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn gitlab(base_url: Option<&str>) -> GitLab {
        GitLab::new(GitLabConfig { base_url: base_url.map(str::to_owned), ..Default::default() })
            .unwrap()
    }

    fn link(prev: &str, next: &str) -> FollowUpLink {
        let layer = gitlab(None).value_model(prev).unwrap();
        layer.follow_up.unwrap().into_iter().find(|l| l.tool == next).unwrap()
    }

    fn project(prev: &str, result: &impl Serialize, next: &str) -> Vec<Value> {
        let result = serde_json::to_value(result).unwrap();
        gitlab(None)
            .project_args(prev, &result, &link(prev, next))
            .into_iter()
            .map(Value::Object)
            .collect()
    }

    const API: &str = "acme/backend/api";

    #[test]
    fn every_tool_has_a_model_and_no_other_name_does() {
        let gl = gitlab(None);
        let tools = GitLab::tools();
        assert_eq!(tools.len(), 42, "{:?}", tools.iter().map(|t| &t.name).collect::<Vec<_>>());
        for tool in &tools {
            let layer =
                gl.value_model(&tool.name).unwrap_or_else(|| panic!("{} has no model", tool.name));
            layer.validate().unwrap_or_else(|e| panic!("{}: {e}", tool.name));
            assert!(tool.group.is_some(), "{} has no group", tool.name);
            assert!(tool.output_schema.is_some(), "{} has no output schema", tool.name);
        }
        assert_eq!(MODELS.len(), tools.len(), "a model for a tool that does not exist");
        assert!(gl.value_model("no_such_tool").is_none());
        assert!(gl.value_model("get_pull_request").is_none(), "GitHub's names are not ours");
        assert!(gl.value_model("gitlab.get_issue").is_some(), "qualified names resolve too");
    }

    #[test]
    fn follow_ups_and_invalidations_name_tools_that_exist() {
        let gl = gitlab(None);
        let names: Vec<String> = GitLab::tools().into_iter().map(|t| t.name).collect();
        for tool in &names {
            let layer = gl.value_model(tool).unwrap();
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
        let gl = gitlab(None);
        let writes = [
            "create_issue",
            "create_issue_note",
            "update_issue",
            "close_issue",
            "create_merge_request",
            "create_merge_request_note",
            "update_merge_request",
            "merge_merge_request",
            "approve_merge_request",
            "unapprove_merge_request",
            "resolve_merge_request_discussion",
            "create_file",
            "update_file",
            "create_branch",
            "retry_job",
            "create_pipeline",
            "cancel_pipeline",
        ];
        for tool in GitLab::tools() {
            let (rule, prior) = prior_for(&tool.name);
            let provider = gl.value_model(&tool.name).unwrap();
            let merged = resolve(&[
                (LayerSource::BuiltIn(rule), &prior),
                (LayerSource::Provider("gitlab".into()), &provider),
            ])
            .model;
            if writes.contains(&tool.name.as_str()) {
                assert_eq!(merged.side_effect_class, MutatesExternal, "{}", tool.name);
                assert!(!merged.may_speculate(), "{} may be speculated", tool.name);
                assert_eq!(merged.speculate, Some(false), "{}", tool.name);
                assert_eq!(merged.cost_model.freshness_ttl_s, Some(0), "{} is cached", tool.name);
                assert!(!merged.invalidates.is_empty(), "{} invalidates nothing", tool.name);
            } else {
                assert_eq!(merged.side_effect_class, ReadOnly, "{}", tool.name);
                assert!(merged.may_speculate(), "{} cannot be speculated", tool.name);
            }
        }
        let note = gl.value_model("create_merge_request_note").unwrap();
        assert_eq!(
            note.invalidates.unwrap(),
            ["list_merge_request_discussions", "get_merge_request", "list_merge_requests"]
        );
        let retry = gl.value_model("retry_job").unwrap();
        assert_eq!(
            retry.invalidates.unwrap(),
            ["list_pipeline_jobs", "list_pipelines", "get_merge_request"]
        );
    }

    #[test]
    fn a_merge_makes_the_repository_reads_stale_and_every_write_names_what_it_changes() {
        let gl = gitlab(None);
        let merge = gl.value_model("merge_merge_request").unwrap().invalidates.unwrap();
        for read in ["get_merge_request", "list_merge_requests", "list_branches", "list_commits"] {
            assert!(merge.iter().any(|t| t == read), "merging leaves {read} cached");
        }
        let approve = gl.value_model("approve_merge_request").unwrap().invalidates.unwrap();
        assert_eq!(
            approve,
            ["get_merge_request_approvals", "get_merge_request", "list_merge_requests"]
        );
        let file = gl.value_model("update_file").unwrap().invalidates.unwrap();
        assert!(file.iter().any(|t| t == "get_file") && file.iter().any(|t| t == "list_commits"));
        let close = gl.value_model("close_issue").unwrap().invalidates.unwrap();
        assert!(close.iter().any(|t| t == "get_issue") && close.iter().any(|t| t == "list_issues"));
    }

    #[test]
    fn a_tree_leads_to_its_files_at_the_listed_ref() {
        let tree = repository::tree_list(
            API.into(),
            Some("fix/stale-session".into()),
            Some("src".into()),
            wire("repository_tree.json"),
            Page::default(),
        );
        assert_eq!(
            project("list_repository_tree", &tree, "get_file"),
            [
                json!({"project": API, "path": "src/lib.rs", "ref": "fix/stale-session"}),
                json!({"project": API, "path": "src/session.rs", "ref": "fix/stale-session"}),
                json!({"project": API, "path": "src/release.sh", "ref": "fix/stale-session"}),
            ],
            "folders and submodules are not files"
        );
        let root = repository::tree_list(
            API.into(),
            None,
            None,
            wire("repository_tree.json"),
            Page::default(),
        );
        assert_eq!(
            project("list_repository_tree", &root, "get_file")[0],
            json!({"project": API, "path": "src/lib.rs"}),
            "no ref listed, none asked for"
        );
    }

    #[test]
    fn commits_lead_to_each_commit_and_branches_to_what_they_add_to_the_default_one() {
        let commits =
            repository::commit_list(API.into(), None, wire("commits_list.json"), Page::default());
        let shas: Vec<_> = project("list_commits", &commits, "get_commit")
            .iter()
            .map(|a| (a["project"].clone(), a["sha"].clone()))
            .collect();
        assert_eq!(shas.len(), 3);
        assert_eq!(shas[0], (json!(API), json!("b83d6e391c22777fca1ed3012fce84f633d7fed0")));

        let branches =
            repository::branch_list(API.into(), wire("branches_list.json"), Page::default());
        assert_eq!(
            project("list_branches", &branches, "compare_refs"),
            [json!({"project": API, "from": "main", "to": "fix/stale-session"})],
            "neither the default branch itself nor a merged one"
        );
        let mut no_default = serde_json::to_value(&branches).unwrap();
        no_default["branches"][1]["default"] = json!(false);
        assert!(project("list_branches", &no_default, "compare_refs").is_empty());
    }

    #[test]
    fn active_milestones_lead_to_their_issues() {
        let milestones =
            issues::milestone_list(API.into(), wire("milestones_list.json"), Page::default());
        assert_eq!(
            project("list_milestones", &milestones, "list_issues"),
            [
                json!({"project": API, "milestone": "v2.2"}),
                json!({"project": API, "milestone": "v3.0"}),
            ],
            "the closed v2.0 is left out"
        );
    }

    #[test]
    fn rate_limit_host_is_the_configured_host() {
        let args = json!({"project": API, "iid": 1});
        assert_eq!(gitlab(None).rate_limit_host("get_issue", &args).as_deref(), Some("gitlab.com"));
        let own = gitlab(Some("https://gitlab.example.com/api/v4/"));
        assert_eq!(
            own.rate_limit_host("list_issues", &args).as_deref(),
            Some("gitlab.example.com")
        );
        assert_eq!(
            own.value_model("get_job_log").unwrap().rate_limit_host.as_deref(),
            Some("gitlab.example.com")
        );
    }

    #[test]
    fn merge_request_listings_lead_to_the_first_ones_and_to_the_discussed_ones() {
        let list = merge_requests::merge_request_list(
            Some(API.into()),
            wire("merge_requests_list.json"),
            Page::default(),
        );
        assert_eq!(
            project("list_merge_requests", &list, "get_merge_request"),
            [
                json!({"project": API, "iid": 19}),
                json!({"project": API, "iid": 18}),
                json!({"project": API, "iid": 16}),
            ]
        );
        // !18 has no notes; !19 (3) before !16 (1).
        let iids: Vec<_> = project("list_merge_requests", &list, "list_merge_request_discussions")
            .iter()
            .map(|a| a["iid"].clone())
            .collect();
        assert_eq!(iids, [json!(19), json!(16)]);
    }

    #[test]
    fn a_merge_request_leads_to_its_changes_discussions_and_approvals() {
        let mr = merge_requests::merge_request_detail(API.into(), wire("merge_request.json"));
        let one = [json!({"project": API, "iid": 19})];
        assert_eq!(project("get_merge_request", &mr, "get_merge_request_changes"), one);
        assert_eq!(project("get_merge_request", &mr, "list_merge_request_discussions"), one);
        assert_eq!(project("get_merge_request", &mr, "get_merge_request_approvals"), one);

        let mut merged = serde_json::to_value(&mr).unwrap();
        merged["state"] = json!("merged");
        merged["notes"] = json!(0);
        merged["changes_count"] = json!("0");
        for next in [
            "get_merge_request_approvals",
            "list_merge_request_discussions",
            "get_merge_request_changes",
        ] {
            assert!(project("get_merge_request", &merged, next).is_empty(), "{next}");
        }
    }

    #[test]
    fn issue_chains_follow_the_project_of_each_issue() {
        let list = issues::issue_list(Some(API.into()), wire("issues_list.json"), Page::default());
        assert_eq!(project("list_issues", &list, "get_issue").len(), 3);
        let noted: Vec<_> = project("list_issues", &list, "list_issue_notes")
            .iter()
            .map(|a| a["iid"].clone())
            .collect();
        assert_eq!(noted, [json!(41), json!(47)], "#45 has no notes; #41 (7) before #47 (4)");

        let issue = issues::issue_detail(API.into(), wire("issue.json"));
        assert_eq!(
            project("get_issue", &issue, "list_issue_notes"),
            [json!({"project": API, "iid": 47})]
        );

        // Across projects, each issue names its own.
        let across = issues::issue_list(None, wire("search_issues.json"), Page::default());
        assert_eq!(
            project("list_issues", &across, "get_issue"),
            [json!({"project": API, "iid": 47}), json!({"project": "acme/web", "iid": 3})]
        );
    }

    #[test]
    fn search_hits_lead_to_their_issues() {
        let found = projects::search_result(
            projects::SearchScope::Issues,
            "stale session".into(),
            None,
            projects::Hits::Issues(wire("search_issues.json")),
            Page::default(),
        );
        assert_eq!(
            project("search", &found, "get_issue"),
            [json!({"project": API, "iid": 47}), json!({"project": "acme/web", "iid": 3})]
        );
        assert!(project("search", &found, "get_merge_request").is_empty());
    }

    #[test]
    fn pipeline_chains_prefer_failures() {
        let runs =
            pipelines::pipeline_list(API.into(), wire("pipelines_list.json"), Page::default());
        let ids: Vec<_> = project("list_pipelines", &runs, "list_pipeline_jobs")
            .iter()
            .map(|a| a["pipeline_id"].clone())
            .collect();
        assert_eq!(ids, [json!(9001), json!(9003), json!(9002)], "the failed pipeline first");

        let jobs =
            pipelines::job_list(API.into(), 9001, wire("pipeline_jobs.json"), Page::default());
        assert_eq!(jobs.failed, 1);
        assert_eq!(
            project("list_pipeline_jobs", &jobs, "get_job_log"),
            [json!({"project": API, "job_id": 77118}), json!({"project": API, "job_id": 77119})],
            "the job that failed the pipeline, then the allowed failure; never passing jobs"
        );
    }

    #[test]
    fn projects_lead_to_their_details() {
        let list = projects::project_list(wire("projects_list.json"), Page::default());
        assert_eq!(
            project("list_projects", &list, "get_project"),
            [json!({"project": API}), json!({"project": "acme/web"})]
        );
    }

    #[test]
    fn unknown_and_customised_links_fall_back_to_the_generic_projection() {
        let gl = gitlab(None);
        let list = serde_json::to_value(issues::issue_list(
            Some(API.into()),
            wire("issues_list.json"),
            Page::default(),
        ))
        .unwrap();
        let custom = FollowUpLink {
            tool: "gitlab.get_issue".into(),
            probability: 0.5,
            projection: Some("$.issues[1].iid".into()),
            projection_arg: Some("iid".into()),
        };
        assert_eq!(
            gl.project_args("gitlab.list_issues", &list, &custom),
            [json!({"iid": 45, "project": API}).as_object().unwrap().clone()]
        );
        let elsewhere = FollowUpLink {
            tool: "jira.search_issues".into(),
            probability: 0.5,
            projection: Some("$.issues[0].title".into()),
            projection_arg: Some("jql".into()),
        };
        assert_eq!(
            gl.project_args("list_issues", &list, &elsewhere),
            [json!({"jql": "Login returns 500 when the session cookie is stale"})
                .as_object()
                .unwrap()
                .clone()],
            "another provider's tool gets no project"
        );
    }
}
