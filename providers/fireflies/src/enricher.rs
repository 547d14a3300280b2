//! What Fireflies calls are worth: a value model for every tool, follow-up argument projection
//! for the read chains (listing or search → transcript → its sentences; soundbites → soundbite →
//! its meeting; AI app outputs → their meetings; users → user → the user's meetings), and the
//! host whose rate limit the calls spend.

use quiver_plugin_sdk::model_table::{self, ToolModel as Model};
use quiver_plugin_sdk::projection::MAX_PROJECTIONS_PER_LINK;
use quiver_plugin_sdk::support::json::items;
use quiver_plugin_sdk::{generic_projection, prelude::*};

use crate::Fireflies;

use SideEffectClass::MutatesExternal;
use ValueClass::Critical;

/// This provider's defaults, spread into every row of [`MODELS`] (see [`Model`] for the fields):
/// typical sizes are measured on the recorded fixtures scaled to the default page (20 meetings)
/// and a typical meeting summary, maximums are what the tool's own caps allow. Results stay fresh
/// long: a processed meeting rarely changes, and Fireflies' quotas are small (a free plan gets 50
/// requests a day).
const ROW: Model = Model {
    typical_kb: 6.0,
    max_kb: 60.0,
    latency_ms_p50: 900,
    freshness_ttl_s: 300,
    ..Model::READ_ONLY
};

/// The provider's value models, one row per tool it ships.
#[rustfmt::skip]
pub(crate) static MODELS: &[Model] = &[
    Model { tool: "list_transcripts",
            follow_up: &[("get_transcript", 0.55, "$.transcripts[*].id", "id")], ..ROW },
    Model { tool: "search_transcripts", value_class: Critical, latency_ms_p50: 1500,
            fail_fast_after_n: Some(3),
            follow_up: &[("get_transcript", 0.6, "$.transcripts[*].id", "id")], ..ROW },
    Model { tool: "get_transcript", value_class: Critical, typical_kb: 4.0, max_kb: 90.0,
            latency_ms_p50: 1200, freshness_ttl_s: 1800,
            field_groups: &[("summary", &["overview", "action_items", "keywords", "outline"],
                             0.9, true),
                            ("sentences", &["sentences", "sentences_total",
                                            "next_sentence_index"], 0.5, false)],
            follow_up: &[("get_transcript", 0.2, "$.id", "id")], ..ROW },
    // People change rarely.
    Model { tool: "list_users", typical_kb: 1.5, max_kb: 30.0, latency_ms_p50: 700,
            freshness_ttl_s: 3600,
            follow_up: &[("get_user", 0.2, "$.users[*].user_id", "user_id")], ..ROW },
    Model { tool: "get_user", typical_kb: 0.6, max_kb: 4.0, latency_ms_p50: 600,
            freshness_ttl_s: 900,
            follow_up: &[("list_transcripts", 0.3, "$.email", "participants")], ..ROW },
    Model { tool: "list_soundbites", typical_kb: 4.0, max_kb: 60.0,
            follow_up: &[("get_soundbite", 0.4, "$.soundbites[*].id", "id")], ..ROW },
    Model { tool: "get_soundbite", typical_kb: 2.0, max_kb: 230.0,
            field_groups: &[("captions", &["captions"], 0.6, true)],
            follow_up: &[("get_transcript", 0.3, "$.transcript_id", "id")], ..ROW },
    Model { tool: "list_app_outputs", typical_kb: 10.0, max_kb: 90.0, latency_ms_p50: 1200,
            field_groups: &[("prompts", &["outputs[*].prompt"], 0.2, true)],
            follow_up: &[("get_transcript", 0.25, "$.outputs[*].transcript_id", "id")], ..ROW },
    // The one write: never speculated nor cached; a new meeting joins the listings when done.
    Model { tool: "upload_audio", value_class: Critical, side_effect: MutatesExternal,
            typical_kb: 0.3, max_kb: 1.0, latency_ms_p50: 1500, freshness_ttl_s: 0,
            invalidates: &["list_transcripts", "search_transcripts"], ..ROW },
];

