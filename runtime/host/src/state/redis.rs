//! The Redis backend: the state every replica shares, on a small pool of redis-rs's multiplexed
//! connections (each pipelines the requests of every task and reconnects by itself; a pool that
//! checks a connection out and PINGs it on every use would double the round trips), with Lua
//! scripts wherever a step must be atomic (storing a result with its reference, invalidating a
//! tool's entries, taking and renewing a permit). Keys are named
//! `{key_prefix}:{kind}:{scope}:{hash}`; everything expires on its own.
//!
//! Every write also goes to the in-process state ([`MemoryState`]), and while Redis is
//! unreachable every read comes from it: calls keep being answered with what this replica knows.
//! The outage is logged once, with why (a refused password is said to be one); while it lasts
//! Redis is tried again once a second in the background (and by the next operation, or by
//! `/readyz`), and the first success ends it — an idle replica is back as soon as Redis is.
//!
//! Time in scripts is Redis's own (`TIME`), so replicas with skewed clocks agree on freshness and
//! lease expiry.
//!
//! What is read back is not trusted: a cached result larger than `max_value_kb` is not read at
//! all (its length is checked in the script), one stored "in the future" is refused (it would
//! never go stale), and with `hmac_key_env` every result and landed read carries an
//! HMAC-SHA256 over its key and value that is checked before it is served — a party with write
//! access to Redis cannot feed the model.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use quiver_core::session_cache::{fail_fast_hint, CallKey, Hit, Reference, Stored};
use quiver_core::ToolResult;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, RedisResult, Script};
use sha2::{Digest, Sha256};

use super::memory::{wait_landing, MemoryState};
use super::{Flight, FlightLease, Permit, StateStatus, StateStore, RECENT_CALLS};
use crate::config::{StateBackendKind, StateConfig};
use crate::telemetry::now_ms;

/// How long a finished read's result stays for callers that were waiting on another replica.
const LANDED_MS: u64 = 2_000;
/// How long a result stays stored past its freshness, so a re-fetch can say "nothing changed".
const RETAIN_MS: u64 = 10 * 60 * 1000;
/// How long a caller's pipeline state and a session's metadata outlive their last use.
const CALLER_MS: u64 = 60 * 60 * 1000;
const SESSION_MS: u64 = 24 * 60 * 60 * 1000;
/// The bytes a landed value's signature takes before its JSON: 64 hex digits and a colon.
const SIGNATURE_PREFIX: usize = 65;
/// While Redis is unreachable, how often it is tried again.
const RETRY_MS: u64 = 1_000;

/// How long an operation on a record may keep trying through a passing outage.
const RECORD_PATIENCE: Duration = Duration::from_secs(5);
/// Connections per replica: each multiplexes every task's requests.
const POOL_SIZE: usize = 4;

/// Stores a result with its reference: the same content keeps its reference and first-seen time.
const PUT: &str = r"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local old = redis.call('HMGET', KEYS[1], 'digest', 'ref', 'first')
local ref, first, unchanged
if old[1] == ARGV[2] and old[2] then
  ref = tonumber(old[2]); first = tonumber(old[3]); unchanged = 1
else
  ref = redis.call('INCR', KEYS[3]); first = now; unchanged = 0
end
redis.call('HSET', KEYS[1], 'result', ARGV[1], 'digest', ARGV[2], 'ref', ref, 'stored', now,
  'first', first, 'mac', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[2], KEYS[1])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
redis.call('PEXPIRE', KEYS[3], ARGV[4])
return {ref, now - first, unchanged}
";

/// A result younger than the TTL given (ARGV[1]) and no longer than ARGV[2] bytes:
/// `{result, ref, age_ms, mac}`; nil when there is none or it is stale; `{'', 0, 0, why}` when
/// it is refused unread (`size`) or stored in the future (`future`).
const GET: &str = r"
if redis.call('HSTRLEN', KEYS[1], 'result') > tonumber(ARGV[2]) then return {'', 0, 0, 'size'} end
local e = redis.call('HMGET', KEYS[1], 'result', 'ref', 'stored', 'mac')
if not e[1] or e[1] == '' then return nil end
local t = redis.call('TIME')
local age = t[1] * 1000 + math.floor(t[2] / 1000) - (tonumber(e[3]) or 0)
if age < 0 then return {'', 0, 0, 'future'} end
if age >= tonumber(ARGV[1]) then return nil end
return {e[1], tonumber(e[2]) or 0, age, e[4] or ''}
";

/// Drops every entry listed in the given tool indexes, and the indexes.
const INVALIDATE: &str = r"
local n = 0
for _, index in ipairs(KEYS) do
  for _, entry in ipairs(redis.call('SMEMBERS', index)) do n = n + redis.call('DEL', entry) end
  redis.call('DEL', index)
