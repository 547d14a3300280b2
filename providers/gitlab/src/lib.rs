//! The GitLab provider of quiver: projects, the repository (tree, files, branches, commits,
//! comparisons, tags, releases), issues, merge requests (with their diffs, discussions and
//! approvals; merged, approved and resolved from here), CI pipelines, jobs and job logs, and
//! search, from GitLab's REST API v4 (gitlab.com or a self-managed instance), as tools an agent
//! can afford.
//!
//! # Tools
//! Each tool belongs to one group (the names `[providers.gitlab] groups = [...]` takes):
//! - `projects`: `list_projects`, `get_project`, `search`, `search_users`;
//! - `repository`: `list_repository_tree`, `get_file`, `create_file`, `update_file`,
//!   `list_branches`, `create_branch`, `list_commits`, `get_commit`, `compare_refs`,
//!   `list_tags`, `list_releases`;
//! - `issues`: `list_issues`, `get_issue`, `list_issue_notes`, `create_issue`,
//!   `create_issue_note`, `update_issue`, `close_issue`, `list_labels`, `list_milestones`;
//! - `merge_requests`: `list_merge_requests`, `get_merge_request`,
//!   `list_merge_request_discussions`, `get_merge_request_changes`,
//!   `get_merge_request_approvals`, `create_merge_request`, `create_merge_request_note`,
//!   `update_merge_request`, `merge_merge_request`, `approve_merge_request`,
//!   `unapprove_merge_request`, `resolve_merge_request_discussion`;
//! - `pipelines`: `list_pipelines`, `list_pipeline_jobs`, `get_job_log`, `retry_job`,
//!   `create_pipeline`, `cancel_pipeline`.
//!
//! The writes are named by what they do, and the host annotates them from that verb: `create_*`
//! only add (not destructive); `update_*`, `close_issue`, `merge_merge_request`,
//! `approve_merge_request`, `unapprove_merge_request`, `resolve_merge_request_discussion`,
//! `cancel_pipeline` and `retry_job` change or end what is there (destructive). Nothing here
//! deletes. `merge_merge_request` and `approve_merge_request` take the reviewed head `sha`, so
//! commits pushed after the review are neither merged nor approved unseen; `update_file` takes
//! the `last_commit_id` that `get_file` returned, so a newer change is not overwritten.
//!
//! Every tool that works on one project takes `project`: the numeric id (`42`) or the full path
//! (`group/subgroup/project`, which the provider URL-encodes to `group%2Fsubgroup%2Fproject`; a
//! project's web URL works too), and echoes it as `"project"` in its result, so a follow-up call
//! can be built from the result alone. Issues and merge requests are addressed by `iid`, their
//! number within the project (`#47`, `!19`). Listings take `page` (from 1) and `per_page` (20 by
//! default, at most 100) and return `next_page` (from GitLab's `X-Next-Page` header, else the
//! `Link` header; null on the last page) and `total` (`X-Total`, when GitLab counts).
//!
//! # Configuration
//! `[providers.gitlab]` in quiver.toml; unknown keys are errors, so a typo is reported:
//!
//! - `base_url` (default `https://gitlab.com`): the instance, e.g. `https://gitlab.example.com`;
//!   the API root is `<base_url>/api/v4` (a `base_url` that already ends in `/api/v4` works too).
//! - `token` (none): filled in by the host from the variable `token_env` names. Without one,
//!   calls are unauthenticated (public projects only); that is not an error.
//! - `token_env` (`GITLAB_TOKEN`): the variable the user keeps the token in; used only to say
//!   what to set.
//! - `auth` (`"private_token"`): how the token is sent: `"private_token"` (a personal, project or
//!   group access token, in the `PRIVATE-TOKEN` header) or `"oauth"` (an OAuth 2 access token,
//!   as `Authorization: Bearer`).
//! - `timeout_s` (30): how long one request may take.
//! - `max_retry_wait_s` (10): the longest a rate-limited call waits (for `Retry-After` or
//!   `RateLimit-Reset`) before giving up with a `rate_limited` error.
//! - `ca_file` (none; the top-level `ca_file` when set): a PEM file of the CA that signed the
//!   instance's certificate, trusted besides the system store and the bundled web roots
//!   (`SSL_CERT_FILE` is honoured too).
//! - `max_response_mb` (32): a response body past this is refused, never read whole.
//!
//! Reads (GETs) are retried twice after a 500/502/503/504 or a connection that failed, with
//! jittered pauses inside the call's deadline; writes never are.
//!
//! ```toml
//! [providers.gitlab]
//! base_url = "https://gitlab.example.com"
//! token_env = "WORK_GITLAB_TOKEN"
//! auth = "oauth"
//! ```
//!
//! # How responses were chosen
//! GitLab's JSON carries much an agent never reads: every user comes with avatar and profile
//! URLs, every issue and merge request with `_links`, `time_stats`, `task_completion_status`,
//! emoji counts and three spellings of its reference, a project with some sixty settings. Every
//! tool maps the response into a compact result that keeps:
//! - identity and the link a human follows: `iid`, `title`, `state`, `web_url`;
//! - people as usernames (`author`, `assignees`, `reviewers`, `merged_by`, `approved_by`),
//!   labels as names, the milestone as its title;
//! - times and counts (`notes`, `merge_requests_count`, `changes_count`, approvals left);
//! - what decides the next step: a merge request's branches, head SHA, `detailed_merge_status`,
//!   conflicts, unresolved discussions, head pipeline and `diff_refs` (for positioned comments);
//!   a job's stage, status, `failure_reason` and `allow_failure`; a diff's paths and patch; a
//!   project's default branch, merge method and merge checks; a file's `last_commit_id`; the
//!   numeric ids that arguments take (users, milestones);
//! - bodies (descriptions, notes) in full up to a cap that says what it cut;
//!
//! and drops ids that are not addresses, API URLs, avatars, emails, `_links`, `time_stats`,
//! emoji, label colours, release evidence and source archives, and everything else nobody reads.
//! A write answers with the object as it now is, without its description. Empty lists and false
//! flags are left out. System notes
//! ("assigned to @bob", "added 1 commit") are left out of note and discussion listings unless
//! asked for, and counted. Long text is cut at a stated size: descriptions 32 KiB, notes 8 KiB,
//! diffs 4 KiB per file (`max_patch_bytes`), files 64 KiB (`max_bytes`; binary files are
//! flagged, not sent), comparisons 100 commits and 100 files, release notes 2 KiB, job logs the
//! last 200 lines (`tail_lines`) within 64 KiB, without colour codes and GitLab's
//! collapsible-section markers, plus the error lines of the whole log.
//!
//! Responses are read into small lenient structs naming only the kept fields, so a field an
//! older GitLab does not send cannot fail a call, and recorded fixtures can be trimmed.
//!
//! # Errors
//! Every failure is a `ToolError` whose message says what to do, and never contains the token:
//! 401 names the variable to set (`token_env`) and the `auth` scheme in use (a 401 on approving
//! also says what it usually means there: already approved, the author, not an eligible
//! approver); 403 names the scope the token lacks when GitLab says which; 404 names the object
//! ("no issue #9 in acme/api (or the token cannot see the project)"); 400, 405, 406, 409 and 422
//! (GitLab refuses merges the merge request's state forbids with 405 and 406, a stale `sha` with
//! 409) are `invalid_arguments` with GitLab's own explanation; rate limits (429 with
//! `Retry-After` or `RateLimit-Reset`) are waited out up to `max_retry_wait_s` (twice at most),
//! else reported with the reset time; 5xx and unreadable bodies are `upstream` errors; a request
//! slower than `timeout_s` is a `timeout`.
//!
//! # Value models
//! [`ToolEnricher`] gives every tool a value model (reads are `read_only`, the seventeen writes
//! `mutates_external`, never speculated, and they invalidate the reads they make stale),
//! follow-up links for the read chains (merge requests → merge request → changes, discussions,
//! approvals; issues → issue → notes; pipelines → jobs → logs of failed jobs; search hits →
//! the issue or merge request; a tree → its files at the listed ref; commits → a commit; branches
//! → what each adds to the default branch; active milestones → their issues) with argument
//! projection that builds `{project, iid}` (or `path`, `sha`, `from`/`to`, `milestone`) from a
//! result, and the host of `base_url` as the rate-limit host.
//!
//! **Architecture Invariant**: this crate depends on `quiver-plugin-sdk` and `reqwest` (its HTTP
//! client) and never on `quiver-runtime`.

