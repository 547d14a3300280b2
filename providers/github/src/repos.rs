//! Repository contents: a file's text or a directory's entries.

use quiver_plugin_sdk::prelude::*;

use crate::client::{encode_path, repo_path, uri, Subject};
use crate::text::decode_base64;
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
    /// The entry's name (its path is the directory's path plus this name).
    pub(crate) name: String,
    /// `file`, `dir`, `symlink` or `submodule`.
    #[serde(rename = "type")]
    pub(crate) kind: String,
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
                    name: if e.name.is_empty() { e.path } else { e.name },
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
