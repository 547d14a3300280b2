//! The Jira provider of quiver: issues (JQL search, details with custom fields by name, children,
//! change logs, attachments, watchers, assignment, comments, workflow transitions, links), time
//! tracking, projects (components, create metadata), users, and Jira Software's boards, sprints
//! and project versions, on Jira Cloud (REST v3, Agile 1.0) or Jira Server/Data Center (REST v2,
//! Agile 1.0), as tools an agent can afford.
//!
//! # Tools
//! Grouped as `[providers.jira] groups = [...]` selects them:
//! - issues: `search_issues`, `get_issue`, `list_child_issues`, `list_changelog`,
//!   `list_attachments`, `create_issue`, `update_issue`, `link_issues`, `assign_issue`,
//!   `list_watchers`, `add_watcher`, `search_users`;
//! - comments: `list_comments`, `add_comment`;
//! - workflow: `list_transitions`, `transition_issue`;
//! - worklogs: `list_worklogs`, `add_worklog`;
//! - planning: `list_boards`, `list_sprints`, `move_issues_to_sprint`, `list_project_versions`;
//! - projects: `list_projects`, `get_project`, `list_project_components`, `get_create_metadata`.
//!
//! Where Cloud and Server/Data Center differ, the tools hide it: an epic's children are
//! `parent = KEY` on Cloud and also `"Epic Link" = KEY` on Server; Server has no change-log
//! endpoint and no paged project search, so both are read whole (`expand=changelog`, `/project`)
//! and paged here; people are named by account id on Cloud and by username on Server, and every
//! user in a result carries that value as `id`.
//!
//! Every tool about one issue takes `key` (`PROJ-123`) and echoes it in its result, so the next
//! call can be built from the result alone; search hits carry their keys. Listings take
//! `max_results` and return how to get the next page: `next_page_token` for Cloud searches (the
//! `/rest/api/3/search/jql` endpoint pages by token and gives no total), `next_start_at`
//! everywhere else (Jira's `startAt` offsets), or null on the last page.
//!
//! # Configuration
//! `[providers.jira]` in quiver.toml; unknown keys are errors, so a typo is reported:
//!
//! - `base_url` (required): the site, `https://your-site.atlassian.net` for Cloud or the Server/
//!   Data Center URL including any context path (`https://jira.example.com/jira`).
//! - `email` (none): the Atlassian account's email, for Cloud's basic authentication with an API
//!   token. Without it the token is sent as a bearer token (a Server/Data Center personal access
//!   token). On Server, a username here selects basic authentication with a password or token.
//! - `deployment` (`cloud` for `*.atlassian.net` sites or when `email` is set, else `server`):
//!   `cloud` uses REST v3 (rich text as Atlassian Document Format, token-paged search); `server`
//!   uses REST v2 (wiki-markup strings, offset-paged search).
//! - `token` (none): filled in by the host from the variable `token_env` names. Without one,
//!   calls are anonymous (some public sites allow reading); that is not an error.
//! - `token_env` (`JIRA_TOKEN`): the variable the user keeps the token in; used only to say what
//!   to set.
//! - `timeout_s` (30): how long one request may take.
//! - `max_retry_wait_s` (10): the longest a rate-limited call waits (for `Retry-After` or
//!   `X-RateLimit-Reset`) before giving up with a `rate_limited` error.
//! - `ca_file` (none; the top-level `ca_file` when set): a PEM file of the CA that signed the
//!   site's certificate (a Server/Data Center behind a private CA), trusted besides the system
//!   store and the bundled web roots (`SSL_CERT_FILE` is honoured too).
//! - `max_response_mb` (32): a response body past this is refused, never read whole.
//!
//! Reads (GETs, searches included) are retried twice after a 500/502/503/504 or a connection
//! that failed, with jittered pauses inside the call's deadline; writes (POST, PUT) never are.
//!
//! ```toml
//! [providers.jira]
//! base_url = "https://acme.atlassian.net"
//! email = "dev@acme.com"
//! ```
//!
//! # How responses were chosen
//! A Jira issue is a `fields` object with every field of the site — dozens of system fields
//! (watches, votes, worklog, time tracking, avatars, `self` URLs, status icons) and every custom
//! field, most of them null, all named `customfield_NNNNN`. An agent needs few of them, so every
//! tool maps the response into a compact result that keeps:
//! - identity: `key` (and a `url` to open the issue), project key, issue type;
//! - state and people: status with its category (`To Do`/`In Progress`/`Done`), resolution,
//!   priority, assignee and reporter as display names, labels, components, fix versions, parent;
//! - times: created, updated, resolved, due;
//! - the description and comments as plain text (Cloud's ADF documents are rendered: mentions,
//!   lists, code blocks and links survive), cut at 32 KiB and 8 KiB, saying so;
//! - links as `{relation: "is blocked by", key, summary, status}`, sub-tasks, counts of comments
//!   and attachments;
//! - every non-empty custom field **by name** (`"Story Points": 5`, `"Sprint": [{id, name,
//!   state}]`), values compacted (users → names, options → values, rich text → text, 2 KiB each),
//!   ranking and development-panel noise left out. The id→name map comes from `/field`, fetched
//!   once and kept.
//!
//! Writes take the same names: `create_issue` and `update_issue` accept `fields` keyed by name or
//! id, with plain values turned into Jira's shapes (`"High"` → `{"value": "High"}` for a select,
//! `"1.2"` → `[{"name": "1.2"}]` for versions, text → ADF for Cloud rich-text fields);
//! `transition_issue` takes a transition's name, id or target status.
//!
//! gouqi's `ClientCore` builds every URL and applies the credentials (basic or bearer);
//! requests go out through one `reqwest` client built in [`Provider::new`], because gouqi's
//! `get`/`post` return only the decoded body and hide the status and headers the rate-limit
//! handling reads. Responses are read into lenient structs (or field maps) naming only what is
//! kept, not gouqi's models, which require fields a Server version or a trimmed fixture may lack.
//!
//! # Errors
//! Every failure is a `ToolError` whose message says what to do and never contains the token:
//! 401 names the variable to set (`token_env`) and, with basic authentication, the `email` key
//! whose account the token must belong to; 403 says a permission is missing (or that Jira wants a
//! CAPTCHA after failed logins); 404 names the issue, board or project ("or the account cannot
//! see it"); 400 carries Jira's own messages (bad JQL, a required field) as `invalid_arguments`;
//! rate limits (429, or 503 with `Retry-After`) are waited out up to `max_retry_wait_s` (twice at
//! most, never past the call's deadline), else reported with when they reset (`Retry-After` or
//! Cloud's ISO 8601 `X-RateLimit-Reset`); 5xx (once a read's retries are spent), unreadable
//! bodies and bodies past `max_response_mb` are `upstream` errors, and an untrusted certificate
//! names `ca_file`; slow answers are `timeout` errors naming `timeout_s`.
//!
//! # Value models
//! [`ToolEnricher`] gives every tool a value model: reads are `read_only`; the nine writes are
//! `mutates_external`, never speculated, never cached, and invalidate the reads they make stale.
//! Follow-up links cover the read chains — search → `get_issue` of the first hits, `get_issue` →
//! `list_comments` (only when it has comments), `list_transitions` (unless it is done),
//! `list_child_issues` (only for an epic) and `list_attachments` (only when it has some),
//! children → `get_issue` of the open ones, projects → `get_project` → its components (only when
//! it has some), boards → sprints of scrum boards, sprints → a search of the active sprint — with
//! argument projection built from a result.
//! The rate-limit host is the configured site's host.
//!
//! **Architecture Invariant**: this crate depends on `quiver-plugin-sdk` and its HTTP client
//! (gouqi, with the `reqwest` it is built on) and never on `quiver-runtime`.

