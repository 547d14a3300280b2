//! The pre-fetch planner: which follow-up calls of the session's recent calls are worth running
//! before the agent asks, under a token budget.
//!
//! Each candidate is a [`FollowUpLink`] of a recent call together with the target tool's effective
//! [`ToolValueModel`]. Its **value** is the expected value of having the result at hand:
//! `probability × ValueClass::score × intent boost × cost-aware factors`; its **cost** is the
//! predicted tokens, `ceil(typical_kb × tokens_per_kb)` (at least 1; `AuditOnly` tools are free).
//! Candidates that may not or need not run are declined first, each with a [`DeclineReason`]; a
//! mutating tool (side effect other than `Pure`/`ReadOnly`, or `speculate = false`) is never
//! admitted, whatever else is set. The rest form a 0/1 knapsack whose optional prerequisites
//! (`requires`) are precedence constraints: an admitted candidate's prerequisite is admitted too.
//!
//! **Why exact, and the fallback.** The plain density greedy can be arbitrarily bad (budget 100, a
//! `Critical` call of 100 tokens and an `Optional` one of 1: it takes only the `Optional` one), so
//! the planner solves the knapsack exactly — depth-first branch and bound over the items sorted by
//! density, pruned by the fractional (Dantzig) bound, after fixing out items that LP duality shows
//! cannot improve on the greedy plan. On the sizes that occur (tens to thousands of candidates,
//! budgets of thousands of tokens) this visits few nodes. Only when the core is larger than
//! [`PlannerOptions::exact_limit`] or the search exceeds [`PlannerOptions::node_limit`] nodes does it
//! return the best plan found so far, which is never worse than max(density greedy, best single
//! item) and is reported as [`PlanMethod::ApproxHalf`]. Proof sketch of the ½ bound: the greedy
//! prefix `G` before the critical item `c` plus `c` itself is the LP optimum rounded up, so
//! `OPT ≤ LP ≤ v(G) + v_c ≤ 2·max(v(G), v_c)`, and every item fits alone (larger ones are declined).
//! With prerequisites that bound does not hold (a cheap item may need an expensive one), so a
//! fallback on such an instance is reported as [`PlanMethod::Heuristic`].
//!
//! The planner is pure and deterministic: the same input gives the same plan, whatever the order of
//! the candidates (ties are broken by tool name).
//!
//! ```
//! use quiver_core::planner::{plan, Candidate, PlannerOptions};
//! use quiver_core::value_model::{FollowUpLink, SideEffectClass, ToolValueModel, ValueClass};
//!
//! let issue = ToolValueModel {
//!     value_class: ValueClass::Critical,
//!     side_effect_class: SideEffectClass::ReadOnly,
//!     ..ToolValueModel::default()
//! };
//! let link = FollowUpLink {
//!     tool: "github.get_issue".into(),
//!     probability: 0.8,
//!     projection: None,
//!     projection_arg: None,
//! };
//! let candidates = [Candidate { from: "github.search_issues", link: &link, model: &issue, requires: None }];
//! let plan = plan(&["github.search_issues"], &candidates, &[] as &[&str], &PlannerOptions::default());
//! assert_eq!(plan.admitted[0].tool, "github.get_issue");
//! assert_eq!(plan.admitted[0].cost_tokens, 512); // 2 KiB × 256 tokens per KiB
//! ```

pub(crate) mod knapsack;

use serde::{Deserialize, Serialize};

use crate::value_model::{FollowUpLink, ToolValueModel, ValueClass};

use knapsack::NONE;

/// Knobs of one planning run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlannerOptions {
    /// Tokens the admitted calls may cost together.
    pub budget_tokens: u32,
    /// Links less likely than this are declined.
    pub min_followup_probability: f64,
    /// Tokens per KiB of response, to turn `typical_kb` into a cost.
    pub tokens_per_kb: f64,
    /// Halve the value of slow calls and of paid calls.
    pub cost_aware: bool,
    /// With `cost_aware`, calls whose median latency is at least this are worth half.
    pub latency_knee_ms: u32,
    /// With `cost_aware`, calls costing at least this many dollars are worth half.
    pub dollar_knee: f64,
    /// Largest knapsack (after reduction) solved exactly; larger ones take the ½-approximation.
    pub exact_limit: usize,
    /// Nodes the exact search may visit before it settles for the best plan found so far.
    pub node_limit: u64,
}

