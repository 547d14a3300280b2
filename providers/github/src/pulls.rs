//! Pull requests: list, get, changed files, reviews, review comments; create, update, merge,
//! request reviewers, review (with line comments) and the whole diff.

use http::Method;
use quiver_plugin_sdk::prelude::*;

use crate::client::{paging, repo_path, uri, Subject};
use crate::issues::{can_write, BODY_MAX_BYTES, COMMENT_MAX_BYTES};
use crate::model::{
    is_false, label_names, login, logins, nullable, StateFilter, WireLabel, WireUser,
};
use crate::text::{last_lines, truncate, truncate_opt};
use crate::GitHub;

/// Longest patch returned per file unless the call asks otherwise, in bytes.
pub(crate) const PATCH_MAX_BYTES: usize = 4 * 1024;
/// Lines of a review comment's diff hunk kept (the lines just above the comment).
const HUNK_LINES: usize = 6;

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// Arguments of `list_pull_requests`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListPullRequestsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// `open` (the default), `closed` (includes merged) or `all`.
    pub(crate) state: Option<StateFilter>,
    /// Only pull requests from this head branch, written `user:branch` (e.g. `octocat:fix-save`).
    pub(crate) head: Option<String>,
    /// Only pull requests into this base branch, e.g. `main`.
    pub(crate) base: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `get_pull_request`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetPullRequestArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The pull request number.
    #[serde(alias = "pull_number")]
    pub(crate) number: u64,
}

/// Arguments of the pull request listings (`list_pull_request_reviews`,
/// `list_pull_request_review_comments`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PullRequestPageArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The pull request number.
    #[serde(alias = "pull_number")]
    pub(crate) number: u64,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `list_pull_request_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListPullRequestFilesArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The pull request number.
    #[serde(alias = "pull_number")]
    pub(crate) number: u64,
    /// Longest patch kept per file, in bytes (4096 by default; 0 leaves patches out). Longer
    /// patches are cut, saying how much was cut.
    #[schemars(range(max = 65536))]
    pub(crate) max_patch_bytes: Option<usize>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

// ---------------------------------------------------------------------------------------------
// What GitHub sends (only the kept fields)
// ---------------------------------------------------------------------------------------------

/// A pull request, as the list and get endpoints send it (the get endpoint adds the counts and
/// merge state).
#[derive(Debug, Deserialize)]
pub(crate) struct WirePull {
    number: u64,
    #[serde(default)]
    title: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    draft: Option<bool>,
    #[serde(default)]
    user: Option<WireUser>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    labels: Vec<WireLabel>,
    #[serde(default, deserialize_with = "nullable")]
    assignees: Vec<WireUser>,
    #[serde(default, deserialize_with = "nullable")]
    requested_reviewers: Vec<WireUser>,
    head: WireRef,
    base: WireRef,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
    #[serde(default)]
    closed_at: Option<String>,
    #[serde(default)]
    merged_at: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    merged: Option<bool>,
    #[serde(default)]
    mergeable: Option<bool>,
    #[serde(default)]
    mergeable_state: Option<String>,
    #[serde(default)]
    merged_by: Option<WireUser>,
    #[serde(default)]
    merge_commit_sha: Option<String>,
    #[serde(default)]
    comments: Option<u64>,
    #[serde(default)]
    review_comments: Option<u64>,
    #[serde(default)]
    commits: Option<u64>,
    #[serde(default)]
    additions: Option<u64>,
    #[serde(default)]
    deletions: Option<u64>,
    #[serde(default)]
    changed_files: Option<u64>,
    #[serde(default)]
    auto_merge: Option<Value>,
    #[serde(default)]
    milestone: Option<WireTitle>,
    #[serde(default)]
    author_association: Option<String>,
}

/// A head or base: branch, commit and (for forks) the repository's full name.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRef {
    #[serde(rename = "ref")]
    git_ref: String,
    sha: String,
    #[serde(default)]
    repo: Option<WireRepoName>,
}

/// A nested repository; only the full name is kept.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRepoName {
    full_name: String,
    #[serde(default)]
    private: Option<bool>,
}

/// Anything with a title (a milestone).
#[derive(Debug, Deserialize)]
pub(crate) struct WireTitle {
    title: String,
}

/// A changed file ("diff entry").
#[derive(Debug, Deserialize)]
pub(crate) struct WireFile {
    filename: String,
    status: String,
    #[serde(default)]
    additions: u64,
    #[serde(default)]
    deletions: u64,
    #[serde(default)]
    previous_filename: Option<String>,
    #[serde(default)]
    patch: Option<String>,
}

/// A review.
#[derive(Debug, Deserialize)]
pub(crate) struct WireReview {
    id: u64,
    #[serde(default)]
    user: Option<WireUser>,
    #[serde(default)]
    state: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    submitted_at: Option<String>,
    #[serde(default)]
    commit_id: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    author_association: Option<String>,
}

/// A review comment on the diff.
#[derive(Debug, Deserialize)]
pub(crate) struct WireReviewComment {
    id: u64,
    #[serde(default)]
    pull_request_review_id: Option<u64>,
    #[serde(default)]
    in_reply_to_id: Option<u64>,
    #[serde(default)]
    user: Option<WireUser>,
    #[serde(default)]
    path: String,
    #[serde(default)]
    line: Option<u64>,
    #[serde(default)]
    original_line: Option<u64>,
    #[serde(default)]
    start_line: Option<u64>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    diff_hunk: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    author_association: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// What the tools return
// ---------------------------------------------------------------------------------------------

/// One pull request in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PullSummary {
    /// The pull request number.
    pub(crate) number: u64,
    /// The title.
    pub(crate) title: String,
    /// `open`, `closed` or `merged`.
    pub(crate) state: String,
    /// Set for a draft.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) draft: bool,
    /// The author's login.
    pub(crate) author: Option<String>,
    /// The branch with the changes.
    pub(crate) head_ref: String,
    /// The head branch's repository, when it is a fork (`user/repo`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) head_repo: Option<String>,
    /// The head commit.
    pub(crate) head_sha: String,
    /// The branch the changes go into.
    pub(crate) base_ref: String,
    /// Label names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) labels: Vec<String>,
    /// When it was opened.
    pub(crate) created_at: Option<String>,
    /// When it last changed.
    pub(crate) updated_at: Option<String>,
    /// When it was merged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merged_at: Option<String>,
    /// When it was closed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) closed_at: Option<String>,
    /// The pull request on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `list_pull_requests`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PullList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The pull requests of this page, newest first.
    pub(crate) pull_requests: Vec<PullSummary>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// Result of `get_pull_request`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PullDetail {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// Number, title, state, branches, labels and times.
    #[serde(flatten)]
    pub(crate) pull: PullSummary,
    /// The description, in Markdown (cut at 32 KiB, saying so).
    pub(crate) body: Option<String>,
    /// The base commit the changes were compared with.
    pub(crate) base_sha: String,
    /// Whether it was merged.
    pub(crate) merged: bool,
    /// Whether GitHub can merge it (null while GitHub is still computing it).
    pub(crate) mergeable: Option<bool>,
    /// `clean`, `dirty` (conflicts), `blocked` (checks or reviews missing), `behind`, `unstable`
    /// (failing checks), `draft`, `unknown`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mergeable_state: Option<String>,
    /// Who merged it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merged_by: Option<String>,
    /// The merge commit, once merged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merge_commit_sha: Option<String>,
    /// Whether auto-merge is enabled.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) auto_merge: bool,
    /// Assignee logins.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) assignees: Vec<String>,
    /// Logins asked for a review that have not reviewed yet.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) requested_reviewers: Vec<String>,
    /// The milestone's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) milestone: Option<String>,
    /// Conversation comments.
    pub(crate) comments: Option<u64>,
    /// Review comments on the diff.
    pub(crate) review_comments: Option<u64>,
    /// Commits.
    pub(crate) commits: Option<u64>,
    /// Added lines.
    pub(crate) additions: Option<u64>,
    /// Deleted lines.
    pub(crate) deletions: Option<u64>,
    /// Changed files.
    pub(crate) changed_files: Option<u64>,
}

/// One changed file.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct FileChange {
    /// The file's path.
    pub(crate) filename: String,
    /// `added`, `removed`, `modified`, `renamed`, `copied`, `changed` or `unchanged`.
    pub(crate) status: String,
    /// Added lines.
    pub(crate) additions: u64,
    /// Deleted lines.
    pub(crate) deletions: u64,
    /// The path before a rename.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) previous_filename: Option<String>,
    /// The unified diff of the file (absent for binary files and very large diffs; cut, saying
    /// so, beyond `max_patch_bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) patch: Option<String>,
}

