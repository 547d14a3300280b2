//! The `quiver` command line as a user meets it: config errors, value-model provenance, doctor.

use quiver_tests::{plugins_dir, quiver, texts};

fn write_config(dir: &std::path::Path, text: &str) -> String {
    let path = dir.join("quiver.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn tools_show_prints_the_merged_model_and_the_layer_of_each_field() {
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let config_dir = tempfile::tempdir().unwrap();
    let config = write_config(
        config_dir.path(),
        r#"
        [tools."*"]
        cost_model = { max_kb = 64 }

        [tools."github.*"]
        fail_fast_after_n = 4

        [tools."github.get_issue"]
        value_class = "optional"
        cost_model = { freshness_ttl_s = 5 }
        "#,
    );
    let out = quiver(
        &[
            "tools",
            "show",
            "github.get_issue",
            "--config",
            &config,
            "--plugins",
            plugins.path().to_str().unwrap(),
        ],
        &[],
    );
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    let line = |field: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{field} =")))
            .unwrap_or_else(|| panic!("no line for {field}:\n{stdout}"))
            .to_owned()
    };
    assert!(
        line("value_class").contains(r#""optional"  [config [tools."github.get_issue"]]"#),
        "{stdout}"
    );
    assert!(
        line("cost_model.freshness_ttl_s").contains(r#"5  [config [tools."github.get_issue"]]"#),
        "{stdout}"
    );
    assert!(line("cost_model.max_kb").contains(r#"64.0  [config [tools."*"]]"#), "{stdout}");
    assert!(line("fail_fast_after_n").contains(r#"4  [config [tools."github.*"]]"#), "{stdout}");
    assert!(line("side_effect_class").contains(r#""read_only"  [provider github]"#), "{stdout}");
    assert!(
        line("follow_up").contains("list_issue_comments"),
        "the provider's links survive: {stdout}"
    );
    assert!(line("follow_up").contains("[provider github]"), "{stdout}");

    let json = quiver(
        &[
            "tools",
            "show",
            "github.get_issue",
            "--json",
            "--config",
            &config,
            "--plugins",
            plugins.path().to_str().unwrap(),
        ],
        &[],
    );
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(value["value_model"]["value_class"], "optional");
    assert_eq!(value["provenance"]["value_class"], r#"config [tools."github.get_issue"]"#);
    assert_eq!(value["tool"]["mcp_name"], "github_get_issue");
}

#[test]
fn a_bad_config_line_is_an_error_naming_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        write_config(dir.path(), "[providers.github]\nbase_url = https://ghe.example.com\n");
    let out = quiver(&["tools", "list", "--config", &config], &[]);
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "quiver: invalid config {config}: TOML parse error at line 2, column 12"
        )),
        "{stderr}"
    );
}

#[test]
fn a_misspelt_value_model_key_is_refused_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        write_config(dir.path(), "[tools.\"github.get_issue\".cost_model]\nfreshnes_ttl_s = 5\n");
    let out = quiver(&["tools", "list", "--config", &config], &[]);
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("unknown field `freshnes_ttl_s`"), "{stderr}");
    assert!(stderr.contains("line 2"), "{stderr}");
}

#[test]
fn doctor_reports_tokens_without_printing_them() {
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let secret = "ghp_doctorMustNeverPrintThis0123456789";
    let out = quiver(
        &["doctor", "--plugins", plugins.path().to_str().unwrap()],
        &[("GITHUB_TOKEN", secret)],
    );
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("provider github: ready"), "{stdout}");
    assert!(stdout.contains("token: $GITHUB_TOKEN is set"), "{stdout}");
    assert!(!stdout.contains(secret) && !stderr.contains(secret));

    let out = quiver(&["doctor", "--plugins", plugins.path().to_str().unwrap()], &[]);
    let (stdout, _) = texts(&out);
    assert!(stdout.contains("$GITHUB_TOKEN is not set"), "{stdout}");
    assert!(stdout.contains("config: none found"), "{stdout}");
    assert!(stdout.contains("enrichments: embeddings -> dataflow -> neighbors"), "{stdout}");
    assert!(stdout.contains("enrichment store: ") && stdout.contains("(ok)"), "{stdout}");
}

#[test]
fn doctor_says_where_the_audit_trail_and_the_traces_go() {
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[audit]\npath = \"logs/audit.jsonl\"\n[telemetry.otlp]\n\
         endpoint = \"http://collector:4318\"\nsample_ratio = 0.01\n",
    );
    let out = quiver(
        &["doctor", "--config", &config, "--plugins", plugins.path().to_str().unwrap()],
        &[],
    );
    let (stdout, _) = texts(&out);
    let trail = dir.path().join("logs/audit.jsonl");
    assert!(stdout.contains(&format!("audit: {} (writable", trail.display())), "{stdout}");
    assert!(
        stdout.contains("traces: OTLP/HTTP to http://collector:4318, sample ratio 0.01"),
        "{stdout}"
    );

    // A trail that cannot be written, and a collector header variable that is not set.
    std::fs::write(dir.path().join("blocked"), "a file, not a folder").unwrap();
    let config = write_config(
        dir.path(),
        "[audit]\npath = \"blocked/audit.jsonl\"\n[telemetry.otlp]\n\
         endpoint = \"http://collector:4317\"\nprotocol = \"grpc\"\n\
         headers_env = \"QUIVER_TEST_UNSET_OTLP_HEADERS\"\n",
    );
    let out = quiver(
        &["doctor", "--config", &config, "--plugins", plugins.path().to_str().unwrap()],
        &[],
    );
    let (stdout, _) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("audit.jsonl cannot be written"), "{stdout}");
    assert!(stdout.contains("QUIVER_TEST_UNSET_OTLP_HEADERS, which is not set"), "{stdout}");
}

