//! `quiver replay` end to end: the real GitHub plugin answered by the replay's cassette with the
//! recorded answers of agent sessions, the real pipeline run with pre-fetching off and on.

use std::path::{Path, PathBuf};

use quiver_tests::{plugins_dir, quiver, texts};
use serde_json::Value;

fn traces_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/traces")
}

/// The recorded Toolathlon sessions that use GitHub's MCP server, one file per run.
fn toolathlon_sessions() -> Vec<String> {
    let mut files = Vec::new();
    for task in std::fs::read_dir(traces_dir().join("toolathlon")).unwrap().flatten() {
        if !task.path().is_dir() {
            continue;
        }
        for run in std::fs::read_dir(task.path()).unwrap().flatten() {
            files.push(run.path().to_str().unwrap().to_owned());
        }
    }
    files.sort();
    files
}

/// `quiver replay --json ARGS… --traces FILES…` with the GitHub plugin and an empty config.
fn replay(args: &[&str], files: &[String]) -> Value {
    replay_with("", args, files)
}

/// [`replay`] with the config `config`.
fn replay_with(config_text: &str, args: &[&str], files: &[String]) -> Value {
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.toml");
    std::fs::write(&config, config_text).unwrap();
    let mut all = vec![
        "replay",
        "--json",
        "--plugins",
        plugins.path().to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    if !files.is_empty() {
        all.push("--traces");
        all.extend(files.iter().map(String::as_str));
    }
    let out = quiver(&all, &[]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "quiver {all:?} failed:\n{stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn count(report: &Value, key: &str) -> u64 {
    report[key].as_u64().unwrap_or_else(|| panic!("no {key} in {report}"))
}

#[test]
fn replay_serves_each_recorded_answer_and_counts_what_pre_fetching_added() {
    let traces = traces_dir();
    let files = [traces.join("responses.json"), traces.join("chat.json")]
        .map(|p| p.to_str().unwrap().to_owned());
    // The built-in priors, calibrated on real sessions, rarely pre-fetch a listed commit; a
    // user who knows their agent reads the newest commit next says so.
    let newest_commit_next =
        "[tools.\"github.list_commits\"]\nfollow_up = [{ tool = \"get_commit\", \
         probability = 0.9, projection = \"$.commits[*].sha\", projection_arg = \"sha\" }]\n";
    let kept = tempfile::tempdir().unwrap();
    let kept_dir = kept.path().join("telemetry");
    let report =
        replay_with(newest_commit_next, &["--telemetry-out", kept_dir.to_str().unwrap()], &files);
    // The run with pre-fetching on left its telemetry for `tune analyze`: two pre-fetches.
    let events: String = std::fs::read_dir(&kept_dir)
        .unwrap()
        .flatten()
        .map(|f| std::fs::read_to_string(f.path()).unwrap())
        .collect();
    assert_eq!(events.matches("\"kind\":\"prefetch\"").count(), 2, "{events}");
    // Every call of the two sessions is a quiver tool, replayed and answered as recorded.
    assert_eq!((count(&report, "calls"), count(&report, "replayed")), (8, 8), "{report}");
    assert_eq!(count(&report, "failed"), 0, "{report}");
    // Each session read a commit list, then one of its commits: the newest in one session
    // (pre-fetched and used), the one before it in the other (pre-fetched for nothing). One
    // projection per link: one pre-fetch per session.
    let effectiveness = &report["effectiveness"];
    assert_eq!(effectiveness["prefetches"], 2, "{report}");
    assert_eq!(effectiveness["prefetches_cited"], 1, "{report}");
    // The used pre-fetch replaced the agent's own request; the other was one request more, for
    // a call nobody made. The agent still waited less.
    assert_eq!((count(&report, "requests_off"), count(&report, "requests_on")), (8, 9));
    assert_eq!(count(&report, "requests_unrecorded"), 1, "{report}");
    assert!(count(&report, "wall_ms_on") < count(&report, "wall_ms_off"), "{report}");
    // The listed SHA the agent used next was in what quiver showed.
    assert_eq!(report["survival"]["used"], 2, "{report}");
    assert_eq!(report["survival"]["survived"], 2, "{report}");

    // With the built-in priors the link is declined (below min_prefetch_probability). A decline
    // of the very call the agent then made (the newest commit) is recall lost, one of another
    // commit is not. An issue's comments are not even considered: the recorded issue shows no
    // comment count, so the chain names no call.
    let report = replay(&[], &files);
    assert_eq!(report["effectiveness"]["prefetches"], 0, "{report}");
    let get_commit = &report["per_tool"]["github.get_commit"];
    assert_eq!((&get_commit["declines"], &get_commit["declines_called"]), (&2.into(), &1.into()));
    assert_eq!(report["effectiveness"]["declines"], 2, "{report}");
    assert_eq!(count(&report, "requests_on"), count(&report, "requests_off"));
}

#[test]
fn a_claude_code_transcript_times_each_turn_by_its_own_timestamps() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/claude-github");
    let dir = dir.to_str().unwrap();
    let newest_commit_next =
        "[tools.\"github.list_commits\"]\nfollow_up = [{ tool = \"get_commit\", \
         probability = 0.9, projection = \"$.commits[*].sha\", projection_arg = \"sha\" }]\n";
    let report = replay_with(newest_commit_next, &["--claude-dir", dir], &[]);
    // github-mcp-server's tools through Claude Code (`mcp__github__…`) are replayed; Claude
    // Code's own Bash is timed as recorded.
    assert_eq!((count(&report, "calls"), count(&report, "replayed")), (3, 2), "{report}");
    assert_eq!(report["other_servers"]["the agent's own tools"], 1, "{report}");
    assert_eq!(count(&report, "think_from_recording"), 2, "{report}");
    // Off: a request (300 ms), 5 s of thought, a request, 3 s of thought, Bash's 8 s.
    assert_eq!(count(&report, "wall_ms_off"), 300 + 5000 + 300 + 3000 + 8000);
    // On: the newest commit was pre-fetched while the agent thought, and served at once.
    assert_eq!(report["effectiveness"]["prefetches_cited"], 1, "{report}");
    assert_eq!(count(&report, "wall_ms_on"), 300 + 5000 + 3000 + 8000);
}

#[test]
fn replay_of_recorded_github_sessions_keeps_the_values_agents_use_next() {
    let files = toolathlon_sessions();
    assert_eq!(files.len(), 13, "{files:?}");
    let report = replay(&[], &files);
    assert_eq!(count(&report, "sessions"), 13);
    // Every read the plugin has a tool for was answered; the two failures are update_issue
    // answers the recording's server cut to `{"url": …}`, which no client of the REST API sees.
    let failures = report["failures"].as_object().unwrap();
    assert_eq!(failures.keys().collect::<Vec<_>>(), ["github.update_issue"], "{report}");
    assert!(count(&report, "replayed") >= 190, "{report}");
    // Other MCP servers' tools go through a stand-in of each server, served like any upstream:
    // every call of theirs is replayed, none fails.
    let per_server = report["per_server"].as_object().unwrap();
    for server in ["emails", "fetch", "filesystem", "local", "notion", "terminal"] {
        let figures = &per_server[server];
        assert!(figures["replayed"].as_u64().unwrap() > 0, "{server}: {figures}");
        assert_eq!(figures["replayed"], figures["calls"], "{server}: {figures}");
        assert_eq!(figures["failed"], 0, "{server}: {figures}");
    }
    assert!(report["other_servers"].as_object().unwrap().is_empty(), "{report}");
    let github = &per_server["github"];
    // The directory listings' paths and the branch names were what the agents called next:
    // quiver's answers kept all of them.
    let survival = &report["survival"];
    assert!(survival["used"].as_u64().unwrap() >= 100, "{report}");
    assert_eq!(survival["used"], survival["survived"], "{}", survival["lost"]);
    // Projection delivered less than GitHub's server answered.
    let tokens = |key: &str| github[key].as_u64().unwrap();
    assert!(tokens("delivered_tokens") * 2 < tokens("recorded_tokens"), "{github}");
}

#[test]
fn the_held_out_part_and_the_calibration_part_split_by_task() {
    let files = toolathlon_sessions();
    let all = count(&replay(&[], &files), "sessions");
    let calibration = replay(&["--part", "calibration"], &files);
    let held_out = replay(&["--part", "held-out"], &files);
    assert_eq!(count(&calibration, "sessions") + count(&held_out, "sessions"), all);
    assert_eq!(count(&calibration, "tasks") + count(&held_out, "tasks"), 7);
    assert!(count(&held_out, "tasks") > 0 && count(&calibration, "tasks") > 0);
}

#[test]
fn a_trace_that_cannot_be_read_is_named_and_nothing_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("session.json");
    std::fs::write(&bad, "{\"not\": \"a trace\"}").unwrap();
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let out = quiver(
        &[
            "replay",
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--traces",
            bad.to_str().unwrap(),
        ],
        &[],
    );
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("skipped {}: no `messages` array", bad.display())),
        "{stderr}"
    );
    assert!(stderr.contains("no session with tool calls in the traces given"), "{stderr}");
}