/// Result of `list_pull_request_files`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct FileList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The pull request number.
    pub(crate) number: u64,
    /// The changed files of this page.
    pub(crate) files: Vec<FileChange>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// One review.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Review {
    /// The review id.
    pub(crate) id: u64,
    /// The reviewer's login.
    pub(crate) author: Option<String>,
    /// `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED` or `PENDING`.
    pub(crate) state: String,
    /// The review's summary text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) body: Option<String>,
    /// When it was submitted.
    pub(crate) submitted_at: Option<String>,
    /// The commit reviewed (compare with the head SHA to see whether the review is stale).
    pub(crate) commit_id: Option<String>,
    /// The review on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `list_pull_request_reviews`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReviewList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The pull request number.
    pub(crate) number: u64,
    /// The reviews of this page, oldest first.
    pub(crate) reviews: Vec<Review>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// One review comment on the diff.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReviewComment {
    /// The comment id.
    pub(crate) id: u64,
    /// The review it belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) review_id: Option<u64>,
    /// The comment this one answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) in_reply_to_id: Option<u64>,
    /// The author's login.
    pub(crate) author: Option<String>,
    /// The file commented on.
    pub(crate) path: String,
    /// The line commented on (in the current diff, else in the diff it was written on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u64>,
    /// The first line of a multi-line comment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) start_line: Option<u64>,
    /// Set when the line no longer exists in the current diff.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) outdated: bool,
    /// The comment, in Markdown (cut at 8 KiB, saying so).
    pub(crate) body: Option<String>,
    /// The last lines of the diff hunk above the comment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) diff_hunk: Option<String>,
    /// When it was written.
    pub(crate) created_at: Option<String>,
    /// The comment on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `list_pull_request_review_comments`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReviewCommentList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The pull request number.
    pub(crate) number: u64,
    /// The review comments of this page, oldest first.
    pub(crate) comments: Vec<ReviewComment>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

