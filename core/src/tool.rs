//! The tool contracts: what a tool is ([`ToolSpec`]), what a call carries ([`ToolContext`]) and
//! what it returns ([`ToolResult`]).
//!
//! A call is explicit: everything it needs arrives in its arguments and its context. There is no
//! hidden session state a tool could fall back on, so a call made by the planner, by the CLI or by
//! an MCP client behaves the same.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool as its provider declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolSpec {
    /// The provider-local name, e.g. `get_issue`. The host qualifies it as `github.get_issue`.
    pub name: String,
    /// A group inside the provider (`issues`, `pulls`, `actions`…), used to bundle tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// What the tool does, written for the model that will choose it.
    pub description: String,
    /// JSON schema of the arguments.
    pub input_schema: Value,
    /// JSON schema of the structured result, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Argument names whose values must never be logged (tokens, passwords).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sensitive_params: Vec<String>,
}

/// A tool's qualified name: the provider that serves it and the tool's own name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolName {
    /// The provider's name, e.g. `github`.
    pub provider: String,
    /// The provider-local tool name, e.g. `get_issue`.
    pub tool: String,
}

impl ToolName {
    /// Builds a qualified name.
    pub fn new(provider: impl Into<String>, tool: impl Into<String>) -> Self {
        Self { provider: provider.into(), tool: tool.into() }
    }

    /// Splits `provider.tool` at its first dot; `None` when there is no dot or a side is empty.
    pub fn parse(qualified: &str) -> Option<Self> {
        let (provider, tool) = qualified.split_once('.')?;
        (!provider.is_empty() && !tool.is_empty()).then(|| Self::new(provider, tool))
    }

    /// The name as MCP clients accept it (`^[a-zA-Z0-9_-]{1,64}$`: clients reject dots), e.g.
    /// `github_get_issue`; characters outside the set become `_`.
    pub fn mcp_name(&self) -> String {
        let joined = format!("{}_{}", self.provider, self.tool);
        joined
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
            .take(64)
            .collect()
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.provider, self.tool)
    }
}

/// A flag that cancels a call in flight. Cloning shares the flag.
#[derive(Debug, Clone, Default)]
pub struct CancellationFlag(Arc<AtomicBool>);

impl CancellationFlag {
    /// A flag that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }
    /// Asks every holder of this flag to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The result metadata key under which a provider's [`AuthorLabel`]s travel to the host.
pub const AUTHORS_METADATA: &str = "authors";

/// The result metadata key under which the services' own ids of a call's requests travel to the
/// host ([`ToolContext::note_request_id`]): what the audit trail names, to find the call in the
/// service's logs.
pub const REQUEST_IDS_METADATA: &str = "request_ids";

/// Who wrote one text field of a result, and whether they can write to the resource it belongs
/// to (GitHub's `author_association` OWNER, MEMBER or COLLABORATOR; a project member; …): what
/// `[security] lockdown` withholds by, and what tells text from the resource's own people from
/// text anyone could have written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorLabel {
    /// The field, as a JSON pointer into the result's structured value (`/body`,
    /// `/comments/2/body`).
    pub pointer: String,
    /// The author's name at the service (a login).
    pub author: String,
    /// Whether the author can write to the resource; `None` when the service does not say.
    pub can_write: Option<bool>,
    /// Whether the resource is public (a public repository or project): lockdown withholds
    /// only there, where anyone can write an issue. `None` when not known, taken as public.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public: Option<bool>,
}

/// What a call collects for the host beside its result; cloning shares the list.
#[derive(Debug, Clone)]
pub struct Collected<T>(Arc<std::sync::Mutex<Vec<T>>>);

impl<T> Default for Collected<T> {
    fn default() -> Self {
        Self(Arc::default())
    }
}

impl<T> Collected<T> {
    /// Takes what was collected.
    pub fn take(&self) -> Vec<T> {
        std::mem::take(&mut *self.list())
    }

