//! Tuning from evidence: the R7 rule over quiver's own telemetry, follow-up links mined from
//! telemetry and Claude Code transcripts, and edits of the user's config that change only the
//! keys they name.
//!
//! **The R7 rule** ([`r7`]): a tool whose pre-fetches were used less than half the time, over at
//! least ten of them, gets `speculate = false`; when no tool is disabled and at least 60% of all
//! pre-fetches (again over at least ten) were used, `[enrichment] enabled = true`. The evidence
//! threshold applies to the global switch too, so two lucky pre-fetches do not turn speculation on.
//!
//! **Hand-written values win** ([`ConfigFile::set_tool_flag`]): the rule only ever writes
//! `speculate = false` and `enabled = true`. Where the user's file already says the opposite
//! (`speculate = true` in the tool's own section, `enabled = false` in `[enrichment]`), that line
//! is a statement of intent the telemetry cannot see the reasons for, so it is kept and reported;
//! `force` replaces it. Glob and wildcard sections are broad defaults, not statements about one
//! tool, so a tool's own section may still refine them.
//!
//! **Edits keep every other byte** ([`ConfigFile`]): the file is edited with `toml_edit`, which
//! keeps comments, order and formatting; new keys go at the end of their section with a comment
//! saying why, new sections after the last `[tools."…"]` section. The result is parsed with
//! quiver's own config reader before it is written, so an edit can never leave a file quiver
//! refuses.
//!
//! **Seeded sections** ([`ConfigFile::seed_tool`]) are a comment and an empty table: a user
//! layer overrides the provider's model field by field, so a guessed `value_class` or
//! `speculate` hint would silently replace what the provider knows. The empty section marks the
//! tool as seen and is the place to write an override.
//!
//! **Mined links** ([`mine_links`]) come from call sequences, one per session: telemetry (agent
//! calls only, pre-fetches left out; argument hashes, no values) and Claude Code transcripts
//! (`tool_use` blocks and their `tool_result`s, values included). Identical back-to-back calls
//! (same tool, same arguments or argument hash) count once: a retry is not a follow-up; the same
//! tool with other arguments is one (a directory then a file in it, one commit then another —
//! the most frequent read chains of real sessions). For `A → B`, probability = transitions A→B /
//! calls of A, kept at a minimum support of transitions. A link to a tool quiver never
//! pre-fetches (a write, or a tool with `speculate = false`) is shown as evidence, never written:
//! it could only be declined.
//! Where values are known, a scalar of A's result equal to an argument of B (and not simply
//! carried over from A's own arguments) names the link's `projection` (a path such as
//! `$.issues[*].number`, the syntax of [`quiver_core::projection`]) and `projection_arg`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use quiver_core::telemetry::{CallEvent, EventKind};
use quiver_core::value_model::FollowUpLink;
use serde_json::Value;
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, TableLike};

use quiver_runtime::config::LoadedConfig;
use quiver_runtime::telemetry;
use quiver_runtime::Host;

/// A tool needs at least this many pre-fetches before R7 judges it (and all tools together this
/// many before R7 turns speculation on).
pub(crate) const R7_MIN_PREFETCHES: u64 = 10;
/// A tool whose pre-fetch hit rate is below this gets `speculate = false`.
pub(crate) const R7_DISABLE_BELOW: f64 = 0.5;
/// Speculation is turned on when the overall hit rate reaches this and no tool was disabled.
pub(crate) const R7_ENABLE_AT: f64 = 0.6;
/// Default minimum number of A→B transitions before a link is proposed.
pub(crate) const DEFAULT_MIN_SUPPORT: u64 = 3;

/// Why tuning could not read or write the config.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum TuneError {
    /// Occurs when the config exists but cannot be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Occurs when the config is not valid TOML, so it cannot be edited safely.
    #[error("cannot edit config {path}: it is not valid TOML ({message}); fix it and run again")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// Occurs when a key the edit needs holds something else, e.g. `tools = 3`.
    #[error(
        "cannot edit config {path}: `{key}` is not a table; make it one (`[{key}]`) or remove it"
    )]
    NotATable {
        /// The file.
        path: PathBuf,
        /// The key, as TOML spells it.
        key: String,
    },
    /// Occurs when `follow_up` of a tool section is neither an array nor an array of tables.
    #[error(
        "cannot edit config {path}: `follow_up` of [tools.\"{tool}\"] is not a list; write it as \
         `follow_up = [{{ tool = \"…\", probability = 0.5 }}]`"
    )]
    NotAList {
        /// The file.
        path: PathBuf,
        /// The tool whose section it is.
        tool: String,
    },
    /// Occurs when the edited text would not be accepted by quiver's config reader (a bug in the
    /// edit; the file is left as it was).
    #[error("edit of config {path} left it invalid ({message}); the file was not changed")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why the reader refused it.
        message: String,
    },
    /// Occurs when the config cannot be written.
    #[error("cannot write config {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

// ---------------------------------------------------------------------------------------------
// The R7 rule
// ---------------------------------------------------------------------------------------------

/// Pre-fetches and how many of them the agent then asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct HitCount {
    /// Pre-fetches dispatched.
    pub(crate) prefetches: u64,
    /// Of those, the ones the agent asked for within the citation window.
    pub(crate) used: u64,
}

impl HitCount {
    /// `used / prefetches`, or `None` without pre-fetches.
    pub(crate) fn rate(&self) -> Option<f64> {
        (self.prefetches > 0).then(|| self.used as f64 / self.prefetches as f64)
    }
}

/// `3 of 12 pre-fetches used (25.0%)`.
impl fmt::Display for HitCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {} pre-fetches used", self.used, self.prefetches)?;
        match self.rate() {
            Some(r) => write!(f, " ({:.1}%)", r * 100.0),
            None => Ok(()),
        }
    }
}

/// What R7 concludes from a set of events.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct R7Verdict {
    /// Hits per tool that had pre-fetches.
    pub(crate) per_tool: BTreeMap<String, HitCount>,
    /// All pre-fetches together.
    pub(crate) overall: HitCount,
    /// Tools to give `speculate = false`, sorted.
    pub(crate) disable: Vec<String>,
    /// Whether to set `[enrichment] enabled = true`.
    pub(crate) enable: bool,
}

/// Applies R7 to events whose citations are annotated
/// ([`quiver_core::telemetry::annotate_citations`]).
pub(crate) fn r7(events: &[CallEvent]) -> R7Verdict {
    let mut verdict = R7Verdict::default();
    for event in events.iter().filter(|e| e.kind == EventKind::Prefetch) {
        let used = u64::from(event.cited_in_next_n_turns == Some(true));
        let tool = verdict.per_tool.entry(event.tool.clone()).or_default();
        tool.prefetches += 1;
        tool.used += used;
        verdict.overall.prefetches += 1;
        verdict.overall.used += used;
    }
    verdict.disable = verdict
        .per_tool
        .iter()
        .filter(|(_, hits)| {
            hits.prefetches >= R7_MIN_PREFETCHES
                && hits.rate().is_some_and(|r| r < R7_DISABLE_BELOW)
        })
        .map(|(tool, _)| tool.clone())
        .collect();
    verdict.enable = verdict.disable.is_empty()
        && verdict.overall.prefetches >= R7_MIN_PREFETCHES
        && verdict.overall.rate().is_some_and(|r| r >= R7_ENABLE_AT);
    verdict
}