// ---------------------------------------------------------------------------------------------
// Mapping (pure, so tests can run it on recorded responses)
// ---------------------------------------------------------------------------------------------

impl WirePull {
    fn summary(&self) -> PullSummary {
        let base_repo = self.base.repo.as_ref().map(|r| r.full_name.as_str());
        let head_repo = self
            .head
            .repo
            .as_ref()
            .map(|r| r.full_name.clone())
            .filter(|head| Some(head.as_str()) != base_repo);
        let state = if self.merged_at.is_some() || self.merged == Some(true) {
            "merged".to_owned()
        } else {
            self.state.clone()
        };
        PullSummary {
            number: self.number,
            title: self.title.clone(),
            state,
            draft: self.draft.unwrap_or(false),
            author: self.user.as_ref().map(|u| u.login.clone()),
            head_ref: self.head.git_ref.clone(),
            head_repo,
            head_sha: self.head.sha.clone(),
            base_ref: self.base.git_ref.clone(),
            labels: label_names(&self.labels),
            created_at: self.created_at.clone(),
            updated_at: self.updated_at.clone(),
            merged_at: self.merged_at.clone(),
            closed_at: self.closed_at.clone(),
            html_url: self.html_url.clone(),
        }
    }
}

/// The `list_pull_requests` result.
pub(crate) fn pull_list(
    repository: String,
    page: Vec<WirePull>,
    next_page: Option<u32>,
) -> PullList {
    PullList { repository, pull_requests: page.iter().map(WirePull::summary).collect(), next_page }
}

/// The `get_pull_request` result.
pub(crate) fn pull_detail(repository: String, p: WirePull) -> PullDetail {
    let pull = p.summary();
    PullDetail {
        repository,
        pull,
        body: truncate_opt(p.body, BODY_MAX_BYTES),
        base_sha: p.base.sha,
        merged: p.merged.unwrap_or(p.merged_at.is_some()),
        mergeable: p.mergeable,
        mergeable_state: p.mergeable_state,
        merged_by: login(p.merged_by),
        merge_commit_sha: p.merge_commit_sha.filter(|_| p.merged_at.is_some()),
        auto_merge: p.auto_merge.is_some_and(|v| !v.is_null()),
        assignees: logins(p.assignees),
        requested_reviewers: logins(p.requested_reviewers),
        milestone: p.milestone.map(|m| m.title),
        comments: p.comments,
        review_comments: p.review_comments,
        commits: p.commits,
        additions: p.additions,
        deletions: p.deletions,
        changed_files: p.changed_files,
    }
}

/// The `list_pull_request_files` result, patches cut to `max_patch_bytes` (0 drops them).
pub(crate) fn file_list(
    repository: String,
    number: u64,
    page: Vec<WireFile>,
    max_patch_bytes: usize,
    next_page: Option<u32>,
) -> FileList {
    FileList { repository, number, files: file_changes(page, max_patch_bytes), next_page }
}

/// Changed files (of a pull request, a commit or a comparison), patches cut to
/// `max_patch_bytes` (0 drops them).
pub(crate) fn file_changes(files: Vec<WireFile>, max_patch_bytes: usize) -> Vec<FileChange> {
    files
        .into_iter()
        .map(|f| FileChange {
            filename: f.filename,
            status: f.status,
            additions: f.additions,
            deletions: f.deletions,
            previous_filename: f.previous_filename,
            patch: f.patch.filter(|_| max_patch_bytes > 0).map(|p| truncate(&p, max_patch_bytes).0),
        })
        .collect()
}

/// The `list_pull_request_reviews` result.
pub(crate) fn review_list(
    repository: String,
    number: u64,
    page: Vec<WireReview>,
    next_page: Option<u32>,
) -> ReviewList {
    ReviewList { repository, number, reviews: page.into_iter().map(review_of).collect(), next_page }
}

