//! quiver as an OAuth client of an upstream MCP server (`[[upstreams]] auth = "oauth"`), as
//! the MCP authorization spec describes: the server's protected-resource metadata (RFC 9728,
//! found from its 401's `WWW-Authenticate`, else at the well-known paths), its authorization
//! server's metadata (RFC 8414, or OpenID discovery), PKCE with S256 (refused when the server
//! does not offer it), the `resource` indicator (RFC 8707) on every request, and dynamic client
//! registration (RFC 7591) when no client id is configured and the server offers it.
//!
//! What is discovered and registered becomes an [`crate::accounts::OAuthApp`]: the sign-in,
//! sealed storage and refresh of users' accounts then work for the upstream as for a provider.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

/// `[upstreams.oauth]`: a client registered by hand, instead of dynamic registration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOAuthConfig {
    /// The client id registered at the upstream's authorization server.
    #[serde(default)]
    pub client_id: Option<String>,
    /// The variable holding its secret (none: a public client).
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// Scopes to ask for (default: those the upstream's metadata names).
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
}

/// What an upstream's metadata says about signing in to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The resource (the upstream's canonical URL), sent as `resource` on every request.
    pub resource: String,
    /// The authorization server's endpoints.
    pub authorize_url: String,
    /// Its token endpoint.
    pub token_url: String,
    /// Its revocation endpoint, if any.
    pub revoke_url: Option<String>,
    /// Its registration endpoint, if it offers dynamic registration.
    pub registration_url: Option<String>,
    /// The scopes the resource names.
    pub scopes: Vec<String>,
}

