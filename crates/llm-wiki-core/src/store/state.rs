//! `state.json` of a store directory: what status reports without opening the index.

use serde::{Deserialize, Serialize};

use super::layout::{StoreDir, ENGINE_NAME, ENGINE_VERSION, INDEX_FORMAT_VERSION};
use super::manifest::{HashAcc, Manifest, ManifestDelta};
use crate::error::Result;
use crate::fsutil::{now_iso, read_json, write_json, JsonFile};

/// Version of the state file format.
pub const STATE_VERSION: u32 = 2;

/// Counts of an indexed generation: recorded in `state.json` at every commit (nested under
/// `status`) and reported by the index status as its flat `totalDocuments` … `hasVectorIndex`
/// fields, copied once by `IndexStatus::with_state` — the contract's status is flat, and a napi
/// object cannot flatten a nested struct.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexCounts {
  /// Indexed pages (canonical + evidence).
  pub total_documents: u32,
  /// Indexed canonical pages (the wiki's own notes).
  pub canonical_documents: u32,
  /// Indexed evidence pages (sources and other supporting material).
  pub evidence_documents: u32,
  /// Chunk documents in the lexical index.
  pub total_chunks: u32,
  /// Distinct live chunks (by id) without a vector for the recorded embedding model.
  pub needs_embedding: u32,
  /// Distinct live chunks with a vector.
  pub embedded_chunks: u32,
  /// The commit lists at least one vector segment.
  pub has_vector_index: bool,
}

/// Vector counts of a commit, over distinct live chunk ids (identical chunks share one vector).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StateVectors {
  /// Live chunks with a vector.
  pub embedded: u32,
  /// Live chunks without one.
  pub missing: u32,
  /// The commit lists at least one vector segment.
  pub has_index: bool,
}

/// Model identities the index was built with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateModels {
  /// Embedding model id of the stored vectors ("" when no vectors exist).
  pub embed: String,
}

/// Content of `<store dir>/state.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateFile {
  /// State file format version.
  pub version: u32,
  /// Index format of the store.
  pub format_version: u32,
  /// Engine that wrote the store.
  pub engine: String,
  /// Its version.
  pub engine_version: String,
  /// The vault's id.
  pub vault_id: String,
  /// Generation of the lexical commit this state describes.
  pub generation: u64,
  /// Generation of that commit's page manifest (`manifest.<N>.json`).
  pub manifest_generation: u64,
  /// Random id of the store build (changes on every full rebuild / swap).
  pub store_id: String,
  /// Hash of the page manifest of the commit.
  pub manifest_hash: String,
  /// When the commit was written (RFC 3339).
  pub indexed_at: String,
  /// Models the vectors were built with.
  pub models: StateModels,
  /// Counts of the commit.
  pub status: IndexCounts,
}

/// The page and chunk counts and the hash of one manifest generation, kept by the writer so a
/// commit updates them from its journal record (± the entries it sets and removes) instead of
/// counting the whole manifest again.
#[derive(Debug, Clone, PartialEq)]
pub struct Tally {
  /// Manifest generation the tally describes.
  pub generation: u64,
  /// Indexed pages.
  pub documents: u32,
  /// Canonical pages among them.
  pub canonical: u32,
  /// Chunks over every page.
  pub total_chunks: u32,
  /// Sections over every page.
  pub sections: u64,
  /// Live chunk keys with the number of chunks sharing each (identical chunks share one id).
  pub chunk_refs: std::collections::HashMap<u64, u32>,
  /// [`Manifest::hash`] accumulator.
  pub hash: HashAcc,
}

impl Tally {
  /// Count `manifest` whole.
  pub fn of(manifest: &Manifest) -> Tally {
    let mut t = Tally {
      generation: manifest.generation,
      documents: 0,
      canonical: 0,
      total_chunks: 0,
      sections: 0,
      // Sized once for every chunk reference: growing by doubling would hold the old and the
      // new table at once at the end (≈ 100 MB for the 2M chunks of a 100k-page vault), and
      // this runs at the end of a cold build, beside the manifest and the lint state.
      chunk_refs: std::collections::HashMap::with_capacity(
        manifest.entries.values().map(|e| e.chunks.len()).sum(),
      ),
      hash: HashAcc::default(),
    };
    for (id, e) in &manifest.entries {
      t.add(id, e);
    }
    t
  }

  fn add(&mut self, id: &str, e: &super::manifest::ManifestEntry) {
    self.documents += 1;
    self.canonical += u32::from(e.role == crate::vault::Role::Canonical);
    self.total_chunks += e.chunks.len() as u32;
    self.sections += e.sections as u64;
    for k in e.chunks.keys() {
      *self.chunk_refs.entry(k).or_default() += 1;
    }
    self.hash.add(id, e);
  }

