//! Value models: what a tool call is worth, what it costs, what usually follows it, and whether it
//! is safe to run speculatively.
//!
//! A model is assembled from layers. Each source — the built-in priors, the provider, the user's
//! `[tools."*"]`, `[tools."github.*"]` and `[tools."github.get_issue"]` sections — contributes a
//! [`ValueModelLayer`] that names only the fields it sets. [`resolve`] merges them right-wins, field
//! by field: a later layer overrides only what it names; maps (`field_groups`) merge by key and each
//! group field by field; lists (`follow_up`, `invalidates`) are replaced whole. The result records
//! which layer set each field, so `quiver tools show` can say why a tool behaves as it does.
//!
//! The merge works on the layers' JSON form. That is deliberate: a field added to a layer type is
//! merged without anyone remembering to add a line to a hand-written merge, which is how the
//! reference implementation lost a provider layer and a config section.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use globset::{Glob, GlobMatcher};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// First-pass importance of a tool's result.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ValueClass {
    /// The answer itself: file content, the issue asked about, search hits.
    Critical,
    /// Useful context.
    Supporting,
    /// Nice to have; dropped first under a budget.
    Optional,
    /// Agent bookkeeping (task lists, todo updates); never counted against a budget.
    AuditOnly,
}

impl ValueClass {
    /// The planner's value weight for this class.
    #[inline]
    pub fn score(self) -> f64 {
        match self {
            ValueClass::Critical => 1.0,
            ValueClass::Supporting => 0.6,
            ValueClass::Optional => 0.3,
            ValueClass::AuditOnly => 0.0,
        }
    }
}

/// What running a tool does to the world; decides whether it may run speculatively.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SideEffectClass {
    /// Deterministic and idempotent: the same arguments give the same result.
    Pure,
    /// Changes nothing; the result may change over time (freshness via TTL).
    ReadOnly,
    /// Changes local state (files on this machine).
    MutatesLocal,
    /// Changes a remote service (creates an issue, posts a comment).
    MutatesExternal,
    /// Unknown; treated as unsafe.
    #[default]
    Indeterminate,
}

impl SideEffectClass {
    /// Whether a call may be issued without the agent asking for it: only `Pure` and `ReadOnly`.
    #[inline]
    pub fn is_speculatable(self) -> bool {
        matches!(self, SideEffectClass::Pure | SideEffectClass::ReadOnly)
    }
}

/// A named subset of a tool's response fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldGroup {
    /// Fields of the structured result in this group, as paths in the projection syntax of
    /// [`crate::projection`]: `body`, `head.sha`, `files[*].patch` (a field of every element).
    #[serde(default)]
    pub fields: Vec<String>,
    /// How much the model gains from this group, 0..=1.
    #[serde(default = "default_estimated_value")]
    pub estimated_value: f64,
    /// Whether responses include the group unless the call asks otherwise.
    #[serde(default = "default_true")]
    pub default_include: bool,
}

fn default_estimated_value() -> f64 {
    0.5
}
fn default_true() -> bool {
    true
}

/// What a call costs: size, time, money, and how long its result stays fresh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CostModel {
    /// Typical response size in KiB; the planner's token estimate is anchored on it.
    #[serde(default = "default_typical_kb")]
    pub typical_kb: f64,
    /// Hard cap on the response size in KiB; larger responses are cut, saying so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_kb: Option<f64>,
    /// Median latency in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms_p50: Option<u32>,
    /// Money per call in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dollars: Option<f64>,
    /// Seconds an identical call may be served from the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freshness_ttl_s: Option<u64>,
}

fn default_typical_kb() -> f64 {
    2.0
}

impl Default for CostModel {
    fn default() -> Self {
        Self {
            typical_kb: default_typical_kb(),
            max_kb: None,
            latency_ms_p50: None,
            dollars: None,
            freshness_ttl_s: None,
        }
    }
}

/// A call that often follows this one, and how to build its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FollowUpLink {
    /// The next tool: provider-local (`get_issue`) or qualified (`github.get_issue`).
    pub tool: String,
    /// How often the next call follows, 0..=1.
    pub probability: f64,
    /// A JSON path into this call's result (`$.items[*].number`) for generic argument projection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<String>,
    /// The argument of the next call that receives the projected value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection_arg: Option<String>,
}

