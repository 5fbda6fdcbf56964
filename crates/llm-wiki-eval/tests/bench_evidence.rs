//! `bench … --evidence FILE`: every recall of the suite leaves one JSON line with what the mode
//! saw (a separate test binary: the evidence sink is per process).

use std::collections::HashSet;
use std::path::PathBuf;

use serde_json::Value;

#[test]
fn a_bench_records_the_evidence_of_every_query() {
  let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mini-pi/fixture.json");
  let out = tempfile::tempdir().unwrap();
  let temp = tempfile::tempdir().unwrap();
  let evidence = out.path().join("evidence.jsonl");
  let args = [
    "bench".to_string(),
    fixture.display().to_string(),
    "--modes".into(),
    "lexical".into(),
    "--out".into(),
    out.path().display().to_string(),
    "--temp-dir".into(),
    temp.path().display().to_string(),
    "--evidence".into(),
    evidence.display().to_string(),
  ];
  assert_eq!(llm_wiki_eval::cli::run(args), 0);

  let fixture: Value = serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
  let queries: HashSet<&str> =
    fixture["queries"].as_array().unwrap().iter().map(|q| q["text"].as_str().unwrap()).collect();
  let text = std::fs::read_to_string(&evidence).unwrap();
  let passes: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
  let recorded: HashSet<&str> = passes.iter().map(|p| p["query"].as_str().unwrap()).collect();
  assert_eq!(recorded, queries, "one or more passes per fixture query, no other query");
  for p in &passes {
    assert_eq!(p["mode"], "lexical");
    assert!(p["dense"].as_array().unwrap().is_empty(), "lexical mode has no dense list");
    let lexical = p["lexical"].as_array().unwrap();
    let hits = p["hits"].as_array().unwrap();
    // Lexical hits are the candidates, in order, with the same confidences.
    assert_eq!(hits.len(), lexical.len());
    for (h, c) in hits.iter().zip(lexical) {
      assert_eq!(h["page"], c["page"]);
      assert_eq!(h["confidence"], c["confidence"]);
      assert!(h["automatic"].as_f64().unwrap() <= h["confidence"].as_f64().unwrap() + 1e-12);
    }
    // Each candidate's specificity evidence: matched units (null on a vault too small to measure
    // them) and whether the factor applies; a candidate scaled down is not exempt.
    for c in lexical {
      assert!(c["units"].is_number() || c["units"].is_null(), "{c}");
      // How much the query says is measured wherever matched units are, and is not nothing when
      // the page matched something.
      assert_eq!(c["units"].is_number(), c["query_units"].is_number(), "{c}");
      if let (Some(u), Some(q)) = (c["units"].as_f64(), c["query_units"].as_f64()) {
        assert!(u <= 0.0 || q > 0.0, "{c}");
      }
      let exempt = c["exempt"].as_bool().unwrap();
      if c["automatic"].as_f64().unwrap() < c["confidence"].as_f64().unwrap() - 1e-12 {
        assert!(!exempt && c["units"].is_number(), "{c}");
      }
    }
  }
  // The exact-title query finds its page.
  let exact = passes.iter().find(|p| p["query"] == "AeroPress").unwrap();
  assert!(exact["hits"][0]["exact"].as_bool().unwrap(), "{exact}");
  assert_eq!(exact["lexical"][0]["exempt"], true, "an exact match is exempt from specificity: {exact}");
}
