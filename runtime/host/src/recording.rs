//! Session recordings: each call a session made, with its arguments and the whole result the
//! provider gave (before projection trimmed it), one JSON line per call — what `quiver replay
//! --recordings` serves back to replay a team's own sessions through another configuration.
//!
//! Off by default (`[telemetry] record_sessions = true`): a recording holds the services' data
//! (issue bodies, file contents), though never a token — results are masked before anything
//! else sees them, arguments are masked here, and parameters a tool declares sensitive are
//! replaced. One file per session, `sessions/<start ms>-<session id>.jsonl` under the telemetry
//! directory. A recording that cannot be written is logged once and the session goes on.
//!
//! A replay answers calls from recordings through [`RecordedAnswers`], set on a host with
//! [`crate::Host::answer_from`]: every call the pipeline makes (the agent's and the
//! pre-fetches') then gets the recorded result instead of reaching a provider.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use quiver_core::session_cache::CallKey;
use quiver_core::ToolResult;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::logging;

/// The folder under the telemetry directory that holds recordings.
pub const RECORDINGS_FOLDER: &str = "sessions";

/// What a parameter a tool declares sensitive is recorded as.
pub const REDACTED: &str = "[redacted]";

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedCall {
    /// When the agent made the call, in Unix milliseconds.
    pub at_ms: u64,
    /// When it was answered.
    pub answered_ms: u64,
    /// The qualified tool (`github.get_issue`).
    pub tool: String,
    /// The arguments as the agent sent them, masked.
    pub arguments: Value,
    /// The whole result, before projection.
    pub result: ToolResult,
}

/// Writes one session's recording.
pub struct SessionRecorder {
    path: PathBuf,
    file: Mutex<Option<std::fs::File>>,
    failed: AtomicBool,
}

impl SessionRecorder {
    /// A recorder for session `id` under `telemetry_dir`; the file is created on the first call.
    pub fn new(telemetry_dir: &Path, id: &str, started_ms: u64) -> Self {
        let id: String = id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
            .take(64)
            .collect();
        let path = telemetry_dir.join(RECORDINGS_FOLDER).join(format!("{started_ms}-{id}.jsonl"));
        Self { path, file: Mutex::new(None), failed: AtomicBool::new(false) }
    }

    /// The file this recorder writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `call`, its arguments masked and the values of `sensitive` parameters replaced.
    pub fn record(&self, mut call: RecordedCall, sensitive: &[String]) {
        if self.failed.load(Ordering::Relaxed) {
            return;
        }
        if let Value::Object(arguments) = &mut call.arguments {
            for name in sensitive {
                if let Some(value) = arguments.get_mut(name) {
                    *value = Value::String(REDACTED.to_owned());
                }
            }
        }
        logging::scrub_json(&mut call.arguments);
        let Ok(mut line) = serde_json::to_string(&call) else { return };
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let written = (|| -> std::io::Result<()> {
            if file.is_none() {
                if let Some(dir) = self.path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                *file =
                    Some(std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?);
            }
            file.as_mut().map_or(Ok(()), |f| f.write_all(line.as_bytes()))
        })();
        if let Err(e) = written {
            self.failed.store(true, Ordering::Relaxed);
            tracing::warn!(
                "session recording stopped: cannot write {} ({e}); set [telemetry] dir to a \
                 writable directory",
                self.path.display()
            );
        }
    }
}

/// Every `.jsonl` file of `path` (a file itself, or a folder of them at any depth, links to
/// folders not followed so a loop of links ends), sorted.
pub fn recording_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut files = Vec::new();
    let mut folders = vec![path.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => folders.push(path),
                Ok(_) if path.extension().is_some_and(|e| e == "jsonl") => files.push(path),
                _ => {}
            }
        }
    }
    files.sort();
    files
}

/// The calls of one recording, in order; a line that is not a recorded call is an error naming
/// the file and the line.
pub fn read_recording(path: &Path) -> Result<Vec<RecordedCall>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read it ({e})", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| {
                format!(
                    "{}:{}: not a recorded call ({e}); recordings are written by `[telemetry] \
                     record_sessions = true`",
                    path.display(),
                    i + 1
                )
            })
        })
        .collect()
}

/// Where a replay's calls are answered instead of by providers and upstreams.
pub trait RecordedAnswers: Send + Sync {
    /// The recorded result of the call `key`, or `None` when nothing was recorded for it.
    fn answer(&self, key: &CallKey) -> Option<ToolResult>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_recording_reads_back_with_sensitive_values_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = SessionRecorder::new(dir.path(), "mcp/session 1", 1_700_000_000_000);
        assert!(recorder.path().ends_with("sessions/1700000000000-mcp_session_1.jsonl"));
        let call = RecordedCall {
            at_ms: 1,
            answered_ms: 2,
            tool: "github.get_issue".into(),
            arguments: json!({"owner": "o", "password": "hunter2"}),
            result: ToolResult::from_json(json!({"number": 1})),
        };
        recorder.record(call.clone(), &["password".to_owned()]);
        recorder.record(call.clone(), &[]);
        let files = recording_files(dir.path());
        assert_eq!(files, [recorder.path().to_path_buf()]);
        let calls = read_recording(&files[0]).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].arguments, json!({"owner": "o", "password": REDACTED}));
        assert_eq!(calls[1].result, call.result);

        std::fs::write(dir.path().join("bad.jsonl"), "{\"tool\": 1}\n").unwrap();
        let error = read_recording(&dir.path().join("bad.jsonl")).unwrap_err();
        assert!(error.contains("bad.jsonl:1: not a recorded call"), "{error}");
    }
}
