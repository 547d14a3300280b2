//! MCP tool annotations from the value model's side-effect class and the tool's verb.
//!
//! - `pure` / `read_only`: `readOnlyHint` and `idempotentHint` (`destructiveHint` means nothing
//!   for a read-only tool, so it is left out and costs no tokens).
//! - `mutates_external` / `mutates_local`: `readOnlyHint: false`, and `destructiveHint` from the
//!   verb: **additive** verbs (`create`, `add`, `comment`, `post`, `reply`, `upload`, `run`…) only
//!   add to the service, so `false`; every other verb (`delete`, `close`, `merge`, `update`,
//!   `transition`…) may overwrite or remove what is there, so `true` — an unknown verb is treated
//!   as destructive, the safe side. `idempotentHint` is `true` for verbs whose repeat leaves the
//!   same end state (`update`, `set`, `close`, `delete`, `merge`…), `false` otherwise.
//! - `indeterminate`: only `readOnlyHint: false`; the protocol's defaults (destructive, not
//!   idempotent) are the cautious reading of "unknown".
//! - `openWorldHint`: `true` for every provider tool — each reaches its service over the network
//!   — except `mutates_local` tools, whose world is this machine.

use quiver_core::SideEffectClass;
use serde_json::{json, Map, Value};

/// Verbs that only add to a service: a new issue, comment, run or upload.
const ADDITIVE: &[&str] = &[
    "add", "append", "attach", "comment", "create", "dispatch", "fork", "invite", "log", "new",
    "open", "post", "react", "reply", "rerun", "run", "star", "start", "submit", "trigger",
    "upload",
];

/// Mutating verbs whose repeat with the same arguments changes nothing more.
const IDEMPOTENT: &[&str] = &[
    "archive",
    "assign",
    "close",
    "delete",
    "edit",
    "lock",
    "mark",
    "merge",
    "move",
    "remove",
    "rename",
    "reopen",
    "set",
    "transition",
    "unassign",
    "unlock",
    "update",
];

/// The leading verb of a provider-local tool name: `create_issue` → `create`,
/// `getIssue` → `get`.
pub fn verb(tool: &str) -> String {
    let word = tool.split(['_', '-', '.', ' ']).find(|w| !w.is_empty()).unwrap_or_default();
    let mut verb = String::new();
    for (i, c) in word.chars().enumerate() {
        // camelCase: the verb ends where the next word's capital starts.
        if i > 0 && c.is_ascii_uppercase() {
            break;
        }
        verb.push(c.to_ascii_lowercase());
    }
    verb
}

/// The `annotations` object of a tool named `tool` (provider-local) with side-effect `class`.
pub fn annotations(tool: &str, class: SideEffectClass) -> Value {
    let verb = verb(tool);
    let mut hints = Map::new();
    match class {
        SideEffectClass::Pure | SideEffectClass::ReadOnly => {
            hints.insert("readOnlyHint".into(), json!(true));
            hints.insert("idempotentHint".into(), json!(true));
        }
        SideEffectClass::MutatesExternal | SideEffectClass::MutatesLocal => {
            hints.insert("readOnlyHint".into(), json!(false));
            hints.insert("destructiveHint".into(), json!(!ADDITIVE.contains(&verb.as_str())));
            hints.insert("idempotentHint".into(), json!(IDEMPOTENT.contains(&verb.as_str())));
        }
        SideEffectClass::Indeterminate => {
            hints.insert("readOnlyHint".into(), json!(false));
        }
    }
    hints.insert("openWorldHint".into(), json!(class != SideEffectClass::MutatesLocal));
    Value::Object(hints)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_come_from_the_first_word() {
        assert_eq!(verb("create_issue"), "create");
        assert_eq!(verb("getIssue"), "get");
        assert_eq!(verb("merge_pull_request"), "merge");
        assert_eq!(verb(""), "");
    }

    #[test]
    fn reads_are_read_only_and_idempotent() {
        let hints = annotations("get_issue", SideEffectClass::ReadOnly);
        assert_eq!(
            hints,
            json!({"readOnlyHint": true, "idempotentHint": true, "openWorldHint": true})
        );
    }

    #[test]
    fn additive_mutations_are_not_destructive_and_removals_are() {
        let create = annotations("create_issue", SideEffectClass::MutatesExternal);
        assert_eq!(create["destructiveHint"], false);
        assert_eq!(create["idempotentHint"], false);
        let comment = annotations("add_comment", SideEffectClass::MutatesExternal);
        assert_eq!(comment["destructiveHint"], false);
        for removal in ["delete_branch", "close_issue", "merge_pull_request", "update_issue"] {
            let hints = annotations(removal, SideEffectClass::MutatesExternal);
            assert_eq!(hints["destructiveHint"], true, "{removal}");
            assert_eq!(hints["idempotentHint"], true, "{removal}");
            assert_eq!(hints["readOnlyHint"], false, "{removal}");
        }
        let unknown = annotations("frobnicate", SideEffectClass::MutatesExternal);
        assert_eq!(unknown["destructiveHint"], true, "unknown verbs are treated as destructive");
    }

    #[test]
    fn local_mutations_are_closed_world() {
        let hints = annotations("write_file", SideEffectClass::MutatesLocal);
        assert_eq!(hints["openWorldHint"], false);
        let unknown = annotations("x", SideEffectClass::Indeterminate);
        assert_eq!(unknown, json!({"readOnlyHint": false, "openWorldHint": true}));
    }
}
