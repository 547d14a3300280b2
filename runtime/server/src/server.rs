//! The MCP server: rmcp's `ServerHandler` over the host, one [`Session`] per connection.
//!
//! `tools/list` answers from the connection's [`Listing`]; `tools/call` resolves the name (a
//! provider tool by MCP or qualified name, or a meta tool of the mode), applies the policy
//! (refusals, `_confirm`), notes escape-hatch uses, and runs the call through the session with
//! the request's cancellation token wired to the provider's cancel flag and, when the client
//! sent a `progressToken`, a progress heartbeat every second while the provider works.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quiver_core::telemetry::EventKind;
use quiver_core::ToolResult;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};
use tokio::sync::OnceCell;

use crate::catalog::{Catalog, ExposedTool};
use crate::escape;
use crate::modes::{
    Listing, CALL_TOOL, DEFAULT_K, FIND_TOOLS, FOLLOW_UP_MIN_PROBABILITY, LOAD_TOOLS,
};
use crate::policy::Policy;
use quiver_runtime::config::{HttpUser, ServeMode};
use quiver_runtime::host::Host;
use quiver_runtime::selector::{selector_for_host, Ranked, Selector, SelectorOptions};
use quiver_runtime::session::Session;
use quiver_runtime::upstream::UpstreamChange;
use quiver_runtime::upstream::{ProgressSink, CALL_PROGRESS, MAX_INPUT_ROUNDS};

/// How often a long call reports progress, when the client asked for progress.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How `quiver serve` runs.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// `--mode`: overrides `[selector] mode`.
    pub mode: Option<ServeMode>,
}

/// The MCP server of one connection (stdio), or of one HTTP session or request: what every
/// caller shares, and the tool list this connection was shown.
#[derive(Clone)]
pub struct QuiverServer {
    inner: Arc<Inner>,
    /// `dynamic` mode: what this connection loaded.
    listing: Arc<Mutex<Listing>>,
    /// The lowest level of the upstreams' log messages this connection asked for
    /// (`logging/setLevel`, as an index into [`LOG_LEVELS`]; none asked: `u8::MAX`).
    log_level: Arc<std::sync::atomic::AtomicU8>,
    /// The resource URIs this connection's client subscribed to, with the upstream of each.
    subscribed: Subscribed,
    /// Resource subscriptions made for 2026-07-28 listen streams being opened, taken over by
    /// each stream's `listen`.
    listening: Arc<Mutex<Vec<(String, String)>>>,
}

/// MCP's log levels, lowest first.
/// A connection's resource subscriptions: URI → the upstream that serves it.
type Subscribed = Arc<Mutex<std::collections::HashMap<String, String>>>;

const LOG_LEVELS: [&str; 8] =
    ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// A level's place in [`LOG_LEVELS`]; a level MCP does not name counts as `info`.
fn log_rank(level: &str) -> u8 {
    LOG_LEVELS.iter().position(|l| *l == level).unwrap_or(1) as u8
}

/// Who is calling, as the HTTP layer authenticated them (absent on stdio).
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    /// The user's name (`[[serve.http.users]] name`), or `local` for unauthenticated loopback.
    pub name: String,
    /// Their entry, when they authenticated with an API key.
    pub user: Option<HttpUser>,
    /// The OAuth access token they authenticated with (not an API key: that is quiver's own),
    /// for upstreams that take the caller's identity (`auth = "passthrough" | "exchange"`).
    pub access_token: Option<CallerToken>,
}

/// A caller's access token: shown as `***` by `Debug`.
#[derive(Clone, PartialEq)]
pub struct CallerToken(pub Arc<str>);

impl std::fmt::Debug for CallerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallerToken(***)")
    }
}

/// What one caller's calls share across connections and requests: the session (cache,
/// in-flight joins, fail-fast, recent calls) and their view of the tools under their policy.
/// State belongs to the caller's identity, not to a connection, so it is the same on every
/// protocol revision, including 2026-07-28 which has no sessions.
struct View {
    session: Session,
    session_id: String,
    /// The caller's entry (HTTP users), to narrow the policy again after a config reload.
    user: Option<HttpUser>,
    /// The caller's policy and the config generation it was built from (shared with the
    /// session's pre-fetch guard).
    policy: Arc<Mutex<(u64, Policy)>>,
    /// The catalog and the upstream change count and config generation it was built at:
    /// rebuilt when an upstream's tools change (a restart, a `list_changed`) or the config is
    /// reloaded, so the list follows them.
    catalog: Mutex<((u64, u64), Arc<Catalog>)>,
    /// The words of the caller's latest `find_tools` (or free-text `load_tools`) request: the
    /// planner's intent keywords for their calls until the next one.
    intent: Mutex<Vec<String>>,
    /// What the caller's session has read, for the toxic-flow check ([`quiver_core::flows`]).
    flows: Mutex<quiver_core::flows::SessionFlows>,
    /// The caller's `accounts` rules, compiled.
    account_rules: Option<Arc<AccountRules>>,
}

/// What `find_tools` and `load_tools` rank a request with: the served tools, best first, with
/// their scores (`None` without a selector); why the model was not used, if so; the score a
/// tool needs to be chosen on its own merit; and the clauses' best tools, chosen whatever
/// their score.
struct Ranking<'c> {
    hits: Vec<(&'c ExposedTool, Option<f32>)>,
    without_model: Option<String>,
    floor: f32,
    clause_hits: Vec<String>,
}

/// A user's `accounts` rules: which signed-in account a call acts as.
struct AccountRules {
    rules: quiver_core::scope::ScopeRules,
    /// The account of each rule.
    accounts: Vec<String>,
}

impl AccountRules {
    /// The account a call of `qualified` with `arguments` acts as by rule (`None`: the default).
    fn wanted(&self, qualified: &str, mcp_name: &str, arguments: &Value) -> Option<&str> {
        let at = self.rules.first_match(qualified, mcp_name, arguments)?;
        self.accounts.get(at).map(String::as_str)
    }
}