#[test]
fn doctor_names_broken_tool_sources_and_enrichment_declarations() {
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.json"), r#"[{"name": "a", "description": "A."}]"#)
        .unwrap();
    std::fs::write(dir.path().join("bad.json"), "{not json").unwrap();
    let config = write_config(
        dir.path(),
        "[[sources]]\npath = \"good.json\"\n[[sources]]\npath = \"bad.json\"\n\
         [[enrichments]]\ntype = \"neighbors\"\n",
    );
    let out = quiver(
        &["doctor", "--config", &config, "--plugins", plugins.path().to_str().unwrap()],
        &[],
    );
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "doctor exits 1 when it reports a problem: {stderr}");
    assert!(stdout.contains("tool sources: 1 tools described"), "{stdout}");
    assert!(stdout.contains("bad.json: is not JSON"), "{stdout}");
    assert!(
        stdout.contains("enrichments: enrichment 'neighbors' depends on the 'embeddings'"),
        "{stdout}"
    );
    assert!(stdout.contains("2 problem(s)"), "{stdout}");

    // The described tool is listed as such, and calling it says why it cannot run.
    let args = ["--config", &config, "--plugins", plugins.path().to_str().unwrap()];
    let (stdout, _) = texts(&quiver(&[&["tools", "list"][..], &args].concat(), &[]));
    let line =
        stdout.lines().find(|l| l.starts_with("good.a ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("described only"), "{line}");
    let out = quiver(&[&["call", "good.a"][..], &args].concat(), &[]);
    let (stdout, stderr) = texts(&out);
    assert!(!out.status.success());
    assert!(
        format!("{stdout}{stderr}").contains("is described by the static source"),
        "{stdout}{stderr}"
    );
}

#[test]
fn plugins_beside_the_binary_are_found_without_flags() {
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join(quiver_tests::quiver_bin().file_name().unwrap());
    std::fs::copy(quiver_tests::quiver_bin(), &bin).unwrap();
    std::fs::create_dir(root.path().join("plugins")).unwrap();
    let github = quiver_tests::dylib("quiver-provider-github");
    std::fs::copy(&github, root.path().join("plugins").join(github.file_name().unwrap())).unwrap();
    let out = std::process::Command::new(&bin)
        .args(["tools", "list"])
        .env_remove("QUIVER_PLUGINS")
        .env_remove("QUIVER_CONFIG")
        .current_dir(root.path())
        .output()
        .unwrap();
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("github.get_issue"), "{stdout}");
}

