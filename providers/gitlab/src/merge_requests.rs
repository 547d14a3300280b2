//! Merge requests: list, get, discussions, changes (diffs), approvals, create, comment, and
//! changing one: update, merge, approve, unapprove, resolve a thread.

use quiver_plugin_sdk::prelude::*;

use crate::client::{paging, uri, Page, ProjectRef, Subject};
use crate::issues::{created_note, note, CreatedNote, Note, Scope, WireNote};
use crate::model::{
    insert_present, is_false, is_zero, label_list, labels_value, nullable, project_arg,
    project_arg_opt, truncate, truncate_opt, update_body, username, usernames, StateEvent,
    WireReferences, WireTitle, WireUser, BODY_MAX_BYTES,
};
use crate::GitLab;

/// Longest diff returned per file unless the call asks otherwise, in bytes.
pub(crate) const PATCH_MAX_BYTES: usize = 4 * 1024;
/// Most bytes of diff a call may ask for per file.
pub(crate) const PATCH_LIMIT: usize = 64 * 1024;

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// `state` of merge request listings.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MergeRequestState {
    /// Open ones (`open` is accepted too).
    #[serde(alias = "open")]
    Opened,
    /// Closed without merging.
    Closed,
    /// Merged.
    Merged,
    /// Locked (being merged).
    Locked,
    /// All of them.
    All,
}

impl MergeRequestState {
    /// The query value (`None` for all: GitLab's default).
    pub(crate) fn query(self) -> Option<String> {
        match self {
            MergeRequestState::Opened => Some("opened".into()),
            MergeRequestState::Closed => Some("closed".into()),
            MergeRequestState::Merged => Some("merged".into()),
            MergeRequestState::Locked => Some("locked".into()),
            MergeRequestState::All => None,
        }
    }
}

/// Arguments of `list_merge_requests`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListMergeRequestsArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`). Without it, lists
    /// merge requests across the projects the token can see (see `scope`).
    #[serde(default, alias = "project_id", deserialize_with = "project_arg_opt")]
    pub(crate) project: Option<String>,
    /// `opened` (the default), `closed`, `merged`, `locked` or `all`.
    pub(crate) state: Option<MergeRequestState>,
    /// Only merge requests from this source branch.
    pub(crate) source_branch: Option<String>,
    /// Only merge requests into this target branch, e.g. `main`.
    pub(crate) target_branch: Option<String>,
    /// Only merge requests carrying all of these labels.
    pub(crate) labels: Option<Vec<String>>,
    /// Only merge requests opened by this username.
    pub(crate) author_username: Option<String>,
    /// Only merge requests this username is asked to review.
    pub(crate) reviewer_username: Option<String>,
    /// Only merge requests whose title or description contains this text.
    pub(crate) search: Option<String>,
    /// Without `project`: `created_by_me` (GitLab's default), `assigned_to_me` or `all`.
    pub(crate) scope: Option<Scope>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of the tools on one merge request (`get_merge_request`,
/// `get_merge_request_approvals`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MergeRequestArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The merge request's number within the project (the 19 of `!19`).
    #[serde(alias = "merge_request_iid")]
    pub(crate) iid: u64,
}

/// Arguments of `list_merge_request_discussions`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListDiscussionsArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The merge request's number within the project (the 19 of `!19`).
    #[serde(alias = "merge_request_iid")]
    pub(crate) iid: u64,
    /// Only threads that still need resolving.
    #[serde(default)]
    pub(crate) unresolved_only: bool,
    /// Keep system notes ("added 1 commit", "approved this merge request"); left out and
    /// counted by default.
    #[serde(default)]
    pub(crate) include_system: bool,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Threads per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `get_merge_request_changes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChangesArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The merge request's number within the project (the 19 of `!19`).
    #[serde(alias = "merge_request_iid")]
    pub(crate) iid: u64,
    /// Longest diff kept per file, in bytes (4096 by default; 0 leaves diffs out). Longer diffs
    /// are cut, saying how much was cut.
    #[schemars(range(max = 65536))]
    pub(crate) max_patch_bytes: Option<usize>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Files per page: 20 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `create_merge_request`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateMergeRequestArgs {
    /// The project the branch is in: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The branch with the changes.
    pub(crate) source_branch: String,
    /// The branch to merge into, e.g. `main`.
    pub(crate) target_branch: String,
    /// The title.
    pub(crate) title: String,
    /// The description, in Markdown (`Closes #47` closes the issue on merge).
    #[serde(alias = "body")]
    pub(crate) description: Option<String>,
    /// Open it as a draft (the title gets a `Draft: ` prefix).
    #[serde(default)]
    pub(crate) draft: bool,
    /// Label names to set.
    pub(crate) labels: Option<Vec<String>>,
    /// Numeric user ids to assign.
    pub(crate) assignee_ids: Option<Vec<u64>>,
    /// Numeric user ids to ask for a review.
    pub(crate) reviewer_ids: Option<Vec<u64>>,
    /// Delete the source branch once merged.
    pub(crate) remove_source_branch: Option<bool>,
    /// Squash the commits on merge.
    pub(crate) squash: Option<bool>,
    /// For a merge request from a fork: the numeric id of the upstream project to merge into.
    pub(crate) target_project_id: Option<u64>,
}

/// Arguments of `create_merge_request_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateMergeRequestNoteArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The merge request's number within the project (the 19 of `!19`).
    #[serde(alias = "merge_request_iid")]
    pub(crate) iid: u64,
    /// The comment, in Markdown.
    pub(crate) body: String,
}

// ---------------------------------------------------------------------------------------------
// What GitLab sends (only the kept fields)
// ---------------------------------------------------------------------------------------------

