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
//! Queries are embedded by the model that embedded the tools: the built-in offline embedder
//! inside the index; a local model (`[selector.embedder] type = "local"`) or the embeddings
//! enrichment's HTTP endpoint through [`QueryEmbedder`], whose vectors the caller passes to
//! [`Selector::rank_with`] / [`Selector::select_with`] ([`Selector::query_vector`] gets them,
//! cached). An endpoint that fails or does not answer within `[selector] query_timeout_ms` leaves
//! that query to words and the built-in distilled vectors, and [`QueryVector::without_model`]
//! says why, so an answer can say so.
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

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quiver_core::enrich::embed::EmbeddingsArtifact;
use quiver_core::enrich::{EnrichmentKind, ScheduleError, EMBEDDINGS};
use quiver_core::select::{EmbeddingStatus, SelectIndex, SelectOptions};

pub use quiver_core::select::{Bundle, Fusion, Ranked, ScoreParts};

use crate::config::Config;
use crate::embedder::TextEmbedder;
use crate::enrich::lm::LmClient;
use crate::enrich::{CatalogTool, EnrichmentDecl, EnrichmentSet, RunOptions};
use crate::Host;

/// How the selector ranks and chooses.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectorOptions {
    /// The most tools [`Selector::select`] returns (default 20); CORE tools are kept beyond it.
    pub max_tools: usize,
    /// τ: the score in [0, 1] a tool needs to be selected on its own merit (default
    /// [`quiver_core::select::default_threshold`], calibrated on MetaTool's tune part).
    pub threshold: f32,
    /// τ for a query ranked without the model its similarity was to come from (an HTTP endpoint
    /// failed): the configured τ when one is, else the default for words and the distilled
    /// vectors (see [`quiver_core::select::SelectOptions::threshold_without_model`]).
    pub threshold_without_model: f32,
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
    /// How much a query's similarity to a tool's name counts beside the whole tool's (default
    /// 0, see [`quiver_core::select::DEFAULT_NAME_SHARE`]).
    pub name_share: f32,
    /// How much the built-in distilled vectors' similarity counts beside words when no model's
    /// is fused (default [`quiver_core::select::DEFAULT_DISTILLED_WEIGHT`]; 0: words alone).
    pub distilled_weight: f32,
    /// How far above the catalog's mean score a tool must stand to be selected, as a share of
    /// the best tool's distance (default [`quiver_core::select::default_lift_share`]; 0: every
    /// tool at τ or above).
    pub lift_share: f32,
    /// How far a model's similarity for a tool is raised toward its action family's best
    /// (default [`quiver_core::select::DEFAULT_FAMILY_SHARE`]; 0: its own).
    pub family_share: f32,
}

impl Default for SelectorOptions {
    fn default() -> Self {
        let core = SelectOptions::default();
        Self {
            max_tools: core.max_tools,
            threshold: core.threshold,
            threshold_without_model: core.threshold_without_model,
            core: core.core,
            lexical_weight: core.lexical_weight,
            embedding_weight: core.embedding_weight,
            max_list_tokens: core.max_list_tokens,
            name_share: core.name_share,
            distilled_weight: core.distilled_weight,
            lift_share: core.lift_share,
            family_share: core.family_share,
        }
    }
}

impl SelectorOptions {
    /// The options `[selector]` in `config` sets, the embedding weight resolved for the model
    /// that embeds the tools (see [`crate::config::SelectorConfig::embedding_weight`]).
    pub fn from_config(config: &Config) -> Self {
        let selector = &config.selector;
        let model = embeds_with_a_model(config);
        let embedding_weight = selector.effective_embedding_weight(model);
        // τ and the lift share are calibrated per mix: a model's similarity fused or not, the
        // distilled vectors or words alone.
        let model_fused = model && embedding_weight > 0.0;
        let distilled_weight = selector.effective_distilled_weight();
        Self {
            max_tools: selector.max_tools,
            threshold: selector.effective_threshold(model_fused, distilled_weight),
            threshold_without_model: selector.effective_threshold(false, distilled_weight),
            core: selector.core.clone(),
            embedding_weight,
            max_list_tokens: selector.max_list_tokens,
            name_share: selector.name_share.unwrap_or(quiver_core::select::DEFAULT_NAME_SHARE),
            distilled_weight,
            lift_share: selector.effective_lift_share(model_fused, distilled_weight),
            family_share: selector
                .family_share
                .unwrap_or(quiver_core::select::DEFAULT_FAMILY_SHARE),
            ..Self::default()
        }
    }
}

