//! Transcripts: list, search, get (with the sentences only when asked for).

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::http::format_unix_time;
use quiver_plugin_sdk::support::json::nullable;
use quiver_plugin_sdk::support::text::truncate;

use crate::client::Subject;
use crate::Fireflies;

/// Transcripts per page when the call does not say.
pub(crate) const DEFAULT_LIMIT: u32 = 20;
/// Fireflies' largest page.
pub(crate) const MAX_LIMIT: u32 = 50;
/// Sentences returned per call when the call does not say.
pub(crate) const DEFAULT_MAX_SENTENCES: u32 = 300;
/// The most sentences one call returns.
pub(crate) const MAX_SENTENCES: u32 = 2000;
/// The most bytes of sentence lines one call returns.
pub(crate) const SENTENCES_MAX_BYTES: usize = 64 * 1024;
/// Longest single sentence returned, in bytes.
pub(crate) const SENTENCE_MAX_BYTES: usize = 1024;
/// Longest overview or outline returned, in bytes.
pub(crate) const SUMMARY_MAX_BYTES: usize = 8 * 1024;
/// Participants kept in a listing item.
const LIST_PARTICIPANTS: usize = 20;
/// Participants kept in a transcript.
const DETAIL_PARTICIPANTS: usize = 50;
/// Action items kept in a transcript.
const MAX_ACTION_ITEMS: usize = 60;

/// What listings and searches select of each transcript.
pub(crate) const LIST_FIELDS: &str =
    "id title date dateString duration organizer_email participants summary { gist }";
/// What `get_transcript` selects, without the sentences.
pub(crate) const DETAIL_FIELDS: &str = "id title date dateString duration organizer_email \
     host_email participants transcript_url speakers { name } \
     summary { overview action_items keywords outline }";
/// The sentences field group, selected only when asked for.
pub(crate) const SENTENCE_FIELDS: &str = "sentences { index speaker_name text start_time }";

// ---------------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------------

/// Arguments of `list_transcripts`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListTranscriptsArgs {
    /// Only meetings on or after this day or time: `2024-07-08` (from midnight UTC) or ISO 8601
    /// `2024-07-08T22:13:46.660Z`.
    #[serde(default, alias = "fromDate")]
    pub(crate) from_date: Option<String>,
    /// Only meetings on or before this day or time: `2024-07-31` (to the end of that day, UTC)
    /// or ISO 8601.
    #[serde(default, alias = "toDate")]
    pub(crate) to_date: Option<String>,
    /// Only meetings with any of these attendee emails, e.g. `["ada@example.com"]` (one email
    /// as a string works too).
    #[serde(default, deserialize_with = "one_or_many", alias = "participant_email")]
    pub(crate) participants: Vec<String>,
    /// Only meetings organised by any of these emails.
    #[serde(default, deserialize_with = "one_or_many", alias = "organizer_email")]
    pub(crate) organizers: Vec<String>,
    /// Only meetings the API key's owner organised.
    #[serde(default)]
    pub(crate) mine: bool,
    /// Meetings per page, newest first: 20 by default, at most 50.
    #[schemars(range(min = 1, max = 50))]
    pub(crate) limit: Option<u32>,
    /// How many meetings to skip: 0 by default; pass the previous page's `next_skip`.
    pub(crate) skip: Option<u32>,
}

/// Where `search_transcripts` looks for the keyword.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SearchScope {
    /// Meeting titles only.
    Title,
    /// The words spoken (the sentences) only.
    Sentences,
    /// Titles and spoken words.
    #[default]
    All,
}

impl SearchScope {
    /// The value Fireflies expects (lowercase).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SearchScope::Title => "title",
            SearchScope::Sentences => "sentences",
            SearchScope::All => "all",
        }
    }
}

/// Arguments of `search_transcripts`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchTranscriptsArgs {
    /// The word or phrase to find, e.g. `pricing` (at most 255 characters).
    #[serde(alias = "query", alias = "q")]
    pub(crate) keyword: String,
    /// Where to look: `all` (titles and spoken words, the default), `title` or `sentences`.
    #[serde(default)]
    pub(crate) scope: Option<SearchScope>,
    /// Only meetings on or after this day or time: `2024-07-08` or ISO 8601.
    #[serde(default, alias = "fromDate")]
    pub(crate) from_date: Option<String>,
    /// Only meetings on or before this day or time: `2024-07-31` or ISO 8601.
    #[serde(default, alias = "toDate")]
    pub(crate) to_date: Option<String>,
    /// Only meetings with any of these attendee emails.
    #[serde(default, deserialize_with = "one_or_many", alias = "participant_email")]
    pub(crate) participants: Vec<String>,
    /// Meetings per page, newest first: 20 by default, at most 50.
    #[schemars(range(min = 1, max = 50))]
    pub(crate) limit: Option<u32>,
    /// How many meetings to skip: 0 by default; pass the previous page's `next_skip`.
    pub(crate) skip: Option<u32>,
}