/// One line R7 wanted to write, and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct R7Change {
    /// The section, as TOML spells its header: `tools."github.get_issue"`, `enrichment`.
    pub(crate) section: String,
    /// The key and value R7 wants: `speculate = false`.
    pub(crate) setting: String,
    /// The evidence.
    pub(crate) evidence: HitCount,
    /// What happened to the file.
    pub(crate) outcome: FlagChange,
}

/// Writes R7's verdict into `config`; `force` replaces hand-written opposites.
pub(crate) fn apply_r7(
    config: &mut ConfigFile,
    verdict: &R7Verdict,
    force: bool,
) -> Result<Vec<R7Change>, TuneError> {
    let mut changes = Vec::new();
    for tool in &verdict.disable {
        let evidence = verdict.per_tool[tool];
        let note = format!("quiver tune analyze --apply: {evidence}");
        let outcome = config.set_tool_flag(tool, "speculate", false, &note, force)?;
        changes.push(R7Change {
            section: format!("tools.{}", quoted(tool)),
            setting: "speculate = false".into(),
            evidence,
            outcome,
        });
    }
    if verdict.enable {
        let note = format!("quiver tune analyze --apply: {}, no tool disabled", verdict.overall);
        let outcome = config.set_section_flag("enrichment", "enabled", true, &note, force)?;
        changes.push(R7Change {
            section: "enrichment".into(),
            setting: "enabled = true".into(),
            evidence: verdict.overall,
            outcome,
        });
    }
    Ok(changes)
}

// ---------------------------------------------------------------------------------------------
// The config file
// ---------------------------------------------------------------------------------------------

/// Which file tuning edits: `--config`, else `$QUIVER_CONFIG`, else the file discovery finds
/// (`./quiver.toml`, `$XDG_CONFIG_HOME/quiver/config.toml`), else the user config
/// `$XDG_CONFIG_HOME/quiver/config.toml` (`~/.config/quiver/config.toml`), to be created.
pub(crate) fn config_target(explicit: Option<&Path>) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_owned();
    }
    if let Some(path) = std::env::var_os("QUIVER_CONFIG").filter(|v| !v.is_empty()) {
        return PathBuf::from(path);
    }
    if let Ok(LoadedConfig { path: Some(path), .. }) = LoadedConfig::discover(None) {
        return path;
    }
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|dir| dir.join("quiver").join("config.toml"))
        .unwrap_or_else(|| PathBuf::from("quiver.toml"))
}

/// What setting one key did to the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FlagChange {
    /// The key was added.
    Added,
    /// The key held the opposite and `force` replaced it.
    Replaced,
    /// The key already held the value.
    AlreadySet,
    /// The key holds something else, written by hand; kept (pass `force` to replace it).
    KeptHandWritten(String),
}

impl FlagChange {
    /// Whether the file changed.
    pub(crate) fn changed(&self) -> bool {
        matches!(self, FlagChange::Added | FlagChange::Replaced)
    }
}

/// A config file opened for editing; nothing is written until [`ConfigFile::save`].
pub(crate) struct ConfigFile {
    path: PathBuf,
    existed: bool,
    original: String,
    doc: DocumentMut,
}

impl ConfigFile {
    /// Opens `path`; a missing file is an empty document, created on [`ConfigFile::save`].
    pub(crate) fn open(path: &Path) -> Result<Self, TuneError> {
        let (existed, original) = match std::fs::read_to_string(path) {
            Ok(text) => (true, text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (false, String::new()),
            Err(source) => return Err(TuneError::Read { path: path.to_owned(), source }),
        };
        let doc = original
            .parse::<DocumentMut>()
            .map_err(|e| TuneError::Parse { path: path.to_owned(), message: one_line(&e) })?;
        Ok(Self { path: path.to_owned(), existed, original, doc })
    }

    /// The file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file existed when opened.
    pub(crate) fn existed(&self) -> bool {
        self.existed
    }

    /// The file's text with the edits made so far.
    pub(crate) fn text(&self) -> String {
        let text = self.doc.to_string();
        if self.existed {
            text
        } else {
            // A new file starts with its first line, not the blank line that separates sections.
            text.trim_start_matches('\n').to_owned()
        }
    }

    /// Whether an edit changed the text.
    pub(crate) fn is_changed(&self) -> bool {
        self.text() != self.original
    }

    /// Writes the edited text, after checking that quiver's config reader accepts it. Creates
    /// the file (and its directory) when it did not exist.
    pub(crate) fn save(&self) -> Result<(), TuneError> {
        let text = self.text();
        LoadedConfig::parse(&self.path, &text)
            .map_err(|e| TuneError::Invalid { path: self.path.clone(), message: e.to_string() })?;
        let write = || -> std::io::Result<()> {
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&self.path, text.as_bytes())
        };
        write().map_err(|source| TuneError::Write { path: self.path.clone(), source })
    }

    /// The `[tools."…"]` section named exactly `tool`, if the file has one.
    pub(crate) fn tool_section(&self, tool: &str) -> Option<&dyn TableLike> {
        self.doc.get("tools")?.as_table_like()?.get(tool)?.as_table_like()
    }

    /// Whether the file has a section for exactly `tool`.
    pub(crate) fn has_tool_section(&self, tool: &str) -> bool {
        self.doc.get("tools").and_then(Item::as_table_like).is_some_and(|t| t.contains_key(tool))
    }

    /// Adds an empty `[tools."tool"]` headed by `# note`, unless the file has that section;
    /// returns whether it was added.
    pub(crate) fn seed_tool(&mut self, tool: &str, note: &str) -> Result<bool, TuneError> {
        if self.has_tool_section(tool) {
            return Ok(false);
        }
        self.tool_section_mut(tool, note)?;
        Ok(true)
    }

    /// Sets `key = value` in the section of `tool` (created headed by `# note` when missing).
    pub(crate) fn set_tool_flag(
        &mut self,
        tool: &str,
        key: &str,
        value: bool,
        note: &str,
        force: bool,
    ) -> Result<FlagChange, TuneError> {
        // A section created here is headed by the note; its key needs no second copy.
        let key_note = self.has_tool_section(tool).then_some(note);
        let path = self.path.clone();
        let item = self.tool_section_mut(tool, note)?;
        let commentable = is_commentable(item);
        let section = item
            .as_table_like_mut()
            .ok_or_else(|| TuneError::NotATable { path, key: format!("tools.{}", quoted(tool)) })?;
        Ok(set_flag(section, commentable, key, value, key_note, force))
    }

    /// Sets `key = value` in top-level section `[name]` (created headed by `# note` when
    /// missing).
    pub(crate) fn set_section_flag(
        &mut self,
        name: &str,
        key: &str,
        value: bool,
        note: &str,
        force: bool,
    ) -> Result<FlagChange, TuneError> {
        let position = self.next_position();
        let key_note = self.doc.contains_key(name).then_some(note);
        let item = self
            .doc
            .as_table_mut()
            .entry(name)
            .or_insert_with(|| Item::Table(new_section(note, position, true)));
        let commentable = is_commentable(item);
        let Some(section) = item.as_table_like_mut() else {
            return Err(TuneError::NotATable { path: self.path.clone(), key: name.to_owned() });
        };
        Ok(set_flag(section, commentable, key, value, key_note, force))
    }

    /// The hand-written `follow_up` of `tool`'s own section: `None` when the section sets none.
    pub(crate) fn follow_up_len(&self, tool: &str) -> Option<usize> {
        let item = self.tool_section(tool)?.get("follow_up")?;
        match item {
            Item::Value(toml_edit::Value::Array(a)) => Some(a.len()),
            Item::ArrayOfTables(a) => Some(a.len()),
            _ => Some(0),
        }
    }

