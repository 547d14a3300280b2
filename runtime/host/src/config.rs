//! `quiver.toml`: where plugins are, how each provider is configured, and the user's value-model
//! layers.
//!
//! ```toml
//! plugins_dir = "/opt/quiver/plugins"
//!
//! [providers.github]
//! base_url = "https://ghe.example.com/api/v3"   # passed to the provider as is
//! token_env = "GHE_TOKEN"                       # where the host reads the token (default GITHUB_TOKEN)
//! enabled = true
//!
//! [tools."*"]
//! cost_model = { max_kb = 64 }
//!
//! [tools."github.get_issue"]
//! value_class = "critical"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use quiver_core::UserLayers;
use serde::Deserialize;

/// Why a config file could not be used. Names the file, and the line and column when TOML says.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Occurs when the file cannot be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Occurs when the file is not valid TOML or has a key quiver does not know.
    #[error("invalid config {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// TOML's message, with line, column and the offending line.
        message: String,
    },
    /// Occurs when an `[[upstreams]]` entry is unusable (no transport, a bad name, a name that a
    /// source or another upstream has).
    #[error("invalid config {path}: {message}")]
    Upstream {
        /// The file.
        path: PathBuf,
        /// Which entry and why.
        message: String,
    },
    /// Occurs when a `[serve.http]` entry is unusable (a user without a name, a bad key hash).
    #[error("invalid config {path}: {message}")]
    Serve {
        /// The file.
        path: PathBuf,
        /// Which entry and why.
        message: String,
    },
    /// Occurs when a `[selector]` value is out of its range.
    #[error("invalid config {path}: {message}")]
    Selector {
        /// The file.
        path: PathBuf,
        /// Which key and why.
        message: String,
    },
    /// Occurs when a `[tools."…"]` section is unusable (bad glob, probability out of range).
    #[error("invalid config {location}: {message}")]
    Tools {
        /// `file:line:col` of the offending key (the file alone when it cannot be found).
        location: String,
        /// Which section, which field and why.
        message: String,
    },
}

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where plugins are, unless `--plugins` or `$QUIVER_PLUGINS` say otherwise.
    #[serde(default)]
    pub plugins_dir: Option<PathBuf>,
    /// `[providers.NAME]` sections.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// `[tools."pattern"]` value-model layers.
    #[serde(default)]
    pub tools: BTreeMap<String, quiver_core::tool_edit::ToolSection>,
    /// `[enrichment]`: speculative pre-fetching of likely follow-up calls.
    #[serde(default)]
    pub enrichment: EnrichmentConfig,
    /// `[telemetry]`: one JSONL event per call, to measure whether the pipeline pays off.
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// `[[enrichments]]`: passes over the whole tool set (output schemas, embeddings, dataflow,
    /// neighbours). None declared means the offline defaults: embeddings, dataflow, neighbors.
    #[serde(default)]
    pub enrichments: Vec<crate::enrich::EnrichmentDecl>,
    /// `[[sources]]`: tool definitions read from files (an MCP `tools/list` result or OpenAI
    /// function definitions) that enrichments and selection see beside the plugins' tools.
    #[serde(default)]
    pub sources: Vec<crate::sources::SourceConfig>,
    /// `[[upstreams]]`: other MCP servers whose tools quiver serves through its pipeline.
    #[serde(default)]
    pub upstreams: Vec<crate::upstream::UpstreamConfig>,
    /// `[serve]`: how `quiver serve` serves a team over HTTP.
    #[serde(default)]
    pub serve: ServeConfig,
    /// `[selector]`: which tools `quiver serve` shows, and which it refuses or asks to confirm.
    #[serde(default)]
    pub selector: SelectorConfig,
    /// `[state]`: where the state replicas share lives (in-process by default, or Redis).
    #[serde(default)]
    pub state: StateConfig,
    /// `[security]`: what quiver removes from text from outside before a model reads it.
    #[serde(default)]
    pub security: SecurityConfig,
    /// `[audit]`: the trail of calls that change something (none unless `path` is set).
    #[serde(default)]
    pub audit: crate::audit::AuditConfig,
    /// `[accounts]`: where users' own service accounts (signed in with OAuth) are kept.
    #[serde(default)]
    pub accounts: crate::accounts::AccountsConfig,
    /// A PEM file of a private CA (self-hosted GitLab or Jira behind a corporate CA), trusted by
    /// every provider that has a `ca_file` setting and sets none of its own; relative to the
    /// config file's folder.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

/// Where the session cache, in-flight calls, rate-limit permits, callers' pipeline state and
/// HTTP session metadata live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateBackendKind {
    /// In this process: nothing is shared with other replicas.
    #[default]
    Memory,
    /// In Redis, shared by every replica that names the same server and `key_prefix`; the
    /// in-process state keeps answering while Redis is unreachable.
    Redis,
}

