//! Clients for the language-model endpoints enrichments use: chat completions (to infer output
//! schemas) and embeddings, each in the OpenAI-compatible and the Ollama dialect.
//!
//! OpenAI-compatible: `POST {base_url}/chat/completions` and `POST {base_url}/embeddings`
//! (`base_url` defaults to `https://api.openai.com/v1`; vLLM, llama.cpp's server, LM Studio and
//! most gateways speak it too). Ollama: `POST {base_url}/api/chat` and `POST {base_url}/api/embed`
//! (`base_url` defaults to `http://localhost:11434`). The API key comes from the environment
//! variable `api_key_env` names and is never part of an error or a log line.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

/// Which dialect an endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LmKind {
    /// OpenAI-compatible `/chat/completions` and `/embeddings`.
    Openai,
    /// Ollama's `/api/chat` and `/api/embed`.
    Ollama,
}

/// `lm = { type = "ollama", model = "…", … }` in an `[[enrichments]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LmConfig {
    /// The dialect.
    #[serde(rename = "type")]
    pub kind: LmKind,
    /// The model name, e.g. `granite3.3:8b` or `gpt-4o-mini`.
    pub model: String,
    /// Where the endpoint is.
    #[serde(default)]
    pub base_url: Option<String>,
    /// The environment variable holding the API key (OpenAI default: `OPENAI_API_KEY`).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Sampling temperature; never part of a cache fingerprint.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Reply length cap.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Per-request timeout in seconds (default 120).
    #[serde(default)]
    pub timeout_s: Option<u64>,
}

impl LmConfig {
    /// The model's identity for fingerprints: dialect and model name, nothing about sampling.
    pub fn model_id(&self) -> String {
        let kind = match self.kind {
            LmKind::Openai => "openai",
            LmKind::Ollama => "ollama",
        };
        format!("{kind}:{}", self.model)
    }

    fn base_url(&self) -> String {
        let default = match self.kind {
            LmKind::Openai => "https://api.openai.com/v1",
            LmKind::Ollama => "http://localhost:11434",
        };
        self.base_url.as_deref().unwrap_or(default).trim_end_matches('/').to_owned()
    }
}

/// Why a request to a model endpoint failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct LmError(pub String);

/// A client for one configured endpoint.
#[derive(Debug, Clone)]
pub struct LmClient {
    config: LmConfig,
    http: reqwest::Client,
    api_key: Option<String>,
    base_url: String,
}

/// How often a 429 or 5xx is retried, and the longest `Retry-After` honoured.
const RETRIES: usize = 2;
const MAX_RETRY_WAIT: Duration = Duration::from_secs(10);

