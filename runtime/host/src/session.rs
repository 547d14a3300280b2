//! A session: the calls of one agent conversation (an MCP connection, a framework's run) through
//! the host, with what the value models ask of them — a repeat inside `freshness_ttl_s` is served
//! from the session cache as a short reference, a mutation drops the cached results it makes
//! stale (`invalidates`), the n+1-th identical unproductive call is stopped with a hint
//! (`fail_fast_after_n`), and results are trimmed to the field groups worth their tokens, with a
//! note saying how to ask for the rest.
//!
//! With `[enrichment] enabled = true`, each successful call is followed by a plan of its likely
//! follow-ups (the planner, under `prefetch_budget_tokens`, admitting only links at least
//! `min_prefetch_probability` likely — each link's probability moved by what this session's
//! agent did with it), run in the background with the provider's own argument projection (its
//! first `max_prefetches_per_link`); the response waits at most `prefetch_timeout_ms` (0 by
//! default) for them and says in one line what landed. A tool whose pre-fetches the session
//! left unused `stop_after_unused` times is not pre-fetched there again, and a service whose
//! rate window (as its last response reported it) is running out towards
//! `prefetch_rate_reserve` gets only ever likelier pre-fetches, none below the reserve. Late
//! results still land in the cache. A call whose
//! pre-fetch is still running joins it instead of asking the provider again (it waits at most its
//! own timeout, and calls the provider itself if the pre-fetch fails); a pre-fetched result is
//! delivered whole the first time the agent asks for it. [`Session::shutdown`] (or dropping the
//! session) cancels and drains everything in flight.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quiver_core::planner::{self, predicted_tokens, PlannerOptions};
use quiver_core::response_projection::estimate_tokens;
use quiver_core::response_projection::{project, Requested};
use quiver_core::session_cache::{
    is_control_argument, is_unproductive, qualified_invalidations, tool_declares_fields, ttl_of,
    CallKey,
};
use quiver_core::telemetry::{arguments_hash, CallEvent, EventKind};
use quiver_core::tool::RETRY_AFTER_METADATA;
use quiver_core::{Content, ToolErrorKind, ToolResult, ToolValueModel};
use serde_json::{json, Map, Value};
use tokio::task::JoinSet;

use crate::host::{Host, DEFAULT_CALL_TIMEOUT};
use crate::registry::RegisteredTool;
use crate::speculation::{may_prefetch, Landing, Prefetches};
use crate::state::{Ending, Flight, FlightLease, Permit};
use crate::telemetry::now_ms;

/// Results kept per session, by default.
pub const DEFAULT_CACHE_CAPACITY: usize = 256;

/// How often a call waiting for its pre-fetch looks at its cancellation flag.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// The control argument that bypasses the cache (`"_fresh": true`).
pub const FRESH_ARGUMENT: &str = "_fresh";

/// Tokens per KiB for predictions in telemetry, and for turning observed result sizes back into
/// a cost model's `typical_kb`: the planner's default.
pub(crate) const TOKENS_PER_KB: f64 = 256.0;

/// What a session call did besides calling the provider, for telemetry and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CallEffects {
    /// Served without calling the provider: from the session cache, or by a pre-fetch of the
    /// same call (see [`CallEffects::prefetch_hit`]).
    pub cache_hit: bool,
    /// Served by a pre-fetch: one that had landed and that the agent had not seen yet, or one
    /// still in flight that the call joined. The result is delivered whole.
    pub prefetch_hit: bool,
    /// Stopped by `fail_fast_after_n`; the provider was not called.
    pub stopped: bool,
    /// Estimated tokens of the provider's structured result.
    pub tokens_before: u64,
    /// Estimated tokens after projection.
    pub tokens_after: u64,
    /// Pre-fetches started after this call.
    pub prefetches_started: usize,
    /// Pre-fetches that landed in the cache before the response went back.
    pub prefetches_landed: usize,
}

/// One conversation's calls through a host.
pub struct Session {
    host: Arc<Host>,
    id: String,
    /// Whose cached results this session reads and writes (see [`Session::with_scope`]).
    scope: String,
    /// The scope is the fingerprint of the credentials a call acts with, the account it acts as
    /// ([`acting_as`]) included ([`Session::scoped_by_credentials`]).
    scope_follows_credentials: bool,
    /// Whose credentials its calls use, which decides the per-host concurrency budget they
    /// draw on and the rate limits that hold for them: the host's own
    /// ([`crate::state::SHARED_CREDENTIALS`]) unless [`Session::with_scope`] named a caller's.
    /// With [`Session::with_credentials`], each call's own token decides instead (see
    /// [`Session::credentials_scope_for`]).
    credentials_scope: String,
    /// Whose pipeline state (recent calls, fail-fast counters) this session keeps.
    caller: String,
    timeout: Option<Duration>,
    /// Pre-fetches of each call, kept so the session can cancel and drain them; dropping the
    /// session drops the sets, which aborts their tasks.
    prefetches: tokio::sync::Mutex<Vec<JoinSet<Option<String>>>>,
    /// The same pre-fetches by call, for joining them and delivering them whole once.
    prefetched: Arc<Mutex<Prefetches>>,
    cancelled: Arc<AtomicBool>,
    /// The authenticated user this session serves, named in its telemetry.
    user: Option<String>,
    /// The user's own provider credentials, for every call and pre-fetch of this session (a
    /// call acting as a signed-in account adds it: [`acting_as`]).
    credentials: Option<Arc<crate::host::Credentials>>,
    /// A repeat returns the data again rather than a reference to an earlier answer.
    repeats_as_data: bool,
    /// Calls made so far, for telling a pre-fetch that had its chance from one just started.
    calls_made: std::sync::atomic::AtomicU64,
    /// This session's pre-fetches: which tool, which call, at which call, and whether the agent
    /// used it — a tool whose pre-fetches go unused stops being pre-fetched here.
    prefetch_log: Mutex<Vec<PrefetchRecord>>,
    /// What the agent did with each follow-up link in this session: the link's probability for
    /// the planner is moved by it ([`planner::session_probability`]).
    link_outcomes: Mutex<HashMap<(String, String), LinkOutcomes>>,
    /// Calls the links of recent answers projected, not yet made or missed.
    predictions: Mutex<Vec<Prediction>>,
    /// With `[telemetry] record_sessions`: where each call and its whole result are recorded.
    recorder: Option<crate::recording::SessionRecorder>,
    /// Whether a pre-fetch of a tool (qualified name) with these arguments may be made: the
    /// caller's own limits on where calls may reach (a server's scope rules), which a
    /// pre-fetch, made on the caller's behalf, obeys too.
    prefetch_guard: Option<PrefetchGuard>,
}