  fn remove(&mut self, id: &str, e: &super::manifest::ManifestEntry) {
    self.documents -= 1;
    self.canonical -= u32::from(e.role == crate::vault::Role::Canonical);
    self.total_chunks -= e.chunks.len() as u32;
    self.sections -= e.sections as u64;
    for k in e.chunks.keys() {
      if let std::collections::hash_map::Entry::Occupied(mut o) = self.chunk_refs.entry(k) {
        *o.get_mut() -= 1;
        if *o.get() == 0 {
          o.remove();
        }
      }
    }
    self.hash.remove(id, e);
  }

  /// The counts of the manifest this tally describes.
  pub fn counts(&self) -> super::manifest::ManifestCounts {
    super::manifest::ManifestCounts::new(self.sections, self.total_chunks)
  }

  /// The tally after `delta`, given `before` (the manifest this tally describes, before the
  /// delta is applied to it).
  pub fn advance(mut self, before: &Manifest, delta: &ManifestDelta) -> Tally {
    debug_assert_eq!(self.generation, before.generation);
    for id in &delta.del {
      if let Some(e) = before.entries.get(id) {
        self.remove(id, e);
      }
    }
    for (id, e) in &delta.set {
      if !delta.del.contains(id) {
        if let Some(old) = before.entries.get(id) {
          self.remove(id, old);
        }
      }
      self.add(id, e);
    }
    self.generation = delta.generation;
    self
  }
}

/// The writer's tally of the last generation it committed (one store per process, like the
/// manifest cache), keyed by store directory.
static TALLY: std::sync::Mutex<Option<(std::path::PathBuf, Tally)>> = std::sync::Mutex::new(None);

/// The tally of `manifest` in `dir`: the remembered one when it describes that generation, else
/// a whole count.
pub fn tally_of(dir: &StoreDir, manifest: &Manifest) -> Tally {
  let cached = TALLY.lock().unwrap_or_else(|p| p.into_inner()).take();
  match cached {
    Some((d, t)) if d == dir.dir && t.generation == manifest.generation => t,
    _ => Tally::of(manifest),
  }
}

/// Remember the tally of a committed generation of `dir`.
pub fn remember_tally(dir: &StoreDir, tally: Tally) {
  *TALLY.lock().unwrap_or_else(|p| p.into_inner()) = Some((dir.dir.clone(), tally));
}

impl StateFile {
  /// State describing commit `generation` over `manifest`, with its vector counts.
  pub fn describe(
    manifest: &Manifest,
    generation: u64,
    store_id: &str,
    models: StateModels,
    vectors: StateVectors,
  ) -> Self {
    Self::describe_tally(manifest, &Tally::of(manifest), generation, store_id, models, vectors)
  }

  /// [`StateFile::describe`] with the counts and hash of `tally` (which describes `manifest`).
  pub fn describe_tally(
    manifest: &Manifest,
    tally: &Tally,
    generation: u64,
    store_id: &str,
    models: StateModels,
    vectors: StateVectors,
  ) -> Self {
    let canonical = tally.canonical;
    let evidence = tally.documents - tally.canonical;
    let total_chunks = tally.total_chunks;
    StateFile {
      version: STATE_VERSION,
      format_version: INDEX_FORMAT_VERSION,
      engine: ENGINE_NAME.into(),
      engine_version: ENGINE_VERSION.into(),
      vault_id: manifest.vault_id.clone(),
      generation,
      manifest_generation: manifest.generation,
      store_id: store_id.into(),
      manifest_hash: tally.hash.finish(manifest.version, &manifest.vault_id),
      indexed_at: now_iso(),
      models,
      status: IndexCounts {
        total_documents: tally.documents,
        canonical_documents: canonical,
        evidence_documents: evidence,
        total_chunks,
        needs_embedding: vectors.missing,
        embedded_chunks: vectors.embedded,
        has_vector_index: vectors.has_index,
      },
    }
  }

  /// Read the state of `dir` (invalid when of another format version).
  pub fn read(dir: &StoreDir) -> JsonFile<StateFile> {
    match read_json::<StateFile>(&dir.state_file()) {
      JsonFile::Valid(s) if s.version != STATE_VERSION => {
        JsonFile::Invalid(format!("unsupported state version {}", s.version))
      }
      other => other,
    }
  }

  /// Write it into `dir` (atomically).
  pub fn write(&self, dir: &StoreDir) -> Result<()> {
    write_json(&dir.state_file(), self)
  }

  /// True when this state was written by a compatible engine and format.
  pub fn is_current_format(&self) -> bool {
    self.format_version == INDEX_FORMAT_VERSION && self.engine == ENGINE_NAME
  }
}
