//! Value models as a table: one readable `const` row per tool instead of a hand-built
//! [`ValueModelLayer`] per tool.
//!
//! A provider knows the same dozen facts about each of its tools — how valuable the result is,
//! whether the call changes anything, how large and slow it usually is, how long it stays fresh,
//! which calls follow it and which results it makes stale. Written as [`ValueModelLayer`]s those
//! facts drown in `Some(…)`, `to_owned()` and `collect()`; written as rows of a table they can be
//! read, reviewed and compared at a glance, and the conversion to a layer is written once, here.
//!
//! A provider declares its defaults once (spreading [`ToolModel::READ_ONLY`]), one row per tool
//! (spreading its defaults), and answers [`ToolEnricher::value_model`](crate::ToolEnricher) with
//! [`find`] and [`ToolModel::layer`]:
//!
//! ```
//! use quiver_plugin_sdk::model_table::{self, ToolModel};
//! use quiver_plugin_sdk::{SideEffectClass, ValueClass};
//!
//! /// This provider's defaults: a small, quick, cacheable read.
//! const ROW: ToolModel = ToolModel { latency_ms_p50: 450, ..ToolModel::READ_ONLY };
//!
//! static MODELS: &[ToolModel] = &[
//!     ToolModel { tool: "search", value_class: ValueClass::Critical, typical_kb: 4.0,
//!                 follow_up: &[("get", 0.5, "$.hits[*].id", "id")], ..ROW },
//!     ToolModel { tool: "get", field_groups: &[("body", &["body"], 0.8, true)], ..ROW },
//!     ToolModel { tool: "create", side_effect: SideEffectClass::MutatesExternal,
//!                 freshness_ttl_s: 0, invalidates: &["search"], ..ROW },
//! ];
//!
//! let create = model_table::find(MODELS, "demo", "demo.create").unwrap().layer(Some("api.demo"));
//! assert_eq!(create.speculate, Some(false), "a mutation is never speculated");
//! assert_eq!(create.rate_limit_host.as_deref(), Some("api.demo"));
//! assert!(model_table::find(MODELS, "demo", "other.create").is_none());
//! ```

use crate::{
    CostModelLayer, FieldGroupLayer, FollowUpLink, SideEffectClass, ValueClass, ValueModelLayer,
};

