//! HTTP conventions shared by web APIs: paths with encoded segments and queries, `Link` and
//! page-number pagination, rate-limit headers and how long to wait for them (within a budget),
//! error chains, timeouts, and messages that never carry a secret.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use quiver_core::tool::RateHeadroom;

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
    /// let limit = RateLimit::from_headers(jira_cloud, "x-ratelimit-reset", "x-left", "x-limit");
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

tokio::task_local! {
    /// The last rate headroom a response of the call in progress reported.
    static CALL_HEADROOM: std::cell::Cell<Option<RateHeadroom>>;
}

/// Notes what a response's rate-limit headers say is left, for the call in progress: the SDK
/// reports the last one noted in the result's metadata ([`RATE_HEADROOM_METADATA`]), and the
/// host's pre-fetching spends less of a window that is running out. Call it on every response
/// (not only the limited ones); without both `remaining` and `limit` it does nothing, and outside
/// a call (a provider's own tests) too.
///
/// [`RATE_HEADROOM_METADATA`]: quiver_core::tool::RATE_HEADROOM_METADATA
pub fn note_rate_headroom(limit: &RateLimit) {
    if let (Some(remaining), Some(limit)) = (limit.remaining, limit.limit) {
        let _ = CALL_HEADROOM.try_with(|cell| cell.set(Some(RateHeadroom { remaining, limit })));
    }
}

