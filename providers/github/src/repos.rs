//! Repositories: search, details, code search, and contents (a file's text or a directory's
//! entries; creating and updating a file).

use http::Method;
use quiver_plugin_sdk::prelude::*;

use crate::client::{encode_path, paging, repo_path, uri, Subject};
use crate::model::{is_false, nullable};
use crate::text::{decode_base64, encode_base64, truncate_opt};
use crate::GitHub;

/// Most bytes of file content returned by one call.
pub(crate) const CONTENT_MAX_BYTES: usize = 64 * 1024;

/// Arguments of `get_file_contents`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetFileContentsArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// Path of a file or directory in the repository, e.g. `src/main.rs`; empty for the root.
    #[serde(default)]
    pub(crate) path: String,
    /// Branch, tag or commit SHA; the default branch when unset.
    #[serde(rename = "ref")]
    pub(crate) git_ref: Option<String>,
    /// First line of a file to return, from 1 (to read a large file in parts).
    #[schemars(range(min = 1))]
    pub(crate) start_line: Option<usize>,
    /// Most bytes of file content to return: 65536 by default and at most.
    #[schemars(range(min = 1, max = 65536))]
    pub(crate) max_bytes: Option<usize>,
}

/// A file, directory entry, symlink or submodule as the contents endpoint sends it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireEntry {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    sha: Option<String>,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    encoding: Option<String>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    submodule_git_url: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    download_url: Option<String>,
}

/// The contents endpoint answers with an object for a file and an array for a directory.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum WireContents {
    /// A directory's entries.
    Directory(Vec<WireEntry>),
    /// A file, symlink or submodule.
    One(Box<WireEntry>),
}

/// One entry of a directory.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Entry {
    /// The entry's path in the repository (what `path` takes to read it): an agent's next
    /// call uses it as it is, so it is not left for the model to join.
    pub(crate) path: String,
    /// `file`, `dir`, `symlink` or `submodule`.
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// A file's blob SHA (what `update_file` needs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sha: Option<String>,
    /// A file's size in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) size: Option<u64>,
}

/// Result of `get_file_contents`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Contents {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The path asked for.
    pub(crate) path: String,
    /// The branch, tag or commit asked for.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub(crate) git_ref: Option<String>,
    /// `file`, `dir`, `symlink` or `submodule`.
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// A file's size in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) size: Option<u64>,
    /// The blob SHA of a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sha: Option<String>,
    /// A text file's content (decoded), possibly only some of its lines: see `note`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) content: Option<String>,
    /// Lines in the whole file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) total_lines: Option<usize>,
    /// Where to continue reading a file that was cut (`start_line`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_start_line: Option<usize>,
    /// What was left out, and how to get it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
    /// A directory's entries.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) entries: Vec<Entry>,
    /// A symlink's target or a submodule's repository URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) target: Option<String>,
    /// Where to download a file too large or binary to show.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) download_url: Option<String>,
    /// The file or directory on GitHub.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) html_url: Option<String>,
}

