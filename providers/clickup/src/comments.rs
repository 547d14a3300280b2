//! Task comments: list them (newest first, 25 a page) and add one.

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::text::truncate;
use reqwest::Method;

use crate::client::Subject;
use crate::model::{
    id_arg, is_false, iso_from_ms, lenient_string, lenient_u64, opt_id_arg, WireUser,
};
use crate::tasks::task_ref;
use crate::ClickUp;

/// ClickUp's page size for task comments (fixed by ClickUp).
pub(crate) const COMMENT_PAGE_SIZE: usize = 25;
/// Longest comment text returned, in bytes.
pub(crate) const COMMENT_MAX_BYTES: usize = 8 * 1024;

/// Arguments of `list_task_comments`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListTaskCommentsArgs {
    /// The task id (`task_id` from a listing or `get_task`), or a custom task id with
    /// `team_id`.
    #[serde(deserialize_with = "id_arg", alias = "id")]
    pub(crate) task_id: String,
    /// The workspace id; needed only when `task_id` is a custom task id (`DEV-42`).
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) team_id: Option<String>,
    /// For the next (older) page: `next_page.start` of the previous result (Unix
    /// milliseconds of its oldest comment).
    pub(crate) start: Option<u64>,
    /// For the next (older) page: `next_page.start_id` of the previous result.
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) start_id: Option<String>,
}

/// Arguments of `add_task_comment`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddTaskCommentArgs {
    /// The task id, or a custom task id with `team_id`.
    #[serde(deserialize_with = "id_arg", alias = "id")]
    pub(crate) task_id: String,
    /// The workspace id; needed only when `task_id` is a custom task id (`DEV-42`).
    #[serde(default, deserialize_with = "opt_id_arg")]
    pub(crate) team_id: Option<String>,
    /// The comment's text.
    #[serde(alias = "text", alias = "body")]
    pub(crate) comment_text: String,
    /// Assign the comment (as an action item) to this user id.
    pub(crate) assignee: Option<u64>,
    /// Notify everyone, the author included (default false: ClickUp's usual watchers).
    #[serde(default)]
    pub(crate) notify_all: bool,
}

/// `GET /task/{task_id}/comment`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireComments {
    #[serde(default)]
    comments: Vec<WireComment>,
}

#[derive(Debug, Deserialize)]
struct WireComment {
    #[serde(deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default)]
    comment_text: Option<String>,
    #[serde(default)]
    user: Option<WireUser>,
    #[serde(default)]
    resolved: bool,
    #[serde(default)]
    assignee: Option<WireUser>,
    #[serde(default, deserialize_with = "lenient_string")]
    date: Option<String>,
    #[serde(default, deserialize_with = "lenient_u64")]
    reply_count: Option<u64>,
}

/// `POST /task/{task_id}/comment`: `{"id": "458", "hist_id": "26508", "date": 1568036964079}`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireCreatedComment {
    #[serde(deserialize_with = "lenient_string")]
    id: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    date: Option<String>,
}

/// One comment.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Comment {
    /// The comment id.
    pub(crate) comment_id: String,
    /// Who wrote it.
    pub(crate) author: Option<String>,
    /// When, ISO 8601.
    pub(crate) date: Option<String>,
    /// The text (cut at 8 KiB, saying so).
    pub(crate) text: String,
    /// Who the comment is assigned to, as an action item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) assignee: Option<String>,
    /// Set when the assigned comment was resolved.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) resolved: bool,
    /// How many threaded replies it has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) replies: Option<u64>,
}

/// Where the next page of comments starts: pass both to `list_task_comments`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommentCursor {
    /// `start`: the oldest comment's time in Unix milliseconds.
    pub(crate) start: u64,
    /// `start_id`: the oldest comment's id.
    pub(crate) start_id: String,
}

/// Result of `list_task_comments`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommentList {
    /// The task.
    pub(crate) task_id: String,
    /// The comments of this page, newest first.
    pub(crate) comments: Vec<Comment>,
    /// The arguments for the next (older) page, or null on the last page.
    pub(crate) next_page: Option<CommentCursor>,
}

