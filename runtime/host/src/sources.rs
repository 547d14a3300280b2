//! Static tool sources: tool definitions read from files, served as a pseudo-provider.
//!
//! `[[sources]] path = "tools.json"` brings in the tools of any MCP server (its `tools/list`
//! result) or any OpenAI-style function list, so enrichments and tool selection work over any tool
//! set, not only over plugins. Such tools are described, not served: calling one says so.
//!
//! Accepted shapes, detected per file:
//! - an MCP `tools/list` result: `{"tools": [{"name", "description", "inputSchema", "outputSchema"?}]}`,
//!   or a JSON-RPC response wrapping it in `result`, or the bare array of tools;
//! - OpenAI function definitions: `[{"type": "function", "function": {"name", "description",
//!   "parameters"}}]`, or the bare `[{"name", "description", "parameters"}]`, or `{"functions": […]}`
//!   / `{"tools": […]}` holding either.

use std::path::{Path, PathBuf};

use quiver_core::{ToolName, ToolSpec};
use serde::Deserialize;
use serde_json::Value;

/// One `[[sources]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// The file; relative paths are relative to the config file's directory.
    pub path: PathBuf,
    /// The provider name its tools are qualified with (default: the file stem, e.g. `tools`).
    #[serde(default)]
    pub name: Option<String>,
}

/// A tool read from a static source.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticTool {
    /// Qualified as `<source name>.<tool>`.
    pub name: ToolName,
    /// Its definition.
    pub spec: ToolSpec,
    /// The file it came from.
    pub path: PathBuf,
}

/// Why a source file was not read.
#[derive(Debug, thiserror::Error)]
#[error("tool source {}: {message}", path.display())]
pub struct SourceError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl SourceConfig {
    /// The file, resolved against the directory of the config that named it.
    pub fn resolved_path(&self, config_path: Option<&Path>) -> PathBuf {
        match config_path.and_then(Path::parent) {
            Some(dir) if self.path.is_relative() => dir.join(&self.path),
            _ => self.path.clone(),
        }
    }

    /// The provider name its tools are qualified with.
    pub fn source_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            let stem = self.path.file_stem().map(|s| s.to_string_lossy().into_owned());
            stem.unwrap_or_else(|| "tools".into()).replace(['.', ' '], "_")
        })
    }

    /// Reads the file and returns its tools.
    pub fn load(&self, config_path: Option<&Path>) -> Result<Vec<StaticTool>, SourceError> {
        let path = self.resolved_path(config_path);
        let fail = |message: String| SourceError { path: path.clone(), message };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| fail(format!("cannot be read ({e}); check `path` in [[sources]]")))?;
        let json: Value = serde_json::from_str(&text)
            .map_err(|e| fail(format!("is not JSON ({e}); expected an MCP tools/list result or OpenAI function definitions")))?;
        let provider = self.source_name();
        let specs = parse_tools(&json).map_err(fail)?;
        let mut seen = std::collections::BTreeSet::new();
        let mut tools = Vec::with_capacity(specs.len());
        for spec in specs {
            if spec.name.is_empty() || spec.name.contains('.') {
                return Err(fail(format!(
                    "tool name `{}` is invalid: names are non-empty and have no dots",
                    spec.name
                )));
            }
            if !seen.insert(spec.name.clone()) {
                return Err(fail(format!("declares tool `{}` twice", spec.name)));
            }
            tools.push(StaticTool {
                name: ToolName::new(provider.clone(), spec.name.clone()),
                spec,
                path: path.clone(),
            });
        }
        Ok(tools)
    }
}

/// Parses any accepted shape into specs.
pub fn parse_tools(json: &Value) -> Result<Vec<ToolSpec>, String> {
    let list = match json {
        Value::Array(items) => items,
        Value::Object(map) => {
            let inner = map.get("result").unwrap_or(json);
            match inner.get("tools").or_else(|| inner.get("functions")) {
                Some(Value::Array(items)) => items,
                _ => {
                    return Err("has no `tools` or `functions` array; expected an MCP tools/list \
                                result or OpenAI function definitions"
                        .into());
                }
            }
        }
        _ => return Err("is neither a list of tools nor an object holding one".into()),
    };
    list.iter()
        .enumerate()
        .map(|(i, item)| parse_tool(item).map_err(|e| format!("tool #{}: {e}", i + 1)))
        .collect()
}

fn parse_tool(item: &Value) -> Result<ToolSpec, String> {
    // OpenAI's `{"type": "function", "function": {...}}` wraps the definition.
    let def = item.get("function").filter(|f| f.is_object()).unwrap_or(item);
    let name = def.get("name").and_then(Value::as_str).ok_or("has no `name`")?;
    let text = |key: &str| def.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let input_schema = def
        .get("inputSchema")
        .or_else(|| def.get("input_schema"))
        .or_else(|| def.get("parameters"))
        .cloned()
        .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
    if !input_schema.is_object() {
        return Err(format!("`{name}` has an input schema that is not a JSON object"));
    }
    let output_schema = def
        .get("outputSchema")
        .or_else(|| def.get("output_schema"))
        .filter(|v| v.is_object())
        .cloned();
    Ok(ToolSpec {
        name: name.to_owned(),
        group: None,
        description: text("description"),
        input_schema,
        output_schema,
        sensitive_params: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_mcp_tools_list_and_openai_functions_alike() {
        let mcp = json!({"tools": [{"name": "search_docs", "description": "Search the docs",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            "outputSchema": {"type": "object", "properties": {"hits": {"type": "array"}}}}]});
        let openai = json!([{"type": "function", "function": {"name": "search_docs",
            "description": "Search the docs",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]);
        let a = parse_tools(&mcp).unwrap();
        let b = parse_tools(&openai).unwrap();
        assert_eq!(a[0].name, "search_docs");
        assert_eq!(a[0].input_schema, b[0].input_schema);
        assert!(a[0].output_schema.is_some());
        assert!(b[0].output_schema.is_none());
        let rpc = json!({"jsonrpc": "2.0", "id": 1, "result": mcp});
        assert_eq!(parse_tools(&rpc).unwrap(), a);
    }

    #[test]
    fn a_tool_without_a_name_is_refused_with_its_position() {
        let err = parse_tools(&json!([{"name": "ok"}, {"description": "x"}])).unwrap_err();
        assert_eq!(err, "tool #2: has no `name`");
    }

    #[test]
    fn relative_paths_follow_the_config_file() {
        let source = SourceConfig { path: "tools.json".into(), name: None };
        let path = source.resolved_path(Some(Path::new("/etc/quiver/config.toml")));
        assert_eq!(path, Path::new("/etc/quiver/tools.json"));
        assert_eq!(source.source_name(), "tools");
    }
}
