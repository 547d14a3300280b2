//! Writing and reading telemetry: one JSONL file per process under the telemetry directory,
//! one [`CallEvent`] per line. Events carry argument hashes, never argument values or secrets.
//!
//! Telemetry must never break a call: if the file cannot be written, one warning is logged and
//! recording stops.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use quiver_core::telemetry::CallEvent;

/// Appends events to this process's JSONL file.
pub struct TelemetrySink {
    path: PathBuf,
    replica: String,
    file: Mutex<Option<BufWriter<File>>>,
    failed: AtomicBool,
}

impl TelemetrySink {
    /// A sink writing to `dir/events-<unix ms>-<pid>.jsonl`, each event naming `replica`; the
    /// file is created on the first event.
    pub fn new(dir: &Path, replica: &str) -> Self {
        let stamp = now_ms();
        let path = dir.join(format!("events-{stamp}-{}.jsonl", std::process::id()));
        Self {
            path,
            replica: replica.to_owned(),
            file: Mutex::new(None),
            failed: AtomicBool::new(false),
        }
    }

    /// The file events go to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one event (and flushes, so a killed process loses at most the line in flight).
    pub fn record(&self, event: &CallEvent) {
        if self.failed.load(Ordering::Relaxed) {
            return;
        }
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let written = (|| -> std::io::Result<()> {
            if file.is_none() {
                if let Some(dir) = self.path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                *file = Some(BufWriter::new(
                    File::options().create(true).append(true).open(&self.path)?,
                ));
            }
            let out = file.as_mut().expect("opened above");
            if event.replica.is_none() {
                let event = CallEvent { replica: Some(self.replica.clone()), ..event.clone() };
                serde_json::to_writer(&mut *out, &event)?;
            } else {
                serde_json::to_writer(&mut *out, event)?;
            }
            out.write_all(b"\n")?;
            out.flush()
        })();
        if let Err(e) = written {
            self.failed.store(true, Ordering::Relaxed);
            tracing::warn!(
                "telemetry stopped: cannot write {} ({e}); set [telemetry] dir to a writable directory",
                self.path.display()
            );
        }
    }
}

/// Milliseconds since the Unix epoch, for event timestamps and file names.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Reads events from JSONL files, in file order; a line that is not an event is reported as
/// `(file, line number, reason)` and skipped, so one bad line loses nothing else.
pub fn read_events(files: &[PathBuf]) -> (Vec<CallEvent>, Vec<String>) {
    let mut events = Vec::new();
    let mut problems = Vec::new();
    for file in files {
        let reader = match File::open(file) {
            Ok(f) => BufReader::new(f),
            Err(e) => {
                problems.push(format!("{}: cannot read ({e})", file.display()));
                continue;
            }
        };
        for (i, line) in reader.lines().enumerate() {
            let Ok(line) = line else { continue };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<CallEvent>(&line) {
                Ok(event) => events.push(event),
                Err(e) => problems.push(format!(
                    "{}:{}: not a telemetry event ({e})",
                    file.display(),
                    i + 1
                )),
            }
        }
    }
    (events, problems)
}

/// The `.jsonl` files of a telemetry directory, sorted (file names start with their time).
pub fn event_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}
