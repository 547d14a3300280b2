//! The synthetic tool registry the enrichment and selector benchmarks share (and the runtime's
//! store benchmark): 20 providers, tools named from 8 verbs and 60 nouns, about five arguments
//! each (a scope, the tool's own id, a filter by a related thing's id, state, labels, paging, a
//! flag) and output schemas with arrays of items carrying ids of related things, so parameter
//! blocks are large and realistic rather than trivially small. Included with `#[path]`.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use quiver_core::ToolSpec;
use serde_json::{json, Map, Value};

pub(crate) const NOUNS: &[&str] = &[
    "issue",
    "pull_request",
    "merge_request",
    "pipeline",
    "job",
    "run",
    "project",
    "repository",
    "task",
    "list",
    "folder",
    "space",
    "board",
    "sprint",
    "comment",
    "note",
    "discussion",
    "user",
    "team",
    "member",
    "release",
    "tag",
    "branch",
    "commit",
    "file",
    "build",
    "deployment",
    "environment",
    "incident",
    "alert",
    "service",
    "ticket",
    "invoice",
    "customer",
    "order",
    "product",
    "meeting",
    "transcript",
    "document",
    "page",
    "label",
    "milestone",
    "webhook",
    "secret",
    "runner",
    "artifact",
    "package",
    "version",
    "epic",
    "story",
    "review",
    "approval",
    "check",
    "workflow",
    "schedule",
    "dashboard",
    "report",
    "metric",
    "log",
    "event",
];
/// Prints p50/p90/p99 of `run` over [`QUERIES`], each query timed alone, 20 rounds.
pub(crate) fn percentiles(label: &str, mut run: impl FnMut(&str)) {
    let mut times: Vec<Duration> = Vec::new();
    for _ in 0..20 {
        for query in QUERIES {
            let started = Instant::now();
            run(query);
            times.push(started.elapsed());
        }
    }
    times.sort();
    let at = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    eprintln!(
        "{label}: p50 {:?}  p90 {:?}  p99 {:?}  ({} queries)",
        at(0.5),
        at(0.9),
        at(0.99),
        times.len()
    );
}

/// Requests as a developer phrases them, for the selector benchmarks.
pub(crate) const QUERIES: &[&str] = &[
    "why did the MR pipeline fail",
    "list open pull requests assigned to me",
    "move PROJ-7 to Done",
    "show the failing job's log",
    "summarize yesterday's standup meeting",
    "create a ticket for the login bug",
    "which files changed in this PR",
    "upcoming releases and milestones",
    "rerun the flaky deployment",
    "comments on the incident",
];

pub(crate) const VERBS: &[&str] =
    &["get", "list", "search", "create", "update", "delete", "close", "retry"];
const SCOPES: &[&str] = &["project", "workspace_id", "repo", "team_id", "org", "site"];

/// splitmix64: a deterministic registry without a dependency.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

pub(crate) fn tool(i: usize, rng: &mut Rng) -> (String, ToolSpec) {
    let provider = format!("prov{}", i % 20);
    let scope = SCOPES[i % 20 % SCOPES.len()];
    let verb = rng.pick(VERBS);
    let noun = rng.pick(NOUNS);
    let (r1, r2) = (rng.pick(NOUNS), rng.pick(NOUNS));
    let listing = verb == "list" || verb == "search";
    let name = if listing { format!("{verb}_{noun}s_{i}") } else { format!("{verb}_{noun}_{i}") };
    let mut inputs = Map::new();
    inputs.insert(
        scope.into(),
        json!({"type": "string", "description": format!("The {scope} to work in.")}),
    );
    if !listing && verb != "create" {
        inputs.insert(
            format!("{noun}_id"),
            json!({"type": "integer", "description": format!("The {noun} id.")}),
        );
    }
    inputs.insert(
        format!("{r1}_id"),
        json!({"type": ["integer", "null"], "description": format!("Only those of this {r1}.")}),
    );
    inputs.insert(
        "state".into(),
        json!({"type": ["string", "null"], "description": "open, closed or all."}),
    );
    inputs.insert("labels".into(), json!({"type": ["array", "null"], "items": {"type": "string"}, "description": "Label names."}));
    if listing {
        inputs.insert("page".into(), json!({"type": ["integer", "null"]}));
        inputs.insert(
            "since".into(),
            json!({"type": ["string", "null"], "description": "Updated after, ISO 8601."}),
        );
    }
    inputs.insert("include_archived".into(), json!({"type": "boolean"}));
    let item = json!({"type": "object", "properties": {
        "id": {"type": "integer", "description": format!("The {noun} id.")},
        "title": {"type": "string", "description": format!("The {noun}'s title.")},
        "state": {"type": "string"},
        format!("{r1}_id"): {"type": ["integer", "null"], "description": format!("Its {r1}.")},
        format!("{r2}_id"): {"type": ["integer", "null"], "description": format!("Its {r2}.")},
        "author": {"type": "string", "description": "The author's login."},
        "created_at": {"type": "string"},
        "labels": {"type": "array", "items": {"type": "string"}},
        "url": {"type": "string"},
        "draft": {"type": "boolean"},
    }});
    let output = if listing {
        json!({"type": "object", "$defs": {"Item": item}, "properties": {
            format!("{noun}s"): {"type": "array", "items": {"$ref": "#/$defs/Item"}},
            "next_page": {"type": ["integer", "null"]},
            "total": {"type": "integer"},
            scope: {"type": "string"},
        }})
    } else {
        item
    };
    let spec = ToolSpec {
        name: name.clone(),
        group: None,
        description: format!("{verb} a {noun} of a {scope}, with its {r1} and {r2}."),
        input_schema: json!({"type": "object", "properties": Value::Object(inputs), "required": [scope]}),
        output_schema: Some(output),
        sensitive_params: vec![],
    };
    (format!("{provider}.{name}"), spec)
}

/// `n` tools, the same ones on every run.
pub(crate) fn registry(n: usize) -> Vec<(String, ToolSpec)> {
    let mut rng = Rng(2000);
    (0..n).map(|i| tool(i, &mut rng)).collect()
}
