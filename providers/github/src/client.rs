//! HTTP to GitHub: one octocrab client, raw requests (so status codes and headers are visible),
//! errors a user can act on, rate-limit waits and `Link`-header pagination.

use std::time::Duration;

use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt;
use octocrab::Octocrab;
use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::http::{
    encode_component, error_chain, format_unix_time, human_duration, is_timeout,
    is_transient_status, mask_secret, note_rate_headroom, page_query, set_token_hint, tls_advice,
    too_large_message, unix_now, BodyLimit, RateLimit as Signal, RetryBudget, TransientRetries,
};
use serde::de::DeserializeOwned;

/// How often a rate-limited call is retried after waiting.
const MAX_RETRIES: u32 = 2;

/// The settings the client needs, resolved from the configuration.
pub(crate) struct ClientSettings {
    pub(crate) base_url: String,
    pub(crate) token: Option<String>,
    pub(crate) token_env: String,
    pub(crate) timeout: Duration,
    pub(crate) max_retry_wait: Duration,
    /// The largest response body read.
    pub(crate) max_response_bytes: u64,
    /// PEM certificates of a private CA to trust besides the system store.
    pub(crate) ca_certificates: Option<Vec<u8>>,
}

/// octocrab on a connector that trusts the system store and the private CA in `pem`: the stack
/// octocrab's own builder makes (base URI, user agent, the token for the API's host only,
/// redirects followed), since that builder offers no way to add a root certificate.
fn with_private_ca(settings: &ClientSettings, pem: &[u8]) -> Result<Octocrab, String> {
    use octocrab::service::middleware::auth_header::AuthHeaderLayer;
    use octocrab::service::middleware::base_uri::BaseUriLayer;
    use octocrab::service::middleware::extra_headers::ExtraHeadersLayer;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    use std::sync::Arc;
    use tower::Layer;

    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    let private: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("[providers.github] ca_file is not a usable PEM bundle: {e}"))?;
    let (added, _) = roots.add_parsable_certificates(private);
    if added == 0 {
        return Err("[providers.github] ca_file holds no usable CA certificate".into());
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("could not set up TLS for github: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector);
    let client = tower_http::follow_redirect::FollowRedirectLayer::new().layer(client);
    let base_uri: http::Uri = settings
        .base_url
        .parse()
        .map_err(|e| format!("base_url `{}` is not a usable URI: {e}", settings.base_url))?;
    let user_agent = http::HeaderValue::from_static(concat!(
        "quiver-provider-github/",
        env!("CARGO_PKG_VERSION")
    ));
    let authorization = settings.token.as_ref().and_then(|token| {
        let mut value = http::HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
        value.set_sensitive(true);
        Some(value)
    });
    octocrab::OctocrabBuilder::new_empty()
        .with_service(client)
        .with_layer(&BaseUriLayer::new(base_uri.clone()))
        .with_layer(&ExtraHeadersLayer::new(Arc::new(vec![(http::header::USER_AGENT, user_agent)])))
        // The token goes to the API's host only (uploads share it on Enterprise Server).
        .with_layer(&AuthHeaderLayer::new(authorization, base_uri.clone(), base_uri))
        .with_auth(octocrab::AuthState::None)
        .build()
        .map_err(|e| format!("could not build the github client: {e}"))
}

/// A request that failed before an answer was read, and whether the fault may pass.
pub(crate) struct Failure {
    error: ToolError,
    transient: bool,
}

impl Failure {
    fn fatal(error: ToolError) -> Self {
        Self { error, transient: false }
    }
}

/// The provider's connection to one GitHub (github.com or a GitHub Enterprise Server).
pub(crate) struct Client {
    octo: Octocrab,
    settings: ClientSettings,
}

/// What a request is about, so errors can name it.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    /// `issue #9 in octo/hello`, `the issues of octo/hello`.
    description: String,
    /// The message of a 404.
    not_found: String,
}

impl Subject {
    /// One object (`issue #9`) of `repo`.
    pub(crate) fn object(what: impl Into<String>, repo: &str) -> Self {
        let what = what.into();
        Subject {
            description: format!("{what} in {repo}"),
            not_found: format!("no {what} in {repo} (or the token cannot see the repository)"),
        }
    }

