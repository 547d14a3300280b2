//! Users' own accounts of the services, signed in with OAuth: a team server's users act as
//! themselves without the operator handling their tokens.
//!
//! - **Sign-in.** [`Accounts::sign_in_link`] gives a one-time link to `/connect/NAME` bound to
//!   the user (a ticket kept [`SIGN_IN_TTL`]); [`Accounts::authorize`] turns its opening into the
//!   service's authorization URL (authorization code with PKCE, a fresh `state`, and a cookie
//!   binding the browser that opened it); [`Accounts::finish`] takes the callback's `code`
//!   once, exchanges it, asks the service who the token is for, and keeps the account. Tickets
//!   and states live in the state backend, so the callback may reach any replica.
//! - **At rest.** A user's accounts at one service are one record, sealed with
//!   XChaCha20-Poly1305 under `[accounts] key_env` with the user and the service as associated
//!   data (a record copied to another user does not open): in Redis with `[state] backend =
//!   "redis"`, else in a file per user and service under `$QUIVER_DATA_DIR/accounts/`, which
//!   `quiver users disconnect` can change while a server runs.
//! - **Use.** [`Accounts::credential`] gives the token a call goes out with, refreshed when it
//!   is within `refresh_before_s` of expiring — one refresh in flight per account across
//!   replicas ([`crate::state::StateStore::claim`]); the others wait for its result. A refresh
//!   the service refuses (`invalid_grant`) forgets the account: the next call asks to sign in.
//!
//! No token is ever in an error, a log line or a `Debug`: each is registered as a secret the
//! moment it is read, and [`Grant`]'s `Debug` masks them.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit, OsRng, Payload};
use chacha20poly1305::{AeadCore, XChaCha20Poly1305, XNonce};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RefreshToken, Scope, TokenResponse, TokenUrl,
};
use quiver_core::manifest::OAuthEndpoints;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::state::StateStore;

/// How long a sign-in link, and the authorization it starts, may take.
pub const SIGN_IN_TTL: Duration = Duration::from_secs(15 * 60);

/// How long one refresh may hold its account's claim before another replica may try.
const REFRESH_CLAIM: Duration = Duration::from_secs(30);

/// The cookie that binds a sign-in's callback to the browser that opened its link.
pub const BROWSER_COOKIE: &str = "quiver_sign_in";

/// `[accounts]`: where users' own service accounts are kept, and how they are used.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccountsConfig {
    /// The variable holding the key tokens are sealed with: 32 bytes, as 64 hex digits or
    /// base64 (`openssl rand -hex 32`). Without it nobody can sign in.
    pub key_env: String,
    /// How long a call that asked its user to sign in waits for them to finish, in seconds.
    pub sign_in_wait_s: u64,
    /// A token is refreshed when it expires within this many seconds.
    pub refresh_before_s: u64,
    /// Where accounts are kept without Redis (default `$QUIVER_DATA_DIR/accounts`).
    pub directory: Option<PathBuf>,
    /// How a client that can open links is asked to sign in: `ask` (URL elicitation, the
    /// call waits or is sent again) or `error` (the URL-elicitation-required error, -32042).
    pub sign_in: SignInPrompt,
}

/// `[accounts] sign_in`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignInPrompt {
    /// URL elicitation.
    #[default]
    Ask,
    /// The URL-elicitation-required error.
    Error,
}

impl Default for AccountsConfig {
    fn default() -> Self {
        Self {
            key_env: "QUIVER_ACCOUNTS_KEY".into(),
            sign_in_wait_s: 300,
            refresh_before_s: 120,
            directory: None,
            sign_in: SignInPrompt::Ask,
        }
    }
}

impl AccountsConfig {
    /// Where accounts are kept without Redis.
    pub fn resolved_directory(&self) -> PathBuf {
        self.directory.clone().unwrap_or_else(|| crate::config::data_dir().join("accounts"))
    }
}

/// `[providers.NAME.oauth]`: the OAuth app users sign in to the service through. The URLs come
/// from the provider; each may be replaced here (a GitHub Enterprise Server, say).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderOAuthConfig {
    /// The app's client id.
    pub client_id: String,
    /// The variable holding the app's client secret (none: a public client, PKCE alone).
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// Scopes to ask for (default: the provider's).
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
    /// The authorization URL (default: the provider's).
    #[serde(default)]
    pub authorize_url: Option<String>,
    /// The token URL (default: the provider's).
    #[serde(default)]
    pub token_url: Option<String>,
    /// The RFC 7009 revocation URL (default: the provider's, if it has one).
    #[serde(default)]
    pub revoke_url: Option<String>,
    /// Where the token's account is asked for (default: the provider's).
    #[serde(default)]
    pub identity_url: Option<String>,
    /// The JSON pointer naming the account in that answer (default: the provider's).
    #[serde(default)]
    pub identity_pointer: Option<String>,
}

/// One provider's OAuth app, its URLs resolved.
#[derive(Debug, Clone)]
pub struct OAuthApp {
    /// The provider.
    pub provider: String,
    client_id: String,
    client_secret: Option<String>,
    scopes: Vec<String>,
    authorize_url: String,
    token_url: String,
    revoke_url: Option<String>,
    /// Where the token's account is asked for; none (an upstream MCP server): the account is
    /// the quiver user's own name.
    identity_url: Option<String>,
    identity_pointer: String,
    /// Settings a provider instance calling with a signed-in token is created with.
    pub settings: serde_json::Map<String, Value>,
    /// The RFC 8707 resource every request names (an upstream MCP server's URL).
    resource: Option<String>,
    /// The client was registered dynamically: each grant keeps it, as a later registration
    /// (another replica's, another redirect's) is another client.
    dynamic: bool,
}

