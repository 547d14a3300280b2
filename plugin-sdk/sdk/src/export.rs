//! What [`export_provider!`](crate::export_provider) exports: the declaration, the root module, and
//! the provider instance behind the ABI, each function under the panic guard.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RResult, RStr, RString};
use quiver_core::{
    Capability, FollowUpLink, PluginManifest, ToolContext, ToolErrorKind, ToolResult,
};
use quiver_plugin_abi::{
    LogSink, PluginModule, PluginModuleRef, ProviderBox, ProviderInstance, ProviderInstance_TO,
};

use crate::guard::guarded;
use crate::{log_bridge, Provider, SDK_VERSION};

/// How often a running call looks at the host's cancellation flag.
const CANCEL_POLL: Duration = Duration::from_millis(5);

/// The plugin's own async runtime, created on first use. A plugin cannot use the host's runtime:
/// it links its own tokio, whose thread-locals do not see the host's.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("quiver-provider")
            .enable_all()
            .build()
            .expect("the provider runtime can be built")
    })
}

/// The root module of provider `P`. Called once, by abi_stable, when the host loads the plugin.
pub fn root_module<P: Provider>() -> PluginModuleRef {
    // A `static` cannot be generic, so the module is built once here and leaked: abi_stable keeps
    // a plugin loaded for the life of the process anyway.
    PluginModule { manifest: manifest::<P>, create: create::<P> }.leak_into_prefix()
}

pub(crate) fn manifest_of<P: Provider>() -> PluginManifest {
    PluginManifest {
        name: P::NAME.to_owned(),
        version: P::VERSION.to_owned(),
        sdk_version: SDK_VERSION.to_owned(),
        capabilities: {
            let mut capabilities = vec![
                Capability::Tools,
                Capability::ValueModel,
                Capability::ProjectArgs,
                Capability::RateLimitHost,
            ];
            if !P::resources().is_empty() {
                capabilities.push(Capability::Resources);
            }
            capabilities
        },
        tools: P::tools(),
        resources: P::resources(),
        config_schema: schemars::schema_for!(P::Config).to_value(),
        oauth: P::oauth(),
    }
}

extern "C" fn manifest<P: Provider>() -> RResult<RString, RString> {
    guarded(P::NAME, "manifest", || {
        serde_json::to_string(&manifest_of::<P>()).map(RString::from).map_err(|e| e.to_string())
    })
}

extern "C" fn create<P: Provider>(
    config_json: RStr<'_>,
    log: LogSink,
) -> RResult<ProviderBox, RString> {
    guarded(P::NAME, "initialisation", || {
        log_bridge::install(log);
        let config: P::Config = serde_json::from_str(config_json.as_str())
            .map_err(|e| format!("invalid [providers.{}] configuration: {e}", P::NAME))?;
        // Inside the runtime, so `new` may build clients that need a reactor.
        let _entered = runtime().enter();
        let provider = P::new(config).map_err(|e| format!("provider `{}`: {e}", P::NAME))?;
        Ok(ProviderInstance_TO::from_value(Instance { provider: Arc::new(provider) }, TD_Opaque))
    })
}

struct Instance<P> {
    provider: Arc<P>,
}

