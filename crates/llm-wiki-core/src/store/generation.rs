//! Opening and validating a store directory: the lexical index's commit document names the
//! generation and its page manifest, which must exist and account for exactly the chunk
//! documents the index holds.

use std::sync::Arc;

use super::layout::{StoreDir, StoreLayout};
use super::lexical::{CommitInfo, LexicalIndex};
use super::manifest::Manifest;
use super::state::StateFile;
use crate::error::{Error, Result};
use crate::fsutil::JsonFile;

/// An opened, consistent store directory at its last commit.
pub struct Generation {
  /// Store directory of the commit.
  pub dir: StoreDir,
  /// Its opened tantivy index.
  pub lexical: LexicalIndex,
  /// What the last commit records.
  pub commit: CommitInfo,
  /// The commit's page manifest.
  pub manifest: Arc<Manifest>,
  /// The state file, when it parses.
  pub state: Option<StateFile>,
}

impl Generation {
  /// Open the store directory `CURRENT` names.
  pub fn open_live(layout: &StoreLayout) -> Result<Self> {
    let dir = layout
      .current()
      .ok_or_else(|| Error::Index(format!("{} names no published store", layout.pointer_file().display())))?;
    Self::open(dir)
  }

  /// Open `dir` and check that index, manifest and counts agree.
  pub fn open(dir: StoreDir) -> Result<Self> {
    let lexical = LexicalIndex::open(&dir.lexical_dir())?;
    let searcher = lexical.reader.searcher();
    let Some(commit) = lexical.commit_of(&searcher)?.filter(|c| c.generation > 0) else {
      return Err(Error::Index(format!("{} has no committed generation", dir.dir.display())));
    };
    let manifest = super::manifest::load_generation_cached(&dir, commit.manifest_generation, None)?;
    if manifest.generation != commit.manifest_generation {
      return Err(Error::Index(format!(
        "manifest generation {} != the commit's manifest generation {}",
        manifest.generation, commit.manifest_generation
      )));
    }
    let docs = searcher.num_docs();
    let expected = super::manifest::counts_of(&manifest).documents;
    if docs != expected {
      return Err(Error::Index(format!(
        "index holds {docs} documents but the manifest accounts for {expected}"
      )));
    }
    let state = match StateFile::read(&dir) {
      JsonFile::Valid(s) => Some(s),
      _ => None,
    };
    Ok(Generation { dir, lexical, commit, manifest, state })
  }

  /// Generation of the last commit.
  pub fn generation(&self) -> u64 {
    self.commit.generation
  }

  /// Store id recorded in the state file (a fresh one when the state file is unreadable).
  pub fn store_id(&self) -> String {
    self.state.as_ref().map(|s| s.store_id.clone()).unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
  }
}

/// Fault injection of the tests (unit tests and `test-hooks` builds only): rewrite the manifest
/// base `generation` of `dir` without its first page, as a lost entry would leave it. The index
/// then holds that page's documents beyond what the manifest accounts for, which [`validate`]
/// must refuse. Returns the page id dropped.
#[cfg(any(test, feature = "test-hooks"))]
pub fn drop_first_manifest_entry(dir: &StoreDir, generation: u64) -> Result<Option<String>> {
  let path = dir.manifest_file(generation);
  let mut manifest = Manifest::load(&path, None)?;
  let dropped = manifest.entries.pop_first().map(|(id, _)| id);
  manifest.save(&path)?;
  Ok(dropped)
}

/// Validation of a freshly built store directory before it is published. The manifest comes
/// from the writer's cache, never parsed back from disk, so its entries are checked here as the
/// next process will check them when it loads the file.
pub fn validate(dir: &StoreDir) -> Result<()> {
  let g = Generation::open(dir.clone())?;
  g.manifest.validate(None)?;
  match &g.state {
    Some(s) if s.generation <= g.generation() => Ok(()),
    Some(s) => Err(Error::Index(format!(
      "state generation {} is ahead of the index ({})",
      s.generation,
      g.generation()
    ))),
    None => Err(Error::Index(format!("{} has no valid state.json", dir.dir.display()))),
  }
}
