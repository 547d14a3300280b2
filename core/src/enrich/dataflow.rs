//! Parameter-level dataflow: which tool's output can feed which tool's input, as a forward index
//! (each tool's best successors) and a reverse index (each tool's predecessors), built in one pass.
//!
//! An edge A→B exists when some output leaf of A (`issues[].number`) can serve as some input of B
//! (`number` of `get_issue`): their types are compatible, and their texts agree. A parameter's
//! text is its name (split into words, stemmed, with the alias concepts of
//! [`embed`](super::embed)), where it sits (the array it is an item of, the entity its tool is
//! about: `issue` in `get_issue`), and its description. The edge's score is that of its best
//! parameter pair, never a similarity of whole schemas: one shared identifier makes a real flow,
//! twenty shared timestamps do not.
//!
//! It scales by never looking at most pairs. Parameters are first blocked by type (a boolean
//! flag feeds nothing; an integer can feed an integer or a number, or a string named like an id),
//! then within a block an inverted index over *keys* proposes candidates: a name word that is not
//! a bare identifier word (`task`, `branch`, `project`), or, for identifier-like names (`id`,
//! `number`, `iid`, `key`…), the identifier together with the entity around it (`issue id`,
//! `transcript id`), so the thousands of `id` fields of a large registry only meet the few that
//! talk about the same thing. Whether a pair is proposed and how it scores depend on the two
//! parameters alone, which is what makes [`extend`] (only pairs involving new tools) give exactly
//! what [`compute`] gives over everything.
//!
//! Pagination and output-shaping parameters (`page`, `per_page`, `next_page`, `limit`,
//! `max_bytes`…) are left out: they feed only the next page of the same call, which is not a
//! flow between tools.
//!
//! ```
//! use quiver_core::enrich::dataflow::{compute, DataflowOptions};
//! use quiver_core::ToolSpec;
//! use serde_json::json;
//!
//! let spec = |name: &str, input: serde_json::Value, output: serde_json::Value| ToolSpec {
//!     name: name.into(),
//!     group: None,
//!     description: String::new(),
//!     input_schema: input,
//!     output_schema: Some(output),
//!     sensitive_params: vec![],
//! };
//! let list = spec(
//!     "list_issues",
//!     json!({"type": "object", "properties": {"repo": {"type": "string"}}}),
//!     json!({"type": "object", "properties": {"issues": {"type": "array", "items": {
//!         "type": "object", "properties": {"number": {"type": "integer", "description": "The issue number."}}}}}}),
//! );
//! let get = spec(
//!     "get_issue",
//!     json!({"type": "object", "properties": {"number": {"type": "integer", "description": "The issue number."}},
//!            "required": ["number"]}),
//!     json!({"type": "object", "properties": {"title": {"type": "string"}}}),
//! );
//! let index = compute(&[("github.list_issues", &list), ("github.get_issue", &get)], &DataflowOptions::default());
//! let edge = &index.out["github.list_issues"][0];
//! assert_eq!((edge.tool.as_str(), edge.from_param.as_str(), edge.to_param.as_str()),
//!            ("github.get_issue", "issues[].number", "number"));
//! assert_eq!(index.r#in["github.get_issue"][0].tool, "github.list_issues");
//! ```

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::embed::{concepts_of, name_terms, terms};
use super::params::{inputs, outputs, Param, ParamType};
use crate::ToolSpec;

/// One end of an edge, seen from the other end.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DataflowEdge {
    /// The other tool: the successor in [`DataflowIndex::out`], the predecessor in
    /// [`DataflowIndex::r#in`].
    pub tool: String,
    /// The output path on the source tool, e.g. `issues[].number`.
    pub from_param: String,
    /// The input name on the target tool, e.g. `number`.
    pub to_param: String,
    /// How well the best parameter pair fits, in (0, 1].
    pub score: f32,
}

