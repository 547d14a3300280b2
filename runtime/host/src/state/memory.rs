//! The in-process state: the default backend, and what a Redis replica falls back on while Redis
//! is unreachable. Every operation is a lock and a map lookup; nothing waits on IO.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use quiver_core::session_cache::{fail_fast_hint, CallKey, Hit, SessionCache, Stored};
use quiver_core::ToolResult;
use tokio::sync::watch;

use super::{
    FinishFlight, Flight, FlightLease, Lookup, Permit, Seen, StateStatus, StateStore, RECENT_CALLS,
};
use crate::config::StateBackendKind;
use crate::session::DEFAULT_CACHE_CAPACITY;
use crate::speculation::HostBudgets;

/// A call in flight, as those who wait for it see it: `None` while it runs.
type Landing = watch::Receiver<Option<ToolResult>>;

/// Everything in this process. A scope's cache lives until [`StateStore::forget`] (a session
/// ending with its own scope) or until more than [`MAX_SCOPES`] scopes push it out.
pub struct MemoryState {
    caches: Mutex<HashMap<String, Arc<Mutex<SessionCache>>>>,
    callers: Mutex<HashMap<String, Arc<Mutex<CallerState>>>>,
    flights: Arc<Mutex<HashMap<(String, CallKey), Landing>>>,
    budgets: HostBudgets,
    /// Rate limits that hold, by (host, scope): until when.
    cooling: Mutex<HashMap<(String, String), Instant>>,
    sessions: Mutex<HashMap<String, String>>,
    /// Records and claims, with when they expire.
    records: Mutex<HashMap<String, (String, Option<Instant>)>>,
}

/// One caller's pipeline state.
struct CallerState {
    /// Fail-fast counters only: capacity 0 stores no results.
    counters: SessionCache,
    recent: Vec<String>,
}

/// Callers whose pipeline state is kept; past it, the state of idle callers is dropped.
const MAX_CALLERS: usize = 4096;

/// Cache scopes kept; past it, scopes nobody is using are dropped.
const MAX_SCOPES: usize = 4096;

impl MemoryState {
    /// In-process state with at most `per_host` calls in flight per rate-limit host.
    pub fn new(per_host: usize) -> Self {
        Self {
            caches: Mutex::new(HashMap::new()),
            callers: Mutex::new(HashMap::new()),
            flights: Arc::new(Mutex::new(HashMap::new())),
            budgets: HostBudgets::new(per_host),
            cooling: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            records: Mutex::new(HashMap::new()),
        }
    }

