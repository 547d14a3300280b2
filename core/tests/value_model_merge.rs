//! The value-model merge, rule by rule: built-in prior < provider < user `*` < user glob (longest
//! last) < user exact, right-wins field by field, maps by key, lists whole — and the provenance that
//! says which layer set each field.
//!
//! Layers are written the way their authors write them: TOML for user sections, JSON or TOML for
//! providers.

use std::collections::BTreeMap;

use quiver_core::defaults::prior_for;
use quiver_core::value_model::{
    resolve, CostModel, FieldGroup, FollowUpLink, LayerSource, ResolvedValueModel, SideEffectClass,
    ToolValueModel, UserLayers, ValueClass, ValueModelLayer,
};
use quiver_core::ToolName;
use serde::Deserialize;

fn layer(toml_text: &str) -> ValueModelLayer {
    toml::from_str(toml_text).unwrap_or_else(|e| panic!("bad test layer: {e}\n{toml_text}"))
}

fn json_layer(json_text: &str) -> ValueModelLayer {
    serde_json::from_str(json_text).unwrap_or_else(|e| panic!("bad test layer: {e}\n{json_text}"))
}

fn user(sections: &[(&str, &str)]) -> UserLayers {
    let sections = sections.iter().map(|(pattern, text)| ((*pattern).to_owned(), layer(text)));
    UserLayers::new(sections.collect()).expect("valid user sections")
}

/// The host's layering for a qualified tool: built-in prior, provider, user sections.
fn effective(
    qualified: &str,
    provider: Option<&ValueModelLayer>,
    user: &UserLayers,
) -> ResolvedValueModel {
    let name = ToolName::parse(qualified).expect("qualified name");
    let (rule, prior) = prior_for(&name.tool);
    let mut layers = vec![(LayerSource::BuiltIn(rule), &prior)];
    if let Some(provider) = provider {
        layers.push((LayerSource::Provider(name.provider.clone()), provider));
    }
    layers.extend(user.layers_for(qualified));
    resolve(&layers)
}

fn provider(name: &str) -> LayerSource {
    LayerSource::Provider(name.to_owned())
}

fn glob(pattern: &str) -> LayerSource {
    LayerSource::UserGlob(pattern.to_owned())
}

fn exact(name: &str) -> LayerSource {
    LayerSource::UserExact(name.to_owned())
}

fn builtin(rule: &str) -> LayerSource {
    LayerSource::BuiltIn(rule.to_owned())
}

// ---------------------------------------------------------------------------------------------
// Order
// ---------------------------------------------------------------------------------------------

#[test]
fn layers_apply_in_order_defaults_provider_wildcard_glob_exact() {
    let github = layer(
        r#"
        value_class = "supporting"
        rate_limit_host = "api.github.com"
        fail_fast_after_n = 9
        cost_model = { typical_kb = 3.0 }
        "#,
    );
    let users = user(&[
        ("*", "value_class = \"optional\"\nfail_fast_after_n = 5"),
        ("github.*", "rate_limit_host = \"ghe.corp\"\nfail_fast_after_n = 4"),
        ("github.get_issue", "fail_fast_after_n = 2"),
    ]);
    let r = effective("github.get_issue", Some(&github), &users);

    assert_eq!(r.model.side_effect_class, SideEffectClass::ReadOnly);
    assert_eq!(r.source_of("side_effect_class"), Some(&builtin("verb:get")));
    assert_eq!(r.model.cost_model.freshness_ttl_s, Some(60));
    assert_eq!(r.source_of("cost_model.freshness_ttl_s"), Some(&builtin("verb:get")));
    assert_eq!(r.model.cost_model.typical_kb, 3.0);
    assert_eq!(r.source_of("cost_model.typical_kb"), Some(&provider("github")));
    assert_eq!(r.model.value_class, ValueClass::Optional);
    assert_eq!(r.source_of("value_class"), Some(&LayerSource::UserWildcard));
    assert_eq!(r.model.rate_limit_host.as_deref(), Some("ghe.corp"));
    assert_eq!(r.source_of("rate_limit_host"), Some(&glob("github.*")));
    assert_eq!(r.model.fail_fast_after_n, Some(2));
    assert_eq!(r.source_of("fail_fast_after_n"), Some(&exact("github.get_issue")));

    // What `quiver tools show` prints next to each field.
    let shown: Vec<String> = ["side_effect_class", "cost_model.typical_kb", "value_class"]
        .iter()
        .chain(&["rate_limit_host", "fail_fast_after_n"])
        .map(|path| r.source_of(path).unwrap().to_string())
        .collect();
    assert_eq!(
        shown,
        [
            "built-in verb:get",
            "provider github",
            r#"config [tools."*"]"#,
            r#"config [tools."github.*"]"#,
            r#"config [tools."github.get_issue"]"#,
        ]
    );
}

