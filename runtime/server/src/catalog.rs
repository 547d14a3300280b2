//! The tools `quiver serve` can expose, as MCP sees them: valid names, input schemas (with
//! `_confirm` where the policy asks for it), relaxed output schemas, annotations, bundles, and the
//! server's instructions.
//!
//! Built once per connection from the host's registry — tools are registered at run time from
//! whatever plugins loaded, never from a compiled-in list — and kept in qualified-name order, so
//! every listing is deterministic.

use std::collections::{BTreeMap, HashMap};

use quiver_core::client_schema::{input_for_clients, output_for_clients};
use quiver_core::{SideEffectClass, ToolName};
use serde_json::{json, Map, Value};

use crate::annotations::annotations;
use crate::policy::{Policy, Refusal};
use quiver_runtime::config::ServeMode;
use quiver_runtime::enrich::CatalogTool;
use quiver_runtime::host::Host;
use quiver_runtime::upstream::UpstreamSchemas;

/// The longest name MCP clients accept (`^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_NAME_LEN: usize = 64;

/// Bundle menu lines show at most this many tool names.
const MENU_NAMES: usize = 6;

/// One provider tool as MCP clients see it.
#[derive(Debug, Clone)]
pub struct ExposedTool {
    /// `github.get_issue`.
    pub qualified: String,
    /// `github_get_issue`: what clients list and call.
    pub mcp_name: String,
    /// `github`.
    pub provider: String,
    /// The provider's group (`issues`), if it declares one.
    pub group: Option<String>,
    /// For the model.
    pub description: String,
    /// The provider's input schema as every client accepts it (see
    /// [`quiver_core::client_schema`]), plus `_confirm` when the policy asks for it.
    pub input_schema: Value,
    /// The provider's output schema for clients, relaxed (see [`relax_output_schema`]).
    pub output_schema: Option<Value>,
    /// From the effective value model: what clients are shown.
    pub class: SideEffectClass,
    /// What policy decides by ([`Host::policy_class`]): an upstream's hints never loosen it.
    pub policy_class: SideEffectClass,
    /// Why it is not served, if it is not.
    pub refusal: Option<Refusal>,
    /// Whether a call must carry `"_confirm": true`.
    pub confirm: bool,
    /// An upstream's tool: its definition as the server listed it (`title`, `annotations`,
    /// `execution`, `icons`, `_meta`), which clients are shown instead of quiver's view of it.
    pub declared: Option<Map<String, Value>>,
    /// An upstream's tool whose schemas reach clients as the server declared them
    /// (`schemas = "as-declared"`, the default).
    pub as_declared: bool,
    /// What the user's `[tools."…"]` sections change of it (`name`, `description`,
    /// `arguments`), when they change anything.
    pub edit: Option<std::sync::Arc<quiver_core::tool_edit::ToolEdit>>,
    /// The MCP name it had before the user's `name` replaced it: still called, with a note.
    pub former_name: Option<String>,
}

impl ExposedTool {
    /// Served: no policy refuses it.
    pub fn enabled(&self) -> bool {
        self.refusal.is_none()
    }

    /// The MCP `Tool` object: a plugin's from its spec and value model; an upstream's as the
    /// server declared it (its title, annotations, execution hints, icons and `_meta`), under
    /// quiver's name for it, with its (maybe cut) description and the schemas clients get.
    pub fn to_mcp(&self) -> Value {
        if let Some(declared) = &self.declared {
            let mut tool = declared.clone();
            // Clients get a listing through the MCP library's tool type, which has no
            // `execution` (so the JSON here, which also decides when to announce a change, is
            // what they get); and quiver runs a task-only tool as a task for its callers, so
            // none needs the hint.
            tool.remove("execution");
            tool.insert("name".into(), json!(self.mcp_name));
            tool.insert("description".into(), json!(self.description));
            tool.insert("inputSchema".into(), self.input_schema.clone());
            match &self.output_schema {
                Some(schema) => tool.insert("outputSchema".into(), schema.clone()),
                None => tool.remove("outputSchema"),
            };
            return Value::Object(tool);
        }
        let local = self.qualified.split_once('.').map(|(_, t)| t).unwrap_or(&self.qualified);
        let mut tool = json!({
            "name": self.mcp_name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": annotations(local, self.class),
        });
        if let Some(schema) = &self.output_schema {
            tool["outputSchema"] = schema.clone();
        }
        tool
    }
}