impl View {
    fn intent(&self) -> Vec<String> {
        self.intent.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_intent(&self, request: &str) {
        *self.intent.lock().unwrap_or_else(|e| e.into_inner()) =
            quiver_core::select::tokens(request);
    }
}

struct Inner {
    host: Arc<Host>,
    config: quiver_runtime::config::SelectorConfig,
    mode: ServeMode,
    base_policy: Policy,
    inferred: std::collections::BTreeMap<String, Value>,
    /// Callers by identity name (`""` on stdio).
    views: Mutex<std::collections::HashMap<String, Arc<View>>>,
    session_prefix: String,
    instructions: String,
    max_tools: usize,
    /// Built on the first `find_tools` or failed `load_tools`: `all` mode never pays for it.
    selector: OnceCell<Option<Selector>>,
    /// Which upstream serves each resource URI and prompt quiver listed.
    routes: crate::federation::Routes,
    /// `[security.flows]` compiled, and the config generation it was compiled at.
    flow_rules: Mutex<(u64, Option<Arc<quiver_core::flows::FlowRules>>)>,
}

impl QuiverServer {
    fn subscribed(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, String>> {
        self.subscribed.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn listening(&self) -> std::sync::MutexGuard<'_, Vec<(String, String)>> {
        self.listening.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A server over `host` for one connection named `session_id`. Fails on an unusable
    /// `[selector]` pattern.
    pub fn new(
        host: Arc<Host>,
        options: &ServeOptions,
        session_id: impl Into<String>,
    ) -> anyhow::Result<Self> {
        let config = host.config().config.selector.clone();
        let mode = options.mode.unwrap_or(config.mode);
        let policy = Policy::new(&config)?;
        let inferred = quiver_runtime::enrich::inferred_output_schemas(&host);
        let catalog = Catalog::new(&host, &policy, &inferred);
        let listing = Listing::new(mode, &config, &catalog)?;
        let mut instructions = catalog.instructions(mode);
        let down: Vec<String> = host
            .upstream_reports()
            .into_iter()
            .filter(|r| matches!(r.state, quiver_runtime::upstream::UpstreamState::Failed { .. }))
            .map(|r| format!("- {}: unavailable ({})", r.name, r.state.public()))
            .collect();
        if !down.is_empty() {
            instructions
                .push_str("\nUpstream servers not serving now (restarted automatically):\n");
            instructions.push_str(&down.join("\n"));
        }
        let failed: Vec<String> = host
            .plugin_reports()
            .iter()
            .filter_map(|r| match &r.status {
                quiver_runtime::PluginStatus::Failed { reason } => {
                    let file = r.path.file_name().map(|f| f.to_string_lossy()).unwrap_or_default();
                    Some(format!("- {file}: {reason}"))
                }
                _ => None,
            })
            .collect();
        if !failed.is_empty() {
            instructions.push_str("\nProviders unavailable (their tools are missing):\n");
            instructions.push_str(&failed.join("\n"));
        }
        if mode == ServeMode::Dynamic {
            instructions.push_str(
                "\nClients on protocol 2026-07-28 (no sessions) get the search mode: find_tools \
                 and call_tool, since a per-connection list cannot change there.",
            );
        }
        Ok(Self {
            inner: Arc::new(Inner {
                max_tools: config.max_tools.max(1),
                host,
                config,
                mode,
                base_policy: policy,
                inferred,
                views: Mutex::new(std::collections::HashMap::new()),
                session_prefix: session_id.into(),
                instructions,
                selector: OnceCell::new(),
                routes: crate::federation::Routes::default(),
                flow_rules: Mutex::new((u64::MAX, None)),
            }),
            listing: Arc::new(Mutex::new(listing)),
            log_level: Arc::new(std::sync::atomic::AtomicU8::new(u8::MAX)),
            subscribed: Arc::default(),
            listening: Arc::default(),
        })
    }

    /// Another connection to the same server: shared callers' state, its own tool list.
    pub fn connection(&self) -> Self {
        let catalog = self.view(None).catalog(&self.inner);
        let listing = Listing::new(self.inner.mode, &self.inner.config, &catalog)
            .unwrap_or_else(|_| self.listing().clone());
        Self {
            inner: Arc::clone(&self.inner),
            listing: Arc::new(Mutex::new(listing)),
            log_level: Arc::new(std::sync::atomic::AtomicU8::new(u8::MAX)),
            subscribed: Arc::default(),
            listening: Arc::default(),
        }
    }

    /// The state of `who` (the local caller when `None`), created on their first request.
    fn view(&self, who: Option<&Identity>) -> Arc<View> {
        let inner = &self.inner;
        let key = who.map(|w| w.name.clone()).unwrap_or_default();
        let mut views = inner.views.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(view) = views.get(&key) {
            return Arc::clone(view);
        }
        let mut policy = match who.and_then(|w| w.user.as_ref()) {
            Some(user) => inner.base_policy.narrowed_by(user).unwrap_or_else(|e| {
                tracing::warn!(user = %user.name, "{e}; refusing every tool to this user");
                Policy::refuse_all()
            }),
            None => inner.base_policy.clone(),
        };
        // Which signed-in account each call acts as, by the user's rules; a rule that does not
        // compile could send a call out as the wrong account, so nothing is served then.
        let account_rules = match who.and_then(|w| w.user.as_ref()) {
            Some(user) if !user.accounts.is_empty() => {
                let rules: Vec<_> = user.accounts.iter().map(|a| a.rule.clone()).collect();
                match quiver_core::scope::ScopeRules::named(&rules, "user accounts") {
                    Ok(compiled) => Some(Arc::new(AccountRules {
                        rules: compiled,
                        accounts: user.accounts.iter().map(|a| a.account.clone()).collect(),
                    })),
                    Err(e) => {
                        tracing::warn!(user = %user.name, "{e}; refusing every tool to this user");
                        policy = Policy::refuse_all();
                        None
                    }
                }
            }
            _ => None,
        };
        let session_id = if key.is_empty() {
            inner.session_prefix.clone()
        } else {
            format!("{}-{key}", inner.session_prefix)
        };
        let mut session = Session::new(Arc::clone(&inner.host), session_id.clone());
        let credentials = who
            .and_then(|w| w.user.as_ref())
            .filter(|u| !u.tokens.is_empty())
            .map(|u| quiver_runtime::host::Credentials::from_variables(&u.tokens));
        if let Some(credentials) = credentials {
            // Their calls run with their tokens (and accounts they sign in to, as they do).
            session = session.with_credentials(credentials);
        }
        if !key.is_empty() {
            // An HTTP caller: no connection guarantees it saw an earlier answer. Callers acting
            // as the same accounts share cached results (on every replica, with Redis) — and
            // stop sharing when one signs in or out; each caller's pipeline state is their own.
            let fingerprint =
                quiver_runtime::state::credential_fingerprint(session.credentials().as_deref());
            session = session
                .with_user(&key)
                .repeats_as_data()
                .scoped_by_credentials(&format!("{key}@{fingerprint}"));
        }
        let catalog = Catalog::new(&inner.host, &policy, &inner.inferred);
        let generation = inner.host.generation();
        let shared_policy = Arc::new(Mutex::new((generation, policy)));
        // A pre-fetch goes only where the caller's own calls may go (the policy as the caller's
        // last call refreshed it).
        let guarded = Arc::clone(&shared_policy);
        let chosen = account_rules.clone();
        let session =
            session.with_prefetch_guard(Arc::new(move |tool: &str, arguments: &Value| {
                let mcp_name =
                    quiver_core::ToolName::parse(tool).map(|n| n.mcp_name()).unwrap_or_default();
                // Nor as another account than the one its arguments choose.
                let provider = tool.split('.').next().unwrap_or_default();
                if let Some(chosen) = &chosen {
                    let wanted = chosen.wanted(tool, &mcp_name, arguments);
                    let acting = quiver_runtime::session::acting_account(provider);
                    let same = match (wanted, &acting) {
                        (Some(wanted), Some(acting)) => {
                            wanted.eq_ignore_ascii_case(&acting.account)
                        }
                        (None, Some(acting)) => !acting.by_rule,
                        (Some(_), None) => false,
                        (None, None) => true,
                    };
                    if !same {
                        return false;
                    }
                }
                let policy = guarded.lock().unwrap_or_else(|e| e.into_inner());
                policy.1.scope_refusal(tool, &mcp_name, arguments).is_none()
            }));
        let view = Arc::new(View {
            session,
            session_id,
            user: who.and_then(|w| w.user.clone()),
            policy: shared_policy,
            catalog: Mutex::new((
                (inner.host.upstreams().version(), generation),
                Arc::new(catalog),
            )),
            intent: Mutex::new(Vec::new()),
            flows: Mutex::default(),
            account_rules,
        });
        views.insert(key, Arc::clone(&view));
        view
    }

    /// How long a client may keep this list (`ttlMs`): it changes only on a reload or, with
    /// upstreams, when one of them changes (announced with `list_changed`); in `dynamic` mode
    /// with every load.
    fn list_ttl_ms(&self, context: &RequestContext<RoleServer>) -> u64 {
        match self.mode_for(Some(context)) {
            ServeMode::Dynamic => 0,
            _ if !self.inner.host.upstreams().all().is_empty() => 30_000,
            _ => 300_000,
        }
    }

    /// The mode this request is served in: `dynamic` changes a connection's list, which
    /// 2026-07-28 (no connections) forbids, so its clients get `search`.
    fn mode_for(&self, context: Option<&RequestContext<RoleServer>>) -> ServeMode {
        let modern =
            context.and_then(|c| c.protocol_version()).is_some_and(|v| !v.has_initialize());
        match self.inner.mode {
            ServeMode::Dynamic if modern => ServeMode::Search,
            mode => mode,
        }
    }

    /// The tools `tools/list` returns now to the local caller, as MCP JSON (for token
    /// measurements and tests).
    pub fn list_json(&self) -> Value {
        let catalog = self.view(None).catalog(&self.inner);
        json!({ "tools": self.listing().tools(&catalog) })
    }

    /// What `tools/list` returns to this request's caller in this request's mode.
    fn list_for(&self, context: &RequestContext<RoleServer>) -> Value {
        let view = self.view(identity(context).as_ref());
        let catalog = view.catalog(&self.inner);
        let mode = self.mode_for(Some(context));
        let listing = self.listing();
        if mode == listing.mode() {
            json!({ "tools": listing.tools(&catalog) })
        } else {
            let search = Listing::new(mode, &self.inner.config, &catalog)
                .unwrap_or_else(|_| listing.clone());
            json!({ "tools": search.tools(&catalog) })
        }
    }

    /// The server's instructions.
    pub fn instructions(&self) -> &str {
        &self.inner.instructions
    }

    /// How many callers have state on this server.
    pub fn callers(&self) -> usize {
        self.inner.views.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Cancels every caller's pre-fetches and waits for them.
    pub async fn shutdown(&self) {
        let views: Vec<Arc<View>> =
            self.inner.views.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        for view in views {
            view.session.shutdown().await;
        }
    }

    fn listing(&self) -> std::sync::MutexGuard<'_, Listing> {
        self.listing.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn selector(&self) -> Option<&Selector> {
        let inner = &self.inner;
        inner
            .selector
            .get_or_init(|| async {
                let host = Arc::clone(&inner.host);
                let options = SelectorOptions::from_config(&host.config().config);
                // Building may run the embeddings enrichment: off the async workers.
                let built =
                    tokio::task::spawn_blocking(move || selector_for_host(&host, options)).await;
                match built {
                    Ok(Ok(selector)) => Some(selector),
                    Ok(Err(e)) => {
                        tracing::warn!("no selector, find_tools falls back to names: {e}");
                        None
                    }
                    Err(e) => {
                        tracing::warn!("no selector, find_tools falls back to names: {e}");
                        None
                    }
                }
            })
            .await
            .as_ref()
    }

    /// The enabled tools best matching `query`, at most `k`, with their scores, the caller's
    /// recent calls lifting their follow-ups and bundle siblings; for a request of several
    /// clauses, each clause's best tool among them (scored on the clause alone) though the whole
    /// request ranks it lower. `None` for the scores when no selector could be built (names
    /// only). Also why the query was ranked without its embedding model when that failed.
    async fn rank<'c>(
        &self,
        view: &View,
        catalog: &'c Catalog,
        query: &str,
        k: usize,
    ) -> Ranking<'c> {
        let Some(selector) = self.selector().await else {
            let hits = fallback_rank(catalog, query, k).into_iter().map(|t| (t, None)).collect();
            return Ranking { hits, without_model: None, floor: 0.0, clause_hits: Vec::new() };
        };
        let recent = view.session.recent_calls().await;
        let vector = selector.query_vector(query).await;
        // The selector sees the whole catalog (static sources too); refused and unserved tools
        // are dropped here, so rank deep enough to still fill `k`.
        let depth = k + catalog.all().len();
        let served = |hit: Ranked| {
            catalog.get(&hit.name).filter(|t| t.enabled()).map(|t| (t, Some(hit.score)))
        };
        let (ranked, floor) =
            selector.rank_and_floor(query, vector.vector.as_deref(), &recent, depth);
        let mut hits: Vec<(&ExposedTool, Option<f32>)> =
            ranked.into_iter().filter_map(served).take(k).collect();
        let clause_hits: Vec<(&ExposedTool, Option<f32>)> = selector
            .clause_hits(query, vector.vector.as_deref(), &recent)
            .into_iter()
            .filter_map(served)
            .collect();
        let is_clause_hit =
            |tool: &ExposedTool| clause_hits.iter().any(|(hit, _)| hit.qualified == tool.qualified);
        for &(tool, score) in &clause_hits {
            if hits.iter().any(|(hit, _)| hit.qualified == tool.qualified) {
                continue;
            }
            if hits.len() >= k {
                // The lowest hit that is no clause's best makes room.
                match hits.iter().rposition(|(hit, _)| !is_clause_hit(hit)) {
                    Some(lowest) => hits.remove(lowest),
                    None => continue,
                };
            }
            hits.push((tool, score));
        }
        let clause_hits = clause_hits.iter().map(|(t, _)| t.qualified.clone()).collect();
        Ranking { hits, without_model: vector.without_model, floor, clause_hits }
    }

    /// The bundles nearest to `query` when no tool clears τ: those of the tools that scored
    /// anything, best first, else every provider's — at most three, each with what is in it.
    fn closest_bundles(catalog: &Catalog, ranked: &[(&ExposedTool, Option<f32>)]) -> Vec<Value> {
        let bundles = catalog.bundles();
        let mut names: Vec<String> = Vec::new();
        for (tool, _) in ranked {
            let group = tool.group.as_ref().map(|g| format!("{}.{g}", tool.provider));
            let name = group.filter(|g| bundles.iter().any(|b| &b.name == g));
            let name = name.unwrap_or_else(|| tool.provider.clone());
            if !names.contains(&name) {
                names.push(name);
            }
        }
        if names.is_empty() {
            names =
                bundles.iter().filter(|b| !b.name.contains('.')).map(|b| b.name.clone()).collect();
        }
        names
            .iter()
            .take(3)
            .filter_map(|n| bundles.iter().find(|b| &b.name == n))
            .map(|b| json!({"name": b.name, "description": b.description}))
            .collect()
    }

    /// Why `name` is no tool this caller may call directly, when it is none: not an escape hatch
    /// of the mode, not in their catalog, and not the tool of an upstream that is down (which
    /// gets its own answer).
    fn unknown_tool(&self, name: &str, context: &RequestContext<RoleServer>) -> Option<String> {
        let mode = self.mode_for(Some(context));
        let hatch = matches!(
            (mode, name),
            (ServeMode::Search, FIND_TOOLS | CALL_TOOL) | (ServeMode::Dynamic, LOAD_TOOLS)
        );
        if hatch {
            return None;
        }
        let view = self.view(identity(context).as_ref());
        let catalog = view.catalog(&self.inner);
        if catalog.get(name).is_some() {
            return None;
        }
        let down = self.down_upstream(name).is_some() || self.held_tool(name).is_some();
        (!down).then(|| unknown_tool_message(&catalog, name, self.listing().mode()))
    }

    /// `[security.flows]` as the config in effect says, compiled once per config generation;
    /// `None` when the check is off.
    fn flow_rules(&self) -> Option<Arc<quiver_core::flows::FlowRules>> {
        let generation = self.inner.host.generation();
        let mut cached = self.inner.flow_rules.lock().unwrap_or_else(|e| e.into_inner());
        if cached.0 != generation {
            let config = &self.inner.host.config().config.security.flows;
            let rules = match quiver_core::flows::FlowRules::new(config) {
                Ok(rules) => Some(Arc::new(rules)),
                Err(e) => {
                    // A pattern that does not compile asks before every write rather than none.
                    tracing::warn!("{e}; every write after a read is asked until it is fixed");
                    quiver_core::flows::FlowRules::new(&quiver_core::flows::FlowsConfig {
                        untrusted: vec!["*".to_owned()],
                        ..quiver_core::flows::FlowsConfig::default()
                    })
                    .ok()
                    .map(Arc::new)
                }
            };
            *cached = (generation, rules);
        }
        cached.1.clone().filter(|rules| rules.enabled())
    }

    /// Why the upstream tool listed as `name` is refused, when it is held until the operator
    /// approves its definition.
    fn held_tool(&self, name: &str) -> Option<String> {
        self.inner.host.upstreams().all().iter().find_map(|upstream| {
            let tool = match upstream.name_prefix() {
                "" => name,
                prefix => name.strip_prefix(prefix)?.strip_prefix('_')?,
            };
            upstream.held(tool).map(|held| held.refusal(upstream.name(), name))
        })
    }

    /// The upstream whose tool `name` would be, when it is not serving now: its tools are
    /// missing for that reason, not unknown.
    fn down_upstream(&self, name: &str) -> Option<quiver_runtime::upstream::UpstreamReport> {
        self.inner.host.upstream_reports().into_iter().find(|r| {
            name.strip_prefix(r.name.as_str()).is_some_and(|rest| rest.starts_with(['_', '.']))
                && r.state != quiver_runtime::upstream::UpstreamState::Ready
        })
    }

    async fn call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        answers: &Answers,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let mode = self.mode_for(Some(context));
        let view = self.view(identity(context).as_ref());
        let view = &*view;
        match (mode, name) {
            (ServeMode::Search, FIND_TOOLS) => self.find_tools(view, &arguments).await.into(),
            (ServeMode::Search, CALL_TOOL) => {
                let Some(target) = arguments.get("name").and_then(Value::as_str) else {
                    return error_result(
                        "call_tool needs `name` (a tool name from find_tools) and `arguments`",
                    )
                    .into();
                };
                let args = match arguments.get("arguments") {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(args)) => args.clone(),
                    Some(other) => {
                        return error_result(format!(
                            "call_tool's `arguments` must be an object, got {other}"
                        ))
                        .into()
                    }
                };
                self.call_provider_tool(view, target, args, answers, context, Via::CallTool).await
            }
            (ServeMode::Dynamic, LOAD_TOOLS) => {
                self.load_tools(view, &arguments, context).await.into()
            }
            _ => {
                self.call_provider_tool(view, name, arguments, answers, context, Via::Direct).await
            }
        }
    }

