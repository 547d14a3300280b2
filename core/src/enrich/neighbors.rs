//! Tool neighbours from the `embeddings` artifact: for each tool, the tools whose inputs look most
//! like what it outputs, so a consumer can guess what comes next without the parameter-level
//! detail of dataflow.
//!
//! The score of A→B is the cosine of A's output vector and B's input vector. A tool without an
//! output schema has no output vector, hence no successors (it can still be someone's neighbour).
//! It is a coarser signal than [`dataflow`](super::dataflow) — whole parameter lists against whole
//! parameter lists — and costs one dot product per pair, computed a source at a time against all
//! targets over the non-zeros of the source's (sparse) output vector.
//!
//! ```
//! use quiver_core::enrich::embed::{EmbeddingsArtifact, ToolEmbedding};
//! use quiver_core::enrich::neighbors::compute_neighbors;
//!
//! let tool = |outputs: Option<Vec<f32>>, inputs: Vec<f32>| ToolEmbedding { tool: vec![0.0, 0.0], inputs, outputs, name: None };
//! let mut emb = EmbeddingsArtifact::new();
//! emb.insert("a.list".into(), tool(Some(vec![1.0, 0.0]), vec![0.0, 1.0]));
//! emb.insert("a.get".into(), tool(None, vec![1.0, 0.0]));
//! let n = compute_neighbors(&emb, 5);
//! assert_eq!(n["a.list"][0].tool, "a.get");
//! assert!(n["a.get"].is_empty());
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::embed::EmbeddingsArtifact;

/// The `neighbors` artifact: each tool's best successors by embedding, best first.
pub type NeighborsArtifact = BTreeMap<String, Vec<Neighbor>>;

/// One successor of a tool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Neighbor {
    /// The successor's qualified name.
    pub tool: String,
    /// Cosine of the source's outputs and this tool's inputs, in (0, 1].
    pub score: f32,
}

/// For every tool of `embeddings`, its `k` best successors (score > 0), best first, ties by name.
/// Every tool gets an entry, empty when it has no output vector or nothing scores above zero.
pub fn compute_neighbors(embeddings: &EmbeddingsArtifact, k: usize) -> NeighborsArtifact {
    let names: Vec<&String> = embeddings.keys().collect();
    let n = names.len();
    let dim = embeddings.values().map(|e| e.inputs.len()).max().unwrap_or(0);
    // Input vectors as unit vectors, stored by dimension (column i holds every tool's i-th
    // value), so scoring one source against all targets is a few hundred contiguous
    // multiply-adds over all targets at once: one per non-zero of the source's sparse output
    // vector.
    let mut columns = vec![0.0f32; dim * n];
    let mut comparable = vec![false; n];
    for (b, e) in embeddings.values().enumerate() {
        if e.inputs.len() == dim {
            comparable[b] = true;
            for (i, x) in unit(&e.inputs).into_iter().enumerate() {
                columns[i * n + b] = x;
            }
        }
    }
    let mut result = NeighborsArtifact::new();
    let mut scores = vec![0.0f32; n];
    for (a, (name, emb)) in embeddings.iter().enumerate() {
        let outputs = match &emb.outputs {
            Some(outputs) if outputs.len() == dim => outputs,
            _ => {
                result.insert(name.clone(), Vec::new());
                continue;
            }
        };
        scores.iter_mut().for_each(|s| *s = 0.0);
        for (i, x) in unit(outputs).into_iter().enumerate() {
            if x != 0.0 {
                let column = &columns[i * n..(i + 1) * n];
                for (s, y) in scores.iter_mut().zip(column) {
                    *s += x * y;
                }
            }
        }
        let mut scored: Vec<(f32, usize)> = scores
            .iter()
            .enumerate()
            .filter(|&(b, &s)| b != a && comparable[b] && s > 0.0)
            .map(|(b, &s)| (s, b))
            .collect();
        // Names are sorted (BTreeMap order), so the index breaks ties by name.
        scored.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
        scored.truncate(k);
        result.insert(
            name.clone(),
            scored
                .into_iter()
                .map(|(score, b)| Neighbor { tool: names[b].clone(), score })
                .collect(),
        );
    }
    result
}

/// [`compute_neighbors`] after tools were added: `previous` was computed over `embeddings` minus
/// `new`; only pairs involving a new tool are scored, and the result equals a full computation.
/// Old sources keep their old scores (a pair's score depends on its two vectors alone) and merge
/// in the new targets; new sources are scored against everyone. When `previous` does not cover
/// exactly the old tools, it computes everything.
pub fn extend_neighbors(
    previous: &NeighborsArtifact,
    embeddings: &EmbeddingsArtifact,
    new: &[String],
    k: usize,
) -> NeighborsArtifact {
    let new_set: std::collections::BTreeSet<&str> = new.iter().map(String::as_str).collect();
    let old_covered = embeddings.keys().filter(|n| !new_set.contains(n.as_str())).count()
        == previous.len()
        && previous.keys().all(|n| embeddings.contains_key(n) && !new_set.contains(n.as_str()));
    if !old_covered || new_set.iter().any(|n| !embeddings.contains_key(*n)) {
        return compute_neighbors(embeddings, k);
    }
    let dim = embeddings.values().map(|e| e.inputs.len()).max().unwrap_or(0);
    let unit_inputs: BTreeMap<&str, Vec<f32>> = embeddings
        .iter()
        .filter(|(_, e)| e.inputs.len() == dim)
        .map(|(n, e)| (n.as_str(), unit(&e.inputs)))
        .collect();
    // The same summation order as `compute_neighbors` (dimension by dimension over the source's
    // non-zeros), so scores are bit-identical.
    let score = |source: &[f32], target: &[f32]| {
        let mut s = 0.0f32;
        for (x, y) in source.iter().zip(target) {
            if *x != 0.0 {
                s += x * y;
            }
        }
        s
    };
    let rank = |mut scored: Vec<Neighbor>| {
        scored.sort_by(|x, y| y.score.total_cmp(&x.score).then_with(|| x.tool.cmp(&y.tool)));
        scored.truncate(k);
        scored
    };
    let mut result = NeighborsArtifact::new();
    for (name, emb) in embeddings {
        let outputs = match &emb.outputs {
            Some(outputs) if outputs.len() == dim => unit(outputs),
            _ => {
                result.insert(name.clone(), Vec::new());
                continue;
            }
        };
        let targets: Vec<&str> = if new_set.contains(name.as_str()) {
            unit_inputs.keys().copied().collect()
        } else {
            new_set.iter().copied().collect()
        };
        let mut scored: Vec<Neighbor> = targets
            .into_iter()
            .filter(|t| *t != name.as_str())
            .filter_map(|t| {
                let s = score(&outputs, unit_inputs.get(t)?);
                (s > 0.0).then(|| Neighbor { tool: t.to_owned(), score: s })
            })
            .collect();
        if !new_set.contains(name.as_str()) {
            scored.extend(previous[name].iter().cloned());
        }
        result.insert(name.clone(), rank(scored));
    }
    result
}

/// `v` scaled to unit length (all zeros stays all zeros), so a dot product is the cosine even for
/// vectors from a backend that does not normalise.
fn unit(v: &[f32]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter().map(|x| x / norm).collect()
    } else {
        v.to_vec()
    }
}