#[test]
fn neighbors_and_links_are_scored_on_the_tool_called_next() {
    let traces = traces_dir();
    let files = [traces.join("responses.json"), traces.join("chat.json")]
        .map(|p| p.to_str().unwrap().to_owned());
    let report = replay(&["--neighbors"], &files);
    let next = &report["next_tool"];
    // Two sessions of four calls: three transitions each.
    assert_eq!(next["transitions"], 6, "{report}");
    // get_issue → list_issue_comments and list_commits → get_commit are the provider's links.
    assert_eq!(next["named_by_links"], 4, "{report}");
    let by_neighbors = next["named_by_neighbors"].as_u64().unwrap();
    assert!(by_neighbors <= 6 && next["k"].as_u64().unwrap() > 0, "{report}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_quiver_recorded_replays_with_its_own_results() {
    use quiver_runtime::{Host, LoadedConfig, Session};
    use wiremock::matchers::{method, path, path_regex};
    use wiremock::{Mock, MockServer};

    // A session through a host that records: a commit list, its newest commit, the list again.
    const REPO: &str = "/repos/octocat/Hello-World";
    let server = MockServer::start().await;
    let reply = |file| quiver_tests::recorded_reply(200, "github", file);
    Mock::given(method("GET"))
        .and(path(format!("{REPO}/commits")))
        .respond_with(reply("commits_list.json"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path_regex(format!("^{REPO}/commits/[0-9a-f]{{40}}$")))
        .respond_with(reply("commit.json"))
        .mount(&server)
        .await;
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let telemetry = tempfile::tempdir().unwrap();
    let text = format!(
        "[providers.github]\nbase_url = \"{}\"\n\n[telemetry]\nrecord_sessions = true\ndir = \
         \"{}\"\n",
        server.uri(),
        telemetry.path().display()
    );
    let config = LoadedConfig::parse(Path::new("quiver.toml"), &text).unwrap();
    let host = std::sync::Arc::new(Host::with_config(config, Some(plugins.path())));
    let session = Session::new(std::sync::Arc::clone(&host), "mcp-session-1");
    let list = serde_json::json!({"owner": "octocat", "repo": "Hello-World"});
    let newest = "24606b5f326a1356f031dd06431cfb0beddd475f";
    let get = serde_json::json!({"owner": "octocat", "repo": "Hello-World", "sha": newest});
    let (listed, _) = session.call("github.list_commits", list.clone(), &[]).await;
    let (commit, _) = session.call("github.get_commit", get.clone(), &[]).await;
    let (again, effects) = session.call("github.list_commits", list.clone(), &[]).await;
    assert!(!listed.is_error && !commit.is_error && effects.cache_hit, "{again:?}");
    session.shutdown().await;
    // What the provider gives, before a session projects it.
    let whole_list = host.call("github.list_commits", list, None, "direct", None).await;
    let whole = host.call("github.get_commit", get, None, "direct", None).await;
    drop(host);

    // Every call is recorded with its whole result, the repeat too.
    let sessions = telemetry.path().join("sessions");
    let files: Vec<PathBuf> =
        std::fs::read_dir(&sessions).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let recorded = quiver_runtime::recording::read_recording(&files[0]).unwrap();
    let tools: Vec<&str> = recorded.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["github.list_commits", "github.get_commit", "github.list_commits"]);
    assert_eq!(recorded[1].result.structured, whole.structured);
    assert_eq!(recorded[0].result.structured, whole_list.structured);
    assert_eq!(recorded[2].result.structured, whole_list.structured);

    // The same session also called a tool of an upstream quiver fronted (appended here as a
    // host fronting one would have recorded it).
    let upstream = quiver_runtime::recording::RecordedCall {
        at_ms: recorded[2].answered_ms + 1000,
        answered_ms: recorded[2].answered_ms + 1200,
        tool: "linear.get_issue".into(),
        arguments: serde_json::json!({"id": "ENG-42"}),
        result: quiver_core::ToolResult::from_json(
            serde_json::json!({"id": "ENG-42", "title": "t"}),
        ),
    };
    let mut text = std::fs::read_to_string(&files[0]).unwrap();
    text.push_str(&serde_json::to_string(&upstream).unwrap());
    text.push('\n');
    std::fs::write(&files[0], text).unwrap();

    // Replayed with a link saying the newest commit is read next: it is pre-fetched from the
    // recorded results and used, and the list's repeat comes from the cache.
    let newest_commit_next =
        "[tools.\"github.list_commits\"]\nfollow_up = [{ tool = \"get_commit\", \
         probability = 0.9, projection = \"$.commits[*].sha\", projection_arg = \"sha\" }]\n";
    let report =
        replay_with(newest_commit_next, &["--recordings", sessions.to_str().unwrap()], &[]);
    assert_eq!((count(&report, "calls"), count(&report, "replayed")), (4, 4), "{report}");
    assert_eq!(count(&report, "failed"), 0, "{report}");
    // The upstream's tool through the replay's stand-in for it.
    assert_eq!(report["per_server"]["linear"]["replayed"], 1, "{report}");
    assert_eq!(report["effectiveness"]["prefetches"], 1, "{report}");
    assert_eq!(report["effectiveness"]["prefetches_cited"], 1, "{report}");
    assert_eq!((count(&report, "requests_off"), count(&report, "requests_on")), (3, 3));
    assert_eq!(count(&report, "requests_unrecorded"), 0, "{report}");
    assert_eq!(count(&report, "think_from_recording"), 3, "{report}");
    assert!(count(&report, "recorded_tokens") > 0, "{report}");
    assert!(count(&report, "delivered_tokens") <= count(&report, "recorded_tokens"), "{report}");

    // `tune from-logs` mines the same recordings, each link with the path its value came from.
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let out = quiver(
        &[
            "tune",
            "from-logs",
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--min-support",
            "1",
            "--claude-dir",
            telemetry.path().join("no-transcripts").to_str().unwrap(),
            "--recordings",
            sessions.to_str().unwrap(),
        ],
        &[("QUIVER_DATA_DIR", telemetry.path().join("data").to_str().unwrap())],
    );
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("get_commit") && stdout.contains("$.commits[*].sha"), "{stdout}");

    // A file that is not a recording is named, with what writes them.
    std::fs::write(sessions.join("notes.jsonl"), "not json\n").unwrap();
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let out = quiver(
        &[
            "replay",
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--recordings",
            sessions.join("notes.jsonl").to_str().unwrap(),
        ],
        &[],
    );
    let (_, stderr) = texts(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("notes.jsonl:1: not a recorded call"), "{stderr}");
    assert!(stderr.contains("record_sessions = true"), "{stderr}");
}
