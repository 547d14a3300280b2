//! Unit tests of the planner: one per rule, reason and method.

use std::collections::BTreeMap;

use super::*;
use crate::value_model::{CostModel, FieldGroup, SideEffectClass};

/// A read-only model of `class` whose typical response is `kb` KiB.
fn model(class: ValueClass, kb: f64) -> ToolValueModel {
    ToolValueModel {
        value_class: class,
        side_effect_class: SideEffectClass::ReadOnly,
        cost_model: CostModel { typical_kb: kb, ..CostModel::default() },
        ..ToolValueModel::default()
    }
}

fn link(tool: &str, probability: f64) -> FollowUpLink {
    FollowUpLink { tool: tool.into(), probability, projection: None, projection_arg: None }
}

/// Owned candidate data; `candidates()` borrows it.
struct Spec {
    from: String,
    link: FollowUpLink,
    model: ToolValueModel,
    requires: Option<String>,
}

fn spec(from: &str, tool: &str, p: f64, model: ToolValueModel) -> Spec {
    Spec { from: from.into(), link: link(tool, p), model, requires: None }
}

fn candidates(specs: &[Spec]) -> Vec<Candidate<'_>> {
    specs
        .iter()
        .map(|s| Candidate {
            from: &s.from,
            link: &s.link,
            model: &s.model,
            requires: s.requires.as_deref(),
        })
        .collect()
}

fn options(budget: u32) -> PlannerOptions {
    PlannerOptions { budget_tokens: budget, ..PlannerOptions::default() }
}

const NO_INTENT: &[&str] = &[];

fn run<'a>(specs: &'a [Spec], recent: &[&str], opts: &PlannerOptions) -> Plan<'a> {
    plan(recent, &candidates(specs), NO_INTENT, opts)
}

fn admitted<'a>(p: &Plan<'a>) -> Vec<&'a str> {
    p.admitted.iter().map(|c| c.tool).collect()
}

fn reason_of(p: &Plan<'_>, tool: &str) -> Option<DeclineReason> {
    p.declined.iter().find(|d| d.tool == tool).map(|d| d.reason)
}

#[test]
fn value_is_probability_times_class_score_and_cost_is_predicted_tokens() {
    let specs = [spec("a.x", "a.y", 0.5, model(ValueClass::Supporting, 1.3))];
    let p = run(&specs, &["a.x"], &options(8000));
    assert_eq!(p.admitted.len(), 1);
    assert!((p.admitted[0].value - 0.5 * 0.6).abs() < 1e-12);
    assert_eq!(p.admitted[0].cost_tokens, 333); // ceil(1.3 × 256) = ceil(332.8)
    assert_eq!(p.admitted[0].probability, 0.5);
    assert_eq!(p.admitted[0].from, "a.x");
    assert_eq!(p.total_cost, 333);
    assert_eq!(p.method, PlanMethod::Exact);
}

#[test]
fn cost_is_at_least_one_token_and_audit_only_is_free() {
    assert_eq!(predicted_tokens(&model(ValueClass::Optional, 0.0), 256.0), 1);
    assert_eq!(predicted_tokens(&model(ValueClass::Optional, 0.001), 256.0), 1);
    assert_eq!(predicted_tokens(&model(ValueClass::AuditOnly, 50.0), 256.0), 0);
    // Free calls are admitted even with no budget at all.
    let specs = [
        spec("a.x", "a.todo", 0.9, model(ValueClass::AuditOnly, 50.0)),
        spec("a.x", "a.y", 0.9, model(ValueClass::Critical, 1.0)),
    ];
    let p = run(&specs, &[], &options(0));
    assert_eq!(admitted(&p), ["a.todo"]);
    assert_eq!(p.admitted[0].cost_tokens, 0);
    assert_eq!(reason_of(&p, "a.y"), Some(DeclineReason::OverBudget));
}