impl OAuthApp {
    /// `config` over the provider's `endpoints`, braces filled from `settings` (the provider's
    /// section) and then the endpoints' defaults. An unfilled brace or a missing URL is an
    /// error naming the key to set.
    pub fn resolve(
        provider: &str,
        config: &ProviderOAuthConfig,
        endpoints: Option<&OAuthEndpoints>,
        settings: &BTreeMap<String, toml::Value>,
    ) -> Result<Self, String> {
        let fill = |key: &str, given: &Option<String>, default: Option<&String>| {
            let template = given.as_ref().or(default).ok_or_else(|| {
                format!(
                    "[providers.{provider}.oauth] needs `{key}`: the provider does not know the \
                     service's"
                )
            })?;
            fill_braces(template, settings, endpoints.map(|e| &e.defaults)).map_err(|brace| {
                format!(
                    "[providers.{provider}.oauth] `{key}` names {{{brace}}}, which \
                     [providers.{provider}] does not set; set it, or give the whole URL"
                )
            })
        };
        let client_secret = match &config.client_secret_env {
            None => None,
            Some(variable) => Some(crate::logging::secret_from_env(variable).ok_or_else(|| {
                format!(
                    "[providers.{provider}.oauth] client_secret_env names {variable}, which is \
                     not set; set it to the OAuth app's client secret"
                )
            })?),
        };
        if config.client_id.trim().is_empty() {
            return Err(format!(
                "[providers.{provider}.oauth] client_id is empty; set it to the OAuth app's id"
            ));
        }
        let revoke_url = match (&config.revoke_url, endpoints.and_then(|e| e.revoke_url.as_ref())) {
            (None, None) => None,
            (given, default) => Some(fill("revoke_url", given, default)?),
        };
        Ok(Self {
            provider: provider.to_owned(),
            client_id: config.client_id.clone(),
            client_secret,
            scopes: config
                .scopes
                .clone()
                .or_else(|| endpoints.map(|e| e.scopes.clone()))
                .unwrap_or_default(),
            authorize_url: fill(
                "authorize_url",
                &config.authorize_url,
                endpoints.map(|e| &e.authorize_url),
            )?,
            token_url: fill("token_url", &config.token_url, endpoints.map(|e| &e.token_url))?,
            revoke_url,
            identity_url: Some(fill(
                "identity_url",
                &config.identity_url,
                endpoints.map(|e| &e.identity_url),
            )?),
            identity_pointer: config
                .identity_pointer
                .clone()
                .or_else(|| endpoints.map(|e| e.identity_pointer.clone()))
                .unwrap_or_else(|| "/login".into()),
            settings: endpoints.map(|e| e.settings.clone()).unwrap_or_default(),
            resource: None,
            dynamic: false,
        })
    }

    /// The app of an upstream MCP server, from what its metadata says
    /// ([`crate::mcp_auth::discover`]) and its client (configured, or registered dynamically).
    pub fn for_upstream(
        name: &str,
        discovered: &crate::mcp_auth::Discovered,
        client_id: String,
        client_secret: Option<String>,
        scopes: Vec<String>,
        dynamic: bool,
    ) -> Self {
        Self {
            provider: name.to_owned(),
            client_id,
            client_secret,
            scopes,
            authorize_url: discovered.authorize_url.clone(),
            token_url: discovered.token_url.clone(),
            revoke_url: discovered.revoke_url.clone(),
            identity_url: None,
            identity_pointer: String::new(),
            settings: serde_json::Map::new(),
            resource: Some(discovered.resource.clone()),
            dynamic,
        }
    }

    /// This app with the client a grant was issued to (its refresh must come from it).
    fn with_client_of(&self, grant: &Grant) -> Self {
        let mut app = self.clone();
        if let Some((id, secret)) = &grant.client {
            app.client_id = id.clone();
            app.client_secret = secret.clone();
        }
        app
    }

    /// The oauth2 client of this app, redirecting to `redirect`.
    fn client(
        &self,
        redirect: Option<&str>,
    ) -> Result<
        oauth2::basic::BasicClient<
            oauth2::EndpointSet,
            oauth2::EndpointNotSet,
            oauth2::EndpointNotSet,
            oauth2::EndpointNotSet,
            oauth2::EndpointSet,
        >,
        String,
    > {
        let bad = |what: &str, e: oauth2::url::ParseError| {
            format!("[providers.{}.oauth] {what} is not a URL: {e}", self.provider)
        };
        let mut client = oauth2::basic::BasicClient::new(ClientId::new(self.client_id.clone()))
            .set_auth_uri(
                AuthUrl::new(self.authorize_url.clone()).map_err(|e| bad("authorize_url", e))?,
            )
            .set_token_uri(TokenUrl::new(self.token_url.clone()).map_err(|e| bad("token_url", e))?)
            // In the body: what every service here accepts (GitHub and ClickUp document it).
            .set_auth_type(AuthType::RequestBody);
        if let Some(secret) = &self.client_secret {
            client = client.set_client_secret(ClientSecret::new(secret.clone()));
        }
        if let Some(redirect) = redirect {
            let url = RedirectUrl::new(redirect.to_owned()).map_err(|e| bad("the callback", e))?;
            client = client.set_redirect_uri(url);
        }
        Ok(client)
    }
}

/// `{name}` in `template` replaced by the setting `name` (or its default); the first brace
/// neither has, when one has no value.
fn fill_braces(
    template: &str,
    settings: &BTreeMap<String, toml::Value>,
    defaults: Option<&serde_json::Map<String, Value>>,
) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else { break };
        let name = &rest[open + 1..open + close];
        let value = settings
            .get(name)
            .and_then(|v| v.as_str().map(str::to_owned))
            .filter(|v| !v.trim().is_empty())
            .or_else(|| defaults?.get(name)?.as_str().map(str::to_owned))
            .ok_or_else(|| name.to_owned())?;
        out.push_str(&rest[..open]);
        out.push_str(value.trim_end_matches('/'));
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// One account of a user at a service, as kept (sealed).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    /// The account, as the service names it (`alice` on GitHub).
    pub account: String,
    /// This connection's id: a new sign-in gets a new one, so nothing cached for an earlier
    /// connection is served to this one.
    pub id: String,
    /// The access token.
    pub access_token: String,
    /// The refresh token, when the service gives one.
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// When the access token expires (ms since the epoch), when the service says.
    #[serde(default)]
    pub expires_at_ms: Option<u64>,
    /// The scopes granted, when the service says.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// When the user signed in (ms since the epoch).
    pub connected_at_ms: u64,
    /// The dynamically registered client it was issued to (id, secret), which refreshes it.
    #[serde(default)]
    pub client: Option<(String, Option<String>)>,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("account", &self.account)
            .field("id", &self.id)
            .field("access_token", &"***")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "***"))
            .field("expires_at_ms", &self.expires_at_ms)
            .field("scopes", &self.scopes)
            .field("client", &self.client.as_ref().map(|(id, _)| id))
            .finish()
    }
}

