//! A plugins directory holding GitHub and every kind of broken plugin: GitHub works, each fault is
//! reported with a clear reason, and the host never aborts.

use quiver_core::ToolErrorKind;
use quiver_runtime::config::LoadedConfig;
use quiver_runtime::{Host, PluginStatus};
use quiver_tests::{add_truncated, plugins_dir, quiver, texts};
use serde_json::json;

const ALL: &[&str] = &[
    "quiver-provider-github",
    "quiver-fixture-panic-call",
    "quiver-fixture-panic-init",
    "quiver-fixture-old-abi",
    "quiver-fixture-layout-mismatch",
    "quiver-fixture-not-a-plugin",
];

fn faulty_dir() -> tempfile::TempDir {
    let dir = plugins_dir(ALL);
    add_truncated(dir.path(), "quiver-provider-github", "libtruncated_github");
    std::fs::write(dir.path().join(format!("notes{}", std::env::consts::DLL_SUFFIX)), "plain text")
        .unwrap();
    std::fs::write(dir.path().join("README.md"), "not a plugin file, not reported").unwrap();
    dir
}

fn line_for<'a>(stdout: &'a str, file_fragment: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.contains(file_fragment))
        .unwrap_or_else(|| panic!("no line for {file_fragment} in:\n{stdout}"))
}

#[test]
fn plugins_lists_every_file_with_its_fate() {
    let dir = faulty_dir();
    let out = quiver(&["plugins", "--plugins", dir.path().to_str().unwrap()], &[]);
    let (stdout, stderr) = texts(&out);
    // Every file is listed; the failed ones make the exit code 1.
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");

    let github = line_for(&stdout, "libquiver_provider_github");
    assert!(github.starts_with("loaded") && github.contains("github 0.1.0"), "{github}");
    let panic_call = line_for(&stdout, "panic_call");
    assert!(
        panic_call.starts_with("loaded"),
        "a plugin whose tool panics still loads: {panic_call}"
    );

    let expectations = [
        ("panic_init", "failed to initialise: provider `panic_init` panicked during initialisation: cannot reach the configuration service"),
        ("old_abi", "provider `legacy` was built against quiver-plugin-abi 0.0; this host needs 0.1 — rebuild it with quiver-plugin-sdk 0.1"),
        ("layout_mismatch", "root module does not have this host's layout"),
        ("not_a_plugin", "not a quiver plugin: it exports no QUIVER_PLUGIN_DECLARATION"),
        ("truncated_github", "not a loadable shared library"),
        ("notes", "not a loadable shared library"),
    ];
    for (file, reason) in expectations {
        let line = line_for(&stdout, file);
        assert!(line.starts_with("failed"), "{line}");
        assert!(line.contains(reason), "expected `{reason}` in: {line}");
    }
    assert!(!stdout.contains("README"), "non-library files are not plugins: {stdout}");
    // abi_stable's multi-kilobyte layout report stays out of the default output.
    assert!(stderr.len() < 4000, "stderr is too long ({} bytes):\n{stderr}", stderr.len());
}

#[test]
fn github_tools_are_served_beside_the_faulty_plugins() {
    let dir = faulty_dir();
    let out = quiver(&["tools", "list", "--plugins", dir.path().to_str().unwrap()], &[]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    for tool in
        ["github.get_issue", "github.list_pull_requests", "github.create_issue", "panic_call.ok"]
    {
        assert!(stdout.contains(tool), "{tool} missing from:\n{stdout}");
    }
    assert!(!stdout.contains("panic_init."), "a provider that failed to initialise serves nothing");
}

#[test]
fn a_panicking_tool_is_an_error_result_and_the_binary_exits_cleanly() {
    let dir = faulty_dir();
    let out =
        quiver(&["call", "panic_call.explode", "--plugins", dir.path().to_str().unwrap()], &[]);
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "exit code 1, not a signal: {stderr}");
    assert!(
        stderr.contains("quiver: panic_call.explode failed (internal): provider `panic_call` panicked during tool `explode`: index out of bounds"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_host_keeps_serving_after_a_plugin_panics() {
    let dir = faulty_dir();
    let host = Host::with_config(LoadedConfig::default(), Some(dir.path()));
    let failed = host
        .plugin_reports()
        .iter()
        .filter(|r| matches!(r.status, PluginStatus::Failed { .. }))
        .count();
    assert_eq!(failed, 6, "{:?}", host.plugin_reports());

    for _ in 0..3 {
        let boom = host.call("panic_call.explode", json!({}), None, "test", None).await;
        assert!(boom.is_error);
        assert_eq!(boom.error_kind, Some(ToolErrorKind::Internal));
        let ok = host.call("panic_call.ok", json!({}), None, "test", None).await;
        assert!(!ok.is_error, "{ok:?}");
        assert_eq!(ok.structured, Some(json!({"still": "serving"})));
    }
    let unknown = host.call("panic_call.nope", json!({}), None, "test", None).await;
    assert_eq!(unknown.error_kind, Some(ToolErrorKind::UnknownTool));
    assert!(
        unknown.text_content().contains("provider `panic_call` has: explode, ok"),
        "{}",
        unknown.text_content()
    );
}

#[test]
fn a_second_copy_of_a_provider_is_refused_naming_the_first() {
    let dir = plugins_dir(&["quiver-provider-github"]);
    let original = quiver_tests::dylib("quiver-provider-github");
    std::fs::copy(
        &original,
        dir.path().join(format!("zz_github_copy{}", std::env::consts::DLL_SUFFIX)),
    )
    .unwrap();
    let out = quiver(&["plugins", "--plugins", dir.path().to_str().unwrap()], &[]);
    let (stdout, _) = texts(&out);
    assert!(line_for(&stdout, "libquiver_provider_github").starts_with("loaded"), "{stdout}");
    let copy = line_for(&stdout, "zz_github_copy");
    assert!(
        copy.starts_with("failed") && copy.contains("provider `github` is already served by"),
        "{copy}"
    );
    assert!(copy.contains("remove one of the two files"), "{copy}");
}
