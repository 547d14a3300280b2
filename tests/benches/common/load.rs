//! Load-generation pieces shared by the `http_load` and `replicas_load` benches: `quiver serve
//! --http` started as a user would, rmcp clients on both protocol revisions, and loops that call
//! with distinct arguments until a deadline, timing each call.

use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::RoleClient;

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

pub(crate) fn rss_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or(0)
}

/// CPU seconds (user + system) process `pid` has used so far.
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 =
        fields.get(11..13).map_or(0.0, |f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
    // USER_HZ is 100 on Linux.
    ticks / 100.0
}

/// `quiver serve --http` on a free loopback port with `config` in `dir`; its MCP URL.
pub(crate) fn serve(
    dir: &Path,
    config: &str,
    plugins: &Path,
    env: &[(&str, &str)],
) -> (Child, String) {
    std::fs::write(dir.join("quiver.toml"), config).unwrap();
    let (mut command, port) = quiver_tests::serve_http_command(dir, plugins);
    let child = command.envs(env.iter().copied()).spawn().expect("spawn quiver serve --http");
    quiver_tests::wait_until_listening(port, "quiver serve --http");
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

/// `n` rmcp clients of `url`, alternately on 2026-07-28 and on 2025-11-25 (with a session).
pub(crate) async fn clients(url: &str, n: usize) -> Vec<Arc<RunningService<RoleClient, ()>>> {
    let mut clients = Vec::new();
    for i in 0..n {
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
        );
        let lifecycle = if i % 2 == 0 {
            ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            }
        } else {
            ClientLifecycleMode::Initialize
        };
        clients
            .push(Arc::new(().serve_with_lifecycle(transport, lifecycle).await.expect("connect")));
    }
    clients
}

/// A loopback GitHub whose issues (the recorded issue 1347, whatever the number) answer after
/// `latency`.
pub(crate) async fn github_answering_in(latency: Duration) -> wiremock::MockServer {
    use wiremock::matchers::{method, path_regex};
    let github = wiremock::MockServer::start().await;
    wiremock::Mock::given(method("GET"))
        .and(path_regex(r"^/repos/octocat/Hello-World/issues/\d+$"))
        .respond_with(quiver_tests::recorded_reply(200, "github", "issue.json").set_delay(latency))
        .mount(&github)
        .await;
    github
}

/// A call for [`run_loops`]: `github_get_issue` of issue `n` on the next of `clients` in turn;
/// `true` when it was answered without error.
pub(crate) fn get_issue_in_turn(
    clients: Vec<Arc<RunningService<RoleClient, ()>>>,
) -> impl Fn(u64) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> + Send + Sync
{
    let next = AtomicU64::new(0);
    move |n| {
        let client =
            Arc::clone(&clients[(next.fetch_add(1, Ordering::Relaxed) as usize) % clients.len()]);
        Box::pin(async move {
            let arguments =
                serde_json::json!({"owner": "octocat", "repo": "Hello-World", "number": n});
            let params = rmcp::model::CallToolRequestParams::new("github_get_issue")
                .with_arguments(arguments.as_object().unwrap().clone());
            matches!(client.call_tool(params).await, Ok(r) if r.is_error != Some(true))
        })
    }
}

pub(crate) struct Run {
    pub(crate) sent: u64,
    pub(crate) errors: u64,
    pub(crate) latencies: Vec<Duration>,
}

/// `loops` loops calling `call(n)` with distinct `n` until `run` passes.
pub(crate) async fn run_loops<F, Fut>(loops: usize, run: Duration, call: F) -> Run
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    let call = Arc::new(call);
    let counter = Arc::new(AtomicU64::new(1));
    let deadline = Instant::now() + run;
    let mut tasks = Vec::new();
    for _ in 0..loops {
        let (call, counter) = (Arc::clone(&call), Arc::clone(&counter));
        tasks.push(tokio::spawn(async move {
            let (mut sent, mut errors, mut latencies) = (0u64, 0u64, Vec::new());
            while Instant::now() < deadline {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                sent += 1;
                let started = Instant::now();
                if !call(n).await {
                    errors += 1;
                }
                latencies.push(started.elapsed());
            }
            (sent, errors, latencies)
        }));
    }
    let mut out = Run { sent: 0, errors: 0, latencies: Vec::new() };
    for task in tasks {
        let (sent, errors, latencies) = task.await.unwrap();
        out.sent += sent;
        out.errors += errors;
        out.latencies.extend(latencies);
    }
    out.latencies.sort();
    out
}