end
return n
";

/// Takes a permit when fewer than ARGV[2] unexpired ones are held and no rate limit holds for
/// the caller's credentials (KEYS[2]); while one does, its milliseconds left, negated.
const ACQUIRE: &str = r"
local cooling = redis.call('PTTL', KEYS[2])
if cooling > 0 then return -cooling end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) * 2)
  return 1
end
return 0
";

/// Extends a permit still held; 0 when it had expired (and may be someone else's now).
const RENEW: &str = r"
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
return 1
";

/// Publishes a led read's result and ends the lease, if it is still this leader's.
const LAND: &str = r"
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
";

struct Scripts {
    put: Script,
    get: Script,
    invalidate: Script,
    acquire: Script,
    renew: Script,
    land: Script,
}

/// State shared through Redis, with this process's state behind it.
pub struct RedisState {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    connection_config: ConnectionManagerConfig,
    /// Made on first use (an unreachable Redis at start-up is an outage, not a failure).
    pool: Vec<tokio::sync::OnceCell<ConnectionManager>>,
    next: std::sync::atomic::AtomicUsize,
    memory: MemoryState,
    prefix: String,
    replica: String,
    lease_ms: u64,
    timeout: Duration,
    max_value: usize,
    per_host: usize,
    scripts: Scripts,
    /// The key values are signed with (`[state] hmac_key_env`), if any.
    mac_key: Option<Vec<u8>>,
    /// Refusals of what Redis held, logged once per kind.
    refused: Mutex<std::collections::BTreeSet<&'static str>>,
    /// `Some((since_ms, error))` while Redis is unreachable.
    outage: Mutex<Option<(u64, String)>>,
    /// While unreachable: when Redis may be tried again (Unix ms).
    retry_at: AtomicU64,
    /// Names permits and leases uniquely.
    counter: AtomicU64,
    /// Itself, for the task that watches an outage.
    this: std::sync::Weak<Inner>,
    /// Whether that task runs.
    watching: std::sync::atomic::AtomicBool,
}

impl RedisState {
    /// A pool for `url` (connections are made on first use: an unreachable Redis at start-up is
    /// an outage, not a failure to start); `memory` answers while Redis is unreachable.
    pub fn open(
        url: &str,
        config: &StateConfig,
        per_host: usize,
        replica: &str,
        memory: MemoryState,
    ) -> Result<Self, String> {
        let timeout = Duration::from_millis(config.timeout_ms.max(1));
        // A URL redis-rs cannot read fails here, not on the first call.
        let client = redis::Client::open(url)
            .map_err(|e| format!("[state] the Redis URL is not usable: {e}"))?;
        // Its password is a credential: masked in every log line and report.
        if let Some(password) =
            url::Url::parse(url).ok().and_then(|u| u.password().map(str::to_owned))
        {
            let password =
                percent_encoding::percent_decode_str(&password).decode_utf8_lossy().into_owned();
            crate::logging::register_secret(&password);
        }
        let mac_key = match &config.hmac_key_env {
            None => None,
            Some(var) => {
                let key =
                    std::env::var(var).ok().filter(|k| k.trim().len() >= 16).ok_or_else(|| {
                        format!(
                        "[state] hmac_key_env names {var}, which is not set or shorter than 16 \
                         characters; set it to the same long random secret on every replica"
                    )
                    })?;
                crate::logging::register_secret(&key);
                Some(key.into_bytes())
            }
        };
        let connection_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(RETRY_MS));
        Ok(Self {
            inner: Arc::new_cyclic(|this| Inner {
                this: this.clone(),
                watching: std::sync::atomic::AtomicBool::new(false),
                client,
                connection_config,
                pool: (0..POOL_SIZE).map(|_| tokio::sync::OnceCell::new()).collect(),
                next: std::sync::atomic::AtomicUsize::new(0),
                memory,
                prefix: config.key_prefix.clone(),
                replica: replica.to_owned(),
                lease_ms: config.lease_ms.max(100),
                timeout,
                max_value: usize::try_from(config.max_value_kb.saturating_mul(1024))
                    .unwrap_or(usize::MAX),
                per_host: per_host.max(1),
                mac_key,
                refused: Mutex::new(std::collections::BTreeSet::new()),
                scripts: Scripts {
                    put: Script::new(PUT),
                    get: Script::new(GET),
                    invalidate: Script::new(INVALIDATE),
                    acquire: Script::new(ACQUIRE),
                    renew: Script::new(RENEW),
                    land: Script::new(LAND),
                },
                outage: Mutex::new(None),
                retry_at: AtomicU64::new(0),
                counter: AtomicU64::new(0),
            }),
        })
    }
}