/// A merge request, as the list, get and create endpoints send it (the get endpoint adds
/// `changes_count`, `head_pipeline`, `diff_refs` and `user.can_merge`).
#[derive(Debug, Deserialize)]
pub(crate) struct WireMergeRequest {
    iid: u64,
    #[serde(default)]
    title: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    draft: Option<bool>,
    #[serde(default)]
    work_in_progress: Option<bool>,
    #[serde(default)]
    author: Option<WireUser>,
    #[serde(default, deserialize_with = "nullable")]
    assignees: Vec<WireUser>,
    #[serde(default, deserialize_with = "nullable")]
    reviewers: Vec<WireUser>,
    #[serde(default, deserialize_with = "nullable")]
    labels: Vec<String>,
    #[serde(default)]
    milestone: Option<WireTitle>,
    #[serde(default)]
    source_branch: String,
    #[serde(default)]
    target_branch: String,
    #[serde(default)]
    source_project_id: Option<u64>,
    #[serde(default)]
    target_project_id: Option<u64>,
    #[serde(default)]
    sha: Option<String>,
    #[serde(default)]
    merge_status: Option<String>,
    #[serde(default)]
    detailed_merge_status: Option<String>,
    #[serde(default)]
    has_conflicts: bool,
    #[serde(default)]
    blocking_discussions_resolved: Option<bool>,
    #[serde(default)]
    user_notes_count: u64,
    #[serde(default)]
    merged_by: Option<WireUser>,
    #[serde(default)]
    merge_user: Option<WireUser>,
    #[serde(default)]
    merged_at: Option<String>,
    #[serde(default)]
    merge_commit_sha: Option<String>,
    #[serde(default)]
    squash_commit_sha: Option<String>,
    #[serde(default)]
    merge_when_pipeline_succeeds: bool,
    #[serde(default)]
    squash: bool,
    #[serde(default)]
    merge_error: Option<String>,
    #[serde(default)]
    changes_count: Option<String>,
    #[serde(default)]
    head_pipeline: Option<WirePipelineRef>,
    #[serde(default)]
    diff_refs: Option<DiffRefs>,
    #[serde(default)]
    user: Option<WireCanMerge>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
    #[serde(default)]
    closed_at: Option<String>,
    #[serde(default)]
    references: WireReferences,
    #[serde(default)]
    web_url: Option<String>,
}

/// `head_pipeline`: only what says whether CI passed.
#[derive(Debug, Deserialize)]
pub(crate) struct WirePipelineRef {
    id: u64,
    #[serde(default)]
    status: Option<String>,
}

/// `user`: what the token's user may do.
#[derive(Debug, Deserialize)]
pub(crate) struct WireCanMerge {
    #[serde(default)]
    can_merge: Option<bool>,
}

/// `diff_refs`: the three commits a positioned diff comment needs.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub(crate) struct DiffRefs {
    /// The merge base of source and target.
    pub(crate) base_sha: Option<String>,
    /// The source branch's head.
    pub(crate) head_sha: Option<String>,
    /// The target branch's head when the diff was made.
    pub(crate) start_sha: Option<String>,
}

/// A discussion thread.
#[derive(Debug, Deserialize)]
pub(crate) struct WireDiscussion {
    id: String,
    #[serde(default, deserialize_with = "nullable")]
    notes: Vec<WireThreadNote>,
}

/// A note within a thread: a note plus resolution and diff position.
#[derive(Debug, Deserialize)]
pub(crate) struct WireThreadNote {
    #[serde(flatten)]
    note: WireNote,
    #[serde(default)]
    resolvable: bool,
    #[serde(default)]
    resolved: Option<bool>,
    #[serde(default)]
    resolved_by: Option<WireUser>,
    #[serde(default)]
    position: Option<WirePosition>,
}

/// Where a diff note sits.
#[derive(Debug, Deserialize)]
pub(crate) struct WirePosition {
    #[serde(default)]
    new_path: Option<String>,
    #[serde(default)]
    old_path: Option<String>,
    #[serde(default)]
    new_line: Option<u64>,
    #[serde(default)]
    old_line: Option<u64>,
}

/// A changed file of `/diffs` (and of the older `/changes`).
#[derive(Debug, Deserialize)]
pub(crate) struct WireDiff {
    #[serde(default)]
    old_path: String,
    #[serde(default)]
    new_path: String,
    #[serde(default)]
    diff: Option<String>,
    #[serde(default)]
    new_file: bool,
    #[serde(default)]
    renamed_file: bool,
    #[serde(default)]
    deleted_file: bool,
    #[serde(default)]
    too_large: Option<bool>,
    #[serde(default)]
    collapsed: Option<bool>,
    #[serde(default)]
    generated_file: Option<bool>,
}

/// `/changes`: the merge request with every changed file (GitLab before 15.7).
#[derive(Debug, Deserialize)]
pub(crate) struct WireChanges {
    #[serde(default, deserialize_with = "nullable")]
    changes: Vec<WireDiff>,
    #[serde(default)]
    overflow: bool,
}

/// The approval state of a merge request.
#[derive(Debug, Deserialize)]
pub(crate) struct WireApprovals {
    #[serde(default)]
    approved: Option<bool>,
    #[serde(default)]
    approvals_required: Option<u64>,
    #[serde(default)]
    approvals_left: Option<u64>,
    #[serde(default, deserialize_with = "nullable")]
    approved_by: Vec<WireApprover>,
    #[serde(default, deserialize_with = "nullable")]
    suggested_approvers: Vec<WireUser>,
    #[serde(default)]
    user_has_approved: Option<bool>,
    #[serde(default)]
    user_can_approve: Option<bool>,
}

/// `approved_by[]`: `{"user": {...}, "approved_at": ...}`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireApprover {
    user: WireUser,
    #[serde(default)]
    approved_at: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// What the tools return
// ---------------------------------------------------------------------------------------------

/// One merge request in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MergeRequestSummary {
    /// The merge request's project, when the listing spans projects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) project: Option<String>,
    /// The merge request's number within its project.
    pub(crate) iid: u64,
    /// The title.
    pub(crate) title: String,
    /// `opened`, `closed`, `merged` or `locked`.
    pub(crate) state: String,
    /// Set for a draft.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) draft: bool,
    /// The author's username.
    pub(crate) author: Option<String>,
    /// The branch with the changes.
    pub(crate) source_branch: String,
    /// The branch it merges into.
    pub(crate) target_branch: String,
    /// Set when the source branch is in a fork.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) from_fork: bool,
    /// The source branch's head commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sha: Option<String>,
    /// What stands between it and a merge: `mergeable`, `not_approved`, `ci_must_pass`,
    /// `discussions_not_resolved`, `conflict`, `draft_status`, `need_rebase`, `checking`…
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) detailed_merge_status: Option<String>,
    /// Set when it conflicts with the target branch.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) has_conflicts: bool,
    /// Reviewer usernames.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) reviewers: Vec<String>,
    /// Label names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) labels: Vec<String>,
    /// Comments by people.
    pub(crate) notes: u64,
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
    /// The merge request on GitLab.
    pub(crate) web_url: Option<String>,
}