/// Companion links (feeder, tool, strength) from the dataflow edges into the tools' required
/// inputs, for [`Selector::with_companions`]. The dataflow index is computed in memory, so
/// companions work on words alone, without an enrichment run or a store: a fraction of a second
/// for the bundled providers' 158 tools, about 1.8 s for 2000 (`dataflow/full_2000` of core's
/// `enrichments` bench) — a cost paid once, when the selector is built.
pub fn dataflow_companions(tools: &[CatalogTool]) -> Vec<(String, String, f32)> {
    let specs: Vec<(&str, &quiver_core::ToolSpec)> =
        tools.iter().map(|t| (t.name.as_str(), &t.spec)).collect();
    let dataflow = quiver_core::enrich::dataflow::compute(&specs, &Default::default());
    quiver_core::select::dataflow_companions(specs.iter().copied(), &dataflow)
}

/// Whether a neural model embeds the tools (`[selector.embedder]` local, or an `lm` on the
/// embeddings enrichment) rather than the built-in embedder.
pub fn embeds_with_a_model(config: &Config) -> bool {
    !matches!(config.selector.embedder, crate::config::EmbedderConfig::Builtin)
        || config
            .enrichments
            .iter()
            .any(|d| matches!(d, EnrichmentDecl::Embeddings { lm: Some(_), .. }))
}

/// The selector over one catalog; everything a query needs is computed when it is built.
#[derive(Debug, Clone)]
pub struct Selector {
    index: SelectIndex,
    query_embedder: Option<QueryEmbedder>,
}

/// A query's vector from the model of the tool vectors, or why the query is ranked without it
/// (on words and the built-in distilled vectors).
#[derive(Debug, Clone, Default)]
pub struct QueryVector {
    /// The vector; `None` when none is needed or none could be had.
    pub vector: Option<Arc<[f32]>>,
    /// Why a vector was needed and not had (the endpoint failed, timed out…).
    pub without_model: Option<String>,
}

/// Embeds queries with the model that embedded the tools, when that is not the built-in
/// embedder: a local model, or an HTTP endpoint with a short timeout. Vectors are cached by query
/// text; after an endpoint failure, queries go without it for a while instead of each waiting
/// out the timeout.
#[derive(Clone)]
pub struct QueryEmbedder {
    inner: Arc<QueryModel>,
}

struct QueryModel {
    model: QueryModelKind,
    timeout: Duration,
    cache: Mutex<lru::LruCache<String, Arc<[f32]>>>,
    /// When the endpoint last failed, and why.
    failed: Mutex<Option<(Instant, String)>>,
}

enum QueryModelKind {
    Http(LmClient),
    Local(Arc<dyn TextEmbedder>),
}

/// Queries whose vectors are kept.
const QUERY_CACHE: usize = 1024;
/// How long queries skip an endpoint that failed.
const FAILURE_PAUSE: Duration = Duration::from_secs(30);
/// A local model's time limit per query.
const LOCAL_TIMEOUT: Duration = Duration::from_secs(600);
/// Queries embedded per request by [`QueryEmbedder::embed_all`].
const QUERY_BATCH: usize = 64;

impl std::fmt::Debug for QueryEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryEmbedder")
            .field("model", &self.model_id())
            .field("timeout", &self.inner.timeout)
            .finish()
    }
}

impl QueryEmbedder {
    /// Queries through the HTTP endpoint `client`, each waiting at most `timeout`.
    pub fn http(client: LmClient, timeout: Duration) -> Self {
        Self::with(QueryModelKind::Http(client), timeout)
    }

    /// Queries through a model run in process: no timeout worth the name (it cannot hang on a
    /// network), one that no query reaches.
    pub fn local(model: Arc<dyn TextEmbedder>) -> Self {
        Self::with(QueryModelKind::Local(model), LOCAL_TIMEOUT)
    }

    fn with(model: QueryModelKind, timeout: Duration) -> Self {
        let capacity = NonZeroUsize::new(QUERY_CACHE).expect("a positive capacity");
        Self {
            inner: Arc::new(QueryModel {
                model,
                timeout,
                cache: Mutex::new(lru::LruCache::new(capacity)),
                failed: Mutex::new(None),
            }),
        }
    }

