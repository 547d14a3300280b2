//! Write a quiver provider: a shared library that gives quiver's agents the tools of one service.
//!
//! A provider is a type implementing [`Provider`] (its name, its configuration, how to build it)
//! and [`ToolEnricher`] (what its calls are worth, which calls follow them, which host's rate limit
//! they spend — every method has a default; [`model_table`] writes the value models as a table).
//! Each tool is declared once, with the [`schemars`] type of its arguments, by [`register_tool!`];
//! [`export_provider!`] makes the crate a plugin the quiver host can load. Build it as a `cdylib`,
//! drop the library into a plugins folder, and `quiver tools list` shows its tools.
//!
//! ```
//! use quiver_plugin_sdk::prelude::*;
//!
//! /// A provider that greets.
//! pub struct Hello {
//!     greeting: String,
//! }
//!
//! /// `[providers.hello]` in quiver.toml.
//! #[derive(Deserialize, JsonSchema, Default)]
//! #[serde(default, deny_unknown_fields)]
//! pub struct HelloConfig {
//!     /// What to say; "hello" when unset.
//!     pub greeting: Option<String>,
//! }
//!
//! impl Provider for Hello {
//!     const NAME: &'static str = "hello";
//!     const VERSION: &'static str = env!("CARGO_PKG_VERSION");
//!     type Config = HelloConfig;
//!
//!     fn new(config: HelloConfig) -> Result<Self, ProviderError> {
//!         Ok(Hello { greeting: config.greeting.unwrap_or_else(|| "hello".into()) })
//!     }
//! }
//!
//! impl ToolEnricher for Hello {
//!     fn value_model(&self, tool: &str) -> Option<ValueModelLayer> {
//!         (tool == "greet").then(|| ValueModelLayer {
//!             side_effect_class: Some(SideEffectClass::Pure),
//!             ..Default::default()
//!         })
//!     }
//! }
//!
//! /// Arguments of `greet`.
//! #[derive(Deserialize, JsonSchema)]
//! pub struct GreetArgs {
//!     /// Who to greet.
//!     pub name: String,
//! }
//!
//! impl Hello {
//!     async fn greet(&self, args: GreetArgs, _ctx: &ToolContext) -> Result<Value, ToolError> {
//!         Ok(json!({ "text": format!("{}, {}!", self.greeting, args.name) }))
//!     }
//! }
//!
//! register_tool! {
//!     provider: Hello,
//!     name: "greet",
//!     description: "Greets someone by name.",
//!     input: GreetArgs,
//!     handler: Hello::greet,
//! }
//!
//! export_provider!(Hello);
//!
//! # fn main() {
//! // The same provider, in-process, as a provider's own tests use it:
//! let hello = Hello::new(HelloConfig::default()).unwrap();
//! let result = quiver_plugin_sdk::testing::call(&hello, "greet", json!({"name": "Ada"}));
//! assert_eq!(result.structured.unwrap()["text"], "hello, Ada!");
//! assert_eq!(Hello::tools()[0].name, "greet");
//! # }
//! ```
//!
//! # The contract with the host
//! - The host calls a provider from a blocking thread it can spare, with a deadline and a
//!   cancellation flag. The SDK runs the async tool on the provider's own tokio runtime (each
//!   plugin links its own tokio and cannot see the host's), created once, on first use.
//! - A panic never crosses the boundary: every exported function runs under a panic guard, and a
//!   panicking tool becomes an error result naming the tool.
//! - A provider never writes to stdout (the host's stdout may be an MCP stream). `tracing` events
//!   from the provider and its dependencies reach the host's log through a callback.
//! - A provider never logs its token; the host never logs arguments listed in a tool's
//!   `sensitive` parameters.
//!
//! **Architecture Invariant**: this crate depends on `quiver-plugin-abi` and `quiver-core` (whose
//! types it re-exports) and never on `quiver-runtime`: a provider links no host code.
#![deny(missing_docs)]

