//! What response shaping saves: a GitHub issue list and a GitLab merge request discussion, raw
//! API response vs what the session hands the model (the provider's compact result, trimmed by
//! the tool's field groups). Prints the token figures, then times the projection step.
//!
//! Run with `cargo xtask bench`.

#![allow(missing_docs)]

#[path = "common/tokens.rs"]
mod payloads;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use quiver_core::response_projection::{project, Requested};

fn tokens(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let plugins = quiver_tests::plugins_dir(&["quiver-provider-github", "quiver-provider-gitlab"]);
    let measured = runtime.block_on(payloads::measure(plugins.path()));
    let mut group = c.benchmark_group("projection");
    for m in &measured {
        eprintln!(
            "tokens {}: raw API {} → provider {} → projected {} ({:.1} % fewer than raw; \
             projection alone {:.1} %)",
            m.name,
            m.raw_tokens,
            m.provider_tokens,
            m.projected_tokens,
            m.saved_vs_raw(),
            m.saved_by_projection()
        );
        let requested = Requested::default();
        assert_eq!(project(m.provider.clone(), &m.model, &requested).value, m.projected);
        assert!(m.raw.is_array(), "{}: the raw API response is a list", m.name);
        group.bench_function(m.name, |b| {
            b.iter(|| project(black_box(m.provider.clone()), &m.model, &requested))
        });
    }
    group.finish();
}

criterion_group!(benches, tokens);
criterion_main!(benches);
