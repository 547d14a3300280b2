//! A session: the calls of one agent conversation (an MCP connection, a framework's run) through
//! the host, with what the value models ask of them — a repeat inside `freshness_ttl_s` is served
//! from the session cache as a short reference, a mutation drops the cached results it makes
//! stale (`invalidates`), the n+1-th identical unproductive call is stopped with a hint
//! (`fail_fast_after_n`), and results are trimmed to the field groups worth their tokens, with a
//! note saying how to ask for the rest.
//!
//! Pre-fetching (the planner and the speculation engine) builds on this and is not here yet.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use quiver_core::response_projection::{project, Requested};
use quiver_core::session_cache::{
    is_control_argument, tool_declares_fields, ttl_of, CallKey, SessionCache,
};
use quiver_core::{Content, ToolResult};
use serde_json::{json, Value};

use crate::host::Host;

/// Results kept per session, by default.
pub const DEFAULT_CACHE_CAPACITY: usize = 256;

/// What a session call did besides calling the provider, for telemetry and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallEffects {
    /// Served from the session cache; the provider was not called.
    pub cache_hit: bool,
    /// Stopped by `fail_fast_after_n`; the provider was not called.
    pub stopped: bool,
    /// Estimated tokens of the provider's structured result.
    pub tokens_before: u64,
    /// Estimated tokens after projection.
    pub tokens_after: u64,
}

/// One conversation's calls through a host.
pub struct Session<'h> {
    host: &'h Host,
    id: String,
    cache: Mutex<SessionCache>,
    timeout: Option<Duration>,
}

impl<'h> Session<'h> {
    /// A session named `id` (it reaches providers as `ToolContext::session`).
    pub fn new(host: &'h Host, id: impl Into<String>) -> Self {
        Self {
            host,
            id: id.into(),
            cache: Mutex::new(SessionCache::new(DEFAULT_CACHE_CAPACITY)),
            timeout: None,
        }
    }

    /// Gives every call of this session at most `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Calls `name` with `args` (which may carry a `fields` list asking for opt-in groups) and
    /// `intent` keywords of the current turn.
    pub async fn call(
        &self,
        name: &str,
        args: Value,
        intent: &[String],
    ) -> (ToolResult, CallEffects) {
        let Some(tool) = self.host.tool(name) else {
            return (
                self.host.call(name, args, self.timeout, &self.id, None).await,
                CallEffects::default(),
            );
        };
        let qualified = tool.name.to_string();
        let model = self.host.value_model(tool).model;
        let schema = &tool.spec.input_schema;
        let key = CallKey::new(&qualified, &args, Some(schema));
        let now = Instant::now();
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(hint) = cache.should_stop(&key, model.fail_fast_after_n) {
                let result = ToolResult::text(hint).with_metadata("fail_fast", json!(true));
                return (result, CallEffects { stopped: true, ..CallEffects::default() });
            }
            if let Some(hit) = cache.get(&key, now, ttl_of(&model)) {
                let result = ToolResult::text(hit.hint())
                    .with_metadata("cached_ref", json!(hit.reference.to_string()));
                return (result, CallEffects { cache_hit: true, ..CallEffects::default() });
            }
        }

        let requested = Requested::from_arguments(&args, Some(schema), intent.to_vec());
        let result = self
            .host
            .call(name, provider_arguments(args, schema), self.timeout, &self.id, None)
            .await;
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            cache.record_result(&key, &result);
            if !result.is_error {
                // A call that changes something makes the cached reads it names stale.
                cache.invalidate_from(&qualified, &model.invalidates);
                cache.put(&key, result.clone(), now);
            }
        }
        let Some(structured) = result.structured.clone() else {
            return (result, CallEffects::default());
        };
        let projected = project(structured, &model, &requested);
        let effects = CallEffects {
            tokens_before: projected.tokens_before,
            tokens_after: projected.tokens_after,
            ..CallEffects::default()
        };
        let mut content = vec![Content::Text { text: projected.value.to_string() }];
        if let Some(note) = &projected.note {
            content.push(Content::Text { text: format!("[quiver: {note}]") });
        }
        (ToolResult { content, structured: Some(projected.value), ..result }, effects)
    }
}

/// The arguments the provider sees: without the host's control arguments (`_confirm`, and
/// `fields` unless the tool declares one of its own), which providers would refuse as unknown.
fn provider_arguments(args: Value, input_schema: &Value) -> Value {
    let declares_fields = tool_declares_fields(input_schema);
    match args {
        Value::Object(map) => Value::Object(
            map.into_iter().filter(|(k, _)| !is_control_argument(k, declares_fields)).collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_arguments_never_reach_the_provider() {
        let schema = json!({"type": "object", "properties": {"owner": {"type": "string"}}});
        let args = json!({"owner": "o", "fields": ["body"], "_confirm": true});
        assert_eq!(provider_arguments(args, &schema), json!({"owner": "o"}));

        let owns_fields = json!({"type": "object", "properties": {"fields": {"type": "array"}}});
        let args = json!({"jql": "x", "fields": ["summary"]});
        assert_eq!(provider_arguments(args.clone(), &owns_fields), args);
    }
}