#[test]
fn intent_boost_counts_opt_in_groups_whose_fields_match() {
    let mut m = model(ValueClass::Supporting, 1.0);
    let group = |fields: &[&str], value: f64, include: bool| FieldGroup {
        fields: fields.iter().map(|f| (*f).to_owned()).collect(),
        estimated_value: value,
        default_include: include,
    };
    m.field_groups = BTreeMap::from([
        ("snippets".to_owned(), group(&["items[*].Snippet"], 0.4, false)),
        ("body".to_owned(), group(&["snippet_body"], 0.9, true)), // default-on: no boost
        ("debug".to_owned(), group(&["trace"], 0.3, false)),
    ]);
    let kw = |words: &[&str]| words.iter().map(|w| w.to_lowercase()).collect::<Vec<_>>();
    assert_eq!(intent_boost(&m, &kw(&[])), 1.0);
    assert!((intent_boost(&m, &kw(&["SNIPPET"])) - 1.4).abs() < 1e-12);
    assert!((intent_boost(&m, &kw(&["snippet", "trace"])) - 1.7).abs() < 1e-12);
    assert_eq!(intent_boost(&m, &kw(&["nothing"])), 1.0);
    // Capped at 2.5.
    for g in ["g1", "g2", "g3", "g4"] {
        m.field_groups.insert(g.into(), group(&["trace_extra"], 1.0, false));
    }
    assert_eq!(intent_boost(&m, &kw(&["trace"])), 2.5);

    // Through the planner: keywords are trimmed and lower-cased; blank ones are ignored.
    let specs =
        [Spec { from: "a.x".into(), link: link("a.y", 0.5), model: m.clone(), requires: None }];
    let p = plan(&["a.x"], &candidates(&specs), &["  Snippet ", ""], &options(8000));
    assert!((p.admitted[0].value - 0.5 * 0.6 * 1.4).abs() < 1e-12);
}

#[test]
fn cost_aware_halves_slow_and_paid_calls() {
    let opts = PlannerOptions { cost_aware: true, ..PlannerOptions::default() };
    let with = |latency: Option<u32>, dollars: Option<f64>| {
        let mut m = model(ValueClass::Critical, 1.0);
        m.cost_model.latency_ms_p50 = latency;
        m.cost_model.dollars = dollars;
        m
    };
    assert_eq!(cost_factor(&with(None, None), &opts), 1.0);
    assert_eq!(cost_factor(&with(Some(4999), Some(0.0999)), &opts), 1.0);
    assert_eq!(cost_factor(&with(Some(5000), None), &opts), 0.5);
    assert_eq!(cost_factor(&with(None, Some(0.10)), &opts), 0.5);
    assert_eq!(cost_factor(&with(Some(9000), Some(1.0)), &opts), 0.25);
    assert_eq!(cost_factor(&with(Some(9000), Some(1.0)), &PlannerOptions::default()), 1.0);

    // The fast call wins the budget only when cost-aware is on.
    let specs = [
        spec("a.x", "a.slow", 0.9, with(Some(8000), None)),
        spec("a.x", "a.fast", 0.6, with(None, None)),
    ];
    assert_eq!(admitted(&run(&specs, &[], &options(300))), ["a.slow"]);
    let on = PlannerOptions { budget_tokens: 300, ..opts };
    assert_eq!(admitted(&run(&specs, &[], &on)), ["a.fast"]);
}

#[test]
fn below_min_probability_is_declined() {
    let specs = [
        spec("a.x", "a.rare", 0.04, model(ValueClass::Critical, 1.0)),
        spec("a.x", "a.edge", 0.05, model(ValueClass::Critical, 1.0)),
        spec("a.x", "a.nan", f64::NAN, model(ValueClass::Critical, 1.0)),
    ];
    let p = run(&specs, &[], &options(8000));
    assert_eq!(admitted(&p), ["a.edge"]);
    assert_eq!(reason_of(&p, "a.rare"), Some(DeclineReason::BelowMinProbability));
    assert_eq!(reason_of(&p, "a.nan"), Some(DeclineReason::BelowMinProbability));
}

