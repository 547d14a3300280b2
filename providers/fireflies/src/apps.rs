//! AI app outputs: what Fireflies' AI apps (custom prompts run on meetings) answered, per
//! meeting or per app.

use quiver_plugin_sdk::prelude::*;
use quiver_plugin_sdk::support::json::nullable;
use quiver_plugin_sdk::support::text::truncate;

use crate::client::Subject;
use crate::transcripts::{iso_date, non_empty, Arguments};
use crate::users::check_id;
use crate::Fireflies;

/// What `list_app_outputs` selects of each output (the user id is the key owner's, and says
/// nothing the agent needs).
pub(crate) const OUTPUT_FIELDS: &str = "outputs { transcript_id app_id created_at title prompt \
     response }";
/// Fireflies' largest (and default) page of app outputs.
pub(crate) const MAX_OUTPUTS: u32 = 10;
/// Longest response returned, in bytes.
const RESPONSE_MAX_BYTES: usize = 8 * 1024;
/// Longest prompt returned, in bytes.
const PROMPT_MAX_BYTES: usize = 512;

/// Arguments of `list_app_outputs`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListAppOutputsArgs {
    /// Only the outputs on this meeting (`id` from `list_transcripts`).
    #[serde(default, alias = "transcriptId")]
    pub(crate) transcript_id: Option<String>,
    /// Only the outputs of this AI app (`app_id` from an earlier result).
    #[serde(default, alias = "appId")]
    pub(crate) app_id: Option<String>,
    /// Outputs per page: 10 (Fireflies' maximum) by default.
    #[schemars(range(min = 1, max = 10))]
    pub(crate) limit: Option<u32>,
    /// How many to skip: 0 by default; pass the previous page's `next_skip`.
    pub(crate) skip: Option<u32>,
}

/// `apps { outputs { … } }`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireApps {
    #[serde(default, deserialize_with = "nullable")]
    outputs: Vec<WireOutput>,
}

#[derive(Debug, Deserialize)]
struct WireOutput {
    #[serde(default)]
    transcript_id: Option<String>,
    #[serde(default)]
    app_id: Option<String>,
    /// Epoch milliseconds.
    #[serde(default)]
    created_at: Option<Value>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    response: Option<String>,
}

/// One AI app output.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AppOutput {
    /// The app's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<String>,
    /// The meeting it ran on, for `get_transcript`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) transcript_id: Option<String>,
    /// The app, for `app_id` filters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) app_id: Option<String>,
    /// When it ran, ISO 8601.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) created_at: Option<String>,
    /// The app's prompt (cut at 512 bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) prompt: Option<String>,
    /// What the app answered (cut at 8 KiB, saying so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) response: Option<String>,
}

/// Result of `list_app_outputs`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AppOutputList {
    /// The outputs of this page.
    pub(crate) outputs: Vec<AppOutput>,
    /// How many this page holds.
    pub(crate) count: usize,
    /// How many were skipped before this page.
    pub(crate) skip: u32,
    /// Whether more may follow (the page was full).
    pub(crate) more: bool,
    /// The `skip` of the next page, or null on the last page.
    pub(crate) next_skip: Option<u32>,
}

/// The `list_app_outputs` page for what Fireflies sent.
pub(crate) fn app_output_list(wire: WireApps, skip: u32, limit: u32) -> AppOutputList {
    let count = wire.outputs.len();
    let more = count as u32 >= limit;
    let outputs = wire
        .outputs
        .into_iter()
        .map(|o| AppOutput {
            title: non_empty(o.title),
            transcript_id: non_empty(o.transcript_id),
            app_id: non_empty(o.app_id),
            created_at: iso_date(None, o.created_at.as_ref()),
            prompt: non_empty(o.prompt).map(|p| truncate(&p, PROMPT_MAX_BYTES).0),
            response: non_empty(o.response).map(|r| truncate(&r, RESPONSE_MAX_BYTES).0),
        })
        .collect();
    AppOutputList { outputs, count, skip, more, next_skip: more.then(|| skip + count as u32) }
}

/// The `apps` query of `list_app_outputs`: `(query, variables, limit, skip)`.
pub(crate) fn list_query(a: &ListAppOutputsArgs) -> Result<(String, Value, u32, u32), ToolError> {
    let mut args = Arguments::default();
    if let Some(app) = a.app_id.as_deref().filter(|t| !t.trim().is_empty()) {
        let app = check_id("app_id", app, "list_app_outputs")?;
        args.add("app_id", "appId", "String", json!(app));
    }
    if let Some(transcript) = a.transcript_id.as_deref().filter(|t| !t.trim().is_empty()) {
        let transcript = check_id("transcript_id", transcript, "list_transcripts")?;
        args.add("transcript_id", "transcriptId", "String", json!(transcript));
    }
    let limit = a.limit.unwrap_or(MAX_OUTPUTS).clamp(1, MAX_OUTPUTS);
    let skip = a.skip.unwrap_or(0);
    // The live schema types these two as Float, as Fireflies' own clients declare them.
    args.add("skip", "skip", "Float", json!(skip));
    args.add("limit", "limit", "Float", json!(limit));
    let (query, variables) = args.render("Apps", "apps", OUTPUT_FIELDS);
    Ok((query, variables, limit, skip))
}

impl Fireflies {
    async fn list_app_outputs(
        &self,
        a: ListAppOutputsArgs,
        ctx: &ToolContext,
    ) -> Result<AppOutputList, ToolError> {
        let (query, variables, limit, skip) = list_query(&a)?;
        let subject = match &a.transcript_id {
            Some(id) => Subject::listing(format!("the AI app outputs of transcript `{id}`")),
            None => Subject::listing("the AI app outputs"),
        };
        let apps: Option<WireApps> =
            self.client.query(&query, variables, "apps", &subject, ctx).await?;
        let apps = apps.unwrap_or(WireApps { outputs: Vec::new() });
        Ok(app_output_list(apps, skip, limit))
    }
}

register_tool! {
    provider: Fireflies,
    name: "list_app_outputs",
    group: "ai_apps",
    description: "List what Fireflies AI apps (custom prompts run on meetings) answered, for \
                  one meeting (`transcript_id`) or one app (`app_id`), 10 at a time: app title, \
                  meeting id, date, prompt and response. Returns `more` and `next_skip`.",
    input: ListAppOutputsArgs,
    output: AppOutputList,
    handler: Fireflies::list_app_outputs,
}