#[test]
fn disabled_providers_load_but_serve_nothing() {
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "[providers.github]\nenabled = false\n");
    let args = ["--config", &config, "--plugins", plugins.path().to_str().unwrap()];
    let out = quiver(&[&["plugins"][..], &args].concat(), &[]);
    assert!(texts(&out).0.contains("disabled  libquiver_provider_github"), "{}", texts(&out).0);
    let out = quiver(&[&["call", "github.get_issue"][..], &args].concat(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(texts(&out).1.contains("no tool `github.get_issue`"), "{}", texts(&out).1);
}

#[test]
fn plan_shows_admitted_follow_ups_and_why_the_others_were_declined() {
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let dir = plugins.path().to_str().unwrap();
    // Sessions pre-fetch only what is more likely used than not: after a job list, its failed
    // job's log (p 0.45) is declined as below the minimum.
    let out =
        quiver(&["plan", "--recent", "github.list_workflow_jobs", "--json", "--plugins", dir], &[]);
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["declined"][0]["reason"], "below_min_probability", "{plan}");
    // With a lower minimum, the budget decides.
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("quiver.toml");
    std::fs::write(&config, "[enrichment]\nmin_prefetch_probability = 0.05\n").unwrap();
    let config = config.to_str().unwrap();
    let out = quiver(
        &[
            "--config",
            config,
            "plan",
            "--recent",
            "github.get_pull_request",
            "--recent",
            "github.list_workflow_jobs",
            "--budget",
            "4000",
            "--json",
            "--plugins",
            dir,
        ],
        &[],
    );
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    let plan: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let admitted: Vec<&str> =
        plan["admitted"].as_array().unwrap().iter().map(|c| c["tool"].as_str().unwrap()).collect();
    // A failed job's log follows its job list (get_job_logs, 12 KiB, fits the budget).
    assert!(admitted.contains(&"github.get_job_logs"), "{stdout}");
    assert!(plan["total_cost"].as_u64().unwrap() <= 4000, "{stdout}");
    let declined = |tool: &str| {
        plan["declined"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["tool"] == tool)
            .map(|d| d["reason"].as_str().unwrap().to_owned())
    };
    // A PR's files cost more than the whole budget: declined, and the reason says so.
    assert_eq!(declined("github.list_pull_request_files").as_deref(), Some("over_budget"));
    assert_eq!(plan["method"], "exact");

    // With room for everything, every read follow-up is admitted and nothing mutating ever is.
    let out = quiver(
        &["--config", config, "plan", "--recent", "github.get_issue", "--json", "--plugins", dir],
        &[],
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let admitted = plan["admitted"].to_string();
    assert!(admitted.contains("github.list_issue_comments"), "{plan}");
    assert!(!admitted.contains("create_") && !admitted.contains("add_"), "{plan}");

    let out = quiver(&["plan", "--recent", "github.nope", "--plugins", dir], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(texts(&out).1.contains("no tool `github.nope`"), "{}", texts(&out).1);
}

#[test]
fn usage_errors_exit_2_everywhere() {
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let dir = plugins.path().to_str().unwrap();
    for args in [
        &["call", "github.get_issue", "--args", "notjson", "--plugins", dir][..],
        &["call", "github.get_issue", "--args", "[1]", "--plugins", dir],
        &["sample", "--strategy", "bogus", "--plugins", dir],
        &["enrich", "--only", "bogus", "--plugins", dir],
        &["select", "--plugins", dir],
        &["tools", "lst"],
    ] {
        let out = quiver(args, &[]);
        let (_, stderr) = texts(&out);
        assert_eq!(out.status.code(), Some(2), "quiver {args:?}: {stderr}");
    }
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let plugins = plugins_dir(&quiver_tests::ALL_PROVIDERS);
    let mut child = std::process::Command::new(quiver_tests::quiver_bin())
        .args(["tools", "list", "--json", "--plugins", plugins.path().to_str().unwrap()])
        .env_remove("QUIVER_CONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the list (far over a pipe's buffer) is written.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn plugins_and_doctor_exit_1_when_something_failed() {
    let dir = tempfile::tempdir().unwrap();
    quiver_tests::add_truncated(dir.path(), "quiver-provider-github", "libbroken");
    let plugins = quiver(&["plugins", "--plugins", dir.path().to_str().unwrap()], &[]);
    assert_eq!(plugins.status.code(), Some(1), "{}", texts(&plugins).0);
    let doctor = quiver(&["doctor", "--plugins", dir.path().to_str().unwrap()], &[]);
    assert_eq!(doctor.status.code(), Some(1), "{}", texts(&doctor).0);
    let fine = plugins_dir(&["quiver-provider-github"]);
    let ok = quiver(&["plugins", "--plugins", fine.path().to_str().unwrap()], &[]);
    assert_eq!(ok.status.code(), Some(0), "{}", texts(&ok).0);
}

#[test]
fn a_provider_missing_a_required_key_is_not_configured_not_failed() {
    let plugins = plugins_dir(&["quiver-provider-jira"]);
    let dir = plugins.path().to_str().unwrap();
    let out = quiver(&["plugins", "--plugins", dir], &[]);
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "not a failure: {stdout}\n{stderr}");
    let line = stdout.lines().find(|l| l.contains("libquiver_provider_jira")).unwrap();
    assert!(
        line.starts_with("not configured") && line.contains("[providers.jira] base_url"),
        "{line}"
    );
    let doctor = quiver(&["doctor", "--plugins", dir], &[]);
    let (stdout, _) = texts(&doctor);
    assert!(
        stdout.contains("provider jira: not configured — [providers.jira] base_url"),
        "{stdout}"
    );
}

#[cfg(unix)]
#[test]
fn entries_that_are_not_files_are_listed_with_a_reason() {
    let dir = plugins_dir(&["quiver-provider-github"]);
    let suffix = std::env::consts::DLL_SUFFIX;
    let entry = |name: &str| dir.path().join(format!("{name}{suffix}"));
    std::fs::create_dir(entry("libdirectory")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/libgone.so", entry("libdangling")).unwrap();
    std::os::unix::fs::symlink(entry("libloop_b"), entry("libloop_a")).unwrap();
    std::os::unix::fs::symlink(entry("libloop_a"), entry("libloop_b")).unwrap();
    let out = quiver(&["plugins", "--plugins", dir.path().to_str().unwrap()], &[]);
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let line = |name: &str| {
        stdout.lines().find(|l| l.contains(name)).unwrap_or_else(|| panic!("{name}: {stdout}"))
    };
    assert!(line("libquiver_provider_github").starts_with("loaded"), "{stdout}");
    assert!(line("libdirectory").contains("is a directory"), "{stdout}");
    assert!(line("libdangling").contains("which does not exist"), "{stdout}");
    assert!(line("libloop_a").contains("cannot be followed"), "{stdout}");
}

/// A bad key or value in a provider's section is a config problem at its line and column, with
/// the likely fix; before, the plugin reported a position in the JSON it was given ("line 1").
#[test]
fn a_provider_section_typo_is_a_config_problem_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[providers.github]\nbase_ur = \"http://x\"\n\n[providers.gitlab]\ntimeout_s = \"fast\"\nauth = \"basic\"\n",
    );
    let plugins = plugins_dir(&["quiver-provider-github", "quiver-provider-gitlab"]);
    let out = quiver(
        &["doctor", "--config", &config, "--plugins", plugins.path().to_str().unwrap()],
        &[],
    );
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("3 problem(s):"), "{stdout}");
    assert!(
        stdout.contains("quiver.toml:2:1: [providers.github] has no setting `base_ur` — did you mean `base_url`?"),
        "{stdout}"
    );
    assert!(
        stdout.contains("quiver.toml:5:1: [providers.gitlab] timeout_s must be a whole number"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "quiver.toml:6:1: [providers.gitlab] auth must be one of \"private_token\", \"oauth\""
        ),
        "{stdout}"
    );
    assert!(stdout.contains("not serving — its section has a config problem"), "{stdout}");
    assert!(stdout.ends_with("3 problem(s)\n"), "counted once each: {stdout}");
}

