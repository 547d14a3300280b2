//! The built-in offline embedder: a lexical model that needs no download and no network, the
//! default backend of the `embeddings` enrichment.
//!
//! Text becomes hashed features in a fixed number of dimensions:
//! - words, split at spaces and punctuation and inside identifiers (`list_pull_requests`,
//!   `getIssue`, `github.get_issue`, `repos/{owner}`), lowercased, stopwords dropped, lightly
//!   stemmed (plurals, `-ing`, `-ed`, a final `e`), so `issues`, `issue` and `Issue` meet;
//! - pairs of neighbouring words (`pull request`), which keep some word order;
//! - character 3- to 5-grams of every word, so near spellings (`pipeline`/`pipelines`,
//!   `transcript`/`transcripts`) and unseen compounds still overlap;
//! - concepts from a small built-in table of developer aliases (`pr` ↔ `pull request`, `mr` ↔
//!   `merge request`, ticket/bug ↔ issue, ci/pipeline/workflow/build/job, repo ↔
//!   repository/project, comment/note/discussion, transcript/meeting/call…), so a query and a
//!   tool that name one thing in two ways still meet.
//!
//! Feature weights grow sublinearly with repetition, words from a fixed table of very common
//! words (`get`, `list`, `page`…) count less, and fields count by what they say about a tool
//! (name > description > parameters). Vectors are L2-normalised, so a dot product is the cosine.
//!
//! An embedding depends only on its own text: there is no corpus statistic (no IDF learnt from the
//! registry), so a cached vector stays exact when other tools come and go, and delta-merging a
//! cache gives the same vectors as recomputing it. [`LEXICAL_MODEL_ID`] changes whenever the
//! algorithm does, which invalidates such caches.
//!
//! ```
//! use quiver_core::enrich::embed::{cosine, LexicalEmbedder};
//!
//! let e = LexicalEmbedder::new();
//! let query = e.embed("open PRs");
//! let pulls = e.embed("github.list_pull_requests: List a repository's pull requests");
//! let meetings = e.embed("fireflies.list_transcripts: List meeting transcripts");
//! assert!(cosine(&query, &pulls) > cosine(&query, &meetings));
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::params::{inputs, outputs, Param};
use crate::ToolSpec;

/// Identifies the algorithm and dimension of [`LexicalEmbedder`]; it enters cache fingerprints and
/// changes whenever the embedder's output would.
pub const LEXICAL_MODEL_ID: &str = "quiver-lexical-v1-1024";

/// The dimension of [`LexicalEmbedder`] vectors.
pub const LEXICAL_DIMENSION: usize = 1024;

/// The `embeddings` artifact: one [`ToolEmbedding`] per qualified tool name.
pub type EmbeddingsArtifact = BTreeMap<String, ToolEmbedding>;

/// The vectors of one tool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ToolEmbedding {
    /// The whole tool: name, description, parameter names and descriptions.
    pub tool: Vec<f32>,
    /// Its input parameters only (names and descriptions).
    pub inputs: Vec<f32>,
    /// Its output parameters only, when the tool has an output schema.
    pub outputs: Option<Vec<f32>>,
    /// Its name alone, words split ([`name_text`]), from models that embed plain text: a name
    /// says in a few words what a tool is for, and a query near it gains a little
    /// ([`crate::select`] mixes it into the similarity). `None` from the built-in embedder,
    /// which weighs the name inside `tool` instead, and in caches written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Vec<f32>>,
}

/// The texts a tool is embedded from, for backends that take plain text (HTTP embedders).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolTexts {
    /// Name, description, then input and output parameter names and descriptions.
    pub tool: String,
    /// The input parameters, one `name: description` per line.
    pub inputs: String,
    /// The output leaves, one `path: description` per line, when there is an output schema.
    pub outputs: Option<String>,
}

/// The texts of a tool, from its qualified name (`github.list_issues`) and its spec.
pub fn tool_texts(qualified: &str, spec: &ToolSpec) -> ToolTexts {
    let ins = inputs(spec);
    let outs = spec.output_schema.as_ref().map(|_| outputs(spec));
    let inputs_text = param_lines(&ins);
    let outputs_text = outs.as_deref().map(param_lines);
    let mut tool = format!("{qualified}: {}", spec.description.trim());
    if !inputs_text.is_empty() {
        tool.push_str("\ninputs:\n");
        tool.push_str(&inputs_text);
    }
    if let Some(text) = outputs_text.as_deref().filter(|t| !t.is_empty()) {
        tool.push_str("\noutputs:\n");
        tool.push_str(text);
    }
    ToolTexts { tool, inputs: inputs_text, outputs: outputs_text }
}

