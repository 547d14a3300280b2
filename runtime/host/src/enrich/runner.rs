//! The enrichment runner: each scheduled pass over the catalog, reading and writing the store.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quiver_core::enrich::dataflow::{self, DataflowIndex, DataflowOptions};
use quiver_core::enrich::embed::{self, EmbeddingsArtifact, LexicalEmbedder, ToolEmbedding};
use quiver_core::enrich::neighbors::{self, NeighborsArtifact};
use quiver_core::enrich::{self as core_enrich, EnrichmentKind, ScheduleError};
use quiver_core::ToolSpec;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::lm::{self, LmClient};
use super::store::{ArtifactStore, StoreError};
use super::{CatalogTool, EnrichmentDecl, EnrichmentSet};
use crate::embedder::TextEmbedder;

/// What one pass did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PassReport {
    /// The enrichment.
    pub kind: EnrichmentKind,
    /// Tools computed now.
    pub computed: usize,
    /// Tools taken from the cache.
    pub reused: usize,
    /// Tools that failed, with the reason.
    pub failed: Vec<(String, String)>,
    /// How long it took.
    #[serde(with = "millis")]
    pub elapsed: Duration,
}

mod millis {
    use std::time::Duration;
    pub(super) fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
}

/// The outcome of a run: the tools (with inferred output schemas), the artifacts, and a report
/// per pass.
#[derive(Debug, Clone, Default)]
pub struct Enriched {
    /// The catalog after `output_parameters`.
    pub tools: Vec<CatalogTool>,
    /// The `embeddings` artifact, when scheduled.
    pub embeddings: Option<EmbeddingsArtifact>,
    /// The `dataflow` artifact, when scheduled.
    pub dataflow: Option<DataflowIndex>,
    /// The `neighbors` artifact, when scheduled.
    pub neighbors: Option<NeighborsArtifact>,
    /// One report per pass that ran.
    pub reports: Vec<PassReport>,
    /// Why the store was not used, when it was not.
    pub store_warning: Option<String>,
}

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Recompute every pass and overwrite the cache (`quiver enrich --force`).
    pub force: bool,
    /// Run only this pass (and, from the cache where possible, what it depends on).
    pub only: Option<EnrichmentKind>,
    /// Draw a progress bar per pass on stderr (only shown on a terminal).
    pub progress: bool,
}

/// Why a run failed as a whole (single tools failing is reported, not an error).
#[derive(Debug, thiserror::Error)]
pub enum EnrichError {
    /// The declared set is invalid.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// No thread or async runtime could be started for the run.
    #[error("cannot run the enrichments: {0}")]
    Runtime(String),
    /// A model endpoint is misconfigured.
    #[error("enrichment '{kind}': {message}")]
    Endpoint {
        /// The pass.
        kind: EnrichmentKind,
        /// What is wrong.
        message: String,
    },
}

