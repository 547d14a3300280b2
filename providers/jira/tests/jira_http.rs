//! The provider against a loopback Jira: wiremock serves recorded responses (from
//! `tests/data/jira/`) in Jira Cloud's and Server's real shapes, and each test checks what a user
//! of the tool would notice.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use quiver_plugin_sdk::prelude::*;
use quiver_provider_jira::{Deployment, Jira, JiraConfig};
use wiremock::matchers::{body_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TOKEN: &str = "ATATT3xFfGF0s3cr3tT0kenValue123";
const EMAIL: &str = "dev@acme.com";
/// `Basic base64("dev@acme.com:ATATT3xFfGF0s3cr3tT0kenValue123")`.
const BASIC: &str = "Basic ZGV2QGFjbWUuY29tOkFUQVRUM3hGZkdGMHMzY3IzdFQwa2VuVmFsdWUxMjM=";
const V3: &str = "/rest/api/3";

fn fixture(name: &str) -> String {
    let path = format!("{}/../../tests/data/jira/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A 200 with a recorded JSON body and the headers Jira Cloud sends with it.
fn ok(name: &str) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .set_body_raw(fixture(name), "application/json;charset=UTF-8")
        .insert_header("x-arequestid", "7c1e2f0a-6f0b-4d0e-9a55-7f1b0c3e9d21")
        .insert_header("x-ratelimit-limit", "350")
        .insert_header("x-ratelimit-remaining", "349")
}

fn jira_error(status: u16, messages: &[&str], errors: Value) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .set_body_json(json!({ "errorMessages": messages, "errors": errors }))
}

/// Jira Cloud with basic authentication (email + API token).
fn cloud(server: &MockServer) -> JiraConfig {
    JiraConfig {
        base_url: Some(server.uri()),
        email: Some(EMAIL.into()),
        deployment: Some(Deployment::Cloud),
        token: Some(TOKEN.into()),
        ..Default::default()
    }
}

async fn call(jira: &Jira, tool: &str, args: Value) -> ToolResult {
    jira.call(tool, args, ToolContext::default()).await
}

/// The structured result of a call that must succeed.
async fn ok_call(jira: &Jira, tool: &str, args: Value) -> Value {
    let result = call(jira, tool, args).await;
    assert!(!result.is_error, "{tool} failed: {}", result.text_content());
    result.structured.expect("a structured result")
}

/// The kind and message of a call that must fail.
async fn failing_call(jira: &Jira, tool: &str, args: Value) -> (ToolErrorKind, String) {
    let result = call(jira, tool, args).await;
    assert!(result.is_error, "{tool} succeeded: {}", result.text_content());
    let message = result.text_content();
    assert!(!message.contains(TOKEN), "the token leaked into: {message}");
    (result.error_kind.expect("an error kind"), message)
}

async fn mount_fields(server: &MockServer, api: &str) {
    Mock::given(method("GET"))
        .and(path(format!("{api}/field")))
        .respond_with(ok("fields.json"))
        .expect(1)
        .mount(server)
        .await;
}

fn iso(epoch: u64) -> String {
    // `yyyy-MM-ddTHH:mmZ`, as Jira Cloud's X-RateLimit-Reset.
    let days = epoch / 86_400;
    let (mut y, mut d) = (1970u64, days);
    loop {
        let len = if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 { 366 } else { 365 };
        if d < len {
            break;
        }
        d -= len;
        y += 1;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let months = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let mut m = 0;
    while d >= months[m] {
        d -= months[m];
        m += 1;
    }
    let secs = epoch % 86_400;
    format!("{y:04}-{:02}-{:02}T{:02}:{:02}Z", m + 1, d + 1, secs / 3600, secs % 3600 / 60)
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

#[tokio::test(flavor = "multi_thread")]
async fn cloud_search_is_compact_pages_by_token_and_shows_fields_by_name() {
    let server = MockServer::start().await;
    mount_fields(&server, V3).await;
    let fields = "summary,status,issuetype,assignee,priority,updated,labels,customfield_10016";
    Mock::given(method("GET"))
        .and(path(format!("{V3}/search/jql")))
        .and(query_param("jql", "project = ED ORDER BY updated DESC"))
        .and(query_param("maxResults", "4"))
        .and(query_param("fields", fields))
        .and(header("authorization", BASIC))
        .respond_with(ok("search_jql.json"))
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/search/jql")))
        .and(query_param("nextPageToken", "CAEaAggD"))
        .respond_with(ok("search_jql_last.json"))
        .expect(1)
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let args = |token: Option<&str>| {
        json!({
            "jql": "project = ED ORDER BY updated DESC",
            "fields": ["story point estimate"],
            "max_results": 4,
            "next_page_token": token,
        })
    };

    let first = ok_call(&jira, "search_issues", args(None)).await;
    assert_eq!(first["next_page_token"], "CAEaAggD");
    assert_eq!(first["is_last"], false);
    assert!(first.get("total").is_none(), "Cloud's search does not count");
    let issues = first["issues"].as_array().unwrap();
    assert_eq!(issues.len(), 4);
    assert_eq!(
        issues[0],
        json!({
            "key": "ED-42",
            "summary": "Login fails with SSO when the session expired",
            "status": "In Progress",
            "status_category": "indeterminate",
            "issue_type": "Bug",
            "assignee": "Mia Krystof",
            "priority": "High",
            "labels": ["auth", "sso"],
            "updated": "2024-05-06T14:01:22.316+0200",
            "fields": {"Story point estimate": 5.0},
        })
    );
    assert_eq!(issues[1]["assignee"], Value::Null);
    assert!(issues[1].get("fields").is_none(), "an empty estimate is left out");
    let text = first.to_string();
    for noise in ["avatarUrls", "self", "iconUrl", "rest/api", "expand", "accountId"] {
        assert!(!text.contains(noise), "`{noise}` survived in {text}");
    }
    assert!(text.len() * 3 < fixture("search_jql.json").len(), "the result is not compact");

    // The next page, by token; the field map is not fetched again.
    let last = ok_call(&jira, "search_issues", args(Some("CAEaAggD"))).await;
    assert_eq!(last["is_last"], true);
    assert!(last.get("next_page_token").is_none());
    assert_eq!(last["issues"][0]["key"], "ED-27");
}

#[tokio::test(flavor = "multi_thread")]
async fn get_issue_renders_the_description_and_names_custom_fields() {
    let server = MockServer::start().await;
    mount_fields(&server, V3).await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42")))
        .respond_with(ok("issue_cloud.json"))
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let issue = ok_call(&jira, "get_issue", json!({"key": "ed-42"})).await;

    assert_eq!(issue["key"], "ED-42");
    assert_eq!(issue["project"], "ED");
    assert_eq!(issue["status"], "In Progress");
    assert_eq!(issue["assignee"], "Mia Krystof");
    assert_eq!(issue["reporter"], "Sam Ortiz");
    assert_eq!(issue["fix_versions"], json!(["2.4.0"]));
    assert_eq!(issue["components"], json!(["Auth service"]));
    assert_eq!(issue["due"], "2024-05-10");
    assert_eq!(issue["comments"], 2);
    assert_eq!(issue["attachments"], 1);
    assert_eq!(issue["url"], format!("{}/browse/ED-42", server.uri()));
    assert_eq!(
        issue["parent"],
        json!({"key": "ED-30", "summary": "Single sign-on", "status": "In Progress"})
    );
    assert_eq!(
        issue["links"],
        json!([
            {"relation": "blocks", "key": "ED-43", "summary": "Release 2.4.0", "status": "To Do"},
            {"relation": "is blocked by", "key": "ED-12", "summary": "Upgrade the SAML library",
             "status": "In Progress"},
        ])
    );
    assert_eq!(issue["subtasks"][0]["key"], "ED-44");
    assert_eq!(
        issue["description"],
        "After the IdP session expires, `/login/sso` answers 500 instead of redirecting.\n\n\
         ### Steps\n\n1. Log in with SSO\n2. Wait 30 minutes\n3. Reload the dashboard\n\n\
         cc @Sam Ortiz\n\n```text\njava.lang.IllegalStateException: assertion expired\n```"
    );
    assert_eq!(
        issue["custom_fields"],
        json!({
            "Affected environments": ["staging", "production"],
            "Reviewer": "Sam Ortiz",
            "Root cause": "Expired assertions are not caught.",
            "Sprint": [{"id": 37, "name": "ED Sprint 12", "state": "active"}],
            "Story point estimate": 5.0,
            "Team": "Identity",
        }),
        "by name, without Rank and the development panel"
    );
    let text = issue.to_string();
    assert!(text.len() * 4 < fixture("issue_cloud.json").len(), "{} bytes", text.len());

    // Only the custom fields asked for.
    let some =
        ok_call(&jira, "get_issue", json!({"key": "ED-42", "custom_fields": ["Team"]})).await;
    assert_eq!(some["custom_fields"], json!({"Team": "Identity"}));
}

#[tokio::test(flavor = "multi_thread")]
async fn comments_page_by_offset_and_read_as_text() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42/comment")))
        .and(query_param("startAt", "0"))
        .and(query_param("maxResults", "2"))
        .and(query_param("orderBy", "created"))
        .respond_with(ok("comments_cloud.json"))
        .expect(1)
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let list = ok_call(&jira, "list_comments", json!({"key": "ED-42", "max_results": 2})).await;
    assert_eq!(list["key"], "ED-42");
    assert_eq!(list["total"], 5);
    assert_eq!(list["next_start_at"], 2);
    let comments = list["comments"].as_array().unwrap();
    assert_eq!(
        comments[0],
        json!({
            "id": "10101",
            "author": "Sam Ortiz",
            "created": "2024-05-02T11:00:00.000+0200",
            "body": "Reproduced on staging. Log: https://logs.acme.com/q/abc123",
        })
    );
    assert_eq!(
        comments[1]["body"],
        "Fix is in review: PR 311 (https://git.acme.com/auth/pull/311)"
    );
    assert_eq!(comments[1]["edited"], "2024-05-06T14:01:00.000+0200");
}

#[tokio::test(flavor = "multi_thread")]
async fn transitions_show_required_fields_and_are_taken_by_target_status() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42/transitions")))
        .and(query_param("expand", "transitions.fields"))
        .respond_with(ok("transitions.json"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{V3}/issue/ED-42/transitions")))
        .and(header("authorization", BASIC))
        .and(body_json(json!({
            "transition": {"id": "31"},
            "fields": {
                "resolution": {"name": "Fixed"},
                "customfield_10043": {"type": "doc", "version": 1, "content": [
                    {"type": "paragraph", "content": [{"type": "text", "text": "Missing catch."}]}
                ]},
            },
            "update": {"comment": [{"add": {"body": {"type": "doc", "version": 1, "content": [
                {"type": "paragraph", "content": [{"type": "text", "text": "Fixed in 2.4.0."}]}
            ]}}}]},
        })))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();

    let list = ok_call(&jira, "list_transitions", json!({"key": "ED-42"})).await;
    assert_eq!(
        list["transitions"][2],
        json!({
            "id": "31", "name": "Resolve", "to_status": "Done", "to_category": "done",
            "required_fields": ["Resolution"], "has_screen": true,
        })
    );
    assert_eq!(
        list["transitions"][0],
        json!({"id": "11", "name": "To Do", "to_status": "To Do",
                                              "to_category": "new"})
    );

    let done = ok_call(
        &jira,
        "transition_issue",
        json!({
            "key": "ED-42", "transition": "done", "comment": "Fixed in 2.4.0.",
            "fields": {"Resolution": "Fixed", "Root cause": "Missing catch."},
        }),
    )
    .await;
    assert_eq!(done, json!({"key": "ED-42", "transition": "Resolve", "to_status": "Done"}));

    let (kind, message) =
        failing_call(&jira, "transition_issue", json!({"key": "ED-42", "transition": "Reopen"}))
            .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("available: To Do (id 11, → To Do), In Review"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn boards_sprints_and_versions() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/rest/agile/1.0/board"))
        .and(query_param("maxResults", "2"))
        .and(query_param("startAt", "0"))
        .respond_with(ok("boards.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/rest/agile/1.0/board/84/sprint"))
        .and(query_param("state", "active,future"))
        .respond_with(ok("sprints.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/project/ED/version")))
        .and(query_param("orderBy", "-sequence"))
        .and(query_param("status", "released"))
        .respond_with(ok("versions.json"))
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();

    let boards = ok_call(&jira, "list_boards", json!({"max_results": 2})).await;
    assert_eq!(boards["total"], 3);
    assert_eq!(boards["next_start_at"], 2);
    assert_eq!(
        boards["boards"],
        json!([
            {"id": 84, "name": "ED board", "type": "scrum", "project": "ED"},
            {"id": 92, "name": "Support flow", "type": "kanban", "project": "SUP"},
        ])
    );

    let sprints =
        ok_call(&jira, "list_sprints", json!({"board_id": 84, "state": ["active", "future"]}))
            .await;
    assert_eq!(sprints["board_id"], 84);
    assert_eq!(sprints["next_start_at"], Value::Null);
    assert_eq!(
        sprints["sprints"][1],
        json!({
            "id": 37, "name": "ED Sprint 12", "state": "active",
            "start_date": "2024-04-29T07:00:00.000Z", "end_date": "2024-05-13T07:00:00.000Z",
            "goal": "Ship SSO fixes",
        })
    );
    assert!(sprints["sprints"][2].get("goal").is_none(), "an empty goal is left out");

    // The server-side filter, and the same filter applied here (Server ignores it).
    let versions =
        ok_call(&jira, "list_project_versions", json!({"project": "ED", "status": "released"}))
            .await;
    assert_eq!(versions["project"], "ED");
    assert_eq!(
        versions["versions"],
        json!([{"id": "10000", "name": "2.3.0", "released": true, "release_date": "2024-04-02"}])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn server_with_a_context_path_uses_rest_v2_bearer_tokens_and_offsets() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/jira/rest/api/2/search"))
        .and(query_param("jql", "project = OPS"))
        .and(query_param("startAt", "0"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(ok("search_server.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/jira/rest/api/2/issue/OPS-118"))
        .respond_with(ok("issue_server.json"))
        .mount(&server)
        .await;
    // No field list on this server: names fall back to ids, the issue still comes back.
    Mock::given(method("GET"))
        .and(path("/jira/rest/api/2/field"))
        .respond_with(jira_error(403, &["You do not have permission"], json!({})))
        .mount(&server)
        .await;
    let jira = Jira::new(JiraConfig {
        base_url: Some(format!("{}/jira/", server.uri())),
        token: Some(TOKEN.into()),
        ..Default::default()
    })
    .unwrap();

    let found = ok_call(&jira, "search_issues", json!({"jql": "project = OPS"})).await;
    assert_eq!(found["total"], 3);
    assert_eq!(found["next_start_at"], 2);
    assert_eq!(found["is_last"], false);
    assert_eq!(found["issues"][0]["assignee"], "Jane Doe");
    assert_eq!(found["issues"][1]["status_category"], "indeterminate");

    let issue = ok_call(&jira, "get_issue", json!({"key": "OPS-118"})).await;
    assert_eq!(
        issue["description"],
        "The *nightly backup* of db-03 stopped after 4h.\r\n\r\n{code}\r\npg_dump: error: \
         query was cancelled\r\n{code}",
        "Server's wiki markup is kept as it is"
    );
    assert_eq!(issue["custom_fields"], json!({"customfield_10100": "2024-05-01"}));
    assert!(issue["note"].as_str().unwrap().contains("ids shown"), "{}", issue["note"]);
    assert_eq!(issue["url"], format!("{}/jira/browse/OPS-118", server.uri()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_issue_is_named() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-999")))
        .respond_with(jira_error(
            404,
            &["Issue does not exist or you do not have permission to see it."],
            json!({}),
        ))
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let (kind, message) = failing_call(&jira, "get_issue", json!({"key": "ED-999"})).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(
        message.starts_with("no issue ED-999 in jira (or the account cannot see it"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_token_names_the_variable_and_the_email_key_and_never_the_token() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-1")))
        // Jira does not echo tokens, but a proxy might: the message must still hide it.
        .respond_with(
            ResponseTemplate::new(401)
                .set_body_raw(format!("Client must be authenticated ({TOKEN})"), "text/plain")
                .insert_header("x-seraph-loginreason", "AUTHENTICATED_FAILED"),
        )
        .mount(&server)
        .await;
    let jira =
        Jira::new(JiraConfig { token_env: Some("ACME_JIRA_TOKEN".into()), ..cloud(&server) })
            .unwrap();
    let (kind, message) = failing_call(&jira, "get_issue", json!({"key": "ED-1"})).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.starts_with("jira rejected the credentials (401 Unauthorized"), "{message}");
    assert!(
        message.contains("set ACME_JIRA_TOKEN (the variable named by [providers.jira] token_env)"),
        "{message}"
    );
    assert!(message.contains("[providers.jira] email = \"dev@acme.com\""), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_token_nothing_is_sent_when_an_email_is_set() {
    let server = MockServer::start().await;
    let jira = Jira::new(JiraConfig { token: None, ..cloud(&server) }).unwrap();
    let (kind, message) = failing_call(&jira, "get_issue", json!({"key": "ED-1"})).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.contains("set JIRA_TOKEN"), "{message}");
    assert!(message.contains("[providers.jira] email"), "{message}");
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_personal_access_token_on_server_says_what_to_set() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/rest/api/2/issue/OPS-1"))
        .respond_with(ResponseTemplate::new(401))
        .mount(&server)
        .await;
    let jira = Jira::new(JiraConfig {
        base_url: Some(server.uri()),
        token: Some(TOKEN.into()),
        ..Default::default()
    })
    .unwrap();
    let (kind, message) = failing_call(&jira, "get_issue", json!({"key": "OPS-1"})).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.contains("set JIRA_TOKEN"), "{message}");
    assert!(message.contains("personal access token"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_short_rate_limit_is_waited_out() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42")))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "1")
                .insert_header("ratelimit-reason", "jira-burst-based"),
        )
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42")))
        .respond_with(ok("issue_server.json"))
        .expect(1)
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let started = Instant::now();
    let issue = ok_call(&jira, "get_issue", json!({"key": "ED-42"})).await;
    assert_eq!(issue["summary"], "Nightly backup job times out");
    assert!(started.elapsed() >= Duration::from_secs(1), "retried before retry-after");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_that_persists_is_retried_twice_then_reported() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42")))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .expect(3)
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let (kind, message) = failing_call(&jira, "get_issue", json!({"key": "ED-42"})).await;
    assert_eq!(kind, ToolErrorKind::RateLimited);
    assert!(message.contains("even after waiting 2 s"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_rate_limit_fails_fast_saying_when_it_resets() {
    let server = MockServer::start().await;
    let reset = iso(now() + 3600);
    Mock::given(method("GET"))
        .and(path(format!("{V3}/search/jql")))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("x-ratelimit-reset", reset.as_str())
                .insert_header("ratelimit-reason", "jira-quota-tenant-based")
                .set_body_raw("Rate limit exceeded.", "text/plain"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let started = Instant::now();
    let (kind, message) =
        failing_call(&jira, "search_issues", json!({"jql": "project = ED"})).await;
    assert!(started.elapsed() < Duration::from_secs(3), "waited {:?}", started.elapsed());
    assert_eq!(kind, ToolErrorKind::RateLimited);
    assert!(message.contains("(jira-quota-tenant-based)"), "{message}");
    assert!(message.contains(&format!("it resets at {}", &reset[..16])), "{message}");
    assert!(message.contains("max_retry_wait_s = 10 s"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_past_the_calls_deadline_is_not_waited_for() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42")))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "5"))
        .expect(1)
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let ctx = ToolContext { timeout_ms: Some(2000), ..Default::default() };
    let started = Instant::now();
    let result = jira.call("get_issue", json!({"key": "ED-42"}), ctx).await;
    assert!(started.elapsed() < Duration::from_secs(2), "waited {:?}", started.elapsed());
    assert_eq!(result.error_kind, Some(ToolErrorKind::RateLimited));
    assert!(
        result.text_content().contains("past this call's deadline"),
        "{}",
        result.text_content()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_and_failed_answers_are_upstream_errors() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-5")))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw("{\"key\": \"ED-5\", \"fie", "application/json"),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-6")))
        .respond_with(
            ResponseTemplate::new(502).set_body_raw("<html>Bad Gateway</html>", "text/html"),
        )
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let (kind, message) = failing_call(&jira, "get_issue", json!({"key": "ED-5"})).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.starts_with("jira returned an unreadable body for issue ED-5"), "{message}");
    let (kind, message) = failing_call(&jira, "get_issue", json!({"key": "ED-6"})).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("jira failed with 502 Bad Gateway"), "{message}");
}

/// How many requests with `verb` reached `to`.
async fn requests(server: &MockServer, verb: &str, to: &str) -> usize {
    let received = server.received_requests().await.unwrap();
    received.iter().filter(|r| r.method.as_str() == verb && r.url.path() == to).count()
}

/// A read that meets a passing fault (a 503 without `Retry-After`) is sent again after a short
/// jittered pause and succeeds; the user never sees the fault.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_answered_503_once_is_sent_again_and_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42")))
        .respond_with(ResponseTemplate::new(503).set_body_raw("upstream busy", "text/plain"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42")))
        .respond_with(ok("issue_server.json"))
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let issue = ok_call(&jira, "get_issue", json!({"key": "ED-42"})).await;
    assert_eq!(issue["summary"], "Nightly backup job times out");
    assert_eq!(requests(&server, "GET", &format!("{V3}/issue/ED-42")).await, 2, "one retry");
}

/// Cloud's 503 with `Retry-After` stays a rate limit: waited out for as long as Jira asks, not
/// after the short pause of a passing fault.
#[tokio::test(flavor = "multi_thread")]
async fn a_503_with_retry_after_is_still_waited_out_as_a_rate_limit() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42")))
        .respond_with(ResponseTemplate::new(503).insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42")))
        .respond_with(ok("issue_server.json"))
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let started = Instant::now();
    ok_call(&jira, "get_issue", json!({"key": "ED-42"})).await;
    assert!(started.elapsed() >= Duration::from_secs(1), "retried before retry-after");
    assert_eq!(requests(&server, "GET", &format!("{V3}/issue/ED-42")).await, 2);
}

/// A write is sent once, whatever comes back: it may have landed before the fault.
#[tokio::test(flavor = "multi_thread")]
async fn a_write_answered_503_is_not_sent_again() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("{V3}/issue/ED-42/comment")))
        .respond_with(ResponseTemplate::new(503).set_body_raw("upstream busy", "text/plain"))
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let (kind, message) =
        failing_call(&jira, "add_comment", json!({"key": "ED-42", "body": "Deployed."})).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("503 Service Unavailable"), "{message}");
    assert_eq!(requests(&server, "POST", &format!("{V3}/issue/ED-42/comment")).await, 1);
}

/// A body past `max_response_mb` is refused with the setting named, whether its length is
/// declared (refused unread) or it arrives chunked without one (cut off at the limit).
#[tokio::test(flavor = "multi_thread")]
async fn a_body_past_max_response_mb_is_refused() {
    let server = MockServer::start().await;
    let huge = format!(
        "{{\"key\": \"ED-42\", \"fields\": {{\"summary\": \"{}\"}}}}",
        "x".repeat(2 * 1024 * 1024)
    );
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42")))
        .respond_with(ResponseTemplate::new(200).set_body_raw(huge.clone(), "application/json"))
        .mount(&server)
        .await;
    // An explicit `Transfer-Encoding: chunked` makes wiremock's server send no Content-Length.
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-43")))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(huge, "application/json")
                .insert_header("transfer-encoding", "chunked"),
        )
        .mount(&server)
        .await;
    let chunked = reqwest::get(format!("{}{V3}/issue/ED-43", server.uri())).await.unwrap();
    assert_eq!(chunked.content_length(), None, "the fake must not declare a length");
    let jira = Jira::new(JiraConfig { max_response_mb: Some(1), ..cloud(&server) }).unwrap();
    for key in ["ED-42", "ED-43"] {
        let route = format!("{V3}/issue/{key}");
        let before = requests(&server, "GET", &route).await;
        let (kind, message) = failing_call(&jira, "get_issue", json!({"key": key})).await;
        assert_eq!(kind, ToolErrorKind::Upstream);
        assert!(message.contains(&format!("for issue {key}")), "{message}");
        assert!(message.contains("max_response_mb = 1 MB"), "{message}");
        let sent = requests(&server, "GET", &route).await - before;
        assert_eq!(sent, 1, "{key}: a body too large is not a passing fault, so never retried");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_jql_is_reported_with_jiras_own_message() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/search/jql")))
        .respond_with(jira_error(
            400,
            &["Error in the JQL Query: The character '=' is a reserved JQL character."],
            json!({}),
        ))
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let (kind, message) =
        failing_call(&jira, "search_issues", json!({"jql": "project == ED"})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("The character '=' is a reserved JQL character."), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_jira_times_out_after_timeout_s() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42")))
        .respond_with(ok("issue_cloud.json").set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let jira = Jira::new(JiraConfig { timeout_s: Some(1), ..cloud(&server) }).unwrap();
    let started = Instant::now();
    let (kind, message) = failing_call(&jira, "get_issue", json!({"key": "ED-42"})).await;
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(kind, ToolErrorKind::Timeout);
    assert!(message.contains("timeout_s"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn create_issue_sends_fields_by_name_in_jiras_shapes() {
    let server = MockServer::start().await;
    mount_fields(&server, V3).await;
    Mock::given(method("POST"))
        .and(path(format!("{V3}/issue")))
        .and(header("authorization", BASIC))
        .and(body_json(json!({
            "fields": {
                "project": {"key": "ED"},
                "issuetype": {"name": "Bug"},
                "summary": "Logout leaves the SSO session open",
                "description": {"type": "doc", "version": 1, "content": [
                    {"type": "paragraph", "content": [{"type": "text", "text": "Steps:"}]},
                    {"type": "paragraph", "content": [{"type": "text", "text": "1. log out"}]}
                ]},
                "labels": ["sso"],
                "priority": {"name": "High"},
                "assignee": {"accountId": "5b10ac8d82e05b22cc7d4ef5"},
                "parent": {"key": "ED-30"},
                "customfield_10016": 3.0,
                "customfield_10042": {"value": "Identity"},
                "customfield_10045": [{"value": "production"}],
                "fixVersions": [{"name": "2.4.0"}],
            }
        })))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_raw(fixture("issue_created.json"), "application/json;charset=UTF-8"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let created = ok_call(
        &jira,
        "create_issue",
        json!({
            "project": "ED", "issue_type": "Bug", "summary": "Logout leaves the SSO session open",
            "description": "Steps:\n1. log out", "labels": ["sso"], "priority": "High",
            "assignee": "5b10ac8d82e05b22cc7d4ef5", "parent": "ED-30",
            "fields": {
                "Story point estimate": "3", "Team": "Identity",
                "Affected environments": "production", "Fix versions": ["2.4.0"],
            },
        }),
    )
    .await;
    assert_eq!(
        created,
        json!({"key": "ED-46", "id": "10072", "url": format!("{}/browse/ED-46", server.uri())})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn update_issue_puts_fields_and_field_errors_name_the_field() {
    let server = MockServer::start().await;
    mount_fields(&server, V3).await;
    Mock::given(method("PUT"))
        .and(path(format!("{V3}/issue/ED-42")))
        .and(body_json(json!({"fields": {
            "summary": "SSO login fails after session expiry",
            "assignee": null,
            "customfield_10016": 8,
        }})))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{V3}/issue/ED-43")))
        .respond_with(jira_error(
            400,
            &[],
            json!({"customfield_10042": "Option value 'Nobody' is not valid"}),
        ))
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let updated = ok_call(
        &jira,
        "update_issue",
        json!({
            "key": "ED-42", "summary": "SSO login fails after session expiry", "assignee": "none",
            "fields": {"customfield_10016": 8},
        }),
    )
    .await;
    assert_eq!(updated["key"], "ED-42");
    assert_eq!(updated["updated"], json!(["summary", "assignee", "Story point estimate"]));

    let (kind, message) =
        failing_call(&jira, "update_issue", json!({"key": "ED-43", "fields": {"Team": "Nobody"}}))
            .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(
        message.contains("customfield_10042 (Team): Option value 'Nobody' is not valid"),
        "{message}"
    );

    let (kind, message) =
        failing_call(&jira, "update_issue", json!({"key": "ED-42", "fields": {"Teams": 1}})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("no field named `Teams`"), "{message}");
    assert!(message.contains("similar names: Team"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn comments_and_links_are_posted_in_cloud_shapes() {
    let server = MockServer::start().await;
    let adf = |text: &str| {
        json!({"type": "doc", "version": 1, "content": [
            {"type": "paragraph", "content": [{"type": "text", "text": text}]}
        ]})
    };
    Mock::given(method("POST"))
        .and(path(format!("{V3}/issue/ED-42/comment")))
        .and(body_json(json!({"body": adf("Deployed to staging.")})))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_raw(fixture("comment_created.json"), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{V3}/issueLink")))
        .and(header("authorization", BASIC))
        .and(body_json(json!({
            "type": {"name": "Blocks"},
            "inwardIssue": {"key": "ED-12"},
            "outwardIssue": {"key": "ED-42"},
            "comment": {"body": adf("Needs the new SAML library.")},
        })))
        .respond_with(ResponseTemplate::new(201))
        .expect(1)
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let comment =
        ok_call(&jira, "add_comment", json!({"key": "ED-42", "body": "Deployed to staging."}))
            .await;
    assert_eq!(
        comment,
        json!({"key": "ED-42", "id": "10110", "author": "Mia Krystof",
               "created": "2024-05-07T10:00:00.000+0200"})
    );
    let linked = ok_call(
        &jira,
        "link_issues",
        json!({"from_key": "ED-12", "type": "Blocks", "to_key": "ED-42",
               "comment": "Needs the new SAML library."}),
    )
    .await;
    assert_eq!(linked, json!({"from_key": "ED-12", "type": "Blocks", "to_key": "ED-42"}));
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_are_refused_before_any_request() {
    let server = MockServer::start().await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let (kind, message) =
        failing_call(&jira, "get_issue", json!({"key": "ED-1/../../myself"})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("issue key such as `PROJ-123`"), "{message}");
    let (kind, message) = failing_call(&jira, "update_issue", json!({"key": "ED-1"})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("nothing to update"), "{message}");
    let (kind, message) =
        failing_call(&jira, "search_issues", json!({"jql": "project = ED", "max": 5})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("unknown field `max`"), "{message}");
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[test]
fn configuration_typos_are_errors_and_the_token_is_not_printed() {
    let err = serde_json::from_value::<JiraConfig>(json!({"base_ur": "https://x"})).err().unwrap();
    assert!(err.to_string().contains("unknown field `base_ur`"), "{err}");
    let config: JiraConfig = serde_json::from_value(json!({
        "base_url": "https://acme.atlassian.net", "email": EMAIL, "deployment": "cloud",
        "token": TOKEN, "token_env": "JT", "timeout_s": 5, "max_retry_wait_s": 5,
        "ca_file": "/etc/ssl/acme-ca.pem", "max_response_mb": 8,
    }))
    .unwrap();
    assert!(!format!("{config:?}").contains(TOKEN));
    assert_eq!(config.max_response_mb, Some(8));
    let dc: JiraConfig = serde_json::from_value(json!({"deployment": "data_center"})).unwrap();
    assert_eq!(dc.deployment, Some(Deployment::Server));
}

/// A private CA's PEM file is read at start: a wrong path or a file without a usable certificate
/// is a start-up error naming `ca_file`, a real CA certificate is accepted.
#[test]
fn ca_file_is_checked_at_start() {
    let site = |ca_file: &str| JiraConfig {
        base_url: Some("https://jira.example.com".into()),
        ca_file: Some(ca_file.into()),
        ..Default::default()
    };
    let ca = format!("{}/../../tests/data/tls/ca.pem", env!("CARGO_MANIFEST_DIR"));
    assert!(Jira::new(site(&ca)).is_ok());
    let err = Jira::new(site("/nonexistent/ca.pem")).err().unwrap();
    assert!(err.to_string().contains("[providers.jira] ca_file `/nonexistent/ca.pem`"), "{err}");
    let bad = std::env::temp_dir().join(format!("quiver-jira-bad-ca-{}.pem", std::process::id()));
    std::fs::write(&bad, "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n").unwrap();
    let err = Jira::new(site(bad.to_str().unwrap())).err().unwrap();
    std::fs::remove_file(&bad).unwrap();
    assert!(err.to_string().contains("[providers.jira] ca_file"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn base_url_is_required_and_checked_and_a_missing_token_is_not_an_error() {
    let err = Jira::new(JiraConfig::default()).err().unwrap();
    assert!(err.to_string().contains("base_url is required"), "{err}");
    let err =
        Jira::new(JiraConfig { base_url: Some("acme.atlassian.net".into()), ..Default::default() })
            .err()
            .unwrap();
    assert!(err.to_string().contains("https://your-site.atlassian.net"), "{err}");
    assert!(Jira::new(JiraConfig {
        base_url: Some("https://acme.atlassian.net".into()),
        ..Default::default()
    })
    .is_ok());
    let tools = Jira::tools();
    assert_eq!(tools.len(), 26);
    let search = tools.iter().find(|t| t.name == "search_issues").unwrap();
    assert!(
        search.input_schema["properties"]["max_results"]["description"]
            .as_str()
            .unwrap()
            .contains("at most 100"),
        "argument docs reach the schema"
    );
}

/// A long query is quoted whole once (by Jira's message), not again around it.
#[tokio::test(flavor = "multi_thread")]
async fn a_long_jql_is_not_quoted_twice_in_an_error() {
    let server = MockServer::start().await;
    let jql = format!("summary ~ \"{}\"", "x".repeat(5000));
    let echo =
        format!("Error in the JQL Query: The character '~' is a reserved JQL character. ({jql})");
    Mock::given(method("GET"))
        .and(path(format!("{V3}/search/jql")))
        .respond_with(jira_error(400, &[echo.as_str()], json!({})))
        .mount(&server)
        .await;
    let jira = Jira::new(cloud(&server)).unwrap();
    let (kind, message) = failing_call(&jira, "search_issues", json!({"jql": jql})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments, "{message}");
    assert_eq!(message.matches(&jql).count(), 1, "quoted once: {} bytes", message.len());
    assert!(message.contains("the search `summary ~ \"xxx"), "{}", &message[..200]);
}

/// Under lockdown, Jira's comments (which do not say who may edit the issue) are labelled by
/// asking Jira who among their authors holds `EDIT_ISSUES` on it — once per author and project
/// in five minutes. Without lockdown nothing is asked and the labels name the authors only.
#[tokio::test(flavor = "multi_thread")]
async fn lockdown_asks_who_may_edit_the_issue() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42/comment")))
        .respond_with(ok("comments_cloud.json"))
        .mount(&server)
        .await;
    let comments: Value = serde_json::from_str(&fixture("comments_cloud.json")).unwrap();
    let authors: Vec<Value> =
        comments["comments"].as_array().unwrap().iter().map(|c| c["author"].clone()).collect();
    let editor = authors[0]["accountId"].as_str().unwrap();
    for author in &authors {
        let id = author["accountId"].as_str().unwrap();
        // Jira answers with the users that match and hold the permission: none for a
        // stranger.
        let users = if id == editor { json!([author]) } else { json!([]) };
        Mock::given(method("GET"))
            .and(path(format!("{V3}/user/permission/search")))
            .and(query_param("permissions", "EDIT_ISSUES"))
            .and(query_param("issueKey", "ED-42"))
            .and(query_param("accountId", id))
            .respond_with(ResponseTemplate::new(200).set_body_json(users))
            .mount(&server)
            .await;
    }
    let jira = Jira::new(cloud(&server)).unwrap();
    let labels = |result: &ToolResult| -> Vec<(String, String, Option<bool>)> {
        result.author_labels().into_iter().map(|l| (l.pointer, l.author, l.can_write)).collect()
    };
    let locked = ToolContext { lockdown: true, ..ToolContext::default() };
    for _ in 0..2 {
        let result = jira.call("list_comments", json!({"key": "ED-42"}), locked.clone()).await;
        assert!(!result.is_error, "{}", result.text_content());
        let found = labels(&result);
        assert_eq!(found[0], ("/comments/0/body".into(), "Sam Ortiz".into(), Some(true)));
        assert_eq!(found[1], ("/comments/1/body".into(), "Mia Krystof".into(), Some(false)));
    }
    let asked = |requests: &[wiremock::Request]| {
        requests.iter().filter(|r| r.url.path().ends_with("/user/permission/search")).count()
    };
    let distinct: std::collections::BTreeSet<&str> =
        authors.iter().filter_map(|a| a["accountId"].as_str()).collect();
    assert_eq!(asked(&server.received_requests().await.unwrap()), distinct.len(), "once each");

    let open = call(&jira, "list_comments", json!({"key": "ED-42"})).await;
    assert_eq!(labels(&open)[1], ("/comments/1/body".into(), "Mia Krystof".into(), None));
    assert_eq!(asked(&server.received_requests().await.unwrap()), distinct.len());
}
