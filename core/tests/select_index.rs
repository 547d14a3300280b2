//! The selector's scoring on small registries: identifier splitting, BM25, fusion with the
//! built-in embedder, recent-call boosts, CORE, threshold and lift share, cap and bundle expansion.

use quiver_core::enrich::embed::{EmbeddingsArtifact, LexicalEmbedder, ToolEmbedding};
use quiver_core::select::eval::recall;
use quiver_core::select::{
    clauses, query_texts, tokens, Bm25, EmbeddingStatus, FieldWeight, Fusion, Ranked, SelectIndex,
    SelectOptions, DEFAULT_MODEL_EMBEDDING_WEIGHT, DEFAULT_MODEL_THRESHOLD,
};
use quiver_core::ToolSpec;
use serde_json::json;

fn spec(name: &str, group: &str, description: &str, params: &[(&str, &str)]) -> ToolSpec {
    let properties: serde_json::Map<String, serde_json::Value> = params
        .iter()
        .map(|(p, d)| ((*p).to_owned(), json!({"type": "string", "description": d})))
        .collect();
    ToolSpec {
        name: name.into(),
        group: Some(group.into()),
        description: description.into(),
        input_schema: json!({"type": "object", "properties": properties}),
        output_schema: None,
        sensitive_params: vec![],
    }
}

/// A registry in the shape of quiver's providers, small enough to reason about.
fn registry() -> Vec<(String, ToolSpec)> {
    let tools = [
        (
            "github.list_pull_requests",
            spec(
                "list_pull_requests",
                "pulls",
                "List a repository's pull requests, newest first",
                &[
                    ("owner", "Repository owner"),
                    ("repo", "Repository name"),
                    ("state", "open, closed or all"),
                ],
            ),
        ),
        (
            "github.get_pull_request",
            spec(
                "get_pull_request",
                "pulls",
                "Get one pull request with its body and merge state",
                &[
                    ("owner", "Repository owner"),
                    ("repo", "Repository name"),
                    ("number", "Pull request number"),
                ],
            ),
        ),
        (
            "github.list_pull_request_files",
            spec(
                "list_pull_request_files",
                "pulls",
                "List the files a pull request changes, with each file's diff",
                &[("number", "Pull request number")],
            ),
        ),
        (
            "github.get_job_logs",
            spec(
                "get_job_logs",
                "actions",
                "Get the end of a workflow job's log",
                &[("job_id", "The job")],
            ),
        ),
        (
            "github.list_workflow_runs",
            spec(
                "list_workflow_runs",
                "actions",
                "List a repository's GitHub Actions workflow runs with status and conclusion",
                &[("branch", "Only runs of this branch")],
            ),
        ),
        (
            "github.create_issue",
            spec(
                "create_issue",
                "issues",
                "Create an issue in a repository with labels and assignees",
                &[("title", "Issue title"), ("body", "Issue text")],
            ),
        ),
        (
            "github.get_issue",
            spec(
                "get_issue",
                "issues",
                "Get one issue with its body, labels and state",
                &[("number", "Issue number")],
            ),
        ),
        (
            "gitlab.list_merge_requests",
            spec(
                "list_merge_requests",
                "merge_requests",
                "List a project's merge requests, newest first",
                &[("project", "Project id or path"), ("state", "opened, merged or closed")],
            ),
        ),
        (
            "gitlab.list_pipelines",
            spec(
                "list_pipelines",
                "pipelines",
                "List a project's CI pipelines with status and ref",
                &[("project", "Project id or path"), ("ref", "Branch or tag")],
            ),
        ),
        (
            "jira.get_issue",
            spec(
                "get_issue",
                "issues",
                "Get one issue by key: status, people, priority",
                &[("key", "Issue key such as PROJ-1")],
            ),
        ),
        (
            "jira.transition_issue",
            spec(
                "transition_issue",
                "workflow",
                "Move an issue through its workflow to a target status such as Done",
                &[("key", "Issue key"), ("transition", "Transition name or target status")],
            ),
        ),
        (
            "fireflies.list_transcripts",
            spec(
                "list_transcripts",
                "transcripts",
                "List meeting transcripts newest first with participants",
                &[("from_date", "Earliest meeting date")],
            ),
        ),
        (
            "fireflies.get_transcript",
            spec(
                "get_transcript",
                "transcripts",
                "Get one meeting by id: summary, action items, speakers",
                &[("id", "Transcript id")],
            ),
        ),
    ];
    tools.into_iter().map(|(n, s)| (n.to_owned(), s)).collect()
}

fn embeddings(tools: &[(String, ToolSpec)]) -> EmbeddingsArtifact {
    let e = LexicalEmbedder::new();
    tools.iter().map(|(n, s)| (n.clone(), e.embed_tool(n, s))).collect()
}

fn index(options: SelectOptions, fused: bool) -> SelectIndex {
    let tools = registry();
    let artifact = embeddings(&tools);
    index_over(&tools, fused.then_some(&artifact), options)
}

fn index_over(
    tools: &[(String, ToolSpec)],
    embeddings: Option<&EmbeddingsArtifact>,
    options: SelectOptions,
) -> SelectIndex {
    SelectIndex::new(tools.iter().map(|(n, s)| (n.as_str(), s)), embeddings, options)
}

/// BM25F alone, without the distilled vectors, at the τ calibrated for it.
fn words_alone() -> SelectOptions {
    SelectOptions {
        distilled_weight: 0.0,
        threshold: quiver_core::select::DEFAULT_WORDS_THRESHOLD,
        ..SelectOptions::default()
    }
}

/// A toy model of another dimension over `names`: each tool's vector is one-hot at its own
/// position, so a query vector naming a tool ([`one_hot`]) lifts it alone.
fn one_hot_model(names: &[&String]) -> EmbeddingsArtifact {
    names
        .iter()
        .map(|n| {
            let embedding = ToolEmbedding {
                tool: one_hot(names, n),
                inputs: vec![],
                outputs: None,
                name: None,
            };
            ((*n).clone(), embedding)
        })
        .collect()
}

