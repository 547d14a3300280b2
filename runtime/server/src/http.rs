//! `quiver serve --http`: the MCP server for a team over Streamable HTTP, on both protocol
//! revisions — 2026-07-28 (stateless: no `initialize`, no `Mcp-Session-Id`) and 2025-11-25
//! (`initialize`, `Mcp-Session-Id`, the GET stream, DELETE) — through rmcp's
//! `StreamableHttpService`, at `/mcp`.
//!
//! Cross-cutting concerns are layers around that service, applied in this order to `/mcp`:
//! 1. **Origin**: a browser request whose `Origin` is not allowed is refused (403) — the
//!    defence against DNS rebinding; requests without `Origin` (every non-browser client) pass.
//!    With no `allowed_origins`, only loopback origins are allowed. rmcp checks `Host` too.
//! 2. **Authentication**: with `[[serve.http.users]]`, every request carries
//!    `Authorization: Bearer <API key>`; the key's SHA-256 is compared in constant time with
//!    each user's `key_sha256`; with `[serve.http.oauth]`, an access token of the authorization
//!    server is accepted instead ([`crate::oauth`]). A missing or wrong credential gets 401 with
//!    `WWW-Authenticate: Bearer resource_metadata="…"` (RFC 9728). The caller's [`Identity`]
//!    travels as a request extension into the MCP handler, which keeps each caller's pipeline
//!    state and policy apart.
//!
//! 3. **Rate limit**: `requests_per_minute` per user (their entry's, else `[serve.http]`'s),
//!    a GCRA per user (governor); past it, 429 with `Retry-After`.
//!
//! With `[state] backend = "redis"`, a 2025-11-25 session's metadata is kept in Redis, so a
//! client whose replica died continues its `Mcp-Session-Id` on another one.
//!
//! `/healthz` (alive), `/readyz` (plugins loaded, upstreams up, tools held for approval; shared
//! state reachable or not)
//! and `/metrics` (Prometheus
//! text, [`crate::metrics`]) are open. The server listens
//! on loopback unless authentication is configured: anything else is refused at start-up.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use quiver_runtime::config::HttpUser;
use quiver_runtime::host::Host;
use quiver_runtime::upstream::UpstreamState;
use quiver_runtime::PluginStatus;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::server::{Identity, QuiverServer, ServeOptions};

/// Where the MCP endpoint is mounted.
pub const MCP_PATH: &str = "/mcp";
/// The protected-resource metadata (RFC 9728).
pub const RESOURCE_METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The hex SHA-256 of an API key, as `[[serve.http.users]] key_sha256` holds it.
pub fn key_sha256(key: &str) -> String {
    hex::encode(Sha256::digest(key.trim().as_bytes()))
}

/// Who may call: users by the digest of their key.
struct Users {
    users: Vec<(HttpUser, [u8; 32])>,
}

impl Users {
    fn new(users: &[HttpUser]) -> anyhow::Result<Self> {
        let mut out = Vec::new();
        // Entries for OAuth subjects have no key.
        for user in users.iter().filter(|u| u.subject.is_none()) {
            let bytes = hex::decode(&user.key_sha256).map_err(|e| {
                anyhow::anyhow!("[[serve.http.users]] `{}`: key_sha256 is not hex: {e}", user.name)
            })?;
            let digest: [u8; 32] = bytes.try_into().map_err(|_| {
                anyhow::anyhow!("[[serve.http.users]] `{}`: key_sha256 is not 32 bytes", user.name)
            })?;
            out.push((user.clone(), digest));
        }
        Ok(Self { users: out })
    }

    /// No authentication configured: loopback only, everyone is `local`.
    fn is_open(&self) -> bool {
        self.users.is_empty()
    }

    /// The user whose key this is. Every entry is compared, in constant time, so the time taken
    /// says nothing about which key came close.
    fn authenticate(&self, key: &str) -> Option<&HttpUser> {
        let digest = Sha256::digest(key.trim().as_bytes());
        let mut found = None;
        for (user, expected) in &self.users {
            if bool::from(digest.as_slice().ct_eq(expected)) {
                found = Some(user);
            }
        }
        found
    }
}

