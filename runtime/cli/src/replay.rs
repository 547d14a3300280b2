//! `quiver replay`: recorded agent sessions replayed through the real pipeline, and what the
//! economy did with them.
//!
//! Each session's calls are made through a [`Session`] of a host whose provider talks to a
//! [`Cassette`] holding the session's recorded answers — twice, with pre-fetching off and on —
//! and the two runs are compared: pre-fetch hit rate, decline recall loss and cost overrun (the
//! telemetry's own rates, as `tune analyze` computes them), API requests added, tokens delivered
//! against the recorded answers, argument survival, and the agent's wall time under a
//! think-time model ([`quiver_core::replay`]). The calls are replayed in order and each waits
//! for the pre-fetches it started, so the figures do not depend on how fast this machine is; the
//! wall time is the model's, not the clock's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use quiver_core::replay::{
    task_is_held_out, wall_time_ms, ArgumentSurvival, Served, SurvivalCall, TimeModel, TimedCall,
};
use quiver_core::response_projection::estimate_text_tokens;
use quiver_core::session_cache::CallKey;
use quiver_core::telemetry::{annotate_citations, CallEvent, Effectiveness, EventKind};
use quiver_core::ToolResult;
use quiver_runtime::config::StateBackendKind;
use quiver_runtime::recording::{read_recording, recording_files, RecordedAnswers};
use quiver_runtime::{telemetry, Host, LoadedConfig, Session};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::cassette::{blocks_text, is_answer, rest_answer, Cassette, RecordedResults};
use crate::cassette_upstream::{CassetteUpstreams, UpstreamCall};
use crate::tune::{self, CallSequence};

/// Which sessions a replay takes, by task (a session's task is the name of the folder its file
/// is in): a task is always wholly in one part, never split across runs of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Part {
    /// Every session.
    All,
    /// The tasks priors are calibrated on.
    Calibration,
    /// The other tasks, for reporting.
    HeldOut,
}

/// What to replay and how to time it.
pub(crate) struct ReplayOptions {
    pub(crate) traces: Vec<PathBuf>,
    /// Claude Code transcripts (JSONL), read at any depth.
    pub(crate) claude_dir: Option<PathBuf>,
    /// quiver's own session recordings: files, or folders read at any depth.
    pub(crate) recordings: Vec<PathBuf>,
    /// Also measure how often the `neighbors` enrichment names the tool called next.
    pub(crate) neighbors: bool,
    /// Keep the telemetry of the run with pre-fetching on here, for `quiver tune analyze`.
    pub(crate) telemetry_out: Option<PathBuf>,
    pub(crate) provider: String,
    pub(crate) part: Part,
    pub(crate) think_ms: u64,
    pub(crate) service_ms: u64,
    pub(crate) within: usize,
}

/// A session's task: the name of the folder its file is in.
pub(crate) fn task_of(origin: &str) -> String {
    Path::new(origin)
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| origin.to_owned())
}

/// Whether a session of `task` is in `part`.
pub(crate) fn in_part(task: &str, part: Part) -> bool {
    match part {
        Part::All => true,
        Part::Calibration => !task_is_held_out(task),
        Part::HeldOut => task_is_held_out(task),
    }
}

/// github-mcp-server's arguments as quiver's GitHub tools take them: `issue_number` and
/// `pullNumber` are `number`, `perPage` is `per_page`, `query` is `q` (search_issues scoped to
/// the `owner`/`repo` it was given, as that server does), `workflow_id` is `workflow`, a file's
/// `sha` is its `ref`, upper-case states are lower-case.
fn github_arguments(tool: &str, mut args: Map<String, Value>) -> Map<String, Value> {
    for (theirs, ours) in [
        ("issue_number", "number"),
        ("pullNumber", "number"),
        ("pull_number", "number"),
        ("perPage", "per_page"),
        ("workflow_id", "workflow"),
        ("query", "q"),
        ("commitID", "commit_id"),
        ("from_branch", "from"),
    ] {
        if let Some(value) = args.remove(theirs) {
            args.entry(ours.to_owned()).or_insert(value);
        }
    }
    if let Some(state) = args.get("state").and_then(Value::as_str) {
        let lower = state.to_ascii_lowercase();
        args.insert("state".into(), Value::String(lower));
    }
    if let Some(workflow) = args.get("workflow").filter(|w| w.is_number()) {
        let text = workflow.to_string();
        args.insert("workflow".into(), Value::String(text));
    }
    match tool {
        "get_file_contents" => {
            if let Some(sha) = args.remove("sha") {
                args.entry("ref".to_owned()).or_insert(sha);
            }
            let path = args.get("path").and_then(Value::as_str).map(|p| p.trim_matches('/'));
            match path {
                Some("") => {
                    args.remove("path");
                }
                Some(path) => {
                    let path = path.to_owned();
                    args.insert("path".into(), Value::String(path));
                }
                None => {}
            }
        }
        "search_issues" => {
            let scope = match (args.remove("owner"), args.remove("repo")) {
                (Some(Value::String(o)), Some(Value::String(r))) => Some(format!("repo:{o}/{r}")),
                _ => None,
            };
            if let Some(Value::String(q)) = args.get_mut("q") {
                if let Some(scope) = scope.filter(|_| !q.contains("repo:")) {
                    q.push(' ');
                    q.push_str(&scope);
                }
                if !q.contains("is:") {
                    q.push_str(" is:issue");
                }
            }
        }
        _ => {}
    }
    args
}