    /// The cache of `scope`, shared by every session of that scope in this process.
    fn cache(&self, scope: &str) -> Arc<Mutex<SessionCache>> {
        let mut caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cache) = caches.get(scope) {
            return Arc::clone(cache);
        }
        if caches.len() >= MAX_SCOPES {
            caches.retain(|_, cache| Arc::strong_count(cache) > 1);
        }
        let cache = Arc::new(Mutex::new(SessionCache::new(DEFAULT_CACHE_CAPACITY)));
        caches.insert(scope.to_owned(), Arc::clone(&cache));
        cache
    }

    /// Forgets `scope`'s cache.
    pub(crate) fn forget_now(&self, scope: &str) {
        self.caches.lock().unwrap_or_else(|e| e.into_inner()).remove(scope);
    }

    fn caller(&self, caller: &str) -> Arc<Mutex<CallerState>> {
        let mut callers = self.callers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(state) = callers.get(caller) {
            return Arc::clone(state);
        }
        if callers.len() >= MAX_CALLERS {
            callers.retain(|_, state| Arc::strong_count(state) > 1);
        }
        let state = Arc::new(Mutex::new(CallerState {
            counters: SessionCache::new(0),
            recent: Vec::with_capacity(RECENT_CALLS + 1),
        }));
        callers.insert(caller.to_owned(), Arc::clone(&state));
        state
    }

    /// Drops `scope`'s cached results of `tools` (sync: the Redis backend calls it too).
    pub(crate) fn invalidate_now(&self, scope: &str, tools: &[String]) {
        let cache = self.caches.lock().unwrap_or_else(|e| e.into_inner()).get(scope).cloned();
        if let Some(cache) = cache {
            cache.lock().unwrap_or_else(|e| e.into_inner()).invalidate(tools);
        }
    }

    /// Stores in `scope`'s in-process cache.
    pub(crate) fn put_now(
        &self,
        scope: &str,
        key: &CallKey,
        result: &ToolResult,
    ) -> Option<Stored> {
        let cache = self.cache(scope);
        let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.put(key, result.clone(), Instant::now())
    }

    /// Reads `scope`'s in-process cache.
    pub(crate) fn get_now(&self, scope: &str, key: &CallKey, ttl: Option<Duration>) -> Option<Hit> {
        let cache = self.caches.lock().unwrap_or_else(|e| e.into_inner()).get(scope).cloned()?;
        let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.get(key, Instant::now(), ttl)
    }

    /// How long `host`'s rate limit for `scope` still holds, if it does.
    pub(crate) fn cooling_for(&self, host: &str, scope: &str) -> Option<Duration> {
        let mut cooling = self.cooling.lock().unwrap_or_else(|e| e.into_inner());
        let id = (host.to_owned(), scope.to_owned());
        let left = cooling.get(&id)?.checked_duration_since(Instant::now());
        if left.is_none() {
            cooling.remove(&id);
        }
        left
    }

    pub(crate) fn note_rate_limited_now(&self, host: &str, scope: &str, wait: Duration) {
        let mut cooling = self.cooling.lock().unwrap_or_else(|e| e.into_inner());
        cooling.retain(|_, until| *until > Instant::now());
        cooling.insert((host.to_owned(), scope.to_owned()), Instant::now() + wait);
    }

    /// Records that `caller` made the call `key` (its tool joins the recent calls) and, for a
    /// tool that fails fast, whether it was productive.
    pub(crate) fn record_now(&self, caller: &str, key: &CallKey, productive: Option<bool>) {
        let state = self.caller(caller);
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        state.recent.push(key.tool().to_owned());
        let excess = state.recent.len().saturating_sub(RECENT_CALLS);
        state.recent.drain(..excess);
        if let Some(productive) = productive {
            state.counters.record_outcome(key, productive);
        }
    }

    pub(crate) fn unproductive_count(&self, caller: &str, key: &CallKey) -> u32 {
        let state = self.caller(caller);
        let state = state.lock().unwrap_or_else(|e| e.into_inner());
        state.counters.unproductive_count(key)
    }

    pub(crate) fn recent_now(&self, caller: &str) -> Vec<String> {
        let state = self.caller(caller);
        let state = state.lock().unwrap_or_else(|e| e.into_inner());
        state.recent.clone()
    }

    /// Leads `key` in `scope` when nobody in this process is making it; else the receiver of
    /// the call in flight.
    pub(crate) fn lead_or_join(&self, scope: &str, key: &CallKey) -> Result<FlightLease, Landing> {
        let id = (scope.to_owned(), key.clone());
        let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(landing) = flights.get(&id) {
            return Err(landing.clone());
        }
        let (sender, receiver) = watch::channel(None);
        flights.insert(id.clone(), receiver);
        let lease = LocalLease { flights: Arc::clone(&self.flights), id: Some(id), sender };
        Ok(FlightLease { finish: Some(Box::new(lease)) })
    }
}

/// A call this process leads: finishing (or dropping) it removes it from the flights, so the
/// next identical call is a call of its own (or a cache hit).
struct LocalLease {
    flights: Arc<Mutex<HashMap<(String, CallKey), Landing>>>,
    id: Option<(String, CallKey)>,
    sender: watch::Sender<Option<ToolResult>>,
}

impl Drop for LocalLease {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.flights.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        }
    }
}

#[async_trait]
impl FinishFlight for LocalLease {
    async fn finish(self: Box<Self>, result: &ToolResult) {
        // Those waiting get the result; the flight ends when the lease drops right after.
        self.sender.send_replace(Some(result.clone()));
    }
}

/// Waits at most `wait` for a call in flight; `None` when it ended without a result (its lead
/// failed or was dropped) or took too long.
pub(crate) async fn wait_landing(mut landing: Landing, wait: Duration) -> Option<ToolResult> {
    let landed = tokio::time::timeout(wait, landing.wait_for(Option::is_some)).await;
    match landed {
        Ok(Ok(result)) => result.clone(),
        _ => None,
    }
}