mod client;
mod enricher;
mod issues;
mod merge_requests;
mod model;
mod pipelines;
mod projects;
mod repository;

use std::fmt;

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::config::{
    base_url_host, ca_certificates, max_response_bytes, max_retry_wait, non_blank, timeout,
    token_env,
};

use crate::client::{Client, ClientSettings};

/// The default instance.
pub const DEFAULT_BASE_URL: &str = "https://gitlab.com";
/// The variable named in messages when `token_env` is not configured.
pub const DEFAULT_TOKEN_ENV: &str = "GITLAB_TOKEN";

/// The GitLab provider: one HTTP client for the configured GitLab instance.
pub struct GitLab {
    client: Client,
    host: String,
    /// What lockdown's lookups found: (project, user id) → can write; (project, 0) → public.
    lookups: quiver_plugin_sdk::support::remembered::Remembered<(String, u64), bool>,
}

/// How long a looked-up membership or visibility is taken as still true.
const LOOKUP_TTL: std::time::Duration = std::time::Duration::from_secs(300);

/// The lowest access level that can push (Developer): GitLab's counterpart of GitHub's write
/// access, by which lockdown tells an author who can write from one who cannot.
const WRITE_ACCESS_LEVEL: u64 = 30;

/// How lockdown's lookups in `project` are named in errors.
fn members_of(project: &client::ProjectRef) -> client::Subject {
    client::Subject::object("the project's members", &project.name)
}

