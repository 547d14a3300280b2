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
        "stdio" => (
            None,
            format!(
                "[[upstreams]]\nname = \"conformance\"\ncommand = \"python3\"\n\
                 args = [\"{}\", \"stdio\"]\nprefix = \"\"\n",
                conformance_server().display()
            ),
        ),
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
