//! The repository: its tree and files (read, create, update), branches, commits with their
//! diffs, comparisons of two refs, tags and releases.

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::http::encode_component;
use quiver_plugin_sdk::support::text::decode_base64;

use crate::client::{paging, uri, Page, ProjectRef, Subject};
use crate::merge_requests::{
    file_change, FileChange, PipelineRef, WireDiff, PATCH_LIMIT, PATCH_MAX_BYTES,
};
use crate::model::{
    is_false, nullable, project_arg, truncate, truncate_opt, username, WireTitle, WireUser,
};
use crate::GitLab;

/// Longest file content returned unless the call asks otherwise, in bytes.
const FILE_MAX_BYTES: usize = 64 * 1024;
/// Most bytes of a file a call may ask for.
const FILE_LIMIT: usize = 512 * 1024;
/// Longest commit message of `get_commit`, in bytes.
const MESSAGE_MAX_BYTES: usize = 8 * 1024;
/// Longest release notes in a listing, in bytes.
const RELEASE_NOTES_MAX_BYTES: usize = 2 * 1024;
/// Most commits a comparison lists (GitLab sends them all, unpaged).
const COMPARE_MAX_COMMITS: usize = 100;
/// Most files a comparison lists (GitLab sends them all, unpaged).
const COMPARE_MAX_FILES: usize = 100;

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// Arguments of `list_repository_tree`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListTreeArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The folder to list, e.g. `src/handlers` (the repository's root when unset).
    pub(crate) path: Option<String>,
    /// The branch, tag or commit (the default branch when unset).
    #[serde(rename = "ref", alias = "branch")]
    pub(crate) git_ref: Option<String>,
    /// List the whole subtree, not only the folder's own entries.
    #[serde(default)]
    pub(crate) recursive: bool,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Entries per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `get_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetFileArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The file's path in the repository, e.g. `src/session.rs`.
    #[serde(alias = "file_path")]
    pub(crate) path: String,
    /// The branch, tag or commit (the default branch when unset).
    #[serde(rename = "ref", alias = "branch")]
    pub(crate) git_ref: Option<String>,
    /// Longest content returned, in bytes (65536 by default, at most 524288); longer files are
    /// cut, saying how much was cut.
    #[schemars(range(min = 1, max = 524288))]
    pub(crate) max_bytes: Option<usize>,
}

/// Arguments of `create_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateFileArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The new file's path in the repository, e.g. `docs/sessions.md`.
    #[serde(alias = "file_path")]
    pub(crate) path: String,
    /// The branch to commit to. With `start_branch`, it is created from that branch.
    pub(crate) branch: String,
    /// The file's content, as text.
    pub(crate) content: String,
    /// The commit message.
    pub(crate) commit_message: String,
    /// Create `branch` from this branch first, e.g. `main`.
    pub(crate) start_branch: Option<String>,
}

/// Arguments of `update_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateFileArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The file's path in the repository, e.g. `src/session.rs`.
    #[serde(alias = "file_path")]
    pub(crate) path: String,
    /// The branch to commit to. With `start_branch`, it is created from that branch.
    pub(crate) branch: String,
    /// The file's whole new content, as text (it replaces the old one).
    pub(crate) content: String,
    /// The commit message.
    pub(crate) commit_message: String,
    /// The `last_commit_id` that `get_file` returned: GitLab refuses the update if the file
    /// changed since, instead of overwriting someone else's change.
    pub(crate) last_commit_id: Option<String>,
    /// Create `branch` from this branch first, e.g. `main`.
    pub(crate) start_branch: Option<String>,
}

