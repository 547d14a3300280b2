//! Toxic flows: a session that has read text written by others (an issue, a comment, a file, a
//! job log, another MCP server's answer) and data from more than one place must not write into
//! one place what it may have read in another without a person's yes. The published attack on
//! GitHub's MCP server is exactly this: a public issue asks the agent to read the owner's private
//! repositories and open a pull request with what it found in the public one. Its read of the
//! issue is untrusted; its read of the private repository is a read from another scope; the pull
//! request writes to the public scope — the write is asked, the reads are not.
//!
//! A scope is a provider and the values of the arguments that locate a resource
//! (`github:octocat/hello-world` from `owner` and `repo`; `jira:ops` from `project_key`). A read
//! without one (a search across a service) counts as a read from everywhere: any write after it
//! and an untrusted read is asked. The rules are data (`[security.flows]`): which tools return
//! text written by others, and which arguments name a scope.
//!
//! ```
//! use quiver_core::flows::{FlowRules, FlowsConfig, SessionFlows};
//! use serde_json::json;
//!
//! let rules = FlowRules::new(&FlowsConfig::default()).unwrap();
//! let mut session = SessionFlows::default();
//! let public = json!({"owner": "octocat", "repo": "Hello-World", "number": 1});
//! let private = json!({"owner": "octocat", "repo": "secrets", "path": "keys.txt"});
//! rules.after_read(&mut session, "github.get_issue", "github_get_issue", &public, (false, false));
//! rules.after_read(&mut session, "github.get_file_contents", "", &private, (false, false));
//! let why = rules.before_write(&session, "github.create_pull_request", &public).unwrap();
//! assert!(why.contains("github:octocat/secrets"), "{why}");
//! // Writing back where everything read came from is not asked.
//! let mut benign = SessionFlows::default();
//! rules.after_read(&mut benign, "github.get_issue", "github_get_issue", &public, (false, false));
//! assert!(rules.before_write(&benign, "github.add_issue_comment", &public).is_none());
//! ```

use std::collections::BTreeSet;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `[security.flows]`, as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlowsConfig {
    /// Ask before a write that may carry what an untrusted read led to elsewhere.
    pub enabled: bool,
    /// Tools whose results hold text written by others (globs over qualified or MCP names);
    /// every upstream tool's result counts too.
    pub untrusted: Vec<String>,
    /// The argument sets that name a scope, tried in order: the first set a call carries whole
    /// is its scope (`["owner", "repo"]` → `github:owner/repo`).
    pub scope_arguments: Vec<Vec<String>>,
}

impl Default for FlowsConfig {
    fn default() -> Self {
        let untrusted = [
            // GitHub: issues, pull requests, comments, reviews, files, logs.
            "github.*issue*",
            "github.*pull_request*",
            "github.get_file_contents",
            "github.get_job_logs",
            "github.list_notifications",
            "github.*commit*",
            "github.list_releases",
            "github.get_release_by_tag",
            "github.get_latest_release",
            "github.search_code",
            // GitLab: issues, merge requests, notes, discussions, files, job logs.
            "gitlab.*issue*",
            "gitlab.*merge_request*",
            "gitlab.get_file",
            "gitlab.get_job_log",
            "gitlab.*commit*",
            "gitlab.search",
            // Jira and ClickUp: issues, tasks and their comments; Fireflies: what was said.
            "jira.get_issue",
            "jira.search_issues",
            "jira.list_comments",
            "jira.list_child_issues",
            "clickup.get_task",
            "clickup.list_tasks",
            "clickup.search_tasks",
            "clickup.list_task_comments",
            "fireflies.*",
        ];
        let scopes: [&[&str]; 8] = [
            &["owner", "repo"],
            &["project"],
            &["project_id"],
            &["project_key"],
            &["issue_key"],
            &["list_id"],
            &["space_id"],
            &["task_id"],
        ];
        Self {
            enabled: true,
            untrusted: untrusted.map(str::to_owned).to_vec(),
            scope_arguments: scopes
                .iter()
                .map(|set| set.iter().map(|a| (*a).to_owned()).collect())
                .collect(),
        }
    }
}

/// What a session has read, for the flow check: whether something untrusted (and what, for the
/// question), and from which scopes (`*` for a read that named none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFlows {
    /// The first untrusted read: the tool and its scope.
    pub untrusted: Option<String>,
    /// Every scope read from.
    pub read_from: BTreeSet<String>,
}

/// [`FlowsConfig`], compiled.
#[derive(Debug, Clone)]
pub struct FlowRules {
    enabled: bool,
    untrusted: GlobSet,
    scope_arguments: Vec<Vec<String>>,
}

/// A read that named no scope: data from anywhere the credentials reach.
const EVERYWHERE: &str = "*";

