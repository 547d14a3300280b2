//! `quiver tune analyze --apply` and `quiver tune from-logs` through the real binary: the R7 rule
//! written into a config with comments and other sections that stay byte-identical, hand-written
//! values kept unless forced, and follow-up links mined from telemetry written by the real sink
//! and from Claude Code transcripts under `tests/data/claude/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use quiver_core::telemetry::{CallEvent, EventKind};
use quiver_runtime::config::LoadedConfig;
use quiver_runtime::telemetry::TelemetrySink;
use quiver_runtime::{Host, Session};
use quiver_tests::{plugins_dir, quiver, recorded_reply, texts};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The recorded Claude Code transcripts: two sessions in two project folders.
fn claude_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/claude")
}

fn event(session: &str, kind: EventKind, tool: &str, args_hash: &str) -> CallEvent {
    CallEvent {
        args_hash: args_hash.into(),
        predicted_cost_tokens: Some(900),
        tokens_before: 1200,
        tokens_after: 800,
        latency_ms: 140,
        landed_in_time: (kind == EventKind::Prefetch).then_some(true),
        ..CallEvent::new(1_762_240_000_000, session, tool, kind)
    }
}

/// A session in which the agent lists, `prefetched` follow-ups of `tool` run after each list,
/// and the agent asks for the first `used` of them next (and for something else otherwise).
fn prefetch_session(session: &str, tool: &str, prefetched: usize, used: usize) -> Vec<CallEvent> {
    let mut events = Vec::new();
    for i in 0..prefetched {
        events.push(event(session, EventKind::Call, "github.list_pull_requests", &format!("l{i}")));
        let hash = format!("{tool}-{i}");
        events.push(event(session, EventKind::Prefetch, tool, &hash));
        if i < used {
            events.push(event(session, EventKind::Call, tool, &hash));
        } else {
            events.push(event(
                session,
                EventKind::Call,
                "github.list_issue_comments",
                &format!("c{i}"),
            ));
        }
    }
    events
}

/// Writes `events` with the sink sessions use; returns the file.
fn record(dir: &Path, events: &[CallEvent]) -> String {
    let sink = TelemetrySink::new(dir, "test");
    for e in events {
        sink.record(e);
    }
    sink.path().to_str().unwrap().to_owned()
}

/// `quiver tune from-logs ARGS…` with the GitHub plugin, a config in a new temp dir and the data
/// dir `data`: its stdout.
fn from_logs(data: &Path, args: &[&str]) -> String {
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.toml");
    let (plugins, config) = (plugins.path().to_str().unwrap(), config.to_str().unwrap());
    let mut all = vec!["tune", "from-logs"];
    all.extend_from_slice(args);
    all.extend(["--plugins", plugins, "--config", config]);
    run(&all, &[("QUIVER_DATA_DIR", data.to_str().unwrap())]).0
}