/// The `get_file_contents` result: text from `start_line`, at most `max_bytes`.
pub(crate) fn contents(
    repository: String,
    path: String,
    git_ref: Option<String>,
    wire: WireContents,
    start_line: usize,
    max_bytes: usize,
) -> Result<Contents, String> {
    let mut out = Contents {
        repository,
        path,
        git_ref,
        kind: String::new(),
        size: None,
        sha: None,
        content: None,
        total_lines: None,
        next_start_line: None,
        note: None,
        entries: Vec::new(),
        target: None,
        download_url: None,
        html_url: None,
    };
    let entry = match wire {
        WireContents::Directory(entries) => {
            out.kind = "dir".to_owned();
            if entries.is_empty() {
                out.note = Some("the directory is empty".to_owned());
            }
            out.entries = entries
                .into_iter()
                .map(|e| Entry {
                    size: e.size.filter(|_| e.kind == "file"),
                    sha: e.sha.filter(|_| e.kind == "file"),
                    path: if e.path.is_empty() { e.name } else { e.path },
                    kind: e.kind,
                })
                .collect();
            return Ok(out);
        }
        WireContents::One(entry) => *entry,
    };
    out.kind = entry.kind.clone();
    out.sha = entry.sha;
    out.size = entry.size;
    out.html_url = entry.html_url;
    match entry.kind.as_str() {
        "file" => {}
        "symlink" => {
            out.target = entry.target;
            return Ok(out);
        }
        "submodule" => {
            out.target = entry.submodule_git_url;
            return Ok(out);
        }
        _ => return Ok(out),
    }
    let size = entry.size.unwrap_or(0);
    let encoded = entry.content.unwrap_or_default();
    if entry.encoding.as_deref() == Some("none") || (encoded.is_empty() && size > 0) {
        out.note = Some(format!(
            "the file has {size} bytes, too many for github's contents API; download it from \
             download_url"
        ));
        out.download_url = entry.download_url;
        return Ok(out);
    }
    let bytes = match entry.encoding.as_deref() {
        Some("base64") | None => decode_base64(&encoded)?,
        Some(other) => return Err(format!("unknown content encoding `{other}`")),
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => text,
        _ => {
            out.note = Some(format!("binary file of {size} bytes; not shown"));
            out.download_url = entry.download_url;
            return Ok(out);
        }
    };
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let total = lines.len();
    out.total_lines = Some(total);
    let first = start_line.max(1);
    if first > total.max(1) {
        out.note =
            Some(format!("the file has only {total} lines; start_line {first} is past its end"));
        out.content = Some(String::new());
        return Ok(out);
    }
    let mut content = String::new();
    let mut last = first - 1; // lines taken so far, counted from 1
    for line in &lines[first - 1..] {
        if content.len() + line.len() > max_bytes {
            break;
        }
        content.push_str(line);
        last += 1;
    }
    if last < first && first <= total {
        // One line longer than the cap: show its start.
        let line = lines[first - 1];
        let mut end = max_bytes.min(line.len());
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        content.push_str(&line[..end]);
        last = first;
    }
    if first > 1 || last < total {
        out.note = Some(if last < total {
            format!(
                "showing lines {first}-{last} of {total} ({} KiB per call at most); call again \
                 with start_line={} for more",
                max_bytes / 1024,
                last + 1
            )
        } else {
            format!("showing lines {first}-{last} of {total}")
        });
        out.next_start_line = (last < total).then_some(last + 1);
    }
    out.content = Some(content);
    Ok(out)
}

impl GitHub {
    async fn get_file_contents(
        &self,
        a: GetFileContentsArgs,
        ctx: &ToolContext,
    ) -> Result<Contents, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let path = encode_path(&a.path)?;
        let git_ref = a.git_ref.filter(|r| !r.trim().is_empty());
        let uri = uri(&format!("/repos/{repository}/contents/{path}"), &[("ref", git_ref.clone())]);
        let shown_path = a.path.trim_matches('/').to_owned();
        let what = match (&git_ref, shown_path.is_empty()) {
            (Some(r), false) => format!("path `{shown_path}` at `{r}`"),
            (None, false) => format!("path `{shown_path}`"),
            (Some(r), true) => format!("ref `{r}`"),
            (None, true) => "content".to_owned(),
        };
        let subject = Subject::object(what, &repository);
        let (wire, _) = self.client.get_json::<WireContents>(&uri, &subject, ctx).await?;
        let max_bytes = a.max_bytes.unwrap_or(CONTENT_MAX_BYTES).clamp(1, CONTENT_MAX_BYTES);
        contents(repository, shown_path, git_ref, wire, a.start_line.unwrap_or(1), max_bytes)
            .map_err(|e| {
                ToolError::upstream(format!(
                    "github returned an unreadable body for {}: {e}",
                    subject.describe()
                ))
            })
    }
}