#[test]
fn self_loops_and_recent_calls_are_declined() {
    let specs = [
        spec("fs.read", "fs.read", 0.9, model(ValueClass::Critical, 1.0)),
        spec("fs.grep", "fs.glob", 0.9, model(ValueClass::Critical, 1.0)),
        spec("fs.grep", "fs.stat", 0.9, model(ValueClass::Critical, 1.0)),
    ];
    let p = run(&specs, &["fs.glob", "fs.grep"], &options(8000));
    assert_eq!(admitted(&p), ["fs.stat"]);
    assert_eq!(reason_of(&p, "fs.read"), Some(DeclineReason::SelfLoop));
    assert_eq!(reason_of(&p, "fs.glob"), Some(DeclineReason::RecentlyUsed));

    // A link that projects its arguments names another call of the same or a recent tool (a
    // directory, then a file in it): admitted.
    let projected = |from: &str, tool: &str| {
        let mut s = spec(from, tool, 0.9, model(ValueClass::Critical, 1.0));
        s.link.projection = Some("$.entries[*].path".into());
        s.link.projection_arg = Some("path".into());
        s
    };
    let specs = [projected("fs.read", "fs.read"), projected("fs.grep", "fs.glob")];
    let p = run(&specs, &["fs.glob", "fs.grep"], &options(8000));
    assert_eq!(admitted(&p), ["fs.glob", "fs.read"]);
}

#[test]
fn mutating_or_unknown_or_speculate_false_is_never_admitted() {
    let with = |side: SideEffectClass, speculate: Option<bool>| ToolValueModel {
        side_effect_class: side,
        speculate,
        ..model(ValueClass::Critical, 0.1)
    };
    let specs = [
        spec("a.x", "a.create", 1.0, with(SideEffectClass::MutatesExternal, Some(true))),
        spec("a.x", "a.write", 1.0, with(SideEffectClass::MutatesLocal, None)),
        spec("a.x", "a.bash", 1.0, with(SideEffectClass::Indeterminate, None)),
        spec("a.x", "a.pure_off", 1.0, with(SideEffectClass::Pure, Some(false))),
        spec("a.x", "a.pure", 0.5, with(SideEffectClass::Pure, None)),
        spec("a.x", "a.read", 0.5, with(SideEffectClass::ReadOnly, Some(true))),
    ];
    let p = run(&specs, &[], &options(1_000_000));
    assert_eq!(admitted(&p), ["a.pure", "a.read"]);
    for tool in ["a.create", "a.write", "a.bash", "a.pure_off"] {
        assert_eq!(reason_of(&p, tool), Some(DeclineReason::NotSpeculatable), "{tool}");
    }
}

#[test]
fn duplicate_links_keep_the_most_valuable() {
    let specs = [
        spec("a.list", "a.get", 0.3, model(ValueClass::Critical, 1.0)),
        spec("a.search", "a.get", 0.7, model(ValueClass::Critical, 1.0)),
        spec("a.other", "a.get", 0.7, model(ValueClass::Critical, 1.0)),
    ];
    let p = run(&specs, &[], &options(8000));
    assert_eq!(p.admitted.len(), 1);
    // Equal value and probability: the source first by name wins.
    assert_eq!((p.admitted[0].tool, p.admitted[0].from), ("a.get", "a.other"));
    let dups: Vec<_> = p.declined.iter().map(|d| (d.from, d.reason)).collect();
    assert_eq!(
        dups,
        [("a.list", DeclineReason::DuplicateLink), ("a.search", DeclineReason::DuplicateLink)]
    );
}

#[test]
fn over_budget_alone_or_with_prerequisites() {
    let mut specs = vec![
        spec("a.x", "a.huge", 0.9, model(ValueClass::Critical, 40.0)), // 10 240 tokens
        spec("a.x", "a.base", 0.9, model(ValueClass::Critical, 20.0)), // 5 120
        spec("a.x", "a.next", 0.9, model(ValueClass::Critical, 15.0)), // 3 840
    ];
    specs[2].requires = Some("a.base".into());
    let p = run(&specs, &[], &options(8000));
    assert_eq!(reason_of(&p, "a.huge"), Some(DeclineReason::OverBudget));
    assert_eq!(reason_of(&p, "a.next"), Some(DeclineReason::OverBudget));
    assert_eq!(admitted(&p), ["a.base"]);
}