mod export;
mod guard;
mod log_bridge;
pub mod model_table;
mod registry;
pub mod support;
pub mod testing;

use std::future::Future;

use serde::de::DeserializeOwned;

pub use quiver_core as core_types;
pub use quiver_core::manifest::OAuthEndpoints;
pub use quiver_core::resource::ResourceTemplate;
pub use quiver_core::value_model::{CostModelLayer, FieldGroupLayer};
pub use quiver_core::{
    projection, CostModel, FieldGroup, FollowUpLink, SideEffectClass, ToolContext, ToolErrorKind,
    ToolResult, ToolSpec, ValueClass, ValueModelLayer,
};
pub use quiver_plugin_abi as abi;
pub use registry::{registered_tools, CallFuture, ToolRegistration};

/// The version of this SDK, reported in every plugin's declaration.
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What most providers import.
pub mod prelude {
    pub use crate::{
        export_provider, register_tool, CostModelLayer, FieldGroupLayer, FollowUpLink, Provider,
        ProviderError, SideEffectClass, ToolContext, ToolEnricher, ToolError, ToolErrorKind,
        ToolResult, ToolSpec, ValueClass, ValueModelLayer,
    };
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
    pub use serde_json::{json, Map, Value};
}

pub use schemars;
pub use serde;
pub use serde_json;

/// A service's tools, served from a plugin.
///
/// Implement [`Provider::new`]; tools come from [`register_tool!`] and are dispatched by the
/// default [`Provider::call`].
pub trait Provider: ToolEnricher + Send + Sync + Sized + 'static {
    /// The name that qualifies the provider's tools (`github` → `github.get_issue`). Lowercase
    /// letters, digits, `_` and `-`.
    const NAME: &'static str;
    /// The provider's version, usually `env!("CARGO_PKG_VERSION")`.
    const VERSION: &'static str;
    /// The `[providers.NAME]` section of quiver.toml, as JSON. The host keeps `enabled` to itself,
    /// always adds `token_env` (the variable it read the token from, `NAME_TOKEN` by default, for
    /// messages that say what to set) and adds `token` when that variable is set. Everything else
    /// (`base_url`, timeouts…) comes as the user wrote it; reject unknown keys with
    /// `#[serde(deny_unknown_fields)]` so a typo is an error, not a silently ignored line.
    type Config: DeserializeOwned + schemars::JsonSchema;

    /// Builds the provider. Runs inside the provider's runtime, so clients that need a reactor
    /// can be built here; build them once and keep them (building an HTTP client is slow).
    fn new(config: Self::Config) -> Result<Self, ProviderError>;

    /// The provider's tools: by default every [`register_tool!`] of this type, sorted by name.
    fn tools() -> Vec<ToolSpec> {
        registered_tools::<Self>().iter().map(|r| (r.spec)()).collect()
    }

    /// The resources it serves, each family read by one of its tools (a URI template whose
    /// variables are the tool's arguments): none by default. A read is the tool's call, priced,
    /// cached and refused by policy as the call would be.
    fn resources() -> Vec<ResourceTemplate> {
        Vec::new()
    }

    /// How users sign in to the service with OAuth, when it has it: the host runs the flow
    /// (`[providers.NAME.oauth]` names the client) and creates the provider with the user's
    /// token in `token`. None by default.
    fn oauth() -> Option<OAuthEndpoints> {
        None
    }

    /// Runs one tool: by default the [`register_tool!`] handler of that name, with its arguments
    /// checked against the input type first.
    fn call(
        &self,
        tool: &str,
        args: serde_json::Value,
        ctx: ToolContext,
    ) -> impl Future<Output = ToolResult> + Send {
        registry::dispatch(self, tool, args, ctx)
    }
}