/// The `list_pull_request_review_comments` result.
pub(crate) fn review_comment_list(
    repository: String,
    number: u64,
    page: Vec<WireReviewComment>,
    next_page: Option<u32>,
) -> ReviewCommentList {
    let comments = page
        .into_iter()
        .map(|c| ReviewComment {
            id: c.id,
            review_id: c.pull_request_review_id,
            in_reply_to_id: c.in_reply_to_id,
            author: login(c.user),
            path: c.path,
            line: c.line.or(c.original_line),
            start_line: c.start_line,
            outdated: c.line.is_none() && c.original_line.is_some(),
            body: c.body.map(|b| truncate(&b, COMMENT_MAX_BYTES).0),
            diff_hunk: c.diff_hunk.map(|h| last_lines(&h, HUNK_LINES)),
            created_at: c.created_at,
            html_url: c.html_url,
        })
        .collect();
    ReviewCommentList { repository, number, comments, next_page }
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

impl GitHub {
    async fn list_pull_requests(
        &self,
        a: ListPullRequestsArgs,
        ctx: &ToolContext,
    ) -> Result<PullList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let mut query = vec![
            ("state", a.state.map(|s| s.as_str().to_owned())),
            ("head", a.head),
            ("base", a.base),
        ];
        query.extend(paging(a.page, a.per_page));
        let uri = uri(&format!("/repos/{repository}/pulls"), &query);
        let subject = Subject::listing("the pull requests", &repository);
        let (page, next) = self.client.get_json::<Vec<WirePull>>(&uri, &subject, ctx).await?;
        Ok(pull_list(repository, page, next))
    }

    async fn get_pull_request(
        &self,
        a: GetPullRequestArgs,
        ctx: &ToolContext,
    ) -> Result<PullDetail, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let uri = format!("/repos/{repository}/pulls/{}", a.number);
        let subject = Subject::object(format!("pull request #{}", a.number), &repository);
        let (pull, _) = self.client.get_json::<WirePull>(&uri, &subject, ctx).await?;
        if let Some(user) = &pull.user {
            ctx.label_author("/body", &user.login, can_write(pull.author_association.as_deref()));
        }
        // A pull request says its base repository's visibility itself.
        if let Some(private) = pull.base.repo.as_ref().and_then(|r| r.private) {
            ctx.label_visibility(!private);
        }
        Ok(pull_detail(repository, pull))
    }

    async fn list_pull_request_files(
        &self,
        a: ListPullRequestFilesArgs,
        ctx: &ToolContext,
    ) -> Result<FileList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let uri = uri(
            &format!("/repos/{repository}/pulls/{}/files", a.number),
            &paging(a.page, a.per_page),
        );
        let subject = Subject::object(format!("pull request #{}", a.number), &repository);
        let (page, next) = self.client.get_json::<Vec<WireFile>>(&uri, &subject, ctx).await?;
        let max_patch = a.max_patch_bytes.unwrap_or(PATCH_MAX_BYTES).min(64 * 1024);
        Ok(file_list(repository, a.number, page, max_patch, next))
    }

    async fn list_pull_request_reviews(
        &self,
        a: PullRequestPageArgs,
        ctx: &ToolContext,
    ) -> Result<ReviewList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let uri = uri(
            &format!("/repos/{repository}/pulls/{}/reviews", a.number),
            &paging(a.page, a.per_page),
        );
        let subject = Subject::object(format!("pull request #{}", a.number), &repository);
        let (page, next) = self.client.get_json::<Vec<WireReview>>(&uri, &subject, ctx).await?;
        let authors = page.iter().map(|r| (r.user.as_ref(), r.author_association.as_deref()));
        self.label_page(&repository, "reviews", authors, ctx).await;
        Ok(review_list(repository, a.number, page, next))
    }

    async fn list_pull_request_review_comments(
        &self,
        a: PullRequestPageArgs,
        ctx: &ToolContext,
    ) -> Result<ReviewCommentList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let uri = uri(
            &format!("/repos/{repository}/pulls/{}/comments", a.number),
            &paging(a.page, a.per_page),
        );
        let subject = Subject::object(format!("pull request #{}", a.number), &repository);
        let (page, next) =
            self.client.get_json::<Vec<WireReviewComment>>(&uri, &subject, ctx).await?;
        let authors = page.iter().map(|c| (c.user.as_ref(), c.author_association.as_deref()));
        self.label_page(&repository, "comments", authors, ctx).await;
        Ok(review_comment_list(repository, a.number, page, next))
    }
}

register_tool! {
    provider: GitHub,
    name: "list_pull_requests",
    group: "pulls",
    description: "List a repository's pull requests, newest first, with head and base \
                  branches, head SHA, draft flag and labels; filter by state, head or base. \
                  Returns `next_page` for more.",
    input: ListPullRequestsArgs,
    output: PullList,
    handler: GitHub::list_pull_requests,
}

register_tool! {
    provider: GitHub,
    name: "get_pull_request",
    group: "pulls",
    description: "Get one pull request with its body, merge state (mergeable, conflicts, \
                  blocked), head/base SHAs, requested reviewers and change counts.",
    input: GetPullRequestArgs,
    output: PullDetail,
    handler: GitHub::get_pull_request,
}

register_tool! {
    provider: GitHub,
    name: "list_pull_request_files",
    group: "pulls",
    description: "List the files a pull request changes, with line counts and each file's \
                  unified diff (cut per file at `max_patch_bytes`).",
    input: ListPullRequestFilesArgs,
    output: FileList,
    handler: GitHub::list_pull_request_files,
}

register_tool! {
    provider: GitHub,
    name: "list_pull_request_reviews",
    group: "pulls",
    description: "List the reviews of a pull request: who approved, requested changes or \
                  commented, on which commit, with the review summary.",
    input: PullRequestPageArgs,
    output: ReviewList,
    handler: GitHub::list_pull_request_reviews,
}

