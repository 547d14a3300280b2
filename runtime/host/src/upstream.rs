//! Upstream MCP servers: other servers' tools served beside the plugins', through the same
//! pipeline.
//!
//! Each `[[upstreams]]` entry gets one supervised client ([`Upstream`]) on its own task: it starts
//! the server (a child process speaking MCP over stdio), negotiates the newest protocol revision
//! both sides know (`server/discover` on 2026-07-28, `initialize` for older servers), lists its
//! tools and lists them again when the server says they changed. A server that fails to start,
//! crashes or hangs is reported with its reason (the state is data `doctor`, `plugins` and the
//! MCP server read), its tools answer with a clear error, and it is restarted with exponential
//! backoff; the other upstreams and the plugins keep serving.
//!
//! Child processes never outlive quiver: each runs in its own process group, killed when its
//! client is dropped, when quiver exits ([`Upstreams::kill_all`], also from a panic hook) and when
//! the client of `quiver serve` disconnects (the server exits, and with it every child). A
//! `kill -9` of quiver itself cannot be caught: its children then see their stdin close, which
//! ends every well-behaved stdio server.
//!
//! **Environment**: a child inherits quiver's environment *minus* every variable that looks like
//! a credential (`*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*_KEY`, …), so the GitHub token quiver
//! holds does not reach a filesystem server; `env = [...]` passes named variables through (their
//! values are masked in every log), `set_env` sets literal ones.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use quiver_core::{Content, ToolErrorKind, ToolName, ToolResult, ToolSpec};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientConfig, ClientNotification, ClientRequest, Implementation, ProgressNotificationParam,
    ProgressToken, ProtocolVersion, RequestId, ServerResult, SubscriptionFilter,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, PeerRequestOptions,
};
use rmcp::{ClientHandler, Peer, RoleClient};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{watch, Notify};

use crate::logging;

/// How long an upstream may take to start and list its tools, unless `start_timeout_s` says.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);
/// First wait before restarting a failed upstream; doubled after each failure.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Lines of an upstream's stderr kept for its failure reason.
const STDERR_TAIL_LINES: usize = 3;
/// Longest wait between restarts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// `[[upstreams]]`: one MCP server quiver starts (stdio) and serves the tools of.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Its tools are served as `NAME.tool` (MCP name `NAME_tool`).
    pub name: String,
    /// stdio: the program quiver starts.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables passed through from quiver's environment; their values are secrets.
    #[serde(default)]
    pub env: Vec<String>,
    /// Literal, non-secret variables.
    #[serde(default)]
    pub set_env: BTreeMap<String, String>,
    /// Streamable HTTP: the server's URL.
    #[serde(default)]
    pub url: Option<String>,
    /// Streamable HTTP: `Authorization: Bearer <value of this variable>`.
    #[serde(default)]
    pub bearer_env: Option<String>,
    /// Streamable HTTP: extra headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The longest one call may take, in seconds (60).
    #[serde(default = "default_timeout_s")]
    pub timeout_s: u64,
    /// What its tools' MCP names start with instead of its name (`prefix = "gh"` → `gh_tool`;
    /// `""` for the server's own names, when none collides with another tool's).
    #[serde(default)]
    pub prefix: Option<String>,
    /// How its tools' schemas reach clients: as the server declared them (the default), or
    /// rewritten as quiver writes its own plugins' (`portable`: references inlined, no custom
    /// formats or null unions, output schemas promising only what projection keeps), for
    /// clients that reject some of JSON Schema.
    #[serde(default)]
    pub schemas: UpstreamSchemas,
    /// The longest start-up (process start, handshake, first tool list) may take (30).
    #[serde(default = "default_start_timeout_s")]
    pub start_timeout_s: u64,
    /// `false` keeps it configured but not started.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The most tools it may list (500); past it, the rest are left out with a warning, so no
    /// upstream can flood the catalogue every client reads.
    #[serde(default = "default_max_tools")]
    pub max_tools: usize,
    /// The longest tool description kept, in characters (2 000); a longer one is cut, saying so.
    #[serde(default = "default_max_description_chars")]
    pub max_description_chars: usize,
    /// The most its tool definitions may take in all, in KB of JSON (256): tools past it are
    /// left out with a warning (a client that reads the list in one message, the official
    /// Python SDK's 1 MB event, fails whole when one upstream's list is too large).
    #[serde(default = "default_max_list_kb")]
    pub max_list_kb: usize,
    /// What happens to a tool whose definition changed since the operator accepted it, or that
    /// looks poisoned: `hold` (the default: not listed, calls refused, until `quiver upstreams
    /// approve`), `warn` (served, the change logged, the new definition pinned) or `off`.
    #[serde(default)]
    pub pin: quiver_core::pins::PinPolicy,
    /// Whose identity a call carries to it (HTTP upstreams): `static` (the default: `bearer_env`,
    /// the operator's), `passthrough` (the caller's own OAuth access token, as they presented
    /// it to quiver — only to an upstream that trusts the same authorization server),
    /// `exchange` (the caller's token exchanged, RFC 8693, for one meant for this upstream:
    /// `[upstreams.exchange]`), or `oauth` (the MCP authorization flow as a client: the
    /// operator connects quiver with `quiver upstreams connect NAME`, each HTTP user signs in
    /// for their own calls). Listing its tools stays the operator's.
    #[serde(default)]
    pub auth: UpstreamAuth,
    /// `[upstreams.exchange]`: where and how the caller's token is exchanged.
    #[serde(default)]
    pub exchange: Option<TokenExchangeConfig>,
    /// `[upstreams.oauth]`: a client registered by hand (default: dynamic registration).
    #[serde(default)]
    pub oauth: Option<crate::mcp_auth::UpstreamOAuthConfig>,
}

/// `[[upstreams]] auth`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamAuth {
    /// The operator's token (`bearer_env`), or none.
    #[default]
    Static,
    /// The caller's own access token, passed on.
    Passthrough,
    /// The caller's token exchanged for one whose audience is the upstream.
    Exchange,
    /// The MCP authorization flow, as the operator and as each user.
    Oauth,
}

impl UpstreamAuth {
    /// Whether each call carries its caller's identity.
    pub fn per_caller(self) -> bool {
        self != UpstreamAuth::Static
    }
}

/// Where an `auth = "oauth"` upstream's supervised connection gets the operator's token: the
/// host's signed-in accounts (`None`: the operator has not connected it yet).
pub type OperatorTokens = Arc<
    dyn Fn(
            String,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Option<String>, String>> + Send>,
        > + Send
        + Sync,
>;

/// `[upstreams.exchange]`: an RFC 8693 token exchange at an authorization server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenExchangeConfig {
    /// The authorization server's token endpoint.
    pub token_url: String,
    /// quiver's client id there.
    pub client_id: String,
    /// The variable holding its client secret.
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// The `audience` asked for (default: the upstream's URL).
    #[serde(default)]
    pub audience: Option<String>,
    /// The `scope` asked for, if any.
    #[serde(default)]
    pub scope: Option<String>,
}

/// How an upstream's tool schemas reach clients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpstreamSchemas {
    /// As the server declared them.
    #[default]
    AsDeclared,
    /// Rewritten as every client accepts them, as quiver's own plugins' are.
    Portable,
}

fn default_timeout_s() -> u64 {
    60
}

fn default_max_tools() -> usize {
    500
}

fn default_max_description_chars() -> usize {
    2000
}

fn default_max_list_kb() -> usize {
    256
}

/// The largest input and output schemas of an upstream tool kept, together, in bytes of JSON: a
/// tool whose schemas are larger is left out, with a warning naming it.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

fn default_start_timeout_s() -> u64 {
    DEFAULT_START_TIMEOUT.as_secs()
}

fn default_true() -> bool {
    true
}

impl UpstreamConfig {
    /// Why this entry cannot be used, if it cannot.
    pub fn problem(&self) -> Option<String> {
        let name = &self.name;
        if let Some(prefix) = self
            .prefix
            .as_deref()
            .filter(|p| !p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        {
            return Some(format!(
                "[[upstreams]] `{name}`: prefix `{prefix}` must be letters, digits, `_` or `-` \
                 (or \"\" for none)"
            ));
        }
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Some(format!(
                "[[upstreams]] name `{name}` must be letters, digits, `_` or `-` (it prefixes \
                 every tool name)"
            ));
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => Some(format!(
                "[[upstreams]] `{name}` sets both `command` and `url`; keep `command` for a server \
                 quiver starts, or `url` for a remote one"
            )),
            (None, None) => Some(format!(
                "[[upstreams]] `{name}` needs `command` (a server quiver starts) or `url` (a \
                 remote server)"
            )),
            (None, Some(url)) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                Some(format!(
                    "[[upstreams]] `{name}`: url `{url}` must start with http:// or https://"
                ))
            }
            (Some(command), None) if command.trim().is_empty() => {
                Some(format!("[[upstreams]] `{name}` has an empty `command`"))
            }
            (Some(_), None) if self.bearer_env.is_some() || !self.headers.is_empty() => {
                Some(format!(
                    "[[upstreams]] `{name}`: bearer_env and headers are for `url` upstreams; a \
                     stdio server gets variables through `env`"
                ))
            }
            (Some(_), None) if self.auth.per_caller() => Some(format!(
                "[[upstreams]] `{name}`: auth = \"{}\" is for `url` upstreams (a stdio server \
                 has one caller: quiver)",
                match self.auth {
                    UpstreamAuth::Exchange => "exchange",
                    UpstreamAuth::Oauth => "oauth",
                    _ => "passthrough",
                }
            )),
            _ if self.auth == UpstreamAuth::Exchange && self.exchange.is_none() => Some(format!(
                "[[upstreams]] `{name}`: auth = \"exchange\" needs [upstreams.exchange] token_url \
                 and client_id (the authorization server that exchanges callers' tokens)"
            )),
            _ if self.timeout_s == 0 || self.start_timeout_s == 0 => Some(format!(
                "[[upstreams]] `{name}`: timeout_s and start_timeout_s must be at least 1"
            )),
            _ => None,
        }
    }

    /// `stdio: npx -y @modelcontextprotocol/server-everything` or `http: URL`, for reports.
    pub fn transport(&self) -> String {
        match (&self.command, &self.url) {
            (Some(command), _) => {
                let mut line = format!("stdio: {command}");
                for arg in &self.args {
                    line.push(' ');
                    line.push_str(arg);
                }
                logging::scrub(&line)
            }
            (None, Some(url)) => format!("http: {url}"),
            (None, None) => "none".into(),
        }
    }
}

/// Where an upstream stands.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamState {
    /// `enabled = false`.
    Disabled,
    /// Starting, or restarting after a failure.
    Starting,
    /// Serving its tools.
    Ready,
    /// Not serving, and why (it is restarted with backoff).
    Failed {
        /// One line, secrets masked.
        reason: String,
    },
}

impl std::fmt::Display for UpstreamState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamState::Disabled => f.write_str("disabled in the config"),
            UpstreamState::Starting => f.write_str("starting"),
            UpstreamState::Ready => f.write_str("ready"),
            UpstreamState::Failed { reason } => write!(f, "failed — {reason}"),
        }
    }
}

impl UpstreamState {
    /// Where it stands, for those who are not the operator (the model, reading the server's
    /// instructions or a tool's error; anyone reaching `/readyz`): a failure without its reason,
    /// which may quote what the server printed or answered, pointing to quiver's log.
    pub fn public(&self) -> String {
        match self {
            UpstreamState::Failed { .. } => "failed; the reason is in quiver's log".to_owned(),
            other => other.to_string(),
        }
    }
}

/// One upstream as `quiver plugins`, `doctor` and the server's instructions show it.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamReport {
    /// Its name.
    pub name: String,
    /// `stdio: …` or `http: …`.
    pub transport: String,
    /// Where it stands.
    pub state: UpstreamState,
    /// How many tools it serves now.
    pub tools: usize,
    /// The protocol revision negotiated, once connected.
    pub protocol: Option<String>,
    /// How many times it was restarted.
    pub restarts: u32,
    /// The last lines it wrote to stderr before its last failure (masked, control characters
    /// shown as `\u{…}`), for the operator's reports only (`plugins`, `doctor`).
    pub stderr_tail: Option<String>,
    /// Its tools held until the operator approves them.
    pub held: Vec<HeldTool>,
}

/// A tool of an upstream that is not served until the operator approves its definition
/// (`quiver upstreams approve`): it changed since it was approved, or it looks poisoned.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldTool {
    /// The upstream's name of the tool.
    pub tool: String,
    /// Whether it was approved before in another form (else it is new and flagged).
    pub changed: bool,
    /// Why, for the operator: the change line by line, and what flags it (it quotes the
    /// upstream's text; never shown to a model).
    pub reasons: Vec<String>,
}

impl HeldTool {
    /// Why a call of it is refused, for the caller (a model may read it): the kind of reason
    /// and what the operator runs, never the upstream's text.
    pub fn refusal(&self, upstream: &str, listed_as: &str) -> String {
        let why = if self.changed {
            format!("upstream `{upstream}` changed its definition since the operator approved it")
        } else {
            format!("its definition, as upstream `{upstream}` lists it, looks written to steer the model")
        };
        format!(
            "`{listed_as}` is held by quiver: {why}. It is not called until the operator reviews it \
             (`quiver upstreams diff {upstream}`) and approves it (`quiver upstreams approve \
             {upstream} {}`).",
            self.tool
        )
    }
}

