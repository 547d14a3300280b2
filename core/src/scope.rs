//! Scope rules: which values a call's arguments may take, not only which tools may be called.
//! `[[selector.scope]] tools = "github.*", owner = ["acme", "acme-*"]` keeps every GitHub call
//! inside the `acme` organisations: a call of a matching tool whose `owner` argument is anything
//! else is refused, naming the rule. Every key besides `tools` names an argument and lists the
//! values it may have, as case-insensitive globs (`repo = ["api", "web-*"]`, `project_key =
//! ["OPS"]`, `project = ["acme/*"]`, `list_id = ["9012"]`); numbers are matched as written.
//! A call that does not carry an argument a rule names is not limited by that argument: a rule
//! keeps calls inside a scope, it does not make a tool take arguments it does not have.
//!
//! ```
//! use quiver_core::scope::{ScopeRule, ScopeRules};
//! use serde_json::json;
//!
//! let rule: ScopeRule = toml::from_str("tools = \"github.*\"\nowner = [\"acme\"]").unwrap();
//! let rules = ScopeRules::new(&[rule]).unwrap();
//! let inside = json!({"owner": "ACME", "repo": "api"});
//! assert!(rules.refusal("github.get_issue", "github_get_issue", &inside).is_none());
//! let outside = json!({"owner": "someone-else", "repo": "secrets"});
//! let why = rules.refusal("github.get_issue", "github_get_issue", &outside).unwrap();
//! assert!(why.contains("`owner` = \"someone-else\" is outside [[selector.scope]] 1"), "{why}");
//! ```

use std::collections::BTreeMap;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One pattern or several.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// `"github.*"`.
    One(String),
    /// `["github.*", "gitlab.*"]`.
    Many(Vec<String>),
}

impl OneOrMany {
    /// The patterns.
    pub fn patterns(&self) -> Vec<String> {
        match self {
            OneOrMany::One(one) => vec![one.clone()],
            OneOrMany::Many(many) => many.clone(),
        }
    }
}

/// One `[[selector.scope]]` entry (or a user's `scope = [...]` entry), as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeRule {
    /// The tools it governs: globs over qualified (`github.*`) or MCP names.
    pub tools: OneOrMany,
    /// Argument name → the values it may take (globs, case-insensitive).
    #[serde(flatten)]
    pub arguments: BTreeMap<String, OneOrMany>,
}

#[derive(Clone)]
struct CompiledRule {
    /// `[[selector.scope]] 2`, `user scope 1`: how refusals name it.
    named: String,
    written: String,
    tools: GlobSet,
    arguments: Vec<(String, GlobSet)>,
}

/// Scope rules, compiled.
#[derive(Default, Clone)]
pub struct ScopeRules {
    rules: Vec<CompiledRule>,
}

impl std::fmt::Debug for ScopeRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.rules.iter().map(|r| &r.written)).finish()
    }
}

fn glob_set(patterns: &[String], case_insensitive: bool) -> Result<GlobSet, String> {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = GlobBuilder::new(pattern)
            .case_insensitive(case_insensitive)
            .build()
            .map_err(|e| format!("pattern `{pattern}`: {}", e.kind()))?;
        builder.add(glob);
    }
    builder.build().map_err(|e| e.to_string())
}

impl ScopeRules {
    /// Compiles `[[selector.scope]]` rules (numbered from 1 in the order written, as refusals
    /// name them).
    pub fn new(rules: &[ScopeRule]) -> Result<Self, String> {
        Self::named(rules, "[[selector.scope]]")
    }

