//! Branches, commits, comparisons, tags and releases.

use http::Method;
use quiver_plugin_sdk::prelude::*;

use crate::client::{encode_path, paging, repo_path, uri, Subject};
use crate::issues::{BODY_MAX_BYTES, COMMENT_MAX_BYTES};
use crate::model::{is_false, nullable, WireUser};
use crate::pulls::{file_changes, FileChange, WireFile, PATCH_MAX_BYTES};
use crate::text::truncate_opt;
use crate::GitHub;

/// Most changed files a comparison lists with their patches (GitHub sends up to 300 on the first
/// page; past 50 the patches alone would pass 200 KiB).
const COMPARE_MAX_FILES: usize = 50;

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// Arguments of `list_branches`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListBranchesArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// Only protected branches (`true`) or only unprotected ones (`false`).
    pub(crate) protected: Option<bool>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `create_branch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateBranchArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The new branch's name, e.g. `fix-login`.
    pub(crate) branch: String,
    /// Where the branch starts: a branch name or a full commit SHA; the default branch when
    /// unset.
    #[serde(alias = "from_branch", alias = "sha")]
    pub(crate) from: Option<String>,
}

/// Arguments of `list_commits`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListCommitsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// Branch, tag or commit SHA to list from; the default branch when unset.
    #[serde(alias = "ref")]
    pub(crate) sha: Option<String>,
    /// Only commits that touch this file or directory, e.g. `src/main.rs`.
    pub(crate) path: Option<String>,
    /// Only commits by this login or e-mail address.
    pub(crate) author: Option<String>,
    /// Only commits at or after this time, ISO 8601 (`2024-05-01T00:00:00Z`).
    pub(crate) since: Option<String>,
    /// Only commits before this time, ISO 8601.
    pub(crate) until: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `get_commit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetCommitArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The commit SHA (full or abbreviated), or a branch or tag name for its latest commit.
    #[serde(alias = "ref")]
    pub(crate) sha: String,
    /// Longest patch kept per file, in bytes (4096 by default; 0 leaves patches out).
    #[schemars(range(max = 65536))]
    pub(crate) max_patch_bytes: Option<usize>,
    /// Page of the changed files, from 1 (GitHub pages a commit's files).
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Changed files per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `compare_commits`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompareCommitsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The older side: a branch, tag or commit SHA, e.g. `main` or `v1.0.0`.
    pub(crate) base: String,
    /// The newer side: a branch, tag or SHA; `user:branch` for a fork's branch.
    pub(crate) head: String,
    /// Longest patch kept per file, in bytes (4096 by default; 0 leaves patches out).
    #[schemars(range(max = 65536))]
    pub(crate) max_patch_bytes: Option<usize>,
    /// Page of the commits, from 1; the changed files come with page 1 only.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Commits per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of the repository listings `list_tags` and `list_releases`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RepoPageArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `get_latest_release`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetLatestReleaseArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
}

/// Arguments of `get_release_by_tag`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetReleaseByTagArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// The release's tag, e.g. `v1.0.0`.
    #[serde(alias = "tag_name")]
    pub(crate) tag: String,
}

// ---------------------------------------------------------------------------------------------
// What GitHub sends (only the kept fields)
// ---------------------------------------------------------------------------------------------

/// A branch in the branches listing.
#[derive(Debug, Deserialize)]
pub(crate) struct WireBranch {
    name: String,
    commit: WireSha,
    #[serde(default)]
    protected: bool,
}

/// Anything that is a SHA with more around it (a branch's commit, a parent, a ref's object).
#[derive(Debug, Deserialize)]
pub(crate) struct WireSha {
    sha: String,
}

/// A git reference (`GET`/`POST /git/refs`).
#[derive(Debug, Deserialize)]
pub(crate) struct WireGitRef {
    #[serde(rename = "ref")]
    git_ref: String,
    object: WireSha,
}

/// A repository, only for its default branch.
#[derive(Debug, Deserialize)]
struct WireDefaultBranch {
    default_branch: String,
}

/// A commit as the commits, compare and single-commit endpoints send it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireCommit {
    sha: String,
    commit: WireGitCommit,
    #[serde(default)]
    author: Option<WireUser>,
    #[serde(default, deserialize_with = "nullable")]
    parents: Vec<WireSha>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    stats: Option<WireStats>,
    #[serde(default, deserialize_with = "nullable")]
    files: Vec<WireFile>,
}

