//! An issue's record: its change log (who changed which field from what to what) and its
//! attachments' metadata.

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::text::truncate;

use crate::client::{check_key, endpoint, Api, Subject};
use crate::model::{next_start, page_size, person, Fields};
use crate::{Deployment, Jira};

/// Longest old or new value of one change, in bytes (a description change carries both texts).
pub(crate) const CHANGE_VALUE_MAX_BYTES: usize = 512;

/// Arguments of `list_changelog`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListChangelogArgs {
    /// The issue key, e.g. `PROJ-123`.
    #[serde(alias = "issue_key", alias = "issueKey")]
    pub(crate) key: String,
    /// Only changes of these fields, as the change log names them (case-insensitive), e.g.
    /// `["status", "assignee", "Sprint"]`; every field by default.
    pub(crate) fields: Option<Vec<String>>,
    /// Change groups (one save of the issue each) per page, oldest first: 50 by default, at
    /// most 100.
    #[schemars(range(min = 1, max = 100))]
    #[serde(alias = "maxResults")]
    pub(crate) max_results: Option<u32>,
    /// The offset of the first change group (the previous page's `next_start_at`).
    #[serde(alias = "startAt")]
    pub(crate) start_at: Option<u32>,
}

/// Arguments of `list_attachments`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListAttachmentsArgs {
    /// The issue key, e.g. `PROJ-123`.
    #[serde(alias = "issue_key", alias = "issueKey")]
    pub(crate) key: String,
}

/// One field's change as Jira sends it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireChangeItem {
    #[serde(default)]
    field: String,
    #[serde(default)]
    field_id: Option<String>,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    from_string: Option<String>,
    #[serde(default)]
    to: Option<String>,
    #[serde(default)]
    to_string: Option<String>,
}

/// One change group (a save of the issue) as Jira sends it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireHistory {
    id: String,
    #[serde(default)]
    author: Option<Value>,
    #[serde(default)]
    created: Option<String>,
    #[serde(default)]
    items: Vec<WireChangeItem>,
}

/// `GET /rest/api/3/issue/{key}/changelog` (Cloud): a page bean.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WireChangelogPage {
    #[serde(default)]
    values: Vec<WireHistory>,
    #[serde(default)]
    start_at: u64,
    #[serde(default)]
    max_results: Option<u64>,
    #[serde(default)]
    total: Option<u64>,
    #[serde(default)]
    is_last: Option<bool>,
}

/// `changelog` of `GET /rest/api/2/issue/{key}?expand=changelog` (Server/Data Center, which has
/// no changelog endpoint): every change group at once.
#[derive(Debug, Deserialize)]
pub(crate) struct WireExpandedChangelog {
    #[serde(default)]
    histories: Vec<WireHistory>,
}

/// An issue with `expand=changelog`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireIssueWithChangelog {
    #[serde(default)]
    changelog: Option<WireExpandedChangelog>,
}

/// An issue with only `fields=attachment`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireIssueAttachments {
    #[serde(default)]
    fields: Fields,
}

/// One field's change.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Change {
    /// The field, e.g. `status`, `assignee`, `Story Points`.
    pub(crate) field: String,
    /// The value before (as shown; cut at 512 bytes); null when it was empty.
    pub(crate) from: Option<String>,
    /// The value after (as shown; cut at 512 bytes); null when it was cleared.
    pub(crate) to: Option<String>,
}

/// One change group: what one person changed at one time.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ChangeGroup {
    /// The change group id.
    pub(crate) id: String,
    /// Who changed it (display name).
    pub(crate) author: Option<String>,
    /// When.
    pub(crate) created: Option<String>,
    /// The fields changed.
    pub(crate) changes: Vec<Change>,
}

/// Result of `list_changelog`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Changelog {
    /// The issue key.
    pub(crate) key: String,
    /// The change groups of this page, oldest first (with `fields`, only those that changed one
    /// of them).
    pub(crate) history: Vec<ChangeGroup>,
    /// How many change groups the issue has.
    pub(crate) total: Option<u64>,
    /// Pass as `start_at` for the next page; null on the last page.
    pub(crate) next_start_at: Option<u64>,
}

/// One attachment's metadata.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Attachment {
    /// The attachment id.
    pub(crate) id: String,
    /// The file name.
    pub(crate) filename: String,
    /// Its size in bytes.
    pub(crate) size: Option<u64>,
    /// Its MIME type, e.g. `image/png`.
    pub(crate) mime_type: Option<String>,
    /// Who attached it (display name).
    pub(crate) author: Option<String>,
    /// When it was attached.
    pub(crate) created: Option<String>,
    /// The download URL (needs the same credentials).
    pub(crate) url: Option<String>,
}

/// Result of `list_attachments`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AttachmentList {
    /// The issue key.
    pub(crate) key: String,
    /// The attachments, as Jira lists them.
    pub(crate) attachments: Vec<Attachment>,
    /// Their total size in bytes.
    pub(crate) total_bytes: u64,
}

fn value_text(shown: Option<String>, raw: Option<String>) -> Option<String> {
    shown
        .or(raw)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .map(|v| truncate(&v, CHANGE_VALUE_MAX_BYTES).0)
}

