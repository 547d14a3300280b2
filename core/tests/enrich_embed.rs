//! The offline embedder on its own: unit vectors, the same vector for the same text in every
//! run and whatever else was embedded, identifiers split the way tool names are written, and
//! the alias table bridging the words developers use for the same thing.

use quiver_core::enrich::embed::{
    cosine, terms, tool_texts, LexicalEmbedder, ToolEmbedding, LEXICAL_DIMENSION, LEXICAL_MODEL_ID,
};
use quiver_core::ToolSpec;
use serde_json::json;

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

fn sim(a: &str, b: &str) -> f32 {
    let e = LexicalEmbedder::new();
    cosine(&e.embed(a), &e.embed(b))
}

#[test]
fn vectors_are_unit_length_and_fixed_size() {
    let e = LexicalEmbedder::new();
    assert_eq!(e.dimension(), LEXICAL_DIMENSION);
    assert!(LEXICAL_MODEL_ID.ends_with(&LEXICAL_DIMENSION.to_string()));
    for text in ["list issues", "github.get_pull_request", "x", "Transcripts of the weekly sync"] {
        let v = e.embed(text);
        assert_eq!(v.len(), LEXICAL_DIMENSION);
        assert!((norm(&v) - 1.0).abs() < 1e-5, "{text}: {}", norm(&v));
    }
    // Nothing that counts: the zero vector, whose cosine with anything is 0.
    let empty = e.embed("the of and ...");
    assert!(empty.iter().all(|&x| x == 0.0));
    assert_eq!(cosine(&empty, &e.embed("issues")), 0.0);
}

#[test]
fn a_vector_depends_only_on_its_own_text() {
    let text = "List a repository's pull requests, newest first";
    let fresh = LexicalEmbedder::new().embed(text);
    let e = LexicalEmbedder::new();
    for other in ["merge requests", "jira sprints", "transcripts"] {
        e.embed(other);
    }
    assert_eq!(e.embed(text), fresh, "bit for bit, whatever was embedded before");
    assert_eq!(e.embed(text), LexicalEmbedder::default().embed(text));
}

#[test]
fn identifiers_split_and_stem_like_prose() {
    assert_eq!(terms("list_pull_requests"), ["list", "pull", "request"]);
    assert_eq!(terms("getIssueComments"), ["get", "issu", "comment"]);
    assert_eq!(terms("HTTPServer PRs repos/{owner}"), ["http", "server", "prs", "repo", "owner"]);
    assert_eq!(terms("created creating creates"), ["creat", "creat", "creat"]);
    assert_eq!(terms("entries running committed"), ["entry", "run", "commit"]);
    assert!(sim("listPullRequests", "list pull requests") > 0.95);
    assert!(sim("github.get_issue", "get issue") > 0.8);
}

#[test]
fn aliases_bridge_words_for_the_same_thing() {
    let cases = [
        ("PR", "pull request", "meeting transcript"),
        ("MR", "merge request", "sprint board"),
        ("ticket", "issue", "pipeline"),
        ("bug", "issue", "transcript"),
        ("CI run", "pipeline", "comment"),
        ("repo", "project", "meeting"),
        ("comment", "discussion note", "workflow"),
        ("meeting", "call transcript", "repository"),
        ("card", "task", "merge request"),
        ("iteration", "sprint", "file"),
        ("owner", "assignee", "pipeline"),
    ];
    for (word, alias, unrelated) in cases {
        let (near, far) = (sim(word, alias), sim(word, unrelated));
        assert!(near > 0.2 && near > far + 0.15, "{word}: {alias} {near} vs {unrelated} {far}");
    }
}

#[test]
fn morphology_is_forgiving() {
    assert!(sim("pipelines", "pipeline") > 0.95);
    assert!(sim("transcripts", "transcript") > 0.95);
    assert!(sim("failing jobs", "failed job") > 0.6);
}

fn spec() -> ToolSpec {
    ToolSpec {
        name: "list_issues".into(),
        group: Some("issues".into()),
        description: "List a repository's issues.".into(),
        input_schema: json!({"type": "object", "properties": {
            "owner": {"type": "string", "description": "Repository owner."},
            "state": {"type": ["string", "null"]}}}),
        output_schema: Some(json!({"type": "object", "properties": {
            "issues": {"type": "array", "items": {"type": "object", "properties": {
                "number": {"type": "integer", "description": "The issue number."}}}}}})),
        sensitive_params: vec![],
    }
}

#[test]
fn tool_texts_name_everything_the_vectors_see() {
    let texts = tool_texts("github.list_issues", &spec());
    assert_eq!(
        texts.tool,
        "github.list_issues: List a repository's issues.\ninputs:\nowner: Repository owner.\nstate\n\
         outputs:\nissues[].number: The issue number."
    );
    assert_eq!(texts.inputs, "owner: Repository owner.\nstate");
    assert_eq!(texts.outputs.as_deref(), Some("issues[].number: The issue number."));
    let mut no_output = spec();
    no_output.output_schema = None;
    assert_eq!(tool_texts("github.list_issues", &no_output).outputs, None);
}

#[test]
fn tool_embeddings_have_unit_parts_and_round_trip() {
    let e = LexicalEmbedder::new();
    let emb = e.embed_tool("github.list_issues", &spec());
    assert!((norm(&emb.tool) - 1.0).abs() < 1e-5);
    assert!((norm(&emb.inputs) - 1.0).abs() < 1e-5);
    assert!((norm(emb.outputs.as_ref().unwrap()) - 1.0).abs() < 1e-5);
    let json = serde_json::to_string(&emb).unwrap();
    assert_eq!(serde_json::from_str::<ToolEmbedding>(&json).unwrap(), emb);
    // The name counts most: the tool is closer to its own name than to its parameters alone.
    let by_name = cosine(&emb.tool, &e.embed("list issues"));
    let by_param = cosine(&emb.tool, &e.embed("state"));
    assert!(by_name > by_param, "{by_name} {by_param}");
    let mut no_output = spec();
    no_output.output_schema = None;
    assert_eq!(e.embed_tool("github.list_issues", &no_output).outputs, None);
}
