//! What the state backend costs per call: the same session calls of `github.get_issue` against a
//! loopback GitHub, with `[state] backend = "memory"` and `"redis"` (a real `redis-server` on
//! loopback), in one run. For each backend: a provider call without a session (the baseline), a
//! session call that misses (state consulted, provider called, result stored) and one that hits
//! (served from the cache) — p50 and p99 — and, for Redis, the commands it ran per call (from
//! `INFO commandstats`).
//!
//! Run with `cargo xtask bench state_backend`; `QUIVER_BENCH_CALLS` sets the calls per case.

#![allow(missing_docs)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quiver_runtime::config::LoadedConfig;
use quiver_runtime::{Host, Session};
use quiver_tests::{recorded_reply, RedisServer};
use serde_json::json;
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// p50 and p99.
type Percentiles = (Duration, Duration);

/// One backend's cases: the provider call alone, a session miss, a session hit.
struct Row {
    direct: Percentiles,
    miss: Percentiles,
    hit: Percentiles,
}

impl Row {
    /// What the session adds to the provider call on a miss.
    fn added(&self) -> Percentiles {
        (self.miss.0.saturating_sub(self.direct.0), self.miss.1.saturating_sub(self.direct.1))
    }
}

fn summary(mut times: Vec<Duration>) -> Percentiles {
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

/// Commands Redis has run so far, by name (those run inside scripts included).
fn redis_command_counts(redis: &RedisServer) -> std::collections::BTreeMap<String, u64> {
    redis
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|l| {
            let name = l.strip_prefix("cmdstat_")?.split(':').next()?.to_owned();
            let calls = l.split("calls=").nth(1)?.split(',').next()?.parse::<u64>().ok()?;
            Some((name, calls))
        })
        .collect()
}

/// Commands Redis has run so far.
fn redis_commands(redis: &RedisServer) -> u64 {
    redis_command_counts(redis).values().sum()
}

/// The commands run per call since `before`, most frequent first: `evalsha 1.0, hmget 1.0, …`.
fn per_call_breakdown(
    redis: &RedisServer,
    before: &std::collections::BTreeMap<String, u64>,
    calls: u64,
) -> String {
    let mut counts: Vec<(String, f64)> = redis_command_counts(redis)
        .into_iter()
        .map(|(name, n)| {
            let delta = n - before.get(&name).copied().unwrap_or(0);
            (name, delta as f64 / calls as f64)
        })
        .filter(|(_, per_call)| *per_call >= 0.05)
        .collect();
    counts.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts.iter().map(|(name, n)| format!("{name} {n:.1}")).collect::<Vec<_>>().join(", ")
}

/// The CPU time Redis's process has used so far (user and system, every thread).
fn redis_cpu(redis: &RedisServer) -> Duration {
    let seconds: f64 = redis
        .cli(&["INFO", "cpu"])
        .lines()
        .filter_map(|l| {
            let (name, value) = l.trim().split_once(':')?;
            matches!(name, "used_cpu_sys" | "used_cpu_user").then(|| value.parse::<f64>().ok())?
        })
        .sum();
    Duration::from_secs_f64(seconds)
}

/// Bytes Redis has received and sent so far.
fn redis_bytes(redis: &RedisServer) -> u64 {
    redis
        .cli(&["INFO", "stats"])
        .lines()
        .filter_map(|l| {
            let (name, value) = l.trim().split_once(':')?;
            matches!(name, "total_net_input_bytes" | "total_net_output_bytes")
                .then(|| value.parse::<u64>().ok())?
        })
        .sum()
}

fn main() {
    if let Some(filter) = std::env::args().skip(1).find(|a| !a.starts_with('-')) {
        if !"state_backend".contains(filter.as_str()) {
            return;
        }
    }
    let calls: u64 =
        std::env::var("QUIVER_BENCH_CALLS").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(bench(calls));
}