/// `[state]`: what replicas of `quiver serve --http` share.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StateConfig {
    /// `memory` (default) or `redis`.
    pub backend: StateBackendKind,
    /// The variable holding the Redis URL (`redis://[:password@]host:port[/db]`; TLS is not
    /// built in) — of one server, or of one or more nodes of a Redis Cluster separated by
    /// commas (a cluster is recognised by asking the node); it wins over `url`.
    pub url_env: String,
    /// The Redis URL, when not in the environment; keep the file private if it has a password.
    pub url: Option<String>,
    /// Prefix of every key quiver writes, so deployments can share one Redis.
    pub key_prefix: String,
    /// How long a rate-limit permit or an in-flight lease outlives a replica that stops renewing
    /// it (a crash): the longest a dead replica can hold what others wait for.
    pub lease_ms: u64,
    /// The longest one Redis operation may take before the call goes on with local state.
    pub timeout_ms: u64,
    /// Results larger than this are kept in the replica only, never written to Redis.
    pub max_value_kb: u64,
    /// This replica's name in telemetry and logs (default: host name and process id).
    pub replica: Option<String>,
    /// The variable holding a secret every replica shares: each value quiver stores in Redis
    /// is signed with it (HMAC-SHA256 over the key and the value), and a value whose signature
    /// does not match is never served — so whoever can write to Redis cannot feed the model.
    pub hmac_key_env: Option<String>,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            backend: StateBackendKind::Memory,
            url_env: "QUIVER_REDIS_URL".into(),
            url: None,
            key_prefix: "quiver".into(),
            lease_ms: 10_000,
            timeout_ms: 250,
            max_value_kb: 512,
            replica: None,
            hmac_key_env: None,
        }
    }
}

/// How `quiver serve` presents tools to an MCP client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServeMode {
    /// Every enabled tool, listed from the start.
    #[default]
    All,
    /// The CORE tools plus `find_tools` and `call_tool`; the list never changes.
    Search,
    /// The CORE tools plus `load_tools`; loaded bundles join the list (`list_changed`).
    Dynamic,
}

/// `[serve]`: the server's faces beyond stdio.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// `[serve.http]`: Streamable HTTP for a team.
    pub http: HttpServeConfig,
}

/// `[serve.http]`: where and for whom `quiver serve --http` listens.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpServeConfig {
    /// `host:port` (`quiver serve --http` overrides it); loopback unless users are configured.
    pub listen: Option<String>,
    /// Browser origins allowed to call (`https://app.example.com`); any other `Origin` is
    /// refused. Requests without `Origin` (non-browser clients) pass.
    pub allowed_origins: Vec<String>,
    /// Host names clients reach the server by, beyond loopback (DNS-rebinding protection).
    pub allowed_hosts: Vec<String>,
    /// Requests per minute and user, unless the user's entry says otherwise (0: no limit).
    pub requests_per_minute: u32,
    /// How long in-flight calls may finish after SIGTERM, in seconds; then the tasks the
    /// server runs for its clients get as long again.
    pub drain_timeout_s: u64,
    /// HTTPS: the certificate chain (PEM); with `tls_key`.
    pub tls_cert: Option<PathBuf>,
    /// HTTPS: its private key (PEM).
    pub tls_key: Option<PathBuf>,
    /// `[[serve.http.users]]`: who may call, by API key (or, with OAuth, whose policy and
    /// credentials a token's subject gets).
    pub users: Vec<HttpUser>,
    /// `[serve.http.oauth]`: accept access tokens of an OAuth 2.1 authorization server.
    pub oauth: Option<OAuthConfig>,
    /// The URL clients reach `/mcp` by (`https://quiver.internal/mcp`), named in the RFC 9728
    /// metadata and in `WWW-Authenticate`; default: `[serve.http.oauth] audience`, else the
    /// listen address with the scheme it serves. Never taken from a request's `Host`.
    pub public_url: Option<String>,
    /// A second address serving `/metrics` alone, without authentication, for a scraper on an
    /// internal network (`127.0.0.1:9464`). On the main address, `/metrics` needs a user's key
    /// or token whenever users or OAuth are configured.
    pub metrics_listen: Option<String>,
    /// The most connections open at once; past it a new one is closed at once (default: three
    /// quarters of the process's descriptor limit, at most 1 024).
    pub max_connections: Option<usize>,
    /// How long a connection may take to send a request head, or finish its TLS handshake,
    /// in seconds — the first one and each after an answer, so idle connections close too.
    pub header_timeout_s: u64,
    /// The most 2025-11-25 sessions open at once on this replica.
    pub max_sessions: usize,
    /// The most 2025-11-25 sessions one user may hold open.
    pub max_sessions_per_user: usize,
}

/// `[serve.http.oauth]`: quiver as an OAuth 2.1 resource server (the MCP authorization spec).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The authorization server (`iss` of its tokens), e.g. `https://login.example.com/`.
    pub issuer: String,
    /// This server's resource URL, which tokens must name in `aud`.
    pub audience: String,
    /// Where its signing keys are (default: `jwks_uri` from the issuer's metadata).
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// The claim that names the user (default `sub`).
    #[serde(default = "default_user_claim")]
    pub user_claim: String,
}

fn default_user_claim() -> String {
    "sub".into()
}

impl Default for HttpServeConfig {
    fn default() -> Self {
        Self {
            listen: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            requests_per_minute: 0,
            drain_timeout_s: 10,
            tls_cert: None,
            tls_key: None,
            users: Vec::new(),
            oauth: None,
            public_url: None,
            metrics_listen: None,
            max_connections: None,
            header_timeout_s: 10,
            max_sessions: 1000,
            max_sessions_per_user: 100,
        }
    }
}

