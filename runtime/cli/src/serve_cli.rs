//! `quiver serve`: the command that runs the MCP server over stdio (see `quiver_server`).

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use quiver_runtime::config::ServeMode;
use quiver_runtime::Host;
use quiver_server::{serve_http, serve_stdio, ServeOptions};

/// `quiver serve` flags.
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Which tools the client sees: every enabled tool (all), CORE + find_tools/call_tool
    /// (search), or CORE + load_tools with list_changed (dynamic). Default: [selector] mode.
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (default address: [serve.http]
    /// listen, else 127.0.0.1:8080). Any address but loopback needs [[serve.http.users]].
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
    http: Option<String>,
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

/// Resolves on SIGTERM or SIGINT, naming it.
async fn terminated() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = tokio::signal::ctrl_c() => "SIGINT",
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}

/// Serves until the client closes stdin; stdout carries only MCP messages.
pub(crate) fn serve(host: Host, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let options = ServeOptions { mode: args.mode.map(ServeMode::from) };
    if let Some(error) = host.state_error() {
        // Replicas that silently kept their state to themselves would each hold their own
        // cache and rate budget: refuse instead.
        anyhow::bail!("cannot serve: {error}");
    }
    // Writes are refused while the audit trail cannot be written: say so before serving.
    if let Some(log) = host.audit().map_err(|e| anyhow::anyhow!("cannot serve: {e}"))? {
        tracing::info!("audit trail: {}", log.path().display());
    }
    let host = Arc::new(host);
    let configured = host.config().config.serve.http.listen.clone();
    let listen = match args.http {
        Some(addr) if !addr.is_empty() => Some(addr),
        Some(_) => Some(configured.unwrap_or_else(|| "127.0.0.1:8080".to_owned())),
        None => configured,
    };
    let served = crate::runtime()?.block_on(async {
        match listen {
            // SIGTERM stops accepting and drains in-flight calls inside serve_http.
            Some(listen) => {
                serve_http(Arc::clone(&host), options, &listen, async {
                    let signal = terminated().await;
                    tracing::info!("{signal}: stopping");
                })
                .await
            }
            None => tokio::select! {
                served = serve_stdio(Arc::clone(&host), options) => served,
                signal = terminated() => {
                    tracing::info!("{signal}: stopping");
                    Ok(())
                }
            },
        }
    });
    // The client is gone: no upstream child outlives the server. (Provider calls still blocking
    // on their threads do not hold the exit: the runtime is never dropped.)
    host.upstreams().kill_all();
    served?;
    Ok(ExitCode::SUCCESS)
}