async fn bench(calls: u64) {
    let github = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path_regex(r"^/repos/octocat/Hello-World/issues/\d+$"))
        .respond_with(recorded_reply(200, "github", "issue.json"))
        .mount(&github)
        .await;
    let redis = RedisServer::start();
    let plugins = quiver_tests::plugins_dir(&["quiver-provider-github"]);
    let issue = |n: u64| json!({"owner": "octocat", "repo": "Hello-World", "number": n});

    eprintln!("state_backend: {calls} calls per case; p50 / p99");
    let mut rows = Vec::new();
    for backend in ["memory", "redis"] {
        let text = format!(
            "[providers.github]\nbase_url = \"{}\"\n\
             [tools.\"github.get_issue\"]\ncost_model = {{ freshness_ttl_s = 3600 }}\n\
             [state]\nbackend = \"{backend}\"\nurl = \"{}\"\n",
            github.uri(),
            redis.url()
        );
        let config = LoadedConfig::parse(Path::new("quiver.toml"), &text).unwrap();
        let host = Arc::new(Host::with_config(config, Some(plugins.path())));
        let session = Session::new(Arc::clone(&host), "bench").with_scope("shared", "bench@shared");
        // Warm up: connections to GitHub and Redis, scripts loaded.
        for n in 0..200 {
            let (result, _) = session.call("github.get_issue", issue(1_000_000 + n), &[]).await;
            assert!(!result.is_error, "{}", result.text_content());
        }

        let mut direct = Vec::new();
        for n in 0..calls {
            let started = Instant::now();
            let result = host.call_with("github.get_issue", issue(n), None, "d", None, None).await;
            direct.push(started.elapsed());
            assert!(!result.is_error);
        }
        let (commands, bytes) = (redis_commands(&redis), redis_bytes(&redis));
        let before_miss = redis_command_counts(&redis);
        let cpu = redis_cpu(&redis);
        let mut miss = Vec::new();
        for n in 0..calls {
            let started = Instant::now();
            let (result, effects) = session.call("github.get_issue", issue(n), &[]).await;
            miss.push(started.elapsed());
            assert!(!result.is_error && !effects.cache_hit);
        }
        let per_miss = (redis_commands(&redis) - commands) as f64 / calls as f64;
        let bytes_miss = (redis_bytes(&redis) - bytes) as f64 / calls as f64;
        let miss_breakdown = per_call_breakdown(&redis, &before_miss, calls);
        let cpu_miss = (redis_cpu(&redis) - cpu) / calls as u32;
        let cpu = redis_cpu(&redis);
        let (commands, bytes) = (redis_commands(&redis), redis_bytes(&redis));
        let before_hit = redis_command_counts(&redis);
        let mut hit = Vec::new();
        for _ in 0..calls {
            let started = Instant::now();
            let (result, effects) = session.call("github.get_issue", issue(7), &[]).await;
            hit.push(started.elapsed());
            assert!(!result.is_error);
            assert!(effects.cache_hit || hit.len() == 1, "repeats are served from the cache");
        }
        let per_hit = (redis_commands(&redis) - commands) as f64 / calls as f64;
        let hit_breakdown = per_call_breakdown(&redis, &before_hit, calls);
        let cpu_hit = (redis_cpu(&redis).saturating_sub(cpu)) / calls as u32;
        let bytes_hit = (redis_bytes(&redis) - bytes) as f64 / calls as f64;
        let (direct, miss, hit) = (summary(direct), summary(miss), summary(hit));
        eprintln!(
            "  {backend:<6} provider call {:>8.1?} / {:>8.1?}   session miss {:>8.1?} / {:>8.1?}   \
             session hit {:>8.1?} / {:>8.1?}",
            direct.0, direct.1, miss.0, miss.1, hit.0, hit.1
        );
        if backend == "redis" {
            eprintln!(
                "         Redis commands per call: {per_miss:.1} on a miss, {per_hit:.1} on a hit; \
                 bytes to and from Redis: {bytes_miss:.0} on a miss, {bytes_hit:.0} on a hit; \
                 Redis CPU per call: {cpu_miss:.1?} on a miss, {cpu_hit:.1?} on a hit\n\
                 \x20        a miss: {miss_breakdown}\n\
                 \x20        a hit: {hit_breakdown}"
            );
        }
        rows.push(Row { direct, miss, hit });
        session.shutdown().await;
    }
    let (memory, redis_row) = (&rows[0], &rows[1]);
    let (memory_added, redis_added) = (memory.added(), redis_row.added());
    eprintln!(
        "  added by the session on a miss (p50 / p99): memory {:.1?} / {:.1?}, redis {:.1?} / \
         {:.1?}",
        memory_added.0, memory_added.1, redis_added.0, redis_added.1
    );
    eprintln!(
        "  a hit: memory {:.1?} / {:.1?}, redis {:.1?} / {:.1?} ({:.1}x at p50)",
        memory.hit.0,
        memory.hit.1,
        redis_row.hit.0,
        redis_row.hit.1,
        redis_row.hit.0.as_secs_f64() / memory.hit.0.as_secs_f64()
    );
    // Nothing pending in the background is measured after this point.
    tokio::time::sleep(Duration::from_millis(50)).await;
}
