//! People on issues: finding users, an issue's watchers, assigning it.
//!
//! A user is named in writes by their account id on Jira Cloud (names and usernames are hidden
//! there for privacy) and by their username on Server/Data Center; every user in a result
//! carries that value as `id`, so it can be passed straight to `assign_issue`, `add_watcher`,
//! `create_issue`'s `assignee` or JQL (`assignee = <id>`).

use quiver_plugin_sdk::prelude::*;
use reqwest::Method;

use crate::client::{check_key, endpoint, Api, Subject};
use crate::fields::user_ref;
use crate::model::{is_false, page_size, person};
use crate::{Deployment, Jira};

/// Arguments of `search_users`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchUsersArgs {
    /// Part of a display name or email address (Server/Data Center: also the username), e.g.
    /// `mia` or `mia@acme.com`.
    #[serde(alias = "q", alias = "username")]
    pub(crate) query: String,
    /// Users per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    #[serde(alias = "maxResults")]
    pub(crate) max_results: Option<u32>,
    /// The offset of the first user (the previous page's `next_start_at`).
    #[serde(alias = "startAt")]
    pub(crate) start_at: Option<u32>,
}

/// Arguments of `list_watchers`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListWatchersArgs {
    /// The issue key, e.g. `PROJ-123`.
    #[serde(alias = "issue_key", alias = "issueKey")]
    pub(crate) key: String,
}

/// Arguments of `add_watcher`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddWatcherArgs {
    /// The issue key, e.g. `PROJ-123`.
    #[serde(alias = "issue_key", alias = "issueKey")]
    pub(crate) key: String,
    /// Who starts watching: the account id on Jira Cloud, the username on Server/Data Center
    /// (a user's `id` in `search_users`).
    #[serde(alias = "account_id", alias = "accountId", alias = "username")]
    pub(crate) user: String,
}

/// Arguments of `assign_issue`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AssignIssueArgs {
    /// The issue key, e.g. `PROJ-123`.
    #[serde(alias = "issue_key", alias = "issueKey")]
    pub(crate) key: String,
    /// The new assignee: the account id on Jira Cloud, the username on Server/Data Center (a
    /// user's `id` in `search_users`); `none` unassigns, `default` gives the issue to the
    /// project's default assignee.
    #[serde(alias = "account_id", alias = "accountId", alias = "user")]
    pub(crate) assignee: String,
}

/// One user.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct User {
    /// What writes and JQL take: the account id on Cloud, the username on Server/Data Center.
    pub(crate) id: Option<String>,
    /// The display name.
    pub(crate) name: Option<String>,
    /// The email address, when the user's privacy settings show it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) email: Option<String>,
    /// Set when the account is deactivated (it cannot be assigned).
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) inactive: bool,
}

/// Result of `search_users`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct UserList {
    /// The query.
    pub(crate) query: String,
    /// The users found (apps and bots left out).
    pub(crate) users: Vec<User>,
    /// Pass as `start_at` for the next page; null on the last page.
    pub(crate) next_start_at: Option<u64>,
}

/// `GET /issue/{key}/watchers`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireWatchers {
    #[serde(default)]
    is_watching: bool,
    #[serde(default)]
    watch_count: Option<u64>,
    #[serde(default)]
    watchers: Vec<Value>,
}

/// Result of `list_watchers`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WatcherList {
    /// The issue key.
    pub(crate) key: String,
    /// How many people watch the issue (some may be hidden from the account).
    pub(crate) watch_count: u64,
    /// Whether the account itself watches it.
    pub(crate) is_watching: bool,
    /// The watchers the account may see.
    pub(crate) watchers: Vec<User>,
}

/// Result of `add_watcher`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AddedWatcher {
    /// The issue key.
    pub(crate) key: String,
    /// The user now watching.
    pub(crate) user: String,
}

/// Result of `assign_issue`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Assigned {
    /// The issue key.
    pub(crate) key: String,
    /// The assignee's id; `default` for the project's default assignee, null when unassigned.
    pub(crate) assignee: Option<String>,
}

/// A user as results show them.
pub(crate) fn user(value: &Value) -> User {
    let text = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_owned);
    User {
        id: text("accountId").or_else(|| text("name")),
        name: person(value),
        email: text("emailAddress").filter(|e| !e.is_empty()),
        inactive: value.get("active").and_then(Value::as_bool) == Some(false),
    }
}

/// The result of `search_users`: Cloud lists app accounts (automation, integrations) too.
pub(crate) fn user_list(query: String, found: Vec<Value>, start_at: u64, max: u64) -> UserList {
    let count = found.len() as u64;
    UserList {
        query,
        users: found
            .iter()
            .filter(|u| u.get("accountType").and_then(Value::as_str) != Some("app"))
            .map(user)
            .collect(),
        next_start_at: (count > 0 && count >= max).then_some(start_at + count),
    }
}

/// The result of `list_watchers`.
pub(crate) fn watcher_list(key: String, wire: WireWatchers) -> WatcherList {
    WatcherList {
        key,
        watch_count: wire.watch_count.unwrap_or(wire.watchers.len() as u64),
        is_watching: wire.is_watching,
        watchers: wire.watchers.iter().map(user).collect(),
    }
}

/// Checks a user id before it goes into a body.
fn check_user(field: &str, value: &str) -> Result<String, ToolError> {
    let value = value.trim();
    if value.is_empty() || value.len() > 255 {
        return Err(ToolError::invalid_arguments(format!(
            "`{field}` must be an account id (Cloud) or a username (Server); find it with \
             `search_users`"
        )));
    }
    Ok(value.to_owned())
}

