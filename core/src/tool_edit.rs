//! What a user changes of a tool as clients see it, without forking the server that serves it:
//! `[tools."…"]`'s `name` (an alias clients list and call; the old name keeps working, with a
//! note), `description` (replaced) and `description_append`, and per argument `fixed` (removed
//! from the schema, always sent), `default` (filled in when the client sends none), `hide`
//! (removed from the schema, never sent) and `describe` (its description replaced).
//!
//! Sections merge like value-model layers: `*` < globs (shortest first) < the exact name, each
//! field right-wins, arguments field by field. A `name` only in an exact section.

use std::collections::BTreeMap;

use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One argument's edit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgumentEdit {
    /// Always sent with this value; clients do not see the argument.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<Value>,
    /// Sent with this value when the client sends none; the schema says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Clients do not see it, and what a client sends for it anyway is not passed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hide: Option<bool>,
    /// Its description, replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub describe: Option<String>,
}

impl ArgumentEdit {
    fn merge(&mut self, over: &ArgumentEdit) {
        if over.fixed.is_some() {
            self.fixed.clone_from(&over.fixed);
        }
        if over.default.is_some() {
            self.default.clone_from(&over.default);
        }
        if over.hide.is_some() {
            self.hide = over.hide;
        }
        if over.describe.is_some() {
            self.describe.clone_from(&over.describe);
        }
    }

    /// Whether clients no longer see the argument.
    pub fn removes(&self) -> bool {
        self.fixed.is_some() || self.hide == Some(true)
    }
}

/// A tool's edit: what one `[tools."…"]` section says, or all of them merged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolEdit {
    /// The name clients list and call (an MCP name: letters, digits, `_`, `-`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The description, replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Added to the end of the description (after a replacement, if any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description_append: Option<String>,
    /// By argument name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub arguments: BTreeMap<String, ArgumentEdit>,
}

impl ToolEdit {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// `over` applied on top of this edit, right-wins field by field.
    pub fn merge(&mut self, over: &ToolEdit) {
        if over.name.is_some() {
            self.name.clone_from(&over.name);
        }
        if over.description.is_some() {
            self.description.clone_from(&over.description);
        }
        if over.description_append.is_some() {
            self.description_append.clone_from(&over.description_append);
        }
        for (name, edit) in &over.arguments {
            self.arguments.entry(name.clone()).or_default().merge(edit);
        }
    }

    /// The description clients see.
    pub fn description(&self, declared: &str) -> String {
        let mut out = self.description.clone().unwrap_or_else(|| declared.to_owned());
        if let Some(more) = &self.description_append {
            if !out.is_empty() && !out.ends_with(char::is_whitespace) {
                out.push(' ');
            }
            out.push_str(more);
        }
        out
    }

    /// The input schema clients see: fixed and hidden arguments gone (from `properties` and
    /// `required`), defaults and descriptions written in. Arguments the schema does not have
    /// are left alone (see [`ToolEdit::problems`]).
    pub fn schema(&self, declared: &Value) -> Value {
        let mut schema = declared.clone();
        let Some(object) = schema.as_object_mut() else { return schema };
        let mut removed = Vec::new();
        if let Some(Value::Object(properties)) = object.get_mut("properties") {
            for (name, edit) in &self.arguments {
                if edit.removes() {
                    if properties.remove(name).is_some() {
                        removed.push(name.clone());
                    }
                    continue;
                }
                let Some(Value::Object(property)) = properties.get_mut(name) else { continue };
                if let Some(default) = &edit.default {
                    property.insert("default".into(), default.clone());
                }
                if let Some(describe) = &edit.describe {
                    property.insert("description".into(), Value::String(describe.clone()));
                }
            }
        }
        // A default makes an argument optional for the client: quiver fills it in.
        let defaulted: Vec<&String> =
            self.arguments.iter().filter(|(_, e)| e.default.is_some()).map(|(n, _)| n).collect();
        if let Some(Value::Array(required)) = object.get_mut("required") {
            required.retain(|r| {
                r.as_str().is_none_or(|r| {
                    !removed.iter().any(|n| n == r) && !defaulted.contains(&&r.to_owned())
                })
            });
        }
        schema
    }