impl Inner {
    /// While Redis is unreachable, tries it once a second in the background, so a replica that
    /// serves nothing meanwhile (an idle one) is back on the shared state as soon as Redis is,
    /// not at its next call. Started at the first outage, once; ends with the state.
    fn watch_outages(&self) {
        if self.watching.swap(true, Ordering::SeqCst) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let inner = self.this.clone();
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
                let Some(inner) = inner.upgrade() else { return };
                let down = inner.outage.lock().unwrap_or_else(|e| e.into_inner()).is_some();
                if down {
                    inner.retry_at.store(0, Ordering::SeqCst);
                    inner
                        .run(|mut c| async move {
                            redis::cmd("PING").query_async::<String>(&mut c).await
                        })
                        .await;
                }
            }
        });
    }
}

impl Inner {
    /// The key of `kind` for a call (or tool) `rest` in `scope`.
    fn key(&self, kind: &str, scope: &str, rest: &str) -> String {
        format!("{}:{kind}:{scope}:{rest}", self.prefix)
    }

    /// The key of `kind` for one name: a scope, a rate-limit host, a caller, a session.
    fn key_of(&self, kind: &str, name: &str) -> String {
        format!("{}:{kind}:{name}", self.prefix)
    }

    /// The HMAC of `value` stored under `key`, fed and ready to finish or check; `None` without
    /// `hmac_key_env`.
    fn mac_of(&self, key: &str, value: &str) -> Option<hmac::Hmac<Sha256>> {
        use hmac::Mac as _;
        let secret = self.mac_key.as_ref()?;
        let mut mac = hmac::Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key");
        mac.update(key.as_bytes());
        mac.update(b"\n");
        mac.update(value.as_bytes());
        Some(mac)
    }

    /// The signature of `value` stored under `key` (empty without `hmac_key_env`).
    fn sign(&self, key: &str, value: &str) -> String {
        use hmac::Mac as _;
        self.mac_of(key, value)
            .map(|mac| hex::encode(mac.finalize().into_bytes()))
            .unwrap_or_default()
    }

    /// Whether `mac` is the signature of `value` under `key` (always, without `hmac_key_env`);
    /// compared in constant time.
    fn verify(&self, key: &str, value: &str, mac: &str) -> bool {
        use hmac::Mac as _;
        let Some(expected) = self.mac_of(key, value) else { return true };
        hex::decode(mac).is_ok_and(|given| expected.verify_slice(&given).is_ok())
    }

    /// A record's value, when its signature holds (`mac:value`).
    fn opened_record(&self, key: &str, stored: &str) -> Option<String> {
        let (mac, value) = stored.split_once(':')?;
        if self.verify(key, value, mac) {
            Some(value.to_owned())
        } else {
            self.refuse("record", "a record whose signature does not match ([state] hmac_key_env)");
            None
        }
    }

    /// Says once per kind that something Redis held was not served, and why.
    fn refuse(&self, kind: &'static str, why: &str) {
        let first = self.refused.lock().unwrap_or_else(|e| e.into_inner()).insert(kind);
        if first {
            tracing::warn!(replica = %self.replica, "a value in Redis was not served: {why}");
        }
    }

    /// A name for a permit or lease no other holder on any replica has.
    fn holder_id(&self) -> String {
        format!("{}#{}", self.replica, self.counter.fetch_add(1, Ordering::Relaxed))
    }