/// The git part of a commit.
#[derive(Debug, Deserialize)]
pub(crate) struct WireGitCommit {
    #[serde(default)]
    message: String,
    #[serde(default)]
    author: Option<WireSignature>,
    #[serde(default)]
    committer: Option<WireSignature>,
}

/// A commit's author or committer as git records them.
#[derive(Debug, Deserialize)]
pub(crate) struct WireSignature {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    date: Option<String>,
}

/// A commit's line counts.
#[derive(Debug, Deserialize)]
pub(crate) struct WireStats {
    #[serde(default)]
    additions: u64,
    #[serde(default)]
    deletions: u64,
    #[serde(default)]
    total: u64,
}

/// The compare endpoint's answer.
#[derive(Debug, Deserialize)]
pub(crate) struct WireComparison {
    #[serde(default)]
    status: String,
    #[serde(default)]
    ahead_by: u64,
    #[serde(default)]
    behind_by: u64,
    #[serde(default)]
    total_commits: u64,
    #[serde(default)]
    merge_base_commit: Option<WireSha>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    commits: Vec<WireCommit>,
    #[serde(default, deserialize_with = "nullable")]
    files: Vec<WireFile>,
}

/// A tag in the tags listing.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTag {
    name: String,
    commit: WireSha,
}

/// A release.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRelease {
    id: u64,
    tag_name: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    draft: bool,
    #[serde(default)]
    prerelease: bool,
    #[serde(default)]
    author: Option<WireUser>,
    #[serde(default)]
    target_commitish: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    published_at: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    assets: Vec<WireAsset>,
}

/// A file attached to a release.
#[derive(Debug, Deserialize)]
pub(crate) struct WireAsset {
    name: String,
    #[serde(default)]
    size: u64,
    #[serde(default)]
    download_count: u64,
    #[serde(default)]
    browser_download_url: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// What the tools return
// ---------------------------------------------------------------------------------------------

/// One branch.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Branch {
    /// The branch's name.
    pub(crate) name: String,
    /// Its latest commit.
    pub(crate) sha: String,
    /// Set when branch protection rules apply.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) protected: bool,
}

/// Result of `list_branches`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct BranchList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The branches of this page, by name.
    pub(crate) branches: Vec<Branch>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// Result of `create_branch`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CreatedBranch {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The new branch's name.
    pub(crate) branch: String,
    /// The commit it points at.
    pub(crate) sha: String,
    /// The branch or SHA it was made from.
    pub(crate) from: String,
}

/// One commit in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommitSummary {
    /// The commit SHA.
    pub(crate) sha: String,
    /// The first line of the commit message.
    pub(crate) message: String,
    /// The author's GitHub login, or their git name when GitHub knows no account.
    pub(crate) author: Option<String>,
    /// When it was authored.
    pub(crate) date: Option<String>,
    /// The commit on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `list_commits`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommitList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The commits of this page, newest first.
    pub(crate) commits: Vec<CommitSummary>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// Line counts of a commit.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Stats {
    /// Added lines.
    pub(crate) additions: u64,
    /// Deleted lines.
    pub(crate) deletions: u64,
    /// Both.
    pub(crate) total: u64,
}

/// Result of `get_commit`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommitDetail {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The commit SHA.
    pub(crate) sha: String,
    /// The whole commit message (cut at 8 KiB, saying so).
    pub(crate) message: String,
    /// The author's GitHub login, or their git name.
    pub(crate) author: Option<String>,
    /// When it was authored.
    pub(crate) date: Option<String>,
    /// The committer's git name, when not the author.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) committer: Option<String>,
    /// Parent SHAs (two or more for a merge commit).
    pub(crate) parents: Vec<String>,
    /// Added and deleted lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stats: Option<Stats>,
    /// The changed files of this page, with their patches.
    pub(crate) files: Vec<FileChange>,
    /// The commit on GitHub.
    pub(crate) html_url: Option<String>,
    /// The next page of changed files, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// Result of `compare_commits`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Comparison {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The base asked for.
    pub(crate) base: String,
    /// The head asked for.
    pub(crate) head: String,
    /// `ahead`, `behind`, `identical` or `diverged` (head relative to base).
    pub(crate) status: String,
    /// Commits in head that base lacks.
    pub(crate) ahead_by: u64,
    /// Commits in base that head lacks.
    pub(crate) behind_by: u64,
    /// Commits between the merge base and head.
    pub(crate) total_commits: u64,
    /// The common ancestor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merge_base_sha: Option<String>,
    /// The commits of this page, oldest first.
    pub(crate) commits: Vec<CommitSummary>,
    /// How many changed files GitHub listed (on page 1 only; up to 300).
    pub(crate) changed_files: usize,
    /// The first 50 changed files, with their patches (`get_commit` or
    /// `list_pull_request_files` read the others).
    pub(crate) files: Vec<FileChange>,
    /// The comparison on GitHub.
    pub(crate) html_url: Option<String>,
    /// The next page of commits, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// One tag.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Tag {
    /// The tag's name.
    pub(crate) name: String,
    /// The commit it points at.
    pub(crate) sha: String,
}

