//! What scrubbing a successful result costs: every call's result is masked of every registered
//! credential before anything else sees it (`Host::call_with`), so this is added to each call.
//!
//! - `secrets/mask_json/issue` and `secrets/mask_json/issues_list`: `SecretMask::mask_json`
//!   over GitHub's recorded issue (4 KB) and issue list (tests/data/github), with ten
//!   credentials registered (each with a Basic-auth user: 18 encoded forms apiece).
//! - `secrets/parse/…`: `serde_json::from_str` of the same answer, which the host already does
//!   for every result crossing the plugin boundary — the baseline the scrub is compared with.
//!
//! Run with `cargo xtask bench secrets`.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use quiver_core::secrets::SecretMask;
use serde_json::Value;

const ISSUE: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/github/issue.json"));
const ISSUES: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/github/issues_list.json"));

fn bench(c: &mut Criterion) {
    let mut mask = SecretMask::default();
    for i in 0..10 {
        mask.add_credential(
            &format!("ghp_benchToken{i:02}abcdefghijklmnopqrstuv"),
            Some("dev@example.com"),
        );
    }
    let mut group = c.benchmark_group("secrets");
    for (name, text) in [("issue", ISSUE), ("issues_list", ISSUES)] {
        let value: Value = serde_json::from_str(text).unwrap();
        group.bench_function(format!("mask_json/{name}"), |b| {
            b.iter_batched(
                || value.clone(),
                |mut v| {
                    mask.mask_json(&mut v);
                    black_box(v)
                },
                criterion::BatchSize::SmallInput,
            )
        });
        group.bench_function(format!("parse/{name}"), |b| {
            b.iter(|| black_box(serde_json::from_str::<Value>(black_box(text)).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