/// At most one log line per this long for an upstream's `tools/list_changed` notifications.
const LIST_CHANGED_LOG_EVERY: Duration = Duration::from_secs(10);

/// The largest message a stdio upstream may send: one byte under what the MCP library reads
/// (16 MiB), so [`guard_frames`] answers a larger one instead of the library dropping it and
/// leaving its call to wait for its whole timeout.
const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024 - 1024;

/// Passes a stdio upstream's messages (one per line) from `stdout` to `to_client`, except one
/// longer than `limit`: that one is read to its end and dropped, and in its place the call it
/// answers gets a JSON-RPC error saying how large it was — found by the `id` near its start (as
/// most servers write it) or its end (as the TypeScript SDK does). The tools of a `tools/list`
/// answer that carry an `execution` object have it kept in `executions` before the answer goes
/// on. Ends with the stream.
async fn guard_frames(
    stdout: tokio::process::ChildStdout,
    mut to_client: tokio::io::DuplexStream,
    limit: usize,
    upstream: String,
    executions: Executions,
) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    const EDGE: usize = 512;
    let mut reader = tokio::io::BufReader::with_capacity(64 * 1024, stdout);
    let mut line: Vec<u8> = Vec::new();
    loop {
        line.clear();
        let (mut oversized, mut length) = (false, 0usize);
        let (mut head, mut tail): (Vec<u8>, Vec<u8>) = (Vec::new(), Vec::new());
        loop {
            let available = match reader.fill_buf().await {
                Ok(available) => available,
                Err(_) => return,
            };
            if available.is_empty() {
                // The end: a last line without a newline is passed on as it is.
                if !oversized && !line.is_empty() {
                    let _ = to_client.write_all(&line).await;
                }
                return;
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let chunk = &available[..take];
            length += take;
            if !oversized && line.len() + take > limit {
                oversized = true;
                head = line.iter().chain(chunk).take(EDGE).copied().collect();
                line.clear();
            }
            if oversized {
                tail.extend_from_slice(chunk);
                if tail.len() > EDGE * 2 {
                    tail.drain(..tail.len() - EDGE);
                }
            } else {
                line.extend_from_slice(chunk);
            }
            reader.consume(take);
            if newline.is_some() {
                break;
            }
        }
        if !oversized {
            keep_executions(&line, &executions);
            if to_client.write_all(&line).await.is_err() {
                return;
            }
            continue;
        }
        let mb = length as f64 / (1024.0 * 1024.0);
        let readable_mib = limit / (1024 * 1024) + 1;
        let Some(id) = frame_id(&head, &tail) else {
            tracing::warn!(upstream = %upstream, "dropped a message of {mb:.1} MB without an id it could answer");
            continue;
        };
        tracing::warn!(upstream = %upstream, "its answer was {mb:.1} MB, over the {readable_mib} MiB quiver reads; the call gets an error");
        let error = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": -32603,
                "message": format!(
                    "the answer was {mb:.1} MB, more than the {readable_mib} MiB quiver reads from \
                     `{upstream}`; ask the tool for less (a page, a range)"
                ),
            },
        });
        if to_client.write_all(format!("{error}\n").as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Keeps the `execution` of each tool a `tools/list` answer (`frame`, one JSON-RPC message)
/// lists with one; any other frame is looked at no further than a search for the word.
pub(crate) fn keep_executions(frame: &[u8], executions: &Mutex<HashMap<String, Value>>) {
    if memchr::memmem::find(frame, b"\"execution\"").is_none() {
        return;
    }
    let Ok(message) = serde_json::from_slice::<Value>(frame) else { return };
    let Some(tools) = message.pointer("/result/tools").and_then(Value::as_array) else { return };
    let mut executions = executions.lock().unwrap_or_else(|e| e.into_inner());
    for tool in tools {
        if let (Some(name), Some(execution @ Value::Object(_))) =
            (tool.get("name").and_then(Value::as_str), tool.get("execution"))
        {
            executions.insert(name.to_owned(), execution.clone());
        }
    }
}

/// The top-level `id` of a JSON-RPC message known only by its first and last bytes: the last
/// `"id":` of its end when the message ends there (`…,"id":7}`), else the first of its start.
fn frame_id(head: &[u8], tail: &[u8]) -> Option<Value> {
    let value_after = |text: &str, at: usize| -> Option<(Value, usize)> {
        let rest = text[at + 5..].trim_start();
        let end = if let Some(quoted) = rest.strip_prefix('"') {
            quoted.find('"').map(|i| i + 2)?
        } else {
            rest.find([',', '}']).unwrap_or(rest.len())
        };
        let value: Value = serde_json::from_str(rest[..end].trim()).ok()?;
        let consumed = text.len() - rest.len() + end;
        (value.is_number() || value.is_string()).then_some((value, consumed))
    };
    let tail = String::from_utf8_lossy(tail);
    if let Some(at) = tail.rfind("\"id\":") {
        if let Some((id, end)) = value_after(&tail, at) {
            if tail[end..].trim() == "}" {
                return Some(id);
            }
        }
    }
    let head = String::from_utf8_lossy(head);
    let at = head.find("\"id\":")?;
    value_after(&head, at).map(|(id, _)| id)
}

/// rmcp's error text without the transport's Rust type names, which tell a model or a user
/// nothing: `Transport send error: Transport [rmcp::…<…>] error: HTTP response body exceeded …`
/// becomes `HTTP response body exceeded …`.
fn without_type_names(raw: &str) -> String {
    match raw.find("] error: ") {
        Some(at) if raw[..at].contains('[') => raw[at + "] error: ".len()..].to_owned(),
        _ => raw.to_owned(),
    }
}

/// How long a failure waits for the rest of a child's stderr when the stream has not ended.
const STDERR_DRAIN: Duration = Duration::from_secs(1);

/// A tool an upstream serves, as the registry sees it.
#[derive(Debug, Clone)]
pub struct UpstreamTool {
    /// `upstream.tool`.
    pub name: ToolName,
    /// Name, description and schemas as the upstream declared them.
    pub spec: ToolSpec,
    /// The upstream's `annotations` (hints, not promises).
    pub annotations: Option<Value>,
    /// Its whole definition as the upstream listed it (`title`, `annotations`, `execution`,
    /// `icons`, `_meta`, the schemas…): what clients are shown of it.
    pub declared: serde_json::Map<String, Value>,
}

/// Receives an upstream's progress for one call: (progress, total, message).
pub type ProgressSink = Arc<dyn Fn(f64, Option<f64>, Option<String>) + Send + Sync>;

/// The clients of the calls in flight to an upstream, by the call's request id.
type CallClients = HashMap<RequestId, Arc<dyn CallClient>>;

/// A boxed future of an answer to an upstream's request.
pub type Answer<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, rmcp::ErrorData>> + Send + 'a>>;

/// The client a call came from: where the requests an upstream sends during the call go —
/// sampling, elicitation, roots — and what that client said it can answer.
// Sampling and roots are deprecated from 2026-07-28 (SEP-2577); servers of 2025-11-25 still
// send them, and quiver passes them on while clients answer them.
#[allow(deprecated)]
pub trait CallClient: Send + Sync {
    /// What the client declared.
    fn capabilities(&self) -> rmcp::model::ClientCapabilities;
    /// `sampling/createMessage`.
    fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
    ) -> Answer<'_, rmcp::model::CreateMessageResult>;
    /// `elicitation/create`, form or URL.
    fn create_elicitation(
        &self,
        params: rmcp::model::ElicitRequestParams,
    ) -> Answer<'_, rmcp::model::ElicitResult>;
    /// `roots/list`.
    fn list_roots(&self) -> Answer<'_, rmcp::model::ListRootsResult>;
    /// Whether the client takes a server's requests as rounds of the call (2026-07-28's
    /// `input_required`): an upstream's requests are then handed to it instead of asked here.
    fn takes_rounds(&self) -> bool {
        false
    }
    /// The answers and state the client sent with this call, when it is a later round of one
    /// an upstream asked input for.
    fn round(&self) -> Option<InputRound> {
        None
    }
    /// The level of log messages the client asked for (`logging/setLevel`, or its request's
    /// `_meta` on 2026-07-28), passed on to upstreams that log per request.
    fn log_level(&self) -> Option<rmcp::model::LoggingLevel> {
        None
    }
    /// A log message the upstream sent during the call (masked), for the client if it asked
    /// for messages of that level.
    fn log(&self, _params: rmcp::model::LoggingMessageNotificationParam) {}
}

/// A later round of a call an upstream asked input for: the client's answers, by the keys the
/// upstream gave its requests, and the state the upstream asked to have echoed.
#[derive(Debug, Clone, Default)]
pub struct InputRound {
    /// The client's answers, by the keys of the upstream's requests.
    pub responses: rmcp::model::InputResponses,
    /// The upstream's `requestState`, as the client echoed it.
    pub state: Option<String>,
}

/// The metadata key of a result that is not one: the upstream's `input_required` answer (as
/// JSON), for a client that takes rounds to fulfil and send the call again.
pub const INPUT_REQUIRED_METADATA: &str = "input_required";

/// How many rounds of input an upstream may ask for in one call before quiver gives it up (the
/// official SDKs' bound).
pub const MAX_INPUT_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

/// Asks `client` what an upstream's `input_required` answer asks for: the client's answer as
/// JSON, or why it cannot give one (it did not declare the capability, or failed).
#[allow(deprecated)] // sampling and roots: see `CallClient`
async fn answer_input(
    client: &dyn CallClient,
    request: rmcp::model::InputRequest,
) -> Result<Value, rmcp::ErrorData> {
    use rmcp::model::InputRequest;
    let capabilities = client.capabilities();
    let not_declared = |what: &str| {
        rmcp::ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("{what}: the client did not declare it"),
            None,
        )
    };
    fn json<T: serde::Serialize>(
        value: Result<T, rmcp::ErrorData>,
    ) -> Result<Value, rmcp::ErrorData> {
        value.map(|v| serde_json::to_value(v).unwrap_or(Value::Null))
    }
    match request {
        InputRequest::CreateMessage(request) => {
            if capabilities.sampling.is_none() {
                return Err(not_declared("sampling"));
            }
            json(client.create_message(request.params).await)
        }
        InputRequest::Elicitation(request) => {
            if !can_elicit(&capabilities, &request.params) {
                return Err(not_declared("elicitation"));
            }
            json(client.create_elicitation(request.params).await)
        }
        InputRequest::ListRoots(_) => {
            if capabilities.roots.is_none() {
                return Err(not_declared("roots"));
            }
            json(client.list_roots().await)
        }
        other => Err(rmcp::ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!(
                "{}: not a request quiver knows how to pass on",
                serde_json::to_value(&other)
                    .ok()
                    .and_then(|v| v.get("method").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_default()
            ),
            None,
        )),
    }
}

/// Whether a client that declared `capabilities` can answer an elicitation of this mode.
fn can_elicit(
    capabilities: &rmcp::model::ClientCapabilities,
    request: &rmcp::model::ElicitRequestParams,
) -> bool {
    let url = matches!(request, rmcp::model::ElicitRequestParams::UrlElicitationParams { .. });
    match &capabilities.elicitation {
        // An empty `elicitation` is form support (the spec's reading of older clients).
        Some(e) if url => e.url.is_some(),
        Some(e) => e.form.is_some() || e.url.is_none(),
        None => false,
    }
}

tokio::task_local! {
    /// The client of the call in progress, for the requests an upstream sends during it.
    pub static CALL_CLIENT: Arc<dyn CallClient>;

    /// The progress sink of the call running in this task, set by the MCP server around a call
    /// so an upstream's progress notifications reach the client that asked.
    pub static CALL_PROGRESS: ProgressSink;
}

type Client = rmcp::service::RunningService<RoleClient, UpstreamHandler>;

struct Live {
    state: UpstreamState,
    tools: Vec<UpstreamTool>,
    peer: Option<Peer<RoleClient>>,
    protocol: Option<String>,
    restarts: u32,
    /// The child's process group, to kill it whatever happens to the client.
    pgid: Option<u32>,
    /// The last lines of the child's stderr (masked), for failure reasons.
    stderr_tail: std::collections::VecDeque<String>,
    /// Those lines as they were when it last failed.
    last_stderr: Option<String>,
    /// Closed when the child's stderr reaches its end (the process is gone).
    stderr_closed: Option<tokio::sync::oneshot::Receiver<()>>,
    /// The child process of a stdio upstream (killed when dropped).
    child: Option<Box<dyn process_wrap::tokio::ChildWrapper>>,
    /// Its tools held until approved.
    held: Vec<HeldTool>,
}

