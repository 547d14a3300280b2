//! quiver as a gateway, timed against the server it fronts, in one run with one client:
//! `server-everything`'s `echo` called by rmcp's client directly (`npx -y …`), and the same tool
//! through `quiver serve` (session, value model, selection policy, the upstream client). The
//! difference is what quiver adds per call; the goal is under 1 ms at p50. Also the start-up of
//! a quiver with two stdio upstreams (`server-everything` and `server-filesystem`), measured as
//! `quiver tools list` from spawn to exit.
//!
//! Run with `cargo xtask bench` (it builds the release binary first; npm must reach the
//! registry or have the servers cached, as `cargo xtask test` leaves them).

#![allow(missing_docs)]

use std::process::Command;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

const EVERYTHING: &str = "@modelcontextprotocol/server-everything";
const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem";

fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let path = dir.join("quiver.toml");
    std::fs::write(
        &path,
        format!(
            "[[upstreams]]\nname = \"everything\"\ncommand = \"npx\"\nargs = [\"-y\", \"{EVERYTHING}\"]\n\
             [[upstreams]]\nname = \"fs\"\ncommand = \"npx\"\nargs = [\"-y\", \"{FILESYSTEM}\", \"{}\"]\n",
            files.display()
        ),
    )
    .unwrap();
    path
}

/// p50 and p95 of `samples`.
fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (samples[samples.len() / 2], samples[samples.len() * 95 / 100])
}

fn timed_echo(
    runtime: &tokio::runtime::Runtime,
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    n: u64,
) -> Duration {
    // Distinct messages: a repeat could be answered from quiver's session cache.
    let arguments = json!({ "message": format!("m{n}") }).as_object().unwrap().clone();
    let started = Instant::now();
    let result = runtime
        .block_on(
            client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments)),
        )
        .expect("tools/call");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    started.elapsed()
}

fn gateway(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let (direct, through) = runtime.block_on(async {
        let direct = TokioChildProcess::new(tokio::process::Command::new("npx").configure(|cmd| {
            cmd.args(["-y", EVERYTHING]).current_dir(dir.path());
        }))
        .expect("spawn server-everything");
        let through = TokioChildProcess::new(
            tokio::process::Command::new(quiver_tests::quiver_bin()).configure(|cmd| {
                cmd.args(["serve", "--config"]).arg(&config);
                cmd.args(["--plugins"]).arg(dir.path().join("no-plugins"));
                cmd.current_dir(dir.path());
                cmd.env("XDG_CONFIG_HOME", dir.path()).env("QUIVER_DATA_DIR", dir.path());
                cmd.env_remove("QUIVER_CONFIG").env_remove("RUST_LOG");
            }),
        )
        .expect("spawn quiver serve");
        (
            ().serve(direct).await.expect("initialize server-everything"),
            ().serve(through).await.expect("initialize quiver"),
        )
    });

    // Interleaved, so both see the same machine.
    let (mut direct_samples, mut through_samples) = (Vec::new(), Vec::new());
    for n in 0..600 {
        direct_samples.push(timed_echo(&runtime, &direct, "echo", n));
        through_samples.push(timed_echo(&runtime, &through, "everything_echo", n));
    }
    let (d50, d95) = percentiles(direct_samples);
    let (t50, t95) = percentiles(through_samples);
    eprintln!(
        "upstream/echo: direct p50 {d50:?} p95 {d95:?}; through quiver p50 {t50:?} p95 {t95:?}; \
         added at p50 {:?} ({:.2}x)",
        t50.saturating_sub(d50),
        t50.as_secs_f64() / d50.as_secs_f64()
    );

    let mut group = c.benchmark_group("upstream_echo");
    let mut n = 10_000;
    group.bench_function("direct", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    n += 1;
                    timed_echo(&runtime, &direct, "echo", n)
                })
                .sum()
        })
    });
    group.bench_function("through_quiver", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    n += 1;
                    timed_echo(&runtime, &through, "everything_echo", n)
                })
                .sum()
        })
    });
    group.finish();
    runtime.block_on(async {
        direct.cancel().await.ok();
        through.cancel().await.ok();
    });

    // Start-up: spawn to exit of a command that waits for both upstreams.
    let startup = || {
        let started = Instant::now();
        let out = Command::new(quiver_tests::quiver_bin())
            .args(["tools", "list", "--config"])
            .arg(&config)
            .args(["--plugins"])
            .arg(dir.path().join("no-plugins"))
            .current_dir(dir.path())
            .env("XDG_CONFIG_HOME", dir.path())
            .env("QUIVER_DATA_DIR", dir.path())
            .output()
            .expect("run quiver");
        let listed = String::from_utf8_lossy(&out.stdout);
        assert!(
            listed.contains("everything.echo") && listed.contains("fs.read_text_file"),
            "{listed}"
        );
        started.elapsed()
    };
    let (s50, s95) = percentiles((0..10).map(|_| startup()).collect());
    eprintln!("upstream/startup (two stdio upstreams, quiver tools list): p50 {s50:?} p95 {s95:?}");
    let mut group = c.benchmark_group("upstream_startup");
    group.sample_size(10);
    group.bench_function("two_stdio_upstreams", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| startup()).sum())
    });
    group.finish();
}

criterion_group!(benches, gateway);
criterion_main!(benches);
