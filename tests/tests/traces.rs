//! OpenTelemetry traces of `quiver serve` (`[telemetry.otlp]`), received by a loopback OTLP/HTTP
//! collector that decodes what quiver sends with the official protobuf definitions
//! (`opentelemetry-proto`): the span tree of a call, the client's trace continued, attributes
//! that name things and never carry an argument value or a token.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use quiver_tests::{plugins_dir, quiver_bin, recorded_reply};
use rmcp::model::{CallToolRequestParams, RequestMetaObject};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// One exported span, as the collector decoded it.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace_id: String,
    span_id: String,
    parent: String,
    kind: i32,
    attributes: HashMap<String, String>,
}

/// Every span the collector received, and the service names they came under.
async fn received(collector: &MockServer) -> (Vec<Span>, Vec<String>) {
    let mut spans = Vec::new();
    let mut services = Vec::new();
    for request in collector.received_requests().await.unwrap_or_default() {
        let export = ExportTraceServiceRequest::decode(request.body.as_slice())
            .expect("an OTLP/HTTP protobuf body");
        for resource_spans in export.resource_spans {
            for attribute in resource_spans.resource.iter().flat_map(|r| &r.attributes) {
                if attribute.key == "service.name" {
                    services.push(text_of(attribute.value.as_ref().and_then(|v| v.value.as_ref())));
                }
            }
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    spans.push(Span {
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent: hex(&span.parent_span_id),
                        kind: span.kind,
                        attributes: span
                            .attributes
                            .iter()
                            .map(|a| {
                                (
                                    a.key.clone(),
                                    text_of(a.value.as_ref().and_then(|v| v.value.as_ref())),
                                )
                            })
                            .collect(),
                    });
                }
            }
        }
    }
    (spans, services)
}

