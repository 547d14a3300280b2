//! The ClickUp provider of quiver: the workspace hierarchy, tasks and what hangs on them
//! (checklists, tags, custom fields, subtasks, dependencies), task comments, time tracking and
//! goals from ClickUp's REST API v2, as tools an agent can afford.
//!
//! # Tools
//! Each tool belongs to a group (`[providers.clickup] groups = [...]` serves only those):
//! - `hierarchy`: `list_workspaces` (`GET /team`), `list_spaces`, `list_folders`, `list_lists`
//!   (the lists of a folder, or every list of a space: folderless ones and those in folders),
//!   `list_members` (who can see a list or a task);
//! - `tasks`: `list_tasks` (of a list, filtered by statuses, assignees, tags, due and update
//!   dates, closed tasks and subtasks on request), `search_tasks` (`GET /team/{id}/task`, the same
//!   filters across spaces, folders and lists), `get_task` (subtasks, checklists, custom fields
//!   readable by name), `create_task`, `update_task`; `list_subtasks`, `add_dependency`
//!   (`depends_on` or `dependency_of`); `list_checklists` (items with their ids),
//!   `create_checklist`, `add_checklist_item`, `update_checklist_item` (resolve, unresolve,
//!   rename, reassign); `add_task_tag`, `remove_task_tag`; `list_custom_fields` (with the option
//!   ids drop-downs and labels take), `set_custom_field` (`value: null` clears it);
//! - `comments`: `list_task_comments`, `add_task_comment`;
//! - `time_tracking`: `list_time_entries` (a workspace's entries in a date range, per assignee,
//!   task, list, folder or space, with totals per person), `start_timer`, `stop_timer`,
//!   `get_running_timer`;
//! - `goals` (read only): `list_goals` (those in goal folders too), `get_goal` (key results with
//!   their progress and tasks).
//!
//! The writes are `create_task`, `update_task`, `add_task_comment`, `create_checklist`,
//! `add_checklist_item`, `update_checklist_item`, `add_task_tag`, `remove_task_tag`,
//! `set_custom_field`, `add_dependency`, `start_timer` and `stop_timer`; everything else only
//! reads. Of the writes, those whose verb only adds (`create_…`, `add_…`, `start_timer`) are
//! annotated non-destructive; `update_task`, `update_checklist_item`, `remove_task_tag`,
//! `set_custom_field` (it replaces or clears a value) and `stop_timer` are annotated
//! destructive. Every result echoes the ids a follow-up needs under the name the next tool
//! takes (`team_id`, `space_id`, `folder_id`, `list_id`, `task_id`, `checklist_id`, `item_id`,
//! `field_id`, `option_id`, `goal_id`), so a follow-up call can be built from the result alone.
//! Task listings are ClickUp's pages of 100 (`page` from 0, `next_page` from ClickUp's
//! `last_page` flag); comments come 25 a page, newest first, and `next_page` carries the
//! `start` and `start_id` of the next, older page. Custom task ids (`DEV-42`) work wherever a
//! `task_id` is taken, with `team_id`.
//!
//! # Configuration
//! `[providers.clickup]` in quiver.toml; unknown keys are errors, so a typo is reported:
//!
//! - `base_url` (default `https://api.clickup.com/api/v2`): the API root (a proxy, or a test
//!   server).
//! - `token` (none): filled in by the host from the variable `token_env` names. Without one,
//!   the provider still starts; every call then fails saying which variable to set.
//! - `token_env` (`CLICKUP_TOKEN`): the variable the user keeps the token in; used only to say
//!   what to set.
//! - `auth` (`"personal"`): `"personal"` sends a personal API token (`pk_…`) as ClickUp wants
//!   it, raw in the `Authorization` header; `"oauth"` sends an OAuth access token as
//!   `Bearer …`.
//! - `timeout_s` (30): how long one request may take.
//! - `max_retry_wait_s` (10): the longest a rate-limited call waits (for `Retry-After` or
//!   `X-RateLimit-Reset`) before giving up with a `rate_limited` error.
//! - `ca_file` (none; the top-level `ca_file` when set): a PEM file of the CA that signed the
//!   certificate of `base_url` (a proxy behind a private CA), trusted besides the system store
//!   and the bundled web roots (`SSL_CERT_FILE` is honoured too).
//! - `max_response_mb` (32): a response body past this is refused, never read whole.
//!
//! Reads (GETs) are retried twice after a 500/502/503/504 or a connection that failed, with
//! jittered pauses inside the call's deadline; writes (POST, PUT, DELETE) never are.
//!
//! ```toml
//! [providers.clickup]
//! token_env = "CLICKUP_WORK_TOKEN"
//! auth = "oauth"
//! max_retry_wait_s = 20
//! ```
//!
//! # How responses were chosen
//! A ClickUp task carries every person as a full user object (id, username, email, colour,
//! initials, avatar URL) for creator, assignees and watchers; custom fields with their whole
//! type configuration (every drop-down option with its colour); statuses and priorities as
//! objects with colours and order indexes; the list, folder and space as objects; attachments
//! with five URLs each; and all times as Unix milliseconds in strings. An agent needs a small
//! part of it, so every tool maps the response into a compact result that keeps:
//! - identity: ids under the name the next tool takes, names, custom task ids;
//! - state that decides the next step: status names (and whether they close the task),
//!   priority as a word, assignees and creators as names, tags as names, parent task ids;
//! - times as ISO 8601 (`2019-09-06T14:34:10Z`), durations as words (`1 h 12 min`);
//! - on `get_task`: the description (Markdown when ClickUp has it, cut at 16 KiB saying so),
//!   custom fields that have a value as `name → value` with drop-downs and labels turned into
//!   option names, people into names and dates into ISO 8601; checklists as done/total;
//!   subtasks as id, name, status and assignees; counts of dependencies and linked tasks;
//! - on the hierarchy: spaces' status workflow and enabled features, task and list counts,
//!   workspace members as `user_id` and name (the ids assignee filters take);
//! - on time entries and timers: task, person, start, end, duration and description, plus
//!   totals, and for a running timer the time elapsed;
//! - on checklists: ids, item texts, who an item is assigned to, done/total; on custom-field
//!   definitions: id, name, type, and drop-down and label options as id and name; on goals:
//!   progress, dates, owners and key results (`60 / 100 %`, the note of the last update);
//!
//! and drops colours, avatars, emails, order indexes, permission levels, watchers, attachment
//! URLs, feature flags and custom-field type configurations. Empty lists and false flags are
//! left out. Long text is cut at a stated size: descriptions 16 KiB, comments 8 KiB, text
//! custom fields 2 KiB, goal descriptions 4 KiB; time entries list the first 100 (totals count
//! them all), members the first 100.
//!
//! Responses are read into small lenient structs naming only the kept fields: ClickUp sends ids,
//! counts and timestamps as strings on one endpoint and numbers on the next, priorities as
//! objects or bare numbers, so each field accepts every spelling and one odd field never fails
//! a whole call.
//!
//! # Errors
//! Every failure is a `ToolError` whose message says what to do and never contains the token
//! (messages are masked even if ClickUp echoed it). ClickUp's own words (`{"err": "...",
//! "ECODE": "OAUTH_025"}`) are quoted. A missing token fails before any request, naming the
//! variable to set; 401 token errors (`OAUTH_017`, `OAUTH_019`, `OAUTH_025`…) name the variable
//! and the `auth` setting; 401 "team not authorized" (`OAUTH_023`, `OAUTH_027`…) says the object
//! does not exist or its workspace was not authorized; 403 is a missing permission; 404 (and a
//! 400 with an `ITEM_…` "not found" code) names the object; other 400s are invalid arguments;
//! 429 is waited out per `Retry-After` or `X-RateLimit-Reset` up to `max_retry_wait_s` and the
//! call's deadline (twice at most), else reported with the reset time; 5xx (once a read's retries
//! are spent), unreadable bodies and bodies past `max_response_mb` are `upstream` errors, and an
//! untrusted certificate names `ca_file`; slow answers are `timeout` errors naming `timeout_s`.
//!
//! # Value models
//! [`ToolEnricher`] gives every tool a value model: reads are `read_only` (the hierarchy, custom
//! field definitions, members and goals cached for minutes, tasks for a minute, the running
//! timer for seconds), the writes `mutates_external`, never speculated nor cached, and they
//! invalidate the reads they make stale. Follow-up links cover the read chains —
//! `list_workspaces → list_spaces → list_folders / list_lists`, `list_folders → list_lists →
//! list_tasks`, `list_tasks / search_tasks → get_task → list_task_comments / list_checklists`,
//! `list_subtasks → get_task`, `get_running_timer → get_task`, `list_goals → get_goal →
//! get_task` — with argument projection that prefers active spaces, folders with lists, the
//! fullest lists, open tasks, tasks that have checklists, unfinished goals and the tasks of
//! unmet key results. The configured host is the rate-limit host.
//!
//! **Architecture Invariant**: this crate depends on `quiver-plugin-sdk` and `reqwest` (its HTTP
//! client) and never on `quiver-runtime`.