    /// A listing (`the issues`) of `repo`.
    pub(crate) fn listing(what: &str, repo: &str) -> Self {
        Subject {
            description: format!("{what} of {repo}"),
            not_found: format!("no repository {repo} (or the token cannot see it)"),
        }
    }

    /// An action (`creating an issue`) in `repo`.
    pub(crate) fn action(doing: &str, repo: &str) -> Self {
        Subject {
            description: format!("{doing} in {repo}"),
            not_found: format!("no repository {repo} (or the token cannot see it)"),
        }
    }

    /// Something not tied to one repository.
    pub(crate) fn global(what: impl Into<String>) -> Self {
        let what = what.into();
        Subject { not_found: format!("github found nothing for {what}"), description: what }
    }

    /// The same subject with its own 404 message.
    pub(crate) fn not_found_says(mut self, message: impl Into<String>) -> Self {
        self.not_found = message.into();
        self
    }

    /// `issue #9 in octo/hello`, `the issues of octo/hello`.
    pub(crate) fn describe(&self) -> String {
        self.description.clone()
    }

    fn not_found(&self) -> String {
        self.not_found.clone()
    }
}

/// A response read to the end.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

impl Client {
    /// Builds the octocrab client. Needs a tokio runtime context.
    pub(crate) fn new(settings: ClientSettings) -> Result<Self, String> {
        if let Some(pem) = &settings.ca_certificates {
            let octo = with_private_ca(&settings, pem)?;
            return Ok(Self { octo, settings });
        }
        let mut builder = Octocrab::builder()
            .base_uri(settings.base_url.as_str())
            .map_err(|e| format!("base_url `{}` is not a usable URI: {e}", settings.base_url))?
            .set_connect_timeout(Some(settings.timeout))
            .set_read_timeout(Some(settings.timeout))
            .set_write_timeout(Some(settings.timeout));
        if let Some(token) = &settings.token {
            builder = builder.personal_token(token.clone());
        }
        // The error never carries the token: octocrab reports TLS and URI problems only.
        let octo = builder.build().map_err(|e| {
            format!(
                "could not build the github client: {}; if no CA certificates are installed, \
                 install them (ca-certificates) or point SSL_CERT_FILE at a bundle",
                error_chain(&e)
            )
        })?;
        Ok(Self { octo, settings })
    }

    /// Whether a token is configured.
    pub(crate) fn has_token(&self) -> bool {
        self.settings.token.is_some()
    }

