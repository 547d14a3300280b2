//! The GitHub provider of quiver: repositories, code, commits and releases, issues, pull
//! requests and their reviews, Actions runs and logs, CI checks, notifications and security
//! alerts from GitHub's REST API (github.com or GitHub Enterprise Server), as tools an agent can
//! afford.
//!
//! # Tools
//! Each tool belongs to a group (`[providers.github] groups = [...]` serves only those):
//! - issues: `list_issues`, `get_issue`, `list_issue_comments`, `search_issues`,
//!   `create_issue`, `add_issue_comment`, `update_issue` (also closes and reopens),
//!   `add_issue_labels`, `remove_issue_label`, `add_issue_assignees`, `remove_issue_assignees`;
//! - pulls: `list_pull_requests`, `get_pull_request`, `list_pull_request_files`,
//!   `list_pull_request_reviews`, `list_pull_request_review_comments`, `get_pull_request_diff`,
//!   `create_pull_request`, `update_pull_request`, `merge_pull_request`,
//!   `add_pull_request_reviewers`, `create_pull_request_review` (with line comments),
//!   `submit_pull_request_review`, `get_commit_status`, `list_check_runs`;
//! - actions: `list_workflows`, `list_workflow_runs`, `get_workflow_run`, `list_workflow_jobs`,
//!   `get_job_logs`, `list_artifacts`, `dispatch_workflow`, `rerun_failed_jobs`,
//!   `cancel_workflow_run`;
//! - repos: `search_repositories`, `get_repository`, `search_code`, `get_file_contents`,
//!   `create_file`, `update_file`, `list_branches`, `create_branch`, `list_commits`,
//!   `get_commit`, `compare_commits`, `list_tags`, `list_releases`, `get_latest_release`,
//!   `get_release_by_tag`;
//! - notifications: `list_notifications`, `mark_notifications_read`;
//! - security (read only): `list_dependabot_alerts`, `list_code_scanning_alerts`.
//!
//! A tool's leading verb sets its MCP annotations: `create_`, `add_`, `dispatch_`, `rerun_` and
//! `submit_` only add, so they are not destructive; `update_`, `remove_`, `merge_`, `cancel_`
//! and `mark_` change or undo what is there and are annotated destructive. Overwriting a file
//! is therefore its own tool (`update_file`, which also needs the blob SHA it replaces), apart
//! from `create_file`.
//!
//! Every tool that works on one repository takes `owner` and `repo` and echoes them as
//! `"repository": "owner/repo"` in its result, so a follow-up call can be built from the result
//! alone. Listings take `page` (from 1) and `per_page` (30 by default, at most 100) and return
//! `next_page` (a number, or null on the last page, read from GitHub's `Link` header) and
//! `total_count` where GitHub gives one; Dependabot alerts page by cursor (`after` in,
//! `next_cursor` out). Searches span repositories, so each hit names its own `repository`.
//! Writes answer with what the next call needs: the new number, SHA, branch or review id.
//!
//! # Configuration
//! `[providers.github]` in quiver.toml; unknown keys are errors, so a typo is reported:
//!
//! - `base_url` (default `https://api.github.com`): the API root; for GitHub Enterprise Server
//!   `https://HOST/api/v3`.
//! - `token` (none): filled in by the host from the variable `token_env` names. Without one,
//!   calls are unauthenticated (public data only, 60 requests an hour); that is not an error.
//! - `token_env` (`GITHUB_TOKEN`): the variable the user keeps the token in; used only to say
//!   what to set.
//! - `timeout_s` (30): how long one request may take.
//! - `max_retry_wait_s` (10): the longest a rate-limited call waits (for `retry-after` or
//!   `x-ratelimit-reset`) before giving up with a `rate_limited` error.
//! - `max_response_mb` (32): a response body past this is refused, never read whole.
//! - `ca_file` (none; the top-level `ca_file` when set): a PEM file of the CA that signed a GitHub
//!   Enterprise Server's certificate, trusted besides the system store (which `SSL_CERT_FILE`
//!   replaces, as rustls-native-certs reads it).
//!
//! Reads (GETs) are retried
//! twice after a 500/502/503/504 or a connection that failed, with jittered pauses inside the
//! call's deadline; writes never are.
//!
//! ```toml
//! [providers.github]
//! base_url = "https://ghe.example.com/api/v3"
//! token_env = "GHE_TOKEN"
//! max_retry_wait_s = 20
//! ```
//!
//! # How responses were chosen
//! GitHub's JSON is generous: an issue carries some twenty API URLs, a full user object (with
//! another eighteen URLs) for every person mentioned, reactions, node ids, and a pull request
//! embeds two whole repositories. An agent needs a small part of it, so every tool maps the
//! response into a compact result that keeps:
//! - identity and links a human follows: `number`, `title`, `state`, `html_url`;
//! - people as logins (`author`, `assignees`, `requested_reviewers`, `merged_by`) and labels
//!   as names;
//! - times (`created_at`, `updated_at`, `closed_at`, `merged_at`) and counts (comments,
//!   review comments, commits, additions, deletions, changed files);
//! - what decides the next step: pull request merge state (`merged`, `mergeable`,
//!   `mergeable_state`, head/base refs and SHAs, `head_repo` for forks), review states and the
//!   commit reviewed, run and job `status`/`conclusion` with the steps that failed, file
//!   changes with their patch;
//! - bodies (issues, pull requests, comments, reviews) in full up to a cap that says what it cut;
//!
//! and drops node ids, API URLs, avatar and gravatar fields, reactions, `_links`, nested
//! repository objects and anything else nobody reads. Empty lists and false flags are left out.
//! Listings of issues leave pull requests out (GitHub lists them as issues) and count them;
//! long text is cut at a stated size: bodies 32 KiB, comments 8 KiB, patches 4 KiB per file
//! (`max_patch_bytes`), file contents 64 KiB per call (`start_line` reads on), job logs the last
//! 200 lines (`tail_lines`) within 64 KiB, without timestamps and colour codes, plus every
//! `##[error]` line of the whole log; a pull request's diff 64 KiB of whole files (the files
//! left out are named with their size), a comparison's commits the first 50, check run
//! summaries and alert messages 1 KiB, repository descriptions 512 bytes.
//!
//! Responses are read into small lenient structs naming only the kept fields, not into
//! octocrab's models: those require every field of every nested object (a workflow run needs the
//! full repository, each user its eighteen URLs), so one field a GitHub Enterprise version does
//! not send would fail the whole call, and recorded fixtures could not be trimmed.
//!
//! # Errors
//! Every failure is a `ToolError` whose message says what to do, and never contains the token:
//! 401 names the variable to set (`token_env`); 403 names the missing permission or scope when
//! GitHub says which; 404 names the object ("no issue #9 in octo/hello (or the token cannot see
//! the repository)"); a refused write (400, 409, 422) is `invalid_arguments` with GitHub's own
//! words ("422 Reference already exists", "409 Cannot cancel a workflow run that is
//! completed"); rate limits (429, or 403 with `retry-after` or `x-ratelimit-remaining: 0`)
//! are waited out up to `max_retry_wait_s` (twice at most), else reported with the reset time;
//! 5xx and unreadable bodies are `upstream` errors.
//!
//! # Value models
//! [`ToolEnricher`] gives every tool a value model (reads are `read_only`, writes
//! `mutates_external` and never speculated, and they invalidate the reads they make stale),
//! follow-up links for the read chains (list → get → comments/files/reviews, runs → jobs →
//! logs of failed jobs, a pull request → its check runs → the logs of failed Actions checks,
//! searches → the repository or file of each hit, commits and releases → one of them,
//! notifications → their issue or pull request) with argument projection that builds
//! `{owner, repo, number}` (or `sha`, `tag`, `run_id`…) from a result, and the configured host
//! as the rate-limit host.
//!
//! **Architecture Invariant**: this crate depends on `quiver-plugin-sdk` and `octocrab` (its HTTP
//! client) and never on `quiver-runtime`.