/// Who may call under the config in effect: rebuilt after a reload, so a removed entry or key
/// stops working with the next request and a new one works at once.
struct Auth {
    host: Arc<Host>,
    /// No users and no OAuth when quiver started (loopback only): everyone is `local`. Fixed at
    /// start, so a reload that removes every user refuses everyone rather than opening the door.
    open: bool,
    /// (config generation, API-key users, entries that give an OAuth subject its name, policy
    /// and credentials).
    current: std::sync::Mutex<(u64, Arc<Users>, Arc<Vec<HttpUser>>)>,
}

impl Auth {
    fn new(host: Arc<Host>, open: bool) -> anyhow::Result<Self> {
        let users = &host.config().config.serve.http.users;
        let current = (host.generation(), Arc::new(Users::new(users)?), Arc::new(subjects(users)));
        Ok(Self { host, open, current: std::sync::Mutex::new(current) })
    }

    /// The users and subject entries of the config in effect.
    fn current(&self) -> (Arc<Users>, Arc<Vec<HttpUser>>) {
        let generation = self.host.generation();
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.0 != generation {
            let users = &self.host.config().config.serve.http.users;
            match Users::new(users) {
                Ok(api_keys) => {
                    *current = (generation, Arc::new(api_keys), Arc::new(subjects(users)));
                }
                Err(e) => {
                    // The config check refuses such a file; should one pass, nobody gets in on
                    // an entry that may have been meant to go.
                    tracing::error!(
                        "reloaded [[serve.http.users]] unusable ({e}); refusing API keys"
                    );
                    *current =
                        (generation, Arc::new(Users { users: Vec::new() }), Arc::new(Vec::new()));
                }
            }
        }
        (Arc::clone(&current.1), Arc::clone(&current.2))
    }
}

/// The entries that name an OAuth subject.
fn subjects(users: &[HttpUser]) -> Vec<HttpUser> {
    users.iter().filter(|u| u.subject.is_some()).cloned().collect()
}

#[derive(Clone)]
struct AppState {
    host: Arc<Host>,
    auth: Arc<Auth>,
    oauth: Option<Arc<crate::oauth::OAuth>>,
    allowed_origins: Arc<Vec<String>>,
    limits: Arc<Limits>,
    /// The URL of `/mcp` the metadata and challenges name.
    resource_url: Arc<String>,
    /// The 2025-11-25 sessions open, and whose they are.
    sessions: Arc<SessionLimits>,
    server: QuiverServer,
}

/// Per-user request budgets, made on a user's first request.
struct Limits {
    default: u32,
    limiters: std::sync::Mutex<
        std::collections::HashMap<String, Arc<governor::DefaultDirectRateLimiter>>,
    >,
}

impl Limits {
    /// `Err(wait)` when `identity` is over their budget.
    fn check(&self, identity: &Identity) -> Result<(), Duration> {
        let per_minute =
            identity.user.as_ref().and_then(|u| u.requests_per_minute).unwrap_or(self.default);
        let Some(per_minute) = std::num::NonZeroU32::new(per_minute) else { return Ok(()) };
        let limiter = {
            let mut limiters = self.limiters.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(limiters.entry(identity.name.clone()).or_insert_with(|| {
                Arc::new(governor::RateLimiter::direct(governor::Quota::per_minute(per_minute)))
            }))
        };
        limiter.check().map_err(|not_until| {
            not_until.wait_time_from(governor::clock::Clock::now(
                &governor::clock::DefaultClock::default(),
            ))
        })
    }
}

