//! The provider against a loopback GitHub: wiremock serves recorded responses (from
//! `tests/data/github/`) with GitHub's real headers, and each test checks what a user of the tool
//! would notice.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use quiver_plugin_sdk::prelude::*;
use quiver_provider_github::{GitHub, GitHubConfig};
use wiremock::matchers::{body_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TOKEN: &str = "ghp_s3cr3tT0kenValue1234567890";
const REPO: &str = "/repos/octocat/Hello-World";

fn fixture(name: &str) -> String {
    let path = format!("{}/../../tests/data/github/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A 200 with a recorded JSON body and the headers GitHub sends with it.
fn ok(name: &str) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .set_body_raw(fixture(name), "application/json; charset=utf-8")
        .insert_header("x-github-media-type", "github.v3; format=json")
        .insert_header("x-ratelimit-limit", "5000")
        .insert_header("x-ratelimit-remaining", "4987")
        .insert_header("x-ratelimit-resource", "core")
}

fn github_error(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({
        "message": message,
        "documentation_url": "https://docs.github.com/rest",
        "status": status.to_string(),
    }))
}

fn config(server: &MockServer) -> GitHubConfig {
    GitHubConfig { base_url: Some(server.uri()), token: Some(TOKEN.into()), ..Default::default() }
}

async fn call(github: &GitHub, tool: &str, args: Value) -> ToolResult {
    github.call(tool, args, ToolContext::default()).await
}

/// The structured result of a call that must succeed.
async fn ok_call(github: &GitHub, tool: &str, args: Value) -> Value {
    let result = call(github, tool, args).await;
    assert!(!result.is_error, "{tool} failed: {}", result.text_content());
    result.structured.expect("a structured result")
}

/// The kind and message of a call that must fail.
async fn failing_call(github: &GitHub, tool: &str, args: Value) -> (ToolErrorKind, String) {
    let result = call(github, tool, args).await;
    assert!(result.is_error, "{tool} succeeded: {}", result.text_content());
    let message = result.text_content();
    assert!(!message.contains(TOKEN), "the token leaked into: {message}");
    (result.error_kind.expect("an error kind"), message)
}

fn issue_args(number: u64) -> Value {
    json!({"owner": "octocat", "repo": "Hello-World", "number": number})
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

#[tokio::test(flavor = "multi_thread")]
async fn list_issues_is_compact_paginated_and_leaves_pull_requests_out() {
    let server = MockServer::start().await;
    let next = format!(
        "<{0}/repositories/1296269/issues?state=open&labels=bug&per_page=3&page=2>; rel=\"next\", \
         <{0}/repositories/1296269/issues?state=open&labels=bug&per_page=3&page=5>; rel=\"last\"",
        server.uri()
    );
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues")))
        .and(query_param("state", "open"))
        .and(query_param("labels", "bug,ui"))
        .and(query_param("per_page", "3"))
        .and(query_param("page", "1"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(ok("issues_list.json").insert_header("link", next.as_str()))
        .expect(1)
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let result = ok_call(
        &github,
        "list_issues",
        json!({
            "owner": "octocat", "repo": "Hello-World",
            "state": "open", "labels": ["bug", "ui"], "per_page": 3,
        }),
    )
    .await;

    assert_eq!(result["repository"], "octocat/Hello-World");
    assert_eq!(result["next_page"], 2);
    assert_eq!(result["pull_requests_skipped"], 1);
    let issues = result["issues"].as_array().unwrap();
    assert_eq!(
        issues.iter().map(|i| i["number"].as_u64().unwrap()).collect::<Vec<_>>(),
        [1347, 1346, 1340]
    );
    assert_eq!(issues[0]["title"], "Found a bug");
    assert_eq!(issues[0]["author"], "octocat");
    assert_eq!(issues[0]["labels"], json!(["bug"]));
    assert_eq!(issues[0]["assignees"], json!(["hubot"]));
    assert_eq!(issues[0]["comments"], 2);
    assert_eq!(issues[0]["html_url"], "https://github.com/octocat/Hello-World/issues/1347");
    let text = result.to_string();
    for noise in ["node_id", "avatar_url", "gravatar", "reactions", "api.github.com", "\"body\""] {
        assert!(!text.contains(noise), "`{noise}` survived in {text}");
    }
    assert!(text.len() * 4 < fixture("issues_list.json").len(), "the result is not compact");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_last_page_has_no_next_page_and_pull_requests_can_be_kept() {
    let server = MockServer::start().await;
    let prev = format!("<{}/repositories/1296269/issues?page=1>; rel=\"prev\"", server.uri());
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues")))
        .and(query_param("page", "2"))
        .respond_with(ok("issues_list.json").insert_header("link", prev.as_str()))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let result = ok_call(
        &github,
        "list_issues",
        json!({
            "owner": "octocat", "repo": "Hello-World", "page": 2, "include_pull_requests": true,
        }),
    )
    .await;
    assert_eq!(result["next_page"], Value::Null);
    let flagged: Vec<_> = result["issues"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["is_pull_request"] == true)
        .map(|i| i["number"].clone())
        .collect();
    assert_eq!(flagged, [json!(1348)]);
}

#[tokio::test(flavor = "multi_thread")]
async fn get_issue_and_its_comments() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(ok("issue.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347/comments")))
        .respond_with(ok("issue_comments.json"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();

    let issue = ok_call(&github, "get_issue", issue_args(1347)).await;
    assert_eq!(issue["repository"], "octocat/Hello-World");
    assert_eq!(issue["number"], 1347);
    assert!(issue["body"].as_str().unwrap().starts_with("I'm having a problem"));
    assert_eq!(issue["milestone"], "v1.0");
    assert_eq!(issue["author_association"], "OWNER");

    // GitHub's own argument name works too.
    let comments = ok_call(
        &github,
        "list_issue_comments",
        json!({"owner": "octocat", "repo": "Hello-World", "issue_number": 1347}),
    )
    .await;
    let comments = comments["comments"].as_array().unwrap();
    assert_eq!(comments.len(), 2);
    assert_eq!(comments[0]["author"], "hubot");
    assert_eq!(comments[1]["body"], "Fixed in #1348, please verify.");
    assert!(comments[0].get("edited_at").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn search_hits_name_their_repository() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/search/issues"))
        .and(query_param("q", "dismiss reason is:open"))
        .respond_with(ok("search_issues.json"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let found = ok_call(&github, "search_issues", json!({"q": "dismiss reason is:open"})).await;
    assert_eq!(found["total_count"], 42);
    assert_eq!(found["items"][0]["repository"], "XAMPPRocky/octocrab");
    assert_eq!(found["items"][0]["number"], 937);
    assert_eq!(found["items"][1]["repository"], "octocat/Spoon-Knife");
    assert_eq!(found["items"][1]["is_pull_request"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn pull_requests_their_files_reviews_and_review_comments() {
    let server = MockServer::start().await;
    for (route, file) in [
        ("/pulls", "pull_requests_list.json"),
        ("/pulls/1347", "pull_request.json"),
        ("/pulls/1347/files", "pull_request_files.json"),
        ("/pulls/1347/reviews", "pull_request_reviews.json"),
        ("/pulls/1347/comments", "pull_request_review_comments.json"),
    ] {
        Mock::given(method("GET"))
            .and(path(format!("{REPO}{route}")))
            .respond_with(ok(file))
            .mount(&server)
            .await;
    }
    let github = GitHub::new(config(&server)).unwrap();
    let repo = json!({"owner": "octocat", "repo": "Hello-World"});

    let list = ok_call(&github, "list_pull_requests", repo.clone()).await;
    let pulls = list["pull_requests"].as_array().unwrap();
    assert_eq!(pulls.len(), 4);
    assert_eq!(pulls[0]["head_ref"], "new-topic");
    assert_eq!(pulls[0]["base_ref"], "master");
    assert_eq!(pulls[0]["head_sha"], "6dcb09b5b57875f334f61aebed695e2e4193db5e");
    assert!(pulls[0].get("head_repo").is_none(), "same-repository head");
    assert_eq!(pulls[1]["head_repo"], "monalisa/Hello-World", "a fork is named");
    assert_eq!(pulls[2]["draft"], true);

    let pull = ok_call(&github, "get_pull_request", issue_args(1347)).await;
    assert_eq!(pull["mergeable"], true);
    assert_eq!(pull["mergeable_state"], "clean");
    assert_eq!(pull["merged"], false);
    assert_eq!(pull["requested_reviewers"], json!(["hubot"]));
    assert_eq!(pull["changed_files"], 2);
    assert_eq!(pull["review_comments"], 1);

    let files = ok_call(&github, "list_pull_request_files", issue_args(1347)).await;
    let files = files["files"].as_array().unwrap();
    assert_eq!(files[0]["filename"], "file1.txt");
    assert_eq!(files[0]["additions"], 103);
    let long = files[1]["patch"].as_str().unwrap();
    assert!(long.len() < 4200 && long.contains("…[cut"), "the long patch is cut, saying so");
    assert_eq!(files[2]["previous_filename"], "logo.png");
    assert!(files[2].get("patch").is_none(), "binary files have no patch");

    let reviews = ok_call(&github, "list_pull_request_reviews", issue_args(1347)).await;
    let states: Vec<_> =
        reviews["reviews"].as_array().unwrap().iter().map(|r| r["state"].clone()).collect();
    assert_eq!(states, [json!("APPROVED"), json!("CHANGES_REQUESTED")]);
    assert_eq!(reviews["reviews"][0]["commit_id"], "ecdd80bb57125d7ba9641ffaa4d7d2c19d3f3091");

    let comments = ok_call(&github, "list_pull_request_review_comments", issue_args(1347)).await;
    let c = &comments["comments"][0];
    assert_eq!((c["path"].as_str(), c["body"].as_str()), (Some("file1.txt"), Some("Great stuff!")));
    assert_eq!(c["in_reply_to_id"], 8);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_run_leads_to_its_failed_job_and_the_end_of_its_log() {
    let server = MockServer::start().await;
    let blob = MockServer::start().await; // another origin, like GitHub's log storage
    let repo = "/repos/artichoke/artichoke";
    Mock::given(method("GET"))
        .and(path(format!("{repo}/actions/runs")))
        .and(query_param("branch", "fuzz-fix"))
        .and(query_param("status", "failure"))
        .respond_with(ok("workflow_runs.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{repo}/actions/runs/1245374530/jobs")))
        .and(query_param("filter", "latest"))
        .respond_with(ok("workflow_jobs.json"))
        .mount(&server)
        .await;
    let location = format!("{}/artichoke/logs/399444497.txt?sig=abc", blob.uri());
    Mock::given(method("GET"))
        .and(path(format!("{repo}/actions/jobs/399444497/logs")))
        .respond_with(ResponseTemplate::new(302).insert_header("location", location.as_str()))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/artichoke/logs/399444497.txt"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(fixture("job_logs.txt"), "text/plain"),
        )
        .expect(1)
        .mount(&blob)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let args = |extra: Value| {
        let mut a = json!({"owner": "artichoke", "repo": "artichoke"});
        a.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        a
    };

    let runs = ok_call(
        &github,
        "list_workflow_runs",
        args(json!({"branch": "fuzz-fix", "status": "failure"})),
    )
    .await;
    assert_eq!(runs["total_count"], 3);
    let failed = &runs["workflow_runs"][2];
    assert_eq!(
        (failed["id"].as_u64(), failed["conclusion"].as_str()),
        (Some(1245374530), Some("failure"))
    );
    assert_eq!(failed["pull_requests"], json!([1346]));

    let jobs = ok_call(
        &github,
        "list_workflow_jobs",
        args(json!({"run_id": 1245374530, "filter": "latest"})),
    )
    .await;
    let job = &jobs["jobs"][1];
    assert_eq!(job["conclusion"], "failure");
    assert_eq!(
        job["failed_steps"],
        json!([{"number": 3, "name": "Run fuzzer", "conclusion": "failure"}])
    );
    assert!(jobs["jobs"][0].get("failed_steps").is_none());

    let log = ok_call(&github, "get_job_logs", args(json!({"job_id": 399444497}))).await;
    assert_eq!(log["lines_total"], 276);
    assert_eq!(log["lines_returned"], 200);
    assert!(log["note"].as_str().unwrap().contains("76 earlier lines cut"), "{}", log["note"]);
    let text = log["log"].as_str().unwrap();
    assert!(text.ends_with("Cleaning up orphan processes"));
    assert!(text.contains("SUMMARY: AddressSanitizer: heap-buffer-overflow"));
    assert!(!text.contains("2021-09-17T"), "timestamps are stripped");
    assert_eq!(log["error_lines"], json!(["##[error]Process completed with exit code 1."]));

    let requests = blob.received_requests().await.unwrap();
    assert!(
        requests.iter().all(|r| !r.headers.contains_key("authorization")),
        "the token must not follow the redirect to another origin"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn files_and_directories_on_github_enterprise() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/api/v3{REPO}/contents/README.md")))
        .and(query_param("ref", "master"))
        .respond_with(ok("contents_file.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/api/v3{REPO}/contents/src")))
        .respond_with(ok("contents_dir.json"))
        .mount(&server)
        .await;
    let github = GitHub::new(GitHubConfig {
        base_url: Some(format!("{}/api/v3/", server.uri())),
        ..config(&server)
    })
    .unwrap();

    let file = ok_call(
        &github,
        "get_file_contents",
        json!({"owner": "octocat", "repo": "Hello-World", "path": "README.md", "ref": "master"}),
    )
    .await;
    assert_eq!(file["type"], "file");
    assert_eq!(file["ref"], "master");
    assert!(file["content"].as_str().unwrap().starts_with("# Hello-World\n\nMy first repository"));
    assert_eq!(file["total_lines"], 40);
    assert!(file.get("note").is_none());

    let part = ok_call(
        &github,
        "get_file_contents",
        json!({
            "owner": "octocat", "repo": "Hello-World",
            "path": "README.md", "ref": "master", "max_bytes": 60,
        }),
    )
    .await;
    assert_eq!(part["next_start_line"], 6);
    assert!(part["note"].as_str().unwrap().contains("start_line=6"), "{}", part["note"]);

    let dir = ok_call(
        &github,
        "get_file_contents",
        json!({"owner": "octocat", "repo": "Hello-World", "path": "src/"}),
    )
    .await;
    assert_eq!(dir["type"], "dir");
    assert_eq!(
        dir["entries"],
        json!([
            {"path": "src/lib.rs", "type": "file", "size": 625,
             "sha": "80a26ab6d2a4e6e26d3a6a1b8b4b7c5e8d9f0a1b"},
            {"path": "src/main.rs", "type": "file", "size": 1204,
             "sha": "80a26ab6d2a4e6e26d3a6a1b8b4b7c5e8d9f0a1b"},
            {"path": "src/tools", "type": "dir"},
        ])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_issue_is_named() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/9")))
        .respond_with(github_error(404, "Not Found"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let (kind, message) = failing_call(&github, "get_issue", issue_args(9)).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert_eq!(
        message,
        "no issue #9 in octocat/Hello-World (or the token cannot see the repository)"
    );

    Mock::given(method("GET"))
        .and(path(format!("{REPO}/actions/jobs/77/logs")))
        .respond_with(github_error(404, "Not Found"))
        .mount(&server)
        .await;
    let (kind, message) = failing_call(
        &github,
        "get_job_logs",
        json!({"owner": "octocat", "repo": "Hello-World", "job_id": 77}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no log of job 77 in octocat/Hello-World"), "{message}");
    assert!(message.contains("logs expired"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_token_names_the_variable_to_fix_and_never_the_token() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1")))
        // GitHub does not echo tokens, but a proxy might: the message must still hide it.
        .respond_with(github_error(401, &format!("Bad credentials for {TOKEN}")))
        .mount(&server)
        .await;
    let github =
        GitHub::new(GitHubConfig { token_env: Some("WORK_GH_TOKEN".into()), ..config(&server) })
            .unwrap();
    let (kind, message) = failing_call(&github, "get_issue", issue_args(1)).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.starts_with("github rejected the token (401 Bad credentials"), "{message}");
    assert!(
        message.contains("set WORK_GH_TOKEN (the variable named by [providers.github] token_env)"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_token_the_message_says_which_variable_to_set() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1")))
        .respond_with(github_error(401, "Requires authentication"))
        .mount(&server)
        .await;
    let github = GitHub::new(GitHubConfig { token: None, ..config(&server) }).unwrap();
    let (kind, message) = failing_call(&github, "get_issue", issue_args(1)).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.contains("none is configured"), "{message}");
    assert!(message.contains("set GITHUB_TOKEN"), "{message}");
    let requests = server.received_requests().await.unwrap();
    assert!(!requests[0].headers.contains_key("authorization"), "no token, no header");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_permission_is_named() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/issues")))
        .respond_with(
            github_error(403, "Resource not accessible by personal access token")
                .insert_header("x-accepted-github-permissions", "issues=write")
                .insert_header("x-ratelimit-remaining", "4990"),
        )
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let (kind, message) = failing_call(
        &github,
        "create_issue",
        json!({"owner": "octocat", "repo": "Hello-World", "title": "x"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.contains("Resource not accessible by personal access token"), "{message}");
    assert!(message.contains("the token needs the permission `issues=write`"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_short_rate_limit_is_waited_out() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(
            github_error(429, "You have exceeded a secondary rate limit.")
                .insert_header("retry-after", "1"),
        )
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(ok("issue.json"))
        .expect(1)
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let started = Instant::now();
    let issue = ok_call(&github, "get_issue", issue_args(1347)).await;
    assert_eq!(issue["title"], "Found a bug");
    assert!(started.elapsed() >= Duration::from_secs(1), "retried before retry-after");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_that_persists_is_retried_twice_then_reported() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(github_error(429, "Too many requests").insert_header("retry-after", "1"))
        .expect(3)
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let (kind, message) = failing_call(&github, "get_issue", issue_args(1347)).await;
    assert_eq!(kind, ToolErrorKind::RateLimited);
    assert!(message.contains("even after waiting 2 s"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_past_the_calls_deadline_is_not_waited_for() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(github_error(429, "Too many requests").insert_header("retry-after", "5"))
        .expect(1)
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let ctx = ToolContext { timeout_ms: Some(2000), ..Default::default() };
    let started = Instant::now();
    let result = github.call("get_issue", issue_args(1347), ctx).await;
    assert!(started.elapsed() < Duration::from_secs(2), "waited {:?}", started.elapsed());
    assert_eq!(result.error_kind, Some(ToolErrorKind::RateLimited));
    let message = result.text_content();
    assert!(
        message.contains("github asks to retry in 5 s, past this call's deadline"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_rate_limit_fails_fast_saying_when_it_resets() {
    let server = MockServer::start().await;
    let reset = now() + 3600;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues")))
        .respond_with(
            github_error(403, "API rate limit exceeded for user ID 1.")
                .insert_header("x-ratelimit-limit", "5000")
                .insert_header("x-ratelimit-remaining", "0")
                .insert_header("x-ratelimit-used", "5000")
                .insert_header("x-ratelimit-resource", "core")
                .insert_header("x-ratelimit-reset", reset.to_string().as_str()),
        )
        .expect(1)
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let started = Instant::now();
    let (kind, message) =
        failing_call(&github, "list_issues", json!({"owner": "octocat", "repo": "Hello-World"}))
            .await;
    assert!(started.elapsed() < Duration::from_secs(3), "waited {:?}", started.elapsed());
    assert_eq!(kind, ToolErrorKind::RateLimited);
    assert!(message.contains("0 of 5000 requests left in `core`"), "{message}");
    assert!(message.contains("it resets at 20"), "{message}");
    assert!(message.contains("max_retry_wait_s = 10 s"), "{message}");
    assert!(message.contains("retry later"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_and_failed_answers_are_upstream_errors() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/pulls/5")))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw("{\"number\": 5, \"head\": ", "application/json"),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/pulls/6")))
        .respond_with(
            ResponseTemplate::new(502).set_body_raw("<html>Bad Gateway</html>", "text/html"),
        )
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let (kind, message) = failing_call(&github, "get_pull_request", issue_args(5)).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(
        message.starts_with(
            "github returned an unreadable body for pull request #5 in octocat/Hello-World"
        ),
        "{message}"
    );
    let (kind, message) = failing_call(&github, "get_pull_request", issue_args(6)).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("github failed with 502 Bad Gateway"), "{message}");
}

/// A read that meets a passing fault (a 503, a 502) is sent again after a short jittered pause,
/// and succeeds; the user never sees the fault.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_is_retried_after_a_passing_5xx() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(github_error(503, "Service Unavailable"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(ok("issue.json"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let issue = ok_call(&github, "get_issue", issue_args(1347)).await;
    assert_eq!(issue["number"], 1347);
    assert_eq!(server.received_requests().await.unwrap().len(), 2, "one retry");
}

/// A fault that persists is reported after two retries; a write is never sent twice on its own
/// (it may have landed before the fault).
#[tokio::test(flavor = "multi_thread")]
async fn a_persisting_5xx_is_reported_after_two_retries_and_writes_are_never_retried() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(github_error(502, "Bad Gateway"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/issues")))
        .respond_with(github_error(502, "Bad Gateway"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let (kind, message) = failing_call(&github, "get_issue", issue_args(1347)).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("502"), "{message}");
    assert_eq!(server.received_requests().await.unwrap().len(), 3, "the first try and two retries");
    let args = json!({"owner": "octocat", "repo": "Hello-World", "title": "Found a bug"});
    failing_call(&github, "create_issue", args).await;
    let posts = server.received_requests().await.unwrap();
    assert_eq!(posts.iter().filter(|r| r.method.as_str() == "POST").count(), 1, "never retried");
}

/// A body past `max_response_mb` is refused, with the setting named, whether its length is
/// declared or it only keeps coming.
#[tokio::test(flavor = "multi_thread")]
async fn a_body_past_max_response_mb_is_refused_unread() {
    let server = MockServer::start().await;
    let huge = format!("{{\"number\": 1347, \"title\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(ResponseTemplate::new(200).set_body_raw(huge, "application/json"))
        .mount(&server)
        .await;
    let config = GitHubConfig { max_response_mb: Some(1), ..config(&server) };
    let github = GitHub::new(config).unwrap();
    let (kind, message) = failing_call(&github, "get_issue", issue_args(1347)).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("max_response_mb = 1 MB"), "{message}");
    assert_eq!(server.received_requests().await.unwrap().len(), 1, "not a passing fault");
}

/// An endless chunked body (no length declared) is cut off at the limit, not buffered forever.
#[tokio::test(flavor = "multi_thread")]
async fn an_endless_chunked_body_is_cut_off_at_max_response_mb() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = std::sync::Arc::clone(&sent);
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = [0u8; 4096];
        let _ = socket.read(&mut request).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        let chunk = format!("4000\r\n{}\r\n", " ".repeat(0x4000));
        // Until the client hangs up; a cap of 1 MB stops it long before this one does.
        for _ in 0..100_000 {
            if socket.write_all(chunk.as_bytes()).await.is_err() {
                break;
            }
            counter.fetch_add(0x4000, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let config = GitHubConfig {
        base_url: Some(format!("http://{address}")),
        max_response_mb: Some(1),
        ..GitHubConfig::default()
    };
    let github = GitHub::new(config).unwrap();
    let (kind, message) = failing_call(&github, "get_issue", issue_args(1347)).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("max_response_mb = 1 MB"), "{message}");
    let sent = sent.load(std::sync::atomic::Ordering::Relaxed);
    assert!(sent < 64 * 1024 * 1024, "the client stopped reading early; {sent} bytes were sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_github_times_out_after_timeout_s() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(ok("issue.json").set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let github = GitHub::new(GitHubConfig { timeout_s: Some(1), ..config(&server) }).unwrap();
    let started = Instant::now();
    let (kind, message) = failing_call(&github, "get_issue", issue_args(1347)).await;
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(kind, ToolErrorKind::Timeout);
    assert!(message.contains("timeout_s"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn create_issue_posts_what_the_agent_asked_for() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/issues")))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .and(body_json(json!({
            "title": "Flaky test in CI",
            "body": "The login test fails one run in ten.",
            "labels": ["bug"],
            "assignees": ["octocat"],
        })))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_raw(fixture("issue_created.json"), "application/json; charset=utf-8")
                .insert_header(
                    "location",
                    "https://api.github.com/repos/octocat/Hello-World/issues/1349",
                ),
        )
        .expect(1)
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let created = ok_call(
        &github,
        "create_issue",
        json!({
            "owner": "octocat", "repo": "Hello-World", "title": "Flaky test in CI",
            "body": "The login test fails one run in ten.",
            "labels": ["bug"], "assignees": ["octocat"],
        }),
    )
    .await;
    assert_eq!(
        created,
        json!({
            "repository": "octocat/Hello-World",
            "number": 1349,
            "title": "Flaky test in CI",
            "labels": ["bug"],
            "assignees": ["octocat"],
            "html_url": "https://github.com/octocat/Hello-World/issues/1349",
            "created_at": "2011-04-24T10:00:00Z",
        })
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn comments_go_to_issues_and_pull_requests_alike() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/issues/1347/comments")))
        .and(body_json(json!({"body": "Looks good to me."})))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_raw(fixture("issue_comment_created.json"), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let created = ok_call(
        &github,
        "add_issue_comment",
        json!({
            "owner": "octocat", "repo": "Hello-World", "number": 1347, "body": "Looks good to me.",
        }),
    )
    .await;
    assert_eq!(created["id"], 760203695);
    assert_eq!(
        created["html_url"],
        "https://github.com/octocat/Hello-World/pull/1347#issuecomment-760203695"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_are_refused_before_any_request() {
    let server = MockServer::start().await;
    let github = GitHub::new(config(&server)).unwrap();
    let (kind, message) = failing_call(
        &github,
        "get_issue",
        json!({"owner": "octocat", "repo": "octocat/Hello-World", "number": 1}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("repository name alone"), "{message}");
    let (kind, message) = failing_call(
        &github,
        "get_file_contents",
        json!({"owner": "octocat", "repo": "Hello-World", "path": "../../issues"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("`..`"), "{message}");
    let (kind, message) = failing_call(
        &github,
        "list_issues",
        json!({"owner": "octocat", "repo": "Hello-World", "stat": "open"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("unknown field `stat`"), "{message}");
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[test]
fn configuration_typos_are_errors_and_the_token_is_not_printed() {
    let err =
        serde_json::from_value::<GitHubConfig>(json!({"base_ur": "https://x"})).err().unwrap();
    assert!(err.to_string().contains("unknown field `base_ur`"), "{err}");
    let config: GitHubConfig =
        serde_json::from_value(json!({"token": TOKEN, "token_env": "GH", "max_retry_wait_s": 5}))
            .unwrap();
    assert!(!format!("{config:?}").contains(TOKEN));
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_base_urls_are_refused_at_start_and_a_missing_token_is_not() {
    let err = GitHub::new(GitHubConfig {
        base_url: Some("ghe.example.com".into()),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(err.to_string().contains("https://ghe.example.com/api/v3"), "{err}");
    assert!(GitHub::new(GitHubConfig::default()).is_ok(), "no token is not an error");
    let tools = GitHub::tools();
    assert!(tools.iter().all(|t| t.output_schema.is_some() && t.group.is_some()));
    let list = tools.iter().find(|t| t.name == "list_issues").unwrap();
    assert!(
        list.input_schema["properties"]["per_page"]["description"]
            .as_str()
            .unwrap()
            .contains("at most 100"),
        "argument docs reach the schema"
    );
}

fn repo_args(extra: Value) -> Value {
    let mut a = json!({"owner": "octocat", "repo": "Hello-World"});
    a.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    a
}

/// A `Link` header that points at page `page` of `path`.
fn next_link(server: &MockServer, path: &str, page: u32) -> String {
    format!("<{}{path}?per_page=2&page={page}>; rel=\"next\"", server.uri())
}

/// A write answered with a recorded body and `status`.
fn created(status: u16, name: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(fixture(name), "application/json; charset=utf-8")
}

/// GitHub's 422 with its `errors` list.
fn validation_failed(errors: Value) -> ResponseTemplate {
    ResponseTemplate::new(422).set_body_json(json!({
        "message": "Validation Failed",
        "errors": errors,
        "documentation_url": "https://docs.github.com/rest",
        "status": "422",
    }))
}

#[tokio::test(flavor = "multi_thread")]
async fn repositories_are_found_described_and_searched_for_code() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/search/repositories"))
        .and(query_param("q", "octocrab language:rust"))
        .and(query_param("sort", "stars"))
        .respond_with(
            ok("search_repositories.json")
                .insert_header("link", next_link(&server, "/search/repositories", 2).as_str()),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(REPO))
        .respond_with(ok("repository.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/octocat/Nope"))
        .respond_with(github_error(404, "Not Found"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/search/code"))
        .and(query_param("q", "personal_token repo:XAMPPRocky/octocrab"))
        .and(header("accept", "application/vnd.github.text-match+json"))
        .respond_with(ok("search_code.json"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();

    let found = ok_call(
        &github,
        "search_repositories",
        json!({"q": "octocrab language:rust", "sort": "stars"}),
    )
    .await;
    assert_eq!(found["total_count"], 2);
    assert_eq!(found["next_page"], 2);
    let hit = &found["items"][0];
    assert_eq!(hit["repository"], "XAMPPRocky/octocrab");
    assert_eq!((hit["stars"].as_u64(), hit["language"].as_str()), (Some(1021), Some("Rust")));
    assert_eq!(hit["default_branch"], "main");
    assert_eq!(found["items"][1]["archived"], true);
    let text = found.to_string();
    assert!(!text.contains("_url\":\"https://api."), "API URLs survived: {text}");
    assert!(text.len() * 3 < fixture("search_repositories.json").len(), "not compact");

    let repo = ok_call(&github, "get_repository", repo_args(json!({}))).await;
    assert_eq!(repo["repository"], "octocat/Hello-World");
    assert_eq!(repo["parent"], "octo-org/Hello-World");
    assert_eq!(repo["merge_methods"], json!(["squash", "rebase"]), "merge commits are off");
    assert_eq!(repo["permission"], "push");
    assert_eq!(repo["license"], "MIT");

    let (kind, message) =
        failing_call(&github, "get_repository", json!({"owner": "octocat", "repo": "Nope"})).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert_eq!(message, "no repository octocat/Nope (or the token cannot see it)");

    let code =
        ok_call(&github, "search_code", json!({"q": "personal_token repo:XAMPPRocky/octocrab"}))
            .await;
    let hit = &code["items"][0];
    assert_eq!(
        (hit["repository"].as_str(), hit["path"].as_str()),
        (Some("XAMPPRocky/octocrab"), Some("README.md"))
    );
    assert_eq!(hit["fragments"].as_array().unwrap().len(), 2);
    assert!(hit["fragments"][0].as_str().unwrap().contains("personal_token(token)"));
    assert_eq!(code["next_page"], Value::Null);
}

#[tokio::test(flavor = "multi_thread")]
async fn branches_commits_and_comparisons() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/branches")))
        .and(query_param("per_page", "2"))
        .respond_with(
            ok("branches.json")
                .insert_header("link", next_link(&server, &format!("{REPO}/branches"), 2).as_str()),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/commits")))
        .and(query_param("sha", "fix-login"))
        .and(query_param("path", "src/container.rs"))
        .respond_with(ok("commits_list.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/commits/24606b5f326a1356f031dd06431cfb0beddd475f")))
        .respond_with(ok("commit.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/compare/master...fix-login")))
        .respond_with(ok("compare.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/compare/master...nope")))
        .respond_with(github_error(404, "Not Found"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();

    let branches = ok_call(&github, "list_branches", repo_args(json!({"per_page": 2}))).await;
    assert_eq!(
        branches["branches"][0],
        json!({"name": "master", "sha": "c5b97d5ae6c19d5c5df71a34c7fbeeda2479ccbc", "protected": true})
    );
    assert!(branches["branches"][1].get("protected").is_none(), "false flags are left out");
    assert_eq!(branches["next_page"], 2);

    let commits = ok_call(
        &github,
        "list_commits",
        repo_args(json!({"sha": "fix-login", "path": "src/container.rs"})),
    )
    .await;
    let list = commits["commits"].as_array().unwrap();
    assert_eq!(list[0]["message"], "Improved logs (#21717)");
    assert_eq!(list[1]["message"], "Bump tokio to 1.37", "only the first line of the message");
    assert_eq!(list[1]["author"], "Jane Doe", "the git name when GitHub knows no account");
    assert_eq!(list[1]["date"], "2024-04-29T16:02:11Z");

    let commit = ok_call(
        &github,
        "get_commit",
        repo_args(json!({"sha": "24606b5f326a1356f031dd06431cfb0beddd475f"})),
    )
    .await;
    assert!(commit["message"].as_str().unwrap().contains("GetActiveVersionedContainer"));
    assert_eq!(commit["stats"], json!({"additions": 104, "deletions": 6, "total": 110}));
    assert_eq!(commit["parents"], json!(["7cf97159fe31b0e011bbb24109b5e10d278f551f"]));
    assert_eq!(commit["files"][1]["status"], "added");
    assert!(commit["files"][0]["patch"].as_str().unwrap().contains("no active version"));
    assert!(commit.get("committer").is_some(), "GitHub committed for the author");

    let diff = ok_call(
        &github,
        "compare_commits",
        repo_args(json!({"base": "master", "head": "fix-login", "max_patch_bytes": 0})),
    )
    .await;
    assert_eq!(diff["status"], "diverged");
    assert_eq!((diff["ahead_by"].as_u64(), diff["behind_by"].as_u64()), (Some(2), Some(1)));
    assert_eq!(diff["commits"].as_array().unwrap().len(), 2);
    assert_eq!(diff["changed_files"], 2);
    assert_eq!(diff["files"][0]["filename"], "src/container.rs");
    assert!(diff["files"][0].get("patch").is_none(), "max_patch_bytes 0 drops patches");

    let (kind, message) = failing_call(
        &github,
        "compare_commits",
        repo_args(json!({"base": "master", "head": "nope"})),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.contains("no `master` or no `nope` in octocat/Hello-World"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tags_and_releases() {
    let server = MockServer::start().await;
    let repo = "/repos/XAMPPRocky/octocrab";
    for (route, file) in [
        (format!("{REPO}/tags"), "tags.json"),
        (format!("{repo}/releases"), "releases_list.json"),
        (format!("{repo}/releases/latest"), "release_latest.json"),
        (format!("{repo}/releases/tags/v0.38.0"), "release_latest.json"),
    ] {
        Mock::given(method("GET")).and(path(route)).respond_with(ok(file)).mount(&server).await;
    }
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/releases/latest")))
        .respond_with(github_error(404, "Not Found"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let octocrab = |extra: Value| {
        let mut a = json!({"owner": "XAMPPRocky", "repo": "octocrab"});
        a.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        a
    };

    let tags = ok_call(&github, "list_tags", repo_args(json!({}))).await;
    assert_eq!(
        tags["tags"][1],
        json!({"name": "v0.1", "sha": "c5b97d5ae6c19d5c5df71a34c7fbeeda2479ccbc"})
    );

    let releases = ok_call(&github, "list_releases", octocrab(json!({}))).await;
    let list = releases["releases"].as_array().unwrap();
    assert_eq!(list[0]["tag_name"], "v0.38.0");
    assert_eq!(list[0]["author"], "github-actions[bot]");
    assert_eq!(list[1]["draft"], true);
    assert!(list[0].get("body").is_none(), "listings leave the notes out");

    let latest = ok_call(&github, "get_latest_release", octocrab(json!({}))).await;
    assert_eq!(latest["repository"], "XAMPPRocky/octocrab");
    assert_eq!(latest["tag_name"], "v0.38.0");
    assert!(!latest["body"].as_str().unwrap().is_empty());
    let by_tag = ok_call(&github, "get_release_by_tag", octocrab(json!({"tag": "v0.38.0"}))).await;
    assert_eq!(by_tag["id"], latest["id"]);

    let (kind, message) = failing_call(&github, "get_latest_release", repo_args(json!({}))).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("octocat/Hello-World has no published release"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_branch_starts_from_the_default_branch_and_a_taken_name_is_refused() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(REPO))
        .respond_with(ok("repository.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/git/ref/heads/master")))
        .respond_with(ok("git_ref.json"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/git/refs")))
        .and(body_json(json!({
            "ref": "refs/heads/fix-login",
            "sha": "c5b97d5ae6c19d5c5df71a34c7fbeeda2479ccbc",
        })))
        .respond_with(created(201, "git_ref_created.json"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/git/refs")))
        .respond_with(validation_failed(json!([])).set_body_json(json!({
            "message": "Reference already exists",
            "documentation_url": "https://docs.github.com/rest/git/refs#create-a-reference",
            "status": "422",
        })))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();

    let branch = ok_call(&github, "create_branch", repo_args(json!({"branch": "fix-login"}))).await;
    assert_eq!(
        branch,
        json!({
            "repository": "octocat/Hello-World",
            "branch": "fix-login",
            "sha": "c5b97d5ae6c19d5c5df71a34c7fbeeda2479ccbc",
            "from": "master",
        })
    );
    // From a SHA: no lookup, straight to the write, which GitHub refuses.
    let (kind, message) = failing_call(
        &github,
        "create_branch",
        repo_args(
            json!({"branch": "fix-login", "from": "c5b97d5ae6c19d5c5df71a34c7fbeeda2479ccbc"}),
        ),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert_eq!(
        message,
        "github rejected the request for creating branch `fix-login` in octocat/Hello-World \
         (422 Reference already exists)"
    );
    let gets = server.received_requests().await.unwrap();
    assert_eq!(gets.iter().filter(|r| r.method.as_str() == "GET").count(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn files_are_created_and_updated_with_one_commit_each() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path(format!("{REPO}/contents/docs/notes.md")))
        .and(body_json(json!({
            "message": "Add usage notes",
            "content": "IyBOb3RlcwoKUnVuIGBjYXJnbyB0ZXN0YC4K",
            "branch": "fix-login",
        })))
        .respond_with(created(201, "contents_created.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{REPO}/contents/README.md")))
        .respond_with(ResponseTemplate::new(409).set_body_json(json!({
            "message": "README.md does not match 3d21ec53a331a6f037a91c368710b99387d012c1",
            "documentation_url": "https://docs.github.com/rest/repos/contents#create-or-update-file-contents",
            "status": "409",
        })))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();

    let written = ok_call(
        &github,
        "create_file",
        repo_args(json!({
            "path": "docs/notes.md", "content": "# Notes\n\nRun `cargo test`.\n",
            "message": "Add usage notes", "branch": "fix-login",
        })),
    )
    .await;
    assert_eq!(written["sha"], "95b966ae1c166bd92f8ae7d1c313e738c731dfc3");
    assert_eq!(written["commit_sha"], "7638417db6d59f3c431d3e1f261cc637155684cd");
    assert_eq!(written["branch"], "fix-login");
    assert_eq!(written["path"], "docs/notes.md");

    let (kind, message) = failing_call(
        &github,
        "update_file",
        repo_args(json!({
            "path": "README.md", "content": "new", "message": "Update README",
            "sha": "95b966ae1c166bd92f8ae7d1c313e738c731dfc3",
        })),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("updating `README.md` in octocat/Hello-World"), "{message}");
    assert!(message.contains("409 README.md does not match 3d21ec5"), "{message}");
    let put = &server.received_requests().await.unwrap()[1];
    let sent: Value = serde_json::from_slice(&put.body).unwrap();
    assert_eq!(sent["sha"], "95b966ae1c166bd92f8ae7d1c313e738c731dfc3", "the blob being replaced");
}

#[tokio::test(flavor = "multi_thread")]
async fn issues_are_closed_labelled_and_assigned() {
    let server = MockServer::start().await;
    Mock::given(method("PATCH"))
        .and(path(format!("{REPO}/issues/1347")))
        .and(body_json(json!({"state": "closed", "state_reason": "not_planned"})))
        .respond_with(ok("issue_updated.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path(format!("{REPO}/issues/1348")))
        .respond_with(validation_failed(json!([
            {"resource": "Issue", "field": "milestone", "code": "invalid", "value": 99}
        ])))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/issues/1347/labels")))
        .and(body_json(json!({"labels": ["enhancement"]})))
        .respond_with(ok("issue_labels_added.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path(format!("{REPO}/issues/1347/labels/needs%20triage")))
        .respond_with(ok("issue_labels_removed.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path(format!("{REPO}/issues/1347/labels/wontfix")))
        .respond_with(github_error(404, "Label does not exist"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/issues/1347/assignees")))
        .and(body_json(json!({"assignees": ["hubot"]})))
        .respond_with(created(201, "issue.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path(format!("{REPO}/issues/1347/assignees")))
        .and(body_json(json!({"assignees": ["octocat"]})))
        .respond_with(ok("issue.json"))
        .expect(1)
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();

    let closed = ok_call(
        &github,
        "update_issue",
        repo_args(json!({"number": 1347, "state": "closed", "state_reason": "not_planned"})),
    )
    .await;
    assert_eq!(
        (closed["state"].as_str(), closed["state_reason"].as_str()),
        (Some("closed"), Some("not_planned"))
    );
    assert_eq!(closed["repository"], "octocat/Hello-World");
    assert!(closed.get("body").is_none(), "a write echoes the state, not the body");

    let (kind, message) =
        failing_call(&github, "update_issue", repo_args(json!({"number": 1348, "milestone": 99})))
            .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("(422 Validation Failed: milestone invalid (99))"), "{message}");
    let (kind, message) =
        failing_call(&github, "update_issue", repo_args(json!({"number": 1}))).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.starts_with("nothing to change"), "{message}");

    let labels = ok_call(
        &github,
        "add_issue_labels",
        repo_args(json!({"number": 1347, "labels": ["enhancement", " "]})),
    )
    .await;
    assert_eq!(labels["labels"], json!(["bug", "enhancement"]));
    let left = ok_call(
        &github,
        "remove_issue_label",
        repo_args(json!({"number": 1347, "label": "needs triage"})),
    )
    .await;
    assert_eq!(left["labels"], json!(["bug"]));
    let (kind, message) = failing_call(
        &github,
        "remove_issue_label",
        repo_args(json!({"number": 1347, "label": "wontfix"})),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(
        message.starts_with(
            "issue or pull request #1347 in octocat/Hello-World has no label `wontfix`"
        ),
        "{message}"
    );

    let assigned = ok_call(
        &github,
        "add_issue_assignees",
        repo_args(json!({"number": 1347, "assignees": ["hubot"]})),
    )
    .await;
    assert_eq!(assigned["assignees"], json!(["hubot"]));
    ok_call(
        &github,
        "remove_issue_assignees",
        repo_args(json!({"number": 1347, "assignees": ["octocat"]})),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pull_requests_are_opened_reviewed_and_merged() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/pulls")))
        .and(body_json(json!({
            "title": "Fix the login redirect", "head": "fix-login", "base": "master", "draft": true,
        })))
        .respond_with(created(201, "pull_request_created.json"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/pulls")))
        .respond_with(validation_failed(json!([{
            "resource": "PullRequest", "code": "custom",
            "message": "A pull request already exists for octocat:fix-login.",
        }])))
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path(format!("{REPO}/pulls/1351")))
        .and(body_json(json!({"title": "Fix the login redirect", "base": "master"})))
        .respond_with(ok("pull_request_created.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/pulls/1347/requested_reviewers")))
        .and(body_json(json!({"reviewers": ["monalisa"], "team_reviewers": ["justice-league"]})))
        .respond_with(created(201, "pull_request_reviewers_requested.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/pulls/1347/reviews")))
        .and(body_json(json!({
            "body": "A few nits.",
            "comments": [
                {"path": "file1.txt", "line": 3, "body": "Typo?"},
                {"path": "file1.txt", "line": 2, "side": "LEFT", "body": "Why remove this?"},
            ],
        })))
        .respond_with(ok("pull_request_review_pending.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/pulls/1347/reviews/81/events")))
        .and(body_json(json!({"event": "REQUEST_CHANGES", "body": "Please fix the nits."})))
        .respond_with(ok("pull_request_review_submitted.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{REPO}/pulls/1347/merge")))
        .and(body_json(json!({
            "merge_method": "squash", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
        })))
        .respond_with(ok("pull_request_merged.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{REPO}/pulls/1348/merge")))
        .respond_with(github_error(405, "Pull Request is not mergeable"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();

    let args = repo_args(json!({
        "title": "Fix the login redirect", "head": "fix-login", "base": "master", "draft": true,
    }));
    let opened = ok_call(&github, "create_pull_request", args.clone()).await;
    assert_eq!(opened["number"], 1351);
    assert_eq!(
        (opened["draft"].as_bool(), opened["head_ref"].as_str()),
        (Some(true), Some("fix-login"))
    );
    assert_eq!(opened["html_url"], "https://github.com/octocat/Hello-World/pull/1351");
    let (kind, message) = failing_call(&github, "create_pull_request", args).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("A pull request already exists for octocat:fix-login."), "{message}");

    ok_call(
        &github,
        "update_pull_request",
        repo_args(json!({"number": 1351, "title": "Fix the login redirect", "base": "master"})),
    )
    .await;

    let asked = ok_call(
        &github,
        "add_pull_request_reviewers",
        repo_args(json!({"number": 1347, "reviewers": ["monalisa"], "team_reviewers": ["justice-league"]})),
    )
    .await;
    assert_eq!(asked["requested_reviewers"], json!(["hubot", "monalisa"]));
    assert_eq!(asked["requested_teams"], json!(["justice-league"]));

    let pending = ok_call(
        &github,
        "create_pull_request_review",
        repo_args(json!({
            "number": 1347, "body": "A few nits.",
            "comments": [
                {"path": "file1.txt", "line": 3, "body": "Typo?"},
                {"path": "file1.txt", "line": 2, "side": "LEFT", "body": "Why remove this?"},
            ],
        })),
    )
    .await;
    assert_eq!((pending["id"].as_u64(), pending["state"].as_str()), (Some(81), Some("PENDING")));
    assert_eq!(pending["comments"], 2);
    let submitted = ok_call(
        &github,
        "submit_pull_request_review",
        repo_args(json!({
            "number": 1347, "review_id": 81, "event": "REQUEST_CHANGES",
            "body": "Please fix the nits.",
        })),
    )
    .await;
    assert_eq!(submitted["state"], "CHANGES_REQUESTED");
    let (kind, message) = failing_call(
        &github,
        "create_pull_request_review",
        repo_args(json!({"number": 1347, "event": "REQUEST_CHANGES"})),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("needs a `body`"), "{message}");

    let merged = ok_call(
        &github,
        "merge_pull_request",
        repo_args(json!({
            "number": 1347, "merge_method": "squash",
            "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
        })),
    )
    .await;
    assert_eq!(merged["merged"], true);
    assert_eq!(merged["message"], "Pull Request successfully merged");
    let (_, message) =
        failing_call(&github, "merge_pull_request", repo_args(json!({"number": 1348}))).await;
    assert!(message.contains("405 Pull Request is not mergeable"), "{message}");
    assert!(message.contains("pull request #1348 in octocat/Hello-World"), "{message}");
    let requests = server.received_requests().await.unwrap();
    let merges = requests.iter().filter(|r| r.url.path().ends_with("/1348/merge")).count();
    assert_eq!(merges, 1, "a refused write is not sent again");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_diff_keeps_whole_files_and_names_those_that_do_not_fit() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/pulls/1347")))
        .and(header("accept", "application/vnd.github.diff"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(fixture("pull_request.diff"), "text/plain; charset=utf-8"),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/pulls/9")))
        .respond_with(github_error(404, "Not Found"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();

    let whole = ok_call(&github, "get_pull_request_diff", issue_args(1347)).await;
    assert_eq!(whole["files"], 3);
    assert_eq!(whole["diff"].as_str().unwrap(), fixture("pull_request.diff"));
    assert!(whole.get("omitted").is_none());

    let part = ok_call(
        &github,
        "get_pull_request_diff",
        repo_args(json!({"number": 1347, "max_bytes": 1024})),
    )
    .await;
    let diff = part["diff"].as_str().unwrap();
    assert!(
        diff.starts_with("diff --git a/file1.txt") && diff.contains("rename to images/logo.png")
    );
    assert_eq!(part["omitted"][0]["filename"], "src/generated.rs");
    assert!(part["omitted"][0]["bytes"].as_u64().unwrap() > 2000);

    let (kind, message) = failing_call(&github, "get_pull_request_diff", issue_args(9)).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no pull request #9 in octocat/Hello-World"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn commit_status_and_check_runs_put_failures_first() {
    let server = MockServer::start().await;
    let sha = "6dcb09b5b57875f334f61aebed695e2e4193db5e";
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/commits/{sha}/status")))
        .respond_with(ok("commit_status.json"))
        .mount(&server)
        .await;
    let runs = format!("{REPO}/commits/{sha}/check-runs");
    Mock::given(method("GET"))
        .and(path(runs.as_str()))
        .and(query_param("filter", "latest"))
        .respond_with(
            ok("check_runs.json").insert_header("link", next_link(&server, &runs, 2).as_str()),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/commits/nope/status")))
        .respond_with(github_error(404, "Not Found"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();

    let status = ok_call(&github, "get_commit_status", repo_args(json!({"ref": sha}))).await;
    assert_eq!(status["state"], "failure");
    assert_eq!(status["statuses"][0]["context"], "security/brakeman", "failures first");
    assert_eq!(status["statuses"][0]["description"], "2 new warnings");

    let checks =
        ok_call(&github, "list_check_runs", repo_args(json!({"ref": sha, "filter": "latest"})))
            .await;
    assert_eq!((checks["failed"].as_u64(), checks["pending"].as_u64()), (Some(1), Some(1)));
    assert_eq!(checks["next_page"], 2);
    let failed = &checks["check_runs"][1];
    assert_eq!(
        (failed["conclusion"].as_str(), failed["app"].as_str()),
        (Some("failure"), Some("github-actions"))
    );
    assert_eq!(failed["summary"], "Process completed with exit code 101.");
    assert_eq!(
        checks["check_runs"][2]["html_url"],
        "https://app.codecov.io/gh/XAMPPRocky/octocrab/pull/633"
    );

    let (kind, message) =
        failing_call(&github, "get_commit_status", repo_args(json!({"ref": "nope"}))).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no commit `nope` in octocat/Hello-World"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn workflows_are_dispatched_rerun_and_cancelled() {
    let server = MockServer::start().await;
    let repo = "/repos/octo-org/octo-repo";
    Mock::given(method("GET"))
        .and(path(format!("{repo}/actions/workflows")))
        .respond_with(ok("workflows.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{repo}/actions/runs/1245374530")))
        .respond_with(ok("workflow_run.json"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{repo}/actions/workflows/deploy.yml/dispatches")))
        .and(body_json(json!({"ref": "main", "inputs": {"environment": "staging"}})))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{repo}/actions/workflows/blank.yaml/dispatches")))
        .respond_with(validation_failed(json!([])).set_body_json(json!({
            "message": "Workflow does not have 'workflow_dispatch' trigger",
            "documentation_url": "https://docs.github.com/rest/actions/workflows#create-a-workflow-dispatch-event",
            "status": "422",
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{repo}/actions/runs/1245374530/rerun-failed-jobs")))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{repo}/actions/runs/30433642/cancel")))
        .respond_with(ResponseTemplate::new(202).set_body_json(json!({})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{repo}/actions/runs/1245374530/cancel")))
        .respond_with(ResponseTemplate::new(409).set_body_json(json!({
            "message": "Cannot cancel a workflow run that is completed.",
            "documentation_url": "https://docs.github.com/rest/actions/workflow-runs#cancel-a-workflow-run",
            "status": "409",
        })))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{repo}/actions/runs/2332938/artifacts")))
        .respond_with(ok("artifacts.json"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();
    let args = |extra: Value| {
        let mut a = json!({"owner": "octo-org", "repo": "octo-repo"});
        a.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        a
    };

    let workflows = ok_call(&github, "list_workflows", args(json!({}))).await;
    assert_eq!(workflows["total_count"], 3);
    assert_eq!(
        workflows["workflows"][0],
        json!({
            "id": 161335, "name": "CI", "file": "blank.yaml", "state": "active",
            "html_url": "https://github.com/octo-org/octo-repo/blob/master/.github/workflows/blank.yaml",
        })
    );

    let run = ok_call(&github, "get_workflow_run", args(json!({"run_id": 1245374530}))).await;
    assert_eq!(
        (run["id"].as_u64(), run["conclusion"].as_str()),
        (Some(1245374530), Some("failure"))
    );

    let dispatched = ok_call(
        &github,
        "dispatch_workflow",
        args(
            json!({"workflow": "deploy.yml", "ref": "main", "inputs": {"environment": "staging"}}),
        ),
    )
    .await;
    assert!(dispatched["note"].as_str().unwrap().contains("list_workflow_runs"));
    let (kind, message) = failing_call(
        &github,
        "dispatch_workflow",
        args(json!({"workflow": "blank.yaml", "ref": "main"})),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("Workflow does not have 'workflow_dispatch' trigger"), "{message}");

    let rerun = ok_call(&github, "rerun_failed_jobs", args(json!({"run_id": 1245374530}))).await;
    assert!(rerun["accepted"].as_str().unwrap().starts_with("re-running the failed jobs"));
    let cancelled =
        ok_call(&github, "cancel_workflow_run", args(json!({"run_id": 30433642}))).await;
    assert_eq!(cancelled["accepted"], "cancelling");
    let (kind, message) =
        failing_call(&github, "cancel_workflow_run", args(json!({"run_id": 1245374530}))).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("409 Cannot cancel a workflow run that is completed."), "{message}");

    let artifacts = ok_call(&github, "list_artifacts", args(json!({"run_id": 2332938}))).await;
    assert_eq!(artifacts["artifacts"][0]["name"], "Rails");
    assert_eq!(artifacts["artifacts"][0]["run_id"], 2332938);
    assert_eq!(artifacts["artifacts"][1]["expired"], true);
    assert!(
        artifacts["artifacts"][1].get("archive_download_url").is_none(),
        "expired: nothing to download"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn notifications_are_listed_and_marked_read() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/notifications"))
        .and(query_param("participating", "true"))
        .respond_with(ok("notifications.json"))
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path("/notifications/threads/2"))
        .respond_with(ResponseTemplate::new(205))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{REPO}/notifications")))
        .and(body_json(json!({"read": true, "last_read_at": "2014-11-07T22:01:45Z"})))
        .respond_with(ResponseTemplate::new(202).set_body_json(json!({
            "message": "Unread notifications couldn't be marked in a single request. Notifications are being marked as read in the background.",
        })))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path("/notifications/threads/77"))
        .respond_with(github_error(404, "Not Found"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();

    let list = ok_call(&github, "list_notifications", json!({"participating": true})).await;
    let threads = list["notifications"].as_array().unwrap();
    assert_eq!(
        threads[1],
        json!({
            "id": "2", "repository": "octocat/Hello-World", "type": "PullRequest",
            "title": "Amazing new feature", "number": 1347, "reason": "review_requested",
            "unread": true, "updated_at": "2014-11-07T22:01:45Z",
        })
    );
    assert!(threads[2].get("number").is_none(), "a release has no number");

    let one = ok_call(&github, "mark_notifications_read", json!({"thread_id": "2"})).await;
    assert_eq!(one, json!({"marked": "thread 2", "in_background": false}));
    let repo = ok_call(
        &github,
        "mark_notifications_read",
        repo_args(json!({"last_read_at": "2014-11-07T22:01:45Z"})),
    )
    .await;
    assert_eq!(repo["marked"], "every notification of octocat/Hello-World");
    assert_eq!(repo["in_background"], true);
    let (kind, message) =
        failing_call(&github, "mark_notifications_read", json!({"thread_id": "77"})).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert_eq!(message, "no notification thread 77 for this token");
    let (kind, _) = failing_call(&github, "list_notifications", json!({"owner": "octocat"})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments, "owner without repo");
}

#[tokio::test(flavor = "multi_thread")]
async fn security_alerts_are_read_page_by_page() {
    let server = MockServer::start().await;
    let alerts = format!("{REPO}/dependabot/alerts");
    let next = format!(
        "<{}{alerts}?per_page=2&after=Y3Vyc29yOnYyOpK0MjAyNC0xMC0wN1QxMTo1OTozM1rOAAAAAQ%3D%3D>; \
         rel=\"next\"",
        server.uri()
    );
    Mock::given(method("GET"))
        .and(path(alerts.as_str()))
        .and(query_param("state", "open"))
        .and(query_param("severity", "critical,high"))
        .respond_with(ok("dependabot_alerts.json").insert_header("link", next.as_str()))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/code-scanning/alerts")))
        .and(query_param("state", "open"))
        .and(query_param("page", "2"))
        .respond_with(ok("code_scanning_alerts.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/octocat/Spoon-Knife/dependabot/alerts"))
        .respond_with(github_error(404, "Not Found"))
        .mount(&server)
        .await;
    let github = GitHub::new(config(&server)).unwrap();

    let found = ok_call(
        &github,
        "list_dependabot_alerts",
        repo_args(json!({"severity": "critical,high", "per_page": 2})),
    )
    .await;
    assert_eq!(found["next_cursor"], "Y3Vyc29yOnYyOpK0MjAyNC0xMC0wN1QxMTo1OTozM1rOAAAAAQ==");
    let alert = &found["alerts"][0];
    assert_eq!(
        (alert["package"].as_str(), alert["severity"].as_str()),
        (Some("lodash"), Some("high"))
    );
    assert_eq!(alert["vulnerable_versions"], "< 4.17.21");
    assert_eq!(alert["patched_version"], "4.17.21");
    assert_eq!(alert["cve_id"], "CVE-2021-23337");
    assert_eq!(found["alerts"][1]["dismissed_reason"], "tolerable_risk");
    assert!(!found.to_string().contains("cvss"), "advisory details are left out");

    let scanning =
        ok_call(&github, "list_code_scanning_alerts", repo_args(json!({"page": 2}))).await;
    let alert = &scanning["alerts"][1];
    assert_eq!(
        (alert["rule"].as_str(), alert["severity"].as_str()),
        (Some("js/zipslip"), Some("high"))
    );
    assert_eq!(
        (alert["path"].as_str(), alert["start_line"].as_u64()),
        (Some("spec-main/api-session-spec.ts"), Some(917))
    );
    assert!(alert.get("end_line").is_none(), "a one-line alert");
    assert_eq!(scanning["alerts"][0]["dismissed_by"], "octocat");

    let (kind, message) = failing_call(
        &github,
        "list_dependabot_alerts",
        json!({"owner": "octocat", "repo": "Spoon-Knife"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.contains("Dependabot alerts are not enabled on it"), "{message}");
}