impl Default for PlannerOptions {
    fn default() -> Self {
        Self {
            budget_tokens: 8000,
            min_followup_probability: 0.05,
            tokens_per_kb: 256.0,
            cost_aware: false,
            latency_knee_ms: 5000,
            dollar_knee: 0.10,
            exact_limit: 100_000,
            node_limit: 200_000,
        }
    }
}

/// A possible pre-fetch: a follow-up link of a recent call and what the planner needs to know about
/// its target.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// The qualified tool whose call this link follows, e.g. `github.search_issues`.
    pub from: &'a str,
    /// The link; its `tool` is the qualified target, e.g. `github.get_issue`.
    pub link: &'a FollowUpLink,
    /// The target's effective value model.
    pub model: &'a ToolValueModel,
    /// Another candidate's target tool that must be admitted for this one to be (its arguments come
    /// from that call's result). A tool among the recent calls counts as already satisfied.
    pub requires: Option<&'a str>,
}

/// How much a prior probability weighs against what a session showed, in observations.
pub const SESSION_PRIOR_WEIGHT: f64 = 2.0;

/// A link's probability in a session where the agent made the call the link projected `made`
/// times and did not `missed` times: the prior counted as [`SESSION_PRIOR_WEIGHT`]
/// observations (a Beta posterior mean). Two misses bring a 0.5 link to 0.25; two calls made
/// bring a 0.03 link to 0.51.
pub fn session_probability(prior: f64, made: u32, missed: u32) -> f64 {
    let prior = if prior.is_finite() { prior.clamp(0.0, 1.0) } else { 0.0 };
    (SESSION_PRIOR_WEIGHT * prior + f64::from(made))
        / (SESSION_PRIOR_WEIGHT + f64::from(made) + f64::from(missed))
}

/// The probability a pre-fetch must reach to be worth a request of a service whose rate window
/// has `share` left (0..=1), when `min_probability` is the bar with the whole window left and
/// `reserve` is the share kept for the agent's own calls.
///
/// A pre-fetch pays when `p × (the wait it saves) ≥ (1 − p) × (the price of the request it
/// spends)`, so its break-even odds `p / (1 − p)` are the request's price. With the whole window
/// left that price is what `min_probability` says; as the window empties towards the reserve the
/// price grows as `1 / (share − reserve)`, and at or below the reserve no probability is enough
/// (the answer is above 1). At `min_probability` 0.5 and a reserve of 0.2: 0.5 with the window
/// full, 0.53 at 90% left, 0.73 at half, 0.94 at a quarter.
///
/// ```
/// use quiver_core::planner::rate_budget_probability;
/// assert_eq!(rate_budget_probability(0.5, 1.0, 0.2), 0.5);
/// assert!((rate_budget_probability(0.5, 0.5, 0.2) - 0.727).abs() < 0.001);
/// assert!(rate_budget_probability(0.5, 0.2, 0.2) > 1.0);
/// ```
pub fn rate_budget_probability(min_probability: f64, share: f64, reserve: f64) -> f64 {
    let finite_or = |x: f64, or: f64| if x.is_finite() { x } else { or };
    let min = finite_or(min_probability, 1.0).clamp(0.0, 1.0);
    let share = finite_or(share, 0.0).clamp(0.0, 1.0);
    let reserve = finite_or(reserve, 0.0).clamp(0.0, 1.0);
    if share <= reserve {
        return f64::INFINITY;
    }
    if min >= 1.0 {
        return 1.0;
    }
    let odds = min / (1.0 - min) * (1.0 - reserve) / (share - reserve);
    odds / (1.0 + odds)
}