/// A group of tools `load_tools` takes by name: a provider (`github`) or one of its groups
/// (`github.issues`).
#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    /// `github` or `github.issues`.
    pub name: String,
    /// One line for the menu.
    pub description: String,
    /// Its enabled tools, qualified, in order.
    pub tools: Vec<String>,
}

/// Every tool of the host, exposed or refused, in qualified-name order.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    tools: Vec<ExposedTool>,
    by_name: HashMap<String, usize>,
}

impl Catalog {
    /// The host's tools under `policy`; `inferred` holds output schemas the `output_parameters`
    /// enrichment found for tools that declare none.
    pub fn new(
        host: &Host,
        policy: &Policy,
        inferred: &std::collections::BTreeMap<String, Value>,
    ) -> Self {
        let mut tools = Vec::new();
        for tool in host.tools() {
            let qualified = tool.name.to_string();
            let model = host.value_model(&tool).model;
            let class = model.side_effect_class;
            let policy_class = host.policy_class(&tool);
            let (edit, _) = host.config().user_edits.edit_for(&qualified);
            let edit = (!edit.is_empty()).then(|| std::sync::Arc::new(edit));
            let (declared, as_declared) = match &tool.origin {
                quiver_runtime::registry::ToolOrigin::Upstream { upstream, declared, .. } => {
                    let mode = upstream.config().schemas;
                    (Some(declared.clone()), mode == UpstreamSchemas::AsDeclared)
                }
                quiver_runtime::registry::ToolOrigin::Plugin(_) => (None, false),
            };
            tools.push(ExposedTool {
                mcp_name: String::new(),
                provider: tool.name.provider.clone(),
                group: tool.spec.group.clone(),
                description: match &edit {
                    Some(edit) => edit.description(&tool.spec.description),
                    None => tool.spec.description.clone(),
                },
                input_schema: {
                    let schema = if as_declared {
                        tool.spec.input_schema.clone()
                    } else {
                        input_for_clients(&tool.spec.input_schema)
                    };
                    match &edit {
                        Some(edit) => edit.schema(&schema),
                        None => schema,
                    }
                },
                output_schema: match (&tool.spec.output_schema, inferred.get(&qualified)) {
                    // Only what projection may leave out is no longer promised: the fields of
                    // groups the user made opt-in.
                    (Some(declared), _) if as_declared => {
                        Some(without_droppable_promises(declared.clone(), &model))
                    }
                    (Some(declared), _) => Some(promised_output_schema(declared, &model)),
                    // A schema an LLM inferred from samples promises no field.
                    (None, Some(inferred)) => {
                        Some(relax_output_schema(output_for_clients(inferred)))
                    }
                    (None, None) => None,
                },
                class,
                policy_class,
                refusal: None,
                confirm: false,
                qualified,
                declared,
                as_declared,
                edit,
                former_name: None,
            });
        }
        let names: Vec<(ToolName, NameOwner)> = host
            .tools()
            .iter()
            .map(|t| {
                let owner = match t.origin {
                    quiver_runtime::registry::ToolOrigin::Plugin(_) => NameOwner::Plugin,
                    quiver_runtime::registry::ToolOrigin::Upstream { .. } => NameOwner::Upstream,
                };
                (t.name.clone(), owner)
            })
            .collect();
        // An upstream's `prefix` stands for its name in its tools' names ("" for none).
        let plain: Vec<String> = host
            .tools()
            .iter()
            .map(|t| match &t.origin {
                quiver_runtime::registry::ToolOrigin::Upstream { upstream, .. } => {
                    match upstream.config().prefix.as_deref() {
                        Some("") => safe_name(&t.name.tool),
                        Some(prefix) => safe_name(&format!("{prefix}_{}", t.name.tool)),
                        None => t.name.mcp_name_untruncated(),
                    }
                }
                quiver_runtime::registry::ToolOrigin::Plugin(_) => t.name.mcp_name_untruncated(),
            })
            .collect();
        for (tool, name) in tools.iter_mut().zip(unique_names_of(&names, plain)) {
            tool.mcp_name = name;
        }
        // The user's names, where no other tool (nor quiver's own) has that name already.
        let mut taken: std::collections::HashSet<String> = tools
            .iter()
            .map(|t| t.mcp_name.clone())
            .chain(RESERVED_NAMES.iter().map(|n| (*n).to_owned()))
            .collect();
        for tool in tools.iter_mut() {
            let Some(alias) = tool.edit.as_ref().and_then(|e| e.name.clone()) else { continue };
            if alias == tool.mcp_name {
                continue;
            }
            if taken.contains(&alias) {
                tracing::warn!(
                    "[tools.\"{}\"] name = \"{alias}\" is another tool's name already; it keeps \
                     `{}`",
                    tool.qualified,
                    tool.mcp_name
                );
                continue;
            }
            taken.insert(alias.clone());
            tool.former_name = Some(std::mem::replace(&mut tool.mcp_name, alias));
        }
        for tool in tools.iter_mut() {
            tool.refusal = policy.refusal(&tool.qualified, &tool.mcp_name, tool.policy_class);
            tool.confirm = policy.needs_confirm(&tool.qualified, &tool.mcp_name);
            if tool.confirm {
                add_confirm_property(&mut tool.input_schema);
            }
        }
        Self::from_tools(tools)
    }

