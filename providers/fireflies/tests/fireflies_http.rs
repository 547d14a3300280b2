//! The provider against a loopback Fireflies: wiremock serves recorded GraphQL responses (from
//! `tests/data/fireflies/`) in Fireflies' real shapes, each test checks what a user of the tool
//! would notice, and the GraphQL request bodies are checked as sent (query text and variables).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use quiver_plugin_sdk::prelude::*;
use quiver_provider_fireflies::{Fireflies, FirefliesConfig};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TOKEN: &str = "ff_s3cr3tApiKeyValue_1234567890abcdef";
const ENDPOINT: &str = "/graphql";
const KICKOFF: &str = "01J2XKQ4TV7Z8R5M9N3B6C1D0E";

fn fixture(name: &str) -> String {
    let path = format!("{}/../../tests/data/fireflies/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// An answer with a recorded GraphQL body.
fn answer(status: u16, name: &str) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .set_body_raw(fixture(name), "application/json; charset=utf-8")
        .insert_header("x-powered-by", "Express")
}

fn ok(name: &str) -> ResponseTemplate {
    answer(200, name)
}

fn config(server: &MockServer) -> FirefliesConfig {
    FirefliesConfig {
        base_url: Some(format!("{}{ENDPOINT}", server.uri())),
        token: Some(TOKEN.into()),
        token_env: Some("FIREFLIES_API_KEY".into()),
        ..Default::default()
    }
}

/// Answers GraphQL requests whose body contains `partial` (e.g. the variables expected).
async fn mount(server: &MockServer, partial: Value, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .and(body_partial_json(partial))
        .respond_with(response)
        .mount(server)
        .await;
}

async fn call(ff: &Fireflies, tool: &str, args: Value) -> ToolResult {
    ff.call(tool, args, ToolContext::default()).await
}

/// The structured result of a call that must succeed.
async fn ok_call(ff: &Fireflies, tool: &str, args: Value) -> Value {
    let result = call(ff, tool, args).await;
    assert!(!result.is_error, "{tool} failed: {}", result.text_content());
    result.structured.expect("a structured result")
}

/// The kind and message of a call that must fail.
async fn failing_call(ff: &Fireflies, tool: &str, args: Value) -> (ToolErrorKind, String) {
    let result = call(ff, tool, args).await;
    assert!(result.is_error, "{tool} succeeded: {}", result.text_content());
    let message = result.text_content();
    assert!(!message.contains(TOKEN), "the key leaked into: {message}");
    (result.error_kind.expect("an error kind"), message)
}

/// The GraphQL bodies the server received, in order.
async fn sent(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).expect("a JSON body"))
        .collect()
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

#[tokio::test(flavor = "multi_thread")]
async fn list_transcripts_sends_the_filters_and_reads_a_compact_page() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .and(header("content-type", "application/json"))
        .and(body_partial_json(json!({"variables": {"skip": 0}})))
        .respond_with(ok("transcripts_list.json"))
        .expect(1)
        .mount(&server)
        .await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let page = ok_call(
        &ff,
        "list_transcripts",
        json!({
            "from_date": "2024-07-01", "to_date": "2024-07-31",
            "participants": "priya@pinecrestlodge.example", "limit": 3,
        }),
    )
    .await;

    let body = &sent(&server).await[0];
    assert_eq!(
        body["variables"],
        json!({
            "fromDate": "2024-07-01T00:00:00.000Z",
            "toDate": "2024-07-31T23:59:59.999Z",
            "participants": ["priya@pinecrestlodge.example"],
            "limit": 3,
            "skip": 0,
        })
    );
    let query = body["query"].as_str().unwrap();
    for part in [
        "query ListTranscripts($fromDate: DateTime, $toDate: DateTime, $participants: [String!], \
         $limit: Int, $skip: Int)",
        "transcripts(fromDate: $fromDate, toDate: $toDate, participants: $participants, \
         limit: $limit, skip: $skip)",
        "id title date dateString duration organizer_email participants summary { gist }",
    ] {
        assert!(query.contains(part), "`{part}` missing from {query}");
    }
    assert!(!query.contains("sentences"), "a listing never asks for sentences");

    assert_eq!(page["count"], 3);
    assert_eq!(page["more"], true);
    assert_eq!(page["next_skip"], 3);
    let first = &page["transcripts"][0];
    assert_eq!(first["id"], KICKOFF);
    assert_eq!(first["title"], "Pinecrest Lodge kickoff");
    assert_eq!(first["date"], "2024-07-08T22:13:46.660Z");
    assert_eq!(first["duration_min"], 31.7);
    assert_eq!(first["organizer"], "jordan.vale@harborlane.example");
    assert_eq!(
        first["participants"],
        json!([
            "jordan.vale@harborlane.example",
            "priya@pinecrestlodge.example",
            "sam.ortiz@pinecrestlodge.example"
        ]),
        "comma-joined entries are split and repeats dropped"
    );
    assert!(first["gist"].as_str().unwrap().starts_with("Kickoff covering scope"));
    assert!(page["transcripts"][1].get("gist").is_none(), "a null gist is left out");
    assert!(page["transcripts"][2].get("participants").is_none(), "no empty lists");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_next_page_is_asked_for_with_next_skip_and_the_last_page_says_so() {
    let server = MockServer::start().await;
    mount(&server, json!({"variables": {"skip": 0}}), ok("transcripts_list.json")).await;
    mount(&server, json!({"variables": {"skip": 3}}), ok("transcripts_page2.json")).await;
    let ff = Fireflies::new(config(&server)).unwrap();

    let first = ok_call(&ff, "list_transcripts", json!({"limit": 3, "mine": true})).await;
    let next = first["next_skip"].clone();
    let last =
        ok_call(&ff, "list_transcripts", json!({"limit": 3, "mine": true, "skip": next})).await;
    assert_eq!(last["skip"], 3);
    assert_eq!(last["count"], 1);
    assert_eq!(last["more"], false);
    assert_eq!(last["next_skip"], Value::Null);
    assert_eq!(last["transcripts"][0]["title"], "Pricing review");

    let bodies = sent(&server).await;
    assert_eq!(bodies[1]["variables"], json!({"mine": true, "limit": 3, "skip": 3}));
    assert!(bodies[1]["query"].as_str().unwrap().contains("mine: $mine"));
}