mod actions;
mod checks;
mod client;
mod commits;
mod enricher;
mod issues;
mod model;
mod notifications;
mod pulls;
mod repos;
mod security;
mod text;
mod workflows;

use std::fmt;

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::config::{
    base_url_host, ca_certificates, max_response_bytes, max_retry_wait, non_blank, timeout,
    token_env,
};

use quiver_plugin_sdk::support::remembered::Remembered;

use crate::client::{Client, ClientSettings};

/// The default API root.
pub const DEFAULT_BASE_URL: &str = "https://api.github.com";
/// The variable named in messages when `token_env` is not configured.
pub const DEFAULT_TOKEN_ENV: &str = "GITHUB_TOKEN";

/// The GitHub provider: one octocrab client for the configured GitHub.
pub struct GitHub {
    client: Client,
    host: String,
    /// Whether repositories are public, as looked up for lockdown.
    visibility: Remembered<String, bool>,
}

/// How long a repository's looked-up visibility is taken as still true.
const VISIBILITY_TTL: std::time::Duration = std::time::Duration::from_secs(300);

/// A repository, for its visibility alone.
#[derive(serde::Deserialize)]
struct WireVisibility {
    #[serde(default)]
    private: Option<bool>,
}

impl GitHub {
    /// Labels the body of each item of a listed page (`/{list}/{i}/body`) with its author and
    /// whether they can write (by `author_association`), then the repository's visibility when
    /// a stranger wrote one ([`GitHub::label_repository_visibility`]).
    pub(crate) async fn label_page<'a>(
        &self,
        repository: &str,
        list: &str,
        authors: impl Iterator<Item = (Option<&'a model::WireUser>, Option<&'a str>)>,
        ctx: &ToolContext,
    ) {
        let mut strangers = false;
        for (i, (user, association)) in authors.enumerate() {
            if let Some(user) = user {
                let writer = issues::can_write(association);
                strangers |= writer == Some(false);
                ctx.label_author(format!("/{list}/{i}/body"), &user.login, writer);
            }
        }
        self.label_repository_visibility(repository, strangers, ctx).await;
    }

    /// Says whether `repository` is public, for the texts labelled so far — only when the host
    /// may lock them down and one of them is by an author who cannot write (the only texts
    /// lockdown withholds, and only in public repositories): one request per repository in
    /// five minutes. One that cannot be looked up stays unknown, which lockdown takes as public.
    pub(crate) async fn label_repository_visibility(
        &self,
        repository: &str,
        strangers: bool,
        ctx: &ToolContext,
    ) {
        if !ctx.lockdown || !strangers {
            return;
        }
        let public = self
            .visibility
            .get_or_ask(repository.to_owned(), || async {
                let subject = crate::client::Subject::object("the repository", repository);
                let uri = format!("/repos/{repository}");
                let (found, _) =
                    self.client.get_json::<WireVisibility>(&uri, &subject, ctx).await.ok()?;
                Some(!found.private?)
            })
            .await;
        if let Some(public) = public {
            ctx.label_visibility(public);
        }
    }
}

