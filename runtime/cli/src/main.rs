//! `quiver`: the command line of the quiver host.
//!
//! Exit codes: 0 success, 1 a failed command or tool call, 2 a usage error.
#![allow(clippy::print_stdout)]

mod cassette;
mod cassette_upstream;
mod enrich_cli;
mod replay;
mod select_cli;
mod serve_cli;
mod tune;
mod upstreams_cli;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use quiver_core::planner::{self, PlannerOptions};
use quiver_core::telemetry::{annotate_citations, Effectiveness, EventKind};
use quiver_core::terminal::for_terminal;
use quiver_runtime::config::LoadedConfig;
use quiver_runtime::host::describe;
use quiver_runtime::upstream::UpstreamState;
use quiver_runtime::{telemetry, Host, HostOptions, PluginStatus};
use serde_json::Value;
use tracing::level_filters::LevelFilter;

/// quiver: developer-service tools for LLM agents, with calls worth their tokens.
#[derive(Parser)]
#[command(name = "quiver", version, about)]
struct Cli {
    /// Config file (default: $QUIVER_CONFIG, ./quiver.toml, $XDG_CONFIG_HOME/quiver/config.toml).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Plugins directory (default: $QUIVER_PLUGINS, plugins_dir in the config, plugins/ beside
    /// the binary).
    #[arg(long, global = true, value_name = "DIR")]
    plugins: Option<PathBuf>,
    /// More log output on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Each plugin file: loaded (name, version, tool count), disabled, or why not.
    Plugins,
    /// List or inspect tools.
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// Call a tool and print its result.
    /// Call a tool through a session, as `serve` does: response projection by field groups
    /// (`"fields": [...]` in --args asks for more), size caps, fail-fast, telemetry, and with
    /// `[state] backend = "redis"` the shared cache.
    Call {
        /// Qualified tool name, e.g. github.get_issue.
        name: String,
        /// Arguments as a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// Give up after this many milliseconds.
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        /// Print the whole result (content, structured value, metadata) as JSON.
        #[arg(long)]
        json: bool,
        /// The provider's untouched answer: no session, no cache, no projection.
        #[arg(long)]
        raw: bool,
    },
    /// Check the setup: config, plugins directory, providers and their tokens (never printed).
    Doctor,
    /// Upstream tools held because their definitions changed or look poisoned: list, diff,
    /// approve.
    #[command(subcommand)]
    Upstreams(upstreams_cli::UpstreamsCommand),
    /// The audit trail of calls that change something (`[audit]`).
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Read telemetry and report whether the pipeline pays off.
    #[command(subcommand)]
    Tune(TuneCommand),
    /// Replay recorded agent sessions through the pipeline, pre-fetching off and then on, with
    /// each service answering as it did in the recording (a loopback cassette): pre-fetch hit
    /// rate, decline recall loss, cost overrun, API requests added, tokens delivered against the
    /// recorded answers, argument survival and modelled agent wall time, per tool and in total.
    Replay(ReplayArgs),
    /// API keys for `quiver serve --http`.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Whether a `quiver serve --http` answers: exit 0 when URL (default
    /// http://127.0.0.1:8080/healthz) answers 200 within 5 s — a container's health check,
    /// with nothing else in the image to make the request.
    Healthcheck {
        /// The plain-HTTP URL to ask (`/healthz`, or `/readyz` to require every plugin and
        /// upstream up).
        url: Option<String>,
    },
    /// Users' own service accounts, signed in to through `quiver serve --http`.
    #[command(subcommand)]
    Users(UsersCommand),
    /// Run the enrichments (output schemas, embeddings, dataflow, neighbours) over every tool,
    /// reusing the cache; prints what was computed, reused and failed.
    Enrich(enrich_cli::EnrichArgs),
    /// The dataflow graph: which tool's output can feed which tool's input, best edges per tool.
    Graph(enrich_cli::GraphArgs),
    /// Plausible multi-step tool-call scenarios from the dataflow graph.
    Sample(enrich_cli::SampleArgs),
    /// Rank tools for queries with the selector (JSONL out), or measure its recall@1/3/5/10 on
    /// an evaluation set with --gold.
    Select(select_cli::SelectArgs),
    /// Serve the tools over MCP on stdio (for Claude Code, Claude Desktop, VS Code…).
    Serve(serve_cli::ServeArgs),
    /// Which follow-up calls would be pre-fetched after the given calls, within a token budget:
    /// each admitted call with its value and cost, each declined one with its reason.
    Plan {
        /// A recent call (qualified tool name), oldest first; repeat for several.
        #[arg(long = "recent", required = true, value_name = "TOOL")]
        recent: Vec<String>,
        /// Token budget for the pre-fetches.
        #[arg(long, default_value_t = 8000)]
        budget: u32,
        /// An intent keyword (lifts opt-in field groups that mention it); repeat for several.
        #[arg(long = "intent", value_name = "WORD")]
        intent: Vec<String>,
        /// Halve the value of slow (p50 ≥ 5 s) and costly (≥ $0.10) calls.
        #[arg(long)]
        cost_aware: bool,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum TuneCommand {
    /// The effectiveness line (`# enrichment: prefetch_hit=… calls_saved=…`) and per-tool rows;
    /// with --apply, the R7 rule written to the config: `speculate = false` for tools whose
    /// pre-fetches were used < 50% of the time over ≥ 10, `[enrichment] enabled = true` at
    /// ≥ 60% overall with no tool disabled.
    Analyze {
        /// Telemetry files (JSONL); default: every file in the telemetry directory.
        files: Vec<PathBuf>,
        /// A pre-fetch counts as used when the agent made the same call within this many calls.
        #[arg(long, default_value_t = 3)]
        within: usize,
        /// Write the R7 rule to the config (--config, else the discovered file, else the user
        /// config, created); other lines stay as they are.
        #[arg(long)]
        apply: bool,
        /// With --apply, replace hand-written `speculate = true` / `enabled = false` too.
        #[arg(long, requires = "apply")]
        force: bool,
    },
    /// Seeds `[tools."…"]` sections for tools seen in telemetry and proposes follow-up links
    /// mined from telemetry and Claude Code transcripts (printed as TOML; --apply writes them).
    FromLogs {
        /// Telemetry files (JSONL); default: every file in the telemetry directory.
        files: Vec<PathBuf>,
        /// Claude Code transcripts, read at any depth (default: ~/.claude/projects).
        #[arg(long, value_name = "DIR")]
        claude_dir: Option<PathBuf>,
        /// Agent traces with tool calls and their outputs, one session per file: OpenAI
        /// Responses items (`function_call` / `function_call_output`) or Chat messages
        /// (`tool_calls` / `role: tool`), as a JSON array or an object with `messages`.
        #[arg(long, value_name = "FILE", num_args = 1..)]
        traces: Vec<PathBuf>,
        /// quiver's own session recordings (`[telemetry] record_sessions = true`), files or
        /// folders: arguments and whole results, so links come with their projections.
        #[arg(long, value_name = "PATH", num_args = 1..)]
        recordings: Vec<PathBuf>,
        /// The provider bare tool names in traces belong to (`get_issue` → `github.get_issue`,
        /// with github-mcp-server's own names mapped to quiver's).
        #[arg(long, value_name = "NAME")]
        provider: Option<String>,
        /// A link needs at least this many observed A→B transitions.
        #[arg(long, default_value_t = tune::DEFAULT_MIN_SUPPORT, value_name = "N")]
        min_support: u64,
        /// Write the seeded sections and new links to the config; never replaces a section or
        /// a link that is there.
        #[arg(long)]
        apply: bool,
    },
}

#[derive(clap::Args)]
struct ReplayArgs {
    /// Agent traces with tool calls and their outputs, one session per file (as `tune
    /// from-logs --traces` reads them); a session's task is the name of its file's folder.
    #[arg(
        long,
        value_name = "FILE",
        num_args = 1..,
        required_unless_present_any = ["claude_dir", "recordings"]
    )]
    traces: Vec<PathBuf>,
    /// quiver's own session recordings (`[telemetry] record_sessions = true`): files or folders
    /// of them, any provider's tools, each recorded result served where the provider would
    /// answer; a recording's task is its own file.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    recordings: Vec<PathBuf>,
    /// Claude Code transcripts (JSONL), read at any depth: their timestamps give each turn's
    /// think time and each other tool's latency.
    #[arg(long, value_name = "DIR")]
    claude_dir: Option<PathBuf>,
    /// The provider whose tools the sessions called (bare and github-mcp-server names mapped).
    #[arg(long, value_name = "NAME", default_value = "github")]
    provider: String,
    /// Which tasks: all, the calibration part, or the held-out part (split by task name).
    #[arg(long, value_enum, default_value = "all")]
    part: replay::Part,
    /// The agent's think time between an answer and its next call, in the wall-time model,
    /// where the recording has no timestamps.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    think_ms: u64,
    /// One service request, in the wall-time model.
    #[arg(long, value_name = "MS", default_value_t = 300)]
    service_ms: u64,
    /// A pre-fetch counts as used when the agent made the same call within this many calls.
    #[arg(long, default_value_t = 3)]
    within: usize,
    /// Also run the `neighbors` enrichment and say how often it, and the follow-up links, name
    /// the tool the agent called next.
    #[arg(long)]
    neighbors: bool,
    /// Keep the telemetry of the run with pre-fetching on in DIR: `quiver tune analyze DIR/*
    /// --apply` then writes what it shows (speculate = false for tools whose pre-fetches went
    /// unused).
    #[arg(long, value_name = "DIR")]
    telemetry_out: Option<PathBuf>,
    /// As JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Checks that no line of the trail was removed or edited: each names the hash of the one
    /// before it. Prints the newest line's hash, to keep elsewhere.
    Verify {
        /// The trail (default: `[audit] path` of the config).
        path: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ToolsCommand {
    /// Every tool the host serves: name, group (what `[providers.NAME] groups` selects), side-effect
    /// class and the first line of its description.
    List {
        /// As JSON, with input schemas.
        #[arg(long)]
        json: bool,
    },
    /// One tool: its spec and effective value model, with the layer that set each field.
    Show {
        /// Qualified tool name, e.g. github.get_issue.
        name: String,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Print a fresh API key for NAME (once: it is stored nowhere) and the
    /// [[serve.http.users]] lines to add to quiver.toml, which hold only its SHA-256.
    New {
        /// The user's name, as telemetry and logs will show it.
        name: String,
    },
}

#[derive(Subcommand)]
enum UsersCommand {
    /// The accounts USER has connected (never their tokens).
    Accounts {
        /// The user's name, as in [[serve.http.users]].
        user: String,
    },
    /// Forget USER's accounts at service NAME (every service when none is named), revoking
    /// their tokens where the service allows: their next call asks them to sign in again.
    Disconnect {
        /// The user's name, as in [[serve.http.users]].
        user: String,
        /// The provider (`github`); none: every one.
        name: Option<String>,
    },
}

/// A mistake in how quiver was invoked (a flag's value, a missing argument): exit code 2, as for
/// clap's own usage errors.
#[derive(Debug)]
pub(crate) struct UsageError(pub(crate) String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// `quiver tools list | head -1`: when the reader goes away, stop quietly instead of panicking
/// on the next line printed.
fn end_quietly_on_a_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.contains("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    end_quietly_on_a_closed_stdout();
    let cli = Cli::parse();
    let level = match cli.verbose {
        0 => LevelFilter::WARN,
        1 => LevelFilter::INFO,
        _ => LevelFilter::DEBUG,
    };
    // A replay's stand-ins for other MCP servers run in this process, beside quiver's clients
    // of them: the MCP library's notes on their connections are not the user's business.
    let quiet: &[&str] = if matches!(cli.command, Command::Replay(_)) && cli.verbose < 2 {
        &["rmcp=off"]
    } else {
        &[]
    };
    // A server exports its spans when `[telemetry.otlp]` says where; a config that does not
    // read is reported when the host opens it.
    let traces = match &cli.command {
        Command::Serve(_) => LoadedConfig::discover(cli.config.as_deref())
            .ok()
            .map(|loaded| quiver_runtime::traces::start(&loaded.config.telemetry.otlp)),
        _ => None,
    };
    let (exporter, layer) = match traces {
        Some(Ok(Some((exporter, layer)))) => (Some(exporter), Some(layer)),
        Some(Err(e)) => {
            eprintln!("quiver: {e}");
            return ExitCode::from(1);
        }
        _ => (None, None),
    };
    quiver_runtime::logging::init_with_traces(level, quiet, layer);
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("quiver: {e:#}");
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    };
    // The spans still queued go out before the process ends.
    drop(exporter);
    code
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // tune writes the config, so it may name one that does not exist yet.
    if let Command::Tune(command) = cli.command {
        return tune(cli.config.as_deref(), cli.plugins.as_deref(), command);
    }
    // A key needs no host.
    if let Command::Healthcheck { url } = &cli.command {
        return healthcheck(url.as_deref().unwrap_or("http://127.0.0.1:8080/healthz"));
    }
    if let Command::Keys(KeysCommand::New { name }) = &cli.command {
        return keys_new(name);
    }
    // The trail is read as it lies; no plugin needs to load.
    if let Command::Audit(AuditCommand::Verify { path }) = &cli.command {
        return audit_verify(cli.config.as_deref(), path.as_deref());
    }
    // Pins are read and approved in the store; no upstream needs to start.
    if let Command::Upstreams(upstreams_cli::UpstreamsCommand::Connect { name }) = &cli.command {
        // Signing in needs the upstream's config and the accounts, not its connection.
        let options = HostOptions { config: cli.config.clone(), plugins_dir: cli.plugins.clone() };
        let host = Host::open(&options)?;
        return upstreams_cli::connect(&host, name);
    }
    if let Command::Upstreams(command) = cli.command {
        return upstreams_cli::upstreams(command);
    }
    // A replay opens its own hosts, pointed at its cassette.
    if let Command::Replay(args) = cli.command {
        return replay_command(cli.config.as_deref(), cli.plugins.as_deref(), args);
    }
    let options = HostOptions { config: cli.config, plugins_dir: cli.plugins };
    let host = Host::open(&options)?;
    // Upstream MCP servers start with quiver, in parallel, each bounded by its start timeout;
    // their clients live on the command's runtime, which calls and the server share.
    if !host.upstreams().all().is_empty() {
        runtime()?.block_on(host.start_upstreams());
    }
    for warning in host.config_warnings() {
        tracing::warn!("{warning}");
    }
    match cli.command {
        Command::Plugins => plugins(&host),
        Command::Users(command) => users(&host, command),
        Command::Tools(ToolsCommand::List { json }) => tools_list(&host, json),
        Command::Tools(ToolsCommand::Show { name, json }) => tools_show(&host, &name, json),
        Command::Call { name, args, timeout_ms, json, raw } => {
            call(host, &name, &args, timeout_ms, json, raw)
        }
        Command::Doctor => doctor(&host),
        Command::Enrich(args) => enrich_cli::enrich(&host, args),
        Command::Graph(args) => enrich_cli::graph(&host, args),
        Command::Sample(args) => enrich_cli::sample(&host, args),
        Command::Select(args) => select_cli::select(&host, args),
        Command::Serve(args) => serve_cli::serve(host, args),
        Command::Tune(_)
        | Command::Keys(_)
        | Command::Healthcheck { .. }
        | Command::Replay(_)
        | Command::Upstreams(_)
        | Command::Audit(_) => {
            unreachable!("handled before the host opens")
        }
        Command::Plan { recent, budget, intent, cost_aware, json } => {
            plan(&host, &recent, budget, &intent, cost_aware, json)
        }
    }
}

/// `quiver healthcheck [URL]`: one plain HTTP/1.1 GET over loopback or the pod's network, no
/// client library (the image has none, and this needs none).
fn healthcheck(url: &str) -> anyhow::Result<ExitCode> {
    use std::io::{Read, Write};
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(UsageError(format!(
            "`{url}` is not a plain http:// URL; check the listener itself (TLS is the proxy's)"
        ))
        .into());
    };
    let (authority, path) =
        rest.split_once('/').map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let timeout = std::time::Duration::from_secs(5);
    let address = std::net::ToSocketAddrs::to_socket_addrs(&authority)
        .ok()
        .and_then(|mut a| a.next())
        .with_context(|| format!("cannot resolve `{authority}`"))?;
    let mut stream = std::net::TcpStream::connect_timeout(&address, timeout)
        .with_context(|| format!("nothing answers at {authority}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n")?;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    let status = answer.split_whitespace().nth(1).unwrap_or_default();
    if status == "200" {
        println!("{url}: 200");
        Ok(ExitCode::SUCCESS)
    } else {
        let line = answer.lines().next().unwrap_or("no answer");
        eprintln!("quiver: {url} answered {line}");
        Ok(ExitCode::FAILURE)
    }
}

/// `quiver users accounts|disconnect`.
fn users(host: &Host, command: UsersCommand) -> anyhow::Result<ExitCode> {
    let accounts = host.accounts();
    for (provider, problem) in accounts.problems() {
        eprintln!("quiver: {provider}: {problem}");
    }
    match command {
        UsersCommand::Accounts { user } => {
            let providers = accounts.providers();
            if providers.is_empty() {
                println!("no provider has [providers.NAME.oauth]: nobody signs in");
                return Ok(ExitCode::SUCCESS);
            }
            for provider in providers {
                let grants = runtime()?.block_on(accounts.grants(&user, &provider));
                match grants {
                    Ok(grants) if grants.is_empty() => println!("{provider}: not connected"),
                    Ok(grants) => {
                        for (i, grant) in grants.iter().enumerate() {
                            let default = if i == 0 { " (default)" } else { "" };
                            println!("{provider}: {}{default}", grant.account);
                        }
                    }
                    Err(e) => println!("{provider}: {e}"),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        UsersCommand::Disconnect { user, name } => {
            if let Some(name) = &name {
                if !accounts.signs_in(name) {
                    return Err(UsageError(format!(
                        "`{name}` has no [providers.{name}.oauth]: nobody signs in to it"
                    ))
                    .into());
                }
            }
            let gone = runtime()?
                .block_on(accounts.disconnect(&user, name.as_deref()))
                .map_err(|e| anyhow::anyhow!(e))?;
            if gone.is_empty() {
                println!("{user} had no account to disconnect");
            }
            for (provider, account) in gone {
                println!("disconnected {user} from {provider} account {account}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `quiver replay`: the user's config (value models, enrichment settings) replayed on traces.
fn replay_command(
    config: Option<&Path>,
    plugins: Option<&Path>,
    args: ReplayArgs,
) -> anyhow::Result<ExitCode> {
    let loaded = LoadedConfig::discover(config)?;
    let options = replay::ReplayOptions {
        traces: args.traces,
        claude_dir: args.claude_dir,
        recordings: args.recordings,
        neighbors: args.neighbors,
        telemetry_out: args.telemetry_out,
        provider: args.provider,
        part: args.part,
        think_ms: args.think_ms,
        service_ms: args.service_ms,
        within: args.within,
    };
    let report = replay::replay(&loaded, plugins, &options)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        replay::print(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// `quiver keys new NAME`: 32 random bytes as `qk_` + hex, printed once with its config entry.
/// `doctor`'s lines for the audit trail and traces, when configured: whether the trail's file can
/// be written (opened without taking it from a running server) and where spans go. The number
/// of problems.
fn print_operations(host: &Host) -> usize {
    let loaded = host.config();
    let config = &loaded.config;
    let mut problems = 0;
    if let Some(path) = config.audit.resolved_path(loaded.path.as_deref()) {
        let writable = path.parent().map(std::fs::create_dir_all).transpose().and_then(|_| {
            std::fs::OpenOptions::new().create(true).append(true).open(&path).map(|_| ())
        });
        match writable {
            Ok(()) => println!(
                "audit: {} (writable; `quiver audit verify` checks its chain)",
                path.display()
            ),
            Err(e) => {
                problems += 1;
                println!(
                    "audit: {} cannot be written ({e}); writes would be refused — fix its \
                     folder's permissions or set [audit] path elsewhere",
                    path.display()
                );
            }
        }
    }
    // Sign-in: which services users connect to themselves, and what keeps it from working
    // (never a token, a secret or a key).
    let accounts = host.accounts();
    let problems_of_accounts = accounts.problems();
    for provider in accounts.providers() {
        if !problems_of_accounts.iter().any(|(p, _)| *p == provider) {
            println!(
                "sign-in: {provider} (users connect their own accounts at /connect/{provider})"
            );
        }
    }
    for (provider, problem) in &problems_of_accounts {
        problems += 1;
        println!("sign-in: {provider}: {problem}");
    }
    let otlp = &config.telemetry.otlp;
    if let Some(endpoint) = otlp.endpoint.as_deref().filter(|e| !e.trim().is_empty()) {
        let protocol = match otlp.protocol {
            quiver_runtime::traces::OtlpProtocol::Http => "OTLP/HTTP",
            quiver_runtime::traces::OtlpProtocol::Grpc => "OTLP/gRPC",
        };
        // The collector's headers as `quiver serve` reads them when it starts.
        match quiver_runtime::traces::collector_headers(otlp) {
            Err(why) => {
                problems += 1;
                println!(
                    "traces: {protocol} to {endpoint}, but {why}; `quiver serve` would not start"
                );
            }
            Ok(_) => println!(
                "traces: {protocol} to {endpoint}, sample ratio {} (spans of `quiver serve`)",
                otlp.sample_ratio
            ),
        }
    }
    problems
}

/// `quiver audit verify [PATH]`: exit 0 when the chain holds, 1 naming the first line where it
/// does not.
fn audit_verify(config: Option<&Path>, path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let path = match path {
        Some(path) => path.to_owned(),
        None => {
            let loaded = LoadedConfig::discover(config)?;
            let Some(path) = loaded.config.audit.resolved_path(loaded.path.as_deref()) else {
                anyhow::bail!(
                    "no audit trail is configured: give its file (`quiver audit verify PATH`) or \
                     set [audit] path"
                );
            };
            path
        }
    };
    match quiver_runtime::audit::verify(&path) {
        Ok(verified) => {
            println!(
                "audit trail intact: {} lines in {} file(s){}; newest line's hash {}",
                verified.lines,
                verified.files.len(),
                if verified.from_the_start { "" } else { " (older files were rotated away)" },
                verified.head
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            eprintln!("audit trail broken: {why}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn keys_new(name: &str) -> anyhow::Result<ExitCode> {
    if name.trim().is_empty() || name.contains('"') {
        bail!("a user name must be non-empty and without quotes, e.g. `quiver keys new alice`");
    }
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| anyhow::anyhow!("the system has no randomness to offer: {e}"))?;
    let key = format!("qk_{}", hex::encode(bytes));
    println!("# API key for {name} (shown once; hand it to them, it is stored nowhere):");
    println!("# {key}");
    println!("# they send it as `Authorization: Bearer <key>`. Add to quiver.toml:");
    println!("[[serve.http.users]]");
    println!("name = \"{name}\"");
    println!("key_sha256 = \"{}\"", quiver_server::key_sha256(&key));
    Ok(ExitCode::SUCCESS)
}

/// The one async runtime of a command: upstream clients run on it, and so do calls and the
/// server that use them.
pub(crate) fn runtime() -> anyhow::Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    if let Some(runtime) = RUNTIME.get() {
        return Ok(runtime);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    Ok(RUNTIME.get_or_init(|| runtime))
}

/// One line per upstream: `ready     everything: stdio: npx …, 13 tools (2026-07-28)`.
fn print_upstreams(host: &Host) -> usize {
    let mut failed = 0;
    for report in host.upstream_reports() {
        let name = &report.name;
        let transport = &report.transport;
        // What the server printed before it stopped: for the operator, never obeyed.
        let stderr = report
            .stderr_tail
            .as_deref()
            .map(|tail| format!("; its stderr ended with: {}", one_line(tail)))
            .unwrap_or_default();
        match &report.state {
            UpstreamState::Ready => println!(
                "ready     upstream {name}: {transport}, {} tools (protocol {})",
                report.tools,
                report.protocol.as_deref().unwrap_or("?")
            ),
            UpstreamState::Disabled => {
                println!("disabled  upstream {name}: {transport} (enabled = false in the config)")
            }
            UpstreamState::Starting => println!("starting  upstream {name}: {transport}"),
            UpstreamState::Failed { reason } => {
                failed += 1;
                println!("failed    upstream {name}: {transport}: {}{stderr}", one_line(reason))
            }
        }
        for held in &report.held {
            let why = if held.changed { "changed since approved" } else { "looks poisoned" };
            println!(
                "held      tool {name}.{}: {why}; review with `quiver upstreams diff {name}`",
                one_line(&held.tool)
            );
        }
    }
    failed
}

/// Text from outside (an upstream's names, descriptions, reasons, stderr) on one line, its
/// control characters shown, never obeyed by the terminal.
fn one_line(text: &str) -> String {
    for_terminal(text, false).into_owned()
}

fn plugins(host: &Host) -> anyhow::Result<ExitCode> {
    let (dir, source) = host.plugins_dir();
    println!("plugins directory: {} ({source})", dir.display());
    if host.plugin_reports().is_empty() {
        println!("no plugin files found");
    }
    for report in host.plugin_reports() {
        let file = report.path.file_name().map(|f| f.to_string_lossy()).unwrap_or_default();
        match &report.status {
            PluginStatus::Loaded { provider, version, tools, .. } => {
                println!("loaded    {file}: {provider} {version}, {tools} tools")
            }
            PluginStatus::Disabled { provider, version } => {
                println!("disabled  {file}: {provider} {version} (enabled = false in the config)")
            }
            PluginStatus::NotConfigured { provider, hint } => {
                println!("not configured  {file}: {provider}: {hint}")
            }
            PluginStatus::Failed { reason } => println!("failed    {file}: {}", one_line(reason)),
        }
    }
    let failed_upstreams = print_upstreams(host);
    let failed_plugins = host
        .plugin_reports()
        .iter()
        .filter(|r| matches!(r.status, PluginStatus::Failed { .. }))
        .count();
    Ok(if failed_plugins + failed_upstreams == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn tools_list(host: &Host, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        let mut tools: Vec<Value> = host
            .tools()
            .iter()
            .map(|t| {
                let mut d = describe(t);
                d["side_effect_class"] =
                    serde_json::to_value(host.value_model(t).model.side_effect_class)
                        .unwrap_or(Value::Null);
                d
            })
            .collect();
        // Tools of [[sources]] files: described for enrichments and selection, not served.
        tools.extend(host.static_tools().iter().map(|t| {
            serde_json::json!({
                "name": t.name.to_string(),
                "description": t.spec.description,
                "input_schema": t.spec.input_schema,
                "output_schema": t.spec.output_schema,
                "source": t.path.display().to_string(),
                "served": false,
            })
        }));
        println!("{}", serde_json::to_string_pretty(&tools)?);
        return Ok(ExitCode::SUCCESS);
    }
    // name, group (the toolset `[providers.NAME] groups` selects), side-effect class, summary.
    let rows: Vec<[String; 4]> = host
        .tools()
        .iter()
        .map(|t| {
            let effect = serde_json::to_value(host.value_model(t).model.side_effect_class)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let summary = t.spec.description.lines().next().unwrap_or_default();
            let group = t.spec.group.as_deref().unwrap_or("-");
            [one_line(&t.name.to_string()), one_line(group), effect, one_line(summary)]
        })
        .chain(host.static_tools().iter().map(|t| {
            let summary = t.spec.description.lines().next().unwrap_or_default();
            let group = t.spec.group.as_deref().unwrap_or("-");
            [
                one_line(&t.name.to_string()),
                one_line(group),
                "described only".into(),
                one_line(summary),
            ]
        }))
        .collect();
    if rows.is_empty() {
        eprintln!("quiver: no tools; `quiver plugins` shows what loaded and why not");
        return Ok(ExitCode::SUCCESS);
    }
    let width = rows.iter().map(|r| r[0].len()).max().unwrap_or(0);
    let group_width = rows.iter().map(|r| r[1].len()).max().unwrap_or(0);
    for [name, group, effect, summary] in rows {
        println!("{name:width$}  {group:group_width$}  {effect:16}  {summary}");
    }
    Ok(ExitCode::SUCCESS)
}

fn tools_show(host: &Host, name: &str, json: bool) -> anyhow::Result<ExitCode> {
    let Some(tool) = host.tool(name) else {
        bail!("no tool `{name}`; `quiver tools list` shows the tools this host serves");
    };
    let resolved = host.value_model(&tool);
    if json {
        let provenance: serde_json::Map<String, Value> = resolved
            .provenance
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.to_string())))
            .collect();
        let out = serde_json::json!({
            "tool": describe(&tool),
            "value_model": resolved.model,
            "provenance": provenance,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}  (MCP name {})", one_line(&tool.name.to_string()), tool.name.mcp_name());
    println!("  {}", for_terminal(&tool.spec.description, true));
    if let Some(group) = &tool.spec.group {
        println!("  group: {}", one_line(group));
    }
    println!("  served by: {}", tool.served_by());
    let provider = &tool.name.provider;
    if tool.plugin().is_some() && host.accounts().signs_in(provider) {
        // Which account a user's call of it acts as.
        let mcp = tool.name.mcp_name();
        let mut rules = Vec::new();
        for user in &host.config().config.serve.http.users {
            let specs: Vec<_> = user.accounts.iter().map(|a| a.rule.clone()).collect();
            let Ok(compiled) = quiver_core::scope::ScopeRules::named(&specs, "accounts") else {
                continue;
            };
            for (i, account) in user.accounts.iter().enumerate() {
                if compiled.governs(&tool.name.to_string(), &mcp, i) {
                    rules.push(format!(
                        "{} as {} when {}",
                        user.name,
                        account.account,
                        compiled.describe(i)
                    ));
                }
            }
        }
        println!(
            "  accounts: each HTTP user acts as their own {provider} account, signed in at \
             /connect/{provider} on first use (the first one connected, unless a rule chooses)"
        );
        for rule in rules {
            println!("    {rule}");
        }
    }
    let flows = &host.config().config.security.flows;
    if let Ok(rules) = quiver_core::flows::FlowRules::new(flows).map_err(|e| tracing::warn!("{e}"))
    {
        let upstream = tool.plugin().is_none();
        let mcp = tool.name.mcp_name();
        let line = if !rules.enabled() {
            None
        } else if !host.policy_class(&tool).is_speculatable() {
            let scopes: Vec<String> =
                rules.scope_arguments().iter().map(|set| set.join("+")).collect();
            Some(format!(
                "a write: asked (refused when the client cannot ask) once the session read text \
                 written by others and data from another scope than this call's ({})",
                scopes.join(", ")
            ))
        } else if rules.is_untrusted(&tool.name.to_string(), &mcp, upstream) {
            Some("its results count as text written by others".to_owned())
        } else {
            None
        };
        if let Some(line) = line {
            println!("  toxic flows ([security.flows]): {line}");
        }
    }
    if let quiver_runtime::registry::ToolOrigin::Upstream { upstream, declared, .. } = &tool.origin
    {
        let schemas = match upstream.config().schemas {
            quiver_runtime::upstream::UpstreamSchemas::AsDeclared => "as the server declared them",
            quiver_runtime::upstream::UpstreamSchemas::Portable => {
                "rewritten (schemas = \"portable\")"
            }
        };
        println!(
            "  clients see: its definition as the server declared it (annotations: {}), schemas \
             {schemas}; the value model below is quiver's own view, used for caching, \
             projection and pre-fetching",
            declared.get("annotations").map_or_else(|| "none".to_owned(), Value::to_string)
        );
    }
    let config = host.config();
    let qualified = tool.name.to_string();
    let (edit, _) = config.user_edits.edit_for(&qualified);
    if !edit.is_empty() {
        // Each change with the section that made it (the last to set it: right-wins).
        let sections = config.user_edits.sections_for(&qualified);
        let set_by = |set: &dyn Fn(&quiver_core::tool_edit::ToolEdit) -> bool| {
            sections
                .iter()
                .rev()
                .find(|(_, s)| set(s))
                .map_or(String::new(), |(p, _)| format!("  [tools.\"{p}\"]"))
        };
        println!("  changed for clients:");
        if let Some(name) = &edit.name {
            println!(
                "    name: listed and called as `{name}` (the old name still answers, with a \
                 note){}",
                set_by(&|s| s.name.is_some())
            );
        }
        if edit.description.is_some() || edit.description_append.is_some() {
            println!(
                "    description: {}{}",
                one_line(&edit.description(&tool.spec.description)),
                set_by(&|s| s.description.is_some() || s.description_append.is_some())
            );
        }
        for (argument, change) in &edit.arguments {
            println!(
                "    argument `{argument}`: {}{}",
                serde_json::to_string(change)?,
                set_by(&|s| s.arguments.contains_key(argument))
            );
        }
        for problem in edit.problems(&tool.spec.input_schema) {
            println!("    (has no effect: {problem})");
        }
    }
    println!();
    println!("effective value model (field = value  [layer that set it]):");
    let flat: BTreeMap<String, Value> =
        flatten(&serde_json::to_value(&resolved.model)?).into_iter().collect();
    // Provenance is a sorted map: fields print in a stable order.
    for (path, layer) in &resolved.provenance {
        let value = flat.get(path).map(Value::to_string).unwrap_or_else(|| "(unset)".into());
        println!("  {path} = {value}  [{layer}]");
    }
    Ok(ExitCode::SUCCESS)
}

/// `{"a": {"b": 1}}` → `[("a.b", 1)]`; lists stay whole, as they merge whole.
fn flatten(value: &Value) -> Vec<(String, Value)> {
    fn walk(prefix: &str, value: &Value, out: &mut Vec<(String, Value)>) {
        match value {
            Value::Object(map) if !map.is_empty() => {
                for (k, v) in map {
                    let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    walk(&path, v, out);
                }
            }
            other => out.push((prefix.to_owned(), other.clone())),
        }
    }
    let mut out = Vec::new();
    walk("", value, &mut out);
    out
}

fn call(
    host: Host,
    name: &str,
    args: &str,
    timeout_ms: Option<u64>,
    json: bool,
    raw: bool,
) -> anyhow::Result<ExitCode> {
    let args: Value = serde_json::from_str(args).map_err(|e| {
        UsageError(format!(
            "--args is not JSON ({e}): {args}; pass an object such as '{{\"owner\":\"o\"}}'"
        ))
    })?;
    if !args.is_object() {
        return Err(UsageError(format!("--args must be a JSON object, got {args}")).into());
    }
    let timeout = timeout_ms.map(Duration::from_millis);
    let result = if raw {
        runtime()?.block_on(host.call(name, args, timeout, "cli", None))
    } else {
        let mut session = quiver_runtime::Session::new(std::sync::Arc::new(host), "cli")
            // A terminal has no earlier answer to point back to: a repeat shows the data.
            .repeats_as_data();
        if let Some(timeout) = timeout {
            session = session.with_timeout(timeout);
        }
        runtime()?.block_on(async {
            let (result, _) = session.call(name, args, &[]).await;
            session.shutdown().await;
            result
        })
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else if !result.is_error {
        // Models get compact JSON; people at a terminal get it indented.
        match &result.structured {
            Some(value) => {
                println!("{}", serde_json::to_string_pretty(value)?);
                // What the session says about the result (what was left out and how to ask
                // for it, a cached repeat) goes to stderr, beside the data.
                for note in result.content.iter().skip(1) {
                    if let quiver_core::Content::Text { text, .. } = note {
                        eprintln!("{text}");
                    }
                }
            }
            None => println!("{}", result.text_content()),
        }
    }
    if result.is_error {
        let kind = result
            .error_kind
            .and_then(|k| serde_json::to_value(k).ok())
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "error".into());
        eprintln!("quiver: {name} failed ({kind}): {}", result.text_content());
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn plan(
    host: &Host,
    recent: &[String],
    budget: u32,
    intent: &[String],
    cost_aware: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    for name in recent {
        if host.tool(name).is_none() {
            bail!("no tool `{name}`; `quiver tools list` shows the tools this host serves");
        }
    }
    let candidates = host.follow_up_candidates(recent);
    let candidates: Vec<_> = candidates.iter().map(|c| c.as_candidate()).collect();
    // The threshold sessions use: `plan` shows what they would pre-fetch.
    let min_followup_probability = host.config().config.enrichment.min_prefetch_probability;
    let options = PlannerOptions {
        budget_tokens: budget,
        cost_aware,
        min_followup_probability,
        ..PlannerOptions::default()
    };
    let plan = planner::plan(recent, &candidates, intent, &options);
    if json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(ExitCode::SUCCESS);
    }
    let method = serde_json::to_value(plan.method)?.as_str().unwrap_or_default().to_owned();
    println!(
        "plan after {}: {} of {} candidates, {} of {budget} tokens, value {:.3} ({method})",
        recent.join(", "),
        plan.admitted.len(),
        candidates.len(),
        plan.total_cost,
        plan.total_value,
    );
    for call in &plan.admitted {
        println!(
            "  pre-fetch  {}  value {:.3}  cost {} tokens  (p {:.2} after {})",
            call.tool, call.value, call.cost_tokens, call.probability, call.from
        );
    }
    for declined in &plan.declined {
        let reason = serde_json::to_value(declined.reason)?.as_str().unwrap_or_default().to_owned();
        println!(
            "  declined   {}  {reason}  value {:.3}  cost {} tokens  (after {})",
            declined.tool, declined.value, declined.cost_tokens, declined.from
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Opens the host for `tune` with the config `tune` edits; a config that does not exist yet
/// means defaults (it is created on --apply).
fn tune(
    config: Option<&Path>,
    plugins: Option<&Path>,
    command: TuneCommand,
) -> anyhow::Result<ExitCode> {
    let target = tune::config_target(config);
    let loaded = if target.is_file() {
        LoadedConfig::read(&target)?
    } else if config.is_some() || std::env::var_os("QUIVER_CONFIG").is_some_and(|v| !v.is_empty()) {
        LoadedConfig::default()
    } else {
        LoadedConfig::discover(None)?
    };
    let host = Host::with_config(loaded, plugins);
    // Links between upstream tools are written only for tools the host serves: start them.
    if !host.upstreams().all().is_empty() {
        runtime()?.block_on(host.start_upstreams());
    }
    match command {
        TuneCommand::Analyze { files, within, apply, force } => {
            tune_analyze(&host, &target, files, within, apply, force)
        }
        TuneCommand::FromLogs {
            files,
            claude_dir,
            traces,
            recordings,
            provider,
            min_support,
            apply,
        } => {
            let logs = tune::Logs { telemetry: files, claude_dir, traces, recordings, provider };
            tune_from_logs(&host, &target, logs, min_support, apply)
        }
    }
}

/// The telemetry files named, or those of the telemetry directory.
fn telemetry_files(host: &Host, files: Vec<PathBuf>) -> (Vec<PathBuf>, PathBuf) {
    let dir = host.config().config.telemetry.directory();
    if files.is_empty() {
        (telemetry::event_files(&dir), dir)
    } else {
        (files, dir)
    }
}

fn tune_analyze(
    host: &Host,
    target: &Path,
    files: Vec<PathBuf>,
    within: usize,
    apply: bool,
    force: bool,
) -> anyhow::Result<ExitCode> {
    let (files, dir) = telemetry_files(host, files);
    if files.is_empty() {
        bail!(
            "no telemetry in {}; enable it with [telemetry] enabled = true, or pass files",
            dir.display()
        );
    }
    let (mut events, problems) = telemetry::read_events(&files);
    for problem in &problems {
        eprintln!("quiver: skipped {problem}");
    }
    annotate_citations(&mut events, within);
    let mut total = Effectiveness::default();
    let mut per_tool: BTreeMap<&str, Effectiveness> = BTreeMap::new();
    let mut calls: BTreeMap<&str, u64> = BTreeMap::new();
    for event in &events {
        total.accumulate(event);
        per_tool.entry(&event.tool).or_default().accumulate(event);
        if event.kind == EventKind::Call {
            *calls.entry(&event.tool).or_default() += 1;
        }
    }
    println!("# {} events from {} file(s)", events.len(), files.len());
    println!("# enrichment: {total}");
    // `quiver serve` sessions: how often the listed tools were not enough.
    for line in quiver_server::escape::EscapeSummary::from_events(&events).lines() {
        println!("{line}");
    }
    println!(
        "{:<45} {:>6} {:>6} {:>10} {:>6} {:>8}",
        "tool", "calls", "dedup", "prefetched", "used", "declined"
    );
    for (tool, e) in &per_tool {
        println!(
            "{tool:<45} {:>6} {:>6} {:>10} {:>6} {:>8}",
            calls.get(tool).copied().unwrap_or(0),
            e.dedup_hits,
            e.prefetches,
            e.prefetches_cited,
            e.declines
        );
    }
    let verdict = tune::r7(&events);
    if !apply {
        for tool in &verdict.disable {
            println!(
                "# r7: [tools.{}] speculate = false ({}); --apply writes it",
                tune::quoted(tool),
                verdict.per_tool[tool]
            );
        }
        if verdict.enable {
            println!("# r7: [enrichment] enabled = true ({}); --apply writes it", verdict.overall);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut config = tune::ConfigFile::open(target)?;
    let changes = tune::apply_r7(&mut config, &verdict, force)?;
    report_config(&config)?;
    let mut changed = false;
    for change in &changes {
        let section = &change.section;
        let setting = &change.setting;
        let evidence = change.evidence;
        match &change.outcome {
            tune::FlagChange::Added => println!("  set [{section}] {setting}  ({evidence})"),
            tune::FlagChange::Replaced => {
                println!("  replaced [{section}] with {setting}, --force  ({evidence})")
            }
            tune::FlagChange::AlreadySet => {}
            tune::FlagChange::KeptHandWritten(value) => println!(
                "  kept [{section}] {} = {value}: written by hand; --force replaces it with \
                 {setting}  ({evidence})",
                setting.split(' ').next().unwrap_or_default()
            ),
        }
        changed |= change.outcome.changed();
    }
    if !changed {
        println!("  nothing to change");
    }
    Ok(ExitCode::SUCCESS)
}

/// Saves `config` when it changed and says which file it is.
fn report_config(config: &tune::ConfigFile) -> anyhow::Result<()> {
    let path = config.path().display();
    if !config.is_changed() {
        println!("config: {path}");
        return Ok(());
    }
    config.save()?;
    if config.existed() {
        println!("config: {path} (updated)");
    } else {
        println!("config: {path} (created)");
    }
    Ok(())
}

fn tune_from_logs(
    host: &Host,
    target: &Path,
    logs: tune::Logs,
    min_support: u64,
    apply: bool,
) -> anyhow::Result<ExitCode> {
    let tune::Logs { telemetry: files, claude_dir, traces, recordings, provider } = logs;
    let (files, telemetry_dir) = telemetry_files(host, files);
    let scan = tune::telemetry_sequences(&files);
    for problem in &scan.problems {
        eprintln!("quiver: skipped {problem}");
    }
    let claude_dir = claude_dir.or_else(tune::default_claude_dir);
    let transcripts = claude_dir.as_deref().map(tune::transcript_files).unwrap_or_default();
    if files.is_empty() && transcripts.is_empty() && traces.is_empty() && recordings.is_empty() {
        let claude =
            claude_dir.map(|d| d.display().to_string()).unwrap_or("~/.claude/projects".into());
        bail!(
            "nothing to mine: no telemetry in {} and no transcripts under {claude}; pass \
             telemetry files or --claude-dir",
            telemetry_dir.display()
        );
    }
    let name = |raw: &str| tune::canonical_tool_name(host, raw);
    let mut read = tune::read_transcripts(&transcripts, &name);
    let trace_name = |raw: &str| tune::trace_tool_name(host, provider.as_deref(), raw);
    let traced = tune::read_traces(&traces, &trace_name);
    read.merge(traced);
    let (recorded, unreadable) = replay::read_recordings(&recordings);
    read.unreadable.extend(unreadable);
    read.files += recorded.len();
    for (sequence, _) in recorded {
        read.tool_calls += sequence.calls.len();
        read.sequences.push(sequence);
    }
    for problem in &read.unreadable {
        eprintln!("quiver: skipped {problem}");
    }
    println!(
        "# telemetry: {} event(s) from {} file(s); transcripts: {} tool call(s) from {} file(s)",
        scan.events,
        files.len(),
        read.tool_calls,
        read.files
    );
    if read.skipped_lines > 0 {
        println!("# skipped {} transcript line(s) that were not JSON objects", read.skipped_lines);
    }

    let mut config = tune::ConfigFile::open(target)?;
    // Seeds: tools the agent called that this host serves and the file has no section for.
    let mut seeds = Vec::new();
    for (tool, calls) in &scan.calls_per_tool {
        let Some(registered) = host.tool(tool) else { continue };
        let name = registered.name.to_string();
        if !config.has_tool_section(&name) && !seeds.iter().any(|(n, _)| *n == name) {
            seeds.push((name, *calls));
        }
    }
    let mut sequences = scan.sequences;
    sequences.extend(read.sequences);
    let mined = tune::mine_links(&sequences, min_support);
    let proposals = tune::propose_links(host, &config, mined);
    let new_links =
        proposals.iter().filter(|p| matches!(p.status, tune::LinkStatus::New(_))).count();

    if !apply {
        for (tool, calls) in &seeds {
            println!("# seed: [tools.{}]  ({calls} call(s) in telemetry)", tune::quoted(tool));
        }
        println!(
            "# {} link(s) with support ≥ {min_support}, {new_links} new; --apply writes the new \
             ones",
            proposals.len()
        );
        if !proposals.is_empty() {
            println!();
            print!("{}", tune::proposals_toml(&proposals));
        }
        return Ok(ExitCode::SUCCESS);
    }
    for (tool, calls) in &seeds {
        let note = format!(
            "seen {calls} call(s) in telemetry; `quiver tools show {tool}` prints its effective \
             model, keys set here override it"
        );
        config.seed_tool(tool, &note)?;
    }
    let written = tune::apply_links(host, &mut config, &proposals)?;
    report_config(&config)?;
    for (tool, _) in &seeds {
        println!("  seeded [tools.{}]", tune::quoted(tool));
    }
    for proposal in &proposals {
        if let tune::LinkStatus::New(link) = &proposal.status {
            let projection = match (&link.projection, &link.projection_arg) {
                (Some(path), Some(arg)) => format!(", {path} → {arg}"),
                _ => String::new(),
            };
            println!(
                "  linked {} → {} (p {:.2}{projection})",
                proposal.mined.from, proposal.mined.to, link.probability
            );
        }
    }
    if seeds.is_empty() && written == 0 {
        println!("  nothing to change");
    }
    Ok(ExitCode::SUCCESS)
}

fn doctor(host: &Host) -> anyhow::Result<ExitCode> {
    let config = host.config();
    let config_problems = host.config_problems();
    match &config.path {
        Some(path) if config_problems.is_empty() => println!("config: {} (ok)", path.display()),
        Some(path) => {
            println!("config: {} — {} problem(s):", path.display(), config_problems.len());
            for problem in config_problems {
                println!("  {problem}");
            }
        }
        None => {
            println!("config: none found; using defaults (create ./quiver.toml or set --config)")
        }
    }
    let warnings = host.config_warnings();
    for warning in &warnings {
        println!("config warning: {warning}");
    }
    let (dir, source) = host.plugins_dir();
    let exists = dir.is_dir();
    println!(
        "plugins directory: {} ({source}){}",
        dir.display(),
        if exists { "" } else { " — missing" }
    );
    let mut problems = usize::from(!exists) + config_problems.len();
    for report in host.plugin_reports() {
        let file = report.path.file_name().map(|f| f.to_string_lossy()).unwrap_or_default();
        match &report.status {
            PluginStatus::Loaded { provider, tools, .. } => {
                let section = config.provider(provider);
                let env = section.token_env(provider);
                let in_config = section.settings.contains_key("token");
                let short = quiver_core::secrets::SHORT_SECRET_CHARS;
                let token = match std::env::var(&env) {
                    Ok(v) if !v.trim().is_empty() && v.trim().chars().count() < short => {
                        problems += 1;
                        format!(
                            "token: ${env} is set but looks too short to be a real token \
                             ({} characters; API tokens are far longer) — check its value",
                            v.trim().chars().count()
                        )
                    }
                    Ok(v) if !v.trim().is_empty() => format!("token: ${env} is set"),
                    _ if in_config => {
                        "token: set in the config file (keep that file private)".into()
                    }
                    _ => format!(
                        "token: ${env} is not set (set it, or calls run unauthenticated where \
                         the service allows it)"
                    ),
                };
                let base_url = section
                    .settings
                    .get("base_url")
                    .and_then(|v| v.as_str())
                    .map(|u| format!("; base_url {u}"))
                    .unwrap_or_default();
                println!("provider {provider}: ready, {tools} tools{base_url}; {token}");
            }
            PluginStatus::Disabled { provider, .. } => {
                println!("provider {provider}: disabled in the config")
            }
            PluginStatus::NotConfigured { provider, hint } => {
                println!("provider {provider}: not configured — {hint}")
            }
            // Counted with the config's problems, above.
            PluginStatus::Failed { reason } if reason.starts_with("config problem:") => {
                println!("plugin {file}: not serving — its section has a config problem (above)");
            }
            PluginStatus::Failed { reason } => {
                problems += 1;
                println!("plugin {file}: failed — {}", one_line(reason));
            }
        }
    }
    let failed_upstreams = print_upstreams(host);
    problems += failed_upstreams;
    match host.state_error() {
        Some(error) => {
            problems += 1;
            println!("state: {error}");
        }
        None => {
            let status = crate::runtime()?.block_on(host.state().probe());
            if matches!(status, quiver_runtime::state::StateStatus::Unreachable { .. }) {
                problems += 1;
            }
            println!("state: {status}");
        }
    }
    problems += print_operations(host);
    let sources: usize = host.static_tools().len();
    if !host.config().config.sources.is_empty() {
        println!("tool sources: {sources} tools described (enrichments and selection see them)");
    }
    for e in host.source_errors() {
        problems += 1;
        println!("{e}");
    }
    match quiver_runtime::enrich::EnrichmentSet::new(&host.config().config.enrichments) {
        Ok(set) => {
            let names: Vec<&str> = set.schedule().order().iter().map(|k| k.name()).collect();
            println!("enrichments: {}", names.join(" -> "));
        }
        Err(e) => {
            problems += 1;
            println!("enrichments: {e}");
        }
    }
    let store_dir = quiver_runtime::enrich::store::ArtifactStore::default_dir();
    match quiver_runtime::enrich::store::ArtifactStore::open(&store_dir) {
        Ok(_) => println!("enrichment store: {} (ok)", store_dir.display()),
        // Not a problem: quiver works without the cache, only slower to start.
        Err(e) => println!("enrichment store: {e}"),
    }
    // Warnings do not fail doctor (a plugin may be left out on purpose) but are never silent.
    let warned = if warnings.is_empty() {
        String::new()
    } else {
        format!(", {} warning(s)", warnings.len())
    };
    println!(
        "{}",
        match (problems, warnings.is_empty()) {
            (0, true) => "all good".to_owned(),
            (0, false) => format!("no problems{warned}"),
            _ => format!("{problems} problem(s){warned}"),
        }
    );
    Ok(if problems == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
