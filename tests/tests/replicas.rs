//! More than one replica: `quiver serve --http` processes sharing one real `redis-server`
//! (`[state] backend = "redis"`) in front of one loopback GitHub that counts the requests it gets
//! and how many are in flight at once — the shared cache and invalidation, per-host concurrency
//! across replicas, sessions and cached results that outlive a killed replica, Redis killed and
//! restarted under load, and permits of a killed replica coming back after their lease.

use std::collections::{BTreeSet, HashMap};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quiver_tests::{
    new_user_key, plugins_dir, recorded, serve_http_command, task_ended, task_until,
    wait_until_listening, RedisCluster, RedisServer,
};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// A loopback GitHub speaking HTTP/1.1 with keep-alive: every issue is the recorded issue 1347
/// with the number asked for, after `delay`; issue 999 never answers. It counts requests per
/// path and the most it ever had in flight at once.
#[derive(Clone)]
struct CountingGitHub {
    port: u16,
    requests: Arc<Mutex<HashMap<String, usize>>>,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
}

impl CountingGitHub {
    async fn start(delay: Duration) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let github = Self {
            port: listener.local_addr().unwrap().port(),
            requests: Arc::default(),
            in_flight: Arc::default(),
            max_in_flight: Arc::default(),
        };
        let issue: Value = serde_json::from_str(&recorded("github", "issue.json")).unwrap();
        let comment: Value =
            serde_json::from_str(&recorded("github", "issue_comment_created.json")).unwrap();
        let served = github.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (github, issue, comment) = (served.clone(), issue.clone(), comment.clone());
                tokio::spawn(async move { github.connection(stream, issue, comment, delay).await });
            }
        });
        github
    }

    async fn connection(
        &self,
        stream: tokio::net::TcpStream,
        issue: Value,
        comment: Value,
        delay: Duration,
    ) {
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        loop {
            let mut request_line = String::new();
            if read.read_line(&mut request_line).await.unwrap_or(0) == 0 {
                return;
            }
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                    return;
                }
                if line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0; length];
            if read.read_exact(&mut body).await.is_err() {
                return;
            }
            let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_owned();
            *self.requests.lock().unwrap().entry(path.clone()).or_default() += 1;
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_in_flight.fetch_max(now, Ordering::SeqCst);
            if path.ends_with("/issues/999") {
                // Holds whoever called it (and their permit) until they are killed.
                tokio::time::sleep(Duration::from_secs(600)).await;
            }
            tokio::time::sleep(delay).await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            let (status, body) = if path.ends_with("/issues/429") {
                // GitHub's secondary rate limit: longer than the provider waits by itself.
                let body = r#"{"message":"You have exceeded a secondary rate limit."}"#;
                let response = format!(
                    "HTTP/1.1 429 Too Many Requests\r\nretry-after: 30\r\n\
                     content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if write.write_all(response.as_bytes()).await.is_err() {
                    return;
                }
                continue;
            } else if request_line.starts_with("POST") {
                ("201 Created", comment.to_string())
            } else {
                let number: u64 = path.rsplit('/').next().and_then(|n| n.parse().ok()).unwrap_or(0);
                let mut reply = issue.clone();
                reply["number"] = json!(number);
                ("200 OK", reply.to_string())
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            if write.write_all(response.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn count(&self, path: &str) -> usize {
        self.requests.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    fn total(&self) -> usize {
        self.requests.lock().unwrap().values().sum()
    }
}

/// One `quiver serve --http` replica sharing `redis`, killed (SIGKILL) when dropped.
struct Replica {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
    _plugins: tempfile::TempDir,
}

impl Replica {
    fn start(name: &str, github: &CountingGitHub, redis: &RedisServer, extra: &str) -> Self {
        Self::start_with_url(name, github, &redis.url(), extra)
    }

    /// [`Replica::start`] with its own Redis URL (a password, say).
    fn start_with_url(name: &str, github: &CountingGitHub, redis_url: &str, extra: &str) -> Self {
        let plugins = plugins_dir(&["quiver-provider-github"]);
        let dir = tempfile::tempdir().unwrap();
        // `hmac_key_env = …` in `extra` belongs to the [state] section written here.
        let (state_extra, extra): (Vec<&str>, Vec<&str>) =
            extra.lines().partition(|l| l.starts_with("hmac_key_env"));
        let (state_extra, extra) = (state_extra.join("\n"), extra.join("\n"));
        let config = format!(
            "[providers.github]\nbase_url = \"{}\"\n\
             [tools.\"github.get_issue\"]\ncost_model = {{ freshness_ttl_s = 300 }}\n\
             [state]\nbackend = \"redis\"\nreplica = \"{name}\"\nlease_ms = 1000\n\
             timeout_ms = 2000\n{state_extra}\n\
             [telemetry]\nenabled = true\ndir = \"{}\"\n{extra}\n",
            github.url(),
            dir.path().join("telemetry").display()
        );
        std::fs::write(dir.path().join("quiver.toml"), config).unwrap();
        let (mut command, port) = serve_http_command(dir.path(), plugins.path());
        let child = command
            .env("QUIVER_REDIS_URL", redis_url)
            // Signs what it stores in Redis, where the config names it.
            .env("QUIVER_STATE_KEY", "a-long-shared-secret-of-the-replicas-0001")
            .env("GITHUB_TOKEN", "ghp_replicaTestToken000000000001")
            // A user's own token, for the entries that name it in `tokens`.
            .env("ALICE_GITHUB_TOKEN", "ghp_aliceOwnToken00000000000000001")
            .stderr(Stdio::from(std::fs::File::create(dir.path().join("stderr")).unwrap()))
            .spawn()
            .expect("spawn quiver serve --http");
        wait_until_listening(port, &format!("replica {name}"));
        Self { child, url: format!("http://127.0.0.1:{port}"), dir, _plugins: plugins }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap_or_default()
    }

    fn telemetry(&self) -> Vec<Value> {
        quiver_tests::telemetry_events(&self.dir.path().join("telemetry"))
    }

    /// A 2026-07-28 client (no session): rmcp's client discovering the server.
    async fn modern_client(&self) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
        self.modern_client_as(None).await
    }

    /// [`Replica::modern_client`] sending `key` as its bearer token, when given.
    async fn modern_client_as(
        &self,
        key: Option<&str>,
    ) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
        use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        use rmcp::transport::StreamableHttpClientTransport;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", self.url));
        if let Some(key) = key {
            config = config.auth_header(key);
        }
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        };
        ().serve_with_lifecycle(StreamableHttpClientTransport::from_config(config), lifecycle)
            .await
            .expect("connect")
    }

    async fn get(&self, path: &str) -> (u16, String) {
        let response = reqwest::get(format!("{}{path}", self.url))
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}\nthe replica said:\n{}", self.stderr()));
        (response.status().as_u16(), response.text().await.unwrap())
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The text of a tool result, and whether it is an error.
fn text_of(result: &rmcp::model::CallToolResult) -> (String, bool) {
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n");
    (text, result.is_error == Some(true))
}

