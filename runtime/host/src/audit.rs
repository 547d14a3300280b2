//! The audit trail (`[audit]`): one JSON line per call that changes something — and, when
//! asked, per read — saying when, who (the HTTP user and the credentials their call used), which
//! tool with which arguments (masked as configured), how it ended and who confirmed it. A
//! write's line is synced to disk before the caller is answered; rotated by size; each line carries the SHA-256 of
//! the line before it, so `quiver audit verify` finds a line removed or edited anywhere but at
//! the very end (whose hash `verify` prints, to be kept elsewhere).
//!
//! One writer per file: the file is locked while a process writes it (replicas each need their
//! own path). Depends on the host's configuration and masking only, never on the server.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::logging;

/// The `prev` of the first line ever written.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// How arguments are written (`[audit] arguments`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditArguments {
    /// Every argument, with credentials (quiver's and other services') masked.
    All,
    /// As `all`, and the tool's sensitive parameters and `redact_params` replaced by
    /// `[redacted]`.
    #[default]
    Redacted,
    /// No arguments; only their SHA-256, to match a call against another record.
    None,
}

/// `[audit]` in quiver.toml.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// The trail's file (relative: to the config file's folder); unset, no trail is written.
    pub path: Option<PathBuf>,
    /// `all`, `redacted` (the default) or `none`.
    pub arguments: AuditArguments,
    /// Argument names written as `[redacted]` in `redacted` mode, beside each tool's own
    /// sensitive parameters (`body`, `content`…).
    pub redact_params: Vec<String>,
    /// A line per read too (calls of `pure` and `read_only` tools), not only per write.
    pub reads: bool,
    /// A file past this many bytes is rotated (`audit.jsonl` → `audit.jsonl.1` → `.2`…).
    pub max_bytes: u64,
    /// Rotated files kept; older ones are removed.
    pub keep: usize,
}

impl AuditConfig {
    /// The trail's file, resolved against the directory of the config that named it (as
    /// `[[sources]]` paths are); `None` when no trail is configured.
    pub fn resolved_path(&self, config_path: Option<&Path>) -> Option<PathBuf> {
        let path = self.path.as_ref()?;
        Some(match config_path.and_then(Path::parent) {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.clone(),
        })
    }
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            path: None,
            arguments: AuditArguments::default(),
            redact_params: Vec::new(),
            reads: false,
            max_bytes: 100 * 1024 * 1024,
            keep: 10,
        }
    }
}

/// One call, as the server saw it.
#[derive(Debug, Clone)]
pub struct AuditEntry<'a> {
    /// The HTTP user (`None`: the local user of a stdio server).
    pub user: Option<&'a str>,
    /// Whose credentials the call used: the variable named by the user's `tokens`, or the
    /// server's.
    pub credentials: Option<&'a str>,
    /// The MCP session.
    pub session: &'a str,
    /// The qualified tool (`github.create_issue`).
    pub tool: &'a str,
    /// Its side-effect class (`mutates_external`, `indeterminate`…).
    pub class: &'a str,
    /// The arguments as sent.
    pub arguments: &'a Value,
    /// The tool's own sensitive parameters.
    pub sensitive: &'a [String],
    /// `None` for success, else the error's kind (`unauthorized`, `refused`…).
    pub error: Option<&'a str>,
    /// Who confirmed it: the person through their client (`person`), the model with
    /// `_confirm` (`_confirm`), or nobody.
    pub confirmed_by: Option<&'a str>,
    /// Answered from the cache (a read), not sent.
    pub cached: bool,
    /// The services' own ids of the requests the call made (GitHub's `x-github-request-id`…),
    /// to find it in their logs.
    pub request_ids: &'a [String],
    /// Whether the call may change something: its line is synced to disk before the caller is
    /// answered (a read's is written, and reaches the disk with the next write's or the
    /// system's own flush).
    pub writes: bool,
}

/// A line of the trail, in the order its fields are written.
#[derive(Serialize, Deserialize)]
struct Line {
    seq: u64,
    time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    credentials: String,
    session: String,
    tool: String,
    class: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments_sha256: Option<String>,
    outcome: String,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    request_ids: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    confirmed_by: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    cached: bool,
    prev: String,
}

struct Writer {
    file: File,
    /// The hash of the last line written, and its sequence number.
    prev: String,
    seq: u64,
    size: u64,
    /// Why the last write failed, until one succeeds.
    failed: Option<String>,
}

