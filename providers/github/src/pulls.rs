//! Pull requests: list, get, changed files, reviews, review comments.

use quiver_plugin_sdk::prelude::*;

use crate::client::{paging, repo_path, uri, Subject};
use crate::issues::{BODY_MAX_BYTES, COMMENT_MAX_BYTES};
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
    let files = page
        .into_iter()
        .map(|f| FileChange {
            filename: f.filename,
            status: f.status,
            additions: f.additions,
            deletions: f.deletions,
            previous_filename: f.previous_filename,
            patch: f.patch.filter(|_| max_patch_bytes > 0).map(|p| truncate(&p, max_patch_bytes).0),
        })
        .collect();
    FileList { repository, number, files, next_page }
}

/// The `list_pull_request_reviews` result.
pub(crate) fn review_list(
    repository: String,
    number: u64,
    page: Vec<WireReview>,
    next_page: Option<u32>,
) -> ReviewList {
    let reviews = page
        .into_iter()
        .map(|r| Review {
            id: r.id,
            author: login(r.user),
            state: r.state,
            body: truncate_opt(r.body, COMMENT_MAX_BYTES),
            submitted_at: r.submitted_at,
            commit_id: r.commit_id,
            html_url: r.html_url,
        })
        .collect();
    ReviewList { repository, number, reviews, next_page }
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