/// The `dataflow` artifact: forward and reverse edge indexes over qualified tool names.
///
/// Every tool of the registry has an entry in both maps, empty when nothing flows. `out` holds
/// each tool's best [`DataflowOptions::max_neighbors`] successors, best first. `in` is its exact
/// mirror, best first: the predecessors of B are the tools that count B among their best
/// successors. (Bounding `in` separately would break the mirror, and with it the fan-in samplers'
/// promise that every feed is an edge the forward index knows.) Ties are broken by tool name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct DataflowIndex {
    /// Source → successors, best first.
    pub out: BTreeMap<String, Vec<DataflowEdge>>,
    /// Target → predecessors, best first.
    #[serde(rename = "in")]
    pub r#in: BTreeMap<String, Vec<DataflowEdge>>,
}

impl DataflowIndex {
    /// The number of edges.
    pub fn edge_count(&self) -> usize {
        self.out.values().map(Vec::len).sum()
    }
}

/// How many edges to keep and how weak an edge may be.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DataflowOptions {
    /// Successors kept per tool (the forward index's bound); 10 by default.
    pub max_neighbors: usize,
    /// Edges scoring below this are dropped; 0.45 by default, which on the bundled providers keeps
    /// identifier flows (`issues[].number` → `number`) and same-named scopes (`project` →
    /// `project`) and drops pairs that share only a generic word.
    pub min_score: f32,
}

impl Default for DataflowOptions {
    fn default() -> Self {
        Self { max_neighbors: 10, min_score: 0.45 }
    }
}

/// The dataflow index over `tools` (qualified name, spec).
pub fn compute<N: AsRef<str>>(tools: &[(N, &ToolSpec)], opts: &DataflowOptions) -> DataflowIndex {
    let registry = Registry::build(tools);
    let all: Vec<bool> = vec![true; registry.tools.len()];
    let fresh = registry.edges(&all, opts);
    let mut out = BTreeMap::new();
    for (i, name) in registry.tools.iter().enumerate() {
        out.insert(name.clone(), registry.to_edges(&fresh[i]));
    }
    mirror(out)
}

/// The index over `tools` given `prev`, the index over the tools it already covers: computes only
/// the pairs that involve a tool `prev` has not seen, and merges. The result equals
/// [`compute`] over `tools` with the same `opts`.
///
/// `new` names the tools that were added or changed. A tool `prev` covers that changed, or a
/// tool that went away, can leave a hole in a bounded list that only a full pass can refill, so in
/// those cases this falls back to [`compute`]. Tools in `tools` that `prev` does not cover count
/// as new whether or not `new` names them.
pub fn extend<N: AsRef<str>>(
    prev: &DataflowIndex,
    tools: &[(N, &ToolSpec)],
    new: &[String],
    opts: &DataflowOptions,
) -> DataflowIndex {
    let names: BTreeSet<&str> = tools.iter().map(|(n, _)| n.as_ref()).collect();
    let changed = new.iter().any(|n| prev.out.contains_key(n.as_str()));
    let removed = prev.out.keys().any(|n| !names.contains(n.as_str()));
    if changed || removed {
        return compute(tools, opts);
    }
    let registry = Registry::build(tools);
    let is_new: Vec<bool> = registry.tools.iter().map(|n| !prev.out.contains_key(n)).collect();
    if !is_new.iter().any(|&b| b) {
        return mirror(prev.out.clone());
    }
    let fresh = registry.edges(&is_new, opts);
    let mut out = BTreeMap::new();
    for (i, name) in registry.tools.iter().enumerate() {
        let mut list = registry.to_edges(&fresh[i]);
        if let Some(old) = prev.out.get(name) {
            list.extend(old.iter().cloned());
            list.sort_by(edge_order);
            list.dedup_by(|a, b| a.tool == b.tool);
            list.truncate(opts.max_neighbors);
        }
        out.insert(name.clone(), list);
    }
    mirror(out)
}