/// quiver's own session recordings under `paths` as call sequences (origin: the file), each
/// with its recorded results by call; and the files that could not be read, each with why.
pub(crate) fn read_recordings(
    paths: &[PathBuf],
) -> (Vec<(CallSequence, Vec<ToolResult>)>, Vec<String>) {
    let mut sessions = Vec::new();
    let mut unreadable = Vec::new();
    for path in paths {
        let files = recording_files(path);
        if files.is_empty() {
            unreadable.push(format!("{}: no recordings (.jsonl files) there", path.display()));
        }
        for file in files {
            let recorded = match read_recording(&file) {
                Ok(recorded) => recorded,
                Err(why) => {
                    unreadable.push(why);
                    continue;
                }
            };
            let at = |ms: u64| i64::try_from(ms).ok();
            let calls = recorded
                .iter()
                .map(|r| tune::ObservedCall {
                    tool: r.tool.clone(),
                    input: Some(r.arguments.clone()),
                    output: r.result.structured.clone().filter(|_| !r.result.is_error),
                    blocks: serde_json::to_value(&r.result.content)
                        .ok()
                        .and_then(|v| v.as_array().cloned()),
                    called_at_ms: at(r.at_ms),
                    answered_at_ms: at(r.answered_ms),
                    ..tune::ObservedCall::default()
                })
                .collect();
            let origin = file.display().to_string();
            let sequence = CallSequence { origin, calls, prompt: String::new() };
            sessions.push((sequence, recorded.into_iter().map(|r| r.result).collect()));
        }
    }
    (sessions, unreadable)
}

/// The token the replay's provider sends to the cassette.
const REPLAY_TOKEN: &str = "quiver-replay-7f3a9c51e0b2";

/// Why a call of another server's tool was not replayed (followed by the server's name).
const OTHER_SERVER: &str = "another server: ";

/// The server a trace's tool belongs to when it is not `provider`: the prefix harnesses put
/// before a tool of several servers (`local-python-execute`, `mcp__filesystem__read_file`).
fn other_server<'a>(tool: &'a str, provider: &str) -> Option<&'a str> {
    // Claude Code's own tools (`Read`, `Bash`, `Grep`) are capitalised; MCP tools never are.
    if tool.starts_with(char::is_uppercase) {
        return Some("the agent's own tools");
    }
    let server = match tune::mcp_server_and_tool(tool) {
        Some((server, _)) => server,
        None if tool.starts_with("mcp__") => return None,
        None => tool.split_once('-')?.0,
    };
    (server != provider).then_some(server)
}

/// The server and tool name of a recorded call of another MCP server's tool, as the replay's
/// cassette upstream serves it (`mcp__linear__get_issue` → `linear`, `get_issue`;
/// `notion-search` → `notion`, `search`; in quiver's own recordings `linear.get_issue`); `None`
/// for the agent's own tools and for `provider`'s. The server's name must be one an
/// `[[upstreams]]` entry may have.
fn upstream_tool(tool: &str, provider: &str, own: bool) -> Option<(String, String)> {
    let (server, local) = if own {
        tool.split_once('.')?
    } else {
        other_server(tool, provider)?;
        match tune::mcp_server_and_tool(tool) {
            Some(split) => split,
            None => tool.split_once('-')?,
        }
    };
    let valid = |name: &str| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    (server != provider && valid(server) && !local.is_empty())
        .then(|| (server.to_owned(), local.to_owned()))
}

/// A recorded result's blocks as MCP content: text and embedded resources as they are, anything
/// else as its JSON text.
fn mcp_content(blocks: &[Value]) -> Vec<Value> {
    blocks
        .iter()
        .map(|b| match (b.get("type").and_then(Value::as_str), b.get("text")) {
            (Some("text"), Some(Value::String(_))) | (Some("resource"), _) => b.clone(),
            (_, Some(Value::String(text))) => serde_json::json!({"type": "text", "text": text}),
            _ => serde_json::json!({"type": "text", "text": b.to_string()}),
        })
        .collect()
}

/// A recorded call as quiver's tool takes it: the tool's qualified name and the arguments its
/// schema declares, or why it cannot be replayed.
fn replayable(
    host: &Host,
    provider: &str,
    tool: &str,
    input: Option<&Value>,
    own: bool,
) -> Result<(String, Value), String> {
    // Another server's tool, served by the replay's cassette upstream of that name.
    let upstream =
        upstream_tool(tool, provider, own).map(|(server, local)| format!("{server}.{local}"));
    let registered = host.tool(tool).or_else(|| upstream.and_then(|name| host.tool(&name)));
    if let Some(registered) = registered.as_ref().filter(|r| r.plugin().is_none()) {
        let args = input.and_then(Value::as_object).cloned().unwrap_or_default();
        return Ok((registered.name.to_string(), Value::Object(args)));
    }
    let registered = registered.ok_or_else(|| match (own, other_server(tool, provider)) {
        // quiver recorded it under its own qualified name: a provider not loaded here, or an
        // upstream (a replay connects to none).
        (true, _) => format!("{OTHER_SERVER}{}", tool.split_once('.').map_or(tool, |(p, _)| p)),
        (false, Some(server)) => format!("{OTHER_SERVER}{server}"),
        (false, None) => format!("{provider} has no such tool"),
    })?;
    if !own && registered.name.provider != provider {
        return Err(format!("a tool of {}, not of {provider}", registered.name.provider));
    }
    let args = input.and_then(Value::as_object).cloned().unwrap_or_default();
    let args = if provider == "github" && !own {
        github_arguments(&registered.name.tool, args)
    } else {
        args
    };
    let schema = &registered.spec.input_schema;
    let declared = schema.get("properties").and_then(Value::as_object);
    let args: Map<String, Value> =
        args.into_iter().filter(|(k, _)| declared.is_none_or(|d| d.contains_key(k))).collect();
    for required in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
        let Some(name) = required.as_str() else { continue };
        if !args.contains_key(name) {
            return Err(format!("no `{name}` in the recorded arguments"));
        }
    }
    Ok((registered.name.to_string(), Value::Object(args)))
}

