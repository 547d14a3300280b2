//! The tool selector as a library: rank the catalog for a query, and choose the tools to show a
//! model this turn. It powers `find_tools`, `load_tools` suggestions, `quiver select`, and agent
//! frameworks that call it directly.
//!
//! Scoring lives in [`quiver_core::select`] (pure: BM25 with identifier splitting, fusion with
//! embedding similarity, recent-call boosts, CORE, bundle expansion, threshold, cap); this module
//! adds what touches the host: the catalog, the follow-up links of the effective value models,
//! and the `embeddings` artifact from the enrichment runner (cache first, in memory when the
//! store cannot be opened).
//!
//! Queries are embedded with the built-in offline embedder. When the `embeddings` artifact was
//! produced by an HTTP endpoint, its vectors have another dimension and a query cannot be
//! embedded offline to meet them: the selector then ranks on lexical scores alone and logs that
//! once per process.
//!
//! ```no_run
//! use quiver_runtime::selector::{selector_for_host, SelectorOptions};
//! use quiver_runtime::{Host, HostOptions};
//!
//! let host = Host::open(&HostOptions::default()).expect("config is valid");
//! let selector = selector_for_host(&host, SelectorOptions::default()).expect("catalog");
//! for hit in selector.rank("why did the MR pipeline fail", &[], 5) {
//!     println!("{} {:.2}", hit.name, hit.score);
//! }
//! let shown = selector.select("review the open PR", &[]);
//! assert!(shown.len() <= SelectorOptions::default().max_tools);
//! ```

use std::sync::Once;

use quiver_core::enrich::embed::EmbeddingsArtifact;
use quiver_core::enrich::{EnrichmentKind, ScheduleError, EMBEDDINGS};
use quiver_core::select::{EmbeddingStatus, SelectIndex, SelectOptions};

pub use quiver_core::select::{Bundle, Fusion, Ranked};

use crate::enrich::{CatalogTool, EnrichmentSet, RunOptions};
use crate::Host;

/// How the selector ranks and chooses.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectorOptions {
    /// The most tools [`Selector::select`] returns (default 20); CORE tools are kept beyond it.
    pub max_tools: usize,
    /// τ: the score in [0, 1] a tool needs to be selected on its own merit (default
    /// [`quiver_core::select::DEFAULT_THRESHOLD`], tuned on quiver's evaluation set).
    pub threshold: f32,
    /// Tools always selected: qualified names (`github.get_issue`), MCP names or globs
    /// (`github.get_*`).
    pub core: Vec<String>,
    /// The weight of the lexical (BM25F) score (default 1).
    pub lexical_weight: f32,
    /// The weight of the embedding similarity (default 0: words alone, see
    /// [`quiver_core::select::DEFAULT_EMBEDDING_WEIGHT`]); ignored without usable embeddings.
    pub embedding_weight: f32,
    /// The most tokens the selected tools' listings may cost together; `None`: no limit but
    /// `max_tools`.
    pub max_list_tokens: Option<u64>,
}

impl Default for SelectorOptions {
    fn default() -> Self {
        let core = SelectOptions::default();
        Self {
            max_tools: core.max_tools,
            threshold: core.threshold,
            core: core.core,
            lexical_weight: core.lexical_weight,
            embedding_weight: core.embedding_weight,
            max_list_tokens: core.max_list_tokens,
        }
    }
}

/// The selector over one catalog; everything a query needs is computed when it is built.
#[derive(Debug, Clone)]
pub struct Selector {
    index: SelectIndex,
}

impl Selector {
    /// Builds the index over `tools`. `embeddings` is the `embeddings` artifact: `None` ranks on
    /// lexical scores only (callers that demand fusion check [`Selector::require_embeddings`]
    /// first); vectors of another dimension than the built-in embedder's (an HTTP model) are
    /// left out, logged once.
    pub fn new(
        tools: &[CatalogTool],
        embeddings: Option<&EmbeddingsArtifact>,
        options: SelectorOptions,
    ) -> Self {
        Self::with_fusion(tools, embeddings, options, Fusion::default())
    }

