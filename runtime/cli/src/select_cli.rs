//! `quiver select`: rank tools for queries with the selector, and measure its recall on an
//! evaluation set.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use quiver_core::enrich::embed::{EmbeddingsArtifact, LexicalEmbedder};
use quiver_core::select::eval::{recall, RECALL_AT};
use quiver_runtime::embedder;
use quiver_runtime::enrich::CatalogTool;
use quiver_runtime::selector::{
    selector_for_host, Fusion, QueryEmbedder, Selector, SelectorOptions,
};
use quiver_runtime::Host;
use serde::Deserialize;

/// `quiver select` arguments.
#[derive(clap::Args)]
pub(crate) struct SelectArgs {
    /// Tools to rank: an MCP tools/list result or OpenAI function definitions, names kept as
    /// written (default: the host's catalog, with the embeddings enrichment's vectors).
    #[arg(long, value_name = "FILE")]
    tools: Option<PathBuf>,
    /// Queries, one JSON object `{"id": …, "query": "…"}` per line; prints one
    /// `{"id": …, "ranked": [names…], "scores": [scores…]}` per line.
    #[arg(long, value_name = "FILE.jsonl", conflicts_with = "query")]
    queries: Option<PathBuf>,
    /// One query; prints the ranking with scores.
    #[arg(long, value_name = "TEXT")]
    query: Option<String>,
    /// With --queries: the tools each query needs, `{"id": …, "tools": [names…]}` per line;
    /// prints recall at 1, 3, 5 and 10 instead of the rankings, and how often the selected set
    /// holds the whole gold set.
    #[arg(long, value_name = "FILE.jsonl", requires = "queries")]
    gold: Option<PathBuf>,
    /// Tools per ranking.
    #[arg(long, default_value_t = 10)]
    k: usize,
    /// Rank on words only (BM25F), without embedding or distilled-vector similarity.
    #[arg(long)]
    lexical_only: bool,
    /// τ: the score a tool needs to be selected on its own merit (the selected-set line of
    /// --gold); several, comma-separated, print a selected-set line each (calibrating τ).
    #[arg(long, value_name = "TAU", value_delimiter = ',')]
    threshold: Vec<f32>,
    /// The weight of the lexical (BM25) score.
    #[arg(long, value_name = "W")]
    lexical_weight: Option<f32>,
    /// The weight of the embedding similarity.
    #[arg(long, value_name = "W")]
    embedding_weight: Option<f32>,
    /// How lexical and embedding scores are combined.
    #[arg(long, value_enum, default_value = "standardized")]
    fusion: FusionArg,
    /// The most tokens the selected tools' listings may cost together (the selected-set line of
    /// --gold); default: `[selector] max_list_tokens`.
    #[arg(long, value_name = "TOKENS")]
    max_list_tokens: Option<u64>,
    /// Embed tools and queries with the sentence embedder in this model directory (config.json,
    /// model.safetensors, tokenizer.json), as `[selector.embedder] type = "local"` does; fused
    /// with words at `[selector] embedding_weight` (default 3).
    #[arg(long, value_name = "DIR")]
    local_model: Option<PathBuf>,
    /// With --queries and no --gold: print what each query's ranking combines instead of the
    /// ranking — a first line `{"tools": [names…], "similarity": "model"|"distilled"|null}`,
    /// then per query `{"id", "words": […], "similarity": […], "damped": [tool indexes]}` over
    /// every tool in that order — for studying the fusion offline.
    #[arg(long, requires = "queries", conflicts_with = "gold")]
    parts: bool,
    /// How far above the catalog's mean score a tool must stand to be selected, as a share of
    /// the best tool's distance (the selected-set line of --gold); default: `[selector]
    /// lift_share`, else 0.5 (0.45 with a neural model, 0.4 on words alone); 0: every tool at τ
    /// or above. Several, comma-separated, print a selected-set line for each with each τ.
    #[arg(long, value_name = "SHARE", value_delimiter = ',')]
    lift_share: Vec<f32>,
    /// With --gold: also list the queries whose gold set is not in the top 5.
    #[arg(long, requires = "gold")]
    show_misses: bool,
    /// With a neural model: embed each query whole, without its clauses (a request for two
    /// things is otherwise embedded clause by clause as well)
    #[arg(long)]
    whole_queries: bool,
    /// With --local-model: embed each tool's whole text only, not its name as well (no
    /// --name-share can use them then)
    #[arg(long, requires = "local_model")]
    no_name_vectors: bool,
    /// With a neural model: how much a request's similarity to a tool's name counts beside the
    /// whole tool's (1); default: `[selector] name_share`, else 0.
    #[arg(long, value_name = "W")]
    name_share: Option<f32>,
    /// With a neural model: how far a tool's similarity is raised toward the best of its
    /// action family (tools whose names differ only in what they do); default: `[selector]
    /// family_share`, else 0.5 (0: each tool's own).
    #[arg(long, value_name = "W")]
    family_share: Option<f32>,
    /// How much the built-in distilled vectors' similarity counts beside words when no model's
    /// is fused; default: `[selector] distilled_weight`, else 0.35 (0: words alone).
    #[arg(long, value_name = "W")]
    distilled_weight: Option<f32>,
    /// Only the queries of one part of the set: `tune` those whose id ends in a number that is a
    /// multiple of 4 (`s8`, `m12`), `test` the others — the split the defaults were tuned on
    /// (MetaTool's `tune` part) and are reported on (its `test` part).
    #[arg(long, value_enum, requires = "queries")]
    part: Option<PartArg>,
}

