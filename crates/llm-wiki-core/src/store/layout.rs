//! On-disk layout of a vault's index store, `paths.qmd` = `<meta>/qmd/` by default (format 2):
//!
//! ```text
//! <meta>/qmd/
//!   writer.lock               empty file; the OS advisory lock of the one writer (see `lock.rs`)
//!   index.lock/owner.json     {pid, hostname, acquiredAt, engine} of the writer: a marker for humans
//!                             (without `engine`: the TypeScript release's lock, see `migrate.rs`)
//!   CURRENT                   name of the live store directory, replaced atomically (one line)
//!   last-error.json           {code, message, manifestHash?, at} of the last failed reindex
//!   store-<uuid>/             a store directory: live when CURRENT names it, else being built
//!     state.json              StateFile: versions, vault id, generation, counts (written after commit)
//!     manifest.<gen>.json     page id → {path, size, mtime, sha256, role, metadata, chunks}
//!     lexical/                tantivy index; its `commit` document names the generation, the page
//!                             manifest it uses and the vector segments
//!     vectors/                chunk vectors (segments, see `vectors.rs`)
//! ```
//!
//! A store directory is never renamed while it may be read: readers open files by path, so a full
//! rebuild builds a new `store-<uuid>/` and publishes it by replacing `CURRENT` (the commit point
//! of a rebuild); the old directory is removed afterwards, or by a later writer when it cannot be
//! removed yet (Windows cannot delete a file another process has mapped). Within a store
//! directory, the tantivy commit is the single commit point of an incremental update: the
//! manifest and vector files a commit names are written before it, so a reader sees generation
//! N-1 or N whole.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fsutil::atomic_write;

/// Version of the on-disk format; a different version makes the index stale (full rebuild).
pub const INDEX_FORMAT_VERSION: u32 = 5;
/// Version of this engine.
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");
/// Engine name reported in status (`qmdVersion` keeps its name for compatibility).
pub const ENGINE_NAME: &str = "llm-wiki-retrieval";

/// Paths inside one store root (`paths.qmd`, `<meta>/qmd` by default).
#[derive(Debug, Clone)]
pub struct StoreLayout {
  /// `paths.qmd` (`<meta>/qmd` by default).
  pub dir: PathBuf,
}

/// Paths inside one store directory (`store-<uuid>/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreDir {
  /// The store directory.
  pub dir: PathBuf,
}

impl StoreDir {
  /// The store directory at `dir`.
  pub fn new(dir: PathBuf) -> Self {
    StoreDir { dir }
  }
  /// The directory's name (`store-<uuid>`).
  pub fn name(&self) -> String {
    self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
  }
  /// `state.json` (counts of the last commit).
  pub fn state_file(&self) -> PathBuf {
    self.dir.join("state.json")
  }
  /// `lint.json`: the lint findings of the latest generation a process computed them for
  /// ([`crate::memory::lint::saved_findings`]).
  pub fn lint_file(&self) -> PathBuf {
    self.dir.join("lint.json")
  }
  /// The tantivy index.
  pub fn lexical_dir(&self) -> PathBuf {
    self.dir.join("lexical")
  }
  /// The vector segments.
  pub fn vectors_dir(&self) -> PathBuf {
    self.dir.join("vectors")
  }
  /// The page manifest of `generation`.
  pub fn manifest_file(&self, generation: u64) -> PathBuf {
    self.dir.join(format!("manifest.{generation}.json"))
  }
  /// The journal of the manifest base of `generation` (see [`super::manifest`]).
  pub fn journal_file(&self, generation: u64) -> PathBuf {
    self.dir.join(format!("manifest.{generation}.journal"))
  }
  /// Generations of manifest base files present, ascending.
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

/// What `CURRENT` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pointer {
  /// No `CURRENT`: no store was ever published (or only a format-1 store exists).
  Missing,
  /// `CURRENT` cannot be read or does not hold a store directory name.
  Invalid(String),
  /// The live store directory.
  Valid(StoreDir),
}

impl StoreLayout {
  /// The layout under `dir` (`paths.qmd`, `<meta>/qmd` by default).
  pub fn new(dir: impl Into<PathBuf>) -> Self {
    StoreLayout { dir: dir.into() }
  }
  /// `CURRENT`: names the published store directory.
  pub fn pointer_file(&self) -> PathBuf {
    self.dir.join("CURRENT")
  }
  /// The lock file (never deleted: a lock on a deleted file would not exclude a new one).
  pub fn lock_file(&self) -> PathBuf {
    self.dir.join("writer.lock")
  }
  /// Directory of the human-readable lock marker.
  pub fn lock_marker_dir(&self) -> PathBuf {
    self.dir.join("index.lock")
  }
  /// Error of the last failed reindex, reported by status.
  pub fn last_error_file(&self) -> PathBuf {
    self.dir.join("last-error.json")
  }
  /// The store directory called `name`.
  pub fn store_dir(&self, name: &str) -> StoreDir {
    StoreDir::new(self.dir.join(name))
  }