    /// Adds follow-up links to `tool`'s section. When the section sets no `follow_up` yet, the
    /// list written is `current` (the links in effect, which a user `follow_up` would otherwise
    /// replace whole) followed by `new`; otherwise `new` is appended to the list there.
    pub(crate) fn add_follow_ups(
        &mut self,
        tool: &str,
        current: &[FollowUpLink],
        new: &[FollowUpLink],
        note: &str,
    ) -> Result<(), TuneError> {
        if new.is_empty() {
            return Ok(());
        }
        let path = self.path.clone();
        let item = self.tool_section_mut(tool, note)?;
        let commentable = is_commentable(item);
        let Some(section) = item.as_table_like_mut() else {
            return Err(TuneError::NotATable { path, key: format!("tools.{}", quoted(tool)) });
        };
        match section.get_mut("follow_up") {
            None => {
                let mut list = Array::new();
                for link in current.iter().chain(new) {
                    list.push_formatted(
                        toml_edit::Value::InlineTable(link_table(link)).decorated("\n    ", ""),
                    );
                }
                list.set_trailing_comma(true);
                list.set_trailing("\n");
                section.insert("follow_up", Item::Value(toml_edit::Value::Array(list)));
                if commentable {
                    let kept = if current.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; the first {} in effect before (a user follow_up replaces the list \
                             whole)",
                            current.len()
                        )
                    };
                    if let Some(mut key) = section.key_mut("follow_up") {
                        key.leaf_decor_mut().set_prefix(format!("# {note}{kept}\n"));
                    }
                }
            }
            Some(Item::Value(toml_edit::Value::Array(list))) => {
                let multi_line = list.iter().any(|v| {
                    v.decor().prefix().and_then(|p| p.as_str()).is_some_and(|p| p.contains('\n'))
                });
                for link in new {
                    let value = toml_edit::Value::InlineTable(link_table(link));
                    if multi_line {
                        list.push_formatted(value.decorated("\n    ", ""));
                    } else {
                        list.push(value);
                    }
                }
            }
            Some(Item::ArrayOfTables(tables)) => {
                for link in new {
                    let mut table = Table::new();
                    for (key, value) in link_table(link).iter() {
                        table.insert(key, Item::Value(value.clone()));
                    }
                    tables.push(table);
                }
            }
            Some(_) => return Err(TuneError::NotAList { path, tool: tool.to_owned() }),
        }
        Ok(())
    }

    /// The section of `tool`, created (headed by `# note`, after the last `[tools."…"]`
    /// section) when missing.
    fn tool_section_mut(&mut self, tool: &str, note: &str) -> Result<&mut Item, TuneError> {
        let position = self
            .doc
            .get("tools")
            .and_then(Item::as_table)
            .and_then(max_position)
            .unwrap_or_else(|| self.next_position());
        let first = self.doc.as_table().is_empty();
        let path = self.path.clone();
        let tools = self.doc.as_table_mut().entry("tools").or_insert_with(|| {
            let mut table = Table::new();
            table.set_implicit(true);
            Item::Table(table)
        });
        let tools = tools
            .as_table_like_mut()
            .ok_or_else(|| TuneError::NotATable { path: path.clone(), key: "tools".into() })?;
        let item =
            tools.entry(tool).or_insert_with(|| Item::Table(new_section(note, position, !first)));
        if !item.is_table_like() {
            return Err(TuneError::NotATable { path, key: format!("tools.{}", quoted(tool)) });
        }
        Ok(item)
    }

    /// A position after every table of the document.
    fn next_position(&self) -> isize {
        max_position(self.doc.as_table()).map_or(1, |p| p + 1)
    }
}

/// Whether a comment line can go before a key of this section: a `[section]` can hold one; an
/// inline table (`"x" = { … }`) and dotted keys (`"x".speculate = …`) cannot.
fn is_commentable(section: &Item) -> bool {
    section.as_table().is_some_and(|t| !t.is_dotted())
}

/// A new `[section]` headed by `# note`, placed at `position`.
fn new_section(note: &str, position: isize, blank_line_before: bool) -> Table {
    let mut table = Table::new();
    let lead = if blank_line_before { "\n" } else { "" };
    table.decor_mut().set_prefix(format!("{lead}# {note}\n"));
    table.set_position(Some(position));
    table
}

/// The highest document position of `table` and the tables under it.
fn max_position(table: &Table) -> Option<isize> {
    let mut best = table.position();
    for (_, item) in table.iter() {
        let nested = match item {
            Item::Table(t) => max_position(t),
            Item::ArrayOfTables(a) => a.iter().filter_map(max_position).max(),
            _ => None,
        };
        best = best.max(nested);
    }
    best
}

/// Sets `key = value` in `section`, the new key headed by `# note` when there is one and the
/// section can hold a comment.
fn set_flag(
    section: &mut dyn TableLike,
    commentable: bool,
    key: &str,
    value: bool,
    note: Option<&str>,
    force: bool,
) -> FlagChange {
    match section.get_mut(key) {
        None => {
            section.insert(key, toml_edit::value(value));
            if let Some(note) = note.filter(|_| commentable) {
                if let Some(mut k) = section.key_mut(key) {
                    k.leaf_decor_mut().set_prefix(format!("# {note}\n"));
                }
            }
            FlagChange::Added
        }
        Some(item) if item.as_bool() == Some(value) => FlagChange::AlreadySet,
        Some(item) if force => {
            // Keep the line's spacing and trailing comment; only the value changes.
            let decor = item.as_value().map(|v| v.decor().clone());
            let mut new = toml_edit::Value::from(value);
            if let Some(decor) = decor {
                *new.decor_mut() = decor;
            }
            *item = Item::Value(new);
            FlagChange::Replaced
        }
        Some(item) => {
            // The value as written, without its spacing and comment.
            let mut written = item.clone();
            if let Some(v) = written.as_value_mut() {
                v.decor_mut().clear();
            }
            FlagChange::KeptHandWritten(written.to_string().trim().to_owned())
        }
    }
}

fn link_table(link: &FollowUpLink) -> InlineTable {
    let mut table = InlineTable::new();
    table.insert("tool", link.tool.as_str().into());
    table.insert("probability", link.probability.into());
    if let Some(projection) = &link.projection {
        table.insert("projection", projection.as_str().into());
    }
    if let Some(arg) = &link.projection_arg {
        table.insert("projection_arg", arg.as_str().into());
    }
    table.fmt();
    table
}

/// `github.get_issue` → `"github.get_issue"`, as a TOML key.
pub(crate) fn quoted(key: &str) -> String {
    toml_edit::Key::new(key).display_repr().into_owned()
}

fn one_line(e: &impl fmt::Display) -> String {
    e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
}

// ---------------------------------------------------------------------------------------------
// Call sequences
// ---------------------------------------------------------------------------------------------

/// One call observed in a log.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ObservedCall {
    /// Tool name: qualified (`github.get_issue`) for quiver tools, as written otherwise (`Read`).
    pub(crate) tool: String,
    /// Argument hash (telemetry).
    pub(crate) args_hash: Option<String>,
    /// Arguments (transcripts).
    pub(crate) input: Option<Value>,
    /// The result as JSON, when it was JSON and not an error (transcripts).
    pub(crate) output: Option<Value>,
    /// The result as the server returned it: its MCP content blocks (agent traces, Claude Code
    /// transcripts), for `quiver replay` to serve back.
    pub(crate) blocks: Option<Vec<Value>>,
    /// When the agent made the call (ms since the epoch), where the log says (Claude Code
    /// transcripts).
    pub(crate) called_at_ms: Option<i64>,
    /// When its answer came back: with the next call's time, the agent's think time.
    pub(crate) answered_at_ms: Option<i64>,
}

