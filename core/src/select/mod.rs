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
//! - **Distilled vectors** (the default's second signal): the cosine between the query's and each
//!   tool's sum of word-piece vectors distilled from all-MiniLM-L6-v2 ([`distilled`]), built
//!   into quiver, so a request that shares no word with its tool still finds it; fused with
//!   words at [`SelectOptions::distilled_weight`] times one minus the best lexical score, and
//!   only when no model's similarity is.
//! - **Embeddings**: the cosine between the query and each tool's `tool` vector of the
//!   `embeddings` artifact. When the artifact came from the built-in [`LexicalEmbedder`] (its
//!   dimension), the index embeds the query itself; vectors of another model (a local neural
//!   embedder, an HTTP endpoint: [`EmbeddingStatus::External`]) need the query embedded by that
//!   model, which the caller passes to [`SelectIndex::rank_with`] / [`SelectIndex::select_with`];
//!   without it the ranking is lexical alone.
//! - **Fusion**: each score in its own standard deviations over the catalog, the embedding
//!   never outweighing words ([`Fusion::Standardized`], the default), a weighted sum with fixed
//!   weights ([`Fusion::Weighted`]) or reciprocal-rank fusion ([`Fusion::ReciprocalRank`]).
//! - **Companions**: a strong hit lifts the tools that feed it or follow it (the providers'
//!   follow-up links, dataflow edges into its required inputs — see [`dataflow_companions`]) to
//!   its score times the link's strength, so a request naming one step of a two-step task
//!   ("the failing pipeline's last job log") also finds the step that gets the id it needs.
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

pub mod distilled;
pub mod eval;

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::enrich::dataflow::{DataflowIndex, VERBS};
use crate::enrich::embed::{concepts_of, split_words, stem, EmbeddingsArtifact, LexicalEmbedder};
use crate::enrich::params::inputs;
use crate::ToolSpec;

/// How lexical and embedding scores are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fusion {
    /// Each score counted in its own standard deviations over the catalog (z-score fusion):
    /// `(wl·lexical + w·max(0, cosine − mean)) / (wl + w)` with `w = we · σ(lexical) /
    /// σ(cosine)`, at most `wl`. The mix fits each request — words that single out a few tools
    /// keep the lead, words that touch many tools a little leave it to the model — and the
    /// similarity counts from the catalog's mean, so scores stay comparable across requests
    /// for τ. See [`DEFAULT_MODEL_EMBEDDING_WEIGHT`] for what it gained. With a lexical weight
    /// of 0 it is the weighted sum: the similarity alone.
    #[default]
    Standardized,
    /// `(wl·lexical + we·cosine) / (wl + we)`, both in [0, 1], the weights fixed.
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
    /// τ: the fused score the best tool for a request needs for anything to be selected on its
    /// own merit (and, with a [`SelectOptions::lift_share`] of 0, what every tool needs).
    pub threshold: f32,
    /// τ for a query that a model's similarity was to be fused into but that has no vector from
    /// the model (an HTTP endpoint failed or timed out): it is then ranked on words and the
    /// distilled vectors, whose scores [`SelectOptions::threshold`] was not calibrated for
    /// (default [`DEFAULT_THRESHOLD`]).
    pub threshold_without_model: f32,
    /// Tools always selected: qualified names or globs (`github.get_*`).
    pub core: Vec<String>,
    /// The weight of the lexical (BM25) score.
    pub lexical_weight: f32,
    /// The weight of the embedding similarity (ignored when no usable embeddings were given).
    pub embedding_weight: f32,
    /// How the two are combined.
    pub fusion: Fusion,
    /// The most tokens the selected tools' listings may cost together (CORE tools count but are
    /// always kept); `None`: only `max_tools` limits.
    pub max_list_tokens: Option<u64>,
    /// How much a query's similarity to a tool's name counts beside its similarity to the whole
    /// tool (1), when a model embedded the names (default [`DEFAULT_NAME_SHARE`]: not at all).
    pub name_share: f32,
    /// The weight of the similarity of the built-in distilled vectors ([`distilled`]) beside
    /// the lexical weight, when no model's similarity is fused (default
    /// [`DEFAULT_DISTILLED_WEIGHT`]; 0: words alone).
    pub distilled_weight: f32,
    /// How far above the catalog's mean score for a request a tool must stand to be selected,
    /// as a share of how far the best tool stands (default [`DEFAULT_LIFT_SHARE`]); 0: every
    /// tool scoring at least τ, the rule before the share.
    pub lift_share: f32,
    /// How far a model's similarity for a tool, fused with words, is raised toward the best of
    /// its action family ([`action_families`]); default [`DEFAULT_FAMILY_SHARE`], 0: each
    /// tool's own similarity.
    pub family_share: f32,
}

/// The default [`SelectOptions::lift_share`] for the default ranker (words and the distilled
/// vectors): a tool is selected when its score stands at least half as far
/// above the catalog's mean score for the request as the best tool's does (once the best clears
/// τ). A fixed τ did not carry from one catalog to another: calibrated on MetaTool, where it
/// selected about 4 tools, it selected 11 to 14 on catalogs of real MCP servers whose long
/// descriptions share many words with any request. Chosen on the tune parts of MetaTool and of
/// `tests/data/arcade/` (ids ending in a multiple of 4) as the largest share at which the
/// selected set holds the whole gold set at least as often as the top 5 do on both: MetaTool
/// .735/.714/.697 at 0.45/0.5/0.55 (top 5 .712; 6.3/5.2/4.4 tools), Arcade .919 at each (top 5
/// .878; 7.4/6.1/5.3 tools). The README's table gives it on every set.
pub const DEFAULT_LIFT_SHARE: f32 = 0.5;

/// The default [`SelectOptions::lift_share`] when a neural model's similarity is fused, chosen
/// as [`DEFAULT_LIFT_SHARE`] was with all-MiniLM-L6-v2: MetaTool's tune part .783/.763/.745 at
/// 0.45/0.5/0.55 (top 5 .780; 4.7/4.0/3.4 tools), Arcade's .919/.919/.892 (top 5 .865).
pub const DEFAULT_MODEL_LIFT_SHARE: f32 = 0.45;

/// The default [`SelectOptions::lift_share`] for words alone (`distilled_weight = 0`), chosen
/// as [`DEFAULT_LIFT_SHARE`] was: MetaTool's tune part .658/.642/.627/.608 at
/// 0.35/0.4/0.45/0.5 (top 5 .640; 7.0/5.8/4.9/4.1 tools), Arcade's .919/.905/.905/.905 (.838).
pub const DEFAULT_WORDS_LIFT_SHARE: f32 = 0.4;

/// The default lift share for a mix, as [`default_threshold`] gives τ:
/// [`DEFAULT_MODEL_LIFT_SHARE`] when a neural model's similarity is fused (`model_fused`), else
/// [`DEFAULT_LIFT_SHARE`] with the distilled vectors (`distilled_weight` above 0) and
/// [`DEFAULT_WORDS_LIFT_SHARE`] without them.
pub fn default_lift_share(model_fused: bool, distilled_weight: f32) -> f32 {
    if model_fused {
        DEFAULT_MODEL_LIFT_SHARE
    } else if distilled_weight > 0.0 {
        DEFAULT_LIFT_SHARE
    } else {
        DEFAULT_WORDS_LIFT_SHARE
    }
}

/// The default `max_tools`.
pub const DEFAULT_MAX_TOOLS: usize = 20;
/// The default τ, for the default ranker (words fused with the distilled vectors at
/// [`DEFAULT_DISTILLED_WEIGHT`]), calibrated on MetaTool's tune part: the highest τ at which the
/// selected set holds a query's whole gold set at least as often as the top 3 do — at 0.17,
/// .679 against .657, with 4.0 tools on average (0.18: .646 with 3.3 tools). Nonsense ("zzzz
/// qqqq", "lorem ipsum dolor") scores at most about 0.14 and selects nothing.
pub const DEFAULT_THRESHOLD: f32 = 0.17;
/// τ for BM25F alone (`distilled_weight = 0`), calibrated the same way: at 0.1 the selected set
/// holds the whole gold set about as often as the top 3 do (.53 against .58) with 3.2 tools on
/// average. A query none of whose words any tool has scores 0 and selects nothing.
pub const DEFAULT_WORDS_THRESHOLD: f32 = 0.1;
/// The default lexical weight.
pub const DEFAULT_LEXICAL_WEIGHT: f32 = 1.0;
/// The default embedding weight: 0, words alone. Fused with the built-in embedder (0.6 / 0.4),
/// the ranking was worse on data quiver did not write — MetaTool's test part, all@5 .637
/// against .650 on words alone, and about .02 on a larger held-back set — so the built-in
/// embedder takes part only when asked (`[selector] embedding_weight`).
pub const DEFAULT_EMBEDDING_WEIGHT: f32 = 0.0;