/// The effective value model of one tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolValueModel {
    /// Importance of the result.
    pub value_class: ValueClass,
    /// Named subsets of the response, by group name.
    #[serde(default)]
    pub field_groups: BTreeMap<String, FieldGroup>,
    /// Size, time, money and freshness.
    #[serde(default)]
    pub cost_model: CostModel,
    /// Calls that often follow.
    #[serde(default)]
    pub follow_up: Vec<FollowUpLink>,
    /// Tools whose cached results this call makes stale.
    #[serde(default)]
    pub invalidates: Vec<String>,
    /// Stop the n+1-th identical unproductive call; `None` or 0 never stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_fast_after_n: Option<u32>,
    /// What the call does to the world.
    #[serde(default)]
    pub side_effect_class: SideEffectClass,
    /// `Some(false)` forbids speculation whatever the side-effect class says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculate: Option<bool>,
    /// The host whose rate limit this call spends, e.g. `api.github.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit_host: Option<String>,
}

impl Default for ToolValueModel {
    fn default() -> Self {
        Self {
            value_class: ValueClass::Supporting,
            field_groups: BTreeMap::new(),
            cost_model: CostModel::default(),
            follow_up: Vec::new(),
            invalidates: Vec::new(),
            fail_fast_after_n: None,
            side_effect_class: SideEffectClass::Indeterminate,
            speculate: None,
            rate_limit_host: None,
        }
    }
}

impl ToolValueModel {
    /// Whether the host may run this tool without the agent asking: the side-effect class allows it
    /// and `speculate = false` was not set (which always wins).
    #[inline]
    pub fn may_speculate(&self) -> bool {
        self.side_effect_class.is_speculatable() && self.speculate != Some(false)
    }
}

/// A partial [`FieldGroup`]: only the fields a layer sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldGroupLayer {
    /// See [`FieldGroup::fields`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<String>>,
    /// See [`FieldGroup::estimated_value`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_value: Option<f64>,
    /// See [`FieldGroup::default_include`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_include: Option<bool>,
}

/// A partial [`CostModel`]: only the fields a layer sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CostModelLayer {
    /// See [`CostModel::typical_kb`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typical_kb: Option<f64>,
    /// See [`CostModel::max_kb`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_kb: Option<f64>,
    /// See [`CostModel::latency_ms_p50`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms_p50: Option<u32>,
    /// See [`CostModel::dollars`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dollars: Option<f64>,
    /// See [`CostModel::freshness_ttl_s`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freshness_ttl_s: Option<u64>,
}

/// What one source says about a tool: every field optional, unknown fields rejected (a misspelt key
/// in a user's TOML is an error, not a silently ignored line).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ValueModelLayer {
    /// See [`ToolValueModel::value_class`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_class: Option<ValueClass>,
    /// See [`ToolValueModel::field_groups`]; merged by group name, each group field by field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_groups: Option<BTreeMap<String, FieldGroupLayer>>,
    /// See [`ToolValueModel::cost_model`]; merged field by field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_model: Option<CostModelLayer>,
    /// See [`ToolValueModel::follow_up`]; replaced whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_up: Option<Vec<FollowUpLink>>,
    /// See [`ToolValueModel::invalidates`]; replaced whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalidates: Option<Vec<String>>,
    /// See [`ToolValueModel::fail_fast_after_n`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_fast_after_n: Option<u32>,
    /// See [`ToolValueModel::side_effect_class`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effect_class: Option<SideEffectClass>,
    /// See [`ToolValueModel::speculate`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculate: Option<bool>,
    /// See [`ToolValueModel::rate_limit_host`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit_host: Option<String>,
}

impl ValueModelLayer {
    /// Whether the layer sets nothing.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// Checks the ranges the types cannot express; the message names the field and the bound.
    pub fn validate(&self) -> Result<(), String> {
        let unit = |what: String, x: f64| {
            if (0.0..=1.0).contains(&x) {
                Ok(())
            } else {
                Err(format!("{what} = {x} is outside 0..=1"))
            }
        };
        for (name, group) in self.field_groups.iter().flatten() {
            if let Some(v) = group.estimated_value {
                unit(format!("field_groups.{name}.estimated_value"), v)?;
            }
        }
        for (i, link) in self.follow_up.iter().flatten().enumerate() {
            unit(format!("follow_up[{i}].probability (tool `{}`)", link.tool), link.probability)?;
            if link.tool.trim().is_empty() {
                return Err(format!("follow_up[{i}].tool is empty"));
            }
        }
        if let Some(cost) = &self.cost_model {
            for (field, v) in [("typical_kb", cost.typical_kb), ("max_kb", cost.max_kb)] {
                if let Some(v) = v.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                    return Err(format!("cost_model.{field} = {v} must be a size ≥ 0"));
                }
            }
            if let Some(d) = cost.dollars.filter(|d| !(d.is_finite() && *d >= 0.0)) {
                return Err(format!("cost_model.dollars = {d} must be ≥ 0"));
            }
        }
        Ok(())
    }
}

