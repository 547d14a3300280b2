//! OpenTelemetry traces (`[telemetry.otlp]`): quiver's spans — an MCP request, the session's
//! part of it (cache, coalescing, policy), the planner and each pre-fetch, the provider or
//! upstream call — exported over OTLP by the `opentelemetry` SDK through
//! `tracing-opentelemetry`. Only spans are exported, never log events (which preview
//! arguments): a span's attributes are names, ids, counts and outcomes, never an argument
//! value or a token. W3C trace context comes in from the client (`traceparent` over HTTP and in
//! a request's `_meta`) and goes on to upstreams (`_meta`) and to services (the `traceparent`
//! header of a provider's requests).
//!
//! Depends on the host's configuration only; the server and the CLI set it up.

use std::collections::HashMap;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use serde::Deserialize;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `tracing` target of every span quiver exports.
pub const TARGET: &str = "quiver::trace";

/// The share of requests traced, once an exporter runs ([`start`]).
static RATIO: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

tokio::task_local! {
    /// Whether the request this task serves is traced: decided once, at the request
    /// ([`head_sampled`]), so an untraced request makes no span at all — sampling that only
    /// dropped spans at export would still pay for building every one.
    static TRACED: bool;
}

/// Whether spans are made here: inside a traced request ([`within`]); never outside one.
pub fn traced() -> bool {
    TRACED.try_with(|traced| *traced).unwrap_or(false)
}

/// `future` run as part of a request that is traced or not.
pub async fn within<F: std::future::Future>(traced: bool, future: F) -> F::Output {
    TRACED.scope(traced, future).await
}

/// `future`, to be spawned for the current request (a pre-fetch), traced as the request is.
pub fn carried<F: std::future::Future>(future: F) -> impl std::future::Future<Output = F::Output> {
    TRACED.scope(traced(), future)
}

/// Whether a request is traced: as the client's `traceparent` says when it sent one (its
/// sampled flag), else one in `1 / sample_ratio`; never while no exporter runs.
pub fn head_sampled(fields: &HashMap<String, String>) -> bool {
    let Some(ratio) = RATIO.get().copied() else { return false };
    if let Some(parent) = fields.get("traceparent") {
        // `00-<trace id>-<span id>-<flags>`: bit 0 of the flags is "sampled".
        if let Some(flags) = parent.rsplit('-').next().and_then(|f| u8::from_str_radix(f, 16).ok())
        {
            return flags & 1 == 1;
        }
    }
    if ratio >= 1.0 {
        return true;
    }
    // A fresh random draw per request, from the standard library's hasher keys.
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0);
    (hasher.finish() as f64 / u64::MAX as f64) < ratio
}

/// A span of quiver's (target [`TARGET`], level INFO) when the current request is traced
/// ([`traced`]), else no span: `traced_span!("session", otel.name = "quiver session", …)`.
#[macro_export]
macro_rules! traced_span {
    ($($field:tt)*) => {
        if $crate::traces::traced() {
            ::tracing::info_span!(target: $crate::traces::TARGET, $($field)*)
        } else {
            ::tracing::Span::none()
        }
    };
}

/// How spans travel to the collector.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OtlpProtocol {
    /// OTLP/HTTP with protobuf bodies (`/v1/traces`, port 4318 by convention).
    #[default]
    Http,
    /// OTLP/gRPC (port 4317 by convention), through tonic.
    Grpc,
}

/// `[telemetry.otlp]` in quiver.toml.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpConfig {
    /// The collector: `http://collector:4318` (`/v1/traces` is added for HTTP unless given).
    pub endpoint: Option<String>,
    /// `http` (the default) or `grpc`.
    pub protocol: OtlpProtocol,
    /// The share of traces kept, from 0 to 1 (1 when unset); a client's sampled flag wins.
    pub sample_ratio: f64,
    /// The variable holding headers for the collector (`authorization=Bearer …,x-team=a`):
    /// never written in the config.
    pub headers_env: Option<String>,
    /// `service.name` of the spans ("quiver" when unset).
    pub service_name: Option<String>,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        Self {
            endpoint: None,
            protocol: OtlpProtocol::Http,
            sample_ratio: 1.0,
            headers_env: None,
            service_name: None,
        }
    }
}

/// The layer [`start`] makes, for the subscriber's registry.
pub type TracesLayer =
    Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

/// The exporter, running: spans still queued are sent when it is dropped.
pub struct Traces {
    provider: SdkTracerProvider,
    /// gRPC's client (tonic) runs on a Tokio runtime of its own, kept for as long as spans are
    /// sent: the batch exporter's thread has none.
    _grpc_runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Traces {
    fn drop(&mut self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("quiver: the last spans could not be sent to the collector: {e}");
        }
    }
}

/// The headers for the collector: `k=v,k2=v2` from the variable `headers_env` names (values may
/// hold `=`); none without one. An error names the variable and the fix.
pub fn collector_headers(config: &OtlpConfig) -> Result<HashMap<String, String>, String> {
    match &config.headers_env {
        Some(name) => headers_from(name),
        None => Ok(HashMap::new()),
    }
}

