//! HTTP to GitLab: one reqwest client, errors a user can act on, rate-limit waits, pagination
//! headers, and project ids or paths turned into the URL-encoded form the API expects.

use std::time::Duration;

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::http::{
    encode_component, error_chain, format_unix_time, human_duration, is_transient_status,
    mask_secret, note_rate_headroom, page_query, set_token_hint, tls_advice, too_large_message,
    unix_now, BodyLimit, RateLimit as Signal, RetryBudget, TransientRetries,
};
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, LOCATION};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

use crate::AuthScheme;

/// How often a rate-limited call is retried after waiting.
const MAX_RETRIES: u32 = 2;
/// Redirects followed within the instance.
const MAX_REDIRECTS: usize = 5;

/// The settings the client needs, resolved from the configuration.
pub(crate) struct ClientSettings {
    /// `https://gitlab.example.com/api/v4`.
    pub(crate) api_root: String,
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

/// The provider's connection to one GitLab instance.
pub(crate) struct Client {
    http: reqwest::Client,
    settings: ClientSettings,
}

/// What a request is about, so errors can name it.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    /// `issue #9 in acme/api`, `the issues of acme/api`.
    description: String,
    /// The message of a 404.
    not_found: String,
}

impl Subject {
    /// One object (`issue #9`) of `project`.
    pub(crate) fn object(what: impl Into<String>, project: &str) -> Self {
        let what = what.into();
        Subject {
            description: format!("{what} in {project}"),
            not_found: format!("no {what} in {project} (or the token cannot see the project)"),
        }
    }

    /// A listing (`the issues`) of `project`.
    pub(crate) fn listing(what: &str, project: &str) -> Self {
        Subject {
            description: format!("{what} of {project}"),
            not_found: format!("no project {project} (or the token cannot see it)"),
        }
    }

    /// An action (`creating an issue`) in `project`.
    pub(crate) fn action(doing: &str, project: &str) -> Self {
        Subject {
            description: format!("{doing} in {project}"),
            not_found: format!("no project {project} (or the token cannot see it)"),
        }
    }

    /// Something not tied to one project.
    pub(crate) fn global(what: impl Into<String>) -> Self {
        let what = what.into();
        Subject { not_found: format!("gitlab found nothing for {what}"), description: what }
    }

    /// The same subject with its own 404 message.
    pub(crate) fn not_found_says(mut self, message: impl Into<String>) -> Self {
        self.not_found = message.into();
        self
    }

    /// `issue #9 in acme/api`, `the issues of acme/api`.
    pub(crate) fn describe(&self) -> &str {
        &self.description
    }
}

/// Where a listing goes on: GitLab's pagination headers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Page {
    /// `X-Next-Page`, else the `page` of the `Link` header's `rel="next"`.
    pub(crate) next_page: Option<u32>,
    /// `X-Total`: GitLab leaves it out when counting would be slow (over 10,000 items).
    pub(crate) total: Option<u64>,
}