/// An HTTP client for the OAuth requests quiver makes (discovery, registration, tokens, token
/// exchange): no redirects — an endpoint must answer itself, and a redirect could carry a code
/// or a token elsewhere — and bounded time.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(20))
        .user_agent(concat!("quiver/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}

/// Discovers how to sign in to the MCP server at `url`.
pub async fn discover(http: &reqwest::Client, url: &str) -> Result<Discovered, String> {
    let resource_metadata = protected_resource(http, url).await?;
    let issuer = resource_metadata
        .get("authorization_servers")
        .and_then(Value::as_array)
        .and_then(|servers| servers.first())
        .and_then(Value::as_str)
        .ok_or_else(|| {
            format!("{url}'s protected-resource metadata names no authorization server")
        })?
        .trim_end_matches('/')
        .to_owned();
    let metadata = authorization_server(http, &issuer).await?;
    let text = |key: &str| metadata.get(key).and_then(Value::as_str).map(str::to_owned);
    let pkce = metadata
        .get("code_challenge_methods_supported")
        .and_then(Value::as_array)
        .is_some_and(|methods| methods.iter().any(|m| m == "S256"));
    if !pkce {
        return Err(format!(
            "{issuer} does not offer PKCE with S256 (code_challenge_methods_supported), which \
             the MCP authorization spec requires; quiver does not sign in without it"
        ));
    }
    let scopes = resource_metadata
        .get("scopes_supported")
        .and_then(Value::as_array)
        .map(|s| s.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    Ok(Discovered {
        resource: resource_metadata
            .get("resource")
            .and_then(Value::as_str)
            .unwrap_or(url)
            .to_owned(),
        authorize_url: text("authorization_endpoint")
            .ok_or_else(|| format!("{issuer}'s metadata has no authorization_endpoint"))?,
        token_url: text("token_endpoint")
            .ok_or_else(|| format!("{issuer}'s metadata has no token_endpoint"))?,
        revoke_url: text("revocation_endpoint"),
        registration_url: text("registration_endpoint"),
        scopes,
    })
}

/// The protected-resource metadata of `url`: where its 401 says, else RFC 9728's well-known
/// path for the URL's path, else at the root.
async fn protected_resource(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    let origin = parsed.origin().ascii_serialization();
    let mut candidates = Vec::new();
    if let Ok(answer) = http.get(url).header("accept", "text/event-stream").send().await {
        let challenge = answer
            .headers()
            .get_all("www-authenticate")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| parameter(v, "resource_metadata"));
        candidates.extend(challenge);
    }
    let path = parsed.path().trim_end_matches('/');
    if !path.is_empty() {
        candidates.push(format!("{origin}/.well-known/oauth-protected-resource{path}"));
    }
    candidates.push(format!("{origin}/.well-known/oauth-protected-resource"));
    first_json(http, &candidates).await.ok_or_else(|| {
        format!(
            "{url} publishes no protected-resource metadata (RFC 9728; tried {}); it may not \
             use the MCP authorization spec — give it a token with bearer_env instead",
            candidates.join(", ")
        )
    })
}

/// The metadata of authorization server `issuer` (RFC 8414, else OpenID discovery; the
/// path-aware forms first).
async fn authorization_server(http: &reqwest::Client, issuer: &str) -> Result<Value, String> {
    let parsed = url::Url::parse(issuer).map_err(|e| format!("`{issuer}` is not a URL: {e}"))?;
    let origin = parsed.origin().ascii_serialization();
    let path = parsed.path().trim_end_matches('/');
    let candidates = if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    };
    first_json(http, &candidates).await.ok_or_else(|| {
        format!(
            "{issuer} publishes no authorization-server metadata (tried {})",
            candidates.join(", ")
        )
    })
}

/// The first of `urls` answering 200 with a JSON object.
async fn first_json(http: &reqwest::Client, urls: &[String]) -> Option<Value> {
    for url in urls {
        let Ok(answer) = http.get(url).header("accept", "application/json").send().await else {
            continue;
        };
        if !answer.status().is_success() {
            continue;
        }
        if let Ok(value @ Value::Object(_)) = answer.json::<Value>().await {
            return Some(value);
        }
    }
    None
}

/// The value of `name="…"` (or unquoted) in a `WWW-Authenticate` header.
fn parameter(header: &str, name: &str) -> Option<String> {
    let at = header.find(&format!("{name}="))?;
    let rest = &header[at + name.len() + 1..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split([',', ' ']).next()?,
    };
    (!value.is_empty()).then(|| value.to_owned())
}

/// Registers quiver as a public client (PKCE, no secret) redirecting to `redirect` (RFC 7591):
/// the client id, and a secret when the server issues one anyway.
pub async fn register(
    http: &reqwest::Client,
    registration_url: &str,
    redirect: &str,
    scopes: &[String],
) -> Result<(String, Option<String>), String> {
    let mut request = json!({
        "client_name": "quiver",
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if !scopes.is_empty() {
        request["scope"] = Value::String(scopes.join(" "));
    }
    let answer = http
        .post(registration_url)
        .json(&request)
        .send()
        .await
        .map_err(|e| format!("{registration_url} cannot be reached: {}", e.without_url()))?;
    let status = answer.status();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    let client_id = body.get("client_id").and_then(Value::as_str).filter(|_| status.is_success());
    let Some(client_id) = client_id else {
        let error = body.get("error").and_then(Value::as_str).unwrap_or("no client_id");
        return Err(format!(
            "{registration_url} did not register quiver ({status}: {error}); register a client \
             by hand and set [upstreams.oauth] client_id"
        ));
    };
    let secret = body.get("client_secret").and_then(Value::as_str).map(str::to_owned);
    if let Some(secret) = &secret {
        crate::logging::register_secret(secret);
    }
    Ok((client_id.to_owned(), secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_is_read_from_a_challenge() {
        let header = "Bearer error=\"invalid_token\", resource_metadata=\"https://x.test/.well-known/oauth-protected-resource/mcp\"";
        assert_eq!(
            parameter(header, "resource_metadata").as_deref(),
            Some("https://x.test/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(parameter("Bearer realm=mcp, scope=a", "realm").as_deref(), Some("mcp"));
        assert_eq!(parameter("Bearer", "resource_metadata"), None);
    }
}
