//! `quiver serve`: the command that runs the MCP server over stdio (see `quiver_runtime::mcp`).

use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use quiver_runtime::config::ServeMode;
use quiver_runtime::mcp::{serve_stdio, ServeOptions};
use quiver_runtime::Host;

/// `quiver serve` flags.
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Which tools the client sees: every enabled tool (all), CORE + find_tools/call_tool
    /// (search), or CORE + load_tools with list_changed (dynamic). Default: [selector] mode.
    #[arg(long, value_enum)]
    mode: Option<ServeMode>,
}

/// Serves until the client closes stdin; stdout carries only MCP messages.
pub(crate) fn serve(host: Host, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve_stdio(Arc::new(host), ServeOptions { mode: args.mode }))?;
    // Provider calls still blocking on their threads must not hold the exit.
    runtime.shutdown_background();
    Ok(ExitCode::SUCCESS)
}
