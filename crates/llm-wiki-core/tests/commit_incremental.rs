//! Hinted page commits update `state.json`'s counts and manifest hash from the journal record
//! (the writer's tally) and report the page-level lint of the pages they changed; the results
//! equal a whole count / a whole-vault lint.

use std::fs;
use std::path::PathBuf;

use llm_wiki_core::memory::graph::lint_issues;
use llm_wiki_core::store::generation::Generation;
use llm_wiki_core::store::layout::{StoreDir, StoreLayout};
use llm_wiki_core::store::manifest::Manifest;
use llm_wiki_core::store::state::{StateFile, StateModels, StateVectors};
use llm_wiki_core::store::{reindex_vault, Component, ReindexOptions, ReindexResult};
use llm_wiki_core::testkit::temp_vault as vault;
use llm_wiki_core::vault::VaultPaths;

fn write(p: &VaultPaths, id: &str, front: &str, body: &str) {
  let f = p.wiki.join(format!("{id}.md"));
  fs::create_dir_all(f.parent().unwrap()).unwrap();
  fs::write(&f, format!("---\ntype: concept\ntitle: {id}\n{front}---\n{body}\n")).unwrap();
  let t = fs::metadata(&f).unwrap().modified().unwrap() + std::time::Duration::from_secs(5);
  fs::File::options().write(true).open(&f).unwrap().set_modified(t).unwrap();
}

fn opts(hints: Option<Vec<PathBuf>>, force: bool) -> ReindexOptions {
  ReindexOptions { components: vec![Component::Lexical], changed_paths: hints, force, ..Default::default() }
}

fn run(p: &VaultPaths, hints: Option<Vec<PathBuf>>) -> ReindexResult {
  let r = reindex_vault(p, &opts(hints, false));
  assert!(r.ok, "{:?}", r.errors);
  r
}

fn hint(p: &VaultPaths, id: &str) -> PathBuf {
  p.wiki.join(format!("{id}.md")).strip_prefix(&p.root).unwrap().to_path_buf()
}

fn store(p: &VaultPaths) -> StoreDir {
  StoreLayout::new(p.retrieval()).current().expect("a published store")
}

fn on_disk(p: &VaultPaths) -> Manifest {
  let g = Generation::open(store(p)).unwrap();
  Manifest::load_generation(&store(p), g.commit.manifest_generation, None).unwrap()
}

/// state.json's counts and hash equal a whole count of the committed manifest read from disk.
fn state_is_a_fresh_count(p: &VaultPaths) -> StateFile {
  let s = match StateFile::read(&store(p)) {
    llm_wiki_core::fsutil::JsonFile::Valid(s) => s,
    _ => panic!("no state"),
  };
  let m = on_disk(p);
  let distinct: std::collections::HashSet<u64> = m.entries.values().flat_map(|e| e.chunks.keys()).collect();
  let fresh = StateFile::describe(
    &m,
    s.generation,
    &s.store_id,
    StateModels::default(),
    StateVectors { missing: distinct.len() as u32, ..Default::default() },
  );
  assert_eq!(s.status, fresh.status, "counts drifted from a whole count");
  assert_eq!(s.manifest_hash, m.hash(), "hash drifted");
  assert_eq!(s.manifest_generation, m.generation);
  s
}

fn codes(issues: &[llm_wiki_core::store::IndexIssue]) -> Vec<(String, Option<String>)> {
  let mut v: Vec<_> = issues
    .iter()
    .filter(|i| i.code.starts_with("relation_") || i.code.starts_with("page_links"))
    .map(|i| (i.code.clone(), i.path.clone()))
    .collect();
  v.sort();
  v
}

#[test]
fn counts_and_hash_after_hinted_edits_equal_a_whole_count() {
  let (_t, p) = vault();
  for i in 0..12 {
    write(&p, &format!("concepts/p{i:02}"), "", &format!("Body {i} about zq{i}x.\n\nShared paragraph."));
  }
  run(&p, None);
  state_is_a_fresh_count(&p);
  // Edit, duplicate another page's content (shared chunk ids), create, delete, rename.
  write(&p, "concepts/p03", "", "Edited body.");
  run(&p, Some(vec![hint(&p, "concepts/p03")]));
  state_is_a_fresh_count(&p);
  let same = fs::read_to_string(p.wiki.join("concepts/p05.md")).unwrap();
  fs::write(p.wiki.join("concepts/p06.md"), same.replace("p05", "p06")).unwrap();
  run(&p, Some(vec![hint(&p, "concepts/p06")]));
  state_is_a_fresh_count(&p);
  write(&p, "concepts/new", "", "A new page.\n\nShared paragraph.");
  run(&p, Some(vec![hint(&p, "concepts/new")]));
  state_is_a_fresh_count(&p);
  fs::remove_file(p.wiki.join("concepts/p07.md")).unwrap();
  run(&p, Some(vec![hint(&p, "concepts/p07")]));
  state_is_a_fresh_count(&p);
  fs::rename(p.wiki.join("concepts/p08.md"), p.wiki.join("concepts/p08b.md")).unwrap();
  run(&p, Some(vec![hint(&p, "concepts/p08"), hint(&p, "concepts/p08b")]));
  let hinted = state_is_a_fresh_count(&p);
  // A walk afterwards finds nothing to change.
  run(&p, None);
  state_is_a_fresh_count(&p);
  // A forced rebuild counts everything from scratch: same counts and hash.
  let r = reindex_vault(&p, &opts(None, true));
  assert!(r.ok, "{:?}", r.errors);
  let rebuilt = state_is_a_fresh_count(&p);
  assert_eq!(rebuilt.status, hinted.status);
  assert_eq!(rebuilt.manifest_hash, hinted.manifest_hash);
}

#[test]
fn hinted_edits_report_the_changed_pages_lint_and_a_walk_reports_the_whole_vault_lint() {
  let (_t, p) = vault();
  write(&p, "concepts/a", "", "Links to [b](b.md).");
  write(&p, "concepts/b", "", "Links to [a](a.md).");
  write(&p, "concepts/c", "relations:\n  - target: concepts/missing\n    type: supports\n", "No links.");
  let first = run(&p, None);
  assert!(!codes(&first.warnings).is_empty(), "the whole-vault lint finds c's missing target");
  // A hinted edit adding a page-level finding (an unknown relation type) reports it.
  write(&p, "concepts/a", "relations:\n  - target: concepts/b\n    type: refutes\n", "Links to [b](b.md).");
  let r = run(&p, Some(vec![hint(&p, "concepts/a")]));
  assert_eq!(
    codes(&r.warnings),
    vec![("relation_unknown_type".to_string(), Some("concepts/a.md".to_string()))]
  );
  // More hinted edits, then the lint a walk reports equals a whole-vault lint of a fresh build.
  write(&p, "concepts/b", "relations:\n  - target: concepts/a\n    type: supports\n", "No link back.");
  run(&p, Some(vec![hint(&p, "concepts/b")]));
  fs::remove_file(p.wiki.join("concepts/c.md")).unwrap();
  run(&p, Some(vec![hint(&p, "concepts/c")]));
  let walk = run(&p, None);
  let fresh = lint_issues(&on_disk(&p));
  assert_eq!(codes(&walk.warnings), codes(&fresh));
  let rebuilt = reindex_vault(&p, &opts(None, true));
  assert!(rebuilt.ok);
  assert_eq!(codes(&walk.warnings), codes(&rebuilt.warnings));
  assert!(
    codes(&walk.warnings).iter().any(|(c, _)| c == "relation_missing_body_link"),
    "{:?}",
    walk.warnings
  );
}
