//! `quiver select` through the real binary and the five real provider plugins (rankings as JSONL,
//! recall on the evaluation set under `tests/data/select/`, a tools file of OpenAI functions,
//! embeddings from an HTTP model), and the selector's library API over a real host.

use std::path::{Path, PathBuf};
use std::process::Output;

use quiver_core::enrich::embed::{EmbeddingsArtifact, LexicalEmbedder};
use quiver_runtime::enrich::{EnrichmentDecl, EnrichmentSet};
use quiver_runtime::selector::{dataflow_companions, selector_for_host, Selector, SelectorOptions};
use quiver_runtime::{Host, HostOptions};
use quiver_tests::{plugins_dir, quiver, texts, ALL_PROVIDERS};
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// A config, a plugins dir and a data dir for one test.
struct Setup {
    plugins: tempfile::TempDir,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(providers: &[&str], extra_config: &str) -> Self {
        let setup = Self { plugins: plugins_dir(providers), dir: tempfile::tempdir().unwrap() };
        // Jira needs a site; nothing here calls it.
        let text = format!("[providers.jira]\nbase_url = \"http://127.0.0.1:9\"\n{extra_config}");
        std::fs::write(setup.config(), text).unwrap();
        setup
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("quiver.toml")
    }

    /// The host over this setup's config and plugins, as the library's users open it.
    fn host(&self) -> Host {
        Host::open(&HostOptions {
            config: Some(self.config()),
            plugins_dir: Some(self.plugins.path().to_owned()),
        })
        .unwrap()
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }

    fn args(&self, args: &[&str]) -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        all.extend([
            "--config".into(),
            self.config().to_string_lossy().into_owned(),
            "--plugins".into(),
            self.plugins.path().to_string_lossy().into_owned(),
        ]);
        all
    }

    fn run(&self, args: &[&str]) -> Output {
        run_args(self.args(args), &self.data_dir())
    }
}

fn run_args(args: Vec<String>, data: &Path) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    quiver(&args, &[("QUIVER_DATA_DIR", data.to_str().unwrap())])
}

fn eval_file(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/select")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The recall table of `quiver select --gold`: k → (whole, per item).
fn recall_rows(stdout: &str) -> Vec<(usize, f64, f64)> {
    stdout
        .lines()
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            match cols.as_slice() {
                [k, whole, per_item] => {
                    Some((k.parse().ok()?, whole.parse().ok()?, per_item.parse().ok()?))
                }
                _ => None,
            }
        })
        .collect()
}

#[test]
fn select_prints_one_ranking_per_query_as_jsonl() {
    let setup = Setup::new(&ALL_PROVIDERS, "");
    let queries = setup.write(
        "queries.jsonl",
        "{\"id\": \"a\", \"query\": \"list the merge requests of the project\"}\n\n\
         {\"id\": 7, \"query\": \"move PROJ-7 to Done\"}\n\
         {\"id\": \"c\", \"query\": \"what did we decide in yesterday's meeting\"}\n",
    );
    let out = setup.run(&["select", "--queries", &queries, "--k", "3"]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    // Words alone by default: nothing to enrich, nothing cached.
    assert!(!setup.data_dir().join("enrichments").exists(), "no embeddings computed");
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3, "one line per query, blank lines skipped: {stdout}");
    let ids: Vec<&Value> = lines.iter().map(|l| &l["id"]).collect();
    assert_eq!(ids, [&json!("a"), &json!(7), &json!("c")], "ids come back as given");
    for line in &lines {
        let object = line.as_object().unwrap();
        assert_eq!(object.len(), 3, "only id, ranked and scores: {line}");
        let ranked = line["ranked"].as_array().unwrap();
        assert_eq!(ranked.len(), 3, "--k 3: {line}");
        // A score per ranked tool, best first, in (0, 1].
        let scores: Vec<f64> =
            line["scores"].as_array().unwrap().iter().map(|s| s.as_f64().unwrap()).collect();
        assert_eq!(scores.len(), 3, "{line}");
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{line}");
        assert!(scores.iter().all(|s| *s > 0.0 && *s <= 1.0), "{line}");
    }
    assert_eq!(lines[0]["ranked"][0], "gitlab.list_merge_requests", "{stdout}");
    assert_eq!(lines[1]["ranked"][0], "jira.transition_issue", "{stdout}");
    assert!(lines[2]["ranked"][0].as_str().unwrap().starts_with("fireflies."), "{stdout}");
    // Asked to fuse, the embeddings come from the enrichment run, cached for the next start.
    let fused =
        setup.run(&["select", "--queries", &queries, "--k", "3", "--embedding-weight", "0.4"]);
    assert!(fused.status.success(), "{}", texts(&fused).1);
    assert!(setup.data_dir().join("enrichments").is_dir(), "cache-first, cache written");
}