/// Result of `list_merge_requests`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MergeRequestList {
    /// The project listed (absent for a listing across projects: each merge request names its
    /// own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) project: Option<String>,
    /// The merge requests of this page, newest first.
    pub(crate) merge_requests: Vec<MergeRequestSummary>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many match in all, when GitLab counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// A pipeline, as a merge request shows its latest.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct PipelineRef {
    /// The pipeline id (for `list_pipeline_jobs`).
    pub(crate) id: u64,
    /// `running`, `success`, `failed`, `canceled`, `manual`…
    pub(crate) status: Option<String>,
}

/// Result of `get_merge_request`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MergeRequestDetail {
    /// The project (as given).
    pub(crate) project: String,
    /// Number, title, state, branches, merge status, labels and times.
    #[serde(flatten)]
    pub(crate) merge_request: MergeRequestSummary,
    /// The description, in Markdown (cut at 32 KiB, saying so).
    pub(crate) description: Option<String>,
    /// Assignee usernames.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) assignees: Vec<String>,
    /// The milestone's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) milestone: Option<String>,
    /// Files changed, as GitLab counts them (`"1000+"` for huge ones).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) changes_count: Option<String>,
    /// The latest pipeline of the source branch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) head_pipeline: Option<PipelineRef>,
    /// False while threads that block merging are unresolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) blocking_discussions_resolved: Option<bool>,
    /// Whether the token's user may merge it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) can_merge: Option<bool>,
    /// Set when it merges automatically once the pipeline succeeds.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) auto_merge: bool,
    /// Set when its commits are squashed on merge.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) squash: bool,
    /// Why the last merge attempt failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merge_error: Option<String>,
    /// Who merged it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merged_by: Option<String>,
    /// The merge (or squash) commit, once merged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merge_commit_sha: Option<String>,
    /// The commits a positioned diff comment refers to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) diff_refs: Option<DiffRefs>,
}

/// One discussion thread.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Discussion {
    /// The thread id (to reply to it).
    pub(crate) id: String,
    /// For a comment on the diff: the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
    /// For a comment on the diff: the line (in the new file, else the old one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u64>,
    /// Whether the thread is resolved; absent for comments that cannot be resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) resolved: Option<bool>,
    /// Who resolved it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) resolved_by: Option<String>,
    /// The notes of the thread, oldest first.
    pub(crate) notes: Vec<Note>,
}

/// Result of `list_merge_request_discussions`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct DiscussionList {
    /// The project (as given).
    pub(crate) project: String,
    /// The merge request's number.
    pub(crate) iid: u64,
    /// Threads of this page that still need resolving.
    pub(crate) unresolved: u64,
    /// The threads of this page.
    pub(crate) discussions: Vec<Discussion>,
    /// Threads of this page left out: system notes, or resolved ones with `unresolved_only`.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) skipped: u64,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many threads there are in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// One changed file.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct FileChange {
    /// The file's path.
    pub(crate) path: String,
    /// The path before a rename.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) old_path: Option<String>,
    /// `added`, `deleted`, `renamed` or `modified`.
    pub(crate) status: &'static str,
    /// Added lines (counted in the diff).
    pub(crate) additions: u64,
    /// Deleted lines (counted in the diff).
    pub(crate) deletions: u64,
    /// Set for a generated file.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) generated: bool,
    /// The unified diff (cut, saying so, beyond `max_patch_bytes`; absent when empty, as for
    /// binary files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) diff: Option<String>,
    /// Why GitLab sent no diff: `too_large` or `collapsed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) diff_omitted: Option<&'static str>,
}

/// Result of `get_merge_request_changes`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ChangeList {
    /// The project (as given).
    pub(crate) project: String,
    /// The merge request's number.
    pub(crate) iid: u64,
    /// The changed files of this page.
    pub(crate) files: Vec<FileChange>,
    /// Set when GitLab left files out of a very large diff.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) overflow: bool,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
    /// How many files changed in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total: Option<u64>,
}

/// One approval.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Approval {
    /// The approver's username.
    pub(crate) username: String,
    /// When they approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) approved_at: Option<String>,
}

/// Result of `get_merge_request_approvals`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Approvals {
    /// The project (as given).
    pub(crate) project: String,
    /// The merge request's number.
    pub(crate) iid: u64,
    /// Whether the approval rules are satisfied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) approved: Option<bool>,
    /// Approvals the rules require.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) approvals_required: Option<u64>,
    /// Approvals still missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) approvals_left: Option<u64>,
    /// Who approved, and when.
    pub(crate) approved_by: Vec<Approval>,
    /// Usernames GitLab suggests as approvers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) suggested_approvers: Vec<String>,
    /// Whether the token's user has approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) user_has_approved: Option<bool>,
    /// Whether the token's user may approve.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) user_can_approve: Option<bool>,
}

/// Result of `create_merge_request`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CreatedMergeRequest {
    /// The project (as given).
    pub(crate) project: String,
    /// The new merge request's number.
    pub(crate) iid: u64,
    /// Its title.
    pub(crate) title: String,
    /// The branch with the changes.
    pub(crate) source_branch: String,
    /// The branch it merges into.
    pub(crate) target_branch: String,
    /// Set for a draft.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) draft: bool,
    /// GitLab's first look at mergeability (often `checking` right after creation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) detailed_merge_status: Option<String>,
    /// The merge request on GitLab.
    pub(crate) web_url: Option<String>,
    /// When it was created.
    pub(crate) created_at: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Mapping (pure, so tests can run it on recorded responses)
// ---------------------------------------------------------------------------------------------

impl WireMergeRequest {
    /// The listing entry; `with_project` names the merge request's project.
    pub(crate) fn summary(&self, with_project: bool) -> MergeRequestSummary {
        let from_fork = matches!(
            (self.source_project_id, self.target_project_id),
            (Some(s), Some(t)) if s != t
        );
        MergeRequestSummary {
            project: if with_project { self.references.project() } else { None },
            iid: self.iid,
            title: self.title.clone(),
            state: self.state.clone(),
            draft: self.draft.or(self.work_in_progress).unwrap_or(false),
            author: self.author.as_ref().map(|u| u.username.clone()),
            source_branch: self.source_branch.clone(),
            target_branch: self.target_branch.clone(),
            from_fork,
            sha: self.sha.clone(),
            detailed_merge_status: self
                .detailed_merge_status
                .clone()
                .or_else(|| self.merge_status.clone())
                .filter(|_| self.state == "opened"),
            has_conflicts: self.has_conflicts,
            reviewers: self.reviewers.iter().map(|u| u.username.clone()).collect(),
            labels: self.labels.clone(),
            notes: self.user_notes_count,
            created_at: self.created_at.clone(),
            updated_at: self.updated_at.clone(),
            merged_at: self.merged_at.clone(),
            closed_at: self.closed_at.clone(),
            web_url: self.web_url.clone(),
        }
    }
}

