//! The per-session call cache: identical calls served from memory within their freshness TTL,
//! short references (`r7`) to earlier results, cross-tool invalidation, and fail-fast for
//! identical calls that keep coming back empty.
//!
//! It is the first stage of the session pipeline (tool call → **cache** → provider → projection →
//! …). It stores the provider's result *before* response projection, so one cached result serves
//! calls that ask for different field groups.
//!
//! **Identity of a call** ([`CallKey`]): the qualified tool name and the canonical JSON of the
//! arguments — object keys sorted at every depth, no whitespace — less the *control arguments*
//! the host reads and the provider never sees:
//! - every top-level key that starts with `_` (`_confirm`, `_meta`…): the host's reserved
//!   namespace;
//! - `fields`, the response-projection argument ([`crate::response_projection`]), **unless the
//!   tool's input schema declares a `fields` property** — Jira's `search_issues` and
//!   `update_issue` take a real `fields` argument that changes what the service returns, so
//!   stripping it there would serve one call's result to another. When the schema is unknown,
//!   `fields` stays in the key: a needless miss is cheap, a wrong hit is not.
//!
//! Nothing else is normalised: `1` and `1.0`, `null` and an absent key, differ.
//!
//! **Freshness**: [`SessionCache::get`] answers only while the entry is younger than the TTL the
//! caller passes (the tool's `cost_model.freshness_ttl_s`, see [`ttl_of`]); a TTL of zero or none
//! never hits. Results are stored whatever the TTL (errors never are), because an entry also lets
//! [`SessionCache::put`] notice that a re-fetched result is identical to the previous one and say
//! "nothing changed since r7" instead of sending the same payload again (the paper's near-ref
//! hint for polling calls).
//!
//! **Bounds**: at most `capacity` entries, least recently used evicted first (a hit or a store
//! counts as a use); fail-fast counters are bounded the same way (by `max(capacity, 16)`). All
//! operations are O(log n). Time is passed in (`now: Instant`), never read: the module is pure.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use quiver_core::session_cache::{CallKey, SessionCache};
//! use quiver_core::ToolResult;
//! use serde_json::json;
//!
//! let mut cache = SessionCache::new(64);
//! let t0 = Instant::now();
//! let key = CallKey::new("github.get_issue", &json!({"repo": "r", "owner": "o", "number": 7}), None);
//! let stored = cache.put(&key, ToolResult::from_json(json!({"number": 7})), t0).unwrap();
//! assert_eq!(stored.reference.to_string(), "r1");
//!
//! // The same call with its arguments in another order, 12 s later, within a 30 s TTL.
//! let again = CallKey::new("github.get_issue", &json!({"number": 7, "owner": "o", "repo": "r"}), None);
//! let ttl = Some(Duration::from_secs(30));
//! let hit = cache.get(&again, t0 + Duration::from_secs(12), ttl).unwrap();
//! assert_eq!(hit.hint(), "same result as r1 (12 s ago), served from the session cache");
//! assert!(cache.get(&again, t0 + Duration::from_secs(31), ttl).is_none());
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::tool::ToolResult;
use crate::value_model::ToolValueModel;

/// The response-projection argument, stripped from cache keys unless the tool declares it.
pub const FIELDS_ARGUMENT: &str = "fields";

/// Fail-fast counters are kept for at least this many distinct calls, whatever the cache capacity.
const MIN_COUNTER_CAPACITY: usize = 16;

/// Whether the tool's input schema declares a `fields` property of its own, in which case `fields`
/// is a real argument of the tool and not the host's projection request.
pub fn tool_declares_fields(input_schema: &Value) -> bool {
    input_schema.get("properties").and_then(|p| p.get(FIELDS_ARGUMENT)).is_some()
}

/// Whether a top-level argument is read by the host and never reaches the provider: keys that start
/// with `_`, and `fields` when the tool does not declare it (`tool_declares_fields == false`).
pub fn is_control_argument(name: &str, tool_declares_fields: bool) -> bool {
    name.starts_with('_') || (name == FIELDS_ARGUMENT && !tool_declares_fields)
}

/// The identity of a call: qualified tool name + canonical arguments (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallKey {
    tool: String,
    arguments: String,
}

impl CallKey {
    /// The key of calling `tool` (qualified, e.g. `github.get_issue`) with `arguments`.
    ///
    /// `input_schema` is the tool's input schema when known: it decides whether `fields` is a
    /// control argument (stripped) or the tool's own (kept). `None` keeps `fields` in the key.
    pub fn new(tool: &str, arguments: &Value, input_schema: Option<&Value>) -> Self {
        let declares_fields = input_schema.is_none_or(tool_declares_fields);
        let mut out = String::new();
        match arguments {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> =
                    map.iter().filter(|(k, _)| !is_control_argument(k, declares_fields)).collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                write_object(&mut out, entries);
            }
            other => write_canonical(&mut out, other),
        }
        Self { tool: tool.to_owned(), arguments: out }
    }

    /// The qualified tool name.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The canonical arguments: compact JSON, object keys sorted, control arguments left out.
    pub fn arguments(&self) -> &str {
        &self.arguments
    }
}