#[test]
fn recall_on_the_evaluation_set_is_printed_for_1_3_5_10() {
    let setup = Setup::new(&ALL_PROVIDERS, "");
    let (queries, gold) = (eval_file("queries.jsonl"), eval_file("gold.jsonl"));
    let words = setup.run(&["select", "--queries", &queries, "--gold", &gold]);
    let (stdout, stderr) = texts(&words);
    assert!(words.status.success(), "{stderr}");
    assert!(!stderr.contains("not among the ranked tools"), "gold names real tools: {stderr}");
    assert!(stdout.starts_with("recall over 52 queries (words and distilled vectors)"), "{stdout}");
    assert!(stdout.contains("whole gold  mean per-item"), "{stdout}");
    let rows = recall_rows(&stdout);
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 3, 5, 10], "{stdout}");
    for (k, whole, per_item) in &rows {
        assert!(whole <= per_item, "whole sets are the stricter reading at {k}: {stdout}");
    }
    // Regression guards, below the measured figures over the five providers' 158 tools
    // (0.81 / 0.87 / 0.98 whole at 3 / 5 / 10; words alone 0.79 / 0.90 / 0.98).
    assert!(rows[1].1 >= 0.75 && rows[2].1 >= 0.85 && rows[3].1 >= 0.98, "{stdout}");
    assert!(
        stdout.contains("selected (τ 0.17, lift 0.5, at most 20): whole gold set in"),
        "{stdout}"
    );
    let words = setup.run(&["select", "--queries", &queries, "--gold", &gold, "--lexical-only"]);
    let (stdout, _) = texts(&words);
    assert!(stdout.starts_with("recall over 52 queries (words only)"), "{stdout}");
    assert!(
        stdout.contains("selected (τ 0.1, lift 0.4, at most 20): whole gold set in"),
        "{stdout}"
    );
    assert!(recall_rows(&stdout)[2].1 >= 0.88, "{stdout}");

    let args = ["select", "--queries", &queries, "--gold", &gold, "--embedding-weight", "0.4"];
    let fused = setup.run(&args);
    let (stdout, stderr) = texts(&fused);
    assert!(fused.status.success(), "{stderr}");
    assert!(stdout.starts_with("recall over 52 queries (fused: words and embeddings)"), "{stdout}");
    assert!(recall_rows(&stdout)[3].1 >= 0.95, "{stdout}");
}

/// The tools file, queries and gold sets of the public set in `tests/data/<dir>`.
fn public_set(dir: &str) -> (String, String, String) {
    let file = |name: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("data")
            .join(dir)
            .join(name)
            .display()
            .to_string()
    };
    (file("tools.json"), file("queries.jsonl"), file("gold.jsonl"))
}

