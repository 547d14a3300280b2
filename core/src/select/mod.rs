//! Tool selection: which of a registry's tools a query needs, scored in [0, 1], and the set to show
//! a model this turn.
//!
//! A model shown every tool of five services pays tens of thousands of tokens before it reads the
//! question, and picks worse as the list grows. [`SelectIndex`] ranks the registry for a query the
//! way a developer would phrase it ("why is the MR pipeline red", "move the ticket to done"):
//!
//! - **Lexical**: BM25 over each tool's name, group, description, parameter names and parameter
//!   descriptions (fields weighted by what they say about a tool), on words split inside
//!   identifiers (`list_pull_requests`, `getIssue`, `github.get_issue`) and stemmed — see
//!   [`tokens`]. Each word also stands for its concepts from the built-in embedder's alias table
//!   (`ticket` and `bug` for `issue`, `note` for `comment`, `pipeline` for `ci`…), at half weight,
//!   so a synonym still matches when no embedding can be used; `pull request`/`merge request` in
//!   a tool's text also read as `pr`/`mr`, and a few request verbs meet the verbs tool names use
//!   ("file a bug" → create, "look up" → get, "move to Done" → transition).
//! - **Embeddings**: the cosine between the query and each tool's `tool` vector of the
//!   `embeddings` artifact. The query is embedded with the built-in [`LexicalEmbedder`], so this
//!   works only when the artifact came from it (same dimension); vectors of another model (an
//!   HTTP endpoint) cannot be matched by an offline query embedding, and the index falls back to
//!   lexical scores alone ([`EmbeddingStatus::Unusable`]).
//! - **Fusion**: a weighted sum of the two normalised scores ([`Fusion::Weighted`], the default,
//!   best on quiver's evaluation set) or reciprocal-rank fusion ([`Fusion::ReciprocalRank`]).
//! - **Recent calls** lift their follow-ups (by link probability) and the other tools of their
//!   bundle a little, so the next step of a task ranks higher.
//!
//! [`SelectIndex::select`] turns a ranking into the tools to show: the CORE tools always, then
//! every tool scoring at least the threshold τ, then the rest of the bundles of the strongest hits
//! (a task that needs one pull-request tool usually needs its siblings), capped at `max_tools`.
//!
//! Everything a query needs is computed at construction — the inverted index, IDF, document
//! lengths, the embedding matrix stored by dimension so a query's few non-zero dimensions are
//! summed over contiguous columns — so a query over 2000 tools takes tens of microseconds.
//!
//! ```
//! use quiver_core::select::{SelectIndex, SelectOptions};
//! use quiver_core::ToolSpec;
//!
//! let spec = |name: &str, group: &str, description: &str| ToolSpec {
//!     name: name.into(),
//!     group: Some(group.into()),
//!     description: description.into(),
//!     input_schema: serde_json::json!({"type": "object"}),
//!     output_schema: None,
//!     sensitive_params: vec![],
//! };
//! let tools = [
//!     ("gitlab.list_merge_requests".to_owned(), spec("list_merge_requests", "merge_requests", "List a project's merge requests")),
//!     ("gitlab.list_pipelines".to_owned(), spec("list_pipelines", "pipelines", "List a project's CI pipelines")),
//!     ("jira.get_issue".to_owned(), spec("get_issue", "issues", "Get one issue by key")),
//! ];
//! let index = SelectIndex::new(tools.iter().map(|(n, s)| (n.as_str(), s)), None, SelectOptions::default());
//! let ranked = index.rank("open MRs", &[], 3);
//! assert_eq!(ranked[0].name, "gitlab.list_merge_requests");
//! assert!(ranked.iter().all(|r| (0.0..=1.0).contains(&r.score)));
//! ```

pub mod eval;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::enrich::embed::{concepts_of, terms, EmbeddingsArtifact, LexicalEmbedder};
use crate::enrich::params::inputs;
use crate::ToolSpec;

