//! The enrichment algorithms over the bundled providers' tools: the offline embedder ranks them
//! as a user would, dataflow finds the identifier flows a chain of calls relies on (and none of
//! the nonsense), neighbours and samplers work over the result.
//!
//! Core cannot load plugins, so [`registry`] rebuilds the 61 tools of the five providers from a
//! compact table written from `quiver tools show NAME --json`: the real names, types, optionality
//! and nesting, with descriptions cut to their first words. Schemas are built in the shapes
//! schemars emits (`type: [T, "null"]` for options, array items as `$ref` into `$defs`).

use std::collections::{BTreeMap, BTreeSet};

use expect_test::{expect, Expect};
use quiver_core::enrich::dataflow::{compute, DataflowIndex, DataflowOptions};
use quiver_core::enrich::embed::{cosine, EmbeddingsArtifact, LexicalEmbedder};
use quiver_core::enrich::neighbors::compute_neighbors;
use quiver_core::enrich::params::{outputs, ParamType};
use quiver_core::enrich::sample::{sample, Scenario, Strategy};
use quiver_core::ToolSpec;
use serde_json::{json, Map, Value};

fn dataflow(reg: &BTreeMap<String, ToolSpec>) -> DataflowIndex {
    let tools: Vec<(&str, &ToolSpec)> = reg.iter().map(|(n, s)| (n.as_str(), s)).collect();
    compute(&tools, &DataflowOptions::default())
}

/// The qualified names of the `k` tools whose embedding is closest to `query`, best first.
fn ranked(query: &str, k: usize) -> Vec<String> {
    let e = LexicalEmbedder::new();
    let q = e.embed(query);
    let mut scored: Vec<(f32, String)> = registry()
        .iter()
        .map(|(name, spec)| (cosine(&q, &e.embed_tool(name, spec).tool), name.clone()))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(k).map(|(_, n)| n).collect()
}

fn similarity(query: &str, tool: &str) -> f32 {
    let e = LexicalEmbedder::new();
    let reg = registry();
    cosine(&e.embed(query), &e.embed_tool(tool, &reg[tool]).tool)
}

#[test]
fn a_query_lands_on_the_tool_a_user_means() {
    let cases = [
        ("list open pull requests", "github.list_pull_requests"),
        ("show me the open PRs of the repo", "github.list_pull_requests"),
        ("merge request comments", "gitlab.list_merge_request_discussions"),
        ("which jobs failed in the pipeline", "gitlab.list_pipeline_jobs"),
        ("log output of a failed GitHub Actions job", "github.get_job_logs"),
        ("what was said in yesterday's meeting", "fireflies.get_transcript"),
        ("find call recordings about pricing", "fireflies.search_transcripts"),
        ("move the ticket to done", "jira.transition_issue"),
        ("current sprint of the board", "jira.list_sprints"),
        ("time tracked on clickup cards this week", "clickup.list_time_entries"),
        ("files changed in the merge request", "gitlab.get_merge_request_changes"),
    ];
    let misses: Vec<String> = cases
        .iter()
        .filter_map(|(query, tool)| {
            let top = ranked(query, 3);
            (!top.iter().any(|t| t == tool)).then(|| format!("{query:?}: {tool} not in {top:?}"))
        })
        .collect();
    assert!(misses.is_empty(), "{misses:#?}");
}

#[test]
fn pull_requests_query_prefers_github_pulls_to_jira_issues() {
    let pulls = similarity("list open pull requests", "github.list_pull_requests");
    let jira = similarity("list open pull requests", "jira.get_issue");
    assert!(pulls > jira + 0.1, "pulls {pulls} vs jira {jira}");
}

#[test]
fn merge_request_comments_reach_discussions_through_synonyms() {
    // Neither `comment` nor `merge request comments` is in the discussions tool's name: the
    // alias table links comment ↔ discussion/note and the description says merge request.
    let discussions = similarity("merge request comments", "gitlab.list_merge_request_discussions");
    let github = similarity("merge request comments", "github.list_issue_comments");
    let pipelines = similarity("merge request comments", "gitlab.list_pipelines");
    assert!(discussions > github && discussions > pipelines, "{discussions} {github} {pipelines}");
    assert!(
        similarity("MR notes", "gitlab.list_merge_request_discussions")
            > similarity("MR notes", "jira.list_sprints")
    );
}

fn out_edges(index: &DataflowIndex, tool: &str) -> Vec<(String, String, String)> {
    index.out[tool]
        .iter()
        .map(|e| (e.tool.clone(), e.from_param.clone(), e.to_param.clone()))
        .collect()
}

#[test]
fn identifier_flows_of_the_real_providers_are_edges() {
    let index = dataflow(&registry());
    let expected = [
        ("github.list_issues", "github.get_issue", "issues[].number", "number"),
        ("github.search_issues", "github.get_issue", "items[].number", "number"),
        (
            "github.list_pull_requests",
            "github.get_pull_request",
            "pull_requests[].number",
            "number",
        ),
        (
            "github.list_pull_requests",
            "github.list_pull_request_files",
            "pull_requests[].number",
            "number",
        ),
        ("github.list_workflow_runs", "github.list_workflow_jobs", "workflow_runs[].id", "run_id"),
        ("github.list_workflow_jobs", "github.get_job_logs", "jobs[].id", "job_id"),
        ("gitlab.list_issues", "gitlab.get_issue", "issues[].iid", "iid"),
        ("gitlab.list_merge_requests", "gitlab.get_merge_request", "merge_requests[].iid", "iid"),
        ("gitlab.list_pipelines", "gitlab.list_pipeline_jobs", "pipelines[].id", "pipeline_id"),
        ("gitlab.list_pipeline_jobs", "gitlab.get_job_log", "jobs[].id", "job_id"),
        (
            "gitlab.get_merge_request",
            "gitlab.list_pipeline_jobs",
            "head_pipeline.id",
            "pipeline_id",
        ),
        ("jira.search_issues", "jira.get_issue", "issues[].key", "key"),
        ("jira.list_boards", "jira.list_sprints", "boards[].id", "board_id"),
        ("clickup.list_tasks", "clickup.get_task", "tasks[].task_id", "task_id"),
        ("clickup.list_lists", "clickup.list_tasks", "lists[].list_id", "list_id"),
        ("clickup.list_workspaces", "clickup.list_spaces", "workspaces[].team_id", "team_id"),
        ("fireflies.list_transcripts", "fireflies.get_transcript", "transcripts[].id", "id"),
        ("fireflies.search_transcripts", "fireflies.get_transcript", "transcripts[].id", "id"),
    ];
    let missing: Vec<String> = expected
        .iter()
        .filter(|(from, to, fp, tp)| {
            !out_edges(&index, from).contains(&(to.to_string(), fp.to_string(), tp.to_string()))
        })
        .map(|(from, to, fp, tp)| {
            format!("{from} {fp} -> {to} {tp}: have {:?}", out_edges(&index, from))
        })
        .collect();
    assert!(missing.is_empty(), "{missing:#?}");
    // The listing's own identifier is the best successor, not a scope echo or a timestamp.
    assert_eq!(index.out["github.list_issues"][0].tool, "github.get_issue");
    assert_eq!(index.out["github.list_pull_requests"][0].tool, "github.get_pull_request");
    assert_eq!(index.out["gitlab.list_merge_requests"][0].tool, "gitlab.get_merge_request");
    assert_eq!(index.out["jira.search_issues"][0].tool, "jira.get_issue");
}

#[test]
fn flags_paging_and_foreign_identifiers_feed_nothing() {
    let reg = registry();
    let index = dataflow(&reg);
    let booleans: BTreeSet<(String, String)> = reg
        .iter()
        .flat_map(|(name, spec)| {
            outputs(spec)
                .into_iter()
                .filter(|p| p.ty == ParamType::Boolean)
                .map(move |p| (name.clone(), p.path))
        })
        .collect();
    for (from, edges) in &index.out {
        for e in edges {
            assert!(!booleans.contains(&(from.clone(), e.from_param.clone())), "{from} {e:?}");
            assert!(
                !["page", "per_page", "limit", "skip", "start_at", "max_results"]
                    .contains(&e.to_param.as_str()),
                "{from} {e:?}"
            );
            assert!(!e.from_param.contains("next_"), "{from} {e:?}");
            let provider = |t: &str| t.split('.').next().unwrap().to_owned();
            if provider(from) != provider(&e.tool) {
                assert!(
                    !e.to_param.ends_with("id") && e.to_param != "number" && e.to_param != "key",
                    "{from} {e:?}"
                );
            }
        }
    }
}

