//! The token's notifications: list them, mark them read.

use http::Method;
use quiver_plugin_sdk::prelude::*;

use crate::client::{paging, repo_path, uri, Subject};
use crate::model::repository_from_api_url;
use crate::GitHub;

/// Arguments of `list_notifications`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListNotificationsArgs {
    /// Only the notifications of this repository's owner (with `repo`).
    pub(crate) owner: Option<String>,
    /// Only the notifications of this repository (with `owner`).
    pub(crate) repo: Option<String>,
    /// Include notifications already read.
    #[serde(default)]
    pub(crate) all: bool,
    /// Only threads you take part in or are mentioned in.
    #[serde(default)]
    pub(crate) participating: bool,
    /// Only notifications updated at or after this time, ISO 8601.
    pub(crate) since: Option<String>,
    /// Only notifications updated before this time, ISO 8601.
    pub(crate) before: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 50.
    #[schemars(range(min = 1, max = 50))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `mark_notifications_read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MarkNotificationsReadArgs {
    /// One thread to mark read (`id` of `list_notifications`); else every notification (of the
    /// repository, with `owner` and `repo`).
    pub(crate) thread_id: Option<String>,
    /// Only this repository's notifications (with `repo`).
    pub(crate) owner: Option<String>,
    /// Only this repository's notifications (with `owner`).
    pub(crate) repo: Option<String>,
    /// Only notifications updated at or before this time, ISO 8601 (now when unset), so
    /// notifications newer than what you read stay unread.
    pub(crate) last_read_at: Option<String>,
}

/// A notification thread.
#[derive(Debug, Deserialize)]
pub(crate) struct WireThread {
    id: String,
    #[serde(default)]
    unread: bool,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
    subject: WireThreadSubject,
    #[serde(default)]
    repository: Option<WireThreadRepo>,
}

/// What a thread is about.
#[derive(Debug, Deserialize)]
pub(crate) struct WireThreadSubject {
    #[serde(default)]
    title: String,
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    url: Option<String>,
}

/// The repository of a thread; only the full name is kept.
#[derive(Debug, Deserialize)]
pub(crate) struct WireThreadRepo {
    full_name: String,
}

/// One notification thread.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Notification {
    /// The thread id (for `mark_notifications_read`).
    pub(crate) id: String,
    /// `owner/repo`.
    pub(crate) repository: Option<String>,
    /// `Issue`, `PullRequest`, `Release`, `Commit`, `CheckSuite`, `Discussion`…
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// The or pull request's title, the release's name…
    pub(crate) title: String,
    /// The issue or pull request number, when the thread is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) number: Option<u64>,
    /// Why you got it: `mention`, `review_requested`, `assign`, `author`, `ci_activity`,
    /// `subscribed`…
    pub(crate) reason: Option<String>,
    /// Whether it is unread.
    pub(crate) unread: bool,
    /// When it last changed.
    pub(crate) updated_at: Option<String>,
}

/// Result of `list_notifications`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct NotificationList {
    /// The notifications of this page, most recently updated first.
    pub(crate) notifications: Vec<Notification>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// Result of `mark_notifications_read`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MarkedRead {
    /// What was marked read: `thread 1`, `every notification of octo/hello`, `every
    /// notification`.
    pub(crate) marked: String,
    /// Set when GitHub marks them in the background (many notifications); they turn read
    /// shortly.
    pub(crate) in_background: bool,
}

/// The number at the end of an issue or pull request API URL (`…/issues/12`, `…/pulls/12`).
fn number_of(url: &str) -> Option<u64> {
    let (rest, last) = url.trim_end_matches('/').rsplit_once('/')?;
    if rest.ends_with("/issues") || rest.ends_with("/pulls") {
        last.parse().ok()
    } else {
        None
    }
}

