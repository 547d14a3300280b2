//! The MCP round trip of a tool that does nothing, through `quiver serve`: rmcp's client writes
//! `tools/call` to the server's stdin, the server runs it through its session and the plugin
//! boundary, and the reply comes back on stdout. What is left is the protocol's own cost (JSON
//! over pipes, two processes) on top of the boundary `plugin_boundary` measures.
//!
//! Run with `cargo xtask bench` (it builds the release binary and plugins first); prints p50
//! and p95 beside criterion's estimate.

#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::json;

fn noop_round_trip(c: &mut Criterion) {
    let plugins = quiver_tests::plugins_dir(&["quiver-fixture-noop"]);
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let client = runtime.block_on(async {
        let transport = TokioChildProcess::new(
            tokio::process::Command::new(quiver_tests::quiver_bin()).configure(|cmd| {
                cmd.args(["serve", "--plugins"]).arg(plugins.path()).current_dir(dir.path());
                cmd.env("XDG_CONFIG_HOME", dir.path()).env("QUIVER_DATA_DIR", dir.path());
                cmd.env_remove("QUIVER_CONFIG").env_remove("RUST_LOG");
            }),
        )
        .expect("spawn quiver serve");
        ().serve(transport).await.expect("initialize")
    });
    // Distinct arguments each time: a repeat would be answered from the session cache.
    let mut n = 0u64;
    let mut call = || {
        n += 1;
        let arguments = json!({ "n": n }).as_object().unwrap().clone();
        let started = Instant::now();
        let result = runtime
            .block_on(
                client.call_tool(CallToolRequestParams::new("noop_noop").with_arguments(arguments)),
            )
            .expect("tools/call");
        assert_eq!(result.is_error, Some(false), "{result:?}");
        started.elapsed()
    };

    let mut samples: Vec<Duration> = (0..500).map(|_| call()).collect();
    samples.sort();
    eprintln!(
        "mcp_roundtrip/noop: p50 {:?}, p95 {:?} over {} calls",
        samples[samples.len() / 2],
        samples[samples.len() * 95 / 100],
        samples.len()
    );

    let mut group = c.benchmark_group("mcp_roundtrip");
    group.bench_function("noop", |b| b.iter_custom(|iters| (0..iters).map(|_| call()).sum()));
    group.finish();
    runtime.block_on(async { client.cancel().await.ok() });
}

criterion_group!(benches, noop_round_trip);
criterion_main!(benches);
