//! The state calls share beyond one session, behind one interface ([`StateStore`]) with two
//! implementations: [`MemoryState`] (the default: everything in this process) and [`RedisState`]
//! (`[state] backend = "redis"`: shared by every replica, with the in-process state answering
//! while Redis is unreachable).
//!
//! What lives here, and the scope each part belongs to:
//! - the **session cache** (results by tool and canonical arguments, fresh for the tool's
//!   `freshness_ttl_s`, with their references `r7`) — per *cache scope*: a credential
//!   fingerprint for a server's callers (callers with the same credential see the same data),
//!   a session's own id otherwise; `invalidates` after a write drops entries in that scope;
//! - **identical reads in flight** — one request to the service, the other callers wait for its
//!   result ([`Flight`]), per cache scope;
//! - **per-rate-limit-host concurrency** ([`Permit`]), for every caller of the process (memory)
//!   or of every replica (Redis, as leases that expire when a replica stops renewing them);
//! - **a caller's pipeline state** (recent calls for the planner, fail-fast counters) — per
//!   *caller*: identity and credential (its cache scope);
//! - **HTTP session metadata** (what a 2025-11-25 client sent in `initialize`), so another
//!   replica can continue a session ([`StateStore::session_put`]).

mod memory;
mod redis;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use quiver_core::session_cache::{CallKey, Hit, Stored};
use quiver_core::ToolResult;
use sha2::{Digest, Sha256};

pub use self::memory::MemoryState;
pub use self::redis::RedisState;
use crate::config::{StateBackendKind, StateConfig};

/// Where state lives and whether it is reachable now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateStatus {
    /// In this process (`backend = "memory"`).
    Local,
    /// Shared through Redis, reachable.
    Shared,
    /// Shared through Redis, unreachable since `since_ms` (Unix ms): calls go on with the
    /// in-process state and the replica reconnects by itself.
    Unreachable {
        /// When the outage was first seen.
        since_ms: u64,
        /// Why, without the URL's password.
        error: String,
    },
}

impl std::fmt::Display for StateStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local => f.write_str("in-process"),
            Self::Shared => f.write_str("redis: connected"),
            Self::Unreachable { error, .. } => {
                write!(f, "redis: unreachable ({error}); serving from in-process state")
            }
        }
    }
}

/// What became of asking to make a call that others may be making too.
pub enum Flight {
    /// Nobody is making it: this caller does, and reports the result through the lease.
    Lead(FlightLease),
    /// Another caller (here or on another replica) made it; its result.
    Joined(ToolResult),
}

/// The right, and the duty, to make a call others wait for: [`FlightLease::finish`] hands them
/// the result; dropping the lease unfinished lets them make the call themselves.
pub struct FlightLease {
    pub(crate) finish: Option<Box<dyn FinishFlight>>,
}

/// How a backend hands a finished call to those waiting for it.
#[async_trait]
pub(crate) trait FinishFlight: Send + Sync {
    async fn finish(self: Box<Self>, result: &ToolResult);

    /// The shared lease this lead holds (Redis's), taken out to be let go of with the call's
    /// other writes in one step; finishing then tells this process's waiters alone.
    fn take_shared_lease(&mut self) -> Option<String> {
        None
    }
}

impl FlightLease {
    /// A lease nobody waits on (the call cannot be shared: a write, or no lease could be taken).
    pub fn alone() -> Self {
        Self { finish: None }
    }

    /// Hands `result` to every caller waiting for the same call.
    pub async fn finish(mut self, result: &ToolResult) {
        if let Some(finish) = self.finish.take() {
            finish.finish(result).await;
        }
    }
}

/// A cache look-up: the fresh result, if any, and what the look-up saw, which storing the
/// call's result takes back ([`StateStore::cache_put`]).
#[derive(Debug, Default)]
pub struct Lookup {
    /// The fresh result.
    pub hit: Option<Hit>,
    /// What the look-up saw.
    pub seen: Seen,
}

/// What a cache look-up saw. A result is stored as of its call's look-up: a write that made
/// the tool's results stale while the call ran leaves this one stale too, and a result equal to
/// the one seen keeps its reference. [`Seen::default`] when nothing was looked up.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    pub(crate) shared: Option<self::redis::Seen>,
}

impl From<Option<self::redis::Seen>> for Seen {
    fn from(shared: Option<self::redis::Seen>) -> Self {
        Self { shared }
    }
}

/// How a call ended, for [`StateStore::end_call`].
pub struct Ending<'a> {
    /// Its result.
    pub result: &'a ToolResult,
    /// Keep it (when successful), fresh for the TTL, as of what the call's look-up saw.
    pub keep: Option<(Option<Duration>, &'a Seen)>,
    /// The read this caller led for others: they get the result.
    pub lead: Option<FlightLease>,
    /// Who made the call.
    pub caller: &'a str,
    /// For a tool that fails fast, whether the call was productive.
    pub productive: Option<bool>,
}

