//! Readers and writers of one store at the same time, in one process: recalls racing repeated
//! forced rebuilds always answer from a whole generation, a second reindex of a vault that is
//! being indexed is busy at once, and nothing of a reindex keeps writing after it returned.

mod common;

use std::fs;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use llm_wiki_core::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RetrievalMode};
use llm_wiki_core::store::{reindex_vault, Component, ReindexOptions, ReindexProgressEvent, StoreLayout};
use llm_wiki_core::vault::VaultPaths;

fn vault(pages: usize) -> (tempfile::TempDir, VaultPaths) {
  let (t, p) = llm_wiki_core::testkit::temp_vault();
  for i in 0..pages {
    llm_wiki_core::testkit::write_file(&p.wiki.join(format!("concepts/topic-{i}.md")), topic(i));
  }
  (t, p)
}

/// A made-up word per page (letters only, so the analyzer keeps it whole).
fn word(i: usize) -> String {
  let letters: String = i.to_string().bytes().map(|d| (b'b' + (d - b'0')) as char).collect();
  format!("zxq{letters}vor")
}

fn topic(i: usize) -> String {
  format!(
    "---\ntype: concept\ntitle: Topic {i}\n---\n# Section {i}\n\nThis note about {} records fact number {i}.\n",
    word(i)
  )
}

fn lexical() -> ReindexOptions {
  ReindexOptions { components: vec![Component::Lexical], threads: 2, ..Default::default() }
}

/// Explicit recall of the active vault only, floor 0.
fn ranked(mode: RetrievalMode) -> RecallOptions {
  let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 5 };
  RecallOptions::new(policy, mode)
}

#[test]
fn recalls_racing_forced_rebuilds_always_answer_from_a_whole_generation() {
  const PAGES: usize = 60;
  const REBUILDS: usize = 80;
  let (_t, p) = vault(PAGES);
  let first = reindex_vault(&p, &lexical());
  assert!(first.ok, "{:?}", first.errors);
  let read = |r: usize, n: usize| {
    let i = (r * 7919 + n) % PAGES;
    let expected = format!("concepts/topic-{i}");
    match recall_wiki(&p, &word(i), &ranked(RetrievalMode::Lexical)) {
      Ok(resp) if resp.results.first().is_some_and(|x| x.id == expected) => None,
      Ok(resp) => Some(format!(
        "{}: got {:?}, diagnostics {:?}",
        word(i),
        resp.results.iter().map(|x| &x.id).collect::<Vec<_>>(),
        resp.diagnostics
      )),
      Err(e) => Some(format!("{}: error {e}", word(i))),
    }
  };
  let (failures, n) = common::race(3, read, || {
    for _ in 0..REBUILDS {
      let r = reindex_vault(&p, &ReindexOptions { force: true, ..lexical() });
      assert!(r.ok && r.full_rebuild, "{:?}", r.errors);
    }
  });
  assert!(
    failures.is_empty(),
    "{} of {n} recalls failed during forced rebuilds: {:#?}",
    failures.len(),
    failures
  );
}

#[test]
fn a_second_reindex_of_a_vault_being_indexed_is_busy_at_once() {
  let (_t, p) = vault(20);
  // The first reindex stops in its first progress event until the second one has returned.
  let (entered_tx, entered_rx) = mpsc::channel::<()>();
  let (release_tx, release_rx) = mpsc::channel::<()>();
  let release_rx = std::sync::Mutex::new(release_rx);
  let entered_tx = std::sync::Mutex::new(Some(entered_tx));
  let progress = Arc::new(move |_: ReindexProgressEvent| {
    if let Some(tx) = entered_tx.lock().unwrap().take() {
      tx.send(()).unwrap();
      release_rx.lock().unwrap().recv().unwrap();
    }
  });
  std::thread::scope(|s| {
    let p1 = p.clone();
    let first =
      s.spawn(move || reindex_vault(&p1, &ReindexOptions { progress: Some(progress), ..lexical() }));
    entered_rx.recv().unwrap();
    // The second call runs on its own thread only so that a regression (blocking until the first
    // finishes, which waits for this answer) fails the test instead of hanging it.
    let (tx, rx) = mpsc::channel();
    let p2 = p.clone();
    s.spawn(move || tx.send(reindex_vault(&p2, &lexical())).unwrap());
    let second = rx.recv_timeout(Duration::from_secs(60));
    release_tx.send(()).unwrap();
    let second = second.expect("the second reindex blocked instead of returning busy");
    assert!(!second.ok);
    assert_eq!(second.errors.iter().map(|e| e.code.as_str()).collect::<Vec<_>>(), ["qmd_index_busy"]);
    assert_eq!(second.documents.indexed, 0);
    let first = first.join().unwrap();
    assert!(first.ok, "{:?}", first.errors);
    assert_eq!(first.documents.indexed, 20);
  });
  // Once the first is done the vault is free again.
  assert!(reindex_vault(&p, &lexical()).ok);
}