/// The `list_merge_requests` result.
pub(crate) fn merge_request_list(
    project: Option<String>,
    page: Vec<WireMergeRequest>,
    at: Page,
) -> MergeRequestList {
    let across = project.is_none();
    MergeRequestList {
        merge_requests: page.iter().map(|m| m.summary(across)).collect(),
        project,
        next_page: at.next_page,
        total: at.total,
    }
}

/// The `get_merge_request` result.
pub(crate) fn merge_request_detail(project: String, m: WireMergeRequest) -> MergeRequestDetail {
    let merge_request = m.summary(false);
    let merged = m.state == "merged";
    MergeRequestDetail {
        project,
        merge_request,
        description: truncate_opt(m.description, BODY_MAX_BYTES),
        assignees: usernames(m.assignees),
        milestone: m.milestone.map(|t| t.title),
        changes_count: m.changes_count,
        head_pipeline: m.head_pipeline.map(|p| PipelineRef { id: p.id, status: p.status }),
        blocking_discussions_resolved: m.blocking_discussions_resolved.filter(|_| !merged),
        can_merge: m.user.and_then(|u| u.can_merge).filter(|_| !merged),
        auto_merge: m.merge_when_pipeline_succeeds,
        squash: m.squash,
        merge_error: m.merge_error.filter(|e| !e.is_empty()),
        merged_by: username(m.merged_by.or(m.merge_user)).filter(|_| merged),
        merge_commit_sha: m.squash_commit_sha.or(m.merge_commit_sha).filter(|_| merged),
        diff_refs: m.diff_refs,
    }
}

/// The `list_merge_request_discussions` result.
pub(crate) fn discussion_list(
    project: String,
    iid: u64,
    page: Vec<WireDiscussion>,
    include_system: bool,
    unresolved_only: bool,
    at: Page,
) -> DiscussionList {
    let mut skipped = 0;
    let mut unresolved = 0;
    let mut discussions = Vec::new();
    for d in page {
        let first = d.notes.first();
        let system = d.notes.iter().all(|n| n.note.system);
        let resolvable = d.notes.iter().any(|n| n.resolvable);
        let resolved = resolvable
            .then(|| d.notes.iter().filter(|n| n.resolvable).all(|n| n.resolved.unwrap_or(false)));
        if resolved == Some(false) {
            unresolved += 1;
        }
        if (system && !include_system) || (unresolved_only && resolved != Some(false)) {
            skipped += 1;
            continue;
        }
        let position = first.and_then(|n| n.position.as_ref());
        let path = position.and_then(|p| p.new_path.clone().or_else(|| p.old_path.clone()));
        let line = position.and_then(|p| p.new_line.or(p.old_line));
        let resolved_by = d
            .notes
            .iter()
            .find_map(|n| n.resolved_by.as_ref().map(|u| u.username.clone()))
            .filter(|_| resolved == Some(true));
        discussions.push(Discussion {
            id: d.id,
            path,
            line,
            resolved,
            resolved_by,
            notes: d.notes.into_iter().map(|n| note(n.note)).collect(),
        });
    }
    DiscussionList {
        project,
        iid,
        unresolved,
        discussions,
        skipped,
        next_page: at.next_page,
        total: at.total,
    }
}

/// Added and deleted lines of a unified diff (hunk headers and file headers not counted).
fn count_lines(diff: &str) -> (u64, u64) {
    diff.lines().fold((0, 0), |(add, del), line| {
        if line.starts_with('+') && !line.starts_with("+++ ") {
            (add + 1, del)
        } else if line.starts_with('-') && !line.starts_with("--- ") {
            (add, del + 1)
        } else {
            (add, del)
        }
    })
}

/// One changed file, its diff cut to `max_patch_bytes` (0 drops it).
pub(crate) fn file_change(d: WireDiff, max_patch_bytes: usize) -> FileChange {
    let status = if d.new_file {
        "added"
    } else if d.deleted_file {
        "deleted"
    } else if d.renamed_file {
        "renamed"
    } else {
        "modified"
    };
    let raw = d.diff.unwrap_or_default();
    let (additions, deletions) = count_lines(&raw);
    let diff_omitted = if d.too_large == Some(true) {
        Some("too_large")
    } else if d.collapsed == Some(true) && raw.is_empty() {
        Some("collapsed")
    } else {
        None
    };
    FileChange {
        old_path: (d.renamed_file && d.old_path != d.new_path).then_some(d.old_path),
        path: d.new_path,
        status,
        additions,
        deletions,
        generated: d.generated_file.unwrap_or(false),
        diff: (!raw.is_empty() && max_patch_bytes > 0).then(|| truncate(&raw, max_patch_bytes).0),
        diff_omitted,
    }
}

/// The `get_merge_request_changes` result.
pub(crate) fn change_list(
    project: String,
    iid: u64,
    files: Vec<WireDiff>,
    max_patch_bytes: usize,
    overflow: bool,
    at: Page,
) -> ChangeList {
    ChangeList {
        project,
        iid,
        files: files.into_iter().map(|d| file_change(d, max_patch_bytes)).collect(),
        overflow,
        next_page: at.next_page,
        total: at.total,
    }
}