    /// Compiles rules that refusals and errors call `section` (`user scope` for a user's).
    pub fn named(rules: &[ScopeRule], section: &str) -> Result<Self, String> {
        let mut compiled = Vec::with_capacity(rules.len());
        for (i, rule) in rules.iter().enumerate() {
            let named = format!("{section} {}", i + 1);
            let at = |e: String| {
                format!("{named}: {e}; write e.g. tools = \"github.*\", owner = [\"acme\"]")
            };
            if rule.arguments.is_empty() {
                return Err(at("names no argument to limit".to_owned()));
            }
            let tools = glob_set(&rule.tools.patterns(), false).map_err(at)?;
            let mut arguments = Vec::new();
            for (name, values) in &rule.arguments {
                if values.patterns().is_empty() {
                    return Err(at(format!("`{name}` lists no value")));
                }
                arguments.push((name.clone(), glob_set(&values.patterns(), true).map_err(at)?));
            }
            let written = std::iter::once(format!("tools = {}", shown(&rule.tools)))
                .chain(rule.arguments.iter().map(|(k, v)| format!("{k} = {}", shown(v))))
                .collect::<Vec<_>>()
                .join(", ");
            compiled.push(CompiledRule { named, written, tools, arguments });
        }
        Ok(Self { rules: compiled })
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The first rule (from 0, in the order written) that a call of `qualified` (MCP name
    /// `mcp_name`) with `arguments` falls under: the rule governs the tool, the call carries at
    /// least one argument it names, and each it carries matches. For choosing by rule (which
    /// account a call acts as), not for refusing.
    pub fn first_match(&self, qualified: &str, mcp_name: &str, arguments: &Value) -> Option<usize> {
        self.rules.iter().position(|rule| {
            if !(rule.tools.is_match(qualified) || rule.tools.is_match(mcp_name)) {
                return false;
            }
            let mut carried = false;
            for (name, allowed) in &rule.arguments {
                let text = match arguments.get(name) {
                    None | Some(Value::Null) => continue,
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                };
                if !allowed.is_match(&text) {
                    return false;
                }
                carried = true;
            }
            carried
        })
    }

    /// Whether rule `at` (from 0) governs the tool `qualified` (MCP name `mcp_name`).
    pub fn governs(&self, qualified: &str, mcp_name: &str, at: usize) -> bool {
        self.rules
            .get(at)
            .is_some_and(|rule| rule.tools.is_match(qualified) || rule.tools.is_match(mcp_name))
    }

    /// Rule `at` (from 0) as written (`tools = "github.*", owner = ["acme"]`).
    pub fn describe(&self, at: usize) -> &str {
        self.rules.get(at).map_or("", |rule| rule.written.as_str())
    }

    /// Why a call of `qualified` (MCP name `mcp_name`) with `arguments` is outside the scope,
    /// naming the rule and the argument; `None` when every rule that governs the tool lets it.
    pub fn refusal(&self, qualified: &str, mcp_name: &str, arguments: &Value) -> Option<String> {
        for rule in &self.rules {
            if !(rule.tools.is_match(qualified) || rule.tools.is_match(mcp_name)) {
                continue;
            }
            for (name, allowed) in &rule.arguments {
                let Some(value) = arguments.get(name) else { continue };
                let text = match value {
                    Value::String(text) => text.clone(),
                    Value::Null => continue,
                    other => other.to_string(),
                };
                if !allowed.is_match(&text) {
                    return Some(format!(
                        "`{qualified}` refused: argument `{name}` = {} is outside {} ({}); calls \
                         of it may only reach that scope",
                        Value::String(text),
                        rule.named,
                        rule.written
                    ));
                }
            }
        }
        None
    }
}

fn shown(patterns: &OneOrMany) -> String {
    match patterns {
        OneOrMany::One(one) => format!("\"{one}\""),
        OneOrMany::Many(many) => {
            format!("[{}]", many.iter().map(|p| format!("\"{p}\"")).collect::<Vec<_>>().join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(text: &str) -> ScopeRules {
        #[derive(Deserialize)]
        struct Config {
            scope: Vec<ScopeRule>,
        }
        let config: Config = toml::from_str(text).unwrap();
        ScopeRules::new(&config.scope).unwrap()
    }

    #[test]
    fn a_call_falls_under_the_first_rule_whose_arguments_it_carries_and_matches() {
        let r = rules(
            "[[scope]]\ntools = \"github.*\"\nowner = [\"acme\", \"acme-*\"]\n\
             [[scope]]\ntools = \"github.*\"\nowner = \"alice\"\n",
        );
        let at = |args: Value| r.first_match("github.get_issue", "github_get_issue", &args);
        assert_eq!(at(json!({"owner": "ACME-labs", "repo": "x"})), Some(0));
        assert_eq!(at(json!({"owner": "alice", "repo": "x"})), Some(1));
        assert_eq!(at(json!({"owner": "bob", "repo": "x"})), None);
        assert_eq!(at(json!({"query": "org:acme"})), None, "no argument a rule names");
        assert_eq!(
            r.first_match("gitlab.get_issue", "gitlab_get_issue", &json!({"owner": "acme"})),
            None
        );
    }

    #[test]
    fn each_governed_argument_must_match_and_others_pass() {
        let r = rules(
            "[[scope]]\ntools = [\"github.*\", \"gitlab.*\"]\nowner = [\"acme\", \"acme-*\"]\n\
             project = [\"acme/*\"]\n[[scope]]\ntools = \"jira.*\"\nproject_key = \"OPS\"\n",
        );
        let ok = |tool: &str, args: Value| r.refusal(tool, &tool.replace('.', "_"), &args);
        assert!(ok("github.get_issue", json!({"owner": "acme-labs", "repo": "x"})).is_none());
        assert!(ok("gitlab.get_issue", json!({"project": "acme/api", "iid": 3})).is_none());
        assert!(ok("github.search_code", json!({"query": "org:acme"})).is_none(), "no owner");
        assert!(ok("clickup.get_task", json!({"owner": "anyone"})).is_none(), "not governed");
        let why = ok("gitlab.get_issue", json!({"project": "evil/api"})).unwrap();
        assert!(why.contains("`project` = \"evil/api\" is outside [[selector.scope]] 1 (tools = [\"github.*\", \"gitlab.*\"], owner = [\"acme\", \"acme-*\"], project = [\"acme/*\"])"), "{why}");
        let why = ok("jira.create_issue", json!({"project_key": "HR", "summary": "x"})).unwrap();
        assert!(why.contains("[[selector.scope]] 2"), "{why}");
    }

    #[test]
    fn numbers_are_matched_as_written_and_a_rule_without_arguments_is_an_error() {
        let r = rules("[[scope]]\ntools = \"clickup.*\"\nlist_id = [\"9012\"]\n");
        assert!(r.refusal("clickup.get_tasks", "", &json!({"list_id": 9012})).is_none());
        assert!(r.refusal("clickup.get_tasks", "", &json!({"list_id": 9013})).is_some());
        #[derive(Deserialize)]
        struct Config {
            scope: Vec<ScopeRule>,
        }
        let config: Config = toml::from_str("[[scope]]\ntools = \"github.*\"\n").unwrap();
        let err = ScopeRules::new(&config.scope).unwrap_err();
        assert!(err.contains("[[selector.scope]] 1: names no argument"), "{err}");
    }
}
