//! HTTP to Jira: gouqi's `ClientCore` builds every URL (`/rest/<api>/<version>/…` below the
//! configured site) and applies the credentials; the request itself goes through a `reqwest`
//! client built once, because gouqi's own `get`/`post` hide the status and headers a rate-limited
//! call needs (`Retry-After`, `X-RateLimit-Reset`). Also here: errors a user can act on and the
//! rate-limit waits.

use std::time::Duration;

use gouqi::{ClientCore, Credentials};
use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::http::{
    error_chain, format_unix_time, human_duration, is_transient_status, mask_credential,
    note_rate_headroom, set_token_hint, tls_advice, too_large_message, unix_now, BodyLimit,
    RateLimit as Signal, RetryBudget, TransientRetries,
};
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

use crate::Deployment;

/// How often a rate-limited call is retried after waiting.
const MAX_RETRIES: u32 = 2;

/// The settings the client needs, resolved from the configuration.
pub(crate) struct ClientSettings {
    /// The site, with a trailing `/` (so a context path such as `/jira/` is kept when joining).
    pub(crate) base_url: String,
    pub(crate) email: Option<String>,
    pub(crate) token: Option<String>,
    pub(crate) token_env: String,
    pub(crate) deployment: Deployment,
    pub(crate) timeout: Duration,
    pub(crate) max_retry_wait: Duration,
    /// PEM certificates of a private CA to trust besides the system store and web roots.
    pub(crate) ca_certificates: Option<Vec<u8>>,
    /// The largest response body read.
    pub(crate) max_response_bytes: u64,
}

/// Which REST API a path belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// The platform API: `/rest/api/3` on Cloud, `/rest/api/2` on Server/Data Center.
    Core,
    /// Jira Software's agile API: `/rest/agile/1.0` everywhere.
    Agile,
}

/// The provider's connection to one Jira site.
pub(crate) struct Client {
    core: ClientCore,
    http: reqwest::Client,
    settings: ClientSettings,
}

/// What a request is about, so errors can name it.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    /// `issue PROJ-7`, `the boards`.
    description: String,
    /// The message of a 404.
    not_found: String,
}

impl Subject {
    /// One issue.
    pub(crate) fn issue(key: &str) -> Self {
        Subject {
            description: format!("issue {key}"),
            not_found: format!(
                "no issue {key} in jira (or the account cannot see it: Jira answers 404 for \
                 issues outside the account's permissions)"
            ),
        }
    }

    /// Something about one issue: `the comments of PROJ-7`.
    pub(crate) fn of_issue(what: &str, key: &str) -> Self {
        Subject {
            description: format!("{what} of {key}"),
            not_found: format!("no issue {key} in jira (or the account cannot see it)"),
        }
    }

    /// Anything else, with its own 404 message.
    pub(crate) fn other(description: impl Into<String>, not_found: impl Into<String>) -> Self {
        Subject { description: description.into(), not_found: not_found.into() }
    }

    /// `issue PROJ-7`, `the boards`.
    pub(crate) fn describe(&self) -> &str {
        &self.description
    }
}

/// A request that failed before an answer was read, and whether the fault may pass.
pub(crate) struct Failure {
    pub(crate) error: ToolError,
    pub(crate) transient: bool,
}

impl Failure {
    fn fatal(error: ToolError) -> Self {
        Self { error, transient: false }
    }

