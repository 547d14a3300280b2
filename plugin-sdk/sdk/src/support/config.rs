//! A provider's `[providers.NAME]` section read the same way by every provider: the host of
//! `base_url` (which names the rate-limit budget), a token or name that may be written blank, the
//! variable to name in messages, and the timeouts with their documented defaults.

use std::time::Duration;

use crate::ProviderError;

/// Seconds one request may take when `timeout_s` is unset.
pub const DEFAULT_TIMEOUT_S: u64 = 30;
/// Seconds a rate-limited call may wait when `max_retry_wait_s` is unset.
pub const DEFAULT_MAX_RETRY_WAIT_S: u64 = 10;

/// The host of a provider's `base_url`, which must be an http(s) URL with a host. `url` is what
/// is parsed (the provider may have normalised it), `written` what the message quotes;
/// `fix_not_url` ends the message for text that is no URL (`write e.g. https://…`),
/// `fix_no_host` the one for another scheme or no host (`e.g. https://…`).
///
/// ```
/// use quiver_plugin_sdk::support::config::base_url_host;
/// let fixes = ("write e.g. https://api.demo.io", "e.g. https://x.io");
/// let host = base_url_host("demo", "https://api.demo.io/v2", "https://api.demo.io/v2/", "", "");
/// assert_eq!(host.unwrap(), "api.demo.io");
/// let e = base_url_host("demo", "ftp://x", "ftp://x", fixes.0, fixes.1).unwrap_err();
/// assert_eq!(
///     e.to_string(),
///     "[providers.demo] base_url `ftp://x` must be an http(s) URL with a host, e.g. https://x.io"
/// );
/// ```
pub fn base_url_host(
    provider: &str,
    url: &str,
    written: &str,
    fix_not_url: &str,
    fix_no_host: &str,
) -> Result<String, ProviderError> {
    let parsed = url::Url::parse(url).map_err(|e| {
        ProviderError::new(format!(
            "[providers.{provider}] base_url `{written}` is not a URL ({e}); {fix_not_url}"
        ))
    })?;
    match (parsed.scheme(), parsed.host_str()) {
        ("http" | "https", Some(host)) => Ok(host.to_owned()),
        _ => Err(ProviderError::new(format!(
            "[providers.{provider}] base_url `{written}` must be an http(s) URL with a host, \
             {fix_no_host}"
        ))),
    }
}

/// A configured value (a token, an email), trimmed; `None` when unset or blank.
pub fn non_blank(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// The variable to name in messages about the token: the configured `token_env` unless blank,
/// else the provider's `default` (`GITHUB_TOKEN`).
pub fn token_env(configured: Option<String>, default: &str) -> String {
    configured.filter(|t| !t.trim().is_empty()).unwrap_or_else(|| default.to_owned())
}

/// `timeout_s` as a duration: [`DEFAULT_TIMEOUT_S`] when unset, at least a second.
pub fn timeout(timeout_s: Option<u64>) -> Duration {
    Duration::from_secs(timeout_s.unwrap_or(DEFAULT_TIMEOUT_S).max(1))
}

/// `max_retry_wait_s` as a duration: [`DEFAULT_MAX_RETRY_WAIT_S`] when unset (0 never waits).
pub fn max_retry_wait(max_retry_wait_s: Option<u64>) -> Duration {
    Duration::from_secs(max_retry_wait_s.unwrap_or(DEFAULT_MAX_RETRY_WAIT_S))
}

/// Megabytes a response body may have when `max_response_mb` is unset: far above any page of
/// results or CI log a model could use, far below what would exhaust the host.
pub const DEFAULT_MAX_RESPONSE_MB: u64 = 32;

/// The most bytes a response body may have: `max_response_mb` (at least 1) or the default.
pub fn max_response_bytes(max_response_mb: Option<u64>) -> u64 {
    max_response_mb.unwrap_or(DEFAULT_MAX_RESPONSE_MB).max(1).saturating_mul(1024 * 1024)
}

/// The PEM certificates of `ca_file` (`[providers.NAME] ca_file`, or the top-level `ca_file`
/// the host passes on), read when the provider starts so a wrong path is a start-up error that
/// names it, not a TLS failure on the first call. `None` when unset or blank.
///
/// ```
/// use quiver_plugin_sdk::support::config::ca_certificates;
/// let e = ca_certificates("demo", Some("/nonexistent/ca.pem")).unwrap_err();
/// assert!(e.to_string().starts_with("[providers.demo] ca_file `/nonexistent/ca.pem` cannot be read"));
/// assert!(ca_certificates("demo", Some(" ")).unwrap().is_none());
/// ```
pub fn ca_certificates(
    provider: &str,
    ca_file: Option<&str>,
) -> Result<Option<Vec<u8>>, ProviderError> {
    let Some(path) = ca_file.map(str::trim).filter(|p| !p.is_empty()) else { return Ok(None) };
    let pem = std::fs::read(path).map_err(|e| {
        ProviderError::new(format!(
            "[providers.{provider}] ca_file `{path}` cannot be read ({e}); point it at the PEM file \
             of the CA that signed the server's certificate"
        ))
    })?;
    if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
        return Err(ProviderError::new(format!(
            "[providers.{provider}] ca_file `{path}` holds no PEM certificate (no `-----BEGIN \
             CERTIFICATE-----`); export the CA certificate as PEM"
        )));
    }
    Ok(Some(pem))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_must_be_http_with_a_host_and_messages_quote_what_was_written() {
        let host = |url: &str| base_url_host("demo", url, url, "write e.g. A", "e.g. B");
        assert_eq!(host("https://api.demo.io").unwrap(), "api.demo.io");
        assert_eq!(host("http://localhost:8080/api/").unwrap(), "localhost");
        assert_eq!(
            host("api.demo.io").unwrap_err().to_string(),
            "[providers.demo] base_url `api.demo.io` is not a URL (relative URL without a base); \
             write e.g. A"
        );
        assert_eq!(
            host("file:///tmp/x").unwrap_err().to_string(),
            "[providers.demo] base_url `file:///tmp/x` must be an http(s) URL with a host, e.g. B"
        );
        let e = base_url_host("demo", "::", "what the user wrote", "", "").unwrap_err();
        assert!(e.to_string().contains("`what the user wrote`"), "{e}");
    }

    #[test]
    fn blank_values_are_unset_and_defaults_are_documented() {
        assert_eq!(non_blank(Some("  tok \n".into())).as_deref(), Some("tok"));
        assert_eq!(non_blank(Some("   ".into())), None);
        assert_eq!(non_blank(None), None);
        assert_eq!(token_env(Some("MY_TOKEN".into()), "DEMO_TOKEN"), "MY_TOKEN");
        assert_eq!(token_env(Some(" ".into()), "DEMO_TOKEN"), "DEMO_TOKEN");
        assert_eq!(token_env(None, "DEMO_TOKEN"), "DEMO_TOKEN");
        assert_eq!(timeout(None), Duration::from_secs(30));
        assert_eq!(timeout(Some(0)), Duration::from_secs(1));
        assert_eq!(timeout(Some(5)), Duration::from_secs(5));
        assert_eq!(max_retry_wait(None), Duration::from_secs(10));
        assert_eq!(max_retry_wait(Some(0)), Duration::ZERO);
    }
}
