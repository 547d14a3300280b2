//! The token figure: a GitHub issue list and a GitLab merge request discussion cost the model at
//! least 70 % fewer tokens than the raw API responses, and every field an agent needs to act on
//! them is still there — checked item by item against the recorded responses.

#[path = "../benches/common/tokens.rs"]
mod payloads;

use quiver_core::response_projection::{project, Requested};
use quiver_tests::plugins_dir;
use serde_json::Value;

fn strings(values: Option<&Value>, key: &str) -> Vec<String> {
    let items = values.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    items.iter().filter_map(|v| v[key].as_str()).map(str::to_owned).collect()
}

fn names(values: Option<&Value>) -> Vec<String> {
    let items = values.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    items.iter().filter_map(Value::as_str).map(str::to_owned).collect()
}

/// Every issue (pull requests are left out of an issue list, and counted) keeps its number,
/// title, state, labels, assignees, author, comment count and last update.
fn check_issue_list(raw: &Value, projected: &Value) {
    let listed = projected["issues"].as_array().expect("issues");
    let (issues, pulls): (Vec<&Value>, Vec<&Value>) =
        raw.as_array().unwrap().iter().partition(|i| i.get("pull_request").is_none());
    assert_eq!(listed.len(), issues.len(), "{projected}");
    assert_eq!(projected["pull_requests_skipped"], pulls.len(), "{projected}");
    for issue in issues {
        let got = listed.iter().find(|i| i["number"] == issue["number"]).expect("every issue");
        for key in ["title", "state", "comments", "updated_at"] {
            assert_eq!(got[key], issue[key], "{key} of {got}");
        }
        assert_eq!(got["author"], issue["user"]["login"], "{got}");
        assert_eq!(names(got.get("labels")), strings(issue.get("labels"), "name"), "{got}");
        assert_eq!(names(got.get("assignees")), strings(issue.get("assignees"), "login"), "{got}");
    }
}

/// Every thread that is not a system note keeps its id (to reply to it), whether it is resolved,
/// the file and line it is about, and each note's author and text.
fn check_discussion(raw: &Value, projected: &Value) {
    let threads = projected["discussions"].as_array().expect("discussions");
    let human: Vec<&Value> = raw
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["notes"].as_array().unwrap().iter().any(|n| n["system"] == false))
        .collect();
    assert_eq!(threads.len(), human.len(), "{projected}");
    let open = human
        .iter()
        .filter(|d| {
            let notes = d["notes"].as_array().unwrap();
            notes.iter().any(|n| n["resolvable"] == true && n["resolved"] != true)
        })
        .count();
    assert_eq!(projected["unresolved"], open, "{projected}");
    for thread in human {
        let got = threads.iter().find(|d| d["id"] == thread["id"]).expect("every thread");
        let notes = thread["notes"].as_array().unwrap();
        let resolvable: Vec<&Value> = notes.iter().filter(|n| n["resolvable"] == true).collect();
        if !resolvable.is_empty() {
            let resolved = resolvable.iter().all(|n| n["resolved"] == true);
            assert_eq!(got["resolved"], resolved, "{got}");
        }
        if let Some(position) = notes[0].get("position").filter(|p| !p.is_null()) {
            assert_eq!(got["path"], position["new_path"], "{got}");
            assert_eq!(got["line"], position["new_line"], "{got}");
        }
        let bodies: Vec<(&Value, &Value)> =
            notes.iter().map(|n| (&n["author"]["username"], &n["body"])).collect();
        let kept: Vec<(&Value, &Value)> =
            got["notes"].as_array().unwrap().iter().map(|n| (&n["author"], &n["body"])).collect();
        assert_eq!(kept, bodies, "{got}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn issue_lists_and_discussions_cost_70_percent_fewer_tokens_with_what_matters_intact() {
    let plugins = plugins_dir(&["quiver-provider-github", "quiver-provider-gitlab"]);
    let measured = payloads::measure(plugins.path()).await;
    assert_eq!(measured.len(), 2);
    check_issue_list(&measured[0].raw, &measured[0].projected);
    check_discussion(&measured[1].raw, &measured[1].projected);
    for m in &measured {
        assert!(
            m.saved_vs_raw() >= 70.0,
            "{}: raw {} → provider {} → projected {} tokens, only {:.1} % fewer ({:.1} % by \
             projection)",
            m.name,
            m.raw_tokens,
            m.provider_tokens,
            m.projected_tokens,
            m.saved_vs_raw(),
            m.saved_by_projection()
        );
        // The session's projection is the provider's result trimmed by the tool's field groups.
        let again = project(m.provider.clone(), &m.model, &Requested::default());
        assert_eq!(again.value, m.projected, "{}", m.name);
    }
}