/// Arguments of `get_transcript`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetTranscriptArgs {
    /// The transcript id, as `list_transcripts` and `search_transcripts` return it.
    #[serde(alias = "transcript_id", alias = "transcriptId")]
    pub(crate) id: String,
    /// Also fetch what was said, as `[mm:ss] Speaker: text` lines (large: only when the summary
    /// and action items do not answer the question). False by default.
    #[serde(default)]
    pub(crate) include_sentences: bool,
    /// With sentences: start at this sentence index (a previous call's `next_sentence_index`).
    pub(crate) sentences_from: Option<u32>,
    /// With sentences: how many to return, 300 by default, at most 2000 (and 64 KiB).
    #[schemars(range(min = 1, max = 2000))]
    pub(crate) max_sentences: Option<u32>,
}

/// A list of strings, or one string (`"ada@example.com"`).
fn one_or_many<'de, D>(deserializer: D) -> Result<Vec<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<OneOrMany>::deserialize(deserializer)? {
        None => Vec::new(),
        Some(OneOrMany::One(s)) => vec![s],
        Some(OneOrMany::Many(v)) => v,
    })
}

// ---------------------------------------------------------------------------------------------
// What Fireflies sends (only the selected fields)
// ---------------------------------------------------------------------------------------------

/// A string, or a list of strings (Fireflies' summary fields have been both).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum TextOrList {
    /// One string, lines separated by `\n`.
    Text(String),
    /// A list; nulls are skipped.
    List(Vec<Option<String>>),
}

impl TextOrList {
    /// The entries: list items, or the non-empty lines of the text.
    fn lines(&self) -> Vec<String> {
        match self {
            TextOrList::Text(t) => t.lines().map(str::to_owned).collect(),
            TextOrList::List(l) => l.iter().flatten().cloned().collect(),
        }
    }

    /// The whole, lists joined by newlines.
    fn text(&self) -> String {
        match self {
            TextOrList::Text(t) => t.clone(),
            TextOrList::List(l) => l.iter().flatten().cloned().collect::<Vec<_>>().join("\n"),
        }
    }
}

/// A transcript as the `transcripts` and `transcript` queries send it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireTranscript {
    id: String,
    #[serde(default)]
    title: Option<String>,
    /// Milliseconds since the epoch (a float).
    #[serde(default)]
    date: Option<Value>,
    #[serde(default, rename = "dateString")]
    date_string: Option<String>,
    /// Minutes (a float).
    #[serde(default)]
    duration: Option<f64>,
    #[serde(default)]
    organizer_email: Option<String>,
    #[serde(default)]
    host_email: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    participants: Vec<Option<String>>,
    #[serde(default)]
    transcript_url: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    speakers: Vec<WireSpeaker>,
    #[serde(default)]
    summary: Option<WireSummary>,
    #[serde(default)]
    sentences: Option<Vec<WireSentence>>,
}

/// A speaker; only the name is kept.
#[derive(Debug, Deserialize)]
pub(crate) struct WireSpeaker {
    #[serde(default)]
    name: Option<String>,
}

/// The AI summary of a meeting.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireSummary {
    #[serde(default)]
    overview: Option<TextOrList>,
    #[serde(default)]
    action_items: Option<TextOrList>,
    #[serde(default)]
    keywords: Option<TextOrList>,
    #[serde(default)]
    outline: Option<TextOrList>,
    #[serde(default)]
    gist: Option<TextOrList>,
}

/// One sentence of the transcript.
#[derive(Debug, Deserialize)]
pub(crate) struct WireSentence {
    #[serde(default)]
    index: Option<f64>,
    #[serde(default)]
    speaker_name: Option<String>,
    #[serde(default)]
    text: Option<String>,
    /// Seconds from the start of the meeting.
    #[serde(default)]
    start_time: Option<f64>,
}

// ---------------------------------------------------------------------------------------------
// What the tools return
// ---------------------------------------------------------------------------------------------

/// One meeting in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TranscriptItem {
    /// The transcript id: pass it to `get_transcript`.
    pub(crate) id: String,
    /// The meeting's title.
    pub(crate) title: Option<String>,
    /// When the meeting took place, ISO 8601 (UTC).
    pub(crate) date: Option<String>,
    /// Length in minutes.
    pub(crate) duration_min: Option<f64>,
    /// The organiser's email.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) organizer: Option<String>,
    /// Attendee emails (the first 20).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) participants: Vec<String>,
    /// How many attendees there were, when the list was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) participants_total: Option<usize>,
    /// A one-sentence summary, when Fireflies made one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) gist: Option<String>,
}