mod activity;
mod adf;
mod client;
mod comments;
mod enricher;
mod fields;
mod issues;
mod model;
mod people;
mod planning;
mod projects;
mod workflow;
mod worklogs;

use std::fmt;
use std::sync::{Arc, Mutex};

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::config::{
    base_url_host, ca_certificates, max_response_bytes, max_retry_wait, non_blank, timeout,
    token_env,
};

use crate::client::{Client, ClientSettings};
use crate::fields::FieldMap;

/// The variable named in messages when `token_env` is not configured.
pub const DEFAULT_TOKEN_ENV: &str = "JIRA_TOKEN";

/// The Jira provider: one client for the configured site.
pub struct Jira {
    client: Client,
    host: String,
    /// The site's fields, fetched on first use.
    fields: Mutex<Option<Arc<FieldMap>>>,
    /// What lockdown's permission lookups found, and when: (project key, account) → can edit
    /// the project's issues.
    editors: quiver_plugin_sdk::support::remembered::Remembered<(String, String), bool>,
}

/// How long a looked-up permission is taken as still true.
const LOOKUP_TTL: std::time::Duration = std::time::Duration::from_secs(300);

impl Jira {
    /// Labels each text (a JSON pointer into the result, and the author object Jira sent) with
    /// who wrote it. Whether the author can write — Jira's comments do not say — is looked up
    /// only when the host may lock the texts down: whether they hold `EDIT_ISSUES` on the issue
    /// (`/user/permission/search`, by `accountId` on Cloud, `username` on Server/Data Center),
    /// one request per author and project in five minutes; a lookup that fails leaves it unknown.
    /// Jira does not say whether a project is public: lockdown takes it as public.
    pub(crate) async fn label_authors(
        &self,
        issue_key: &str,
        texts: Vec<(String, &Value)>,
        ctx: &ToolContext,
    ) {
        for (pointer, author) in texts {
            let Some(name) = model::person(author) else { continue };
            let can_write =
                if ctx.lockdown { self.can_edit(issue_key, author, ctx).await } else { None };
            ctx.label_author(pointer, name, can_write);
        }
    }