/// Arguments of `list_branches`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListBranchesArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// Only branches whose name contains this text (`^fix` for names that begin so, `fix$`
    /// for names that end so).
    pub(crate) search: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Branches per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `create_branch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateBranchArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The new branch's name, e.g. `fix/stale-session`.
    #[serde(alias = "name")]
    pub(crate) branch: String,
    /// The branch, tag or commit SHA to start it from, e.g. `main`.
    #[serde(rename = "ref")]
    pub(crate) git_ref: String,
}

/// Arguments of `list_commits`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListCommitsArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The branch, tag or commit range (`main..feature`) to list (the default branch when
    /// unset).
    #[serde(rename = "ref", alias = "ref_name", alias = "branch")]
    pub(crate) git_ref: Option<String>,
    /// Only commits that touch this file or folder.
    pub(crate) path: Option<String>,
    /// Only commits by this author (name or email).
    pub(crate) author: Option<String>,
    /// Only commits at or after this time, ISO 8601 (`2024-05-01T00:00:00Z`).
    pub(crate) since: Option<String>,
    /// Only commits at or before this time, ISO 8601.
    pub(crate) until: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Commits per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `get_commit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetCommitArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The commit's SHA (or a branch or tag, for its head commit).
    #[serde(alias = "commit_sha")]
    pub(crate) sha: String,
    /// Longest diff kept per file, in bytes (4096 by default; 0 leaves diffs out).
    #[schemars(range(max = 65536))]
    pub(crate) max_patch_bytes: Option<usize>,
    /// Page of changed files, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Changed files per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `compare_refs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompareArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The base: a branch, tag or commit SHA, e.g. `main` or `v2.0.1`.
    pub(crate) from: String,
    /// The head: a branch, tag or commit SHA, e.g. `fix/stale-session`.
    pub(crate) to: String,
    /// Compare `from` and `to` directly (`from..to`) instead of from their merge base
    /// (`from...to`, the default: what `to` adds).
    #[serde(default)]
    pub(crate) straight: bool,
    /// Longest diff kept per file, in bytes (4096 by default; 0 leaves diffs out and lists
    /// only the files).
    #[schemars(range(max = 65536))]
    pub(crate) max_patch_bytes: Option<usize>,
}

/// Arguments of `list_tags`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListTagsArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// Only tags whose name contains this text (`^v2` for names that begin so).
    pub(crate) search: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `list_releases`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListReleasesArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

// ---------------------------------------------------------------------------------------------
// What GitLab sends (only the kept fields)
// ---------------------------------------------------------------------------------------------

/// An entry of `/repository/tree`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTreeEntry {
    #[serde(default)]
    path: String,
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    mode: Option<String>,
}

/// `/repository/files/:path`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireFile {
    #[serde(default)]
    file_path: String,
    #[serde(default)]
    size: u64,
    #[serde(default)]
    encoding: Option<String>,
    #[serde(default)]
    content: String,
    #[serde(default, rename = "ref")]
    git_ref: Option<String>,
    #[serde(default)]
    blob_id: Option<String>,
    #[serde(default)]
    last_commit_id: Option<String>,
    #[serde(default)]
    execute_filemode: bool,
}

/// The answer to a file created or updated: `{"file_path": …, "branch": …}`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireFileCommit {
    #[serde(default)]
    file_path: String,
    #[serde(default)]
    branch: String,
}

/// A commit, as listings, branches, tags and the single-commit endpoint send it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireCommit {
    id: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    author_name: Option<String>,
    #[serde(default)]
    authored_date: Option<String>,
    #[serde(default)]
    committer_name: Option<String>,
    #[serde(default)]
    committed_date: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    parent_ids: Vec<String>,
    #[serde(default)]
    stats: Option<WireStats>,
    #[serde(default)]
    last_pipeline: Option<WirePipelineRef>,
    #[serde(default)]
    web_url: Option<String>,
}

/// `stats` of a single commit.
#[derive(Debug, Deserialize)]
pub(crate) struct WireStats {
    #[serde(default)]
    additions: u64,
    #[serde(default)]
    deletions: u64,
}

/// `last_pipeline` of a single commit.
#[derive(Debug, Deserialize)]
pub(crate) struct WirePipelineRef {
    id: u64,
    #[serde(default)]
    status: Option<String>,
}

/// A branch.
#[derive(Debug, Deserialize)]
pub(crate) struct WireBranch {
    name: String,
    #[serde(default)]
    merged: bool,
    #[serde(default)]
    protected: bool,
    #[serde(default)]
    default: bool,
    #[serde(default)]
    commit: Option<WireCommit>,
    #[serde(default)]
    web_url: Option<String>,
}

/// `/repository/compare`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireComparison {
    #[serde(default, deserialize_with = "nullable")]
    commits: Vec<WireCommit>,
    #[serde(default, deserialize_with = "nullable")]
    diffs: Vec<WireDiff>,
    #[serde(default)]
    compare_timeout: bool,
    #[serde(default)]
    compare_same_ref: bool,
    #[serde(default)]
    web_url: Option<String>,
}

/// A tag.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTag {
    name: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    protected: bool,
    #[serde(default)]
    commit: Option<WireCommit>,
    #[serde(default)]
    release: Option<Value>,
}

/// A release.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRelease {
    tag_name: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    released_at: Option<String>,
    #[serde(default)]
    upcoming_release: bool,
    #[serde(default)]
    author: Option<WireUser>,
    #[serde(default)]
    commit: Option<WireCommit>,
    #[serde(default, deserialize_with = "nullable")]
    milestones: Vec<WireTitle>,
    #[serde(default)]
    assets: Option<WireAssets>,
    #[serde(default, rename = "_links")]
    links: Option<WireReleaseLinks>,
}

