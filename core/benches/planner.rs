//! One planning run over N random candidates (N = 100, 1 000, 10 000), budget 8 000 tokens,
//! realistic cost models (typical 0.5–20 KiB), a tenth of them mutating, a few free bookkeeping
//! calls, duplicate targets, and two intent keywords. `with_prerequisites` adds prerequisite chains
//! to 5 % of the candidates.
//!
//! The method that ran at each size is printed to stderr before the measurements.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use quiver_core::planner::{plan, Candidate, PlannerOptions};
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
    for _ in 0..n {
        let target = format!("prov{}.tool_{}", rng.below(8), rng.below(n as u64));
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
        inst.models.push(ToolValueModel {
            value_class: class,
            side_effect_class: side,
            field_groups,
            cost_model: CostModel {
                typical_kb: 0.5 + rng.unit() * 19.5,
                latency_ms_p50: Some(50 + rng.below(8000) as u32),
                ..CostModel::default()
            },
            ..ToolValueModel::default()
        });
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

criterion_group!(benches, bench);
criterion_main!(benches);