#[test]
fn prerequisites_are_admitted_together_or_not_at_all() {
    // `a.detail` is worth much and cheap but needs `a.page`; the pair beats `a.alt`.
    let mut specs = vec![
        spec("a.x", "a.page", 0.5, model(ValueClass::Optional, 20.0)), // 5 120 tokens, 0.15
        spec("a.x", "a.detail", 0.9, model(ValueClass::Critical, 1.0)), // 256 tokens, 0.9
        spec("a.x", "a.alt", 0.9, model(ValueClass::Supporting, 20.0)), // 5 120 tokens, 0.54
    ];
    specs[1].requires = Some("a.page".into());
    let p = run(&specs, &[], &options(6000));
    assert_eq!(admitted(&p), ["a.detail", "a.page"]);
    assert_eq!(reason_of(&p, "a.alt"), Some(DeclineReason::NotSelected));
    // Make the prerequisite worthless-but-costly enough and the pair loses.
    specs[0].model.cost_model.typical_kb = 22.5; // 5 760 tokens: the pair no longer fits
    let p = run(&specs, &[], &options(6000));
    assert_eq!(admitted(&p), ["a.alt"]);
    assert_eq!(reason_of(&p, "a.detail"), Some(DeclineReason::OverBudget));
}

#[test]
fn a_prerequisite_among_recent_calls_is_satisfied() {
    let mut specs = vec![spec("a.x", "a.detail", 0.9, model(ValueClass::Critical, 1.0))];
    specs[0].requires = Some("a.page".into());
    let p = run(&specs, &["a.page"], &options(8000));
    assert_eq!(admitted(&p), ["a.detail"]);
}

#[test]
fn prerequisite_missing_declined_or_cyclic_declines_the_dependent() {
    let mut specs = vec![
        spec("a.x", "a.orphan", 0.9, model(ValueClass::Critical, 1.0)),
        spec(
            "a.x",
            "a.mut",
            0.9,
            ToolValueModel {
                side_effect_class: SideEffectClass::MutatesExternal,
                ..model(ValueClass::Critical, 1.0)
            },
        ),
        spec("a.x", "a.child", 0.9, model(ValueClass::Critical, 1.0)),
        spec("a.x", "a.grandchild", 0.9, model(ValueClass::Critical, 1.0)),
        spec("a.x", "a.c1", 0.9, model(ValueClass::Critical, 1.0)),
        spec("a.x", "a.c2", 0.9, model(ValueClass::Critical, 1.0)),
        spec("a.x", "a.me", 0.9, model(ValueClass::Critical, 1.0)),
        spec("a.x", "a.ok", 0.9, model(ValueClass::Critical, 1.0)),
    ];
    specs[0].requires = Some("a.nowhere".into());
    specs[2].requires = Some("a.mut".into());
    specs[3].requires = Some("a.child".into());
    specs[4].requires = Some("a.c2".into());
    specs[5].requires = Some("a.c1".into());
    specs[6].requires = Some("a.me".into());
    let p = run(&specs, &[], &options(8000));
    assert_eq!(admitted(&p), ["a.ok"]);
    assert_eq!(reason_of(&p, "a.mut"), Some(DeclineReason::NotSpeculatable));
    for tool in ["a.orphan", "a.child", "a.grandchild", "a.c1", "a.c2", "a.me"] {
        assert_eq!(reason_of(&p, tool), Some(DeclineReason::PrerequisiteDeclined), "{tool}");
    }
}

#[test]
fn a_free_call_follows_its_prerequisite() {
    let mut specs = vec![
        spec("a.x", "a.page", 0.9, model(ValueClass::Optional, 20.0)), // 5 120 tokens
        spec("a.x", "a.note", 0.9, model(ValueClass::AuditOnly, 1.0)),
        spec("a.x", "a.best", 0.9, model(ValueClass::Critical, 20.0)),
    ];
    specs[1].requires = Some("a.page".into());
    let p = run(&specs, &[], &options(6000));
    assert_eq!(admitted(&p), ["a.best"]);
    assert_eq!(reason_of(&p, "a.note"), Some(DeclineReason::PrerequisiteDeclined));
    let p = run(&specs, &[], &options(12_000));
    assert_eq!(admitted(&p), ["a.best", "a.page", "a.note"]);
}