/// `assets` of a release: only the links people attached (the source archives are the same
/// four for every release).
#[derive(Debug, Deserialize)]
pub(crate) struct WireAssets {
    #[serde(default, deserialize_with = "nullable")]
    links: Vec<WireAssetLink>,
}

/// One attached asset.
#[derive(Debug, Deserialize)]
pub(crate) struct WireAssetLink {
    #[serde(default)]
    name: String,
    #[serde(default)]
    url: String,
}

/// `_links` of a release: only the page a human follows.
#[derive(Debug, Deserialize)]
pub(crate) struct WireReleaseLinks {
    #[serde(default, rename = "self")]
    web: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// What the tools return
// ---------------------------------------------------------------------------------------------

/// One entry of a tree.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TreeEntry {
    /// The path from the repository's root (for `get_file`, or as the next `path` to list).
    pub(crate) path: String,
    /// `file`, `dir`, or `submodule`.
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    /// Set for an executable file.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) executable: bool,
}

/// Result of `list_repository_tree`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TreeList {
    /// The project (as given).
    pub(crate) project: String,
    /// The ref listed, when one was given.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub(crate) git_ref: Option<String>,
    /// The folder listed (absent for the root).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
    /// The entries of this page: folders first, as GitLab sorts them.
    pub(crate) entries: Vec<TreeEntry>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many entries there are in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// Result of `get_file`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct FileContent {
    /// The project (as given).
    pub(crate) project: String,
    /// The file's path.
    pub(crate) path: String,
    /// The branch, tag or commit read.
    #[serde(rename = "ref")]
    pub(crate) git_ref: Option<String>,
    /// The file's size in bytes.
    pub(crate) size: u64,
    /// The text (cut at `max_bytes`, saying so); absent for a binary file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) content: Option<String>,
    /// Set for a binary file, whose content is left out.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) binary: bool,
    /// Set when `content` was cut.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) truncated: bool,
    /// Set for an executable file.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) executable: bool,
    /// The last commit that changed the file (give it to `update_file` as `last_commit_id`).
    pub(crate) last_commit_id: Option<String>,
    /// The blob's SHA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) blob_id: Option<String>,
}

/// Result of `create_file` and `update_file`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommittedFile {
    /// The project (as given).
    pub(crate) project: String,
    /// The file's path.
    pub(crate) path: String,
    /// The branch the commit went to.
    pub(crate) branch: String,
}

/// One commit in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommitSummary {
    /// The full SHA (for `get_commit`).
    pub(crate) sha: String,
    /// The message's first line.
    pub(crate) title: String,
    /// The author's name.
    pub(crate) author: Option<String>,
    /// When it was authored.
    pub(crate) authored_at: Option<String>,
    /// The commit on GitLab.
    pub(crate) web_url: Option<String>,
}

/// Result of `list_commits`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommitList {
    /// The project (as given).
    pub(crate) project: String,
    /// The ref listed, when one was given.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub(crate) git_ref: Option<String>,
    /// The commits of this page, newest first.
    pub(crate) commits: Vec<CommitSummary>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many commits match in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// Added and deleted lines of a commit.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommitStats {
    /// Added lines.
    pub(crate) additions: u64,
    /// Deleted lines.
    pub(crate) deletions: u64,
}

/// Result of `get_commit`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CommitDetail {
    /// The project (as given).
    pub(crate) project: String,
    /// The full SHA.
    pub(crate) sha: String,
    /// The message's first line.
    pub(crate) title: String,
    /// The whole message (cut at 8 KiB, saying so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) message: Option<String>,
    /// The author's name.
    pub(crate) author: Option<String>,
    /// When it was authored.
    pub(crate) authored_at: Option<String>,
    /// The committer's name, when not the author.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) committer: Option<String>,
    /// When it was committed.
    pub(crate) committed_at: Option<String>,
    /// The parents' SHAs (two for a merge commit).
    pub(crate) parent_ids: Vec<String>,
    /// Lines added and deleted in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stats: Option<CommitStats>,
    /// The latest pipeline of the commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pipeline: Option<PipelineRef>,
    /// The commit on GitLab.
    pub(crate) web_url: Option<String>,
    /// The changed files of this page, with their diffs.
    pub(crate) files: Vec<FileChange>,
    /// The next page of files, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many files changed in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total_files: Option<u64>,
}

/// One branch.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Branch {
    /// The branch's name.
    pub(crate) name: String,
    /// Set for the default branch.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) default: bool,
    /// Set for a protected branch.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) protected: bool,
    /// Set when it is merged into the default branch.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) merged: bool,
    /// Its head commit.
    pub(crate) sha: Option<String>,
    /// The head commit's first line.
    pub(crate) title: Option<String>,
    /// When the head commit was made.
    pub(crate) committed_at: Option<String>,
}