/// The vector over `names` that is 1 at `name` and 0 elsewhere.
fn one_hot(names: &[&String], name: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; names.len()];
    v[names.iter().position(|n| n.as_str() == name).unwrap()] = 1.0;
    v
}

fn top_names(index: &SelectIndex, query: &str, k: usize) -> Vec<String> {
    index.rank(query, &[], k).into_iter().map(|r| r.name).collect()
}

#[test]
fn identifiers_split_at_underscores_dots_and_camel_case() {
    assert_eq!(tokens("github.list_pull_requests"), ["github", "list", "pull", "request"]);
    assert_eq!(tokens("getMergeRequestApprovals"), ["get", "merg", "request", "approv"]);
    assert_eq!(tokens("gitlab.get_job_log"), tokens("gitlab.getJobLog"));
    assert_eq!(tokens("HTTPServer"), ["http", "server"]);
}

#[test]
fn bm25_prefers_rare_terms_and_shorter_documents() {
    // One field, weighted 1 and fully length-normalised.
    let fields = [FieldWeight { weight: 1.0, b: 0.75 }];
    let doc = |words: &str| vec![words.split(' ').map(|w| (w.to_owned(), 1.0)).collect::<Vec<_>>()];
    let docs = vec![
        doc("list issue repo"),
        doc("list pipeline project"),
        doc("list issue repo with a great many other words in it"),
    ];
    let bm25 = Bm25::new(&docs, &fields);
    let mut scores = vec![0.0; 3];
    let ceiling = bm25.score(&[("issue".into(), 1.0), ("unknown".into(), 1.0)], &mut scores);
    assert!(scores[0] > scores[2], "shorter document wins: {scores:?}");
    assert_eq!(scores[1], 0.0);
    assert!(scores[0] < ceiling, "the ceiling bounds every score");
    // A rare term outweighs a common one.
    let mut rare = vec![0.0; 3];
    bm25.score(&[("pipeline".into(), 1.0)], &mut rare);
    let mut common = vec![0.0; 3];
    bm25.score(&[("list".into(), 1.0)], &mut common);
    assert!(rare[1] > common[1], "{rare:?} vs {common:?}");
}

#[test]
fn words_in_names_rank_the_right_tool_first() {
    let idx = index(SelectOptions::default(), false);
    assert_eq!(top_names(&idx, "list merge requests", 1), ["gitlab.list_merge_requests"]);
    assert_eq!(top_names(&idx, "workflow runs", 1), ["github.list_workflow_runs"]);
    assert_eq!(top_names(&idx, "jira issue PROJ-1", 1), ["jira.get_issue"]);
}

#[test]
fn developer_shorthand_meets_the_words_tools_use() {
    let idx = index(words_alone(), false);
    assert_eq!(top_names(&idx, "open MRs", 1), ["gitlab.list_merge_requests"]);
    assert_eq!(top_names(&idx, "files changed in the PR", 1), ["github.list_pull_request_files"]);
    // `meeting` and `call` are aliases of `transcript` in the built-in table.
    assert!(top_names(&idx, "notes from the sales call", 2)
        .iter()
        .all(|n| n.starts_with("fireflies.")));
}

/// Tools by qualified name and description, each taking the one parameter `param`.
fn catalog(tools: &[(&str, &str)], param: (&str, &str)) -> Vec<(String, ToolSpec)> {
    tools
        .iter()
        .map(|(name, description)| {
            let local = name.split_once('.').unwrap().1;
            ((*name).to_owned(), spec(local, "", description, &[param]))
        })
        .collect()
}

/// Database tools in the Azure MCP Server's words: its MySQL and SQL Server families.
fn database_tools() -> Vec<(String, ToolSpec)> {
    catalog(
        &[
            ("azure.mysql_database_list", "List all MySQL databases available in the server"),
            ("azure.mysql_server_list", "List the MySQL flexible servers of a subscription"),
            ("azure.sql_db_list", "List the databases of an Azure SQL server"),
            ("azure.sql_db_show", "Show the details of one database of an Azure SQL server"),
            ("azure.sql_server_list", "List the Azure SQL servers of a subscription"),
        ],
        ("server", "The server name"),
    )
}

#[test]
fn a_product_written_in_camel_case_meets_the_name_that_spells_it_as_one_word() {
    // Read as its humps, `MySQL` is `my` (a stopword) and `sql`: the SQL Server tools won.
    let tools = database_tools();
    let idx = index_over(&tools, None, words_alone());
    assert_eq!(
        top_names(&idx, "List all MySQL databases in server", 1),
        ["azure.mysql_database_list"]
    );
    assert_eq!(top_names(&idx, "which MySQL servers do I have", 1), ["azure.mysql_server_list"]);
    // The humps still count: a request saying SQL finds the SQL tools.
    assert_eq!(top_names(&idx, "List my Azure SQL servers", 1), ["azure.sql_server_list"]);
}

#[test]
fn a_write_verb_typed_as_a_participle_filters_what_to_read_and_asks_no_change() {
    let tools = catalog(
        &[
            ("gitlab.list_issues", "List a project's issues, by label, state and last update"),
            ("gitlab.update_issue", "Update an issue's title, labels or assignee"),
            ("gitlab.create_issue", "Create an issue in a project"),
            ("gitlab.list_merge_requests", "List a project's merge requests"),
            ("gitlab.approve_merge_request", "Approve a merge request"),
        ],
        ("project", "The project's path"),
    );
    let idx = index_over(&tools, None, SelectOptions::default());
    // "updated" says which issues to read: the writes the request did not ask for are damped,
    // as for any read.
    assert_eq!(
        top_names(&idx, "gitlab issues labelled bug updated this week", 1),
        ["gitlab.list_issues"]
    );
    // The same verbs said as what to do still ask for the change.
    assert_eq!(top_names(&idx, "update the bug's labels", 1), ["gitlab.update_issue"]);
    assert_eq!(top_names(&idx, "approve the merge request", 1), ["gitlab.approve_merge_request"]);
}