/// Result of `list_transcripts`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TranscriptList {
    /// The meetings of this page, newest first.
    pub(crate) transcripts: Vec<TranscriptItem>,
    /// How many meetings this page holds.
    pub(crate) count: usize,
    /// How many meetings were skipped before this page.
    pub(crate) skip: u32,
    /// Whether more meetings may follow (the page was full).
    pub(crate) more: bool,
    /// The `skip` of the next page, or null on the last page.
    pub(crate) next_skip: Option<u32>,
}

/// Result of `search_transcripts`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SearchResult {
    /// The keyword as sent.
    pub(crate) keyword: String,
    /// Where it was looked for: `title`, `sentences` or `all`.
    pub(crate) scope: SearchScope,
    /// The matching meetings and how to page on.
    #[serde(flatten)]
    pub(crate) page: TranscriptList,
}

/// One action item of a meeting.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub(crate) struct ActionItem {
    /// Who it falls to, as the summary names them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) owner: Option<String>,
    /// What is to be done, with the time in the meeting it was said, e.g. `Send SOW (03:14)`.
    pub(crate) item: String,
}

/// Result of `get_transcript`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TranscriptDetail {
    /// The transcript id.
    pub(crate) id: String,
    /// The meeting's title.
    pub(crate) title: Option<String>,
    /// When the meeting took place, ISO 8601 (UTC).
    pub(crate) date: Option<String>,
    /// Length in minutes.
    pub(crate) duration_min: Option<f64>,
    /// The organiser's email.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) organizer: Option<String>,
    /// The host's email, when it is not the organiser.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) host: Option<String>,
    /// Attendee emails (the first 50).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) participants: Vec<String>,
    /// How many attendees there were, when the list was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) participants_total: Option<usize>,
    /// The names of those who spoke.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) speakers: Vec<String>,
    /// The meeting's page in Fireflies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) transcript_url: Option<String>,
    /// The AI overview of the meeting (cut at 8 KiB, saying so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) overview: Option<String>,
    /// The action items, by owner.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) action_items: Vec<ActionItem>,
    /// Keywords of the meeting.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) keywords: Vec<String>,
    /// The outline, topic by topic with times (cut at 8 KiB).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) outline: Option<String>,
    /// With `include_sentences`: what was said, one `[mm:ss] Speaker: text` line per sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sentences: Option<Vec<String>>,
    /// With `include_sentences`: how many sentences the transcript has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sentences_total: Option<usize>,
    /// With `include_sentences`: the `sentences_from` that reads on, or absent when all were
    /// returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_sentence_index: Option<u32>,
    /// What was cut, and how to get it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Mapping (pure, so tests can run it on recorded responses)
// ---------------------------------------------------------------------------------------------

/// ISO 8601: `dateString`, else the millisecond `date` converted.
pub(crate) fn iso_date(date_string: Option<String>, date: Option<&Value>) -> Option<String> {
    if let Some(s) = date_string.filter(|s| !s.trim().is_empty()) {
        return Some(s);
    }
    match date? {
        Value::Number(n) => n.as_f64().filter(|ms| *ms > 0.0).map(|ms| {
            let secs = (ms / 1000.0) as u64;
            format_unix_time(secs)
        }),
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        _ => None,
    }
}

fn minutes(duration: Option<f64>) -> Option<f64> {
    duration.filter(|d| d.is_finite() && *d >= 0.0).map(|d| (d * 10.0).round() / 10.0)
}

/// Attendee emails: entries split at commas, trimmed, deduplicated; the first `cap`, with the
/// total when cut.
fn emails(raw: Vec<Option<String>>, cap: usize) -> (Vec<String>, Option<usize>) {
    let mut all: Vec<String> = Vec::new();
    for entry in raw.into_iter().flatten() {
        for email in entry.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if !all.iter().any(|e| e.eq_ignore_ascii_case(email)) {
                all.push(email.to_owned());
            }
        }
    }
    let total = all.len();
    all.truncate(cap);
    (all, (total > cap).then_some(total))
}