    fn list(&self) -> std::sync::MutexGuard<'_, Vec<T>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The author labels a call collects.
pub type AuthorLabels = Collected<AuthorLabel>;

/// The services' request ids a call collects.
pub type RequestIds = Collected<String>;

/// Everything a call needs besides its arguments, passed explicitly.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ToolContext {
    /// The session the call belongs to (an MCP connection, a CLI run).
    pub session: String,
    /// Identifies this call in logs and telemetry.
    pub call_id: String,
    /// Time left for the call, in milliseconds; `None` is no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Set by the host to stop the call; it never crosses the plugin boundary as JSON.
    #[serde(skip)]
    pub cancellation: CancellationFlag,
    /// Who wrote which text of the result ([`ToolContext::label_author`]); the SDK hands them
    /// to the host with the result.
    #[serde(skip)]
    pub authors: AuthorLabels,
    /// Set when the host may withhold texts by authors who cannot write (`lockdown`): worth a
    /// request to the service, where it needs one, to say whether an author can write and
    /// whether the resource is public ([`ToolContext::label_visibility`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lockdown: bool,
    /// The W3C trace context of the host's span of this call (`traceparent`, `tracestate`),
    /// when traces are exported: a provider sends it as headers of its requests, so a
    /// service's own traces join the caller's ([`ToolContext::trace_headers`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub trace_context: std::collections::BTreeMap<String, String>,
    /// The services' ids of this call's requests ([`ToolContext::note_request_id`]); the SDK
    /// hands them to the host with the result.
    #[serde(skip)]
    pub request_ids: RequestIds,
}

impl ToolContext {
    /// Says who wrote the text at `pointer` of this call's structured result, and whether
    /// they can write to the resource (`None`: the service does not say).
    pub fn label_author(
        &self,
        pointer: impl Into<String>,
        author: impl Into<String>,
        can_write: Option<bool>,
    ) {
        let label =
            AuthorLabel { pointer: pointer.into(), author: author.into(), can_write, public: None };
        self.authors.list().push(label);
    }

    /// Notes the service's own id of a request this call made (`x-github-request-id`,
    /// `x-request-id`…), for the audit trail.
    pub fn note_request_id(&self, id: impl Into<String>) {
        let mut ids = self.request_ids.list();
        let id = id.into();
        if !ids.contains(&id) {
            ids.push(id);
        }
    }

    /// The headers that carry the caller's trace to a service (`traceparent`, `tracestate`);
    /// none when traces are not exported.
    pub fn trace_headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.trace_context
            .iter()
            .filter(|(key, _)| matches!(key.as_str(), "traceparent" | "tracestate"))
            .map(|(key, value)| (key.as_str(), value.as_str()))
    }

    /// Says whether the resource the texts labelled so far belong to is public (a public
    /// repository): lockdown withholds only in public ones.
    pub fn label_visibility(&self, public: bool) {
        for label in self.authors.list().iter_mut() {
            label.public = Some(public);
        }
    }
}

/// One block of a result's content, as MCP shows it to the model. Providers write text; an
/// upstream MCP server's blocks of every kind pass through as it sent them (MCP's own field
/// names, `mimeType`, `annotations`, `_meta` included).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Content {
    /// Text.
    Text {
        /// The text.
        text: String,
        /// MCP annotations (`audience`, `priority`, `lastModified`), as the server sent them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<Value>,
        /// MCP `_meta`, as the server sent it.
        #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
        meta: Option<Value>,
    },
    /// An image: `data` (base64), `mimeType`, and the rest of the MCP block.
    Image(serde_json::Map<String, Value>),
    /// Audio: `data` (base64), `mimeType`, and the rest of the MCP block.
    Audio(serde_json::Map<String, Value>),
    /// An embedded resource: `resource` (`uri`, `mimeType`, `text` or `blob`), and the rest.
    Resource(serde_json::Map<String, Value>),
    /// A link to a resource: `uri`, `name`, and the rest of the MCP block.
    ResourceLink(serde_json::Map<String, Value>),
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into(), annotations: None, meta: None }
    }

    /// The text a model reads in this block: a text block's, an embedded resource's `text`.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Content::Text { text, .. } => Some(text),
            Content::Resource(block) => {
                block.get("resource").and_then(|r| r.get("text")).and_then(Value::as_str)
            }
            Content::Image(_) | Content::Audio(_) | Content::ResourceLink(_) => None,
        }
    }

    /// The bytes this block takes as MCP JSON: what caps count a binary block by.
    pub fn size(&self) -> usize {
        match self {
            Content::Text { text, .. } => text.len(),
            other => serde_json::to_string(other).map_or(0, |s| s.len()),
        }
    }
}