/// Result of `list_tags`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TagList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The tags of this page, newest first.
    pub(crate) tags: Vec<Tag>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// One release in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReleaseSummary {
    /// The release id.
    pub(crate) id: u64,
    /// Its tag, e.g. `v1.0.0`.
    pub(crate) tag_name: String,
    /// Its title.
    pub(crate) name: Option<String>,
    /// Set for a draft (only people with push access see those).
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) draft: bool,
    /// Set for a pre-release.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) prerelease: bool,
    /// Who published it.
    pub(crate) author: Option<String>,
    /// When it was published (null for a draft).
    pub(crate) published_at: Option<String>,
    /// The release on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `list_releases`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReleaseList {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The releases of this page, newest first.
    pub(crate) releases: Vec<ReleaseSummary>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// A file attached to a release.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Asset {
    /// The file's name.
    pub(crate) name: String,
    /// Its size in bytes.
    pub(crate) size: u64,
    /// How often it was downloaded.
    pub(crate) download_count: u64,
    /// Where to download it.
    pub(crate) download_url: Option<String>,
}

/// Result of `get_latest_release` and `get_release_by_tag`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReleaseDetail {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// Id, tag, title, flags, author and date.
    #[serde(flatten)]
    pub(crate) release: ReleaseSummary,
    /// The branch or commit the tag was made from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) target_commitish: Option<String>,
    /// The release notes, in Markdown (cut at 32 KiB, saying so).
    pub(crate) body: Option<String>,
    /// The attached files.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) assets: Vec<Asset>,
}

// ---------------------------------------------------------------------------------------------
// Mapping (pure, so tests can run it on recorded responses)
// ---------------------------------------------------------------------------------------------

impl WireCommit {
    fn author(&self) -> Option<String> {
        self.author
            .as_ref()
            .map(|u| u.login.clone())
            .or_else(|| self.commit.author.as_ref().and_then(|a| a.name.clone()))
    }

    fn summary(&self) -> CommitSummary {
        CommitSummary {
            sha: self.sha.clone(),
            message: self.commit.message.lines().next().unwrap_or_default().to_owned(),
            author: self.author(),
            date: self.commit.author.as_ref().and_then(|a| a.date.clone()),
            html_url: self.html_url.clone(),
        }
    }
}

/// The `list_branches` result.
pub(crate) fn branch_list(
    repository: String,
    page: Vec<WireBranch>,
    next_page: Option<u32>,
) -> BranchList {
    let branches = page
        .into_iter()
        .map(|b| Branch { name: b.name, sha: b.commit.sha, protected: b.protected })
        .collect();
    BranchList { repository, branches, next_page }
}

/// The `list_commits` result.
pub(crate) fn commit_list(
    repository: String,
    page: Vec<WireCommit>,
    next_page: Option<u32>,
) -> CommitList {
    CommitList { repository, commits: page.iter().map(WireCommit::summary).collect(), next_page }
}

/// The `get_commit` result, patches cut to `max_patch_bytes`.
pub(crate) fn commit_detail(
    repository: String,
    c: WireCommit,
    max_patch_bytes: usize,
    next_page: Option<u32>,
) -> CommitDetail {
    let author = c.author();
    let author_name = c.commit.author.as_ref().and_then(|a| a.name.clone());
    let committer = c
        .commit
        .committer
        .as_ref()
        .and_then(|s| s.name.clone())
        .filter(|name| Some(name) != author_name.as_ref());
    CommitDetail {
        repository,
        sha: c.sha,
        message: truncate_opt(Some(c.commit.message), COMMENT_MAX_BYTES).unwrap_or_default(),
        author,
        date: c.commit.author.and_then(|a| a.date),
        committer,
        parents: c.parents.into_iter().map(|p| p.sha).collect(),
        stats: c.stats.map(|s| Stats {
            additions: s.additions,
            deletions: s.deletions,
            total: s.total,
        }),
        files: file_changes(c.files, max_patch_bytes),
        html_url: c.html_url,
        next_page,
    }
}

