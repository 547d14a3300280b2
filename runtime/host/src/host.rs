//! The host: plugins loaded, providers created from the config, tools registered, calls run.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abi_stable::std_types::{RResult, RStr};
use quiver_core::defaults::prior_for;
use quiver_core::value_model::{resolve, LayerSource, ResolvedValueModel, ValueModelLayer};
use quiver_core::{
    FollowUpLink, SideEffectClass, ToolContext, ToolErrorKind, ToolName, ToolResult, ToolSpec,
};
use quiver_plugin_abi::ProviderBox;
use serde_json::{Map, Value};

use crate::config::{ConfigError, LoadedConfig, ProviderConfig, SecretsPolicy};
use crate::enrich::CatalogTool;
use crate::loader::{self, LoadedPlugin, PluginsDirSource};
use crate::logging;
use crate::registry::{RegisteredTool, Registry, ToolOrigin};
use crate::sources::{SourceError, StaticTool};
use crate::state::StateStore;
use crate::telemetry::TelemetrySink;
use crate::upstream::{UpstreamReport, Upstreams};

/// How to open a host.
#[derive(Debug, Clone, Default)]
pub struct HostOptions {
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--plugins`.
    pub plugins_dir: Option<PathBuf>,
}

/// What became of one plugin file.
#[derive(Debug, Clone, PartialEq)]
pub enum PluginStatus {
    /// Loaded and serving its tools.
    Loaded {
        /// Provider name.
        provider: String,
        /// Provider version.
        version: String,
        /// SDK version it was built with.
        sdk_version: String,
        /// How many tools it serves.
        tools: usize,
    },
    /// Loaded, but `enabled = false` in the config.
    Disabled {
        /// Provider name.
        provider: String,
        /// Provider version.
        version: String,
    },
    /// Not serving because a required setting is missing (not a failure: set it to use it).
    NotConfigured {
        /// Provider name.
        provider: String,
        /// Which key to set, with an example.
        hint: String,
    },
    /// Not serving, and why.
    Failed {
        /// One line, with a fix where there is one.
        reason: String,
    },
}

/// One plugin file and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginReport {
    /// The file.
    pub path: PathBuf,
    /// Its fate.
    pub status: PluginStatus,
}

/// A provider instance living in a plugin.
pub struct ProviderHandle {
    /// The provider's name.
    pub name: String,
    /// The file it came from.
    pub path: PathBuf,
    /// Replaced whole when a reload changes the provider's section; a call in flight keeps the
    /// instance it started on.
    instance: std::sync::RwLock<Arc<ProviderBox>>,
}

impl ProviderHandle {
    /// Wraps an instance created from the plugin at `path`.
    pub fn new(name: String, path: PathBuf, instance: ProviderBox) -> Self {
        Self { name, path, instance: std::sync::RwLock::new(Arc::new(instance)) }
    }

    /// The current instance.
    fn instance(&self) -> Arc<ProviderBox> {
        Arc::clone(&self.instance.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Serves later calls with `instance` instead.
    fn replace(&self, instance: ProviderBox) {
        *self.instance.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(instance);
    }

    /// The provider's own value-model layer for `tool`; a broken answer is logged and ignored.
    pub fn value_model(&self, tool: &str) -> Option<ValueModelLayer> {
        match self.instance().value_model(RStr::from(tool)) {
            RResult::ROk(json) => {
                let json = json.into_option()?;
                serde_json::from_str(json.as_str())
                    .map_err(|e| {
                        tracing::warn!(provider = %self.name, tool, "ignoring an unreadable value model: {e}")
                    })
                    .ok()
            }
            RResult::RErr(e) => {
                tracing::warn!(provider = %self.name, tool, "value_model failed: {e}");
                None
            }
        }
    }
}

/// The running host.
pub struct Host {
    /// Swapped whole by [`Host::reload`]; readers take the one in effect when they ask.
    config: std::sync::RwLock<Arc<LoadedConfig>>,
    /// The config quiver started with: where providers send their tokens
    /// ([`RESTART_ONLY_PROVIDER_KEYS`]) is read from it, whatever a reload says.
    started: Arc<LoadedConfig>,
    /// Counts reloads, so the server knows when to rebuild what it derived from the config.
    generation: std::sync::atomic::AtomicU64,
    plugins_dir: PathBuf,
    plugins_dir_source: PluginsDirSource,
    reports: Vec<PluginReport>,
    registry: Registry,
    /// The session cache, in-flight reads, rate-limit permits and callers' state: in this
    /// process, or shared through Redis.
    state: Arc<dyn StateStore>,
    /// Why the configured `[state]` could not be opened (the in-process state serves instead).
    state_error: Option<String>,
    telemetry: Option<TelemetrySink>,
    static_tools: Vec<StaticTool>,
    source_errors: Vec<SourceError>,
    upstreams: Upstreams,
    /// The upstreams' tools as registry entries, rebuilt when an upstream's tools change.
    upstream_tools: Mutex<(u64, Arc<Vec<Arc<RegisteredTool>>>)>,
    /// Each started provider's plugin file, module, and whether its settings have `ca_file`, to
    /// create instances with other credentials.
    modules:
        std::collections::BTreeMap<String, (PathBuf, quiver_plugin_abi::PluginModuleRef, bool)>,
    /// Provider instances by (provider, token variable or signed-in connection), created on
    /// first use, each with the digest of the token it was made with (a refreshed token makes a
    /// new one).
    per_credential: Mutex<std::collections::HashMap<(String, String), MadeWith>>,
    /// Each started provider's OAuth endpoints, when it has them.
    oauth_endpoints: std::collections::BTreeMap<String, quiver_core::manifest::OAuthEndpoints>,
    /// Users' signed-in accounts (`[providers.NAME.oauth]`), made when first asked for.
    accounts: std::sync::OnceLock<Arc<crate::accounts::Accounts>>,
    /// Held while an upstream's sign-in is discovered and registered.
    discovering: tokio::sync::Mutex<()>,
    /// The audit trail (`[audit]`, as quiver started with it), opened when first asked for:
    /// only a server writes it, and one process at a time.
    audit: std::sync::OnceLock<Result<Option<Arc<crate::audit::AuditLog>>, String>>,
    /// What the last response of each (rate-limit host, credentials) said is left of its rate
    /// window. In this process only: every response refreshes it, so a replica's own view is a
    /// few calls old at most, and sharing it would cost a state write per call.
    rate_headroom:
        Mutex<std::collections::HashMap<(String, String), quiver_core::tool::RateHeadroom>>,
    /// Tokens of the results each tool gave so far (count, sum): the size a tool with no cost
    /// model of its own (an upstream's, or one only the priors describe) is predicted to have.
    observed_tokens: Mutex<std::collections::HashMap<String, (u64, u64)>>,
    /// A replay's recorded answers, given to every call in place of the providers' and
    /// upstreams' (see [`Host::answer_from`]).
    recorded_answers: std::sync::RwLock<Option<Arc<dyn crate::recording::RecordedAnswers>>>,
    /// Every provider a plugin file here names, started or not.
    seen_providers: std::collections::BTreeSet<String>,
    /// `[providers.NAME]` keys the provider's settings do not have, or values of the wrong
    /// kind, each as `file:line:col: message`.
    config_problems: Vec<String>,
}

/// A provider instance made for one credential, and the digest of the token it was made with.
type MadeWith = (String, Arc<ProviderHandle>);

/// A caller's own credentials, by provider. Providers it does not name use the host's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Credentials(pub std::collections::BTreeMap<String, Credential>);

impl Credentials {
    /// Credentials from variables alone (`tokens = { github = "ALICE_GITHUB_TOKEN" }`).
    pub fn from_variables(tokens: &std::collections::BTreeMap<String, String>) -> Self {
        Self(
            tokens
                .iter()
                .map(|(provider, variable)| {
                    (provider.clone(), Credential::Variable(variable.clone()))
                })
                .collect(),
        )
    }

    /// Who a call of `provider` acts as, for the audit trail and results: the signed-in
    /// account, or the variable the token is read from.
    pub fn whose(&self, provider: &str) -> Option<String> {
        self.0.get(provider).map(|credential| match credential {
            Credential::Variable(variable) => variable.clone(),
            Credential::Account(token) => format!("{provider} account {}", token.account),
        })
    }
}

/// Where a caller's token for one provider comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Credential {
    /// The environment variable holding it (`tokens = { github = "ALICE_GITHUB_TOKEN" }`).
    Variable(String),
    /// An account they signed in to ([`crate::accounts`]).
    Account(crate::accounts::AccountToken),
}

/// A follow-up the planner may pre-fetch: owned, so a plan can borrow from it.
#[derive(Debug, Clone)]
pub struct FollowUpCandidate {
    /// The qualified tool whose result it follows.
    pub from: String,
    /// The link, its `tool` qualified.
    pub link: FollowUpLink,
    /// The target's effective value model.
    pub model: quiver_core::ToolValueModel,
}

impl FollowUpCandidate {
    /// The planner's view of it.
    pub fn as_candidate(&self) -> quiver_core::planner::Candidate<'_> {
        quiver_core::planner::Candidate {
            from: &self.from,
            link: &self.link,
            model: &self.model,
            requires: None,
        }
    }
}

/// Time a call may take unless the caller says otherwise.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Extra time the host gives a provider past the deadline it passed, to answer "timed out" itself.
const DEADLINE_GRACE: Duration = Duration::from_millis(500);

impl Host {
    /// Reads the config, loads every plugin and creates the enabled providers. Only a broken
    /// config is an error: plugin failures are kept in [`Host::plugin_reports`].
    pub fn open(options: &HostOptions) -> Result<Self, ConfigError> {
        let config = LoadedConfig::discover(options.config.as_deref())?;
        Ok(Self::with_config(config, options.plugins_dir.as_deref()))
    }

    /// Like [`Host::open`], with a config already read.
    pub fn with_config(config: LoadedConfig, plugins_flag: Option<&Path>) -> Self {
        let (plugins_dir, plugins_dir_source) =
            loader::plugins_dir(plugins_flag, config.config.plugins_dir.as_deref());
        let (loaded, failed) = loader::load_dir(&plugins_dir);
        let per_host = config.config.enrichment.per_host_concurrency;
        let replica = crate::state::replica_name(&config.config.state);
        let (state, state_error) =
            match crate::state::open(&config.config.state, per_host, &replica) {
                Ok(state) => (state, None),
                Err(error) => {
                    tracing::error!("{error}; state stays in this process");
                    let memory: Arc<dyn StateStore> =
                        Arc::new(crate::state::MemoryState::new(per_host));
                    (memory, Some(error))
                }
            };
        let telemetry = config
            .config
            .telemetry
            .enabled
            .then(|| TelemetrySink::new(&config.config.telemetry.directory(), &replica));
        let mut host = Self {
            started: Arc::new(config.clone()),
            config: std::sync::RwLock::new(Arc::new(config)),
            generation: std::sync::atomic::AtomicU64::new(0),
            plugins_dir,
            plugins_dir_source,
            reports: failed
                .into_iter()
                .map(|f| PluginReport {
                    path: f.path,
                    status: PluginStatus::Failed { reason: f.reason },
                })
                .collect(),
            registry: Registry::default(),
            state,
            state_error,
            telemetry,
            static_tools: Vec::new(),
            source_errors: Vec::new(),
            upstreams: Upstreams::new(&[]),
            upstream_tools: Mutex::new((u64::MAX, Arc::new(Vec::new()))),
            modules: std::collections::BTreeMap::new(),
            per_credential: Mutex::new(std::collections::HashMap::new()),
            oauth_endpoints: std::collections::BTreeMap::new(),
            accounts: std::sync::OnceLock::new(),
            discovering: tokio::sync::Mutex::new(()),
            audit: std::sync::OnceLock::new(),
            rate_headroom: Mutex::new(std::collections::HashMap::new()),
            recorded_answers: std::sync::RwLock::new(None),
            observed_tokens: Mutex::new(std::collections::HashMap::new()),
            seen_providers: std::collections::BTreeSet::new(),
            config_problems: Vec::new(),
        };
        for plugin in loaded {
            let status = host.start(&plugin);
            if let PluginStatus::NotConfigured { provider, hint } = &status {
                tracing::info!("provider `{provider}` is not configured: {hint}");
            }
            if let PluginStatus::Failed { reason } = &status {
                // At the default level: a typo in a provider's section must not make its tools
                // vanish silently.
                tracing::warn!(
                    path = %plugin.path.display(),
                    "provider `{}` is not serving: {reason}",
                    plugin.manifest.name
                );
            }
            host.reports.push(PluginReport { path: plugin.path.clone(), status });
        }
        host.reports.sort_by(|a, b| a.path.cmp(&b.path));
        host.load_sources();
        if host.config().config.security.secrets != SecretsPolicy::Off {
            // Compiled once per process (tens of ms, more in a debug build): before the first
            // result needs them, not while it waits.
            std::thread::spawn(|| {
                quiver_core::foreign_secrets::rules();
            });
        }
        host.upstreams = Upstreams::new(&host.upstream_configs());
        host.upstreams.know_plugin_tools(
            host.registry.tools().flat_map(|t| [t.name.tool.clone(), t.name.mcp_name()]).collect(),
        );
        host
    }

    /// `[[upstreams]]` entries that can run: an upstream named like a loaded plugin's provider
    /// is left out, with a warning, since their tools would share names.
    fn upstream_configs(&self) -> Vec<crate::upstream::UpstreamConfig> {
        let mut out = Vec::new();
        for upstream in &self.config().config.upstreams {
            if let Some(plugin) = self.registry.provider(&upstream.name) {
                let e = SourceError {
                    path: self.config().path.clone().unwrap_or_default(),
                    message: format!(
                        "[[upstreams]] `{}` has the name of the provider served by {}; give the \
                         upstream another `name`",
                        upstream.name,
                        plugin.path.display()
                    ),
                };
                tracing::warn!("{e}");
                continue;
            }
            out.push(upstream.clone());
        }
        out
    }

    /// Starts every enabled upstream MCP server in parallel and waits until each has connected
    /// or failed (each bounded by its `start_timeout_s`); they are supervised in the background
    /// from then on. Needs a tokio runtime; a second call does nothing.
    pub async fn start_upstreams(&self) {
        // `auth = "oauth"` upstreams connect with the operator's signed-in account.
        let configs: std::collections::HashMap<String, crate::upstream::UpstreamConfig> = self
            .upstreams
            .all()
            .iter()
            .filter(|u| u.config().auth == crate::upstream::UpstreamAuth::Oauth)
            .map(|u| (u.name().to_owned(), u.config().clone()))
            .collect();
        if !configs.is_empty() {
            let accounts = Arc::clone(self.accounts());
            self.upstreams.set_operator_tokens(Arc::new(move |name: String| {
                let accounts = Arc::clone(&accounts);
                let config = configs.get(&name).cloned();
                Box::pin(async move {
                    let config = config.ok_or_else(|| format!("no upstream `{name}`"))?;
                    let app = match accounts.app(&name) {
                        Some(app) => app,
                        // Refreshing needs only the endpoints: the grant names its own client.
                        None => {
                            let discovered =
                                discover_upstream(&config, &crate::mcp_auth::client()).await?;
                            Arc::new(upstream_app_of(&config, &discovered, None)?)
                        }
                    };
                    let operator = crate::accounts::OPERATOR;
                    let token = accounts.credential_with(&app, operator, None).await?;
                    Ok(token.map(|t| t.token))
                })
            }));
        }
        self.upstreams.start().await;
    }

    /// The OAuth app users sign in to upstream `name` (`auth = "oauth"`) through, redirected to
    /// `redirect`: discovered from its metadata, its client the configured one or registered
    /// (RFC 7591) and kept; then known to [`Host::accounts`].
    pub async fn upstream_app(
        &self,
        name: &str,
        redirect: &str,
    ) -> Result<Arc<crate::accounts::OAuthApp>, String> {
        let accounts = self.accounts();
        if let Some(app) = accounts.app(name) {
            return Ok(app);
        }
        // One discovery and registration at a time, so two first calls register one client.
        let _one = self.discovering.lock().await;
        if let Some(app) = accounts.app(name) {
            return Ok(app);
        }
        let upstream = self.upstreams.get(name).ok_or_else(|| format!("no upstream `{name}`"))?;
        let config = upstream.config();
        let http = crate::mcp_auth::client();
        let discovered = discover_upstream(config, &http).await?;
        // A client registered by hand, else the one registered for this redirect, else one
        // registered now (RFC 7591) and kept.
        let configured = config.oauth.as_ref().is_some_and(|o| o.client_id.is_some());
        let registered = if configured {
            None
        } else if let Some(client) = accounts.registered_client(name, redirect).await? {
            Some(client)
        } else {
            let registration = discovered.registration_url.as_deref().ok_or_else(|| {
                format!(
                    "upstream `{name}`'s authorization server offers no dynamic registration; \
                     register quiver there (redirect {redirect}) and set [upstreams.oauth] \
                     client_id"
                )
            })?;
            let scopes = upstream_scopes(config, &discovered);
            let client = crate::mcp_auth::register(&http, registration, redirect, &scopes).await?;
            accounts.remember_client(name, redirect, &client).await?;
            Some(client)
        };
        accounts.add_app(upstream_app_of(config, &discovered, registered)?);
        accounts.app(name).ok_or_else(|| format!("upstream `{name}`'s sign-in was not kept"))
    }

    /// Every upstream and where it stands, in config order.
    pub fn upstream_reports(&self) -> Vec<UpstreamReport> {
        self.upstreams.reports()
    }

    /// The supervised upstreams (to follow their changes, or stop them).
    pub fn upstreams(&self) -> &Upstreams {
        &self.upstreams
    }

    /// The upstreams' tools as registry entries, sorted by qualified name.
    fn upstream_tools(&self) -> Arc<Vec<Arc<RegisteredTool>>> {
        let version = self.upstreams.version();
        let mut cached = self.upstream_tools.lock().unwrap_or_else(|e| e.into_inner());
        if cached.0 != version {
            let mut tools: Vec<Arc<RegisteredTool>> = Vec::new();
            for upstream in self.upstreams.all() {
                for tool in upstream.tools() {
                    tools.push(Arc::new(RegisteredTool {
                        name: tool.name,
                        spec: tool.spec,
                        origin: ToolOrigin::Upstream {
                            upstream: Arc::clone(upstream),
                            annotations: tool.annotations,
                            declared: tool.declared,
                        },
                    }));
                }
            }
            tools.sort_by(|a, b| a.name.cmp(&b.name));
            *cached = (version, Arc::new(tools));
        }
        Arc::clone(&cached.1)
    }

    /// Reads `[[sources]]`; a broken file is reported and skipped, the others still load.
    fn load_sources(&mut self) {
        let config_path = self.config().path.clone();
        for source in self.config().config.sources.clone() {
            match source.load(config_path.as_deref()) {
                Ok(tools) => {
                    for tool in tools {
                        let qualified = tool.name.to_string();
                        let clash = self.registry.tool(&qualified).is_some()
                            || self.static_tools.iter().any(|t| t.name == tool.name);
                        if clash {
                            let e = SourceError {
                                path: tool.path.clone(),
                                message: format!(
                                    "tool `{qualified}` is already defined; give the source \
                                     another `name`"
                                ),
                            };
                            tracing::warn!("{e}");
                            self.source_errors.push(e);
                            continue;
                        }
                        self.static_tools.push(tool);
                    }
                }
                Err(e) => {
                    tracing::warn!("{e}");
                    self.source_errors.push(e);
                }
            }
        }
        self.static_tools.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Tools read from `[[sources]]` files: described, not served.
    pub fn static_tools(&self) -> &[StaticTool] {
        &self.static_tools
    }

    /// `[[sources]]` files (or tools in them) that could not be used, and why.
    pub fn source_errors(&self) -> &[SourceError] {
        &self.source_errors
    }

    /// Every tool enrichments and selection see: the plugins' and the static sources', sorted by
    /// qualified name.
    pub fn catalog(&self) -> Vec<CatalogTool> {
        let mut all: Vec<CatalogTool> = self
            .tools()
            .into_iter()
            .map(|t| CatalogTool { name: t.name.to_string(), spec: t.spec.clone() })
            .chain(
                self.static_tools
                    .iter()
                    .map(|t| CatalogTool { name: t.name.to_string(), spec: t.spec.clone() }),
            )
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    fn unknown_tool_message(&self, name: &str) -> String {
        match self
            .static_tools
            .iter()
            .find(|t| t.name.to_string() == name || t.name.mcp_name() == name)
        {
            Some(t) => format!(
                "tool `{}` is described by the static source {}, not served by a provider; \
                 install a plugin that serves it to call it",
                t.name,
                t.path.display()
            ),
            None => self.registry.unknown_tool_message(name),
        }
    }

    fn start(&mut self, plugin: &LoadedPlugin) -> PluginStatus {
        let manifest = &plugin.manifest;
        self.seen_providers.insert(manifest.name.clone());
        if let Some(endpoints) = &manifest.oauth {
            self.oauth_endpoints.insert(manifest.name.clone(), endpoints.clone());
        }
        if let Some(other) = self.registry.provider(&manifest.name) {
            return PluginStatus::Failed {
                reason: format!(
                    "provider `{}` is already served by {}; remove one of the two files",
                    manifest.name,
                    other.path.display()
                ),
            };
        }
        let accepts_ca_file = manifest.config_schema.pointer("/properties/ca_file").is_some();
        let section = self.config().provider_settings(&manifest.name, accepts_ca_file);
        if !section.enabled {
            return PluginStatus::Disabled {
                provider: manifest.name.clone(),
                version: manifest.version.clone(),
            };
        }
        // Checked here, against the settings the plugin declares, so a typo is a config error at
        // its line rather than the plugin's complaint about a position in the JSON it was given.
        let problems = section_problems(&manifest.name, &manifest.config_schema, &section.settings);
        if !problems.is_empty() {
            let located: Vec<String> = problems
                .iter()
                .map(|(key, message)| {
                    format!(
                        "{}: {message}",
                        self.config().locate(&["providers", &manifest.name, key])
                    )
                })
                .collect();
            let reason = format!("config problem: {}", located.join("; "));
            self.config_problems.extend(located);
            return PluginStatus::Failed { reason };
        }
        let instance = match instantiate(plugin.module, &manifest.name, &section, None) {
            Ok(instance) => instance,
            Err(reason) => {
                let marker = format!(
                    "failed to initialise: provider `{}`: {}",
                    manifest.name,
                    quiver_core::manifest::NOT_CONFIGURED
                );
                return match reason.strip_prefix(&marker) {
                    Some(hint) => PluginStatus::NotConfigured {
                        provider: manifest.name.clone(),
                        hint: hint.to_owned(),
                    },
                    None => PluginStatus::Failed { reason },
                };
            }
        };
        let tools = match served_groups(&manifest.tools, section.groups.as_deref()) {
            Ok(tools) => tools,
            Err(message) => {
                let at = self.config().locate(&["providers", &manifest.name, "groups"]);
                let located = format!("{at}: {message}");
                self.config_problems.push(located.clone());
                return PluginStatus::Failed { reason: format!("config problem: {located}") };
            }
        };
        let handle =
            Arc::new(ProviderHandle::new(manifest.name.clone(), plugin.path.clone(), instance));
        self.modules
            .insert(manifest.name.clone(), (plugin.path.clone(), plugin.module, accepts_ca_file));
        match self.registry.add_provider(handle, &tools) {
            Ok(count) => {
                self.registry.add_resources(&manifest.name, &manifest.resources);
                PluginStatus::Loaded {
                    provider: manifest.name.clone(),
                    version: manifest.version.clone(),
                    sdk_version: manifest.sdk_version.clone(),
                    tools: count,
                }
            }
            Err(e) => PluginStatus::Failed { reason: e.to_string() },
        }
    }

    /// The instance of `provider` that calls with `credential`: created from the provider's
    /// config section with that token, on first use, then kept (made again when a signed-in
    /// token was refreshed).
    pub fn provider_with(
        &self,
        provider: &str,
        credential: &Credential,
    ) -> Result<Arc<ProviderHandle>, String> {
        let (key, digest) = match credential {
            Credential::Variable(variable) => {
                if std::env::var(variable).map_or(true, |v| v.trim().is_empty()) {
                    return Err(format!(
                        "your `{provider}` token variable {variable} is not set on the server; \
                         ask whoever runs it to set it"
                    ));
                }
                (format!("variable:{variable}"), String::new())
            }
            Credential::Account(account) => {
                let digest = <sha2::Sha256 as sha2::Digest>::digest(account.token.as_bytes());
                (format!("account:{}", account.grant), hex::encode(&digest[..8]))
            }
        };
        let key = (provider.to_owned(), key);
        if let Some((made_with, handle)) =
            self.per_credential.lock().unwrap_or_else(|e| e.into_inner()).get(&key)
        {
            if *made_with == digest {
                return Ok(Arc::clone(handle));
            }
        }
        let (path, module, accepts_ca_file) = self
            .modules
            .get(provider)
            .ok_or_else(|| format!("provider `{provider}` is not served by this host"))?;
        let mut section = self.running_settings(&self.config(), provider, *accepts_ca_file);
        // The caller's token, never one written in the shared config.
        section.settings.remove("token");
        let instance = match credential {
            Credential::Variable(variable) => {
                section.token_env = Some(variable.clone());
                instantiate(*module, provider, &section, None)?
            }
            Credential::Account(account) => {
                let app_settings = self
                    .accounts()
                    .app(provider)
                    .map(|app| app.settings.clone())
                    .unwrap_or_default();
                for (name, value) in app_settings {
                    if let Ok(value) = toml::Value::try_from(value) {
                        section.settings.insert(name, value);
                    }
                }
                instantiate(*module, provider, &section, Some(&account.token))?
            }
        };
        let handle = Arc::new(ProviderHandle::new(provider.to_owned(), path.clone(), instance));
        self.per_credential
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, (digest, Arc::clone(&handle)));
        Ok(handle)
    }

    /// Users' signed-in accounts: every `[providers.NAME.oauth]` of a started provider, kept
    /// in the state backend when it is shared, else in files.
    pub fn accounts(&self) -> &Arc<crate::accounts::Accounts> {
        self.accounts.get_or_init(|| {
            let config = &self.started.config;
            let apps = config
                .providers
                .iter()
                .filter_map(|(provider, section)| {
                    let oauth = section.oauth.as_ref()?;
                    let app = crate::accounts::OAuthApp::resolve(
                        provider,
                        oauth,
                        self.oauth_endpoints.get(provider),
                        &section.settings,
                    );
                    Some((provider.clone(), app))
                })
                .collect();
            let shared = config.state.backend == crate::config::StateBackendKind::Redis
                && self.state.backend() == crate::config::StateBackendKind::Redis;
            Arc::new(crate::accounts::Accounts::new(
                apps,
                &config.accounts,
                Arc::clone(&self.state),
                shared,
            ))
        })
    }

    /// `[providers.NAME]` of `config` as a provider is created from it now: every key from
    /// `config`, except where it sends its token ([`RESTART_ONLY_PROVIDER_KEYS`] and
    /// `token_env`), which stays as quiver started with it. A reload — or an editor's empty
    /// write — must not send the server's token to another host.
    fn running_settings(
        &self,
        config: &LoadedConfig,
        name: &str,
        accepts_ca_file: bool,
    ) -> ProviderConfig {
        let started = self.started.provider_settings(name, accepts_ca_file);
        let mut section = config.provider_settings(name, accepts_ca_file);
        for key in RESTART_ONLY_PROVIDER_KEYS {
            match started.settings.get(*key) {
                Some(value) => section.settings.insert((*key).to_owned(), value.clone()),
                None => section.settings.remove(*key),
            };
        }
        section.token_env = started.token_env;
        section
    }

    /// Problems in `[providers.NAME]` sections found when the providers started (a key the
    /// provider does not have, a value of the wrong kind), each `file:line:col: message`.
    pub fn config_problems(&self) -> &[String] {
        &self.config_problems
    }

    /// What in the config has no effect, each `file:line:col: message`: a `[providers.NAME]` no
    /// plugin here serves, a `[tools."…"]` section that matches no served tool, a `follow_up` to
    /// a tool no provider serves. Not errors (a plugin may be missing on purpose), but never
    /// silent: `serve` logs them, `doctor` counts them.
    pub fn config_warnings(&self) -> Vec<String> {
        let config = self.config();
        let served: Vec<String> = self.tools().iter().map(|t| t.name.to_string()).collect();
        let is_served = |name: &str| served.iter().any(|t| t == name);
        let mut warnings = Vec::new();
        for name in config.config.providers.keys() {
            if !self.seen_providers.contains(name) {
                let known: Vec<&str> = self.seen_providers.iter().map(String::as_str).collect();
                warnings.push(format!(
                    "{}: [providers.{name}] names no provider a plugin here serves (plugins \
                     here: {}); fix the name, or add the plugin to the plugins directory",
                    config.locate(&["providers", name]),
                    if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                ));
            }
        }
        for (pattern, section) in &config.config.tools {
            let layer = &section.model;
            let matched: Vec<&str> = if pattern == "*" {
                served.iter().map(String::as_str).collect()
            } else if pattern.contains(['*', '?', '[', '{']) {
                match globset::Glob::new(pattern) {
                    Ok(glob) => {
                        let matcher = glob.compile_matcher();
                        served.iter().map(String::as_str).filter(|t| matcher.is_match(t)).collect()
                    }
                    Err(_) => Vec::new(),
                }
            } else {
                served.iter().map(String::as_str).filter(|t| *t == pattern).collect()
            };
            if matched.is_empty() {
                if pattern != "*" {
                    warnings.push(format!(
                        "{}: [tools.\"{pattern}\"] matches no served tool; sections name tools \
                         as `provider.tool` (`quiver tools list` shows them)",
                        config.locate(&["tools", pattern])
                    ));
                }
                continue;
            }
            for tool in &matched {
                let Some(registered) = self.tool(tool) else { continue };
                for problem in section.edit.problems(&registered.spec.input_schema) {
                    warnings.push(format!(
                        "{}: [tools.\"{pattern}\"] arguments: {problem} (`{tool}`)",
                        config.locate(&["tools", pattern, "arguments"])
                    ));
                }
            }
            for (i, link) in layer.follow_up.iter().flatten().enumerate() {
                // A bare name is a tool of the same provider as the section's tool.
                let reachable = if link.tool.contains('.') {
                    is_served(&link.tool)
                } else {
                    matched.iter().any(|t| {
                        let provider = t.split_once('.').map_or("", |(p, _)| p);
                        is_served(&format!("{provider}.{}", link.tool))
                    })
                };
                if !reachable {
                    warnings.push(format!(
                        "{}: [tools.\"{pattern}\"] follow_up to `{}`, which no provider here \
                         serves; it will never be pre-fetched",
                        config.locate_path(&["tools", pattern, "follow_up"], Some(i)),
                        link.tool
                    ));
                }
            }
        }
        warnings
    }

    /// Every plugin file and what became of it, sorted by path.
    pub fn plugin_reports(&self) -> &[PluginReport] {
        &self.reports
    }

    /// The plugins directory and where that choice came from.
    pub fn plugins_dir(&self) -> (&Path, &PluginsDirSource) {
        (&self.plugins_dir, &self.plugins_dir_source)
    }

    /// The state calls share beyond a session: the session cache, in-flight reads, permits per
    /// rate-limit host (main calls and pre-fetches of every session), callers' pipeline state.
    pub fn state(&self) -> &Arc<dyn StateStore> {
        &self.state
    }

    /// Notes that a call of `tool` (qualified) returned a result of `tokens` (before projection).
    pub fn observe_result_tokens(&self, tool: &str, tokens: u64) {
        let mut observed = self.observed_tokens.lock().unwrap_or_else(|e| e.into_inner());
        let (count, sum) = observed.entry(tool.to_owned()).or_default();
        *count += 1;
        *sum += tokens;
    }

    /// Answers every call from `answers` instead of the providers and upstreams (a call nothing
    /// was recorded for gets a `not_found` error saying so), or, with `None`, from them again:
    /// how `quiver replay --recordings` puts recorded sessions through the whole pipeline.
    pub fn answer_from(&self, answers: Option<Arc<dyn crate::recording::RecordedAnswers>>) {
        *self.recorded_answers.write().unwrap_or_else(|e| e.into_inner()) = answers;
    }

    /// Keeps the rate headroom a fresh `result` of a call to `host` with the credentials of
    /// `scope` reports (see [`quiver_core::tool::RATE_HEADROOM_METADATA`]).
    pub fn note_rate_headroom(&self, host: &str, scope: &str, result: &ToolResult) {
        if let Some(headroom) = quiver_core::tool::RateHeadroom::of(result) {
            self.rate_headroom
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert((host.to_owned(), scope.to_owned()), headroom);
        }
    }

    /// What the last response from `host` to the credentials of `scope` said is left of its
    /// rate window, if one said.
    pub fn rate_headroom(
        &self,
        host: &str,
        scope: &str,
    ) -> Option<quiver_core::tool::RateHeadroom> {
        self.rate_headroom
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(host.to_owned(), scope.to_owned()))
            .copied()
    }

    /// Why the configured `[state]` backend could not be opened, if it could not.
    pub fn state_error(&self) -> Option<&str> {
        self.state_error.as_deref()
    }

    /// Where telemetry goes, when `[telemetry] enabled = true`.
    pub fn telemetry(&self) -> Option<&TelemetrySink> {
        self.telemetry.as_ref()
    }

    /// The config in use.
    pub fn config(&self) -> Arc<LoadedConfig> {
        Arc::clone(&self.config.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// How many times the config was reloaded; what was derived from the config (the server's
    /// selector policy) is rebuilt when this changes.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Applies a new config to the running host: value models, the selector policy and
    /// everything else read per call apply from the next call; a started provider whose section
    /// changed is created anew from it (calls in flight finish on the old one; a section the
    /// provider refuses keeps the old one running). What only a restart changes (plugins, upstreams,
    /// `[state]`, `[serve]`, telemetry, enrichments, sources, enabling or disabling a provider) is
    /// named. Returns one line per thing done or kept.
    pub fn reload(&self, new: LoadedConfig) -> Vec<String> {
        let old = self.config();
        let mut report = Vec::new();
        let mut replace = Vec::new();
        for (name, (_, module, accepts_ca_file)) in &self.modules {
            let before = self.running_settings(&old, name, *accepts_ca_file);
            let after = self.running_settings(&new, name, *accepts_ca_file);
            let held =
                restart_only_changes(&before, &new.provider_settings(name, *accepts_ca_file));
            if !held.is_empty() {
                report.push(format!(
                    "[providers.{name}] {} changed; that takes effect when quiver restarts (where \
                     a provider sends its token changes only then)",
                    held.join(", ")
                ));
            }
            if before == after {
                continue;
            }
            if before.enabled != after.enabled || before.groups != after.groups {
                let key = if before.enabled != after.enabled { "enabled" } else { "groups" };
                report.push(format!(
                    "[providers.{name}] {key} changed; that takes effect when quiver restarts"
                ));
                continue;
            }
            let schema = module_config_schema(*module);
            let problems = section_problems(name, &schema, &after.settings);
            if let Some((key, message)) = problems.first() {
                let at = new.locate(&["providers", name, key]);
                report
                    .push(format!("{at}: {message}; provider `{name}` keeps its running settings"));
                continue;
            }
            match instantiate(*module, name, &after, None) {
                Ok(instance) => replace.push((name.clone(), instance)),
                Err(reason) => report.push(format!(
                    "provider `{name}` keeps its running settings: the new ones fail ({reason})"
                )),
            }
        }
        for name in new.config.providers.keys() {
            let changed = old.config.providers.get(name) != new.config.providers.get(name);
            if changed && self.seen_providers.contains(name) && !self.modules.contains_key(name) {
                report.push(format!(
                    "provider `{name}` did not start with the running config; restart quiver to \
                     start it with the new section"
                ));
            }
        }
        for (name, instance) in replace {
            if let Some(handle) = self.registry.provider(&name) {
                handle.replace(instance);
                report.push(format!("provider `{name}` re-created from its changed section"));
            }
        }
        // Instances made for other callers' tokens are made again, from the new sections.
        self.per_credential.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let restart_only = [
            ("plugins_dir", old.config.plugins_dir != new.config.plugins_dir),
            (
                "[[upstreams]]",
                format!("{:?}", old.config.upstreams) != format!("{:?}", new.config.upstreams),
            ),
            ("[state]", format!("{:?}", old.config.state) != format!("{:?}", new.config.state)),
            // Users, their keys and their policy apply at once (a removed key stops working
            // with the next request); the rest of [serve] at restart.
            ("[serve]", {
                let without_users = |c: &LoadedConfig| {
                    let mut serve = c.config.serve.clone();
                    serve.http.users.clear();
                    format!("{serve:?}")
                };
                without_users(&old) != without_users(&new)
            }),
            (
                "[telemetry]",
                format!("{:?}", old.config.telemetry) != format!("{:?}", new.config.telemetry),
            ),
            (
                "[[enrichments]]",
                format!("{:?}", old.config.enrichments) != format!("{:?}", new.config.enrichments),
            ),
            (
                "[[sources]]",
                format!("{:?}", old.config.sources) != format!("{:?}", new.config.sources),
            ),
        ];
        for (section, changed) in restart_only {
            if changed {
                report.push(format!("{section} changed; that takes effect when quiver restarts"));
            }
        }
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(new);
        self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        report
    }

    /// Every tool served now — the plugins' and the upstreams' that are up — sorted by
    /// qualified name.
    pub fn tools(&self) -> Vec<Arc<RegisteredTool>> {
        let upstream = self.upstream_tools();
        let mut all: Vec<Arc<RegisteredTool>> =
            self.registry.tools().cloned().chain(upstream.iter().cloned()).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// The plugins' resource families (each read by one of the provider's tools).
    pub fn provider_resources(&self) -> &[crate::registry::ProviderResource] {
        self.registry.resources()
    }

    /// The plugin resource family `uri` belongs to, and its variables: the tool's arguments.
    pub fn provider_resource_for(
        &self,
        uri: &str,
    ) -> Option<(&crate::registry::ProviderResource, Map<String, Value>)> {
        self.registry.resource_for(uri)
    }

    /// One tool by qualified name (`github.get_issue`) or MCP name (`github_get_issue`).
    pub fn tool(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        if let Some(tool) = self.registry.tool(name) {
            return Some(Arc::clone(tool));
        }
        self.upstream_tools()
            .iter()
            .find(|t| t.name.to_string() == name || t.name.mcp_name() == name)
            .cloned()
    }

    /// The effective value model of a tool: built-in prior < provider < user `*` < user globs <
    /// user exact, with the layer that set each field.
    ///
    /// For an upstream tool the provider layer comes from its annotations, which are hints from a
    /// server quiver does not control: they may set the class shown and valued, but the tool is
    /// pre-fetched only when the user's config says it is `pure` or `read_only`.
    pub fn value_model(&self, tool: &RegisteredTool) -> ResolvedValueModel {
        self.resolve_value_model(tool, true)
    }

    /// The side-effect class policy decides by — `[selector] read_only`, a user's `read_only`,
    /// pre-fetch eligibility. A plugin's is its effective class: quiver's own providers are
    /// trusted. An upstream's annotations are what a server quiver does not control says about
    /// itself, so they never grant a privilege: its class is what the built-in priors (by verb)
    /// and the operator's `[tools."…"]` layers say, and its hints may only make it stricter (a
    /// `readOnlyHint: false` or `destructiveHint: true` makes it `mutates_external`). A
    /// `delete_repository` declaring `readOnlyHint: true` stays a write unless a user layer says
    /// otherwise.
    pub fn policy_class(&self, tool: &RegisteredTool) -> SideEffectClass {
        let ToolOrigin::Upstream { annotations, .. } = &tool.origin else {
            return self.value_model(tool).model.side_effect_class;
        };
        let trusted = self.resolve_value_model(tool, false);
        if trusted.provenance.get("side_effect_class").is_some_and(LayerSource::is_user) {
            return trusted.model.side_effect_class;
        }
        let hint =
            |key: &str| annotations.as_ref().and_then(|a| a.get(key)).and_then(Value::as_bool);
        let says_it_writes =
            hint("readOnlyHint") == Some(false) || hint("destructiveHint") == Some(true);
        if says_it_writes && trusted.model.side_effect_class.is_speculatable() {
            return SideEffectClass::MutatesExternal;
        }
        trusted.model.side_effect_class
    }

    /// [`Host::value_model`], with an upstream's annotations as its provider layer or without.
    fn resolve_value_model(&self, tool: &RegisteredTool, with_hints: bool) -> ResolvedValueModel {
        let (rule, prior) = prior_for(&tool.name.tool);
        let provider = match &tool.origin {
            ToolOrigin::Plugin(provider) => provider.value_model(&tool.name.tool),
            ToolOrigin::Upstream { annotations, .. } if with_hints => {
                crate::upstream::annotation_layer(annotations.as_ref())
            }
            ToolOrigin::Upstream { .. } => None,
        };
        let qualified = tool.name.to_string();
        let mut layers: Vec<(LayerSource, &ValueModelLayer)> =
            vec![(LayerSource::BuiltIn(rule), &prior)];
        if let Some(layer) = &provider {
            layers.push((LayerSource::Provider(tool.name.provider.clone()), layer));
        }
        let config = self.config();
        let user = config.user_layers.layers_for(&qualified);
        let user_says_class = user.iter().any(|(_, l)| l.side_effect_class.is_some());
        layers.extend(user);
        let mut resolved = resolve(&layers);
        // Nobody said how large its results are: what it returned so far says it better than a
        // guess by its verb.
        let size_guessed = matches!(
            resolved.source_of("cost_model.typical_kb"),
            None | Some(LayerSource::Baseline | LayerSource::BuiltIn(_))
        );
        if size_guessed {
            let observed = self.observed_tokens.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(&(count, sum)) = observed.get(&qualified).filter(|(count, _)| *count > 0) {
                let mean_tokens = sum as f64 / count as f64;
                resolved.model.cost_model.typical_kb = mean_tokens / crate::session::TOKENS_PER_KB;
                resolved.provenance.insert(
                    "cost_model.typical_kb".into(),
                    LayerSource::BuiltIn(format!("observed:mean of {count} results")),
                );
            }
        }
        if matches!(tool.origin, ToolOrigin::Upstream { .. }) && !user_says_class {
            resolved.model.speculate = Some(false);
            resolved.provenance.insert(
                "speculate".into(),
                LayerSource::BuiltIn("upstream:no-prefetch-without-user-class".into()),
            );
        }
        resolved
    }

    /// The follow-ups of `recent` calls as planner candidates: each link of each recent tool's
    /// effective model, its target qualified (`get_issue` → `github.get_issue`) and resolved to
    /// the target's effective model. Links to tools this host does not serve are left out, with
    /// a debug line: the planner could not run them anyway.
    pub fn follow_up_candidates(&self, recent: &[String]) -> Vec<FollowUpCandidate> {
        let mut out = Vec::new();
        for from in recent {
            let Some(source) = self.tool(from) else { continue };
            for link in self.value_model(&source).model.follow_up {
                let target = if link.tool.contains('.') {
                    link.tool.clone()
                } else {
                    format!("{}.{}", source.name.provider, link.tool)
                };
                let Some(target_tool) = self.tool(&target) else {
                    tracing::debug!(from = %source.name, target, "follow-up to a tool this host does not serve");
                    continue;
                };
                out.push(FollowUpCandidate {
                    from: source.name.to_string(),
                    link: FollowUpLink { tool: target, ..link },
                    model: self.value_model(&target_tool).model,
                });
            }
        }
        out
    }

    /// Arguments for follow-up `link` of `prev_tool` given its structured result, from the provider.
    pub fn project_args(
        &self,
        prev_tool: &RegisteredTool,
        prev_result: &Value,
        link: &FollowUpLink,
    ) -> Result<Vec<Map<String, Value>>, String> {
        let provider = match &prev_tool.origin {
            ToolOrigin::Plugin(provider) => provider,
            // An upstream knows nothing of links: the link's own path applies.
            ToolOrigin::Upstream { .. } => {
                return match (&link.projection, &link.projection_arg) {
                    (Some(path), Some(arg)) => {
                        quiver_core::projection::project(prev_result, path, arg)
                            .map_err(|e| format!("projection {path}: {e}"))
                    }
                    _ => Ok(Vec::new()),
                };
            }
        };
        let link_json = serde_json::to_string(link).map_err(|e| e.to_string())?;
        let out = provider
            .instance()
            .project_args(
                RStr::from(prev_tool.name.tool.as_str()),
                RStr::from(prev_result.to_string().as_str()),
                RStr::from(link_json.as_str()),
            )
            .into_result()
            .map_err(|e| e.to_string())?;
        serde_json::from_str(out.as_str()).map_err(|e| format!("unreadable projection: {e}"))
    }

    /// The host whose rate limit a call spends: the user's `rate_limit_host` for the tool if set,
    /// else the provider's answer.
    pub fn rate_limit_host(&self, tool: &RegisteredTool, args: &Value) -> Option<String> {
        let config = self.config();
        let configured = config.user_layers.layers_for(&tool.name.to_string());
        if let Some(host) = configured.iter().rev().find_map(|(_, l)| l.rate_limit_host.clone()) {
            return Some(host);
        }
        let provider = match &tool.origin {
            ToolOrigin::Plugin(provider) => provider,
            // One upstream server is one budget.
            ToolOrigin::Upstream { upstream, .. } => {
                return Some(format!("upstream:{}", upstream.name()));
            }
        };
        let answer = provider.instance().rate_limit_host(
            RStr::from(tool.name.tool.as_str()),
            RStr::from(args.to_string().as_str()),
        );
        match answer.into_result() {
            Ok(host) => host.into_option().map(|h| h.into_string()),
            Err(e) => {
                tracing::warn!(tool = %tool.name, "rate_limit_host failed: {e}");
                None
            }
        }
    }

    /// Runs a tool on a blocking thread, with a deadline; the call is cancelled when `cancel` is
    /// set or the deadline passes. Unknown tools and provider failures come back as error results.
    pub async fn call(
        &self,
        name: &str,
        args: Value,
        timeout: Option<Duration>,
        session: &str,
        cancel: Option<Arc<AtomicBool>>,
    ) -> ToolResult {
        self.call_with(name, args, timeout, session, cancel, None).await
    }

    /// [`Host::call`] with the caller's own `credentials`: a plugin tool whose provider they
    /// name runs on an instance made with their token.
    pub async fn call_with(
        &self,
        name: &str,
        args: Value,
        timeout: Option<Duration>,
        session: &str,
        cancel: Option<Arc<AtomicBool>>,
        credentials: Option<&Credentials>,
    ) -> ToolResult {
        let result = self.call_unclean(name, args, timeout, session, cancel, credentials).await;
        let mut result = self.cleaned(result);
        self.lock_down(name.split('.').next().unwrap_or(name), &mut result);
        result
    }

    /// With `lockdown` (`[providers.NAME]`, else `[security]`): the texts by authors who cannot
    /// write ([`withhold_by_lockdown`]) withheld before anything keeps the result, as cleaning
    /// is. A user's own `lockdown` is applied by the server to what that user is given.
    fn lock_down(&self, provider: &str, result: &mut ToolResult) {
        let config = self.config();
        let on = config
            .config
            .providers
            .get(provider)
            .and_then(|p| p.lockdown)
            .unwrap_or(config.config.security.lockdown);
        if on {
            withhold_by_lockdown(result);
        }
    }

    /// The audit trail `[audit]` names (as quiver started: a reload does not move it), opened
    /// on first use; `Ok(None)` when none is configured. An error says why it cannot be
    /// written (another process writes it; its folder cannot be made).
    pub fn audit(&self) -> Result<Option<Arc<crate::audit::AuditLog>>, String> {
        self.audit
            .get_or_init(|| {
                let mut audit = self.started.config.audit.clone();
                audit.path = audit.resolved_path(self.started.path.as_deref());
                crate::audit::AuditLog::open(&audit).map(|log| log.map(Arc::new))
            })
            .clone()
    }

    /// Whether a call of the provider's may meet lockdown — its own, the global one, or any
    /// HTTP user's (whose results may be served to them from what others called): then the
    /// provider is asked to say, at a request's cost where its service needs one, whether
    /// authors can write and whether the resource is public ([`ToolContext::lockdown`]).
    pub fn lockdown_wanted(&self, provider: &str) -> bool {
        let config = self.config();
        let config = &config.config;
        config.providers.get(provider).and_then(|p| p.lockdown).unwrap_or(config.security.lockdown)
            || config.serve.http.users.iter().any(|user| user.lockdown)
    }

    /// `result` without what its reader would not see ([`quiver_core::untrusted`]: invisible
    /// characters everywhere, HTML comments and hidden HTML in Markdown fields), with one line
    /// saying what was removed — unless `[security] clean_text = false`. Before anything keeps
    /// the result (cache, shared state, recordings), so every copy is the clean one.
    ///
    /// Then credentials of other services ([`quiver_core::foreign_secrets`]) are redacted, after
    /// the cleaning, which joins a token an invisible character split — unless `[security]
    /// secrets` says `warn` (logged, by rule, never the value) or `off`.
    fn cleaned(&self, mut result: ToolResult) -> ToolResult {
        let config = self.config();
        let security = &config.config.security;
        if security.clean_text {
            quiver_core::untrusted::clean_result(&mut result, &security.markdown_fields);
        }
        match security.secrets {
            SecretsPolicy::Redact => {
                quiver_core::foreign_secrets::rules().redact_result(&mut result);
            }
            SecretsPolicy::Warn => {
                let mut probe = result.clone();
                let found = quiver_core::foreign_secrets::rules().redact_result(&mut probe);
                if !found.is_empty() {
                    tracing::warn!(
                        "a result holds credentials of other services ({}); passed on, as \
                         [security] secrets = \"warn\" says",
                        found.summary()
                    );
                }
            }
            SecretsPolicy::Off => {}
        }
        result
    }

