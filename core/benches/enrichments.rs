//! The enrichment passes over a synthetic 2000-tool registry: 20 providers, tools named from 8
//! verbs and 60 nouns, about five arguments each (a scope, the tool's own id, a filter by a
//! related thing's id, state, labels, paging, a flag) and output schemas with arrays of items
//! carrying ids of related things — so parameter blocks are large and realistic rather than
//! trivially small.
//!
//! - `dataflow/full_2000`: the whole index.
//! - `dataflow/delta_10`: ten new tools merged into the index of the other 1990.
//! - `embeddings/full_2000`: `embed_tool` over every tool.
//! - `neighbors/2000`: neighbours from those embeddings.
//!
//! The sizes of the results are printed to stderr before the measurements.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use quiver_core::enrich::dataflow::{compute, extend, DataflowOptions};
use quiver_core::enrich::embed::{EmbeddingsArtifact, LexicalEmbedder};
use quiver_core::enrich::neighbors::compute_neighbors;
use quiver_core::ToolSpec;
use serde_json::{json, Map, Value};

const NOUNS: &[&str] = &[
    "issue",
    "pull_request",
    "merge_request",
    "pipeline",
    "job",
    "run",
    "project",
    "repository",
    "task",
    "list",
    "folder",
    "space",
    "board",
    "sprint",
    "comment",
    "note",
    "discussion",
    "user",
    "team",
    "member",
    "release",
    "tag",
    "branch",
    "commit",
    "file",
    "build",
    "deployment",
    "environment",
    "incident",
    "alert",
    "service",
    "ticket",
    "invoice",
    "customer",
    "order",
    "product",
    "meeting",
    "transcript",
    "document",
    "page",
    "label",
    "milestone",
    "webhook",
    "secret",
    "runner",
    "artifact",
    "package",
    "version",
    "epic",
    "story",
    "review",
    "approval",
    "check",
    "workflow",
    "schedule",
    "dashboard",
    "report",
    "metric",
    "log",
    "event",
];
const VERBS: &[&str] = &["get", "list", "search", "create", "update", "delete", "close", "retry"];
const SCOPES: &[&str] = &["project", "workspace_id", "repo", "team_id", "org", "site"];

/// splitmix64: a deterministic registry without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

fn tool(i: usize, rng: &mut Rng) -> (String, ToolSpec) {
    let provider = format!("prov{}", i % 20);
    let scope = SCOPES[i % 20 % SCOPES.len()];
    let verb = rng.pick(VERBS);
    let noun = rng.pick(NOUNS);
    let (r1, r2) = (rng.pick(NOUNS), rng.pick(NOUNS));
    let listing = verb == "list" || verb == "search";
    let name = if listing { format!("{verb}_{noun}s_{i}") } else { format!("{verb}_{noun}_{i}") };
    let mut inputs = Map::new();
    inputs.insert(
        scope.into(),
        json!({"type": "string", "description": format!("The {scope} to work in.")}),
    );
    if !listing && verb != "create" {
        inputs.insert(
            format!("{noun}_id"),
            json!({"type": "integer", "description": format!("The {noun} id.")}),
        );
    }
    inputs.insert(
        format!("{r1}_id"),
        json!({"type": ["integer", "null"], "description": format!("Only those of this {r1}.")}),
    );
    inputs.insert(
        "state".into(),
        json!({"type": ["string", "null"], "description": "open, closed or all."}),
    );
    inputs.insert("labels".into(), json!({"type": ["array", "null"], "items": {"type": "string"}, "description": "Label names."}));
    if listing {
        inputs.insert("page".into(), json!({"type": ["integer", "null"]}));
        inputs.insert(
            "since".into(),
            json!({"type": ["string", "null"], "description": "Updated after, ISO 8601."}),
        );
    }
    inputs.insert("include_archived".into(), json!({"type": "boolean"}));
    let item = json!({"type": "object", "properties": {
        "id": {"type": "integer", "description": format!("The {noun} id.")},
        "title": {"type": "string", "description": format!("The {noun}'s title.")},
        "state": {"type": "string"},
        format!("{r1}_id"): {"type": ["integer", "null"], "description": format!("Its {r1}.")},
        format!("{r2}_id"): {"type": ["integer", "null"], "description": format!("Its {r2}.")},
        "author": {"type": "string", "description": "The author's login."},
        "created_at": {"type": "string"},
        "labels": {"type": "array", "items": {"type": "string"}},
        "url": {"type": "string"},
        "draft": {"type": "boolean"},
    }});
    let output = if listing {
        json!({"type": "object", "$defs": {"Item": item}, "properties": {
            format!("{noun}s"): {"type": "array", "items": {"$ref": "#/$defs/Item"}},
            "next_page": {"type": ["integer", "null"]},
            "total": {"type": "integer"},
            scope: {"type": "string"},
        }})
    } else {
        item
    };
    let spec = ToolSpec {
        name: name.clone(),
        group: None,
        description: format!("{verb} a {noun} of a {scope}, with its {r1} and {r2}."),
        input_schema: json!({"type": "object", "properties": Value::Object(inputs), "required": [scope]}),
        output_schema: Some(output),
        sensitive_params: vec![],
    };
    (format!("{provider}.{name}"), spec)
}

fn registry(n: usize) -> Vec<(String, ToolSpec)> {
    let mut rng = Rng(2000);
    (0..n).map(|i| tool(i, &mut rng)).collect()
}

fn bench(c: &mut Criterion) {
    let tools = registry(2000);
    let all: Vec<(&str, &ToolSpec)> = tools.iter().map(|(n, s)| (n.as_str(), s)).collect();
    let opts = DataflowOptions::default();
    let full = compute(&all, &opts);
    let prev = compute(&all[..1990], &opts);
    let new: Vec<String> = tools[1990..].iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(extend(&prev, &all, &new, &opts), full, "delta equals full");
    let embedder = LexicalEmbedder::new();
    let embeddings: EmbeddingsArtifact =
        tools.iter().map(|(n, s)| (n.clone(), embedder.embed_tool(n, s))).collect();
    let params: usize = tools
        .iter()
        .map(|(_, s)| s.input_schema["properties"].as_object().map_or(0, Map::len))
        .sum();
    eprintln!(
        "2000 tools, {params} input parameters; dataflow: {} edges; neighbors: {} lists",
        full.edge_count(),
        compute_neighbors(&embeddings, 10).len()
    );

    let mut group = c.benchmark_group("dataflow");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    group.bench_function("full_2000", |b| b.iter(|| black_box(compute(black_box(&all), &opts))));
    group.bench_function("delta_10", |b| {
        b.iter(|| black_box(extend(black_box(&prev), black_box(&all), &new, &opts)))
    });
    group.finish();

    let mut group = c.benchmark_group("embeddings");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    group.bench_function("full_2000", |b| {
        b.iter(|| {
            let artifact: EmbeddingsArtifact =
                all.iter().map(|(n, s)| (n.to_string(), embedder.embed_tool(n, s))).collect();
            black_box(artifact)
        })
    });
    group.finish();

    let mut group = c.benchmark_group("neighbors");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    group.bench_function("2000", |b| {
        b.iter(|| black_box(compute_neighbors(black_box(&embeddings), 10)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