    async fn can_edit(&self, issue_key: &str, author: &Value, ctx: &ToolContext) -> Option<bool> {
        let text = |key: &str| author.get(key).and_then(Value::as_str);
        let (param, id) = match (text("accountId"), text("name")) {
            (Some(id), _) => ("accountId", id),
            (None, Some(name)) => ("username", name),
            (None, None) => return None,
        };
        let project = issue_key.split('-').next().unwrap_or(issue_key).to_owned();
        self.editors
            .get_or_ask((project, id.to_owned()), || async {
                let path = client::endpoint(
                    "/user/permission/search",
                    &[
                        ("permissions", Some("EDIT_ISSUES".to_owned())),
                        ("issueKey", Some(issue_key.to_owned())),
                        (param, Some(id.to_owned())),
                    ],
                );
                let subject = client::Subject::of_issue("who may edit", issue_key);
                let found: Vec<Value> =
                    self.client.get_json(client::Api::Core, &path, &subject, ctx).await.ok()?;
                // Server's search also matches by prefix: only the author counts.
                let field = if param == "username" { "name" } else { param };
                Some(found.iter().any(|user| user.get(field).and_then(Value::as_str) == Some(id)))
            })
            .await
    }
}

/// Which kind of Jira the site is; decides the REST API version and the shape of rich text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Deployment {
    /// Jira Cloud (`*.atlassian.net`): REST v3, rich text as Atlassian Document Format.
    Cloud,
    /// Jira Server or Data Center: REST v2, rich text as wiki-markup strings.
    #[serde(alias = "data_center", alias = "datacenter")]
    Server,
}

impl Deployment {
    /// The platform REST API version: `3` on Cloud, `2` on Server/Data Center.
    pub fn api_version(self) -> &'static str {
        match self {
            Deployment::Cloud => "3",
            Deployment::Server => "2",
        }
    }
}