#[test]
fn user_layers_come_in_merge_order() {
    let users = user(&[
        ("github.get_issue", "fail_fast_after_n = 1"),
        ("github.*", "fail_fast_after_n = 2"),
        ("*", "fail_fast_after_n = 3"),
        ("github.get_*", "fail_fast_after_n = 4"),
    ]);
    let order: Vec<LayerSource> =
        users.layers_for("github.get_issue").into_iter().map(|(source, _)| source).collect();
    assert_eq!(
        order,
        [
            LayerSource::UserWildcard,
            glob("github.*"),
            glob("github.get_*"),
            exact("github.get_issue")
        ]
    );
    assert_eq!(users.exact_names().collect::<Vec<_>>(), ["github.get_issue"]);
}

#[test]
fn an_exact_section_applies_to_its_tool_only() {
    let users = user(&[("github.get_issue", "value_class = \"optional\"")]);
    let other = effective("github.get_pull_request", None, &users);
    assert_eq!(other.model.value_class, ValueClass::Critical);
    assert_eq!(other.source_of("value_class"), Some(&builtin("verb:get")));
    // An unqualified section names no tool: exact sections match qualified names.
    let unqualified = user(&[("get_issue", "value_class = \"optional\"")]);
    let r = effective("github.get_issue", None, &unqualified);
    assert_eq!(r.model.value_class, ValueClass::Critical);
}

// ---------------------------------------------------------------------------------------------
// Globs
// ---------------------------------------------------------------------------------------------

#[test]
fn longest_glob_wins_over_shorter_glob() {
    let users = user(&[
        ("github.*", "value_class = \"optional\"\ncost_model = { typical_kb = 9.0 }"),
        ("github.get_*", "value_class = \"critical\""),
    ]);
    let r = effective("github.get_issue", None, &users);
    assert_eq!(r.model.value_class, ValueClass::Critical);
    assert_eq!(r.source_of("value_class"), Some(&glob("github.get_*")));
    // The shorter glob still sets what the longer one does not name.
    assert_eq!(r.model.cost_model.typical_kb, 9.0);
    assert_eq!(r.source_of("cost_model.typical_kb"), Some(&glob("github.*")));

    let list = effective("github.list_issues", None, &users);
    assert_eq!(list.model.value_class, ValueClass::Optional);
    assert_eq!(list.source_of("value_class"), Some(&glob("github.*")));
}

#[test]
fn longest_glob_wins_whatever_the_section_order() {
    // `github.*_issue` sorts before `github.get_*` but is longer: it applies last.
    let users = user(&[
        ("github.get_*", "value_class = \"optional\""),
        ("github.*_issue", "value_class = \"critical\""),
    ]);
    let r = effective("github.get_issue", None, &users);
    assert_eq!(r.source_of("value_class"), Some(&glob("github.*_issue")));
    assert_eq!(r.model.value_class, ValueClass::Critical);
}

#[test]
fn a_glob_that_does_not_match_is_not_applied() {
    let users = user(&[
        ("gitlab.*", "side_effect_class = \"pure\"\nvalue_class = \"optional\""),
        ("github.list_*", "value_class = \"audit_only\""),
    ]);
    assert!(users.layers_for("github.get_issue").is_empty());
    let r = effective("github.get_issue", None, &users);
    assert_eq!(r.model.side_effect_class, SideEffectClass::ReadOnly);
    assert_eq!(r.model.value_class, ValueClass::Critical);
    assert_eq!(r.source_of("value_class"), Some(&builtin("verb:get")));
}

// ---------------------------------------------------------------------------------------------
// Maps, cost model, lists
// ---------------------------------------------------------------------------------------------