/// Serves `host` over Streamable HTTP on `listen` until `shutdown` resolves, then lets
/// in-flight requests finish for at most `[serve.http] drain_timeout_s`, and the tasks it runs
/// for as long again.
pub async fn serve_http(
    host: Arc<Host>,
    options: ServeOptions,
    listen: &str,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let config = host.config().config.serve.http.clone();
    let users = Arc::new(Users::new(&config.users)?);
    let oauth = config.oauth.clone().map(|o| Arc::new(crate::oauth::OAuth::new(o)));
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() && users.is_open() && oauth.is_none() {
        anyhow::bail!(
            "refusing to listen on {addr} without authentication: add [[serve.http.users]] \
             (`quiver keys new NAME` prints an entry) or [serve.http.oauth], or listen on \
             127.0.0.1"
        );
    }
    let server = QuiverServer::new(Arc::clone(&host), &options, "http")?;
    crate::reload::watch_config(Arc::clone(&host));
    let mut mcp_config = StreamableHttpServerConfig::default();
    // A 2026-07-28 request whose answer is one message gets it as JSON (rmcp streams it as SSE
    // when anything comes first): what `one_message_as_json` does for sessions.
    mcp_config.json_response = true;
    if host.state().backend() == quiver_runtime::config::StateBackendKind::Redis {
        // A 2025-11-25 session begun on another replica (one that died, or that a deploy
        // replaced) continues here: rmcp replays its `initialize` from the stored metadata.
        mcp_config.session_store = Some(Arc::new(SharedSessions(Arc::clone(&host))));
    }
    mcp_config.allowed_hosts.extend(config.allowed_hosts.iter().cloned());
    mcp_config.allowed_hosts.push(addr.ip().to_string());
    let cancel = mcp_config.cancellation_token.clone();
    let factory = server.clone();
    let sessions = Arc::new(LocalSessionManager::default());
    let mcp = StreamableHttpService::new(
        move || Ok(factory.connection()),
        Arc::clone(&sessions),
        mcp_config,
    );
    let scheme = if config.tls_cert.is_some() { "https" } else { "http" };
    let resource_url = config
        .public_url
        .clone()
        .or_else(|| config.oauth.as_ref().map(|o| o.audience.clone()))
        .unwrap_or_else(|| format!("{scheme}://{addr}{MCP_PATH}"));
    let resource_url_for_pages = resource_url.clone();
    let state = AppState {
        sessions: Arc::new(SessionLimits {
            manager: sessions,
            owners: std::sync::Mutex::new(std::collections::HashMap::new()),
            max_total: config.max_sessions,
            max_per_user: config.max_sessions_per_user,
        }),
        resource_url: Arc::new(resource_url),
        host: Arc::clone(&host),
        auth: Arc::new(Auth::new(Arc::clone(&host), users.is_open() && oauth.is_none())?),
        oauth,
        allowed_origins: Arc::new(config.allowed_origins.clone()),
        limits: Arc::new(Limits {
            default: config.requests_per_minute,
            limiters: std::sync::Mutex::new(std::collections::HashMap::new()),
        }),
        server: server.clone(),
    };
    let _ = crate::metrics::handle();
    let guarded = Router::new()
        .route_service(MCP_PATH, mcp)
        .layer(axum::middleware::from_fn_with_state(state.clone(), check_json_rpc))
        // User names and per-tool counts are not for whoever reaches the port.
        .route("/metrics", get(metrics_text))
        .layer(axum::middleware::from_fn_with_state(state.clone(), authenticate));
    if let Some(metrics_listen) = &config.metrics_listen {
        serve_metrics(metrics_listen, state.clone()).await?;
    }
    // Sign-in pages: a browser has no key; the one-time link is bound to the user.
    let accounts = Arc::clone(host.accounts());
    accounts.set_public_base(&public_base(&resource_url_for_pages));
    let secure = resource_url_for_pages.starts_with("https://");
    let connect = crate::connect::router(accounts, secure);
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route(RESOURCE_METADATA_PATH, get(resource_metadata))
        .merge(connect)
        .merge(guarded)
        .layer(axum::middleware::from_fn_with_state(state.clone(), check_origin))
        .with_state(state);
    let drain = Duration::from_secs(config.drain_timeout_s);
    let limits = crate::listener::ConnectionLimits {
        max_connections: config
            .max_connections
            .unwrap_or_else(crate::listener::default_max_connections)
            .max(1),
        header_timeout: Duration::from_secs(config.header_timeout_s.max(1)),
    };
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(tls_config(cert, key).await?),
        (None, None) => None,
        _ => anyhow::bail!(
            "[serve.http] needs both tls_cert and tls_key (PEM files) to serve HTTPS, or neither"
        ),
    };
    tracing::info!(
        max_connections = limits.max_connections,
        "serving MCP over Streamable HTTP at {scheme}://{addr}{MCP_PATH}"
    );
    eprintln!("quiver: serving MCP at {scheme}://{addr}{MCP_PATH}");
    crate::listener::serve(listener, app, tls, limits, drain, shutdown, move || cancel.cancel())
        .await;
    // The tasks it runs get as long again to end; clients follow them at the other replicas.
    crate::tasks::wind_down(drain).await;
    server.shutdown().await;
    Ok(())
}

