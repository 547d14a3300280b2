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
    /// How a user signs in to the service with OAuth (none from older plugins, or from a
    /// service without it): the host runs the flow, the provider only gets the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthEndpoints>,
}

/// A service's OAuth 2 endpoints, as its provider knows them for the public instance. Every URL
/// may name a `[providers.NAME]` setting in braces (`{base_url}/oauth/token`), filled from the
/// operator's section, else from `defaults`, so a self-hosted instance needs no new URLs; the
/// operator's `[providers.NAME.oauth]` may replace each.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct OAuthEndpoints {
    /// Where the user's browser is sent to agree (`https://github.com/login/oauth/authorize`).
    pub authorize_url: String,
    /// Where a code and a refresh token are exchanged for tokens.
    pub token_url: String,
    /// RFC 7009 revocation, when the service has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoke_url: Option<String>,
    /// Scopes asked for when the operator names none.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Who the token is for: a `GET` with the token, answered with JSON.
    pub identity_url: String,
    /// The JSON pointer into that answer naming the account (`/login`).
    pub identity_pointer: String,
    /// Settings the provider is created with when it calls with a token from this flow
    /// (`{"auth": "oauth"}` where OAuth tokens travel differently from personal ones).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub settings: serde_json::Map<String, Value>,
    /// Values for the braces in the URLs when the operator's section does not set them (the
    /// public instance: `{"base_url": "https://gitlab.com"}`).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub defaults: serde_json::Map<String, Value>,
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
