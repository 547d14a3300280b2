//! The Redis backend: the state every replica shares, on a standalone Redis (a small pool of
//! redis-rs's multiplexed, self-reconnecting connections) or a Redis Cluster (redis-rs's cluster
//! connection, which follows the slot map through resharding and failover). Which one is asked
//! of the server at the first connection (`INFO cluster`), or told by listing several nodes.
//!
//! Every key names what it belongs to in a hash tag — `{prefix}:{SCOPE}:c:HASH` for a cached
//! result, `{prefix}:{SCOPE}:recent:CALLER` for a caller's calls, `{prefix}:{p:BUDGET}:slot:0`
//! for a permit — so a cluster shards the state by cache scope and permit budget, and every step
//! that touches several keys touches one slot.
//!
//! What a call costs is counted in round trips and commands, since each is Redis CPU; none of a
//! call's steps is a script unless a permit is contended. A hit is one round trip of two
//! commands (the entry and its tool's generation); a miss five round trips of about nine (the
//! look-up, the in-flight lease, a permit, the call's end, the permit back):
//! - a **cached result** is one string: a header (stored and first-seen time, reference,
//!   digest, the tool's generation it was stored as of, a nonce and the signature) and the
//!   result. Its freshness is judged against Redis's clock, which each replica keeps an offset
//!   to (`TIME`, every ten seconds), so replicas with skewed clocks agree;
//! - **invalidation** moves a tool's generation (`{SCOPE}:g:TOOL`) on; an entry stored as of
//!   another generation is stale. A result is stored as of its call's look-up, so a write that
//!   lands while a read is in flight leaves that read's result stale — nothing to scan, no index
//!   to keep per result;
//! - **references** (`r7`) are handed out from blocks of a per-scope counter a replica takes
//!   at a time: unique in the scope, counting up on each replica;
//! - **identical reads in flight** share one lease, renewed while the lead's call runs; those
//!   waiting read the result from the cache entry the lead stores (there is no second copy to
//!   hand over);
//! - a call's **end** — its result stored, the lease let go of, the call added to its caller's
//!   list — is one round trip; the list is trimmed one record in eight, not at every call;
//! - a **permit** is one of `per_host_concurrency` slot keys taken with `SET NX`, renewed while
//!   held; a replica that dies holding one loses it after `lease_ms`.
//!
//! Every write also goes to the in-process state ([`MemoryState`]), and while Redis is
//! unreachable every read comes from it: calls keep being answered with what this replica knows.
//! The outage is logged once, with why (a refused password is said to be one); while it lasts
//! Redis is tried again once a second in the background (and by the next operation, or by
//! `/readyz`), and the first success ends it — an idle replica is back as soon as Redis is.
//!
//! What is read back is not trusted: no more than `max_value_kb` of a cached result is read
//! (a longer one is refused), one stored "in the future" is refused (it would never go stale),
//! and with `hmac_key_env` every result carries an HMAC-SHA256 over its key, header and value
//! that is checked before it is served — a party with write access to Redis cannot feed the
//! model.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use quiver_core::session_cache::{fail_fast_hint, CallKey, Hit, Reference, Stored};
use quiver_core::ToolResult;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{AsyncCommands, RedisFuture, RedisResult, Script};
use sha2::{Digest, Sha256};

use super::memory::{wait_landing, MemoryState};
use super::{Flight, FlightLease, Lookup, Permit, StateStatus, StateStore, RECENT_CALLS};
use crate::config::{StateBackendKind, StateConfig};
use crate::telemetry::now_ms;

/// How long a result stays stored past its freshness, so a re-fetch can say "nothing changed".
const RETAIN_MS: u64 = 10 * 60 * 1000;
/// The longest a result is kept (freshness and retention together).
const LONGEST_ENTRY_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// How long a generation and a reference counter outlive their last change: longer than any
/// entry stored as of them lives, so neither can come back to an entry that predates it.
const SCOPE_KEY_MS: u64 = LONGEST_ENTRY_MS + 60 * 60 * 1000;
/// References a replica takes from a scope's counter at a time, and for how long it uses them
/// (well within [`SCOPE_KEY_MS`] of the counter's last change).
const REFERENCE_BLOCK: u64 = 16;
const REFERENCE_BLOCK_MS: u64 = 60 * 1000;
/// How long a caller's pipeline state and a session's metadata outlive their last use.
const CALLER_MS: u64 = 60 * 60 * 1000;
const SESSION_MS: u64 = 24 * 60 * 60 * 1000;
/// An entry's header is shorter than this (the rest is the result).
const HEADER_MAX: usize = 512;
/// How often a replica measures its offset to Redis's clock.
const CLOCK_EVERY: Duration = Duration::from_secs(10);
/// How far "in the future" an entry may be stored before it is refused: more than two replicas'
/// offsets to Redis's clock can disagree.
const FUTURE_SLACK_MS: u64 = 1_000;
/// A caller waiting for a read in flight takes a result stored this long before it began to
/// wait (the lead stores, then lets go of the lease: the two may straddle the moment).
const LANDED_SLACK_MS: u64 = 50;
/// While Redis is unreachable, how often it is tried again.
const RETRY_MS: u64 = 1_000;
/// How long an operation on a record may keep trying through a passing outage.
const RECORD_PATIENCE: Duration = Duration::from_secs(5);
/// One record of a call in this many also trims the caller's list and renews its expiry.
const TRIM_EVERY: u64 = 8;
/// Connections per replica to a standalone Redis: each multiplexes every task's requests.
const POOL_SIZE: usize = 4;

/// Takes the first free permit slot of KEYS for ARGV[1], for ARGV[2] ms: its index, or -1.
/// (Only when the slot tried first is taken: an idle budget costs one `SET`.)
const ACQUIRE_ANY: &str = r"
for i, key in ipairs(KEYS) do
  if redis.call('SET', key, ARGV[1], 'NX', 'PX', ARGV[2]) then return i - 1 end