    /// Why a call must not be sent, when it would write (any class but `pure` and `read_only`)
    /// an argument holding a credential of another service: what an instruction injected into
    /// something the agent read would do to send a secret out. `None` to send it.
    fn carries_a_secret_out(&self, tool: &RegisteredTool, args: &Value) -> Option<String> {
        let policy = self.config().config.security.secrets;
        if policy == SecretsPolicy::Off || self.policy_class(tool).is_speculatable() {
            return None;
        }
        let (path, rule) = quiver_core::foreign_secrets::rules().find_in_json(args)?;
        if policy == SecretsPolicy::Warn {
            tracing::warn!(
                tool = %tool.name,
                "argument `{path}` holds what looks like a credential ({rule}); sent, as \
                 [security] secrets = \"warn\" says"
            );
            return None;
        }
        Some(format!(
            "quiver did not send this call of `{}`: argument `{path}` holds what looks like a \
             credential of another service (gitleaks rule `{rule}`), and the call writes. \
             Instructions in text the agent read may be trying to send it out. Remove it from \
             the arguments; if it is meant to be sent, the operator can set [security] secrets \
             = \"warn\".",
            tool.name
        ))
    }

    async fn call_unclean(
        &self,
        name: &str,
        args: Value,
        timeout: Option<Duration>,
        session: &str,
        cancel: Option<Arc<AtomicBool>>,
        credentials: Option<&Credentials>,
    ) -> ToolResult {
        let Some(mut tool) = self.tool(name) else {
            return ToolResult::error(ToolErrorKind::UnknownTool, self.unknown_tool_message(name));
        };
        if let Some(refusal) = self.carries_a_secret_out(&tool, &args) {
            tracing::warn!(tool = %tool.name, "refused: {refusal}");
            return ToolResult::error(ToolErrorKind::InvalidArguments, refusal);
        }
        let recorded = self.recorded_answers.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(answers) = recorded {
            let key = quiver_core::session_cache::CallKey::new(
                &tool.name.to_string(),
                &args,
                Some(&tool.spec.input_schema),
            );
            return answers.answer(&key).unwrap_or_else(|| {
                ToolResult::error(
                    ToolErrorKind::NotFound,
                    format!("nothing was recorded for {key}: the recorded session never made it"),
                )
            });
        }
        if let Some(credential) = credentials.and_then(|c| c.0.get(&tool.name.provider)) {
            if tool.plugin().is_some() {
                match self.provider_with(&tool.name.provider, credential) {
                    Ok(handle) => {
                        tool = Arc::new(RegisteredTool {
                            origin: ToolOrigin::Plugin(handle),
                            ..RegisteredTool::clone(&tool)
                        });
                    }
                    Err(e) => return ToolResult::error(ToolErrorKind::Unauthorized, e),
                }
            }
        }
        let cancelled = cancel.unwrap_or_default();
        if let ToolOrigin::Upstream { upstream, .. } = &tool.origin {
            tracing::info!(
                tool = %tool.name,
                args = %logging::preview_args(&args, &tool.spec.sensitive_params),
                "call"
            );
            let started = Instant::now();
            let span = crate::traced_span!(
                "upstream call",
                otel.name = %format!("tools/call {}", tool.name.tool),
                otel.kind = "client",
                mcp.method.name = "tools/call",
                gen_ai.operation.name = "execute_tool",
                gen_ai.tool.name = %tool.name.tool,
                quiver.upstream = %tool.name.provider,
                error.type = tracing::field::Empty,
            );
            let result = tracing::Instrument::instrument(
                async {
                    // An upstream that takes each caller's identity gets theirs.
                    let caller = credentials
                        .and_then(|c| c.0.get(&tool.name.provider))
                        .and_then(|c| match c {
                            Credential::Account(token) => Some(token.token.clone()),
                            Credential::Variable(_) => None,
                        })
                        .filter(|_| upstream.config().auth.per_caller());
                    // Boxed: a call's future is deep enough without two more inlined in it.
                    let call: std::pin::Pin<
                        Box<dyn std::future::Future<Output = ToolResult> + Send + '_>,
                    > = match &caller {
                        Some(bearer) => Box::pin(upstream.call_as(
                            bearer,
                            &tool.name.tool,
                            args,
                            timeout,
                            cancelled,
                        )),
                        None => Box::pin(upstream.call(&tool.name.tool, args, timeout, cancelled)),
                    };
                    call.await
                },
                span.clone(),
            )
            .await;
            if result.is_error {
                span.record("error.type", error_type(&result));
            }
            tracing::info!(
                tool = %tool.name,
                ms = started.elapsed().as_millis() as u64,
                is_error = result.is_error,
                "done"
            );
            return scrub_result(result);
        }
        let timeout = timeout.unwrap_or(DEFAULT_CALL_TIMEOUT);
        let lockdown = self.lockdown_wanted(&tool.name.provider);
        let (tool_for_thread, flag, session) =
            (tool.clone(), Arc::clone(&cancelled), session.to_owned());
        let span = crate::traced_span!(
            "provider call",
            otel.name = %format!("{} {}", tool.name.provider, tool.name.tool),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %tool.name.tool,
            quiver.provider = %tool.name.provider,
            error.type = tracing::field::Empty,
        );
        // The service's requests carry this span's trace on.
        let trace: std::collections::BTreeMap<String, String> =
            crate::traces::context_of(&span).into_iter().collect();
        // The provider blocks (it runs its own runtime), so it must not run on an async worker.
        let blocking = tokio::task::spawn_blocking(move || {
            let context = CallContext { lockdown, trace };
            call_provider(&tool_for_thread, args, timeout, &session, &flag, context)
        });
        let answer = tracing::Instrument::instrument(
            tokio::time::timeout(timeout + DEADLINE_GRACE, blocking),
            span.clone(),
        )
        .await;
        let result = match answer {
            Ok(Ok(result)) => result,
            Ok(Err(join)) => ToolResult::error(
                ToolErrorKind::Internal,
                format!("the call of `{}` failed on the host: {join}", tool.name),
            ),
            Err(_) => {
                cancelled.store(true, std::sync::atomic::Ordering::SeqCst);
                ToolResult::error(
                    ToolErrorKind::Timeout,
                    format!("`{}` did not answer within {} ms", tool.name, timeout.as_millis()),
                )
            }
        };
        if result.is_error {
            span.record("error.type", error_type(&result));
        }
        result
    }