pub(crate) fn non_empty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// Fireflies' action items (`**Owner**\nItem (03:14)\n\n**Other**\n- Item`) as a list.
pub(crate) fn action_items(raw: Option<&TextOrList>) -> Vec<ActionItem> {
    let Some(raw) = raw else { return Vec::new() };
    let mut owner: Option<String> = None;
    let mut items = Vec::new();
    for line in raw.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bold = line.strip_prefix("**").and_then(|l| l.strip_suffix("**"));
        if let Some(name) = bold.map(str::trim).filter(|n| !n.is_empty() && !n.contains("**")) {
            owner = Some(name.trim_end_matches(':').to_owned());
            continue;
        }
        let mut item = line;
        for marker in ["- [ ] ", "- [x] ", "- ", "* ", "• "] {
            if let Some(rest) = item.strip_prefix(marker) {
                item = rest;
                break;
            }
        }
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        items.push(ActionItem { owner: owner.clone(), item: truncate(item, 500).0 });
        if items.len() == MAX_ACTION_ITEMS {
            break;
        }
    }
    items
}

fn keywords(raw: Option<&TextOrList>) -> Vec<String> {
    let Some(raw) = raw else { return Vec::new() };
    let entries = match raw {
        TextOrList::Text(t) => t.split([',', '\n']).map(str::to_owned).collect(),
        TextOrList::List(_) => raw.lines(),
    };
    let mut out: Vec<String> = Vec::new();
    for k in entries.iter().map(|k| k.trim()).filter(|k| !k.is_empty()) {
        if !out.iter().any(|o| o.eq_ignore_ascii_case(k)) && out.len() < 30 {
            out.push(k.to_owned());
        }
    }
    out
}

fn summary_text(raw: Option<&TextOrList>) -> Option<String> {
    let text = raw?.text();
    let text = text.trim();
    (!text.is_empty()).then(|| truncate(text, SUMMARY_MAX_BYTES).0)
}

/// `[mm:ss]`, or `[h:mm:ss]` from an hour on.
pub(crate) fn timestamp(seconds: Option<f64>) -> String {
    let Some(s) = seconds.filter(|s| s.is_finite() && *s >= 0.0) else {
        return "[--:--]".to_owned();
    };
    let s = s as u64;
    if s >= 3600 {
        format!("[{}:{:02}:{:02}]", s / 3600, s % 3600 / 60, s % 60)
    } else {
        format!("[{:02}:{:02}]", s / 60, s % 60)
    }
}

fn list_item(t: WireTranscript) -> TranscriptItem {
    let (participants, participants_total) = emails(t.participants, LIST_PARTICIPANTS);
    TranscriptItem {
        id: t.id,
        title: non_empty(t.title),
        date: iso_date(t.date_string, t.date.as_ref()),
        duration_min: minutes(t.duration),
        organizer: non_empty(t.organizer_email),
        participants,
        participants_total,
        gist: t.summary.as_ref().and_then(|s| summary_text(s.gist.as_ref())),
    }
}

/// The `list_transcripts` page for the transcripts Fireflies sent.
pub(crate) fn transcript_list(page: Vec<WireTranscript>, skip: u32, limit: u32) -> TranscriptList {
    let count = page.len();
    let more = count as u32 >= limit;
    TranscriptList {
        transcripts: page.into_iter().map(list_item).collect(),
        count,
        skip,
        more,
        next_skip: more.then(|| skip.saturating_add(count as u32)),
    }
}

/// Which sentences `get_transcript` returns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SentenceWindow {
    /// The first sentence index returned.
    pub(crate) from: u32,
    /// The most sentences returned.
    pub(crate) max: u32,
}

/// The `get_transcript` result; `window` is `None` when sentences were not asked for.
pub(crate) fn transcript_detail(
    t: WireTranscript,
    window: Option<SentenceWindow>,
) -> TranscriptDetail {
    let (participants, participants_total) = emails(t.participants, DETAIL_PARTICIPANTS);
    let organizer = non_empty(t.organizer_email);
    let host = non_empty(t.host_email)
        .filter(|h| !organizer.as_ref().is_some_and(|o| o.eq_ignore_ascii_case(h)));
    let mut speakers: Vec<String> = Vec::new();
    for name in t.speakers.into_iter().filter_map(|s| non_empty(s.name)) {
        if !speakers.contains(&name) {
            speakers.push(name);
        }
    }
    let summary = t.summary.unwrap_or_default();
    let mut detail = TranscriptDetail {
        id: t.id,
        title: non_empty(t.title),
        date: iso_date(t.date_string, t.date.as_ref()),
        duration_min: minutes(t.duration),
        organizer,
        host,
        participants,
        participants_total,
        speakers,
        transcript_url: non_empty(t.transcript_url),
        overview: summary_text(summary.overview.as_ref()),
        action_items: action_items(summary.action_items.as_ref()),
        keywords: keywords(summary.keywords.as_ref()),
        outline: summary_text(summary.outline.as_ref()),
        sentences: None,
        sentences_total: None,
        next_sentence_index: None,
        note: None,
    };
    if let Some(window) = window {
        add_sentences(&mut detail, t.sentences.unwrap_or_default(), window);
    }
    detail
}