/// The TLS config of the certificate chain and key in `cert` and `key` (PEM), through rustls
/// with ring.
async fn tls_config(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    quiver_runtime::upstream::install_crypto_provider();
    let tls =
        axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key).await.map_err(|e| {
            anyhow::anyhow!(
                "cannot use tls_cert {} and tls_key {}: {e}; both must be PEM files (a \
                 certificate chain and its private key)",
                cert.display(),
                key.display()
            )
        })?;
    Ok(tls.get_inner())
}

/// The 2025-11-25 sessions rmcp holds, whose they are, and the caps on them.
struct SessionLimits {
    manager: Arc<LocalSessionManager>,
    /// Session ids by the user who opened them (pruned of ended ones when counted).
    owners: std::sync::Mutex<std::collections::HashMap<String, Vec<String>>>,
    max_total: usize,
    max_per_user: usize,
}

impl SessionLimits {
    /// Why a new session of `user` is refused now, if it is: (status, message, limit).
    async fn refusal(&self, user: &str) -> Option<(StatusCode, String, &'static str)> {
        let open: std::collections::HashSet<String> =
            self.manager.sessions.read().await.keys().map(|id| id.to_string()).collect();
        crate::metrics::sessions(open.len());
        if open.len() >= self.max_total {
            return Some((
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "this server holds its most sessions ({}, max_sessions); retry later, or use \
                     protocol 2026-07-28, which needs none",
                    self.max_total
                ),
                "total",
            ));
        }
        let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        let mine = owners.entry(user.to_owned()).or_default();
        mine.retain(|id| open.contains(id));
        (mine.len() >= self.max_per_user).then(|| {
            (
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "`{user}` holds {} sessions (max_sessions_per_user); end one (DELETE with its \
                     Mcp-Session-Id) or use protocol 2026-07-28, which needs none",
                    mine.len()
                ),
                "per_user",
            )
        })
    }

    fn opened(&self, user: &str, id: &str) {
        let mut owners = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        owners.entry(user.to_owned()).or_default().push(id.to_owned());
    }
}

/// `/metrics` alone on `[serve.http] metrics_listen`, open, for a scraper on an internal
/// network; runs until the process ends.
async fn serve_metrics(listen: &str, state: AppState) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
        anyhow::anyhow!("cannot listen on {listen} ([serve.http] metrics_listen): {e}")
    })?;
    let app = Router::new().route("/metrics", get(metrics_text)).with_state(state);
    tracing::info!("serving /metrics at http://{}/metrics", listener.local_addr()?);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("the metrics listener stopped: {e}");
        }
    });
    Ok(())
}

