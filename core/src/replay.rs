//! What a replay of recorded agent sessions measures, as plain functions over what the replay
//! observed: the agent's wall time under a think-time model ([`wall_time_ms`]) and **argument
//! survival** ([`ArgumentSurvival`]) — of the values a later call used that came from an earlier
//! answer, the share still present in what quiver delivered for that answer.
//!
//! Both are models, and say so: the wall time takes one service request as `service_ms`, the
//! think time between an answer and the next call as `think_ms`, and a pre-fetch as one request
//! started when its call's answer was ready; survival looks for a value as text (a JSON number
//! after a `:` or a `#`, a string between non-word characters), which can find a value that was
//! there by coincidence and never misses one that was there.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// Whether recorded sessions of `task` belong to the held-out part (the rest calibrate): by the
/// first byte of the SHA-256 of the task's name, so every run of a task falls in the same part
/// and the split never changes when sessions are added.
pub fn task_is_held_out(task: &str) -> bool {
    use sha2::{Digest, Sha256};
    Sha256::digest(task.as_bytes())[0] % 2 == 1
}

/// How a call was answered, for the wall-time model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// By the service, in this many requests.
    Service {
        /// Requests made for the call (one for most tools).
        requests: u32,
    },
    /// From the session cache (a repeat): no wait.
    Cache,
    /// By the pre-fetch that call `from` (an index into the same session) started.
    Prefetch {
        /// The call whose answer started the pre-fetch.
        from: usize,
    },
    /// As long as the recording says it took (a call not replayed: another server's tool).
    Took {
        /// Its recorded latency.
        ms: u64,
    },
}

/// One call of a session as the wall-time model sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedCall {
    /// How it was answered.
    pub served: Served,
    /// Pre-fetches its answer started.
    pub prefetches_started: usize,
    /// The agent's think time before it, when the recording's timestamps say (else the
    /// model's `think_ms`).
    pub think_before_ms: Option<u64>,
}

/// The wall-time model's constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeModel {
    /// The agent's think time between an answer and its next call.
    pub think_ms: u64,
    /// One service request.
    pub service_ms: u64,
    /// How long an answer waits for the pre-fetches it started (`prefetch_timeout_ms`).
    pub prefetch_wait_ms: u64,
}

/// The session's wall time, from its first call to its last answer, under `model`.
///
/// A call's pre-fetches start when the service has answered it and run in parallel (the
/// planner starts at most `max_parallel_prefetches`, each one request); its answer waits for
/// them at most `prefetch_wait_ms`. A call served by a pre-fetch waits for what is left of it —
/// nothing, when the think time covered it. The next call starts `think_ms` after an answer,
/// or as long after as the recording says.
pub fn wall_time_ms(model: &TimeModel, calls: &[TimedCall]) -> u64 {
    let mut ready_at = vec![0u64; calls.len()];
    let mut now = 0u64;
    for (i, call) in calls.iter().enumerate() {
        if i > 0 {
            now += call.think_before_ms.unwrap_or(model.think_ms);
        }
        let answered = match call.served {
            Served::Service { requests } => now + u64::from(requests) * model.service_ms,
            Served::Took { ms } => now + ms,
            Served::Cache => now,
            Served::Prefetch { from } => now.max(ready_at.get(from).copied().unwrap_or(now)),
        };
        now = if call.prefetches_started > 0 {
            ready_at[i] = answered + model.service_ms;
            answered + model.prefetch_wait_ms.min(model.service_ms)
        } else {
            answered
        };
    }
    now
}

/// Arguments that never carry a value taken from an answer: paging, sizes, switches, and the
/// repository the task names.
const NOT_IDENTIFYING: &[&str] = &[
    "owner",
    "repo",
    "page",
    "per_page",
    "perPage",
    "page_size",
    "pageSize",
    "limit",
    "offset",
    "max_results",
    "maxResults",
    "max_length",
    "start_index",
    "timeout",
    "state",
    "direction",
    "sort",
    "order",
    "tail_lines",
    "max_bytes",
    "max_patch_bytes",
    "start_line",
    "return_content",
    "failed_only",
    "draft",
    "merge_method",
    "event",
    "side",
];

