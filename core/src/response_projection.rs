//! Response projection: a tool's result trimmed to the field groups the call needs, and capped at
//! the tool's `cost_model.max_kb`, with one line that tells the model what was left out and how to
//! ask for it.
//!
//! It runs after the provider (or the session cache) in the session pipeline and before the
//! result reaches the model, so the tokens it saves are tokens the model never reads.
//!
//! Two steps, in order:
//! 1. **Field groups.** A group with `default_include = false` is left out unless the call asks
//!    for it — by naming it in the `fields` argument (by group name, by one of its paths, or by the
//!    last field name of a path: `body` asks for a group holding `issues[*].body`), or through an
//!    intent keyword contained in one of its paths, ignoring case (the rule
//!    [`crate::planner::intent_boost`] uses, so a group the planner valued for the intent is also
//!    the group the model gets). Every path of a left-out group is deleted, except where a kept
//!    group names the same value, an ancestor of it (kept whole), or a descendant of it (kept
//!    inside an otherwise pruned value). Fields in no group are kept. Paths use the syntax of
//!    [`crate::projection`]: `body`, `head.sha`, `files[*].patch`, `[*].body` for a result that is
//!    a list; a path that does not parse or selects nothing changes nothing.
//! 2. **Hard cap.** While the compact JSON is larger than `max_kb` KiB, the largest array is cut
//!    from its end (or, when a long string is the largest thing left, the string is truncated with
//!    a `…[+N bytes]` marker). Cuts first keep at least one item per array and 256 bytes per
//!    string, so no field disappears entirely while a smaller cut suffices; only then may arrays
//!    go empty — first those holding no field of a `default_include = true` group. The result is
//!    always a valid JSON value.
//!
//! Tokens are estimated by [`estimate_tokens`] (see there for the rule and why).
//!
//! ```
//! use quiver_core::response_projection::{project, Requested};
//! use quiver_core::value_model::ToolValueModel;
//! use serde_json::json;
//!
//! let model: ToolValueModel = serde_json::from_value(json!({
//!     "value_class": "critical",
//!     "field_groups": {"body": {"fields": ["body"], "default_include": false}},
//! })).unwrap();
//! let issue = json!({"number": 7, "title": "Crash", "body": "A long description …"});
//!
//! let out = project(issue.clone(), &model, &Requested::default());
//! assert_eq!(out.value, json!({"number": 7, "title": "Crash"}));
//! assert_eq!(out.note.as_deref(), Some(r#"left out: body (ask with "fields": ["body"])"#));
//!
//! let asked = Requested { fields: Some(vec!["body".into()]), ..Requested::default() };
//! assert_eq!(project(issue.clone(), &model, &asked).value, issue);
//! ```

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::projection::Step;
use crate::session_cache::{tool_declares_fields, FIELDS_ARGUMENT};
use crate::value_model::{FieldGroup, ToolValueModel};

/// Bytes a string keeps in the first cutting phase, so its field does not vanish in effect.
const MIN_STRING_BYTES: usize = 256;
/// At most this many cuts are named in the note; the rest are counted.
const MAX_CUTS_NAMED: usize = 3;
/// A safety stop for the cutting loop (each round removes at least one item or byte).
const MAX_CUT_ROUNDS: usize = 10_000;

/// What the call asked to see.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requested {
    /// The `fields` argument: group names or field paths; `None` when the call did not pass it.
    /// Names that match no group are ignored.
    pub fields: Option<Vec<String>>,
    /// Words of the current intent (the user's request, the agent's plan); a keyword contained in
    /// a path of an opt-in group, ignoring case, brings the group back.
    pub intent_keywords: Vec<String>,
}