/// One recorded call and what became of it.
struct Replayed {
    /// The recorded tool name as quiver names it (qualified when quiver has it).
    tool: String,
    /// quiver's tool and arguments, when it could be replayed.
    call: Option<(String, Value)>,
    /// Why not, otherwise.
    skipped: Option<String>,
    read: bool,
    recorded_text: Option<String>,
    /// The recording holds the service's answer, not an error.
    recorded_answer: bool,
    /// The agent's think time before this call, and the call's own latency, where the
    /// recording's timestamps say.
    think_before_ms: Option<u64>,
    took_ms: Option<u64>,
    off: Option<Outcome>,
    on: Option<Outcome>,
}

/// One replayed call in one mode.
struct Outcome {
    delivered: String,
    is_error: bool,
    cache_hit: bool,
    prefetch_hit: bool,
    prefetches_started: usize,
    requests: u64,
}

/// Per tool.
#[derive(Debug, Default, Clone, Serialize)]
pub(crate) struct ToolFigures {
    pub(crate) calls: u64,
    pub(crate) replayed: u64,
    pub(crate) failed: u64,
    pub(crate) recorded_tokens: u64,
    pub(crate) delivered_tokens: u64,
    pub(crate) values_used: u64,
    pub(crate) values_survived: u64,
    pub(crate) prefetches: u64,
    pub(crate) prefetches_used: u64,
    pub(crate) declines: u64,
    pub(crate) declines_called: u64,
    /// Calls whose size the value model predicted, and those that came out ≥ 130% of it.
    pub(crate) predictions: u64,
    pub(crate) overruns: u64,
}

/// What a replay measured.
#[derive(Debug, Default, Serialize)]
pub(crate) struct ReplayReport {
    pub(crate) part: Option<Part>,
    pub(crate) sessions: usize,
    pub(crate) tasks: usize,
    pub(crate) calls: u64,
    pub(crate) replayed: u64,
    pub(crate) reads: u64,
    /// Replayed calls that failed although the recording had an answer (the cassette could not
    /// turn it into what the plugin reads).
    pub(crate) failed: u64,
    /// The first failure of each tool, as quiver answered it.
    pub(crate) failures: BTreeMap<String, String>,
    pub(crate) not_replayed: BTreeMap<String, u64>,
    /// Calls of other servers' tools in the sessions, by server (timed, never replayed).
    pub(crate) other_servers: BTreeMap<String, u64>,
    pub(crate) recorded_tokens: u64,
    pub(crate) delivered_tokens: u64,
    pub(crate) survival: ArgumentSurvival,
    pub(crate) effectiveness: Effectiveness,
    pub(crate) requests_off: u64,
    pub(crate) requests_on: u64,
    /// Requests nothing was recorded for: pre-fetches of calls the agent never made.
    pub(crate) requests_unrecorded: u64,
    pub(crate) think_ms: u64,
    /// Calls whose think time came from the recording's timestamps (the rest use `think_ms`).
    pub(crate) think_from_recording: u64,
    pub(crate) service_ms: u64,
    pub(crate) wall_ms_off: u64,
    pub(crate) wall_ms_on: u64,
    pub(crate) per_tool: BTreeMap<String, ToolFigures>,
    /// The same, summed by provider or upstream (the part of a qualified name before the dot).
    pub(crate) per_server: BTreeMap<String, ToolFigures>,
    /// With `--neighbors`: how often each source of candidate follow-ups named the tool the
    /// agent called next.
    pub(crate) next_tool: Option<NextToolFigures>,
}

/// Of the transitions between two replayed calls (a call, then the agent's next), how many the
/// `neighbors` enrichment's top successors and the follow-up links named.
#[derive(Debug, Default, Serialize)]
pub(crate) struct NextToolFigures {
    pub(crate) transitions: u64,
    pub(crate) named_by_neighbors: u64,
    pub(crate) named_by_links: u64,
    /// The neighbours kept per tool.
    pub(crate) k: usize,
}

fn ratio(numerator: u64, denominator: u64) -> Option<f64> {
    (denominator > 0).then(|| numerator as f64 / denominator as f64)
}

impl ReplayReport {
    pub(crate) fn delivered_share(&self) -> Option<f64> {
        ratio(self.delivered_tokens, self.recorded_tokens)
    }
    pub(crate) fn hit_rate(&self) -> Option<f64> {
        ratio(self.effectiveness.prefetches_cited, self.effectiveness.prefetches)
    }
    pub(crate) fn recall_loss(&self) -> Option<f64> {
        ratio(self.effectiveness.declines_invoked, self.effectiveness.declines)
    }
    pub(crate) fn cost_overrun(&self) -> Option<f64> {
        ratio(self.effectiveness.overruns, self.effectiveness.predictions)
    }
    pub(crate) fn requests_added(&self) -> Option<f64> {
        ratio(self.requests_on.saturating_sub(self.requests_off), self.requests_off)
    }
    pub(crate) fn wall_time_ratio(&self) -> Option<f64> {
        ratio(self.wall_ms_on, self.wall_ms_off)
    }
}