/// A value out of range names its line and column, once.
#[test]
fn a_range_error_names_its_line_and_column_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[tools.\"github.get_issue\"]\nvalue_class = \"critical\"\nfollow_up = [{ tool = \"a\", probability = 0.5 }, { tool = \"b\", probability = 1.5 }]\n\n[tools.\"github.list_issues\"]\ncost_model = { typical_kb = -3 }\n",
    );
    let out = quiver(&["tools", "list", "--config", &config], &[]);
    let (_, stderr) = texts(&out);
    assert!(!out.status.success());
    // The first bad section in name order is reported.
    let expected = "quiver.toml:3:63: [tools.\"github.get_issue\"] follow_up[1].probability (tool `b`) = 1.5 is outside 0..=1";
    assert!(stderr.contains(expected), "{stderr}");
    assert_eq!(stderr.matches("is outside 0..=1").count(), 1, "said once: {stderr}");

    let config = write_config(
        dir.path(),
        "[tools.\"github.list_issues\"]\ncost_model = { typical_kb = -3 }\n",
    );
    let out = quiver(&["tools", "list", "--config", &config], &[]);
    let (_, stderr) = texts(&out);
    assert!(stderr.contains("quiver.toml:2:16: [tools.\"github.list_issues\"] cost_model.typical_kb = -3 must be a size ≥ 0"), "{stderr}");
}

