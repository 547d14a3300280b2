//! HTTP to Fireflies: one reqwest client, GraphQL queries POSTed to the configured endpoint,
//! errors a user can act on (from GraphQL `errors` entries and HTTP statuses alike), rate-limit
//! waits bounded by `max_retry_wait_s` and the call's deadline, and retries of queries (never of
//! mutations) after a passing fault.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::http::{
    error_chain, format_unix_time, human_duration, is_transient_status, mask_secret,
    note_rate_headroom, parse_retry_after, set_token_hint, tls_advice, too_large_message, unix_now,
    BodyLimit, RateLimit as Signal, RetryBudget, TransientRetries,
};
use quiver_plugin_sdk::support::json::nullable;
use reqwest::header::HeaderMap;
use serde::de::DeserializeOwned;

/// How often a rate-limited call is retried after waiting.
const MAX_RETRIES: u32 = 2;

/// The settings the client needs, resolved from the configuration.
pub(crate) struct ClientSettings {
    /// The GraphQL endpoint every query is POSTed to.
    pub(crate) endpoint: String,
    pub(crate) token: Option<String>,
    pub(crate) token_env: String,
    pub(crate) timeout: Duration,
    pub(crate) max_retry_wait: Duration,
    /// PEM certificates of a private CA to trust besides the system store and web roots.
    pub(crate) ca_certificates: Option<Vec<u8>>,
    /// The largest response body read.
    pub(crate) max_response_bytes: u64,
}

/// The provider's connection to one Fireflies GraphQL endpoint.
pub(crate) struct Client {
    http: reqwest::Client,
    settings: ClientSettings,
}

/// What a request is about, so errors can name it.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    /// `transcript `abc``, `the transcript search `pricing``.
    description: String,
    /// The message of an `object_not_found`; `None` builds one from Fireflies' own message.
    not_found: Option<String>,
}

impl Subject {
    /// One transcript.
    pub(crate) fn transcript(id: &str) -> Self {
        Subject {
            description: format!("transcript `{id}`"),
            not_found: Some(format!(
                "no transcript `{id}` in fireflies (or the API key's user cannot see it; other \
                 team members' meetings need a team admin's key)"
            )),
        }
    }

    /// Another object: `Subject::object("soundbite", "b1")`.
    pub(crate) fn object(kind: &str, id: &str) -> Self {
        Subject {
            description: format!("{kind} `{id}`"),
            not_found: Some(format!(
                "no {kind} `{id}` in fireflies (or the API key's user cannot see it)"
            )),
        }
    }

    /// An action: `Subject::action("uploading `standup.mp3`")`; a not-found names Fireflies'
    /// own message.
    pub(crate) fn action(description: impl Into<String>) -> Self {
        Subject { description: description.into(), not_found: None }
    }

    /// A listing or a search.
    pub(crate) fn listing(description: impl Into<String>) -> Self {
        Subject { description: description.into(), not_found: None }
    }

    /// `transcript `abc``, `the transcript listing`.
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

/// Whether a GraphQL document is a query, which reads and may be sent again, rather than a
/// mutation or a subscription: its first definition is `query …` or the `{ … }` shorthand. A
/// document this does not recognise counts as a write, so it is never repeated on its own.
pub(crate) fn is_query(document: &str) -> bool {
    let mut rest = document;
    // GraphQL ignores whitespace, commas, a byte order mark and `#` comments before a definition.
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',' || c == '\u{feff}');
        match rest.strip_prefix('#') {
            Some(comment) => rest = comment.split_once('\n').map_or("", |(_, next)| next),
            None => break,
        }
    }
    rest.starts_with('{')
        || rest.strip_prefix("query").is_some_and(|after| {
            !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// A response read to the end.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

/// Fireflies' GraphQL envelope: `{"data": {...}, "errors": [...]}`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Envelope {
    #[serde(default)]
    pub(crate) data: Option<Value>,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) errors: Vec<GraphQlError>,
}

