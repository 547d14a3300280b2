//! The local embedder on all-MiniLM-L6-v2 (the model directory named by `QUIVER_MINILM_DIR`,
//! which `cargo xtask bench` sets after fetching it).
//!
//! - `local_embedder/load`: `LocalEmbedder::load` (once per start-up).
//! - `local_embedder/embed_one_query`: one short query, as the selector embeds a turn.
//!
//! Before the measurements, the load time and p50/p90/p99 of single short queries (500 different
//! ones, each timed alone) are printed to stderr.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use quiver_local_embedder::LocalEmbedder;

const VERBS: &[&str] = &[
    "list",
    "show",
    "close",
    "reopen",
    "assign",
    "summarize",
    "rerun",
    "find",
    "create",
    "comment on",
];
const THINGS: &[&str] = &[
    "open pull requests",
    "the failing pipeline",
    "my Jira tickets",
    "yesterday's standup meeting",
    "the flaky deployment",
    "issues labelled bug",
    "the release milestone",
    "tasks due this week",
    "the merge request review",
    "the incident postmortem",
];
const SCOPES: &[&str] =
    &["", " in quiver", " for the backend team", " from last sprint", " on main"];

fn model_dir() -> PathBuf {
    match std::env::var_os("QUIVER_MINILM_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => panic!(
            "QUIVER_MINILM_DIR is not set; run `cargo xtask bench` (it fetches all-MiniLM-L6-v2) \
             or set it to the model directory"
        ),
    }
}

/// 500 different short queries, such as "rerun the flaky deployment on main".
fn queries() -> Vec<String> {
    let mut queries = Vec::new();
    for verb in VERBS {
        for thing in THINGS {
            for scope in SCOPES {
                queries.push(format!("{verb} {thing}{scope}"));
            }
        }
    }
    queries
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[rank]
}

fn report_latencies(dir: &Path) -> LocalEmbedder {
    let start = Instant::now();
    let embedder = match LocalEmbedder::load(dir) {
        Ok(embedder) => embedder,
        Err(err) => panic!("{err}"),
    };
    let load = start.elapsed();
    // The first call pays for thread pools and allocations that later calls reuse.
    embedder.embed(&["warm up"]).unwrap();

    let queries = queries();
    let mut times: Vec<Duration> = queries
        .iter()
        .map(|query| {
            let start = Instant::now();
            black_box(embedder.embed(&[query.as_str()]).unwrap());
            start.elapsed()
        })
        .collect();
    times.sort();
    let batch_start = Instant::now();
    let refs: Vec<&str> = queries.iter().map(String::as_str).collect();
    black_box(embedder.embed(&refs).unwrap());
    let batch = batch_start.elapsed();
    eprintln!(
        "local embedder ({}): load {load:.1?}; one short query, {} different ones each alone: \
         p50 {:.2?} p90 {:.2?} p99 {:.2?} max {:.2?}; all {} in one call: {batch:.1?}",
        embedder.model_id(),
        times.len(),
        percentile(&times, 0.50),
        percentile(&times, 0.90),
        percentile(&times, 0.99),
        times[times.len() - 1],
        queries.len(),
    );
    embedder
}

fn bench(c: &mut Criterion) {
    let dir = model_dir();
    let embedder = report_latencies(&dir);

    let mut group = c.benchmark_group("local_embedder");
    group.sample_size(10);
    group.bench_function("load", |b| b.iter(|| LocalEmbedder::load(black_box(&dir)).unwrap()));
    group.sample_size(50);
    group.bench_function("embed_one_query", |b| {
        b.iter(|| embedder.embed(black_box(&["list open pull requests assigned to me"])).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