/// The row of `tool` (`get_x` or `fireflies.get_x`).
fn model(tool: &str) -> Option<&'static Model> {
    model_table::find(MODELS, "fireflies", tool)
}

/// `get_x` for `get_x` or `fireflies.get_x`.
fn local_name(tool: &str) -> &str {
    model_table::local_name("fireflies", tool)
}

type Args = Map<String, Value>;

fn id_args(id: &Value) -> Args {
    Map::from_iter([("id".to_owned(), id.clone())])
}

/// The arguments of a known read chain, built from the previous tool's result; `None` when the
/// pair is not one of the provider's chains.
fn chain_args(prev_tool: &str, next: &str, result: &Value) -> Option<Vec<Args>> {
    let id = result.get("id").filter(|v| v.is_string());
    let out = match (prev_tool, next) {
        // The newest meetings of a page (or the best hits of a search) first.
        ("list_transcripts" | "search_transcripts", "get_transcript") => {
            items(result, "transcripts")
                .iter()
                .filter_map(|t| t.get("id").filter(|v| v.is_string()))
                .map(id_args)
                .collect()
        }
        // After the summary, what was said; after a window of sentences, the next window.
        ("get_transcript", "get_transcript") => {
            let Some(id) = id else { return Some(Vec::new()) };
            let mut args = id_args(id);
            match (result.get("sentences"), result.get("next_sentence_index")) {
                (None, _) => {
                    args.insert("include_sentences".into(), json!(true));
                    vec![args]
                }
                (Some(_), Some(next)) if next.is_u64() => {
                    args.insert("include_sentences".into(), json!(true));
                    args.insert("sentences_from".into(), next.clone());
                    vec![args]
                }
                // Every sentence was returned: nothing left to read.
                (Some(_), _) => Vec::new(),
            }
        }
        // Soundbites that are ready first: a pending one has no captions yet.
        ("list_soundbites", "get_soundbite") => {
            let bites = items(result, "soundbites");
            let ready = |b: &&Value| b.get("status").and_then(Value::as_str) == Some("ready");
            bites
                .iter()
                .filter(ready)
                .chain(bites.iter().filter(|b| !ready(b)))
                .filter_map(|b| b.get("id").filter(|v| v.is_string()))
                .map(id_args)
                .collect()
        }
        ("get_soundbite", "get_transcript") => {
            result.get("transcript_id").filter(|v| v.is_string()).map(id_args).into_iter().collect()
        }
        // Each meeting once, though several apps ran on it.
        ("list_app_outputs", "get_transcript") => {
            let mut seen: Vec<&Value> = Vec::new();
            for id in items(result, "outputs").iter().filter_map(|o| o.get("transcript_id")) {
                if id.is_string() && !seen.contains(&id) {
                    seen.push(id);
                }
            }
            seen.into_iter().map(id_args).collect()
        }
        // Admins last: the people an agent asks about are usually the members.
        ("list_users", "get_user") => {
            let users = items(result, "users");
            let admin = |u: &&Value| u.get("admin").and_then(Value::as_bool).unwrap_or(false);
            users
                .iter()
                .filter(|u| !admin(u))
                .chain(users.iter().filter(admin))
                .filter_map(|u| u.get("user_id").filter(|v| v.is_string()))
                .map(|id| Map::from_iter([("user_id".to_owned(), id.clone())]))
                .collect()
        }
        // The meetings the user attended.
        ("get_user", "list_transcripts") => result
            .get("email")
            .filter(|v| v.is_string())
            .map(|email| Map::from_iter([("participants".to_owned(), json!([email]))]))
            .into_iter()
            .collect(),
        _ => return None,
    };
    Some(out.into_iter().take(MAX_PROJECTIONS_PER_LINK).collect())
}

impl ToolEnricher for Fireflies {
    fn value_model(&self, tool: &str) -> Option<ValueModelLayer> {
        model(tool).map(|m| m.layer(Some(&self.host)))
    }

