//! The provider against a loopback ClickUp: wiremock serves recorded responses (from
//! `tests/data/clickup/`) with ClickUp's real headers and error bodies, and each test checks what
//! a user of the tool would notice.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use quiver_plugin_sdk::prelude::*;
use quiver_provider_clickup::{AuthScheme, ClickUp, ClickUpConfig};
use wiremock::matchers::{body_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TOKEN: &str = "pk_2770032_S3CR3TT0KENVALUE1234567890ABCDEF";

fn fixture(name: &str) -> String {
    let path = format!("{}/../../tests/data/clickup/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A 200 with a recorded JSON body and the rate-limit headers ClickUp sends with every answer.
fn ok(name: &str) -> ResponseTemplate {
    ok_body(fixture(name))
}

fn ok_body(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .set_body_raw(body, "application/json; charset=utf-8")
        .insert_header("x-ratelimit-limit", "100")
        .insert_header("x-ratelimit-remaining", "97")
        .insert_header("x-ratelimit-reset", (now() + 60).to_string().as_str())
}

/// ClickUp's error body: `{"err": "...", "ECODE": "..."}`.
fn clickup_error(status: u16, err: &str, ecode: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({ "err": err, "ECODE": ecode }))
}

fn config(server: &MockServer) -> ClickUpConfig {
    ClickUpConfig { base_url: Some(server.uri()), token: Some(TOKEN.into()), ..Default::default() }
}

async fn call(clickup: &ClickUp, tool: &str, args: Value) -> ToolResult {
    clickup.call(tool, args, ToolContext::default()).await
}

/// The structured result of a call that must succeed.
async fn ok_call(clickup: &ClickUp, tool: &str, args: Value) -> Value {
    let result = call(clickup, tool, args).await;
    assert!(!result.is_error, "{tool} failed: {}", result.text_content());
    result.structured.expect("a structured result")
}

/// The kind and message of a call that must fail.
async fn failing_call(clickup: &ClickUp, tool: &str, args: Value) -> (ToolErrorKind, String) {
    let result = call(clickup, tool, args).await;
    assert!(result.is_error, "{tool} succeeded: {}", result.text_content());
    let message = result.text_content();
    assert!(!message.contains(TOKEN), "the token leaked into: {message}");
    (result.error_kind.expect("an error kind"), message)
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn assert_compact(result: &Value, fixture_name: &str) {
    let text = result.to_string();
    for noise in ["profilePicture", "color", "@acme.example", "orderindex", "permission_level"] {
        assert!(!text.contains(noise), "`{noise}` survived in {text}");
    }
    assert!(text.len() * 3 < fixture(fixture_name).len(), "the result is not compact: {text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hierarchy_from_workspaces_down_to_lists() {
    let server = MockServer::start().await;
    for (route, file) in [
        ("/team", "teams.json"),
        ("/team/9012345678/space", "spaces.json"),
        ("/space/790/folder", "folders.json"),
        ("/space/790/list", "folderless_lists.json"),
        ("/folder/457/list", "folder_lists.json"),
    ] {
        Mock::given(method("GET"))
            .and(path(route))
            // A personal token goes raw into the header, without `Bearer`.
            .and(header("authorization", TOKEN))
            .respond_with(ok(file))
            .mount(&server)
            .await;
    }
    let clickup = ClickUp::new(config(&server)).unwrap();

    let workspaces = ok_call(&clickup, "list_workspaces", json!({})).await;
    let team = &workspaces["workspaces"][0];
    assert_eq!(team["team_id"], "9012345678");
    assert_eq!(team["name"], "Acme Engineering");
    assert_eq!(team["member_count"], 3);
    assert_eq!(team["members"][1], json!({"user_id": 2770032, "username": "Ada Lovelace"}));
    assert_compact(&workspaces, "teams.json");

    // Numbers are accepted for ids, as agents often send them.
    let spaces = ok_call(&clickup, "list_spaces", json!({"team_id": 9012345678u64})).await;
    assert_eq!(spaces["team_id"], "9012345678");
    let engineering = &spaces["spaces"][0];
    assert_eq!(engineering["space_id"], "790");
    assert_eq!(engineering["statuses"], json!(["to do", "in progress", "in review", "complete"]));
    assert!(engineering["features"].as_array().unwrap().contains(&json!("time_tracking")));
    assert_eq!(spaces["spaces"][1]["private"], true);
    assert_eq!(spaces["spaces"][2]["archived"], true);
    assert_compact(&spaces, "spaces.json");

    let folders = ok_call(&clickup, "list_folders", json!({"space_id": "790"})).await;
    assert_eq!(
        folders["folders"][0],
        json!({
            "folder_id": "457", "name": "Sprints", "task_count": 15, "list_count": 2,
            "lists": ["Sprint 12", "Sprint 13"],
        })
    );
    assert_eq!(folders["folders"][1]["list_count"], 0);

    let lists = ok_call(&clickup, "list_lists", json!({"space_id": "790"})).await;
    let names: Vec<_> = lists["lists"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["list_id"].as_str().unwrap(), l["folder"].as_str(), l["task_count"].as_u64()))
        .collect();
    assert_eq!(
        names,
        [
            ("901", None, Some(7)),
            ("902", None, Some(0)),
            ("124", Some("Sprints"), Some(15)),
            ("125", Some("Sprints"), Some(0)),
        ],
        "folderless lists first (ClickUp's hidden placeholder folder is not named), then the \
         folders' lists"
    );
    assert_eq!(lists["lists"][2]["due_date"], "2024-05-20T00:00:00Z");
    assert_eq!(lists["lists"][2]["statuses"], json!(["open", "blocked", "done"]));

    let in_folder = ok_call(&clickup, "list_lists", json!({"folder_id": "457"})).await;
    assert_eq!(in_folder["folder_id"], "457");
    assert_eq!(in_folder["lists"][0]["list_id"], "124");
    assert_eq!(in_folder["lists"][0]["folder"], "Sprints");
}

#[tokio::test(flavor = "multi_thread")]
async fn list_tasks_filters_and_pages_through_clickups_pages_of_100() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/list/901/task"))
        .and(query_param("page", "0"))
        .and(query_param("statuses[]", "in progress"))
        .and(query_param("assignees[]", "2770032"))
        .and(query_param("tags[]", "auth"))
        .and(query_param("include_closed", "true"))
        .and(query_param("due_date_lt", "1717200000000"))
        .and(query_param("date_updated_gt", "1714521600000"))
        .and(query_param("order_by", "updated"))
        .and(query_param("archived", "false"))
        .respond_with(ok("list_tasks.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/list/901/task"))
        .and(query_param("page", "1"))
        .respond_with(ok("list_tasks_last_page.json"))
        .expect(1)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let page = ok_call(
        &clickup,
        "list_tasks",
        json!({
            "list_id": "901", "statuses": ["in progress"], "assignees": [2770032],
            "tags": ["auth"], "include_closed": true, "due_before": "2024-06-01",
            "updated_after": "2024-05-01T00:00:00Z", "order_by": "updated",
        }),
    )
    .await;
    assert_eq!(page["list_id"], "901");
    assert_eq!((page["page"].as_u64(), page["next_page"].as_u64()), (Some(0), Some(1)));
    let tasks = page["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 4);
    assert_eq!(
        tasks[0],
        json!({
            "task_id": "86cv5pkvr", "name": "Fix login redirect loop", "status": "in progress",
            "assignees": ["Ada Lovelace"], "priority": "urgent",
            "due_date": "2024-05-20T00:00:00Z", "tags": ["bug", "auth"],
            "date_updated": "2024-05-14T10:40:00Z",
        })
    );
    assert_eq!(tasks[1]["closed"], true, "a closed status is flagged");
    assert_eq!(tasks[3]["parent"], "86cv5pkvr", "a subtask names its parent");
    assert_eq!(tasks[3]["assignees"], json!(["Ada Lovelace", "John Doe"]));
    assert_compact(&page, "list_tasks.json");

    let last = ok_call(&clickup, "list_tasks", json!({"list_id": "901", "page": 1})).await;
    assert_eq!(last["next_page"], Value::Null, "ClickUp's last_page ends the listing");
    assert_eq!(last["tasks"][0]["priority"], "normal", "a bare priority number is named");
}

#[tokio::test(flavor = "multi_thread")]
async fn search_tasks_spans_the_workspace_and_names_each_hits_list() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/team/9012345678/task"))
        .and(query_param("space_ids[]", "790"))
        .and(query_param("project_ids[]", "457"))
        .and(query_param("assignees[]", "2770032"))
        .and(query_param("page", "0"))
        .respond_with(ok("team_tasks.json"))
        .expect(1)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let found = ok_call(
        &clickup,
        "search_tasks",
        json!({
            "team_id": "9012345678", "space_ids": ["790"], "folder_ids": ["457"],
            "assignees": [2770032],
        }),
    )
    .await;
    assert_eq!(found["team_id"], "9012345678");
    assert_eq!(found["next_page"], Value::Null);
    let hit = &found["tasks"][1];
    assert_eq!(hit["task_id"], "86cv5pm01");
    assert_eq!(hit["custom_id"], "ENG-118");
    assert_eq!(hit["status"], "blocked");
    assert_eq!(hit["priority"], "high", "the filtered endpoint's numeric priority is named");
    assert_eq!(
        (hit["list_id"].as_str(), hit["list_name"].as_str()),
        (Some("124"), Some("Sprint 12"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn get_task_reads_custom_fields_by_name_with_subtasks_and_iso_dates() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/task/86cv5pkvr"))
        .and(query_param("include_subtasks", "true"))
        .and(query_param("include_markdown_description", "true"))
        .respond_with(ok("task.json"))
        .expect(1)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let task = ok_call(&clickup, "get_task", json!({"task_id": "86cv5pkvr"})).await;

    assert_eq!(task["task_id"], "86cv5pkvr");
    assert_eq!(
        (task["status"].as_str(), task["status_type"].as_str()),
        (Some("in progress"), Some("custom"))
    );
    assert_eq!(
        (task["team_id"].as_str(), task["list_id"].as_str()),
        (Some("9012345678"), Some("901"))
    );
    assert!(task.get("folder").is_none(), "ClickUp's hidden placeholder folder is not a folder");
    assert_eq!(task["creator"], "John Doe");
    assert_eq!(task["date_created"], "2024-05-02T14:56:52Z");
    assert_eq!(task["start_date"], "2024-05-13T00:00:00Z");
    assert_eq!(task["time_estimate"], "2 h");
    assert_eq!(task["time_spent"], "1 h 12 min");
    assert_eq!(task["points"], 3.0);
    assert!(task["description"].as_str().unwrap().starts_with("Users who sign in with **SSO**"));
    assert_eq!(
        task["custom_fields"],
        json!({
            "Customer": "ACME Corp",
            "Impact": "High impact",
            "Components": ["backend"],
            "Reviewer": ["Grace Hopper"],
            "Release date": "2024-05-23T00:00:00Z",
            "Story points": 5.0,
            "Customer facing": true,
        }),
        "empty fields are left out; options, people and dates are readable"
    );
    assert_eq!(
        task["checklists"],
        json!([{"name": "Release checklist", "resolved": 2, "total": 3}])
    );
    assert_eq!(
        task["subtasks"],
        json!([
            {"task_id": "86cv5pkw7", "name": "Add SSO error page", "status": "in review",
             "assignees": ["Ada Lovelace", "John Doe"]},
            {"task_id": "86cv5pkw9", "name": "Regression test for redirect", "status": "complete",
             "closed": true, "assignees": ["Grace Hopper"]},
        ])
    );
    assert_eq!(task["dependencies"], 1);
    assert_eq!(task["url"], "https://app.clickup.com/t/86cv5pkvr");
    let text = task.to_string();
    for noise in ["profilePicture", "clickup-attachments", "type_config", "#f50000", "watchers"] {
        assert!(!text.contains(noise), "`{noise}` survived in {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn custom_task_ids_are_resolved_in_their_workspace() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/task/ENG-118"))
        .and(query_param("custom_task_ids", "true"))
        .and(query_param("team_id", "9012345678"))
        .respond_with(ok("task.json"))
        .expect(1)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let task =
        ok_call(&clickup, "get_task", json!({"task_id": "ENG-118", "team_id": "9012345678"})).await;
    assert_eq!(task["task_id"], "86cv5pkvr", "the result names the task's own id");

    let (kind, message) = failing_call(&clickup, "get_task", json!({"task_id": "ENG-118"})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("give `team_id`"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn comments_come_newest_first_and_page_by_start_and_start_id() {
    let server = MockServer::start().await;
    // A full page of 25 (ClickUp's page size), built from the recorded comment.
    let recorded: Value = serde_json::from_str(&fixture("comments.json")).unwrap();
    let template = recorded["comments"][0].clone();
    let full: Vec<Value> = (0..25u64)
        .map(|i| {
            let mut c = template.clone();
            c["id"] = json!(format!("9016005838{:04}", 4921 - i));
            c["date"] = json!((1_715_683_200_000u64 - i * 3_600_000).to_string());
            c
        })
        .collect();
    Mock::given(method("GET"))
        .and(path("/task/86cv5pkvr/comment"))
        .and(query_param("start", "1715596800000"))
        .and(query_param("start_id", "90160058384897"))
        .respond_with(ok("comments.json"))
        .expect(2)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/task/86cv5pkvr/comment"))
        .respond_with(ok_body(json!({ "comments": full }).to_string()))
        .expect(1)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();

    let first = ok_call(&clickup, "list_task_comments", json!({"task_id": "86cv5pkvr"})).await;
    assert_eq!(first["comments"].as_array().unwrap().len(), 25);
    assert_eq!(first["comments"][0]["author"], "Ada Lovelace");
    assert_eq!(first["comments"][0]["date"], "2024-05-14T10:40:00Z");
    assert_eq!(first["comments"][0]["replies"], 2);
    let next = first["next_page"].clone();
    assert_eq!(next, json!({"start": 1715596800000u64, "start_id": "90160058384897"}));

    let mut args = next.as_object().unwrap().clone();
    args.insert("task_id".into(), json!("86cv5pkvr"));
    let read = call(&clickup, "list_task_comments", Value::Object(args.clone())).await;
    // Each comment is labelled with its author; ClickUp does not say whether they may edit.
    let label = &read.author_labels()[1];
    assert_eq!((label.pointer.as_str(), label.can_write), ("/comments/1/text", None));
    assert_eq!(label.author, read.structured.as_ref().unwrap()["comments"][1]["author"]);
    let older = ok_call(&clickup, "list_task_comments", Value::Object(args)).await;
    assert_eq!(older["next_page"], Value::Null, "fewer than 25: the oldest page");
    let assigned = &older["comments"][1];
    assert_eq!(assigned["assignee"], "Grace Hopper");
    assert_eq!(assigned["resolved"], true);
    assert_eq!(assigned["text"], "Can someone check whether this affects the mobile app too?");
}

#[tokio::test(flavor = "multi_thread")]
async fn time_entries_over_a_range_with_totals_per_person() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/team/9012345678/time_entries"))
        .and(query_param("start_date", "1715558400000"))
        .and(query_param("end_date", "1716163200000"))
        .and(query_param("assignee", "2770032,301828"))
        .and(query_param("space_id", "790"))
        .and(query_param("include_location_names", "true"))
        .respond_with(ok("time_entries.json"))
        .expect(1)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let entries = ok_call(
        &clickup,
        "list_time_entries",
        json!({
            "team_id": "9012345678", "start_date": "2024-05-13", "end_date": "2024-05-20",
            "assignees": [2770032, 301828], "space_id": "790",
        }),
    )
    .await;
    assert_eq!(entries["start_date"], "2024-05-13T00:00:00Z");
    assert_eq!(entries["entries_total"], 3);
    assert_eq!(entries["total_duration"], "1 h 42 min");
    assert_eq!(entries["by_user"], json!({"Ada Lovelace": "1 h 12 min", "Grace Hopper": "30 min"}));
    let first = &entries["entries"][0];
    assert_eq!(first["task_id"], "86cv5pkvr");
    assert_eq!(first["task_name"], "Fix login redirect loop");
    assert_eq!(first["list_name"], "Backlog");
    assert_eq!(first["start"], "2024-05-14T08:00:00Z");
    assert_eq!(first["duration"], "1 h 12 min");
    assert_eq!(first["description"], "Traced the cookie domain");
    assert_eq!(first["billable"], true);
    assert_eq!(entries["entries"][1]["custom_id"], "ENG-118");
    assert_eq!(entries["entries"][1]["start"], "2024-05-14T10:00:00Z", "numeric times read too");
    assert_eq!(entries["entries"][2]["duration"], "running");
    assert!(entries["entries"][2].get("end").is_none());
    assert_compact(&entries, "time_entries.json");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_task_is_named() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/task/86cvzzzzz"))
        .respond_with(clickup_error(404, "Task not found, deleted", "ITEM_013"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/task/86cvyyyyy/comment"))
        .respond_with(clickup_error(401, "Team not authorized", "OAUTH_027"))
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let (kind, message) = failing_call(&clickup, "get_task", json!({"task_id": "86cvzzzzz"})).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert_eq!(message, "no task 86cvzzzzz in ClickUp (or the token's user cannot see it)");

    let (kind, message) =
        failing_call(&clickup, "list_task_comments", json!({"task_id": "86cvyyyyy"})).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.contains("(401 Team not authorized, OAUTH_027)"), "{message}");
    assert!(message.contains("does not exist, or its workspace was not authorized"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_token_names_the_variable_to_fix_and_never_the_token() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/team"))
        // ClickUp does not echo tokens, but a proxy might: the message must still hide it.
        .respond_with(clickup_error(401, &format!("Token invalid: {TOKEN}"), "OAUTH_025"))
        .mount(&server)
        .await;
    let clickup = ClickUp::new(ClickUpConfig {
        token_env: Some("WORK_CLICKUP_TOKEN".into()),
        ..config(&server)
    })
    .unwrap();
    let (kind, message) = failing_call(&clickup, "list_workspaces", json!({})).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(
        message.starts_with("clickup rejected the token (401 Token invalid: ***, OAUTH_025)"),
        "{message}"
    );
    assert!(
        message.contains(
            "set WORK_CLICKUP_TOKEN (the variable named by [providers.clickup] token_env)"
        ),
        "{message}"
    );
    assert!(message.contains("auth = \"oauth\""), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_token_no_request_is_sent_and_the_variable_is_named() {
    let server = MockServer::start().await;
    let clickup = ClickUp::new(ClickUpConfig { token: None, ..config(&server) }).unwrap();
    let (kind, message) = failing_call(&clickup, "get_task", json!({"task_id": "86cv5pkvr"})).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.contains("none is configured"), "{message}");
    assert!(message.contains("set CLICKUP_TOKEN"), "{message}");
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn oauth_tokens_are_sent_as_bearer() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/team"))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(ok("teams.json"))
        .expect(1)
        .mount(&server)
        .await;
    let clickup =
        ClickUp::new(ClickUpConfig { auth: Some(AuthScheme::Oauth), ..config(&server) }).unwrap();
    let workspaces = ok_call(&clickup, "list_workspaces", json!({})).await;
    assert_eq!(workspaces["workspaces"][0]["team_id"], "9012345678");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_short_rate_limit_is_waited_out() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/task/86cv5pkvr"))
        .respond_with(
            clickup_error(429, "Rate limit reached", "APP_002")
                .insert_header("retry-after", "1")
                .insert_header("x-ratelimit-limit", "100")
                .insert_header("x-ratelimit-remaining", "0"),
        )
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/task/86cv5pkvr"))
        .respond_with(ok("task.json"))
        .expect(1)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let started = Instant::now();
    let task = ok_call(&clickup, "get_task", json!({"task_id": "86cv5pkvr"})).await;
    assert_eq!(task["name"], "Fix login redirect loop");
    assert!(started.elapsed() >= Duration::from_secs(1), "retried before retry-after");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reset_header_is_honoured_and_a_persistent_limit_reported_after_two_retries() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/team"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("x-ratelimit-limit", "100")
                .insert_header("x-ratelimit-remaining", "0")
                // In the past: wait the minimum second, as the SDK rules say.
                .insert_header("x-ratelimit-reset", (now() - 5).to_string().as_str()),
        )
        .expect(3)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let started = Instant::now();
    let (kind, message) = failing_call(&clickup, "list_workspaces", json!({})).await;
    assert!(started.elapsed() >= Duration::from_secs(2), "waited {:?}", started.elapsed());
    assert_eq!(kind, ToolErrorKind::RateLimited);
    assert!(message.contains("100 requests a minute for this token"), "{message}");
    assert!(message.contains("even after waiting 2 s"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_rate_limit_fails_fast_saying_when_it_resets() {
    let server = MockServer::start().await;
    let reset = now() + 55;
    Mock::given(method("GET"))
        .and(path("/list/901/task"))
        .respond_with(
            clickup_error(429, "Rate limit reached", "APP_002")
                .insert_header("x-ratelimit-limit", "100")
                .insert_header("x-ratelimit-remaining", "0")
                .insert_header("x-ratelimit-reset", reset.to_string().as_str()),
        )
        .expect(1)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let started = Instant::now();
    let (kind, message) = failing_call(&clickup, "list_tasks", json!({"list_id": "901"})).await;
    assert!(started.elapsed() < Duration::from_secs(3), "waited {:?}", started.elapsed());
    assert_eq!(kind, ToolErrorKind::RateLimited);
    assert!(message.contains("it resets at 20"), "{message}");
    assert!(message.contains("max_retry_wait_s = 10 s"), "{message}");
    assert!(message.contains("retry later"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_past_the_calls_deadline_is_not_waited_for() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/team"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "5"))
        .expect(1)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let ctx = ToolContext { timeout_ms: Some(2000), ..Default::default() };
    let started = Instant::now();
    let result = clickup.call("list_workspaces", json!({}), ctx).await;
    assert!(started.elapsed() < Duration::from_secs(2), "waited {:?}", started.elapsed());
    assert_eq!(result.error_kind, Some(ToolErrorKind::RateLimited));
    let message = result.text_content();
    assert!(message.contains("retry in 5 s, past this call's deadline"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_and_failed_answers_are_upstream_errors() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/task/86cv5pkvr"))
        .respond_with(ok_body("{\"id\": \"86cv5pkvr\", \"name\": ".into()))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/list/901/task"))
        .respond_with(ok_body("{\"tasks\": {\"id\": 5}".into()))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/team"))
        .respond_with(
            ResponseTemplate::new(502).set_body_raw("<html>Bad Gateway</html>", "text/html"),
        )
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let (kind, message) = failing_call(&clickup, "get_task", json!({"task_id": "86cv5pkvr"})).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(
        message.starts_with("clickup returned an unreadable body for task 86cv5pkvr"),
        "{message}"
    );
    let (kind, message) = failing_call(&clickup, "list_tasks", json!({"list_id": "901"})).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("unreadable body for the tasks of list 901"), "{message}");
    let (kind, message) = failing_call(&clickup, "list_workspaces", json!({})).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("clickup failed with 502 Bad Gateway"), "{message}");
}

/// How many requests with `verb` reached `to`.
async fn requests(server: &MockServer, verb: &str, to: &str) -> usize {
    let received = server.received_requests().await.unwrap();
    received.iter().filter(|r| r.method.as_str() == verb && r.url.path() == to).count()
}

/// A read that meets a passing fault (a 503) is sent again after a short jittered pause and
/// succeeds; the user never sees the fault.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_answered_503_once_is_sent_again_and_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/task/86cv5pkvr"))
        .respond_with(
            ResponseTemplate::new(503)
                .set_body_raw("<html>Service Unavailable</html>", "text/html"),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/task/86cv5pkvr"))
        .respond_with(ok("task.json"))
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let task = ok_call(&clickup, "get_task", json!({"task_id": "86cv5pkvr"})).await;
    assert_eq!(task["task_id"], "86cv5pkvr");
    assert_eq!(requests(&server, "GET", "/task/86cv5pkvr").await, 2, "one retry");
}

/// A write is sent once, whatever comes back: it may have landed before the fault.
#[tokio::test(flavor = "multi_thread")]
async fn a_write_answered_503_is_not_sent_again() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/list/901/task"))
        .respond_with(
            ResponseTemplate::new(503)
                .set_body_raw("<html>Service Unavailable</html>", "text/html"),
        )
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let (kind, message) =
        failing_call(&clickup, "create_task", json!({"list_id": "901", "name": "Flaky test"}))
            .await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("503 Service Unavailable"), "{message}");
    assert_eq!(requests(&server, "POST", "/list/901/task").await, 1);
}

/// A body past `max_response_mb` is refused with the setting named, whether its length is
/// declared (refused unread) or it arrives chunked without one (cut off at the limit).
#[tokio::test(flavor = "multi_thread")]
async fn a_body_past_max_response_mb_is_refused() {
    let server = MockServer::start().await;
    let huge = format!("{{\"id\": \"86cv5pkvr\", \"name\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    Mock::given(method("GET"))
        .and(path("/task/86cv5pkvr"))
        .respond_with(ok_body(huge.clone()))
        .mount(&server)
        .await;
    // An explicit `Transfer-Encoding: chunked` makes wiremock's server send no Content-Length.
    Mock::given(method("GET"))
        .and(path("/task/86cv5pkvs"))
        .respond_with(ok_body(huge).insert_header("transfer-encoding", "chunked"))
        .mount(&server)
        .await;
    let chunked = reqwest::get(format!("{}/task/86cv5pkvs", server.uri())).await.unwrap();
    assert_eq!(chunked.content_length(), None, "the fake must not declare a length");
    let clickup =
        ClickUp::new(ClickUpConfig { max_response_mb: Some(1), ..config(&server) }).unwrap();
    for id in ["86cv5pkvr", "86cv5pkvs"] {
        let route = format!("/task/{id}");
        let before = requests(&server, "GET", &route).await;
        let (kind, message) = failing_call(&clickup, "get_task", json!({"task_id": id})).await;
        assert_eq!(kind, ToolErrorKind::Upstream);
        assert!(message.contains(&format!("for task {id}")), "{message}");
        assert!(message.contains("max_response_mb = 1 MB"), "{message}");
        let sent = requests(&server, "GET", &route).await - before;
        assert_eq!(sent, 1, "{id}: a body too large is not a passing fault, so never retried");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_clickup_times_out_after_timeout_s() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/task/86cv5pkvr"))
        .respond_with(ok("task.json").set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let clickup = ClickUp::new(ClickUpConfig { timeout_s: Some(1), ..config(&server) }).unwrap();
    let started = Instant::now();
    let (kind, message) = failing_call(&clickup, "get_task", json!({"task_id": "86cv5pkvr"})).await;
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(kind, ToolErrorKind::Timeout);
    assert!(message.contains("within 1 s"), "{message}");
    assert!(message.contains("timeout_s"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn create_task_posts_what_the_agent_asked_for() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/list/901/task"))
        .and(header("authorization", TOKEN))
        .and(header("content-type", "application/json"))
        .and(body_json(json!({
            "name": "Flaky test in CI",
            "markdown_content": "The login test fails one run in ten.",
            "notify_all": false,
            "status": "to do",
            "priority": 2,
            "assignees": [2770032],
            "tags": ["ci"],
            "due_date": 1716768000000u64,
            "due_date_time": false,
        })))
        .respond_with(ok("task_created.json"))
        .expect(1)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let created = ok_call(
        &clickup,
        "create_task",
        json!({
            "list_id": "901", "name": "Flaky test in CI",
            "description": "The login test fails one run in ten.", "status": "to do",
            "priority": "high", "assignees": [2770032], "tags": ["ci"], "due_date": "2024-05-27",
        }),
    )
    .await;
    assert_eq!(
        created,
        json!({
            "task_id": "86cv5pkzz",
            "name": "Flaky test in CI",
            "status": "to do",
            "assignees": ["Ada Lovelace"],
            "priority": "high",
            "due_date": "2024-05-27T00:00:00Z",
            "tags": ["ci"],
            "list_id": "901",
            "url": "https://app.clickup.com/t/86cv5pkzz",
        })
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn update_task_sends_only_the_changes() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path("/task/86cv5pkvr"))
        .and(header("authorization", TOKEN))
        .and(body_json(json!({
            "status": "in review",
            "priority": null,
            "due_date": 1716192000000u64,
            "due_date_time": true,
            "assignees": {"add": [301828], "rem": []},
        })))
        .respond_with(ok("task_updated.json"))
        .expect(1)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let updated = ok_call(
        &clickup,
        "update_task",
        json!({
            "task_id": "86cv5pkvr", "status": "in review", "priority": "none",
            "due_date": "2024-05-20T10:00:00+02:00", "add_assignees": [301828],
        }),
    )
    .await;
    assert_eq!(updated["status"], "in review");
    assert_eq!(updated["assignees"], json!(["Ada Lovelace", "Grace Hopper"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn add_task_comment_posts_the_text_and_the_assignee() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/task/86cv5pkvr/comment"))
        .and(header("authorization", TOKEN))
        .and(body_json(json!({
            "comment_text": "Fixed in build 412, please verify.",
            "notify_all": false,
            "assignee": 301828,
        })))
        .respond_with(ok("comment_created.json"))
        .expect(1)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let created = ok_call(
        &clickup,
        "add_task_comment",
        json!({
            "task_id": "86cv5pkvr", "comment_text": "Fixed in build 412, please verify.",
            "assignee": 301828,
        }),
    )
    .await;
    assert_eq!(
        created,
        json!({
            "task_id": "86cv5pkvr",
            "comment_id": "90160058385012",
            "date": "2024-05-15T10:40:00Z",
        })
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_write_quotes_clickup() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path("/task/86cv5pkvr"))
        .respond_with(clickup_error(400, "Status does not exist", "CRTSK_001"))
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let (kind, message) =
        failing_call(&clickup, "update_task", json!({"task_id": "86cv5pkvr", "status": "shipped"}))
            .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert_eq!(
        message,
        "clickup rejected the request for updating task 86cv5pkvr (400 Status does not exist, \
         CRTSK_001)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_are_refused_before_any_request() {
    let server = MockServer::start().await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let cases = [
        ("get_task", json!({"task_id": "../team"}), "must be a ClickUp id"),
        ("list_tasks", json!({"list_id": "901", "status": "open"}), "unknown field `status`"),
        (
            "list_tasks",
            json!({"list_id": "901", "due_before": "soon"}),
            "`due_before`: `soon` is not a date",
        ),
        ("list_lists", json!({}), "give `space_id`"),
        ("update_task", json!({"task_id": "86cv5pkvr"}), "nothing to change"),
        ("create_task", json!({"list_id": "901", "name": "  "}), "`name` is empty"),
        ("add_task_comment", json!({"task_id": "86cv5pkvr", "comment_text": ""}), "is empty"),
        (
            "list_task_comments",
            json!({"task_id": "86cv5pkvr", "start": 1715596800000u64}),
            "give both `start` and `start_id`",
        ),
        (
            "list_time_entries",
            json!({"team_id": "1", "start_date": "2024-05-20", "end_date": "2024-05-13"}),
            "before `start_date`",
        ),
        (
            "list_time_entries",
            json!({"team_id": "1", "task_id": "86cv5pkvr", "list_id": "901"}),
            "give only one",
        ),
    ];
    for (tool, args, expected) in cases {
        let (kind, message) = failing_call(&clickup, tool, args).await;
        assert_eq!(kind, ToolErrorKind::InvalidArguments, "{tool}: {message}");
        assert!(message.contains(expected), "{tool}: {message}");
    }
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[test]
fn configuration_typos_are_errors_and_the_token_is_not_printed() {
    let err =
        serde_json::from_value::<ClickUpConfig>(json!({"base_ur": "https://x"})).err().unwrap();
    assert!(err.to_string().contains("unknown field `base_ur`"), "{err}");
    let err = serde_json::from_value::<ClickUpConfig>(json!({"auth": "bearer"})).err().unwrap();
    assert!(err.to_string().contains("personal"), "{err}");
    let config: ClickUpConfig = serde_json::from_value(json!({
        "token": TOKEN, "token_env": "CU", "auth": "oauth", "max_retry_wait_s": 5,
        "ca_file": "/etc/ssl/proxy-ca.pem", "max_response_mb": 8,
    }))
    .unwrap();
    assert_eq!(config.auth, Some(AuthScheme::Oauth));
    assert_eq!(config.max_response_mb, Some(8));
    assert!(!format!("{config:?}").contains(TOKEN));
}

/// A private CA's PEM file is read at start: a wrong path or a file without a usable certificate
/// is a start-up error naming `ca_file`, a real CA certificate is accepted.
#[test]
fn ca_file_is_checked_at_start() {
    let with_ca =
        |ca_file: &str| ClickUpConfig { ca_file: Some(ca_file.into()), ..Default::default() };
    let ca = format!("{}/../../tests/data/tls/ca.pem", env!("CARGO_MANIFEST_DIR"));
    assert!(ClickUp::new(with_ca(&ca)).is_ok());
    let err = ClickUp::new(with_ca("/nonexistent/ca.pem")).err().unwrap();
    assert!(err.to_string().contains("[providers.clickup] ca_file `/nonexistent/ca.pem`"), "{err}");
    let bad =
        std::env::temp_dir().join(format!("quiver-clickup-bad-ca-{}.pem", std::process::id()));
    std::fs::write(&bad, "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n").unwrap();
    let err = ClickUp::new(with_ca(bad.to_str().unwrap())).err().unwrap();
    std::fs::remove_file(&bad).unwrap();
    assert!(err.to_string().contains("[providers.clickup] ca_file"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_base_urls_are_refused_at_start_and_a_missing_token_is_not() {
    let err = ClickUp::new(ClickUpConfig {
        base_url: Some("api.clickup.com/api/v2".into()),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(err.to_string().contains("https://api.clickup.com/api/v2"), "{err}");
    assert!(ClickUp::new(ClickUpConfig::default()).is_ok(), "no token is not an error");
    let tools = ClickUp::tools();
    assert!(tools.iter().all(|t| t.output_schema.is_some() && t.group.is_some()));
    let list = tools.iter().find(|t| t.name == "list_tasks").unwrap();
    assert!(
        list.input_schema["properties"]["page"]["description"]
            .as_str()
            .unwrap()
            .contains("100 tasks a page"),
        "argument docs reach the schema"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn checklists_are_listed_created_filled_and_ticked_off() {
    let server = MockServer::start().await;
    let checklist = "c1a2b3c4-d5e6-4f70-8a9b-0c1d2e3f4a5b";
    let item = "e1f2a3b4-c5d6-4e7f-8091-a2b3c4d5e6f7";
    Mock::given(method("GET"))
        .and(path("/task/86cv5pkvr"))
        .respond_with(ok("task.json"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/task/86cv5pkvr/checklist"))
        .and(header("authorization", TOKEN))
        .and(body_json(json!({"name": "QA pass"})))
        .respond_with(ok("checklist_created.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("/checklist/{checklist}/checklist_item")))
        .and(body_json(json!({"name": "Test on Safari", "assignee": 301828})))
        .respond_with(ok("checklist_item_added.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("/checklist/{checklist}/checklist_item/{item}")))
        .and(body_json(json!({"resolved": true})))
        .respond_with(ok("checklist_item_updated.json"))
        .expect(1)
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();

    let listed = ok_call(&clickup, "list_checklists", json!({"task_id": "86cv5pkvr"})).await;
    assert_eq!(listed["task_name"], "Fix login redirect loop");
    let release = &listed["checklists"][0];
    assert_eq!(release["checklist_id"], "b955c4dc-b8a8-48d8-a0c6-b4200788a683");
    assert_eq!((release["resolved"].as_u64(), release["total"].as_u64()), (Some(2), Some(3)));
    assert_eq!(
        release["items"][0],
        json!({"item_id": "21e08dc8-e491-47f5-9fd8-d1dc4cedcc6f", "name": "Changelog",
               "resolved": true})
    );
    assert_compact(&listed, "task.json");

    let created =
        ok_call(&clickup, "create_checklist", json!({"task_id": "86cv5pkvr", "name": "QA pass"}))
            .await;
    assert_eq!(
        created,
        json!({"task_id": "86cv5pkvr",
               "checklist": {"checklist_id": checklist, "name": "QA pass", "resolved": 0,
                             "total": 0}})
    );

    let added = ok_call(
        &clickup,
        "add_checklist_item",
        json!({"checklist_id": checklist, "name": "Test on Safari", "assignee": 301828}),
    )
    .await;
    assert_eq!(added["item_id"], item, "the new item's id is found by its text");
    assert_eq!(added["checklist"]["items"][0]["assignee"], "Grace Hopper");

    let ticked = ok_call(
        &clickup,
        "update_checklist_item",
        json!({"checklist_id": checklist, "item_id": item, "resolved": true}),
    )
    .await;
    assert_eq!(ticked["item_id"], item);
    assert_eq!(ticked["checklist"]["resolved"], 1);
    assert_eq!(ticked["checklist"]["items"][0]["resolved"], true);
    assert!(ticked["checklist"]["items"][1].get("resolved").is_none(), "open items say nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn checklist_writes_that_clickup_refuses_are_reported() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path("/checklist/c1a2b3c4/checklist_item/e1f2a3b4"))
        .respond_with(clickup_error(404, "Checklist item not found", "CHECK_006"))
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path("/checklist/c1a2b3c4/checklist_item/e1f2a3b5"))
        .respond_with(clickup_error(400, "Parent item invalid", "CHECK_012"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/task/86cvzzzzz/checklist"))
        .respond_with(clickup_error(400, "Task not found, deleted", "ITEM_013"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/checklist/c1a2b3c4/checklist_item"))
        .respond_with(clickup_error(400, "Checklist item name invalid", "CHECK_010"))
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let (kind, message) = failing_call(
        &clickup,
        "update_checklist_item",
        json!({"checklist_id": "c1a2b3c4", "item_id": "e1f2a3b4", "resolved": false}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert_eq!(message, "no checklist c1a2b3c4 in ClickUp (or the token's user cannot see it)");
    let (kind, message) = failing_call(
        &clickup,
        "update_checklist_item",
        json!({"checklist_id": "c1a2b3c4", "item_id": "e1f2a3b5", "parent": "e1f2a3b5"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("(400 Parent item invalid, CHECK_012)"), "{message}");

    let (kind, message) =
        failing_call(&clickup, "create_checklist", json!({"task_id": "86cvzzzzz", "name": "QA"}))
            .await;
    assert_eq!(kind, ToolErrorKind::NotFound, "a 400 with an ITEM_ code is a missing task");
    assert!(message.contains("no task 86cvzzzzz"), "{message}");

    let (kind, message) = failing_call(
        &clickup,
        "add_checklist_item",
        json!({"checklist_id": "c1a2b3c4", "name": "x"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert_eq!(
        message,
        "clickup rejected the request for adding an item to checklist c1a2b3c4 (400 Checklist \
         item name invalid, CHECK_010)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tags_are_added_and_removed_by_name() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/task/86cv5pkvr/tag/needs%20review"))
        .and(header("authorization", TOKEN))
        .respond_with(ok_body("{}".into()))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/task/DEV-42/tag/bug"))
        .and(query_param("custom_task_ids", "true"))
        .and(query_param("team_id", "9012345678"))
        .respond_with(ok_body("{}".into()))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/task/86cvzzzzz/tag/bug"))
        .respond_with(clickup_error(404, "Task not found, deleted", "ITEM_013"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/task/86cv5pkw7/tag/bug"))
        .respond_with(clickup_error(400, "Tag name invalid", "TAGS_001"))
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let added = ok_call(
        &clickup,
        "add_task_tag",
        json!({"task_id": "86cv5pkvr", "name": " needs review "}),
    )
    .await;
    assert_eq!(added, json!({"task_id": "86cv5pkvr", "tag": "needs review"}));
    let removed = ok_call(
        &clickup,
        "remove_task_tag",
        json!({"task_id": "DEV-42", "team_id": "9012345678", "tag": "bug"}),
    )
    .await;
    assert_eq!(removed, json!({"task_id": "DEV-42", "tag": "bug"}));
    let (kind, message) =
        failing_call(&clickup, "remove_task_tag", json!({"task_id": "86cvzzzzz", "name": "bug"}))
            .await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert_eq!(message, "no task 86cvzzzzz in ClickUp (or the token's user cannot see it)");
    let (kind, message) =
        failing_call(&clickup, "add_task_tag", json!({"task_id": "86cv5pkw7", "name": "bug"}))
            .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert_eq!(
        message,
        "clickup rejected the request for tagging task 86cv5pkw7 (400 Tag name invalid, TAGS_001)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn custom_fields_are_listed_with_their_options_then_set_and_cleared() {
    let server = MockServer::start().await;
    let severity = "5dc86497-098d-4bb0-87d6-cf28e43812e7";
    let s1 = "a1f3c3b0-0b1e-4c4f-9f0e-1d2c3b4a5f60";
    Mock::given(method("GET"))
        .and(path("/list/901/field"))
        .respond_with(ok("custom_fields.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("/task/86cv5pkvr/field/{severity}")))
        .and(body_json(json!({"value": s1})))
        .respond_with(ok_body("{}".into()))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/task/86cv5pkvr/field/f6c8b8a5-5a63-4194-e453-6c7b8a9fa0b5"))
        .and(body_json(json!({"value": 1716768000000u64, "value_options": {"time": true}})))
        .respond_with(ok_body("{}".into()))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path(format!("/task/86cv5pkvr/field/{severity}")))
        .respond_with(ok_body("{}".into()))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("/task/86cv5pkw7/field/{severity}")))
        .respond_with(clickup_error(400, "Value must be an option index or uuid", "FIELD_011"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/list/999/field"))
        .respond_with(clickup_error(401, "Team not authorized", "OAUTH_027"))
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();

    let fields = ok_call(&clickup, "list_custom_fields", json!({"list_id": 901})).await;
    assert_eq!(fields["list_id"], "901");
    let listed = &fields["fields"];
    assert_eq!(
        listed[0],
        json!({"field_id": "0a52c486-5f05-403b-b4fd-c512ff05131c",
                                 "name": "Customer", "type": "short_text"})
    );
    assert_eq!(listed[1]["required"], true);
    assert_eq!(listed[1]["options"][0], json!({"option_id": s1, "name": "S1"}));
    assert_eq!(listed[2]["options"][1]["name"], "ios", "labels are named by their label");
    let text = fields.to_string();
    assert!(!text.contains("color") && !text.contains("orderindex"), "{text}");

    let set = ok_call(
        &clickup,
        "set_custom_field",
        json!({"task_id": "86cv5pkvr", "field_id": severity, "value": s1}),
    )
    .await;
    assert_eq!(set, json!({"task_id": "86cv5pkvr", "field_id": severity, "value": s1}));
    ok_call(
        &clickup,
        "set_custom_field",
        json!({"task_id": "86cv5pkvr", "field_id": "f6c8b8a5-5a63-4194-e453-6c7b8a9fa0b5",
               "value": 1716768000000u64, "with_time": true}),
    )
    .await;
    let cleared = ok_call(
        &clickup,
        "set_custom_field",
        json!({"task_id": "86cv5pkvr", "field_id": severity, "value": null}),
    )
    .await;
    assert_eq!(cleared, json!({"task_id": "86cv5pkvr", "field_id": severity, "cleared": true}));

    let (kind, message) = failing_call(
        &clickup,
        "set_custom_field",
        json!({"task_id": "86cv5pkw7", "field_id": severity, "value": "S1"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert_eq!(
        message,
        "clickup rejected the request for setting a custom field of task 86cv5pkw7 (400 Value \
         must be an option index or uuid, FIELD_011)"
    );
    let (kind, message) =
        failing_call(&clickup, "list_custom_fields", json!({"list_id": "999"})).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.contains("the custom fields of list 999"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn subtasks_are_listed_and_dependencies_added_either_way() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/task/86cv5pkvr"))
        .and(query_param("include_subtasks", "true"))
        .respond_with(ok("task.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/task/86cv5pkvr/dependency"))
        .and(body_json(json!({"depends_on": "86cv5pkw2"})))
        .respond_with(ok_body("{}".into()))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/task/86cv5pkvr/dependency"))
        .and(body_json(json!({"dependency_of": "86cv5pkw7"})))
        .respond_with(clickup_error(400, "Dependency already exists", "DEPEND_002"))
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();

    let subtasks = ok_call(&clickup, "list_subtasks", json!({"task_id": "86cv5pkvr"})).await;
    assert_eq!(subtasks["list_id"], "901");
    assert_eq!(subtasks["open"], 1);
    let first = &subtasks["subtasks"][0];
    assert_eq!(first["task_id"], "86cv5pkw7");
    assert_eq!(first["status"], "in review");
    assert_eq!(first["parent"], "86cv5pkvr");
    assert_eq!(subtasks["subtasks"][1]["closed"], true);
    assert_compact(&subtasks, "task.json");

    let added = ok_call(
        &clickup,
        "add_dependency",
        json!({"task_id": "86cv5pkvr", "depends_on": "86cv5pkw2"}),
    )
    .await;
    assert_eq!(added, json!({"waiting": "86cv5pkvr", "waits_on": "86cv5pkw2"}));
    let (kind, message) = failing_call(
        &clickup,
        "add_dependency",
        json!({"task_id": "86cv5pkvr", "dependency_of": "86cv5pkw7"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("(400 Dependency already exists, DEPEND_002)"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_timer_starts_runs_and_stops() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/team/9012345678/time_entries/start"))
        .and(header("authorization", TOKEN))
        .and(body_json(json!({
            "tid": "86cv5pkvr", "description": "Reproducing on staging", "billable": true,
        })))
        .respond_with(ok("timer_started.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/team/9012345678/time_entries/current"))
        .and(query_param("assignee", "2770032"))
        .respond_with(ok("timer_running.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/team/9012345678/time_entries/current"))
        .respond_with(ok_body(r#"{"data": null}"#.into()))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/team/9012345678/time_entries/stop"))
        .respond_with(ok("timer_stopped.json"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/team/42/time_entries/start"))
        .respond_with(clickup_error(400, "Task ID required", "TIMEENTRY_006"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/team/42/time_entries/stop"))
        .respond_with(clickup_error(400, "No time entry running", "TIMEENTRY_053"))
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();

    let started = ok_call(
        &clickup,
        "start_timer",
        json!({"team_id": "9012345678", "task_id": "86cv5pkvr",
               "description": "Reproducing on staging", "billable": true}),
    )
    .await;
    assert_eq!(started["running"], true);
    assert_eq!(started["timer_id"], "4019887766554433221");
    assert_eq!(started["task_id"], "86cv5pkvr");
    assert_eq!(started["start"], "2024-05-16T09:00:00Z");
    assert_eq!(started["duration"], "running");
    assert!(started["elapsed"].as_str().unwrap().contains(" h"), "{started}");

    let running = ok_call(
        &clickup,
        "get_running_timer",
        json!({"team_id": "9012345678", "assignee": 2770032}),
    )
    .await;
    assert_eq!(running["user"], "Ada Lovelace");
    assert_eq!(running["tags"], json!(["investigation"]));
    let text = running.to_string();
    assert!(!text.contains("profilePicture") && !text.contains("@acme.example"), "{text}");

    let idle = ok_call(&clickup, "get_running_timer", json!({"team_id": "9012345678"})).await;
    assert_eq!(idle, json!({"team_id": "9012345678", "running": false}));

    let stopped = ok_call(&clickup, "stop_timer", json!({"team_id": "9012345678"})).await;
    assert_eq!(stopped["running"], false);
    assert_eq!(stopped["end"], "2024-05-16T10:30:00Z");
    assert_eq!(stopped["duration"], "1 h 30 min");
    assert!(stopped.get("elapsed").is_none());

    let (kind, message) = failing_call(&clickup, "stop_timer", json!({"team_id": "42"})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert_eq!(
        message,
        "clickup rejected the request for stopping the timer in workspace 42 (400 No time entry \
         running, TIMEENTRY_053)"
    );
    let (kind, message) = failing_call(&clickup, "start_timer", json!({"team_id": "42"})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("(400 Task ID required, TIMEENTRY_006)"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn members_of_a_list_or_a_task_and_goals_with_their_key_results() {
    let server = MockServer::start().await;
    for (route, file) in [
        ("/list/901/member", "list_members.json"),
        ("/task/86cv5pkvr/member", "list_members.json"),
        ("/team/9012345678/goal", "goals.json"),
        ("/goal/e53a033c-900e-462d-a849-4a216b06d930", "goal.json"),
    ] {
        Mock::given(method("GET")).and(path(route)).respond_with(ok(file)).mount(&server).await;
    }
    Mock::given(method("GET"))
        .and(path("/goal/00000000-0000-0000-0000-000000000000"))
        .respond_with(clickup_error(404, "Goal not found", "GOAL_007"))
        .mount(&server)
        .await;
    let clickup = ClickUp::new(config(&server)).unwrap();

    let members = ok_call(&clickup, "list_members", json!({"list_id": "901"})).await;
    assert_eq!(
        members,
        json!({"list_id": "901", "member_count": 2, "members": [
            {"user_id": 2770032, "username": "Ada Lovelace"},
            {"user_id": 301828, "username": "Grace Hopper"},
        ]})
    );
    let on_task = ok_call(&clickup, "list_members", json!({"task_id": "86cv5pkvr"})).await;
    assert_eq!(on_task["task_id"], "86cv5pkvr");

    let goals = ok_call(&clickup, "list_goals", json!({"team_id": "9012345678"})).await;
    assert_eq!(
        goals["goals"][0],
        json!({"goal_id": "e53a033c-900e-462d-a849-4a216b06d930",
               "name": "Cut login failures in half", "percent_completed": 40,
               "due_date": "2024-07-01T00:00:00Z", "key_results": 2})
    );
    assert_eq!(goals["goals"][1]["folder"], "Quarterly Goals", "goals in folders are listed");
    assert_compact(&goals, "goals.json");

    let goal =
        ok_call(&clickup, "get_goal", json!({"goal_id": "e53a033c-900e-462d-a849-4a216b06d930"}))
            .await;
    assert_eq!(goal["owners"], json!(["Ada Lovelace"]));
    assert_eq!(goal["url"], "https://app.clickup.com/9012345678/goals/6");
    let target = &goal["key_results"][0];
    assert_eq!(target["progress"], "60 / 100 %");
    assert_eq!(target["last_note"], "Down to 1.4%");
    assert_eq!(goal["key_results"][1]["task_ids"], json!(["86cv5pkvr"]));
    assert_compact(&goal, "goal.json");

    let (kind, message) = failing_call(
        &clickup,
        "get_goal",
        json!({"goal_id": "00000000-0000-0000-0000-000000000000"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no goal 00000000-"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn new_tools_refuse_bad_arguments_before_any_request() {
    let server = MockServer::start().await;
    let clickup = ClickUp::new(config(&server)).unwrap();
    let cases = [
        (
            "update_checklist_item",
            json!({"checklist_id": "c1", "item_id": "i1"}),
            "nothing to change",
        ),
        ("create_checklist", json!({"task_id": "86cv5pkvr", "name": " "}), "`name` is empty"),
        ("add_task_tag", json!({"task_id": "86cv5pkvr", "name": ""}), "`name` is empty"),
        (
            "set_custom_field",
            json!({"task_id": "86cv5pkvr", "field_id": "f1"}),
            "missing field `value`",
        ),
        (
            "add_dependency",
            json!({"task_id": "86cv5pkvr", "depends_on": "a1", "dependency_of": "b2"}),
            "exactly one of",
        ),
        ("add_dependency", json!({"task_id": "86cv5pkvr", "depends_on": "86cv5pkvr"}), "itself"),
        ("list_members", json!({}), "give one of `list_id`"),
        ("get_goal", json!({"goal_id": "../team"}), "must be a ClickUp id"),
        ("start_timer", json!({"team_id": "1", "task_id": "a b"}), "must be a ClickUp id"),
        ("start_timer", json!({"team_id": "1", "task_id": "DEV-42"}), "task's own id"),
    ];
    for (tool, args, expected) in cases {
        let (kind, message) = failing_call(&clickup, tool, args).await;
        assert_eq!(kind, ToolErrorKind::InvalidArguments, "{tool}: {message}");
        assert!(message.contains(expected), "{tool}: {message}");
    }
    assert!(server.received_requests().await.unwrap().is_empty());
}
