//! Users: the members of the API key's team, and one user (the key's owner by default).

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::json::nullable;

use crate::client::Subject;
use crate::transcripts::{non_empty, Arguments};
use crate::Fireflies;

/// What `list_users` selects of each user.
pub(crate) const USER_FIELDS: &str =
    "user_id email name num_transcripts recent_meeting minutes_consumed is_admin";
/// What `get_user` selects.
pub(crate) const USER_DETAIL_FIELDS: &str = "user_id email name num_transcripts \
     recent_transcript recent_meeting minutes_consumed is_admin integrations \
     user_groups { name handle }";

/// Arguments of `list_users` (none).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListUsersArgs {}

/// Arguments of `get_user`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetUserArgs {
    /// The user (`user_id` from `list_users`); without it, the owner of the API key.
    #[serde(default, alias = "id", alias = "userId")]
    pub(crate) user_id: Option<String>,
}

/// A user as the `users` and `user` queries send it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireUser {
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    num_transcripts: Option<f64>,
    #[serde(default)]
    recent_transcript: Option<String>,
    #[serde(default)]
    recent_meeting: Option<String>,
    #[serde(default)]
    minutes_consumed: Option<f64>,
    #[serde(default)]
    is_admin: Option<bool>,
    #[serde(default, deserialize_with = "nullable")]
    integrations: Vec<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    user_groups: Vec<WireGroup>,
}

#[derive(Debug, Deserialize)]
struct WireGroup {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    handle: Option<String>,
}

/// One member of the team.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct UserItem {
    /// The user id, for `get_user`.
    pub(crate) user_id: Option<String>,
    /// Full name.
    pub(crate) name: Option<String>,
    /// Email, as `list_transcripts` filters take it (`participants`, `organizers`).
    pub(crate) email: Option<String>,
    /// Set for a team admin.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) admin: bool,
    /// How many transcripts the user has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) transcripts: Option<u64>,
    /// Meeting minutes transcribed so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) minutes_consumed: Option<u64>,
    /// The user's most recent meeting, as Fireflies gives it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) recent_meeting: Option<String>,
}

/// Result of `list_users`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct UserList {
    /// The members of the API key's team.
    pub(crate) users: Vec<UserItem>,
    /// How many there are.
    pub(crate) count: usize,
}

/// Result of `get_user`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct UserDetail {
    /// Id, name, email, role and usage.
    #[serde(flatten)]
    pub(crate) user: UserItem,
    /// The user's most recent transcript, as Fireflies gives it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) recent_transcript: Option<String>,
    /// The integrations enabled for the user (`zoom`, `slack`, …).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) integrations: Vec<String>,
    /// The user groups the user belongs to, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) groups: Vec<String>,
}

fn count(n: Option<f64>) -> Option<u64> {
    n.filter(|n| n.is_finite() && *n >= 0.0).map(|n| n.round() as u64)
}

fn user_item(u: &WireUser) -> UserItem {
    UserItem {
        user_id: non_empty(u.user_id.clone()),
        name: non_empty(u.name.clone()),
        email: non_empty(u.email.clone()),
        admin: u.is_admin.unwrap_or(false),
        transcripts: count(u.num_transcripts),
        minutes_consumed: count(u.minutes_consumed),
        recent_meeting: non_empty(u.recent_meeting.clone()),
    }
}

/// The `list_users` result.
pub(crate) fn user_list(users: Vec<WireUser>) -> UserList {
    let users: Vec<UserItem> = users.iter().map(user_item).collect();
    UserList { count: users.len(), users }
}

/// The `get_user` result.
pub(crate) fn user_detail(u: WireUser) -> UserDetail {
    UserDetail {
        user: user_item(&u),
        recent_transcript: non_empty(u.recent_transcript),
        integrations: u.integrations.into_iter().flatten().filter(|i| !i.is_empty()).collect(),
        groups: u
            .user_groups
            .into_iter()
            .filter_map(|g| non_empty(g.name).or_else(|| non_empty(g.handle)))
            .collect(),
    }
}

/// Checks an id argument: letters, digits, `-` and `_`, as Fireflies' ids are.
pub(crate) fn check_id(field: &str, value: &str, from: &str) -> Result<String, ToolError> {
    let id = value.trim();
    let valid = !id.is_empty()
        && id.len() <= 128
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
    if valid {
        Ok(id.to_owned())
    } else {
        Err(ToolError::invalid_arguments(format!(
            "`{field}` must be a Fireflies id (letters and digits, as {from} returns it); got \
             `{value}`"
        )))
    }
}

impl Fireflies {
    async fn list_users(
        &self,
        _a: ListUsersArgs,
        ctx: &ToolContext,
    ) -> Result<UserList, ToolError> {
        let (query, variables) = Arguments::default().render("Users", "users", USER_FIELDS);
        let subject = Subject::listing("the team's users");
        let users: Option<Vec<WireUser>> =
            self.client.query(&query, variables, "users", &subject, ctx).await?;
        Ok(user_list(users.unwrap_or_default()))
    }

    async fn get_user(&self, a: GetUserArgs, ctx: &ToolContext) -> Result<UserDetail, ToolError> {
        let mut args = Arguments::default();
        let subject = match a.user_id.as_deref().map(str::trim).filter(|id| !id.is_empty()) {
            Some(id) => {
                let id = check_id("user_id", id, "list_users")?;
                args.add("id", "id", "String", json!(id));
                Subject::object("user", &id)
            }
            None => Subject::listing("the API key's user"),
        };
        let (query, variables) = args.render("User", "user", USER_DETAIL_FIELDS);
        let user: Option<WireUser> =
            self.client.query(&query, variables, "user", &subject, ctx).await?;
        let user = user.ok_or_else(|| {
            ToolError::not_found(format!("fireflies found no {}", subject.describe()))
        })?;
        Ok(user_detail(user))
    }
}

register_tool! {
    provider: Fireflies,
    name: "list_users",
    group: "users",
    description: "List the members of the Fireflies team: user id, name, email, admin role, \
                  number of transcripts and minutes used. Emails are what list_transcripts' \
                  participant and organizer filters take.",
    input: ListUsersArgs,
    output: UserList,
    handler: Fireflies::list_users,
}

register_tool! {
    provider: Fireflies,
    name: "get_user",
    group: "users",
    description: "Get one Fireflies user by `user_id`, or without it the owner of the API key: \
                  name, email, admin role, usage, integrations and user groups.",
    input: GetUserArgs,
    output: UserDetail,
    handler: Fireflies::get_user,
}
