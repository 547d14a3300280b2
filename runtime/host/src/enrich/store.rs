//! The enrichment artifact store: a sled database under `$QUIVER_DATA_DIR/enrichments`, one tree
//! per enrichment type.
//!
//! Two kinds of entries live in each tree. *Items* are per-tool results (`item/<key>`: one tool's
//! embedding, one tool's inferred output schema), which is what makes delta-merge possible: a new
//! tool set computes only the tools whose item is missing. *Artifacts* are whole results keyed by
//! the reference fingerprint (`artifact/<fingerprint>`), so a warm start reads one value instead of
//! thousands. Every write is one sled batch (atomic) followed by a flush, so a process killed in
//! the middle leaves the store as it was after the last whole batch.
//!
//! A store that cannot be opened — locked by another quiver, corrupt, unreadable — is an error the
//! caller reports once and then works without: enrichments are a cache, never a reason to refuse
//! to start.

use std::path::{Path, PathBuf};

use quiver_core::enrich::EnrichmentKind;

/// Why the store cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Occurs when another process holds the store's lock.
    #[error(
        "the enrichment store at {} is in use by another quiver process; continuing without the \
         cache (stop the other process, or point QUIVER_DATA_DIR elsewhere)",
        path.display()
    )]
    Locked {
        /// The store directory.
        path: PathBuf,
    },
    /// Occurs when the store's files are damaged.
    #[error(
        "the enrichment store at {} is corrupt ({detail}); continuing without the cache (delete \
         that directory and run `quiver enrich` to rebuild it)",
        path.display()
    )]
    Corrupt {
        /// The store directory.
        path: PathBuf,
        /// What sled reported.
        detail: String,
    },
    /// Occurs when reading or writing the store fails otherwise.
    #[error("the enrichment store at {} cannot be used: {detail}", path.display())]
    Io {
        /// The store directory.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
}

/// The open store.
pub struct ArtifactStore {
    db: sled::Db,
    path: PathBuf,
}

impl std::fmt::Debug for ArtifactStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactStore").field("path", &self.path).finish()
    }
}

impl ArtifactStore {
    /// The store's directory: `$QUIVER_DATA_DIR/enrichments`, else under `$XDG_DATA_HOME/quiver`,
    /// else `~/.local/share/quiver`.
    pub fn default_dir() -> PathBuf {
        crate::config::data_dir().join("enrichments")
    }

    /// Opens (or creates) the store at `dir`.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.to_path_buf();
        if let Err(e) = std::fs::create_dir_all(dir) {
            return Err(StoreError::Io { path, detail: e.to_string() });
        }
        // sled asserts on some kinds of damage instead of returning an error; a damaged cache
        // must not take the host down with it.
        let opened = std::panic::catch_unwind(|| sled::Config::new().path(dir).open());
        match opened {
            Ok(Ok(db)) => Ok(Self { db, path }),
            Ok(Err(sled::Error::Io(e))) if is_lock_error(&e) => Err(StoreError::Locked { path }),
            Ok(Err(sled::Error::Corruption { at, .. })) => Err(StoreError::Corrupt {
                path,
                detail: match at {
                    Some(at) => format!("damaged data at {at:?}"),
                    None => "damaged data".into(),
                },
            }),
            Ok(Err(e @ sled::Error::Io(_))) => Err(StoreError::Io { path, detail: e.to_string() }),
            Ok(Err(e)) => Err(StoreError::Corrupt { path, detail: e.to_string() }),
            Err(panic) => Err(StoreError::Corrupt { path, detail: panic_text(&panic) }),
        }
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn tree(&self, kind: EnrichmentKind) -> Result<sled::Tree, StoreError> {
        self.db.open_tree(kind.name()).map_err(|e| self.error(e))
    }

    fn error(&self, e: sled::Error) -> StoreError {
        match e {
            sled::Error::Corruption { .. } => {
                StoreError::Corrupt { path: self.path.clone(), detail: e.to_string() }
            }
            other => StoreError::Io { path: self.path.clone(), detail: other.to_string() },
        }
    }

    /// One tool's cached result.
    pub fn item(&self, kind: EnrichmentKind, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let tree = self.tree(kind)?;
        let value = tree.get(format!("item/{key}")).map_err(|e| self.error(e))?;
        Ok(value.map(|v| v.to_vec()))
    }