/// A log line's `timestamp` (RFC 3339) in ms since the epoch.
fn timestamp_ms(entry: &serde_json::Map<String, Value>) -> Option<i64> {
    let text = entry.get("timestamp")?.as_str()?;
    let at =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).ok()
}

impl ObservedCall {
    /// Same tool, same arguments: a repeat, not a follow-up.
    fn repeats(&self, previous: &ObservedCall) -> bool {
        self.tool == previous.tool
            && match (&self.args_hash, &previous.args_hash, &self.input, &previous.input) {
                (Some(a), Some(b), _, _) => a == b,
                (_, _, Some(a), Some(b)) => a == b,
                _ => false,
            }
    }
}

/// The calls of one session, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct CallSequence {
    /// Where it came from: `file#session`.
    pub(crate) origin: String,
    /// The calls.
    pub(crate) calls: Vec<ObservedCall>,
    /// What the user asked, when the log shows it (agent traces): the values it names did not
    /// come from an answer.
    pub(crate) prompt: String,
}

/// What reading telemetry for mining found.
#[derive(Debug, Clone, Default)]
pub(crate) struct TelemetryScan {
    /// One sequence per (file, session).
    pub(crate) sequences: Vec<CallSequence>,
    /// Events read.
    pub(crate) events: usize,
    /// Agent calls per tool (for seeding).
    pub(crate) calls_per_tool: BTreeMap<String, u64>,
    /// Lines and files that could not be read, as `file:line: reason`.
    pub(crate) problems: Vec<String>,
}

/// Agent calls from telemetry files, one sequence per session of each file. Pre-fetches and
/// declines are the host's doing, not the agent's, and are left out.
pub(crate) fn telemetry_sequences(files: &[PathBuf]) -> TelemetryScan {
    let mut scan = TelemetryScan::default();
    for file in files {
        let (events, problems) = telemetry::read_events(std::slice::from_ref(file));
        scan.events += events.len();
        scan.problems.extend(problems);
        let mut sessions: Vec<(String, Vec<ObservedCall>)> = Vec::new();
        for event in events {
            if !matches!(event.kind, EventKind::Call | EventKind::FailFast) {
                continue;
            }
            *scan.calls_per_tool.entry(event.tool.clone()).or_default() += 1;
            let call = ObservedCall {
                tool: event.tool,
                args_hash: Some(event.args_hash).filter(|h| !h.is_empty()),
                ..ObservedCall::default()
            };
            match sessions.iter_mut().find(|(s, _)| *s == event.session) {
                Some((_, calls)) => calls.push(call),
                None => sessions.push((event.session, vec![call])),
            }
        }
        scan.sequences.extend(sessions.into_iter().map(|(session, calls)| CallSequence {
            origin: format!("{}#{session}", file.display()),
            calls,
            ..CallSequence::default()
        }));
    }
    scan
}

/// Where Claude Code keeps its transcripts: `~/.claude/projects`.
pub(crate) fn default_claude_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude").join("projects"))
}

/// Every `.jsonl` file under `dir`, at any depth (subagent transcripts included), sorted: the
/// same walk as quiver's own recordings.
pub(crate) fn transcript_files(dir: &Path) -> Vec<PathBuf> {
    quiver_runtime::recording::recording_files(dir)
}

/// What reading Claude Code transcripts found.
#[derive(Debug, Clone, Default)]
pub(crate) struct TranscriptScan {
    /// One sequence per (file, session, main thread or sidechain).
    pub(crate) sequences: Vec<CallSequence>,
    /// Files read.
    pub(crate) files: usize,
    /// `tool_use` blocks read.
    pub(crate) tool_calls: usize,
    /// Lines that were not JSON objects (a torn last line, a partial write), skipped.
    pub(crate) skipped_lines: usize,
    /// Files that could not be opened, as `file: reason`.
    pub(crate) unreadable: Vec<String>,
}

/// Reads Claude Code transcripts (read-only). Each line is a JSON object; `assistant` lines carry
/// `message.content[]` blocks of `type: "tool_use"` (`id`, `name`, `input`), `user` lines
/// `tool_result` blocks (`tool_use_id`, `content` as a string or `[{type: "text", text}]`,
/// `is_error`). Other line types (`summary`, `system`, snapshots) are ignored; lines that are
/// not JSON objects are counted and skipped. `name` maps a transcript tool name to the name
/// links use (see [`canonical_tool_name`]).
pub(crate) fn read_transcripts(files: &[PathBuf], name: &dyn Fn(&str) -> String) -> TranscriptScan {
    let mut scan = TranscriptScan::default();
    for file in files {
        let reader = match File::open(file) {
            Ok(f) => BufReader::new(f),
            Err(e) => {
                scan.unreadable.push(format!("{}: {e}", file.display()));
                continue;
            }
        };
        scan.files += 1;
        let mut sequences: Vec<(String, Vec<ObservedCall>)> = Vec::new();
        // tool_use id → (sequence index, call index), to attach results.
        let mut pending: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        // A session's first request, by session id.
        let mut prompts: BTreeMap<String, String> = BTreeMap::new();
        for line in reader.split(b'\n') {
            let Ok(line) = line else {
                scan.skipped_lines += 1;
                continue;
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Ok(Value::Object(entry)) = serde_json::from_slice::<Value>(&line) else {
                scan.skipped_lines += 1;
                continue;
            };
            let content = entry.get("message").and_then(|m| m.get("content"));
            if let (Some("user"), Some(Value::String(text))) =
                (entry.get("type").and_then(Value::as_str), content)
            {
                let session = entry.get("sessionId").and_then(Value::as_str).unwrap_or("");
                prompts.entry(session.to_owned()).or_insert_with(|| text.clone());
            }
            let Some(Value::Array(blocks)) = content else {
                continue;
            };
            let at = timestamp_ms(&entry);
            match entry.get("type").and_then(Value::as_str) {
                Some("assistant") => {
                    let session = entry.get("sessionId").and_then(Value::as_str).unwrap_or("");
                    let sidechain = entry.get("isSidechain").and_then(Value::as_bool) == Some(true);
                    let key =
                        if sidechain { format!("{session}/sidechain") } else { session.to_owned() };
                    let index = match sequences.iter().position(|(k, _)| *k == key) {
                        Some(i) => i,
                        None => {
                            sequences.push((key, Vec::new()));
                            sequences.len() - 1
                        }
                    };
                    for block in blocks {
                        if block.get("type").and_then(Value::as_str) != Some("tool_use") {
                            continue;
                        }
                        let Some(tool) = block.get("name").and_then(Value::as_str) else {
                            continue;
                        };
                        scan.tool_calls += 1;
                        let calls = &mut sequences[index].1;
                        calls.push(ObservedCall {
                            tool: name(tool),
                            input: block.get("input").cloned(),
                            called_at_ms: at,
                            ..ObservedCall::default()
                        });
                        if let Some(id) = block.get("id").and_then(Value::as_str) {
                            pending.insert(id.to_owned(), (index, calls.len() - 1));
                        }
                    }
                }
                Some("user") => {
                    for block in blocks {
                        if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                            continue;
                        }
                        let Some(&(s, c)) = block
                            .get("tool_use_id")
                            .and_then(Value::as_str)
                            .and_then(|id| pending.get(id))
                        else {
                            continue;
                        };
                        let call = &mut sequences[s].1[c];
                        call.answered_at_ms = at;
                        call.blocks = block.get("content").map(trace_output_blocks);
                        if block.get("is_error").and_then(Value::as_bool) != Some(true) {
                            call.output = block.get("content").and_then(result_json);
                        }
                    }
                }
                _ => {}
            }
        }
        scan.sequences.extend(sequences.into_iter().map(|(session, calls)| {
            // A sidechain's prompt is its session's.
            let id = session.trim_end_matches("/sidechain");
            CallSequence {
                origin: format!("{}#{session}", file.display()),
                calls,
                prompt: prompts.get(id).cloned().unwrap_or_default(),
            }
        }));
    }
    scan
}