    async fn find_tools(&self, view: &View, arguments: &Map<String, Value>) -> CallToolResult {
        let Some(query) = arguments.get("query").and_then(Value::as_str) else {
            return error_result("find_tools needs a `query`: what you want to do, in words");
        };
        let k = arguments
            .get("k")
            .and_then(Value::as_u64)
            .map(|k| k as usize)
            .unwrap_or(DEFAULT_K)
            .clamp(1, self.inner.max_tools);
        escape::record(&self.inner.host, &view.session_id, EventKind::FindTools, FIND_TOOLS);
        view.set_intent(query);
        let catalog = view.catalog(&self.inner);
        let describe = |t: &ExposedTool| json!({"name": t.mcp_name, "description": t.description, "inputSchema": t.input_schema});
        // A bundle's name (from a "closest bundles" answer) lists that bundle.
        if let Some(bundle) = catalog.bundles().iter().find(|b| b.name == query.trim()) {
            let found: Vec<Value> = bundle
                .tools
                .iter()
                .filter_map(|n| catalog.get(n).filter(|t| t.enabled()))
                .map(describe)
                .collect();
            let note = "the bundle's tools; run one with call_tool(name, arguments)";
            return text_result(json!({ "tools": found, "note": note }).to_string());
        }
        let Ranking { hits: ranked, without_model, floor, clause_hits } =
            self.rank(view, &catalog, query, k).await;
        // Said in the answer, not only logged: the model may rephrase in plainer words.
        let ranking = without_model.map(|why| {
            format!("ranked without the embedding model, on words and the built-in vectors: {why}")
        });
        // The tools the selector would choose on their own merit (ranked without the model,
        // held to the τ of words and the distilled vectors), and each clause's best.
        let fitting: Vec<&(&ExposedTool, Option<f32>)> = ranked
            .iter()
            .filter(|(t, score)| {
                score.is_none_or(|s| s >= floor) || clause_hits.contains(&t.qualified)
            })
            .collect();
        // Under `max_list_tokens`, the answer keeps the most value its listings can afford.
        let affordable: Option<Vec<String>> = match self.selector().await {
            Some(selector) => {
                let scored: Vec<(String, f32)> = fitting
                    .iter()
                    .map(|(t, score)| (t.qualified.clone(), score.unwrap_or(0.0)))
                    .collect();
                Some(selector.fit_budget(&scored))
            }
            None => None,
        };
        let found: Vec<Value> = fitting
            .iter()
            .filter(|(t, _)| affordable.as_ref().is_none_or(|a| a.contains(&t.qualified)))
            .map(|(t, _)| describe(t))
            .collect();
        if found.is_empty() {
            let closest = Self::closest_bundles(&catalog, &ranked);
            let note = "no tool matches this request well enough; ask again in other words (the \
                        service and the action), or name one of the closest bundles as the query \
                        to see its tools";
            let mut answer = json!({ "tools": found, "note": note, "closest_bundles": closest });
            if let Some(ranking) = ranking {
                answer["ranking"] = json!(ranking);
            }
            return text_result(answer.to_string());
        }
        let mut answer =
            json!({ "tools": found, "note": "run one with call_tool(name, arguments)" });
        if let Some(ranking) = ranking {
            answer["ranking"] = json!(ranking);
        }
        text_result(answer.to_string())
    }

    async fn load_tools(
        &self,
        view: &View,
        arguments: &Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let Some(wanted) = arguments.get("bundle_or_tool").and_then(Value::as_str) else {
            return error_result(
                "load_tools needs `bundle_or_tool`: a bundle from the instructions' menu or a \
                 tool name",
            );
        };
        let catalog = view.catalog(&self.inner);
        let bundles = catalog.bundles();
        let mut without_model = None;
        let tools: Vec<String> = if let Some(bundle) = bundles.iter().find(|b| b.name == wanted) {
            bundle.tools.clone()
        } else if let Some(tool) = catalog.get(wanted) {
            if let Some(refusal) = tool.refusal {
                return error_result(refusal.message(&tool.qualified));
            }
            vec![tool.qualified.clone()]
        } else {
            // A request in words: the tools at or above τ with their bundles' strongest
            // siblings, as the selector chooses them (CORE is listed already).
            let chosen: Vec<String> = match self.selector().await {
                Some(selector) => {
                    let recent = view.session.recent_calls().await;
                    let vector = selector.query_vector(wanted).await;
                    without_model = vector.without_model;
                    selector
                        .select_with(wanted, vector.vector.as_deref(), &recent)
                        .into_iter()
                        .filter(|n| catalog.get(n).is_some_and(|t| t.enabled()))
                        .collect()
                }
                None => Vec::new(),
            };
            if chosen.is_empty() {
                let ranked = self.rank(view, &catalog, wanted, 3).await.hits;
                let suggestions: Vec<String> =
                    ranked.iter().map(|(t, _)| t.mcp_name.clone()).collect();
                let mut names: Vec<&str> = bundles.iter().map(|b| b.name.as_str()).collect();
                names.sort_by(|a, b| {
                    strsim::jaro_winkler(wanted, b).total_cmp(&strsim::jaro_winkler(wanted, a))
                });
                names.truncate(3);
                return error_result(format!(
                    "no bundle or tool `{wanted}`, and no tool matches it well enough; closest \
                     bundles: {}; nearest tools: {}",
                    names.join(", "),
                    if suggestions.is_empty() { "none".into() } else { suggestions.join(", ") }
                ));
            }
            view.set_intent(wanted);
            chosen
        };
        escape::record(&self.inner.host, &view.session_id, EventKind::LoadTools, wanted);
        let outcome = self.listing().load(&tools);
        if outcome.changed() {
            if let Err(e) = context.peer.notify_tool_list_changed().await {
                tracing::warn!("could not send tools/list_changed: {e}");
            }
        }
        let mcp = |names: &[String]| -> Vec<String> {
            names.iter().filter_map(|n| catalog.get(n)).map(|t| t.mcp_name.clone()).collect()
        };
        let mut summary = json!({
            "loaded": mcp(&outcome.admitted),
            "already_listed": mcp(&outcome.already),
        });
        if !outcome.evicted.is_empty() {
            summary["unlisted_to_make_room"] = json!(mcp(&outcome.evicted));
        }
        if let Some(why) = without_model {
            summary["ranking"] = json!(format!(
                "chosen without the embedding model, on words and the built-in vectors: {why}"
            ));
        }
        if !outcome.left_out.is_empty() {
            summary["left_out"] = json!(mcp(&outcome.left_out));
            summary["note"] = json!(format!(
                "max_tools = {} leaves no room for the rest; load a smaller bundle or one tool",
                self.inner.max_tools
            ));
        }
        text_result(summary.to_string())
    }

    /// [`QuiverServer::call_tool_untraced`] in a span of its own (`tools/call NAME`, or
    /// `resources/read` for a resource read), continuing the client's trace when it sent one —
    /// the request's `traceparent` header over HTTP, or `_meta.traceparent`.
    async fn call_provider_tool(
        &self,
        view: &View,
        name: &str,
        arguments: Map<String, Value>,
        answers: &Answers,
        context: &RequestContext<RoleServer>,
        via: Via,
    ) -> CallToolResponse {
        use tracing::Instrument;
        let method = if via == Via::Resource { "resources/read" } else { "tools/call" };
        let mut carried = std::collections::HashMap::new();
        let headers = context.extensions.get::<http::request::Parts>().map(|p| &p.headers);
        for key in ["traceparent", "tracestate"] {
            let from_meta = context.meta.get(key).and_then(Value::as_str);
            let from_header = headers.and_then(|h| h.get(key)?.to_str().ok());
            if let Some(value) = from_meta.or(from_header) {
                carried.insert(key.to_owned(), value.to_owned());
            }
        }
        // Traced or not is decided here, once for the whole request.
        let sampled = quiver_runtime::traces::head_sampled(&carried);
        let span = if !sampled {
            tracing::Span::none()
        } else {
            tracing::info_span!(
                target: quiver_runtime::traces::TARGET,
                "mcp request",
                otel.name = %format!("{method} {name}"),
                otel.kind = "server",
                mcp.method.name = method,
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = name,
                mcp.session.id = %view.session_id,
                jsonrpc.request.id = %context.id,
                error.type = tracing::field::Empty,
                quiver.cached = tracing::field::Empty,
                quiver.prefetched = tracing::field::Empty,
                quiver.result.bytes = tracing::field::Empty,
            )
        };
        quiver_runtime::traces::continue_trace(&span, &carried);
        let untraced = self.call_tool_untraced(view, name, arguments, answers, context, via);
        let response =
            quiver_runtime::traces::within(sampled, untraced.instrument(span.clone())).await;
        // Measured only for a span that is exported: counting the bytes writes the result out.
        if let (CallToolResponse::Complete(result), false) = (&response, span.is_disabled()) {
            if result.is_error == Some(true) {
                span.record("error.type", "tool_error");
            }
            let bytes = serde_json::to_string(&result.content).map_or(0, |t| t.len());
            span.record("quiver.result.bytes", bytes);
        }
        response
    }