/// One supervised upstream client.
pub struct Upstream {
    config: UpstreamConfig,
    live: Mutex<Live>,
    progress: Mutex<HashMap<ProgressToken, ProgressSink>>,
    /// Progress that came before its call's sink was in place (the request's send returns only
    /// once it is on its way, and an upstream over HTTP may report progress at once): handed to
    /// the sink, in order, when it is. Lock order: `progress`, then this.
    early_progress: Mutex<std::collections::VecDeque<(Instant, ProgressNotificationParam)>>,
    /// The calls in flight to it (pre-fetches included), and the clients of those that have one.
    in_flight: Mutex<(usize, CallClients)>,
    /// The clients of the calls it runs as its own tasks, by its task id: a request it sends
    /// within a task names the task (2025-11-25's `related-task`), so it reaches the right
    /// client however many calls are in flight.
    task_clients: Mutex<HashMap<String, Arc<dyn CallClient>>>,
    /// Where its log messages go: every upstream's, to whichever clients asked for them.
    logs: tokio::sync::broadcast::Sender<UpstreamLog>,
    /// Where its resource changes and prompt and resource list changes go: to the clients that
    /// follow them.
    updates: tokio::sync::broadcast::Sender<UpstreamChange>,
    /// The resource URIs clients subscribed to, with how many subscriptions each: subscribed
    /// at the upstream while any client holds one, and again after a restart.
    subscriptions: Mutex<BTreeMap<String, usize>>,
    /// Wakes the serve loop to open its 2026-07-28 listen stream with the URIs now subscribed.
    resubscribe: Notify,
    /// Counts the listen streams the serve loop opened, so a subscription returns once the
    /// upstream listens for its URI.
    listened: watch::Sender<u64>,
    relist: Notify,
    /// When a `list_changed` line was last logged, and the notifications since.
    list_changed_log: Mutex<(Option<Instant>, u64)>,
    /// Set after the first start attempt ends (ready or failed), for [`Upstreams::start`].
    first_attempt: watch::Sender<bool>,
    stop: AtomicBool,
    stopped: Notify,
    changed: Arc<dyn Fn() + Send + Sync>,
    /// Where its tools' definitions are pinned.
    pins: crate::pins::PinStore,
    /// Connections carrying callers' own tokens, by token digest, with when each was last used.
    callers: tokio::sync::Mutex<HashMap<String, (Client, Instant)>>,
    /// Tokens exchanged for callers' ([`Upstream::exchanged_token`]), by subject token digest,
    /// with when each stops being used.
    exchanged: Mutex<HashMap<String, (String, Instant)>>,
    /// Where an `auth = "oauth"` upstream's own connection gets the operator's token.
    operator_tokens: std::sync::OnceLock<OperatorTokens>,
    /// The version of its pin file after quiver last wrote or read it: another version means
    /// the operator approved something.
    pins_seen: Mutex<Vec<u8>>,
    /// The tool names of every upstream and of the plugins, to find a description naming
    /// another server's tool.
    known: KnownTools,
    /// Each tool's `execution` as the upstream's `tools/list` answers carried it, by tool name:
    /// the MCP library's tool type has no such field, so it is read from a stdio server's frames
    /// and from an HTTP server's answers ([`crate::upstream_http`]).
    executions: Executions,
}

/// Tools' `execution` objects by tool name, read from an upstream's raw `tools/list` answers.
pub(crate) type Executions = Arc<Mutex<HashMap<String, Value>>>;

/// The tool names each upstream (by name) and the plugins (`""`) serve.
type KnownTools = Arc<Mutex<BTreeMap<String, Vec<String>>>>;

/// The most connections carrying callers' own tokens kept open to one upstream.
const MAX_CALLER_CONNECTIONS: usize = 256;

/// How often a server with held tools looks for the operator's approval.
const APPROVAL_POLL: Duration = Duration::from_secs(1);