/// Where `tune from-logs` reads call sequences from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Logs {
    /// Telemetry files (none: the telemetry directory's).
    pub(crate) telemetry: Vec<PathBuf>,
    /// Claude Code transcripts (none: `~/.claude/projects`).
    pub(crate) claude_dir: Option<PathBuf>,
    /// Agent traces, one session each.
    pub(crate) traces: Vec<PathBuf>,
    /// quiver's own session recordings.
    pub(crate) recordings: Vec<PathBuf>,
    /// The provider bare tool names of traces belong to.
    pub(crate) provider: Option<String>,
}

impl TranscriptScan {
    /// Adds what `other` read.
    pub(crate) fn merge(&mut self, other: TranscriptScan) {
        self.sequences.extend(other.sequences);
        self.files += other.files;
        self.tool_calls += other.tool_calls;
        self.skipped_lines += other.skipped_lines;
        self.unreadable.extend(other.unreadable);
    }
}

/// Reads agent traces (read-only), one session per file: a JSON array of items — or an object
/// whose `messages` is one — in OpenAI's Responses form (`{type: "function_call", name,
/// arguments, call_id}` then `{type: "function_call_output", call_id, output}`, as MCPMark
/// records its runs) or its Chat form (an assistant message's `tool_calls[]` with `id` and
/// `function: {name, arguments}`, then `{role: "tool", tool_call_id, content}`). `arguments` may
/// be a JSON string or an object; an output is MCP content (a text block, a list of blocks, or
/// their JSON as a string) whose first JSON value is the result. `name` maps a tool name.
pub(crate) fn read_traces(files: &[PathBuf], name: &dyn Fn(&str) -> String) -> TranscriptScan {
    let mut scan = TranscriptScan::default();
    for file in files {
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) => {
                scan.unreadable.push(format!("{}: {e}", file.display()));
                continue;
            }
        };
        let items = match serde_json::from_str::<Value>(&text) {
            Ok(Value::Array(items)) => items,
            Ok(Value::Object(mut object)) => match object.remove("messages") {
                Some(Value::Array(items)) => items,
                _ => {
                    scan.unreadable.push(format!("{}: no `messages` array", file.display()));
                    continue;
                }
            },
            Ok(_) | Err(_) => {
                scan.unreadable.push(format!(
                    "{}: not a JSON array of trace items (or an object with `messages`)",
                    file.display()
                ));
                continue;
            }
        };
        scan.files += 1;
        let mut calls: Vec<ObservedCall> = Vec::new();
        let mut pending: BTreeMap<String, usize> = BTreeMap::new();
        let mut open = |id: Option<&str>, tool: &str, arguments: Option<&Value>| {
            let input = match arguments {
                Some(Value::String(s)) => serde_json::from_str(s).ok(),
                Some(other) => Some(other.clone()),
                None => None,
            };
            calls.push(ObservedCall { tool: name(tool), input, ..ObservedCall::default() });
            if let Some(id) = id {
                pending.insert(id.to_owned(), calls.len() - 1);
            }
        };
        let mut outputs: Vec<(String, Value)> = Vec::new();
        let mut prompt = String::new();
        for item in &items {
            let kind = item.get("type").and_then(Value::as_str);
            let role = item.get("role").and_then(Value::as_str);
            if role == Some("user") && prompt.is_empty() {
                prompt = message_text(item.get("content"));
            }
            match (kind, role) {
                (Some("function_call"), _) => {
                    if let Some(tool) = item.get("name").and_then(Value::as_str) {
                        let id = item.get("call_id").and_then(Value::as_str);
                        open(id, tool, item.get("arguments"));
                    }
                }
                (Some("function_call_output"), _) => {
                    if let (Some(id), Some(output)) =
                        (item.get("call_id").and_then(Value::as_str), item.get("output"))
                    {
                        outputs.push((id.to_owned(), output.clone()));
                    }
                }
                (_, Some("assistant")) => {
                    for call in
                        item.get("tool_calls").and_then(Value::as_array).into_iter().flatten()
                    {
                        let function = call.get("function");
                        if let Some(tool) =
                            function.and_then(|f| f.get("name")).and_then(Value::as_str)
                        {
                            let id = call.get("id").and_then(Value::as_str);
                            open(id, tool, function.and_then(|f| f.get("arguments")));
                        }
                    }
                }
                (_, Some("tool")) => {
                    if let (Some(id), Some(content)) =
                        (item.get("tool_call_id").and_then(Value::as_str), item.get("content"))
                    {
                        outputs.push((id.to_owned(), content.clone()));
                    }
                }
                _ => {}
            }
        }
        for (id, output) in outputs {
            if let Some(&index) = pending.get(&id) {
                calls[index].output = trace_output_json(&output);
                calls[index].blocks = Some(trace_output_blocks(&output));
            }
        }
        scan.tool_calls += calls.len();
        scan.sequences.push(CallSequence { origin: file.display().to_string(), calls, prompt });
    }
    scan
}

/// The result of a trace's tool output: MCP content as a value or as its JSON text — one text
/// block (`{type: "text", text}`), a list of blocks — or plain text; its first JSON value.
fn trace_output_json(output: &Value) -> Option<Value> {
    let parsed = match output {
        Value::String(s) => serde_json::from_str::<Value>(s).unwrap_or_else(|_| output.clone()),
        other => other.clone(),
    };
    match &parsed {
        Value::Object(block) if block.get("type").and_then(Value::as_str) == Some("text") => {
            result_json(&Value::Array(vec![parsed.clone()]))
        }
        Value::Array(_) | Value::String(_) => result_json(&parsed),
        Value::Object(_) => Some(parsed),
        _ => None,
    }
}

/// A message's text: its `content` as a string, or the text of its parts.
fn message_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A trace's tool output as MCP content blocks: a list of blocks, one block, or their JSON as
/// text; plain text becomes one text block. A text block that holds a whole MCP result
/// (`{"content": [...]}`, as some harnesses record a proxied call) is replaced by its blocks.
pub(crate) fn trace_output_blocks(output: &Value) -> Vec<Value> {
    let parsed = match output {
        Value::String(s) => serde_json::from_str::<Value>(s)
            .ok()
            .filter(|v| v.is_array() || v.get("type").is_some())
            .unwrap_or_else(|| serde_json::json!({"type": "text", "text": s})),
        other => other.clone(),
    };
    let blocks = match parsed {
        Value::Array(blocks) => blocks,
        block => vec![block],
    };
    blocks
        .into_iter()
        .flat_map(|block| {
            let nested = block
                .get("text")
                .and_then(Value::as_str)
                .filter(|t| t.trim_start().starts_with('{'))
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
                .and_then(|v| v.get("content").and_then(Value::as_array).cloned())
                .filter(|inner| {
                    inner.iter().all(|b| b.get("type").and_then(Value::as_str).is_some())
                });
            nested.unwrap_or_else(|| vec![block])
        })
        .collect()
}