register_tool! {
    provider: GitHub,
    name: "list_pull_request_review_comments",
    group: "pulls",
    description: "List the review comments on a pull request's diff: file, line, text, the \
                  diff lines above and reply threading.",
    input: PullRequestPageArgs,
    output: ReviewCommentList,
    handler: GitHub::list_pull_request_review_comments,
}

// ---------------------------------------------------------------------------------------------
// Changing a pull request
// ---------------------------------------------------------------------------------------------

/// The media type of a pull request's unified diff.
const DIFF: &str = "application/vnd.github.diff";
/// Most bytes of diff returned by default and at most.
pub(crate) const DIFF_MAX_BYTES: usize = 64 * 1024;

/// Arguments of `create_pull_request`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreatePullRequestArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The title.
    pub(crate) title: String,
    /// The branch with the changes, e.g. `fix-login`; `user:branch` for a fork's branch.
    pub(crate) head: String,
    /// The branch to merge into, e.g. `main`.
    pub(crate) base: String,
    /// The description, in Markdown.
    pub(crate) body: Option<String>,
    /// Open it as a draft.
    #[serde(default)]
    pub(crate) draft: bool,
    /// Whether maintainers of the base repository may push to the head branch (forks).
    pub(crate) maintainer_can_modify: Option<bool>,
}

/// `state` of `update_pull_request`.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PullState {
    /// Reopen it.
    Open,
    /// Close it without merging.
    Closed,
}

/// Arguments of `update_pull_request`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdatePullRequestArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The pull request number.
    #[serde(alias = "pull_number")]
    pub(crate) number: u64,
    /// A new title.
    pub(crate) title: Option<String>,
    /// A new description, in Markdown (replaces the old one).
    pub(crate) body: Option<String>,
    /// `closed` to close it without merging, `open` to reopen it.
    pub(crate) state: Option<PullState>,
    /// A new base branch to merge into.
    pub(crate) base: Option<String>,
    /// Whether maintainers of the base repository may push to the head branch.
    pub(crate) maintainer_can_modify: Option<bool>,
}

/// How `merge_pull_request` merges.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MergeMethod {
    /// A merge commit (GitHub's default).
    Merge,
    /// All commits squashed into one.
    Squash,
    /// The commits rebased onto the base branch.
    Rebase,
}

/// Arguments of `merge_pull_request`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MergePullRequestArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The pull request number.
    #[serde(alias = "pull_number")]
    pub(crate) number: u64,
    /// `merge` (the default), `squash` or `rebase`; the repository may allow only some
    /// (`get_repository` says which).
    pub(crate) merge_method: Option<MergeMethod>,
    /// The merge or squash commit's title.
    pub(crate) commit_title: Option<String>,
    /// The merge or squash commit's message.
    pub(crate) commit_message: Option<String>,
    /// The head SHA the merge is meant for (`head_sha` of `get_pull_request`): GitHub refuses
    /// to merge if the branch moved since.
    pub(crate) sha: Option<String>,
}

/// Arguments of `add_pull_request_reviewers`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddPullRequestReviewersArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The pull request number.
    #[serde(alias = "pull_number")]
    pub(crate) number: u64,
    /// Logins asked to review, e.g. `["octocat"]`.
    #[serde(default)]
    pub(crate) reviewers: Vec<String>,
    /// Team slugs of the organisation asked to review, e.g. `["justice-league"]`.
    #[serde(default)]
    pub(crate) team_reviewers: Vec<String>,
}

/// What a review says overall.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum ReviewEvent {
    /// Approve the changes.
    Approve,
    /// Ask for changes (needs a `body`).
    RequestChanges,
    /// Comment without a verdict (needs a `body` or comments).
    Comment,
}

impl ReviewEvent {
    fn as_str(self) -> &'static str {
        match self {
            ReviewEvent::Approve => "APPROVE",
            ReviewEvent::RequestChanges => "REQUEST_CHANGES",
            ReviewEvent::Comment => "COMMENT",
        }
    }
}

/// The side of a diff a line comment is on.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum DiffSide {
    /// The new version (added or unchanged lines; the default).
    Right,
    /// The old version (deleted lines).
    Left,
}

/// A comment on lines of the diff, part of a review.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReviewLineComment {
    /// The file's path, e.g. `src/main.rs`.
    pub(crate) path: String,
    /// The line in the file (new version, or old with `side` `LEFT`); it must be in the diff.
    pub(crate) line: u64,
    /// `RIGHT` (the default) or `LEFT`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) side: Option<DiffSide>,
    /// The first line of a multi-line comment (ending at `line`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) start_line: Option<u64>,
    /// The side of `start_line`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) start_side: Option<DiffSide>,
    /// The comment, in Markdown; a ```suggestion block proposes a change.
    pub(crate) body: String,
}

/// Arguments of `create_pull_request_review`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreatePullRequestReviewArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The pull request number.
    #[serde(alias = "pull_number")]
    pub(crate) number: u64,
    /// `APPROVE`, `REQUEST_CHANGES` or `COMMENT` submits the review at once; unset leaves it
    /// pending (visible only to you) for `submit_pull_request_review`.
    pub(crate) event: Option<ReviewEvent>,
    /// The review's summary, in Markdown.
    pub(crate) body: Option<String>,
    /// Comments on lines of the diff.
    #[serde(default)]
    pub(crate) comments: Vec<ReviewLineComment>,
    /// The commit reviewed; the head commit when unset.
    pub(crate) commit_id: Option<String>,
}

