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
//! let tool = |outputs: Option<Vec<f32>>, inputs: Vec<f32>| ToolEmbedding { tool: vec![0.0, 0.0], inputs, outputs };
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

/// `v` scaled to unit length (all zeros stays all zeros), so a dot product is the cosine even for
/// vectors from a backend that does not normalise.
fn unit(v: &[f32]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 { v.iter().map(|x| x / norm).collect() } else { v.to_vec() }
}
