//! Store format 4: page commits append one manifest journal record (no whole-manifest rewrite),
//! checkpoints write a new base, uncommitted records and bases are ignored by readers and cut off
//! by the next writer; and the changed-paths hint of `ReindexOptions` (edits, creates, deletes,
//! renames, unchanged pages, paths outside the vault, folders); hinted commits update
//! `state.json`'s counts and manifest hash from the journal record (the writer's tally) and report
//! the page-level lint of the pages they changed — equal to a whole count / a whole-vault lint.

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

fn page(p: &VaultPaths, id: &str, body: &str) {
  write(p, id, "", body)
}

/// A page with extra frontmatter lines (`front`, each ending in a newline).
fn write(p: &VaultPaths, id: &str, front: &str, body: &str) {
  let f = p.wiki.join(format!("{id}.md"));
  fs::create_dir_all(f.parent().unwrap()).unwrap();
  fs::write(&f, format!("---\ntype: concept\ntitle: {id}\n{front}---\n{body}\n")).unwrap();
  // Out of the racy window, so the size+mtime shortcut decides.
  let t = fs::metadata(&f).unwrap().modified().unwrap() + std::time::Duration::from_secs(5);
  fs::File::options().write(true).open(&f).unwrap().set_modified(t).unwrap();
}

fn lexical() -> ReindexOptions {
  ReindexOptions { components: vec![Component::Lexical], ..Default::default() }
}

fn opts(hints: Option<Vec<PathBuf>>, force: bool) -> ReindexOptions {
  ReindexOptions { changed_paths: hints, force, ..lexical() }
}

fn run(p: &VaultPaths, hints: Option<Vec<PathBuf>>) -> ReindexResult {
  let r = reindex_vault(p, &ReindexOptions { changed_paths: hints, ..lexical() });
  assert!(r.ok, "{:?}", r.errors);
  r
}

/// The hint path of a page, relative to the vault root.
fn hint(p: &VaultPaths, id: &str) -> PathBuf {
  p.wiki.join(format!("{id}.md")).strip_prefix(&p.root).unwrap().to_path_buf()
}

fn store(p: &VaultPaths) -> StoreDir {
  StoreLayout::new(p.retrieval()).current().expect("a published store")
}

/// The live generation's manifest, read from disk (base + journal), never from the writer's cache.
fn on_disk(p: &VaultPaths) -> Manifest {
  let g = Generation::open(store(p)).unwrap();
  Manifest::load_generation(&store(p), g.commit.manifest_generation, None).unwrap()
}

fn ids(m: &Manifest) -> Vec<String> {
  m.entries.keys().cloned().collect()
}

/// A walk after a hinted run finds nothing to do: the hint left exactly what a walk would.
fn walk_agrees(p: &VaultPaths) {
  let before = on_disk(p);
  let r = run(p, None);
  assert_eq!((r.documents.indexed, r.documents.updated, r.documents.removed), (0, 0, 0), "walk disagreed");
  assert_eq!(r.generation as u64, before.generation, "a walk after a hinted run committed again");
}

#[test]
fn page_commits_append_journal_records_and_checkpoint_into_a_new_base() {
  let (_t, p) = vault();
  for i in 0..30 {
    page(&p, &format!("concepts/p{i:02}"), &format!("Body {i} with word zq{i}x."));
  }
  let first = run(&p, None);
  let dir = store(&p);
  assert_eq!(dir.manifest_generations(), vec![first.generation as u64]);
  assert!(!dir.journal_file(first.generation as u64).exists());

  page(&p, "concepts/p03", "Edited body.");
  let r = run(&p, None);
  assert_eq!(r.documents.updated, 1);
  // No second base: one record appended to the first base's journal.
  assert_eq!(dir.manifest_generations(), vec![first.generation as u64]);
  let journal = fs::read_to_string(dir.journal_file(first.generation as u64)).unwrap();
  assert_eq!(journal.lines().count(), 1, "{journal}");
  let m = on_disk(&p);
  assert_eq!(m.generation, r.generation as u64);
  assert!(m.entries["concepts/p03"].size < 100);
  assert_eq!(m.entries.len(), 30);
  // A record holds the change only (one page), not the vault.
  assert!(
    journal.len() < fs::metadata(dir.manifest_file(first.generation as u64)).unwrap().len() as usize / 10
  );

  // Many edits: the journal outgrows a quarter of its base plus the slack, and a commit writes a
  // new base; the old base and journal go once no kept commit reads them.
  let long = "word ".repeat(2000);
  let mut last = r.generation;
  for round in 0..40 {
    for i in 0..30 {
      page(&p, &format!("concepts/p{i:02}"), &format!("{long} round {round}"));
    }
    last = run(&p, None).generation;
    if dir.manifest_generations().iter().any(|g| *g > first.generation as u64) {
      break;
    }
  }
  let bases = dir.manifest_generations();
  assert!(bases.iter().any(|g| *g > first.generation as u64), "no checkpoint after many edits: {bases:?}");
  assert!(bases.len() <= 2, "{bases:?}");
  let m = on_disk(&p);
  assert_eq!(m.generation, last as u64);
  assert!(m.entries.values().all(|e| e.size > 10_000));
  walk_agrees(&p);
}