/// Why a candidate was left out of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeclineReason {
    /// The link's probability is below [`PlannerOptions::min_followup_probability`].
    BelowMinProbability,
    /// The target is the tool the link comes from and the link projects no arguments (a
    /// re-read is the cache's business).
    SelfLoop,
    /// The target is among the recent calls and the link projects no arguments.
    RecentlyUsed,
    /// The target may have side effects (not `Pure`/`ReadOnly`) or forbids speculation.
    NotSpeculatable,
    /// Another link to the same target is worth more.
    DuplicateLink,
    /// The call alone, or together with its prerequisites, costs more than the budget.
    OverBudget,
    /// Its prerequisite is not a candidate, was declined, is part of a cycle of prerequisites, or
    /// (for a free call) was not admitted.
    PrerequisiteDeclined,
    /// Eligible, but the optimal plan within the budget leaves it out.
    NotSelected,
}

/// How the plan was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanMethod {
    /// A plan of maximum total value within the budget.
    Exact,
    /// The exact search was too large; the plan is worth at least half the optimum.
    ApproxHalf,
    /// The exact search was too large on an instance with prerequisites; the plan is at least as
    /// good as the greedy and the best single chain, without a proven ratio.
    Heuristic,
}

/// A call the planner admits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedCall<'a> {
    /// The qualified tool to call.
    pub tool: &'a str,
    /// The recent call whose follow-up it is.
    pub from: &'a str,
    /// Its expected value.
    pub value: f64,
    /// Its predicted tokens.
    pub cost_tokens: u32,
    /// The link's probability.
    pub probability: f64,
}

/// A candidate left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Declined<'a> {
    /// The qualified target tool.
    pub tool: &'a str,
    /// The recent call whose follow-up it is.
    pub from: &'a str,
    /// Why it is left out.
    pub reason: DeclineReason,
    /// Its expected value.
    pub value: f64,
    /// Its predicted tokens.
    pub cost_tokens: u32,
}

/// The planner's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan<'a> {
    /// Calls to run, by value (highest first, then by tool name).
    pub admitted: Vec<PlannedCall<'a>>,
    /// Every other candidate, in input order.
    pub declined: Vec<Declined<'a>>,
    /// Sum of the admitted values.
    pub total_value: f64,
    /// Sum of the admitted costs; never above the budget.
    pub total_cost: u32,
    /// How the plan was chosen.
    pub method: PlanMethod,
}

/// The tokens a call of `model` is predicted to cost: `ceil(typical_kb × tokens_per_kb)`, at least
/// 1, and 0 for `AuditOnly` tools.
#[inline]
pub fn predicted_tokens(model: &ToolValueModel, tokens_per_kb: f64) -> u32 {
    if model.value_class == ValueClass::AuditOnly {
        return 0;
    }
    // ceil without the libm call (no SSE4.1 in the baseline target); `as` saturates: NaN and
    // negatives become 0 (then 1), +∞ becomes u32::MAX.
    let tokens = model.cost_model.typical_kb * tokens_per_kb;
    let whole = tokens as u32;
    let up = if f64::from(whole) < tokens { whole.saturating_add(1) } else { whole };
    up.max(1)
}

/// The intent boost of `model` for `keywords`: `min(2.5, 1 + Σ estimated_value)` over its opt-in
/// field groups (`default_include = false`) with a field whose name contains a keyword, ignoring
/// case. Blank keywords are ignored.
pub fn intent_boost<K: AsRef<str>>(model: &ToolValueModel, keywords: &[K]) -> f64 {
    Intent::new(keywords).boost(model, &mut FieldMemo::default())
}

/// Intent keywords prepared for matching: trimmed, lower-cased, and indexed by first byte.
struct Intent<'k> {
    /// Trimmed and lower-case; borrowed when given so (the usual case), which saves an
    /// allocation per keyword per plan.
    keywords: Vec<std::borrow::Cow<'k, str>>,
    /// Whether some keyword starts with this byte.
    first: [bool; 256],
}

