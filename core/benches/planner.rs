//! One planning run over N random candidates (N = 100, 1 000, 10 000), budget 8 000 tokens,
//! realistic cost models (typical 0.5–20 KiB), a tenth of them mutating, a few free bookkeeping
//! calls, duplicate targets, and two intent keywords. `with_prerequisites` adds prerequisite chains
//! to 5 % of the candidates.
//!
//! `vs_reference/{quiver,reference}/N` times this planner against the reference planner
//! (crates.io `devboy-format-pipeline` 0.35, `enrichment::build_plan`) on the same instances in the
//! same run. Both start from the same registry of value models — the recent tools' follow-up links
//! and each target's model — and both timings include turning it into candidates: the reference
//! does that inside `build_plan`, looking each target up by name; here it is the loop a host runs
//! before `plan`, over links whose targets were resolved when the registry was built. Both use 256 tokens
//! per KiB, the same minimum probability and the same intent keywords. They do not solve the same
//! problem: the reference ranks by value class per token, ignoring probability, admits greedily and
//! does not refuse tools with side effects; this planner maximises expected value exactly and never
//! admits a mutating call. Each plan's expected value (as this planner counts it, writes counted as
//! nothing) is printed beside the timings.
//!
//! The method that ran at each size is printed to stderr before the measurements.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use devboy_format_pipeline::adaptive_config::AdaptiveConfig;
use devboy_format_pipeline::enrichment as reference;
use quiver_core::planner::{intent_boost, plan, Candidate, Plan, PlanMethod, PlannerOptions};
use quiver_core::value_model::{
    CostModel, FieldGroup, FollowUpLink, SideEffectClass, ToolValueModel, ValueClass,
};

/// splitmix64: deterministic instances without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const SOURCES: [&str; 5] =
    ["github.search_issues", "github.list_pulls", "fs.grep", "fs.glob", "jira.search"];

struct Instance {
    links: Vec<FollowUpLink>,
    models: Vec<ToolValueModel>,
    from: Vec<&'static str>,
    requires: Vec<Option<String>>,
}

fn instance(n: usize, seed: u64, prerequisites: bool) -> Instance {
    let mut rng = Rng(seed);
    let mut inst =
        Instance { links: Vec::new(), models: Vec::new(), from: Vec::new(), requires: Vec::new() };
    let mut model_of: HashMap<String, usize> = HashMap::new();
    for _ in 0..n {
        let target = format!("prov{}.tool_{}", rng.below(8), rng.below(n as u64));
        // One model per tool, as in a registry: a target drawn again keeps the model it has.
        let known = model_of.get(&target).copied();
        let class = match rng.below(100) {
            0..=24 => ValueClass::Critical,
            25..=59 => ValueClass::Supporting,
            60..=94 => ValueClass::Optional,
            _ => ValueClass::AuditOnly,
        };
        let side = if rng.below(10) == 0 {
            SideEffectClass::MutatesExternal
        } else if rng.below(2) == 0 {
            SideEffectClass::Pure
        } else {
            SideEffectClass::ReadOnly
        };
        let field_groups = BTreeMap::from([
            (
                "must_have".to_owned(),
                FieldGroup {
                    fields: vec!["title".into(), "body".into()],
                    estimated_value: 0.9,
                    default_include: true,
                },
            ),
            (
                "debug".to_owned(),
                FieldGroup {
                    fields: vec!["items[*].snippet".into(), "trace".into()],
                    estimated_value: 0.3,
                    default_include: false,
                },
            ),
        ]);
        let model = ToolValueModel {
            value_class: class,
            side_effect_class: side,
            field_groups,
            cost_model: CostModel {
                typical_kb: 0.5 + rng.unit() * 19.5,
                latency_ms_p50: Some(50 + rng.below(8000) as u32),
                ..CostModel::default()
            },
            ..ToolValueModel::default()
        };
        let model = match known {
            Some(i) => inst.models[i].clone(),
            None => {
                model_of.insert(target.clone(), inst.models.len());
                model
            }
        };
        inst.models.push(model);
        inst.links.push(FollowUpLink {
            tool: target,
            probability: 0.01 + rng.unit() * 0.94,
            projection: None,
            projection_arg: None,
        });
        inst.from.push(SOURCES[rng.below(SOURCES.len() as u64) as usize]);
        let requires = (prerequisites && rng.below(20) == 0 && !inst.links.is_empty())
            .then(|| inst.links[rng.below(inst.links.len() as u64) as usize].tool.clone());
        inst.requires.push(requires);
    }
    inst
}