tokio::task_local! {
    /// The provider and account the calls of a task act as (see [`acting_as`]).
    static CALL_ACCOUNT: (String, crate::host::Credential);
}

/// Runs `call` — a session's call, and the pre-fetches it starts — with `credential` for
/// `provider` (a user's signed-in account, chosen for this call), over the session's own: two
/// calls of one user acting as two accounts at once each keep their own.
pub async fn acting_as<F: std::future::Future>(
    provider: &str,
    credential: crate::host::Credential,
    call: F,
) -> F::Output {
    CALL_ACCOUNT.scope((provider.to_owned(), credential), call).await
}

/// The signed-in account the calls of this task act as at `provider` ([`acting_as`]), if any.
pub fn acting_account(provider: &str) -> Option<crate::accounts::AccountToken> {
    CALL_ACCOUNT
        .try_with(|(acting, credential)| match credential {
            crate::host::Credential::Account(token) if acting == provider => Some(token.clone()),
            _ => None,
        })
        .ok()
        .flatten()
}

/// See [`Session::with_prefetch_guard`].
pub type PrefetchGuard = Arc<dyn Fn(&str, &Value) -> bool + Send + Sync>;

/// A predicted call counts as made when the agent makes it within this many calls.
const PREDICTION_WINDOW: u64 = 3;

/// How often the agent made (or did not make) the call a link projected, in this session.
#[derive(Debug, Clone, Copy, Default)]
struct LinkOutcomes {
    made: u32,
    missed: u32,
}

/// The call a link of an answer projected, pre-fetched or not.
struct Prediction {
    link: (String, String),
    key: CallKey,
    at_call: u64,
}

/// One pre-fetch a session started.
struct PrefetchRecord {
    tool: String,
    key: CallKey,
    started_at_call: u64,
    used: bool,
}

impl Session {
    /// A session named `id` (it reaches providers as `ToolContext::session`).
    pub fn new(host: Arc<Host>, id: impl Into<String>) -> Self {
        let id = id.into();
        let telemetry = &host.config().config.telemetry;
        let recorder = telemetry
            .record_sessions
            .then(|| crate::recording::SessionRecorder::new(&telemetry.directory(), &id, now_ms()));
        Self {
            recorder,
            host,
            scope: id.clone(),
            scope_follows_credentials: false,
            credentials_scope: crate::state::SHARED_CREDENTIALS.to_owned(),
            caller: id.clone(),
            id,
            timeout: None,
            prefetches: tokio::sync::Mutex::new(Vec::new()),
            prefetched: Arc::new(Mutex::new(Prefetches::default())),
            cancelled: Arc::new(AtomicBool::new(false)),
            user: None,
            credentials: None,
            repeats_as_data: false,
            calls_made: std::sync::atomic::AtomicU64::new(0),
            prefetch_log: Mutex::new(Vec::new()),
            link_outcomes: Mutex::new(HashMap::new()),
            predictions: Mutex::new(Vec::new()),
            prefetch_guard: None,
        }
    }

    /// Makes a pre-fetch only of calls `guard` lets (tool's qualified name, arguments): what the
    /// caller may not call, nothing calls for them.
    pub fn with_prefetch_guard(mut self, guard: PrefetchGuard) -> Self {
        self.prefetch_guard = Some(guard);
        self
    }

    /// Answers a repeat inside the freshness window with the (cached, projected) data instead
    /// of "same result as r1": for callers no connection ties to the first answer (HTTP, where
    /// a 2026-07-28 client has no session and several connections share one caller's state).
    pub fn repeats_as_data(mut self) -> Self {
        self.repeats_as_data = true;
        self
    }

    /// Shares cached results, and identical reads in flight, with every session of `scope` —
    /// on every replica when the state is in Redis — and keeps pipeline state (recent calls,
    /// fail-fast counters) under `caller`. By default a session has both to itself. A server
    /// passes the caller's credential fingerprint as the scope (callers with the same
    /// credentials see the same data) and identity plus fingerprint as the caller. The scope
    /// also names the credentials for per-host concurrency and rate limits (see
    /// [`crate::state::budget_name`]); without it a session counts as using the host's own.
    pub fn with_scope(mut self, scope: &str, caller: &str) -> Self {
        self.scope = scope.to_owned();
        self.credentials_scope = scope.to_owned();
        self.caller = caller.to_owned();
        self
    }

