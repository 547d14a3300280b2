//! `/metrics`: what the server did, in Prometheus text, through the `metrics` facade.
//!
//! - `quiver_calls_total{tool, outcome}` — `ok`, `error` or `cached` (served by the cache or a
//!   pre-fetch, the provider not called);
//! - `quiver_call_duration_seconds{tool}` — a histogram of the time a call took here;
//! - `quiver_cache_hits_total`, `quiver_prefetch_hits_total`;
//! - `quiver_rate_limited_total{user}` — requests answered 429;
//! - `quiver_callers` — callers with state on this server (a gauge);
//! - `quiver_upstream_up{upstream}` — 1 ready, 0 otherwise;
//! - `quiver_shared_state_up` — with `[state] backend = "redis"`: 1 while Redis answers, 0
//!   while the replica serves from its own state;
//! - `quiver_http_connections` — connections open now (a gauge);
//! - `quiver_http_connections_refused_total` — connections closed at once, past
//!   `max_connections`;
//! - `quiver_http_connections_timed_out_total` — connections closed for sending no request
//!   head (or TLS handshake) within `header_timeout_s`, idle keep-alive ones included;
//! - `quiver_http_sessions` — 2025-11-25 sessions open now; `quiver_http_sessions_refused_total
//!   {limit}` — `initialize` refused past `max_sessions` (`total`) or `max_sessions_per_user`
//!   (`per_user`).
//!
//! The recorder is process-wide and installed once; calls made before it exist are not counted.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use quiver_core::ToolResult;
use quiver_runtime::session::CallEffects;

/// Latency buckets, in seconds: from a cache hit to a slow upstream.
const BUCKETS: [f64; 12] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0];

/// The process's Prometheus recorder, installed on first use.
pub fn handle() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets(&BUCKETS)
                .map_err(|e| tracing::warn!("no /metrics: {e}"))
                .ok()?;
            builder.install_recorder().map_err(|e| tracing::warn!("no /metrics: {e}")).ok()
        })
        .as_ref()
}

/// Counts one call and its time.
pub fn call(tool: &str, result: &ToolResult, effects: &CallEffects, took: Duration) {
    let outcome = if effects.cache_hit {
        "cached"
    } else if result.is_error {
        "error"
    } else {
        "ok"
    };
    metrics::counter!("quiver_calls_total", "tool" => tool.to_owned(), "outcome" => outcome)
        .increment(1);
    metrics::histogram!("quiver_call_duration_seconds", "tool" => tool.to_owned())
        .record(took.as_secs_f64());
    if effects.cache_hit {
        metrics::counter!("quiver_cache_hits_total").increment(1);
    }
    if effects.prefetch_hit {
        metrics::counter!("quiver_prefetch_hits_total").increment(1);
    }
}

/// Counts a request refused for its user's rate limit.
pub fn rate_limited(user: &str) {
    metrics::counter!("quiver_rate_limited_total", "user" => user.to_owned()).increment(1);
}

/// Sets the gauges that describe the server now.
pub fn gauges(callers: usize, upstreams: &[(String, bool)]) {
    metrics::gauge!("quiver_callers").set(callers as f64);
    for (name, up) in upstreams {
        metrics::gauge!("quiver_upstream_up", "upstream" => name.clone()).set(if *up {
            1.0
        } else {
            0.0
        });
    }
}

/// Sets whether the shared state (Redis) is reachable; nothing for the in-process state.
pub fn shared_state(status: &quiver_runtime::state::StateStatus) {
    use quiver_runtime::state::StateStatus;
    match status {
        StateStatus::Local => {}
        StateStatus::Shared => metrics::gauge!("quiver_shared_state_up").set(1.0),
        StateStatus::Unreachable { .. } => metrics::gauge!("quiver_shared_state_up").set(0.0),
    }
}

/// A connection opened (`+1`) or closed (`-1`).
pub fn connections(change: f64) {
    metrics::gauge!("quiver_http_connections").increment(change);
}

/// Counts a connection closed at once, past `max_connections`.
pub fn connection_refused() {
    metrics::counter!("quiver_http_connections_refused_total").increment(1);
}

/// Counts a connection closed for sending no request head within `header_timeout_s`.
pub fn connection_timed_out() {
    metrics::counter!("quiver_http_connections_timed_out_total").increment(1);
}

/// Sets how many sessions are open.
pub fn sessions(open: usize) {
    metrics::gauge!("quiver_http_sessions").set(open as f64);
}

/// Counts an `initialize` refused past a session limit (`total` or `per_user`).
pub fn session_refused(limit: &'static str) {
    metrics::counter!("quiver_http_sessions_refused_total", "limit" => limit).increment(1);
}
