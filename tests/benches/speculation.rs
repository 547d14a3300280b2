//! What pre-fetching buys: a scripted session (list pull requests, then read three of them, the
//! way an agent reviews) against a loopback GitHub that takes 150 ms per request, with
//! `[enrichment]` on and off. Also reports how many pre-fetches were wasted (started, but no get
//! was served by them). A get that arrives while its pre-fetch is still running joins it.
//!
//! Run with `cargo xtask bench`.

#![allow(missing_docs)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use quiver_runtime::config::LoadedConfig;
use quiver_runtime::{Host, Session};
use quiver_tests::recorded;
use serde_json::json;
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

const REPO: &str = "/repos/octocat/Hello-World";

/// The scripted agent reads the pull requests a list shows first, as its user says in a link
/// (the built-in prior, calibrated on real sessions, would not pre-fetch them).
const LINK: &str = "[tools.\"github.list_pull_requests\"]\nfollow_up = [{ tool = \"get_pull_request\", \
    probability = 0.9, projection = \"$.pull_requests[*].number\", projection_arg = \"number\" }]\n";
const LATENCY: Duration = Duration::from_millis(150);

fn speculation(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let server = runtime.block_on(async {
        let server = MockServer::start().await;
        let reply = |file: &str| {
            ResponseTemplate::new(200)
                .set_body_raw(recorded("github", file), "application/json")
                .set_delay(LATENCY)
        };
        Mock::given(method("GET"))
            .and(path(format!("{REPO}/pulls")))
            .respond_with(reply("pull_requests_list.json"))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path_regex(format!("^{REPO}/pulls/[0-9]+$")))
            .respond_with(reply("pull_request.json"))
            .mount(&server)
            .await;
        server
    });
    let plugins = quiver_tests::plugins_dir(&["quiver-provider-github"]);
    let host = |enabled: bool| {
        let text = format!(
            "[providers.github]\nbase_url = \"{}\"\n[enrichment]\nenabled = {enabled}\n\
             prefetch_timeout_ms = 50\nmax_prefetches_per_link = 3\n{LINK}",
            server.uri()
        );
        let config = LoadedConfig::parse(Path::new("quiver.toml"), &text).unwrap();
        Arc::new(Host::with_config(config, Some(plugins.path())))
    };
    // The agent reads the pull requests the list shows first; it thinks between calls.
    let script = |host: Arc<Host>| async move {
        let session = Session::new(host, "bench");
        let list = json!({"owner": "octocat", "repo": "Hello-World"});
        let (_, listed) = session.call("github.list_pull_requests", list, &[]).await;
        let mut hits = 0;
        for number in [1347, 1350, 1351] {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let get = json!({"owner": "octocat", "repo": "Hello-World", "number": number});
            let (_, effects) = session.call("github.get_pull_request", get, &[]).await;
            hits += usize::from(effects.prefetch_hit);
        }
        session.shutdown().await;
        (listed.prefetches_started, hits)
    };

    let mut group = c.benchmark_group("session_list_then_3_gets_150ms");
    group.sample_size(10).measurement_time(Duration::from_secs(10));
    for enabled in [false, true] {
        let host = host(enabled);
        let (started, hits) = runtime.block_on(script(Arc::clone(&host)));
        eprintln!(
            "speculation {}: {started} pre-fetches, {hits} of 3 gets served by them (landed or \
             joined in flight), {} wasted",
            if enabled { "on" } else { "off" },
            started.saturating_sub(hits)
        );
        group.bench_function(if enabled { "speculation_on" } else { "speculation_off" }, |b| {
            b.iter_custom(|iters| {
                let started = Instant::now();
                for _ in 0..iters {
                    runtime.block_on(script(Arc::clone(&host)));
                }
                started.elapsed()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, speculation);
criterion_main!(benches);
