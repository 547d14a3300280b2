//! Properties of the dataflow index over random registries: extending an index with new tools
//! gives exactly what computing it over everything gives (the delta-merge a cache relies on), and
//! the samplers repeat themselves for a seed whatever order the tools come in.

use proptest::prelude::*;
use quiver_core::enrich::dataflow::{compute, extend, DataflowIndex, DataflowOptions};
use quiver_core::enrich::embed::{EmbeddingsArtifact, LexicalEmbedder};
use quiver_core::enrich::neighbors::{compute_neighbors, extend_neighbors};
use quiver_core::enrich::sample::{sample, Strategy as Sampler};
use quiver_core::ToolSpec;
use serde_json::{json, Map, Value};

const NOUNS: &[&str] = &[
    "issue",
    "pipeline",
    "job",
    "project",
    "task",
    "list",
    "board",
    "sprint",
    "comment",
    "user",
    "team",
    "release",
    "branch",
    "commit",
    "file",
    "incident",
    "ticket",
    "meeting",
    "transcript",
];
const VERBS: &[&str] = &["get", "list", "search", "create", "update"];

/// A tool from a few small numbers, so proptest can shrink towards simple registries.
fn tool(
    provider: usize,
    verb: usize,
    noun: usize,
    other: usize,
    variant: usize,
) -> (String, ToolSpec) {
    let (verb, noun, other) = (VERBS[verb], NOUNS[noun], NOUNS[other]);
    let plural = format!("{noun}s");
    let name = if verb == "list" || verb == "search" {
        format!("{verb}_{plural}")
    } else {
        format!("{verb}_{noun}")
    };
    let mut inputs = Map::new();
    inputs.insert("project".into(), json!({"type": "string", "description": "The project path."}));
    if verb != "list" && verb != "search" && verb != "create" {
        inputs.insert(
            format!("{noun}_id"),
            json!({"type": "integer", "description": format!("The {noun} id.")}),
        );
    }
    inputs.insert(
        format!("{other}_id"),
        json!({"type": ["integer", "null"], "description": format!("Only those of this {other}.")}),
    );
    inputs.insert("page".into(), json!({"type": ["integer", "null"]}));
    if variant.is_multiple_of(2) {
        inputs.insert(
            "labels".into(),
            json!({"type": ["array", "null"], "items": {"type": "string"}}),
        );
    }
    if variant.is_multiple_of(3) {
        inputs.insert("include_closed".into(), json!({"type": "boolean"}));
    }
    let item = json!({"type": "object", "properties": {
        "id": {"type": "integer", "description": format!("The {noun} id.")},
        "title": {"type": "string"},
        "state": {"type": "string"},
        format!("{other}_id"): {"type": ["integer", "null"]},
        "draft": {"type": "boolean"},
    }});
    let output = if verb == "list" || verb == "search" {
        json!({"type": "object", "$defs": {"Item": item},
               "properties": {plural: {"type": "array", "items": {"$ref": "#/$defs/Item"}},
                              "next_page": {"type": ["integer", "null"]}}})
    } else {
        item
    };
    let spec = ToolSpec {
        name: name.clone(),
        group: None,
        description: format!("{verb} {noun}"),
        input_schema: json!({"type": "object", "properties": Value::Object(inputs), "required": ["project"]}),
        output_schema: (variant % 5 != 4).then_some(output),
        sensitive_params: vec![],
    };
    (format!("p{provider}.{name}"), spec)
}

fn registry(rows: &[(usize, usize, usize, usize, usize)]) -> Vec<(String, ToolSpec)> {
    let mut tools: Vec<(String, ToolSpec)> =
        rows.iter().map(|&(p, v, n, o, x)| tool(p, v, n, o, x)).collect();
    tools.sort_by(|a, b| a.0.cmp(&b.0));
    tools.dedup_by(|a, b| a.0 == b.0);
    tools
}

fn rows() -> impl Strategy<Value = Vec<(usize, usize, usize, usize, usize)>> {
    prop::collection::vec(
        (0..3usize, 0..VERBS.len(), 0..NOUNS.len(), 0..NOUNS.len(), 0..30usize),
        2..40,
    )
}