impl Grant {
    /// Whether the access token expires within `margin`.
    fn expires_within(&self, margin: Duration) -> bool {
        self.expires_at_ms.is_some_and(|at| at <= now_ms().saturating_add(millis(margin)))
    }
}

/// The token a call goes out with, and whose it is.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct AccountToken {
    /// The account at the service.
    pub account: String,
    /// The connection's id ([`Grant::id`]).
    pub grant: String,
    /// The access token.
    pub token: String,
    /// Chosen by one of the user's `accounts` rules (else: their default account).
    pub by_rule: bool,
}

impl std::fmt::Debug for AccountToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountToken")
            .field("account", &self.account)
            .field("grant", &self.grant)
            .field("token", &"***")
            .finish()
    }
}

/// What a call gets when its user has no account at the service yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInLink {
    /// Where the user signs in.
    pub url: String,
    /// An id for the elicitation that asks them to open it.
    pub id: String,
}

/// Why a sign-in step failed, for the page the browser shows (never a token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInError {
    /// The HTTP status the page answers with.
    pub status: u16,
    /// What went wrong and what to do.
    pub message: String,
}

impl SignInError {
    fn new(status: u16, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }
}

/// The browser's next step after opening a sign-in link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// The service's authorization URL, to redirect to.
    pub location: String,
    /// The value of [`BROWSER_COOKIE`] the callback must come back with.
    pub cookie: String,
}

/// A sign-in in progress, between the link and the callback.
#[derive(Serialize, Deserialize)]
struct Pending {
    user: String,
    provider: String,
    #[serde(default)]
    verifier: String,
    #[serde(default)]
    browser_sha256: String,
    /// The link's id, under which the account it connected is noted for the waiting call.
    #[serde(default)]
    link: String,
}

/// Users' accounts: sign-in, sealed storage, refresh, disconnect.
pub struct Accounts {
    /// The apps, by provider or upstream: configured ones from the start, an upstream's when
    /// its authorization server has been discovered ([`Accounts::add_app`]).
    apps: std::sync::RwLock<BTreeMap<String, Arc<OAuthApp>>>,
    /// Why a configured app could not be used, by provider.
    problems: BTreeMap<String, String>,
    config: AccountsConfig,
    sealer: Result<Sealer, String>,
    state: Arc<dyn StateStore>,
    /// Accounts in files (no Redis) or in the state backend.
    in_state: bool,
    /// [`crate::mcp_auth::client`]: no redirects.
    http: reqwest::Client,
    /// The base URL `/connect/…` is reached by (a server's public URL); none outside a server.
    public_base: Mutex<Option<String>>,
    /// One refresh at a time per account in this process (across replicas: the claim).
    refreshing: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Woken when an account is connected here, for calls waiting on a sign-in.
    connected: tokio::sync::Notify,
}

impl std::fmt::Debug for Accounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accounts").field("providers", &self.providers()).finish()
    }
}

impl Accounts {
    /// The accounts of `apps` (resolved per provider, or why not), sealed with the key
    /// `config` names, kept in `state` when it is shared (`in_state`), else in files.
    pub fn new(
        apps: BTreeMap<String, Result<OAuthApp, String>>,
        config: &AccountsConfig,
        state: Arc<dyn StateStore>,
        in_state: bool,
    ) -> Self {
        let mut resolved = BTreeMap::new();
        let mut problems = BTreeMap::new();
        for (provider, app) in apps {
            match app {
                Ok(app) => {
                    resolved.insert(provider, Arc::new(app));
                }
                Err(e) => {
                    problems.insert(provider, e);
                }
            }
        }
        let http = crate::mcp_auth::client();
        Self {
            apps: std::sync::RwLock::new(resolved),
            problems,
            config: config.clone(),
            sealer: Sealer::from_env(&config.key_env),
            state,
            in_state,
            http,
            public_base: Mutex::new(None),
            refreshing: Mutex::new(HashMap::new()),
            connected: tokio::sync::Notify::new(),
        }
    }

    /// Whether users sign in to `provider` themselves.
    pub fn signs_in(&self, provider: &str) -> bool {
        self.apps_now().contains_key(provider)
    }