    /// GETs `uri` (a path and query below the base URL) and reads its JSON body into `T`, with the
    /// next page number from the `Link` header.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        uri: &str,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<(T, Option<u32>), ToolError> {
        let reply = self.request(Method::GET, uri, None, subject, ctx).await?;
        let next = next_page(&reply.headers);
        Ok((self.parse(&reply, subject)?, next))
    }

    /// GETs `uri` and returns its body as text (job logs).
    pub(crate) async fn get_text(
        &self,
        uri: &str,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<String, ToolError> {
        Ok(self.request(Method::GET, uri, None, subject, ctx).await?.body)
    }

    /// GETs `uri` asking for the media type `accept` (a diff, search text matches) and returns
    /// the answer.
    pub(crate) async fn get_as(
        &self,
        uri: &str,
        accept: &'static str,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<Reply, ToolError> {
        self.send(Method::GET, uri, None, Some(accept), subject, ctx).await
    }

    /// Sends a write (`POST`, `PUT`, `PATCH`, `DELETE`) with `body` and reads the JSON answer
    /// into `T`.
    pub(crate) async fn write_json<T: DeserializeOwned>(
        &self,
        method: Method,
        uri: &str,
        body: Option<&Value>,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<T, ToolError> {
        let reply = self.request(method, uri, body, subject, ctx).await?;
        self.parse(&reply, subject)
    }

    /// POSTs `body` to `uri` and reads the JSON answer into `T`.
    pub(crate) async fn post_json<T: DeserializeOwned>(
        &self,
        uri: &str,
        body: &Value,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<T, ToolError> {
        let reply = self.request(Method::POST, uri, Some(body), subject, ctx).await?;
        self.parse(&reply, subject)
    }

    /// Reads a reply's JSON body into `T`.
    pub(crate) fn parse<T: DeserializeOwned>(
        &self,
        reply: &Reply,
        subject: &Subject,
    ) -> Result<T, ToolError> {
        serde_json::from_str(&reply.body).map_err(|e| {
            self.error(
                ToolErrorKind::Upstream,
                format!("github returned an unreadable body for {}: {e}", subject.describe()),
            )
        })
    }

    /// Sends a request; waits out short rate limits (up to `max_retry_wait_s`, at most
    /// [`MAX_RETRIES`] times) and turns every non-2xx answer into an error.
    pub(crate) async fn request(
        &self,
        method: Method,
        uri: &str,
        body: Option<&Value>,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<Reply, ToolError> {
        self.send(method, uri, body, None, subject, ctx).await
    }

    /// [`Client::request`] with an `Accept` media type.
    async fn send(
        &self,
        method: Method,
        uri: &str,
        body: Option<&Value>,
        accept: Option<&'static str>,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<Reply, ToolError> {
        let mut budget =
            RetryBudget::new(self.settings.max_retry_wait, MAX_RETRIES, ctx.timeout_ms);
        let mut transient = TransientRetries::new(ctx.timeout_ms);
        // Only reads are sent again after a passing fault: a write may have landed.
        let idempotent = method == Method::GET;
        loop {
            let reply = match self.send_once(&method, uri, body, accept, subject, ctx).await {
                Ok(reply) => reply,
                Err(failure) => {
                    match transient.next_pause().filter(|_| idempotent && failure.transient) {
                        Some(pause) => {
                            tracing::debug!(
                                "github: {} failed ({}); retrying in {} ms",
                                subject.describe(),
                                failure.error.message,
                                pause.as_millis()
                            );
                            tokio::time::sleep(pause).await;
                            continue;
                        }
                        None => return Err(failure.error),
                    }
                }
            };
            if idempotent && is_transient_status(reply.status.as_u16()) {
                if let Some(pause) = transient.next_pause() {
                    tracing::debug!(
                        "github answered {} for {}; retrying in {} ms",
                        reply.status,
                        subject.describe(),
                        pause.as_millis()
                    );
                    tokio::time::sleep(pause).await;
                    continue;
                }
            }
            note_rate_headroom(&Signal::from_headers(
                |name| header(&reply.headers, name),
                "x-ratelimit-reset",
                "x-ratelimit-remaining",
                "x-ratelimit-limit",
            ));
            if let Some(limit) = RateLimit::of(&reply) {
                let wait = limit.wait(unix_now());
                if let Some(w) = budget.next_wait(wait) {
                    tracing::debug!(
                        "github rate limit on {}: waiting {} s before retrying",
                        subject.describe(),
                        w.as_secs_f32()
                    );
                    tokio::time::sleep(w).await;
                    continue;
                }
                return Err(self.rate_limited(&limit, wait, &budget, subject));
            }
            if reply.status.is_success() {
                return Ok(reply);
            }
            return Err(self.status_error(&reply, subject));
        }
    }

    async fn send_once(
        &self,
        method: &Method,
        uri: &str,
        body: Option<&Value>,
        accept: Option<&'static str>,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<Reply, Failure> {
        let exchange = async {
            let response = match *method {
                Method::POST => self.octo._post(uri, body).await,
                Method::PUT => self.octo._put(uri, body).await,
                Method::PATCH => self.octo._patch(uri, body).await,
                Method::DELETE => self.octo._delete(uri, body).await,
                _ => {
                    let mut headers = HeaderMap::new();
                    if let Some(media) = accept {
                        headers.insert(http::header::ACCEPT, http::HeaderValue::from_static(media));
                    }
                    // The caller's trace goes on at GitHub (reads: octocrab's write helpers
                    // take no headers).
                    for (name, value) in ctx.trace_headers() {
                        if let (Ok(name), Ok(value)) = (
                            http::HeaderName::from_bytes(name.as_bytes()),
                            http::HeaderValue::from_str(value),
                        ) {
                            headers.insert(name, value);
                        }
                    }
                    self.octo._get_with_headers(uri, (!headers.is_empty()).then_some(headers)).await
                }
            }
            .map_err(|e| {
                // octocrab's own read timeout and the deadline below race; either way it is a
                // timeout, not an unreachable server.
                if is_timeout(&e) {
                    return Failure::fatal(self.timeout_error(subject));
                }
                let chain = error_chain(&e);
                let advice = tls_advice("github", &chain);
                // An untrusted certificate stays untrusted; a refused or reset connection may pass.
                let transient = advice.is_none();
                let error = self.error(
                    ToolErrorKind::Upstream,
                    format!(
                        "could not reach github at {} for {}: {chain}{}",
                        self.settings.base_url,
                        subject.describe(),
                        advice.unwrap_or_default()
                    ),
                );
                Failure { error, transient }
            })?;
            let status = response.status();
            let headers = response.headers().clone();
            // GitHub's own id of the request, for the audit trail.
            quiver_plugin_sdk::support::http::note_request_id(ctx, |name| {
                headers.get(name)?.to_str().ok()
            });
            let declared = headers
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
            let too_large = |_| Failure::fatal(self.too_large(subject));
            let mut limit =
                BodyLimit::new(self.settings.max_response_bytes, declared).map_err(too_large)?;
            let mut stream = response.into_body();
            while let Some(frame) = stream.frame().await {
                let frame = frame.map_err(|e| Failure {
                    // A connection cut mid-body is a passing fault like a refused one.
                    error: self.error(
                        ToolErrorKind::Upstream,
                        format!(
                            "github returned an unreadable body for {}: {}",
                            subject.describe(),
                            error_chain(&e)
                        ),
                    ),
                    transient: true,
                })?;
                if let Some(chunk) = frame.data_ref() {
                    limit.push(chunk).map_err(too_large)?;
                }
            }
            Ok(Reply { status, headers, body: limit.into_string() })
        };
        match tokio::time::timeout(self.settings.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(Failure::fatal(self.timeout_error(subject))),
        }
    }

    fn too_large(&self, subject: &Subject) -> ToolError {
        self.error(
            ToolErrorKind::Upstream,
            too_large_message("github", &subject.describe(), self.settings.max_response_bytes),
        )
    }

    fn timeout_error(&self, subject: &Subject) -> ToolError {
        self.error(
            ToolErrorKind::Timeout,
            format!(
                "github did not answer within {} s for {}; retry later, or raise \
                 [providers.github] timeout_s",
                self.settings.timeout.as_secs(),
                subject.describe()
            ),
        )
    }

    fn set_token_hint(&self) -> String {
        set_token_hint("github", &self.settings.token_env)
    }

    fn status_error(&self, reply: &Reply, subject: &Subject) -> ToolError {
        let gh = GitHubMessage::parse(&reply.body);
        let status = reply.status;
        let said = gh.summary(status);
        match status.as_u16() {
            401 if self.has_token() => self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "github rejected the token ({} {}): {} to a valid token",
                    status.as_u16(),
                    gh.message.as_deref().unwrap_or("Bad credentials"),
                    self.set_token_hint()
                ),
            ),
            401 => self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "github requires a token for {} and none is configured (401 {}): {} to a \
                     personal access token",
                    subject.describe(),
                    gh.message.as_deref().unwrap_or("Requires authentication"),
                    self.set_token_hint()
                ),
            ),
            403 => {
                let mut message = format!("github refused {} ({said})", subject.describe());
                if let Some(sso) = header(&reply.headers, "x-github-sso") {
                    let url = sso.split("url=").nth(1).unwrap_or(sso);
                    message.push_str(&format!(
                        "; the organisation uses SAML single sign-on: authorize the token at {url}"
                    ));
                } else if let Some(needed) = header(&reply.headers, "x-accepted-github-permissions")
                {
                    message.push_str(&format!("; the token needs the permission `{needed}`"));
                } else if let Some(scopes) = header(&reply.headers, "x-accepted-oauth-scopes")
                    .filter(|s| !s.trim().is_empty())
                {
                    let has = header(&reply.headers, "x-oauth-scopes").unwrap_or("");
                    message.push_str(&format!(
                        "; the token needs one of the scopes `{scopes}` (it has `{has}`)"
                    ));
                }
                if !self.has_token() {
                    message
                        .push_str(&format!("; no token is configured: {}", self.set_token_hint()));
                }
                self.error(ToolErrorKind::Unauthorized, message)
            }
            404 => {
                let mut message = subject.not_found();
                if !self.has_token() {
                    message.push_str(&format!(
                        "; no token is configured, and private repositories need one: {}",
                        self.set_token_hint()
                    ));
                }
                self.error(ToolErrorKind::NotFound, message)
            }
            410 => self
                .error(ToolErrorKind::NotFound, format!("{} is gone ({said})", subject.describe())),
            // 400: a body GitHub could not read; 409: the object is not in a state that allows
            // it (a merge whose head moved, a run already completed); 422: a validation failure.
            400 | 409 | 422 => self.error(
                ToolErrorKind::InvalidArguments,
                format!("github rejected the request for {} ({said})", subject.describe()),
            ),
            500..=599 => self.error(
                ToolErrorKind::Upstream,
                format!(
                    "github failed with {status} on {}; retry later{}",
                    subject.describe(),
                    gh.message.map(|m| format!(" (github said: {m})")).unwrap_or_default()
                ),
            ),
            _ => self.error(
                ToolErrorKind::Upstream,
                format!("github answered {said} for {}", subject.describe()),
            ),
        }
    }

    fn rate_limited(
        &self,
        limit: &RateLimit,
        wait: Option<Duration>,
        budget: &RetryBudget,
        subject: &Subject,
    ) -> ToolError {
        let waited = budget.waited();
        let mut message = match (limit.signal.remaining, limit.signal.limit) {
            (Some(0), Some(of)) => format!(
                "github rate limit exceeded ({} of {of} requests left{}) for {}",
                0,
                limit.resource.as_deref().map(|r| format!(" in `{r}`")).unwrap_or_default(),
                subject.describe()
            ),
            _ => format!(
                "github rate limit exceeded for {} ({})",
                subject.describe(),
                limit.message.as_deref().unwrap_or("too many requests")
            ),
        };
        if !waited.is_zero() {
            message.push_str(&format!(" even after waiting {} s", waited.as_secs()));
        }
        match (limit.signal.reset_at, wait) {
            (Some(reset), Some(w)) if limit.signal.retry_after.is_none() => message.push_str(
                &format!("; it resets at {} (in {})", format_unix_time(reset), human_duration(w)),
            ),
            (_, Some(w)) => {
                message.push_str(&format!("; github asks to retry in {}", human_duration(w)))
            }
            (_, None) => message.push_str("; github gave no reset time (wait at least a minute)"),
        }
        message.push_str(&budget.advice("github", wait));
        if !self.has_token() && limit.signal.remaining == Some(0) {
            message.push_str(&format!(
                "; unauthenticated requests get only 60 an hour: {} to a token",
                self.set_token_hint()
            ));
        }
        self.error(ToolErrorKind::RateLimited, message).with_retry_after(wait)
    }

    /// An error whose message never contains the token, whatever GitHub echoed.
    fn error(&self, kind: ToolErrorKind, message: String) -> ToolError {
        ToolError::new(kind, mask_secret(message, self.settings.token.as_deref()))
    }
}