    /// The model's identity.
    pub fn model_id(&self) -> String {
        match &self.inner.model {
            QueryModelKind::Http(client) => client.config().model_id(),
            QueryModelKind::Local(model) => model.model_id().to_owned(),
        }
    }

    /// The vector of `query`, from the cache when it was embedded before.
    pub async fn embed(&self, query: &str) -> Result<Arc<[f32]>, String> {
        let inner = &self.inner;
        if let Some(v) = inner.cache.lock().unwrap_or_else(|e| e.into_inner()).get(query) {
            return Ok(Arc::clone(v));
        }
        if let Some((at, why)) = &*inner.failed.lock().unwrap_or_else(|e| e.into_inner()) {
            let ago = at.elapsed();
            if ago < FAILURE_PAUSE {
                return Err(format!(
                    "{why} ({} s ago; tried again after {} s)",
                    ago.as_secs(),
                    FAILURE_PAUSE.as_secs()
                ));
            }
        }
        // The query and its clauses, in one request: the vectors concatenated, as the index
        // takes them.
        let texts = quiver_core::select::query_texts(query);
        let result = match tokio::time::timeout(inner.timeout, self.embed_texts(&texts)).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "the embedding model {} did not answer within {} ms",
                self.model_id(),
                inner.timeout.as_millis()
            )),
        };
        let result = result.and_then(|vectors| concatenate(vectors, texts.len()));
        let vector = match result {
            Ok(v) => Arc::<[f32]>::from(v),
            Err(e) => {
                *inner.failed.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((Instant::now(), e.clone()));
                return Err(e);
            }
        };
        *inner.failed.lock().unwrap_or_else(|e| e.into_inner()) = None;
        inner
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .put(query.to_owned(), Arc::clone(&vector));
        Ok(vector)
    }

    /// The vectors of many queries (each with its clauses', as [`QueryEmbedder::embed`], unless
    /// `whole` asks for the whole query alone), in order, in batches and without the timeout
    /// (evaluation).
    pub async fn embed_all(
        &self,
        queries: &[String],
        whole: bool,
    ) -> Result<Vec<Vec<f32>>, String> {
        let texts: Vec<Vec<String>> = queries
            .iter()
            .map(|q| if whole { vec![q.clone()] } else { quiver_core::select::query_texts(q) })
            .collect();
        let flat: Vec<String> = texts.iter().flatten().cloned().collect();
        let mut vectors = Vec::with_capacity(flat.len());
        for chunk in flat.chunks(QUERY_BATCH) {
            let embedded = self.embed_texts(chunk).await?;
            if embedded.len() != chunk.len() {
                return Err(format!("{} vectors for {} texts", embedded.len(), chunk.len()));
            }
            vectors.extend(embedded);
        }
        let mut vectors = vectors.into_iter();
        texts
            .iter()
            .map(|t| concatenate(vectors.by_ref().take(t.len()).collect(), t.len()))
            .collect()
    }

    async fn embed_texts(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        match &self.inner.model {
            QueryModelKind::Http(client) => client.embed(texts).await.map_err(|e| e.0),
            QueryModelKind::Local(model) => {
                // CPU work: off the async workers.
                let model = Arc::clone(model);
                let texts = texts.to_vec();
                tokio::task::spawn_blocking(move || {
                    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                    model.embed_queries(&refs)
                })
                .await
                .map_err(|e| format!("the local embedder stopped: {e}"))?
            }
        }
    }
}

