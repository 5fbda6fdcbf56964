//! `state.json` of a generation directory: what status reports without opening the index.

use serde::{Deserialize, Serialize};

use super::layout::{GenDir, ENGINE_NAME, ENGINE_VERSION, INDEX_FORMAT_VERSION};
use super::manifest::Manifest;
use crate::error::Result;
use crate::fsutil::{now_iso, read_json, write_json, JsonFile};

/// Version of the state file format.
pub const STATE_VERSION: u32 = 1;

/// Counts recorded at the last successful index.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateCounts {
  pub total_documents: u32,
  pub canonical_documents: u32,
  pub evidence_documents: u32,
  pub total_chunks: u32,
  /// Chunks without a vector for the recorded embedding model.
  pub needs_embedding: u32,
  pub embedded_chunks: u32,
  pub has_vector_index: bool,
}

/// Model identities the index was built with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateModels {
  /// Embedding model id of the stored vectors ("" when no vectors exist).
  pub embed: String,
}

/// Content of `current/state.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateFile {
  pub version: u32,
  pub format_version: u32,
  pub engine: String,
  pub engine_version: String,
  pub vault_id: String,
  /// Generation whose manifest and lexical commit this state describes.
  pub generation: u64,
  /// Random id of the store build (changes on every full rebuild / swap).
  pub store_id: String,
  pub manifest_hash: String,
  pub indexed_at: String,
  pub models: StateModels,
  pub status: StateCounts,
}

impl StateFile {
  /// State describing `manifest` with the given vector counts.
  pub fn describe(manifest: &Manifest, store_id: &str, models: StateModels, vectors: (u32, bool)) -> Self {
    let (canonical, evidence) = manifest.count_roles();
    let total_chunks = manifest.total_chunks();
    StateFile {
      version: STATE_VERSION,
      format_version: INDEX_FORMAT_VERSION,
      engine: ENGINE_NAME.into(),
      engine_version: ENGINE_VERSION.into(),
      vault_id: manifest.vault_id.clone(),
      generation: manifest.generation,
      store_id: store_id.into(),
      manifest_hash: manifest.hash(),
      indexed_at: now_iso(),
      models,
      status: StateCounts {
        total_documents: manifest.entries.len() as u32,
        canonical_documents: canonical,
        evidence_documents: evidence,
        total_chunks,
        needs_embedding: total_chunks.saturating_sub(vectors.0),
        embedded_chunks: vectors.0,
        has_vector_index: vectors.1,
      },
    }
  }

  pub fn read(dir: &GenDir) -> JsonFile<StateFile> {
    match read_json::<StateFile>(&dir.state_file()) {
      JsonFile::Valid(s) if s.version != STATE_VERSION => {
        JsonFile::Invalid(format!("unsupported state version {}", s.version))
      }
      other => other,
    }
  }

  pub fn write(&self, dir: &GenDir) -> Result<()> {
    write_json(&dir.state_file(), self)
  }

  /// True when this state was written by a compatible engine and format.
  pub fn is_current_format(&self) -> bool {
    self.format_version == INDEX_FORMAT_VERSION && self.engine == ENGINE_NAME
  }
}
