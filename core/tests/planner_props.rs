//! Properties of the pre-fetch planner on random instances: optimal against brute force on small
//! ones (with prerequisites and free calls), at least half the fractional bound when the fallback is
//! forced on large ones, and never a mutating or `speculate = false` call.

use proptest::prelude::*;
use quiver_core::planner::{plan, Candidate, DeclineReason, Plan, PlanMethod, PlannerOptions};
use quiver_core::value_model::{
    CostModel, FollowUpLink, SideEffectClass, ToolValueModel, ValueClass,
};

const CLASSES: [ValueClass; 4] =
    [ValueClass::Critical, ValueClass::Supporting, ValueClass::Optional, ValueClass::AuditOnly];

/// One generated candidate: probability, class, typical KiB, prerequisite (an earlier item).
#[derive(Debug, Clone)]
struct Item {
    p: f64,
    class: ValueClass,
    kb: f64,
    requires: Option<usize>,
    side: SideEffectClass,
    speculate: Option<bool>,
}

/// Owned candidate data for a whole instance.
struct Instance {
    links: Vec<FollowUpLink>,
    models: Vec<ToolValueModel>,
    requires: Vec<Option<String>>,
}

fn tool(i: usize) -> String {
    format!("t.tool{i:05}")
}

fn build(items: &[Item]) -> Instance {
    Instance {
        links: items
            .iter()
            .enumerate()
            .map(|(i, it)| FollowUpLink {
                tool: tool(i),
                probability: it.p,
                projection: None,
                projection_arg: None,
            })
            .collect(),
        models: items
            .iter()
            .map(|it| ToolValueModel {
                value_class: it.class,
                side_effect_class: it.side,
                speculate: it.speculate,
                cost_model: CostModel { typical_kb: it.kb, ..CostModel::default() },
                ..ToolValueModel::default()
            })
            .collect(),
        requires: items.iter().map(|it| it.requires.map(tool)).collect(),
    }
}

fn run<'a>(inst: &'a Instance, opts: &PlannerOptions) -> Plan<'a> {
    let candidates: Vec<Candidate<'a>> = (0..inst.links.len())
        .map(|i| Candidate {
            from: "s.source",
            link: &inst.links[i],
            model: &inst.models[i],
            requires: inst.requires[i].as_deref(),
        })
        .collect();
    plan(&["s.source"], &candidates, &[] as &[&str], opts)
}

fn value(it: &Item) -> f64 {
    it.p * it.class.score()
}

fn cost(it: &Item, tokens_per_kb: f64) -> u64 {
    if it.class == ValueClass::AuditOnly {
        0
    } else {
        ((it.kb * tokens_per_kb).ceil() as u64).max(1)
    }
}

/// The optimum over every subset closed under prerequisites and within the budget.
fn brute_force(items: &[Item], budget: u64, tokens_per_kb: f64) -> f64 {
    let n = items.len();
    let mut best = 0.0f64;
    for mask in 0u32..(1 << n) {
        let inside = |i: usize| mask & (1 << i) != 0;
        let closed = (0..n).all(|i| !inside(i) || items[i].requires.is_none_or(inside));
        let total: u64 =
            (0..n).filter(|&i| inside(i)).map(|i| cost(&items[i], tokens_per_kb)).sum();
        if closed && total <= budget {
            best = best.max((0..n).filter(|&i| inside(i)).map(|i| value(&items[i])).sum());
        }
    }
    best
}

/// The admitted calls are within the budget, come with their prerequisites, and add up.
fn check_feasible(items: &[Item], plan: &Plan<'_>, budget: u32) {
    assert!(plan.total_cost <= budget, "cost {} over budget {budget}", plan.total_cost);
    let admitted: Vec<&str> = plan.admitted.iter().map(|c| c.tool).collect();
    for call in &plan.admitted {
        let i: usize = call.tool["t.tool".len()..].parse().unwrap();
        if let Some(r) = items[i].requires {
            assert!(admitted.contains(&tool(r).as_str()), "{} admitted without {}", call.tool, r);
        }
    }
    let sum: f64 = plan.admitted.iter().map(|c| c.value).sum();
    assert!((sum - plan.total_value).abs() < 1e-9);
    let cost: u32 = plan.admitted.iter().map(|c| c.cost_tokens).sum();
    assert_eq!(cost, plan.total_cost);
}

