//! The provider against a loopback GitLab: wiremock serves recorded responses (from
//! `tests/data/gitlab/`) with GitLab's real pagination and rate-limit headers, and each test
//! checks what a user of the tool would notice.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use quiver_plugin_sdk::prelude::*;
use quiver_provider_gitlab::{AuthScheme, GitLab, GitLabConfig};
use wiremock::matchers::{body_json, header, method, path, path_regex, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TOKEN: &str = "glpat-s3cr3tT0kenValue12345";
/// `acme/backend/api`, URL-encoded as GitLab wants it in paths.
const API: &str = "/api/v4/projects/acme%2Fbackend%2Fapi";
const PROJECT: &str = "acme/backend/api";

fn fixture(name: &str) -> String {
    let path = format!("{}/../../tests/data/gitlab/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A 200 with a recorded JSON body and the headers GitLab sends with it.
fn ok(name: &str) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .set_body_raw(fixture(name), "application/json")
        .insert_header("ratelimit-limit", "2000")
        .insert_header("ratelimit-remaining", "1987")
        .insert_header("ratelimit-observed", "13")
        .insert_header("x-request-id", "01HX8M3F2Q6YV8Z4B5C7D9E1F2")
}

/// A GitLab error body: `{"message": "404 Project Not Found"}`.
fn gitlab_error(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({ "message": message }))
}

fn config(server: &MockServer) -> GitLabConfig {
    GitLabConfig { base_url: Some(server.uri()), token: Some(TOKEN.into()), ..Default::default() }
}

async fn call(gitlab: &GitLab, tool: &str, args: Value) -> ToolResult {
    gitlab.call(tool, args, ToolContext::default()).await
}

/// The structured result of a call that must succeed.
async fn ok_call(gitlab: &GitLab, tool: &str, args: Value) -> Value {
    let result = call(gitlab, tool, args).await;
    assert!(!result.is_error, "{tool} failed: {}", result.text_content());
    result.structured.expect("a structured result")
}

/// The kind and message of a call that must fail.
async fn failing_call(gitlab: &GitLab, tool: &str, args: Value) -> (ToolErrorKind, String) {
    let result = call(gitlab, tool, args).await;
    assert!(result.is_error, "{tool} succeeded: {}", result.text_content());
    let message = result.text_content();
    assert!(!message.contains(TOKEN), "the token leaked into: {message}");
    (result.error_kind.expect("an error kind"), message)
}

fn iid(n: u64) -> Value {
    json!({"project": PROJECT, "iid": n})
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

#[tokio::test(flavor = "multi_thread")]
async fn list_issues_is_compact_paginated_and_addresses_nested_projects_by_encoded_path() {
    let server = MockServer::start().await;
    let link = format!(
        "<{0}{API}/issues?labels=bug%2Cauth&page=2&per_page=3&state=opened>; rel=\"next\", \
         <{0}{API}/issues?labels=bug%2Cauth&page=1&per_page=3&state=opened>; rel=\"first\", \
         <{0}{API}/issues?labels=bug%2Cauth&page=4&per_page=3&state=opened>; rel=\"last\"",
        server.uri()
    );
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues")))
        .and(query_param("state", "opened"))
        .and(query_param("labels", "bug,auth"))
        .and(query_param("per_page", "3"))
        .and(query_param("page", "1"))
        .and(header("private-token", TOKEN))
        .respond_with(
            ok("issues_list.json")
                .insert_header("link", link.as_str())
                .insert_header("x-next-page", "2")
                .insert_header("x-page", "1")
                .insert_header("x-per-page", "3")
                .insert_header("x-prev-page", "")
                .insert_header("x-total", "11")
                .insert_header("x-total-pages", "4"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let result = ok_call(
        &gitlab,
        "list_issues",
        json!({"project": PROJECT, "state": "opened", "labels": ["bug", "auth"], "per_page": 3}),
    )
    .await;

    assert_eq!(result["project"], PROJECT);
    assert_eq!(result["next_page"], 2);
    assert_eq!(result["total"], 11);
    let issues = result["issues"].as_array().unwrap();
    assert_eq!(issues.iter().map(|i| i["iid"].as_u64().unwrap()).collect::<Vec<_>>(), [47, 45, 41]);
    let first = &issues[0];
    assert_eq!(first["title"], "Login returns 500 when the session cookie is stale");
    assert_eq!(first["author"], "alice");
    assert_eq!(first["assignees"], json!(["bob"]));
    assert_eq!(first["labels"], json!(["bug", "auth"]));
    assert_eq!(first["milestone"], "v2.1");
    assert_eq!(first["notes"], 4);
    assert_eq!(first["web_url"], "https://gitlab.example.com/acme/backend/api/-/issues/47");
    assert!(first.get("project").is_none(), "the listing names the project once");
    assert!(issues[1].get("assignees").is_none(), "empty lists are left out");
    let text = result.to_string();
    for noise in ["avatar_url", "_links", "time_stats", "upvotes", "/api/v4", "\"description\""] {
        assert!(!text.contains(noise), "`{noise}` survived in {text}");
    }
    assert!(text.len() * 4 < fixture("issues_list.json").len(), "the result is not compact");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_last_page_has_no_next_page_and_projects_are_listed_by_membership() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/v4/projects"))
        .and(query_param("membership", "true"))
        .and(query_param("search", "api"))
        .and(query_param("page", "2"))
        .respond_with(
            ok("projects_list.json")
                .insert_header("x-next-page", "")
                .insert_header("x-page", "2")
                .insert_header("x-prev-page", "1"),
        )
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let result = ok_call(&gitlab, "list_projects", json!({"search": "api", "page": 2})).await;
    assert_eq!(result["next_page"], Value::Null);
    assert!(result.get("total").is_none(), "GitLab sent no X-Total");
    assert_eq!(
        result["projects"][0],
        json!({
            "project": PROJECT, "id": 42, "description": "The public API of the Acme backend.",
            "default_branch": "main", "visibility": "private",
            "last_activity_at": "2024-05-06T09:41:02.100Z",
            "web_url": "https://gitlab.example.com/acme/backend/api",
        })
    );
    assert_eq!(result["projects"][1]["archived"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_by_numeric_id_with_its_merge_rules_and_access() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/v4/projects/42"))
        .respond_with(ok("project.json"))
        .expect(1)
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let project = ok_call(&gitlab, "get_project", json!({"project": 42})).await;
    assert_eq!(project["project"], PROJECT);
    assert_eq!(project["default_branch"], "main");
    assert_eq!(project["merge_method"], "ff");
    assert_eq!(project["only_allow_merge_if_pipeline_succeeds"], true);
    assert_eq!(project["access"], "maintainer", "the higher of project and group access");
    assert_eq!(project["http_url_to_repo"], "https://gitlab.example.com/acme/backend/api.git");
    assert!(project.get("permissions").is_none() && project.get("_links").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn get_issue_and_its_notes_without_system_notes() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/47")))
        .respond_with(ok("issue.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/47/notes")))
        .and(query_param("sort", "asc"))
        .and(query_param("order_by", "created_at"))
        .respond_with(ok("issue_notes.json").insert_header("x-total", "5"))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();

    let issue = ok_call(&gitlab, "get_issue", iid(47)).await;
    assert_eq!(issue["project"], PROJECT);
    assert_eq!(issue["iid"], 47);
    assert!(issue["description"].as_str().unwrap().starts_with("Steps to reproduce"));
    assert_eq!(issue["merge_requests_count"], 1);
    assert!(issue.get("issue_type").is_none(), "a plain issue says nothing");

    // GitLab's own argument names work too, and a project's web URL is a project.
    let notes = ok_call(
        &gitlab,
        "list_issue_notes",
        json!({"project_id": "https://gitlab.example.com/acme/backend/api/-/issues/47",
               "issue_iid": 47}),
    )
    .await;
    assert_eq!(notes["system_notes_skipped"], 2);
    assert_eq!(notes["total"], 5);
    let notes = notes["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 3);
    assert_eq!(notes[0]["author"], "carol");
    assert_eq!(notes[2]["body"], "Fix is in !19, please verify.");
    assert!(notes[0].get("system").is_none() && notes[0].get("edited_at").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn merge_requests_on_a_self_managed_instance_with_an_oauth_token() {
    let server = MockServer::start().await;
    for (route, file) in [
        ("/merge_requests", "merge_requests_list.json"),
        ("/merge_requests/19", "merge_request.json"),
        ("/merge_requests/19/discussions", "merge_request_discussions.json"),
        ("/merge_requests/19/approvals", "merge_request_approvals.json"),
    ] {
        Mock::given(method("GET"))
            .and(path(format!("{API}{route}")))
            .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
            .respond_with(ok(file))
            .mount(&server)
            .await;
    }
    // The base URL given with `/api/v4` already: the API root is not doubled.
    let gitlab = GitLab::new(GitLabConfig {
        base_url: Some(format!("{}/api/v4/", server.uri())),
        auth: Some(AuthScheme::Oauth),
        ..config(&server)
    })
    .unwrap();

    let list = ok_call(&gitlab, "list_merge_requests", json!({"project": PROJECT})).await;
    let mrs = list["merge_requests"].as_array().unwrap();
    assert_eq!(mrs.len(), 3);
    assert_eq!(mrs[0]["source_branch"], "fix/stale-session");
    assert_eq!(mrs[0]["detailed_merge_status"], "not_approved");
    assert_eq!(mrs[0]["reviewers"], json!(["alice"]));
    assert_eq!(mrs[1]["draft"], true);
    assert_eq!(mrs[1]["from_fork"], true, "source and target projects differ");
    assert_eq!(mrs[2]["state"], "merged");
    assert!(mrs[2].get("detailed_merge_status").is_none(), "no merge status once merged");

    let mr = ok_call(&gitlab, "get_merge_request", iid(19)).await;
    assert_eq!(mr["project"], PROJECT);
    assert_eq!(mr["head_pipeline"], json!({"id": 9001, "status": "failed"}));
    assert_eq!(mr["changes_count"], "3");
    assert_eq!(mr["can_merge"], true);
    assert_eq!(mr["blocking_discussions_resolved"], false);
    assert_eq!(mr["diff_refs"]["base_sha"], "c380d3acebd181f13629a25d2e2acca46ffe1e00");
    assert!(mr["description"].as_str().unwrap().starts_with("Closes #47"));
    assert!(mr.get("merged_by").is_none());

    let read = call(&gitlab, "list_merge_request_discussions", iid(19)).await;
    // Every note is labelled with its author, by its place in the threads kept.
    let labels = read.author_labels();
    let threads = read.structured.clone().expect("a structured result");
    assert_eq!(labels.len(), 4, "{labels:?}");
    for label in &labels {
        let note = threads.pointer(label.pointer.trim_end_matches("/body")).unwrap();
        assert_eq!(note["author"], label.author.as_str(), "{}", label.pointer);
        assert_eq!(label.can_write, None, "looked up only under lockdown");
    }
    assert_eq!(threads["unresolved"], 1);
    assert_eq!(threads["skipped"], 1, "the system note thread is left out");
    let threads = threads["discussions"].as_array().unwrap();
    assert_eq!(threads.len(), 3);
    assert_eq!(threads[0]["path"], "src/session.rs");
    assert_eq!(threads[0]["line"], 88);
    assert_eq!(threads[0]["resolved"], false);
    assert_eq!(threads[0]["notes"].as_array().unwrap().len(), 2);
    assert!(threads[1].get("resolved").is_none(), "a plain comment cannot be resolved");
    assert_eq!(
        (threads[2]["resolved"].as_bool(), threads[2]["resolved_by"].as_str()),
        (Some(true), Some("carol"))
    );

    let approvals = ok_call(&gitlab, "get_merge_request_approvals", iid(19)).await;
    assert_eq!(approvals["approved"], false);
    assert_eq!(approvals["approvals_left"], 1);
    assert_eq!(
        approvals["approved_by"],
        json!([{"username": "alice", "approved_at": "2024-05-05T14:00:00.000Z"}])
    );
    assert_eq!(approvals["suggested_approvers"], json!(["carol"]));

    let requests = server.received_requests().await.unwrap();
    assert!(requests.iter().all(|r| !r.headers.contains_key("private-token")));
}

#[tokio::test(flavor = "multi_thread")]
async fn changes_cut_each_diff_and_fall_back_to_the_older_endpoint() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/merge_requests/19/diffs")))
        .and(query_param("per_page", "20"))
        .respond_with(
            ok("merge_request_diffs.json")
                .insert_header("x-total", "3")
                .insert_header("x-next-page", ""),
        )
        .mount(&server)
        .await;
    // An instance older than GitLab 15.7 has no `/diffs`.
    Mock::given(method("GET"))
        .and(path(format!("{API}/merge_requests/7/diffs")))
        .respond_with(gitlab_error(404, "404 Not Found"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/merge_requests/7/changes")))
        .respond_with(ok("merge_request_changes.json"))
        .expect(1)
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();

    let changes = ok_call(&gitlab, "get_merge_request_changes", iid(19)).await;
    assert_eq!(changes["total"], 3);
    let files = changes["files"].as_array().unwrap();
    assert_eq!(files[0]["path"], "src/session.rs");
    assert_eq!(files[0]["status"], "modified");
    assert_eq!(
        (files[0]["additions"].as_u64(), files[0]["deletions"].as_u64()),
        (Some(4), Some(1))
    );
    let long = files[1]["diff"].as_str().unwrap();
    assert!(long.len() < 4200 && long.contains("…[cut"), "the long diff is cut, saying so");
    assert_eq!(files[1]["additions"], 400, "counted on the whole diff");
    assert_eq!(files[2]["status"], "renamed");
    assert_eq!(files[2]["old_path"], "docs/old-session.png");
    assert!(files[2].get("diff").is_none(), "a binary rename has no diff");

    let old = ok_call(&gitlab, "get_merge_request_changes", iid(7)).await;
    assert_eq!(old["files"].as_array().unwrap().len(), 1);
    assert_eq!(old["next_page"], Value::Null);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_pipeline_leads_to_its_failed_job_and_the_end_of_its_log() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/pipelines")))
        .and(query_param("ref", "main"))
        .and(query_param("status", "failed"))
        .respond_with(ok("pipelines_list.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/pipelines/9001/jobs")))
        .and(query_param("scope[]", "failed"))
        .respond_with(ok("pipeline_jobs.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/jobs/77118/trace")))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(fixture("job_trace.txt"), "text/plain"),
        )
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();

    let pipelines = ok_call(
        &gitlab,
        "list_pipelines",
        json!({"project": PROJECT, "ref": "main", "status": "failed"}),
    )
    .await;
    let failed = &pipelines["pipelines"][2];
    assert_eq!((failed["id"].as_u64(), failed["status"].as_str()), (Some(9001), Some("failed")));
    assert_eq!(failed["source"], "merge_request_event");

    let jobs = ok_call(
        &gitlab,
        "list_pipeline_jobs",
        json!({"project": PROJECT, "pipeline_id": 9001, "scope": ["failed"]}),
    )
    .await;
    assert_eq!(jobs["failed"], 1);
    let job = &jobs["jobs"][2];
    assert_eq!(job["name"], "test:unit");
    assert_eq!(job["failure_reason"], "script_failure");
    assert_eq!(job["duration_s"], 280);
    assert_eq!(job["runner"], "shared-runner-3");
    assert_eq!(jobs["jobs"][1]["allow_failure"], true);
    assert!(jobs["jobs"][0].get("started_at").is_none(), "a skipped job never started");

    let log = ok_call(&gitlab, "get_job_log", json!({"project": PROJECT, "job_id": 77118})).await;
    assert_eq!(log["lines_total"], 280, "four lines held only section markers");
    assert_eq!(log["lines_returned"], 200);
    assert!(log["note"].as_str().unwrap().contains("80 earlier lines cut"), "{}", log["note"]);
    let text = log["log"].as_str().unwrap();
    assert!(text.ends_with("ERROR: Job failed: exit code 101\n"), "{text}");
    assert!(text.contains("panicked at src/session.rs:131:9"));
    assert!(!text.contains("section_") && !text.contains('\u{1b}') && !text.contains('\r'));
    assert_eq!(
        log["error_lines"],
        json!([
            "thread 'session::tests::stale_cookie_logs_out' panicked at src/session.rs:131:9:",
            "test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; \
             finished in 0.02s",
            "error: test failed, to rerun pass `--lib`",
            "ERROR: Job failed: exit code 101",
        ])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_behind_a_redirect_to_object_storage_does_not_get_the_token() {
    let server = MockServer::start().await;
    let storage = MockServer::start().await;
    let location = format!("{}/traces/77118.log?X-Amz-Signature=abc", storage.uri());
    Mock::given(method("GET"))
        .and(path(format!("{API}/jobs/77118/trace")))
        .respond_with(ResponseTemplate::new(302).insert_header("location", location.as_str()))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/traces/77118.log"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw("all good\nERROR: nope\n", "text/plain"),
        )
        .expect(1)
        .mount(&storage)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let log = ok_call(&gitlab, "get_job_log", json!({"project": PROJECT, "job_id": 77118})).await;
    assert_eq!(log["error_lines"], json!(["ERROR: nope"]));
    let requests = storage.received_requests().await.unwrap();
    assert!(
        requests.iter().all(|r| !r.headers.contains_key("private-token")),
        "the token must not follow the redirect to another origin"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn search_hits_name_their_project_and_code_hits_their_lines() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/v4/search"))
        .and(query_param("scope", "issues"))
        .and(query_param("search", "stale session"))
        .and(query_param("state", "opened"))
        .respond_with(ok("search_issues.json").insert_header("x-next-page", ""))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/search")))
        .and(query_param("scope", "blobs"))
        .and(query_param("search", "SessionStore filename:*.rs"))
        .and(query_param("ref", "main"))
        .respond_with(ok("search_blobs.json"))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();

    let found = ok_call(
        &gitlab,
        "search",
        json!({"scope": "issues", "query": "stale session", "state": "opened"}),
    )
    .await;
    assert_eq!(found["count"], 2);
    assert_eq!(
        (found["issues"][0]["project"].as_str(), found["issues"][0]["iid"].as_u64()),
        (Some(PROJECT), Some(47))
    );
    assert_eq!(
        (found["issues"][1]["project"].as_str(), found["issues"][1]["iid"].as_u64()),
        (Some("acme/web"), Some(3))
    );

    let code = ok_call(
        &gitlab,
        "search",
        json!({"scope": "blobs", "search": "SessionStore filename:*.rs", "project": PROJECT,
               "ref": "main"}),
    )
    .await;
    assert_eq!(code["project"], PROJECT);
    let hit = &code["blobs"][0];
    assert_eq!(hit["path"], "src/session.rs");
    assert_eq!(hit["startline"], 85);
    assert!(hit["data"].as_str().unwrap().contains("pub fn load"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_issue_and_a_missing_log_are_named() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/9")))
        .respond_with(gitlab_error(404, "404 Not found"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/jobs/5/trace")))
        .respond_with(gitlab_error(404, "404 Not found"))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let (kind, message) = failing_call(&gitlab, "get_issue", iid(9)).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert_eq!(message, "no issue #9 in acme/backend/api (or the token cannot see the project)");

    let (kind, message) =
        failing_call(&gitlab, "get_job_log", json!({"project": PROJECT, "job_id": 5})).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no log of job 5 in acme/backend/api"), "{message}");
    assert!(message.contains("erased or expired"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_token_names_the_variable_and_the_auth_scheme_and_never_the_token() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/1")))
        // GitLab does not echo tokens, but a proxy might: the message must still hide it.
        .respond_with(gitlab_error(401, &format!("401 Unauthorized: token {TOKEN} is revoked")))
        .mount(&server)
        .await;
    let gitlab =
        GitLab::new(GitLabConfig { token_env: Some("WORK_GL_TOKEN".into()), ..config(&server) })
            .unwrap();
    let (kind, message) = failing_call(&gitlab, "get_issue", iid(1)).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.starts_with("gitlab rejected the token (401 Unauthorized"), "{message}");
    assert!(message.contains("token *** is revoked"), "{message}");
    assert!(
        message.contains("set WORK_GL_TOKEN (the variable named by [providers.gitlab] token_env)"),
        "{message}"
    );
    assert!(message.contains("auth = \"oauth\""), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_token_the_message_says_which_variable_to_set() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/merge_requests/19")))
        .respond_with(gitlab_error(401, "401 Unauthorized"))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(GitLabConfig { token: None, ..config(&server) }).unwrap();
    let (kind, message) = failing_call(&gitlab, "get_merge_request", iid(19)).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.contains("none is configured"), "{message}");
    assert!(message.contains("set GITLAB_TOKEN"), "{message}");
    let requests = server.received_requests().await.unwrap();
    assert!(
        !requests[0].headers.contains_key("private-token")
            && !requests[0].headers.contains_key("authorization"),
        "no token, no header"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_without_the_api_scope_is_told_so() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/issues")))
        .respond_with(ResponseTemplate::new(403).set_body_json(json!({
            "error": "insufficient_scope",
            "error_description": "The request requires higher privileges than provided by the access token.",
            "scope": "api",
        })))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let (kind, message) =
        failing_call(&gitlab, "create_issue", json!({"project": PROJECT, "title": "x"})).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.contains("higher privileges"), "{message}");
    assert!(message.contains("the token needs the scope `api`"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_short_rate_limit_is_waited_out() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/47")))
        .respond_with(
            ResponseTemplate::new(429)
                .set_body_raw("Retry later\n", "text/plain")
                .insert_header("retry-after", "1")
                .insert_header("ratelimit-limit", "2000")
                .insert_header("ratelimit-remaining", "0")
                .insert_header("ratelimit-reset", (now() + 1).to_string().as_str()),
        )
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/47")))
        .respond_with(ok("issue.json"))
        .expect(1)
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let started = Instant::now();
    let issue = ok_call(&gitlab, "get_issue", iid(47)).await;
    assert_eq!(issue["iid"], 47);
    assert!(started.elapsed() >= Duration::from_secs(1), "retried before Retry-After");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_that_persists_is_retried_twice_then_reported() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/47")))
        .respond_with(
            ResponseTemplate::new(429)
                .set_body_raw("Retry later\n", "text/plain")
                .insert_header("retry-after", "1"),
        )
        .expect(3)
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let (kind, message) = failing_call(&gitlab, "get_issue", iid(47)).await;
    assert_eq!(kind, ToolErrorKind::RateLimited);
    assert!(message.contains("even after waiting 2 s"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_rate_limit_fails_fast_saying_when_it_resets() {
    let server = MockServer::start().await;
    let reset = now() + 3600;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues")))
        .respond_with(
            ResponseTemplate::new(429)
                .set_body_raw("Retry later\n", "text/plain")
                .insert_header("ratelimit-limit", "600")
                .insert_header("ratelimit-observed", "601")
                .insert_header("ratelimit-remaining", "0")
                .insert_header("ratelimit-reset", reset.to_string().as_str()),
        )
        .expect(1)
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let started = Instant::now();
    let (kind, message) = failing_call(&gitlab, "list_issues", json!({"project": PROJECT})).await;
    assert!(started.elapsed() < Duration::from_secs(3), "waited {:?}", started.elapsed());
    assert_eq!(kind, ToolErrorKind::RateLimited);
    assert!(message.contains("0 of 600 requests left"), "{message}");
    assert!(message.contains("it resets at 20"), "{message}");
    assert!(message.contains("max_retry_wait_s = 10 s"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_past_the_calls_deadline_is_not_waited_for() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/47")))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "5"))
        .expect(1)
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let ctx = ToolContext { timeout_ms: Some(2000), ..Default::default() };
    let started = Instant::now();
    let result = gitlab.call("get_issue", iid(47), ctx).await;
    assert!(started.elapsed() < Duration::from_secs(2), "waited {:?}", started.elapsed());
    assert_eq!(result.error_kind, Some(ToolErrorKind::RateLimited));
    assert!(result.text_content().contains("retry in 5 s, past this call's deadline"));
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_and_failed_answers_are_upstream_errors() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/merge_requests/5")))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw("{\"iid\": 5, \"title\": ", "application/json"),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/merge_requests/6")))
        .respond_with(
            ResponseTemplate::new(502).set_body_raw("<html>502 Bad Gateway</html>", "text/html"),
        )
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let (kind, message) = failing_call(&gitlab, "get_merge_request", iid(5)).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(
        message.starts_with(
            "gitlab returned an unreadable body for merge request !5 in acme/backend/api"
        ),
        "{message}"
    );
    let (kind, message) = failing_call(&gitlab, "get_merge_request", iid(6)).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("gitlab failed with 502 Bad Gateway"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_gitlab_times_out_after_timeout_s() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/47")))
        .respond_with(ok("issue.json").set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(GitLabConfig { timeout_s: Some(1), ..config(&server) }).unwrap();
    let started = Instant::now();
    let (kind, message) = failing_call(&gitlab, "get_issue", iid(47)).await;
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(kind, ToolErrorKind::Timeout);
    assert!(message.contains("within 1 s") && message.contains("timeout_s"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn create_issue_posts_what_the_agent_asked_for() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/issues")))
        .and(header("private-token", TOKEN))
        .and(header("content-type", "application/json"))
        .and(body_json(json!({
            "title": "Flaky login test in CI",
            "description": "The login test fails one run in ten.",
            "labels": "bug,ci",
            "assignee_ids": [3],
        })))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_raw(fixture("issue_created.json"), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let created = ok_call(
        &gitlab,
        "create_issue",
        json!({
            "project": PROJECT, "title": "Flaky login test in CI",
            "body": "The login test fails one run in ten.",
            "labels": ["bug", "ci"], "assignee_ids": [3],
        }),
    )
    .await;
    assert_eq!(
        created,
        json!({
            "project": PROJECT,
            "iid": 48,
            "title": "Flaky login test in CI",
            "labels": ["bug", "ci"],
            "assignees": ["alice"],
            "web_url": "https://gitlab.example.com/acme/backend/api/-/issues/48",
            "created_at": "2024-05-07T10:00:00.000Z",
        })
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_draft_merge_request_and_comments_and_a_retried_job() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/merge_requests")))
        .and(body_json(json!({
            "source_branch": "ci/retry-login",
            "target_branch": "main",
            "title": "Draft: Retry flaky login test",
            "description": "Marks the login test as retryable.",
            "remove_source_branch": true,
        })))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_raw(fixture("merge_request_created.json"), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/merge_requests/19/notes")))
        .and(body_json(json!({"body": "Looks good to me."})))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_raw(fixture("note_created.json"), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/issues/47/notes")))
        .and(body_json(json!({"body": "Fixed in !19.", "internal": true})))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_raw(fixture("note_created.json"), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/jobs/77118/retry")))
        .and(header("private-token", TOKEN))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_raw(fixture("job_retried.json"), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();

    let mr = ok_call(
        &gitlab,
        "create_merge_request",
        json!({
            "project": PROJECT, "source_branch": "ci/retry-login", "target_branch": "main",
            "title": "Retry flaky login test", "description": "Marks the login test as retryable.",
            "draft": true, "remove_source_branch": true,
        }),
    )
    .await;
    assert_eq!(mr["iid"], 20);
    assert_eq!(mr["detailed_merge_status"], "checking");
    assert_eq!(mr["web_url"], "https://gitlab.example.com/acme/backend/api/-/merge_requests/20");

    let note = ok_call(
        &gitlab,
        "create_merge_request_note",
        json!({"project": PROJECT, "iid": 19, "body": "Looks good to me."}),
    )
    .await;
    assert_eq!(
        note,
        json!({"project": PROJECT, "iid": 19, "note_id": 1620, "author": "alice",
                            "created_at": "2024-05-07T11:00:00.000Z"})
    );
    ok_call(
        &gitlab,
        "create_issue_note",
        json!({"project": PROJECT, "iid": 47, "body": "Fixed in !19.", "internal": true}),
    )
    .await;

    let retried = ok_call(&gitlab, "retry_job", json!({"project": PROJECT, "job_id": 77118})).await;
    assert_eq!(retried["retried_job_id"], 77118);
    assert_eq!(retried["job_id"], 77121);
    assert_eq!(retried["status"], "pending");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conflicting_merge_request_is_refused_with_gitlabs_reason() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/merge_requests")))
        .respond_with(ResponseTemplate::new(409).set_body_json(json!({
            "message": ["Another open merge request already exists for this source branch: !19"]
        })))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let (kind, message) = failing_call(
        &gitlab,
        "create_merge_request",
        json!({"project": PROJECT, "source_branch": "fix/stale-session",
               "target_branch": "main", "title": "Again"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("already exists for this source branch: !19"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_are_refused_before_any_request() {
    let server = MockServer::start().await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    for (tool, args, expected) in [
        ("get_issue", json!({"project": "api", "iid": 1}), "group/subgroup/project"),
        ("get_issue", json!({"project": "acme/../admin", "iid": 1}), "group/subgroup/project"),
        ("list_issues", json!({"project": PROJECT, "stat": "opened"}), "unknown field `stat`"),
        (
            "search",
            json!({"scope": "projects", "search": "x", "project": PROJECT}),
            "leave `project` out",
        ),
        ("create_issue_note", json!({"project": PROJECT, "iid": 1, "body": "  "}), "`body`"),
        ("update_issue", json!({"project": PROJECT, "iid": 1}), "nothing to update"),
        ("update_merge_request", json!({"project": PROJECT, "iid": 1}), "nothing to update"),
        ("get_file", json!({"project": PROJECT, "path": "src/../../etc"}), "`path`"),
        (
            "resolve_merge_request_discussion",
            json!({"project": PROJECT, "iid": 19, "discussion_id": "../notes"}),
            "`discussion_id`",
        ),
        ("search_users", json!({"search": " @ "}), "`search`"),
        ("create_pipeline", json!({"project": PROJECT, "ref": ""}), "`ref`"),
    ] {
        let (kind, message) = failing_call(&gitlab, tool, args).await;
        assert_eq!(kind, ToolErrorKind::InvalidArguments, "{tool}: {message}");
        assert!(message.contains(expected), "{tool}: {message}");
    }
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[test]
fn configuration_typos_are_errors_and_the_token_is_not_printed() {
    let err =
        serde_json::from_value::<GitLabConfig>(json!({"base_ur": "https://x"})).err().unwrap();
    assert!(err.to_string().contains("unknown field `base_ur`"), "{err}");
    let err = serde_json::from_value::<GitLabConfig>(json!({"auth": "basic"})).err().unwrap();
    assert!(err.to_string().contains("private_token"), "{err}");
    let config: GitLabConfig = serde_json::from_value(
        json!({"token": TOKEN, "token_env": "GL", "auth": "oauth", "max_retry_wait_s": 5}),
    )
    .unwrap();
    assert_eq!(config.auth, Some(AuthScheme::Oauth));
    assert!(!format!("{config:?}").contains(TOKEN));
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_base_urls_are_refused_at_start_and_a_missing_token_is_not() {
    let err = GitLab::new(GitLabConfig {
        base_url: Some("gitlab.example.com".into()),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(err.to_string().contains("https://gitlab.example.com"), "{err}");
    assert!(GitLab::new(GitLabConfig::default()).is_ok(), "no token is not an error");
    let tools = GitLab::tools();
    assert_eq!(tools.len(), 42);
    let mut groups: Vec<&str> = tools.iter().filter_map(|t| t.group.as_deref()).collect();
    groups.sort_unstable();
    groups.dedup();
    assert_eq!(groups, ["issues", "merge_requests", "pipelines", "projects", "repository"]);
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

/// A read that meets a passing fault is sent again and succeeds; one that keeps failing is
/// reported after two retries; a write is sent once, whatever comes back.
#[tokio::test(flavor = "multi_thread")]
async fn reads_are_retried_after_passing_5xx_and_writes_never_are() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/47")))
        .respond_with(gitlab_error(503, "503 Service Unavailable"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/47")))
        .respond_with(ok("issue.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/48")))
        .respond_with(gitlab_error(502, "502 Bad Gateway"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/issues")))
        .respond_with(gitlab_error(500, "500 Internal Server Error"))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let issue = ok_call(&gitlab, "get_issue", iid(47)).await;
    assert_eq!(issue["iid"], 47);
    assert_eq!(requests(&server, "GET", &format!("{API}/issues/47")).await, 2);
    let (kind, message) = failing_call(&gitlab, "get_issue", iid(48)).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("502"), "{message}");
    assert_eq!(requests(&server, "GET", &format!("{API}/issues/48")).await, 3);
    failing_call(&gitlab, "create_issue", json!({"project": PROJECT, "title": "x"})).await;
    assert_eq!(requests(&server, "POST", &format!("{API}/issues")).await, 1);
}

/// A body past `max_response_mb` is refused with the setting named.
#[tokio::test(flavor = "multi_thread")]
async fn a_body_past_max_response_mb_is_refused() {
    let server = MockServer::start().await;
    let huge = format!("{{\"iid\": 47, \"description\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/47")))
        .respond_with(ResponseTemplate::new(200).set_body_raw(huge, "application/json"))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(GitLabConfig { max_response_mb: Some(1), ..config(&server) }).unwrap();
    let (kind, message) = failing_call(&gitlab, "get_issue", iid(47)).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("max_response_mb = 1 MB"), "{message}");
}

async fn requests(server: &MockServer, verb: &str, to: &str) -> usize {
    let received = server.received_requests().await.unwrap();
    received.iter().filter(|r| r.method.as_str() == verb && r.url.path() == to).count()
}

/// A recorded JSON body with the given status (201 for most creations).
fn answer(status: u16, name: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(fixture(name), "application/json")
}

const HEAD_SHA: &str = "b83d6e391c22777fca1ed3012fce84f633d7fed0";

#[tokio::test(flavor = "multi_thread")]
async fn the_repository_tree_pages_and_files_come_back_as_text() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/repository/tree")))
        .and(query_param("path", "src"))
        .and(query_param("ref", "fix/stale-session"))
        .and(query_param("per_page", "5"))
        .and(query_param("page", "1"))
        .respond_with(
            ok("repository_tree.json")
                .insert_header("x-next-page", "2")
                .insert_header("x-page", "1")
                .insert_header("x-total", "7"),
        )
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/repository/files/src%2Fsession.rs")))
        .and(query_param("ref", "fix/stale-session"))
        .respond_with(ok("file.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/repository/files/docs%2Flogo.png")))
        .and(query_param("ref", "HEAD"))
        .respond_with(ok("file_binary.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/repository/files/src%2Fmissing.rs")))
        .respond_with(gitlab_error(404, "404 File Not Found"))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();

    let tree = ok_call(
        &gitlab,
        "list_repository_tree",
        json!({"project": PROJECT, "path": "/src/", "ref": "fix/stale-session", "per_page": 5}),
    )
    .await;
    assert_eq!((tree["next_page"].as_u64(), tree["total"].as_u64()), (Some(2), Some(7)));
    assert_eq!(tree["path"], "src");
    assert_eq!(
        tree["entries"],
        json!([
            {"path": "src/handlers", "type": "dir"},
            {"path": "src/vendor-sdk", "type": "submodule"},
            {"path": "src/lib.rs", "type": "file"},
            {"path": "src/session.rs", "type": "file"},
            {"path": "src/release.sh", "type": "file", "executable": true},
        ])
    );

    let file = ok_call(
        &gitlab,
        "get_file",
        json!({"project": PROJECT, "file_path": "src/session.rs", "ref": "fix/stale-session"}),
    )
    .await;
    let content = file["content"].as_str().unwrap();
    assert!(content.starts_with("//! Sessions: loading"), "{content}");
    assert!(content.contains("Err(SessionError::LoggedOut)"));
    assert_eq!(file["size"].as_u64(), Some(content.len() as u64));
    assert_eq!(file["last_commit_id"], "570e7b2abdd848b95f2f578043fc23bd6f6fd24d");
    assert!(file.get("binary").is_none() && file.get("truncated").is_none());

    let cut = ok_call(
        &gitlab,
        "get_file",
        json!({"project": PROJECT, "path": "src/session.rs", "ref": "fix/stale-session",
               "max_bytes": 40}),
    )
    .await;
    assert_eq!(cut["truncated"], true);
    assert!(cut["content"].as_str().unwrap().contains("…[cut"), "{}", cut["content"]);

    let image =
        ok_call(&gitlab, "get_file", json!({"project": PROJECT, "path": "docs/logo.png"})).await;
    assert_eq!(image["binary"], true);
    assert!(image.get("content").is_none(), "binary content is left out");

    let (kind, message) =
        failing_call(&gitlab, "get_file", json!({"project": PROJECT, "path": "src/missing.rs"}))
            .await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no file src/missing.rs at HEAD in acme/backend/api"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn branches_and_commits_are_listed_and_one_commit_comes_with_its_diff() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/repository/branches")))
        .and(query_param("search", "^fix"))
        .respond_with(ok("branches_list.json").insert_header("x-total", "3"))
        .mount(&server)
        .await;
    // GitLab does not count commits: only the next page is known.
    Mock::given(method("GET"))
        .and(path(format!("{API}/repository/commits")))
        .and(query_param("ref_name", "main"))
        .and(query_param("path", "src/session.rs"))
        .and(query_param("per_page", "3"))
        .respond_with(ok("commits_list.json").insert_header("x-next-page", "2"))
        .mount(&server)
        .await;
    let sha = "ed899a2f4b50b4370feeea94676502b42383c746";
    Mock::given(method("GET"))
        .and(path(format!("{API}/repository/commits/{sha}")))
        .respond_with(ok("commit.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/repository/commits/{sha}/diff")))
        .respond_with(ok("commit_diff.json").insert_header("x-total", "2"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/repository/commits/deadbeef")))
        .respond_with(gitlab_error(404, "404 Commit Not Found"))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();

    let branches =
        ok_call(&gitlab, "list_branches", json!({"project": PROJECT, "search": "^fix"})).await;
    assert_eq!(branches["total"], 3);
    assert_eq!(
        branches["branches"][0],
        json!({"name": "fix/stale-session", "sha": HEAD_SHA,
               "title": "Return an error when the session store is unreachable",
               "committed_at": "2024-05-06T09:30:00.000+00:00"})
    );
    assert_eq!(
        (
            branches["branches"][1]["default"].as_bool(),
            branches["branches"][1]["protected"].as_bool()
        ),
        (Some(true), Some(true))
    );
    assert_eq!(branches["branches"][2]["merged"], true);

    let commits = ok_call(
        &gitlab,
        "list_commits",
        json!({"project": PROJECT, "ref": "main", "path": "src/session.rs", "per_page": 3}),
    )
    .await;
    assert_eq!(commits["next_page"], 2);
    assert!(commits.get("total").is_none());
    assert_eq!(commits["ref"], "main");
    let first = &commits["commits"][0];
    assert_eq!(first["sha"], HEAD_SHA);
    assert_eq!(first["author"], "Alice Moreau");
    assert!(!commits.to_string().contains("author_email"), "emails are left out");

    let commit = ok_call(&gitlab, "get_commit", json!({"project": PROJECT, "sha": sha})).await;
    assert_eq!(commit["title"], "Log out on a stale session cookie");
    assert!(commit["message"].as_str().unwrap().ends_with("Closes #47"));
    assert_eq!(commit["stats"], json!({"additions": 5, "deletions": 1}));
    assert_eq!(commit["pipeline"], json!({"id": 9003, "status": "success"}));
    assert_eq!(commit["parent_ids"], json!(["6104942438c14ec7bd21c6cd5bd995272b3faff6"]));
    assert!(commit.get("committer").is_none(), "the author committed it");
    assert_eq!(commit["total_files"], 2);
    let files = commit["files"].as_array().unwrap();
    assert_eq!(
        (files[0]["additions"].as_u64(), files[0]["deletions"].as_u64()),
        (Some(4), Some(1))
    );
    assert_eq!(files[1]["status"], "added");

    let (kind, message) =
        failing_call(&gitlab, "get_commit", json!({"project": PROJECT, "sha": "deadbeef"})).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no commit deadbeef in acme/backend/api"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_refs_compare_and_tags_and_releases_are_listed() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/repository/compare")))
        .and(query_param("from", "main"))
        .and(query_param("to", "fix/stale-session"))
        .respond_with(ok("compare.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/repository/compare")))
        .and(query_param("from", "nope"))
        .respond_with(gitlab_error(404, "404 Ref Not Found"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/repository/tags")))
        .and(query_param("order_by", "updated"))
        .respond_with(ok("tags_list.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/releases")))
        .and(query_param("per_page", "2"))
        .respond_with(
            ok("releases_list.json")
                .insert_header("x-next-page", "2")
                .insert_header("x-total", "5"),
        )
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();

    let diff = ok_call(
        &gitlab,
        "compare_refs",
        json!({"project": PROJECT, "from": "main", "to": "fix/stale-session"}),
    )
    .await;
    assert_eq!((diff["commits_total"].as_u64(), diff["files_total"].as_u64()), (Some(2), Some(3)));
    assert_eq!(diff["commits"][1]["sha"], HEAD_SHA);
    let files = diff["files"].as_array().unwrap();
    assert_eq!(files[0]["path"], "src/session.rs");
    let long = files[1]["diff"].as_str().unwrap();
    assert!(long.len() < 4200 && long.contains("…[cut"), "the long diff is cut, saying so");
    assert_eq!(files[1]["additions"], 400);
    assert_eq!(files[2]["status"], "deleted");
    assert!(diff.get("same_ref").is_none() && diff.get("timed_out").is_none());

    let (kind, message) = failing_call(
        &gitlab,
        "compare_refs",
        json!({"project": PROJECT, "from": "nope", "to": "main"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no ref nope or main in acme/backend/api"), "{message}");

    let tags = ok_call(&gitlab, "list_tags", json!({"project": PROJECT})).await;
    assert_eq!(
        tags["tags"][0],
        json!({"name": "v2.1.0", "sha": "7b5c3cc8be40ee161ae89a06bba6229da1032a0c",
               "message": "Release 2.1.0", "committed_at": "2024-05-05T17:00:00.000+00:00",
               "protected": true, "has_release": true})
    );
    assert!(
        tags["tags"][1].get("has_release").is_none() && tags["tags"][1].get("message").is_none()
    );

    let releases =
        ok_call(&gitlab, "list_releases", json!({"project": PROJECT, "per_page": 2})).await;
    assert_eq!((releases["next_page"].as_u64(), releases["total"].as_u64()), (Some(2), Some(5)));
    let latest = &releases["releases"][0];
    assert_eq!(latest["tag_name"], "v2.1.0");
    assert_eq!(latest["author"], "bob");
    assert_eq!(latest["milestones"], json!(["v2.1"]));
    assert_eq!(latest["assets"][0]["name"], "api-linux-amd64");
    assert_eq!(latest["web_url"], "https://gitlab.example.com/acme/backend/api/-/releases/v2.1.0");
    assert!(latest["description"].as_str().unwrap().contains("…[cut"), "long notes are cut");
    let text = releases.to_string();
    for noise in ["evidences", "_links", "tar.bz2", "avatar_url"] {
        assert!(!text.contains(noise), "`{noise}` survived in {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn branches_and_files_are_committed_as_asked_and_refusals_say_why() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/repository/branches")))
        .and(body_json(json!({"branch": "docs/sessions", "ref": "main"})))
        .respond_with(answer(201, "branch_created.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/repository/branches")))
        .and(body_json(json!({"branch": "main", "ref": "main"})))
        .respond_with(gitlab_error(400, "Branch already exists"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/repository/files/docs%2Fsessions.md")))
        .and(header("private-token", TOKEN))
        .and(body_json(json!({
            "branch": "docs/sessions", "content": "# Sessions\n",
            "commit_message": "Document sessions",
        })))
        .respond_with(answer(201, "file_created.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{API}/repository/files/src%2Fsession.rs")))
        .and(body_json(json!({
            "branch": "fix/stale-session", "content": "pub fn load() {}\n",
            "commit_message": "Simplify load",
            "last_commit_id": "570e7b2abdd848b95f2f578043fc23bd6f6fd24d",
        })))
        .respond_with(answer(200, "file_updated.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{API}/repository/files/src%2Flib.rs")))
        .respond_with(gitlab_error(
            400,
            "You are attempting to update a file that has changed since you started editing it.",
        ))
        .expect(1)
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();

    let branch = ok_call(
        &gitlab,
        "create_branch",
        json!({"project": PROJECT, "branch": "docs/sessions", "ref": "main"}),
    )
    .await;
    assert_eq!(
        branch,
        json!({"project": PROJECT, "branch": "docs/sessions",
               "sha": "7b5c3cc8be40ee161ae89a06bba6229da1032a0c",
               "web_url": "https://gitlab.example.com/acme/backend/api/-/tree/docs/sessions"})
    );
    let (kind, message) = failing_call(
        &gitlab,
        "create_branch",
        json!({"project": PROJECT, "branch": "main", "ref": "main"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("400 Bad Request: Branch already exists"), "{message}");

    let created = ok_call(
        &gitlab,
        "create_file",
        json!({"project": PROJECT, "path": "docs/sessions.md", "branch": "docs/sessions",
               "content": "# Sessions\n", "commit_message": "Document sessions"}),
    )
    .await;
    assert_eq!(
        created,
        json!({"project": PROJECT, "path": "docs/sessions.md", "branch": "docs/sessions"})
    );
    let updated = ok_call(
        &gitlab,
        "update_file",
        json!({"project": PROJECT, "path": "src/session.rs", "branch": "fix/stale-session",
               "content": "pub fn load() {}\n", "commit_message": "Simplify load",
               "last_commit_id": "570e7b2abdd848b95f2f578043fc23bd6f6fd24d"}),
    )
    .await;
    assert_eq!(updated["branch"], "fix/stale-session");

    let (kind, message) = failing_call(
        &gitlab,
        "update_file",
        json!({"project": PROJECT, "path": "src/lib.rs", "branch": "main", "content": "x",
               "commit_message": "x", "last_commit_id": "0000000"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("updating file src/lib.rs in acme/backend/api"), "{message}");
    assert!(message.contains("has changed since you started editing it"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_merge_request_is_updated_approved_its_thread_resolved_and_merged() {
    let server = MockServer::start().await;
    let mr = format!("{API}/merge_requests/19");
    Mock::given(method("PUT"))
        .and(path(mr.as_str()))
        .and(body_json(json!({
            "title": "Fix 500 on stale session cookie (and log out)",
            "add_labels": "backend", "reviewer_ids": [3, 8],
        })))
        .respond_with(answer(200, "merge_request_updated.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{mr}/approve")))
        .and(body_json(json!({"sha": HEAD_SHA})))
        .respond_with(answer(201, "merge_request_approved.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{mr}/unapprove")))
        .respond_with(answer(201, "merge_request_unapproved.json"))
        .expect(1)
        .mount(&server)
        .await;
    let thread = "6a9c1750b37d513a43987b574953fceb50b03ce7";
    Mock::given(method("PUT"))
        .and(path(format!("{mr}/discussions/{thread}")))
        .and(body_json(json!({"resolved": true})))
        .respond_with(answer(200, "discussion_resolved.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{mr}/merge")))
        .and(body_json(
            json!({"sha": HEAD_SHA, "squash": false, "should_remove_source_branch": true}),
        ))
        .respond_with(answer(200, "merge_request_merged.json"))
        .expect(1)
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();

    let updated = ok_call(
        &gitlab,
        "update_merge_request",
        json!({"project": PROJECT, "iid": 19,
               "title": "Fix 500 on stale session cookie (and log out)",
               "add_labels": ["backend"], "reviewer_ids": [3, 8]}),
    )
    .await;
    assert_eq!(updated["title"], "Fix 500 on stale session cookie (and log out)");
    assert_eq!(updated["labels"], json!(["auth", "bug", "backend"]));
    assert_eq!(updated["reviewers"], json!(["alice", "carol"]));
    assert_eq!(updated["state"], "opened");
    assert!(updated.get("description").is_none(), "a change echoes no description");

    let approved = ok_call(
        &gitlab,
        "approve_merge_request",
        json!({"project": PROJECT, "iid": 19, "sha": HEAD_SHA}),
    )
    .await;
    assert_eq!(
        (approved["approved"].as_bool(), approved["approvals_left"].as_u64()),
        (Some(true), Some(0))
    );
    assert_eq!(approved["approved_by"][1]["username"], "carol");

    let withdrawn = ok_call(&gitlab, "unapprove_merge_request", iid(19)).await;
    assert_eq!(withdrawn["approvals_left"], 2);
    assert_eq!(withdrawn["approved_by"], json!([]));
    let unapprove = server
        .received_requests()
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.url.path().ends_with("/unapprove"))
        .unwrap();
    assert!(unapprove.body.is_empty(), "unapprove sends no body");

    let resolved = ok_call(
        &gitlab,
        "resolve_merge_request_discussion",
        json!({"project": PROJECT, "iid": 19, "discussion_id": thread}),
    )
    .await;
    assert_eq!(
        resolved,
        json!({"project": PROJECT, "iid": 19, "discussion_id": thread, "resolved": true,
               "resolved_by": "carol", "path": "src/session.rs", "line": 88, "notes": 2})
    );

    let merged = ok_call(
        &gitlab,
        "merge_merge_request",
        json!({"project": PROJECT, "iid": 19, "sha": HEAD_SHA, "squash": false,
               "remove_source_branch": true}),
    )
    .await;
    assert_eq!(merged["state"], "merged");
    assert_eq!(merged["merged_by"], "alice");
    assert_eq!(merged["merge_commit_sha"], "e2c4f2a3b9d1c0f8a7e6d5c4b3a2918f7e6d5c4b");
    assert!(merged.get("detailed_merge_status").is_none(), "no merge status once merged");
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_merges_and_approvals_pass_on_gitlabs_reason() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path(format!("{API}/merge_requests/18/merge")))
        .respond_with(gitlab_error(405, "405 Method Not Allowed"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{API}/merge_requests/19/merge")))
        .respond_with(gitlab_error(
            409,
            &format!("SHA does not match HEAD of source branch: {HEAD_SHA}"),
        ))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{API}/merge_requests/20/merge")))
        .respond_with(gitlab_error(422, "Branch cannot be merged"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/merge_requests/19/approve")))
        .respond_with(gitlab_error(401, "401 Unauthorized"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/merge_requests/19/unapprove")))
        .respond_with(gitlab_error(404, "404 Not found"))
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{API}/merge_requests/19")))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "message": {"target_branch": ["must not be the same as the source branch"]}
        })))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();

    let (kind, message) = failing_call(&gitlab, "merge_merge_request", iid(18)).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("405 Method Not Allowed"), "{message}");
    let (kind, message) = failing_call(
        &gitlab,
        "merge_merge_request",
        json!({"project": PROJECT, "iid": 19, "sha": "0123456"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("SHA does not match HEAD of source branch"), "{message}");
    let (_, message) = failing_call(&gitlab, "merge_merge_request", iid(20)).await;
    assert!(message.contains("422 Unprocessable Entity: Branch cannot be merged"), "{message}");
    // A write is sent once, whatever the answer.
    assert_eq!(requests(&server, "PUT", &format!("{API}/merge_requests/19/merge")).await, 1);

    let (kind, message) = failing_call(&gitlab, "approve_merge_request", iid(19)).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.contains("may have approved it already"), "{message}");
    let (kind, message) = failing_call(&gitlab, "unapprove_merge_request", iid(19)).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.contains("has not approved it"), "{message}");

    let (kind, message) = failing_call(
        &gitlab,
        "update_merge_request",
        json!({"project": PROJECT, "iid": 19, "target_branch": "fix/stale-session"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(
        message.contains("target_branch must not be the same as the source branch"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn pipelines_are_run_with_variables_and_cancelled() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/pipeline")))
        .and(body_json(json!({
            "ref": "main",
            "variables": [{"key": "DEPLOY_ENV", "value": "staging", "variable_type": "env_var"}],
        })))
        .respond_with(answer(201, "pipeline_created.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/pipeline")))
        .and(body_json(json!({"ref": "no-such-branch"})))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "message": {"base": ["Reference not found"]}
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/pipelines/9001/cancel")))
        .respond_with(answer(200, "pipeline_canceled.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{API}/pipelines/5/cancel")))
        .respond_with(gitlab_error(404, "404 Not found"))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();

    let run = ok_call(
        &gitlab,
        "create_pipeline",
        json!({"project": PROJECT, "ref": "main", "variables": {"DEPLOY_ENV": "staging"}}),
    )
    .await;
    assert_eq!(
        run,
        json!({"project": PROJECT, "id": 9010, "iid": 318, "status": "created", "ref": "main",
               "sha": "7b5c3cc8be40ee161ae89a06bba6229da1032a0c", "source": "api",
               "created_at": "2024-05-07T13:00:00.000Z", "updated_at": "2024-05-07T13:00:05.000Z",
               "web_url": "https://gitlab.example.com/acme/backend/api/-/pipelines/9010",
               "user": "alice"})
    );
    let (kind, message) = failing_call(
        &gitlab,
        "create_pipeline",
        json!({"project": PROJECT, "ref": "no-such-branch"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("400 Bad Request: base Reference not found"), "{message}");

    let cancelled =
        ok_call(&gitlab, "cancel_pipeline", json!({"project": PROJECT, "pipeline_id": 9001})).await;
    assert_eq!(
        (cancelled["id"].as_u64(), cancelled["status"].as_str()),
        (Some(9001), Some("canceled"))
    );
    let (kind, message) =
        failing_call(&gitlab, "cancel_pipeline", json!({"project": PROJECT, "pipeline_id": 5}))
            .await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no pipeline 5 in acme/backend/api"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn issues_are_updated_and_closed_and_labels_milestones_and_users_are_found() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path(format!("{API}/issues/47")))
        .and(body_json(json!({
            "add_labels": "needs-review", "assignee_ids": [5, 8], "milestone_id": 52,
            "due_date": "2024-05-20",
        })))
        .respond_with(answer(200, "issue_updated.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{API}/issues/47")))
        .and(body_json(json!({"state_event": "close"})))
        .respond_with(answer(200, "issue_closed.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{API}/issues/48")))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "message": {"title": ["is too long (maximum is 255 characters)"]}
        })))
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{API}/issues/9")))
        .respond_with(gitlab_error(404, "404 Issue Not Found"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/labels")))
        .and(query_param("with_counts", "true"))
        .and(query_param("page", "2"))
        .respond_with(
            ok("labels_list.json").insert_header("x-next-page", "3").insert_header("x-total", "43"),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/milestones")))
        .and(query_param("state", "active"))
        .respond_with(ok("milestones_list.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/api/v4/users"))
        .and(query_param("search", "alice"))
        .respond_with(ok("users_list.json").insert_header("x-next-page", ""))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();

    let issue = ok_call(
        &gitlab,
        "update_issue",
        json!({"project": PROJECT, "iid": 47, "add_labels": ["needs-review"],
               "assignee_ids": [5, 8], "milestone_id": 52, "due_date": "2024-05-20"}),
    )
    .await;
    assert_eq!(issue["labels"], json!(["auth", "bug", "needs-review"]));
    assert_eq!(issue["assignees"], json!(["bob", "carol"]));
    assert_eq!(issue["milestone"], "v2.2");
    assert_eq!(issue["due_date"], "2024-05-20");
    assert!(issue.get("description").is_none(), "a change echoes no description");

    let closed = ok_call(&gitlab, "close_issue", iid(47)).await;
    assert_eq!(closed["state"], "closed");
    assert_eq!(closed["closed_by"], "alice");

    let (kind, message) = failing_call(
        &gitlab,
        "update_issue",
        json!({"project": PROJECT, "iid": 48, "title": "x".repeat(300)}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("title is too long (maximum is 255 characters)"), "{message}");
    let (kind, message) = failing_call(&gitlab, "close_issue", iid(9)).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no issue #9 in acme/backend/api"), "{message}");

    let labels = ok_call(&gitlab, "list_labels", json!({"project": PROJECT, "page": 2})).await;
    assert_eq!((labels["next_page"].as_u64(), labels["total"].as_u64()), (Some(3), Some(43)));
    assert_eq!(
        labels["labels"][0],
        json!({"name": "bug", "description": "Something is broken", "open_issues": 7,
               "open_merge_requests": 2, "priority": 10})
    );
    assert_eq!(labels["labels"][2]["group_label"], true);
    assert!(!labels.to_string().contains("color"), "colours are left out");

    let milestones = ok_call(&gitlab, "list_milestones", json!({"project": PROJECT})).await;
    let first = &milestones["milestones"][0];
    assert_eq!((first["id"].as_u64(), first["title"].as_str()), (Some(52), Some("v2.2")));
    assert_eq!(first["due_date"], "2024-06-14");
    assert!(milestones["milestones"][1].get("description").is_none(), "empty text is left out");

    let users = ok_call(&gitlab, "search_users", json!({"query": "@alice"})).await;
    assert_eq!(users["next_page"], Value::Null);
    assert_eq!(
        users["users"][0],
        json!({"id": 3, "username": "alice", "name": "Alice Moreau",
               "web_url": "https://gitlab.example.com/alice"})
    );
    assert_eq!(users["users"][1]["state"], "blocked");
    assert!(!users.to_string().contains("avatar_url"));
}

#[tokio::test(flavor = "multi_thread")]
async fn listings_of_a_project_that_does_not_exist_name_it() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path_regex("^/api/v4/projects/acme%2Fnope/"))
        .respond_with(gitlab_error(404, "404 Project Not Found"))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    for tool in [
        "list_repository_tree",
        "list_branches",
        "list_commits",
        "list_tags",
        "list_releases",
        "list_labels",
        "list_milestones",
    ] {
        let (kind, message) = failing_call(&gitlab, tool, json!({"project": "acme/nope"})).await;
        assert_eq!(kind, ToolErrorKind::NotFound, "{tool}: {message}");
        assert!(message.starts_with("no "), "{tool}: {message}");
        assert!(message.contains("acme/nope"), "{tool}: {message}");
    }
    let (_, message) =
        failing_call(&gitlab, "list_branches", json!({"project": "acme/nope"})).await;
    assert_eq!(message, "no project acme/nope (or the token cannot see it)");
}

/// Under lockdown, GitLab's notes (which do not say who may write) are labelled by a lookup of
/// each author's membership — a 404 is an outsider, a Developer can write — and the project's
/// visibility; each looked up once in five minutes. Without lockdown nothing is looked up and
/// the labels say only who wrote each text.
#[tokio::test(flavor = "multi_thread")]
async fn lockdown_looks_up_who_may_write_and_whether_the_project_is_public() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/issues/47/notes")))
        .respond_with(ok("issue_notes.json"))
        .mount(&server)
        .await;
    // carol (8) is no member; bob (5) is a Developer.
    Mock::given(method("GET"))
        .and(path(format!("{API}/members/all/8")))
        .respond_with(gitlab_error(404, "404 Not found"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{API}/members/all/5")))
        .respond_with(ok("project_member.json"))
        .mount(&server)
        .await;
    let mut project: Value = serde_json::from_str(&fixture("project.json")).unwrap();
    project["visibility"] = "public".into();
    Mock::given(method("GET"))
        .and(path(API))
        .respond_with(ResponseTemplate::new(200).set_body_json(&project))
        .mount(&server)
        .await;
    let gitlab = GitLab::new(config(&server)).unwrap();
    let labels = |result: &ToolResult| -> Vec<(String, String, Option<bool>, Option<bool>)> {
        result
            .author_labels()
            .into_iter()
            .map(|l| (l.pointer, l.author, l.can_write, l.public))
            .collect()
    };
    let locked = ToolContext { lockdown: true, ..ToolContext::default() };
    for _ in 0..2 {
        let result = gitlab.call("list_issue_notes", iid(47), locked.clone()).await;
        assert!(!result.is_error, "{}", result.text_content());
        let row = |pointer: &str, who: &str, can_write| {
            (pointer.to_owned(), who.to_owned(), Some(can_write), Some(true))
        };
        assert_eq!(
            labels(&result),
            [
                row("/notes/0/body", "carol", false),
                row("/notes/1/body", "bob", true),
                row("/notes/2/body", "bob", true),
            ]
        );
    }
    let lookups = |requests: &[wiremock::Request], suffix: &str| {
        requests.iter().filter(|r| r.url.path() == format!("{API}{suffix}")).count()
    };
    let requests = server.received_requests().await.unwrap();
    assert_eq!(lookups(&requests, "/members/all/8"), 1, "looked up once");
    assert_eq!(lookups(&requests, "/members/all/5"), 1, "looked up once");
    assert_eq!(lookups(&requests, ""), 1, "the project looked up once");

    let open = call(&gitlab, "list_issue_notes", iid(47)).await;
    assert_eq!(labels(&open)[0], ("/notes/0/body".to_owned(), "carol".to_owned(), None, None));
    let after = server.received_requests().await.unwrap();
    assert_eq!(after.len(), requests.len() + 1, "nothing looked up without lockdown");
}