impl<P: Provider> Instance<P> {
    fn run_call(
        &self,
        tool: &str,
        args_json: &str,
        context_json: &str,
        cancelled: &AtomicBool,
    ) -> Result<String, String> {
        let args: serde_json::Value = match serde_json::from_str(args_json) {
            Ok(args) => args,
            Err(e) => {
                let result = ToolResult::error(
                    ToolErrorKind::InvalidArguments,
                    format!("arguments of `{}.{tool}` are not JSON: {e}", P::NAME),
                );
                return serde_json::to_string(&result).map_err(|e| e.to_string());
            }
        };
        let ctx: ToolContext = serde_json::from_str(context_json)
            .map_err(|e| format!("the host sent an unreadable call context: {e}"))?;
        let timeout = ctx.timeout_ms.map(Duration::from_millis);
        let result = runtime().block_on(async {
            // What the service said is left of its rate window travels with the result.
            let call = async {
                let (mut result, headroom) =
                    crate::support::http::with_rate_headroom(self.provider.call(tool, args, ctx))
                        .await;
                if let Some(headroom) = headroom {
                    result
                        .metadata
                        .entry(quiver_core::tool::RATE_HEADROOM_METADATA.to_owned())
                        .or_insert_with(|| serde_json::json!(headroom));
                }
                result
            };
            let cancel = async {
                while !cancelled.load(Ordering::Relaxed) {
                    tokio::time::sleep(CANCEL_POLL).await;
                }
            };
            let deadline = async {
                match timeout {
                    Some(t) => tokio::time::sleep(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                result = call => result,
                () = cancel => ToolResult::error(ToolErrorKind::Cancelled, format!("`{}.{tool}` was cancelled", P::NAME)),
                () = deadline => ToolResult::error(
                    ToolErrorKind::Timeout,
                    format!("`{}.{tool}` did not finish within {} ms", P::NAME, timeout.unwrap_or_default().as_millis()),
                ),
            }
        });
        serde_json::to_string(&result).map_err(|e| e.to_string())
    }
}

impl<P: Provider> ProviderInstance for Instance<P> {
    fn call(
        &self,
        tool: RStr<'_>,
        args_json: RStr<'_>,
        context_json: RStr<'_>,
        cancelled: &AtomicBool,
    ) -> RResult<RString, RString> {
        let what = format!("tool `{tool}`");
        guarded(P::NAME, &what, || {
            self.run_call(tool.as_str(), args_json.as_str(), context_json.as_str(), cancelled)
        })
        .map(RString::from)
    }

    fn value_model(&self, tool: RStr<'_>) -> RResult<ROption<RString>, RString> {
        guarded(P::NAME, "value_model", || match self.provider.value_model(tool.as_str()) {
            Some(layer) => serde_json::to_string(&layer)
                .map(|s| ROption::RSome(s.into()))
                .map_err(|e| e.to_string()),
            None => Ok(ROption::RNone),
        })
    }

    fn project_args(
        &self,
        prev_tool: RStr<'_>,
        prev_result_json: RStr<'_>,
        link_json: RStr<'_>,
    ) -> RResult<RString, RString> {
        guarded(P::NAME, "project_args", || {
            let prev: serde_json::Value = serde_json::from_str(prev_result_json.as_str())
                .map_err(|e| format!("previous result is not JSON: {e}"))?;
            let link: FollowUpLink = serde_json::from_str(link_json.as_str())
                .map_err(|e| format!("follow-up link is not readable: {e}"))?;
            let mut args = self.provider.project_args(prev_tool.as_str(), &prev, &link);
            args.truncate(quiver_core::projection::MAX_PROJECTIONS_PER_LINK);
            serde_json::to_string(&args).map(RString::from).map_err(|e| e.to_string())
        })
    }

    fn rate_limit_host(
        &self,
        tool: RStr<'_>,
        args_json: RStr<'_>,
    ) -> RResult<ROption<RString>, RString> {
        guarded(P::NAME, "rate_limit_host", || {
            let args: serde_json::Value =
                serde_json::from_str(args_json.as_str()).unwrap_or(serde_json::Value::Null);
            Ok(self.provider.rate_limit_host(tool.as_str(), &args).map(RString::from).into())
        })
    }
}

/// Turns the crate into a quiver plugin serving provider `$provider`.
///
/// Exports the `QUIVER_PLUGIN_DECLARATION` static the host reads first (ABI version, provider
/// name) and the abi_stable root module. Use it once, in the provider's `lib.rs`, and build the
/// crate with `crate-type = ["cdylib", "rlib"]`.
#[macro_export]
macro_rules! export_provider {
    ($provider:ty) => {
        /// Read by the quiver host before anything else: see `quiver_plugin_abi::PluginDeclaration`.
        #[allow(unsafe_code)]
        #[no_mangle]
        pub static QUIVER_PLUGIN_DECLARATION: $crate::abi::PluginDeclaration =
            $crate::abi::PluginDeclaration {
                magic: $crate::abi::DECLARATION_MAGIC,
                abi_version: $crate::__private::RStr::from_str($crate::abi::ABI_VERSION),
                sdk_version: $crate::__private::RStr::from_str($crate::SDK_VERSION),
                provider_name: $crate::__private::RStr::from_str(
                    <$provider as $crate::Provider>::NAME,
                ),
                provider_version: $crate::__private::RStr::from_str(
                    <$provider as $crate::Provider>::VERSION,
                ),
            };

        // What abi_stable's `#[export_root_module]` expands to, with paths through this crate so
        // providers need not depend on abi_stable themselves. The symbol name is
        // `abi_stable::library::ROOT_MODULE_LOADER_NAME` (a test in the SDK guards it).
        #[allow(unsafe_code, non_upper_case_globals)]
        #[no_mangle]
        #[doc(hidden)]
        pub static _1as_0lib_1header_0root_bmodule_bloader: $crate::__private::LibHeader = {
            fn root_module() -> $crate::abi::PluginModuleRef {
                $crate::__private::root_module::<$provider>()
            }
            extern "C" fn erased_root_module() -> $crate::__private::RootModuleResult {
                $crate::__private::__call_root_module_loader(root_module)
            }
            // SAFETY: the constructor returns the root module of exactly this type, which is what
            // the header's type layout describes; this mirrors `#[export_root_module]`.
            unsafe {
                $crate::__private::LibHeader::from_constructor::<$crate::abi::PluginModuleRef>(
                    erased_root_module,
                    $crate::__private::CheckTypeLayout::Yes,
                )
            }
        };
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn export_macro_uses_abi_stables_loader_symbol() {
        assert_eq!(
            abi_stable::library::ROOT_MODULE_LOADER_NAME,
            "_1as_0lib_1header_0root_bmodule_bloader"
        );
    }
}