    /// `arguments` as the tool gets them: fixed values set (whatever the client sent),
    /// defaults filled in, hidden ones dropped.
    pub fn arguments(&self, arguments: &mut Map<String, Value>) {
        for (name, edit) in &self.arguments {
            if let Some(fixed) = &edit.fixed {
                arguments.insert(name.clone(), fixed.clone());
            } else if edit.hide == Some(true) {
                match &edit.default {
                    Some(default) => {
                        arguments.insert(name.clone(), default.clone());
                    }
                    None => {
                        arguments.remove(name);
                    }
                }
            } else if let Some(default) = &edit.default {
                arguments.entry(name.clone()).or_insert_with(|| default.clone());
            }
        }
    }

    /// What in this edit cannot work on a tool with input schema `declared`: an argument it
    /// does not have, a required one hidden with no value to send.
    pub fn problems(&self, declared: &Value) -> Vec<String> {
        let properties = declared.get("properties").and_then(Value::as_object);
        let required: Vec<&str> = declared
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut out = Vec::new();
        for (name, edit) in &self.arguments {
            if !properties.is_some_and(|p| p.contains_key(name)) {
                out.push(format!("it has no argument `{name}`"));
            } else if edit.hide == Some(true)
                && edit.fixed.is_none()
                && edit.default.is_none()
                && required.contains(&name.as_str())
            {
                out.push(format!(
                    "`{name}` is required: hiding it needs `fixed` or `default` to send"
                ));
            }
        }
        out
    }
}

/// One `[tools."…"]` section: its value-model layer and its edit, read in one pass so a
/// misspelt key is still refused where it is written (the layer sees every key but the edit's
/// four, through the same deserializer).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSection {
    /// `value_class`, `cost_model`, `follow_up`…
    pub model: crate::value_model::ValueModelLayer,
    /// `name`, `description`, `description_append`, `arguments`.
    pub edit: ToolEdit,
}

impl<'de> Deserialize<'de> for ToolSection {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SectionVisitor;
        impl<'de> serde::de::Visitor<'de> for SectionVisitor {
            type Value = ToolSection;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a [tools.\"…\"] section")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<ToolSection, A::Error> {
                let mut edit = ToolEdit::default();
                let rest = EditKeysTaken { inner: map, edit: &mut edit };
                let model = crate::value_model::ValueModelLayer::deserialize(
                    serde::de::value::MapAccessDeserializer::new(rest),
                )?;
                Ok(ToolSection { model, edit })
            }
        }
        deserializer.deserialize_map(SectionVisitor)
    }
}

/// A section's entries without the edit's keys, which are read into `edit` on the way.
struct EditKeysTaken<'e, A> {
    inner: A,
    edit: &'e mut ToolEdit,
}

impl<'de, A: serde::de::MapAccess<'de>> serde::de::MapAccess<'de> for EditKeysTaken<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        let mut seed = Some(seed);
        loop {
            // The key is read by the section's own deserializer, so a misspelt one is reported
            // where it is written.
            let peek = PeekKey { seed: &mut seed };
            let Some(key) = self.inner.next_key_seed(peek)? else { return Ok(None) };
            match key {
                Peeked::Layer(value) => return Ok(Some(value)),
                Peeked::Edit(EditKey::Name) => self.edit.name = Some(self.inner.next_value()?),
                Peeked::Edit(EditKey::Description) => {
                    self.edit.description = Some(self.inner.next_value()?)
                }
                Peeked::Edit(EditKey::DescriptionAppend) => {
                    self.edit.description_append = Some(self.inner.next_value()?)
                }
                Peeked::Edit(EditKey::Arguments) => {
                    self.edit.arguments = self.inner.next_value()?
                }
            }
        }
    }

    fn next_value_seed<V: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        self.inner.next_value_seed(seed)
    }
}

/// The edit's keys.
enum EditKey {
    Name,
    Description,
    DescriptionAppend,
    Arguments,
}

/// A section key: one of the edit's, or the layer's key as the layer's seed read it.
enum Peeked<T> {
    Edit(EditKey),
    Layer(T),
}

/// Reads a key: the edit's keys are kept for the edit; any other is handed to the layer's seed
/// (taken from `seed`, used once).
struct PeekKey<'s, K> {
    seed: &'s mut Option<K>,
}