register_tool! {
    provider: GitHub,
    name: "get_file_contents",
    group: "repos",
    description: "Read a file of a repository (decoded text, at most 64 KiB per call; \
                  `start_line` reads on) or list a directory's entries, at a branch, tag or \
                  commit.",
    input: GetFileContentsArgs,
    output: Contents,
    handler: GitHub::get_file_contents,
}

// ---------------------------------------------------------------------------------------------
// Repositories and code search
// ---------------------------------------------------------------------------------------------

/// The media type that makes GitHub's code search add the matching fragments.
const TEXT_MATCH: &str = "application/vnd.github.text-match+json";
/// Longest repository description kept, in bytes.
const DESCRIPTION_MAX_BYTES: usize = 512;
/// Most matching fragments kept per code search hit.
const FRAGMENTS_PER_HIT: usize = 3;

/// Arguments of `search_repositories`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchRepositoriesArgs {
    /// GitHub search syntax, e.g. `tokio language:rust stars:>1000` or `org:rust-lang topic:cli`.
    #[serde(alias = "query")]
    pub(crate) q: String,
    /// `stars`, `forks`, `help-wanted-issues` or `updated`; best match when unset.
    pub(crate) sort: Option<String>,
    /// `desc` (the default) or `asc`.
    pub(crate) order: Option<String>,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// Arguments of `get_repository`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetRepositoryArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
}

/// Arguments of `search_code`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchCodeArgs {
    /// GitHub code search syntax; name a scope, e.g. `addClass repo:jquery/jquery`,
    /// `fn main language:rust org:rust-lang` or `path:src/ extension:toml serde`.
    #[serde(alias = "query")]
    pub(crate) q: String,
    /// Page number, from 1.
    #[schemars(range(min = 1))]
    pub(crate) page: Option<u32>,
    /// Results per page: 30 by default, at most 100.
    #[schemars(range(min = 1, max = 100))]
    pub(crate) per_page: Option<u32>,
}

/// A repository as the search, repository and listing endpoints send it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRepository {
    full_name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    private: bool,
    #[serde(default)]
    visibility: Option<String>,
    #[serde(default)]
    fork: bool,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    language: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    topics: Vec<String>,
    #[serde(default)]
    stargazers_count: u64,
    #[serde(default)]
    forks_count: u64,
    #[serde(default)]
    open_issues_count: u64,
    #[serde(default)]
    default_branch: Option<String>,
    #[serde(default)]
    pushed_at: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    #[serde(default)]
    homepage: Option<String>,
    #[serde(default)]
    license: Option<WireLicense>,
    #[serde(default)]
    parent: Option<Box<WireRepository>>,
    #[serde(default)]
    subscribers_count: Option<u64>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    allow_merge_commit: Option<bool>,
    #[serde(default)]
    allow_squash_merge: Option<bool>,
    #[serde(default)]
    allow_rebase_merge: Option<bool>,
    #[serde(default)]
    permissions: Option<WirePermissions>,
}

/// A repository's license; only its SPDX id is kept.
#[derive(Debug, Deserialize)]
pub(crate) struct WireLicense {
    #[serde(default)]
    spdx_id: Option<String>,
}

/// What the token may do in a repository.
#[derive(Debug, Deserialize)]
pub(crate) struct WirePermissions {
    #[serde(default)]
    admin: bool,
    #[serde(default)]
    maintain: bool,
    #[serde(default)]
    push: bool,
    #[serde(default)]
    triage: bool,
    #[serde(default)]
    pull: bool,
}

/// The repository search's envelope.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRepositorySearch {
    #[serde(default)]
    total_count: u64,
    #[serde(default)]
    incomplete_results: bool,
    #[serde(default)]
    items: Vec<WireRepository>,
}

/// The code search's envelope.
#[derive(Debug, Deserialize)]
pub(crate) struct WireCodeSearch {
    #[serde(default)]
    total_count: u64,
    #[serde(default)]
    incomplete_results: bool,
    #[serde(default)]
    items: Vec<WireCodeHit>,
}