/// A project member's access, as `/projects/:id/members/all/:user_id` sends it.
#[derive(serde::Deserialize)]
struct WireMember {
    #[serde(default)]
    access_level: u64,
}

/// A project, for its visibility alone.
#[derive(serde::Deserialize)]
struct WireVisibility {
    #[serde(default)]
    visibility: Option<String>,
}

impl GitLab {
    /// Labels each text (a JSON pointer into the result, and its author) with who wrote it.
    /// Whether the author can write — GitLab's notes do not say — and whether the project is
    /// public are looked up only when the host may lock the texts down: one request per author
    /// and one per project in five minutes. A 404 of the membership is an outsider; a lookup
    /// that fails leaves it unknown.
    pub(crate) async fn label_authors(
        &self,
        project: &client::ProjectRef,
        texts: Vec<(String, &model::WireUser)>,
        ctx: &ToolContext,
    ) {
        let mut strangers = false;
        for (pointer, user) in texts {
            let can_write = match (ctx.lockdown, user.id) {
                (true, Some(id)) => {
                    let uri = format!("/projects/{}/members/all/{id}", project.encoded);
                    self.lookups
                        .get_or_ask((project.name.clone(), id), || async {
                            let subject = members_of(project);
                            match self.client.get_json::<WireMember>(&uri, &subject, ctx).await {
                                Ok((member, _)) => Some(member.access_level >= WRITE_ACCESS_LEVEL),
                                Err(e) if e.kind == ToolErrorKind::NotFound => Some(false),
                                Err(_) => None,
                            }
                        })
                        .await
                }
                _ => None,
            };
            strangers |= can_write == Some(false);
            ctx.label_author(pointer, &user.username, can_write);
        }
        if strangers {
            let uri = format!("/projects/{}", project.encoded);
            let public = self
                .lookups
                .get_or_ask((project.name.clone(), 0), || async {
                    let subject = members_of(project);
                    let (found, _) =
                        self.client.get_json::<WireVisibility>(&uri, &subject, ctx).await.ok()?;
                    Some(found.visibility? == "public")
                })
                .await;
            if let Some(public) = public {
                ctx.label_visibility(public);
            }
        }
    }
}

/// How the token is sent (`auth` in `[providers.gitlab]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthScheme {
    /// A personal, project or group access token in the `PRIVATE-TOKEN` header (the default).
    #[default]
    PrivateToken,
    /// An OAuth 2 access token, as `Authorization: Bearer`.
    Oauth,
}

/// `[providers.gitlab]` in quiver.toml.
#[derive(Clone, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct GitLabConfig {
    /// The instance: `https://gitlab.com` when unset, e.g. `https://gitlab.example.com` for a
    /// self-managed one (the API root `<base_url>/api/v4` may be given instead).
    pub base_url: Option<String>,
    /// The token (filled in by the host from the variable named by `token_env`); without one,
    /// calls are unauthenticated.
    pub token: Option<String>,
    /// The name of the variable the token comes from ("GITLAB_TOKEN" when unset); used only to
    /// tell the user what to set.
    pub token_env: Option<String>,
    /// How the token is sent: `private_token` (the default; `PRIVATE-TOKEN` header) or `oauth`
    /// (`Authorization: Bearer`).
    pub auth: Option<AuthScheme>,
    /// Seconds one request may take (30 when unset).
    pub timeout_s: Option<u64>,
    /// The longest a rate-limited call waits before giving up, in seconds (10 when unset).
    pub max_retry_wait_s: Option<u64>,
    /// A PEM file of the CA that signed the instance's certificate (a private CA), trusted
    /// besides the system store and the bundled web roots.
    pub ca_file: Option<String>,
    /// The largest response body read, in MB (32 when unset).
    pub max_response_mb: Option<u64>,
}