/// Runs `set` over `tools`, reading and writing `store` when there is one. `embedder` embeds the
/// tools when the embeddings enrichment names no `lm` (`[selector.embedder]`); the built-in
/// embedder does without one.
pub async fn run(
    tools: Vec<CatalogTool>,
    set: &EnrichmentSet,
    store: Result<&ArtifactStore, &StoreError>,
    options: &RunOptions,
    embedder: Option<&Arc<dyn TextEmbedder>>,
) -> Result<Enriched, EnrichError> {
    let (store, store_warning) = match store {
        Ok(store) => (Some(store), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let mut tools = tools;
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = Enriched { store_warning, ..Enriched::default() };
    let needed = passes_needed(set, options.only);
    let mut cache = Cache { store, warned: false };
    // What the embeddings were computed from; neighbours follow from them alone.
    let mut embedding_keys = BTreeMap::new();
    for &kind in set.schedule().order() {
        if !needed.contains(&kind) {
            continue;
        }
        let decl = set.decl(kind);
        let force = options.force && options.only.is_none_or(|only| only == kind) || decl.force();
        let started = Instant::now();
        let bar = progress_bar(options.progress, kind, tools.len());
        let mut report = PassReport {
            kind,
            computed: 0,
            reused: 0,
            failed: Vec::new(),
            elapsed: Duration::ZERO,
        };
        match decl {
            EnrichmentDecl::OutputParameters { lm, .. } => {
                let client =
                    LmClient::new(lm).map_err(|e| EnrichError::Endpoint { kind, message: e.0 })?;
                output_parameters(&mut tools, &client, &mut cache, force, &mut report, &bar).await;
            }
            EnrichmentDecl::Embeddings { lm, .. } => {
                let model = match (lm, embedder) {
                    (Some(_), Some(_)) => {
                        return Err(EnrichError::Endpoint {
                            kind,
                            message: "both [selector.embedder] and this enrichment's `lm` name \
                                      an embedding model; keep one"
                                .into(),
                        })
                    }
                    (Some(lm), None) => Some(TextModel::Http(
                        LmClient::new(lm)
                            .map_err(|e| EnrichError::Endpoint { kind, message: e.0 })?,
                    )),
                    (None, Some(embedder)) => Some(TextModel::Local(Arc::clone(embedder))),
                    (None, None) => None,
                };
                let (all, version) =
                    embeddings(&tools, model.as_ref(), &mut cache, force, &mut report, &bar).await;
                out.embeddings = Some(all);
                embedding_keys = version;
            }
            EnrichmentDecl::Dataflow { max_neighbors, .. } => {
                out.dataflow =
                    Some(dataflow_pass(&tools, *max_neighbors, &mut cache, force, &mut report));
            }
            EnrichmentDecl::Neighbors { k, .. } => {
                let embeddings = out.embeddings.as_ref().expect("scheduled after embeddings");
                out.neighbors = Some(neighbors_pass(
                    embeddings,
                    &embedding_keys,
                    *k,
                    &mut cache,
                    force,
                    &mut report,
                ));
            }
        }
        bar.finish_and_clear();
        report.elapsed = started.elapsed();
        out.reports.push(report);
    }
    if cache.warned && out.store_warning.is_none() {
        out.store_warning = Some("some cache writes failed; see the log".into());
    }
    out.tools = tools;
    Ok(out)
}

/// The passes to run: all, or `only` and what it depends on.
pub(crate) fn passes_needed(
    set: &EnrichmentSet,
    only: Option<EnrichmentKind>,
) -> BTreeSet<EnrichmentKind> {
    let Some(only) = only else { return set.schedule().order().iter().copied().collect() };
    let mut needed = BTreeSet::from([only]);
    let mut stack = vec![only];
    let declared: BTreeSet<EnrichmentKind> = set.schedule().order().iter().copied().collect();
    while let Some(kind) = stack.pop() {
        let writers = kind.depends_on().iter().filter_map(|a| EnrichmentKind::writing(*a));
        // A pass that changes the tools this one reads runs too (from the cache), or this one
        // would see other schemas than a full run does.
        let before = kind.runs_after().iter().copied().filter(|k| declared.contains(k));
        for other in writers.chain(before).collect::<Vec<_>>() {
            if needed.insert(other) {
                stack.push(other);
            }
        }
    }
    needed
}

fn progress_bar(show: bool, kind: EnrichmentKind, len: usize) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(len as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template("{prefix:>18} [{bar:30}] {pos}/{len} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_prefix(kind.name());
    bar
}

/// The store, or nothing; write failures are logged once and the run goes on uncached.
struct Cache<'a> {
    store: Option<&'a ArtifactStore>,
    warned: bool,
}

impl Cache<'_> {
    fn item(&mut self, kind: EnrichmentKind, key: &str) -> Option<Vec<u8>> {
        let store = self.store?;
        match store.item(kind, key) {
            Ok(v) => v,
            Err(e) => self.warn(e),
        }
    }

    fn artifact(&mut self, kind: EnrichmentKind, fingerprint: &str) -> Option<Vec<u8>> {
        let store = self.store?;
        match store.artifact(kind, fingerprint) {
            Ok(v) => v,
            Err(e) => self.warn(e),
        }
    }

    fn latest_artifact(&mut self, kind: EnrichmentKind) -> Option<Vec<u8>> {
        let store = self.store?;
        let latest = match store.latest(kind) {
            Ok(v) => v?,
            Err(e) => return self.warn(e),
        };
        self.artifact(kind, &latest)
    }

    fn write(
        &mut self,
        kind: EnrichmentKind,
        items: Vec<(String, Vec<u8>)>,
        artifact: Option<(&str, Vec<u8>)>,
    ) {
        let Some(store) = self.store else { return };
        let fingerprint = artifact.as_ref().map(|(fp, _)| (*fp).to_owned());
        if let Err(e) = store.write(kind, items, artifact) {
            self.warn::<()>(e);
            return;
        }
        if let Some(fp) = fingerprint {
            if let Err(e) = store.prune_artifacts(kind, &fp) {
                self.warn::<()>(e);
            }
        }
    }

    fn warn<T>(&mut self, e: StoreError) -> Option<T> {
        if !self.warned {
            tracing::warn!("{e}");
            self.warned = true;
        }
        None
    }
}

// ---- output_parameters ----------------------------------------------------------------------

const OUTPUT_SCHEMA_SYSTEM: &str = "You infer what a tool returns. Reply with one JSON object and \
nothing else: a JSON Schema of the tool's result, with \"type\", \"properties\" for objects and \
\"items\" for arrays, and for each property a \"type\" and a short \"description\". Describe the \
fields a real response of this tool has; do not invent wrapper objects.";

fn output_prompt(tool: &CatalogTool) -> String {
    format!(
        "Tool: {}\nDescription: {}\nInput schema: {}\n\nThe JSON Schema of its result:",
        tool.name, tool.spec.description, tool.spec.input_schema
    )
}

fn output_item_key(model: &str, tool: &CatalogTool) -> String {
    // The item is about this definition: a changed description or input schema asks again.
    let definition = core_enrich::fingerprint([
        tool.spec.description.as_str(),
        &tool.spec.input_schema.to_string(),
    ]);
    format!("{model}/{}/{definition}", tool.name)
}

async fn output_parameters(
    tools: &mut [CatalogTool],
    client: &LmClient,
    cache: &mut Cache<'_>,
    force: bool,
    report: &mut PassReport,
    bar: &indicatif::ProgressBar,
) {
    let model = client.config().model_id();
    let lacking: Vec<usize> =
        (0..tools.len()).filter(|&i| tools[i].spec.output_schema.is_none()).collect();
    bar.set_length(lacking.len() as u64);
    // Tools with a schema of their own pay nothing and are not counted as work.
    let mut pending = Vec::new();
    for &i in &lacking {
        let key = output_item_key(&model, &tools[i]);
        let cached = if force { None } else { cache.item(EnrichmentKind::OutputParameters, &key) };
        match cached.and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok()) {
            Some(schema) => {
                tools[i].spec.output_schema = Some(schema);
                report.reused += 1;
                bar.inc(1);
            }
            None => pending.push((i, key)),
        }
    }
    // A few requests at a time: endpoints serve several, and a local model serialises anyway.
    let semaphore = std::sync::Arc::new(tokio::sync::Semaphore::new(4));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, key) in pending {
        let client = client.clone();
        let tool = tools[i].clone();
        let semaphore = std::sync::Arc::clone(&semaphore);
        tasks.spawn(async move {
            let _permit = semaphore.acquire_owned().await;
            (i, key, infer_output_schema(&client, &tool).await)
        });
    }
    while let Some(joined) = tasks.join_next().await {
        let Ok((i, key, outcome)) = joined else { continue };
        bar.inc(1);
        match outcome {
            Ok(schema) => {
                // One batch per tool: a killed run keeps every schema it already paid for.
                let bytes = serde_json::to_vec(&schema).expect("a JSON value serialises");
                cache.write(EnrichmentKind::OutputParameters, vec![(key, bytes)], None);
                tools[i].spec.output_schema = Some(schema);
                report.computed += 1;
            }
            Err(reason) => {
                tracing::warn!(tool = %tools[i].name, "no output schema inferred: {reason}");
                report.failed.push((tools[i].name.clone(), reason));
            }
        }
    }
    report.failed.sort();
}