end
return -1
";

/// Extends a permit or lease still held; 0 when it had expired (and may be someone else's now).
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
";

/// Sets KEYS[1] to ARGV[1] for ARGV[2] ms when absent or already ours: a claim whose answer
/// was lost (a slow moment) and that is made again finds it held by itself, not by a stranger
/// for the whole lease.
const CLAIM: &str = r"
local held = redis.call('GET', KEYS[1])
if held == false then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
if held == ARGV[1] then return 1 end
return 0
";

struct Scripts {
    acquire_any: Script,
    renew: Script,
    claim: Script,
}

/// State shared through Redis, with this process's state behind it.
pub struct RedisState {
    inner: Arc<Inner>,
}

/// A connection to a standalone Redis or to a cluster: one interface for every operation.
#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, redis::Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

/// What the server turned out to be, at the first connection.
enum Topology {
    Single(Vec<tokio::sync::OnceCell<ConnectionManager>>),
    Cluster(ClusterConnection),
}

struct Inner {
    /// The first node's client (a standalone server, or where a cluster is first asked).
    client: redis::Client,
    /// Every node the URL lists (more than one: a cluster).
    nodes: Vec<String>,
    connection_config: ConnectionManagerConfig,
    /// Learnt on first use (an unreachable Redis at start-up is an outage, not a failure).
    topology: tokio::sync::OnceCell<Topology>,
    next: AtomicUsize,
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
    /// Names permits, leases, generations and entries uniquely: this process's random part and
    /// a counter.
    unique: (u64, AtomicU64),
    /// Calls recorded by this replica (see [`Inner::trim_due`]).
    records: AtomicU64,
    /// Redis's clock: its time (ms) at an instant of this process's monotonic clock.
    clock: Mutex<Option<(Instant, u64)>>,
    /// The block of references this replica hands out per scope: next, last, taken when.
    references: Mutex<HashMap<String, (u64, u64, Instant)>>,
    /// Itself, for the task that watches an outage.
    this: std::sync::Weak<Inner>,
    /// Whether that task runs.
    watching: std::sync::atomic::AtomicBool,
}

/// What a look-up saw, for storing the call's result as of it (see [`super::Seen`]).
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// The tool's generation then (`0`: never invalidated).
    generation: String,
    /// The entry there, fresh or not, when it was one a replica stored.
    previous: Option<Header>,
}

/// A cached entry's header.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Header {
    /// Redis's time when it was stored (ms).
    stored_ms: u64,
    reference: u64,
    /// When this result was first stored for the call (re-stored unchanged, it keeps it).
    first_ms: u64,
    /// Of the result's JSON.
    digest: String,
    /// The tool's generation it was stored as of (`-`: unknown, never served as a hit).
    generation: String,
    /// Tells two stores apart.
    nonce: String,
}

/// The generation of a tool never invalidated (or not within [`SCOPE_KEY_MS`]).
const FIRST_GENERATION: &str = "0";
/// The generation of a result whose look-up did not ask (a tool without freshness).
const UNKNOWN_GENERATION: &str = "-";

impl Header {
    /// The signed part: `q1 stored reference first digest generation nonce`.
    fn fields(&self) -> String {
        format!(
            "q1 {} {} {} {} {} {}",
            self.stored_ms, self.reference, self.first_ms, self.digest, self.generation, self.nonce
        )
    }

    /// What an entry's signature covers: the signed part of its header and its result.
    fn signed(&self, body: &str) -> String {
        format!("{}\n{body}", self.fields())
    }

    fn parse(line: &str) -> Option<(Self, &str)> {
        let mut parts = line.split(' ');
        if parts.next()? != "q1" {
            return None;
        }
        let header = Self {
            stored_ms: parts.next()?.parse().ok()?,
            reference: parts.next()?.parse().ok()?,
            first_ms: parts.next()?.parse().ok()?,
            digest: parts.next()?.to_owned(),
            generation: parts.next()?.to_owned(),
            nonce: parts.next()?.to_owned(),
        };
        let mac = parts.next()?;
        parts.next().is_none().then_some((header, mac))
    }
}

/// Why an entry Redis held was not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    Format,
    Size,
    Mac,
    Future,
}

