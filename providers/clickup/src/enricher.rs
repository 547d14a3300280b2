//! What ClickUp calls are worth: a value model for every tool, follow-up argument projection for
//! the read chains (workspace → spaces → folders → lists → tasks → task → comments and
//! checklists; subtasks → task; goals → goal → the tasks of its key results; running timer →
//! task), and the host whose rate limit the calls spend.

use quiver_plugin_sdk::model_table::{self, ToolModel as Model};
use quiver_plugin_sdk::projection::MAX_PROJECTIONS_PER_LINK;
use quiver_plugin_sdk::support::json::{count, items};
use quiver_plugin_sdk::{generic_projection, prelude::*};

use crate::ClickUp;

use SideEffectClass::MutatesExternal;
use ValueClass::Critical;

/// This provider's defaults, spread into every row of [`MODELS`] (see [`Model`] for the fields):
/// typical sizes are measured on the recorded fixtures scaled to usual sizes, maximums are what
/// the tool's own caps allow.
const ROW: Model = Model { max_kb: 16.0, ..Model::READ_ONLY };

/// The provider's value models, one row per tool it ships.
#[rustfmt::skip]
pub(crate) static MODELS: &[Model] = &[
    // The hierarchy changes rarely: cache it for minutes.
    Model { tool: "list_workspaces", typical_kb: 1.5, max_kb: 12.0, latency_ms_p50: 300,
            freshness_ttl_s: 900,
            field_groups: &[("members", &["workspaces[*].members"], 0.4, true)],
            follow_up: &[("list_spaces", 0.6, "$.workspaces[*].team_id", "team_id")], ..ROW },
    Model { tool: "list_spaces", typical_kb: 1.2, max_kb: 12.0, latency_ms_p50: 300,
            freshness_ttl_s: 600,
            follow_up: &[("list_lists", 0.5, "$.spaces[*].space_id", "space_id"),
                         ("list_folders", 0.4, "$.spaces[*].space_id", "space_id")], ..ROW },
    Model { tool: "list_folders", typical_kb: 1.0, max_kb: 10.0, latency_ms_p50: 300,
            freshness_ttl_s: 300,
            follow_up: &[("list_lists", 0.55, "$.folders[*].folder_id", "folder_id")], ..ROW },
    Model { tool: "list_lists", typical_kb: 1.5, max_kb: 16.0, latency_ms_p50: 400,
            freshness_ttl_s: 300,
            follow_up: &[("list_tasks", 0.6, "$.lists[*].list_id", "list_id")], ..ROW },
    // Tasks.
    Model { tool: "list_tasks", typical_kb: 8.0, max_kb: 40.0, latency_ms_p50: 500,
            follow_up: &[("get_task", 0.45, "$.tasks[*].task_id", "task_id")], ..ROW },
    Model { tool: "search_tasks", value_class: Critical, typical_kb: 10.0, max_kb: 45.0,
            latency_ms_p50: 800, fail_fast_after_n: Some(3),
            follow_up: &[("get_task", 0.5, "$.tasks[*].task_id", "task_id")], ..ROW },
    Model { tool: "get_task", value_class: Critical, typical_kb: 3.0, max_kb: 40.0,
            latency_ms_p50: 400,
            field_groups: &[("description", &["description"], 0.8, true),
                            ("custom_fields", &["custom_fields"], 0.5, true),
                            ("subtasks", &["subtasks", "checklists"], 0.4, true)],
            follow_up: &[("list_task_comments", 0.35, "$.task_id", "task_id"),
                         ("list_checklists", 0.2, "$.task_id", "task_id")], ..ROW },
    Model { tool: "list_task_comments", typical_kb: 3.0, max_kb: 210.0, ..ROW },
    Model { tool: "list_checklists", typical_kb: 1.5, max_kb: 24.0, ..ROW },
    Model { tool: "list_subtasks", typical_kb: 3.0, max_kb: 40.0, latency_ms_p50: 400,
            follow_up: &[("get_task", 0.35, "$.subtasks[*].task_id", "task_id")], ..ROW },
    Model { tool: "list_custom_fields", typical_kb: 1.5, max_kb: 24.0, freshness_ttl_s: 600,
            ..ROW },
    Model { tool: "list_members", typical_kb: 0.8, max_kb: 8.0, freshness_ttl_s: 600, ..ROW },
    Model { tool: "list_time_entries", typical_kb: 6.0, max_kb: 30.0, latency_ms_p50: 600,
            freshness_ttl_s: 120, ..ROW },
    // A timer moves: cache its state only briefly.
    Model { tool: "get_running_timer", typical_kb: 0.4, max_kb: 1.0, freshness_ttl_s: 15,
            follow_up: &[("get_task", 0.2, "$.task_id", "task_id")], ..ROW },
    Model { tool: "list_goals", typical_kb: 1.5, max_kb: 16.0, freshness_ttl_s: 300,
            follow_up: &[("get_goal", 0.5, "$.goals[*].goal_id", "goal_id")], ..ROW },
    Model { tool: "get_goal", typical_kb: 1.5, max_kb: 12.0, freshness_ttl_s: 300,
            field_groups: &[("description", &["description"], 0.5, true)],
            follow_up: &[("get_task", 0.25, "$.key_results[*].task_ids[*]", "task_id")],
            ..ROW },
    // Writes: never speculated, never cached, and they make reads stale.
    Model { tool: "create_task", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.4, max_kb: 2.0, latency_ms_p50: 700, freshness_ttl_s: 0,
            invalidates: &["list_tasks", "search_tasks", "get_task", "list_lists",
                           "list_folders"], ..ROW },
    Model { tool: "update_task", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.4, max_kb: 2.0, latency_ms_p50: 700, freshness_ttl_s: 0,
            invalidates: &["get_task", "list_tasks", "search_tasks", "list_lists"], ..ROW },
    Model { tool: "add_task_comment", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.2, max_kb: 1.0, latency_ms_p50: 500, freshness_ttl_s: 0,
            invalidates: &["list_task_comments"], ..ROW },
    Model { tool: "create_checklist", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.3, max_kb: 2.0, latency_ms_p50: 500, freshness_ttl_s: 0,
            invalidates: &["list_checklists", "get_task"], ..ROW },
    Model { tool: "add_checklist_item", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.6, max_kb: 24.0, latency_ms_p50: 500, freshness_ttl_s: 0,
            invalidates: &["list_checklists", "get_task"], ..ROW },
    Model { tool: "update_checklist_item", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.6, max_kb: 24.0, latency_ms_p50: 500, freshness_ttl_s: 0,
            invalidates: &["list_checklists", "get_task"], ..ROW },
    Model { tool: "add_task_tag", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.1, max_kb: 0.5, latency_ms_p50: 400, freshness_ttl_s: 0,
            invalidates: &["get_task", "list_tasks", "search_tasks", "list_subtasks"], ..ROW },
    Model { tool: "remove_task_tag", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.1, max_kb: 0.5, latency_ms_p50: 400, freshness_ttl_s: 0,
            invalidates: &["get_task", "list_tasks", "search_tasks", "list_subtasks"], ..ROW },
    Model { tool: "set_custom_field", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.2, max_kb: 4.0, latency_ms_p50: 500, freshness_ttl_s: 0,
            invalidates: &["get_task"], ..ROW },
    Model { tool: "add_dependency", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.1, max_kb: 0.5, latency_ms_p50: 500, freshness_ttl_s: 0,
            invalidates: &["get_task"], ..ROW },
    Model { tool: "start_timer", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.4, max_kb: 1.0, latency_ms_p50: 500, freshness_ttl_s: 0,
            invalidates: &["get_running_timer", "list_time_entries", "get_task"], ..ROW },
    Model { tool: "stop_timer", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.4, max_kb: 1.0, latency_ms_p50: 500, freshness_ttl_s: 0,
            invalidates: &["get_running_timer", "list_time_entries", "get_task"], ..ROW },
];