/// A code search hit.
#[derive(Debug, Deserialize)]
pub(crate) struct WireCodeHit {
    #[serde(default)]
    path: String,
    #[serde(default)]
    sha: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
    repository: WireRepoFullName,
    #[serde(default, deserialize_with = "nullable")]
    text_matches: Vec<WireTextMatch>,
}

/// A nested repository; only the full name is kept.
#[derive(Debug, Deserialize)]
pub(crate) struct WireRepoFullName {
    full_name: String,
}

/// A fragment of text that matched (sent for the text-match media type).
#[derive(Debug, Deserialize)]
pub(crate) struct WireTextMatch {
    #[serde(default)]
    fragment: Option<String>,
}

/// One repository in search results.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RepositorySummary {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// What it is about (cut at 512 bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// Its main language.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) language: Option<String>,
    /// Stars.
    pub(crate) stars: u64,
    /// Forks.
    pub(crate) forks: u64,
    /// Open issues and pull requests.
    pub(crate) open_issues: u64,
    /// Topics.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) topics: Vec<String>,
    /// The default branch.
    pub(crate) default_branch: Option<String>,
    /// Set for a private repository.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) private: bool,
    /// Set for a fork.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) fork: bool,
    /// Set for an archived (read-only) repository.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) archived: bool,
    /// The last push.
    pub(crate) pushed_at: Option<String>,
    /// The repository on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `search_repositories`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RepositorySearch {
    /// The query as sent.
    pub(crate) query: String,
    /// How many repositories match in all.
    pub(crate) total_count: u64,
    /// Set when GitHub's search timed out and the hits may be incomplete.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) incomplete_results: bool,
    /// The hits of this page, best first.
    pub(crate) items: Vec<RepositorySummary>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

/// Result of `get_repository`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RepositoryDetail {
    /// Name, description, language, counts, default branch, flags and dates.
    #[serde(flatten)]
    pub(crate) summary: RepositorySummary,
    /// `public`, `private` or `internal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) visibility: Option<String>,
    /// The repository this one was forked from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parent: Option<String>,
    /// The license's SPDX id, e.g. `MIT`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) license: Option<String>,
    /// The project's web site.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) homepage: Option<String>,
    /// Watchers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) watchers: Option<u64>,
    /// When it was created.
    pub(crate) created_at: Option<String>,
    /// The merge methods pull requests may use (`merge`, `squash`, `rebase`), when GitHub says.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) merge_methods: Vec<String>,
    /// The token's highest role here: `admin`, `maintain`, `push`, `triage` or `pull`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) permission: Option<String>,
}

/// One code search hit.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CodeHit {
    /// `owner/repo` the file is in.
    pub(crate) repository: String,
    /// The file's path (for `get_file_contents`).
    pub(crate) path: String,
    /// The file's blob SHA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sha: Option<String>,
    /// Text around the matches (the first three).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) fragments: Vec<String>,
    /// The file on GitHub.
    pub(crate) html_url: Option<String>,
}

/// Result of `search_code`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct CodeSearch {
    /// The query as sent.
    pub(crate) query: String,
    /// How many files match in all.
    pub(crate) total_count: u64,
    /// Set when GitHub's search timed out and the hits may be incomplete.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) incomplete_results: bool,
    /// The hits of this page, best first.
    pub(crate) items: Vec<CodeHit>,
    /// The next page's number, or null on the last page.
    pub(crate) next_page: Option<u32>,
}

impl WireRepository {
    fn summary(&self) -> RepositorySummary {
        RepositorySummary {
            repository: self.full_name.clone(),
            description: truncate_opt(self.description.clone(), DESCRIPTION_MAX_BYTES),
            language: self.language.clone(),
            stars: self.stargazers_count,
            forks: self.forks_count,
            open_issues: self.open_issues_count,
            topics: self.topics.clone(),
            default_branch: self.default_branch.clone(),
            private: self.private,
            fork: self.fork,
            archived: self.archived,
            pushed_at: self.pushed_at.clone(),
            html_url: self.html_url.clone(),
        }
    }
}