/// The config a replay runs on: the user's value models and settings, with `provider` pointed
/// at the cassette (and a token that is not the user's), state in memory, telemetry in `dir`,
/// the cassette `upstreams` instead of the user's, and pre-fetching `on` or off — answers wait for their pre-fetches, so what
/// landed does not depend on this machine's speed.
fn replay_config(
    base: &LoadedConfig,
    provider: &str,
    cassette: &Cassette,
    upstreams: &[quiver_runtime::upstream::UpstreamConfig],
    dir: &Path,
    on: bool,
) -> LoadedConfig {
    let mut loaded = base.clone();
    let config = &mut loaded.config;
    let section = config.providers.entry(provider.to_owned()).or_default();
    section.enabled = true;
    section.token_env = Some("QUIVER_REPLAY_TOKEN".to_owned());
    section.settings.insert("base_url".into(), toml::Value::String(cassette.url()));
    // A token no recorded answer contains: it is masked wherever it appears, like every token.
    section.settings.insert("token".into(), toml::Value::String(REPLAY_TOKEN.into()));
    section.settings.remove("ca_file");
    config.state.backend = StateBackendKind::Memory;
    config.telemetry.enabled = true;
    config.telemetry.dir = Some(dir.to_path_buf());
    // A replay of recordings is not a session worth recording.
    config.telemetry.record_sessions = false;
    // The cassette upstreams, in place of the servers the sessions called.
    config.upstreams = upstreams.to_vec();
    config.enrichment.enabled = on;
    config.enrichment.prefetch_timeout_ms = 600_000;
    loaded
}