/// The row of `tool` (`get_x` or `clickup.get_x`).
fn model(tool: &str) -> Option<&'static Model> {
    model_table::find(MODELS, "clickup", tool)
}

/// `get_x` for `get_x` or `clickup.get_x`.
fn local_name(tool: &str) -> &str {
    model_table::local_name("clickup", tool)
}

type Args = Map<String, Value>;

fn flag(item: &Value, key: &str) -> bool {
    item.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// `{arg: item[key]}` for each item that has a non-empty string `key`.
fn ids<'v>(chosen: impl Iterator<Item = &'v Value>, key: &str, arg: &str) -> Vec<Args> {
    chosen
        .filter_map(|item| item.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()))
        .map(|id| Map::from_iter([(arg.to_owned(), json!(id))]))
        .collect()
}

/// The arguments of a known read chain, built from the previous tool's result; `None` when the
/// pair is not one of the provider's chains.
fn chain_args(prev_tool: &str, next: &str, result: &Value) -> Option<Vec<Args>> {
    let out = match (prev_tool, next) {
        ("list_workspaces", "list_spaces") => {
            ids(items(result, "workspaces").iter(), "team_id", "team_id")
        }
        // Active spaces only: an archived one is rarely what the agent browses next.
        ("list_spaces", "list_folders" | "list_lists") => ids(
            items(result, "spaces").iter().filter(|s| !flag(s, "archived")),
            "space_id",
            "space_id",
        ),
        // Folders that hold lists.
        ("list_folders", "list_lists") => ids(
            items(result, "folders").iter().filter(|f| count(f, "list_count") != Some(0)),
            "folder_id",
            "folder_id",
        ),
        // Lists that hold tasks, the fullest first.
        ("list_lists", "list_tasks") => {
            let mut lists: Vec<&Value> = items(result, "lists")
                .iter()
                .filter(|l| count(l, "task_count") != Some(0) && !flag(l, "archived"))
                .collect();
            lists.sort_by_key(|l| std::cmp::Reverse(count(l, "task_count").unwrap_or(0)));
            ids(lists.into_iter(), "list_id", "list_id")
        }
        // Open tasks first: a closed one is rarely the next thing to read.
        ("list_tasks" | "search_tasks", "get_task") => {
            let tasks = items(result, "tasks");
            let ordered = tasks
                .iter()
                .filter(|t| !flag(t, "closed"))
                .chain(tasks.iter().filter(|t| flag(t, "closed")));
            ids(ordered, "task_id", "task_id")
        }
        ("get_task", "list_task_comments") => ids(std::iter::once(result), "task_id", "task_id"),
        // Only a task that has checklists.
        ("get_task", "list_checklists") => ids(
            std::iter::once(result).filter(|t| !items(t, "checklists").is_empty()),
            "task_id",
            "task_id",
        ),
        // Open subtasks first, as for listings.
        ("list_subtasks", "get_task") => {
            let subtasks = items(result, "subtasks");
            let ordered = subtasks
                .iter()
                .filter(|t| !flag(t, "closed"))
                .chain(subtasks.iter().filter(|t| flag(t, "closed")));
            ids(ordered, "task_id", "task_id")
        }
        // Only a timer on a task.
        ("get_running_timer", "get_task") => {
            ids(std::iter::once(result).filter(|t| flag(t, "running")), "task_id", "task_id")
        }
        // Goals still in progress, the least advanced first.
        ("list_goals", "get_goal") => {
            let mut goals: Vec<&Value> = items(result, "goals")
                .iter()
                .filter(|g| !flag(g, "archived") && count(g, "percent_completed") != Some(100))
                .collect();
            goals.sort_by_key(|g| count(g, "percent_completed").unwrap_or(0));
            ids(goals.into_iter(), "goal_id", "goal_id")
        }
        // The tasks behind key results not yet met.
        ("get_goal", "get_task") => items(result, "key_results")
            .iter()
            .filter(|k| !flag(k, "completed"))
            .flat_map(|k| items(k, "task_ids"))
            .filter_map(Value::as_str)
            .map(|id| Map::from_iter([("task_id".to_owned(), json!(id))]))
            .collect(),
        _ => return None,
    };
    Some(out.into_iter().take(MAX_PROJECTIONS_PER_LINK).collect())
}

