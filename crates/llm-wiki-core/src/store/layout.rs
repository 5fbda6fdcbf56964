//! On-disk layout of a vault's index store, `<meta>/retrieval/`:
//!
//! ```text
//! <meta>/retrieval/
//!   index.lock/owner.json     cross-process lock {pid, hostname, acquiredAt}
//!   swap.json                 write-ahead journal of a staging → current swap (only while one runs)
//!   last-error.json           {code, message, manifestHash?, at} of the last failed reindex
//!   current/                  the live store
//!     state.json              StateFile: versions, vault id, generation, counts (written after commit)
//!     manifest.<gen>.json     page id → {path, size, mtime, sha256, role, metadata, chunks}
//!     lexical/                tantivy index; a `commit` document holds the generation it belongs to
//!     vectors/                chunk vectors (segments, see `vectors.rs`)
//!   staging-<uuid>/           a full rebuild in progress (same shape as current/)
//!   previous/                 the old current/ during a swap
//! ```
//!
//! The tantivy commit is the single commit point of an incremental update: the manifest and vector
//! files of generation N are written before the commit that makes N visible, so a reader that
//! opens the index sees generation N-1 or N as a whole, never a mix.

use std::path::{Path, PathBuf};

/// Version of the on-disk format; a different version makes the index stale (full rebuild).
pub const INDEX_FORMAT_VERSION: u32 = 1;
/// Version of this engine.
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");
/// Engine name reported in status (`qmdVersion` keeps its name for compatibility).
pub const ENGINE_NAME: &str = "llm-wiki-retrieval";

/// Paths inside one store directory (`<meta>/retrieval`).
#[derive(Debug, Clone)]
pub struct StoreLayout {
  pub dir: PathBuf,
}

/// Paths inside one generation directory (`current/`, `staging-<uuid>/`, `previous/`).
#[derive(Debug, Clone)]
pub struct GenDir {
  pub dir: PathBuf,
}

impl GenDir {
  pub fn new(dir: PathBuf) -> Self {
    GenDir { dir }
  }
  pub fn state_file(&self) -> PathBuf {
    self.dir.join("state.json")
  }
  pub fn lexical_dir(&self) -> PathBuf {
    self.dir.join("lexical")
  }
  pub fn vectors_dir(&self) -> PathBuf {
    self.dir.join("vectors")
  }
  pub fn manifest_file(&self, generation: u64) -> PathBuf {
    self.dir.join(format!("manifest.{generation}.json"))
  }
  /// Generations of manifest files present, ascending.
  pub fn manifest_generations(&self) -> Vec<u64> {
    let mut gens: Vec<u64> = std::fs::read_dir(&self.dir)
      .into_iter()
      .flatten()
      .flatten()
      .filter_map(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        name.strip_prefix("manifest.")?.strip_suffix(".json")?.parse().ok()
      })
      .collect();
    gens.sort_unstable();
    gens
  }
}

impl StoreLayout {
  pub fn new(dir: impl Into<PathBuf>) -> Self {
    StoreLayout { dir: dir.into() }
  }
  pub fn current(&self) -> GenDir {
    GenDir::new(self.dir.join("current"))
  }
  pub fn previous(&self) -> GenDir {
    GenDir::new(self.dir.join("previous"))
  }
  pub fn staging(&self, name: &str) -> GenDir {
    GenDir::new(self.dir.join(name))
  }
  pub fn lock_dir(&self) -> PathBuf {
    self.dir.join("index.lock")
  }
  pub fn swap_file(&self) -> PathBuf {
    self.dir.join("swap.json")
  }
  pub fn last_error_file(&self) -> PathBuf {
    self.dir.join("last-error.json")
  }
  /// Names of `staging-<uuid>` directories (exact pattern only, never symlinks).
  pub fn staging_dirs(&self) -> Vec<String> {
    std::fs::read_dir(&self.dir)
      .into_iter()
      .flatten()
      .flatten()
      .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
      .map(|e| e.file_name().to_string_lossy().into_owned())
      .filter(|n| is_staging_name(n))
      .collect()
  }
}

/// `staging-` followed by a 36-character lowercase hex UUID.
pub fn is_staging_name(name: &str) -> bool {
  name
    .strip_prefix("staging-")
    .is_some_and(|rest| rest.len() == 36 && rest.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
}

/// True when `p` exists as a directory that is not a symlink.
pub fn is_real_dir(p: &Path) -> bool {
  std::fs::symlink_metadata(p).map(|m| m.is_dir()).unwrap_or(false)
}