    /// [`Selector::new`] with another way of combining lexical and embedding scores (`quiver
    /// select --fusion` compares them).
    pub fn with_fusion(
        tools: &[CatalogTool],
        embeddings: Option<&EmbeddingsArtifact>,
        options: SelectorOptions,
        fusion: Fusion,
    ) -> Self {
        let options = SelectOptions {
            max_tools: options.max_tools,
            threshold: options.threshold,
            core: options.core,
            lexical_weight: options.lexical_weight,
            embedding_weight: options.embedding_weight,
            fusion,
            max_list_tokens: options.max_list_tokens,
        };
        let index =
            SelectIndex::new(tools.iter().map(|t| (t.name.as_str(), &t.spec)), embeddings, options);
        if let EmbeddingStatus::Unusable { dimension } = index.embedding_status() {
            static WARNED: Once = Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    "the selector ranks on words only: the embeddings have {dimension} \
                     dimensions, from a model a query cannot be embedded with offline; declare \
                     [[enrichments]] type = \"embeddings\" without `lm` to fuse the built-in \
                     embedder's"
                )
            });
        }
        Self { index }
    }

    /// Adds follow-up links (from, to, probability) by qualified or MCP name, so recent calls
    /// lift what usually comes next; [`selector_for_host`] adds the effective value models'.
    pub fn with_follow_ups<'a>(
        self,
        links: impl IntoIterator<Item = (&'a str, &'a str, f32)>,
    ) -> Self {
        Self { index: self.index.with_follow_ups(links) }
    }

    /// Fails with the message naming the enrichment to add when `set` does not produce the
    /// `embeddings` artifact, for callers that demand fusion.
    pub fn require_embeddings(set: &EnrichmentSet) -> Result<(), ScheduleError> {
        set.schedule().require("selector", &[EMBEDDINGS])
    }

    /// Ranks every tool for `query`, best first, at most `k`; scores in [0, 1]. Tools matching
    /// nothing are left out. `recent` calls (qualified or MCP names, oldest first) lift their
    /// follow-ups and bundle siblings slightly.
    pub fn rank(&self, query: &str, recent: &[String], k: usize) -> Vec<Ranked> {
        self.index.rank(query, recent, k)
    }

    /// Of `candidates` (names with scores, best first), those whose listings fit
    /// `max_list_tokens`, keeping the most total score; all of them without a budget.
    pub fn fit_budget(&self, candidates: &[(String, f32)]) -> Vec<String> {
        self.index.fit_budget(candidates)
    }

    /// The tokens the listing of `name` costs a model.
    pub fn listed_tokens(&self, name: &str) -> Option<u64> {
        self.index.listed_tokens(name)
    }

    /// τ: the score a tool needs to be selected on its own merit.
    pub fn threshold(&self) -> f32 {
        self.index.options().threshold
    }

    /// The tools to show this turn: CORE ∪ the best-ranked at or above τ, then the bundles of
    /// the strongest hits, capped at `max_tools`.
    pub fn select(&self, query: &str, recent: &[String]) -> Vec<String> {
        self.index.select(query, recent)
    }

    /// The bundles: each provider (`github`) and provider group (`github.issues`) with their
    /// tools and a one-line description.
    pub fn bundles(&self) -> Vec<Bundle> {
        self.index.bundles().to_vec()
    }

    /// Every tool's qualified name, sorted.
    pub fn names(&self) -> &[String] {
        self.index.names()
    }

    /// Whether embedding similarity takes part in ranking.
    pub fn uses_embeddings(&self) -> bool {
        self.index.uses_embeddings()
    }
}

/// Why [`selector_for_host`] could not build a selector.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    /// Occurs when the `[[enrichments]]` of the config are invalid.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// Occurs when the embeddings pass cannot run (a misconfigured endpoint).
    #[error(transparent)]
    Enrich(#[from] crate::enrich::EnrichError),
}

/// A selector over the host's catalog, with the `embeddings` artifact when the config's
/// enrichments produce one (from the cache when it holds them, computed otherwise; in memory
/// when the store cannot be opened) and follow-up links from the effective value models.
/// Without an `embeddings` enrichment it ranks on lexical scores, with a warning.
///
/// Blocking: the enrichment run happens on a thread of its own with its own async runtime, so
/// this may be called from inside a tokio runtime as well as outside one.
pub fn selector_for_host(host: &Host, options: SelectorOptions) -> Result<Selector, SelectorError> {
    let set = EnrichmentSet::new(&host.config().config.enrichments)?;
    let mut tools = host.catalog();
    let mut embeddings = None;
    if options.embedding_weight <= 0.0 {
        // Words alone (the default): no embeddings to compute.
    } else if let Err(e) = Selector::require_embeddings(&set) {
        tracing::warn!("{e}; the selector ranks on words only");
    } else {
        let options =
            RunOptions { force: false, only: Some(EnrichmentKind::Embeddings), progress: false };
        let enriched = crate::enrich::run_for_host(host, &set, &options)?;
        if let Some(warning) = &enriched.store_warning {
            tracing::debug!("embeddings computed without the cache: {warning}");
        }
        tools = enriched.tools;
        embeddings = enriched.embeddings;
    }
    let links: Vec<(String, String, f32)> = host
        .tools()
        .into_iter()
        .flat_map(|tool| {
            let from = tool.name.to_string();
            let provider = tool.name.provider.clone();
            host.value_model(&tool).model.follow_up.into_iter().map(move |link| {
                let to = if link.tool.contains('.') {
                    link.tool
                } else {
                    format!("{provider}.{}", link.tool)
                };
                (from.clone(), to, link.probability as f32)
            })
        })
        .collect();
    Ok(Selector::new(&tools, embeddings.as_ref(), options)
        .with_follow_ups(links.iter().map(|(f, t, p)| (f.as_str(), t.as_str(), *p))))
}