#[test]
fn field_groups_merge_by_key() {
    let github = layer(
        r#"
        [field_groups.must_have]
        fields = ["number", "title", "state"]
        estimated_value = 0.9
        [field_groups.body]
        fields = ["body"]
        estimated_value = 0.6
        "#,
    );
    let users = user(&[(
        "github.get_issue",
        "[field_groups.reactions]\nfields = [\"reactions\"]\ndefault_include = false",
    )]);
    let r = effective("github.get_issue", Some(&github), &users);
    let groups: Vec<&str> = r.model.field_groups.keys().map(String::as_str).collect();
    assert_eq!(groups, ["body", "must_have", "reactions"]);
    assert_eq!(r.source_of("field_groups.must_have.fields"), Some(&provider("github")));
    assert_eq!(r.source_of("field_groups.reactions.fields"), Some(&exact("github.get_issue")));
    // The new group's unnamed field comes from the type's default.
    assert_eq!(r.model.field_groups["reactions"].estimated_value, 0.5);
    assert_eq!(r.source_of("field_groups.reactions.estimated_value"), Some(&LayerSource::Baseline));
}

#[test]
fn a_group_layer_that_sets_one_field_keeps_the_others() {
    let github =
        layer("[field_groups.body]\nfields = [\"body\", \"body_html\"]\nestimated_value = 0.6");
    let users = user(&[("github.*", "field_groups.body.default_include = false")]);
    let r = effective("github.get_issue", Some(&github), &users);
    assert_eq!(
        r.model.field_groups["body"],
        FieldGroup {
            fields: vec!["body".into(), "body_html".into()],
            estimated_value: 0.6,
            default_include: false,
        }
    );
    assert_eq!(r.source_of("field_groups.body.fields"), Some(&provider("github")));
    assert_eq!(r.source_of("field_groups.body.estimated_value"), Some(&provider("github")));
    assert_eq!(r.source_of("field_groups.body.default_include"), Some(&glob("github.*")));
}

#[test]
fn cost_model_merges_field_by_field() {
    let github = layer("[cost_model]\ntypical_kb = 4.5\nlatency_ms_p50 = 300\nmax_kb = 50.0");
    let users = user(&[("github.get_issue", "cost_model.freshness_ttl_s = 5")]);
    let r = effective("github.get_issue", Some(&github), &users);
    assert_eq!(
        r.model.cost_model,
        CostModel {
            typical_kb: 4.5,
            max_kb: Some(50.0),
            latency_ms_p50: Some(300),
            dollars: None,
            freshness_ttl_s: Some(5),
        }
    );
    assert_eq!(r.source_of("cost_model.typical_kb"), Some(&provider("github")));
    assert_eq!(r.source_of("cost_model.latency_ms_p50"), Some(&provider("github")));
    assert_eq!(r.source_of("cost_model.freshness_ttl_s"), Some(&exact("github.get_issue")));
}

#[test]
fn lists_are_replaced_whole() {
    let github = layer(
        r#"
        invalidates = ["get_issue", "list_issues"]
        [[follow_up]]
        tool = "list_issue_comments"
        probability = 0.6
        [[follow_up]]
        tool = "get_pull_request"
        probability = 0.2
        "#,
    );
    let users = user(&[(
        "github.update_issue",
        "invalidates = [\"search_issues\"]\nfollow_up = [{ tool = \"get_issue\", probability = 0.3 }]",
    )]);
    let r = effective("github.update_issue", Some(&github), &users);
    assert_eq!(
        r.model.follow_up,
        [FollowUpLink {
            tool: "get_issue".into(),
            probability: 0.3,
            projection: None,
            projection_arg: None
        }]
    );
    assert_eq!(r.model.invalidates, ["search_issues"]);
    assert_eq!(r.source_of("follow_up"), Some(&exact("github.update_issue")));
    assert_eq!(r.source_of("invalidates"), Some(&exact("github.update_issue")));
}

#[test]
fn an_explicitly_empty_list_clears_it() {
    let github = layer(
        "invalidates = [\"get_issue\"]\nfollow_up = [{ tool = \"get_issue\", probability = 0.9 }]",
    );
    let users = user(&[("github.*", "follow_up = []\ninvalidates = []")]);
    let r = effective("github.update_issue", Some(&github), &users);
    assert!(r.model.follow_up.is_empty());
    assert!(r.model.invalidates.is_empty());
    assert_eq!(r.source_of("follow_up"), Some(&glob("github.*")));
    assert_eq!(r.source_of("invalidates"), Some(&glob("github.*")));
    // Clearing is not the same as saying nothing: a layer without the key keeps the list.
    let quiet = user(&[("github.*", "value_class = \"optional\"")]);
    let kept = effective("github.update_issue", Some(&github), &quiet);
    assert_eq!(kept.model.invalidates, ["get_issue"]);
}

// ---------------------------------------------------------------------------------------------
// Regressions from the reference implementation
// ---------------------------------------------------------------------------------------------