/// A rate-limit-host permit: held while the call runs, released when dropped.
pub struct Permit {
    pub(crate) _held: Option<Box<dyn Send + Sync>>,
}

impl Permit {
    /// No permit needed (the call has no rate-limit host).
    pub fn none() -> Self {
        Self { _held: None }
    }
}

/// The state calls share beyond one session. See the module docs for what each part is and
/// its scope.
#[async_trait]
pub trait StateStore: Send + Sync + 'static {
    /// Which backend this is.
    fn backend(&self) -> StateBackendKind;

    /// Where state lives and whether it is reachable now.
    fn status(&self) -> StateStatus;

    /// Tries the shared store now (ending or starting an outage) and says how it is.
    async fn probe(&self) -> StateStatus {
        self.status()
    }

    /// Looks `key` up in `scope`: its fresh result (younger than `ttl`; no TTL never hits), and
    /// what the look-up saw, for storing the call's result as of it.
    async fn cache_lookup(&self, scope: &str, key: &CallKey, ttl: Option<Duration>) -> Lookup;

    /// The fresh result of `key` in `scope`, if any ([`StateStore::cache_lookup`]'s hit).
    async fn cache_get(&self, scope: &str, key: &CallKey, ttl: Option<Duration>) -> Option<Hit> {
        self.cache_lookup(scope, key, ttl).await.hit
    }

    /// Stores a successful result of `key` in `scope`, fresh for `ttl`, as of what the call's
    /// look-up saw; its reference, and whether it is unchanged since an earlier store. `None`
    /// for an error result.
    async fn cache_put(
        &self,
        scope: &str,
        key: &CallKey,
        result: &ToolResult,
        ttl: Option<Duration>,
        seen: &Seen,
    ) -> Option<Stored>;

    /// Drops the cached results of `tools` (qualified names) in `scope`, on every replica.
    async fn invalidate(&self, scope: &str, tools: &[String]);

    /// Forgets this process's cache of `scope` (a session that had it to itself ended); shared
    /// entries expire with their TTL.
    fn forget(&self, scope: &str);

    /// Asks to make the read `key` in `scope`: lead it, or join the one in flight, waiting at
    /// most `wait` for it before leading a call of one's own.
    async fn begin_read(&self, scope: &str, key: &CallKey, wait: Duration) -> Flight;

    /// Waits for a permit of rate-limit host `host` for the credentials `scope` names (at most
    /// `per_host_concurrency` calls in flight to it with them: see [`budget_name`]) — or says
    /// how long `host`'s rate limit for those credentials still holds: a call hit it, and
    /// nothing more is sent with them until then.
    async fn permit(&self, host: &str, scope: &str) -> Result<Permit, Duration>;

    /// A permit of `host` for `scope`'s credentials if one is free now and no rate limit holds
    /// for them (pre-fetches never queue behind main calls).
    async fn try_permit(&self, host: &str, scope: &str) -> Option<Permit>;

    /// Records that `host` rate-limited the credentials of `scope` for `wait`, for every
    /// replica.
    async fn note_rate_limited(&self, host: &str, scope: &str, wait: Duration);

    /// Permits of `host` free now for the host's own credentials ([`SHARED_CREDENTIALS`]), for
    /// diagnostics and tests.
    async fn available_permits(&self, host: &str) -> usize;

    /// The fail-fast hint that stops `key` for `caller` (calling with the credentials of cache
    /// scope `scope`) after `after_n` unproductive outcomes.
    async fn should_stop(
        &self,
        scope: &str,
        caller: &str,
        key: &CallKey,
        after_n: Option<u32>,
    ) -> Option<String>;

    /// Records that `caller` (in cache scope `scope`) made the call `key` (its tool joins the
    /// recent calls the planner is told about) and, for a tool that fails fast, whether it was
    /// productive (`None` for the rest: nothing to count).
    async fn record_call(&self, scope: &str, caller: &str, key: &CallKey, productive: Option<bool>);

    /// `caller`'s most recent calls in cache scope `scope`, oldest first.
    async fn recent_calls(&self, scope: &str, caller: &str) -> Vec<String>;

    /// Ends a call `key` in `scope` this caller made: keeps its result, hands it to those
    /// waiting for the read it led, and records the call — in that order, and on Redis in one
    /// round trip.
    async fn end_call(&self, scope: &str, key: &CallKey, ending: Ending<'_>) {
        if let Some((ttl, seen)) = ending.keep {
            self.cache_put(scope, key, ending.result, ttl, seen).await;
        }
        if let Some(lead) = ending.lead {
            lead.finish(ending.result).await;
        }
        self.record_call(scope, ending.caller, key, ending.productive).await;
    }

    /// Keeps an HTTP session's metadata (JSON) so another replica can continue it.
    async fn session_put(&self, id: &str, metadata: &str) -> Result<(), String>;

    /// An HTTP session's metadata, if any replica kept it.
    async fn session_get(&self, id: &str) -> Result<Option<String>, String>;

    /// Forgets an HTTP session (the client ended it).
    async fn session_delete(&self, id: &str) -> Result<(), String>;

    /// Keeps `value` under `key` — for `ttl` (a sign-in in progress), or until deleted (a
    /// user's sealed account) — where every replica reads it.
    async fn record_put(&self, key: &str, value: &str, ttl: Option<Duration>)
        -> Result<(), String>;

    /// The record under `key`, if it is there and not expired.
    async fn record_get(&self, key: &str) -> Result<Option<String>, String>;

    /// The record under `key`, removed in the same step: of several readers on any replica, one
    /// gets it (a sign-in's `state` is used once).
    async fn record_take(&self, key: &str) -> Result<Option<String>, String>;

    /// Removes the record under `key`.
    async fn record_delete(&self, key: &str) -> Result<(), String>;

    /// Takes `key` for `ttl` when nobody holds it: whether this caller now holds it (one
    /// refresh of a token in flight across replicas). [`StateStore::record_delete`] lets go.
    async fn claim(&self, key: &str, ttl: Duration) -> Result<bool, String>;
}

