//! The vector phase with the real embedding model: where page texts come from (the vault's own
//! `wiki` directory, the reindex's chunking), how many segment files a cold build leaves, that a
//! vector batch does not rewrite the page manifest, and dense recall racing forced rebuilds.
//! Needs the model root produced by `scripts/fetch_models.py` (`.models/` at the repository root,
//! or `LLM_WIKI_MODELS_DIR`); every test is skipped, with a message, when it is absent.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use llm_wiki_core::chunk::ChunkConfig;
use llm_wiki_core::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RetrievalMode};
use llm_wiki_core::store::{read_index_status, reindex_vault, Component, ReindexOptions};
use llm_wiki_core::vault::VaultPaths;

fn vault(t: &Path) -> VaultPaths {
  llm_wiki_core::testkit::init_vault(t, "T")
}

fn write(p: &VaultPaths, id: &str, body: &str) {
  let f = p.wiki.join(format!("{id}.md"));
  fs::create_dir_all(f.parent().unwrap()).unwrap();
  fs::write(f, format!("---\ntype: concept\ntitle: {id}\n---\n{body}\n")).unwrap();
}

fn both() -> ReindexOptions {
  ReindexOptions {
    components: vec![Component::Lexical, Component::Vectors],
    threads: 2,
    ..Default::default()
  }
}

/// Every file under `dir` whose name ends with `suffix`.
fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
  let mut out = Vec::new();
  for e in fs::read_dir(dir).into_iter().flatten().flatten() {
    let path = e.path();
    if path.is_dir() {
      out.extend(files_with_suffix(&path, suffix));
    } else if path.to_string_lossy().ends_with(suffix) {
      out.push(path);
    }
  }
  out.sort();
  out
}

/// Every live chunk has a vector, by the result and by status.
fn assert_fully_embedded(p: &VaultPaths, r: &llm_wiki_core::store::ReindexResult) {
  assert!(r.ok, "{:?}", r.errors);
  assert!(!r.warnings.iter().any(|w| w.code == "vectors_unavailable"), "{:?}", r.warnings);
  let s = read_index_status(p);
  assert!(s.total_chunks > 0);
  assert_eq!(r.vectors.generated, s.total_chunks, "{:?}", r.vectors);
  assert_eq!((s.embedded_chunks, s.needs_embedding), (s.total_chunks, 0));
  assert!(s.has_vector_index);
}

#[test]
fn vectors_come_from_the_vaults_own_wiki_directory() {
  let Some(_) = common::models() else { return };
  let t = tempfile::tempdir().unwrap();
  // Pages kept outside `<meta>/../wiki`, as a host may configure through VaultPaths.
  let mut p = vault(t.path());
  p.wiki = t.path().join("notes");
  fs::create_dir_all(&p.wiki).unwrap();
  assert_ne!(p.meta.join("../wiki").canonicalize().ok(), p.wiki.canonicalize().ok());
  write(&p, "concepts/backups", "Keep three copies of important data, two media, one off site.");
  write(&p, "concepts/sourdough", "Feed the starter flour and water twice a day.");
  let r = reindex_vault(&p, &both());
  assert_eq!(r.status.total_documents, 2);
  assert_fully_embedded(&p, &r);
}

#[test]
fn custom_chunking_gets_vectors() {
  let Some(_) = common::models() else { return };
  let t = tempfile::tempdir().unwrap();
  let p = vault(t.path());
  for i in 0..3 {
    let text: String = (0..12)
      .map(|k| format!("Step {k} of part {i} moved table t{k}x{i} to the new cluster and checked it. "))
      .collect();
    write(&p, &format!("concepts/long-{i}"), &format!("# Part {i}\n\n{text}"));
  }
  let chunking = ChunkConfig { max_tokens: 40, overlap_tokens: 8 };
  let r = reindex_vault(&p, &ReindexOptions { chunking, ..both() });
  assert_fully_embedded(&p, &r);
  assert!(r.chunks.total > 3 * 4, "small chunks: {:?}", r.chunks);
}

#[test]
fn a_cold_build_of_many_batches_leaves_few_segments_and_keeps_the_page_manifest() {
  let Some(_) = common::models() else { return };
  let t = tempfile::tempdir().unwrap();
  let p = vault(t.path());
  // 2,100 short chunks: more than four commit batches of 512.
  for i in 0..700 {
    let body: String =
      (0..3).map(|s| format!("# Heading {s}\n\nShort note {i} part {s} zxn{i}s{s}.\n\n")).collect();
    write(&p, &format!("notes/n-{i}"), &body);
  }
  let lexical = reindex_vault(&p, &ReindexOptions { components: vec![Component::Lexical], ..both() });
  assert!(lexical.ok, "{:?}", lexical.errors);
  assert!(lexical.chunks.total > 4 * 512, "{:?}", lexical.chunks);
  let store = p.retrieval();
  let manifests = files_with_suffix(&store, ".json")
    .into_iter()
    .filter(|f| f.file_name().unwrap().to_string_lossy().starts_with("manifest."))
    .collect::<Vec<_>>();
  let r = reindex_vault(&p, &ReindexOptions { components: vec![Component::Vectors], ..both() });
  assert_fully_embedded(&p, &r);
  let segments = files_with_suffix(&store, ".vec");
  assert!(
    segments.len() == 1,
    "{} batches left {} segment files: {segments:?}",
    r.vectors.generated.div_ceil(512),
    segments.len()
  );
  let after = files_with_suffix(&store, ".json")
    .into_iter()
    .filter(|f| f.file_name().unwrap().to_string_lossy().starts_with("manifest."))
    .collect::<Vec<_>>();
  assert_eq!(after, manifests, "vector batches must not write page manifests");
}