/// A field group of a [`ToolModel`]: `(name, fields, estimated value, included by default)`.
pub type FieldGroupRow = (&'static str, &'static [&'static str], f64, bool);

/// A follow-up of a [`ToolModel`]: `(next tool, probability, generic projection, argument)`.
pub type FollowUpRow = (&'static str, f64, &'static str, &'static str);

/// One tool's value model: a row of a provider's table. Every field is set (a row spreads a
/// default with `..`), and [`ToolModel::layer`] turns the row into the layer the host merges.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolModel {
    /// The tool's provider-local name (`get_issue`).
    pub tool: &'static str,
    /// How much the result is worth to the agent.
    pub value_class: ValueClass,
    /// What the call does to the world; a mutation is never speculated.
    pub side_effect: SideEffectClass,
    /// Typical result size in KiB (measured on recorded responses at default arguments).
    pub typical_kb: f64,
    /// The largest result the tool's own caps allow, in KiB.
    pub max_kb: f64,
    /// Median latency in milliseconds.
    pub latency_ms_p50: u32,
    /// Seconds a result may be served from the cache; 0 for mutations.
    pub freshness_ttl_s: u64,
    /// Groups of result fields an agent may leave out; empty for none.
    pub field_groups: &'static [FieldGroupRow],
    /// Calls that often follow this one, with their generic projection; empty for none.
    pub follow_up: &'static [FollowUpRow],
    /// Tools whose cached results this call makes stale; empty for none.
    pub invalidates: &'static [&'static str],
    /// Give up on the tool after this many failures in a row.
    pub fail_fast_after_n: Option<u32>,
}

impl ToolModel {
    /// The default row: a supporting read of 2 KiB (at most 32) that answers in 350 ms and stays
    /// fresh a minute, with no field groups, follow-ups or invalidations. Providers spread it into
    /// their own defaults (`ToolModel { latency_ms_p50: 450, ..ToolModel::READ_ONLY }`).
    pub const READ_ONLY: ToolModel = ToolModel {
        tool: "",
        value_class: ValueClass::Supporting,
        side_effect: SideEffectClass::ReadOnly,
        typical_kb: 2.0,
        max_kb: 32.0,
        latency_ms_p50: 350,
        freshness_ttl_s: 60,
        field_groups: &[],
        follow_up: &[],
        invalidates: &[],
        fail_fast_after_n: None,
    };

    /// Whether the call changes something outside ([`SideEffectClass::MutatesExternal`]).
    pub fn mutates(&self) -> bool {
        matches!(self.side_effect, SideEffectClass::MutatesExternal)
    }

    /// The row as the provider's [`ValueModelLayer`]: every scalar set, empty lists left unset,
    /// `speculate: Some(false)` for a mutation (unset otherwise, so the host's rules decide), and
    /// the host whose rate limit the call spends.
    pub fn layer(&self, rate_limit_host: Option<&str>) -> ValueModelLayer {
        ValueModelLayer {
            value_class: Some(self.value_class),
            side_effect_class: Some(self.side_effect),
            speculate: self.mutates().then_some(false),
            cost_model: Some(CostModelLayer {
                typical_kb: Some(self.typical_kb),
                max_kb: Some(self.max_kb),
                latency_ms_p50: Some(self.latency_ms_p50),
                dollars: None,
                freshness_ttl_s: Some(self.freshness_ttl_s),
            }),
            field_groups: (!self.field_groups.is_empty()).then(|| {
                self.field_groups
                    .iter()
                    .map(|(name, fields, value, include)| {
                        let group = FieldGroupLayer {
                            fields: Some(fields.iter().map(|f| (*f).to_owned()).collect()),
                            estimated_value: Some(*value),
                            default_include: Some(*include),
                        };
                        ((*name).to_owned(), group)
                    })
                    .collect()
            }),
            follow_up: (!self.follow_up.is_empty()).then(|| {
                self.follow_up
                    .iter()
                    .map(|(tool, probability, projection, arg)| FollowUpLink {
                        tool: (*tool).to_owned(),
                        probability: *probability,
                        projection: Some((*projection).to_owned()),
                        projection_arg: Some((*arg).to_owned()),
                    })
                    .collect()
            }),
            invalidates: (!self.invalidates.is_empty())
                .then(|| self.invalidates.iter().map(|t| (*t).to_owned()).collect()),
            fail_fast_after_n: self.fail_fast_after_n,
            rate_limit_host: rate_limit_host.map(str::to_owned),
        }
    }

    /// The generic projection this row declares for the follow-up to `next` (a local name).
    pub fn declared_projection(&self, next: &str) -> Option<&'static str> {
        self.follow_up
            .iter()
            .find(|(tool, ..)| *tool == next)
            .map(|(_, _, projection, _)| *projection)
    }
}

/// `get_issue` for `get_issue` or `github.get_issue` (with `provider` = `github`); any other
/// qualified name (`jira.get_issue`) is returned whole, so it matches none of the provider's rows.
pub fn local_name<'t>(provider: &str, tool: &'t str) -> &'t str {
    tool.strip_prefix(provider).and_then(|rest| rest.strip_prefix('.')).unwrap_or(tool)
}

/// The row of `tool` (local, or qualified with `provider.`) in `table`.
pub fn find<'a>(table: &'a [ToolModel], provider: &str, tool: &str) -> Option<&'a ToolModel> {
    let tool = local_name(provider, tool);
    table.iter().find(|m| m.tool == tool)
}

/// Whether `link`, a follow-up of `prev_tool`, projects otherwise than `table` declares: the
/// user re-pointed it (in quiver.toml), so the provider's own chain logic must step aside for the
/// link's generic projection. A link without a projection is never customised.
pub fn is_customised(
    table: &[ToolModel],
    provider: &str,
    prev_tool: &str,
    link: &FollowUpLink,
) -> bool {
    let next = local_name(provider, &link.tool);
    let declared = find(table, provider, prev_tool).and_then(|m| m.declared_projection(next));
    link.projection.as_deref().is_some_and(|p| Some(p) != declared)
}

#[cfg(test)]
mod tests {
    use super::*;

    use SideEffectClass::{MutatesExternal, ReadOnly};
    use ValueClass::{Critical, Supporting};

    const ROW: ToolModel = ToolModel { max_kb: 16.0, ..ToolModel::READ_ONLY };

    #[rustfmt::skip]
    static MODELS: &[ToolModel] = &[
        ToolModel { tool: "list_items", typical_kb: 6.0,
                    follow_up: &[("get_item", 0.45, "$.items[*].id", "id")], ..ROW },
        ToolModel { tool: "get_item", value_class: Critical, fail_fast_after_n: Some(3),
                    field_groups: &[("body", &["body", "summary"], 0.8, true),
                                    ("raw", &["raw"], 0.1, false)], ..ROW },
        ToolModel { tool: "create_item", side_effect: MutatesExternal, freshness_ttl_s: 0,
                    invalidates: &["list_items", "get_item"], ..ROW },
    ];