impl LmClient {
    /// A client for `config`. Fails when the OpenAI default endpoint is used without a key.
    pub fn new(config: &LmConfig) -> Result<Self, LmError> {
        let key_env = config
            .api_key_env
            .clone()
            .or_else(|| (config.kind == LmKind::Openai).then(|| "OPENAI_API_KEY".to_owned()));
        let api_key = key_env
            .as_deref()
            .and_then(|name| std::env::var(name).ok())
            .filter(|v| !v.trim().is_empty());
        if api_key.is_none() && config.kind == LmKind::Openai && config.base_url.is_none() {
            return Err(LmError(format!(
                "model `{}` at api.openai.com needs an API key: set ${}",
                config.model,
                key_env.unwrap_or_default()
            )));
        }
        if let Some(key) = &api_key {
            crate::logging::register_secret(key);
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(config.timeout_s.unwrap_or(120)))
            .user_agent(concat!("quiver/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LmError(format!("cannot build an HTTP client: {e}")))?;
        Ok(Self { base_url: config.base_url(), config: config.clone(), http, api_key })
    }

    /// The configuration.
    pub fn config(&self) -> &LmConfig {
        &self.config
    }

    /// One chat turn: `system` then `user`, asking for a JSON reply; returns the reply text.
    pub async fn chat_json(&self, system: &str, user: &str) -> Result<String, LmError> {
        let messages = json!([
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]);
        let c = &self.config;
        let (url, body) = match c.kind {
            LmKind::Openai => {
                let mut body = json!({
                    "model": c.model,
                    "messages": messages,
                    "response_format": {"type": "json_object"},
                });
                if let Some(t) = c.temperature {
                    body["temperature"] = json!(t);
                }
                if let Some(m) = c.max_tokens {
                    body["max_tokens"] = json!(m);
                }
                (format!("{}/chat/completions", self.base_url), body)
            }
            LmKind::Ollama => {
                let mut options = serde_json::Map::new();
                if let Some(t) = c.temperature {
                    options.insert("temperature".into(), json!(t));
                }
                if let Some(m) = c.max_tokens {
                    options.insert("num_predict".into(), json!(m));
                }
                let body = json!({
                    "model": c.model,
                    "messages": messages,
                    "stream": false,
                    "format": "json",
                    "options": options,
                });
                (format!("{}/api/chat", self.base_url), body)
            }
        };
        let reply = self.post(&url, &body).await?;
        let content = match c.kind {
            LmKind::Openai => reply.pointer("/choices/0/message/content"),
            LmKind::Ollama => reply.pointer("/message/content"),
        };
        content.and_then(Value::as_str).map(str::to_owned).ok_or_else(|| {
            LmError(format!("{url} answered without a message: {}", preview(&reply)))
        })
    }

    /// Embeds `texts`, in order.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LmError> {
        let c = &self.config;
        let (url, body) = match c.kind {
            LmKind::Openai => {
                (format!("{}/embeddings", self.base_url), json!({"model": c.model, "input": texts}))
            }
            LmKind::Ollama => {
                (format!("{}/api/embed", self.base_url), json!({"model": c.model, "input": texts}))
            }
        };
        let reply = self.post(&url, &body).await?;
        let vectors: Option<Vec<Vec<f32>>> = match c.kind {
            LmKind::Openai => {
                #[derive(Deserialize)]
                struct Item {
                    embedding: Vec<f32>,
                    #[serde(default)]
                    index: Option<usize>,
                }
                #[derive(Deserialize)]
                struct Reply {
                    data: Vec<Item>,
                }
                serde_json::from_value::<Reply>(reply.clone()).ok().map(|r| {
                    let mut items = r.data;
                    // The API may answer out of order; `index` says where each belongs.
                    items.sort_by_key(|i| i.index.unwrap_or(usize::MAX));
                    items.into_iter().map(|i| i.embedding).collect()
                })
            }
            LmKind::Ollama => reply
                .get("embeddings")
                .and_then(|e| serde_json::from_value::<Vec<Vec<f32>>>(e.clone()).ok()),
        };
        match vectors {
            Some(v) if v.len() == texts.len() => Ok(v),
            Some(v) => Err(LmError(format!(
                "{url} returned {} embeddings for {} inputs",
                v.len(),
                texts.len()
            ))),
            None => Err(LmError(format!("{url} answered without embeddings: {}", preview(&reply)))),
        }
    }

    async fn post(&self, url: &str, body: &Value) -> Result<Value, LmError> {
        let mut attempt = 0;
        loop {
            let mut request = self.http.post(url).json(body);
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key);
            }
            let response = request.send().await.map_err(|e| {
                LmError(format!("cannot reach {url}: {}; check `base_url`", e.without_url()))
            })?;
            let status = response.status();
            if (status.as_u16() == 429 || status.is_server_error()) && attempt < RETRIES {
                attempt += 1;
                let wait = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs)
                    .unwrap_or(Duration::from_millis(500 * attempt as u64))
                    .min(MAX_RETRY_WAIT);
                tracing::info!(%url, %status, ?wait, "model endpoint asked to retry");
                tokio::time::sleep(wait).await;
                continue;
            }
            let text = response.text().await.map_err(|e| {
                LmError(format!("{url}: reading the reply failed: {}", e.without_url()))
            })?;
            if !status.is_success() {
                let hint = match status.as_u16() {
                    401 | 403 => "; check the API key variable (`api_key_env`)",
                    404 => "; check `base_url` and `model`",
                    429 => "; the endpoint is rate limiting, try again later",
                    _ => "",
                };
                return Err(LmError(format!(
                    "{url} answered {status}: {}{hint}",
                    crate::logging::scrub(&truncate(&text, 300))
                )));
            }
            return serde_json::from_str(&text).map_err(|e| {
                LmError(format!(
                    "{url} answered with something that is not JSON ({e}): {}",
                    truncate(&text, 200)
                ))
            });
        }
    }
}