    /// [`Inner::run`] of the operation `make` makes, tried again through a passing outage for
    /// up to [`RECORD_PATIENCE`]: for what only Redis holds (a sign-in's records), where a slow
    /// moment must not fail a call.
    async fn patiently<T, M, F, Fut>(&self, make: M) -> Result<T, String>
    where
        M: Fn() -> F,
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let deadline = tokio::time::Instant::now() + RECORD_PATIENCE;
        loop {
            if let Some(value) = self.run(make()).await {
                return Ok(value);
            }
            let retry_at = self.retry_at.load(Ordering::SeqCst);
            let wait = Duration::from_millis(retry_at.saturating_sub(now_ms()).clamp(20, RETRY_MS));
            if tokio::time::Instant::now() + wait > deadline {
                return Err("Redis is unreachable".to_owned());
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Runs `op` on a pooled connection within the timeout; `None` when Redis is unreachable
    /// (now, or still: it is tried at most once a second during an outage).
    async fn run<T, F, Fut>(&self, op: F) -> Option<T>
    where
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let now = now_ms();
        let retry_at = self.retry_at.load(Ordering::SeqCst);
        if retry_at != 0 && now < retry_at {
            return None;
        }
        let outcome = tokio::time::timeout(self.timeout, async {
            let slot = &self.pool[self.next.fetch_add(1, Ordering::Relaxed) % POOL_SIZE];
            let connection = slot
                .get_or_try_init(|| {
                    ConnectionManager::new_with_config(
                        self.client.clone(),
                        self.connection_config.clone(),
                    )
                })
                .await
                .map_err(|e| Unreachable(e.to_string()))?
                .clone();
            match op(connection).await {
                Ok(value) => Ok(value),
                // Redis answered, with an error (a script or type error): not an outage.
                Err(e)
                    if !(e.is_io_error()
                        || e.is_connection_dropped()
                        || e.is_connection_refusal()
                        || e.is_timeout()) =>
                {
                    Err(Answered(e.to_string()))
                }
                Err(e) => Err(Unreachable(e.to_string())),
            }
        })
        .await
        .unwrap_or_else(|_| {
            Err(Unreachable(format!("no answer within {} ms", self.timeout.as_millis())))
        });
        let outcome = match outcome {
            Err(Answered(error)) => {
                tracing::warn!(replica = %self.replica, "Redis refused an operation: {error}");
                return None;
            }
            Err(Unreachable(error)) => Err(error),
            Ok(value) => Ok(value),
        };
        match outcome {
            Ok(value) => {
                self.retry_at.store(0, Ordering::SeqCst);
                let ended = self.outage.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some((since, _)) = ended {
                    tracing::warn!(
                        replica = %self.replica,
                        "Redis is reachable again after {} s; shared state resumes",
                        now.saturating_sub(since) / 1000
                    );
                }
                Some(value)
            }
            Err(error) => {
                self.retry_at.store(now + RETRY_MS, Ordering::SeqCst);
                let starting = self.outage.lock().unwrap_or_else(|e| e.into_inner()).is_none();
                // Say why, once: a wrong password is not an unreachable server.
                let error = if starting { self.diagnose(error).await } else { error };
                let mut outage = self.outage.lock().unwrap_or_else(|e| e.into_inner());
                if outage.is_none() {
                    self.watch_outages();
                    // Once per outage, not once per call.
                    tracing::error!(
                        replica = %self.replica,
                        "Redis is unreachable ({error}); calls go on with this replica's own \
                         state and Redis is tried again every second"
                    );
                    *outage = Some((now, error));
                }
                None
            }
        }
    }

    /// Why Redis did not answer, in words an operator can act on: one direct connection, which
    /// tells a refused password or ACL user (which redis-rs's reconnecting manager reports as a
    /// timeout) from a server that is down.
    async fn diagnose(&self, error: String) -> String {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        let attempt = tokio::time::timeout(self.timeout * 2, async {
            let mut connection =
                self.client.get_multiplexed_async_connection_with_config(&config).await?;
            redis::cmd("PING").query_async::<String>(&mut connection).await
        })
        .await;
        match attempt {
            Ok(Err(e))
                if e.kind() == redis::ErrorKind::AuthenticationFailed
                    || ["WRONGPASS", "NOAUTH", "NOPERM", "invalid username-password"]
                        .iter()
                        .any(|m| e.to_string().contains(m)) =>
            {
                format!(
                    "authentication failed ({}); check the password and ACL user in the Redis \
                     URL ([state] url_env)",
                    crate::logging::scrub(&e.to_string())
                )
            }
            _ => error,
        }
    }

    /// One permit attempt: `Some(Ok(true))` taken, `Some(Ok(false))` full, `Some(Err(left))` a
    /// rate limit holds for the credentials, `None` Redis unreachable.
    async fn try_acquire(
        &self,
        key: &str,
        cooling: &str,
        id: &str,
    ) -> Option<Result<bool, Duration>> {
        let (limit, lease) = (self.per_host, self.lease_ms);
        let script = &self.scripts.acquire;
        self.run(|mut c| async move {
            let taken: i64 = script
                .key(key)
                .key(cooling)
                .arg(id)
                .arg(limit)
                .arg(lease)
                .invoke_async(&mut c)
                .await?;
            Ok(match taken {
                1 => Ok(true),
                0 => Ok(false),
                left => Err(Duration::from_millis(left.unsigned_abs())),
            })
        })
        .await
    }
}

/// Why an operation came back without a value.
enum Failure {
    /// Redis answered with an error.
    Answered(String),
    /// Redis did not answer: an outage.
    Unreachable(String),
}
use Failure::{Answered, Unreachable};

fn call_hash(key: &CallKey) -> String {
    let digest = Sha256::digest(key.to_string().as_bytes());
    hex::encode(&digest[..16])
}

fn result_digest(json: &str) -> String {
    hex::encode(&Sha256::digest(json.as_bytes())[..16])
}

/// A permit held in Redis: renewed while held, removed when dropped; if this replica dies, it
/// expires after the lease.
struct RedisPermit {
    inner: Arc<Inner>,
    key: String,
    id: String,
    renew: tokio::task::JoinHandle<()>,
}

impl Drop for RedisPermit {
    fn drop(&mut self) {
        self.renew.abort();
        let (inner, key, id) = (Arc::clone(&self.inner), self.key.clone(), self.id.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                inner.run(|mut c| async move { c.zrem::<_, _, i64>(&key, &id).await }).await;
            });
        }
    }
}