/// The `get_merge_request_approvals` result.
pub(crate) fn approvals(project: String, iid: u64, a: WireApprovals) -> Approvals {
    Approvals {
        project,
        iid,
        approved: a.approved.or(a.approvals_left.map(|left| left == 0)),
        approvals_required: a.approvals_required,
        approvals_left: a.approvals_left,
        approved_by: a
            .approved_by
            .into_iter()
            .map(|a| Approval { username: a.user.username, approved_at: a.approved_at })
            .collect(),
        suggested_approvers: usernames(a.suggested_approvers),
        user_has_approved: a.user_has_approved,
        user_can_approve: a.user_can_approve,
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

impl GitLab {
    async fn list_merge_requests(
        &self,
        a: ListMergeRequestsArgs,
        ctx: &ToolContext,
    ) -> Result<MergeRequestList, ToolError> {
        let project = a.project.as_deref().map(ProjectRef::parse).transpose()?;
        let mut query = vec![
            ("state", a.state.unwrap_or(MergeRequestState::Opened).query()),
            ("source_branch", a.source_branch),
            ("target_branch", a.target_branch),
            ("labels", label_list(a.labels)),
            ("author_username", a.author_username),
            ("reviewer_username", a.reviewer_username),
            ("search", a.search),
            ("scope", a.scope.filter(|_| project.is_none()).map(|s| s.as_str().to_owned())),
        ];
        query.extend(paging(a.page, a.per_page));
        let (path, subject) = match &project {
            Some(p) => (
                format!("/projects/{}/merge_requests", p.encoded),
                Subject::listing("the merge requests", &p.name),
            ),
            None => ("/merge_requests".to_owned(), Subject::global("the merge requests")),
        };
        let (page, at) = self
            .client
            .get_json::<Vec<WireMergeRequest>>(&uri(&path, &query), &subject, ctx)
            .await?;
        Ok(merge_request_list(project.map(|p| p.name), page, at))
    }

    async fn get_merge_request(
        &self,
        a: MergeRequestArgs,
        ctx: &ToolContext,
    ) -> Result<MergeRequestDetail, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let path = format!("/projects/{}/merge_requests/{}", p.encoded, a.iid);
        let subject = Subject::object(format!("merge request !{}", a.iid), &p.name);
        let (mr, _) = self.client.get_json::<WireMergeRequest>(&path, &subject, ctx).await?;
        Ok(merge_request_detail(p.name, mr))
    }

    async fn list_merge_request_discussions(
        &self,
        a: ListDiscussionsArgs,
        ctx: &ToolContext,
    ) -> Result<DiscussionList, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let path = uri(
            &format!("/projects/{}/merge_requests/{}/discussions", p.encoded, a.iid),
            &paging(a.page, a.per_page),
        );
        let subject = Subject::object(format!("merge request !{}", a.iid), &p.name);
        let (page, at) = self.client.get_json::<Vec<WireDiscussion>>(&path, &subject, ctx).await?;
        // Each note's author, by the name the result gives them, for the labels.
        let authors: std::collections::HashMap<String, crate::model::WireUser> = page
            .iter()
            .flat_map(|d| &d.notes)
            .filter_map(|n| n.note.author.clone())
            .map(|user| (user.username.clone(), user))
            .collect();
        let project = p.name.clone();
        let list = discussion_list(project, a.iid, page, a.include_system, a.unresolved_only, at);
        let texts = list
            .discussions
            .iter()
            .enumerate()
            .flat_map(|(i, d)| {
                d.notes.iter().enumerate().filter_map(move |(j, n)| {
                    Some((format!("/discussions/{i}/notes/{j}/body"), n.author.as_ref()?))
                })
            })
            .filter_map(|(pointer, name)| Some((pointer, authors.get(name)?)))
            .collect();
        self.label_authors(&p, texts, ctx).await;
        Ok(list)
    }

    async fn get_merge_request_changes(
        &self,
        a: ChangesArgs,
        ctx: &ToolContext,
    ) -> Result<ChangeList, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let max_patch = a.max_patch_bytes.unwrap_or(PATCH_MAX_BYTES).min(PATCH_LIMIT);
        let base = format!("/projects/{}/merge_requests/{}", p.encoded, a.iid);
        let subject = Subject::object(format!("merge request !{}", a.iid), &p.name);
        let diffs = uri(&format!("{base}/diffs"), &paging(a.page, a.per_page));
        match self.client.get_json::<Vec<WireDiff>>(&diffs, &subject, ctx).await {
            Ok((files, at)) => Ok(change_list(p.name, a.iid, files, max_patch, false, at)),
            // `/diffs` came with GitLab 15.7; older instances answer 404 for it, so ask the
            // older `/changes` (whose 404 then means the merge request is missing).
            Err(e) if e.kind == ToolErrorKind::NotFound && a.page.unwrap_or(1) <= 1 => {
                let (changes, _) = self
                    .client
                    .get_json::<WireChanges>(&format!("{base}/changes"), &subject, ctx)
                    .await?;
                let total = Some(changes.changes.len() as u64);
                let at = Page { next_page: None, total };
                Ok(change_list(p.name, a.iid, changes.changes, max_patch, changes.overflow, at))
            }
            Err(e) => Err(e),
        }
    }

    async fn get_merge_request_approvals(
        &self,
        a: MergeRequestArgs,
        ctx: &ToolContext,
    ) -> Result<Approvals, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let path = format!("/projects/{}/merge_requests/{}/approvals", p.encoded, a.iid);
        let subject = Subject::object(format!("merge request !{}", a.iid), &p.name);
        let (state, _) = self.client.get_json::<WireApprovals>(&path, &subject, ctx).await?;
        Ok(approvals(p.name, a.iid, state))
    }

    async fn create_merge_request(
        &self,
        a: CreateMergeRequestArgs,
        ctx: &ToolContext,
    ) -> Result<CreatedMergeRequest, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        for (field, value) in [
            ("title", &a.title),
            ("source_branch", &a.source_branch),
            ("target_branch", &a.target_branch),
        ] {
            if value.trim().is_empty() {
                return Err(ToolError::invalid_arguments(format!("`{field}` must not be empty")));
            }
        }
        let title = if a.draft && !a.title.to_ascii_lowercase().starts_with("draft:") {
            format!("Draft: {}", a.title)
        } else {
            a.title
        };
        let mut body = Map::new();
        body.insert("source_branch".into(), json!(a.source_branch));
        body.insert("target_branch".into(), json!(a.target_branch));
        body.insert("title".into(), json!(title));
        let optional = [
            ("description", a.description.map(Value::from)),
            ("labels", label_list(a.labels).map(Value::from)),
            ("assignee_ids", a.assignee_ids.filter(|i| !i.is_empty()).map(|i| json!(i))),
            ("reviewer_ids", a.reviewer_ids.filter(|i| !i.is_empty()).map(|i| json!(i))),
            ("remove_source_branch", a.remove_source_branch.map(Value::from)),
            ("squash", a.squash.map(Value::from)),
            ("target_project_id", a.target_project_id.map(Value::from)),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                body.insert(key.into(), value);
            }
        }
        let path = format!("/projects/{}/merge_requests", p.encoded);
        let subject = Subject::action("creating a merge request", &p.name);
        let mr: WireMergeRequest =
            self.client.post_json(&path, Some(&Value::Object(body)), &subject, ctx).await?;
        let summary = mr.summary(false);
        Ok(CreatedMergeRequest {
            project: p.name,
            iid: summary.iid,
            title: summary.title,
            source_branch: summary.source_branch,
            target_branch: summary.target_branch,
            draft: summary.draft,
            detailed_merge_status: summary.detailed_merge_status,
            web_url: summary.web_url,
            created_at: summary.created_at,
        })
    }

    async fn create_merge_request_note(
        &self,
        a: CreateMergeRequestNoteArgs,
        ctx: &ToolContext,
    ) -> Result<CreatedNote, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        if a.body.trim().is_empty() {
            return Err(ToolError::invalid_arguments("`body` must not be empty"));
        }
        let path = format!("/projects/{}/merge_requests/{}/notes", p.encoded, a.iid);
        let subject = Subject::object(format!("merge request !{}", a.iid), &p.name);
        let body = json!({"body": a.body});
        let note: WireNote = self.client.post_json(&path, Some(&body), &subject, ctx).await?;
        Ok(created_note(p.name, a.iid, note))
    }
}