/// The `search_repositories` result.
pub(crate) fn repository_search(
    query: String,
    found: WireRepositorySearch,
    next_page: Option<u32>,
) -> RepositorySearch {
    RepositorySearch {
        query,
        total_count: found.total_count,
        incomplete_results: found.incomplete_results,
        items: found.items.iter().map(WireRepository::summary).collect(),
        next_page,
    }
}

/// The `get_repository` result.
pub(crate) fn repository_detail(r: WireRepository) -> RepositoryDetail {
    let merge_methods = [
        (r.allow_merge_commit, "merge"),
        (r.allow_squash_merge, "squash"),
        (r.allow_rebase_merge, "rebase"),
    ]
    .into_iter()
    .filter(|(allowed, _)| *allowed == Some(true))
    .map(|(_, name)| name.to_owned())
    .collect();
    let permission = r.permissions.as_ref().and_then(|p| {
        [
            (p.admin, "admin"),
            (p.maintain, "maintain"),
            (p.push, "push"),
            (p.triage, "triage"),
            (p.pull, "pull"),
        ]
        .into_iter()
        .find(|(has, _)| *has)
        .map(|(_, role)| role.to_owned())
    });
    RepositoryDetail {
        summary: r.summary(),
        visibility: r.visibility,
        parent: r.parent.map(|p| p.full_name),
        license: r.license.and_then(|l| l.spdx_id).filter(|id| id != "NOASSERTION"),
        homepage: r.homepage.filter(|h| !h.is_empty()),
        watchers: r.subscribers_count,
        created_at: r.created_at,
        merge_methods,
        permission,
    }
}

/// The `search_code` result.
pub(crate) fn code_search(
    query: String,
    found: WireCodeSearch,
    next_page: Option<u32>,
) -> CodeSearch {
    let items = found
        .items
        .into_iter()
        .map(|hit| CodeHit {
            repository: hit.repository.full_name,
            path: hit.path,
            sha: hit.sha,
            fragments: hit
                .text_matches
                .into_iter()
                .filter_map(|m| m.fragment)
                .take(FRAGMENTS_PER_HIT)
                .collect(),
            html_url: hit.html_url,
        })
        .collect();
    CodeSearch {
        query,
        total_count: found.total_count,
        incomplete_results: found.incomplete_results,
        items,
        next_page,
    }
}

impl GitHub {
    async fn search_repositories(
        &self,
        a: SearchRepositoriesArgs,
        ctx: &ToolContext,
    ) -> Result<RepositorySearch, ToolError> {
        if a.q.trim().is_empty() {
            return Err(ToolError::invalid_arguments("`q` is empty; write a search query"));
        }
        let mut query = vec![("q", Some(a.q.clone())), ("sort", a.sort), ("order", a.order)];
        query.extend(paging(a.page, a.per_page));
        let uri = uri("/search/repositories", &query);
        let subject = Subject::global(format!("the repository search `{}`", a.q));
        let (found, next) =
            self.client.get_json::<WireRepositorySearch>(&uri, &subject, ctx).await?;
        Ok(repository_search(a.q, found, next))
    }

    async fn get_repository(
        &self,
        a: GetRepositoryArgs,
        ctx: &ToolContext,
    ) -> Result<RepositoryDetail, ToolError> {
        let repository = repo_path(&a.owner, &a.repo)?;
        let subject = Subject::global(format!("repository {repository}"))
            .not_found_says(format!("no repository {repository} (or the token cannot see it)"));
        let uri = format!("/repos/{repository}");
        let (repo, _) = self.client.get_json::<WireRepository>(&uri, &subject, ctx).await?;
        Ok(repository_detail(repo))
    }

