//! No credential leaks, in any encoding: every provider in every auth mode, against a loopback
//! server that echoes the request's headers in 401 and 500 bodies, called through `quiver call`
//! and through `quiver serve` with an MCP client. stdout, stderr, the MCP results, telemetry and
//! every file of the data dir are searched for the token in each form it can travel in. And the
//! same echo inside a *successful* answer (an issue body quoting the request), served over HTTP
//! to a user on the server's token and a user with their own, cached in a real Redis: their
//! results, every Redis value, telemetry, the data dir and the `-vv` log are searched for both
//! tokens.

use std::path::Path;
use std::process::Stdio;

use base64::Engine as _;
use quiver_tests::{
    new_user_key, plugins_dir, quiver_bin, recorded, serve_http_command, texts,
    wait_until_listening, RedisServer,
};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// A token with characters that base64 and percent-encoding both change.
const TOKEN: &str = "qvS3cret+Tok/en=42xyz";
const EMAIL: &str = "dev@example.com";
/// Proves the echoed body reached the output at all, so "nothing leaked" means something.
const MARKER: &str = "echo-marker-7731";

/// Answers every request with `status` and a body that repeats the request's headers in every
/// error field the five services use, as a misconfigured proxy or a debugging server would.
struct EchoHeaders {
    status: u16,
}

/// What a server that quotes the request shows: the marker, the credential on its own (as a
/// server quoting "the token you sent" would) and every header line.
fn echo_of(request: &Request) -> String {
    let lines: Vec<String> = request
        .headers
        .iter()
        .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap_or("?")))
        .collect();
    let auth = request
        .headers
        .get("authorization")
        .or_else(|| request.headers.get("private-token"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let bare = auth.rsplit(' ').next().unwrap_or_default();
    format!("{MARKER} rejected credential {bare} ; request was:\n{}", lines.join("\n"))
}

impl Respond for EchoHeaders {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let headers: serde_json::Map<String, Value> = request
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), Value::from(v.to_str().unwrap_or("?"))))
            .collect();
        let echo = echo_of(request);
        let body = json!({
            "message": echo,
            "error": echo,
            "error_description": echo,
            "err": echo,
            "ECODE": "OAUTH_025",
            "errorMessages": [echo],
            "errors": [{"message": echo, "extensions": {"code": "auth_failed"}}],
            "headers": headers,
        });
        ResponseTemplate::new(self.status).set_body_json(body)
    }
}

/// Answers every request with 200 and a recorded answer of the service whose text `fields` (JSON
/// pointers) quote the request's headers: an issue body that echoes them, a debug endpoint, a
/// proxy page.
struct EchoInAnswer {
    answer: Value,
    fields: &'static [&'static str],
}

impl Respond for EchoInAnswer {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut answer = self.answer.clone();
        for field in self.fields {
            let slot = answer.pointer_mut(field).unwrap_or_else(|| panic!("no {field} to fill"));
            *slot = Value::from(echo_of(request));
        }
        ResponseTemplate::new(200).set_body_json(answer)
    }
}

