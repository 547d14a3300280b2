//! `quiver enrich`, `quiver graph` and `quiver sample` through the real binary, the real plugins,
//! a real sled store and loopback model endpoints that speak the OpenAI and Ollama shapes.

use std::path::{Path, PathBuf};
use std::process::Output;

use quiver_tests::{plugins_dir, quiver, quiver_bin, texts, ALL_PROVIDERS};
use serde_json::{json, Value};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// A config, a plugins dir and a data dir for one test.
struct Setup {
    plugins: tempfile::TempDir,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(providers: &[&str], config: &str) -> Self {
        let setup = Self { plugins: plugins_dir(providers), dir: tempfile::tempdir().unwrap() };
        setup.write_config(config);
        setup
    }

    fn write_config(&self, extra: &str) {
        // Jira needs a site; nothing here calls it.
        let text = format!("[providers.jira]\nbase_url = \"http://127.0.0.1:9\"\n{extra}");
        std::fs::write(self.dir.path().join("quiver.toml"), text).unwrap();
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn args<'a>(&'a self, args: &[&'a str]) -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        all.extend([
            "--config".into(),
            self.dir.path().join("quiver.toml").to_string_lossy().into_owned(),
            "--plugins".into(),
            self.plugins.path().to_string_lossy().into_owned(),
        ]);
        all
    }

    fn run(&self, args: &[&str]) -> Output {
        let args = self.args(args);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let data = self.data_dir();
        quiver(&args, &[("QUIVER_DATA_DIR", data.to_str().unwrap())])
    }

    /// `quiver enrich --json`, off the async workers so loopback servers keep serving.
    async fn enrich(&self, extra: &[&str]) -> (Value, Output) {
        let mut args = vec!["enrich".to_owned(), "--json".to_owned()];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let args = self.args(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let data = self.data_dir();
        let out = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            quiver(&args, &[("QUIVER_DATA_DIR", data.to_str().unwrap())])
        })
        .await
        .unwrap();
        let (stdout, stderr) = texts(&out);
        let summary = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n{stderr}"));
        (summary, out)
    }
}

fn pass<'a>(summary: &'a Value, kind: &str) -> &'a Value {
    summary["passes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} pass in {summary:#}"))
}

fn counts(summary: &Value, kind: &str) -> (u64, u64, usize) {
    let p = pass(summary, kind);
    (
        p["computed"].as_u64().unwrap(),
        p["reused"].as_u64().unwrap(),
        p["failed"].as_array().unwrap().len(),
    )
}

fn static_source(dir: &Path, tools: &Value) -> String {
    let file = dir.join("tools.json");
    std::fs::write(&file, tools.to_string()).unwrap();
    format!("[[sources]]\npath = \"{}\"\nname = \"docs\"\n", file.display())
}

