//! Evaluation datasets: the pi benchmark fixture (`pi-benchmark-fixture/1`), its baseline runs
//! (`pi-benchmark-baseline-runs/1`) and BEIR-style directories (`queries.jsonl` + `qrels.tsv`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::trec::{parse_beir_qrels, Qrels};
pub use llm_wiki_cli::trec::{load_queries_jsonl, parse_queries_jsonl};
use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::vault::page::Role;

/// The pi benchmark fixture (`bench/pi/fixture.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PiFixture {
  pub schema: String,
  #[serde(default)]
  pub source: Value,
  #[serde(default)]
  pub grade_scale: BTreeMap<String, String>,
  /// The categories in first-appearance order.
  #[serde(default)]
  pub categories: Vec<String>,
  pub vault_config: PiVaultConfig,
  #[serde(default)]
  pub counts: Value,
  pub pages: Vec<PiPage>,
  pub queries: Vec<PiQuery>,
}

/// What the benchmark writes to `.llm-wiki/config.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PiVaultConfig {
  pub name: String,
  pub knowledge_format: String,
}

/// One page of the fixture.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PiPage {
  /// Folder-qualified page id, e.g. `concepts/zettelkasten`.
  pub id: String,
  #[serde(rename = "type")]
  pub page_type: String,
  pub role: Role,
  pub title: String,
  #[serde(default)]
  pub declared_status: Option<String>,
  #[serde(default)]
  pub rendered_status: String,
  #[serde(default)]
  pub aliases: Vec<String>,
  #[serde(default)]
  pub tags: Vec<String>,
  #[serde(default)]
  pub body: String,
  /// `.llm-wiki/wiki/<id>.md`, relative to the vault root.
  #[serde(default)]
  pub vault_relative_path: String,
  /// Exact file content the benchmark writes.
  #[serde(default)]
  pub markdown: String,
  #[serde(default)]
  pub markdown_sha256: String,
}

/// Train or held-out (held-out queries must never be used for tuning).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PiSplit {
  Train,
  Heldout,
}

/// Whether automatic recall should inject something for a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AutoExpectation {
  Hit,
  None,
}

/// A graded judgment of one page for a query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PiJudgment {
  pub page_id: String,
  /// 3 directly answers, 2 supporting evidence / secondary answer, 1 relevant context.
  pub grade: u32,
  pub role: Role,
}

/// One query of the fixture.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PiQuery {
  /// `<group>-<n>`.
  pub id: String,
  pub group: String,
  #[serde(default)]
  pub index_in_group: u32,
  pub text: String,
  pub category: String,
  pub split: PiSplit,
  #[serde(default)]
  pub held_out: bool,
  pub auto_expectation: AutoExpectation,
  #[serde(default)]
  pub judgments: Vec<PiJudgment>,
  /// Page ids that must all appear in the top 20.
  #[serde(default)]
  pub expected_conflicts: Vec<String>,
}

impl PiQuery {
  /// Judgments as `page id → grade`.
  pub fn grades(&self) -> HashMap<String, u32> {
    self.judgments.iter().map(|j| (j.page_id.clone(), j.grade)).collect()
  }
}

fn read_text(path: &Path) -> Result<String> {
  std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))
}

fn parse_json<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T> {
  serde_json::from_str(text).map_err(|e| Error::invalid(format!("{}: {e}", path.display())))
}

/// Load `fixture.json`; checks the schema tag and that held-out flags agree with the split.
pub fn load_pi_fixture(path: &Path) -> Result<PiFixture> {
  let fixture: PiFixture = parse_json(path, &read_text(path)?)?;
  if fixture.schema != "pi-benchmark-fixture/1" {
    return Err(Error::invalid(format!(
      "{}: unsupported fixture schema {:?}",
      path.display(),
      fixture.schema
    )));
  }
  if let Some(q) = fixture.queries.iter().find(|q| q.held_out != (q.split == PiSplit::Heldout)) {
    return Err(Error::invalid(format!(
      "{}: query {} has heldOut inconsistent with split",
      path.display(),
      q.id
    )));
  }
  Ok(fixture)
}

