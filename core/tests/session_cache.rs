//! The session cache, rule by rule: TTL with injected times, LRU eviction, canonical arguments,
//! control arguments, invalidation by qualified and local names, errors never cached, references,
//! unchanged re-fetches, and fail-fast with its reset.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use quiver_core::session_cache::{
    is_control_argument, is_unproductive, ttl_of, CallKey, Reference, SessionCache,
};
use quiver_core::{ToolErrorKind, ToolResult, ToolValueModel};
use serde_json::{json, Value};

fn key(tool: &str, args: Value) -> CallKey {
    CallKey::new(tool, &args, None)
}

fn ok(n: u64) -> ToolResult {
    ToolResult::from_json(json!({"number": n, "title": format!("issue {n}")}))
}

const S: fn(u64) -> Duration = Duration::from_secs;

#[test]
fn a_hit_only_within_the_ttl() {
    let mut cache = SessionCache::new(8);
    let t0 = Instant::now();
    let k = key("github.get_issue", json!({"number": 7}));
    let stored = cache.put(&k, ok(7), t0).unwrap();
    assert_eq!(stored.unchanged_for, None);

    let hit = cache.get(&k, t0 + S(29), Some(S(30))).expect("fresh at 29 s");
    assert_eq!(*hit.result, ok(7));
    assert_eq!(hit.reference, stored.reference);
    assert_eq!(hit.age, S(29));
    assert!(cache.get(&k, t0 + S(30), Some(S(30))).is_none(), "stale at the TTL");
    assert!(cache.get(&k, t0 + S(1), Some(Duration::ZERO)).is_none(), "TTL 0 never hits");
    assert!(cache.get(&k, t0 + S(1), None).is_none(), "no TTL never hits");
    // A clock that went backwards reads as age 0, not a panic.
    assert_eq!(cache.get(&k, t0, Some(S(30))).unwrap().age, Duration::ZERO);
}

#[test]
fn the_ttl_comes_from_the_value_model() {
    let mut model = ToolValueModel::default();
    assert_eq!(ttl_of(&model), None);
    model.cost_model.freshness_ttl_s = Some(120);
    assert_eq!(ttl_of(&model), Some(S(120)));
}

#[test]
fn least_recently_used_is_evicted_at_capacity() {
    let mut cache = SessionCache::new(2);
    let t0 = Instant::now();
    let ttl = Some(S(60));
    let (a, b, c) =
        (key("g.t", json!({"n": 1})), key("g.t", json!({"n": 2})), key("g.t", json!({"n": 3})));
    cache.put(&a, ok(1), t0);
    cache.put(&b, ok(2), t0);
    assert!(cache.get(&a, t0, ttl).is_some(), "a is now the most recently used");
    cache.put(&c, ok(3), t0);
    assert_eq!(cache.len(), 2);
    assert!(cache.get(&b, t0, ttl).is_none(), "b was the least recently used");
    assert!(cache.get(&a, t0, ttl).is_some());
    assert!(cache.get(&c, t0, ttl).is_some());

    let mut none = SessionCache::new(0);
    assert!(none.put(&a, ok(1), t0).is_some(), "a reference is still handed out");
    assert!(none.is_empty() && none.get(&a, t0, ttl).is_none());
}