/// The change groups kept: every one, or with `only` those touching one of its fields (and only
/// those fields' changes).
fn change_groups(histories: Vec<WireHistory>, only: &[String]) -> Vec<ChangeGroup> {
    let wanted = |item: &WireChangeItem| {
        only.is_empty()
            || only.iter().any(|f| {
                item.field.eq_ignore_ascii_case(f)
                    || item.field_id.as_deref().is_some_and(|id| id.eq_ignore_ascii_case(f))
            })
    };
    histories
        .into_iter()
        .filter_map(|h| {
            let changes: Vec<Change> = h
                .items
                .into_iter()
                .filter(wanted)
                .map(|i| Change {
                    from: value_text(i.from_string, i.from),
                    to: value_text(i.to_string, i.to),
                    field: i.field,
                })
                .collect();
            (!changes.is_empty()).then(|| ChangeGroup {
                id: h.id,
                author: h.author.as_ref().and_then(person),
                created: h.created,
                changes,
            })
        })
        .collect()
}

/// The result of `list_changelog` from Cloud's page.
pub(crate) fn changelog_page(key: String, page: WireChangelogPage, only: &[String]) -> Changelog {
    let next =
        next_start(page.start_at, page.values.len(), page.max_results, page.total, page.is_last);
    Changelog {
        key,
        history: change_groups(page.values, only),
        total: page.total,
        next_start_at: next,
    }
}

/// The result of `list_changelog` from Server's whole change log, paged here.
pub(crate) fn changelog_slice(
    key: String,
    all: Vec<WireHistory>,
    start_at: u64,
    max: u64,
    only: &[String],
) -> Changelog {
    let total = all.len() as u64;
    let page: Vec<WireHistory> =
        all.into_iter().skip(start_at as usize).take(max as usize).collect();
    let next = next_start(start_at, page.len(), Some(max), Some(total), None);
    Changelog { key, history: change_groups(page, only), total: Some(total), next_start_at: next }
}

/// The result of `list_attachments`.
pub(crate) fn attachment_list(key: String, issue: WireIssueAttachments) -> AttachmentList {
    let text = |a: &Value, k: &str| a.get(k).and_then(Value::as_str).map(str::to_owned);
    let attachments: Vec<Attachment> = issue
        .fields
        .get("attachment")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|a| {
                    Some(Attachment {
                        id: a.get("id").map(|id| match id {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })?,
                        filename: text(a, "filename")?,
                        size: a.get("size").and_then(Value::as_u64),
                        mime_type: text(a, "mimeType"),
                        author: a.get("author").and_then(person),
                        created: text(a, "created"),
                        url: text(a, "content"),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    AttachmentList {
        key,
        total_bytes: attachments.iter().filter_map(|a| a.size).sum(),
        attachments,
    }
}

impl Jira {
    async fn list_changelog(
        &self,
        args: ListChangelogArgs,
        ctx: &ToolContext,
    ) -> Result<Changelog, ToolError> {
        let key = check_key("key", &args.key)?;
        let only: Vec<String> = args
            .fields
            .unwrap_or_default()
            .into_iter()
            .map(|f| f.trim().to_owned())
            .filter(|f| !f.is_empty())
            .collect();
        let start_at = args.start_at.unwrap_or(0);
        let max = page_size(args.max_results, 50, 100);
        let subject = Subject::of_issue("the change log", &key);
        match self.client.deployment() {
            Deployment::Cloud => {
                let path = endpoint(
                    &format!("/issue/{key}/changelog"),
                    &[
                        ("startAt", Some(start_at.to_string())),
                        ("maxResults", Some(max.to_string())),
                    ],
                );
                let page = self.client.get_json(Api::Core, &path, &subject, ctx).await?;
                Ok(changelog_page(key, page, &only))
            }
            Deployment::Server => {
                let path = format!("/issue/{key}?fields=summary&expand=changelog");
                let issue: WireIssueWithChangelog =
                    self.client.get_json(Api::Core, &path, &subject, ctx).await?;
                let all = issue.changelog.map(|c| c.histories).unwrap_or_default();
                Ok(changelog_slice(key, all, start_at.into(), max.into(), &only))
            }
        }
    }

    async fn list_attachments(
        &self,
        args: ListAttachmentsArgs,
        ctx: &ToolContext,
    ) -> Result<AttachmentList, ToolError> {
        let key = check_key("key", &args.key)?;
        let path = format!("/issue/{key}?fields=attachment");
        let subject = Subject::of_issue("the attachments", &key);
        let issue = self.client.get_json(Api::Core, &path, &subject, ctx).await?;
        Ok(attachment_list(key, issue))
    }
}

register_tool! {
    provider: Jira,
    name: "list_changelog",
    group: "issues",
    description: "List an issue's change history, oldest first: who changed which fields from \
                  what to what, and when; optionally only some fields (`[\"status\"]` gives \
                  when it moved through the workflow). Returns `next_start_at` for more.",
    input: ListChangelogArgs,
    output: Changelog,
    handler: Jira::list_changelog,
}

register_tool! {
    provider: Jira,
    name: "list_attachments",
    group: "issues",
    description: "List an issue's attachments: file name, size, MIME type, who attached it \
                  and when, and the download URL (metadata only; nothing is downloaded).",
    input: ListAttachmentsArgs,
    output: AttachmentList,
    handler: Jira::list_attachments,
}