    /// A catalog of the given tools (sorted here).
    pub fn from_tools(mut tools: Vec<ExposedTool>) -> Self {
        tools.sort_by(|a, b| a.qualified.cmp(&b.qualified));
        let mut by_name = HashMap::new();
        for (i, tool) in tools.iter().enumerate() {
            by_name.insert(tool.qualified.clone(), i);
            by_name.insert(tool.mcp_name.clone(), i);
            if let Some(former) = &tool.former_name {
                by_name.entry(former.clone()).or_insert(i);
            }
        }
        Self { tools, by_name }
    }

    /// A tool by qualified or MCP name.
    pub fn get(&self, name: &str) -> Option<&ExposedTool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// Every tool, refused ones included.
    pub fn all(&self) -> &[ExposedTool] {
        &self.tools
    }

    /// The tools that are served.
    pub fn enabled(&self) -> impl Iterator<Item = &ExposedTool> {
        self.tools.iter().filter(|t| t.enabled())
    }

    /// The enabled tools as the selector sees them.
    pub fn catalog_tools(&self, host: &Host) -> Vec<CatalogTool> {
        host.catalog()
            .into_iter()
            .filter(|t| self.get(&t.name).is_some_and(ExposedTool::enabled))
            .collect()
    }

    /// Providers and their groups, each with its enabled tools; empty ones are left out.
    pub fn bundles(&self) -> Vec<Bundle> {
        let mut groups: BTreeMap<String, Vec<&ExposedTool>> = BTreeMap::new();
        for tool in self.enabled() {
            groups.entry(tool.provider.clone()).or_default().push(tool);
            if let Some(group) = &tool.group {
                groups.entry(format!("{}.{group}", tool.provider)).or_default().push(tool);
            }
        }
        groups
            .into_iter()
            .map(|(name, tools)| {
                let locals: Vec<&str> = tools
                    .iter()
                    .map(|t| t.qualified.split_once('.').map(|(_, l)| l).unwrap_or(&t.qualified))
                    .collect();
                let more = locals.len().saturating_sub(MENU_NAMES);
                let mut shown =
                    locals.iter().take(MENU_NAMES).copied().collect::<Vec<_>>().join(", ");
                if more > 0 {
                    shown.push_str(&format!(", … {more} more"));
                }
                Bundle {
                    description: format!("{} tools: {shown}", tools.len()),
                    tools: tools.iter().map(|t| t.qualified.clone()).collect(),
                    name,
                }
            })
            .collect()
    }