fn small_item(with_prerequisites: bool) -> impl Strategy<Value = (f64, usize, u32, Option<usize>)> {
    let requires = if with_prerequisites {
        prop::option::weighted(0.5, 0..12usize).boxed()
    } else {
        Just(None).boxed()
    };
    (0.05f64..=1.0, 0..4usize, 1u32..=40, requires)
}

fn small_instance() -> impl Strategy<Value = (Vec<Item>, u32)> {
    prop::bool::ANY
        .prop_flat_map(|prereq| (prop::collection::vec(small_item(prereq), 0..=12), 0u32..=150))
        .prop_map(|(raw, budget)| {
            let items = raw
                .into_iter()
                .enumerate()
                .map(|(i, (p, class, kb, requires))| Item {
                    p,
                    class: CLASSES[class],
                    kb: f64::from(kb),
                    // An earlier item only: prerequisites form a forest.
                    requires: requires.filter(|&r| r < i),
                    side: SideEffectClass::ReadOnly,
                    speculate: None,
                })
                .collect();
            (items, budget)
        })
}

fn large_instance() -> impl Strategy<Value = (Vec<Item>, u32)> {
    (prop::collection::vec((0.05f64..=1.0, 0..3usize, 0.5f64..=20.0), 200..=3000), 1000u32..=20_000)
        .prop_map(|(raw, budget)| {
            let items = raw
                .into_iter()
                .map(|(p, class, kb)| Item {
                    p,
                    class: CLASSES[class],
                    kb,
                    requires: None,
                    side: SideEffectClass::ReadOnly,
                    speculate: None,
                })
                .collect();
            (items, budget)
        })
}