impl Upstream {
    fn new(
        config: UpstreamConfig,
        changed: Arc<dyn Fn() + Send + Sync>,
        logs: tokio::sync::broadcast::Sender<UpstreamLog>,
        updates: tokio::sync::broadcast::Sender<UpstreamChange>,
        known: KnownTools,
    ) -> Self {
        let state = if config.enabled { UpstreamState::Starting } else { UpstreamState::Disabled };
        Self {
            config,
            live: Mutex::new(Live {
                state,
                tools: Vec::new(),
                peer: None,
                protocol: None,
                restarts: 0,
                pgid: None,
                stderr_tail: std::collections::VecDeque::new(),
                last_stderr: None,
                stderr_closed: None,
                child: None,
                held: Vec::new(),
            }),
            progress: Mutex::new(HashMap::new()),
            early_progress: Mutex::new(std::collections::VecDeque::new()),
            in_flight: Mutex::new((0, HashMap::new())),
            task_clients: Mutex::new(HashMap::new()),
            logs,
            updates,
            subscriptions: Mutex::new(BTreeMap::new()),
            resubscribe: Notify::new(),
            listened: watch::channel(0).0,
            relist: Notify::new(),
            list_changed_log: Mutex::new((None, 0)),
            first_attempt: watch::channel(false).0,
            stop: AtomicBool::new(false),
            stopped: Notify::new(),
            changed,
            pins: crate::pins::PinStore::default_store(),
            callers: tokio::sync::Mutex::new(HashMap::new()),
            exchanged: Mutex::new(HashMap::new()),
            operator_tokens: std::sync::OnceLock::new(),
            pins_seen: Mutex::new(Vec::new()),
            known,
            executions: Arc::default(),
        }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Its configuration.
    pub fn config(&self) -> &UpstreamConfig {
        &self.config
    }

    /// Where it stands now.
    pub fn report(&self) -> UpstreamReport {
        let live = self.live();
        UpstreamReport {
            name: self.config.name.clone(),
            transport: self.config.transport(),
            state: live.state.clone(),
            tools: live.tools.len(),
            protocol: live.protocol.clone(),
            restarts: live.restarts,
            stderr_tail: live.last_stderr.clone(),
            held: live.held.clone(),
        }
    }

    /// Its tool `tool` (the upstream's name), when it is held.
    pub fn held(&self, tool: &str) -> Option<HeldTool> {
        self.live().held.iter().find(|h| h.tool == tool).cloned()
    }

    /// The tools it serves now (none while it is down).
    pub fn tools(&self) -> Vec<UpstreamTool> {
        self.live().tools.clone()
    }

    /// Its MCP client, while it serves.
    pub fn peer(&self) -> Option<Peer<RoleClient>> {
        self.live().peer.clone()
    }

    /// Whether it declared logging (false while it is down).
    pub fn serves_logging(&self) -> bool {
        self.peer()
            .and_then(|peer| peer.peer_info().map(|i| i.capabilities.logging.is_some()))
            .unwrap_or(false)
    }

    /// Asks it to send log messages of `level` (`"debug"`, `"info"`…) and above.
    #[allow(deprecated)] // logging is deprecated from 2026-07-28 (SEP-2577); 2025-11-25 servers use it
    pub async fn set_log_level(&self, level: &str) -> Result<(), String> {
        let peer = self.peer().ok_or_else(|| format!("upstream `{}` is down", self.name()))?;
        let params: rmcp::model::SetLevelRequestParams =
            serde_json::from_value(json!({ "level": level })).map_err(|e| e.to_string())?;
        peer.set_level(params).await.map_err(|e| logging::scrub(&e.to_string()))
    }

    /// Whether it declared completions (false while it is down).
    pub fn serves_completions(&self) -> bool {
        self.peer()
            .and_then(|peer| peer.peer_info().map(|i| i.capabilities.completions.is_some()))
            .unwrap_or(false)
    }

    /// Whether it declared resource subscriptions (false while it is down).
    pub fn serves_subscriptions(&self) -> bool {
        self.peer()
            .and_then(|peer| {
                peer.peer_info().and_then(|i| i.capabilities.resources.as_ref()?.subscribe)
            })
            .unwrap_or(false)
    }

    /// Subscribes a client to changes of `uri`: the first subscription is made at the upstream
    /// (`resources/subscribe`, or on 2026-07-28 its listen stream opened anew with the URI).
    pub async fn subscribe_resource(&self, uri: &str) -> Result<(), String> {
        let first = {
            let mut subscriptions = self.subscriptions();
            let count = subscriptions.entry(uri.to_owned()).or_default();
            *count += 1;
            *count == 1
        };
        if !first {
            return Ok(());
        }
        let outcome = self.subscribe_at_upstream(uri, true).await;
        if outcome.is_err() {
            self.subscriptions().remove(uri);
        }
        outcome
    }

    /// Ends one client's subscription to `uri`; the last one ends it at the upstream.
    pub async fn unsubscribe_resource(&self, uri: &str) -> Result<(), String> {
        let last = {
            let mut subscriptions = self.subscriptions();
            match subscriptions.get_mut(uri) {
                Some(count) if *count > 1 => {
                    *count -= 1;
                    false
                }
                Some(_) => {
                    subscriptions.remove(uri);
                    true
                }
                None => false,
            }
        };
        if !last {
            return Ok(());
        }
        self.subscribe_at_upstream(uri, false).await
    }

    fn subscriptions(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, usize>> {
        self.subscriptions.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[allow(deprecated)] // resources/subscribe is 2025-11-25's; 2026-07-28 servers are listened to
    async fn subscribe_at_upstream(&self, uri: &str, subscribe: bool) -> Result<(), String> {
        let peer = self.peer().ok_or_else(|| format!("upstream `{}` is down", self.name()))?;
        if speaks_2026_07_28(&peer) {
            // 2026-07-28: a listen stream's filter is fixed, so the serve loop opens a new one.
            let mut listened = self.listened.subscribe();
            listened.mark_unchanged();
            self.resubscribe.notify_one();
            let opened = tokio::time::timeout(
                Duration::from_secs(self.config.timeout_s),
                listened.changed(),
            )
            .await;
            return match opened {
                Ok(Ok(())) => Ok(()),
                _ => Err(format!(
                    "upstream `{}` did not open a listen stream for {uri} in time",
                    self.name()
                )),
            };
        }
        let scrub = |e: rmcp::ServiceError| logging::scrub(&e.to_string());
        if subscribe {
            peer.subscribe(rmcp::model::SubscribeRequestParams::new(uri)).await.map_err(scrub)
        } else {
            peer.unsubscribe(rmcp::model::UnsubscribeRequestParams::new(uri)).await.map_err(scrub)
        }
    }

    /// The filter of its 2026-07-28 listen stream: its tool list, and the URIs subscribed.
    fn listen_filter(&self) -> SubscriptionFilter {
        let uris: Vec<String> = self.subscriptions().keys().cloned().collect();
        let filter = SubscriptionFilter::builder()
            .tools_list_changed()
            .prompts_list_changed()
            .resources_list_changed();
        if uris.is_empty() {
            filter.build()
        } else {
            filter.resource_subscriptions(uris).build()
        }
    }

    /// The client of the one call in flight to it; `Err(true)` when none is, `Err(false)` when
    /// several are or the one has no client (a pre-fetch): which call a request or a log
    /// message of the server's belongs to is then unknown.
    fn sole_client(&self) -> Result<Arc<dyn CallClient>, bool> {
        let in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        match (in_flight.0, in_flight.1.values().next()) {
            (1, Some(client)) if in_flight.1.len() == 1 => Ok(Arc::clone(client)),
            (0, _) => Err(true),
            _ => Err(false),
        }
    }

    /// A log message of its as clients get it: masked, its `logger` naming the upstream
    /// (`everything/…`).
    #[allow(deprecated)] // logging: see `CallClient`
    fn log_for_clients(
        &self,
        params: &rmcp::model::LoggingMessageNotificationParam,
    ) -> Option<Value> {
        let mut json = serde_json::to_value(params).ok()?;
        logging::scrub_json(&mut json);
        json["logger"] = Value::String(match json.get("logger").and_then(Value::as_str) {
            Some(logger) => format!("{}/{logger}", self.name()),
            None => self.name().to_owned(),
        });
        Some(json)
    }

    /// Tells subscribed clients that `uri` changed.
    fn resource_updated(&self, uri: String) {
        self.announce(UpstreamChange::ResourceUpdated { upstream: self.name().to_owned(), uri });
    }

    fn announce(&self, change: UpstreamChange) {
        // Nobody listening is fine.
        let _ = self.updates.send(change);
    }

    /// Whether it declared resources, and prompts (false while it is down).
    pub fn serves_resources_and_prompts(&self) -> (bool, bool) {
        let Some(peer) = self.peer() else { return (false, false) };
        let Some(info) = peer.peer_info() else { return (false, false) };
        (info.capabilities.resources.is_some(), info.capabilities.prompts.is_some())
    }

    /// What its tools', prompts' and resources' names start with: its `prefix`, else its name
    /// (`""`: nothing).
    pub fn name_prefix(&self) -> &str {
        self.config.prefix.as_deref().unwrap_or(&self.config.name)
    }

    /// `name` as quiver lists it: `prefix_name`.
    pub fn prefixed(&self, name: &str) -> String {
        match self.name_prefix() {
            "" => name.to_owned(),
            prefix => format!("{prefix}_{name}"),
        }
    }

    fn set_state(&self, state: UpstreamState) {
        let changed = {
            let mut live = self.live();
            if let UpstreamState::Failed { reason } = &state {
                tracing::warn!(upstream = %self.config.name, "{reason}");
                live.peer = None;
                live.tools.clear();
            }
            let changed = live.state != state;
            live.state = state;
            changed
        };
        if changed {
            (self.changed)();
        }
    }

    /// Supervises the upstream until quiver stops: start, serve, restart with backoff.
    async fn supervise(self: Arc<Self>) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            // A restart keeps showing the last failure until it succeeds: "starting" would hide
            // why the upstream keeps going down.
            if !matches!(self.live().state, UpstreamState::Failed { .. }) {
                self.set_state(UpstreamState::Starting);
            }
            let start_timeout = Duration::from_secs(self.config.start_timeout_s);
            let started = tokio::time::timeout(start_timeout, self.connect()).await;
            match started {
                Ok(Ok(client)) => {
                    let _ = self.first_attempt.send(true);
                    backoff = FIRST_BACKOFF;
                    let reason = self.serve(client).await;
                    if self.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    self.keep_stderr_tail().await;
                    self.set_state(UpstreamState::Failed { reason });
                }
                Ok(Err(reason)) => {
                    self.keep_stderr_tail().await;
                    self.set_state(UpstreamState::Failed { reason });
                }
                Err(_) => {
                    self.kill();
                    self.set_state(UpstreamState::Failed {
                        reason: format!(
                            "did not start within {} s (start_timeout_s); it was stopped",
                            start_timeout.as_secs()
                        ),
                    });
                }
            }
            // After the state is set, so whoever waits for the first attempt sees its outcome.
            let _ = self.first_attempt.send(true);
            self.kill();
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.stopped.notified() => return,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            self.live().restarts += 1;
        }
    }

    /// Starts the process (or reaches the URL), negotiates the protocol and lists the tools.
    async fn connect(self: &Arc<Self>) -> Result<Client, String> {
        use rmcp::transport::IntoTransport;
        let client = match &self.config.url {
            Some(url) => {
                let operator = self.operator_token().await?;
                let transport = self.http_transport(url, operator.as_deref())?;
                self.handshake(IntoTransport::<RoleClient, _, _>::into_transport(transport)).await
            }
            None => {
                let transport = self.spawn_child()?;
                self.handshake(IntoTransport::<RoleClient, _, _>::into_transport(transport)).await
            }
        }
        .map_err(|e| self.handshake_error(&e.to_string()))?;
        let protocol = client.peer().peer_info().map(|info| info.protocol_version.to_string());
        self.list(client.peer()).await?;
        {
            let mut live = self.live();
            live.protocol = protocol;
            live.peer = Some(client.peer().clone());
        }
        self.set_state(UpstreamState::Ready);
        tracing::info!(upstream = %self.config.name, tools = self.live().tools.len(), "upstream ready");
        Ok(client)
    }

    /// The operator's token for an `auth = "oauth"` upstream (none for any other), or why
    /// there is none.
    async fn operator_token(&self) -> Result<Option<String>, String> {
        if self.config.auth != UpstreamAuth::Oauth {
            return Ok(None);
        }
        let name = &self.config.name;
        let source = self.operator_tokens.get().ok_or_else(|| {
            format!("upstream `{name}` signs in with OAuth, which this host cannot do")
        })?;
        match source(name.clone()).await? {
            Some(token) => {
                logging::register_secret(&token);
                Ok(Some(token))
            }
            None => Err(format!(
                "not connected: upstream `{name}` needs the operator to sign quiver in — run \
                 `quiver upstreams connect {name}`"
            )),
        }
    }

    /// The MCP handshake over `transport`, as this upstream's client: its progress kept in
    /// order, its requests to the client handled ([`UpstreamHandler`]).
    async fn handshake<T>(
        self: &Arc<Self>,
        transport: T,
    ) -> Result<Client, rmcp::service::ClientInitializeError>
    where
        T: rmcp::transport::Transport<RoleClient> + Send + 'static,
        T::Error: std::error::Error + Send + Sync + 'static,
    {
        let transport = ProgressInOrder { inner: transport, upstream: Arc::downgrade(self) };
        let handler = UpstreamHandler { upstream: Arc::downgrade(self) };
        handler.serve_with_lifecycle(transport, lifecycle()).await
    }

    /// Why the handshake failed, in words a user can act on: rmcp's message without the
    /// transport's type names, and what to check for the common cases.
    fn handshake_error(&self, raw: &str) -> String {
        let raw = logging::scrub(raw);
        // "Send message error Transport [rmcp::…<…>] error: Auth required, when send …"
        let message = without_type_names(&raw);
        let message = match message.rfind(", when ") {
            Some(end) if message.len() != raw.len() => message[..end].to_owned(),
            _ => message,
        };
        let url = self.config.url.as_deref().unwrap_or_default();
        if message.contains("Auth required") || message.contains("401") {
            return match &self.config.bearer_env {
                Some(var) => format!(
                    "{url} answered 401 Unauthorized: the token in {var} (bearer_env) was refused"
                ),
                None => format!(
                    "{url} answered 401 Unauthorized: set bearer_env to the variable holding its \
                     token"
                ),
            };
        }
        if message.contains("error sending request") {
            return format!("cannot reach {url}: {message}; is the server running?");
        }
        format!("the MCP handshake failed: {message}")
    }

    /// A Streamable HTTP transport to `url`, with the bearer token of `bearer_env` (a secret,
    /// masked wherever it could show) and the configured headers.
    fn http_transport(
        &self,
        url: &str,
        caller: Option<&str>,
    ) -> Result<
        rmcp::transport::StreamableHttpClientTransport<crate::upstream_http::ListingReader>,
        String,
    > {
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        install_crypto_provider();
        let name = &self.config.name;
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
        if let Some(token) = caller {
            config = config.auth_header(token.to_owned());
        } else if let Some(var) = &self.config.bearer_env {
            let token = logging::secret_from_env(var).ok_or_else(|| {
                format!("set {var} (the variable [[upstreams]] `{name}` names in bearer_env)")
            })?;
            config = config.auth_header(token);
        }
        let mut headers = HashMap::new();
        for (key, value) in &self.config.headers {
            let key = http::HeaderName::try_from(key.as_str())
                .map_err(|e| format!("header name `{key}` in [[upstreams]] `{name}`: {e}"))?;
            let value = http::HeaderValue::try_from(value.as_str())
                .map_err(|e| format!("header `{key}` in [[upstreams]] `{name}`: {e}"))?;
            headers.insert(key, value);
        }
        Ok(rmcp::transport::StreamableHttpClientTransport::with_client(
            crate::upstream_http::ListingReader::new(Arc::clone(&self.executions)),
            config.custom_headers(headers),
        ))
    }

    /// The child process of a stdio upstream, in its own process group, stderr read into the
    /// log.
    fn spawn_child(
        self: &Arc<Self>,
    ) -> Result<(tokio::io::DuplexStream, tokio::process::ChildStdin), String> {
        let command = self.config.command.clone().unwrap_or_default();
        let mut cmd = tokio::process::Command::new(&command);
        cmd.args(&self.config.args);
        for (key, _) in std::env::vars_os() {
            if let Some(key) = key.to_str() {
                if looks_like_credential(key) {
                    cmd.env_remove(key);
                }
            }
        }
        for var in &self.config.env {
            match std::env::var(var) {
                Ok(value) => {
                    logging::register_secret(&value);
                    cmd.env(var, value);
                }
                Err(_) => tracing::warn!(
                    upstream = %self.config.name,
                    "`{var}` (listed in env) is not set; the server starts without it"
                ),
            }
        }
        cmd.envs(&self.config.set_env);
        let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
        wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
        wrapped.wrap(process_wrap::tokio::KillOnDrop);
        wrapped
            .command_mut()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = wrapped.spawn().map_err(|e| {
            let fix = if e.kind() == std::io::ErrorKind::NotFound {
                " (is it installed and on PATH?)"
            } else {
                ""
            };
            format!("cannot start `{}`: {e}{fix}", logging::scrub(&command))
        })?;
        let (stdin, stdout, stderr) = (
            child.inner_mut().stdin().take(),
            child.inner_mut().stdout().take(),
            child.inner_mut().stderr().take(),
        );
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            return Err(format!(
                "cannot start `{}`: its stdio was not piped",
                logging::scrub(&command)
            ));
        };
        // Every frame it answers with passes through the guard, which turns one too large for
        // the MCP library into an error for the call it answers, at once.
        let (guarded, frames_in) = tokio::io::duplex(64 * 1024);
        let executions = Arc::clone(&self.executions);
        tokio::spawn(guard_frames(
            stdout,
            frames_in,
            MAX_FRAME_BYTES,
            self.config.name.clone(),
            executions,
        ));
        {
            let mut live = self.live();
            live.pgid = child.id();
            // Dropping the previous one kills it (KillOnDrop); this one lives until replaced.
            live.child = Some(child);
        }
        self.live().stderr_tail.clear();
        if let Some(stderr) = stderr {
            let upstream = Arc::downgrade(self);
            let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
            self.live().stderr_closed = Some(closed_rx);
            tokio::spawn(async move {
                // Dropped at the end of the stream, which tells `keep_stderr_tail` it has it all.
                let _closed = closed_tx;
                let mut lines = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let Some(upstream) = upstream.upgrade() else { return };
                    // Shown as `\u{1b}` wherever it goes: a terminal must not obey it.
                    let line = quiver_core::terminal::for_terminal(&logging::scrub(&line), false)
                        .into_owned();
                    tracing::debug!(target: "quiver::upstream", upstream = %upstream.config.name, "{line}");
                    let mut live = upstream.live();
                    if live.stderr_tail.len() == STDERR_TAIL_LINES {
                        live.stderr_tail.pop_front();
                    }
                    live.stderr_tail.push_back(line.chars().take(300).collect());
                }
            });
        }
        Ok((guarded, stdin))
    }

    /// Lists the tools (every page) and swaps them in.
    async fn list(&self, peer: &Peer<RoleClient>) -> Result<(), String> {
        // The hints are read again from this listing's answers (see `executions`): one the
        // server no longer gives must not outlive its listing.
        self.executions.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let listed = peer
            .list_all_tools()
            .await
            .map_err(|e| format!("tools/list failed: {}", logging::scrub(&e.to_string())))?;
        let mut tools = Vec::with_capacity(listed.len().min(self.config.max_tools));
        let (upstream, max_tools) = (&self.config.name, self.config.max_tools);
        if listed.len() > max_tools {
            tracing::warn!(
                upstream = %upstream,
                "lists {} tools; serving the first {max_tools} (max_tools in its [[upstreams]] \
                 entry) so it cannot flood the catalogue of every client",
                listed.len()
            );
        }
        let mut cut_descriptions = 0;
        let (mut list_bytes, mut over_budget) = (0usize, 0usize);
        for tool in listed.into_iter().take(max_tools) {
            let mut json = serde_json::to_value(&tool).unwrap_or(Value::Null);
            let name = tool.name.to_string();
            let execution =
                self.executions.lock().unwrap_or_else(|e| e.into_inner()).get(&name).cloned();
            if let (Some(execution), Value::Object(map)) = (execution, &mut json) {
                map.insert("execution".to_owned(), execution);
            }
            // What a model would read and a person reviewing the server would not see: out of
            // the description, title, schemas and annotations (the name stays: calls use it).
            let mut removed = quiver_core::untrusted::Removed::default();
            quiver_core::untrusted::clean_json(&mut json, &[], &mut removed);
            if !removed.is_empty() {
                json["name"] = Value::String(name.clone());
                tracing::warn!(
                    upstream = %upstream,
                    "tool `{}`'s definition hid text; removed {}",
                    crate::logging::scrub(&quiver_core::terminal::for_terminal(&name, false)),
                    removed.summary()
                );
            }
            if name.is_empty() || name.contains('.') {
                tracing::warn!(upstream = %upstream, "skipping tool `{name}`: names are non-empty and have no dots");
                continue;
            }
            let schema_bytes = ["inputSchema", "outputSchema"]
                .iter()
                .filter_map(|key| json.get(*key))
                .map(|schema| schema.to_string().len())
                .sum::<usize>();
            if schema_bytes > MAX_SCHEMA_BYTES {
                tracing::warn!(
                    upstream = %upstream,
                    "skipping tool `{name}`: its schema is {} KB, over {} KB",
                    schema_bytes / 1024,
                    MAX_SCHEMA_BYTES / 1024
                );
                continue;
            }
            let mut description =
                json.get("description").and_then(Value::as_str).unwrap_or_default().to_owned();
            if description.chars().count() > self.config.max_description_chars {
                description = description.chars().take(self.config.max_description_chars).collect();
                description.push_str(" … [description cut by quiver]");
                cut_descriptions += 1;
            }
            let size = schema_bytes + description.len() + name.len();
            if list_bytes + size > self.config.max_list_kb * 1024 {
                over_budget += 1;
                continue;
            }
            list_bytes += size;
            let spec = ToolSpec {
                name: name.clone(),
                group: None,
                description,
                input_schema: json
                    .get("inputSchema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
                output_schema: json.get("outputSchema").cloned().filter(Value::is_object),
                sensitive_params: Vec::new(),
            };
            let declared = json.as_object().cloned().unwrap_or_default();
            tools.push((
                UpstreamTool {
                    name: ToolName::new(self.config.name.clone(), name),
                    spec,
                    annotations: json.get("annotations").cloned(),
                    declared,
                },
                removed,
            ));
        }
        if over_budget > 0 {
            tracing::warn!(
                upstream = %upstream,
                "{over_budget} tool(s) left out: its list is over {} KB (max_list_kb in its \
                 [[upstreams]] entry)",
                self.config.max_list_kb
            );
        }
        if cut_descriptions > 0 {
            tracing::warn!(
                upstream = %upstream,
                "{cut_descriptions} tool description(s) longer than {} characters were cut \
                 (max_description_chars in its [[upstreams]] entry)",
                self.config.max_description_chars
            );
        }
        tools.sort_by(|a, b| a.0.name.tool.cmp(&b.0.name.tool));
        let tools = self.apply_pins(tools);
        self.live().tools = tools;
        (self.changed)();
        Ok(())
    }

    /// The listed tools that are served: each definition checked against its pin and for signs
    /// of poisoning ([`quiver_core::pins::PinBook::check`]), what is held kept for the reports
    /// and for refusing its calls, and a WARN line for each newly held or warned tool.
    fn apply_pins(
        &self,
        listed: Vec<(UpstreamTool, quiver_core::untrusted::Removed)>,
    ) -> Vec<UpstreamTool> {
        use quiver_core::pins::{pinned_part, PinPolicy, Verdict};
        let upstream = &self.config.name;
        let own: Vec<String> = listed.iter().map(|(t, _)| t.spec.name.clone()).collect();
        let foreign: Vec<String> = {
            let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            known.insert(
                upstream.clone(),
                own.iter().map(|n| self.prefixed(n)).chain(own.iter().cloned()).collect(),
            );
            known
                .iter()
                .filter(|(owner, _)| *owner != upstream)
                .flat_map(|(_, names)| names.iter())
                .filter(|name| !own.contains(name))
                .cloned()
                .collect()
        };
        let policy = self.config.pin;
        if policy == PinPolicy::Off {
            self.live().held.clear();
            return listed.into_iter().map(|(tool, _)| tool).collect();
        }
        let checks: Vec<(serde_json::Value, Vec<String>)> = listed
            .iter()
            .map(|(tool, removed)| {
                let definition = pinned_part(&tool.declared);
                let mut flags = quiver_core::poisoned::signs(&definition, removed);
                // Naming another server's tool holds a definition only beside a strong sign:
                // alone, real servers do it to point to a tool (a WARN says so).
                if let Some(named) =
                    quiver_core::poisoned::other_servers_tools_named(&definition, &foreign)
                {
                    if flags.is_empty() {
                        tracing::warn!(
                            upstream = %upstream,
                            "tool `{}`: {named}",
                            logging::scrub(&quiver_core::terminal::for_terminal(&tool.spec.name, false))
                        );
                    } else {
                        flags.push(named);
                    }
                }
                (definition, flags)
            })
            .collect();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let verdicts = self.pins.update(upstream, |book| {
            let changed: Vec<bool> =
                own.iter().map(|name| book.pinned.contains_key(name)).collect();
            let verdicts: Vec<Verdict> = own
                .iter()
                .zip(&checks)
                .map(|(name, (definition, flags))| {
                    book.check(name, definition, flags, policy, now_ms)
                })
                .collect();
            (verdicts, changed)
        });
        let (verdicts, was_pinned) = match verdicts {
            Ok(decided) => decided,
            Err(e) => {
                // Without the store nothing is pinned; what looks poisoned is still held.
                tracing::warn!(upstream = %upstream, "{e}; its tools are checked for poisoning but not pinned");
                // Each judged as on first sight, in a book that keeps nothing.
                let mut unkept = quiver_core::pins::PinBook::default();
                let verdicts = own
                    .iter()
                    .zip(&checks)
                    .map(|(name, (definition, flags))| {
                        unkept.check(name, definition, flags, policy, now_ms)
                    })
                    .collect();
                (verdicts, vec![false; own.len()])
            }
        };
        *self.pins_seen.lock().unwrap_or_else(|e| e.into_inner()) = self.pins.version(upstream);
        let shown = |lines: &[String]| {
            logging::scrub(&quiver_core::terminal::for_terminal(&lines.join("\n"), true))
        };
        let before = std::mem::take(&mut self.live().held);
        let (mut served, mut held) = (Vec::new(), Vec::new());
        for (((tool, _), verdict), was_pinned) in listed.into_iter().zip(verdicts).zip(was_pinned) {
            let name = tool.spec.name.clone();
            match verdict {
                Verdict::Serve => served.push(tool),
                Verdict::Warned(reasons) => {
                    tracing::warn!(
                        upstream = %upstream,
                        "tool `{name}` is served (pin = \"warn\") although {}",
                        shown(&reasons)
                    );
                    served.push(tool);
                }
                Verdict::Hold(reasons) => {
                    let hold = HeldTool { tool: name.clone(), changed: was_pinned, reasons };
                    if !before.contains(&hold) {
                        tracing::warn!(
                            upstream = %upstream,
                            "tool `{name}` is held, not listed or called, because {}\nreview it with \
                             `quiver upstreams diff {upstream}`; serve it with `quiver upstreams \
                             approve {upstream} {name}`",
                            shown(&hold.reasons)
                        );
                    }
                    held.push(hold);
                }
            }
        }
        self.live().held = held;
        served
    }

    /// Whether the operator approved something since quiver last looked at its pins.
    fn approved_since(&self) -> bool {
        let now = self.pins.version(&self.config.name);
        *self.pins_seen.lock().unwrap_or_else(|e| e.into_inner()) != now
    }

    /// Serves until the connection ends; returns why it ended.
    async fn serve(self: &Arc<Self>, client: Client) -> String {
        let peer = client.peer().clone();
        // 2026-07-28 servers send list changes only on a listen stream that asked for them.
        let modern = speaks_2026_07_28(&peer);
        let mut subscription = if modern {
            peer.listen(self.listen_filter()).await.ok()
        } else {
            // A restart: the URIs clients subscribed to are subscribed at the new process.
            let uris: Vec<String> = self.subscriptions().keys().cloned().collect();
            for uri in uris {
                if let Err(e) = self.subscribe_at_upstream(&uri, true).await {
                    tracing::warn!(upstream = %self.config.name, "could not subscribe to {uri}: {e}");
                }
            }
            None
        };
        let cancel = client.cancellation_token();
        let mut done = tokio::spawn(client.waiting());
        let mut approvals = tokio::time::interval(APPROVAL_POLL);
        loop {
            let holds = !self.live().held.is_empty();
            let next_change = async {
                match subscription.as_mut() {
                    Some(s) => s.next().await.ok().flatten(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = self.relist.notified() => {
                    if let Err(e) = self.list(&peer).await {
                        tracing::warn!(upstream = %self.config.name, "{e}");
                    }
                }
                changed = next_change => match changed {
                    Some(rmcp::model::ServerNotification::ResourceUpdatedNotification(n)) => {
                        self.resource_updated(n.params.uri);
                    }
                    Some(rmcp::model::ServerNotification::ToolListChangedNotification(_)) => {
                        self.list_changed();
                    }
                    Some(rmcp::model::ServerNotification::PromptListChangedNotification(_)) => {
                        self.announce(UpstreamChange::PromptList(self.name().to_owned()));
                    }
                    Some(rmcp::model::ServerNotification::ResourceListChangedNotification(_)) => {
                        self.announce(UpstreamChange::ResourceList(self.name().to_owned()));
                    }
                    Some(_) => {}
                    None => subscription = None,
                },
                () = self.resubscribe.notified(), if modern => {
                    subscription = peer.listen(self.listen_filter()).await.ok();
                    self.listened.send_modify(|n| *n += 1);
                }
                _ = approvals.tick(), if holds => {
                    if self.approved_since() {
                        if let Err(e) = self.list(&peer).await {
                            tracing::warn!(upstream = %self.config.name, "{e}");
                        }
                    }
                }
                _ = &mut done => break,
                () = self.stopped.notified() => {
                    cancel.cancel();
                    let _ = done.await;
                    return "stopped".into();
                }
            }
        }
        "the server exited or closed its connection; restarting".into()
    }

    /// The server says its tools changed (a notification, or an event of its listen stream):
    /// list them again — once for a burst, since `relist` holds one permit — and say so in the
    /// log at most once per [`LIST_CHANGED_LOG_EVERY`], with how many came since. A server may
    /// send thousands.
    fn list_changed(&self) {
        let seen = {
            let mut log = self.list_changed_log.lock().unwrap_or_else(|e| e.into_inner());
            log.1 += 1;
            if log.0.is_none_or(|at| at.elapsed() >= LIST_CHANGED_LOG_EVERY) {
                let seen = log.1;
                *log = (Some(Instant::now()), 0);
                Some(seen)
            } else {
                None
            }
        };
        match seen {
            Some(1) => {
                tracing::info!(upstream = %self.config.name, "tool list changed; listing again")
            }
            Some(n) => tracing::info!(
                upstream = %self.config.name,
                "tool list changed {n} times since the last line; listing again"
            ),
            None => {}
        }
        self.relist.notify_one();
    }

    /// Keeps the last lines the server wrote to stderr, which usually say why it stopped (a
    /// missing package, a bad argument), for the operator: in the log and in `plugins` and
    /// `doctor`. Never in `reason`, which the server's instructions and `/readyz` may show:
    /// what a server prints can hold its own secrets (`DB_PASSWORD=…`).
    async fn keep_stderr_tail(&self) {
        // The reader may still be draining the pipe of a process that just exited: wait for the
        // end of the stream, within a bound for a child that is still alive.
        let closed = self.live().stderr_closed.take();
        if let Some(closed) = closed {
            let _ = tokio::time::timeout(STDERR_DRAIN, closed).await;
        }
        let mut live = self.live();
        let tail: Vec<String> = live.stderr_tail.drain(..).collect();
        live.last_stderr = (!tail.is_empty()).then(|| tail.join(" | "));
        if let Some(tail) = &live.last_stderr {
            tracing::warn!(upstream = %self.config.name, "its stderr ended with: {tail}");
        }
    }

    /// Kills the child's process group, if there is one.
    fn kill(&self) {
        if let Some(pgid) = self.live().pgid.take() {
            kill_group(pgid);
        }
    }

    /// Calls `tool` with `args` within `timeout`; setting `cancel` sends
    /// `notifications/cancelled` upstream and returns a `cancelled` error.
    pub async fn call(
        &self,
        tool: &str,
        args: Value,
        timeout: Option<Duration>,
        cancel: Arc<AtomicBool>,
    ) -> ToolResult {
        self.call_on(None, tool, args, timeout, cancel).await
    }

    /// [`Upstream::call`] carrying a caller's own `bearer` token (`auth = "passthrough" |
    /// "exchange"`), over a connection of that token's ([`Upstream::caller_peer`]).
    pub async fn call_as(
        self: &Arc<Self>,
        bearer: &str,
        tool: &str,
        args: Value,
        timeout: Option<Duration>,
        cancel: Arc<AtomicBool>,
    ) -> ToolResult {
        match self.caller_peer(bearer).await {
            Ok(peer) => self.call_on(Some(peer), tool, args, timeout, cancel).await,
            Err(e) => ToolResult::error(ToolErrorKind::Unauthorized, e),
        }
    }

    /// The connection that carries the caller's `bearer`: made on first use and kept, at most
    /// [`MAX_CALLER_CONNECTIONS`] (the least recently used closed first). Each token has its
    /// own, since a server binds a session to whoever opened it.
    async fn caller_peer(self: &Arc<Self>, bearer: &str) -> Result<Peer<RoleClient>, String> {
        use rmcp::transport::IntoTransport;
        let key = hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(bearer.as_bytes())[..16]);
        let mut callers = self.callers.lock().await;
        if let Some((client, used)) = callers.get_mut(&key) {
            if !client.is_closed() {
                *used = Instant::now();
                return Ok(client.peer().clone());
            }
        }
        let name = &self.config.name;
        let url = self.config.url.as_deref().ok_or_else(|| {
            format!("upstream `{name}` is not an HTTP server; it cannot take a caller's token")
        })?;
        logging::register_secret(bearer);
        let transport = self.http_transport(url, Some(bearer))?;
        let transport = IntoTransport::<RoleClient, _, _>::into_transport(transport);
        let client = self.handshake(transport).await.map_err(|e| {
            let raw = logging::scrub(&e.to_string());
            if raw.contains("Auth required") || raw.contains("401") {
                format!("upstream `{name}` ({url}) refused your token (401 Unauthorized)")
            } else {
                format!(
                    "upstream `{name}` could not be reached with your token: {}",
                    without_type_names(&raw)
                )
            }
        })?;
        if callers.len() >= MAX_CALLER_CONNECTIONS {
            let oldest = callers.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                callers.remove(&oldest);
            }
        }
        let peer = client.peer().clone();
        callers.insert(key, (client, Instant::now()));
        Ok(peer)
    }

    /// The caller's `subject` token exchanged (RFC 8693) at `[upstreams.exchange]` for one
    /// meant for this upstream; kept until shortly before it expires.
    pub async fn exchanged_token(&self, subject: &str) -> Result<String, String> {
        let name = &self.config.name;
        let exchange = self
            .config
            .exchange
            .as_ref()
            .ok_or_else(|| format!("[[upstreams]] `{name}` has no [upstreams.exchange]"))?;
        let key = hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(subject.as_bytes())[..16]);
        {
            let mut exchanged = self.exchanged.lock().unwrap_or_else(|e| e.into_inner());
            exchanged.retain(|_, (_, until)| *until > Instant::now());
            if let Some((token, _)) = exchanged.get(&key) {
                return Ok(token.clone());
            }
        }
        logging::register_secret(subject);
        let audience =
            exchange.audience.clone().or_else(|| self.config.url.clone()).unwrap_or_default();
        let mut form = vec![
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange".to_owned()),
            ("subject_token", subject.to_owned()),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token".to_owned()),
            ("requested_token_type", "urn:ietf:params:oauth:token-type:access_token".to_owned()),
            ("audience", audience.clone()),
            ("resource", audience),
            ("client_id", exchange.client_id.clone()),
        ];
        if let Some(scope) = &exchange.scope {
            form.push(("scope", scope.clone()));
        }
        if let Some(variable) = &exchange.client_secret_env {
            let secret = logging::secret_from_env(variable).ok_or_else(|| {
                format!("[upstreams.exchange] client_secret_env names {variable}, which is not set")
            })?;
            form.push(("client_secret", secret));
        }
        let response = crate::mcp_auth::client()
            .post(&exchange.token_url)
            .header("accept", "application/json")
            .form(&form)
            .send()
            .await
            .map_err(|e| {
                format!("{} cannot be reached: {}", exchange.token_url, e.without_url())
            })?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let Some(token) =
            body.get("access_token").and_then(Value::as_str).filter(|_| status.is_success())
        else {
            let error = body.get("error").and_then(Value::as_str).unwrap_or("no access_token");
            return Err(format!(
                "{} answered {status} ({})",
                exchange.token_url,
                logging::scrub(error)
            ));
        };
        logging::register_secret(token);
        let lives = body.get("expires_in").and_then(Value::as_u64).unwrap_or(300);
        // A minute early, so no call goes out with a token about to lapse.
        let until = Instant::now() + Duration::from_secs(lives.saturating_sub(60).max(1));
        self.exchanged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, (token.to_owned(), until));
        Ok(token.to_owned())
    }

    /// [`Upstream::call`] on `peer` (a caller's connection), else on the supervised one.
    async fn call_on(
        &self,
        caller: Option<Peer<RoleClient>>,
        tool: &str,
        args: Value,
        timeout: Option<Duration>,
        cancel: Arc<AtomicBool>,
    ) -> ToolResult {
        let name = &self.config.name;
        let (peer, state) = {
            let live = self.live();
            (caller.or_else(|| live.peer.clone()), live.state.clone())
        };
        let Some(peer) = peer else {
            return ToolResult::error(
                ToolErrorKind::Upstream,
                format!(
                    "upstream `{name}` is unavailable ({state}); `{name}.{tool}` works again once \
                     it restarts (`quiver doctor` shows why it stopped)"
                ),
            );
        };
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return ToolResult::error(
                    ToolErrorKind::InvalidArguments,
                    format!("arguments of `{name}.{tool}` must be a JSON object, got {other}"),
                )
            }
        };
        // The upstream's own `timeout_s` bounds every call; a caller may ask for less.
        let own = Duration::from_secs(self.config.timeout_s);
        let timeout = timeout.map_or(own, |t| t.min(own));
        let client = CALL_CLIENT.try_with(Arc::clone).ok();
        let modern = speaks_2026_07_28(&peer);
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        if let Some(client) = &client {
            // 2026-07-28 servers log only what a request's `_meta` asks for, at its level.
            if let (true, Some(level)) = (modern, client.log_level()) {
                params.meta.get_or_insert_with(Default::default).set_log_level(level);
            }
            // A later round of the client's own: the answers go to the upstream that asked.
            if let Some(round) = client.round() {
                params.input_responses = Some(round.responses);
                params.request_state = round.state;
            }
        }
        // The caller's trace goes on at the upstream: W3C trace context in `_meta`.
        for (key, value) in crate::traces::context_of(&tracing::Span::current()) {
            params.meta.get_or_insert_with(Default::default).0.insert(key, Value::String(value));
        }
        // 2026-07-28 servers ask for sampling, elicitation and roots with an `input_required`
        // answer and the call sent again with the answers (SEP-2322): a client that takes rounds
        // is handed the requests, any other is asked here, within the call.
        if !modern && self.runs_only_as_task(tool) {
            return self.call_as_task(&peer, tool, params, client.as_ref(), timeout, &cancel).await;
        }
        for _ in 0..MAX_INPUT_ROUNDS {
            let sent = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            let answer =
                match self.round(&peer, tool, sent, client.as_ref(), timeout, &cancel).await {
                    Ok(answer) => answer,
                    Err(result) => return result,
                };
            let input_required = match answer {
                ServerResult::InputRequiredResult(input_required) => input_required,
                ServerResult::CallToolResult(result) => {
                    return cap_text(from_mcp_result(
                        &serde_json::to_value(&result).unwrap_or(Value::Null),
                    ))
                }
                other => {
                    let json = serde_json::to_value(&other).unwrap_or(Value::Null);
                    return if json.get("content").is_some() {
                        from_mcp_result(&json)
                    } else {
                        ToolResult::error(
                            ToolErrorKind::Upstream,
                            format!(
                                "upstream `{name}` answered `{tool}` with something that is not \
                                 a tool result"
                            ),
                        )
                    };
                }
            };
            let Some(client) = &client else {
                return ToolResult::error(
                    ToolErrorKind::Upstream,
                    format!(
                        "upstream `{name}` needs the user's or the client's input for `{tool}`, \
                         and no client made this call (a pre-fetch)"
                    ),
                );
            };
            if client.takes_rounds() {
                let mut result = ToolResult::error(
                    ToolErrorKind::Upstream,
                    format!("upstream `{name}` needs the client's input for `{tool}`"),
                );
                result.metadata.insert(
                    INPUT_REQUIRED_METADATA.to_owned(),
                    serde_json::to_value(&input_required).unwrap_or(Value::Null),
                );
                return result;
            }
            let mut responses = rmcp::model::InputResponses::new();
            for (key, request) in input_required.input_requests.unwrap_or_default() {
                match answer_input(client.as_ref(), request).await {
                    Ok(response) => {
                        responses.insert(key, response);
                    }
                    Err(e) => {
                        return ToolResult::error(
                            ToolErrorKind::Upstream,
                            format!(
                                "upstream `{name}` needs input for `{tool}` that the client could \
                                 not give: {}",
                                logging::scrub(&e.message)
                            ),
                        )
                    }
                }
            }
            params.input_responses = Some(responses);
            params.request_state = input_required.request_state;
        }
        ToolResult::error(
            ToolErrorKind::Upstream,
            format!(
                "upstream `{name}` asked for input {MAX_INPUT_ROUNDS} times for `{tool}` without \
                 answering; the call was given up"
            ),
        )
    }

    /// How the upstream declares `tool` may run as a task (2025-11-25's
    /// `execution.taskSupport`: `"required"`, `"optional"`, `"forbidden"`), if it says.
    fn task_support(&self, tool: &str) -> Option<String> {
        self.live().tools.iter().find_map(|t| {
            (t.declared.get("name").and_then(Value::as_str) == Some(tool))
                .then(|| t.declared.get("execution")?.get("taskSupport")?.as_str())
                .flatten()
                .map(str::to_owned)
        })
    }

    /// Whether the upstream declares `tool` callable only as a task.
    fn runs_only_as_task(&self, tool: &str) -> bool {
        self.task_support(tool).as_deref() == Some("required")
    }

    /// Whether the upstream declares `tool` as one that may run as a task (required or
    /// optional): long work, which quiver hands a client that takes tasks as one.
    pub fn runs_as_task(&self, tool: &str) -> bool {
        matches!(self.task_support(tool).as_deref(), Some("required" | "optional"))
    }

    /// Calls a tool the upstream runs only as a task (2025-11-25 tasks): the call made
    /// task-augmented, then `tasks/result`, which the server answers once the task ends — with
    /// the tool's result, as a plain call would have been answered. Both requests are the
    /// client's call in flight, so what the server asks within the task (elicitation, sampling)
    /// reaches that client as it does in a plain call. Cancelled or out of time, the upstream is
    /// told to cancel the task as well as the request.
    async fn call_as_task(
        &self,
        peer: &Peer<RoleClient>,
        tool: &str,
        params: CallToolRequestParams,
        client: Option<&Arc<dyn CallClient>>,
        timeout: Duration,
        cancel: &AtomicBool,
    ) -> ToolResult {
        let name = &self.config.name;
        let deadline = Instant::now() + timeout;
        let mut augmented = serde_json::to_value(&params).unwrap_or_else(|_| json!({}));
        // The task may outlive the call by nothing: it is of no use once the call is answered.
        augmented["task"] =
            json!({ "ttl": u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX) });
        let create = raw_request("tools/call", augmented);
        let created = match self.round(peer, tool, create, client, timeout, cancel).await {
            Ok(answer) => serde_json::to_value(&answer).unwrap_or(Value::Null),
            Err(stopped) => return stopped,
        };
        let Some(task_id) = created.pointer("/task/taskId").and_then(Value::as_str) else {
            // A server may answer a task-augmented call at once, with the result itself.
            return tool_result_of(&created).unwrap_or_else(|| {
                ToolResult::error(
                    ToolErrorKind::Upstream,
                    format!(
                        "upstream `{name}` runs `{tool}` only as a task, and answered the call \
                         with neither a task nor a result"
                    ),
                )
            });
        };
        // What the server asks within its task names the task: it goes to this call's client
        // while the task runs, whatever else is in flight.
        let _routed = client.map(|client| TaskRoute::new(&self.task_clients, task_id, client));
        let task = json!({ "taskId": task_id });
        let result = raw_request("tasks/result", task.clone());
        let left = deadline.saturating_duration_since(Instant::now());
        let answered = self.round(peer, tool, result, client, left, cancel);
        let poll_every = created
            .pointer("/task/pollInterval")
            .and_then(Value::as_u64)
            .map_or(Duration::from_secs(1), Duration::from_millis)
            .clamp(Duration::from_millis(100), Duration::from_secs(5));
        let answered = tokio::select! {
            answered = answered => answered,
            never = report_task_status(peer, &task, poll_every) => match never {},
        };
        match answered {
            Ok(answer) => tool_result_of(&serde_json::to_value(&answer).unwrap_or(Value::Null))
                .unwrap_or_else(|| {
                    ToolResult::error(
                        ToolErrorKind::Upstream,
                        format!(
                            "upstream `{name}` ended the task of `{tool}` without a tool \
                                 result"
                        ),
                    )
                }),
            Err(stopped) => {
                // Cancelled, out of time or failed: the task is told to stop too, best effort —
                // the call is answered with why it stopped whatever this gets.
                let told = peer.send_request(raw_request("tasks/cancel", task));
                let _ = tokio::time::timeout(Duration::from_secs(2), told).await;
                stopped
            }
        }
    }

    /// Sends one round of a call and waits for its answer, within `timeout`, or until `cancel`
    /// is set (the upstream is then told to cancel).
    async fn round(
        &self,
        peer: &Peer<RoleClient>,
        tool: &str,
        request: ClientRequest,
        client: Option<&Arc<dyn CallClient>>,
        timeout: Duration,
        cancel: &AtomicBool,
    ) -> Result<ServerResult, ToolResult> {
        let name = &self.config.name;
        let handle =
            match peer.send_cancellable_request(request, PeerRequestOptions::no_options()).await {
                Ok(handle) => handle,
                Err(e) => {
                    return Err(ToolResult::error(
                        ToolErrorKind::Upstream,
                        format!(
                            "upstream `{name}` could not be reached: {}",
                            logging::scrub(&e.to_string())
                        ),
                    ))
                }
            };
        let (id, token) = (handle.id.clone(), handle.progress_token.clone());
        if let Ok(sink) = CALL_PROGRESS.try_with(Arc::clone) {
            self.progress_sink(token.clone(), sink);
        }
        {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            in_flight.0 += 1;
            if let Some(client) = client {
                in_flight.1.insert(id.clone(), Arc::clone(client));
            }
        }
        let response = handle.await_response();
        tokio::pin!(response);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut poll = tokio::time::interval(Duration::from_millis(25));
        let outcome = loop {
            tokio::select! {
                answer = &mut response => break Ok(answer),
                () = &mut deadline => break Err(ToolResult::error(
                    ToolErrorKind::Timeout,
                    format!("`{name}.{tool}` did not answer within {} ms; the upstream was told to cancel it", timeout.as_millis()),
                )),
                _ = poll.tick() => {
                    if cancel.load(Ordering::SeqCst) {
                        break Err(ToolResult::error(ToolErrorKind::Cancelled, format!("`{name}.{tool}` was cancelled")));
                    }
                }
            }
        };
        self.progress.lock().unwrap_or_else(|e| e.into_inner()).remove(&token);
        {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            in_flight.0 = in_flight.0.saturating_sub(1);
            in_flight.1.remove(&id);
        }
        match outcome {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(rmcp::ServiceError::TransportClosed)) => Err(ToolResult::error(
                ToolErrorKind::Upstream,
                format!(
                    "upstream `{name}` closed its connection during `{tool}` (it may have \
                     crashed); quiver restarts it, so retry in a few seconds"
                ),
            )),
            Ok(Err(e)) => Err(ToolResult::error(
                ToolErrorKind::Upstream,
                format!(
                    "upstream `{name}` failed on `{tool}`: {}",
                    without_type_names(&logging::scrub(&e.to_string()))
                ),
            )),
            Err(stopped) => {
                send_cancelled(peer, id).await;
                Err(stopped)
            }
        }
    }
}