/// How lexical and embedding scores are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fusion {
    /// `(wl·lexical + we·cosine) / (wl + we)`, both in [0, 1]. Keeps how well a tool matches,
    /// which the threshold needs.
    #[default]
    Weighted,
    /// Reciprocal-rank fusion: `Σ w / (60 + rank)` over the two rankings, scaled so rank 1 in
    /// both is 1. Only ranks count, so a threshold on it says little.
    ReciprocalRank,
}

/// How a [`SelectIndex`] ranks and selects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SelectOptions {
    /// The most tools [`SelectIndex::select`] returns (CORE tools beyond it are still kept).
    pub max_tools: usize,
    /// τ: the fused score a tool needs to be selected on its own merit.
    pub threshold: f32,
    /// Tools always selected: qualified names or globs (`github.get_*`).
    pub core: Vec<String>,
    /// The weight of the lexical (BM25) score.
    pub lexical_weight: f32,
    /// The weight of the embedding similarity (ignored when no usable embeddings were given).
    pub embedding_weight: f32,
    /// How the two are combined.
    pub fusion: Fusion,
}

/// The default `max_tools`.
pub const DEFAULT_MAX_TOOLS: usize = 20;
/// The default τ, tuned on quiver's evaluation set (`tests/data/select/`): gold tools of real
/// queries score above it nearly always, tools of other tasks rarely do.
pub const DEFAULT_THRESHOLD: f32 = 0.2;
/// The default lexical weight.
pub const DEFAULT_LEXICAL_WEIGHT: f32 = 0.6;
/// The default embedding weight.
pub const DEFAULT_EMBEDDING_WEIGHT: f32 = 0.4;

impl Default for SelectOptions {
    fn default() -> Self {
        Self {
            max_tools: DEFAULT_MAX_TOOLS,
            threshold: DEFAULT_THRESHOLD,
            core: Vec::new(),
            lexical_weight: DEFAULT_LEXICAL_WEIGHT,
            embedding_weight: DEFAULT_EMBEDDING_WEIGHT,
            fusion: Fusion::default(),
        }
    }
}

/// One tool of a ranking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranked {
    /// Its qualified name.
    pub name: String,
    /// How well it fits the query, in [0, 1].
    pub score: f32,
}

/// A set of tools loaded together: a provider (`github`) or a provider's group
/// (`github.issues`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bundle {
    /// `github` or `github.issues`.
    pub name: String,
    /// One line saying what is in it.
    pub description: String,
    /// Its tools' qualified names, sorted.
    pub tools: Vec<String>,
}

/// Whether the embeddings given to [`SelectIndex::new`] take part in scoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingStatus {
    /// None were given: lexical scores only.
    Absent,
    /// They come from the built-in embedder and are fused with the lexical scores.
    Used,
    /// They have `dimension` dimensions, not the built-in embedder's, so a query cannot be
    /// embedded offline to meet them: lexical scores only.
    Unusable {
        /// Their dimension.
        dimension: usize,
    },
}

/// The words of `text` as the index sees them: split at punctuation, `_`, `.`, `/`, `-` and
/// camelCase humps, lowercased, stopwords and numbers dropped, stemmed.
///
/// ```
/// use quiver_core::select::tokens;
/// assert_eq!(tokens("gitlab.getMergeRequest"), ["gitlab", "get", "merg", "request"]);
/// assert_eq!(tokens("list_pull_requests"), ["list", "pull", "request"]);
/// ```
pub fn tokens(text: &str) -> Vec<String> {
    terms(text)
}