impl Requested {
    /// Reads the `fields` argument of a call: a list of strings, or one comma-separated string.
    ///
    /// When the tool's input schema declares a `fields` property of its own (Jira's
    /// `search_issues`), the argument belongs to the tool and is not read here.
    pub fn from_arguments(
        arguments: &Value,
        input_schema: Option<&Value>,
        intent_keywords: Vec<String>,
    ) -> Self {
        let fields = if input_schema.is_some_and(tool_declares_fields) {
            None
        } else {
            match arguments.get(FIELDS_ARGUMENT) {
                Some(Value::Array(items)) => {
                    Some(items.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                }
                Some(Value::String(list)) => Some(
                    list.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(Into::into)
                        .collect(),
                ),
                _ => None,
            }
        };
        Self { fields, intent_keywords }
    }
}

/// A projected result and what projection did to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Projected {
    /// The result the model gets.
    pub value: Value,
    /// One line for the model: what was left out or cut, and how to ask for it; `None` when the
    /// result is whole.
    pub note: Option<String>,
    /// Estimated tokens of the result as it came in.
    pub tokens_before: u64,
    /// Estimated tokens of [`Projected::value`] (the note not counted).
    pub tokens_after: u64,
    /// Opt-in groups left out that removed something, by name, sorted.
    pub dropped_groups: Vec<String>,
    /// Whether the `max_kb` cap cut the result.
    pub cut: bool,
}

/// Estimated LLM tokens of `value`, as the model would read it: [`estimate_text_tokens`] of its
/// compact JSON.
pub fn estimate_tokens(value: &Value) -> u64 {
    estimate_text_tokens(&value.to_string())
}

/// Estimated LLM tokens of `text`: one token per 4 ASCII bytes (rounded up), plus one token per
/// non-ASCII character.
///
/// Why: the bytes/4 rule of thumb holds for English prose and code under the BPE tokenizers the
/// agents use, but a non-ASCII character (accents, Cyrillic, CJK, emoji) costs about one token or
/// more while taking 2–4 bytes, so bytes/4 would undercount Jira or ClickUp content written in
/// other languages by up to 3×. The rule stays deterministic, needs no vocabulary, is monotone in
/// the text (cutting never raises the estimate) and is O(n). It does not see that JSON punctuation
/// tokenizes somewhat denser than prose: use it to compare sizes, not to bill.
pub fn estimate_text_tokens(text: &str) -> u64 {
    let non_ascii_chars = text.chars().filter(|c| !c.is_ascii()).count();
    let non_ascii_bytes: usize = text.chars().filter(|c| !c.is_ascii()).map(char::len_utf8).sum();
    let ascii = (text.len() - non_ascii_bytes) as u64;
    ascii.div_ceil(4) + non_ascii_chars as u64
}

/// Projects `value` by `model`'s field groups for `requested`, then caps it at
/// `model.cost_model.max_kb` (a cap that is not a positive number is ignored). See the module docs.
pub fn project(value: Value, model: &ToolValueModel, requested: &Requested) -> Projected {
    let tokens_before = estimate_tokens(&value);
    let mut value = value;
    let mut notes = Vec::new();

    let dropped_groups = drop_groups(&mut value, &model.field_groups, requested);
    if !dropped_groups.is_empty() {
        let names = dropped_groups.join(", ");
        let quoted: Vec<String> =
            dropped_groups.iter().map(|g| Value::String(g.clone()).to_string()).collect();
        notes.push(format!("left out: {names} (ask with \"fields\": [{}])", quoted.join(", ")));
    }

    let mut cut = false;
    if let Some(max_kb) = model.cost_model.max_kb.filter(|kb| kb.is_finite() && *kb > 0.0) {
        let protected = group_paths(&model.field_groups, |_, g| g.default_include);
        let limit = (max_kb * 1024.0) as usize;
        if let Some((note, did_cut)) = cap(&mut value, limit, max_kb, &protected) {
            cut = did_cut;
            notes.push(note);
        }
    }

    let tokens_after = estimate_tokens(&value);
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    Projected { value, note, tokens_before, tokens_after, dropped_groups, cut }
}

// ---------------------------------------------------------------------------------------------
// Paths

/// One step of a concrete location in a value.
#[derive(Debug, Clone, PartialEq)]
enum At {
    Key(String),
    Index(usize),
}

/// Whether a path step matches a concrete location step.
fn matches(step: &Step, at: &At) -> bool {
    match (step, at) {
        (Step::Every, _) => true,
        (Step::Field(name), At::Key(key)) => name == key,
        (Step::Index(i), At::Index(j)) => i == j,
        _ => false,
    }
}

