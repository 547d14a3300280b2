//! Config reloads while `quiver serve` runs: on SIGHUP, and when the config file's content
//! changes (checked every second, by a hash of the bytes, so an editor's several writes make one
//! reload and a touch makes none).
//!
//! A new file that does not parse or validate is reported and the running config stays, and so
//! does an empty or whitespace-only one (what an editor or `> quiver.toml` leaves for a moment:
//! taken as a config, it would drop every `read_only` and `deny`). A good one is handed to
//! [`Host::reload`]: value models, the selector policy and `[[serve.http.users]]` (a removed key
//! stops working with the next request) apply from the next call, a provider whose section
//! changed is created anew — where it sends its token excepted, which changes only at restart —
//! and what needs a restart is named. Whatever the reload loosened (a policy key removed or
//! relaxed, a user or key added, a tool served again) is logged at WARN, line by line.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use std::collections::{BTreeMap, BTreeSet};

use quiver_runtime::config::{HttpUser, LoadedConfig, SelectorConfig};
use quiver_runtime::host::Host;
use sha2::{Digest, Sha256};

use crate::catalog::Catalog;
use crate::policy::Policy;

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
    let text = std::fs::read_to_string(path).unwrap_or_default();
    if text.trim().is_empty() {
        tracing::error!(
            "config not reloaded ({why}): {} is empty; the running config stays in effect (an \
             empty file is refused like one that does not parse — write the whole config, or \
             restart quiver to run on the defaults)",
            path.display()
        );
        return;
    }
    match LoadedConfig::read(path) {
        Ok(config) => {
            let old = host.config();
            let served_before = served(host, &old);
            let done = host.reload(config);
            tracing::warn!("config reloaded ({why}): {}", path.display());
            for line in done {
                tracing::warn!("{line}");
            }
            let new = host.config();
            for line in loosened(&old, &new) {
                tracing::warn!("the reload loosened: {line}");
            }
            let served_after = served(host, &new);
            for (who, tools) in &served_after {
                let before = served_before.get(who);
                let again: Vec<&String> =
                    tools.iter().filter(|t| before.is_none_or(|b| !b.contains(*t))).collect();
                if !again.is_empty() {
                    tracing::warn!(
                        "the reload serves {who} {} tool(s) it did not: {}",
                        again.len(),
                        names_shown(&again)
                    );
                }
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

/// At most a dozen names, then how many more.
fn names_shown(names: &[&String]) -> String {
    let mut shown: Vec<&str> = names.iter().take(12).map(|n| n.as_str()).collect();
    let more = names.len().saturating_sub(12);
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    shown.sort_unstable();
    format!("{}{more}", shown.join(", "))
}

/// The tools served under `config`'s policy: to everyone (`[selector]`) and to each user.
fn served(host: &Host, config: &LoadedConfig) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let Ok(base) = Policy::new(&config.config.selector) else { return out };
    let enabled = |policy: &Policy| -> BTreeSet<String> {
        Catalog::new(host, policy, &BTreeMap::new())
            .enabled()
            .map(|t| t.qualified.clone())
            .collect()
    };
    out.insert("every caller".to_owned(), enabled(&base));
    for user in &config.config.serve.http.users {
        if let Ok(policy) = base.narrowed_by(user) {
            out.insert(format!("user `{}`", user.name), enabled(&policy));
        }
    }
    out
}

/// What `new` allows that `old` did not, one line each: `[selector]` keys removed or relaxed,
/// users and keys added, a user's own limits relaxed.
fn loosened(old: &LoadedConfig, new: &LoadedConfig) -> Vec<String> {
    let mut out =
        policy_loosened("[selector]", &old.config.selector.policy(), &new.config.selector.policy());
    let old_users = &old.config.serve.http.users;
    for user in &new.config.serve.http.users {
        let Some(before) = old_users.iter().find(|u| u.name == user.name) else {
            out.push(format!("[[serve.http.users]] `{}` added", user.name));
            continue;
        };
        let what = format!("[[serve.http.users]] `{}`", user.name);
        if before.key_sha256 != user.key_sha256 && !user.key_sha256.is_empty() {
            out.push(format!("{what} has a new key (the old one no longer works)"));
        }
        if before.subject != user.subject {
            out.push(format!("{what} is now OAuth subject {:?}", user.subject));
        }
        out.extend(policy_loosened(&what, &UserPolicy::of(before), &UserPolicy::of(user)));
        match (before.requests_per_minute, user.requests_per_minute) {
            (Some(b), None) => out.push(format!("{what} requests_per_minute {b} removed")),
            (Some(b), Some(a)) if a > b || (a == 0 && b != 0) => {
                out.push(format!("{what} requests_per_minute {b} -> {a}"))
            }
            _ => {}
        }
    }
    out
}

/// The policy keys of `[selector]` or a user entry.
struct UserPolicy<'a> {
    read_only: bool,
    allow: &'a [String],
    deny: &'a [String],
    confirm: &'a [String],
}

impl<'a> UserPolicy<'a> {
    fn of(user: &'a HttpUser) -> Self {
        Self {
            read_only: user.read_only,
            allow: &user.allow,
            deny: &user.deny,
            confirm: &user.confirm,
        }
    }
}

trait SelectorPolicy {
    fn policy(&self) -> UserPolicy<'_>;
}

impl SelectorPolicy for SelectorConfig {
    fn policy(&self) -> UserPolicy<'_> {
        UserPolicy {
            read_only: self.read_only,
            allow: &self.allow,
            deny: &self.deny,
            confirm: &self.confirm,
        }
    }
}