/// One entry of `errors`: `{"message", "code", "friendly", "extensions": {"code", "status",
/// "metadata"}}`.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct GraphQlError {
    #[serde(default)]
    pub(crate) message: Option<String>,
    #[serde(default)]
    pub(crate) code: Option<String>,
    #[serde(default)]
    pub(crate) extensions: Option<Extensions>,
}

/// The `extensions` of an error entry.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct Extensions {
    #[serde(default)]
    pub(crate) code: Option<String>,
    /// The HTTP status the error stands for (a number, sometimes a string).
    #[serde(default)]
    pub(crate) status: Option<Value>,
    /// `{"retryAfter": ...}` on `too_many_requests`, `{"objectType": "User"}` on
    /// `object_not_found`, `{"fields": [...]}` on `invalid_arguments`.
    #[serde(default)]
    pub(crate) metadata: Option<Value>,
    /// A `retryAfter` outside `metadata`, as some responses put it.
    #[serde(default, rename = "retryAfter")]
    pub(crate) retry_after: Option<Value>,
}

impl GraphQlError {
    /// The error code, lowercase: `extensions.code`, else `code`.
    pub(crate) fn code(&self) -> Option<String> {
        self.extensions
            .as_ref()
            .and_then(|e| e.code.clone())
            .or_else(|| self.code.clone())
            .map(|c| c.to_ascii_lowercase())
    }

    /// `extensions.status` as a number.
    pub(crate) fn status(&self) -> Option<u16> {
        match self.extensions.as_ref()?.status.as_ref()? {
            Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    fn metadata(&self, key: &str) -> Option<&Value> {
        self.extensions.as_ref()?.metadata.as_ref()?.get(key)
    }

    fn message(&self) -> &str {
        self.message.as_deref().unwrap_or("no message")
    }

    /// `invalid_arguments: Invalid argument(s) were provided`.
    fn summary(&self) -> String {
        match self.code() {
            Some(code) => format!("{code}: {}", self.message()),
            None => self.message().to_owned(),
        }
    }

    fn is_rate_limit(&self) -> bool {
        self.code().as_deref() == Some("too_many_requests") || self.status() == Some(429)
    }

    /// `retryAfter` from `extensions.metadata` (or `extensions`): an epoch time in milliseconds
    /// (what Fireflies sends), an epoch time in seconds, or seconds to wait; turned into a wait.
    fn retry_after(&self, now: SystemTime) -> Option<Duration> {
        let value = self
            .metadata("retryAfter")
            .or_else(|| self.extensions.as_ref()?.retry_after.as_ref())?;
        let number = match value {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => match s.trim().parse::<f64>() {
                Ok(n) => Some(n),
                Err(_) => return parse_retry_after(s, now),
            },
            _ => None,
        }?;
        if !number.is_finite() || number < 0.0 {
            return None;
        }
        let now_ms = now.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as f64).unwrap_or(0.0);
        let wait_ms = if number >= 1e12 {
            number - now_ms
        } else if number >= 1e9 {
            number * 1000.0 - now_ms
        } else {
            number * 1000.0
        };
        Some(Duration::from_secs((wait_ms.max(0.0) / 1000.0).ceil() as u64))
    }
}

/// What a rate-limited response said about when to retry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RateLimit {
    /// How long to wait; `None` when the response said neither how long nor until when.
    pub(crate) wait: Option<Duration>,
    /// Fireflies' message.
    pub(crate) message: Option<String>,
}