#[test]
fn the_index_is_bounded_mirrored_and_free_of_self_edges() {
    let reg = registry();
    let opts = DataflowOptions { max_neighbors: 4, ..DataflowOptions::default() };
    let tools: Vec<(&str, &ToolSpec)> = reg.iter().map(|(n, s)| (n.as_str(), s)).collect();
    let index = compute(&tools, &opts);
    assert_eq!(index.out.len(), reg.len());
    assert_eq!(index.r#in.len(), reg.len());
    let mut mirrored = 0;
    for (from, edges) in &index.out {
        assert!(edges.len() <= 4, "{from}: {}", edges.len());
        assert!(edges.windows(2).all(|w| w[0].score >= w[1].score), "{from} not best first");
        for e in edges {
            assert_ne!(&e.tool, from);
            assert!(e.score >= opts.min_score && e.score <= 1.0 + 1e-6, "{e:?}");
            let back = index.r#in[&e.tool].iter().find(|b| &b.tool == from).expect("mirror edge");
            assert_eq!(
                (&back.from_param, &back.to_param, back.score),
                (&e.from_param, &e.to_param, e.score)
            );
            mirrored += 1;
        }
    }
    assert_eq!(mirrored, index.r#in.values().map(Vec::len).sum::<usize>());
    assert!(index.edge_count() > 100, "{}", index.edge_count());
    // Input order does not matter, and JSON keeps the `out`/`in` names.
    let reversed: Vec<(&str, &ToolSpec)> = tools.iter().rev().copied().collect();
    assert_eq!(compute(&reversed, &opts), index);
    let json = serde_json::to_value(&index).unwrap();
    assert!(json.get("out").is_some() && json.get("in").is_some());
}

fn check_edges(index: &DataflowIndex, tool: &str, expect: Expect) {
    let text: String = index.out[tool]
        .iter()
        .map(|e| format!("{} -> {} {} ({:.2})\n", e.from_param, e.tool, e.to_param, e.score))
        .collect();
    expect.assert_eq(&text);
}

#[test]
fn best_successors_of_listings() {
    let index = dataflow(&registry());
    check_edges(
        &index,
        "github.list_pull_requests",
        expect![[r#"
        pull_requests[].number -> github.get_pull_request number (1.00)
        pull_requests[].number -> github.list_pull_request_reviews number (0.81)
        pull_requests[].number -> github.list_pull_request_files number (0.81)
        pull_requests[].number -> github.list_pull_request_review_comments number (0.70)
        pull_requests[].title -> github.create_issue title (0.55)
        pull_requests[].state -> github.list_issues state (0.53)
        pull_requests[].head_repo -> github.list_workflow_runs repo (0.51)
        pull_requests[].head_repo -> github.get_issue repo (0.49)
        pull_requests[].head_repo -> github.get_file_contents repo (0.48)
        pull_requests[].head_repo -> github.list_workflow_jobs repo (0.48)
    "#]],
    );
    check_edges(
        &index,
        "gitlab.list_pipelines",
        expect![[r#"
        pipelines[].id -> gitlab.list_pipeline_jobs pipeline_id (0.96)
        project -> gitlab.get_project project (0.73)
        project -> gitlab.retry_job project (0.69)
        project -> gitlab.search project (0.63)
        project -> gitlab.get_job_log project (0.62)
        project -> gitlab.get_merge_request project (0.60)
        project -> gitlab.get_issue project (0.59)
        project -> gitlab.list_merge_requests project (0.54)
        project -> gitlab.get_merge_request_approvals project (0.54)
        project -> gitlab.list_merge_request_discussions project (0.54)
    "#]],
    );
    check_edges(
        &index,
        "fireflies.search_transcripts",
        expect![[r#"
        transcripts[].id -> fireflies.get_transcript id (0.95)
        transcripts[].participants[] -> fireflies.list_transcripts participants (0.78)
    "#]],
    );
}

fn embeddings(reg: &BTreeMap<String, ToolSpec>) -> EmbeddingsArtifact {
    let e = LexicalEmbedder::new();
    reg.iter().map(|(n, s)| (n.clone(), e.embed_tool(n, s))).collect()
}

#[test]
fn neighbours_follow_outputs_into_inputs() {
    let mut reg = registry();
    reg.get_mut("github.get_file_contents").unwrap().output_schema = None;
    let n = compute_neighbors(&embeddings(&reg), 5);
    assert_eq!(n.len(), reg.len());
    assert!(n["github.get_file_contents"].is_empty(), "no outputs, no successors");
    for (from, list) in &n {
        assert!(list.len() <= 5);
        assert!(list.iter().all(|x| &x.tool != from && x.score > 0.0));
        assert!(list.windows(2).all(|w| w[0].score >= w[1].score));
    }
    let top = |t: &str| n[t].iter().map(|x| x.tool.clone()).collect::<Vec<_>>();
    assert!(
        top("fireflies.list_transcripts").contains(&"fireflies.get_transcript".to_owned()),
        "{:?}",
        top("fireflies.list_transcripts")
    );
    assert!(
        top("gitlab.list_merge_requests").iter().any(|t| t.starts_with("gitlab.")),
        "{:?}",
        top("gitlab.list_merge_requests")
    );
    assert_eq!(compute_neighbors(&embeddings(&reg), 5), n);
}

fn names(reg: &BTreeMap<String, ToolSpec>) -> Vec<String> {
    reg.keys().cloned().collect()
}

/// Every feed of a scenario is an edge of the forward index, from an earlier step.
fn assert_feeds_are_edges(index: &DataflowIndex, s: &Scenario) {
    for f in &s.feeds {
        assert!(f.from_step < f.to_step, "{s:?}");
        let (from, to) = (&s.tools[f.from_step], &s.tools[f.to_step]);
        let edge = index.out[from].iter().find(|e| &e.tool == to).expect("feed is an edge");
        assert_eq!(
            (&edge.from_param, &edge.to_param, edge.score),
            (&f.from_param, &f.to_param, f.score)
        );
    }
}

#[test]
fn samplers_draw_real_edges_and_repeat_with_their_seed() {
    let reg = registry();
    let index = dataflow(&reg);
    let tools = names(&reg);
    for strategy in Strategy::ALL {
        let a = sample(strategy, &tools, Some(&index), 12, 42).unwrap();
        assert_eq!(a.len(), 12, "{strategy:?}");
        assert_eq!(a, sample(strategy, &tools, Some(&index), 12, 42).unwrap(), "{strategy:?}");
        assert_ne!(a, sample(strategy, &tools, Some(&index), 12, 43).unwrap(), "{strategy:?}");
        let distinct: BTreeSet<&Vec<String>> = a.iter().map(|s| &s.tools).collect();
        assert_eq!(distinct.len(), a.len());
        for s in &a {
            assert_eq!(s.strategy, strategy);
            let unique: BTreeSet<&String> = s.tools.iter().collect();
            assert_eq!(unique.len(), s.tools.len(), "{s:?}");
            assert_feeds_are_edges(&index, s);
            let n = s.tools.len();
            match strategy {
                Strategy::Random => assert!((2..=4).contains(&n) && s.feeds.is_empty()),
                Strategy::Chain => {
                    assert!((2..=4).contains(&n), "{s:?}");
                    assert_eq!(s.feeds.len(), n - 1);
                    assert!(s
                        .feeds
                        .iter()
                        .enumerate()
                        .all(|(i, f)| f.from_step == i && f.to_step == i + 1));
                }
                Strategy::FanOut => {
                    assert!((3..=4).contains(&n), "{s:?}");
                    assert!(s.feeds.iter().all(|f| f.from_step == 0));
                    assert_eq!(s.feeds.len(), n - 1);
                }
                Strategy::FanIn => {
                    assert!((3..=4).contains(&n), "{s:?}");
                    assert!(s.feeds.iter().all(|f| f.to_step == n - 1));
                    assert_eq!(s.feeds.len(), n - 1);
                }
                Strategy::Dag => {
                    assert!((3..=5).contains(&n), "{s:?}");
                    // Every step after the first is fed by some earlier step.
                    assert!((1..n).all(|step| s.feeds.iter().any(|f| f.to_step == step)), "{s:?}");
                }
            }
        }
    }
}

#[test]
fn samplers_stay_inside_the_given_tools() {
    let reg = registry();
    let index = dataflow(&reg);
    let gitlab: Vec<String> =
        names(&reg).into_iter().filter(|n| n.starts_with("gitlab.")).collect();
    for strategy in Strategy::ALL {
        for s in sample(strategy, &gitlab, Some(&index), 5, 1).unwrap() {
            assert!(s.tools.iter().all(|t| t.starts_with("gitlab.")), "{s:?}");
        }
    }
    // Two unrelated tools: a chain cannot be drawn, and that is an empty answer, not an error.
    let lonely = vec!["fireflies.get_transcript".to_owned(), "github.get_file_contents".to_owned()];
    assert!(sample(Strategy::Chain, &lonely, Some(&index), 3, 1).unwrap().is_empty());
    // Random scenarios need no edge; two tools make two orders.
    assert_eq!(sample(Strategy::Random, &lonely, Some(&index), 3, 1).unwrap().len(), 2);
}

#[test]
fn samplers_that_need_dataflow_say_which_enrichment_to_add() {
    let tools = names(&registry());
    let err = sample(Strategy::Chain, &tools, None, 3, 1).unwrap_err();
    assert_eq!(
        err.to_string(),
        "sampler 'chain' requires the 'dataflow' artifact; add [[enrichments]] type = \"dataflow\""
    );
    for strategy in [Strategy::FanOut, Strategy::FanIn, Strategy::Dag] {
        let err = sample(strategy, &tools, None, 3, 1).unwrap_err().to_string();
        assert!(err.starts_with(&format!("sampler '{}' requires", strategy.name())), "{err}");
    }
    assert_eq!(sample(Strategy::Random, &tools, None, 3, 1).unwrap().len(), 3);
    assert_eq!(Strategy::from_name("fan_out"), Some(Strategy::FanOut));
    assert_eq!(serde_json::to_value(Strategy::FanIn).unwrap(), json!("fan_in"));
}

/// The bundled providers' tools by qualified name.
fn registry() -> BTreeMap<String, ToolSpec> {
    TOOLS.iter().map(|t| (t.0.to_owned(), spec(t))).collect()
}

type Row = (&'static str, &'static str, &'static str, &'static str);

const fn tool(
    name: &'static str,
    description: &'static str,
    inputs: &'static str,
    outputs: &'static str,
) -> Row {
    (name, description, inputs, outputs)
}

/// One line: `path: type[?] description`, `?` marking an optional input or a nullable output.
fn lines(text: &str) -> Vec<(String, String, bool, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (path, rest) = l.split_once(": ").expect("path: type");
            let (ty, desc) = rest.split_once(' ').unwrap_or((rest, ""));
            let optional = ty.ends_with('?');
            (path.to_owned(), ty.trim_end_matches('?').to_owned(), optional, desc.to_owned())
        })
        .collect()
}

fn leaf(ty: &str, optional: bool, desc: &str) -> Value {
    let mut v = if optional { json!({"type": [ty, "null"]}) } else { json!({"type": ty}) };
    if !desc.is_empty() {
        v["description"] = json!(desc);
    }
    v
}

fn spec(row: &Row) -> ToolSpec {
    let (qualified, description, inputs, outputs) = *row;
    let name = qualified.split_once('.').expect("qualified").1;
    let mut props = Map::new();
    let mut required = Vec::new();
    for (path, ty, optional, desc) in lines(inputs) {
        let prop = match path.strip_suffix("[]") {
            Some(name) => {
                let mut p = json!({"items": {"type": ty}, "description": desc});
                p["type"] = if optional { json!(["array", "null"]) } else { json!("array") };
                (name.to_owned(), p)
            }
            None => (path.clone(), leaf(&ty, optional, &desc)),
        };
        if !optional {
            required.push(prop.0.clone());
        }
        props.insert(prop.0, prop.1);
    }
    let input_schema = json!({"type": "object", "properties": props, "required": required});
    let output_schema = (!outputs.trim().is_empty()).then(|| {
        let mut defs = Map::new();
        let mut root = json!({"type": "object", "properties": {}});
        for (path, ty, optional, desc) in lines(outputs) {
            insert(&mut root, &mut defs, &path, leaf(&ty, optional, &desc));
        }
        root["$defs"] = Value::Object(defs);
        root
    });
    ToolSpec {
        name: name.to_owned(),
        group: None,
        description: description.to_owned(),
        input_schema,
        output_schema,
        sensitive_params: vec![],
    }
}

/// Puts `value` at `path` (`a.b`, `items[].c`, `tags[]`), array items of objects as
/// `$ref: #/$defs/<Field>Item` the way schemars names its definitions.
fn insert(node: &mut Value, defs: &mut Map<String, Value>, path: &str, value: Value) {
    let (head, rest) = match path.find(['.', '[']) {
        Some(i) => (&path[..i], &path[i..]),
        None => (path, ""),
    };
    let props = node["properties"].as_object_mut().expect("object node");
    if rest.is_empty() {
        props.insert(head.to_owned(), value);
    } else if rest == "[]" {
        let desc = value.get("description").cloned().unwrap_or(json!(""));
        let ty = value["type"].clone();
        let item_ty = ty.as_array().map_or(ty.clone(), |t| t[0].clone());
        props.insert(
            head.to_owned(),
            json!({"type": "array", "items": {"type": item_ty}, "description": desc}),
        );
    } else if let Some(sub) = rest.strip_prefix("[].") {
        let def = format!("{}{}Item", head[..1].to_uppercase(), &head[1..]);
        props.entry(head.to_owned()).or_insert_with(
            || json!({"type": "array", "items": {"$ref": format!("#/$defs/{def}")}}),
        );
        let mut item =
            defs.remove(&def).unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        insert(&mut item, defs, sub, value);
        defs.insert(def, item);
    } else {
        let sub = rest.strip_prefix('.').expect("a field path");
        let child = props
            .entry(head.to_owned())
            .or_insert_with(|| json!({"type": "object", "properties": {}}));
        insert(child, defs, sub, value);
    }
}

const TOOLS: &[Row] = &[
    tool(
        "clickup.add_task_comment",
        "Add a comment to a ClickUp task, optionally assigned to a user as an action item",
        r"
        assignee: integer? Assign the comment (as an action
        comment_text: string The comment's text
        notify_all: boolean? Notify everyone, the author included (default
        task_id: string The task id, or a custom
        team_id: string? The workspace id
        ",
        r"
        comment_id: string? The new comment's id
        date: string?
        task_id: string The task commented on
        ",
    ),
    tool(
        "clickup.create_task",
        "Create a task in a ClickUp list, optionally with a Markdown description, status, priority, assignees, tags, dates or a parent task",
        r"
        assignees[]: integer? User ids to assign (user_id from
        description: string? The description, in Markdown
        due_date: string? Due date: ISO 8601 (a date,
        list_id: string The list to create the task
        name: string The task's name
        notify_all: boolean? Notify everyone, the creator included (default
        parent: string? Make it a subtask of this
        priority: string? urgent, high, normal or low
        start_date: string? Start date: ISO 8601 or Unix
        status: string? The status name (one of the
        tags[]: string? Tag names to set
        ",
        r"
        assignees[]: string
        custom_id: string? The custom task id, when the
        due_date: string?
        list_id: string? The list it is in
        name: string Its name
        priority: string?
        status: string?
        tags[]: string
        task_id: string The task id
        url: string?
        ",
    ),
    tool(
        "clickup.get_task",
        "Get one ClickUp task: description, status, people, dates, time estimate and tracked time, custom fields by name, checklists and subtasks",
        r"
        include_subtasks: boolean? Include the task's subtasks (default true)
        task_id: string The task id (task_id from a
        team_id: string? The workspace id
        ",
        r"
        archived: boolean
        assignees[]: string
        checklists[].name: string Its name
        checklists[].resolved: integer
        checklists[].total: integer
        creator: string?
        custom_fields: object
        custom_id: string? The custom task id (DEV-42), when
        date_closed: string?
        date_created: string?
        date_updated: string?
        dependencies: integer
        description: string?
        due_date: string?
        folder: string?
        linked_tasks: integer
        list_id: string? The list
        list_name: string? The list's name
        name: string The name
        parent: string?
        points: number?
        priority: string?
        space_id: string? The space
        start_date: string?
        status: string?
        status_type: string?
        subtasks[].assignees[]: string
        subtasks[].closed: boolean
        subtasks[].name: string Its name
        subtasks[].status: string
        subtasks[].task_id: string Its task id
        tags[]: string
        task_id: string The task id
        team_id: string? The workspace
        time_estimate: string?
        time_spent: string?
        url: string?
        ",
    ),
    tool(
        "clickup.list_folders",
        "List the folders of a ClickUp space with their task counts and list names",
        r"
        archived: boolean? List archived folders instead of active
        space_id: string The space id (space_id from list_spaces)
        ",
        r"
        folders[].archived: boolean
        folders[].folder_id: string The folder id, for list_lists
        folders[].list_count: integer
        folders[].lists[]: string
        folders[].name: string Its name
        folders[].task_count: integer
        space_id: string The space
        ",
    ),
    tool(
        "clickup.list_lists",
        "List ClickUp lists with their ids and task counts: every list of a space (space_id",
        r"
        archived: boolean? List archived lists instead of active
        folder_id: string? The folder id (folder_id from list_folders):
        space_id: string? The space id (space_id from list_spaces):
        ",
        r"
        folder_id: string? The folder asked about, if any
        lists[].archived: boolean
        lists[].due_date: string
        lists[].folder: string
        lists[].list_id: string The list id, for list_tasks and
        lists[].name: string Its name
        lists[].statuses[]: string
        lists[].task_count: integer
        space_id: string? The space asked about, if any
        ",
    ),
    tool(
        "clickup.list_spaces",
        "List the spaces of a ClickUp workspace with their task statuses and enabled features",
        r"
        archived: boolean? List archived spaces instead of active
        team_id: string The workspace id (team_id from list_workspaces),
        ",
        r"
        spaces[].archived: boolean
        spaces[].features[]: string
        spaces[].multiple_assignees: boolean
        spaces[].name: string Its name
        spaces[].private: boolean
        spaces[].space_id: string The space id, for list_folders, list_lists
        spaces[].statuses[]: string
        team_id: string The workspace
        ",
    ),
    tool(
        "clickup.list_task_comments",
        "List the comments of a ClickUp task, newest first, 25 a page",
        r"
        start: integer? For the next (older) page: next_page.start
        start_id: string? For the next (older) page: next_page.start_id
        task_id: string The task id (task_id from a
        team_id: string? The workspace id
        ",
        r"
        comments[].assignee: string
        comments[].author: string
        comments[].comment_id: string The comment id
        comments[].date: string
        comments[].replies: integer
        comments[].resolved: boolean
        comments[].text: string
        next_page.start: integer
        next_page.start_id: string start_id: the oldest comment's id
        task_id: string The task
        ",
    ),
    tool(
        "clickup.list_tasks",
        "List the tasks of a ClickUp list (100 a page, from page 0) with status, assignees, priority, due date and tags",
        r"
        assignees[]: integer? Only tasks assigned to these user
        due_after: string? Only tasks due after this time:
        due_before: string? Only tasks due before this time
        include_closed: boolean? Include closed tasks (left out by
        include_subtasks: boolean? Include subtasks (left out by default)
        list_id: string The list id (list_id from list_lists)
        order_by: string? Order: created (ClickUp's default), updated, due_date
        page: integer? Page number, from 0
        reverse: boolean? Reverse the order
        statuses[]: string? Only tasks in these statuses, e.g
        tags[]: string? Only tasks with all of these
        updated_after: string? Only tasks updated after this time
        updated_before: string? Only tasks updated before this time
        ",
        r"
        list_id: string The list
        next_page: integer?
        page: integer
        tasks[].assignees[]: string
        tasks[].closed: boolean
        tasks[].custom_id: string The workspace's custom task id (DEV-42),
        tasks[].date_updated: string
        tasks[].due_date: string
        tasks[].name: string The name
        tasks[].parent: string
        tasks[].priority: string
        tasks[].status: string
        tasks[].tags[]: string
        tasks[].task_id: string The task id, for get_task, list_task_comments
        ",
    ),
    tool(
        "clickup.list_time_entries",
        "List the time tracked in a ClickUp workspace over a date range (the last 30 days by default), for the token's user or given assignees, optionally of one task, list,",
        r"
        assignees[]: integer? Only the entries of these user
        end_date: string? End of the range: ISO 8601
        folder_id: string? Only entries on tasks of this
        list_id: string? Only entries on tasks of this
        space_id: string? Only entries on tasks of this
        start_date: string? Start of the range: ISO 8601
        task_id: string? Only entries on this task
        team_id: string The workspace id (team_id from list_workspaces)
        ",
        r"
        by_user: object The time tracked per person
        end_date: string?
        entries[].billable: boolean
        entries[].custom_id: string The custom task id, when the
        entries[].description: string
        entries[].duration: string
        entries[].end: string
        entries[].list_name: string The task's list
        entries[].start: string
        entries[].tags[]: string
        entries[].task_id: string The task the time was tracked
        entries[].task_name: string The task's name
        entries[].task_status: string
        entries[].user: string Who tracked it
        entries_total: integer
        note: string?
        start_date: string?
        team_id: string The workspace
        total_duration: string
        ",
    ),
    tool(
        "clickup.list_workspaces",
        "List the ClickUp workspaces the token can reach (team_id for other tools), with their members' user ids and names",
        r"

        ",
        r"
        workspaces[].member_count: integer
        workspaces[].members[].user_id: integer The user id, as assignees filters
        workspaces[].members[].username: string
        workspaces[].name: string Its name
        workspaces[].team_id: string The workspace id, team_id in every
        ",
    ),
    tool(
        "clickup.search_tasks",
        "Find tasks across a ClickUp workspace, filtered by spaces, folders, lists, statuses, assignees, tags and due or update dates (100 a page, from page 0)",
        r"
        assignees[]: integer? Only tasks assigned to these user
        due_after: string? Only tasks due after this time:
        due_before: string? Only tasks due before this time:
        folder_ids[]: string? Only tasks in these folders (folder_id
        include_closed: boolean? Include closed tasks (left out by
        include_subtasks: boolean? Include subtasks (left out by default)
        list_ids[]: string? Only tasks in these lists (list_id
        order_by: string? Order: created (ClickUp's default), updated, due_date
        page: integer? Page number, from 0
        reverse: boolean? Reverse the order
        space_ids[]: string? Only tasks in these spaces (space_id
        statuses[]: string? Only tasks in these statuses, e.g
        tags[]: string? Only tasks with all of these
        team_id: string The workspace id (team_id from list_workspaces)
        updated_after: string? Only tasks updated after this time:
        updated_before: string? Only tasks updated before this time:
        ",
        r"
        next_page: integer?
        page: integer
        tasks[].assignees[]: string
        tasks[].closed: boolean
        tasks[].custom_id: string The workspace's custom task id (DEV-42),
        tasks[].date_updated: string
        tasks[].due_date: string
        tasks[].list_id: string The list it is in
        tasks[].list_name: string The list's name
        tasks[].name: string The name
        tasks[].parent: string
        tasks[].priority: string
        tasks[].status: string
        tasks[].tags[]: string
        tasks[].task_id: string The task id, for get_task, list_task_comments
        team_id: string The workspace
        ",
    ),
    tool(
        "clickup.update_task",
        "Change a ClickUp task: name, description, status, priority, dates, assignees (add/remove) or archived state",
        r"
        add_assignees[]: integer? User ids to add as assignees
        archived: boolean? Archive (true) or unarchive (false) the
        description: string? A new description, in Markdown (replaces
        due_date: string? A new due date: ISO 8601
        name: string? A new name
        priority: string? urgent, high, normal, low, or none
        remove_assignees[]: integer? User ids to remove from the
        start_date: string? A new start date: ISO 8601
        status: string? A new status name, e.g
        task_id: string The task id (or a custom
        team_id: string? The workspace id
        ",
        r"
        assignees[]: string
        custom_id: string? The custom task id, when the
        due_date: string?
        list_id: string? The list it is in
        name: string Its name
        priority: string?
        status: string?
        tags[]: string
        task_id: string The task id
        url: string?
        ",
    ),
    tool(
        "fireflies.get_transcript",
        "Get one meeting by id: overview, action items by owner, keywords, outline, participants and speakers",
        r"
        id: string The transcript id, as list_transcripts and
        include_sentences: boolean? Also fetch what was said, as
        max_sentences: integer? With sentences: how many to return,
        sentences_from: integer? With sentences: start at this sentence
        ",
        r"
        action_items[].item: string
        action_items[].owner: string Who it falls to, as the
        date: string?
        duration_min: number?
        host: string?
        id: string The transcript id
        keywords[]: string
        next_sentence_index: integer?
        note: string?
        organizer: string?
        outline: string?
        overview: string?
        participants[]: string
        participants_total: integer?
        sentences[]: string?
        sentences_total: integer?
        speakers[]: string
        title: string?
        transcript_url: string?
        ",
    ),
    tool(
        "fireflies.list_transcripts",
        "List meeting transcripts newest first, with title, date, duration, organizer, participants and a one-line gist",
        r"
        from_date: string? Only meetings on or after this
        limit: integer? Meetings per page, newest first: 20
        mine: boolean? Only meetings the API key's owner
        organizers[]: string? Only meetings organised by any of
        participants[]: string? Only meetings with any of these
        skip: integer? How many meetings to skip: 0
        to_date: string? Only meetings on or before this
        ",
        r"
        count: integer
        more: boolean
        next_skip: integer?
        skip: integer
        transcripts[].date: string
        transcripts[].duration_min: number
        transcripts[].gist: string
        transcripts[].id: string The transcript id: pass it to
        transcripts[].organizer: string
        transcripts[].participants[]: string
        transcripts[].participants_total: integer
        transcripts[].title: string
        ",
    ),
    tool(
        "fireflies.search_transcripts",
        "Find meetings whose title and/or spoken words contain a keyword (scope all, title or sentences), newest first, optionally within a date range or with given participants",
        r"
        from_date: string? Only meetings on or after this
        keyword: string The word or phrase to find,
        limit: integer? Meetings per page, newest first: 20
        participants[]: string? Only meetings with any of these
        scope: string? Where to look: all (titles and
        skip: integer? How many meetings to skip: 0
        to_date: string? Only meetings on or before this
        ",
        r"
        count: integer
        keyword: string
        more: boolean
        next_skip: integer?
        scope: string
        skip: integer
        transcripts[].date: string
        transcripts[].duration_min: number
        transcripts[].gist: string
        transcripts[].id: string The transcript id: pass it to
        transcripts[].organizer: string
        transcripts[].participants[]: string
        transcripts[].participants_total: integer
        transcripts[].title: string
        ",
    ),
    tool(
        "github.add_issue_comment",
        "Add a comment to an issue or to a pull request's conversation",
        r"
        body: string The comment, in Markdown
        number: integer The issue or pull request number
        owner: string Repository owner (user or organisation), e.g
        repo: string Repository name, e.g
        ",
        r"
        created_at: string?
        html_url: string?
        id: integer The new comment's id
        number: integer The issue or pull request commented
        repository: string owner/repo
        ",
    ),
    tool(
        "github.create_issue",
        "Create an issue in a repository, optionally with labels and assignees",
        r"
        assignees[]: string? Logins to assign (needs push access)
        body: string? The issue's description, in Markdown
        labels[]: string? Label names to set (needs push
        owner: string Repository owner (user or organisation), e.g
        repo: string Repository name, e.g
        title: string The issue's title
        ",
        r"
        assignees[]: string
        created_at: string?
        html_url: string?
        labels[]: string
        number: integer The new issue's number
        repository: string owner/repo
        title: string
        ",
    ),
    tool(
        "github.get_file_contents",
        "Read a file of a repository (decoded text, at most 64 KiB per call",
        r"
        max_bytes: integer? Most bytes of file content to
        owner: string Repository owner (user or organisation), e.g
        path: string? Path of a file or directory
        ref: string? Branch, tag or commit SHA
        repo: string Repository name, e.g
        start_line: integer? First line of a file to
        ",
        r"
        content: string?
        download_url: string?
        entries[].name: string The entry's name (its path is
        entries[].size: integer
        entries[].type: string
        html_url: string?
        next_start_line: integer?
        note: string?
        path: string The path asked for
        ref: string? The branch, tag or commit asked
        repository: string owner/repo
        sha: string? The blob SHA of a file
        size: integer?
        target: string?
        total_lines: integer?
        type: string
        ",
    ),
    tool(
        "github.get_issue",
        "Get one issue (or pull request, seen as an issue) with its body, labels, assignees, milestone and state",
        r"
        number: integer The issue number (pull request numbers
        owner: string Repository owner (user or organisation), e.g
        repo: string Repository name, e.g
        ",
        r"
        assignees[]: string
        author: string?
        author_association: string?
        body: string?
        closed_at: string?
        closed_by: string?
        comments: integer
        created_at: string?
        html_url: string?
        is_pull_request: boolean
        labels[]: string
        locked: boolean
        milestone: string?
        number: integer The issue number
        repository: string owner/repo
        state: string
        state_reason: string?
        title: string
        updated_at: string?
        ",
    ),
    tool(
        "github.get_job_logs",
        "Get the end of a workflow job's log (200 lines by default, at most 64 KiB), without timestamps or colour codes, plus every ##[error] line of the log",
        r"
        job_id: integer The job's id (from list_workflow_jobs)
        owner: string Repository owner (user or organisation), e.g
        repo: string Repository name, e.g
        tail_lines: integer? How many lines from the end
        timestamps: boolean? Keep the timestamp GitHub puts at
        ",
        r"
        error_lines[]: string
        job_id: integer The job
        lines_returned: integer
        lines_total: integer
        log: string
        note: string?
        repository: string owner/repo
        ",
    ),
    tool(
        "github.get_pull_request",
        "Get one pull request with its body, merge state (mergeable, conflicts, blocked), head/base SHAs, requested reviewers and change counts",
        r"
        number: integer The pull request number
        owner: string Repository owner (user or organisation), e.g
        repo: string Repository name, e.g
        ",
        r"
        additions: integer?
        assignees[]: string
        author: string?
        auto_merge: boolean
        base_ref: string The branch the changes go into
        base_sha: string The base commit the changes were
        body: string?
        changed_files: integer?
        closed_at: string?
        comments: integer?
        commits: integer?
        created_at: string?
        deletions: integer?
        draft: boolean
        head_ref: string The branch with the changes
        head_repo: string? The head branch's repository, when it
        head_sha: string The head commit
        html_url: string?
        labels[]: string
        merge_commit_sha: string? The merge commit, once merged
        mergeable: boolean?
        mergeable_state: string?
        merged: boolean
        merged_at: string?
        merged_by: string?
        milestone: string?
        number: integer The pull request number
        repository: string owner/repo
        requested_reviewers[]: string
        review_comments: integer?
        state: string
        title: string
        updated_at: string?
        ",
    ),
    tool(
        "github.list_issue_comments",
        "List the comments of an issue, or the conversation comments of a pull request, oldest first",
        r"
        number: integer The issue or pull request number
        owner: string Repository owner (user or organisation), e.g
        page: integer? Page number, from 1
        per_page: integer? Results per page: 30 by default,
        repo: string Repository name, e.g
        since: string? Only comments updated at or after
        ",
        r"
        comments[].author: string
        comments[].author_association: string
        comments[].body: string
        comments[].created_at: string
        comments[].edited_at: string
        comments[].html_url: string
        comments[].id: integer The comment id
        next_page: integer?
        number: integer The issue or pull request number
        repository: string owner/repo
        ",
    ),
    tool(
        "github.list_issues",
        "List a repository's issues (pull requests left out unless asked), newest first, with labels, assignees and comment counts",
        r"
        assignee: string? Only issues assigned to this login
        include_pull_requests: boolean? Keep pull requests in the listing
        labels[]: string? Only issues that carry all of
        owner: string Repository owner (user or organisation), e.g
        page: integer? Page number, from 1
        per_page: integer? Results per page: 30 by default,
        repo: string Repository name, e.g
        since: string? Only issues updated at or after
        state: string? open (the default), closed or all
        ",
        r"
        issues[].assignees[]: string
        issues[].author: string
        issues[].closed_at: string
        issues[].comments: integer
        issues[].created_at: string
        issues[].html_url: string
        issues[].is_pull_request: boolean
        issues[].labels[]: string
        issues[].number: integer The issue number
        issues[].state: string
        issues[].state_reason: string
        issues[].title: string
        issues[].updated_at: string
        next_page: integer?
        pull_requests_skipped: integer
        repository: string owner/repo
        ",
    ),
    tool(
        "github.list_pull_request_files",
        "List the files a pull request changes, with line counts and each file's unified diff (cut per file at max_patch_bytes)",
        r"
        max_patch_bytes: integer? Longest patch kept per file, in
        number: integer The pull request number
        owner: string Repository owner (user or organisation), e.g
        page: integer? Page number, from 1
        per_page: integer? Results per page: 30 by default,
        repo: string Repository name, e.g
        ",
        r"
        files[].additions: integer
        files[].deletions: integer
        files[].filename: string
        files[].patch: string
        files[].previous_filename: string
        files[].status: string
        next_page: integer?
        number: integer The pull request number
        repository: string owner/repo
        ",
    ),
    tool(
        "github.list_pull_request_review_comments",
        "List the review comments on a pull request's diff: file, line, text, the diff lines above and reply threading",
        r"
        number: integer The pull request number
        owner: string Repository owner (user or organisation), e.g
        page: integer? Page number, from 1
        per_page: integer? Results per page: 30 by default,
        repo: string Repository name, e.g
        ",
        r"
        comments[].author: string
        comments[].body: string
        comments[].created_at: string
        comments[].diff_hunk: string
        comments[].html_url: string
        comments[].id: integer The comment id
        comments[].in_reply_to_id: integer The comment this one answers
        comments[].line: integer
        comments[].outdated: boolean
        comments[].path: string The file commented on
        comments[].review_id: integer The review it belongs to
        comments[].start_line: integer
        next_page: integer?
        number: integer The pull request number
        repository: string owner/repo
        ",
    ),
    tool(
        "github.list_pull_request_reviews",
        "List the reviews of a pull request: who approved, requested changes or commented, on which commit, with the review summary",
        r"
        number: integer The pull request number
        owner: string Repository owner (user or organisation), e.g
        page: integer? Page number, from 1
        per_page: integer? Results per page: 30 by default,
        repo: string Repository name, e.g
        ",
        r"
        next_page: integer?
        number: integer The pull request number
        repository: string owner/repo
        reviews[].author: string
        reviews[].body: string
        reviews[].commit_id: string The commit reviewed (compare with the
        reviews[].html_url: string
        reviews[].id: integer The review id
        reviews[].state: string
        reviews[].submitted_at: string
        ",
    ),
    tool(
        "github.list_pull_requests",
        "List a repository's pull requests, newest first, with head and base branches, head SHA, draft flag and labels",
        r"
        base: string? Only pull requests into this base
        head: string? Only pull requests from this head
        owner: string Repository owner (user or organisation), e.g
        page: integer? Page number, from 1
        per_page: integer? Results per page: 30 by default,
        repo: string Repository name, e.g
        state: string? open (the default), closed (includes merged)
        ",
        r"
        next_page: integer?
        pull_requests[].author: string
        pull_requests[].base_ref: string The branch the changes go into
        pull_requests[].closed_at: string
        pull_requests[].created_at: string
        pull_requests[].draft: boolean
        pull_requests[].head_ref: string The branch with the changes
        pull_requests[].head_repo: string The head branch's repository, when it
        pull_requests[].head_sha: string The head commit
        pull_requests[].html_url: string
        pull_requests[].labels[]: string
        pull_requests[].merged_at: string
        pull_requests[].number: integer The pull request number
        pull_requests[].state: string
        pull_requests[].title: string
        pull_requests[].updated_at: string
        repository: string owner/repo
        ",
    ),
    tool(
        "github.list_workflow_jobs",
        "List the jobs of a workflow run with their status, conclusion and the steps that failed",
        r"
        filter: string? latest (the default) or all attempts
        owner: string Repository owner (user or organisation), e.g
        page: integer? Page number, from 1
        per_page: integer? Results per page: 30 by default,
        repo: string Repository name, e.g
        run_id: integer The workflow run's id (from list_workflow_runs)
        ",
        r"
        jobs[].completed_at: string
        jobs[].conclusion: string
        jobs[].current_step: string
        jobs[].failed_steps[].conclusion: string
        jobs[].failed_steps[].name: string The step's name
        jobs[].failed_steps[].number: integer The step's number within its job
        jobs[].html_url: string
        jobs[].id: integer The job id (for get_job_logs)
        jobs[].name: string The job's name
        jobs[].runner: string
        jobs[].started_at: string
        jobs[].status: string
        jobs[].step_count: integer
        next_page: integer?
        repository: string owner/repo
        run_id: integer The run the jobs belong to
        total_count: integer
        ",
    ),
    tool(
        "github.list_workflow_runs",
        "List a repository's GitHub Actions workflow runs, newest first, with status, conclusion, branch, commit and trigger",
        r"
        branch: string? Only runs for this branch
        event: string? Only runs triggered by this event:
        owner: string Repository owner (user or organisation), e.g
        page: integer? Page number, from 1
        per_page: integer? Results per page: 30 by default,
        repo: string Repository name, e.g
        status: string? Only runs with this status or
        workflow: string? Only runs of this workflow: its
        ",
        r"
        next_page: integer?
        repository: string owner/repo
        total_count: integer
        workflow_runs[].actor: string
        workflow_runs[].conclusion: string
        workflow_runs[].created_at: string
        workflow_runs[].event: string
        workflow_runs[].head_branch: string
        workflow_runs[].head_sha: string The commit run on
        workflow_runs[].html_url: string
        workflow_runs[].id: integer The run id (for list_workflow_jobs)
        workflow_runs[].pull_requests[]: integer
        workflow_runs[].run_attempt: integer
        workflow_runs[].run_number: integer The run's number within its workflow
        workflow_runs[].status: string
        workflow_runs[].title: string
        workflow_runs[].updated_at: string
        workflow_runs[].workflow: string
        ",
    ),
    tool(
        "github.search_issues",
        "Search issues and pull requests across GitHub with GitHub's search syntax (repo:, org:, is:open, is:pr, label:, author:…)",
        r"
        page: integer? Page number, from 1
        per_page: integer? Results per page: 30 by default,
        q: string GitHub search syntax, e.g
        ",
        r"
        incomplete_results: boolean
        items[].assignees[]: string
        items[].author: string
        items[].closed_at: string
        items[].comments: integer
        items[].created_at: string
        items[].html_url: string
        items[].is_pull_request: boolean
        items[].labels[]: string
        items[].number: integer The issue number
        items[].repository: string owner/repo the issue belongs to
        items[].state: string
        items[].state_reason: string
        items[].title: string
        items[].updated_at: string
        next_page: integer?
        query: string
        total_count: integer
        ",
    ),
    tool(
        "gitlab.create_issue",
        "Create an issue in a project with a title, description, labels and assignees",
        r"
        assignee_ids[]: integer? Numeric user ids to assign
        confidential: boolean? Make the issue confidential (visible to
        description: string? The issue's description, in Markdown
        due_date: string? Due date, YYYY-MM-DD
        labels[]: string? Label names to set (unknown labels
        project: string The project: its id (42) or
        title: string The issue's title
        ",
        r"
        assignees[]: string
        created_at: string?
        iid: integer The new issue's number
        labels[]: string
        project: string The project (as given)
        title: string
        web_url: string?
        ",
    ),
    tool(
        "gitlab.create_issue_note",
        "Add a comment (note) to an issue",
        r"
        body: string The comment, in Markdown
        iid: integer The issue's number within the project
        internal: boolean? Make it an internal note, visible
        project: string The project: its id (42) or
        ",
        r"
        author: string?
        created_at: string?
        iid: integer The issue's or merge request's number
        note_id: integer The new note's id
        project: string The project (as given)
        ",
    ),
    tool(
        "gitlab.create_merge_request",
        "Open a merge request from a source branch into a target branch, with a title, description, labels, assignees and reviewers",
        r"
        assignee_ids[]: integer? Numeric user ids to assign
        description: string? The description, in Markdown (Closes #47
        draft: boolean? Open it as a draft (the
        labels[]: string? Label names to set
        project: string The project the branch is in:
        remove_source_branch: boolean? Delete the source branch once merged
        reviewer_ids[]: integer? Numeric user ids to ask for
        source_branch: string The branch with the changes
        squash: boolean? Squash the commits on merge
        target_branch: string The branch to merge into, e.g
        target_project_id: integer? For a merge request from a
        title: string The title
        ",
        r"
        created_at: string?
        detailed_merge_status: string?
        draft: boolean
        iid: integer The new merge request's number
        project: string The project (as given)
        source_branch: string
        target_branch: string
        title: string
        web_url: string?
        ",
    ),
    tool(
        "gitlab.create_merge_request_note",
        "Add a general comment (note) to a merge request",
        r"
        body: string The comment, in Markdown
        iid: integer The merge request's number within the
        project: string The project: its id (42) or
        ",
        r"
        author: string?
        created_at: string?
        iid: integer The issue's or merge request's number
        note_id: integer The new note's id
        project: string The project (as given)
        ",
    ),
    tool(
        "gitlab.get_issue",
        "Get one issue by its number (iid) with its description, labels, assignees, milestone, task progress and counts",
        r"
        iid: integer The issue's number within the project
        project: string The project: its id (42) or
        ",
        r"
        assignees[]: string
        author: string?
        closed_at: string?
        closed_by: string?
        confidential: boolean
        created_at: string?
        description: string?
        due_date: string?
        iid: integer The issue's number within its project
        issue_type: string?
        labels[]: string
        merge_requests_count: integer
        milestone: string?
        notes: integer
        project: string The issue's project, when the listing
        state: string
        tasks: string?
        title: string
        updated_at: string?
        web_url: string?
        ",
    ),
    tool(
        "gitlab.get_job_log",
        "Get the end of a CI job's log (200 lines by default, at most 64 KiB), without colour codes or section markers, plus the error lines of the whole log",
        r"
        job_id: integer The job's id (from list_pipeline_jobs)
        project: string The project: its id (42) or
        tail_lines: integer? How many lines from the end
        ",
        r"
        error_lines[]: string
        job_id: integer The job
        lines_returned: integer
        lines_total: integer
        log: string
        note: string?
        project: string The project (as given)
        ",
    ),
    tool(
        "gitlab.get_merge_request",
        "Get one merge request by its number (iid) with its description, what blocks merging (detailed_merge_status, conflicts, unresolved threads), head pipeline status, diff_refs and change count",
        r"
        iid: integer The merge request's number within the
        project: string The project: its id (42) or
        ",
        r"
        assignees[]: string
        author: string?
        auto_merge: boolean
        blocking_discussions_resolved: boolean?
        can_merge: boolean?
        changes_count: string?
        closed_at: string?
        created_at: string?
        description: string?
        detailed_merge_status: string?
        diff_refs.base_sha: string The merge base of source and
        diff_refs.head_sha: string The source branch's head
        diff_refs.start_sha: string The target branch's head when the
        draft: boolean
        from_fork: boolean
        has_conflicts: boolean
        head_pipeline.id: integer The pipeline id (for list_pipeline_jobs)
        head_pipeline.status: string
        iid: integer The merge request's number within its
        labels[]: string
        merge_commit_sha: string? The merge (or squash) commit, once
        merge_error: string?
        merged_at: string?
        merged_by: string?
        milestone: string?
        notes: integer
        project: string The merge request's project, when the
        reviewers[]: string
        sha: string? The source branch's head commit
        source_branch: string
        squash: boolean
        state: string
        target_branch: string
        title: string
        updated_at: string?
        web_url: string?
        ",
    ),
    tool(
        "gitlab.get_merge_request_approvals",
        "Get a merge request's approval state: whether it is approved, how many approvals are required and left, and who approved",
        r"
        iid: integer The merge request's number within the
        project: string The project: its id (42) or
        ",
        r"
        approvals_left: integer?
        approvals_required: integer?
        approved: boolean?
        approved_by[].approved_at: string
        approved_by[].username: string
        iid: integer The merge request's number
        project: string The project (as given)
        suggested_approvers[]: string
        user_can_approve: boolean? Whether the token's user may approve
        user_has_approved: boolean? Whether the token's user has approved
        ",
    ),
    tool(
        "gitlab.get_merge_request_changes",
        "List the files a merge request changes, with added/deleted line counts and each file's unified diff (cut per file at max_patch_bytes)",
        r"
        iid: integer The merge request's number within the
        max_patch_bytes: integer? Longest diff kept per file, in
        page: integer? Page number, from 1
        per_page: integer? Files per page: 20 by default,
        project: string The project: its id (42) or
        ",
        r"
        files[].additions: integer
        files[].deletions: integer
        files[].diff: string
        files[].diff_omitted: string
        files[].generated: boolean
        files[].old_path: string The path before a rename
        files[].path: string The file's path
        files[].status: string
        iid: integer The merge request's number
        next_page: integer?
        overflow: boolean
        project: string The project (as given)
        total: integer?
        ",
    ),
    tool(
        "gitlab.get_project",
        "Get one project by id or path: default branch, visibility, merge method and merge checks, your access level, counts and clone URL",
        r"
        project: string The project: its id (42) or
        ",
        r"
        access: string?
        archived: boolean
        created_at: string?
        default_branch: string?
        description: string?
        forked_from: string?
        forks_count: integer?
        http_url_to_repo: string? The HTTPS clone URL
        id: integer The numeric id
        last_activity_at: string?
        merge_method: string?
        name: string? The display name
        only_allow_merge_if_all_discussions_are_resolved: boolean?
        only_allow_merge_if_pipeline_succeeds: boolean?
        open_issues_count: integer?
        project: string The full path (group/subgroup/project)
        star_count: integer?
        topics[]: string
        visibility: string?
        web_url: string?
        ",
    ),
    tool(
        "gitlab.list_issue_notes",
        "List the comments (notes) on an issue, oldest first",
        r"
        iid: integer The issue's number within the project
        include_system: boolean? Keep system notes ('assigned to @bob',
        newest_first: boolean? Newest first (oldest first by default)
        page: integer? Page number, from 1
        per_page: integer? Results per page: 20 by default,
        project: string The project: its id (42) or
        ",
        r"
        iid: integer The issue's number
        next_page: integer?
        notes[].author: string
        notes[].body: string
        notes[].created_at: string
        notes[].edited_at: string
        notes[].id: integer The note id
        notes[].internal: boolean
        notes[].system: boolean
        project: string The project (as given)
        system_notes_skipped: integer
        total: integer?
        ",
    ),
    tool(
        "gitlab.list_issues",
        "List a project's issues (or, without project, the issues across projects the token can see), newest first, with state, labels, assignees and note counts",
        r"
        assignee_username: string? Only issues assigned to this username
        author_username: string? Only issues opened by this username
        labels[]: string? Only issues that carry all of
        milestone: string? Only issues of this milestone (its
        page: integer? Page number, from 1
        per_page: integer? Results per page: 20 by default,
        project: string? The project: its id (42) or
        scope: string? Without project: created_by_me (GitLab's default), assigned_to_me
        search: string? Only issues whose title or description
        state: string? opened (the default), closed or all
        updated_after: string? Only issues updated at or after
        ",
        r"
        issues[].assignees[]: string
        issues[].author: string
        issues[].closed_at: string
        issues[].confidential: boolean
        issues[].created_at: string
        issues[].iid: integer The issue's number within its project
        issues[].labels[]: string
        issues[].merge_requests_count: integer
        issues[].milestone: string
        issues[].notes: integer
        issues[].project: string The issue's project, when the listing
        issues[].state: string
        issues[].title: string
        issues[].updated_at: string
        issues[].web_url: string
        next_page: integer?
        project: string? The project listed (absent for a
        total: integer?
        ",
    ),
    tool(
        "gitlab.list_merge_request_discussions",
        "List the discussion threads of a merge request: review comments on the diff (file and line) and general comments, with who resolved what",
        r"
        iid: integer The merge request's number within the
        include_system: boolean? Keep system notes ('added 1 commit',
        page: integer? Page number, from 1
        per_page: integer? Threads per page: 20 by default,
        project: string The project: its id (42) or
        unresolved_only: boolean? Only threads that still need resolving
        ",
        r"
        discussions[].id: string The thread id (to reply to
        discussions[].line: integer
        discussions[].notes[].author: string
        discussions[].notes[].body: string
        discussions[].notes[].created_at: string
        discussions[].notes[].edited_at: string
        discussions[].notes[].id: integer The note id
        discussions[].notes[].internal: boolean
        discussions[].notes[].system: boolean
        discussions[].path: string For a comment on the diff:
        discussions[].resolved: boolean
        discussions[].resolved_by: string
        iid: integer The merge request's number
        next_page: integer?
        project: string The project (as given)
        skipped: integer
        total: integer?
        unresolved: integer
        ",
    ),
    tool(
        "gitlab.list_merge_requests",
        "List a project's merge requests (or, without project, those across projects the token can see), newest first, with branches, head SHA, merge status, draft flag, reviewers and labels",
        r"
        author_username: string? Only merge requests opened by this
        labels[]: string? Only merge requests carrying all of
        page: integer? Page number, from 1
        per_page: integer? Results per page: 20 by default,
        project: string? The project: its id (42) or
        reviewer_username: string? Only merge requests this username is
        scope: string? Without project: created_by_me (GitLab's default), assigned_to_me
        search: string? Only merge requests whose title or
        source_branch: string? Only merge requests from this source
        state: string? opened (the default), closed, merged, locked
        target_branch: string? Only merge requests into this target
        ",
        r"
        merge_requests[].author: string
        merge_requests[].closed_at: string
        merge_requests[].created_at: string
        merge_requests[].detailed_merge_status: string
        merge_requests[].draft: boolean
        merge_requests[].from_fork: boolean
        merge_requests[].has_conflicts: boolean
        merge_requests[].iid: integer The merge request's number within its
        merge_requests[].labels[]: string
        merge_requests[].merged_at: string
        merge_requests[].notes: integer
        merge_requests[].project: string The merge request's project, when the
        merge_requests[].reviewers[]: string
        merge_requests[].sha: string The source branch's head commit
        merge_requests[].source_branch: string
        merge_requests[].state: string
        merge_requests[].target_branch: string
        merge_requests[].title: string
        merge_requests[].updated_at: string
        merge_requests[].web_url: string
        next_page: integer?
        project: string? The project listed (absent for a
        total: integer?
        ",
    ),
    tool(
        "gitlab.list_pipeline_jobs",
        "List the jobs of a pipeline with stage, status, failure reason and allow_failure, and how many failed the pipeline",
        r"
        include_retried: boolean? Include jobs that were retried (only
        page: integer? Page number, from 1
        per_page: integer? Results per page: 20 by default,
        pipeline_id: integer The pipeline's id (from list_pipelines)
        project: string The project: its id (42) or
        scope[]: string? Only jobs with these statuses: failed,
        ",
        r"
        failed: integer
        jobs[].allow_failure: boolean
        jobs[].duration_s: integer
        jobs[].failure_reason: string
        jobs[].finished_at: string
        jobs[].id: integer The job id (for get_job_log and
        jobs[].name: string The job's name
        jobs[].runner: string
        jobs[].stage: string
        jobs[].started_at: string
        jobs[].status: string
        jobs[].web_url: string
        next_page: integer?
        pipeline_id: integer The pipeline the jobs belong to
        project: string The project (as given)
        total: integer?
        ",
    ),
    tool(
        "gitlab.list_pipelines",
        "List a project's CI pipelines, newest first, with status, ref, commit and trigger",
        r"
        page: integer? Page number, from 1
        per_page: integer? Results per page: 20 by default,
        project: string The project: its id (42) or
        ref: string? Only pipelines of this branch or
        sha: string? Only pipelines of this commit
        source: string? Only pipelines triggered so: push, merge_request_event,
        status: string? Only pipelines with this status: created,
        ",
        r"
        next_page: integer?
        pipelines[].created_at: string
        pipelines[].id: integer The pipeline id (for list_pipeline_jobs)
        pipelines[].iid: integer The pipeline's number within the project
        pipelines[].ref: string The branch or tag
        pipelines[].sha: string The commit
        pipelines[].source: string
        pipelines[].status: string
        pipelines[].updated_at: string
        pipelines[].web_url: string
        project: string The project (as given)
        total: integer?
        ",
    ),
    tool(
        "gitlab.list_projects",
        "List the projects the token's user is a member of (most recently active first), with path, default branch and visibility",
        r"
        archived: boolean? false leaves archived projects out, true
        membership: boolean? Only projects the token's user is
        owned: boolean? Only projects the token's user owns
        page: integer? Page number, from 1
        per_page: integer? Results per page: 20 by default,
        search: string? Only projects whose name or path
        ",
        r"
        next_page: integer?
        projects[].archived: boolean
        projects[].default_branch: string
        projects[].description: string
        projects[].id: integer The numeric id
        projects[].last_activity_at: string
        projects[].project: string The full path (group/subgroup/project), to pass
        projects[].visibility: string
        projects[].web_url: string
        total: integer?
        ",
    ),
    tool(
        "gitlab.retry_job",
        "Run a failed or canceled CI job again",
        r"
        job_id: integer The id of the job to
        project: string The project: its id (42) or
        ",
        r"
        job_id: integer The new job's id (for get_job_log
        name: string The job's name
        project: string The project (as given)
        ref: string? The branch or tag it runs
        retried_job_id: integer The job that was retried
        status: string
        user: string? Who retried it (the token's user)
        web_url: string?
        ",
    ),
    tool(
        "gitlab.search",
        "Search GitLab, or one project, for issues, merge requests, projects or code (blobs)",
        r"
        page: integer? Page number, from 1
        per_page: integer? Results per page: 20 by default,
        project: string? Search within this project: its id
        ref: string? For blobs within a project: the
        scope: string What to search: issues, merge_requests, projects
        search: string The text to search for
        state: string? For issues and merge_requests: only opened
        ",
        r"
        blobs[].data: string
        blobs[].path: string The file
        blobs[].project: string The project (as given, else its
        blobs[].ref: string The branch or commit searched
        blobs[].startline: integer
        count: integer
        issues[].assignees[]: string
        issues[].author: string
        issues[].closed_at: string
        issues[].confidential: boolean
        issues[].created_at: string
        issues[].iid: integer The issue's number within its project
        issues[].labels[]: string
        issues[].merge_requests_count: integer
        issues[].milestone: string
        issues[].notes: integer
        issues[].project: string The issue's project, when the listing
        issues[].state: string
        issues[].title: string
        issues[].updated_at: string
        issues[].web_url: string
        merge_requests[].author: string
        merge_requests[].closed_at: string
        merge_requests[].created_at: string
        merge_requests[].detailed_merge_status: string
        merge_requests[].draft: boolean
        merge_requests[].from_fork: boolean
        merge_requests[].has_conflicts: boolean
        merge_requests[].iid: integer The merge request's number within its
        merge_requests[].labels[]: string
        merge_requests[].merged_at: string
        merge_requests[].notes: integer
        merge_requests[].project: string The merge request's project, when the
        merge_requests[].reviewers[]: string
        merge_requests[].sha: string The source branch's head commit
        merge_requests[].source_branch: string
        merge_requests[].state: string
        merge_requests[].target_branch: string
        merge_requests[].title: string
        merge_requests[].updated_at: string
        merge_requests[].web_url: string
        next_page: integer?
        project: string? The project searched in (absent for
        projects[].archived: boolean
        projects[].default_branch: string
        projects[].description: string
        projects[].id: integer The numeric id
        projects[].last_activity_at: string
        projects[].project: string The full path (group/subgroup/project), to pass
        projects[].visibility: string
        projects[].web_url: string
        scope: string
        search: string
        total: integer?
        ",
    ),
    tool(
        "jira.add_comment",
        "Add a comment (plain text) to an issue",
        r"
        body: string The comment, as plain text (Server/Data
        key: string The issue key, e.g
        ",
        r"
        author: string?
        created: string?
        id: string The new comment's id
        key: string The issue key
        ",
    ),
    tool(
        "jira.create_issue",
        "Create an issue in a project: summary, type, description (plain text), labels, priority, assignee, parent, components, and other fields by name ({'Story Points': 5})",
        r"
        assignee: string? Who to assign: the account id
        components[]: string? Component names
        description: string? The description, as plain text (Server/Data
        fields: object? Other fields by name or id,
        issue_type: string? The issue type's name: Task (the
        labels[]: string? Labels (no spaces)
        parent: string? The parent issue key, for a
        priority: string? The priority's name, e.g
        project: string The project key, e.g
        summary: string The title
        ",
        r"
        id: string Its numeric id
        key: string The new issue's key
        url: string
        ",
    ),
    tool(
        "jira.get_issue",
        "Get one issue by key: status, people, priority, labels, versions, parent, links, sub-tasks, the description as plain text, comment count, and every non-empty custom field by name (e.g",
        r"
        custom_fields[]: string? Only these custom fields, by name
        key: string The issue key, e.g
        ",
        r"
        assignee: string?
        attachments: integer
        comments: integer
        components[]: string
        created: string?
        custom_fields: object
        description: string?
        due: string?
        fix_versions[]: string
        issue_type: string?
        key: string The issue key, e.g
        labels[]: string
        links[].key: string The other issue's key
        links[].relation: string
        links[].status: string
        links[].summary: string
        note: string?
        parent.key: string The issue key
        parent.status: string
        parent.summary: string
        priority: string?
        project: string? The project key
        reporter: string?
        resolution: string?
        resolved: string?
        status: string?
        status_category: string?
        subtasks[].key: string The issue key
        subtasks[].status: string
        subtasks[].summary: string
        summary: string?
        updated: string?
        url: string
        ",
    ),
    tool(
        "jira.link_issues",
        "Link two issues with a link type, read as 'from_key <type> to_key' (e.g",
        r"
        comment: string? A comment to add with the
        from_key: string The issue the link reads from,
        to_key: string The issue the link points to,
        type: string The link type's name: Blocks, Relates,
        ",
        r"
        from_key: string The issue the link reads from
        to_key: string The issue the link points to
        type: string
        ",
    ),
    tool(
        "jira.list_boards",
        "List Jira Software boards (id, name, type, project), optionally of one project, by name or type",
        r"
        max_results: integer? Boards per page: 50 by default,
        name: string? Only boards whose name contains this
        project: string? Only boards of this project (key
        start_at: integer? The offset of the first board
        type: string? Only boards of this type
        ",
        r"
        boards[].id: integer The board id (for list_sprints)
        boards[].name: string Its name
        boards[].project: string The project it belongs to
        boards[].type: string
        next_start_at: integer?
        total: integer?
        ",
    ),
    tool(
        "jira.list_comments",
        "List an issue's comments (oldest first unless newest_first), each with author, time and text",
        r"
        key: string The issue key, e.g
        max_results: integer? Comments per page: 20 by default,
        newest_first: boolean? Newest first instead of oldest first
        start_at: integer? The offset of the first comment
        ",
        r"
        comments[].author: string
        comments[].body: string
        comments[].created: string
        comments[].edited: string
        comments[].id: string The comment id
        key: string The issue key
        newest_first: boolean
        next_start_at: integer?
        total: integer?
        ",
    ),
    tool(
        "jira.list_project_versions",
        "List a project's versions (releases), newest first: name, released/archived, start and release dates",
        r"
        max_results: integer? Versions per page: 50 by default,
        project: string The project key (or id), e.g
        start_at: integer? The offset of the first version
        status: string? Only versions in this state
        ",
        r"
        next_start_at: integer?
        project: string The project key
        total: integer?
        versions[].archived: boolean
        versions[].description: string
        versions[].id: string The version id
        versions[].name: string Its name (use it in fields:
        versions[].overdue: boolean
        versions[].release_date: string
        versions[].released: boolean
        versions[].start_date: string
        ",
    ),
    tool(
        "jira.list_sprints",
        "List a scrum board's sprints (id, name, state, dates, goal), optionally only active, future or closed ones",
        r"
        board_id: integer The board id (from list_boards)
        max_results: integer? Sprints per page: 50 by default,
        start_at: integer? The offset of the first sprint
        state[]: string? Only sprints in these states
        ",
        r"
        board_id: integer The board id
        next_start_at: integer?
        sprints[].complete_date: string
        sprints[].end_date: string
        sprints[].goal: string
        sprints[].id: integer The sprint id (JQL: sprint =
        sprints[].name: string Its name
        sprints[].start_date: string
        sprints[].state: string
        ",
    ),
    tool(
        "jira.list_transitions",
        "List the workflow transitions an issue can take now: id, name, the status each leads to, and the fields its screen requires",
        r"
        key: string The issue key, e.g
        ",
        r"
        key: string The issue key
        transitions[].has_screen: boolean
        transitions[].id: string The transition id
        transitions[].name: string Its name, e.g
        transitions[].required_fields[]: string
        transitions[].to_category: string
        transitions[].to_status: string
        ",
    ),
    tool(
        "jira.search_issues",
        "Search issues with JQL (e.g",
        r"
        fields[]: string? Extra fields to show for each
        jql: string A JQL query, e.g
        max_results: integer? Hits per page: 20 by default,
        next_page_token: string? Jira Cloud: the next_page_token of the
        start_at: integer? Jira Server/Data Center: the offset of
        ",
        r"
        is_last: boolean
        issues[].assignee: string
        issues[].fields: object
        issues[].issue_type: string
        issues[].key: string The issue key, e.g
        issues[].labels[]: string
        issues[].priority: string
        issues[].status: string
        issues[].status_category: string
        issues[].summary: string
        issues[].updated: string
        jql: string
        next_page_token: string?
        next_start_at: integer?
        total: integer?
        ",
    ),
    tool(
        "jira.transition_issue",
        "Move an issue through its workflow by transition name, id or target status (e.g",
        r"
        comment: string? A comment to add with the
        fields: object? Fields the transition's screen asks for,
        key: string The issue key, e.g
        transition: string The transition's name (Start Progress), its
        ",
        r"
        key: string The issue key
        to_status: string?
        transition: string
        ",
    ),
    tool(
        "jira.update_issue",
        "Change an issue's fields: summary, description, labels, priority, assignee, and any other field by name or id ({'Story Points': 8})",
        r"
        assignee: string? Who to assign: the account id
        description: string? A new description, as plain text
        fields: object? Other fields by name or id,
        key: string The issue key, e.g
        labels[]: string? The new labels (replaces them all)
        priority: string? The priority's name, e.g
        summary: string? A new title
        ",
        r"
        key: string The issue key
        updated[]: string
        url: string
        ",
    ),
];
