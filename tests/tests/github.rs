//! The GitHub provider through the real binary and the real plugin: `quiver call github.…`
//! against a loopback server answering with GitHub's recorded REST shapes.

use std::process::Output;

use quiver_tests::{plugins_dir, quiver, recorded_reply, texts};
use serde_json::Value;
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TOKEN: &str = "ghp_e2eTokenThatMustNeverBePrinted0123";

fn json_reply(status: u16, file: &str) -> ResponseTemplate {
    recorded_reply(status, "github", file)
}

/// A plugins dir with the GitHub plugin and a config pointing it at `server`.
struct Setup {
    plugins: tempfile::TempDir,
    config_dir: tempfile::TempDir,
}

impl Setup {
    fn new(server: &MockServer, extra: &str) -> Self {
        let plugins = plugins_dir(&["quiver-provider-github"]);
        let config_dir = tempfile::tempdir().unwrap();
        std::fs::write(
            config_dir.path().join("quiver.toml"),
            format!("[providers.github]\nbase_url = \"{}\"\n{extra}", server.uri()),
        )
        .unwrap();
        Self { plugins, config_dir }
    }

    /// `quiver call NAME --args ARGS --json`, off the async workers so the server keeps serving.
    async fn call(&self, name: &str, args: &str, env: &[(&'static str, &'static str)]) -> Output {
        let config = self.config_dir.path().join("quiver.toml");
        let plugins = self.plugins.path().to_owned();
        let (name, args, env) = (name.to_owned(), args.to_owned(), env.to_vec());
        tokio::task::spawn_blocking(move || {
            quiver(
                &[
                    "call",
                    &name,
                    "--args",
                    &args,
                    "--json",
                    "-v",
                    "--config",
                    config.to_str().unwrap(),
                    "--plugins",
                    plugins.to_str().unwrap(),
                ],
                &env,
            )
        })
        .await
        .unwrap()
    }
}

fn structured(out: &Output) -> Value {
    let (stdout, stderr) = texts(out);
    let result: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    result["structured"].clone()
}

