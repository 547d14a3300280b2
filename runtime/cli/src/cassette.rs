//! The loopback service `quiver replay` points a provider at: it answers the REST requests the
//! real plugin makes with what the service answered in a recorded session.
//!
//! The cassette learns before it serves. For each recorded call it is told the answer (the
//! recorded result, turned back into the service's REST shape by [`rest_answer`]), the call is
//! made through the plugin, and every request the plugin sends meanwhile is remembered with
//! that answer — so the cassette speaks exactly the paths the plugin requests, whatever they
//! are. When serving, a request gets the answer recorded for it at the latest step of the session
//! not after the current one (a list read again after a write sees the later answer), else its
//! earliest; a request nothing was recorded for (a pre-fetch of a call the agent never made)
//! gets the service's 404 and is counted. Every request served is counted: the API requests a
//! replay costs.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use base64::Engine;
use quiver_core::session_cache::CallKey;
use quiver_core::ToolResult;
use quiver_runtime::recording::RecordedAnswers;
use serde_json::{json, Value};

/// One recorded answer, in the service's own form.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
}

impl Answer {
    fn json(status: u16, body: &Value) -> Self {
        Self { status, content_type: "application/json", body: body.to_string() }
    }

    fn not_found() -> Self {
        Self::json(
            404,
            &json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}),
        )
    }
}

/// One session's recorded answers by key (a request, a call), each at the step of the session it
/// was recorded at: a key gets the answer recorded for it at the latest step not after the
/// current one (a list read again after a write sees the later answer), else its earliest.
/// Every answer asked for is counted, and those nothing was recorded for apart.
pub(crate) struct StepTape<K, A> {
    recorded: HashMap<K, Vec<(usize, A)>>,
    /// The step of the session being replayed.
    step: usize,
    served: u64,
    unrecorded: u64,
}

impl<K, A> Default for StepTape<K, A> {
    fn default() -> Self {
        Self { recorded: HashMap::new(), step: 0, served: 0, unrecorded: 0 }
    }
}

impl<K: std::hash::Hash + Eq, A: Clone> StepTape<K, A> {
    /// Files `answer` for `key` at `step` (in place of one filed there before).
    pub(crate) fn record(&mut self, step: usize, key: K, answer: A) {
        let answers = self.recorded.entry(key).or_default();
        answers.retain(|(at, _)| *at != step);
        answers.push((step, answer));
        answers.sort_by_key(|(at, _)| *at);
    }

    /// Forgets every answer (between sessions: each has its own recording).
    pub(crate) fn clear(&mut self) {
        self.recorded.clear();
        self.step = 0;
    }

    /// The step of the session being replayed.
    pub(crate) fn at_step(&mut self, step: usize) {
        self.step = step;
    }

    /// The answer for `key` now, counted.
    pub(crate) fn answer(&mut self, key: &K) -> Option<A> {
        self.served += 1;
        let step = self.step;
        let found = self.recorded.get(key).and_then(|answers| {
            answers.iter().rev().find(|(at, _)| *at <= step).or(answers.first()).cloned()
        });
        if found.is_none() {
            self.unrecorded += 1;
        }
        found.map(|(_, answer)| answer)
    }

    /// Answers asked for so far, and how many of them had nothing recorded.
    pub(crate) fn served(&self) -> (u64, u64) {
        (self.served, self.unrecorded)
    }
}

#[derive(Default)]
struct Tapes {
    /// While learning: the answer every request gets, and the requests seen.
    learning: Option<(Answer, Vec<String>)>,
    /// Answers by request (requests made while learning are not counted).
    tape: StepTape<String, Answer>,
}

/// A running cassette.
#[derive(Clone)]
pub(crate) struct Cassette {
    tapes: Arc<Mutex<Tapes>>,
    address: SocketAddr,
}

/// The request as the cassette files it: method, the media type asked for unless JSON, path and
/// query with its parameters sorted.
fn request_key(request: &Request) -> String {
    let accept = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|a| !a.contains("json") && !a.contains("*/*"))
        .unwrap_or("");
    let path = request.uri().path();
    let mut query: Vec<&str> =
        request.uri().query().map(|q| q.split('&').collect()).unwrap_or_default();
    query.sort_unstable();
    format!("{} {accept} {path}?{}", request.method(), query.join("&"))
}

async fn answer(State(tapes): State<Arc<Mutex<Tapes>>>, request: Request) -> Response {
    let key = request_key(&request);
    let answer = {
        let mut tapes = tapes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((answer, seen)) = tapes.learning.as_mut() {
            seen.push(key);
            answer.clone()
        } else {
            tapes.tape.answer(&key).unwrap_or_else(Answer::not_found)
        }
    };
    Response::builder()
        .status(StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK))
        .header(header::CONTENT_TYPE, HeaderValue::from_static(answer.content_type))
        .body(Body::from(answer.body))
        .unwrap_or_default()
}