fn edge_order(a: &DataflowEdge, b: &DataflowEdge) -> Ordering {
    b.score.total_cmp(&a.score).then_with(|| a.tool.cmp(&b.tool))
}

fn mirror(out: BTreeMap<String, Vec<DataflowEdge>>) -> DataflowIndex {
    let mut r#in: BTreeMap<String, Vec<DataflowEdge>> =
        out.keys().map(|k| (k.clone(), Vec::new())).collect();
    for (source, edges) in &out {
        for e in edges {
            r#in.entry(e.tool.clone()).or_default().push(DataflowEdge {
                tool: source.clone(),
                from_param: e.from_param.clone(),
                to_param: e.to_param.clone(),
                score: e.score,
            });
        }
    }
    for list in r#in.values_mut() {
        list.sort_by(edge_order);
    }
    DataflowIndex { out, r#in }
}

/// Input names that shape or page a call rather than say what it is about.
const CONTROL_INPUTS: &[&str] = &[
    "page",
    "per_page",
    "page_size",
    "limit",
    "offset",
    "skip",
    "cursor",
    "start",
    "start_at",
    "start_id",
    "max_results",
    "max_bytes",
    "max_patch_bytes",
    "max_sentences",
    "sentences_from",
    "tail_lines",
    "start_line",
    "order_by",
    "sort",
    "direction",
    "reverse",
    "newest_first",
    "next_page_token",
    "fields",
    "q",
];

/// Output names that describe the listing rather than its items.
const CONTROL_OUTPUTS: &[&str] = &[
    "page",
    "skip",
    "total",
    "total_count",
    "count",
    "more",
    "is_last",
    "incomplete_results",
    "note",
    "lines_returned",
    "lines_total",
    "sentences_total",
    "participants_total",
    "entries_total",
    "system_notes_skipped",
    "skipped",
    "pull_requests_skipped",
];

/// Words that name an identifier rather than a thing; alone they say nothing about what is
/// identified, so they only make a candidate key together with an entity word.
const IDENTIFIER_WORDS: &[&str] =
    &["id", "iid", "key", "number", "num", "uuid", "slug", "url", "ref", "name", "sha", "code"];

/// Container names that say nothing about what their items are.
const GENERIC_CONTAINERS: &[&str] =
    &["item", "result", "hit", "entry", "node", "data", "record", "value", "match"];

/// Tool-name words that say what a tool does, not what it is about.
pub(crate) const VERBS: &[&str] = &[
    "get", "list", "search", "find", "fetch", "read", "create", "add", "update", "edit", "delete",
    "remove", "retry", "rerun", "cancel", "close", "open", "set", "link", "move", "run", "query",
    "post", "put", "patch", "upsert", "show", "describe", "make", "new",
];

// Relative weights of a parameter's words.
const NAME_W: f32 = 1.0;
const NAME_CONCEPT_W: f32 = 0.7;
const CONTAINER_W: f32 = 0.6;
const TOOL_ENTITY_W: f32 = 0.45;
const DESCRIPTION_W: f32 = 0.3;
/// Description words that count: the first ones of the first sentence.
const DESCRIPTION_WORDS: usize = 10;

/// An identifier word weighs less than the words naming what it identifies.
const IDENTIFIER_W: f32 = 0.6;

// Score factors.
/// Text can flow between services (a GitHub issue's title into a Jira summary)…
const CROSS_PROVIDER: f32 = 0.6;
/// …identifiers cannot: a GitHub job id means nothing to GitLab.
const CROSS_PROVIDER_IDENTIFIER: f32 = 0.3;
const OPTIONAL_INPUT: f32 = 0.9;
/// Both names say what they are about, and they disagree: `task_id` is no `list_id`.
const ENTITY_MISMATCH: f32 = 0.5;
/// A top-level output named like one of its tool's inputs echoes that input: passing it on keeps
/// the same scope (`project`, `repo`) but carries nothing the call found out.
const ECHO: f32 = 0.85;

