//! What Jira calls are worth: a value model for every tool, follow-up argument projection for
//! the read chains, and the host whose rate limit the calls spend.

use quiver_plugin_sdk::model_table::{self, ToolModel as Model};
use quiver_plugin_sdk::projection::MAX_PROJECTIONS_PER_LINK;
use quiver_plugin_sdk::support::json::{count, items};
use quiver_plugin_sdk::{generic_projection, prelude::*};

use crate::Jira;

use SideEffectClass::MutatesExternal;
use ValueClass::Critical;

/// This provider's defaults, spread into every row of [`MODELS`] (see [`Model`] for the fields):
/// typical sizes are measured on the recorded fixtures and the tools' default page sizes,
/// maximums are what the tool's own caps allow.
const ROW: Model = Model { latency_ms_p50: 450, ..Model::READ_ONLY };

/// A write: never cached, never speculated.
const WRITE: Model = Model {
    value_class: Critical,
    side_effect: MutatesExternal,
    typical_kb: 0.3,
    max_kb: 1.0,
    latency_ms_p50: 700,
    freshness_ttl_s: 0,
    ..ROW
};

/// The provider's value models, one row per tool it ships.
#[rustfmt::skip]
pub(crate) static MODELS: &[Model] = &[
    // Issues.
    Model { tool: "search_issues", value_class: Critical, typical_kb: 4.0, max_kb: 48.0,
            latency_ms_p50: 700, fail_fast_after_n: Some(3),
            follow_up: &[("get_issue", 0.5, "$.issues[*].key", "key")], ..ROW },
    Model { tool: "get_issue", value_class: Critical, typical_kb: 3.0, max_kb: 48.0,
            field_groups: &[("description", &["description"], 0.8, true),
                            ("custom_fields", &["custom_fields"], 0.4, true),
                            ("links", &["links", "subtasks"], 0.3, true)],
            follow_up: &[("list_comments", 0.35, "$.key", "key"),
                         ("list_transitions", 0.2, "$.key", "key"),
                         ("list_child_issues", 0.15, "$.key", "key"),
                         ("list_attachments", 0.1, "$.key", "key")], ..ROW },
    Model { tool: "list_child_issues", typical_kb: 2.5, max_kb: 48.0, latency_ms_p50: 700,
            follow_up: &[("get_issue", 0.4, "$.issues[*].key", "key")], ..ROW },
    Model { tool: "create_issue", invalidates: &["search_issues", "list_child_issues"], ..WRITE },
    Model { tool: "update_issue",
            invalidates: &["get_issue", "search_issues", "list_child_issues", "list_changelog"],
            ..WRITE },
    Model { tool: "link_issues", invalidates: &["get_issue", "list_changelog"], ..WRITE },
    Model { tool: "list_changelog", typical_kb: 3.0, max_kb: 64.0, ..ROW },
    Model { tool: "list_attachments", typical_kb: 0.8, max_kb: 16.0, ..ROW },
    Model { tool: "search_users", typical_kb: 0.8, max_kb: 12.0, freshness_ttl_s: 600, ..ROW },
    Model { tool: "list_watchers", typical_kb: 0.4, max_kb: 8.0, ..ROW },
    Model { tool: "add_watcher", invalidates: &["list_watchers"], ..WRITE },
    Model { tool: "assign_issue",
            invalidates: &["get_issue", "search_issues", "list_child_issues", "list_changelog",
                           "list_watchers"],
            ..WRITE },
    // Comments.
    Model { tool: "list_comments", typical_kb: 4.0, max_kb: 200.0, ..ROW },
    Model { tool: "add_comment", invalidates: &["list_comments", "get_issue"], ..WRITE },
    // Workflow.
    Model { tool: "list_transitions", typical_kb: 1.0, max_kb: 8.0, latency_ms_p50: 350,
            freshness_ttl_s: 120, ..ROW },
    Model { tool: "transition_issue", latency_ms_p50: 1000,
            invalidates: &["get_issue", "search_issues", "list_transitions", "list_comments",
                           "list_child_issues", "list_changelog"],
            ..WRITE },
    // Worklogs.
    Model { tool: "list_worklogs", typical_kb: 1.5, max_kb: 32.0, ..ROW },
    Model { tool: "add_worklog", invalidates: &["list_worklogs", "list_changelog"], ..WRITE },
    // Planning.
    Model { tool: "list_boards", typical_kb: 2.0, max_kb: 12.0, freshness_ttl_s: 600,
            follow_up: &[("list_sprints", 0.4, "$.boards[*].id", "board_id")], ..ROW },
    Model { tool: "list_sprints", typical_kb: 1.5, max_kb: 12.0, freshness_ttl_s: 300,
            follow_up: &[("search_issues", 0.3, "$.sprints[*].id", "jql")], ..ROW },
    Model { tool: "move_issues_to_sprint",
            invalidates: &["search_issues", "get_issue", "list_child_issues", "list_changelog"],
            ..WRITE },
    Model { tool: "list_project_versions", typical_kb: 1.5, max_kb: 16.0,
            freshness_ttl_s: 600, ..ROW },
    // Projects.
    Model { tool: "list_projects", typical_kb: 2.0, max_kb: 16.0, freshness_ttl_s: 600,
            follow_up: &[("get_project", 0.3, "$.projects[*].key", "project")], ..ROW },
    Model { tool: "get_project", typical_kb: 1.0, max_kb: 8.0, freshness_ttl_s: 600,
            follow_up: &[("list_project_components", 0.15, "$.key", "project")], ..ROW },
    Model { tool: "list_project_components", typical_kb: 1.0, max_kb: 16.0,
            freshness_ttl_s: 600, ..ROW },
    Model { tool: "get_create_metadata", value_class: Critical, typical_kb: 2.5, max_kb: 32.0,
            freshness_ttl_s: 600, ..ROW },
];

