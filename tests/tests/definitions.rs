//! Tool definitions quiver did not write: the published tool-poisoning techniques (the corpus in
//! `tests/data/injections`) are each flagged, and no definition of ten real MCP servers
//! (`tests/data/mcp-servers`, 232 tools) is — cleaned first, as quiver lists an upstream's tools.
//! `cargo xtask test -- --test definitions --nocapture` prints (on stderr) the table the README
//! gives.

use std::path::Path;

use quiver_core::poisoned::{other_servers_tools_named, signs};
use quiver_core::untrusted::{clean_json, Removed};
use serde_json::Value;

fn data(rel: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data").join(rel);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// What holds a definition, and the other servers' tools it names.
type Flags = (Vec<String>, Option<String>);

/// What holds `definition`, cleaned as at listing: its strong signs, with the other servers'
/// tools it names beside them; and those names alone, which only warn.
fn flags(definition: &Value, other_tools: &[String]) -> Flags {
    let mut cleaned = definition.clone();
    let mut removed = Removed::default();
    clean_json(&mut cleaned, &[], &mut removed);
    let mut strong = signs(&cleaned, &removed);
    let named = other_servers_tools_named(&cleaned, other_tools);
    if !strong.is_empty() {
        strong.extend(named.clone());
    }
    (strong, named)
}

#[test]
fn every_published_poisoning_technique_is_flagged() {
    let cases = data("injections/tool-poisoning.json");
    let cases = cases.as_array().unwrap();
    eprintln!("| case | signs found |\n|---|---|");
    for case in cases {
        let others: Vec<String> = case["other_tools"]
            .as_array()
            .map(|names| names.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let (found, _) = flags(&case["definition"], &others);
        eprintln!("| {} | {} |", case["id"].as_str().unwrap(), found.len());
        assert!(!found.is_empty(), "{} is not flagged", case["id"]);
    }
    assert_eq!(cases.len(), 10);
}

#[test]
fn no_definition_of_a_real_server_is_flagged() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/mcp-servers");
    let mut servers: Vec<(String, Vec<Value>)> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.strip_suffix(".json")?.to_owned();
            let tools = data(&format!("mcp-servers/{name}.json")).as_array()?.clone();
            Some((name, tools))
        })
        .collect();
    servers.sort_by(|a, b| a.0.cmp(&b.0));
    // Each server beside all the others, as one quiver fronting them all would list them.
    let every_name: Vec<(String, String)> = servers
        .iter()
        .flat_map(|(server, tools)| {
            tools.iter().filter_map(move |t| Some((server.clone(), t["name"].as_str()?.to_owned())))
        })
        .collect();
    let (mut total, mut warned) = (0, Vec::new());
    eprintln!("| server | tools | held | warned: names another server's tool |\n|---|---|---|---|");
    for (server, tools) in &servers {
        let own: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        let others: Vec<String> = every_name
            .iter()
            .filter(|(owner, name)| owner != server && !own.contains(&name.as_str()))
            .map(|(_, name)| name.clone())
            .collect();
        let found: Vec<(String, Flags)> = tools
            .iter()
            .map(|t| (t["name"].as_str().unwrap_or_default().to_owned(), flags(t, &others)))
            .collect();
        let flagged: Vec<_> = found.iter().filter(|(_, (held, _))| !held.is_empty()).collect();
        let named: Vec<String> = found
            .iter()
            .filter_map(|(tool, (_, named))| Some(format!("{tool}: {}", named.as_ref()?)))
            .collect();
        eprintln!("| {server} | {} | {} | {} |", tools.len(), flagged.len(), named.len());
        warned.extend(named);
        assert!(flagged.is_empty(), "{server}: {flagged:?}");
        total += tools.len();
    }
    assert_eq!(total, 232);
    // The one real pointer to a tool another server serves: a warning, not a hold.
    assert_eq!(warned, vec!["label_write: it names `update_issue`, a tool of another server"]);
}