/// How often the selected set held the whole gold set, from a `selected (τ …)` line of
/// `quiver select --gold`.
fn gold_held(selected: &str) -> f64 {
    selected
        .split_once("whole gold set in ")
        .and_then(|(_, rest)| rest.split(',').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no share in {selected}"))
}

/// The public BFCL set (tests/data/bfcl: 1 287 functions with schemas, 2 351 questions), which
/// no default was tuned on: words alone, and what a token budget keeps.
#[test]
fn recall_on_the_public_bfcl_set_holds() {
    let setup = Setup::new(&[], "");
    let (tools, queries, gold) = public_set("bfcl");
    let args = ["select", "--tools", &tools, "--queries", &queries, "--gold", &gold];
    let mut with_budget = args.to_vec();
    with_budget.extend_from_slice(&["--max-list-tokens", "500"]);
    let out = setup.run(&with_budget);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("not among the ranked tools"), "gold names real tools: {stderr}");
    assert!(
        stdout.starts_with("recall over 2351 queries (words and distilled vectors)"),
        "{stdout}"
    );
    // Regression guards just below the measured .586/.796/.855/.912 (BM25F alone
    // .570/.764/.836/.901; plain BM25 over names and descriptions .479/.678/.762/.848).
    let rows = recall_rows(&stdout);
    let whole: Vec<f64> = rows.iter().map(|r| r.1).collect();
    assert!(
        whole[0] >= 0.58 && whole[1] >= 0.785 && whole[2] >= 0.85 && whole[3] >= 0.9,
        "{stdout}"
    );
    // Under 500 tokens the selected set holds the gold set for .770 (BM25F alone .760; .677
    // when the budget's knapsack weighed raw scores).
    let selected = stdout.lines().find(|l| l.starts_with("selected (τ 0.17")).unwrap();
    assert!(gold_held(selected) >= 0.75, "{selected}");
    // BM25F alone, as the README's table gives it.
    let mut words = args.to_vec();
    words.push("--lexical-only");
    let (stdout, _) = texts(&setup.run(&words));
    assert!(stdout.starts_with("recall over 2351 queries (words only)"), "{stdout}");
    let whole: Vec<f64> = recall_rows(&stdout).iter().map(|r| r.1).collect();
    assert!(whole[0] >= 0.56 && whole[2] >= 0.83, "{stdout}");
}

/// The public ToolBench set (tests/data/toolbench: 2 479 RapidAPI endpoints in families of
/// siblings, 765 queries, most needing two to six endpoints), which no default was tuned on.
#[test]
fn recall_on_the_public_toolbench_set_holds() {
    let setup = Setup::new(&[], "");
    let (tools, queries, gold) = public_set("toolbench");
    let out = setup.run(&["select", "--tools", &tools, "--queries", &queries, "--gold", &gold]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("not among the ranked tools"), "gold names real tools: {stderr}");
    assert!(
        stdout.starts_with("recall over 765 queries (words and distilled vectors)"),
        "{stdout}"
    );
    // Regression guards just below the measured whole-gold .380/.498/.658 at 3/5/10 and
    // per-item .696/.806 at 5/10 (BM25F alone .374/.507/.651, per item .698/.801).
    let rows = recall_rows(&stdout);
    let whole: Vec<f64> = rows.iter().map(|r| r.1).collect();
    let per_item: Vec<f64> = rows.iter().map(|r| r.2).collect();
    assert!(whole[1] >= 0.37 && whole[2] >= 0.49 && whole[3] >= 0.65, "{stdout}");
    assert!(per_item[2] >= 0.69 && per_item[3] >= 0.8, "{stdout}");
    // The selected set — the tools above τ, then the rest of the strongest hits' bundles (an
    // endpoint's siblings share the part of its name before the dot) — holds the whole gold set
    // more often than the top 10 does (measured .762 at 17.5 tools).
    let selected = stdout.lines().find(|l| l.starts_with("selected (τ 0.17")).unwrap();
    assert!(gold_held(selected) > whole[3], "{stdout}");
}

/// How many tools the selected set held on average, from a `selected (τ …)` line.
fn tools_selected(selected: &str) -> f64 {
    selected
        .split_once(" in ")
        .and_then(|(_, rest)| rest.split(", ").nth(1)?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no tool count in {selected}"))
}

/// The Azure MCP Server's own catalog (tests/data/azure-mcp: 180 tools whose long descriptions
/// share many words with any request, 473 prompts), which nothing was tuned on: the selected
/// set fits how this catalog scores a request, where one τ for every catalog selected 14
/// tools (7,800 tokens of listings) for a request that needs one.
#[test]
fn on_a_real_mcp_servers_catalog_the_selected_set_stays_small() {
    let setup = Setup::new(&[], "");
    let (tools, queries, gold) = public_set("azure-mcp");
    let args = ["select", "--tools", &tools, "--queries", &queries, "--gold", &gold];
    let out = setup.run(&args);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("not among the ranked tools"), "gold names real tools: {stderr}");
    let at_5 = recall_rows(&stdout)[2].1;
    let selected = stdout.lines().find(|l| l.starts_with("selected (τ 0.17, lift 0.5")).unwrap();
    // Measured: .979 at 5.1 tools, against .968 for the top 5.
    assert!(gold_held(selected) >= at_5, "{stdout}");
    assert!(tools_selected(selected) <= 6.0, "{stdout}");
    // τ alone, the rule before the lift share: .998, at 14.4 tools.
    let mut by_threshold = args.to_vec();
    by_threshold.extend_from_slice(&["--lift-share", "0"]);
    let (stdout, _) = texts(&setup.run(&by_threshold));
    let selected = stdout.lines().find(|l| l.starts_with("selected (τ 0.17, at most")).unwrap();
    assert!(tools_selected(selected) >= 10.0, "{stdout}");
}

