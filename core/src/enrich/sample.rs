//! Chain samplers: plausible multi-step tool-call scenarios (which tools, in which order, and which
//! output feeds which argument), drawn from the `dataflow` artifact. They are what the dataflow
//! index exists for: training and evaluation data for agents that must chain calls.
//!
//! - `random`: 2–4 distinct tools, no feeds; needs no artifact.
//! - `chain`: a walk of 2–4 steps along forward edges, each step chosen with probability
//!   proportional to the edge's score.
//! - `fan_out`: one source feeding 2–3 of its successors.
//! - `fan_in`: 2–3 predecessors (from the reverse index) feeding one target.
//! - `dag`: 3–5 steps grown from a source, each new step fed by an earlier one, plus every other
//!   feed the forward index knows between earlier steps and the new one — chains, fan-outs and
//!   fan-ins combined.
//!
//! Steps are in call order: a step's feeds always come from earlier steps. Every feed is an edge
//! of the forward index (same tools, same parameter pair, same score). Only tools in the given list
//! take part, so a caller can sample over the enabled tools alone.
//!
//! The same seed gives the same scenarios: the generator is PCG (portable, seeded through
//! `rand_core`'s `seed_from_u64`), and every choice iterates sorted data. Scenarios are distinct
//! (by their steps); fewer than `n` come back only when the graph cannot supply more — no tool
//! fits the strategy, or repeated draws (a fixed budget of attempts per scenario) keep producing
//! scenarios already drawn.
//!
//! ```
//! use quiver_core::enrich::sample::{sample, Strategy};
//!
//! let tools = vec!["a.one".to_string(), "a.two".to_string(), "a.three".to_string()];
//! let picks = sample(Strategy::Random, &tools, None, 2, 7).unwrap();
//! assert_eq!(picks, sample(Strategy::Random, &tools, None, 2, 7).unwrap());
//!
//! let err = sample(Strategy::Chain, &tools, None, 2, 7).unwrap_err();
//! assert_eq!(err.to_string(), "sampler 'chain' requires the 'dataflow' artifact; add [[enrichments]] type = \"dataflow\"");
//! ```

use std::collections::{BTreeMap, BTreeSet};

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};

use super::dataflow::{DataflowEdge, DataflowIndex};
use super::{require_artifacts, ArtifactKey, ScheduleError, DATAFLOW};

/// Draws per requested scenario before a sampler concludes the graph has no more to give.
const ATTEMPTS_PER_SCENARIO: usize = 30;

/// A sampling strategy, by the name the CLI uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Independent tools, no dataflow.
    Random,
    /// A walk along forward edges.
    Chain,
    /// One source feeding several successors.
    FanOut,
    /// Several predecessors feeding one target.
    FanIn,
    /// A small DAG combining the others.
    Dag,
}

impl Strategy {
    /// Every strategy, in a fixed order.
    pub const ALL: [Strategy; 5] =
        [Strategy::Random, Strategy::Chain, Strategy::FanOut, Strategy::FanIn, Strategy::Dag];

    /// The name the CLI and messages use (`fan_out`).
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Random => "random",
            Strategy::Chain => "chain",
            Strategy::FanOut => "fan_out",
            Strategy::FanIn => "fan_in",
            Strategy::Dag => "dag",
        }
    }

    /// Parses a CLI name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The artifacts this strategy reads: none for `random`, `dataflow` for the others.
    pub fn required_artifacts(self) -> &'static [ArtifactKey] {
        match self {
            Strategy::Random => &[],
            _ => &[DATAFLOW],
        }
    }
}

/// One output feeding one argument between two steps of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Feed {
    /// The feeding step (an index into [`Scenario::tools`]).
    pub from_step: usize,
    /// The output path on that step's tool.
    pub from_param: String,
    /// The fed step, always after `from_step`.
    pub to_step: usize,
    /// The input name on that step's tool.
    pub to_param: String,
    /// The dataflow edge's score.
    pub score: f32,
}

/// A sampled multi-step scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// The strategy that drew it.
    pub strategy: Strategy,
    /// Qualified tool names, in call order.
    pub tools: Vec<String>,
    /// Which outputs feed which arguments.
    pub feeds: Vec<Feed>,
}