#[tokio::test(flavor = "multi_thread")]
async fn bundled_providers_are_enriched_once_and_then_reused() {
    // All four declared, out of order; the providers ship output schemas, so the model is
    // never asked.
    let lm = MockServer::start().await;
    let config = format!(
        "[[enrichments]]\ntype = \"neighbors\"\n[[enrichments]]\ntype = \"dataflow\"\n\
         [[enrichments]]\ntype = \"embeddings\"\n{}",
        output_parameters_config(&lm, "ollama", "")
    );
    let setup = Setup::new(&ALL_PROVIDERS, &config);
    let (first, out) = setup.enrich(&[]).await;
    assert!(out.status.success(), "{}", texts(&out).1);
    let tools = first["tools"].as_u64().unwrap();
    assert!(tools > 50, "all five providers' tools: {first:#}");
    let order: Vec<&str> =
        first["passes"].as_array().unwrap().iter().map(|p| p["kind"].as_str().unwrap()).collect();
    assert_eq!(order, ["output_parameters", "embeddings", "neighbors", "dataflow"]);
    assert_eq!(counts(&first, "output_parameters"), (0, 0, 0));
    assert!(lm.received_requests().await.unwrap().is_empty(), "tools with schemas cost nothing");
    for kind in ["embeddings", "dataflow", "neighbors"] {
        assert_eq!(counts(&first, kind), (tools, 0, 0), "{kind}: {first:#}");
    }
    assert_eq!(first["store"], "ok");

    let (second, _) = setup.enrich(&[]).await;
    for kind in ["embeddings", "dataflow", "neighbors"] {
        assert_eq!(counts(&second, kind), (0, tools, 0), "{kind} reused: {second:#}");
    }

    let (forced, _) = setup.enrich(&["--force"]).await;
    for kind in ["embeddings", "dataflow", "neighbors"] {
        assert_eq!(counts(&forced, kind), (tools, 0, 0), "{kind} forced: {forced:#}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn adding_two_tools_computes_two() {
    let setup = Setup::new(&["quiver-provider-github"], "");
    let (first, _) = setup.enrich(&[]).await;
    let before = first["tools"].as_u64().unwrap();
    let source: Value =
        serde_json::from_str(&std::fs::read_to_string(data("static_tools.json")).unwrap()).unwrap();
    setup.write_config(&static_source(setup.dir.path(), &source));
    let (second, out) = setup.enrich(&[]).await;
    assert!(out.status.success(), "{}", texts(&out).1);
    assert_eq!(second["tools"].as_u64().unwrap(), before + 2);
    assert_eq!(counts(&second, "embeddings"), (2, before, 0), "{second:#}");
    assert_eq!(counts(&second, "dataflow"), (2, before, 0), "{second:#}");
    assert_eq!(counts(&second, "neighbors"), (2, before, 0), "{second:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_description_changed_under_the_same_name_is_embedded_again() {
    let setup = Setup::new(&[], "");
    let mut tools = no_schema_tools(3);
    setup.write_config(&static_source(setup.dir.path(), &tools));
    let (first, _) = setup.enrich(&["--only", "embeddings"]).await;
    assert_eq!(counts(&first, "embeddings"), (3, 0, 0), "{first:#}");
    // A provider upgrade rewords one tool: its vectors are stale, the others' are not.
    tools["tools"][1]["description"] = json!("Fetch a stored record by its key.");
    setup.write_config(&static_source(setup.dir.path(), &tools));
    let (second, out) = setup.enrich(&["--only", "embeddings"]).await;
    assert!(out.status.success(), "{}", texts(&out).1);
    assert_eq!(counts(&second, "embeddings"), (1, 2, 0), "{second:#}");
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/enrich").join(name)
}

#[test]
fn graph_has_the_list_to_get_edges_of_the_real_tools() {
    let setup = Setup::new(&["quiver-provider-github", "quiver-provider-gitlab"], "");
    let out = setup.run(&["graph", "--format", "json", "--top", "10"]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    let graph: Value = serde_json::from_str(&stdout).unwrap();
    let edge = |from: &str, to: &str| {
        graph["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["from"] == from && e["to"] == to)
            .cloned()
    };
    let issue = edge("github.list_issues", "github.get_issue")
        .unwrap_or_else(|| panic!("no list_issues -> get_issue edge:\n{stdout}"));
    assert!(issue["from_param"].as_str().unwrap().ends_with("number"), "{issue}");
    assert!(issue["to_param"].as_str().unwrap().contains("number"), "{issue}");
    assert!(edge("github.list_pull_requests", "github.get_pull_request").is_some(), "{stdout}");

    let dot = texts(&setup.run(&["graph", "--format", "dot", "--tool", "list_issues"])).0;
    assert!(dot.starts_with("digraph dataflow {"), "{dot}");
    assert!(dot.contains("\"github.list_issues\" -> \"github.get_issue\""), "{dot}");
    let mermaid = texts(&setup.run(&["graph", "--format", "mermaid"])).0;
    assert!(mermaid.starts_with("flowchart LR"), "{mermaid}");
}

#[test]
fn samplers_are_deterministic_by_seed_and_follow_real_edges() {
    let setup = Setup::new(&["quiver-provider-github", "quiver-provider-gitlab"], "");
    for strategy in ["chain", "fan_out", "fan_in", "dag", "random"] {
        let run = |seed: &str| {
            let out = setup.run(&[
                "sample",
                "--strategy",
                strategy,
                "--n",
                "4",
                "--seed",
                seed,
                "--json",
            ]);
            let (stdout, stderr) = texts(&out);
            assert!(out.status.success(), "{strategy}: {stderr}");
            serde_json::from_str::<Value>(&stdout).unwrap()
        };
        let a = run("7");
        assert_eq!(a, run("7"), "{strategy}: same seed, same scenarios");
        let scenarios = a.as_array().unwrap();
        assert!(!scenarios.is_empty(), "{strategy} produced nothing");
        for s in scenarios {
            let tools = s["tools"].as_array().unwrap();
            assert!(tools.len() >= 2, "{strategy}: {s}");
            if strategy != "random" {
                assert!(!s["feeds"].as_array().unwrap().is_empty(), "{strategy}: {s}");
            }
        }
    }
}

#[test]
fn a_consumer_without_its_artifact_says_which_enrichment_to_add() {
    let setup = Setup::new(&["quiver-provider-github"], "[[enrichments]]\ntype = \"embeddings\"\n");
    let out = setup.run(&["sample", "--strategy", "chain"]);
    let (_, stderr) = texts(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "sampler 'chain' requires the 'dataflow' artifact; add [[enrichments]] type = \"dataflow\""
        ),
        "{stderr}"
    );
    let out = setup.run(&["graph"]);
    assert!(
        texts(&out).1.contains("graph export requires the 'dataflow' artifact"),
        "{}",
        texts(&out).1
    );
    // random needs nothing
    assert!(setup.run(&["sample", "--strategy", "random"]).status.success());
}

#[test]
fn a_missing_dependency_names_both_ends() {
    let setup = Setup::new(&["quiver-provider-github"], "[[enrichments]]\ntype = \"neighbors\"\n");
    let out = setup.run(&["enrich"]);
    let (_, stderr) = texts(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains(
            "enrichment 'neighbors' depends on the 'embeddings' artifact, which no declared \
             enrichment writes; add [[enrichments]] type = \"embeddings\""
        ),
        "{stderr}"
    );
}

fn no_schema_tools(n: usize) -> Value {
    let tools: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "name": format!("lookup_{i}"),
                "description": format!("Look up record {i} by id."),
                "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
            })
        })
        .collect();
    json!({ "tools": tools })
}