/// Result of `list_branches`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct BranchList {
    /// The project (as given).
    pub(crate) project: String,
    /// The branches of this page, by name.
    pub(crate) branches: Vec<Branch>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many branches match in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// Result of `create_branch`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CreatedBranch {
    /// The project (as given).
    pub(crate) project: String,
    /// The new branch's name.
    pub(crate) branch: String,
    /// The commit it starts at.
    pub(crate) sha: Option<String>,
    /// The branch on GitLab.
    pub(crate) web_url: Option<String>,
}

/// Result of `compare_refs`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Comparison {
    /// The project (as given).
    pub(crate) project: String,
    /// The base compared from.
    pub(crate) from: String,
    /// The head compared to.
    pub(crate) to: String,
    /// Commits in `to` that are not in `from`, oldest first (the first 100).
    pub(crate) commits: Vec<CommitSummary>,
    /// How many commits there are in all.
    pub(crate) commits_total: usize,
    /// The changed files, with their diffs (the first 100).
    pub(crate) files: Vec<FileChange>,
    /// How many files changed in all.
    pub(crate) files_total: usize,
    /// Set when both refs point at the same commit.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) same_ref: bool,
    /// Set when GitLab gave up comparing (too large): the lists are incomplete.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) timed_out: bool,
    /// The comparison on GitLab.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) web_url: Option<String>,
}

/// One tag.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Tag {
    /// The tag's name.
    pub(crate) name: String,
    /// The commit it points at.
    pub(crate) sha: Option<String>,
    /// An annotated tag's message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) message: Option<String>,
    /// When the tagged commit was made.
    pub(crate) committed_at: Option<String>,
    /// Set for a protected tag.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) protected: bool,
    /// Set when a release is made from it (see `list_releases`).
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) has_release: bool,
}

/// Result of `list_tags`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TagList {
    /// The project (as given).
    pub(crate) project: String,
    /// The tags of this page, most recently updated first.
    pub(crate) tags: Vec<Tag>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many tags match in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// An asset attached to a release.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReleaseAsset {
    /// Its name.
    pub(crate) name: String,
    /// Where to download it.
    pub(crate) url: String,
}

/// One release.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Release {
    /// The tag it is made from.
    pub(crate) tag_name: String,
    /// Its title.
    pub(crate) name: Option<String>,
    /// When it was (or will be) released.
    pub(crate) released_at: Option<String>,
    /// Set for a release dated in the future.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) upcoming: bool,
    /// Who made it.
    pub(crate) author: Option<String>,
    /// The tagged commit.
    pub(crate) sha: Option<String>,
    /// Its notes, in Markdown (cut at 2 KiB, saying so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// The titles of its milestones.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) milestones: Vec<String>,
    /// Attached assets (packages, binaries), without the source archives.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) assets: Vec<ReleaseAsset>,
    /// The release on GitLab.
    pub(crate) web_url: Option<String>,
}

/// Result of `list_releases`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReleaseList {
    /// The project (as given).
    pub(crate) project: String,
    /// The releases of this page, latest first.
    pub(crate) releases: Vec<Release>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many releases there are in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

// ---------------------------------------------------------------------------------------------
// Mapping (pure, so tests can run it on recorded responses)
// ---------------------------------------------------------------------------------------------

/// The `list_repository_tree` result.
pub(crate) fn tree_list(
    project: String,
    git_ref: Option<String>,
    path: Option<String>,
    page: Vec<WireTreeEntry>,
    at: Page,
) -> TreeList {
    let entries = page
        .into_iter()
        .map(|e| TreeEntry {
            kind: match e.kind.as_str() {
                "tree" => "dir",
                "commit" => "submodule",
                _ => "file",
            },
            executable: e.mode.as_deref() == Some("100755"),
            path: e.path,
        })
        .collect();
    TreeList { project, git_ref, path, entries, next_page: at.next_page, total: at.total }
}