/// Field weights: how much a word in each field says about a tool.
const PROVIDER_WEIGHT: f32 = 1.5;
const NAME_WEIGHT: f32 = 3.0;
const GROUP_WEIGHT: f32 = 1.0;
const DESCRIPTION_WEIGHT: f32 = 1.0;
const PARAM_NAME_WEIGHT: f32 = 0.5;
const PARAM_DESCRIPTION_WEIGHT: f32 = 0.25;
/// A concept counts half as much as the word that names it, on both sides.
const CONCEPT_WEIGHT: f32 = 0.5;
/// Abbreviations that name two words, which the word-level alias table cannot expand: a tool
/// text saying `merge request` gets the term `mr`, and a query saying `MRs` gets `mr` and, at
/// half weight, the two words.
/// Words are stems, as [`tokens`] makes them (`merge` → `merg`).
const PHRASES: &[(&str, &[&str])] = &[("pr", &["pull", "request"]), ("mr", &["merg", "request"])];
/// What people ask for, in the verbs tool names use: "file a bug" creates, "look up PROJ-1"
/// gets, "move it to Done" transitions. Keys and values are stems (as [`tokens`] makes them);
/// values count at [`CONCEPT_WEIGHT`].
const INTENTS: &[(&str, &[&str])] = &[
    ("file", &["creat"]),
    ("raise", &["creat"]),
    ("report", &["creat"]),
    ("leave", &["add", "creat"]),
    ("write", &["add", "creat"]),
    ("post", &["add", "creat"]),
    ("reply", &["add", "comment"]),
    ("look", &["get"]),
    ("show", &["get"]),
    ("read", &["get", "list"]),
    ("view", &["get"]),
    ("fetch", &["get"]),
    ("detail", &["get"]),
    ("summariz", &["get"]),
    ("rerun", &["retry"]),
    ("restart", &["retry"]),
    ("move", &["transition"]),
    ("close", &["transition", "updat"]),
    ("resolv", &["transition"]),
    ("assign", &["updat"]),
    ("renam", &["updat"]),
    ("edit", &["updat"]),
    ("chang", &["updat"]),
    ("set", &["updat"]),
    ("mark", &["updat", "link"]),
    ("find", &["search"]),
    ("lookup", &["get", "search"]),
];
/// A number or key in the query (`42`, `PROJ-7`, `!12`) names one thing: tools that get one
/// item are likelier than those that list many.
const ONE_ITEM_HINT: &str = "get";
/// A plural without a number or key ("my MRs", "open tickets") asks for many: tools that list.
const MANY_ITEMS_HINT: &str = "list";

/// Whether a word of the query, as typed, is a plural noun (`MRs`, `tickets`, `pipelines`).
fn is_plural(word: &str) -> bool {
    let w: String = word.chars().filter(|c| c.is_alphanumeric()).collect::<String>().to_lowercase();
    if w == "prs" || w == "mrs" {
        return true;
    }
    w.len() > 3
        && w.ends_with('s')
        && !["ss", "us", "is", "ys"].iter().any(|end| w.ends_with(end))
        && !STOP_PLURALS.contains(&w.as_str())
}

/// Words ending in `s` that are not plurals of a thing a tool lists.
const STOP_PLURALS: &[&str] = &["does", "was", "has", "its", "this", "status", "always", "yes"];

/// How much a recent call lifts its follow-ups (times the link's probability) and the other
/// tools of its bundle: enough to reorder near-ties, never enough to select an unrelated tool.
const FOLLOW_UP_BOOST: f32 = 0.1;
const SIBLING_BOOST: f32 = 0.03;
/// A bundle comes in whole when one of its tools scores at least this share of the best score.
const EXPANSION_SHARE: f32 = 0.75;
/// Reciprocal-rank fusion's damping constant (the customary 60).
const RRF_K: f32 = 60.0;

/// BM25 over weighted fields.
#[derive(Debug, Clone)]
pub struct Bm25 {
    vocabulary: HashMap<String, u32>,
    /// Per term: (document, weighted term frequency).
    postings: Vec<Vec<(u32, f32)>>,
    idf: Vec<f32>,
    /// Per document: `k1 · (1 - b + b · len / avg_len)`, the part of the denominator that does
    /// not depend on the term.
    norms: Vec<f32>,
}

/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// BM25's length normalisation.
const B: f32 = 0.75;

