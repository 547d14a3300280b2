//! Running enrichments over the catalog (plugin tools and static sources), with their artifacts
//! cached in the sled store.
//!
//! The pure parts — which enrichments exist, their order, the offline embedder, dataflow edges,
//! neighbours — live in `quiver_core::enrich`; this module adds what touches the world: the
//! `[[enrichments]]` config, model endpoints, the store, and progress output.
//!
//! Caching follows the reference fingerprints: `output_parameters` = names of the tools lacking an
//! output schema + model id; `embeddings` = each tool's name and texts + model; `dataflow` = names,
//! schema fingerprints (which carry the parameter texts) + model + `max_neighbors`; `neighbors` =
//! the embeddings' fingerprint + `k`. Sampling parameters never enter one. A fingerprint hit reuses
//! the whole artifact; a miss still reuses every per-tool item already computed (delta-merge), and
//! `force` recomputes and overwrites.

pub mod lm;
pub mod runner;
pub mod store;

pub use runner::{run, EnrichError, Enriched, PassReport, RunOptions};

use std::collections::BTreeMap;

use quiver_core::enrich::{EnrichmentKind, Schedule, ScheduleError};
use quiver_core::ToolSpec;
use serde::Deserialize;

use self::lm::LmConfig;

/// One `[[enrichments]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum EnrichmentDecl {
    /// An LLM infers output schemas for tools that lack one.
    OutputParameters {
        /// The chat endpoint.
        lm: LmConfig,
        /// Recompute and overwrite the cache.
        #[serde(default)]
        force: bool,
    },
    /// Tool embeddings: the built-in offline embedder unless `lm` names an embedding endpoint.
    Embeddings {
        /// An embedding endpoint instead of the built-in embedder.
        #[serde(default)]
        lm: Option<LmConfig>,
        /// Recompute and overwrite the cache.
        #[serde(default)]
        force: bool,
    },
    /// Parameter-level output→input edges.
    Dataflow {
        /// Edges kept per tool and direction.
        #[serde(default = "default_max_neighbors")]
        max_neighbors: usize,
        /// Recompute and overwrite the cache.
        #[serde(default)]
        force: bool,
    },
    /// Tool-to-tool output→input compatibility from the embeddings.
    Neighbors {
        /// Neighbours kept per tool.
        #[serde(default = "default_max_neighbors")]
        k: usize,
        /// Recompute and overwrite the cache.
        #[serde(default)]
        force: bool,
    },
}

fn default_max_neighbors() -> usize {
    10
}

impl EnrichmentDecl {
    /// Its kind.
    pub fn kind(&self) -> EnrichmentKind {
        match self {
            EnrichmentDecl::OutputParameters { .. } => EnrichmentKind::OutputParameters,
            EnrichmentDecl::Embeddings { .. } => EnrichmentKind::Embeddings,
            EnrichmentDecl::Dataflow { .. } => EnrichmentKind::Dataflow,
            EnrichmentDecl::Neighbors { .. } => EnrichmentKind::Neighbors,
        }
    }

    /// Whether the entry asks to recompute and overwrite the cache.
    pub fn force(&self) -> bool {
        match self {
            EnrichmentDecl::OutputParameters { force, .. }
            | EnrichmentDecl::Embeddings { force, .. }
            | EnrichmentDecl::Dataflow { force, .. }
            | EnrichmentDecl::Neighbors { force, .. } => *force,
        }
    }

    /// What runs when the config declares nothing: everything that needs no model endpoint.
    pub fn defaults() -> Vec<EnrichmentDecl> {
        vec![
            EnrichmentDecl::Embeddings { lm: None, force: false },
            EnrichmentDecl::Dataflow { max_neighbors: default_max_neighbors(), force: false },
            EnrichmentDecl::Neighbors { k: default_max_neighbors(), force: false },
        ]
    }
}

/// The declared enrichments (or the defaults), validated and ordered.
#[derive(Debug, Clone)]
pub struct EnrichmentSet {
    decls: BTreeMap<EnrichmentKind, EnrichmentDecl>,
    schedule: Schedule,
}