/// A field path in the [`crate::projection`] syntax; `None` for one it cannot read or the empty
/// path (a group cannot name the whole result).
fn parse_path(path: &str) -> Option<Vec<Step>> {
    crate::projection::parse(path).ok().filter(|steps| !steps.is_empty())
}

/// The parsed paths of the groups `pick` selects.
fn group_paths(
    groups: &BTreeMap<String, FieldGroup>,
    pick: impl Fn(&str, &FieldGroup) -> bool,
) -> Vec<Vec<Step>> {
    groups
        .iter()
        .filter(|(name, g)| pick(name, g))
        .flat_map(|(_, g)| g.fields.iter().filter_map(|f| parse_path(f)))
        .collect()
}

/// Whether `pattern` selects `location` or one of its ancestors.
fn covers(pattern: &[Step], location: &[At]) -> bool {
    pattern.len() <= location.len() && pattern.iter().zip(location).all(|(s, a)| matches(s, a))
}

/// The tail of `pattern` below `location` when `pattern` selects something strictly inside it.
fn below<'p>(pattern: &'p [Step], location: &[At]) -> Option<&'p [Step]> {
    (pattern.len() > location.len() && pattern.iter().zip(location).all(|(s, a)| matches(s, a)))
        .then(|| &pattern[location.len()..])
}

// ---------------------------------------------------------------------------------------------
// Field groups

fn is_requested(
    name: &str,
    group: &FieldGroup,
    requested: &Requested,
    keywords: &[String],
) -> bool {
    let by_fields = requested.fields.iter().flatten().map(|f| f.trim()).any(|asked| {
        asked.eq_ignore_ascii_case(name)
            || group.fields.iter().any(|path| {
                path.trim() == asked
                    || parse_path(path).zip(parse_path(asked)).is_some_and(|(p, a)| p == a)
                    || matches!(parse_path(path).as_deref().and_then(<[Step]>::last),
                                Some(Step::Field(last)) if last == asked)
            })
    });
    let by_intent = group.fields.iter().any(|path| {
        let path = path.to_lowercase();
        keywords.iter().any(|k| path.contains(k.as_str()))
    });
    by_fields || by_intent
}

/// Deletes the paths of the opt-in groups the call did not ask for; returns the names of those
/// that removed something.
fn drop_groups(
    value: &mut Value,
    groups: &BTreeMap<String, FieldGroup>,
    requested: &Requested,
) -> Vec<String> {
    if !matches!(value, Value::Object(_) | Value::Array(_)) {
        return Vec::new();
    }
    let keywords: Vec<String> = requested
        .intent_keywords
        .iter()
        .map(|k| k.trim().to_lowercase())
        .filter(|k| !k.is_empty())
        .collect();
    let dropped = |name: &str, g: &FieldGroup| {
        !g.default_include && !is_requested(name, g, requested, &keywords)
    };
    let kept = group_paths(groups, |name, g| !dropped(name, g));
    let dropped: Vec<(&String, Vec<Vec<Step>>)> = groups
        .iter()
        .filter(|(name, g)| dropped(name, g))
        .map(|(name, g)| (name, g.fields.iter().filter_map(|f| parse_path(f)).collect()))
        .collect();
    // A dry run first, so that two groups naming one path are both reported.
    let names = dropped
        .iter()
        .filter(|(_, paths)| {
            paths.iter().any(|p| remove(value, p, &mut Vec::new(), &kept, false) > 0)
        })
        .map(|(name, _)| (*name).clone())
        .collect();
    for (_, paths) in &dropped {
        for path in paths {
            remove(value, path, &mut Vec::new(), &kept, true);
        }
    }
    names
}