impl<'de, K: serde::de::DeserializeSeed<'de>> serde::de::DeserializeSeed<'de> for PeekKey<'_, K> {
    type Value = Peeked<K::Value>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        struct KeyVisitor<'s, K> {
            seed: &'s mut Option<K>,
        }
        impl<'de, K: serde::de::DeserializeSeed<'de>> serde::de::Visitor<'de> for KeyVisitor<'_, K> {
            type Value = Peeked<K::Value>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self::Value, E> {
                use serde::de::IntoDeserializer;
                Ok(match key {
                    "name" => Peeked::Edit(EditKey::Name),
                    "description" => Peeked::Edit(EditKey::Description),
                    "description_append" => Peeked::Edit(EditKey::DescriptionAppend),
                    "arguments" => Peeked::Edit(EditKey::Arguments),
                    _ => {
                        let seed = self.seed.take().ok_or_else(|| E::custom("a key read twice"))?;
                        let key: serde::de::value::StrDeserializer<'_, E> = key.into_deserializer();
                        Peeked::Layer(seed.deserialize(key)?)
                    }
                })
            }
        }
        deserializer.deserialize_str(KeyVisitor { seed: self.seed })
    }
}

/// Why a `[tools."…"]` section's edit is unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolEditError {
    /// The section's pattern.
    pub pattern: String,
    /// Why, with the fix.
    pub reason: String,
}

/// Every section's edit, matched to tools by pattern.
#[derive(Debug, Clone, Default)]
pub struct UserEdits {
    wildcard: Option<ToolEdit>,
    /// Shortest pattern first, so the most specific glob applies last.
    globs: Vec<(String, GlobMatcher, ToolEdit)>,
    exact: BTreeMap<String, ToolEdit>,
}