/// github-mcp-server's tool names that quiver's GitHub provider calls otherwise.
const GITHUB_MCP_NAMES: &[(&str, &str)] = &[
    ("get_issue_comments", "list_issue_comments"),
    ("get_pull_request_files", "list_pull_request_files"),
    ("get_pull_request_reviews", "list_pull_request_reviews"),
    ("get_pull_request_comments", "list_pull_request_review_comments"),
    ("get_pull_request_status", "get_commit_status"),
    ("list_workflow_run_artifacts", "list_artifacts"),
];

/// The name links use for a trace's tool `raw`: a quiver tool by its MCP or qualified name, or,
/// with `provider`, a bare name of that provider (`get_issue` → `github.get_issue`; for GitHub
/// also github-mcp-server's names, `get_issue_comments` → `github.list_issue_comments`); else
/// as written.
pub(crate) fn trace_tool_name(host: &Host, provider: Option<&str>, raw: &str) -> String {
    let known = canonical_tool_name(host, raw);
    if known != raw || host.tool(raw).is_some() {
        return known;
    }
    let Some(provider) = provider else { return known };
    // Harnesses that front several servers prefix a tool with its server (`github-get_issue`,
    // Claude Code's `mcp__github__get_issue`).
    let raw = match mcp_server_and_tool(raw) {
        Some((server, tool)) if server == provider => tool,
        _ => {
            raw.strip_prefix(provider).and_then(|r| r.strip_prefix(['-', '_', '.'])).unwrap_or(raw)
        }
    };
    let local = if provider == "github" {
        GITHUB_MCP_NAMES.iter().find(|(theirs, _)| *theirs == raw).map_or(raw, |(_, ours)| *ours)
    } else {
        raw
    };
    let qualified = format!("{provider}.{local}");
    if host.tool(&qualified).is_some() {
        qualified
    } else {
        known
    }
}

/// A tool result's JSON: its text (a string, or the `text` blocks joined), read as the first
/// JSON value in it — quiver may append a one-line hint after the JSON.
fn result_json(content: &Value) -> Option<Value> {
    let text = match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    let first =
        serde_json::Deserializer::from_str(text.trim_start()).into_iter::<Value>().next()?;
    first.ok().filter(|v| v.is_object() || v.is_array())
}

/// The server and tool of a Claude Code name for an MCP tool, `mcp__<server>__<tool>`.
pub(crate) fn mcp_server_and_tool(raw: &str) -> Option<(&str, &str)> {
    raw.strip_prefix("mcp__")?.split_once("__")
}

/// The name links use for a tool named `raw` in a transcript: `mcp__<server>__<tool>` becomes
/// the qualified name of the quiver tool whose MCP name is `<tool>` (`mcp__quiver__github_get_issue`
/// → `github.get_issue`); any other name (Claude's `Read`, `Grep`, other MCP servers' tools)
/// stays as it is.
pub(crate) fn canonical_tool_name(host: &Host, raw: &str) -> String {
    let local = mcp_server_and_tool(raw).map_or(raw, |(_, tool)| tool);
    host.tool(local).map_or_else(|| raw.to_owned(), |tool| tool.name.to_string())
}

// ---------------------------------------------------------------------------------------------
// Mining
// ---------------------------------------------------------------------------------------------

/// Which field of A's result fed which argument of B.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MinedProjection {
    /// Path into A's result, e.g. `$.issues[*].number`.
    pub(crate) path: String,
    /// B's argument.
    pub(crate) arg: String,
    /// Transitions where the value matched.
    pub(crate) matched: u64,
    /// Transitions where both values were known.
    pub(crate) observed: u64,
    /// Transitions where the value was the path's first: what a pre-fetch of the first
    /// projection would have served.
    pub(crate) first: u64,
}

impl MinedLink {
    /// The probability written into the link: how often the call its first projection names
    /// was made next — what the planner weighs, since a pre-fetch runs the first projection
    /// (the tool-level rate when no projection was seen).
    pub(crate) fn written_probability(&self) -> f64 {
        match &self.projection {
            Some(p) => (p.first as f64 / self.from_calls.max(1) as f64 * 100.0).round() / 100.0,
            None => self.probability,
        }
    }
}

/// A follow-up link seen in the logs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MinedLink {
    /// A.
    pub(crate) from: String,
    /// B.
    pub(crate) to: String,
    /// A→B transitions.
    pub(crate) transitions: u64,
    /// Calls of A.
    pub(crate) from_calls: u64,
    /// `transitions / from_calls`, rounded to two decimals.
    pub(crate) probability: f64,
    /// The field that fed B, when the values show one.
    pub(crate) projection: Option<MinedProjection>,
}

/// Counts transitions A→B (B the next call after A in its session; repeats — the same tool with
/// the same arguments — left out, the same tool with other arguments counted) and keeps those
/// with at least `min_support` of them, most likely first per tool.
pub(crate) fn mine_links(sequences: &[CallSequence], min_support: u64) -> Vec<MinedLink> {
    type Pair = (String, String);
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    let mut transitions: BTreeMap<Pair, u64> = BTreeMap::new();
    let mut observed: BTreeMap<Pair, u64> = BTreeMap::new();
    let mut fed: BTreeMap<Pair, BTreeMap<(String, String), u64>> = BTreeMap::new();
    let mut fed_first: BTreeMap<Pair, BTreeMap<(String, String), u64>> = BTreeMap::new();
    for sequence in sequences {
        let mut collapsed: Vec<&ObservedCall> = Vec::new();
        for call in &sequence.calls {
            if collapsed.last().is_some_and(|previous| call.repeats(previous)) {
                continue;
            }
            collapsed.push(call);
        }
        for call in &collapsed {
            *calls.entry(call.tool.clone()).or_default() += 1;
        }
        for pair in collapsed.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let key = (a.tool.clone(), b.tool.clone());
            *transitions.entry(key.clone()).or_default() += 1;
            if let (Some(output), Some(Value::Object(args))) = (&a.output, &b.input) {
                *observed.entry(key.clone()).or_default() += 1;
                let found = feeding(a.input.as_ref(), output, args);
                let firsts = fed_first.entry(key.clone()).or_default();
                for (path, arg) in &found {
                    if first_projection_is(output, path, arg, args.get(arg)) {
                        *firsts.entry((path.clone(), arg.clone())).or_default() += 1;
                    }
                }
                let counts = fed.entry(key).or_default();
                for found in found {
                    *counts.entry(found).or_default() += 1;
                }
            }
        }
    }
    let mut links: Vec<MinedLink> = transitions
        .into_iter()
        .filter(|(_, n)| *n >= min_support.max(1))
        .map(|((from, to), n)| {
            let from_calls = calls.get(&from).copied().unwrap_or(n).max(n);
            let seen = observed.get(&(from.clone(), to.clone())).copied().unwrap_or(0);
            let projection = fed.get(&(from.clone(), to.clone())).and_then(|counts| {
                counts
                    .iter()
                    .filter(|(_, matched)| **matched * 2 >= seen && seen > 0)
                    .max_by(|(x, nx), (y, ny)| {
                        nx.cmp(ny)
                            .then_with(|| names_match(x).cmp(&names_match(y)))
                            .then_with(|| y.0.len().cmp(&x.0.len()))
                            .then_with(|| y.cmp(x))
                    })
                    .map(|((path, arg), matched)| MinedProjection {
                        path: path.clone(),
                        arg: arg.clone(),
                        matched: *matched,
                        observed: seen,
                        first: fed_first
                            .get(&(from.clone(), to.clone()))
                            .and_then(|f| f.get(&(path.clone(), arg.clone())))
                            .copied()
                            .unwrap_or(0),
                    })
            });
            let probability = (n as f64 / from_calls as f64 * 100.0).round() / 100.0;
            MinedLink { from, to, transitions: n, from_calls, probability, projection }
        })
        // A link that rounds to 0 would never be planned.
        .filter(|link| link.probability > 0.0)
        .collect();
    links.sort_by(|a, b| {
        a.from.cmp(&b.from).then(b.probability.total_cmp(&a.probability)).then(a.to.cmp(&b.to))
    });
    links
}