    /// The server's `instructions`: the providers, one line each, what the mode asks of the
    /// model, and in `dynamic` mode the bundle menu.
    pub fn instructions(&self, mode: ServeMode) -> String {
        let bundles = self.bundles();
        let mut out = String::from(
            "quiver serves developer-service tools; results are trimmed to what is usually \
             needed (ask for more with a `fields` list where a tool offers one).\nProviders:\n",
        );
        for bundle in bundles.iter().filter(|b| !b.name.contains('.')) {
            let groups: Vec<&str> = bundles
                .iter()
                .filter_map(|b| b.name.strip_prefix(&format!("{}.", bundle.name)))
                .collect();
            let groups =
                if groups.is_empty() { String::new() } else { format!(" ({})", groups.join(", ")) };
            out.push_str(&format!("- {}: {} tools{groups}\n", bundle.name, bundle.tools.len()));
        }
        match mode {
            ServeMode::All => {}
            ServeMode::Search => out.push_str(
                "Only a few tools are listed. Call find_tools(query) to find the tools for a \
                 task, then call_tool(name, arguments) to run one.\n",
            ),
            ServeMode::Dynamic => {
                out.push_str(
                    "Only a few tools are listed. Call load_tools with a bundle or a tool name to \
                     list its tools. Bundles:\n",
                );
                for bundle in &bundles {
                    out.push_str(&format!("- {}: {}\n", bundle.name, bundle.description));
                }
            }
        }
        if self.enabled().any(|t| t.confirm) {
            out.push_str(
                "Tools with a `_confirm` argument run only when called with \"_confirm\": true, \
                 after the user agreed.\n",
            );
        }
        out
    }
}

/// Where a tool comes from, which decides who keeps a name two tools would share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NameOwner {
    /// A plugin of this host: keeps its name against any upstream.
    Plugin,
    /// An upstream MCP server, which quiver does not control: renamed when its name is taken.
    Upstream,
}

/// Names quiver's own tools have in the modes that list them; no provider tool gets one.
pub const RESERVED_NAMES: [&str; 3] =
    [crate::modes::FIND_TOOLS, crate::modes::CALL_TOOL, crate::modes::LOAD_TOOLS];

/// MCP names for `names`, in order: `provider_tool` with characters outside `[a-zA-Z0-9_-]`
/// as `_`. A name longer than 64 characters, or one that two tools would share, is cut and
/// given a hash suffix of the qualified name, so it stays the same from run to run.
///
/// Names the operator relies on cannot be taken: quiver's own tools ([`RESERVED_NAMES`]) and the
/// plugins' keep theirs, and an upstream tool whose name is one of them (an upstream `github_get`
/// with a tool `issue` against the plugin's `github_get_issue`; upstreams `call` and `find` with
/// `tool` and `tools`) is the one renamed, with a warning naming it. Every name is unique.
pub fn unique_mcp_names(names: &[(ToolName, NameOwner)]) -> Vec<String> {
    let plain: Vec<String> = names.iter().map(|(n, _)| n.mcp_name_untruncated()).collect();
    unique_names_of(names, plain)
}

/// [`unique_mcp_names`] of tools whose names before any renaming are `plain` (an upstream's
/// own `prefix` in place of its name).
pub fn unique_names_of(names: &[(ToolName, NameOwner)], plain: Vec<String>) -> Vec<String> {
    let mut count: HashMap<(&str, NameOwner), usize> = HashMap::new();
    for (name, (_, owner)) in plain.iter().zip(names) {
        *count.entry((name.as_str(), *owner)).or_default() += 1;
    }
    let mut taken: std::collections::HashSet<String> =
        RESERVED_NAMES.iter().map(|n| (*n).to_owned()).collect();
    let mut out = vec![String::new(); names.len()];
    // Plugins first, so an upstream never takes a plugin's name whatever the order.
    for pass in [NameOwner::Plugin, NameOwner::Upstream] {
        for (i, ((name, owner), plain)) in names.iter().zip(&plain).enumerate() {
            if *owner != pass {
                continue;
            }
            let fits = plain.len() <= MAX_NAME_LEN && !plain.is_empty();
            let clash = taken.contains(plain.as_str());
            let chosen = if fits && !clash && count[&(plain.as_str(), pass)] == 1 {
                plain.clone()
            } else {
                let renamed = hashed_name(name, plain, &taken);
                if clash {
                    warn_renamed(name, plain, &renamed);
                }
                renamed
            };
            taken.insert(chosen.clone());
            out[i] = chosen;
        }
    }
    out
}