#[test]
fn uncommitted_records_and_bases_are_ignored_by_readers_and_cut_by_the_next_writer() {
  let (_t, p) = vault();
  for i in 0..5 {
    page(&p, &format!("concepts/p{i}"), &format!("Body {i}."));
  }
  let first = run(&p, None);
  page(&p, "concepts/p1", "Edited once.");
  let second = run(&p, None);
  let dir = store(&p);
  let committed = on_disk(&p);
  // A crashed writer's leftovers: a whole record of the next generation removing p0, a torn
  // record after it, and a base file of the next generation that lost p2.
  let jpath = dir.journal_file(first.generation as u64);
  let mut journal = fs::read(&jpath).unwrap();
  let fake =
    format!("{{\"generation\":{},\"builtAtMs\":1,\"del\":[\"concepts/p0\"]}}\n", second.generation + 1);
  journal.extend_from_slice(fake.as_bytes());
  journal.extend_from_slice(b"{\"generation\":99,\"set\":{\"conc");
  fs::write(&jpath, &journal).unwrap();
  let mut bogus = committed.clone();
  bogus.entries.remove("concepts/p2");
  bogus.generation = second.generation as u64 + 1;
  bogus.save(&dir.manifest_file(second.generation as u64 + 1)).unwrap();

  // Readers see the committed generation.
  assert_eq!(on_disk(&p), committed);
  assert_eq!(Generation::open(dir.clone()).unwrap().manifest.entries.len(), 5);
  // The next commit (same generation number as the leftovers) replaces them.
  page(&p, "concepts/p4", "Edited twice.");
  let third = run(&p, None);
  assert_eq!(third.generation, second.generation + 1);
  let m = on_disk(&p);
  assert_eq!(ids(&m), vec!["concepts/p0", "concepts/p1", "concepts/p2", "concepts/p3", "concepts/p4"]);
  let journal = fs::read_to_string(&jpath).unwrap();
  assert_eq!(journal.lines().count(), 2, "uncommitted records were not cut off: {journal}");
  assert!(!journal.contains("\"generation\":99"));
  walk_agrees(&p);
}

/// A crashed writer's record after the committed generation can be anything, an earlier
/// generation number included: the load of the committed generation stops at its own record and
/// never reads it. (On main it failed with "record of generation N after generation N+1", which
/// made the store unreadable until a rebuild.) Found by the journal fuzz target.
#[test]
fn a_record_after_the_asked_generation_is_never_read_even_out_of_order() {
  let (_t, p) = vault();
  for i in 0..3 {
    page(&p, &format!("concepts/p{i}"), &format!("Body {i}."));
  }
  let first = run(&p, None);
  page(&p, "concepts/p1", "Edited once.");
  let second = run(&p, None);
  assert_eq!(second.generation, first.generation + 1);
  let dir = store(&p);
  let committed = on_disk(&p);
  let jpath = dir.journal_file(first.generation as u64);
  let mut journal = fs::read(&jpath).unwrap();
  assert_eq!(journal.iter().filter(|b| **b == b'\n').count(), 1, "one record");
  // An uncommitted record numbered before the committed one (a writer that lost its place).
  let stale = format!("{{\"generation\":{},\"builtAtMs\":1,\"del\":[\"concepts/p0\"]}}\n", first.generation);
  journal.extend_from_slice(stale.as_bytes());
  fs::write(&jpath, &journal).unwrap();
  let m =
    Manifest::load_generation(&dir, second.generation as u64, None).expect("the committed generation loads");
  assert_eq!(m, committed);
}

#[test]
fn a_manifest_file_changed_behind_the_writer_is_read_again_not_trusted_from_memory() {
  let (_t, p) = vault();
  page(&p, "concepts/a", "Alpha.");
  run(&p, None);
  let dir = store(&p);
  let g = dir.manifest_generations()[0];
  fs::write(dir.manifest_file(g), "{").unwrap();
  assert!(Generation::open(dir.clone()).is_err(), "a corrupted manifest must not open from the cache");
  // The store is rebuilt, not failed.
  let r = run(&p, None);
  assert!(r.full_rebuild);
}

