//! quiver as an OAuth 2.1 resource server, as the MCP authorization spec asks: access tokens
//! are JWTs from the configured authorization server, checked for signature (RS256 or ES256,
//! against the issuer's JWKS), `iss`, `aud` (this server's resource URL), `exp` and `nbf`.
//!
//! The JWKS comes from `jwks_url` or, by default, from the `jwks_uri` of the issuer's metadata
//! (`/.well-known/oauth-authorization-server`, then `/.well-known/openid-configuration`). Keys
//! are cached and fetched again when a token names an unknown `kid` (at most every
//! [`REFRESH_EVERY`], so a stream of forged `kid`s cannot hammer the issuer). A client's token
//! is only checked, never passed on to a provider or an upstream.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use quiver_runtime::config::OAuthConfig;
use serde_json::Value;
use tokio::sync::Mutex;

/// Shortest time between two JWKS fetches.
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY_S: u64 = 30;

/// Verifies access tokens of one authorization server.
pub struct OAuth {
    config: OAuthConfig,
    http: reqwest::Client,
    keys: Mutex<Keys>,
}

#[derive(Default)]
struct Keys {
    by_kid: HashMap<String, (DecodingKey, Algorithm)>,
    fetched: Option<Instant>,
}

impl OAuth {
    /// A verifier for `config`; nothing is fetched until the first token.
    pub fn new(config: OAuthConfig) -> Self {
        let http =
            reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap_or_default();
        Self { config, http, keys: Mutex::new(Keys::default()) }
    }

    /// The authorization server, for the protected-resource metadata.
    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    /// The user a valid token names (its `user_claim`), or why it is refused.
    pub async fn verify(&self, token: &str) -> Result<String, String> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| format!("not a JWT: {e}"))?;
        if !matches!(header.alg, Algorithm::RS256 | Algorithm::ES256) {
            return Err(format!("algorithm {:?} is not accepted (RS256, ES256)", header.alg));
        }
        let kid = header.kid.unwrap_or_default();
        let (key, alg) = self.key(&kid).await?;
        if alg != header.alg {
            return Err(format!("key `{kid}` is for {alg:?}, the token says {:?}", header.alg));
        }
        let mut validation = Validation::new(alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_S;
        let data = jsonwebtoken::decode::<Value>(token, &key, &validation)
            .map_err(|e| format!("token refused: {e}"))?;
        data.claims
            .get(&self.config.user_claim)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("the token has no `{}` claim", self.config.user_claim))
    }

    /// The key of `kid`, fetching the JWKS when it is unknown (and not fetched just now).
    async fn key(&self, kid: &str) -> Result<(DecodingKey, Algorithm), String> {
        let mut keys = self.keys.lock().await;
        if let Some(found) = keys.by_kid.get(kid) {
            return Ok(found.clone());
        }
        if keys.fetched.is_some_and(|at| at.elapsed() < REFRESH_EVERY) {
            return Err(format!("no signing key `{kid}` at the issuer"));
        }
        keys.fetched = Some(Instant::now());
        keys.by_kid = self.fetch().await?;
        keys.by_kid.get(kid).cloned().ok_or_else(|| format!("no signing key `{kid}` at the issuer"))
    }

    async fn fetch(&self) -> Result<HashMap<String, (DecodingKey, Algorithm)>, String> {
        let url = match &self.config.jwks_url {
            Some(url) => url.clone(),
            None => self.discover_jwks_url().await?,
        };
        let set: JwkSet = self
            .http
            .get(&url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| format!("cannot fetch the JWKS at {url}: {e}"))?
            .json()
            .await
            .map_err(|e| format!("the JWKS at {url} is not a JWK set: {e}"))?;
        let mut out = HashMap::new();
        for jwk in &set.keys {
            let Some(kid) = jwk.common.key_id.clone() else { continue };
            let alg = match &jwk.algorithm {
                jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => Algorithm::RS256,
                jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(_) => Algorithm::ES256,
                _ => continue,
            };
            match DecodingKey::from_jwk(jwk) {
                Ok(key) => {
                    out.insert(kid, (key, alg));
                }
                Err(e) => tracing::warn!("skipping JWKS key `{kid}`: {e}"),
            }
        }
        Ok(out)
    }

    /// `jwks_uri` from the issuer's authorization-server (RFC 8414) or OpenID metadata.
    async fn discover_jwks_url(&self) -> Result<String, String> {
        let issuer = self.config.issuer.trim_end_matches('/');
        for well_known in ["oauth-authorization-server", "openid-configuration"] {
            let url = format!("{issuer}/.well-known/{well_known}");
            let Ok(response) = self.http.get(&url).send().await else { continue };
            let Ok(metadata) = response.error_for_status().map(|r| r.json::<Value>()) else {
                continue;
            };
            if let Some(jwks) =
                metadata.await.ok().and_then(|m| m["jwks_uri"].as_str().map(str::to_owned))
            {
                return Ok(jwks);
            }
        }
        Err(format!(
            "cannot find the issuer's keys: no jwks_uri at {issuer}/.well-known/…; set \
             [serve.http.oauth] jwks_url"
        ))
    }
}