/// Replays the sessions of `options.traces` with the user's `base` config.
pub(crate) fn replay(
    base: &LoadedConfig,
    plugins: Option<&Path>,
    options: &ReplayOptions,
) -> anyhow::Result<ReplayReport> {
    let runtime = crate::runtime()?;
    let cassette = runtime.block_on(Cassette::start()).context("starting the cassette")?;
    // Removed when the replay ends, however it ends.
    let scratch_dir = tempfile::Builder::new()
        .prefix("quiver-replay-")
        .tempdir()
        .context("creating the replay's scratch directory")?;
    let scratch = scratch_dir.path().to_path_buf();
    let (off_dir, on_dir) = (scratch.join("off"), scratch.join("on"));
    // Reads the sessions with the plugins' tools; the hosts that replay them also have the
    // cassette upstreams, made from what the sessions called.
    let probe = Host::with_config(
        replay_config(base, &options.provider, &cassette, &[], &off_dir, false),
        plugins,
    );
    let traces_given = !options.traces.is_empty() || options.claude_dir.is_some();
    if traces_given && probe.tools().iter().all(|t| t.name.provider != options.provider) {
        bail!(
            "no tools of provider `{}` loaded: is its plugin in the plugins folder (`quiver \
             plugins` says)?",
            options.provider
        );
    }
    let name = |raw: &str| tune::trace_tool_name(&probe, Some(&options.provider), raw);
    let mut scan = tune::read_traces(&options.traces, &name);
    if let Some(dir) = &options.claude_dir {
        scan.merge(tune::read_transcripts(&tune::transcript_files(dir), &name));
    }
    let (recorded, unreadable) = read_recordings(&options.recordings);
    scan.unreadable.extend(unreadable);
    for problem in &scan.unreadable {
        eprintln!("quiver: skipped {problem}");
    }
    let mut recorded_results = BTreeMap::new();
    for (sequence, results) in recorded {
        recorded_results.insert(sequence.origin.clone(), results);
        scan.sequences.push(sequence);
    }
    // A recording's task is its own file (quiver records sessions, not tasks); a trace's is
    // its folder.
    let task = |s: &CallSequence| {
        if recorded_results.contains_key(&s.origin) {
            s.origin.clone()
        } else {
            task_of(&s.origin)
        }
    };
    let sessions: Vec<&CallSequence> = scan
        .sequences
        .iter()
        .filter(|s| in_part(&task(s), options.part))
        .filter(|s| !s.calls.is_empty())
        .collect();
    if sessions.is_empty() {
        bail!(
            "no session with tool calls in the traces given{}",
            if options.part == Part::All { "" } else { " for this --part" }
        );
    }
    let mut report = ReplayReport {
        part: Some(options.part),
        sessions: sessions.len(),
        tasks: sessions.iter().map(|s| task(s)).collect::<std::collections::BTreeSet<_>>().len(),
        think_ms: options.think_ms,
        service_ms: options.service_ms,
        ..ReplayReport::default()
    };
    // Every call of another server's tool, by session and step, for the cassette upstreams.
    let upstream_calls: Vec<Vec<(usize, UpstreamCall)>> = sessions
        .iter()
        .map(|sequence| {
            let own = recorded_results.get(&sequence.origin);
            sequence
                .calls
                .iter()
                .enumerate()
                .filter(|(_, call)| probe.tool(&call.tool).is_none())
                .filter_map(|(step, call)| {
                    let (server, tool) = upstream_tool(&call.tool, &options.provider, own.is_some())?;
                    let arguments = call.input.as_ref().and_then(Value::as_object).cloned().unwrap_or_default();
                    let result = match own.and_then(|results| results.get(step)) {
                        Some(recorded) => serde_json::json!({
                            "content": mcp_content(&serde_json::to_value(&recorded.content).ok()?.as_array()?.clone()),
                            "structuredContent": recorded.structured,
                            "isError": recorded.is_error,
                        }),
                        None => serde_json::json!({"content": mcp_content(call.blocks.as_deref().unwrap_or_default())}),
                    };
                    Some((step, UpstreamCall { server, tool, arguments, result }))
                })
                .collect()
        })
        .collect();
    drop(probe);
    let all_upstream_calls: Vec<&UpstreamCall> =
        upstream_calls.iter().flatten().map(|(_, call)| call).collect();
    let upstreams = runtime
        .block_on(CassetteUpstreams::start(&all_upstream_calls))
        .context("starting the cassette upstreams")?;
    let upstream_configs = upstreams.upstreams();
    let off = Arc::new(Host::with_config(
        replay_config(base, &options.provider, &cassette, &upstream_configs, &off_dir, false),
        plugins,
    ));
    let on = Arc::new(Host::with_config(
        replay_config(base, &options.provider, &cassette, &upstream_configs, &on_dir, true),
        plugins,
    ));
    runtime.block_on(async { tokio::join!(off.start_upstreams(), on.start_upstreams()) });
    for report in off.upstream_reports() {
        if let quiver_runtime::upstream::UpstreamState::Failed { reason } = &report.state {
            eprintln!("quiver: the replay's stand-in for {}: {reason}", report.name);
        }
    }
    let time = TimeModel {
        think_ms: options.think_ms,
        service_ms: options.service_ms,
        prefetch_wait_ms: base.config.enrichment.prefetch_timeout_ms,
    };
    let results = RecordedResults::default();
    let mut replayed_sessions = Vec::new();
    for (index, sequence) in sessions.iter().enumerate() {
        let session_id = format!("replay-{index}");
        let own = recorded_results.get(&sequence.origin);
        let mut calls: Vec<Replayed> = sequence
            .calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                let gap = |from: Option<i64>, to: Option<i64>| {
                    from.zip(to).and_then(|(a, b)| u64::try_from(b - a).ok())
                };
                let previous = i.checked_sub(1).map(|p| &sequence.calls[p]);
                let think_before_ms =
                    gap(previous.and_then(|p| p.answered_at_ms), call.called_at_ms);
                let took_ms = gap(call.called_at_ms, call.answered_at_ms);
                let recorded_text = call.blocks.as_deref().map(blocks_text);
                let input = call.input.as_ref();
                let (replay, skipped) =
                    match replayable(&off, &options.provider, &call.tool, input, own.is_some()) {
                        Ok(call) => (Some(call), None),
                        Err(why) => (None, Some(why)),
                    };
                let read = replay
                    .as_ref()
                    .and_then(|(tool, _)| off.tool(tool))
                    .is_some_and(|t| off.value_model(&t).model.side_effect_class.is_speculatable());
                Replayed {
                    // quiver's name once replayed (another server's tool through its stand-in).
                    tool: replay.as_ref().map_or_else(|| call.tool.clone(), |(t, _)| t.clone()),
                    call: replay,
                    skipped,
                    read,
                    recorded_text,
                    recorded_answer: match own {
                        Some(results) => results.get(i).is_some_and(|r| !r.is_error),
                        None => call.blocks.as_deref().is_some_and(is_answer),
                    },
                    think_before_ms,
                    took_ms,
                    off: None,
                    on: None,
                }
            })
            .collect();
        cassette.clear();
        results.tape().clear();
        upstreams.load(upstream_calls[index].iter().map(|(step, call)| (*step, call)));
        match own {
            // quiver's own results, answered where the provider would be called.
            Some(recorded) => {
                for (step, (call, result)) in calls.iter().zip(recorded).enumerate() {
                    let Some((tool, args)) = &call.call else { continue };
                    let schema = off.tool(tool).map(|t| t.spec.input_schema.clone());
                    let key = CallKey::new(tool, args, schema.as_ref());
                    results.tape().record(step, key, result.clone());
                }
            }
            // Learn: each recorded answer under the requests the plugin makes for its call.
            None => {
                for (step, (call, observed)) in calls.iter().zip(&sequence.calls).enumerate() {
                    let (Some((tool, args)), Some(blocks)) = (&call.call, &observed.blocks) else {
                        continue;
                    };
                    let local = tool.split_once('.').map_or(tool.as_str(), |(_, t)| t);
                    cassette.learn(rest_answer(local, args, blocks));
                    runtime.block_on(off.call(tool, args.clone(), None, "replay-learn", None));
                    cassette.learned(step);
                }
            }
        }
        let answers: Option<Arc<dyn RecordedAnswers>> =
            own.map(|_| Arc::new(results.clone()) as Arc<dyn RecordedAnswers>);
        // Each call reaches one of them: the recorded results, a cassette upstream, the cassette.
        let served = || results.tape().served().0 + upstreams.served().0 + cassette.served().0;
        for (host, on_mode) in [(&off, false), (&on, true)] {
            host.answer_from(answers.clone());
            let session = Session::new(Arc::clone(host), session_id.clone());
            for (step, call) in calls.iter_mut().enumerate() {
                let Some((tool, args)) = &call.call else { continue };
                cassette.at_step(step);
                results.tape().at_step(step);
                upstreams.at_step(step);
                let before = served();
                let (result, effects) = runtime.block_on(session.call(tool, args.clone(), &[]));
                let after = served();
                let outcome = Outcome {
                    delivered: result.text_content(),
                    is_error: result.is_error,
                    cache_hit: effects.cache_hit,
                    prefetch_hit: effects.prefetch_hit,
                    prefetches_started: effects.prefetches_started,
                    requests: after - before,
                };
                if on_mode {
                    call.on = Some(outcome);
                } else {
                    call.off = Some(outcome);
                }
            }
            runtime.block_on(session.shutdown());
            host.answer_from(None);
        }
        replayed_sessions.push((session_id, sequence.prompt.clone(), calls));
    }
    let (served, unrecorded) = cassette.served();
    let (served_recorded, unrecorded_recorded) = results.tape().served();
    let (served_upstream, unrecorded_upstream) = upstreams.served();
    report.requests_unrecorded = unrecorded + unrecorded_recorded + unrecorded_upstream;
    drop((off, on));

    let (mut events, problems) = telemetry::read_events(&telemetry::event_files(&on_dir));
    for problem in problems {
        eprintln!("quiver: telemetry of the replay: {problem}");
    }
    annotate_citations(&mut events, options.within);
    let mut by_session: BTreeMap<&str, Vec<&CallEvent>> = BTreeMap::new();
    for event in &events {
        by_session.entry(event.session.as_str()).or_default().push(event);
        report.effectiveness.accumulate(event);
        let mut own = Effectiveness::default();
        own.accumulate(event);
        let figures = report.per_tool.entry(event.tool.clone()).or_default();
        figures.predictions += own.predictions;
        figures.overruns += own.overruns;
        match event.kind {
            EventKind::Prefetch => {
                figures.prefetches += 1;
                figures.prefetches_used += u64::from(event.cited_in_next_n_turns == Some(true));
            }
            EventKind::Decline => {
                figures.declines += 1;
                figures.declines_called += u64::from(event.cited_in_next_n_turns == Some(true));
            }
            _ => {}
        }
    }

    for (session_id, prompt, calls) in &replayed_sessions {
        let owners = prefetch_owners(by_session.get(session_id.as_str()).map_or(&[][..], |e| e));
        let mut timed_off = Vec::new();
        let mut timed_on = Vec::new();
        let mut replayed_index = 0usize;
        // Call index in `calls` of each replayed call, for the pre-fetch owners.
        let replayed_at: Vec<usize> =
            calls.iter().enumerate().filter(|(_, c)| c.call.is_some()).map(|(i, _)| i).collect();
        for call in calls {
            report.calls += 1;
            report.think_from_recording += u64::from(call.think_before_ms.is_some());
            let (Some(off), Some(on)) = (&call.off, &call.on) else {
                let why = call.skipped.as_deref().unwrap_or("not replayed");
                match why.strip_prefix(OTHER_SERVER) {
                    Some(server) => {
                        *report.other_servers.entry(server.to_owned()).or_default() += 1
                    }
                    None => {
                        report.per_tool.entry(call.tool.clone()).or_default().calls += 1;
                        *report
                            .not_replayed
                            .entry(format!("{} ({why})", call.tool))
                            .or_default() += 1;
                    }
                }
                let unknown = TimedCall {
                    served: call
                        .took_ms
                        .map_or(Served::Service { requests: 1 }, |ms| Served::Took { ms }),
                    prefetches_started: 0,
                    think_before_ms: call.think_before_ms,
                };
                timed_off.push(unknown);
                timed_on.push(unknown);
                continue;
            };
            let figures = report.per_tool.entry(call.tool.clone()).or_default();
            figures.calls += 1;
            figures.replayed += 1;
            report.replayed += 1;
            if off.is_error && call.recorded_answer {
                figures.failed += 1;
                report.failed += 1;
                report.failures.entry(call.tool.clone()).or_insert_with(|| off.delivered.clone());
            }
            if call.read {
                report.reads += 1;
                if let Some(recorded) = &call.recorded_text {
                    let recorded = estimate_text_tokens(recorded);
                    let delivered = estimate_text_tokens(&off.delivered);
                    figures.recorded_tokens += recorded;
                    figures.delivered_tokens += delivered;
                    report.recorded_tokens += recorded;
                    report.delivered_tokens += delivered;
                }
            }
            timed_off.push(TimedCall {
                served: if off.cache_hit {
                    Served::Cache
                } else {
                    Served::Service { requests: off.requests as u32 }
                },
                prefetches_started: 0,
                think_before_ms: call.think_before_ms,
            });
            let own = on.requests.saturating_sub(on.prefetches_started as u64);
            let served = if on.prefetch_hit {
                owners
                    .get(replayed_index)
                    .copied()
                    .flatten()
                    .and_then(|owner| replayed_at.get(owner).copied())
                    .map_or(Served::Cache, |from| Served::Prefetch { from })
            } else if on.cache_hit {
                Served::Cache
            } else {
                Served::Service { requests: own as u32 }
            };
            timed_on.push(TimedCall {
                served,
                prefetches_started: on.prefetches_started,
                think_before_ms: call.think_before_ms,
            });
            report.requests_off += off.requests;
            report.requests_on += on.requests;
            replayed_index += 1;
        }
        report.wall_ms_off += wall_time_ms(&time, &timed_off);
        report.wall_ms_on += wall_time_ms(&time, &timed_on);
        // A call not replayed names no arguments quiver would have passed.
        static NO_ARGUMENTS: Value = Value::Null;
        let survival_calls: Vec<SurvivalCall<'_>> = calls
            .iter()
            .map(|c| SurvivalCall {
                tool: &c.tool,
                args: c.call.as_ref().map_or(&NO_ARGUMENTS, |(_, args)| args),
                recorded: c.recorded_text.as_deref(),
                delivered: c.off.as_ref().map(|o| o.delivered.as_str()),
            })
            .collect();
        report.survival.add_session(prompt, &survival_calls);
    }
    if options.neighbors {
        report.next_tool = Some(next_tool_figures(base, plugins, &replayed_sessions)?);
    }
    for (tool, (used, survived)) in &report.survival.per_tool {
        let figures = report.per_tool.entry(tool.clone()).or_default();
        (figures.values_used, figures.values_survived) = (*used, *survived);
    }
    for (tool, f) in &report.per_tool {
        let Some((server, _)) = tool.split_once('.') else { continue };
        let sum = report.per_server.entry(server.to_owned()).or_default();
        for (total, part) in [
            (&mut sum.calls, f.calls),
            (&mut sum.replayed, f.replayed),
            (&mut sum.failed, f.failed),
            (&mut sum.recorded_tokens, f.recorded_tokens),
            (&mut sum.delivered_tokens, f.delivered_tokens),
            (&mut sum.values_used, f.values_used),
            (&mut sum.values_survived, f.values_survived),
            (&mut sum.prefetches, f.prefetches),
            (&mut sum.prefetches_used, f.prefetches_used),
            (&mut sum.declines, f.declines),
            (&mut sum.declines_called, f.declines_called),
            (&mut sum.predictions, f.predictions),
            (&mut sum.overruns, f.overruns),
        ] {
            *total += part;
        }
    }
    debug_assert!(
        served + served_recorded + served_upstream >= report.requests_off + report.requests_on
    );
    if let Some(out) = &options.telemetry_out {
        keep_telemetry(&on_dir, out)?;
    }
    drop(scratch_dir);
    Ok(report)
}