/// The row of `tool` (`get_x` or `jira.get_x`).
fn model(tool: &str) -> Option<&'static Model> {
    model_table::find(MODELS, "jira", tool)
}

/// `get_x` for `get_x` or `jira.get_x`.
fn local_name(tool: &str) -> &str {
    model_table::local_name("jira", tool)
}

type Args = Map<String, Value>;

fn one(key: &str, value: Value) -> Args {
    let mut map = Map::new();
    map.insert(key.into(), value);
    map
}

/// The arguments of a known read chain, built from the previous tool's result; `None` when the
/// pair is not one of the provider's chains.
fn chain_args(prev_tool: &str, next: &str, result: &Value) -> Option<Vec<Args>> {
    let key = |item: &Value| item.get("key").filter(|k| k.is_string()).cloned();
    let out: Vec<Args> = match (prev_tool, next) {
        // The first hits, in the query's order (usually by relevance or recency).
        ("search_issues", "get_issue") => {
            items(result, "issues").iter().filter_map(key).map(|k| one("key", k)).collect()
        }
        // Only an issue that has comments to read.
        ("get_issue", "list_comments") => {
            let has = count(result, "comments").unwrap_or(0) > 0;
            key(result).filter(|_| has).map(|k| one("key", k)).into_iter().collect()
        }
        // Not for a resolved issue: its workflow is usually over.
        ("get_issue", "list_transitions") => {
            let done = result.get("status_category").and_then(Value::as_str) == Some("done");
            key(result).filter(|_| !done).map(|k| one("key", k)).into_iter().collect()
        }
        // An epic's children are not in its own result (sub-tasks are).
        ("get_issue", "list_child_issues") => {
            let epic = result
                .get("issue_type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.eq_ignore_ascii_case("epic"));
            key(result).filter(|_| epic).map(|k| one("key", k)).into_iter().collect()
        }
        // Only an issue that has attachments.
        ("get_issue", "list_attachments") => {
            let has = count(result, "attachments").unwrap_or(0) > 0;
            key(result).filter(|_| has).map(|k| one("key", k)).into_iter().collect()
        }
        // The children still open, in the listing's order.
        ("list_child_issues", "get_issue") => items(result, "issues")
            .iter()
            .filter(|i| i.get("status_category").and_then(Value::as_str) != Some("done"))
            .filter_map(key)
            .map(|k| one("key", k))
            .collect(),
        // The first projects listed.
        ("list_projects", "get_project") => {
            items(result, "projects").iter().filter_map(key).map(|k| one("project", k)).collect()
        }
        // Only a project that has components.
        ("get_project", "list_project_components") => {
            let has = !items(result, "components").is_empty();
            key(result).filter(|_| has).map(|k| one("project", k)).into_iter().collect()
        }
        // Only scrum boards have sprints.
        ("list_boards", "list_sprints") => items(result, "boards")
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("scrum"))
            .filter_map(|b| b.get("id").filter(|id| id.is_u64()).cloned())
            .map(|id| one("board_id", id))
            .collect(),
        // The active sprint's issues; nothing when no sprint is running.
        ("list_sprints", "search_issues") => items(result, "sprints")
            .iter()
            .filter(|s| s.get("state").and_then(Value::as_str) == Some("active"))
            .filter_map(|s| s.get("id").and_then(Value::as_u64))
            .map(|id| one("jql", json!(format!("sprint = {id} ORDER BY rank"))))
            .collect(),
        _ => return None,
    };
    Some(out.into_iter().take(MAX_PROJECTIONS_PER_LINK).collect())
}