#[async_trait]
impl StateStore for MemoryState {
    fn backend(&self) -> StateBackendKind {
        StateBackendKind::Memory
    }

    fn status(&self) -> StateStatus {
        StateStatus::Local
    }

    async fn cache_lookup(&self, scope: &str, key: &CallKey, ttl: Option<Duration>) -> Lookup {
        Lookup { hit: self.get_now(scope, key, ttl), seen: Seen::default() }
    }

    async fn cache_put(
        &self,
        scope: &str,
        key: &CallKey,
        result: &ToolResult,
        _ttl: Option<Duration>,
        _seen: &Seen,
    ) -> Option<Stored> {
        self.put_now(scope, key, result)
    }

    async fn invalidate(&self, scope: &str, tools: &[String]) {
        self.invalidate_now(scope, tools);
    }

    fn forget(&self, scope: &str) {
        self.forget_now(scope);
    }

    async fn begin_read(&self, scope: &str, key: &CallKey, wait: Duration) -> Flight {
        match self.lead_or_join(scope, key) {
            Ok(lease) => Flight::Lead(lease),
            Err(landing) => match wait_landing(landing, wait).await {
                Some(result) => Flight::Joined(result),
                // The lead failed: this caller makes the call itself.
                None => Flight::Lead(FlightLease::alone()),
            },
        }
    }

    async fn permit(&self, host: &str, scope: &str) -> Result<Permit, Duration> {
        if let Some(left) = self.cooling_for(host, scope) {
            return Err(left);
        }
        let permit = self.budgets.acquire(Some(&super::budget_name(host, scope))).await;
        Ok(Permit { _held: permit.map(|p| Box::new(p) as Box<dyn Send + Sync>) })
    }

    async fn try_permit(&self, host: &str, scope: &str) -> Option<Permit> {
        if self.cooling_for(host, scope).is_some() {
            return None;
        }
        let permit = self.budgets.try_acquire(Some(&super::budget_name(host, scope))).ok()?;
        Some(Permit { _held: permit.map(|p| Box::new(p) as Box<dyn Send + Sync>) })
    }

    async fn note_rate_limited(&self, host: &str, scope: &str, wait: Duration) {
        self.note_rate_limited_now(host, scope, wait);
    }

    async fn available_permits(&self, host: &str) -> usize {
        self.budgets.available(host)
    }

    async fn should_stop(
        &self,
        _scope: &str,
        caller: &str,
        key: &CallKey,
        after_n: Option<u32>,
    ) -> Option<String> {
        let n = after_n.filter(|n| *n > 0)?;
        fail_fast_hint(key.tool(), self.unproductive_count(caller, key), n)
    }

    async fn record_call(
        &self,
        _scope: &str,
        caller: &str,
        key: &CallKey,
        productive: Option<bool>,
    ) {
        self.record_now(caller, key, productive);
    }

    async fn recent_calls(&self, _scope: &str, caller: &str) -> Vec<String> {
        self.recent_now(caller)
    }

    async fn session_put(&self, id: &str, metadata: &str) -> Result<(), String> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.insert(id.to_owned(), metadata.to_owned());
        Ok(())
    }

    async fn session_get(&self, id: &str) -> Result<Option<String>, String> {
        Ok(self.sessions.lock().unwrap_or_else(|e| e.into_inner()).get(id).cloned())
    }

    async fn session_delete(&self, id: &str) -> Result<(), String> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
        Ok(())
    }

    async fn record_put(
        &self,
        key: &str,
        value: &str,
        ttl: Option<Duration>,
    ) -> Result<(), String> {
        let mut records = self.live_records();
        records.insert(key.to_owned(), (value.to_owned(), ttl.map(|t| Instant::now() + t)));
        Ok(())
    }

    async fn record_get(&self, key: &str) -> Result<Option<String>, String> {
        Ok(self.live_records().get(key).map(|(value, _)| value.clone()))
    }

    async fn record_take(&self, key: &str) -> Result<Option<String>, String> {
        Ok(self.live_records().remove(key).map(|(value, _)| value))
    }

    async fn record_delete(&self, key: &str) -> Result<(), String> {
        self.live_records().remove(key);
        Ok(())
    }

    async fn claim(&self, key: &str, ttl: Duration) -> Result<bool, String> {
        let mut records = self.live_records();
        if records.contains_key(key) {
            return Ok(false);
        }
        records.insert(key.to_owned(), (String::new(), Some(Instant::now() + ttl)));
        Ok(true)
    }
}