/// What a provider knows about the value of its calls. Every method has a default, so a provider
/// implements only what it knows.
pub trait ToolEnricher {
    /// The provider's value-model layer for `tool`: only the fields it wants to set. `None` for a
    /// tool it does not ship.
    fn value_model(&self, tool: &str) -> Option<ValueModelLayer> {
        let _ = tool;
        None
    }

    /// Arguments for the follow-up `link` after `prev_tool` returned `prev_result` (its structured
    /// result), at most [`projection::MAX_PROJECTIONS_PER_LINK`] calls. The default applies the
    /// link's generic `projection` path into `projection_arg`.
    fn project_args(
        &self,
        prev_tool: &str,
        prev_result: &serde_json::Value,
        link: &FollowUpLink,
    ) -> Vec<serde_json::Map<String, serde_json::Value>> {
        let _ = prev_tool;
        generic_projection(prev_result, link)
    }

    /// The host whose rate limit a call spends (`api.github.com`), so calls of every provider to
    /// one host share a budget.
    fn rate_limit_host(&self, tool: &str, args: &serde_json::Value) -> Option<String> {
        let _ = (tool, args);
        None
    }
}

/// The generic projection of a link: its `projection` path into `projection_arg`, or nothing when
/// the link names neither.
pub fn generic_projection(
    prev_result: &serde_json::Value,
    link: &FollowUpLink,
) -> Vec<serde_json::Map<String, serde_json::Value>> {
    match (&link.projection, &link.projection_arg) {
        (Some(path), Some(arg)) => projection::project(prev_result, path, arg).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Why a provider could not be built; shown to the user, so say what to set.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ProviderError(pub String);

impl ProviderError {
    /// An error with a message for the user.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    /// The provider lacks a required setting: `quiver plugins` shows it as "not configured"
    /// with `message` (say which key to set and an example), not as failed.
    pub fn not_configured(message: impl Into<String>) -> Self {
        Self(format!("{}{}", quiver_core::manifest::NOT_CONFIGURED, message.into()))
    }
}

/// Why a tool call failed; becomes an error result the model reads.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// What went wrong, for the host.
    pub kind: ToolErrorKind,
    /// What went wrong and what to do about it, for the model and the user. Never a token.
    pub message: String,
    /// For a rate limit: how long the service said it holds. The host shares it, so no other
    /// call with the same credentials is sent (from any replica) until then.
    pub retry_after: Option<std::time::Duration>,
}

impl ToolError {
    /// An error of any kind.
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), retry_after: None }
    }

    /// Says how long the rate limit holds (`retry_after_s` in the result's metadata).
    pub fn with_retry_after(mut self, wait: Option<std::time::Duration>) -> Self {
        self.retry_after = wait;
        self
    }
    /// The arguments are wrong.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::InvalidArguments, message)
    }
    /// The object does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::NotFound, message)
    }
    /// The token is missing, wrong or lacks a permission.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Unauthorized, message)
    }
    /// The rate limit held longer than the provider would wait.
    pub fn rate_limited(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::RateLimited, message)
    }
    /// The service failed or answered something unreadable.
    pub fn upstream(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Upstream, message)
    }
    /// The provider itself failed.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Internal, message)
    }
}

impl From<ToolError> for ToolResult {
    fn from(e: ToolError) -> Self {
        let result = ToolResult::error(e.kind, e.message);
        match e.retry_after {
            Some(wait) => result.with_metadata(
                quiver_core::tool::RETRY_AFTER_METADATA,
                serde_json::json!(wait.as_secs().max(1)),
            ),
            None => result,
        }
    }
}

#[doc(hidden)]
pub mod __private {
    pub use crate::export::root_module;
    pub use crate::registry::{call_handler, output_schema_of, spec_of};
    pub use abi_stable::library::{
        __call_root_module_loader, CheckTypeLayout, IntoRootModuleResult, LibHeader,
        RootModuleResult,
    };
    pub use abi_stable::std_types::RStr;
    pub use inventory;
}