impl Bm25 {
    /// Indexes `docs`, each a list of (term, weight); a term's frequency in a document is the
    /// sum of its weights there, and a document's length the sum of all.
    pub fn new(docs: &[Vec<(String, f32)>]) -> Self {
        let mut vocabulary: HashMap<String, u32> = HashMap::new();
        let mut postings: Vec<Vec<(u32, f32)>> = Vec::new();
        let mut lengths = Vec::with_capacity(docs.len());
        for (d, doc) in docs.iter().enumerate() {
            let mut tf: BTreeMap<u32, f32> = BTreeMap::new();
            let mut length = 0.0;
            for (term, weight) in doc {
                let next = vocabulary.len() as u32;
                let id = *vocabulary.entry(term.clone()).or_insert(next);
                if id as usize == postings.len() {
                    postings.push(Vec::new());
                }
                *tf.entry(id).or_default() += weight;
                length += weight;
            }
            for (id, f) in tf {
                postings[id as usize].push((d as u32, f));
            }
            lengths.push(length);
        }
        let n = docs.len() as f32;
        // The "plus one" IDF: never negative, so a term in most documents still counts a little.
        let idf = postings
            .iter()
            .map(|p| {
                let df = p.len() as f32;
                ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
            })
            .collect();
        let avg = if lengths.is_empty() {
            1.0
        } else {
            (lengths.iter().sum::<f32>() / n).max(f32::EPSILON)
        };
        let norms = lengths.iter().map(|l| K1 * (1.0 - B + B * l / avg)).collect();
        Self { vocabulary, postings, idf, norms }
    }

    /// Adds each document's score for `query` (terms with weights) to `out`, and returns the
    /// best score any document could reach — every known query term at saturation — which
    /// normalises scores to [0, 1]. Terms no document has are ignored: they cannot tell tools
    /// apart.
    pub fn score(&self, query: &[(String, f32)], out: &mut [f32]) -> f32 {
        let mut ceiling = 0.0;
        for (term, weight) in query {
            let Some(&id) = self.vocabulary.get(term) else { continue };
            let idf = self.idf[id as usize] * weight;
            ceiling += idf * (K1 + 1.0);
            for &(doc, tf) in &self.postings[id as usize] {
                out[doc as usize] += idf * tf * (K1 + 1.0) / (tf + self.norms[doc as usize]);
            }
        }
        ceiling
    }

    /// How many documents it holds.
    pub fn len(&self) -> usize {
        self.norms.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.norms.is_empty()
    }
}

/// Tool vectors stored by dimension (`columns[d · n + tool]`), so a sparse query touches only
/// the columns of its non-zero dimensions, each a contiguous run over every tool.
#[derive(Debug, Clone)]
struct Dense {
    dimension: usize,
    tools: usize,
    columns: Vec<f32>,
}

impl Dense {
    fn scores(&self, query: &[f32], out: &mut [f32]) {
        for (d, &q) in query.iter().enumerate().take(self.dimension) {
            if q == 0.0 {
                continue;
            }
            let column = &self.columns[d * self.tools..(d + 1) * self.tools];
            for (o, &c) in out.iter_mut().zip(column) {
                *o += q * c;
            }
        }
    }
}

/// The precomputed selector over one registry; see the module documentation.
#[derive(Debug, Clone)]
pub struct SelectIndex {
    names: Vec<String>,
    /// Qualified and MCP names (`github.get_issue`, `github_get_issue`) → tool.
    lookup: HashMap<String, u32>,
    /// Per tool: its group bundle (an index into `bundles`), else its provider bundle.
    bundle_of: Vec<Option<u32>>,
    bundles: Vec<Bundle>,
    /// Per bundle: its tools as indexes.
    bundle_tools: Vec<Vec<u32>>,
    bm25: Bm25,
    dense: Option<Dense>,
    status: EmbeddingStatus,
    embedder: LexicalEmbedder,
    follow_ups: Vec<Vec<(u32, f32)>>,
    core: Vec<u32>,
    options: SelectOptions,
}

