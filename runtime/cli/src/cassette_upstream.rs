//! The MCP servers `quiver replay` puts in place of the other servers a recorded session called
//! (`mcp__linear__get_issue`, `notion-search`): one real MCP server per recorded server, over
//! Streamable HTTP on loopback, configured as the replay host's `[[upstreams]]`, so those calls
//! go through quiver's upstream client and the whole pipeline like any fronted server's.
//!
//! A recording does not hold the servers' tool definitions, so each tool is listed with the
//! arguments its recorded calls used (each typed as recorded, none required). A call gets the
//! result recorded for it (same tool, same arguments) at the latest step of the session not
//! after the current one, else its earliest — the cassette's rule; a call nothing was recorded
//! for gets an error result and is counted apart, and every call answered is counted.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use quiver_core::session_cache::CallKey;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{json, Map, Value};

use crate::cassette::StepTape;

/// One recorded call of another server's tool.
pub(crate) struct UpstreamCall {
    pub(crate) server: String,
    pub(crate) tool: String,
    pub(crate) arguments: Map<String, Value>,
    /// The MCP `CallToolResult` as recorded (`content`, and `structuredContent`, `isError`
    /// where the recording has them).
    pub(crate) result: Value,
}

/// Results by (server, call).
type Tapes = StepTape<(String, CallKey), Value>;

/// The running servers.
#[derive(Clone)]
pub(crate) struct CassetteUpstreams {
    tapes: Arc<Mutex<Tapes>>,
    address: SocketAddr,
    /// Each server's input schemas by tool.
    schemas: Arc<BTreeMap<String, BTreeMap<String, Value>>>,
}

/// The input schema a tool's recorded arguments suggest: each argument any call used, typed
/// as the first call that used it had it; none required, others allowed.
fn schema_of(calls: &[&Map<String, Value>]) -> Value {
    let mut properties = Map::new();
    for arguments in calls {
        for (name, value) in *arguments {
            let kind = match value {
                Value::Null => continue,
                Value::Bool(_) => "boolean",
                Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
            };
            properties.entry(name.clone()).or_insert_with(|| json!({"type": kind}));
        }
    }
    json!({"type": "object", "properties": properties})
}

#[derive(Clone)]
struct RecordedServer {
    name: String,
    tools: Arc<Vec<rmcp::model::Tool>>,
    schemas: Arc<BTreeMap<String, Value>>,
    tapes: Arc<Mutex<Tapes>>,
}

impl ServerHandler for RecordedServer {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(self.name.clone(), env!("CARGO_PKG_VERSION")))
    }

    /// quiver's upstream client listens for list changes on 2026-07-28; a recording's tool
    /// list never changes, so the stream stays quiet (the SDK keeps only what `get_info` says).
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let key = CallKey::new(&request.name, &arguments, self.schemas.get(request.name.as_ref()));
        let found = self
            .tapes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .answer(&(self.name.clone(), key.clone()));
        let result = match found {
            Some(recorded) => recorded,
            None => json!({
                "content": [{"type": "text", "text": format!("nothing was recorded for {key}")}],
                "isError": true,
            }),
        };
        let result: CallToolResult = serde_json::from_value(result)
            .map_err(|e| McpError::internal_error(format!("a recorded result: {e}"), None))?;
        Ok(CallToolResponse::Complete(result))
    }
}

impl CassetteUpstreams {
    /// Starts one server per server named in `calls` (every session's), listing the tools
    /// those calls used, on a loopback port. Each session's results are loaded with
    /// [`CassetteUpstreams::load`].
    pub(crate) async fn start(calls: &[&UpstreamCall]) -> std::io::Result<Self> {
        let mut servers: BTreeMap<&str, Vec<&UpstreamCall>> = BTreeMap::new();
        for call in calls {
            servers.entry(call.server.as_str()).or_default().push(call);
        }
        let tapes = Arc::new(Mutex::new(Tapes::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let mut app = axum::Router::new();
        let mut all_schemas = BTreeMap::new();
        for (name, calls) in servers {
            let name = name.to_owned();
            let mut by_tool: BTreeMap<&str, Vec<&Map<String, Value>>> = BTreeMap::new();
            for call in calls {
                by_tool.entry(call.tool.as_str()).or_default().push(&call.arguments);
            }
            let schemas: BTreeMap<String, Value> = by_tool
                .iter()
                .map(|(tool, calls)| ((*tool).to_owned(), schema_of(calls)))
                .collect();
            let tools: Vec<rmcp::model::Tool> = schemas
                .iter()
                .filter_map(|(tool, schema)| {
                    serde_json::from_value(json!({
                        "name": tool,
                        "description": format!("{tool} of {name}, as a recorded session called it"),
                        "inputSchema": schema,
                    }))
                    .ok()
                })
                .collect();
            let server = RecordedServer {
                name: name.clone(),
                tools: Arc::new(tools),
                schemas: Arc::new(schemas.clone()),
                tapes: Arc::clone(&tapes),
            };
            let mut config = StreamableHttpServerConfig::default();
            config.allowed_hosts.push(address.ip().to_string());
            let service = StreamableHttpService::new(
                move || Ok(server.clone()),
                Arc::new(LocalSessionManager::default()),
                config,
            );
            app = app.route_service(&format!("/{name}/mcp"), service);
            all_schemas.insert(name.clone(), schemas);
        }
        tokio::spawn(async move {
            // Ends with the process; a replay has no other way out.
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { tapes, address, schemas: Arc::new(all_schemas) })
    }

    /// The `[[upstreams]]` entries that reach these servers.
    pub(crate) fn upstreams(&self) -> Vec<quiver_runtime::upstream::UpstreamConfig> {
        self.schemas
            .keys()
            .filter_map(|name| {
                let url = format!("http://{}/{name}/mcp", self.address);
                // Stand-ins of the replay's own making: nothing of theirs is pinned.
                serde_json::from_value(json!({"name": name, "url": url, "pin": "off"})).ok()
            })
            .collect()
    }

    /// Holds the results of one session's `calls` (by step) in place of the last session's.
    pub(crate) fn load<'c>(&self, calls: impl IntoIterator<Item = (usize, &'c UpstreamCall)>) {
        let mut tapes = self.tapes.lock().unwrap_or_else(|e| e.into_inner());
        tapes.clear();
        for (step, call) in calls {
            let schema = self.schemas.get(&call.server).and_then(|s| s.get(&call.tool));
            let key = CallKey::new(&call.tool, &Value::Object(call.arguments.clone()), schema);
            tapes.record(step, (call.server.clone(), key), call.result.clone());
        }
    }

    /// The step of the session being replayed.
    pub(crate) fn at_step(&self, step: usize) {
        self.tapes.lock().unwrap_or_else(|e| e.into_inner()).at_step(step);
    }

    /// Calls answered so far, and how many of them had nothing recorded.
    pub(crate) fn served(&self) -> (u64, u64) {
        self.tapes.lock().unwrap_or_else(|e| e.into_inner()).served()
    }
}
