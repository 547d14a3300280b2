//! The binary contract between the quiver host and its provider plugins.
//!
//! A provider plugin is a shared library (`.so`, `.dylib`, `.dll`) that exports two things:
//!
//! 1. [`PluginDeclaration`], a tiny `#[no_mangle]` static named [`DECLARATION_SYMBOL`], which the
//!    host reads with a plain `dlopen` *before* anything else touches the library. It carries a
//!    magic number, the ABI version and the provider's name, so a plugin built against another ABI
//!    is refused with one line naming both versions instead of a layout dump.
//! 2. The abi_stable root module [`PluginModule`], whose layout abi_stable checks recursively when
//!    the host initialises it. It builds [`ProviderInstance`]s from configuration JSON.
//!
//! Rich data crosses the boundary as JSON text in `RString`/`RStr`: tool specs, value models,
//! arguments, results. That keeps the binary contract tiny and lets the domain types in
//! `quiver-core` evolve without breaking plugins already built.
//!
//! # Evolution rules
//! - This crate's version **is** the ABI version. A plugin built against another `0.y` (or another
//!   major, from 1.0 on) is refused by the host.
//! - Never remove, rename, reorder or retype a field or method. Add new ones only at the end of a
//!   prefix type ([`PluginModule`], the [`ProviderInstance`] vtable), after moving
//!   `#[sabi(last_prefix_field)]` to the new last field in the same release; a host reading an
//!   older plugin sees the new fields as absent and must fall back.
//! - [`PluginDeclaration`] is frozen forever: it is read before any layout check.
//! - Enums that cross the boundary are integers ([`LogLevel`]) so a new value never breaks an old
//!   peer.
//!
//! **Architecture Invariant**: this crate depends on abi_stable only. It knows nothing about
//! `quiver-core`, JSON schemas, HTTP or tokio; the host (`quiver-runtime`) is the only crate that
//! converts between these types and the domain types.
#![deny(missing_docs)]
// The `sabi_trait` and `StableAbi` expansions contain `unsafe` blocks that abi_stable vouches for.
#![allow(unsafe_code)]
// The `sabi_trait` expansion creates items the crate does not name.
#![allow(unreachable_pub)]
// `sabi_trait` implements its interface trait inside the generated module.
#![allow(non_local_definitions)]

use std::sync::atomic::AtomicBool;

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    package_version_strings, sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RBox, ROption, RResult, RStr, RString},
    StableAbi,
};

/// The ABI version of this crate, e.g. `0.1.0`.
pub const ABI_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The name of the exported [`PluginDeclaration`] static, NUL-terminated for `dlsym`.
pub const DECLARATION_SYMBOL: &[u8] = b"QUIVER_PLUGIN_DECLARATION\0";

/// First field of every [`PluginDeclaration`]: "QUIVERPL" in ASCII.
pub const DECLARATION_MAGIC: u64 = u64::from_be_bytes(*b"QUIVERPL");

/// The static every quiver plugin exports as [`DECLARATION_SYMBOL`].
///
/// Frozen: the host reads it by address from any version of any plugin, before abi_stable checks a
/// layout, so these fields never change, move or grow.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PluginDeclaration {
    /// Always [`DECLARATION_MAGIC`]; anything else is not a quiver plugin.
    pub magic: u64,
    /// The `quiver-plugin-abi` version the plugin was built against.
    pub abi_version: RStr<'static>,
    /// The `quiver-plugin-sdk` version the plugin was built with.
    pub sdk_version: RStr<'static>,
    /// The provider's name (`github`), which qualifies its tools.
    pub provider_name: RStr<'static>,
    /// The provider's own version.
    pub provider_version: RStr<'static>,
}

// SAFETY: every field is a `u64` or an `RStr<'static>` pointing at string literals, which are
// immutable and live for the whole program.
unsafe impl Sync for PluginDeclaration {}

/// Severity of a log line a plugin sends to the host, as an integer so new levels stay compatible.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogLevel(pub u8);