impl RateLimit {
    /// A 429, or a `too_many_requests` error entry (with any HTTP status). The wait comes from
    /// `Retry-After`, else the entry's `retryAfter`, else `x-ratelimit-reset`.
    pub(crate) fn of(reply: &Reply, envelope: Option<&Envelope>, now: SystemTime) -> Option<Self> {
        let entry = envelope.and_then(|e| e.errors.iter().find(|e| e.is_rate_limit()));
        if reply.status != 429 && entry.is_none() {
            return None;
        }
        let signal = Signal::from_headers(
            |name| header(&reply.headers, name),
            "x-ratelimit-reset",
            "x-ratelimit-remaining",
            "x-ratelimit-limit",
        );
        let now_s = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let wait = signal
            .retry_after
            .or_else(|| entry.and_then(|e| e.retry_after(now)))
            .or_else(|| signal.wait(now_s))
            .map(|w| w.max(Duration::from_secs(1)));
        Some(RateLimit { wait, message: entry.and_then(|e| e.message.clone()) })
    }
}

impl Client {
    /// Builds the reqwest client (once per provider).
    pub(crate) fn new(settings: ClientSettings) -> Result<Self, String> {
        let mut builder = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .user_agent(concat!("quiver-provider-fireflies/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = &settings.ca_certificates {
            let certificates = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| {
                format!("[providers.fireflies] ca_file is not a usable PEM bundle: {e}")
            })?;
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let http = builder.build().map_err(|e| {
            format!(
                "could not build the fireflies client: {}; if no CA certificates are installed, \
                 install them (ca-certificates) or point SSL_CERT_FILE at a bundle",
                error_chain(&e)
            )
        })?;
        Ok(Self { http, settings })
    }

    /// Runs a GraphQL query and reads `data.<root>` into `T` (`None` when it is null). Waits out
    /// short rate limits (up to `max_retry_wait_s`, at most [`MAX_RETRIES`] times), sends a query
    /// again after a passing fault ([`TransientRetries`]; a mutation never, see [`is_query`]) and
    /// turns every error entry or non-2xx answer into a [`ToolError`].
    pub(crate) async fn query<T: DeserializeOwned>(
        &self,
        query: &str,
        variables: Value,
        root: &str,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<Option<T>, ToolError> {
        let Some(token) = self.settings.token.as_deref() else {
            return Err(self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "no Fireflies API key is configured for {}: {} to a key from \
                     app.fireflies.ai → Integrations → Fireflies API",
                    subject.describe(),
                    self.set_token_hint()
                ),
            ));
        };
        let body = json!({ "query": query, "variables": variables });
        let mut budget =
            RetryBudget::new(self.settings.max_retry_wait, MAX_RETRIES, ctx.timeout_ms);
        let mut transient = TransientRetries::new(ctx.timeout_ms);
        // Every operation is a POST, so the document says whether it reads: only a query is sent
        // again after a passing fault, since a mutation may have landed.
        let idempotent = is_query(query);
        loop {
            let reply = match self.send_once(&body, token, subject, ctx).await {
                Ok(reply) => reply,
                Err(failure) => {
                    if idempotent && failure.transient {
                        if let Some(pause) = transient.next_pause() {
                            tracing::debug!(
                                "fireflies: {} failed ({}); retrying in {} ms",
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
            note_rate_headroom(&Signal::from_headers(
                |name| header(&reply.headers, name),
                "x-ratelimit-reset",
                "x-ratelimit-remaining",
                "x-ratelimit-limit",
            ));
            let envelope = serde_json::from_str::<Envelope>(&reply.body).ok();
            // Before the 5xx retry: a `too_many_requests` entry rides on any status and is waited
            // out for as long as Fireflies asks, not after a short jittered pause.
            if let Some(limit) = RateLimit::of(&reply, envelope.as_ref(), SystemTime::now()) {
                if let Some(w) = budget.next_wait(limit.wait) {
                    tracing::debug!(
                        "fireflies rate limit on {}: waiting {} s before retrying",
                        subject.describe(),
                        w.as_secs_f32()
                    );
                    tokio::time::sleep(w).await;
                    continue;
                }
                return Err(self.rate_limited(&limit, &budget, subject));
            }
            if idempotent && is_transient_status(reply.status) {
                if let Some(pause) = transient.next_pause() {
                    tracing::debug!(
                        "fireflies answered {} for {}; retrying in {} ms",
                        reply.status,
                        subject.describe(),
                        pause.as_millis()
                    );
                    tokio::time::sleep(pause).await;
                    continue;
                }
            }
            return self.read(&reply, envelope, root, subject);
        }
    }

    /// The `data.<root>` of a reply that was not rate limited, or the error it carries.
    fn read<T: DeserializeOwned>(
        &self,
        reply: &Reply,
        envelope: Option<Envelope>,
        root: &str,
        subject: &Subject,
    ) -> Result<Option<T>, ToolError> {
        let Some(envelope) = envelope else {
            return Err(self.status_error(reply, subject));
        };
        let value = envelope.data.as_ref().and_then(|d| d.get(root)).filter(|v| !v.is_null());
        if let Some(first) = envelope.errors.first() {
            if value.is_none() || !(200..300).contains(&reply.status) {
                return Err(self.graphql_error(first, reply.status, subject));
            }
            // Partial data: the field asked for is there, a nested one failed.
            tracing::debug!(
                "fireflies answered {} with errors beside the data: {}",
                subject.describe(),
                first.summary()
            );
        }
        if !(200..300).contains(&reply.status) {
            return Err(self.status_error(reply, subject));
        }
        if envelope.data.is_none() {
            return Err(self.unreadable(subject, "it has neither `data` nor `errors`"));
        }
        match value {
            None => Ok(None),
            Some(v) => T::deserialize(v)
                .map(Some)
                .map_err(|e| self.unreadable(subject, &format!("`{root}`: {e}"))),
        }
    }

    async fn send_once(
        &self,
        body: &Value,
        token: &str,
        subject: &Subject,
        ctx: &ToolContext,
    ) -> Result<Reply, Failure> {
        let exchange = async {
            let mut request = self.http.post(&self.settings.endpoint).bearer_auth(token);
            // The caller's trace goes on at Fireflies.
            for (name, value) in ctx.trace_headers() {
                request = request.header(name, value);
            }
            let mut response =
                request.json(body).send().await.map_err(|e| self.transport_error(&e, subject))?;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            // Fireflies's own id of the request, for the audit trail.
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
                        return Err(Failure::transient(self.unreadable(subject, &error_chain(&e))));
                    }
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
            too_large_message("fireflies", subject.describe(), self.settings.max_response_bytes),
        )
    }

    fn transport_error(&self, e: &reqwest::Error, subject: &Subject) -> Failure {
        if e.is_timeout() {
            return Failure::fatal(self.timeout_error(subject));
        }
        let chain = error_chain(e);
        let advice = tls_advice("fireflies", &chain);
        let error = self.error(
            ToolErrorKind::Upstream,
            format!(
                "could not reach fireflies at {} for {}: {chain}{}",
                self.settings.endpoint,
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

    fn unreadable(&self, subject: &Subject, why: &str) -> ToolError {
        self.error(
            ToolErrorKind::Upstream,
            format!("fireflies returned an unreadable body for {}: {why}", subject.describe()),
        )
    }

    fn timeout_error(&self, subject: &Subject) -> ToolError {
        self.error(
            ToolErrorKind::Timeout,
            format!(
                "fireflies did not answer within {} s for {}; retry later, or raise \
                 [providers.fireflies] timeout_s",
                self.settings.timeout.as_secs(),
                subject.describe()
            ),
        )
    }

    fn set_token_hint(&self) -> String {
        set_token_hint("fireflies", &self.settings.token_env)
    }

    /// A non-2xx answer without a readable GraphQL body.
    fn status_error(&self, reply: &Reply, subject: &Subject) -> ToolError {
        let status = reply.status;
        let reason = reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .map(|r| format!("{status} {r}"))
            .unwrap_or_else(|| status.to_string());
        match status {
            200..=299 => self.unreadable(subject, "it is not GraphQL JSON"),
            401 => self.error(
                ToolErrorKind::Unauthorized,
                format!(
                    "fireflies rejected the API key ({reason}): {} to a valid key",
                    self.set_token_hint()
                ),
            ),
            403 => self.error(
                ToolErrorKind::Unauthorized,
                format!("fireflies refused {} ({reason})", subject.describe()),
            ),
            404 => self.error(
                ToolErrorKind::NotFound,
                format!(
                    "fireflies answered {reason} for {}: is [providers.fireflies] base_url `{}` \
                     the GraphQL endpoint?",
                    subject.describe(),
                    self.settings.endpoint
                ),
            ),
            500..=599 => self.error(
                ToolErrorKind::Upstream,
                format!("fireflies failed with {reason} on {}; retry later", subject.describe()),
            ),
            _ => self.error(
                ToolErrorKind::Upstream,
                format!("fireflies answered {reason} for {}", subject.describe()),
            ),
        }
    }

    /// The error an `errors` entry stands for.
    fn graphql_error(&self, e: &GraphQlError, http: u16, subject: &Subject) -> ToolError {
        let code = e.code().unwrap_or_default();
        let status = e.status().unwrap_or(http);
        let said = e.summary();
        let refused = |hint: &str| {
            self.error(
                ToolErrorKind::Unauthorized,
                format!("fireflies refused {} ({said}){hint}", subject.describe()),
            )
        };
        match code.as_str() {
            "auth_failed" | "invalid_api_key" | "unauthenticated" | "unauthorized"
            | "invalid_token" => self.auth_failed(&said),
            "require_elevated_privilege" => refused("; it needs the API key of a team admin"),
            "not_in_team" => refused("; that user is not in the API key's team"),
            "paid_required" => refused("; it needs a paid Fireflies plan"),
            "account_cancelled" => refused("; the Fireflies account is cancelled"),
            "forbidden" => refused("; the API key's user may not see it"),
            "object_not_found" | "not_found" => self.not_found(e, subject),
            "invalid_arguments" | "args_required" | "bad_user_input" => self.invalid(e, subject),
            "graphql_validation_failed" | "graphql_parse_failed" => self.error(
                ToolErrorKind::Upstream,
                format!(
                    "fireflies rejected the query for {} ({said}); its schema may have changed: \
                     update quiver-provider-fireflies",
                    subject.describe()
                ),
            ),
            _ => match status {
                401 => self.auth_failed(&said),
                402 | 403 => refused(""),
                404 => self.not_found(e, subject),
                400 | 422 => self.invalid(e, subject),
                500..=599 => self.error(
                    ToolErrorKind::Upstream,
                    format!("fireflies failed on {} ({said}); retry later", subject.describe()),
                ),
                _ => self.error(
                    ToolErrorKind::Upstream,
                    format!("fireflies answered an error for {} ({said})", subject.describe()),
                ),
            },
        }
    }

    fn auth_failed(&self, said: &str) -> ToolError {
        self.error(
            ToolErrorKind::Unauthorized,
            format!(
                "fireflies rejected the API key ({said}): {} to a valid key from \
                 app.fireflies.ai → Integrations → Fireflies API",
                self.set_token_hint()
            ),
        )
    }

    fn not_found(&self, e: &GraphQlError, subject: &Subject) -> ToolError {
        let message = match &subject.not_found {
            Some(message) => message.clone(),
            None => {
                let what = e
                    .metadata("objectType")
                    .and_then(Value::as_str)
                    .map(|t| format!(" {}", t.to_ascii_lowercase()))
                    .unwrap_or_default();
                format!(
                    "fireflies found no such{what} for {} ({}); check the emails and ids given",
                    subject.describe(),
                    e.message()
                )
            }
        };
        self.error(ToolErrorKind::NotFound, message)
    }

    fn invalid(&self, e: &GraphQlError, subject: &Subject) -> ToolError {
        let fields: Vec<String> = e
            .metadata("fields")
            .and_then(Value::as_array)
            .map(|fields| {
                fields
                    .iter()
                    .take(5)
                    .filter_map(|f| {
                        let name = f.get("name").and_then(Value::as_str);
                        match (name, f.get("message").and_then(Value::as_str)) {
                            (_, Some(message)) => Some(message.to_owned()),
                            (Some(name), None) => Some(format!("`{name}` is invalid")),
                            _ => None,
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let details =
            if fields.is_empty() { String::new() } else { format!(": {}", fields.join("; ")) };
        self.error(
            ToolErrorKind::InvalidArguments,
            format!(
                "fireflies rejected the arguments of {} ({}){details}",
                subject.describe(),
                e.summary()
            ),
        )
    }

    fn rate_limited(
        &self,
        limit: &RateLimit,
        budget: &RetryBudget,
        subject: &Subject,
    ) -> ToolError {
        let waited = budget.waited();
        let mut message = format!(
            "fireflies rate limit exceeded for {} ({})",
            subject.describe(),
            limit.message.as_deref().unwrap_or("too many requests")
        );
        if !waited.is_zero() {
            message.push_str(&format!(" even after waiting {} s", waited.as_secs()));
        }
        match limit.wait {
            Some(w) => message.push_str(&format!(
                "; fireflies asks to retry in {} (at {})",
                human_duration(w),
                format_unix_time(unix_now() + w.as_secs())
            )),
            None => message.push_str("; fireflies gave no retry time (wait at least a minute)"),
        }
        // Unlike the SDK's RetryBudget::advice, a limit that named no wait does not blame
        // max_retry_wait_s.
        if budget.past_deadline(limit.wait) {
            message.push_str(", past this call's deadline: retry later");
        } else if waited.is_zero() && limit.wait.is_some() {
            message.push_str(&format!(
                ", longer than [providers.fireflies] max_retry_wait_s = {} s allows: retry \
                 later, or raise max_retry_wait_s",
                self.settings.max_retry_wait.as_secs()
            ));
        } else {
            message.push_str(": retry later, or raise [providers.fireflies] max_retry_wait_s");
        }
        self.error(ToolErrorKind::RateLimited, message).with_retry_after(limit.wait)
    }

    /// An error whose message never contains the key, whatever Fireflies echoed.
    pub(crate) fn error(&self, kind: ToolErrorKind, message: String) -> ToolError {
        ToolError::new(kind, mask_secret(message, self.settings.token.as_deref()))
    }
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn reply(status: u16, headers: &[(&'static str, &str)], body: &str) -> Reply {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(*k, HeaderValue::from_str(v).unwrap());
        }
        Reply { status, headers: map, body: body.to_owned() }
    }

    fn envelope(body: &str) -> Envelope {
        serde_json::from_str(body).unwrap()
    }

    const NOW_MS: u64 = 1_720_000_000_000;

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(NOW_MS)
    }

    #[test]
    fn rate_limits_come_from_the_status_or_the_error_code_and_say_how_long() {
        let limited = reply(429, &[("retry-after", "3")], "");
        assert_eq!(
            RateLimit::of(&limited, None, now()).unwrap().wait,
            Some(Duration::from_secs(3))
        );

        // Fireflies' `retryAfter` is an epoch time in milliseconds.
        let body = format!(
            r#"{{"data": null, "errors": [{{"message": "Too many requests",
                "code": "too_many_requests", "extensions": {{"code": "too_many_requests",
                "status": 429, "metadata": {{"retryAfter": {}}}}}}}]}}"#,
            NOW_MS + 42_500
        );
        let ok_status = reply(200, &[], &body);
        let limit = RateLimit::of(&ok_status, Some(&envelope(&body)), now()).unwrap();
        assert_eq!(limit.wait, Some(Duration::from_secs(43)), "rounded up");
        assert_eq!(limit.message.as_deref(), Some("Too many requests"));

        // Seconds to wait, and a status in the extensions only.
        let body = r#"{"errors": [{"message": "slow down",
            "extensions": {"status": "429", "retryAfter": 5}}]}"#;
        let limit = RateLimit::of(&reply(200, &[], body), Some(&envelope(body)), now()).unwrap();
        assert_eq!(limit.wait, Some(Duration::from_secs(5)));

        let body = r#"{"errors": [{"message": "nope", "code": "forbidden"}]}"#;
        assert!(RateLimit::of(&reply(200, &[], body), Some(&envelope(body)), now()).is_none());
        let silent = RateLimit::of(&reply(429, &[], ""), None, now()).unwrap();
        assert_eq!(silent.wait, None);
    }

    #[test]
    fn only_queries_count_as_reads() {
        for read in [
            "query GetTranscript($id: String!) { transcript(id: $id) { id } }",
            "  \n# the kickoff\n, query{ user { email } }",
            "\u{feff}{ user { email } }",
            "query { user { email } }",
        ] {
            assert!(is_query(read), "{read:?}");
        }
        for write in [
            "mutation DeleteTranscript($id: String!) { deleteTranscript(id: $id) { id } }",
            "# query\nmutation { setUserRole(user_id: \"u\", role: admin) { id } }",
            "subscription { transcripts { id } }",
            "queryX { a }",
            "fragment F on Transcript { id } query Q { transcripts { ...F } }",
            "",
            "# only a comment",
        ] {
            assert!(!is_query(write), "{write:?}");
        }
    }

    /// A mutation may have landed before the fault: it is sent once, and the fault reported.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_mutation_answered_503_is_not_sent_again() {
        use wiremock::matchers::method;
        use wiremock::{Mock, MockServer, ResponseTemplate};

        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(503).set_body_raw("busy", "text/plain"))
            .mount(&server)
            .await;
        let client = Client::new(ClientSettings {
            endpoint: format!("{}/graphql", server.uri()),
            token: Some("ff_key".into()),
            token_env: "FIREFLIES_API_KEY".into(),
            timeout: Duration::from_secs(5),
            max_retry_wait: Duration::from_secs(1),
            ca_certificates: None,
            max_response_bytes: 1024 * 1024,
        })
        .unwrap();
        let subject = Subject::transcript("01J2XKQ4TV7Z8R5M9N3B6C1D0E");
        let mutation = "mutation Delete($id: String!) { deleteTranscript(id: $id) { id } }";
        let ctx = ToolContext::default();
        let error = client
            .query::<Value>(mutation, json!({"id": "01J2"}), "deleteTranscript", &subject, &ctx)
            .await
            .unwrap_err();
        assert_eq!(error.kind, ToolErrorKind::Upstream);
        assert!(error.message.contains("503 Service Unavailable"), "{}", error.message);
        assert_eq!(server.received_requests().await.unwrap().len(), 1, "never sent twice");

        // The same fault on a query is a passing one: the query is sent again.
        let query = "query Get($id: String!) { transcript(id: $id) { id } }";
        client
            .query::<Value>(query, json!({"id": "01J2"}), "transcript", &subject, &ctx)
            .await
            .unwrap_err();
        assert_eq!(
            server.received_requests().await.unwrap().len(),
            1 + 3,
            "the first try and two retries"
        );
    }

    #[test]
    fn error_entries_read_codes_and_statuses_from_either_place() {
        let e: GraphQlError = serde_json::from_value(json!({
            "message": "x", "code": "AUTH_FAILED", "extensions": {"status": 401}
        }))
        .unwrap();
        assert_eq!(e.code().as_deref(), Some("auth_failed"));
        assert_eq!(e.status(), Some(401));
        let bare: Envelope =
            serde_json::from_str(r#"{"data": {"transcript": null}, "errors": null}"#).unwrap();
        assert!(bare.errors.is_empty());
    }
}