/// A read this replica leads for every replica: finishing publishes the result for the others.
struct RedisLead {
    inner: Arc<Inner>,
    lease_key: String,
    landed_key: String,
    token: String,
    local: FlightLease,
}

#[async_trait]
impl super::FinishFlight for RedisLead {
    async fn finish(self: Box<Self>, result: &ToolResult) {
        let this = *self;
        if let Ok(json) = serde_json::to_string(result) {
            if json.len() <= this.inner.max_value {
                let script = &this.inner.scripts.land;
                let (lease, landed, token) = (&this.lease_key, &this.landed_key, &this.token);
                // `mac:json` (an empty mac without hmac_key_env).
                let json = format!("{}:{json}", this.inner.sign(landed, &json));
                this.inner
                    .run(|mut c| async move {
                        script
                            .key(lease)
                            .key(landed)
                            .arg(token)
                            .arg(&json)
                            .arg(LANDED_MS)
                            .invoke_async::<i64>(&mut c)
                            .await
                    })
                    .await;
            }
        }
        this.local.finish(result).await;
    }
}

impl RedisState {
    /// The Redis side of [`StateStore::begin_read`], for the one caller of this process that
    /// leads: lead for every replica, or wait for the replica that does.
    async fn lead_or_wait(&self, scope: &str, key: &CallKey, wait: Duration) -> LeadOrWait {
        let inner = &self.inner;
        let hash = call_hash(key);
        let lease_key = inner.key("l", scope, &hash);
        let landed_key = inner.key("d", scope, &hash);
        let token = inner.holder_id();
        let deadline = tokio::time::Instant::now() + wait;
        let mut pause = Duration::from_millis(5);
        let mut waited = false;
        loop {
            let (lk, dk, tk, lease_ms) = (&lease_key, &landed_key, &token, inner.lease_ms);
            // A landed value is `mac:json`: the hex signature (64) and its colon come first.
            let max_value = inner.max_value + SIGNATURE_PREFIX;
            // Take the lease, or read what the leader left.
            let step = inner
                .run(|mut c| async move {
                    // One round trip: take the lease if free, and read what a lead left.
                    // At most max_value bytes of what was landed are read.
                    let (taken, length, landed): (Option<String>, usize, Option<String>) =
                        redis::pipe()
                            .cmd("SET")
                            .arg(lk)
                            .arg(tk)
                            .arg("NX")
                            .arg("PX")
                            .arg(lease_ms)
                            .cmd("STRLEN")
                            .arg(dk)
                            .cmd("GETRANGE")
                            .arg(dk)
                            .arg(0)
                            .arg(max_value)
                            .query_async(&mut c)
                            .await?;
                    let landed = landed.filter(|l| !l.is_empty() && length <= max_value);
                    Ok((taken.is_some(), landed))
                })
                .await;
            match step {
                None => return LeadOrWait::Unshared,
                // A result left by the lead this caller waited for. (One left by an earlier
                // lead is not taken by a caller that finds no call in flight: a write may
                // have made it stale since.)
                Some((_, Some(landed))) if waited => {
                    let (mac, json) = landed.split_once(':').unwrap_or(("", ""));
                    if !inner.verify(&landed_key, json, mac) {
                        inner.refuse("landed mac", "a landed read whose signature does not match");
                    } else if let Ok(result) = serde_json::from_str::<ToolResult>(json) {
                        return LeadOrWait::Landed(result);
                    }
                }
                Some((true, _)) => {
                    return LeadOrWait::Lead { lease_key, landed_key, token };
                }
                Some((false, _)) => {}
            }
            waited = true;
            if tokio::time::Instant::now() + pause >= deadline {
                // Waited long enough: make the call without the lease.
                return LeadOrWait::Unshared;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}

enum LeadOrWait {
    Lead { lease_key: String, landed_key: String, token: String },
    Landed(ToolResult),
    Unshared,
}

#[async_trait]
impl StateStore for RedisState {
    fn backend(&self) -> StateBackendKind {
        StateBackendKind::Redis
    }

    fn status(&self) -> StateStatus {
        match &*self.inner.outage.lock().unwrap_or_else(|e| e.into_inner()) {
            None => StateStatus::Shared,
            Some((since_ms, error)) => {
                StateStatus::Unreachable { since_ms: *since_ms, error: error.clone() }
            }
        }
    }

    async fn probe(&self) -> StateStatus {
        self.inner.retry_at.store(0, Ordering::SeqCst);
        self.inner
            .run(|mut c| async move { redis::cmd("PING").query_async::<String>(&mut c).await })
            .await;
        self.status()
    }

    async fn cache_get(&self, scope: &str, key: &CallKey, ttl: Option<Duration>) -> Option<Hit> {
        let ttl = ttl.filter(|t| !t.is_zero())?;
        let inner = &self.inner;
        let entry = inner.key("c", scope, &call_hash(key));
        let script = &inner.scripts.get;
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let max_value = inner.max_value;
        let entry_key = entry.clone();
        let shared = inner
            .run(|mut c| async move {
                script
                    .key(&entry)
                    .arg(ttl_ms)
                    .arg(max_value)
                    .invoke_async::<Option<(String, u64, u64, String)>>(&mut c)
                    .await
            })
            .await;
        match shared {
            Some(Some((json, _, _, why))) if json.is_empty() => {
                match why.as_str() {
                    "size" => inner.refuse(
                        "size",
                        &format!(
                            "a cached result over max_value_kb ({} KB), left unread",
                            inner.max_value / 1024
                        ),
                    ),
                    _ => inner.refuse(
                        "future",
                        "a cached result stored in the future (forged, or a clock gone wrong)",
                    ),
                }
                None
            }
            Some(Some((json, _, _, mac))) if !inner.verify(&entry_key, &json, &mac) => {
                inner.refuse(
                    "mac",
                    "a cached result whose signature does not match ([state] hmac_key_env)",
                );
                None
            }
            // Redis is the truth while it answers: a local entry may have been invalidated by
            // a write on another replica.
            Some(Some((json, reference, age_ms, _))) => {
                let result: ToolResult = serde_json::from_str(&json).ok()?;
                Some(Hit {
                    result: Arc::new(result),
                    reference: Reference(reference),
                    age: Duration::from_millis(age_ms),
                })
            }
            Some(None) => None,
            None => inner.memory.get_now(scope, key, Some(ttl)),
        }
    }

    async fn cache_put(
        &self,
        scope: &str,
        key: &CallKey,
        result: &ToolResult,
        ttl: Option<Duration>,
    ) -> Option<Stored> {
        if result.is_error {
            return None;
        }
        let inner = &self.inner;
        let local = inner.memory.put_now(scope, key, result);
        let json = serde_json::to_string(result).ok()?;
        let digest = result_digest(&json);
        // Too large to share: other replicas see no entry (the reference is still shared).
        let json = if json.len() > inner.max_value { String::new() } else { json };
        let hash = call_hash(key);
        let (entry, index, refs) = (
            inner.key("c", scope, &hash),
            inner.key("t", scope, key.tool()),
            inner.key_of("r", scope),
        );
        let keep_ms = ttl
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
            .saturating_add(RETAIN_MS);
        let script = &inner.scripts.put;
        let mac = inner.sign(&entry, &json);
        let shared = inner
            .run(|mut c| async move {
                script
                    .key(&entry)
                    .key(&index)
                    .key(&refs)
                    .arg(&json)
                    .arg(&digest)
                    .arg(keep_ms)
                    .arg(SESSION_MS)
                    .arg(&mac)
                    .invoke_async::<(u64, u64, u64)>(&mut c)
                    .await
            })
            .await;
        match shared {
            Some((reference, first_age_ms, unchanged)) => Some(Stored {
                reference: Reference(reference),
                unchanged_for: (unchanged == 1).then(|| Duration::from_millis(first_age_ms)),
            }),
            None => local,
        }
    }

    async fn invalidate(&self, scope: &str, tools: &[String]) {
        let inner = &self.inner;
        inner.memory.invalidate_now(scope, tools);
        if tools.is_empty() {
            return;
        }
        let indexes: Vec<String> = tools.iter().map(|t| inner.key("t", scope, t)).collect();
        let script = &inner.scripts.invalidate;
        inner
            .run(|mut c| async move {
                let mut invocation = script.prepare_invoke();
                for index in &indexes {
                    invocation.key(index);
                }
                invocation.invoke_async::<i64>(&mut c).await
            })
            .await;
    }

    fn forget(&self, scope: &str) {
        self.inner.memory.forget_now(scope);
    }

    async fn begin_read(&self, scope: &str, key: &CallKey, wait: Duration) -> Flight {
        // Callers of this process share one lead; that lead leads or waits across replicas.
        let local = match self.inner.memory.lead_or_join(scope, key) {
            Ok(local) => local,
            Err(landing) => {
                return match wait_landing(landing, wait).await {
                    Some(result) => Flight::Joined(result),
                    None => Flight::Lead(FlightLease::alone()),
                }
            }
        };
        match self.lead_or_wait(scope, key, wait).await {
            LeadOrWait::Lead { lease_key, landed_key, token } => Flight::Lead(FlightLease {
                finish: Some(Box::new(RedisLead {
                    inner: Arc::clone(&self.inner),
                    lease_key,
                    landed_key,
                    token,
                    local,
                })),
            }),
            LeadOrWait::Landed(result) => {
                local.finish(&result).await;
                Flight::Joined(result)
            }
            LeadOrWait::Unshared => Flight::Lead(local),
        }
    }

    async fn permit(&self, host: &str, scope: &str) -> Result<Permit, Duration> {
        let inner = &self.inner;
        let key = inner.key_of("p", &super::budget_name(host, scope));
        let cooling = inner.key("cool", host, scope);
        let id = inner.holder_id();
        let mut pause = Duration::from_millis(2);
        loop {
            match inner.try_acquire(&key, &cooling, &id).await {
                Some(Ok(true)) => return Ok(self.held(key, id)),
                Some(Ok(false)) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(25));
                }
                Some(Err(left)) => return Err(left),
                // Unreachable: this replica's own budget.
                None => return inner.memory.permit(host, scope).await,
            }
        }
    }

    async fn try_permit(&self, host: &str, scope: &str) -> Option<Permit> {
        let inner = &self.inner;
        let key = inner.key_of("p", &super::budget_name(host, scope));
        let cooling = inner.key("cool", host, scope);
        let id = inner.holder_id();
        match inner.try_acquire(&key, &cooling, &id).await {
            Some(Ok(true)) => Some(self.held(key, id)),
            Some(Ok(false) | Err(_)) => None,
            None => inner.memory.try_permit(host, scope).await,
        }
    }

    async fn note_rate_limited(&self, host: &str, scope: &str, wait: Duration) {
        let inner = &self.inner;
        inner.memory.note_rate_limited_now(host, scope, wait);
        let cooling = inner.key("cool", host, scope);
        let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1);
        inner.run(|mut c| async move { c.pset_ex::<_, _, ()>(&cooling, 1, ms).await }).await;
    }