impl Cassette {
    /// Starts an empty cassette on a loopback port.
    pub(crate) async fn start() -> std::io::Result<Self> {
        let tapes = Arc::new(Mutex::new(Tapes::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let app = axum::Router::new().fallback(answer).with_state(Arc::clone(&tapes));
        tokio::spawn(async move {
            // Ends with the process; a replay has no other way out.
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { tapes, address })
    }

    /// The base URL to give the provider.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    fn tapes(&self) -> std::sync::MutexGuard<'_, Tapes> {
        self.tapes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// From now until [`Cassette::learned`], every request gets `answer`.
    pub(crate) fn learn(&self, answer: Answer) {
        self.tapes().learning = Some((answer, Vec::new()));
    }

    /// Files the answer being learned under every request seen since [`Cassette::learn`], at
    /// `step`; how many requests that was.
    pub(crate) fn learned(&self, step: usize) -> usize {
        let mut tapes = self.tapes();
        let Some((answer, seen)) = tapes.learning.take() else { return 0 };
        let count = seen.len();
        for key in seen {
            tapes.tape.record(step, key, answer.clone());
        }
        count
    }

    /// Forgets every recorded answer (between sessions: each has its own recording).
    pub(crate) fn clear(&self) {
        self.tapes().tape.clear();
    }

    /// The step of the session being replayed.
    pub(crate) fn at_step(&self, step: usize) {
        self.tapes().tape.at_step(step);
    }

    /// Requests served so far, and how many of them had nothing recorded.
    pub(crate) fn served(&self) -> (u64, u64) {
        self.tapes().tape.served()
    }
}

/// Results quiver recorded itself (`[telemetry] record_sessions`), answered where the host would
/// call a provider or an upstream ([`quiver_runtime::Host::answer_from`]): the recording already
/// holds what the provider returned, so nothing needs turning back into a service's shape. The
/// cassette's rules: a call gets the result recorded for it at the latest step not after the
/// current one, else its earliest; each answer counts as a request, and a call nothing was
/// recorded for is counted apart.
#[derive(Clone, Default)]
pub(crate) struct RecordedResults {
    tape: Arc<Mutex<StepTape<CallKey, ToolResult>>>,
}

impl RecordedResults {
    /// The results, for one step of the replay.
    pub(crate) fn tape(&self) -> std::sync::MutexGuard<'_, StepTape<CallKey, ToolResult>> {
        self.tape.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl RecordedAnswers for RecordedResults {
    fn answer(&self, key: &CallKey) -> Option<ToolResult> {
        self.tape().answer(key)
    }
}

/// Whether a recorded result is an answer the service gave (JSON, a file, a diff) rather than
/// the server's report of an error (plain text).
pub(crate) fn is_answer(blocks: &[Value]) -> bool {
    blocks.iter().any(|b| b.get("resource").is_some())
        || blocks.iter().find_map(|b| b.get("text").and_then(Value::as_str)).is_some_and(|t| {
            t.starts_with("diff ") || serde_json::from_str::<Value>(t.trim()).is_ok()
        })
}

/// The text of a recorded result's blocks, as the model read them: text blocks and embedded
/// resources' text, one per line.
pub(crate) fn blocks_text(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter_map(|b| {
            b.get("text")
                .and_then(Value::as_str)
                .or_else(|| b.get("resource").and_then(|r| r.get("text")).and_then(Value::as_str))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a recorded error says about the service's status: 404 for "not found", else the first
/// HTTP error code it names, else 422 (GitHub's "the request was understood and refused").
fn error_status(text: &str) -> u16 {
    let lower = text.to_ascii_lowercase();
    if lower.contains("not found") || lower.contains(": 404") {
        return 404;
    }
    for code in [400u16, 401, 403, 409, 410, 422, 500, 502, 503] {
        if lower.contains(&format!(" {code}")) {
            return code;
        }
    }
    422
}

/// The answer the service gave for a recorded call of `tool` (quiver's name, without the
/// provider) with `args` (quiver's arguments), from the result github-mcp-server returned.
/// The official server returns GitHub's REST objects as JSON text, which are served as they
/// are; the exceptions are turned back: a file (text plus an embedded resource) into the
/// contents API's object, its issue list (`{"issues": [...]}`, GraphQL's upper-case states and
/// plain label names) into REST issues, a job list wrapped in `{"jobs": ...}` unwrapped, and
/// the shorter forms some versions return (a file's text decoded in `content`, branches with a
/// bare `sha`) given the REST fields the plugin reads. A
/// result that is not JSON is a diff (served as text) or an error (served with the status it
/// names).
pub(crate) fn rest_answer(tool: &str, args: &Value, blocks: &[Value]) -> Answer {
    let text = blocks
        .iter()
        .find_map(|b| b.get("text").and_then(Value::as_str))
        .unwrap_or_default()
        .to_owned();
    let resource = blocks.iter().find_map(|b| b.get("resource"));
    if let (Some(resource), "get_file_contents") = (resource, tool) {
        return file_answer(args, &text, resource);
    }
    let parsed = serde_json::from_str::<Value>(text.trim()).ok();
    let Some(value) = parsed else {
        if tool == "get_pull_request_diff" && text.starts_with("diff ") {
            return Answer { status: 200, content_type: "text/plain", body: text };
        }
        let status = error_status(&text);
        return Answer::json(status, &json!({"message": text}));
    };
    let value = match (tool, value) {
        ("list_issues", Value::Object(mut page))
            if page.get("issues").is_some_and(Value::is_array) =>
        {
            let issues = page.remove("issues").unwrap_or_default();
            Value::Array(issues.as_array().into_iter().flatten().cloned().map(rest_issue).collect())
        }
        ("list_workflow_jobs", Value::Object(mut page))
            if page.get("jobs").is_some_and(Value::is_object) =>
        {
            page.remove("jobs").unwrap_or_default()
        }
        ("list_branches", Value::Array(branches)) => Value::Array(
            // Some versions of the server return `{name, sha, protected}`.
            branches
                .into_iter()
                .map(|mut branch| {
                    if branch.get("commit").is_none() {
                        if let Some(sha) = branch.get("sha").cloned() {
                            branch["commit"] = json!({"sha": sha});
                        }
                    }
                    branch
                })
                .collect(),
        ),
        ("get_file_contents", Value::Object(mut file))
            if file.get("encoding").and_then(Value::as_str) != Some("base64")
                || file.get("content").and_then(Value::as_str).is_some_and(|c| {
                    base64::engine::general_purpose::STANDARD.decode(c.replace('\n', "")).is_err()
                }) =>
        {
            // Some versions of the server return the file's text decoded in `content`.
            if let Some(Value::String(text)) = file.get("content") {
                let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
                file.insert("content".into(), Value::String(encoded));
                file.insert("encoding".into(), json!("base64"));
                file.entry("type").or_insert(json!("file"));
            }
            Value::Object(file)
        }
        (_, value) => value,
    };
    Answer::json(200, &value)
}

/// A GraphQL-shaped issue of github-mcp-server's list as the REST API returns it.
fn rest_issue(mut issue: Value) -> Value {
    if let Some(state) = issue.get("state").and_then(Value::as_str) {
        issue["state"] = json!(state.to_ascii_lowercase());
    }
    if let Some(labels) = issue.get("labels").and_then(Value::as_array) {
        let labels: Vec<Value> = labels
            .iter()
            .map(|l| match l {
                Value::String(name) => json!({"name": name}),
                other => other.clone(),
            })
            .collect();
        issue["labels"] = Value::Array(labels);
    }
    if issue.get("user").is_none() {
        if let Some(author) = issue.get("author").cloned() {
            issue["user"] = author;
        }
    }
    issue
}

/// The contents API's object for a file github-mcp-server returned as text plus a resource.
fn file_answer(args: &Value, text: &str, resource: &Value) -> Answer {
    let path = args.get("path").and_then(Value::as_str).unwrap_or_default();
    let sha = text
        .split("SHA: ")
        .nth(1)
        .map(|rest| rest.chars().take_while(char::is_ascii_hexdigit).collect::<String>())
        .unwrap_or_default();
    let bytes = match (resource.get("text"), resource.get("blob")) {
        (Some(Value::String(text)), _) => text.as_bytes().to_vec(),
        (_, Some(Value::String(blob))) => {
            base64::engine::general_purpose::STANDARD.decode(blob).unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let name = path.rsplit('/').next().unwrap_or(path);
    Answer::json(
        200,
        &json!({
            "type": "file",
            "encoding": "base64",
            "size": bytes.len(),
            "name": name,
            "path": path,
            "sha": sha,
            "content": base64::engine::general_purpose::STANDARD.encode(&bytes),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_comes_back_as_the_contents_api_object() {
        let blocks = vec![
            json!({"type": "text", "text": "successfully downloaded text file (SHA: ab12cd)"}),
            json!({"type": "resource", "resource": {"uri": "repo://o/r/contents/a.md", "text": "# Hi\n"}}),
        ];
        let answer = rest_answer("get_file_contents", &json!({"path": "docs/a.md"}), &blocks);
        let body: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!((body["name"].as_str(), body["sha"].as_str()), (Some("a.md"), Some("ab12cd")));
        let content = base64::engine::general_purpose::STANDARD
            .decode(body["content"].as_str().unwrap())
            .unwrap();
        assert_eq!(content, b"# Hi\n");
    }

    #[test]
    fn graphql_issues_become_rest_issues_and_errors_keep_their_status() {
        let blocks = vec![json!({"type": "text", "text": json!({
            "issues": [{"number": 3, "state": "CLOSED", "labels": ["bug"], "author": {"login": "a"}}],
            "pageInfo": {}
        }).to_string()})];
        let answer = rest_answer("list_issues", &json!({}), &blocks);
        let body: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(
            body,
            json!([{"number": 3, "state": "closed", "labels": [{"name": "bug"}],
                    "author": {"login": "a"}, "user": {"login": "a"}}])
        );
        let missing = vec![
            json!({"type": "text", "text": "failed to get file: GET https://api.github.com/repos/o/r/contents/x: 404 Not Found []"}),
        ];
        assert_eq!(rest_answer("get_file_contents", &json!({}), &missing).status, 404);
    }
}
