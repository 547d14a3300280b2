//! `quiver serve --http` under load: 200 concurrent MCP sessions (100 on 2026-07-28, 100 on
//! 2025-11-25, rmcp's client) calling `github_get_issue` for 30 s against a loopback GitHub that
//! answers in 50 ms, each call a distinct issue so none is served from the cache. Before it, the
//! same 200 loops call the fake directly for 5 s: the baseline. Prints throughput, p50/p99
//! latency added by quiver (its percentile minus the baseline's), errors, and quiver's RSS, and
//! fails unless every request was answered exactly once without error.
//!
//! Run with `cargo xtask bench http_load` (release binary and plugins built first);
//! `QUIVER_LOAD_SECONDS` shortens the run.

#![allow(missing_docs)]

use std::time::Duration;

#[path = "common/load.rs"]
mod load;
use load::{cpu_seconds, percentile, rss_kb, run_loops};

const SESSIONS: usize = 200;
const GITHUB_LATENCY: Duration = Duration::from_millis(50);

fn main() {
    // `cargo bench` passes a filter and flags; run only when the filter names this bench.
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        if !"http_load".contains(filter.as_str()) {
            return;
        }
    }
    let seconds: u64 =
        std::env::var("QUIVER_LOAD_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(load(Duration::from_secs(seconds)));
}

async fn load(run: Duration) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let github = load::github_answering_in(GITHUB_LATENCY).await;

    // Baseline: the same concurrency straight at the fake.
    let http = reqwest::Client::new();
    let base = github.uri();
    let baseline = run_loops(SESSIONS, Duration::from_secs(5), move |n| {
        let (http, url) = (http.clone(), format!("{base}/repos/octocat/Hello-World/issues/{n}"));
        async move { http.get(url).send().await.map(|r| r.status().is_success()).unwrap_or(false) }
    })
    .await;

    let plugins = quiver_tests::plugins_dir(&["quiver-provider-github"]);
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[providers.github]\nbase_url = \"{}\"\n[enrichment]\nper_host_concurrency = {SESSIONS}\n",
        github.uri()
    );
    let (mut quiver, url) = load::serve(dir.path(), &config, plugins.path(), &[]);
    let clients = load::clients(&url, SESSIONS).await;
    let through = run_loops(SESSIONS, run, load::get_issue_in_turn(clients)).await;
    let (rss, peak) = (rss_kb(quiver.id(), "VmRSS:"), rss_kb(quiver.id(), "VmHWM:"));
    let cpu = cpu_seconds(quiver.id());
    let _ = quiver.kill();
    let _ = quiver.wait();

    let answered = through.latencies.len() as u64;
    eprintln!(
        "http_load: {SESSIONS} sessions for {:?}: {answered} calls answered of {} sent, {} errors, \
         {:.0} calls/s",
        run,
        through.sent,
        through.errors,
        answered as f64 / run.as_secs_f64()
    );
    let (b50, b99) = (percentile(&baseline.latencies, 0.5), percentile(&baseline.latencies, 0.99));
    let (q50, q99) = (percentile(&through.latencies, 0.5), percentile(&through.latencies, 0.99));
    eprintln!(
        "http_load: latency direct p50 {b50:?} p99 {b99:?}; through quiver p50 {q50:?} p99 {q99:?}; \
         added p50 {:?} p99 {:?}",
        q50.saturating_sub(b50),
        q99.saturating_sub(b99)
    );
    eprintln!("http_load: quiver RSS {} MB at the end, {} MB peak", rss / 1024, peak / 1024);
    eprintln!(
        "http_load: quiver CPU {:.3} ms per call",
        cpu * 1000.0 / through.latencies.len().max(1) as f64
    );
    assert_eq!(answered, through.sent, "every request is answered exactly once");
    assert_eq!(through.errors, 0, "no call failed");
}