fn add_sentences(detail: &mut TranscriptDetail, sentences: Vec<WireSentence>, w: SentenceWindow) {
    let total = sentences.len();
    let indexed: Vec<(u32, WireSentence)> = sentences
        .into_iter()
        .enumerate()
        .map(|(i, s)| (s.index.filter(|x| *x >= 0.0).map(|x| x as u32).unwrap_or(i as u32), s))
        .collect();
    let mut lines = Vec::new();
    let mut bytes = 0;
    let mut next = None;
    let mut cut_long = 0;
    for (index, s) in indexed.iter().filter(|(index, _)| *index >= w.from) {
        if lines.len() as u32 >= w.max.max(1) {
            next = Some(*index);
            break;
        }
        let (text, cut) = truncate(s.text.as_deref().unwrap_or("").trim(), SENTENCE_MAX_BYTES);
        cut_long += usize::from(cut.is_some());
        let speaker = s.speaker_name.as_deref().map(str::trim).filter(|n| !n.is_empty());
        let line = format!("{} {}: {text}", timestamp(s.start_time), speaker.unwrap_or("?"));
        if bytes + line.len() > SENTENCES_MAX_BYTES && !lines.is_empty() {
            next = Some(*index);
            break;
        }
        bytes += line.len() + 3;
        lines.push(line);
    }
    let returned = lines.len();
    let mut notes = Vec::new();
    if let Some(n) = next {
        notes.push(format!(
            "{returned} of {total} sentences returned (from index {}); call again with \
             sentences_from={n} for more",
            w.from
        ));
    } else if returned == 0 && total > 0 {
        notes
            .push(format!("no sentence at or after index {} (the transcript has {total})", w.from));
    } else if total == 0 {
        notes.push("fireflies has no sentences for this meeting (yet)".to_owned());
    }
    if cut_long > 0 {
        notes.push(format!("{cut_long} long sentences cut at 1 KiB"));
    }
    detail.sentences = Some(lines);
    detail.sentences_total = Some(total);
    detail.next_sentence_index = next;
    detail.note = (!notes.is_empty()).then(|| notes.join("; "));
}

// ---------------------------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------------------------

/// A query's variables and the arguments that use them, so only what a call sets is sent.
#[derive(Debug, Default)]
pub(crate) struct Arguments {
    declarations: Vec<String>,
    uses: Vec<String>,
    variables: Map<String, Value>,
}

impl Arguments {
    /// Passes `value` as argument `arg` through variable `$var` of GraphQL type `ty`.
    pub(crate) fn add(&mut self, arg: &str, var: &str, ty: &str, value: Value) {
        self.declarations.push(format!("${var}: {ty}"));
        self.uses.push(format!("{arg}: ${var}"));
        self.variables.insert(var.to_owned(), value);
    }

    /// `query Op($a: T) { root(a: $a) { fields } }` and its variables.
    pub(crate) fn render(self, operation: &str, root: &str, fields: &str) -> (String, Value) {
        self.render_as("query", operation, root, fields)
    }

    /// `mutation Op($a: T) { root(a: $a) { fields } }` and its variables.
    pub(crate) fn render_mutation(
        self,
        operation: &str,
        root: &str,
        fields: &str,
    ) -> (String, Value) {
        self.render_as("mutation", operation, root, fields)
    }

    fn render_as(self, kind: &str, operation: &str, root: &str, fields: &str) -> (String, Value) {
        let (decl, uses) = if self.declarations.is_empty() {
            (String::new(), String::new())
        } else {
            (format!("({})", self.declarations.join(", ")), format!("({})", self.uses.join(", ")))
        };
        let query = format!("{kind} {operation}{decl} {{ {root}{uses} {{ {fields} }} }}");
        (query, Value::Object(self.variables))
    }
}