impl fmt::Debug for GitLabConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitLabConfig")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("token_env", &self.token_env)
            .field("auth", &self.auth)
            .field("timeout_s", &self.timeout_s)
            .field("max_retry_wait_s", &self.max_retry_wait_s)
            .field("ca_file", &self.ca_file)
            .field("max_response_mb", &self.max_response_mb)
            .finish()
    }
}

/// The instance URL without a trailing `/` or `/api/v4`, and the API root below it.
fn api_root(base_url: &str) -> (String, String) {
    let mut base = base_url.trim().trim_end_matches('/').to_owned();
    for suffix in ["/api/v4", "/api"] {
        if let Some(stripped) = base.strip_suffix(suffix) {
            base = stripped.trim_end_matches('/').to_owned();
            break;
        }
    }
    let api = format!("{base}/api/v4");
    (base, api)
}

impl Provider for GitLab {
    const NAME: &'static str = "gitlab";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    type Config = GitLabConfig;

    /// GitLab's OAuth 2 applications, on gitlab.com or the instance `base_url` names; the
    /// tokens travel as `Authorization: Bearer` and refresh every two hours.
    fn oauth() -> Option<quiver_plugin_sdk::OAuthEndpoints> {
        Some(quiver_plugin_sdk::OAuthEndpoints {
            authorize_url: "{base_url}/oauth/authorize".into(),
            token_url: "{base_url}/oauth/token".into(),
            revoke_url: Some("{base_url}/oauth/revoke".into()),
            scopes: vec!["api".into()],
            identity_url: "{base_url}/api/v4/user".into(),
            identity_pointer: "/username".into(),
            settings: Map::from_iter([("auth".to_owned(), json!("oauth"))]),
            defaults: Map::from_iter([("base_url".to_owned(), json!(DEFAULT_BASE_URL))]),
        })
    }

    /// A CI job's log (its end, colour codes removed), read with `get_job_log`.
    fn resources() -> Vec<quiver_plugin_sdk::ResourceTemplate> {
        vec![quiver_plugin_sdk::ResourceTemplate {
            uri_template: "gitlab://projects/{project}/jobs/{job_id}/log".into(),
            name: "job_log".into(),
            description: "The end of a GitLab CI job's log (200 lines); `project` is the \
                          project's id or its path with `/` written `%2F`"
                .into(),
            mime_type: Some("text/plain".into()),
            tool: "get_job_log".into(),
            text_field: Some("log".into()),
        }]
    }

    fn new(config: GitLabConfig) -> Result<Self, ProviderError> {
        let raw_base = config.base_url.as_deref().map(str::trim).filter(|s| !s.is_empty());
        let (base_url, api) = api_root(raw_base.unwrap_or(DEFAULT_BASE_URL));
        let host = base_url_host(
            "gitlab",
            &base_url,
            &base_url,
            "write e.g. https://gitlab.com or https://gitlab.example.com",
            "e.g. https://gitlab.example.com",
        )?;
        let settings = ClientSettings {
            api_root: api,
            token: non_blank(config.token),
            token_env: token_env(config.token_env, DEFAULT_TOKEN_ENV),
            auth: config.auth.unwrap_or_default(),
            timeout: timeout(config.timeout_s),
            max_retry_wait: max_retry_wait(config.max_retry_wait_s),
            ca_certificates: ca_certificates("gitlab", config.ca_file.as_deref())?,
            max_response_bytes: max_response_bytes(config.max_response_mb),
        };
        let client = Client::new(settings).map_err(ProviderError::new)?;
        Ok(GitLab {
            client,
            host,
            lookups: quiver_plugin_sdk::support::remembered::Remembered::new(LOOKUP_TTL),
        })
    }
}

export_provider!(GitLab);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_root_is_below_the_instance_however_base_url_is_written() {
        for base in [
            "https://gitlab.example.com",
            "https://gitlab.example.com/",
            "https://gitlab.example.com/api/v4",
            "https://gitlab.example.com/api/v4/",
        ] {
            assert_eq!(
                api_root(base),
                (
                    "https://gitlab.example.com".to_owned(),
                    "https://gitlab.example.com/api/v4".to_owned()
                ),
                "{base}"
            );
        }
        assert_eq!(api_root("https://example.com/gitlab").1, "https://example.com/gitlab/api/v4");
    }
}
