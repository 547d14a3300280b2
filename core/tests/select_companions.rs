//! Companion tools: a strong hit brings in the tools that feed its required inputs or follow it,
//! from dataflow edges and follow-up links; scopes (`project`) feed everything and bring nothing.

use quiver_core::enrich::dataflow::{compute, DataflowOptions};
use quiver_core::select::{dataflow_companions, SelectIndex, SelectOptions};
use quiver_core::ToolSpec;
use serde_json::{json, Value};

fn tool(
    name: &str,
    description: &str,
    inputs: Value,
    required: &[&str],
    output: Value,
) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        group: Some("ci".into()),
        description: description.into(),
        input_schema: json!({"type": "object", "properties": inputs, "required": required}),
        output_schema: Some(output),
        sensitive_params: vec![],
    }
}

/// A CI service: pipelines have jobs, jobs have logs; every call is scoped to a project.
fn registry() -> Vec<(String, ToolSpec)> {
    let project = json!({"type": "string", "description": "The project's path"});
    let id = |what: &str| json!({"type": "integer", "description": format!("The {what}'s id")});
    let list = |key: &str, item: Value| json!({"type": "object", "properties": {key: {"type": "array", "items": item}}});
    let job = json!({"type": "object", "properties": {
        "id": {"type": "integer"}, "name": {"type": "string"}, "status": {"type": "string"}}});
    vec![
        (
            "ci.list_projects".to_owned(),
            tool(
                "list_projects",
                "List the projects you can see",
                json!({"search": {"type": "string"}}),
                &[],
                list("projects", json!({"type": "object", "properties": {"project": project}})),
            ),
        ),
        (
            "ci.list_pipelines".to_owned(),
            tool(
                "list_pipelines",
                "List a project's pipelines, newest first",
                json!({"project": project}),
                &["project"],
                list(
                    "pipelines",
                    json!({"type": "object", "properties": {"id": {"type": "integer"}, "status": {"type": "string"}}}),
                ),
            ),
        ),
        (
            "ci.list_pipeline_jobs".to_owned(),
            tool(
                "list_pipeline_jobs",
                "List the jobs of one pipeline with their status",
                json!({"project": project, "pipeline_id": id("pipeline")}),
                &["project", "pipeline_id"],
                list("jobs", job.clone()),
            ),
        ),
        (
            "ci.get_job_log".to_owned(),
            tool(
                "get_job_log",
                "Get the log a job printed",
                json!({"project": project, "job_id": id("job")}),
                &["project", "job_id"],
                json!({"type": "object", "properties": {"log": {"type": "string"}}}),
            ),
        ),
        (
            "ci.retry_job".to_owned(),
            tool(
                "retry_job",
                "Run a job again",
                json!({"project": project, "job_id": id("job")}),
                &["project", "job_id"],
                job,
            ),
        ),
        (
            "ci.get_variable".to_owned(),
            tool(
                "get_variable",
                "Get a project's CI variable",
                json!({"project": project, "key": {"type": "string"}}),
                &["project", "key"],
                json!({"type": "object", "properties": {"value": {"type": "string"}}}),
            ),
        ),
    ]
}

fn index(tools: &[(String, ToolSpec)]) -> SelectIndex {
    SelectIndex::new(tools.iter().map(|(n, s)| (n.as_str(), s)), None, SelectOptions::default())
}

fn score(index: &SelectIndex, query: &str, name: &str) -> f32 {
    index.rank(query, &[], 10).into_iter().find(|r| r.name == name).map_or(0.0, |r| r.score)
}

#[test]
fn dataflow_companions_feed_required_ids_and_skip_scopes() {
    let tools = registry();
    let specs: Vec<(&str, &ToolSpec)> = tools.iter().map(|(n, s)| (n.as_str(), s)).collect();
    let dataflow = compute(&specs, &DataflowOptions::default());
    let links = dataflow_companions(specs.iter().copied(), &dataflow);
    let feeders_of = |tool: &str| -> Vec<&str> {
        links.iter().filter(|(_, t, _)| t == tool).map(|(f, _, _)| f.as_str()).collect()
    };
    // The job id a log needs comes from the pipeline's job list: one best feeder per input.
    assert_eq!(feeders_of("ci.get_job_log"), ["ci.list_pipeline_jobs"], "{links:?}");
    assert_eq!(feeders_of("ci.list_pipeline_jobs"), ["ci.list_pipelines"], "{links:?}");
    // Every tool takes a project: the project list is a scope, nobody's companion.
    assert!(links.iter().all(|(f, _, _)| f != "ci.list_projects"), "{links:?}");
    assert!(links.iter().all(|(_, _, s)| *s > 0.0 && *s <= 0.5), "half an edge's fit: {links:?}");
}

#[test]
fn a_strong_hit_lifts_its_companions_and_a_weak_one_does_not() {
    let tools = registry();
    let plain = index(&tools);
    let linked = index(&tools).with_companions([
        ("ci.list_pipeline_jobs", "ci.get_job_log", 0.45),
        ("ci.get_job_log", "ci.retry_job", 0.4),
        ("ci.list_pipelines", "ci.list_pipeline_jobs", 0.45),
    ]);
    let query = "what did the job log say";
    let hit = score(&plain, query, "ci.get_job_log");
    assert!(hit > 0.0);
    assert_eq!(score(&linked, query, "ci.get_job_log"), hit, "the hit itself is unchanged");
    // Its feeder rises to the hit's score times the link's strength.
    let feeder = score(&linked, query, "ci.list_pipeline_jobs");
    assert!(feeder >= hit * 0.45 - 1e-6, "feeder {feeder}, hit {hit}");
    assert!(feeder > score(&plain, query, "ci.list_pipeline_jobs"));
    // A follower that writes is damped like any write the request did not ask for.
    let follower = score(&linked, query, "ci.retry_job");
    assert!(follower < hit * 0.4, "follower {follower}, hit {hit}");
    // Lifts do not chain: the feeder's own feeder stays where words put it.
    assert_eq!(
        score(&linked, query, "ci.list_pipelines"),
        score(&plain, query, "ci.list_pipelines")
    );
    // Without a strong hit nothing is lifted: a query about variables leaves jobs alone.
    let other = "read a ci variable";
    assert_eq!(
        score(&linked, other, "ci.list_pipeline_jobs"),
        score(&plain, other, "ci.list_pipeline_jobs")
    );
}