#[test]
fn a_parameter_most_tools_take_does_not_drown_the_name_that_says_it() {
    // Every tool takes a subscription, as every tool of the Azure MCP Server does: in each
    // document, `subscription` was priced at nothing, and "show" found `sql_db_show`.
    let subscription = ("subscription", "The Azure subscription ID or name");
    let tool = |name: &str, description: &str, extra: &[(&str, &str)]| {
        let params: Vec<(&str, &str)> =
            std::iter::once(subscription).chain(extra.iter().copied()).collect();
        let local = name.split_once('.').unwrap().1;
        (name.to_owned(), spec(local, "", description, &params))
    };
    let tools = vec![
        tool("azure.subscription_list", "List all or current subscriptions for an account", &[]),
        tool("azure.group_list", "List all resource groups", &[]),
        tool(
            "azure.sql_db_show",
            "Show the details of a database",
            &[("database", "The database")],
        ),
        tool("azure.storage_account_get", "Show the details of storage accounts", &[]),
        tool("azure.keyvault_key_list", "List the keys of a key vault", &[("vault", "The vault")]),
        tool("azure.aks_cluster_get", "Show the details of a Kubernetes cluster", &[]),
    ];
    let idx = index_over(&tools, None, words_alone());
    assert_eq!(top_names(&idx, "Show me my subscriptions", 1), ["azure.subscription_list"]);
    // A parameter a few tools take still says which: the database tool for a database.
    assert_eq!(top_names(&idx, "show the database", 1), ["azure.sql_db_show"]);
}

#[test]
fn scores_are_in_the_unit_interval_best_first_and_at_most_k() {
    for fused in [false, true] {
        let idx = index(SelectOptions::default(), fused);
        let ranked = idx.rank("get the failing job log of the pipeline", &[], 4);
        assert!(ranked.len() <= 4);
        assert!(ranked.iter().all(|r| r.score > 0.0 && r.score <= 1.0), "{ranked:?}");
        assert!(ranked.windows(2).all(|w| w[0].score >= w[1].score));
    }
    let idx = index(SelectOptions::default(), true);
    assert!(idx.rank("", &[], 5).is_empty(), "an empty query matches nothing");
}

#[test]
fn fusion_uses_built_in_embeddings_and_can_rescue_what_words_miss() {
    let lexical = index(words_alone(), false);
    let fused = index(words_alone(), true);
    assert_eq!(lexical.embedding_status(), EmbeddingStatus::Absent);
    assert_eq!(fused.embedding_status(), EmbeddingStatus::Used);
    // A misspelt `transcrpt` shares no stem with `transcript`, only character n-grams.
    let query = "transcrpt";
    assert!(lexical.rank(query, &[], 5).is_empty());
    assert!(top_names(&fused, query, 2).iter().all(|n| n.starts_with("fireflies.")));
    let rrf =
        index(SelectOptions { fusion: Fusion::ReciprocalRank, ..SelectOptions::default() }, true);
    let best = rrf.rank("open MRs", &[], 1);
    assert_eq!(best[0].name, "gitlab.list_merge_requests");
    assert!(best[0].score <= 1.0);
}

#[test]
fn vectors_of_another_model_fall_back_to_words() {
    let tools = registry();
    let foreign: EmbeddingsArtifact = tools
        .iter()
        .map(|(n, _)| {
            (
                n.clone(),
                ToolEmbedding {
                    tool: vec![0.5; 8],
                    inputs: vec![0.5; 8],
                    outputs: None,
                    name: None,
                },
            )
        })
        .collect();
    let idx = SelectIndex::new(
        tools.iter().map(|(n, s)| (n.as_str(), s)),
        Some(&foreign),
        SelectOptions::default(),
    );
    assert_eq!(idx.embedding_status(), EmbeddingStatus::External { dimension: 8 });
    let words = index(SelectOptions::default(), false);
    assert_eq!(idx.rank("open MRs", &[], 5), words.rank("open MRs", &[], 5));
    // A vector of the wrong dimension is no query vector either.
    assert_eq!(idx.rank_with("open MRs", Some(&[1.0; 3]), &[], 5), words.rank("open MRs", &[], 5));
}

#[test]
fn vectors_of_another_model_fuse_with_the_query_vector_of_that_model() {
    let tools = registry();
    let names: Vec<&String> = tools.iter().map(|(n, _)| n).collect();
    let foreign = one_hot_model(&names);
    let options = SelectOptions { embedding_weight: 0.5, ..SelectOptions::default() };
    let idx = SelectIndex::new(tools.iter().map(|(n, s)| (n.as_str(), s)), Some(&foreign), options);
    assert!(idx.needs_query_vectors());
    let words = idx.rank("open MRs", &[], 3);
    assert_ne!(words[0].name, "jira.get_issue", "{words:?}");
    // An unnormalised vector works as well: the index normalises it.
    let query: Vec<f32> = one_hot(&names, "jira.get_issue").iter().map(|x| x * 7.0).collect();
    let fused = idx.rank_with("open MRs", Some(&query), &[], 3);
    assert!(fused.iter().any(|r| r.name == "jira.get_issue"), "{fused:?}");
    let (_, floor) = idx.rank_and_floor("open MRs", Some(&query), &[], 3);
    let lifted = fused.iter().find(|r| r.name == "jira.get_issue").map_or(0.0, |r| r.score);
    let selected = idx.select_with("open MRs", Some(&query), &[]);
    assert_eq!(selected.contains(&"jira.get_issue".to_owned()), lifted >= floor, "{selected:?}");
    // Asked in words no tool has, the model alone decides.
    let selected = idx.select_with("zzqx wibble", Some(&query), &[]);
    assert_eq!(selected, ["jira.get_issue"], "{selected:?}");
}