#[test]
fn show_misses_names_the_query_and_what_ranked_instead() {
    let setup = Setup::new(&ALL_PROVIDERS, "");
    let queries = setup.write("q.jsonl", "{\"id\": \"x\", \"query\": \"list merge requests\"}\n");
    let gold =
        setup.write("g.jsonl", "{\"id\": \"x\", \"tools\": [\"fireflies.get_transcript\"]}\n");
    let out = setup.run(&["select", "--queries", &queries, "--gold", &gold, "--show-misses"]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("miss@5 \"x\" \"list merge requests\": wanted fireflies.get_transcript; top gitlab.list_merge_requests"),
        "{stdout}"
    );
}

#[test]
fn tools_file_of_openai_functions_is_ranked_by_its_own_names() {
    let setup = Setup::new(&[], "");
    let functions = json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "listCalendarEvents", "description": "Events on the user's calendar between two dates",
            "parameters": {"type": "object", "properties": {"from": {"type": "string", "description": "Start date"}}}}},
        {"type": "function", "function": {"name": "send_email", "description": "Send an email message",
            "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}}}}}
    ]);
    let tools = setup.write("functions.json", &functions.to_string());
    let queries = setup.write(
        "q.jsonl",
        "{\"id\": 1, \"query\": \"what is on my calendar tomorrow\"}\n{\"id\": 2, \"query\": \"mail the report to Ana\"}\n",
    );
    // The two rankings (one JSON line per query) of a run with `extra` arguments; the run must
    // succeed.
    let rankings = |extra: &[&str]| -> (Vec<Value>, String) {
        let mut args = vec!["select", "--tools", &tools, "--queries", &queries, "--k", "2"];
        args.extend_from_slice(extra);
        let out = setup.run(&args);
        let (stdout, stderr) = texts(&out);
        assert!(out.status.success(), "{stderr}");
        (stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect(), stdout)
    };
    let (lines, stdout) = rankings(&[]);
    assert_eq!(lines[0]["ranked"][0], "listCalendarEvents", "names as written: {stdout}");
    // The distilled vectors meet `mail` and `email`, which share no word.
    assert_eq!(lines[1]["ranked"][0], "send_email", "{stdout}");
    // Words alone do not; the built-in embedder's n-grams do, when fused.
    let (lines, stdout) = rankings(&["--lexical-only"]);
    assert_eq!(lines[1]["ranked"], json!([]), "{stdout}");
    let (lines, stdout) = rankings(&["--embedding-weight", "0.4"]);
    assert_eq!(lines[1]["ranked"][0], "send_email", "n-grams meet `mail`/`email`: {stdout}");

    let bad = setup.write("bad.json", "{\"nothing\": []}");
    let out = setup.run(&["select", "--tools", &bad, "--queries", &queries]);
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("has no `tools` or `functions` array"), "{stderr}");
}

#[test]
fn one_query_prints_its_ranking_then_the_set_a_model_would_be_shown() {
    let setup = Setup::new(&ALL_PROVIDERS, "");
    let out = setup.run(&["select", "--query", "why did the MR pipeline fail", "--k", "3"]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "three ranked tools, then the selected set: {stdout}");
    let top = lines[0].split_once("  ").unwrap().1;
    assert!(top.starts_with("gitlab."), "{stdout}");
    let selected = lines[3];
    assert!(selected.starts_with("selected (τ 0.17, lift 0.5, at most 20): "), "{stdout}");
    // The set holds the best hit and, beyond the three ranked, its bundle's siblings.
    let (_, names) = selected.split_once(" tokens): ").unwrap();
    let names: Vec<&str> = names.split(", ").collect();
    assert!(names.contains(&top), "{stdout}");
    assert!(names.len() > 3, "{stdout}");

    // Nonsense: the distilled vectors rank something, all of it below τ, and nothing is
    // selected.
    let out = setup.run(&["select", "--query", "zzzz qqqq"]);
    let (stdout, _) = texts(&out);
    assert!(out.status.success());
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.last(),
        Some(&"selected (τ 0.17, lift 0.5, at most 20): 0 tools (0 tokens): none")
    );
    for line in &lines[..lines.len() - 1] {
        let score: f32 = line.split_whitespace().next().unwrap().parse().unwrap();
        assert!(score < 0.17, "{stdout}");
    }
    // On words alone no tool matches it at all, and the answer says why.
    let out = setup.run(&["select", "--query", "zzzz qqqq", "--lexical-only"]);
    let (stdout, _) = texts(&out);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "no tool matches \"zzzz qqqq\" (words only): none of its words is in any tool's text",
            "selected (τ 0.1, lift 0.4, at most 20): 0 tools (0 tokens): none"
        ],
        "{stdout}"
    );
}