    fn transient(error: ToolError) -> Self {
        Self { error, transient: true }
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
    /// Builds the HTTP client and gouqi's core (URL building and credentials).
    pub(crate) fn new(settings: ClientSettings) -> Result<Self, String> {
        let credentials = match (&settings.email, &settings.token) {
            (Some(email), Some(token)) => Credentials::Basic(email.clone(), token.clone()),
            (None, Some(token)) => Credentials::Bearer(token.clone()),
            (_, None) => Credentials::Anonymous,
        };
        let core = ClientCore::new(settings.base_url.clone(), credentials)
            .map_err(|e| format!("base_url `{}` is not usable: {e}", settings.base_url))?;
        let mut builder = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .user_agent(concat!("quiver-provider-jira/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = &settings.ca_certificates {
            let certificates = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| format!("[providers.jira] ca_file is not a usable PEM bundle: {e}"))?;
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let http = builder.build().map_err(|e| {
            format!(
                "could not build the jira HTTP client: {}; if no CA certificates are installed, \
                 install them (ca-certificates) or point SSL_CERT_FILE at a bundle",
                error_chain(&e)
            )
        })?;
        Ok(Self { core, http, settings })
    }

    /// Cloud or Server/Data Center.
    pub(crate) fn deployment(&self) -> Deployment {
        self.settings.deployment
    }

    /// The site's root with a trailing `/`, for links a person opens (`…/browse/KEY`).
    pub(crate) fn site(&self) -> &str {
        &self.settings.base_url
    }

    fn has_token(&self) -> bool {
        self.settings.token.is_some()
    }

    /// GETs `endpoint` (a path and query below the API root) and reads its JSON body into `T`.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        api: Api,
        endpoint: &str,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<T, ToolError> {
        let reply = self.request(Method::GET, api, endpoint, None, subject, ctx).await?;
        self.parse(&reply, subject)
    }

    /// Sends `body` with `method` and reads the JSON answer into `T`.
    pub(crate) async fn send_json<T: DeserializeOwned>(
        &self,
        method: Method,
        api: Api,
        endpoint: &str,
        body: &Value,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<T, ToolError> {
        let reply = self.request(method, api, endpoint, Some(body), subject, ctx).await?;
        self.parse(&reply, subject)
    }

    /// Sends `body` with `method` to an endpoint that answers 204 (or a body nobody reads).
    pub(crate) async fn send(
        &self,
        method: Method,
        api: Api,
        endpoint: &str,
        body: &Value,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<(), ToolError> {
        self.request(method, api, endpoint, Some(body), subject, ctx).await.map(|_| ())
    }

    fn parse<T: DeserializeOwned>(&self, reply: &Reply, subject: &Subject) -> Result<T, ToolError> {
        serde_json::from_str(&reply.body).map_err(|e| {
            self.error(
                ToolErrorKind::Upstream,
                format!("jira returned an unreadable body for {}: {e}", subject.describe()),
            )
        })
    }

    /// Sends a request; waits out short rate limits (up to `max_retry_wait_s`, at most
    /// [`MAX_RETRIES`] times, never past the call's deadline), sends a GET again after a passing
    /// fault ([`TransientRetries`]) and turns every non-2xx answer into an error.
    async fn request(
        &self,
        method: Method,
        api: Api,
        endpoint: &str,
        body: Option<&Value>,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<Reply, ToolError> {
        if self.settings.email.is_some() && !self.has_token() {
            return Err(self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "no jira API token is configured for {}: {} to an API token of the account \
                     [providers.jira] email names",
                    subject.describe(),
                    self.set_token_hint()
                ),
            ));
        }
        let mut budget =
            RetryBudget::new(self.settings.max_retry_wait, MAX_RETRIES, ctx.timeout_ms);
        let mut transient = TransientRetries::new(ctx.timeout_ms);
        // Only reads are sent again after a passing fault: a write may have landed. Every read
        // here is a GET (searches included); POST, PUT and DELETE all change Jira.
        let idempotent = method == Method::GET;
        loop {
            let reply = match self.send_once(&method, api, endpoint, body, subject, ctx).await {
                Ok(reply) => reply,
                Err(failure) => {
                    if idempotent && failure.transient {
                        if let Some(pause) = transient.next_pause() {
                            tracing::debug!(
                                "jira: {} failed ({}); retrying in {} ms",
                                subject.describe(),
                                failure.error.message,
                                pause.as_millis()
                            );
                            tokio::time::sleep(pause).await;
                            continue;
                        }
                    }
                    return Err(failure.error);
                }
            };
            // Before the 5xx retry: a 503 with `Retry-After` is Cloud's rate limit and is waited
            // out for as long as Jira asks, not after a short jittered pause.
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
                        "jira rate limit on {}: waiting {} s before retrying",
                        subject.describe(),
                        w.as_secs_f32()
                    );
                    tokio::time::sleep(w).await;
                    continue;
                }
                return Err(self.rate_limited(&limit, wait, &budget, subject));
            }
            if idempotent && is_transient_status(reply.status.as_u16()) {
                if let Some(pause) = transient.next_pause() {
                    tracing::debug!(
                        "jira answered {} for {}; retrying in {} ms",
                        reply.status,
                        subject.describe(),
                        pause.as_millis()
                    );
                    tokio::time::sleep(pause).await;
                    continue;
                }
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
        api: Api,
        endpoint: &str,
        body: Option<&Value>,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<Reply, Failure> {
        let (name, version) = match api {
            Api::Core => ("api", self.settings.deployment.api_version()),
            Api::Agile => ("agile", "1.0"),
        };
        let url = self.core.build_versioned_url(name, Some(version), endpoint).map_err(|e| {
            Failure::fatal(
                self.error(ToolErrorKind::Internal, format!("could not build a jira URL: {e}")),
            )
        })?;
        let mut request = self
            .http
            .request(method.clone(), url)
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(body) = body {
            request = request.json(body);
        }
        request = self.core.apply_credentials_async(request);
        // The caller's trace goes on at Jira.
        for (name, value) in ctx.trace_headers() {
            request = request.header(name, value);
        }
        let exchange = async {
            let mut response =
                request.send().await.map_err(|e| self.transport_error(&e, subject))?;
            let status = response.status();
            let headers = response.headers().clone();
            // Jira's own id of the request, for the audit trail.
            quiver_plugin_sdk::support::http::note_request_id(ctx, |name| {
                headers.get(name)?.to_str().ok()
            });
            let too_large = |_| Failure::fatal(self.too_large(subject));
            let mut limit =
                BodyLimit::new(self.settings.max_response_bytes, response.content_length())
                    .map_err(too_large)?;
            loop {
                match response.chunk().await {
                    Ok(Some(chunk)) => limit.push(&chunk).map_err(too_large)?,
                    Ok(None) => break,
                    Err(e) => {
                        if e.is_timeout() {
                            return Err(Failure::fatal(self.timeout_error(subject)));
                        }
                        // A connection cut mid-body is a passing fault like a refused one.
                        return Err(Failure::transient(self.error(
                            ToolErrorKind::Upstream,
                            format!(
                                "jira returned an unreadable body for {}: {}",
                                subject.describe(),
                                error_chain(&e)
                            ),
                        )));
                    }
                }
            }
            Ok(Reply { status, headers, body: limit.into_string() })
        };
        // reqwest's own timeout covers the whole exchange; this one is a backstop.
        match tokio::time::timeout(self.settings.timeout + Duration::from_millis(250), exchange)
            .await
        {
            Ok(result) => result,
            Err(_) => Err(Failure::fatal(self.timeout_error(subject))),
        }
    }

    fn too_large(&self, subject: &Subject) -> ToolError {
        self.error(
            ToolErrorKind::Upstream,
            too_large_message("jira", subject.describe(), self.settings.max_response_bytes),
        )
    }

    fn transport_error(&self, e: &reqwest::Error, subject: &Subject) -> Failure {
        if e.is_timeout() {
            return Failure::fatal(self.timeout_error(subject));
        }
        let chain = error_chain(e);
        let advice = tls_advice("jira", &chain);
        let error = self.error(
            ToolErrorKind::Upstream,
            format!(
                "could not reach jira at {} for {}: {chain}{}",
                self.settings.base_url,
                subject.describe(),
                advice.as_deref().unwrap_or_default()
            ),
        );
        // An untrusted certificate stays untrusted; a refused or reset connection may pass.
        if advice.is_none() && (e.is_connect() || e.is_request()) {
            Failure::transient(error)
        } else {
            Failure::fatal(error)
        }
    }

    fn timeout_error(&self, subject: &Subject) -> ToolError {
        self.error(
            ToolErrorKind::Timeout,
            format!(
                "jira did not answer within {} s for {}; retry later, or raise \
                 [providers.jira] timeout_s",
                self.settings.timeout.as_secs(),
                subject.describe()
            ),
        )
    }

    fn set_token_hint(&self) -> String {
        set_token_hint("jira", &self.settings.token_env)
    }

    /// How to fix rejected or missing credentials, for the configured kind of authentication.
    fn credentials_hint(&self) -> String {
        match (&self.settings.email, self.settings.deployment) {
            (Some(email), _) => format!(
                "{} to an API token of the Atlassian account [providers.jira] email = \"{email}\" \
                 names (token and email must belong to the same account; create tokens at \
                 https://id.atlassian.com/manage-profile/security/api-tokens)",
                self.set_token_hint()
            ),
            (None, Deployment::Cloud) => format!(
                "Jira Cloud API tokens need the account's email: set [providers.jira] email, and \
                 {} to an API token of that account",
                self.set_token_hint()
            ),
            (None, Deployment::Server) => format!(
                "{} to a personal access token (Jira profile → Personal Access Tokens), or set \
                 [providers.jira] email to the username to use basic authentication",
                self.set_token_hint()
            ),
        }
    }

    fn status_error(&self, reply: &Reply, subject: &Subject) -> ToolError {
        let said = JiraMessage::parse(&reply.body).summary(reply.status);
        let status = reply.status;
        let login_reason = header(&reply.headers, "x-seraph-loginreason").unwrap_or("");
        match status.as_u16() {
            401 if self.has_token() => self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "jira rejected the credentials ({said}) for {}: {}",
                    subject.describe(),
                    self.credentials_hint()
                ),
            ),
            401 => self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "jira requires credentials for {} and none are configured ({said}): {}",
                    subject.describe(),
                    self.credentials_hint()
                ),
            ),
            403 if login_reason.contains("AUTHENTICATION_DENIED") => self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "jira refused {} ({said}): too many failed logins made Jira ask for a \
                     CAPTCHA; log in once in a browser, then check the credentials: {}",
                    subject.describe(),
                    self.credentials_hint()
                ),
            ),
            403 => {
                let mut message = format!(
                    "jira refused {} ({said}); the account lacks a permission for it",
                    subject.describe()
                );
                if !self.has_token() {
                    message.push_str(&format!(
                        "; no credentials are configured: {}",
                        self.credentials_hint()
                    ));
                }
                self.error(ToolErrorKind::Unauthorized, message)
            }
            404 => {
                let mut message = subject.not_found.clone();
                if !self.has_token() {
                    message.push_str(&format!(
                        "; no credentials are configured, and most sites show nothing to \
                         anonymous users: {}",
                        self.credentials_hint()
                    ));
                }
                self.error(ToolErrorKind::NotFound, message)
            }
            400 | 409 | 422 => self.error(
                ToolErrorKind::InvalidArguments,
                format!("jira rejected the request for {} ({said})", subject.describe()),
            ),
            500..=599 => self.error(
                ToolErrorKind::Upstream,
                format!("jira failed with {said} on {}; retry later", subject.describe()),
            ),
            _ => self.error(
                ToolErrorKind::Upstream,
                format!("jira answered {said} for {}", subject.describe()),
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
        let mut message = format!("jira rate limit exceeded for {}", subject.describe());
        if let Some(reason) = &limit.reason {
            message.push_str(&format!(" ({reason})"));
        }
        if !waited.is_zero() {
            message.push_str(&format!(" even after waiting {} s", waited.as_secs()));
        }
        match (limit.signal.reset_at, wait) {
            (Some(reset), Some(w)) if limit.signal.retry_after.is_none() => message.push_str(
                &format!("; it resets at {} (in {})", format_unix_time(reset), human_duration(w)),
            ),
            (_, Some(w)) => {
                message.push_str(&format!("; jira asks to retry in {}", human_duration(w)))
            }
            (_, None) => message.push_str("; jira gave no reset time (wait at least a minute)"),
        }
        message.push_str(&budget.advice("jira", wait));
        self.error(ToolErrorKind::RateLimited, message).with_retry_after(wait)
    }

    /// An error whose message never contains the token, whatever Jira echoed.
    pub(crate) fn error(&self, kind: ToolErrorKind, message: String) -> ToolError {
        ToolError::new(
            kind,
            mask_credential(
                message,
                self.settings.token.as_deref(),
                self.settings.email.as_deref(),
            ),
        )
    }
}