impl<'k> Intent<'k> {
    fn new<K: AsRef<str>>(raw: &'k [K]) -> Self {
        let keywords: Vec<std::borrow::Cow<'k, str>> = raw
            .iter()
            .map(|k| {
                let k = k.as_ref().trim();
                if k.chars().flat_map(char::to_lowercase).eq(k.chars()) {
                    std::borrow::Cow::Borrowed(k)
                } else {
                    std::borrow::Cow::Owned(k.to_lowercase())
                }
            })
            .filter(|k| !k.is_empty())
            .collect();
        let mut first = [false; 256];
        for k in &keywords {
            first[usize::from(k.as_bytes()[0])] = true;
        }
        Self { keywords, first }
    }

    /// The boost of `model`; `memo` remembers the answers for fields seen before, since the same
    /// field names recur across tools and links.
    fn boost<'f>(&self, model: &'f ToolValueModel, memo: &mut FieldMemo<'f>) -> f64 {
        if self.keywords.is_empty() {
            return 1.0;
        }
        let sum: f64 = model
            .field_groups
            .values()
            .filter(|g| {
                !g.default_include && g.fields.iter().any(|f| memo.get_or(f, |f| self.matches(f)))
            })
            .map(|g| if g.estimated_value.is_finite() { g.estimated_value.max(0.0) } else { 0.0 })
            .sum();
        (1.0 + sum).min(2.5)
    }

    /// Whether `field` contains a keyword, ignoring case. Kept out of line: [`FieldMemo`] calls
    /// it once per distinct field name, and the hot path stays small.
    #[inline(never)]
    fn matches(&self, field: &str) -> bool {
        if !field.is_ascii() {
            let lower = field.to_lowercase();
            return self.keywords.iter().any(|k| lower.contains(k.as_ref()));
        }
        // ASCII: one pass, trying keywords only where one may start. A non-ASCII keyword cannot
        // occur in an ASCII field (its first byte, ≥ 0x80, never matches).
        let h = field.as_bytes();
        for i in 0..h.len() {
            let c = h[i].to_ascii_lowercase();
            if self.first[usize::from(c)] {
                let rest = &h[i..];
                if self.keywords.iter().any(|k| {
                    let k = k.as_bytes();
                    k[0] == c && rest.len() >= k.len() && rest[..k.len()].eq_ignore_ascii_case(k)
                }) {
                    return true;
                }
            }
        }
        false
    }
}

/// Whether a field matched the intent, for the last field names seen: a small direct-mapped table
/// keyed by the name's hash, so a repeated name costs a hash and a comparison instead of a search.
struct FieldMemo<'f> {
    /// `(hash, name, matched)`; an empty slot holds the empty name, which matches no keyword.
    slots: [(u64, &'f str, bool); 64],
}

impl Default for FieldMemo<'_> {
    fn default() -> Self {
        Self { slots: [(0, "", false); 64] }
    }
}

impl<'f> FieldMemo<'f> {
    fn get_or(&mut self, field: &'f str, compute: impl FnOnce(&str) -> bool) -> bool {
        let hash = hash_name(field.as_bytes());
        let slot = &mut self.slots[(hash >> 58) as usize];
        if slot.0 == hash && same(slot.1, field) {
            return slot.2;
        }
        let found = compute(field);
        *slot = (hash, field, found);
        found
    }
}

/// The cost-aware factor: ×0.5 for a median latency at or above the knee, ×0.5 for a price at or
/// above the knee; 1 when `cost_aware` is off.
#[inline]
pub fn cost_factor(model: &ToolValueModel, options: &PlannerOptions) -> f64 {
    if !options.cost_aware {
        return 1.0;
    }
    let cost = &model.cost_model;
    let slow = cost.latency_ms_p50.is_some_and(|ms| ms >= options.latency_knee_ms);
    let paid = cost.dollars.is_some_and(|d| d >= options.dollar_knee);
    match (slow, paid) {
        (true, true) => 0.25,
        (true, false) | (false, true) => 0.5,
        (false, false) => 1.0,
    }
}