#[test]
fn hints_follow_edits_creates_deletes_and_renames_without_a_walk() {
  let (_t, p) = vault();
  page(&p, "concepts/a", "Alpha text.");
  page(&p, "concepts/b", "Beta text.");
  page(&p, "concepts/c", "Gamma text.");
  page(&p, "folder/d", "Delta text.");
  page(&p, "folder/e", "Epsilon text.");
  let first = run(&p, None);
  assert_eq!(first.documents.indexed, 5);

  // Edit.
  page(&p, "concepts/a", "Alpha text, edited.");
  let r = run(&p, Some(vec![hint(&p, "concepts/a")]));
  assert_eq!((r.documents.indexed, r.documents.updated, r.documents.removed), (0, 1, 0));
  assert_eq!(r.documents.unchanged, 4);
  assert_eq!(r.generation, first.generation + 1);
  walk_agrees(&p);

  // Create (an absolute path inside the vault is accepted too).
  page(&p, "concepts/f", "Phi text.");
  let r = run(&p, Some(vec![p.wiki.join("concepts/f.md")]));
  assert_eq!((r.documents.indexed, r.documents.updated, r.documents.removed), (1, 0, 0));
  walk_agrees(&p);

  // Delete.
  fs::remove_file(p.wiki.join("concepts/b.md")).unwrap();
  let r = run(&p, Some(vec![hint(&p, "concepts/b")]));
  assert_eq!((r.documents.indexed, r.documents.updated, r.documents.removed), (0, 0, 1));
  walk_agrees(&p);

  // Rename: both paths hinted.
  fs::rename(p.wiki.join("concepts/c.md"), p.wiki.join("concepts/c2.md")).unwrap();
  let r = run(&p, Some(vec![hint(&p, "concepts/c"), hint(&p, "concepts/c2")]));
  assert_eq!((r.documents.indexed, r.documents.removed), (1, 1));
  assert!(on_disk(&p).entries.contains_key("concepts/c2"));
  walk_agrees(&p);

  // A hint naming an unchanged page, a non-page file and a path outside wiki/ change nothing.
  let g = on_disk(&p).generation;
  fs::write(p.root.join("notes.txt"), "x").unwrap();
  let r = run(
    &p,
    Some(vec![hint(&p, "concepts/a"), PathBuf::from("notes.txt"), PathBuf::from(".obsidian/x.json")]),
  );
  assert_eq!((r.documents.indexed, r.documents.updated, r.documents.removed), (0, 0, 0));
  assert_eq!(r.generation as u64, g);
  assert!(r.warnings.iter().all(|w| w.code != "reindex_hint_outside_vault"), "{:?}", r.warnings);

  // Paths outside the vault are ignored with a diagnostic (and read nothing).
  let outside = p.root.parent().unwrap().join("elsewhere.md");
  fs::write(&outside, "---\ntype: concept\ntitle: X\n---\nOutside.\n").unwrap();
  let r =
    run(&p, Some(vec![outside.clone(), PathBuf::from("../elsewhere.md"), PathBuf::from("wiki/../../x.md")]));
  let outside_warnings = r.warnings.iter().filter(|w| w.code == "reindex_hint_outside_vault").count();
  assert_eq!(outside_warnings, 3, "{:?}", r.warnings);
  assert_eq!(r.generation as u64, g);

  // An edit that is not hinted is not seen by a hinted run (the hint is trusted) ...
  page(&p, "concepts/a", "Alpha text, edited again.");
  let r = run(&p, Some(vec![]));
  assert_eq!(r.documents.updated, 0);
  // ... and the next walk picks it up.
  let r = run(&p, None);
  assert_eq!(r.documents.updated, 1);

  // A folder deleted: its pages go.
  fs::remove_dir_all(p.wiki.join("folder")).unwrap();
  let folder = p.wiki.join("folder").strip_prefix(&p.root).unwrap().to_path_buf();
  let r = run(&p, Some(vec![folder.clone()]));
  assert_eq!(r.documents.removed, 2);
  walk_agrees(&p);

  // A folder created (or renamed into place): a directory hint falls back to the walk.
  page(&p, "folder/g", "Gamma two.");
  page(&p, "folder/h", "Eta.");
  let r = run(&p, Some(vec![folder]));
  assert_eq!(r.documents.indexed, 2);
  walk_agrees(&p);
  assert_eq!(ids(&on_disk(&p)), vec!["concepts/a", "concepts/c2", "concepts/f", "folder/g", "folder/h"]);
}