/// `[[serve.http.users]]`: one user, the hash of their API key, and how their policy narrows
/// the global `[selector]` one.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpUser {
    /// Their name, in telemetry and logs.
    pub name: String,
    /// Hex SHA-256 of their API key (`quiver keys new NAME` prints both); the key itself is
    /// never stored.
    #[serde(default)]
    pub key_sha256: String,
    /// With `[serve.http.oauth]`: the token subject (`user_claim`) this entry is for, instead
    /// of a key.
    #[serde(default)]
    pub subject: Option<String>,
    /// `true`: only `pure`/`read_only` tools, whatever `[selector]` says.
    #[serde(default)]
    pub read_only: bool,
    /// When set, only these tools (within what `[selector] allow` already permits).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Never these tools, beside `[selector] deny`.
    #[serde(default)]
    pub deny: Vec<String>,
    /// These tools need confirmation too.
    #[serde(default)]
    pub confirm: Vec<String>,
    /// Their own scope rules, beside `[[selector.scope]]`: the values their calls' arguments
    /// may take (`scope = [{ tools = "github.*", owner = ["alice"] }]`).
    #[serde(default)]
    pub scope: Vec<quiver_core::scope::ScopeRule>,
    /// `true`: what they read is locked down (texts by authors who cannot write withheld) even
    /// where `[security]` and the provider's `lockdown` are off; a user cannot lift the
    /// operator's lockdown.
    #[serde(default)]
    pub lockdown: bool,
    /// Their own limit of requests per minute (0: none).
    #[serde(default)]
    pub requests_per_minute: Option<u32>,
    /// Their own provider credentials: provider → the variable holding their token
    /// (`{ github = "ALICE_GITHUB_TOKEN" }`); other providers use the server's.
    #[serde(default)]
    pub tokens: BTreeMap<String, String>,
    /// Which of their signed-in accounts a call acts as, by rule (first match wins), where
    /// they connected several at one service: `accounts = [{ account = "alice-acme", tools =
    /// "github.*", owner = ["acme", "acme-*"] }]`. A call no rule takes acts as the first
    /// account they connected.
    #[serde(default)]
    pub accounts: Vec<AccountRule>,
}

/// One of a user's `accounts` rules: calls of `tools` whose arguments match (as in a scope
/// rule: every argument named that the call carries) act as `account`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AccountRule {
    /// The account at the service, as it names it (`alice-acme`).
    pub account: String,
    /// The tools and argument values it takes.
    #[serde(flatten)]
    pub rule: quiver_core::scope::ScopeRule,
}

/// `[selector]`: patterns are globs over qualified names (`github.*`, `jira.get_issue`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SelectorConfig {
    /// `all`, `search` or `dynamic` (`quiver serve --mode` overrides it).
    pub mode: ServeMode,
    /// Tools listed at once in `dynamic` mode, CORE included; the most `find_tools` returns.
    pub max_tools: usize,
    /// τ: the score the best tool for a request needs for the selector to choose anything
    /// (with `lift_share = 0`, what every tool needs). Default:
    /// [`quiver_core::select::default_threshold`]: 0.17 for words and the distilled vectors,
    /// 0.1 for words alone, 0.12 when a neural model's similarity is fused.
    pub threshold: Option<f32>,
    /// Tools always listed in `search` and `dynamic` mode (names or globs).
    pub core: Vec<String>,
    /// How much embedding similarity counts beside words (the lexical score weighs 1), in
    /// standard deviations of each over the catalog, never more than words (see
    /// [`quiver_core::select::Fusion::Standardized`]). Default: 0 (words alone) with the
    /// built-in embedder, which measurably does not help;
    /// [`quiver_core::select::DEFAULT_MODEL_EMBEDDING_WEIGHT`] when a neural model embeds the
    /// tools (`[selector.embedder]` local, or an `lm` on the embeddings enrichment).
    pub embedding_weight: Option<f32>,
    /// The model tools and queries are embedded with; default: the built-in embedder, or the
    /// embeddings enrichment's `lm` when it names one.
    pub embedder: EmbedderConfig,
    /// How long a query waits for an HTTP embedding model before it is ranked on words alone
    /// (the answer says so).
    pub query_timeout_ms: u64,
    /// The most tokens the tools `find_tools` returns or `load_tools` lists for a request may
    /// cost together (their listings, by the README's estimator); none: only `max_tools`.
    pub max_list_tokens: Option<u64>,
    /// With a neural model: how much a request's similarity to a tool's name counts beside its
    /// similarity to the whole tool (1). Default
    /// [`quiver_core::select::DEFAULT_NAME_SHARE`] (0: the whole text alone).
    pub name_share: Option<f32>,
    /// How much the built-in distilled vectors' similarity counts beside words when no model's
    /// similarity is fused. Default [`quiver_core::select::DEFAULT_DISTILLED_WEIGHT`]; 0: words
    /// alone.
    pub distilled_weight: Option<f32>,
    /// How far above the catalog's mean score for a request a tool must stand to be chosen, as
    /// a share of how far the best tool stands. Default
    /// [`quiver_core::select::default_lift_share`] (0.5; 0.45 when a neural model's similarity is
    /// fused, 0.4 on words alone); 0: every tool scoring at least τ.
    pub lift_share: Option<f32>,
    /// With a neural model fused with words: how far a tool's similarity is raised toward the
    /// best of its action family (tools whose names differ only in what they do:
    /// `secret_get`, `secret_list`). Default [`quiver_core::select::DEFAULT_FAMILY_SHARE`]
    /// (0.5); 0: each tool's own.
    pub family_share: Option<f32>,
    /// When not empty, only tools matching one of these are served.
    pub allow: Vec<String>,
    /// Tools never served, even when `allow` matches them.
    pub deny: Vec<String>,
    /// Hide and refuse every tool whose side-effect class is not `pure` or `read_only`.
    pub read_only: bool,
    /// Tools refused until the call is repeated with `"_confirm": true`.
    pub confirm: Vec<String>,
    /// `[[selector.scope]]`: the values calls' arguments may take, per tool pattern (`tools =
    /// "github.*", owner = ["acme"]`); a call outside is refused naming the rule.
    pub scope: Vec<quiver_core::scope::ScopeRule>,
    /// In `dynamic` mode, after a call, how many of the called tool's likely next steps (its
    /// value model's follow-up links, most probable first) are listed with it; 0: none.
    pub follow_ups_on_call: usize,
}