/// Asks once, and once more with the reason when the reply is not a usable schema.
async fn infer_output_schema(client: &LmClient, tool: &CatalogTool) -> Result<Value, String> {
    let prompt = output_prompt(tool);
    let mut reason = String::new();
    for attempt in 0..2 {
        let user = if attempt == 0 {
            prompt.clone()
        } else {
            format!(
                "{prompt}\n\nYour previous reply was not a usable JSON Schema ({reason}). Reply \
                 with the JSON Schema object only."
            )
        };
        let reply = client.chat_json(OUTPUT_SCHEMA_SYSTEM, &user).await.map_err(|e| e.0)?;
        match lm::extract_json(&reply) {
            None => reason = "the reply was not JSON".into(),
            Some(schema) => match lm::check_output_schema(&schema) {
                Ok(()) => return Ok(schema),
                Err(e) => reason = e,
            },
        }
    }
    Err(format!("the model's reply was not a usable output schema after a retry: {reason}"))
}

// ---- embeddings -----------------------------------------------------------------------------

/// Texts are embedded in batches of this many per request.
const EMBED_BATCH: usize = 64;

/// A vector as `len: u32`, then either `0` and every value, or `1`, `nonzeros: u32` and
/// (`index: u32`, value) pairs. The built-in embedder's hashed vectors are mostly zeros, so the
/// sparse form keeps a warm start's read small; dense endpoint vectors stay dense.
fn encode_vector(out: &mut Vec<u8>, v: &[f32]) {
    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    let nonzeros = v.iter().filter(|x| **x != 0.0).count();
    if nonzeros * 2 < v.len() {
        out.push(1);
        out.extend_from_slice(&(nonzeros as u32).to_le_bytes());
        for (i, x) in v.iter().enumerate().filter(|(_, x)| **x != 0.0) {
            out.extend_from_slice(&(i as u32).to_le_bytes());
            out.extend_from_slice(&x.to_le_bytes());
        }
    } else {
        out.push(0);
        for x in v {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
}

fn take_u32(bytes: &mut &[u8]) -> Option<u32> {
    let (head, rest) = bytes.split_first_chunk::<4>()?;
    *bytes = rest;
    Some(u32::from_le_bytes(*head))
}

fn decode_vector(bytes: &mut &[u8]) -> Option<Vec<f32>> {
    let len = take_u32(bytes)? as usize;
    let (&form, rest) = bytes.split_first()?;
    *bytes = rest;
    if form == 1 {
        let nonzeros = take_u32(bytes)? as usize;
        let mut v = vec![0.0; len];
        for _ in 0..nonzeros {
            let i = take_u32(bytes)? as usize;
            *v.get_mut(i)? = f32::from_bits(take_u32(bytes)?);
        }
        return Some(v);
    }
    let body = bytes.get(..len * 4)?;
    let v =
        body.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
    *bytes = &bytes[len * 4..];
    Some(v)
}

/// A compact binary form: embeddings are read thousands at a time on a warm start.
fn encode_embedding(e: &ToolEmbedding) -> Vec<u8> {
    let mut out = Vec::new();
    encode_vector(&mut out, &e.tool);
    encode_vector(&mut out, &e.inputs);
    encode_optional_vector(&mut out, e.outputs.as_deref());
    encode_optional_vector(&mut out, e.name.as_deref());
    out
}

fn encode_optional_vector(out: &mut Vec<u8>, v: Option<&[f32]>) {
    match v {
        Some(v) => {
            out.push(1);
            encode_vector(out, v);
        }
        None => out.push(0),
    }
}

fn decode_optional_vector(bytes: &mut &[u8]) -> Option<Option<Vec<f32>>> {
    let (&flag, rest) = bytes.split_first()?;
    *bytes = rest;
    match flag {
        0 => Some(None),
        1 => Some(Some(decode_vector(bytes)?)),
        _ => None,
    }
}

fn decode_embedding(mut bytes: &[u8]) -> Option<ToolEmbedding> {
    let tool = decode_vector(&mut bytes)?;
    let inputs = decode_vector(&mut bytes)?;
    let outputs = decode_optional_vector(&mut bytes)?;
    let name = decode_optional_vector(&mut bytes)?;
    bytes.is_empty().then_some(ToolEmbedding { tool, inputs, outputs, name })
}

fn encode_embeddings(all: &EmbeddingsArtifact) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, e) in all {
        let item = encode_embedding(e);
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(item.len() as u32).to_le_bytes());
        out.extend_from_slice(&item);
    }
    out
}

