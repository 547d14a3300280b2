//! Uploads: hand Fireflies a public media URL to transcribe (the `uploadAudio` mutation).

use quiver_plugin_sdk::prelude::*;

use crate::client::Subject;
use crate::transcripts::{check_emails, non_empty, Arguments};
use crate::Fireflies;

/// Longest title Fireflies takes, in characters.
const TITLE_MAX_CHARS: usize = 256;
/// The most attendees Fireflies takes.
const MAX_ATTENDEES: usize = 100;

/// An attendee of the uploaded meeting (Fireflies pushes the notes to CRM integrations by
/// them).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AttendeeArg {
    /// The attendee's name as meeting platforms show it.
    #[serde(default, alias = "displayName", alias = "display_name")]
    pub(crate) name: Option<String>,
    /// The attendee's email.
    #[serde(default)]
    pub(crate) email: Option<String>,
    /// The attendee's phone number.
    #[serde(default, alias = "phoneNumber", alias = "phone_number")]
    pub(crate) phone: Option<String>,
}

/// Arguments of `upload_audio`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UploadAudioArgs {
    /// A public `https://` URL of the recording (mp3, mp4, wav, m4a or ogg) that Fireflies can
    /// download without signing in — not a preview page.
    pub(crate) url: String,
    /// The meeting's title, by which the transcript is found later.
    pub(crate) title: String,
    /// A language code for the meeting, e.g. `es` or `de` (Fireflies detects it otherwise).
    #[serde(default, alias = "custom_language")]
    pub(crate) language: Option<String>,
    /// Keep the video of a video file (paid plans).
    pub(crate) save_video: Option<bool>,
    /// An `https://` URL Fireflies calls when the transcript is ready.
    pub(crate) webhook: Option<String>,
    /// The meeting's attendees.
    #[serde(default)]
    pub(crate) attendees: Vec<AttendeeArg>,
    /// Your own id for this upload, sent back in the webhook.
    pub(crate) client_reference_id: Option<String>,
}

/// `uploadAudio { success title message }`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireUploadStatus {
    #[serde(default)]
    success: Option<bool>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// Result of `upload_audio`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct UploadQueued {
    /// The title the transcript will carry.
    pub(crate) title: String,
    /// Fireflies' answer, e.g. `Uploaded audio has been queued for processing.`
    pub(crate) message: Option<String>,
    /// What happens next.
    pub(crate) next: String,
}

fn check_https(field: &str, value: &str) -> Result<String, ToolError> {
    let v = value.trim();
    let ok = v.len() > "https://".len()
        && v.get(..8).is_some_and(|s| s.eq_ignore_ascii_case("https://"))
        && !v.contains(char::is_whitespace);
    if ok {
        Ok(v.to_owned())
    } else {
        Err(ToolError::invalid_arguments(format!(
            "`{field}` must be a public https:// URL that Fireflies can download; got `{value}`"
        )))
    }
}

/// The `uploadAudio` mutation and its variables.
pub(crate) fn upload_mutation(a: &UploadAudioArgs) -> Result<(String, Value), ToolError> {
    let url = check_https("url", &a.url)?;
    let title = a.title.trim();
    if title.is_empty() || title.chars().count() > TITLE_MAX_CHARS {
        return Err(ToolError::invalid_arguments(format!(
            "`title` must be 1 to {TITLE_MAX_CHARS} characters; give the meeting's name"
        )));
    }
    let mut input = Map::new();
    input.insert("url".into(), json!(url));
    input.insert("title".into(), json!(title));
    if let Some(webhook) = &a.webhook {
        input.insert("webhook".into(), json!(check_https("webhook", webhook)?));
    }
    if let Some(language) = non_empty(a.language.clone()) {
        let ok =
            language.len() <= 5 && language.chars().all(|c| c.is_ascii_alphabetic() || c == '-');
        if !ok {
            return Err(ToolError::invalid_arguments(format!(
                "`language` must be a language code such as `es` or `de`; got `{language}`"
            )));
        }
        input.insert("custom_language".into(), json!(language));
    }
    if let Some(save_video) = a.save_video {
        input.insert("save_video".into(), json!(save_video));
    }
    if let Some(reference) = non_empty(a.client_reference_id.clone()) {
        input.insert("client_reference_id".into(), json!(reference));
    }
    if a.attendees.len() > MAX_ATTENDEES {
        return Err(ToolError::invalid_arguments(format!(
            "Fireflies takes at most {MAX_ATTENDEES} attendees; got {}",
            a.attendees.len()
        )));
    }
    let mut attendees = Vec::new();
    for attendee in &a.attendees {
        // Fireflies validates a present email, so an empty one would fail the whole upload.
        let mut entry = Map::new();
        if let Some(name) = non_empty(attendee.name.clone()) {
            entry.insert("displayName".into(), json!(name));
        }
        if let Some(email) = non_empty(attendee.email.clone()) {
            let email = check_emails("attendees", &[email])?.remove(0);
            entry.insert("email".into(), json!(email));
        }
        if let Some(phone) = non_empty(attendee.phone.clone()) {
            entry.insert("phoneNumber".into(), json!(phone));
        }
        if !entry.is_empty() {
            attendees.push(Value::Object(entry));
        }
    }
    if !attendees.is_empty() {
        input.insert("attendees".into(), Value::Array(attendees));
    }
    let mut args = Arguments::default();
    args.add("input", "input", "AudioUploadInput", Value::Object(input));
    Ok(args.render_mutation("UploadAudio", "uploadAudio", "success title message"))
}

impl Fireflies {
    async fn upload_audio(
        &self,
        a: UploadAudioArgs,
        ctx: &ToolContext,
    ) -> Result<UploadQueued, ToolError> {
        let (mutation, variables) = upload_mutation(&a)?;
        let title = a.title.trim().to_owned();
        let subject = Subject::action(format!("the upload of `{title}`"));
        let status: Option<WireUploadStatus> =
            self.client.query(&mutation, variables, "uploadAudio", &subject, ctx).await?;
        let status =
            status.unwrap_or(WireUploadStatus { success: None, title: None, message: None });
        if status.success == Some(false) {
            return Err(self.client.error(
                ToolErrorKind::Upstream,
                format!(
                    "fireflies did not accept the upload of `{title}`: {}",
                    status.message.as_deref().unwrap_or("no reason given")
                ),
            ));
        }
        Ok(UploadQueued {
            title: non_empty(status.title).unwrap_or(title),
            message: non_empty(status.message),
            next: "Fireflies downloads and transcribes it in the background (minutes for an \
                   hour of audio); find it then with list_transcripts or search_transcripts by \
                   its title"
                .into(),
        })
    }
}

register_tool! {
    provider: Fireflies,
    name: "upload_audio",
    group: "transcripts",
    description: "Send Fireflies a recording to transcribe: a public https URL of an mp3, mp4, \
                  wav, m4a or ogg file and a title, optionally the language, attendees and a \
                  webhook. Fireflies queues it; the transcript appears in list_transcripts when \
                  done.",
    input: UploadAudioArgs,
    output: UploadQueued,
    handler: Fireflies::upload_audio,
}