/// The signs of a rate limit on a response.
#[derive(Debug, Clone, PartialEq)]
struct RateLimit {
    signal: Signal,
    /// `RateLimit-Reason` (Cloud): `jira-burst-based`, `jira-quota-tenant-based`…
    reason: Option<String>,
}

impl RateLimit {
    /// A 429, or a 503 with `Retry-After` (Cloud's "a resource limit was reached", which its
    /// documentation says to handle like a rate limit). Cloud's `X-RateLimit-Reset` is an
    /// ISO 8601 time (`2024-06-01T12:31Z`), not Unix seconds; the SDK reads either.
    fn of(reply: &Reply) -> Option<Self> {
        let signal = Signal::from_headers(
            |name| header(&reply.headers, name),
            "x-ratelimit-reset",
            "x-ratelimit-remaining",
            "x-ratelimit-limit",
        );
        let limited = match reply.status.as_u16() {
            429 => true,
            503 => signal.retry_after.is_some(),
            _ => false,
        };
        let reason = header(&reply.headers, "ratelimit-reason").map(str::to_owned);
        limited.then_some(RateLimit { signal, reason })
    }

    fn wait(&self, now: u64) -> Option<Duration> {
        self.signal.wait(now)
    }
}

/// Jira's error body: `{"errorMessages": ["…"], "errors": {"field": "…"}}`; proxies and some
/// failures send HTML or plain text instead.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JiraMessage {
    #[serde(default)]
    error_messages: Vec<String>,
    #[serde(default)]
    errors: serde_json::Map<String, Value>,
    #[serde(default)]
    message: Option<String>,
    /// Anything that is not Jira's JSON, cut short.
    #[serde(skip)]
    raw: Option<String>,
}

