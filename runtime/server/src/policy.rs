//! The `[selector]` policy every mode obeys: which tools are served at all (`allow`, `deny`,
//! `read_only`), which must be confirmed (`confirm`), and which argument values their calls may
//! carry (`[[selector.scope]]`, [`quiver_core::scope`]).
//!
//! Patterns are globs matched against a tool's qualified name (`github.*`, `jira.get_issue`) and
//! also against its MCP name (`github_get_issue`), so either spelling a user copies works. A `*`
//! crosses dots: `*.delete_*` matches every provider's deletions.

use globset::{Glob, GlobSet, GlobSetBuilder};
use quiver_core::scope::ScopeRules;
use quiver_core::SideEffectClass;

use quiver_runtime::config::{HttpUser, SelectorConfig};

/// Why a `[selector]` pattern cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// Occurs when a glob of `allow`, `deny`, `confirm` or `core` does not compile.
    #[error("invalid pattern `{pattern}` in [selector] {key}: {reason}; write e.g. \"github.*\"")]
    Pattern {
        /// The key it is in (`allow`, `deny`, `confirm`, `core`).
        key: &'static str,
        /// The pattern.
        pattern: String,
        /// What globset said.
        reason: String,
    },
    /// Occurs when a `[[selector.scope]]` rule (or a user's `scope`) cannot be used.
    #[error("{0}")]
    Scope(String),
}

/// Why a tool is not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// Occurs when `allow` is set and no pattern of it matches the tool.
    NotAllowed,
    /// Occurs when a `deny` pattern matches the tool.
    Denied,
    /// Occurs when `read_only = true` and the tool is not `pure` or `read_only`.
    ReadOnly,
    /// Occurs when the caller's own `[[serve.http.users]]` entry excludes the tool.
    ForUser,
}

impl Refusal {
    /// The message a client sees when it calls the tool anyway.
    pub fn message(self, qualified: &str) -> String {
        match self {
            Refusal::NotAllowed => format!(
                "`{qualified}` is not served: no [selector] allow pattern matches it; add one to \
                 the config to use it"
            ),
            Refusal::Denied => format!(
                "`{qualified}` is not served: a [selector] deny pattern matches it; remove that \
                 pattern to use it"
            ),
            Refusal::ReadOnly => format!(
                "`{qualified}` is refused: it can change things and [selector] read_only = true; \
                 set read_only = false to use it, or, if it only reads, say so in the config with \
                 [tools.\"{qualified}\"] side_effect_class = \"read_only\""
            ),
            Refusal::ForUser => format!(
                "`{qualified}` is not available to you: your user entry on this server \
                 (read_only, allow or deny) excludes it; ask whoever runs it"
            ),
        }
    }
}

/// A compiled list of glob patterns.
#[derive(Debug, Clone)]
pub struct Patterns {
    set: GlobSet,
    len: usize,
}

impl Patterns {
    /// Compiles `patterns`, which came from `[selector] key`.
    pub fn new(key: &'static str, patterns: &[String]) -> Result<Self, PolicyError> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let glob = Glob::new(pattern).map_err(|e| PolicyError::Pattern {
                key,
                pattern: pattern.clone(),
                reason: e.kind().to_string(),
            })?;
            builder.add(glob);
        }
        let set = builder.build().map_err(|e| PolicyError::Pattern {
            key,
            pattern: patterns.join(", "),
            reason: e.to_string(),
        })?;
        Ok(Self { set, len: patterns.len() })
    }

    /// Whether no pattern was given.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether a pattern matches the qualified or the MCP name.
    pub fn matches(&self, qualified: &str, mcp_name: &str) -> bool {
        self.set.is_match(qualified) || self.set.is_match(mcp_name)
    }
}

/// `allow`, `deny`, `read_only` and `confirm`, compiled.
#[derive(Debug, Clone)]
pub struct Policy {
    allow: Patterns,
    deny: Patterns,
    read_only: bool,
    confirm: Patterns,
    /// The values calls' arguments may take.
    scope: ScopeRules,
    /// A user's own lockdown ([`quiver_runtime::host::withhold_by_lockdown`]) on what they read.
    lockdown: bool,
    /// A user's own policy, which can only narrow this one.
    narrower: Option<Box<Policy>>,
}

impl Policy {
    /// Compiles the policy of a `[selector]` section.
    pub fn new(config: &SelectorConfig) -> Result<Self, PolicyError> {
        Ok(Self {
            allow: Patterns::new("allow", &config.allow)?,
            deny: Patterns::new("deny", &config.deny)?,
            read_only: config.read_only,
            confirm: Patterns::new("confirm", &config.confirm)?,
            scope: ScopeRules::new(&config.scope).map_err(PolicyError::Scope)?,
            lockdown: false,
            narrower: None,
        })
    }

    /// A policy that serves nothing: for a user whose own patterns cannot be compiled.
    pub fn refuse_all() -> Self {
        let none = Patterns::new("allow", &[]).expect("no patterns compile");
        let deny = Patterns::new("deny", &["*".to_owned()]).expect("`*` compiles");
        Self {
            allow: none.clone(),
            deny,
            read_only: true,
            confirm: none,
            scope: ScopeRules::default(),
            lockdown: false,
            narrower: None,
        }
    }

