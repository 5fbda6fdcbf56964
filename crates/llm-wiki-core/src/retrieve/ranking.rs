//! The shapes shared by the retrieval modes ([`super::modes`]) and the second-stage rescoring
//! ([`super::rescore`]): what a mode is given and the page hits it ranks. They live below both so
//! that `modes` uses `rescore` and `rescore` does not reach back up into `modes`.

use std::time::Duration;

use tantivy::DocAddress;

use super::engine::Snapshot;
use super::lexical::ExactMatch;
use crate::store::CancelFlag;

/// A typed sub-query: `lex` feeds the lexical list, `vec` the dense list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubQuery {
  Lex(String),
  Vec(String),
}

/// A page ranked by a mode within one vault.
#[derive(Debug, Clone)]
pub struct VaultHit {
  pub page_id: String,
  /// 0-based rank in the vault's list.
  pub rank: usize,
  pub confidence: f64,
  pub exact: Option<ExactMatch>,
  pub reasons: Vec<String>,
  /// Chunk document to show, when the mode already knows it (dense hits); lexical hits pick
  /// their passage when results are built.
  pub chunk: Option<DocAddress>,
  /// The engine's raw score (BM25, fused RRF, or cross-encoder probability).
  pub engine_score: f64,
}

/// Everything a mode needs.
pub struct ModeContext<'a> {
  pub snap: &'a Snapshot,
  pub query: &'a str,
  pub terms: &'a [String],
  pub subqueries: &'a [SubQuery],
  pub limit: usize,
  pub intent: Option<String>,
  pub rerank_timeout: Duration,
  /// Quality without a cross-encoder: rescore by sentence windows (opt-in; see `rescore`).
  pub sentence_rescore: bool,
  pub cancel: &'a CancelFlag,
}
