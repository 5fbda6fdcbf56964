//! A warm reader follows the commits of its store through the manifest journal (issue 16: an
//! edit searchable within a second at 20k pages): after every commit — add, update, delete,
//! rename, several commits at once, a torn record left by a crashed writer, a checkpoint that
//! writes a new base — the reader's snapshot holds exactly what a fresh whole load of that
//! generation holds (manifest and page keys), a snapshot held during a commit keeps its own
//! generation, and only a new base costs the reader a whole-manifest load — none when this
//! process's writer committed it: the reader then shares the writer's manifest, and afterwards
//! the two hold one copy of every unchanged page's entry.

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;

use llm_wiki_core::retrieve::engine::{open_snapshot, PageKeys, Snapshot};
use llm_wiki_core::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RetrievalMode};
use llm_wiki_core::store::manifest::{committed, forget_committed, Manifest};
use llm_wiki_core::store::{reindex_vault, Component, ReindexOptions};
use llm_wiki_core::testkit::temp_vault;
use llm_wiki_core::util::hash::page_key;
use llm_wiki_core::vault::VaultPaths;

fn write(p: &VaultPaths, id: &str, body: &str) {
  let f = p.wiki.join(format!("{id}.md"));
  fs::create_dir_all(f.parent().unwrap()).unwrap();
  fs::write(&f, format!("---\ntype: concept\ntitle: {id}\n---\n{body}\n")).unwrap();
  // Out of the racy window, so the size+mtime shortcut decides.
  let t = fs::metadata(&f).unwrap().modified().unwrap() + std::time::Duration::from_secs(5);
  fs::File::options().write(true).open(&f).unwrap().set_modified(t).unwrap();
}

/// A hinted lexical reindex of the pages `ids` (the watcher's path: one journal record).
fn commit(p: &VaultPaths, ids: &[&str]) -> u64 {
  let hints: Vec<PathBuf> = ids.iter().map(|id| p.wiki.join(format!("{id}.md"))).collect();
  let opts =
    ReindexOptions { components: vec![Component::Lexical], changed_paths: Some(hints), ..Default::default() };
  let r = reindex_vault(p, &opts);
  assert!(r.ok, "{:?}", r.errors);
  r.generation as u64
}

fn snapshot(p: &VaultPaths) -> Snapshot {
  match open_snapshot(p) {
    Ok(s) => s,
    Err(_) => panic!("the store does not open"),
  }
}

/// The reader's snapshot after a commit, checked against a fresh whole load of its generation.
fn check(p: &VaultPaths, generation: u64) -> Snapshot {
  let s = snapshot(p);
  assert_eq!(s.generation, generation);
  let fresh = Manifest::load_generation(&s.reader.store, s.manifest.generation, None).unwrap();
  assert_eq!(*s.manifest, fresh, "reader's manifest at generation {generation}");
  let keys: PageKeys = fresh.entries.keys().map(|id| (page_key(id), id.clone())).collect();
  assert_eq!(*s.keys, keys, "reader's page keys at generation {generation}");
  s
}

fn finds(p: &VaultPaths, query: &str, id: &str) -> bool {
  let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 10 };
  let r = recall_wiki(p, query, &RecallOptions::new(policy, RetrievalMode::Lexical)).unwrap();
  r.results.iter().any(|x| x.id == id)
}