/// Arguments of `submit_pull_request_review`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SubmitPullRequestReviewArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The pull request number.
    #[serde(alias = "pull_number")]
    pub(crate) number: u64,
    /// The pending review's id (from `create_pull_request_review`).
    pub(crate) review_id: u64,
    /// `APPROVE`, `REQUEST_CHANGES` or `COMMENT`.
    pub(crate) event: ReviewEvent,
    /// The review's summary, in Markdown.
    pub(crate) body: Option<String>,
}

/// Arguments of `get_pull_request_diff`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetPullRequestDiffArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The pull request number.
    #[serde(alias = "pull_number")]
    pub(crate) number: u64,
    /// Most bytes of diff to return: 65536 by default and at most (whole files are kept; the
    /// rest is named).
    #[schemars(range(min = 1024, max = 65536))]
    pub(crate) max_bytes: Option<usize>,
}

/// The answer to a merge.
#[derive(Debug, Deserialize)]
pub(crate) struct WireMerge {
    #[serde(default)]
    merged: bool,
    #[serde(default)]
    sha: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// A pull request as the requested-reviewers endpoint answers.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRequested {
    #[serde(default, deserialize_with = "nullable")]
    requested_reviewers: Vec<WireUser>,
    #[serde(default, deserialize_with = "nullable")]
    requested_teams: Vec<WireTeam>,
}

/// A team; only the slug is kept.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTeam {
    slug: String,
}

/// Result of `create_pull_request` and `update_pull_request`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PullChange {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The pull request as it is now: number, title, state, branches, labels and times.
    #[serde(flatten)]
    pub(crate) pull: PullSummary,
}

/// Result of `merge_pull_request`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MergeResult {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The pull request number.
    pub(crate) number: u64,
    /// Whether it was merged.
    pub(crate) merged: bool,
    /// The merge, squash or last rebased commit.
    pub(crate) sha: Option<String>,
    /// GitHub's message, e.g. "Pull Request successfully merged".
    pub(crate) message: Option<String>,
}

/// Result of `add_pull_request_reviewers`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RequestedReviewers {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The pull request number.
    pub(crate) number: u64,
    /// Everyone asked for a review who has not reviewed yet.
    pub(crate) requested_reviewers: Vec<String>,
    /// Teams asked for a review.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) requested_teams: Vec<String>,
}

/// Result of `create_pull_request_review` and `submit_pull_request_review`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReviewResult {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The pull request number.
    pub(crate) number: u64,
    /// The review's id, state (`PENDING` until submitted), summary and commit.
    #[serde(flatten)]
    pub(crate) review: Review,
    /// Line comments sent with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) comments: Option<usize>,
}

/// One file's share of a diff that was left out.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct OmittedFile {
    /// The file's path.
    pub(crate) filename: String,
    /// Bytes of diff left out.
    pub(crate) bytes: usize,
}

/// Result of `get_pull_request_diff`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PullDiff {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The pull request number.
    pub(crate) number: u64,
    /// Files in the whole diff.
    pub(crate) files: usize,
    /// The unified diff (`git diff` format) of the files that fit.
    pub(crate) diff: String,
    /// Files whose diff did not fit (read them with `list_pull_request_files`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) omitted: Vec<OmittedFile>,
}

/// The `get_pull_request_diff` result: whole files while they fit in `max_bytes` (the first
/// file is cut if it alone does not), the others named with their size.
pub(crate) fn pull_diff(repository: String, number: u64, raw: &str, max_bytes: usize) -> PullDiff {
    let mut chunks: Vec<&str> = Vec::new();
    let mut start = 0;
    for (i, _) in raw.match_indices("diff --git ") {
        if i > start && (i == 0 || raw.as_bytes()[i - 1] == b'\n') {
            chunks.push(&raw[start..i]);
            start = i;
        }
    }
    if start < raw.len() {
        chunks.push(&raw[start..]);
    }
    let files = chunks.iter().filter(|c| c.starts_with("diff --git ")).count();
    let mut diff = String::new();
    let mut omitted = Vec::new();
    for chunk in chunks {
        if diff.len() + chunk.len() <= max_bytes {
            diff.push_str(chunk);
        } else if diff.is_empty() {
            diff = truncate(chunk, max_bytes).0;
        } else {
            let filename = chunk
                .lines()
                .next()
                .and_then(|l| l.rsplit(" b/").next())
                .unwrap_or_default()
                .to_owned();
            omitted.push(OmittedFile { filename, bytes: chunk.len() });
        }
    }
    PullDiff { repository, number, files, diff, omitted }
}