/// The lexical index directory of the live store.
fn lexical_dir(p: &VaultPaths) -> std::path::PathBuf {
  StoreLayout::new(p.retrieval()).current().expect("a published store").lexical_dir()
}

/// Segment files in a tantivy directory that its `meta.json` does not list: the output of a merge
/// that is still running or was abandoned.
fn unlisted_segment_files(lexical: &std::path::Path) -> Vec<String> {
  let meta: serde_json::Value =
    serde_json::from_slice(&fs::read(lexical.join("meta.json")).unwrap()).unwrap();
  let listed: Vec<String> = meta["segments"]
    .as_array()
    .unwrap()
    .iter()
    .map(|s| s["segment_id"].as_str().unwrap().replace('-', ""))
    .collect();
  fs::read_dir(lexical)
    .unwrap()
    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
    .filter(|n| n.len() > 32 && n.as_bytes()[32] == b'.' && n[..32].bytes().all(|b| b.is_ascii_hexdigit()))
    .filter(|n| !listed.iter().any(|id| n.starts_with(id.as_str())))
    .collect()
}

fn listed_segments(lexical: &std::path::Path) -> usize {
  let meta: serde_json::Value =
    serde_json::from_slice(&fs::read(lexical.join("meta.json")).unwrap()).unwrap();
  meta["segments"].as_array().unwrap().len()
}

/// Page edits reindexed after the cold build. Each adds one small segment; the incremental
/// writer's policy (`LexicalIndex::writer`: `LogMergePolicy`, `set_min_num_segments(8)`, all
/// segments under `SMALL_LAYER_DOCS` documents in one level) merges once eight are there, so ten
/// edits run at least one merge (seven, as this test had, never did).
const EDITS: usize = 10;

#[test]
fn nothing_writes_into_the_store_after_reindex_returned() {
  // Every commit adds a small segment; from the eighth on, tantivy merges them in the background.
  // When a reindex returns, those merges are done and applied: the directory holds only listed
  // segments, and removing the vault cannot race them.
  for round in 0..4 {
    let (t, p) = vault(1500);
    let r = reindex_vault(&p, &lexical());
    assert!(r.ok, "{:?}", r.errors);
    let cold = listed_segments(&lexical_dir(&p));
    for k in 0..EDITS {
      let f = p.wiki.join(format!("concepts/topic-{k}.md"));
      fs::write(&f, format!("{}\nRound {round} edit {k} adds zxedit{k}vor.\n", topic(k))).unwrap();
      let r = reindex_vault(&p, &ReindexOptions { scope: llm_wiki_core::store::Scope::All, ..lexical() });
      assert!(r.ok, "{:?}", r.errors);
    }
    let lexical_dir = lexical_dir(&p);
    let segments = listed_segments(&lexical_dir);
    assert!(
      segments < cold + EDITS,
      "round {round}: no merge ran ({cold} cold-build segments + {EDITS} edits = {segments} segments)"
    );
    let unlisted = unlisted_segment_files(&lexical_dir);
    assert!(unlisted.is_empty(), "round {round}: a merge is still writing (or was abandoned): {unlisted:?}");
    let root = t.path().to_path_buf();
    fs::remove_dir_all(&root)
      .unwrap_or_else(|e| panic!("round {round}: removing {} failed: {e}", root.display()));
    drop(t);
  }
}
