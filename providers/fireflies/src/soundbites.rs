//! Soundbites (Fireflies calls them bites): short clips of a meeting, listed by owner, team or
//! transcript, and one clip with what was said in it.

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::json::nullable;
use quiver_plugin_sdk::support::text::truncate;

use crate::client::Subject;
use crate::transcripts::{iso_date, non_empty, timestamp, Arguments, DEFAULT_LIMIT, MAX_LIMIT};
use crate::users::check_id;
use crate::Fireflies;

/// What `list_soundbites` selects of each bite.
pub(crate) const BITE_FIELDS: &str = "id transcript_id name start_time end_time status summary \
     media_type created_at privacies user { name }";
/// What `get_soundbite` selects: the listing's fields and the captions.
pub(crate) const BITE_DETAIL_FIELDS: &str = "id transcript_id name start_time end_time status \
     summary media_type created_at privacies user { name } \
     captions { index speaker_name start_time text }";
/// Longest bite summary returned, in bytes.
const BITE_SUMMARY_MAX_BYTES: usize = 1024;
/// The most caption lines returned.
const MAX_CAPTIONS: usize = 200;
/// Longest caption line returned, in bytes.
const CAPTION_MAX_BYTES: usize = 1024;

/// Arguments of `list_soundbites`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListSoundbitesArgs {
    /// Only the soundbites of this meeting (`id` from `list_transcripts`).
    #[serde(default, alias = "transcriptId")]
    pub(crate) transcript_id: Option<String>,
    /// Only the API key owner's soundbites. When neither `transcript_id` nor `my_team` is
    /// given, this is the default.
    pub(crate) mine: Option<bool>,
    /// The soundbites of the API key owner's team.
    #[serde(default)]
    pub(crate) my_team: bool,
    /// Soundbites per page: 20 by default, at most 50.
    #[schemars(range(min = 1, max = 50))]
    pub(crate) limit: Option<u32>,
    /// How many to skip: 0 by default; pass the previous page's `next_skip`.
    pub(crate) skip: Option<u32>,
}

/// Arguments of `get_soundbite`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetSoundbiteArgs {
    /// The soundbite id, as `list_soundbites` returns it.
    #[serde(alias = "bite_id", alias = "soundbite_id")]
    pub(crate) id: String,
}

/// A bite as the `bites` and `bite` queries send it.
#[derive(Debug, Deserialize)]
pub(crate) struct WireBite {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    transcript_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    /// Seconds into the meeting: a number, or a number in a string.
    #[serde(default)]
    start_time: Option<Value>,
    #[serde(default)]
    end_time: Option<Value>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    media_type: Option<String>,
    /// ISO 8601, or epoch milliseconds.
    #[serde(default)]
    created_at: Option<Value>,
    #[serde(default, deserialize_with = "nullable")]
    privacies: Vec<Option<String>>,
    #[serde(default)]
    user: Option<WireBiteUser>,
    #[serde(default, deserialize_with = "nullable")]
    captions: Vec<WireCaption>,
}

#[derive(Debug, Deserialize)]
struct WireBiteUser {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireCaption {
    #[serde(default)]
    speaker_name: Option<String>,
    #[serde(default)]
    start_time: Option<Value>,
    #[serde(default)]
    text: Option<String>,
}

/// One soundbite.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SoundbiteItem {
    /// The soundbite id, for `get_soundbite`.
    pub(crate) id: String,
    /// Its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    /// The meeting it was cut from, for `get_transcript`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) transcript_id: Option<String>,
    /// Where in the meeting: `[03:14]-[04:02]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) span: Option<String>,
    /// `pending`, `processing`, `ready` or `error`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<String>,
    /// `audio` or `video`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) media_type: Option<String>,
    /// What it is about (cut at 1 KiB).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) summary: Option<String>,
    /// Who made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) created_by: Option<String>,
    /// When, ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) created_at: Option<String>,
    /// Who may see it: `public`, `team`, `participants`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) privacies: Vec<String>,
}

/// Result of `list_soundbites`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SoundbiteList {
    /// The soundbites of this page.
    pub(crate) soundbites: Vec<SoundbiteItem>,
    /// How many this page holds.
    pub(crate) count: usize,
    /// How many were skipped before this page.
    pub(crate) skip: u32,
    /// Whether more may follow (the page was full).
    pub(crate) more: bool,
    /// The `skip` of the next page, or null on the last page.
    pub(crate) next_skip: Option<u32>,
}

/// Result of `get_soundbite`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SoundbiteDetail {
    /// Id, name, meeting, span, status and summary.
    #[serde(flatten)]
    pub(crate) bite: SoundbiteItem,
    /// What was said, one `[mm:ss] Speaker: text` line per caption (the first 200).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) captions: Vec<String>,
    /// What was cut, when something was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
}

fn seconds(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|s: &f64| s.is_finite() && *s >= 0.0)
}