    async fn available_permits(&self, host: &str) -> usize {
        let inner = &self.inner;
        let key = inner.key_of("p", host);
        let held = inner
            .run(|mut c| async move {
                let (seconds, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut c).await?;
                let now = seconds * 1000 + micros / 1000;
                c.zcount::<_, _, _, usize>(&key, now, "+inf").await
            })
            .await;
        match held {
            Some(held) => inner.per_host.saturating_sub(held),
            None => inner.memory.available_permits(host).await,
        }
    }

    async fn should_stop(
        &self,
        caller: &str,
        key: &CallKey,
        after_n: Option<u32>,
    ) -> Option<String> {
        let n = after_n.filter(|n| *n > 0)?;
        let inner = &self.inner;
        let counters = inner.key_of("f", caller);
        let field = call_hash(key);
        let count = inner
            .run(|mut c| async move { c.hget::<_, _, Option<u32>>(&counters, &field).await })
            .await;
        let count = match count {
            Some(count) => count.unwrap_or(0),
            None => inner.memory.unproductive_count(caller, key),
        };
        fail_fast_hint(key.tool(), count, n)
    }

    async fn record_call(&self, caller: &str, key: &CallKey, productive: bool) {
        let inner = &self.inner;
        inner.memory.note_call_now(caller, key.tool());
        inner.memory.record_outcome_now(caller, key, productive);
        let list = inner.key_of("recent", caller);
        let counters = inner.key_of("f", caller);
        let field = call_hash(key);
        inner
            .run(|mut c| async move {
                // One round trip for the caller's whole pipeline state.
                let mut pipe = redis::pipe();
                pipe.atomic()
                    .rpush(&list, key.tool())
                    .ignore()
                    .ltrim(&list, -(RECENT_CALLS as isize), -1)
                    .ignore()
                    .pexpire(&list, CALLER_MS as i64)
                    .ignore();
                if productive {
                    pipe.hdel(&counters, &field).ignore();
                } else {
                    pipe.hincr(&counters, &field, 1)
                        .ignore()
                        .pexpire(&counters, CALLER_MS as i64)
                        .ignore();
                }
                pipe.query_async::<()>(&mut c).await
            })
            .await;
    }