impl fmt::Display for CallKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.tool, self.arguments)
    }
}

/// Compact JSON with object keys sorted at every depth, independent of whether serde_json keeps
/// insertion order (its `preserve_order` feature may be switched on by any crate in a build).
fn write_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            write_object(out, entries);
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(out, item);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn write_object(out: &mut String, entries: Vec<(&String, &Value)>) {
    out.push('{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(key.clone()).to_string());
        out.push(':');
        write_canonical(out, value);
    }
    out.push('}');
}

/// A short, session-unique name of a stored result, shown to the model as `r7`.
///
/// References count up from `r1` and are never reused within a cache. Re-storing an identical
/// result for the same call keeps its reference; a different result gets a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reference(pub u64);

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// A fresh cached result.
#[derive(Debug, Clone)]
pub struct Hit {
    /// The stored result, as the provider returned it (before projection).
    pub result: Arc<ToolResult>,
    /// Its reference.
    pub reference: Reference,
    /// Time since it was stored (or last re-stored unchanged).
    pub age: Duration,
}

impl Hit {
    /// The one line that tells the model it got a repeat:
    /// `same result as r7 (12 s ago), served from the session cache`.
    pub fn hint(&self) -> String {
        format!(
            "same result as {} ({} ago), served from the session cache",
            self.reference,
            format_age(self.age)
        )
    }
}

/// What [`SessionCache::put`] did with a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    /// The reference of the stored result.
    pub reference: Reference,
    /// `Some(age)` when the result is identical to the one already stored for this call, first
    /// seen `age` ago: the reference was kept and the caller may answer with
    /// [`Stored::unchanged_hint`] instead of the full payload.
    pub unchanged_for: Option<Duration>,
}

impl Stored {
    /// `same result as r7 (first seen 12 s ago); nothing changed since` when the result did not
    /// change, `None` otherwise.
    pub fn unchanged_hint(&self) -> Option<String> {
        self.unchanged_for.map(|age| {
            format!(
                "same result as {} (first seen {} ago); nothing changed since",
                self.reference,
                format_age(age)
            )
        })
    }
}

/// `850 ms`, `12 s`, `3 min`, `2 h`.
fn format_age(age: Duration) -> String {
    let secs = age.as_secs();
    if secs == 0 {
        format!("{} ms", age.as_millis())
    } else if secs < 120 {
        format!("{secs} s")
    } else if secs < 2 * 3600 {
        format!("{} min", secs / 60)
    } else {
        format!("{} h", secs / 3600)
    }
}

/// The freshness TTL of a tool's effective model: `cost_model.freshness_ttl_s` as a duration.
pub fn ttl_of(model: &ToolValueModel) -> Option<Duration> {
    model.cost_model.freshness_ttl_s.map(Duration::from_secs)
}

/// Whether a result is worth nothing to the model, for fail-fast: an error; a structured value that
/// is `null`, an empty array, or an object whose only array is empty (`{"total_count": 0,
/// "items": []}`); or, without a structured value, text that is blank.
pub fn is_unproductive(result: &ToolResult) -> bool {
    if result.is_error {
        return true;
    }
    match &result.structured {
        Some(Value::Null) => true,
        Some(Value::Array(items)) => items.is_empty(),
        Some(Value::Object(map)) => {
            let mut arrays = map.values().filter_map(Value::as_array);
            matches!((arrays.next(), arrays.next()), (Some(only), None) if only.is_empty())
        }
        Some(_) => false,
        None => result.text_content().trim().is_empty(),
    }
}

#[derive(Debug)]
struct Entry {
    result: Arc<ToolResult>,
    reference: Reference,
    /// When the current content was last stored (a fresh fetch, identical or not).
    stored_at: Instant,
    /// When this content was first stored for the key.
    first_seen: Instant,
}

/// A map that forgets its least recently used key past `capacity`. O(log n) per operation.
#[derive(Debug)]
struct Lru<K, V> {
    capacity: usize,
    map: HashMap<K, (V, u64)>,
    /// use tick → key; the smallest tick is the least recently used.
    order: BTreeMap<u64, K>,
    tick: u64,
}

impl<K: Clone + Eq + Hash, V> Lru<K, V> {
    fn new(capacity: usize) -> Self {
        Self { capacity, map: HashMap::new(), order: BTreeMap::new(), tick: 0 }
    }