impl MemoryState {
    /// The records, the expired ones dropped.
    fn live_records(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (String, Option<Instant>)>> {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        records.retain(|_, (_, until)| until.is_none_or(|until| until > now));
        records
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(n: u64) -> CallKey {
        CallKey::new("github.get_issue", &json!({"number": n}), None)
    }

    #[tokio::test]
    async fn identical_reads_in_flight_make_one_call() {
        let state = Arc::new(MemoryState::new(4));
        let Flight::Lead(lease) = state.begin_read("s", &key(1), Duration::from_secs(5)).await
        else {
            panic!("the first caller leads");
        };
        let joiner = {
            let state = Arc::clone(&state);
            tokio::spawn(
                async move { state.begin_read("s", &key(1), Duration::from_secs(5)).await },
            )
        };
        // Another scope never joins this scope's call.
        assert!(matches!(
            state.begin_read("other", &key(1), Duration::from_millis(10)).await,
            Flight::Lead(_)
        ));
        tokio::time::sleep(Duration::from_millis(20)).await;
        lease.finish(&ToolResult::text("issue 1")).await;
        match joiner.await.unwrap() {
            Flight::Joined(result) => assert_eq!(result, ToolResult::text("issue 1")),
            Flight::Lead(_) => panic!("the second caller joins"),
        }
        assert!(
            matches!(state.begin_read("s", &key(1), Duration::from_secs(1)).await, Flight::Lead(_)),
            "a finished call is no longer in flight"
        );
    }

    #[tokio::test]
    async fn a_dropped_lead_lets_the_waiting_caller_call_itself() {
        let state = Arc::new(MemoryState::new(4));
        let Flight::Lead(lease) = state.begin_read("s", &key(2), Duration::from_secs(5)).await
        else {
            panic!("leads");
        };
        let joiner = {
            let state = Arc::clone(&state);
            tokio::spawn(
                async move { state.begin_read("s", &key(2), Duration::from_secs(5)).await },
            )
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(lease);
        assert!(matches!(joiner.await.unwrap(), Flight::Lead(_)));
    }

    #[tokio::test]
    async fn caches_are_kept_by_scope_until_forgotten() {
        let state = MemoryState::new(4);
        let stored =
            state.cache_put("alice", &key(3), &ToolResult::text("x"), None, &Seen::default()).await;
        assert_eq!(stored.unwrap().reference.to_string(), "r1");
        let ttl = Some(Duration::from_secs(60));
        assert!(state.cache_get("alice", &key(3), ttl).await.is_some());
        assert!(state.cache_get("bob", &key(3), ttl).await.is_none(), "scopes are apart");
        state.invalidate("alice", &["github.get_issue".to_owned()]).await;
        assert!(state.cache_get("alice", &key(3), ttl).await.is_none());
        state.cache_put("alice", &key(3), &ToolResult::text("x"), None, &Seen::default()).await;
        state.forget("alice");
        assert!(state.cache_get("alice", &key(3), ttl).await.is_none(), "forgotten");
    }

    #[tokio::test]
    async fn fail_fast_and_recent_calls_are_per_caller() {
        let state = MemoryState::new(4);
        for _ in 0..2 {
            state.record_call("s", "alice", &key(4), Some(false)).await;
        }
        assert!(state.should_stop("s", "alice", &key(4), Some(2)).await.is_some());
        assert!(state.should_stop("s", "bob", &key(4), Some(2)).await.is_none());
        for i in 0..10 {
            let call = CallKey::new(&format!("github.t{i}"), &json!({}), None);
            state.record_call("s", "alice", &call, None).await;
        }
        let recent = state.recent_calls("s", "alice").await;
        assert_eq!(recent.len(), RECENT_CALLS);
        assert_eq!(recent.last().map(String::as_str), Some("github.t9"));
    }
}
