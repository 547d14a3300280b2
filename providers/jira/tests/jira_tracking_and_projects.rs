//! Worklogs, attachments, change logs, children, watchers, assignment, users, projects, create
//! metadata and sprint moves against a loopback Jira: wiremock serves recorded responses (from
//! `tests/data/jira/`) in Jira Cloud's and Server's real shapes, and each test checks what a user
//! of the tools would notice.

use quiver_plugin_sdk::prelude::*;
use quiver_provider_jira::{Deployment, Jira, JiraConfig};
use wiremock::matchers::{body_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TOKEN: &str = "ATATT3xFfGF0s3cr3tT0kenValue123";
const EMAIL: &str = "dev@acme.com";
/// `Basic base64("dev@acme.com:ATATT3xFfGF0s3cr3tT0kenValue123")`.
const BASIC: &str = "Basic ZGV2QGFjbWUuY29tOkFUQVRUM3hGZkdGMHMzY3IzdFQwa2VuVmFsdWUxMjM=";
const V3: &str = "/rest/api/3";
/// The Server site's API root, below its context path.
const V2: &str = "/jira/rest/api/2";
const MIA: &str = "5b10ac8d82e05b22cc7d4ef5";

fn fixture(name: &str) -> String {
    let path = format!("{}/../../tests/data/jira/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A 200 with a recorded JSON body.
fn ok(name: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(fixture(name), "application/json;charset=UTF-8")
}

fn jira_error(status: u16, messages: &[&str], errors: Value) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .set_body_json(json!({ "errorMessages": messages, "errors": errors }))
}

/// Jira Cloud with basic authentication (email + API token).
fn cloud(server: &MockServer) -> Jira {
    Jira::new(JiraConfig {
        base_url: Some(server.uri()),
        email: Some(EMAIL.into()),
        deployment: Some(Deployment::Cloud),
        token: Some(TOKEN.into()),
        ..Default::default()
    })
    .unwrap()
}

/// Jira Data Center below `/jira`, with a personal access token (bearer).
fn data_center(server: &MockServer) -> Jira {
    Jira::new(JiraConfig {
        base_url: Some(format!("{}/jira/", server.uri())),
        token: Some(TOKEN.into()),
        ..Default::default()
    })
    .unwrap()
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// The structured result of a call that must succeed.
async fn ok_call(jira: &Jira, tool: &str, args: Value) -> Value {
    let result = jira.call(tool, args, ToolContext::default()).await;
    assert!(!result.is_error, "{tool} failed: {}", result.text_content());
    result.structured.expect("a structured result")
}

/// The kind and message of a call that must fail; the token never shows.
async fn failing_call(jira: &Jira, tool: &str, args: Value) -> (ToolErrorKind, String) {
    let result = jira.call(tool, args, ToolContext::default()).await;
    assert!(result.is_error, "{tool} succeeded: {}", result.text_content());
    let message = result.text_content();
    assert!(!message.contains(TOKEN), "the token leaked into: {message}");
    (result.error_kind.expect("an error kind"), message)
}

fn adf(text: &str) -> Value {
    json!({"type": "doc", "version": 1, "content": [
        {"type": "paragraph", "content": [{"type": "text", "text": text}]}
    ]})
}

async fn missing_issue(server: &MockServer, route: String) {
    Mock::given(path(route))
        .respond_with(jira_error(
            404,
            &["Issue does not exist or you do not have permission to see it."],
            json!({}),
        ))
        .mount(server)
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn worklogs_page_by_offset_and_logging_work_sends_jiras_time_format() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42/worklog")))
        .and(query_param("startAt", "0"))
        .and(query_param("maxResults", "2"))
        .and(header("authorization", BASIC))
        .respond_with(ok("worklogs.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{V3}/issue/ED-42/worklog")))
        .and(query_param("adjustEstimate", "new"))
        .and(query_param("newEstimate", "2h"))
        .and(body_json(json!({
            "timeSpent": "1h 30m",
            "started": "2024-05-07T07:00:00.000+0000",
            "comment": adf("Code review of the fix."),
        })))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_raw(fixture("worklog_created.json"), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{V3}/issue/ED-43/worklog")))
        .respond_with(jira_error(
            400,
            &[],
            json!({"timeLogged": "You must indicate the time spent working."}),
        ))
        .mount(&server)
        .await;
    missing_issue(&server, format!("{V3}/issue/ED-999/worklog")).await;
    let jira = cloud(&server);

    let list = ok_call(&jira, "list_worklogs", json!({"key": "ed-42", "max_results": 2})).await;
    assert_eq!(list["key"], "ED-42");
    assert_eq!(list["total"], 3);
    assert_eq!(list["next_start_at"], 2);
    assert_eq!(list["page_seconds"], 19800);
    assert_eq!(
        list["worklogs"][0],
        json!({
            "id": "10200", "author": "Mia Krystof", "started": "2024-05-03T09:00:00.000+0200",
            "time_spent": "3h 30m", "time_spent_seconds": 12600,
            "comment": "Reproduced the SSO expiry locally.",
        })
    );
    assert!(list["worklogs"][1].get("comment").is_none(), "no comment, no key");
    assert!(!list.to_string().contains("avatarUrls"));

    let added = ok_call(
        &jira,
        "add_worklog",
        json!({
            "key": "ED-42", "time_spent": "1h 30m", "started": "2024-05-07T09:00:00+02:00",
            "comment": "Code review of the fix.", "remaining_estimate": "2h",
        }),
    )
    .await;
    assert_eq!(added["key"], "ED-42");
    assert_eq!(added["id"], "10205");
    assert_eq!(added["time_spent_seconds"], 5400);

    let (kind, message) =
        failing_call(&jira, "add_worklog", json!({"key": "ED-43", "time_spent": "1h"})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("timeLogged: You must indicate the time spent working."), "{message}");

    let (kind, message) =
        failing_call(&jira, "add_worklog", json!({"key": "ED-42", "time_spent": "an hour"})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("duration such as `3h 30m`"), "{message}");

    let (kind, message) = failing_call(&jira, "list_worklogs", json!({"key": "ED-999"})).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no issue ED-999 in jira"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn attachments_and_the_change_log_are_compact_and_filtered() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42")))
        .and(query_param("fields", "attachment"))
        .respond_with(ok("issue_attachments.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42/changelog")))
        .and(query_param("startAt", "0"))
        .and(query_param("maxResults", "3"))
        .respond_with(ok("changelog.json"))
        .expect(2)
        .mount(&server)
        .await;
    missing_issue(&server, format!("{V3}/issue/ED-999/changelog")).await;
    let jira = cloud(&server);

    let files = ok_call(&jira, "list_attachments", json!({"key": "ED-42"})).await;
    assert_eq!(files["total_bytes"], 482133 + 91520);
    assert_eq!(
        files["attachments"][1],
        json!({
            "id": "10034", "filename": "login-500.png", "size": 91520, "mime_type": "image/png",
            "author": "Mia Krystof", "created": "2024-05-03T09:12:44.020+0200",
            "url": "https://acme.atlassian.net/rest/api/3/attachment/content/10034",
        })
    );

    let log = ok_call(&jira, "list_changelog", json!({"key": "ED-42", "max_results": 3})).await;
    assert_eq!(log["total"], 5);
    assert_eq!(log["next_start_at"], 3);
    let history = log["history"].as_array().unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(
        history[0]["changes"][0],
        json!({"field": "assignee", "from": null, "to": "Mia Krystof"})
    );
    let old = history[0]["changes"][1]["from"].as_str().unwrap();
    assert!(old.len() < 600 && old.contains("cut"), "a long old description is cut: {old}");
    assert!(!log.to_string().contains("tmpToAccountId"));

    let status = ok_call(
        &jira,
        "list_changelog",
        json!({"key": "ED-42", "max_results": 3, "fields": ["Status"]}),
    )
    .await;
    assert_eq!(
        status["history"],
        json!([{
            "id": "10315", "author": "Mia Krystof", "created": "2024-05-03T09:01:12.000+0200",
            "changes": [{"field": "status", "from": "To Do", "to": "In Progress"}],
        }])
    );
    assert_eq!(status["next_start_at"], 3, "the filter does not change the paging");

    let (kind, _) = failing_call(&jira, "list_changelog", json!({"key": "ED-999"})).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
}

