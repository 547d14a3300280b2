//! Response projection on recorded GitHub and GitLab shapes (`tests/data/`): opt-in groups left
//! out and asked back (by `fields` or by intent), kept groups protecting shared paths, the `max_kb`
//! cap, and results that have nothing to project.

use quiver_core::response_projection::{estimate_tokens, project, Projected, Requested};
use quiver_core::ToolValueModel;
use serde_json::{json, Value};

macro_rules! fixture {
    ($path:literal) => {
        serde_json::from_str::<Value>(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/",
            $path
        )))
        .expect(concat!("valid JSON in tests/data/", $path))
    };
}

fn model(v: Value) -> ToolValueModel {
    serde_json::from_value(v).expect("a valid test model")
}

fn fields(names: &[&str]) -> Requested {
    Requested {
        fields: Some(names.iter().map(|s| (*s).to_owned()).collect()),
        ..Requested::default()
    }
}

fn intent(words: &[&str]) -> Requested {
    Requested {
        intent_keywords: words.iter().map(|s| (*s).to_owned()).collect(),
        ..Requested::default()
    }
}

/// Every projected value must serialize to JSON that parses back to itself.
fn assert_valid(out: &Projected) {
    let text = out.value.to_string();
    let back: Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(back, out.value);
    assert_eq!(out.tokens_after, estimate_tokens(&out.value));
}

/// GitHub's `get_issue` with the user's override `[tools."github.get_issue"]
/// field_groups.body.default_include = false`.
fn issue_model() -> ToolValueModel {
    model(json!({
        "value_class": "critical",
        "field_groups": {"body": {"fields": ["body"], "estimated_value": 0.8, "default_include": false}},
        "cost_model": {"typical_kb": 2.5, "max_kb": 36.0},
    }))
}