impl GitHub {
    async fn create_pull_request(
        &self,
        a: CreatePullRequestArgs,
        ctx: &ToolContext,
    ) -> Result<PullChange, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        if a.title.trim().is_empty() {
            return Err(ToolError::invalid_arguments("`title` is empty; a pull request needs one"));
        }
        let mut body = json!({ "title": a.title, "head": a.head, "base": a.base });
        if let Some(text) = a.body {
            body["body"] = json!(text);
        }
        if a.draft {
            body["draft"] = json!(true);
        }
        if let Some(m) = a.maintainer_can_modify {
            body["maintainer_can_modify"] = json!(m);
        }
        let subject = Subject::action("creating a pull request", &repository);
        let uri = format!("/repos/{repository}/pulls");
        let pull: WirePull =
            self.client.write_json(Method::POST, &uri, Some(&body), &subject, ctx).await?;
        Ok(PullChange { repository, pull: pull.summary() })
    }

    async fn update_pull_request(
        &self,
        a: UpdatePullRequestArgs,
        ctx: &ToolContext,
    ) -> Result<PullChange, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let mut body = Map::new();
        if let Some(title) = a.title {
            body.insert("title".into(), json!(title));
        }
        if let Some(text) = a.body {
            body.insert("body".into(), json!(text));
        }
        if let Some(state) = a.state {
            let state = match state {
                PullState::Open => "open",
                PullState::Closed => "closed",
            };
            body.insert("state".into(), json!(state));
        }
        if let Some(base) = a.base {
            body.insert("base".into(), json!(base));
        }
        if let Some(m) = a.maintainer_can_modify {
            body.insert("maintainer_can_modify".into(), json!(m));
        }
        if body.is_empty() {
            return Err(ToolError::invalid_arguments(
                "nothing to change: set `title`, `body`, `state`, `base` or \
                 `maintainer_can_modify`",
            ));
        }
        let subject = Subject::object(format!("pull request #{}", a.number), &repository);
        let uri = format!("/repos/{repository}/pulls/{}", a.number);
        let pull: WirePull = self
            .client
            .write_json(Method::PATCH, &uri, Some(&Value::Object(body)), &subject, ctx)
            .await?;
        Ok(PullChange { repository, pull: pull.summary() })
    }

    async fn merge_pull_request(
        &self,
        a: MergePullRequestArgs,
        ctx: &ToolContext,
    ) -> Result<MergeResult, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let mut body = Map::new();
        if let Some(method) = a.merge_method {
            let method = match method {
                MergeMethod::Merge => "merge",
                MergeMethod::Squash => "squash",
                MergeMethod::Rebase => "rebase",
            };
            body.insert("merge_method".into(), json!(method));
        }
        if let Some(title) = a.commit_title {
            body.insert("commit_title".into(), json!(title));
        }
        if let Some(message) = a.commit_message {
            body.insert("commit_message".into(), json!(message));
        }
        if let Some(sha) = a.sha {
            body.insert("sha".into(), json!(sha));
        }
        let subject = Subject::object(format!("pull request #{}", a.number), &repository);
        let uri = format!("/repos/{repository}/pulls/{}/merge", a.number);
        let merged: WireMerge = self
            .client
            .write_json(Method::PUT, &uri, Some(&Value::Object(body)), &subject, ctx)
            .await?;
        Ok(MergeResult {
            repository,
            number: a.number,
            merged: merged.merged,
            sha: merged.sha,
            message: merged.message,
        })
    }

    async fn add_pull_request_reviewers(
        &self,
        a: AddPullRequestReviewersArgs,
        ctx: &ToolContext,
    ) -> Result<RequestedReviewers, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        if a.reviewers.is_empty() && a.team_reviewers.is_empty() {
            return Err(ToolError::invalid_arguments(
                "name someone to ask: `reviewers` (logins) or `team_reviewers` (team slugs)",
            ));
        }
        let mut body = Map::new();
        if !a.reviewers.is_empty() {
            body.insert("reviewers".into(), json!(a.reviewers));
        }
        if !a.team_reviewers.is_empty() {
            body.insert("team_reviewers".into(), json!(a.team_reviewers));
        }
        let subject = Subject::object(format!("pull request #{}", a.number), &repository);
        let uri = format!("/repos/{repository}/pulls/{}/requested_reviewers", a.number);
        let pull: WireRequested = self
            .client
            .write_json(Method::POST, &uri, Some(&Value::Object(body)), &subject, ctx)
            .await?;
        Ok(RequestedReviewers {
            repository,
            number: a.number,
            requested_reviewers: logins(pull.requested_reviewers),
            requested_teams: pull.requested_teams.into_iter().map(|t| t.slug).collect(),
        })
    }

    async fn create_pull_request_review(
        &self,
        a: CreatePullRequestReviewArgs,
        ctx: &ToolContext,
    ) -> Result<ReviewResult, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let blank_body = a.body.as_deref().is_none_or(|b| b.trim().is_empty());
        if matches!(a.event, Some(ReviewEvent::RequestChanges)) && blank_body {
            return Err(ToolError::invalid_arguments(
                "`REQUEST_CHANGES` needs a `body` saying what to change",
            ));
        }
        if matches!(a.event, Some(ReviewEvent::Comment)) && blank_body && a.comments.is_empty() {
            return Err(ToolError::invalid_arguments(
                "a `COMMENT` review needs a `body` or line `comments`",
            ));
        }
        let mut body = Map::new();
        if let Some(event) = a.event {
            body.insert("event".into(), json!(event.as_str()));
        }
        if let Some(text) = a.body {
            body.insert("body".into(), json!(text));
        }
        if let Some(commit) = a.commit_id {
            body.insert("commit_id".into(), json!(commit));
        }
        let comments = a.comments.len();
        if comments > 0 {
            body.insert("comments".into(), json!(a.comments));
        }
        let subject = Subject::object(format!("pull request #{}", a.number), &repository);
        let uri = format!("/repos/{repository}/pulls/{}/reviews", a.number);
        let review: WireReview = self
            .client
            .write_json(Method::POST, &uri, Some(&Value::Object(body)), &subject, ctx)
            .await?;
        Ok(ReviewResult {
            repository,
            number: a.number,
            review: review_of(review),
            comments: (comments > 0).then_some(comments),
        })
    }

    async fn submit_pull_request_review(
        &self,
        a: SubmitPullRequestReviewArgs,
        ctx: &ToolContext,
    ) -> Result<ReviewResult, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let mut body = json!({ "event": a.event.as_str() });
        if let Some(text) = a.body {
            body["body"] = json!(text);
        }
        let subject = Subject::object(
            format!("pending review {} of pull request #{}", a.review_id, a.number),
            &repository,
        );
        let uri = format!("/repos/{repository}/pulls/{}/reviews/{}/events", a.number, a.review_id);
        let review: WireReview =
            self.client.write_json(Method::POST, &uri, Some(&body), &subject, ctx).await?;
        Ok(ReviewResult { repository, number: a.number, review: review_of(review), comments: None })
    }

    async fn get_pull_request_diff(
        &self,
        a: GetPullRequestDiffArgs,
        ctx: &ToolContext,
    ) -> Result<PullDiff, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let subject = Subject::object(format!("pull request #{}", a.number), &repository);
        let uri = format!("/repos/{repository}/pulls/{}", a.number);
        let reply = self.client.get_as(&uri, DIFF, &subject, ctx).await?;
        let max_bytes = a.max_bytes.unwrap_or(DIFF_MAX_BYTES).clamp(1024, DIFF_MAX_BYTES);
        Ok(pull_diff(repository, a.number, &reply.body, max_bytes))
    }
}