register_tool! {
    provider: GitLab,
    name: "list_merge_requests",
    group: "merge_requests",
    description: "List a project's merge requests (or, without `project`, those across \
                  projects the token can see), newest first, with branches, head SHA, merge \
                  status, draft flag, reviewers and labels; filter by state, branches, labels, \
                  author, reviewer or text. Returns `next_page` for more.",
    input: ListMergeRequestsArgs,
    output: MergeRequestList,
    handler: GitLab::list_merge_requests,
}

register_tool! {
    provider: GitLab,
    name: "get_merge_request",
    group: "merge_requests",
    description: "Get one merge request by its number (`iid`) with its description, what \
                  blocks merging (detailed_merge_status, conflicts, unresolved threads), head \
                  pipeline status, diff_refs and change count.",
    input: MergeRequestArgs,
    output: MergeRequestDetail,
    handler: GitLab::get_merge_request,
}

register_tool! {
    provider: GitLab,
    name: "list_merge_request_discussions",
    group: "merge_requests",
    description: "List the discussion threads of a merge request: review comments on the diff \
                  (file and line) and general comments, with who resolved what; system notes \
                  left out unless asked for.",
    input: ListDiscussionsArgs,
    output: DiscussionList,
    handler: GitLab::list_merge_request_discussions,
}

register_tool! {
    provider: GitLab,
    name: "get_merge_request_changes",
    group: "merge_requests",
    description: "List the files a merge request changes, with added/deleted line counts and \
                  each file's unified diff (cut per file at `max_patch_bytes`).",
    input: ChangesArgs,
    output: ChangeList,
    handler: GitLab::get_merge_request_changes,
}

register_tool! {
    provider: GitLab,
    name: "get_merge_request_approvals",
    group: "merge_requests",
    description: "Get a merge request's approval state: whether it is approved, how many \
                  approvals are required and left, and who approved.",
    input: MergeRequestArgs,
    output: Approvals,
    handler: GitLab::get_merge_request_approvals,
}

register_tool! {
    provider: GitLab,
    name: "create_merge_request",
    group: "merge_requests",
    description: "Open a merge request from a source branch into a target branch, with a \
                  title, description, labels, assignees and reviewers; `draft` opens it as a \
                  draft. Returns its number and URL.",
    input: CreateMergeRequestArgs,
    output: CreatedMergeRequest,
    handler: GitLab::create_merge_request,
}

register_tool! {
    provider: GitLab,
    name: "create_merge_request_note",
    group: "merge_requests",
    description: "Add a general comment (note) to a merge request.",
    input: CreateMergeRequestNoteArgs,
    output: CreatedNote,
    handler: GitLab::create_merge_request_note,
}

// ---------------------------------------------------------------------------------------------
// Changing a merge request: update, merge, approve, unapprove, resolve a thread
// ---------------------------------------------------------------------------------------------

/// Arguments of `update_merge_request`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateMergeRequestArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The merge request's number within the project (the 19 of `!19`).
    #[serde(alias = "merge_request_iid")]
    pub(crate) iid: u64,
    /// A new title (a `Draft: ` prefix makes it a draft; removing it marks it ready).
    pub(crate) title: Option<String>,
    /// A new description, in Markdown (replaces the old one).
    #[serde(alias = "body")]
    pub(crate) description: Option<String>,
    /// A new target branch.
    pub(crate) target_branch: Option<String>,
    /// `close` or `reopen` it.
    pub(crate) state_event: Option<StateEvent>,
    /// Replace all labels with these (`[]` removes them all).
    pub(crate) labels: Option<Vec<String>>,
    /// Labels to add, keeping the others.
    pub(crate) add_labels: Option<Vec<String>>,
    /// Labels to remove, keeping the others.
    pub(crate) remove_labels: Option<Vec<String>>,
    /// Replace the assignees with these numeric user ids (`[]` unassigns all; ids come from
    /// `search_users`).
    pub(crate) assignee_ids: Option<Vec<u64>>,
    /// Replace the reviewers with these numeric user ids (`[]` removes all).
    pub(crate) reviewer_ids: Option<Vec<u64>>,
    /// The numeric id of the milestone to set (from `list_milestones`); 0 removes it.
    pub(crate) milestone_id: Option<u64>,
    /// Delete the source branch once merged.
    pub(crate) remove_source_branch: Option<bool>,
    /// Squash the commits on merge.
    pub(crate) squash: Option<bool>,
    /// Lock the discussion (only project members may comment).
    pub(crate) discussion_locked: Option<bool>,
}