/// Runs `call` with a place for [`note_rate_headroom`], and returns what was noted last.
pub(crate) async fn with_rate_headroom<F: std::future::Future>(
    call: F,
) -> (F::Output, Option<RateHeadroom>) {
    let cell = std::cell::Cell::new(None);
    CALL_HEADROOM
        .scope(cell, async {
            let output = call.await;
            (output, CALL_HEADROOM.with(std::cell::Cell::get))
        })
        .await
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

/// How long one call may still wait out rate limits: at most `max_retries` waits, each no longer
/// than `max_wait` (`[providers.NAME] max_retry_wait_s`) and all before the call's deadline.
///
/// ```
/// use std::time::Duration;
/// use quiver_plugin_sdk::support::http::RetryBudget;
/// let mut budget = RetryBudget::new(Duration::from_secs(10), 2, None);
/// let three = Some(Duration::from_secs(3));
/// assert_eq!(budget.next_wait(three), three, "sleep, then send again");
/// assert_eq!(budget.next_wait(Some(Duration::from_secs(60))), None, "too long: give up");
/// assert_eq!(budget.waited(), Duration::from_secs(3));
/// assert_eq!(
///     budget.advice("demo", Some(Duration::from_secs(60))),
///     ": retry later, or raise [providers.demo] max_retry_wait_s"
/// );
/// ```
#[derive(Debug, Clone)]
pub struct RetryBudget {
    max_wait: Duration,
    max_retries: u32,
    deadline: Option<std::time::Instant>,
    retries: u32,
    waited: Duration,
}

impl RetryBudget {
    /// The budget of a call that starts now and must end within `timeout_ms` (the host's
    /// `ToolContext::timeout_ms`; `None` for no deadline).
    pub fn new(max_wait: Duration, max_retries: u32, timeout_ms: Option<u64>) -> Self {
        let deadline = timeout_ms.map(|ms| std::time::Instant::now() + Duration::from_millis(ms));
        Self { max_wait, max_retries, deadline, retries: 0, waited: Duration::ZERO }
    }

    /// What to do about a rate limit that asks to wait `wait` (`None`: it did not say): the wait
    /// to sleep before sending again, counted as spent, or `None` to give up now (see
    /// [`bounded_wait`]; also once `max_retries` waits were spent).
    pub fn next_wait(&mut self, wait: Option<Duration>) -> Option<Duration> {
        let w = bounded_wait(wait, self.max_wait, self.deadline)
            .filter(|_| self.retries < self.max_retries)?;
        self.retries += 1;
        self.waited += w;
        Some(w)
    }

    /// How long the call has waited out rate limits so far.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Whether giving up on `wait` was the deadline's doing: a retry was left and `wait` was
    /// within `max_wait`, so only the call's deadline stood in the way.
    pub fn past_deadline(&self, wait: Option<Duration>) -> bool {
        self.retries < self.max_retries && wait.is_some_and(|w| w <= self.max_wait)
    }

    /// The end of a rate-limit error after giving up on `wait`, naming the limit actually hit:
    /// `, past this call's deadline: retry later` when the deadline stood in the way; `, still
    /// limited after N retries: retry later` when the retries ran out (a service that keeps
    /// asking for 0 s, say); `, longer than [providers.NAME] max_retry_wait_s = N s allows: …`
    /// when the wait asked for was too long; `: retry later, or raise [providers.NAME]
    /// max_retry_wait_s` after waiting.
    pub fn advice(&self, provider: &str, wait: Option<Duration>) -> String {
        if self.past_deadline(wait) {
            ", past this call's deadline: retry later".to_owned()
        } else if wait.is_none() {
            // Nothing said how long: waiting longer would not have helped.
            ": retry later".to_owned()
        } else if self.retries >= self.max_retries && wait.is_some_and(|w| w <= self.max_wait) {
            format!(", still limited after {} retries: retry later", self.retries)
        } else if self.waited.is_zero() {
            format!(
                ", longer than [providers.{provider}] max_retry_wait_s = {} s allows: retry \
                 later, or raise max_retry_wait_s",
                self.max_wait.as_secs()
            )
        } else {
            format!(": retry later, or raise [providers.{provider}] max_retry_wait_s")
        }
    }
}

/// The service's own id of a request, from its answer's headers (`header` reads one by its
/// lowercase name): GitHub's `x-github-request-id`, Jira's `x-arequestid` or `atl-traceid`, else
/// the common `x-request-id` (GitLab and most others).
///
/// ```
/// use quiver_plugin_sdk::support::http::request_id;
///
/// let github = |name: &str| (name == "x-github-request-id").then_some("C3A8:1F2E:9A41B7");
/// assert_eq!(request_id(github), Some("C3A8:1F2E:9A41B7"));
/// assert_eq!(request_id(|_: &str| None), None);
/// ```
pub fn request_id<'h>(header: impl Fn(&str) -> Option<&'h str>) -> Option<&'h str> {
    ["x-github-request-id", "x-arequestid", "atl-traceid", "x-request-id"]
        .into_iter()
        .find_map(|name| header(name).map(str::trim).filter(|id| !id.is_empty()))
}

/// Notes the service's own id of a request ([`request_id`] of its answer's headers) on the
/// call's context, for the audit trail.
pub fn note_request_id<'h>(
    ctx: &quiver_core::tool::ToolContext,
    header: impl Fn(&str) -> Option<&'h str>,
) {
    if let Some(id) = request_id(header) {
        ctx.note_request_id(id);
    }
}

/// A path with the query pairs that have a value, form-encoded:
/// `/repos/o/r/issues?labels=bug%2Cui`; the path alone when none has.
///
/// ```
/// use quiver_plugin_sdk::support::http::path_and_query;
/// let query = [("labels", Some("bug,ui".to_owned())), ("since", None)];
/// assert_eq!(path_and_query("/repos/o/r/issues", &query), "/repos/o/r/issues?labels=bug%2Cui");
/// assert_eq!(path_and_query("/user", &[("page", None)]), "/user");
/// ```
pub fn path_and_query(path: &str, query: &[(&str, Option<String>)]) -> String {
    let mut serializer = url::form_urlencoded::Serializer::new(String::new());
    let mut any = false;
    for (key, value) in query {
        if let Some(value) = value {
            serializer.append_pair(key, value);
            any = true;
        }
    }
    if any {
        format!("{path}?{}", serializer.finish())
    } else {
        path.to_owned()
    }
}

