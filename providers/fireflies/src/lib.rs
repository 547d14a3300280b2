//! The Fireflies.ai provider of quiver: meeting transcripts — their summaries, action items,
//! keywords, participants and, when asked, the spoken sentences —, the team's users, soundbites,
//! AI app outputs, and uploads of recordings to transcribe, from Fireflies' GraphQL API, as tools
//! an agent can afford.
//!
//! # Tools
//! Each tool belongs to a group (`[providers.fireflies] groups = [...]` serves only those). One
//! writes: `upload_audio`, which only adds a meeting (annotated non-destructive); the rest read.
//!
//! `transcripts`:
//! - `list_transcripts`: meetings newest first, filtered by date range, participant or organizer
//!   emails, or the key owner's own meetings; `limit` (20 by default, at most 50) and `skip`
//!   paginate, and the result says whether `more` may exist and the `next_skip` to ask for.
//! - `search_transcripts`: meetings whose title and/or spoken words contain a keyword (Fireflies'
//!   `keyword` and `scope` arguments; `scope` is `all` by default), paginated the same way.
//! - `get_transcript`: one meeting by `id` with its overview, action items (parsed into owner and
//!   item), keywords, outline, participants and speakers. The sentences are a separate field group
//!   that is neither fetched nor returned unless the call asks for `include_sentences: true`, and
//!   then at most `max_sentences` (300 by default) within 64 KiB, with `sentences_from` to read on.
//! - `upload_audio` (the `uploadAudio` mutation): a public https URL of an mp3, mp4, wav, m4a or
//!   ogg file and a title, optionally the language, attendees (blank fields left out, as Fireflies
//!   validates a present email), a webhook and a client reference id. Fireflies queues it and
//!   answers at once; the transcript shows up in `list_transcripts` when processed.
//!
//! `users`:
//! - `list_users`: the members of the API key's team with id, name, email, admin role,
//!   transcripts and minutes used.
//! - `get_user`: one user by `user_id`, or the key's owner without it, with integrations and
//!   user groups.
//!
//! `soundbites`:
//! - `list_soundbites` (Fireflies' `bites`): the key owner's clips by default (Fireflies needs one
//!   of `mine`, `my_team`, `transcript_id`), the team's, or one meeting's; paged like transcripts.
//! - `get_soundbite`: one clip with what was said in it as `[mm:ss] Speaker: text` lines.
//!
//! `ai_apps`:
//! - `list_app_outputs`: what AI apps answered on a meeting or for one app, 10 a page (Fireflies'
//!   cap), with `more` and `next_skip`.
//!
//! Every listing item carries the id the next tool takes (`id`, `transcript_id`, `user_id`,
//! `app_id`), and the details echo them, so a follow-up call can be built from a result alone.
//!
//! # Configuration
//! `[providers.fireflies]` in quiver.toml; unknown keys are errors, so a typo is reported:
//!
//! - `base_url` (default `https://api.fireflies.ai/graphql`): the GraphQL endpoint every query is
//!   POSTed to (a proxy or a test server may stand in for it).
//! - `token` (none): filled in by the host from the variable `token_env` names. Without one,
//!   every call fails at once, naming the variable to set; that is not an error at start-up.
//! - `token_env` (`FIREFLIES_API_KEY` when unset; the host always sends the name it read): the
//!   variable the user keeps the API key in; used only to say what to set.
//! - `timeout_s` (30): how long one request may take.
//! - `max_retry_wait_s` (10): the longest a rate-limited call waits (for `Retry-After` or the
//!   `retryAfter` Fireflies puts in an error's `extensions`) before giving up with `rate_limited`.
//! - `ca_file` (none; the top-level `ca_file` when set): a PEM file of the CA that signed the
//!   endpoint's certificate (a proxy behind a private CA), trusted besides the system store and
//!   the bundled web roots (`SSL_CERT_FILE` is honoured too).
//! - `max_response_mb` (32): a response body past this is refused, never read whole.
//!
//! Every GraphQL operation is a POST; reads are told apart by the document: queries are retried
//! twice after a 500/502/503/504 or a connection that failed, with jittered pauses inside the
//! call's deadline; mutations (`upload_audio`) never are.
//!
//! ```toml
//! [providers.fireflies]
//! token_env = "FIREFLIES_API_KEY"
//! max_retry_wait_s = 20
//! ```
//!
//! # How responses were chosen
//! A GraphQL query names its fields, so the provider asks only for what it returns: listings
//! select `id title date dateString duration organizer_email participants summary { gist }`;
//! `get_transcript` adds `host_email transcript_url speakers { name }` and
//! `summary { overview action_items keywords outline }`, plus
//! `sentences { index speaker_name text start_time }` only when sentences are asked for — a full
//! transcript is easily 100 KiB and most questions are answered by the summary. Not asked for:
//! audio and video URLs, analytics, AI filters, calendar ids, attendee phone numbers. Users are
//! read without their groups' member lists; soundbites without thumbnails, previews, media
//! sources or the creator's picture, and captions only on `get_soundbite`; app outputs without
//! the owner's user id. Results are then made compact for a model:
//! - dates as one ISO 8601 string (`dateString`, else the millisecond `date` converted),
//!   durations as `duration_min` with one decimal;
//! - participants split (Fireflies sometimes sends `"a@x.com,b@y.com"` as one entry), deduplicated
//!   and capped (20 in listings, 50 in a transcript, with `participants_total` when cut);
//! - action items, which Fireflies sends as one Markdown string (`**Owner**\nItem (03:14)`), as a
//!   list of `{owner, item}`;
//! - the overview and outline cut at 8 KiB, each sentence at 1 KiB, saying so; sentences as
//!   `[mm:ss] Speaker: text` lines, which cost a fraction of one object per sentence;
//! - a soundbite's place in its meeting as one `[03:14]-[04:01]` span, its summary cut at 1 KiB,
//!   its captions as lines (the first 200); app responses cut at 8 KiB, prompts at 512 bytes.
//!
//! Field names and argument types follow Fireflies' documented schema; where the documentation
//! and the live schema disagree, the live schema wins: `scope` is sent as a `String` with the
//! lowercase values `title`/`sentences`/`all`, email lists as `[String!]`, and the `apps`
//! query's `skip` and `limit` as `Float`, as Fireflies' own clients declare them.
//!
//! # Errors
//! Fireflies reports most failures as GraphQL `errors` entries (`{"message", "code",
//! "extensions": {"code", "status", "metadata"}}`), with HTTP 200 or a 4xx; both are read. Every
//! failure is a `ToolError` whose message says what to do and never contains the key:
//! `auth_failed`/`invalid_api_key`/401 are `unauthorized` and name the variable to set
//! (`token_env`), as does a call without a key; `forbidden`, `require_elevated_privilege`,
//! `not_in_team`, `paid_required`, `account_cancelled`/403 are `unauthorized` and say which;
//! `object_not_found`/404 is `not_found` naming the transcript; `invalid_arguments`/`args_required`
//! are `invalid_arguments` with Fireflies' per-field messages; `too_many_requests`/429 is waited
//! out up to `max_retry_wait_s` (twice at most, within the call's deadline), else reported as
//! `rate_limited` with when to retry; 5xx (once a query's retries are spent), schema mismatches,
//! unreadable bodies and bodies past `max_response_mb` are `upstream`, and an untrusted
//! certificate names `ca_file`; a request slower than `timeout_s` is `timeout`.
//!
//! # Value models
//! [`ToolEnricher`] gives every tool a value model: the reads are `read_only` (`get_transcript`
//! has a `summary` field group included by default and a `sentences` group that is not);
//! `upload_audio` is `mutates_external`, never speculated nor cached, and invalidates the
//! transcript listings and searches. Follow-up links: `list_transcripts`/`search_transcripts` →
//! `get_transcript` (projecting the first transcript ids), `get_transcript` → `get_transcript`
//! with `include_sentences` (or the next `sentences_from`), `list_soundbites` → `get_soundbite`
//! (ready clips first) → `get_transcript`, `list_app_outputs` → `get_transcript` (each meeting
//! once), `list_users` → `get_user` (members before admins) → `list_transcripts` (the user's
//! email as `participants`). Cache lifetimes are long (a processed transcript rarely changes,
//! users even less, and Fireflies' daily quotas are small), and the configured endpoint's host is
//! the rate-limit host.
//!
//! **Architecture Invariant**: this crate depends on `quiver-plugin-sdk` and `reqwest` (its HTTP
//! client) and never on `quiver-runtime`.