#[test]
fn an_opt_in_body_is_left_out_and_the_note_says_how_to_ask() {
    let issue = fixture!("github/issue.json");
    let out = project(issue.clone(), &issue_model(), &Requested::default());
    assert_valid(&out);
    assert!(out.value.get("body").is_none());
    assert_eq!(out.value["title"], issue["title"], "fields in no group are kept");
    assert_eq!(out.value["user"], issue["user"]);
    assert_eq!(out.dropped_groups, ["body"]);
    assert_eq!(out.note.as_deref(), Some(r#"left out: body (ask with "fields": ["body"])"#));
    assert!(!out.cut);
    assert!(out.tokens_after < out.tokens_before);
}

#[test]
fn asking_for_the_group_keeps_it() {
    let issue = fixture!("github/issue.json");
    for asked in [fields(&["body"]), fields(&[" Body "]), fields(&["$.body"])] {
        let out = project(issue.clone(), &issue_model(), &asked);
        assert_eq!(out.value, issue, "{asked:?}");
        assert_eq!(
            (out.note, out.dropped_groups.len(), out.tokens_after),
            (None, 0, out.tokens_before)
        );
    }
    // Asking by a field path's last name works for nested paths too.
    let comments = json!({"comments": fixture!("github/pull_request_review_comments.json")});
    let review = review_comments_model();
    let out = project(comments.clone(), &review, &fields(&["diff_hunk"]));
    assert_eq!(out.value, comments);
    let out = project(comments.clone(), &review, &fields(&["comments[*].diff_hunk"]));
    assert_eq!(out.value, comments);
}

#[test]
fn an_intent_keyword_in_a_group_path_keeps_it() {
    let issue = fixture!("github/issue.json");
    let out = project(issue.clone(), &issue_model(), &intent(&["what does the BODY say"]));
    assert!(out.value.get("body").is_none(), "a whole sentence is not a keyword");
    let out = project(issue.clone(), &issue_model(), &intent(&["crash", "BODY"]));
    assert_eq!(out.value, issue);
    let out = project(issue.clone(), &issue_model(), &intent(&["  ", ""]));
    assert!(out.value.get("body").is_none(), "blank keywords match nothing");
}

/// GitHub's own model for `list_pull_request_review_comments`, on the provider's envelope.
fn review_comments_model() -> ToolValueModel {
    model(json!({
        "value_class": "supporting",
        "field_groups": {"diff_hunk": {"fields": ["comments[*].diff_hunk"], "estimated_value": 0.3, "default_include": false}},
        "cost_model": {"max_kb": 260.0},
    }))
}

#[test]
fn paths_into_every_item_of_a_list() {
    let comments = json!({"comments": fixture!("github/pull_request_review_comments.json")});
    let out = project(comments.clone(), &review_comments_model(), &Requested::default());
    assert_valid(&out);
    for c in out.value["comments"].as_array().unwrap() {
        assert!(c.get("diff_hunk").is_none());
        assert!(c.get("body").is_some() && c.get("path").is_some());
    }
    assert_eq!(out.dropped_groups, ["diff_hunk"]);

    // A raw list (GitHub's issue list as it comes off the wire): `[*].body`.
    let issues = fixture!("github/issues_list.json");
    let m = model(json!({"value_class": "supporting",
        "field_groups": {"body": {"fields": ["[*].body"], "default_include": false}}}));
    let out = project(issues.clone(), &m, &Requested::default());
    assert_valid(&out);
    let items = out.value.as_array().unwrap();
    assert_eq!(items.len(), issues.as_array().unwrap().len());
    assert!(items.iter().all(|i| i.get("body").is_none() && i.get("number").is_some()));
}

#[test]
fn gitlab_merge_request_drops_diff_refs_and_keeps_the_default_groups() {
    // GitLab's own model for `get_merge_request`.
    let m = model(json!({
        "value_class": "critical",
        "field_groups": {
            "description": {"fields": ["description"], "estimated_value": 0.7, "default_include": true},
            "merge_state": {"fields": ["detailed_merge_status", "has_conflicts",
                "blocking_discussions_resolved", "head_pipeline", "can_merge"], "estimated_value": 0.8},
            "diff_refs": {"fields": ["diff_refs"], "estimated_value": 0.2, "default_include": false},
        },
        "cost_model": {"typical_kb": 2.5, "max_kb": 36.0, "freshness_ttl_s": 30},
    }));
    let mr = fixture!("gitlab/merge_request.json");
    let out = project(mr.clone(), &m, &Requested::default());
    assert_valid(&out);
    assert!(out.value.get("diff_refs").is_none());
    assert_eq!(out.value["description"], mr["description"]);
    assert_eq!(out.value["head_pipeline"], mr["head_pipeline"]);
    assert_eq!(
        out.note.as_deref(),
        Some(r#"left out: diff_refs (ask with "fields": ["diff_refs"])"#)
    );
    // "diff" is contained in the path `diff_refs`: the intent brings the group back.
    let out = project(mr.clone(), &m, &intent(&["diff"]));
    assert_eq!(out.value, mr);
}

#[test]
fn a_kept_group_keeps_what_a_dropped_group_also_names() {
    let pr = fixture!("github/pull_request.json");
    let m = model(json!({
        "value_class": "critical",
        "field_groups": {
            "text": {"fields": ["body", "title"], "default_include": false},
            "headline": {"fields": ["title", "number"]},
            "refs": {"fields": ["head", "base"], "default_include": false},
            "head_sha": {"fields": ["head.sha"], "default_include": true},
            "users": {"fields": ["user"], "default_include": true},
            "user_urls": {"fields": ["user.url", "user.html_url", "user.avatar_url"], "default_include": false},
        },
    }));
    let out = project(pr.clone(), &m, &Requested::default());
    assert_valid(&out);
    let v = &out.value;
    assert!(v.get("body").is_none());
    assert_eq!(v["title"], pr["title"], "the same path in a kept group");
    assert!(v.get("base").is_none());
    assert_eq!(v["head"], json!({"sha": pr["head"]["sha"]}), "a kept path below a dropped one");
    assert_eq!(v["user"], pr["user"], "a kept ancestor keeps its whole subtree");
    assert_eq!(out.dropped_groups, ["refs", "text"], "user_urls removed nothing");
    assert_eq!(
        out.note.as_deref(),
        Some(r#"left out: refs, text (ask with "fields": ["refs", "text"])"#)
    );
}

#[test]
fn unknown_or_broken_field_names_are_ignored() {
    let issue = fixture!("github/issue.json");
    let m = model(json!({"value_class": "critical", "field_groups": {
        "body": {"fields": ["body"], "default_include": false},
        "broken": {"fields": ["labels[", "[x]", ""], "default_include": false},
    }}));
    let expected = project(issue.clone(), &m, &Requested::default());
    let out = project(issue.clone(), &m, &fields(&["nope", "labels[", "", "[*]", "$"]));
    assert_eq!(out, expected);
    assert_eq!(out.dropped_groups, ["body"], "a group whose paths do not parse removes nothing");
    let out = project(issue, &m, &Requested { fields: Some(vec![]), ..Requested::default() });
    assert_eq!(out, expected);
}

#[test]
fn results_that_are_not_objects_pass_through() {
    let m = issue_model();
    for v in [
        json!("plain text log"),
        json!(42),
        json!(null),
        json!(true),
        json!([1, 2, 3]),
        fixture!("gitlab/pipelines_list.json"),
    ] {
        let out = project(v.clone(), &m, &Requested::default());
        assert_eq!(out.value, v);
        assert_eq!((out.note, out.cut, out.tokens_before), (None, false, out.tokens_after));
        assert!(out.dropped_groups.is_empty());
    }
}

/// A page of 30 issues in the raw GitHub shape: the recorded 4, repeated with new numbers.
fn thirty_issues() -> Value {
    let recorded = fixture!("github/issues_list.json");
    let recorded = recorded.as_array().unwrap();
    let items: Vec<Value> = (0..30)
        .map(|i| {
            let mut item = recorded[i % recorded.len()].clone();
            item["number"] = json!(2000 + i);
            item
        })
        .collect();
    json!({"repository": "octocat/Hello-World", "issues": items})
}

#[test]
fn the_cap_cuts_the_largest_list_from_its_end_and_says_so() {
    let page = thirty_issues();
    let m = model(json!({"value_class": "supporting",
        "field_groups": {"body": {"fields": ["issues[*].body"], "default_include": true}},
        "cost_model": {"max_kb": 24.0}}));
    let out = project(page.clone(), &m, &Requested::default());
    assert_valid(&out);
    assert!(out.cut);
    assert!(out.value.to_string().len() <= 24 * 1024);
    // Every issue is still named — the number the next call needs — but only the first ones
    // whole: the list is cut from its end.
    let items = out.value["issues"].as_array().unwrap();
    assert_eq!(items.len(), 30);
    let whole = items.iter().take_while(|i| i.get("title").is_some()).count();
    assert!(whole < 30 && whole > 1, "{whole}");
    assert_eq!(items[..whole], page["issues"].as_array().unwrap()[..whole], "cut from the end");
    for (i, slim) in items[whole..].iter().enumerate() {
        assert_eq!(slim["number"], json!(2000 + whole + i));
        assert!(slim.as_object().unwrap().keys().all(|k| ["id", "number"].contains(&k.as_str())));
    }
    assert_eq!(out.value["repository"], "octocat/Hello-World");
    let slimmed = 30 - whole;
    assert_eq!(
        out.note,
        Some(format!(
            "cut to 24 KiB: issues: the last {slimmed} of 30 items only by what names them (sha, \
             number, id, path, name; read one with its own call, or ask for fewer per page)"
        ))
    );
    assert!(out.tokens_after < out.tokens_before);
    let kept = whole;

    // Left-out groups and the cut share one note; dropping first leaves more items.
    let m = model(json!({"value_class": "supporting",
        "field_groups": {"api_urls": {"fields": ["issues[*].url", "issues[*].repository_url",
            "issues[*].labels_url", "issues[*].comments_url", "issues[*].events_url",
            "issues[*].timeline_url", "issues[*].node_id"], "default_include": false}},
        "cost_model": {"max_kb": 24.0}}));
    let out = project(page, &m, &Requested::default());
    assert_valid(&out);
    let items = out.value["issues"].as_array().unwrap();
    let more = items.iter().take_while(|i| i.get("title").is_some()).count();
    assert!(more > kept, "{more} > {kept}");
    assert!(out.note.as_deref().unwrap().starts_with(&format!(
        r#"left out: api_urls (ask with "fields": ["api_urls"]); cut to 24 KiB: issues: the last {} of 30 items"#,
        30 - more
    )));
}

#[test]
fn a_long_string_is_truncated_rather_than_its_field_removed() {
    // Three issues whose bodies are 20 KiB each; a cap of 8 KiB cannot keep even one whole issue.
    let mut page = thirty_issues();
    let issues = page["issues"].as_array_mut().unwrap();
    issues.truncate(3);
    for issue in issues.iter_mut() {
        issue["body"] = json!("Stack trace line: at retry (src/net/retry.rs:42)\n".repeat(420));
    }
    let m = model(json!({"value_class": "supporting",
        "field_groups": {"body": {"fields": ["issues[*].body"], "default_include": true}},
        "cost_model": {"max_kb": 8}}));
    let out = project(page, &m, &Requested::default());
    assert_valid(&out);
    assert!(out.value.to_string().len() <= 8 * 1024, "{}", out.value.to_string().len());
    // The first issue keeps its (cut) body; the other two only their names.
    let issues = out.value["issues"].as_array().unwrap();
    assert_eq!(issues.len(), 3);
    let body = issues[0]["body"].as_str().expect("the body field is still there");
    assert!(body.starts_with("Stack trace line") && body.contains("…[+"), "{body:.80}");
    assert!(issues[1].get("body").is_none() && issues[2]["number"].is_number(), "{issues:?}");
    let note = out.note.unwrap();
    assert!(
        note.starts_with("cut to 8 KiB: issues: the last 2 of 3 items only by what names them"),
        "{note}"
    );
    assert!(note.contains(", issues[0].body 20580 → "), "{note}");
}

#[test]
fn a_gitlab_diff_list_keeps_every_diff_field_under_a_tight_cap() {
    // GitLab's `get_merge_request_changes` model on the raw `/diffs` list: a small diff, one past
    // 24 KiB, a binary rename.
    let diffs = fixture!("gitlab/merge_request_diffs.json");
    for max_kb in [4, 8, 16] {
        let m = model(json!({"value_class": "critical",
            "field_groups": {"diff": {"fields": ["[*].diff"], "estimated_value": 0.8}},
            "cost_model": {"max_kb": max_kb}}));
        let out = project(diffs.clone(), &m, &Requested::default());
        assert_valid(&out);
        assert!(out.cut);
        let len = out.value.to_string().len();
        assert!(len <= max_kb * 1024, "{len}");
        // The long diff is trimmed inside its item rather than dropped with it.
        assert!(len > max_kb * 1024 / 2, "over-cut to {len} bytes for {max_kb} KiB");
        let items = out.value.as_array().unwrap();
        assert!(items.len() >= 2);
        assert!(items.iter().all(|d| d.get("diff").is_some_and(Value::is_string)));
        assert_eq!(items[..1], diffs.as_array().unwrap()[..1]);
        assert!(items[1]["diff"].as_str().unwrap().contains("…[+"));
        assert_eq!(items[1]["new_path"], diffs[1]["new_path"]);
        let note = out.note.unwrap();
        assert!(
            note.starts_with(&format!("cut to {max_kb} KiB: "))
                && note.contains("[1].diff 24998 → "),
            "{note}"
        );
    }
}

#[test]
fn a_huge_plain_string_result_is_cut_too() {
    let log = json!("##[error]Process completed with exit code 1.\n".repeat(3000));
    let m = model(json!({"value_class": "critical", "cost_model": {"max_kb": 2}}));
    let out = project(log, &m, &Requested::default());
    assert_valid(&out);
    assert!(out.value.to_string().len() <= 2048);
    assert!(out.note.as_deref().unwrap().starts_with("cut to 2 KiB: result 135000 → "));
}

#[test]
fn a_result_with_nothing_to_cut_says_so() {
    let wide: serde_json::Map<String, Value> =
        (0..400).map(|i| (format!("k{i}"), json!(i))).collect();
    let wide = Value::Object(wide);
    let m = model(json!({"value_class": "supporting", "cost_model": {"max_kb": 1}}));
    let out = project(wide.clone(), &m, &Requested::default());
    assert_eq!(out.value, wide);
    assert!(!out.cut);
    assert_eq!(out.note.as_deref(), Some("5 KiB, over the 1 KiB cap: nothing to cut"));
}

#[test]
fn fractional_caps_and_caps_that_are_not_sizes() {
    let page = thirty_issues();
    let m = model(json!({"value_class": "supporting", "cost_model": {"max_kb": 1.5}}));
    let out = project(page.clone(), &m, &Requested::default());
    assert_valid(&out);
    assert!(out.value.to_string().len() <= 1536);
    assert!(out.note.unwrap().starts_with("cut to 1.5 KiB: "));
    let mut m = model(json!({"value_class": "supporting"}));
    for bad in [0.0, -1.0, f64::NAN] {
        m.cost_model.max_kb = Some(bad);
        assert_eq!(project(page.clone(), &m, &Requested::default()).value, page);
    }
}

#[test]
fn the_fields_argument_is_read_unless_the_tool_owns_it() {
    let args = json!({"number": 7, "fields": ["body", 3, "stats"]});
    let r = Requested::from_arguments(&args, None, vec!["retry".into()]);
    assert_eq!(r.fields, Some(vec!["body".to_owned(), "stats".to_owned()]));
    assert_eq!(r.intent_keywords, ["retry"]);
    let r = Requested::from_arguments(&json!({"fields": "body, stats,"}), None, vec![]);
    assert_eq!(r.fields, Some(vec!["body".to_owned(), "stats".to_owned()]));
    assert_eq!(Requested::from_arguments(&json!({"number": 7}), None, vec![]).fields, None);
    let jira = json!({"properties": {"jql": {}, "fields": {"type": "array"}}});
    assert_eq!(Requested::from_arguments(&args, Some(&jira), vec![]).fields, None);
}

#[test]
fn projection_is_deterministic() {
    let page = thirty_issues();
    let m = model(json!({"value_class": "supporting",
        "field_groups": {"body": {"fields": ["issues[*].body"], "default_include": false}},
        "cost_model": {"max_kb": 10}}));
    let a = project(page.clone(), &m, &Requested::default());
    let b = project(page, &m, &Requested::default());
    assert_eq!(a, b);
}