    #[test]
    fn a_read_becomes_a_layer_with_every_scalar_and_only_the_lists_it_has() {
        let layer = MODELS[0].layer(Some("api.example.com"));
        assert_eq!(layer.value_class, Some(Supporting));
        assert_eq!(layer.side_effect_class, Some(ReadOnly));
        assert_eq!(layer.speculate, None, "the host's rules decide for reads");
        assert_eq!(
            layer.cost_model,
            Some(CostModelLayer {
                typical_kb: Some(6.0),
                max_kb: Some(16.0),
                latency_ms_p50: Some(350),
                dollars: None,
                freshness_ttl_s: Some(60),
            })
        );
        assert_eq!(
            layer.follow_up,
            Some(vec![FollowUpLink {
                tool: "get_item".into(),
                probability: 0.45,
                projection: Some("$.items[*].id".into()),
                projection_arg: Some("id".into()),
            }])
        );
        assert_eq!(layer.field_groups, None);
        assert_eq!(layer.invalidates, None);
        assert_eq!(layer.fail_fast_after_n, None);
        assert_eq!(layer.rate_limit_host.as_deref(), Some("api.example.com"));
        assert_eq!(MODELS[0].layer(None).rate_limit_host, None);
        layer.validate().unwrap();
    }

    #[test]
    fn field_groups_keep_their_fields_value_and_default() {
        let layer = MODELS[1].layer(None);
        let groups = layer.field_groups.unwrap();
        assert_eq!(groups.len(), 2);
        assert_eq!(
            groups["body"],
            FieldGroupLayer {
                fields: Some(vec!["body".into(), "summary".into()]),
                estimated_value: Some(0.8),
                default_include: Some(true),
            }
        );
        assert_eq!(groups["raw"].default_include, Some(false));
        assert_eq!(layer.value_class, Some(Critical));
        assert_eq!(layer.fail_fast_after_n, Some(3));
        assert_eq!(layer.follow_up, None);
    }

    #[test]
    fn a_mutation_is_never_speculated_and_names_what_it_makes_stale() {
        let layer = MODELS[2].layer(Some("h"));
        assert!(MODELS[2].mutates());
        assert_eq!(layer.side_effect_class, Some(MutatesExternal));
        assert_eq!(layer.speculate, Some(false));
        assert_eq!(layer.cost_model.unwrap().freshness_ttl_s, Some(0));
        assert_eq!(layer.invalidates.unwrap(), ["list_items", "get_item"]);
    }

    #[test]
    fn rows_are_found_by_local_or_own_qualified_name_only() {
        assert_eq!(find(MODELS, "demo", "get_item").map(|m| m.tool), Some("get_item"));
        assert_eq!(find(MODELS, "demo", "demo.get_item").map(|m| m.tool), Some("get_item"));
        assert!(find(MODELS, "demo", "other.get_item").is_none(), "another provider's tool");
        assert!(find(MODELS, "demo", "demoget_item").is_none(), "the dot is required");
        assert!(find(MODELS, "demo", "no_such_tool").is_none());
        assert!(find(MODELS, "demo", "").is_none());
        assert_eq!(local_name("demo", "demo.x"), "x");
        assert_eq!(local_name("demo", "demos.x"), "demos.x");
        assert_eq!(local_name("demo", "other.x"), "other.x");
    }

    #[test]
    fn only_a_re_pointed_projection_is_customised() {
        let link = |tool: &str, projection: Option<&str>| FollowUpLink {
            tool: tool.into(),
            probability: 0.5,
            projection: projection.map(str::to_owned),
            projection_arg: Some("id".into()),
        };
        let declared = Some("$.items[*].id");
        assert_eq!(MODELS[0].declared_projection("get_item"), declared);
        assert!(!is_customised(MODELS, "demo", "list_items", &link("get_item", declared)));
        assert!(!is_customised(
            MODELS,
            "demo",
            "demo.list_items",
            &link("demo.get_item", declared)
        ));
        assert!(!is_customised(MODELS, "demo", "list_items", &link("get_item", None)));
        assert!(is_customised(MODELS, "demo", "list_items", &link("get_item", Some("$.x"))));
        assert!(
            is_customised(MODELS, "demo", "list_items", &link("other.get_item", declared)),
            "another provider's tool declares nothing here"
        );
        assert!(is_customised(MODELS, "demo", "get_item", &link("list_items", declared)));
    }
}
