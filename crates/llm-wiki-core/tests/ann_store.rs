//! The ANN index in a real store: built by the vector writer when `LLM_WIKI_ANN` says so, listed by
//! the commit document, reopened from disk, kept while the delta is small, rebuilt past
//! `REBUILD_FRACTION`, dropped when turned off. One test: it sets a process environment variable.

use std::collections::HashSet;

use llm_wiki_core::store::ann::AnnMode;
use llm_wiki_core::store::embedding::install_vectors;
use llm_wiki_core::store::generation::Generation;
use llm_wiki_core::store::vectors::{VectorIndex, VectorManifest};
use llm_wiki_core::store::{reindex_vault, Component, ReindexOptions, StoreLayout};
use llm_wiki_core::testkit::{temp_vault, write_page};
use llm_wiki_core::vault::VaultPaths;

const DIMS: usize = 32;

fn vector(key: u64) -> Vec<f32> {
  llm_wiki_core::testkit::synthetic_unit(key, 0, DIMS)
}

fn add_pages(p: &VaultPaths, from: usize, to: usize) -> u64 {
  for i in from..to {
    write_page(p, &format!("p{i}"), &format!("Page {i}"), &format!("Note number {i} about topic {}.", i % 7));
  }
  let r = reindex_vault(p, &ReindexOptions { components: vec![Component::Lexical], ..Default::default() });
  assert!(r.ok, "{:?}", r.errors);
  install_vectors(p, ("test-model", DIMS), 1000, &mut vector).unwrap()
}

/// The live generation's vector manifest, live chunks, and the `vectors/` file names.
fn state(p: &VaultPaths) -> (Generation, VectorManifest, HashSet<u64>, Vec<String>) {
  let g = Generation::open(StoreLayout::new(p.retrieval()).current().unwrap()).unwrap();
  let vm = g.commit.vectors.clone().unwrap();
  let live = g.manifest.chunk_keys();
  let mut files: Vec<String> = std::fs::read_dir(g.dir.vectors_dir())
    .unwrap()
    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
    .collect();
  files.sort();
  (g, vm, live, files)
}

#[test]
fn the_vector_writer_builds_keeps_rebuilds_and_drops_the_index() {
  let (_t, p) = temp_vault();
  std::env::set_var("LLM_WIKI_ANN", "on");
  assert_eq!(add_pages(&p, 0, 60), 60);
  let (g, vm, live, files) = state(&p);
  let first = vm.ann.clone().expect("forced on: the commit lists an ANN file");
  assert_eq!(first.rows, 60);
  assert!(files.contains(&first.file), "{files:?}");
  // Reopened from disk: usable, covering every live row; results equal the exact scan's.
  let idx = VectorIndex::open(&g.dir.vectors_dir(), &vm, &live).unwrap();
  assert_eq!(idx.ann_diagnostic(), None);
  assert_eq!(idx.ann_staleness(), Some((0, 0, 60)));
  for k in live.iter().take(10) {
    let q = vector(*k);
    assert_eq!(idx.search_ann(&q, 1).unwrap()[0].0, *k);
    assert_eq!(idx.search_ann(&q, 5).unwrap(), idx.search_with(&q, 5, false));
  }
  drop(idx);

  // Three new pages (5 % of the index): kept; the new chunks are searched as the delta.
  assert_eq!(add_pages(&p, 60, 63), 3);
  let (g, vm, live, _) = state(&p);
  assert_eq!(vm.ann.as_ref(), Some(&first), "a small delta keeps the index");
  let idx = VectorIndex::open(&g.dir.vectors_dir(), &vm, &live).unwrap();
  assert_eq!(idx.ann_staleness(), Some((3, 0, 60)));
  let fresh: Vec<u64> = live.iter().copied().filter(|k| !is_in(&first, k, &g)).collect();
  assert_eq!(fresh.len(), 3);
  for k in &fresh {
    assert_eq!(idx.search_ann(&vector(*k), 1).unwrap()[0].0, *k, "a delta row is found before a rebuild");
  }
  drop(idx);

  // Twenty more (23 of 60 = 38 %): rebuilt under a new name; the old file is collected.
  assert_eq!(add_pages(&p, 63, 83), 20);
  let (_g, vm, _live, files) = state(&p);
  let second = vm.ann.clone().unwrap();
  assert_ne!(second.file, first.file);
  assert_eq!(second.rows, 83);
  assert!(files.contains(&second.file) && !files.contains(&first.file), "{files:?}");

  // Turned off: the next vector pass drops it from the commit and from disk.
  std::env::set_var("LLM_WIKI_ANN", "off");
  assert_eq!(AnnMode::from_env(), AnnMode::Off);
  assert_eq!(add_pages(&p, 83, 83), 0);
  let (_g, vm, _live, files) = state(&p);
  assert_eq!(vm.ann, None);
  assert!(files.iter().all(|f| !f.ends_with(".ann")), "{files:?}");
  // Auto below the threshold builds none either.
  std::env::set_var("LLM_WIKI_ANN", "auto");
  add_pages(&p, 83, 85);
  assert_eq!(state(&p).1.ann, None);

  // A model change: every vector is rewritten for the new model and the index with them.
  std::env::set_var("LLM_WIKI_ANN", "on");
  assert_eq!(add_pages(&p, 85, 85), 0);
  let before = state(&p).1.ann.expect("forced on again");
  let r = reindex_vault(&p, &ReindexOptions { components: vec![Component::Lexical], ..Default::default() });
  assert!(r.ok);
  assert_eq!(install_vectors(&p, ("other-model", DIMS), 1000, &mut vector).unwrap(), 85);
  let (g, vm, live, files) = state(&p);
  let after = vm.ann.clone().unwrap();
  assert_eq!(vm.model, "other-model");
  assert_ne!(after.file, before.file);
  assert!(!files.contains(&before.file), "{files:?}");
  let idx = VectorIndex::open(&g.dir.vectors_dir(), &vm, &live).unwrap();
  assert_eq!(idx.ann_diagnostic(), None);
  assert_eq!(idx.ann_staleness(), Some((0, 0, 85)));
  std::env::remove_var("LLM_WIKI_ANN");
}

/// Whether chunk `k` was in the store when the index `first` was built (its segment predates it).
fn is_in(first: &llm_wiki_core::store::ann::AnnRef, k: &u64, g: &Generation) -> bool {
  let vm = VectorManifest { ann: Some(first.clone()), ..g.commit.vectors.clone().unwrap() };
  let one: HashSet<u64> = [*k].into_iter().collect();
  let idx = VectorIndex::open_with(&g.dir.vectors_dir(), &vm, &one, AnnMode::On).unwrap();
  idx.ann_staleness().map(|(delta, _, _)| delta == 0).unwrap_or(false)
}