#[test]
fn hinted_malformed_pages_are_excluded_and_recover() {
  let (_t, p) = vault();
  page(&p, "concepts/a", "Alpha.");
  run(&p, None);
  let f = p.wiki.join("concepts/a.md");
  fs::write(&f, "no frontmatter at all").unwrap();
  let r = run(&p, Some(vec![hint(&p, "concepts/a")]));
  assert_eq!(r.documents.removed, 1);
  assert!(r.warnings.iter().any(|w| w.code == "frontmatter_missing"), "{:?}", r.warnings);
  let m = on_disk(&p);
  assert!(m.entries.is_empty() && m.excluded.contains_key("concepts/a"));
  walk_agrees(&p);
  page(&p, "concepts/a", "Alpha again.");
  let r = run(&p, Some(vec![hint(&p, "concepts/a")]));
  assert_eq!(r.documents.indexed, 1);
  let m = on_disk(&p);
  assert!(m.excluded.is_empty() && m.entries.contains_key("concepts/a"));
  walk_agrees(&p);
}

#[test]
fn an_older_format_store_is_rebuilt_not_failed() {
  use llm_wiki_core::store::layout::INDEX_FORMAT_VERSION;
  let (_t, p) = vault();
  page(&p, "concepts/a", "Alpha.");
  run(&p, None);
  let dir = store(&p);
  let state = dir.state_file();
  let (now, older) = (
    format!("\"formatVersion\": {INDEX_FORMAT_VERSION}"),
    format!("\"formatVersion\": {}", INDEX_FORMAT_VERSION - 1),
  );
  let text = fs::read_to_string(&state).unwrap().replace(&now, &older);
  assert!(text.contains(&older), "{text}");
  fs::write(&state, text).unwrap();
  let r = run(&p, Some(vec![hint(&p, "concepts/a")]));
  assert!(r.full_rebuild);
  assert_eq!(r.documents.indexed, 1);
  assert_eq!(r.status.format_version, INDEX_FORMAT_VERSION);
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

/// The lint findings among a run's warnings, in order.
fn lint_only(issues: &[llm_wiki_core::store::IndexIssue]) -> Vec<llm_wiki_core::store::IndexIssue> {
  let lint = |c: &str| {
    c.starts_with("relation_")
      || c.starts_with("page_links")
      || c.starts_with("resolution_")
      || c == "cites_superseded"
  };
  issues.iter().filter(|i| lint(&i.code)).cloned().collect()
}

#[test]
fn walked_edits_advance_the_whole_vault_lint_page_by_page() {
  use llm_wiki_core::memory::lint::kept_state;
  let (_t, p) = vault();
  write(&p, "concepts/old", "", "The old claim.");
  write(
    &p,
    "concepts/new",
    "relations:\n  - target: concepts/old\n    type: supersedes\n",
    "Replaces [[old]].",
  );
  write(&p, "notes/cite", "", "Cites [the old claim](../concepts/old.md).");
  write(&p, "notes/typed", "relations:\n  - target: concepts/gone\n    type: supports\n", "No body link.");
  let first = run(&p, None);
  let built = on_disk(&p).generation;
  let vault_id = on_disk(&p).vault_id;
  assert!(lint_only(&first.warnings).iter().any(|i| i.code == "cites_superseded"), "{:?}", first.warnings);
  // Edits, a page sharing a superseded page's name, a rename, the missing target created, a
  // new supersession, a deletion, a hinted edit in between: after each walk the findings equal
  // a whole-vault lint of the manifest on disk, and the kept state was advanced, not rebuilt.
  for i in 0..7 {
    match i {
      0 => write(&p, "notes/cite", "", "Cites [[old]] and [[new]]."),
      1 => write(&p, "notes/old", "", "Another page named old."),
      2 => fs::rename(p.wiki.join("concepts/new.md"), p.wiki.join("concepts/newer.md")).unwrap(),
      3 => write(&p, "concepts/gone", "", "Now it exists."),
      4 => write(
        &p,
        "notes/typed",
        "relations:\n  - target: concepts/gone\n    type: supersedes\n",
        "See [[gone]].",
      ),
      5 => {
        write(&p, "notes/x", "relations:\n  - target: notes/typed\n    type: supports\n", "Links [[typed]].");
        run(&p, Some(vec![hint(&p, "notes/x")]));
      }
      _ => fs::remove_file(p.wiki.join("concepts/old.md")).unwrap(),
    }
    let r = run(&p, None);
    let m = on_disk(&p);
    assert_eq!(lint_only(&r.warnings), lint_issues(&m), "after edit {i}");
    assert_eq!(kept_state(&store(&p).dir, &vault_id), Some((m.generation, built)), "after edit {i}");
  }
}
