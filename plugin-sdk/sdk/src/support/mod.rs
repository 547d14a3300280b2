//! What every provider that talks to a web API needs, written once: cutting long text (and CI
//! logs) where a reader expects it, reading pagination and rate-limit headers, waiting out a rate
//! limit within a bound, retrying reads after passing faults, reading a body up to a limit, error
//! messages that name the fix (an untrusted CA among them) and never the token, lenient JSON,
//! the services' request ids, answers looked up once in a while (`remembered`), and the
//! `[providers.NAME]` settings every provider has (`base_url`, `token`, timeouts, `ca_file`,
//! `max_response_mb`).
//!
//! Nothing here depends on an HTTP client: headers are passed as a lookup function, so providers
//! on octocrab, reqwest or gouqi share the same rules.

pub mod config;
pub mod http;
pub mod json;
pub mod remembered;
pub mod text;
pub mod time;