#[test]
fn dense_recalls_racing_forced_rebuilds_stay_hybrid() {
  let Some(_) = common::models() else { return };
  const PAGES: usize = 40;
  let t = tempfile::tempdir().unwrap();
  let p = vault(t.path());
  let word = |i: usize| {
    format!("zxd{}vor", i.to_string().bytes().map(|d| (b'b' + d - b'0') as char).collect::<String>())
  };
  for i in 0..PAGES {
    write(
      &p,
      &format!("concepts/topic-{i}"),
      &format!("# Note {i}\n\nThis note about {} records fact {i}.", word(i)),
    );
  }
  assert_fully_embedded(&p, &reindex_vault(&p, &both()));
  let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 5 };
  let opts = RecallOptions::new(policy, RetrievalMode::Hybrid);
  let read = |r: usize, n: usize| {
    let i = (r * 13 + n) % PAGES;
    match recall_wiki(&p, &word(i), &opts) {
      Ok(resp)
        if resp.mode == RetrievalMode::Hybrid
          && resp.diagnostics.is_empty()
          && resp.results.first().is_some_and(|x| x.id == format!("concepts/topic-{i}")) =>
      {
        None
      }
      Ok(resp) => Some(format!(
        "{}: mode {:?}, {:?}, {:?}",
        word(i),
        resp.mode,
        resp.results.iter().map(|x| &x.id).collect::<Vec<_>>(),
        resp.diagnostics
      )),
      Err(e) => Some(format!("{}: {e}", word(i))),
    }
  };
  let (failures, n) = common::race(2, read, || {
    // Forced lexical rebuilds keep the vectors (they are keyed by chunk content).
    for _ in 0..60 {
      let r =
        reindex_vault(&p, &ReindexOptions { force: true, components: vec![Component::Lexical], ..both() });
      assert!(r.ok && r.full_rebuild, "{:?}", r.errors);
    }
  });
  assert!(failures.is_empty(), "{} of {n} dense recalls failed: {failures:#?}", failures.len());
  let s = read_index_status(&p);
  assert_eq!((s.embedded_chunks, s.needs_embedding), (s.total_chunks, 0));
}

/// A store of an older index format (another lexical schema) is rebuilt by the next reindex and
/// keeps its vectors: they are keyed by chunk content, which a format change leaves as it was,
/// and the old store's commit is read by field name. Nothing is embedded again.
#[test]
fn a_store_of_an_older_format_is_rebuilt_with_its_vectors() {
  use llm_wiki_core::store::layout::{StoreLayout, INDEX_FORMAT_VERSION};
  use llm_wiki_core::store::lexical::LexicalIndex;
  use tantivy::schema::{NumericOptions, Schema, STORED, STRING, TEXT};
  let Some(_) = common::models() else { return };
  let t = tempfile::tempdir().unwrap();
  let p = vault(t.path());
  write(&p, "concepts/backups", "Keep three copies of important data, two media, one off site.");
  write(&p, "concepts/sourdough", "Feed the starter flour and water twice a day.");
  let first = reindex_vault(&p, &both());
  assert_fully_embedded(&p, &first);
  let dir = StoreLayout::new(p.retrieval()).current().unwrap();

  // The store as an older format left it: its lexical index in another schema (other fields,
  // other order) holding the same commit, and the older version in state.json.
  let commit = LexicalIndex::commit_in(&dir.lexical_dir()).unwrap().unwrap();
  fs::remove_dir_all(dir.lexical_dir()).unwrap();
  fs::create_dir_all(dir.lexical_dir()).unwrap();
  let mut b = Schema::builder();
  let body = b.add_text_field("chunk_body", TEXT);
  let kind = b.add_text_field("kind", STRING);
  let vectors = b.add_text_field("vectors", STORED);
  let generation = b.add_u64_field("generation", NumericOptions::default().set_stored());
  let manifest_generation = b.add_u64_field("manifest_generation", NumericOptions::default().set_stored());
  let index = tantivy::Index::create_in_dir(dir.lexical_dir(), b.build()).unwrap();
  let mut w: tantivy::IndexWriter = index.writer_with_num_threads(1, 15_000_000).unwrap();
  w.add_document(tantivy::doc!(kind => "chunk", body => "three copies")).unwrap();
  w.add_document(tantivy::doc!(
    kind => "commit",
    generation => commit.generation,
    manifest_generation => commit.manifest_generation,
    vectors => serde_json::to_string(commit.vectors.as_ref().unwrap()).unwrap()
  ))
  .unwrap();
  w.commit().unwrap();
  drop(w);
  let state = fs::read_to_string(dir.state_file()).unwrap();
  let (now, older) = (
    format!("\"formatVersion\": {INDEX_FORMAT_VERSION}"),
    format!("\"formatVersion\": {}", INDEX_FORMAT_VERSION - 1),
  );
  assert!(state.contains(&now), "{state}");
  fs::write(dir.state_file(), state.replace(&now, &older)).unwrap();
  assert_eq!(read_index_status(&p).state, llm_wiki_core::store::status::IndexState::Stale);

  let r = reindex_vault(&p, &both());
  assert!(r.ok && r.full_rebuild, "{:?}", r.errors);
  assert_eq!(r.vectors.generated, 0, "vectors were embedded again: {:?}", r.vectors);
  let s = read_index_status(&p);
  assert_eq!(s.state, llm_wiki_core::store::status::IndexState::Ready);
  assert_eq!((s.embedded_chunks, s.needs_embedding), (s.total_chunks, 0));
}