/// Deletes what `path` selects in `value` (at `location`), sparing what `kept` selects; returns
/// how many values were deleted or pruned. With `apply = false`, only counts.
fn remove(
    value: &mut Value,
    path: &[Step],
    location: &mut Vec<At>,
    kept: &[Vec<Step>],
    apply: bool,
) -> usize {
    let Some((step, rest)) = path.split_first() else { return 0 };
    let children: Vec<At> = match (step, &*value) {
        (Step::Field(name), Value::Object(map)) if map.contains_key(name) => {
            vec![At::Key(name.clone())]
        }
        (Step::Index(i), Value::Array(items)) if *i < items.len() => vec![At::Index(*i)],
        (Step::Every, Value::Array(items)) => (0..items.len()).map(At::Index).collect(),
        (Step::Every, Value::Object(map)) => map.keys().cloned().map(At::Key).collect(),
        _ => return 0,
    };
    let mut count = 0;
    // Back to front, so removing an array element does not shift the ones still to visit.
    for at in children.into_iter().rev() {
        location.push(at.clone());
        if rest.is_empty() {
            if !kept.iter().any(|k| covers(k, location)) {
                count += 1;
                let inside: Vec<&[Step]> = kept.iter().filter_map(|k| below(k, location)).collect();
                if apply && inside.is_empty() {
                    delete(value, &at);
                } else if apply {
                    if let Some(child) = child_mut(value, &at) {
                        *child = retain(child, &inside);
                    }
                }
            }
        } else if let Some(child) = child_mut(value, &at) {
            count += remove(child, rest, location, kept, apply);
        }
        location.pop();
    }
    count
}

fn child_mut<'v>(value: &'v mut Value, at: &At) -> Option<&'v mut Value> {
    match (value, at) {
        (Value::Object(map), At::Key(key)) => map.get_mut(key),
        (Value::Array(items), At::Index(i)) => items.get_mut(*i),
        _ => None,
    }
}

fn delete(value: &mut Value, at: &At) {
    match (value, at) {
        (Value::Object(map), At::Key(key)) => {
            map.remove(key);
        }
        (Value::Array(items), At::Index(i)) if *i < items.len() => {
            items.remove(*i);
        }
        _ => {}
    }
}

/// Only the parts of `value` that `paths` select, in their places.
fn retain(value: &Value, paths: &[&[Step]]) -> Value {
    if paths.iter().any(|p| p.is_empty()) {
        return value.clone();
    }
    let tails = |at: &At| -> Vec<&[Step]> {
        paths.iter().filter(|p| matches(&p[0], at)).map(|p| &p[1..]).collect()
    };
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, child) in map {
                let inner = tails(&At::Key(key.clone()));
                if !inner.is_empty() {
                    out.insert(key.clone(), retain(child, &inner));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .filter_map(|(i, child)| {
                    let inner = tails(&At::Index(i));
                    (!inner.is_empty()).then(|| retain(child, &inner))
                })
                .collect(),
        ),
        _ => Value::Null,
    }
}

// ---------------------------------------------------------------------------------------------
// The cap

/// Bytes of the compact JSON of a string, escapes included, as serde_json writes it.
fn string_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// Bytes of the compact JSON of `value`, without writing it.
fn json_len(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(b) => 4 + usize::from(!b),
        Value::Number(n) => n.to_string().len(),
        Value::String(s) => string_len(s),
        Value::Array(items) => {
            2 + items.iter().map(json_len).sum::<usize>() + items.len().saturating_sub(1)
        }
        Value::Object(map) => {
            2 + map.iter().map(|(k, v)| string_len(k) + 1 + json_len(v)).sum::<usize>()
                + map.len().saturating_sub(1)
        }
    }
}

/// How far the current cutting phase may go.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Arrays keep an item, strings [`MIN_STRING_BYTES`].
    Gentle,
    /// Arrays that hold no protected field may go empty.
    Unprotected,
    /// Anything may go empty.
    All,
}

/// A place that can still be cut, and its size.
struct Candidate {
    location: Vec<At>,
    size: usize,
    /// Items (of an array) or bytes (of a string) the cut must leave.
    floor: usize,
}

