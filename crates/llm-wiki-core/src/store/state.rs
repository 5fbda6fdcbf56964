//! `state.json` of a store directory: what status reports without opening the index.

use serde::{Deserialize, Serialize};

use super::layout::{StoreDir, ENGINE_NAME, ENGINE_VERSION, INDEX_FORMAT_VERSION};
use super::manifest::Manifest;
use crate::error::Result;
use crate::fsutil::{now_iso, read_json, write_json, JsonFile};

/// Version of the state file format.
pub const STATE_VERSION: u32 = 2;

/// Counts of an indexed generation: recorded in `state.json` at every commit and reported, as
/// they are, by the index status (its `totalDocuments` … `hasVectorIndex` fields). The one
/// declaration of these counts; the Node binding converts it.
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

impl StateFile {
  /// State describing commit `generation` over `manifest`, with its vector counts.
  pub fn describe(
    manifest: &Manifest,
    generation: u64,
    store_id: &str,
    models: StateModels,
    vectors: StateVectors,
  ) -> Self {
    let (canonical, evidence) = manifest.count_roles();
    let total_chunks = manifest.total_chunks();
    StateFile {
      version: STATE_VERSION,
      format_version: INDEX_FORMAT_VERSION,
      engine: ENGINE_NAME.into(),
      engine_version: ENGINE_VERSION.into(),
      vault_id: manifest.vault_id.clone(),
      generation,
      manifest_generation: manifest.generation,
      store_id: store_id.into(),
      manifest_hash: manifest.hash(),
      indexed_at: now_iso(),
      models,
      status: IndexCounts {
        total_documents: manifest.entries.len() as u32,
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