    fn touch(&mut self, key: &K) -> Option<&mut V> {
        let (value, used) = self.map.get_mut(key)?;
        self.order.remove(used);
        self.tick += 1;
        *used = self.tick;
        self.order.insert(self.tick, key.clone());
        Some(value)
    }

    fn peek(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|(v, _)| v)
    }

    /// Inserts or replaces `key` as the most recently used; evicts the least recently used when
    /// full. A capacity of 0 stores nothing.
    fn insert(&mut self, key: K, value: V) {
        if self.capacity == 0 {
            return;
        }
        if let Some((_, used)) = self.map.remove(&key) {
            self.order.remove(&used);
        } else if self.map.len() >= self.capacity {
            if let Some((_, oldest)) = self.order.pop_first() {
                self.map.remove(&oldest);
            }
        }
        self.tick += 1;
        self.order.insert(self.tick, key.clone());
        self.map.insert(key, (value, self.tick));
    }

    fn remove(&mut self, key: &K) -> Option<V> {
        let (value, used) = self.map.remove(key)?;
        self.order.remove(&used);
        Some(value)
    }

    fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) -> usize {
        let before = self.map.len();
        let order = &mut self.order;
        self.map.retain(|k, (_, used)| {
            let kept = keep(k);
            if !kept {
                order.remove(used);
            }
            kept
        });
        before - self.map.len()
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

/// One session's cache of call results and fail-fast counters. See the module docs.
#[derive(Debug)]
pub struct SessionCache {
    entries: Lru<CallKey, Entry>,
    /// Consecutive unproductive outcomes of each identical call.
    unproductive: Lru<CallKey, u32>,
    next_reference: u64,
}

impl SessionCache {
    /// A cache of at most `capacity` results (0 caches nothing but still counts fail-fast).
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: Lru::new(capacity),
            unproductive: Lru::new(capacity.max(MIN_COUNTER_CAPACITY)),
            next_reference: 1,
        }
    }

    /// The number of stored results (fresh or not).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no result is stored.
    pub fn is_empty(&self) -> bool {
        self.entries.len() == 0
    }

    /// The stored result of `key` if it is younger than `ttl` at `now`. `None` or a zero TTL never
    /// hits. A hit counts as a use for the LRU order.
    pub fn get(&mut self, key: &CallKey, now: Instant, ttl: Option<Duration>) -> Option<Hit> {
        let ttl = ttl.filter(|t| !t.is_zero())?;
        let entry = self.entries.peek(key)?;
        let age = now.saturating_duration_since(entry.stored_at);
        if age >= ttl {
            return None;
        }
        let entry = self.entries.touch(key)?;
        Some(Hit { result: Arc::clone(&entry.result), reference: entry.reference, age })
    }

    /// Stores `result` for `key` at `now` and returns its reference; `None` for an error result,
    /// which is never stored (an entry already there stays).
    ///
    /// When the result equals the one already stored for `key`, the reference is kept, the entry
    /// becomes fresh again, and [`Stored::unchanged_for`] says since when it has not changed.
    pub fn put(&mut self, key: &CallKey, result: ToolResult, now: Instant) -> Option<Stored> {
        if result.is_error {
            return None;
        }
        if let Some(entry) = self.entries.touch(key) {
            if *entry.result == result {
                entry.stored_at = now;
                let unchanged_for = Some(now.saturating_duration_since(entry.first_seen));
                return Some(Stored { reference: entry.reference, unchanged_for });
            }
        }
        let reference = Reference(self.next_reference);
        self.next_reference += 1;
        let entry = Entry { result: Arc::new(result), reference, stored_at: now, first_seen: now };
        self.entries.insert(key.clone(), entry);
        Some(Stored { reference, unchanged_for: None })
    }

    /// Forgets the stored result of exactly this call.
    pub fn remove(&mut self, key: &CallKey) -> bool {
        self.entries.remove(key).is_some()
    }

    /// Drops every entry — and every fail-fast counter — of the named tools; returns how many
    /// entries went. A qualified name (`github.get_issue`) matches that tool only; a
    /// provider-local one (`get_issue`) matches the tool of that name in every provider (use
    /// [`SessionCache::invalidate_from`] to stay within the caller's provider).
    pub fn invalidate<S: AsRef<str>>(&mut self, tools: &[S]) -> usize {
        let names: Vec<&str> = tools.iter().map(AsRef::as_ref).collect();
        let hit = |key: &CallKey| names.iter().any(|n| names_tool(n, &key.tool));
        self.unproductive.retain(|k| !hit(k));
        self.entries.retain(|k| !hit(k))
    }

    /// [`SessionCache::invalidate`] for a value model's `invalidates` list: provider-local names
    /// are qualified with the provider of `caller` (`github.create_issue` invalidating
    /// `list_issues` drops `github.list_issues`, not `gitlab.list_issues`).
    pub fn invalidate_from<S: AsRef<str>>(&mut self, caller: &str, tools: &[S]) -> usize {
        self.invalidate(&qualified_invalidations(caller, tools))
    }

    /// Records whether a call that ran was productive (see [`is_unproductive`]). An unproductive
    /// outcome adds one to the call's count; a productive one resets it.
    pub fn record_outcome(&mut self, key: &CallKey, productive: bool) {
        if productive {
            self.unproductive.remove(key);
        } else {
            let count = self.unproductive.touch(key).map_or(0, |c| *c);
            self.unproductive.insert(key.clone(), count.saturating_add(1));
        }
    }

    /// [`SessionCache::record_outcome`] judged by [`is_unproductive`].
    pub fn record_result(&mut self, key: &CallKey, result: &ToolResult) {
        self.record_outcome(key, !is_unproductive(result));
    }

    /// How many times in a row this identical call came back unproductive.
    pub fn unproductive_count(&self, key: &CallKey) -> u32 {
        self.unproductive.peek(key).copied().unwrap_or(0)
    }

    /// A hint that stops the call when it already came back unproductive `fail_fast_after_n`
    /// times in a row (so the n+1-th identical call is stopped); `None` (or 0) never stops.
    pub fn should_stop(&self, key: &CallKey, fail_fast_after_n: Option<u32>) -> Option<String> {
        let n = fail_fast_after_n.filter(|n| *n > 0)?;
        fail_fast_hint(key.tool(), self.unproductive_count(key), n)
    }
}