mod apps;
mod client;
mod enricher;
mod soundbites;
mod transcripts;
mod upload;
mod users;

use std::fmt;

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::config::{
    base_url_host, ca_certificates, max_response_bytes, max_retry_wait, non_blank, timeout,
    token_env,
};

use crate::client::{Client, ClientSettings};

/// The default GraphQL endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.fireflies.ai/graphql";
/// The variable named in messages when `token_env` is not configured.
pub const DEFAULT_TOKEN_ENV: &str = "FIREFLIES_API_KEY";

/// The Fireflies provider: one reqwest client for the configured GraphQL endpoint.
pub struct Fireflies {
    client: Client,
    host: String,
}

/// `[providers.fireflies]` in quiver.toml.
#[derive(Clone, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct FirefliesConfig {
    /// The GraphQL endpoint: `https://api.fireflies.ai/graphql` when unset.
    pub base_url: Option<String>,
    /// The API key (filled in by the host from the variable named by `token_env`); without one,
    /// calls fail saying which variable to set.
    pub token: Option<String>,
    /// The name of the variable the key comes from ("FIREFLIES_API_KEY" when unset); used only
    /// to tell the user what to set.
    pub token_env: Option<String>,
    /// Seconds one request may take (30 when unset).
    pub timeout_s: Option<u64>,
    /// The longest a rate-limited call waits before giving up, in seconds (10 when unset).
    pub max_retry_wait_s: Option<u64>,
    /// A PEM file of the CA that signed the endpoint's certificate (a private CA, e.g. of a
    /// proxy), trusted besides the system store and the bundled web roots.
    pub ca_file: Option<String>,
    /// The largest response body read, in MB (32 when unset).
    pub max_response_mb: Option<u64>,
}