    /// Runs a tool on the calling thread, which it blocks until the provider answers or `timeout`
    /// passes. For callers that already run on a thread they can spare; async callers use
    /// [`Host::call`].
    pub fn call_blocking(
        &self,
        name: &str,
        args: Value,
        timeout: Option<Duration>,
        session: &str,
    ) -> ToolResult {
        match self.tool(name) {
            Some(tool) if matches!(tool.origin, ToolOrigin::Upstream { .. }) => ToolResult::error(
                ToolErrorKind::Internal,
                format!("`{name}` is an upstream MCP tool; call it with Host::call"),
            ),
            Some(tool) => call_provider(
                &tool,
                args,
                timeout.unwrap_or(DEFAULT_CALL_TIMEOUT),
                session,
                &AtomicBool::new(false),
                CallContext {
                    lockdown: self.lockdown_wanted(&tool.name.provider),
                    trace: Default::default(),
                },
            ),
            None => ToolResult::error(ToolErrorKind::UnknownTool, self.unknown_tool_message(name)),
        }
    }
}

/// Lockdown, as GitHub's lockdown mode does it: every text of `result` its provider labelled as
/// written by an author who cannot write to the resource — in a resource not known to be
/// private — is replaced by a note naming the author, in the structured value and the text that
/// mirrors it, and a last line counts them. What it withheld, by author; applying it twice
/// withholds nothing more.
pub fn withhold_by_lockdown(result: &mut ToolResult) -> Vec<String> {
    let labels = result.author_labels();
    let Some(structured) = result.structured.as_mut().filter(|_| !labels.is_empty()) else {
        return Vec::new();
    };
    let before = structured.clone();
    let mut withheld = Vec::new();
    let strangers = labels.iter().filter(|l| l.can_write == Some(false) && l.public != Some(false));
    for label in strangers {
        let note = format!(
            "[withheld by quiver's lockdown: written by @{}, who cannot write here]",
            label.author
        );
        if let Some(Value::String(text)) = structured.pointer_mut(&label.pointer) {
            if *text != note {
                *text = note;
                withheld.push(label.author.clone());
            }
        }
    }
    if withheld.is_empty() {
        return withheld;
    }
    let after = structured.to_string();
    // The text that mirrors the value, whatever order its writer gave the keys in (a
    // provider's struct order; the host's map may sort them).
    for content in &mut result.content {
        if let quiver_core::Content::Text { text, .. } = content {
            if text.starts_with(['{', '['])
                && serde_json::from_str::<Value>(text).is_ok_and(|v| v == before)
            {
                text.clone_from(&after);
            }
        }
    }
    withheld.sort_unstable();
    withheld.dedup();
    result.content.push(quiver_core::Content::text(format!(
        "[quiver's lockdown withheld texts by authors who cannot write to this resource: @{}]",
        withheld.join(", @")
    )));
    withheld
}

