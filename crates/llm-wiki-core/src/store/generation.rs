//! Opening and validating a generation directory (`current/`, `staging-*/`, `previous/`):
//! the lexical index's commit document names the generation, whose manifest must exist and
//! account for exactly the chunk documents the index holds.

use std::sync::Arc;

use super::layout::GenDir;
use super::lexical::LexicalIndex;
use super::manifest::Manifest;
use super::state::StateFile;
use crate::error::{Error, Result};
use crate::fsutil::JsonFile;

/// An opened, consistent generation directory.
pub struct Generation {
  pub dir: GenDir,
  pub lexical: LexicalIndex,
  /// Generation of the last lexical commit.
  pub generation: u64,
  pub manifest: Arc<Manifest>,
  /// The state file, when it parses.
  pub state: Option<StateFile>,
}

impl Generation {
  /// Open `dir` and check that index, manifest and counts agree.
  pub fn open(dir: GenDir) -> Result<Self> {
    let lexical = LexicalIndex::open(&dir.lexical_dir())?;
    let searcher = lexical.reader.searcher();
    let generation = lexical.generation_of(&searcher)?;
    if generation == 0 {
      return Err(Error::Index(format!("{} has no committed generation", dir.dir.display())));
    }
    let manifest = Manifest::load(&dir.manifest_file(generation), None)?;
    if manifest.generation != generation {
      return Err(Error::Index(format!(
        "manifest generation {} != index generation {generation}",
        manifest.generation
      )));
    }
    let docs = searcher.num_docs();
    if docs != manifest.expected_documents() {
      return Err(Error::Index(format!(
        "index holds {docs} documents but the manifest accounts for {}",
        manifest.expected_documents()
      )));
    }
    let state = match StateFile::read(&dir) {
      JsonFile::Valid(s) => Some(s),
      _ => None,
    };
    Ok(Generation { dir, lexical, generation, manifest: Arc::new(manifest), state })
  }
}

/// Validation used by swaps and recovery.
pub fn validate(dir: &GenDir) -> Result<()> {
  let g = Generation::open(dir.clone())?;
  match &g.state {
    Some(s) if s.generation <= g.generation => Ok(()),
    Some(s) => {
      Err(Error::Index(format!("state generation {} is ahead of the index ({})", s.generation, g.generation)))
    }
    None => Err(Error::Index(format!("{} has no valid state.json", dir.dir.display()))),
  }
}