impl Default for SelectorConfig {
    fn default() -> Self {
        Self {
            mode: ServeMode::All,
            max_tools: quiver_core::select::DEFAULT_MAX_TOOLS,
            threshold: None,
            core: Vec::new(),
            embedding_weight: None,
            embedder: EmbedderConfig::default(),
            query_timeout_ms: 1500,
            max_list_tokens: None,
            name_share: None,
            distilled_weight: None,
            lift_share: None,
            family_share: None,
            allow: Vec::new(),
            deny: Vec::new(),
            read_only: false,
            confirm: Vec::new(),
            scope: Vec::new(),
            follow_ups_on_call: DEFAULT_FOLLOW_UPS_ON_CALL,
        }
    }
}

/// Follow-ups listed after a call in `dynamic` mode: the two likeliest next steps, so a list
/// → get → comments chain finds its next tool listed without a `load_tools` turn, while a
/// `max_tools` of 20 still holds several tasks' worth.
pub const DEFAULT_FOLLOW_UPS_ON_CALL: usize = 2;

/// `[selector.embedder]`: which model embeds tools (the embeddings enrichment) and queries.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum EmbedderConfig {
    /// The built-in offline embedder (hashed words and n-grams), or the enrichment's `lm`.
    #[default]
    Builtin,
    /// A BERT-family sentence embedder run in process from a model directory holding
    /// `config.json`, `model.safetensors` and `tokenizer.json` (all-MiniLM-L6-v2, say).
    Local {
        /// The model directory.
        path: PathBuf,
    },
}

impl SelectorConfig {
    /// τ in effect: the configured one, else the default for the mix in use — a neural
    /// model's similarity fused (`fused`), else words with the distilled vectors at
    /// `distilled_weight` (see [`quiver_core::select::default_threshold`]).
    pub fn effective_threshold(&self, fused: bool, distilled_weight: f32) -> f32 {
        self.threshold
            .unwrap_or_else(|| quiver_core::select::default_threshold(fused, distilled_weight))
    }

    /// The lift share in effect: the configured one, else the default for the mix in use (see
    /// [`quiver_core::select::default_lift_share`]).
    pub fn effective_lift_share(&self, fused: bool, distilled_weight: f32) -> f32 {
        self.lift_share
            .unwrap_or_else(|| quiver_core::select::default_lift_share(fused, distilled_weight))
    }

    /// The distilled vectors' weight in effect: the configured one, else
    /// [`quiver_core::select::DEFAULT_DISTILLED_WEIGHT`].
    pub fn effective_distilled_weight(&self) -> f32 {
        self.distilled_weight.unwrap_or(quiver_core::select::DEFAULT_DISTILLED_WEIGHT)
    }

    /// The embedding weight in effect: the configured one, else 0 with the built-in embedder and
    /// [`quiver_core::select::DEFAULT_MODEL_EMBEDDING_WEIGHT`] with a neural model (`model`).
    pub fn effective_embedding_weight(&self, model: bool) -> f32 {
        self.embedding_weight.unwrap_or(if model {
            quiver_core::select::DEFAULT_MODEL_EMBEDDING_WEIGHT
        } else {
            quiver_core::select::DEFAULT_EMBEDDING_WEIGHT
        })
    }
}

/// `[security]`: text from outside — results, upstream tool definitions — is untrusted.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecurityConfig {
    /// Remove what a reader does not see (Unicode tag characters, bidi controls, zero-width and
    /// other invisible characters, control characters; HTML comments and hidden HTML in Markdown
    /// fields) from every result and every upstream tool definition, and say so in the result.
    pub clean_text: bool,
    /// The result fields that hold Markdown (issue, PR and comment bodies, descriptions, notes),
    /// where HTML comments and hidden HTML are removed too; a file's `content` is not one.
    pub markdown_fields: Vec<String>,
    /// Credentials of other services (gitleaks' rules): `redact` (the default) removes them
    /// from results and refuses a write whose arguments carry one; `warn` only logs both;
    /// `off` does neither.
    pub secrets: SecretsPolicy,
    /// `[security.flows]`: a write is asked when the session read text written by others and
    /// data from another scope than the one it writes to.
    pub flows: quiver_core::flows::FlowsConfig,
    /// Withhold texts written by authors who cannot write to the resource they are on (issue
    /// bodies and comments by strangers), where providers label who wrote what; a provider's
    /// own `lockdown` wins.
    pub lockdown: bool,
}