/// Runs the `neighbors` enrichment (and what it needs, from the cache where it can) over the
/// catalog of `base`'s host and counts, over every replayed call followed by another, how often
/// the first's neighbours and its follow-up links name the second's tool.
fn next_tool_figures(
    base: &LoadedConfig,
    plugins: Option<&Path>,
    sessions: &[(String, String, Vec<Replayed>)],
) -> anyhow::Result<NextToolFigures> {
    use quiver_runtime::enrich::{run_for_host, EnrichmentSet, RunOptions};
    let host = Host::with_config(base.clone(), plugins);
    let set = EnrichmentSet::new(&host.config().config.enrichments)?;
    let only = quiver_core::enrich::EnrichmentKind::Neighbors;
    if !set.schedule().order().contains(&only) {
        bail!("the config's [[enrichments]] leave out `neighbors`: add type = \"neighbors\"");
    }
    let options = RunOptions { only: Some(only), ..RunOptions::default() };
    let neighbors = run_for_host(&host, &set, &options)?.neighbors.unwrap_or_default();
    let mut figures = NextToolFigures {
        k: neighbors.values().map(Vec::len).max().unwrap_or(0),
        ..NextToolFigures::default()
    };
    for (_, _, calls) in sessions {
        // The calls of the catalog the enrichment ran over (the replay's stand-ins for other
        // servers are not in it, and neither source could name them).
        let tools: Vec<&str> = calls
            .iter()
            .filter_map(|c| c.call.as_ref().map(|(t, _)| t.as_str()))
            .filter(|t| host.tool(t).is_some())
            .collect();
        for pair in tools.windows(2) {
            let (from, next) = (pair[0], pair[1]);
            figures.transitions += 1;
            let named = neighbors.get(from).is_some_and(|n| n.iter().any(|n| n.tool == next));
            figures.named_by_neighbors += u64::from(named);
            let linked = host.follow_up_candidates(&[from.to_owned()]);
            figures.named_by_links += u64::from(linked.iter().any(|c| c.link.tool == next));
        }
    }
    Ok(figures)
}