/// The `compare_commits` result.
pub(crate) fn comparison(
    repository: String,
    base: String,
    head: String,
    wire: WireComparison,
    max_patch_bytes: usize,
    next_page: Option<u32>,
) -> Comparison {
    Comparison {
        repository,
        base,
        head,
        status: wire.status,
        ahead_by: wire.ahead_by,
        behind_by: wire.behind_by,
        total_commits: wire.total_commits,
        merge_base_sha: wire.merge_base_commit.map(|c| c.sha),
        commits: wire.commits.iter().map(WireCommit::summary).collect(),
        changed_files: wire.files.len(),
        files: file_changes(
            wire.files.into_iter().take(COMPARE_MAX_FILES).collect(),
            max_patch_bytes,
        ),
        html_url: wire.html_url,
        next_page,
    }
}

/// The `list_tags` result.
pub(crate) fn tag_list(repository: String, page: Vec<WireTag>, next_page: Option<u32>) -> TagList {
    let tags = page.into_iter().map(|t| Tag { name: t.name, sha: t.commit.sha }).collect();
    TagList { repository, tags, next_page }
}

impl WireRelease {
    fn summary(&self) -> ReleaseSummary {
        ReleaseSummary {
            id: self.id,
            tag_name: self.tag_name.clone(),
            name: self.name.clone().filter(|n| !n.is_empty()),
            draft: self.draft,
            prerelease: self.prerelease,
            author: self.author.as_ref().map(|u| u.login.clone()),
            published_at: self.published_at.clone().or_else(|| self.created_at.clone()),
            html_url: self.html_url.clone(),
        }
    }
}

/// The `list_releases` result.
pub(crate) fn release_list(
    repository: String,
    page: Vec<WireRelease>,
    next_page: Option<u32>,
) -> ReleaseList {
    ReleaseList { repository, releases: page.iter().map(WireRelease::summary).collect(), next_page }
}

/// The `get_latest_release` / `get_release_by_tag` result.
pub(crate) fn release_detail(repository: String, r: WireRelease) -> ReleaseDetail {
    let release = r.summary();
    ReleaseDetail {
        repository,
        release,
        target_commitish: r.target_commitish,
        body: truncate_opt(r.body, BODY_MAX_BYTES),
        assets: r
            .assets
            .into_iter()
            .map(|a| Asset {
                name: a.name,
                size: a.size,
                download_count: a.download_count,
                download_url: a.browser_download_url,
            })
            .collect(),
    }
}

/// Whether `value` is a full commit SHA (40 hex digits, or 64 for SHA-256 repositories).
fn is_full_sha(value: &str) -> bool {
    matches!(value.len(), 40 | 64) && value.chars().all(|c| c.is_ascii_hexdigit())
}

/// A branch, tag or SHA checked as one path segment of an API URL (slashes in branch names are
/// kept: GitHub resolves `feature/x` in these positions).
fn ref_path(field: &str, value: &str) -> Result<String, ToolError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(ToolError::invalid_arguments(format!("`{field}` is empty")));
    }
    encode_path(value)
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

