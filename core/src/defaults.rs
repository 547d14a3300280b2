//! Built-in priors: a sane value model for any tool from its name alone.
//!
//! The priors are the first, weakest layer of every tool's value model (see
//! [`crate::value_model`]): the provider's `value_model` and the user's `[tools."…"]` sections merge
//! over them and win wherever they say something. They exist so that every tool has a usable model
//! before any provider or user has said a word about it — the planner can score it, the cache knows
//! how long its result stays fresh, and the speculation engine knows whether it may run it
//! unasked.
//!
//! Two kinds of prior, tried in this order:
//!
//! - **Named priors** for the common agent built-ins (`Read`, `Grep`, `Edit`, `Bash`, `TodoWrite`…),
//!   matched by exact, case-sensitive name. They are anchored on what the value-models corpus shows
//!   about those tools (`Grep` is usually followed by `Read` of a hit, repeated empty `ToolSearch`
//!   calls go nowhere, task bookkeeping is noise), so telemetry recorded from general agents can be
//!   planned over too. The rule is named `builtin:<Name>`.
//! - **Verb priors** for every other tool: an MCP prefix `mcp__<server>__` is stripped, the name is
//!   split into words (snake_case, kebab-case, camelCase) and the *leading* word decides — `get_issue`
//!   reads, `list_pull_requests` lists, `create_issue` mutates a remote service. The rule is named
//!   `verb:<verb>`. A name that does not start with a known verb (`issue_comments`) gets
//!   `shape:unknown`: `indeterminate`, never speculated, never served from the cache.
//!
//! Priors lean to the safe side: only reads are speculatable, and everything that mutates (or might)
//! says `speculate = false` and `freshness_ttl_s = 0`, so no later layer that merely reclassifies the
//! side effect can make a write run unasked or be answered from the cache.

use std::collections::BTreeMap;

use crate::value_model::{
    CostModelLayer, FieldGroupLayer, FollowUpLink, SideEffectClass, ValueClass, ValueModelLayer,
};

use SideEffectClass::{Indeterminate, MutatesExternal, MutatesLocal, Pure, ReadOnly};
use ValueClass::{AuditOnly, Critical, Supporting};

/// The built-in prior for a tool, and the rule that produced it (`verb:get`, `builtin:Read`).
///
/// `tool` is the provider-local or plain name (`get_issue`, `Read`, `mcp__github__get_issue`), not
/// the qualified `github.get_issue`. Named priors match the exact name; every other name falls to
/// the verb rules, and a name without a known leading verb to `shape:unknown`.
pub fn prior_for(tool: &str) -> (String, ValueModelLayer) {
    if let Some(named) = NAMED.iter().find(|n| n.name == tool) {
        return (format!("builtin:{}", named.name), named.layer());
    }
    let (mcp_prefix, local) = split_mcp_prefix(tool);
    let Some((start, end)) = word_spans(local).first().copied() else {
        return unknown();
    };
    let verb = local[start..end].to_ascii_lowercase();
    let Some(shape) = VERBS.iter().find(|(verbs, _)| verbs.contains(&verb.as_str())).map(|v| v.1)
    else {
        return unknown();
    };
    let mut layer = shape.layer();
    if matches!(shape, Shape::Update | Shape::Delete) {
        // `update_issue` makes a cached `get_issue` stale: bust it (a guess by name; providers that
        // know better replace the whole list).
        let rest = &local[end..];
        if rest.chars().any(|c| c.is_ascii_alphanumeric()) {
            let get = match &local[start..end] {
                v if v.len() > 1 && v.chars().all(|c| !c.is_ascii_lowercase()) => "GET",
                v if v.starts_with(|c: char| c.is_ascii_uppercase()) => "Get",
                _ => "get",
            };
            layer.invalidates = Some(vec![format!("{mcp_prefix}{}{get}{rest}", &local[..start])]);
        }
    }
    (format!("verb:{verb}"), layer)
}

/// The names that have a named prior (`Read`, `Grep`, `Bash`…), in table order.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    NAMED.iter().map(|n| n.name)
}

fn unknown() -> (String, ValueModelLayer) {
    let layer = ValueModelLayer {
        side_effect_class: Some(Indeterminate),
        cost_model: Some(CostModelLayer { freshness_ttl_s: Some(0), ..CostModelLayer::default() }),
        ..ValueModelLayer::default()
    };
    ("shape:unknown".to_owned(), layer)
}

// ---------------------------------------------------------------------------------------------
// Named priors
// ---------------------------------------------------------------------------------------------