#[tokio::test(flavor = "multi_thread")]
async fn watchers_assignment_and_user_search_on_cloud_use_account_ids() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/ED-42/watchers")))
        .respond_with(ok("watchers.json"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{V3}/issue/ED-42/watchers")))
        .and(body_json(json!(MIA)))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{V3}/issue/ED-999/watchers")))
        .respond_with(jira_error(404, &["Issue does not exist"], json!({})))
        .mount(&server)
        .await;
    for (body, times) in [
        (json!({"accountId": MIA}), 1),
        (json!({"accountId": null}), 1),
        (json!({"accountId": "-1"}), 1),
    ] {
        Mock::given(method("PUT"))
            .and(path(format!("{V3}/issue/ED-42/assignee")))
            .and(body_json(body))
            .respond_with(ResponseTemplate::new(204))
            .expect(times)
            .mount(&server)
            .await;
    }
    Mock::given(method("PUT"))
        .and(path(format!("{V3}/issue/ED-43/assignee")))
        .respond_with(jira_error(
            400,
            &[],
            json!({"assignee": "User '70121:9f3b2c1d' cannot be assigned issues."}),
        ))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/user/search")))
        .and(query_param("query", "mia"))
        .and(query_param("maxResults", "3"))
        .respond_with(ok("users_search.json"))
        .mount(&server)
        .await;
    let jira = cloud(&server);

    let watching = ok_call(&jira, "list_watchers", json!({"key": "ED-42"})).await;
    assert_eq!(
        watching,
        json!({
            "key": "ED-42", "watch_count": 3, "is_watching": true,
            "watchers": [
                {"id": MIA, "name": "Mia Krystof"},
                {"id": "712020:0e9d1c36", "name": "Sam Ortiz"},
            ],
        })
    );
    let added = ok_call(&jira, "add_watcher", json!({"key": "ED-42", "user": MIA})).await;
    assert_eq!(added, json!({"key": "ED-42", "user": MIA}));
    let (kind, message) =
        failing_call(&jira, "add_watcher", json!({"key": "ED-999", "user": MIA})).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no issue ED-999 or user 5b10ac8d82e05b22cc7d4ef5"), "{message}");

    let assigned = ok_call(&jira, "assign_issue", json!({"key": "ED-42", "assignee": MIA})).await;
    assert_eq!(assigned, json!({"key": "ED-42", "assignee": MIA}));
    let none = ok_call(&jira, "assign_issue", json!({"key": "ED-42", "assignee": "none"})).await;
    assert_eq!(none["assignee"], Value::Null);
    let default =
        ok_call(&jira, "assign_issue", json!({"key": "ED-42", "assignee": "default"})).await;
    assert_eq!(default["assignee"], "default");
    let (kind, message) =
        failing_call(&jira, "assign_issue", json!({"key": "ED-43", "assignee": "70121:9f3b2c1d"}))
            .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("cannot be assigned issues"), "{message}");
    assert!(message.contains("assigning ED-43 to 70121:9f3b2c1d"), "{message}");
    let (kind, message) =
        failing_call(&jira, "assign_issue", json!({"key": "ED-42", "assignee": " "})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("`none` to unassign"), "{message}");

    let users = ok_call(&jira, "search_users", json!({"query": "mia", "max_results": 3})).await;
    assert_eq!(
        users["users"],
        json!([
            {"id": MIA, "name": "Mia Krystof"},
            {"id": "70121:9f3b2c1d", "name": "Mia Lund", "email": "mia.lund@acme.com",
             "inactive": true},
        ]),
        "the automation app is left out"
    );
    assert_eq!(users["next_start_at"], 3, "a full page may have more");
}