/// An open audit trail.
pub struct AuditLog {
    config: AuditConfig,
    path: PathBuf,
    writer: Mutex<Writer>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `path.N`.
fn rotated(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// The last line of `path`, if it has one.
fn last_line(path: &Path) -> std::io::Result<Option<String>> {
    let Ok(mut file) = File::open(path) else { return Ok(None) };
    let len = file.metadata()?.len();
    // A line is far shorter than this; the tail holds the last one whole.
    let mut from = len.saturating_sub(1 << 20);
    loop {
        file.seek(SeekFrom::Start(from))?;
        let mut tail = String::new();
        file.read_to_string(&mut tail)?;
        let trimmed = tail.trim_end_matches('\n');
        match trimmed.rfind('\n') {
            Some(at) => return Ok(Some(trimmed[at + 1..].to_owned())),
            None if from == 0 => return Ok((!trimmed.is_empty()).then(|| trimmed.to_owned())),
            None => from = from.saturating_sub(1 << 20),
        }
    }
}

impl AuditLog {
    /// Opens the trail `config` names, continuing its chain; `Ok(None)` when none is
    /// configured. Fails when another process writes it.
    pub fn open(config: &AuditConfig) -> Result<Option<Self>, String> {
        let Some(path) = config.path.clone() else { return Ok(None) };
        let shown = path.display();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("[audit] path {shown}: cannot create its folder: {e}"))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&path)
            .map_err(|e| format!("[audit] path {shown}: cannot open it for writing: {e}"))?;
        fs2::FileExt::try_lock_exclusive(&file).map_err(|_| {
            format!(
                "[audit] path {shown} is written by another quiver; give each replica its own \
                 path (one writer keeps the chain of hashes whole)"
            )
        })?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        // The chain goes on from the newest line, in this file or the last rotated one.
        let last = match last_line(&path).map_err(|e| format!("[audit] path {shown}: {e}"))? {
            Some(line) => Some(line),
            None => last_line(&rotated(&path, 1)).map_err(|e| format!("[audit] {shown}: {e}"))?,
        };
        let (prev, seq) = match last {
            Some(line) => {
                let seq = serde_json::from_str::<Line>(&line).map(|l| l.seq + 1).map_err(|e| {
                    format!(
                        "[audit] path {shown}: its last line is not an audit line ({e}); run \
                         `quiver audit verify` and move the file aside"
                    )
                })?;
                (sha256_hex(line.as_bytes()), seq)
            }
            None => (GENESIS.to_owned(), 0),
        };
        let writer = Writer { file, prev, seq, size, failed: None };
        Ok(Some(Self { config: config.clone(), path, writer: Mutex::new(writer) }))
    }

    /// The trail's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a call of this kind is recorded: every write, and reads when `reads` is set.
    pub fn records(&self, writes: bool) -> bool {
        writes || self.config.reads
    }