/// What quiver does with credentials of other services it finds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecretsPolicy {
    /// Redacted from results; a write carrying one is refused.
    #[default]
    Redact,
    /// Logged (rule and where, never the value), passed on.
    Warn,
    /// Not looked for.
    Off,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        Self {
            secrets: SecretsPolicy::Redact,
            flows: quiver_core::flows::FlowsConfig::default(),
            lockdown: false,
            clean_text: true,
            markdown_fields: quiver_core::untrusted::DEFAULT_MARKDOWN_FIELDS
                .map(str::to_owned)
                .to_vec(),
        }
    }
}

/// `[telemetry]`: off by default; events hold argument hashes, never values or secrets.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Write events.
    pub enabled: bool,
    /// Also record each session's calls with their arguments and whole results under
    /// `dir/sessions/`, for `quiver replay --recordings` (off: they hold the services' data).
    pub record_sessions: bool,
    /// Where (default: `$QUIVER_DATA_DIR/telemetry`, else `$XDG_DATA_HOME/quiver/telemetry`,
    /// else `~/.local/share/quiver/telemetry`).
    pub dir: Option<PathBuf>,
    /// `[telemetry.otlp]`: OpenTelemetry traces of `quiver serve` (none unless `endpoint` is
    /// set; read at start).
    pub otlp: crate::traces::OtlpConfig,
}

impl TelemetryConfig {
    /// The directory events go to.
    pub fn directory(&self) -> PathBuf {
        if let Some(dir) = &self.dir {
            return dir.clone();
        }
        data_dir().join("telemetry")
    }
}

/// Where quiver keeps data (the enrichment store, telemetry): `$QUIVER_DATA_DIR`, else
/// `$XDG_DATA_HOME/quiver`, else `~/.local/share/quiver`.
pub fn data_dir() -> PathBuf {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("QUIVER_DATA_DIR")
        .or_else(|| env("XDG_DATA_HOME").map(|d| d.join("quiver")))
        .or_else(|| env("HOME").map(|h| h.join(".local/share/quiver")))
        .unwrap_or_else(|| PathBuf::from(".quiver"))
}

/// `[enrichment]`: whether and how follow-up calls are pre-fetched.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnrichmentConfig {
    /// Off by default: pre-fetching spends rate limits on calls the agent may not make.
    pub enabled: bool,
    /// How long a response waits for its pre-fetches before it is returned anyway; later ones
    /// still land in the session cache, and a call arriving first joins the one in flight.
    /// 0 (the default): the answer never waits, and pre-fetches run while the agent thinks.
    pub prefetch_timeout_ms: u64,
    /// Pre-fetches in flight per session.
    pub max_parallel_prefetches: usize,
    /// Pre-fetches per follow-up link: the provider's likeliest projections first (1 by
    /// default — in recorded sessions the agent read the top commit of a list, rarely the next
    /// ones).
    pub max_prefetches_per_link: usize,
    /// A tool whose pre-fetches in a session went unused this many times is not pre-fetched
    /// again in that session (0: never stop).
    pub stop_after_unused: u32,
    /// A follow-up is pre-fetched only when it is at least this likely to be used — its link's
    /// probability, updated by what the session did with the link so far. A wasted pre-fetch
    /// costs a request of the service's rate budget, a used one saves the agent a wait: at 0.5
    /// a pre-fetch is used more often than not.
    pub min_prefetch_probability: f64,
    /// The share of a service's rate window pre-fetches leave to the agent's own calls. As the
    /// window the service reports (`x-ratelimit-remaining` of `x-ratelimit-limit`) empties
    /// towards it, a pre-fetch must be ever likelier to be used (its break-even odds grow as
    /// `1 / (left − reserve)`); at or below it, nothing is pre-fetched.
    pub prefetch_rate_reserve: f64,
    /// Token budget the planner may spend after one call.
    pub prefetch_budget_tokens: u32,
    /// Calls in flight per rate-limit host (`api.github.com`), main calls and pre-fetches
    /// together, across all providers.
    pub per_host_concurrency: usize,
}

impl Default for EnrichmentConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            prefetch_timeout_ms: 0,
            max_parallel_prefetches: 3,
            max_prefetches_per_link: 1,
            stop_after_unused: 2,
            min_prefetch_probability: 0.5,
            prefetch_rate_reserve: 0.2,
            prefetch_budget_tokens: 8000,
            per_host_concurrency: 4,
        }
    }
}

/// One `[providers.NAME]` section. The host reads `enabled`, `token_env` and `groups`; every other
/// key (`base_url`, timeouts…) goes to the provider, which rejects keys it does not know.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ProviderConfig {
    /// `false` keeps the provider's plugin loaded but serves none of its tools.
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// The environment variable holding the provider's token (default `NAME_TOKEN`, uppercase).
    #[serde(default)]
    pub token_env: Option<String>,
    /// Only the tools of these groups (toolsets: the names `quiver tools list` shows, such as
    /// `issues` or `pulls`) are served; none given serves every tool.
    #[serde(default)]
    pub groups: Option<Vec<String>>,
    /// `true`: texts of this provider's results written by authors who cannot write to the
    /// resource are withheld (`[security] lockdown` for every provider; this wins over it).
    #[serde(default)]
    pub lockdown: Option<bool>,
    /// `[providers.NAME.oauth]`: users sign in to the service themselves (an OAuth app's client
    /// id and secret; the provider knows the service's URLs).
    #[serde(default)]
    pub oauth: Option<crate::accounts::ProviderOAuthConfig>,
    /// Everything else, passed to the provider as JSON.
    #[serde(flatten)]
    pub settings: BTreeMap<String, toml::Value>,
}