fn text_of(value: Option<&AnyValue>) -> String {
    match value {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A call of `tool` (`github_get_issue` asks for issue 1347) carrying the client's trace
/// context: `traceparent` in `_meta`.
fn traced_call(tool: &'static str, trace_id: &str, client_span: &str) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(tool);
    if tool == "github_get_issue" {
        params = params.with_arguments(
            json!({"owner": "octocat", "repo": "Hello-World", "number": 1347})
                .as_object()
                .unwrap()
                .clone(),
        );
    }
    let mut meta = RequestMetaObject::default();
    meta.0.insert("traceparent".into(), Value::String(format!("00-{trace_id}-{client_span}-01")));
    params.meta = Some(meta);
    params
}

/// A loopback GitHub that serves issue 1347, and a loopback collector that takes every export.
async fn github_and_collector() -> (MockServer, MockServer) {
    let github = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/octocat/Hello-World/issues/1347"))
        .respond_with(recorded_reply(200, "github", "issue.json"))
        .mount(&github)
        .await;
    let collector = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&collector)
        .await;
    (github, collector)
}

/// A call of `github_get_issue` through `quiver serve` on stdio carrying the client's trace
/// context in `_meta`: the server's span continues that trace, the session's span is its child,
/// the provider call the session's; a second, cached call says so; nothing of the arguments or
/// the token is in any attribute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_spans_continue_the_clients_trace_and_carry_no_argument() {
    let (github, collector) = github_and_collector().await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.toml");
    std::fs::write(
        &config,
        format!(
            "[providers.github]\nbase_url = \"{}\"\n[telemetry.otlp]\nendpoint = \"{}\"\n\
             service_name = \"quiver-under-test\"\n\
             [[upstreams]]\nname = \"faults\"\ncommand = \"python3\"\n\
             args = [\"{}\", \"normal\", \"{}\"]\npin = \"off\"\n",
            github.uri(),
            collector.uri(),
            Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/fault_server.py").display(),
            dir.path().display()
        ),
    )
    .unwrap();
    let token = "ghp_traceTestToken0000000000000000001";
    let transport =
        TokioChildProcess::new(tokio::process::Command::new(quiver_bin()).configure(|cmd| {
            cmd.args(["serve", "--config"])
                .arg(&config)
                .arg("--plugins")
                .arg(plugins.path())
                .env("GITHUB_TOKEN", token)
                .env("QUIVER_DATA_DIR", dir.path().join("data"))
                .env_remove("RUST_LOG");
        }))
        .unwrap();
    let client = ().serve(transport).await.expect("initialize");
    let (trace_id, client_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    for _ in 0..2 {
        let params = traced_call("github_get_issue", trace_id, client_span);
        let result = client.call_tool(params).await.unwrap();
        assert_ne!(result.is_error, Some(true), "{result:?}");
    }
    // An upstream is called within the client's trace: its `_meta` carries it on, the parent
    // being quiver's span of that call.
    let result =
        client.call_tool(traced_call("faults_trace", trace_id, client_span)).await.unwrap();
    let upstream_saw = serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // The server ends with its client, sending what it has not sent yet.
    client.cancel().await.unwrap();
    let started = Instant::now();
    let spans = loop {
        let (spans, services) = received(&collector).await;
        let requests = spans.iter().filter(|s| s.name == "tools/call github_get_issue").count();
        if requests == 2 {
            assert!(services.iter().all(|s| s == "quiver-under-test"), "{services:?}");
            break spans;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the spans never came: {spans:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let requests: Vec<&Span> =
        spans.iter().filter(|s| s.name == "tools/call github_get_issue").collect();
    for request in &requests {
        assert_eq!((request.trace_id.as_str(), request.parent.as_str()), (trace_id, client_span));
        assert_eq!(request.kind, 2, "SERVER");
        assert_eq!(request.attributes["mcp.method.name"], "tools/call");
        assert_eq!(request.attributes["gen_ai.tool.name"], "github_get_issue");
    }
    let cached: Vec<&str> =
        requests.iter().map(|r| r.attributes["quiver.cached"].as_str()).collect();
    assert_eq!(cached.iter().filter(|c| **c == "true").count(), 1, "{cached:?}");
    let child_of = |parent: &Span, name: &str| -> Vec<Span> {
        spans.iter().filter(|s| s.parent == parent.span_id && s.name == name).cloned().collect()
    };
    let called = requests.iter().find(|r| r.attributes["quiver.cached"] == "false").unwrap();
    let session = child_of(called, "quiver session");
    assert_eq!(session.len(), 1, "{spans:#?}");
    let provider = child_of(&session[0], "github get_issue");
    assert_eq!(provider.len(), 1, "{spans:#?}");
    assert_eq!(provider[0].trace_id, trace_id);
    // GitHub was asked within the trace too, under the provider call's span.
    let asked: Vec<String> = github
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter_map(|r| r.headers.get("traceparent")?.to_str().ok().map(str::to_owned))
        .collect();
    assert_eq!(asked, [format!("00-{trace_id}-{}-01", provider[0].span_id)]);
    let upstream_call =
        spans.iter().find(|s| s.name == "tools/call trace").expect("the upstream call's span");
    assert_eq!(upstream_call.kind, 3, "CLIENT");
    assert_eq!(upstream_saw, format!("00-{trace_id}-{}-01", upstream_call.span_id));
    for span in &spans {
        for value in span.attributes.values() {
            assert!(!value.contains("Hello-World") && !value.contains(token), "{span:?}");
        }
    }
}

/// Over Streamable HTTP the client's trace comes in the request's `traceparent` header: the
/// server's span of the call continues it (exported while the server runs, by the batch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_requests_traceparent_header_is_continued() {
    let (github, collector) = github_and_collector().await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("quiver.toml"),
        format!(
            "[providers.github]\nbase_url = \"{}\"\n[telemetry.otlp]\nendpoint = \"{}\"\n",
            github.uri(),
            collector.uri()
        ),
    )
    .unwrap();
    let (mut command, port) = quiver_tests::serve_http_command(dir.path(), plugins.path());
    let mut child = command.spawn().expect("spawn quiver serve --http");
    quiver_tests::wait_until_listening(port, "quiver serve --http");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let post = |body: Value, session: Option<String>, traceparent: Option<String>| {
        let url = url.clone();
        async move {
            let mut request = reqwest::Client::new()
                .post(url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .json(&body);
            if let Some(session) = session {
                request = request
                    .header("mcp-session-id", session)
                    .header("mcp-protocol-version", "2025-11-25");
            }
            if let Some(traceparent) = traceparent {
                request = request.header("traceparent", traceparent);
            }
            let response = request.send().await.unwrap();
            let session = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            (response.status().as_u16(), session, response.text().await.unwrap())
        }
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "traced", "version": "1"}}});
    let (status, session, _) = post(init, None, None).await;
    assert_eq!(status, 200);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(initialized, session.clone(), None).await;
    let (trace_id, client_span) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "github_get_issue",
        "arguments": {"owner": "octocat", "repo": "Hello-World", "number": 1347}}});
    let (status, _, answer) =
        post(call, session, Some(format!("00-{trace_id}-{client_span}-01"))).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("Found a bug"), "{answer}");
    let started = Instant::now();
    let request = loop {
        let (spans, _) = received(&collector).await;
        if let Some(span) = spans.into_iter().find(|s| s.name == "tools/call github_get_issue") {
            break span;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no span of the call came");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!((request.trace_id.as_str(), request.parent.as_str()), (trace_id, client_span));
}

/// The collector's side of OTLP/gRPC: every export it is sent.
#[derive(Clone, Default)]
struct GrpcCollector(std::sync::Arc<std::sync::Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceService
    for GrpcCollector
{
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<
        tonic::Response<
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse,
        >,
        tonic::Status,
    > {
        self.0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(Default::default()))
    }
}

/// `protocol = "grpc"`: the same spans reach a collector that speaks OTLP/gRPC (tonic, on the
/// official service definition), the client's trace continued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_reach_a_grpc_collector() {
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer;
    let (github, _) = github_and_collector().await;
    let collector = GrpcCollector::default();
    let incoming =
        tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = incoming.local_addr().unwrap().port();
    let service = TraceServiceServer::new(collector.clone());
    tokio::spawn(
        tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming),
    );
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.toml");
    std::fs::write(
        &config,
        format!(
            "[providers.github]\nbase_url = \"{}\"\n[telemetry.otlp]\n\
             endpoint = \"http://127.0.0.1:{port}\"\nprotocol = \"grpc\"\n",
            github.uri()
        ),
    )
    .unwrap();
    let transport =
        TokioChildProcess::new(tokio::process::Command::new(quiver_bin()).configure(|cmd| {
            cmd.args(["serve", "--config"])
                .arg(&config)
                .arg("--plugins")
                .arg(plugins.path())
                .env("QUIVER_DATA_DIR", dir.path().join("data"))
                .env_remove("RUST_LOG");
        }))
        .unwrap();
    let client = ().serve(transport).await.expect("initialize");
    let (trace_id, client_span) = ("5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8");
    let result =
        client.call_tool(traced_call("github_get_issue", trace_id, client_span)).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    client.cancel().await.unwrap();
    let started = Instant::now();
    loop {
        let exported = collector.0.lock().unwrap().clone();
        let found = exported
            .iter()
            .flat_map(|e| &e.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| &s.spans)
            .find(|s| s.name == "tools/call github_get_issue")
            .map(|s| (hex(&s.trace_id), hex(&s.parent_span_id)));
        if let Some(found) = found {
            assert_eq!(found, (trace_id.to_owned(), client_span.to_owned()));
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no span reached the collector");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