/// The longest request body `/mcp` reads (rmcp's own limit).
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// What the JSON-RPC layer of Streamable HTTP answers to a POST that is not one JSON-RPC
/// message: `400` with the JSON-RPC error, as stdio answers it (rmcp would say `415` in plain
/// text): -32700 for a body that is not JSON, -32600 for a batch or something that is not a
/// JSON-RPC 2.0 message, -32602 for a request whose parameters do not fit its method.
async fn check_json_rpc(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let is_json =
        request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(
            |v| v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"),
        );
    if request.method() == axum::http::Method::DELETE {
        // rmcp ends the session and says 202; the spec's answer is 200 or 204, and the official
        // Python client reports anything else as a failed termination.
        let mut response = next.run(request).await;
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
        return response;
    }
    if request.method() != axum::http::Method::POST || !is_json {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Payload Too Large: request body exceeds {MAX_BODY_BYTES} bytes"),
            )
                .into_response()
        }
    };
    let message = match json_rpc_message(&bytes) {
        Ok(message) => message,
        Err(error) => return (StatusCode::BAD_REQUEST, Json(error)).into_response(),
    };
    // `ping` outside a session (2026-07-28, which has none): rmcp refuses it there, while a
    // client that checks a server is alive expects an empty result on every revision and
    // transport, as stdio gives it.
    let method = message.get("method").and_then(serde_json::Value::as_str);
    if method == Some("ping") && !parts.headers.contains_key("mcp-session-id") {
        if let Some(id) = message.get("id").filter(|id| !id.is_null()) {
            return Json(json!({"jsonrpc": "2.0", "id": id, "result": {}})).into_response();
        }
    }
    // An `initialize` without a session opens one (2025-11-25): within the caps.
    let opens_session = !parts.headers.contains_key("mcp-session-id")
        && message.get("method").and_then(serde_json::Value::as_str) == Some("initialize");
    let user = parts.extensions.get::<Identity>().map(|i| i.name.clone()).unwrap_or_default();
    if opens_session {
        if let Some((status, why, limit)) = state.sessions.refusal(&user).await {
            crate::metrics::session_refused(limit);
            let id = message.get("id").cloned().unwrap_or(serde_json::Value::Null);
            let error =
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": why}});
            return (status, Json(error)).into_response();
        }
    }
    let in_session = parts.headers.contains_key("mcp-session-id");
    let is_request = message.get("id").is_some_and(|id| !id.is_null()) && method.is_some();
    let response = next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await;
    // A request in a 2025-11-25 session is answered as an SSE stream even when its answer is
    // one message: given as JSON then, so the client reads it whole and keeps the connection
    // (the official Python client closes one whose stream it did not read to the end: a TCP
    // connection per call).
    let response =
        if in_session && is_request { one_message_as_json(response).await } else { response };
    if opens_session {
        if let Some(id) = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            state.sessions.opened(&user, id);
        }
    }
    response
}

/// The one JSON-RPC message in `body`, parsed once for every check of the request, or the
/// JSON-RPC error answering a body that is not one rmcp can read.
fn json_rpc_message(body: &[u8]) -> Result<serde_json::Value, serde_json::Value> {
    let error = |id: serde_json::Value, code: i64, message: String| {
        Err(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
    };
    let value: serde_json::Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(e) => return error(serde_json::Value::Null, -32700, format!("Parse error: {e}")),
    };
    let Some(message) = value.as_object() else {
        let what = if value.is_array() {
            "a batch; send one message per request (batches were removed in 2025-06-18)"
        } else {
            "not a JSON-RPC message object"
        };
        return error(serde_json::Value::Null, -32600, format!("Invalid Request: {what}"));
    };
    let id = message.get("id").cloned().unwrap_or(serde_json::Value::Null);
    let id_ok = matches!(id, serde_json::Value::String(_) | serde_json::Value::Number(_))
        || !message.contains_key("id");
    if message.get("jsonrpc").and_then(serde_json::Value::as_str) != Some("2.0") || !id_ok {
        let id = if id_ok { id } else { serde_json::Value::Null };
        return error(id, -32600, "Invalid Request: not a JSON-RPC 2.0 message".into());
    }
    match <rmcp::model::ClientJsonRpcMessage as serde::Deserialize>::deserialize(&value) {
        Ok(_) => Ok(value),
        Err(e) if message.get("method").is_some_and(serde_json::Value::is_string) => {
            error(id, -32602, format!("Invalid params: {e}"))
        }
        Err(e) => error(id, -32600, format!("Invalid Request: {e}")),
    }
}