fn decode_embeddings(mut bytes: &[u8]) -> Option<EmbeddingsArtifact> {
    let mut all = EmbeddingsArtifact::new();
    while !bytes.is_empty() {
        let take = |bytes: &mut &[u8]| -> Option<Vec<u8>> {
            let (len, rest) = bytes.split_first_chunk::<4>()?;
            let len = u32::from_le_bytes(*len) as usize;
            let body = rest.get(..len)?.to_vec();
            *bytes = &rest[len..];
            Some(body)
        };
        let name = String::from_utf8(take(&mut bytes)?).ok()?;
        let item = decode_embedding(&take(&mut bytes)?)?;
        all.insert(name, item);
    }
    Some(all)
}

fn embedding_item_key(model: &str, tool: &CatalogTool) -> String {
    let texts = embed::tool_texts(&tool.name, &tool.spec);
    let text = core_enrich::fingerprint([
        texts.tool.as_str(),
        &texts.inputs,
        texts.outputs.as_deref().unwrap_or(""),
    ]);
    format!("{model}/{EMBEDDING_FORMAT}/{}/{text}", tool.name)
}

/// The binary form of stored vectors; a new form gets a new number so old entries are not
/// misread.
const EMBEDDING_FORMAT: &str = "f3";

/// A model of the embeddings pass that embeds plain texts; `None` where one is expected means
/// the built-in embedder, which embeds a tool's fields with their weights instead.
enum TextModel {
    /// An HTTP endpoint (the enrichment's `lm`).
    Http(LmClient),
    /// A model run in process (`[selector.embedder]`).
    Local(Arc<dyn TextEmbedder>),
}