/// Why a call failed, so the host can react (retry later, ask for a token…) without parsing text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// Occurs when the arguments do not match the tool's input schema.
    InvalidArguments,
    /// Occurs when the service has no such object.
    NotFound,
    /// Occurs when the token is missing, wrong, or lacks a permission.
    Unauthorized,
    /// Occurs when the service's rate limit held for longer than the provider would wait.
    RateLimited,
    /// Occurs when the service answered with an error or an unreadable body.
    Upstream,
    /// Occurs when the call ran past its deadline.
    Timeout,
    /// Occurs when the call was cancelled.
    Cancelled,
    /// Occurs when the provider itself failed (a bug, a panic).
    Internal,
    /// Occurs when the named tool does not exist.
    UnknownTool,
}

/// The metadata key of an error result that says how long a rate limit holds, in seconds.
pub const RETRY_AFTER_METADATA: &str = "retry_after_s";

/// The metadata key of a result that says how much of the service's rate budget is left:
/// a [`RateHeadroom`], from the last response the call read.
pub const RATE_HEADROOM_METADATA: &str = "rate_headroom";

/// What the service's rate-limit headers said is left of the window (`x-ratelimit-remaining` of
/// `x-ratelimit-limit` on GitHub, `ratelimit-*` on GitLab).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RateHeadroom {
    /// Requests left in the window.
    pub remaining: u64,
    /// Requests per window.
    pub limit: u64,
}

impl RateHeadroom {
    /// The share of the window left, 0..=1 (a limit of 0 counts as nothing left).
    pub fn share(&self) -> f64 {
        if self.limit == 0 {
            return 0.0;
        }
        (self.remaining.min(self.limit) as f64) / (self.limit as f64)
    }

    /// The headroom a result reports, if it reports one.
    pub fn of(result: &ToolResult) -> Option<Self> {
        serde_json::from_value(result.metadata.get(RATE_HEADROOM_METADATA)?.clone()).ok()
    }
}

/// What a call returns.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ToolResult {
    /// What the model reads.
    pub content: Vec<Content>,
    /// The same result as a JSON value, for projection, follow-ups and `structuredContent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// Whether the call failed.
    #[serde(default)]
    pub is_error: bool,
    /// Set with `is_error`: why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<ToolErrorKind>,
    /// Anything else worth keeping: pagination cursors, rate-limit headroom, timings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, Value>,
}

impl ToolResult {
    /// A successful result whose text is the compact JSON of `value` (whitespace would cost the
    /// model tokens and tell it nothing).
    pub fn from_json(value: Value) -> Self {
        let text = value.to_string();
        Self { content: vec![Content::text(text)], structured: Some(value), ..Self::default() }
    }

    /// The services' request ids its provider noted ([`REQUEST_IDS_METADATA`]).
    pub fn request_ids(&self) -> Vec<String> {
        self.collected(REQUEST_IDS_METADATA)
    }

    /// The author labels its provider attached ([`AUTHORS_METADATA`]); none when it attached
    /// none or they do not read.
    pub fn author_labels(&self) -> Vec<AuthorLabel> {
        self.collected(AUTHORS_METADATA)
    }