fn headers_from(name: &str) -> Result<HashMap<String, String>, String> {
    // Set but empty is as good as unset: whoever named the variable meant headers to be sent.
    let text = std::env::var(name).ok().filter(|v| !v.trim().is_empty()).ok_or_else(|| {
        format!(
            "[telemetry.otlp] headers_env names {name}, which is not set; set it or remove the key"
        )
    })?;
    text.split(',')
        .filter(|pair| !pair.trim().is_empty())
        .map(|pair| {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("{name} must hold `key=value` pairs separated by commas"))?;
            Ok((key.trim().to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// Starts exporting as `config` says: the running exporter, and the layer that turns quiver's
/// spans into OpenTelemetry spans (for [`crate::logging::init_with_traces`]). `Ok(None)` when no
/// endpoint is configured.
pub fn start(config: &OtlpConfig) -> Result<Option<(Traces, TracesLayer)>, String> {
    use tracing_subscriber::Layer;

    let Some(endpoint) = config.endpoint.as_deref().filter(|e| !e.trim().is_empty()) else {
        return Ok(None);
    };
    if !(0.0..=1.0).contains(&config.sample_ratio) {
        return Err(format!(
            "[telemetry.otlp] sample_ratio is {}; give a share from 0 to 1 (0.01: one trace in a \
             hundred)",
            config.sample_ratio
        ));
    }
    // The exporter's HTTP client is reqwest on rustls without a provider of its own.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let headers = collector_headers(config)?;
    let mut grpc_runtime = None;
    let exporter = match config.protocol {
        OtlpProtocol::Http => {
            let endpoint = endpoint.trim_end_matches('/');
            let endpoint = if endpoint.ends_with("/v1/traces") {
                endpoint.to_owned()
            } else {
                format!("{endpoint}/v1/traces")
            };
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(endpoint)
                .with_headers(headers)
                .build()
        }
        OtlpProtocol::Grpc => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("quiver-otlp")
                .enable_all()
                .build()
                .map_err(|e| format!("[telemetry.otlp]: no runtime for gRPC: {e}"))?;
            let mut metadata = tonic::metadata::MetadataMap::new();
            for (key, value) in &headers {
                let key = tonic::metadata::MetadataKey::from_bytes(key.as_bytes());
                if let (Ok(key), Ok(value)) = (key, value.parse()) {
                    metadata.insert(key, value);
                }
            }
            // The channel keeps the runtime it is made in.
            let built = {
                let _entered = runtime.enter();
                opentelemetry_otlp::SpanExporter::builder()
                    .with_tonic()
                    .with_endpoint(endpoint)
                    .with_metadata(metadata)
                    .build()
            };
            grpc_runtime = Some(runtime);
            built
        }
    }
    .map_err(|e| format!("[telemetry.otlp] endpoint {endpoint}: {e}"))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(config.service_name.clone().unwrap_or_else(|| "quiver".to_owned()))
        .build();
    let _ = RATIO.set(config.sample_ratio);
    // Sampled at the request ([`head_sampled`]): a span made is a span kept.
    let provider = SdkTracerProvider::builder()
        .with_sampler(Sampler::AlwaysOn)
        .with_resource(resource)
        .with_batch_exporter(exporter)
        .build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let tracer = provider.tracer("quiver");
    // Spans of quiver's own only (log events preview arguments, and libraries' spans say
    // nothing a trace of quiver needs) — decided once per call site: a filter asked at each
    // event would make every `debug!` of the hot path ask it. quiver logs no event under
    // this target.
    let only_spans =
        tracing_subscriber::filter::Targets::new().with_target(TARGET, tracing::Level::INFO);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false)
        // Where in quiver's code and on which thread say nothing to an operator, and cost an
        // allocation per span.
        .with_location(false)
        .with_threads(false)
        .with_level(false)
        .with_target(false)
        // Nothing reads OpenTelemetry's current context (the trace is passed on from the span
        // itself), and an instrumented future enters its span at every poll.
        .with_context_activation(false)
        .with_filter(only_spans);
    Ok(Some((Traces { provider, _grpc_runtime: grpc_runtime }, Box::new(layer))))
}

/// A W3C `traceparent` (and `tracestate`) carried in a map: HTTP headers or an MCP `_meta`.
struct Carrier<'a>(&'a HashMap<String, String>);

impl Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// Makes the context in `fields` (`traceparent`, `tracestate`) the parent of `span`, when it
/// holds a valid one.
pub fn continue_trace(span: &tracing::Span, fields: &HashMap<String, String>) {
    if !fields.contains_key("traceparent") {
        return;
    }
    let context = TraceContextPropagator::new().extract(&Carrier(fields));
    let _ = span.set_parent(context);
}

/// The W3C fields (`traceparent`, `tracestate`) that continue `span`'s trace elsewhere: an
/// upstream's `_meta`, a service's headers. Empty when the span is not exported.
pub fn context_of(span: &tracing::Span) -> HashMap<String, String> {
    struct Fields(HashMap<String, String>);
    impl Injector for Fields {
        fn set(&mut self, key: &str, value: String) {
            self.0.insert(key.to_owned(), value);
        }
    }
    let mut fields = Fields(HashMap::new());
    let context = span.context();
    TraceContextPropagator::new().inject_context(&context, &mut fields);
    fields.0
}