/// Arguments of `merge_merge_request`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MergeMergeRequestArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The merge request's number within the project (the 19 of `!19`).
    #[serde(alias = "merge_request_iid")]
    pub(crate) iid: u64,
    /// The source branch's head SHA as last seen (`sha` of get_merge_request): GitLab refuses
    /// the merge if commits were pushed since, so nothing unreviewed is merged.
    pub(crate) sha: Option<String>,
    /// Squash the commits into one (the project's setting when unset).
    pub(crate) squash: Option<bool>,
    /// Delete the source branch after merging (the merge request's setting when unset).
    pub(crate) remove_source_branch: Option<bool>,
    /// Merge automatically once the pipeline succeeds, instead of now.
    #[serde(default, alias = "merge_when_pipeline_succeeds")]
    pub(crate) auto_merge: bool,
    /// The merge commit's message (GitLab's default when unset).
    pub(crate) merge_commit_message: Option<String>,
    /// The squash commit's message, when squashing.
    pub(crate) squash_commit_message: Option<String>,
}

/// Arguments of `approve_merge_request`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApproveMergeRequestArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The merge request's number within the project (the 19 of `!19`).
    #[serde(alias = "merge_request_iid")]
    pub(crate) iid: u64,
    /// The head SHA that was reviewed: GitLab refuses the approval if commits were pushed
    /// since.
    pub(crate) sha: Option<String>,
}

/// Arguments of `resolve_merge_request_discussion`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResolveDiscussionArgs {
    /// The project: its id (`42`) or full path (`group/subgroup/project`).
    #[serde(alias = "project_id", deserialize_with = "project_arg")]
    pub(crate) project: String,
    /// The merge request's number within the project (the 19 of `!19`).
    #[serde(alias = "merge_request_iid")]
    pub(crate) iid: u64,
    /// The thread's id (`id` of a thread from list_merge_request_discussions).
    pub(crate) discussion_id: String,
    /// `true` (the default) resolves the thread, `false` reopens it.
    pub(crate) resolved: Option<bool>,
}

/// Result of `update_merge_request` and `merge_merge_request`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ChangedMergeRequest {
    /// The project (as given).
    pub(crate) project: String,
    /// Number, title, state, branches, merge status, reviewers, labels and times, as they are
    /// now.
    #[serde(flatten)]
    pub(crate) merge_request: MergeRequestSummary,
    /// Assignee usernames.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) assignees: Vec<String>,
    /// The milestone's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) milestone: Option<String>,
    /// Set when it merges automatically once the pipeline succeeds.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) auto_merge: bool,
    /// Why the last merge attempt failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merge_error: Option<String>,
    /// Who merged it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merged_by: Option<String>,
    /// The merge (or squash) commit, once merged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) merge_commit_sha: Option<String>,
}

/// Result of `resolve_merge_request_discussion`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ResolvedDiscussion {
    /// The project (as given).
    pub(crate) project: String,
    /// The merge request's number.
    pub(crate) iid: u64,
    /// The thread's id.
    pub(crate) discussion_id: String,
    /// Whether the thread is resolved now.
    pub(crate) resolved: bool,
    /// Who resolved it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) resolved_by: Option<String>,
    /// For a comment on the diff: the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
    /// For a comment on the diff: the line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u64>,
    /// Notes in the thread.
    pub(crate) notes: usize,
}

/// The result of a changed merge request, as GitLab answered.
pub(crate) fn changed_merge_request(project: String, m: WireMergeRequest) -> ChangedMergeRequest {
    let merge_request = m.summary(false);
    let merged = m.state == "merged";
    ChangedMergeRequest {
        project,
        merge_request,
        assignees: usernames(m.assignees),
        milestone: m.milestone.map(|t| t.title),
        auto_merge: m.merge_when_pipeline_succeeds,
        merge_error: m.merge_error.filter(|e| !e.is_empty()),
        merged_by: username(m.merged_by.or(m.merge_user)).filter(|_| merged),
        merge_commit_sha: m.squash_commit_sha.or(m.merge_commit_sha).filter(|_| merged),
    }
}

/// The `resolve_merge_request_discussion` result.
pub(crate) fn resolved_discussion(
    project: String,
    iid: u64,
    d: WireDiscussion,
) -> ResolvedDiscussion {
    let resolvable: Vec<&WireThreadNote> = d.notes.iter().filter(|n| n.resolvable).collect();
    let resolved = !resolvable.is_empty() && resolvable.iter().all(|n| n.resolved.unwrap_or(false));
    let position = d.notes.first().and_then(|n| n.position.as_ref());
    ResolvedDiscussion {
        project,
        iid,
        resolved,
        resolved_by: resolvable
            .iter()
            .find_map(|n| n.resolved_by.as_ref().map(|u| u.username.clone()))
            .filter(|_| resolved),
        path: position.and_then(|p| p.new_path.clone().or_else(|| p.old_path.clone())),
        line: position.and_then(|p| p.new_line.or(p.old_line)),
        notes: d.notes.len(),
        discussion_id: d.id,
    }
}