/// `2024-07-08` → `2024-07-08T00:00:00.000Z` (or the end of that day for `to`); ISO 8601 times
/// pass as given.
pub(crate) fn date_argument(
    field: &str,
    value: &str,
    end_of_day: bool,
) -> Result<String, ToolError> {
    let v = value.trim();
    let b = v.as_bytes();
    let is_day = |b: &[u8]| {
        b.len() >= 10
            && b[4] == b'-'
            && b[7] == b'-'
            && b[..4].iter().chain(&b[5..7]).chain(&b[8..10]).all(u8::is_ascii_digit)
    };
    if b.len() == 10 && is_day(b) {
        let time = if end_of_day { "T23:59:59.999Z" } else { "T00:00:00.000Z" };
        return Ok(format!("{v}{time}"));
    }
    if b.len() > 10 && is_day(b) && matches!(b[10], b'T' | b't' | b' ') && b.len() <= 40 {
        return Ok(v.replacen(' ', "T", 1));
    }
    Err(ToolError::invalid_arguments(format!(
        "`{field}` must be a day `2024-07-08` or an ISO 8601 time `2024-07-08T22:13:46.660Z`; got \
         `{value}`"
    )))
}

pub(crate) fn check_emails(field: &str, emails: &[String]) -> Result<Vec<String>, ToolError> {
    emails
        .iter()
        .map(|e| e.trim())
        .filter(|e| !e.is_empty())
        .map(|e| {
            let ok = e.len() <= 256 && e.contains('@') && !e.contains(char::is_whitespace);
            if ok {
                Ok(e.to_owned())
            } else {
                Err(ToolError::invalid_arguments(format!(
                    "`{field}` takes email addresses, e.g. `ada@example.com`; got `{e}`"
                )))
            }
        })
        .collect()
}

/// The shared filters of listings and searches.
fn filters(
    args: &mut Arguments,
    from_date: Option<&str>,
    to_date: Option<&str>,
    participants: &[String],
) -> Result<(), ToolError> {
    let from = from_date.map(|d| date_argument("from_date", d, false)).transpose()?;
    let to = to_date.map(|d| date_argument("to_date", d, true)).transpose()?;
    if let (Some(f), Some(t)) = (&from, &to) {
        if f > t {
            return Err(ToolError::invalid_arguments(format!(
                "`from_date` ({f}) is after `to_date` ({t})"
            )));
        }
    }
    if let Some(from) = from {
        args.add("fromDate", "fromDate", "DateTime", json!(from));
    }
    if let Some(to) = to {
        args.add("toDate", "toDate", "DateTime", json!(to));
    }
    let participants = check_emails("participants", participants)?;
    if !participants.is_empty() {
        args.add("participants", "participants", "[String!]", json!(participants));
    }
    Ok(())
}

fn paging(args: &mut Arguments, limit: Option<u32>, skip: Option<u32>) -> (u32, u32) {
    let limit = limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let skip = skip.unwrap_or(0);
    args.add("limit", "limit", "Int", json!(limit));
    args.add("skip", "skip", "Int", json!(skip));
    (limit, skip)
}

/// The `transcripts` query of `list_transcripts`: `(query, variables, limit, skip)`.
pub(crate) fn list_query(a: &ListTranscriptsArgs) -> Result<(String, Value, u32, u32), ToolError> {
    let mut args = Arguments::default();
    filters(&mut args, a.from_date.as_deref(), a.to_date.as_deref(), &a.participants)?;
    let organizers = check_emails("organizers", &a.organizers)?;
    if !organizers.is_empty() {
        args.add("organizers", "organizers", "[String!]", json!(organizers));
    }
    if a.mine {
        args.add("mine", "mine", "Boolean", json!(true));
    }
    let (limit, skip) = paging(&mut args, a.limit, a.skip);
    let (query, variables) = args.render("ListTranscripts", "transcripts", LIST_FIELDS);
    Ok((query, variables, limit, skip))
}

/// The `transcripts` query of `search_transcripts`: `(query, variables, limit, skip)`.
pub(crate) fn search_query(
    a: &SearchTranscriptsArgs,
    scope: SearchScope,
) -> Result<(String, Value, u32, u32), ToolError> {
    let keyword = a.keyword.trim();
    if keyword.is_empty() {
        return Err(ToolError::invalid_arguments(
            "`keyword` is empty; give a word or phrase to find, e.g. `pricing`",
        ));
    }
    if keyword.chars().count() > 255 {
        return Err(ToolError::invalid_arguments(
            "`keyword` is longer than Fireflies' 255 characters; search for a shorter phrase",
        ));
    }
    let mut args = Arguments::default();
    args.add("keyword", "keyword", "String", json!(keyword));
    args.add("scope", "scope", "String", json!(scope.as_str()));
    filters(&mut args, a.from_date.as_deref(), a.to_date.as_deref(), &a.participants)?;
    let (limit, skip) = paging(&mut args, a.limit, a.skip);
    let (query, variables) = args.render("SearchTranscripts", "transcripts", LIST_FIELDS);
    Ok((query, variables, limit, skip))
}

