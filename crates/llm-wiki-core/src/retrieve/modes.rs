//! Retrieval modes and their fallback chains. Each mode produces one ranked list of pages per
//! vault with an absolute confidence per page; the trace records what ran and why it fell back.

use serde::{Deserialize, Serialize};

use super::engine::Snapshot;
use super::lexical::{lexical_candidates, ExactMatch};
use crate::error::{Error, Result};
use tantivy::DocAddress;

/// Retrieval modes of the design.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetrievalMode {
  /// BM25 only; never loads a model.
  Lexical,
  /// BM25 + dense vectors fused by RRF.
  Hybrid,
  /// Hybrid, escalating to quality when the result looks uncertain.
  #[default]
  Adaptive,
  /// Candidate expansion and rescoring of at most 40 candidates.
  Quality,
}

impl RetrievalMode {
  pub fn parse(s: &str) -> Result<Self> {
    match s {
      "lexical" => Ok(RetrievalMode::Lexical),
      "hybrid" => Ok(RetrievalMode::Hybrid),
      "adaptive" => Ok(RetrievalMode::Adaptive),
      "quality" => Ok(RetrievalMode::Quality),
      o => Err(Error::invalid(format!(
        "unknown retrieval mode '{o}' (expected lexical | hybrid | adaptive | quality)"
      ))),
    }
  }
  pub fn as_str(self) -> &'static str {
    match self {
      RetrievalMode::Lexical => "lexical",
      RetrievalMode::Hybrid => "hybrid",
      RetrievalMode::Adaptive => "adaptive",
      RetrievalMode::Quality => "quality",
    }
  }
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
  /// The engine's raw score (BM25 for lexical, fused for hybrid).
  pub engine_score: f64,
}

/// Run `mode` on one vault. Returns the hits and the mode actually used.
pub fn run_mode(
  snap: &Snapshot,
  query: &str,
  terms: &[String],
  mode: RetrievalMode,
  limit: usize,
  trace: &mut Vec<String>,
) -> Result<(Vec<VaultHit>, RetrievalMode)> {
  let used = match mode {
    RetrievalMode::Lexical => RetrievalMode::Lexical,
    other => {
      trace.push(format!(
        "fallback:{}->lexical (dense engine unavailable in this build)",
        other.as_str()
      ));
      RetrievalMode::Lexical
    }
  };
  let cands = lexical_candidates(snap, query, terms, limit)?;
  let hits = cands
    .into_iter()
    .map(|c| {
      let mut reasons = Vec::new();
      if let Some(e) = c.exact {
        reasons.push(e.reason().to_string());
      }
      reasons.push(format!(
        "lexical: {}/{} terms, coverage {:.2}",
        c.matched_terms, c.total_terms, c.coverage
      ));
      for f in &c.matched_fields {
        reasons.push(format!("field:{f}"));
      }
      VaultHit {
        page_id: c.page_id,
        rank: c.rank,
        confidence: c.confidence,
        exact: c.exact,
        reasons,
        chunk: None,
        engine_score: c.bm25 as f64,
      }
    })
    .collect();
  Ok((hits, used))
}