impl ToolEnricher for Jira {
    fn value_model(&self, tool: &str) -> Option<ValueModelLayer> {
        model(tool).map(|m| m.layer(Some(&self.host)))
    }

    fn project_args(&self, prev_tool: &str, prev_result: &Value, link: &FollowUpLink) -> Vec<Args> {
        let (prev_tool, next) = (local_name(prev_tool), local_name(&link.tool));
        // The provider's own chain, unless the user re-pointed the link's projection.
        let customised = model_table::is_customised(MODELS, "jira", prev_tool, link);
        // Only links to this provider's tools: `github.get_issue` takes other arguments.
        let ours = !link.tool.contains('.') || link.tool.starts_with("jira.");
        if !customised && ours {
            if let Some(args) = chain_args(prev_tool, next, prev_result) {
                return args;
            }
        }
        generic_projection(prev_result, link)
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
    use crate::comments::{comment_list, WireComments};
    use crate::issues::{issue_detail, search_result, ChildIssues, WireIssue, WireSearch};
    use crate::planning::{board_list, sprint_list};
    use crate::projects::{project_detail, project_page};
    use crate::{Deployment, JiraConfig};
    use SideEffectClass::ReadOnly;

    fn fixture(name: &str) -> String {
        let path = format!("{}/../../tests/data/jira/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn wire<T: serde::de::DeserializeOwned>(name: &str) -> T {
        serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn jira(base_url: &str) -> Jira {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let _entered = runtime.enter();
        Jira::new(JiraConfig { base_url: Some(base_url.to_owned()), ..Default::default() }).unwrap()
    }

    fn cloud() -> Jira {
        jira("https://acme.atlassian.net")
    }

    fn link(prev: &str, next: &str) -> FollowUpLink {
        let layer = cloud().value_model(prev).unwrap();
        layer.follow_up.unwrap().into_iter().find(|l| l.tool == next).unwrap()
    }

    fn project(prev: &str, result: &impl Serialize, next: &str) -> Vec<Value> {
        let result = serde_json::to_value(result).unwrap();
        cloud()
            .project_args(prev, &result, &link(prev, next))
            .into_iter()
            .map(Value::Object)
            .collect()
    }

    #[test]
    fn every_tool_has_a_model_and_no_other_name_does() {
        let j = cloud();
        let tools = Jira::tools();
        assert_eq!(tools.len(), 26, "{:?}", tools.iter().map(|t| &t.name).collect::<Vec<_>>());
        for tool in &tools {
            let layer =
                j.value_model(&tool.name).unwrap_or_else(|| panic!("{} has no model", tool.name));
            layer.validate().unwrap_or_else(|e| panic!("{}: {e}", tool.name));
            assert!(tool.group.is_some(), "{} has no group", tool.name);
            assert!(tool.output_schema.is_some(), "{} has no output schema", tool.name);
        }
        assert_eq!(MODELS.len(), tools.len(), "a model for a tool that does not exist");
        assert!(j.value_model("no_such_tool").is_none());
        assert!(j.value_model("list_issues").is_none(), "a GitHub tool name is not ours");
        assert!(j.value_model("jira.get_issue").is_some(), "qualified names resolve too");
    }

    #[test]
    fn follow_ups_and_invalidations_name_tools_that_exist() {
        let j = cloud();
        let names: Vec<String> = Jira::tools().into_iter().map(|t| t.name).collect();
        for tool in &names {
            let layer = j.value_model(tool).unwrap();
            for l in layer.follow_up.iter().flatten() {
                assert!(names.contains(&l.tool), "{tool} → {} does not exist", l.tool);
                let next = j.value_model(&l.tool).unwrap();
                assert_eq!(next.side_effect_class, Some(ReadOnly), "{tool} → a write");
            }
            for t in layer.invalidates.iter().flatten() {
                assert!(names.contains(t), "{tool} invalidates unknown {t}");
            }
        }
    }

    #[test]
    fn writes_are_never_speculated_after_merging_with_the_built_in_priors() {
        let j = cloud();
        const WRITES: &[&str] = &[
            "create_issue",
            "update_issue",
            "link_issues",
            "add_comment",
            "transition_issue",
            "add_worklog",
            "add_watcher",
            "assign_issue",
            "move_issues_to_sprint",
        ];
        for tool in Jira::tools() {
            let (rule, prior) = prior_for(&tool.name);
            let provider = j.value_model(&tool.name).unwrap();
            let merged = resolve(&[
                (LayerSource::BuiltIn(rule), &prior),
                (LayerSource::Provider("jira".into()), &provider),
            ])
            .model;
            if WRITES.contains(&tool.name.as_str()) {
                assert_eq!(merged.side_effect_class, MutatesExternal, "{}", tool.name);
                assert!(!merged.may_speculate(), "{} may be speculated", tool.name);
                assert_eq!(merged.cost_model.freshness_ttl_s, Some(0), "{} is cached", tool.name);
                assert!(!merged.invalidates.is_empty(), "{} invalidates nothing", tool.name);
            } else {
                assert_eq!(merged.side_effect_class, ReadOnly, "{}", tool.name);
                assert!(merged.may_speculate(), "{} cannot be speculated", tool.name);
            }
        }
        let transition = j.value_model("transition_issue").unwrap();
        assert_eq!(
            transition.invalidates.unwrap(),
            [
                "get_issue",
                "search_issues",
                "list_transitions",
                "list_comments",
                "list_child_issues",
                "list_changelog"
            ]
        );
        let worklog = j.value_model("add_worklog").unwrap();
        assert_eq!(worklog.invalidates.unwrap(), ["list_worklogs", "list_changelog"]);
        let sprint = j.value_model("move_issues_to_sprint").unwrap();
        assert!(sprint.invalidates.unwrap().contains(&"search_issues".to_owned()));
        let comment = j.value_model("add_comment").unwrap();
        assert_eq!(comment.invalidates.unwrap(), ["list_comments", "get_issue"]);
    }

    #[test]
    fn rate_limit_host_is_the_configured_site() {
        let args = json!({"key": "PROJ-1"});
        assert_eq!(
            cloud().rate_limit_host("get_issue", &args).as_deref(),
            Some("acme.atlassian.net")
        );
        let server = jira("https://jira.example.com:8443/jira/");
        assert_eq!(
            server.rate_limit_host("search_issues", &args).as_deref(),
            Some("jira.example.com")
        );
        assert_eq!(
            server.value_model("list_sprints").unwrap().rate_limit_host.as_deref(),
            Some("jira.example.com")
        );
    }

    #[test]
    fn search_hits_lead_to_the_first_three_issues() {
        let page: WireSearch = wire("search_jql.json");
        let found = search_result("project = ED".into(), page, &[], Deployment::Cloud);
        assert_eq!(
            project("search_issues", &found, "get_issue"),
            [json!({"key": "ED-42"}), json!({"key": "ED-41"}), json!({"key": "ED-38"})]
        );
    }

    #[test]
    fn get_issue_leads_to_comments_only_when_there_are_some() {
        let issue: WireIssue = wire("issue_cloud.json");
        let detail = issue_detail(issue, None, None, "https://acme.atlassian.net/");
        assert_eq!(detail.comments, 2);
        assert_eq!(project("get_issue", &detail, "list_comments"), [json!({"key": "ED-42"})]);
        assert_eq!(project("get_issue", &detail, "list_transitions"), [json!({"key": "ED-42"})]);
        let mut quiet = serde_json::to_value(&detail).unwrap();
        quiet["comments"] = json!(0);
        quiet["status_category"] = json!("done");
        assert!(project("get_issue", &quiet, "list_comments").is_empty());
        assert!(project("get_issue", &quiet, "list_transitions").is_empty(), "a done issue");
    }

    #[test]
    fn boards_lead_to_sprints_of_scrum_boards_and_sprints_to_the_active_ones_issues() {
        let boards = board_list(wire("boards.json"));
        assert_eq!(project("list_boards", &boards, "list_sprints"), [json!({"board_id": 84})]);
        let sprints = sprint_list(84, wire("sprints.json"));
        assert_eq!(
            project("list_sprints", &sprints, "search_issues"),
            [json!({"jql": "sprint = 37 ORDER BY rank"})]
        );
        let comments: WireComments = wire("comments_cloud.json");
        let list = comment_list("ED-42".into(), comments, false);
        assert_eq!(list.comments.len(), 2);
    }

    #[test]
    fn an_epic_leads_to_its_children_and_an_issue_with_files_to_its_attachments() {
        let issue: WireIssue = wire("issue_cloud.json");
        let detail = issue_detail(issue, None, None, "https://acme.atlassian.net/");
        assert_eq!(detail.attachments, 1);
        assert_eq!(project("get_issue", &detail, "list_attachments"), [json!({"key": "ED-42"})]);
        assert!(project("get_issue", &detail, "list_child_issues").is_empty(), "a bug");
        let mut epic = serde_json::to_value(&detail).unwrap();
        epic["issue_type"] = json!("Epic");
        epic.as_object_mut().unwrap().remove("attachments");
        assert_eq!(project("get_issue", &epic, "list_child_issues"), [json!({"key": "ED-42"})]);
        assert!(project("get_issue", &epic, "list_attachments").is_empty());
    }

    #[test]
    fn children_lead_to_the_open_ones() {
        let page: WireSearch = wire("search_children.json");
        let found = search_result("parent = ED-30".into(), page, &[], Deployment::Cloud);
        let children = ChildIssues { key: "ED-30".into(), found };
        assert_eq!(
            project("list_child_issues", &children, "get_issue"),
            [json!({"key": "ED-42"}), json!({"key": "ED-45"})],
            "ED-31 is done"
        );
    }

    #[test]
    fn projects_lead_to_their_details_and_a_project_to_its_components() {
        let projects = project_page(wire("projects_search.json"));
        assert_eq!(
            project("list_projects", &projects, "get_project"),
            [json!({"project": "DOCS"}), json!({"project": "ED"})]
        );
        let detail = project_detail(wire("project.json"), "https://acme.atlassian.net/");
        assert_eq!(
            project("get_project", &detail, "list_project_components"),
            [json!({"project": "ED"})]
        );
        let mut bare = serde_json::to_value(&detail).unwrap();
        bare.as_object_mut().unwrap().remove("components");
        assert!(project("get_project", &bare, "list_project_components").is_empty());
    }

    #[test]
    fn customised_and_foreign_links_fall_back_to_the_generic_projection() {
        let j = cloud();
        let page: WireSearch = wire("search_jql.json");
        let found =
            serde_json::to_value(search_result("x".into(), page, &[], Deployment::Cloud)).unwrap();
        let custom = FollowUpLink {
            tool: "jira.get_issue".into(),
            probability: 0.5,
            projection: Some("$.issues[2].key".into()),
            projection_arg: Some("key".into()),
        };
        assert_eq!(
            j.project_args("jira.search_issues", &found, &custom),
            [json!({"key": "ED-38"}).as_object().unwrap().clone()]
        );
        let elsewhere = FollowUpLink {
            tool: "github.search_issues".into(),
            probability: 0.2,
            projection: Some("$.issues[0].summary".into()),
            projection_arg: Some("q".into()),
        };
        assert_eq!(
            j.project_args("search_issues", &found, &elsewhere),
            [json!({"q": "Login fails with SSO when the session expired"})
                .as_object()
                .unwrap()
                .clone()]
        );
    }
}
