//! Speculative pre-fetching: after a call, the planner picks the follow-ups worth their tokens and
//! this module runs them in the background, so the agent's next call is served from the session
//! cache.
//!
//! Only `Pure` and `ReadOnly` tools whose `speculate` is not `false` are ever dispatched — checked
//! here again, whatever the planner or the config said. Every call, main or speculative, of every
//! provider, takes a permit of its rate-limit host ([`HostBudgets`]), so pre-fetches never push a
//! service past the concurrency the user allows.
//!
//! A pre-fetch is worth most when the agent asks for its call while it is still running: the
//! call then joins it ([`Prefetches::joinable`]) instead of sending the same request again, which
//! saves both the wait and the request. A pre-fetched result the agent has not seen yet is
//! delivered whole the first time it is asked for ([`Prefetches::take_unseen`]); only later
//! repeats become the cache's short references.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use quiver_core::session_cache::CallKey;
use quiver_core::{ToolResult, ToolValueModel};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore, TryAcquireError};

/// Concurrency per rate-limit host, shared by every provider and every session of a host.
#[derive(Debug)]
pub struct HostBudgets {
    per_host: usize,
    hosts: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl HostBudgets {
    /// At most `per_host` calls in flight to any one host (at least one).
    pub fn new(per_host: usize) -> Self {
        Self { per_host: per_host.max(1), hosts: Mutex::new(HashMap::new()) }
    }

    fn semaphore(&self, host: &str) -> Arc<Semaphore> {
        let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(
            hosts.entry(host.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(self.per_host))),
        )
    }

    /// Waits for a permit of `host`; `None` (no host known) needs no permit.
    pub async fn acquire(&self, host: Option<&str>) -> Option<OwnedSemaphorePermit> {
        let semaphore = self.semaphore(host?);
        semaphore.acquire_owned().await.ok()
    }

    /// A permit of `host` if one is free now: pre-fetches never queue behind main calls.
    pub fn try_acquire(
        &self,
        host: Option<&str>,
    ) -> Result<Option<OwnedSemaphorePermit>, TryAcquireError> {
        match host {
            None => Ok(None),
            Some(host) => self.semaphore(host).try_acquire_owned().map(Some),
        }
    }

    /// Permits of `host` free now, for tests and diagnostics.
    pub fn available(&self, host: &str) -> usize {
        self.semaphore(host).available_permits()
    }
}

/// Whether a tool may be pre-fetched: its side effects allow it and `speculate = false` was not
/// set. The one gate every dispatch passes, whatever the planner or the config said.
pub fn may_prefetch(model: &ToolValueModel) -> bool {
    model.may_speculate()
}

/// What became of a pre-fetch, as the calls that join it see it.
#[derive(Debug, Clone, PartialEq)]
pub enum Landing {
    /// Still running.
    Pending,
    /// Landed; the result is also in the session cache.
    Landed(ToolResult),
    /// Failed or returned an error: whoever waits makes the call itself.
    Failed,
}

/// A session's pre-fetches by call: those in flight, which a call of the same key joins, and
/// those landed but not yet delivered to the agent.
///
/// When both this and the session cache are locked, this is locked first, so that a call looking
/// for its key and a pre-fetch landing see each other's whole step.
#[derive(Debug, Default)]
pub struct Prefetches {
    in_flight: HashMap<CallKey, watch::Receiver<Landing>>,
    unseen: HashSet<CallKey>,
}

impl Prefetches {
    /// Registers a pre-fetch of `key` about to start; its task reports through the sender.
    pub fn start(&mut self, key: CallKey) -> watch::Sender<Landing> {
        let (sender, receiver) = watch::channel(Landing::Pending);
        self.in_flight.insert(key, receiver);
        sender
    }

    /// The pre-fetch of `key` has ended; `landed` when its result went into the cache, where it
    /// waits for the agent's first call as unseen.
    pub fn finish(&mut self, key: &CallKey, landed: bool) {
        self.in_flight.remove(key);
        if landed {
            self.unseen.insert(key.clone());
        }
    }