fn run(args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let out = quiver(args, env);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "quiver {args:?} failed:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

const CONFIG: &str = r#"# quiver for the hello-world checkout
plugins_dir = "/opt/quiver/plugins"   # the bundle's plugins

[providers.github]
token_env = "GH_TOKEN"

# lists are cheap; keep them
[tools."github.list_pull_requests"]
value_class = "supporting"   # tuned by hand

[tools."github.get_pull_request"]
cost_model = { max_kb = 40 }

[telemetry]
enabled = true
"#;

#[test]
fn analyze_apply_writes_only_the_r7_lines_and_a_second_run_changes_nothing() {
    let telemetry = tempfile::tempdir().unwrap();
    let mut events = prefetch_session("s1", "github.get_pull_request", 12, 3);
    events.extend(prefetch_session("s2", "github.get_issue", 10, 9));
    events.extend(prefetch_session("s3", "github.list_pull_request_files", 9, 0));
    let file = record(telemetry.path(), &events);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let config_arg = config.to_str().unwrap();

    let (stdout, _) = run(&["tune", "analyze", &file], &[]);
    assert!(
        stdout.contains(
            "# r7: [tools.\"github.get_pull_request\"] speculate = false (3 of 12 pre-fetches \
             used (25.0%)); --apply writes it"
        ),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        CONFIG,
        "without --apply nothing is written"
    );

    let (stdout, _) = run(&["tune", "analyze", &file, "--apply", "--config", config_arg], &[]);
    assert!(stdout.contains(&format!("config: {config_arg} (updated)")), "{stdout}");
    assert!(
        stdout.contains(
            "  set [tools.\"github.get_pull_request\"] speculate = false  (3 of 12 pre-fetches \
             used (25.0%))"
        ),
        "{stdout}"
    );
    // get_issue pays (90%); list_pull_request_files has only 9 pre-fetches, too few to judge;
    // a tool was disabled, so the global switch is left alone.
    assert!(!stdout.contains("get_issue\"]") && !stdout.contains("[enrichment]"), "{stdout}");
    let expected = CONFIG.replace(
        "cost_model = { max_kb = 40 }\n",
        "cost_model = { max_kb = 40 }\n\
         # quiver tune analyze --apply: 3 of 12 pre-fetches used (25.0%)\n\
         speculate = false\n",
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), expected);

    let (stdout, _) = run(&["tune", "analyze", &file, "--apply", "--config", config_arg], &[]);
    assert!(stdout.contains("  nothing to change"), "{stdout}");
    assert!(stdout.contains(&format!("config: {config_arg}\n")), "{stdout}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), expected, "idempotent");
}

#[test]
fn analyze_apply_turns_speculation_on_when_it_pays_and_creates_the_user_config() {
    let telemetry = tempfile::tempdir().unwrap();
    let file = record(telemetry.path(), &prefetch_session("s", "github.get_issue", 10, 8));
    let xdg = tempfile::tempdir().unwrap();
    let xdg_arg = xdg.path().to_str().unwrap();
    let (stdout, _) = run(&["tune", "analyze", &file, "--apply"], &[("XDG_CONFIG_HOME", xdg_arg)]);
    let created = xdg.path().join("quiver/config.toml");
    assert!(stdout.contains(&format!("config: {} (created)", created.display())), "{stdout}");
    assert!(
        stdout.contains("  set [enrichment] enabled = true  (8 of 10 pre-fetches used (80.0%))"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&created).unwrap(),
        "# quiver tune analyze --apply: 8 of 10 pre-fetches used (80.0%), no tool disabled\n\
         [enrichment]\n\
         enabled = true\n"
    );
    let (stdout, _) = run(&["tune", "analyze", &file, "--apply"], &[("XDG_CONFIG_HOME", xdg_arg)]);
    assert!(stdout.contains("nothing to change"), "{stdout}");
}

#[test]
fn a_hand_written_value_is_kept_unless_forced() {
    let telemetry = tempfile::tempdir().unwrap();
    let mut events = prefetch_session("s", "github.get_pull_request", 10, 1);
    events.extend(prefetch_session("t", "github.get_issue", 20, 20));
    let file = record(telemetry.path(), &events);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.toml");
    let text = "[tools.\"github.get_pull_request\"]\nspeculate = true   # reviews need it warm\n\n\
                [enrichment]\nenabled = false\n";
    std::fs::write(&config, text).unwrap();
    let config_arg = config.to_str().unwrap();

    let (stdout, _) = run(&["tune", "analyze", &file, "--apply", "--config", config_arg], &[]);
    assert!(
        stdout.contains(
            "  kept [tools.\"github.get_pull_request\"] speculate = true: written by hand; \
             --force replaces it with speculate = false  (1 of 10 pre-fetches used (10.0%))"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("  nothing to change"), "{stdout}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text);

    let (stdout, _) =
        run(&["tune", "analyze", &file, "--apply", "--force", "--config", config_arg], &[]);
    assert!(
        stdout.contains("  replaced [tools.\"github.get_pull_request\"] with speculate = false"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        text.replace("speculate = true   #", "speculate = false   #"),
        "only the value changed, its comment stayed"
    );
}

#[test]
fn from_logs_proposes_links_with_probability_and_projection_and_writes_nothing() {
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let data = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.toml");
    let fixture = claude_fixture();
    let (stdout, _) = run(
        &[
            "tune",
            "from-logs",
            "--claude-dir",
            fixture.to_str().unwrap(),
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
        &[("QUIVER_DATA_DIR", data.path().to_str().unwrap())],
    );
    assert!(
        stdout.contains(
            "# telemetry: 0 event(s) from 0 file(s); transcripts: 23 tool call(s) from 2 file(s)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("# skipped 2 transcript line(s) that were not JSON objects"),
        "{stdout}"
    );
    // New: every pull-request listing was followed by reading one of the listed pull requests'
    // files, whose number came from the listing.
    assert!(
        stdout.contains(
            "# github.list_pull_requests → github.list_pull_request_files: 3 of 3 calls (p 1.00); \
             $.pull_requests[*].number fed number in 3 of 3, its first value in 2 (p 0.67 \
             written: a pre-fetch runs the first)\n\
             [[tools.\"github.list_pull_requests\".follow_up]]\n\
             tool = \"list_pull_request_files\"\n\
             probability = 0.67\n\
             projection = \"$.pull_requests[*].number\"\n\
             projection_arg = \"number\"\n"
        ),
        "{stdout}"
    );
    // Seen, but the provider already links them: evidence only.
    assert!(
        stdout.contains(
            "# github.list_issues → github.get_issue: 3 of 4 calls (p 0.75); $.issues[*].number \
             fed number in 3 of 3, its first value in 2 (p 0.50 written: a pre-fetch runs the \
             first)\n#   already linked (p 0.04); left as it is\n"
        ),
        "{stdout}"
    );
    // Claude's built-ins keep their names and are never written.
    assert!(
        stdout.contains(
            "# Grep → Read: 4 of 4 calls (p 1.00)\n#   not written: Grep is not a tool this host \
             serves\n"
        ),
        "{stdout}"
    );
    assert!(!config.exists(), "without --apply nothing is written");
}

#[test]
fn from_logs_respects_min_support_and_skips_unreadable_lines() {
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let data = tempfile::tempdir().unwrap();
    let claude = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(claude_fixture()).unwrap().flatten() {
        let project = claude.path().join(entry.file_name());
        std::fs::create_dir(&project).unwrap();
        for file in std::fs::read_dir(entry.path()).unwrap().flatten() {
            std::fs::copy(file.path(), project.join(file.file_name())).unwrap();
        }
    }
    // Not UTF-8, then a line cut short: both skipped and counted.
    std::fs::write(
        claude.path().join("broken.jsonl"),
        b"\xff\xfe\x00garbage\n{\"type\":\"assistant\",\"message\":{\n",
    )
    .unwrap();
    let (stdout, _) = run(
        &[
            "tune",
            "from-logs",
            "--claude-dir",
            claude.path().to_str().unwrap(),
            "--min-support",
            "4",
            "--plugins",
            plugins.path().to_str().unwrap(),
        ],
        &[("QUIVER_DATA_DIR", data.path().to_str().unwrap())],
    );
    assert!(stdout.contains("from 3 file(s)"), "{stdout}");
    assert!(
        stdout.contains("# skipped 4 transcript line(s) that were not JSON objects"),
        "{stdout}"
    );
    assert!(stdout.contains("# 1 link(s) with support ≥ 4, 0 new"), "{stdout}");
    assert!(stdout.contains("# Grep → Read: 4 of 4 calls"), "{stdout}");
    assert!(!stdout.contains("list_pull_request_files"), "3 transitions < 4: {stdout}");
}

#[test]
fn from_logs_apply_seeds_and_links_without_touching_hand_written_sections() {
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let plugins_arg = plugins.path().to_str().unwrap();
    let telemetry = tempfile::tempdir().unwrap();
    let file = record(
        telemetry.path(),
        &[
            event("t1", EventKind::Call, "github.list_issues", "a1"),
            event("t1", EventKind::Prefetch, "github.get_issue", "a2"),
            event("t1", EventKind::Call, "github.get_pull_request", "a3"),
            event("t1", EventKind::Call, "github.list_pull_requests", "a4"),
            event("t1", EventKind::Call, "github.no_longer_served", "a5"),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let config_arg = config.to_str().unwrap();
    let fixture = claude_fixture();
    let args = [
        "tune",
        "from-logs",
        &file,
        "--claude-dir",
        fixture.to_str().unwrap(),
        "--apply",
        "--plugins",
        plugins_arg,
        "--config",
        config_arg,
    ];
    let (stdout, _) = run(&args, &[]);
    assert!(stdout.contains(&format!("config: {config_arg} (updated)")), "{stdout}");
    assert!(stdout.contains("  seeded [tools.\"github.list_issues\"]"), "{stdout}");
    assert!(
        !stdout.contains("seeded [tools.\"github.get_pull_request\"]"),
        "hand-written: {stdout}"
    );
    assert!(!stdout.contains("no_longer_served"), "not served, not seeded: {stdout}");
    assert!(
        stdout.contains(
            "  linked github.list_pull_requests → github.list_pull_request_files (p 0.50, \
             $.pull_requests[*].number → number)"
        ),
        "{stdout}"
    );

    let expected = CONFIG
        .replace(
            "value_class = \"supporting\"   # tuned by hand\n",
            "value_class = \"supporting\"   # tuned by hand\n\
             # follow-up links mined by quiver tune from-logs; the first 1 in effect before (a \
             user follow_up replaces the list whole)\n\
             follow_up = [\n    \
             { tool = \"get_pull_request\", probability = 0.07, projection = \"$.pull_requests[*].number\", projection_arg = \"number\" },\n    \
             { tool = \"list_pull_request_files\", probability = 0.5, projection = \"$.pull_requests[*].number\", projection_arg = \"number\" },\n\
             ]\n",
        )
        .replace(
            "cost_model = { max_kb = 40 }\n",
            "cost_model = { max_kb = 40 }\n\n\
             # seen 1 call(s) in telemetry; `quiver tools show github.list_issues` prints its \
             effective model, keys set here override it\n\
             [tools.\"github.list_issues\"]\n",
        );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), expected);

    // The provider's link survives next to the mined one.
    let (shown, _) = run(
        &[
            "tools",
            "show",
            "github.list_pull_requests",
            "--config",
            config_arg,
            "--plugins",
            plugins_arg,
        ],
        &[],
    );
    let follow_up = shown.lines().find(|l| l.trim_start().starts_with("follow_up =")).unwrap();
    assert!(
        follow_up.contains("\"get_pull_request\"") && follow_up.contains("list_pull_request_files"),
        "{shown}"
    );

    let (stdout, _) = run(&args, &[]);
    assert!(stdout.contains("  nothing to change"), "{stdout}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), expected, "idempotent");
}

fn recorded(name: &str) -> ResponseTemplate {
    recorded_reply(200, "github", name)
}

#[tokio::test(flavor = "multi_thread")]
async fn from_logs_mines_the_telemetry_of_scripted_sessions() {
    const REPO: &str = "/repos/octocat/Hello-World";
    let server = MockServer::start().await;
    for (route, file) in [
        (format!("{REPO}/issues"), "issues_list.json"),
        (format!("{REPO}/issues/1347"), "issue.json"),
        (format!("{REPO}/pulls/1347"), "pull_request.json"),
    ] {
        Mock::given(method("GET"))
            .and(path(route))
            .respond_with(recorded(file))
            .mount(&server)
            .await;
    }
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let telemetry = tempfile::tempdir().unwrap();
    let text = format!(
        "[providers.github]\nbase_url = \"{}\"\n[telemetry]\nenabled = true\ndir = \"{}\"\n",
        server.uri(),
        telemetry.path().display()
    );
    let config = LoadedConfig::parse(Path::new("quiver.toml"), &text).unwrap();
    let host = Arc::new(Host::with_config(config, Some(plugins.path())));
    // Three conversations: list the issues, read one, then the pull request of the same number.
    for id in ["a", "b", "c"] {
        let session = Session::new(Arc::clone(&host), id);
        let repo = json!({"owner": "octocat", "repo": "Hello-World"});
        let number = json!({"owner": "octocat", "repo": "Hello-World", "number": 1347});
        for (tool, args) in [
            ("github.list_issues", &repo),
            ("github.get_issue", &number),
            ("github.get_pull_request", &number),
        ] {
            let (result, _) = session.call(tool, args.clone(), &[]).await;
            assert!(!result.is_error, "{tool}: {result:?}");
        }
        session.shutdown().await;
    }
    drop(host);
    let files: Vec<PathBuf> =
        std::fs::read_dir(telemetry.path()).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");

    let no_transcripts = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.toml");
    let args = [
        "tune",
        "from-logs",
        files[0].to_str().unwrap(),
        "--claude-dir",
        no_transcripts.path().to_str().unwrap(),
        "--plugins",
        plugins.path().to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ];
    let (stdout, _) = run(&args, &[]);
    assert!(stdout.contains("# telemetry: 9 event(s) from 1 file(s)"), "{stdout}");
    for tool in ["github.get_issue", "github.get_pull_request", "github.list_issues"] {
        assert!(
            stdout.contains(&format!("# seed: [tools.\"{tool}\"]  (3 call(s) in telemetry)")),
            "{stdout}"
        );
    }
    // Hashes carry no values, so no projection; the transitions still count.
    assert!(
        stdout.contains(
            "# github.get_issue → github.get_pull_request: 3 of 3 calls (p 1.00)\n\
             [[tools.\"github.get_issue\".follow_up]]\n\
             tool = \"get_pull_request\"\n\
             probability = 1.0\n\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "# github.list_issues → github.get_issue: 3 of 3 calls (p 1.00)\n#   already linked"
        ),
        "{stdout}"
    );

    let mut apply = args.to_vec();
    apply.push("--apply");
    let (stdout, _) = run(&apply, &[]);
    assert!(stdout.contains(&format!("config: {} (created)", config.display())), "{stdout}");
    assert!(
        stdout.contains("  linked github.get_issue → github.get_pull_request (p 1.00)"),
        "{stdout}"
    );
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.starts_with("# seen 3 call(s) in telemetry"), "{written}");
    assert!(
        written.contains(
            "[tools.\"github.get_issue\"]\n\
             # follow-up links mined by quiver tune from-logs; the first 1 in effect before (a \
             user follow_up replaces the list whole)\n\
             follow_up = [\n    \
             { tool = \"list_issue_comments\", probability = 0.3, projection = \"$.number\", projection_arg = \"number\" },\n    \
             { tool = \"get_pull_request\", probability = 1.0 },\n\
             ]\n"
        ),
        "{written}"
    );
    let (stdout, _) = run(&apply, &[]);
    assert!(stdout.contains("  nothing to change"), "{stdout}");
}

#[test]
fn from_logs_mines_chains_of_one_tool_and_never_writes_links_to_writes() {
    let data = tempfile::tempdir().unwrap();
    let no_transcripts = tempfile::tempdir().unwrap();
    // Three sessions: a commit, then another commit, then a comment on an issue.
    let mut events = Vec::new();
    for s in 0..3 {
        let session = format!("s{s}");
        events.push(event(&session, EventKind::Call, "github.get_commit", &format!("c{s}a")));
        events.push(event(&session, EventKind::Call, "github.get_commit", &format!("c{s}b")));
        events.push(event(&session, EventKind::Call, "github.add_issue_comment", &format!("w{s}")));
    }
    let file = record(data.path(), &events);
    let stdout =
        from_logs(data.path(), &[&file, "--claude-dir", no_transcripts.path().to_str().unwrap()]);
    // The same tool with other arguments is a follow-up: commit → commit is proposed.
    assert!(
        stdout.contains(
            "# github.get_commit → github.get_commit: 3 of 6 calls (p 0.50)\n\
             [[tools.\"github.get_commit\".follow_up]]\n\
             tool = \"get_commit\"\n"
        ),
        "{stdout}"
    );
    // A comment is never pre-fetched: the link is evidence only.
    assert!(
        stdout.contains(
            "# github.get_commit → github.add_issue_comment: 3 of 6 calls (p 0.50)\n\
             #   not written: quiver never pre-fetches github.add_issue_comment"
        ),
        "{stdout}"
    );
}

#[test]
fn from_logs_reads_openai_responses_and_chat_traces_with_bare_tool_names() {
    let data = tempfile::tempdir().unwrap();
    let no_transcripts = tempfile::tempdir().unwrap();
    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/traces");
    let (responses, chat) = (traces.join("responses.json"), traces.join("chat.json"));
    let stdout = from_logs(
        data.path(),
        &[
            "--claude-dir",
            no_transcripts.path().to_str().unwrap(),
            "--traces",
            responses.to_str().unwrap(),
            chat.to_str().unwrap(),
            "--provider",
            "github",
            "--min-support",
            "2",
        ],
    );
    assert!(stdout.contains("transcripts: 8 tool call(s) from 2 file(s)"), "{stdout}");
    // Both shapes: the listed commit's sha fed the next call, in each trace.
    assert!(
        stdout.contains(
            "# github.list_commits → github.get_commit: 2 of 2 calls (p 1.00); $[*].sha fed sha \
             in 2 of 2"
        ),
        "{stdout}"
    );
    // One agent read the newest commit, the other the one before: a pre-fetch of the first
    // listed commit would have served one of two, and that is the probability written.
    assert!(stdout.contains("its first value in 1 (p 0.50 written"), "{stdout}");
    // github-mcp-server's name for quiver's list_issue_comments.
    assert!(
        stdout.contains("# github.get_issue → github.list_issue_comments: 2 of 2 calls"),
        "{stdout}"
    );
}
