//! HTTP to ClickUp: one reqwest client, the token in the `Authorization` header (raw for
//! personal tokens, `Bearer` for OAuth), errors a user can act on (ClickUp's `err` and `ECODE`
//! quoted), and rate-limit waits on `X-RateLimit-Reset`.

use std::time::Duration;

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::http::{
    error_chain, format_unix_time, human_duration, is_transient_status, mask_secret,
    note_rate_headroom, set_token_hint, tls_advice, too_large_message, unix_now, BodyLimit,
    RateLimit, RetryBudget, TransientRetries,
};
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

use crate::AuthScheme;

/// How often a rate-limited call is retried after waiting.
const MAX_RETRIES: u32 = 2;

/// The settings the client needs, resolved from the configuration.
pub(crate) struct ClientSettings {
    pub(crate) base_url: String,
    pub(crate) token: Option<String>,
    pub(crate) token_env: String,
    pub(crate) auth: AuthScheme,
    pub(crate) timeout: Duration,
    pub(crate) max_retry_wait: Duration,
    /// PEM certificates of a private CA to trust besides the system store and web roots.
    pub(crate) ca_certificates: Option<Vec<u8>>,
    /// The largest response body read.
    pub(crate) max_response_bytes: u64,
}

/// The provider's connection to ClickUp.
pub(crate) struct Client {
    http: reqwest::Client,
    settings: ClientSettings,
}

/// What a request is about, so errors can name it.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    /// `task 86cv5pkvr`, `the tasks of list 901`.
    description: String,
    /// The message of a 404.
    not_found: String,
}

impl Subject {
    /// One object: `Subject::object("task", "86cv5pkvr")`.
    pub(crate) fn object(kind: &str, id: &str) -> Self {
        Subject {
            description: format!("{kind} {id}"),
            not_found: format!("no {kind} {id} in ClickUp (or the token's user cannot see it)"),
        }
    }

    /// Something of an object: `Subject::of("the comments", "task", "86cv5pkvr")`.
    pub(crate) fn of(what: &str, kind: &str, id: &str) -> Self {
        Subject {
            description: format!("{what} of {kind} {id}"),
            not_found: format!("no {kind} {id} in ClickUp (or the token's user cannot see it)"),
        }
    }

    /// An action on an object: `Subject::action("updating", "task", "86cv5pkvr")`.
    pub(crate) fn action(doing: &str, kind: &str, id: &str) -> Self {
        Subject {
            description: format!("{doing} {kind} {id}"),
            not_found: format!("no {kind} {id} in ClickUp (or the token's user cannot see it)"),
        }
    }

    /// Something not tied to one object.
    pub(crate) fn global(what: &str) -> Self {
        Subject { description: what.to_owned(), not_found: format!("ClickUp found no {what}") }
    }

    /// `task 86cv5pkvr`.
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
    /// Builds the reqwest client (no runtime needed).
    pub(crate) fn new(settings: ClientSettings) -> Result<Self, String> {
        let mut builder = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .user_agent(concat!("quiver-provider-clickup/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = &settings.ca_certificates {
            let certificates = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| {
                format!("[providers.clickup] ca_file is not a usable PEM bundle: {e}")
            })?;
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let http = builder.build().map_err(|e| {
            format!(
                "could not build the clickup HTTP client: {}; if no CA certificates are \
                 installed, install them (ca-certificates) or point SSL_CERT_FILE at a bundle",
                error_chain(&e)
            )
        })?;
        Ok(Self { http, settings })
    }

    /// GETs `path` (below the base URL) with `query` and reads the JSON body into `T`.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<T, ToolError> {
        let reply = self.request(Method::GET, path, query, None, subject, ctx).await?;
        self.parse(&reply, subject)
    }

    /// Sends `body` with `method` (POST or PUT) to `path` with `query` and reads the JSON answer into `T`.
    pub(crate) async fn send_json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: &Value,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<T, ToolError> {
        let reply = self.request(method, path, query, Some(body), subject, ctx).await?;
        self.parse(&reply, subject)
    }

    fn parse<T: DeserializeOwned>(&self, reply: &Reply, subject: &Subject) -> Result<T, ToolError> {
        serde_json::from_str(&reply.body).map_err(|e| {
            self.error(
                ToolErrorKind::Upstream,
                format!("clickup returned an unreadable body for {}: {e}", subject.describe()),
            )
        })
    }

