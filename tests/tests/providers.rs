//! The five providers as a user meets them: the README's tool tables are what the registry
//! serves (regenerated from it, compared here), and `[providers.NAME] groups` serves only the
//! toolsets named.
//!
//! `UPDATE_README=1 cargo xtask test readme_tool_tables` rewrites the tables from the registry.

use std::collections::BTreeMap;
use std::path::Path;

use quiver_tests::{plugins_dir, quiver, texts, ALL_PROVIDERS};
use serde_json::Value;

const BEGIN: &str =
    "<!-- tools:begin (generated from the registry by tests/tests/providers.rs) -->";
const END: &str = "<!-- tools:end -->";

/// A config that starts every provider (Jira needs a site); nothing is called.
fn config(dir: &Path, extra: &str) -> String {
    let path = dir.join("quiver.toml");
    let text = format!("[providers.jira]\nbase_url = \"http://127.0.0.1:9\"\n{extra}");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// `quiver tools list --json` with every provider.
fn served_tools(extra: &str) -> Vec<Value> {
    let plugins = plugins_dir(&ALL_PROVIDERS);
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), extra);
    let args = ["tools", "list", "--json", "--config", &config, "--plugins"];
    let out = quiver(&[&args[..], &[plugins.path().to_str().unwrap()]].concat(), &[]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Per provider, per group: its reads and its writes.
type Groups = BTreeMap<String, BTreeMap<String, (Vec<String>, Vec<String>)>>;

/// The README section: per provider, its groups with their reads and writes.
fn tables(tools: &[Value]) -> String {
    let mut by_provider: Groups = BTreeMap::new();
    for tool in tools {
        let provider = tool["provider"].as_str().unwrap_or_default().to_owned();
        let name = tool["name"].as_str().unwrap_or_default();
        let local = name.split_once('.').map_or(name, |(_, t)| t).to_owned();
        let group = tool["group"].as_str().unwrap_or("-").to_owned();
        let class = tool["side_effect_class"].as_str().unwrap_or_default();
        let entry = by_provider.entry(provider).or_default().entry(group).or_default();
        if class.starts_with("mutates") || class == "indeterminate" {
            entry.1.push(format!("`{local}`"));
        } else {
            entry.0.push(format!("`{local}`"));
        }
    }
    let mut out = String::new();
    for (provider, groups) in &by_provider {
        let count: usize = groups.values().map(|(r, w)| r.len() + w.len()).sum();
        let names: Vec<&str> = groups.keys().map(String::as_str).collect();
        out.push_str(&format!(
            "\n**{provider}**: {count} tools in {} groups ({})\n\n| group | reads | writes |\n|---|---|---|\n",
            groups.len(),
            names.join(", ")
        ));
        for (group, (reads, writes)) in groups {
            let list = |v: &Vec<String>| if v.is_empty() { "—".to_owned() } else { v.join(", ") };
            out.push_str(&format!("| `{group}` | {} | {} |\n", list(reads), list(writes)));
        }
    }
    out
}

#[test]
fn readme_tool_tables_are_what_the_registry_serves() {
    let generated = tables(&served_tools(""));
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let (Some(start), Some(end)) = (readme.find(BEGIN), readme.find(END)) else {
        panic!("README.md has no `{BEGIN}` … `{END}` section");
    };
    let current = &readme[start + BEGIN.len()..end];
    let wanted = format!("{generated}\n");
    if current != wanted {
        if std::env::var_os("UPDATE_README").is_some() {
            let updated = format!("{}{BEGIN}{wanted}{}", &readme[..start], &readme[end..]);
            std::fs::write(&readme_path, updated).unwrap();
            return;
        }
        panic!(
            "README.md's tool tables differ from what the registry serves; run \
             `UPDATE_README=1 cargo xtask test readme_tool_tables` and commit the result.\n\
             served:\n{generated}"
        );
    }
}

#[test]
fn groups_serve_only_the_toolsets_named() {
    let all = served_tools("");
    let github_groups: Vec<String> = all
        .iter()
        .filter(|t| t["provider"] == "github")
        .filter_map(|t| t["group"].as_str().map(str::to_owned))
        .collect();
    assert!(github_groups.iter().any(|g| g == "pulls"), "{github_groups:?}");

    let only_pulls = served_tools("[providers.github]\ngroups = [\"pulls\"]\n");
    let github: Vec<&Value> = only_pulls.iter().filter(|t| t["provider"] == "github").collect();
    assert!(!github.is_empty());
    assert!(github.iter().all(|t| t["group"] == "pulls"), "{github:?}");
    assert_eq!(github.len(), github_groups.iter().filter(|g| *g == "pulls").count());
    // The other providers are untouched.
    let others = |tools: &[Value]| tools.iter().filter(|t| t["provider"] != "github").count();
    assert_eq!(others(&only_pulls), others(&all));

    // A group that does not exist is a config problem at its line, with the groups to choose
    // from, rather than a provider that silently serves nothing.
    let plugins = plugins_dir(&["quiver-provider-github"]);
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "[providers.github]\ngroups = [\"pull\"]\n");
    let out = quiver(
        &["doctor", "--config", &config, "--plugins", plugins.path().to_str().unwrap()],
        &[],
    );
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let text = format!("{stdout}{stderr}");
    assert!(text.contains("quiver.toml:4:"), "the line of `groups`: {text}");
    assert!(text.contains("no group `pull` (did you mean `pulls`?)"), "{text}");
    assert!(text.contains("issues"), "the groups to choose from: {text}");
}

#[test]
fn every_provider_serves_the_operations_developers_reach_for() {
    let tools = served_tools("");
    let count = |provider: &str| tools.iter().filter(|t| t["provider"] == provider).count();
    for (provider, at_least) in
        [("github", 40), ("gitlab", 32), ("jira", 22), ("clickup", 24), ("fireflies", 6)]
    {
        assert!(count(provider) >= at_least, "{provider}: {} tools", count(provider));
    }
    // Every tool belongs to a group, so `groups` can select it.
    let ungrouped: Vec<&Value> = tools.iter().filter(|t| t["group"].is_null()).collect();
    assert!(ungrouped.is_empty(), "{ungrouped:?}");
}