fn enabled_by_default() -> bool {
    true
}

impl ProviderConfig {
    /// The environment variable the provider's token is read from.
    pub fn token_env(&self, provider: &str) -> String {
        self.token_env.clone().unwrap_or_else(|| default_token_env(provider))
    }
}

/// `github` → `GITHUB_TOKEN`; characters that cannot be in a variable name become `_`.
pub fn default_token_env(provider: &str) -> String {
    let stem: String = provider
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' })
        .collect();
    format!("{stem}_TOKEN")
}

/// One step of a path into the config file: a key, or an element of an array.
#[derive(Debug, Clone, PartialEq)]
enum Key {
    Name(String),
    Index(usize),
}

/// `follow_up[0].probability` → `follow_up`, `0`, `probability`.
fn field_path(field: &str) -> Vec<Key> {
    let mut keys = Vec::new();
    for part in field.split('.') {
        let mut pieces = part.split('[');
        if let Some(name) = pieces.next().filter(|n| !n.is_empty()) {
            keys.push(Key::Name(name.to_owned()));
        }
        for index in pieces {
            if let Ok(i) = index.trim_end_matches(']').parse() {
                keys.push(Key::Index(i));
            }
        }
    }
    keys
}

/// `file:line:col` (1-based) of the deepest part of `keys` found in `text`, else `file`.
fn locate_in(path: &Path, text: &str, keys: &[Key]) -> String {
    match key_offset(text, keys) {
        Some(offset) => {
            let before = &text[..offset.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("{}:{line}:{column}", path.display())
        }
        None => path.display().to_string(),
    }
}

/// The byte offset where the deepest part of `keys` found is written (its key, or the array
/// element), through tables, inline tables, arrays and arrays of tables.
fn key_offset(text: &str, keys: &[Key]) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let document = DeTable::parse(text).ok()?;
    let mut table: Option<&DeTable<'_>> = Some(document.get_ref());
    let mut array: Option<&[toml::Spanned<DeValue<'_>>]> = None;
    let mut best = None;
    for key in keys {
        let value = match key {
            Key::Name(name) => {
                let found = table.and_then(|t| t.iter().find(|(k, _)| k.get_ref() == name));
                let Some((k, value)) = found else { break };
                best = Some(k.span().start);
                value
            }
            Key::Index(i) => {
                let Some(value) = array.and_then(|a| a.get(*i)) else { break };
                best = Some(value.span().start);
                value
            }
        };
        (table, array) = match value.get_ref() {
            DeValue::Table(t) => (Some(t), None),
            DeValue::Array(a) => (None, Some(&a[..])),
            _ => (None, None),
        };
    }
    best
}

/// A config with the file it came from.
#[derive(Debug, Clone, Default)]
pub struct LoadedConfig {
    /// The file, or `None` when no config was found (defaults apply).
    pub path: Option<PathBuf>,
    /// The file's text, to say where a key is written.
    pub text: Option<String>,
    /// Its content.
    pub config: Config,
    /// The `[tools]` sections, sorted into layers.
    pub user_layers: UserLayers,
    /// What the `[tools]` sections change of tools as clients see them (`name`, `description`,
    /// `arguments`).
    pub user_edits: quiver_core::tool_edit::UserEdits,
}

impl LoadedConfig {
    /// Parses `text` as the content of `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let layers = config.tools.iter().map(|(k, s)| (k.clone(), s.model.clone())).collect();
        let edits = config.tools.iter().map(|(k, s)| (k.clone(), s.edit.clone())).collect();
        let user_edits =
            quiver_core::tool_edit::UserEdits::new(edits).map_err(|e| ConfigError::Tools {
                location: locate_in(
                    path,
                    text,
                    &[Key::Name("tools".into()), Key::Name(e.pattern.clone())],
                ),
                message: format!("[tools.\"{}\"] {}", e.pattern, e.reason),
            })?;
        let user_layers = UserLayers::new(layers).map_err(|e| {
            // `follow_up[0].probability (tool `x`) = 1.5 …`: the field path leads the reason.
            let field = e.reason.split_whitespace().next().unwrap_or_default();
            let mut keys = vec![Key::Name("tools".into()), Key::Name(e.pattern.clone())];
            keys.extend(field_path(field));
            ConfigError::Tools {
                location: locate_in(path, text, &keys),
                message: format!("[tools.\"{}\"] {}", e.pattern, e.reason),
            }
        })?;
        check_upstreams(&config)
            .map_err(|message| ConfigError::Upstream { path: path.to_owned(), message })?;
        check_users(&config.serve.http)
            .map_err(|message| ConfigError::Serve { path: path.to_owned(), message })?;
        check_selector(&config.selector)
            .map_err(|message| ConfigError::Selector { path: path.to_owned(), message })?;
        Ok(Self {
            path: Some(path.to_owned()),
            config,
            user_layers,
            user_edits,
            text: Some(text.to_owned()),
        })
    }

    /// Where element `index` of the array at `keys` is written (or the key itself without an
    /// index): `file:line:col`.
    pub fn locate_path(&self, keys: &[&str], index: Option<usize>) -> String {
        let mut path: Vec<Key> = keys.iter().map(|k| Key::Name((*k).to_owned())).collect();
        path.extend(index.map(Key::Index));
        match (&self.path, &self.text) {
            (Some(file), Some(text)) => locate_in(file, text, &path),
            (Some(file), None) => file.display().to_string(),
            (None, _) => "the configuration".to_owned(),
        }
    }

    /// Where `keys` (a key path: `providers`, `github`, `base_ur`) is written in the config file:
    /// `file:line:col`, or the deepest part of the path found, or the file alone.
    pub fn locate(&self, keys: &[&str]) -> String {
        let keys: Vec<Key> = keys.iter().map(|k| Key::Name((*k).to_owned())).collect();
        match (&self.path, &self.text) {
            (Some(path), Some(text)) => locate_in(path, text, &keys),
            (Some(path), None) => path.display().to_string(),
            (None, _) => "the configuration".to_owned(),
        }
    }

    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        Self::parse(path, &text)
    }

    /// Finds the config: `explicit` (`--config`), `$QUIVER_CONFIG`, `./quiver.toml`,
    /// `$XDG_CONFIG_HOME/quiver/config.toml` (or `~/.config/…`). An explicitly named file must
    /// exist; when none of the others exists, defaults apply.
    pub fn discover(explicit: Option<&Path>) -> Result<Self, ConfigError> {
        if let Some(path) = explicit {
            return Self::read(path);
        }
        if let Some(path) = std::env::var_os("QUIVER_CONFIG").filter(|v| !v.is_empty()) {
            return Self::read(Path::new(&path));
        }
        let xdg = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
        let candidates =
            [Some(PathBuf::from("quiver.toml")), xdg.map(|d| d.join("quiver").join("config.toml"))];
        for path in candidates.into_iter().flatten() {
            if path.is_file() {
                return Self::read(&path);
            }
        }
        Ok(Self::default())
    }

    /// The section of provider `name`, or the defaults when the config has none.
    pub fn provider(&self, name: &str) -> ProviderConfig {
        self.config
            .providers
            .get(name)
            .cloned()
            .unwrap_or(ProviderConfig { enabled: true, ..ProviderConfig::default() })
    }

    /// `[providers.NAME]` as the provider is created from it: its `ca_file` made absolute against
    /// the config file's folder, or the top-level `ca_file` when it sets none and the plugin has
    /// the setting (`accepts_ca_file`; a plugin that does not know the key is never sent it).
    pub fn provider_settings(&self, name: &str, accepts_ca_file: bool) -> ProviderConfig {
        let mut section = self.provider(name);
        let folder = self.path.as_deref().and_then(Path::parent).unwrap_or(Path::new(""));
        let resolve = |file: &Path| folder.join(file).display().to_string();
        match section.settings.get("ca_file") {
            Some(toml::Value::String(file)) => {
                let file = resolve(Path::new(file));
                section.settings.insert("ca_file".into(), toml::Value::String(file));
            }
            Some(_) => {}
            None => {
                if let (true, Some(file)) = (accepts_ca_file, &self.config.ca_file) {
                    section.settings.insert("ca_file".into(), toml::Value::String(resolve(file)));
                }
            }
        }
        section
    }
}