const GOOD_SCHEMA: &str = r#"{"type":"object","properties":{"id":{"type":"string","description":"record id"},"title":{"type":"string"}}}"#;

fn openai_reply(content: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }))
}

fn output_parameters_config(server: &MockServer, kind: &str, source: &str) -> String {
    format!(
        "{source}\n[[enrichments]]\ntype = \"output_parameters\"\nlm = {{ type = \"{kind}\", model = \"m1\", base_url = \"{}{}\", api_key_env = \"QUIVER_TEST_LM_KEY\", temperature = 0.2, max_tokens = 300 }}\n",
        server.uri(),
        if kind == "openai" { "/v1" } else { "" }
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn output_schemas_are_inferred_through_an_openai_compatible_endpoint() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(json!({
            "model": "m1", "temperature": 0.2, "max_tokens": 300,
            "response_format": {"type": "json_object"},
        })))
        .respond_with(openai_reply(GOOD_SCHEMA))
        .mount(&server)
        .await;
    let setup = Setup::new(&[], "");
    let source = static_source(setup.dir.path(), &no_schema_tools(3));
    setup.write_config(&output_parameters_config(&server, "openai", &source));
    let (summary, out) = setup.enrich(&["--only", "output_parameters"]).await;
    assert!(out.status.success(), "{}", texts(&out).1);
    assert_eq!(counts(&summary, "output_parameters"), (3, 0, 0), "{summary:#}");
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 3);
    let body: Value = requests[0].body_json().unwrap();
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(body["messages"][1]["content"].as_str().unwrap().contains("docs.lookup_"), "{body}");
    // A second run asks nothing: the schemas are cached.
    let (again, _) = setup.enrich(&["--only", "output_parameters"]).await;
    assert_eq!(counts(&again, "output_parameters"), (0, 3, 0), "{again:#}");
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_reply_is_retried_once_then_recorded_never_a_crash() {
    let server = MockServer::start().await;
    // The retry carries the reason; answer it well for lookup_0 only.
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .and(|req: &Request| {
            let body: Value = req.body_json().unwrap_or_default();
            let user = body["messages"][1]["content"].as_str().unwrap_or_default();
            user.contains("lookup_0") && user.contains("previous reply")
        })
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "model": "m1", "created_at": "2026-11-22T00:00:00Z",
            "message": {"role": "assistant", "content": GOOD_SCHEMA}, "done": true,
        })))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .and(body_partial_json(json!({"model": "m1", "stream": false, "format": "json",
                                      "options": {"temperature": 0.2, "num_predict": 300}})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "model": "m1", "created_at": "2026-11-22T00:00:00Z",
            "message": {"role": "assistant", "content": "{\"type\": \"objekt\"}"}, "done": true,
        })))
        .with_priority(2)
        .mount(&server)
        .await;
    let setup = Setup::new(&[], "");
    let source = static_source(setup.dir.path(), &no_schema_tools(2));
    setup.write_config(&output_parameters_config(&server, "ollama", &source));
    let (summary, out) = setup.enrich(&["--only", "output_parameters"]).await;
    assert_eq!(out.status.code(), Some(1), "a failed tool makes the exit code 1");
    assert_eq!(counts(&summary, "output_parameters"), (1, 0, 1), "{summary:#}");
    let failed = &pass(&summary, "output_parameters")["failed"][0];
    assert_eq!(failed[0], "docs.lookup_1");
    assert!(failed[1].as_str().unwrap().contains("not a JSON type"), "{failed}");
    // Two attempts per tool, no more.
    assert_eq!(server.received_requests().await.unwrap().len(), 4);
}