/// The default embedding weight beside a lexical weight of 1 when a neural sentence embedder
/// (a local model or an HTTP endpoint) embeds tools and queries, in [`Fusion::Standardized`]'s
/// terms: one standard deviation of the model's similarity counts as three of the words'
/// scores, up to the words' own weight. Tuned with all-MiniLM-L6-v2 on MetaTool's tune part:
/// all@5 .777/.780/.779/.777 at 2/3/4/6 (a fixed weighted sum, the earlier default: .766 at
/// 0.5, .778 at 1, .775 at 2). Against that fixed sum at 1 it gained on every set, the three
/// public ones never tuned on beyond MetaTool's tune part: MetaTool's test part all@5
/// .789 → .790, BFCL .873 → .879, ToolBench's RapidAPI tasks (`tests/data/toolbench/`, APIs in
/// families of siblings) .505 → .552, and the regression set `tests/data/select/` .88 → .90.
/// The cap at the words' weight is there for requests that name a service: the name lifts all
/// its tools, which spreads the lexical scores and, uncapped, would hand the choice among
/// siblings to the model.
pub const DEFAULT_MODEL_EMBEDDING_WEIGHT: f32 = 3.0;

/// τ when a neural model's similarity is fused at [`DEFAULT_MODEL_EMBEDDING_WEIGHT`] (its
/// similarity counted from the catalog's mean). Calibrated like [`DEFAULT_THRESHOLD`] on
/// MetaTool's tune part: at 0.12 the selected set holds the whole gold set at least as often as
/// the top 3 do (.728 against .725), with 3.7 tools on average (0.13: .702 with 3.1). Nonsense
/// ("zzzz qqqq", "lorem ipsum dolor") scored at most about 0.10 over MetaTool's catalog.
pub const DEFAULT_MODEL_THRESHOLD: f32 = 0.12;

/// The default [`SelectOptions::name_share`]: 0, the whole text's similarity alone. A share of
/// 0.3 (chosen on MetaTool's tune part) lifts all-MiniLM-L6-v2's all@5 on MetaTool's test part
/// from .790 to .797, but lowers it on BFCL's 2 351 questions, which nothing was tuned on
/// (.879 to .871, all@1 .622 to .607), and on quiver's own regression set (.90 to .88): a gain
/// one set shows is not a default. The embeddings pass still embeds the names, so a share can
/// be set (`[selector] name_share`) without embedding anything again.
pub const DEFAULT_NAME_SHARE: f32 = 0.0;

/// The default [`SelectOptions::distilled_weight`] beside a lexical weight of 1: the similarity
/// of the built-in vectors distilled from all-MiniLM-L6-v2 ([`distilled`]), fused with words
/// whenever no model's similarity is, and scaled by `1 − the best lexical score`. On MetaTool's
/// tune part all@5 was .712/.721/.725 at 0.35/0.5/0.75 (words alone .640; before a request's
/// clauses counted), but above 0.35 the regression set of developer tools (`tests/data/select/`,
/// one service's siblings, where words separate tools better than summed piece vectors) loses
/// requests: all@10 .98 at 0.35, .94 at 0.5. The weight stays where the first table's tuning
/// put it.
pub const DEFAULT_DISTILLED_WEIGHT: f32 = 0.35;

/// The default τ for a mix: [`DEFAULT_MODEL_THRESHOLD`] when a neural model's similarity is
/// fused (`model_fused`), else [`DEFAULT_THRESHOLD`] with the distilled vectors
/// (`distilled_weight` above 0) and [`DEFAULT_WORDS_THRESHOLD`] without them.
pub fn default_threshold(model_fused: bool, distilled_weight: f32) -> f32 {
    if model_fused {
        DEFAULT_MODEL_THRESHOLD
    } else if distilled_weight > 0.0 {
        DEFAULT_THRESHOLD
    } else {
        DEFAULT_WORDS_THRESHOLD
    }
}

impl Default for SelectOptions {
    fn default() -> Self {
        Self {
            max_tools: DEFAULT_MAX_TOOLS,
            threshold: DEFAULT_THRESHOLD,
            threshold_without_model: DEFAULT_THRESHOLD,
            core: Vec::new(),
            lexical_weight: DEFAULT_LEXICAL_WEIGHT,
            embedding_weight: DEFAULT_EMBEDDING_WEIGHT,
            fusion: Fusion::default(),
            max_list_tokens: None,
            name_share: DEFAULT_NAME_SHARE,
            distilled_weight: DEFAULT_DISTILLED_WEIGHT,
            lift_share: DEFAULT_LIFT_SHARE,
            family_share: DEFAULT_FAMILY_SHARE,
        }
    }
}

/// A query's scores before [`SelectIndex::scores_with`] combines them, each over every tool in
/// name order ([`SelectIndex::names`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreParts {
    /// BM25F over the tools' fields, divided by the best score a tool could reach: in [0, 1].
    pub words: Vec<f32>,
    /// The similarity fused with the words: a model's (`from_model`) or the built-in distilled
    /// vectors'; `None` when neither takes part.
    pub similarity: Option<Vec<f32>>,
    /// Whether `similarity` is a model's.
    pub from_model: bool,
    /// The tools whose score is damped as writes the request did not ask for.
    pub damped: Vec<usize>,
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
    /// They come from another model, with `dimension` dimensions: fused when the caller passes
    /// the query's vector from that model (`*_with`), lexical scores only otherwise.
    External {
        /// Their dimension.
        dimension: usize,
    },
}

/// The words of `text` as the index sees them: split at punctuation, `_`, `.`, `/`, `-` and
/// camelCase humps, lowercased, stopwords and numbers dropped, stemmed with the Snowball English
/// (Porter2) stemmer.
///
/// ```
/// use quiver_core::select::tokens;
/// assert_eq!(tokens("gitlab.getMergeRequest"), ["gitlab", "get", "merg", "request"]);
/// assert_eq!(tokens("list_pull_requests"), ["list", "pull", "request"]);
/// assert_eq!(tokens("bibliographies"), tokens("bibliography"));
/// ```
pub fn tokens(text: &str) -> Vec<String> {
    words(text).into_iter().map(|w| w.term).collect()
}

/// A word of a text: its index term (Porter2 stem) and the built-in embedder's stem of it, which
/// the alias tables are keyed by.
struct Word {
    term: String,
    alias_key: String,
    /// Typed as a past participle (`updated`, `closed`, `merged`): in a request a filter on
    /// what to read ("issues updated this week", "closed PRs"), not a change to make.
    participle: bool,
}

/// The camelCase words of `text` written as one, as index terms (`MySQL` → `mysql`, `GitHub` →
/// `github`): [`words`] reads them as their humps (`my`, `sql`), which a name spelling the
/// product in one word (`mysql_server_list`) never meets, so "MySQL databases" ranked the SQL
/// Server tools first. Added to a request's terms and to the prose of a tool (description,
/// parameter text), not to identifiers, whose humps are the words (`createIssue`).
fn compounds(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|run| split_words(run).len() > 1)
        .map(|run| porter2(&run.to_lowercase()))
        .filter(|term| !term.is_empty() && !STOPWORDS.contains(&term.as_str()))
        .collect()
}

fn words(text: &str) -> Vec<Word> {
    split_words(text)
        .into_iter()
        .filter(|w| !w.chars().all(|c| c.is_ascii_digit()))
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .filter_map(|w| {
            let term = porter2(&w);
            let alias_key = stem(&w);
            let participle = w.len() > 4 && w.ends_with("ed");
            (!term.is_empty()).then_some(Word { term, alias_key, participle })
        })
        .collect()
}

fn porter2(word: &str) -> String {
    static STEMMER: std::sync::OnceLock<rust_stemmers::Stemmer> = std::sync::OnceLock::new();
    STEMMER
        .get_or_init(|| rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English))
        .stem(word)
        .into_owned()
}

/// Words that say nothing about which tool is meant: English function words, and the request
/// phrasing around what is asked ("can you help me find…", "I want to know…").
const STOPWORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
    "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both",
    "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "e", "each", "eg",
    "else", "etc", "few", "for", "from", "further", "g", "had", "has", "have", "having", "he",
    "her", "here", "hers", "him", "his", "how", "i", "ie", "if", "in", "into", "is", "it", "its",
    "itself", "just", "me", "might", "more", "most", "must", "my", "myself", "no", "nor", "not",
    "now", "of", "off", "on", "once", "onto", "or", "other", "our", "ours", "out", "over", "own",
    "per", "please", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under",
    "until", "up", "upon", "us", "very", "via", "want", "was", "we", "were", "what", "whatever",
    "when", "where", "whether", "which", "while", "who", "whom", "whose", "why", "will", "with",
    "within", "would", "you", "your", "yours", "yourself",
];

/// The fields of a tool's document, with how much a word in each says about the tool (weight)
/// and how much a long field dilutes its words (BM25F's per-field length normalisation `b`).
/// Name and description weights and `b`s were tuned on the MetaTool set's tuning part (ids whose
/// number is a multiple of 4); the parameter fields, which MetaTool's tools lack, keep the
/// proportions quiver's own registry suggested.
#[derive(Debug, Clone, Copy)]
pub struct FieldWeight {
    /// What a word in this field counts, before saturation.
    pub weight: f32,
    /// Length normalisation, 0 (none) to 1 (full).
    pub b: f32,
}