/// An id with the engine's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredId {
  pub id: String,
  pub score: f64,
}

/// The lists one engine returned for one query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PiRun {
  pub query_id: String,
  /// The ranked list (`searchWiki(paths, text, 20, 0)` for the baseline).
  pub ranked: Vec<ScoredId>,
  /// The automatic-recall list (`searchWiki(paths, text, 3, 5)` for the baseline).
  pub auto: Vec<ScoredId>,
}

/// `baseline-runs.json` (`pi-benchmark-baseline-runs/1`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PiRuns {
  pub schema: String,
  #[serde(default)]
  pub engine: String,
  #[serde(default)]
  pub ranked_call: String,
  #[serde(default)]
  pub auto_call: String,
  pub runs: Vec<PiRun>,
}

impl PiRuns {
  /// Ranked ids per query.
  pub fn ranked_map(&self) -> HashMap<String, Vec<String>> {
    self.runs.iter().map(|r| (r.query_id.clone(), r.ranked.iter().map(|s| s.id.clone()).collect())).collect()
  }

  /// Automatic-recall ids per query.
  pub fn auto_map(&self) -> HashMap<String, Vec<String>> {
    self.runs.iter().map(|r| (r.query_id.clone(), r.auto.iter().map(|s| s.id.clone()).collect())).collect()
  }
}

/// Load `baseline-runs.json`.
pub fn load_baseline_runs(path: &Path) -> Result<PiRuns> {
  let runs: PiRuns = parse_json(path, &read_text(path)?)?;
  if runs.schema != "pi-benchmark-baseline-runs/1" {
    return Err(Error::invalid(format!("{}: unsupported runs schema {:?}", path.display(), runs.schema)));
  }
  Ok(runs)
}

/// A BEIR-style evaluation set: queries (file order) and graded judgments.
#[derive(Debug, Clone, Default)]
pub struct BeirSet {
  pub queries: Vec<(String, String)>,
  pub qrels: Qrels,
}

impl BeirSet {
  /// Queries that have at least one relevant (grade > 0) judgment, in file order.
  pub fn judged_queries(&self) -> Vec<(String, String)> {
    self
      .queries
      .iter()
      .filter(|(id, _)| self.qrels.get(id).is_some_and(|j| j.values().any(|&g| g > 0)))
      .cloned()
      .collect()
  }
}

/// Load `<dir>/queries.jsonl` and `<dir>/qrels.tsv` (BEIR qrels with header). Every qrels query id
/// must be among the queries.
pub fn load_beir_dir(dir: &Path) -> Result<BeirSet> {
  let queries = load_queries_jsonl(&dir.join("queries.jsonl"))?;
  let qrels_path = dir.join("qrels.tsv");
  let qrels = parse_beir_qrels(&read_text(&qrels_path)?)?;
  let ids: std::collections::HashSet<&str> = queries.iter().map(|(id, _)| id.as_str()).collect();
  let mut missing: Vec<&String> = qrels.keys().filter(|q| !ids.contains(q.as_str())).collect();
  if !missing.is_empty() {
    missing.sort();
    return Err(Error::invalid(format!(
      "{}: {} judged query ids are not in queries.jsonl (first: {})",
      qrels_path.display(),
      missing.len(),
      missing[0]
    )));
  }
  Ok(BeirSet { queries, qrels })
}

/// Root of the shared benchmark data: `$LLM_WIKI_SHARED`, else `<crate>/../../../shared`. Only the
/// opt-in tests (`#[ignore]`, run by `npm run test:shared`) use it: `npm test` needs nothing
/// outside the repository.
#[cfg(test)]
pub(crate) fn shared_dir() -> std::path::PathBuf {
  let dir = std::env::var_os("LLM_WIKI_SHARED")
    .map(std::path::PathBuf::from)
    .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
  assert!(
    dir.join("bench").is_dir(),
    "shared benchmark data not found at {} (set LLM_WIKI_SHARED to the directory containing bench/)",
    dir.display()
  );
  dir
}