/// Result of `add_task_comment`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CreatedComment {
    /// The task commented on.
    pub(crate) task_id: String,
    /// The new comment's id.
    pub(crate) comment_id: Option<String>,
    /// When it was posted, ISO 8601.
    pub(crate) date: Option<String>,
}

/// The `list_task_comments` result.
pub(crate) fn comment_list(task_id: String, wire: WireComments) -> CommentList {
    let full_page = wire.comments.len() >= COMMENT_PAGE_SIZE;
    let next_page = wire.comments.last().filter(|_| full_page).and_then(|c| {
        Some(CommentCursor { start: c.date.as_deref()?.parse().ok()?, start_id: c.id.clone()? })
    });
    let comments = wire
        .comments
        .into_iter()
        .map(|c| Comment {
            comment_id: c.id.unwrap_or_default(),
            author: c.user.as_ref().map(WireUser::name),
            date: iso_from_ms(c.date.as_deref()),
            text: truncate(c.comment_text.as_deref().unwrap_or(""), COMMENT_MAX_BYTES).0,
            assignee: c.assignee.as_ref().map(WireUser::name),
            resolved: c.resolved,
            replies: c.reply_count.filter(|n| *n > 0),
        })
        .collect();
    CommentList { task_id, comments, next_page }
}

impl ClickUp {
    async fn list_task_comments(
        &self,
        a: ListTaskCommentsArgs,
        ctx: &ToolContext,
    ) -> Result<CommentList, ToolError> {
        let mut query = task_ref(&a.task_id, a.team_id.as_deref())?;
        match (a.start, a.start_id) {
            (Some(start), Some(start_id)) => {
                query.push(("start", start.to_string()));
                query.push(("start_id", start_id));
            }
            (None, None) => {}
            _ => {
                return Err(ToolError::invalid_arguments(
                    "give both `start` and `start_id` (from `next_page` of the previous result), \
                     or neither for the newest comments",
                ))
            }
        }
        let subject = Subject::of("the comments", "task", &a.task_id);
        let path = format!("/task/{}/comment", a.task_id);
        let wire: WireComments = self.client.get_json(&path, &query, &subject, ctx).await?;
        // ClickUp does not say whether a comment's author may edit the task: named only.
        for (i, comment) in wire.comments.iter().enumerate() {
            if let Some(user) = &comment.user {
                ctx.label_author(format!("/comments/{i}/text"), user.name(), None);
            }
        }
        Ok(comment_list(a.task_id, wire))
    }

    async fn add_task_comment(
        &self,
        a: AddTaskCommentArgs,
        ctx: &ToolContext,
    ) -> Result<CreatedComment, ToolError> {
        let query = task_ref(&a.task_id, a.team_id.as_deref())?;
        if a.comment_text.trim().is_empty() {
            return Err(ToolError::invalid_arguments("`comment_text` is empty; write the comment"));
        }
        let mut body = json!({ "comment_text": a.comment_text, "notify_all": a.notify_all });
        if let Some(assignee) = a.assignee {
            body["assignee"] = json!(assignee);
        }
        let subject = Subject::action("commenting on", "task", &a.task_id);
        let path = format!("/task/{}/comment", a.task_id);
        let created: WireCreatedComment =
            self.client.send_json(Method::POST, &path, &query, &body, &subject, ctx).await?;
        Ok(CreatedComment {
            task_id: a.task_id,
            comment_id: created.id,
            date: iso_from_ms(created.date.as_deref()),
        })
    }
}

register_tool! {
    provider: ClickUp,
    name: "list_task_comments",
    group: "comments",
    description: "List the comments of a ClickUp task, newest first, 25 a page; `next_page` \
                  gives the `start` and `start_id` of the next (older) page.",
    input: ListTaskCommentsArgs,
    output: CommentList,
    handler: ClickUp::list_task_comments,
}

register_tool! {
    provider: ClickUp,
    name: "add_task_comment",
    group: "comments",
    description: "Add a comment to a ClickUp task, optionally assigned to a user as an action \
                  item.",
    input: AddTaskCommentArgs,
    output: CreatedComment,
    handler: ClickUp::add_task_comment,
}