#[test]
fn a_reader_follows_commits_through_the_journal_and_equals_a_whole_load() {
  let (_t, p) = temp_vault();
  for i in 0..20 {
    write(&p, &format!("concepts/p{i:02}"), &format!("Body {i} with word zq{i}x."));
  }
  let first =
    reindex_vault(&p, &ReindexOptions { components: vec![Component::Lexical], ..Default::default() });
  assert!(first.ok, "{:?}", first.errors);
  // As in a fresh process (the writer's copy forgotten): the first snapshot parses the manifest.
  forget_committed();
  let opened = check(&p, first.generation as u64);
  let (loads, shares) = (opened.reader.manifest_loads(), opened.reader.manifest_shares());
  assert_eq!((loads, shares), (1, 0));
  drop(opened);

  // Add, update, delete, rename: each a journal record the reader applies.
  write(&p, "concepts/added", "A new page about qorvex.");
  let g = commit(&p, &["concepts/added"]);
  check(&p, g);
  assert!(finds(&p, "qorvex", "concepts/added"));
  write(&p, "concepts/p03", "Rewritten with blenwick.");
  let g = commit(&p, &["concepts/p03"]);
  assert_eq!(check(&p, g).manifest.entries["concepts/p03"].sections, 1);
  assert!(finds(&p, "blenwick", "concepts/p03"));
  fs::remove_file(p.wiki.join("concepts/p04.md")).unwrap();
  let g = commit(&p, &["concepts/p04"]);
  assert!(!check(&p, g).manifest.entries.contains_key("concepts/p04"));
  assert!(!finds(&p, "zq4x", "concepts/p04"));
  fs::create_dir_all(p.wiki.join("notes")).unwrap();
  fs::rename(p.wiki.join("concepts/p05.md"), p.wiki.join("notes/moved.md")).unwrap();
  let g = commit(&p, &["concepts/p05", "notes/moved"]);
  let s = check(&p, g);
  assert!(s.manifest.entries.contains_key("notes/moved") && !s.manifest.entries.contains_key("concepts/p05"));
  drop(s);
  assert!(finds(&p, "zq5x", "notes/moved"));

  // An old reader generation: three commits before the reader looks again.
  for (i, id) in ["concepts/p06", "concepts/p07", "concepts/p08"].iter().enumerate() {
    write(&p, id, &format!("Batch {i} of trelmost."));
    commit(&p, &[id]);
  }
  write(&p, "concepts/p09", "Last of the batch.");
  let g = commit(&p, &["concepts/p09"]);
  check(&p, g);

  // A snapshot held (a recall in flight) while the reader moves on keeps its generation: the
  // reader copies the manifest instead of changing it in place.
  let held = check(&p, g);
  write(&p, "concepts/p10", "Changed while a recall held the old generation.");
  let g = commit(&p, &["concepts/p10"]);
  check(&p, g);
  let fresh_old = Manifest::load_generation(&held.reader.store, held.manifest.generation, None).unwrap();
  assert_eq!(*held.manifest, fresh_old, "a held snapshot changed under its recall");
  drop(held);

  // A torn record after the last commit (a writer that crashed mid-append): the reader stays at
  // the committed generation, and the next writer cuts the record off.
  let store = snapshot(&p).reader.store.clone();
  let base = *store.manifest_generations().last().unwrap();
  let jpath = store.journal_file(base);
  let mut journal = fs::read(&jpath).unwrap();
  journal.extend_from_slice(format!("{{\"generation\":{},\"set\":{{\"conc", g + 1).as_bytes());
  fs::write(&jpath, &journal).unwrap();
  check(&p, g);
  write(&p, "concepts/p11", "After the torn record.");
  let g = commit(&p, &["concepts/p11"]);
  check(&p, g);
  assert_eq!(snapshot(&p).reader.manifest_loads(), loads, "a journal record cost a whole-manifest load");

  // Large edits until a commit checkpoints into a new base: the reader loads that one whole and
  // follows the new base's journal afterwards.
  let long = "word ".repeat(2000);
  for round in 0..40 {
    let ids: Vec<String> =
      (0..20).filter(|i| *i != 4 && *i != 5).map(|i| format!("concepts/p{i:02}")).collect();
    for id in &ids {
      write(&p, id, &format!("{long} round {round}"));
    }
    let g = commit(&p, &ids.iter().map(String::as_str).collect::<Vec<_>>());
    check(&p, g);
    if store.manifest_generations().iter().any(|b| *b > base) {
      break;
    }
  }
  assert!(store.manifest_generations().iter().any(|b| *b > base), "no checkpoint after many edits");
  // This process's writer committed the new base: the reader takes the writer's manifest
  // instead of parsing it.
  let s = snapshot(&p);
  assert_eq!((s.reader.manifest_loads(), s.reader.manifest_shares()), (loads, shares + 1));
  assert!(Arc::ptr_eq(&s.manifest, &committed(&store, s.manifest.generation).expect("the writer's copy")));
  drop(s);
  write(&p, "concepts/p12", "After the checkpoint, zandrel.");
  let g = commit(&p, &["concepts/p12"]);
  let s = check(&p, g);
  // The writer copied the shared map to commit; the reader followed the journal: one copy of
  // every unchanged page's entry between them, the changed page's entry their own.
  let writer = committed(&store, g).expect("the writer's copy");
  assert!(!Arc::ptr_eq(&s.manifest, &writer));
  assert!(Arc::ptr_eq(&s.manifest.entries["concepts/p00"], &writer.entries["concepts/p00"]));
  assert!(Arc::ptr_eq(&s.manifest.entries["concepts/p19"], &writer.entries["concepts/p19"]));
  assert_eq!(s.manifest.entries["concepts/p12"], writer.entries["concepts/p12"]);
  drop((s, writer));
  assert!(finds(&p, "zandrel", "concepts/p12"));
  let s = snapshot(&p);
  assert_eq!((s.reader.manifest_loads(), s.reader.manifest_shares()), (loads, shares + 1));
}