/// The `transcript` query of `get_transcript`, with the sentences when asked for.
pub(crate) fn get_query(id: &str, with_sentences: bool) -> (String, Value) {
    let mut args = Arguments::default();
    args.add("id", "id", "String!", json!(id));
    let fields = if with_sentences {
        format!("{DETAIL_FIELDS} {SENTENCE_FIELDS}")
    } else {
        DETAIL_FIELDS.to_owned()
    };
    args.render("GetTranscript", "transcript", &fields)
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

impl Fireflies {
    async fn list_transcripts(
        &self,
        a: ListTranscriptsArgs,
        ctx: &ToolContext,
    ) -> Result<TranscriptList, ToolError> {
        let (query, variables, limit, skip) = list_query(&a)?;
        let subject = Subject::listing("the transcript listing");
        let page: Option<Vec<WireTranscript>> =
            self.client.query(&query, variables, "transcripts", &subject, ctx).await?;
        Ok(transcript_list(page.unwrap_or_default(), skip, limit))
    }

    async fn search_transcripts(
        &self,
        a: SearchTranscriptsArgs,
        ctx: &ToolContext,
    ) -> Result<SearchResult, ToolError> {
        let scope = a.scope.unwrap_or_default();
        let (query, variables, limit, skip) = search_query(&a, scope)?;
        let keyword = a.keyword.trim().to_owned();
        let subject = Subject::listing(format!("the transcript search `{keyword}`"));
        let page: Option<Vec<WireTranscript>> =
            self.client.query(&query, variables, "transcripts", &subject, ctx).await?;
        Ok(SearchResult {
            keyword,
            scope,
            page: transcript_list(page.unwrap_or_default(), skip, limit),
        })
    }

    async fn get_transcript(
        &self,
        a: GetTranscriptArgs,
        ctx: &ToolContext,
    ) -> Result<TranscriptDetail, ToolError> {
        let id = a.id.trim();
        let valid = !id.is_empty()
            && id.len() <= 128
            && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
        if !valid {
            return Err(ToolError::invalid_arguments(format!(
                "`id` must be a Fireflies transcript id (letters and digits, as \
                 list_transcripts returns it); got `{}`",
                a.id
            )));
        }
        let window = (a.include_sentences || a.sentences_from.is_some()).then(|| SentenceWindow {
            from: a.sentences_from.unwrap_or(0),
            max: a.max_sentences.unwrap_or(DEFAULT_MAX_SENTENCES).clamp(1, MAX_SENTENCES),
        });
        let (query, variables) = get_query(id, window.is_some());
        let subject = Subject::transcript(id);
        let transcript: Option<WireTranscript> =
            self.client.query(&query, variables, "transcript", &subject, ctx).await?;
        let transcript = transcript.ok_or_else(|| {
            ToolError::not_found(format!(
                "no transcript `{id}` in fireflies (or the API key's user cannot see it)"
            ))
        })?;
        Ok(transcript_detail(transcript, window))
    }
}

register_tool! {
    provider: Fireflies,
    name: "list_transcripts",
    group: "transcripts",
    description: "List meeting transcripts newest first, with title, date, duration, organizer, \
                  participants and a one-line gist; filter by date range, participant or \
                  organizer emails, or your own meetings. Returns `more` and `next_skip` for the \
                  next page; open one with get_transcript.",
    input: ListTranscriptsArgs,
    output: TranscriptList,
    handler: Fireflies::list_transcripts,
}

register_tool! {
    provider: Fireflies,
    name: "search_transcripts",
    group: "transcripts",
    description: "Find meetings whose title and/or spoken words contain a keyword (scope `all`, \
                  `title` or `sentences`), newest first, optionally within a date range or with \
                  given participants. Returns `more` and `next_skip`; open one with \
                  get_transcript.",
    input: SearchTranscriptsArgs,
    output: SearchResult,
    handler: Fireflies::search_transcripts,
}

register_tool! {
    provider: Fireflies,
    name: "get_transcript",
    group: "transcripts",
    description: "Get one meeting by id: overview, action items by owner, keywords, outline, \
                  participants and speakers. What was said comes only with \
                  `include_sentences: true` (as `[mm:ss] Speaker: text` lines, 300 at a time; \
                  `sentences_from` reads on).",
    input: GetTranscriptArgs,
    output: TranscriptDetail,
    handler: Fireflies::get_transcript,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/../../tests/data/fireflies/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn wire(name: &str, root: &str) -> Value {
        fixture(name)["data"][root].clone()
    }

    #[test]
    fn action_items_are_split_by_owner() {
        let raw = TextOrList::Text(
            "**Jordan Vale**\n- [ ] Send SOW (03:14)\nShare the deck (05:40)\n\n**Priya**\n\
             Book the venue (12:01)\n"
                .into(),
        );
        assert_eq!(
            action_items(Some(&raw)),
            [
                ActionItem { owner: Some("Jordan Vale".into()), item: "Send SOW (03:14)".into() },
                ActionItem {
                    owner: Some("Jordan Vale".into()),
                    item: "Share the deck (05:40)".into()
                },
                ActionItem { owner: Some("Priya".into()), item: "Book the venue (12:01)".into() },
            ]
        );
        let list = TextOrList::List(vec![Some("Call Bob".into()), None]);
        assert_eq!(
            action_items(Some(&list)),
            [ActionItem { owner: None, item: "Call Bob".into() }]
        );
        assert!(action_items(None).is_empty());
    }

    #[test]
    fn dates_durations_and_participants_are_made_compact() {
        assert_eq!(
            iso_date(None, Some(&json!(1_720_476_826_660.0_f64))).as_deref(),
            Some("2024-07-08T22:13:46Z")
        );
        assert_eq!(
            iso_date(Some("2024-07-08T22:13:46.660Z".into()), None).as_deref(),
            Some("2024-07-08T22:13:46.660Z")
        );
        assert_eq!(minutes(Some(31.666)), Some(31.7));
        let (list, total) = emails(
            vec![
                Some("a@x.com, b@y.com".into()),
                None,
                Some("A@x.com".into()),
                Some("c@z.com".into()),
            ],
            2,
        );
        assert_eq!(list, ["a@x.com", "b@y.com"]);
        assert_eq!(total, Some(3));
        assert_eq!(timestamp(Some(75.4)), "[01:15]");
        assert_eq!(timestamp(Some(3725.0)), "[1:02:05]");
    }

    #[test]
    fn dates_in_arguments_become_fireflies_date_times() {
        assert_eq!(
            date_argument("from_date", "2024-07-08", false).unwrap(),
            "2024-07-08T00:00:00.000Z"
        );
        assert_eq!(
            date_argument("to_date", "2024-07-08", true).unwrap(),
            "2024-07-08T23:59:59.999Z"
        );
        assert_eq!(
            date_argument("from_date", "2024-07-08T22:13:46.660Z", false).unwrap(),
            "2024-07-08T22:13:46.660Z"
        );
        let e = date_argument("from_date", "last week", false).unwrap_err();
        assert!(e.message.contains("`from_date` must be a day"), "{}", e.message);
        let a = ListTranscriptsArgs {
            from_date: Some("2024-08-01".into()),
            to_date: Some("2024-07-01".into()),
            ..Default::default()
        };
        assert!(list_query(&a).unwrap_err().message.contains("is after"));
    }

    #[test]
    fn queries_declare_only_the_arguments_a_call_sets() {
        let (query, variables, limit, skip) = list_query(&ListTranscriptsArgs::default()).unwrap();
        assert_eq!(
            query,
            "query ListTranscripts($limit: Int, $skip: Int) { transcripts(limit: $limit, skip: \
             $skip) { id title date dateString duration organizer_email participants summary { \
             gist } } }"
        );
        assert_eq!(variables, json!({"limit": 20, "skip": 0}));
        assert_eq!((limit, skip), (20, 0));
        let (query, _) = get_query("abc", false);
        assert!(!query.contains("sentences"), "{query}");
        let (query, variables) = get_query("abc", true);
        assert!(query.contains("sentences { index speaker_name text start_time }"), "{query}");
        assert_eq!(variables, json!({"id": "abc"}));
    }

    #[test]
    fn a_recorded_transcript_maps_to_a_compact_detail() {
        let t: WireTranscript =
            serde_json::from_value(wire("transcript.json", "transcript")).unwrap();
        let d = transcript_detail(t, None);
        assert_eq!(d.id, "01J2XKQ4TV7Z8R5M9N3B6C1D0E");
        assert!(d.sentences.is_none() && d.note.is_none());
        assert_eq!(d.action_items[0].owner.as_deref(), Some("Jordan Vale"));
        assert!(d.host.is_none(), "the host is the organiser");
    }

    #[test]
    fn sentences_are_windowed_and_say_how_to_read_on() {
        let t: WireTranscript =
            serde_json::from_value(wire("transcript_with_sentences.json", "transcript")).unwrap();
        let d = transcript_detail(t, Some(SentenceWindow { from: 2, max: 3 }));
        let lines = d.sentences.unwrap();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("[00:"), "{}", lines[0]);
        assert_eq!(d.sentences_total, Some(8));
        assert_eq!(d.next_sentence_index, Some(5));
        assert!(d.note.unwrap().contains("sentences_from=5"));
    }
}