/// For each Call event of a session (in order), the index among them of the call whose answer
/// started the pre-fetch that served it, when one did: a session's Prefetch events are written
/// before the Call event of the call that started them.
fn prefetch_owners(events: &[&CallEvent]) -> Vec<Option<usize>> {
    let mut started: Vec<(&str, &str, usize)> = Vec::new();
    let mut owners = Vec::new();
    for event in events {
        match event.kind {
            EventKind::Prefetch => {
                started.push((event.tool.as_str(), event.args_hash.as_str(), owners.len()))
            }
            EventKind::Call | EventKind::FailFast => {
                let owner = started
                    .iter()
                    .rev()
                    .find(|(tool, hash, _)| *tool == event.tool && *hash == event.args_hash)
                    .map(|(_, _, owner)| *owner);
                owners.push(owner);
            }
            _ => {}
        }
    }
    owners
}

/// Copies the event files of `from` into `to` (created), each under its own name.
fn keep_telemetry(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for file in telemetry::event_files(from) {
        let name = file.file_name().map(PathBuf::from).unwrap_or_else(|| "events.jsonl".into());
        std::fs::copy(&file, to.join(&name))
            .with_context(|| format!("copying the replay's telemetry to {}", to.display()))?;
    }
    Ok(())
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

/// The report as a person reads it: a row per tool, then the totals against the goals.
pub(crate) fn print(report: &ReplayReport) {
    println!(
        "{:<36} {:>5} {:>5} {:>5} {:>9} {:>9} {:>7} {:>9} {:>5} {:>5} {:>8} {:>6}",
        "tool",
        "calls",
        "repl",
        "fail",
        "rec.tok",
        "deliv.tok",
        "share",
        "survived",
        "pref",
        "used",
        "declined",
        "called"
    );
    let row = |label: &str, f: &ToolFigures| {
        println!(
            "{label:<36} {:>5} {:>5} {:>5} {:>9} {:>9} {:>7} {:>9} {:>5} {:>5} {:>8} {:>6}",
            f.calls,
            f.replayed,
            f.failed,
            f.recorded_tokens,
            f.delivered_tokens,
            percent(ratio(f.delivered_tokens, f.recorded_tokens)),
            format!("{}/{}", f.values_survived, f.values_used),
            f.prefetches,
            f.prefetches_used,
            f.declines,
            f.declines_called
        );
    };
    for (tool, f) in &report.per_tool {
        if f.calls == 0 && f.prefetches == 0 && f.declines == 0 {
            continue;
        }
        row(tool, f);
    }
    if report.per_server.len() > 1 {
        println!();
        for (server, f) in &report.per_server {
            row(&format!("{server} (all its tools)"), f);
        }
    }
    let e = &report.effectiveness;
    println!();
    println!(
        "# {} session(s) of {} task(s) ({}), {} calls, {} replayed ({} reads), {} failed in replay",
        report.sessions,
        report.tasks,
        match report.part {
            Some(Part::Calibration) => "calibration part",
            Some(Part::HeldOut) => "held-out part",
            _ => "all",
        },
        report.calls,
        report.replayed,
        report.reads,
        report.failed
    );
    for (tool, failure) in &report.failures {
        let failure: String = failure.chars().take(300).collect();
        println!("# {tool} failed in replay: {failure}");
    }
    if !report.not_replayed.is_empty() {
        let skipped: Vec<String> =
            report.not_replayed.iter().map(|(t, n)| format!("{t} {n}")).collect();
        println!("# not replayed: {}", skipped.join(", "));
    }
    if !report.other_servers.is_empty() {
        let others: Vec<String> =
            report.other_servers.iter().map(|(s, n)| format!("{s} {n}")).collect();
        println!("# calls not replayed, only timed (the agent's own tools): {}", others.join(", "));
    }
    println!(
        "tokens delivered / recorded (reads)   {:>7}   goal ≤ 20%   ({} of {})",
        percent(report.delivered_share()),
        report.delivered_tokens,
        report.recorded_tokens
    );
    println!(
        "argument survival                     {:>7}   goal ≥ 99%   ({} of {})",
        percent(report.survival.rate()),
        report.survival.survived,
        report.survival.used
    );
    println!(
        "pre-fetch hit rate                    {:>7}   goal ≥ 60%   ({} of {})",
        percent(report.hit_rate()),
        e.prefetches_cited,
        e.prefetches
    );
    println!(
        "decline recall loss                   {:>7}   goal ≤ 10%   ({} of {})",
        percent(report.recall_loss()),
        e.declines_invoked,
        e.declines
    );
    println!(
        "cost overrun                          {:>7}   goal ≤ 15%   ({} of {})",
        percent(report.cost_overrun()),
        e.overruns,
        e.predictions
    );
    println!(
        "API requests added by pre-fetching    {:>7}   goal ≤ 15%   ({} on, {} off; {} for calls never made)",
        percent(report.requests_added()),
        report.requests_on,
        report.requests_off,
        report.requests_unrecorded
    );
    let think = if report.think_from_recording > 0 {
        format!(
            "think from the recording for {} of {} calls, else {} ms",
            report.think_from_recording, report.calls, report.think_ms
        )
    } else {
        format!("think {} ms", report.think_ms)
    };
    println!(
        "agent wall time, pre-fetch on / off   {:>7}   goal ≤ 80%   ({think}, a request {} ms)",
        report.wall_time_ratio().map_or_else(|| "–".to_owned(), |r| format!("{r:.3}")),
        report.service_ms
    );
    if let Some(next) = &report.next_tool {
        println!(
            "next tool named by its neighbours      {:>7}   ({} of {} transitions, top {}); by its follow-up links {}",
            percent(ratio(next.named_by_neighbors, next.transitions)),
            next.named_by_neighbors,
            next.transitions,
            next.k,
            percent(ratio(next.named_by_links, next.transitions)),
        );
    }
    for lost in report.survival.lost.iter().take(10) {
        println!("  lost: {} of {} ({})", lost.value, lost.from_tool, lost.argument);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn github_mcp_server_arguments_become_quivers() {
        let args = |v: Value| v.as_object().cloned().unwrap();
        assert_eq!(
            Value::Object(github_arguments(
                "get_issue",
                args(json!({"owner": "o", "repo": "r", "issue_number": 4}))
            )),
            json!({"owner": "o", "repo": "r", "number": 4})
        );
        assert_eq!(
            Value::Object(github_arguments(
                "get_file_contents",
                args(json!({"owner": "o", "repo": "r", "path": "/", "sha": "abc"}))
            )),
            json!({"owner": "o", "repo": "r", "ref": "abc"})
        );
        assert_eq!(
            Value::Object(github_arguments(
                "search_issues",
                args(json!({"owner": "o", "repo": "r", "query": "bug", "perPage": 5}))
            )),
            json!({"q": "bug repo:o/r is:issue", "per_page": 5})
        );
        assert_eq!(
            Value::Object(github_arguments("list_issues", args(json!({"state": "CLOSED"})))),
            json!({"state": "closed"})
        );
    }

    #[test]
    fn a_task_is_the_folder_of_its_sessions() {
        assert_eq!(
            task_of("data/run-2/easyr1__config_audit/messages.json"),
            "easyr1__config_audit"
        );
        assert_eq!(task_of("toolathlon/git-repo/claude.json"), "git-repo");
        let task = "git-repo";
        assert_ne!(in_part(task, Part::Calibration), in_part(task, Part::HeldOut));
        assert!(in_part(task, Part::All));
    }
}