/// A failed result's kind, as a span's `error.type` (`timeout`, `rate_limited`…).
fn error_type(result: &ToolResult) -> String {
    result
        .error_kind
        .and_then(|kind| serde_json::to_value(kind).ok()?.as_str().map(str::to_owned))
        .unwrap_or_else(|| "tool_error".to_owned())
}

/// `[providers.NAME]` keys that say where a provider sends its credentials, or which
/// credentials: they change only at restart.
pub const RESTART_ONLY_PROVIDER_KEYS: &[&str] =
    &["base_url", "token", "email", "username", "user", "auth", "deployment", "ca_file"];

/// The restart-only keys (and `token_env`) that differ between the running `before` and `after`.
fn restart_only_changes(before: &ProviderConfig, after: &ProviderConfig) -> Vec<String> {
    let mut changed: Vec<String> = RESTART_ONLY_PROVIDER_KEYS
        .iter()
        .filter(|key| before.settings.get(**key) != after.settings.get(**key))
        .map(|key| (*key).to_owned())
        .collect();
    if before.token_env != after.token_env {
        changed.push("token_env".into());
    }
    changed
}

/// What the host tells a provider about a call besides its arguments.
struct CallContext {
    /// [`ToolContext::lockdown`].
    lockdown: bool,
    /// [`ToolContext::trace_context`].
    trace: std::collections::BTreeMap<String, String>,
}