fn assert_no_token(out: &Output) {
    let (stdout, stderr) = texts(out);
    assert!(
        !stdout.contains(TOKEN) && !stderr.contains(TOKEN),
        "the token leaked:\n{stdout}\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_issue_returns_the_compact_issue_and_sends_the_token() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/octocat/Hello-World/issues/1347"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(json_reply(200, "issue.json"))
        .expect(1)
        .mount(&server)
        .await;
    let setup = Setup::new(&server, "");
    let out = setup
        .call(
            "github.get_issue",
            r#"{"owner":"octocat","repo":"Hello-World","number":1347}"#,
            &[("GITHUB_TOKEN", TOKEN)],
        )
        .await;
    let (_, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    let issue = structured(&out);
    assert_eq!(issue["number"], 1347);
    assert_eq!(issue["title"], "Found a bug");
    assert_eq!(issue["labels"], serde_json::json!(["bug"]));
    // Only what an agent reads: no API URLs, node ids or avatars.
    let text = issue.to_string();
    for noise in ["node_id", "avatar_url", "events_url", "gravatar_id"] {
        assert!(!text.contains(noise), "{noise} in {text}");
    }
    // The call is logged with its arguments previewed, and the token nowhere.
    assert!(stderr.contains("call") && stderr.contains(r#""number":1347"#), "{stderr}");
    assert_no_token(&out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_issues_follows_the_link_header_to_the_next_page() {
    let server = MockServer::start().await;
    let next = format!(
        "<{0}/repos/octocat/Hello-World/issues?page=3&per_page=2>; rel=\"next\", <{0}/repos/octocat/Hello-World/issues?page=9&per_page=2>; rel=\"last\"",
        server.uri()
    );
    Mock::given(method("GET"))
        .and(path("/repos/octocat/Hello-World/issues"))
        .and(query_param("page", "2"))
        .and(query_param("per_page", "2"))
        .respond_with(json_reply(200, "issues_list.json").insert_header("link", next.as_str()))
        .expect(1)
        .mount(&server)
        .await;
    let setup = Setup::new(&server, "");
    let out = setup
        .call(
            "github.list_issues",
            r#"{"owner":"octocat","repo":"Hello-World","page":2,"per_page":2}"#,
            &[],
        )
        .await;
    assert!(out.status.success(), "{}", texts(&out).1);
    let list = structured(&out);
    assert_eq!(list["next_page"], 3, "{list}");
    let text = list.to_string();
    assert!(text.contains("Found a bug") && text.contains("Crash on start"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_issue_is_a_not_found_error_with_exit_code_1() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/octocat/Hello-World/issues/9"))
        .respond_with(ResponseTemplate::new(404).set_body_string(
            r#"{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}"#,
        ))
        .mount(&server)
        .await;
    let setup = Setup::new(&server, "");
    let out = setup
        .call("github.get_issue", r#"{"owner":"octocat","repo":"Hello-World","number":9}"#, &[])
        .await;
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("github.get_issue failed (not_found)"), "{stderr}");
    assert!(stderr.contains("#9"), "the message names the issue: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_token_names_the_variable_and_never_prints_the_token() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(401).set_body_string(
            r#"{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}"#,
        ))
        .mount(&server)
        .await;
    let setup = Setup::new(&server, "token_env = \"MY_GH_TOKEN\"\n");
    let out = setup
        .call(
            "github.get_issue",
            r#"{"owner":"octocat","repo":"Hello-World","number":1}"#,
            &[("MY_GH_TOKEN", TOKEN)],
        )
        .await;
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("(unauthorized)"), "{stderr}");
    assert!(stderr.contains("github rejected the token"), "{stderr}");
    assert!(stderr.contains("MY_GH_TOKEN"), "the message says which variable to set: {stderr}");
    assert_no_token(&out);

    // Without any token, the message says it is missing.
    let out = setup
        .call("github.get_issue", r#"{"owner":"octocat","repo":"Hello-World","number":1}"#, &[])
        .await;
    let (_, stderr) = texts(&out);
    assert!(stderr.contains("none is configured") && stderr.contains("MY_GH_TOKEN"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_is_waited_out_within_the_bound() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/octocat/Hello-World/issues/1347"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "1")
                .set_body_string(r#"{"message":"API rate limit exceeded"}"#),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/octocat/Hello-World/issues/1347"))
        .respond_with(json_reply(200, "issue.json"))
        .mount(&server)
        .await;
    let setup = Setup::new(&server, "max_retry_wait_s = 5\n");
    let started = std::time::Instant::now();
    let out = setup
        .call("github.get_issue", r#"{"owner":"octocat","repo":"Hello-World","number":1347}"#, &[])
        .await;
    assert!(out.status.success(), "{}", texts(&out).1);
    assert_eq!(structured(&out)["title"], "Found a bug");
    assert!(started.elapsed().as_millis() >= 1000, "Retry-After: 1 was honoured");
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_beyond_the_bound_is_a_clear_error_without_waiting() {
    let server = MockServer::start().await;
    let reset =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
            + 3600;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(403)
                .insert_header("x-ratelimit-remaining", "0")
                .insert_header("x-ratelimit-limit", "60")
                .insert_header("x-ratelimit-reset", reset.to_string().as_str())
                .set_body_string(r#"{"message":"API rate limit exceeded for 127.0.0.1."}"#),
        )
        .mount(&server)
        .await;
    let setup = Setup::new(&server, "max_retry_wait_s = 2\n");
    let started = std::time::Instant::now();
    let out = setup
        .call("github.get_issue", r#"{"owner":"octocat","repo":"Hello-World","number":1}"#, &[])
        .await;
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("(rate_limited)"), "{stderr}");
    assert!(stderr.contains("max_retry_wait_s"), "the message says how to wait longer: {stderr}");
    assert!(started.elapsed().as_secs() < 10, "an hour-long reset is not waited for");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_written_in_the_config_is_used_and_never_shown() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/octocat/Hello-World/issues/1347"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(json_reply(200, "issue.json"))
        .expect(1)
        .mount(&server)
        .await;
    let setup = Setup::new(&server, &format!("token = \"{TOKEN}\"\n"));
    let out = setup
        .call("github.get_issue", r#"{"owner":"octocat","repo":"Hello-World","number":1347}"#, &[])
        .await;
    assert!(out.status.success(), "{}", texts(&out).1);
    assert_eq!(structured(&out)["number"], 1347);
    assert_no_token(&out);
}

/// `quiver call` goes through a session like `serve`: opt-in field groups are left out (the
/// note on stderr says how to ask), and `--raw` gives the provider's untouched answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_goes_through_a_session_and_raw_gives_the_untouched_answer() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/octocat/Hello-World/pulls/1347/comments"))
        .respond_with(json_reply(200, "pull_request_review_comments.json"))
        .mount(&server)
        .await;
    let setup = Setup::new(&server, "");
    let config = setup.config_dir.path().join("quiver.toml");
    let plugins = setup.plugins.path().to_owned();
    let run = move |extra: &'static [&'static str]| {
        let (config, plugins) = (config.clone(), plugins.clone());
        tokio::task::spawn_blocking(move || {
            let args = r#"{"owner":"octocat","repo":"Hello-World","number":1347}"#;
            let mut argv = vec![
                "call",
                "github.list_pull_request_review_comments",
                "--args",
                args,
                "--config",
                config.to_str().unwrap(),
                "--plugins",
                plugins.to_str().unwrap(),
            ];
            argv.extend_from_slice(extra);
            quiver(&argv, &[])
        })
    };
    let out = run(&[]).await.unwrap();
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let trimmed: Value = serde_json::from_str(&stdout).unwrap();
    let comments = trimmed["comments"].as_array().unwrap();
    assert!(!comments.is_empty() && comments.iter().all(|c| c.get("diff_hunk").is_none()));
    assert!(stderr.contains("diff_hunk"), "the note says how to ask for it: {stderr}");

    let out = run(&["--raw"]).await.unwrap();
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let raw: Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        raw["comments"].as_array().unwrap().iter().all(|c| c.get("diff_hunk").is_some()),
        "{raw}"
    );
}