fn index(tools: &[(String, ToolSpec)], opts: &DataflowOptions) -> DataflowIndex {
    let refs: Vec<(&str, &ToolSpec)> = tools.iter().map(|(n, s)| (n.as_str(), s)).collect();
    compute(&refs, opts)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn extend_equals_compute(rows in rows(), cut in 0.0f64..1.0, k in 1usize..6) {
        let tools = registry(&rows);
        let opts = DataflowOptions { max_neighbors: k, ..DataflowOptions::default() };
        let split = ((tools.len() as f64) * cut) as usize;
        let (old, new) = tools.split_at(split);
        let prev = index(old, &opts);
        let all: Vec<(&str, &ToolSpec)> = tools.iter().map(|(n, s)| (n.as_str(), s)).collect();
        let new_names: Vec<String> = new.iter().map(|(n, _)| n.clone()).collect();
        let merged = extend(&prev, &all, &new_names, &opts);
        prop_assert_eq!(&merged, &index(&tools, &opts));
        // Extending with nothing new changes nothing.
        prop_assert_eq!(&extend(&merged, &all, &[], &opts), &merged);
    }

    #[test]
    fn neighbours_extended_with_new_tools_equal_a_full_computation(
        rows in rows(),
        cut in 0.0f64..1.0,
        k in 1usize..6,
    ) {
        let tools = registry(&rows);
        let embedder = LexicalEmbedder::new();
        let all: EmbeddingsArtifact =
            tools.iter().map(|(n, s)| (n.clone(), embedder.embed_tool(n, s))).collect();
        let split = ((tools.len() as f64) * cut) as usize;
        let old: EmbeddingsArtifact = tools[..split]
            .iter()
            .map(|(n, _)| (n.clone(), all[n].clone()))
            .collect();
        let new: Vec<String> = tools[split..].iter().map(|(n, _)| n.clone()).collect();
        let previous = compute_neighbors(&old, k);
        prop_assert_eq!(extend_neighbors(&previous, &all, &new, k), compute_neighbors(&all, k));
    }

    #[test]
    fn changed_or_removed_tools_still_give_the_full_index(rows in rows()) {
        let mut tools = registry(&rows);
        let opts = DataflowOptions::default();
        let prev = index(&tools, &opts);
        // Change the first tool's description and schema; drop the last tool.
        let changed = tools[0].0.clone();
        tools[0].1.input_schema["properties"]["issue_id"] = json!({"type": "integer"});
        tools.pop();
        let all: Vec<(&str, &ToolSpec)> = tools.iter().map(|(n, s)| (n.as_str(), s)).collect();
        prop_assert_eq!(extend(&prev, &all, &[changed], &opts), index(&tools, &opts));
    }

    #[test]
    fn samplers_ignore_the_order_tools_are_given_in(rows in rows(), seed in any::<u64>()) {
        let tools = registry(&rows);
        let idx = index(&tools, &DataflowOptions::default());
        let names: Vec<String> = tools.iter().map(|(n, _)| n.clone()).collect();
        let reversed: Vec<String> = names.iter().rev().cloned().collect();
        for strategy in Sampler::ALL {
            let a = sample(strategy, &names, Some(&idx), 4, seed).unwrap();
            prop_assert_eq!(&a, &sample(strategy, &reversed, Some(&idx), 4, seed).unwrap());
            prop_assert!(a.len() <= 4);
        }
    }
}

#[test]
fn the_index_serialises_with_out_and_in() {
    let tools = registry(&[(0, 1, 0, 1, 0), (0, 0, 0, 1, 1)]);
    let idx = index(&tools, &DataflowOptions::default());
    let text = serde_json::to_string(&idx).unwrap();
    assert!(text.starts_with(r#"{"out":"#) && text.contains(r#""in":"#), "{text}");
    assert_eq!(serde_json::from_str::<DataflowIndex>(&text).unwrap(), idx);
    // p0.list_issues -> p0.get_issue through the listed ids.
    let edge = &idx.out["p0.list_issues"][0];
    assert_eq!(
        (edge.tool.as_str(), edge.from_param.as_str(), edge.to_param.as_str()),
        ("p0.get_issue", "issues[].id", "issue_id")
    );
}