/// Labels as a body value: a list joined by commas; an empty list clears them.
impl GitLab {
    async fn update_merge_request(
        &self,
        a: UpdateMergeRequestArgs,
        ctx: &ToolContext,
    ) -> Result<ChangedMergeRequest, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        if a.title.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(ToolError::invalid_arguments("`title` must not be empty"));
        }
        let body = update_body(vec![
            ("title", a.title.map(Value::from)),
            ("description", a.description.map(Value::from)),
            ("target_branch", a.target_branch.map(Value::from)),
            ("state_event", a.state_event.map(|s| Value::from(s.as_str()))),
            ("labels", labels_value(a.labels)),
            ("add_labels", label_list(a.add_labels).map(Value::from)),
            ("remove_labels", label_list(a.remove_labels).map(Value::from)),
            ("assignee_ids", a.assignee_ids.map(|i| json!(i))),
            ("reviewer_ids", a.reviewer_ids.map(|i| json!(i))),
            ("milestone_id", a.milestone_id.map(Value::from)),
            ("remove_source_branch", a.remove_source_branch.map(Value::from)),
            ("squash", a.squash.map(Value::from)),
            ("discussion_locked", a.discussion_locked.map(Value::from)),
        ])?;
        let path = format!("/projects/{}/merge_requests/{}", p.encoded, a.iid);
        let subject = Subject::object(format!("merge request !{}", a.iid), &p.name);
        let mr: WireMergeRequest =
            self.client.put_json(&path, &Value::Object(body), &subject, ctx).await?;
        Ok(changed_merge_request(p.name, mr))
    }

    async fn merge_merge_request(
        &self,
        a: MergeMergeRequestArgs,
        ctx: &ToolContext,
    ) -> Result<ChangedMergeRequest, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let mut body = Map::new();
        insert_present(
            &mut body,
            vec![
                ("sha", a.sha.filter(|s| !s.trim().is_empty()).map(Value::from)),
                ("squash", a.squash.map(Value::from)),
                ("should_remove_source_branch", a.remove_source_branch.map(Value::from)),
                // `auto_merge` since GitLab 17.0; older instances know only the second name.
                ("auto_merge", a.auto_merge.then_some(Value::Bool(true))),
                ("merge_when_pipeline_succeeds", a.auto_merge.then_some(Value::Bool(true))),
                ("merge_commit_message", a.merge_commit_message.map(Value::from)),
                ("squash_commit_message", a.squash_commit_message.map(Value::from)),
            ],
        );
        let path = format!("/projects/{}/merge_requests/{}/merge", p.encoded, a.iid);
        let subject = Subject::object(format!("merge request !{}", a.iid), &p.name);
        let mr: WireMergeRequest =
            self.client.put_json(&path, &Value::Object(body), &subject, ctx).await?;
        Ok(changed_merge_request(p.name, mr))
    }

    /// Approves (`approve`) or withdraws the token user's approval (`unapprove`).
    async fn set_approval(
        &self,
        project: &str,
        iid: u64,
        action: &str,
        sha: Option<String>,
        ctx: &ToolContext,
    ) -> Result<Approvals, ToolError> {
        let p = ProjectRef::parse(project)?;
        let path = format!("/projects/{}/merge_requests/{}/{action}", p.encoded, iid);
        let subject = Subject::object(format!("merge request !{iid}"), &p.name);
        let body = sha.filter(|s| !s.trim().is_empty()).map(|sha| json!({"sha": sha}));
        match self.client.post_json::<WireApprovals>(&path, body.as_ref(), &subject, ctx).await {
            Ok(state) => Ok(approvals(p.name, iid, state)),
            // GitLab answers a bare 401 when the user may not approve (already approved, is the
            // author, not an eligible approver), not only when the token is bad.
            Err(e) if e.kind == ToolErrorKind::Unauthorized && self.client.has_token() => {
                Err(ToolError::new(
                    ToolErrorKind::Unauthorized,
                    format!(
                        "gitlab refused to {action} merge request !{iid} in {}: the token's user \
                         may have approved it already, be its author where authors may not \
                         approve, or not be an eligible approver; if other calls fail too, \
                         the token itself is rejected: {}",
                        p.name, e.message
                    ),
                ))
            }
            Err(e) if e.kind == ToolErrorKind::NotFound && action == "unapprove" => {
                Err(ToolError::new(
                    ToolErrorKind::NotFound,
                    format!(
                        "{}; gitlab also answers so when the token's user has not approved it",
                        e.message
                    ),
                ))
            }
            Err(e) => Err(e),
        }
    }

    async fn approve_merge_request(
        &self,
        a: ApproveMergeRequestArgs,
        ctx: &ToolContext,
    ) -> Result<Approvals, ToolError> {
        self.set_approval(&a.project, a.iid, "approve", a.sha, ctx).await
    }

    async fn unapprove_merge_request(
        &self,
        a: MergeRequestArgs,
        ctx: &ToolContext,
    ) -> Result<Approvals, ToolError> {
        self.set_approval(&a.project, a.iid, "unapprove", None, ctx).await
    }

    async fn resolve_merge_request_discussion(
        &self,
        a: ResolveDiscussionArgs,
        ctx: &ToolContext,
    ) -> Result<ResolvedDiscussion, ToolError> {
        let p = ProjectRef::parse(&a.project)?;
        let id = a.discussion_id.trim();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(ToolError::invalid_arguments(format!(
                "`discussion_id` must be a thread id from list_merge_request_discussions; got \
                 `{}`",
                a.discussion_id
            )));
        }
        let path = format!("/projects/{}/merge_requests/{}/discussions/{id}", p.encoded, a.iid);
        let subject = Subject::object(format!("thread {id} of merge request !{}", a.iid), &p.name);
        let body = json!({"resolved": a.resolved.unwrap_or(true)});
        let d: WireDiscussion = self.client.put_json(&path, &body, &subject, ctx).await?;
        Ok(resolved_discussion(p.name, a.iid, d))
    }
}

register_tool! {
    provider: GitLab,
    name: "update_merge_request",
    group: "merge_requests",
    description: "Change a merge request: title, description, target branch, labels (replace, \
                  add or remove), assignees, reviewers, milestone, squash and branch-removal \
                  settings, or close/reopen it. Returns it as it is now.",
    input: UpdateMergeRequestArgs,
    output: ChangedMergeRequest,
    handler: GitLab::update_merge_request,
}

register_tool! {
    provider: GitLab,
    name: "merge_merge_request",
    group: "merge_requests",
    description: "Merge a merge request now, or once its pipeline succeeds (`auto_merge`), \
                  optionally squashing and deleting the source branch; pass the reviewed head \
                  `sha` so newer commits are not merged unseen. GitLab's reason is returned \
                  when it refuses (conflicts, checks, approvals).",
    input: MergeMergeRequestArgs,
    output: ChangedMergeRequest,
    handler: GitLab::merge_merge_request,
}

register_tool! {
    provider: GitLab,
    name: "approve_merge_request",
    group: "merge_requests",
    description: "Approve a merge request as the token's user (optionally only if its head is \
                  still `sha`). Returns the approval state: approved or not, approvals left, \
                  who approved.",
    input: ApproveMergeRequestArgs,
    output: Approvals,
    handler: GitLab::approve_merge_request,
}

register_tool! {
    provider: GitLab,
    name: "unapprove_merge_request",
    group: "merge_requests",
    description: "Withdraw the token user's approval of a merge request. Returns the approval \
                  state.",
    input: MergeRequestArgs,
    output: Approvals,
    handler: GitLab::unapprove_merge_request,
}

register_tool! {
    provider: GitLab,
    name: "resolve_merge_request_discussion",
    group: "merge_requests",
    description: "Resolve a merge request's discussion thread (or reopen it with `resolved: \
                  false`), by the thread id from list_merge_request_discussions.",
    input: ResolveDiscussionArgs,
    output: ResolvedDiscussion,
    handler: GitLab::resolve_merge_request_discussion,
}