fn candidates(inst: &Instance) -> Vec<Candidate<'_>> {
    (0..inst.links.len())
        .map(|i| Candidate {
            from: inst.from[i],
            link: &inst.links[i],
            model: &inst.models[i],
            requires: inst.requires[i].as_deref(),
        })
        .collect()
}

const RECENT: [&str; 4] = ["github.search_issues", "fs.grep", "fs.glob", "jira.search"];
const INTENT: [&str; 2] = ["retry", "snippet"];

fn bench(c: &mut Criterion) {
    let options = PlannerOptions { budget_tokens: 8000, ..PlannerOptions::default() };
    for (name, prerequisites, sizes) in [
        ("plan", false, &[100usize, 1_000, 10_000][..]),
        ("plan_with_prerequisites", true, &[100usize, 1_000][..]),
    ] {
        let mut group = c.benchmark_group(name);
        for &n in sizes {
            let inst = instance(n, 0x5eed + n as u64, prerequisites);
            let cands = candidates(&inst);
            let p = plan(&RECENT, &cands, &INTENT, &options);
            eprintln!(
                "{name}/{n}: method {:?}, admitted {}, declined {}, value {:.3}, cost {}",
                p.method,
                p.admitted.len(),
                p.declined.len(),
                p.total_value,
                p.total_cost
            );
            group.bench_with_input(BenchmarkId::from_parameter(n), &cands, |b, cands| {
                b.iter(|| plan(black_box(&RECENT), black_box(cands), &INTENT, &options))
            });
        }
        group.finish();
    }
}

/// What a host holds: each tool's effective value model, and each tool's follow-up links with
/// their targets' models resolved when the registry was built (they change only when the registry
/// or the configuration does, not per turn).
struct Registry {
    models: HashMap<String, ToolValueModel>,
    /// Per source tool: its links, each with its target's model.
    follow_ups: HashMap<String, Vec<(FollowUpLink, ToolValueModel)>>,
    /// The most candidates a turn can have: every source's links together.
    max_candidates: usize,
}

impl Registry {
    fn of(inst: &Instance) -> Self {
        let mut models: HashMap<String, ToolValueModel> = HashMap::new();
        for (i, link) in inst.links.iter().enumerate() {
            models.entry(link.tool.clone()).or_insert_with(|| inst.models[i].clone());
        }
        for (i, link) in inst.links.iter().enumerate() {
            let source = models.entry(inst.from[i].to_owned()).or_default();
            source.follow_up.push(link.clone());
        }
        let follow_ups = SOURCES
            .iter()
            .map(|&source| {
                let links = models[source]
                    .follow_up
                    .iter()
                    .filter_map(|l| models.get(&l.tool).map(|m| (l.clone(), m.clone())))
                    .collect();
                (source.to_owned(), links)
            })
            .collect::<HashMap<String, Vec<_>>>();
        let max_candidates = follow_ups.values().map(Vec::len).sum();
        Self { models, follow_ups, max_candidates }
    }