    /// A list its provider collected during the call ([`Collected`]), under metadata `key`.
    fn collected<T: serde::de::DeserializeOwned>(&self, key: &str) -> Vec<T> {
        self.metadata
            .get(key)
            .and_then(|list| serde_json::from_value(list.clone()).ok())
            .unwrap_or_default()
    }

    /// `self` with what a provider collected during the call ([`Collected`]) under metadata
    /// `key`, when it collected anything.
    pub fn with_collected<T: Serialize>(mut self, key: &str, collected: &Collected<T>) -> Self {
        let list = collected.take();
        if !list.is_empty() {
            self.metadata.insert(key.to_owned(), serde_json::to_value(list).unwrap_or_default());
        }
        self
    }

    /// A successful plain-text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self { content: vec![Content::text(text)], ..Self::default() }
    }

    /// A failed result with a message for the model.
    pub fn error(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self {
            content: vec![Content::text(message)],
            is_error: true,
            error_kind: Some(kind),
            ..Self::default()
        }
    }

    /// Adds a metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: Value) -> Self {
        self.metadata.insert(key.into(), value);
        self
    }

    /// All text blocks (and embedded resources' text) joined by newlines.
    pub fn text_content(&self) -> String {
        self.content.iter().filter_map(Content::as_text).collect::<Vec<_>>().join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_parse_and_become_mcp_safe() {
        let name = ToolName::parse("github.get_issue").unwrap();
        assert_eq!(name, ToolName::new("github", "get_issue"));
        assert_eq!(name.to_string(), "github.get_issue");
        assert_eq!(name.mcp_name(), "github_get_issue");
        assert_eq!(ToolName::new("my.corp", "get x").mcp_name(), "my_corp_get_x");
        assert!(ToolName::parse("get_issue").is_none());
        assert!(ToolName::parse(".get_issue").is_none());
    }

    #[test]
    fn cancellation_is_shared_by_clones() {
        let ctx = ToolContext::default();
        let seen_by_provider = ctx.cancellation.clone();
        ctx.cancellation.cancel();
        assert!(seen_by_provider.is_cancelled());
    }

    #[test]
    fn every_kind_of_mcp_block_round_trips_as_the_server_sent_it() {
        let blocks = serde_json::json!([
            {"type": "text", "text": "hi", "annotations": {"audience": ["user"], "priority": 0.5}},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav", "_meta": {"k": 1}},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "body"}},
            {"type": "resource_link", "uri": "file:///b.md", "name": "b.md", "size": 12},
        ]);
        let content: Vec<Content> = serde_json::from_value(blocks.clone()).unwrap();
        assert!(matches!(&content[0], Content::Text { annotations: Some(_), .. }));
        assert!(matches!(&content[1], Content::Image(b) if b["mimeType"] == "image/png"));
        assert!(matches!(&content[4], Content::ResourceLink(_)));
        assert_eq!(serde_json::to_value(&content).unwrap(), blocks);
        let result = ToolResult { content, ..ToolResult::default() };
        assert_eq!(result.text_content(), "hi\nbody", "text and embedded text, not the binaries");
    }

    #[test]
    fn results_round_trip_as_json_without_empty_fields() {
        let ok = ToolResult::from_json(serde_json::json!({"number": 7}));
        let json = serde_json::to_value(&ok).unwrap();
        assert_eq!(json["content"][0]["type"], "text");
        assert!(json.get("metadata").is_none());
        let back: ToolResult = serde_json::from_value(json).unwrap();
        assert_eq!(back, ok);

        let err = ToolResult::error(ToolErrorKind::NotFound, "no issue #9 in o/r");
        let json = serde_json::to_value(&err).unwrap();
        assert_eq!(json["error_kind"], "not_found");
        assert_eq!(err.text_content(), "no issue #9 in o/r");
    }
}