/// Small evaluation sets written for the unit tests (same formats as the benchmark collections).
#[cfg(test)]
pub(crate) fn fixtures_dir() -> std::path::PathBuf {
  Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn loads_pi_fixture_and_runs() {
    let dir = fixtures_dir().join("mini-pi");
    let f = load_pi_fixture(&dir.join("fixture.json")).unwrap();
    assert_eq!(f.pages.len(), 6);
    assert_eq!(f.queries.len(), 7);
    assert_eq!(f.categories.len(), 7);
    assert_eq!(f.vault_config.knowledge_format, "legacy");
    assert_eq!(f.queries.iter().filter(|q| q.split == PiSplit::Heldout).count(), 2);
    assert_eq!(f.queries.iter().map(|q| q.judgments.len()).sum::<usize>(), 9);
    assert_eq!(f.queries.iter().filter(|q| q.auto_expectation == AutoExpectation::None).count(), 1);
    assert_eq!(f.pages.iter().filter(|p| p.role == Role::Canonical).count(), 4);
    let aero = f.pages.iter().find(|p| p.id == "entities/aeropress").unwrap();
    assert_eq!(aero.page_type, "entity");
    assert_eq!(aero.aliases, ["AeroPress Go"]);
    let conflict = f.queries.iter().find(|q| q.id == "temp-conflict-1").unwrap();
    assert_eq!(conflict.expected_conflicts.len(), 2);
    assert_eq!(conflict.grades()["concepts/pour-over"], 3);
    let runs = load_baseline_runs(&dir.join("baseline-runs.json")).unwrap();
    assert_eq!(runs.runs.len(), 7);
    assert_eq!(runs.ranked_map()["aero-alias-1"], ["entities/aeropress"]);
    assert!(runs.auto_map()["grinder-conclusion-1"].is_empty());
  }

  #[test]
  fn rejects_inconsistent_fixtures() {
    let t = tempfile::tempdir().unwrap();
    let src = std::fs::read_to_string(fixtures_dir().join("mini-pi/fixture.json")).unwrap();
    let p = t.path().join("fixture.json");
    std::fs::write(&p, src.replacen("\"heldOut\": false", "\"heldOut\": true", 1)).unwrap();
    assert!(load_pi_fixture(&p).unwrap_err().to_string().contains("heldOut inconsistent"));
    std::fs::write(&p, src.replacen("pi-benchmark-fixture/1", "pi-benchmark-fixture/2", 1)).unwrap();
    assert!(load_pi_fixture(&p).is_err());
  }

  #[test]
  fn loads_beir_dir() {
    let set = load_beir_dir(&fixtures_dir().join("mini-beir")).unwrap();
    assert_eq!(set.queries.len(), 4);
    assert_eq!(set.qrels.len(), 3);
    assert_eq!(set.qrels["q3"]["d1"], 0);
    assert_eq!(set.qrels["q1"]["d1"], 2);
    // q4 has no judgment; grade-0 judgments do not make a query judged.
    let judged: Vec<String> = set.judged_queries().into_iter().map(|(id, _)| id).collect();
    assert_eq!(judged, ["q1", "q2", "q3"]);
  }

  #[test]
  #[ignore = "needs the shared benchmark data (../shared): npm run test:shared"]
  fn loads_shared_collections() {
    let shared = shared_dir();
    let f = load_pi_fixture(&shared.join("bench/pi/fixture.json")).unwrap();
    assert_eq!((f.pages.len(), f.queries.len(), f.categories.len()), (22, 60, 12));
    assert_eq!(f.queries.iter().filter(|q| q.split == PiSplit::Heldout).count(), 15);
    assert_eq!(f.queries.iter().map(|q| q.judgments.len()).sum::<usize>(), 105);
    let runs = load_baseline_runs(&shared.join("bench/pi/baseline-runs.json")).unwrap();
    assert_eq!(runs.runs.len(), 60);
    let set = load_beir_dir(&shared.join("bench/scifact")).unwrap();
    assert_eq!(set.queries.len(), 300);
    assert_eq!(set.qrels.values().map(HashMap::len).sum::<usize>(), 339);
  }
}