/// The `list_notifications` result.
pub(crate) fn notification_list(page: Vec<WireThread>, next_page: Option<u32>) -> NotificationList {
    let notifications = page
        .into_iter()
        .map(|t| {
            let url = t.subject.url.as_deref();
            Notification {
                id: t.id,
                repository: t
                    .repository
                    .map(|r| r.full_name)
                    .or_else(|| url.and_then(repository_from_api_url)),
                kind: t.subject.kind,
                title: t.subject.title,
                number: url.and_then(number_of),
                reason: t.reason,
                unread: t.unread,
                updated_at: t.updated_at,
            }
        })
        .collect();
    NotificationList { notifications, next_page }
}

/// `owner/repo` when both are given, nothing when neither is, an error otherwise.
fn optional_repo(owner: Option<&str>, repo: Option<&str>) -> Result<Option<String>, ToolError> {
    match (owner, repo) {
        (Some(o), Some(r)) => repo_path(o, r).map(Some),
        (None, None) => Ok(None),
        _ => Err(ToolError::invalid_arguments(
            "give both `owner` and `repo` for one repository's notifications, or neither",
        )),
    }
}

impl GitHub {
    async fn list_notifications(
        &self,
        a: ListNotificationsArgs,
        ctx: &ToolContext,
    ) -> Result<NotificationList, ToolError> {
        let repository = optional_repo(a.owner.as_deref(), a.repo.as_deref())?;
        let (path, subject) = match &repository {
            Some(r) => {
                (format!("/repos/{r}/notifications"), Subject::listing("your notifications", r))
            }
            None => ("/notifications".to_owned(), Subject::global("your notifications")),
        };
        let mut query = vec![
            ("all", a.all.then(|| "true".to_owned())),
            ("participating", a.participating.then(|| "true".to_owned())),
            ("since", a.since),
            ("before", a.before),
        ];
        query.extend(paging(a.page, a.per_page.map(|n| n.min(50))));
        let (page, next) =
            self.client.get_json::<Vec<WireThread>>(&uri(&path, &query), &subject, ctx).await?;
        Ok(notification_list(page, next))
    }

    async fn mark_notifications_read(
        &self,
        a: MarkNotificationsReadArgs,
        ctx: &ToolContext,
    ) -> Result<MarkedRead, ToolError> {
        let repository = optional_repo(a.owner.as_deref(), a.repo.as_deref())?;
        let thread = a.thread_id.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        if let Some(thread) = thread {
            if !thread.chars().all(|c| c.is_ascii_digit()) {
                return Err(ToolError::invalid_arguments(format!(
                    "`thread_id` is a notification's numeric `id`; got `{thread}`"
                )));
            }
            let subject = Subject::global(format!("notification thread {thread}"))
                .not_found_says(format!("no notification thread {thread} for this token"));
            let uri = format!("/notifications/threads/{thread}");
            self.client.request(Method::PATCH, &uri, None, &subject, ctx).await?;
            return Ok(MarkedRead { marked: format!("thread {thread}"), in_background: false });
        }
        let mut body = json!({ "read": true });
        if let Some(at) = a.last_read_at {
            body["last_read_at"] = json!(at);
        }
        let (path, subject, marked) = match &repository {
            Some(r) => (
                format!("/repos/{r}/notifications"),
                Subject::action("marking notifications read", r),
                format!("every notification of {r}"),
            ),
            None => (
                "/notifications".to_owned(),
                Subject::global("marking your notifications read"),
                "every notification".to_owned(),
            ),
        };
        let reply = self.client.request(Method::PUT, &path, Some(&body), &subject, ctx).await?;
        Ok(MarkedRead { marked, in_background: reply.status.as_u16() == 202 })
    }
}

register_tool! {
    provider: GitHub,
    name: "list_notifications",
    group: "notifications",
    description: "List your GitHub notifications (unread by default), each with its \
                  repository, type, title, issue or pull request number and reason \
                  (mention, review_requested, assign…).",
    input: ListNotificationsArgs,
    output: NotificationList,
    handler: GitHub::list_notifications,
}

register_tool! {
    provider: GitHub,
    name: "mark_notifications_read",
    group: "notifications",
    description: "Mark one notification thread read, or all notifications (of one repository, \
                  or up to `last_read_at`).",
    input: MarkNotificationsReadArgs,
    output: MarkedRead,
    handler: GitHub::mark_notifications_read,
}