impl SelectIndex {
    /// Builds the index over `tools` (qualified name, spec). `embeddings` is the `embeddings`
    /// artifact; it is used when its vectors come from the built-in embedder (see
    /// [`SelectIndex::embedding_status`]). A tool the artifact lacks scores 0 on embeddings.
    pub fn new<'a>(
        tools: impl IntoIterator<Item = (&'a str, &'a ToolSpec)>,
        embeddings: Option<&EmbeddingsArtifact>,
        options: SelectOptions,
    ) -> Self {
        let mut tools: Vec<(&str, &ToolSpec)> = tools.into_iter().collect();
        tools.sort_by(|a, b| a.0.cmp(b.0));
        tools.dedup_by(|a, b| a.0 == b.0);
        let names: Vec<String> = tools.iter().map(|(n, _)| (*n).to_owned()).collect();
        let mut lookup = HashMap::new();
        for (i, name) in names.iter().enumerate() {
            lookup.insert(mcp_name(name), i as u32);
        }
        // Qualified names win over an MCP spelling that happens to equal another tool's name.
        for (i, name) in names.iter().enumerate() {
            lookup.insert(name.clone(), i as u32);
        }
        let docs: Vec<Vec<(String, f32)>> =
            tools.iter().map(|(name, spec)| document(name, spec)).collect();
        let bm25 = Bm25::new(&docs);
        let (bundles, bundle_tools, bundle_of) = bundles_of(&tools);

        let embedder = LexicalEmbedder::new();
        let dimension = embeddings.and_then(|e| e.values().map(|v| v.tool.len()).max());
        let (dense, status) = match (embeddings, dimension) {
            (None, _) | (Some(_), None) => (None, EmbeddingStatus::Absent),
            (Some(_), Some(d)) if d != embedder.dimension() => {
                (None, EmbeddingStatus::Unusable { dimension: d })
            }
            (Some(artifact), Some(d)) => {
                let n = names.len();
                let mut columns = vec![0.0f32; d * n];
                for (t, name) in names.iter().enumerate() {
                    let Some(v) = artifact.get(name).map(|e| &e.tool) else { continue };
                    if v.len() != d {
                        continue;
                    }
                    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                    if norm == 0.0 {
                        continue;
                    }
                    for (i, x) in v.iter().enumerate() {
                        columns[i * n + t] = x / norm;
                    }
                }
                (Some(Dense { dimension: d, tools: n, columns }), EmbeddingStatus::Used)
            }
        };
        let core = resolve_core(&options.core, &names);
        let follow_ups = vec![Vec::new(); names.len()];
        Self {
            names,
            lookup,
            bundle_of,
            bundles,
            bundle_tools,
            bm25,
            dense,
            status,
            embedder,
            follow_ups,
            core,
            options,
        }
    }

    /// Adds follow-up links (from tool → (to tool, probability)), by qualified or MCP name, so a
    /// recent call lifts what usually comes next. Links naming unknown tools are skipped.
    pub fn with_follow_ups<'a>(
        mut self,
        links: impl IntoIterator<Item = (&'a str, &'a str, f32)>,
    ) -> Self {
        for (from, to, probability) in links {
            let (Some(&f), Some(&t)) = (self.lookup.get(from), self.lookup.get(to)) else {
                continue;
            };
            if f != t {
                self.follow_ups[f as usize].push((t, probability.clamp(0.0, 1.0)));
            }
        }
        self
    }

    /// Whether embeddings take part in scoring, and why not when they do not.
    pub fn embedding_status(&self) -> EmbeddingStatus {
        self.status
    }

    /// Whether embedding similarity counts in scores: usable embeddings and a positive weight.
    pub fn uses_embeddings(&self) -> bool {
        self.status == EmbeddingStatus::Used && self.options.embedding_weight > 0.0
    }

    /// The options it was built with.
    pub fn options(&self) -> &SelectOptions {
        &self.options
    }

    /// Every tool's qualified name, sorted.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The CORE tools, as resolved against the registry, in the order the options name them.
    pub fn core_tools(&self) -> Vec<String> {
        self.core.iter().map(|&i| self.names[i as usize].clone()).collect()
    }

    /// The best `k` tools for `query`, best first (ties by name); tools that match nothing
    /// (score 0) are left out. `recent` are recent calls, oldest first, by qualified or MCP name.
    pub fn rank(&self, query: &str, recent: &[String], k: usize) -> Vec<Ranked> {
        let scores = self.scores(query, recent);
        top(&scores, k)
            .into_iter()
            .map(|i| Ranked { name: self.names[i].clone(), score: scores[i] })
            .collect()
    }

    /// The tools to show for `query`: CORE, then the tools scoring at least τ best first, then
    /// the rest of the bundles of the strongest hits (score ≥ ¾ of the best), capped at
    /// `max_tools` (CORE tools are kept even beyond it).
    pub fn select(&self, query: &str, recent: &[String]) -> Vec<String> {
        let scores = self.scores(query, recent);
        let cap = self.options.max_tools.max(self.core.len());
        let mut chosen: Vec<usize> = self.core.iter().map(|&i| i as usize).collect();
        let mut taken = vec![false; self.names.len()];
        chosen.iter().for_each(|&i| taken[i] = true);
        // Only the tools at or above τ are sorted: the rest never get in on their own.
        let mut above: Vec<usize> = (0..scores.len())
            .filter(|&i| scores[i] > 0.0 && scores[i] >= self.options.threshold)
            .collect();
        above.sort_unstable_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        for &i in &above {
            if chosen.len() >= cap {
                break;
            }
            if !std::mem::replace(&mut taken[i], true) {
                chosen.push(i);
            }
        }
        let best = above.first().map_or(0.0, |&i| scores[i]);
        for &i in above.iter().take_while(|&&i| scores[i] >= best * EXPANSION_SHARE) {
            let Some(bundle) = self.bundle_of[i] else { continue };
            let mut siblings = self.bundle_tools[bundle as usize].clone();
            siblings.sort_by(|&a, &b| {
                scores[b as usize].total_cmp(&scores[a as usize]).then(a.cmp(&b))
            });
            for s in siblings {
                if chosen.len() >= cap {
                    break;
                }
                if !std::mem::replace(&mut taken[s as usize], true) {
                    chosen.push(s as usize);
                }
            }
        }
        chosen.into_iter().map(|i| self.names[i].clone()).collect()
    }

    /// The bundles: each provider, and each provider's group, with their tools.
    pub fn bundles(&self) -> &[Bundle] {
        &self.bundles
    }

    /// The score of every tool for `query`, in name order.
    pub fn scores(&self, query: &str, recent: &[String]) -> Vec<f32> {
        let n = self.names.len();
        let mut lexical = vec![0.0f32; n];
        let ceiling = self.bm25.score(&query_terms(query), &mut lexical);
        if ceiling > 0.0 {
            lexical.iter_mut().for_each(|s| *s = (*s / ceiling).clamp(0.0, 1.0));
        }
        let mut fused = match &self.dense {
            Some(dense) if self.options.embedding_weight > 0.0 => {
                let mut cosine = vec![0.0f32; n];
                dense.scores(&self.embedder.embed(query), &mut cosine);
                cosine.iter_mut().for_each(|c| *c = c.clamp(0.0, 1.0));
                self.fuse(&lexical, &cosine)
            }
            _ => lexical,
        };
        self.boost_recent(recent, &mut fused);
        fused
    }

    fn fuse(&self, lexical: &[f32], cosine: &[f32]) -> Vec<f32> {
        let wl = self.options.lexical_weight.max(0.0);
        let we = self.options.embedding_weight.max(0.0);
        let total = wl + we;
        if total == 0.0 {
            return vec![0.0; lexical.len()];
        }
        match self.options.fusion {
            Fusion::Weighted => {
                lexical.iter().zip(cosine).map(|(l, c)| (wl * l + we * c) / total).collect()
            }
            Fusion::ReciprocalRank => {
                let mut fused = vec![0.0f32; lexical.len()];
                for (scores, weight) in [(lexical, wl), (cosine, we)] {
                    for (rank, i) in top(scores, scores.len()).into_iter().enumerate() {
                        fused[i] += weight / (RRF_K + 1.0 + rank as f32);
                    }
                }
                let best = total / (RRF_K + 1.0);
                fused.iter_mut().for_each(|s| *s = (*s / best).min(1.0));
                fused
            }
        }
    }

    fn boost_recent(&self, recent: &[String], scores: &mut [f32]) {
        for name in recent {
            let Some(&from) = self.lookup.get(name.as_str()) else { continue };
            for &(to, probability) in &self.follow_ups[from as usize] {
                scores[to as usize] += FOLLOW_UP_BOOST * probability;
            }
            if let Some(bundle) = self.bundle_of[from as usize] {
                for &s in &self.bundle_tools[bundle as usize] {
                    if s != from {
                        scores[s as usize] += SIBLING_BOOST;
                    }
                }
            }
        }
        if !recent.is_empty() {
            scores.iter_mut().for_each(|s| *s = s.min(1.0));
        }
    }
}