fn preview(value: &Value) -> String {
    truncate(&value.to_string(), 200)
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// Pulls the JSON object out of a model's reply: code fences and prose around it are common.
pub fn extract_json(reply: &str) -> Option<Value> {
    let trimmed = reply.trim();
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        return Some(v);
    }
    let start = trimmed.find('{')?;
    let end = trimmed.rfind('}')?;
    (start < end).then(|| serde_json::from_str(&trimmed[start..=end]).ok()).flatten()
}

const JSON_TYPES: [&str; 7] = ["object", "array", "string", "integer", "number", "boolean", "null"];

/// Checks that `schema` is a usable output schema: a JSON Schema whose every `type` is a JSON
/// type, whose `properties` and `items` are schemas, and whose `required` lists strings; and that
/// it describes something (a typed value, or a composition). Returns what is wrong.
pub fn check_output_schema(schema: &Value) -> Result<(), String> {
    fn check(schema: &Value, at: &str, depth: usize) -> Result<(), String> {
        if depth > 12 {
            return Err(format!("{at}: nested deeper than 12 levels"));
        }
        let Some(map) = schema.as_object() else {
            return Err(format!("{at}: a schema must be a JSON object"));
        };
        match map.get("type") {
            None => {}
            Some(Value::String(t)) if JSON_TYPES.contains(&t.as_str()) => {}
            Some(Value::Array(ts))
                if !ts.is_empty()
                    && ts.iter().all(|t| t.as_str().is_some_and(|t| JSON_TYPES.contains(&t))) => {}
            Some(other) => return Err(format!("{at}: `type` {other} is not a JSON type")),
        }
        if let Some(props) = map.get("properties") {
            let Some(props) = props.as_object() else {
                return Err(format!("{at}: `properties` must be an object"));
            };
            for (name, sub) in props {
                check(sub, &format!("{at}.properties.{name}"), depth + 1)?;
            }
        }
        if let Some(items) = map.get("items") {
            check(items, &format!("{at}.items"), depth + 1)?;
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(list) = map.get(key) {
                let Some(list) = list.as_array() else {
                    return Err(format!("{at}: `{key}` must be a list of schemas"));
                };
                for (i, sub) in list.iter().enumerate() {
                    check(sub, &format!("{at}.{key}[{i}]"), depth + 1)?;
                }
            }
        }
        if let Some(required) = map.get("required") {
            if !required.as_array().is_some_and(|r| r.iter().all(Value::is_string)) {
                return Err(format!("{at}: `required` must be a list of property names"));
            }
        }
        Ok(())
    }
    check(schema, "schema", 0)?;
    let describes = ["type", "properties", "items", "anyOf", "oneOf", "allOf", "$ref"]
        .iter()
        .any(|k| schema.get(k).is_some());
    if !describes {
        return Err("the schema describes nothing: it needs a `type` (with `properties` or \
                    `items`) or a composition"
            .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_replies_are_unwrapped() {
        let v = extract_json("Here it is:\n```json\n{\"type\": \"object\"}\n```").unwrap();
        assert_eq!(v, json!({"type": "object"}));
        assert!(extract_json("no json here").is_none());
    }

    #[test]
    fn schema_check_names_the_bad_place() {
        assert!(check_output_schema(
            &json!({"type": "object", "properties": {"n": {"type": "integer"}}})
        )
        .is_ok());
        let err =
            check_output_schema(&json!({"type": "object", "properties": {"n": {"type": "int"}}}))
                .unwrap_err();
        assert_eq!(err, "schema.properties.n: `type` \"int\" is not a JSON type");
        let err = check_output_schema(&json!({"answer": 42})).unwrap_err();
        assert!(err.contains("describes nothing"), "{err}");
    }

    #[test]
    fn model_id_ignores_sampling() {
        let a: LmConfig =
            toml::from_str("type = \"ollama\"\nmodel = \"m\"\ntemperature = 0.1").unwrap();
        let b: LmConfig =
            toml::from_str("type = \"ollama\"\nmodel = \"m\"\ntemperature = 0.9").unwrap();
        assert_eq!(a.model_id(), b.model_id());
    }
}