    /// Whose token a call of `tool` goes out with, which names its host's concurrency budget
    /// and the rate limits that hold for it: the caller's own where their `tokens` name the
    /// tool's provider (as the host picks the token), else the host's — a user with their own
    /// GitHub token still shares the server's Jira token, and its budget, with everyone.
    fn credentials_scope_for(&self, tool: &RegisteredTool) -> String {
        let Some(own) = self.credentials() else {
            return self.credentials_scope.clone();
        };
        let provider = &tool.name.provider;
        match own.0.get(provider) {
            Some(credential) => {
                let one =
                    std::collections::BTreeMap::from([(provider.clone(), credential.clone())]);
                crate::state::credential_fingerprint(Some(&crate::host::Credentials(one)))
            }
            None => crate::state::SHARED_CREDENTIALS.to_owned(),
        }
    }

    /// Runs every call and pre-fetch with the caller's own `credentials`.
    pub fn with_credentials(mut self, credentials: crate::host::Credentials) -> Self {
        self.credentials = Some(Arc::new(credentials));
        self
    }

    /// [`Session::with_scope`] with the fingerprint of the credentials as the scope — of those
    /// each call acts with, a signed-in account included ([`acting_as`]): cached results are
    /// shared with every caller acting as the same accounts, and with no one else.
    pub fn scoped_by_credentials(mut self, caller: &str) -> Self {
        let fingerprint = crate::state::credential_fingerprint(self.credentials.as_deref());
        self = self.with_scope(&fingerprint, caller);
        self.scope_follows_credentials = true;
        self
    }

    /// The credentials a call made now acts with: the caller's own, and the account the call
    /// acts as ([`acting_as`]).
    pub fn credentials(&self) -> Option<Arc<crate::host::Credentials>> {
        let acting = CALL_ACCOUNT.try_with(Clone::clone).ok();
        match acting {
            None => self.credentials.clone(),
            Some((provider, credential)) => {
                let mut credentials = self.credentials.as_deref().cloned().unwrap_or_default();
                credentials.0.insert(provider, credential);
                Some(Arc::new(credentials))
            }
        }
    }

    /// Whose cached results a call made now reads and writes.
    fn scope(&self) -> String {
        if self.scope_follows_credentials {
            crate::state::credential_fingerprint(self.credentials().as_deref())
        } else {
            self.scope.clone()
        }
    }

    /// Names the authenticated user in every telemetry event of this session.
    pub fn with_user(mut self, user: &str) -> Self {
        self.user = Some(user.to_owned());
        self
    }

    /// Gives every call of this session at most `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Pre-fetches still running.
    pub async fn prefetches_in_flight(&self) -> usize {
        self.prefetches.lock().await.iter().map(JoinSet::len).sum()
    }

    /// Ends the session: cancels every pre-fetch in flight (their provider calls see the
    /// cancellation flag) and waits until none is left.
    pub async fn shutdown(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        let mut sets = self.prefetches.lock().await;
        for set in sets.iter_mut() {
            set.abort_all();
            while set.join_next().await.is_some() {}
        }
        sets.clear();
        self.prefetched.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // A session's own cache ends with it; a shared scope's outlives it.
        if self.scope == self.id {
            self.host.state().forget(&self.scope);
        }
    }
}

/// How long the rate limit a result reports holds: what the provider said, else a minute (what
/// the providers advise when the service names no time).
fn rate_limit_of(result: &ToolResult) -> Option<Duration> {
    (result.error_kind == Some(ToolErrorKind::RateLimited)).then(|| {
        let seconds = result.metadata.get(RETRY_AFTER_METADATA).and_then(Value::as_u64);
        Duration::from_secs(seconds.unwrap_or(60))
    })
}

/// The answer to a call not sent because `host`'s rate limit for these credentials holds.
fn rate_limit_holds(host: &str, left: Duration) -> ToolResult {
    let seconds = left.as_secs().max(1);
    ToolResult::error(
        ToolErrorKind::RateLimited,
        format!(
            "not sent: {host} rate-limited these credentials and the limit holds for another \
             {seconds} s (an earlier call hit it, on this server or another replica); try again \
             after that"
        ),
    )
    .with_metadata(RETRY_AFTER_METADATA, json!(seconds))
}

/// Whether a tool only reads: identical calls of it in flight may share one request.
fn is_read(model: &ToolValueModel) -> bool {
    model.side_effect_class.is_speculatable()
}

impl Session {
    /// Calls `name` with `args` (which may carry a `fields` list asking for opt-in groups) and
    /// `intent` keywords of the current turn.
    pub async fn call(
        &self,
        name: &str,
        args: Value,
        intent: &[String],
    ) -> (ToolResult, CallEffects) {
        self.call_cancellable(name, args, intent, None).await
    }

    /// [`Session::call`], stopped when `cancel` is set (an MCP client's `notifications/cancelled`):
    /// the provider sees the flag and the call comes back as a `cancelled` error.
    pub async fn call_cancellable(
        &self,
        name: &str,
        args: Value,
        intent: &[String],
        cancel: Option<Arc<AtomicBool>>,
    ) -> (ToolResult, CallEffects) {
        // The session's part of a call — policy, cache, coalescing, pre-fetches — in a span.
        let span = crate::traced_span!(
            "session",
            otel.name = "quiver session",
            gen_ai.tool.name = name,
            quiver.cached = tracing::field::Empty,
            quiver.prefetched = tracing::field::Empty,
            quiver.prefetches.started = tracing::field::Empty,
            quiver.tokens = tracing::field::Empty,
        );
        let (result, effects) = tracing::Instrument::instrument(
            self.call_untraced(name, args, intent, cancel),
            span.clone(),
        )
        .await;
        span.record("quiver.cached", effects.cache_hit);
        span.record("quiver.prefetched", effects.prefetch_hit);
        span.record("quiver.prefetches.started", effects.prefetches_started);
        span.record("quiver.tokens", effects.tokens_after);
        (result, effects)
    }