/// The hint that stops a call of `tool` that came back unproductive `count` times in a row, when
/// that reaches `fail_fast_after_n`.
pub fn fail_fast_hint(tool: &str, count: u32, fail_fast_after_n: u32) -> Option<String> {
    (fail_fast_after_n > 0 && count >= fail_fast_after_n).then(|| {
        format!(
            "not run: {tool} with these arguments came back empty or failed {count} times in a \
             row; change the arguments or try another tool"
        )
    })
}

/// A value model's `invalidates` list as qualified names: provider-local names are qualified with
/// the provider of `caller` (`github.create_issue` invalidating `list_issues` names
/// `github.list_issues`, not `gitlab.list_issues`); a caller without a provider keeps them as
/// they are.
pub fn qualified_invalidations<S: AsRef<str>>(caller: &str, tools: &[S]) -> Vec<String> {
    let provider = caller.split_once('.').map(|(provider, _)| provider);
    tools
        .iter()
        .map(|t| match provider {
            Some(provider) if !t.as_ref().contains('.') => format!("{provider}.{}", t.as_ref()),
            _ => t.as_ref().to_owned(),
        })
        .collect()
}

/// Whether the invalidation name `name` (qualified or provider-local) names `tool`.
fn names_tool(name: &str, tool: &str) -> bool {
    if name == tool {
        return true;
    }
    !name.contains('.') && tool.split_once('.').is_some_and(|(_, local)| local == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lru_evicts_the_least_recently_used_and_counts_touches() {
        let mut lru = Lru::new(2);
        lru.insert("a", 1);
        lru.insert("b", 2);
        lru.touch(&"a");
        lru.insert("c", 3);
        assert_eq!((lru.peek(&"a"), lru.peek(&"b"), lru.peek(&"c")), (Some(&1), None, Some(&3)));
        lru.insert("a", 10); // replacing does not evict
        assert_eq!(lru.len(), 2);
        assert_eq!(lru.order.len(), 2);
        assert_eq!(lru.retain(|k| *k != "a"), 1);
        assert_eq!(lru.order.len(), 1);
        let mut none = Lru::new(0);
        none.insert("a", 1);
        assert_eq!(none.len(), 0);
    }

    #[test]
    fn canonical_arguments_sort_keys_at_every_depth() {
        let key =
            CallKey::new("t.x", &json!({"b": {"z": 1, "y": [{"d": 1, "c": "é\n"}]}, "a": 1}), None);
        assert_eq!(key.arguments(), r#"{"a":1,"b":{"y":[{"c":"é\n","d":1}],"z":1}}"#);
        assert_eq!(key.to_string(), r#"t.x({"a":1,"b":{"y":[{"c":"é\n","d":1}],"z":1}})"#);
        assert_eq!(CallKey::new("t.x", &json!(null), None).arguments(), "null");
    }

    #[test]
    fn ages_read_naturally() {
        assert_eq!(format_age(Duration::from_millis(850)), "850 ms");
        assert_eq!(format_age(Duration::from_secs(12)), "12 s");
        assert_eq!(format_age(Duration::from_secs(185)), "3 min");
        assert_eq!(format_age(Duration::from_secs(3 * 3600 + 5)), "3 h");
    }
}