/// Draws up to `n` distinct scenarios with `strategy` over `tool_names`, seeded by `seed`.
///
/// Fails with [`ScheduleError::MissingArtifact`] when the strategy needs the dataflow index and
/// `dataflow` is `None`. Returns fewer than `n` only when the graph cannot supply them (see the
/// module documentation).
pub fn sample(
    strategy: Strategy,
    tool_names: &[String],
    dataflow: Option<&DataflowIndex>,
    n: usize,
    seed: u64,
) -> Result<Vec<Scenario>, ScheduleError> {
    let available: BTreeSet<ArtifactKey> = dataflow.iter().map(|_| DATAFLOW).collect();
    require_artifacts(
        &format!("sampler '{}'", strategy.name()),
        strategy.required_artifacts(),
        &available,
    )?;
    let universe: BTreeSet<&str> = tool_names.iter().map(String::as_str).collect();
    let graph = Graph::new(&universe, dataflow);
    let mut rng = Draw(Pcg64::seed_from_u64(seed));
    let mut seen: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut scenarios = Vec::with_capacity(n);
    let mut attempts = 0;
    while scenarios.len() < n && attempts < n.saturating_mul(ATTEMPTS_PER_SCENARIO) {
        attempts += 1;
        let drawn = match strategy {
            Strategy::Random => graph.random(&mut rng),
            Strategy::Chain => graph.chain(&mut rng),
            Strategy::FanOut => graph.fan_out(&mut rng),
            Strategy::FanIn => graph.fan_in(&mut rng),
            Strategy::Dag => graph.dag(&mut rng),
        };
        // A draw that fell short (a walk that found no successor…) only uses up an attempt.
        let Some((tools, feeds)) = drawn else { continue };
        if seen.insert(tools.clone()) {
            scenarios.push(Scenario { strategy, tools, feeds });
        }
    }
    Ok(scenarios)
}

/// The generator with the few draws the samplers need.
struct Draw(Pcg64);

impl Draw {
    /// Uniform in `0..n` (`n > 0`), by rejection so small ranges are not biased.
    fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.0.next_u64();
            if x < zone {
                return (x % n) as usize;
            }
        }
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// An index into `weights` with probability proportional to its weight; `None` when all are
    /// zero.
    fn weighted(&mut self, weights: &[f32]) -> Option<usize> {
        let total: f64 = weights.iter().map(|&w| f64::from(w.max(0.0))).sum();
        if total <= 0.0 {
            return None;
        }
        let unit = (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let mut target = unit * total;
        for (i, &w) in weights.iter().enumerate() {
            let w = f64::from(w.max(0.0));
            if target < w {
                return Some(i);
            }
            target -= w;
        }
        weights.iter().rposition(|&w| w > 0.0)
    }
}

type Drawn = Option<(Vec<String>, Vec<Feed>)>;

/// The dataflow index restricted to the sampled tools.
struct Graph<'a> {
    tools: Vec<&'a str>,
    out: BTreeMap<&'a str, Vec<&'a DataflowEdge>>,
    r#in: BTreeMap<&'a str, Vec<&'a DataflowEdge>>,
}

