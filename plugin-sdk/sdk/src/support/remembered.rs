//! Answers a provider looked up and may use again for a while: a repository's visibility, a
//! project member's rights — asked of the service once per key in `ttl`, not once per call.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Looked-up answers by key, each kept for `ttl` after it was asked.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use quiver_plugin_sdk::support::remembered::Remembered;
///
/// let public: Remembered<String, bool> = Remembered::new(Duration::from_secs(300));
/// let first = public.get_or_ask("octo/hello".to_owned(), || async { Some(true) }).await;
/// // Within the five minutes the service is not asked again.
/// let again = public.get_or_ask("octo/hello".to_owned(), || async { None }).await;
/// assert_eq!((first, again), (Some(true), Some(true)));
/// // An answer not found is not kept: the next call asks again.
/// assert_eq!(public.get_or_ask("octo/gone".to_owned(), || async { None }).await, None);
/// # });
/// ```
pub struct Remembered<K, V> {
    ttl: Duration,
    kept: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash, V: Clone> Remembered<K, V> {
    /// Nothing kept yet; each answer kept for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, kept: Mutex::new(HashMap::new()) }
    }

    /// The answer for `key` from the last `ttl`, else `ask`ed now and kept when it gives one.
    pub async fn get_or_ask<F, Fut>(&self, key: K, ask: F) -> Option<V>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Option<V>>,
    {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner()).get(&key).cloned();
        if let Some((answer, _)) = kept.filter(|(_, at)| at.elapsed() < self.ttl) {
            return Some(answer);
        }
        let answer = ask().await?;
        self.kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, (answer.clone(), Instant::now()));
        Some(answer)
    }
}