/// The signs of a rate limit on a response: the shared header reading, plus what GitHub adds.
#[derive(Debug, Clone, PartialEq)]
struct RateLimit {
    signal: Signal,
    resource: Option<String>,
    message: Option<String>,
}

impl RateLimit {
    /// A 429, or a 403 with `retry-after`, `x-ratelimit-remaining: 0` or a rate-limit message
    /// (GitHub's secondary limits say so only in the body).
    fn of(reply: &Reply) -> Option<Self> {
        let signal = Signal::from_headers(
            |name| header(&reply.headers, name),
            "x-ratelimit-reset",
            "x-ratelimit-remaining",
            "x-ratelimit-limit",
        );
        let limit = RateLimit {
            signal,
            resource: header(&reply.headers, "x-ratelimit-resource").map(str::to_owned),
            message: GitHubMessage::parse(&reply.body).message,
        };
        let says_so =
            limit.message.as_deref().is_some_and(|m| m.to_ascii_lowercase().contains("rate limit"));
        let limited = match reply.status.as_u16() {
            429 => true,
            403 => {
                limit.signal.retry_after.is_some() || limit.signal.remaining == Some(0) || says_so
            }
            _ => false,
        };
        limited.then_some(limit)
    }

    /// How long to wait before the next attempt; `None` when GitHub said neither how long nor
    /// until when.
    fn wait(&self, now: u64) -> Option<Duration> {
        self.signal.wait(now)
    }
}