/// Each `[[serve.http.users]]` entry named once, with a usable key hash.
fn check_users(http: &HttpServeConfig) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for user in &http.users {
        if user.name.trim().is_empty() {
            return Err("[[serve.http.users]] needs a `name`".into());
        }
        if !seen.insert(user.name.as_str()) {
            return Err(format!("two [[serve.http.users]] are named `{}`", user.name));
        }
        if user.name.contains(':') {
            // `oauth:SUBJECT` names an OAuth subject without an entry: no API-key user may take
            // that name, and no subject an API-key user's.
            return Err(format!(
                "[[serve.http.users]] `{}`: a name may not contain `:` (quiver calls an OAuth \
                 subject without an entry `oauth:SUBJECT`); rename it",
                user.name
            ));
        }
        if let Some(subject) = &user.subject {
            let twice = http.users.iter().filter(|u| u.subject.as_ref() == Some(subject)).count();
            if twice > 1 {
                return Err(format!(
                    "two [[serve.http.users]] name the OAuth subject `{subject}`; keep one"
                ));
            }
        }
        if user.subject.is_some() {
            if !user.key_sha256.is_empty() {
                return Err(format!(
                    "[[serve.http.users]] `{}` has both key_sha256 and subject; an entry is for \
                     an API key or for an OAuth subject",
                    user.name
                ));
            }
            if http.oauth.is_none() {
                return Err(format!(
                    "[[serve.http.users]] `{}` names an OAuth subject but [serve.http.oauth] is \
                     not configured",
                    user.name
                ));
            }
            continue;
        }
        if user.key_sha256.len() != 64 || !user.key_sha256.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!(
                "[[serve.http.users]] `{}`: key_sha256 must be 64 hex digits (the SHA-256 of the \
                 key); `quiver keys new {}` prints a key and its hash",
                user.name, user.name
            ));
        }
    }
    Ok(())
}