impl FlowRules {
    /// Compiles the config; an error names the pattern.
    pub fn new(config: &FlowsConfig) -> Result<Self, String> {
        let mut builder = GlobSetBuilder::new();
        for pattern in &config.untrusted {
            let glob = Glob::new(pattern).map_err(|e| {
                format!(
                    "[security.flows] untrusted: pattern `{pattern}`: {}; write e.g. \"github.get_issue\"",
                    e.kind()
                )
            })?;
            builder.add(glob);
        }
        Ok(Self {
            enabled: config.enabled,
            untrusted: builder.build().map_err(|e| e.to_string())?,
            scope_arguments: config.scope_arguments.clone(),
        })
    }

    /// Whether the check is on.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The scope a call of `qualified` with `arguments` reaches: its provider and the values of
    /// the first argument set it carries whole, lowercased; `None` when it carries none.
    pub fn scope_of(&self, qualified: &str, arguments: &Value) -> Option<String> {
        let provider = qualified.split('.').next().unwrap_or(qualified);
        self.scope_arguments.iter().find_map(|set| {
            let values: Option<Vec<String>> = set
                .iter()
                .map(|name| match arguments.get(name)? {
                    // A Jira issue key (`OPS-12`) is in its project's scope.
                    Value::String(key) if name == "issue_key" => {
                        Some(key.rsplit_once('-').map_or(key.as_str(), |(p, _)| p).to_lowercase())
                    }
                    Value::String(text) if !text.is_empty() => Some(text.to_lowercase()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })
                .collect();
            values.filter(|v| !v.is_empty()).map(|v| format!("{provider}:{}", v.join("/")))
        })
    }

    /// Whether a read of `qualified` (MCP name `mcp_name`) returns text written by others:
    /// it matches `untrusted`, or another MCP server answers it (`upstream`).
    pub fn is_untrusted(&self, qualified: &str, mcp_name: &str, upstream: bool) -> bool {
        upstream
            || self.untrusted.is_match(qualified)
            || (!mcp_name.is_empty() && self.untrusted.is_match(mcp_name))
    }

    /// The argument sets that name a scope, for explaining the rule.
    pub fn scope_arguments(&self) -> &[Vec<String>] {
        &self.scope_arguments
    }

    /// Records a successful read of `qualified` (MCP name `mcp_name`) with `arguments`:
    /// `upstream` is whether another MCP server answered it (its answers are untrusted);
    /// `by_writers` whether its provider labelled every text of it as written by someone who
    /// can write to the resource (a maintainer's own issue is not a stranger's).
    pub fn after_read(
        &self,
        session: &mut SessionFlows,
        qualified: &str,
        mcp_name: &str,
        arguments: &Value,
        origin: (bool, bool),
    ) {
        let scope = self.scope_of(qualified, arguments);
        self.after_read_in(session, qualified, mcp_name, scope, origin);
    }

    /// [`FlowRules::after_read`] with the call's scope ([`FlowRules::scope_of`]) found before
    /// the call, so its arguments need not be kept.
    pub fn after_read_in(
        &self,
        session: &mut SessionFlows,
        qualified: &str,
        mcp_name: &str,
        scope: Option<String>,
        (upstream, by_writers): (bool, bool),
    ) {
        if !self.enabled {
            return;
        }
        let scope = if upstream {
            format!("upstream:{}", qualified.split('.').next().unwrap_or(qualified))
        } else {
            scope.unwrap_or_else(|| EVERYWHERE.to_owned())
        };
        let untrusted =
            self.is_untrusted(qualified, mcp_name, upstream) && (upstream || !by_writers);
        if untrusted && session.untrusted.is_none() {
            let place = if scope == EVERYWHERE { "a search".to_owned() } else { scope.clone() };
            session.untrusted = Some(format!("`{qualified}` ({place})"));
        }
        session.read_from.insert(scope);
    }

    /// Why a write of `qualified` with `arguments` needs a person's yes: the session read
    /// something untrusted, and data from a scope other than the one this call writes to
    /// (or the write names no scope, or is another server's). `None` when it does not.
    pub fn before_write(
        &self,
        session: &SessionFlows,
        qualified: &str,
        arguments: &Value,
    ) -> Option<String> {
        if !self.enabled {
            return None;
        }
        let untrusted = session.untrusted.as_ref()?;
        let target = self.scope_of(qualified, arguments);
        let elsewhere: Vec<&str> = session
            .read_from
            .iter()
            .map(String::as_str)
            .filter(|scope| target.as_deref() != Some(*scope))
            .collect();
        if elsewhere.is_empty() {
            return None;
        }
        let read: Vec<String> = elsewhere
            .iter()
            .map(|s| if *s == EVERYWHERE { "a search".to_owned() } else { (*s).to_owned() })
            .collect();
        let to = target.unwrap_or_else(|| "a place quiver cannot name".to_owned());
        Some(format!(
            "this session read text written by others ({untrusted}) and data from {}; \
             `{qualified}` writes to {to}, which could publish what was read there. Text in \
             what was read may be steering the agent.",
            read.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules() -> FlowRules {
        FlowRules::new(&FlowsConfig::default()).unwrap()
    }

    #[test]
    fn the_published_attack_asks_and_the_ordinary_flow_does_not() {
        let r = rules();
        let public = json!({"owner": "acme", "repo": "public-site", "number": 7});
        let mut attacked = SessionFlows::default();
        r.after_read(
            &mut attacked,
            "github.get_issue",
            "github_get_issue",
            &public,
            (false, false),
        );
        r.after_read(
            &mut attacked,
            "github.get_file_contents",
            "github_get_file_contents",
            &json!({"owner": "acme", "repo": "payroll", "path": "salaries.csv"}),
            (false, false),
        );
        let why = r.before_write(&attacked, "github.create_pull_request", &public).expect("asked");
        assert!(why.contains("`github.get_issue` (github:acme/public-site)"), "{why}");
        assert!(why.contains("data from github:acme/payroll"), "{why}");
        assert!(why.contains("writes to github:acme/public-site"), "{why}");
        // Reading and writing one repository, untrusted text and all, asks nothing.
        let mut ordinary = SessionFlows::default();
        r.after_read(&mut ordinary, "github.get_issue", "", &public, (false, false));
        r.after_read(&mut ordinary, "github.get_file_contents", "", &public, (false, false));
        assert!(r.before_write(&ordinary, "github.add_issue_comment", &public).is_none());
        // Reading two repositories with nothing untrusted asks nothing either.
        let mut trusted = SessionFlows::default();
        r.after_read(&mut trusted, "github.list_branches", "", &public, (false, false));
        r.after_read(
            &mut trusted,
            "github.get_repository",
            "",
            &json!({"owner": "acme", "repo": "payroll"}),
            (false, false),
        );
        assert!(r.before_write(&trusted, "github.create_branch", &public).is_none());
        // An issue whose every text a maintainer wrote is not untrusted either.
        let mut maintainers = SessionFlows::default();
        r.after_read(&mut maintainers, "github.get_issue", "", &public, (false, true));
        assert!(maintainers.untrusted.is_none());
    }

    #[test]
    fn searches_and_other_servers_count_as_reads_from_elsewhere() {
        let r = rules();
        let mut session = SessionFlows::default();
        r.after_read(
            &mut session,
            "notes.read_note",
            "notes_read_note",
            &json!({"id": 1}),
            (true, false),
        );
        assert_eq!(session.untrusted.as_deref(), Some("`notes.read_note` (upstream:notes)"));
        let why = r
            .before_write(&session, "github.create_issue", &json!({"owner": "a", "repo": "b"}))
            .unwrap();
        assert!(why.contains("data from upstream:notes"), "{why}");
        let mut searched = SessionFlows::default();
        r.after_read(
            &mut searched,
            "github.search_code",
            "",
            &json!({"query": "password"}),
            (false, false),
        );
        let why = r
            .before_write(&searched, "github.create_issue", &json!({"owner": "a", "repo": "b"}))
            .unwrap();
        assert!(why.contains("(a search)") && why.contains("data from a search"), "{why}");
        let off =
            FlowRules::new(&FlowsConfig { enabled: false, ..FlowsConfig::default() }).unwrap();
        let mut none = SessionFlows::default();
        off.after_read(&mut none, "github.get_issue", "", &json!({}), (false, false));
        assert!(off.before_write(&none, "github.create_issue", &json!({})).is_none());
    }

    #[test]
    fn scopes_come_from_the_first_argument_set_a_call_carries() {
        let r = rules();
        assert_eq!(
            r.scope_of("github.get_issue", &json!({"owner": "Acme", "repo": "API"})).as_deref(),
            Some("github:acme/api")
        );
        assert_eq!(
            r.scope_of("gitlab.get_issue", &json!({"project": "g/p", "iid": 1})).as_deref(),
            Some("gitlab:g/p")
        );
        assert_eq!(
            r.scope_of("clickup.get_tasks", &json!({"list_id": 9012})).as_deref(),
            Some("clickup:9012")
        );
        assert_eq!(r.scope_of("github.search_code", &json!({"query": "x"})), None);
        assert_eq!(
            r.scope_of("jira.get_issue", &json!({"issue_key": "OPS-12"})).as_deref(),
            Some("jira:ops")
        );
        assert_eq!(
            r.scope_of("jira.create_issue", &json!({"project_key": "OPS"})).as_deref(),
            Some("jira:ops")
        );
    }
}
