//! Speculative pre-fetching: after a call, the planner picks the follow-ups worth their tokens and
//! this module runs them in the background, so the agent's next call is served from the session
//! cache.
//!
//! Only `Pure` and `ReadOnly` tools whose `speculate` is not `false` are ever dispatched — checked
//! here again, whatever the planner or the config said. Every call, main or speculative, of every
//! provider, takes a permit of its rate-limit host ([`HostBudgets`]), so pre-fetches never push a
//! service past the concurrency the user allows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use quiver_core::ToolValueModel;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

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
}