/// Document fields, in the order [`FIELDS`] gives their weights.
const PROVIDER: usize = 0;
const NAME: usize = 1;
const GROUP: usize = 2;
const DESCRIPTION: usize = 3;
const PARAM_NAME: usize = 4;
const PARAM_TEXT: usize = 5;
const FIELDS: [FieldWeight; 6] = [
    FieldWeight { weight: 1.5, b: 0.0 },  // provider
    FieldWeight { weight: 3.0, b: 0.2 },  // tool name
    FieldWeight { weight: 1.0, b: 0.0 },  // group
    FieldWeight { weight: 1.0, b: 0.3 },  // description
    FieldWeight { weight: 0.5, b: 0.5 },  // parameter names
    FieldWeight { weight: 0.25, b: 0.5 }, // parameter descriptions and enum values
];
/// A concept counts half as much as the word that names it, on both sides.
const CONCEPT_WEIGHT: f32 = 0.5;
/// Two neighbouring words (`pull request`, `load time`) as one term: a query that keeps a
/// tool's word order matches it more than one that only shares the words.
const PAIR_WEIGHT: f32 = 0.5;
/// How much a request's best clause counts in a tool's similarity, against the whole query's
/// (see [`clauses`]); tuned on MetaTool's tune part (0.5 against 0 and max-only).
const CLAUSE_SHARE: f32 = 0.5;
/// Abbreviations that name two words, which the word-level alias table cannot expand: a tool
/// text saying `merge request` gets the term `mr`, and a query saying `MRs` gets `mr` and, at
/// half weight, the two words.
/// Words are the built-in embedder's stems (`merge` → `merg`), as the alias tables are keyed;
/// the expansion is added as index terms ([`tokens`]).
const PHRASES: &[(&str, &[&str])] = &[("pr", &["pull", "request"]), ("mr", &["merg", "request"])];
/// What people ask for, in the verbs tool names use: "file a bug" creates, "look up PROJ-1"
/// gets, "move it to Done" transitions. Keys are the built-in embedder's stems; values are
/// words, stemmed as index terms, counting at [`CONCEPT_WEIGHT`].
const INTENTS: &[(&str, &[&str])] = &[
    ("file", &["create"]),
    ("raise", &["create"]),
    ("report", &["create"]),
    ("leave", &["add", "create"]),
    ("write", &["add", "create"]),
    ("post", &["add", "create"]),
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
    ("close", &["transition", "update"]),
    ("resolv", &["transition"]),
    ("assign", &["update"]),
    ("renam", &["update"]),
    ("edit", &["update"]),
    ("chang", &["update"]),
    ("set", &["update"]),
    ("mark", &["update", "link"]),
    ("find", &["search"]),
    ("lookup", &["get", "search"]),
];
/// The leading verbs (as the built-in embedder stems them) of tools that change something. A
/// query that names no change ("what's on issue 17", "the comments of PROJ-5") asks to read, so
/// such tools count [`WRITE_WITHOUT_ASKING`] of their score there; a query with a change word
/// ("close", "file a bug", "merge") leaves them whole.
const WRITE_VERBS: &[&str] = &[
    "add",
    "approv",
    "archiv",
    "assign",
    "cancel",
    "clos",
    "comment",
    "creat",
    "delet",
    "dispatch",
    "edit",
    "link",
    "lock",
    "mark",
    "merg",
    "mov",
    "post",
    "remov",
    "renam",
    "reopen",
    "rerun",
    "resolv",
    "retry",
    "run",
    "send",
    "set",
    "start",
    "stop",
    "submit",
    "transition",
    "trigger",
    "unapprov",
    "unassign",
    "updat",
    "upload",
    "writ",
];
/// What a write-verb tool keeps of its score for a query that names no change.
const WRITE_WITHOUT_ASKING: f32 = 0.8;
/// Write verbs that are as often nouns in a question ("its comments", "the link", "the last
/// run", "the tag"): not taken for a request to change something.
const NOUN_LIKE_VERBS: &[&str] = &["comment", "link", "run", "set", "post", "lock", "trigger"];
/// Query words that ask for a change besides the write verbs themselves.
const CHANGE_WORDS: &[&str] =
    &["file", "raise", "leave", "make", "reply", "restart", "fix", "bump", "put", "chang"];

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
/// The default [`SelectOptions::family_share`]: how far a model's similarity for a tool is
/// raised toward its action family's best ([`SelectIndex::toward_family_best`]). The middle of
/// the shares that gained on the tune parts of MetaTool (whose tools have almost no families)
/// and Arcade and lost nothing there, with all-MiniLM-L6-v2: 0.25 to 0.75 each lift Arcade's
/// all@1 .635 → .649, 1 nothing (the README gives the figures). On the Azure MCP
/// Server's catalogue, no request of which was tuned on, all@1/3/5 went .744/.928/.966 →
/// .757/.937/.977.
pub const DEFAULT_FAMILY_SHARE: f32 = 0.5;

/// What is wrong with `share` as a [`SelectOptions::family_share`] (it must be from 0 to 1),
/// said for a person setting it; `None` when it is usable.
pub fn family_share_problem(share: f32) -> Option<String> {
    (!(0.0..=1.0).contains(&share)).then(|| {
        format!(
            "a share of the way to the family's best, from 0 (each tool's own similarity) to 1 \
             (the family's best); the default is {DEFAULT_FAMILY_SHARE}"
        )
    })
}
/// Words of a tool's name that say what it does to its object, not what the object is, beside
/// the dataflow's [`crate::enrich::dataflow::VERBS`]: both set aside to find its
/// [`action_families`].
const MORE_ACTION_WORDS: &[&str] = &[
    "rename", "import", "export", "retrieve", "start", "stop", "restart", "deploy", "send",
    "upload", "download", "check", "count", "lock", "unlock", "enable", "disable", "assign",
    "unassign", "approve", "merge", "reopen", "archive",
];
/// Reciprocal-rank fusion's damping constant (the customary 60).
const RRF_K: f32 = 60.0;
/// What a tool is worth to the token budget's knapsack: its score to this power. Scores fall
/// off far more slowly than the chance that a tool is the one wanted, so on raw scores the
/// knapsack traded the best hit, when its schema is large, for two or three cheap tools that
/// each scored a little less. Chosen on MetaTool's tune part (selected sets holding the gold
/// tool under 100/150/250 tokens: .459/.517/.558 on raw scores, .478/.530/.560 at 4; 3 to 6 did
/// about as well); on the bundled providers' regression set under 4 000 tokens, .846 → .981.
const BUDGET_SHARPNESS: i32 = 4;

/// BM25F: BM25 over documents made of fields, each with its weight and length normalisation.
/// A term's frequency in a document is the sum over fields of its weighted frequency there,
/// divided by that field's `1 - b + b · len / avg_len`; saturation (`k1`) applies once, to the
/// sum, so a word repeated across fields does not count as often as two different words.
#[derive(Debug, Clone)]
pub struct Bm25 {
    vocabulary: HashMap<String, u32>,
    /// Per term: (document, its length-normalised, weighted term frequency).
    postings: Vec<Vec<(u32, f32)>>,
    idf: Vec<f32>,
}

/// BM25's term-frequency saturation, tuned with the field weights.
const K1: f32 = 1.5;

impl Bm25 {
    /// Indexes `docs`: per document, per field (in the order of `fields`), its (term, weight)
    /// list; a term's frequency in a field is the sum of its weights there, and a field's length
    /// the sum of all.
    pub fn new(docs: &[Vec<Vec<(String, f32)>>], fields: &[FieldWeight]) -> Self {
        let n = docs.len();
        let mut average = vec![0.0f32; fields.len()];
        for doc in docs {
            for (f, field) in doc.iter().enumerate().take(fields.len()) {
                average[f] += field.iter().map(|(_, w)| w).sum::<f32>();
            }
        }
        average.iter_mut().for_each(|a| *a = (*a / n.max(1) as f32).max(f32::EPSILON));
        let mut vocabulary: HashMap<String, u32> = HashMap::new();
        let mut postings: Vec<Vec<(u32, f32)>> = Vec::new();
        for (d, doc) in docs.iter().enumerate() {
            let mut tf: BTreeMap<u32, f32> = BTreeMap::new();
            for (f, field) in doc.iter().enumerate().take(fields.len()) {
                let length: f32 = field.iter().map(|(_, w)| w).sum();
                let FieldWeight { weight, b } = fields[f];
                let norm = 1.0 - b + b * length / average[f];
                for (term, w) in field {
                    let next = vocabulary.len() as u32;
                    let id = *vocabulary.entry(term.clone()).or_insert(next);
                    if id as usize == postings.len() {
                        postings.push(Vec::new());
                    }
                    *tf.entry(id).or_default() += weight * w / norm;
                }
            }
            for (id, f) in tf {
                postings[id as usize].push((d as u32, f));
            }
        }
        let n = n as f32;
        // The "plus one" IDF: never negative, so a term in most documents still counts a little.
        let idf = postings
            .iter()
            .map(|p| {
                let df = p.len() as f32;
                ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
            })
            .collect();
        Self { vocabulary, postings, idf }
    }