/// The values of `args` that identify something (numbers, SHAs, paths, names), with their
/// argument: scalar values of arguments not in the paging/switch list, strings of 3 to 200
/// characters without whitespace (free text and queries are written, not copied), integers
/// other than 0.
pub fn identifying_values(args: &Value) -> Vec<(String, Value)> {
    let Some(map) = args.as_object() else { return Vec::new() };
    let mut values = Vec::new();
    for (name, value) in map {
        if NOT_IDENTIFYING.contains(&name.as_str()) {
            continue;
        }
        let items: Vec<&Value> = match value {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        for item in items {
            let keep = match item {
                Value::String(s) => {
                    (3..=200).contains(&s.chars().count()) && !s.chars().any(char::is_whitespace)
                }
                Value::Number(n) => n.as_u64().is_some_and(|n| n > 0),
                _ => false,
            };
            if keep {
                values.push((name.clone(), item.clone()));
            }
        }
    }
    values
}

/// Whether `value` appears in `text` (an answer as the model read it): a number as a JSON value
/// (after `:` or `#`, not followed by a digit), a string as itself between characters that are
/// not part of a word (letters, digits, `_`, `-`, `.`, `/`). Both forms of a string are looked
/// for: as written, and escaped as JSON.
pub fn value_occurs(value: &Value, text: &str) -> bool {
    match value {
        Value::Number(n) => {
            let digits = n.to_string();
            let bytes = text.as_bytes();
            text.match_indices(digits.as_str()).any(|(at, _)| {
                let before = text[..at].trim_end_matches(' ').as_bytes().last().copied();
                let after = bytes.get(at + digits.len()).copied();
                matches!(before, Some(b':' | b'#' | b'"' | b'/' | b'='))
                    && !after.is_some_and(|b| b.is_ascii_digit())
            })
        }
        Value::String(s) => {
            let escaped = Value::String(s.clone()).to_string();
            let escaped = &escaped[1..escaped.len() - 1];
            [s.as_str(), escaped].iter().any(|needle| bounded_occurrence(text, needle))
        }
        _ => false,
    }
}

/// A value as text, so `54` and `"54"` are the same value.
fn canonical(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.')
}

fn bounded_occurrence(text: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    text.match_indices(needle).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + needle.len()..].chars().next();
        // A path's tail may follow a `/` (`src/main.rs` in `repo/src/main.rs`) but a value is
        // not the middle of a longer name.
        !before.is_some_and(is_word) && !after.is_some_and(|c| is_word(c) || c == '/')
    })
}

/// One call of a session, for argument survival.
#[derive(Debug, Clone, Copy)]
pub struct SurvivalCall<'a> {
    /// The tool (for the per-tool counts: the tool of the answer a value came from).
    pub tool: &'a str,
    /// The call's arguments as the agent sent them.
    pub args: &'a Value,
    /// The service's recorded answer, as the model read it from the original server.
    pub recorded: Option<&'a str>,
    /// What quiver delivered for the same call.
    pub delivered: Option<&'a str>,
}

/// A value a later call used that quiver's answer no longer showed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LostValue {
    /// The tool whose answer showed it in the recording.
    pub from_tool: String,
    /// The argument that used it.
    pub argument: String,
    /// The value.
    pub value: Value,
}

/// Of the values later calls used that came from an earlier answer, how many quiver's answer
/// still showed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ArgumentSurvival {
    /// Values a call used that the session's prompt did not contain and an earlier recorded
    /// answer did.
    pub used: u64,
    /// Of those, values still in what quiver delivered for that answer.
    pub survived: u64,
    /// Per tool of the answer: (used, survived).
    pub per_tool: BTreeMap<String, (u64, u64)>,
    /// The values lost, in order.
    pub lost: Vec<LostValue>,
}

