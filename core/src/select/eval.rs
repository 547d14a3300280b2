//! Recall of a selector on an evaluation set: for each query, did the tools it needs (its gold
//! set) make the top k?
//!
//! Two readings, because multi-tool tasks need both: **whole** counts a query only when every
//! gold tool is in the top k (what an agent needs to finish the task without searching again),
//! **per item** averages the share of gold tools found (partial credit).
//!
//! ```
//! use quiver_core::select::eval::recall;
//!
//! let runs = vec![
//!     (vec!["a".to_owned(), "b".to_owned()], vec!["a".to_owned()]),
//!     (vec!["c".to_owned(), "d".to_owned()], vec!["d".to_owned(), "e".to_owned()]),
//! ];
//! let rows = recall(&runs, &[1, 2]);
//! assert_eq!((rows[0].whole, rows[0].per_item), (0.5, 0.5));
//! assert_eq!((rows[1].whole, rows[1].per_item), (0.5, 0.75));
//! ```

use serde::Serialize;

/// The cut-offs `quiver select --gold` reports.
pub const RECALL_AT: [usize; 4] = [1, 3, 5, 10];

/// Recall at one cut-off.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RecallRow {
    /// The cut-off.
    pub k: usize,
    /// Share of queries whose whole gold set is in the top k.
    pub whole: f64,
    /// Mean over queries of the share of gold tools in the top k.
    pub per_item: f64,
}

/// Recall at each of `ks` over `runs`, each (ranking best first, gold tools). Queries with an
/// empty gold set are skipped; no query at all gives zeros.
pub fn recall(runs: &[(Vec<String>, Vec<String>)], ks: &[usize]) -> Vec<RecallRow> {
    let runs: Vec<&(Vec<String>, Vec<String>)> =
        runs.iter().filter(|(_, gold)| !gold.is_empty()).collect();
    ks.iter()
        .map(|&k| {
            if runs.is_empty() {
                return RecallRow { k, whole: 0.0, per_item: 0.0 };
            }
            let (mut whole, mut per_item) = (0.0, 0.0);
            for (ranked, gold) in &runs {
                let top = &ranked[..k.min(ranked.len())];
                let found = gold.iter().filter(|g| top.contains(g)).count();
                if found == gold.len() {
                    whole += 1.0;
                }
                per_item += found as f64 / gold.len() as f64;
            }
            let n = runs.len() as f64;
            RecallRow { k, whole: whole / n, per_item: per_item / n }
        })
        .collect()
}