#[test]
fn a_query_without_a_gold_line_is_named() {
    let setup = Setup::new(&[], "");
    let tools = setup.write("t.json", "[{\"name\": \"a\", \"description\": \"alpha\"}]");
    let queries = setup.write("q.jsonl", "{\"id\": \"q9\", \"query\": \"alpha\"}\n");
    let gold = setup.write("g.jsonl", "{\"id\": \"q1\", \"tools\": [\"a\"]}\n");
    let out = setup.run(&["select", "--tools", &tools, "--queries", &queries, "--gold", &gold]);
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("query \"q9\" has no line in"), "{stderr}");
    let broken = setup.write("broken.jsonl", "{\"id\": 1}\n");
    let out = setup.run(&["select", "--tools", &tools, "--queries", &broken]);
    assert!(texts(&out).1.contains("broken.jsonl line 1: not the expected JSON object"));
}

/// Tools embedded by an HTTP model have their queries embedded by the same model, in batches:
/// the ranking is fused, not silently words alone.
#[tokio::test(flavor = "multi_thread")]
async fn queries_are_embedded_by_the_http_model_that_embedded_the_tools() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/embed"))
        .respond_with(|req: &Request| {
            let body: Value = req.body_json().unwrap();
            let n = body["input"].as_array().unwrap().len();
            let vectors: Vec<Value> = (0..n).map(|i| json!([i as f32, 1.0, 0.5])).collect();
            ResponseTemplate::new(200).set_body_json(json!({"model": "m1", "embeddings": vectors}))
        })
        .mount(&server)
        .await;
    let setup = Setup::new(
        &ALL_PROVIDERS,
        &format!(
            "[[enrichments]]\ntype = \"embeddings\"\nlm = {{ type = \"ollama\", model = \"m1\", base_url = \"{}\" }}\n",
            server.uri()
        ),
    );
    let args = setup.args(&[
        "select",
        "--queries",
        &eval_file("queries.jsonl"),
        "--gold",
        &eval_file("gold.jsonl"),
        "--embedding-weight",
        "0.4",
    ]);
    let data = setup.data_dir();
    let out = tokio::task::spawn_blocking(move || run_args(args, &data)).await.unwrap();
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.starts_with("recall over 52 queries (fused: words and ollama:m1 embeddings)"),
        "{stdout}"
    );
    assert!(!stderr.contains("words only"), "{stderr}");
    let queries: Vec<String> = std::fs::read_to_string(eval_file("queries.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["query"].as_str().unwrap().to_owned())
        .collect();
    let asked: Vec<Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.body_json::<Value>().unwrap()["input"].clone())
        .collect();
    // The 52 queries, each followed by its clauses (q21: "which job failed in pipeline 991",
    // "what does its log say"), went in batches of 64, in order.
    let texts: Vec<String> =
        queries.iter().flat_map(|q| quiver_core::select::query_texts(q)).collect();
    assert!(texts.len() > queries.len(), "some queries ask for two things");
    assert!(texts.contains(&"what does its log say".to_owned()), "{texts:?}");
    for batch in texts.chunks(64) {
        assert!(asked.iter().any(|input| *input == json!(batch)), "{batch:?} in {asked:?}");
    }
}

#[test]
fn require_embeddings_names_the_enrichment_to_add() {
    let without =
        EnrichmentSet::new(&[EnrichmentDecl::Dataflow { max_neighbors: 5, force: false }]).unwrap();
    assert_eq!(
        Selector::require_embeddings(&without).unwrap_err().to_string(),
        "selector requires the 'embeddings' artifact; add [[enrichments]] type = \"embeddings\""
    );
    assert!(Selector::require_embeddings(&EnrichmentSet::new(&[]).unwrap()).is_ok(), "default set");
}