    async fn recent_calls(&self, caller: &str) -> Vec<String> {
        let inner = &self.inner;
        let list = inner.key_of("recent", caller);
        let shared =
            inner.run(|mut c| async move { c.lrange::<_, Vec<String>>(&list, 0, -1).await }).await;
        shared.unwrap_or_else(|| inner.memory.recent_now(caller))
    }

    async fn session_put(&self, id: &str, metadata: &str) -> Result<(), String> {
        let inner = &self.inner;
        inner.memory.session_put(id, metadata).await?;
        let key = inner.key_of("s", id);
        inner
            .run(|mut c| async move { c.pset_ex::<_, _, ()>(&key, metadata, SESSION_MS).await })
            .await
            .ok_or_else(|| "Redis is unreachable".to_owned())
    }

    async fn session_get(&self, id: &str) -> Result<Option<String>, String> {
        let inner = &self.inner;
        let key = inner.key_of("s", id);
        match inner.run(|mut c| async move { c.get::<_, Option<String>>(&key).await }).await {
            Some(found) => Ok(found),
            None => inner.memory.session_get(id).await,
        }
    }

    async fn session_delete(&self, id: &str) -> Result<(), String> {
        let inner = &self.inner;
        inner.memory.session_delete(id).await?;
        let key = inner.key_of("s", id);
        inner.run(|mut c| async move { c.del::<_, ()>(&key).await }).await;
        Ok(())
    }