impl ArgumentSurvival {
    /// Adds one session: for each call, each identifying value of its arguments that neither
    /// `prompt` nor an earlier call's arguments contain (the agent had it already) and that an
    /// earlier recorded answer shows is counted, as survived when what quiver delivered for one
    /// of those answers shows it too. Answers quiver did not replay (`delivered` is `None`)
    /// neither count nor excuse: a value only they showed is left out.
    pub fn add_session(&mut self, prompt: &str, calls: &[SurvivalCall<'_>]) {
        let mut known: std::collections::HashSet<String> = std::collections::HashSet::new();
        for (j, call) in calls.iter().enumerate() {
            let values = identifying_values(call.args);
            for (argument, value) in &values {
                let canonical = canonical(value);
                if known.contains(&canonical) || value_occurs(value, prompt) {
                    continue;
                }
                let sources: Vec<&SurvivalCall<'_>> = calls[..j]
                    .iter()
                    .filter(|earlier| earlier.delivered.is_some())
                    .filter(|earlier| earlier.recorded.is_some_and(|t| value_occurs(value, t)))
                    .collect();
                let Some(latest) = sources.last() else { continue };
                let survived = sources
                    .iter()
                    .any(|source| source.delivered.is_some_and(|t| value_occurs(value, t)));
                self.used += 1;
                self.survived += u64::from(survived);
                let counts = self.per_tool.entry(latest.tool.to_owned()).or_default();
                counts.0 += 1;
                counts.1 += u64::from(survived);
                if !survived {
                    self.lost.push(LostValue {
                        from_tool: latest.tool.to_owned(),
                        argument: argument.clone(),
                        value: value.clone(),
                    });
                }
            }
            known.extend(values.iter().map(|(_, v)| canonical(v)));
        }
    }

    /// `survived / used`, when any value was used.
    pub fn rate(&self) -> Option<f64> {
        (self.used > 0).then(|| self.survived as f64 / self.used as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MODEL: TimeModel = TimeModel { think_ms: 2000, service_ms: 300, prefetch_wait_ms: 1000 };

    #[test]
    fn a_prefetch_covered_by_think_time_costs_nothing_and_one_still_running_costs_the_rest() {
        let service = |prefetches_started| TimedCall {
            served: Served::Service { requests: 1 },
            prefetches_started,
            think_before_ms: None,
        };
        // Off: two service calls and the think time between them.
        assert_eq!(wall_time_ms(&MODEL, &[service(0), service(0)]), 300 + 2000 + 300);
        // On: the first answer waits for its pre-fetch (300 ms), the second is served at once.
        let hit = TimedCall {
            served: Served::Prefetch { from: 0 },
            prefetches_started: 0,
            think_before_ms: None,
        };
        assert_eq!(wall_time_ms(&MODEL, &[service(1), hit]), 300 + 300 + 2000);
        // With no think time the second call waits for nothing either: the first answer
        // already waited for the pre-fetch.
        let quick = TimeModel { think_ms: 0, ..MODEL };
        assert_eq!(wall_time_ms(&quick, &[service(1), hit]), 600);
        // An answer that does not wait for its pre-fetches: the hit waits for what is left.
        let eager = TimeModel { think_ms: 100, prefetch_wait_ms: 0, ..MODEL };
        assert_eq!(wall_time_ms(&eager, &[service(1), hit]), 300 + 100 + 200);
        // A wasted pre-fetch still holds its answer.
        assert_eq!(wall_time_ms(&MODEL, &[service(1), service(0)]), 600 + 2000 + 300);
        let cached =
            TimedCall { served: Served::Cache, prefetches_started: 0, think_before_ms: None };
        assert_eq!(wall_time_ms(&MODEL, &[service(0), cached]), 2300);
        // The recording's own think time and latency, where it has them.
        let recorded = TimedCall {
            served: Served::Took { ms: 40 },
            prefetches_started: 0,
            think_before_ms: Some(9000),
        };
        assert_eq!(wall_time_ms(&MODEL, &[service(0), recorded]), 300 + 9000 + 40);
    }

    #[test]
    fn values_are_found_as_json_values_and_whole_names_only() {
        let text = r#"[{"number":42,"sha":"abc123def","path":"src/main.rs","title":"fix #7"}]"#;
        assert!(value_occurs(&json!(42), text));
        assert!(value_occurs(&json!(7), text));
        assert!(!value_occurs(&json!(4), text), "a digit of 42 is not 4");
        assert!(!value_occurs(&json!(2), text));
        assert!(value_occurs(&json!("abc123def"), text));
        assert!(!value_occurs(&json!("abc123"), text), "a prefix of a SHA is not the SHA");
        assert!(value_occurs(&json!("src/main.rs"), text));
        assert!(value_occurs(&json!("main.rs"), text), "a file name at the end of its path");
        assert!(!value_occurs(&json!("src"), text), "a directory is not its path's file");
        let quoted = r#"{"body":"say \"hi\" now"}"#;
        assert!(value_occurs(&json!("\"hi\""), quoted));
    }

    #[test]
    fn survival_counts_values_from_earlier_answers_and_names_those_lost() {
        let list_args = json!({"owner": "o", "repo": "r", "per_page": 100});
        let recorded_list = r#"[{"sha":"aaa111","path":"docs/a.md"},{"sha":"bbb222"}]"#;
        let delivered_list = r#"[{"sha":"aaa111"},{"sha":"bbb222"}]"#;
        let get_args = json!({"owner": "o", "repo": "r", "sha": "bbb222"});
        let file_args = json!({"owner": "o", "repo": "r", "path": "docs/a.md"});
        let prompt_args = json!({"owner": "o", "repo": "r", "number": 12});
        let calls = [
            SurvivalCall {
                tool: "list",
                args: &list_args,
                recorded: Some(recorded_list),
                delivered: Some(delivered_list),
            },
            SurvivalCall { tool: "get", args: &get_args, recorded: None, delivered: None },
            SurvivalCall { tool: "file", args: &file_args, recorded: None, delivered: None },
            SurvivalCall { tool: "issue", args: &prompt_args, recorded: None, delivered: None },
        ];
        let mut survival = ArgumentSurvival::default();
        survival.add_session("Look at issue #12 of o/r", &calls);
        assert_eq!((survival.used, survival.survived), (2, 1));
        assert_eq!(survival.per_tool["list"], (2, 1));
        assert_eq!(
            survival.lost,
            vec![LostValue {
                from_tool: "list".into(),
                argument: "path".into(),
                value: json!("docs/a.md")
            }]
        );
        assert_eq!(survival.rate(), Some(0.5));

        // A value counts once, where it was first used; one only an answer quiver did not
        // replay showed is left out.
        let again = json!({"owner": "o", "repo": "r", "sha": "bbb222"});
        let other_args = json!({"id": "zzz999"});
        let other_used = json!({"sha": "zzz999x"});
        let calls = [
            calls[0],
            calls[1],
            SurvivalCall { tool: "get", args: &again, recorded: None, delivered: None },
            SurvivalCall {
                tool: "other",
                args: &other_args,
                recorded: Some(r#"{"sha":"zzz999x"}"#),
                delivered: None,
            },
            SurvivalCall { tool: "get", args: &other_used, recorded: None, delivered: None },
        ];
        let mut survival = ArgumentSurvival::default();
        survival.add_session("", &calls);
        assert_eq!((survival.used, survival.survived), (1, 1), "{:?}", survival.lost);
    }
}