#[test]
fn argument_order_does_not_matter_at_any_depth() {
    assert_eq!(key("g.t", json!({"a": 1, "b": 2})), key("g.t", json!({"b": 2, "a": 1})));
    assert_eq!(
        key("g.t", json!({"q": {"y": [1, {"d": 0, "c": 1}], "x": null}})),
        key("g.t", json!({"q": {"x": null, "y": [1, {"c": 1, "d": 0}]}}))
    );
    assert_eq!(key("g.t", json!({"a": 1, "b": 2})).arguments(), r#"{"a":1,"b":2}"#);
    // What is not the same call stays apart.
    assert_ne!(key("g.t", json!({"a": [1, 2]})), key("g.t", json!({"a": [2, 1]})));
    assert_ne!(key("g.t", json!({"a": 1})), key("g.u", json!({"a": 1})));
    assert_ne!(key("g.t", json!({"a": 1})), key("g.t", json!({"a": 1.0})));
    assert_ne!(key("g.t", json!({"a": 1})), key("g.t", json!({"a": 1, "b": null})));

    let mut cache = SessionCache::new(4);
    let t0 = Instant::now();
    let r = cache.put(&key("g.t", json!({"a": 1, "b": 2})), ok(1), t0).unwrap().reference;
    let hit = cache.get(&key("g.t", json!({"b": 2, "a": 1})), t0 + S(1), Some(S(5))).unwrap();
    assert_eq!(hit.reference, r);
}

#[test]
fn control_arguments_are_left_out_of_the_key_unless_the_tool_declares_them() {
    let plain_schema = json!({"type": "object", "properties": {"number": {"type": "integer"}}});
    let jira_schema =
        json!({"type": "object", "properties": {"jql": {}, "fields": {"type": "array"}}});
    let with = json!({"number": 7, "_confirm": true, "fields": ["body"]});
    let without = json!({"number": 7});

    // `_`-prefixed keys are the host's, always.
    assert_eq!(
        CallKey::new("g.t", &with, Some(&plain_schema)),
        CallKey::new("g.t", &without, Some(&plain_schema))
    );
    assert_eq!(CallKey::new("g.t", &with, Some(&plain_schema)).arguments(), r#"{"number":7}"#);
    // A tool that declares `fields` (Jira's search) gets different results for different fields.
    let jira = |fields: Value| {
        CallKey::new(
            "jira.search_issues",
            &json!({"jql": "x", "fields": fields}),
            Some(&jira_schema),
        )
    };
    assert_ne!(jira(json!(["summary"])), jira(json!(["story points"])));
    // Unknown schema: `fields` stays, only `_` keys go.
    assert_eq!(key("g.t", with.clone()).arguments(), r#"{"fields":["body"],"number":7}"#);
    // Only top-level keys are control arguments.
    assert_eq!(key("g.t", json!({"q": {"_x": 1}})).arguments(), r#"{"q":{"_x":1}}"#);

    assert!(is_control_argument("_confirm", false) && is_control_argument("_meta", true));
    assert!(is_control_argument("fields", false) && !is_control_argument("fields", true));
    assert!(!is_control_argument("number", false));
}

#[test]
fn invalidation_by_qualified_and_local_names() {
    let t0 = Instant::now();
    let fill = || {
        let mut cache = SessionCache::new(16);
        for tool in ["github.get_issue", "github.list_issues", "gitlab.get_issue", "Read"] {
            for n in 1..=2 {
                cache.put(&key(tool, json!({"n": n})), ok(n), t0);
            }
        }
        cache
    };

    let mut cache = fill();
    assert_eq!(cache.invalidate(&["github.get_issue".to_owned()]), 2);
    assert_eq!(cache.len(), 6);
    assert!(cache.get(&key("github.get_issue", json!({"n": 1})), t0, Some(S(9))).is_none());
    assert!(cache.get(&key("gitlab.get_issue", json!({"n": 1})), t0, Some(S(9))).is_some());

    // A local name matches the tool in every provider…
    let mut cache = fill();
    assert_eq!(cache.invalidate(&["get_issue"]), 4);
    assert!(cache.get(&key("github.list_issues", json!({"n": 1})), t0, Some(S(9))).is_some());
    // …unless scoped to the provider of the tool that invalidates.
    let mut cache = fill();
    assert_eq!(cache.invalidate_from("github.add_issue_comment", &["get_issue", "list_issues"]), 4);
    assert!(cache.get(&key("gitlab.get_issue", json!({"n": 2})), t0, Some(S(9))).is_some());
    // Unqualified tools (agent built-ins) match by their name; a suffix is not a match.
    let mut cache = fill();
    assert_eq!(cache.invalidate(&["Read", "issue", "github.get"]), 2);
    assert_eq!(cache.invalidate(&["nothing.here"]), 0);
}

#[test]
fn errors_are_never_cached_and_do_not_replace_a_good_result() {
    let mut cache = SessionCache::new(4);
    let t0 = Instant::now();
    let k = key("github.get_issue", json!({"number": 9}));
    assert!(cache.put(&k, ToolResult::error(ToolErrorKind::NotFound, "no #9"), t0).is_none());
    assert!(cache.is_empty());
    let r = cache.put(&k, ok(9), t0).unwrap().reference;
    assert!(cache.put(&k, ToolResult::error(ToolErrorKind::Upstream, "502"), t0 + S(1)).is_none());
    assert_eq!(cache.get(&k, t0 + S(2), Some(S(10))).unwrap().reference, r);
}

#[test]
fn references_are_unique_and_stable() {
    let mut cache = SessionCache::new(2);
    let t0 = Instant::now();
    let mut seen = HashSet::new();
    for n in 1..=5 {
        let r = cache.put(&key("g.t", json!({"n": n})), ok(n), t0).unwrap().reference;
        assert!(seen.insert(r), "{r} handed out twice");
    }
    assert_eq!(seen, (1..=5).map(Reference).collect());
    assert_eq!(Reference(7).to_string(), "r7");

    // The same call, the same content: the reference stays, and the repeat is recognised.
    let k = key("g.t", json!({"n": 5}));
    let hit = cache.get(&k, t0 + S(3), Some(S(60))).unwrap();
    assert_eq!(hit.reference, Reference(5));
    assert_eq!(hit.hint(), "same result as r5 (3 s ago), served from the session cache");
    let again = cache.put(&k, ok(5), t0 + S(40)).unwrap();
    assert_eq!(again.reference, Reference(5));
    assert_eq!(again.unchanged_for, Some(S(40)));
    assert_eq!(
        again.unchanged_hint().as_deref(),
        Some("same result as r5 (first seen 40 s ago); nothing changed since")
    );
    // Re-storing refreshed it: fresh again for a full TTL from t0 + 40 s.
    assert_eq!(cache.get(&k, t0 + S(41), Some(S(5))).unwrap().age, S(1));
    // New content: a new reference, and no "unchanged".
    let changed = cache.put(&k, ok(55), t0 + S(50)).unwrap();
    assert_eq!((changed.reference, changed.unchanged_for), (Reference(6), None));
    assert_eq!(changed.unchanged_hint(), None);
}

#[test]
fn unproductive_results() {
    let structured = |v: Value| ToolResult::from_json(v);
    assert!(is_unproductive(&ToolResult::error(ToolErrorKind::Timeout, "slow")));
    assert!(is_unproductive(&structured(json!(null))));
    assert!(is_unproductive(&structured(json!([]))));
    assert!(is_unproductive(&structured(
        json!({"total_count": 0, "incomplete_results": false, "items": []})
    )));
    assert!(is_unproductive(&ToolResult::text("  \n")));

    assert!(!is_unproductive(&structured(json!([{"n": 1}]))));
    assert!(!is_unproductive(&structured(json!({"items": [], "labels": []}))), "two arrays");
    assert!(!is_unproductive(&structured(json!({"number": 7}))), "no array at all");
    assert!(!is_unproductive(&structured(json!(0))));
    assert!(!is_unproductive(&ToolResult::text("done")));
}

#[test]
fn fail_fast_stops_the_n_plus_first_identical_unproductive_call() {
    let mut cache = SessionCache::new(8);
    let search = key("github.search_issues", json!({"q": "retry logic"}));
    let other = key("github.search_issues", json!({"q": "backoff"}));
    let empty = ToolResult::from_json(json!({"total_count": 0, "items": []}));

    for i in 0..3 {
        assert_eq!(cache.should_stop(&search, Some(3)), None, "call {} runs", i + 1);
        cache.record_result(&search, &empty);
    }
    let hint = cache.should_stop(&search, Some(3)).expect("the 4th identical call is stopped");
    assert!(hint.contains("github.search_issues") && hint.contains("3 times"), "{hint}");
    assert_eq!(cache.unproductive_count(&search), 3);
    // Other arguments, no limit, or a limit of 0: nothing stops.
    assert_eq!(cache.should_stop(&other, Some(3)), None);
    assert_eq!(cache.should_stop(&search, None), None);
    assert_eq!(cache.should_stop(&search, Some(0)), None);
    // Errors count as unproductive too, through record_outcome.
    cache.record_outcome(&other, false);
    assert!(cache.should_stop(&other, Some(1)).is_some());
}

#[test]
fn a_productive_call_or_an_invalidation_resets_the_count() {
    let mut cache = SessionCache::new(8);
    let poll = key("gitlab.list_pipelines", json!({"ref": "main"}));
    cache.record_outcome(&poll, false);
    cache.record_outcome(&poll, false);
    assert!(cache.should_stop(&poll, Some(2)).is_some());
    cache.record_result(&poll, &ToolResult::from_json(json!([{"id": 1, "status": "running"}])));
    assert_eq!(cache.unproductive_count(&poll), 0);
    assert_eq!(cache.should_stop(&poll, Some(2)), None);

    // A mutation that invalidates the tool may make the empty answer stale: counting restarts.
    cache.record_outcome(&poll, false);
    cache.record_outcome(&poll, false);
    cache.invalidate_from("gitlab.retry_job", &["list_pipelines"]);
    assert_eq!(cache.should_stop(&poll, Some(2)), None);
}

#[test]
fn fail_fast_counters_are_bounded() {
    // Capacity 0 caches nothing but still counts (for at least 16 distinct calls).
    let mut cache = SessionCache::new(0);
    for n in 0..100 {
        cache.record_outcome(&key("g.t", json!({"n": n})), false);
    }
    assert_eq!(cache.unproductive_count(&key("g.t", json!({"n": 99}))), 1);
    assert_eq!(cache.unproductive_count(&key("g.t", json!({"n": 0}))), 0, "forgotten");
}
