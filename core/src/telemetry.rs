//! Whether the pipeline pays off: one event per call, and the effectiveness rates computed from
//! them.
//!
//! An event never holds argument values or secrets: calls are identified by a hash of their
//! canonical arguments ([`arguments_hash`]), which is enough to tell that a later call repeated a
//! pre-fetched one. The rates are the ones the value-models paper defines:
//!
//! - **prefetch hit rate** = pre-fetches the agent then asked for / pre-fetches (target ≥ 60%);
//! - **decline recall loss** = declined follow-ups the agent called anyway / declines (≤ 10%);
//! - **cost overrun rate** = calls whose actual tokens were ≥ 130% of the prediction / predictions
//!   (≤ 15%);
//! - **race win** = pre-fetches that landed before their response went back / pre-fetches;
//! - **waste** = pre-fetches nobody asked for / pre-fetches;
//!
//! plus three calls-saved buckets (pre-fetch hits, cache hits, fail-fast stops) and the tokens
//! they kept out of the model's context. "Asked for later" is decided here, by
//! [`annotate_citations`], not by the live pipeline: it needs the calls that came after.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::session_cache::CallKey;

/// What an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A call the agent made (served by the provider, or from the cache).
    Call,
    /// A call the host made speculatively.
    Prefetch,
    /// A follow-up the planner declined.
    Decline,
    /// A call stopped by `fail_fast_after_n`.
    FailFast,
    /// `quiver serve`'s `find_tools` was asked for tools (`tool` is `find_tools`).
    FindTools,
    /// `quiver serve`'s `load_tools` loaded a bundle or tool (`tool` names what was asked for).
    LoadTools,
    /// In `dynamic` mode, the agent called an enabled tool that was not listed, and it ran.
    FreeRecovery,
    /// In `search` mode, the agent ran a tool that was not listed through `call_tool`.
    CallTool,
}

impl EventKind {
    /// The escape hatches of `quiver serve`: the agent needed a tool the list did not show.
    pub fn is_escape_hatch(self) -> bool {
        matches!(
            self,
            EventKind::FindTools
                | EventKind::LoadTools
                | EventKind::FreeRecovery
                | EventKind::CallTool
        )
    }
}

/// One telemetry event (a line of JSONL).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallEvent {
    /// Milliseconds since the Unix epoch.
    pub ts_ms: u64,
    /// The session it belongs to.
    pub session: String,
    /// Qualified tool name.
    pub tool: String,
    /// [`arguments_hash`] of the call's arguments; empty for declines.
    #[serde(default)]
    pub args_hash: String,
    /// What happened.
    pub kind: EventKind,
    /// The planner's predicted cost in tokens, when it predicted one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_cost_tokens: Option<u32>,
    /// Why the planner declined it (for declines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decline_reason: Option<String>,
    /// Estimated tokens of the result as the provider returned it.
    #[serde(default)]
    pub tokens_before: u64,
    /// Estimated tokens the model received.
    #[serde(default)]
    pub tokens_after: u64,
    /// Wall time of the call.
    #[serde(default)]
    pub latency_ms: u64,
    /// Served from the session cache.
    #[serde(default)]
    pub dedup_hit: bool,
    /// The call failed.
    #[serde(default)]
    pub is_error: bool,
    /// For pre-fetches: landed before their response went back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landed_in_time: Option<bool>,
    /// For pre-fetches and declines: whether the agent called the same thing within the next
    /// calls (filled in by [`annotate_citations`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cited_in_next_n_turns: Option<bool>,
    /// The authenticated user the call was made for (`quiver serve --http`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The replica that wrote the event (host name and process id, or `[state] replica`), so
    /// the files of several replicas can be read together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
}

