//! Comments: list an issue's comments, add one.

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::text::truncate;
use reqwest::Method;

use crate::adf;
use crate::client::{check_key, endpoint, Api, Subject};
use crate::issues::rich_text;
use crate::model::{is_false, next_start, page_size, person};
use crate::Jira;

/// Longest comment body returned, in bytes.
pub(crate) const COMMENT_MAX_BYTES: usize = 8 * 1024;

/// Arguments of `list_comments`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListCommentsArgs {
    /// The issue key, e.g. `PROJ-123`.
    #[serde(alias = "issue_key", alias = "issueKey")]
    pub(crate) key: String,
    /// Newest first instead of oldest first.
    #[serde(default)]
    pub(crate) newest_first: bool,
    /// Comments per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    #[serde(alias = "maxResults")]
    pub(crate) max_results: Option<u32>,
    /// The offset of the first comment (the previous page's `next_start_at`).
    #[serde(alias = "startAt")]
    pub(crate) start_at: Option<u32>,
}

/// Arguments of `add_comment`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddCommentArgs {
    /// The issue key, e.g. `PROJ-123`.
    #[serde(alias = "issue_key", alias = "issueKey")]
    pub(crate) key: String,
    /// The comment, as plain text (Server/Data Center: wiki markup).
    pub(crate) body: String,
}

/// A comment as Jira sends it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireComment {
    id: String,
    #[serde(default)]
    author: Option<Value>,
    #[serde(default)]
    body: Option<Value>,
    #[serde(default)]
    created: Option<String>,
    #[serde(default)]
    updated: Option<String>,
}

/// `GET /issue/{key}/comment`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireComments {
    #[serde(default)]
    comments: Vec<WireComment>,
    #[serde(default)]
    start_at: u64,
    #[serde(default)]
    max_results: Option<u64>,
    #[serde(default)]
    total: Option<u64>,
}

/// One comment.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Comment {
    /// The comment id.
    pub(crate) id: String,
    /// The author's display name.
    pub(crate) author: Option<String>,
    /// When it was written.
    pub(crate) created: Option<String>,
    /// When it was edited, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) edited: Option<String>,
    /// The text (cut at 8 KiB, saying so).
    pub(crate) body: Option<String>,
}

/// Result of `list_comments`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommentList {
    /// The issue key.
    pub(crate) key: String,
    /// The comments of this page.
    pub(crate) comments: Vec<Comment>,
    /// How many comments the issue has.
    pub(crate) total: Option<u64>,
    /// Pass as `start_at` for the next page; null on the last page.
    pub(crate) next_start_at: Option<u64>,
    /// Set when the page is newest first.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) newest_first: bool,
}

/// Result of `add_comment`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AddedComment {
    /// The issue key.
    pub(crate) key: String,
    /// The new comment's id.
    pub(crate) id: String,
    /// Its author, as Jira recorded it.
    pub(crate) author: Option<String>,
    /// When it was written.
    pub(crate) created: Option<String>,
}

fn comment(c: WireComment) -> Comment {
    Comment {
        author: c.author.as_ref().and_then(person),
        edited: c.updated.filter(|u| Some(u) != c.created.as_ref()),
        created: c.created,
        body: c.body.as_ref().and_then(adf::text_of).map(|t| truncate(&t, COMMENT_MAX_BYTES).0),
        id: c.id,
    }
}

/// The result of `list_comments`.
pub(crate) fn comment_list(key: String, page: WireComments, newest_first: bool) -> CommentList {
    let next = next_start(page.start_at, page.comments.len(), page.max_results, page.total, None);
    CommentList {
        key,
        comments: page.comments.into_iter().map(comment).collect(),
        total: page.total,
        next_start_at: next,
        newest_first,
    }
}

impl Jira {
    async fn list_comments(
        &self,
        args: ListCommentsArgs,
        ctx: &ToolContext,
    ) -> Result<CommentList, ToolError> {
        let key = check_key("key", &args.key)?;
        let path = endpoint(
            &format!("/issue/{key}/comment"),
            &[
                ("startAt", Some(args.start_at.unwrap_or(0).to_string())),
                ("maxResults", Some(page_size(args.max_results, 20, 100).to_string())),
                ("orderBy", Some(if args.newest_first { "-created" } else { "created" }.into())),
            ],
        );
        let subject = Subject::of_issue("the comments", &key);
        let page: WireComments = self.client.get_json(Api::Core, &path, &subject, ctx).await?;
        let texts = page
            .comments
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((format!("/comments/{i}/body"), c.author.as_ref()?)))
            .collect();
        self.label_authors(&key, texts, ctx).await;
        Ok(comment_list(key, page, args.newest_first))
    }

    async fn add_comment(
        &self,
        args: AddCommentArgs,
        ctx: &ToolContext,
    ) -> Result<AddedComment, ToolError> {
        let key = check_key("key", &args.key)?;
        if args.body.trim().is_empty() {
            return Err(ToolError::invalid_arguments("`body` is empty"));
        }
        let body = json!({ "body": rich_text(&args.body, self.client.deployment()) });
        let subject = Subject::of_issue("a new comment", &key);
        let created: WireComment = self
            .client
            .send_json(
                Method::POST,
                Api::Core,
                &format!("/issue/{key}/comment"),
                &body,
                &subject,
                ctx,
            )
            .await?;
        let c = comment(created);
        Ok(AddedComment { key, id: c.id, author: c.author, created: c.created })
    }
}

register_tool! {
    provider: Jira,
    name: "list_comments",
    group: "comments",
    description: "List an issue's comments (oldest first unless `newest_first`), each with \
                  author, time and text. Returns `next_start_at` for more.",
    input: ListCommentsArgs,
    output: CommentList,
    handler: Jira::list_comments,
}

register_tool! {
    provider: Jira,
    name: "add_comment",
    group: "comments",
    description: "Add a comment (plain text) to an issue.",
    input: AddCommentArgs,
    output: AddedComment,
    handler: Jira::add_comment,
}