#[tokio::test(flavor = "multi_thread")]
async fn http_embeddings_speak_openai_and_ollama() {
    for kind in ["openai", "ollama"] {
        let server = MockServer::start().await;
        let (route, reply): (&str, fn(&Request) -> ResponseTemplate) = if kind == "openai" {
            ("/v1/embeddings", |req| {
                let body: Value = req.body_json().unwrap();
                let n = body["input"].as_array().unwrap().len();
                // Out of order on purpose: `index` says where each belongs.
                let data: Vec<Value> = (0..n)
                    .rev()
                    .map(|i| json!({"object": "embedding", "index": i, "embedding": [i as f32, 1.0, 0.5]}))
                    .collect();
                ResponseTemplate::new(200)
                    .set_body_json(json!({"object": "list", "data": data, "model": "m1"}))
            })
        } else {
            ("/api/embed", |req| {
                let body: Value = req.body_json().unwrap();
                let n = body["input"].as_array().unwrap().len();
                let vectors: Vec<Value> = (0..n).map(|i| json!([i as f32, 1.0, 0.5])).collect();
                ResponseTemplate::new(200)
                    .set_body_json(json!({"model": "m1", "embeddings": vectors}))
            })
        };
        Mock::given(method("POST"))
            .and(path(route))
            .and(header("authorization", "Bearer lm-secret-key-123"))
            .and(body_partial_json(json!({"model": "m1"})))
            .respond_with(move |req: &Request| reply(req))
            .mount(&server)
            .await;
        let setup = Setup::new(&[], "");
        let source = static_source(setup.dir.path(), &no_schema_tools(4));
        let base = if kind == "openai" { format!("{}/v1", server.uri()) } else { server.uri() };
        setup.write_config(&format!(
            "{source}\n[[enrichments]]\ntype = \"embeddings\"\nlm = {{ type = \"{kind}\", model = \"m1\", base_url = \"{base}\", api_key_env = \"QUIVER_TEST_LM_KEY\" }}\n"
        ));
        let args = setup.args(&["enrich", "--json"]);
        let data = setup.data_dir();
        let out = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            quiver(
                &args,
                &[
                    ("QUIVER_DATA_DIR", data.to_str().unwrap()),
                    ("QUIVER_TEST_LM_KEY", "lm-secret-key-123"),
                ],
            )
        })
        .await
        .unwrap();
        let (stdout, stderr) = texts(&out);
        assert!(out.status.success(), "{kind}: {stderr}");
        assert!(!stdout.contains("lm-secret-key-123") && !stderr.contains("lm-secret-key-123"));
        let summary: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(counts(&summary, "embeddings"), (4, 0, 0), "{kind}: {summary:#}");
        let requests = server.received_requests().await.unwrap();
        let body: Value = requests[0].body_json().unwrap();
        assert_eq!(body["input"].as_array().unwrap().len(), 16, "four texts per tool");
        assert!(body["input"][0].as_str().unwrap().contains("lookup"), "{body}");
        // The fourth is the name alone, in words.
        assert_eq!(body["input"][3], "docs lookup 0", "{body}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_process_killed_mid_run_leaves_a_store_that_opens_and_completes() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(openai_reply(GOOD_SCHEMA).set_delay(std::time::Duration::from_millis(150)))
        .mount(&server)
        .await;
    let setup = Setup::new(&[], "");
    let source = static_source(setup.dir.path(), &no_schema_tools(40));
    setup.write_config(&output_parameters_config(&server, "openai", &source));
    let args = setup.args(&["enrich", "--json", "--only", "output_parameters"]);
    let mut child = std::process::Command::new(quiver_bin())
        .args(&args)
        .env("QUIVER_DATA_DIR", setup.data_dir())
        .env_remove("QUIVER_CONFIG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until some, not all, schemas were asked for, then kill -9.
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        if server.received_requests().await.unwrap().len() >= 10 {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let asked = server.received_requests().await.unwrap().len();
    assert!(asked < 40, "the run finished before it was killed");

    let (summary, out) = setup.enrich(&["--only", "output_parameters"]).await;
    assert!(out.status.success(), "{}", texts(&out).1);
    let (computed, reused, failed) = counts(&summary, "output_parameters");
    assert_eq!(failed, 0);
    assert_eq!(computed + reused, 40, "complete after the restart: {summary:#}");
    assert!(reused > 0, "what the killed run paid for was kept: {summary:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_locked_store_is_reported_and_quiver_runs_without_it() {
    let setup = Setup::new(&["quiver-provider-github"], "");
    let store_dir = setup.data_dir().join("enrichments");
    let _held = quiver_runtime::enrich::store::ArtifactStore::open(&store_dir).unwrap();
    let (summary, out) = setup.enrich(&[]).await;
    assert!(out.status.success(), "{}", texts(&out).1);
    let store = summary["store"].as_str().unwrap();
    assert!(store.contains("in use by another quiver process"), "{store}");
    assert!(store.contains(&store_dir.display().to_string()), "{store}");
    assert!(counts(&summary, "embeddings").0 > 0, "computed without the cache");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_store_is_reported_and_quiver_runs_without_it() {
    let setup = Setup::new(&["quiver-provider-github"], "");
    let (_, out) = setup.enrich(&[]).await;
    assert!(out.status.success());
    let store_dir = setup.data_dir().join("enrichments");
    for entry in std::fs::read_dir(&store_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::write(&path, b"\x00garbage\xff not a sled file at all").unwrap();
        }
    }
    let (summary, out) = setup.enrich(&[]).await;
    assert!(out.status.success(), "{}", texts(&out).1);
    let store = summary["store"].as_str().unwrap();
    assert!(store.contains("is corrupt"), "{store}");
    assert!(store.contains("delete that directory"), "{store}");
    assert!(store.contains(&store_dir.display().to_string()), "{store}");
    assert!(counts(&summary, "embeddings").0 > 0, "computed without the cache");
}