#[test]
fn a_request_for_two_things_finds_both_through_its_clauses() {
    assert_eq!(
        clauses("which job failed in pipeline 991 and what does its log say"),
        ["which job failed in pipeline 991", "what does its log say"]
    );
    assert_eq!(clauses("Stock price? Also, any news."), ["Stock price", "any news"]);
    assert!(clauses("pull requests and issues").is_empty(), "one-word clauses are dropped");
    assert_eq!(query_texts("list issues").len(), 1);

    let tools = registry();
    let names: Vec<&String> = tools.iter().map(|(n, _)| n).collect();
    let foreign = one_hot_model(&names);
    let options = SelectOptions {
        lexical_weight: 0.0,
        embedding_weight: 1.0,
        threshold: 0.0,
        ..words_alone()
    };
    let idx = SelectIndex::new(tools.iter().map(|(n, s)| (n.as_str(), s)), Some(&foreign), options);
    // A toy model: the whole request lands on neither tool; each clause lands on one.
    let query = "zz yy and xx ww";
    assert_eq!(query_texts(query), [query, "zz yy", "xx ww"]);
    let whole = vec![0.1f32; names.len()];
    let vectors: Vec<f32> =
        [whole.clone(), one_hot(&names, "jira.get_issue"), one_hot(&names, "github.get_job_logs")]
            .concat();
    let top: Vec<String> =
        idx.rank_with(query, Some(&vectors), &[], 2).into_iter().map(|r| r.name).collect();
    assert_eq!(top.len(), 2);
    assert!(top.contains(&"jira.get_issue".to_owned()), "{top:?}");
    assert!(top.contains(&"github.get_job_logs".to_owned()), "{top:?}");
    // The whole query's vector alone ranks every tool alike.
    let alone = idx.rank_with(query, Some(&whole), &[], 3);
    assert!(alone.windows(2).all(|w| (w[0].score - w[1].score).abs() < 1e-6), "{alone:?}");
    // A length that is not a multiple of the dimension is no vector at all: words alone.
    let broken = idx.rank_with(query, Some(&vectors[1..]), &[], 3);
    assert!(broken.is_empty(), "{broken:?}");
}

#[test]
fn recent_calls_lift_follow_ups_and_bundle_siblings_slightly() {
    let idx = index(SelectOptions::default(), true).with_follow_ups([(
        "github.get_pull_request",
        "github.list_pull_request_files",
        0.9,
    )]);
    let query = "pull request";
    let before = idx.rank(query, &[], 20);
    let after = idx.rank(query, &["github_get_pull_request".to_owned()], 20);
    let score = |ranked: &[quiver_core::select::Ranked], name: &str| {
        ranked.iter().find(|r| r.name == name).map_or(0.0, |r| r.score)
    };
    let lift = score(&after, "github.list_pull_request_files")
        - score(&before, "github.list_pull_request_files");
    let sibling =
        score(&after, "github.list_pull_requests") - score(&before, "github.list_pull_requests");
    assert!(lift > sibling && sibling > 0.0, "follow-up {lift}, sibling {sibling}");
    assert!(lift < 0.2, "a boost is slight: {lift}");
    assert_eq!(
        score(&after, "jira.get_issue"),
        score(&before, "jira.get_issue"),
        "other bundles are untouched"
    );
}

#[test]
fn follow_ups_of_a_tool_are_its_likely_links_most_probable_first() {
    let idx = index(SelectOptions::default(), true).with_follow_ups([
        ("github.get_pull_request", "github.list_pull_request_files", 0.3),
        ("github.get_pull_request", "github.list_pull_requests", 0.5),
        // A second path to the same tool counts as the likelier of the two.
        ("github.get_pull_request", "github.list_pull_request_files", 0.6),
        ("github.get_pull_request", "jira.get_issue", 0.1),
        ("github.get_pull_request", "nowhere.unknown", 0.9),
    ]);
    let next = idx.follow_ups_of("github_get_pull_request", 0.2);
    assert_eq!(
        next,
        [
            ("github.list_pull_request_files".to_owned(), 0.6),
            ("github.list_pull_requests".to_owned(), 0.5)
        ]
    );
    assert!(idx.follow_ups_of("jira.get_issue", 0.0).is_empty());
    assert!(idx.follow_ups_of("no.such_tool", 0.0).is_empty());
}

#[test]
fn select_keeps_core_first_then_hits_above_threshold() {
    let options = SelectOptions {
        core: vec!["jira.get_issue".into(), "fireflies.*".into()],
        ..SelectOptions::default()
    };
    let idx = index(options, true);
    let shown = idx.select("open MRs", &[]);
    assert_eq!(
        &shown[..3],
        ["jira.get_issue", "fireflies.get_transcript", "fireflies.list_transcripts"]
    );
    assert!(shown.contains(&"gitlab.list_merge_requests".to_owned()));
    assert!(!shown.contains(&"github.create_issue".to_owned()), "{shown:?}");
    // Nothing scores above τ for gibberish: only CORE.
    assert_eq!(idx.select("zzqx wibble", &[]).len(), 3);
}

#[test]
fn threshold_decides_whether_anything_gets_in_on_its_own_merit() {
    let strict = index(SelectOptions { threshold: 0.99, ..SelectOptions::default() }, true);
    assert!(strict.select("list merge requests", &[]).is_empty());
    // With no lift share, τ is what every tool needs: a lower one lets more in.
    let lenient =
        index(SelectOptions { threshold: 0.01, lift_share: 0.0, ..SelectOptions::default() }, true);
    let some = index(SelectOptions { lift_share: 0.0, ..SelectOptions::default() }, true);
    assert!(
        lenient.select("list merge requests", &[]).len()
            > some.select("list merge requests", &[]).len()
    );
}