#[tokio::test(flavor = "multi_thread")]
async fn search_transcripts_sends_keyword_and_scope_and_echoes_them() {
    let server = MockServer::start().await;
    mount(&server, json!({"variables": {"keyword": "pricing"}}), ok("search_transcripts.json"))
        .await;
    let ff = Fireflies::new(config(&server)).unwrap();

    let found = ok_call(&ff, "search_transcripts", json!({"keyword": " pricing "})).await;
    assert_eq!(found["keyword"], "pricing");
    assert_eq!(found["scope"], "all");
    assert_eq!(found["count"], 2);
    assert_eq!(found["more"], false);
    assert_eq!(found["transcripts"][1]["id"], "01J1ZA2B4C6D8E0F2G4H6J8K0M");
    assert_eq!(
        found["transcripts"][1]["date"], "2024-06-27T16:00:00Z",
        "without dateString the millisecond date is converted"
    );

    let titles = ok_call(
        &ff,
        "search_transcripts",
        json!({"query": "pricing", "scope": "title", "from_date": "2024-06-01T00:00:00.000Z"}),
    )
    .await;
    assert_eq!(titles["scope"], "title");

    let bodies = sent(&server).await;
    assert_eq!(
        bodies[0]["variables"],
        json!({"keyword": "pricing", "scope": "all", "limit": 20, "skip": 0})
    );
    let query = bodies[0]["query"].as_str().unwrap();
    assert!(
        query.starts_with("query SearchTranscripts($keyword: String, $scope: String"),
        "{query}"
    );
    assert!(query.contains("transcripts(keyword: $keyword, scope: $scope"), "{query}");
    assert_eq!(
        bodies[1]["variables"],
        json!({
            "keyword": "pricing", "scope": "title",
            "fromDate": "2024-06-01T00:00:00.000Z", "limit": 20, "skip": 0,
        })
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn get_transcript_returns_the_summary_without_fetching_sentences() {
    let server = MockServer::start().await;
    mount(&server, json!({"variables": {"id": KICKOFF}}), ok("transcript.json")).await;
    let ff = Fireflies::new(config(&server)).unwrap();

    let t = ok_call(&ff, "get_transcript", json!({"transcript_id": KICKOFF})).await;
    let body = &sent(&server).await[0];
    assert_eq!(body["variables"], json!({"id": KICKOFF}));
    let query = body["query"].as_str().unwrap();
    assert!(query.starts_with("query GetTranscript($id: String!) { transcript(id: $id) {"));
    assert!(query.contains("summary { overview action_items keywords outline }"), "{query}");
    assert!(query.contains("speakers { name }"), "{query}");
    assert!(!query.contains("sentences"), "sentences are not fetched unless asked: {query}");

    assert_eq!(t["id"], KICKOFF);
    assert_eq!(t["speakers"], json!(["Jordan Vale", "Priya Okafor", "Sam Ortiz"]));
    assert!(t.get("host").is_none(), "the host is the organiser");
    assert!(t["overview"].as_str().unwrap().contains("team tier at $18"));
    assert_eq!(t["keywords"], json!(["kickoff", "scope", "pricing", "Stripe", "launch timeline"]));
    assert_eq!(
        t["action_items"],
        json!([
            {"owner": "Jordan Vale", "item": "Send the statement of work to Priya (03:14)"},
            {"owner": "Jordan Vale", "item": "Share the pricing deck with Sam (05:40)"},
            {
                "owner": "Priya Okafor",
                "item": "Confirm the August 19 launch date with the owners (21:02)",
            },
            {
                "owner": "Sam Ortiz",
                "item": "Export the current guest list for the migration (27:45)",
            },
        ])
    );
    assert!(t["outline"].as_str().unwrap().starts_with("**Scope** (00:00 - 08:30)"));
    assert!(t["transcript_url"].as_str().unwrap().ends_with(KICKOFF));
    for absent in ["sentences", "sentences_total", "next_sentence_index", "note"] {
        assert!(t.get(absent).is_none(), "`{absent}` without include_sentences");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sentences_come_only_when_asked_capped_with_the_index_to_read_on() {
    let server = MockServer::start().await;
    mount(&server, json!({"variables": {"id": KICKOFF}}), ok("transcript_with_sentences.json"))
        .await;
    let ff = Fireflies::new(config(&server)).unwrap();

    let t = ok_call(
        &ff,
        "get_transcript",
        json!({"id": KICKOFF, "include_sentences": true, "max_sentences": 5}),
    )
    .await;
    let query = sent(&server).await[0]["query"].as_str().unwrap().to_owned();
    assert!(query.contains("sentences { index speaker_name text start_time }"), "{query}");
    assert_eq!(
        t["sentences"],
        json!([
            "[00:01] Jordan Vale: Thanks for making the time, everyone.",
            "[00:03] Priya Okafor: Happy to be here. Sam is joining from the front desk.",
            "[00:07] Sam Ortiz: Hi all, I can hear you fine.",
            "[00:09] Jordan Vale: Let's start with scope: the booking site, the guest portal and \
             payments through Stripe.",
            "[00:16] Priya Okafor: Payments are the part the owners care about most.",
        ])
    );
    assert_eq!(t["sentences_total"], 8);
    assert_eq!(t["next_sentence_index"], 5);
    assert!(t["note"].as_str().unwrap().contains("sentences_from=5"), "{}", t["note"]);
    assert!(t["action_items"].is_array(), "the summary comes too");

    let rest = ok_call(&ff, "get_transcript", json!({"id": KICKOFF, "sentences_from": 5})).await;
    let lines = rest["sentences"].as_array().unwrap();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[2], "[31:40] Jordan Vale: Great, I'll send the statement of work today.");
    assert!(rest.get("next_sentence_index").is_none(), "all read");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_transcript_is_named() {
    let server = MockServer::start().await;
    mount(&server, json!({"variables": {"id": "01NOPE"}}), ok("error_object_not_found.json")).await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let (kind, message) = failing_call(&ff, "get_transcript", json!({"id": "01NOPE"})).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no transcript `01NOPE` in fireflies"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_key_names_the_variable_to_fix_and_never_the_key() {
    let server = MockServer::start().await;
    // Fireflies does not echo keys, but a proxy might: the message must still hide it.
    let body = fixture("error_auth_failed.json")
        .replace("Invalid API key", &format!("Invalid API key {TOKEN}"));
    mount(
        &server,
        json!({"variables": {"id": KICKOFF}}),
        ResponseTemplate::new(401).set_body_raw(body, "application/json"),
    )
    .await;
    let ff = Fireflies::new(FirefliesConfig {
        token_env: Some("WORK_FF_KEY".into()),
        ..config(&server)
    })
    .unwrap();
    let (kind, message) = failing_call(&ff, "get_transcript", json!({"id": KICKOFF})).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(
        message.starts_with("fireflies rejected the API key (auth_failed: Invalid API key ***)"),
        "{message}"
    );
    assert!(
        message.contains("set WORK_FF_KEY (the variable named by [providers.fireflies] token_env)"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_key_no_request_is_made_and_the_hosts_variable_is_named() {
    let server = MockServer::start().await;
    let ff = Fireflies::new(FirefliesConfig {
        token: None,
        token_env: Some("FIREFLIES_TOKEN".into()),
        ..config(&server)
    })
    .unwrap();
    let (kind, message) = failing_call(&ff, "list_transcripts", json!({})).await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.contains("no Fireflies API key is configured"), "{message}");
    assert!(message.contains("set FIREFLIES_TOKEN"), "{message}");
    assert!(server.received_requests().await.unwrap().is_empty());

    let unnamed =
        Fireflies::new(FirefliesConfig { token: None, token_env: None, ..config(&server) })
            .unwrap();
    let (_, message) = failing_call(&unnamed, "list_transcripts", json!({})).await;
    assert!(message.contains("set FIREFLIES_API_KEY"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_privileges_and_bad_arguments_are_reported_as_fireflies_explains_them() {
    let server = MockServer::start().await;
    mount(
        &server,
        json!({"variables": {"organizers": ["ceo@harborlane.example"]}}),
        ok("error_require_elevated_privilege.json"),
    )
    .await;
    mount(
        &server,
        json!({"variables": {"fromDate": "2024-02-30T00:00:00.000Z"}}),
        answer(400, "error_invalid_arguments.json"),
    )
    .await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let (kind, message) =
        failing_call(&ff, "list_transcripts", json!({"organizers": ["ceo@harborlane.example"]}))
            .await;
    assert_eq!(kind, ToolErrorKind::Unauthorized);
    assert!(message.contains("require_elevated_privilege"), "{message}");
    assert!(message.contains("team admin"), "{message}");

    let (kind, message) =
        failing_call(&ff, "list_transcripts", json!({"from_date": "2024-02-30"})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("fromDate must be a Date instance"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_short_rate_limit_is_waited_out() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(answer(429, "error_too_many_requests.json").insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(ok("transcript.json"))
        .expect(1)
        .mount(&server)
        .await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let started = Instant::now();
    let t = ok_call(&ff, "get_transcript", json!({"id": KICKOFF})).await;
    assert_eq!(t["title"], "Pinecrest Lodge kickoff");
    assert!(started.elapsed() >= Duration::from_secs(1), "retried before Retry-After");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_that_persists_is_retried_twice_then_reported() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(answer(429, "error_too_many_requests.json").insert_header("retry-after", "1"))
        .expect(3)
        .mount(&server)
        .await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let (kind, message) = failing_call(&ff, "list_transcripts", json!({})).await;
    assert_eq!(kind, ToolErrorKind::RateLimited);
    assert!(message.contains("even after waiting 2 s"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_rate_limit_in_the_graphql_errors_fails_fast_saying_when_to_retry() {
    let server = MockServer::start().await;
    // Fireflies answers HTTP 200 with `too_many_requests` and an epoch-millisecond retryAfter.
    let body = fixture("error_too_many_requests.json")
        .replace("1720479600000", &(now_ms() + 3_600_000).to_string());
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "application/json"))
        .expect(1)
        .mount(&server)
        .await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let started = Instant::now();
    let (kind, message) =
        failing_call(&ff, "search_transcripts", json!({"keyword": "pricing"})).await;
    assert!(started.elapsed() < Duration::from_secs(3), "waited {:?}", started.elapsed());
    assert_eq!(kind, ToolErrorKind::RateLimited);
    assert!(message.contains("the transcript search `pricing`"), "{message}");
    assert!(message.contains("Too many requests"), "{message}");
    assert!(message.contains("fireflies asks to retry in 60 min (at 20"), "{message}");
    assert!(message.contains("max_retry_wait_s = 10 s"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_past_the_calls_deadline_is_not_waited_for() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(answer(429, "error_too_many_requests.json").insert_header("retry-after", "5"))
        .expect(1)
        .mount(&server)
        .await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let ctx = ToolContext { timeout_ms: Some(2000), ..Default::default() };
    let started = Instant::now();
    let result = ff.call("get_transcript", json!({"id": KICKOFF}), ctx).await;
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
    mount(
        &server,
        json!({"variables": {"id": "01TRUNCATED"}}),
        ResponseTemplate::new(200)
            .set_body_raw("{\"data\": {\"transcript\": {\"id\": ", "application/json"),
    )
    .await;
    mount(
        &server,
        json!({"variables": {"id": "01BADGATEWAY"}}),
        ResponseTemplate::new(502).set_body_raw("<html>Bad Gateway</html>", "text/html"),
    )
    .await;
    mount(
        &server,
        json!({"variables": {"id": "01WRONGSHAPE"}}),
        ResponseTemplate::new(200).set_body_json(json!({"data": {"transcript": {"title": 7}}})),
    )
    .await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let (kind, message) = failing_call(&ff, "get_transcript", json!({"id": "01TRUNCATED"})).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(
        message.starts_with("fireflies returned an unreadable body for transcript `01TRUNCATED`"),
        "{message}"
    );
    let (kind, message) = failing_call(&ff, "get_transcript", json!({"id": "01BADGATEWAY"})).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("fireflies failed with 502 Bad Gateway"), "{message}");
    let (kind, message) = failing_call(&ff, "get_transcript", json!({"id": "01WRONGSHAPE"})).await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(message.contains("unreadable body"), "{message}");
}

/// A query (every call is a POST, and every tool sends a query) that meets a passing fault (a
/// 503) is sent again after a short jittered pause and succeeds; the user never sees the fault.
/// Mutations are never sent twice: see the client's unit tests, as no tool sends one.
#[tokio::test(flavor = "multi_thread")]
async fn a_query_answered_503_once_is_sent_again_and_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(
            ResponseTemplate::new(503)
                .set_body_raw("<html>Service Unavailable</html>", "text/html"),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(ok("transcript.json"))
        .mount(&server)
        .await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let t = ok_call(&ff, "get_transcript", json!({"id": KICKOFF})).await;
    assert_eq!(t["title"], "Pinecrest Lodge kickoff");
    assert_eq!(server.received_requests().await.unwrap().len(), 2, "one retry");
}

/// A body past `max_response_mb` is refused with the setting named, whether its length is
/// declared (refused unread) or it arrives chunked without one (cut off at the limit).
#[tokio::test(flavor = "multi_thread")]
async fn a_body_past_max_response_mb_is_refused() {
    let server = MockServer::start().await;
    let huge =
        json!({"data": {"transcript": {"id": KICKOFF, "title": "x".repeat(2 * 1024 * 1024)}}})
            .to_string();
    mount(
        &server,
        json!({"variables": {"id": "01DECLARED"}}),
        ResponseTemplate::new(200).set_body_raw(huge.clone(), "application/json"),
    )
    .await;
    // An explicit `Transfer-Encoding: chunked` makes wiremock's server send no Content-Length.
    mount(
        &server,
        json!({"variables": {"id": "01CHUNKED"}}),
        ResponseTemplate::new(200)
            .set_body_raw(huge, "application/json")
            .insert_header("transfer-encoding", "chunked"),
    )
    .await;
    let chunked = reqwest::Client::new()
        .post(format!("{}{ENDPOINT}", server.uri()))
        .json(&json!({"variables": {"id": "01CHUNKED"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(chunked.content_length(), None, "the fake must not declare a length");
    let ff =
        Fireflies::new(FirefliesConfig { max_response_mb: Some(1), ..config(&server) }).unwrap();
    for id in ["01DECLARED", "01CHUNKED"] {
        let before = server.received_requests().await.unwrap().len();
        let (kind, message) = failing_call(&ff, "get_transcript", json!({"id": id})).await;
        assert_eq!(kind, ToolErrorKind::Upstream);
        assert!(message.contains(&format!("for transcript `{id}`")), "{message}");
        assert!(message.contains("max_response_mb = 1 MB"), "{message}");
        let sent = server.received_requests().await.unwrap().len() - before;
        assert_eq!(sent, 1, "{id}: a body too large is not a passing fault, so never retried");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_fireflies_times_out_after_timeout_s() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(ok("transcript.json").set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let ff = Fireflies::new(FirefliesConfig { timeout_s: Some(1), ..config(&server) }).unwrap();
    let started = Instant::now();
    let (kind, message) = failing_call(&ff, "get_transcript", json!({"id": KICKOFF})).await;
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(kind, ToolErrorKind::Timeout);
    assert!(message.contains("within 1 s") && message.contains("timeout_s"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_are_refused_before_any_request() {
    let server = MockServer::start().await;
    let ff = Fireflies::new(config(&server)).unwrap();
    for (tool, args, says) in [
        ("list_transcripts", json!({"from_date": "last tuesday"}), "`from_date` must be a day"),
        ("list_transcripts", json!({"participants": ["Priya"]}), "email addresses"),
        ("list_transcripts", json!({"limt": 5}), "unknown field `limt`"),
        ("search_transcripts", json!({"keyword": "  "}), "`keyword` is empty"),
        ("search_transcripts", json!({"keyword": "x", "scope": "everything"}), "unknown variant"),
        ("get_transcript", json!({"id": "../users"}), "`id` must be a Fireflies transcript id"),
    ] {
        let (kind, message) = failing_call(&ff, tool, args).await;
        assert_eq!(kind, ToolErrorKind::InvalidArguments, "{message}");
        assert!(message.contains(says), "{tool}: {message}");
    }
    assert!(server.received_requests().await.unwrap().is_empty());
}

#[test]
fn configuration_typos_are_errors_and_the_key_is_not_printed() {
    let err =
        serde_json::from_value::<FirefliesConfig>(json!({"base_ur": "https://x"})).err().unwrap();
    assert!(err.to_string().contains("unknown field `base_ur`"), "{err}");
    let config: FirefliesConfig = serde_json::from_value(json!({
        "token": TOKEN, "token_env": "FIREFLIES_TOKEN", "timeout_s": 10, "max_retry_wait_s": 5,
        "ca_file": "/etc/ssl/proxy-ca.pem", "max_response_mb": 8,
    }))
    .unwrap();
    assert!(!format!("{config:?}").contains(TOKEN));
    assert_eq!(config.max_response_mb, Some(8));
}

/// A private CA's PEM file is read at start: a wrong path or a file without a usable certificate
/// is a start-up error naming `ca_file`, a real CA certificate is accepted.
#[test]
fn ca_file_is_checked_at_start() {
    let with_ca =
        |ca_file: &str| FirefliesConfig { ca_file: Some(ca_file.into()), ..Default::default() };
    let ca = format!("{}/../../tests/data/tls/ca.pem", env!("CARGO_MANIFEST_DIR"));
    assert!(Fireflies::new(with_ca(&ca)).is_ok());
    let err = Fireflies::new(with_ca("/nonexistent/ca.pem")).err().unwrap();
    assert!(
        err.to_string().contains("[providers.fireflies] ca_file `/nonexistent/ca.pem`"),
        "{err}"
    );
    let bad =
        std::env::temp_dir().join(format!("quiver-fireflies-bad-ca-{}.pem", std::process::id()));
    std::fs::write(&bad, "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n").unwrap();
    let err = Fireflies::new(with_ca(bad.to_str().unwrap())).err().unwrap();
    std::fs::remove_file(&bad).unwrap();
    assert!(err.to_string().contains("[providers.fireflies] ca_file"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_base_urls_are_refused_at_start_and_a_missing_key_is_not() {
    let err = Fireflies::new(FirefliesConfig {
        base_url: Some("api.fireflies.ai/graphql".into()),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(err.to_string().contains("https://api.fireflies.ai/graphql"), "{err}");
    assert!(Fireflies::new(FirefliesConfig::default()).is_ok(), "no key is not an error");
    let tools = Fireflies::tools();
    assert!(tools.iter().all(|t| t.output_schema.is_some() && t.group.is_some()));
    let get = tools.iter().find(|t| t.name == "get_transcript").unwrap();
    assert!(
        get.input_schema["properties"]["include_sentences"]["description"]
            .as_str()
            .unwrap()
            .contains("False by default"),
        "argument docs reach the schema"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn users_are_listed_and_one_user_defaults_to_the_keys_owner() {
    let server = MockServer::start().await;
    let users_query = "query Users { users { user_id email name num_transcripts recent_meeting \
                       minutes_consumed is_admin } }";
    mount(&server, json!({ "query": users_query }), ok("users.json")).await;
    mount(
        &server,
        json!({"variables": {"id": "01HZGONE"}}),
        ok("error_object_not_found.json").set_body_raw(
            fixture("error_object_not_found.json")
                .replace("Transcript not found", "User not found")
                .replace("\"transcript\": null", "\"user\": null")
                .replace("\"Transcript\"", "\"User\""),
            "application/json",
        ),
    )
    .await;
    // Last: wiremock answers with the first mock that matches, and `{}` matches any variables.
    mount(&server, json!({"variables": {}}), ok("user.json")).await;
    let ff = Fireflies::new(config(&server)).unwrap();

    let users = ok_call(&ff, "list_users", json!({})).await;
    assert_eq!(users["count"], 2);
    assert_eq!(
        users["users"][0],
        json!({"user_id": "01HZJORDAN000000000000000A", "name": "Jordan Vale",
               "email": "jordan.vale@harborlane.example", "admin": true, "transcripts": 142,
               "minutes_consumed": 5230, "recent_meeting": KICKOFF})
    );
    assert!(users["users"][1].get("admin").is_none(), "false flags are left out");
    assert_eq!(users["users"][1]["minutes_consumed"], 1211, "minutes are whole");
    assert!(!users.to_string().contains("members"), "group members are not fetched");

    let me = ok_call(&ff, "get_user", json!({})).await;
    assert_eq!(me["name"], "Jordan Vale");
    assert_eq!(me["integrations"], json!(["zoom", "google_calendar", "slack"]));
    assert_eq!(me["groups"], json!(["Sales", "leadership"]));
    let bodies = sent(&server).await;
    let query = bodies[1]["query"].as_str().unwrap();
    assert!(query.starts_with("query User { user {"), "no id for the key's owner: {query}");

    let (kind, message) = failing_call(&ff, "get_user", json!({"user_id": "01HZGONE"})).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert!(message.starts_with("no user `01HZGONE` in fireflies"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn soundbites_are_listed_mine_by_default_and_paged_and_one_is_read_with_its_captions() {
    let server = MockServer::start().await;
    mount(&server, json!({"variables": {"mine": true, "limit": 3, "skip": 0}}), ok("bites.json"))
        .await;
    mount(&server, json!({"variables": {"id": "01J3BITE0A1B2C3D4E5F6G7H8J"}}), ok("bite.json"))
        .await;
    mount(&server, json!({"variables": {"id": "01J3NOPE"}}), ok("error_bite_not_found.json")).await;
    let ff = Fireflies::new(config(&server)).unwrap();

    let page = ok_call(&ff, "list_soundbites", json!({"limit": 3})).await;
    let query = sent(&server).await[0]["query"].as_str().unwrap().to_owned();
    assert!(
        query.starts_with(
            "query Bites($mine: Boolean, $limit: Int, $skip: Int) { bites(mine: \
                           $mine, limit: $limit, skip: $skip) {"
        ),
        "{query}"
    );
    assert_eq!((page["count"].as_u64(), page["more"].as_bool()), (Some(3), Some(true)));
    assert_eq!(page["next_skip"], 3);
    let first = &page["soundbites"][0];
    assert_eq!(first["name"], "Team tier accepted");
    assert_eq!(first["transcript_id"], KICKOFF);
    assert_eq!(first["span"], "[03:14]-[04:01]");
    assert_eq!(first["created_by"], "Jordan Vale");
    let second = &page["soundbites"][1];
    assert_eq!(second["span"], "[21:02]-[21:50]", "times in strings read too");
    assert_eq!(second["created_at"], "2024-07-09T08:15:02Z", "epoch milliseconds become ISO");
    assert!(second.get("summary").is_none());

    let bite = ok_call(&ff, "get_soundbite", json!({"id": "01J3BITE0A1B2C3D4E5F6G7H8J"})).await;
    assert_eq!(bite["status"], "ready");
    assert_eq!(
        bite["captions"],
        json!([
            "[03:14] Jordan Vale: So the team tier is eighteen dollars a seat.",
            "[03:21] Priya Okafor: That works for us, let's go with the team tier.",
            "[03:36] Priya Okafor: And we can drop the starter tier entirely.",
        ])
    );
    assert!(!bite.to_string().contains("speaker_id"));

    let (kind, message) = failing_call(&ff, "get_soundbite", json!({"id": "01J3NOPE"})).await;
    assert_eq!(kind, ToolErrorKind::NotFound);
    assert_eq!(
        message,
        "no soundbite `01J3NOPE` in fireflies (or the API key's user cannot see it)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_soundbites_of_one_meeting_are_asked_for_without_mine() {
    let server = MockServer::start().await;
    mount(&server, json!({"variables": {"transcriptId": KICKOFF}}), ok("bites.json")).await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let page = ok_call(&ff, "list_soundbites", json!({"transcript_id": KICKOFF})).await;
    assert_eq!(page["more"], false, "3 of a page of 20");
    let body = &sent(&server).await[0];
    assert_eq!(body["variables"], json!({"transcriptId": KICKOFF, "limit": 20, "skip": 0}));
    assert!(body["query"].as_str().unwrap().contains("transcript_id: $transcriptId"));
}

#[tokio::test(flavor = "multi_thread")]
async fn ai_app_outputs_are_listed_ten_at_a_time_with_float_paging() {
    let server = MockServer::start().await;
    mount(
        &server,
        json!({"variables": {"transcriptId": KICKOFF, "skip": 0, "limit": 3}}),
        ok("apps.json"),
    )
    .await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let page =
        ok_call(&ff, "list_app_outputs", json!({"transcript_id": KICKOFF, "limit": 3})).await;
    let query = sent(&server).await[0]["query"].as_str().unwrap().to_owned();
    assert!(
        query.starts_with(
            "query Apps($transcriptId: String, $skip: Float, $limit: Float) { \
                           apps(transcript_id: $transcriptId, skip: $skip, limit: $limit) { \
                           outputs {"
        ),
        "{query}"
    );
    assert!(!query.contains("user_id"), "{query}");
    assert_eq!(page["more"], true);
    assert_eq!(page["next_skip"], 3);
    assert_eq!(
        page["outputs"][0],
        json!({
            "title": "Sales objections", "transcript_id": KICKOFF,
            "app_id": "app_sales_objections", "created_at": "2024-07-08T22:33:20Z",
            "prompt": "List every objection the customer raised and how it was answered.",
            "response": "1. Price per seat: answered with the team tier at $18.\n2. Migration \
                         effort: Sam will export the guest list.",
        })
    );
    let (kind, message) =
        failing_call(&ff, "list_app_outputs", json!({"transcript_id": "../x"})).await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert!(message.contains("`transcript_id` must be a Fireflies id"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn upload_audio_sends_the_input_once_and_says_what_happens_next() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .and(header("authorization", format!("Bearer {TOKEN}").as_str()))
        .respond_with(ok("upload_audio.json"))
        .expect(1)
        .mount(&server)
        .await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let queued = ok_call(
        &ff,
        "upload_audio",
        json!({
            "url": "https://media.harborlane.example/board-review.mp3",
            "title": " Board review 2024-07-15 ", "language": "en",
            "attendees": [
                {"name": "Jordan Vale", "email": "jordan.vale@harborlane.example"},
                {"name": "Amara Chen", "email": " ", "phone": ""},
            ],
        }),
    )
    .await;
    assert_eq!(queued["title"], "Board review 2024-07-15");
    assert_eq!(queued["message"], "Uploaded audio has been queued for processing.");
    assert!(queued["next"].as_str().unwrap().contains("list_transcripts"));
    let body = &sent(&server).await[0];
    assert_eq!(
        body["query"],
        "mutation UploadAudio($input: AudioUploadInput) { uploadAudio(input: $input) { success \
         title message } }"
    );
    assert_eq!(
        body["variables"],
        json!({"input": {
            "url": "https://media.harborlane.example/board-review.mp3",
            "title": "Board review 2024-07-15",
            "custom_language": "en",
            "attendees": [
                {"displayName": "Jordan Vale", "email": "jordan.vale@harborlane.example"},
                {"displayName": "Amara Chen"},
            ],
        }})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_upload_quotes_fireflies_and_is_never_sent_twice() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ENDPOINT))
        .respond_with(answer(400, "error_upload_invalid_url.json"))
        .expect(1)
        .mount(&server)
        .await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let (kind, message) = failing_call(
        &ff,
        "upload_audio",
        json!({"url": "https://drive.example/preview?id=1", "title": "Standup"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::InvalidArguments);
    assert_eq!(
        message,
        "fireflies rejected the arguments of the upload of `Standup` (invalid_arguments: \
         Invalid argument(s) were provided): url must be a URL address"
    );

    let refused = Fireflies::new(config(&server)).unwrap();
    for (args, expected) in [
        (json!({"url": "http://media.example/a.mp3", "title": "x"}), "public https:// URL"),
        (json!({"url": "https://media.example/a.mp3", "title": " "}), "`title` must be"),
        (
            json!({"url": "https://media.example/a.mp3", "title": "x", "language": "english"}),
            "language code",
        ),
        (
            json!({"url": "https://media.example/a.mp3", "title": "x",
                   "attendees": [{"email": "not an email"}]}),
            "takes email addresses",
        ),
    ] {
        let (kind, message) = failing_call(&refused, "upload_audio", args).await;
        assert_eq!(kind, ToolErrorKind::InvalidArguments, "{message}");
        assert!(message.contains(expected), "{message}");
    }
    assert_eq!(server.received_requests().await.unwrap().len(), 1, "only the first was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upload_fireflies_declines_is_reported_with_its_message() {
    let server = MockServer::start().await;
    mount(
        &server,
        json!({"variables": {"input": {"title": "Standup"}}}),
        ResponseTemplate::new(200).set_body_json(json!({"data": {"uploadAudio": {
            "success": false, "title": "Standup",
            "message": format!("File too large for your plan ({TOKEN})"),
        }}})),
    )
    .await;
    let ff = Fireflies::new(config(&server)).unwrap();
    let (kind, message) = failing_call(
        &ff,
        "upload_audio",
        json!({"url": "https://media.example/standup.mp4", "title": "Standup"}),
    )
    .await;
    assert_eq!(kind, ToolErrorKind::Upstream);
    assert!(
        message.starts_with("fireflies did not accept the upload of `Standup`: File too large"),
        "{message}"
    );
}