/// `plain` cut to leave room for a hash of the qualified name; salted until it is free.
fn hashed_name(name: &ToolName, plain: &str, taken: &std::collections::HashSet<String>) -> String {
    let keep = plain.len().min(MAX_NAME_LEN - 9);
    let mut salt = String::new();
    loop {
        let hash = format!("{:016x}", fnv1a(format!("{name}{salt}").as_bytes()));
        let candidate = format!("{}_{}", &plain[..keep], &hash[..8]);
        if !taken.contains(&candidate) {
            return candidate;
        }
        salt.push('#');
    }
}

/// Says once per process that a tool lost its plain name, and to whom.
fn warn_renamed(name: &ToolName, plain: &str, renamed: &str) {
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.iter().any(|w| w == plain) {
        return;
    }
    warned.push(plain.to_owned());
    let owner = if RESERVED_NAMES.contains(&plain) { "quiver's own tool" } else { "a plugin tool" };
    tracing::warn!(
        "`{name}` would be listed as `{plain}`, the name of {owner}; it is listed as \
         `{renamed}` (rename the upstream in [[upstreams]] name to choose another)"
    );
}

/// Stable across runs and platforms (the std hasher promises neither).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Private extension trait: the MCP-safe name without `ToolName::mcp_name`'s cut at 64, so the
/// cut can carry a hash instead.
trait UntruncatedName {
    fn mcp_name_untruncated(&self) -> String;
}

impl UntruncatedName for ToolName {
    fn mcp_name_untruncated(&self) -> String {
        safe_name(&format!("{}_{}", self.provider, self.tool))
    }
}

/// `name` with every character MCP names do not allow as `_`.
fn safe_name(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect()
}

/// A declared output schema as served: for clients (see [`output_for_clients`]), and with the
/// fields response projection can delete — those of field groups left out by default — no longer
/// required. Size caps shorten arrays and strings but delete no field, so every other field the
/// provider promises stays promised. A top-level `additionalProperties: false` is dropped, so a
/// result without a structured value can still carry its note (see `server::to_call_result`).
pub fn promised_output_schema(declared: &Value, model: &quiver_core::ToolValueModel) -> Value {
    let mut schema = without_droppable_promises(output_for_clients(declared), model);
    if let Some(map) = schema.as_object_mut() {
        if map.get("additionalProperties") == Some(&Value::Bool(false)) {
            map.remove("additionalProperties");
        }
    }
    schema
}

/// `schema` no longer requiring the fields of `model`'s opt-in field groups, which projection
/// leaves out unless asked; everything else as it was.
pub fn without_droppable_promises(mut schema: Value, model: &quiver_core::ToolValueModel) -> Value {
    let droppable: Vec<&str> = model
        .field_groups
        .values()
        .filter(|group| !group.default_include)
        .flat_map(|group| group.fields.iter().map(String::as_str))
        .collect();
    if !droppable.is_empty() {
        quiver_core::client_schema::make_optional(&mut schema, &droppable);
    }
    schema
}

/// An output schema that promises no field: for schemas quiver inferred rather than a provider
/// declared — `required` is dropped at every depth.
/// A top-level `additionalProperties: false` is dropped too, so a result without a structured
/// value can still carry its note (see `server::to_call_result`).
pub fn relax_output_schema(mut schema: Value) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                // A property may itself be called `required`: only the keyword is an array.
                if map.get("required").is_some_and(Value::is_array) {
                    map.remove("required");
                }
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut schema);
    if let Some(map) = schema.as_object_mut() {
        if map.get("additionalProperties") == Some(&Value::Bool(false)) {
            map.remove("additionalProperties");
        }
    }
    schema
}