/// One call across the plugin boundary, logged with its arguments previewed and secrets masked.
fn call_provider(
    tool: &RegisteredTool,
    args: Value,
    timeout: Duration,
    session: &str,
    cancelled: &AtomicBool,
    context: CallContext,
) -> ToolResult {
    let call_id = next_call_id();
    tracing::info!(
        tool = %tool.name,
        call = %call_id,
        args = %logging::preview_args(&args, &tool.spec.sensitive_params),
        "call"
    );
    let started = Instant::now();
    let ctx = ToolContext {
        session: session.to_owned(),
        call_id: call_id.clone(),
        timeout_ms: Some(timeout.as_millis() as u64),
        lockdown: context.lockdown,
        trace_context: context.trace,
        ..ToolContext::default()
    };
    let context_json = serde_json::to_string(&ctx).expect("a context is JSON");
    let Some(provider) = tool.plugin() else {
        return ToolResult::error(
            ToolErrorKind::Internal,
            format!("`{}` is not a plugin tool", tool.name),
        );
    };
    let answer = provider.instance().call(
        RStr::from(tool.name.tool.as_str()),
        RStr::from(args.to_string().as_str()),
        RStr::from(context_json.as_str()),
        cancelled,
    );
    let result = match answer {
        RResult::ROk(json) => {
            serde_json::from_str::<ToolResult>(json.as_str()).unwrap_or_else(|e| {
                ToolResult::error(
                    ToolErrorKind::Internal,
                    format!("provider `{}` returned an unreadable result: {e}", tool.name.provider),
                )
            })
        }
        RResult::RErr(e) => ToolResult::error(ToolErrorKind::Internal, logging::scrub(e.as_str())),
    };
    // A provider should mask what a server echoed, but the host does not rely on it.
    let result = scrub_result(result);
    tracing::info!(
        tool = %tool.name,
        call = %call_id,
        ms = started.elapsed().as_millis() as u64,
        is_error = result.is_error,
        "done"
    );
    result
}