/// One provider in one auth mode: its config section, token variable and a read call.
struct Case {
    label: &'static str,
    package: &'static str,
    section: &'static str,
    token_env: &'static str,
    tool: &'static str,
    args: Value,
    user: Option<&'static str>,
    /// A recorded successful answer (provider folder, file) and the text fields to echo into.
    answer: (&'static str, &'static str),
    fields: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    let github = json!({"owner": "octocat", "repo": "Hello-World", "number": 1347});
    let gitlab = json!({"project": "group/project", "iid": 7});
    let jira = json!({"key": "DEV-1"});
    let clickup = json!({"task_id": "86cv5pkvr"});
    let fireflies = json!({"id": "01HXYZ"});
    vec![
        Case {
            label: "github",
            package: "quiver-provider-github",
            section: "[providers.github]\n",
            token_env: "GITHUB_TOKEN",
            tool: "github.get_issue",
            args: github,
            user: None,
            answer: ("github", "issue.json"),
            fields: &["/title", "/body"],
        },
        Case {
            label: "gitlab private_token",
            package: "quiver-provider-gitlab",
            section: "[providers.gitlab]\nauth = \"private_token\"\n",
            token_env: "GITLAB_TOKEN",
            tool: "gitlab.get_issue",
            args: gitlab.clone(),
            user: None,
            answer: ("gitlab", "issue.json"),
            fields: &["/title", "/description"],
        },
        Case {
            label: "gitlab oauth",
            package: "quiver-provider-gitlab",
            section: "[providers.gitlab]\nauth = \"oauth\"\n",
            token_env: "GITLAB_TOKEN",
            tool: "gitlab.get_issue",
            args: gitlab,
            user: None,
            answer: ("gitlab", "issue.json"),
            fields: &["/title", "/description"],
        },
        Case {
            label: "jira cloud basic",
            package: "quiver-provider-jira",
            section: "[providers.jira]\ndeployment = \"cloud\"\nemail = \"dev@example.com\"\n",
            token_env: "JIRA_TOKEN",
            tool: "jira.get_issue",
            args: jira.clone(),
            user: Some(EMAIL),
            answer: ("jira", "issue_cloud.json"),
            fields: &["/fields/summary"],
        },
        Case {
            label: "jira data center bearer",
            package: "quiver-provider-jira",
            section: "[providers.jira]\ndeployment = \"server\"\n",
            token_env: "JIRA_TOKEN",
            tool: "jira.get_issue",
            args: jira,
            user: None,
            answer: ("jira", "issue_server.json"),
            fields: &["/fields/summary", "/fields/description"],
        },
        Case {
            label: "clickup personal",
            package: "quiver-provider-clickup",
            section: "[providers.clickup]\nauth = \"personal\"\n",
            token_env: "CLICKUP_TOKEN",
            tool: "clickup.get_task",
            args: clickup.clone(),
            user: None,
            answer: ("clickup", "task.json"),
            fields: &["/name", "/description", "/text_content"],
        },
        Case {
            label: "clickup oauth",
            package: "quiver-provider-clickup",
            section: "[providers.clickup]\nauth = \"oauth\"\n",
            token_env: "CLICKUP_TOKEN",
            tool: "clickup.get_task",
            args: clickup,
            user: None,
            answer: ("clickup", "task.json"),
            fields: &["/name", "/description", "/text_content"],
        },
        Case {
            label: "fireflies",
            package: "quiver-provider-fireflies",
            section: "[providers.fireflies]\n",
            token_env: "FIREFLIES_TOKEN",
            tool: "fireflies.get_transcript",
            args: fireflies,
            user: None,
            answer: ("fireflies", "transcript.json"),
            fields: &["/data/transcript/title"],
        },
    ]
}

/// Every form the credential could be found in.
fn forbidden_forms(user: Option<&str>) -> Vec<String> {
    let mut forms = forms_of(TOKEN, user);
    forms.push("qvS3cret%2BTok%2Fen%3D42xyz".to_owned());
    forms.push("qvS3cret%2bTok%2fen%3d42xyz".to_owned());
    // The secret part alone, in case a form is cut where a line is.
    forms.push("S3cret".to_owned());
    forms
}

/// `token` raw and in base64 (standard and URL-safe, padded or not) of itself and of
/// `user:token`.
fn forms_of(token: &str, user: Option<&str>) -> Vec<String> {
    let mut plain = vec![token.to_owned()];
    if let Some(user) = user {
        plain.push(format!("{user}:{token}"));
    }
    let mut forms = vec![token.to_owned()];
    for text in &plain {
        for engine in [
            &base64::engine::general_purpose::STANDARD,
            &base64::engine::general_purpose::STANDARD_NO_PAD,
            &base64::engine::general_purpose::URL_SAFE,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ] {
            forms.push(engine.encode(text));
        }
    }
    forms
}

/// Every file under `dir`, as text (lossy), with its path.
fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path.display().to_string(), String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    out
}

