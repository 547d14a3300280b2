//! The registry of qualified tools: `github.get_issue` → the plugin's provider instance, or
//! `everything.echo` → the upstream MCP server, that serves it.

use std::collections::BTreeMap;
use std::sync::Arc;

use quiver_core::{ToolName, ToolSpec};

use crate::host::ProviderHandle;
use crate::upstream::Upstream;

/// What serves a tool.
#[derive(Clone)]
pub enum ToolOrigin {
    /// A plugin's provider instance.
    Plugin(Arc<ProviderHandle>),
    /// An upstream MCP server, with the annotations it declared for the tool (hints only).
    Upstream {
        /// The supervised client.
        upstream: Arc<Upstream>,
        /// `annotations` from its `tools/list`.
        annotations: Option<serde_json::Value>,
        /// Its whole definition from `tools/list`, as clients are shown it.
        declared: serde_json::Map<String, serde_json::Value>,
    },
}

/// A tool the host serves.
#[derive(Clone)]
pub struct RegisteredTool {
    /// Its qualified name.
    pub name: ToolName,
    /// Its spec as the provider declared it.
    pub spec: ToolSpec,
    /// What serves it.
    pub origin: ToolOrigin,
}

impl RegisteredTool {
    /// The plugin provider serving it, when a plugin does.
    pub fn plugin(&self) -> Option<&Arc<ProviderHandle>> {
        match &self.origin {
            ToolOrigin::Plugin(provider) => Some(provider),
            ToolOrigin::Upstream { .. } => None,
        }
    }

    /// Where it comes from, for `tools show`: a plugin file or an upstream's transport.
    pub fn served_by(&self) -> String {
        match &self.origin {
            ToolOrigin::Plugin(provider) => provider.path.display().to_string(),
            ToolOrigin::Upstream { upstream, .. } => {
                format!("upstream `{}` ({})", upstream.name(), upstream.config().transport())
            }
        }
    }
}

/// Why a provider's tools could not be registered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistryError {
    /// Occurs when a provider declares two tools with one name.
    #[error("provider `{provider}` declares tool `{tool}` twice; rename one of them")]
    DuplicateTool {
        /// The provider.
        provider: String,
        /// The tool name.
        tool: String,
    },
    /// Occurs when a tool name is empty or contains a dot (dots separate provider and tool).
    #[error("provider `{provider}` declares an invalid tool name `{tool}`: names are non-empty and have no dots")]
    InvalidName {
        /// The provider.
        provider: String,
        /// The tool name.
        tool: String,
    },
}

/// Tools by qualified name, and the providers that serve them.
#[derive(Default)]
pub struct Registry {
    tools: BTreeMap<String, Arc<RegisteredTool>>,
    providers: BTreeMap<String, Arc<ProviderHandle>>,
    resources: Vec<ProviderResource>,
}

/// A family of resources a provider serves, read by one of its tools.
#[derive(Debug, Clone)]
pub struct ProviderResource {
    /// The provider.
    pub provider: String,
    /// As the provider declared it.
    pub template: quiver_core::resource::ResourceTemplate,
    /// Its URI template, parsed.
    pub uri: quiver_core::resource::UriTemplate,
    /// The qualified name of the tool that reads one (`github.get_file_contents`).
    pub tool: String,
}

impl Registry {
    /// Registers every tool of `provider`; all or nothing. Returns how many.
    pub fn add_provider(
        &mut self,
        provider: Arc<ProviderHandle>,
        specs: &[ToolSpec],
    ) -> Result<usize, RegistryError> {
        let mut staged: BTreeMap<String, Arc<RegisteredTool>> = BTreeMap::new();
        for spec in specs {
            if spec.name.is_empty() || spec.name.contains('.') {
                return Err(RegistryError::InvalidName {
                    provider: provider.name.clone(),
                    tool: spec.name.clone(),
                });
            }
            let name = ToolName::new(provider.name.clone(), spec.name.clone());
            let tool = Arc::new(RegisteredTool {
                name: name.clone(),
                spec: spec.clone(),
                origin: ToolOrigin::Plugin(Arc::clone(&provider)),
            });
            if staged.insert(name.to_string(), tool).is_some() {
                return Err(RegistryError::DuplicateTool {
                    provider: provider.name.clone(),
                    tool: spec.name.clone(),
                });
            }
        }
        let count = staged.len();
        self.tools.extend(staged);
        self.providers.insert(provider.name.clone(), provider);
        Ok(count)
    }

    /// Adds the resource families of `provider` whose tool it serves (a provider's `groups` may
    /// leave the tool out); a template quiver cannot match is left out with a warning.
    pub fn add_resources(
        &mut self,
        provider: &str,
        templates: &[quiver_core::resource::ResourceTemplate],
    ) {
        for template in templates {
            let tool = format!("{provider}.{}", template.tool);
            if !self.tools.contains_key(&tool) {
                continue;
            }
            match quiver_core::resource::UriTemplate::parse(&template.uri_template) {
                Ok(uri) => self.resources.push(ProviderResource {
                    provider: provider.to_owned(),
                    template: template.clone(),
                    uri,
                    tool,
                }),
                Err(e) => tracing::warn!("provider `{provider}`'s resource left out: {e}"),
            }
        }
    }

    /// Every provider's resource families.
    pub fn resources(&self) -> &[ProviderResource] {
        &self.resources
    }

    /// The resource family `uri` belongs to, and its variables.
    pub fn resource_for(
        &self,
        uri: &str,
    ) -> Option<(&ProviderResource, serde_json::Map<String, serde_json::Value>)> {
        self.resources.iter().find_map(|r| r.uri.matches(uri).map(|vars| (r, vars)))
    }