/// A catalog whose tools all share a service's words ("Azure", "resource group",
/// "subscription") as long descriptions of real servers do: every request scores many of them.
fn one_service_catalog() -> Vec<(String, ToolSpec)> {
    let things = [
        ("storage_account", "storage accounts"),
        ("storage_blob", "blobs in a storage container"),
        ("keyvault_secret", "Key Vault secrets"),
        ("keyvault_key", "Key Vault keys"),
        ("cosmos_database", "Cosmos DB databases"),
        ("cosmos_container", "Cosmos DB containers"),
        ("aks_cluster", "Kubernetes (AKS) clusters"),
        ("aks_nodepool", "node pools of an AKS cluster"),
        ("monitor_workspace", "Log Analytics workspaces"),
        ("monitor_metric", "metrics of a monitored resource"),
        ("sql_server", "SQL servers"),
        ("sql_database", "databases of a SQL server"),
        ("redis_cache", "Azure Cache for Redis instances"),
        ("appconfig_store", "App Configuration stores"),
        ("servicebus_queue", "Service Bus queues"),
        ("eventhub_namespace", "Event Hubs namespaces"),
    ];
    let common = [
        ("subscription", "The Azure subscription ID or name"),
        ("resource_group", "The Azure resource group the resources are in"),
        ("tenant", "The Microsoft Entra tenant ID"),
    ];
    things
        .iter()
        .map(|(name, what)| {
            let description = format!(
                "List the {what} in an Azure subscription, optionally in one resource group. \
                 Returns each resource's name, location, resource group and properties."
            );
            (
                format!("azure.{name}_list"),
                spec(&format!("{name}_list"), name, &description, &common),
            )
        })
        .collect()
}

#[test]
fn the_selected_set_fits_how_the_catalog_scores_the_request() {
    let tools = one_service_catalog();
    let build = |threshold: f32, lift_share: f32| {
        let options = SelectOptions { threshold, lift_share, ..SelectOptions::default() };
        SelectIndex::new(tools.iter().map(|(n, s)| (n.as_str(), s)), None, options)
    };
    let query = "list the Key Vault secrets in my subscription";
    // Held to a τ that every tool clears (they all list things in a subscription), τ alone
    // selects the whole catalog.
    let by_threshold = build(0.05, 0.0).select(query, &[]);
    assert_eq!(by_threshold.len(), tools.len(), "{by_threshold:?}");
    // Held to their standing against the catalog, the Key Vault tools are what is left, at
    // that τ as at the default.
    for threshold in [0.05, quiver_core::select::DEFAULT_THRESHOLD] {
        let by_lift = build(threshold, 0.5).select(query, &[]);
        assert_eq!(by_lift, ["azure.keyvault_secret_list", "azure.keyvault_key_list"]);
    }
    // The floor is between what it keeps and what it leaves.
    let index = build(quiver_core::select::DEFAULT_THRESHOLD, 0.5);
    let by_lift = index.select(query, &[]);
    let (ranked, floor) = index.rank_and_floor(query, None, &[], 20);
    assert_eq!(ranked.len(), tools.len());
    for hit in &ranked {
        assert_eq!(by_lift.contains(&hit.name), hit.score >= floor, "{hit:?} against {floor}");
    }
    // A share of 1 keeps the best alone; nonsense selects nothing, the best must clear τ first.
    assert_eq!(build(0.05, 1.0).select(query, &[]), ["azure.keyvault_secret_list"]);
    assert!(index.select("zzqx wibble", &[]).is_empty());
    assert_eq!(index.rank_and_floor("zzqx wibble", None, &[], 5).1, f32::INFINITY);
}

#[test]
fn the_strongest_hit_brings_its_bundle() {
    let idx = index(SelectOptions { threshold: 0.3, ..SelectOptions::default() }, true);
    let query = "show the failing job's log";
    let below: Vec<String> =
        idx.rank(query, &[], 20).into_iter().filter(|r| r.score < 0.3).map(|r| r.name).collect();
    assert!(below.contains(&"github.list_workflow_runs".to_owned()), "{below:?}");
    let shown = idx.select(query, &[]);
    assert_eq!(shown[0], "github.get_job_logs");
    assert!(shown.contains(&"github.list_workflow_runs".to_owned()), "a sibling: {shown:?}");
    assert!(!shown.contains(&"gitlab.list_merge_requests".to_owned()), "{shown:?}");
}

#[test]
fn a_token_budget_keeps_the_most_score_its_listings_can_afford() {
    let query = "list pull requests and issues";
    let everything = SelectOptions { threshold: 0.0, lift_share: 0.0, ..SelectOptions::default() };
    let free = index(everything.clone(), false);
    let unbounded = free.select(query, &[]);
    let cost = |idx: &SelectIndex, names: &[String]| -> u64 {
        names.iter().map(|n| idx.listed_tokens(n).unwrap()).sum()
    };
    let all_tokens = cost(&free, &unbounded);
    assert!(unbounded.len() > 3 && all_tokens > 0, "{unbounded:?}");

    let budget = all_tokens / 3;
    let options = SelectOptions { max_list_tokens: Some(budget), ..everything };
    let bounded = index(options, false);
    let shown = bounded.select(query, &[]);
    assert!(!shown.is_empty() && shown.len() < unbounded.len(), "{shown:?}");
    assert!(cost(&bounded, &shown) <= budget, "{shown:?} over {budget} tokens");
    // Nothing left out would still fit in the room that is left (it would only add score).
    let scores: std::collections::HashMap<String, f32> =
        bounded.rank(query, &[], 100).into_iter().map(|r| (r.name, r.score)).collect();
    let room = budget - cost(&bounded, &shown);
    for left_out in unbounded.iter().filter(|n| !shown.contains(n)) {
        assert!(bounded.listed_tokens(left_out).unwrap() > room, "{left_out} fits in {room}");
    }
    // The best hit is kept.
    assert_eq!(shown[0], unbounded[0]);
    // The same cut applies to any scored list (find_tools answers).
    let scored: Vec<(String, f32)> = unbounded.iter().map(|n| (n.clone(), scores[n])).collect();
    assert!(cost(&bounded, &bounded.fit_budget(&scored)) <= budget);
    assert_eq!(free.fit_budget(&scored).len(), scored.len(), "no budget, no cut");
}