    /// A whole artifact by fingerprint.
    pub fn artifact(
        &self,
        kind: EnrichmentKind,
        fingerprint: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let tree = self.tree(kind)?;
        let value = tree.get(format!("artifact/{fingerprint}")).map_err(|e| self.error(e))?;
        Ok(value.map(|v| v.to_vec()))
    }

    /// The fingerprint of the artifact written last, for delta computations that start from it.
    pub fn latest(&self, kind: EnrichmentKind) -> Result<Option<String>, StoreError> {
        let tree = self.tree(kind)?;
        let value = tree.get("latest").map_err(|e| self.error(e))?;
        Ok(value.map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    /// Writes `items` and, when given, an artifact (which becomes `latest`) as one atomic batch,
    /// then flushes it to disk.
    pub fn write(
        &self,
        kind: EnrichmentKind,
        items: impl IntoIterator<Item = (String, Vec<u8>)>,
        artifact: Option<(&str, Vec<u8>)>,
    ) -> Result<(), StoreError> {
        let tree = self.tree(kind)?;
        let mut batch = sled::Batch::default();
        for (key, value) in items {
            batch.insert(format!("item/{key}").as_bytes(), value);
        }
        if let Some((fingerprint, value)) = artifact {
            batch.insert(format!("artifact/{fingerprint}").as_bytes(), value);
            batch.insert("latest", fingerprint.as_bytes());
        }
        tree.apply_batch(batch).map_err(|e| self.error(e))?;
        self.db.flush().map_err(|e| self.error(e))?;
        Ok(())
    }

    /// Drops every artifact of `kind` except `keep`, so superseded tool sets do not pile up.
    pub fn prune_artifacts(&self, kind: EnrichmentKind, keep: &str) -> Result<(), StoreError> {
        let tree = self.tree(kind)?;
        let keep = format!("artifact/{keep}");
        let mut batch = sled::Batch::default();
        for entry in tree.scan_prefix("artifact/") {
            let (key, _) = entry.map_err(|e| self.error(e))?;
            if key.as_ref() != keep.as_bytes() {
                batch.remove(key);
            }
        }
        tree.apply_batch(batch).map_err(|e| self.error(e))
    }
}

fn is_lock_error(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock || e.to_string().contains("could not acquire lock")
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "the store panicked while opening".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_and_artifact_round_trip_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = ArtifactStore::open(dir.path()).unwrap();
            store
                .write(
                    EnrichmentKind::Embeddings,
                    [("a".to_owned(), vec![1]), ("b".to_owned(), vec![2])],
                    Some(("fp1", vec![9])),
                )
                .unwrap();
        }
        let store = ArtifactStore::open(dir.path()).unwrap();
        assert_eq!(store.item(EnrichmentKind::Embeddings, "b").unwrap(), Some(vec![2]));
        assert_eq!(store.item(EnrichmentKind::Dataflow, "b").unwrap(), None);
        assert_eq!(store.artifact(EnrichmentKind::Embeddings, "fp1").unwrap(), Some(vec![9]));
        assert_eq!(store.latest(EnrichmentKind::Embeddings).unwrap().as_deref(), Some("fp1"));
    }

    #[test]
    fn second_opener_is_told_the_store_is_locked() {
        let dir = tempfile::tempdir().unwrap();
        let _first = ArtifactStore::open(dir.path()).unwrap();
        let err = ArtifactStore::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("in use by another quiver process"), "{err}");
        assert!(err.contains(&dir.path().display().to_string()), "{err}");
    }

    #[test]
    fn prune_keeps_only_the_named_artifact() {
        let dir = tempfile::tempdir().unwrap();
        let store = ArtifactStore::open(dir.path()).unwrap();
        let kind = EnrichmentKind::Dataflow;
        store.write(kind, [], Some(("old", vec![1]))).unwrap();
        store.write(kind, [], Some(("new", vec![2]))).unwrap();
        store.prune_artifacts(kind, "new").unwrap();
        assert_eq!(store.artifact(kind, "old").unwrap(), None);
        assert_eq!(store.artifact(kind, "new").unwrap(), Some(vec![2]));
    }
}