mod checklists;
mod client;
mod comments;
mod enricher;
mod fields;
mod goals;
mod hierarchy;
mod model;
mod relations;
mod tasks;
mod time;

use std::fmt;

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::config::{
    base_url_host, ca_certificates, max_response_bytes, max_retry_wait, non_blank, timeout,
    token_env,
};

use crate::client::{Client, ClientSettings};

/// The default API root.
pub const DEFAULT_BASE_URL: &str = "https://api.clickup.com/api/v2";
/// The variable named in messages when `token_env` is not configured.
pub const DEFAULT_TOKEN_ENV: &str = "CLICKUP_TOKEN";

/// The ClickUp provider: one reqwest client for the configured API root.
pub struct ClickUp {
    client: Client,
    host: String,
}

/// How the token is sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthScheme {
    /// A personal API token (`pk_…`), sent raw in the `Authorization` header.
    #[default]
    Personal,
    /// An OAuth access token, sent as `Authorization: Bearer …`.
    Oauth,
}

/// `[providers.clickup]` in quiver.toml.
#[derive(Clone, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ClickUpConfig {
    /// The API root: `https://api.clickup.com/api/v2` when unset.
    pub base_url: Option<String>,
    /// The token (filled in by the host from the variable named by `token_env`).
    pub token: Option<String>,
    /// The name of the variable the token comes from ("CLICKUP_TOKEN" when unset); used only to
    /// tell the user what to set.
    pub token_env: Option<String>,
    /// `personal` (a `pk_…` token, the default) or `oauth` (an OAuth access token).
    pub auth: Option<AuthScheme>,
    /// Seconds one request may take (30 when unset).
    pub timeout_s: Option<u64>,
    /// The longest a rate-limited call waits before giving up, in seconds (10 when unset).
    pub max_retry_wait_s: Option<u64>,
    /// A PEM file of the CA that signed the API's certificate (a private CA, e.g. of a proxy),
    /// trusted besides the system store and the bundled web roots.
    pub ca_file: Option<String>,
    /// The largest response body read, in MB (32 when unset).
    pub max_response_mb: Option<u64>,
}