/// The indexes of the `k` best positive scores, best first, ties by index (name order).
fn top(scores: &[f32], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..scores.len()).filter(|&i| scores[i] > 0.0).collect();
    let order = |a: &usize, b: &usize| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b));
    if k < idx.len() {
        if k == 0 {
            return Vec::new();
        }
        idx.select_nth_unstable_by(k - 1, order);
        idx.truncate(k);
    }
    idx.sort_unstable_by(order);
    idx
}

/// `github.get_issue` → `github_get_issue`, as MCP clients see it.
fn mcp_name(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(64)
        .collect()
}

/// A tool's weighted terms: provider, name, group, description, parameter names and
/// descriptions, each word with its concepts.
fn document(qualified: &str, spec: &ToolSpec) -> Vec<(String, f32)> {
    let mut doc = Vec::new();
    let (provider, local) = qualified.split_once('.').unwrap_or(("", qualified));
    add_field(&mut doc, provider, PROVIDER_WEIGHT);
    add_field(&mut doc, local, NAME_WEIGHT);
    add_field(&mut doc, spec.group.as_deref().unwrap_or(""), GROUP_WEIGHT);
    add_field(&mut doc, &spec.description, DESCRIPTION_WEIGHT);
    for param in inputs(spec) {
        add_field(&mut doc, &param.name, PARAM_NAME_WEIGHT);
        let description = param.description.lines().next().unwrap_or("");
        add_field(&mut doc, description, PARAM_DESCRIPTION_WEIGHT);
    }
    doc
}