/// `expected` vectors of one dimension, end to end.
fn concatenate(vectors: Vec<Vec<f32>>, expected: usize) -> Result<Vec<f32>, String> {
    let dimension = vectors.first().map_or(0, Vec::len);
    if vectors.len() != expected || dimension == 0 || vectors.iter().any(|v| v.len() != dimension) {
        return Err(format!(
            "the model answered {} vectors of uneven or zero length for {expected} texts",
            vectors.len()
        ));
    }
    Ok(vectors.concat())
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
            threshold_without_model: options.threshold_without_model,
            core: options.core,
            lexical_weight: options.lexical_weight,
            embedding_weight: options.embedding_weight,
            fusion,
            max_list_tokens: options.max_list_tokens,
            name_share: options.name_share,
            distilled_weight: options.distilled_weight,
            lift_share: options.lift_share,
            family_share: options.family_share,
        };
        let index =
            SelectIndex::new(tools.iter().map(|t| (t.name.as_str(), &t.spec)), embeddings, options);
        Self { index, query_embedder: None }
    }

    /// Embeds queries with `embedder`, the model the tool vectors came from (whatever their
    /// dimension); see [`Selector::query_vector`].
    pub fn with_query_embedder(self, embedder: QueryEmbedder) -> Self {
        Self { index: self.index.external_embeddings(), query_embedder: Some(embedder) }
    }

    /// The same selector with τ = `threshold`.
    pub fn with_threshold(self, threshold: f32) -> Self {
        Self { index: self.index.with_threshold(threshold), ..self }
    }

    /// The same selector with [`SelectorOptions::lift_share`] = `share`.
    pub fn with_lift_share(self, share: f32) -> Self {
        Self { index: self.index.with_lift_share(share), ..self }
    }

    /// The model queries are embedded with, when it is not the built-in embedder.
    pub fn query_embedder(&self) -> Option<&QueryEmbedder> {
        self.query_embedder.as_ref()
    }

    /// The vector of `query` that [`Selector::rank_with`] and [`Selector::select_with`] need:
    /// none when the embeddings are the built-in embedder's (or weigh nothing); else from the
    /// query embedder, or why the query goes without it.
    pub async fn query_vector(&self, query: &str) -> QueryVector {
        if !self.index.needs_query_vectors() {
            return QueryVector::default();
        }
        let Some(embedder) = &self.query_embedder else {
            return QueryVector {
                vector: None,
                without_model: Some("no model to embed the query with".into()),
            };
        };
        match embedder.embed(query).await {
            Ok(vector) => QueryVector { vector: Some(vector), without_model: None },
            Err(e) => {
                tracing::warn!("ranking a query without the embedding model: {e}");
                QueryVector { vector: None, without_model: Some(e) }
            }
        }
    }

    /// [`Selector::rank`] with the query's vector (from [`Selector::query_vector`]).
    pub fn rank_with(
        &self,
        query: &str,
        vector: Option<&[f32]>,
        recent: &[String],
        k: usize,
    ) -> Vec<Ranked> {
        self.index.rank_with(query, vector, recent, k)
    }

    /// [`Selector::rank_with`], and the score a tool of it needs to be selected on its own merit
    /// for this request (see [`quiver_core::select::SelectIndex::rank_and_floor`]).
    pub fn rank_and_floor(
        &self,
        query: &str,
        vector: Option<&[f32]>,
        recent: &[String],
        k: usize,
    ) -> (Vec<Ranked>, f32) {
        self.index.rank_and_floor(query, vector, recent, k)
    }

    /// The best tool of each clause of a several-part request, scored on the clause alone, where
    /// it clears τ: see [`SelectIndex::clause_hits`]. `vector` as for [`Selector::rank_with`].
    pub fn clause_hits(
        &self,
        query: &str,
        vector: Option<&[f32]>,
        recent: &[String],
    ) -> Vec<Ranked> {
        self.index.clause_hits(query, vector, recent)
    }

    /// What the ranking of `query` combines (words, similarity), over every tool in
    /// [`Selector::names`]' order. `vector` as for [`Selector::rank_with`].
    pub fn score_parts(&self, query: &str, vector: Option<&[f32]>) -> ScoreParts {
        self.index.score_parts(query, vector)
    }

    /// [`Selector::select`] with the query's vector (from [`Selector::query_vector`]).
    pub fn select_with(
        &self,
        query: &str,
        vector: Option<&[f32]>,
        recent: &[String],
    ) -> Vec<String> {
        self.index.select_with(query, vector, recent)
    }

    /// Whether queries need vectors from [`Selector::query_vector`] for embeddings to count.
    pub fn needs_query_vectors(&self) -> bool {
        self.index.needs_query_vectors()
    }

    /// Adds follow-up links (from, to, probability) by qualified or MCP name, so recent calls
    /// lift what usually comes next; [`selector_for_host`] adds the effective value models'.
    pub fn with_follow_ups<'a>(
        self,
        links: impl IntoIterator<Item = (&'a str, &'a str, f32)>,
    ) -> Self {
        Self { index: self.index.with_follow_ups(links), ..self }
    }

    /// Adds companion links (feeder, tool, strength) by qualified or MCP name, so a strong hit
    /// lifts the tools that feed or follow it (see
    /// [`quiver_core::select::SelectIndex::with_companions`]); [`selector_for_host`] adds the
    /// follow-up links and the dataflow edges into required inputs.
    pub fn with_companions<'a>(
        self,
        links: impl IntoIterator<Item = (&'a str, &'a str, f32)>,
    ) -> Self {
        Self { index: self.index.with_companions(links), ..self }
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
    /// `max_list_tokens`, keeping the most total value (see
    /// [`SelectIndex::fit_budget`]); all of them without a budget.
    pub fn fit_budget(&self, candidates: &[(String, f32)]) -> Vec<String> {
        self.index.fit_budget(candidates)
    }

    /// The likely next steps after a call of `name`: its follow-up links of at least
    /// `min_probability`, most probable first, as qualified names with their probabilities.
    pub fn follow_ups_of(&self, name: &str, min_probability: f32) -> Vec<(String, f32)> {
        self.index.follow_ups_of(name, min_probability)
    }

    /// The tokens the listing of `name` costs a model.
    pub fn listed_tokens(&self, name: &str) -> Option<u64> {
        self.index.listed_tokens(name)
    }

    /// τ: the score a tool needs to be selected on its own merit.
    pub fn threshold(&self) -> f32 {
        self.index.options().threshold
    }

    /// τ for a query ranked without the model (see [`QueryVector::without_model`]).
    pub fn threshold_without_model(&self) -> f32 {
        self.index.options().threshold_without_model
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
    /// Occurs when the embeddings pass cannot run (a misconfigured endpoint or local model).
    #[error(transparent)]
    Enrich(#[from] crate::enrich::EnrichError),
}

/// A selector over the host's catalog, with the `embeddings` artifact when the config's
/// enrichments produce one and embeddings weigh something (from the cache when it holds them,
/// computed otherwise; in memory when the store cannot be opened), a [`QueryEmbedder`] when they
/// come from a local model or an HTTP endpoint, and follow-up links from the effective value
/// models. Without an `embeddings` enrichment it ranks on lexical scores, with a warning.
///
/// Blocking: the enrichment run happens on a thread of its own with its own async runtime, so
/// this may be called from inside a tokio runtime as well as outside one.
pub fn selector_for_host(host: &Host, options: SelectorOptions) -> Result<Selector, SelectorError> {
    let config = &host.config().config;
    let set = EnrichmentSet::new(&config.enrichments)?;
    let mut tools = host.catalog();
    let mut embeddings = None;
    let mut query_embedder = None;
    if options.embedding_weight <= 0.0 {
        // Words alone (the default with the built-in embedder): no embeddings to compute.
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
        let timeout = Duration::from_millis(config.selector.query_timeout_ms);
        query_embedder = match set.decl(EnrichmentKind::Embeddings) {
            EnrichmentDecl::Embeddings { lm: Some(lm), .. } => {
                let client =
                    LmClient::new(lm).map_err(|e| crate::enrich::EnrichError::Endpoint {
                        kind: EnrichmentKind::Embeddings,
                        message: e.0,
                    })?;
                Some(QueryEmbedder::http(client, timeout))
            }
            _ => crate::enrich::local_embedder(host)
                .map_err(|message| crate::enrich::EnrichError::Endpoint {
                    kind: EnrichmentKind::Embeddings,
                    message,
                })?
                .map(QueryEmbedder::local),
        };
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
    let companions = dataflow_companions(&tools);
    let selector = Selector::new(&tools, embeddings.as_ref(), options)
        .with_follow_ups(links.iter().map(|(f, t, p)| (f.as_str(), t.as_str(), *p)))
        .with_companions(
            links
                .iter()
                .chain(&companions)
                .map(|(feeder, tool, strength)| (feeder.as_str(), tool.as_str(), *strength)),
        );
    Ok(match query_embedder {
        Some(embedder) => selector.with_query_embedder(embedder),
        None => {
            if let EmbeddingStatus::External { dimension } = selector.index.embedding_status() {
                tracing::warn!(
                    "the selector ranks on words only: the embeddings have {dimension} \
                     dimensions, from a model queries cannot be embedded with"
                );
            }
            selector
        }
    })
}