    /// Why the trail cannot be written now (the last write failed), if so: writes are not
    /// sent until it can.
    pub fn broken(&self) -> Option<String> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner()).failed.clone()
    }

    /// The arguments as `[audit] arguments` says to write them.
    fn arguments(&self, entry: &AuditEntry<'_>) -> (Option<Value>, Option<String>) {
        let mut masked = entry.arguments.clone();
        match self.config.arguments {
            AuditArguments::None => {
                return (None, Some(sha256_hex(entry.arguments.to_string().as_bytes())))
            }
            AuditArguments::Redacted => {
                let names: Vec<&String> =
                    entry.sensitive.iter().chain(&self.config.redact_params).collect();
                if let Value::Object(map) = &mut masked {
                    for (name, value) in map.iter_mut() {
                        if names.contains(&name) {
                            *value = Value::String("[redacted]".into());
                        }
                    }
                }
            }
            AuditArguments::All => {}
        }
        logging::scrub_json(&mut masked);
        let mut found = quiver_core::foreign_secrets::Redacted::default();
        quiver_core::foreign_secrets::rules().redact_json(&mut masked, &mut found);
        (Some(masked), None)
    }

    /// Appends `entry` and syncs it to disk before returning: the caller is answered only
    /// after its write is on record. An error says why (and the trail stays broken until a
    /// write succeeds).
    pub fn record(&self, entry: &AuditEntry<'_>) -> Result<(), String> {
        let (arguments, arguments_sha256) = self.arguments(entry);
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let line = Line {
            seq: writer.seq,
            time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            user: entry.user.map(str::to_owned),
            credentials: entry.credentials.unwrap_or("server").to_owned(),
            session: entry.session.to_owned(),
            tool: entry.tool.to_owned(),
            class: entry.class.to_owned(),
            arguments,
            arguments_sha256,
            outcome: entry.error.map_or_else(|| "ok".to_owned(), |kind| format!("error: {kind}")),
            request_ids: entry.request_ids.to_vec(),
            confirmed_by: entry.confirmed_by.map(str::to_owned),
            cached: entry.cached,
            prev: writer.prev.clone(),
        };
        let text = serde_json::to_string(&line).map_err(|e| e.to_string())?;
        let written = self.append(&mut writer, &text, entry.writes);
        match &written {
            Ok(()) => {
                writer.prev = sha256_hex(text.as_bytes());
                writer.seq += 1;
                writer.failed = None;
            }
            Err(e) => {
                tracing::error!("the audit trail {} cannot be written: {e}", self.path.display());
                writer.failed = Some(e.clone());
            }
        }
        written
    }

    fn append(&self, writer: &mut Writer, text: &str, sync: bool) -> Result<(), String> {
        let bytes = text.len() as u64 + 1;
        if writer.size > 0 && writer.size + bytes > self.config.max_bytes {
            self.rotate(writer).map_err(|e| format!("rotating it failed: {e}"))?;
        }
        writer.file.write_all(format!("{text}\n").as_bytes()).map_err(|e| e.to_string())?;
        if sync {
            writer.file.sync_data().map_err(|e| e.to_string())?;
        }
        writer.size += bytes;
        Ok(())
    }

    /// `path.N-1` → `path.N` down to `path` → `path.1`, the oldest beyond `keep` removed; a
    /// new, locked `path`.
    fn rotate(&self, writer: &mut Writer) -> std::io::Result<()> {
        let keep = self.config.keep.max(1);
        let _ = std::fs::remove_file(rotated(&self.path, keep));
        for n in (1..keep).rev() {
            let from = rotated(&self.path, n);
            if from.exists() {
                std::fs::rename(&from, rotated(&self.path, n + 1))?;
            }
        }
        std::fs::rename(&self.path, rotated(&self.path, 1))?;
        let file = OpenOptions::new().create(true).append(true).read(true).open(&self.path)?;
        fs2::FileExt::try_lock_exclusive(&file)?;
        writer.file = file;
        writer.size = 0;
        tracing::info!(head = %writer.prev, "audit trail rotated: {}", self.path.display());
        Ok(())
    }
}

/// What `verify` found of a whole trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Lines checked.
    pub lines: u64,
    /// Files read, oldest first.
    pub files: Vec<PathBuf>,
    /// The hash of the newest line: keep it elsewhere to know later that nothing after it was
    /// changed or cut.
    pub head: String,
    /// Whether the oldest file kept starts the chain (else older files were rotated away).
    pub from_the_start: bool,
}