/// `--part` values.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PartArg {
    /// Ids ending in a multiple of 4.
    Tune,
    /// Every other id.
    Test,
}

/// Which part a query id is in: the number its id ends with (a JSON number, or digits ending a
/// string) modulo 4; an id without one is in `test`.
fn part_of(id: &serde_json::Value) -> PartArg {
    let number = match id {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => {
            s[s.trim_end_matches(|c: char| c.is_ascii_digit()).len()..].parse().ok()
        }
        _ => None,
    };
    match number {
        Some(n) if n % 4 == 0 => PartArg::Tune,
        _ => PartArg::Test,
    }
}

/// `--fusion` values.
#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum FusionArg {
    /// Each score in its own standard deviations over the catalog (z-score fusion), the model
    /// never outweighing words.
    Standardized,
    /// A weighted sum of the normalised scores, the weights fixed.
    Weighted,
    /// Reciprocal-rank fusion.
    Rrf,
}

#[derive(Deserialize)]
struct QueryLine {
    id: serde_json::Value,
    query: String,
}

#[derive(Deserialize)]
struct GoldLine {
    id: serde_json::Value,
    tools: Vec<String>,
}

pub(crate) fn select(host: &Host, args: SelectArgs) -> anyhow::Result<ExitCode> {
    let configured = host.config().config.selector.clone();
    let mut options = SelectorOptions::from_config(&host.config().config);
    if let Some(t) = args.max_list_tokens {
        options.max_list_tokens = Some(t);
    }
    if let Some(share) = args.name_share {
        options.name_share = share;
    }
    if let Some(share) = args.family_share {
        if let Some(problem) = quiver_core::select::family_share_problem(share) {
            anyhow::bail!("--family-share {share}: {problem}");
        }
        options.family_share = share;
    }
    if let Some(w) = args.distilled_weight {
        options.distilled_weight = w;
    }
    let local = match &args.local_model {
        Some(dir) => {
            if configured.embedding_weight.is_none() {
                options.embedding_weight = quiver_core::select::DEFAULT_MODEL_EMBEDDING_WEIGHT;
            }
            Some(embedder::local(dir).map_err(|e| anyhow::anyhow!("--local-model: {e}"))?)
        }
        None => quiver_runtime::enrich::local_embedder(host).map_err(|e| anyhow::anyhow!(e))?,
    };
    if let Some(w) = args.lexical_weight {
        options.lexical_weight = w;
    }
    if let Some(w) = args.embedding_weight {
        options.embedding_weight = w;
    }
    if args.lexical_only {
        options.embedding_weight = 0.0;
        options.distilled_weight = 0.0;
    }
    // τ for the mix in use: a file's tools meet a neural model only through --local-model.
    let neural = local.is_some()
        || args.tools.is_none()
            && quiver_runtime::selector::embeds_with_a_model(&host.config().config);
    let model_fused = neural && options.embedding_weight > 0.0;
    let thresholds = if args.threshold.is_empty() {
        vec![configured.effective_threshold(model_fused, options.distilled_weight)]
    } else {
        args.threshold.clone()
    };
    options.threshold = thresholds[0];
    let shares = if args.lift_share.is_empty() {
        vec![configured.effective_lift_share(model_fused, options.distilled_weight)]
    } else {
        args.lift_share.clone()
    };
    options.lift_share = shares[0];
    let (max_tools, max_list_tokens) = (options.max_tools, options.max_list_tokens);
    let distilled = options.distilled_weight > 0.0;
    // How the selected-set lines name the budget.
    let budget = max_list_tokens.map(|t| format!(", {t} tokens")).unwrap_or_default();
    let lift_of = |share: f32| if share > 0.0 { format!(", lift {share}") } else { String::new() };
    let lift = lift_of(options.lift_share);
    let fusion = match args.fusion {
        FusionArg::Standardized => Fusion::Standardized,
        FusionArg::Weighted => Fusion::Weighted,
        FusionArg::Rrf => Fusion::ReciprocalRank,
    };
    let selector = match &args.tools {
        Some(path) => {
            let tools = read_tools(path)?;
            let companions = quiver_runtime::selector::dataflow_companions(&tools);
            let companions = companions.iter().map(|(f, t, s)| (f.as_str(), t.as_str(), *s));
            // The file's tools embedded in memory — with the local model when one is named, else
            // the built-in embedder: a file is evaluated as it is, whatever the config's
            // enrichments say.
            match &local {
                Some(model) if options.embedding_weight > 0.0 => {
                    let embeddings = embedder::embed_for_selection(
                        model.as_ref(),
                        tools.iter().map(|t| (t.name.as_str(), &t.spec)),
                        !args.no_name_vectors,
                    )
                    .map_err(|e| anyhow::anyhow!(e))?;
                    Selector::with_fusion(&tools, Some(&embeddings), options, fusion)
                        .with_companions(companions)
                        .with_query_embedder(QueryEmbedder::local(std::sync::Arc::clone(model)))
                }
                _ => {
                    let embedder = LexicalEmbedder::new();
                    let embeddings: EmbeddingsArtifact = tools
                        .iter()
                        .map(|t| (t.name.clone(), embedder.embed_tool(&t.name, &t.spec)))
                        .collect();
                    Selector::with_fusion(&tools, Some(&embeddings), options, fusion)
                        .with_companions(companions)
                }
            }
        }
        None if args.local_model.is_some() => {
            bail!("--local-model needs --tools FILE; for the host's tools set [selector.embedder]")
        }
        None if fusion == Fusion::default() => selector_for_host(host, options)?,
        None => bail!(
            "--fusion weighted and rrf need --tools FILE; the host's selector fuses by standard deviations"
        ),
    };
    let mode = match selector.query_embedder() {
        Some(model) if selector.uses_embeddings() => {
            format!("fused: words and {} embeddings", model.model_id())
        }
        _ if selector.uses_embeddings() => "fused: words and embeddings".to_owned(),
        _ if distilled => "words and distilled vectors".to_owned(),
        _ => "words only".to_owned(),
    };
    if let Some(query) = &args.query {
        let vector = query_vectors(&selector, std::slice::from_ref(query), args.whole_queries)?
            .pop()
            .flatten();
        let hits = selector.rank_with(query, vector.as_deref(), &[], args.k);
        if hits.is_empty() {
            println!("no tool matches {query:?} ({mode}): none of its words is in any tool's text");
        }
        for hit in &hits {
            println!("{:.3}  {}", hit.score, hit.name);
        }
        // What a model would be shown: the ranking is only the order; τ, the bundles of the
        // strongest hits and the budgets decide the set.
        let selected = selector.select_with(query, vector.as_deref(), &[]);
        let tokens: u64 = selected.iter().filter_map(|t| selector.listed_tokens(t)).sum();
        let shown = if selected.is_empty() { "none".to_owned() } else { selected.join(", ") };
        println!(
            "selected (τ {}{lift}, at most {max_tools}{budget}): {} tools ({tokens} tokens): {shown}",
            thresholds[0],
            selected.len(),
        );
        return Ok(ExitCode::SUCCESS);
    }
    let Some(queries_path) = &args.queries else {
        return Err(crate::UsageError(
            "nothing to rank; pass --queries FILE.jsonl or --query TEXT".into(),
        )
        .into());
    };
    let mut queries: Vec<QueryLine> = read_jsonl(queries_path)?;
    if let Some(part) = args.part {
        queries.retain(|q| part_of(&q.id) == part);
    }
    let texts: Vec<String> = queries.iter().map(|q| q.query.clone()).collect();
    let vectors = query_vectors(&selector, &texts, args.whole_queries)?;
    let Some(gold_path) = &args.gold else {
        let mut out = std::io::stdout().lock();
        if args.parts {
            return print_parts(&selector, &queries, &vectors, &mut out);
        }
        for (q, vector) in queries.iter().zip(&vectors) {
            let hits = selector.rank_with(&q.query, vector.as_deref(), &[], args.k);
            let scores: Vec<f32> = hits.iter().map(|r| (r.score * 1e4).round() / 1e4).collect();
            let ranked: Vec<String> = hits.into_iter().map(|r| r.name).collect();
            let line = serde_json::json!({ "id": q.id, "ranked": ranked, "scores": scores });
            writeln!(out, "{line}")?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    let gold: Vec<GoldLine> = read_jsonl(gold_path)?;
    let gold: std::collections::HashMap<String, &GoldLine> =
        gold.iter().map(|g| (g.id.to_string(), g)).collect();
    let deepest = RECALL_AT.iter().copied().max().unwrap_or(10).max(args.k);
    let mut runs = Vec::with_capacity(queries.len());
    let mut unknown = Vec::new();
    // Per rule (τ, lift share): queries whose whole gold set was selected, tools and tokens
    // selected.
    let rules: Vec<(f32, f32)> =
        shares.iter().flat_map(|&share| thresholds.iter().map(move |&t| (t, share))).collect();
    let per_rule: Vec<Selector> = rules
        .iter()
        .map(|&(t, share)| selector.clone().with_threshold(t).with_lift_share(share))
        .collect();
    let mut selected_stats = vec![(0usize, 0usize, 0u64); rules.len()];
    for (q, vector) in queries.iter().zip(&vectors) {
        let vector = vector.as_deref();
        let Some(g) = gold.get(&q.id.to_string()) else {
            bail!(
                "query {} has no line in {}; add {{\"id\": {}, \"tools\": [...]}}",
                q.id,
                gold_path.display(),
                q.id
            );
        };
        let ranked: Vec<String> = selector
            .rank_with(&q.query, vector, &[], deepest)
            .into_iter()
            .map(|r| r.name)
            .collect();
        unknown.extend(g.tools.iter().filter(|t| !selector.names().contains(t)).cloned());
        for (at, (whole, size, tokens)) in per_rule.iter().zip(&mut selected_stats) {
            let selected = at.select_with(&q.query, vector, &[]);
            if g.tools.iter().all(|t| selected.contains(t)) {
                *whole += 1;
            }
            *size += selected.len();
            *tokens += selected.iter().filter_map(|t| selector.listed_tokens(t)).sum::<u64>();
        }
        runs.push((q, ranked, g.tools.clone()));
    }
    if !unknown.is_empty() {
        unknown.sort();
        unknown.dedup();
        eprintln!(
            "quiver: gold tools not among the ranked tools (they count as misses): {}",
            unknown.join(", ")
        );
    }
    let pairs: Vec<(Vec<String>, Vec<String>)> =
        runs.iter().map(|(_, r, g)| (r.clone(), g.clone())).collect();
    let part = match args.part {
        Some(PartArg::Tune) => ", tune part",
        Some(PartArg::Test) => ", test part",
        None => "",
    };
    println!("recall over {} queries ({mode}{part})", pairs.len());
    println!("{:>4}  {:>10}  {:>13}", "k", "whole gold", "mean per-item");
    for row in recall(&pairs, &RECALL_AT) {
        println!("{:>4}  {:>10.3}  {:>13.3}", row.k, row.whole, row.per_item);
    }
    let n = runs.len().max(1) as f64;
    for (&(threshold, share), (whole, size, tokens)) in rules.iter().zip(&selected_stats) {
        let lift = lift_of(share);
        println!(
            "selected (τ {threshold}{lift}, at most {max_tools}{budget}): whole gold set in {:.3}, \
             {:.1} tools ({:.0} tokens) on average",
            *whole as f64 / n,
            *size as f64 / n,
            *tokens as f64 / n
        );
    }
    if args.show_misses {
        for (q, ranked, gold) in &runs {
            let top = &ranked[..5.min(ranked.len())];
            let missing: Vec<&String> = gold.iter().filter(|g| !top.contains(g)).collect();
            if !missing.is_empty() {
                let missing: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
                println!(
                    "miss@5 {} {:?}: wanted {}; top {}",
                    q.id,
                    q.query,
                    missing.join(", "),
                    top.join(", ")
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--parts`: the tools once, then each query's score parts over every tool (four decimals).
fn print_parts(
    selector: &Selector,
    queries: &[QueryLine],
    vectors: &[Option<Vec<f32>>],
    out: &mut impl std::io::Write,
) -> anyhow::Result<ExitCode> {
    let round = |v: &[f32]| -> Vec<f32> { v.iter().map(|x| (x * 1e4).round() / 1e4).collect() };
    let mut kind = serde_json::Value::Null;
    for (i, (q, vector)) in queries.iter().zip(vectors).enumerate() {
        let parts = selector.score_parts(&q.query, vector.as_deref());
        if i == 0 {
            if parts.similarity.is_some() {
                kind = if parts.from_model { "model" } else { "distilled" }.into();
            }
            writeln!(
                out,
                "{}",
                serde_json::json!({ "tools": selector.names(), "similarity": kind })
            )?;
        }
        let line = serde_json::json!({
            "id": q.id,
            "words": round(&parts.words),
            "similarity": parts.similarity.as_deref().map(round),
            "damped": parts.damped,
        });
        writeln!(out, "{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Each query's vector from the selector's query model, all embedded up front in batches;
/// `None`s when the selector embeds queries itself or not at all.
fn query_vectors(
    selector: &Selector,
    queries: &[String],
    whole: bool,
) -> anyhow::Result<Vec<Option<Vec<f32>>>> {
    let Some(model) = selector.query_embedder().filter(|_| selector.needs_query_vectors()) else {
        return Ok(vec![None; queries.len()]);
    };
    let vectors = crate::runtime()?
        .block_on(model.embed_all(queries, whole))
        .map_err(|e| anyhow::anyhow!("cannot embed the queries with {}: {e}", model.model_id()))?;
    Ok(vectors.into_iter().map(Some).collect())
}

fn read_tools(path: &Path) -> anyhow::Result<Vec<CatalogTool>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --tools {}", path.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "--tools {} is not JSON; expected an MCP tools/list result or OpenAI function \
             definitions",
            path.display()
        )
    })?;
    let specs = quiver_runtime::sources::parse_tools(&json)
        .map_err(|e| anyhow::anyhow!("--tools {} {e}", path.display()))?;
    Ok(specs.into_iter().map(|spec| CatalogTool { name: spec.name.clone(), spec }).collect())
}

fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<Vec<T>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("cannot read {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let item = serde_json::from_str(&line).with_context(|| {
            format!("{} line {}: not the expected JSON object", path.display(), i + 1)
        })?;
        out.push(item);
    }
    Ok(out)
}