/// Where a layer comes from, in merge order (later wins).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "layer", content = "name", rename_all = "snake_case")]
pub enum LayerSource {
    /// The type's own default, when no layer set the field.
    Baseline,
    /// A built-in prior, named after the rule that produced it (`verb:get`, `builtin:Read`).
    BuiltIn(String),
    /// The provider's `value_model`, named after the provider.
    Provider(String),
    /// The user's `[tools."*"]`.
    UserWildcard,
    /// A user glob section such as `[tools."github.*"]`, named by its pattern.
    UserGlob(String),
    /// The user's section for exactly this tool.
    UserExact(String),
}

impl LayerSource {
    /// Whether the layer is the user's config (`[tools."*"]`, a glob, or the tool's own section):
    /// what the operator says, as opposed to quiver's priors or a provider.
    pub fn is_user(&self) -> bool {
        matches!(
            self,
            LayerSource::UserWildcard | LayerSource::UserGlob(_) | LayerSource::UserExact(_)
        )
    }
}

impl fmt::Display for LayerSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayerSource::Baseline => f.write_str("baseline"),
            LayerSource::BuiltIn(rule) => write!(f, "built-in {rule}"),
            LayerSource::Provider(name) => write!(f, "provider {name}"),
            LayerSource::UserWildcard => f.write_str(r#"config [tools."*"]"#),
            LayerSource::UserGlob(p) | LayerSource::UserExact(p) => {
                write!(f, r#"config [tools."{p}"]"#)
            }
        }
    }
}

/// An effective model and the layer that set each of its fields.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedValueModel {
    /// The merged model.
    pub model: ToolValueModel,
    /// Field path (`value_class`, `cost_model.typical_kb`, `field_groups.body.default_include`) →
    /// the layer that set it. Paths nobody set map to [`LayerSource::Baseline`].
    pub provenance: BTreeMap<String, LayerSource>,
}

impl ResolvedValueModel {
    /// The layer that set `path`, if the model has such a field.
    pub fn source_of(&self, path: &str) -> Option<&LayerSource> {
        self.provenance.get(path)
    }
}

/// Merges `layers` (earliest first, later wins) over the baseline model.
///
/// Scalars and lists are replaced; objects (the cost model, the field-group map and each group)
/// merge key by key.
pub fn resolve(layers: &[(LayerSource, &ValueModelLayer)]) -> ResolvedValueModel {
    let mut merged = Value::Object(Map::new());
    let mut provenance = BTreeMap::new();
    for (source, layer) in layers {
        let json = serde_json::to_value(layer).expect("a value-model layer is always valid JSON");
        merge_into(&mut merged, json, source, String::new(), &mut provenance);
    }
    // The baseline fills what no layer set: fields missing from `merged` deserialize to defaults.
    let mut full = serde_json::to_value(ToolValueModel::default()).expect("valid JSON");
    merge_into(&mut full, merged, &LayerSource::Baseline, String::new(), &mut BTreeMap::new());
    let model: ToolValueModel = serde_json::from_value(full.clone())
        .expect("merged layers of valid types deserialize into the model");
    record_baseline(&serde_json::to_value(&model).expect("valid JSON"), "", &mut provenance);
    // Unset optional fields (`speculate`, `cost_model.max_kb`) serialize to nothing, so the walk
    // above cannot see them; the type's schema names them.
    for path in model_paths() {
        let prefix = format!("{path}.");
        if !provenance.contains_key(path) && !provenance.keys().any(|k| k.starts_with(&prefix)) {
            provenance.insert(path.clone(), LayerSource::Baseline);
        }
    }
    ResolvedValueModel { model, provenance }
}

/// Every field path of [`ToolValueModel`] (`speculate`, `cost_model.max_kb`, `field_groups`…), read
/// from its JSON schema so that a field added to the type is covered without a hand-kept list.
fn model_paths() -> &'static [String] {
    static PATHS: OnceLock<Vec<String>> = OnceLock::new();
    PATHS.get_or_init(|| {
        let root = serde_json::to_value(schemars::schema_for!(ToolValueModel)).expect("valid JSON");
        let mut out = Vec::new();
        schema_paths(&root, &root, "", &mut out);
        out
    })
}