impl TextModel {
    fn id(&self) -> String {
        match self {
            TextModel::Http(client) => client.config().model_id(),
            TextModel::Local(model) => model.model_id().to_owned(),
        }
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        match self {
            TextModel::Http(client) => client.embed(texts).await.map_err(|e| e.0),
            TextModel::Local(model) => {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                model.embed(&refs)
            }
        }
    }
}

async fn embeddings(
    tools: &[CatalogTool],
    text_model: Option<&TextModel>,
    cache: &mut Cache<'_>,
    force: bool,
    report: &mut PassReport,
    bar: &indicatif::ProgressBar,
) -> (EmbeddingsArtifact, BTreeMap<String, String>) {
    let model = text_model.map_or_else(|| embed::LEXICAL_MODEL_ID.to_owned(), TextModel::id);
    let keys: Vec<String> = tools.iter().map(|tool| embedding_item_key(&model, tool)).collect();
    let version: BTreeMap<String, String> =
        tools.iter().zip(&keys).map(|(t, k)| (t.name.clone(), k.clone())).collect();
    // The item keys carry each tool's texts, so a changed description is a miss too.
    let fingerprint = core_enrich::fingerprint(
        ["embeddings", model.as_str(), EMBEDDING_FORMAT]
            .into_iter()
            .chain(keys.iter().map(String::as_str)),
    );
    let kind = EnrichmentKind::Embeddings;
    if !force {
        if let Some(all) = cache.artifact(kind, &fingerprint).and_then(|b| decode_embeddings(&b)) {
            report.reused = all.len();
            bar.set_position(tools.len() as u64);
            return (all, version);
        }
    }
    let mut all = EmbeddingsArtifact::new();
    let mut missing = Vec::new();
    for (tool, key) in tools.iter().zip(keys) {
        let cached = if force { None } else { cache.item(kind, &key) };
        match cached.and_then(|b| decode_embedding(&b)) {
            Some(e) => {
                all.insert(tool.name.clone(), e);
                report.reused += 1;
                bar.inc(1);
            }
            None => missing.push((tool, key)),
        }
    }
    let mut items = Vec::new();
    match text_model {
        None => {
            let embedder = LexicalEmbedder::new();
            for (tool, key) in missing {
                let e = embedder.embed_tool(&tool.name, &tool.spec);
                items.push((key, encode_embedding(&e)));
                all.insert(tool.name.clone(), e);
                report.computed += 1;
                bar.inc(1);
            }
        }
        Some(model) => {
            for chunk in missing.chunks(EMBED_BATCH / 4) {
                let mut texts = Vec::new();
                for (tool, _) in chunk {
                    let t = embed::tool_texts(&tool.name, &tool.spec);
                    texts.push(t.tool);
                    texts.push(t.inputs);
                    texts.push(t.outputs.unwrap_or_default());
                    texts.push(embed::name_text(&tool.name));
                }
                match model.embed(&texts).await {
                    Ok(vectors) if vectors.len() == texts.len() => {
                        for ((tool, key), v) in chunk.iter().zip(vectors.chunks_exact(4)) {
                            let has_outputs = tool.spec.output_schema.is_some();
                            let e = ToolEmbedding {
                                tool: v[0].clone(),
                                inputs: v[1].clone(),
                                outputs: has_outputs.then(|| v[2].clone()),
                                name: Some(v[3].clone()),
                            };
                            items.push((key.clone(), encode_embedding(&e)));
                            all.insert(tool.name.clone(), e);
                            report.computed += 1;
                        }
                    }
                    Ok(vectors) => {
                        let e = format!("{} vectors for {} texts", vectors.len(), texts.len());
                        for (tool, _) in chunk {
                            report.failed.push((tool.name.clone(), e.clone()));
                        }
                    }
                    Err(e) => {
                        for (tool, _) in chunk {
                            report.failed.push((tool.name.clone(), e.clone()));
                        }
                    }
                }
                bar.inc(chunk.len() as u64);
            }
        }
    }
    // The whole artifact is written only when complete, so a hit always means every tool.
    let complete = report.failed.is_empty();
    let artifact = complete.then(|| (fingerprint.as_str(), encode_embeddings(&all)));
    cache.write(kind, items, artifact);
    (all, version)
}

