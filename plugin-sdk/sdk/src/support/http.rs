//! HTTP conventions shared by web APIs: `Link` pagination, rate-limit headers and how long to wait
//! for them, error chains, timeouts, and messages that never carry a secret.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::time::parse_timestamp_ms;

/// The page number of the `rel="next"` link among `Link` header values, if any.
///
/// ```
/// use quiver_plugin_sdk::support::http::next_page;
/// let link = r#"<https://api.github.com/repos/o/r/issues?page=3&per_page=2>; rel="next", <https://api.github.com/repos/o/r/issues?page=9>; rel="last""#;
/// assert_eq!(next_page([link]), Some(3));
/// assert_eq!(next_page([r#"<https://x/?page=1>; rel="prev""#]), None);
/// ```
pub fn next_page<'a>(link_values: impl IntoIterator<Item = &'a str>) -> Option<u32> {
    next_link(link_values).and_then(|url| {
        let url = url::Url::parse(&url)
            .or_else(|_| url::Url::parse("http://localhost").and_then(|b| b.join(&url)))
            .ok()?;
        let page = url.query_pairs().find(|(k, _)| k == "page")?.1.parse().ok();
        page
    })
}

/// The URL of the `rel="next"` link among `Link` header values, if any.
pub fn next_link<'a>(link_values: impl IntoIterator<Item = &'a str>) -> Option<String> {
    link_values.into_iter().find_map(|value| {
        // `<url>; rel="next", <url>; rel="last"`: split at `<`, since URLs may hold commas.
        value.split('<').skip(1).find_map(|part| {
            let (url, params) = part.split_once('>')?;
            let is_next = params
                .split([';', ','])
                .map(str::trim)
                .any(|p| p == "rel=\"next\"" || p == "rel=next");
            is_next.then(|| url.to_owned())
        })
    })
}

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// `2024-05-06T12:53:20Z` for a Unix time.
pub fn format_unix_time(epoch: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(epoch)).to_string()
}

/// `42 s`, `17 min`, `3 h 5 min`: durations as a person reads them in an error message.
pub fn human_duration(d: Duration) -> String {
    match d.as_secs() {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s.div_ceil(60)),
        s => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// What a response says about a rate limit, from its headers. Services spell it differently
/// (`retry-after`; `x-ratelimit-reset` as Unix seconds on GitHub and ClickUp, as an ISO 8601 time
/// on Jira Cloud; `ratelimit-reset` on GitLab), so each field is read from the names a provider
/// passes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateLimit {
    /// `Retry-After`: wait this long (seconds, or an HTTP date turned into seconds from now).
    pub retry_after: Option<Duration>,
    /// When the window resets, as a Unix time.
    pub reset_at: Option<u64>,
    /// Requests left in the window.
    pub remaining: Option<u64>,
    /// Requests per window.
    pub limit: Option<u64>,
}

impl RateLimit {
    /// Reads `Retry-After` plus the given reset/remaining/limit header names through `header`
    /// (a case-insensitive lookup into the response's headers). The reset time may be Unix
    /// seconds or a date (see [`parse_reset_time`]).
    ///
    /// ```
    /// use quiver_plugin_sdk::support::http::RateLimit;
    /// let jira_cloud = |name: &str| (name == "x-ratelimit-reset").then_some("2024-05-06T12:53Z");
    /// let limit = RateLimit::from_headers(jira_cloud, "x-ratelimit-reset", "x-remaining", "x-limit");
    /// assert_eq!(limit.reset_at, Some(1_714_999_980));
    /// ```
    pub fn from_headers<'h>(
        header: impl Fn(&str) -> Option<&'h str>,
        reset: &str,
        remaining: &str,
        limit: &str,
    ) -> Self {
        let number = |name: &str| header(name).and_then(|v| v.trim().parse::<u64>().ok());
        let retry_after =
            header("retry-after").and_then(|v| parse_retry_after(v, SystemTime::now()));
        Self {
            retry_after,
            reset_at: header(reset).and_then(parse_reset_time),
            remaining: number(remaining),
            limit: number(limit),
        }
    }

    /// How long to wait before the next attempt: `Retry-After`, else until the reset time (at
    /// least a second); `None` when the response said neither.
    pub fn wait(&self, now: u64) -> Option<Duration> {
        self.retry_after.or_else(|| {
            self.reset_at.map(|reset| Duration::from_secs(reset.saturating_sub(now).max(1)))
        })
    }
}

/// A rate limit's reset time as Unix seconds: sent as Unix seconds (`1715000000`: GitHub, GitLab,
/// ClickUp) or as an ISO 8601 / RFC 3339 time (`2024-06-01T12:31Z`, `…:05.123Z`, `…+0200`,
/// `…-02:00`: Jira Cloud), read by [`parse_timestamp_ms`] and rounded down to the second. `None`
/// for anything else, or a time before 1970.
pub fn parse_reset_time(value: &str) -> Option<u64> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(seconds);
    }
    let ms = parse_timestamp_ms(value).ok()?;
    u64::try_from(ms.div_euclid(1000)).ok()
}

