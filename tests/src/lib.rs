//! Support for quiver's end-to-end tests: where the built `quiver` binary and plugin libraries
//! are, plugin directories assembled from them, and a way to run the binary.
//!
//! The tests use the artifacts `cargo xtask test` builds (`cargo build --workspace`): the real
//! binary and real dylibs, loaded by the real loader. `QUIVER_TEST_TARGET_DIR` points at them;
//! without it, the directory is derived from the test executable's own location.
//!
//! **Architecture Invariant**: end-to-end tests reach quiver the way users do — the binary, the
//! dylibs, the `quiver-runtime` library API — never through a provider's rlib.
#![allow(missing_docs)]

pub mod oauth_service;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `target/debug` (or whatever `QUIVER_TEST_TARGET_DIR` says).
pub fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("QUIVER_TEST_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    // target/debug/deps/<test-binary> → target/debug
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent().and_then(Path::parent).expect("target/<profile>/deps").to_owned()
}

/// Every bundled provider's package.
pub const ALL_PROVIDERS: [&str; 5] = [
    "quiver-provider-github",
    "quiver-provider-gitlab",
    "quiver-provider-jira",
    "quiver-provider-clickup",
    "quiver-provider-fireflies",
];

/// A recorded API response from `tests/data/<provider>/<file>`.
pub fn recorded(provider: &str, file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data").join(provider).join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// GitHub's recorded issue as `login` (with `author_association`) would have opened it, with
/// `body`: the issues of the author-trust tests.
pub fn github_issue_by(login: &str, association: &str, body: &str) -> serde_json::Value {
    let mut issue: serde_json::Value =
        serde_json::from_str(&recorded("github", "issue.json")).expect("the recorded issue");
    issue["user"]["login"] = login.into();
    issue["author_association"] = association.into();
    issue["body"] = body.into();
    issue
}

/// The injection corpus (`tests/data/injections/results.json`): each case, the text that
/// carries it (a credential case's test credential in deploy notes) and the payload that must
/// not reach the model.
pub fn injection_cases() -> Vec<(serde_json::Value, String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/injections/results.json");
    let corpus: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the corpus"))
            .expect("the corpus is JSON");
    let credentials: std::collections::HashMap<&str, String> =
        other_services_credentials().into_iter().collect();
    corpus
        .into_iter()
        .map(|case| {
            let (body, payload) = match case["secret"].as_str() {
                Some(rule) => {
                    let secret = credentials[rule].clone();
                    let first_line = secret.lines().next().unwrap_or_default().to_owned();
                    (format!("Deploy notes:\n{secret}\n"), first_line)
                }
                None => (
                    case["body"].as_str().unwrap_or_default().to_owned(),
                    case["payload"].as_str().unwrap_or_default().to_owned(),
                ),
            };
            (case, body, payload)
        })
        .collect()
}

/// A loopback reply with `status` and a recorded JSON body.
pub fn recorded_reply(status: u16, provider: &str, file: &str) -> wiremock::ResponseTemplate {
    wiremock::ResponseTemplate::new(status)
        .set_body_raw(recorded(provider, file), "application/json")
}

/// The `quiver` binary.
pub fn quiver_bin() -> PathBuf {
    let path = target_dir().join(format!("quiver{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "{} is missing; run `cargo xtask test`, which builds it",
        path.display()
    );
    path
}

/// The built library of workspace crate `package` (`quiver-provider-github`).
pub fn dylib(package: &str) -> PathBuf {
    let file = format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        package.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    );
    let path = target_dir().join(file);
    assert!(
        path.is_file(),
        "{} is missing; run `cargo xtask test`, which builds it",
        path.display()
    );
    path
}

/// A temporary plugins directory holding copies of the given packages' libraries.
pub fn plugins_dir(packages: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for package in packages {
        let source = dylib(package);
        std::fs::copy(&source, dir.path().join(source.file_name().unwrap())).expect("copy plugin");
    }
    dir
}

/// Adds a truncated copy of `package`'s library to `dir` under `name`.
pub fn add_truncated(dir: &Path, package: &str, name: &str) {
    let bytes = std::fs::read(dylib(package)).expect("read plugin");
    let name = format!("{name}{}", std::env::consts::DLL_SUFFIX);
    std::fs::write(dir.join(name), &bytes[..bytes.len() / 3]).expect("write truncated plugin");
}

/// Runs the binary with `args`, a clean environment for quiver's own variables, and `env` added.
pub fn quiver(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(quiver_bin());
    command.args(args);
    for var in ["QUIVER_CONFIG", "QUIVER_PLUGINS", "QUIVER_DATA_DIR", "GITHUB_TOKEN", "RUST_LOG"] {
        command.env_remove(var);
    }
    // No ./quiver.toml or user config from the machine running the tests.
    let empty = tempfile::tempdir().expect("temp dir");
    command.current_dir(empty.path()).env("XDG_CONFIG_HOME", empty.path());
    // Nor the machine's data dir: a test that does not name one writes under the temp dir.
    command.env("QUIVER_DATA_DIR", empty.path().join("data"));
    command.envs(env.iter().copied());
    command.output().expect("run quiver")
}

/// `quiver keys new NAME`: (the key, its `[[serve.http.users]]` entry followed by `extra`).
/// The entry holds the key's hash, never the key.
pub fn new_user_key(name: &str, extra: &str) -> (String, String) {
    let out = quiver(&["keys", "new", name], &[]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let key = stdout
        .lines()
        .find_map(|l| l.strip_prefix("# qk_").map(|k| format!("qk_{k}")))
        .unwrap_or_else(|| panic!("no key printed: {stdout}"));
    let entry: String =
        stdout.lines().filter(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect();
    assert!(entry.contains(&format!("name = \"{name}\"")), "{entry}");
    assert!(!entry.contains(&key), "the config holds the hash, never the key: {entry}");
    (key, format!("{entry}{extra}"))
}

/// stdout and stderr of `output` as text, for assertions and failure messages.
pub fn texts(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Fails — never skips — when npx (which runs the MCP reference servers) is missing, saying how
/// to get it.
pub fn require_npx() {
    match Command::new("npx").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "install Node.js with npm (npx runs the MCP reference servers)\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "`npx` cannot be run ({e}); install Node.js with npm (npx runs the MCP reference servers)"
        ),
    }
}

/// Fails — never skips — when the official MCP Python SDK (2.x: its `MCPServer` and Streamable
/// HTTP client) cannot be used, saying how to get it.
pub fn require_python_sdk() {
    let probe = Command::new("python3")
        .args([
            "-c",
            "from mcp.server.mcpserver import MCPServer\n\
             from mcp.client.streamable_http import streamable_http_client",
        ])
        .output();
    match probe {
        Err(e) => panic!(
            "python3 cannot be run ({e}); install CPython 3.10+ and run `cargo xtask test`, which \
             installs the MCP Python SDK"
        ),
        Ok(out) if !out.status.success() => panic!(
            "the MCP Python SDK is missing: run `cargo xtask test` (it installs it) or \
             `python3 -m pip install 'mcp>=2'`\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Ok(_) => {}
    }
}

/// A free loopback port (bound, then released for a server to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `quiver serve --http` on a free loopback port with `dir/quiver.toml` and the plugins in
/// `plugins`, run in `dir` with its data under `dir/data` and none of the machine's own quiver
/// setup (config, log level, GitHub token); stdout and stderr discarded. The command, for the
/// caller's own environment or stderr, and the port.
pub fn serve_http_command(dir: &Path, plugins: &Path) -> (Command, u16) {
    let port = free_port();
    let mut command = Command::new(quiver_bin());
    command
        .args(["serve", "--http", &format!("127.0.0.1:{port}"), "--config"])
        .arg(dir.join("quiver.toml"))
        .arg("--plugins")
        .arg(plugins)
        .current_dir(dir)
        .env("QUIVER_DATA_DIR", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir)
        .env_remove("QUIVER_CONFIG")
        .env_remove("RUST_LOG")
        .env_remove("GITHUB_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    (command, port)
}

/// Waits until something listens on loopback `port`; panics naming `what` after 20 s.
pub fn wait_until_listening(port: u16, what: &str) {
    wait_until_listening_within(port, std::time::Duration::from_secs(20), what);
}

/// [`wait_until_listening`] bounded by `within` (a server started through npx on a loaded
/// machine needs longer).
pub fn wait_until_listening_within(port: u16, within: std::time::Duration, what: &str) {
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < within, "{what} did not listen");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Every telemetry event written under `dir` so far (none when it does not exist yet; a line
/// still being written is skipped).
pub fn telemetry_events(dir: &Path) -> Vec<serde_json::Value> {
    let mut events = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return events };
    for entry in entries.flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        events.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
    }
    events
}

/// A real `redis-server` on a free loopback port, without persistence, killed when dropped.
/// Panics (never skips) with what to install when there is none: `cargo xtask test` installs it.
pub struct RedisServer {
    child: std::process::Child,
    port: u16,
}

impl RedisServer {
    pub fn start() -> Self {
        let port = free_port();
        Self { child: Self::spawn(port), port }
    }

    fn spawn(port: u16) -> std::process::Child {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no", "--protected-mode", "no"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start redis-server ({e}): run `cargo xtask test` (it installs Debian's \
                     redis-server) or `apt-get install redis-server`"
                )
            });
        let started = std::time::Instant::now();
        while Self::ping(port).is_none() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "redis-server did not answer on port {port}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child
    }

    /// `PING` over a plain socket: `Some` when it answers `+PONG`.
    fn ping(port: u16) -> Option<()> {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        stream.set_read_timeout(Some(std::time::Duration::from_millis(500))).ok()?;
        stream.write_all(b"PING\r\n").ok()?;
        let mut buf = [0u8; 7];
        stream.read_exact(&mut buf).ok()?;
        (&buf == b"+PONG\r\n").then_some(())
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the server (SIGKILL): everything it held is gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts a fresh, empty server on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.child = Self::spawn(self.port);
    }

    /// Runs `redis-cli` against this server and returns its output.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli (installed with redis-server)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// A real Redis Cluster on loopback: six `redis-server`s in cluster mode — three primaries with
/// a replica each, joined by `redis-cli --cluster create` — without persistence, failing a
/// primary over to its replica about a second after it stops answering. Killed when dropped.
pub struct RedisCluster {
    nodes: Vec<(u16, std::process::Child)>,
    _dir: tempfile::TempDir,
}

impl RedisCluster {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut nodes = Vec::new();
        for _ in 0..6 {
            let port = free_port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
                .args(["--appendonly", "no", "--protected-mode", "no"])
                .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"])
                // A replica takes over however long it was apart from its primary.
                .args(["--cluster-replica-validity-factor", "0"])
                .arg("--cluster-config-file")
                .arg(dir.path().join(format!("nodes-{port}.conf")))
                .arg("--dir")
                .arg(dir.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!(
                        "cannot start redis-server ({e}): run `cargo xtask test` (it installs \
                         Debian's redis-server) or `apt-get install redis-server`"
                    )
                });
            nodes.push((port, child));
        }
        let cluster = Self { nodes, _dir: dir };
        for (port, _) in &cluster.nodes {
            cluster.wait_until(&format!("node {port} answers"), || RedisServer::ping(*port));
        }
        let addresses: Vec<String> =
            cluster.nodes.iter().map(|(port, _)| format!("127.0.0.1:{port}")).collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli (installed with redis-server)");
        assert!(
            created.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&created.stdout)
        );
        for (port, _) in &cluster.nodes {
            cluster.wait_until(&format!("node {port} sees the whole cluster"), || {
                let info = cluster.cli(*port, &["CLUSTER", "INFO"]);
                (info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:6"))
                    .then_some(())
            });
        }
        cluster
    }

    fn wait_until<T>(&self, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
        let started = std::time::Instant::now();
        loop {
            if let Some(value) = check() {
                return value;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "{what}: not within 60 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// The URL of one node: quiver learns the rest from it.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.nodes[0].0)
    }

    /// Runs `redis-cli` against the node on `port` and returns its output.
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli (installed with redis-server)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A node still running, to ask about the cluster.
    fn alive(&self) -> u16 {
        self.nodes.iter().find(|(port, _)| RedisServer::ping(*port).is_some()).unwrap().0
    }

    /// The ports of the primaries serving slots now, as the running nodes see them.
    pub fn primaries(&self) -> Vec<u16> {
        self.cli(self.alive(), &["CLUSTER", "NODES"])
            .lines()
            .filter(|line| {
                let fields: Vec<&str> = line.split(' ').collect();
                fields.len() > 8 && fields[2].contains("master") && !fields[2].contains("fail")
            })
            .filter_map(|line| line.split(' ').nth(1)?.split(['@', ':']).nth(1)?.parse().ok())
            .collect()
    }

    /// The port of the primary serving the slot of hash tag `tag` now.
    pub fn primary_of(&self, tag: &str) -> u16 {
        let port = self.alive();
        let slot: u16 = self.cli(port, &["CLUSTER", "KEYSLOT", tag]).trim().parse().unwrap();
        self.cli(port, &["CLUSTER", "NODES"])
            .lines()
            .filter(|line| {
                let fields: Vec<&str> = line.split(' ').collect();
                fields.len() > 8 && fields[2].contains("master") && !fields[2].contains("fail")
            })
            .find(|line| {
                line.split(' ').skip(8).any(|range| {
                    let (low, high) = range.split_once('-').unwrap_or((range, range));
                    matches!((low.parse::<u16>(), high.parse::<u16>()), (Ok(l), Ok(h)) if l <= slot && slot <= h)
                })
            })
            .and_then(|line| line.split(' ').nth(1)?.split(['@', ':']).nth(1)?.parse().ok())
            .expect("every slot is served")
    }

    /// Every key the primaries hold, with its slot.
    pub fn slots_of_keys(&self) -> Vec<(String, u16)> {
        let mut keys = Vec::new();
        for primary in self.primaries() {
            for key in self.cli(primary, &["--scan"]).lines().filter(|k| !k.is_empty()) {
                let slot = self.cli(primary, &["CLUSTER", "KEYSLOT", key]).trim().parse().unwrap();
                keys.push((key.to_owned(), slot));
            }
        }
        keys
    }

    /// Kills the node on `port` (SIGKILL).
    pub fn kill(&mut self, port: u16) {
        if let Some((_, child)) = self.nodes.iter_mut().find(|(p, _)| *p == port) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until the cluster serves every slot again without the node on `dead` (its replica
    /// promoted), as every running node sees it.
    pub fn wait_failed_over(&self, dead: u16) {
        for (port, _) in self.nodes.iter().filter(|(p, _)| *p != dead) {
            self.wait_until(&format!("node {port} sees the failover of {dead}"), || {
                let info = self.cli(*port, &["CLUSTER", "INFO"]);
                let primaries = self.primaries();
                (info.contains("cluster_state:ok")
                    && primaries.len() == 3
                    && !primaries.contains(&dead))
                .then_some(())
            });
        }
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.nodes {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl RedisServer {
    /// Every key the server holds with its whole value, one `key: value` text per key, whatever
    /// its type (strings, hashes, lists, sets, sorted sets, streams), for tests that search what
    /// was stored.
    pub fn dump(&self) -> Vec<String> {
        let keys = self.cli(&["--scan"]);
        keys.lines()
            .filter(|k| !k.is_empty())
            .map(|key| {
                let value = match self.cli(&["TYPE", key]).trim() {
                    "string" => self.cli(&["GET", key]),
                    "hash" => self.cli(&["HGETALL", key]),
                    "list" => self.cli(&["LRANGE", key, "0", "-1"]),
                    "set" => self.cli(&["SMEMBERS", key]),
                    "zset" => self.cli(&["ZRANGE", key, "0", "-1", "WITHSCORES"]),
                    "stream" => self.cli(&["XRANGE", key, "-", "+"]),
                    other => format!("(a {other} value)"),
                };
                format!("{key}: {value}")
            })
            .collect()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// rmcp's client over Streamable HTTP at `url` (the MCP endpoint) as `handler`, on 2026-07-28
/// (`modern`: `server/discover`) or 2025-11-25 (`initialize`), with `key` as its bearer token.
pub async fn rmcp_http_client<H: rmcp::ClientHandler>(
    url: &str,
    key: Option<&str>,
    modern: bool,
    handler: H,
) -> rmcp::service::RunningService<rmcp::RoleClient, H> {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::transport::StreamableHttpClientTransport;
    // rmcp's HTTP client runs on a reqwest without a crypto provider; ring is the workspace's.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(key) = key {
        config = config.auth_header(key);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    let lifecycle = if modern {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        }
    } else {
        ClientLifecycleMode::Initialize
    };
    handler.serve_with_lifecycle(transport, lifecycle).await.expect("connect")
}

/// What a test client named `name` declares: `capabilities` as the spec writes them.
pub fn client_config(name: &str, capabilities: serde_json::Value) -> rmcp::model::ClientConfig {
    let capabilities = serde_json::from_value(capabilities).expect("client capabilities");
    rmcp::model::ClientConfig::new(capabilities, rmcp::model::Implementation::new(name, "1"))
}

/// What a client declares that takes tasks (2026-07-28's tasks extension) and answers forms.
pub fn takes_tasks(name: &str) -> rmcp::model::ClientConfig {
    client_config(
        name,
        serde_json::json!({
            "elicitation": {"form": {}},
            "extensions": {"io.modelcontextprotocol/tasks": {}},
        }),
    )
}

/// Polls `tasks/get` at `client` until the task is in a state `done` accepts: that state. Every
/// state seen on the way is added to `seen`; a task that never gets there fails the test.
pub async fn task_until<H: rmcp::ClientHandler>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, H>,
    id: &str,
    seen: &mut Vec<serde_json::Value>,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let task = client.get_task(rmcp::model::GetTaskParams::new(id)).await.expect("tasks/get");
        let task = serde_json::to_value(&task).expect("a task as JSON");
        seen.push(task.clone());
        if done(&task) {
            return task;
        }
        assert!(std::time::Instant::now() < deadline, "the task never got there: {seen:#?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A task's state is final: neither `working` nor waiting for input.
pub fn task_ended(task: &serde_json::Value) -> bool {
    !matches!(task["status"].as_str(), Some("working" | "input_required"))
}

/// `text` written in Unicode tag characters (U+E0000 + each ASCII code): invisible where it is
/// shown, read by a model all the same — the hidden order of the injection tests.
pub fn in_tag_characters(text: &str) -> String {
    text.chars().map(|c| char::from_u32(0xE0000 + c as u32).expect("ASCII")).collect()
}

/// Credentials of other services in their published formats, none of them live, by the
/// gitleaks rule that finds each: what the secret-redaction tests paste into issues and
/// arguments. Assembled at run time, so no scanner takes this file for a leak.
pub fn other_services_credentials() -> Vec<(&'static str, String)> {
    let key_body =
        "MIIEowIBAAKCAQEAx4f0Xb1yT0kqZ9kFQ3b5Gd8r2mVwL1uRk7sJ0pN6hYcE9tA2vBn\n".repeat(3);
    vec![
        ("aws-access-token", ["AKIA", "Z7X3QWERTY4UIOPL"].concat()),
        ("github-pat", ["ghp_", "Xk9mQ2vL7pR4tW8yB3nJ6hF1sD5gA0cZeU7i"].concat()),
        (
            "slack-bot-token",
            ["xoxb-", "1234567890123-1234567890123-", "Qm9vZ3xLk2Jd8Fh3Ty6Wp1Zr"].concat(),
        ),
        (
            "private-key",
            format!("-----BEGIN RSA PRIVATE KEY-----\n{key_body}-----END RSA PRIVATE KEY-----"),
        ),
    ]
}