impl<'a> Graph<'a> {
    fn new(universe: &BTreeSet<&'a str>, dataflow: Option<&'a DataflowIndex>) -> Self {
        let restrict = |map: &'a BTreeMap<String, Vec<DataflowEdge>>| {
            map.iter()
                .filter(|(name, _)| universe.contains(name.as_str()))
                .map(|(name, edges)| {
                    let kept: Vec<&DataflowEdge> = edges
                        .iter()
                        .filter(|e| e.score > 0.0 && universe.contains(e.tool.as_str()))
                        .collect();
                    (name.as_str(), kept)
                })
                .filter(|(_, edges)| !edges.is_empty())
                .collect::<BTreeMap<_, _>>()
        };
        let (out, r#in) = match dataflow {
            Some(d) => (restrict(&d.out), restrict(&d.r#in)),
            None => (BTreeMap::new(), BTreeMap::new()),
        };
        Graph { tools: universe.iter().copied().collect(), out, r#in }
    }

    fn edge(&self, from: &str, to: &str) -> Option<&'a DataflowEdge> {
        self.out.get(from)?.iter().copied().find(|e| e.tool == to)
    }

    fn random(&self, rng: &mut Draw) -> Drawn {
        if self.tools.len() < 2 {
            return None;
        }
        let len = rng.between(2, 4.min(self.tools.len()));
        let mut picked: Vec<String> = Vec::with_capacity(len);
        while picked.len() < len {
            let t = self.tools[rng.below(self.tools.len())];
            if !picked.iter().any(|p| p == t) {
                picked.push(t.to_owned());
            }
        }
        Some((picked, Vec::new()))
    }

    fn chain(&self, rng: &mut Draw) -> Drawn {
        let starts: Vec<&str> = self.out.keys().copied().collect();
        if starts.is_empty() {
            return None;
        }
        let target_len = rng.between(2, 4);
        let mut tools = vec![starts[rng.below(starts.len())]];
        let mut feeds = Vec::new();
        while tools.len() < target_len {
            let current = *tools.last().expect("a chain starts with one tool");
            let next: Vec<&DataflowEdge> = self
                .out
                .get(current)
                .map(|edges| {
                    edges.iter().copied().filter(|e| !tools.contains(&e.tool.as_str())).collect()
                })
                .unwrap_or_default();
            let weights: Vec<f32> = next.iter().map(|e| e.score).collect();
            let Some(pick) = rng.weighted(&weights) else { break };
            let e = next[pick];
            feeds.push(feed(tools.len() - 1, e, tools.len()));
            tools.push(e.tool.as_str());
        }
        (tools.len() >= 2).then(|| (owned(&tools), feeds))
    }

    fn fan_out(&self, rng: &mut Draw) -> Drawn {
        let sources: Vec<&str> =
            self.out.iter().filter(|(_, e)| e.len() >= 2).map(|(n, _)| *n).collect();
        if sources.is_empty() {
            return None;
        }
        let source = sources[rng.below(sources.len())];
        let count = rng.between(2, 3);
        let picked = pick_weighted(rng, &self.out[source], count);
        let mut tools = vec![source];
        let mut feeds = Vec::new();
        for e in picked {
            feeds.push(feed(0, e, tools.len()));
            tools.push(e.tool.as_str());
        }
        Some((owned(&tools), feeds))
    }

    fn fan_in(&self, rng: &mut Draw) -> Drawn {
        let targets: Vec<&str> =
            self.r#in.iter().filter(|(_, e)| e.len() >= 2).map(|(n, _)| *n).collect();
        if targets.is_empty() {
            return None;
        }
        let target = targets[rng.below(targets.len())];
        let count = rng.between(2, 3);
        let picked = pick_weighted(rng, &self.r#in[target], count);
        let last = picked.len();
        let mut tools = Vec::with_capacity(last + 1);
        let mut feeds = Vec::new();
        for (step, e) in picked.into_iter().enumerate() {
            tools.push(e.tool.as_str());
            feeds.push(Feed {
                from_step: step,
                from_param: e.from_param.clone(),
                to_step: last,
                to_param: e.to_param.clone(),
                score: e.score,
            });
        }
        tools.push(target);
        Some((owned(&tools), feeds))
    }

    fn dag(&self, rng: &mut Draw) -> Drawn {
        let starts: Vec<&str> = self.out.keys().copied().collect();
        if starts.is_empty() {
            return None;
        }
        let target_len = rng.between(3, 5);
        let mut tools = vec![starts[rng.below(starts.len())]];
        let mut feeds = Vec::new();
        while tools.len() < target_len {
            // Every edge from a step so far to a tool not yet in the scenario.
            let frontier: Vec<(usize, &DataflowEdge)> = tools
                .iter()
                .enumerate()
                .flat_map(|(step, t)| {
                    self.out.get(t).into_iter().flatten().map(move |e| (step, *e))
                })
                .filter(|(_, e)| !tools.contains(&e.tool.as_str()))
                .collect();
            let weights: Vec<f32> = frontier.iter().map(|(_, e)| e.score).collect();
            let Some(pick) = rng.weighted(&weights) else { break };
            let (_, chosen) = frontier[pick];
            let new_step = tools.len();
            let new_tool = chosen.tool.as_str();
            // Every earlier step that feeds the new one: the chosen edge and any fan-in besides.
            for (step, t) in tools.iter().enumerate() {
                if let Some(e) = self.edge(t, new_tool) {
                    feeds.push(feed(step, e, new_step));
                }
            }
            tools.push(new_tool);
        }
        (tools.len() >= 3).then(|| (owned(&tools), feeds))
    }
}

/// Up to `count` distinct edges, each drawn with probability proportional to its score among
/// those left.
fn pick_weighted<'e>(
    rng: &mut Draw,
    edges: &[&'e DataflowEdge],
    count: usize,
) -> Vec<&'e DataflowEdge> {
    let mut left: Vec<&DataflowEdge> = edges.to_vec();
    let mut picked = Vec::with_capacity(count);
    while picked.len() < count && !left.is_empty() {
        let weights: Vec<f32> = left.iter().map(|e| e.score).collect();
        let Some(i) = rng.weighted(&weights) else { break };
        picked.push(left.remove(i));
    }
    picked
}

fn feed(from_step: usize, e: &DataflowEdge, to_step: usize) -> Feed {
    Feed {
        from_step,
        from_param: e.from_param.clone(),
        to_step,
        to_param: e.to_param.clone(),
        score: e.score,
    }
}

fn owned(tools: &[&str]) -> Vec<String> {
    tools.iter().map(|t| (*t).to_owned()).collect()
}