const FULL_PROVIDER_LAYER: &str = r#"
value_class = "supporting"
invalidates = ["list_issues"]
fail_fast_after_n = 3
side_effect_class = "pure"
speculate = true
rate_limit_host = "api.github.com"

[field_groups.body]
fields = ["body"]
estimated_value = 0.4
default_include = false

[cost_model]
typical_kb = 3.5
max_kb = 40.0
latency_ms_p50 = 250
dollars = 0.001
freshness_ttl_s = 120

[[follow_up]]
tool = "list_issue_comments"
probability = 0.6
projection = "$.number"
projection_arg = "issue_number"
"#;

#[test]
fn provider_layer_reaches_effective_model() {
    let github = layer(FULL_PROVIDER_LAYER);
    let users = user(&[("*", "[field_groups.debug]\nfields = [\"node_id\"]")]);
    let r = effective("github.get_issue", Some(&github), &users);

    let expected = ToolValueModel {
        value_class: ValueClass::Supporting,
        field_groups: BTreeMap::from([
            (
                "body".to_owned(),
                FieldGroup {
                    fields: vec!["body".into()],
                    estimated_value: 0.4,
                    default_include: false,
                },
            ),
            (
                "debug".to_owned(),
                FieldGroup {
                    fields: vec!["node_id".into()],
                    estimated_value: 0.5,
                    default_include: true,
                },
            ),
        ]),
        cost_model: CostModel {
            typical_kb: 3.5,
            max_kb: Some(40.0),
            latency_ms_p50: Some(250),
            dollars: Some(0.001),
            freshness_ttl_s: Some(120),
        },
        follow_up: vec![FollowUpLink {
            tool: "list_issue_comments".into(),
            probability: 0.6,
            projection: Some("$.number".into()),
            projection_arg: Some("issue_number".into()),
        }],
        invalidates: vec!["list_issues".into()],
        fail_fast_after_n: Some(3),
        side_effect_class: SideEffectClass::Pure,
        speculate: Some(true),
        rate_limit_host: Some("api.github.com".into()),
    };
    assert_eq!(r.model, expected);

    for (path, source) in &r.provenance {
        let want = if path.starts_with("field_groups.debug.") {
            if path == "field_groups.debug.fields" {
                LayerSource::UserWildcard
            } else {
                LayerSource::Baseline
            }
        } else {
            provider("github")
        };
        assert_eq!(source, &want, "{path}");
    }
}

/// A config file as the host reads it: other keys beside the `[tools."…"]` sections.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[allow(dead_code)]
    plugins_dir: Option<String>,
    #[serde(default)]
    tools: BTreeMap<String, ValueModelLayer>,
}

const CONFIG: &str = r#"
plugins_dir = "plugins"

[tools."*"]
fail_fast_after_n = 4

[tools."github.*"]
rate_limit_host = "github.example.com"

[tools."github.get_issue"]
value_class = "optional"

[tools."github.get_issue".cost_model]
freshness_ttl_s = 15
max_kb = 64.0

[tools."github.get_issue".field_groups.reactions]
default_include = false
"#;

#[test]
fn config_section_is_never_silently_dropped() {
    let config: Config = toml::from_str(CONFIG).unwrap();
    assert_eq!(config.tools.len(), 3);
    let users = UserLayers::new(config.tools).unwrap();
    let r = effective("github.get_issue", None, &users);

    assert_eq!(r.model.value_class, ValueClass::Optional);
    assert_eq!(r.model.cost_model.freshness_ttl_s, Some(15));
    assert_eq!(r.model.cost_model.max_kb, Some(64.0));
    assert!(!r.model.field_groups["reactions"].default_include);
    assert_eq!(r.model.rate_limit_host.as_deref(), Some("github.example.com"));
    assert_eq!(r.model.fail_fast_after_n, Some(4));
    let section = exact("github.get_issue");
    for path in [
        "value_class",
        "cost_model.freshness_ttl_s",
        "cost_model.max_kb",
        "field_groups.reactions.default_include",
    ] {
        assert_eq!(r.source_of(path), Some(&section), "{path}");
    }
    // The built-in prior's typical size survives the section's nested cost table.
    assert_eq!(r.source_of("cost_model.typical_kb"), Some(&builtin("verb:get")));
}