    async fn search_code(
        &self,
        a: SearchCodeArgs,
        ctx: &ToolContext,
    ) -> Result<CodeSearch, ToolError> {
        if a.q.trim().is_empty() {
            return Err(ToolError::invalid_arguments("`q` is empty; write a search query"));
        }
        let mut query = vec![("q", Some(a.q.clone()))];
        query.extend(paging(a.page, a.per_page));
        let uri = uri("/search/code", &query);
        let subject = Subject::global(format!("the code search `{}`", a.q));
        let reply = self.client.get_as(&uri, TEXT_MATCH, &subject, ctx).await?;
        let next = crate::client::next_page(&reply.headers);
        let found: WireCodeSearch = self.client.parse(&reply, &subject)?;
        Ok(code_search(a.q, found, next))
    }
}

register_tool! {
    provider: GitHub,
    name: "search_repositories",
    group: "repos",
    description: "Search repositories across GitHub with GitHub's search syntax (`language:`, \
                  `org:`, `topic:`, `stars:>N`…): name, description, language, stars and \
                  default branch of each hit.",
    input: SearchRepositoriesArgs,
    output: RepositorySearch,
    handler: GitHub::search_repositories,
}

register_tool! {
    provider: GitHub,
    name: "get_repository",
    group: "repos",
    description: "Get a repository's details: description, default branch, language, topics, \
                  counts, license, parent of a fork, allowed merge methods and the token's role.",
    input: GetRepositoryArgs,
    output: RepositoryDetail,
    handler: GitHub::get_repository,
}

register_tool! {
    provider: GitHub,
    name: "search_code",
    group: "repos",
    description: "Search code across GitHub (`repo:`, `org:`, `language:`, `path:`…): each hit \
                  names its repository and path, with the matching fragments.",
    input: SearchCodeArgs,
    output: CodeSearch,
    handler: GitHub::search_code,
}

// ---------------------------------------------------------------------------------------------
// Writing a file
// ---------------------------------------------------------------------------------------------

/// Arguments of `create_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateFileArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// Path of the new file, e.g. `docs/usage.md`.
    pub(crate) path: String,
    /// The file's whole text.
    pub(crate) content: String,
    /// The commit message.
    pub(crate) message: String,
    /// The branch to commit to; the default branch when unset.
    pub(crate) branch: Option<String>,
}

/// Arguments of `update_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateFileArgs {
    /// Repository owner (user or organisation), e.g. `octocat`.
    pub(crate) owner: String,
    /// Repository name, e.g. `Hello-World`.
    pub(crate) repo: String,
    /// Path of the existing file, e.g. `README.md`.
    pub(crate) path: String,
    /// The file's new whole text (it replaces the old one).
    pub(crate) content: String,
    /// The commit message.
    pub(crate) message: String,
    /// The blob SHA of the file being replaced (`sha` of `get_file_contents`); GitHub refuses
    /// the update when the file changed since.
    pub(crate) sha: String,
    /// The branch to commit to; the default branch when unset.
    pub(crate) branch: Option<String>,
}

/// The contents endpoint's answer to a write.
#[derive(Debug, Deserialize)]
pub(crate) struct WireFileCommit {
    content: Option<WireWrittenFile>,
    commit: WireWriteCommit,
}

/// The file as written.
#[derive(Debug, Deserialize)]
pub(crate) struct WireWrittenFile {
    #[serde(default)]
    path: String,
    #[serde(default)]
    sha: Option<String>,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    html_url: Option<String>,
}

/// The commit a write made.
#[derive(Debug, Deserialize)]
pub(crate) struct WireWriteCommit {
    sha: String,
    #[serde(default)]
    html_url: Option<String>,
}

/// Result of `create_file` and `update_file`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct FileCommit {
    /// `owner/repo`.
    pub(crate) repository: String,
    /// The file's path.
    pub(crate) path: String,
    /// The branch committed to, when one was named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) branch: Option<String>,
    /// The file's new blob SHA (what the next `update_file` needs).
    pub(crate) sha: Option<String>,
    /// The file's size in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) size: Option<u64>,
    /// The commit made.
    pub(crate) commit_sha: String,
    /// The commit on GitHub.
    pub(crate) commit_url: Option<String>,
    /// The file on GitHub.
    pub(crate) html_url: Option<String>,
}