/// Whether the path's last field names the argument (`…number` feeding `number` or
/// `issue_number`), the tie-breaker between equal counts.
fn names_match((path, arg): &(String, String)) -> bool {
    let last = path.rsplit(['.', '[']).next().unwrap_or("").trim_matches(['"', ']']);
    !last.is_empty() && (arg.ends_with(last) || last.ends_with(arg.as_str()))
}

/// `(path in output, argument of B)` for every scalar argument of B equal to a scalar of A's
/// output, unless A's own arguments already held that value (carried over, not fed).
fn feeding(
    a_input: Option<&Value>,
    output: &Value,
    b_args: &serde_json::Map<String, Value>,
) -> BTreeSet<(String, String)> {
    let carried: Vec<&Value> = match a_input {
        Some(Value::Object(args)) => args.values().collect(),
        _ => Vec::new(),
    };
    let mut scalars = Vec::new();
    scalar_paths(output, "$".to_owned(), &mut scalars);
    let mut out = BTreeSet::new();
    for (arg, value) in b_args {
        let wanted = match value {
            Value::Number(_) => value.to_string(),
            Value::String(s) if s.chars().count() >= 2 => s.clone(),
            _ => continue,
        };
        if carried.iter().any(|c| same_scalar(c, &wanted)) {
            continue;
        }
        for (path, scalar) in &scalars {
            if same_scalar(scalar, &wanted) {
                out.insert((path.clone(), arg.clone()));
            }
        }
    }
    out
}

/// Whether the first value `path` projects out of `output` is `value` (B's `arg`).
fn first_projection_is(output: &Value, path: &str, arg: &str, value: Option<&Value>) -> bool {
    let Some(value) = value else { return false };
    let wanted = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    quiver_core::projection::project(output, path, arg)
        .ok()
        .and_then(|calls| calls.into_iter().next())
        .and_then(|call| call.get(arg).cloned())
        .is_some_and(|first| same_scalar(&first, &wanted))
}

/// A number equals its decimal spelling: agents pass `"1347"` where a result said `1347`.
fn same_scalar(value: &Value, wanted: &str) -> bool {
    match value {
        Value::Number(n) => n.to_string() == wanted,
        Value::String(s) => s == wanted,
        _ => false,
    }
}

/// Cap on the scalars looked at in one result, so one huge result cannot stall mining.
const MAX_SCALARS: usize = 20_000;

/// Every string and number of `value` with its path; array elements become `[*]`, as links
/// project from every element.
fn scalar_paths<'v>(value: &'v Value, path: String, out: &mut Vec<(String, &'v Value)>) {
    if out.len() >= MAX_SCALARS {
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let step = if !key.is_empty()
                    && !key.contains(['.', '[', ']', '"', '\'', ' ', '\t', '\n'])
                {
                    format!("{path}.{key}")
                } else if !key.contains('"') {
                    format!("{path}[\"{key}\"]")
                } else {
                    continue;
                };
                scalar_paths(child, step, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                scalar_paths(item, format!("{path}[*]"), out);
            }
        }
        Value::Number(_) | Value::String(_) => out.push((path, value)),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Proposals against a host
// ---------------------------------------------------------------------------------------------

/// What `from-logs` makes of a mined link for this host.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LinkStatus {
    /// A new link, written by `--apply`.
    New(FollowUpLink),
    /// The tool already links to the target (with this probability); left alone.
    AlreadyLinked(f64),
    /// The tool's own section says `follow_up = []`, written by hand; left alone.
    KeptEmpty,
    /// A or B is not a tool this host serves (Claude built-ins, other MCP servers); printed,
    /// never written, since a section for it would match no tool.
    NotServed(String),
    /// B is never pre-fetched (it changes things, or `speculate = false`): a link to it could
    /// only be declined, which counts against recall. Printed, never written.
    NeverPrefetched,
}

/// A mined link and what to do with it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LinkProposal {
    /// The evidence.
    pub(crate) mined: MinedLink,
    /// The decision.
    pub(crate) status: LinkStatus,
}

/// Decides for each mined link whether it is new for this host. A projection whose argument the
/// target's input schema does not know is dropped (the values matched, but the call could not
/// take them).
pub(crate) fn propose_links(
    host: &Host,
    config: &ConfigFile,
    mined: Vec<MinedLink>,
) -> Vec<LinkProposal> {
    mined
        .into_iter()
        .map(|mut mined| {
            let (Some(from), Some(to)) = (host.tool(&mined.from), host.tool(&mined.to)) else {
                let missing =
                    if host.tool(&mined.from).is_none() { &mined.from } else { &mined.to };
                return LinkProposal { status: LinkStatus::NotServed(missing.clone()), mined };
            };
            let from_name = from.name.to_string();
            let to_name = to.name.to_string();
            if !may_ever_prefetch(host, &to) {
                return LinkProposal { status: LinkStatus::NeverPrefetched, mined };
            }
            if config.follow_up_len(&from_name) == Some(0) {
                return LinkProposal { status: LinkStatus::KeptEmpty, mined };
            }
            let effective = host.value_model(&from).model.follow_up;
            if let Some(existing) =
                effective.iter().find(|l| qualify(&from.name.provider, &l.tool) == to_name)
            {
                let p = existing.probability;
                return LinkProposal { status: LinkStatus::AlreadyLinked(p), mined };
            }
            let known_arg = |arg: &str| {
                to.spec
                    .input_schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_none_or(|props| props.contains_key(arg))
            };
            if mined.projection.as_ref().is_some_and(|p| !known_arg(&p.arg)) {
                mined.projection = None;
            }
            let tool =
                if to.name.provider == from.name.provider { to.name.tool.clone() } else { to_name };
            let link = FollowUpLink {
                tool,
                probability: mined.written_probability(),
                projection: mined.projection.as_ref().map(|p| p.path.clone()),
                projection_arg: mined.projection.as_ref().map(|p| p.arg.clone()),
            };
            LinkProposal { status: LinkStatus::New(link), mined }
        })
        .collect()
}

/// `get_issue` of provider `github` → `github.get_issue`; qualified names stay.
fn qualify(provider: &str, tool: &str) -> String {
    if tool.contains('.') {
        tool.to_owned()
    } else {
        format!("{provider}.{tool}")
    }
}