    /// The host's side of a planning run: the recent tools' links as candidates, then the plan.
    fn plan(&self, recent: &[&'static str], options: &PlannerOptions) -> Plan<'_> {
        // Sized for the largest fan-out, as a host knows it when the registry is built.
        let mut cands = Vec::with_capacity(self.max_candidates);
        for &from in recent {
            let Some(links) = self.follow_ups.get(from) else { continue };
            cands.extend(links.iter().map(|(link, model)| Candidate {
                from,
                link,
                model,
                requires: None,
            }));
        }
        plan(recent, &cands, &INTENT, options)
    }

    /// The same registry as the reference planner's configuration.
    fn reference_config(&self) -> AdaptiveConfig {
        let mut config = AdaptiveConfig::default();
        for (name, m) in &self.models {
            config.tools.insert(name.clone(), reference_model(m));
        }
        config
    }

    /// The expected value of admitting `tools`, as this planner counts it; a call that may not be
    /// speculated counts as nothing.
    fn value_of<'t>(&self, recent: &[&str], tools: impl Iterator<Item = &'t str>) -> f64 {
        let best_probability = |tool: &str| {
            recent
                .iter()
                .filter_map(|r| self.models.get(*r))
                .flat_map(|m| &m.follow_up)
                .filter(|l| l.tool == tool)
                .map(|l| l.probability)
                .fold(0.0, f64::max)
        };
        tools
            .filter_map(|t| self.models.get(t).map(|m| (t, m)))
            .filter(|(_, m)| m.may_speculate())
            .map(|(t, m)| best_probability(t) * m.value_class.score() * intent_boost(m, &INTENT))
            .sum()
    }
}

fn reference_model(m: &ToolValueModel) -> devboy_core::ToolValueModel {
    use devboy_core::{SideEffectClass as S, ValueClass as V};
    devboy_core::ToolValueModel {
        value_class: match m.value_class {
            ValueClass::Critical => V::Critical,
            ValueClass::Supporting => V::Supporting,
            ValueClass::Optional => V::Optional,
            ValueClass::AuditOnly => V::AuditOnly,
        },
        side_effect_class: match m.side_effect_class {
            SideEffectClass::Pure => S::Pure,
            SideEffectClass::ReadOnly => S::ReadOnly,
            SideEffectClass::MutatesLocal => S::MutatesLocal,
            SideEffectClass::MutatesExternal => S::MutatesExternal,
            _ => S::Indeterminate,
        },
        field_groups: m
            .field_groups
            .iter()
            .map(|(name, g)| {
                let group = devboy_core::FieldGroup {
                    fields: g.fields.clone(),
                    estimated_value: g.estimated_value as f32,
                    default_include: g.default_include,
                };
                (name.clone(), group)
            })
            .collect(),
        cost_model: devboy_core::CostModel {
            typical_kb: m.cost_model.typical_kb as f32,
            latency_ms_p50: m.cost_model.latency_ms_p50,
            ..devboy_core::CostModel::default()
        },
        follow_up: m
            .follow_up
            .iter()
            .map(|l| devboy_core::FollowUpLink {
                tool: l.tool.clone(),
                probability: l.probability as f32,
                projection: None,
                projection_arg: None,
            })
            .collect(),
        ..devboy_core::ToolValueModel::default()
    }
}

fn bench_vs_reference(c: &mut Criterion) {
    let options = PlannerOptions { budget_tokens: 8000, ..PlannerOptions::default() };
    let reference_options = reference::PlannerOptions {
        min_followup_probability: options.min_followup_probability as f32,
        bytes_per_token: (1024.0 / options.tokens_per_kb) as u32,
        ..reference::PlannerOptions::default()
    };
    let recent: Vec<String> = RECENT.iter().map(|r| (*r).to_owned()).collect();
    let mut group = c.benchmark_group("vs_reference");
    for n in [100usize, 1_000, 10_000] {
        let registry = Registry::of(&instance(n, 0x5eed + n as u64, false));
        let config = registry.reference_config();
        let context = reference::TurnContext {
            recent_tools: &recent,
            budget_tokens: options.budget_tokens,
            intent_keywords: INTENT.iter().map(|k| (*k).to_owned()).collect(),
        };
        let ours = registry.plan(&RECENT, &options);
        let theirs = reference::build_plan(&config, &context, reference_options);
        let writes = theirs
            .calls
            .iter()
            .filter(|c| registry.models.get(&c.tool).is_some_and(|m| !m.may_speculate()))
            .count();
        let reference_value =
            registry.value_of(&RECENT, theirs.calls.iter().map(|c| c.tool.as_str()));
        assert!(ours.method == PlanMethod::Exact && ours.total_value >= reference_value - 1e-9);
        eprintln!(
            "vs_reference/{n}: quiver admits {} ({:?}), value {:.3}, {} tokens; reference admits \
             {} ({writes} of them writes), value {:.3}, {} tokens",
            ours.admitted.len(),
            ours.method,
            ours.total_value,
            ours.total_cost,
            theirs.calls.len(),
            reference_value,
            theirs.total_cost_tokens,
        );
        group.bench_with_input(BenchmarkId::new("quiver", n), &registry, |b, registry| {
            b.iter(|| black_box(registry.plan(black_box(&RECENT), &options)).total_cost)
        });
        group.bench_with_input(BenchmarkId::new("reference", n), &config, |b, config| {
            b.iter(|| {
                black_box(reference::build_plan(black_box(config), &context, reference_options))
                    .total_cost_tokens
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench, bench_vs_reference);
criterion_main!(benches);
