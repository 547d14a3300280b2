//! A session through the real host and the real GitHub plugin, against a loopback GitHub: repeats
//! come from the session cache, mutations invalidate what they make stale, unproductive repeats
//! stop, and results are trimmed to the field groups worth their tokens.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use quiver_runtime::config::LoadedConfig;
use quiver_runtime::{Host, Session};
use quiver_tests::{plugins_dir, recorded_reply};
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const REPO: &str = "/repos/octocat/Hello-World";

fn reply(status: u16, file: &str) -> ResponseTemplate {
    recorded_reply(status, "github", file)
}

fn host(server: &MockServer, plugins: &Path, extra: &str) -> Arc<Host> {
    let text = format!("[providers.github]\nbase_url = \"{}\"\n{extra}", server.uri());
    let config = LoadedConfig::parse(Path::new("quiver.toml"), &text).unwrap();
    Arc::new(Host::with_config(config, Some(plugins)))
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
    let session = Session::new(Arc::clone(&host), "s1");
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
    let other = Session::new(Arc::clone(&host), "s2");
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

    let session = Session::new(Arc::clone(&host), "trim");
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
    let session = Session::new(Arc::clone(&host), "ask");
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
    let session = Session::new(Arc::clone(&host), "intent");
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
    let session = Session::new(Arc::clone(&host), "ff");
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

/// The built-in priors, calibrated on real sessions, pre-fetch a listed pull request only after
/// the session shows the agent reads the first one; these tests link it as a user who knows
/// their agent does.
const PR_LINK: &str = "[tools.\"github.list_pull_requests\"]\nfollow_up = [{ tool = \"get_pull_request\", \
    probability = 0.9, projection = \"$.pull_requests[*].number\", projection_arg = \"number\" }]\n";

const SPECULATE: &str =
    "[enrichment]\nenabled = true\nprefetch_timeout_ms = 3000\nmax_prefetches_per_link = 3\n";

#[tokio::test(flavor = "multi_thread")]
async fn likely_follow_ups_are_prefetched_and_served_from_the_cache() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/pulls")))
        .respond_with(reply(200, "pull_requests_list.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(wiremock::matchers::path_regex(format!("^{REPO}/pulls/[0-9]+$")))
        .respond_with(reply(200, "pull_request.json"))
        .mount(&server)
        .await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let host = host(&server, plugins.path(), &format!("{SPECULATE}{PR_LINK}"));
    let session = Session::new(Arc::clone(&host), "spec");
    let list = json!({"owner": "octocat", "repo": "Hello-World"});
    let (listed, effects) = session.call("github.list_pull_requests", list, &[]).await;
    assert!(!listed.is_error, "{listed:?}");
    assert!(effects.prefetches_started >= 1, "{effects:?}");
    assert_eq!(effects.prefetches_landed, effects.prefetches_started, "{effects:?}");
    assert!(effects.prefetches_started <= 3, "at most max_parallel_prefetches: {effects:?}");
    let hint = listed.text_content();
    assert!(hint.contains("pre-fetched github.get_pull_request"), "{hint}");

    // The agent's next call is answered from the cache: GitHub saw the pull request once.
    let get = json!({"owner": "octocat", "repo": "Hello-World", "number": 1347});
    let (pr, effects) = session.call("github.get_pull_request", get, &[]).await;
    assert!(effects.cache_hit, "{pr:?}");
    assert_eq!(requests_to(&server, &format!("{REPO}/pulls/1347")).await, 1);
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_prefetches_do_not_hold_the_answer_and_shutdown_cancels_them() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/pulls")))
        .respond_with(reply(200, "pull_requests_list.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(wiremock::matchers::path_regex(format!("^{REPO}/pulls/[0-9]+$")))
        .respond_with(reply(200, "pull_request.json").set_delay(Duration::from_secs(20)))
        .mount(&server)
        .await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let extra = "[enrichment]\nenabled = true\nprefetch_timeout_ms = 100\n";
    let host = host(&server, plugins.path(), &format!("{extra}{PR_LINK}"));
    let session = Session::new(Arc::clone(&host), "slow");
    let started = std::time::Instant::now();
    let (listed, effects) = session
        .call("github.list_pull_requests", json!({"owner": "octocat", "repo": "Hello-World"}), &[])
        .await;
    assert!(!listed.is_error);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the answer waited only prefetch_timeout_ms"
    );
    assert!(effects.prefetches_started >= 1 && effects.prefetches_landed == 0, "{effects:?}");
    assert!(!listed.text_content().contains("pre-fetched"));
    assert!(session.prefetches_in_flight().await >= 1);

    let shutdown = std::time::Instant::now();
    session.shutdown().await;
    assert_eq!(session.prefetches_in_flight().await, 0, "nothing outlives the session");
    assert!(shutdown.elapsed() < Duration::from_secs(5), "cancelled, not waited out");
    assert_eq!(
        host.state().available_permits("127.0.0.1").await,
        4,
        "every host permit was returned"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mutating_tool_is_never_prefetched_whatever_the_config_says() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues")))
        .respond_with(reply(200, "issues_list.json"))
        .mount(&server)
        .await;
    Mock::given(method("POST")).respond_with(reply(201, "issue_created.json")).mount(&server).await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    // A user who links list_issues to create_issue with certainty and asks to speculate it.
    let extra = format!(
        "{SPECULATE}[tools.\"github.list_issues\"]\nfollow_up = [{{ tool = \"create_issue\", probability = 1.0, projection = \"$.issues[*].title\", projection_arg = \"title\" }}]\n[tools.\"github.create_issue\"]\nspeculate = true\n"
    );
    let host = host(&server, plugins.path(), &extra);
    let session = Session::new(Arc::clone(&host), "never");
    let (listed, effects) = session
        .call("github.list_issues", json!({"owner": "octocat", "repo": "Hello-World"}), &[])
        .await;
    assert!(!listed.is_error, "{listed:?}");
    assert_eq!(effects.prefetches_started, 0, "{effects:?}");
    session.shutdown().await;
    let posts = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.method.as_str() == "POST")
        .count();
    assert_eq!(posts, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn telemetry_of_a_scripted_session_feeds_tune_analyze_and_holds_no_secrets() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/pulls")))
        .respond_with(reply(200, "pull_requests_list.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(wiremock::matchers::path_regex(format!("^{REPO}/pulls/[0-9]+$")))
        .respond_with(reply(200, "pull_request.json"))
        .mount(&server)
        .await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let telemetry = tempfile::tempdir().unwrap();
    let extra = format!(
        "{SPECULATE}{PR_LINK}[telemetry]\nenabled = true\ndir = \"{}\"\n",
        telemetry.path().display()
    );
    let host = host(&server, plugins.path(), &extra);
    let session = Session::new(Arc::clone(&host), "scripted");
    let list = json!({"owner": "octocat", "repo": "Hello-World", "state": "open"});
    session.call("github.list_pull_requests", list, &[]).await;
    for number in [1347, 1347] {
        let get = json!({"owner": "octocat", "repo": "Hello-World", "number": number});
        session.call("github.get_pull_request", get, &[]).await;
    }
    session.shutdown().await;

    let files: Vec<_> =
        std::fs::read_dir(telemetry.path()).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        !text.contains("Hello-World") && !text.contains("octocat"),
        "argument values leaked: {text}"
    );
    assert!(text.lines().all(|l| serde_json::from_str::<Value>(l).is_ok()));

    let out = quiver_tests::quiver(
        &[
            "tune",
            "analyze",
            files[0].to_str().unwrap(),
            "--plugins",
            plugins.path().to_str().unwrap(),
        ],
        &[],
    );
    let (stdout, stderr) = quiver_tests::texts(&out);
    assert!(out.status.success(), "{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("# enrichment: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    // The pre-fetched pull request was asked for next: a hit; both gets came from the cache.
    assert!(line.contains("calls_saved="), "{line}");
    assert!(!line.contains("prefetch_hit=-") && !line.contains("prefetch_hit=0.0%"), "{line}");
    assert!(line.contains("dedup=2"), "{line}");
    assert!(stdout.contains("github.get_pull_request"), "{stdout}");
}

/// A loopback GitHub whose list answers at once and whose pull requests take `delay`; the first
/// request for pull request 1347 is answered with `first_status` when given.
async fn slow_pulls(delay: Duration, first_status: Option<u16>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/pulls")))
        .respond_with(reply(200, "pull_requests_list.json"))
        .mount(&server)
        .await;
    if let Some(status) = first_status {
        Mock::given(method("GET"))
            .and(path(format!("{REPO}/pulls/1347")))
            .respond_with(
                ResponseTemplate::new(status)
                    .set_body_json(json!({"message": "Server Error"}))
                    .set_delay(delay),
            )
            // A fault that outlasts the provider's own retries of a read (the first try and
            // two more), so the pre-fetch does fail.
            .up_to_n_times(3)
            .with_priority(1)
            .mount(&server)
            .await;
    }
    Mock::given(method("GET"))
        .and(wiremock::matchers::path_regex(format!("^{REPO}/pulls/[0-9]+$")))
        .respond_with(reply(200, "pull_request.json").set_delay(delay))
        .mount(&server)
        .await;
    server
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_that_arrives_while_its_prefetch_runs_joins_it() {
    let delay = Duration::from_millis(800);
    let server = slow_pulls(delay, None).await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    // The list answers after waiting 300 ms for its pre-fetches, which need 800.
    let extra = "[enrichment]\nenabled = true\nprefetch_timeout_ms = 300\n";
    let host = host(&server, plugins.path(), &format!("{extra}{PR_LINK}"));
    let session = Session::new(Arc::clone(&host), "join");
    let (listed, effects) = session
        .call("github.list_pull_requests", json!({"owner": "octocat", "repo": "Hello-World"}), &[])
        .await;
    assert!(!listed.is_error, "{listed:?}");
    assert!(effects.prefetches_started >= 1 && effects.prefetches_landed == 0, "{effects:?}");

    // The pre-fetch of this very call is on its way: the call waits for it, no second request.
    let started = std::time::Instant::now();
    let get = json!({"owner": "octocat", "repo": "Hello-World", "number": 1347});
    let (pr, effects) = session.call("github.get_pull_request", get.clone(), &[]).await;
    assert!(!pr.is_error, "{pr:?}");
    assert!(effects.prefetch_hit && effects.cache_hit, "{effects:?}");
    let waited = started.elapsed();
    assert!(waited < delay - Duration::from_millis(100), "joined, not asked again: {waited:?}");
    // The agent never saw the pre-fetched result, so it gets it whole, not a reference.
    assert_eq!(pr.structured.as_ref().unwrap()["number"], 1347, "{pr:?}");
    assert!(!pr.text_content().contains("same result as"), "{}", pr.text_content());
    assert_eq!(requests_to(&server, &format!("{REPO}/pulls/1347")).await, 1);

    // Asked again, it is a repeat: a short reference.
    let (again, effects) = session.call("github.get_pull_request", get, &[]).await;
    assert!(effects.cache_hit && !effects.prefetch_hit, "{effects:?}");
    assert!(again.text_content().starts_with("same result as"), "{}", again.text_content());
    assert_eq!(requests_to(&server, &format!("{REPO}/pulls/1347")).await, 1);
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_whose_prefetch_fails_makes_the_call_itself() {
    let delay = Duration::from_millis(300);
    let server = slow_pulls(delay, Some(502)).await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let extra = "[enrichment]\nenabled = true\nprefetch_timeout_ms = 50\n";
    let host = host(&server, plugins.path(), &format!("{extra}{PR_LINK}"));
    let session = Session::new(Arc::clone(&host), "fallback");
    let (listed, effects) = session
        .call("github.list_pull_requests", json!({"owner": "octocat", "repo": "Hello-World"}), &[])
        .await;
    assert!(!listed.is_error, "{listed:?}");
    assert!(effects.prefetches_started >= 1, "{effects:?}");

    // The pre-fetch of pull request 1347 gets 502s; the call that joined it asks GitHub itself.
    let get = json!({"owner": "octocat", "repo": "Hello-World", "number": 1347});
    let (pr, effects) = session.call("github.get_pull_request", get, &[]).await;
    assert!(!pr.is_error, "{pr:?}");
    assert!(!effects.prefetch_hit && !effects.cache_hit, "{effects:?}");
    assert_eq!(pr.structured.as_ref().unwrap()["number"], 1347, "{pr:?}");
    assert_eq!(requests_to(&server, &format!("{REPO}/pulls/1347")).await, 4, "3 failed, 1 asked");
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_of_one_credential_share_reads_in_flight_and_a_rate_limit_they_hit() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(reply(200, "issue.json").set_delay(Duration::from_millis(300)))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/429")))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "30")
                .set_body_string(r#"{"message":"You have exceeded a secondary rate limit."}"#),
        )
        .mount(&server)
        .await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    // No freshness window: only the call in flight can be shared.
    let host = host(
        &server,
        plugins.path(),
        "[tools.\"github.get_issue\"]\ncost_model = { freshness_ttl_s = 0 }\n",
    );
    let alice = Session::new(Arc::clone(&host), "alice").with_scope("shared", "alice@shared");
    let bob = Session::new(Arc::clone(&host), "bob").with_scope("shared", "bob@shared");
    let other = Session::new(Arc::clone(&host), "carol").with_scope("carol-token", "carol");
    let issue = |n: u64| json!({"owner": "octocat", "repo": "Hello-World", "number": n});

    let ((a, _), (b, joined)) = tokio::join!(
        alice.call("github.get_issue", issue(1347), &[]),
        bob.call("github.get_issue", issue(1347), &[]),
    );
    assert!(!a.is_error && !b.is_error, "{a:?} {b:?}");
    assert_eq!(b.structured.as_ref().unwrap()["title"], "Found a bug", "bob gets the data");
    assert!(joined.cache_hit, "bob's call joined alice's");
    assert_eq!(requests_to(&server, &format!("{REPO}/issues/1347")).await, 1);

    // Alice hits the rate limit; bob, on the same credentials, is not sent; carol is.
    let (limited, _) = alice.call("github.get_issue", issue(429), &[]).await;
    assert!(limited.is_error, "{limited:?}");
    let (held, _) = bob.call("github.get_issue", issue(1347), &[]).await;
    assert!(held.is_error && held.text_content().contains("not sent"), "{held:?}");
    assert_eq!(held.metadata["retry_after_s"].as_u64().map(|s| s > 20), Some(true), "{held:?}");
    let (other_credentials, _) = other.call("github.get_issue", issue(1347), &[]).await;
    assert!(!other_credentials.is_error, "another credential's budget: {other_credentials:?}");
    assert_eq!(requests_to(&server, &format!("{REPO}/issues/1347")).await, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeat_carries_the_data_for_programs_and_fresh_asks_the_service_again() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(reply(200, "issue.json"))
        .mount(&server)
        .await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let host = host(
        &server,
        plugins.path(),
        "[tools.\"github.get_issue\"]\ncost_model = { freshness_ttl_s = 300 }\n",
    );
    let session = Session::new(Arc::clone(&host), "programs");
    let issue = json!({"owner": "octocat", "repo": "Hello-World", "number": 1347});
    let (first, _) = session.call("github.get_issue", issue.clone(), &[]).await;
    let (repeat, effects) = session.call("github.get_issue", issue.clone(), &[]).await;
    assert!(effects.cache_hit);
    assert!(repeat.text_content().starts_with("same result as r1"), "the model reads a reference");
    assert_eq!(
        repeat.structured, first.structured,
        "a program reads the same data as the first time"
    );

    let mut fresh = issue.clone();
    fresh["_fresh"] = json!(true);
    let (refetched, effects) = session.call("github.get_issue", fresh, &[]).await;
    assert!(!effects.cache_hit && !refetched.is_error, "{refetched:?}");
    assert_eq!(refetched.structured.as_ref().unwrap()["title"], "Found a bug");
    assert_eq!(requests_to(&server, &format!("{REPO}/issues/1347")).await, 2);
    let posted = server.received_requests().await.unwrap();
    assert!(posted.iter().all(|r| !r.url.as_str().contains("_fresh")), "control arguments stay");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_argument_quoted_back_in_an_error_is_cut() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(404).set_body_string(r#"{"message":"Not Found","status":"404"}"#),
        )
        .mount(&server)
        .await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let telemetry = tempfile::tempdir().unwrap();
    let host = host(
        &server,
        plugins.path(),
        &format!("[telemetry]\nenabled = true\ndir = \"{}\"\n", telemetry.path().display()),
    );
    let session = Session::new(Arc::clone(&host), "huge");
    let owner = "o".repeat(10 * 1024 * 1024);
    let args = json!({"owner": owner, "repo": "r", "number": 1});
    let (result, effects) = session.call("github.get_issue", args, &[]).await;
    assert!(result.is_error);
    let text = result.text_content();
    assert!(text.len() < 8 * 1024, "the error came back with {} bytes", text.len());
    assert!(text.contains("bytes of this error left out"), "{}", &text[..200.min(text.len())]);
    assert!(effects.tokens_after < 4096, "{effects:?}");
    let events = quiver_tests::telemetry_events(telemetry.path());
    let tokens: Vec<u64> = events.iter().filter_map(|e| e["tokens_after"].as_u64()).collect();
    assert!(tokens.iter().all(|t| *t < 4096), "telemetry counted {tokens:?} tokens");
}

/// The per-host concurrency budget is per credential: sessions on the same credentials queue
/// behind each other's calls, while a caller with tokens of their own has a budget of their own.
#[tokio::test(flavor = "multi_thread")]
async fn each_credential_has_its_own_per_host_budget() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1")))
        .respond_with(reply(200, "issue.json").set_delay(Duration::from_secs(2)))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/issues/1347")))
        .respond_with(reply(200, "issue.json"))
        .mount(&server)
        .await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let host = host(
        &server,
        plugins.path(),
        "[enrichment]\nper_host_concurrency = 1\n\
         [tools.\"github.get_issue\"]\ncost_model = { freshness_ttl_s = 0 }\n",
    );
    let session = |name: &str, scope: &str| {
        Arc::new(Session::new(Arc::clone(&host), name).with_scope(scope, &format!("{name}@x")))
    };
    let (alice, bob) = (session("alice", "shared"), session("bob", "shared"));
    let carol = session("carol", "carol-token");
    let issue = |n: u64| json!({"owner": "octocat", "repo": "Hello-World", "number": n});

    // Alice's slow call holds the one permit of the host's shared credentials.
    let slow = {
        let alice = Arc::clone(&alice);
        tokio::spawn(async move { alice.call("github.get_issue", issue(1), &[]).await })
    };
    while requests_to(&server, &format!("{REPO}/issues/1")).await == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(host.state().available_permits("127.0.0.1").await, 0);
    // Carol's own credentials: her call goes out while Alice's is still in flight.
    let (hers, _) = carol.call("github.get_issue", issue(1347), &[]).await;
    assert!(!hers.is_error, "{hers:?}");
    assert!(!slow.is_finished(), "carol did not wait for alice's permit");
    // Bob shares Alice's credentials: his call waits for her permit.
    let bobs = {
        let bob = Arc::clone(&bob);
        tokio::spawn(async move { bob.call("github.get_issue", issue(1347), &[]).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(requests_to(&server, &format!("{REPO}/issues/1347")).await, 1, "only carol's");
    let (first, _) = slow.await.unwrap();
    assert!(!first.is_error, "{first:?}");
    let (his, _) = bobs.await.unwrap();
    assert!(!his.is_error, "{his:?}");
    assert_eq!(requests_to(&server, &format!("{REPO}/issues/1347")).await, 2);
    assert_eq!(host.state().available_permits("127.0.0.1").await, 1, "the permit came back");
}

/// A listing of the repository: its path under the repository, its recorded page, the query
/// parameter that tells pages apart, and the key of an item's identity.
struct Listing {
    path: &'static str,
    file: &'static str,
    param: &'static str,
    key: &'static str,
}

/// A loopback GitHub answering `listing` for each of `values` of its parameter with the recorded
/// page whose first item's identity is `first(i)`, and any one item of it with `detail_file`.
async fn pages_by_query(
    listing: &Listing,
    values: &[&str],
    first: impl Fn(usize) -> Value,
    detail_file: &str,
) -> MockServer {
    let server = MockServer::start().await;
    let page: Value = serde_json::from_str(&quiver_tests::recorded("github", listing.file))
        .expect("recorded listing");
    for (i, value) in values.iter().enumerate() {
        let mut page = page.clone();
        page[0][listing.key] = first(i);
        Mock::given(method("GET"))
            .and(path(format!("{REPO}/{}", listing.path)))
            .and(wiremock::matchers::query_param(listing.param, *value))
            .respond_with(ResponseTemplate::new(200).set_body_json(page))
            .mount(&server)
            .await;
    }
    Mock::given(method("GET"))
        .and(wiremock::matchers::path_regex(format!("^{REPO}/{}/[0-9a-f]+$", listing.path)))
        .respond_with(reply(200, detail_file))
        .mount(&server)
        .await;
    server
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chain_the_agent_keeps_taking_is_prefetched_once_the_session_has_shown_it() {
    // Three branches, each listing a different newest commit; the agent reads each list's
    // newest commit next. The built-in prior (a listed commit is rarely the one read next) is
    // below min_prefetch_probability: nothing is pre-fetched until the session has shown the
    // chain twice, and then the third newest commit is pre-fetched and served.
    let newest = |i: usize| json!(format!("{:040x}", i + 1));
    let listing = Listing { path: "commits", file: "commits_list.json", param: "sha", key: "sha" };
    let server = pages_by_query(&listing, &["a", "b", "c"], newest, "commit.json").await;
    let newest = |i: usize| newest(i).as_str().unwrap().to_owned();
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let host = host(&server, plugins.path(), "[enrichment]\nenabled = true\n");
    let session = Session::new(Arc::clone(&host), "habit");
    for (i, branch) in ["a", "b", "c"].iter().enumerate() {
        let list = json!({"owner": "octocat", "repo": "Hello-World", "sha": branch});
        let (listed, effects) = session.call("github.list_commits", list, &[]).await;
        assert!(!listed.is_error, "{listed:?}");
        let shown = i == 2;
        assert_eq!(effects.prefetches_started, usize::from(shown), "list {i}: {effects:?}");
        let get = json!({"owner": "octocat", "repo": "Hello-World", "sha": newest(i)});
        let (commit, effects) = session.call("github.get_commit", get, &[]).await;
        assert!(!commit.is_error, "{commit:?}");
        assert_eq!(effects.prefetch_hit, shown, "commit {i}: {effects:?}");
    }
    session.shutdown().await;
    // Two commits asked for by the agent, one pre-fetched: three requests, none wasted.
    let commits = server.received_requests().await.unwrap();
    let reads = commits.iter().filter(|r| r.url.path().len() > format!("{REPO}/commits/").len());
    assert_eq!(reads.count(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_whose_prefetches_a_session_leaves_unused_is_not_prefetched_there_again() {
    // Each list's first pull request is pre-fetched (the user's link says the agent reads it),
    // but the agent never reads one: after two unused pre-fetches the session stops.
    let states = ["open", "closed", "all"];
    let listing =
        Listing { path: "pulls", file: "pull_requests_list.json", param: "state", key: "number" };
    let server = pages_by_query(&listing, &states, |i| json!(100 + i), "pull_request.json").await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let extra = format!("[enrichment]\nenabled = true\n{PR_LINK}");
    let host = host(&server, plugins.path(), &extra);
    let session = Session::new(Arc::clone(&host), "unused");
    let mut started = Vec::new();
    for state in states {
        let list = json!({"owner": "octocat", "repo": "Hello-World", "state": state});
        let (listed, effects) = session.call("github.list_pull_requests", list, &[]).await;
        assert!(!listed.is_error, "{listed:?}");
        started.push(effects.prefetches_started);
    }
    assert_eq!(started, [1, 1, 0]);
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_window_running_out_is_left_to_the_agent() {
    // The same likely follow-up (0.9) after three lists, each answered with what GitHub says is
    // left of the token's rate window: with 28% left (reserve 20%) a 0.9 link is no longer worth
    // a request, with 98% it is, with 10% nothing is.
    let server = MockServer::start().await;
    let page = quiver_tests::recorded("github", "pull_requests_list.json");
    for (state, remaining) in [("closed", "1400"), ("open", "4900"), ("all", "500")] {
        Mock::given(method("GET"))
            .and(path(format!("{REPO}/pulls")))
            .and(wiremock::matchers::query_param("state", state))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_raw(page.clone(), "application/json")
                    .insert_header("x-ratelimit-limit", "5000")
                    .insert_header("x-ratelimit-remaining", remaining),
            )
            .mount(&server)
            .await;
    }
    Mock::given(method("GET"))
        .and(wiremock::matchers::path_regex(format!("^{REPO}/pulls/[0-9]+$")))
        .respond_with(reply(200, "pull_request.json"))
        .mount(&server)
        .await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let extra = format!(
        "[enrichment]\nenabled = true\nprefetch_timeout_ms = 3000\nstop_after_unused = 0\n\
         prefetch_rate_reserve = 0.2\n{PR_LINK}"
    );
    let host = host(&server, plugins.path(), &extra);
    let session = Session::new(Arc::clone(&host), "window");
    let mut started = Vec::new();
    for state in ["closed", "open", "all"] {
        let list = json!({"owner": "octocat", "repo": "Hello-World", "state": state});
        let (listed, effects) = session.call("github.list_pull_requests", list, &[]).await;
        assert!(!listed.is_error, "{listed:?}");
        started.push(effects.prefetches_started);
    }
    session.shutdown().await;
    assert_eq!(started, [0, 1, 0]);
    let details = server.received_requests().await.unwrap();
    assert_eq!(
        details.iter().filter(|r| r.url.path().starts_with(&format!("{REPO}/pulls/"))).count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_nobody_sized_is_predicted_by_what_it_returned() {
    // The noop fixture's tool has no cost model of its own: the verb priors guess its size
    // until its results say it. A size the user wrote is never replaced.
    let plugins = plugins_dir(&["quiver-fixture-noop"]);
    let load = |text: &str| {
        let config = LoadedConfig::parse(Path::new("quiver.toml"), text).unwrap();
        Arc::new(Host::with_config(config, Some(plugins.path())))
    };
    let host = load("");
    let tool = host.tool("noop.noop").expect("the fixture's tool");
    let guessed = host.value_model(&tool);
    assert!(
        !guessed
            .source_of("cost_model.typical_kb")
            .is_some_and(|s| format!("{s:?}").contains("observed")),
        "{guessed:?}"
    );
    let session = Session::new(Arc::clone(&host), "sizes");
    for n in [1, 22] {
        let (result, _) = session.call("noop.noop", json!({"n": n}), &[]).await;
        assert!(!result.is_error, "{result:?}");
    }
    let learned = host.value_model(&tool);
    let source = format!("{:?}", learned.source_of("cost_model.typical_kb"));
    assert!(source.contains("observed:mean of 2 results"), "{source}");
    let kb = learned.model.cost_model.typical_kb;
    assert!(kb > 0.0 && kb < 0.1, "a {{\"n\": …}} result is a few tokens, not {kb} KB");
    session.shutdown().await;

    let host = load("[tools.\"noop.noop\"]\ncost_model = { typical_kb = 9.0 }\n");
    let session = Session::new(Arc::clone(&host), "sized");
    let (result, _) = session.call("noop.noop", json!({"n": 1}), &[]).await;
    assert!(!result.is_error, "{result:?}");
    let tool = host.tool("noop.noop").unwrap();
    assert_eq!(host.value_model(&tool).model.cost_model.typical_kb, 9.0);
    session.shutdown().await;
}