impl ToolEnricher for ClickUp {
    fn value_model(&self, tool: &str) -> Option<ValueModelLayer> {
        model(tool).map(|m| m.layer(Some(&self.host)))
    }

    fn project_args(&self, prev_tool: &str, prev_result: &Value, link: &FollowUpLink) -> Vec<Args> {
        let (prev_tool, next) = (local_name(prev_tool), local_name(&link.tool));
        // The provider's own chain, unless the user re-pointed the link's projection.
        let customised = model_table::is_customised(MODELS, "clickup", prev_tool, link);
        if !customised {
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
    use crate::{goals, hierarchy, relations, tasks, time, ClickUpConfig};
    use SideEffectClass::ReadOnly;

    fn fixture(name: &str) -> String {
        let path = format!("{}/../../tests/data/clickup/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn wire<T: serde::de::DeserializeOwned>(name: &str) -> T {
        wire_str(&fixture(name))
    }

    fn wire_str<T: serde::de::DeserializeOwned>(json: &str) -> T {
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"))
    }

    fn clickup(base_url: Option<&str>) -> ClickUp {
        ClickUp::new(ClickUpConfig { base_url: base_url.map(str::to_owned), ..Default::default() })
            .unwrap()
    }

    fn link(prev: &str, next: &str) -> FollowUpLink {
        let layer = clickup(None).value_model(prev).unwrap();
        layer.follow_up.unwrap().into_iter().find(|l| l.tool == next).unwrap()
    }

    fn project(prev: &str, result: &impl Serialize, next: &str) -> Vec<Value> {
        let result = serde_json::to_value(result).unwrap();
        clickup(None)
            .project_args(prev, &result, &link(prev, next))
            .into_iter()
            .map(Value::Object)
            .collect()
    }

    #[test]
    fn every_tool_has_a_model_and_no_other_name_does() {
        let cu = clickup(None);
        let tools = ClickUp::tools();
        assert_eq!(tools.len(), 28, "{:?}", tools.iter().map(|t| &t.name).collect::<Vec<_>>());
        for tool in &tools {
            let layer =
                cu.value_model(&tool.name).unwrap_or_else(|| panic!("{} has no model", tool.name));
            layer.validate().unwrap_or_else(|e| panic!("{}: {e}", tool.name));
            assert!(tool.group.is_some(), "{} has no group", tool.name);
        }
        assert_eq!(MODELS.len(), tools.len(), "a model for a tool that does not exist");
        assert!(cu.value_model("no_such_tool").is_none());
        assert!(cu.value_model("get_issue").is_none(), "another provider's tool");
        assert!(cu.value_model("clickup.get_task").is_some(), "qualified names resolve too");
    }

    #[test]
    fn follow_ups_and_invalidations_name_tools_that_exist() {
        let cu = clickup(None);
        let names: Vec<String> = ClickUp::tools().into_iter().map(|t| t.name).collect();
        for tool in &names {
            let layer = cu.value_model(tool).unwrap();
            for l in layer.follow_up.iter().flatten() {
                assert!(names.contains(&l.tool), "{tool} → {} does not exist", l.tool);
            }
            for t in layer.invalidates.iter().flatten() {
                assert!(names.contains(t), "{tool} invalidates unknown {t}");
            }
        }
    }

    #[test]
    fn writes_are_never_speculated_after_merging_with_the_built_in_priors() {
        let cu = clickup(None);
        let writes = [
            "create_task",
            "update_task",
            "add_task_comment",
            "create_checklist",
            "add_checklist_item",
            "update_checklist_item",
            "add_task_tag",
            "remove_task_tag",
            "set_custom_field",
            "add_dependency",
            "start_timer",
            "stop_timer",
        ];
        for tool in ClickUp::tools() {
            let (rule, prior) = prior_for(&tool.name);
            let provider = cu.value_model(&tool.name).unwrap();
            let merged = resolve(&[
                (LayerSource::BuiltIn(rule), &prior),
                (LayerSource::Provider("clickup".into()), &provider),
            ])
            .model;
            if writes.contains(&tool.name.as_str()) {
                assert_eq!(merged.side_effect_class, MutatesExternal, "{}", tool.name);
                assert!(!merged.may_speculate(), "{} may be speculated", tool.name);
                assert_eq!(merged.cost_model.freshness_ttl_s, Some(0), "{} is cached", tool.name);
                assert!(!merged.invalidates.is_empty(), "{} invalidates nothing", tool.name);
            } else {
                assert_eq!(merged.side_effect_class, ReadOnly, "{}", tool.name);
                assert!(merged.may_speculate(), "{} cannot be speculated", tool.name);
            }
        }
        let comment = cu.value_model("add_task_comment").unwrap();
        assert_eq!(comment.invalidates.unwrap(), ["list_task_comments"]);
        let update = cu.value_model("update_task").unwrap();
        assert!(update.invalidates.unwrap().contains(&"get_task".to_owned()));
    }

    #[test]
    fn rate_limit_host_is_the_configured_host() {
        let args = json!({"task_id": "86cv5pkvr"});
        assert_eq!(
            clickup(None).rate_limit_host("get_task", &args).as_deref(),
            Some("api.clickup.com")
        );
        let proxied = clickup(Some("https://clickup-proxy.example.com:8443/api/v2"));
        assert_eq!(
            proxied.rate_limit_host("list_tasks", &args).as_deref(),
            Some("clickup-proxy.example.com")
        );
        assert_eq!(
            proxied.value_model("get_task").unwrap().rate_limit_host.as_deref(),
            Some("clickup-proxy.example.com")
        );
    }

    #[test]
    fn the_hierarchy_leads_down_to_the_lists_that_hold_tasks() {
        let workspaces = hierarchy::workspace_list(wire("teams.json"));
        assert_eq!(
            project("list_workspaces", &workspaces, "list_spaces"),
            [json!({"team_id": "9012345678"})]
        );
        let spaces = hierarchy::space_list("9012345678".into(), wire("spaces.json"));
        let expected = [json!({"space_id": "790"}), json!({"space_id": "791"})];
        assert_eq!(project("list_spaces", &spaces, "list_folders"), expected);
        assert_eq!(
            project("list_spaces", &spaces, "list_lists"),
            expected,
            "the archived space 792 is left out"
        );
        let folders = hierarchy::folder_list("790".into(), wire("folders.json"));
        assert_eq!(
            project("list_folders", &folders, "list_lists"),
            [json!({"folder_id": "457"})],
            "the empty folder 458 is left out"
        );
        let lists = hierarchy::space_lists(
            "790".into(),
            wire("folderless_lists.json"),
            wire("folders.json"),
        );
        assert_eq!(
            project("list_lists", &lists, "list_tasks"),
            [json!({"list_id": "124"}), json!({"list_id": "901"})],
            "the fullest list first, empty lists left out"
        );
    }

    #[test]
    fn task_listings_lead_to_open_tasks_first_and_at_most_three() {
        let page = tasks::task_list("901".into(), 0, wire("list_tasks.json"));
        let calls = project("list_tasks", &page, "get_task");
        assert_eq!(
            calls,
            [
                json!({"task_id": "86cv5pkvr"}),
                json!({"task_id": "86cv5pkw2"}),
                json!({"task_id": "86cv5pkw7"}),
            ],
            "the closed 86cv5pkvz comes last and is cut by the cap of three"
        );
        let found = tasks::task_search("9012345678".into(), 0, wire("team_tasks.json"));
        assert_eq!(project("search_tasks", &found, "get_task")[0], json!({"task_id": "86cv5pkvr"}));
        let task = tasks::task_detail(wire("task.json"));
        assert_eq!(
            project("get_task", &task, "list_task_comments"),
            [json!({"task_id": "86cv5pkvr"})]
        );
    }

    #[test]
    fn a_task_leads_to_its_checklists_only_when_it_has_some() {
        let task = tasks::task_detail(wire("task.json"));
        assert_eq!(
            project("get_task", &task, "list_checklists"),
            [json!({"task_id": "86cv5pkvr"})]
        );
        let mut bare = serde_json::to_value(&task).unwrap();
        bare.as_object_mut().unwrap().remove("checklists");
        assert!(project("get_task", &bare, "list_checklists").is_empty());
    }

    #[test]
    fn subtasks_lead_to_open_ones_first() {
        let subtasks = relations::subtask_list("86cv5pkvr".into(), wire("task.json"));
        assert_eq!(
            project("list_subtasks", &subtasks, "get_task"),
            [json!({"task_id": "86cv5pkw7"}), json!({"task_id": "86cv5pkw9"})],
            "the closed 86cv5pkw9 comes last"
        );
    }

    #[test]
    fn a_running_timer_leads_to_its_task_and_no_timer_to_nothing() {
        let running = time::timer("9012345678".into(), wire("timer_running.json"), 0);
        assert_eq!(
            project("get_running_timer", &running, "get_task"),
            [json!({"task_id": "86cv5pkvr"})]
        );
        let idle = time::timer("9012345678".into(), wire_str(r#"{"data": null}"#), 0);
        assert!(project("get_running_timer", &idle, "get_task").is_empty());
    }

    #[test]
    fn goals_lead_to_unfinished_goals_and_then_to_the_tasks_of_unmet_key_results() {
        let goals = goals::goal_list("9012345678".into(), wire("goals.json"));
        assert_eq!(
            project("list_goals", &goals, "get_goal"),
            [json!({"goal_id": "e53a033c-900e-462d-a849-4a216b06d930"})],
            "the goal at 100 % is left out"
        );
        let goal = goals::goal_detail(wire("goal.json"));
        assert_eq!(project("get_goal", &goal, "get_task"), [json!({"task_id": "86cv5pkvr"})]);
    }

    #[test]
    fn customised_and_foreign_links_fall_back_to_the_generic_projection() {
        let cu = clickup(None);
        let page = serde_json::to_value(tasks::task_list("901".into(), 0, wire("list_tasks.json")))
            .unwrap();
        let custom = FollowUpLink {
            tool: "clickup.get_task".into(),
            probability: 0.5,
            projection: Some("$.tasks[1].task_id".into()),
            projection_arg: Some("task_id".into()),
        };
        assert_eq!(
            cu.project_args("clickup.list_tasks", &page, &custom),
            [json!({"task_id": "86cv5pkvz"}).as_object().unwrap().clone()]
        );
        let elsewhere = FollowUpLink {
            tool: "github.search_issues".into(),
            probability: 0.2,
            projection: Some("$.tasks[0].name".into()),
            projection_arg: Some("q".into()),
        };
        assert_eq!(
            cu.project_args("list_tasks", &page, &elsewhere),
            [json!({"q": "Fix login redirect loop"}).as_object().unwrap().clone()]
        );
    }
}
