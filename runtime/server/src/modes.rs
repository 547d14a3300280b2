//! What each mode lists, and how `dynamic` mode admits and evicts tools.
//!
//! A [`Listing`] holds the CORE set (always listed in `search` and `dynamic` mode) and, in
//! `dynamic` mode, the tools loaded so far with the logical time each was last loaded or called.
//! A load admits the requested tools under `max_tools` (CORE counted), evicting the least
//! recently called non-CORE tools first and never one of the tools being loaded; a bundle larger
//! than the room left is admitted in its own order up to the cap, and the rest is reported.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::catalog::{Catalog, ExposedTool};
use crate::policy::{Patterns, PolicyError};
use quiver_runtime::config::{SelectorConfig, ServeMode};

/// The meta tool of `search` mode that finds tools.
pub const FIND_TOOLS: &str = "find_tools";
/// The meta tool of `search` mode that runs any enabled tool.
pub const CALL_TOOL: &str = "call_tool";
/// The meta tool of `dynamic` mode that lists a bundle's tools.
pub const LOAD_TOOLS: &str = "load_tools";

/// A follow-up link at least this probable is listed after a call in `dynamic` mode (the
/// providers' links run from 0.25, an occasional next step, to 0.55).
pub const FOLLOW_UP_MIN_PROBABILITY: f32 = 0.3;

/// How many tools `find_tools` returns when `k` is not given.
pub const DEFAULT_K: usize = 5;

/// What a load did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadOutcome {
    /// Newly listed (qualified names).
    pub admitted: Vec<String>,
    /// Listed before; their recency was refreshed.
    pub already: Vec<String>,
    /// Taken off the list to make room.
    pub evicted: Vec<String>,
    /// Asked for but over `max_tools`.
    pub left_out: Vec<String>,
}

impl LoadOutcome {
    /// Whether the listed set changed (and `list_changed` is due).
    pub fn changed(&self) -> bool {
        !self.admitted.is_empty() || !self.evicted.is_empty()
    }
}

/// The listed set of one connection.
#[derive(Debug, Clone)]
pub struct Listing {
    mode: ServeMode,
    max_tools: usize,
    /// Qualified names, catalog order.
    core: Vec<String>,
    /// `dynamic` mode: loaded tool → logical time of its last load or call.
    loaded: BTreeMap<String, u64>,
    clock: u64,
}

impl Listing {
    /// The starting list for `mode` over `catalog`; CORE patterns come from `[selector] core`.
    pub fn new(
        mode: ServeMode,
        config: &SelectorConfig,
        catalog: &Catalog,
    ) -> Result<Self, PolicyError> {
        let patterns = Patterns::new("core", &config.core)?;
        let core = catalog
            .enabled()
            .filter(|t| patterns.matches(&t.qualified, &t.mcp_name))
            .map(|t| t.qualified.clone())
            .collect();
        Ok(Self {
            mode,
            max_tools: config.max_tools.max(1),
            core,
            loaded: BTreeMap::new(),
            clock: 0,
        })
    }

    /// The mode.
    pub fn mode(&self) -> ServeMode {
        self.mode
    }

    /// Whether `qualified` is in the list the client sees.
    pub fn is_listed(&self, catalog: &Catalog, qualified: &str) -> bool {
        match self.mode {
            ServeMode::All => catalog.get(qualified).is_some_and(ExposedTool::enabled),
            ServeMode::Search => self.core.iter().any(|c| c == qualified),
            ServeMode::Dynamic => {
                self.core.iter().any(|c| c == qualified) || self.loaded.contains_key(qualified)
            }
        }
    }

    /// The `tools/list` result's tools: provider tools in catalog order, then the mode's meta
    /// tools.
    pub fn tools(&self, catalog: &Catalog) -> Vec<Value> {
        let mut out: Vec<Value> = catalog
            .enabled()
            .filter(|t| self.is_listed(catalog, &t.qualified))
            .map(ExposedTool::to_mcp)
            .collect();
        match self.mode {
            ServeMode::All => {}
            ServeMode::Search => {
                out.push(find_tools_tool(self.max_tools));
                out.push(call_tool_tool());
            }
            ServeMode::Dynamic => out.push(load_tools_tool()),
        }
        out
    }

    /// Notes a call of `qualified`, so eviction takes the least recently called first.
    pub fn touch(&mut self, qualified: &str) {
        self.clock += 1;
        if let Some(stamp) = self.loaded.get_mut(qualified) {
            *stamp = self.clock;
        }
    }

    /// Admits `tools` (qualified, in the order they should win room) under `max_tools`.
    pub fn load(&mut self, tools: &[String]) -> LoadOutcome {
        self.clock += 1;
        let mut outcome = LoadOutcome::default();
        let room = self.max_tools.saturating_sub(self.core.len());
        let wanted: Vec<&String> =
            tools.iter().filter(|t| !self.core.contains(t)).take(room).collect();
        outcome.left_out =
            tools.iter().filter(|t| !self.core.contains(t)).skip(room).cloned().collect();
        for tool in &wanted {
            if let Some(stamp) = self.loaded.get_mut(*tool) {
                *stamp = self.clock;
                outcome.already.push((*tool).clone());
            }
        }
        let new: Vec<&String> =
            wanted.iter().copied().filter(|t| !self.loaded.contains_key(*t)).collect();
        let over = (self.loaded.len() + new.len()).saturating_sub(room);
        if over > 0 {
            let mut evictable: Vec<(u64, String)> = self
                .loaded
                .iter()
                .filter(|(name, _)| !wanted.contains(name))
                .map(|(name, stamp)| (*stamp, name.clone()))
                .collect();
            evictable.sort();
            for (_, name) in evictable.into_iter().take(over) {
                self.loaded.remove(&name);
                outcome.evicted.push(name);
            }
        }
        for tool in new {
            self.loaded.insert(tool.clone(), self.clock);
            outcome.admitted.push(tool.clone());
        }
        outcome
    }
}