/// GitHub's error body: `{"message": "...", "errors": [...], "documentation_url": "..."}`.
#[derive(Debug, Default, Deserialize)]
struct GitHubMessage {
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    errors: Vec<Value>,
}

impl GitHubMessage {
    fn parse(body: &str) -> Self {
        serde_json::from_str(body).unwrap_or_default()
    }

    /// `422 Validation Failed: assignees invalid (nobody)`.
    fn summary(&self, status: StatusCode) -> String {
        let mut out = status.as_u16().to_string();
        match &self.message {
            Some(m) => out.push_str(&format!(" {m}")),
            None => out.push_str(&format!(" {}", status.canonical_reason().unwrap_or(""))),
        }
        let details: Vec<String> = self
            .errors
            .iter()
            .take(5)
            .map(|e| match e {
                Value::String(s) => s.clone(),
                Value::Object(o) => {
                    if let Some(m) = o.get("message").and_then(Value::as_str) {
                        return m.to_owned();
                    }
                    let field = o.get("field").and_then(Value::as_str).unwrap_or("?");
                    let code = o.get("code").and_then(Value::as_str).unwrap_or("invalid");
                    match o.get("value") {
                        Some(v) if !v.is_null() => format!("{field} {code} ({v})"),
                        _ => format!("{field} {code}"),
                    }
                }
                other => other.to_string(),
            })
            .collect();
        if !details.is_empty() {
            out.push_str(&format!(": {}", details.join("; ")));
        }
        out
    }
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The page number of the `rel="next"` link of a `Link` header, if any.
pub(crate) fn next_page(headers: &HeaderMap) -> Option<u32> {
    quiver_plugin_sdk::support::http::next_page(
        headers.get_all(http::header::LINK).iter().filter_map(|v| v.to_str().ok()),
    )
}

/// The value of `param` in the `rel="next"` link of a `Link` header: the cursor of APIs that
/// page with `after` instead of page numbers (Dependabot alerts).
pub(crate) fn next_cursor(headers: &HeaderMap, param: &str) -> Option<String> {
    let link = quiver_plugin_sdk::support::http::next_link(
        headers.get_all(http::header::LINK).iter().filter_map(|v| v.to_str().ok()),
    )?;
    let query = link.split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == param && !value.is_empty()).then(|| percent_decode(value))
    })
}

