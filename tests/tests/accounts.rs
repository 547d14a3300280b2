//! Every user on their own account: an HTTP user signs in to GitHub on first use (URL
//! elicitation on both protocol revisions, or a link in the answer for a client that cannot open
//! one), through quiver's `/connect/github` pages and a loopback service with its own OAuth
//! server that accepts only the tokens it issued. Then: their calls act as them, the token is
//! refreshed once however many calls need it at once, a refused refresh or a disconnect asks
//! again, and no token is in any output, log or file quiver writes.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use quiver_tests::oauth_service::{OAuthService, CLIENT_ID, CLIENT_SECRET};
use quiver_tests::{
    new_user_key, plugins_dir, quiver_bin, serve_http_command, texts, wait_until_listening,
};
use rmcp::model::{CallToolRequestParams, ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::json;

/// The sealing key the server is given (64 hex digits).
const ACCOUNTS_KEY: &str = "4f1c2a9e8d7b6a5f4e3d2c1b0a998877665544332211ffeeddccbbaa99887766";

/// A running `quiver serve --http` whose users sign in to GitHub at `service`; its stderr goes
/// to `dir/serve.log`. Killed when dropped.
struct Served {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
    plugins: tempfile::TempDir,
    config: std::path::PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server's config, data and plugins, before it starts (for what its operator does first).
struct Prepared {
    dir: tempfile::TempDir,
    plugins: tempfile::TempDir,
    config: std::path::PathBuf,
}

impl Prepared {
    /// `quiver ARGS` on this config, data and plugins, as its operator runs it (stdout piped).
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(quiver_bin());
        command
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .arg("--plugins")
            .arg(self.plugins.path())
            .current_dir(self.dir.path())
            .env("QUIVER_DATA_DIR", self.dir.path().join("data"))
            .env("QUIVER_ACCOUNTS_KEY", ACCOUNTS_KEY)
            .env("GH_APP_SECRET", CLIENT_SECRET)
            .env_remove("GITHUB_TOKEN");
        command
    }

    fn serve(self) -> Served {
        let (mut command, port) = serve_http_command(self.dir.path(), self.plugins.path());
        let log = std::fs::File::create(self.dir.path().join("serve.log")).unwrap();
        command
            .env("QUIVER_ACCOUNTS_KEY", ACCOUNTS_KEY)
            .env("GH_APP_SECRET", CLIENT_SECRET)
            .env("RUST_LOG", "debug")
            .stderr(Stdio::from(log));
        let child = command.spawn().expect("spawn quiver serve --http");
        wait_until_listening(port, "quiver serve --http");
        let Prepared { dir, plugins, config } = self;
        Served { child, url: format!("http://127.0.0.1:{port}"), dir, plugins, config }
    }
}

impl Served {
    fn start(service: &OAuthService, extra: &str, users: &str) -> Self {
        Self::prepare(service, extra, users).serve()
    }

    fn prepare(service: &OAuthService, extra: &str, users: &str) -> Prepared {
        let plugins = plugins_dir(&["quiver-provider-github"]);
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("quiver.toml");
        let svc = &service.url;
        std::fs::write(
            &config,
            format!(
                "[providers.github]\nbase_url = \"{svc}\"\n\
                 [providers.github.oauth]\nclient_id = \"{CLIENT_ID}\"\n\
                 client_secret_env = \"GH_APP_SECRET\"\nauthorize_url = \"{svc}/authorize\"\n\
                 token_url = \"{svc}/token\"\nrevoke_url = \"{svc}/revoke\"\n\
                 [telemetry]\nenabled = true\ndir = \"{}\"\n{extra}\n{users}",
                dir.path().join("telemetry").display()
            ),
        )
        .unwrap();
        Prepared { dir, plugins, config }
    }

    /// `quiver ARGS` on this server's config, data and plugins, as its operator runs it.
    fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(quiver_bin())
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .arg("--plugins")
            .arg(self.plugins.path())
            .current_dir(self.dir.path())
            .env("QUIVER_DATA_DIR", self.dir.path().join("data"))
            .env("QUIVER_ACCOUNTS_KEY", ACCOUNTS_KEY)
            .env("GH_APP_SECRET", CLIENT_SECRET)
            .env_remove("GITHUB_TOKEN")
            .output()
            .unwrap();
        let (stdout, stderr) = texts(&out);
        (out.status.success(), stdout, stderr)
    }

    /// An MCP client of this server as the user of `key`, on 2026-07-28 when `modern`.
    async fn client<H: rmcp::ClientHandler>(
        &self,
        key: &str,
        modern: bool,
        handler: H,
    ) -> rmcp::service::RunningService<rmcp::RoleClient, H> {
        quiver_tests::rmcp_http_client(&format!("{}/mcp", self.url), Some(key), modern, handler)
            .await
    }

    /// Every file the server wrote (its log, its data, telemetry), as text.
    fn everything_written(&self) -> Vec<(String, String)> {
        fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else if let Ok(bytes) = std::fs::read(&path) {
                    out.push((
                        path.display().to_string(),
                        String::from_utf8_lossy(&bytes).into_owned(),
                    ));
                }
            }
        }
        let mut out = Vec::new();
        walk(self.dir.path(), &mut out);
        out
    }
}