impl EnrichmentSet {
    /// Orders `declared` (the defaults when empty); fails on a cycle, a duplicate or a missing
    /// dependency, naming both ends.
    pub fn new(declared: &[EnrichmentDecl]) -> Result<Self, ScheduleError> {
        let decls =
            if declared.is_empty() { EnrichmentDecl::defaults() } else { declared.to_vec() };
        let kinds: Vec<EnrichmentKind> = decls.iter().map(EnrichmentDecl::kind).collect();
        let schedule = Schedule::build(&kinds)?;
        Ok(Self { decls: decls.into_iter().map(|d| (d.kind(), d)).collect(), schedule })
    }

    /// The run order.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The declaration of a scheduled kind.
    pub fn decl(&self, kind: EnrichmentKind) -> &EnrichmentDecl {
        &self.decls[&kind]
    }
}

/// A tool as enrichments see it: qualified name and definition.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogTool {
    /// `github.get_issue`.
    pub name: String,
    /// Its definition (after `output_parameters`, with an inferred output schema if one was
    /// found).
    pub spec: ToolSpec,
}

/// Runs `set` over the host's catalog with the default store (cache first; in memory, with a
/// warning, when the store cannot be opened). Blocks: the run gets a thread and an async runtime
/// of its own, so callers inside a tokio runtime may use it too.
pub fn run_for_host(
    host: &crate::Host,
    set: &EnrichmentSet,
    options: &RunOptions,
) -> Result<Enriched, EnrichError> {
    let catalog = host.catalog();
    // The model is loaded only when the embeddings pass runs (it reads ~90 MB).
    let embeds = runner::passes_needed(set, options.only).contains(&EnrichmentKind::Embeddings);
    let embedder = if embeds { local_embedder(host) } else { Ok(None) }
        .map_err(|message| EnrichError::Endpoint { kind: EnrichmentKind::Embeddings, message })?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let store = store::ArtifactStore::open(&store::ArtifactStore::default_dir());
                if let Err(e) = &store {
                    tracing::warn!("{e}");
                }
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| EnrichError::Runtime(e.to_string()))?;
                runtime.block_on(run(catalog, set, store.as_ref(), options, embedder.as_ref()))
            })
            .join()
            .unwrap_or_else(|_| Err(EnrichError::Runtime("the enrichment thread panicked".into())))
    })
}

/// The in-process model of `[selector.embedder]`, loaded once per process; `None` for the
/// built-in embedder. Fails with a message naming the model directory and what is wrong.
pub fn local_embedder(
    host: &crate::Host,
) -> Result<Option<std::sync::Arc<dyn crate::embedder::TextEmbedder>>, String> {
    match &host.config().config.selector.embedder {
        crate::config::EmbedderConfig::Builtin => Ok(None),
        crate::config::EmbedderConfig::Local { path } => crate::embedder::local(path).map(Some),
    }
}

/// Output schemas the `output_parameters` enrichment inferred for the host's tools that declare
/// none, by qualified name; empty when it is not declared. Cache first (run `quiver enrich` to
/// warm it); a tool the model could not describe is logged and left out. Blocks, like
/// [`run_for_host`].
pub fn inferred_output_schemas(host: &crate::Host) -> BTreeMap<String, serde_json::Value> {
    let declared = &host.config().config.enrichments;
    if !declared.iter().any(|d| d.kind() == EnrichmentKind::OutputParameters) {
        return BTreeMap::new();
    }
    let set = match EnrichmentSet::new(declared) {
        Ok(set) => set,
        Err(e) => {
            tracing::warn!("{e}");
            return BTreeMap::new();
        }
    };
    let lacking: std::collections::BTreeSet<String> = host
        .catalog()
        .into_iter()
        .filter(|t| t.spec.output_schema.is_none())
        .map(|t| t.name)
        .collect();
    if lacking.is_empty() {
        return BTreeMap::new();
    }
    let options =
        RunOptions { force: false, only: Some(EnrichmentKind::OutputParameters), progress: false };
    match run_for_host(host, &set, &options) {
        Ok(enriched) => enriched
            .tools
            .into_iter()
            .filter(|t| lacking.contains(&t.name))
            .filter_map(|t| Some((t.name, t.spec.output_schema?)))
            .collect(),
        Err(e) => {
            tracing::warn!("output schemas not inferred: {e}");
            BTreeMap::new()
        }
    }
}