/// `%3D` → `=`, `+` → space; bytes that do not decode stay as they are.
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A path and query below the base URL: `/repos/{owner}/{repo}/issues?state=open`.
pub(crate) use quiver_plugin_sdk::support::http::path_and_query as uri;

/// Checks an owner or repository name: GitHub allows letters, digits, `-`, `_` and `.`.
pub(crate) fn check_name(field: &str, value: &str) -> Result<(), ToolError> {
    let ok = !value.is_empty()
        && value != "."
        && value != ".."
        && value.len() <= 100
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else if field == "repo" && value.contains('/') {
        Err(ToolError::invalid_arguments(format!(
            "`repo` is the repository name alone (`hello` of `octo/hello`), with the owner in \
             `owner`; got `{value}`"
        )))
    } else {
        Err(ToolError::invalid_arguments(format!(
            "`{field}` must be a GitHub name (letters, digits, `-`, `_`, `.`); got `{value}`"
        )))
    }
}

/// `owner/repo` after checking both names.
pub(crate) fn repo_path(owner: &str, repo: &str) -> Result<String, ToolError> {
    check_name("owner", owner)?;
    check_name("repo", repo)?;
    Ok(format!("{owner}/{repo}"))
}

/// Percent-encodes each segment of a file path in a repository, keeping the `/` between them.
pub(crate) fn encode_path(path: &str) -> Result<String, ToolError> {
    let mut out = Vec::new();
    for segment in path.trim_matches('/').split('/').filter(|s| !s.is_empty()) {
        if segment == "." || segment == ".." {
            return Err(ToolError::invalid_arguments(format!(
                "`path` must not contain `.` or `..` segments; got `{path}`"
            )));
        }
        out.push(encode_component(segment));
    }
    Ok(out.join("/"))
}