/// A link's probability as the planner uses it: clamped to 0..=1, NaN as 0.
#[inline]
fn probability(link: &FollowUpLink) -> f64 {
    if link.probability.is_nan() {
        0.0
    } else {
        link.probability.clamp(0.0, 1.0)
    }
}

/// Plans the pre-fetches for `candidates` after `recent_calls` (qualified names, most recent last),
/// given the turn's `intent_keywords`. See the [module docs](self) for the rules.
pub fn plan<'a, R: AsRef<str>, K: AsRef<str>>(
    recent_calls: &[R],
    candidates: &[Candidate<'a>],
    intent_keywords: &[K],
    options: &PlannerOptions,
) -> Plan<'a> {
    let n = candidates.len();
    let intent = Intent::new(intent_keywords);
    let mut memo = FieldMemo::default();
    let budget = u64::from(options.budget_tokens);
    // Few recent calls: a scan beats hashing. Lengths differ more often than not.
    let recent: Vec<&str> = recent_calls.iter().map(AsRef::as_ref).collect();
    let is_recent = |name: &str| recent.iter().any(|r| r.len() == name.len() && *r == name);

    // The kept link of each eligible target so far.
    let mut by_target = TargetTable::with_capacity(n);

    // Value, cost and the per-candidate rules, then one link per target: the most valuable (then
    // most probable, then from the first source by name, then the first given). The rules are
    // tried in the order self-loop, recently used, not speculatable, below the minimum
    // probability, duplicate; the cheap ones first, so a declined call costs no hashing.
    let mut value = Vec::with_capacity(n);
    let mut cost = Vec::with_capacity(n);
    let mut reason: Vec<Option<DeclineReason>> = Vec::with_capacity(n);
    let mut any_requires = false;
    // The intent boosts and the target names' hashes first, in a loop of their own: each reads
    // a model's field names and a link's target through a few pointers, and a small loop lets
    // those reads of different candidates overlap.
    let mut hashes = Vec::with_capacity(n);
    for c in candidates {
        value.push(intent.boost(c.model, &mut memo));
        hashes.push(hash_name(c.link.tool.as_bytes()));
    }
    for (i, c) in candidates.iter().enumerate() {
        any_requires |= c.requires.is_some();
        let p = probability(c.link);
        let v = p * c.model.value_class.score() * value[i] * cost_factor(c.model, options);
        value[i] = v;
        let w = predicted_tokens(c.model, options.tokens_per_kb);
        cost.push(w);
        let target = c.link.tool.as_str();
        // A link that projects the next call's arguments out of this result names a new call
        // (a directory, then a file in it; a commit list, then a commit): the same tool again,
        // or one called lately, is what real sessions do next. Without a projection it would
        // be a re-read, which is the cache's business.
        let projected = c.link.projection.is_some();
        let r = if target == c.from && !projected {
            Some(DeclineReason::SelfLoop)
        } else if is_recent(target) && !projected {
            Some(DeclineReason::RecentlyUsed)
        } else if !c.model.may_speculate() {
            Some(DeclineReason::NotSpeculatable)
        } else if p < options.min_followup_probability {
            Some(DeclineReason::BelowMinProbability)
        } else {
            let name_of = |j: u32| candidates[j as usize].link.tool.as_str();
            match by_target.insert_or_get(target, hashes[i], i as u32, name_of) {
                None => None,
                Some(slot) => {
                    let j = by_target.at(slot) as usize;
                    let better = v
                        .total_cmp(&value[j])
                        .then_with(|| p.total_cmp(&probability(candidates[j].link)))
                        .then_with(|| candidates[j].from.cmp(c.from))
                        .is_gt();
                    if better {
                        reason[j] = Some(DeclineReason::DuplicateLink);
                        by_target.replace(slot, i as u32);
                        None
                    } else {
                        Some(DeclineReason::DuplicateLink)
                    }
                }
            }
        };
        reason.push(r);
    }

    // Prerequisites: the candidate each one needs, resolved through chains. Only built when some
    // eligible candidate has one; otherwise every parent is `NONE`.
    const MISSING: u32 = NONE - 1;
    let mut parent: Vec<u32> = Vec::new();
    let with_requires: &[Candidate<'a>] = if any_requires { candidates } else { &[] };
    for (i, c) in with_requires.iter().enumerate() {
        if let (None, Some(required)) = (reason[i], c.requires) {
            let p = match by_target.get(required, |j| candidates[j as usize].link.tool.as_str()) {
                Some(j) => j,
                None if is_recent(required) => continue,
                None => MISSING,
            };
            if parent.is_empty() {
                parent = vec![NONE; n];
            }
            parent[i] = p;
        }
    }
    let any_prerequisite = !parent.is_empty();
    if any_prerequisite {
        for i in 0..n {
            if reason[i].is_none() && u64::from(cost[i]) > budget {
                reason[i] = Some(DeclineReason::OverBudget);
            }
        }
        resolve_prerequisites(&mut parent, &mut reason, &cost, budget, MISSING);
    }

    // The knapsack over the eligible calls that cost something; free ones follow their chain.
    let parent_of = |i: usize| if any_prerequisite { parent[i] } else { NONE };
    let nearest_paid = |mut a: u32| {
        while a != NONE && cost[a as usize] == 0 {
            a = parent[a as usize];
        }
        a
    };
    let mut item_of = if any_prerequisite { vec![NONE; n] } else { Vec::new() };
    // Sized for every candidate at once: growing them is a copy per doubling.
    let mut candidate_of: Vec<u32> = Vec::with_capacity(n);
    let mut item_value: Vec<f64> = Vec::with_capacity(n);
    let mut item_cost: Vec<u64> = Vec::with_capacity(n);
    for i in 0..n {
        if reason[i].is_none() && cost[i] > 0 {
            if u64::from(cost[i]) > budget {
                // Only reached without prerequisites (with them, this was settled above).
                reason[i] = Some(DeclineReason::OverBudget);
                continue;
            }
            if any_prerequisite {
                item_of[i] = candidate_of.len() as u32;
            }
            candidate_of.push(i as u32);
            item_value.push(value[i]);
            item_cost.push(u64::from(cost[i]));
        }
    }
    let item_parent: Vec<u32> = if any_prerequisite {
        candidate_of
            .iter()
            .map(|&i| match nearest_paid(parent[i as usize]) {
                NONE => NONE,
                a => item_of[a as usize],
            })
            .collect()
    } else {
        Vec::new()
    };
    let solution = knapsack::solve(
        &knapsack::Instance {
            value: &item_value,
            cost: &item_cost,
            parent: &item_parent,
            capacity: budget,
        },
        knapsack::Limits { exact_limit: options.exact_limit, node_limit: options.node_limit },
        |a, b| {
            let tool = |x: u32| candidates[candidate_of[x as usize] as usize].link.tool.as_str();
            tool(a).cmp(tool(b))
        },
    );

    // Sized once: at most the eligible calls are admitted, the rest are declined.
    let eligible = reason.iter().filter(|r| r.is_none()).count();
    let mut admitted = Vec::with_capacity(eligible);
    let mut declined = Vec::with_capacity(n - eligible + candidate_of.len());
    // Items are numbered in candidate order: without prerequisites the next one is `item`.
    let mut item = 0usize;
    for (i, c) in candidates.iter().enumerate() {
        let reason = match reason[i] {
            Some(r) => Some(r),
            None if cost[i] > 0 => {
                item += 1;
                (!solution.selected[item - 1]).then_some(DeclineReason::NotSelected)
            }
            None => match parent_of(i) {
                NONE => None,
                a => match nearest_paid(a) {
                    NONE => None,
                    a => (!solution.selected[item_of[a as usize] as usize])
                        .then_some(DeclineReason::PrerequisiteDeclined),
                },
            },
        };
        let tool = c.link.tool.as_str();
        match reason {
            None => admitted.push(PlannedCall {
                tool,
                from: c.from,
                value: value[i],
                cost_tokens: cost[i],
                probability: probability(c.link),
            }),
            Some(reason) => declined.push(Declined {
                tool,
                from: c.from,
                reason,
                value: value[i],
                cost_tokens: cost[i],
            }),
        }
    }
    // Admitted tools are distinct (one link per target), so the order is total.
    admitted.sort_unstable_by(|a, b| {
        b.value
            .total_cmp(&a.value)
            .then_with(|| a.tool.cmp(b.tool))
            .then_with(|| a.from.cmp(b.from))
    });
    let total_value = admitted.iter().map(|c| c.value).sum();
    let total_cost = admitted.iter().map(|c| c.cost_tokens).sum();
    Plan { admitted, declined, total_value, total_cost, method: solution.method }
}