fn add_field(doc: &mut Vec<(String, f32)>, text: &str, weight: f32) {
    let words = terms(text);
    for (i, word) in words.iter().enumerate() {
        for concept in concepts_of(word) {
            doc.push((concept_term(concept), weight * CONCEPT_WEIGHT));
        }
        // `merge request` also reads as `mr`, so the abbreviation meets a term of its own.
        if let Some(next) = words.get(i + 1) {
            for (abbreviation, phrase) in PHRASES {
                if phrase[0] == word && phrase[1] == next {
                    doc.push(((*abbreviation).to_owned(), weight));
                }
            }
        }
        doc.push((word.clone(), weight));
    }
}

fn concept_term(concept: &str) -> String {
    // `~` cannot survive tokenising, so a concept never meets a word of the same spelling.
    format!("~{concept}")
}

/// The query's weighted terms: its words, their concepts at half weight, and the words of
/// two-word abbreviations.
fn query_terms(query: &str) -> Vec<(String, f32)> {
    let mut weighted: BTreeMap<String, f32> = BTreeMap::new();
    let mut add = |term: &str, weight: f32| *weighted.entry(term.to_owned()).or_default() += weight;
    for word in terms(query) {
        for concept in concepts_of(&word) {
            add(&concept_term(concept), CONCEPT_WEIGHT);
        }
        let plain = word.strip_suffix('s').filter(|w| w.len() == 2).unwrap_or(&word);
        if let Some((abbreviation, expansion)) = PHRASES.iter().find(|(abbr, _)| *abbr == plain) {
            add(abbreviation, 1.0);
            expansion.iter().for_each(|w| add(w, CONCEPT_WEIGHT));
        }
        if let Some((_, verbs)) = INTENTS.iter().find(|(intent, _)| *intent == word) {
            verbs.iter().for_each(|v| add(v, CONCEPT_WEIGHT));
        }
        add(&word, 1.0);
    }
    let names_one = query.split_whitespace().any(|w| w.chars().any(|c| c.is_ascii_digit()));
    if names_one {
        add(ONE_ITEM_HINT, CONCEPT_WEIGHT);
    } else if query.split_whitespace().any(is_plural) {
        add(MANY_ITEMS_HINT, CONCEPT_WEIGHT);
    }
    // Repeating a word in a query should not outweigh the other words.
    weighted.into_iter().map(|(t, w)| (t, w.min(1.5))).collect()
}