/// The result of a file write.
pub(crate) fn file_commit(
    repository: String,
    branch: Option<String>,
    w: WireFileCommit,
) -> FileCommit {
    let file = w.content;
    FileCommit {
        repository,
        path: file.as_ref().map(|f| f.path.clone()).unwrap_or_default(),
        branch,
        sha: file.as_ref().and_then(|f| f.sha.clone()),
        size: file.as_ref().and_then(|f| f.size),
        commit_sha: w.commit.sha,
        commit_url: w.commit.html_url,
        html_url: file.and_then(|f| f.html_url),
    }
}

impl GitHub {
    /// `PUT /contents/{path}`: creates the file, or replaces it when `sha` names its blob.
    #[allow(clippy::too_many_arguments)]
    async fn put_file(
        &self,
        owner: &str,
        repo: &str,
        path: &str,
        content: &str,
        message: &str,
        sha: Option<&str>,
        branch: Option<String>,
        ctx: &ToolContext,
    ) -> Result<FileCommit, ToolError> {
        let repository = repo_path(owner, repo)?;
        let encoded_path = encode_path(path)?;
        if encoded_path.is_empty() {
            return Err(ToolError::invalid_arguments("`path` is empty; name the file"));
        }
        if message.trim().is_empty() {
            return Err(ToolError::invalid_arguments("`message` is empty; write a commit message"));
        }
        let branch = branch.map(|b| b.trim().to_owned()).filter(|b| !b.is_empty());
        let mut body = json!({
            "message": message,
            "content": encode_base64(content.as_bytes()),
        });
        if let Some(sha) = sha {
            body["sha"] = json!(sha);
        }
        if let Some(b) = &branch {
            body["branch"] = json!(b);
        }
        let shown = path.trim_matches('/');
        let doing = match sha {
            Some(_) => format!("updating `{shown}`"),
            None => format!("creating `{shown}`"),
        };
        let subject = Subject::action(&doing, &repository).not_found_says(format!(
            "no repository {repository}{} (or the token cannot see it)",
            branch.as_deref().map(|b| format!(" with a branch `{b}`")).unwrap_or_default()
        ));
        let uri = format!("/repos/{repository}/contents/{encoded_path}");
        let written: WireFileCommit =
            self.client.write_json(Method::PUT, &uri, Some(&body), &subject, ctx).await?;
        Ok(file_commit(repository, branch, written))
    }

    async fn create_file(
        &self,
        a: CreateFileArgs,
        ctx: &ToolContext,
    ) -> Result<FileCommit, ToolError> {
        self.put_file(&a.owner, &a.repo, &a.path, &a.content, &a.message, None, a.branch, ctx).await
    }

    async fn update_file(
        &self,
        a: UpdateFileArgs,
        ctx: &ToolContext,
    ) -> Result<FileCommit, ToolError> {
        let sha = a.sha.trim();
        if sha.is_empty() {
            return Err(ToolError::invalid_arguments(
                "`sha` is empty; give the file's blob SHA from get_file_contents",
            ));
        }
        self.put_file(&a.owner, &a.repo, &a.path, &a.content, &a.message, Some(sha), a.branch, ctx)
            .await
    }
}

register_tool! {
    provider: GitHub,
    name: "create_file",
    group: "repos",
    description: "Create a file in a repository with one commit, on a branch (the default \
                  branch when unset). Fails if the file exists: use `update_file` for that.",
    input: CreateFileArgs,
    output: FileCommit,
    handler: GitHub::create_file,
}

register_tool! {
    provider: GitHub,
    name: "update_file",
    group: "repos",
    description: "Replace a file's whole content with one commit; needs the file's current \
                  blob `sha` (from get_file_contents), so a file changed since is not \
                  overwritten.",
    input: UpdateFileArgs,
    output: FileCommit,
    handler: GitHub::update_file,
}