/// `page` (default 1) and `per_page` (default 30, at most 100) as query values.
pub(crate) fn paging(
    page: Option<u32>,
    per_page: Option<u32>,
) -> [(&'static str, Option<String>); 2] {
    page_query(page, per_page, 30)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn next_page_comes_from_the_link_header() {
        let h = headers(&[(
            "link",
            "<https://api.github.com/repositories/1296/issues?labels=bug%2Cui&page=3&per_page=2>; \
             rel=\"next\", \
             <https://api.github.com/repositories/1296269/issues?page=9&per_page=2>; rel=\"last\"",
        )]);
        assert_eq!(next_page(&h), Some(3));
        let last_page = headers(&[(
            "link",
            "<https://api.github.com/repositories/1/issues?page=1>; rel=\"prev\", \
             <https://api.github.com/repositories/1/issues?page=1>; rel=\"first\"",
        )]);
        assert_eq!(next_page(&last_page), None);
        assert_eq!(next_page(&HeaderMap::new()), None);
    }

    #[test]
    fn a_cursor_comes_from_the_next_link() {
        let h = headers(&[(
            "link",
            "<https://api.github.com/repos/o/r/dependabot/alerts?per_page=2&after=Y3Vy%3D%3D>; \
             rel=\"next\", <https://api.github.com/repos/o/r/dependabot/alerts?before=X>; \
             rel=\"prev\"",
        )]);
        assert_eq!(next_cursor(&h, "after").as_deref(), Some("Y3Vy=="));
        assert_eq!(next_cursor(&h, "before"), None, "only the next link counts");
        assert_eq!(next_cursor(&HeaderMap::new(), "after"), None);
        assert_eq!(percent_decode("a%2Fb+c%zz"), "a/b c%zz");
    }

    #[test]
    fn rate_limits_are_recognised_and_timed() {
        let reply = |status: u16, h: &[(&'static str, &str)], body: &str| Reply {
            status: StatusCode::from_u16(status).unwrap(),
            headers: headers(h),
            body: body.to_owned(),
        };
        let limit = RateLimit::of(&reply(429, &[("retry-after", "3")], "")).unwrap();
        assert_eq!(limit.wait(0), Some(Duration::from_secs(3)));
        let primary = RateLimit::of(&reply(
            403,
            &[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "1000")],
            "",
        ))
        .unwrap();
        assert_eq!(primary.wait(990), Some(Duration::from_secs(10)));
        assert_eq!(primary.wait(2000), Some(Duration::from_secs(1)), "a past reset waits 1 s");
        let secondary =
            reply(403, &[], r#"{"message": "You have exceeded a secondary rate limit."}"#);
        assert_eq!(RateLimit::of(&secondary).unwrap().wait(0), None);
        let permission =
            reply(403, &[("x-ratelimit-remaining", "4999")], r#"{"message": "Forbidden"}"#);
        assert!(RateLimit::of(&permission).is_none());
    }

    #[test]
    fn names_and_paths_cannot_escape_the_repository() {
        assert!(repo_path("octo", "hello.rs").is_ok());
        assert!(check_name("owner", "..").is_err());
        let e = check_name("repo", "octo/hello").unwrap_err();
        assert!(e.message.contains("repository name alone"), "{}", e.message);
        assert_eq!(encode_path("/src/a b/ü.rs").unwrap(), "src/a%20b/%C3%BC.rs");
        assert!(encode_path("src/../../issues").is_err());
        assert_eq!(
            uri("/repos/o/r/issues", &[("labels", Some("bug,ui".into())), ("since", None)]),
            "/repos/o/r/issues?labels=bug%2Cui"
        );
    }
}