/// Declines candidates whose prerequisite chain is broken (`MISSING`, declined, or cyclic) with
/// [`DeclineReason::PrerequisiteDeclined`], and those whose chain together costs more than `budget`
/// with [`DeclineReason::OverBudget`]. `parent` is in candidate indices.
fn resolve_prerequisites(
    parent: &mut [u32],
    reason: &mut [Option<DeclineReason>],
    cost: &[u32],
    budget: u64,
    missing: u32,
) {
    const UNKNOWN: u8 = 0;
    const VISITING: u8 = 1;
    const GOOD: u8 = 2;
    const BAD: u8 = 3;
    let n = parent.len();
    let mut state = vec![UNKNOWN; n];
    let mut chain_cost = vec![0u64; n];
    let mut path: Vec<u32> = Vec::new();
    for start in 0..n {
        if reason[start].is_some() || state[start] != UNKNOWN {
            continue;
        }
        path.clear();
        let mut cur = start as u32;
        // Walk up until a settled candidate, a root, or a break in the chain.
        let (good, mut acc) = loop {
            match state[cur as usize] {
                GOOD => break (true, chain_cost[cur as usize]),
                BAD | VISITING => break (false, 0),
                _ => {}
            }
            state[cur as usize] = VISITING;
            path.push(cur);
            match parent[cur as usize] {
                NONE => break (true, 0),
                p if p == missing || reason[p as usize].is_some() => break (false, 0),
                p => cur = p,
            }
        };
        for &k in path.iter().rev() {
            if good {
                acc += u64::from(cost[k as usize]);
                chain_cost[k as usize] = acc;
                state[k as usize] = GOOD;
            } else {
                state[k as usize] = BAD;
            }
        }
    }
    for i in 0..n {
        if reason[i].is_some() {
            continue;
        }
        if state[i] == BAD {
            reason[i] = Some(DeclineReason::PrerequisiteDeclined);
            parent[i] = NONE;
        } else if chain_cost[i] > budget {
            reason[i] = Some(DeclineReason::OverBudget);
        }
    }
}