/// Declares `_confirm` in an input schema, so the model knows the argument exists.
fn add_confirm_property(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else { return };
    let properties = map.entry("properties").or_insert_with(|| Value::Object(Map::new()));
    if let Some(properties) = properties.as_object_mut() {
        properties.insert(
            "_confirm".into(),
            json!({
                "type": "boolean",
                "description": "Set to true, after the user agreed, to run this call; without it \
                                the call is refused with what it would do."
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_and_long_ones_get_a_stable_hash_suffix() {
        let long = "x".repeat(80);
        let names = plugins(vec![
            ToolName::new("github", "get_issue"),
            ToolName::new("my.corp", "get x"),
            ToolName::new("jira", &long),
        ]);
        let mcp = unique_mcp_names(&names);
        assert_eq!(mcp[0], "github_get_issue");
        assert_eq!(mcp[1], "my_corp_get_x");
        assert_eq!(mcp[2].len(), MAX_NAME_LEN);
        assert!(mcp[2].starts_with("jira_xxx"), "{}", mcp[2]);
        assert_eq!(unique_mcp_names(&names)[2], mcp[2], "the same on every run");
        let valid = |n: &str| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        assert!(mcp.iter().all(|n| valid(n) && !n.is_empty() && n.len() <= MAX_NAME_LEN));
    }

    #[test]
    fn two_tools_that_would_share_a_name_get_distinct_ones() {
        let names = plugins(vec![ToolName::new("a.b", "c"), ToolName::new("a_b", "c")]);
        let mcp = unique_mcp_names(&names);
        assert_ne!(mcp[0], mcp[1]);
        assert!(mcp.iter().all(|n| n.starts_with("a_b_c_")), "{mcp:?}");
    }

    fn plugins(names: Vec<ToolName>) -> Vec<(ToolName, NameOwner)> {
        names.into_iter().map(|n| (n, NameOwner::Plugin)).collect()
    }

    #[test]
    fn an_upstream_never_takes_a_plugins_name_or_quivers_own() {
        let names = vec![
            // Listed before the plugin's tool: order must not decide.
            (ToolName::new("github_get", "issue"), NameOwner::Upstream),
            (ToolName::new("github", "get_issue"), NameOwner::Plugin),
            (ToolName::new("call", "tool"), NameOwner::Upstream),
            (ToolName::new("find", "tools"), NameOwner::Upstream),
            (ToolName::new("load", "tools"), NameOwner::Upstream),
            (ToolName::new("fs", "read_file"), NameOwner::Upstream),
        ];
        let mcp = unique_mcp_names(&names);
        assert_eq!(mcp[1], "github_get_issue", "the plugin keeps its name");
        assert!(mcp[0].starts_with("github_get_issue_") && mcp[0].len() == 25, "{}", mcp[0]);
        for (i, own) in [(2, "call_tool"), (3, "find_tools"), (4, "load_tools")] {
            assert_ne!(mcp[i], own);
            assert!(mcp[i].starts_with(&format!("{own}_")), "{}", mcp[i]);
        }
        assert_eq!(mcp[5], "fs_read_file", "names nobody else has stay plain");
        assert_eq!(unique_mcp_names(&names), mcp, "the same on every run");
        let unique: std::collections::HashSet<&String> = mcp.iter().collect();
        assert_eq!(unique.len(), mcp.len(), "{mcp:?}");
    }

    #[test]
    fn relaxed_output_schemas_require_nothing() {
        let schema = json!({
            "type": "object",
            "required": ["number"],
            "additionalProperties": false,
            "properties": {"items": {"type": "array", "items": {"type": "object", "required": ["id"]}}}
        });
        let relaxed = relax_output_schema(schema);
        assert!(!relaxed.to_string().contains("required"), "{relaxed}");
        assert!(relaxed.get("additionalProperties").is_none());
        assert_eq!(relaxed["properties"]["items"]["type"], "array");
    }

    #[test]
    fn confirm_adds_the_argument_to_the_schema() {
        let mut schema = json!({"type": "object", "properties": {"title": {"type": "string"}}});
        add_confirm_property(&mut schema);
        assert_eq!(schema["properties"]["_confirm"]["type"], "boolean");
        assert_eq!(schema["properties"]["title"]["type"], "string");
    }
}
