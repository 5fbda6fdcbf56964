//! The shapes shared by the retrieval modes ([`super::modes`]) and the second-stage rescoring
//! ([`super::rescore`]): what a mode is given and the page hits it ranks. They live below both so
//! that `modes` uses `rescore` and `rescore` does not reach back up into `modes`.

use std::time::Duration;

use tantivy::DocAddress;

use super::engine::Snapshot;
use super::lexical::ExactMatch;
pub use super::query::SubQuery;
use crate::util::CancelFlag;

/// A page ranked by a mode within one vault.
#[derive(Debug, Clone)]
pub struct VaultHit {
  /// The page.
  pub page_id: String,
  /// 0-based rank in the vault's list.
  pub rank: usize,
  /// Absolute confidence in [0, 1] (what explicit recall's floor and scores use).
  pub confidence: f64,
  /// Confidence where the automatic floor decides: lexical evidence counts by its specificity
  /// ([`super::confidence::automatic_lexical_confidence`]); ≤ `confidence`.
  pub automatic_confidence: f64,
  /// Exact title / alias / id / file-name match, if any.
  pub exact: Option<ExactMatch>,
  /// Match reasons shown with the result.
  pub reasons: Vec<String>,
  /// Chunk document to show, when the mode already knows it (dense hits); lexical hits pick
  /// their passage when results are built.
  pub chunk: Option<DocAddress>,
  /// The engine's raw score (BM25, fused RRF, or cross-encoder probability).
  pub engine_score: f64,
}

/// Everything a mode needs.
pub struct ModeContext<'a> {
  /// The vault's pinned index snapshot.
  pub snap: &'a Snapshot,
  /// The normalized query.
  pub query: &'a str,
  /// Its analyzed lexical terms.
  pub terms: &'a [String],
  /// Typed sub-queries of the caller.
  pub subqueries: &'a [SubQuery],
  /// Pages wanted from this vault.
  pub limit: usize,
  /// Caller's intent, prepended to the query for the cross-encoder.
  pub intent: Option<String>,
  /// Time budget of the second stage.
  pub rerank_timeout: Duration,
  /// Quality without a cross-encoder: rescore by sentence windows (opt-in; see `rescore`).
  pub sentence_rescore: bool,
  /// Cancellation, checked between stages.
  pub cancel: &'a CancelFlag,
}