impl fmt::Debug for FirefliesConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FirefliesConfig")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("token_env", &self.token_env)
            .field("timeout_s", &self.timeout_s)
            .field("max_retry_wait_s", &self.max_retry_wait_s)
            .field("ca_file", &self.ca_file)
            .field("max_response_mb", &self.max_response_mb)
            .finish()
    }
}

impl Provider for Fireflies {
    const NAME: &'static str = "fireflies";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    type Config = FirefliesConfig;

    fn new(config: FirefliesConfig) -> Result<Self, ProviderError> {
        let raw_base = config.base_url.as_deref().map(str::trim).filter(|s| !s.is_empty());
        let endpoint = raw_base.unwrap_or(DEFAULT_BASE_URL).to_owned();
        let host = base_url_host(
            "fireflies",
            &endpoint,
            &endpoint,
            &format!("write the GraphQL endpoint, e.g. {DEFAULT_BASE_URL}"),
            &format!("e.g. {DEFAULT_BASE_URL}"),
        )?;
        let settings = ClientSettings {
            endpoint,
            token: non_blank(config.token),
            token_env: token_env(config.token_env, DEFAULT_TOKEN_ENV),
            timeout: timeout(config.timeout_s),
            max_retry_wait: max_retry_wait(config.max_retry_wait_s),
            ca_certificates: ca_certificates("fireflies", config.ca_file.as_deref())?,
            max_response_bytes: max_response_bytes(config.max_response_mb),
        };
        let client = Client::new(settings).map_err(ProviderError::new)?;
        Ok(Fireflies { client, host })
    }
}

export_provider!(Fireflies);