/// The text a tool's name is embedded from: its words, split at punctuation and inside
/// identifiers, lowercased (`github.list_issues` → `github list issues`, `FinanceTool` →
/// `finance tool`), so a model's tokenizer sees words rather than one unknown compound.
pub fn name_text(qualified: &str) -> String {
    split_words(qualified).join(" ")
}

fn param_lines(params: &[Param]) -> String {
    params
        .iter()
        .map(|p| {
            let desc = p.description.trim();
            if desc.is_empty() {
                p.path.clone()
            } else {
                format!("{}: {}", p.path, first_line(desc))
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// The cosine of two vectors; 0 when either is all zeros or their lengths differ.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// How much a field says about a tool, relative to its description.
const NAME_WEIGHT: f32 = 2.0;
const GROUP_WEIGHT: f32 = 0.6;
const DESCRIPTION_WEIGHT: f32 = 1.0;
const PARAM_NAME_WEIGHT: f32 = 0.6;
const PARAM_DESCRIPTION_WEIGHT: f32 = 0.25;

/// Per-feature weights before field weights: a word counts fully, a concept nearly so, a pair of
/// words half, and the character n-grams of one word together about as much as a concept.
const WORD_WEIGHT: f32 = 1.0;
const CONCEPT_WEIGHT: f32 = 0.8;
const BIGRAM_WEIGHT: f32 = 0.5;
const NGRAMS_PER_WORD_WEIGHT: f32 = 0.6;

/// The built-in offline embedder; see the module documentation.
#[derive(Debug, Clone)]
pub struct LexicalEmbedder {
    dimension: usize,
}

impl Default for LexicalEmbedder {
    fn default() -> Self {
        Self::new()
    }
}

impl LexicalEmbedder {
    /// The embedder with [`LEXICAL_DIMENSION`] dimensions.
    pub fn new() -> Self {
        Self { dimension: LEXICAL_DIMENSION }
    }

    /// The length of every vector it returns.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Embeds one text (a query, a description): an L2-normalised vector, all zeros when the text
    /// has no word that counts.
    pub fn embed(&self, text: &str) -> Vec<f32> {
        self.embed_fields(&[(text, 1.0)])
    }

    /// Embeds several fields of one thing with their weights, e.g. a name counting twice as much
    /// as a description.
    pub fn embed_fields(&self, fields: &[(&str, f32)]) -> Vec<f32> {
        let mut features: HashMap<u64, f32> = HashMap::new();
        for &(text, weight) in fields {
            if weight > 0.0 {
                add_text_features(text, weight, &mut features);
            }
        }
        self.project(features)
    }

    /// Embeds a tool from its qualified name and spec: the whole tool with weighted fields, its
    /// inputs, and its outputs when it has an output schema.
    pub fn embed_tool(&self, qualified: &str, spec: &ToolSpec) -> ToolEmbedding {
        let ins = inputs(spec);
        let outs = spec.output_schema.as_ref().map(|_| outputs(spec));
        let in_names = param_names(&ins);
        let in_descs = param_descriptions(&ins);
        let out_names = outs.as_deref().map(param_names).unwrap_or_default();
        let out_descs = outs.as_deref().map(param_descriptions).unwrap_or_default();
        let group = spec.group.as_deref().unwrap_or("");
        let tool = self.embed_fields(&[
            (qualified, NAME_WEIGHT),
            (group, GROUP_WEIGHT),
            (&spec.description, DESCRIPTION_WEIGHT),
            (&in_names, PARAM_NAME_WEIGHT),
            (&in_descs, PARAM_DESCRIPTION_WEIGHT),
            (&out_names, PARAM_NAME_WEIGHT * 0.5),
            (&out_descs, PARAM_DESCRIPTION_WEIGHT * 0.5),
        ]);
        let inputs = self.embed_fields(&[(&in_names, 1.0), (&in_descs, 0.4)]);
        let outputs = outs.map(|_| self.embed_fields(&[(&out_names, 1.0), (&out_descs, 0.4)]));
        ToolEmbedding { tool, inputs, outputs, name: None }
    }

    fn project(&self, features: HashMap<u64, f32>) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dimension];
        // Colliding features are summed in hash order, never in the map's (random) order, so a
        // text gives the same vector bit for bit in every process.
        let mut features: Vec<(u64, f32)> = features.into_iter().collect();
        features.sort_unstable_by_key(|&(hash, _)| hash);
        for (hash, weight) in features {
            // Sublinear growth: the tenth mention of a word adds little.
            let w = if weight <= 1.0 { weight } else { 1.0 + weight.ln() };
            let index = (hash % self.dimension as u64) as usize;
            // A sign bit from the hash makes collisions cancel out on average instead of piling up.
            let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
            v[index] += sign * w;
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }
}

fn param_names(params: &[Param]) -> String {
    params.iter().map(|p| p.path.as_str()).collect::<Vec<_>>().join("\n")
}

fn param_descriptions(params: &[Param]) -> String {
    params.iter().map(|p| first_line(p.description.trim())).collect::<Vec<_>>().join("\n")
}

fn add_text_features(text: &str, field_weight: f32, features: &mut HashMap<u64, f32>) {
    let table = aliases();
    // Words are analysed per line, so the last word of one parameter and the first of the next do
    // not form a pair.
    for line in text.lines() {
        let words = terms(line);
        for (i, word) in words.iter().enumerate() {
            let w = field_weight * importance(word);
            *features.entry(feature_hash(b'w', word)).or_default() += WORD_WEIGHT * w;
            add_ngrams(word, w, features);
            if let Some(concepts) = table.words.get(word.as_str()) {
                for concept in concepts {
                    *features.entry(feature_hash(b'k', concept)).or_default() +=
                        CONCEPT_WEIGHT * field_weight;
                }
            }
            if let Some(next) = words.get(i + 1) {
                let pair = format!("{word} {next}");
                let pw = field_weight * importance(word).min(importance(next));
                *features.entry(feature_hash(b'b', &pair)).or_default() += BIGRAM_WEIGHT * pw;
                if let Some(concepts) = table.phrases.get(pair.as_str()) {
                    for concept in concepts {
                        *features.entry(feature_hash(b'k', concept)).or_default() +=
                            CONCEPT_WEIGHT * field_weight;
                    }
                }
            }
        }
    }
}

fn add_ngrams(word: &str, weight: f32, features: &mut HashMap<u64, f32>) {
    let marked: Vec<char> = std::iter::once('^').chain(word.chars()).chain(['$']).collect();
    let mut grams = Vec::new();
    for n in 3..=5 {
        if marked.len() < n {
            break;
        }
        for window in marked.windows(n) {
            grams.push(window.iter().collect::<String>());
        }
    }
    if grams.is_empty() {
        return;
    }
    let each = NGRAMS_PER_WORD_WEIGHT * weight / (grams.len() as f32).sqrt();
    for gram in grams {
        *features.entry(feature_hash(b'c', &gram)).or_default() += each;
    }
}

/// FNV-1a over a kind tag and the feature text: stable across platforms, releases and runs,
/// which the cached vectors rely on (std's hasher promises none of that).
fn feature_hash(kind: u8, text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in std::iter::once(&kind).chain(text.as_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // FNV's low bits mix poorly for short inputs; fold the high half in.
    h ^ (h >> 29)
}

/// How much a word counts: the built-in table's very common words (in tool texts) count less.
fn importance(word: &str) -> f32 {
    static STEMMED: OnceLock<Vec<String>> = OnceLock::new();
    let common = STEMMED.get_or_init(|| COMMON.iter().map(|w| stem(w)).collect());
    if common.iter().any(|c| c == word) {
        0.35
    } else {
        1.0
    }
}

/// Words of text, split and normalised as the embedder sees them: identifiers split at `_`, `.`,
/// `/`, `-` and camelCase humps, lowercased, numbers and stopwords dropped, stemmed.
///
/// ```
/// use quiver_core::enrich::embed::terms;
/// assert_eq!(terms("github.listPullRequests of the repos"), ["github", "list", "pull", "request", "repo"]);
/// ```
pub fn terms(text: &str) -> Vec<String> {
    split_words(text)
        .into_iter()
        .filter(|w| !w.chars().all(|c| c.is_ascii_digit()))
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
        .filter(|w| !w.is_empty())
        .collect()
}

/// The words of an identifier (`updated_after`, `issueNumber`), stemmed, keeping the short words
/// [`terms`] drops as stopwords: in a name, `after` and `at` are what tell a filter from a
/// timestamp.
pub(crate) fn name_terms(name: &str) -> Vec<String> {
    split_words(name)
        .into_iter()
        .filter(|w| !w.chars().all(|c| c.is_ascii_digit()))
        .map(|w| stem(&w))
        .collect()
}

/// Splits at every non-alphanumeric character and inside camelCase, lowercasing.
pub(crate) fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        if !current.is_empty() && c.is_uppercase() {
            let prev = chars[i - 1];
            // …but `PRs` stays one word: a plural `s` after an acronym is not a new word.
            let plural = chars.get(i + 1) == Some(&'s')
                && chars.get(i + 2).is_none_or(|n| !n.is_alphanumeric());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase()) && !plural;
            // `getIssue` splits before `I`; `HTTPServer` splits before `S` (the last capital of a
            // run followed by a lowercase letter).
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                words.push(std::mem::take(&mut current));
            }
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Light suffix stripping: enough to make plural, `-ing` and `-ed` forms meet their stem, without
/// a stemmer's table of exceptions. `create`, `created` and `creating` all become `creat`.
pub(crate) fn stem(word: &str) -> String {
    let w = word;
    if w.len() <= 3 || !w.is_ascii() {
        return w.to_owned();
    }
    let mut s: String = if let Some(base) = w.strip_suffix("ies").filter(|b| b.len() >= 2) {
        format!("{base}y")
    } else if let Some(base) = w.strip_suffix("sses") {
        format!("{base}ss")
    } else if let Some(base) = ["ches", "shes", "xes"]
        .iter()
        .find_map(|suffix| w.strip_suffix(suffix).map(|b| (b, &suffix[..suffix.len() - 2])))
        .filter(|(b, _)| b.len() >= 2)
        .map(|(b, kept)| format!("{b}{kept}"))
    {
        base
    } else if w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        w[..w.len() - 1].to_owned()
    } else {
        w.to_owned()
    };
    let mut stripped_verb = false;
    for suffix in ["ing", "ed"] {
        if let Some(base) = s.strip_suffix(suffix) {
            if base.len() >= 3 && base.chars().any(is_vowel) {
                s = base.to_owned();
                stripped_verb = true;
                break;
            }
        }
    }
    if stripped_verb {
        // `running` -> `runn` -> `run`, `committed` -> `committ` -> `commit`.
        let b = s.as_bytes();
        let n = b.len();
        if n >= 2 && b[n - 1] == b[n - 2] && !matches!(b[n - 1], b'l' | b's' | b'z') {
            s.pop();
        }
    }
    if s.len() > 4 && s.ends_with('e') {
        s.pop();
    }
    s
}

fn is_vowel(c: char) -> bool {
    matches!(c, 'a' | 'e' | 'i' | 'o' | 'u' | 'y')
}

/// Words that carry no meaning in tool texts: dropped before anything else.
const STOPWORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "before", "being", "both", "but", "by", "can", "could", "did", "do", "does",
    "doing", "e", "each", "eg", "else", "etc", "for", "from", "g", "had", "has", "have", "having",
    "he", "her", "here", "him", "his", "how", "i", "ie", "if", "in", "into", "is", "it", "its",
    "itself", "just", "me", "might", "must", "my", "of", "on", "onto", "or", "other", "our", "out",
    "own", "per", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under",
    "until", "up", "upon", "us", "very", "via", "was", "we", "were", "what", "whatever", "when",
    "where", "whether", "which", "while", "who", "whom", "whose", "why", "will", "with", "within",
    "would", "you", "your", "yours",
];

/// Stems of words so common in tool texts that they say little about which tool is meant: the
/// fixed stand-in for IDF, which an embedding that depends only on its own text cannot learn.
const COMMON: &[&str] = &[
    "get", "list", "return", "default", "option", "optional", "page", "result", "one", "all",
    "only", "more", "new", "set", "value", "field", "null", "true", "false", "none", "use",
    "string", "number", "id", "count", "total", "next", "first", "last", "most", "least",
    "without", "name", "url", "html", "web", "like", "every", "non", "left", "ask", "time", "date",
    "order", "newest", "oldest", "filter",
];

/// The built-in alias table: each concept with the words and two-word phrases that name it, in
/// plain spelling (stemmed when the table is built). A word may name several concepts (`pr` is a
/// pull request and a code change).
const CONCEPTS: &[(&str, &[&str])] = &[
    ("pull_request", &["pr", "prs", "pull request", "pull"]),
    ("merge_request", &["mr", "mrs", "merge request"]),
    (
        "code_change",
        &["pr", "prs", "mr", "mrs", "pull request", "merge request", "changeset", "patchset"],
    ),
    ("issue", &["issue", "ticket", "bug", "defect", "incident", "story", "problem"]),
    ("work_item", &["issue", "ticket", "bug", "task", "card", "story", "epic", "subtask", "todo"]),
    ("task", &["task", "card", "todo", "subtask", "chore"]),
    (
        "ci",
        &[
            "ci",
            "pipeline",
            "workflow",
            "build",
            "job",
            "run",
            "action",
            "github actions",
            "check",
            "ci cd",
        ],
    ),
    ("repository", &["repo", "repos", "repository", "project", "codebase"]),
    ("comment", &["comment", "note", "discussion", "reply", "conversation", "thread", "remark"]),
    (
        "meeting",
        &["transcript", "meeting", "call", "recording", "standup", "huddle", "sync", "fireflies"],
    ),
    ("sprint", &["sprint", "iteration", "cycle"]),
    (
        "person",
        &[
            "assignee",
            "owner",
            "user",
            "member",
            "author",
            "reporter",
            "people",
            "person",
            "login",
            "username",
            "participant",
            "organizer",
            "attendee",
            "speaker",
        ],
    ),
    ("review", &["review", "reviewer", "approval", "approve", "approver", "approved"]),
    ("log", &["log", "logs", "trace", "console", "stderr", "stdout"]),
    ("failure", &["fail", "failed", "failure", "error", "broken", "crash", "red"]),
    ("branch", &["branch", "ref", "head", "base"]),
    ("commit", &["commit", "sha", "revision", "hash"]),
    ("file", &["file", "path", "blob", "content", "directory", "folder"]),
    ("search", &["search", "find", "query", "lookup", "jql", "grep"]),
    ("create", &["create", "add", "new", "make", "post"]),
    ("update", &["update", "edit", "change", "modify", "rename", "set"]),
    ("label", &["label", "tag", "topic"]),
    ("release", &["release", "version", "milestone"]),
    ("workspace", &["workspace", "team", "organization", "organisation", "org"]),
    ("board", &["board", "kanban", "scrum", "backlog"]),
    ("diff", &["diff", "patch", "changed file", "change file", "hunk", "changes"]),
    ("status", &["status", "state", "transition", "progress"]),
    ("title", &["title", "summary", "subject", "headline"]),
    ("body", &["description", "body", "text"]),
    ("duration", &["duration", "time spent", "time tracked", "time entry", "hours", "estimate"]),
];

struct AliasTable {
    words: HashMap<String, Vec<&'static str>>,
    phrases: HashMap<String, Vec<&'static str>>,
}

fn aliases() -> &'static AliasTable {
    static TABLE: OnceLock<AliasTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut words: HashMap<String, Vec<&'static str>> = HashMap::new();
        let mut phrases: HashMap<String, Vec<&'static str>> = HashMap::new();
        for &(concept, members) in CONCEPTS {
            for member in members {
                // Members go through the same analysis as text, so they meet its words.
                let t = terms(member);
                let target = match t.as_slice() {
                    [one] => words.entry(one.clone()).or_default(),
                    [a, b] => phrases.entry(format!("{a} {b}")).or_default(),
                    _ => continue,
                };
                if !target.contains(&concept) {
                    target.push(concept);
                }
            }
        }
        AliasTable { words, phrases }
    })
}

/// The concepts the alias table gives a stemmed word, for callers that match parameter names.
pub(crate) fn concepts_of(word: &str) -> &'static [&'static str] {
    aliases().words.get(word).map(Vec::as_slice).unwrap_or(&[])
}
