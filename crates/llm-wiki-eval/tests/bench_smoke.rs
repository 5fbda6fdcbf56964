//! Smoke test of the benchmark harness: a pi-format fixture in lexical mode into a temp directory.
//! Checks only that the reports exist, parse and have the expected shape (never metric values).

use std::path::PathBuf;

use llm_wiki_core::retrieve::RetrievalMode;
use llm_wiki_eval::bench::{quiet_log, run_set_bench, BenchCommon, SetBenchOptions};
use serde_json::Value;

/// The in-repository mini fixture (same schema as the pi benchmark; our own content).
fn mini_fixture() -> PathBuf {
  PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mini-pi/fixture.json")
}

fn read_json(path: &std::path::Path) -> Value {
  let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
  serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const PI_METRICS: [&str; 8] = [
  "candidateRecall20",
  "mrr",
  "ndcg5",
  "ndcg10",
  "canonicalAt3",
  "evidenceRecall20",
  "contradictionCoverage",
  "autoFalsePositiveRate",
];

#[test]
fn pi_fixture_lexical_bench_writes_reports() {
  let fixture = mini_fixture();
  let out = tempfile::tempdir().unwrap();
  let temp = tempfile::tempdir().unwrap();
  let mut common = BenchCommon::new(out.path());
  common.modes = vec![RetrievalMode::Lexical];
  common.temp_root = Some(temp.path().to_path_buf());
  common.log = quiet_log();
  let written = run_set_bench(&fixture, &SetBenchOptions::new(common)).unwrap();
  assert!(!written.markdown.is_empty());

  for name in ["pi-lexical.json", "pi-lexical.trec", "pi.md", "pi-gates.json"] {
    assert!(out.path().join(name).is_file(), "{name} missing");
  }
  let metrics = read_json(&out.path().join("pi-lexical.json"));
  assert_eq!(metrics["mode"], "lexical");
  for slice in ["all", "train", "heldout"] {
    for key in PI_METRICS {
      assert!(metrics["metrics"][slice][key].is_number(), "metrics.{slice}.{key} missing");
      assert!(
        metrics["baseline"]["metrics"][slice][key].is_number(),
        "baseline.metrics.{slice}.{key} missing"
      );
    }
  }
  assert!(metrics["context"]["commandLine"].is_array());
  assert!(metrics["context"]["engineVersion"].is_string());

  let gates = read_json(&out.path().join("pi-gates.json"));
  let list = gates["gates"].as_array().expect("gates array");
  assert_eq!(list.len(), 6);
  for g in list {
    assert!(g["modes"]["lexical"]["pass"].is_boolean(), "gate {} has no lexical outcome", g["id"]);
  }

  // The temporary vault copy is removed.
  assert_eq!(std::fs::read_dir(temp.path()).unwrap().count(), 0);
}
