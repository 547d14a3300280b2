//! What stands between stdin/stdout and the MCP service on stdio, so that every JSON-RPC
//! request gets exactly one answer: a line that is not JSON gets `-32700`; a batch, a message
//! that is not a JSON-RPC 2.0 request, notification or response, or a method that is not a string
//! gets `-32600`; `params` that are not an object (or a `tools/call` without a string `name`, or
//! with `arguments` that are not an object) get `-32602` — each with the request's `id` when it
//! has a usable one, else `null` (JSON-RPC 2.0 §5). Notifications never get an answer. Every other
//! line goes to the service unchanged, and every line either writes goes out whole.
//!
//! rmcp itself ignores unparsable lines (to avoid error storms between two peers answering each
//! other's garbage); a server answering a client is not at risk of that, and a client waiting on
//! an id it will never hear about is worse.
//!
//! It also applies backpressure: at most [`MAX_IN_FLIGHT`] requests are with the service at once
//! (a request leaves when its answer goes out, or when the client cancels it), and answers wait
//! in a bounded queue for stdout. A client that sends requests and never reads its answers stops
//! being read; memory stays bounded whatever it does.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde::de::IgnoredAny;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Semaphore};

/// Lines waiting for stdout; past it, the service and the guard wait for the client to read.
const OUTGOING_LINES: usize = 64;
/// Bytes in flight between the guard and the service in each direction.
const PIPE_BYTES: usize = 256 * 1024;
/// Client requests the service works on at once; more wait, unread, in stdin.
pub(crate) const MAX_IN_FLIGHT: usize = 64;
/// How long requests in flight may still be answered after the client closes stdin.
const DRAIN_AT_END: std::time::Duration = std::time::Duration::from_secs(5);

/// What the guard makes of a line from the client.
#[derive(Debug, PartialEq)]
pub(crate) enum Checked {
    /// Malformed: this answer goes back, the line goes no further.
    Answer(Value),
    /// A malformed notification: dropped without an answer.
    Drop,
    /// For the service. `request`: the id of a request (it will be answered); `cancels`: the
    /// id a `notifications/cancelled` gives up on.
    Pass { request: Option<String>, cancels: Option<String> },
}

/// What to do with a line from the client: the answer to a malformed one ([`check`]), or what a
/// passing one means for the requests in flight. The line is parsed once.
pub(crate) fn classify(line: &str) -> Checked {
    let message: Value = match serde_json::from_str(line) {
        Ok(message) => message,
        Err(e) => return Checked::Answer(error(Value::Null, -32700, &format!("Parse error: {e}"))),
    };
    if let Some(answer) = check(&message) {
        return Checked::Answer(answer);
    }
    let Value::Object(fields) = &message else {
        return Checked::Drop;
    };
    let method = fields.get("method").and_then(Value::as_str);
    if method.is_none() && fields.contains_key("method") {
        return Checked::Drop;
    }
    let request = method.and(fields.get("id")).map(Value::to_string);
    let cancels = (method == Some("notifications/cancelled"))
        .then(|| fields.get("params")?.get("requestId").map(Value::to_string))
        .flatten();
    Checked::Pass { request, cancels }
}

/// The id of an answer the service wrote (a line with an `id` and no `method`).
fn answer_id(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Probe {
        id: Option<Value>,
        method: Option<IgnoredAny>,
    }
    let probe: Probe = serde_json::from_slice(line).ok()?;
    match (probe.id, probe.method) {
        (Some(id), None) => Some(id.to_string()),
        _ => None,
    }
}

/// The client requests the service has not answered yet, and the permits that bound them.
struct InFlight {
    ids: Mutex<HashSet<String>>,
    permits: Semaphore,
}

impl InFlight {
    /// The request `id` is answered or cancelled: its place is free.
    fn done(&self, id: &str) {
        if self.ids.lock().unwrap_or_else(|e| e.into_inner()).remove(id) {
            self.permits.add_permits(1);
        }
    }
}