/// The kept link of each target tool, by name: open addressing with linear probing, each slot
/// holding a candidate index and 32 bits of its name's hash, so names are compared only on a hash
/// match. Why not a `HashMap<&str, u32>`: the map hashes byte by byte and probes through the
/// `Hash` machinery, and deduplicating took a quarter of a plan at a thousand candidates; target
/// names are short, so [`hash_name`] reads them in at most three words.
struct TargetTable {
    /// `(candidate, tag)` per slot; `candidate` is [`NONE`] for an empty slot.
    slots: Vec<(u32, u32)>,
    mask: usize,
}

impl TargetTable {
    /// A table for at most `n` names, at most half full.
    fn with_capacity(n: usize) -> Self {
        let size = (n * 2).max(8).next_power_of_two();
        Self { slots: vec![(NONE, 0); size], mask: size - 1 }
    }

    /// Where `name` is or would go: `Ok(slot)` when present, `Err(slot)` of the empty slot.
    fn find<'s>(
        &self,
        name: &str,
        hash: u64,
        name_of: impl Fn(u32) -> &'s str,
    ) -> (Result<usize, usize>, u32) {
        let tag = hash as u32;
        let mut slot = (hash >> 32) as usize & self.mask;
        loop {
            let (index, t) = self.slots[slot];
            if index == NONE {
                return (Err(slot), tag);
            }
            if t == tag && same(name_of(index), name) {
                return (Ok(slot), tag);
            }
            slot = (slot + 1) & self.mask;
        }
    }

    /// Inserts candidate `index` under `name` (whose [`hash_name`] is `hash`) unless the name is
    /// there: `None` when inserted, else the slot of the candidate already kept.
    fn insert_or_get<'s>(
        &mut self,
        name: &str,
        hash: u64,
        index: u32,
        name_of: impl Fn(u32) -> &'s str,
    ) -> Option<usize> {
        match self.find(name, hash, name_of) {
            (Ok(slot), _) => Some(slot),
            (Err(slot), tag) => {
                self.slots[slot] = (index, tag);
                None
            }
        }
    }

    /// The candidate kept in `slot`.
    fn at(&self, slot: usize) -> u32 {
        self.slots[slot].0
    }

    /// Keeps candidate `index` in `slot` instead (a better link to the same target).
    fn replace(&mut self, slot: usize, index: u32) {
        self.slots[slot].0 = index;
    }

    /// The candidate kept for `name`.
    fn get<'s>(&self, name: &str, name_of: impl Fn(u32) -> &'s str) -> Option<u32> {
        self.find(name, hash_name(name.as_bytes()), name_of).0.ok().map(|slot| self.at(slot))
    }
}

