//! A session through the real host and the real GitHub plugin, against a loopback GitHub: repeats
//! come from the session cache, mutations invalidate what they make stale, unproductive repeats
//! stop, and results are trimmed to the field groups worth their tokens.

use std::path::Path;

use quiver_runtime::config::LoadedConfig;
use quiver_runtime::{Host, Session};
use quiver_tests::plugins_dir;
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const REPO: &str = "/repos/octocat/Hello-World";

fn recorded(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("data/github").join(name))
        .unwrap()
}

fn reply(status: u16, file: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(recorded(file), "application/json")
}

fn host(server: &MockServer, plugins: &Path, extra: &str) -> Host {
    let text = format!("[providers.github]\nbase_url = \"{}\"\n{extra}", server.uri());
    let config = LoadedConfig::parse(Path::new("quiver.toml"), &text).unwrap();
    Host::with_config(config, Some(plugins))
}

async fn requests_to(server: &MockServer, to: &str) -> usize {
    server.received_requests().await.unwrap().iter().filter(|r| r.url.path() == to).count()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeat_is_served_from_the_cache_until_a_mutation_makes_it_stale() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(reply(200, "issue.json"))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{REPO}/issues/1347/comments")))
        .respond_with(reply(201, "issue_comment_created.json"))
        .mount(&server)
        .await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let host = host(&server, plugins.path(), "");
    let session = Session::new(&host, "s1");
    let issue = json!({"owner": "octocat", "repo": "Hello-World", "number": 1347});

    let (first, effects) = session.call("github.get_issue", issue.clone(), &[]).await;
    assert!(!first.is_error, "{first:?}");
    assert!(!effects.cache_hit);
    assert_eq!(first.structured.as_ref().unwrap()["title"], "Found a bug");

    // Same call, other key order: the cache answers with a reference, GitHub is not asked.
    let reordered = json!({"number": 1347, "repo": "Hello-World", "owner": "octocat"});
    let (second, effects) = session.call("github.get_issue", reordered, &[]).await;
    assert!(effects.cache_hit, "{second:?}");
    assert!(second.text_content().starts_with("same result as r1"), "{}", second.text_content());
    assert_eq!(requests_to(&server, &format!("{REPO}/issues/1347")).await, 1);

    // Commenting changes the issue: the next read goes to GitHub again.
    let comment = json!({"owner": "octocat", "repo": "Hello-World", "number": 1347, "body": "+1"});
    let (posted, _) = session.call("github.add_issue_comment", comment, &[]).await;
    assert!(!posted.is_error, "{posted:?}");
    let (third, effects) = session.call("github.get_issue", issue, &[]).await;
    assert!(!effects.cache_hit && !third.is_error, "{third:?}");
    assert_eq!(requests_to(&server, &format!("{REPO}/issues/1347")).await, 2);

    // Another session has its own cache.
    let other = Session::new(&host, "s2");
    let (_, effects) = other
        .call(
            "github.get_issue",
            json!({"owner": "octocat", "repo": "Hello-World", "number": 1347}),
            &[],
        )
        .await;
    assert!(!effects.cache_hit);
}

#[tokio::test(flavor = "multi_thread")]
async fn opt_in_field_groups_are_left_out_unless_asked_for() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/pulls/1347/comments")))
        .respond_with(reply(200, "pull_request_review_comments.json"))
        .mount(&server)
        .await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let host = host(&server, plugins.path(), "");
    let args = json!({"owner": "octocat", "repo": "Hello-World", "number": 1347});

    let session = Session::new(&host, "trim");
    let (trimmed, effects) =
        session.call("github.list_pull_request_review_comments", args.clone(), &[]).await;
    assert!(!trimmed.is_error, "{trimmed:?}");
    let comments = &trimmed.structured.as_ref().unwrap()["comments"];
    assert!(comments.as_array().is_some_and(|c| !c.is_empty()), "{trimmed:?}");
    assert!(comments.as_array().unwrap().iter().all(|c| c.get("diff_hunk").is_none()));
    assert!(
        trimmed.text_content().contains("diff_hunk"),
        "the note says how to ask: {}",
        trimmed.text_content()
    );
    assert!(effects.tokens_after < effects.tokens_before, "{effects:?}");

    // Asking for the group brings it back; `fields` never reaches the provider, which would
    // refuse it as an unknown argument.
    let session = Session::new(&host, "ask");
    let mut asked = args.clone();
    asked["fields"] = json!(["diff_hunk"]);
    let (full, _) = session.call("github.list_pull_request_review_comments", asked, &[]).await;
    assert!(!full.is_error, "{full:?}");
    let comments = full.structured.unwrap()["comments"].clone();
    assert!(
        comments.as_array().unwrap().iter().all(|c| c.get("diff_hunk").is_some()),
        "{comments}"
    );

    // So does an intent keyword of the turn.
    let session = Session::new(&host, "intent");
    let (by_intent, _) =
        session.call("github.list_pull_request_review_comments", args, &["hunk".to_owned()]).await;
    let comments = by_intent.structured.unwrap()["comments"].clone();
    assert!(comments.as_array().unwrap().iter().all(|c| c.get("diff_hunk").is_some()));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unproductive_repeat_is_stopped_with_a_hint() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/search/issues"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"total_count": 0, "incomplete_results": false, "items": []})),
        )
        .mount(&server)
        .await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    // No caching for this tool, so every repeat would reach GitHub.
    let extra = "[tools.\"github.search_issues\"]\nfail_fast_after_n = 2\ncost_model = { freshness_ttl_s = 0 }\n";
    let host = host(&server, plugins.path(), extra);
    let session = Session::new(&host, "ff");
    let query = json!({"q": "repo:octocat/Hello-World flaky"});
    for _ in 0..2 {
        let (result, effects) = session.call("github.search_issues", query.clone(), &[]).await;
        assert!(!effects.stopped && !result.is_error, "{result:?}");
    }
    let (stopped, effects) = session.call("github.search_issues", query, &[]).await;
    assert!(effects.stopped, "{stopped:?}");
    assert_eq!(stopped.metadata.get("fail_fast"), Some(&Value::Bool(true)));
    assert_eq!(server.received_requests().await.unwrap().len(), 2, "the third call never left");
}
