//! `quiver enrich`, `quiver graph` and `quiver sample`: the enrichment passes and the first
//! consumers of their artifacts, on the command line.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::bail;
use quiver_core::enrich::dataflow::DataflowIndex;
use quiver_core::enrich::sample::{self, Strategy};
use quiver_core::enrich::{EnrichmentKind, DATAFLOW};
use quiver_runtime::enrich::store::ArtifactStore;
use quiver_runtime::enrich::{Enriched, EnrichmentSet, RunOptions};
use quiver_runtime::Host;

/// `quiver enrich` arguments.
#[derive(clap::Args)]
pub(crate) struct EnrichArgs {
    /// Recompute and overwrite the cache.
    #[arg(long)]
    force: bool,
    /// Run only this enrichment (output_parameters, embeddings, dataflow, neighbors), with what
    /// it depends on taken from the cache where possible.
    #[arg(long, value_name = "TYPE")]
    only: Option<String>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// Output formats of `quiver graph`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum GraphFormat {
    /// Graphviz.
    Dot,
    /// A Mermaid flowchart (renders in GitHub Markdown).
    Mermaid,
    /// The edges as JSON.
    Json,
}

/// `quiver graph` arguments.
#[derive(clap::Args)]
pub(crate) struct GraphArgs {
    /// Output format.
    #[arg(long, value_enum, default_value = "dot")]
    format: GraphFormat,
    /// Edges shown per tool, best first.
    #[arg(long, default_value_t = 3)]
    top: usize,
    /// Only edges from or to tools whose name contains this.
    #[arg(long, value_name = "TEXT")]
    tool: Option<String>,
}

/// `quiver sample` arguments.
#[derive(clap::Args)]
pub(crate) struct SampleArgs {
    /// random, chain, fan_out, fan_in or dag.
    #[arg(long, value_name = "STRATEGY")]
    strategy: String,
    /// How many scenarios.
    #[arg(long, default_value_t = 5)]
    n: usize,
    /// Seed: the same seed gives the same scenarios.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// As JSON.
    #[arg(long)]
    json: bool,
}

fn enrichment_set(host: &Host) -> anyhow::Result<EnrichmentSet> {
    let set = EnrichmentSet::new(&host.config().config.enrichments)?;
    Ok(set)
}

fn run_enrichments(
    host: &Host,
    set: &EnrichmentSet,
    options: &RunOptions,
) -> anyhow::Result<Enriched> {
    Ok(quiver_runtime::enrich::run_for_host(host, set, options)?)
}

