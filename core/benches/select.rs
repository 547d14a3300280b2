//! Selector latency per query on a synthetic 2000-tool registry (20 providers, 5 groups each,
//! tools named from 8 verbs and 60 nouns, about six described parameters each, two companion
//! links each), with the built-in embedder's vectors fused in.
//!
//! - `select/rank_fused_2000`: `rank(query, [], 10)` with BM25 and the built-in embedder fused.
//! - `select/rank_default_2000`: the same with the default ranker: BM25F and the distilled
//!   vectors.
//! - `select/rank_words_2000`: the same on BM25F alone (`distilled_weight = 0`).
//! - `select/select_fused_2000`: `select(query, [])`: CORE, threshold, bundle expansion, cap.
//! - `select/build_2000`, `select/build_words_2000`: building the index (once per start-up),
//!   with and without the distilled vectors.
//!
//! Before the measurements, p50/p90/p99 of single queries (each timed alone, 20 rounds over the
//! query set) are printed to stderr: the figure the selector is held to is p50 < 1 ms.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use quiver_core::enrich::embed::{EmbeddingsArtifact, LexicalEmbedder};
use quiver_core::select::{SelectIndex, SelectOptions};
use quiver_core::ToolSpec;
use serde_json::{json, Map};

#[path = "common/synthetic.rs"]
mod synthetic;
use synthetic::{percentiles, Rng, NOUNS, QUERIES, VERBS};

const GROUPS: &[&str] = &["code", "planning", "ci", "people", "ops"];

fn tool(i: usize, rng: &mut Rng) -> (String, ToolSpec) {
    let provider = format!("prov{}", i % 20);
    let group = GROUPS[i / 20 % GROUPS.len()];
    let (verb, noun, related) = (rng.pick(VERBS), rng.pick(NOUNS), rng.pick(NOUNS));
    let name = format!("{verb}_{noun}_{i}");
    let description = format!(
        "{} {} {} of a project, with their {} and {}; filter by state, labels and {}.",
        verb.replace('_', " "),
        if verb == "list" || verb == "search" { "the" } else { "one" },
        noun.replace('_', " "),
        related.replace('_', " "),
        rng.pick(NOUNS).replace('_', " "),
        rng.pick(NOUNS).replace('_', " "),
    );
    let mut properties = Map::new();
    for (param, text) in [
        ("project", "The project id or path.".to_owned()),
        (&format!("{noun}_id"), format!("The {} to read.", noun.replace('_', " "))),
        (&format!("{related}_id"), format!("Only those of this {}.", related.replace('_', " "))),
        ("state", "open, closed or all.".to_owned()),
        ("labels", "Label names, comma separated.".to_owned()),
        ("page", "Page number, from 1.".to_owned()),
    ] {
        properties.insert(param.to_owned(), json!({"type": "string", "description": text}));
    }
    let spec = ToolSpec {
        name: name.clone(),
        group: Some(group.to_owned()),
        description,
        input_schema: json!({"type": "object", "properties": properties}),
        output_schema: None,
        sensitive_params: vec![],
    };
    (format!("{provider}.{name}"), spec)
}

fn registry() -> (Vec<(String, ToolSpec)>, EmbeddingsArtifact) {
    let mut rng = Rng(7);
    let tools: Vec<(String, ToolSpec)> = (0..2000).map(|i| tool(i, &mut rng)).collect();
    let embedder = LexicalEmbedder::new();
    let artifact = tools.iter().map(|(n, s)| (n.clone(), embedder.embed_tool(n, s))).collect();
    (tools, artifact)
}

fn build(
    tools: &[(String, ToolSpec)],
    artifact: Option<&EmbeddingsArtifact>,
    distilled_weight: f32,
) -> SelectIndex {
    // With embeddings given, fused as `[selector] embedding_weight = 0.4` asks; without, words
    // with the distilled vectors at `distilled_weight` (the default ranker at its default).
    let embedding_weight = if artifact.is_some() { 0.4 } else { 0.0 };
    let options = SelectOptions {
        core: vec!["prov0.get_*".into()],
        embedding_weight,
        distilled_weight,
        ..SelectOptions::default()
    };
    // Two companion links per tool within its provider, as follow-up links give a catalogue.
    let n = tools.len();
    let links: Vec<(&str, &str, f32)> = (0..n)
        .flat_map(|i| {
            [20, 40].map(|step| (tools[i].0.as_str(), tools[(i + step) % n].0.as_str(), 0.4))
        })
        .collect();
    SelectIndex::new(tools.iter().map(|(n, s)| (n.as_str(), s)), artifact, options)
        .with_companions(links)
}

fn bench(c: &mut Criterion) {
    let (tools, artifact) = registry();
    let default_weight = SelectOptions::default().distilled_weight;
    let fused = build(&tools, Some(&artifact), 0.0);
    let default = build(&tools, None, default_weight);
    let words = build(&tools, None, 0.0);
    percentiles("rank fused 2000", |q| {
        black_box(fused.rank(q, &[], 10));
    });
    percentiles("rank default (words + distilled) 2000", |q| {
        black_box(default.rank(q, &[], 10));
    });
    percentiles("rank words alone 2000", |q| {
        black_box(words.rank(q, &[], 10));
    });
    percentiles("select fused 2000", |q| {
        black_box(fused.select(q, &[]));
    });
    percentiles("select default 2000", |q| {
        black_box(default.select(q, &[]));
    });
    let mut group = c.benchmark_group("select");
    let mut i = 0;
    let mut next = || {
        i = (i + 1) % QUERIES.len();
        QUERIES[i]
    };
    group.bench_function("rank_fused_2000", |b| b.iter(|| fused.rank(next(), &[], 10)));
    group.bench_function("rank_default_2000", |b| b.iter(|| default.rank(next(), &[], 10)));
    group.bench_function("rank_words_2000", |b| b.iter(|| words.rank(next(), &[], 10)));
    group.bench_function("select_fused_2000", |b| b.iter(|| fused.select(next(), &[])));
    group.bench_function("select_default_2000", |b| b.iter(|| default.select(next(), &[])));
    group.sample_size(10);
    group.bench_function("build_2000", |b| b.iter(|| build(&tools, None, default_weight)));
    group.bench_function("build_words_2000", |b| b.iter(|| build(&tools, None, 0.0)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