fn policy_loosened(what: &str, old: &UserPolicy<'_>, new: &UserPolicy<'_>) -> Vec<String> {
    let mut out = Vec::new();
    if old.read_only && !new.read_only {
        out.push(format!("{what} read_only true -> false"));
    }
    let removed = |from: &[String], to: &[String]| -> Vec<String> {
        from.iter().filter(|p| !to.contains(p)).cloned().collect()
    };
    for pattern in removed(old.deny, new.deny) {
        out.push(format!("{what} deny no longer has {pattern:?}"));
    }
    for pattern in removed(old.confirm, new.confirm) {
        out.push(format!("{what} confirm no longer has {pattern:?}"));
    }
    if !old.allow.is_empty() && new.allow.is_empty() {
        out.push(format!("{what} allow removed (every tool is allowed)"));
    } else if !old.allow.is_empty() {
        for pattern in removed(new.allow, old.allow) {
            out.push(format!("{what} allow gained {pattern:?}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> LoadedConfig {
        LoadedConfig::parse(Path::new("quiver.toml"), text).unwrap()
    }

    #[test]
    fn every_loosening_is_named_and_tightening_is_not() {
        let key = "a".repeat(64);
        let old = config(&format!(
            "[selector]\nread_only = true\ndeny = [\"*.delete_*\", \"jira.*\"]\nallow = [\"github.*\"]\n\
             confirm = [\"*.merge_*\"]\n\
             [[serve.http.users]]\nname = \"bob\"\nkey_sha256 = \"{key}\"\nread_only = true\n\
             requests_per_minute = 10\n"
        ));
        let new = config(&format!(
            "[selector]\ndeny = [\"jira.*\"]\nallow = [\"github.*\", \"gitlab.*\"]\n\
             [[serve.http.users]]\nname = \"bob\"\nkey_sha256 = \"{}\"\n\
             [[serve.http.users]]\nname = \"carol\"\nkey_sha256 = \"{key}\"\n",
            "b".repeat(64)
        ));
        let lines = loosened(&old, &new);
        for expected in [
            "[selector] read_only true -> false",
            "[selector] deny no longer has \"*.delete_*\"",
            "[selector] confirm no longer has \"*.merge_*\"",
            "[selector] allow gained \"gitlab.*\"",
            "[[serve.http.users]] `bob` has a new key (the old one no longer works)",
            "[[serve.http.users]] `bob` read_only true -> false",
            "[[serve.http.users]] `bob` requests_per_minute 10 removed",
            "[[serve.http.users]] `carol` added",
        ] {
            assert!(lines.iter().any(|l| l == expected), "missing {expected:?} in {lines:#?}");
        }
        assert_eq!(lines.len(), 8, "{lines:#?}");
        // The other way round only tightens (bob's new key aside): nothing else is named.
        let back = loosened(&new, &old);
        assert_eq!(
            back,
            ["[[serve.http.users]] `bob` has a new key (the old one no longer works)"]
        );
    }
}