/// Sections that change nothing are warned about with their line, counted by doctor, and not
/// taken for problems: a provider no plugin serves, a pattern no tool matches, a follow-up to a
/// tool no provider serves.
#[test]
fn sections_that_change_nothing_are_warned_about_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[providers.githib]\ntimeout_s = 5\n\n[tools.\"gitlab.*\"]\nvalue_class = \"critical\"\n\n[tools.\"github.get_issue\"]\nfollow_up = [{ tool = \"list_issue_comments\", probability = 0.5 }, { tool = \"get_isue\", probability = 0.5 }]\n",
    );
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let out = quiver(
        &["doctor", "--config", &config, "--plugins", plugins.path().to_str().unwrap()],
        &[],
    );
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "warnings are not problems: {stdout}\n{stderr}");
    for expected in [
        "quiver.toml:1:12: [providers.githib] names no provider a plugin here serves (plugins here: github)",
        "quiver.toml:4:8: [tools.\"gitlab.*\"] matches no served tool",
        "quiver.toml:8:67: [tools.\"github.get_issue\"] follow_up to `get_isue`, which no provider here serves",
    ] {
        let line = stdout.lines().find(|l| l.contains(expected));
        assert!(line.is_some_and(|l| l.starts_with("config warning: ")), "{expected}\n{stdout}");
    }
    assert!(
        !stdout.contains("list_issue_comments`, which"),
        "a served follow-up is fine: {stdout}"
    );
    assert!(stdout.ends_with("no problems, 3 warning(s)\n"), "{stdout}");
    // `serve` and every other command log them too.
    assert!(stderr.contains("[providers.githib] names no provider"), "{stderr}");
}