#[test]
fn a_misspelt_config_key_is_an_error_naming_it() {
    for (misspelt, text) in [
        ("cost_modle", "[tools.\"github.get_issue\"]\ncost_modle = { freshness_ttl_s = 15 }"),
        ("freshnes_ttl_s", "[tools.\"github.get_issue\".cost_model]\nfreshnes_ttl_s = 15"),
        ("defualt_include", "[tools.\"*\".field_groups.body]\ndefualt_include = false"),
        (
            "projection_args",
            "[[tools.\"*\".follow_up]]\ntool = \"x\"\nprobability = 0.1\nprojection_args = \"n\"",
        ),
    ] {
        let err = toml::from_str::<Config>(text).expect_err(misspelt).to_string();
        assert!(err.contains(misspelt), "error for `{misspelt}` does not name it: {err}");
    }
    let err = serde_json::from_str::<ValueModelLayer>(r#"{"cost_model": {"freshnes_ttl_s": 1}}"#)
        .expect_err("misspelt JSON key")
        .to_string();
    assert!(err.contains("freshnes_ttl_s"), "{err}");
    let err = serde_json::from_str::<ValueModelLayer>(r#"{"side_effect_class": "readonly"}"#)
        .expect_err("unknown variant")
        .to_string();
    assert!(err.contains("readonly"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Speculation
// ---------------------------------------------------------------------------------------------

#[test]
fn speculate_false_survives_a_later_side_effect_class() {
    let github = layer("speculate = false\nside_effect_class = \"read_only\"");
    let users = user(&[("github.get_issue", "side_effect_class = \"pure\"")]);
    let r = effective("github.get_issue", Some(&github), &users);
    assert_eq!(r.model.side_effect_class, SideEffectClass::Pure);
    assert_eq!(r.model.speculate, Some(false));
    assert_eq!(r.source_of("speculate"), Some(&provider("github")));
    assert!(!r.model.may_speculate());
}

#[test]
fn a_mutating_verb_prior_stays_unspeculatable_when_reclassified() {
    // The prior for `create_issue` says `speculate = false`; a layer that only reclassifies the
    // side effect does not make a create run unasked.
    let users = user(&[("github.create_issue", "side_effect_class = \"read_only\"")]);
    let r = effective("github.create_issue", None, &users);
    assert_eq!(r.source_of("speculate"), Some(&builtin("verb:create")));
    assert!(!r.model.may_speculate());
}

#[test]
fn mutates_external_is_never_speculatable() {
    let r = resolve(&[(
        provider("github"),
        &layer("side_effect_class = \"mutates_external\"\nspeculate = true"),
    )]);
    assert!(!r.model.may_speculate());
    for class in [
        SideEffectClass::MutatesExternal,
        SideEffectClass::MutatesLocal,
        SideEffectClass::Indeterminate,
    ] {
        assert!(!class.is_speculatable(), "{class:?}");
    }
    let read = resolve(&[(provider("github"), &layer("side_effect_class = \"read_only\""))]);
    assert!(read.model.may_speculate());
    // Nothing said: indeterminate, never speculated.
    assert!(!resolve(&[]).model.may_speculate());
}

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------

#[test]
fn a_probability_outside_0_1_is_rejected_naming_the_field() {
    let bad = layer("follow_up = [{ tool = \"get_issue\", probability = 1.5 }]");
    let err = bad.validate().unwrap_err();
    assert!(err.contains("follow_up[0].probability"), "{err}");
    assert!(err.contains("1.5"), "{err}");

    let err = layer("field_groups.body.estimated_value = -0.1").validate().unwrap_err();
    assert!(err.contains("field_groups.body.estimated_value"), "{err}");
    let err = layer("cost_model.typical_kb = -1.0").validate().unwrap_err();
    assert!(err.contains("cost_model.typical_kb"), "{err}");
    let err = layer("follow_up = [{ tool = \" \", probability = 0.5 }]").validate().unwrap_err();
    assert!(err.contains("follow_up[0].tool"), "{err}");
    assert_eq!(layer(FULL_PROVIDER_LAYER).validate(), Ok(()));
}

#[test]
fn user_layer_errors_name_the_section() {
    let sections = BTreeMap::from([
        ("github.*".to_owned(), layer("value_class = \"optional\"")),
        (
            "github.get_issue".to_owned(),
            layer("follow_up = [{ tool = \"list_issue_comments\", probability = 1.5 }]"),
        ),
    ]);
    let err = UserLayers::new(sections).unwrap_err();
    assert_eq!(err.pattern, "github.get_issue");
    let shown = err.to_string();
    assert!(shown.contains(r#"[tools."github.get_issue"]"#), "{shown}");
    assert!(shown.contains("probability"), "{shown}");
}

#[test]
fn a_bad_glob_is_an_error() {
    let sections = BTreeMap::from([("github.[".to_owned(), ValueModelLayer::default())]);
    let err = UserLayers::new(sections).unwrap_err();
    assert_eq!(err.pattern, "github.[");
    assert!(err.reason.contains("glob"), "{}", err.reason);
}

// ---------------------------------------------------------------------------------------------
// Provenance and priors
// ---------------------------------------------------------------------------------------------

#[test]
fn fields_no_layer_set_have_baseline_provenance() {
    let r = resolve(&[(provider("github"), &layer("value_class = \"critical\""))]);
    assert_eq!(r.source_of("value_class"), Some(&provider("github")));
    for path in [
        "side_effect_class",
        "cost_model.typical_kb",
        "field_groups",
        "follow_up",
        "invalidates",
        "speculate",
        "fail_fast_after_n",
        "rate_limit_host",
        "cost_model.max_kb",
        "cost_model.latency_ms_p50",
        "cost_model.dollars",
        "cost_model.freshness_ttl_s",
    ] {
        assert_eq!(r.source_of(path), Some(&LayerSource::Baseline), "{path}");
    }
    assert_eq!(r.source_of("no_such_field"), None);

    let nothing = resolve(&[]);
    assert_eq!(nothing.model, ToolValueModel::default());
    assert!(nothing.provenance.values().all(|s| *s == LayerSource::Baseline));
}

#[test]
fn the_builtin_prior_holds_unless_the_provider_says_otherwise() {
    let none = UserLayers::default();
    let r = effective("github.get_issue", None, &none);
    assert_eq!(r.model.side_effect_class, SideEffectClass::ReadOnly);
    assert_eq!(r.model.value_class, ValueClass::Critical);
    assert!(r.model.may_speculate());
    assert_eq!(r.source_of("side_effect_class"), Some(&builtin("verb:get")));

    let says_otherwise = layer("side_effect_class = \"mutates_external\"");
    let r = effective("github.get_issue", Some(&says_otherwise), &none);
    assert_eq!(r.model.side_effect_class, SideEffectClass::MutatesExternal);
    assert_eq!(r.source_of("side_effect_class"), Some(&provider("github")));
    assert_eq!(r.model.value_class, ValueClass::Critical);

    let r = effective("github.issue_comments", None, &none);
    assert_eq!(r.model.side_effect_class, SideEffectClass::Indeterminate);
    assert_eq!(r.source_of("side_effect_class"), Some(&builtin("shape:unknown")));

    // Named priors merge like any other layer.
    let r = effective("claude.Grep", None, &user(&[("claude.*", "follow_up = []")]));
    assert_eq!(r.model.side_effect_class, SideEffectClass::Pure);
    assert!(r.model.follow_up.is_empty());
}

#[test]
fn json_and_toml_forms_of_a_layer_are_equal() {
    let from_json = json_layer(
        r#"{
            "value_class": "supporting",
            "invalidates": ["list_issues"],
            "fail_fast_after_n": 3,
            "side_effect_class": "pure",
            "speculate": true,
            "rate_limit_host": "api.github.com",
            "field_groups": {"body": {"fields": ["body"], "estimated_value": 0.4, "default_include": false}},
            "cost_model": {"typical_kb": 3.5, "max_kb": 40.0, "latency_ms_p50": 250, "dollars": 0.001, "freshness_ttl_s": 120},
            "follow_up": [{"tool": "list_issue_comments", "probability": 0.6, "projection": "$.number", "projection_arg": "issue_number"}]
        }"#,
    );
    assert_eq!(from_json, layer(FULL_PROVIDER_LAYER));

    for (json, toml_text) in [
        (
            r#"{"side_effect_class": "mutates_external"}"#,
            r#"side_effect_class = "mutates_external""#,
        ),
        (r#"{"side_effect_class": "mutates_local"}"#, r#"side_effect_class = "mutates_local""#),
        (r#"{"side_effect_class": "read_only"}"#, r#"side_effect_class = "read_only""#),
        (r#"{"value_class": "audit_only"}"#, r#"value_class = "audit_only""#),
        (r#"{"follow_up": []}"#, "follow_up = []"),
        (r#"{}"#, ""),
    ] {
        let (a, b) = (json_layer(json), layer(toml_text));
        assert_eq!(a, b, "{json}");
        // And the layer serializes back to the same JSON, enum values in snake_case.
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            serde_json::from_str::<serde_json::Value>(json).unwrap()
        );
    }
    assert!(json_layer("{}").is_empty());
}
