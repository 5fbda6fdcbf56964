//! `bench long-queries`: every mode of `--modes` is scored against plain BM25, with the automatic
//! policy's hits (a relevant page injected) per query set.

use std::path::PathBuf;

use serde_json::Value;

#[test]
fn long_queries_report_each_mode_with_automatic_hits() {
  let beir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mini-beir");
  let work = tempfile::tempdir().unwrap();
  let temp = tempfile::tempdir().unwrap();
  let queries = work.path().join("long.jsonl");
  std::fs::write(
    &queries,
    "{\"id\": \"l1\", \"text\": \"My sourdough starter lives in the refrigerator now. How often does a refrigerated starter need feeding with flour and water?\"}\n\
     {\"id\": \"l2\", \"text\": \"I ride gravel most weekends. Which tyre pressure should I use, and when is a bicycle chain worn out?\"}\n",
  )
  .unwrap();
  let qrels = work.path().join("long.qrels.tsv");
  std::fs::write(&qrels, "query-id\tdoc-id\tgrade\nl1\td1\t1\nl2\td3\t1\nl2\td4\t1\n").unwrap();
  let out = work.path().join("out");
  let args: Vec<String> = [
    "bench",
    "long-queries",
    "--beir",
    &beir.display().to_string(),
    "--queries",
    &queries.display().to_string(),
    "--qrels",
    &qrels.display().to_string(),
    "--modes",
    "lexical",
    "--out",
    &out.display().to_string(),
    "--temp-dir",
    &temp.path().display().to_string(),
  ]
  .iter()
  .map(|s| s.to_string())
  .collect();
  assert_eq!(llm_wiki_eval::cli::run(args), 0);
  let doc: Value =
    serde_json::from_str(&std::fs::read_to_string(out.join("long-queries.json")).unwrap()).unwrap();
  let written = &doc["summary"]["written long queries"];
  assert_eq!(written["queries"], 2);
  let lexical = &written["modes"]["lexical"];
  assert!(lexical["ndcg10"].as_f64().unwrap() > 0.5, "{written}");
  // The automatic policy's outcome per query set: relevant page injected / anything injected.
  assert!(lexical["automaticHits"].as_u64().unwrap() >= 1, "{written}");
  assert!(lexical["automaticInjected"].as_u64().unwrap() >= lexical["automaticHits"].as_u64().unwrap());
  // The lexical row is still where earlier reports had it.
  assert_eq!(written["lexical"]["ndcg10"], lexical["ndcg10"]);
  assert!(written["plainBm25"]["ndcg10"].is_number());
  let md = std::fs::read_to_string(out.join("long-queries.md")).unwrap();
  assert!(md.contains("| written long queries | lexical | 2 |"), "{md}");
}
