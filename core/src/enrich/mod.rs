//! Enrichments: passes over the whole tool registry that add what tool definitions rarely say —
//! inferred output schemas, tool embeddings, parameter-level output→input dataflow edges, and
//! tool neighbours — once, before anything plans, selects or samples.
//!
//! This module holds the pure parts: which enrichments exist, what artifact each writes and needs,
//! the order they run in (a topological sort of what the config declares, whatever order it lists
//! them in), and the check every consumer makes at construction that the artifacts it needs will be
//! there. Running them, calling LLM endpoints and persisting artifacts is the runtime's job.
//!
//! ```
//! use quiver_core::enrich::{EnrichmentKind, Schedule};
//!
//! // Declared out of order: neighbors first, embeddings second.
//! let schedule = Schedule::build(&[EnrichmentKind::Neighbors, EnrichmentKind::Embeddings]).unwrap();
//! assert_eq!(schedule.order(), &[EnrichmentKind::Embeddings, EnrichmentKind::Neighbors]);
//! assert!(schedule.require("selector", &[EnrichmentKind::Embeddings.artifact().unwrap()]).is_ok());
//!
//! let err = Schedule::build(&[EnrichmentKind::Neighbors]).unwrap_err();
//! assert!(err.to_string().contains("'neighbors' depends on the 'embeddings' artifact"));
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Parameter-level output→input edges between tools, forward and reverse.
pub mod dataflow;
/// The built-in offline (lexical) embedder and the tool texts other backends embed.
pub mod embed;
/// Tool neighbours from embeddings: outputs of one tool against inputs of another.
pub mod neighbors;
/// A tool's input and output parameters read out of its JSON schemas.
pub mod params;
/// Chain samplers: multi-step tool-call scenarios drawn from the dataflow index.
pub mod sample;

use serde::{Deserialize, Serialize};

/// The name of an artifact an enrichment writes and consumers read (`embeddings`, `dataflow`…).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ArtifactKey(pub &'static str);

impl fmt::Display for ArtifactKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// The `embeddings` artifact: one vector set per qualified tool name.
pub const EMBEDDINGS: ArtifactKey = ArtifactKey("embeddings");
/// The `dataflow` artifact: forward and reverse parameter-level edge indexes.
pub const DATAFLOW: ArtifactKey = ArtifactKey("dataflow");
/// The `neighbors` artifact: output→input compatibility between tools.
pub const NEIGHBORS: ArtifactKey = ArtifactKey("neighbors");

/// The enrichments quiver knows, by the name the config uses (`[[enrichments]] type = "…"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnrichmentKind {
    /// An LLM infers an output schema for every tool that lacks one. Changes tools; writes no
    /// artifact.
    OutputParameters,
    /// Embeds each tool (name, description, inputs, outputs when known).
    Embeddings,
    /// Parameter-level output→input edges, forward and reverse, built in one pass.
    Dataflow,
    /// Output→input compatibility between tools, from the embeddings.
    Neighbors,
}

impl EnrichmentKind {
    /// Every kind, in a fixed order.
    pub const ALL: [EnrichmentKind; 4] = [
        EnrichmentKind::OutputParameters,
        EnrichmentKind::Embeddings,
        EnrichmentKind::Dataflow,
        EnrichmentKind::Neighbors,
    ];

    /// The name the config and the CLI use.
    pub fn name(self) -> &'static str {
        match self {
            EnrichmentKind::OutputParameters => "output_parameters",
            EnrichmentKind::Embeddings => "embeddings",
            EnrichmentKind::Dataflow => "dataflow",
            EnrichmentKind::Neighbors => "neighbors",
        }
    }

    /// Parses a config/CLI name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// The artifact this enrichment writes, or `None` when it only changes tools.
    pub fn artifact(self) -> Option<ArtifactKey> {
        match self {
            EnrichmentKind::OutputParameters => None,
            EnrichmentKind::Embeddings => Some(EMBEDDINGS),
            EnrichmentKind::Dataflow => Some(DATAFLOW),
            EnrichmentKind::Neighbors => Some(NEIGHBORS),
        }
    }

    /// The artifacts that must exist before this enrichment runs. `dataflow` embeds its own
    /// parameter texts, so it does not make anyone pay for `embeddings`.
    pub fn depends_on(self) -> &'static [ArtifactKey] {
        match self {
            EnrichmentKind::Neighbors => &[EMBEDDINGS],
            _ => &[],
        }
    }

    /// Enrichments that, when declared too, must run first although no artifact links them:
    /// `output_parameters` changes the tools that `embeddings` and `dataflow` read, so their
    /// vectors and edges see the inferred output schemas.
    pub fn runs_after(self) -> &'static [EnrichmentKind] {
        match self {
            EnrichmentKind::Embeddings | EnrichmentKind::Dataflow => {
                &[EnrichmentKind::OutputParameters]
            }
            _ => &[],
        }
    }

    /// The enrichment that writes `artifact`, for messages that tell the user what to add.
    pub fn writing(artifact: ArtifactKey) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.artifact() == Some(artifact))
    }
}