/// While a task runs, its status messages ("Gathering sources…") go to the caller as progress,
/// one step each, when the caller asked for progress: polled with `tasks/get` every
/// `poll_every` (the server's suggested interval); `tasks/result` says nothing until the end.
/// Runs until dropped.
async fn report_task_status(
    peer: &Peer<RoleClient>,
    task: &Value,
    poll_every: Duration,
) -> std::convert::Infallible {
    let Ok(sink) = CALL_PROGRESS.try_with(Arc::clone) else {
        // No one to tell: nothing is polled.
        return std::future::pending().await;
    };
    let (mut steps, mut last) = (0u32, String::new());
    loop {
        tokio::time::sleep(poll_every).await;
        let Ok(status) = peer.send_request(raw_request("tasks/get", task.clone())).await else {
            continue;
        };
        let status = serde_json::to_value(&status).unwrap_or(Value::Null);
        let Some(message) = status.get("statusMessage").and_then(Value::as_str) else { continue };
        if message != last {
            steps += 1;
            last = message.to_owned();
            sink(f64::from(steps), None, Some(logging::scrub(message)));
        }
    }
}

/// A call's client, found by the upstream task the call runs as, for as long as this lives.
struct TaskRoute<'a> {
    routes: &'a Mutex<HashMap<String, Arc<dyn CallClient>>>,
    task_id: String,
}