fn collect(
    value: &Value,
    location: &mut Vec<At>,
    phase: Phase,
    protected: &[Vec<Step>],
    out: &mut Vec<Candidate>,
) -> usize {
    let size = match value {
        Value::Array(items) => {
            let mut size = 2 + items.len().saturating_sub(1);
            for (i, item) in items.iter().enumerate() {
                location.push(At::Index(i));
                size += collect(item, location, phase, protected, out);
                location.pop();
            }
            let may_empty = match phase {
                Phase::Gentle => false,
                // Emptying it would take away every occurrence of a protected field.
                Phase::Unprotected => !protected.iter().any(|p| {
                    p.len() >= location.len()
                        && p.iter().zip(location.iter()).all(|(s, a)| matches(s, a))
                }),
                Phase::All => true,
            };
            let floor = usize::from(!may_empty);
            if items.len() > floor {
                out.push(Candidate { location: location.clone(), size, floor });
            }
            size
        }
        Value::Object(map) => {
            let mut size = 2 + map.len().saturating_sub(1);
            for (key, child) in map {
                location.push(At::Key(key.clone()));
                size += string_len(key) + 1 + collect(child, location, phase, protected, out);
                location.pop();
            }
            size
        }
        Value::String(s) => {
            let size = string_len(s);
            let floor = if phase == Phase::Gentle { MIN_STRING_BYTES } else { 0 };
            // Worth cutting only if it can shrink past its marker.
            if s.len() > floor + 32 {
                out.push(Candidate { location: location.clone(), size, floor });
            }
            size
        }
        other => json_len(other),
    };
    size
}

/// The largest candidate; among equals the first collected (children before their array).
fn largest<'c>(
    candidates: impl DoubleEndedIterator<Item = &'c Candidate>,
) -> Option<&'c Candidate> {
    candidates.rev().max_by_key(|c| c.size)
}

/// What to cut next for `excess` bytes: the largest candidate — but when it is an array whose
/// last item alone is larger than the excess, a cut inside that item (its largest candidate), so
/// that one long diff is trimmed instead of dropped with its whole item.
fn pick<'c>(candidates: &'c [Candidate], value: &Value, excess: usize) -> Option<&'c Candidate> {
    let mut best = largest(candidates.iter())?;
    loop {
        let Some(Value::Array(items)) = node(value, &best.location) else { return Some(best) };
        let Some(last) = items.last() else { return Some(best) };
        // Items already cut to their names stay while another item has more to give: cut
        // inside the largest of those.
        let index = if is_slim(last) {
            match (0..items.len())
                .filter(|&i| !is_slim(&items[i]))
                .max_by_key(|&i| json_len(&items[i]))
            {
                Some(i) => i,
                None => return Some(best),
            }
        } else if json_len(last) < excess {
            return Some(best);
        } else {
            items.len() - 1
        };
        let mut item = best.location.clone();
        item.push(At::Index(index));
        let inside = candidates
            .iter()
            .filter(|c| c.location.len() > item.len() && c.location.starts_with(&item));
        match largest(inside) {
            Some(inner) => best = inner,
            None => return Some(best),
        }
    }
}

fn node<'v>(value: &'v Value, location: &[At]) -> Option<&'v Value> {
    location.iter().try_fold(value, |v, at| match (v, at) {
        (Value::Object(map), At::Key(key)) => map.get(key),
        (Value::Array(items), At::Index(i)) => items.get(*i),
        _ => None,
    })
}

fn node_mut<'v>(value: &'v mut Value, location: &[At]) -> Option<&'v mut Value> {
    location.iter().try_fold(value, |v, at| child_mut(v, at))
}