#[tokio::test(flavor = "multi_thread")]
async fn children_projects_components_and_create_metadata_on_cloud() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/search/jql")))
        .and(query_param("jql", "parent = ED-30 ORDER BY key ASC"))
        .respond_with(ok("search_children.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/search/jql")))
        .and(query_param("jql", "parent = ED-999 ORDER BY key ASC"))
        .respond_with(jira_error(
            400,
            &["An issue with key 'ED-999' does not exist for field 'parent'."],
            json!({}),
        ))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/project/search")))
        .and(query_param("maxResults", "2"))
        .and(query_param("orderBy", "key"))
        .respond_with(ok("projects_search.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/project/ED")))
        .respond_with(ok("project.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/project/NOPE")))
        .respond_with(jira_error(404, &["No project could be found with key 'NOPE'."], json!({})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/project/ED/components")))
        .respond_with(ok("components.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/createmeta/ED/issuetypes")))
        .respond_with(ok("createmeta_issuetypes.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V3}/issue/createmeta/ED/issuetypes/10004")))
        .respond_with(ok("createmeta_fields.json"))
        .expect(1)
        .mount(&server)
        .await;
    let jira = cloud(&server);

    let children = ok_call(&jira, "list_child_issues", json!({"key": "ED-30"})).await;
    assert_eq!(children["key"], "ED-30");
    assert_eq!(children["is_last"], true);
    let keys: Vec<&str> =
        children["issues"].as_array().unwrap().iter().map(|i| i["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["ED-31", "ED-42", "ED-45"]);
    assert_eq!(children["issues"][2]["issue_type"], "Task");
    let (kind, message) = failing_call(&jira, "list_child_issues", json!({"key": "ED-999"})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("'ED-999' does not exist"), "{message}");

    let projects = ok_call(&jira, "list_projects", json!({"max_results": 2})).await;
    assert_eq!(projects["total"], 3);
    assert_eq!(projects["next_start_at"], 2);
    assert_eq!(
        projects["projects"],
        json!([
            {"key": "DOCS", "id": "10010", "name": "Documentation", "type": "business"},
            {"key": "ED", "id": "10002", "name": "Enterprise Directory", "type": "software",
             "category": "Identity"},
        ])
    );

    let project = ok_call(&jira, "get_project", json!({"project": "ED"})).await;
    assert_eq!(project["lead"], "Sam Ortiz");
    assert_eq!(project["components"], json!(["Auth service", "Directory sync"]));
    assert_eq!(
        project["issue_types"][3],
        json!({"id": "10003", "name": "Subtask", "subtask": true})
    );
    assert_eq!(project["url"], format!("{}/browse/ED", server.uri()));
    let (kind, message) = failing_call(&jira, "get_project", json!({"project": "NOPE"})).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no project NOPE in jira"), "{message}");

    let components = ok_call(&jira, "list_project_components", json!({"project": "ED"})).await;
    assert_eq!(
        components["components"][0],
        json!({"id": "10050", "name": "Auth service",
               "description": "The /login endpoints and the session store",
               "lead": "Sam Ortiz", "default_assignee": "Sam Ortiz"})
    );
    assert_eq!(components["components"][1], json!({"id": "10051", "name": "Directory sync"}));

    let types = ok_call(&jira, "get_create_metadata", json!({"project": "ED"})).await;
    assert_eq!(types["issue_type"], Value::Null);
    assert_eq!(types["issue_types"][1], json!({"id": "10004", "name": "Bug"}));
    assert!(types.get("fields").is_none());

    let bug =
        ok_call(&jira, "get_create_metadata", json!({"project": "ED", "issue_type": "bug"})).await;
    assert_eq!(bug["issue_type"], "Bug");
    let fields = bug["fields"].as_array().unwrap();
    let names: Vec<&str> = fields.iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["Reporter", "Summary", "Team", "Labels", "Priority", "Affected environments"],
        "required first; project and issue type are create_issue's own"
    );
    assert_eq!(
        fields[2],
        json!({"id": "customfield_10042", "name": "Team", "required": true, "type": "option",
               "allowed_values": ["Identity", "Platform"]})
    );
    assert_eq!(fields[4]["allowed_values"], json!(["Highest", "High", "Medium"]));
    assert_eq!(fields[4]["has_default"], true);
    assert_eq!(fields[5]["type"], "array of option");
    assert_eq!(fields[5]["allowed_values"].as_array().unwrap().len(), 25);
    assert_eq!(fields[5]["more_values"], 5);

    let (kind, message) =
        failing_call(&jira, "get_create_metadata", json!({"project": "ED", "issue_type": "Story"}))
            .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("available: Task, Bug, Subtask"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn issues_move_into_a_sprint_and_a_closed_sprint_refuses_them() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/rest/agile/1.0/sprint/37/issue"))
        .and(header("authorization", BASIC))
        .and(body_json(json!({"issues": ["ED-42", "ED-45"]})))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/rest/agile/1.0/sprint/36/issue"))
        .respond_with(jira_error(
            400,
            &["Cannot move issues to a closed sprint: ED Sprint 11."],
            json!({}),
        ))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/rest/agile/1.0/sprint/999/issue"))
        .respond_with(jira_error(
            404,
            &["Sprint does not exist or you do not have permission to view it."],
            json!({}),
        ))
        .mount(&server)
        .await;
    let jira = cloud(&server);

    let moved = ok_call(
        &jira,
        "move_issues_to_sprint",
        json!({"sprint_id": 37, "issues": ["ed-42", "ED-45"]}),
    )
    .await;
    assert_eq!(moved, json!({"sprint_id": 37, "issues": ["ED-42", "ED-45"]}));

    let (kind, message) =
        failing_call(&jira, "move_issues_to_sprint", json!({"sprint_id": 36, "issues": ["ED-42"]}))
            .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("Cannot move issues to a closed sprint"), "{message}");

    let (kind, message) = failing_call(
        &jira,
        "move_issues_to_sprint",
        json!({"sprint_id": 999, "issues": ["ED-42"]}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no sprint 999 in jira"), "{message}");

    let too_many: Vec<String> = (1..=51).map(|n| format!("ED-{n}")).collect();
    let before = server.received_requests().await.unwrap().len();
    let (kind, message) =
        failing_call(&jira, "move_issues_to_sprint", json!({"sprint_id": 37, "issues": too_many}))
            .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("1 to 50 issues"), "{message}");
    assert_eq!(server.received_requests().await.unwrap().len(), before, "nothing was sent");
}

/// Data Center has no changelog endpoint and no paged project search, names users by username,
/// pages create metadata as `values`, and links stories to epics through the Epic Link field
/// (absent without Jira Software).
#[tokio::test(flavor = "multi_thread")]
async fn data_center_pages_change_logs_and_projects_here_and_names_users_by_username() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{V2}/issue/OPS-118")))
        .and(query_param("expand", "changelog"))
        .and(header("authorization", bearer().as_str()))
        .respond_with(ok("issue_changelog_server.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V2}/project")))
        .respond_with(ok("projects_server.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V2}/user/search")))
        .and(query_param("username", "jdoe"))
        .respond_with(ok("users_search_server.json"))
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{V2}/issue/OPS-118/assignee")))
        .and(body_json(json!({"name": "jdoe"})))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V2}/search")))
        .and(query_param("jql", "parent = OPS-100 OR \"Epic Link\" = OPS-100 ORDER BY key ASC"))
        .respond_with(jira_error(
            400,
            &["Field 'Epic Link' does not exist or you do not have permission to view it."],
            json!({}),
        ))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V2}/search")))
        .and(query_param("jql", "parent = OPS-100 ORDER BY key ASC"))
        .respond_with(ok("search_server.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V2}/issue/createmeta/OPS/issuetypes")))
        .respond_with(ok("createmeta_issuetypes_server.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{V2}/issue/createmeta/OPS/issuetypes/1")))
        .respond_with(ok("createmeta_fields_server.json"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{V2}/issue/OPS-118/watchers")))
        .and(body_json(json!("jdoe")))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    let jira = data_center(&server);

    let log = ok_call(
        &jira,
        "list_changelog",
        json!({"key": "OPS-118", "start_at": 1, "max_results": 1}),
    )
    .await;
    assert_eq!(log["total"], 3);
    assert_eq!(log["next_start_at"], 2);
    assert_eq!(
        log["history"],
        json!([{
            "id": "40117", "author": "Jane Doe", "created": "2024-05-02T09:30:00.000+0000",
            "changes": [
                {"field": "assignee", "from": null, "to": "Jane Doe"},
                {"field": "status", "from": "Open", "to": "In Progress"},
            ],
        }])
    );

    let first = ok_call(&jira, "list_projects", json!({"max_results": 2})).await;
    assert_eq!(first["total"], 3);
    assert_eq!(first["next_start_at"], 2);
    let keys: Vec<&str> =
        first["projects"].as_array().unwrap().iter().map(|p| p["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["HR", "NET"], "by key");
    let found = ok_call(&jira, "list_projects", json!({"query": "network"})).await;
    assert_eq!(
        found["projects"],
        json!([{"key": "NET", "id": "10300", "name": "Network operations", "type": "software"}])
    );
    assert_eq!(found["next_start_at"], Value::Null);

    let users = ok_call(&jira, "search_users", json!({"query": "jdoe"})).await;
    assert_eq!(
        users["users"],
        json!([{"id": "jdoe", "name": "Jane Doe", "email": "jdoe@example.com"}])
    );
    assert_eq!(users["next_start_at"], Value::Null);
    let assigned =
        ok_call(&jira, "assign_issue", json!({"key": "OPS-118", "assignee": "jdoe"})).await;
    assert_eq!(assigned, json!({"key": "OPS-118", "assignee": "jdoe"}));

    let watched = ok_call(&jira, "add_watcher", json!({"key": "OPS-118", "user": "jdoe"})).await;
    assert_eq!(watched, json!({"key": "OPS-118", "user": "jdoe"}));

    let bug =
        ok_call(&jira, "get_create_metadata", json!({"project": "OPS", "issue_type": "1"})).await;
    assert_eq!(bug["issue_type"], "Bug");
    assert_eq!(
        bug["fields"],
        json!([
            {"id": "summary", "name": "Summary", "required": true, "type": "string"},
            {"id": "customfield_10100", "name": "Incident date", "required": true,
             "type": "date"},
            {"id": "components", "name": "Component/s", "required": false,
             "type": "array of component", "allowed_values": ["Backups", "Monitoring"]},
        ]),
        "Data Center's `values` pages read like Cloud's"
    );

    let children = ok_call(&jira, "list_child_issues", json!({"key": "OPS-100"})).await;
    assert_eq!(children["jql"], "parent = OPS-100 ORDER BY key ASC");
    assert_eq!(children["total"], 3);
    assert_eq!(children["next_start_at"], 2);
}