#[test]
fn companions_over_the_providers_catalog_feed_ids_not_scopes() {
    let setup = Setup::new(&ALL_PROVIDERS, "");
    let host = setup.host();
    let catalog = host.catalog();
    let links = dataflow_companions(&catalog);
    let linked = |feeder: &str, tool: &str| links.iter().any(|(f, t, _)| f == feeder && t == tool);
    // A job's log needs the job's id, which the job lists give.
    assert!(linked("gitlab.list_pipeline_jobs", "gitlab.get_job_log"), "{links:?}");
    assert!(linked("github.list_workflow_jobs", "github.get_job_logs"), "{links:?}");
    // Projects, owners and repositories scope every call; listing them is nobody's companion.
    let scopes: Vec<_> = links
        .iter()
        .filter(|(f, _, _)| f.ends_with("list_projects") || f.ends_with("get_repository"))
        .collect();
    assert!(scopes.is_empty(), "{scopes:?}");

    // Through the host's selector, a request naming the transcript: the hit stays first, the
    // search that gets its id is in the set a model is shown, and the companion links never
    // rank it lower than the words and vectors alone do (here its own score, .204, is above
    // the lift, the hit's .302 times the link's strength).
    let query = "action items from the last meeting with Acme";
    let selector = selector_for_host(&host, SelectorOptions::default()).unwrap();
    let without = Selector::new(&catalog, None, SelectorOptions::default());
    let place = |selector: &Selector| {
        let ranked = selector.rank(query, &[], catalog.len());
        ranked.iter().position(|r| r.name == "fireflies.search_transcripts").unwrap()
    };
    let names: Vec<String> = selector.rank(query, &[], 5).into_iter().map(|r| r.name).collect();
    assert_eq!(names[0], "fireflies.get_transcript", "{names:?}");
    let (lifted, alone) = (place(&selector), place(&without));
    assert!(lifted <= alone && lifted < 6, "{lifted} with companions, {alone} without");
    let shown = selector.select(query, &[]);
    assert!(shown.contains(&"fireflies.search_transcripts".to_owned()), "{shown:?}");
}

#[test]
fn the_library_selects_core_hits_and_bundles_over_the_host_catalog() {
    let setup = Setup::new(&ALL_PROVIDERS, "");
    let host = setup.host();
    let catalog = host.catalog();
    let embedder = LexicalEmbedder::new();
    let artifact: EmbeddingsArtifact =
        catalog.iter().map(|t| (t.name.clone(), embedder.embed_tool(&t.name, &t.spec))).collect();
    let options = SelectorOptions {
        core: vec!["jira.get_issue".into(), "github_get_issue".into()],
        embedding_weight: 0.4,
        ..SelectorOptions::default()
    };
    let selector = Selector::new(&catalog, Some(&artifact), options);
    assert!(selector.uses_embeddings());

    let shown = selector.select("why did the MR pipeline fail", &[]);
    assert_eq!(&shown[..2], ["jira.get_issue", "github.get_issue"], "CORE first: {shown:?}");
    assert!(shown.contains(&"gitlab.list_pipelines".to_owned()), "{shown:?}");
    assert!(shown.contains(&"gitlab.get_job_log".to_owned()), "the pipelines bundle: {shown:?}");
    assert!(shown.len() <= 20 && shown.len() < catalog.len(), "{shown:?}");
    assert!(!shown.iter().any(|n| n.starts_with("fireflies.")), "{shown:?}");

    let bundles = selector.bundles();
    let pipelines = bundles.iter().find(|b| b.name == "gitlab.pipelines").expect("group bundle");
    assert!(pipelines.tools.contains(&"gitlab.retry_job".to_owned()));
    let github = bundles.iter().find(|b| b.name == "github").expect("provider bundle");
    assert_eq!(
        github.tools.len(),
        catalog.iter().filter(|t| t.name.starts_with("github.")).count()
    );

    let ranked = selector.rank("add a comment to the Jira ticket", &[], 5);
    assert_eq!(ranked[0].name, "jira.add_comment");
    assert!(ranked.len() == 5 && ranked.iter().all(|r| (0.0..=1.0).contains(&r.score)));
}