fn resolve_core(patterns: &[String], names: &[String]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for pattern in patterns {
        let matcher = globset::Glob::new(pattern).ok().map(|g| g.compile_matcher());
        for (i, name) in names.iter().enumerate() {
            let hit = name == pattern
                || mcp_name(name) == *pattern
                || matcher.as_ref().is_some_and(|m| m.is_match(name));
            if hit && !out.contains(&(i as u32)) {
                out.push(i as u32);
            }
        }
    }
    out
}

type BundleParts = (Vec<Bundle>, Vec<Vec<u32>>, Vec<Option<u32>>);

/// Provider bundles and provider.group bundles, sorted by name; each tool's bundle is its group's
/// when it has one, else its provider's.
fn bundles_of(tools: &[(&str, &ToolSpec)]) -> BundleParts {
    let mut members: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut groups_of_provider: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut home: Vec<Option<String>> = Vec::with_capacity(tools.len());
    for (i, (name, spec)) in tools.iter().enumerate() {
        let Some((provider, _)) = name.split_once('.') else {
            home.push(None);
            continue;
        };
        members.entry(provider.to_owned()).or_default().push(i as u32);
        match spec.group.as_deref().filter(|g| !g.is_empty()) {
            Some(group) => {
                let key = format!("{provider}.{group}");
                members.entry(key.clone()).or_default().push(i as u32);
                let groups = groups_of_provider.entry(provider.to_owned()).or_default();
                if !groups.iter().any(|g| g == group) {
                    groups.push(group.to_owned());
                }
                home.push(Some(key));
            }
            None => home.push(Some(provider.to_owned())),
        }
    }
    let keys: Vec<&String> = members.keys().collect();
    let position = |key: &str| keys.iter().position(|k| *k == key).map(|p| p as u32);
    let bundle_of = home.iter().map(|h| h.as_deref().and_then(position)).collect();
    let mut bundles = Vec::with_capacity(members.len());
    let mut bundle_tools = Vec::with_capacity(members.len());
    for (key, ids) in &members {
        let tool_names: Vec<String> = ids.iter().map(|&i| tools[i as usize].0.to_owned()).collect();
        let description = match key.split_once('.') {
            None => {
                let mut groups = groups_of_provider.get(key).cloned().unwrap_or_default();
                groups.sort();
                let what = if groups.is_empty() {
                    String::new()
                } else {
                    format!(": {}", groups.join(", "))
                };
                format!("every {key} tool ({}){what}", tool_names.len())
            }
            Some((provider, group)) => {
                let locals: Vec<&str> = tool_names
                    .iter()
                    .map(|n| n.split_once('.').map_or(n.as_str(), |(_, t)| t))
                    .collect();
                format!(
                    "{provider} {} ({}): {}",
                    group.replace('_', " "),
                    tool_names.len(),
                    locals.join(", ")
                )
            }
        };
        bundles.push(Bundle { name: key.clone(), description, tools: tool_names });
        bundle_tools.push(ids.clone());
    }
    (bundles, bundle_tools, bundle_of)
}