struct Run {
    /// (what, text) pairs to search.
    outputs: Vec<(String, String)>,
}

async fn run_case(case: &Case, status: u16) -> Run {
    let server = MockServer::start().await;
    Mock::given(any()).respond_with(EchoHeaders { status }).mount(&server).await;
    let plugins = plugins_dir(&[case.package]);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("quiver.toml");
    let base_url = if case.package.ends_with("fireflies") {
        format!("{}/graphql", server.uri())
    } else {
        server.uri()
    };
    std::fs::write(
        &config,
        format!(
            "{}base_url = \"{base_url}\"\nmax_retry_wait_s = 0\n[telemetry]\nenabled = true\n\
             record_sessions = true\n",
            case.section
        ),
    )
    .unwrap();
    let env: Vec<(String, String)> = vec![
        (case.token_env.into(), TOKEN.into()),
        ("QUIVER_DATA_DIR".into(), data.display().to_string()),
        ("XDG_CONFIG_HOME".into(), dir.path().display().to_string()),
        ("XDG_DATA_HOME".into(), dir.path().display().to_string()),
        ("RUST_LOG".into(), "debug".into()),
    ];
    let base_args = |args: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.extend([
            "--config".into(),
            config.display().to_string(),
            "--plugins".into(),
            plugins.path().display().to_string(),
        ]);
        all
    };

    let mut outputs = Vec::new();
    // The CLI, with debug logs.
    let cli_args = base_args(&["call", case.tool, "--args", &case.args.to_string()]);
    let cli = {
        let (env, dir) = (env.clone(), dir.path().to_owned());
        tokio::task::spawn_blocking(move || {
            let mut command = std::process::Command::new(quiver_bin());
            command.args(&cli_args).current_dir(dir).envs(env);
            command.output().expect("run quiver call")
        })
        .await
        .unwrap()
    };
    let (stdout, stderr) = texts(&cli);
    outputs.push(("quiver call stdout".to_owned(), stdout));
    outputs.push(("quiver call stderr".to_owned(), stderr));

    // The MCP server, called by rmcp's client; its stderr read whole after it exits.
    let serve_args = base_args(&["serve", "--mode", "all"]);
    let mut command = tokio::process::Command::new(quiver_bin());
    command.args(&serve_args).current_dir(dir.path()).envs(env.iter().cloned());
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn quiver serve");
    let mut stderr = stderr.expect("piped stderr");
    let stderr_text = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let client = ().serve(transport).await.expect("initialize");
    let result = client
        .call_tool(
            CallToolRequestParams::new(case.tool.replace('.', "_"))
                .with_arguments(case.args.as_object().unwrap().clone()),
        )
        .await
        .expect("an answer");
    assert_eq!(result.is_error, Some(true), "{}: {status} must be a tool error", case.label);
    outputs.push(("MCP result".to_owned(), serde_json::to_string(&result).unwrap()));
    client.cancel().await.unwrap();
    outputs.push(("quiver serve stderr".to_owned(), stderr_text.await.unwrap()));
    for (path, text) in files_under(dir.path()) {
        outputs.push((path, text));
    }
    Run { outputs }
}

/// Fails naming the output and the form when any output of `run` shows one of `forms`.
fn assert_no_form(run: &Run, forms: &[String], case: &str) {
    for (what, text) in &run.outputs {
        for form in forms {
            assert!(
                !text.contains(form.as_str()),
                "{case}: {what} shows a credential as `{form}`:\n{text}"
            );
        }
    }
}

