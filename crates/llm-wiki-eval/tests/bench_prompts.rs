//! `bench prompts --unrelated FILE`: query sets of another domain (a BEIR `queries.jsonl`, a
//! written `{"id","text"}` set, a calibrate JSONL of unrelated prompts) run against one vault as
//! negatives, counted per file.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn mini_beir() -> PathBuf {
  PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mini-beir")
}

fn run(args: &[&str]) -> i32 {
  llm_wiki_eval::cli::run(args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

fn write(dir: &Path, name: &str, text: &str) -> String {
  let p = dir.join(name);
  std::fs::write(&p, text).unwrap();
  p.display().to_string()
}

#[test]
fn unrelated_query_files_are_negatives_counted_per_file() {
  let work = tempfile::tempdir().unwrap();
  let temp = tempfile::tempdir().unwrap();
  // A BEIR-style queries file: the first query is about the vault (injected: a false injection
  // here, since the file is declared unrelated), the second about nothing in it.
  let claims = write(
    work.path(),
    "claims.jsonl",
    "{\"id\": \"c1\", \"text\": \"how often should a refrigerated sourdough starter be fed\"}\n\
     {\"id\": \"c2\", \"text\": \"quarterly corporate tax filing deadlines for partnerships\"}\n",
  );
  // A calibrate JSONL (`query`, empty `related`).
  let short = write(work.path(), "short.jsonl", "{\"query\": \"the invoice template\", \"related\": []}\n");
  // A BEIR set's own queries file is named after its directory.
  std::fs::create_dir(work.path().join("otherset")).unwrap();
  let beir_queries = write(
    &work.path().join("otherset"),
    "queries.jsonl",
    "{\"id\": \"b1\", \"text\": \"municipal zoning appeals\"}\n",
  );
  let out = work.path().join("out");
  let vault = mini_beir();
  let code = run(&[
    "bench",
    "prompts",
    "--unrelated",
    &claims,
    "--unrelated",
    &short,
    "--unrelated",
    &beir_queries,
    "--vault",
    &vault.display().to_string(),
    "--modes",
    "lexical",
    "--out",
    &out.display().to_string(),
    "--temp-dir",
    &temp.path().display().to_string(),
  ]);
  assert_eq!(code, 0);
  let doc: Value =
    serde_json::from_str(&std::fs::read_to_string(out.join("prompts-unrelated.json")).unwrap()).unwrap();
  let lexical = &doc["modes"]["lexical"];
  assert_eq!(lexical["positives"], 0);
  assert_eq!(lexical["negatives"], 4);
  let groups = &lexical["groups"];
  assert_eq!(groups["claims"]["negatives"], 2, "{groups}");
  assert_eq!(groups["short"]["negatives"], 1, "{groups}");
  assert_eq!(groups["claims"]["negativesInjected"], 1, "the sourdough question finds its page: {groups}");
  assert_eq!(groups["short"]["negativesInjected"], 0, "{groups}");
  assert_eq!(groups["otherset"]["negatives"], 1, "{groups}");
  let prompts = lexical["prompts"].as_array().unwrap();
  assert_eq!(prompts.len(), 4);
  assert!(prompts.iter().all(|p| p["polarity"] == "negative"));
  assert_eq!(prompts[0]["group"], "claims");
  let md = std::fs::read_to_string(out.join("prompts-unrelated.md")).unwrap();
  assert!(md.contains("| lexical | claims | 1/2"), "{md}");
}

#[test]
fn a_prompt_set_and_unrelated_files_share_one_run() {
  let work = tempfile::tempdir().unwrap();
  let temp = tempfile::tempdir().unwrap();
  let set = write(
    work.path(),
    "set.json",
    r#"{"schema": "llm-wiki-prompts/1", "prompts": [
      {"id": "p1", "text": "when should I replace my bicycle chain", "relevant": ["d3"]},
      {"id": "p2", "text": "book a table for two near the station", "relevant": []}]}"#,
  );
  let other = write(work.path(), "other.jsonl", "{\"id\": \"o1\", \"text\": \"a question about tax law\"}\n");
  let out = work.path().join("out");
  let code = run(&[
    "bench",
    "prompts",
    "--prompts",
    &set,
    "--unrelated",
    &other,
    "--vault",
    &mini_beir().display().to_string(),
    "--modes",
    "lexical",
    "--out",
    &out.display().to_string(),
    "--temp-dir",
    &temp.path().display().to_string(),
  ]);
  assert_eq!(code, 0);
  let doc: Value =
    serde_json::from_str(&std::fs::read_to_string(out.join("prompts-set.json")).unwrap()).unwrap();
  let lexical = &doc["modes"]["lexical"];
  assert_eq!((lexical["positives"].as_u64(), lexical["negatives"].as_u64()), (Some(1), Some(2)));
  // The prompt set's own rows are one group, named after its file.
  assert_eq!(lexical["groups"]["set"]["negatives"], 1);
  assert_eq!(lexical["groups"]["set"]["positives"], 1);
  assert_eq!(lexical["groups"]["other"]["negatives"], 1);
}

#[test]
fn nothing_to_ask_is_an_error() {
  let out = tempfile::tempdir().unwrap();
  let code = run(&[
    "bench",
    "prompts",
    "--vault",
    &mini_beir().display().to_string(),
    "--modes",
    "lexical",
    "--out",
    &out.path().display().to_string(),
  ]);
  assert_ne!(code, 0);
  let bad = out.path().join("bad.jsonl");
  std::fs::write(&bad, "{\"id\": \"x\"}\n").unwrap();
  let code = run(&[
    "bench",
    "prompts",
    "--unrelated",
    &bad.display().to_string(),
    "--vault",
    &mini_beir().display().to_string(),
    "--modes",
    "lexical",
    "--out",
    &out.path().display().to_string(),
  ]);
  assert_ne!(code, 0, "a line without text or query is an error");
}