    async fn call_tool_untraced(
        &self,
        view: &View,
        name: &str,
        arguments: Map<String, Value>,
        answers: &Answers,
        context: &RequestContext<RoleServer>,
        via: Via,
    ) -> CallToolResponse {
        let catalog = view.catalog(&self.inner);
        let Some(tool) = catalog.get(name) else {
            // A tool of an upstream that is down is not "unknown": say why it is missing.
            if let Some(report) = self.down_upstream(name) {
                return error_result(format!(
                    "upstream `{}` is unavailable ({}); its tools return once it restarts",
                    report.name,
                    report.state.public()
                ))
                .into();
            }
            if let Some(refusal) = self.held_tool(name) {
                return error_result(refusal).into();
            }
            return error_result(unknown_tool_message(&catalog, name, self.listing().mode()))
                .into();
        };
        if let Some(refusal) = tool.refusal {
            return error_result(refusal.message(&tool.qualified)).into();
        }
        let mut arguments = arguments;
        // The user's fixed values, defaults and hidden arguments, whatever the client sent.
        if let Some(edit) = &tool.edit {
            edit.arguments(&mut arguments);
        }
        // Where the call may reach, judged on what would be sent (fixed values included).
        let sent = Value::Object(arguments);
        let outside = view.with_policy(&self.inner, |policy| {
            policy.scope_refusal(&tool.qualified, &tool.mcp_name, &sent)
        });
        if let Some(refusal) = outside {
            return error_result(refusal).into();
        }
        // A write after an untrusted read and a read from elsewhere is asked (never on the
        // model's word: `_confirm` does not count); a read is remembered, by its scope.
        let flow_rules = self.flow_rules();
        let (flow, read_scope) = match &flow_rules {
            Some(rules) if tool.policy_class.is_speculatable() => {
                (None, Some(rules.scope_of(&tool.qualified, &sent)))
            }
            Some(rules) => {
                let read = view.flows.lock().unwrap_or_else(|e| e.into_inner());
                (rules.before_write(&read, &tool.qualified, &sent), None)
            }
            None => (None, None),
        };
        let Value::Object(mut arguments) = sent else { unreachable!("built as an object") };
        let renamed = tool.former_name.as_deref().filter(|former| *former == name);
        // A later round of a call an upstream asked input for carries `binding.upstream-state`.
        let binding = crate::confirm::binding(tool, &arguments);
        let round = answers
            .state
            .as_deref()
            .and_then(|state| state.strip_prefix(&binding)?.strip_prefix('.'))
            .map(|upstream_state| quiver_runtime::upstream::InputRound {
                responses: answers.responses.clone().unwrap_or_default(),
                state: (!upstream_state.is_empty()).then(|| upstream_state.to_owned()),
            });
        // A user's own account at the service, signed in to on first use — before confirming,
        // so a 2026-07-28 client answers each question once.
        let provider = tool.qualified.split('.').next().unwrap_or_default();
        let mut account = None;
        let registered = self.inner.host.tool(&tool.qualified);
        let plugin = registered.as_ref().is_some_and(|t| t.plugin().is_some());
        let upstream = registered
            .as_ref()
            .filter(|t| t.plugin().is_none())
            .and_then(|_| self.inner.host.upstreams().get(provider));
        let upstream_auth = upstream.map(|u| u.config().auth);
        if let Some(user) = view.user.as_ref() {
            let accounts = self.inner.host.accounts();
            let own_variable = user.tokens.contains_key(provider);
            // An upstream that signs each user in (the MCP authorization flow): its app is
            // discovered, and quiver registered, on first need.
            let upstream_oauth =
                upstream_auth == Some(quiver_runtime::upstream::UpstreamAuth::Oauth);
            if upstream_oauth {
                let callback = accounts.callback_for(provider).unwrap_or_default();
                if let Err(e) = self.inner.host.upstream_app(provider, &callback).await {
                    return error_result(format!(
                        "not sent: signing in to upstream `{provider}` is not possible now: {e}"
                    ))
                    .into();
                }
            }
            if (plugin && !own_variable && accounts.signs_in(provider)) || upstream_oauth {
                let called = Value::Object(arguments.clone());
                let wanted = view
                    .account_rules
                    .as_ref()
                    .and_then(|r| r.wanted(&tool.qualified, &tool.mcp_name, &called));
                let signed_in = crate::sign_in::ensure(
                    accounts, &user.name, provider, wanted, &binding, answers, context,
                )
                .await;
                match signed_in {
                    crate::sign_in::SignIn::Ready(token) => account = Some(token),
                    crate::sign_in::SignIn::Pending(input_required) => {
                        return CallToolResponse::InputRequired(input_required)
                    }
                    crate::sign_in::SignIn::Refused(message) => {
                        return error_result(message).into()
                    }
                    crate::sign_in::SignIn::Error(error) => {
                        *answers.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
                        return error_result("sign-in required").into();
                    }
                }
            }
        }
        // An upstream that takes each caller's identity gets their token (or one exchanged
        // for it), never the operator's, and never a quiver API key.
        if let Some(upstream) = upstream {
            let caller_token = matches!(
                upstream_auth,
                Some(
                    quiver_runtime::upstream::UpstreamAuth::Passthrough
                        | quiver_runtime::upstream::UpstreamAuth::Exchange
                )
            );
            if caller_token {
                match caller_token_for(upstream, context).await {
                    Ok(token) => account = Some(token),
                    Err(refusal) => return error_result(refusal).into(),
                }
            }
        }
        // Such a round comes only after the person confirmed the call (the upstream was not
        // called before), so it is not asked again.
        let must_ask = tool.confirm || flow.is_some();
        // Who confirmed the call, for the audit trail.
        let mut confirmed_by = None;
        if must_ask && crate::confirm::client_can_ask(context) && round.is_none() {
            // The human answers, through the client: a `_confirm` the model wrote counts for
            // nothing.
            arguments.remove(crate::confirm::CONFIRM_ARGUMENT);
            match crate::confirm::ask(tool, &arguments, flow.as_deref(), answers, context).await {
                crate::confirm::Answer::Confirmed => confirmed_by = Some("person"),
                crate::confirm::Answer::Pending(input_required) => {
                    return CallToolResponse::InputRequired(input_required)
                }
                crate::confirm::Answer::Refused(message) => return error_result(message).into(),
            }
        } else if let (Some(reason), None) = (&flow, &round) {
            return error_result(format!(
                "quiver did not send this call: {reason} This client cannot ask the person you \
                 work for through quiver: tell them what you were about to do and why, and let \
                 them decide."
            ))
            .into();
        } else if tool.confirm && arguments.get("_confirm") != Some(&Value::Bool(true)) {
            let effect = if tool.class.is_speculatable() { "reads" } else { "can change things" };
            return error_result(format!(
                "`{}` {effect} and needs confirmation: tell the user what it will do, and once \
                 they agree repeat the call with \"_confirm\": true",
                tool.mcp_name
            ))
            .into();
        }
        if confirmed_by.is_none() && must_ask {
            // A later round of a call the person confirmed, or the model's `_confirm` where the
            // client cannot ask.
            confirmed_by = Some(if round.is_some() { "person" } else { "_confirm" });
        }
        // Clients that send every argument as a string (the MCP Inspector's CLI) get them parsed
        // per the schema here, instead of each provider refusing `"1347"` for a number.
        let coerced =
            quiver_core::client_schema::coerce_arguments(&tool.input_schema, &mut arguments);
        if !coerced.is_empty() {
            tracing::debug!(tool = %tool.qualified, ?coerced, "string arguments parsed per the schema");
        }
        let listed = self.listing().is_listed(&catalog, &tool.qualified);
        // A model that called an unlisted tool found a way around the list; a resource read
        // is not a model's call.
        let escape = match via {
            Via::CallTool => Some(EventKind::CallTool),
            Via::Direct => Some(EventKind::FreeRecovery),
            Via::Resource => None,
        };
        if let (false, Some(kind)) = (listed, escape) {
            escape::record(&self.inner.host, &view.session_id, kind, &tool.qualified);
        }
        // Every write is on the audit trail before its caller is answered (reads too when asked);
        // none is sent while the trail cannot be written.
        let writes = !tool.policy_class.is_speculatable();
        let audit = self.inner.host.audit().ok().flatten().filter(|log| log.records(writes));
        if let Some(why) = audit.as_ref().filter(|_| writes).and_then(|log| log.broken()) {
            return error_result(format!(
                "quiver did not send this call: its audit trail cannot be written ({why}); \
                 whoever runs quiver must fix it (space, permissions of [audit] path)"
            ))
            .into();
        }
        let audited = audit.as_ref().map(|_| Value::Object(arguments.clone()));
        let started = std::time::Instant::now();
        let running = self.run(view, tool, Value::Object(arguments), round, context);
        let (result, effects) = match &account {
            Some(token) => {
                let credential = quiver_runtime::host::Credential::Account(token.clone());
                quiver_runtime::session::acting_as(provider, credential, running).await
            }
            None => running.await,
        };
        let span = tracing::Span::current();
        span.record("quiver.cached", effects.cache_hit);
        span.record("quiver.prefetched", effects.prefetch_hit);
        // An upstream's requests for input, for a 2026-07-28 client to answer in the next round:
        // its state is bound to this call, so answers reach the call they were asked for.
        if let Some(input_required) =
            result.metadata.get(quiver_runtime::upstream::INPUT_REQUIRED_METADATA)
        {
            if let Ok(mut input_required) =
                serde_json::from_value::<rmcp::model::InputRequiredResult>(input_required.clone())
            {
                let upstream_state = input_required.request_state.take().unwrap_or_default();
                input_required.request_state = Some(format!("{binding}.{upstream_state}"));
                return CallToolResponse::InputRequired(input_required);
            }
        }
        if let (Some(log), Some(arguments)) = (&audit, &audited) {
            let name = |value: Value| value.as_str().map(str::to_owned).unwrap_or_default();
            let class = name(serde_json::to_value(tool.policy_class).unwrap_or_default());
            let error = result.is_error.then(|| {
                result.error_kind.map_or_else(
                    || "error".to_owned(),
                    |kind| name(serde_json::to_value(kind).unwrap_or_default()),
                )
            });
            let request_ids = result.request_ids();
            let user = view.user.as_ref();
            let whose = match &account {
                Some(token) => Some(format!("{provider} account {}", token.account)),
                None => view.session.credentials().and_then(|c| c.whose(provider)),
            };
            let entry = quiver_runtime::audit::AuditEntry {
                user: user.map(|u| u.name.as_str()),
                credentials: whose.as_deref(),
                session: &view.session_id,
                tool: &tool.qualified,
                class: &class,
                arguments,
                sensitive: registered.as_ref().map_or(&[], |t| t.spec.sensitive_params.as_slice()),
                error: error.as_deref(),
                confirmed_by,
                cached: effects.cache_hit,
                request_ids: &request_ids,
                writes,
            };
            // A failure is logged by the trail, and stops the next write.
            let _ = log.record(&entry);
        }
        let mut result = result;
        // The caller's own lockdown, on what they are given (from the cache too).
        if !result.is_error && view.with_policy(&self.inner, Policy::locks_down) {
            quiver_runtime::host::withhold_by_lockdown(&mut result);
        }
        if let (Some(rules), Some(scope), false) = (&flow_rules, read_scope, result.is_error) {
            let upstream =
                self.inner.host.tool(&tool.qualified).is_some_and(|t| t.plugin().is_none());
            // Every text labelled as a writer's: the resource's own people wrote it.
            let labels = result.author_labels();
            let by_writers = !labels.is_empty() && labels.iter().all(|l| l.can_write == Some(true));
            let mut read = view.flows.lock().unwrap_or_else(|e| e.into_inner());
            let origin = (upstream, by_writers);
            rules.after_read_in(&mut read, &tool.qualified, &tool.mcp_name, scope, origin);
        }
        crate::metrics::call(&tool.qualified, &result, &effects, started.elapsed());
        self.listing().touch(&tool.qualified);
        if self.listing().mode() == ServeMode::Dynamic && !result.is_error {
            self.list_next_steps(&catalog, &tool.qualified, context).await;
        }
        if let Some(former) = renamed {
            result.content.push(quiver_core::Content::text(format!(
                "[quiver: `{former}` is listed as `{}` now; call it by that name — the old one \
                 will stop working]",
                tool.mcp_name
            )));
        }
        // Whose account a signed-in call acted as; one the service no longer accepts is
        // forgotten, so the next call asks to sign in again.
        if let (Some(token), Some(user)) = (&account, view.user.as_ref()) {
            let refused = result.error_kind == Some(quiver_core::ToolErrorKind::Unauthorized);
            let accounts = self.inner.host.accounts();
            if refused
                && !effects.cache_hit
                && accounts.signs_in(provider)
                && accounts.forget_grant(&user.name, provider, &token.grant).await == Ok(true)
            {
                result.content.push(quiver_core::Content::text(format!(
                    "[quiver: {provider} no longer accepts the sign-in of account {} (revoked \
                     or expired there); it is forgotten — make the call again to sign in anew]",
                    token.account
                )));
            }
        }
        let mut answer = to_call_result(result, tool);
        if let Some(token) = account {
            let meta = answer.meta.get_or_insert_with(Default::default);
            meta.0.insert(
                "quiver/account".into(),
                json!({"provider": provider, "account": token.account}),
            );
        }
        answer.into()
    }