fn schema_paths(root: &Value, schema: &Value, path: &str, out: &mut Vec<String>) {
    let referenced = schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#'));
    let schema = referenced.and_then(|pointer| root.pointer(pointer)).unwrap_or(schema);
    match schema.get("properties").and_then(Value::as_object) {
        Some(properties) => {
            for (key, child) in properties {
                let child_path =
                    if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                schema_paths(root, child, &child_path, out);
            }
        }
        None if !path.is_empty() => out.push(path.to_owned()),
        None => {}
    }
}

fn merge_into(
    target: &mut Value,
    layer: Value,
    source: &LayerSource,
    path: String,
    provenance: &mut BTreeMap<String, LayerSource>,
) {
    match (target, layer) {
        (Value::Object(target), Value::Object(layer)) => {
            for (key, value) in layer {
                let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                let slot = target.entry(key).or_insert(Value::Null);
                if value.is_object() && !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                merge_into(slot, value, source, child, provenance);
            }
        }
        (target, layer) => {
            // A replaced subtree forgets where its old leaves came from.
            let prefix = format!("{path}.");
            provenance.retain(|k, _| !k.starts_with(&prefix));
            provenance.insert(path, source.clone());
            *target = layer;
        }
    }
}

fn record_baseline(value: &Value, path: &str, provenance: &mut BTreeMap<String, LayerSource>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let child_path =
                    if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                if provenance.contains_key(&child_path) {
                    continue;
                }
                record_baseline(child, &child_path, provenance);
            }
        }
        _ if !path.is_empty() => {
            provenance.entry(path.to_owned()).or_insert(LayerSource::Baseline);
        }
        _ => {}
    }
}

/// Why a user's `[tools."…"]` key cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("[tools.\"{pattern}\"]: {reason}")]
pub struct UserLayerError {
    /// The section key as written.
    pub pattern: String,
    /// What is wrong with it, and how to fix it.
    pub reason: String,
}

/// The user's `[tools."…"]` sections, ready to be matched against qualified tool names.
#[derive(Debug, Clone, Default)]
pub struct UserLayers {
    wildcard: Option<ValueModelLayer>,
    /// Sorted by pattern length, shortest first, so the longest (most specific) glob applies last.
    globs: Vec<(String, GlobMatcher, ValueModelLayer)>,
    exact: BTreeMap<String, ValueModelLayer>,
}

impl UserLayers {
    /// Sorts sections into wildcard, globs and exact names, and validates each layer.
    pub fn new(sections: BTreeMap<String, ValueModelLayer>) -> Result<Self, UserLayerError> {
        let mut layers = Self::default();
        for (pattern, layer) in sections {
            layer
                .validate()
                .map_err(|reason| UserLayerError { pattern: pattern.clone(), reason })?;
            if pattern == "*" {
                layers.wildcard = Some(layer);
            } else if pattern.contains(['*', '?', '[', '{']) {
                let glob = Glob::new(&pattern).map_err(|e| UserLayerError {
                    pattern: pattern.clone(),
                    reason: format!("not a valid glob ({e}); write e.g. \"github.*\""),
                })?;
                layers.globs.push((pattern, glob.compile_matcher(), layer));
            } else {
                layers.exact.insert(pattern, layer);
            }
        }
        layers.globs.sort_by(|a, b| a.0.len().cmp(&b.0.len()).then_with(|| a.0.cmp(&b.0)));
        Ok(layers)
    }

    /// The user layers that apply to `qualified_name`, in merge order: `*`, globs (shortest
    /// pattern first), exact.
    pub fn layers_for<'a>(
        &'a self,
        qualified_name: &str,
    ) -> Vec<(LayerSource, &'a ValueModelLayer)> {
        let mut out = Vec::new();
        if let Some(layer) = &self.wildcard {
            out.push((LayerSource::UserWildcard, layer));
        }
        for (pattern, matcher, layer) in &self.globs {
            if matcher.is_match(qualified_name) {
                out.push((LayerSource::UserGlob(pattern.clone()), layer));
            }
        }
        if let Some(layer) = self.exact.get(qualified_name) {
            out.push((LayerSource::UserExact(qualified_name.to_owned()), layer));
        }
        out
    }

    /// Exact section names, so the host can warn about sections that match no tool.
    pub fn exact_names(&self) -> impl Iterator<Item = &str> {
        self.exact.keys().map(String::as_str)
    }
}