impl GitHub {
    async fn list_branches(
        &self,
        a: ListBranchesArgs,
        ctx: &ToolContext,
    ) -> Result<BranchList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let mut query = vec![("protected", a.protected.map(|p| p.to_string()))];
        query.extend(paging(a.page, a.per_page));
        let uri = uri(&format!("/repos/{repository}/branches"), &query);
        let subject = Subject::listing("the branches", &repository);
        let (page, next) = self.client.get_json::<Vec<WireBranch>>(&uri, &subject, ctx).await?;
        Ok(branch_list(repository, page, next))
    }

    async fn create_branch(
        &self,
        a: CreateBranchArgs,
        ctx: &ToolContext,
    ) -> Result<CreatedBranch, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let branch = a.branch.trim().trim_start_matches("refs/heads/").to_owned();
        if branch.is_empty() {
            return Err(ToolError::invalid_arguments("`branch` is empty; name the new branch"));
        }
        let from = match a.from.map(|f| f.trim().to_owned()).filter(|f| !f.is_empty()) {
            Some(from) => from,
            None => {
                let subject = Subject::listing("the default branch", &repository);
                let uri = format!("/repos/{repository}");
                let (repo, _) =
                    self.client.get_json::<WireDefaultBranch>(&uri, &subject, ctx).await?;
                repo.default_branch
            }
        };
        let sha = if is_full_sha(&from) {
            from.clone()
        } else {
            let from_branch = from.trim_start_matches("refs/heads/");
            let uri =
                format!("/repos/{repository}/git/ref/heads/{}", ref_path("from", from_branch)?);
            let subject = Subject::object(format!("branch `{from_branch}`"), &repository);
            let (found, _) = self.client.get_json::<WireGitRef>(&uri, &subject, ctx).await?;
            found.object.sha
        };
        let body = json!({ "ref": format!("refs/heads/{branch}"), "sha": sha });
        let subject = Subject::action(&format!("creating branch `{branch}`"), &repository);
        let created: WireGitRef = self
            .client
            .write_json(
                Method::POST,
                &format!("/repos/{repository}/git/refs"),
                Some(&body),
                &subject,
                ctx,
            )
            .await?;
        Ok(CreatedBranch {
            repository,
            branch: created.git_ref.trim_start_matches("refs/heads/").to_owned(),
            sha: created.object.sha,
            from,
        })
    }

    async fn list_commits(
        &self,
        a: ListCommitsArgs,
        ctx: &ToolContext,
    ) -> Result<CommitList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let mut query = vec![
            ("sha", a.sha.clone()),
            ("path", a.path),
            ("author", a.author),
            ("since", a.since),
            ("until", a.until),
        ];
        query.extend(paging(a.page, a.per_page));
        let uri = uri(&format!("/repos/{repository}/commits"), &query);
        let subject = match &a.sha {
            Some(r) => Subject::object(format!("branch or commit `{r}`"), &repository),
            None => Subject::listing("the commits", &repository),
        };
        let (page, next) = self.client.get_json::<Vec<WireCommit>>(&uri, &subject, ctx).await?;
        Ok(commit_list(repository, page, next))
    }

    async fn get_commit(
        &self,
        a: GetCommitArgs,
        ctx: &ToolContext,
    ) -> Result<CommitDetail, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let path = format!("/repos/{repository}/commits/{}", ref_path("sha", &a.sha)?);
        let uri = uri(&path, &paging(a.page, a.per_page));
        let subject = Subject::object(format!("commit `{}`", a.sha.trim()), &repository);
        let (commit, next) = self.client.get_json::<WireCommit>(&uri, &subject, ctx).await?;
        let max_patch = a.max_patch_bytes.unwrap_or(PATCH_MAX_BYTES).min(64 * 1024);
        Ok(commit_detail(repository, commit, max_patch, next))
    }

    async fn compare_commits(
        &self,
        a: CompareCommitsArgs,
        ctx: &ToolContext,
    ) -> Result<Comparison, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let (base, head) = (a.base.trim().to_owned(), a.head.trim().to_owned());
        let basehead = format!("{}...{}", ref_path("base", &base)?, ref_path("head", &head)?);
        let path = format!("/repos/{repository}/compare/{basehead}");
        let uri = uri(&path, &paging(a.page, a.per_page));
        let subject = Subject::object(format!("comparison `{base}...{head}`"), &repository)
            .not_found_says(format!(
                "github found no `{base}` or no `{head}` in {repository} (or the token cannot \
                 see the repository); check the branch, tag or SHA names"
            ));
        let (wire, next) = self.client.get_json::<WireComparison>(&uri, &subject, ctx).await?;
        let max_patch = a.max_patch_bytes.unwrap_or(PATCH_MAX_BYTES).min(64 * 1024);
        Ok(comparison(repository, base, head, wire, max_patch, next))
    }

    async fn list_tags(&self, a: RepoPageArgs, ctx: &ToolContext) -> Result<TagList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let uri = uri(&format!("/repos/{repository}/tags"), &paging(a.page, a.per_page));
        let subject = Subject::listing("the tags", &repository);
        let (page, next) = self.client.get_json::<Vec<WireTag>>(&uri, &subject, ctx).await?;
        Ok(tag_list(repository, page, next))
    }

    async fn list_releases(
        &self,
        a: RepoPageArgs,
        ctx: &ToolContext,
    ) -> Result<ReleaseList, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let uri = uri(&format!("/repos/{repository}/releases"), &paging(a.page, a.per_page));
        let subject = Subject::listing("the releases", &repository);
        let (page, next) = self.client.get_json::<Vec<WireRelease>>(&uri, &subject, ctx).await?;
        Ok(release_list(repository, page, next))
    }

    async fn get_latest_release(
        &self,
        a: GetLatestReleaseArgs,
        ctx: &ToolContext,
    ) -> Result<ReleaseDetail, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let subject = Subject::object("published release", &repository).not_found_says(format!(
            "{repository} has no published release (drafts and pre-releases do not count; \
             list_releases shows them), or the token cannot see the repository"
        ));
        let uri = format!("/repos/{repository}/releases/latest");
        let (release, _) = self.client.get_json::<WireRelease>(&uri, &subject, ctx).await?;
        Ok(release_detail(repository, release))
    }

    async fn get_release_by_tag(
        &self,
        a: GetReleaseByTagArgs,
        ctx: &ToolContext,
    ) -> Result<ReleaseDetail, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let uri = format!("/repos/{repository}/releases/tags/{}", ref_path("tag", &a.tag)?);
        let subject = Subject::object(format!("release tagged `{}`", a.tag.trim()), &repository);
        let (release, _) = self.client.get_json::<WireRelease>(&uri, &subject, ctx).await?;
        Ok(release_detail(repository, release))
    }
}