/// `[providers.github]` in quiver.toml.
#[derive(Clone, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct GitHubConfig {
    /// The API root: `https://api.github.com` when unset; for GitHub Enterprise Server
    /// `https://HOST/api/v3`.
    pub base_url: Option<String>,
    /// The token (filled in by the host from the variable named by `token_env`); without one,
    /// calls are unauthenticated.
    pub token: Option<String>,
    /// The name of the variable the token comes from ("GITHUB_TOKEN" when unset); used only to
    /// tell the user what to set.
    pub token_env: Option<String>,
    /// Seconds one request may take (30 when unset).
    pub timeout_s: Option<u64>,
    /// The longest a rate-limited call waits before giving up, in seconds (10 when unset).
    pub max_retry_wait_s: Option<u64>,
    /// The largest response body read, in MB (32 when unset).
    pub max_response_mb: Option<u64>,
    /// A PEM file of the CA that signed a GitHub Enterprise Server's certificate (a private CA),
    /// trusted besides the system store.
    pub ca_file: Option<String>,
}

impl fmt::Debug for GitHubConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitHubConfig")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("token_env", &self.token_env)
            .field("timeout_s", &self.timeout_s)
            .field("max_retry_wait_s", &self.max_retry_wait_s)
            .field("max_response_mb", &self.max_response_mb)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

impl Provider for GitHub {
    const NAME: &'static str = "github";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    type Config = GitHubConfig;

    /// GitHub's OAuth apps (and GitHub Apps' user tokens, which expire and refresh). GitHub
    /// Enterprise Server: set `authorize_url` and `token_url` under `[providers.github.oauth]`
    /// (`https://HOST/login/oauth/…`); the identity follows `base_url`.
    fn oauth() -> Option<quiver_plugin_sdk::OAuthEndpoints> {
        Some(quiver_plugin_sdk::OAuthEndpoints {
            authorize_url: "https://github.com/login/oauth/authorize".into(),
            token_url: "https://github.com/login/oauth/access_token".into(),
            revoke_url: None,
            scopes: vec!["repo".into(), "read:org".into()],
            identity_url: "{base_url}/user".into(),
            identity_pointer: "/login".into(),
            settings: Map::new(),
            defaults: Map::from_iter([("base_url".to_owned(), json!(DEFAULT_BASE_URL))]),
        })
    }

    /// A repository's files, by path and optional ref, read with `get_file_contents`.
    fn resources() -> Vec<quiver_plugin_sdk::ResourceTemplate> {
        vec![quiver_plugin_sdk::ResourceTemplate {
            uri_template: "github://repos/{owner}/{repo}/contents/{+path}{?ref}".into(),
            name: "file".into(),
            description: "A file of a GitHub repository (text, up to 64 KiB), at a branch, \
                          tag or commit with `?ref=`, else the default branch"
                .into(),
            mime_type: Some("text/plain".into()),
            tool: "get_file_contents".into(),
            text_field: Some("content".into()),
        }]
    }

    fn new(config: GitHubConfig) -> Result<Self, ProviderError> {
        let raw_base = config.base_url.as_deref().map(str::trim).filter(|s| !s.is_empty());
        let base_url = raw_base.unwrap_or(DEFAULT_BASE_URL).trim_end_matches('/').to_owned();
        let host = base_url_host(
            "github",
            &base_url,
            &base_url,
            "write e.g. https://api.github.com or https://ghe.example.com/api/v3",
            "e.g. https://ghe.example.com/api/v3",
        )?;
        let settings = ClientSettings {
            base_url,
            token: non_blank(config.token),
            token_env: token_env(config.token_env, DEFAULT_TOKEN_ENV),
            timeout: timeout(config.timeout_s),
            max_retry_wait: max_retry_wait(config.max_retry_wait_s),
            max_response_bytes: max_response_bytes(config.max_response_mb),
            ca_certificates: ca_certificates("github", config.ca_file.as_deref())?,
        };
        let client = Client::new(settings).map_err(ProviderError::new)?;
        Ok(GitHub { client, host, visibility: Remembered::new(VISIBILITY_TTL) })
    }
}

export_provider!(GitHub);
