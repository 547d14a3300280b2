//! Selector latency per query with the local sentence embedder (all-MiniLM-L6-v2 from
//! `$QUIVER_MINILM_DIR`, which `cargo xtask bench` fetches) on the synthetic 2000-tool registry,
//! tool vectors computed once beforehand as the enrichment store keeps them: each query is
//! embedded by the model, then ranked (or selected) with words and cosine fused.
//!
//! - `select_local/rank_2000`: embed the query, then `rank_with(query, vector, [], 10)`.
//! - `select_local/embed_query`: the model's share alone.
//!
//! Before the measurements, the model's load time and p50/p90/p99 of single queries (each timed
//! alone, 20 rounds over the query set) are printed to stderr: the figure the selector is held
//! to with a local model is p50 < 10 ms.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use quiver_core::select::{SelectIndex, SelectOptions, DEFAULT_MODEL_EMBEDDING_WEIGHT};
use quiver_runtime::embedder;

#[path = "../../../core/benches/common/synthetic.rs"]
mod synthetic;
use synthetic::{percentiles, registry, QUERIES};

fn model_dir() -> PathBuf {
    std::env::var_os("QUIVER_MINILM_DIR").map(PathBuf::from).expect(
        "QUIVER_MINILM_DIR names no model directory; run `cargo xtask bench`, which fetches \
         all-MiniLM-L6-v2, or set it to a directory with config.json, model.safetensors and \
         tokenizer.json",
    )
}

fn bench(c: &mut Criterion) {
    let dir = model_dir();
    let started = Instant::now();
    let model = embedder::local(&dir).expect("the model loads");
    eprintln!("model load: {:?} ({})", started.elapsed(), model.model_id());
    let tools = registry(2000);
    let started = Instant::now();
    let specs = tools.iter().map(|(n, s)| (n.as_str(), s));
    let artifact =
        embedder::embed_for_selection(model.as_ref(), specs, true).expect("the tools embed");
    eprintln!(
        "2000 tools' texts and names embedded in {:?} (once, then cached)",
        started.elapsed()
    );
    let options = SelectOptions {
        embedding_weight: DEFAULT_MODEL_EMBEDDING_WEIGHT,
        ..SelectOptions::default()
    };
    let index =
        SelectIndex::new(tools.iter().map(|(n, s)| (n.as_str(), s)), Some(&artifact), options)
            .external_embeddings();
    let rank = |q: &str| {
        let vector = model.embed(&[q]).expect("the query embeds").pop();
        index.rank_with(q, vector.as_deref(), &[], 10)
    };
    percentiles("embed + rank (local MiniLM) 2000", |q| {
        black_box(rank(q));
    });
    percentiles("embed the query alone", |q| {
        black_box(model.embed(&[q]).expect("the query embeds"));
    });
    let mut group = c.benchmark_group("select_local");
    let mut i = 0;
    let mut next = || {
        i = (i + 1) % QUERIES.len();
        QUERIES[i]
    };
    group.bench_function("rank_2000", |b| b.iter(|| rank(next())));
    group.bench_function("embed_query", |b| b.iter(|| model.embed(&[next()])));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