/// The model directory `cargo xtask test` fetched (all-MiniLM-L6-v2); the test fails, saying
/// how to get it, when there is none.
fn minilm_dir() -> String {
    std::env::var("QUIVER_MINILM_DIR")
        .ok()
        .filter(|d| Path::new(d).join("model.safetensors").is_file())
        .expect(
            "QUIVER_MINILM_DIR names no model directory; run `cargo xtask test`, which fetches \
         all-MiniLM-L6-v2, or set it to a directory with config.json, model.safetensors and \
         tokenizer.json",
        )
}

/// `[selector.embedder] type = "local"`: the tools are embedded in process into the enrichment
/// store (a second run reuses every vector), each query by the same model, and the ranking is
/// fused: another ranking than words alone, still finding the gold tools.
#[test]
fn a_local_model_embeds_tools_into_the_store_and_queries_in_process() {
    let model = minilm_dir();
    let setup = Setup::new(
        &ALL_PROVIDERS,
        &format!("[selector.embedder]\ntype = \"local\"\npath = \"{model}\"\n"),
    );
    let first = setup.run(&["enrich", "--only", "embeddings"]);
    let (stdout, stderr) = texts(&first);
    assert!(first.status.success(), "{stderr}");
    assert!(stdout.contains("computed   158  reused     0"), "{stdout}");
    let again = setup.run(&["enrich", "--only", "embeddings"]);
    assert!(texts(&again).0.contains("computed     0  reused   158"), "{}", texts(&again).0);

    let gold = eval_file("gold.jsonl");
    let queries = eval_file("queries.jsonl");
    let fused = setup.run(&["select", "--queries", &queries, "--gold", &gold]);
    let (stdout, stderr) = texts(&fused);
    assert!(fused.status.success(), "{stderr}");
    assert!(stdout.starts_with("recall over 52 queries (fused: words and local:"), "{stdout}");
    let words = setup.run(&["select", "--queries", &queries, "--gold", &gold, "--lexical-only"]);
    let (fused_rows, word_rows) = (recall_rows(&stdout), recall_rows(&texts(&words).0));
    let at = |rows: &[(usize, f64, f64)], k: usize| rows.iter().find(|r| r.0 == k).unwrap().1;
    assert_ne!(fused_rows, word_rows, "the model's similarity changed the ranking");
    assert!(at(&fused_rows, 10) >= 0.9, "fused {fused_rows:?}, words {word_rows:?}");

    // A tools file with the same model: each tool's name is embedded beside its whole text, so
    // with a name share, of two tools that describe themselves alike, the one whose name fits
    // the request gains; by default (share 0) the names are not counted.
    let tools = setup.write(
        "alike.json",
        &json!({"tools": [
            {"name": "weather_forecast", "description": "Answers questions about a topic.",
                "inputSchema": {"type": "object", "properties": {}}},
            {"name": "stock_quotes", "description": "Answers questions about a topic.",
                "inputSchema": {"type": "object", "properties": {}}}
        ]})
        .to_string(),
    );
    let top_score = |extra: &[&str]| {
        let mut args = vec!["select", "--tools", &tools, "--local-model", &model];
        args.extend_from_slice(&["--query", "will it rain tomorrow", "--k", "2"]);
        args.extend_from_slice(extra);
        let out = setup.run(&args);
        let (stdout, stderr) = texts(&out);
        assert!(out.status.success(), "{stderr}");
        let hits: Vec<(f64, &str)> = stdout
            .lines()
            .filter_map(|l| l.split_once("  ").and_then(|(s, n)| Some((s.parse().ok()?, n))))
            .collect();
        // The ranking is followed by the set a model would be shown, held to the model's τ and
        // lift share.
        assert!(
            stdout.lines().last().unwrap().starts_with("selected (τ 0.12, lift 0.45, at most 20)"),
            "{stdout}"
        );
        assert_eq!(hits[0].1, "weather_forecast", "{stdout}");
        hits[0].0
    };
    let with_names = top_score(&["--name-share", "0.3"]);
    let (default, without) = (top_score(&[]), top_score(&["--no-name-vectors"]));
    assert!(with_names > without, "with names {with_names}, without {without}");
    assert_eq!(default, without, "share 0: the names are not counted");

    // A directory that is not a model is an error naming the file, not a silent fallback.
    let broken = Setup::new(
        &ALL_PROVIDERS,
        "[selector.embedder]\ntype = \"local\"\npath = \"/nonexistent-model\"\n",
    );
    let out = broken.run(&["select", "--query", "open MRs"]);
    assert!(!out.status.success());
    assert!(texts(&out).1.contains("/nonexistent-model"), "{}", texts(&out).1);
}