impl CallEvent {
    /// An event of `kind` for `tool` in `session` at `ts_ms`, every measurement unset; callers
    /// fill in what they observed.
    pub fn new(ts_ms: u64, session: &str, tool: &str, kind: EventKind) -> Self {
        Self {
            ts_ms,
            session: session.to_owned(),
            tool: tool.to_owned(),
            args_hash: String::new(),
            kind,
            predicted_cost_tokens: None,
            decline_reason: None,
            tokens_before: 0,
            tokens_after: 0,
            latency_ms: 0,
            dedup_hit: false,
            is_error: false,
            landed_in_time: None,
            cited_in_next_n_turns: None,
            user: None,
            replica: None,
        }
    }
}

/// A stable, irreversible identity of a call's arguments: the first 16 hex digits of the SHA-256
/// of the tool and its canonical arguments (control arguments left out, keys sorted).
pub fn arguments_hash(key: &CallKey) -> String {
    let digest = Sha256::digest(key.to_string().as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Fills `cited_in_next_n_turns` of every pre-fetch (the agent called the same tool with the
/// same arguments within its next `n` calls of that session) and every decline (the agent made
/// the call it would have made — same tool, same arguments — within its next `n` calls; a
/// decline that names no arguments, when the provider could not project them, counts any call
/// of the tool). A pre-fetch of other arguments would not have served the agent's call, so
/// such a call is no recall lost. Events are taken in the order given.
pub fn annotate_citations(events: &mut [CallEvent], n: usize) {
    for i in 0..events.len() {
        if !matches!(events[i].kind, EventKind::Prefetch | EventKind::Decline) {
            continue;
        }
        let (session, tool, hash) = (&events[i].session, &events[i].tool, &events[i].args_hash);
        let cited = events[i + 1..]
            .iter()
            .filter(|e| e.kind == EventKind::Call && &e.session == session)
            .take(n)
            .any(|e| &e.tool == tool && (hash.is_empty() || &e.args_hash == hash));
        events[i].cited_in_next_n_turns = Some(cited);
    }
}

/// Counts over events, and the rates they give.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Effectiveness {
    /// Pre-fetches dispatched.
    pub prefetches: u64,
    /// Pre-fetches the agent then asked for.
    pub prefetches_cited: u64,
    /// Pre-fetches that landed before their response went back.
    pub prefetches_in_time: u64,
    /// Follow-ups the planner declined.
    pub declines: u64,
    /// Declined follow-ups the agent called anyway.
    pub declines_invoked: u64,
    /// Calls with a predicted cost.
    pub predictions: u64,
    /// Of those, calls whose tokens were ≥ 130% of the prediction.
    pub overruns: u64,
    /// Calls served from the session cache.
    pub dedup_hits: u64,
    /// Calls stopped by fail-fast.
    pub fail_fast_stops: u64,
    /// Tokens kept out of the model's context by the three buckets.
    pub tokens_saved: u64,
}

/// A call whose tokens reach this share of its prediction overran it.
const OVERRUN: f64 = 1.3;

impl Effectiveness {
    /// Adds one event (after [`annotate_citations`], for the citation-based rates).
    pub fn accumulate(&mut self, event: &CallEvent) {
        match event.kind {
            EventKind::Prefetch => {
                self.prefetches += 1;
                self.prefetches_in_time += u64::from(event.landed_in_time == Some(true));
                if event.cited_in_next_n_turns == Some(true) {
                    self.prefetches_cited += 1;
                    self.tokens_saved += event.tokens_after;
                }
            }
            EventKind::Decline => {
                self.declines += 1;
                self.declines_invoked += u64::from(event.cited_in_next_n_turns == Some(true));
            }
            EventKind::FailFast => {
                self.fail_fast_stops += 1;
                self.tokens_saved += u64::from(event.predicted_cost_tokens.unwrap_or(0));
            }
            // Counted by `quiver tune analyze`'s escape-hatch section, not here.
            EventKind::FindTools
            | EventKind::LoadTools
            | EventKind::FreeRecovery
            | EventKind::CallTool => {}
            EventKind::Call => {
                if event.dedup_hit {
                    self.dedup_hits += 1;
                    self.tokens_saved += event.tokens_before;
                } else if let Some(predicted) = event.predicted_cost_tokens.filter(|p| *p > 0) {
                    self.predictions += 1;
                    self.overruns +=
                        u64::from(event.tokens_before as f64 >= OVERRUN * f64::from(predicted));
                }
            }
        }
    }

    /// `part / whole`, or `None` when nothing was counted.
    fn rate(part: u64, whole: u64) -> Option<f64> {
        (whole > 0).then(|| part as f64 / whole as f64)
    }

    /// Pre-fetches the agent asked for, of all pre-fetches.
    pub fn prefetch_hit_rate(&self) -> Option<f64> {
        Self::rate(self.prefetches_cited, self.prefetches)
    }
    /// Declined follow-ups the agent called anyway, of all declines.
    pub fn decline_recall_loss(&self) -> Option<f64> {
        Self::rate(self.declines_invoked, self.declines)
    }
    /// Calls that overran their prediction by 30% or more, of all predicted calls.
    pub fn cost_overrun_rate(&self) -> Option<f64> {
        Self::rate(self.overruns, self.predictions)
    }
    /// Pre-fetches that landed before their response went back.
    pub fn race_win_rate(&self) -> Option<f64> {
        Self::rate(self.prefetches_in_time, self.prefetches)
    }
    /// Pre-fetches nobody asked for.
    pub fn waste_rate(&self) -> Option<f64> {
        Self::rate(self.prefetches - self.prefetches_cited, self.prefetches)
    }
    /// Model round trips saved: pre-fetch hits + cache hits + fail-fast stops.
    pub fn calls_saved(&self) -> u64 {
        self.prefetches_cited + self.dedup_hits + self.fail_fast_stops
    }
}

/// The one-line report: `prefetch_hit=72.1% decline_recall_loss=8.4% … tokens_saved=128400`.
impl fmt::Display for Effectiveness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |r: Option<f64>| r.map(|r| format!("{:.1}%", r * 100.0)).unwrap_or("-".into());
        write!(
            f,
            "prefetch_hit={} decline_recall_loss={} cost_overrun={} race_win={} waste={} \
             calls_saved={} (prefetch={}, dedup={}, fail_fast={}) tokens_saved={} prefetches={} \
             declines={} predictions={}",
            pct(self.prefetch_hit_rate()),
            pct(self.decline_recall_loss()),
            pct(self.cost_overrun_rate()),
            pct(self.race_win_rate()),
            pct(self.waste_rate()),
            self.calls_saved(),
            self.prefetches_cited,
            self.dedup_hits,
            self.fail_fast_stops,
            self.tokens_saved,
            self.prefetches,
            self.declines,
            self.predictions,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: EventKind, tool: &str, args: serde_json::Value) -> CallEvent {
        CallEvent {
            args_hash: arguments_hash(&CallKey::new(tool, &args, None)),
            tokens_before: 100,
            tokens_after: 80,
            latency_ms: 5,
            ..CallEvent::new(0, "s", tool, kind)
        }
    }

    #[test]
    fn hashes_identify_calls_without_revealing_arguments() {
        let a = arguments_hash(&CallKey::new(
            "github.get_issue",
            &json!({"number": 7, "owner": "o"}),
            None,
        ));
        let b = arguments_hash(&CallKey::new(
            "github.get_issue",
            &json!({"owner": "o", "number": 7}),
            None,
        ));
        let c = arguments_hash(&CallKey::new(
            "github.get_issue",
            &json!({"owner": "o", "number": 8}),
            None,
        ));
        assert_eq!(a, b, "key order does not matter");
        assert_ne!(a, c);
        assert_eq!(a.len(), 16);
        let secret = json!({"token": "ghp_secret_value_123"});
        let line = serde_json::to_string(&event(EventKind::Call, "x.y", secret)).unwrap();
        assert!(!line.contains("ghp_secret_value_123"), "{line}");
    }

    #[test]
    fn citations_and_rates_follow_the_paper() {
        let pr = |n: u64| json!({"owner": "o", "repo": "r", "number": n});
        let mut prefetch_hit = event(EventKind::Prefetch, "github.get_pull_request", pr(1));
        prefetch_hit.landed_in_time = Some(true);
        let mut prefetch_miss = event(EventKind::Prefetch, "github.get_pull_request", pr(2));
        prefetch_miss.landed_in_time = Some(false);
        // A decline names the call the pre-fetch would have made: the agent made it.
        let decline_invoked = event(EventKind::Decline, "github.list_pull_request_files", pr(1));
        let decline_ignored = event(EventKind::Decline, "github.get_job_logs", json!({}));
        let mut served = event(EventKind::Call, "github.get_pull_request", pr(1));
        served.dedup_hit = true;
        let mut overran = event(EventKind::Call, "github.list_pull_request_files", pr(1));
        overran.predicted_cost_tokens = Some(70);
        let mut stopped = event(EventKind::FailFast, "github.search_issues", json!({"q": "x"}));
        stopped.predicted_cost_tokens = Some(500);
        let mut events = vec![
            prefetch_hit,
            prefetch_miss,
            decline_invoked,
            decline_ignored,
            served,
            overran,
            stopped,
        ];
        annotate_citations(&mut events, 3);
        assert_eq!(events[0].cited_in_next_n_turns, Some(true));
        assert_eq!(events[1].cited_in_next_n_turns, Some(false), "other arguments");
        assert_eq!(events[2].cited_in_next_n_turns, Some(true));
        assert_eq!(events[3].cited_in_next_n_turns, Some(false));

        // A decline of other arguments than the agent's call lost nothing; one that names no
        // arguments (the provider could not project them) counts any call of its tool.
        let other = event(EventKind::Decline, "github.list_pull_request_files", pr(2));
        let mut unnamed = event(EventKind::Decline, "github.list_pull_request_files", pr(2));
        unnamed.args_hash.clear();
        let call = event(EventKind::Call, "github.list_pull_request_files", pr(1));
        let mut more = vec![other, unnamed, call];
        annotate_citations(&mut more, 3);
        assert_eq!(more[0].cited_in_next_n_turns, Some(false), "other arguments");
        assert_eq!(more[1].cited_in_next_n_turns, Some(true), "no arguments named");

        let mut totals = Effectiveness::default();
        events.iter().for_each(|e| totals.accumulate(e));
        assert_eq!(totals.prefetch_hit_rate(), Some(0.5));
        assert_eq!(totals.decline_recall_loss(), Some(0.5));
        assert_eq!(totals.cost_overrun_rate(), Some(1.0), "100 tokens ≥ 130% of 70");
        assert_eq!(totals.race_win_rate(), Some(0.5));
        assert_eq!(totals.waste_rate(), Some(0.5));
        assert_eq!(totals.calls_saved(), 3);
        assert_eq!(totals.tokens_saved, 80 + 100 + 500);
        assert_eq!(
            totals.to_string(),
            "prefetch_hit=50.0% decline_recall_loss=50.0% cost_overrun=100.0% race_win=50.0% \
             waste=50.0% calls_saved=3 (prefetch=1, dedup=1, fail_fast=1) tokens_saved=680 \
             prefetches=2 declines=2 predictions=1"
        );
    }

    #[test]
    fn citations_only_count_the_same_session_within_n_calls() {
        let args = json!({"n": 1});
        let mut events = vec![
            event(EventKind::Prefetch, "a.b", args.clone()),
            event(EventKind::Call, "x.y", json!({})),
            event(EventKind::Call, "x.z", json!({})),
            event(EventKind::Call, "a.b", args.clone()),
        ];
        let mut other_session = events.clone();
        annotate_citations(&mut events, 2);
        assert_eq!(events[0].cited_in_next_n_turns, Some(false), "third call is past n = 2");
        other_session[3].session = "t".into();
        annotate_citations(&mut other_session, 5);
        assert_eq!(other_session[0].cited_in_next_n_turns, Some(false));
        assert_eq!(Effectiveness::default().to_string().split(' ').next(), Some("prefetch_hit=-"));
    }
}