    /// `dynamic` mode after a call: lists the called tool (if it ran unlisted) and its likeliest
    /// follow-ups, so the next step of the task is already on the model's list, and tells the
    /// client when the list changed. Refused and disabled tools are never listed.
    async fn list_next_steps(
        &self,
        catalog: &Catalog,
        called: &str,
        context: &RequestContext<RoleServer>,
    ) {
        let wanted = self.inner.config.follow_ups_on_call;
        let mut next: Vec<String> = Vec::new();
        if !self.listing().is_listed(catalog, called) {
            next.push(called.to_owned());
        }
        if wanted > 0 {
            if let Some(selector) = self.selector().await {
                next.extend(
                    selector
                        .follow_ups_of(called, FOLLOW_UP_MIN_PROBABILITY)
                        .into_iter()
                        .map(|(name, _)| name)
                        .filter(|n| catalog.get(n).is_some_and(|t| t.enabled()))
                        .take(wanted),
                );
            }
        }
        if next.is_empty() {
            return;
        }
        let outcome = self.listing().load(&next);
        if outcome.changed() {
            tracing::debug!(tool = called, listed = ?outcome.admitted, "listed after a call");
            if let Err(e) = context.peer.notify_tool_list_changed().await {
                tracing::warn!("could not send tools/list_changed: {e}");
            }
        }
    }

    /// Runs the call through the session, cancelled with the request and reporting progress.
    async fn run(
        &self,
        view: &View,
        tool: &ExposedTool,
        arguments: Value,
        round: Option<quiver_runtime::upstream::InputRound>,
        context: &RequestContext<RoleServer>,
    ) -> (ToolResult, quiver_runtime::session::CallEffects) {
        let cancel = Arc::new(AtomicBool::new(false));
        let token = context.meta.get_progress_token();
        // An upstream reports its own progress: forward it to the client that asked, instead of
        // heartbeats (two counters would not rise together).
        let upstream = self.inner.host.tool(&tool.qualified).is_some_and(|t| t.plugin().is_none());
        // In the order the upstream sent them, each before the result: queued here, sent by
        // the loop below, and what is queued when the call ends is sent before its result.
        let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel::<Notice>();
        let log_tx = progress_tx.clone();
        // Within a task, the upstream's progress messages are the task's status.
        let in_task = IN_TASK.try_with(Arc::clone).ok();
        let forward: ProgressSink = {
            let token = token.clone();
            let in_task = in_task.clone();
            Arc::new(move |progress, total, message| {
                if let (Some(task), Some(message)) = (&in_task, &message) {
                    task.say(message.clone());
                }
                let Some(token) = token.clone() else { return };
                let mut param = ProgressNotificationParam::new(token, progress);
                if let Some(total) = total {
                    param = param.with_total(total);
                }
                if let Some(message) = message {
                    param = param.with_message(message);
                }
                let _ = progress_tx.send(Notice::Progress(param));
            })
        };
        #[allow(deprecated)] // logging: see `set_level`
        let send_progress = |notice: Notice| {
            let peer = context.peer.clone();
            async move {
                let sent = match notice {
                    Notice::Progress(param) => peer.notify_progress(param).await,
                    Notice::Log(param) => peer.notify_logging_message(param).await,
                };
                if let Err(e) = sent {
                    tracing::debug!("could not forward an upstream's notification: {e}");
                }
            }
        };
        let intent = view.intent();
        // An upstream's sampling, elicitation and roots requests during the call go to this
        // client, as it declared it can answer them.
        let stateless = context.protocol_version().is_some_and(|v| !v.has_initialize());
        let client: Arc<dyn quiver_runtime::upstream::CallClient> = Arc::new(PeerClient {
            peer: context.peer.clone(),
            // A 2026-07-28 client has no connection quiver could send a request on: it takes an
            // upstream's requests as rounds of the call instead.
            capabilities: if stateless && in_task.is_none() {
                rmcp::model::ClientCapabilities::default()
            } else {
                context.client_capabilities().unwrap_or_default()
            },
            stateless,
            task: in_task,
            round,
            logs: log_tx,
            log_level: if stateless {
                context.meta.log_level()
            } else {
                let index = self.log_level.load(Ordering::SeqCst);
                LOG_LEVELS.get(usize::from(index)).and_then(|level| {
                    serde_json::from_value(Value::String((*level).to_owned())).ok()
                })
            },
        });
        let call = quiver_runtime::upstream::CALL_CLIENT.scope(
            client,
            CALL_PROGRESS.scope(
                forward,
                view.session.call_cancellable(
                    &tool.qualified,
                    arguments,
                    &intent,
                    Some(Arc::clone(&cancel)),
                ),
            ),
        );
        tokio::pin!(call);
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        let mut seconds = 0u32;
        loop {
            tokio::select! {
                outcome = &mut call => {
                    while let Ok(param) = progress_rx.try_recv() {
                        send_progress(param).await;
                    }
                    return outcome;
                }
                Some(param) = progress_rx.recv() => send_progress(param).await,
                () = context.ct.cancelled(), if !cancel.load(Ordering::SeqCst) => {
                    tracing::info!(tool = %tool.qualified, "cancelled by the client");
                    cancel.store(true, Ordering::SeqCst);
                }
                _ = ticks.tick(), if token.is_some() && !upstream => {
                    seconds += 1;
                    let Some(token) = token.clone() else { continue };
                    let progress = ProgressNotificationParam::new(token, f64::from(seconds))
                        .with_message(format!("{} is running ({seconds} s)", tool.mcp_name));
                    if let Err(e) = context.peer.notify_progress(progress).await {
                        tracing::debug!("could not send progress: {e}");
                    }
                }
            }
        }
    }
}

impl ServerHandler for QuiverServer {
    fn get_info(&self) -> InitializeResult {
        let mut capabilities = ServerCapabilities::builder().enable_tools();
        // Upstream tools come and go (restarts, their own list changes): say so in every mode.
        let upstreams = !self.inner.host.upstreams().all().is_empty();
        if self.listing().mode() == ServeMode::Dynamic || upstreams {
            capabilities = capabilities.enable_tool_list_changed();
        }
        let mut capabilities = capabilities.build();
        // The upstreams' resources and prompts, as quiver's own.
        let (resources, prompts, completions) = crate::federation::capabilities(&self.inner.host);
        if resources {
            let mut served = rmcp::model::ResourcesCapability::default();
            served.subscribe = crate::federation::subscriptions(&self.inner.host).then_some(true);
            // Upstreams' lists change, and restarts change what quiver lists.
            served.list_changed = Some(true);
            capabilities.resources = Some(served);
        }
        if prompts {
            let mut served = rmcp::model::PromptsCapability::default();
            served.list_changed = Some(true);
            capabilities.prompts = Some(served);
        }
        if completions {
            capabilities.completions = Some(Default::default());
        }
        if self.inner.host.upstreams().all().iter().any(|u| u.serves_logging()) {
            capabilities.logging = Some(Default::default());
        }
        // An upstream's long tools run as tasks for a client that takes them (`tasks.rs`).
        if upstreams {
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(rmcp::model::TASKS_EXTENSION_ID.to_owned(), Default::default());
        }
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("quiver", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.inner.instructions.clone())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        // The whole list is one page, so no cursor is one of quiver's (the spec's answer to an
        // invalid cursor is -32602, not a first page the client would take for the next one).
        if let Some(cursor) = request.and_then(|r| r.cursor) {
            let shown: String = cursor.chars().take(64).collect();
            return Err(McpError::invalid_params(
                format!(
                    "unknown cursor `{shown}`: quiver lists every tool in one page and hands out                      no cursors; call tools/list without one"
                ),
                None,
            ));
        }
        let listed = self.list_for(&context);
        let tools: Vec<rmcp::model::Tool> = serde_json::from_value(listed["tools"].clone())
            .map_err(|e| McpError::internal_error(format!("a tool is not valid MCP: {e}"), None))?;
        Ok(ListToolsResult::with_all_items(tools).with_ttl_ms(self.list_ttl_ms(&context)))
    }