#[test]
fn a_binding_budget_keeps_the_best_hit_though_its_schema_is_large() {
    // The tool the request names has a large schema; five cheap tools share a word of the
    // request. A budget that holds the big one or the cheap ones must keep the big one:
    // together the cheap ones outscore it, but none of them is what was asked for.
    let params: Vec<(String, String)> = (0..40)
        .map(|i| (format!("filter_{i}"), format!("Restricts the export to field {i}")))
        .collect();
    let params: Vec<(&str, &str)> = params.iter().map(|(p, d)| (p.as_str(), d.as_str())).collect();
    let tools = [
        (
            "crm.export_invoices",
            spec("export_invoices", "billing", "Export invoices as CSV", &params),
        ),
        ("crm.export_contacts", spec("export_contacts", "people", "Export contacts", &[])),
        ("crm.get_csv_template", spec("get_csv_template", "files", "Get a CSV template", &[])),
        ("crm.count_invoices", spec("count_invoices", "stats", "Count invoices", &[])),
        ("crm.archive_invoices", spec("archive_invoices", "billing", "Archive invoices", &[])),
        ("crm.import_csv", spec("import_csv", "files", "Import a CSV file", &[])),
    ];
    let refs = || tools.iter().map(|(n, s)| (*n, s));
    let free =
        SelectIndex::new(refs(), None, SelectOptions { threshold: 0.0, ..Default::default() });
    let query = "export the invoices as csv";
    let ranked = free.rank(query, &[], 10);
    assert_eq!(ranked[0].name, "crm.export_invoices", "{ranked:?}");
    let cost = |n: &str| free.listed_tokens(n).unwrap();
    let cheap: Vec<&Ranked> = ranked[1..].iter().collect();
    assert_eq!(cheap.len(), 5, "{ranked:?}");
    let cheap_cost: u64 = cheap.iter().map(|r| cost(&r.name)).sum();
    let cheap_score: f32 = cheap.iter().map(|r| r.score).sum();
    assert!(cheap_score > ranked[0].score, "the cheap ones outscore it together: {ranked:?}");
    let budget = cost("crm.export_invoices").max(cheap_cost);
    assert!(
        budget < cost("crm.export_invoices") + cheap.iter().map(|r| cost(&r.name)).min().unwrap()
    );

    let options =
        SelectOptions { threshold: 0.0, max_list_tokens: Some(budget), ..SelectOptions::default() };
    let bounded = SelectIndex::new(refs(), None, options);
    let shown = bounded.select(query, &[]);
    assert_eq!(shown[0], "crm.export_invoices", "{shown:?} under {budget} tokens");
    let scored: Vec<(String, f32)> = ranked.iter().map(|r| (r.name.clone(), r.score)).collect();
    assert_eq!(bounded.fit_budget(&scored)[0], "crm.export_invoices");
}

#[test]
fn the_cap_holds_except_for_core() {
    let capped =
        index(SelectOptions { max_tools: 2, threshold: 0.0, ..SelectOptions::default() }, true);
    assert_eq!(capped.select("list pull requests and issues", &[]).len(), 2);
    let core_heavy = index(
        SelectOptions { max_tools: 1, core: vec!["github.*".into()], ..SelectOptions::default() },
        true,
    );
    assert_eq!(core_heavy.select("open MRs", &[]).len(), 7, "CORE is never dropped");
}

#[test]
fn bundles_are_providers_and_their_groups() {
    let idx = index(SelectOptions::default(), false);
    let names: Vec<&str> = idx.bundles().iter().map(|b| b.name.as_str()).collect();
    assert!(
        names.contains(&"github")
            && names.contains(&"github.pulls")
            && names.contains(&"jira.workflow")
    );
    let pulls = idx.bundles().iter().find(|b| b.name == "github.pulls").unwrap();
    assert_eq!(pulls.tools.len(), 3);
    assert_eq!(
        pulls.description,
        "github pulls (3): get_pull_request, list_pull_request_files, list_pull_requests"
    );
    let github = idx.bundles().iter().find(|b| b.name == "github").unwrap();
    assert_eq!(github.description, "every github tool (7): actions, issues, pulls");
    assert!(idx.bundles().iter().all(|b| !b.description.contains('\n')));
}

#[test]
fn recall_counts_whole_sets_and_partial_credit() {
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let runs = vec![
        (s(&["a", "b", "c"]), s(&["a"])),
        (s(&["x", "y", "z"]), s(&["z", "q"])),
        (s(&["m"]), s(&[])),
    ];
    let rows = recall(&runs, &[1, 3]);
    assert_eq!((rows[0].whole, rows[0].per_item), (0.5, 0.5));
    assert_eq!((rows[1].whole, rows[1].per_item), (0.5, 0.75));
}

#[test]
fn select_admits_the_best_tool_of_each_clause_of_a_two_part_request() {
    let options = SelectOptions { threshold: 0.2, ..words_alone() };
    let idx = index(options, false);
    let query = "show the log of the failing job and move PROJ-7 to Done";
    // The whole request's words favour the job log; moving the issue scores below τ on them.
    let whole = idx.rank(query, &[], 3);
    assert_eq!(whole[0].name, "github.get_job_logs", "{whole:?}");
    let transition = whole.iter().find(|r| r.name == "jira.transition_issue").unwrap();
    assert!(transition.score < 0.2, "{whole:?}");
    // Its clause "move PROJ-7 to Done" alone clears τ, so the tool is shown.
    let selected = idx.select(query, &[]);
    assert!(selected.contains(&"github.get_job_logs".to_owned()), "{selected:?}");
    assert!(selected.contains(&"jira.transition_issue".to_owned()), "{selected:?}");
    let hits = idx.clause_hits(query, None, &[]);
    let names: Vec<&str> = hits.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["github.get_job_logs", "jira.transition_issue"], "{hits:?}");
    assert!(hits.iter().all(|h| h.score >= 0.2), "{hits:?}");
    // A one-part request gets nothing beyond its τ.
    let one_part = idx.select("show the log of the failing job", &[]);
    assert!(!one_part.contains(&"jira.transition_issue".to_owned()), "{one_part:?}");
    assert!(idx.clause_hits("show the log of the failing job", None, &[]).is_empty());
}