    /// The provider of that name.
    pub fn provider(&self, name: &str) -> Option<&Arc<ProviderHandle>> {
        self.providers.get(name)
    }

    /// Every tool, sorted by qualified name.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<RegisteredTool>> {
        self.tools.values()
    }

    /// A tool by qualified name (`github.get_issue`) or by MCP name (`github_get_issue`).
    pub fn tool(&self, name: &str) -> Option<&Arc<RegisteredTool>> {
        self.tools.get(name).or_else(|| self.tools.values().find(|t| t.name.mcp_name() == name))
    }

    /// "no tool `x`" with the closest names, for errors.
    pub fn unknown_tool_message(&self, name: &str) -> String {
        let mut scored: Vec<(f64, &str)> = self
            .tools
            .keys()
            .map(|k| (strsim::normalized_damerau_levenshtein(name, k), k.as_str()))
            .filter(|(score, _)| *score > 0.8)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let suggestions: Vec<&str> = scored.into_iter().take(3).map(|(_, k)| k).collect();
        if !suggestions.is_empty() {
            return format!("no tool `{name}`; did you mean {}?", suggestions.join(", "));
        }
        // A known provider with an unknown tool: its tools are the useful list.
        let provider = ToolName::parse(name).map(|n| n.provider);
        let siblings: Vec<&str> = self
            .tools
            .values()
            .filter(|t| Some(&t.name.provider) == provider.as_ref())
            .map(|t| t.name.tool.as_str())
            .collect();
        match (provider, siblings.len()) {
            (Some(provider), 1..=12) => {
                format!("no tool `{name}`; provider `{provider}` has: {}", siblings.join(", "))
            }
            _ => format!("no tool `{name}`; `quiver tools list` shows the tools this host serves"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use abi_stable::sabi_trait::TD_Opaque;
    use abi_stable::std_types::{ROption, RResult, RStr, RString};
    use quiver_plugin_abi::{ProviderInstance, ProviderInstance_TO};
    use serde_json::json;

    use super::*;

    /// A provider instance that answers nothing; the registry only needs its name.
    struct Silent;

    impl ProviderInstance for Silent {
        fn call(
            &self,
            _: RStr<'_>,
            _: RStr<'_>,
            _: RStr<'_>,
            _: &AtomicBool,
        ) -> RResult<RString, RString> {
            RResult::RErr("silent".into())
        }
        fn value_model(&self, _: RStr<'_>) -> RResult<ROption<RString>, RString> {
            RResult::ROk(ROption::RNone)
        }
        fn project_args(&self, _: RStr<'_>, _: RStr<'_>, _: RStr<'_>) -> RResult<RString, RString> {
            RResult::ROk("[]".into())
        }
        fn rate_limit_host(&self, _: RStr<'_>, _: RStr<'_>) -> RResult<ROption<RString>, RString> {
            RResult::ROk(ROption::RNone)
        }
    }

    fn provider(name: &str) -> Arc<ProviderHandle> {
        Arc::new(ProviderHandle::new(
            name.to_owned(),
            format!("lib{name}.so").into(),
            ProviderInstance_TO::from_value(Silent, TD_Opaque),
        ))
    }

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.to_owned(),
            group: None,
            description: String::new(),
            input_schema: json!({"type": "object"}),
            output_schema: None,
            sensitive_params: Vec::new(),
        }
    }

    #[test]
    fn tools_are_qualified_and_found_by_either_name() {
        let mut registry = Registry::default();
        assert_eq!(
            registry.add_provider(provider("github"), &[spec("get_issue"), spec("list_issues")]),
            Ok(2)
        );
        assert_eq!(registry.tool("github.get_issue").unwrap().name.to_string(), "github.get_issue");
        assert_eq!(registry.tool("github_get_issue").unwrap().name.tool, "get_issue");
        assert!(registry.tool("get_issue").is_none());
        let names: Vec<String> = registry.tools().map(|t| t.name.to_string()).collect();
        assert_eq!(names, ["github.get_issue", "github.list_issues"]);
    }

    #[test]
    fn a_provider_declaring_a_name_twice_registers_nothing() {
        let mut registry = Registry::default();
        let err = registry
            .add_provider(provider("github"), &[spec("get_issue"), spec("get_issue")])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "provider `github` declares tool `get_issue` twice; rename one of them"
        );
        assert_eq!(registry.tools().count(), 0, "all or nothing");
        assert!(registry.provider("github").is_none());
    }

    #[test]
    fn dotted_or_empty_tool_names_are_refused() {
        let mut registry = Registry::default();
        let err = registry.add_provider(provider("github"), &[spec("issues.get")]).unwrap_err();
        assert!(matches!(err, RegistryError::InvalidName { .. }), "{err}");
        assert!(registry.add_provider(provider("github"), &[spec("")]).is_err());
    }

    #[test]
    fn unknown_names_get_the_closest_suggestions() {
        let mut registry = Registry::default();
        registry
            .add_provider(provider("github"), &[spec("get_issue"), spec("list_issues")])
            .unwrap();
        assert_eq!(
            registry.unknown_tool_message("github.get_isue"),
            "no tool `github.get_isue`; did you mean github.get_issue?"
        );
        assert_eq!(
            registry.unknown_tool_message("github.close"),
            "no tool `github.close`; provider `github` has: get_issue, list_issues"
        );
        assert!(registry.unknown_tool_message("jira.search").contains("quiver tools list"));
    }
}