    /// A 2025-11-25 session over HTTP hears of upstream tool changes on its stream (stdio's
    /// one client is followed by `serve_stdio`).
    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        let over_http = context.extensions.get::<http::request::Parts>().is_some();
        if over_http && !self.inner.host.upstreams().all().is_empty() {
            tokio::spawn(follow_upstream_changes(self.clone(), context.peer.clone()));
        }
    }

    /// 2026-07-28: a client listens for changes; quiver's tool list changes with its upstreams.
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let mut accepted = rmcp::model::SubscriptionFilter::default();
        accepted.tools_list_changed = requested.tools_list_changed;
        accepted.prompts_list_changed = requested.prompts_list_changed;
        accepted.resources_list_changed = requested.resources_list_changed;
        let uris = requested.resource_subscriptions.clone().unwrap_or_default();
        if uris.is_empty() || !crate::federation::subscriptions(&self.inner.host) {
            return Some(accepted);
        }
        // The library acknowledges the stream as soon as this returns, and a client may change
        // the resource the moment it reads the acknowledgment: the upstreams must already be
        // listening. This hook is synchronous, so on a multi-threaded runtime it waits here;
        // elsewhere `listen` subscribes (and a change in between may be missed).
        let multi_threaded = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if !multi_threaded {
            accepted.resource_subscriptions = Some(uris);
            return Some(accepted);
        }
        let mut taken = Vec::new();
        for uri in uris {
            let subscribed = tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current()
                    .block_on(self.inner.routes.subscribe(&self.inner.host, &uri))
            });
            match subscribed {
                Ok(upstream) => {
                    self.listening().push((uri.clone(), upstream));
                    taken.push(uri);
                }
                Err(e) => tracing::debug!("a listen stream's {uri}: {}", e.message),
            }
        }
        // Only what is subscribed is acknowledged: the client learns what it will hear of.
        accepted.resource_subscriptions = (!taken.is_empty()).then_some(taken);
        Some(accepted)
    }

    /// A 2026-07-28 client's listen stream: tool list changes, and changes of the resources it
    /// names, subscribed at their upstreams while the stream is open.
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        let accepted = context.accepted().clone();
        let mut held = std::collections::HashMap::new();
        for uri in accepted.resource_subscriptions.unwrap_or_default() {
            // Subscribed while the stream was accepted, or (see there) now.
            let taken = {
                let mut listening = self.listening();
                let at = listening.iter().position(|(u, _)| *u == uri);
                at.map(|at| listening.swap_remove(at).1)
            };
            if let Some(upstream) = taken {
                held.insert(uri, upstream);
                continue;
            }
            match self.inner.routes.subscribe(&self.inner.host, &uri).await {
                Ok(upstream) => {
                    held.insert(uri, upstream);
                }
                Err(e) => tracing::debug!("a listen stream's {uri}: {}", e.message),
            }
        }
        let tools = async {
            if accepted.tools_list_changed == Some(true) {
                follow_upstream_changes_on(self.clone(), &context).await;
            } else {
                context.cancelled().await;
            }
        };
        tokio::select! {
            () = tools => {}
            () = forward_changes_on(&self.inner.host, &held, &context) => {}
        }
        for (uri, upstream) in held {
            let _ = crate::federation::Routes::unsubscribe(&self.inner.host, &upstream, &uri).await;
        }
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        self.inner.routes.list_resources(&self.inner.host).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        self.inner.routes.list_resource_templates(&self.inner.host).await
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        let plugin = self
            .inner
            .host
            .provider_resource_for(&request.uri)
            .map(|(resource, vars)| (resource.clone(), vars));
        if let Some((resource, vars)) = plugin {
            return self.read_provider_resource(&resource, vars, &request.uri, &context).await;
        }
        self.inner.routes.read_resource(&self.inner.host, request).await.map(Into::into)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        self.inner.routes.list_prompts(&self.inner.host).await
    }

    /// The client's level goes to every upstream that logs, and their messages at or above it
    /// to this client (masked, `logger` naming the upstream).
    #[allow(deprecated)] // logging is deprecated from 2026-07-28 (SEP-2577); 2025-11-25 clients use it
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let level = serde_json::to_value(request.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "info".to_owned());
        let index = log_rank(&level);
        let before = self.log_level.swap(index, Ordering::SeqCst);
        for upstream in self.inner.host.upstreams().all() {
            if upstream.serves_logging() {
                if let Err(e) = upstream.set_log_level(&level).await {
                    tracing::debug!(upstream = upstream.name(), "logging/setLevel: {e}");
                }
            }
        }
        if before == u8::MAX {
            tokio::spawn(forward_upstream_logs(
                self.inner.host.upstreams().logs(),
                Arc::clone(&self.log_level),
                context.peer.clone(),
            ));
        }
        Ok(())
    }

    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = request.uri;
        if self.subscribed().contains_key(&uri) {
            return Ok(());
        }
        let upstream = self.inner.routes.subscribe(&self.inner.host, &uri).await?;
        let first = {
            let mut subscribed = self.subscribed();
            subscribed.insert(uri, upstream);
            subscribed.len() == 1
        };
        if first {
            tokio::spawn(forward_resource_updates(
                Arc::clone(&self.inner.host),
                self.inner.host.upstreams().changes(),
                Arc::clone(&self.subscribed),
                context.peer.clone(),
            ));
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let removed = self.subscribed().remove(&request.uri);
        match removed {
            Some(upstream) => {
                crate::federation::Routes::unsubscribe(&self.inner.host, &upstream, &request.uri)
                    .await
            }
            None => Ok(()),
        }
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        self.inner.routes.complete(&self.inner.host, request).await
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        self.inner.routes.get_prompt(&self.inner.host, request).await.map(Into::into)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = request.arguments.unwrap_or_default();
        if let Some(unknown) = self.unknown_tool(&request.name, &context) {
            // A protocol error (the MCP spec's answer to an unknown tool), with the closest names.
            return Err(McpError::invalid_params(unknown, None));
        }
        if let Some(timeout) = self.runs_as_task(&request.name, &arguments, &context) {
            let owner = task_owner(&context);
            // A task that cannot be kept (the shared state unreachable) is not made: the call
            // is answered as a plain one instead, which the client takes as well.
            match self.tasks().start(&owner, timeout + crate::tasks::KEPT_AFTER).await {
                Ok(run) => {
                    return Ok(self.call_as_task(request.name.to_string(), arguments, run, context))
                }
                Err(e) => tracing::warn!("the call runs without a task: {}", e.message),
            }
        }
        let answers = Answers {
            responses: request.input_responses,
            state: request.request_state,
            error: Mutex::new(None),
        };
        let response = self.call(&request.name, arguments, &answers, &context).await;
        match answers.error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(error) => Err(error),
            None => Ok(response),
        }
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        let task = self.tasks().get(&request.task_id, &task_owner(&context)).await?;
        Ok(rmcp::model::GetTaskResult::new(task))
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let owner = task_owner(&context);
        self.tasks().update(&request.task_id, &owner, request.input_responses).await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks().cancel(&request.task_id, &task_owner(&context)).await
    }
}

/// Whose a task is: the caller's name over HTTP; on stdio, the one client's.
fn task_owner(context: &RequestContext<RoleServer>) -> String {
    identity(context).map(|i| i.name).unwrap_or_default()
}

tokio::task_local! {
    /// The task a call runs as: where what it asks of its client goes, and what it says of
    /// its progress.
    static IN_TASK: Arc<crate::tasks::TaskRun>;
}

impl QuiverServer {
    /// Every caller's tasks, kept in the host's state.
    fn tasks(&self) -> crate::tasks::Tasks {
        crate::tasks::Tasks::new(Arc::clone(self.inner.host.state()))
    }

    /// Whether this call is handed to its client as a task, and the call's timeout if so: the
    /// client takes tasks, and the tool is an upstream's that its server runs as one.
    fn runs_as_task(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Option<Duration> {
        if !context.client_capabilities().is_some_and(|c| c.supports_tasks()) {
            return None;
        }
        let mode = self.mode_for(Some(context));
        let target = match (mode, name) {
            (ServeMode::Search, CALL_TOOL) => arguments.get("name")?.as_str()?,
            (ServeMode::Search, FIND_TOOLS) | (ServeMode::Dynamic, LOAD_TOOLS) => return None,
            _ => name,
        };
        let view = self.view(identity(context).as_ref());
        let tool = view.catalog(&self.inner).get(target)?.qualified.clone();
        let registered = self.inner.host.tool(&tool).filter(|t| t.plugin().is_none())?;
        let upstream = self.inner.host.upstreams().get(&registered.name.provider)?;
        upstream
            .runs_as_task(&registered.name.tool)
            .then(|| Duration::from_secs(upstream.config().timeout_s))
    }

    /// Answers the call with a task at once and runs it on: everything it asks of the
    /// client (a confirmation, a sign-in, an upstream's questions) goes through the task's
    /// `inputRequests`, its progress messages become the task's status, and `tasks/cancel`
    /// cancels it as the request's cancellation would.
    fn call_as_task(
        &self,
        name: String,
        arguments: Map<String, Value>,
        run: Arc<crate::tasks::TaskRun>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let created = rmcp::model::CreateTaskResult::new(run.task());
        // The call outlives its request: it is cancelled with the task (the client's
        // `tasks/cancel`, at any replica), gets no progress token (the request is answered), and
        // runs as a 2026-07-28 client's call, which takes what the call asks of it as rounds —
        // here, the task's input requests.
        let mut within = context.clone();
        within.ct = run.cancellation();
        within.meta.remove("progressToken");
        let capabilities = context.client_capabilities().unwrap_or_default();
        within.meta.set_client_capabilities(capabilities);
        within.meta.set_protocol_version(rmcp::model::ProtocolVersion::V_2026_07_28);
        let server = self.clone();
        let task = Arc::clone(&run);
        let operation = async move {
            let mut answers = Answers { responses: None, state: None, error: Mutex::new(None) };
            for _ in 0..MAX_INPUT_ROUNDS {
                let response = server.call(&name, arguments.clone(), &answers, &within).await;
                if let Some(error) = answers.error.lock().unwrap_or_else(|e| e.into_inner()).take()
                {
                    return crate::tasks::Ending::Failed(error);
                }
                match response {
                    CallToolResponse::InputRequired(asked) => {
                        let Some(responses) =
                            task.ask(asked.input_requests.unwrap_or_default()).await
                        else {
                            return crate::tasks::Ending::Cancelled;
                        };
                        answers = Answers {
                            responses: Some(responses),
                            state: asked.request_state,
                            error: Mutex::new(None),
                        };
                    }
                    CallToolResponse::Complete(result) => {
                        return if within.ct.is_cancelled() {
                            crate::tasks::Ending::Cancelled
                        } else {
                            crate::tasks::Ending::Result(result)
                        };
                    }
                    _ => {
                        return crate::tasks::Ending::Failed(McpError::internal_error(
                            format!("`{name}` ended in neither a result nor a question"),
                            None,
                        ))
                    }
                }
            }
            crate::tasks::Ending::Failed(McpError::internal_error(
                format!("`{name}` asked for input {MAX_INPUT_ROUNDS} times; the call was given up"),
                None,
            ))
        };
        tokio::spawn(IN_TASK.scope(Arc::clone(&run), async move {
            let ending = operation.await;
            run.end(ending).await;
        }));
        CallToolResponse::Task(created)
    }
}

/// How a call of a tool came: a model's call by name, through `call_tool` (search mode), or a
/// resource read the tool serves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    Direct,
    CallTool,
    Resource,
}