/// Recent calls kept per caller for the planner (it skips pre-fetching what was just used).
pub const RECENT_CALLS: usize = 8;

/// Opens the state `config` asks for. Redis without a URL, or with an unusable one, is an error
/// naming the setting to fix (the URL itself is never quoted: it may hold a password).
pub fn open(
    config: &StateConfig,
    per_host: usize,
    replica: &str,
) -> Result<Arc<dyn StateStore>, String> {
    let memory = MemoryState::new(per_host);
    match config.backend {
        StateBackendKind::Memory => Ok(Arc::new(memory)),
        StateBackendKind::Redis => {
            let url = std::env::var(&config.url_env)
                .ok()
                .filter(|u| !u.trim().is_empty())
                .or_else(|| config.url.clone())
                .ok_or_else(|| {
                    format!(
                        "[state] backend = \"redis\" needs a URL: set ${} (or [state] url) to \
                         redis://host:port",
                        config.url_env
                    )
                })?;
            Ok(Arc::new(RedisState::open(&url, config, per_host, replica, memory)?))
        }
    }
}

/// The fingerprint of a caller's credentials — of the accounts they act as, not of where their
/// tokens are kept: callers with the same credentials share cached results, callers with
/// different ones never do. A variable's token counts by its value (a rotated token starts
/// afresh); a signed-in account by its connection (a reconnected one too), not by its access
/// token, which a refresh replaces. `shared` names the server's own credentials. Only a digest
/// of a token goes into it, cut so that it cannot be tested against a guess offline.
pub fn credential_fingerprint(credentials: Option<&crate::host::Credentials>) -> String {
    use crate::host::Credential;
    match credentials.filter(|c| !c.0.is_empty()) {
        None => SHARED_CREDENTIALS.to_owned(),
        Some(credentials) => {
            let mut digest = Sha256::new();
            for (provider, credential) in &credentials.0 {
                digest.update(provider.as_bytes());
                digest.update([0]);
                match credential {
                    Credential::Variable(variable) => {
                        digest.update(b"variable\0");
                        digest.update(variable.as_bytes());
                        digest.update([0]);
                        let token = std::env::var(variable).unwrap_or_default();
                        digest.update(Sha256::digest(token.as_bytes()));
                    }
                    Credential::Account(account) => {
                        digest.update(b"account\0");
                        digest.update(account.account.as_bytes());
                        digest.update([0]);
                        digest.update(account.grant.as_bytes());
                    }
                }
                digest.update([0]);
            }
            hex::encode(&digest.finalize()[..12])
        }
    }
}

/// The credentials scope of callers who use the host's own tokens (no `tokens` of their own).
pub const SHARED_CREDENTIALS: &str = "shared";

/// The concurrency budget calls to rate-limit host `host` with the credentials of `scope` draw
/// on: one per host and credential, since services count concurrent requests per token
/// (GitHub's secondary limits, Jira Cloud's per-user limits). Callers on the host's own tokens
/// share the host's budget, named by the host alone; a user with their own tokens gets a budget
/// of their own, so a team's throughput grows with its tokens while no token gets more than
/// `per_host_concurrency` calls in flight.
pub fn budget_name(host: &str, scope: &str) -> String {
    if scope == SHARED_CREDENTIALS {
        host.to_owned()
    } else {
        format!("{host}@{scope}")
    }
}

/// This replica's name: `[state] replica`, else host name and process id.
pub fn replica_name(config: &StateConfig) -> String {
    config.replica.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/etc/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "localhost".into());
        format!("{host}-{}", std::process::id())
    })
}