    fn project_args(&self, prev_tool: &str, prev_result: &Value, link: &FollowUpLink) -> Vec<Args> {
        let (prev_tool, next) = (local_name(prev_tool), local_name(&link.tool));
        // The provider's own chain, unless the user re-pointed the link's projection.
        let customised = model_table::is_customised(MODELS, "fireflies", prev_tool, link);
        if !customised {
            if let Some(args) = chain_args(prev_tool, next, prev_result) {
                return args;
            }
        }
        generic_projection(prev_result, link)
    }

    fn rate_limit_host(&self, _tool: &str, _args: &Value) -> Option<String> {
        Some(self.host.clone())
    }
}

#[cfg(test)]
mod tests {
    use quiver_plugin_sdk::core_types::defaults::prior_for;
    use quiver_plugin_sdk::core_types::value_model::{resolve, LayerSource};
    use quiver_plugin_sdk::Provider;

    use super::*;
    use crate::transcripts::{self, SentenceWindow, WireTranscript};
    use crate::FirefliesConfig;
    use crate::{apps, soundbites, users};

    fn fixture(name: &str, root: &str) -> Value {
        let path = format!("{}/../../tests/data/fireflies/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        value["data"][root].clone()
    }

    fn fireflies(base_url: Option<&str>) -> Fireflies {
        Fireflies::new(FirefliesConfig {
            base_url: base_url.map(str::to_owned),
            ..Default::default()
        })
        .unwrap()
    }

    fn link(prev: &str, next: &str) -> FollowUpLink {
        let layer = fireflies(None).value_model(prev).unwrap();
        layer.follow_up.unwrap().into_iter().find(|l| l.tool == next).unwrap()
    }

    fn project(prev: &str, result: &impl Serialize, next: &str) -> Vec<Value> {
        let result = serde_json::to_value(result).unwrap();
        fireflies(None)
            .project_args(prev, &result, &link(prev, next))
            .into_iter()
            .map(Value::Object)
            .collect()
    }

    fn page(name: &str) -> transcripts::TranscriptList {
        let wire: Vec<WireTranscript> =
            serde_json::from_value(fixture(name, "transcripts")).unwrap();
        transcripts::transcript_list(wire, 0, 3)
    }

    #[test]
    fn every_tool_has_a_model_and_no_other_name_does() {
        let ff = fireflies(None);
        let tools = Fireflies::tools();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "get_soundbite",
                "get_transcript",
                "get_user",
                "list_app_outputs",
                "list_soundbites",
                "list_transcripts",
                "list_users",
                "search_transcripts",
                "upload_audio",
            ]
        );
        for tool in &tools {
            let layer =
                ff.value_model(&tool.name).unwrap_or_else(|| panic!("{} has no model", tool.name));
            layer.validate().unwrap_or_else(|e| panic!("{}: {e}", tool.name));
            let group =
                tool.group.as_deref().unwrap_or_else(|| panic!("{} has no group", tool.name));
            assert!(
                ["transcripts", "users", "soundbites", "ai_apps"].contains(&group),
                "{}: {group}",
                tool.name
            );
            for l in layer.follow_up.iter().flatten() {
                assert!(
                    names.contains(&l.tool.as_str()),
                    "{} → {} does not exist",
                    tool.name,
                    l.tool
                );
            }
            for t in layer.invalidates.iter().flatten() {
                assert!(names.contains(&t.as_str()), "{} invalidates unknown {t}", tool.name);
            }
        }
        assert_eq!(MODELS.len(), tools.len(), "a model for a tool that does not exist");
        assert!(ff.value_model("no_such_tool").is_none());
        assert!(ff.value_model("github.get_issue").is_none());
        assert!(ff.value_model("fireflies.get_transcript").is_some(), "qualified names resolve");
    }

    #[test]
    fn reads_are_speculatable_and_the_upload_is_a_write_after_merging_with_the_built_in_priors() {
        let ff = fireflies(None);
        for tool in Fireflies::tools() {
            let (rule, prior) = prior_for(&tool.name);
            let provider = ff.value_model(&tool.name).unwrap();
            let merged = resolve(&[
                (LayerSource::BuiltIn(rule), &prior),
                (LayerSource::Provider("fireflies".into()), &provider),
            ])
            .model;
            if tool.name == "upload_audio" {
                assert_eq!(merged.side_effect_class, SideEffectClass::MutatesExternal);
                assert!(!merged.may_speculate(), "an upload is never speculated");
                assert_eq!(merged.cost_model.freshness_ttl_s, Some(0), "an upload is cached");
                assert_eq!(merged.invalidates, ["list_transcripts", "search_transcripts"]);
                continue;
            }
            assert_eq!(merged.side_effect_class, SideEffectClass::ReadOnly, "{}", tool.name);
            assert!(merged.may_speculate(), "{} cannot be speculated", tool.name);
            assert!(merged.invalidates.is_empty(), "{} invalidates something", tool.name);
        }
        let get = ff.value_model("get_transcript").unwrap();
        let groups = get.field_groups.unwrap();
        assert_eq!(groups["sentences"].default_include, Some(false), "sentences only on request");
        let sentences = groups["sentences"].fields.clone().unwrap();
        assert_eq!(sentences, ["sentences", "sentences_total", "next_sentence_index"]);
        assert_eq!(groups["summary"].default_include, Some(true));
    }

    #[test]
    fn rate_limit_host_is_the_configured_host() {
        let args = json!({"id": "x"});
        assert_eq!(
            fireflies(None).rate_limit_host("get_transcript", &args).as_deref(),
            Some("api.fireflies.ai")
        );
        let proxy = fireflies(Some("https://ff-proxy.corp.example:8443/graphql"));
        assert_eq!(
            proxy.rate_limit_host("list_transcripts", &args).as_deref(),
            Some("ff-proxy.corp.example")
        );
        assert_eq!(
            proxy.value_model("search_transcripts").unwrap().rate_limit_host.as_deref(),
            Some("ff-proxy.corp.example")
        );
    }

    #[test]
    fn listings_and_searches_lead_to_their_first_three_transcripts() {
        let list = page("transcripts_list.json");
        assert_eq!(list.transcripts.len(), 3);
        assert_eq!(
            project("list_transcripts", &list, "get_transcript"),
            [
                json!({"id": "01J2XKQ4TV7Z8R5M9N3B6C1D0E"}),
                json!({"id": "01J2TQ8W3K5N7P9R1S3U5W7Y9A"}),
                json!({"id": "01J2M3N5P7Q9R1S3T5U7V9W1X3"}),
            ]
        );
        let wire: Vec<WireTranscript> =
            serde_json::from_value(fixture("search_transcripts.json", "transcripts")).unwrap();
        let found = transcripts::SearchResult {
            keyword: "pricing".into(),
            scope: transcripts::SearchScope::All,
            page: transcripts::transcript_list(wire, 0, 20),
        };
        assert_eq!(
            project("search_transcripts", &found, "get_transcript"),
            [
                json!({"id": "01J2XKQ4TV7Z8R5M9N3B6C1D0E"}),
                json!({"id": "01J1ZA2B4C6D8E0F2G4H6J8K0M"})
            ]
        );
    }

    #[test]
    fn a_transcript_leads_to_its_sentences_then_to_the_next_window_then_to_nothing() {
        let id = "01J2XKQ4TV7Z8R5M9N3B6C1D0E";
        let summary: WireTranscript =
            serde_json::from_value(fixture("transcript.json", "transcript")).unwrap();
        let detail = transcripts::transcript_detail(summary, None);
        assert_eq!(
            project("get_transcript", &detail, "get_transcript"),
            [json!({"id": id, "include_sentences": true})]
        );
        let with = || {
            let w: WireTranscript =
                serde_json::from_value(fixture("transcript_with_sentences.json", "transcript"))
                    .unwrap();
            w
        };
        let first =
            transcripts::transcript_detail(with(), Some(SentenceWindow { from: 0, max: 5 }));
        assert_eq!(
            project("get_transcript", &first, "get_transcript"),
            [json!({"id": id, "include_sentences": true, "sentences_from": 5})]
        );
        let all =
            transcripts::transcript_detail(with(), Some(SentenceWindow { from: 0, max: 300 }));
        assert!(project("get_transcript", &all, "get_transcript").is_empty(), "all was read");
    }

    #[test]
    fn soundbites_lead_to_ready_ones_first_and_then_to_their_meeting() {
        let wire: Vec<soundbites::WireBite> =
            serde_json::from_value(fixture("bites.json", "bites")).unwrap();
        let list = soundbites::soundbite_list(wire, 0, 20);
        assert_eq!(
            project("list_soundbites", &list, "get_soundbite"),
            [
                json!({"id": "01J3BITE0A1B2C3D4E5F6G7H8J"}),
                json!({"id": "01J3BITE2C3D4E5F6G7H8J9K0M"}),
                json!({"id": "01J3BITE1B2C3D4E5F6G7H8J9K"}),
            ],
            "the bite still processing comes last"
        );
        let bite: soundbites::WireBite =
            serde_json::from_value(fixture("bite.json", "bite")).unwrap();
        let detail = soundbites::soundbite_detail(bite);
        assert_eq!(
            project("get_soundbite", &detail, "get_transcript"),
            [json!({"id": "01J2XKQ4TV7Z8R5M9N3B6C1D0E"})]
        );
    }

    #[test]
    fn app_outputs_lead_to_each_of_their_meetings_once() {
        let wire: apps::WireApps = serde_json::from_value(fixture("apps.json", "apps")).unwrap();
        let list = apps::app_output_list(wire, 0, 10);
        assert_eq!(
            project("list_app_outputs", &list, "get_transcript"),
            [
                json!({"id": "01J2XKQ4TV7Z8R5M9N3B6C1D0E"}),
                json!({"id": "01J2TQ8W3K5N7P9R1S3U5W7Y9A"})
            ],
            "two apps ran on the kickoff; it is read once"
        );
    }

    #[test]
    fn users_lead_to_members_before_admins_and_a_user_to_the_meetings_they_attended() {
        let wire: Vec<users::WireUser> =
            serde_json::from_value(fixture("users.json", "users")).unwrap();
        let list = users::user_list(wire);
        assert_eq!(
            project("list_users", &list, "get_user"),
            [
                json!({"user_id": "01HZAMARA0000000000000000B"}),
                json!({"user_id": "01HZJORDAN000000000000000A"})
            ],
            "the admin Jordan comes last"
        );
        let user: users::WireUser = serde_json::from_value(fixture("user.json", "user")).unwrap();
        let detail = users::user_detail(user);
        assert_eq!(
            project("get_user", &detail, "list_transcripts"),
            [json!({"participants": ["jordan.vale@harborlane.example"]})]
        );
    }

    #[test]
    fn unknown_and_customised_links_fall_back_to_the_generic_projection() {
        let ff = fireflies(None);
        let list = serde_json::to_value(page("transcripts_list.json")).unwrap();
        let custom = FollowUpLink {
            tool: "fireflies.get_transcript".into(),
            probability: 0.5,
            projection: Some("$.transcripts[1].id".into()),
            projection_arg: Some("id".into()),
        };
        assert_eq!(
            ff.project_args("fireflies.list_transcripts", &list, &custom),
            [json!({"id": "01J2TQ8W3K5N7P9R1S3U5W7Y9A"}).as_object().unwrap().clone()]
        );
        let elsewhere = FollowUpLink {
            tool: "jira.create_issue".into(),
            probability: 0.1,
            projection: Some("$.transcripts[0].title".into()),
            projection_arg: Some("summary".into()),
        };
        assert_eq!(
            ff.project_args("list_transcripts", &list, &elsewhere),
            [json!({"summary": "Pinecrest Lodge kickoff"}).as_object().unwrap().clone()]
        );
    }
}
