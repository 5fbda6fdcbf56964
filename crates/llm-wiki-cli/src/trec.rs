//! TREC run files (what the `run` command writes; the evaluation crate reads them back) and the
//! JSON-lines query files it reads.
//!
//! * Run line: `qid Q0 docid rank score tag` (rank 1-based, score with 6 decimals).
//! * Query line: `{"id": ..., "text": ...}` (BEIR's `_id` accepted).
//!
//! Identifiers are whitespace-separated fields in run files, so ids (and the run tag) containing
//! whitespace, or empty ids, are rejected instead of written ambiguously.

use std::path::Path;

use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::fsutil::atomic_write;
use llm_wiki_core::retrieve::RecallResult;
use serde_json::Value;

/// One line of a TREC run file.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLine {
  pub qid: String,
  pub docid: String,
  /// 1-based rank within the query.
  pub rank: u32,
  pub score: f64,
}

impl RunLine {
  pub fn new(qid: impl Into<String>, docid: impl Into<String>, rank: u32, score: f64) -> Self {
    RunLine { qid: qid.into(), docid: docid.into(), rank, score }
  }
}

/// Run lines for one query from a ranked list of `(doc id, score)`; ranks are assigned 1, 2, ...
pub fn run_lines_for_query<S: AsRef<str>>(qid: &str, ranked: &[(S, f64)]) -> Vec<RunLine> {
  ranked
    .iter()
    .enumerate()
    .map(|(i, (docid, score))| RunLine::new(qid, docid.as_ref(), rank_of(i), *score))
    .collect()
}

fn rank_of(index: usize) -> u32 {
  u32::try_from(index + 1).unwrap_or(u32::MAX)
}

/// Reject an empty TREC field or one containing whitespace (`kind` names it in the error).
pub fn check_token(kind: &str, value: &str) -> Result<()> {
  if value.is_empty() {
    return Err(Error::invalid(format!("TREC {kind} is empty")));
  }
  if value.chars().any(char::is_whitespace) {
    return Err(Error::invalid(format!("TREC {kind} {value:?} contains whitespace")));
  }
  Ok(())
}

/// Check that `tag` and every line can be written unambiguously (non-empty ids and tag without
/// whitespace, rank ≥ 1, finite score).
pub fn validate_run(tag: &str, lines: &[RunLine]) -> Result<()> {
  check_token("run tag", tag)?;
  for line in lines {
    check_token("query id", &line.qid)?;
    check_token("doc id", &line.docid)?;
    if line.rank == 0 {
      return Err(Error::invalid(format!("TREC rank of {}/{} must be >= 1", line.qid, line.docid)));
    }
    if !line.score.is_finite() {
      return Err(Error::invalid(format!("TREC score of {}/{} is not finite", line.qid, line.docid)));
    }
  }
  Ok(())
}

/// Format run lines as text, one `qid Q0 docid rank score tag` line each, in the given order.
/// Does not validate: call [`validate_run`] first (as [`write_run`] does).
pub fn format_run(tag: &str, lines: &[RunLine]) -> String {
  let mut out = String::with_capacity(lines.len() * 48);
  for l in lines {
    out.push_str(&format!("{} Q0 {} {} {:.6} {}\n", l.qid, l.docid, l.rank, l.score, tag));
  }
  out
}

/// Validate and write a run file (atomically).
pub fn write_run(path: &Path, tag: &str, lines: &[RunLine]) -> Result<()> {
  validate_run(tag, lines)?;
  atomic_write(path, format_run(tag, lines).as_bytes())
}

/// TREC lines of one query's recall results. Scores are the fusion keys, forced strictly
/// decreasing so that scorers that sort by score (trec_eval) see exactly our rank order.
pub fn recall_run_lines(qid: &str, results: &[RecallResult]) -> Vec<RunLine> {
  let mut prev = f64::INFINITY;
  results
    .iter()
    .enumerate()
    .map(|(i, r)| {
      let score = r.fusion_score.min(prev - 1e-6);
      prev = score;
      RunLine::new(qid, r.id.clone(), rank_of(i), score)
    })
    .collect()
}

fn id_value(v: &Value) -> Option<String> {
  match v {
    Value::String(s) if !s.is_empty() => Some(s.clone()),
    Value::Number(n) => Some(n.to_string()),
    _ => None,
  }
}

/// Parse JSON-lines queries: each non-blank line an object with `id` (or BEIR's `_id`; string or
/// number) and `text`; other keys are ignored. Duplicate ids are rejected.
pub fn parse_queries_jsonl(text: &str) -> Result<Vec<(String, String)>> {
  let mut out = Vec::new();
  let mut seen = std::collections::HashSet::new();
  for (i, line) in text.lines().enumerate() {
    let line = line.trim();
    if line.is_empty() {
      continue;
    }
    let bad = |msg: &str| Error::invalid(format!("queries line {}: {msg}", i + 1));
    let v: Value = serde_json::from_str(line).map_err(|e| bad(&e.to_string()))?;
    let id = v.get("id").or_else(|| v.get("_id")).and_then(id_value).ok_or_else(|| bad("missing id"))?;
    let text = v.get("text").and_then(Value::as_str).ok_or_else(|| bad("missing text"))?;
    if !seen.insert(id.clone()) {
      return Err(bad(&format!("duplicate id {id:?}")));
    }
    out.push((id, text.to_string()));
  }
  Ok(out)
}

/// Read and parse a JSON-lines query file (see [`parse_queries_jsonl`]).
pub fn load_queries_jsonl(path: &Path) -> Result<Vec<(String, String)>> {
  parse_queries_jsonl(&std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?)
    .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn queries_jsonl_variants() {
    let q =
      parse_queries_jsonl("{\"id\":\"1\",\"text\":\"a\"}\n\n{\"_id\":2,\"text\":\"b\",\"metadata\":{}}\n")
        .unwrap();
    assert_eq!(q, vec![("1".to_string(), "a".to_string()), ("2".to_string(), "b".to_string())]);
    assert!(parse_queries_jsonl("{\"text\":\"a\"}").is_err());
    assert!(parse_queries_jsonl("{\"id\":\"1\"}").is_err());
    assert!(parse_queries_jsonl("{\"id\":\"1\",\"text\":\"a\"}\n{\"id\":\"1\",\"text\":\"b\"}").is_err());
    assert!(parse_queries_jsonl("not json").is_err());
  }
}