/// Whether bytes read as a file are text an agent can use.
fn as_text(bytes: Vec<u8>) -> Option<String> {
    if bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// The `get_file` result; an undecodable body is GitLab's fault, so an upstream error.
pub(crate) fn file_content(
    project: String,
    f: WireFile,
    max_bytes: usize,
) -> Result<FileContent, String> {
    let bytes = match f.encoding.as_deref() {
        Some("base64") | None => decode_base64(&f.content)?,
        Some(_) => f.content.into_bytes(),
    };
    let text = as_text(bytes);
    let (content, cut) = match &text {
        Some(t) => {
            let (kept, cut) = truncate(t, max_bytes);
            (Some(kept), cut.is_some())
        }
        None => (None, false),
    };
    Ok(FileContent {
        project,
        path: f.file_path,
        git_ref: f.git_ref,
        size: f.size,
        binary: text.is_none(),
        content,
        truncated: cut,
        executable: f.execute_filemode,
        last_commit_id: f.last_commit_id,
        blob_id: f.blob_id,
    })
}

impl WireCommit {
    fn summary(&self) -> CommitSummary {
        CommitSummary {
            sha: self.id.clone(),
            title: self.title.clone(),
            author: self.author_name.clone(),
            authored_at: self.authored_date.clone().or_else(|| self.created_at.clone()),
            web_url: self.web_url.clone(),
        }
    }
}

/// The `list_commits` result.
pub(crate) fn commit_list(
    project: String,
    git_ref: Option<String>,
    page: Vec<WireCommit>,
    at: Page,
) -> CommitList {
    CommitList {
        project,
        git_ref,
        commits: page.iter().map(WireCommit::summary).collect(),
        next_page: at.next_page,
        total: at.total,
    }
}

/// The `get_commit` result: the commit and one page of its changed files.
pub(crate) fn commit_detail(
    project: String,
    c: WireCommit,
    files: Vec<WireDiff>,
    max_patch_bytes: usize,
    at: Page,
) -> CommitDetail {
    let committer = c.committer_name.filter(|n| Some(n) != c.author_name.as_ref());
    // The title repeats the message's first line; a one-line message says nothing more.
    let message = c
        .message
        .map(|m| m.trim_end().to_owned())
        .filter(|m| *m != c.title)
        .map(|m| truncate(&m, MESSAGE_MAX_BYTES).0);
    CommitDetail {
        project,
        sha: c.id,
        title: c.title,
        message,
        author: c.author_name,
        authored_at: c.authored_date,
        committer,
        committed_at: c.committed_date,
        parent_ids: c.parent_ids,
        stats: c.stats.map(|s| CommitStats { additions: s.additions, deletions: s.deletions }),
        pipeline: c.last_pipeline.map(|p| PipelineRef { id: p.id, status: p.status }),
        web_url: c.web_url,
        files: files.into_iter().map(|d| file_change(d, max_patch_bytes)).collect(),
        next_page: at.next_page,
        total_files: at.total,
    }
}

impl WireBranch {
    fn branch(self) -> Branch {
        let commit = self.commit;
        Branch {
            name: self.name,
            default: self.default,
            protected: self.protected,
            merged: self.merged,
            sha: commit.as_ref().map(|c| c.id.clone()),
            title: commit.as_ref().map(|c| c.title.clone()),
            committed_at: commit.and_then(|c| c.committed_date.or(c.created_at)),
        }
    }
}

/// The `list_branches` result.
pub(crate) fn branch_list(project: String, page: Vec<WireBranch>, at: Page) -> BranchList {
    BranchList {
        project,
        branches: page.into_iter().map(WireBranch::branch).collect(),
        next_page: at.next_page,
        total: at.total,
    }
}

/// The `compare_refs` result.
pub(crate) fn comparison(
    project: String,
    from: String,
    to: String,
    c: WireComparison,
    max_patch_bytes: usize,
) -> Comparison {
    Comparison {
        project,
        from,
        to,
        commits_total: c.commits.len(),
        commits: c.commits.iter().take(COMPARE_MAX_COMMITS).map(WireCommit::summary).collect(),
        files_total: c.diffs.len(),
        files: c
            .diffs
            .into_iter()
            .take(COMPARE_MAX_FILES)
            .map(|d| file_change(d, max_patch_bytes))
            .collect(),
        same_ref: c.compare_same_ref,
        timed_out: c.compare_timeout,
        web_url: c.web_url,
    }
}

/// The `list_tags` result.
pub(crate) fn tag_list(project: String, page: Vec<WireTag>, at: Page) -> TagList {
    let tags = page
        .into_iter()
        .map(|t| Tag {
            name: t.name,
            sha: t.commit.as_ref().map(|c| c.id.clone()),
            message: t.message.filter(|m| !m.trim().is_empty()),
            committed_at: t.commit.and_then(|c| c.committed_date.or(c.created_at)),
            protected: t.protected,
            has_release: t.release.is_some_and(|r| !r.is_null()),
        })
        .collect();
    TagList { project, tags, next_page: at.next_page, total: at.total }
}

/// The `list_releases` result.
pub(crate) fn release_list(project: String, page: Vec<WireRelease>, at: Page) -> ReleaseList {
    let releases = page
        .into_iter()
        .map(|r| Release {
            tag_name: r.tag_name,
            name: r.name,
            released_at: r.released_at,
            upcoming: r.upcoming_release,
            author: username(r.author),
            sha: r.commit.map(|c| c.id),
            description: truncate_opt(r.description, RELEASE_NOTES_MAX_BYTES),
            milestones: r.milestones.into_iter().map(|m| m.title).collect(),
            assets: r
                .assets
                .map(|a| a.links)
                .unwrap_or_default()
                .into_iter()
                .map(|l| ReleaseAsset { name: l.name, url: l.url })
                .collect(),
            web_url: r.links.and_then(|l| l.web),
        })
        .collect();
    ReleaseList { project, releases, next_page: at.next_page, total: at.total }
}

/// The path of a file below a project: `/projects/acme%2Fapi/repository/files/src%2Flib.rs`.
fn file_uri(project: &ProjectRef, path: &str) -> Result<String, ToolError> {
    let path = path.trim().trim_matches('/');
    if path.is_empty() || path.split('/').any(|s| s.is_empty() || s == "..") {
        return Err(ToolError::invalid_arguments(format!(
            "`path` must be a file's path in the repository, such as `src/lib.rs`; got `{path}`"
        )));
    }
    Ok(format!("/projects/{}/repository/files/{}", project.encoded, encode_component(path)))
}

/// Checks that the named arguments are not blank.
fn required(fields: &[(&str, &str)]) -> Result<(), ToolError> {
    match fields.iter().find(|(_, value)| value.trim().is_empty()) {
        Some((field, _)) => {
            Err(ToolError::invalid_arguments(format!("`{field}` must not be empty")))
        }
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

impl GitLab {
    async fn list_repository_tree(
        &self,
        a: ListTreeArgs,
        ctx: &ToolContext,
    ) -> Result<TreeList, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let folder =
            a.path.map(|f| f.trim().trim_matches('/').to_owned()).filter(|f| !f.is_empty());
        let mut query = vec![
            ("path", folder.clone()),
            ("ref", a.git_ref.clone()),
            ("recursive", a.recursive.then(|| "true".to_owned())),
        ];
        query.extend(paging(a.page, a.per_page));
        let path = uri(&format!("/projects/{}/repository/tree", p.encoded), &query);
        let what = match &folder {
            Some(f) => format!("folder {f}"),
            None => "the repository tree".to_owned(),
        };
        let subject = Subject::object(what, &p.name);
        let (page, at) = self.client.get_json::<Vec<WireTreeEntry>>(&path, &subject, ctx).await?;
        Ok(tree_list(p.name, a.git_ref, folder, page, at))
    }

    async fn get_file(&self, a: GetFileArgs, ctx: &ToolContext) -> Result<FileContent, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let git_ref = a.git_ref.filter(|r| !r.trim().is_empty()).unwrap_or_else(|| "HEAD".into());
        let path = uri(&file_uri(&p, &a.path)?, &[("ref", Some(git_ref.clone()))]);
        let subject = Subject::object(format!("file {} at {git_ref}", a.path.trim()), &p.name);
        let (file, _) = self.client.get_json::<WireFile>(&path, &subject, ctx).await?;
        let max = a.max_bytes.unwrap_or(FILE_MAX_BYTES).clamp(1, FILE_LIMIT);
        file_content(p.name, file, max).map_err(|e| {
            ToolError::new(
                ToolErrorKind::Upstream,
                format!("gitlab sent {} with content that is not base64: {e}", subject.describe()),
            )
        })
    }

    async fn commit_file(
        &self,
        method_put: bool,
        p: ProjectRef,
        body: Map<String, Value>,
        file: &str,
        ctx: &ToolContext,
    ) -> Result<CommittedFile, ToolError> {
        let path = file_uri(&p, file)?;
        let body = Value::Object(body);
        let doing = if method_put { "updating" } else { "creating" };
        let subject = Subject::action(&format!("{doing} file {}", file.trim()), &p.name);
        let done: WireFileCommit = if method_put {
            self.client.put_json(&path, &body, &subject, ctx).await?
        } else {
            self.client.post_json(&path, Some(&body), &subject, ctx).await?
        };
        Ok(CommittedFile { project: p.name, path: done.file_path, branch: done.branch })
    }

    async fn create_file(
        &self,
        a: CreateFileArgs,
        ctx: &ToolContext,
    ) -> Result<CommittedFile, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        required(&[("branch", &a.branch), ("commit_message", &a.commit_message)])?;
        let mut body = Map::new();
        body.insert("branch".into(), json!(a.branch));
        body.insert("content".into(), json!(a.content));
        body.insert("commit_message".into(), json!(a.commit_message));
        if let Some(start) = a.start_branch.filter(|s| !s.trim().is_empty()) {
            body.insert("start_branch".into(), json!(start));
        }
        self.commit_file(false, p, body, &a.path, ctx).await
    }

    async fn update_file(
        &self,
        a: UpdateFileArgs,
        ctx: &ToolContext,
    ) -> Result<CommittedFile, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        required(&[("branch", &a.branch), ("commit_message", &a.commit_message)])?;
        let mut body = Map::new();
        body.insert("branch".into(), json!(a.branch));
        body.insert("content".into(), json!(a.content));
        body.insert("commit_message".into(), json!(a.commit_message));
        if let Some(last) = a.last_commit_id.filter(|s| !s.trim().is_empty()) {
            body.insert("last_commit_id".into(), json!(last));
        }
        if let Some(start) = a.start_branch.filter(|s| !s.trim().is_empty()) {
            body.insert("start_branch".into(), json!(start));
        }
        self.commit_file(true, p, body, &a.path, ctx).await
    }

    async fn list_branches(
        &self,
        a: ListBranchesArgs,
        ctx: &ToolContext,
    ) -> Result<BranchList, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let mut query = vec![("search", a.search)];
        query.extend(paging(a.page, a.per_page));
        let path = uri(&format!("/projects/{}/repository/branches", p.encoded), &query);
        let subject = Subject::listing("the branches", &p.name);
        let (page, at) = self.client.get_json::<Vec<WireBranch>>(&path, &subject, ctx).await?;
        Ok(branch_list(p.name, page, at))
    }

    async fn create_branch(
        &self,
        a: CreateBranchArgs,
        ctx: &ToolContext,
    ) -> Result<CreatedBranch, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        required(&[("branch", &a.branch), ("ref", &a.git_ref)])?;
        let path = format!("/projects/{}/repository/branches", p.encoded);
        let subject = Subject::action(&format!("creating branch {}", a.branch), &p.name);
        let body = json!({"branch": a.branch, "ref": a.git_ref});
        let b: WireBranch = self.client.post_json(&path, Some(&body), &subject, ctx).await?;
        Ok(CreatedBranch {
            project: p.name,
            sha: b.commit.map(|c| c.id),
            branch: b.name,
            web_url: b.web_url,
        })
    }

    async fn list_commits(
        &self,
        a: ListCommitsArgs,
        ctx: &ToolContext,
    ) -> Result<CommitList, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let mut query = vec![
            ("ref_name", a.git_ref.clone()),
            ("path", a.path),
            ("author", a.author),
            ("since", a.since),
            ("until", a.until),
        ];
        query.extend(paging(a.page, a.per_page));
        let path = uri(&format!("/projects/{}/repository/commits", p.encoded), &query);
        let subject = Subject::listing("the commits", &p.name);
        let (page, at) = self.client.get_json::<Vec<WireCommit>>(&path, &subject, ctx).await?;
        Ok(commit_list(p.name, a.git_ref, page, at))
    }

    async fn get_commit(
        &self,
        a: GetCommitArgs,
        ctx: &ToolContext,
    ) -> Result<CommitDetail, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        required(&[("sha", &a.sha)])?;
        let base =
            format!("/projects/{}/repository/commits/{}", p.encoded, encode_component(&a.sha));
        let subject = Subject::object(format!("commit {}", a.sha), &p.name);
        let (commit, _) = self.client.get_json::<WireCommit>(&base, &subject, ctx).await?;
        let diff = uri(&format!("{base}/diff"), &paging(a.page, a.per_page));
        let (files, at) = self.client.get_json::<Vec<WireDiff>>(&diff, &subject, ctx).await?;
        let max_patch = a.max_patch_bytes.unwrap_or(PATCH_MAX_BYTES).min(PATCH_LIMIT);
        Ok(commit_detail(p.name, commit, files, max_patch, at))
    }

    async fn compare_refs(
        &self,
        a: CompareArgs,
        ctx: &ToolContext,
    ) -> Result<Comparison, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        required(&[("from", &a.from), ("to", &a.to)])?;
        let query = [
            ("from", Some(a.from.clone())),
            ("to", Some(a.to.clone())),
            ("straight", a.straight.then(|| "true".to_owned())),
        ];
        let path = uri(&format!("/projects/{}/repository/compare", p.encoded), &query);
        let subject = Subject::action(&format!("comparing {} with {}", a.from, a.to), &p.name)
            .not_found_says(format!(
                "no ref {} or {} in {} (or the token cannot see the project)",
                a.from, a.to, p.name
            ));
        let (c, _) = self.client.get_json::<WireComparison>(&path, &subject, ctx).await?;
        let max_patch = a.max_patch_bytes.unwrap_or(PATCH_MAX_BYTES).min(PATCH_LIMIT);
        Ok(comparison(p.name, a.from, a.to, c, max_patch))
    }

    async fn list_tags(&self, a: ListTagsArgs, ctx: &ToolContext) -> Result<TagList, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let mut query = vec![("search", a.search), ("order_by", Some("updated".to_owned()))];
        query.extend(paging(a.page, a.per_page));
        let path = uri(&format!("/projects/{}/repository/tags", p.encoded), &query);
        let subject = Subject::listing("the tags", &p.name);
        let (page, at) = self.client.get_json::<Vec<WireTag>>(&path, &subject, ctx).await?;
        Ok(tag_list(p.name, page, at))
    }

    async fn list_releases(
        &self,
        a: ListReleasesArgs,
        ctx: &ToolContext,
    ) -> Result<ReleaseList, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let path = uri(&format!("/projects/{}/releases", p.encoded), &paging(a.page, a.per_page));
        let subject = Subject::listing("the releases", &p.name);
        let (page, at) = self.client.get_json::<Vec<WireRelease>>(&path, &subject, ctx).await?;
        Ok(release_list(p.name, page, at))
    }
}