#[test]
fn a_paid_call_may_require_a_free_one() {
    let mut specs = vec![
        spec("a.x", "a.todo", 0.9, model(ValueClass::AuditOnly, 1.0)),
        spec("a.x", "a.detail", 0.9, model(ValueClass::Critical, 1.0)),
    ];
    specs[1].requires = Some("a.todo".into());
    let p = run(&specs, &[], &options(8000));
    assert_eq!(admitted(&p), ["a.detail", "a.todo"]);
}

#[test]
fn not_selected_when_the_optimum_leaves_it_out() {
    // Density greedy takes `a`, skips `c` (no room), then takes `b`: 1.0. The optimum is `b` and
    // `c`: 1.1.
    let kb = |tokens: f64| tokens / 256.0;
    let specs = [
        spec("s.x", "s.a", 0.6, model(ValueClass::Critical, kb(500.0))),
        spec("s.x", "s.b", 0.4, model(ValueClass::Critical, kb(400.0))),
        spec("s.x", "s.c", 0.7, model(ValueClass::Critical, kb(600.0))),
    ];
    let p = run(&specs, &[], &options(1000));
    assert_eq!(admitted(&p), ["s.c", "s.b"]);
    assert_eq!(reason_of(&p, "s.a"), Some(DeclineReason::NotSelected));
    assert!((p.total_value - 1.1).abs() < 1e-12);
    assert_eq!(p.total_cost, 1000);
}

/// The regression the plain greedy fails: budget 100, a Critical call costing 100 and an Optional
/// one costing 1. Greedy by density takes only the Optional one.
#[test]
fn takes_the_critical_call_that_density_greedy_would_drop() {
    let opts =
        PlannerOptions { budget_tokens: 100, tokens_per_kb: 1.0, ..PlannerOptions::default() };
    let specs = [
        spec("a.x", "a.critical", 1.0, model(ValueClass::Critical, 100.0)),
        spec("a.x", "a.optional", 1.0, model(ValueClass::Optional, 1.0)),
    ];
    let p = run(&specs, &[], &opts);
    assert_eq!(admitted(&p), ["a.critical"]);
    assert_eq!(p.method, PlanMethod::Exact);
    assert_eq!(reason_of(&p, "a.optional"), Some(DeclineReason::NotSelected));
    // The fallback keeps the best single call too.
    let forced = PlannerOptions { exact_limit: 0, ..opts };
    let p = run(&specs, &[], &forced);
    assert_eq!(admitted(&p), ["a.critical"]);
    assert_eq!(p.method, PlanMethod::ApproxHalf);
}

#[test]
fn everything_that_fits_is_admitted_by_value() {
    let specs = [
        spec("a.x", "a.b", 0.5, model(ValueClass::Critical, 1.0)),
        spec("a.x", "a.a", 0.5, model(ValueClass::Critical, 1.0)),
        spec("a.x", "a.c", 0.9, model(ValueClass::Optional, 1.0)),
        spec("a.x", "a.d", 0.9, model(ValueClass::Critical, 1.0)),
    ];
    let p = run(&specs, &[], &PlannerOptions { exact_limit: 0, ..options(8000) });
    // Ties on value are ordered by tool name.
    assert_eq!(admitted(&p), ["a.d", "a.a", "a.b", "a.c"]);
    assert_eq!(p.method, PlanMethod::Exact);
    assert!(p.declined.is_empty());
}

