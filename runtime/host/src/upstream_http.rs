//! The HTTP client of an upstream reached over Streamable HTTP: reqwest, as the MCP library's own
//! client is, which also reads the tools' `execution` hints (2025-11-25) that the library's
//! tool type has no field for — so quiver knows which tools the server runs only as a task.
//!
//! Each `tools/list` of a session is sent once more, by this client, and its raw answer read
//! for `execution`; the library's own request then goes as it would. Nothing else differs from
//! the library's client: the same pooling, the same same-origin redirects.
//!
//! Depends on the MCP library's transport trait and reqwest; not on the rest of the host.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde_json::{json, Value};

use crate::upstream::{keep_executions, Executions};

/// How long the extra `tools/list` may take; past it the hints are not read, nothing else fails.
const LISTING_TIMEOUT: Duration = Duration::from_secs(30);

/// The most bytes of the extra listing read (the library's own bound on a frame).
const MAX_LISTING_BYTES: usize = 16 * 1024 * 1024;

/// The most redirects followed for one request, as the library's client does.
const MAX_REDIRECTS: usize = 10;

/// reqwest for one upstream, keeping its tools' `execution` hints in `executions`.
#[derive(Clone)]
pub(crate) struct ListingReader {
    http: reqwest013::Client,
    executions: Executions,
}

impl ListingReader {
    pub(crate) fn new(executions: Executions) -> Self {
        // As the library's default client: no idle pooling (it stalls on delayed ACKs), and only
        // same-origin 307/308 redirects, which keep the method and the body.
        let redirects = reqwest013::redirect::Policy::custom(|attempt| {
            let same_origin = attempt.previous().first().is_some_and(|first| {
                first.scheme() == attempt.url().scheme()
                    && first.host_str() == attempt.url().host_str()
                    && first.port_or_known_default() == attempt.url().port_or_known_default()
            });
            let keeps_body = matches!(attempt.status().as_u16(), 307 | 308);
            if same_origin && keeps_body && attempt.previous().len() <= MAX_REDIRECTS {
                attempt.follow()
            } else {
                attempt.stop()
            }
        });
        let http = reqwest013::Client::builder()
            .pool_max_idle_per_host(0)
            .redirect(redirects)
            .build()
            .unwrap_or_default();
        Self { http, executions }
    }

    /// Sends `listing` (a `tools/list` request) again under its own id and keeps the
    /// `execution` of each tool its answer — JSON or an event stream — lists.
    async fn read_executions(
        &self,
        uri: &str,
        listing: &Value,
        session_id: &str,
        auth_header: Option<&str>,
        custom_headers: &HashMap<HeaderName, HeaderValue>,
    ) {
        let mut body = listing.clone();
        body["id"] = json!(format!("quiver-execution-hints-{}", listing["id"]));
        let mut request = self
            .http
            .post(uri)
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .header(http::header::CONTENT_TYPE, "application/json")
            .header("mcp-session-id", session_id)
            .timeout(LISTING_TIMEOUT);
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        let Ok(response) = request.body(body.to_string()).send().await else { return };
        if !response.status().is_success()
            || response.content_length().is_some_and(|n| n as usize > MAX_LISTING_BYTES)
        {
            return;
        }
        let Ok(text) = response.text().await else { return };
        if text.len() > MAX_LISTING_BYTES {
            return;
        }
        let trimmed = text.trim_start();
        if trimmed.starts_with('{') {
            keep_executions(trimmed.as_bytes(), &self.executions);
            return;
        }
        // An event stream: each event's data is one message.
        for line in text.lines() {
            if let Some(data) = line.strip_prefix("data:") {
                keep_executions(data.trim().as_bytes(), &self.executions);
            }
        }
    }
}

impl StreamableHttpClient for ListingReader {
    type Error = reqwest013::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.http
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        // Only a session's listings carry the hint: 2025-11-25 is the revision with sessions
        // and with `execution`; 2026-07-28 servers decide on tasks themselves.
        if let Some(session) = session_id.as_deref() {
            let json = serde_json::to_value(&message).unwrap_or(Value::Null);
            if json.get("method").and_then(Value::as_str) == Some("tools/list") {
                self.read_executions(&uri, &json, session, auth_header.as_deref(), &custom_headers)
                    .await;
            }
        }
        self.http
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.http.delete_session(uri, session_id, auth_header, custom_headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<
        BoxStream<'static, Result<sse_stream::Sse, SseError>>,
        StreamableHttpError<Self::Error>,
    > {
        self.http.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<
        BoxStream<'static, Result<sse_stream::Sse, SseError>>,
        StreamableHttpError<Self::Error>,
    > {
        self.http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