/// One row of the named-prior table.
struct Named {
    name: &'static str,
    value_class: ValueClass,
    side_effect: SideEffectClass,
    /// Typical response size in KiB.
    typical_kb: f64,
    /// `None` leaves the cache policy to later layers; `Some(0)` never serves from the cache.
    freshness_ttl_s: Option<u64>,
    follow_up: &'static [Link],
    invalidates: &'static [&'static str],
    fail_fast_after_n: Option<u32>,
    field_groups: &'static [Group],
}

/// A follow-up edge: the next tool, how often it follows, and `(projection, argument)`.
struct Link(&'static str, f64, &'static str, &'static str);

/// A field group: name, fields, estimated value, included by default.
struct Group(&'static str, &'static [&'static str], f64, bool);

/// What every row starts from; rows name only what differs.
const ROW: Named = Named {
    name: "",
    value_class: Supporting,
    side_effect: Indeterminate,
    typical_kb: 2.0,
    freshness_ttl_s: None,
    follow_up: &[],
    invalidates: &[],
    fail_fast_after_n: None,
    field_groups: &[],
};

/// Results that other calls make stale stay fresh for five minutes at most, covering changes no
/// tool reports (the user's editor, a `Bash` command).
const FILE_TTL: Option<u64> = Some(300);
/// Never served from the cache: the call changes something, or may.
const NO_CACHE: Option<u64> = Some(0);

/// The named priors. Projections follow the agents' structured results: `Grep` (files mode) and
/// `Glob` return `filenames`, `Read` takes `file_path`, `WebFetch` takes `url`.
#[rustfmt::skip]
static NAMED: &[Named] = &[
    // Reading the workspace: the answer itself.
    Named { name: "Read", value_class: Critical, side_effect: Pure, typical_kb: 6.0,
            freshness_ttl_s: FILE_TTL, ..ROW },
    Named { name: "Grep", value_class: Critical, side_effect: Pure, typical_kb: 3.0,
            freshness_ttl_s: FILE_TTL,
            follow_up: &[Link("Read", 0.5, "$.filenames[*]", "file_path")], ..ROW },
    Named { name: "Glob", side_effect: ReadOnly, typical_kb: 1.5, freshness_ttl_s: Some(60),
            follow_up: &[Link("Read", 0.4, "$.filenames[*]", "file_path")], ..ROW },
    // The web: search hits lead to a fetch; snippets are dropped unless asked for.
    Named { name: "WebSearch", side_effect: ReadOnly, typical_kb: 4.0, freshness_ttl_s: Some(600),
            follow_up: &[Link("WebFetch", 0.4, "$.results[*].url", "url")],
            field_groups: &[Group("snippet", &["snippet"], 0.3, false)], ..ROW },
    Named { name: "WebFetch", value_class: Critical, side_effect: ReadOnly, typical_kb: 10.0,
            freshness_ttl_s: Some(300), ..ROW },
    // Tool discovery: repeated empty searches go nowhere.
    Named { name: "ToolSearch", side_effect: ReadOnly, typical_kb: 2.0, freshness_ttl_s: Some(300),
            fail_fast_after_n: Some(2), ..ROW },
    // Changing files: small acknowledgements that make earlier reads stale.
    Named { name: "Edit", side_effect: MutatesLocal, typical_kb: 0.5, freshness_ttl_s: NO_CACHE,
            invalidates: &["Read", "Grep"], ..ROW },
    Named { name: "MultiEdit", side_effect: MutatesLocal, typical_kb: 0.5, freshness_ttl_s: NO_CACHE,
            invalidates: &["Read", "Grep"], ..ROW },
    Named { name: "Write", side_effect: MutatesLocal, typical_kb: 0.3, freshness_ttl_s: NO_CACHE,
            invalidates: &["Read", "Grep", "Glob"], ..ROW },
    Named { name: "NotebookEdit", side_effect: MutatesLocal, typical_kb: 0.5,
            freshness_ttl_s: NO_CACHE, invalidates: &["Read"], ..ROW },
    // Anything goes: never speculated, never cached.
    Named { name: "Bash", typical_kb: 3.0, freshness_ttl_s: NO_CACHE, ..ROW },
    Named { name: "Task", typical_kb: 4.0, freshness_ttl_s: NO_CACHE, ..ROW },
    Named { name: "Agent", typical_kb: 4.0, freshness_ttl_s: NO_CACHE, ..ROW },
    // The agent's own bookkeeping: never counted against a budget.
    Named { name: "TaskCreate", value_class: AuditOnly, side_effect: MutatesLocal, typical_kb: 0.3,
            freshness_ttl_s: NO_CACHE, invalidates: &["TaskList"], ..ROW },
    Named { name: "TaskUpdate", value_class: AuditOnly, side_effect: MutatesLocal, typical_kb: 0.3,
            freshness_ttl_s: NO_CACHE, invalidates: &["TaskList", "TaskGet"], ..ROW },
    Named { name: "TaskList", value_class: AuditOnly, side_effect: ReadOnly, typical_kb: 1.0,
            freshness_ttl_s: Some(30), ..ROW },
    Named { name: "TaskGet", value_class: AuditOnly, side_effect: ReadOnly, typical_kb: 0.5,
            freshness_ttl_s: Some(30), ..ROW },
    Named { name: "TodoWrite", value_class: AuditOnly, side_effect: MutatesLocal, typical_kb: 0.5,
            freshness_ttl_s: NO_CACHE, ..ROW },
];

impl Named {
    fn layer(&self) -> ValueModelLayer {
        let mutates = matches!(self.side_effect, MutatesLocal | MutatesExternal);
        ValueModelLayer {
            value_class: Some(self.value_class),
            side_effect_class: Some(self.side_effect),
            speculate: mutates.then_some(false),
            cost_model: Some(CostModelLayer {
                typical_kb: Some(self.typical_kb),
                freshness_ttl_s: self.freshness_ttl_s,
                ..CostModelLayer::default()
            }),
            follow_up: (!self.follow_up.is_empty()).then(|| {
                self.follow_up
                    .iter()
                    .map(|Link(tool, probability, projection, arg)| FollowUpLink {
                        tool: (*tool).to_owned(),
                        probability: *probability,
                        projection: Some((*projection).to_owned()),
                        projection_arg: Some((*arg).to_owned()),
                    })
                    .collect()
            }),
            invalidates: (!self.invalidates.is_empty())
                .then(|| self.invalidates.iter().map(|t| (*t).to_owned()).collect()),
            fail_fast_after_n: self.fail_fast_after_n,
            field_groups: (!self.field_groups.is_empty()).then(|| {
                self.field_groups
                    .iter()
                    .map(|Group(name, fields, value, include)| {
                        let group = FieldGroupLayer {
                            fields: Some(fields.iter().map(|f| (*f).to_owned()).collect()),
                            estimated_value: Some(*value),
                            default_include: Some(*include),
                        };
                        ((*name).to_owned(), group)
                    })
                    .collect::<BTreeMap<_, _>>()
            }),
            rate_limit_host: None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Verb priors
// ---------------------------------------------------------------------------------------------

/// What a leading verb says about a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// One object: small, the answer itself.
    Read,
    /// Many objects: larger, context.
    Listing,
    /// Creates something remote.
    Create,
    /// Changes something remote.
    Update,
    /// Removes or stops something remote.
    Delete,
}

/// Leading verbs (lower case) and the shape they mean.
#[rustfmt::skip]
static VERBS: &[(&[&str], Shape)] = &[
    (&["get", "read", "fetch", "show", "describe", "view"], Shape::Read),
    (&["list", "search", "find", "query"], Shape::Listing),
    (&["create", "add", "post", "comment", "open", "submit", "send"], Shape::Create),
    (&["update", "edit", "set", "patch", "close", "merge", "assign", "transition", "move", "retry",
       "rerun", "approve"], Shape::Update),
    (&["delete", "remove", "cancel", "archive"], Shape::Delete),
];

impl Shape {
    fn layer(self) -> ValueModelLayer {
        let cost = |typical_kb: f64, ttl: u64| {
            Some(CostModelLayer {
                typical_kb: Some(typical_kb),
                freshness_ttl_s: Some(ttl),
                ..CostModelLayer::default()
            })
        };
        let (value_class, side_effect, cost_model) = match self {
            Shape::Read => (Critical, ReadOnly, cost(2.0, 60)),
            Shape::Listing => (Supporting, ReadOnly, cost(6.0, 30)),
            Shape::Create | Shape::Update => (Supporting, MutatesExternal, cost(1.0, 0)),
            Shape::Delete => (Supporting, MutatesExternal, cost(0.5, 0)),
        };
        ValueModelLayer {
            value_class: Some(value_class),
            side_effect_class: Some(side_effect),
            speculate: (side_effect == MutatesExternal).then_some(false),
            cost_model,
            ..ValueModelLayer::default()
        }
    }
}

/// Splits `mcp__<server>__<tool>` into (`mcp__<server>__`, `<tool>`); other names have no prefix.
fn split_mcp_prefix(name: &str) -> (&str, &str) {
    if let Some(after) = name.strip_prefix("mcp__") {
        if let Some(i) = after.find("__").filter(|&i| i > 0) {
            let cut = "mcp__".len() + i + 2;
            if cut < name.len() {
                return name.split_at(cut);
            }
        }
    }
    ("", name)
}

/// Byte spans of the words of `name`: separated by `_`, `-`, `.`, `/` or whitespace, and at camelCase
/// humps (`getIssue` → get, Issue; `getHTTPStatus` → get, HTTP, Status).
fn word_spans(name: &str) -> Vec<(usize, usize)> {
    let chars: Vec<(usize, char)> = name.char_indices().collect();
    let mut spans = Vec::new();
    let mut start: Option<usize> = None;
    for (k, &(i, c)) in chars.iter().enumerate() {
        if matches!(c, '_' | '-' | '.' | '/') || c.is_whitespace() {
            if let Some(s) = start.take() {
                spans.push((s, i));
            }
            continue;
        }
        if let Some(s) = start {
            let prev = chars[k - 1].1;
            let next_lower = chars.get(k + 1).is_some_and(|&(_, n)| n.is_lowercase());
            let hump = c.is_uppercase()
                && (prev.is_lowercase()
                    || prev.is_ascii_digit()
                    || (prev.is_uppercase() && next_lower));
            if hump {
                spans.push((s, i));
                start = Some(i);
            }
        } else {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        spans.push((s, name.len()));
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(name: &str) -> Vec<&str> {
        word_spans(name).into_iter().map(|(s, e)| &name[s..e]).collect()
    }

    fn rule(tool: &str) -> String {
        prior_for(tool).0
    }

    #[test]
    fn names_split_into_words_in_every_case_style() {
        assert_eq!(words("get_issue"), ["get", "issue"]);
        assert_eq!(words("list-pull-requests"), ["list", "pull", "requests"]);
        assert_eq!(words("getIssue"), ["get", "Issue"]);
        assert_eq!(words("GetIssueComments"), ["Get", "Issue", "Comments"]);
        assert_eq!(words("getHTTPStatus"), ["get", "HTTP", "Status"]);
        assert_eq!(words("listV2Issues"), ["list", "V2", "Issues"]);
        assert_eq!(words("__get__issue__"), ["get", "issue"]);
        assert_eq!(words("UPDATE_ISSUE"), ["UPDATE", "ISSUE"]);
        assert!(words("").is_empty());
        assert!(words("_-_").is_empty());
    }

    #[test]
    fn the_leading_verb_decides_in_every_case_style() {
        assert_eq!(rule("get_issue"), "verb:get");
        assert_eq!(rule("getIssue"), "verb:get");
        assert_eq!(rule("GetIssue"), "verb:get");
        assert_eq!(rule("get-issue"), "verb:get");
        assert_eq!(rule("listPullRequests"), "verb:list");
        assert_eq!(rule("search_issues"), "verb:search");
        assert_eq!(rule("create-issue"), "verb:create");
        assert_eq!(rule("DELETE_BRANCH"), "verb:delete");
        assert_eq!(rule("rerunWorkflow"), "verb:rerun");
        assert_eq!(rule("fetch"), "verb:fetch");
    }

    #[test]
    fn an_mcp_prefix_is_stripped_before_the_verb_is_read() {
        assert_eq!(rule("mcp__github__get_issue"), "verb:get");
        assert_eq!(rule("mcp__my_server__listIssues"), "verb:list");
        assert_eq!(rule("mcp__gitlab__create_merge_request"), "verb:create");
        // The server name is not the verb.
        assert_eq!(rule("mcp__get__issue_comments"), "shape:unknown");
        // Not a complete prefix: the whole name is read.
        assert_eq!(split_mcp_prefix("mcp__github"), ("", "mcp__github"));
        assert_eq!(split_mcp_prefix("mcp__github__"), ("", "mcp__github__"));
        assert_eq!(split_mcp_prefix("mcp____x"), ("", "mcp____x"));
    }

    #[test]
    fn only_the_leading_word_counts_as_a_verb() {
        assert_eq!(rule("issue_comments"), "shape:unknown");
        assert_eq!(rule("issue_get"), "shape:unknown");
        assert_eq!(rule("issueGetComments"), "shape:unknown");
        assert_eq!(rule("getter_config"), "shape:unknown");
        assert_eq!(rule("target"), "shape:unknown");
        assert_eq!(rule(""), "shape:unknown");
        let (_, layer) = prior_for("issue_comments");
        assert_eq!(layer.side_effect_class, Some(Indeterminate));
    }

    #[test]
    fn verbs_map_to_their_shapes() {
        let (_, get) = prior_for("get_issue");
        assert_eq!(get.side_effect_class, Some(ReadOnly));
        assert_eq!(get.value_class, Some(Critical));
        assert_eq!(get.speculate, None);
        assert_eq!(get.cost_model.as_ref().unwrap().freshness_ttl_s, Some(60));

        let (_, list) = prior_for("list_pull_requests");
        assert_eq!(list.side_effect_class, Some(ReadOnly));
        assert_eq!(list.value_class, Some(Supporting));
        assert!(list.cost_model.unwrap().typical_kb > get.cost_model.unwrap().typical_kb);

        for tool in
            ["create_issue", "add_comment", "update_issue", "merge_pull_request", "delete_branch"]
        {
            let (_, layer) = prior_for(tool);
            assert_eq!(layer.side_effect_class, Some(MutatesExternal), "{tool}");
            assert_eq!(layer.speculate, Some(false), "{tool}");
        }
    }

    #[test]
    fn changes_invalidate_the_matching_getter_in_the_same_spelling() {
        let inv = |tool: &str| prior_for(tool).1.invalidates;
        assert_eq!(inv("update_issue"), Some(vec!["get_issue".to_owned()]));
        assert_eq!(inv("closeIssue"), Some(vec!["getIssue".to_owned()]));
        assert_eq!(inv("DeleteBranch"), Some(vec!["GetBranch".to_owned()]));
        assert_eq!(inv("UPDATE_ISSUE"), Some(vec!["GET_ISSUE".to_owned()]));
        assert_eq!(
            inv("mcp__github__update_issue"),
            Some(vec!["mcp__github__get_issue".to_owned()])
        );
        assert_eq!(inv("delete"), None);
        assert_eq!(inv("create_issue"), None);
        assert_eq!(inv("get_issue"), None);
    }

    #[test]
    fn named_priors_match_exact_names_only() {
        assert_eq!(rule("Read"), "builtin:Read");
        assert_eq!(rule("read"), "verb:read");
        assert_eq!(rule("mcp__fs__Read"), "verb:read");
        assert_eq!(rule("Bash"), "builtin:Bash");
        assert_eq!(rule("bash"), "shape:unknown");
    }

    #[test]
    fn every_named_prior_is_listed_valid_and_unique() {
        let names: Vec<_> = builtin_names().collect();
        assert_eq!(names.len(), NAMED.len());
        for (i, name) in names.iter().enumerate() {
            assert!(!names[..i].contains(name), "{name} listed twice");
            let (rule, layer) = prior_for(name);
            assert_eq!(rule, format!("builtin:{name}"));
            layer.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
            let model = crate::value_model::resolve(&[(
                crate::value_model::LayerSource::BuiltIn(rule),
                &layer,
            )])
            .model;
            if matches!(model.side_effect_class, MutatesLocal | MutatesExternal | Indeterminate) {
                assert!(!model.may_speculate(), "{name}");
                assert_eq!(model.cost_model.freshness_ttl_s, Some(0), "{name} must not be cached");
            }
        }
        for expected in [
            "Read",
            "Grep",
            "Glob",
            "WebSearch",
            "WebFetch",
            "Edit",
            "MultiEdit",
            "Write",
            "NotebookEdit",
            "Bash",
            "Task",
            "TaskCreate",
            "TaskUpdate",
            "TaskList",
            "TaskGet",
            "TodoWrite",
            "ToolSearch",
            "Agent",
        ] {
            assert!(names.contains(&expected), "{expected} has no named prior");
        }
    }

    #[test]
    fn named_priors_carry_the_corpus_patterns() {
        let (_, grep) = prior_for("Grep");
        assert_eq!(grep.side_effect_class, Some(Pure));
        let link = &grep.follow_up.unwrap()[0];
        assert_eq!((link.tool.as_str(), link.probability), ("Read", 0.5));
        assert_eq!(link.projection_arg.as_deref(), Some("file_path"));

        assert_eq!(prior_for("ToolSearch").1.fail_fast_after_n, Some(2));
        assert_eq!(prior_for("TodoWrite").1.value_class, Some(AuditOnly));
        assert!(prior_for("Edit").1.invalidates.unwrap().contains(&"Read".to_owned()));
        let snippet = &prior_for("WebSearch").1.field_groups.unwrap()["snippet"];
        assert_eq!(snippet.default_include, Some(false));
        assert_eq!(prior_for("Glob").1.follow_up.unwrap()[0].tool, "Read");
        assert_eq!(prior_for("WebSearch").1.follow_up.unwrap()[0].tool, "WebFetch");
    }
}