/// Layer 1: a browser's `Origin` must be allowed (DNS rebinding); non-browser requests pass.
/// A request without a `Host`, or with an empty one, is refused: no allowed host can match it.
async fn check_origin(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if host.trim().is_empty() {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "a request needs a Host header naming this server"})),
        )
            .into_response();
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let allowed = if state.allowed_origins.is_empty() {
            is_loopback_origin(origin)
        } else {
            state.allowed_origins.iter().any(|o| o.trim_end_matches('/') == origin)
        };
        if !allowed {
            tracing::warn!(origin, "refused a request from a foreign origin");
            return (
                StatusCode::FORBIDDEN,
                Json(json!({"error": format!(
                    "origin `{origin}` is not allowed; add it to [serve.http] allowed_origins"
                )})),
            )
                .into_response();
        }
    }
    next.run(request).await
}

fn is_loopback_origin(origin: &str) -> bool {
    let Ok(url) = url::Url::parse(origin) else { return false };
    match url.host() {
        Some(url::Host::Domain(domain)) => domain == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Layer 2: the caller's API key, turned into an [`Identity`] the MCP handler reads.
async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let (users, subjects) = state.auth.current();
    let identity = if state.auth.open && users.is_open() {
        Identity { name: "local".into(), user: None, access_token: None }
    } else {
        let key = bearer(request.headers());
        let by_key = key.and_then(|key| users.authenticate(key));
        let challenge = |had_key: bool| unauthorized(&state.resource_url, had_key);
        match (by_key, key, &state.oauth) {
            (Some(user), _, _) => {
                Identity { name: user.name.clone(), user: Some(user.clone()), access_token: None }
            }
            // Not an API key: an access token of the authorization server, if one is set.
            (None, Some(token), Some(oauth)) if token.matches('.').count() == 2 => {
                match oauth.verify(token).await {
                    Ok(subject) => {
                        let entry = subjects
                            .iter()
                            .find(|u| u.subject.as_deref() == Some(subject.as_str()));
                        // A subject without an entry is `oauth:SUBJECT`, never the API-key user
                        // who happens to have its name (names may not contain `:`): its own rate
                        // limit, recent calls, fail-fast counters and telemetry name.
                        Identity {
                            name: entry
                                .map_or_else(|| format!("oauth:{subject}"), |u| u.name.clone()),
                            user: entry.cloned(),
                            access_token: Some(crate::server::CallerToken(token.into())),
                        }
                    }
                    Err(reason) => {
                        tracing::info!("refused an access token: {reason}");
                        return challenge(true);
                    }
                }
            }
            _ => return challenge(key.is_some()),
        }
    };
    if let Err(wait) = state.limits.check(&identity) {
        crate::metrics::rate_limited(&identity.name);
        let seconds = wait.as_secs() + 1;
        let mut response = (
            StatusCode::TOO_MANY_REQUESTS,
            Json(json!({"error": format!(
                "`{}` is over its requests_per_minute; retry in {seconds} s", identity.name
            )})),
        )
            .into_response();
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        return response;
    }
    request.extensions_mut().insert(identity);
    next.run(request).await
}

/// Prometheus text: calls, latency, cache and pre-fetch hits, callers, upstream state.
async fn metrics_text(State(state): State<AppState>) -> Response {
    let upstreams: Vec<(String, bool)> = state
        .host
        .upstream_reports()
        .into_iter()
        .map(|r| (r.name, r.state == UpstreamState::Ready))
        .collect();
    crate::metrics::gauges(state.server.callers(), &upstreams);
    crate::metrics::shared_state(&state.host.state().status());
    match crate::metrics::handle() {
        Some(handle) => {
            ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], handle.render()).into_response()
        }
        None => (StatusCode::SERVICE_UNAVAILABLE, "metrics are unavailable\n").into_response(),
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token.trim()).filter(|t| !t.is_empty())
}