/// Checks the chain of the trail at `path` and its rotated files: each line must name the hash
/// of the line before it, and count on from it. The first line where that fails, named by file
/// and line number, is the error.
pub fn verify(path: &Path) -> Result<Verified, String> {
    let mut files: Vec<PathBuf> =
        (1..10_000).map(|n| rotated(path, n)).take_while(|p| p.exists()).collect();
    files.reverse();
    if path.exists() {
        files.push(path.to_owned());
    }
    if files.is_empty() {
        return Err(format!("no audit trail at {}", path.display()));
    }
    let mut prev: Option<(String, u64)> = None;
    let mut lines = 0;
    let mut from_the_start = false;
    for file in &files {
        let reader = BufReader::new(
            File::open(file).map_err(|e| format!("{}: cannot read it: {e}", file.display()))?,
        );
        for (number, text) in reader.lines().enumerate() {
            let at = format!("{} line {}", file.display(), number + 1);
            let text = text.map_err(|e| format!("{at}: cannot read it: {e}"))?;
            let line: Line = serde_json::from_str(&text)
                .map_err(|e| format!("{at} is not an audit line ({e}): it was edited"))?;
            match &prev {
                None => from_the_start = line.prev == GENESIS && line.seq == 0,
                Some((hash, seq)) => {
                    if line.prev != *hash {
                        return Err(format!(
                            "{at}: its `prev` is not the hash of the line before it — a line \
                             before it was removed or edited"
                        ));
                    }
                    if line.seq != seq + 1 {
                        return Err(format!(
                            "{at}: number {} follows {seq} — lines were removed",
                            line.seq
                        ));
                    }
                }
            }
            prev = Some((sha256_hex(text.as_bytes()), line.seq));
            lines += 1;
        }
    }
    let head = prev.map(|(hash, _)| hash).unwrap_or_else(|| GENESIS.to_owned());
    Ok(Verified { lines, files, head, from_the_start })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'a>(arguments: &'a Value, sensitive: &'a [String]) -> AuditEntry<'a> {
        AuditEntry {
            user: Some("alice"),
            credentials: None,
            session: "s1",
            tool: "github.create_issue",
            class: "write",
            arguments,
            sensitive,
            error: None,
            confirmed_by: Some("person"),
            cached: false,
            request_ids: &[],
            writes: true,
        }
    }

    fn config(dir: &Path, arguments: AuditArguments) -> AuditConfig {
        AuditConfig {
            path: Some(dir.join("audit.jsonl")),
            arguments,
            redact_params: vec!["body".into()],
            ..AuditConfig::default()
        }
    }

    #[test]
    fn the_chain_goes_on_across_restarts_and_rotations_and_catches_a_removed_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(dir.path(), AuditArguments::All);
        config.max_bytes = 600;
        let args = serde_json::json!({"owner": "acme", "title": "t"});
        for _ in 0..2 {
            // Each open continues the chain of the last (a restart).
            let log = AuditLog::open(&config).unwrap().unwrap();
            for _ in 0..4 {
                log.record(&entry(&args, &[])).unwrap();
            }
        }
        let path = config.path.clone().unwrap();
        let verified = verify(&path).unwrap();
        assert_eq!(verified.lines, 8);
        assert!(verified.files.len() > 1, "rotated: {:?}", verified.files);
        assert!(verified.from_the_start);

        // A line edited, then one removed: each is caught at the line after it.
        let second = verified.files[1].clone();
        let text = std::fs::read_to_string(&second).unwrap();
        std::fs::write(&second, text.replacen("acme", "acne", 1)).unwrap();
        let why = verify(&path).unwrap_err();
        assert!(why.contains(&format!("{} line 2", second.display())), "{why}");
        let kept: Vec<&str> = text.lines().skip(1).collect();
        std::fs::write(&second, format!("{}\n", kept.join("\n"))).unwrap();
        let why = verify(&path).unwrap_err();
        assert!(why.contains(&format!("{} line 1", second.display())), "{why}");
        assert!(why.contains("removed or edited"), "{why}");
    }

    #[test]
    fn arguments_are_masked_as_configured() {
        let dir = tempfile::tempdir().unwrap();
        let key = ["AKIA", "Z7X3QWERTY4UIOPL"].concat();
        let args = serde_json::json!({"title": "t", "body": "secret plan", "token": "x", "notes": format!("key {key}")});
        let sensitive = vec!["token".to_owned()];
        let read = |mode| {
            let dir = dir.path().join(format!("{mode:?}"));
            let log = AuditLog::open(&config(&dir, mode)).unwrap().unwrap();
            log.record(&entry(&args, &sensitive)).unwrap();
            let text = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
            serde_json::from_str::<Value>(text.trim()).unwrap()
        };
        let redacted = read(AuditArguments::Redacted);
        assert_eq!(redacted["arguments"]["title"], "t");
        assert_eq!(redacted["arguments"]["body"], "[redacted]");
        assert_eq!(redacted["arguments"]["token"], "[redacted]");
        assert_eq!(redacted["arguments"]["notes"], "key [REDACTED aws-access-token]");
        let all = read(AuditArguments::All);
        assert_eq!(all["arguments"]["body"], "secret plan");
        assert!(!all.to_string().contains(&key), "{all}");
        let none = read(AuditArguments::None);
        assert!(none.get("arguments").is_none());
        assert_eq!(none["arguments_sha256"].as_str().unwrap().len(), 64);
        assert_eq!(
            (none["user"].as_str(), none["confirmed_by"].as_str()),
            (Some("alice"), Some("person"))
        );
    }

    #[test]
    fn a_second_writer_of_one_file_is_refused_naming_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path(), AuditArguments::Redacted);
        let _first = AuditLog::open(&config).unwrap().unwrap();
        let why = AuditLog::open(&config).err().unwrap();
        assert!(why.contains("give each replica its own path"), "{why}");
    }
}