  /// Read `CURRENT`. Its content is a directory name, never a path.
  pub fn pointer(&self) -> Pointer {
    let path = self.pointer_file();
    match std::fs::read_to_string(&path) {
      Err(e) if e.kind() == std::io::ErrorKind::NotFound => Pointer::Missing,
      Err(e) => Pointer::Invalid(format!("cannot read {}: {e}", path.display())),
      Ok(text) => match text.strip_suffix('\n').unwrap_or(&text) {
        name if is_store_name(name) => Pointer::Valid(self.store_dir(name)),
        _ => Pointer::Invalid(format!("{} does not name a store directory", path.display())),
      },
    }
  }

  /// The live store directory, if `CURRENT` names one.
  pub fn current(&self) -> Option<StoreDir> {
    match self.pointer() {
      Pointer::Valid(d) => Some(d),
      _ => None,
    }
  }

  /// Publish `name` as the live store directory: an atomic replace of `CURRENT` (temp file,
  /// fsync, rename, fsync of the directory).
  pub fn set_current(&self, name: &str) -> Result<()> {
    if !is_store_name(name) {
      return Err(Error::invalid(format!("'{name}' is not a store directory name")));
    }
    atomic_write(&self.pointer_file(), format!("{name}\n").as_bytes())
  }

  /// Names of `store-<uuid>` directories (exact pattern only, never symlinks).
  pub fn store_dirs(&self) -> Vec<String> {
    self.dir_names(is_store_name)
  }

  /// Directories and files of the format-1 layout, which is also the layout of the TypeScript
  /// release's QMD store (`current/`, `previous/`, `staging-*/`, `swap.json`, and QMD's page
  /// mirror `documents/` and `manifest.json`), present in the store root.
  pub fn legacy_entries(&self) -> Vec<PathBuf> {
    std::fs::read_dir(&self.dir)
      .into_iter()
      .flatten()
      .flatten()
      .map(|e| e.file_name().to_string_lossy().into_owned())
      .filter(|n| is_legacy_entry_name(n))
      .map(|n| self.dir.join(n))
      .collect()
  }

  fn dir_names(&self, pattern: fn(&str) -> bool) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(&self.dir)
      .into_iter()
      .flatten()
      .flatten()
      .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
      .map(|e| e.file_name().to_string_lossy().into_owned())
      .filter(|n| pattern(n))
      .collect();
    names.sort();
    names
  }
}

/// `<prefix>` followed by a 36-character lowercase hex UUID.
fn has_uuid_suffix(name: &str, prefix: &str) -> bool {
  name
    .strip_prefix(prefix)
    .is_some_and(|rest| rest.len() == 36 && rest.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
}

/// `store-` followed by a UUID.
pub fn is_store_name(name: &str) -> bool {
  has_uuid_suffix(name, "store-")
}

/// A name of the format-1 / QMD layout (see [`StoreLayout::legacy_entries`]).
pub fn is_legacy_entry_name(name: &str) -> bool {
  matches!(name, "current" | "previous" | "swap.json" | "documents" | "manifest.json")
    || is_legacy_staging_name(name)
}

/// A format-1 staging directory name.
fn is_legacy_staging_name(name: &str) -> bool {
  has_uuid_suffix(name, "staging-")
}

/// A fresh store directory name.
pub fn new_store_name() -> String {
  format!("store-{}", uuid::Uuid::new_v4())
}

/// True when `p` exists as a directory that is not a symlink.
pub fn is_real_dir(p: &Path) -> bool {
  std::fs::symlink_metadata(p).map(|m| m.is_dir()).unwrap_or(false)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn pointer_round_trip_and_validation() {
    let t = tempfile::tempdir().unwrap();
    let layout = StoreLayout::new(t.path());
    assert_eq!(layout.pointer(), Pointer::Missing);
    let name = new_store_name();
    layout.set_current(&name).unwrap();
    assert_eq!(layout.pointer(), Pointer::Valid(layout.store_dir(&name)));
    assert!(layout.set_current("../elsewhere").is_err());
    for bad in ["../store-x", "store-", "/abs", ""] {
      std::fs::write(layout.pointer_file(), bad).unwrap();
      assert!(matches!(layout.pointer(), Pointer::Invalid(_)), "{bad}");
    }
  }
}