/// 401 with the pointer to this server's protected-resource metadata (RFC 9728).
fn unauthorized(resource_url: &str, had_key: bool) -> Response {
    let metadata = metadata_url(resource_url);
    let challenge = format!("Bearer resource_metadata=\"{metadata}\"");
    let message = if had_key {
        "the API key or access token is not valid for this server"
    } else {
        "this server needs `Authorization: Bearer <API key>`"
    };
    let mut response = (StatusCode::UNAUTHORIZED, Json(json!({"error": message}))).into_response();
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// RFC 9728 metadata: this resource, its authorization server, and how to present a token.
async fn resource_metadata(State(state): State<AppState>) -> Json<serde_json::Value> {
    let servers: Vec<&str> = state.oauth.as_deref().map(|o| o.issuer()).into_iter().collect();
    Json(json!({
        "resource": state.resource_url.as_str(),
        "authorization_servers": servers,
        "bearer_methods_supported": ["header"],
        "resource_name": "quiver",
    }))
}

/// How long an SSE answer may take to end after its one message before it is streamed as is.
const END_AFTER_ANSWER: Duration = Duration::from_millis(50);

/// `response` as `application/json` when its SSE stream holds one JSON-RPC response or error
/// (beside a priming event) and then ends; otherwise the stream as it came, every event in
/// order and as soon as it comes (progress, a request to the client): what was read ahead is
/// sent first, and nothing waits on it.
async fn one_message_as_json(response: Response) -> Response {
    use futures_util::StreamExt as _;
    let is_sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if response.status() != StatusCode::OK || !is_sse {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let mut stream = body.into_data_stream();
    let mut read: Vec<bytes::Bytes> = Vec::new();
    let mut text = String::new();
    let mut answer: Option<String> = None;
    let streamed = |read: Vec<bytes::Bytes>, rest, parts| {
        let head = futures_util::stream::iter(read.into_iter().map(Ok::<_, axum::Error>));
        Response::from_parts(parts, axum::body::Body::from_stream(head.chain(rest)))
    };
    loop {
        let next = match &answer {
            // The answer is in: the stream should end now.
            Some(_) => match tokio::time::timeout(END_AFTER_ANSWER, stream.next()).await {
                Ok(next) => next,
                Err(_) => return streamed(read, stream, parts),
            },
            None => stream.next().await,
        };
        let Some(chunk) = next else { break };
        let Ok(chunk) = chunk else { return streamed(read, stream, parts) };
        text.push_str(&String::from_utf8_lossy(&chunk));
        read.push(chunk);
        // Each complete event: a priming one has no data; the first with data decides.
        while let Some(end) = text.find("\n\n") {
            let event: String = text.drain(..end + 2).collect();
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            let data = data.join("\n");
            if data.is_empty() {
                continue;
            }
            let terminal = answer.is_none()
                && serde_json::from_str::<serde_json::Value>(&data).is_ok_and(|m| {
                    m.get("method").is_none()
                        && (m.get("result").is_some() || m.get("error").is_some())
                });
            if !terminal {
                return streamed(read, stream, parts);
            }
            answer = Some(data);
        }
    }
    let Some(answer) = answer else {
        return Response::from_parts(
            parts,
            axum::body::Body::from_stream(futures_util::stream::iter(
                read.into_iter().map(Ok::<_, axum::Error>),
            )),
        );
    };
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::TRANSFER_ENCODING);
    parts.headers.remove(header::CACHE_CONTROL);
    Response::from_parts(parts, axum::body::Body::from(answer))
}

/// Where the server's other pages are, from the URL of `/mcp`: that URL without its `/mcp`,
/// else its origin.
fn public_base(resource_url: &str) -> String {
    if let Some(base) = resource_url.strip_suffix(MCP_PATH) {
        return base.to_owned();
    }
    match url::Url::parse(resource_url) {
        Ok(url) => url.origin().ascii_serialization(),
        Err(_) => resource_url.trim_end_matches('/').to_owned(),
    }
}

/// The RFC 9728 metadata URL of the resource `resource_url`: its origin and the well-known path.
fn metadata_url(resource_url: &str) -> String {
    match url::Url::parse(resource_url) {
        Ok(url) => format!("{}{RESOURCE_METADATA_PATH}", url.origin().ascii_serialization()),
        Err(_) => format!("{}{RESOURCE_METADATA_PATH}", resource_url.trim_end_matches(MCP_PATH)),
    }
}

/// HTTP sessions' metadata in the host's shared state, so any replica can continue a session.
struct SharedSessions(Arc<Host>);

#[async_trait::async_trait]
impl SessionStore for SharedSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        match self.0.state().session_get(session_id).await.map_err(SessionStoreError::from)? {
            Some(json) => Ok(Some(serde_json::from_str(&json)?)),
            None => Ok(None),
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let json = serde_json::to_string(state)?;
        Ok(self.0.state().session_put(session_id, &json).await?)
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        Ok(self.0.state().session_delete(session_id).await?)
    }
}