/// `result` scrubbed of every registered credential in every encoding, and of every echoed
/// credential header: its text, its structured value and its metadata, success or error; an error
/// also cut to [`MAX_ERROR_BYTES`] per text (an argument quoted back whole — a 10 MB `owner` —
/// must not come back whole).
///
/// Every call's result passes here once, plugin or upstream, before anything else sees it: a
/// service answer that quotes the request (an issue body echoing its headers, a debug endpoint,
/// a proxy page) would otherwise hand the credential to the cache, the shared state, telemetry,
/// the log and every caller who runs on it.
fn scrub_result(mut result: ToolResult) -> ToolResult {
    for content in &mut result.content {
        use quiver_core::tool::Content;
        match content {
            Content::Text { text, annotations, meta } => {
                *text = logging::scrub(text);
                if result.is_error && text.len() > MAX_ERROR_BYTES {
                    *text = cut_middle(text, MAX_ERROR_BYTES);
                }
                for value in [annotations, meta].into_iter().flatten() {
                    logging::scrub_json(value);
                }
            }
            // An upstream's other blocks: every string, a resource's text and a link's URI
            // alike (a blob or an image is base64, which the masking covers too).
            Content::Image(block)
            | Content::Audio(block)
            | Content::Resource(block)
            | Content::ResourceLink(block) => {
                for value in block.values_mut() {
                    logging::scrub_json(value);
                }
            }
            _ => {}
        }
    }
    if let Some(structured) = result.structured.as_mut() {
        logging::scrub_json(structured);
    }
    for value in result.metadata.values_mut() {
        logging::scrub_json(value);
    }
    result
}