#[test]
fn the_plan_does_not_depend_on_the_order_of_candidates() {
    let mut specs: Vec<Spec> = (0..30)
        .map(|i| {
            let class = [ValueClass::Critical, ValueClass::Supporting, ValueClass::Optional][i % 3];
            // Many equal densities, to exercise the tie-breaks.
            spec(&format!("s.from{}", i % 4), &format!("t.tool{}", i % 20), 0.5, model(class, 2.0))
        })
        .collect();
    let first = serde_json::to_value(run(&specs, &[], &options(3000))).unwrap();
    specs.reverse();
    let reversed = run(&specs, &[], &options(3000));
    let mut second = serde_json::to_value(&reversed).unwrap();
    // Declined keep input order; compare them as sets.
    let sort = |v: &mut serde_json::Value| {
        v["declined"].as_array_mut().unwrap().sort_by_key(|d| d.to_string());
    };
    let mut first = first;
    sort(&mut first);
    sort(&mut second);
    assert_eq!(first, second);
}

#[test]
fn the_plan_serializes_in_snake_case() {
    let specs = [
        spec("a.x", "a.y", 0.5, model(ValueClass::Critical, 1.0)),
        spec("a.x", "a.z", 0.01, model(ValueClass::Critical, 1.0)),
    ];
    let p = run(&specs, &[], &options(8000));
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["method"], "exact");
    assert_eq!(json["declined"][0]["reason"], "below_min_probability");
    assert_eq!(json["admitted"][0]["cost_tokens"], 256);
    for (reason, text) in [
        (DeclineReason::SelfLoop, "self_loop"),
        (DeclineReason::RecentlyUsed, "recently_used"),
        (DeclineReason::NotSpeculatable, "not_speculatable"),
        (DeclineReason::DuplicateLink, "duplicate_link"),
        (DeclineReason::OverBudget, "over_budget"),
        (DeclineReason::PrerequisiteDeclined, "prerequisite_declined"),
        (DeclineReason::NotSelected, "not_selected"),
    ] {
        assert_eq!(serde_json::to_value(reason).unwrap(), text);
    }
    assert_eq!(serde_json::to_value(PlanMethod::ApproxHalf).unwrap(), "approx_half");
    let opts: PlannerOptions = serde_json::from_str(r#"{"budget_tokens": 100}"#).unwrap();
    assert_eq!(opts, PlannerOptions { budget_tokens: 100, ..PlannerOptions::default() });
}

#[test]
fn an_empty_session_plans_nothing() {
    let p = run(&[], &[], &options(8000));
    assert!(p.admitted.is_empty() && p.declined.is_empty());
    assert_eq!((p.total_value, p.total_cost, p.method), (0.0, 0, PlanMethod::Exact));
}

#[test]
fn a_session_moves_a_link_by_what_the_agent_did() {
    assert_eq!(session_probability(0.4, 0, 0), 0.4);
    assert!((session_probability(0.5, 0, 2) - 0.25).abs() < 1e-9);
    assert!(session_probability(0.03, 2, 0) > 0.5);
    assert!(session_probability(0.03, 1, 0) < 0.5, "one call is not yet a habit");
    assert_eq!(session_probability(f64::NAN, 0, 0), 0.0);
}

#[test]
fn an_emptying_rate_window_raises_the_bar_until_only_the_agent_may_spend_it() {
    // A full window leaves the configured bar as it is.
    assert_eq!(rate_budget_probability(0.5, 1.0, 0.2), 0.5);
    // The bar only rises as the window empties.
    let bars: Vec<f64> =
        [1.0, 0.9, 0.5, 0.25, 0.21].iter().map(|&s| rate_budget_probability(0.5, s, 0.2)).collect();
    assert!(bars.windows(2).all(|w| w[0] < w[1]), "{bars:?}");
    assert!(bars[4] < 1.0 && bars[4] > 0.98, "{bars:?}");
    // At or below the reserve nothing is pre-fetched, however certain.
    assert!(rate_budget_probability(0.5, 0.2, 0.2) > 1.0);
    assert!(rate_budget_probability(0.0, 0.1, 0.2) > 1.0);
    // No reserve: the last request may still go to a certain follow-up, not to a likely one.
    assert!(rate_budget_probability(0.5, 0.01, 0.0) > 0.98);
    // Garbage in is no pre-fetch out, never a panic.
    assert!(rate_budget_probability(f64::NAN, f64::NAN, 0.2) > 1.0);
    assert_eq!(rate_budget_probability(1.0, 0.9, 0.2), 1.0);
}
