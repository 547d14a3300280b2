//! Enrichments over a synthetic 2000-tool registry through the runner and the sled store: a full
//! computation (no cache) against a warm start (every artifact from sled), and a delta of 10 new
//! tools over a store that holds the other 1990.
//!
//! Run with `cargo xtask bench` (or `cargo bench --workspace --bench enrich_store`).
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use quiver_runtime::enrich::store::{ArtifactStore, StoreError};
use quiver_runtime::enrich::{run, CatalogTool, EnrichmentSet, RunOptions};

// The registry the core enrichment benchmark uses, so the figures compare.
#[path = "../../../core/benches/common/synthetic.rs"]
mod synthetic;

fn registry(n: usize) -> Vec<CatalogTool> {
    synthetic::registry(n).into_iter().map(|(name, spec)| CatalogTool { name, spec }).collect()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let set = EnrichmentSet::new(&[]).unwrap();
    let options = RunOptions::default();
    let tools = registry(2000);
    let mut group = c.benchmark_group("enrich_2000");
    group.sample_size(10).measurement_time(Duration::from_secs(20));

    let no_store = StoreError::Io { path: "none".into(), detail: "benchmark".into() };
    group.bench_function("full_no_cache", |b| {
        b.iter(|| {
            runtime.block_on(run(tools.clone(), &set, Err(&no_store), &options, None)).unwrap()
        })
    });

    let warm_dir = tempfile::tempdir().unwrap();
    let warm = ArtifactStore::open(warm_dir.path()).unwrap();
    runtime.block_on(run(tools.clone(), &set, Ok(&warm), &options, None)).unwrap();
    group.bench_function("warm_from_sled", |b| {
        b.iter(|| runtime.block_on(run(tools.clone(), &set, Ok(&warm), &options, None)).unwrap())
    });

    // A store holding 1990 tools; each iteration adds the last 10 to a fresh copy of it.
    let base_dir = tempfile::tempdir().unwrap();
    {
        let base = ArtifactStore::open(base_dir.path()).unwrap();
        runtime.block_on(run(tools[..1990].to_vec(), &set, Ok(&base), &options, None)).unwrap();
    }
    group.bench_function("delta_10_new_tools", |b| {
        b.iter_batched(
            || {
                let copy = tempfile::tempdir().unwrap();
                copy_dir(base_dir.path(), copy.path());
                let store = ArtifactStore::open(copy.path()).unwrap();
                (copy, store)
            },
            |(_copy, store)| {
                let enriched =
                    runtime.block_on(run(tools.clone(), &set, Ok(&store), &options, None)).unwrap();
                assert_eq!(enriched.reports[0].computed, 10);
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
