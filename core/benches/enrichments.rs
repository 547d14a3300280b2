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
use serde_json::Map;

#[path = "common/synthetic.rs"]
mod synthetic;
use synthetic::registry;

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
