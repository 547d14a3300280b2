//! Text embedders beside the built-in one: a neural sentence embedder run in process
//! (`[selector.embedder] type = "local"`), which embeds the tools in the embeddings enrichment and
//! each query in the selector.
//!
//! The model itself lives in `quiver-local-embedder` (a BERT forward pass of its own, and tokenizers), compiled in with the
//! `local-embedder` cargo feature (on by default); a build without it reports a local embedder in
//! the config as an error that says how to get one, instead of ranking silently on words alone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A model that turns texts into vectors, one per text, in order.
pub trait TextEmbedder: Send + Sync + std::fmt::Debug {
    /// The model's identity for cache keys: two models with one id give the same vectors.
    fn model_id(&self) -> &str;
    /// One vector per text, in order: texts to be found (tools, their names, inputs, outputs).
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String>;
    /// One vector per text, in order: requests looking for tools. The same as
    /// [`TextEmbedder::embed`] unless the model asks queries to be phrased otherwise (a
    /// sentence-transformers query prompt such as e5's "query: ").
    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.embed(texts)
    }
}

/// The selector's vectors of `tools` (qualified name, spec) by `model`, in memory, as the
/// embeddings enrichment has them: each tool's whole text and, unless `names` is false, its name
/// in words ([`quiver_core::enrich::embed::name_text`]). For evaluating a tool file and for
/// benches; the enrichment pass also embeds inputs and outputs, and caches.
pub fn embed_for_selection<'a>(
    model: &dyn TextEmbedder,
    tools: impl IntoIterator<Item = (&'a str, &'a quiver_core::ToolSpec)>,
    names: bool,
) -> Result<quiver_core::enrich::embed::EmbeddingsArtifact, String> {
    use quiver_core::enrich::embed::{name_text, tool_texts, ToolEmbedding};
    let tools: Vec<(&str, &quiver_core::ToolSpec)> = tools.into_iter().collect();
    let mut texts = Vec::new();
    for (name, spec) in &tools {
        texts.push(tool_texts(name, spec).tool);
        if names {
            texts.push(name_text(name));
        }
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = model.embed(&refs)?;
    let per_tool = if names { 2 } else { 1 };
    if vectors.len() != texts.len() {
        return Err(format!("{} vectors for {} texts", vectors.len(), texts.len()));
    }
    Ok(tools
        .iter()
        .zip(vectors.chunks_exact(per_tool))
        .map(|((name, _), v)| {
            let embedding = ToolEmbedding {
                tool: v[0].clone(),
                inputs: vec![],
                outputs: None,
                name: v.get(1).cloned(),
            };
            ((*name).to_owned(), embedding)
        })
        .collect())
}

/// The local model in `path`, loaded once per process and shared (loading reads ~90 MB).
pub fn local(path: &Path) -> Result<Arc<dyn TextEmbedder>, String> {
    static LOADED: Mutex<Option<HashMap<PathBuf, Arc<dyn TextEmbedder>>>> = Mutex::new(None);
    let key = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(model) = loaded.get_or_insert_with(HashMap::new).get(&key) {
        return Ok(Arc::clone(model));
    }
    let model = load(path)?;
    loaded.get_or_insert_with(HashMap::new).insert(key, Arc::clone(&model));
    Ok(model)
}

#[cfg(feature = "local-embedder")]
fn load(path: &Path) -> Result<Arc<dyn TextEmbedder>, String> {
    let model = quiver_local_embedder::LocalEmbedder::load(path)
        .map_err(|e| format!("[selector.embedder] local model: {e}"))?;
    Ok(Arc::new(Local(model)))
}

#[cfg(not(feature = "local-embedder"))]
fn load(path: &Path) -> Result<Arc<dyn TextEmbedder>, String> {
    Err(format!(
        "[selector.embedder] asks for the local model in {}, but this quiver was built without \
         the local embedder; build it with the default features (cargo feature \
         `local-embedder`) or remove [selector.embedder]",
        path.display()
    ))
}

#[cfg(feature = "local-embedder")]
struct Local(quiver_local_embedder::LocalEmbedder);

#[cfg(feature = "local-embedder")]
impl std::fmt::Debug for Local {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Local").field(&self.0.model_id()).finish()
    }
}

#[cfg(feature = "local-embedder")]
impl TextEmbedder for Local {
    fn model_id(&self) -> &str {
        self.0.model_id()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.0.embed(texts).map_err(|e| e.to_string())
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.0.embed_queries(texts).map_err(|e| e.to_string())
    }
}