/// `[selector] family_share`, when set, within 0 to 1.
fn check_selector(selector: &SelectorConfig) -> Result<(), String> {
    let Some(share) = selector.family_share else { return Ok(()) };
    match quiver_core::select::family_share_problem(share) {
        Some(problem) => Err(format!("[selector] family_share = {share}: {problem}")),
        None => Ok(()),
    }
}

/// Each `[[upstreams]]` entry usable, names unique, and none named like a `[[sources]]` file.
fn check_upstreams(config: &Config) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for upstream in &config.upstreams {
        if let Some(problem) = upstream.problem() {
            return Err(problem);
        }
        if !seen.insert(upstream.name.as_str()) {
            return Err(format!(
                "two [[upstreams]] are named `{}`; names prefix their tools, so give each its own",
                upstream.name
            ));
        }
        if config.sources.iter().any(|s| s.source_name() == upstream.name) {
            return Err(format!(
                "[[upstreams]] `{0}` and a [[sources]] file share the name `{0}`; a source only \
                 describes tools an upstream serves, so remove the source or rename one of them",
                upstream.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LoadedConfig, ConfigError> {
        LoadedConfig::parse(Path::new("quiver.toml"), text)
    }

    #[test]
    fn provider_sections_split_host_keys_from_provider_keys() {
        let config = parse(
            r#"
            [providers.github]
            base_url = "https://ghe.example.com/api/v3"
            token_env = "GHE_TOKEN"
            timeout_s = 5
            "#,
        )
        .unwrap();
        let github = config.provider("github");
        assert!(github.enabled);
        assert_eq!(github.token_env("github"), "GHE_TOKEN");
        assert_eq!(github.settings["base_url"].as_str(), Some("https://ghe.example.com/api/v3"));
        assert_eq!(github.settings["timeout_s"].as_integer(), Some(5));
        assert_eq!(config.provider("gitlab").token_env("gitlab"), "GITLAB_TOKEN");
        assert_eq!(default_token_env("click-up"), "CLICK_UP_TOKEN");
    }

    #[test]
    fn a_family_share_outside_zero_to_one_is_refused_naming_the_key_and_its_range() {
        let err = parse("[selector]\nfamily_share = 1.5\n").unwrap_err().to_string();
        assert!(err.contains("quiver.toml"), "{err}");
        assert!(err.contains("[selector] family_share = 1.5"), "{err}");
        assert!(err.contains("from 0") && err.contains("to 1"), "{err}");
        let config = parse("[selector]\nfamily_share = 0\n").unwrap();
        assert_eq!(config.config.selector.family_share, Some(0.0));
    }

    #[test]
    fn a_bad_line_is_reported_with_file_line_and_column() {
        let err = parse("[providers.github]\nbase_url = https://x\n").unwrap_err().to_string();
        assert!(err.starts_with("invalid config quiver.toml:"), "{err}");
        assert!(err.contains("line 2, column 12"), "{err}");
    }

    #[test]
    fn a_misspelt_value_model_key_is_an_error_naming_it() {
        let err = parse("[tools.\"github.get_issue\"]\nvalue_clas = \"critical\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("value_clas"), "{err}");
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn an_out_of_range_layer_names_its_section() {
        let err = parse(
            "[[tools.\"github.list_issues\".follow_up]]\ntool = \"get_issue\"\nprobability = 2.0\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("[tools.\"github.list_issues\"]"), "{err}");
        assert!(err.contains("probability"), "{err}");
    }

    #[test]
    fn an_unknown_top_level_key_is_an_error() {
        let err = parse("plugin_dir = \"x\"\n").unwrap_err().to_string();
        assert!(err.contains("plugin_dir"), "{err}");
    }

    #[test]
    fn upstreams_need_a_transport_a_unique_name_and_no_source_of_that_name() {
        let ok = parse("[[upstreams]]\nname = \"fs\"\ncommand = \"npx\"\nargs = [\"-y\", \"x\"]\n");
        assert_eq!(ok.unwrap().config.upstreams[0].args, ["-y", "x"]);
        let twice = parse("[[upstreams]]\nname = \"fs\"\ncommand = \"a\"\n[[upstreams]]\nname = \"fs\"\ncommand = \"b\"\n");
        assert!(twice.unwrap_err().to_string().contains("two [[upstreams]] are named `fs`"));
        let clash = parse("[[sources]]\npath = \"tools.json\"\nname = \"fs\"\n[[upstreams]]\nname = \"fs\"\ncommand = \"a\"\n");
        let message = clash.unwrap_err().to_string();
        assert!(
            message.contains("[[upstreams]] `fs` and a [[sources]] file share the name"),
            "{message}"
        );
        let unknown = parse("[[upstreams]]\nname = \"fs\"\ncomand = \"a\"\n");
        assert!(unknown.unwrap_err().to_string().contains("comand"));
        let http = parse("[[upstreams]]\nname = \"remote\"\nurl = \"mcp.example.com/mcp\"\n");
        assert!(http.unwrap_err().to_string().contains("must start with http:// or https://"));
        let remote = parse("[[upstreams]]\nname = \"remote\"\nurl = \"https://mcp.example.com/mcp\"\nbearer_env = \"REMOTE_TOKEN\"\nheaders = { \"X-Tenant\" = \"acme\" }\n");
        assert_eq!(remote.unwrap().config.upstreams[0].bearer_env.as_deref(), Some("REMOTE_TOKEN"));
    }
}