    async fn call_untraced(
        &self,
        name: &str,
        args: Value,
        intent: &[String],
        cancel: Option<Arc<AtomicBool>>,
    ) -> (ToolResult, CallEffects) {
        let Some(tool) = self.host.tool(name) else {
            return (
                self.host
                    .call_with(
                        name,
                        args,
                        self.timeout,
                        &self.id,
                        cancel,
                        self.credentials().as_deref(),
                    )
                    .await,
                CallEffects::default(),
            );
        };
        let call_number = self.calls_made.fetch_add(1, Ordering::SeqCst) + 1;
        let qualified = tool.name.to_string();
        let recorded = self.recorder.as_ref().map(|_| (now_ms(), args.clone()));
        let model = self.host.value_model(&tool).model;
        let schema = &tool.spec.input_schema;
        let key = CallKey::new(&qualified, &args, Some(schema));
        self.settle_predictions(&key, call_number);
        let state = self.host.state();
        // Whose cache this call reads and fills: worked out once, not per look-up.
        let scope = self.scope();
        let now = Instant::now();
        if let Some(hint) =
            state.should_stop(&scope, &self.caller, &key, model.fail_fast_after_n).await
        {
            self.record(EventKind::FailFast, &qualified, Some(&key), |e| {
                e.predicted_cost_tokens = Some(predicted_tokens(&model, TOKENS_PER_KB));
            });
            // Not run: an error to the client, like any call refused before it left (a result
            // would have to carry data its output schema promises).
            let result = ToolResult { is_error: true, ..ToolResult::text(hint) }
                .with_metadata("fail_fast", json!(true));
            return (result, CallEffects { stopped: true, ..CallEffects::default() });
        }
        let ttl = ttl_of(&model);
        // `"_fresh": true` asks the service itself: no cached result, no call already in flight.
        let fresh = args.get(FRESH_ARGUMENT) == Some(&Value::Bool(true));
        // Looked up even when the service is asked afresh: its result is stored as of now.
        let lookup = state.cache_lookup(&scope, &key, ttl).await;
        let (mut hit, mut seen) = (lookup.hit.filter(|_| !fresh), lookup.seen);
        let landed_meanwhile = hit.is_none()
            && !fresh
            && self.prefetched.lock().unwrap_or_else(|e| e.into_inner()).is_unseen(&key);
        if landed_meanwhile {
            // A pre-fetch landed between the look-up and now: its result is in the cache.
            let again = state.cache_lookup(&scope, &key, ttl).await;
            (hit, seen) = (again.hit, again.seen);
        }
        let mut served = None;
        let in_flight = {
            let mut prefetched = self.prefetched.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(hit) = hit.as_ref().filter(|_| prefetched.take_unseen(&key)) {
                // Pre-fetched and never shown: the agent gets the whole result.
                served = Some(ToolResult::clone(&hit.result));
                None
            } else if let Some(hit) = hit {
                drop(prefetched);
                self.keep_recording(&tool, recorded, &hit.result);
                let requested = Requested::from_arguments(&args, Some(schema), intent.to_vec());
                return self.repeat(&qualified, &key, &model, &requested, &hit);
            } else if fresh {
                None
            } else {
                prefetched.joinable(&key)
            }
        };
        if let Some(landing) = in_flight {
            served = self.join(&key, landing, cancel.as_deref()).await;
        }

        let requested = Requested::from_arguments(&args, Some(schema), intent.to_vec());
        let prefetch_hit = served.is_some();
        if prefetch_hit {
            let mut log = self.prefetch_log.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(record) = log.iter_mut().rev().find(|r| r.key == key) {
                record.used = true;
            }
        }
        let mut joined = false;
        // The read this call leads for others, and whether its result is kept: both are done
        // with the call's record, in one step.
        let (mut led, mut keep) = (None, false);
        let mut result = match served {
            Some(result) => result,
            None => {
                // Identical reads in flight — of any session of this scope, on any replica —
                // make one request; the others wait for its result.
                let flight = if is_read(&model) && !fresh {
                    let limit = self.timeout.unwrap_or(DEFAULT_CALL_TIMEOUT);
                    state.begin_read(&scope, &key, limit).await
                } else {
                    Flight::Lead(FlightLease::alone())
                };
                match flight {
                    Flight::Joined(result) => {
                        joined = true;
                        result
                    }
                    Flight::Lead(lease) => {
                        let rate_limit_host = self.host.rate_limit_host(&tool, &args);
                        let credentials_scope = self.credentials_scope_for(&tool);
                        // Main calls wait for their host's permit; they share it with
                        // pre-fetches. While a rate limit holds for these credentials, nothing
                        // is sent.
                        let permit = match rate_limit_host.as_deref() {
                            Some(host) => state.permit(host, &credentials_scope).await,
                            None => Ok(Permit::none()),
                        };
                        let result = match permit {
                            Ok(permit) => {
                                let result = self
                                    .host
                                    .call_with(
                                        name,
                                        provider_arguments(args, schema),
                                        self.timeout,
                                        &self.id,
                                        cancel,
                                        self.credentials().as_deref(),
                                    )
                                    .await;
                                drop(permit);
                                if let Some(host) = rate_limit_host.as_deref() {
                                    self.host.note_rate_headroom(host, &credentials_scope, &result);
                                }
                                if let (Some(host), Some(wait)) =
                                    (rate_limit_host.as_deref(), rate_limit_of(&result))
                                {
                                    state.note_rate_limited(host, &credentials_scope, wait).await;
                                }
                                result
                            }
                            Err(left) => rate_limit_holds(
                                rate_limit_host.as_deref().unwrap_or("the service"),
                                left,
                            ),
                        };
                        if !result.is_error {
                            // A call that changes something makes the cached reads it names
                            // stale; then the result is stored before those waiting for it are
                            // told, so a caller arriving later finds it in the cache.
                            if !model.invalidates.is_empty() {
                                let stale = qualified_invalidations(&qualified, &model.invalidates);
                                state.invalidate(&scope, &stale).await;
                            }
                            keep = true;
                        }
                        led = Some(lease);
                        result
                    }
                }
            }
        };
        let productive =
            model.fail_fast_after_n.filter(|n| *n > 0).map(|_| !is_unproductive(&result));
        let ending = Ending {
            result: &result,
            keep: keep.then_some((ttl, &seen)),
            lead: led,
            caller: &self.caller,
            productive,
        };
        state.end_call(&scope, &key, ending).await;
        self.keep_recording(&tool, recorded, &result);
        if !prefetch_hit {
            // The provider answered the agent itself: an older pre-fetch of this call (one that
            // expired from the cache before it was asked for) is no longer news.
            self.prefetched.lock().unwrap_or_else(|e| e.into_inner()).take_unseen(&key);
        }
        let prefetch_hit_or_joined = prefetch_hit || joined;
        let latency_ms = now.elapsed().as_millis() as u64;
        let predicted = predicted_tokens(&model, TOKENS_PER_KB);
        let served_effects = CallEffects {
            cache_hit: prefetch_hit_or_joined,
            prefetch_hit,
            ..CallEffects::default()
        };
        let Some(structured) = result.structured.clone() else {
            let tokens = estimate_tokens(&Value::String(result.text_content()));
            if !result.is_error {
                self.host.observe_result_tokens(&qualified, tokens);
            }
            self.record(EventKind::Call, &qualified, Some(&key), |e| {
                (e.latency_ms, e.is_error, e.predicted_cost_tokens) =
                    (latency_ms, result.is_error, Some(predicted));
                (e.tokens_before, e.tokens_after) = (tokens, tokens);
                e.dedup_hit = prefetch_hit_or_joined;
            });
            return (result, served_effects);
        };
        // A call served by a pre-fetch answers at once, like a cache hit: its own follow-ups are
        // not planned, which would hold the answer for up to `prefetch_timeout_ms`.
        let (started, landed) =
            if self.host.config().config.enrichment.enabled && !prefetch_hit_or_joined {
                let plan = crate::traced_span!(
                    "plan",
                    otel.name = "quiver plan",
                    quiver.prefetches.started = tracing::field::Empty,
                );
                let planned = tracing::Instrument::instrument(
                    self.prefetch(&tool, &structured, intent),
                    plan.clone(),
                )
                .await;
                plan.record("quiver.prefetches.started", planned.0);
                planned
            } else {
                (0, Vec::new())
            };
        let projected = project(structured, &model, &requested);
        if !result.is_error {
            self.host.observe_result_tokens(&qualified, projected.tokens_before);
        }
        self.record(EventKind::Call, &qualified, Some(&key), |e| {
            (e.latency_ms, e.predicted_cost_tokens) = (latency_ms, Some(predicted));
            (e.tokens_before, e.tokens_after) = (projected.tokens_before, projected.tokens_after);
            e.dedup_hit = prefetch_hit_or_joined;
        });
        let effects = CallEffects {
            tokens_before: projected.tokens_before,
            tokens_after: projected.tokens_after,
            prefetches_started: started,
            prefetches_landed: landed.len(),
            ..served_effects
        };
        let original = std::mem::take(&mut result.content);
        let mut content =
            with_projected_text(original, result.structured.as_ref(), &projected.value);
        if let Some(note) = &projected.note {
            content.push(Content::text(format!("[quiver: {note}]")));
        }
        if !landed.is_empty() {
            content.push(Content::text(format!(
                "[quiver: pre-fetched {} — call them as usual; the results come from the session \
                 cache]",
                landed.join(", ")
            )));
        }
        (ToolResult { content, structured: Some(projected.value), ..result }, effects)
    }

