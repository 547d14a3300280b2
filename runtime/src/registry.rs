//! The registry of qualified tools: `github.get_issue` → the provider instance that serves it.

use std::collections::BTreeMap;
use std::sync::Arc;

use quiver_core::{ToolName, ToolSpec};

use crate::host::ProviderHandle;

/// A tool the host serves.
#[derive(Clone)]
pub struct RegisteredTool {
    /// Its qualified name.
    pub name: ToolName,
    /// Its spec as the provider declared it.
    pub spec: ToolSpec,
    /// The provider instance that serves it.
    pub provider: Arc<ProviderHandle>,
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
    tools: BTreeMap<String, RegisteredTool>,
    providers: BTreeMap<String, Arc<ProviderHandle>>,
}

impl Registry {
    /// Registers every tool of `provider`; all or nothing. Returns how many.
    pub fn add_provider(
        &mut self,
        provider: Arc<ProviderHandle>,
        specs: &[ToolSpec],
    ) -> Result<usize, RegistryError> {
        let mut staged: BTreeMap<String, RegisteredTool> = BTreeMap::new();
        for spec in specs {
            if spec.name.is_empty() || spec.name.contains('.') {
                return Err(RegistryError::InvalidName {
                    provider: provider.name.clone(),
                    tool: spec.name.clone(),
                });
            }
            let name = ToolName::new(provider.name.clone(), spec.name.clone());
            let tool = RegisteredTool {
                name: name.clone(),
                spec: spec.clone(),
                provider: Arc::clone(&provider),
            };
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

    /// The provider of that name.
    pub fn provider(&self, name: &str) -> Option<&Arc<ProviderHandle>> {
        self.providers.get(name)
    }

    /// Every tool, sorted by qualified name.
    pub fn tools(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.values()
    }

    /// A tool by qualified name (`github.get_issue`) or by MCP name (`github_get_issue`).
    pub fn tool(&self, name: &str) -> Option<&RegisteredTool> {
        self.tools.get(name).or_else(|| self.tools.values().find(|t| t.name.mcp_name() == name))
    }

    /// "no tool `x`" with the closest names, for errors.
    pub fn unknown_tool_message(&self, name: &str) -> String {
        let mut scored: Vec<(f64, &str)> = self
            .tools
            .keys()
            .map(|k| (strsim::jaro_winkler(name, k), k.as_str()))
            .filter(|(score, _)| *score > 0.8)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        let suggestions: Vec<&str> = scored.into_iter().take(3).map(|(_, k)| k).collect();
        if suggestions.is_empty() {
            format!("no tool `{name}`; `quiver tools list` shows the tools this host serves")
        } else {
            format!("no tool `{name}`; did you mean {}?", suggestions.join(", "))
        }
    }
}
