//! `quiver serve`: the command that runs the MCP server over stdio (see `quiver_server`).

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use quiver_runtime::config::ServeMode;
use quiver_runtime::Host;
use quiver_server::{serve_stdio, ServeOptions};

/// `quiver serve` flags.
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Which tools the client sees: every enabled tool (all), CORE + find_tools/call_tool
    /// (search), or CORE + load_tools with list_changed (dynamic). Default: [selector] mode.
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
}

/// `--mode`: the flag's spelling of [`ServeMode`] (the host library knows nothing of clap).
#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    All,
    Search,
    Dynamic,
}

impl From<ModeArg> for ServeMode {
    fn from(mode: ModeArg) -> Self {
        match mode {
            ModeArg::All => ServeMode::All,
            ModeArg::Search => ServeMode::Search,
            ModeArg::Dynamic => ServeMode::Dynamic,
        }
    }
}

/// Serves until the client closes stdin; stdout carries only MCP messages.
pub(crate) fn serve(host: Host, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let options = ServeOptions { mode: args.mode.map(ServeMode::from) };
    runtime.block_on(serve_stdio(Arc::new(host), options))?;
    // Provider calls still blocking on their threads must not hold the exit.
    runtime.shutdown_background();
    Ok(ExitCode::SUCCESS)
}
