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
  /// Trust size + mtime (`changed`) or re-hash every page (`all`).
  pub scope: Scope,
  /// Components to build. The page scan and the lexical update always run; `vectors` adds the
  /// embedding phase. With `force`, `lexical` rebuilds the lexical index from scratch and
  /// `vectors` re-embeds every chunk.
  pub components: Vec<Component>,
  /// Rebuild from scratch into a new store directory.
  pub force: bool,
  /// Cancellation, checked between batches.
  pub cancel: CancelFlag,
  /// Receiver of progress events.
  pub progress: Option<ProgressSink>,
  /// Worker threads for parsing and indexing (0 = available parallelism, at most 4; larger
  /// values are clamped to the number of cores).
  pub threads: usize,
  /// Chunk sizes.
  pub chunking: ChunkConfig,
  /// Paths a caller knows changed, appeared or disappeared since the last reindex (a file
  /// watcher's events), relative to the vault root (absolute paths inside the root are accepted).
  /// With it, an incremental run looks at these paths only and skips the whole-vault stat walk;
  /// `None` (the default) walks every page. A path outside the vault (or with `..`) is ignored
  /// with a `reindex_hint_outside_vault` warning; a path outside `wiki/` names no page and is
  /// ignored; a hint naming an unchanged page changes nothing. A hinted directory that exists
  /// (a folder created or renamed into place), a path that cannot be inspected, or a new page
  /// whose id collides case-insensitively with an indexed one falls back to the full walk, which
  /// decides as a run without a hint would. A hinted directory that is gone removes the pages
  /// under it. Ignored by full rebuilds (first index, `force`, format change) and by
  /// `scope: "all"`, which always walk.
  pub changed_paths: Option<Vec<std::path::PathBuf>>,
  /// Only take unsafe pages out of the index: pages whose file is gone and indexed pages that
  /// no longer validate are removed (and recorded as excluded), and nothing else changes — no
  /// new page is added, a changed valid page keeps its indexed content, no embedding runs, no
  /// store is built where none is published (the client's `invalidateQmdAfterProjectionFailure`
  /// contract: remove unsafe entries, never index valid additions). `force` is ignored. The next
  /// ordinary run indexes what this one left.
  pub removals_only: bool,
}

/// Page counts of a reindex (the extension's mirror counts).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DocumentCounts {
  /// New pages.
  pub indexed: u32,
  /// Changed pages.
  pub updated: u32,
  /// Pages left as they were.
  pub unchanged: u32,
  /// Pages gone from the vault.
  pub removed: u32,
}

/// Chunk documents written and deleted.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ChunkCounts {
  /// Chunks in the index after the run.
  pub total: u32,
  /// Chunk documents written.
  pub added: u32,
  /// Chunk documents deleted.
  pub removed: u32,
}

/// Vector work of a reindex.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VectorCounts {
  /// Chunks embedded by this run.
  pub generated: u32,
  /// Chunks that already had a vector.
  pub skipped: u32,
  /// Chunks that could not be embedded.
  pub errors: u32,
}

/// Outcome of reindexing one vault (the contract's `QmdReindexResult`).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReindexResult {
  /// True when every requested component was committed.
  pub ok: bool,
  /// The vault's id (unset when its config is unreadable).
  pub vault_id: Option<String>,
  /// The scope used.
  #[cfg_attr(feature = "napi", napi(ts_type = "'changed' | 'all'"))]
  pub scope: Scope,
  /// The components requested (de-duplicated).
  #[cfg_attr(feature = "napi", napi(ts_type = "Array<'lexical' | 'vectors'>"))]
  pub components: Vec<Component>,
  /// Page counts.
  pub documents: DocumentCounts,
  /// Chunk counts.
  pub chunks: ChunkCounts,
  /// Vector counts.
  pub vectors: VectorCounts,
  /// Wall-clock time of the run.
  pub elapsed_ms: f64,
  /// True when the store was rebuilt from scratch (a new store directory published by `CURRENT`).
  pub full_rebuild: bool,
  /// Store generation after the run (unchanged when nothing was committed).
  // `i64`, a JavaScript number (`crate::util::num`); the store counts generations in `u64`.
  pub generation: i64,
  /// Index status after the run.
  pub status: IndexStatus,
  /// Pages excluded and degraded components (`{code, message, path?}`).
  pub warnings: Vec<IndexIssue>,
  /// Why the run failed (empty when `ok`).
  pub errors: Vec<IndexIssue>,
}

/// One vault's outcome in `WikiReindexResult.results`.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Serialize)]
pub struct VaultReindexResult {
  /// The vault root.
  pub root: String,
  /// `active`, `personal` or `project`.
  #[cfg_attr(feature = "napi", napi(ts_type = "'active' | 'personal' | 'project'"))]
  pub label: &'static str,
  /// Its outcome.
  pub result: ReindexResult,
}

/// Result of `reindexWiki`.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Serialize)]
pub struct WikiReindexResult {
  /// The target that was asked for (`active`, `personal`, `project`, `all`).
  #[cfg_attr(feature = "napi", napi(ts_type = "'active' | 'personal' | 'project' | 'all'"))]
  pub vault: String,
  /// One outcome per vault.
  pub results: Vec<VaultReindexResult>,
}