/// Percent-encodes everything but the unreserved characters (`A-Z a-z 0-9 - . _ ~`), so the
/// value is one path segment: `acme/api` becomes `acme%2Fapi`, `ü` `%C3%BC`.
pub fn encode_component(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3 / 2);
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `per_page` (`default_per_page` when unset, within 1..=100) and `page` (1 when unset, at least
/// 1) as query pairs, for APIs paged GitHub's and GitLab's way.
pub fn page_query(
    page: Option<u32>,
    per_page: Option<u32>,
    default_per_page: u32,
) -> [(&'static str, Option<String>); 2] {
    [
        ("per_page", Some(per_page.unwrap_or(default_per_page).clamp(1, 100).to_string())),
        ("page", Some(page.unwrap_or(1).max(1).to_string())),
    ]
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

/// `message` with `secret` masked in every form a server may echo it in (raw, base64, percent-
/// encoded) and the value of every echoed credential header (`Authorization`, `PRIVATE-TOKEN`,
/// `Cookie`…) masked whole: for errors that quote what a server sent back.
pub fn mask_secret(message: String, secret: Option<&str>) -> String {
    mask_credential(message, secret, None)
}

/// [`mask_secret`] for Basic auth: `base64(user:secret)` is masked too.
pub fn mask_credential(message: String, secret: Option<&str>, user: Option<&str>) -> String {
    quiver_core::secrets::SecretMask::for_credential(secret, user).mask(&message)
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
    fn a_limit_that_keeps_asking_for_no_wait_names_the_retries_not_the_wait() {
        let mut budget = RetryBudget::new(Duration::from_secs(10), 2, None);
        let zero = Some(Duration::ZERO);
        assert_eq!(budget.next_wait(zero), zero);
        assert_eq!(budget.next_wait(zero), zero);
        assert_eq!(budget.next_wait(zero), None, "the retries ran out");
        assert_eq!(budget.advice("github", zero), ", still limited after 2 retries: retry later");
        let mut fresh = RetryBudget::new(Duration::from_secs(10), 2, None);
        let long = Some(Duration::from_secs(60));
        assert_eq!(fresh.next_wait(long), None);
        assert!(fresh.advice("github", long).contains("max_retry_wait_s = 10 s"), "too long");
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

    #[test]
    fn a_retry_budget_spends_its_waits_and_says_why_it_gave_up() {
        let s = Duration::from_secs;
        let mut budget = RetryBudget::new(s(10), 2, None);
        assert_eq!(budget.next_wait(None), None, "no wait said: give up");
        assert!(!budget.past_deadline(None));
        assert_eq!(
            budget.advice("demo", None),
            ": retry later",
            "no wait said: not the bound's fault"
        );
        assert_eq!(
            budget.advice("demo", Some(s(60))),
            ", longer than [providers.demo] max_retry_wait_s = 10 s allows: retry later, or raise \
             max_retry_wait_s"
        );
        assert_eq!(budget.next_wait(Some(s(2))), Some(s(2)));
        assert_eq!(budget.next_wait(Some(s(3))), Some(s(3)));
        assert_eq!(budget.waited(), s(5));
        assert_eq!(budget.next_wait(Some(s(1))), None, "two retries spent");
        assert!(!budget.past_deadline(Some(s(1))), "out of retries, not of time");
        assert_eq!(
            budget.advice("demo", Some(s(1))),
            ", still limited after 2 retries: retry later",
            "the retries ran out, not the wait allowed"
        );
        assert_eq!(
            budget.advice("demo", Some(s(60))),
            ": retry later, or raise [providers.demo] max_retry_wait_s",
            "after waiting, a wait longer than allowed"
        );

        let mut hurried = RetryBudget::new(s(10), 2, Some(1000));
        assert_eq!(hurried.next_wait(Some(s(5))), None, "past the deadline");
        assert!(hurried.past_deadline(Some(s(5))));
        assert!(!hurried.past_deadline(Some(s(11))), "too long anyway");
        assert_eq!(hurried.advice("demo", Some(s(5))), ", past this call's deadline: retry later");
        assert_eq!(hurried.waited(), Duration::ZERO);
    }

    #[test]
    fn paths_carry_encoded_queries_segments_and_pages() {
        let query = [("q", Some("a b&c".to_owned())), ("x", None), ("state", Some("open".into()))];
        assert_eq!(path_and_query("/search", &query), "/search?q=a+b%26c&state=open");
        assert_eq!(path_and_query("/search", &[]), "/search");
        assert_eq!(encode_component("src/a b.rs"), "src%2Fa%20b.rs");
        assert_eq!(encode_component("ü~-._"), "%C3%BC~-._");
        let pairs = |p, pp, d| page_query(p, pp, d).map(|(k, v)| format!("{k}={}", v.unwrap()));
        assert_eq!(pairs(None, None, 30), ["per_page=30", "page=1"]);
        assert_eq!(pairs(Some(0), Some(500), 20), ["per_page=100", "page=1"]);
        assert_eq!(pairs(Some(3), Some(0), 20), ["per_page=1", "page=3"]);
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
        let basic = "echo: Authorization: Basic bWVAeC5pbzp0b2tfMTIzNDU2Nzg=";
        assert_eq!(mask_secret(basic.into(), None), "echo: Authorization: ***");
        let bare = "echo bWVAeC5pbzp0b2tfMTIzNDU2Nzg= end";
        assert_eq!(
            mask_credential(bare.into(), Some("tok_12345678"), Some("me@x.io")),
            "echo *** end"
        );
        assert_eq!(
            set_token_hint("gitlab", "GL_TOKEN"),
            "set GL_TOKEN (the variable named by [providers.gitlab] token_env)"
        );
    }
}

/// The fix for a TLS failure whose error text names an untrusted certificate (`UnknownIssuer`,
/// a self-signed certificate…), to append to the message; `None` for any other failure.
///
/// ```
/// use quiver_plugin_sdk::support::http::tls_advice;
/// let advice = tls_advice("gitlab", "error sending request: invalid peer certificate: UnknownIssuer").unwrap();
/// assert!(advice.contains("ca_file") && advice.contains("[providers.gitlab]"));
/// assert!(tls_advice("gitlab", "connection refused").is_none());
/// ```
pub fn tls_advice(provider: &str, error: &str) -> Option<String> {
    let lower = error.to_ascii_lowercase();
    let untrusted = [
        "unknownissuer",
        "unknown issuer",
        "self-signed",
        "self signed",
        "certificate verify failed",
        "invalid peer certificate",
        "unable to get local issuer",
    ]
    .iter()
    .any(|needle| lower.contains(needle));
    untrusted.then(|| {
        format!(
            "; the server's certificate is signed by a CA this machine does not trust: set \
             `ca_file = \"/path/to/ca.pem\"` under [providers.{provider}] (or at the top of the \
             config, for every provider), or add the CA to the system store (SSL_CERT_FILE is \
             honoured too)"
        )
    })
}

/// The error text for a response body past `max_bytes` (`[providers.NAME] max_response_mb`).
pub fn too_large_message(provider: &str, what: &str, max_bytes: u64) -> String {
    format!(
        "{provider}'s answer for {what} is larger than [providers.{provider}] max_response_mb = {} \
         MB and was not read; ask for less (fewer per page, a narrower query) or raise \
         max_response_mb",
        max_bytes / (1024 * 1024)
    )
}

/// Whether an HTTP status is a passing fault a read may be retried on: 500, 502, 503, 504.
/// (429 and 403 rate limits have their own waits; other 4xx are answers.)
pub fn is_transient_status(status: u16) -> bool {
    matches!(status, 500 | 502 | 503 | 504)
}

/// Retries of idempotent reads after a passing fault (a 5xx, a refused or reset connection):
/// at most [`TransientRetries::MAX`], each after an exponentially growing, fully jittered pause
/// (so many clients that failed together do not retry together), and only while the pause ends
/// before the call's deadline. Writes never use it: a write that may have landed is not repeated.
///
/// ```
/// use quiver_plugin_sdk::support::http::TransientRetries;
/// let mut retries = TransientRetries::new(None);
/// let first = retries.next_pause().unwrap();
/// assert!(first <= TransientRetries::BASE);
/// assert!(retries.next_pause().is_some());
/// assert!(retries.next_pause().is_none(), "two retries, then the fault is reported");
/// assert_eq!(retries.attempts(), 3);
/// ```
#[derive(Debug, Clone)]
pub struct TransientRetries {
    deadline: Option<std::time::Instant>,
    retries: u32,
}

impl TransientRetries {
    /// Retries after the first attempt.
    pub const MAX: u32 = 2;
    /// The first pause's upper bound; each next one doubles it.
    pub const BASE: Duration = Duration::from_millis(250);

    /// For a call that must end within `timeout_ms` (`ToolContext::timeout_ms`).
    pub fn new(timeout_ms: Option<u64>) -> Self {
        let deadline = timeout_ms.map(|ms| std::time::Instant::now() + Duration::from_millis(ms));
        Self { deadline, retries: 0 }
    }

    /// The pause before the next attempt, or `None` when the retries are spent or the pause
    /// would end past the deadline.
    pub fn next_pause(&mut self) -> Option<Duration> {
        if self.retries >= Self::MAX {
            return None;
        }
        let cap = Self::BASE * 2u32.pow(self.retries);
        let pause = cap.mul_f64(fastrand::f64());
        if self.deadline.is_some_and(|d| std::time::Instant::now() + pause + Self::BASE >= d) {
            return None;
        }
        self.retries += 1;
        Some(pause)
    }

    /// Attempts made so far, the first included.
    pub fn attempts(&self) -> u32 {
        self.retries + 1
    }
}

/// A response body read chunk by chunk up to a limit, so a huge or endless body is refused once it
/// passes `max_bytes` instead of being buffered whole. Client-agnostic: the provider feeds it the
/// chunks its client yields.
///
/// ```
/// use quiver_plugin_sdk::support::http::BodyLimit;
/// let mut body = BodyLimit::new(8, None).unwrap();
/// assert!(body.push(b"12345").is_ok());
/// assert!(body.push(b"6789").is_err(), "9 bytes > 8");
/// assert!(BodyLimit::new(8, Some(100)).is_err(), "a declared length past the limit is refused unread");
/// assert_eq!(BodyLimit::new(8, Some(3)).unwrap().into_string(), "");
/// ```
#[derive(Debug)]
pub struct BodyLimit {
    max_bytes: u64,
    body: Vec<u8>,
}

/// A body past its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge;

impl BodyLimit {
    /// A reader for a body of at most `max_bytes`; refused at once when the response declares a
    /// `Content-Length` past it.
    pub fn new(max_bytes: u64, declared_length: Option<u64>) -> Result<Self, TooLarge> {
        if declared_length.is_some_and(|n| n > max_bytes) {
            return Err(TooLarge);
        }
        let capacity = declared_length.unwrap_or(0).min(max_bytes).min(1 << 20) as usize;
        Ok(Self { max_bytes, body: Vec::with_capacity(capacity) })
    }

    /// Adds the next chunk; `Err` once the body passes the limit.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), TooLarge> {
        if self.body.len() as u64 + chunk.len() as u64 > self.max_bytes {
            return Err(TooLarge);
        }
        self.body.extend_from_slice(chunk);
        Ok(())
    }

    /// The body as text (invalid UTF-8 replaced, as a lenient reader would).
    pub fn into_string(self) -> String {
        String::from_utf8(self.body)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}