/// The type classes outputs are blocked by.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Class {
    Int,
    Num,
    Str,
    Obj,
    Unknown,
}

const CLASSES: usize = 5;

impl Class {
    fn of(ty: ParamType) -> Option<Class> {
        match ty {
            ParamType::Integer => Some(Class::Int),
            ParamType::Number => Some(Class::Num),
            ParamType::String => Some(Class::Str),
            ParamType::Object => Some(Class::Obj),
            ParamType::Unknown => Some(Class::Unknown),
            // Flags feed nothing; nested arrays are too rare to reason about.
            ParamType::Boolean | ParamType::Array => None,
        }
    }
}

/// Which output classes can feed an input, and how well: `(class, factor)`.
fn accepts(input: &InParam) -> Vec<(Class, f32)> {
    let scalar = |ty: ParamType, factor: f32| -> Vec<(Class, f32)> {
        let list: Vec<(Class, f32)> = match ty {
            ParamType::Integer => vec![(Class::Int, 1.0), (Class::Unknown, 0.5)],
            ParamType::Number => vec![(Class::Num, 1.0), (Class::Int, 0.9), (Class::Unknown, 0.5)],
            ParamType::String if input.id_like => {
                vec![(Class::Str, 1.0), (Class::Int, 0.85), (Class::Unknown, 0.5)]
            }
            ParamType::String => vec![(Class::Str, 1.0), (Class::Unknown, 0.5)],
            ParamType::Object => vec![(Class::Obj, 0.8)],
            ParamType::Unknown => {
                vec![(Class::Str, 0.5), (Class::Int, 0.5), (Class::Num, 0.5), (Class::Unknown, 0.4)]
            }
            ParamType::Boolean | ParamType::Array => vec![],
        };
        list.into_iter().map(|(c, f)| (c, f * factor)).collect()
    };
    match input.ty {
        // Items gathered from several results fill an array argument.
        ParamType::Array => scalar(input.items.unwrap_or(ParamType::Unknown), 0.9),
        ty => scalar(ty, 1.0),
    }
}

struct OutParam {
    tool: u32,
    path: String,
    class: Class,
    /// The name has an identifier word (`id`, `number`, `key`…).
    id_like: bool,
    /// Non-identifier name words and their concepts, sorted.
    entity: Vec<String>,
    echo: bool,
    vec: Vec<(u64, f32)>,
    keys: Vec<u32>,
}

struct InParam {
    tool: u32,
    name: String,
    ty: ParamType,
    items: Option<ParamType>,
    id_like: bool,
    entity: Vec<String>,
    required: bool,
    vec: Vec<(u64, f32)>,
    keys: Vec<u32>,
}

/// The registry's parameters, analysed once.
struct Registry {
    /// Qualified names, sorted; tool indexes refer to this order.
    tools: Vec<String>,
    provider: Vec<u32>,
    outs: Vec<OutParam>,
    ins: Vec<InParam>,
    /// For each tool, the range of its inputs in `ins`.
    in_ranges: Vec<std::ops::Range<usize>>,
}

/// The best pair found for one (source, target): score, output index, input index.
#[derive(Clone, Copy)]
struct Best {
    target: u32,
    score: f32,
    out: u32,
    input: u32,
}

#[derive(Default)]
struct Interner {
    ids: HashMap<String, u32>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.ids.len() as u32;
        self.ids.insert(s.to_owned(), id);
        id
    }
}

/// A weighted bag of words under construction: the highest weight of each word wins.
#[derive(Default)]
struct Bag(HashMap<String, f32>);

impl Bag {
    fn add(&mut self, word: &str, w: f32) {
        let e = self.0.entry(word.to_owned()).or_insert(0.0);
        if w > *e {
            *e = w;
        }
    }