/// Whether `name` is one MCP clients accept: 1 to 64 letters, digits, `_` or `-`.
pub fn is_mcp_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl UserEdits {
    /// Sorts the sections' edits by pattern; empty edits are left out.
    pub fn new(sections: BTreeMap<String, ToolEdit>) -> Result<Self, ToolEditError> {
        let mut edits = Self::default();
        for (pattern, edit) in sections {
            if edit.is_empty() {
                continue;
            }
            let error = |reason: String| ToolEditError { pattern: pattern.clone(), reason };
            let glob = pattern == "*" || pattern.contains(['*', '?', '[', '{']);
            if let Some(name) = &edit.name {
                if glob {
                    return Err(error(format!(
                        "name = \"{name}\" names one tool; put it in that tool's own section"
                    )));
                }
                if !is_mcp_name(name) {
                    return Err(error(format!(
                        "name = \"{name}\" is not a name MCP clients accept: 1 to 64 letters, \
                         digits, `_` or `-`"
                    )));
                }
            }
            if pattern == "*" {
                edits.wildcard = Some(edit);
            } else if glob {
                let matcher = Glob::new(&pattern)
                    .map_err(|e| error(format!("not a valid glob ({e}); write e.g. \"github.*\"")))?
                    .compile_matcher();
                edits.globs.push((pattern, matcher, edit));
            } else {
                edits.exact.insert(pattern, edit);
            }
        }
        edits.globs.sort_by(|a, b| a.0.len().cmp(&b.0.len()).then_with(|| a.0.cmp(&b.0)));
        Ok(edits)
    }

    /// The sections whose edits apply to `qualified`, in merge order, with their patterns.
    pub fn sections_for<'a>(&'a self, qualified: &'a str) -> Vec<(&'a str, &'a ToolEdit)> {
        let mut out = Vec::new();
        if let Some(wildcard) = &self.wildcard {
            out.push(("*", wildcard));
        }
        for (pattern, matcher, glob) in &self.globs {
            if matcher.is_match(qualified) {
                out.push((pattern.as_str(), glob));
            }
        }
        if let Some(exact) = self.exact.get(qualified) {
            out.push((qualified, exact));
        }
        out
    }

    /// The edit of `qualified` (all matching sections merged) and the patterns of the sections
    /// that set it, in merge order.
    pub fn edit_for(&self, qualified: &str) -> (ToolEdit, Vec<String>) {
        let mut edit = ToolEdit::default();
        let mut from = Vec::new();
        for (pattern, section) in self.sections_for(qualified) {
            edit.merge(section);
            from.push(pattern.to_owned());
        }
        (edit, from)
    }

    /// Whether any section edits anything.
    pub fn is_empty(&self) -> bool {
        self.wildcard.is_none() && self.globs.is_empty() && self.exact.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn edit(value: Value) -> ToolEdit {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn arguments_are_fixed_defaulted_hidden_and_described() {
        let schema = json!({"type": "object", "properties": {
            "owner": {"type": "string"}, "repo": {"type": "string"},
            "state": {"type": "string"}, "debug": {"type": "boolean"}},
            "required": ["owner", "repo"]});
        let edit = edit(json!({"arguments": {
            "owner": {"fixed": "acme"},
            "state": {"default": "open", "describe": "open, closed or all"},
            "debug": {"hide": true},
            "repo": {"default": "web"}}}));
        assert!(edit.problems(&schema).is_empty());
        let shown = edit.schema(&schema);
        let mut kept: Vec<&String> = shown["properties"].as_object().unwrap().keys().collect();
        kept.sort();
        assert_eq!(kept, ["repo", "state"]);
        assert_eq!(shown["properties"]["state"]["default"], "open");
        assert_eq!(shown["properties"]["state"]["description"], "open, closed or all");
        assert_eq!(shown["required"], json!([]), "fixed and defaulted: nothing left to require");
        let mut sent = json!({"owner": "evil", "debug": true, "repo": "api"});
        edit.arguments(sent.as_object_mut().unwrap());
        assert_eq!(sent, json!({"owner": "acme", "repo": "api", "state": "open"}));
    }

    #[test]
    fn sections_merge_right_wins_and_a_name_belongs_to_one_tool() {
        let sections = BTreeMap::from([
            ("*".to_owned(), edit(json!({"description_append": "(via quiver)"}))),
            ("github.*".to_owned(), edit(json!({"arguments": {"owner": {"fixed": "acme"}}}))),
            (
                "github.get_issue".to_owned(),
                edit(json!({"name": "issue", "description": "An issue."})),
            ),
        ]);
        let edits = UserEdits::new(sections).unwrap();
        let (merged, from) = edits.edit_for("github.get_issue");
        assert_eq!(from, ["*", "github.*", "github.get_issue"]);
        assert_eq!(merged.name.as_deref(), Some("issue"));
        assert_eq!(merged.description("Gets an issue."), "An issue. (via quiver)");
        assert_eq!(merged.arguments["owner"].fixed, Some(json!("acme")));
        let (other, _) = edits.edit_for("gitlab.get_issue");
        assert!(other.name.is_none() && other.arguments.is_empty());

        let glob_name = BTreeMap::from([("github.*".to_owned(), edit(json!({"name": "x"})))]);
        let error = UserEdits::new(glob_name).unwrap_err();
        assert!(error.reason.contains("names one tool"), "{error:?}");
        let bad = BTreeMap::from([("a.b".to_owned(), edit(json!({"name": "has space"})))]);
        assert!(UserEdits::new(bad).unwrap_err().reason.contains("MCP clients accept"));
    }

    #[test]
    fn a_section_holds_a_layer_and_an_edit_and_refuses_typos() {
        let section: ToolSection = toml::from_str(
            "name = \"issue\"\nvalue_class = \"critical\"\n[arguments.owner]\nfixed = \"acme\"\n",
        )
        .unwrap();
        assert_eq!(section.edit.name.as_deref(), Some("issue"));
        assert_eq!(section.edit.arguments["owner"].fixed, Some(json!("acme")));
        assert!(section.model.value_class.is_some());
        let typo = toml::from_str::<ToolSection>("valu_class = \"critical\"\n").unwrap_err();
        assert!(typo.to_string().contains("unknown field `valu_class`"), "{typo}");
        let typo = toml::from_str::<ToolSection>("[arguments.owner]\nfixd = 1\n").unwrap_err();
        assert!(typo.to_string().contains("unknown field `fixd`"), "{typo}");
    }

    #[test]
    fn an_edit_that_cannot_work_says_why() {
        let schema = json!({"type": "object", "properties": {"id": {"type": "string"}},
            "required": ["id"]});
        let edit = edit(json!({"arguments": {"id": {"hide": true}, "nope": {"default": 1}}}));
        let problems = edit.problems(&schema);
        assert!(problems.iter().any(|p| p.contains("no argument `nope`")), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("`id` is required")), "{problems:?}");
    }
}
