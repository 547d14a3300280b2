//! What operating quiver costs per call: OpenTelemetry traces at sample ratio 1 and 0.01 and the
//! audit trail (a line per call, `reads = true`), against the same server without either, all in
//! one run. Each setup is `quiver serve` on stdio with the `noop` fixture (a read kept five
//! minutes), called by rmcp's client: a miss (new arguments each time, through the plugin) and a
//! cached call (the same arguments again). Spans go to a loopback collector that answers 200 to
//! every export. And a write (`noop` declared `mutates_external`), with and without the trail:
//! a write's line is synced to disk before the answer, so it costs what the disk's sync does.
//!
//! Run with `cargo xtask bench operations`: prints each setup's p50 and its ratio to the plain
//! server's, beside criterion's estimates.

#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

/// A served quiver with `extra` config, and its client.
struct Served {
    client: RunningService<RoleClient, ()>,
    _dir: tempfile::TempDir,
}

async fn serve(plugins: &std::path::Path, class: &str, extra: &str) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.toml");
    std::fs::write(
        &config,
        format!(
            "[tools.\"noop.noop\"]\nside_effect_class = \"{class}\"\n\
             cost_model = {{ freshness_ttl_s = 300 }}\n{extra}"
        ),
    )
    .unwrap();
    let transport = TokioChildProcess::new(
        tokio::process::Command::new(quiver_tests::quiver_bin()).configure(|cmd| {
            cmd.args(["serve", "--config"]).arg(&config).arg("--plugins").arg(plugins);
            cmd.current_dir(dir.path());
            cmd.env("XDG_CONFIG_HOME", dir.path()).env("QUIVER_DATA_DIR", dir.path());
            cmd.env_remove("QUIVER_CONFIG").env_remove("RUST_LOG");
        }),
    )
    .expect("spawn quiver serve");
    Served { client: ().serve(transport).await.expect("initialize"), _dir: dir }
}

/// One call of `noop` with `n`, timed.
fn call(runtime: &tokio::runtime::Runtime, served: &Served, n: u64) -> Duration {
    let arguments = json!({ "n": n }).as_object().unwrap().clone();
    let started = Instant::now();
    let result = runtime
        .block_on(
            served
                .client
                .call_tool(CallToolRequestParams::new("noop_noop").with_arguments(arguments)),
        )
        .expect("tools/call");
    assert_eq!(result.is_error, Some(false), "{result:?}");
    started.elapsed()
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn operations(c: &mut Criterion) {
    let plugins = quiver_tests::plugins_dir(&["quiver-fixture-noop"]);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let collector = runtime.block_on(async {
        let server = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::method("POST"))
            .respond_with(wiremock::ResponseTemplate::new(200))
            .mount(&server)
            .await;
        server
    });
    let otlp = |ratio: f64| {
        format!("[telemetry.otlp]\nendpoint = \"{}\"\nsample_ratio = {ratio}\n", collector.uri())
    };
    let setups = [
        ("plain", String::new()),
        ("traces_1", otlp(1.0)),
        ("traces_0.01", otlp(0.01)),
        ("audit", "[audit]\npath = \"audit.jsonl\"\nreads = true\n".to_owned()),
    ];
    let served: Vec<(&str, Served)> = setups
        .iter()
        .map(|(name, extra)| (*name, runtime.block_on(serve(plugins.path(), "read_only", extra))))
        .collect();
    let audit = "[audit]\npath = \"audit.jsonl\"\n";
    let writers: Vec<(&str, Served)> = [("write", ""), ("write_audit", audit)]
        .into_iter()
        .map(|(name, extra)| {
            (name, runtime.block_on(serve(plugins.path(), "mutates_external", extra)))
        })
        .collect();
    // Rounds over every setup in turn, so a slower minute of the machine falls on all alike.
    let mut misses: Vec<Vec<Duration>> = vec![Vec::new(); served.len()];
    let mut hits: Vec<Vec<Duration>> = vec![Vec::new(); served.len()];
    let mut n = 1_000_000u64;
    for _ in 0..400 {
        for (i, (_, s)) in served.iter().enumerate() {
            n += 1;
            misses[i].push(call(&runtime, s, n));
            hits[i].push(call(&runtime, s, 7));
        }
    }
    let mut writes: Vec<Vec<Duration>> = vec![Vec::new(); writers.len()];
    for _ in 0..400 {
        for (i, (_, s)) in writers.iter().enumerate() {
            n += 1;
            writes[i].push(call(&runtime, s, n));
        }
    }
    let plain_write = p50(writes[0].clone());
    for (i, (name, _)) in writers.iter().enumerate() {
        let write = p50(writes[i].clone());
        eprintln!(
            "operations/{name}: p50 {write:?} ({:.3}× without the trail)",
            write.as_secs_f64() / plain_write.as_secs_f64()
        );
    }
    let (plain_miss, plain_hit) = (p50(misses[0].clone()), p50(hits[0].clone()));
    for (i, (name, _)) in served.iter().enumerate() {
        let (miss, hit) = (p50(misses[i].clone()), p50(hits[i].clone()));
        eprintln!(
            "operations/{name}: miss p50 {miss:?} ({:.3}× plain), cached p50 {hit:?} ({:.3}× plain)",
            miss.as_secs_f64() / plain_miss.as_secs_f64(),
            hit.as_secs_f64() / plain_hit.as_secs_f64(),
        );
    }
    let mut group = c.benchmark_group("operations");
    for (name, s) in &served {
        group.bench_function(format!("{name}/miss"), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        n += 1;
                        call(&runtime, s, n)
                    })
                    .sum()
            })
        });
        group.bench_function(format!("{name}/cached"), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| call(&runtime, s, 7)).sum())
        });
    }
    group.finish();
}

criterion_group!(benches, operations);
criterion_main!(benches);