impl<'a> TaskRoute<'a> {
    fn new(
        routes: &'a Mutex<HashMap<String, Arc<dyn CallClient>>>,
        task_id: &str,
        client: &Arc<dyn CallClient>,
    ) -> Self {
        let mut clients = routes.lock().unwrap_or_else(|e| e.into_inner());
        clients.insert(task_id.to_owned(), Arc::clone(client));
        Self { routes, task_id: task_id.to_owned() }
    }
}

impl Drop for TaskRoute<'_> {
    fn drop(&mut self) {
        self.routes.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.task_id);
    }
}

/// A request rmcp has no type for (2025-11-25's tasks), sent as it is written.
fn raw_request(method: &str, params: Value) -> ClientRequest {
    ClientRequest::CustomRequest(rmcp::model::CustomRequest::new(method, Some(params)))
}

/// `answer` as a tool result (capped as every upstream result), when it is one.
fn tool_result_of(answer: &Value) -> Option<ToolResult> {
    answer.get("content").is_some().then(|| cap_text(from_mcp_result(answer)))
}

/// Whether the server and quiver speak 2026-07-28 (no `initialize`): its logging, list changes,
/// subscriptions and requests for input work per request, not per connection.
fn speaks_2026_07_28(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info().is_some_and(|info| !info.protocol_version.has_initialize())
}

