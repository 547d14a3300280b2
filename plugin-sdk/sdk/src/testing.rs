//! Helpers for a provider's own tests: run its tools in-process, as the host would.

use serde_json::Value;

use crate::{Provider, ToolContext, ToolResult};

/// Calls `tool` on `provider` with `args` and waits for the result, on a fresh current-thread
/// runtime. For async tests, `provider.call(tool, args, ctx).await` does the same.
pub fn call<P: Provider>(provider: &P, tool: &str, args: Value) -> ToolResult {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a test runtime can be built");
    runtime.block_on(provider.call(tool, args, ToolContext::default()))
}