    /// Settles the predictions the agent's call `key` (its `call_number`-th) decides: made when
    /// it is the predicted call within [`PREDICTION_WINDOW`] calls, missed once the window
    /// has passed without it.
    fn settle_predictions(&self, key: &CallKey, call_number: u64) {
        let mut predictions = self.predictions.lock().unwrap_or_else(|e| e.into_inner());
        let mut outcomes = self.link_outcomes.lock().unwrap_or_else(|e| e.into_inner());
        predictions.retain(|p| {
            let made = &p.key == key;
            let expired = call_number > p.at_call + PREDICTION_WINDOW;
            if made || expired {
                let outcome = outcomes.entry(p.link.clone()).or_default();
                if made {
                    outcome.made += 1;
                } else {
                    outcome.missed += 1;
                }
            }
            !(made || expired)
        });
    }

    /// Waits for the pre-fetch of `key` in flight, at most the call's own timeout: its result when
    /// it lands, `None` when it fails, is aborted or takes too long, or when the call is cancelled
    /// meanwhile (the caller then calls the provider itself, which sees the cancellation).
    async fn join(
        &self,
        key: &CallKey,
        mut landing: tokio::sync::watch::Receiver<Landing>,
        cancel: Option<&AtomicBool>,
    ) -> Option<ToolResult> {
        let limit = self.timeout.unwrap_or(DEFAULT_CALL_TIMEOUT);
        let cancelled = async {
            match cancel {
                // The flag has no waker: look at it now and then.
                Some(flag) => {
                    while !flag.load(Ordering::SeqCst) {
                        tokio::time::sleep(CANCEL_POLL).await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        let ended = landing.wait_for(|l| *l != Landing::Pending);
        let result = tokio::select! {
            ended = tokio::time::timeout(limit, ended) => match ended {
                Ok(Ok(ended)) => match &*ended {
                    Landing::Landed(result) => Some(result.clone()),
                    Landing::Pending | Landing::Failed => None,
                },
                // Aborted (its sender is gone), or slower than the call may take.
                Ok(Err(_)) | Err(_) => None,
            },
            () = cancelled => None,
        };
        if result.is_some() {
            // Delivered here: a later call of the same key is a repeat.
            self.prefetched.lock().unwrap_or_else(|e| e.into_inner()).take_unseen(key);
        }
        result
    }

    /// Writes a telemetry event, when telemetry is on.
    fn record(
        &self,
        kind: EventKind,
        tool: &str,
        key: Option<&CallKey>,
        fill: impl FnOnce(&mut CallEvent),
    ) {
        let Some(sink) = self.host.telemetry() else { return };
        let mut event = CallEvent {
            args_hash: key.map(arguments_hash).unwrap_or_default(),
            user: self.user.clone(),
            ..CallEvent::new(now_ms(), &self.id, tool, kind)
        };
        fill(&mut event);
        sink.record(&event);
    }

    /// Records a call made at `recorded.0` with arguments `recorded.1` and its whole `result`,
    /// when this session records.
    fn keep_recording(
        &self,
        tool: &RegisteredTool,
        recorded: Option<(u64, Value)>,
        result: &ToolResult,
    ) {
        let (Some(recorder), Some((at_ms, arguments))) = (&self.recorder, recorded) else {
            return;
        };
        let call = crate::recording::RecordedCall {
            at_ms,
            answered_ms: now_ms(),
            tool: tool.name.to_string(),
            arguments,
            result: result.clone(),
        };
        recorder.record(call, &tool.spec.sensitive_params);
    }

    /// A repeat inside the freshness window: the short reference, or the data again for
    /// callers no connection ties to the first answer.
    fn repeat(
        &self,
        qualified: &str,
        key: &CallKey,
        model: &ToolValueModel,
        requested: &Requested,
        hit: &quiver_core::session_cache::Hit,
    ) -> (ToolResult, CallEffects) {
        let effects = CallEffects { cache_hit: true, ..CallEffects::default() };
        if self.repeats_as_data {
            let result = match hit.result.structured.clone() {
                Some(structured) => {
                    let projected = project(structured, model, requested);
                    let mut result = ToolResult::from_json(projected.value);
                    result.content.push(Content::text(format!(
                        "[quiver: the same call as {}, served from the cache]",
                        hit.reference
                    )));
                    result
                }
                None => ToolResult::clone(&hit.result),
            }
            .with_metadata("cached_ref", json!(hit.reference.to_string()));
            let result = with_author_labels_of(&hit.result, result);
            let tokens = estimate_tokens(&Value::String(result.text_content()));
            self.record(EventKind::Call, qualified, Some(key), |e| {
                e.dedup_hit = true;
                e.tokens_before = tokens;
                e.tokens_after = tokens;
            });
            return (result, effects);
        }
        // The model reads the short reference; a program reading the structured value gets the
        // data, projected as the first answer was, so it conforms to the tool's output schema.
        let mut result = with_author_labels_of(
            &hit.result,
            ToolResult::text(hit.hint())
                .with_metadata("cached_ref", json!(hit.reference.to_string())),
        );
        result.structured =
            hit.result.structured.clone().map(|s| project(s, model, requested).value);
        let before = hit.result.structured.as_ref().map(estimate_tokens).unwrap_or(0);
        let after = estimate_tokens(&Value::String(result.text_content()));
        self.record(EventKind::Call, qualified, Some(key), |e| {
            e.dedup_hit = true;
            e.tokens_before = before;
            e.tokens_after = after;
        });
        (result, effects)
    }

    /// The tools this session's caller called lately, oldest first (qualified names): what the
    /// selector lifts the follow-ups and bundle siblings of.
    pub async fn recent_calls(&self) -> Vec<String> {
        self.host.state().recent_calls(&self.scope(), &self.caller).await
    }

    /// Plans the follow-ups of `from`'s `result`, starts them, and waits at most
    /// `prefetch_timeout_ms` for them: how many started, and the labels of those that landed.
    async fn prefetch(
        &self,
        from: &RegisteredTool,
        result: &Value,
        intent: &[String],
    ) -> (usize, Vec<String>) {
        let settings = self.host.config().config.enrichment.clone();
        let state = self.host.state();
        let scope = self.scope();
        let recent = state.recent_calls(&scope, &self.caller).await;
        let calls_made = self.calls_made.load(Ordering::SeqCst);
        let mut candidates = self.host.follow_up_candidates(&[from.name.to_string()]);
        // Each link's probability as this session has shown it, and the call it projects now:
        // whether or not it is pre-fetched, the agent's next calls say whether it was right.
        let mut projected: HashMap<String, CallKey> = HashMap::new();
        let mut projections: HashMap<String, Result<Vec<Map<String, Value>>, String>> =
            HashMap::new();
        {
            let outcomes = self.link_outcomes.lock().unwrap_or_else(|e| e.into_inner());
            for candidate in &mut candidates {
                let link = (candidate.from.clone(), candidate.link.tool.clone());
                if let Some(o) = outcomes.get(&link) {
                    candidate.link.probability =
                        planner::session_probability(candidate.link.probability, o.made, o.missed);
                }
            }
        }
        for candidate in &candidates {
            let arguments = self.host.project_args(from, result, &candidate.link);
            let first = arguments.as_ref().ok().and_then(|all| all.first());
            if let (Some(first), Some(target)) = (first, self.host.tool(&candidate.link.tool)) {
                let key = CallKey::new(
                    &candidate.link.tool,
                    &Value::Object(first.clone()),
                    Some(&target.spec.input_schema),
                );
                self.predictions.lock().unwrap_or_else(|e| e.into_inner()).push(Prediction {
                    link: (candidate.from.clone(), candidate.link.tool.clone()),
                    key: key.clone(),
                    at_call: calls_made,
                });
                projected.insert(candidate.link.tool.clone(), key);
            }
            projections.insert(candidate.link.tool.clone(), arguments);
        }
        // A link whose projection finds nothing in this result does not apply to it (a chain
        // from a directory after a file was read): no call to plan, decline or predict.
        candidates.retain(|c| {
            !matches!(projections.get(&c.link.tool), Some(Ok(arguments)) if arguments.is_empty())
        });
        let views: Vec<_> = candidates.iter().map(|c| c.as_candidate()).collect();
        let options = PlannerOptions {
            budget_tokens: settings.prefetch_budget_tokens,
            min_followup_probability: settings.min_prefetch_probability,
            ..PlannerOptions::default()
        };
        let plan = planner::plan(&recent, &views, intent, &options);
        for declined in &plan.declined {
            let reason = serde_json::to_value(declined.reason).ok();
            // The call the pre-fetch would have made, when the provider can name it: a decline
            // loses recall only if the agent then makes that very call.
            self.record(EventKind::Decline, declined.tool, projected.get(declined.tool), |e| {
                e.decline_reason = reason.and_then(|r| r.as_str().map(str::to_owned));
                e.predicted_cost_tokens = Some(declined.cost_tokens);
            });
        }
        let mut set = JoinSet::new();
        let mut dispatched: Vec<(String, CallKey, u32)> = Vec::new();
        for admitted in &plan.admitted {
            let Some(candidate) = candidates.iter().find(|c| c.link.tool == admitted.tool) else {
                continue;
            };
            let Some(target) = self.host.tool(admitted.tool) else { continue };
            // The one gate every dispatch passes, whatever the planner or the config said.
            if !may_prefetch(&candidate.model) {
                continue;
            }
            let arguments = match projections.remove(admitted.tool) {
                Some(Ok(arguments)) => arguments,
                Some(Err(e)) => {
                    tracing::debug!(tool = admitted.tool, "no pre-fetch: {e}");
                    continue;
                }
                None => continue,
            };
            // The tool's earlier pre-fetches in this session that the agent let pass unused.
            let unused = self
                .prefetch_log
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .filter(|r| r.tool == admitted.tool && !r.used && r.started_at_call < calls_made)
                .count();
            let stopped =
                settings.stop_after_unused > 0 && unused >= settings.stop_after_unused as usize;
            for arguments in arguments.into_iter().take(settings.max_prefetches_per_link) {
                if set.len() >= settings.max_parallel_prefetches {
                    break;
                }
                let arguments = Value::Object(arguments);
                if self.prefetch_guard.as_ref().is_some_and(|may| !may(admitted.tool, &arguments)) {
                    tracing::debug!(
                        tool = admitted.tool,
                        "no pre-fetch: outside the caller's scope"
                    );
                    continue;
                }
                let key = CallKey::new(admitted.tool, &arguments, Some(&target.spec.input_schema));
                if stopped {
                    self.record(EventKind::Decline, admitted.tool, Some(&key), |e| {
                        e.decline_reason = Some("unused_in_session".to_owned());
                        e.predicted_cost_tokens = Some(admitted.cost_tokens);
                    });
                    continue;
                }
                let in_flight = self
                    .prefetched
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .joinable(&key)
                    .is_some();
                if in_flight {
                    continue;
                }
                // Fresh in the cache: nothing to fetch. Else its result is stored as of now.
                let lookup = state.cache_lookup(&scope, &key, ttl_of(&candidate.model)).await;
                if lookup.hit.is_some() {
                    continue;
                }
                let seen = lookup.seen;
                let host_name = self.host.rate_limit_host(&target, &arguments);
                let credentials_scope = self.credentials_scope_for(&target);
                // A request of a rate window running out is worth more to the agent's own
                // calls: the emptier the window, the likelier a pre-fetch must be.
                let headroom = host_name
                    .as_deref()
                    .and_then(|h| self.host.rate_headroom(h, &credentials_scope));
                if let Some(headroom) = headroom {
                    let bar = planner::rate_budget_probability(
                        settings.min_prefetch_probability,
                        headroom.share(),
                        settings.prefetch_rate_reserve,
                    );
                    if admitted.probability < bar {
                        self.record(EventKind::Decline, admitted.tool, Some(&key), |e| {
                            e.decline_reason = Some("rate_budget".to_owned());
                            e.predicted_cost_tokens = Some(admitted.cost_tokens);
                        });
                        continue;
                    }
                }
                // Pre-fetches never queue behind main calls: no free permit, no pre-fetch.
                let permit = match host_name.as_deref() {
                    Some(host) => match state.try_permit(host, &credentials_scope).await {
                        Some(permit) => permit,
                        None => continue,
                    },
                    None => Permit::none(),
                };
                let label = format!("{}({arguments})", admitted.tool);
                dispatched.push((label.clone(), key.clone(), admitted.cost_tokens));
                self.prefetch_log.lock().unwrap_or_else(|e| e.into_inner()).push(PrefetchRecord {
                    tool: admitted.tool.to_owned(),
                    key: key.clone(),
                    started_at_call: calls_made,
                    used: false,
                });
                let (host, scope) = (Arc::clone(&self.host), scope.clone());
                let ttl = ttl_of(&candidate.model);
                let (prefetched, cancelled) =
                    (Arc::clone(&self.prefetched), Arc::clone(&self.cancelled));
                let (tool, session, timeout) =
                    (admitted.tool.to_owned(), self.id.clone(), self.timeout);
                let credentials = self.credentials();
                let report =
                    prefetched.lock().unwrap_or_else(|e| e.into_inner()).start(key.clone());
                let span = crate::traced_span!(
                    "prefetch",
                    otel.name = %format!("quiver prefetch {tool}"),
                    gen_ai.tool.name = %tool,
                    quiver.landed = tracing::field::Empty,
                );
                let traced = span.clone();
                set.spawn(crate::traces::carried(tracing::Instrument::instrument(
                    async move {
                        let permit = permit;
                        let result = host
                            .call_with(
                                &tool,
                                arguments,
                                timeout,
                                &session,
                                Some(cancelled),
                                credentials.as_deref(),
                            )
                            .await;
                        drop(permit);
                        if let Some(rate_host) = host_name.as_deref() {
                            host.note_rate_headroom(rate_host, &credentials_scope, &result);
                        }
                        let landed = !result.is_error;
                        if landed {
                            // Unseen before it is cached, so a call finding it in the cache
                            // delivers it whole; still in flight until then, so a call not finding
                            // it joins it.
                            prefetched.lock().unwrap_or_else(|e| e.into_inner()).mark_unseen(&key);
                            host.state().cache_put(&scope, &key, &result, ttl, &seen).await;
                        }
                        prefetched.lock().unwrap_or_else(|e| e.into_inner()).finish(&key, landed);
                        // Nobody may be waiting; that is fine.
                        let _ = report.send(if landed {
                            Landing::Landed(result)
                        } else {
                            Landing::Failed
                        });
                        traced.record("quiver.landed", landed);
                        landed.then_some(label)
                    },
                    span,
                )));
            }
        }
        let started = set.len();
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(settings.prefetch_timeout_ms);
        let mut landed = Vec::new();
        while let Ok(Some(joined)) = tokio::time::timeout_at(deadline, set.join_next()).await {
            if let Ok(Some(label)) = joined {
                landed.push(label);
            }
        }
        if !set.is_empty() {
            self.prefetches.lock().await.push(set);
        }
        for (label, key, cost) in &dispatched {
            let in_time = landed.contains(label);
            self.record(EventKind::Prefetch, key.tool(), Some(key), |e| {
                (e.landed_in_time, e.predicted_cost_tokens) = (Some(in_time), Some(*cost));
                e.tokens_after = u64::from(*cost);
            });
        }
        (started, landed)
    }
}

/// A result's blocks once its structured value is projected: the text block that is the
/// structured value's JSON (what providers send, and what MCP servers send beside
/// `structuredContent`) becomes the projected value's; every other block — the server's own
/// text, images, audio, resources, links — stays as it was. With no text block at all, the
/// projected value's text comes first, so the model has something to read.
fn with_projected_text(
    original: Vec<Content>,
    structured: Option<&Value>,
    projected: &Value,
) -> Vec<Content> {
    let mut mirrored = false;
    let mut any_text = false;
    let mut content = Vec::with_capacity(original.len() + 1);
    for block in original {
        match block {
            Content::Text { text, annotations, meta } => {
                any_text = true;
                let mirrors = !mirrored
                    && structured.is_some_and(|s| {
                        serde_json::from_str::<Value>(&text).is_ok_and(|parsed| &parsed == s)
                    });
                if mirrors {
                    mirrored = true;
                    content.push(Content::Text { text: projected.to_string(), annotations, meta });
                } else {
                    content.push(Content::Text { text, annotations, meta });
                }
            }
            other => content.push(other),
        }
    }
    if !any_text {
        content.insert(0, Content::text(projected.to_string()));
    }
    content
}

/// The arguments the provider sees: without the host's control arguments (`_confirm`, and
/// `fields` unless the tool declares one of its own), which providers would refuse as unknown.
fn provider_arguments(args: Value, input_schema: &Value) -> Value {
    let declares_fields = tool_declares_fields(input_schema);
    match args {
        Value::Object(map) => Value::Object(
            map.into_iter().filter(|(k, _)| !is_control_argument(k, declares_fields)).collect(),
        ),
        other => other,
    }
}

/// `result` (made again from a cached one) with the author labels of the `cached` one: a
/// caller's own lockdown withholds by them, whichever way the result reaches that caller.
fn with_author_labels_of(cached: &ToolResult, result: ToolResult) -> ToolResult {
    match cached.metadata.get(quiver_core::tool::AUTHORS_METADATA) {
        Some(labels) => result.with_metadata(quiver_core::tool::AUTHORS_METADATA, labels.clone()),
        None => result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_arguments_never_reach_the_provider() {
        let schema = json!({"type": "object", "properties": {"owner": {"type": "string"}}});
        let args = json!({"owner": "o", "fields": ["body"], "_confirm": true});
        assert_eq!(provider_arguments(args, &schema), json!({"owner": "o"}));

        let owns_fields = json!({"type": "object", "properties": {"fields": {"type": "array"}}});
        let args = json!({"jql": "x", "fields": ["summary"]});
        assert_eq!(provider_arguments(args.clone(), &owns_fields), args);
    }
}