register_tool! {
    provider: GitLab,
    name: "list_repository_tree",
    group: "repository",
    description: "List the files and folders of a repository folder (the root by default) at a \
                  branch, tag or commit, optionally recursively. Each entry has its path, ready \
                  for get_file. Returns `next_page` for more.",
    input: ListTreeArgs,
    output: TreeList,
    handler: GitLab::list_repository_tree,
}

register_tool! {
    provider: GitLab,
    name: "get_file",
    group: "repository",
    description: "Get a file's text from the repository at a branch, tag or commit (the \
                  default branch by default), cut at `max_bytes`, with its size and the \
                  last_commit_id that update_file uses to refuse overwriting newer changes.",
    input: GetFileArgs,
    output: FileContent,
    handler: GitLab::get_file,
}

register_tool! {
    provider: GitLab,
    name: "create_file",
    group: "repository",
    description: "Commit a new file to a branch (optionally creating the branch from \
                  `start_branch`). Fails if the file exists.",
    input: CreateFileArgs,
    output: CommittedFile,
    handler: GitLab::create_file,
}

register_tool! {
    provider: GitLab,
    name: "update_file",
    group: "repository",
    description: "Commit a new version of an existing file to a branch: `content` replaces the \
                  whole file. Pass the `last_commit_id` from get_file so GitLab refuses if the \
                  file changed since.",
    input: UpdateFileArgs,
    output: CommittedFile,
    handler: GitLab::update_file,
}