    fn add_with_concepts(&mut self, word: &str, w: f32, concept_w: f32) {
        self.add(word, w);
        for c in concepts_of(word) {
            self.add(&format!("k:{c}"), concept_w);
        }
    }

    /// The bag as a unit vector sorted by word hash. Ids come from a hash of the word, not from
    /// an interner, and the norm is summed in that order, so a parameter's vector (and every dot
    /// product) is the same bit for bit whatever else the registry holds.
    fn vector(self) -> Vec<(u64, f32)> {
        let mut v: Vec<(u64, f32)> = self.0.into_iter().map(|(k, w)| (word_id(&k), w)).collect();
        v.sort_by_key(|&(id, _)| id);
        let norm = v.iter().map(|(_, w)| w * w).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|(_, w)| *w /= norm);
        }
        v
    }
}

/// FNV-1a of a word: 64 bits make a collision among a registry's few thousand words unlikely
/// enough not to matter (it would only add a little similarity).
fn word_id(word: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in word.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn dot(a: &[(u64, f32)], b: &[(u64, f32)]) -> f32 {
    let (mut i, mut j, mut s) = (0, 0, 0.0f32);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            Ordering::Less => i += 1,
            Ordering::Greater => j += 1,
            Ordering::Equal => {
                s += a[i].1 * b[j].1;
                i += 1;
                j += 1;
            }
        }
    }
    s
}

fn description_terms(description: &str) -> Vec<String> {
    let sentence = description.split(['.', '\n', ';']).next().unwrap_or("");
    terms(sentence).into_iter().take(DESCRIPTION_WORDS).collect()
}

fn disjoint(a: &[String], b: &[String]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            Ordering::Less => i += 1,
            Ordering::Greater => j += 1,
            Ordering::Equal => return false,
        }
    }
    true
}

/// Concepts too wide to tell two entities apart: a pipeline and a job are both CI, yet a
/// pipeline id is no job id.
const BROAD_CONCEPTS: &[&str] = &["ci", "work_item", "code_change"];

/// The non-identifier words of a name with their narrow concepts, sorted and deduplicated.
fn entity_words<'w>(words: impl IntoIterator<Item = &'w String>) -> Vec<String> {
    let mut set = BTreeSet::new();
    for w in words.into_iter().filter(|w| !is_identifier(w)) {
        set.insert(w.clone());
        for c in concepts_of(w).iter().filter(|c| !BROAD_CONCEPTS.contains(c)) {
            set.insert(format!("k:{c}"));
        }
    }
    set.into_iter().collect()
}

fn is_identifier(word: &str) -> bool {
    IDENTIFIER_WORDS.contains(&word)
}

/// The analysed words of one parameter.
struct Words {
    /// Name words (stemmed).
    name: Vec<String>,
    /// Entity words around it: the arrays it sits in, its tool's subject, its description.
    context: Vec<String>,
    /// For outputs, the words of the innermost array or object it sits in.
    container: Vec<String>,
}

/// Candidate keys: `n:word` for each name word that is not an identifier word (and its
/// concepts), `g:entity:identifier` for each identifier word with each entity word (the name's
/// own other words and the context), and for an identifier item of an array, `n:item` (the
/// `id` of `transitions[]` can be the `transition` argument).
fn keys(words: &Words, interner: &mut Interner) -> Vec<u32> {
    let mut keys = BTreeSet::new();
    if words.name.iter().all(|w| is_identifier(w)) {
        for c in &words.container {
            keys.insert(format!("n:{c}"));
        }
    }
    let (ident, plain): (Vec<&String>, Vec<&String>) =
        words.name.iter().partition(|w| is_identifier(w));
    for w in &plain {
        keys.insert(format!("n:{w}"));
        for c in concepts_of(w) {
            keys.insert(format!("n:k:{c}"));
        }
    }
    for id in &ident {
        for e in plain.iter().copied().chain(&words.context) {
            if !is_identifier(e) {
                keys.insert(format!("g:{e}:{id}"));
            }
        }
    }
    keys.into_iter().map(|k| interner.id(&k)).collect()
}