impl Jira {
    async fn search_users(
        &self,
        args: SearchUsersArgs,
        ctx: &ToolContext,
    ) -> Result<UserList, ToolError> {
        let query = args.query.trim().to_owned();
        if query.is_empty() {
            return Err(ToolError::invalid_arguments(
                "`query` is empty; give part of a name or an email address",
            ));
        }
        let start_at = args.start_at.unwrap_or(0);
        let max = page_size(args.max_results, 20, 100);
        let by = match self.client.deployment() {
            Deployment::Cloud => "query",
            Deployment::Server => "username",
        };
        let path = endpoint(
            "/user/search",
            &[
                (by, Some(query.clone())),
                ("startAt", Some(start_at.to_string())),
                ("maxResults", Some(max.to_string())),
            ],
        );
        let subject = Subject::other(
            format!("the user search `{query}`"),
            "jira has no user search here (or the account may not browse users)",
        );
        let found: Vec<Value> = self.client.get_json(Api::Core, &path, &subject, ctx).await?;
        Ok(user_list(query, found, start_at.into(), max.into()))
    }

    async fn list_watchers(
        &self,
        args: ListWatchersArgs,
        ctx: &ToolContext,
    ) -> Result<WatcherList, ToolError> {
        let key = check_key("key", &args.key)?;
        let subject = Subject::of_issue("the watchers", &key);
        let path = format!("/issue/{key}/watchers");
        let wire = self.client.get_json(Api::Core, &path, &subject, ctx).await?;
        Ok(watcher_list(key, wire))
    }

    async fn add_watcher(
        &self,
        args: AddWatcherArgs,
        ctx: &ToolContext,
    ) -> Result<AddedWatcher, ToolError> {
        let key = check_key("key", &args.key)?;
        let user = check_user("user", &args.user)?;
        let subject = Subject::other(
            format!("adding {user} as a watcher of {key}"),
            format!("no issue {key} or user {user} in jira (or the account cannot see them)"),
        );
        // The body is the bare JSON string: `"5b10ac8d82e05b22cc7d4ef5"`.
        let path = format!("/issue/{key}/watchers");
        self.client.send(Method::POST, Api::Core, &path, &json!(user), &subject, ctx).await?;
        Ok(AddedWatcher { key, user })
    }

    async fn assign_issue(
        &self,
        args: AssignIssueArgs,
        ctx: &ToolContext,
    ) -> Result<Assigned, ToolError> {
        let key = check_key("key", &args.key)?;
        let deployment = self.client.deployment();
        let wanted = args.assignee.trim();
        // An empty value is more likely a slip than a wish to unassign: that takes `none`.
        if wanted.is_empty() {
            return Err(ToolError::invalid_arguments(
                "`assignee` is empty: give an account id (Cloud) or username (Server) from \
                 `search_users`, `none` to unassign, or `default`",
            ));
        }
        // `-1` is Jira's own word for the project's default assignee.
        let (body, assignee) = if wanted.eq_ignore_ascii_case("default") || wanted == "-1" {
            let body = match deployment {
                Deployment::Cloud => json!({ "accountId": "-1" }),
                Deployment::Server => json!({ "name": "-1" }),
            };
            (body, Some("default".to_owned()))
        } else {
            let reference = user_ref(wanted, deployment);
            let id = (!reference.is_null()).then(|| wanted.to_owned());
            let body = match (reference, deployment) {
                (Value::Null, Deployment::Cloud) => json!({ "accountId": null }),
                (Value::Null, Deployment::Server) => json!({ "name": null }),
                (reference, _) => reference,
            };
            (body, id)
        };
        let subject = match &assignee {
            Some(user) if user != "default" => Subject::other(
                format!("assigning {key} to {user}"),
                format!("no issue {key} or user {user} in jira (or the account cannot see them)"),
            ),
            _ => Subject::of_issue("the assignee", &key),
        };
        let path = format!("/issue/{key}/assignee");
        self.client.send(Method::PUT, Api::Core, &path, &body, &subject, ctx).await?;
        Ok(Assigned { key, assignee })
    }
}

register_tool! {
    provider: Jira,
    name: "search_users",
    group: "issues",
    description: "Find users by part of their name or email. Each has the `id` that \
                  assignees, watchers and JQL take (account id on Cloud, username on Server).",
    input: SearchUsersArgs,
    output: UserList,
    handler: Jira::search_users,
}

register_tool! {
    provider: Jira,
    name: "list_watchers",
    group: "issues",
    description: "List the people watching an issue (name and id), with the watch count and \
                  whether the account itself watches it.",
    input: ListWatchersArgs,
    output: WatcherList,
    handler: Jira::list_watchers,
}

register_tool! {
    provider: Jira,
    name: "add_watcher",
    group: "issues",
    description: "Add a watcher to an issue, by account id (Cloud) or username (Server), as \
                  `search_users` gives them.",
    input: AddWatcherArgs,
    output: AddedWatcher,
    handler: Jira::add_watcher,
}

register_tool! {
    provider: Jira,
    name: "assign_issue",
    group: "issues",
    description: "Assign an issue to a user (account id on Cloud, username on Server, from \
                  `search_users`), to `default` (the project's default assignee), or to `none` \
                  (unassigned). Replaces the current assignee.",
    input: AssignIssueArgs,
    output: Assigned,
    handler: Jira::assign_issue,
}
