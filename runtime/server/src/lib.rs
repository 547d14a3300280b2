//! quiver's MCP server (`quiver serve`): the host's tools over stdio (rmcp), in one of three modes.
//!
//! - `all` lists every enabled tool, in qualified-name order.
//! - `search` lists a small CORE set plus `find_tools(query, k)` and `call_tool(name, arguments)`.
//!   The list never changes during a session, so it works under every protocol version and in
//!   every client, including those that ignore `notifications/tools/list_changed`.
//! - `dynamic` lists the CORE set plus `load_tools(bundle_or_tool)`; a load admits the bundle under
//!   `max_tools`, evicting the least recently called non-CORE tools, and sends `list_changed`.
//!   The list also follows the work by itself: after a call, the called tool (when it ran
//!   unlisted) and its likeliest follow-ups (`[selector] follow_ups_on_call`) are listed.
//!
//! A needed tool is never unreachable: in every mode, a call to an enabled tool that is not listed
//! still runs (free recovery), and each such use of an escape hatch is written to telemetry
//! ([`escape`]) so `quiver tune analyze` can say how often the listed set missed.
//!
//! In every mode the `[selector]` policy applies ([`policy`]): `allow`/`deny` globs, `read_only`
//! (tools that are not `pure`/`read_only` are hidden and refused) and `confirm` (the user is asked
//! through MCP elicitation when the client can ask, else refused until repeated with
//! `"_confirm": true`; see `confirm`). Every call runs through a [`Session`](quiver_runtime::Session), one
//! per connection: cache, projection, speculation and telemetry apply as they do for the library.
//!
//! **Architecture Invariant**: stdout carries MCP messages only; logs go to stderr.
//!
//! **Architecture Invariant**: built on the host library (`quiver-runtime`) alone: no clap, no
//! command line, no FFI types; the `quiver` binary depends on this crate, never the reverse.

#![deny(missing_docs)]

pub mod annotations;
pub mod catalog;
mod confirm;
pub mod connect;
pub mod escape;
mod federation;
pub mod http;
mod listener;
pub mod metrics;
pub mod modes;
pub mod oauth;
pub mod policy;
pub mod reload;
pub mod server;
mod sign_in;
mod stdio_guard;
mod tasks;

pub use catalog::{Bundle, Catalog, ExposedTool};
pub use http::{key_sha256, serve_http};
pub use modes::Listing;
pub use policy::{Policy, PolicyError};
pub use server::{serve_stdio, Identity, QuiverServer, ServeOptions};