/// `issues[3].body`; `result` for the root.
fn display(location: &[At]) -> String {
    let mut out = String::new();
    for at in location {
        match at {
            At::Key(key) if out.is_empty() => out.push_str(key),
            At::Key(key) => {
                out.push('.');
                out.push_str(key);
            }
            At::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    if out.is_empty() {
        "result".to_owned()
    } else {
        out
    }
}

#[derive(Debug)]
enum Cut {
    Items {
        from: usize,
        to: usize,
    },
    Bytes {
        from: usize,
        to: usize,
    },
    /// Of `of` items, the last `slimmed` kept only what names them.
    Slimmed {
        of: usize,
        slimmed: usize,
    },
}

/// What one cut did to a node.
enum Shrunk {
    /// Items dropped from the end: (before, after).
    Items(usize, usize),
    /// A string cut: (bytes before, bytes kept).
    Bytes(usize, usize),
    /// Items from the end cut to what names them: (items, how many were cut this round).
    Slimmed(usize, usize),
}

/// The keys that name an item of a list — what the agent's next call passes on: a commit's
/// `sha`, an issue's `number`, a file's `path`. A list cut to fit keeps these of every item it
/// can before it drops items whole: in recorded sessions agents read the oldest commit of a
/// page as often as the newest.
const NAMING_KEYS: &[&str] =
    &["sha", "number", "id", "path", "filename", "name", "key", "tag_name", "login"];

fn is_naming(key: &str, value: &Value) -> bool {
    NAMING_KEYS.contains(&key) && !value.is_object() && !value.is_array()
}

/// Whether `item` is an object holding naming keys only (one a cut left, or born so).
fn is_slim(item: &Value) -> bool {
    matches!(item, Value::Object(map) if !map.is_empty() && map.iter().all(|(k, v)| is_naming(k, v)))
}

/// Cuts an object to its naming keys; the bytes freed (0 when it has none, or nothing else).
fn slim(item: &mut Value) -> usize {
    let Value::Object(map) = item else { return 0 };
    let names = map.iter().any(|(k, v)| is_naming(k, v));
    let more = map.iter().any(|(k, v)| !is_naming(k, v));
    if !names || !more {
        return 0;
    }
    let before = json_len(item);
    if let Value::Object(map) = item {
        map.retain(|k, v| is_naming(k, v));
    }
    before - json_len(item)
}

/// Cuts `node` by about `excess` bytes, leaving at least `floor` items whole or bytes: a list's
/// items from the end first lose all but their naming keys, then go; `None` if nothing could.
fn shrink(node: &mut Value, excess: usize, floor: usize) -> Option<Shrunk> {
    match node {
        Value::Array(items) => {
            let before = items.len();
            let mut freed = 0;
            let mut slimmed = 0;
            for item in items.iter_mut().skip(floor).rev() {
                if freed >= excess {
                    break;
                }
                let f = slim(item);
                if f > 0 {
                    freed += f;
                    slimmed += 1;
                }
            }
            if slimmed > 0 {
                return Some(Shrunk::Slimmed(before, slimmed));
            }
            // After the first item, stop before one that is larger than what is left to free:
            // the next round may cut inside it instead (see `pick`).
            while let Some(last) = items.last().filter(|_| items.len() > floor && freed < excess) {
                let len = json_len(last) + 1;
                if freed > 0 && len > excess - freed {
                    break;
                }
                items.pop();
                freed += len;
            }
            (items.len() < before).then_some(Shrunk::Items(before, items.len()))
        }
        Value::String(s) => {
            let before = s.len();
            let target_json = string_len(s).saturating_sub(excess + 24);
            let mut keep = 0;
            let mut json = 2;
            for (i, c) in s.char_indices() {
                let mut buf = [0u8; 4];
                let w = string_len(c.encode_utf8(&mut buf)) - 2;
                if i >= floor && json + w > target_json {
                    break;
                }
                json += w;
                keep = i + c.len_utf8();
            }
            if keep >= before {
                return None;
            }
            let marker = format!("…[+{} bytes]", before - keep);
            s.truncate(keep);
            s.push_str(&marker);
            (s.len() < before).then_some(Shrunk::Bytes(before, keep))
        }
        _ => None,
    }
}

/// Cuts `value` until its compact JSON fits `limit` bytes; the note and whether anything was cut,
/// or `None` if it already fit.
fn cap(
    value: &mut Value,
    limit: usize,
    max_kb: f64,
    protected: &[Vec<Step>],
) -> Option<(String, bool)> {
    if json_len(value) <= limit {
        return None;
    }
    let mut cuts: Vec<(String, Cut)> = Vec::new();
    let mut record = |path: String, cut: Cut| {
        let same = |old: &Cut| std::mem::discriminant(old) == std::mem::discriminant(&cut);
        if let Some((_, old)) = cuts.iter_mut().find(|(p, old)| *p == path && same(old)) {
            match (old, cut) {
                (Cut::Items { to, .. }, Cut::Items { to: new, .. })
                | (Cut::Bytes { to, .. }, Cut::Bytes { to: new, .. }) => *to = new,
                (Cut::Slimmed { slimmed, .. }, Cut::Slimmed { slimmed: more, .. }) => {
                    *slimmed += more;
                }
                (old, new) => *old = new,
            }
        } else {
            cuts.push((path, cut));
        }
    };
    let mut size = json_len(value);
    'phases: for phase in [Phase::Gentle, Phase::Unprotected, Phase::All] {
        for _ in 0..MAX_CUT_ROUNDS {
            if size <= limit {
                break 'phases;
            }
            let mut candidates = Vec::new();
            size = collect(value, &mut Vec::new(), phase, protected, &mut candidates);
            if size <= limit {
                break 'phases;
            }
            let Some(best) = pick(&candidates, value, size - limit) else {
                continue 'phases;
            };
            let (location, floor) = (best.location.clone(), best.floor);
            let node = node_mut(value, &location).expect("a collected location exists");
            match shrink(node, size - limit, floor) {
                Some(Shrunk::Items(from, to)) => {
                    record(display(&location), Cut::Items { from, to })
                }
                Some(Shrunk::Bytes(from, to)) => {
                    record(display(&location), Cut::Bytes { from, to })
                }
                Some(Shrunk::Slimmed(of, slimmed)) => {
                    record(display(&location), Cut::Slimmed { of, slimmed })
                }
                None => continue 'phases,
            }
            size = json_len(value);
        }
    }
    let kb = if max_kb.fract() == 0.0 { format!("{max_kb:.0}") } else { format!("{max_kb}") };
    if cuts.is_empty() {
        // Only small scalars and keys: nothing that can be cut without inventing a format.
        return Some((
            format!("{} KiB, over the {kb} KiB cap: nothing to cut", size.div_ceil(1024)),
            false,
        ));
    }
    let mut parts: Vec<String> = cuts
        .iter()
        .take(MAX_CUTS_NAMED)
        .map(|(path, cut)| match cut {
            Cut::Items { from, to } => format!("{path} {from} → {to} items"),
            Cut::Bytes { from, to } => format!("{path} {from} → {to} bytes"),
            Cut::Slimmed { of, slimmed } => format!(
                "{path}: the last {slimmed} of {of} items only by what names them (sha, number, \
                 id, path, name; read one with its own call, or ask for fewer per page)"
            ),
        })
        .collect();
    if cuts.len() > MAX_CUTS_NAMED {
        parts.push(format!("{} more", cuts.len() - MAX_CUTS_NAMED));
    }
    let mut note = format!("cut to {kb} KiB: {}", parts.join(", "));
    if size > limit {
        note.push_str(&format!(" (still {} KiB)", size.div_ceil(1024)));
    }
    Some((note, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_len_is_the_compact_length() {
        let v = json!({"a": [1, 2.5, -3, null, true, false], "é\"\n": "x\u{1}\t\\/ü", "o": {}});
        assert_eq!(json_len(&v), v.to_string().len());
    }

    #[test]
    fn paths_parse_like_the_projection_module() {
        assert_eq!(parse_path("body"), Some(vec![Step::Field("body".into())]));
        assert_eq!(
            parse_path("$.files[*].patch"),
            Some(vec![Step::Field("files".into()), Step::Every, Step::Field("patch".into())])
        );
        assert_eq!(parse_path("[*]['a b']"), Some(vec![Step::Every, Step::Field("a b".into())]));
        assert_eq!(parse_path("a[1]"), Some(vec![Step::Field("a".into()), Step::Index(1)]));
        assert_eq!(parse_path("a[x]"), None);
        assert_eq!(parse_path("a["), None);
        assert_eq!(parse_path("$"), None);
    }

    #[test]
    fn token_estimate_counts_non_ascii_characters() {
        assert_eq!(estimate_text_tokens(""), 0);
        assert_eq!(estimate_text_tokens("abcd"), 1);
        assert_eq!(estimate_text_tokens("abcde"), 2);
        assert_eq!(estimate_text_tokens("日本語"), 3);
        assert_eq!(estimate_tokens(&json!({"a": 1})), 2); // {"a":1} = 7 bytes
    }
}
