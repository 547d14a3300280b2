//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned and installed
//! with Node.js 22 by `cargo xtask test`) run against a server written with the official Python
//! SDK to the suite's scenario descriptions (`tests/mcp/conformance_server.py`): directly, then
//! through `quiver serve --http` fronting it with `prefix = ""` — over stdio and over HTTP, in
//! `all` and `search` mode. Every scenario the server passes directly must pass through quiver;
//! quiver alone (no upstream) passes every scenario that asks for no fixture of the suite's.
//!
//! Each test prints its table (`cargo xtask test -- --test conformance --nocapture`): the
//! README's conformance figures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use quiver_tests::{
    free_port, plugins_dir, require_python_sdk, serve_http_command, wait_until_listening,
};

/// Where `cargo xtask test` installed the suite and Node.js 22.
fn suite_dir() -> PathBuf {
    let dir = std::env::var_os("QUIVER_CONFORMANCE_DIR").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "QUIVER_CONFORMANCE_DIR is not set: run the tests with `cargo xtask test`, which \
             installs the MCP conformance suite and Node.js 22 and names their directory"
        )
    });
    assert!(
        dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js").exists(),
        "the conformance suite is missing from `{}`: run `cargo xtask test`, which installs it",
        dir.display()
    );
    dir
}

/// The Node.js 22 binary npm put beside the suite.
fn node(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir.join("node_modules"))
        .expect("list the suite's node_modules")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("node-")))
        .map(|p| p.join("bin/node"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no Node.js under `{}`: run `cargo xtask test`", dir.display()))
}

/// Runs every active server scenario against `url`: whether each passed (no check failed).
fn run_suite(url: &str) -> BTreeMap<String, bool> {
    let dir = suite_dir();
    let out = tempfile::tempdir().unwrap();
    let run = Command::new(node(&dir))
        .arg(dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args(["server", "--url", url, "--output-dir"])
        .arg(out.path())
        .output()
        .expect("run the conformance suite");
    let mut outcomes = BTreeMap::new();
    for entry in std::fs::read_dir(out.path()).unwrap().filter_map(Result::ok) {
        let folder = entry.file_name().to_string_lossy().into_owned();
        // `server-<scenario>-<ISO timestamp>`
        let Some(scenario) = folder.strip_prefix("server-").and_then(|rest| {
            let timestamp = |at: usize| {
                let tail = rest.as_bytes().get(at..at + 12)?;
                let shape = b"-dddd-dd-ddT";
                shape
                    .iter()
                    .zip(tail)
                    .all(|(s, c)| if *s == b'd' { c.is_ascii_digit() } else { s == c })
                    .then_some(at)
            };
            (0..rest.len()).find_map(timestamp).map(|at| rest[..at].to_owned())
        }) else {
            continue;
        };
        let checks: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(entry.path().join("checks.json")).unwrap(),
        )
        .unwrap();
        let checks = checks.as_array().cloned().unwrap_or_default();
        let failures: Vec<String> = checks
            .iter()
            .filter(|c| c["status"] == "FAILURE")
            .map(|c| format!("{}: {}", c["id"], c["errorMessage"]))
            .collect();
        if !failures.is_empty() {
            eprintln!("{url} {scenario}: {}", failures.join("; "));
        }
        outcomes.insert(scenario, !checks.is_empty() && failures.is_empty());
    }
    assert!(
        outcomes.len() >= 30,
        "the suite ran {} scenarios against {url}, expected its 30 active ones:\n{}\n{}",
        outcomes.len(),
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    outcomes
}

fn conformance_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/conformance_server.py")
}

/// `[[upstreams]]` running the conformance server over stdio, with `prefix` when given.
fn stdio_upstream(prefix: Option<&str>) -> String {
    let prefix = prefix.map(|p| format!("prefix = \"{p}\"\n")).unwrap_or_default();
    format!(
        "[[upstreams]]\nname = \"conformance\"\ncommand = \"python3\"\n\
         args = [\"{}\", \"stdio\"]\n{prefix}",
        conformance_server().display()
    )
}

/// A child process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The conformance server on Streamable HTTP: the process and its URL.
fn upstream_over_http() -> (Running, String) {
    require_python_sdk();
    let port = free_port();
    let child = Command::new("python3")
        .arg(conformance_server())
        .args(["http", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the conformance server");
    let running = Running(child);
    wait_until_listening(port, "the conformance server");
    (running, format!("http://localhost:{port}/mcp"))
}

/// `quiver serve --http --mode MODE` with `config`, no plugins: the process and its URL. It
/// listens once its upstreams have connected (or failed).
fn quiver_serving(config: &str, mode: &str) -> (Running, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("quiver.toml"), config).unwrap();
    let plugins = plugins_dir(&[]);
    let (mut command, port) = serve_http_command(dir.path(), plugins.path());
    let child = command.args(["--mode", mode]).spawn().expect("spawn quiver serve --http");
    let running = Running(child);
    wait_until_listening(port, "quiver serve --http");
    (running, format!("http://localhost:{port}/mcp"), dir)
}

/// Every scenario the server passes directly passes through quiver fronting it over
/// `transport` in `mode`; the table says which.
fn through_quiver(transport: &str, mode: &str) {
    let (_direct_server, direct_url) = upstream_over_http();
    let direct = run_suite(&direct_url);
    let (_upstream, config) = match transport {
        "stdio" => (None, stdio_upstream(Some(""))),
        _ => {
            let (server, url) = upstream_over_http();
            (
                Some(server),
                format!("[[upstreams]]\nname = \"conformance\"\nurl = \"{url}\"\nprefix = \"\"\n"),
            )
        }
    };
    let (_quiver, url, _dir) = quiver_serving(&config, mode);
    let through = run_suite(&url);
    eprintln!("| scenario | direct | through quiver ({transport}, {mode}) |\n|---|---|---|");
    let mark = |passed: Option<&bool>| match passed {
        Some(true) => "pass",
        Some(false) => "FAIL",
        None => "not run",
    };
    let mut lost = Vec::new();
    for (scenario, passed) in &direct {
        eprintln!("| {scenario} | {} | {} |", mark(Some(passed)), mark(through.get(scenario)));
        if *passed && through.get(scenario) != Some(&true) {
            lost.push(scenario.clone());
        }
    }
    let passed = |m: &BTreeMap<String, bool>| m.values().filter(|p| **p).count();
    eprintln!(
        "| **passed** | {} of {} | {} of {} |",
        passed(&direct),
        direct.len(),
        passed(&through),
        through.len()
    );
    assert_eq!(
        passed(&direct),
        direct.len(),
        "the conformance server itself fails scenarios: {direct:?}"
    );
    assert!(
        lost.is_empty(),
        "scenarios the server passes directly fail through quiver ({transport}, {mode}): {lost:?}"
    );
}

#[test]
fn every_scenario_passes_through_quiver_over_stdio_in_all_mode() {
    through_quiver("stdio", "all");
}

#[test]
fn every_scenario_passes_through_quiver_over_http_in_all_mode() {
    through_quiver("http", "all");
}

#[test]
fn every_scenario_passes_through_quiver_over_stdio_in_search_mode() {
    through_quiver("stdio", "search");
}

#[test]
fn every_scenario_passes_through_quiver_over_http_in_search_mode() {
    through_quiver("http", "search");
}

/// quiver with no upstream and no plugin: the protocol's own scenarios pass; the others call
/// tools, resources and prompts only the suite's fixtures have.
#[test]
fn quiver_alone_passes_every_scenario_that_needs_no_fixture() {
    let (_quiver, url, _dir) = quiver_serving("", "all");
    let alone = run_suite(&url);
    let protocol_only = [
        "server-initialize",
        "ping",
        "logging-set-level",
        "tools-list",
        "resources-list",
        "prompts-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ];
    eprintln!("| scenario | quiver alone |\n|---|---|");
    for (scenario, passed) in &alone {
        eprintln!(
            "| {scenario} | {} |",
            if *passed { "pass" } else { "needs the suite's fixtures" }
        );
    }
    let failed: Vec<&str> =
        protocol_only.iter().copied().filter(|s| alone.get(*s) != Some(&true)).collect();
    assert!(failed.is_empty(), "quiver alone fails protocol scenarios: {failed:?}");
}

/// The official Python SDK's client on `mode` (`auto`: 2026-07-28; `legacy`: 2025-11-25) with a
/// model that answers "Paris", a user who accepts forms, and a wish for debug logs, calling the
/// conformance server's sampling, elicitation and logging tools through quiver.
fn answering_client(url: &str, mode: &str) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/http_client.py");
    let calls = serde_json::json!([
        ["test_sampling", {"prompt": "What is the capital of France?"}],
        ["test_elicitation", {"message": "Who are you?"}],
        ["test_tool_with_logging", {}],
    ]);
    let answers = serde_json::json!({
        "sampling": "Paris",
        "elicit": {"username": "ada", "email": "ada@example.com"},
        "log_level": "debug",
    });
    let out = Command::new("python3")
        .arg(script)
        .args([url, "", mode, &calls.to_string(), &answers.to_string()])
        .output()
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(|e| {
        panic!(
            "the client printed no result ({e}):\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// An upstream's sampling and elicitation reach the client that made the call, and its log
/// messages come back with the call: on 2026-07-28 as rounds of the client's own call (the
/// upstream's `input_required` handed on, its state bound to the call), on 2025-11-25 as
/// requests to the client while the call waits.
#[test]
fn an_upstreams_requests_reach_the_calling_client_on_both_revisions() {
    require_python_sdk();
    let config = stdio_upstream(Some(""));
    let (_quiver, url, _dir) = quiver_serving(&config, "all");
    for (mode, revision) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let out = answering_client(&url, mode);
        assert_eq!(out["protocol"], revision, "{out}");
        let text = |i: usize| out["calls"][i]["text"].as_str().unwrap_or_default().to_owned();
        assert_eq!(text(0), "LLM response: Paris", "{mode}: {out}");
        assert!(text(1).starts_with("User response: action=accept"), "{mode}: {out}");
        assert!(text(1).contains("ada@example.com"), "{mode}: {out}");
        let asked: Vec<&str> =
            out["asked"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
        assert_eq!(asked, ["sampling", "elicitation: Who are you?"], "{mode}: {out}");
        let logs = out["logs"].to_string();
        for line in ["Tool execution started", "Tool processing data", "Tool execution completed"] {
            assert!(logs.contains(line), "{mode}: `{line}` not logged to the client: {out}");
        }
    }
}

/// Resource changes a client subscribed to through quiver, and prompt list changes.
#[derive(Clone, Default)]
struct Updates(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl rmcp::ClientHandler for Updates {
    async fn on_prompt_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.0.lock().unwrap().push("prompts/list_changed".into());
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.0.lock().unwrap().push(params.uri);
    }
}

/// rmcp's client over Streamable HTTP at `url`, on 2026-07-28 (`modern`) or 2025-11-25.
async fn rmcp_client(
    url: &str,
    modern: bool,
) -> rmcp::service::RunningService<rmcp::RoleClient, Updates> {
    quiver_tests::rmcp_http_client(url, None, modern, Updates::default()).await
}

/// A client subscribed to an upstream's resource through quiver hears of its change — with
/// `resources/subscribe` on 2025-11-25, on a `subscriptions/listen` stream on 2026-07-28 — and
/// after unsubscribing no longer does; the upstream is reached over stdio (2026-07-28, where
/// quiver listens for the URI) and over HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // resources/subscribe is 2025-11-25's
async fn a_subscribed_client_hears_of_an_upstreams_resource_change() {
    require_python_sdk();
    const WATCHED: &str = "test://watched-resource";
    let (_http_upstream, upstream_url) = upstream_over_http();
    let stdio = stdio_upstream(Some(""));
    let http =
        format!("[[upstreams]]\nname = \"conformance\"\nurl = \"{upstream_url}\"\nprefix = \"\"\n");
    for (transport, config) in [("stdio", stdio), ("http", http)] {
        let (_quiver, url, _dir) = quiver_serving(&config, "all");
        let touch = || rmcp::model::CallToolRequestParams::new("touch_watched_resource");

        let legacy = rmcp_client(&url, false).await;
        legacy.peer().subscribe(rmcp::model::SubscribeRequestParams::new(WATCHED)).await.unwrap();
        legacy.call_tool(touch()).await.unwrap();
        let heard = std::sync::Arc::clone(&legacy.service().0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while heard.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(*heard.lock().unwrap(), [WATCHED], "{transport}: 2025-11-25 subscriber");
        legacy
            .peer()
            .unsubscribe(rmcp::model::UnsubscribeRequestParams::new(WATCHED))
            .await
            .unwrap();
        // Another change after unsubscribing; the client hears of it no more — checked once a
        // listen stream opened after it has heard of the same change.
        legacy.call_tool(touch()).await.unwrap();

        let modern = rmcp_client(&url, true).await;
        let filter =
            rmcp::model::SubscriptionFilter::builder().resource_subscriptions([WATCHED]).build();
        let mut stream = modern.peer().listen(filter).await.expect("subscriptions/listen");
        modern.call_tool(touch()).await.unwrap();
        let next = tokio::time::timeout(std::time::Duration::from_secs(20), stream.next())
            .await
            .expect("a resources/updated on the listen stream")
            .unwrap();
        match next {
            Some(rmcp::model::ServerNotification::ResourceUpdatedNotification(n)) => {
                assert_eq!(n.params.uri, WATCHED, "{transport}: 2026-07-28 subscriber")
            }
            other => panic!("{transport}: expected resources/updated, got {other:?}"),
        }
        assert_eq!(heard.lock().unwrap().len(), 1, "{transport}: heard after unsubscribing");
        legacy.cancel().await.unwrap();
        modern.cancel().await.unwrap();
    }
}

/// When an upstream's prompts change, quiver's clients are told: with
/// `notifications/prompts/list_changed` on 2025-11-25, on a listen stream that asked for it on
/// 2026-07-28 — and the new prompt is listed, under the upstream's prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_hear_when_an_upstreams_prompts_change() {
    require_python_sdk();
    let config = stdio_upstream(None);
    let (_quiver, url, _dir) = quiver_serving(&config, "all");
    let legacy = rmcp_client(&url, false).await;
    let modern = rmcp_client(&url, true).await;
    let filter = rmcp::model::SubscriptionFilter::builder().prompts_list_changed().build();
    let mut stream = modern.peer().listen(filter).await.expect("subscriptions/listen");
    let mut add = rmcp::model::CallToolRequestParams::new("conformance_add_prompt");
    add.arguments = serde_json::json!({"name": "release_notes"}).as_object().cloned();
    legacy.call_tool(add).await.unwrap();

    let next = tokio::time::timeout(std::time::Duration::from_secs(20), stream.next())
        .await
        .expect("prompts/list_changed on the listen stream")
        .unwrap();
    assert!(
        matches!(next, Some(rmcp::model::ServerNotification::PromptListChangedNotification(_))),
        "{next:?}"
    );
    let heard = std::sync::Arc::clone(&legacy.service().0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while heard.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(*heard.lock().unwrap(), ["prompts/list_changed"]);
    let prompts = legacy.list_all_prompts().await.unwrap();
    assert!(
        prompts.iter().any(|p| p.name == "conformance_release_notes"),
        "{:?}",
        prompts.iter().map(|p| &p.name).collect::<Vec<_>>()
    );
    legacy.cancel().await.unwrap();
    modern.cancel().await.unwrap();
}
