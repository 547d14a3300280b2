//! What the plugin boundary costs: loading a plugin, and a call of a tool that does nothing,
//! across the ABI versus the same provider in-process.
//!
//! Run with `cargo xtask bench` (it builds the release plugins first).

#![allow(missing_docs)]

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use quiver_fixture_noop::{Noop, NoopConfig};
use quiver_plugin_sdk::{Provider, ToolContext};
use quiver_runtime::config::LoadedConfig;
use quiver_runtime::{loader, Host};
use serde_json::json;

/// A first load: every iteration copies the library to a new path, so the dynamic loader maps,
/// relocates and initialises it anew (a path already loaded would only bump a reference count).
fn cold_load(c: &mut Criterion, package: &str) {
    let source = quiver_tests::dylib(package);
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0u64;
    let mut group = c.benchmark_group("plugin_load");
    group.sample_size(10).measurement_time(Duration::from_secs(5));
    group.bench_function(package, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                let path = dir.path().join(format!("{n}{}", std::env::consts::DLL_SUFFIX));
                std::fs::copy(&source, &path).unwrap();
                let started = Instant::now();
                let plugin = loader::load(black_box(Path::new(&path))).unwrap();
                total += started.elapsed();
                black_box(plugin.manifest.tools.len());
            }
            total
        })
    });
    group.finish();
}

fn plugin_load(c: &mut Criterion) {
    cold_load(c, "quiver-fixture-noop");
    cold_load(c, "quiver-provider-github");
}

fn noop_call(c: &mut Criterion) {
    let dir = quiver_tests::plugins_dir(&["quiver-fixture-noop"]);
    let host = Host::with_config(LoadedConfig::default(), Some(dir.path()));
    assert!(host.tool("noop.noop").is_some(), "{:?}", host.plugin_reports());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let provider = runtime.block_on(async { Noop::new(NoopConfig {}).unwrap() });

    let mut group = c.benchmark_group("noop_call");
    group.bench_function("in_process", |b| {
        b.iter(|| {
            let result =
                runtime.block_on(provider.call("noop", json!({"n": 1}), ToolContext::default()));
            black_box(result)
        })
    });
    group.bench_function("in_process_spawn_blocking", |b| {
        let provider =
            std::sync::Arc::new(runtime.block_on(async { Noop::new(NoopConfig {}).unwrap() }));
        let inner = std::sync::Arc::new(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
        );
        b.iter(|| {
            let (provider, inner) = (provider.clone(), inner.clone());
            let result = runtime.block_on(async move {
                tokio::task::spawn_blocking(move || {
                    inner.block_on(provider.call("noop", json!({"n": 1}), ToolContext::default()))
                })
                .await
                .unwrap()
            });
            black_box(result)
        })
    });
    group.bench_function("cross_abi_this_thread", |b| {
        b.iter(|| black_box(host.call_blocking("noop.noop", json!({"n": 1}), None, "bench")))
    });
    group.bench_function("cross_abi_host_call", |b| {
        b.iter(|| {
            black_box(runtime.block_on(host.call(
                "noop.noop",
                json!({"n": 1}),
                None,
                "bench",
                None,
            )))
        })
    });
    group.finish();
}

criterion_group!(benches, plugin_load, noop_call);
criterion_main!(benches);
