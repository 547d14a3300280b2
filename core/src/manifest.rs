//! What a plugin says about itself: the manifest it reports across the boundary.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::resource::ResourceTemplate;
use crate::tool::ToolSpec;

/// Something a plugin can do beyond serving its tools. An open set: a capability this host does
/// not know becomes [`Capability::Unknown`] and is ignored, so newer plugins load in older hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// Serves tool calls.
    Tools,
    /// Ships value-model layers for its tools.
    ValueModel,
    /// Builds follow-up arguments from previous results.
    ProjectArgs,
    /// Names the host whose rate limit a call spends.
    RateLimitHost,
    /// Serves resources, each read by one of its tools.
    Resources,
    /// A capability this host does not know.
    #[serde(other)]
    Unknown,
}

/// How a provider's creation error says it only lacks configuration (a required key nobody
/// set), as opposed to failing: the message starts with this. The host then shows the provider
/// as "not configured" with the message, which names the key.
pub const NOT_CONFIGURED: &str = "not configured: ";

/// A plugin's manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PluginManifest {
    /// The provider name that qualifies its tools (`github`).
    pub name: String,
    /// The provider's version.
    pub version: String,
    /// The `quiver-plugin-sdk` version it was built with.
    pub sdk_version: String,
    /// What it can do.
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// Its tools.
    pub tools: Vec<ToolSpec>,
    /// The resources it serves, each family read by one of its tools (none from older plugins).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceTemplate>,
    /// JSON schema of its `[providers.NAME]` configuration.
    #[serde(default)]
    pub config_schema: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_capabilities_are_tolerated() {
        let m: PluginManifest = serde_json::from_value(serde_json::json!({
            "name": "x", "version": "1", "sdk_version": "0.1.0",
            "capabilities": ["tools", "streaming_results"], "tools": []
        }))
        .unwrap();
        assert_eq!(m.capabilities, vec![Capability::Tools, Capability::Unknown]);
    }
}