/// The newest revision both sides know: 2026-07-28 through `server/discover`, else `initialize`
/// at 2025-11-25 (older servers answer with theirs).
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// reqwest's rustls (and the HTTPS server's) is built without a crypto provider, so the process
/// installs ring's, the workspace's one TLS stack, before the first TLS connection: every rustls
/// user in quiver calls this.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

async fn send_cancelled(peer: &Peer<RoleClient>, id: RequestId) {
    let notification = CancelledNotification::new(CancelledNotificationParam::new(
        Some(id),
        Some("cancelled by quiver's client or past its deadline".into()),
    ));
    let _ = peer.send_notification(ClientNotification::CancelledNotification(notification)).await;
}

/// The metadata key of an upstream result whose structured value quiver read from its one JSON
/// text block (the server sent no `structuredContent`).
pub const STRUCTURED_FROM_TEXT: &str = "structured_from_text";

/// Longest text an upstream result keeps, in bytes: a model cannot use more, and a server that
/// answers with megabytes must not fill the client's context.
pub const MAX_RESULT_TEXT: usize = 256 * 1024;

/// `result` with its content cut to [`MAX_RESULT_TEXT`] bytes in all — the whole answer, not
/// each block, so 60 blocks of 250 KB do not reach the client as 15 MB: text on a character
/// boundary; an image, audio, resource or link counted by its size and kept or left out whole
/// (half a picture is no picture); the blocks past the budget left out, saying how much; a
/// structured value too large to keep is dropped likewise.
fn cap_text(mut result: ToolResult) -> ToolResult {
    let mut budget = MAX_RESULT_TEXT;
    let (mut left_bytes, mut left_blocks) = (0usize, 0usize);
    let mut kept = Vec::with_capacity(result.content.len());
    for content in std::mem::take(&mut result.content) {
        let Content::Text { mut text, annotations, meta } = content else {
            let size = content.size();
            if size > budget {
                left_bytes += size;
                left_blocks += 1;
            } else {
                budget -= size;
                kept.push(content);
            }
            continue;
        };
        if budget == 0 {
            left_bytes += text.len();
            left_blocks += 1;
            continue;
        }
        if text.len() > budget {
            let mut end = budget;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            left_bytes += text.len() - end;
            text.truncate(end);
        }
        budget -= text.len();
        kept.push(Content::Text { text, annotations, meta });
    }
    result.content = kept;
    let mut cut = left_bytes > 0;
    if cut {
        let blocks = if left_blocks > 0 {
            format!(" ({left_blocks} more block(s) left out)")
        } else {
            String::new()
        };
        let note = format!(
            "\n… [cut by quiver: {} KB more{blocks}; ask the tool for less, e.g. a page or a range]",
            left_bytes / 1024
        );
        match result.content.iter_mut().rev().find_map(|c| match c {
            Content::Text { text, .. } => Some(text),
            _ => None,
        }) {
            Some(text) => text.push_str(&note),
            None => result.content.push(Content::text(note.trim_start())),
        }
    }
    if result.structured.as_ref().is_some_and(|v| v.to_string().len() > MAX_RESULT_TEXT) {
        result.structured = None;
        cut = true;
    }
    if cut {
        result.metadata.insert("cut".into(), json!(true));
    }
    result
}

/// An MCP `CallToolResult` as a [`ToolResult`]: every block as the server sent it (text with its
/// annotations, images, audio, embedded resources, resource links); a block of a kind this
/// revision does not know as its JSON text, so nothing is lost; `structuredContent` as the
/// structured value, `isError` as an upstream error.
fn from_mcp_result(json: &Value) -> ToolResult {
    let content: Vec<Content> = json
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .map(|block| {
                    serde_json::from_value::<Content>(block.clone())
                        .unwrap_or_else(|_| Content::text(block.to_string()))
                })
                .collect()
        })
        .unwrap_or_default();
    let is_error = json.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let sent = json.get("structuredContent").cloned().filter(|v| !v.is_null());
    let read_from_text = sent.is_none();
    let structured = sent.or_else(|| {
        // A single JSON text block is data the pipeline can project and cache by field.
        match content.as_slice() {
            [Content::Text { text, .. }] if !is_error => {
                serde_json::from_str::<Value>(text).ok().filter(Value::is_object)
            }
            _ => None,
        }
    });
    let mut metadata = BTreeMap::new();
    if read_from_text && structured.is_some() {
        // Data for the pipeline, not something the server sent its clients.
        metadata.insert(STRUCTURED_FROM_TEXT.to_owned(), json!(true));
    }
    ToolResult {
        content,
        structured,
        is_error,
        error_kind: is_error.then_some(ToolErrorKind::Upstream),
        metadata,
    }
}

/// The value-model layer an upstream's `annotations` give a tool: `readOnlyHint` makes it
/// `read_only`, a write with `destructiveHint: false` (or unset `readOnlyHint: false`) a
/// `mutates_external` one. Hints only: the host never pre-fetches on their word alone.
pub fn annotation_layer(annotations: Option<&Value>) -> Option<quiver_core::ValueModelLayer> {
    let annotations = annotations?;
    let read_only = annotations.get("readOnlyHint").and_then(Value::as_bool)?;
    let class = if read_only { "read_only" } else { "mutates_external" };
    serde_json::from_value(json!({ "side_effect_class": class })).ok()
}

/// Whether an environment variable looks like it holds a credential, and so stays out of an
/// upstream's environment unless its `env` list names it.
fn looks_like_credential(key: &str) -> bool {
    let key = key.to_ascii_uppercase();
    ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "CREDENTIAL", "PRIVATE_KEY"]
        .iter()
        .any(|s| key.contains(s))
        || key.ends_with("_KEY")
        || key.ends_with("_PAT")
}