#[test]
fn a_query_near_a_tools_name_vector_lifts_that_tool() {
    let tools = registry();
    let target = "jira.get_issue";
    // Every tool's whole vector is the same; only the name vectors tell them apart.
    let artifact = |with_names: bool| -> EmbeddingsArtifact {
        tools
            .iter()
            .map(|(n, _)| {
                let name =
                    with_names.then(|| if n == target { vec![0.0, 1.0] } else { vec![1.0, 0.0] });
                (
                    n.clone(),
                    ToolEmbedding { tool: vec![1.0, 1.0], inputs: vec![], outputs: None, name },
                )
            })
            .collect()
    };
    let shared = SelectOptions { embedding_weight: 1.0, name_share: 0.3, ..Default::default() };
    let query = [0.0, 1.0];
    let build = |with_names, options: &SelectOptions| {
        let embeddings = artifact(with_names);
        SelectIndex::new(
            tools.iter().map(|(n, s)| (n.as_str(), s)),
            Some(&embeddings),
            options.clone(),
        )
    };
    // Words that fit several tools equally ("issue"), so the vectors decide.
    let with_names = build(true, &shared).rank_with("issue", Some(&query), &[], 3);
    assert_eq!(with_names[0].name, target, "{with_names:?}");
    let without = build(false, &shared).rank_with("issue", Some(&query), &[], 3);
    assert!(without[0].score < with_names[0].score, "{without:?} / {with_names:?}");
    // By default the name vectors are kept but not counted: the ranking is the whole text's.
    let default = SelectOptions { embedding_weight: 1.0, ..Default::default() };
    assert_eq!(default.name_share, 0.0);
    let ignored = build(true, &default).rank_with("issue", Some(&query), &[], 3);
    assert_eq!(ignored, without, "names embedded, share 0");
}

/// Tools of unrelated services, described as public tool catalogs describe them.
fn services() -> Vec<(String, ToolSpec)> {
    [
        ("FinanceTool", "Stay informed with the latest financial updates, real-time insights and analysis on stocks, cryptocurrencies and more."),
        ("WeatherTool", "Forecasts, rain and temperature for any city, today and for the week ahead."),
        ("RecipeTool", "Find recipes by ingredient, cuisine or diet, with cooking times."),
        ("MediaTool", "Recommendations for TV shows, movies, books and podcasts."),
    ]
    .into_iter()
    .map(|(name, description)| (name.to_owned(), spec(name, "services", description, &[])))
    .collect()
}

#[test]
fn distilled_vectors_find_a_tool_that_shares_no_word_with_the_request() {
    let tools = services();
    let words_alone = index_over(&tools, None, words_alone());
    let default = index_over(&tools, None, SelectOptions::default());
    for (request, tool) in [
        ("how much is one Litecoin worth in dollars", "FinanceTool"),
        ("will I need an umbrella in Oslo tomorrow", "WeatherTool"),
        ("something to watch on Netflix tonight", "MediaTool"),
    ] {
        // Not one word in common: BM25F alone has nothing to rank.
        assert!(words_alone.rank(request, &[], 4).is_empty(), "{request}");
        let ranked = default.rank(request, &[], 4);
        assert_eq!(ranked[0].name, tool, "{request}: {ranked:?}");
        assert!(ranked.iter().all(|r| (0.0..=1.0).contains(&r.score)));
    }
    // Words still decide where they match.
    assert_eq!(default.rank("find recipes with chickpeas", &[], 1)[0].name, "RecipeTool");
}

#[test]
fn distilled_vectors_find_both_tools_of_a_request_for_two_things() {
    let index = index_over(&services(), None, SelectOptions::default());
    for (request, wanted) in [
        (
            "how much is one Litecoin worth in dollars and will I need an umbrella in Oslo tomorrow",
            ["FinanceTool", "WeatherTool"],
        ),
        ("something to watch on Netflix tonight, then the price of Litecoin", ["FinanceTool", "MediaTool"]),
    ] {
        // Neither thing drowns the other (each clause's similarity counts beside the whole
        // request's; on MetaTool's two-tool requests that is where it shows).
        let mut top = top_names(&index, request, 2);
        top.sort();
        assert_eq!(top, wanted, "{request}");
    }
}

#[test]
fn nonsense_selects_nothing_at_the_default_threshold() {
    let index = index(SelectOptions::default(), false);
    for nonsense in ["zzzz qqqq", "lorem ipsum dolor sit amet", "asdfgh jkl"] {
        assert!(index.select(nonsense, &[]).is_empty(), "{nonsense}");
        let best = index.rank(nonsense, &[], 1);
        assert!(best.iter().all(|r| r.score < SelectOptions::default().threshold), "{best:?}");
    }
    assert!(!index.select("list the open pull requests", &[]).is_empty());
}

