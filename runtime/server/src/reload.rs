//! Config reloads while `quiver serve` runs: on SIGHUP, and when the config file's content
//! changes (checked every second, by a hash of the bytes, so an editor's several writes make one
//! reload and a touch makes none).
//!
//! A new file that does not parse or validate is reported and the running config stays; a good
//! one is handed to [`Host::reload`]: value models and the selector policy apply from the next
//! call, a provider whose section changed is created anew, and what needs a restart is named.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use quiver_runtime::config::LoadedConfig;
use quiver_runtime::host::Host;
use sha2::{Digest, Sha256};

/// How often the file is looked at.
const POLL: Duration = Duration::from_secs(1);

/// Starts watching the host's config file (nothing to watch when no file was found). Must be
/// called inside a tokio runtime; the task ends with the runtime.
pub fn watch_config(host: Arc<Host>) {
    let Some(path) = host.config().path.clone() else { return };
    tokio::spawn(async move {
        let mut last = content_hash(&path);
        #[cfg(unix)]
        let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        {
            Ok(signal) => Some(signal),
            Err(e) => {
                tracing::warn!(
                    "cannot listen for SIGHUP ({e}); config reloads on file change only"
                );
                None
            }
        };
        loop {
            #[cfg(unix)]
            let hung_up = async {
                match hangup.as_mut() {
                    Some(signal) => signal.recv().await,
                    None => std::future::pending().await,
                }
            };
            #[cfg(not(unix))]
            let hung_up = std::future::pending::<Option<()>>();
            tokio::select! {
                _ = hung_up => {
                    last = content_hash(&path);
                    reload(&host, &path, "SIGHUP");
                }
                _ = tokio::time::sleep(POLL) => {
                    let now = content_hash(&path);
                    // A file removed or unreadable for a moment (an editor's rename) is not a change.
                    if now.is_some() && now != last {
                        last = now;
                        reload(&host, &path, "the file changed");
                    }
                }
            }
        }
    });
}

fn content_hash(path: &Path) -> Option<[u8; 32]> {
    std::fs::read(path).ok().map(|bytes| Sha256::digest(&bytes).into())
}

fn reload(host: &Host, path: &Path, why: &str) {
    match LoadedConfig::read(path) {
        Ok(config) => {
            let done = host.reload(config);
            tracing::warn!("config reloaded ({why}): {}", path.display());
            for line in done {
                tracing::warn!("{line}");
            }
            for warning in host.config_warnings() {
                tracing::warn!("{warning}");
            }
        }
        Err(e) => {
            tracing::error!("config not reloaded ({why}): {e}; the running config stays in effect")
        }
    }
}