register_tool! {
    provider: GitHub,
    name: "list_branches",
    group: "repos",
    description: "List a repository's branches with their latest commit SHA and whether they \
                  are protected.",
    input: ListBranchesArgs,
    output: BranchList,
    handler: GitHub::list_branches,
}

register_tool! {
    provider: GitHub,
    name: "create_branch",
    group: "repos",
    description: "Create a branch from another branch or a commit SHA (the default branch \
                  when `from` is unset). Returns the branch and the commit it points at.",
    input: CreateBranchArgs,
    output: CreatedBranch,
    handler: GitHub::create_branch,
}

register_tool! {
    provider: GitHub,
    name: "list_commits",
    group: "repos",
    description: "List commits of a branch, tag or SHA, newest first (SHA, first line of the \
                  message, author, date); filter by path, author or time.",
    input: ListCommitsArgs,
    output: CommitList,
    handler: GitHub::list_commits,
}

register_tool! {
    provider: GitHub,
    name: "get_commit",
    group: "repos",
    description: "Get one commit: its whole message, author, parents, line stats and changed \
                  files with their patches (4 KiB per file by default).",
    input: GetCommitArgs,
    output: CommitDetail,
    handler: GitHub::get_commit,
}

register_tool! {
    provider: GitHub,
    name: "compare_commits",
    group: "repos",
    description: "Compare two branches, tags or SHAs (`base...head`): ahead/behind counts, the \
                  commits in between and the changed files with their patches (the first 50).",
    input: CompareCommitsArgs,
    output: Comparison,
    handler: GitHub::compare_commits,
}

register_tool! {
    provider: GitHub,
    name: "list_tags",
    group: "repos",
    description: "List a repository's tags with the commit each points at.",
    input: RepoPageArgs,
    output: TagList,
    handler: GitHub::list_tags,
}

register_tool! {
    provider: GitHub,
    name: "list_releases",
    group: "repos",
    description: "List a repository's releases, newest first (tag, title, draft/pre-release, \
                  author, date).",
    input: RepoPageArgs,
    output: ReleaseList,
    handler: GitHub::list_releases,
}

register_tool! {
    provider: GitHub,
    name: "get_latest_release",
    group: "repos",
    description: "Get a repository's latest published release with its notes and assets.",
    input: GetLatestReleaseArgs,
    output: ReleaseDetail,
    handler: GitHub::get_latest_release,
}

register_tool! {
    provider: GitHub,
    name: "get_release_by_tag",
    group: "repos",
    description: "Get the release of a tag (e.g. `v1.2.0`) with its notes and assets.",
    input: GetReleaseByTagArgs,
    output: ReleaseDetail,
    handler: GitHub::get_release_by_tag,
}