    /// This policy narrowed by a `[[serve.http.users]]` entry: a tool is served only when both
    /// serve it, and confirmed when either asks.
    pub fn narrowed_by(&self, user: &HttpUser) -> Result<Self, PolicyError> {
        let own = Self {
            allow: Patterns::new("allow", &user.allow)?,
            deny: Patterns::new("deny", &user.deny)?,
            read_only: user.read_only,
            confirm: Patterns::new("confirm", &user.confirm)?,
            scope: ScopeRules::named(&user.scope, "user scope").map_err(PolicyError::Scope)?,
            lockdown: user.lockdown,
            narrower: None,
        };
        Ok(Self { narrower: Some(Box::new(own)), ..self.clone() })
    }

    /// Whether what the caller reads is locked down for them alone (their entry's `lockdown`).
    pub fn locks_down(&self) -> bool {
        self.lockdown || self.narrower.as_ref().is_some_and(|user| user.locks_down())
    }

    /// Why the tool is not served, or `None` when it is.
    pub fn refusal(
        &self,
        qualified: &str,
        mcp_name: &str,
        class: SideEffectClass,
    ) -> Option<Refusal> {
        if self.deny.matches(qualified, mcp_name) {
            return Some(Refusal::Denied);
        }
        if !self.allow.is_empty() && !self.allow.matches(qualified, mcp_name) {
            return Some(Refusal::NotAllowed);
        }
        if self.read_only && !class.is_speculatable() {
            return Some(Refusal::ReadOnly);
        }
        self.narrower
            .as_ref()
            .and_then(|user| user.refusal(qualified, mcp_name, class))
            .map(|_| Refusal::ForUser)
    }

    /// Why a call of the tool with these `arguments` is outside the scope the config (and the
    /// caller's own entry) allows, or `None` when it is inside.
    pub fn scope_refusal(
        &self,
        qualified: &str,
        mcp_name: &str,
        arguments: &serde_json::Value,
    ) -> Option<String> {
        self.scope.refusal(qualified, mcp_name, arguments).or_else(|| {
            self.narrower
                .as_ref()
                .and_then(|user| user.scope_refusal(qualified, mcp_name, arguments))
        })
    }

    /// Whether a call must carry `"_confirm": true` to run.
    pub fn needs_confirm(&self, qualified: &str, mcp_name: &str) -> bool {
        self.confirm.matches(qualified, mcp_name)
            || self.narrower.as_ref().is_some_and(|user| user.needs_confirm(qualified, mcp_name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(text: &str) -> Policy {
        let config: SelectorConfig = toml::from_str(text).unwrap();
        Policy::new(&config).unwrap()
    }

    #[test]
    fn deny_wins_over_allow_and_read_only_hides_mutations() {
        let p = policy("allow = [\"github.*\"]\ndeny = [\"*.delete_*\"]\nread_only = true\n");
        let read = SideEffectClass::ReadOnly;
        assert_eq!(p.refusal("github.get_issue", "github_get_issue", read), None);
        assert_eq!(
            p.refusal("github.delete_branch", "github_delete_branch", read),
            Some(Refusal::Denied)
        );
        assert_eq!(p.refusal("jira.get_issue", "jira_get_issue", read), Some(Refusal::NotAllowed));
        assert_eq!(
            p.refusal(
                "github.create_issue",
                "github_create_issue",
                SideEffectClass::MutatesExternal
            ),
            Some(Refusal::ReadOnly)
        );
        assert_eq!(
            p.refusal("github.x", "github_x", SideEffectClass::Indeterminate),
            Some(Refusal::ReadOnly),
            "unknown effects are not read-only"
        );
    }

    #[test]
    fn confirm_matches_either_spelling() {
        let p = policy("confirm = [\"github_create_*\"]\n");
        assert!(p.needs_confirm("github.create_issue", "github_create_issue"));
        assert!(!p.needs_confirm("github.get_issue", "github_get_issue"));
    }

    #[test]
    fn a_bad_glob_names_its_key_and_pattern() {
        let config = SelectorConfig { deny: vec!["github.[".into()], ..SelectorConfig::default() };
        let err = Policy::new(&config).unwrap_err().to_string();
        assert!(err.contains("[selector] deny") && err.contains("github.["), "{err}");
    }

    #[test]
    fn a_users_scope_narrows_the_servers() {
        let p = policy("[[scope]]\ntools = \"github.*\"\nowner = [\"acme\", \"alice\"]\n");
        let user: HttpUser = toml::from_str(
            "name = \"bob\"\nkey_sha256 = \"x\"\nscope = [{ tools = \"github.*\", owner = [\"acme\"] }]\n",
        )
        .unwrap();
        let bob = p.narrowed_by(&user).unwrap();
        let args = |owner: &str| serde_json::json!({"owner": owner});
        assert!(p.scope_refusal("github.get_issue", "github_get_issue", &args("alice")).is_none());
        let why =
            bob.scope_refusal("github.get_issue", "github_get_issue", &args("alice")).unwrap();
        assert!(why.contains("user scope 1"), "{why}");
        assert!(bob.scope_refusal("github.get_issue", "github_get_issue", &args("acme")).is_none());
        assert!(p.scope_refusal("github.get_issue", "github_get_issue", &args("evil")).is_some());
    }
}