/// A model whose sentence-transformers config names a query prompt gets it before every query
/// the selector embeds, and its document prompt before the tools' texts.
#[tokio::test(flavor = "multi_thread")]
async fn a_local_models_query_prompt_goes_before_every_query() {
    let source = PathBuf::from(minilm_dir());
    let dir = tempfile::tempdir().unwrap();
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(source.join(file), dir.path().join(file)).unwrap();
    }
    let prompts = r#"{"prompts": {"query": "query: ", "document": "passage: "}}"#;
    std::fs::write(dir.path().join("config_sentence_transformers.json"), prompts).unwrap();
    let model = quiver_runtime::embedder::local(dir.path()).unwrap();
    let queries = quiver_runtime::selector::QueryEmbedder::local(std::sync::Arc::clone(&model));
    let request = "list open pull requests";
    let got = queries.embed(request).await.unwrap();
    let plain = quiver_runtime::embedder::local(&source).unwrap();
    let with_prompt = plain.embed(&["query: list open pull requests"]).unwrap();
    let without = plain.embed(&[request]).unwrap();
    let cosine = |a: &[f32], b: &[f32]| -> f32 {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        dot / (a.iter().map(|x| x * x).sum::<f32>().sqrt()
            * b.iter().map(|x| x * x).sum::<f32>().sqrt())
    };
    assert_eq!(got.len(), 384, "one vector: the request has no clauses");
    assert!(cosine(&got, &with_prompt[0]) > 0.99999, "embedded as \"query: …\"");
    assert!(cosine(&got, &without[0]) < 0.999, "not as the bare request");
    // Tools' texts are documents.
    let tool = model.embed(&["github.list_pull_requests: List pull requests"]).unwrap();
    let passage = plain.embed(&["passage: github.list_pull_requests: List pull requests"]).unwrap();
    assert!(cosine(&tool[0], &passage[0]) > 0.99999);
}

/// The distilled vectors are looked up by the word pieces of all-MiniLM-L6-v2's tokenizer, which
/// core splits by itself: over every BFCL tool text and question, the reference texts of the
/// local embedder (accents, Japanese, an emoji, a 474-token line) and a few edge cases, core's
/// pieces are exactly the ones Hugging Face's tokenizer gives from the model's tokenizer.json.
#[test]
fn distilled_word_pieces_are_the_models_own_tokenizers() {
    let path = Path::new(&minilm_dir()).join("tokenizer.json");
    let mut tokenizer = tokenizers::Tokenizer::from_file(&path).unwrap();
    tokenizer.with_padding(None);
    tokenizer.with_truncation(None).unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
    let mut texts: Vec<String> = Vec::new();
    let tools: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("bfcl/tools.json")).unwrap())
            .unwrap();
    for spec in quiver_runtime::sources::parse_tools(&tools).unwrap() {
        texts.push(quiver_core::select::distilled_text(&spec.name, &spec));
    }
    for line in std::fs::read_to_string(data.join("bfcl/queries.jsonl")).unwrap().lines() {
        let query: Value = serde_json::from_str(line).unwrap();
        texts.push(query["query"].as_str().unwrap().to_owned());
    }
    texts.extend(
        std::fs::read_to_string(data.join("minilm/texts.txt")).unwrap().lines().map(String::from),
    );
    texts.extend(
        [
            "",
            "  ",
            "Ünïcödé naïve café",
            "tab\tand\u{0}nul\u{200b}zero-width",
            "中文和日本語",
            "x".repeat(101).as_str(),
            "émoji 🎉 and ™ ©",
        ]
        .map(String::from),
    );
    let table = quiver_core::select::distilled::DistilledVectors::get();
    let mut pieces = 0;
    for text in &texts {
        let expected = tokenizer.encode(text.as_str(), false).unwrap().get_ids().to_vec();
        assert_eq!(table.piece_ids(text), expected, "{text:?}");
        pieces += expected.len();
    }
    assert!(texts.len() > 3600 && pieces > 150_000, "{} texts, {pieces} pieces", texts.len());
}