register_tool! {
    provider: GitLab,
    name: "list_branches",
    group: "repository",
    description: "List a project's branches by name, with their head commit, and which are \
                  default, protected or merged; filter by name.",
    input: ListBranchesArgs,
    output: BranchList,
    handler: GitLab::list_branches,
}

register_tool! {
    provider: GitLab,
    name: "create_branch",
    group: "repository",
    description: "Create a branch from a branch, tag or commit.",
    input: CreateBranchArgs,
    output: CreatedBranch,
    handler: GitLab::create_branch,
}

register_tool! {
    provider: GitLab,
    name: "list_commits",
    group: "repository",
    description: "List the commits of a branch or tag (the default branch by default), newest \
                  first, with SHA, title, author and date; filter by file path, author or time. \
                  Returns `next_page` for more.",
    input: ListCommitsArgs,
    output: CommitList,
    handler: GitLab::list_commits,
}

register_tool! {
    provider: GitLab,
    name: "get_commit",
    group: "repository",
    description: "Get one commit with its message, parents, added/deleted line counts, latest \
                  pipeline and changed files with their diffs (cut per file at \
                  `max_patch_bytes`).",
    input: GetCommitArgs,
    output: CommitDetail,
    handler: GitLab::get_commit,
}

register_tool! {
    provider: GitLab,
    name: "compare_refs",
    group: "repository",
    description: "Compare two branches, tags or commits: the commits `to` adds to `from` and \
                  the changed files with their diffs (cut per file at `max_patch_bytes`).",
    input: CompareArgs,
    output: Comparison,
    handler: GitLab::compare_refs,
}

register_tool! {
    provider: GitLab,
    name: "list_tags",
    group: "repository",
    description: "List a project's tags, most recently updated first, with the commit each \
                  points at and whether a release is made from it.",
    input: ListTagsArgs,
    output: TagList,
    handler: GitLab::list_tags,
}

register_tool! {
    provider: GitLab,
    name: "list_releases",
    group: "repository",
    description: "List a project's releases, latest first (`per_page: 1` for the latest), with \
                  tag, date, author, notes, milestones and attached assets.",
    input: ListReleasesArgs,
    output: ReleaseList,
    handler: GitLab::list_releases,
}