impl JiraMessage {
    fn parse(body: &str) -> Self {
        match serde_json::from_str::<JiraMessage>(body) {
            Ok(m) => m,
            Err(_) => {
                let text = body.trim();
                let looks_like_text = !text.is_empty() && !text.starts_with('<');
                JiraMessage {
                    raw: looks_like_text.then(|| text.chars().take(200).collect()),
                    ..Default::default()
                }
            }
        }
    }

    /// `400 Bad Request: Field 'x' cannot be set; summary: You must specify a summary`.
    fn summary(&self, status: StatusCode) -> String {
        let mut out = format!("{} {}", status.as_u16(), status.canonical_reason().unwrap_or(""));
        let mut details: Vec<String> = self.error_messages.iter().take(5).cloned().collect();
        details.extend(self.errors.iter().take(8).map(|(field, message)| {
            let message =
                message.as_str().map(str::to_owned).unwrap_or_else(|| message.to_string());
            format!("{field}: {message}")
        }));
        details.extend(self.message.clone());
        details.extend(self.raw.clone());
        if !details.is_empty() {
            out.push_str(": ");
            out.push_str(&details.join("; "));
        }
        out
    }
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A path and query: `/issue/PROJ-1/comment?startAt=0&maxResults=20`.
pub(crate) use quiver_plugin_sdk::support::http::path_and_query as endpoint;

/// Checks an issue key (`PROJ-123`) or id (`10002`) before it goes into a path.
pub(crate) fn check_key(field: &str, value: &str) -> Result<String, ToolError> {
    let value = value.trim();
    let ok = !value.is_empty()
        && value.len() <= 255
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
    if ok {
        Ok(value.to_ascii_uppercase())
    } else {
        Err(ToolError::invalid_arguments(format!(
            "`{field}` must be an issue key such as `PROJ-123` (or a numeric issue id); got \
             `{value}`"
        )))
    }
}

/// Checks a project key or id before it goes into a path.
pub(crate) fn check_project(value: &str) -> Result<String, ToolError> {
    let value = value.trim();
    let ok = !value.is_empty()
        && value.len() <= 255
        && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(value.to_owned())
    } else {
        Err(ToolError::invalid_arguments(format!(
            "`project` must be a project key such as `PROJ` (or a numeric project id); got \
             `{value}`"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jira_error_bodies_are_summarised() {
        let body = r#"{"errorMessages":["Issue does not exist"],"errors":{"summary":"required"}}"#;
        assert_eq!(
            JiraMessage::parse(body).summary(StatusCode::BAD_REQUEST),
            "400 Bad Request: Issue does not exist; summary: required"
        );
        assert_eq!(
            JiraMessage::parse("<html>oops</html>").summary(StatusCode::BAD_GATEWAY),
            "502 Bad Gateway"
        );
        assert_eq!(
            JiraMessage::parse("Basic authentication with passwords is deprecated")
                .summary(StatusCode::UNAUTHORIZED),
            "401 Unauthorized: Basic authentication with passwords is deprecated"
        );
    }

    #[test]
    fn keys_are_checked_and_normalised() {
        assert_eq!(check_key("key", " proj-12 ").unwrap(), "PROJ-12");
        assert_eq!(check_key("key", "10002").unwrap(), "10002");
        assert!(check_key("key", "PROJ-1/../../x").is_err());
        assert!(check_project("PR OJ").is_err());
    }
}