/// The error answer to a malformed message, or `None` when it is to be passed on (or is a
/// notification, which gets no answer even when it is malformed).
fn check(message: &Value) -> Option<Value> {
    let Value::Object(fields) = message else {
        let why = if message.is_array() {
            "Invalid Request: batches are not part of MCP; send one request per message"
        } else {
            "Invalid Request: a message is a JSON object"
        };
        return Some(error(Value::Null, -32600, why));
    };
    let id = match fields.get("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id.clone()),
        Some(_) => {
            return Some(error(
                Value::Null,
                -32600,
                "Invalid Request: `id` is a string or a number",
            ))
        }
    };
    let answer = |code: i64, why: &str| id.clone().map(|id| error(id, code, why));
    if fields.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        let why = "Invalid Request: `jsonrpc` must be \"2.0\"";
        return match (&id, fields.contains_key("method")) {
            (Some(id), _) => Some(error(id.clone(), -32600, why)),
            // A notification: no answer, even to say it is malformed.
            (None, true) => None,
            (None, false) => Some(error(Value::Null, -32600, why)),
        };
    }
    let Some(method) = fields.get("method") else {
        // A response to one of the server's requests.
        if id.is_some() && (fields.contains_key("result") || fields.contains_key("error")) {
            return None;
        }
        return Some(error(
            id.unwrap_or(Value::Null),
            -32600,
            "Invalid Request: neither a request (`method`) nor a response (`result` or `error`)",
        ));
    };
    let Some(method) = method.as_str() else {
        return answer(-32600, "Invalid Request: `method` must be a string");
    };
    match fields.get("params") {
        None | Some(Value::Object(_)) => {}
        Some(_) => return answer(-32602, "Invalid params: `params` must be an object"),
    }
    if method == "tools/call" {
        let params = fields.get("params");
        if params.and_then(|p| p.get("name")).and_then(Value::as_str).is_none() {
            return answer(-32602, "Invalid params: tools/call needs `name`, a string");
        }
        match params.and_then(|p| p.get("arguments")) {
            None | Some(Value::Object(_) | Value::Null) => {}
            Some(_) => return answer(-32602, "Invalid params: `arguments` must be an object"),
        }
    }
    None
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The service's side of the guard: what it reads (checked client lines), where it writes, and
/// a task that ends once every answer has been written out (wait for it before exiting, or the
/// last answers are cut off).
pub(crate) fn guard<R, W>(
    input: R,
    output: W,
) -> (
    impl AsyncRead + Send + Unpin + 'static,
    impl AsyncWrite + Send + Unpin + 'static,
    tokio::task::JoinHandle<()>,
)
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (service_reads, mut to_service) = tokio::io::duplex(PIPE_BYTES);
    let (from_service, service_writes) = tokio::io::duplex(PIPE_BYTES);
    let (outgoing, mut lines) = mpsc::channel::<Vec<u8>>(OUTGOING_LINES);
    let in_flight = Arc::new(InFlight {
        ids: Mutex::new(HashSet::new()),
        permits: Semaphore::new(MAX_IN_FLIGHT),
    });

    // stdout: whole lines, from the service and from the guard, in the order they come.
    let written = tokio::spawn(async move {
        let mut output = output;
        while let Some(line) = lines.recv().await {
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                return;
            }
        }
    });
    // The service's answers, line by line.
    let answers = outgoing.clone();
    let answered = Arc::clone(&in_flight);
    tokio::spawn(async move {
        let mut from_service = BufReader::new(from_service);
        loop {
            let mut line = Vec::new();
            match from_service.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let id = answer_id(&line);
                    if answers.send(line).await.is_err() {
                        return;
                    }
                    // Queued for stdout: the next request may go in.
                    if let Some(id) = id {
                        answered.done(&id);
                    }
                }
            }
        }
    });
    // stdin: checked; errors answered here, the rest passed on.
    tokio::spawn(async move {
        let mut input = BufReader::new(input);
        loop {
            let mut line = Vec::new();
            match input.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line);
            let trimmed = text.trim();
            if trimmed.is_empty() {
                continue;
            }
            match classify(trimmed) {
                Checked::Answer(answer) => {
                    let mut reply = answer.to_string().into_bytes();
                    reply.push(b'\n');
                    if outgoing.send(reply).await.is_err() {
                        break;
                    }
                }
                Checked::Drop => {}
                Checked::Pass { request, cancels } => {
                    if let Some(id) = cancels {
                        in_flight.done(&id);
                    }
                    if let Some(id) = request {
                        // Full: stop reading stdin until an answer goes out.
                        let Ok(permit) = in_flight.permits.acquire().await else { break };
                        permit.forget();
                        in_flight.ids.lock().unwrap_or_else(|e| e.into_inner()).insert(id);
                    }
                    if !line.ends_with(b"\n") {
                        line.push(b'\n');
                    }
                    if to_service.write_all(&line).await.is_err() {
                        break;
                    }
                }
            }
        }
        // The client has said all it will: its requests in flight are answered (for a while)
        // before the service sees the end of its input and stops.
        let all = u32::try_from(MAX_IN_FLIGHT).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(DRAIN_AT_END, in_flight.permits.acquire_many(all)).await;
        let _ = to_service.shutdown().await;
    });
    (service_reads, service_writes, written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &str) -> Option<(i64, Value)> {
        match classify(line) {
            Checked::Answer(e) => Some((e["error"]["code"].as_i64().unwrap(), e["id"].clone())),
            Checked::Drop | Checked::Pass { .. } => None,
        }
    }

    #[test]
    fn every_malformed_request_is_answered_with_its_code_and_id() {
        assert_eq!(code("{not json"), Some((-32700, Value::Null)));
        assert_eq!(
            code(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            Some((-32600, Value::Null))
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":2,"method":5}"#), Some((-32600, json!(2))));
        assert_eq!(code(r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#), Some((-32600, json!(3))));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":"4","method":"tools/list","params":"a string"}"#),
            Some((-32602, json!("4")))
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":123}}"#),
            Some((-32602, json!(5)))
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":[6],"method":"ping"}"#),
            Some((-32600, Value::Null))
        );
    }

    #[test]
    fn requests_and_cancellations_are_told_apart() {
        let request = classify(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#);
        assert_eq!(request, Checked::Pass { request: Some("7".into()), cancels: None });
        let cancel = classify(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#,
        );
        assert_eq!(cancel, Checked::Pass { request: None, cancels: Some("\"a\"".into()) });
        assert_eq!(answer_id(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#), Some("7".into()));
        assert_eq!(answer_id(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#), None);
        assert_eq!(classify(r#"{"jsonrpc":"2.0","method":5}"#), Checked::Drop);
    }

    #[test]
    fn good_messages_and_malformed_notifications_pass_without_an_answer() {
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#), None);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}"#),
            None
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":9,"result":{}}"#), None);
        assert_eq!(code(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), None);
        assert_eq!(code(r#"{"jsonrpc":"2.0","method":5}"#), None, "a notification gets no answer");
        assert_eq!(code(r#"{"jsonrpc":"2.0","method":"x","params":3}"#), None);
    }
}