impl fmt::Display for EnrichmentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a set of enrichments cannot be scheduled, or a consumer cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// Occurs when an enrichment depends on an artifact that no declared enrichment writes.
    #[error(
        "enrichment '{enrichment}' depends on the '{artifact}' artifact, which no declared \
         enrichment writes; add [[enrichments]] type = \"{writer}\""
    )]
    MissingDependency {
        /// The enrichment that needs the artifact.
        enrichment: EnrichmentKind,
        /// The artifact nobody writes.
        artifact: ArtifactKey,
        /// The enrichment that would write it.
        writer: String,
    },
    /// Occurs when enrichments depend on each other in a circle.
    #[error("enrichments depend on each other in a cycle: {}", cycle.iter().map(|k| format!("'{k}'")).collect::<Vec<_>>().join(" -> "))]
    Cycle {
        /// The enrichments on the cycle, first repeated at the end.
        cycle: Vec<EnrichmentKind>,
    },
    /// Occurs when the same enrichment type is declared twice.
    #[error("enrichment '{0}' is declared twice; keep one [[enrichments]] entry per type")]
    Duplicate(EnrichmentKind),
    /// Occurs when a consumer (planner, selector, sampler, graph export…) needs an artifact the
    /// declared enrichments do not produce.
    #[error(
        "{consumer} requires the '{artifact}' artifact; add [[enrichments]] type = \"{writer}\""
    )]
    MissingArtifact {
        /// Who needs it, e.g. `selector` or `sampler 'chain'`.
        consumer: String,
        /// The artifact it needs.
        artifact: ArtifactKey,
        /// The enrichment that writes it.
        writer: String,
    },
}

/// The declared enrichments in the order they run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    order: Vec<EnrichmentKind>,
}

impl Schedule {
    /// Orders `declared` so that every enrichment runs after the ones writing what it depends on;
    /// ties keep declaration order. Fails on a duplicate, a dependency nobody declared (naming
    /// both ends and what to add), or a cycle (naming every enrichment on it).
    pub fn build(declared: &[EnrichmentKind]) -> Result<Self, ScheduleError> {
        Self::build_with(declared, |kind| kind.depends_on().to_vec(), |kind| kind.artifact())
    }

    /// [`Schedule::build`] over explicit dependency and artifact functions; the fixed kinds have
    /// no cycle, but the sort must still refuse one, and tests reach that path through here.
    pub fn build_with(
        declared: &[EnrichmentKind],
        depends_on: impl Fn(EnrichmentKind) -> Vec<ArtifactKey>,
        artifact: impl Fn(EnrichmentKind) -> Option<ArtifactKey>,
    ) -> Result<Self, ScheduleError> {
        let mut seen = BTreeSet::new();
        for &kind in declared {
            if !seen.insert(kind) {
                return Err(ScheduleError::Duplicate(kind));
            }
        }
        let writers: BTreeMap<ArtifactKey, EnrichmentKind> =
            declared.iter().filter_map(|&kind| artifact(kind).map(|a| (a, kind))).collect();
        // Edges writer -> dependant, as indexes into `declared`.
        let index = |kind: EnrichmentKind| declared.iter().position(|&k| k == kind);
        let mut needs: Vec<Vec<usize>> = vec![Vec::new(); declared.len()];
        for (i, &kind) in declared.iter().enumerate() {
            for key in depends_on(kind) {
                let Some(&writer) = writers.get(&key) else {
                    return Err(ScheduleError::MissingDependency {
                        enrichment: kind,
                        artifact: key,
                        writer: writer_name(key),
                    });
                };
                needs[i].push(index(writer).expect("writer is declared"));
            }
            needs[i].extend(kind.runs_after().iter().filter_map(|&before| index(before)));
        }
        // Depth-first topological sort in declaration order, so ties keep the config's order and
        // a back edge yields the cycle itself for the message.
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Active,
            Done,
        }
        fn visit(
            i: usize,
            needs: &[Vec<usize>],
            marks: &mut [Mark],
            stack: &mut Vec<usize>,
            order: &mut Vec<usize>,
        ) -> Result<(), Vec<usize>> {
            match marks[i] {
                Mark::Done => return Ok(()),
                Mark::Active => {
                    let start = stack.iter().position(|&s| s == i).unwrap_or(0);
                    let mut cycle = stack[start..].to_vec();
                    cycle.push(i);
                    return Err(cycle);
                }
                Mark::New => {}
            }
            marks[i] = Mark::Active;
            stack.push(i);
            for &dep in &needs[i] {
                visit(dep, needs, marks, stack, order)?;
            }
            stack.pop();
            marks[i] = Mark::Done;
            order.push(i);
            Ok(())
        }
        let mut marks = vec![Mark::New; declared.len()];
        let mut order = Vec::with_capacity(declared.len());
        for i in 0..declared.len() {
            let mut stack = Vec::new();
            visit(i, &needs, &mut marks, &mut stack, &mut order).map_err(|cycle| {
                ScheduleError::Cycle { cycle: cycle.into_iter().map(|c| declared[c]).collect() }
            })?;
        }
        Ok(Schedule { order: order.into_iter().map(|i| declared[i]).collect() })
    }

    /// The enrichments in run order.
    pub fn order(&self) -> &[EnrichmentKind] {
        &self.order
    }

    /// The artifacts the scheduled enrichments will have written.
    pub fn artifacts(&self) -> BTreeSet<ArtifactKey> {
        self.order.iter().filter_map(|kind| kind.artifact()).collect()
    }

    /// The check every consumer makes at construction: `consumer` needs `required`; fails naming
    /// the first missing artifact and the enrichment to add.
    pub fn require(&self, consumer: &str, required: &[ArtifactKey]) -> Result<(), ScheduleError> {
        require_artifacts(consumer, required, &self.artifacts())
    }
}