impl RedisState {
    /// State shared through the Redis `url` names — one server, or a cluster (several nodes
    /// separated by commas, or one node of it). Connections are made on first use: an
    /// unreachable Redis at start-up is an outage, not a failure to start; `memory` answers
    /// while Redis is unreachable.
    pub fn open(
        url: &str,
        config: &StateConfig,
        per_host: usize,
        replica: &str,
        memory: MemoryState,
    ) -> Result<Self, String> {
        let timeout = Duration::from_millis(config.timeout_ms.max(1));
        if config.key_prefix.contains(['{', '}']) {
            return Err(format!(
                "[state] key_prefix `{}` holds a brace, which would take the place of quiver's \
                 own hash tags in a Redis Cluster; choose one without `{{` or `}}`",
                config.key_prefix
            ));
        }
        let nodes: Vec<String> =
            url.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned).collect();
        let mut first = None;
        for (n, node) in nodes.iter().enumerate() {
            // A URL redis-rs cannot read fails here, not on the first call.
            let client = redis::Client::open(node.as_str())
                .map_err(|e| format!("[state] Redis URL number {} is not usable: {e}", n + 1))?;
            // Its password is a credential: masked in every log line and report.
            if let Some(password) =
                url::Url::parse(node).ok().and_then(|u| u.password().map(str::to_owned))
            {
                let password = percent_encoding::percent_decode_str(&password)
                    .decode_utf8_lossy()
                    .into_owned();
                crate::logging::register_secret(&password);
            }
            first.get_or_insert(client);
        }
        let client = first
            .ok_or_else(|| "[state] the Redis URL is empty: give redis://host:port".to_owned())?;
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
        let seed = {
            use chacha20poly1305::aead::rand_core::RngCore as _;
            chacha20poly1305::aead::OsRng.next_u64()
        };
        Ok(Self {
            inner: Arc::new_cyclic(|this| Inner {
                this: this.clone(),
                watching: std::sync::atomic::AtomicBool::new(false),
                client,
                nodes,
                connection_config,
                topology: tokio::sync::OnceCell::new(),
                next: AtomicUsize::new(0),
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
                    acquire_any: Script::new(ACQUIRE_ANY),
                    renew: Script::new(RENEW),
                    claim: Script::new(CLAIM),
                },
                outage: Mutex::new(None),
                retry_at: AtomicU64::new(0),
                unique: (seed, AtomicU64::new(0)),
                records: AtomicU64::new(0),
                clock: Mutex::new(None),
                references: Mutex::new(HashMap::new()),
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

    /// The key of `kind` for `rest` in the hash tag `tag` (a cache scope, or `p:BUDGET`):
    /// `{prefix}:{tag}:{kind}:{rest}`, every key of one tag in one cluster slot.
    fn key(&self, tag: &str, kind: &str, rest: &str) -> String {
        format!("{}:{{{}}}:{kind}:{rest}", self.prefix, hash_tag(tag))
    }

    /// The keys of a call `key` in `scope`: its cached entry, its tool's generation, and the
    /// lease of a read of it in flight.
    fn call_keys(&self, scope: &str, key: &CallKey) -> CallKeys {
        let hash = call_hash(key);
        CallKeys {
            entry: self.key(scope, "c", &hash),
            generation: self.key(scope, "g", key.tool()),
            lease: self.key(scope, "l", &hash),
        }
    }

    /// The key of `kind` for one name that shares its slot with nothing (a session, a record).
    fn key_of(&self, kind: &str, name: &str) -> String {
        format!("{}:{kind}:{name}", self.prefix)
    }

    /// The slot keys of a permit budget and the key of its rate limit.
    fn budget_keys(&self, host: &str, scope: &str) -> (Vec<String>, String) {
        let tag = format!("p:{}", super::budget_name(host, scope));
        let slots = (0..self.per_host).map(|n| self.key(&tag, "slot", &n.to_string())).collect();
        (slots, self.key(&tag, "cool", ""))
    }

    /// A caller's recent calls and fail-fast counters, in the slot of its cache scope (its
    /// credentials), so a call's record goes with its result in one step.
    fn caller_keys(&self, scope: &str, caller: &str) -> (String, String) {
        (self.key(scope, "recent", caller), self.key(scope, "f", caller))
    }

    /// Whether this record of a call also trims its caller's list and keeps it alive: one in
    /// [`TRIM_EVERY`] records of this replica (the list stays short; an idle caller's expires).
    fn trim_due(&self) -> bool {
        self.records.fetch_add(1, Ordering::Relaxed).is_multiple_of(TRIM_EVERY)
    }

    /// Adds the writes of a call's record to `pipe`: the call joins `caller`'s list (its
    /// length is the pipeline's first value not ignored), a tool that fails fast counts.
    fn record_into(
        &self,
        pipe: &mut redis::Pipeline,
        (list, counters): &(String, String),
        key: &CallKey,
        productive: Option<bool>,
    ) {
        pipe.rpush(list, key.tool());
        match productive {
            Some(true) => {
                pipe.hdel(counters, call_hash(key)).ignore();
            }
            Some(false) => {
                pipe.hincr(counters, call_hash(key), 1)
                    .ignore()
                    .pexpire(counters, CALLER_MS as i64)
                    .ignore();
            }
            None => {}
        }
        if self.trim_due() {
            pipe.ltrim(list, -(RECENT_CALLS as isize), -1)
                .ignore()
                .pexpire(list, CALLER_MS as i64)
                .ignore();
        }
    }

    /// After a record: a list just made (length 1) is given its expiry at once.
    async fn keep_new_list(&self, list: &str, length: Option<usize>) {
        if length == Some(1) {
            self.run(|mut c| async move { c.pexpire::<_, ()>(list, CALLER_MS as i64).await }).await;
        }
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

    fn refuse_entry(&self, refusal: Refusal) {
        match refusal {
            Refusal::Format => {
                self.refuse("format", "a cached result quiver did not write (not its format)")
            }
            Refusal::Size => self.refuse(
                "size",
                &format!(
                    "a cached result over max_value_kb ({} KB), left unread",
                    self.max_value / 1024
                ),
            ),
            Refusal::Mac => self.refuse(
                "mac",
                "a cached result whose signature does not match ([state] hmac_key_env)",
            ),
            Refusal::Future => self.refuse(
                "future",
                "a cached result stored in the future (forged, or a clock gone wrong)",
            ),
        }
    }

    /// A name no other holder on any replica has: for permits, leases, generations, entries.
    fn unique(&self) -> String {
        format!("{:016x}{:x}", self.unique.0, self.unique.1.fetch_add(1, Ordering::Relaxed))
    }

    /// Redis's time now (ms), from the offset last measured; `None` before the first.
    fn redis_now(&self) -> Option<u64> {
        let clock = *self.clock.lock().unwrap_or_else(|e| e.into_inner());
        clock.map(|(at, ms)| ms + u64::try_from(at.elapsed().as_millis()).unwrap_or(0))
    }

    /// Whether the offset to Redis's clock is due to be measured (with the next look-up).
    fn clock_due(&self) -> bool {
        let clock = *self.clock.lock().unwrap_or_else(|e| e.into_inner());
        clock.is_none_or(|(at, _)| at.elapsed() >= CLOCK_EVERY)
    }

    /// Notes Redis's `TIME` answer to a request sent at `sent` and answered at `answered`: it
    /// was read half-way between.
    fn set_clock(&self, sent: Instant, answered: Instant, (seconds, micros): (u64, u64)) {
        let at = sent + answered.saturating_duration_since(sent) / 2;
        *self.clock.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((at, seconds * 1000 + micros / 1000));
    }

    /// Redis's time now, asked of Redis when no offset is known or it is due to be measured
    /// again; `None` when unreachable.
    async fn redis_time(&self) -> Option<u64> {
        if let Some(now) = self.redis_now().filter(|_| !self.clock_due()) {
            return Some(now);
        }
        let (sent, time) = self
            .run(|mut c| async move {
                let sent = Instant::now();
                let time: (u64, u64) = redis::cmd("TIME").query_async(&mut c).await?;
                Ok((sent, time))
            })
            .await?;
        self.set_clock(sent, Instant::now(), time);
        self.redis_now()
    }

    /// The next reference of `scope`, from this replica's block of its counter (a new block
    /// every [`REFERENCE_BLOCK`] references or [`REFERENCE_BLOCK_MS`]).
    async fn next_reference(&self, scope: &str) -> Option<u64> {
        {
            let mut blocks = self.references.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((next, last, taken)) = blocks.get_mut(scope) {
                if *next <= *last && taken.elapsed() < Duration::from_millis(REFERENCE_BLOCK_MS) {
                    *next += 1;
                    return Some(*next - 1);
                }
            }
        }
        let counter = self.key(scope, "n", "");
        let last = self
            .run(|mut c| async move {
                let (last,): (u64,) = redis::pipe()
                    .incr(&counter, REFERENCE_BLOCK)
                    .pexpire(&counter, SCOPE_KEY_MS as i64)
                    .ignore()
                    .query_async(&mut c)
                    .await?;
                Ok(last)
            })
            .await?;
        let first = last + 1 - REFERENCE_BLOCK;
        let mut blocks = self.references.lock().unwrap_or_else(|e| e.into_inner());
        if blocks.len() >= 4096 {
            // Scopes come and go (tokens rotate): the blocks of idle ones are dropped, unused.
            blocks.retain(|_, (_, _, taken)| {
                taken.elapsed() < Duration::from_millis(REFERENCE_BLOCK_MS)
            });
        }
        blocks.insert(scope.to_owned(), (first + 1, last, Instant::now()));
        Some(first)
    }

    /// An entry as read (at most `HEADER_MAX + max_value + 1` bytes of it): its header and
    /// result when it is one a replica stored, `None` when there is none, or why it is refused.
    fn open_entry(&self, key: &str, raw: &[u8]) -> Result<Option<(Header, String)>, Refusal> {
        if raw.is_empty() {
            return Ok(None);
        }
        let end = raw[..raw.len().min(HEADER_MAX)]
            .iter()
            .position(|b| *b == b'\n')
            .ok_or(Refusal::Format)?;
        let line = std::str::from_utf8(&raw[..end]).map_err(|_| Refusal::Format)?;
        let (header, mac) = Header::parse(line).ok_or(Refusal::Format)?;
        let body = &raw[end + 1..];
        if body.len() > self.max_value {
            return Err(Refusal::Size);
        }
        let body = std::str::from_utf8(body).map_err(|_| Refusal::Format)?;
        if !self.verify(key, &header.signed(body), mac) {
            return Err(Refusal::Mac);
        }
        Ok(Some((header, body.to_owned())))
    }

    /// How many bytes of an entry are read.
    fn entry_read_end(&self) -> usize {
        HEADER_MAX + self.max_value
    }

    /// [`Inner::run`] of the operation `make` makes, tried again through a passing outage for
    /// up to [`RECORD_PATIENCE`]: for what only Redis holds (a sign-in's records), where a slow
    /// moment must not fail a call.
    async fn patiently<T, M, F, Fut>(&self, make: M) -> Result<T, String>
    where
        M: Fn() -> F,
        F: FnOnce(Connection) -> Fut,
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

    /// What the server is: a cluster when several nodes are listed or the one listed says it
    /// is one (`INFO cluster`), else a standalone Redis (or a primary).
    async fn topology(&self) -> Result<&Topology, String> {
        self.topology
            .get_or_try_init(|| async {
                let cluster = if self.nodes.len() > 1 {
                    true
                } else {
                    let mut connection = self.direct().await.map_err(|e| e.to_string())?;
                    let info: String = redis::cmd("INFO")
                        .arg("cluster")
                        .query_async(&mut connection)
                        .await
                        .map_err(|e| e.to_string())?;
                    info.lines().any(|l| l.trim() == "cluster_enabled:1")
                };
                if !cluster {
                    let pool = (0..POOL_SIZE).map(|_| tokio::sync::OnceCell::new()).collect();
                    return Ok(Topology::Single(pool));
                }
                let connection = redis::cluster::ClusterClientBuilder::new(self.nodes.clone())
                    .connection_timeout(self.timeout)
                    .response_timeout(self.timeout)
                    .retries(2)
                    .max_retry_wait(RETRY_MS)
                    .build()
                    .map_err(|e| e.to_string())?
                    .get_async_connection()
                    .await
                    .map_err(|e| e.to_string())?;
                tracing::info!(
                    replica = %self.replica,
                    "[state] Redis is a cluster: keys are sharded by cache scope, budget and caller"
                );
                Ok(Topology::Cluster(connection))
            })
            .await
    }

    /// One plain connection to the first node, outside the pool and the cluster connection: to
    /// ask what the server is, and why it does not answer.
    async fn direct(&self) -> RedisResult<redis::aio::MultiplexedConnection> {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        self.client.get_multiplexed_async_connection_with_config(&config).await
    }

    /// A connection: one of the pool's (standalone), or the cluster's.
    async fn connection(&self) -> Result<Connection, String> {
        match self.topology().await? {
            Topology::Cluster(connection) => Ok(Connection::Cluster(connection.clone())),
            Topology::Single(pool) => {
                let slot = &pool[self.next.fetch_add(1, Ordering::Relaxed) % POOL_SIZE];
                let connection = slot
                    .get_or_try_init(|| {
                        ConnectionManager::new_with_config(
                            self.client.clone(),
                            self.connection_config.clone(),
                        )
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(Connection::Single(connection.clone()))
            }
        }
    }

    /// Runs `op` on a connection within the timeout; `None` when Redis is unreachable (now, or
    /// still: it is tried at most once a second during an outage).
    async fn run<T, F, Fut>(&self, op: F) -> Option<T>
    where
        F: FnOnce(Connection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let now = now_ms();
        let retry_at = self.retry_at.load(Ordering::SeqCst);
        if retry_at != 0 && now < retry_at {
            return None;
        }
        let outcome = tokio::time::timeout(self.timeout, async {
            let connection = self.connection().await.map_err(Unreachable)?;
            match op(connection).await {
                Ok(value) => Ok(value),
                // Redis answered, with an error (a script or type error): not an outage.
                Err(e)
                    if !(e.is_io_error()
                        || e.is_connection_dropped()
                        || e.is_connection_refusal()
                        || e.is_timeout()
                        || e.is_cluster_error()
                        || e.kind() == redis::ErrorKind::ClusterConnectionNotFound) =>
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
        let attempt = tokio::time::timeout(self.timeout * 2, async {
            let mut connection = self.direct().await?;
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
            _ => crate::logging::scrub(&error),
        }
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

/// What goes between a key's braces: the name itself, or — when it holds a brace, which would
/// end the tag early — its digest.
fn hash_tag(name: &str) -> String {
    if name.contains(['{', '}']) {
        hex::encode(&Sha256::digest(name.as_bytes())[..12])
    } else {
        name.to_owned()
    }
}

/// A call's name in keys: the digest of its canonical form.
fn call_hash(key: &CallKey) -> String {
    short_digest(&key.to_string())
}

/// The first 16 bytes of `text`'s SHA-256, in hex.
fn short_digest(text: &str) -> String {
    hex::encode(&Sha256::digest(text.as_bytes())[..16])
}

/// Adds to `pipe` the reading of a cached entry (its first `read_end + 1` bytes) and of its
/// tool's generation.
fn read_entry(pipe: &mut redis::Pipeline, entry: &str, generation: &str, read_end: usize) {
    pipe.cmd("GETRANGE").arg(entry).arg(0).arg(read_end).get(generation);
}

/// Adds `SET key value NX PX ms` to `pipe`: taken (its answer `OK`) only when nobody holds `key`.
fn set_if_absent<'p>(
    pipe: &'p mut redis::Pipeline,
    key: &str,
    value: &str,
    ms: u64,
) -> &'p mut redis::Pipeline {
    pipe.cmd("SET").arg(key).arg(value).arg("NX").arg("PX").arg(ms)
}

/// Renews `key` (a permit slot or an in-flight lease) every third of `lease_ms` while it is
/// still `id`'s, until the returned task is aborted.
fn renewed(inner: &Arc<Inner>, key: String, id: String) -> tokio::task::JoinHandle<()> {
    let inner = Arc::clone(inner);
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
}

/// A permit held in Redis: one slot key, renewed while held, deleted when dropped; if this
/// replica dies, it expires after the lease.
struct RedisPermit {
    inner: Arc<Inner>,
    key: String,
    renew: tokio::task::JoinHandle<()>,
}

impl Drop for RedisPermit {
    fn drop(&mut self) {
        self.renew.abort();
        let (inner, key) = (Arc::clone(&self.inner), self.key.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                // Plainly deleted: held and renewed, the slot is still this permit's. (One whose
                // renewals all failed for a whole lease may have been taken since; freeing it
                // lets one call more through at once, once.)
                inner.run(|mut c| async move { c.del::<_, i64>(&key).await }).await;
            });
        }
    }
}

/// A read this replica leads for every replica: those waiting read its result from the cache
/// entry it stores; finishing lets go of the lease.
///
/// The lease is renewed while the call runs, like a permit: a slow service does not let a second
/// caller lead the same read; a replica that dies stops renewing, and the lease ends after
/// `lease_ms`.
struct RedisLead {
    inner: Arc<Inner>,
    /// `None` once taken out to be let go of with the call's other writes.
    lease_key: Option<String>,
    local: Option<FlightLease>,
    renew: tokio::task::JoinHandle<()>,
}

impl Drop for RedisLead {
    fn drop(&mut self) {
        self.renew.abort();
    }
}

#[async_trait]
impl super::FinishFlight for RedisLead {
    async fn finish(mut self: Box<Self>, result: &ToolResult) {
        self.renew.abort();
        if let Some(lease) = &self.lease_key {
            // The result (when it is one to keep) is in the cache already. The lease is deleted
            // plainly: held and renewed, it is still this lead's (one whose renewals all failed
            // for a whole lease may be another's now: that lead ends early and, at worst, a
            // third caller makes the same call).
            self.inner.run(|mut c| async move { c.del::<_, i64>(lease).await }).await;
        }
        if let Some(local) = self.local.take() {
            local.finish(result).await;
        }
    }

    fn take_shared_lease(&mut self) -> Option<String> {
        self.renew.abort();
        self.lease_key.take()
    }
}

/// The keys of one call (see [`Inner::call_keys`]).
struct CallKeys {
    entry: String,
    generation: String,
    lease: String,
}

/// A cached entry ready to be written.
struct PreparedEntry {
    key: String,
    value: String,
    keep_ms: u64,
    stored: Stored,
}

enum LeadOrWait {
    Lead { lease_key: String, token: String },
    Landed(ToolResult),
    Unshared,
}

impl RedisState {
    /// The Redis side of [`StateStore::begin_read`], for the one caller of this process that
    /// leads: lead for every replica, or wait for the replica that does and take the result it
    /// stores.
    async fn lead_or_wait(&self, scope: &str, key: &CallKey, wait: Duration) -> LeadOrWait {
        let inner = &self.inner;
        let CallKeys { entry: entry_key, generation: generation_key, lease: lease_key } =
            inner.call_keys(scope, key);
        let token = inner.unique();
        let lease_ms = inner.lease_ms;
        let taken = inner
            .run(|mut c| {
                let (lease, token) = (&lease_key, &token);
                async move {
                    let (taken,): (Option<String>,) =
                        set_if_absent(&mut redis::pipe(), lease, token, lease_ms)
                            .query_async(&mut c)
                            .await?;
                    Ok(taken)
                }
            })
            .await;
        match taken {
            None => return LeadOrWait::Unshared,
            Some(Some(_)) => return LeadOrWait::Lead { lease_key, token },
            Some(None) => {}
        }
        // Another caller leads: its result is the one stored from about now on.
        let Some(since) = inner.redis_time().await else { return LeadOrWait::Unshared };
        let since = since.saturating_sub(LANDED_SLACK_MS);
        let deadline = tokio::time::Instant::now() + wait;
        let mut pause = Duration::from_millis(5);
        let read_end = inner.entry_read_end();
        loop {
            if tokio::time::Instant::now() + pause >= deadline {
                // Waited long enough: make the call without the lease.
                return LeadOrWait::Unshared;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
            let step = inner
                .run(|mut c| {
                    let (lease, entry, generation, token) =
                        (&lease_key, &entry_key, &generation_key, &token);
                    async move {
                        // One round trip: take the lease if it is free now, and read the entry.
                        let mut pipe = redis::pipe();
                        set_if_absent(&mut pipe, lease, token, lease_ms);
                        read_entry(&mut pipe, entry, generation, read_end);
                        let (taken, raw, current): (Option<String>, Vec<u8>, Option<String>) =
                            pipe.query_async(&mut c).await?;
                        Ok((taken.is_some(), raw, current))
                    }
                })
                .await;
            let Some((taken, raw, current)) = step else { return LeadOrWait::Unshared };
            let current = current.unwrap_or_else(|| FIRST_GENERATION.to_owned());
            match inner.open_entry(&entry_key, &raw) {
                // The result the lead stored (or a newer one), as of the tool's generation now.
                Ok(Some((header, body)))
                    if header.stored_ms >= since
                        && !body.is_empty()
                        && (header.generation == current
                            || header.generation == UNKNOWN_GENERATION) =>
                {
                    if taken {
                        inner.run(|mut c| async move { c.del::<_, i64>(&lease_key).await }).await;
                    }
                    if let Ok(result) = serde_json::from_str::<ToolResult>(&body) {
                        return LeadOrWait::Landed(result);
                    }
                    return LeadOrWait::Unshared;
                }
                Err(refusal) => inner.refuse_entry(refusal),
                Ok(_) => {}
            }
            if taken {
                // The lead let go without a result to share (an error, or one too large):
                // this caller makes the call, for the others still waiting.
                return LeadOrWait::Lead { lease_key, token };
            }
        }
    }

    /// The end of a call `key` by `caller` in `scope`, recorded here and in one round trip to
    /// Redis, in this order: its `entry` stored, the `lease` that makes others wait for it let
    /// go of, and the call added to its caller's list (a tool that fails fast counted) — every
    /// key in the cache scope's slot.
    async fn write_call_end(
        &self,
        scope: &str,
        key: &CallKey,
        caller: &str,
        productive: Option<bool>,
        entry: Option<&PreparedEntry>,
        lease: Option<&str>,
    ) {
        let inner = &self.inner;
        inner.memory.record_now(caller, key, productive);
        let keys = inner.caller_keys(scope, caller);
        let length = inner
            .run(|mut c| {
                let keys = &keys;
                async move {
                    let mut pipe = redis::pipe();
                    if let Some(entry) = entry {
                        pipe.pset_ex(&entry.key, &entry.value, entry.keep_ms).ignore();
                    }
                    if let Some(lease) = lease {
                        pipe.del(lease).ignore();
                    }
                    inner.record_into(&mut pipe, keys, key, productive);
                    let (length,): (usize,) = pipe.query_async(&mut c).await?;
                    Ok(length)
                }
            })
            .await;
        inner.keep_new_list(&keys.0, length).await;
    }

    /// The entry that keeps `result` of `key` in `scope`, fresh for `ttl`, as of what its
    /// look-up saw: the same reference and first-seen time when the result is the one seen,
    /// else the next reference. `None` when Redis is unreachable.
    async fn prepare_entry(
        &self,
        scope: &str,
        key: &CallKey,
        result: &ToolResult,
        ttl: Option<Duration>,
        seen: &super::Seen,
    ) -> Option<PreparedEntry> {
        let inner = &self.inner;
        let json = serde_json::to_string(result).ok()?;
        let digest = short_digest(&json);
        let now = inner.redis_time().await?;
        let seen = seen.shared.as_ref();
        let unchanged = seen.and_then(|s| s.previous.as_ref()).filter(|p| p.digest == digest);
        let (reference, first_ms) = match unchanged {
            Some(previous) => (previous.reference, previous.first_ms),
            None => (inner.next_reference(scope).await?, now),
        };
        let header = Header {
            stored_ms: now,
            reference,
            first_ms,
            digest,
            generation: seen.map_or(UNKNOWN_GENERATION, |s| s.generation.as_str()).to_owned(),
            nonce: inner.unique(),
        };
        // Too large to share: other replicas see no result (the reference is still shared).
        let body = if json.len() > inner.max_value { "" } else { json.as_str() };
        let entry = inner.call_keys(scope, key).entry;
        let mac = inner.sign(&entry, &header.signed(body));
        let mac = if mac.is_empty() { "-".to_owned() } else { mac };
        let keep_ms = ttl
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
            .saturating_add(RETAIN_MS)
            .min(LONGEST_ENTRY_MS);
        Some(PreparedEntry {
            value: format!("{} {mac}\n{body}", header.fields()),
            key: entry,
            keep_ms,
            stored: Stored {
                reference: Reference(reference),
                unchanged_for: unchanged
                    .map(|previous| Duration::from_millis(now.saturating_sub(previous.first_ms))),
            },
        })
    }

    /// A permit just taken in Redis (slot `key`), renewed while held.
    fn held(&self, key: String, id: String) -> Permit {
        let renew = renewed(&self.inner, key.clone(), id);
        Permit { _held: Some(Box::new(RedisPermit { inner: Arc::clone(&self.inner), key, renew })) }
    }

    /// One permit attempt: `Some(Ok(Some(slot)))` taken, `Some(Ok(None))` every slot held,
    /// `Some(Err(left))` a rate limit holds for the credentials, `None` Redis unreachable.
    async fn try_acquire(
        &self,
        host: &str,
        scope: &str,
        id: &str,
    ) -> Option<Result<Option<String>, Duration>> {
        let inner = &self.inner;
        let (slots, cooling) = inner.budget_keys(host, scope);
        let lease = inner.lease_ms;
        // Slots are tried from a different one each time, so holders spread over them.
        let first = inner.next.fetch_add(1, Ordering::Relaxed) % slots.len();
        let (cooling_ms, taken) = inner
            .run(|mut c| {
                let (cooling, slot) = (&cooling, &slots[first]);
                async move {
                    // One round trip: whether a rate limit holds, and one slot.
                    let mut pipe = redis::pipe();
                    set_if_absent(pipe.pttl(cooling), slot, id, lease);
                    let (cooling_ms, taken): (i64, Option<String>) =
                        pipe.query_async(&mut c).await?;
                    Ok((cooling_ms, taken.is_some()))
                }
            })
            .await?;
        let mut held = taken.then(|| slots[first].clone());
        if cooling_ms > 0 {
            if let Some(slot) = held {
                inner.run(|mut c| async move { c.del::<_, i64>(&slot).await }).await;
            }
            return Some(Err(Duration::from_millis(cooling_ms.unsigned_abs())));
        }
        if held.is_none() && slots.len() > 1 {
            // The first was held: any other free one, in one step.
            let script = &inner.scripts.acquire_any;
            let index = inner
                .run(|mut c| {
                    let slots = &slots;
                    async move {
                        let mut invocation = script.prepare_invoke();
                        for slot in slots {
                            invocation.key(slot);
                        }
                        invocation.arg(id).arg(lease).invoke_async::<i64>(&mut c).await
                    }
                })
                .await?;
            held = usize::try_from(index).ok().and_then(|i| slots.get(i).cloned());
        }
        Some(Ok(held))
    }
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

    async fn cache_lookup(&self, scope: &str, key: &CallKey, ttl: Option<Duration>) -> Lookup {
        // A tool without freshness never hits; its results are stored as of no generation.
        let Some(ttl) = ttl.filter(|t| !t.is_zero()) else { return Lookup::default() };
        let inner = &self.inner;
        let CallKeys { entry, generation, .. } = inner.call_keys(scope, key);
        let read_end = inner.entry_read_end();
        let with_clock = inner.clock_due();
        let read = inner
            .run(|mut c| {
                let (entry, generation) = (&entry, &generation);
                async move {
                    // One round trip: the entry, its tool's generation, and now and then
                    // Redis's clock.
                    let mut pipe = redis::pipe();
                    read_entry(&mut pipe, entry, generation, read_end);
                    if with_clock {
                        pipe.cmd("TIME");
                    }
                    let sent = Instant::now();
                    let mut values: Vec<redis::Value> = pipe.query_async(&mut c).await?;
                    let answered = Instant::now();
                    let time = if with_clock {
                        Some(redis::from_redis_value::<(u64, u64)>(
                            values.pop().unwrap_or(redis::Value::Nil),
                        )?)
                    } else {
                        None
                    };
                    let current: Option<String> =
                        redis::from_redis_value(values.pop().unwrap_or(redis::Value::Nil))?;
                    let raw: Vec<u8> =
                        redis::from_redis_value(values.pop().unwrap_or(redis::Value::Nil))?;
                    Ok((raw, current, time.map(|t| (sent, answered, t))))
                }
            })
            .await;
        let Some((raw, current, time)) = read else {
            // Unreachable: this replica's own cache, and results stored as of no generation.
            return Lookup { hit: inner.memory.get_now(scope, key, Some(ttl)), seen: None.into() };
        };
        if let Some((sent, answered, time)) = time {
            inner.set_clock(sent, answered, time);
        }
        let current = current.unwrap_or_else(|| FIRST_GENERATION.to_owned());
        let mut seen = Seen { generation: current, previous: None };
        let (header, body) = match inner.open_entry(&entry, &raw) {
            Ok(Some(opened)) => opened,
            // Redis is the truth while it answers: a local entry may have been invalidated by
            // a write on another replica.
            Ok(None) => return Lookup { hit: None, seen: Some(seen).into() },
            Err(refusal) => {
                inner.refuse_entry(refusal);
                return Lookup { hit: None, seen: Some(seen).into() };
            }
        };
        let now = inner.redis_now().unwrap_or(header.stored_ms);
        if header.stored_ms > now + FUTURE_SLACK_MS {
            inner.refuse_entry(Refusal::Future);
            return Lookup { hit: None, seen: Some(seen).into() };
        }
        let age = Duration::from_millis(now.saturating_sub(header.stored_ms));
        let fresh = age < ttl && !body.is_empty() && header.generation == seen.generation;
        let hit = if fresh {
            serde_json::from_str::<ToolResult>(&body).ok().map(|result| Hit {
                result: Arc::new(result),
                reference: Reference(header.reference),
                age,
            })
        } else {
            None
        };
        seen.previous = Some(header);
        Lookup { hit, seen: Some(seen).into() }
    }

    async fn cache_put(
        &self,
        scope: &str,
        key: &CallKey,
        result: &ToolResult,
        ttl: Option<Duration>,
        seen: &super::Seen,
    ) -> Option<Stored> {
        if result.is_error {
            return None;
        }
        let inner = &self.inner;
        let local = inner.memory.put_now(scope, key, result);
        let Some(entry) = self.prepare_entry(scope, key, result, ttl, seen).await else {
            return local;
        };
        let PreparedEntry { key, value, keep_ms, stored } = entry;
        inner.run(|mut c| async move { c.pset_ex::<_, _, ()>(&key, value, keep_ms).await }).await?;
        Some(stored)
    }

    async fn invalidate(&self, scope: &str, tools: &[String]) {
        let inner = &self.inner;
        inner.memory.invalidate_now(scope, tools);
        if tools.is_empty() {
            return;
        }
        // Each tool's generation moves on to a value it never had: every entry stored as of an
        // earlier one is stale, on every replica, without being found.
        let generations: Vec<(String, String)> =
            tools.iter().map(|t| (inner.key(scope, "g", t), inner.unique())).collect();
        inner
            .run(|mut c| {
                let generations = &generations;
                async move {
                    let mut pipe = redis::pipe();
                    for (key, value) in generations {
                        pipe.pset_ex(key, value, SCOPE_KEY_MS).ignore();
                    }
                    pipe.query_async::<()>(&mut c).await
                }
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
            LeadOrWait::Lead { lease_key, token } => Flight::Lead(FlightLease {
                finish: Some(Box::new(RedisLead {
                    inner: Arc::clone(&self.inner),
                    renew: renewed(&self.inner, lease_key.clone(), token),
                    lease_key: Some(lease_key),
                    local: Some(local),
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
        let id = self.inner.unique();
        let mut pause = Duration::from_millis(2);
        loop {
            match self.try_acquire(host, scope, &id).await {
                Some(Ok(Some(slot))) => return Ok(self.held(slot, id)),
                Some(Ok(None)) => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(25));
                }
                Some(Err(left)) => return Err(left),
                // Unreachable: this replica's own budget.
                None => return self.inner.memory.permit(host, scope).await,
            }
        }
    }

    async fn try_permit(&self, host: &str, scope: &str) -> Option<Permit> {
        let id = self.inner.unique();
        match self.try_acquire(host, scope, &id).await {
            Some(Ok(Some(slot))) => Some(self.held(slot, id)),
            Some(Ok(None) | Err(_)) => None,
            None => self.inner.memory.try_permit(host, scope).await,
        }
    }

    async fn note_rate_limited(&self, host: &str, scope: &str, wait: Duration) {
        let inner = &self.inner;
        inner.memory.note_rate_limited_now(host, scope, wait);
        let (_, cooling) = inner.budget_keys(host, scope);
        let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1);
        inner.run(|mut c| async move { c.pset_ex::<_, _, ()>(&cooling, 1, ms).await }).await;
    }

    async fn available_permits(&self, host: &str) -> usize {
        let inner = &self.inner;
        let (slots, _) = inner.budget_keys(host, super::SHARED_CREDENTIALS);
        let held = inner
            .run(|mut c| {
                let slots = &slots;
                async move { c.exists::<_, usize>(slots).await }
            })
            .await;
        match held {
            Some(held) => inner.per_host.saturating_sub(held),
            None => inner.memory.available_permits(host).await,
        }
    }

    async fn should_stop(
        &self,
        scope: &str,
        caller: &str,
        key: &CallKey,
        after_n: Option<u32>,
    ) -> Option<String> {
        let n = after_n.filter(|n| *n > 0)?;
        let inner = &self.inner;
        let (_, counters) = inner.caller_keys(scope, caller);
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

    async fn record_call(
        &self,
        scope: &str,
        caller: &str,
        key: &CallKey,
        productive: Option<bool>,
    ) {
        self.write_call_end(scope, key, caller, productive, None, None).await;
    }

    async fn recent_calls(&self, scope: &str, caller: &str) -> Vec<String> {
        let inner = &self.inner;
        let (list, _) = inner.caller_keys(scope, caller);
        let shared = inner
            .run(|mut c| async move {
                c.lrange::<_, Vec<String>>(&list, -(RECENT_CALLS as isize), -1).await
            })
            .await;
        shared.unwrap_or_else(|| inner.memory.recent_now(caller))
    }

    async fn end_call(&self, scope: &str, key: &CallKey, ending: super::Ending<'_>) {
        let super::Ending { result, keep, lead: mut led, caller, productive } = ending;
        let entry = match keep.filter(|_| !result.is_error) {
            Some((ttl, seen)) => {
                // This process's own state first, as every write.
                self.inner.memory.put_now(scope, key, result);
                self.prepare_entry(scope, key, result, ttl, seen).await
            }
            None => None,
        };
        let lease = led.as_mut().and_then(|lead| lead.finish.as_mut()?.take_shared_lease());
        self.write_call_end(scope, key, caller, productive, entry.as_ref(), lease.as_deref()).await;
        if let Some(lead) = led {
            // Callers of this process waiting for it.
            lead.finish(result).await;
        }
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
                move |mut c: Connection| async move {
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
                move |mut c: Connection| async move { c.get::<_, Option<String>>(&key).await }
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
                move |mut c: Connection| async move {
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
                move |mut c: Connection| async move { c.del::<_, ()>(&key).await }
            })
            .await
    }

    async fn claim(&self, key: &str, ttl: Duration) -> Result<bool, String> {
        let inner = &self.inner;
        let key = inner.key_of("r", key);
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let holder = format!(":{}", inner.unique());
        let script = &inner.scripts.claim;
        let taken = inner
            .patiently(|| {
                let (key, holder) = (key.clone(), holder.clone());
                move |mut c: Connection| async move {
                    script.key(&key).arg(&holder).arg(ms).invoke_async::<i64>(&mut c).await
                }
            })
            .await?;
        Ok(taken == 1)
    }
}