/// A fast non-keyed hash of a short byte string: its first and last words (overlapping when
/// shorter than 16 bytes), the words between, and its length, folded by 128-bit multiplication
/// (the wyhash construction). Tool names come from providers and configuration, not from an
/// adversary, and equal hashes are always confirmed by comparing the names.
fn hash_name(s: &[u8]) -> u64 {
    const K0: u64 = 0x9e37_79b9_7f4a_7c15;
    const K1: u64 = 0x243f_6a88_85a3_08d3;
    let n = s.len();
    let (mut a, b) = if n >= 8 {
        (word(&s[..8]), word(&s[n - 8..]))
    } else if n >= 4 {
        (u64::from(half(&s[..4])), u64::from(half(&s[n - 4..])))
    } else if n > 0 {
        (u64::from(s[0]) << 16 | u64::from(s[n / 2]) << 8 | u64::from(s[n - 1]), 0)
    } else {
        (0, 0)
    };
    let mut i = 8;
    while i + 8 < n {
        a = fold(a ^ K0, word(&s[i..i + 8]) ^ K1);
        i += 8;
    }
    fold(a ^ K0, b ^ K1 ^ n as u64)
}

/// The eight bytes of `h` from `at` as a little-endian word, zero past the end. Built in
/// registers from loads inside `h`: a copy into a padded buffer would stall the loads that follow
/// it (store forwarding fails on unaligned reads across several stores).
#[inline]
fn load(h: &[u8], at: usize) -> u64 {
    let n = h.len();
    if at + 8 <= n {
        word(&h[at..])
    } else if at >= n {
        0
    } else if n >= 8 {
        word(&h[n - 8..]) >> ((at + 8 - n) * 8)
    } else {
        let all = if n >= 4 {
            // Two overlapping halves; the bytes they share are equal, so or-ing is exact.
            u64::from(half(h)) | u64::from(half(&h[n - 4..])) << ((n - 4) * 8)
        } else {
            h.iter().rev().fold(0, |w, &b| w << 8 | u64::from(b))
        };
        all >> (at * 8)
    }
}

/// Whether two names are equal; short ones are compared a word at a time, without a call.
#[inline]
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0..8 => load(a, 0) == load(b, 0),
        8..=16 => word(a) == word(b) && word(&a[n - 8..]) == word(&b[n - 8..]),
        _ => a == b,
    }
}

/// Eight bytes as a little-endian word.
#[inline]
fn word(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
}

/// Four bytes as a little-endian word.
#[inline]
fn half(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"))
}

/// The high and low halves of the 128-bit product, xored.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ (product >> 64) as u64
}

#[cfg(test)]
mod tests;