    /// Marks the result of `key`'s pre-fetch as not yet shown, before it goes into the cache.
    pub fn mark_unseen(&mut self, key: &CallKey) {
        self.unseen.insert(key.clone());
    }

    /// Whether `key` has a landed pre-fetch the agent has not seen.
    pub fn is_unseen(&self, key: &CallKey) -> bool {
        self.unseen.contains(key)
    }

    /// The pre-fetch of `key` still in flight, to wait for.
    pub fn joinable(&self, key: &CallKey) -> Option<watch::Receiver<Landing>> {
        self.in_flight.get(key).cloned()
    }

    /// Whether the cached result of `key` is a pre-fetch the agent has not seen; it counts as
    /// seen from now on.
    pub fn take_unseen(&mut self, key: &CallKey) -> bool {
        self.unseen.remove(key)
    }

    /// Pre-fetches in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Forgets everything (the session's tasks are gone).
    pub fn clear(&mut self) {
        self.in_flight.clear();
        self.unseen.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_core::value_model::{resolve, LayerSource, ValueModelLayer};
    use quiver_core::SideEffectClass;

    #[test]
    fn only_pure_and_read_only_tools_without_a_veto_are_prefetched() {
        let model = |effect: SideEffectClass, speculate: Option<bool>| {
            let layer = ValueModelLayer {
                side_effect_class: Some(effect),
                speculate,
                ..ValueModelLayer::default()
            };
            resolve(&[(LayerSource::UserExact("t".into()), &layer)]).model
        };
        for effect in [
            SideEffectClass::Pure,
            SideEffectClass::ReadOnly,
            SideEffectClass::MutatesLocal,
            SideEffectClass::MutatesExternal,
            SideEffectClass::Indeterminate,
        ] {
            for speculate in [None, Some(true), Some(false)] {
                let expected = matches!(effect, SideEffectClass::Pure | SideEffectClass::ReadOnly)
                    && speculate != Some(false);
                assert_eq!(
                    may_prefetch(&model(effect, speculate)),
                    expected,
                    "{effect:?} {speculate:?}"
                );
            }
        }
    }

    #[tokio::test]
    async fn a_host_budget_is_shared_and_released() {
        let budgets = HostBudgets::new(2);
        let a = budgets.acquire(Some("api.github.com")).await;
        let b = budgets.try_acquire(Some("api.github.com")).unwrap();
        assert!(a.is_some() && b.is_some());
        assert!(budgets.try_acquire(Some("api.github.com")).is_err(), "two in flight: full");
        assert_eq!(budgets.available("gitlab.com"), 2, "hosts are separate");
        drop(a);
        assert!(budgets.try_acquire(Some("api.github.com")).is_ok());
        assert!(budgets.try_acquire(None).unwrap().is_none(), "no host, no permit needed");
    }

    #[tokio::test]
    async fn a_call_joins_its_prefetch_and_sees_it_once() {
        let key = CallKey::new("github.get_issue", &serde_json::json!({"number": 1}), None);
        let mut prefetches = Prefetches::default();
        let sender = prefetches.start(key.clone());
        let mut joined = prefetches.joinable(&key).expect("in flight");
        assert_eq!(prefetches.in_flight(), 1);
        sender.send(Landing::Landed(ToolResult::text("issue 1"))).unwrap();
        prefetches.finish(&key, true);
        let landing = joined.wait_for(|l| *l != Landing::Pending).await.unwrap().clone();
        assert_eq!(landing, Landing::Landed(ToolResult::text("issue 1")));
        assert!(prefetches.joinable(&key).is_none(), "no longer in flight");
        assert!(prefetches.take_unseen(&key), "delivered whole the first time");
        assert!(!prefetches.take_unseen(&key), "a repeat after that");
    }

    #[tokio::test]
    async fn an_aborted_prefetch_releases_whoever_waits() {
        let key = CallKey::new("github.get_issue", &serde_json::json!({"number": 2}), None);
        let mut prefetches = Prefetches::default();
        let sender = prefetches.start(key.clone());
        let mut joined = prefetches.joinable(&key).unwrap();
        drop(sender);
        assert!(joined.wait_for(|l| *l != Landing::Pending).await.is_err());
    }
}