/// The fractional (LP) bound over the items that fit alone.
fn lp_bound(items: &[Item], budget: u64, tokens_per_kb: f64) -> f64 {
    let mut vw: Vec<(f64, u64)> = items
        .iter()
        .map(|it| (value(it), cost(it, tokens_per_kb)))
        .filter(|&(_, w)| w <= budget)
        .collect();
    vw.sort_by(|a, b| (b.0 / b.1 as f64).total_cmp(&(a.0 / a.1 as f64)));
    let (mut room, mut bound) = (budget, 0.0);
    for (v, w) in vw {
        if w <= room {
            room -= w;
            bound += v;
        } else {
            bound += v * room as f64 / w as f64;
            break;
        }
    }
    bound
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// (1) Small instances: the planner's value is the brute-force optimum.
    #[test]
    fn small_instances_are_solved_optimally((items, budget) in small_instance()) {
        let inst = build(&items);
        let opts = PlannerOptions { budget_tokens: budget, tokens_per_kb: 1.0, ..PlannerOptions::default() };
        let plan = run(&inst, &opts);
        check_feasible(&items, &plan, budget);
        let optimum = brute_force(&items, u64::from(budget), 1.0);
        prop_assert!((plan.total_value - optimum).abs() < 1e-9,
            "planner {} vs optimum {}: {:?}", plan.total_value, optimum, plan);
        prop_assert_eq!(plan.method, PlanMethod::Exact);
        prop_assert_eq!(plan.admitted.len() + plan.declined.len(), items.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// (2) Large instances with the fallback forced: at least half the fractional bound, and at
    /// least half the exact optimum.
    #[test]
    fn the_fallback_is_within_half_of_the_bound((items, budget) in large_instance()) {
        let inst = build(&items);
        let exact_opts = PlannerOptions { budget_tokens: budget, ..PlannerOptions::default() };
        let forced_opts = PlannerOptions { exact_limit: 0, ..exact_opts.clone() };
        let forced = run(&inst, &forced_opts);
        check_feasible(&items, &forced, budget);
        prop_assert_eq!(forced.method, PlanMethod::ApproxHalf);
        let bound = lp_bound(&items, u64::from(budget), 256.0);
        prop_assert!(forced.total_value >= 0.5 * bound - 1e-9,
            "fallback {} < ½ × bound {}", forced.total_value, bound);

        let exact = run(&inst, &exact_opts);
        check_feasible(&items, &exact, budget);
        prop_assert_eq!(exact.method, PlanMethod::Exact);
        prop_assert!(exact.total_value <= bound + 1e-9);
        prop_assert!(exact.total_value >= forced.total_value - 1e-9);
        prop_assert!(forced.total_value >= 0.5 * exact.total_value - 1e-9);
    }

    /// (3) A mutating, unknown or `speculate = false` call is never admitted, however likely,
    /// valuable or cheap — nor anything that requires it.
    #[test]
    fn unsafe_calls_are_never_admitted(
        (mut items, budget) in small_instance(),
        p in -1.0f64..=2.0,
        class in 0..4usize,
        kb in 0.0f64..=3.0,
        unsafe_kind in 0..4usize,
        dependent in prop::bool::ANY,
        exact_limit in prop::sample::select(vec![0usize, 100_000]),
    ) {
        let (side, speculate) = [
            (SideEffectClass::MutatesExternal, Some(true)),
            (SideEffectClass::MutatesLocal, None),
            (SideEffectClass::Indeterminate, Some(true)),
            (SideEffectClass::Pure, Some(false)),
        ][unsafe_kind];
        let bad = items.len();
        items.push(Item { p, class: CLASSES[class], kb, requires: None, side, speculate });
        if dependent {
            items.push(Item {
                p: 1.0,
                class: ValueClass::Critical,
                kb: 0.0,
                requires: Some(bad),
                side: SideEffectClass::Pure,
                speculate: Some(true),
            });
        }
        let inst = build(&items);
        let opts = PlannerOptions {
            budget_tokens: budget,
            tokens_per_kb: 1.0,
            exact_limit,
            ..PlannerOptions::default()
        };
        let plan = run(&inst, &opts);
        let bad_tool = tool(bad);
        prop_assert!(plan.admitted.iter().all(|c| c.tool != bad_tool));
        let declined = plan.declined.iter().find(|d| d.tool == bad_tool).unwrap();
        prop_assert_eq!(declined.reason, DeclineReason::NotSpeculatable);
        if dependent {
            let dep = tool(bad + 1);
            prop_assert!(plan.admitted.iter().all(|c| c.tool != dep));
        }
    }
}

/// The intent boost by its definition: lower-case both sides and search.
fn naive_boost(model: &ToolValueModel, keywords: &[String]) -> f64 {
    let keywords: Vec<String> =
        keywords.iter().map(|k| k.trim().to_lowercase()).filter(|k| !k.is_empty()).collect();
    if keywords.is_empty() {
        return 1.0;
    }
    let sum: f64 = model
        .field_groups
        .values()
        .filter(|g| {
            !g.default_include
                && g.fields.iter().any(|f| {
                    let f = f.to_lowercase();
                    keywords.iter().any(|k| f.contains(k.as_str()))
                })
        })
        .map(|g| if g.estimated_value.is_finite() { g.estimated_value.max(0.0) } else { 0.0 })
        .sum();
    (1.0 + sum).min(2.5)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// (4) The intent boost (word-at-a-time on ASCII fields) agrees with its definition, on short
    /// and long fields, mixed case, non-ASCII text and keywords that end where a field does.
    #[test]
    fn intent_boost_matches_its_definition(
        groups in prop::collection::vec(
            (prop::collection::vec("[a-zA-Z_.*\\[\\]é ]{0,150}", 0..4), 0.0f64..1.0, prop::bool::ANY),
            0..4,
        ),
        keywords in prop::collection::vec(" ?[a-zA-Z_.é]{0,9} ?", 0..4),
    ) {
        let field_groups = groups
            .into_iter()
            .enumerate()
            .map(|(i, (fields, estimated_value, default_include))| {
                (format!("g{i}"), quiver_core::value_model::FieldGroup { fields, estimated_value, default_include })
            })
            .collect();
        let model = ToolValueModel { field_groups, ..ToolValueModel::default() };
        let expected = naive_boost(&model, &keywords);
        let got = quiver_core::planner::intent_boost(&model, &keywords);
        prop_assert!((got - expected).abs() < 1e-12, "{got} vs {expected} for {keywords:?} in {model:?}");
    }
}