/// A review as the tools return it.
fn review_of(r: WireReview) -> Review {
    Review {
        id: r.id,
        author: login(r.user),
        state: r.state,
        body: truncate_opt(r.body, COMMENT_MAX_BYTES),
        submitted_at: r.submitted_at,
        commit_id: r.commit_id,
        html_url: r.html_url,
    }
}

register_tool! {
    provider: GitHub,
    name: "create_pull_request",
    group: "pulls",
    description: "Open a pull request from a head branch into a base branch, optionally as a \
                  draft. Returns its number, URL and head SHA.",
    input: CreatePullRequestArgs,
    output: PullChange,
    handler: GitHub::create_pull_request,
}

register_tool! {
    provider: GitHub,
    name: "update_pull_request",
    group: "pulls",
    description: "Change a pull request's title, body or base branch, or close (`state: \
                  closed`) or reopen it. Labels and assignees: `add_issue_labels`, \
                  `add_issue_assignees`.",
    input: UpdatePullRequestArgs,
    output: PullChange,
    handler: GitHub::update_pull_request,
}

register_tool! {
    provider: GitHub,
    name: "merge_pull_request",
    group: "pulls",
    description: "Merge a pull request with `merge`, `squash` or `rebase`; pass `sha` (its head \
                  SHA) so nothing pushed since gets merged unseen.",
    input: MergePullRequestArgs,
    output: MergeResult,
    handler: GitHub::merge_pull_request,
}

register_tool! {
    provider: GitHub,
    name: "add_pull_request_reviewers",
    group: "pulls",
    description: "Request reviews on a pull request from people or teams. Returns everyone \
                  whose review is pending.",
    input: AddPullRequestReviewersArgs,
    output: RequestedReviewers,
    handler: GitHub::add_pull_request_reviewers,
}

register_tool! {
    provider: GitHub,
    name: "create_pull_request_review",
    group: "pulls",
    description: "Review a pull request: a summary and comments on diff lines (`path`, `line`, \
                  `side`, `start_line` for ranges), submitted at once with `event` APPROVE, \
                  REQUEST_CHANGES or COMMENT, or left pending for `submit_pull_request_review`.",
    input: CreatePullRequestReviewArgs,
    output: ReviewResult,
    handler: GitHub::create_pull_request_review,
}

register_tool! {
    provider: GitHub,
    name: "submit_pull_request_review",
    group: "pulls",
    description: "Submit a pending pull request review as APPROVE, REQUEST_CHANGES or COMMENT.",
    input: SubmitPullRequestReviewArgs,
    output: ReviewResult,
    handler: GitHub::submit_pull_request_review,
}

register_tool! {
    provider: GitHub,
    name: "get_pull_request_diff",
    group: "pulls",
    description: "Get a pull request's whole unified diff (`git diff` format), whole files up \
                  to 64 KiB; files that do not fit are named with their size.",
    input: GetPullRequestDiffArgs,
    output: PullDiff,
    handler: GitHub::get_pull_request_diff,
}
