//! Throughput of two `quiver serve --http` replicas sharing one Redis against one: 100 MCP
//! sessions (half on 2026-07-28, half on 2025-11-25) calling `github_get_issue` with distinct
//! issues (none served from the cache) against a loopback GitHub that answers in 50 ms, for the
//! same time, first on one replica, then split over two — both with `[state] backend = "redis"`,
//! in one run. Prints calls/s, p50/p99 and errors for each, and fails unless every call was
//! answered without error.
//!
//! Run with `cargo xtask bench replicas_load`; `QUIVER_LOAD_SECONDS` sets each phase's length.

#![allow(missing_docs)]

use std::time::Duration;

#[path = "common/load.rs"]
mod load;
use load::{cpu_seconds, percentile, rss_kb, run_loops};

const SESSIONS: usize = 100;
const GITHUB_LATENCY: Duration = Duration::from_millis(50);

fn main() {
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        if !"replicas_load".contains(filter.as_str()) {
            return;
        }
    }
    let seconds: u64 =
        std::env::var("QUIVER_LOAD_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(phases(Duration::from_secs(seconds)));
}

async fn phases(run: Duration) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let github = load::github_answering_in(GITHUB_LATENCY).await;
    let redis = quiver_tests::RedisServer::start();
    let plugins = quiver_tests::plugins_dir(&["quiver-provider-github"]);
    let config = format!(
        "[providers.github]\nbase_url = \"{}\"\n[enrichment]\nper_host_concurrency = {SESSIONS}\n\
         [state]\nbackend = \"redis\"\n",
        github.uri()
    );
    let mut rates = Vec::new();
    for replicas in [1usize, 2] {
        redis.cli(&["FLUSHALL"]);
        let dirs: Vec<_> = (0..replicas).map(|_| tempfile::tempdir().unwrap()).collect();
        let mut servers = Vec::new();
        let mut clients = Vec::new();
        for (i, dir) in dirs.iter().enumerate() {
            let url = redis.url();
            let (child, mcp) =
                load::serve(dir.path(), &config, plugins.path(), &[("QUIVER_REDIS_URL", &url)]);
            servers.push(child);
            // The sessions split evenly over the replicas.
            let share = SESSIONS / replicas + usize::from(i < SESSIONS % replicas);
            clients.extend(load::clients(&mcp, share).await);
        }
        let cpu_before: f64 = servers.iter().map(|s| cpu_seconds(s.id())).sum();
        let redis_before = cpu_seconds(redis.pid());
        let through = run_loops(SESSIONS, run, load::get_issue_in_turn(clients)).await;
        let rss: Vec<u64> = servers.iter().map(|s| rss_kb(s.id(), "VmRSS:") / 1024).collect();
        let quiver_cpu = servers.iter().map(|s| cpu_seconds(s.id())).sum::<f64>() - cpu_before;
        let redis_cpu = cpu_seconds(redis.pid()) - redis_before;
        for mut server in servers {
            let _ = server.kill();
            let _ = server.wait();
        }
        let answered = through.latencies.len() as u64;
        let rate = answered as f64 / run.as_secs_f64();
        eprintln!(
            "replicas_load: {replicas} replica(s), {SESSIONS} sessions for {run:?}: {answered} of \
             {} answered, {} errors, {rate:.0} calls/s, p50 {:?} p99 {:?}, RSS {rss:?} MB",
            through.sent,
            through.errors,
            percentile(&through.latencies, 0.5),
            percentile(&through.latencies, 0.99)
        );
        eprintln!(
            "replicas_load: CPU per call: quiver {:.3} ms, redis-server {:.3} ms",
            quiver_cpu * 1000.0 / answered as f64,
            redis_cpu * 1000.0 / answered as f64
        );
        assert_eq!(answered, through.sent, "every request is answered exactly once");
        assert_eq!(through.errors, 0, "no call failed");
        rates.push(rate);
    }
    eprintln!("replicas_load: 2 replicas / 1 replica = {:.2}x calls/s", rates[1] / rates[0]);
}