/// The longest error text a call returns; longer ones keep their start and end.
pub const MAX_ERROR_BYTES: usize = 4096;

/// `text` cut to about `max` bytes: its start and its end (where errors say what to do), with
/// what was left out named between them. Cuts fall on character boundaries.
fn cut_middle(text: &str, max: usize) -> String {
    let floor = |mut i: usize| {
        while !text.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let head = floor(max * 3 / 4);
    let tail = floor(text.len() - max / 4);
    format!(
        "{} … [{} bytes of this error left out] … {}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// What is wrong with a provider's `settings` by its plugin's `schema` (its config type's JSON
/// Schema): keys it does not have (when it takes no others) and values of the wrong kind, below
/// a minimum, or outside a list of choices; each as `(key, message)`.
fn section_problems(
    provider: &str,
    schema: &Value,
    settings: &std::collections::BTreeMap<String, toml::Value>,
) -> Vec<(String, String)> {
    // References inlined and null unions gone: each property's schema says its kind directly.
    let schema = quiver_core::client_schema::input_for_clients(schema);
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    let mut problems = Vec::new();
    for (key, value) in settings {
        let Some(property) = properties.get(key) else {
            if closed {
                let mut known: Vec<&str> = properties.keys().map(String::as_str).collect();
                let guess = closest_name(key, known.iter().copied())
                    .map(|k| format!(" — did you mean `{k}`?"))
                    .unwrap_or_default();
                known.sort_unstable();
                problems.push((
                    key.clone(),
                    format!(
                        "[providers.{provider}] has no setting `{key}`{guess} (it takes {})",
                        known.join(", ")
                    ),
                ));
            }
            continue;
        };
        if let Some(problem) = value_problem(property, value) {
            problems.push((key.clone(), format!("[providers.{provider}] {key} {problem}")));
        }
    }
    problems
}

/// Why `value` does not fit `property` (a JSON Schema without references), if it does not.
fn value_problem(property: &Value, value: &toml::Value) -> Option<String> {
    let kind = match value {
        toml::Value::String(_) | toml::Value::Datetime(_) => "string",
        toml::Value::Integer(_) => "integer",
        toml::Value::Float(_) => "number",
        toml::Value::Boolean(_) => "boolean",
        toml::Value::Array(_) => "array",
        toml::Value::Table(_) => "object",
    };
    let types: Vec<&str> = match property.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let fits = |t: &str| t == kind || (t == "number" && kind == "integer");
    if !types.is_empty() && !types.iter().any(|t| fits(t)) {
        let shown = value.to_string();
        return Some(format!("must be {} (not {shown})", article(types[0])));
    }
    if let (toml::Value::Integer(n), Some(min)) =
        (value, property.get("minimum").and_then(Value::as_f64))
    {
        if (*n as f64) < min {
            return Some(format!("must be at least {min} (not {n})"));
        }
    }
    let choices: Vec<&Value> = match (property.get("enum"), property.get("oneOf")) {
        (Some(Value::Array(values)), _) => values.iter().collect(),
        (None, Some(Value::Array(alternatives))) => {
            alternatives.iter().filter_map(|a| a.get("const")).collect()
        }
        _ => Vec::new(),
    };
    if let (false, toml::Value::String(text)) = (choices.is_empty(), value) {
        if !choices.iter().any(|c| c.as_str() == Some(text)) {
            let listed: Vec<String> = choices.iter().map(|c| c.to_string()).collect();
            return Some(format!("must be one of {} (not \"{text}\")", listed.join(", ")));
        }
    }
    None
}

fn article(kind: &str) -> &'static str {
    match kind {
        "string" => "a string",
        "integer" => "a whole number",
        "number" => "a number",
        "boolean" => "true or false",
        "array" => "a list",
        "object" => "a table",
        _ => "something else",
    }
}

/// The name among `choices` most like `typed` (Jaro–Winkler, the first on ties), when it is
/// close enough (above 0.8) to be what was meant.
fn closest_name<'c>(typed: &str, choices: impl IntoIterator<Item = &'c str>) -> Option<&'c str> {
    let mut best: Option<(&str, f64)> = None;
    for choice in choices {
        let similarity = strsim::jaro_winkler(typed, choice);
        if best.is_none_or(|(_, b)| similarity > b) {
            best = Some((choice, similarity));
        }
    }
    best.filter(|(_, similarity)| *similarity > 0.8).map(|(choice, _)| choice)
}