// ---- dataflow -------------------------------------------------------------------------------

#[derive(Serialize, Deserialize)]
struct StoredDataflow {
    /// Each tool's schema fingerprint when this index was built.
    tools: BTreeMap<String, String>,
    max_neighbors: usize,
    index: DataflowIndex,
}

fn dataflow_pass(
    tools: &[CatalogTool],
    max_neighbors: usize,
    cache: &mut Cache<'_>,
    force: bool,
    report: &mut PassReport,
) -> DataflowIndex {
    let kind = EnrichmentKind::Dataflow;
    let schemas: BTreeMap<String, String> = tools
        .iter()
        .map(|t| (t.name.clone(), quiver_core::enrich::params::schema_fingerprint(&t.spec)))
        .collect();
    let max = max_neighbors.to_string();
    let fingerprint = core_enrich::fingerprint(
        ["dataflow", embed::LEXICAL_MODEL_ID, max.as_str()]
            .into_iter()
            .chain(schemas.iter().flat_map(|(n, s)| [n.as_str(), s.as_str()])),
    );
    let options = DataflowOptions { max_neighbors, ..DataflowOptions::default() };
    let specs: Vec<(String, &ToolSpec)> = tools.iter().map(|t| (t.name.clone(), &t.spec)).collect();
    if !force {
        let stored = cache
            .artifact(kind, &fingerprint)
            .and_then(|b| serde_json::from_slice::<StoredDataflow>(&b).ok());
        if let Some(stored) = stored {
            report.reused = tools.len();
            return stored.index;
        }
    }
    // Delta: the last index covers a subset of these tools, unchanged, with the same bound; only
    // pairs involving the new tools need computing. Removed or changed tools could have pushed
    // other edges out of a bounded list, so those cases recompute everything.
    let previous = if force {
        None
    } else {
        cache
            .latest_artifact(kind)
            .and_then(|b| serde_json::from_slice::<StoredDataflow>(&b).ok())
            .filter(|prev| {
                prev.max_neighbors == max_neighbors
                    && prev.tools.iter().all(|(name, fp)| schemas.get(name) == Some(fp))
            })
    };
    let index = match previous {
        Some(prev) => {
            let new: Vec<String> =
                schemas.keys().filter(|n| !prev.tools.contains_key(*n)).cloned().collect();
            report.reused = prev.tools.len();
            report.computed = new.len();
            dataflow::extend(&prev.index, &specs, &new, &options)
        }
        None => {
            report.computed = tools.len();
            dataflow::compute(&specs, &options)
        }
    };
    let stored = StoredDataflow { tools: schemas, max_neighbors, index };
    let bytes = serde_json::to_vec(&stored).expect("the index serialises");
    cache.write(kind, Vec::new(), Some((&fingerprint, bytes)));
    stored.index
}

// ---- neighbors ------------------------------------------------------------------------------

#[derive(Serialize, Deserialize)]
struct StoredNeighbors {
    /// Each tool's embedding item key (model, tool, text) when these neighbours were computed.
    tools: BTreeMap<String, String>,
    k: usize,
    neighbors: NeighborsArtifact,
}