/// 200 when every plugin loaded and every enabled upstream is up; 503 naming what is not.
/// Shared state that is unreachable is reported (`degraded`) but keeps the replica ready: it
/// answers from its own state, and taking every replica out of service because Redis is down
/// would stop answering altogether.
async fn readyz(State(state): State<AppState>) -> Response {
    let mut problems = Vec::new();
    for report in state.host.plugin_reports() {
        if let PluginStatus::Failed { reason } = &report.status {
            problems.push(format!("plugin {}: {reason}", report.path.display()));
        }
    }
    for report in state.host.upstream_reports() {
        match &report.state {
            UpstreamState::Ready | UpstreamState::Disabled => {}
            // Open to anyone who reaches the port: no reason, which may quote what the
            // upstream printed or answered.
            other => problems.push(format!("upstream {}: {}", report.name, other.public())),
        }
    }
    let shared = state.host.state().probe().await;
    let degraded: Vec<String> = match &shared {
        quiver_runtime::state::StateStatus::Unreachable { .. } => vec![shared.to_string()],
        _ => Vec::new(),
    };
    // Held tools leave the replica ready (everything else serves); named so a probe sees them.
    let held: Vec<String> = state
        .host
        .upstream_reports()
        .iter()
        .flat_map(|r| r.held.iter().map(move |h| format!("{}.{}", r.name, h.tool)))
        .collect();
    let status = if problems.is_empty() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = json!({
        "ready": problems.is_empty(),
        "problems": problems,
        "held": held,
        "state": shared.to_string(),
        "degraded": degraded,
    });
    (status, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, key: &str) -> HttpUser {
        HttpUser { name: name.into(), key_sha256: key_sha256(key), ..HttpUser::default() }
    }

    #[test]
    fn a_key_authenticates_its_user_and_no_other() {
        let users = Users::new(&[user("alice", "qk_alice"), user("bob", "qk_bob")]).unwrap();
        assert_eq!(users.authenticate("qk_bob").map(|u| u.name.as_str()), Some("bob"));
        assert_eq!(users.authenticate("qk_alice").map(|u| u.name.as_str()), Some("alice"));
        assert!(users.authenticate("qk_mallory").is_none());
        assert!(users.authenticate("").is_none());
    }

    #[test]
    fn only_loopback_origins_pass_by_default() {
        for origin in ["http://localhost:6274", "http://127.0.0.1:3000", "http://[::1]:8080"] {
            assert!(is_loopback_origin(origin), "{origin}");
        }
        for origin in ["https://evil.example", "http://localhost.evil.example", "null"] {
            assert!(!is_loopback_origin(origin), "{origin}");
        }
    }

    #[test]
    fn bearer_tokens_are_read_case_insensitively() {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("bearer qk_1"));
        assert_eq!(bearer(&headers), Some("qk_1"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic eDp5"));
        assert_eq!(bearer(&headers), None);
    }
}