fn bite_item(b: &WireBite) -> SoundbiteItem {
    let (start, end) = (seconds(b.start_time.as_ref()), seconds(b.end_time.as_ref()));
    let span = match (start, end) {
        (Some(_), Some(_)) => Some(format!("{}-{}", timestamp(start), timestamp(end))),
        (Some(_), None) => Some(timestamp(start)),
        _ => None,
    };
    // ISO 8601 passes as is; epoch milliseconds, as a number or in a string, are converted.
    let created_at = match &b.created_at {
        Some(Value::String(s)) => match s.trim().parse::<f64>() {
            Ok(ms) => iso_date(None, Some(&json!(ms))),
            Err(_) => non_empty(Some(s.clone())),
        },
        other => iso_date(None, other.as_ref()),
    };
    SoundbiteItem {
        id: b.id.clone().unwrap_or_default(),
        name: non_empty(b.name.clone()),
        transcript_id: non_empty(b.transcript_id.clone()),
        span,
        status: non_empty(b.status.clone()),
        media_type: non_empty(b.media_type.clone()),
        summary: non_empty(b.summary.clone()).map(|s| truncate(&s, BITE_SUMMARY_MAX_BYTES).0),
        created_by: b.user.as_ref().and_then(|u| non_empty(u.name.clone())),
        created_at,
        privacies: b.privacies.iter().flatten().filter(|p| !p.is_empty()).cloned().collect(),
    }
}

/// The `list_soundbites` page for the bites Fireflies sent.
pub(crate) fn soundbite_list(bites: Vec<WireBite>, skip: u32, limit: u32) -> SoundbiteList {
    let count = bites.len();
    let more = count as u32 >= limit;
    SoundbiteList {
        soundbites: bites.iter().map(bite_item).collect(),
        count,
        skip,
        more,
        next_skip: more.then(|| skip.saturating_add(count as u32)),
    }
}

/// The `get_soundbite` result.
pub(crate) fn soundbite_detail(b: WireBite) -> SoundbiteDetail {
    let total = b.captions.len();
    let captions = b
        .captions
        .iter()
        .take(MAX_CAPTIONS)
        .map(|c| {
            let speaker = c.speaker_name.as_deref().map(str::trim).filter(|n| !n.is_empty());
            let text = truncate(c.text.as_deref().unwrap_or("").trim(), CAPTION_MAX_BYTES).0;
            format!(
                "{} {}: {text}",
                timestamp(seconds(c.start_time.as_ref())),
                speaker.unwrap_or("?")
            )
        })
        .collect();
    let note = (total > MAX_CAPTIONS).then(|| {
        format!(
            "{MAX_CAPTIONS} of {total} captions returned; get_transcript with include_sentences \
             has the whole meeting"
        )
    });
    SoundbiteDetail { bite: bite_item(&b), captions, note }
}

/// The `bites` query of `list_soundbites`: `(query, variables, limit, skip)`.
pub(crate) fn list_query(a: &ListSoundbitesArgs) -> Result<(String, Value, u32, u32), ToolError> {
    let mut args = Arguments::default();
    let transcript = a
        .transcript_id
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .map(|t| check_id("transcript_id", t, "list_transcripts"))
        .transpose()?;
    // Fireflies answers `args_required` unless one of the three scopes is given.
    let mine = a.mine.or((transcript.is_none() && !a.my_team).then_some(true));
    if let Some(mine) = mine {
        args.add("mine", "mine", "Boolean", json!(mine));
    }
    if let Some(transcript) = transcript {
        args.add("transcript_id", "transcriptId", "ID", json!(transcript));
    }
    if a.my_team {
        args.add("my_team", "myTeam", "Boolean", json!(true));
    }
    let limit = a.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let skip = a.skip.unwrap_or(0);
    args.add("limit", "limit", "Int", json!(limit));
    args.add("skip", "skip", "Int", json!(skip));
    let (query, variables) = args.render("Bites", "bites", BITE_FIELDS);
    Ok((query, variables, limit, skip))
}

impl Fireflies {
    async fn list_soundbites(
        &self,
        a: ListSoundbitesArgs,
        ctx: &ToolContext,
    ) -> Result<SoundbiteList, ToolError> {
        let (query, variables, limit, skip) = list_query(&a)?;
        let subject = Subject::listing("the soundbite listing");
        let bites: Option<Vec<WireBite>> =
            self.client.query(&query, variables, "bites", &subject, ctx).await?;
        Ok(soundbite_list(bites.unwrap_or_default(), skip, limit))
    }

    async fn get_soundbite(
        &self,
        a: GetSoundbiteArgs,
        ctx: &ToolContext,
    ) -> Result<SoundbiteDetail, ToolError> {
        let id = check_id("id", &a.id, "list_soundbites")?;
        let mut args = Arguments::default();
        args.add("id", "id", "ID!", json!(id));
        let (query, variables) = args.render("Bite", "bite", BITE_DETAIL_FIELDS);
        let subject = Subject::object("soundbite", &id);
        let bite: Option<WireBite> =
            self.client.query(&query, variables, "bite", &subject, ctx).await?;
        let bite = bite.ok_or_else(|| {
            ToolError::not_found(format!(
                "no soundbite `{id}` in fireflies (or the API key's user cannot see it)"
            ))
        })?;
        Ok(soundbite_detail(bite))
    }
}

register_tool! {
    provider: Fireflies,
    name: "list_soundbites",
    group: "soundbites",
    description: "List Fireflies soundbites (short meeting clips): your own by default, your \
                  team's, or those of one meeting; with name, meeting id, time span, status and \
                  summary. Returns `more` and `next_skip`; open one with get_soundbite.",
    input: ListSoundbitesArgs,
    output: SoundbiteList,
    handler: Fireflies::list_soundbites,
}

register_tool! {
    provider: Fireflies,
    name: "get_soundbite",
    group: "soundbites",
    description: "Get one Fireflies soundbite by id: name, meeting, time span, summary and what \
                  was said in it as `[mm:ss] Speaker: text` lines.",
    input: GetSoundbiteArgs,
    output: SoundbiteDetail,
    handler: Fireflies::get_soundbite,
}