/// `Retry-After` as seconds (`120`) or as an HTTP date (`Wed, 21 Oct 2015 07:28:00 GMT`).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Whether to wait out a rate limit: the wait, if it fits within `max_wait` and before the call's
/// `deadline`; `None` means give up now and say when to retry.
pub fn bounded_wait(
    wait: Option<Duration>,
    max_wait: Duration,
    deadline: Option<std::time::Instant>,
) -> Option<Duration> {
    let wait = wait?;
    let fits_deadline = deadline.is_none_or(|d| std::time::Instant::now() + wait < d);
    (wait <= max_wait && fits_deadline).then_some(wait)
}

/// An error and all its sources, `outer: inner: innermost`, without repeats.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// Whether an error, or any of its sources, is an I/O timeout.
pub fn is_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(e);
    while let Some(err) = current {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::TimedOut {
                return true;
            }
        }
        current = err.source();
    }
    false
}

/// `message` with every occurrence of `secret` replaced by `***`: for errors that quote what a
/// server echoed back.
pub fn mask_secret(message: String, secret: Option<&str>) -> String {
    match secret {
        Some(secret) if !secret.is_empty() && message.contains(secret) => {
            message.replace(secret, "***")
        }
        _ => message,
    }
}

/// "set GITLAB_TOKEN (the variable named by [providers.gitlab] token_env)": how to fix a missing
/// or rejected token, naming the variable the user configured.
pub fn set_token_hint(provider: &str, token_env: &str) -> String {
    format!("set {token_env} (the variable named by [providers.{provider}] token_env)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_link_handles_commas_in_urls_and_unquoted_rel() {
        let v = "<https://x/api?q=a,b&page=2>; rel=next, <https://x/api?page=5>; rel=\"last\"";
        assert_eq!(next_link([v]).as_deref(), Some("https://x/api?q=a,b&page=2"));
        assert_eq!(next_page([v]), Some(2));
        assert_eq!(next_page(["<https://x/?page=4>; rel=\"last\""]), None);
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(1_445_412_470);
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn waits_come_from_retry_after_else_the_reset_time_and_respect_bounds() {
        let headers = |name: &str| match name {
            "x-ratelimit-reset" => Some("1000"),
            "x-ratelimit-remaining" => Some("0"),
            _ => None,
        };
        let limit = RateLimit::from_headers(
            headers,
            "x-ratelimit-reset",
            "x-ratelimit-remaining",
            "x-ratelimit-limit",
        );
        assert_eq!(limit.remaining, Some(0));
        assert_eq!(limit.wait(990), Some(Duration::from_secs(10)));
        assert_eq!(
            limit.wait(2000),
            Some(Duration::from_secs(1)),
            "a past reset still waits a second"
        );
        let ten = Some(Duration::from_secs(10));
        assert_eq!(bounded_wait(ten, Duration::from_secs(30), None), ten);
        assert_eq!(bounded_wait(ten, Duration::from_secs(5), None), None);
        let soon = std::time::Instant::now() + Duration::from_secs(2);
        assert_eq!(
            bounded_wait(ten, Duration::from_secs(30), Some(soon)),
            None,
            "past the deadline"
        );
    }

    /// The cases of the ISO 8601 parser Jira's client had for Cloud's `X-RateLimit-Reset`.
    #[test]
    fn reset_times_are_unix_seconds_or_iso_8601() {
        assert_eq!(parse_reset_time("1970-01-01T00:00Z"), Some(0));
        assert_eq!(parse_reset_time("2024-05-06T12:53Z"), Some(1_715_000_000 - 20));
        assert_eq!(parse_reset_time("2024-05-06T12:53:20.511Z"), Some(1_715_000_000));
        assert_eq!(parse_reset_time("2024-05-06T14:53:20+0200"), Some(1_715_000_000));
        assert_eq!(parse_reset_time("2024-05-06T10:53:20-02:00"), Some(1_715_000_000));
        // Jira's ISO parser refused digits, which the header reading took as Unix seconds first.
        assert_eq!(parse_reset_time("1715000000"), Some(1_715_000_000));
        assert_eq!(parse_reset_time(" 1000 "), Some(1000));
        assert_eq!(parse_reset_time("2024-13-06T10:53Z"), None);
        assert_eq!(parse_reset_time("1969-12-31T23:59:59Z"), None, "before 1970");
        assert_eq!(parse_reset_time("soon"), None);

        let cloud = |name: &str| match name {
            "x-ratelimit-reset" => Some("2024-05-06T12:53Z"),
            "retry-after" => None,
            _ => Some("0"),
        };
        let limit = RateLimit::from_headers(cloud, "x-ratelimit-reset", "x-r", "x-l");
        assert_eq!(limit.reset_at, Some(1_714_999_980));
        assert_eq!(limit.wait(1_714_999_970), Some(Duration::from_secs(10)));
    }

    #[test]
    fn messages_are_human_and_never_carry_the_secret() {
        assert_eq!(human_duration(Duration::from_secs(42)), "42 s");
        assert_eq!(human_duration(Duration::from_secs(1000)), "17 min");
        assert_eq!(human_duration(Duration::from_secs(11_100)), "3 h 5 min");
        assert_eq!(format_unix_time(1_715_000_000), "2024-05-06T12:53:20Z");
        assert_eq!(mask_secret("bad token tok_123".into(), Some("tok_123")), "bad token ***");
        assert_eq!(
            set_token_hint("gitlab", "GL_TOKEN"),
            "set GL_TOKEN (the variable named by [providers.gitlab] token_env)"
        );
    }
}