/// Fails naming the first of `required` that is not in `available`, and the enrichment to add.
pub fn require_artifacts(
    consumer: &str,
    required: &[ArtifactKey],
    available: &BTreeSet<ArtifactKey>,
) -> Result<(), ScheduleError> {
    match required.iter().find(|key| !available.contains(key)) {
        None => Ok(()),
        Some(&artifact) => Err(ScheduleError::MissingArtifact {
            consumer: consumer.to_owned(),
            artifact,
            writer: writer_name(artifact),
        }),
    }
}

/// A stable hex fingerprint of `parts` (each length-prefixed, so `["ab","c"]` and `["a","bc"]`
/// differ). Callers pass what reference fingerprints cover — tool names, schema fingerprints,
/// parameter texts, model id — and never sampling parameters such as temperature.
pub fn fingerprint<S: AsRef<str>>(parts: impl IntoIterator<Item = S>) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        let part = part.as_ref();
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

fn writer_name(artifact: ArtifactKey) -> String {
    EnrichmentKind::writing(artifact).map_or_else(|| artifact.0.to_owned(), |k| k.name().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use EnrichmentKind::*;

    #[test]
    fn order_follows_dependencies_not_declaration() {
        let s = Schedule::build(&[Neighbors, Dataflow, Embeddings]).unwrap();
        assert_eq!(s.order(), &[Embeddings, Neighbors, Dataflow]);
        let s = Schedule::build(&[Neighbors, Dataflow, Embeddings, OutputParameters]).unwrap();
        assert_eq!(s.order(), &[OutputParameters, Embeddings, Neighbors, Dataflow]);
    }

    #[test]
    fn missing_dependency_names_both_ends_and_the_fix() {
        let err = Schedule::build(&[Dataflow, Neighbors]).unwrap_err().to_string();
        assert_eq!(
            err,
            "enrichment 'neighbors' depends on the 'embeddings' artifact, which no declared \
             enrichment writes; add [[enrichments]] type = \"embeddings\""
        );
    }

    #[test]
    fn cycle_names_every_enrichment_on_it() {
        // embeddings <-> dataflow made to need each other.
        let deps = |k: EnrichmentKind| match k {
            Embeddings => vec![DATAFLOW],
            Dataflow => vec![EMBEDDINGS],
            _ => vec![],
        };
        let err = Schedule::build_with(&[Embeddings, Dataflow], deps, |k| k.artifact())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "enrichments depend on each other in a cycle: 'embeddings' -> 'dataflow' -> 'embeddings'"
        );
    }

    #[test]
    fn fingerprint_separates_parts() {
        assert_ne!(fingerprint(["ab", "c"]), fingerprint(["a", "bc"]));
        assert_eq!(fingerprint(["a", "b"]), fingerprint(vec!["a".to_owned(), "b".to_owned()]));
        assert_eq!(fingerprint(["x"]).len(), 32);
    }

    #[test]
    fn duplicate_declaration_is_refused() {
        let err = Schedule::build(&[Embeddings, Embeddings]).unwrap_err().to_string();
        assert!(err.contains("declared twice"), "{err}");
    }

    #[test]
    fn consumer_missing_artifact_says_what_to_add() {
        let s = Schedule::build(&[Dataflow]).unwrap();
        let err = s.require("selector", &[EMBEDDINGS]).unwrap_err().to_string();
        assert_eq!(
            err,
            "selector requires the 'embeddings' artifact; add [[enrichments]] type = \"embeddings\""
        );
        assert!(s.require("sampler 'chain'", &[DATAFLOW]).is_ok());
    }
}