/// With a model's vectors, the default fusion counts each signal in its own standard deviations
/// over the catalog and never lets the model outweigh words: past the words' weight a larger
/// model weight changes nothing, and a tool that only the model points at (none of the
/// request's words) scores at most half, where a fixed weighted sum gives it nearly all. With no
/// word of the request in any tool, the model alone ranks.
#[test]
fn a_models_similarity_never_outweighs_words_in_the_default_fusion() {
    let tools = registry();
    let names: Vec<&String> = tools.iter().map(|(n, _)| n).collect();
    let foreign = one_hot_model(&names);
    let index_with = |fusion: Fusion, embedding_weight: f32| {
        let options = SelectOptions { embedding_weight, threshold: 0.0, fusion, ..words_alone() };
        SelectIndex::new(tools.iter().map(|(n, s)| (n.as_str(), s)), Some(&foreign), options)
    };
    let model_says = one_hot(&names, "jira.get_issue");
    let ranking = |index: &SelectIndex, query: &str| {
        index.rank_with(query, Some(&model_says), &[], names.len())
    };
    let query = "list merge requests";
    let capped = ranking(&index_with(Fusion::default(), 100.0), query);
    assert_eq!(capped, ranking(&index_with(Fusion::default(), 1000.0), query));
    let score = |ranked: &[Ranked], name: &str| {
        ranked.iter().find(|r| r.name == name).map_or(0.0, |r| r.score)
    };
    assert!(score(&capped, "jira.get_issue") <= 0.5, "{capped:?}");
    assert!(score(&capped, "gitlab.list_merge_requests") > 0.25, "{capped:?}");
    let weighted = ranking(&index_with(Fusion::Weighted, 100.0), query);
    assert_eq!(weighted[0].name, "jira.get_issue");
    assert!(weighted[0].score > 0.95, "{weighted:?}");
    let wordless = ranking(&index_with(Fusion::default(), 3.0), "zzzz qqqq");
    assert_eq!(wordless[0].name, "jira.get_issue", "{wordless:?}");
}

/// A Key Vault's tools, with the vectors of a toy model that tells what a request is about
/// (keys, secrets) but reads its action poorly: it has `keyvault_key_get` a little nearer to
/// anything said about keys than `keyvault_key_list`, as all-MiniLM-L6-v2 had the Azure MCP Server's
/// `keyvault_key_get` nearer to "Enumerate keys in key vault" than `keyvault_key_list`.
fn key_vault() -> (Vec<(String, ToolSpec)>, EmbeddingsArtifact) {
    let tools = catalog(
        &[
            ("azure.keyvault_key_get", "Get one key of a key vault by its name"),
            ("azure.keyvault_key_list", "List all keys in a key vault"),
            ("azure.keyvault_key_create", "Create a key in a key vault"),
            ("azure.keyvault_secret_list", "List all secrets in a key vault"),
            ("azure.storage_account_list", "List the storage accounts of a subscription"),
        ],
        ("vault", "The key vault's name"),
    );
    let vectors = [
        ("azure.keyvault_key_get", [0.95f32, 0.31, 0.0]),
        ("azure.keyvault_key_list", [0.915, 0.403, 0.0]),
        ("azure.keyvault_key_create", [0.6, 0.8, 0.0]),
        ("azure.keyvault_secret_list", [0.2, 0.3, 0.93]),
        ("azure.storage_account_list", [0.0, 0.2, 0.98]),
    ];
    let artifact = vectors
        .into_iter()
        .map(|(name, tool)| {
            let embedding =
                ToolEmbedding { tool: tool.to_vec(), inputs: vec![], outputs: None, name: None };
            (name.to_owned(), embedding)
        })
        .collect();
    (tools, artifact)
}

#[test]
fn a_model_picks_what_a_request_is_about_and_words_pick_what_it_asks_done() {
    let (tools, model) = key_vault();
    let options = SelectOptions {
        embedding_weight: DEFAULT_MODEL_EMBEDDING_WEIGHT,
        threshold: DEFAULT_MODEL_THRESHOLD,
        ..SelectOptions::default()
    };
    let index = index_over(&tools, Some(&model), options).external_embeddings();
    let about_keys = [1.0f32, 0.0, 0.0];
    let ranked = |query: &str| -> Vec<String> {
        index.rank_with(query, Some(&about_keys), &[], 3).into_iter().map(|r| r.name).collect()
    };
    // The words have the list first; the model, alone, the get.
    let words = index_over(&tools, None, words_alone());
    assert_eq!(
        top_names(&words, "Enumerate the keys in my key vault", 1),
        ["azure.keyvault_key_list"]
    );
    let fused = ranked("Enumerate the keys in my key vault");
    assert_eq!(fused[0], "azure.keyvault_key_list", "{fused:?}");
    // The words pick the action the model ranks last, and the model still says what the
    // request is about: the key tools above the secrets' list.
    let fused = ranked("Create a new key in the key vault");
    assert_eq!(fused[0], "azure.keyvault_key_create", "{fused:?}");
    assert!(fused.iter().all(|n| n.starts_with("azure.keyvault_key_")), "{fused:?}");
}

/// A query that a model's similarity was to be fused into but that comes without the model's
/// vector (its endpoint failed) is ranked on words and the distilled vectors, and held to their
/// τ, not to the model's.
#[test]
fn a_query_without_the_models_vector_is_held_to_the_words_threshold() {
    let tools = registry();
    let names: Vec<&String> = tools.iter().map(|(n, _)| n).collect();
    let foreign = one_hot_model(&names);
    let options = SelectOptions {
        embedding_weight: 3.0,
        threshold: 0.0,
        threshold_without_model: 0.99,
        ..SelectOptions::default()
    };
    let index =
        SelectIndex::new(tools.iter().map(|(n, s)| (n.as_str(), s)), Some(&foreign), options)
            .external_embeddings();
    let vector = vec![1.0f32 / (names.len() as f32).sqrt(); names.len()];
    assert_eq!(index.threshold_for(Some(&vector)), 0.0);
    assert_eq!(index.threshold_for(None), 0.99);
    assert!(!index.select_with("list merge requests", Some(&vector), &[]).is_empty());
    let without = index.select_with("list merge requests", None, &[]);
    assert!(without.is_empty(), "{without:?}");
}