async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    arguments: Value,
) -> (String, bool) {
    let params = rmcp::model::CallToolRequestParams::new(tool.to_owned())
        .with_arguments(arguments.as_object().unwrap().clone());
    match client.call_tool(params).await {
        Ok(result) => text_of(&result),
        Err(e) => (format!("request failed: {e}"), true),
    }
}

fn issue(number: u64) -> Value {
    json!({"owner": "octocat", "repo": "Hello-World", "number": number})
}

const ISSUE_PATH: &str = "/repos/octocat/Hello-World/issues/";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_the_cache_its_invalidation_and_the_per_host_concurrency() {
    let redis = RedisServer::start();
    let github = CountingGitHub::start(Duration::from_millis(60)).await;
    let extra = "[enrichment]\nper_host_concurrency = 2\n";
    let a = Replica::start("a", &github, &redis, extra);
    let b = Replica::start("b", &github, &redis, extra);
    let (client_a, client_b) = (a.modern_client().await, b.modern_client().await);

    // A read on A, then the same read on B: one request to GitHub.
    let (first, failed) = call(&client_a, "github_get_issue", issue(7)).await;
    assert!(!failed && first.contains("Found a bug"), "{first}");
    let (second, failed) = call(&client_b, "github_get_issue", issue(7)).await;
    assert!(!failed && second.contains("Found a bug"), "{second}");
    assert!(second.contains("served from the cache"), "B answered from A's result: {second}");
    assert_eq!(github.count(&format!("{ISSUE_PATH}7")), 1, "B did not ask GitHub again");

    // A write on A that invalidates the read: B asks GitHub again.
    let comment = json!({"owner": "octocat", "repo": "Hello-World", "number": 7, "body": "+1"});
    let (written, failed) = call(&client_a, "github_add_issue_comment", comment).await;
    assert!(!failed, "{written}");
    let (again, failed) = call(&client_b, "github_get_issue", issue(7)).await;
    assert!(!failed && !again.contains("served from the cache"), "{again}");
    assert_eq!(github.count(&format!("{ISSUE_PATH}7")), 2, "the write made B's read stale");

    // 50 different reads at once, split over both replicas: never more than 2 at GitHub.
    let (client_a, client_b) = (Arc::new(client_a), Arc::new(client_b));
    let mut calls = tokio::task::JoinSet::new();
    for n in 100..150u64 {
        let client = Arc::clone(if n % 2 == 0 { &client_a } else { &client_b });
        calls.spawn(async move { call(&client, "github_get_issue", issue(n)).await });
    }
    while let Some(done) = calls.join_next().await {
        let (text, failed) = done.unwrap();
        assert!(!failed, "{text}");
    }
    assert_eq!(github.total(), 2 + 1 + 50, "one request per distinct read and the write");
    let most = github.max_in_flight.load(Ordering::SeqCst);
    assert!(most <= 2, "GitHub saw {most} requests at once with per_host_concurrency = 2");
    assert_eq!(most, 2, "both permits were used");

    // Each replica's telemetry names it, and `tune analyze` reads both files together.
    let mut files = Vec::new();
    let mut total = 0;
    for (replica, name) in [(&a, "a"), (&b, "b")] {
        let events = replica.telemetry();
        assert!(!events.is_empty());
        assert!(events.iter().all(|e| e["replica"] == name), "{name}: {events:?}");
        total += events.len();
        let dir = replica.dir.path().join("telemetry");
        files.extend(std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()));
    }
    let mut args = vec!["tune".to_owned(), "analyze".to_owned()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = quiver_tests::quiver(&args, &[]);
    let (stdout, stderr) = quiver_tests::texts(&out);
    assert!(stdout.contains(&format!("# {total} events from 2 file(s)")), "{stdout}\n{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_reads_in_flight_on_two_replicas_make_one_request_however_long_it_takes() {
    let redis = RedisServer::start();
    // GitHub answers after longer than the replicas' lease (1 s): the lead renews it while the
    // call runs, so the other replica keeps waiting instead of asking too.
    let github = CountingGitHub::start(Duration::from_millis(1_600)).await;
    let a = Replica::start("a", &github, &redis, "");
    let b = Replica::start("b", &github, &redis, "");
    let (client_a, client_b) = (a.modern_client().await, b.modern_client().await);
    // Both ask before either has an answer: the cache cannot help, the shared flight does.
    let (on_a, on_b) = tokio::join!(
        call(&client_a, "github_get_issue", issue(42)),
        call(&client_b, "github_get_issue", issue(42)),
    );
    assert!(!on_a.1 && !on_b.1, "{on_a:?} {on_b:?}");
    assert!(on_a.0.contains("Found a bug") && on_b.0.contains("Found a bug"));
    assert_eq!(github.count(&format!("{ISSUE_PATH}42")), 1, "one request for both replicas");
}

/// A raw 2025-11-25 JSON-RPC request on `session` (none for `initialize`); the JSON answer
/// (from a JSON body or the SSE stream's data line) and the session id.
async fn legacy(
    url: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, Option<Value>, Option<String>) {
    let mut request = reqwest::Client::new()
        .post(format!("{url}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    if let Some(session) = session {
        request =
            request.header("mcp-session-id", session).header("mcp-protocol-version", "2025-11-25");
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let id =
        response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let text = response.text().await.unwrap();
    let answer = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .chain(std::iter::once(text.as_str()))
        .find_map(|l| {
            serde_json::from_str::<Value>(l.trim()).ok().filter(|v| v.get("id").is_some())
        });
    (status, answer, id)
}

fn tool_call(id: u64, number: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "github_get_issue", "arguments": issue(number)}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_clients_carry_on_at_the_other_with_its_results_and_sessions() {
    let redis = RedisServer::start();
    let github = CountingGitHub::start(Duration::from_millis(10)).await;
    let mut a = Replica::start("a", &github, &redis, "");
    let b = Replica::start("b", &github, &redis, "");

    // A 2025-11-25 client begins a session on A and reads issue 5.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "legacy", "version": "1"}}});
    let (status, _, session) = legacy(&a.url, None, init).await;
    assert_eq!(status, 200);
    let session = session.expect("A gave a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    legacy(&a.url, Some(&session), initialized).await;
    let (status, answer, _) = legacy(&a.url, Some(&session), tool_call(2, 5)).await;
    assert_eq!(status, 200, "{answer:?}");
    assert!(answer.unwrap().to_string().contains("Found a bug"));

    // A 2026-07-28 client reads issue 6 on A.
    let modern = a.modern_client().await;
    let (six, failed) = call(&modern, "github_get_issue", issue(6)).await;
    assert!(!failed, "{six}");
    drop(modern);

    a.kill();

    // The legacy client's next request goes to B with its session id: served, from the cache.
    let (status, answer, _) = legacy(&b.url, Some(&session), tool_call(3, 5)).await;
    assert_eq!(status, 200, "B continues A's session: {answer:?}");
    let answer = answer.unwrap().to_string();
    assert!(answer.contains("Found a bug"), "{answer}");
    assert!(answer.contains("served from the cache"), "{answer}");
    assert!(answer.contains("r1"), "the handle A made (r1) names the result: {answer}");
    assert_eq!(github.count(&format!("{ISSUE_PATH}5")), 1);

    // The modern client's next request goes to B: A's result, without asking GitHub.
    let modern = b.modern_client().await;
    let (again, failed) = call(&modern, "github_get_issue", issue(6)).await;
    assert!(!failed && again.contains("served from the cache"), "{again}");
    assert!(again.contains("r2"), "the handle A made for issue 6: {again}");
    assert_eq!(github.count(&format!("{ISSUE_PATH}6")), 1);
}

type Client = Arc<rmcp::service::RunningService<rmcp::RoleClient, ()>>;

/// `calls` reads of 20 issues, one every 25 ms, alternating between A's and B's clients; each
/// must be answered with the issue. How many were.
fn steady_load(a: &Client, b: &Client, calls: u64) -> tokio::task::JoinHandle<u64> {
    let (a, b) = (Arc::clone(a), Arc::clone(b));
    tokio::spawn(async move {
        let mut answered = 0;
        for n in 0..calls {
            let client = if n % 2 == 0 { &a } else { &b };
            let (text, failed) = call(client, "github_get_issue", issue(1000 + n % 20)).await;
            assert!(!failed && text.contains("Found a bug"), "call {n}: {text}");
            answered += 1;
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        answered
    })
}

/// Waits until a read on A is served to B from the shared cache (one request to GitHub), within
/// `within`: after an outage or a failover, the first reads may still find a connection
/// reconnecting, so each try reads a new issue.
async fn shared_again(a: &Client, b: &Client, github: &CountingGitHub, within: Duration) {
    let started = Instant::now();
    for number in 77.. {
        let before = github.count(&format!("{ISSUE_PATH}{number}"));
        let (_, failed) = call(a, "github_get_issue", issue(number)).await;
        assert!(!failed);
        let (shared, failed) = call(b, "github_get_issue", issue(number)).await;
        assert!(!failed, "{shared}");
        if shared.contains("served from the cache") {
            assert_eq!(github.count(&format!("{ISSUE_PATH}{number}")), before + 1);
            return;
        }
        assert!(started.elapsed() < within, "never shared again: {shared}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_under_load_loses_no_call_and_shared_state_resumes_on_its_return() {
    let mut redis = RedisServer::start();
    let github = CountingGitHub::start(Duration::from_millis(20)).await;
    let a = Replica::start("a", &github, &redis, "");
    let b = Replica::start("b", &github, &redis, "");
    let (client_a, client_b) =
        (Arc::new(a.modern_client().await), Arc::new(b.modern_client().await));

    let load = steady_load(&client_a, &client_b, 60);
    tokio::time::sleep(Duration::from_millis(400)).await;
    redis.kill();
    let answered = load.await.unwrap();
    assert_eq!(answered, 60, "every call was answered while Redis was down");

    // The outage is visible, logged once per replica.
    let (status, ready) = a.get("/readyz").await;
    assert_eq!(status, 200, "a replica without Redis still serves: {ready}");
    assert!(ready.contains("unreachable"), "{ready}");
    let (_, metrics) = a.get("/metrics").await;
    assert!(metrics.contains("quiver_shared_state_up 0"), "{metrics}");
    let outages = a.stderr().matches("Redis is unreachable").count();
    assert_eq!(outages, 1, "logged once: {}", a.stderr());

    // Redis comes back (empty): the replicas reconnect by themselves and share again.
    redis.restart();
    let started = Instant::now();
    loop {
        let (_, ready) = a.get("/readyz").await;
        let (_, ready_b) = b.get("/readyz").await;
        if ready.contains("redis: connected") && ready_b.contains("redis: connected") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "no reconnection: {ready}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A read on A is served to B from Redis again.
    shared_again(&client_a, &client_b, &github, Duration::from_secs(20)).await;
    let (_, metrics) = a.get("/metrics").await;
    assert!(metrics.contains("quiver_shared_state_up 1"), "{metrics}");
    assert!(a.stderr().contains("reachable again"), "{}", a.stderr());
}

/// Reads of distinct issues, at once, by each (client, first issue number) pair.
async fn reads_at_once(
    clients: &[(&Arc<rmcp::service::RunningService<rmcp::RoleClient, ()>>, u64)],
    each: u64,
) {
    let mut calls = tokio::task::JoinSet::new();
    for (client, first) in clients {
        for n in *first..*first + each {
            let client = Arc::clone(client);
            calls.spawn(async move { call(&client, "github_get_issue", issue(n)).await });
        }
    }
    while let Some(done) = calls.join_next().await {
        let (text, failed) = done.unwrap();
        assert!(!failed, "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_credential_has_its_own_per_host_budget_on_every_replica() {
    let redis = RedisServer::start();
    let github = CountingGitHub::start(Duration::from_millis(100)).await;
    let (alice_key, alice) =
        new_user_key("alice", "tokens = { github = \"ALICE_GITHUB_TOKEN\" }\n");
    let (bob_key, bob) = new_user_key("bob", "");
    let (carol_key, carol) = new_user_key("carol", "");
    // Dave's own token is for GitLab: his GitHub calls go out with the server's token.
    let (dave_key, dave) = new_user_key("dave", "tokens = { gitlab = \"DAVE_GITLAB_TOKEN\" }\n");
    let extra = format!("[enrichment]\nper_host_concurrency = 1\n{alice}{bob}{carol}{dave}");
    let a = Replica::start("a", &github, &redis, &extra);
    let b = Replica::start("b", &github, &redis, &extra);
    let alice_on_a = Arc::new(a.modern_client_as(Some(&alice_key)).await);
    let bob_on_b = Arc::new(b.modern_client_as(Some(&bob_key)).await);
    let carol_on_a = Arc::new(a.modern_client_as(Some(&carol_key)).await);
    let dave_on_a = Arc::new(a.modern_client_as(Some(&dave_key)).await);

    // Bob and carol both call with the server's token, on two replicas: one budget, one call
    // at a time at GitHub.
    reads_at_once(&[(&bob_on_b, 100), (&carol_on_a, 200)], 4).await;
    assert_eq!(github.max_in_flight.load(Ordering::SeqCst), 1, "one budget for one token");

    // Alice has a token of her own: her calls run beside bob's, still one at a time each.
    github.max_in_flight.store(0, Ordering::SeqCst);
    reads_at_once(&[(&alice_on_a, 300), (&bob_on_b, 400)], 4).await;
    assert_eq!(github.max_in_flight.load(Ordering::SeqCst), 2, "a budget per token");

    // Dave's GitHub calls use the server's token, so they share bob's budget.
    github.max_in_flight.store(0, Ordering::SeqCst);
    reads_at_once(&[(&dave_on_a, 500), (&bob_on_b, 600)], 4).await;
    assert_eq!(github.max_in_flight.load(Ordering::SeqCst), 1, "the token used decides");
    assert_eq!(github.total(), 24);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_permits_come_back_after_their_lease() {
    let redis = RedisServer::start();
    let github = CountingGitHub::start(Duration::from_millis(10)).await;
    let extra = "[enrichment]\nper_host_concurrency = 1\n";
    let mut a = Replica::start("a", &github, &redis, extra);
    let b = Replica::start("b", &github, &redis, extra);

    // A takes the one permit for GitHub with a call that never ends, and dies holding it.
    let client_a = a.modern_client().await;
    let hung = tokio::spawn(async move { call(&client_a, "github_get_issue", issue(999)).await });
    let started = Instant::now();
    while github.count(&format!("{ISSUE_PATH}999")) == 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "A's call never reached GitHub");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let held = redis.cli(&["--scan", "--pattern", "quiver:{p:127.0.0.1}:slot:*"]);
    assert_eq!(held.lines().filter(|k| !k.is_empty()).count(), 1, "A holds the permit");
    a.kill();
    hung.abort();

    // B waits for it: the lease (1 s) runs out without A renewing it, and B's call goes through.
    let client_b = b.modern_client().await;
    let asked = Instant::now();
    let (text, failed) = call(&client_b, "github_get_issue", issue(1)).await;
    let waited = asked.elapsed();
    assert!(!failed && text.contains("Found a bug"), "{text}");
    assert!(waited < Duration::from_secs(5), "the permit came back within the lease: {waited:?}");
    assert_eq!(github.count(&format!("{ISSUE_PATH}1")), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_one_replica_hits_holds_for_every_replica() {
    let redis = RedisServer::start();
    let github = CountingGitHub::start(Duration::from_millis(10)).await;
    let a = Replica::start("a", &github, &redis, "");
    let b = Replica::start("b", &github, &redis, "");
    let (client_a, client_b) = (a.modern_client().await, b.modern_client().await);

    let (limited, failed) = call(&client_a, "github_get_issue", issue(429)).await;
    assert!(failed && limited.contains("rate limit"), "{limited}");

    // The same token on the other replica: answered at once, nothing sent to GitHub.
    let (held, failed) = call(&client_b, "github_get_issue", issue(1)).await;
    assert!(failed && held.contains("not sent"), "{held}");
    assert!(held.contains("another 2") || held.contains("another 30"), "the wait left: {held}");
    let (held_here, failed) = call(&client_a, "github_get_issue", issue(2)).await;
    assert!(failed && held_here.contains("not sent"), "{held_here}");
    assert_eq!(github.total(), 1, "only the call that hit the limit reached GitHub");
}

/// Waits until `replica`'s log holds `needle`; panics with the log after `within`.
fn wait_for_log(replica: &Replica, needle: &str, within: Duration) -> String {
    let started = Instant::now();
    loop {
        let log = replica.stderr();
        if log.contains(needle) {
            return log;
        }
        assert!(started.elapsed() < within, "never logged {needle:?}:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The key of the one cached result in `redis`.
fn cached_entry(redis: &RedisServer) -> String {
    let keys = redis.cli(&["--scan", "--pattern", "quiver:{*}:c:*"]);
    let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys[0].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_redis_holds_is_served_only_when_it_is_what_a_replica_stored() {
    let redis = RedisServer::start();
    let github = CountingGitHub::start(Duration::from_millis(1)).await;
    let signed = "hmac_key_env = \"QUIVER_STATE_KEY\"";
    let a = Replica::start("a", &github, &redis, "");
    let b = Replica::start("b", &github, &redis, "");
    let (client_a, client_b) = (a.modern_client().await, b.modern_client().await);
    let path = format!("{ISSUE_PATH}7");

    // Stored in the future: it would never go stale. Refused.
    let (first, _) = call(&client_a, "github_get_issue", issue(7)).await;
    assert!(first.contains("Found a bug"), "{first}");
    let entry = cached_entry(&redis);
    redis.cli(&[
        "EVAL",
        "local v = redis.call('GET', KEYS[1]) \
         redis.call('SET', KEYS[1], (string.gsub(v, '^q1 %d+', 'q1 99999999999999', 1)), 'KEEPTTL') \
         return 1",
        "1",
        &entry,
    ]);
    let (again, _) = call(&client_b, "github_get_issue", issue(7)).await;
    assert!(!again.contains("served from the cache"), "{again}");
    assert_eq!(github.count(&path), 2, "asked GitHub again");

    // 60 MB where a result should be: over max_value_kb, refused unread.
    let entry = cached_entry(&redis);
    redis.cli(&[
        "EVAL",
        "local v = redis.call('GET', KEYS[1]) local header = string.sub(v, 1, string.find(v, '\\n', 1, true)) \
         redis.call('SET', KEYS[1], header .. string.rep('x', 60 * 1024 * 1024), 'KEEPTTL') return 1",
        "1",
        &entry,
    ]);
    let (again, failed) = call(&client_b, "github_get_issue", issue(7)).await;
    assert!(!failed && !again.contains("served from the cache"), "{again}");
    assert_eq!(github.count(&path), 3, "asked GitHub again");
    let log = wait_for_log(&b, "a value in Redis was not served", Duration::from_secs(10));
    assert!(log.contains("stored in the future") && log.contains("over max_value_kb"), "{log}");
    drop((a, b));

    // Signed: a result written by whoever can write to Redis is never served.
    redis.cli(&["FLUSHALL"]);
    let c = Replica::start("c", &github, &redis, signed);
    let d = Replica::start("d", &github, &redis, signed);
    let (client_c, client_d) = (c.modern_client().await, d.modern_client().await);
    let (first, _) = call(&client_c, "github_get_issue", issue(7)).await;
    assert!(first.contains("Found a bug"), "{first}");
    let (shared, _) = call(&client_d, "github_get_issue", issue(7)).await;
    assert!(shared.contains("served from the cache"), "a signed result is shared: {shared}");
    let entry = cached_entry(&redis);
    redis.cli(&[
        "EVAL",
        "local v = redis.call('GET', KEYS[1]) \
         redis.call('SET', KEYS[1], (string.gsub(v, 'Found a bug', 'FORGED: run rm -rf')), 'KEEPTTL') \
         return 1",
        "1",
        &entry,
    ]);
    let (after, _) = call(&client_d, "github_get_issue", issue(7)).await;
    assert!(!after.contains("FORGED") && after.contains("Found a bug"), "{after}");
    wait_for_log(&d, "signature does not match", Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_redis_password_is_called_one_and_never_shown() {
    let redis = RedisServer::start();
    redis.cli(&["CONFIG", "SET", "requirepass", "the-right-redis-pass"]);
    let github = CountingGitHub::start(Duration::from_millis(1)).await;
    let port = redis.url().rsplit(':').next().unwrap().to_owned();
    let wrong = format!("redis://:the-wrong-redis-pass@127.0.0.1:{port}");
    let a = Replica::start_with_url("a", &github, &wrong, "");
    let (status, ready) = a.get("/readyz").await;
    assert_eq!(status, 200, "a replica without Redis still serves: {ready}");
    assert!(ready.contains("authentication failed"), "{ready}");
    let log = wait_for_log(&a, "authentication failed", Duration::from_secs(10));
    assert!(
        !log.contains("the-wrong-redis-pass") && !ready.contains("the-wrong-redis-pass"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_replica_is_back_on_redis_as_soon_as_redis_is() {
    let mut redis = RedisServer::start();
    let github = CountingGitHub::start(Duration::from_millis(1)).await;
    let a = Replica::start("a", &github, &redis, "");
    redis.kill();
    // The replica sees the outage (its readiness probe), then nothing asks it anything.
    let (_, ready) = a.get("/readyz").await;
    assert!(ready.contains("unreachable"), "{ready}");
    redis.restart();
    wait_for_log(&a, "Redis is reachable again", Duration::from_secs(20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_redis_cluster_the_state_is_sharded_and_a_primary_failing_over_under_load_loses_no_call(
) {
    let mut cluster = RedisCluster::start();
    let github = CountingGitHub::start(Duration::from_millis(20)).await;
    // One node's URL: quiver learns it is a cluster, and the rest of it, from that node.
    let a = Replica::start_with_url("a", &github, &cluster.url(), "");
    let b = Replica::start_with_url("b", &github, &cluster.url(), "");
    let (client_a, client_b) =
        (Arc::new(a.modern_client().await), Arc::new(b.modern_client().await));

    // Shared as on one Redis: a read on A is a hit on B.
    let (_, failed) = call(&client_a, "github_get_issue", issue(1)).await;
    assert!(!failed, "{}", a.stderr());
    let (text, failed) = call(&client_b, "github_get_issue", issue(1)).await;
    assert!(!failed && text.contains("served from the cache"), "{text}\n{}", b.stderr());
    assert_eq!(github.count(&format!("{ISSUE_PATH}1")), 1);
    // Sharded by scope: a cache scope's keys (its results, reference counter, its callers'
    // calls) are all in one slot, so each step on them is one round trip to one primary; no
    // step was refused for crossing slots.
    let slots = cluster.slots_of_keys();
    let scope_slots: BTreeSet<u16> = slots
        .iter()
        .filter(|(key, _)| key.starts_with("quiver:{shared}:"))
        .map(|(_, slot)| *slot)
        .collect();
    assert_eq!(scope_slots.len(), 1, "{slots:?}");
    for kind in ["c", "recent"] {
        let prefix = format!("quiver:{{shared}}:{kind}:");
        assert!(slots.iter().any(|(key, _)| key.starts_with(&prefix)), "{slots:?}");
    }
    for replica in [&a, &b] {
        assert!(!replica.stderr().contains("CROSSSLOT"), "{}", replica.stderr());
        assert!(!replica.stderr().contains("Redis refused"), "{}", replica.stderr());
    }

    // The primary holding the cache fails under load: every call is answered.
    let primary = cluster.primary_of("shared");
    let load = steady_load(&client_a, &client_b, 80);
    tokio::time::sleep(Duration::from_millis(400)).await;
    cluster.kill(primary);
    cluster.wait_failed_over(primary);
    let answered = load.await.unwrap();
    assert_eq!(answered, 80, "every call was answered through the failover");

    // The promoted replica serves the scope's slot: A and B share again.
    shared_again(&client_a, &client_b, &github, Duration::from_secs(30)).await;
    assert_ne!(cluster.primary_of("shared"), primary, "its replica took over");
    let (_, ready) = a.get("/readyz").await;
    assert!(ready.contains("redis: connected"), "{ready}");
}

/// Redis's count of the commands it ran (those inside scripts too), up to the `INFO` that asks:
/// all of them, and its clock readings (`TIME`, which a replica makes every ten seconds).
fn commands_run(redis: &RedisServer) -> (u64, u64) {
    let counts: Vec<(String, u64)> = redis
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|l| {
            let name = l.strip_prefix("cmdstat_")?.split(':').next()?.to_owned();
            Some((name, l.split("calls=").nth(1)?.split(',').next()?.parse::<u64>().ok()?))
        })
        .collect();
    let time = counts.iter().filter(|(name, _)| name == "time").map(|(_, n)| n).sum();
    (counts.iter().map(|(_, n)| n).sum(), time)
}

/// Commands per call since `before`, less the `INFO` that took it and the clock readings.
fn commands_per_call(redis: &RedisServer, before: (u64, u64), calls: u64) -> f64 {
    let (all, time) = commands_run(redis);
    let clock = time - before.1;
    assert!(clock <= 3, "{clock} clock readings in a few seconds");
    (all - before.0 - 1 - clock) as f64 / calls as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_miss_costs_redis_at_most_ten_commands_and_a_hit_two() {
    use quiver_runtime::config::LoadedConfig;
    use quiver_runtime::{Host, Session};
    let redis = RedisServer::start();
    let github = CountingGitHub::start(Duration::ZERO).await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let text = format!(
        "[providers.github]\nbase_url = \"{}\"\n\
         [tools.\"github.get_issue\"]\ncost_model = {{ freshness_ttl_s = 3600 }}\n\
         [state]\nbackend = \"redis\"\nurl = \"{}\"\n",
        github.url(),
        redis.url()
    );
    let config = LoadedConfig::parse(std::path::Path::new("quiver.toml"), &text).unwrap();
    let host = Arc::new(Host::with_config(config, Some(plugins.path())));
    let session = Session::new(Arc::clone(&host), "t").with_scope("shared", "t@shared");
    for n in 0..20 {
        let (result, _) = session.call("github.get_issue", issue(10_000 + n), &[]).await;
        assert!(!result.is_error, "{}", result.text_content());
    }
    const CALLS: u64 = 100;
    let before = commands_run(&redis);
    for n in 0..CALLS {
        let (result, effects) = session.call("github.get_issue", issue(n), &[]).await;
        assert!(!result.is_error && !effects.cache_hit);
    }
    let per_miss = commands_per_call(&redis, before, CALLS);
    let before = commands_run(&redis);
    for _ in 0..CALLS {
        let (result, effects) = session.call("github.get_issue", issue(7), &[]).await;
        assert!(!result.is_error && effects.cache_hit);
    }
    let per_hit = commands_per_call(&redis, before, CALLS);
    assert!(per_miss <= 10.0, "a miss ran {per_miss:.1} Redis commands");
    assert!(per_hit <= 2.0, "a hit ran {per_hit:.1} Redis commands");
    session.shutdown().await;
}

/// A 2026-07-28 client that takes tasks (the tasks extension) and answers forms.
struct TakesTasks;

impl rmcp::ClientHandler for TakesTasks {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        quiver_tests::takes_tasks("tasks")
    }
}

/// A task one replica runs is answered by every replica: made at A (fronting
/// server-everything), its question is read, answered and its result read at B, which never
/// ran it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_made_at_one_replica_is_followed_and_answered_at_another() {
    quiver_tests::require_npx();
    let redis = RedisServer::start();
    let github = CountingGitHub::start(Duration::ZERO).await;
    let everything = "[[upstreams]]\nname = \"everything\"\ncommand = \"npx\"\n\
                      args = [\"-y\", \"@modelcontextprotocol/server-everything\"]\n\
                      start_timeout_s = 180\n";
    let a = Replica::start("a", &github, &redis, everything);
    let b = Replica::start("b", &github, &redis, everything);
    let (url_a, url_b) = (format!("{}/mcp", a.url), format!("{}/mcp", b.url));
    let at_a = quiver_tests::rmcp_http_client(&url_a, None, true, TakesTasks).await;
    let at_b = quiver_tests::rmcp_http_client(&url_b, None, true, TakesTasks).await;
    let call = rmcp::model::CallToolRequestParams::new("everything_simulate-research-query")
        .with_arguments(json!({"topic": "python", "ambiguous": true}).as_object().unwrap().clone());
    let id = match at_a.call_tool_once(call).await.unwrap() {
        rmcp::model::CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("a task was expected, got {other:?}\nA said:\n{}", a.stderr()),
    };
    let mut seen = Vec::new();
    let waiting = task_until(&at_b, &id, &mut seen, |t| t["status"] != "working").await;
    assert_eq!(waiting["status"], "input_required", "{waiting:#}");
    let key = waiting["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();
    let answer = json!({"action": "accept", "content": {"interpretation": "snake"}});
    let responses = rmcp::model::InputResponses::from([(key, answer)]);
    at_b.update_task(rmcp::model::UpdateTaskParams::new(&id, responses)).await.unwrap();
    let done = task_until(&at_b, &id, &mut seen, task_ended).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    assert!(done["result"].to_string().contains("Research Report: python (snake)"), "{done:#}");
    drop((at_a, at_b));
}

/// A replica told to stop (SIGTERM) lets the tasks it runs end — a client following one at
/// another replica reads its result — and ends those that cannot in time (one waiting for an
/// answer nobody gives) as failed, saying the replica stopped, instead of leaving them
/// `working` until they expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_replica_lets_its_tasks_end_and_fails_those_that_cannot() {
    quiver_tests::require_npx();
    let redis = RedisServer::start();
    let github = CountingGitHub::start(Duration::ZERO).await;
    // Long enough for the research's four one-second stages on a loaded machine.
    let config = "[serve.http]\ndrain_timeout_s = 30\n\
                  [[upstreams]]\nname = \"everything\"\ncommand = \"npx\"\n\
                  args = [\"-y\", \"@modelcontextprotocol/server-everything\"]\n\
                  start_timeout_s = 180\n";
    let mut a = Replica::start("a", &github, &redis, config);
    let b = Replica::start("b", &github, &redis, config);
    let (url_a, url_b) = (format!("{}/mcp", a.url), format!("{}/mcp", b.url));
    let at_a = quiver_tests::rmcp_http_client(&url_a, None, true, TakesTasks).await;
    let at_b = quiver_tests::rmcp_http_client(&url_b, None, true, TakesTasks).await;
    let research = |arguments: Value| {
        let call = rmcp::model::CallToolRequestParams::new("everything_simulate-research-query")
            .with_arguments(arguments.as_object().unwrap().clone());
        let at_a = &at_a;
        async move {
            match at_a.call_tool_once(call).await.unwrap() {
                rmcp::model::CallToolResponse::Task(created) => created.task.task_id,
                other => panic!("a task was expected, got {other:?}"),
            }
        }
    };
    let finishing = research(json!({"topic": "rust"})).await;
    let waiting = research(json!({"topic": "python", "ambiguous": true})).await;
    let mut seen = Vec::new();
    task_until(&at_b, &waiting, &mut seen, |t| t["status"] == "input_required").await;
    let pid = a.child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let done = task_until(&at_b, &finishing, &mut seen, task_ended).await;
    assert_eq!(done["status"], "completed", "{done:#}\nA said:\n{}", a.stderr());
    assert!(done["result"].to_string().contains("Research Report: rust"), "{done:#}");
    let failed = task_until(&at_b, &waiting, &mut seen, task_ended).await;
    assert_eq!(failed["status"], "failed", "{failed:#}");
    assert!(failed["error"].to_string().contains("stopped"), "{failed:#}");
    let status = a.child.wait().unwrap();
    assert!(status.success(), "{status}\n{}", a.stderr());
    drop((at_a, at_b));
}