/// The tools of `groups` (all of them when `None`); an unknown group name is an error naming the
/// provider's groups, since a typo would otherwise hide every tool it meant to serve.
fn served_groups(tools: &[ToolSpec], groups: Option<&[String]>) -> Result<Vec<ToolSpec>, String> {
    let Some(groups) = groups else { return Ok(tools.to_vec()) };
    let known: std::collections::BTreeSet<&str> =
        tools.iter().filter_map(|t| t.group.as_deref()).collect();
    if let Some(unknown) = groups.iter().find(|g| !known.contains(g.as_str())) {
        let choices: Vec<&str> = known.iter().copied().collect();
        return Err(match closest_name(unknown, choices.iter().copied()) {
            Some(close) => format!(
                "no group `{unknown}` (did you mean `{close}`?); the groups are: {}",
                choices.join(", ")
            ),
            None => format!("no group `{unknown}`; the groups are: {}", choices.join(", ")),
        });
    }
    Ok(tools
        .iter()
        .filter(|t| t.group.as_ref().is_some_and(|g| groups.contains(g)))
        .cloned()
        .collect())
}

/// The JSON Schema of a plugin's settings, from its manifest (`{}` when it cannot be read).
fn module_config_schema(module: quiver_plugin_abi::PluginModuleRef) -> Value {
    let manifest = std::panic::catch_unwind(|| (module.manifest())()).ok();
    manifest
        .and_then(|m| m.into_result().ok())
        .and_then(|json| serde_json::from_str::<Value>(json.as_str()).ok())
        .and_then(|m| m.get("config_schema").cloned())
        .unwrap_or_else(|| Value::Object(Map::new()))
}

/// A provider instance from `module`, configured by `section` (its token read from the variable
/// the section names); a panic or a refusal of the plugin is the reason, scrubbed.
fn instantiate(
    module: quiver_plugin_abi::PluginModuleRef,
    provider: &str,
    section: &ProviderConfig,
    token: Option<&str>,
) -> Result<ProviderBox, String> {
    let config_json = provider_config_json(provider, section, token);
    let created = std::panic::catch_unwind(|| {
        (module.create())(RStr::from(config_json.to_string().as_str()), logging::plugin_sink())
    })
    .map_err(|_| "the plugin's root module has no create function".to_owned())?;
    created
        .into_result()
        .map_err(|e| format!("failed to initialise: {}", logging::scrub(e.as_str())))
}

/// The JSON a provider is created from: its `[providers.NAME]` keys, `token_env`, and `token` —
/// `signed_in` (a user's account), else from that variable when it is set, else a `token`
/// written in the config. The token is registered as a secret, so no log line shows it.
fn provider_config_json(
    provider: &str,
    section: &ProviderConfig,
    signed_in: Option<&str>,
) -> Value {
    let mut json = serde_json::to_value(&section.settings)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    let token_env = section.token_env(provider);
    let token = match signed_in {
        Some(token) => Some(token.to_owned()),
        None => std::env::var(&token_env).ok().filter(|t| !t.trim().is_empty()),
    };
    if let Some(token) = token {
        json.insert("token".into(), Value::String(token));
    }
    if let Some(token) = json.get("token").and_then(Value::as_str) {
        // Basic auth (Jira Cloud) sends base64(user:token): mask that form too.
        let user = ["email", "username", "user"]
            .iter()
            .find_map(|key| json.get(*key).and_then(Value::as_str));
        logging::register_credential(token, user);
    }
    json.insert("token_env".into(), Value::String(token_env));
    Value::Object(json)
}

/// How to sign in to `auth = "oauth"` upstream `config`, as its metadata says.
async fn discover_upstream(
    config: &crate::upstream::UpstreamConfig,
    http: &reqwest::Client,
) -> Result<crate::mcp_auth::Discovered, String> {
    let name = &config.name;
    let url = config.url.as_deref().ok_or_else(|| format!("upstream `{name}` has no url"))?;
    crate::mcp_auth::discover(http, url).await
}

/// The scopes quiver asks an upstream for: the configured ones, else those its metadata names.
fn upstream_scopes(
    config: &crate::upstream::UpstreamConfig,
    discovered: &crate::mcp_auth::Discovered,
) -> Vec<String> {
    config
        .oauth
        .as_ref()
        .and_then(|o| o.scopes.clone())
        .unwrap_or_else(|| discovered.scopes.clone())
}

/// An `auth = "oauth"` upstream's app from what its metadata said: its client the one
/// `registered` (dynamically), else the configured one — or none, which serves for refreshing
/// grants, as each names the client it was issued to.
fn upstream_app_of(
    config: &crate::upstream::UpstreamConfig,
    discovered: &crate::mcp_auth::Discovered,
    registered: Option<(String, Option<String>)>,
) -> Result<crate::accounts::OAuthApp, String> {
    let name = &config.name;
    let oauth = config.oauth.clone().unwrap_or_default();
    let (client_id, secret, dynamic) = match registered {
        Some((client_id, secret)) => (client_id, secret, true),
        None => {
            let secret = configured_secret(name, &oauth)?;
            (oauth.client_id.clone().unwrap_or_default(), secret, oauth.client_id.is_none())
        }
    };
    let scopes = upstream_scopes(config, discovered);
    Ok(crate::accounts::OAuthApp::for_upstream(
        name, discovered, client_id, secret, scopes, dynamic,
    ))
}

/// The secret of an upstream's configured client, from its variable.
fn configured_secret(
    name: &str,
    oauth: &crate::mcp_auth::UpstreamOAuthConfig,
) -> Result<Option<String>, String> {
    let Some(variable) = &oauth.client_secret_env else { return Ok(None) };
    logging::secret_from_env(variable).map(Some).ok_or_else(|| {
        format!(
            "[upstreams.oauth] of `{name}`: client_secret_env names {variable}, which is not set"
        )
    })
}

fn next_call_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("c{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A tool's spec under its qualified name, as `quiver tools list --json` prints it.
pub fn describe(tool: &RegisteredTool) -> Value {
    let ToolSpec { group, description, input_schema, output_schema, .. } = &tool.spec;
    let ToolName { provider, .. } = &tool.name;
    let mut out = serde_json::json!({
        "name": tool.name.to_string(),
        "mcp_name": tool.name.mcp_name(),
        "provider": provider,
        "description": description,
        "input_schema": input_schema,
    });
    if let Some(group) = group {
        out["group"] = Value::String(group.clone());
    }
    if let Some(schema) = output_schema {
        out["output_schema"] = schema.clone();
    }
    out
}