    /// Adds each document's score for `query` (terms with weights) to `out`, and returns the
    /// best score any document could reach — every known query term at saturation — which
    /// normalises scores to [0, 1]. Terms no document has are ignored: they cannot tell tools
    /// apart. A query none of whose own words (weight 1) any document has scores nothing.
    pub fn score(&self, query: &[(String, f32)], out: &mut [f32]) -> f32 {
        // What was added to the query's own words — concepts, pairs, hints, all weighing less
        // than 1 — cannot carry it alone: a query none of whose words any tool has ("zzzz",
        // a misspelt name) matches nothing, rather than every tool that lists things.
        if !query.iter().any(|(term, weight)| *weight >= 1.0 && self.vocabulary.contains_key(term))
        {
            return 0.0;
        }
        let mut ceiling = 0.0;
        for (term, weight) in query {
            let Some(&id) = self.vocabulary.get(term) else { continue };
            let idf = self.idf[id as usize] * weight;
            ceiling += idf * (K1 + 1.0);
            for &(doc, tf) in &self.postings[id as usize] {
                out[doc as usize] += idf * tf * (K1 + 1.0) / (tf + K1);
            }
        }
        ceiling
    }

    /// Whether `term` occurs in some document.
    pub fn knows(&self, term: &str) -> bool {
        self.vocabulary.contains_key(term)
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
    /// The unit vectors of `names`' tools (`vector(name)`); a tool without a vector of
    /// `dimension` values, or with a zero one, scores 0.
    fn new<'a>(
        dimension: usize,
        names: &[String],
        vector: impl Fn(&str) -> Option<&'a [f32]>,
    ) -> Self {
        let n = names.len();
        let mut columns = vec![0.0f32; dimension * n];
        for (t, name) in names.iter().enumerate() {
            let Some(v) = vector(name) else { continue };
            if v.len() != dimension {
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
        Self { dimension, tools: n, columns }
    }

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
    /// The tools' name vectors ([`crate::enrich::embed::ToolEmbedding::name`]), when the
    /// artifact has them.
    name_dense: Option<Dense>,
    status: EmbeddingStatus,
    embedder: LexicalEmbedder,
    /// The tools' distilled vectors ([`distilled_text`]), when their weight is above 0.
    distilled: Option<Dense>,
    follow_ups: Vec<Vec<(u32, f32)>>,
    /// Per tool: the tools that feed it or follow it, with the link's strength in (0, 1].
    companions: Vec<Vec<(u32, f32)>>,
    /// Whether any tool has a companion (a registry without schemas or links has none).
    has_companions: bool,
    /// Per tool: whether its name starts with a verb of [`WRITE_VERBS`].
    writes: Vec<bool>,
    /// Per tool: the tokens its listing costs a model ([`listed_tokens`]).
    tokens: Vec<u64>,
    /// Per tool: its action family ([`action_families`]), numbered from 0.
    action_family: Vec<u32>,
    /// How many action families there are (as many as tools when no two share one).
    families: usize,
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
        let shared = shared_parameters(&tools);
        let docs: Vec<Vec<Vec<(String, f32)>>> =
            tools.iter().map(|(name, spec)| document(name, spec, &shared)).collect();
        let bm25 = Bm25::new(&docs, &FIELDS);
        let (bundles, bundle_tools, bundle_of) = bundles_of(&tools);

        let embedder = LexicalEmbedder::new();
        let dimension = embeddings.and_then(|e| e.values().map(|v| v.tool.len()).max());
        let (dense, name_dense, status) = match (embeddings, dimension) {
            (None, _) | (Some(_), None) => (None, None, EmbeddingStatus::Absent),
            (Some(artifact), Some(d)) => {
                let dense = Dense::new(d, &names, |name| artifact.get(name).map(|e| &e.tool[..]));
                let name_dense = artifact
                    .values()
                    .any(|e| e.name.is_some())
                    .then(|| Dense::new(d, &names, |name| artifact.get(name)?.name.as_deref()));
                let status = if d == embedder.dimension() {
                    EmbeddingStatus::Used
                } else {
                    EmbeddingStatus::External { dimension: d }
                };
                (Some(dense), name_dense, status)
            }
        };
        let distilled = (options.distilled_weight > 0.0).then(|| {
            let table = distilled::DistilledVectors::get();
            let vectors: HashMap<&str, Vec<f32>> = tools
                .iter()
                .map(|(name, spec)| (*name, table.embed(&distilled_text(name, spec))))
                .collect();
            Dense::new(distilled::DISTILLED_DIMENSION, &names, |name| {
                vectors.get(name).map(Vec::as_slice)
            })
        });
        let core = resolve_core(&options.core, &names);
        let follow_ups = vec![Vec::new(); names.len()];
        let companions = vec![Vec::new(); names.len()];
        let writes = names.iter().map(|n| is_write_name(n)).collect();
        let tokens = tools.iter().map(|(name, spec)| listed_tokens(name, spec)).collect();
        let (action_family, families) = action_families(&names);
        Self {
            names,
            lookup,
            bundle_of,
            bundles,
            bundle_tools,
            bm25,
            dense,
            name_dense,
            status,
            embedder,
            distilled,
            follow_ups,
            companions,
            has_companions: false,
            writes,
            tokens,
            action_family,
            families,
            core,
            options,
        }
    }

    /// Both ends of a link, by qualified or MCP name; `None` when either is unknown.
    fn link_ends(&self, from: &str, to: &str) -> Option<(u32, u32)> {
        Some((*self.lookup.get(from)?, *self.lookup.get(to)?))
    }

    /// Adds follow-up links (from tool → (to tool, probability)), by qualified or MCP name, so a
    /// recent call lifts what usually comes next. Links naming unknown tools are skipped.
    pub fn with_follow_ups<'a>(
        mut self,
        links: impl IntoIterator<Item = (&'a str, &'a str, f32)>,
    ) -> Self {
        for (from, to, probability) in links {
            let Some((f, t)) = self.link_ends(from, to) else { continue };
            if f != t {
                self.follow_ups[f as usize].push((t, probability.clamp(0.0, 1.0)));
            }
        }
        self
    }

