//! Per-query evidence records for offline analysis (feature `evidence`, enabled by the evaluation
//! crate only; no shipped build has it). A confidence rule is judged by what it would do to many
//! queries at once; replaying a rule over recorded evidence takes seconds where a rebuild and a
//! rerun of every benchmark take minutes, and the records let anyone check a rule's table with
//! the shipped commands (`bench … --evidence FILE`, docs/BENCHMARKS.md).
//!
//! One JSON line per vault pass of a recall: the store, the query, the mode that ran, the lexical
//! candidates and the dense list (the first [`RECORDED_CANDIDATES`] pages of each) and the
//! vault's hits in order with both confidences.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;

use super::dense::DenseCandidate;
use super::lexical::LexicalCandidate;
use super::ranking::VaultHit;
use crate::error::{Error, Result};

/// Pages of each list recorded per pass (the automatic policy looks at 10 candidates per vault;
/// list-shape features such as the 20th page's cosine need more).
pub const RECORDED_CANDIDATES: usize = 40;

/// Where records go: set once per process by [`record_to`]; `None` records nothing.
static SINK: Mutex<Option<BufWriter<File>>> = Mutex::new(None);

/// Append every later recall's evidence to `path` (created or truncated).
pub fn record_to(path: &Path) -> Result<()> {
  let file = File::create(path).map_err(|e| Error::io("create", path, e))?;
  *SINK.lock().unwrap_or_else(|e| e.into_inner()) = Some(BufWriter::new(file));
  Ok(())
}

/// Flush and close the record file (records written so far stay).
pub fn finish() -> Result<()> {
  if let Some(mut w) = SINK.lock().unwrap_or_else(|e| e.into_inner()).take() {
    w.flush().map_err(|e| Error::io("write", "the evidence file", e))?;
  }
  Ok(())
}

#[derive(Serialize)]
struct LexicalRecord<'a> {
  page: &'a str,
  bm25: f32,
  coverage: f64,
  confidence: f64,
  automatic: f64,
  exact: bool,
  named: bool,
  matched_terms: usize,
  total_terms: usize,
  units: Option<f64>,
  query_units: Option<f64>,
  exempt: bool,
}

#[derive(Serialize)]
struct DenseRecord<'a> {
  page: &'a str,
  cosine: f32,
}

#[derive(Serialize)]
struct HitRecord<'a> {
  page: &'a str,
  confidence: f64,
  automatic: f64,
  exact: bool,
  /// The hit's match reasons (`dense: … cosine x` carries its best-chunk cosine also for a page
  /// outside the recorded dense list).
  reasons: &'a [String],
}

#[derive(Serialize)]
struct PassRecord<'a> {
  store: String,
  query: &'a str,
  mode: &'a str,
  lexical: Vec<LexicalRecord<'a>>,
  dense: Vec<DenseRecord<'a>>,
  hits: Vec<HitRecord<'a>>,
}

/// Record one vault pass, when a sink is set (a write error drops the sink: analysis output must
/// never fail a recall).
pub(crate) fn record(
  store: &Path,
  query: &str,
  mode: &str,
  lexical: &[LexicalCandidate],
  dense: &[DenseCandidate],
  hits: &[VaultHit],
) {
  let mut sink = SINK.lock().unwrap_or_else(|e| e.into_inner());
  let Some(w) = sink.as_mut() else {
    return;
  };
  let rec = PassRecord {
    store: store.display().to_string(),
    query,
    mode,
    lexical: lexical
      .iter()
      .take(RECORDED_CANDIDATES)
      .map(|c| LexicalRecord {
        page: &c.page_id,
        bm25: c.bm25,
        coverage: c.coverage,
        confidence: c.confidence,
        automatic: c.automatic_confidence,
        exact: c.exact.is_some(),
        named: c.named,
        matched_terms: c.matched_terms,
        total_terms: c.total_terms,
        units: c.matched_units,
        query_units: c.query_units,
        exempt: c.specificity_exempt,
      })
      .collect(),
    dense: dense
      .iter()
      .take(RECORDED_CANDIDATES)
      .map(|c| DenseRecord { page: &c.page_id, cosine: c.cosine })
      .collect(),
    hits: hits
      .iter()
      .map(|h| HitRecord {
        page: &h.page_id,
        confidence: h.confidence,
        automatic: h.automatic_confidence,
        exact: h.exact.is_some(),
        reasons: &h.reasons,
      })
      .collect(),
  };
  // Flushed per pass: the sink is a static that is never dropped, so a bench that fails before
  // `finish` would otherwise lose the passes still buffered (the ones leading to the failure).
  let written = serde_json::to_writer(&mut *w, &rec)
    .map_err(std::io::Error::from)
    .and_then(|_| w.write_all(b"\n"))
    .and_then(|_| w.flush());
  if written.is_err() {
    *sink = None;
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_pass_is_one_json_line_with_both_lists_and_the_hits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evidence.jsonl");
    record_to(&path).unwrap();
    let dense = vec![DenseCandidate { page_id: "a".into(), rank: 0, cosine: 0.5, chunk_id: "c".into() }];
    let hits = vec![VaultHit {
      page_id: "a".into(),
      rank: 0,
      confidence: 0.7,
      automatic_confidence: 0.6,
      exact: None,
      reasons: vec!["dense: rank 1, cosine 0.500".into()],
      chunk: None,
      engine_score: 1.0,
    }];
    // Other tests of this binary may recall meanwhile (their passes are recorded too): only this
    // test's store counts.
    let store = Path::new("evidence-test-store");
    record(store, "what is a", "hybrid", &[], &dense, &hits);
    record(store, "b", "lexical", &[], &[], &[]);
    finish().unwrap();
    // After `finish`, nothing more is recorded.
    record(store, "c", "lexical", &[], &[], &[]);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
      .lines()
      .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
      .filter(|v| v["store"] == "evidence-test-store")
      .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["query"], "what is a");
    assert_eq!(lines[0]["dense"][0]["page"], "a");
    assert_eq!(lines[0]["hits"][0]["automatic"], 0.6);
    assert_eq!(lines[0]["hits"][0]["reasons"][0], "dense: rank 1, cosine 0.500");
    assert_eq!(lines[1]["mode"], "lexical");
  }
}