impl Page {
    fn of(headers: &HeaderMap) -> Self {
        let number = |name: &str| header(headers, name).map(str::trim).filter(|v| !v.is_empty());
        let next_page = number("x-next-page").and_then(|v| v.parse().ok()).or_else(|| {
            quiver_plugin_sdk::support::http::next_page(
                headers.get_all(reqwest::header::LINK).iter().filter_map(|v| v.to_str().ok()),
            )
        });
        Page { next_page, total: number("x-total").and_then(|v| v.parse().ok()) }
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
    /// Builds the reqwest client.
    pub(crate) fn new(settings: ClientSettings) -> Result<Self, String> {
        // Redirects are followed by hand (see `send_once`): reqwest keeps custom headers such as
        // `PRIVATE-TOKEN` on a redirect to another host, and the token must not leave GitLab.
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("quiver-provider-gitlab/", env!("CARGO_PKG_VERSION")))
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none());
        if let Some(pem) = &settings.ca_certificates {
            let certificates = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| {
                format!("[providers.gitlab] ca_file is not a usable PEM bundle: {e}")
            })?;
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let http = builder.build().map_err(|e| {
            format!(
                "could not build the gitlab client: {}; if no CA certificates are installed, \
                 install them (ca-certificates) or point SSL_CERT_FILE at a bundle",
                error_chain(&e)
            )
        })?;
        Ok(Self { http, settings })
    }

    /// Whether a token is configured.
    pub(crate) fn has_token(&self) -> bool {
        self.settings.token.is_some()
    }

    /// GETs `uri` (a path and query below the API root) and reads its JSON body into `T`, with
    /// the pagination headers.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        uri: &str,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<(T, Page), ToolError> {
        let reply = self.request(Method::GET, uri, None, subject, ctx).await?;
        Ok((self.parse(&reply, subject)?, Page::of(&reply.headers)))
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

    /// POSTs `body` (JSON; `None` for an empty POST) to `uri` and reads the JSON answer into `T`.
    pub(crate) async fn post_json<T: DeserializeOwned>(
        &self,
        uri: &str,
        body: Option<&Value>,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<T, ToolError> {
        let reply = self.request(Method::POST, uri, body, subject, ctx).await?;
        self.parse(&reply, subject)
    }

    /// PUTs `body` (JSON) to `uri` and reads the JSON answer into `T`.
    pub(crate) async fn put_json<T: DeserializeOwned>(
        &self,
        uri: &str,
        body: &Value,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<T, ToolError> {
        let reply = self.request(Method::PUT, uri, Some(body), subject, ctx).await?;
        self.parse(&reply, subject)
    }

    fn parse<T: DeserializeOwned>(&self, reply: &Reply, subject: &Subject) -> Result<T, ToolError> {
        serde_json::from_str(&reply.body).map_err(|e| {
            self.error(
                ToolErrorKind::Upstream,
                format!("gitlab returned an unreadable body for {}: {e}", subject.describe()),
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
        let mut budget =
            RetryBudget::new(self.settings.max_retry_wait, MAX_RETRIES, ctx.timeout_ms);
        let mut transient = TransientRetries::new(ctx.timeout_ms);
        // Only reads are sent again after a passing fault: a write may have landed.
        let idempotent = method == Method::GET;
        loop {
            let reply = match self.send_once(&method, uri, body, subject, ctx).await {
                Ok(reply) => reply,
                Err(failure) => {
                    match transient.next_pause().filter(|_| idempotent && failure.transient) {
                        Some(pause) => {
                            tracing::debug!(
                                "gitlab: {} failed ({}); retrying in {} ms",
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
                        "gitlab answered {} for {}; retrying in {} ms",
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
                "ratelimit-reset",
                "ratelimit-remaining",
                "ratelimit-limit",
            ));
            if let Some(limit) = RateLimit::of(&reply) {
                let wait = limit.signal.wait(unix_now());
                if let Some(w) = budget.next_wait(wait) {
                    tracing::debug!(
                        "gitlab rate limit on {}: waiting {} s before retrying",
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

    fn auth_headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let Some(token) = &self.settings.token else { return headers };
        let (name, value) = match self.settings.auth {
            AuthScheme::PrivateToken => ("private-token", token.clone()),
            AuthScheme::Oauth => (AUTHORIZATION.as_str(), format!("Bearer {token}")),
        };
        if let Ok(mut value) = HeaderValue::from_str(&value) {
            value.set_sensitive(true);
            if let Ok(name) = reqwest::header::HeaderName::from_bytes(name.as_bytes()) {
                headers.insert(name, value);
            }
        }
        headers
    }

    async fn send_once(
        &self,
        method: &Method,
        uri: &str,
        body: Option<&Value>,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<Reply, Failure> {
        let exchange = async {
            let mut url = format!("{}{uri}", self.settings.api_root);
            let origin = origin_of(&url);
            let mut redirects = 0;
            loop {
                let same_origin = origin_of(&url) == origin;
                let mut request = self.http.request(method.clone(), &url);
                if same_origin {
                    request = request.headers(self.auth_headers());
                }
                // The caller's trace goes on at GitLab.
                for (name, value) in ctx.trace_headers() {
                    request = request.header(name, value);
                }
                if let Some(body) = body {
                    request = request.json(body);
                }
                let mut response =
                    request.send().await.map_err(|e| self.transport_error(&e, subject))?;
                let status = response.status();
                let headers = response.headers().clone();
                // GitLab's own id of the request, for the audit trail.
                quiver_plugin_sdk::support::http::note_request_id(ctx, |name| {
                    headers.get(name)?.to_str().ok()
                });
                // GETs follow redirects; the token goes only to the instance itself.
                if status.is_redirection() && *method == Method::GET && redirects < MAX_REDIRECTS {
                    if let Some(next) = header(&headers, LOCATION.as_str())
                        .and_then(|l| url::Url::parse(&url).ok()?.join(l).ok())
                    {
                        url = next.to_string();
                        redirects += 1;
                        continue;
                    }
                }
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
                                    "gitlab returned an unreadable body for {}: {}",
                                    subject.describe(),
                                    error_chain(&e)
                                ),
                            )));
                        }
                    }
                }
                return Ok(Reply { status, headers, body: limit.into_string() });
            }
        };
        // reqwest's own timeout covers each request; this one also bounds the redirects.
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
            too_large_message("gitlab", subject.describe(), self.settings.max_response_bytes),
        )
    }

    fn transport_error(&self, e: &reqwest::Error, subject: &Subject) -> Failure {
        if e.is_timeout() {
            return Failure::fatal(self.timeout_error(subject));
        }
        let chain = error_chain(e);
        let advice = tls_advice("gitlab", &chain);
        let error = self.error(
            ToolErrorKind::Upstream,
            format!(
                "could not reach gitlab at {} for {}: {chain}{}",
                self.settings.api_root,
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
                "gitlab did not answer within {} s for {}; retry later, or raise \
                 [providers.gitlab] timeout_s",
                self.settings.timeout.as_secs(),
                subject.describe()
            ),
        )
    }

    fn set_token_hint(&self) -> String {
        set_token_hint("gitlab", &self.settings.token_env)
    }

    fn status_error(&self, reply: &Reply, subject: &Subject) -> ToolError {
        let said = GitLabMessage::parse(&reply.body);
        let status = reply.status;
        let summary = said.summary(status);
        match status.as_u16() {
            401 if self.has_token() => {
                let scheme = match self.settings.auth {
                    AuthScheme::PrivateToken => {
                        "it was sent as PRIVATE-TOKEN; an OAuth token needs [providers.gitlab] \
                         auth = \"oauth\""
                    }
                    AuthScheme::Oauth => {
                        "it was sent as an OAuth Bearer token; a personal access token needs \
                         [providers.gitlab] auth = \"private_token\""
                    }
                };
                self.error(
                    ToolErrorKind::Unauthorized,
                    format!(
                        "gitlab rejected the token ({summary}): {} to a valid token ({scheme})",
                        self.set_token_hint()
                    ),
                )
            }
            401 => self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "gitlab requires a token for {} and none is configured ({summary}): {} to a \
                     personal access token",
                    subject.describe(),
                    self.set_token_hint()
                ),
            ),
            403 => {
                let mut message = format!("gitlab refused {} ({summary})", subject.describe());
                if said.error.as_deref() == Some("insufficient_scope") {
                    match &said.scope {
                        Some(scope) => {
                            message.push_str(&format!("; the token needs the scope `{scope}`"))
                        }
                        None => message.push_str("; the token lacks a scope this call needs"),
                    }
                } else if self.has_token() {
                    message.push_str("; the token's user lacks the permission (role) for this");
                }
                if !self.has_token() {
                    message
                        .push_str(&format!("; no token is configured: {}", self.set_token_hint()));
                }
                self.error(ToolErrorKind::Unauthorized, message)
            }
            404 => {
                let mut message = subject.not_found.clone();
                if !self.has_token() {
                    message.push_str(&format!(
                        "; no token is configured, and private projects need one: {}",
                        self.set_token_hint()
                    ));
                }
                self.error(ToolErrorKind::NotFound, message)
            }
            // GitLab answers 405 and 406 for a merge the merge request's state forbids (not
            // open, conflicts, checks pending), 409 for a stale `sha`.
            400 | 405 | 406 | 409 | 422 => self.error(
                ToolErrorKind::InvalidArguments,
                format!("gitlab rejected the request for {} ({summary})", subject.describe()),
            ),
            500..=599 => self.error(
                ToolErrorKind::Upstream,
                format!("gitlab failed with {summary} on {}; retry later", subject.describe()),
            ),
            _ => self.error(
                ToolErrorKind::Upstream,
                format!("gitlab answered {summary} for {}", subject.describe()),
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
                "gitlab rate limit exceeded (0 of {of} requests left) for {}",
                subject.describe()
            ),
            _ => format!("gitlab rate limit exceeded for {}", subject.describe()),
        };
        if !waited.is_zero() {
            message.push_str(&format!(" even after waiting {} s", waited.as_secs()));
        }
        match (limit.signal.reset_at, wait) {
            (Some(reset), Some(w)) if limit.signal.retry_after.is_none() => message.push_str(
                &format!("; it resets at {} (in {})", format_unix_time(reset), human_duration(w)),
            ),
            (Some(reset), Some(w)) => message.push_str(&format!(
                "; gitlab asks to retry in {} (the window resets at {})",
                human_duration(w),
                format_unix_time(reset)
            )),
            (None, Some(w)) => {
                message.push_str(&format!("; gitlab asks to retry in {}", human_duration(w)))
            }
            (_, None) => message.push_str("; gitlab gave no reset time (wait at least a minute)"),
        }
        message.push_str(&budget.advice("gitlab", wait));
        if !self.has_token() {
            message.push_str(&format!(
                "; unauthenticated requests have a lower limit: {} to a token",
                self.set_token_hint()
            ));
        }
        self.error(ToolErrorKind::RateLimited, message).with_retry_after(wait)
    }

    /// An error whose message never contains the token, whatever GitLab echoed.
    fn error(&self, kind: ToolErrorKind, message: String) -> ToolError {
        ToolError::new(kind, mask_secret(message, self.settings.token.as_deref()))
    }
}

/// `scheme://host:port` of a URL, to tell whether a redirect leaves the instance.
fn origin_of(url: &str) -> Option<String> {
    url::Url::parse(url).ok().map(|u| u.origin().ascii_serialization())
}

/// The signs of a rate limit on a response.
#[derive(Debug, Clone, PartialEq)]
struct RateLimit {
    signal: Signal,
}

impl RateLimit {
    /// A 429 (GitLab's only rate-limit status), read with GitLab's `RateLimit-*` headers.
    fn of(reply: &Reply) -> Option<Self> {
        (reply.status == StatusCode::TOO_MANY_REQUESTS).then(|| RateLimit {
            signal: Signal::from_headers(
                |name| header(&reply.headers, name),
                "ratelimit-reset",
                "ratelimit-remaining",
                "ratelimit-limit",
            ),
        })
    }
}

/// GitLab's error bodies: `{"message": "404 Project Not Found"}`, `{"message": {"title": ["can't
/// be blank"]}}`, `{"error": "title is missing"}`, or OAuth's `{"error": "insufficient_scope",
/// "error_description": "…", "scope": "api"}`.
#[derive(Debug, Default, Deserialize)]
struct GitLabMessage {
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
    #[serde(default)]
    scope: Option<String>,
}

impl GitLabMessage {
    fn parse(body: &str) -> Self {
        serde_json::from_str(body).unwrap_or_default()
    }

    /// `404 Project Not Found`, `400 Bad request: title can't be blank`.
    fn summary(&self, status: StatusCode) -> String {
        let code = status.as_u16().to_string();
        let mut said: Vec<String> = Vec::new();
        match &self.message {
            Some(Value::String(s)) => said.push(s.clone()),
            Some(Value::Array(items)) => said.extend(
                items.iter().take(5).map(|i| i.as_str().map_or(i.to_string(), str::to_owned)),
            ),
            Some(Value::Object(fields)) => {
                for (field, errors) in fields.iter().take(5) {
                    let errors = match errors {
                        Value::Array(list) => list
                            .iter()
                            .map(|e| e.as_str().map_or(e.to_string(), str::to_owned))
                            .collect::<Vec<_>>()
                            .join(", "),
                        other => other.as_str().map_or(other.to_string(), str::to_owned),
                    };
                    said.push(format!("{field} {errors}"));
                }
            }
            _ => {}
        }
        if let Some(e) = &self.error {
            said.push(e.clone());
        }
        if let Some(d) = &self.error_description {
            said.push(d.clone());
        }
        let reason = status.canonical_reason().unwrap_or("");
        match said.first() {
            None => format!("{code} {reason}"),
            // `{"message": "404 Project Not Found"}` already carries the status.
            Some(first) if first.starts_with(&code) => said.join(": "),
            Some(_) => format!("{code} {reason}: {}", said.join("; ")),
        }
    }
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A path and query below the API root: `/projects/acme%2Fapi/issues?state=opened`.
pub(crate) use quiver_plugin_sdk::support::http::path_and_query as uri;

/// `page` (default 1) and `per_page` (default 20, GitLab's, at most 100) as query values.
pub(crate) fn paging(
    page: Option<u32>,
    per_page: Option<u32>,
) -> [(&'static str, Option<String>); 2] {
    page_query(page, per_page, 20)
}

/// A project as the user wrote it, checked and normalised (`42`, `acme/backend/api`), and the
/// URL-encoded form that goes into paths (`acme%2Fbackend%2Fapi`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProjectRef {
    /// The id or full path, as results echo it.
    pub(crate) name: String,
    /// The id, or the path with every reserved character percent-encoded.
    pub(crate) encoded: String,
}

impl ProjectRef {
    /// Reads `42`, `acme/backend/api`, `/acme/api/` or a project's web URL
    /// (`https://gitlab.com/acme/api/-/issues`).
    pub(crate) fn parse(project: &str) -> Result<Self, ToolError> {
        let raw = project.trim();
        let path = match raw.split_once("://") {
            Some((_, rest)) => {
                let after_host = rest.split_once('/').map(|(_, p)| p).unwrap_or("");
                after_host.split("/-/").next().unwrap_or("").split(['?', '#']).next().unwrap_or("")
            }
            None => raw,
        };
        let path = path.trim_matches('/').trim_end_matches(".git");
        if !path.is_empty() && path.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(ProjectRef { name: path.to_owned(), encoded: path.to_owned() });
        }
        let segments: Vec<&str> = path.split('/').collect();
        let bad = path.is_empty()
            || segments.len() < 2
            || segments.iter().any(|s| {
                s.is_empty()
                    || *s == "."
                    || *s == ".."
                    || !s.chars().all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
            });
        if bad {
            return Err(ToolError::invalid_arguments(format!(
                "`project` must be a project id (`42`) or its full path with namespace \
                 (`group/project`, `group/subgroup/project`); got `{project}`"
            )));
        }
        Ok(ProjectRef { name: path.to_owned(), encoded: encode_component(path) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn pages_come_from_x_next_page_else_the_link_header() {
        let h = headers(&[("x-next-page", "3"), ("x-page", "2"), ("x-total", "57")]);
        assert_eq!(Page::of(&h), Page { next_page: Some(3), total: Some(57) });
        let last = headers(&[("x-next-page", ""), ("x-page", "3"), ("x-total", "57")]);
        assert_eq!(Page::of(&last), Page { next_page: None, total: Some(57) });
        let keyset = headers(&[(
            "link",
            "<https://gitlab.com/api/v4/projects?page=2&per_page=20>; rel=\"next\", \
             <https://gitlab.com/api/v4/projects?page=1&per_page=20>; rel=\"first\"",
        )]);
        assert_eq!(Page::of(&keyset), Page { next_page: Some(2), total: None });
    }

    #[test]
    fn projects_are_ids_or_encoded_paths() {
        assert_eq!(ProjectRef::parse("42").unwrap().encoded, "42");
        let nested = ProjectRef::parse("/acme/backend/api/").unwrap();
        assert_eq!(
            (nested.name.as_str(), nested.encoded.as_str()),
            ("acme/backend/api", "acme%2Fbackend%2Fapi")
        );
        let from_url = ProjectRef::parse("https://gitlab.com/acme/my.api/-/issues/3").unwrap();
        assert_eq!(from_url.encoded, "acme%2Fmy.api");
        assert_eq!(ProjectRef::parse("https://gitlab.com/acme/api.git").unwrap().name, "acme/api");
        for bad in ["", "api", "acme//api", "acme/../admin", "acme/api?x=1", "acme/a b"] {
            let e = ProjectRef::parse(bad).unwrap_err();
            assert_eq!(e.kind, ToolErrorKind::InvalidArguments, "{bad}");
            assert!(e.message.contains("group/subgroup/project"), "{}", e.message);
        }
        assert_eq!(encode_component("src/a b.rs"), "src%2Fa%20b.rs");
    }

    #[test]
    fn gitlab_error_bodies_become_one_line() {
        let say = |body: &str, status: u16| {
            GitLabMessage::parse(body).summary(StatusCode::from_u16(status).unwrap())
        };
        assert_eq!(say(r#"{"message":"404 Project Not Found"}"#, 404), "404 Project Not Found");
        assert_eq!(
            say(r#"{"message":{"title":["can't be blank","is too short"]}}"#, 400),
            "400 Bad Request: title can't be blank, is too short"
        );
        assert_eq!(
            say(r#"{"error":"title is missing"}"#, 400),
            "400 Bad Request: title is missing"
        );
        assert_eq!(
            say(
                r#"{"message":["Another open merge request already exists for this source branch: !19"]}"#,
                409
            ),
            "409 Conflict: Another open merge request already exists for this source branch: !19"
        );
        assert_eq!(say("<html>oops</html>", 502), "502 Bad Gateway");
    }

    #[test]
    fn only_429_is_a_rate_limit_and_its_wait_comes_from_the_headers() {
        let reply = |status: u16, h: &[(&'static str, &str)]| Reply {
            status: StatusCode::from_u16(status).unwrap(),
            headers: headers(h),
            body: "Retry later".into(),
        };
        let limit = RateLimit::of(&reply(429, &[("retry-after", "3")])).unwrap();
        assert_eq!(limit.signal.wait(0), Some(Duration::from_secs(3)));
        let reset = RateLimit::of(&reply(
            429,
            &[
                ("ratelimit-remaining", "0"),
                ("ratelimit-reset", "1000"),
                ("ratelimit-limit", "600"),
            ],
        ))
        .unwrap();
        assert_eq!(reset.signal.wait(990), Some(Duration::from_secs(10)));
        assert_eq!(reset.signal.limit, Some(600));
        assert!(RateLimit::of(&reply(403, &[("ratelimit-remaining", "0")])).is_none());
    }
}