    /// Adds companion links, by qualified or MCP name: `feeder` produces what `fed` takes (a
    /// follow-up link, a dataflow edge into a required input), with a strength in (0, 1]. A
    /// strong hit — at least τ and ¾ of the best score — lifts the tools linked to it, either
    /// way, to at least its score times the link's strength: a request that names one tool of a
    /// two-step task ("the failing pipeline's last job log") also finds the one that gets it the
    /// id it needs. Links naming unknown tools are skipped; a repeated link keeps its strongest.
    pub fn with_companions<'a>(
        mut self,
        links: impl IntoIterator<Item = (&'a str, &'a str, f32)>,
    ) -> Self {
        for (feeder, fed, strength) in links {
            let Some((f, t)) = self.link_ends(feeder, fed) else { continue };
            let strength = strength.clamp(0.0, 1.0);
            if f == t || strength == 0.0 {
                continue;
            }
            self.has_companions = true;
            for (from, to) in [(t, f), (f, t)] {
                let list = &mut self.companions[from as usize];
                match list.iter_mut().find(|(c, _)| *c == to) {
                    Some(entry) => entry.1 = entry.1.max(strength),
                    None => list.push((to, strength)),
                }
            }
        }
        self
    }

    /// The follow-ups of `name` (qualified or MCP) whose link probability is at least
    /// `min_probability`, most probable first (ties by name), as qualified names.
    pub fn follow_ups_of(&self, name: &str, min_probability: f32) -> Vec<(String, f32)> {
        let Some(&from) = self.lookup.get(name) else { return Vec::new() };
        // Two links to one tool (from two output paths) count as the likelier one.
        let mut best: BTreeMap<u32, f32> = BTreeMap::new();
        for &(to, p) in &self.follow_ups[from as usize] {
            let entry = best.entry(to).or_insert(p);
            *entry = entry.max(p);
        }
        let mut next: Vec<(u32, f32)> =
            best.into_iter().filter(|&(_, p)| p >= min_probability).collect();
        next.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        next.into_iter().map(|(t, p)| (self.names[t as usize].clone(), p)).collect()
    }

    /// Marks the embeddings as another model's even when their dimension is the built-in
    /// embedder's: queries are then embedded by the caller (`*_with`), never by the index.
    pub fn external_embeddings(mut self) -> Self {
        if let Some(dense) = &self.dense {
            self.status = EmbeddingStatus::External { dimension: dense.dimension };
        }
        self
    }

    /// The same index with τ = `threshold`.
    pub fn with_threshold(mut self, threshold: f32) -> Self {
        self.options.threshold = threshold;
        self
    }

    /// The same index with [`SelectOptions::lift_share`] = `share`.
    pub fn with_lift_share(mut self, share: f32) -> Self {
        self.options.lift_share = share;
        self
    }

    /// τ for a query with `vector` (see [`SelectIndex::rank_with`]):
    /// [`SelectOptions::threshold_without_model`] when a model's similarity is fused but
    /// `vector` holds none, else [`SelectOptions::threshold`].
    pub fn threshold_for(&self, vector: Option<&[f32]>) -> f32 {
        let has_vector = self.vector_parts(vector).first().is_some_and(|v| unit(v).is_some());
        if self.needs_query_vectors() && !has_vector {
            self.options.threshold_without_model
        } else {
            self.options.threshold
        }
    }

    /// Whether embeddings take part in scoring, and why not when they do not.
    pub fn embedding_status(&self) -> EmbeddingStatus {
        self.status
    }

    /// Whether embedding similarity can count in scores: embeddings and a positive weight (for
    /// [`EmbeddingStatus::External`] ones, only in the `*_with` calls given a query vector).
    pub fn uses_embeddings(&self) -> bool {
        self.status != EmbeddingStatus::Absent && self.options.embedding_weight > 0.0
    }

    /// Whether the caller must embed queries for embeddings to count: they are another model's
    /// and weigh something.
    pub fn needs_query_vectors(&self) -> bool {
        matches!(self.status, EmbeddingStatus::External { .. })
            && self.options.embedding_weight > 0.0
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
        self.rank_with(query, None, recent, k)
    }

    /// [`SelectIndex::rank_with`], and the score a tool of that ranking needs to be selected on
    /// its own merit (see [`SelectIndex::select`]; infinite when the best does not clear τ).
    pub fn rank_and_floor(
        &self,
        query: &str,
        vector: Option<&[f32]>,
        recent: &[String],
        k: usize,
    ) -> (Vec<Ranked>, f32) {
        let scores = self.scores_with(query, vector, recent);
        (self.ranked(&scores, k), self.floor(&scores, self.threshold_for(vector)))
    }

    /// The best `k` of `scores` (every tool's, in name order) as a ranking.
    fn ranked(&self, scores: &[f32], k: usize) -> Vec<Ranked> {
        top(scores, k)
            .into_iter()
            .map(|i| Ranked { name: self.names[i].clone(), score: scores[i] })
            .collect()
    }

    /// The score a tool needs to be selected on its own merit, given every tool's `scores` for
    /// a request: infinite when the best is below `threshold` (τ: the request matches nothing
    /// well enough), else the mean score plus [`SelectOptions::lift_share`] of the best's
    /// distance from it — the set fits how this catalog scores this request, where one τ for
    /// every catalog selected 4 tools on one and 14 on another. A share of 0: `threshold`.
    fn floor(&self, scores: &[f32], threshold: f32) -> f32 {
        let share = self.options.lift_share;
        if share <= 0.0 {
            return threshold;
        }
        let best = scores.iter().copied().fold(0.0f32, f32::max);
        if best <= 0.0 || best < threshold {
            return f32::INFINITY;
        }
        let mean = scores.iter().sum::<f32>() / scores.len().max(1) as f32;
        mean + share.min(1.0) * (best - mean)
    }

    /// [`SelectIndex::rank`] with the query's vector from the model of
    /// [`EmbeddingStatus::External`] embeddings (ignored otherwise; `None`: words only) — or
    /// the vectors of [`query_texts`] concatenated, so a request for two things finds both.
    pub fn rank_with(
        &self,
        query: &str,
        vector: Option<&[f32]>,
        recent: &[String],
        k: usize,
    ) -> Vec<Ranked> {
        self.ranked(&self.scores_with(query, vector, recent), k)
    }

    /// The tools to show for `query`: CORE, then — when the best tool clears τ — the tools
    /// standing at least [`SelectOptions::lift_share`] as far above the catalog's mean score
    /// as the best does, best first, then for a request of several [`clauses`] the best tool
    /// of each clause scored alone (when it clears τ), then the rest of the bundles of the
    /// strongest hits (score ≥ ¾ of the best), capped at `max_tools` (CORE tools are kept even
    /// beyond it).
    pub fn select(&self, query: &str, recent: &[String]) -> Vec<String> {
        self.select_with(query, None, recent)
    }

    /// [`SelectIndex::select`] with the query's vector, as for [`SelectIndex::rank_with`].
    pub fn select_with(
        &self,
        query: &str,
        vector: Option<&[f32]>,
        recent: &[String],
    ) -> Vec<String> {
        let scores = self.scores_with(query, vector, recent);
        let floor = self.floor(&scores, self.threshold_for(vector));
        let cap = self.options.max_tools.max(self.core.len());
        let mut chosen: Vec<usize> = self.core.iter().map(|&i| i as usize).collect();
        let mut taken = vec![false; self.names.len()];
        chosen.iter().for_each(|&i| taken[i] = true);
        // Only the tools at or above the floor are sorted: the rest never get in on their own.
        let mut above: Vec<usize> =
            (0..scores.len()).filter(|&i| scores[i] > 0.0 && scores[i] >= floor).collect();
        above.sort_unstable_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        for &i in &above {
            if chosen.len() >= cap {
                break;
            }
            if !std::mem::replace(&mut taken[i], true) {
                chosen.push(i);
            }
        }
        // A request for two things: each clause's best tool gets in when it clears τ on the
        // clause alone, though the whole request may score it below τ.
        for (i, _) in self.clause_bests(query, vector, recent) {
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
        let core = self.core.len().min(chosen.len());
        let kept = self.within_budget(&chosen[core..], &scores);
        chosen.truncate(core);
        chosen.extend(kept);
        chosen.into_iter().map(|i| self.names[i].clone()).collect()
    }

    /// For a request of two or more [`clauses`], the best tool of each clause scored alone
    /// (with the clause's own vector, when the caller embedded the clauses as
    /// [`query_texts`]), where it clears τ, with that score: the tools [`SelectIndex::select`]
    /// admits though the whole request may score them below τ. Empty for a one-part request,
    /// and when a model's vectors are fused but the clauses were not embedded (a clause scored
    /// on words alone is on another scale than τ).
    pub fn clause_hits(
        &self,
        query: &str,
        vector: Option<&[f32]>,
        recent: &[String],
    ) -> Vec<Ranked> {
        self.clause_bests(query, vector, recent)
            .into_iter()
            .map(|(i, score)| Ranked { name: self.names[i].clone(), score })
            .collect()
    }

    /// [`SelectIndex::clause_hits`] as indexes and scores.
    fn clause_bests(
        &self,
        query: &str,
        vector: Option<&[f32]>,
        recent: &[String],
    ) -> Vec<(usize, f32)> {
        let clauses = clauses(query);
        if clauses.is_empty() {
            return Vec::new();
        }
        let fuses_a_model = matches!(self.status, EmbeddingStatus::External { .. })
            && self.options.embedding_weight > 0.0;
        let parts = self.vector_parts(vector);
        let mut bests = Vec::new();
        for (c, clause) in clauses.iter().enumerate() {
            let clause_vector = parts.get(c + 1).copied();
            if fuses_a_model && clause_vector.is_none() {
                return Vec::new();
            }
            let scores = self.scores_with(clause, clause_vector, recent);
            if let Some(&i) = top(&scores, 1).first() {
                if scores[i] >= self.threshold_for(clause_vector)
                    && bests.iter().all(|&(b, _)| b != i)
                {
                    bests.push((i, scores[i]));
                }
            }
        }
        bests
    }

    /// The tokens the listing of `name` (qualified or MCP) costs a model: its name, description
    /// and schemas as served, by the estimator of the README's figures.
    pub fn listed_tokens(&self, name: &str) -> Option<u64> {
        self.lookup.get(name).map(|&i| self.tokens[i as usize])
    }

    /// Of `candidates` (qualified or MCP names with their scores, best first), those that fit
    /// `max_list_tokens` beside the CORE tools: all of them when they fit, else the subset of
    /// the highest total value within the budget (an exact knapsack, as the planner solves
    /// it, each tool valued at its score to the power [`BUDGET_SHARPNESS`]), in the order
    /// given. Unknown names are kept and cost nothing.
    pub fn fit_budget(&self, candidates: &[(String, f32)]) -> Vec<String> {
        let mut scores = vec![0.0f32; self.names.len()];
        let mut known = Vec::new();
        for (name, score) in candidates {
            if let Some(&i) = self.lookup.get(name.as_str()) {
                scores[i as usize] = *score;
                known.push(i as usize);
            }
        }
        let kept: std::collections::HashSet<usize> =
            self.within_budget(&known, &scores).into_iter().collect();
        candidates
            .iter()
            .filter(|(name, _)| {
                self.lookup.get(name.as_str()).is_none_or(|&i| kept.contains(&(i as usize)))
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// `chosen` (tool indexes, in order) cut to what fits `max_list_tokens` after the CORE
    /// tools, keeping the most total value (score to the power [`BUDGET_SHARPNESS`]).
    fn within_budget(&self, chosen: &[usize], scores: &[f32]) -> Vec<usize> {
        let Some(budget) = self.options.max_list_tokens else { return chosen.to_vec() };
        let core: u64 = self.core.iter().map(|&i| self.tokens[i as usize]).sum();
        let capacity = budget.saturating_sub(core);
        let cost: Vec<u64> = chosen.iter().map(|&i| self.tokens[i].max(1)).collect();
        if cost.iter().sum::<u64>() <= capacity {
            return chosen.to_vec();
        }
        // Each tool fitting alone, valued by its score to the power [`BUDGET_SHARPNESS`] (a
        // tool that clears nothing still counts a little, so ties go to the cheaper listing).
        let fits: Vec<usize> = (0..chosen.len()).filter(|&p| cost[p] <= capacity).collect();
        let value: Vec<f64> = fits
            .iter()
            .map(|&p| f64::from(scores[chosen[p]].max(0.0)).powi(BUDGET_SHARPNESS) + 1e-6)
            .collect();
        let item_cost: Vec<u64> = fits.iter().map(|&p| cost[p]).collect();
        let solution = crate::planner::knapsack::solve(
            &crate::planner::knapsack::Instance {
                value: &value,
                cost: &item_cost,
                parent: &[],
                capacity,
            },
            crate::planner::knapsack::Limits { exact_limit: 512, node_limit: 200_000 },
            |a, b| a.cmp(&b),
        );
        fits.iter()
            .zip(&solution.selected)
            .filter(|(_, &keep)| keep)
            .map(|(&p, _)| chosen[p])
            .collect()
    }

    /// The bundles: each provider, and each provider's group, with their tools.
    pub fn bundles(&self) -> &[Bundle] {
        &self.bundles
    }

    /// The score of every tool for `query`, in name order.
    pub fn scores(&self, query: &str, recent: &[String]) -> Vec<f32> {
        self.scores_with(query, None, recent)
    }

    /// [`SelectIndex::scores`] with the query's vector, as for [`SelectIndex::rank_with`].
    pub fn scores_with(&self, query: &str, vector: Option<&[f32]>, recent: &[String]) -> Vec<f32> {
        // The query is split and stemmed once, for its terms and for the read/write prior.
        let words = words(query);
        let lexical = self.lexical(query, &words);
        let mut fused = match self.model_similarity(query, vector) {
            Some(cosine) => self.fuse(&lexical, &cosine),
            None => self.with_distilled(query, lexical),
        };
        let asks = asks_for_change(&words);
        if !asks {
            for (score, &write) in fused.iter_mut().zip(&self.writes) {
                if write {
                    *score *= WRITE_WITHOUT_ASKING;
                }
            }
        }
        self.lift_companions(asks, self.threshold_for(vector), &mut fused);
        self.boost_recent(recent, &mut fused);
        fused
    }

    /// What [`SelectIndex::scores_with`] combines for `query`, each part over every tool in
    /// name order, for studying how they are combined (`quiver select --parts`).
    pub fn score_parts(&self, query: &str, vector: Option<&[f32]>) -> ScoreParts {
        let words = words(query);
        let lexical = self.lexical(query, &words);
        let (similarity, from_model) = match self.model_similarity(query, vector) {
            Some(cosine) => (Some(cosine), true),
            None => (self.distilled_similarity(query), false),
        };
        let damped = if asks_for_change(&words) {
            Vec::new()
        } else {
            (0..self.names.len()).filter(|&i| self.writes[i]).collect()
        };
        ScoreParts { words: lexical, similarity, from_model, damped }
    }

    /// Each tool's BM25F score for the query (`words` its split), divided by the best a tool
    /// could reach: in [0, 1].
    fn lexical(&self, query: &str, words: &[Word]) -> Vec<f32> {
        let mut lexical = vec![0.0f32; self.names.len()];
        let ceiling = self.bm25.score(&query_terms(query, words), &mut lexical);
        if ceiling > 0.0 {
            lexical.iter_mut().for_each(|s| *s = (*s / ceiling).clamp(0.0, 1.0));
        }
        lexical
    }

    /// Each tool's similarity to the query by the embeddings that are fused (the built-in
    /// embedder's, or a model's from `vector` and its clauses'), mixed with the clauses' as
    /// [`mix_in_clauses`] does; `None` when no embeddings are fused for this query.
    fn model_similarity(&self, query: &str, vector: Option<&[f32]>) -> Option<Vec<f32>> {
        let dense = self.dense.as_ref()?;
        // The query's vector, then its clauses' when the caller embedded them.
        let query_vectors: Vec<Vec<f32>> = match self.status {
            _ if self.options.embedding_weight <= 0.0 => Vec::new(),
            EmbeddingStatus::Used => vec![self.embedder.embed(query)],
            EmbeddingStatus::External { .. } => {
                self.vector_parts(vector).into_iter().map_while(unit).collect()
            }
            EmbeddingStatus::Absent => Vec::new(),
        };
        let (whole, clauses) = query_vectors.split_first()?;
        let cosine_of = |v: &[f32]| self.similarity(dense, v);
        let mut cosine = cosine_of(whole);
        mix_in_clauses(&mut cosine, clauses.iter().map(|clause| cosine_of(clause)));
        Some(cosine)
    }

    /// Raises each tool's similarity [`SelectOptions::family_share`] of the way toward the best of its action
    /// family ([`action_families`]). A sentence model tells what a request is about far better
    /// than what it asks done: on the Azure MCP Server's catalogue all-MiniLM-L6-v2 ranked
    /// `keyvault_key_get` over `keyvault_key_list` for "Enumerate keys in key vault" and
    /// `firewall-rule_create` over `firewall-rule_delete` for "Remove the firewall rule", where
    /// the words had the right one first. Brought closer within a family, the model still
    /// picks the family and the words pick the action.
    fn toward_family_best(&self, similarity: &mut [f32]) {
        let mut best = vec![f32::MIN; self.families];
        for (&family, &s) in self.action_family.iter().zip(similarity.iter()) {
            best[family as usize] = best[family as usize].max(s);
        }
        for (s, &family) in similarity.iter_mut().zip(&self.action_family) {
            *s += self.options.family_share * (best[family as usize] - *s);
        }
    }

    /// Each tool's similarity to the query by the built-in distilled vectors, mixed with its
    /// clauses' as [`mix_in_clauses`] does; `None` when their weight is 0.
    fn distilled_similarity(&self, query: &str) -> Option<Vec<f32>> {
        let dense = self.distilled.as_ref()?;
        let table = distilled::DistilledVectors::get();
        let cosine_of = |text: &str| {
            let mut cosine = vec![0.0f32; dense.tools];
            dense.scores(&table.embed(text), &mut cosine);
            cosine
        };
        let mut cosine = cosine_of(query);
        mix_in_clauses(&mut cosine, clauses(query).iter().map(|clause| cosine_of(clause)));
        cosine.iter_mut().for_each(|c| *c = c.clamp(0.0, 1.0));
        Some(cosine)
    }

    /// Lifts the companions of the strong hits (see [`SelectIndex::with_companions`]); a
    /// companion that writes is damped like any write the query did not ask for. Lifts are read
    /// from the scores before any lift, so they do not chain.
    fn lift_companions(&self, asks_for_change: bool, threshold: f32, scores: &mut [f32]) {
        if !self.has_companions {
            return;
        }
        let mut best = 0.0f32;
        for &score in scores.iter() {
            if score > best {
                best = score;
            }
        }
        if best <= 0.0 {
            return;
        }
        let floor = (best * EXPANSION_SHARE).max(threshold);
        let mut lifts: Vec<(usize, f32)> = Vec::new();
        for (hit, &score) in scores.iter().enumerate() {
            if score < floor {
                continue;
            }
            for &(companion, strength) in &self.companions[hit] {
                let damp = if self.writes[companion as usize] && !asks_for_change {
                    WRITE_WITHOUT_ASKING
                } else {
                    1.0
                };
                lifts.push((companion as usize, score * strength * damp));
            }
        }
        for (companion, lift) in lifts {
            scores[companion] = scores[companion].max(lift);
        }
    }

    /// Each tool's similarity to the query vector `v`, in [0, 1]: the cosine with the whole
    /// tool's vector, mixed with [`SelectOptions::name_share`] of the cosine with its name's
    /// when the tools' names were embedded and the share is above 0.
    fn similarity(&self, dense: &Dense, v: &[f32]) -> Vec<f32> {
        let mut cosine = vec![0.0f32; dense.tools];
        dense.scores(v, &mut cosine);
        cosine.iter_mut().for_each(|c| *c = c.clamp(0.0, 1.0));
        let share = self.options.name_share;
        if let Some(names) = self.name_dense.as_ref().filter(|_| share > 0.0) {
            let mut by_name = vec![0.0f32; names.tools];
            names.scores(v, &mut by_name);
            for (c, b) in cosine.iter_mut().zip(by_name) {
                *c = (*c + share * b.clamp(0.0, 1.0)) / (1.0 + share);
            }
        }
        cosine
    }

    /// The vectors a caller passed for a query, in [`query_texts`]' order (the whole query, then
    /// its clauses): `vector` cut at the external model's dimension. None when its length is not
    /// a positive multiple of the dimension, which is no vector at all (words alone).
    fn vector_parts<'v>(&self, vector: Option<&'v [f32]>) -> Vec<&'v [f32]> {
        match (&self.dense, vector) {
            (Some(dense), Some(v))
                if dense.dimension > 0 && !v.is_empty() && v.len() % dense.dimension == 0 =>
            {
                v.chunks(dense.dimension).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Words fused with the built-in distilled vectors' similarity (a weighted sum, as
    /// [`Fusion::Weighted`]), their weight scaled by `1 − best lexical score`; `lexical` as it
    /// is when their weight is 0. The similarity is, as a model's, half the whole query's and
    /// half its best clause's when the query has [`clauses`].
    fn with_distilled(&self, query: &str, lexical: Vec<f32>) -> Vec<f32> {
        // The more of the request's words the best tool has, the less the vectors count: where
        // words match well they separate a catalog's siblings (twenty merge-request tools) better
        // than a sum of word-piece vectors, whose differences there are mostly noise.
        let best = lexical.iter().copied().fold(0.0f32, f32::max);
        let wl = self.options.lexical_weight.max(0.0);
        let wd = self.options.distilled_weight * (1.0 - best).max(0.0);
        if wd <= 0.0 {
            return lexical;
        }
        let Some(cosine) = self.distilled_similarity(query) else { return lexical };
        lexical.iter().zip(cosine).map(|(l, c)| (wl * l + wd * c) / (wl + wd)).collect()
    }

    fn fuse(&self, lexical: &[f32], cosine: &[f32]) -> Vec<f32> {
        let wl = self.options.lexical_weight.max(0.0);
        let we = self.options.embedding_weight.max(0.0);
        let total = wl + we;
        if total == 0.0 {
            return vec![0.0; lexical.len()];
        }
        // Only beside words: the model alone (a lexical weight of 0) ranks on its own cosine.
        let mut smoothed;
        let share = self.options.family_share;
        let cosine = if wl > 0.0 && share > 0.0 && self.families < self.names.len() {
            smoothed = cosine.to_vec();
            self.toward_family_best(&mut smoothed);
            &smoothed[..]
        } else {
            cosine
        };
        match self.options.fusion {
            Fusion::Standardized if wl > 0.0 => {
                let (mean_cosine, spread_cosine) = mean_and_spread(cosine);
                let (_, spread_words) = mean_and_spread(lexical);
                let we = match (spread_words > 0.0, spread_cosine > 0.0) {
                    (_, false) => 0.0,
                    // No word of the request is in any tool: the similarity alone ranks.
                    (false, true) => wl.min(we),
                    // The model never outweighs words: a request that names a service ("my
                    // gitlab projects") lifts all its tools, which spreads the lexical scores
                    // without telling them apart, and would hand siblings to the model.
                    (true, true) => (we * spread_words / spread_cosine).min(wl),
                };
                lexical
                    .iter()
                    .zip(cosine)
                    .map(|(l, c)| (wl * l + we * (c - mean_cosine).max(0.0)) / (wl + we))
                    .collect()
            }
            Fusion::Standardized | Fusion::Weighted => {
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

/// A request for two things sits between them in a vector space; each clause sits on one. So a
/// tool's similarity becomes half the whole request's (`cosine`) and half the best of its
/// clauses' (floored at 0); unchanged when there are no clauses.
fn mix_in_clauses(cosine: &mut [f32], clause_cosines: impl IntoIterator<Item = Vec<f32>>) {
    let mut best_clause = vec![0.0f32; cosine.len()];
    let mut any = false;
    for clause in clause_cosines {
        any = true;
        for (b, c) in best_clause.iter_mut().zip(clause) {
            *b = b.max(c);
        }
    }
    if any {
        for (c, b) in cosine.iter_mut().zip(&best_clause) {
            *c = (1.0 - CLAUSE_SHARE) * *c + CLAUSE_SHARE * b;
        }
    }
}

/// The mean and the standard deviation of `scores` (a spread of 0 for fewer than two).
fn mean_and_spread(scores: &[f32]) -> (f32, f32) {
    if scores.len() < 2 {
        return (scores.first().copied().unwrap_or(0.0), 0.0);
    }
    let n = scores.len() as f32;
    let mean = scores.iter().sum::<f32>() / n;
    (mean, (scores.iter().map(|s| (s - mean) * (s - mean)).sum::<f32>() / n).sqrt())
}

/// `v` scaled to unit length; `None` for a zero or non-finite vector.
fn unit(v: &[f32]) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    (norm > 0.0 && norm.is_finite()).then(|| v.iter().map(|x| x / norm).collect())
}

/// The text a tool's distilled vector is made from: its name's words, its description, and its
/// input parameters (`path: description`, one a line).
pub fn distilled_text(qualified: &str, spec: &ToolSpec) -> String {
    let inputs = crate::enrich::embed::tool_texts(qualified, spec).inputs;
    format!(
        "{}: {}\n{}",
        crate::enrich::embed::name_text(qualified),
        spec.description.trim(),
        inputs
    )
}

/// Words that join two requests in one query ("the stock price *and* the latest news").
const CLAUSE_JOINERS: &[&str] = &["and", "also", "then", "plus"];

/// The clauses of a request that asks for several things: split at joining words (`and`,
/// `also`, `then`, `plus`, `as well as`) and at the end of a sentence or a `;` inside it;
/// clauses of fewer than two words are dropped. Empty unless there are at least two clauses.
/// A model embeds each clause beside the whole query ([`query_texts`]), and a tool's similarity
/// is half the whole query's and half its best clause's: on MetaTool's two-tool queries this
/// found both tools within the top 5 for .61 instead of .56 (tune part; .53 instead of .48 on
/// the test part), with single-tool queries unchanged. The distilled vectors mix their
/// similarity the same way (both tools in the top 10 of the test part's two-tool queries for
/// .716 instead of .705; every query of the test part all@5 .720 instead of .718).
///
/// ```
/// use quiver_core::select::clauses;
///
/// assert_eq!(
///     clauses("What is Apple's stock price? And find me a hotel in Paris, as well as a flight"),
///     ["What is Apple's stock price", "find me a hotel in Paris", "a flight"]
/// );
/// assert!(clauses("list the open merge requests").is_empty());
/// ```
pub fn clauses(query: &str) -> Vec<String> {
    let words: Vec<&str> = query.split_whitespace().collect();
    let mut out: Vec<String> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut close = |current: &mut Vec<&str>| {
        if current.len() >= 2 {
            out.push(current.join(" "));
        }
        current.clear();
    };
    let mut i = 0;
    while i < words.len() {
        let bare = |w: &str| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
        let word = bare(words[i]);
        if CLAUSE_JOINERS.contains(&word.as_str()) {
            close(&mut current);
            i += 1;
            continue;
        }
        if word == "as"
            && words.get(i + 1).is_some_and(|w| bare(w) == "well")
            && words.get(i + 2).is_some_and(|w| bare(w) == "as")
        {
            close(&mut current);
            i += 3;
            continue;
        }
        let raw = words[i];
        let ends_sentence = raw.ends_with(['.', '?', '!', ';']);
        // A comma before a joining word belongs to neither clause.
        let kept = raw.trim_end_matches([',', '.', '?', '!', ';']);
        if ends_sentence || raw.ends_with(',') {
            if !kept.is_empty() {
                current.push(kept);
            }
        } else {
            current.push(raw);
        }
        if ends_sentence {
            close(&mut current);
        }
        i += 1;
    }
    close(&mut current);
    if out.len() < 2 {
        out.clear();
    }
    out
}

/// The texts a model embeds for `query`: the query, then its [`clauses`]. Their vectors,
/// concatenated in this order, are what [`SelectIndex::rank_with`] takes.
pub fn query_texts(query: &str) -> Vec<String> {
    let mut texts = vec![query.to_owned()];
    texts.extend(clauses(query));
    texts
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

/// A parameter more than this share of a catalogue's tools take says nothing about which tool
/// a request wants (see [`shared_parameters`]).
const SHARED_PARAMETER_SHARE: f32 = 0.5;
/// ...and at least this many: in a catalogue of three tools, two sharing `owner` is no pattern.
const SHARED_PARAMETER_MIN_TAKERS: usize = 4;

/// The parameters most of the catalogue's tools take (the Azure MCP Server's `subscription`,
/// `tenant`, `retry-max-retries` on every tool), left out of the tools' documents. In each
/// document they made their words common to every tool, so BM25's document frequency priced
/// them at nothing even where a tool's name says them: "show me my subscriptions" ranked
/// `subscription_list` below 30 other tools, "my resource groups" `group_list` 24th.
fn shared_parameters(tools: &[(&str, &ToolSpec)]) -> HashSet<String> {
    let takes: Vec<Vec<String>> =
        tools.iter().map(|(_, spec)| inputs(spec).into_iter().map(|p| p.name).collect()).collect();
    let share = SHARED_PARAMETER_SHARE;
    let shared = common_parameters(&takes, tools.len(), share, SHARED_PARAMETER_MIN_TAKERS);
    shared.into_iter().map(str::to_owned).collect()
}

/// The parameter names more than `share` of `population` tools take, and at least
/// `min_takers` of them; `takes` is the names each tool takes.
fn common_parameters(
    takes: &[Vec<String>],
    population: usize,
    share: f32,
    min_takers: usize,
) -> HashSet<&str> {
    let mut takers: HashMap<&str, usize> = HashMap::new();
    for names in takes {
        let names: HashSet<&str> = names.iter().map(String::as_str).collect();
        for name in names {
            *takers.entry(name).or_default() += 1;
        }
    }
    let most = population as f32 * share;
    takers
        .into_iter()
        .filter(|&(_, n)| n >= min_takers && n as f32 > most)
        .map(|(name, _)| name)
        .collect()
}

/// A tool's fields (see [`FIELDS`]): provider, name, group, description, parameter names, and
/// parameter descriptions with the values an enum parameter takes (`state`: `open`, `merged`…);
/// the parameters in `shared` ([`shared_parameters`]) left out.
fn document(qualified: &str, spec: &ToolSpec, shared: &HashSet<String>) -> Vec<Vec<(String, f32)>> {
    let mut fields = vec![Vec::new(); FIELDS.len()];
    let (provider, local) = qualified.split_once('.').unwrap_or(("", qualified));
    add_field(&mut fields[PROVIDER], provider);
    add_field(&mut fields[NAME], local);
    add_field(&mut fields[GROUP], spec.group.as_deref().unwrap_or(""));
    add_prose(&mut fields[DESCRIPTION], &spec.description);
    let properties = spec.input_schema.get("properties").and_then(|p| p.as_object());
    for param in inputs(spec).into_iter().filter(|p| !shared.contains(&p.name)) {
        add_field(&mut fields[PARAM_NAME], &param.name);
        let description = param.description.lines().next().unwrap_or("");
        add_prose(&mut fields[PARAM_TEXT], description);
        if let Some(property) = properties.and_then(|p| p.get(&param.name)) {
            for value in enum_values(property) {
                add_prose(&mut fields[PARAM_TEXT], &value);
            }
        }
    }
    fields
}

/// The string values an enum property takes: `enum`, or `oneOf`/`anyOf` constants, also inside
/// `items` (an array of choices).
fn enum_values(property: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut visit = |schema: &serde_json::Value| {
        if let Some(values) = schema.get("enum").and_then(|e| e.as_array()) {
            out.extend(values.iter().filter_map(|v| v.as_str().map(str::to_owned)));
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(alternatives) = schema.get(key).and_then(|a| a.as_array()) {
                out.extend(
                    alternatives.iter().filter_map(|a| a.get("const")?.as_str().map(str::to_owned)),
                );
            }
        }
    };
    visit(property);
    if let Some(items) = property.get("items") {
        visit(items);
    }
    out
}

fn add_field(field: &mut Vec<(String, f32)>, text: &str) {
    let words = words(text);
    for (i, word) in words.iter().enumerate() {
        for concept in concepts_of(&word.alias_key) {
            field.push((concept_term(concept), CONCEPT_WEIGHT));
        }
        if let Some(next) = words.get(i + 1) {
            // `merge request` also reads as `mr`, so the abbreviation meets a term of its own.
            for (abbreviation, phrase) in PHRASES {
                if phrase[0] == word.alias_key && phrase[1] == next.alias_key {
                    field.push(((*abbreviation).to_owned(), 1.0));
                }
            }
            field.push((pair_term(&word.term, &next.term), PAIR_WEIGHT));
        }
        field.push((word.term.clone(), 1.0));
    }
}

/// [`add_field`] for text written for people, whose camelCase words are names of their own
/// ([`compounds`]).
fn add_prose(field: &mut Vec<(String, f32)>, text: &str) {
    add_field(field, text);
    field.extend(compounds(text).into_iter().map(|term| (term, 1.0)));
}

fn concept_term(concept: &str) -> String {
    // `~` cannot survive tokenising, so a concept never meets a word of the same spelling.
    format!("~{concept}")
}

fn pair_term(a: &str, b: &str) -> String {
    // A space cannot survive tokenising either.
    format!("{a} {b}")
}

/// The query's weighted terms, each counted once however often the query repeats it (a long,
/// wordy request should not outweigh a short one by repetition): its words, their concepts at
/// half weight, the words of two-word abbreviations, the verbs a request's verb stands for, its
/// neighbouring word pairs, and its camelCase words written as one ([`compounds`]).
fn query_terms(query: &str, words: &[Word]) -> Vec<(String, f32)> {
    let mut weighted: BTreeMap<String, f32> = BTreeMap::new();
    let mut add = |term: &str, weight: f32| {
        let entry = weighted.entry(term.to_owned()).or_default();
        *entry = entry.max(weight);
    };
    for (i, word) in words.iter().enumerate() {
        for concept in concepts_of(&word.alias_key) {
            add(&concept_term(concept), CONCEPT_WEIGHT);
        }
        let key = word.alias_key.as_str();
        let plain = key.strip_suffix('s').filter(|w| w.len() == 2).unwrap_or(key);
        if let Some((abbreviation, expansion)) = PHRASES.iter().find(|(abbr, _)| *abbr == plain) {
            add(abbreviation, 1.0);
            expansion.iter().for_each(|w| add(&porter2(w), CONCEPT_WEIGHT));
        }
        if let Some((_, verbs)) = INTENTS.iter().find(|(intent, _)| *intent == key) {
            verbs.iter().for_each(|v| add(&porter2(v), CONCEPT_WEIGHT));
        }
        if let Some(next) = words.get(i + 1) {
            add(&pair_term(&word.term, &next.term), PAIR_WEIGHT);
        }
        add(&word.term, 1.0);
    }
    for compound in compounds(query) {
        add(&compound, 1.0);
    }
    let names_one = query.split_whitespace().any(|w| w.chars().any(|c| c.is_ascii_digit()));
    if names_one {
        add(ONE_ITEM_HINT, CONCEPT_WEIGHT);
    } else if query.split_whitespace().any(is_plural) {
        add(MANY_ITEMS_HINT, CONCEPT_WEIGHT);
    }
    weighted.into_iter().collect()
}

/// What a dataflow edge into a required input counts as a companion link: half its fit, so it
/// weighs about what a provider's follow-up link does (edges kept fit 0.45–1, declared links
/// run 0.25–0.55).
const DATAFLOW_COMPANION: f32 = 0.5;
/// A required input that more than this share of the tools with required inputs take (and at
/// least [`SCOPE_MIN_TAKERS`] of them) is a scope (`project`, `owner`, `repo`), not an item
/// fetched first: the tool that lists projects feeds nearly every tool and says nothing about
/// the request.
const SCOPE_SHARE: f32 = 0.2;
/// In a small registry a fifth is two or three tools, which an id (`job_id`) reaches too.
const SCOPE_MIN_TAKERS: usize = 4;

/// Companion links (feeder, tool, strength) from a `dataflow` index: for each tool and each of
/// its required inputs that is not a scope, the best edge into it, at [`DATAFLOW_COMPANION`] of
/// the edge's fit — for [`SelectIndex::with_companions`].
pub fn dataflow_companions<'a>(
    tools: impl IntoIterator<Item = (&'a str, &'a ToolSpec)>,
    dataflow: &DataflowIndex,
) -> Vec<(String, String, f32)> {
    let (names, required): (Vec<&str>, Vec<Vec<String>>) = tools
        .into_iter()
        .map(|(name, spec)| {
            (name, inputs(spec).into_iter().filter(|p| p.required).map(|p| p.name).collect())
        })
        .unzip();
    let with_required = required.iter().filter(|r| !r.is_empty()).count();
    let scopes = common_parameters(&required, with_required, SCOPE_SHARE, SCOPE_MIN_TAKERS);
    let mut links = Vec::new();
    for (tool, params) in names.iter().zip(&required) {
        let Some(edges) = dataflow.r#in.get(*tool) else { continue };
        for param in params.iter().filter(|p| !scopes.contains(p.as_str())) {
            // Edges come best first: the first into a parameter is its best feeder.
            if let Some(edge) = edges.iter().find(|e| &e.to_param == param) {
                links.push((
                    edge.tool.clone(),
                    (*tool).to_owned(),
                    edge.score * DATAFLOW_COMPANION,
                ));
            }
        }
    }
    links
}

/// The tokens a tool's listing costs a model: its MCP name, description and schemas as served
/// to clients ([`crate::client_schema`]), by the estimator of the README's figures.
pub fn listed_tokens(qualified: &str, spec: &ToolSpec) -> u64 {
    let mut listing = serde_json::json!({
        "name": mcp_name(qualified),
        "description": spec.description,
        "inputSchema": crate::client_schema::input_for_clients(&spec.input_schema),
    });
    if let Some(output) = &spec.output_schema {
        listing["outputSchema"] = crate::client_schema::output_for_clients(output);
    }
    crate::response_projection::estimate_tokens(&listing)
}

/// Each tool's action family, numbered from 0, and how many there are: tools whose qualified
/// names have the same words, stemmed, once the action words (the dataflow's
/// [`crate::enrich::dataflow::VERBS`] and [`MORE_ACTION_WORDS`]) are set aside —
/// `keyvault_secret_get`, `keyvault_secret_list` and `keyvault_secret_create` are one family,
/// `keyvault_key_get` another; `Sheets_GetSpreadsheet` and `Sheets_CreateSpreadsheet` one.
fn action_families(names: &[String]) -> (Vec<u32>, usize) {
    let actions: HashSet<String> = VERBS.iter().chain(MORE_ACTION_WORDS).map(|a| stem(a)).collect();
    let mut numbers: HashMap<Vec<String>, u32> = HashMap::new();
    let family = names
        .iter()
        .map(|name| {
            let topic: Vec<String> = split_words(name)
                .iter()
                .map(|w| stem(w))
                .filter(|w| !actions.contains(w))
                .collect();
            let next = numbers.len() as u32;
            *numbers.entry(topic).or_insert(next)
        })
        .collect();
    (family, numbers.len())
}

/// Whether a tool's local name starts with a verb that changes something (`create_issue`,
/// `mergeMergeRequest`).
fn is_write_name(qualified: &str) -> bool {
    let local = qualified.split_once('.').map_or(qualified, |(_, t)| t);
    split_words(local).first().is_some_and(|w| WRITE_VERBS.contains(&stem(w).as_str()))
}

/// Whether a query (its [`words`]) asks for a change: a write verb or a change word anywhere in
/// it, not typed as a past participle. No stopword is one, so the words [`words`] drops cannot
/// change the answer.
fn asks_for_change(words: &[Word]) -> bool {
    words.iter().filter(|w| !w.participle).any(|w| {
        let key = w.alias_key.as_str();
        (WRITE_VERBS.contains(&key) && !NOUN_LIKE_VERBS.contains(&key))
            || CHANGE_WORDS.contains(&key)
    })
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