    // Records live in Redis alone, never in the local copy: a sign-in started on one replica
    // finishes on another, and a `state` taken once must be gone for every replica. Nothing
    // can stand in for them, so they are asked patiently ([`Inner::patiently`]).

    async fn record_put(
        &self,
        key: &str,
        value: &str,
        ttl: Option<Duration>,
    ) -> Result<(), String> {
        let inner = &self.inner;
        let key = inner.key_of("r", key);
        let signed = format!("{}:{value}", inner.sign(&key, value));
        let ms = ttl.map(|ttl| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1));
        inner
            .patiently(|| {
                let (key, signed) = (key.clone(), signed.clone());
                move |mut c: ConnectionManager| async move {
                    match ms {
                        Some(ms) => c.pset_ex::<_, _, ()>(&key, signed, ms).await,
                        None => c.set::<_, _, ()>(&key, signed).await,
                    }
                }
            })
            .await
    }

    async fn record_get(&self, key: &str) -> Result<Option<String>, String> {
        let inner = &self.inner;
        let key = inner.key_of("r", key);
        let found = inner
            .patiently(|| {
                let key = key.clone();
                move |mut c: ConnectionManager| async move { c.get::<_, Option<String>>(&key).await }
            })
            .await?;
        Ok(found.and_then(|stored| inner.opened_record(&key, &stored)))
    }

    async fn record_take(&self, key: &str) -> Result<Option<String>, String> {
        let inner = &self.inner;
        let key = inner.key_of("r", key);
        let taken = inner
            .patiently(|| {
                let key = key.clone();
                move |mut c: ConnectionManager| async move {
                    redis::cmd("GETDEL").arg(&key).query_async::<Option<String>>(&mut c).await
                }
            })
            .await?;
        Ok(taken.and_then(|stored| inner.opened_record(&key, &stored)))
    }

    async fn record_delete(&self, key: &str) -> Result<(), String> {
        let inner = &self.inner;
        let key = inner.key_of("r", key);
        inner
            .patiently(|| {
                let key = key.clone();
                move |mut c: ConnectionManager| async move { c.del::<_, ()>(&key).await }
            })
            .await
    }

    async fn claim(&self, key: &str, ttl: Duration) -> Result<bool, String> {
        let inner = &self.inner;
        let key = inner.key_of("r", key);
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let holder = format!(":{}", inner.holder_id());
        // Set if absent, or already ours: a try whose answer was lost (a slow moment) and that
        // is made again must find it held by itself, not by a stranger for the whole lease.
        let script = redis::Script::new(
            "local held = redis.call('GET', KEYS[1]) \
             if held == false then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end \
             if held == ARGV[1] then return 1 end \
             return 0",
        );
        let taken = inner
            .patiently(|| {
                let (key, holder, script) = (key.clone(), holder.clone(), script.clone());
                move |mut c: ConnectionManager| async move {
                    script.key(&key).arg(&holder).arg(ms).invoke_async::<i64>(&mut c).await
                }
            })
            .await?;
        Ok(taken == 1)
    }
}

impl RedisState {
    /// A permit just taken in Redis, renewed every third of its lease while held.
    fn held(&self, key: String, id: String) -> Permit {
        let inner = Arc::clone(&self.inner);
        let renew = {
            let (inner, key, id) = (Arc::clone(&inner), key.clone(), id.clone());
            tokio::spawn(async move {
                let every = Duration::from_millis(inner.lease_ms / 3);
                loop {
                    tokio::time::sleep(every).await;
                    let (key, id, lease) = (&key, &id, inner.lease_ms);
                    let script = &inner.scripts.renew;
                    inner
                        .run(|mut c| async move {
                            script.key(key).arg(id).arg(lease).invoke_async::<i64>(&mut c).await
                        })
                        .await;
                }
            })
        };
        Permit { _held: Some(Box::new(RedisPermit { inner, key, id, renew })) }
    }
}