fn tool_entities(qualified: &str) -> (String, Vec<String>) {
    let (provider, tool) = qualified.split_once('.').unwrap_or(("", qualified));
    let entities = terms(tool).into_iter().filter(|w| !VERBS.contains(&w.as_str())).collect();
    (provider.to_owned(), entities)
}

impl Registry {
    fn build<N: AsRef<str>>(tools: &[(N, &ToolSpec)]) -> Self {
        let mut sorted: Vec<(&str, &ToolSpec)> =
            tools.iter().map(|(n, s)| (n.as_ref(), *s)).collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        sorted.dedup_by(|a, b| a.0 == b.0);
        let mut keys_i = Interner::default();
        let mut providers = Interner::default();
        let mut reg = Registry {
            tools: Vec::with_capacity(sorted.len()),
            provider: Vec::with_capacity(sorted.len()),
            outs: Vec::new(),
            ins: Vec::new(),
            in_ranges: Vec::with_capacity(sorted.len()),
        };
        for (t, (qualified, spec)) in sorted.into_iter().enumerate() {
            let t = t as u32;
            let (provider, entities) = tool_entities(qualified);
            reg.tools.push(qualified.to_owned());
            reg.provider.push(providers.id(&provider));
            let ins = inputs(spec);
            let input_names: BTreeSet<String> = ins.iter().map(|p| p.name.clone()).collect();
            for p in outputs(spec) {
                if let Some(o) = analyse_output(t, &p, &entities, &input_names, &mut keys_i) {
                    reg.outs.push(o);
                }
            }
            let start = reg.ins.len();
            for p in ins {
                if let Some(i) = analyse_input(t, &p, &entities, &mut keys_i) {
                    reg.ins.push(i);
                }
            }
            reg.in_ranges.push(start..reg.ins.len());
        }
        reg
    }

    /// For every source tool, its best successors (at most `max_neighbors`), considering only
    /// pairs where the source or the target is marked in `fresh`.
    fn edges(&self, fresh: &[bool], opts: &DataflowOptions) -> Vec<Vec<Best>> {
        // Inverted indexes key -> outputs, one per type class: over every tool (for fresh
        // targets) and over fresh tools only (for the others).
        let mut all: Vec<HashMap<u32, Vec<u32>>> = vec![HashMap::new(); CLASSES];
        let mut fresh_only: Vec<HashMap<u32, Vec<u32>>> = vec![HashMap::new(); CLASSES];
        let every_target_fresh = fresh.iter().all(|&f| f);
        for (oi, o) in self.outs.iter().enumerate() {
            for &k in &o.keys {
                all[o.class as usize].entry(k).or_default().push(oi as u32);
                if fresh[o.tool as usize] && !every_target_fresh {
                    fresh_only[o.class as usize].entry(k).or_default().push(oi as u32);
                }
            }
        }
        let n = self.tools.len();
        let mut top: Vec<Vec<Best>> = vec![Vec::new(); n];
        // Per target: the best pair from each source, found through a stamp array.
        let mut best_of: Vec<Option<Best>> = vec![None; n];
        let mut seen_out: Vec<u32> = vec![u32::MAX; self.outs.len()];
        let mut touched: Vec<u32> = Vec::new();
        for (target, &target_fresh) in fresh.iter().enumerate() {
            let index = if target_fresh { &all } else { &fresh_only };
            for ii in self.in_ranges[target].clone() {
                let input = &self.ins[ii];
                for (class, factor) in accepts(input) {
                    let postings = &index[class as usize];
                    for k in &input.keys {
                        let Some(list) = postings.get(k) else { continue };
                        for &oi in list {
                            if seen_out[oi as usize] == ii as u32 {
                                continue;
                            }
                            seen_out[oi as usize] = ii as u32;
                            let o = &self.outs[oi as usize];
                            if o.tool as usize == target {
                                continue;
                            }
                            let score = self.score(o, input, factor);
                            if score < opts.min_score {
                                continue;
                            }
                            let cand =
                                Best { target: target as u32, score, out: oi, input: ii as u32 };
                            let slot = &mut best_of[o.tool as usize];
                            match slot {
                                None => {
                                    touched.push(o.tool);
                                    *slot = Some(cand);
                                }
                                Some(b) if self.pair_better(&cand, b) => *b = cand,
                                Some(_) => {}
                            }
                        }
                    }
                }
            }
            for source in touched.drain(..) {
                let best = best_of[source as usize].take().expect("touched sources have a pair");
                self.push_top(&mut top[source as usize], best, opts.max_neighbors);
            }
        }
        top
    }

