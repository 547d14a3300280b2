//! Escape-hatch telemetry: each time an MCP client needed a tool the list did not show —
//! `find_tools`, `load_tools`, a direct call of an unlisted tool (free recovery), or `call_tool`
//! of an unlisted tool — one event goes through the host's telemetry sink, and
//! [`EscapeSummary`] turns the events back into per-turn rates for `quiver tune analyze`.
//!
//! MCP does not mark turns, so a turn is inferred: a session's events belong to one turn while
//! each follows the previous one within [`TURN_GAP_MS`]. Agents chain the calls of one answer
//! seconds apart; a new user message takes longer. The share of turns that needed a hatch is the
//! signal for tuning the selector's threshold τ: high means the listed set misses too often.

use std::collections::BTreeMap;
use std::fmt;

use quiver_core::telemetry::{CallEvent, EventKind};

use quiver_runtime::host::Host;
use quiver_runtime::telemetry::now_ms;

/// Sessions of `quiver serve` are named with this prefix.
pub const SESSION_PREFIX: &str = "mcp-";

/// Events further apart than this start a new turn.
pub const TURN_GAP_MS: u64 = 30_000;

/// Writes one escape-hatch event (no arguments, only names), when telemetry is on.
pub fn record(host: &Host, session: &str, kind: EventKind, tool: &str) {
    let Some(sink) = host.telemetry() else { return };
    sink.record(&CallEvent::new(now_ms(), session, tool, kind));
}

/// Escape-hatch uses over `quiver serve` sessions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EscapeSummary {
    /// Sessions of `quiver serve` seen.
    pub sessions: usize,
    /// Turns inferred in them.
    pub turns: usize,
    /// Per hatch (`find_tools`, `load_tools`, `free_recovery`, `call_tool`): uses, and turns
    /// with at least one use.
    pub per_hatch: BTreeMap<&'static str, (u64, usize)>,
    /// Turns with any hatch.
    pub turns_with_any: usize,
    /// Tools called while not listed, with how often: the selector's recall misses.
    pub unlisted_calls: BTreeMap<String, u64>,
}

fn hatch_name(kind: EventKind) -> Option<&'static str> {
    match kind {
        EventKind::FindTools => Some("find_tools"),
        EventKind::LoadTools => Some("load_tools"),
        EventKind::FreeRecovery => Some("free_recovery"),
        EventKind::CallTool => Some("call_tool"),
        _ => None,
    }
}

impl EscapeSummary {
    /// Counts over `events` (any order within a file; sorted by time per session here).
    pub fn from_events(events: &[CallEvent]) -> Self {
        let mut by_session: BTreeMap<&str, Vec<&CallEvent>> = BTreeMap::new();
        for event in events.iter().filter(|e| e.session.starts_with(SESSION_PREFIX)) {
            by_session.entry(&event.session).or_default().push(event);
        }
        let mut summary = Self { sessions: by_session.len(), ..Self::default() };
        for events in by_session.values_mut() {
            events.sort_by_key(|e| e.ts_ms);
            let mut turn: Vec<&CallEvent> = Vec::new();
            let mut last = None;
            for event in events.iter().copied() {
                if last.is_some_and(|t| event.ts_ms.saturating_sub(t) > TURN_GAP_MS) {
                    summary.close_turn(&turn);
                    turn.clear();
                }
                last = Some(event.ts_ms);
                turn.push(event);
            }
            summary.close_turn(&turn);
        }
        summary
    }

    fn close_turn(&mut self, turn: &[&CallEvent]) {
        if turn.is_empty() {
            return;
        }
        self.turns += 1;
        let mut any = false;
        let mut seen: Vec<&'static str> = Vec::new();
        for event in turn {
            let Some(name) = hatch_name(event.kind) else { continue };
            any = true;
            let entry = self.per_hatch.entry(name).or_default();
            entry.0 += 1;
            if !seen.contains(&name) {
                seen.push(name);
                entry.1 += 1;
            }
            if matches!(event.kind, EventKind::FreeRecovery | EventKind::CallTool) {
                *self.unlisted_calls.entry(event.tool.clone()).or_default() += 1;
            }
        }
        self.turns_with_any += usize::from(any);
    }

    /// The lines `quiver tune analyze` prints; none when no `quiver serve` session was seen.
    pub fn lines(&self) -> Vec<String> {
        if self.sessions == 0 {
            return Vec::new();
        }
        let share = |n: usize| {
            if self.turns == 0 {
                0.0
            } else {
                100.0 * n as f64 / self.turns as f64
            }
        };
        let mut lines = vec![format!(
            "# escape hatches: {} of {} turn(s) in {} MCP session(s) needed a tool that was not \
             listed ({:.0}%)",
            self.turns_with_any,
            self.turns,
            self.sessions,
            share(self.turns_with_any)
        )];
        for name in ["find_tools", "load_tools", "free_recovery", "call_tool"] {
            let (uses, turns) = self.per_hatch.get(name).copied().unwrap_or_default();
            let per_turn = if self.turns == 0 { 0.0 } else { uses as f64 / self.turns as f64 };
            lines.push(format!(
                "#   {name:<14} {uses:>5} use(s), {per_turn:.2} per turn, in {turns} turn(s) \
                 ({:.0}%)",
                share(turns)
            ));
        }
        if !self.unlisted_calls.is_empty() {
            let misses: Vec<String> =
                self.unlisted_calls.iter().map(|(tool, n)| format!("{tool} ×{n}")).collect();
            lines.push(format!("# called while not listed: {}", misses.join(", ")));
        }
        lines
    }
}

impl fmt::Display for EscapeSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in self.lines() {
            writeln!(f, "{line}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(session: &str, ts_ms: u64, kind: EventKind, tool: &str) -> CallEvent {
        CallEvent::new(ts_ms, session, tool, kind)
    }

    #[test]
    fn turns_split_at_long_gaps_and_misses_are_named() {
        let events = vec![
            event("mcp-1", 1_000, EventKind::FindTools, "find_tools"),
            event("mcp-1", 2_000, EventKind::CallTool, "github.get_issue"),
            event("mcp-1", 3_000, EventKind::FindTools, "find_tools"),
            // a new turn: the user took a minute
            event("mcp-1", 63_000, EventKind::Call, "github.list_issues"),
            event("mcp-2", 1_000, EventKind::FreeRecovery, "github.get_issue"),
            event("cli", 1_000, EventKind::Call, "github.get_issue"),
        ];
        let summary = EscapeSummary::from_events(&events);
        assert_eq!((summary.sessions, summary.turns, summary.turns_with_any), (2, 3, 2));
        assert_eq!(summary.per_hatch["find_tools"], (2, 1));
        assert_eq!(summary.unlisted_calls["github.get_issue"], 2);
        let text = summary.to_string();
        assert!(text.contains("2 of 3 turn(s) in 2 MCP session(s)"), "{text}");
        assert!(text.contains("called while not listed: github.get_issue ×2"), "{text}");
    }

    #[test]
    fn nothing_is_printed_without_serve_sessions() {
        let events = vec![event("cli", 1, EventKind::Call, "github.get_issue")];
        assert!(EscapeSummary::from_events(&events).lines().is_empty());
    }
}