pub(crate) fn enrich(host: &Host, args: EnrichArgs) -> anyhow::Result<ExitCode> {
    let set = enrichment_set(host)?;
    let only = match &args.only {
        None => None,
        Some(name) => {
            let Some(kind) = EnrichmentKind::from_name(name) else {
                return Err(crate::UsageError(format!(
                    "unknown enrichment `{name}`; expected one of {}",
                    EnrichmentKind::ALL.map(|k| k.name()).join(", ")
                ))
                .into());
            };
            if !set.schedule().order().contains(&kind) {
                bail!("enrichment `{name}` is not declared; add [[enrichments]] type = \"{name}\"");
            }
            Some(kind)
        }
    };
    let options = RunOptions { force: args.force, only, progress: !args.json };
    let enriched = run_enrichments(host, &set, &options)?;
    let failed: usize = enriched.reports.iter().map(|r| r.failed.len()).sum();
    if args.json {
        let summary = serde_json::json!({
            "tools": enriched.tools.len(),
            "passes": enriched.reports,
            "store": enriched.store_warning.clone().unwrap_or_else(|| "ok".into()),
        });
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!("{} tools", enriched.tools.len());
        for r in &enriched.reports {
            println!(
                "{:<18} computed {:>5}  reused {:>5}  failed {:>3}  ({} ms)",
                r.kind.name(),
                r.computed,
                r.reused,
                r.failed.len(),
                r.elapsed.as_millis()
            );
            for (tool, reason) in &r.failed {
                println!("  {tool}: {reason}");
            }
        }
        match &enriched.store_warning {
            None => println!("cache: {}", ArtifactStore::default_dir().display()),
            Some(warning) => println!("cache: not used: {warning}"),
        }
    }
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn dataflow(host: &Host, consumer: &str) -> anyhow::Result<DataflowIndex> {
    let set = enrichment_set(host)?;
    set.schedule().require(consumer, &[DATAFLOW])?;
    let options =
        RunOptions { force: false, only: Some(EnrichmentKind::Dataflow), progress: false };
    let enriched = run_enrichments(host, &set, &options)?;
    Ok(enriched.dataflow.expect("dataflow was scheduled"))
}

pub(crate) fn graph(host: &Host, args: GraphArgs) -> anyhow::Result<ExitCode> {
    let index = dataflow(host, "graph export")?;
    let keep = |name: &str| args.tool.as_deref().is_none_or(|t| name.contains(t));
    let edges: Vec<(&str, &quiver_core::enrich::dataflow::DataflowEdge)> = index
        .out
        .iter()
        .flat_map(|(from, edges)| edges.iter().take(args.top).map(move |e| (from.as_str(), e)))
        .filter(|(from, e)| keep(from) || keep(&e.tool))
        .collect();
    let mut out = String::new();
    match args.format {
        GraphFormat::Dot => {
            out.push_str("digraph dataflow {\n  rankdir=LR;\n  node [shape=box];\n");
            for (from, e) in &edges {
                let label = format!("{} → {} ({:.2})", e.from_param, e.to_param, e.score);
                let _ = writeln!(out, "  {from:?} -> {:?} [label={label:?}];", e.tool);
            }
            out.push_str("}\n");
        }
        GraphFormat::Mermaid => {
            out.push_str("flowchart LR\n");
            let mut ids = std::collections::BTreeMap::new();
            let mut id = |name: &str| {
                let next = ids.len();
                let n = *ids.entry(name.to_owned()).or_insert(next);
                format!("n{n}[\"{name}\"]")
            };
            for (from, e) in &edges {
                let label =
                    format!("{} → {} {:.2}", e.from_param, e.to_param, e.score).replace('"', "'");
                let _ = writeln!(out, "  {} -->|\"{label}\"| {}", id(from), id(&e.tool));
            }
        }
        GraphFormat::Json => {
            let list: Vec<serde_json::Value> = edges
                .iter()
                .map(|(from, e)| {
                    serde_json::json!({
                        "from": from, "to": e.tool, "from_param": e.from_param,
                        "to_param": e.to_param, "score": e.score,
                    })
                })
                .collect();
            out = serde_json::to_string_pretty(&serde_json::json!({ "edges": list }))?;
            out.push('\n');
        }
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn sample(host: &Host, args: SampleArgs) -> anyhow::Result<ExitCode> {
    let Some(strategy) = Strategy::from_name(&args.strategy) else {
        return Err(crate::UsageError(format!(
            "unknown strategy `{}`; expected random, chain, fan_out, fan_in or dag",
            args.strategy
        ))
        .into());
    };
    let set = enrichment_set(host)?;
    let consumer = format!("sampler '{}'", strategy.name());
    set.schedule().require(&consumer, strategy.required_artifacts())?;
    let (names, index) = if strategy.required_artifacts().is_empty() {
        (host.catalog().into_iter().map(|t| t.name).collect::<Vec<_>>(), None)
    } else {
        let options =
            RunOptions { force: false, only: Some(EnrichmentKind::Dataflow), progress: false };
        let enriched = run_enrichments(host, &set, &options)?;
        (enriched.tools.into_iter().map(|t| t.name).collect(), enriched.dataflow)
    };
    let scenarios = sample::sample(strategy, &names, index.as_ref(), args.n, args.seed)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&scenarios)?);
        return Ok(ExitCode::SUCCESS);
    }
    if scenarios.is_empty() {
        println!(
            "no scenarios: the dataflow graph has no edges to build `{}` from",
            strategy.name()
        );
    }
    for (i, s) in scenarios.iter().enumerate() {
        println!("#{} {}: {}", i + 1, strategy.name(), s.tools.join(" -> "));
        for f in &s.feeds {
            println!(
                "    step {} {} -> step {} {} ({:.2})",
                f.from_step + 1,
                f.from_param,
                f.to_step + 1,
                f.to_param,
                f.score
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