    fn score(&self, o: &OutParam, i: &InParam, type_factor: f32) -> f32 {
        // An argument that names an identifier wants an identifier, not a count or a date.
        if i.id_like && !o.id_like {
            return 0.0;
        }
        let mut s = dot(&o.vec, &i.vec) * type_factor;
        if self.provider[o.tool as usize] != self.provider[i.tool as usize] {
            s *= if i.id_like { CROSS_PROVIDER_IDENTIFIER } else { CROSS_PROVIDER };
        }
        if !o.entity.is_empty() && !i.entity.is_empty() && disjoint(&o.entity, &i.entity) {
            s *= ENTITY_MISMATCH;
        }
        if o.echo {
            s *= ECHO;
        }
        if !i.required {
            s *= OPTIONAL_INPUT;
        }
        s
    }

    /// Between two pairs of the same (source, target): the higher score, then the smaller
    /// output path and input name.
    fn pair_better(&self, a: &Best, b: &Best) -> bool {
        match a.score.total_cmp(&b.score) {
            Ordering::Greater => true,
            Ordering::Less => false,
            Ordering::Equal => {
                let ka = (&self.outs[a.out as usize].path, &self.ins[a.input as usize].name);
                let kb = (&self.outs[b.out as usize].path, &self.ins[b.input as usize].name);
                ka < kb
            }
        }
    }

    /// Keeps `list` sorted best first (score, then target name) and at most `k` long.
    fn push_top(&self, list: &mut Vec<Best>, best: Best, k: usize) {
        if k == 0 {
            return;
        }
        let order = |a: &Best, b: &Best| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| self.tools[a.target as usize].cmp(&self.tools[b.target as usize]))
        };
        if list.len() == k && order(&best, list.last().expect("k > 0")) != Ordering::Less {
            return;
        }
        let at = list.partition_point(|e| order(e, &best) == Ordering::Less);
        list.insert(at, best);
        list.truncate(k);
    }

    fn to_edges(&self, bests: &[Best]) -> Vec<DataflowEdge> {
        bests
            .iter()
            .map(|b| DataflowEdge {
                tool: self.tools[b.target as usize].clone(),
                from_param: self.outs[b.out as usize].path.clone(),
                to_param: self.ins[b.input as usize].name.clone(),
                score: b.score,
            })
            .collect()
    }
}

fn add_name_word(bag: &mut Bag, w: &str) {
    if is_identifier(w) {
        bag.add(w, IDENTIFIER_W);
    } else {
        bag.add_with_concepts(w, NAME_W, NAME_CONCEPT_W);
    }
}