/// Writes the new links of `proposals` into `config`, grouped by tool; returns how many.
pub(crate) fn apply_links(
    host: &Host,
    config: &mut ConfigFile,
    proposals: &[LinkProposal],
) -> Result<usize, TuneError> {
    let mut by_tool: BTreeMap<&str, Vec<FollowUpLink>> = BTreeMap::new();
    for proposal in proposals {
        if let LinkStatus::New(link) = &proposal.status {
            by_tool.entry(&proposal.mined.from).or_default().push(link.clone());
        }
    }
    let mut written = 0;
    for (tool, new) in by_tool {
        let Some(registered) = host.tool(tool) else { continue };
        let name = registered.name.to_string();
        // A section without follow_up gets the links in effect first, or writing the new ones
        // would drop the provider's.
        let current = if config.follow_up_len(&name).is_some() {
            Vec::new()
        } else {
            host.value_model(&registered).model.follow_up
        };
        let note = "follow-up links mined by quiver tune from-logs";
        config.add_follow_ups(&name, &current, &new, note)?;
        written += new.len();
    }
    Ok(written)
}

/// Whether quiver could ever pre-fetch `tool`: its class allows it (a write never) and no
/// layer of the user's says `speculate = false`. An upstream tool the user has not vouched for
/// yet counts as possible: the link waits for the class the user gives it.
fn may_ever_prefetch(host: &Host, tool: &quiver_runtime::RegisteredTool) -> bool {
    let resolved = host.value_model(tool);
    let vetoed_by_user = resolved.model.speculate == Some(false)
        && resolved.provenance.get("speculate").is_some_and(|layer| layer.is_user());
    resolved.model.side_effect_class.is_speculatable() && !vetoed_by_user
}

/// The proposals as TOML a user can paste, each headed by its evidence; links that are not new
/// appear as comments only.
pub(crate) fn proposals_toml(proposals: &[LinkProposal]) -> String {
    let mut out = String::new();
    for proposal in proposals {
        let m = &proposal.mined;
        let mut evidence = format!(
            "# {} → {}: {} of {} calls (p {:.2})",
            m.from, m.to, m.transitions, m.from_calls, m.probability
        );
        if let Some(p) = &m.projection {
            evidence.push_str(&format!(
                "; {} fed {} in {} of {}, its first value in {} (p {:.2} written: a pre-fetch \
                 runs the first)",
                p.path,
                p.arg,
                p.matched,
                p.observed,
                p.first,
                m.written_probability()
            ));
        }
        out.push_str(&evidence);
        out.push('\n');
        match &proposal.status {
            LinkStatus::New(link) => {
                out.push_str(&format!("[[tools.{}.follow_up]]\n", quoted(&m.from)));
                for (key, value) in link_table(link).iter() {
                    out.push_str(&format!("{key} = {}\n", value.to_string().trim()));
                }
            }
            LinkStatus::AlreadyLinked(p) => {
                out.push_str(&format!("#   already linked (p {p:.2}); left as it is\n"))
            }
            LinkStatus::KeptEmpty => out.push_str(&format!(
                "#   [tools.{}] says follow_up = [] by hand; left as it is\n",
                quoted(&m.from)
            )),
            LinkStatus::NotServed(tool) => {
                out.push_str(&format!("#   not written: {tool} is not a tool this host serves\n"))
            }
            LinkStatus::NeverPrefetched => out.push_str(&format!(
                "#   not written: quiver never pre-fetches {} (it changes things, or speculate = \
                 false), so the link could only be declined\n",
                m.to
            )),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(tool: &str, input: Value, output: Option<Value>) -> ObservedCall {
        ObservedCall { tool: tool.into(), input: Some(input), output, ..ObservedCall::default() }
    }

    #[test]
    fn the_field_that_fed_the_next_call_is_found_by_value() {
        let list = |n: u64| {
            call(
                "github.list_issues",
                json!({"owner": "octocat", "repo": "Hello-World"}),
                Some(json!({"repository": "octocat/Hello-World", "issues": [
                    {"number": n, "author": "octocat", "comments": 2},
                    {"number": n + 1, "author": "hubot", "comments": 0}]})),
            )
        };
        let get = |n: u64| {
            call(
                "github.get_issue",
                json!({"owner": "octocat", "repo": "Hello-World", "number": n}),
                None,
            )
        };
        let sequences: Vec<CallSequence> = (0..3)
            .map(|i| CallSequence {
                origin: format!("s{i}"),
                calls: vec![list(100 + i), get(100 + i), get(100 + i)],
                ..CallSequence::default()
            })
            .collect();
        let links = mine_links(&sequences, 3);
        assert_eq!(links.len(), 1, "{links:?}");
        let link = &links[0];
        assert_eq!((link.transitions, link.from_calls, link.probability), (3, 3, 1.0));
        let projection = link.projection.as_ref().unwrap();
        assert_eq!(
            (projection.path.as_str(), projection.arg.as_str()),
            ("$.issues[*].number", "number")
        );
        assert_eq!((projection.matched, projection.observed), (3, 3));
        assert!(quiver_core::projection::parse(&projection.path).is_ok());
        assert!(mine_links(&sequences, 4).is_empty(), "below the minimum support");
    }

    #[test]
    fn the_same_tool_with_other_arguments_is_a_follow_up_with_its_projection() {
        // A directory listing, then a file in it: the path came from the listing.
        let dir = || {
            call(
                "github.get_file_contents",
                json!({"owner": "o", "repo": "r", "path": "src"}),
                Some(json!([
                    {"type": "file", "path": "src/main.rs", "sha": "a1"},
                    {"type": "file", "path": "src/lib.rs", "sha": "b2"}])),
            )
        };
        let file = |path: &str| {
            call("github.get_file_contents", json!({"owner": "o", "repo": "r", "path": path}), None)
        };
        let sequences: Vec<CallSequence> = ["src/main.rs", "src/lib.rs", "src/main.rs"]
            .iter()
            .enumerate()
            .map(|(i, path)| CallSequence {
                origin: format!("s{i}"),
                calls: vec![dir(), dir(), file(path)],
                ..CallSequence::default()
            })
            .collect();
        let links = mine_links(&sequences, 3);
        assert_eq!(links.len(), 1, "{links:?}");
        let link = &links[0];
        assert_eq!(
            (link.from.as_str(), link.to.as_str()),
            ("github.get_file_contents", "github.get_file_contents")
        );
        assert_eq!((link.transitions, link.from_calls), (3, 6), "the repeated listing counts once");
        let projection = link.projection.as_ref().unwrap();
        assert_eq!((projection.path.as_str(), projection.arg.as_str()), ("$[*].path", "path"));
    }

    #[test]
    fn r7_needs_ten_prefetches_and_disables_below_half() {
        let event = |tool: &str, used: bool| CallEvent {
            args_hash: "h".into(),
            landed_in_time: Some(true),
            cited_in_next_n_turns: Some(used),
            ..CallEvent::new(0, "s", tool, EventKind::Prefetch)
        };
        let mut events: Vec<CallEvent> = (0..10).map(|i| event("a.x", i < 4)).collect();
        events.extend((0..9).map(|_| event("a.y", false)));
        let verdict = r7(&events);
        assert_eq!(verdict.disable, vec!["a.x".to_owned()], "a.y has only 9");
        assert!(!verdict.enable);
        let good: Vec<CallEvent> = (0..10).map(|i| event("a.z", i < 6)).collect();
        assert!(r7(&good).enable, "60% over 10 turns speculation on");
    }
}