    /// The full URL of `path` with `query` (repeated keys such as `statuses[]` allowed).
    fn url(&self, path: &str, query: &[(&str, String)]) -> Result<url::Url, ToolError> {
        let mut url = url::Url::parse(&format!("{}{path}", self.settings.base_url))
            .map_err(|e| ToolError::internal(format!("bad request URL for {path}: {e}")))?;
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (key, value) in query {
                pairs.append_pair(key, value);
            }
        }
        Ok(url)
    }

    /// Sends a request; waits out short rate limits (up to `max_retry_wait_s`, at most
    /// [`MAX_RETRIES`] times), sends a GET again after a passing fault ([`TransientRetries`])
    /// and turns every non-2xx answer into an error.
    pub(crate) async fn request(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<Reply, ToolError> {
        let Some(token) = self.settings.token.as_deref() else {
            return Err(self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "clickup needs a token for {} and none is configured: {} to a personal API \
                     token (`pk_…`, from ClickUp Settings → Apps) or an OAuth access token",
                    subject.describe(),
                    self.set_token_hint()
                ),
            ));
        };
        let url = self.url(path, query)?;
        let mut budget =
            RetryBudget::new(self.settings.max_retry_wait, MAX_RETRIES, ctx.timeout_ms);
        let mut transient = TransientRetries::new(ctx.timeout_ms);
        // Only reads are sent again after a passing fault: a write may have landed. Every read
        // here is a GET; POST, PUT and DELETE change ClickUp.
        let idempotent = method == Method::GET;
        loop {
            let reply = match self.send_once(&method, url.clone(), token, body, subject, ctx).await
            {
                Ok(reply) => reply,
                Err(failure) => {
                    if idempotent && failure.transient {
                        if let Some(pause) = transient.next_pause() {
                            tracing::debug!(
                                "clickup: {} failed ({}); retrying in {} ms",
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
            if idempotent && is_transient_status(reply.status.as_u16()) {
                if let Some(pause) = transient.next_pause() {
                    tracing::debug!(
                        "clickup answered {} for {}; retrying in {} ms",
                        reply.status,
                        subject.describe(),
                        pause.as_millis()
                    );
                    tokio::time::sleep(pause).await;
                    continue;
                }
            }
            note_rate_headroom(&RateLimit::from_headers(
                |name| header(&reply.headers, name),
                "x-ratelimit-reset",
                "x-ratelimit-remaining",
                "x-ratelimit-limit",
            ));
            if reply.status == StatusCode::TOO_MANY_REQUESTS {
                let limit = RateLimit::from_headers(
                    |name| header(&reply.headers, name),
                    "x-ratelimit-reset",
                    "x-ratelimit-remaining",
                    "x-ratelimit-limit",
                );
                let wait = limit.wait(unix_now());
                if let Some(w) = budget.next_wait(wait) {
                    tracing::debug!(
                        "clickup rate limit on {}: waiting {} s before retrying",
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
        url: url::Url,
        token: &str,
        body: Option<&Value>,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<Reply, Failure> {
        let value = match self.settings.auth {
            AuthScheme::Personal => token.to_owned(),
            AuthScheme::Oauth => format!("Bearer {token}"),
        };
        let mut auth = HeaderValue::from_str(&value).map_err(|_| {
            Failure::fatal(self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "the configured clickup token contains characters a header cannot carry: {}",
                    self.set_token_hint()
                ),
            ))
        })?;
        auth.set_sensitive(true);
        let mut request = self.http.request(method.clone(), url).header(AUTHORIZATION, auth);
        if let Some(body) = body {
            request = request.json(body);
        }
        // The caller's trace goes on at ClickUp.
        for (name, value) in ctx.trace_headers() {
            request = request.header(name, value);
        }
        let exchange = async {
            let mut response =
                request.send().await.map_err(|e| self.transport_error(&e, subject))?;
            let status = response.status();
            let headers = response.headers().clone();
            // ClickUp's own id of the request, for the audit trail.
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
                                "clickup returned an unreadable body for {}: {}",
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
        match tokio::time::timeout(self.settings.timeout + Duration::from_millis(500), exchange)
            .await
        {
            Ok(result) => result,
            Err(_) => Err(Failure::fatal(self.timeout_error(subject))),
        }
    }

    fn too_large(&self, subject: &Subject) -> ToolError {
        self.error(
            ToolErrorKind::Upstream,
            too_large_message("clickup", subject.describe(), self.settings.max_response_bytes),
        )
    }

    fn transport_error(&self, e: &reqwest::Error, subject: &Subject) -> Failure {
        if e.is_timeout() {
            return Failure::fatal(self.timeout_error(subject));
        }
        let chain = error_chain(e);
        let advice = tls_advice("clickup", &chain);
        let error = self.error(
            ToolErrorKind::Upstream,
            format!(
                "could not reach clickup at {} for {}: {chain}{}",
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
                "clickup did not answer within {} s for {}; retry later, or raise \
                 [providers.clickup] timeout_s",
                self.settings.timeout.as_secs(),
                subject.describe()
            ),
        )
    }

    fn set_token_hint(&self) -> String {
        set_token_hint("clickup", &self.settings.token_env)
    }

    fn status_error(&self, reply: &Reply, subject: &Subject) -> ToolError {
        let said = ClickUpError::parse(&reply.body);
        let status = reply.status;
        let summary = said.summary(status);
        let what = subject.describe();
        match status.as_u16() {
            401 if said.is_team_not_authorized() => self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "clickup refused {what} ({summary}): the object does not exist, or its \
                     workspace was not authorized for this token; check the id (ids come from \
                     list_workspaces, list_spaces, list_lists, list_tasks), or authorize the \
                     workspace for the token"
                ),
            ),
            401 => self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "clickup rejected the token ({summary}): {} to a valid personal API token \
                     (`pk_…`) or OAuth access token{}",
                    self.set_token_hint(),
                    match self.settings.auth {
                        AuthScheme::Personal =>
                            "; for an OAuth token set [providers.clickup] \
                                                 auth = \"oauth\"",
                        AuthScheme::Oauth =>
                            "; for a personal token (`pk_…`) set \
                                              [providers.clickup] auth = \"personal\"",
                    }
                ),
            ),
            403 => self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "clickup refused {what} ({summary}): the token's user lacks permission for it"
                ),
            ),
            404 => self.error(ToolErrorKind::NotFound, subject.not_found.clone()),
            400 if said.is_not_found() => {
                self.error(ToolErrorKind::NotFound, format!("{} ({summary})", subject.not_found))
            }
            400 | 422 => self.error(
                ToolErrorKind::InvalidArguments,
                format!("clickup rejected the request for {what} ({summary})"),
            ),
            500..=599 => self.error(
                ToolErrorKind::Upstream,
                format!("clickup failed with {summary} on {what}; retry later"),
            ),
            _ => self
                .error(ToolErrorKind::Upstream, format!("clickup answered {summary} for {what}")),
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
        let mut message = match limit.limit {
            Some(per_minute) => format!(
                "clickup rate limit exceeded for {} ({per_minute} requests a minute for this \
                 token)",
                subject.describe()
            ),
            None => format!("clickup rate limit exceeded for {}", subject.describe()),
        };
        if !waited.is_zero() {
            message.push_str(&format!(" even after waiting {} s", waited.as_secs()));
        }
        match (limit.reset_at, wait) {
            (Some(reset), Some(w)) if limit.retry_after.is_none() => message.push_str(&format!(
                "; it resets at {} (in {})",
                format_unix_time(reset),
                human_duration(w)
            )),
            (_, Some(w)) => {
                message.push_str(&format!("; clickup asks to retry in {}", human_duration(w)))
            }
            (_, None) => message.push_str("; clickup gave no reset time (wait about a minute)"),
        }
        message.push_str(&budget.advice("clickup", wait));
        self.error(ToolErrorKind::RateLimited, message).with_retry_after(wait)
    }

    /// An error whose message never contains the token, whatever ClickUp echoed.
    fn error(&self, kind: ToolErrorKind, message: String) -> ToolError {
        ToolError::new(kind, mask_secret(message, self.settings.token.as_deref()))
    }
}

/// ClickUp's error body: `{"err": "Token invalid", "ECODE": "OAUTH_025"}`.
#[derive(Debug, Default, Deserialize)]
struct ClickUpError {
    #[serde(default)]
    err: Option<String>,
    #[serde(default, rename = "ECODE")]
    ecode: Option<String>,
}

impl ClickUpError {
    fn parse(body: &str) -> Self {
        serde_json::from_str(body).unwrap_or_default()
    }

    /// `OAUTH_023`, `OAUTH_026`, `OAUTH_027`, `OAUTH_029` … `OAUTH_045`: the token is fine, but
    /// its user (or the workspace) may not reach this object.
    fn is_team_not_authorized(&self) -> bool {
        let Some(n) = self
            .ecode
            .as_deref()
            .and_then(|c| c.strip_prefix("OAUTH_"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            return false;
        };
        matches!(n, 23 | 26 | 27 | 29..=45)
    }

    /// ClickUp answers some lookups of missing objects with a 400 and an `ITEM_…` code.
    fn is_not_found(&self) -> bool {
        self.ecode.as_deref().is_some_and(|c| c.starts_with("ITEM_"))
            && self.err.as_deref().is_some_and(|e| e.to_ascii_lowercase().contains("not found"))
    }

    /// `401 Token invalid, OAUTH_025`.
    fn summary(&self, status: StatusCode) -> String {
        let mut out = status.as_u16().to_string();
        match &self.err {
            Some(m) => out.push_str(&format!(" {m}")),
            None => out.push_str(&format!(" {}", status.canonical_reason().unwrap_or(""))),
        }
        if let Some(code) = &self.ecode {
            out.push_str(&format!(", {code}"));
        }
        out
    }
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clickup_error_bodies_are_quoted_and_classified() {
        let e = ClickUpError::parse(r#"{"err": "Team not authorized", "ECODE": "OAUTH_027"}"#);
        assert!(e.is_team_not_authorized());
        assert_eq!(e.summary(StatusCode::UNAUTHORIZED), "401 Team not authorized, OAUTH_027");
        let e = ClickUpError::parse(r#"{"err": "Token invalid", "ECODE": "OAUTH_025"}"#);
        assert!(!e.is_team_not_authorized());
        let e = ClickUpError::parse(r#"{"err": "Task not found, deleted", "ECODE": "ITEM_013"}"#);
        assert!(e.is_not_found());
        let e = ClickUpError::parse("<html>Bad Gateway</html>");
        assert_eq!(e.summary(StatusCode::BAD_GATEWAY), "502 Bad Gateway");
    }
}