fn analyse_output(
    tool: u32,
    p: &Param,
    entities: &[String],
    input_names: &BTreeSet<String>,
    keys_i: &mut Interner,
) -> Option<OutParam> {
    let class = Class::of(p.ty)?;
    let segments: Vec<&str> =
        p.path.split('.').map(|s| s.trim_end_matches("[]")).filter(|s| !s.is_empty()).collect();
    // Pagination cursors (`next_page`, `next_page.start`) and listing counters.
    if segments.iter().any(|s| s.starts_with("next_")) || CONTROL_OUTPUTS.contains(&p.name.as_str())
    {
        return None;
    }
    let name = name_terms(&p.name);
    let containers: Vec<String> =
        segments[..segments.len().saturating_sub(1)].iter().flat_map(|s| terms(s)).collect();
    let desc = description_terms(&p.description);
    let mut bag = Bag::default();
    for w in entities {
        bag.add_with_concepts(w, TOOL_ENTITY_W, TOOL_ENTITY_W * 0.8);
    }
    for w in &desc {
        bag.add_with_concepts(w, DESCRIPTION_W, DESCRIPTION_W * 0.8);
    }
    for w in &containers {
        bag.add_with_concepts(w, CONTAINER_W, CONTAINER_W * 0.8);
    }
    // What the leaf is an item of: its innermost container, unless that is a generic `items`
    // or `results`, or it sits at the top — then the tool's subject (`search_issues`).
    let mut innermost: Vec<String> = segments
        .len()
        .checked_sub(2)
        .map(|i| terms(segments[i]))
        .unwrap_or_default()
        .into_iter()
        .filter(|w| !GENERIC_CONTAINERS.contains(&w.as_str()))
        .collect();
    if innermost.is_empty() && segments.len() > 1 {
        innermost = entities.to_vec();
    }
    let bare = name.iter().all(|w| is_identifier(w));
    for w in &name {
        add_name_word(&mut bag, w);
    }
    // A bare identifier names what it sits in: `issues[].id` reads as `issue id`.
    if bare {
        for w in &innermost {
            add_name_word(&mut bag, w);
        }
    }
    let context: Vec<String> = containers
        .iter()
        .chain(entities)
        .chain(&desc)
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let id_like = name.iter().any(|w| is_identifier(w));
    // …so its entity is that item's: `pipelines[].id` is a pipeline id.
    let entity = if bare { entity_words(&innermost) } else { entity_words(&name) };
    let echo = segments.len() == 1 && input_names.contains(&p.name);
    let keys = keys(&Words { name, context, container: innermost }, keys_i);
    Some(OutParam {
        tool,
        path: p.path.clone(),
        class,
        id_like,
        entity,
        echo,
        vec: bag.vector(),
        keys,
    })
}

fn analyse_input(
    tool: u32,
    p: &Param,
    entities: &[String],
    keys_i: &mut Interner,
) -> Option<InParam> {
    if p.ty == ParamType::Boolean || CONTROL_INPUTS.contains(&p.name.as_str()) {
        return None;
    }
    let name = name_terms(&p.name);
    let desc = description_terms(&p.description);
    let mut bag = Bag::default();
    for w in &desc {
        bag.add_with_concepts(w, DESCRIPTION_W, DESCRIPTION_W * 0.8);
    }
    // An input's subject is its tool's: `number` of `get_issue` is an issue number, as
    // `issues[].number` is, so the tool's entity plays the part an output's container plays.
    for w in entities {
        bag.add_with_concepts(w, CONTAINER_W, CONTAINER_W * 0.8);
    }
    for w in &name {
        add_name_word(&mut bag, w);
    }
    // …and a bare identifier argument names that subject: `number` of `get_issue` reads as
    // `issue number`.
    if name.iter().all(|w| is_identifier(w)) {
        for w in entities {
            add_name_word(&mut bag, w);
        }
    }
    let id_like = name.iter().any(|w| is_identifier(w));
    let entity = entity_words(&name);
    let context: Vec<String> =
        entities.iter().chain(&desc).cloned().collect::<BTreeSet<_>>().into_iter().collect();
    let keys = keys(&Words { name, context, container: Vec::new() }, keys_i);
    Some(InParam {
        tool,
        name: p.name.clone(),
        ty: p.ty,
        items: p.items,
        id_like,
        entity,
        required: p.required,
        vec: bag.vector(),
        keys,
    })
}