async fn check_provider(label: &str) {
    let all = cases();
    let mine: Vec<&Case> = all.iter().filter(|c| c.label.starts_with(label)).collect();
    assert!(!mine.is_empty());
    for case in mine {
        for status in [401, 500] {
            let run = run_case(case, status).await;
            assert_no_form(
                &run,
                &forbidden_forms(case.user),
                &format!("{} ({status})", case.label),
            );
            // The echoed body did reach the output: the test searched something that could leak.
            let shown = run.outputs.iter().any(|(what, text)| {
                (what == "MCP result" || what == "quiver call stderr") && text.contains(MARKER)
            });
            assert!(
                shown,
                "{} ({status}): no output quotes the server's echo, so nothing was tested:\n{:#?}",
                case.label,
                run.outputs.iter().take(4).collect::<Vec<_>>()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_token_never_leaks_when_the_server_echoes_headers() {
    check_provider("github").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_private_token_and_oauth_never_leak_when_the_server_echoes_headers() {
    check_provider("gitlab").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jira_basic_and_bearer_credentials_never_leak_when_the_server_echoes_headers() {
    check_provider("jira").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickup_personal_and_oauth_tokens_never_leak_when_the_server_echoes_headers() {
    check_provider("clickup").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fireflies_token_never_leaks_when_the_server_echoes_headers() {
    check_provider("fireflies").await;
}

/// A user's own token, with characters that base64 and percent-encoding both change.
const ALICE_TOKEN: &str = "aLice+0wn/T0ken=77abc";

/// One provider in one auth mode answering 200 with the request's headers quoted in its text,
/// served by `quiver serve --http -vv` with its cache in a real Redis to bob (on the server's
/// token) and alice (on her own), each calling twice (the second from the cache).
async fn run_successful_case(case: &Case) -> Run {
    let server = MockServer::start().await;
    let answer: Value = serde_json::from_str(&recorded(case.answer.0, case.answer.1)).unwrap();
    Mock::given(any())
        .respond_with(EchoInAnswer { answer, fields: case.fields })
        .mount(&server)
        .await;
    let redis = RedisServer::start();
    let plugins = plugins_dir(&[case.package]);
    let dir = tempfile::tempdir().unwrap();
    let provider = case.package.trim_start_matches("quiver-provider-");
    let (bob, bob_entry) = new_user_key("bob", "");
    let (alice, alice_entry) =
        new_user_key("alice", &format!("tokens = {{ {provider} = \"ALICE_TOKEN\" }}\n"));
    let base_url =
        if provider == "fireflies" { format!("{}/graphql", server.uri()) } else { server.uri() };
    std::fs::write(
        dir.path().join("quiver.toml"),
        format!(
            "{}base_url = \"{base_url}\"\nmax_retry_wait_s = 0\n\
             [tools.\"{}\"]\ncost_model = {{ freshness_ttl_s = 300 }}\n\
             [state]\nbackend = \"redis\"\n[telemetry]\nenabled = true\n\
             record_sessions = true\n{bob_entry}{alice_entry}",
            case.section, case.tool
        ),
    )
    .unwrap();
    let log = dir.path().join("serve.log");
    let (mut command, port) = serve_http_command(dir.path(), plugins.path());
    let mut child = command
        .arg("-vv")
        .env(case.token_env, TOKEN)
        .env("ALICE_TOKEN", ALICE_TOKEN)
        .env("QUIVER_REDIS_URL", redis.url())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn quiver serve --http");
    wait_until_listening(port, "quiver serve --http");

    let mut outputs = Vec::new();
    for (who, key) in [("bob", &bob), ("alice", &alice)] {
        let client = http_client(port, key).await;
        for attempt in ["first", "cached"] {
            let params = CallToolRequestParams::new(case.tool.replace('.', "_"))
                .with_arguments(case.args.as_object().unwrap().clone());
            let result = client.call_tool(params).await.expect("an answer");
            let text = serde_json::to_string(&result).unwrap();
            assert_ne!(result.is_error, Some(true), "{} {who}: {text}", case.label);
            assert!(
                text.contains(MARKER),
                "{} {who}: the echo must reach the result, or nothing was tested: {text}",
                case.label
            );
            outputs.push((format!("MCP result of {who} ({attempt})"), text));
        }
        client.cancel().await.unwrap();
    }
    let stored = redis.dump();
    assert!(
        stored.iter().any(|value| value.contains(MARKER)),
        "{}: the answer must be cached in Redis, or nothing was tested: {stored:#?}",
        case.label
    );
    outputs.extend(stored.into_iter().map(|value| ("a Redis value".to_owned(), value)));
    // SIGTERM: the server finishes writing telemetry and logs before the files are read.
    let _ = std::process::Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    let files = files_under(dir.path());
    assert!(
        files.iter().any(|(name, text)| name.contains("sessions") && text.contains(MARKER)),
        "{}: the session recording must hold the answer, or nothing was tested: {:?}",
        case.label,
        files.iter().map(|(name, _)| name).collect::<Vec<_>>()
    );
    outputs.extend(files);
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(log_text.contains("DEBUG"), "{}: the log is at debug level: {log_text}", case.label);
    Run { outputs }
}

/// rmcp's client over Streamable HTTP (2026-07-28), with `key`.
async fn http_client(port: u16, key: &str) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::transport::StreamableHttpClientTransport;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://127.0.0.1:{port}/mcp"))
            .auth_header(key);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    ().serve_with_lifecycle(StreamableHttpClientTransport::from_config(config), lifecycle)
        .await
        .expect("connect")
}

async fn check_successful_answers(label: &str) {
    let all = cases();
    let mine: Vec<&Case> = all.iter().filter(|c| c.label.starts_with(label)).collect();
    assert!(!mine.is_empty());
    for case in mine {
        let run = run_successful_case(case).await;
        let mut forms = forbidden_forms(case.user);
        forms.extend(forms_of(ALICE_TOKEN, case.user));
        forms.push("aLice%2B0wn%2FT0ken%3D77abc".to_owned());
        forms.push("aLice%2b0wn%2ft0ken%3d77abc".to_owned());
        forms.push("0wn/T0ken".to_owned());
        assert_no_form(&run, &forms, &format!("{} (200)", case.label));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_token_quoted_in_a_successful_answer_reaches_no_user_store_or_log() {
    check_successful_answers("github").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitlab_tokens_quoted_in_a_successful_answer_reach_no_user_store_or_log() {
    check_successful_answers("gitlab").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jira_credentials_quoted_in_a_successful_answer_reach_no_user_store_or_log() {
    check_successful_answers("jira").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clickup_tokens_quoted_in_a_successful_answer_reach_no_user_store_or_log() {
    check_successful_answers("clickup").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fireflies_token_quoted_in_a_successful_answer_reaches_no_user_store_or_log() {
    check_successful_answers("fireflies").await;
}

#[test]
fn doctor_says_a_short_token_looks_too_short() {
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let out = quiver_tests::quiver(
        &["doctor", "--plugins", plugins.path().to_str().unwrap()],
        &[("GITHUB_TOKEN", "abc")],
    );
    let (stdout, stderr) = texts(&out);
    assert!(stdout.contains("looks too short"), "{stdout}\n{stderr}");
    assert!(stdout.contains("1 problem"), "counted as a problem: {stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_token_is_masked_where_it_stands_alone_not_inside_words() {
    let server = MockServer::start().await;
    Mock::given(any()).respond_with(EchoHeaders { status: 500 }).mount(&server).await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.toml");
    std::fs::write(&config, format!("[providers.github]\nbase_url = \"{}\"\n", server.uri()))
        .unwrap();
    let args = json!({"owner": "octocat", "repo": "Hello-World", "number": 1347}).to_string();
    let (config, plugins_path) = (config.display().to_string(), plugins.path().to_owned());
    let out = tokio::task::spawn_blocking(move || {
        quiver_tests::quiver(
            &[
                "call",
                "github.get_issue",
                "--args",
                &args,
                "--config",
                &config,
                "--plugins",
                plugins_path.to_str().unwrap(),
            ],
            &[("GITHUB_TOKEN", "e")],
        )
    })
    .await
    .unwrap();
    let (stdout, stderr) = texts(&out);
    let text = format!("{stdout}{stderr}");
    assert!(text.contains(MARKER), "the echo is quoted, its letters intact: {text}");
    assert!(text.contains("rejected credential ***"), "the token itself is masked: {text}");
    assert!(!text.contains("rejected credential e "), "{text}");
}