    fn apps_now(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<OAuthApp>>> {
        self.apps.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Users sign in to `app` too (an upstream's, once its authorization server is known).
    pub fn add_app(&self, app: OAuthApp) {
        let mut apps = self.apps.write().unwrap_or_else(|e| e.into_inner());
        apps.insert(app.provider.clone(), Arc::new(app));
    }

    /// The providers users sign in to.
    pub fn providers(&self) -> Vec<String> {
        self.apps_now().keys().cloned().collect()
    }

    /// The app of `provider`.
    pub fn app(&self, provider: &str) -> Option<Arc<OAuthApp>> {
        self.apps_now().get(provider).cloned()
    }

    /// What keeps sign-in from working, per provider (for `doctor`): a configured app that
    /// could not be resolved, or no sealing key.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut problems: Vec<_> =
            self.problems.iter().map(|(p, e)| (p.clone(), e.clone())).collect();
        if let (Err(e), false) = (&self.sealer, self.apps_now().is_empty()) {
            problems.extend(self.providers().into_iter().map(|p| (p, e.clone())));
        }
        problems
    }

    /// The URL `/connect/…` pages are reached by: a server sets it from its public URL.
    pub fn set_public_base(&self, base: &str) {
        *self.public_base.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(base.trim_end_matches('/').to_owned());
    }

    fn public_base(&self) -> Option<String> {
        self.public_base.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Where the service sends a user back after signing in to `provider` at this server.
    pub fn callback_for(&self, provider: &str) -> Option<String> {
        self.callback_url(provider).ok()
    }

    fn callback_url(&self, provider: &str) -> Result<String, SignInError> {
        let base = self.public_base().ok_or_else(|| {
            SignInError::new(500, "sign-in works only through `quiver serve --http`")
        })?;
        Ok(format!("{base}/connect/{provider}/callback"))
    }

    /// Whether a client that can open links gets the URL-elicitation-required error.
    pub fn prompt_is_error(&self) -> bool {
        self.config.sign_in == SignInPrompt::Error
    }

    /// How long a call waits for its user to sign in.
    pub fn sign_in_wait(&self) -> Duration {
        Duration::from_secs(self.config.sign_in_wait_s)
    }

    /// A one-time link `user` opens to connect an account of `provider`.
    pub async fn sign_in_link(&self, user: &str, provider: &str) -> Result<SignInLink, String> {
        if !self.signs_in(provider) {
            return Err(format!("`{provider}` has no [providers.{provider}.oauth] app"));
        }
        if let Err(e) = &self.sealer {
            return Err(e.clone());
        }
        let base = self
            .public_base()
            .ok_or_else(|| "sign-in works only through `quiver serve --http`".to_owned())?;
        let ticket = random_token();
        let id = hex::encode(&Sha256::digest(ticket.as_bytes())[..16]);
        let pending = Pending {
            user: user.to_owned(),
            provider: provider.to_owned(),
            verifier: String::new(),
            browser_sha256: String::new(),
            link: id.clone(),
        };
        let value = serde_json::to_string(&pending).map_err(|e| e.to_string())?;
        self.state.record_put(&ticket_key(&ticket), &value, Some(SIGN_IN_TTL)).await?;
        Ok(SignInLink { url: format!("{base}/connect/{provider}?ticket={ticket}"), id })
    }

    /// The browser opened a sign-in link: where to send it (the service's authorization URL,
    /// with PKCE and a fresh `state`), and the cookie that binds the callback to it.
    pub async fn authorize(
        &self,
        provider: &str,
        ticket: &str,
    ) -> Result<Authorization, SignInError> {
        let app = self
            .app(provider)
            .ok_or_else(|| SignInError::new(404, format!("no sign-in for `{provider}` here")))?;
        let used = || {
            SignInError::new(
                400,
                "this sign-in link was used already or has expired; ask your agent to make the \
                 call again for a new one",
            )
        };
        let taken = self.state.record_take(&ticket_key(ticket)).await.map_err(unavailable)?;
        let mut pending: Pending =
            taken.and_then(|t| serde_json::from_str(&t).ok()).ok_or_else(used)?;
        if pending.provider != provider {
            return Err(used());
        }
        let redirect = self.callback_url(provider)?;
        let client = app.client(Some(&redirect)).map_err(|e| SignInError::new(500, e))?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let state = random_token();
        let mut request = client
            .authorize_url(|| CsrfToken::new(state.clone()))
            .add_scopes(app.scopes.iter().cloned().map(Scope::new))
            .set_pkce_challenge(challenge);
        if let Some(resource) = &app.resource {
            request = request.add_extra_param("resource", resource.clone());
        }
        let (location, _) = request.url();
        let browser = random_token();
        pending.verifier = verifier.secret().clone();
        pending.browser_sha256 = hex::encode(Sha256::digest(browser.as_bytes()));
        let value =
            serde_json::to_string(&pending).map_err(|e| SignInError::new(500, e.to_string()))?;
        self.state
            .record_put(&state_key(&state), &value, Some(SIGN_IN_TTL))
            .await
            .map_err(unavailable)?;
        Ok(Authorization { location: location.to_string(), cookie: browser })
    }

    /// The service sent the browser back with `code` for `state`: exchanges it (once), asks
    /// who the token is for, and keeps the account. Gives (user, account).
    pub async fn finish(
        &self,
        provider: &str,
        code: &str,
        state: &str,
        browser: Option<&str>,
    ) -> Result<(String, String), SignInError> {
        let app = self
            .app(provider)
            .ok_or_else(|| SignInError::new(404, format!("no sign-in for `{provider}` here")))?;
        let unknown = || {
            SignInError::new(
                400,
                "this sign-in is unknown, finished already or expired; ask your agent to make \
                 the call again for a new link",
            )
        };
        let taken = self.state.record_take(&state_key(state)).await.map_err(unavailable)?;
        let pending: Pending =
            taken.and_then(|t| serde_json::from_str(&t).ok()).ok_or_else(unknown)?;
        if pending.provider != provider {
            return Err(unknown());
        }
        let same_browser = browser
            .is_some_and(|b| hex::encode(Sha256::digest(b.as_bytes())) == pending.browser_sha256);
        if !same_browser {
            return Err(SignInError::new(
                400,
                "this sign-in was started in another browser (or its cookie was blocked); open \
                 the link from your agent again in this one",
            ));
        }
        let client = app
            .client(Some(&self.callback_url(provider)?))
            .map_err(|e| SignInError::new(500, e))?;
        let mut exchange = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier));
        if let Some(resource) = &app.resource {
            exchange = exchange.add_extra_param("resource", resource.clone());
        }
        let tokens = exchange.request_async(&self.http).await.map_err(|e| {
            SignInError::new(502, format!("{provider} did not give a token: {}", describe(&e)))
        })?;
        let grant = self
            .grant_from(&app, &tokens, None, &account_name(&pending.user))
            .await
            .map_err(|e| SignInError::new(502, e))?;
        let account = grant.account.clone();
        self.keep(&pending.user, provider, grant).await.map_err(unavailable)?;
        if !pending.link.is_empty() {
            let done = done_key(&pending.link);
            let _ = self.state.record_put(&done, &account, Some(SIGN_IN_TTL)).await;
        }
        self.connected.notify_waiters();
        tracing::info!(user = %pending.user, provider, account = %account, "account connected");
        Ok((pending.user, account))
    }

    /// A grant of `tokens`, its account asked of the service (or `previous`'s, on a refresh).
    async fn grant_from(
        &self,
        app: &OAuthApp,
        tokens: &oauth2::basic::BasicTokenResponse,
        previous: Option<&Grant>,
        user_account: &str,
    ) -> Result<Grant, String> {
        let access_token = tokens.access_token().secret().clone();
        crate::logging::register_credential(&access_token, None);
        let refresh_token = tokens
            .refresh_token()
            .map(|t| t.secret().clone())
            .or_else(|| previous.and_then(|p| p.refresh_token.clone()));
        if let Some(refresh) = &refresh_token {
            crate::logging::register_credential(refresh, None);
        }
        let account = match (previous, &app.identity_url) {
            (Some(previous), _) => previous.account.clone(),
            (None, Some(_)) => self.identity(app, &access_token).await?,
            // An upstream MCP server says nothing of whose the token is: the user's own.
            (None, None) => user_account.to_owned(),
        };
        Ok(Grant {
            account,
            id: previous.map_or_else(random_token, |p| p.id.clone()),
            access_token,
            refresh_token,
            expires_at_ms: tokens.expires_in().map(|d| now_ms().saturating_add(millis(d))),
            scopes: tokens
                .scopes()
                .map(|s| s.iter().map(|s| s.to_string()).collect())
                .or_else(|| previous.map(|p| p.scopes.clone()))
                .unwrap_or_default(),
            connected_at_ms: previous.map_or_else(now_ms, |p| p.connected_at_ms),
            client: match previous {
                Some(previous) => previous.client.clone(),
                None if app.dynamic => Some((app.client_id.clone(), app.client_secret.clone())),
                None => None,
            },
        })
    }

    /// The account `token` is for, as the service's identity URL says.
    async fn identity(&self, app: &OAuthApp, token: &str) -> Result<String, String> {
        let provider = &app.provider;
        let identity_url = app.identity_url.as_deref().unwrap_or_default();
        let response = self
            .http
            .get(identity_url)
            .bearer_auth(token)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| {
                format!("{provider} did not say whose the token is: {}", e.without_url())
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!(
                "{provider} did not say whose the token is: {identity_url} answered {status}"
            ));
        }
        let body: Value = response.json().await.map_err(|e| {
            format!("{provider}'s identity answer is not JSON: {}", e.without_url())
        })?;
        let account = body.pointer(&app.identity_pointer).and_then(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        });
        account.filter(|a| !a.is_empty()).ok_or_else(|| {
            format!(
                "{provider}'s identity answer has no `{}`; set [providers.{provider}.oauth] \
                 identity_pointer",
                app.identity_pointer
            )
        })
    }

    /// `grant` kept as `user`'s account at `provider`, in place of one of the same account.
    async fn keep(&self, user: &str, provider: &str, grant: Grant) -> Result<(), String> {
        let mut grants = self.grants(user, provider).await?;
        grants.retain(|g| g.account != grant.account);
        grants.push(grant);
        self.store(user, provider, &grants).await
    }

    /// The client quiver registered at `upstream`'s authorization server for `redirect`, as
    /// kept by [`Accounts::remember_client`].
    pub async fn registered_client(
        &self,
        upstream: &str,
        redirect: &str,
    ) -> Result<Option<(String, Option<String>)>, String> {
        let (user, name) = client_record(upstream, redirect);
        let Some(plain) = self.opened(&user, &name).await? else { return Ok(None) };
        let client: (String, Option<String>) = serde_json::from_slice(&plain)
            .map_err(|e| format!("the registration for `{upstream}` is unreadable: {e}"))?;
        if let Some(secret) = &client.1 {
            crate::logging::register_secret(secret);
        }
        Ok(Some(client))
    }

    /// Keeps the client quiver registered at `upstream`'s authorization server for `redirect`
    /// (sealed, as accounts are), so a restart does not register another.
    pub async fn remember_client(
        &self,
        upstream: &str,
        redirect: &str,
        client: &(String, Option<String>),
    ) -> Result<(), String> {
        let (user, name) = client_record(upstream, redirect);
        let plain = serde_json::to_vec(client).map_err(|e| e.to_string())?;
        self.seal_and_keep(&user, &name, &plain).await
    }

    /// The plain text of the record of (`user`, `provider`), if there is one.
    async fn opened(&self, user: &str, provider: &str) -> Result<Option<Vec<u8>>, String> {
        let sealed = if self.in_state {
            self.state.record_get(&account_key(user, provider)).await?
        } else {
            match std::fs::read_to_string(self.file_of(user, provider)) {
                Ok(text) => Some(text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(format!("cannot read {user}'s {provider} record: {e}")),
            }
        };
        let Some(sealed) = sealed else { return Ok(None) };
        let sealer = self.sealer.as_ref().map_err(Clone::clone)?;
        sealer.open(sealed.trim(), &associated(user, provider)).map(Some).ok_or_else(|| {
            format!(
                "{user}'s {provider} record does not open with the key in {} (changed, or copied \
                 from another user); `quiver users disconnect {user} {provider}` and sign in again",
                self.config.key_env
            )
        })
    }

    /// `plain` sealed as the record of (`user`, `provider`).
    async fn seal_and_keep(&self, user: &str, provider: &str, plain: &[u8]) -> Result<(), String> {
        let sealer = self.sealer.as_ref().map_err(Clone::clone)?;
        let sealed = sealer.seal(plain, &associated(user, provider));
        if self.in_state {
            return self.state.record_put(&account_key(user, provider), &sealed, None).await;
        }
        let path = self.file_of(user, provider);
        let write = || -> std::io::Result<()> {
            let dir = path.parent().expect("a user's folder");
            std::fs::create_dir_all(dir)?;
            let partial = path.with_extension(format!("partial-{}", random_token()));
            std::fs::write(&partial, sealed.as_bytes())?;
            std::fs::rename(&partial, &path)
        };
        write().map_err(|e| format!("cannot keep {user}'s {provider} record: {e}"))
    }

    /// `user`'s accounts at `provider`, first connected first.
    pub async fn grants(&self, user: &str, provider: &str) -> Result<Vec<Grant>, String> {
        let Some(plain) = self.opened(user, provider).await? else { return Ok(Vec::new()) };
        let grants: Vec<Grant> = serde_json::from_slice(&plain)
            .map_err(|e| format!("{user}'s {provider} accounts are unreadable: {e}"))?;
        for grant in &grants {
            crate::logging::register_credential(&grant.access_token, None);
            if let Some(refresh) = &grant.refresh_token {
                crate::logging::register_credential(refresh, None);
            }
        }
        Ok(grants)
    }

    async fn store(&self, user: &str, provider: &str, grants: &[Grant]) -> Result<(), String> {
        if grants.is_empty() {
            return self.remove(user, provider).await;
        }
        let plain = serde_json::to_vec(grants).map_err(|e| e.to_string())?;
        self.seal_and_keep(user, provider, &plain).await
    }

    async fn remove(&self, user: &str, provider: &str) -> Result<(), String> {
        if self.in_state {
            return self.state.record_delete(&account_key(user, provider)).await;
        }
        match std::fs::remove_file(self.file_of(user, provider)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(format!("cannot forget {user}'s {provider} accounts: {e}"))
            }
            _ => Ok(()),
        }
    }

    fn file_of(&self, user: &str, provider: &str) -> PathBuf {
        let who = hex::encode(&Sha256::digest(user.as_bytes())[..16]);
        self.config.resolved_directory().join(who).join(format!("{provider}.sealed"))
    }

    /// The token `user`'s calls to `provider` go out with — of `wanted` (an account a rule
    /// chose), else of their default (the first they connected) — refreshed first when it is
    /// about to expire; `None` when that account is not connected (or its grant was revoked).
    pub async fn credential(
        &self,
        user: &str,
        provider: &str,
        wanted: Option<&str>,
    ) -> Result<Option<AccountToken>, String> {
        let Some(app) = self.app(provider) else { return Ok(None) };
        self.credential_with(&app, user, wanted).await
    }

    /// [`Accounts::credential`] through `app` (an upstream's, for its own connection, before
    /// any user signed in through the server).
    pub async fn credential_with(
        &self,
        app: &OAuthApp,
        user: &str,
        wanted: Option<&str>,
    ) -> Result<Option<AccountToken>, String> {
        let provider = app.provider.as_str();
        let grants = self.grants(user, provider).await?;
        let chosen = match wanted {
            // Service account names (GitHub logins) are not case-sensitive.
            Some(wanted) => grants.into_iter().find(|g| g.account.eq_ignore_ascii_case(wanted)),
            None => grants.into_iter().next(),
        };
        let Some(grant) = chosen else { return Ok(None) };
        let margin = Duration::from_secs(self.config.refresh_before_s);
        let grant = if grant.expires_within(margin) {
            match self.refreshed(app, user, grant, margin).await? {
                Some(grant) => grant,
                None => return Ok(None),
            }
        } else {
            grant
        };
        Ok(Some(AccountToken {
            account: grant.account,
            grant: grant.id,
            token: grant.access_token,
            by_rule: wanted.is_some(),
        }))
    }

    /// `grant` refreshed — by this call, or by whoever held the account's claim — or `None`
    /// when the service refused the refresh token (the account is forgotten).
    async fn refreshed(
        &self,
        app: &OAuthApp,
        user: &str,
        grant: Grant,
        margin: Duration,
    ) -> Result<Option<Grant>, String> {
        let provider = &app.provider;
        let lock_name = format!("{}:{}", account_key(user, provider), grant.account);
        let local = {
            let mut refreshing = self.refreshing.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(refreshing.entry(lock_name.clone()).or_default())
        };
        let _one_here = local.lock().await;
        let claim = format!("refresh:{lock_name}");
        let started = std::time::Instant::now();
        // The account as kept now, and whether it still needs this call's refresh: not when it
        // is fresh or when whoever held the claim refreshed it (a service may hand out tokens
        // shorter-lived than the margin: those are used, not refreshed again at once).
        let latest = || async {
            let grants = self.grants(user, provider).await?;
            Ok::<_, String>(grants.into_iter().find(|g| g.account == grant.account).map(|g| {
                let stale = g.expires_within(margin) && g.access_token == grant.access_token;
                (g, stale)
            }))
        };
        loop {
            match latest().await? {
                None => return Ok(None),
                Some((current, false)) => return Ok(Some(current)),
                Some((_, true)) => {}
            }
            if self.state.claim(&claim, REFRESH_CLAIM).await? {
                // Read again under the claim: another replica may have refreshed (and let go)
                // since the read above, and its refresh token is used up.
                let outcome = match latest().await {
                    Ok(Some((current, true))) => self.refresh_now(app, user, current).await,
                    Ok(current) => Ok(current.map(|(current, _)| current)),
                    Err(e) => Err(e),
                };
                let _ = self.state.record_delete(&claim).await;
                return outcome;
            }
            // A holder that died lets go when its claim lapses; then this one takes it.
            if started.elapsed() > REFRESH_CLAIM + Duration::from_secs(5) {
                return Err(format!(
                    "{user}'s {provider} token is being refreshed elsewhere and has not been \
                     for {} s; try again",
                    REFRESH_CLAIM.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn refresh_now(
        &self,
        app: &OAuthApp,
        user: &str,
        grant: Grant,
    ) -> Result<Option<Grant>, String> {
        let provider = &app.provider;
        let Some(refresh) = grant.refresh_token.clone() else {
            // Nothing to refresh with: the user signs in again once it has expired.
            if grant.expires_within(Duration::ZERO) {
                self.forget(user, provider, &grant.account).await?;
                return Ok(None);
            }
            return Ok(Some(grant));
        };
        let issuer = app.with_client_of(&grant);
        let client = issuer.client(None)?;
        let refresh = RefreshToken::new(refresh);
        let mut request = client.exchange_refresh_token(&refresh);
        if let Some(resource) = &app.resource {
            request = request.add_extra_param("resource", resource.clone());
        }
        let answer = request.request_async(&self.http).await;
        match answer {
            Ok(tokens) => {
                let renewed = self.grant_from(app, &tokens, Some(&grant), &grant.account).await?;
                self.keep(user, provider, renewed.clone()).await?;
                tracing::info!(user, provider, account = %grant.account, "token refreshed");
                Ok(Some(renewed))
            }
            Err(oauth2::RequestTokenError::ServerResponse(e))
                if *e.error() == oauth2::basic::BasicErrorResponseType::InvalidGrant =>
            {
                tracing::warn!(
                    user,
                    provider,
                    account = %grant.account,
                    "the service refused the refresh token (invalid_grant): the account is \
                     forgotten and the user asked to sign in again"
                );
                self.forget(user, provider, &grant.account).await?;
                Ok(None)
            }
            Err(e) => Err(format!("{provider} did not refresh {user}'s token: {}", describe(&e))),
        }
    }

    /// Forgets the connection `grant` of `user` at `provider` (the service refused its token):
    /// whether it was there.
    pub async fn forget_grant(
        &self,
        user: &str,
        provider: &str,
        grant: &str,
    ) -> Result<bool, String> {
        let forgotten = self.forget_where(user, provider, |g| g.id == grant).await?;
        if forgotten {
            tracing::warn!(
                user,
                provider,
                "the service refused a signed-in token (401): the account is forgotten and the \
                 user asked to sign in again"
            );
        }
        Ok(forgotten)
    }

    /// Forgets `user`'s `account` at `provider`.
    async fn forget(&self, user: &str, provider: &str, account: &str) -> Result<(), String> {
        self.forget_where(user, provider, |g| g.account == account).await.map(|_| ())
    }

    /// Forgets `user`'s accounts at `provider` that `gone` picks: whether there was one.
    async fn forget_where(
        &self,
        user: &str,
        provider: &str,
        gone: impl Fn(&Grant) -> bool,
    ) -> Result<bool, String> {
        let mut grants = self.grants(user, provider).await?;
        let before = grants.len();
        grants.retain(|g| !gone(g));
        if grants.len() == before {
            return Ok(false);
        }
        self.store(user, provider, &grants).await?;
        Ok(true)
    }

    /// Disconnects `user` from `provider` (every provider when `None`): their tokens are
    /// revoked where the service allows and forgotten. Gives (provider, account) of each one.
    pub async fn disconnect(
        &self,
        user: &str,
        provider: Option<&str>,
    ) -> Result<Vec<(String, String)>, String> {
        let providers: Vec<String> = match provider {
            Some(p) => vec![p.to_owned()],
            None => self.providers(),
        };
        let mut gone = Vec::new();
        for provider in providers {
            // A record that does not open is forgotten all the same.
            let grants = self.grants(user, &provider).await.unwrap_or_default();
            if let Some(app) = self.app(&provider) {
                for grant in &grants {
                    self.revoke(&app, grant).await;
                }
            }
            self.remove(user, &provider).await?;
            gone.extend(grants.into_iter().map(|g| (provider.clone(), g.account)));
        }
        Ok(gone)
    }

    /// Revokes `grant` at the service, when it has RFC 7009 revocation (by its refresh token,
    /// which takes the access tokens with it, else the access token); a failure is logged. Over
    /// HTTPS only, but for a loopback address (RFC 8252's exception), as the token travels in
    /// the body.
    async fn revoke(&self, app: &OAuthApp, grant: &Grant) {
        let Some(url) = &app.revoke_url else { return };
        let secure = reqwest::Url::parse(url).is_ok_and(|u| {
            u.scheme() == "https"
                || u.host_str().is_some_and(|h| {
                    h == "localhost"
                        || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
                })
        });
        if !secure {
            tracing::warn!(
                provider = %app.provider,
                "revoke_url is not HTTPS: the token was not sent there, only forgotten here"
            );
            return;
        }
        let (token, hint) = match &grant.refresh_token {
            Some(refresh) => (refresh.as_str(), "refresh_token"),
            None => (grant.access_token.as_str(), "access_token"),
        };
        let app = app.with_client_of(grant);
        let mut form =
            vec![("token", token), ("token_type_hint", hint), ("client_id", &app.client_id)];
        if let Some(secret) = &app.client_secret {
            form.push(("client_secret", secret));
        }
        let answer = self.http.post(url).form(&form).send().await;
        let failure = match answer {
            Ok(response) if response.status().is_success() => return,
            Ok(response) => format!("it answered {}", response.status()),
            Err(e) => format!("the request failed: {}", e.without_url()),
        };
        tracing::warn!(
            provider = %app.provider,
            account = %grant.account,
            "the service did not revoke the token ({failure}); it is forgotten here"
        );
    }

    /// Waits until `user` has the account at `provider` a call needs (`wanted`, else any), at
    /// most `wait` — or until the sign-in of the link `link_id` ([`SignInLink::id`]) connected
    /// another one, which is an error naming both.
    pub async fn wait_for(
        &self,
        user: &str,
        provider: &str,
        wanted: Option<&str>,
        link_id: &str,
        wait: Duration,
    ) -> Result<Option<AccountToken>, String> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let connected = self.connected.notified();
            if let Some(token) = self.credential(user, provider, wanted).await? {
                return Ok(Some(token));
            }
            if let (Some(wanted), Some(other)) =
                (wanted, self.state.record_get(&done_key(link_id)).await?)
            {
                return Err(format!(
                    "you signed in to {provider} as {other}, and this call acts as {wanted} \
                     (your `accounts` rules say so); sign out of {other} at {provider} (or \
                     switch accounts there) and make the call again to connect {wanted}"
                ));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            // Woken at once by a sign-in finished here; one finished on another replica is
            // seen at the next look.
            let _ = tokio::time::timeout_at(
                deadline.min(tokio::time::Instant::now() + Duration::from_millis(500)),
                connected,
            )
            .await;
        }
    }
}

fn unavailable(e: String) -> SignInError {
    SignInError::new(503, format!("sign-in is unavailable for now: {e}"))
}

/// A token endpoint's error, without the response body (it may hold a token).
fn describe<RE: std::error::Error + 'static>(
    e: &oauth2::RequestTokenError<RE, oauth2::basic::BasicErrorResponse>,
) -> String {
    match e {
        oauth2::RequestTokenError::ServerResponse(answer) => {
            let mut text = answer.error().to_string();
            if let Some(description) = answer.error_description() {
                text.push_str(&format!(" ({})", crate::logging::scrub(description)));
            }
            text
        }
        oauth2::RequestTokenError::Request(e) => format!("the request failed: {e}"),
        oauth2::RequestTokenError::Parse(e, _) => {
            format!("its answer is not a token: {}", e.path())
        }
        oauth2::RequestTokenError::Other(e) => crate::logging::scrub(e),
    }
}

/// The user quiver's operator signs in to upstreams as (`quiver upstreams connect`): no HTTP
/// user can have it, as names may not contain `:`.
pub const OPERATOR: &str = "quiver:operator";

/// The account name of a sign-in whose service does not say whose the token is.
fn account_name(user: &str) -> String {
    if user == OPERATOR {
        "operator".to_owned()
    } else {
        user.to_owned()
    }
}

/// Where the client registered for (`upstream`, `redirect`) is kept: a record of a user no one
/// can be (`:` is not allowed in names).
fn client_record(upstream: &str, redirect: &str) -> (String, String) {
    let redirect = hex::encode(&Sha256::digest(redirect.as_bytes())[..8]);
    ("quiver:clients".to_owned(), format!("{upstream}-{redirect}"))
}

fn done_key(link: &str) -> String {
    format!("signin:done:{link}")
}

fn ticket_key(ticket: &str) -> String {
    format!("signin:ticket:{}", hex::encode(Sha256::digest(ticket.as_bytes())))
}

fn state_key(state: &str) -> String {
    format!("signin:state:{}", hex::encode(Sha256::digest(state.as_bytes())))
}

/// The record of `user`'s accounts at `provider` (the user hashed: names stay out of keys).
fn account_key(user: &str, provider: &str) -> String {
    format!("accounts:{}:{provider}", hex::encode(&Sha256::digest(user.as_bytes())[..16]))
}

fn associated(user: &str, provider: &str) -> Vec<u8> {
    format!("quiver accounts\0{user}\0{provider}").into_bytes()
}

/// 32 random bytes, base64url: tickets, states, cookies, connection ids, task ids.
pub fn random_token() -> String {
    use chacha20poly1305::aead::rand_core::RngCore as _;
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(millis).unwrap_or(0)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Seals and opens records with one key (XChaCha20-Poly1305: a random 24-byte nonce per record
/// never repeats in practice, however many are written).
struct Sealer {
    cipher: XChaCha20Poly1305,
}

impl Sealer {
    /// The key in `variable` (64 hex digits or base64 of 32 bytes), or why there is none.
    fn from_env(variable: &str) -> Result<Self, String> {
        let value =
            std::env::var(variable).ok().filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                format!(
                "signing in needs a key to seal tokens with: set {variable} to 32 random bytes \
                 (`openssl rand -hex 32`)"
            )
            })?;
        let value = value.trim();
        let bytes = hex::decode(value)
            .ok()
            .or_else(|| base64::engine::general_purpose::STANDARD.decode(value).ok())
            .filter(|b| b.len() == 32)
            .ok_or_else(|| {
                format!(
                    "{variable} is not 32 bytes as 64 hex digits or base64; make one with \
                     `openssl rand -hex 32`"
                )
            })?;
        crate::logging::register_credential(value, None);
        Ok(Self { cipher: XChaCha20Poly1305::new(bytes.as_slice().into()) })
    }

    /// `plain` sealed: base64 of nonce and ciphertext.
    fn seal(&self, plain: &[u8], associated: &[u8]) -> String {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let sealed = self
            .cipher
            .encrypt(&nonce, Payload { msg: plain, aad: associated })
            .expect("sealing in memory does not fail");
        let mut out = nonce.to_vec();
        out.extend(sealed);
        base64::engine::general_purpose::STANDARD.encode(out)
    }

    /// The plain text of `sealed`, when it was sealed with this key and `associated`.
    fn open(&self, sealed: &str, associated: &[u8]) -> Option<Vec<u8>> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(sealed).ok()?;
        if bytes.len() < 24 {
            return None;
        }
        let (nonce, ciphertext) = bytes.split_at(24);
        self.cipher
            .decrypt(XNonce::from_slice(nonce), Payload { msg: ciphertext, aad: associated })
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer() -> Sealer {
        Sealer { cipher: XChaCha20Poly1305::new([7u8; 32].as_slice().into()) }
    }

    #[test]
    fn a_sealed_record_opens_only_for_its_user_and_service() {
        let sealer = sealer();
        let sealed = sealer.seal(b"gho_secret", &associated("alice", "github"));
        assert!(!sealed.contains("gho_secret"));
        assert_eq!(sealer.open(&sealed, &associated("alice", "github")).unwrap(), b"gho_secret");
        assert!(sealer.open(&sealed, &associated("bob", "github")).is_none());
        assert!(sealer.open(&sealed, &associated("alice", "gitlab")).is_none());
        let other = Sealer { cipher: XChaCha20Poly1305::new([8u8; 32].as_slice().into()) };
        assert!(other.open(&sealed, &associated("alice", "github")).is_none());
        // Two seals of the same text differ (a fresh nonce each).
        assert_ne!(sealed, sealer.seal(b"gho_secret", &associated("alice", "github")));
    }

    #[test]
    fn braces_are_filled_from_the_section_then_the_providers_defaults() {
        let settings = BTreeMap::from([(
            "base_url".to_owned(),
            toml::Value::String("https://gitlab.example.com/".into()),
        )]);
        let defaults = serde_json::Map::from_iter([(
            "base_url".to_owned(),
            Value::String("https://gitlab.com".into()),
        )]);
        assert_eq!(
            fill_braces("{base_url}/oauth/token", &settings, Some(&defaults)).unwrap(),
            "https://gitlab.example.com/oauth/token"
        );
        assert_eq!(
            fill_braces("{base_url}/oauth/token", &BTreeMap::new(), Some(&defaults)).unwrap(),
            "https://gitlab.com/oauth/token"
        );
        assert_eq!(fill_braces("{site}/x", &BTreeMap::new(), None).unwrap_err(), "site");
    }

    #[test]
    fn a_grants_debug_shows_no_token() {
        let grant = Grant {
            account: "alice".into(),
            id: "g1".into(),
            access_token: "gho_access".into(),
            refresh_token: Some("ghr_refresh".into()),
            expires_at_ms: None,
            scopes: vec![],
            connected_at_ms: 0,
            client: Some(("dyn-1".into(), Some("client-secret-1".into()))),
        };
        let shown = format!("{grant:?}");
        assert!(!shown.contains("client-secret-1"), "{shown}");
        assert!(!shown.contains("gho_access") && !shown.contains("ghr_refresh"), "{shown}");
    }
}