impl QuiverServer {
    /// Reads a plugin's resource: the call of the tool that serves it, with the URI's variables
    /// as arguments, through the same path as a model's call (policy, confirmation, cache,
    /// pricing, masking), its text as the resource's contents.
    async fn read_provider_resource(
        &self,
        resource: &quiver_runtime::registry::ProviderResource,
        arguments: Map<String, Value>,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        let view = self.view(identity(context).as_ref());
        let name = match view.catalog(&self.inner).get(&resource.tool) {
            Some(tool) => tool.mcp_name.clone(),
            None => {
                return Err(McpError::resource_not_found(
                    format!("{uri}: `{}` is not served", resource.tool),
                    None,
                ))
            }
        };
        let answers = Answers { responses: None, state: None, error: Mutex::new(None) };
        let response = self
            .call_provider_tool(&view, &name, arguments, &answers, context, Via::Resource)
            .await;
        let result = match response {
            CallToolResponse::Complete(result) => result,
            CallToolResponse::InputRequired(input_required) => {
                return Ok(rmcp::model::ReadResourceResponse::InputRequired(input_required))
            }
            _ => return Err(McpError::internal_error(format!("{uri}: not a result"), None)),
        };
        let text = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        if result.is_error == Some(true) {
            return Err(if text.to_ascii_lowercase().contains("not found") {
                McpError::resource_not_found(format!("{uri}: {text}"), None)
            } else {
                McpError::internal_error(format!("{uri}: {text}"), None)
            });
        }
        let field = resource.template.text_field.as_deref().and_then(|field| {
            result.structured_content.as_ref()?.get(field)?.as_str().map(str::to_owned)
        });
        // The field that holds the text, else (a directory's listing, say) the structured
        // value as JSON, else the result's text.
        let (text, mime_type) = match (field, &result.structured_content) {
            (Some(text), _) => {
                (text, resource.template.mime_type.clone().unwrap_or_else(|| "text/plain".into()))
            }
            (None, Some(structured)) => (structured.to_string(), "application/json".to_owned()),
            (None, None) => (text, "text/plain".to_owned()),
        };
        let contents = json!({"contents": [{"uri": uri, "mimeType": mime_type, "text": text}]});
        serde_json::from_value::<rmcp::model::ReadResourceResult>(contents)
            .map(Into::into)
            .map_err(|e| McpError::internal_error(format!("{uri}: {e}"), None))
    }
}

/// The client of a call, as an upstream's requests during it reach it.
#[allow(deprecated)] // logging: see `set_level`
struct PeerClient {
    peer: rmcp::Peer<RoleServer>,
    capabilities: rmcp::model::ClientCapabilities,
    /// A 2026-07-28 client: an upstream's requests go back to it as rounds of the call.
    stateless: bool,
    /// The task the call runs as: an upstream's requests go to its client as the task's input
    /// requests.
    task: Option<Arc<crate::tasks::TaskRun>>,
    /// The answers this call carries for an upstream that asked for input.
    round: Option<quiver_runtime::upstream::InputRound>,
    /// Where the upstream's log messages during the call go, to be sent in order before the
    /// result; those below `log_level` (all, when the client asked for none) are dropped.
    logs: tokio::sync::mpsc::UnboundedSender<Notice>,
    log_level: Option<rmcp::model::LoggingLevel>,
}

/// What an upstream sends during a call, for its client, in order and before the result.
#[allow(deprecated)] // logging: see `set_level`
enum Notice {
    Progress(ProgressNotificationParam),
    Log(rmcp::model::LoggingMessageNotificationParam),
}

fn to_json(params: &impl serde::Serialize) -> Option<Value> {
    serde_json::to_value(params).ok()
}

fn client_error(e: rmcp::service::ServiceError) -> McpError {
    match e {
        rmcp::service::ServiceError::McpError(error) => error,
        other => McpError::internal_error(
            format!(
                "the client did not answer: {}",
                quiver_runtime::logging::scrub(&other.to_string())
            ),
            None,
        ),
    }
}

#[allow(deprecated)] // sampling and roots: see `quiver_runtime::upstream::CallClient`
impl quiver_runtime::upstream::CallClient for PeerClient {
    fn capabilities(&self) -> rmcp::model::ClientCapabilities {
        self.capabilities.clone()
    }

    fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
    ) -> quiver_runtime::upstream::Answer<'_, rmcp::model::CreateMessageResult> {
        Box::pin(async move {
            match &self.task {
                Some(task) => task.ask_one("sampling/createMessage", to_json(&params)).await,
                None => self.peer.create_message(params).await.map_err(client_error),
            }
        })
    }

    fn create_elicitation(
        &self,
        params: rmcp::model::ElicitRequestParams,
    ) -> quiver_runtime::upstream::Answer<'_, rmcp::model::ElicitResult> {
        Box::pin(async move {
            match &self.task {
                Some(task) => task.ask_one("elicitation/create", to_json(&params)).await,
                None => self.peer.create_elicitation(params).await.map_err(client_error),
            }
        })
    }

    fn list_roots(&self) -> quiver_runtime::upstream::Answer<'_, rmcp::model::ListRootsResult> {
        Box::pin(async move {
            match &self.task {
                Some(task) => task.ask_one("roots/list", None).await,
                None => self.peer.list_roots().await.map_err(client_error),
            }
        })
    }

    fn takes_rounds(&self) -> bool {
        self.stateless
    }

    fn round(&self) -> Option<quiver_runtime::upstream::InputRound> {
        self.round.clone()
    }

    fn log_level(&self) -> Option<rmcp::model::LoggingLevel> {
        self.log_level
    }

    fn log(&self, params: rmcp::model::LoggingMessageNotificationParam) {
        let Some(wanted) = self.log_level else { return };
        let rank = |level: rmcp::model::LoggingLevel| {
            serde_json::to_value(level).ok().as_ref().and_then(Value::as_str).map(log_rank)
        };
        if rank(params.level) >= rank(wanted) {
            let _ = self.logs.send(Notice::Log(params));
        }
    }
}

/// What a client sends back in a later round of a multi round-trip call (protocol 2026-07-28):
/// the answers to the server's requests and the state the server asked it to echo.
pub(crate) struct Answers {
    pub(crate) responses: Option<rmcp::model::InputResponses>,
    pub(crate) state: Option<String>,
    /// A protocol error the call ends in instead of a result (URL elicitation required).
    pub(crate) error: Mutex<Option<McpError>>,
}

/// Serves `host` over stdin/stdout until the client disconnects.
pub async fn serve_stdio(host: Arc<Host>, options: ServeOptions) -> anyhow::Result<()> {
    let session_id = format!("{}{}", escape::SESSION_PREFIX, std::process::id());
    crate::reload::watch_config(Arc::clone(&host));
    let server = QuiverServer::new(host, &options, session_id)?;
    // Every request gets one answer, malformed ones included (see `stdio_guard`).
    let (reads, writes, written) =
        crate::stdio_guard::guard(tokio::io::stdin(), tokio::io::stdout());
    let running = server.clone().serve((reads, writes)).await?;
    tracing::info!("serving MCP on stdio");
    let watcher = tokio::spawn(follow_upstream_changes(server.clone(), running.peer().clone()));
    let ended = running.waiting().await;
    watcher.abort();
    server.shutdown().await;
    // The last answers reach stdout before the process ends (a client that stopped reading
    // does not hold the exit for long).
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), written).await;
    ended?;
    Ok(())
}

/// What a call to `upstream` (which takes each caller's identity) carries: the caller's OAuth
/// access token, passed through or exchanged; or why the call cannot be made.
async fn caller_token_for(
    upstream: &quiver_runtime::upstream::Upstream,
    context: &RequestContext<RoleServer>,
) -> Result<quiver_runtime::accounts::AccountToken, String> {
    let name = upstream.name();
    let who = identity(context);
    let Some((who, token)) = who.and_then(|w| w.access_token.clone().map(|t| (w, t))) else {
        return Err(format!(
            "not sent: upstream `{name}` acts as each caller, with the OAuth access token they \
             signed in to quiver with; this caller has none (an API key is quiver's own and is \
             never passed on). Sign in through [serve.http.oauth], or ask the operator"
        ));
    };
    let bearer = match upstream.config().auth {
        quiver_runtime::upstream::UpstreamAuth::Exchange => {
            upstream.exchanged_token(&token.0).await.map_err(|e| {
                format!("not sent: your token could not be exchanged for `{name}`: {e}")
            })?
        }
        _ => token.0.to_string(),
    };
    Ok(quiver_runtime::accounts::AccountToken {
        account: who.name,
        grant: "caller".into(),
        token: bearer,
        by_rule: false,
    })
}

/// The caller the HTTP layer authenticated, if this request came over HTTP.
fn identity(context: &RequestContext<RoleServer>) -> Option<Identity> {
    context.extensions.get::<http::request::Parts>()?.extensions.get::<Identity>().cloned()
}

impl View {
    /// The caller's catalog as of the upstreams' latest change.
    fn catalog(&self, inner: &Inner) -> Arc<Catalog> {
        let key = (inner.host.upstreams().version(), inner.host.generation());
        let mut cached = self.catalog.lock().unwrap_or_else(|e| e.into_inner());
        if cached.0 != key {
            let policy = self.policy(inner);
            let catalog = Catalog::new(&inner.host, &policy, &inner.inferred);
            *cached = (key, Arc::new(catalog));
        }
        Arc::clone(&cached.1)
    }

    /// The caller's policy under the config in effect: rebuilt from `[selector]` after a reload
    /// (a `[selector]` the reload cannot use keeps the policy in effect, said in the log).
    fn policy(&self, inner: &Inner) -> Policy {
        self.with_policy(inner, Policy::clone)
    }

