//! The shapes of a reindex job — its options and its results — below both phases that fill them
//! (the page/lexical phase in [`super::reindex`], the vector phase in [`super::embedding`]), so
//! neither phase imports the other's module for them.

use serde::Serialize;

use super::status::IndexStatus;
use super::{CancelFlag, Component, IndexIssue, ProgressSink, Scope};
use crate::chunk::ChunkConfig;

/// Options of a reindex.
#[derive(Clone, Default)]
pub struct ReindexOptions {
  pub scope: Scope,
  pub components: Vec<Component>,
  pub force: bool,
  pub cancel: CancelFlag,
  pub progress: Option<ProgressSink>,
  /// Worker threads for parsing and indexing (0 = available parallelism, at most 4; larger
  /// values are clamped to the number of cores).
  pub threads: usize,
  pub chunking: ChunkConfig,
}

/// Page counts of a reindex (the extension's mirror counts).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DocumentCounts {
  pub indexed: u32,
  pub updated: u32,
  pub unchanged: u32,
  pub removed: u32,
}

/// Chunk documents written and deleted.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ChunkCounts {
  pub total: u32,
  pub added: u32,
  pub removed: u32,
}

/// Vector work of a reindex.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VectorCounts {
  pub generated: u32,
  pub skipped: u32,
  pub errors: u32,
}

/// Outcome of reindexing one vault.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReindexResult {
  pub ok: bool,
  pub vault_id: Option<String>,
  pub scope: Scope,
  pub components: Vec<Component>,
  pub documents: DocumentCounts,
  pub chunks: ChunkCounts,
  pub vectors: VectorCounts,
  pub elapsed_ms: f64,
  /// True when the store was rebuilt from scratch (a new store directory published by `CURRENT`).
  pub full_rebuild: bool,
  /// Generation committed by this run (unchanged when nothing was committed).
  pub generation: u64,
  pub status: IndexStatus,
  pub warnings: Vec<IndexIssue>,
  pub errors: Vec<IndexIssue>,
}

/// One vault's outcome within a multi-vault reindex.
#[derive(Debug, Clone, Serialize)]
pub struct VaultReindexResult {
  pub root: String,
  /// `active`, `personal` or `project`.
  pub label: &'static str,
  pub result: ReindexResult,
}

/// Outcome of `reindexWiki`.
#[derive(Debug, Clone, Serialize)]
pub struct WikiReindexResult {
  pub vault: String,
  pub results: Vec<VaultReindexResult>,
}