/// `find_tools(query, k)`.
fn find_tools_tool(max_k: usize) -> Value {
    json!({
        "name": FIND_TOOLS,
        "description": "Find the tools for a task among every tool this server has (most are not \
                        listed). Returns the matches with their input schemas, best first; run \
                        one with call_tool. When nothing fits, returns no tool and the closest \
                        bundles; a bundle's name as the query lists its tools.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in words."},
                "k": {"type": "integer", "minimum": 1, "maximum": max_k,
                      "description": format!("How many tools to return (default {DEFAULT_K}).")}
            },
            "required": ["query"]
        },
        "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}
    })
}

/// `call_tool(name, arguments)`.
fn call_tool_tool() -> Value {
    json!({
        "name": CALL_TOOL,
        "description": "Run any tool by the name find_tools gave, with arguments matching its \
                        input schema.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The tool's name."},
                "arguments": {"type": "object", "description": "Its arguments."}
            },
            "required": ["name"]
        }
    })
}

/// `load_tools(bundle_or_tool)`.
fn load_tools_tool() -> Value {
    json!({
        "name": LOAD_TOOLS,
        "description": "List more tools: a bundle from the menu in the server instructions \
                        (`github`, `github.issues`), one tool's name, or what you want to do in \
                        words (the tools that fit it are listed). Less recently used tools may \
                        leave the list to make room.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "bundle_or_tool": {"type": "string", "description": "A bundle, a tool name, or a request in words."}
            },
            "required": ["bundle_or_tool"]
        },
        "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_core::SideEffectClass;

    fn tool(qualified: &str) -> ExposedTool {
        let (provider, local) = qualified.split_once('.').unwrap();
        ExposedTool {
            qualified: qualified.into(),
            mcp_name: format!("{provider}_{local}"),
            provider: provider.into(),
            group: None,
            description: String::new(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            class: SideEffectClass::ReadOnly,
            policy_class: SideEffectClass::ReadOnly,
            refusal: None,
            confirm: false,
            declared: None,
            as_declared: false,
            edit: None,
            former_name: None,
        }
    }

    fn listing(mode: ServeMode, max_tools: usize, core: &[&str]) -> (Listing, Catalog) {
        let names = ["g.a", "g.b", "g.c", "g.d", "g.e", "j.x"];
        let catalog = Catalog::from_tools(names.iter().map(|n| tool(n)).collect());
        let config = SelectorConfig {
            max_tools,
            core: core.iter().map(|c| c.to_string()).collect(),
            ..SelectorConfig::default()
        };
        (Listing::new(mode, &config, &catalog).unwrap(), catalog)
    }

    fn names(listing: &Listing, catalog: &Catalog) -> Vec<String> {
        listing.tools(catalog).iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    }

    fn owned(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn each_mode_lists_its_set() {
        let (all, catalog) = listing(ServeMode::All, 3, &["j.*"]);
        assert_eq!(names(&all, &catalog).len(), 6, "all ignores max_tools and core");
        let (search, catalog) = listing(ServeMode::Search, 3, &["j.*"]);
        assert_eq!(names(&search, &catalog), ["j_x", FIND_TOOLS, CALL_TOOL]);
        let (dynamic, catalog) = listing(ServeMode::Dynamic, 3, &["j.*"]);
        assert_eq!(names(&dynamic, &catalog), ["j_x", LOAD_TOOLS]);
    }

    #[test]
    fn loading_evicts_the_least_recently_called_tool_but_never_core() {
        let (mut dynamic, catalog) = listing(ServeMode::Dynamic, 3, &["j.x"]);
        let first = dynamic.load(&owned(&["g.a", "g.b"]));
        assert_eq!(first.admitted, ["g.a", "g.b"]);
        assert!(first.changed());
        dynamic.touch("g.a");
        let second = dynamic.load(&owned(&["g.c"]));
        assert_eq!(second.evicted, ["g.b"], "g.a was called more recently");
        assert_eq!(names(&dynamic, &catalog), ["g_a", "g_c", "j_x", LOAD_TOOLS]);
        let again = dynamic.load(&owned(&["g.c"]));
        assert!(!again.changed());
        assert_eq!(again.already, ["g.c"]);
    }

    #[test]
    fn a_bundle_bigger_than_the_room_is_cut_and_says_so() {
        let (mut dynamic, _) = listing(ServeMode::Dynamic, 3, &["j.x"]);
        let outcome = dynamic.load(&owned(&["g.a", "g.b", "g.c", "g.d"]));
        assert_eq!(outcome.admitted, ["g.a", "g.b"]);
        assert_eq!(outcome.left_out, ["g.c", "g.d"]);
        assert!(dynamic.is_listed(&Catalog::default(), "j.x"));
    }
}