/// A client whose user opens every URL elicitation in a browser (redirects followed, cookies
/// kept) and accepts; it counts what it was asked.
#[derive(Clone, Default)]
struct Browser {
    asked: Arc<AtomicUsize>,
    pages: Arc<std::sync::Mutex<Vec<(u16, String)>>>,
}

impl rmcp::ClientHandler for Browser {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        quiver_tests::client_config("browser", json!({"elicitation": {"url": {}}}))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let ElicitRequestParams::UrlElicitationParams { url, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let page = open_in_browser(&url).await;
        self.pages.lock().unwrap().push(page);
        Ok(ElicitResult::new(ElicitationAction::Accept))
    }
}

/// A client that declares nothing it can do for its user.
#[derive(Clone, Default)]
struct Plain;

impl rmcp::ClientHandler for Plain {}

/// Opens `url` as a browser would: redirects followed, cookies kept. (status, page text).
async fn open_in_browser(url: &str) -> (u16, String) {
    let browser = reqwest::Client::builder().cookie_store(true).build().unwrap();
    let response = browser.get(url).send().await.expect("open the sign-in link");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

fn get_issue() -> CallToolRequestParams {
    issue_of("octocat")
}

/// Issue 1347 of `owner`'s repository.
fn issue_of(owner: &str) -> CallToolRequestParams {
    let arguments = json!({"owner": owner, "repo": "Hello-World", "number": 1347});
    CallToolRequestParams::new("github_get_issue")
        .with_arguments(arguments.as_object().unwrap().clone())
}

/// The call's text and whether it is an error.
fn text_of(result: &rmcp::model::CallToolResult) -> (bool, String) {
    let value = serde_json::to_value(result).unwrap();
    let text = value["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    (result.is_error == Some(true), text)
}

/// The sign-in link an answer names.
fn link_in(text: &str, served: &Served) -> String {
    let start = text
        .find(&format!("{}/connect/github?ticket=", served.url))
        .unwrap_or_else(|| panic!("no sign-in link in: {text}"));
    text[start..].split_whitespace().next().unwrap().trim_end_matches(['.', ')', ',']).to_owned()
}

/// No token the service issued, nor the app's secret or the sealing key, in anything `served`
/// wrote.
fn assert_no_token_written(served: &Served, service: &OAuthService) {
    let mut secrets = service.issued_tokens();
    secrets.push(CLIENT_SECRET.to_owned());
    secrets.push(ACCOUNTS_KEY.to_owned());
    for (path, text) in served.everything_written() {
        for secret in &secrets {
            assert!(!text.contains(secret.as_str()), "{path} holds a secret ({}…)", &secret[..8]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_signs_in_on_first_use_on_both_revisions_and_then_acts_as_themselves() {
    for modern in [false, true] {
        let service = OAuthService::start("alice-gh").await;
        let (key, alice) = new_user_key("alice", "");
        let served = Served::start(&service, "", &alice);
        let browser = Browser::default();
        let client = served.client(&key, modern, browser.clone()).await;
        let result = client.call_tool(get_issue()).await.expect("the call");
        let (is_error, text) = text_of(&result);
        assert!(!is_error && text.contains("Found a bug"), "modern {modern}: {text}");
        assert_eq!(browser.asked.load(Ordering::SeqCst), 1, "asked once to sign in");
        let pages = browser.pages.lock().unwrap().clone();
        assert_eq!(pages[0].0, 200, "{pages:?}");
        assert!(pages[0].1.contains("alice-gh is connected"), "{pages:?}");
        assert_eq!(service.api_logins(), ["alice-gh"], "the call acted as alice's account");

        // A new connection of hers: signed in already, not asked again.
        let again = Browser::default();
        let second = served.client(&key, modern, again.clone()).await;
        let issue_two = {
            let mut params = get_issue();
            params.arguments.as_mut().unwrap().insert("fields".into(), json!(["all"]));
            params
        };
        let answer = second.call_tool(issue_two).await.unwrap();
        let (is_error, text) = text_of(&answer);
        assert!(!is_error, "{text}");
        assert_eq!(again.asked.load(Ordering::SeqCst), 0);
        let meta = serde_json::to_value(&answer.meta).unwrap();
        assert_eq!(meta["quiver/account"], json!({"provider": "github", "account": "alice-gh"}));

        // She revoked the app at GitHub: the refused token is forgotten, and she is asked again.
        service.revoke_everything();
        let fresh = {
            let mut params = get_issue();
            params.arguments.as_mut().unwrap().insert("_fresh".into(), json!(true));
            params
        };
        let (is_error, text) = text_of(&second.call_tool(fresh.clone()).await.unwrap());
        assert!(is_error && text.contains("no longer accepts the sign-in"), "{text}");
        let (is_error, text) = text_of(&second.call_tool(fresh).await.unwrap());
        assert!(!is_error, "signed in anew: {text}");
        assert_eq!(again.asked.load(Ordering::SeqCst), 1, "asked to sign in again");
        // The first call and the one after signing in anew (the second connection's read came
        // from her cache; the refused one was refused).
        assert_eq!(service.api_logins(), ["alice-gh", "alice-gh"]);
        let (ok, stdout, stderr) = served.cli(&["users", "accounts", "alice"]);
        assert!(ok, "{stdout}\n{stderr}");
        assert!(stdout.contains("github: alice-gh (default)"), "{stdout}");
        drop(client);
        drop(second);
        assert_no_token_written(&served, &service);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_links_is_given_one_and_a_refused_refresh_asks_again() {
    let service = OAuthService::start("bob-gh").await;
    // Tokens that live 30 s, refreshed when 60 s are left: every use refreshes.
    service.tokens_live(30, 30);
    let (key, bob) = new_user_key("bob", "");
    let served = Served::start(&service, "[accounts]\nrefresh_before_s = 60\n", &bob);
    let client = served.client(&key, false, Plain).await;
    let (is_error, text) = text_of(&client.call_tool(get_issue()).await.unwrap());
    assert!(is_error, "{text}");
    assert!(text.contains("cannot open links"), "{text}");
    let link = link_in(&text, &served);
    assert!(service.api_logins().is_empty(), "nothing was sent before signing in");

    let (status, page) = open_in_browser(&link).await;
    assert_eq!(status, 200, "{page}");
    // A link works once.
    let (status, page) = open_in_browser(&link).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("used already"), "{page}");

    let (is_error, text) = text_of(&client.call_tool(get_issue()).await.unwrap());
    assert!(!is_error, "{text}");
    assert_eq!(service.refreshes(), 1, "the token about to expire was refreshed first");

    // The user revoked the app at the service: the refresh is refused, and they are asked again.
    service.revoke_everything();
    let (is_error, text) = text_of(&client.call_tool(get_issue()).await.unwrap());
    assert!(is_error, "{text}");
    let again = link_in(&text, &served);
    assert_ne!(again, link, "a new link");
    let (ok, stdout, _) = served.cli(&["users", "accounts", "bob"]);
    assert!(ok && stdout.contains("github: not connected"), "{stdout}");
    let log = std::fs::read_to_string(served.dir.path().join("serve.log")).unwrap();
    assert!(log.contains("invalid_grant"), "the log says why: {log}");
    drop(client);
    assert_no_token_written(&served, &service);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_the_operator_prefers_it_a_url_capable_client_gets_the_url_elicitation_required_error(
) {
    let service = OAuthService::start("frank-gh").await;
    let (key, frank) = new_user_key("frank", "");
    let served = Served::start(&service, "[accounts]\nsign_in = \"error\"\n", &frank);
    let browser = Browser::default();
    let client = served.client(&key, false, browser.clone()).await;
    let refused = client.call_tool(get_issue()).await.expect_err("a protocol error");
    let rmcp::service::ServiceError::McpError(error) = refused else {
        panic!("not an MCP error: {refused:?}");
    };
    assert_eq!(error.code.0, -32042, "{error:?}");
    let data = error.data.expect("the elicitations");
    let elicitation = &data["elicitations"][0];
    assert_eq!(elicitation["mode"], "url", "{data}");
    assert!(elicitation["elicitationId"].as_str().is_some_and(|id| !id.is_empty()), "{data}");
    let link = elicitation["url"].as_str().unwrap();
    assert!(link.starts_with(&format!("{}/connect/github?ticket=", served.url)), "{link}");
    assert_eq!(browser.asked.load(Ordering::SeqCst), 0, "not asked: told");
    // The client opens it, and sends the call again.
    let (status, page) = open_in_browser(link).await;
    assert_eq!(status, 200, "{page}");
    let (is_error, text) = text_of(&client.call_tool(get_issue()).await.unwrap());
    assert!(!is_error, "{text}");
    assert_eq!(service.api_logins(), ["frank-gh"]);
    drop(client);
    assert_no_token_written(&served, &service);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiring_token_is_refreshed_once_under_twenty_calls_and_disconnect_revokes_it() {
    let service = OAuthService::start("carol-gh").await;
    service.tokens_live(30, 3600);
    let (key, carol) = new_user_key("carol", "");
    let served = Served::start(&service, "[accounts]\nrefresh_before_s = 60\n", &carol);
    let client = served.client(&key, false, Plain).await;
    let (_, text) = text_of(&client.call_tool(get_issue()).await.unwrap());
    let (status, page) = open_in_browser(&link_in(&text, &served)).await;
    assert_eq!(status, 200, "{page}");

    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let peer = client.peer().clone();
        calls.spawn(async move { peer.call_tool(get_issue()).await });
    }
    while let Some(done) = calls.join_next().await {
        let (is_error, text) = text_of(&done.unwrap().expect("a call"));
        assert!(!is_error, "{text}");
    }
    assert_eq!(service.refreshes(), 1, "one refresh for twenty calls");
    assert!(service.api_logins().iter().all(|l| l == "carol-gh"));

    let (ok, stdout, stderr) = served.cli(&["users", "disconnect", "carol", "github"]);
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("disconnected carol from github account carol-gh"), "{stdout}");
    assert_eq!(service.revocations(), 1, "the refresh token was revoked at the service");
    let (is_error, text) = text_of(&client.call_tool(get_issue()).await.unwrap());
    assert!(is_error && text.contains("/connect/github?ticket="), "asked again: {text}");
    drop(client);
    assert_no_token_written(&served, &service);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_with_two_accounts_acts_as_the_one_their_rule_chooses_by_owner() {
    let service = OAuthService::start("dave-personal").await;
    let rule = "accounts = [{ account = \"dave-acme\", tools = \"github.*\", owner = [\"acme\", \"acme-*\"] }]\n";
    let (dave_key, dave) = new_user_key("dave", rule);
    let (erin_key, erin) = new_user_key("erin", &rule.replace("dave-acme", "erin-acme"));
    let served = Served::start(&service, "", &format!("{dave}{erin}"));
    let browser = Browser::default();
    let client = served.client(&dave_key, false, browser.clone()).await;
    // No rule takes octocat: his default account, the first he connects.
    let (is_error, text) = text_of(&client.call_tool(issue_of("octocat")).await.unwrap());
    assert!(!is_error, "{text}");
    // acme is his work account's: he is asked to connect it too.
    service.sign_in_as("dave-acme");
    let answer = client.call_tool(issue_of("acme-labs")).await.unwrap();
    let (is_error, text) = text_of(&answer);
    assert!(!is_error, "{text}");
    let meta = serde_json::to_value(&answer.meta).unwrap();
    assert_eq!(meta["quiver/account"]["account"], "dave-acme");
    assert_eq!(browser.asked.load(Ordering::SeqCst), 2, "one sign-in per account");
    // Both connected: each call acts as its own, nobody asked.
    service.sign_in_as("nobody");
    let mut fresh = issue_of("octocat");
    fresh.arguments.as_mut().unwrap().insert("_fresh".into(), json!(true));
    let (is_error, text) = text_of(&client.call_tool(fresh).await.unwrap());
    assert!(!is_error, "{text}");
    assert_eq!(browser.asked.load(Ordering::SeqCst), 2);
    let calls: Vec<(String, String)> = service.api_calls();
    let expected =
        [("dave-personal", "octocat"), ("dave-acme", "acme-labs"), ("dave-personal", "octocat")];
    assert_eq!(
        calls,
        expected.map(|(a, o)| (a.to_owned(), o.to_owned())),
        "each call acted as the account its owner chooses"
    );
    let (ok, stdout, _) = served.cli(&["users", "accounts", "dave"]);
    assert!(
        ok && stdout.contains("github: dave-personal (default)")
            && stdout.contains("github: dave-acme"),
        "{stdout}"
    );
    let (ok, stdout, _) = served.cli(&["tools", "show", "github.get_issue"]);
    assert!(
        ok && stdout.contains(
            "dave as dave-acme when tools = \"github.*\", owner = [\"acme\", \"acme-*\"]"
        ),
        "{stdout}"
    );

    // Erin signs in with the wrong account for an acme call: told so, not served as it.
    service.sign_in_as("erin-personal");
    let erin_browser = Browser::default();
    let erins = served.client(&erin_key, false, erin_browser).await;
    let (is_error, text) = text_of(&erins.call_tool(issue_of("acme")).await.unwrap());
    assert!(is_error, "{text}");
    assert!(
        text.contains("you signed in to github as erin-personal") && text.contains("erin-acme"),
        "{text}"
    );
    assert_eq!(service.api_calls().len(), 3, "nothing sent as the wrong account");
    drop(client);
    drop(erins);
    assert_no_token_written(&served, &service);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_users_on_two_replicas_share_their_accounts_through_redis_sealed() {
    let redis = quiver_tests::RedisServer::start();
    let service = OAuthService::start("alice-gh").await;
    service.tokens_live(30, 3600);
    let (alice_key, alice) = new_user_key("alice", "");
    let (bob_key, bob) = new_user_key("bob", "");
    let state = |name: &str| {
        format!(
            "[state]\nbackend = \"redis\"\nurl = \"{}\"\nreplica = \"{name}\"\n\
             [accounts]\nrefresh_before_s = 60\n",
            redis.url()
        )
    };
    let users = format!("{alice}{bob}");
    let a = Served::start(&service, &state("a"), &users);
    let b = Served::start(&service, &state("b"), &users);

    // Alice is asked on replica a; her browser reaches replica b (the same public address
    // behind a balancer, here b's own): the ticket, the state and the account are in Redis.
    let alice_on_a = on(&a, &alice_key).await;
    let (_, text) = text_of(&alice_on_a.call_tool(get_issue()).await.unwrap());
    let link = link_in(&text, &a).replace(&a.url, &b.url);
    let (status, page) = open_in_browser(&link).await;
    assert_eq!(status, 200, "{page}");
    // Bob signs in on b, as his own account.
    service.sign_in_as("bob-gh");
    let bob_on_b = on(&b, &bob_key).await;
    let (_, text) = text_of(&bob_on_b.call_tool(get_issue()).await.unwrap());
    let (status, page) = open_in_browser(&link_in(&text, &b)).await;
    assert_eq!(status, 200, "{page}");

    // Both tokens are about to expire: twenty calls each, half on each replica, refresh each
    // once.
    let alice_on_b = on(&b, &alice_key).await;
    let bob_on_a = on(&a, &bob_key).await;
    let mut calls = tokio::task::JoinSet::new();
    for client in [&alice_on_a, &alice_on_b, &bob_on_a, &bob_on_b] {
        for _ in 0..10 {
            let peer = client.peer().clone();
            calls.spawn(async move { peer.call_tool(get_issue()).await });
        }
    }
    while let Some(done) = calls.join_next().await {
        let (is_error, text) = text_of(&done.unwrap().expect("a call"));
        if is_error {
            let log = |s: &Served| std::fs::read_to_string(s.dir.path().join("serve.log")).unwrap();
            let warnings = |log: String| {
                log.lines()
                    .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            panic!("{text}\nreplica a:\n{}\nreplica b:\n{}", warnings(log(&a)), warnings(log(&b)));
        }
    }
    assert_eq!(service.refreshes(), 2, "one refresh per account across both replicas");
    let logins = service.api_logins();
    assert!(logins.contains(&"alice-gh".to_owned()) && logins.contains(&"bob-gh".to_owned()));
    assert!(logins.iter().all(|l| l == "alice-gh" || l == "bob-gh"), "{logins:?}");

    // Sealed in Redis: no token, and the accounts are there for both.
    let stored = redis.dump();
    assert_eq!(stored.iter().filter(|kv| kv.contains(":accounts:")).count(), 2, "{stored:?}");
    for secret in service.issued_tokens() {
        assert!(!stored.iter().any(|kv| kv.contains(&secret)), "Redis holds a token in the clear");
    }
    for client in [alice_on_a, alice_on_b, bob_on_a, bob_on_b] {
        drop(client);
    }
    assert_no_token_written(&a, &service);
    assert_no_token_written(&b, &service);
}

/// A client on `served` as the user of `key` that cannot open links.
async fn on(served: &Served, key: &str) -> rmcp::service::RunningService<rmcp::RoleClient, Plain> {
    served.client(key, false, Plain).await
}

/// The MCP server of `tests/mcp/oauth_upstream.py`: answers only tokens `service` issued.
struct OAuthUpstream {
    child: Child,
    port: u16,
    state: tempfile::TempDir,
}

impl OAuthUpstream {
    fn start(service: &OAuthService) -> Self {
        quiver_tests::require_python_sdk();
        let state = tempfile::tempdir().unwrap();
        let port = quiver_tests::free_port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/oauth_upstream.py");
        let child = Command::new("python3")
            .arg(script)
            .args([&port.to_string(), &service.url, &state.path().display().to_string()])
            .stderr(Stdio::null())
            .spawn()
            .expect("start the OAuth-protected MCP server");
        wait_until_listening(port, "the OAuth-protected MCP server");
        Self { child, port, state }
    }

    /// The account of every request it served, in order.
    fn accounts(&self) -> Vec<String> {
        let log =
            std::fs::read_to_string(self.state.path().join("accounts.log")).unwrap_or_default();
        log.lines().map(str::to_owned).collect()
    }
}

impl Drop for OAuthUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oauth_upstream_is_connected_by_the_operator_and_each_user_signs_in_to_it() {
    use std::io::BufRead as _;
    let service = OAuthService::start("ops-account").await;
    let upstream = OAuthUpstream::start(&service);
    let (key, alice) = new_user_key("alice", "");
    let prepared = Served::prepare(
        &service,
        &format!(
            "[[upstreams]]\nname = \"tracker\"\nurl = \"http://127.0.0.1:{}/mcp\"\n\
             auth = \"oauth\"\nstart_timeout_s = 180\n",
            upstream.port
        ),
        &alice,
    );

    // The operator connects quiver itself (what lists the tools, and serves stdio callers).
    let mut connect = prepared
        .command(&["upstreams", "connect", "tracker"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(connect.stdout.take().unwrap()).lines();
    let link = loop {
        let line = lines.next().expect("connect printed a link").unwrap();
        if let Some(at) = line.find("http://127.0.0.1:") {
            break line[at..].split_whitespace().next().unwrap().to_owned();
        }
    };
    let (status, page) = open_in_browser(&link).await;
    assert_eq!(status, 200, "{page}");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = connect.wait_with_output().unwrap();
    assert!(out.status.success(), "{rest:?}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(rest.iter().any(|l| l.contains("connected tracker as operator")), "{rest:?}");
    assert_eq!(service.registrations(), 1, "quiver registered itself (RFC 7591)");

    // The server lists the tracker's tools as the operator; alice signs in for her calls.
    let served = prepared.serve();
    service.sign_in_as("alice-tracker");
    let browser = Browser::default();
    let client = served.client(&key, false, browser.clone()).await;
    let (is_error, text) =
        text_of(&client.call_tool(CallToolRequestParams::new("tracker_whoami")).await.unwrap());
    assert!(!is_error, "{text}");
    assert!(text.contains("you are alice-tracker"), "the call acted as alice: {text}");
    assert_eq!(browser.asked.load(Ordering::SeqCst), 1);
    let accounts = upstream.accounts();
    assert!(accounts.contains(&"ops-account".to_owned()), "listed as the operator: {accounts:?}");
    assert_eq!(accounts.last().map(String::as_str), Some("alice-tracker"));
    assert!(
        service.resources().iter().all(|r| r == &format!("http://127.0.0.1:{}/mcp", upstream.port)),
        "every request named the resource: {:?}",
        service.resources()
    );
    drop(client);
    assert_no_token_written(&served, &service);
}

#[test]
fn without_a_sealing_key_doctor_says_which_variable_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_dir(&["quiver-provider-github"]);
    std::fs::write(
        dir.path().join("quiver.toml"),
        format!(
            "[providers.github.oauth]\nclient_id = \"{CLIENT_ID}\"\nclient_secret_env = \"GH_APP_SECRET\"\n"
        ),
    )
    .unwrap();
    let out = Command::new(quiver_bin())
        .arg("doctor")
        .arg("--config")
        .arg(dir.path().join("quiver.toml"))
        .arg("--plugins")
        .arg(plugins.path())
        .current_dir(dir.path())
        .env("QUIVER_DATA_DIR", dir.path().join("data"))
        .env("GH_APP_SECRET", CLIENT_SECRET)
        .env_remove("QUIVER_ACCOUNTS_KEY")
        .env_remove("GITHUB_TOKEN")
        .output()
        .unwrap();
    let (stdout, stderr) = texts(&out);
    assert!(
        stdout.contains("sign-in: github: signing in needs a key")
            && stdout.contains("QUIVER_ACCOUNTS_KEY"),
        "{stdout}\n{stderr}"
    );
    assert!(!stdout.contains(CLIENT_SECRET) && !stderr.contains(CLIENT_SECRET));
}