    /// `read` of the caller's policy under the config in effect (see [`View::policy`]), without
    /// copying it.
    fn with_policy<T>(&self, inner: &Inner, read: impl FnOnce(&Policy) -> T) -> T {
        let generation = inner.host.generation();
        let mut policy = self.policy.lock().unwrap_or_else(|e| e.into_inner());
        if policy.0 != generation {
            match Policy::new(&inner.host.config().config.selector) {
                Ok(base) => {
                    // The caller's entry as the reloaded config has it: a narrower policy
                    // applies at once, and an entry that is gone serves nothing.
                    let config = inner.host.config();
                    let entry = self.user.as_ref().map(|user| {
                        config.config.serve.http.users.iter().find(|u| u.name == user.name)
                    });
                    let narrowed = match entry {
                        Some(Some(user)) => base.narrowed_by(user).unwrap_or_else(|e| {
                            tracing::warn!(user = %user.name, "{e}; refusing every tool to this user");
                            Policy::refuse_all()
                        }),
                        Some(None) => Policy::refuse_all(),
                        None => base,
                    };
                    *policy = (generation, narrowed);
                }
                Err(e) => {
                    tracing::warn!(
                        "reloaded [selector] is unusable ({e}); its policy stays as it was"
                    );
                    policy.0 = generation;
                }
            }
        }
        read(&policy.1)
    }
}

/// Tells the client `tools/list_changed` whenever an upstream's tools change what it lists, and
/// `prompts/list_changed` and `resources/list_changed` when an upstream's change; ends with the
/// client's connection.
async fn follow_upstream_changes(server: QuiverServer, peer: rmcp::Peer<RoleServer>) {
    let mut changes = server.inner.host.upstreams().subscribe();
    let mut others = server.inner.host.upstreams().changes();
    let mut listed = server.list_json();
    let mut check_closed = tokio::time::interval(Duration::from_secs(30));
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            // The prompt and resource lists: told as they come (quiver lists them whole).
            other = others.recv() => {
                let sent = match other {
                    Ok(UpstreamChange::PromptList(_)) => peer.notify_prompt_list_changed().await,
                    Ok(UpstreamChange::ResourceList(_)) => {
                        peer.notify_resource_list_changed().await
                    }
                    _ => continue,
                };
                if sent.is_err() {
                    return;
                }
                continue;
            }
            _ = check_closed.tick() => {
                if peer.is_transport_closed() {
                    return;
                }
                continue;
            }
        }
        // A restart changes state twice in a row; let it settle before comparing.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = server.list_json();
        if now != listed {
            listed = now;
            if let Err(e) = peer.notify_tool_list_changed().await {
                tracing::debug!("could not send tools/list_changed: {e}");
                return;
            }
        }
    }
}

/// Sends this connection's client `notifications/resources/updated` for the URIs it subscribed
/// to; when the client has gone, ends its subscriptions at the upstreams.
async fn forward_resource_updates(
    host: Arc<Host>,
    mut updates: tokio::sync::broadcast::Receiver<quiver_runtime::upstream::UpstreamChange>,
    subscribed: Subscribed,
    peer: rmcp::Peer<RoleServer>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let (upstream, uri) = match updates.recv().await {
            Ok(UpstreamChange::ResourceUpdated { upstream, uri }) => (upstream, uri),
            Ok(_) => continue,
            Err(RecvError::Lagged(missed)) => {
                tracing::debug!("a client missed {missed} resource updates");
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        if peer.is_transport_closed() {
            break;
        }
        let wanted = subscribed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&uri)
            .is_some_and(|held| *held == upstream);
        if !wanted {
            continue;
        }
        let params = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
        if peer.notify_resource_updated(params).await.is_err() {
            break;
        }
    }
    let left: Vec<(String, String)> =
        std::mem::take(&mut *subscribed.lock().unwrap_or_else(|e| e.into_inner()))
            .into_iter()
            .collect();
    for (uri, upstream) in left {
        let _ = crate::federation::Routes::unsubscribe(&host, &upstream, &uri).await;
    }
}

/// Sends `peer` the upstreams' log messages at or above its level; ends with its connection.
#[allow(deprecated)] // logging: see `set_level`
async fn forward_upstream_logs(
    mut logs: tokio::sync::broadcast::Receiver<quiver_runtime::upstream::UpstreamLog>,
    level: Arc<std::sync::atomic::AtomicU8>,
    peer: rmcp::Peer<RoleServer>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let log = match logs.recv().await {
            Ok(log) => log,
            Err(RecvError::Lagged(missed)) => {
                tracing::debug!("a client missed {missed} upstream log messages");
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        if peer.is_transport_closed() {
            return;
        }
        let at = log_rank(log.params.get("level").and_then(Value::as_str).unwrap_or("info"));
        if at < level.load(Ordering::SeqCst) {
            continue;
        }
        let Ok(params) = serde_json::from_value(log.params) else { continue };
        if peer.notify_logging_message(params).await.is_err() {
            return;
        }
    }
}

/// The upstreams' changes a 2026-07-28 listen stream accepted: the resources of `held` (URI →
/// upstream), and the prompt and resource lists, until the stream ends.
async fn forward_changes_on(
    host: &Host,
    held: &std::collections::HashMap<String, String>,
    context: &rmcp::service::SubscriptionContext,
) {
    use rmcp::model::ServerNotification;
    use tokio::sync::broadcast::error::RecvError;
    let accepted = context.accepted().clone();
    let (prompts, resources) = (
        accepted.prompts_list_changed == Some(true),
        accepted.resources_list_changed == Some(true),
    );
    if held.is_empty() && !prompts && !resources {
        return context.cancelled().await;
    }
    let mut changes = host.upstreams().changes();
    loop {
        let change = tokio::select! {
            () = context.cancelled() => return,
            change = changes.recv() => match change {
                Ok(change) => change,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return context.cancelled().await,
            },
        };
        let notification = match change {
            UpstreamChange::ResourceUpdated { upstream, uri }
                if held.get(&uri) == Some(&upstream) =>
            {
                ServerNotification::ResourceUpdatedNotification(
                    rmcp::model::ResourceUpdatedNotification::new(
                        rmcp::model::ResourceUpdatedNotificationParam::new(uri),
                    ),
                )
            }
            UpstreamChange::PromptList(_) if prompts => {
                ServerNotification::PromptListChangedNotification(Default::default())
            }
            UpstreamChange::ResourceList(_) if resources => {
                ServerNotification::ResourceListChangedNotification(Default::default())
            }
            _ => continue,
        };
        if let Err(e) = context.sink().send(notification).await {
            tracing::debug!("could not send an upstream's change: {e}");
            return;
        }
    }
}

/// [`follow_upstream_changes`] for a 2026-07-28 `subscriptions/listen` stream.
async fn follow_upstream_changes_on(
    server: QuiverServer,
    context: &rmcp::service::SubscriptionContext,
) {
    let mut changes = server.inner.host.upstreams().subscribe();
    let mut listed = server.list_json();
    loop {
        tokio::select! {
            () = context.cancelled() => return,
            changed = changes.changed() => {
                if changed.is_err() {
                    context.cancelled().await;
                    return;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = server.list_json();
        if now != listed {
            listed = now;
            let changed =
                rmcp::model::ServerNotification::ToolListChangedNotification(Default::default());
            if let Err(e) = context.sink().send(changed).await {
                tracing::debug!("could not send tools/list_changed: {e}");
                return;
            }
        }
    }
}

/// A result whose text and (for tools with an output schema) `structuredContent` mirror each
/// other. A tool with an output schema always gets structured content — clients check for it.
/// Successful results carry their (projected) data, repeats included; a result without a
/// structured value (a provider that sent only text) carries its text as `{"quiver_note": …}`.
/// The longest text a `quiver_note` repeats in `structuredContent` when a result has no
/// structured value of its own.
const MAX_NOTE_BYTES: usize = 4096;

fn to_call_result(result: ToolResult, tool: &ExposedTool) -> CallToolResult {
    let text = result.text_content();
    // Every block as MCP writes it: `Content` keeps MCP's own field names.
    let content: Vec<Value> = result
        .content
        .iter()
        .map(|c| {
            serde_json::to_value(c).unwrap_or_else(
                |e| json!({"type": "text", "text": format!("a block quiver could not send: {e}")}),
            )
        })
        .collect();
    // `resultType` is required on 2026-07-28; rmcp strips it for older peers.
    let mut out =
        json!({ "content": content, "isError": result.is_error, "resultType": "complete" });
    if tool.as_declared {
        // An upstream's schema as it declared it: its structured value as it sent it, and no
        // note of quiver's that its schema may not allow.
        let sent = !result.metadata.contains_key(quiver_runtime::upstream::STRUCTURED_FROM_TEXT);
        if let Some(value @ Value::Object(_)) = result.structured.filter(|_| sent) {
            out["structuredContent"] = value;
        }
    } else if tool.output_schema.is_some() && !result.is_error {
        out["structuredContent"] = match result.structured {
            Some(value @ Value::Object(_)) => value,
            // A note, not a second copy of a long text: the answer is capped as a whole.
            _ if text.len() > MAX_NOTE_BYTES => {
                let mut end = MAX_NOTE_BYTES;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                json!({ "quiver_note": format!("{}… (the whole text is in `content`)", &text[..end]) })
            }
            _ => json!({ "quiver_note": text }),
        };
    }
    serde_json::from_value(out).unwrap_or_else(|e| {
        CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
            "the result of `{}` could not be sent: {e}",
            tool.mcp_name
        ))])
    })
}

fn text_result(text: String) -> CallToolResult {
    CallToolResult::success(vec![rmcp::model::ContentBlock::text(text)])
}

fn error_result(message: impl Into<String>) -> CallToolResult {
    let message = message.into();
    tracing::debug!("refused: {message}");
    CallToolResult::error(vec![rmcp::model::ContentBlock::text(message)])
}

fn unknown_tool_message(catalog: &Catalog, name: &str, mode: ServeMode) -> String {
    let mut closest: Vec<&ExposedTool> = catalog.enabled().collect();
    closest.sort_by(|a, b| {
        strsim::jaro_winkler(name, &b.mcp_name).total_cmp(&strsim::jaro_winkler(name, &a.mcp_name))
    });
    let closest: Vec<&str> = closest.iter().take(3).map(|t| t.mcp_name.as_str()).collect();
    let how = match mode {
        ServeMode::Search => "find_tools finds tools by what they do",
        ServeMode::Dynamic => "load_tools lists a bundle's tools",
        ServeMode::All => "tools/list shows every tool",
    };
    format!("no tool `{name}`; closest: {}; {how}", closest.join(", "))
}

/// Ranking by shared words when the selector cannot be built: each query word found in a
/// tool's name counts three, in its description one.
fn fallback_rank<'a>(catalog: &'a Catalog, query: &str, k: usize) -> Vec<&'a ExposedTool> {
    let words: Vec<String> = query
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| w.len() > 1)
        .map(str::to_ascii_lowercase)
        .collect();
    let mut scored: Vec<(usize, &ExposedTool)> = catalog
        .enabled()
        .map(|t| {
            let name = t.qualified.to_ascii_lowercase();
            let description = t.description.to_ascii_lowercase();
            let score = words
                .iter()
                .map(|w| {
                    3 * usize::from(name.contains(w.as_str()))
                        + usize::from(description.contains(w.as_str()))
                })
                .sum();
            (score, t)
        })
        .filter(|(score, _)| *score > 0)
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.qualified.cmp(&b.1.qualified)));
    scored.into_iter().take(k).map(|(_, t)| t).collect()
}
