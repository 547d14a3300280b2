//! The quiver host library: it loads provider plugins, creates providers from the config, registers
//! their tools under qualified names and runs calls through sessions. Agent frameworks embed it;
//! the MCP server (`quiver-server`) and the `quiver` binary (`quiver-cli`) are built on it.
//!
//! - [`loader`]: finds plugin files and loads each one separately (pre-flight with libloading,
//!   then abi_stable's layout check); every failure is kept as (file, reason).
//! - [`config`]: `quiver.toml` — plugin dir, `[providers.NAME]`, `[tools."…"]` value-model layers.
//! - [`registry`]: qualified tools (`github.get_issue`) and the provider instances behind them.
//! - [`host`]: ties them together: [`Host::open`], [`Host::call`], [`Host::value_model`].
//! - [`logging`]: tracing on stderr, the plugin log bridge, secret masking.
//! - [`sources`]: static tool sources — an MCP `tools/list` result or OpenAI function definitions
//!   read from a file, seen by enrichments and selection beside the plugins' tools.
//! - [`enrich`]: runs the `[[enrichments]]` over the catalog (inferred output schemas via an LLM
//!   endpoint, embeddings, dataflow edges, neighbours), cached in the sled store ([`enrich::store`]).
//! - [`selector`]: the tool selector — ranks the catalog for a query (BM25 fused with embedding
//!   similarity) and chooses the tools to show a model this turn.
//! - [`upstream`]: other MCP servers (`[[upstreams]]`), each a supervised client whose tools are
//!   served beside the plugins' through the same pipeline.
//! - [`recording`]: session recordings (each call's arguments and whole result, opt-in) and the
//!   recorded answers a replay serves in place of providers.
//! - [`session`]: one conversation's calls: session cache, invalidation, fail-fast, response
//!   projection by field groups, and pre-fetches of likely follow-ups ([`speculation`]).
//!
//! ```no_run
//! # async fn demo() {
//! use quiver_runtime::{Host, HostOptions};
//! let host = Host::open(&HostOptions::default()).expect("config is valid");
//! let result = host
//!     .call("github.get_issue", serde_json::json!({"owner": "o", "repo": "r", "number": 1}), None, "demo", None)
//!     .await;
//! println!("{}", result.text_content());
//! # }
//! ```
//!
//! **Architecture Invariant**: this is the only crate that knows both the FFI types of
//! `quiver-plugin-abi` and the domain types of `quiver-core`, and converts between them (JSON in
//! `RStr`/`RString`). It never depends on `quiver-plugin-sdk` or on a provider crate: providers
//! reach it only as dylibs. `unsafe` appears only in [`loader`], each block with a `SAFETY:` note.
//!
//! **Architecture Invariant**: no clap, no MCP server, no command line: a framework that embeds
//! the host compiles none of them.
#![deny(missing_docs)]

pub mod accounts;
pub mod audit;
pub mod config;
pub mod embedder;
pub mod enrich;
pub mod host;
pub mod loader;
pub mod logging;
pub mod mcp_auth;
pub mod pins;
pub mod recording;
pub mod registry;
pub mod selector;
pub mod session;
pub mod sources;
pub mod speculation;
pub mod state;
pub mod telemetry;
pub mod traces;
pub mod upstream;
mod upstream_http;

pub use config::{Config, ConfigError, LoadedConfig};
pub use host::{Host, HostOptions, PluginReport, PluginStatus};
pub use registry::RegisteredTool;
pub use session::Session;