impl LogLevel {
    /// Errors.
    pub const ERROR: Self = Self(1);
    /// Warnings.
    pub const WARN: Self = Self(2);
    /// Information.
    pub const INFO: Self = Self(3);
    /// Debugging detail.
    pub const DEBUG: Self = Self(4);
    /// Everything.
    pub const TRACE: Self = Self(5);
}

/// Where a plugin's log lines go: the host's log (stderr), never the plugin's own stdout, which
/// would corrupt the MCP stream.
#[repr(C)]
#[derive(StableAbi, Clone, Copy)]
pub struct LogSink {
    /// The most verbose level the host wants; the plugin drops anything above it.
    pub max_level: LogLevel,
    /// Receives one log line: level, target (module path) and the formatted message.
    pub log: extern "C" fn(level: LogLevel, target: RStr<'_>, message: RStr<'_>),
}

/// The root module a plugin exports; abi_stable checks its layout when the host loads it.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
#[sabi(missing_field(panic))]
pub struct PluginModule {
    /// The plugin manifest as JSON: name, version, sdk version, capabilities, tools, config schema.
    pub manifest: extern "C" fn() -> RResult<RString, RString>,

    /// Builds a provider from its configuration (a JSON object: `base_url`, `token`…) and the
    /// host's log sink. An `RErr` carries a message for the user.
    ///
    /// This is the last prefix field: new fields go after it, and the attribute moves with them.
    #[sabi(last_prefix_field)]
    pub create: extern "C" fn(config_json: RStr<'_>, log: LogSink) -> RResult<ProviderBox, RString>,
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = "quiver_plugin";
    const NAME: &'static str = "quiver provider plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

/// A configured provider living inside a plugin.
///
/// Every method is blocking: the host calls it from a thread it can spare (`spawn_blocking`),
/// never from an async worker. Every method returns `RErr` with a message rather than unwinding:
/// a panic crossing this boundary would abort the host.
#[sabi_trait]
pub trait ProviderInstance: Send + Sync {
    /// Runs a tool. `tool` is the provider-local name, `args_json` a JSON object, `context_json` a
    /// `ToolContext` without its cancellation flag, which comes as `cancelled` instead (set by the
    /// host when the caller gives up). Returns a `ToolResult` as JSON; tool failures are results
    /// with `is_error`, `RErr` is for the provider failing as a whole.
    fn call(
        &self,
        tool: RStr<'_>,
        args_json: RStr<'_>,
        context_json: RStr<'_>,
        cancelled: &AtomicBool,
    ) -> RResult<RString, RString>;

    /// The provider's value-model layer for `tool` as JSON, or `RNone` when it has none.
    fn value_model(&self, tool: RStr<'_>) -> RResult<ROption<RString>, RString>;

    /// Arguments (a JSON array of objects) for the follow-up `link_json` (a `FollowUpLink`) after
    /// `prev_tool` returned `prev_result_json` (its structured result).
    fn project_args(
        &self,
        prev_tool: RStr<'_>,
        prev_result_json: RStr<'_>,
        link_json: RStr<'_>,
    ) -> RResult<RString, RString>;

    /// The host whose rate limit a call of `tool` with `args_json` spends, or `RNone`.
    ///
    /// This is the last prefix method: new methods go after it, and the attribute moves with them.
    #[sabi(last_prefix_field)]
    fn rate_limit_host(
        &self,
        tool: RStr<'_>,
        args_json: RStr<'_>,
    ) -> RResult<ROption<RString>, RString>;
}

/// An owned provider instance as it crosses the boundary.
pub type ProviderBox = ProviderInstance_TO<'static, RBox<()>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_spells_quiverpl() {
        assert_eq!(&DECLARATION_MAGIC.to_be_bytes(), b"QUIVERPL");
        assert_eq!(DECLARATION_SYMBOL.last(), Some(&0));
    }

    #[test]
    fn abi_version_is_this_crates_version() {
        assert_eq!(ABI_VERSION, env!("CARGO_PKG_VERSION"));
        let strings = PluginModuleRef::VERSION_STRINGS;
        assert_eq!(strings.version, ABI_VERSION);
    }
}