/// `[providers.jira]` in quiver.toml.
#[derive(Clone, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct JiraConfig {
    /// The site: `https://your-site.atlassian.net` for Jira Cloud, or the Server/Data Center URL
    /// (with its context path, if any). Required.
    pub base_url: Option<String>,
    /// The Atlassian account's email for Jira Cloud (basic authentication with an API token);
    /// unset, the token is sent as a bearer token (Server/Data Center personal access token).
    pub email: Option<String>,
    /// `cloud` or `server` (Server/Data Center); when unset, `cloud` for `*.atlassian.net` sites
    /// or when `email` is set, else `server`.
    pub deployment: Option<Deployment>,
    /// The token (filled in by the host from the variable named by `token_env`); without one,
    /// calls are anonymous.
    pub token: Option<String>,
    /// The name of the variable the token comes from ("JIRA_TOKEN" when unset); used only to
    /// tell the user what to set.
    pub token_env: Option<String>,
    /// Seconds one request may take (30 when unset).
    pub timeout_s: Option<u64>,
    /// The longest a rate-limited call waits before giving up, in seconds (10 when unset).
    pub max_retry_wait_s: Option<u64>,
    /// A PEM file of the CA that signed the site's certificate (a private CA), trusted besides
    /// the system store and the bundled web roots.
    pub ca_file: Option<String>,
    /// The largest response body read, in MB (32 when unset).
    pub max_response_mb: Option<u64>,
}

impl fmt::Debug for JiraConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JiraConfig")
            .field("base_url", &self.base_url)
            .field("email", &self.email)
            .field("deployment", &self.deployment)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("token_env", &self.token_env)
            .field("timeout_s", &self.timeout_s)
            .field("max_retry_wait_s", &self.max_retry_wait_s)
            .field("ca_file", &self.ca_file)
            .field("max_response_mb", &self.max_response_mb)
            .finish()
    }
}

impl Provider for Jira {
    const NAME: &'static str = "jira";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    type Config = JiraConfig;

    fn new(config: JiraConfig) -> Result<Self, ProviderError> {
        let raw_base = config.base_url.as_deref().map(str::trim).filter(|s| !s.is_empty());
        let Some(raw_base) = raw_base else {
            return Err(ProviderError::not_configured(
                "[providers.jira] base_url is required: your site, e.g. \
                 https://your-site.atlassian.net (Jira Cloud) or https://jira.example.com \
                 (Server/Data Center)",
            ));
        };
        // gouqi joins `rest/…` to the site: a trailing `/` keeps a context path (`/jira/`).
        // A pasted REST URL (`…/rest/api/2`) is cut back to the site.
        let mut site = raw_base.trim_end_matches('/').to_owned();
        if let Some(at) = site.find("/rest/") {
            site.truncate(at);
        }
        site.push('/');
        let host = base_url_host(
            "jira",
            &site,
            raw_base,
            "write e.g. https://your-site.atlassian.net",
            "e.g. https://your-site.atlassian.net",
        )?;
        let email = non_blank(config.email);
        let deployment = config.deployment.unwrap_or(
            if host.ends_with(".atlassian.net") || host.ends_with(".jira.com") || email.is_some() {
                Deployment::Cloud
            } else {
                Deployment::Server
            },
        );
        let settings = ClientSettings {
            base_url: site,
            email,
            token: non_blank(config.token),
            token_env: token_env(config.token_env, DEFAULT_TOKEN_ENV),
            deployment,
            timeout: timeout(config.timeout_s),
            max_retry_wait: max_retry_wait(config.max_retry_wait_s),
            ca_certificates: ca_certificates("jira", config.ca_file.as_deref())?,
            max_response_bytes: max_response_bytes(config.max_response_mb),
        };
        let client = Client::new(settings).map_err(ProviderError::new)?;
        Ok(Jira {
            client,
            host,
            fields: Mutex::new(None),
            editors: quiver_plugin_sdk::support::remembered::Remembered::new(LOOKUP_TTL),
        })
    }
}

export_provider!(Jira);