fn kill_group(pgid: u32) {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    if let Ok(pgid) = i32::try_from(pgid) {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

/// The upstream task a request of an upstream's belongs to (2025-11-25's
/// `io.modelcontextprotocol/related-task` in its `_meta`, which rmcp moves from the request's
/// params into its context), if it says.
fn related_task(context: &rmcp::service::RequestContext<RoleClient>) -> Option<String> {
    let related = context.meta.get("io.modelcontextprotocol/related-task")?;
    related.get("taskId")?.as_str().map(str::to_owned)
}

/// Handles what an upstream sends on its own: list changes and progress.
struct UpstreamHandler {
    upstream: Weak<Upstream>,
}

impl UpstreamHandler {
    /// The client an upstream's request is for: the client of the one call in flight to it.
    /// With none, or several (quiver cannot tell whose call the request belongs to), or a
    /// client that did not declare `can`, the upstream is told the request is not supported —
    /// never answered on a user's behalf.
    fn client_for(
        &self,
        what: &str,
        related_task: Option<&str>,
        can: impl Fn(&rmcp::model::ClientCapabilities) -> bool,
    ) -> Result<Arc<dyn CallClient>, rmcp::ErrorData> {
        let not_supported =
            |why: String| rmcp::ErrorData::new(rmcp::model::ErrorCode::METHOD_NOT_FOUND, why, None);
        let Some(upstream) = self.upstream.upgrade() else {
            return Err(not_supported(format!("{what}: not supported")));
        };
        let of_task = related_task.and_then(|id| {
            let task_clients = upstream.task_clients.lock().unwrap_or_else(|e| e.into_inner());
            task_clients.get(id).cloned()
        });
        let client =
            of_task.map_or_else(|| upstream.sole_client(), Ok).map_err(|none_in_flight| {
                not_supported(if none_in_flight {
                    format!("{what}: no call is in flight, so no client of quiver's can answer")
                } else {
                    format!(
                        "{what}: not supported while quiver runs several calls of this server or \
                     one no client made (a pre-fetch), as it cannot tell whose it is"
                    )
                })
            })?;
        if !can(&client.capabilities()) {
            return Err(not_supported(format!("{what}: the client did not declare it")));
        }
        Ok(client)
    }
}

#[allow(deprecated)] // sampling and roots: see `CallClient`
impl ClientHandler for UpstreamHandler {
    /// Everything a client of quiver's may offer: each request is passed to the client of the
    /// call it comes in, which answers or is said not to support it.
    fn get_info(&self) -> ClientConfig {
        let capabilities: rmcp::model::ClientCapabilities = serde_json::from_value(json!({
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
            "roots": {},
        }))
        .unwrap_or_default();
        ClientConfig::new(capabilities, Implementation::new("quiver", env!("CARGO_PKG_VERSION")))
    }

    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        let task = related_task(&context);
        let client = self.client_for("sampling", task.as_deref(), |c| c.sampling.is_some())?;
        client.create_message(params).await
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let task = related_task(&context);
        let client =
            self.client_for("elicitation", task.as_deref(), |c| can_elicit(c, &request))?;
        client.create_elicitation(request).await
    }

    async fn list_roots(
        &self,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        let task = related_task(&context);
        let client = self.client_for("roots", task.as_deref(), |c| c.roots.is_some())?;
        client.list_roots().await
    }

    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some(upstream) = self.upstream.upgrade() else { return };
        let Some(params) = upstream.log_for_clients(&params) else { return };
        // Nobody listening is fine.
        let _ = upstream.logs.send(UpstreamLog { upstream: upstream.name().to_owned(), params });
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(upstream) = self.upstream.upgrade() {
            upstream.resource_updated(params.uri);
        }
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(upstream) = self.upstream.upgrade() {
            upstream.announce(UpstreamChange::PromptList(upstream.name().to_owned()));
        }
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(upstream) = self.upstream.upgrade() {
            upstream.announce(UpstreamChange::ResourceList(upstream.name().to_owned()));
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(upstream) = self.upstream.upgrade() {
            upstream.list_changed();
        }
    }

    // Progress is delivered by `ProgressInOrder`, in the order it arrives, before the answer it
    // precedes: the library's notification handlers run on tasks of their own, which may run
    // after the call's answer has gone out.
}

/// An upstream's transport that hands each progress notification to its call's sink as it is
/// read — in the order the upstream sent it, before the message after it (the call's answer)
/// is even read — so the client of the call gets every progress notification, the last one
/// included, before the result.
struct ProgressInOrder<T> {
    inner: T,
    upstream: Weak<Upstream>,
}

impl<T: rmcp::transport::Transport<RoleClient>> rmcp::transport::Transport<RoleClient>
    for ProgressInOrder<T>
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = self.inner.receive().await?;
            if let rmcp::model::JsonRpcMessage::Notification(notification) = &message {
                match &notification.notification {
                    rmcp::model::ServerNotification::ProgressNotification(progress) => {
                        deliver_progress(&self.upstream, &progress.params);
                    }
                    rmcp::model::ServerNotification::LoggingMessageNotification(log)
                        if deliver_log(&self.upstream, &log.params) =>
                    {
                        continue;
                    }
                    _ => {}
                }
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// Hands a log message (masked) to the client of the call in flight, when exactly one is and a
/// client made it: a message cannot say which call it belongs to, and one call's log must not
/// reach another client. Whether it was handed on; if not, it goes to every client that asked
/// for the upstream's messages (see [`Upstreams::logs`]).
#[allow(deprecated)] // logging: see `CallClient`
fn deliver_log(
    upstream: &Weak<Upstream>,
    params: &rmcp::model::LoggingMessageNotificationParam,
) -> bool {
    let Some(upstream) = upstream.upgrade() else { return false };
    let Ok(client) = upstream.sole_client() else { return false };
    let Some(json) = upstream.log_for_clients(params) else { return false };
    let Ok(params) = serde_json::from_value(json) else { return false };
    client.log(params);
    true
}

/// Hands `params` to the sink of the call its token names, its message masked — or, when that
/// call's sink is not in place yet, keeps it for the sink ([`Upstream::progress_sink`]). A sink
/// only queues (it never waits), so it is called under the lock: progress reaches it in the
/// order it came, the kept part first.
fn deliver_progress(upstream: &Weak<Upstream>, params: &ProgressNotificationParam) {
    let Some(upstream) = upstream.upgrade() else { return };
    let sinks = upstream.progress.lock().unwrap_or_else(|e| e.into_inner());
    match sinks.get(&params.progress_token) {
        Some(sink) => to_sink(sink, params),
        None => {
            let mut early = upstream.early_progress.lock().unwrap_or_else(|e| e.into_inner());
            // Kept briefly, and a few: a token nobody claims (a call that failed to send) must
            // not grow this.
            early.retain(|(at, _)| at.elapsed() < EARLY_PROGRESS_KEPT);
            if early.len() >= EARLY_PROGRESS_MAX {
                early.pop_front();
            }
            early.push_back((Instant::now(), params.clone()));
        }
    }
}

fn to_sink(sink: &ProgressSink, params: &ProgressNotificationParam) {
    sink(params.progress, params.total, params.message.as_deref().map(logging::scrub));
}

/// How long, and how many, progress notifications are kept for a call whose sink is not in place.
const EARLY_PROGRESS_KEPT: Duration = Duration::from_secs(10);
const EARLY_PROGRESS_MAX: usize = 256;

impl Upstream {
    /// Puts `sink` in place for the call whose progress token is `token`, handing it first what
    /// came for it before.
    fn progress_sink(&self, token: ProgressToken, sink: ProgressSink) {
        let mut sinks = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        let mut early = self.early_progress.lock().unwrap_or_else(|e| e.into_inner());
        early.retain(|(_, params)| {
            let ours = params.progress_token == token;
            if ours {
                to_sink(&sink, params);
            }
            !ours
        });
        drop(early);
        sinks.insert(token, sink);
    }
}

/// Every configured upstream, supervised.
pub struct Upstreams {
    list: Vec<Arc<Upstream>>,
    known: KnownTools,
    version: Arc<watch::Sender<u64>>,
    started: AtomicBool,
    logs: tokio::sync::broadcast::Sender<UpstreamLog>,
    updates: tokio::sync::broadcast::Sender<UpstreamChange>,
}

/// What an upstream says changed besides its tools, named by the upstream's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamChange {
    /// A resource changed (`notifications/resources/updated`); its URI as the upstream wrote it
    /// (quiver lists URIs unchanged).
    ResourceUpdated {
        /// The upstream's name.
        upstream: String,
        /// The resource's URI.
        uri: String,
    },
    /// Its list of resources changed.
    ResourceList(String),
    /// Its list of prompts changed.
    PromptList(String),
}

/// A log message an upstream sent (`notifications/message`), masked: its upstream's name and
/// the MCP params (`level`, `logger` naming the upstream, `data`).
#[derive(Debug, Clone)]
pub struct UpstreamLog {
    /// The upstream's name.
    pub upstream: String,
    /// `level`, `logger`, `data`, as MCP writes them.
    pub params: Value,
}

impl Upstreams {
    /// Every upstream's log messages from now on.
    pub fn logs(&self) -> tokio::sync::broadcast::Receiver<UpstreamLog> {
        self.logs.subscribe()
    }

    /// Every upstream's resource and prompt changes from now on.
    pub fn changes(&self) -> tokio::sync::broadcast::Receiver<UpstreamChange> {
        self.updates.subscribe()
    }

    /// The upstreams of a config; nothing starts until [`Upstreams::start`].
    pub fn new(configs: &[UpstreamConfig]) -> Self {
        // A client slower than 256 messages behind loses the oldest, never blocks an upstream.
        let logs = tokio::sync::broadcast::channel(256).0;
        let updates = tokio::sync::broadcast::channel(256).0;
        let version = Arc::new(watch::channel(0u64).0);
        let bump = {
            let version = Arc::downgrade(&version);
            Arc::new(move || {
                if let Some(version) = Weak::upgrade(&version) {
                    version.send_modify(|v| *v += 1);
                }
            }) as Arc<dyn Fn() + Send + Sync>
        };
        let known = KnownTools::default();
        let list = configs
            .iter()
            .map(|config| {
                Arc::new(Upstream::new(
                    config.clone(),
                    Arc::clone(&bump),
                    logs.clone(),
                    updates.clone(),
                    Arc::clone(&known),
                ))
            })
            .collect();
        Self { list, known, version, started: AtomicBool::new(false), logs, updates }
    }

    /// Where `auth = "oauth"` upstreams get the operator's token (set once, before they start).
    pub fn set_operator_tokens(&self, source: OperatorTokens) {
        for upstream in &self.list {
            let _ = upstream.operator_tokens.set(Arc::clone(&source));
        }
    }

    /// The plugins' tool names (bare and as MCP lists them): an upstream tool's description
    /// naming one is flagged.
    pub fn know_plugin_tools(&self, names: Vec<String>) {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).insert(String::new(), names);
    }

    /// Starts every enabled upstream in parallel on the current tokio runtime and waits until
    /// each has connected or failed (each bounded by its own start-up timeout). Supervision goes
    /// on in the background. A second call does nothing.
    pub async fn start(&self) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        install_kill_on_panic();
        let mut waits = tokio::task::JoinSet::new();
        for upstream in &self.list {
            if !upstream.config.enabled {
                continue;
            }
            register_child(upstream);
            let mut first = upstream.first_attempt.subscribe();
            tokio::spawn(Arc::clone(upstream).supervise());
            waits.spawn(async move {
                let _ = first.wait_for(|done| *done).await;
            });
        }
        while waits.join_next().await.is_some() {}
    }

    /// Each upstream's report, in config order.
    pub fn reports(&self) -> Vec<UpstreamReport> {
        self.list.iter().map(|u| u.report()).collect()
    }

    /// The upstreams.
    pub fn all(&self) -> &[Arc<Upstream>] {
        &self.list
    }

    /// The upstream of that name.
    pub fn get(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.list.iter().find(|u| u.config.name == name)
    }

    /// Counts changes of any upstream's tools or state: a server rebuilds its list on a change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// The current change count.
    pub fn version(&self) -> u64 {
        *self.version.borrow()
    }

    /// Stops supervision and kills every child now.
    pub fn kill_all(&self) {
        for upstream in &self.list {
            upstream.stop.store(true, Ordering::SeqCst);
            upstream.stopped.notify_waiters();
            upstream.kill();
        }
    }
}

impl Drop for Upstreams {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Upstreams whose children a panic must kill.
static CHILDREN: Mutex<Vec<Weak<Upstream>>> = Mutex::new(Vec::new());

fn register_child(upstream: &Arc<Upstream>) {
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::downgrade(upstream));
}

/// On a panic of quiver's own, kill every child before the process goes.
fn install_kill_on_panic() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Ok(children) = CHILDREN.try_lock() {
                for upstream in children.iter().filter_map(Weak::upgrade) {
                    if let Ok(mut live) = upstream.live.try_lock() {
                        if let Some(pgid) = live.pgid.take() {
                            kill_group(pgid);
                        }
                    }
                }
            }
            previous(info);
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> UpstreamConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_tools_list_answers_execution_hints_are_kept_by_tool_and_other_frames_ignored() {
        let executions = Mutex::new(HashMap::new());
        let listing = br#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"research","execution":{"taskSupport":"required"}},{"name":"echo"}]}}"#;
        keep_executions(listing, &executions);
        // A call's answer that only mentions the word changes nothing.
        let answer = br#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"\"execution\": none"}]}}"#;
        keep_executions(answer, &executions);
        let kept = executions.into_inner().unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept["research"], json!({"taskSupport": "required"}));
    }

    #[test]
    fn an_entry_needs_one_transport_and_a_usable_name() {
        assert_eq!(config("name = \"fs\"\ncommand = \"npx\"").problem(), None);
        let both = config("name = \"fs\"\ncommand = \"npx\"\nurl = \"http://x\"");
        assert!(both.problem().unwrap().contains("both"), "{both:?}");
        let none = config("name = \"fs\"");
        assert!(none.problem().unwrap().contains("needs `command`"));
        let dotted = config("name = \"a.b\"\ncommand = \"x\"");
        assert!(dotted.problem().unwrap().contains("letters, digits"));
        assert!(toml::from_str::<UpstreamConfig>("name = \"x\"\ncomand = \"npx\"").is_err());
    }

    #[test]
    fn credentials_stay_out_of_a_childs_environment() {
        for key in
            ["GITHUB_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "gh_pat"]
        {
            assert!(looks_like_credential(key), "{key}");
        }
        for key in ["PATH", "HOME", "LANG", "NODE_OPTIONS", "KEYBOARD"] {
            assert!(!looks_like_credential(key), "{key}");
        }
    }

    #[test]
    fn annotations_set_the_class_and_nothing_else() {
        let read = annotation_layer(Some(&json!({"readOnlyHint": true}))).unwrap();
        assert_eq!(serde_json::to_value(&read).unwrap()["side_effect_class"], "read_only");
        let write =
            annotation_layer(Some(&json!({"readOnlyHint": false, "destructiveHint": false})));
        assert_eq!(
            serde_json::to_value(write.unwrap()).unwrap()["side_effect_class"],
            "mutates_external"
        );
        assert!(annotation_layer(Some(&json!({"title": "x"}))).is_none());
        assert!(annotation_layer(None).is_none());
    }

    #[test]
    fn many_blocks_are_capped_as_a_whole() {
        let block = || Content::text("y".repeat(250 * 1024));
        let result = cap_text(ToolResult {
            content: (0..60).map(|_| block()).collect(),
            ..ToolResult::default()
        });
        let total: usize = result.text_content().len();
        assert!(total < MAX_RESULT_TEXT + 300, "{total} bytes of 15 MB kept");
        assert_eq!(result.content.len(), 2, "one whole block and the start of the next");
        assert!(
            result.text_content().contains("(58 more block(s) left out)"),
            "{}",
            &result.text_content()[total - 200..]
        );
    }

    #[test]
    fn an_oversized_frame_is_answered_by_its_id_from_either_end() {
        let python = br#"{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"zzz"#;
        assert_eq!(frame_id(python, b"zzz\"}]}}\n"), Some(json!(12)));
        let node = br#"{"result":{"content":[{"type":"text","id":99,"text":"zzz"#;
        assert_eq!(
            frame_id(node, br#"zzz"}]},"jsonrpc":"2.0","id":"req-7"}"#),
            Some(json!("req-7"))
        );
        assert_eq!(frame_id(b"zzzz", b"zzzz"), None);
    }

    #[test]
    fn images_and_resources_pass_through_whole_or_not_at_all() {
        let image = |kb: usize| json!({"type": "image", "data": "A".repeat(kb * 1024), "mimeType": "image/png"});
        let answer = json!({"content": [
            {"type": "text", "text": "two pictures", "annotations": {"audience": ["user"]}},
            image(100),
            {"type": "resource_link", "uri": "file:///x.md", "name": "x.md"},
            image(200),
            {"type": "hologram", "beam": 1},
        ]});
        let result = cap_text(from_mcp_result(&answer));
        // The text keeps its annotations, the first picture and the link pass as they came;
        // the second picture would pass the cap, so it is left out whole and the note says so.
        assert!(matches!(&result.content[0], Content::Text { annotations: Some(_), .. }));
        assert!(matches!(&result.content[1], Content::Image(b) if b["mimeType"] == "image/png"));
        assert!(
            matches!(&result.content[2], Content::ResourceLink(b) if b["uri"] == "file:///x.md")
        );
        // A kind of block this revision does not know stays, as its JSON.
        assert!(result.text_content().contains("hologram"), "{:?}", result.content);
        assert!(!result.content.iter().skip(3).any(|c| matches!(c, Content::Image(_))));
        assert!(result.text_content().contains("1 more block(s) left out"), "{:?}", result.content);
    }

    #[test]
    fn huge_texts_are_cut_and_say_so() {
        let result = cap_text(ToolResult::text("é".repeat(MAX_RESULT_TEXT)));
        let text = result.text_content();
        assert!(text.len() < MAX_RESULT_TEXT + 200, "{}", text.len());
        assert!(
            text.ends_with("ask the tool for less, e.g. a page or a range]"),
            "{}",
            &text[text.len() - 100..]
        );
        assert_eq!(result.metadata.get("cut"), Some(&json!(true)));
    }

    #[test]
    fn results_keep_text_structure_and_errors() {
        let ok = from_mcp_result(&json!({"content": [{"type": "text", "text": "{\"a\":1}"}]}));
        assert_eq!(ok.structured, Some(json!({"a": 1})));
        assert!(!ok.is_error);
        let err =
            from_mcp_result(&json!({"content": [{"type": "text", "text": "no"}], "isError": true}));
        assert!(err.is_error);
        assert_eq!(err.error_kind, Some(ToolErrorKind::Upstream));
        let image = from_mcp_result(
            &json!({"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]}),
        );
        assert!(matches!(&image.content[..], [Content::Image(b)] if b["data"] == "AA=="));
        assert_eq!(image.text_content(), "", "a picture is no text for the model");
    }
}