fn neighbors_pass(
    embeddings: &EmbeddingsArtifact,
    embedding_keys: &BTreeMap<String, String>,
    k: usize,
    cache: &mut Cache<'_>,
    force: bool,
    report: &mut PassReport,
) -> NeighborsArtifact {
    let kind = EnrichmentKind::Neighbors;
    // Neighbours follow from the vectors alone, and the vectors from the model and each tool's
    // text, which the embeddings' item keys name; hashing those is cheaper than the vectors.
    let k_text = k.to_string();
    let fingerprint = core_enrich::fingerprint(
        ["neighbors", k_text.as_str()]
            .into_iter()
            .chain(embedding_keys.iter().flat_map(|(n, key)| [n.as_str(), key.as_str()])),
    );
    if !force {
        if let Some(stored) = cache
            .artifact(kind, &fingerprint)
            .and_then(|b| serde_json::from_slice::<StoredNeighbors>(&b).ok())
        {
            report.reused = embeddings.len();
            return stored.neighbors;
        }
    }
    // Delta, as for dataflow: the last result covers a subset of these tools with the same
    // vectors and the same k, so only pairs with a new tool are scored.
    let previous = if force {
        None
    } else {
        cache
            .latest_artifact(kind)
            .and_then(|b| serde_json::from_slice::<StoredNeighbors>(&b).ok())
            .filter(|prev| {
                prev.k == k && prev.tools.iter().all(|(n, key)| embedding_keys.get(n) == Some(key))
            })
    };
    let all = match previous {
        Some(prev) => {
            let new: Vec<String> =
                embedding_keys.keys().filter(|n| !prev.tools.contains_key(*n)).cloned().collect();
            report.reused = prev.tools.len();
            report.computed = new.len();
            neighbors::extend_neighbors(&prev.neighbors, embeddings, &new, k)
        }
        None => {
            report.computed = embeddings.len();
            neighbors::compute_neighbors(embeddings, k)
        }
    };
    let stored = StoredNeighbors { tools: embedding_keys.clone(), k, neighbors: all };
    let bytes = serde_json::to_vec(&stored).expect("neighbours serialise");
    cache.write(kind, Vec::new(), Some((&fingerprint, bytes)));
    stored.neighbors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_round_trip_through_their_binary_form() {
        let mut all = EmbeddingsArtifact::new();
        all.insert(
            "a.x".into(),
            ToolEmbedding {
                tool: vec![1.0, -2.5],
                inputs: vec![0.5],
                outputs: None,
                name: Some(vec![0.25, 0.5]),
            },
        );
        all.insert(
            "c.z".into(),
            ToolEmbedding {
                tool: vec![0.0, 0.0, 0.0, 0.7, 0.0],
                inputs: vec![0.0; 9],
                outputs: None,
                name: None,
            },
        );
        all.insert(
            "b.y".into(),
            ToolEmbedding {
                tool: vec![],
                inputs: vec![3.0],
                outputs: Some(vec![4.0, 5.0]),
                name: Some(vec![6.0]),
            },
        );
        assert_eq!(decode_embeddings(&encode_embeddings(&all)), Some(all));
        assert_eq!(decode_embeddings(&[1, 0]), None);
    }

    #[test]
    fn config_declares_enrichments_in_any_order_and_refuses_unknown_keys() {
        let config: crate::config::Config = toml::from_str(
            r#"
            [[enrichments]]
            type = "neighbors"
            k = 5
            [[enrichments]]
            type = "embeddings"
            [[enrichments]]
            type = "output_parameters"
            lm = { type = "ollama", model = "granite3.3:8b", temperature = 0.1, max_tokens = 512 }
            "#,
        )
        .unwrap();
        let set = EnrichmentSet::new(&config.enrichments).unwrap();
        assert_eq!(
            set.schedule().order(),
            &[
                EnrichmentKind::OutputParameters,
                EnrichmentKind::Embeddings,
                EnrichmentKind::Neighbors
            ]
        );
        let err = toml::from_str::<crate::config::Config>(
            "[[enrichments]]\ntype = \"dataflow\"\nmax_neighbours = 3\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("max_neighbours"), "{err}");
    }
}