impl fmt::Debug for ClickUpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClickUpConfig")
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

impl Provider for ClickUp {
    const NAME: &'static str = "clickup";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    type Config = ClickUpConfig;

    /// ClickUp's OAuth apps (tokens do not expire).
    fn oauth() -> Option<quiver_plugin_sdk::OAuthEndpoints> {
        Some(quiver_plugin_sdk::OAuthEndpoints {
            authorize_url: "https://app.clickup.com/api".into(),
            token_url: "{base_url}/oauth/token".into(),
            revoke_url: None,
            scopes: Vec::new(),
            identity_url: "{base_url}/user".into(),
            identity_pointer: "/user/username".into(),
            settings: Map::new(),
            defaults: Map::from_iter([("base_url".to_owned(), json!(DEFAULT_BASE_URL))]),
        })
    }

    fn new(config: ClickUpConfig) -> Result<Self, ProviderError> {
        let raw_base = config.base_url.as_deref().map(str::trim).filter(|s| !s.is_empty());
        let base_url = raw_base.unwrap_or(DEFAULT_BASE_URL).trim_end_matches('/').to_owned();
        let host = base_url_host(
            "clickup",
            &base_url,
            &base_url,
            "write e.g. https://api.clickup.com/api/v2",
            "e.g. https://api.clickup.com/api/v2",
        )?;
        let settings = ClientSettings {
            base_url,
            token: non_blank(config.token),
            token_env: token_env(config.token_env, DEFAULT_TOKEN_ENV),
            auth: config.auth.unwrap_or_default(),
            timeout: timeout(config.timeout_s),
            max_retry_wait: max_retry_wait(config.max_retry_wait_s),
            ca_certificates: ca_certificates("clickup", config.ca_file.as_deref())?,
            max_response_bytes: max_response_bytes(config.max_response_mb),
        };
        let client = Client::new(settings).map_err(ProviderError::new)?;
        Ok(ClickUp { client, host })
    }
}

export_provider!(ClickUp);
