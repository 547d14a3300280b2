//! quiver's domain model: what a tool is, what a call carries, what it returns, and what a call is
//! worth.
//!
//! Everything else in quiver speaks in these types. The host converts between them and the JSON that
//! crosses the plugin boundary; provider authors get them re-exported from `quiver-plugin-sdk`.
//!
//! - [`tool`]: the tool contracts — [`ToolSpec`], [`ToolContext`], [`ToolResult`] — and qualified
//!   tool names ([`ToolName`]).
//! - [`value_model`]: the value-model family ([`ToolValueModel`] and its parts), the partial
//!   [`ValueModelLayer`] that each source contributes, and the right-wins field-by-field merge that
//!   yields the effective model together with the layer that set each field.
//! - [`projection`]: generic follow-up argument projection by a small JSON path.
//! - [`session_cache`]: the per-session call cache — identical calls (arguments in canonical form)
//!   served within their freshness TTL, `r7` references, cross-tool invalidation, and fail-fast for
//!   identical calls that keep coming back empty.
//! - [`response_projection`]: a result trimmed to the field groups the call needs and capped at
//!   the tool's `max_kb`, with a one-line note of what was left out and how to ask for it, and a
//!   deterministic token estimate.
//! - [`enrich`]: enrichments — which passes over the registry exist, what each writes and needs,
//!   their order, the offline embedder, dataflow edges, neighbours and the chain samplers.
//! - [`manifest`]: what a plugin reports about itself.
//! - [`client_schema`]: tool schemas as every MCP client accepts them (references inlined, no
//!   custom formats, no null unions) and stringified arguments coerced per the schema.
//! - [`telemetry`]: call events (argument hashes, never values) and the effectiveness rates.
//! - [`defaults`]: built-in priors — by verb and shape for any tool, and by name for the common
//!   agent built-ins (Read, Grep, Bash…).
//! - [`select`]: tool selection — BM25 with identifier splitting fused with embedding similarity,
//!   recent-call boosts, CORE tools, bundle expansion, a threshold and a cap; recall on an
//!   evaluation set.
//! - [`flows`]: toxic flows — a write asked for when the session read text written by others
//!   and data from another scope than the one it writes to.
//! - [`foreign_secrets`]: credentials of other services (gitleaks' rule set, compiled in) found,
//!   redacted from results and looked for in write arguments.
//! - [`scope`]: `[[selector.scope]]` rules — the values a call's arguments may take (owner,
//!   repository, project…), per tool pattern.
//! - [`secrets`]: credentials masked in every form they travel in (raw, base64 of
//!   `user:token`, percent-encoded) and echoed credential headers masked whole.
//! - [`terminal`]: text from outside (an upstream's stderr, descriptions, reasons) with its
//!   control, bidi and invisible characters shown as `\u{…}`, for human reports.
//! - [`pins`]: upstream tool definitions as the operator accepted them, fingerprinted, and the
//!   decision to serve or hold a changed or flagged one until it is approved.
//! - [`poisoned`]: signs that a tool definition steers the model (hidden text, instructions kept
//!   from the user, credential paths, secrets in arguments, another server's tool names).
//! - [`planner`]: the pre-fetch planner — which follow-up calls to run before the agent asks, as the
//!   optimal plan under a token budget (exact branch and bound, a ½-approximation past its limits),
//!   with a reason for every candidate left out.
//! - [`replay`]: what a replay of recorded sessions measures — the agent's wall time under a
//!   think-time model and argument survival (values later calls used that quiver's answers still
//!   showed).
//!
//! **Architecture Invariant**: this crate is pure. It depends on no other workspace crate and on
//! nothing that does IO: no tokio, no HTTP client, no abi_stable, no filesystem. That keeps every
//! algorithm here testable with plain values, and keeps plugin authors' builds small.
//!
//! ```
//! use quiver_core::value_model::{LayerSource, ValueModelLayer, ValueClass, resolve};
//!
//! let provider: ValueModelLayer = serde_json::from_str(r#"{"value_class": "critical"}"#).unwrap();
//! let user: ValueModelLayer = toml::from_str("cost_model = { freshness_ttl_s = 30 }").unwrap();
//! let resolved = resolve(&[
//!     (LayerSource::Provider("github".into()), &provider),
//!     (LayerSource::UserExact("github.get_issue".into()), &user),
//! ]);
//! assert_eq!(resolved.model.value_class, ValueClass::Critical);
//! assert_eq!(resolved.model.cost_model.freshness_ttl_s, Some(30));
//! assert_eq!(resolved.source_of("value_class"), Some(&LayerSource::Provider("github".into())));
//! ```
#![deny(missing_docs)]

pub mod client_schema;
pub mod defaults;
pub mod enrich;
pub mod flows;
pub mod foreign_secrets;
pub mod manifest;
pub mod pins;
pub mod planner;
pub mod poisoned;
pub mod projection;
pub mod replay;
pub mod resource;
pub mod response_projection;
pub mod scope;
pub mod secrets;
pub mod select;
pub mod session_cache;
pub mod telemetry;
pub mod terminal;
pub mod tool;
pub mod tool_edit;
pub mod untrusted;
pub mod value_model;

pub use manifest::{Capability, PluginManifest};
pub use tool::{
    CancellationFlag, Content, ToolContext, ToolErrorKind, ToolName, ToolResult, ToolSpec,
};
pub use value_model::{
    CostModel, FieldGroup, FollowUpLink, LayerSource, ResolvedValueModel, SideEffectClass,
    ToolValueModel, UserLayers, ValueClass, ValueModelLayer,
};
