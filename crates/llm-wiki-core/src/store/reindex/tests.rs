//! The reindex's tests: what a scan keeps, removes and retries, the cold build's manifest, a
//! panicking page.

use std::collections::BTreeMap;

use super::build::SPILL_FROM_OVERRIDE;
use super::plan::{match_by_id, open_current};
use super::*;
use crate::store::manifest::Manifest;
use crate::store::Scope;
use crate::util::hash::sha256_hex;

/// Page id whose indexing panics (test builds only): a stand-in for any bug a page can hit.
const PANIC_PAGE: &str = "concepts/a-panics-when-indexed";

pub(super) fn panic_hook(id: &str) {
  if id == PANIC_PAGE {
    panic!("test hook: indexing {id} panics");
  }
}

/// Page ids whose next read fails once with the given error kind (test builds only): the read
/// runs on the indexing pool's threads, so the set is process-wide, keyed by ids unique to
/// each test.
static READ_FAULTS: std::sync::Mutex<BTreeMap<String, std::io::ErrorKind>> =
  std::sync::Mutex::new(BTreeMap::new());

pub(super) fn fail_next_read(id: &str, kind: std::io::ErrorKind) {
  READ_FAULTS.lock().unwrap().insert(id.to_string(), kind);
}

/// Vault roots whose next full rebuild loses a page from its staged manifest before validation
/// (process-wide, like the read faults: keyed by the test's own temp vault).
static STAGED_FAULTS: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

pub(super) fn fail_next_staged_validation(root: &std::path::Path) {
  STAGED_FAULTS.lock().unwrap().push(root.to_path_buf());
}

/// Whether a staged-manifest fault is pending for this vault (taken: it fires once).
pub(super) fn take_staged_fault(root: &std::path::Path) -> bool {
  let mut faults = STAGED_FAULTS.lock().unwrap_or_else(|p| p.into_inner());
  let at = faults.iter().position(|r| r == root);
  at.map(|i| faults.remove(i)).is_some()
}

/// A staged store whose lexical index and manifest disagree (its manifest lost a page between
/// the commit and validation) is never published: the run fails with `qmd_index_error` naming
/// both counts, the store published before keeps its generation and answers recall, the
/// staged directory is removed, and recovery finds nothing to clean.
#[test]
fn a_staged_store_whose_counts_disagree_is_refused_and_the_previous_one_serves() {
  use crate::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RetrievalMode};
  let (_t, p) = crate::testkit::temp_vault();
  for (i, word) in ["sierra", "tango", "uniform"].iter().enumerate() {
    crate::testkit::write_page(&p, &format!("concepts/s{i}"), &format!("S{i}"), &format!("Body zs{word}."));
  }
  let opts = ReindexOptions { components: vec![Component::Lexical], threads: 2, ..Default::default() };
  let first = reindex_vault(&p, &opts);
  assert!(first.ok, "{:?}", first.errors);
  let layout = StoreLayout::new(p.retrieval());
  let published = layout.current().unwrap().name();
  fail_next_staged_validation(&p.root);
  let r = reindex_vault(&p, &ReindexOptions { force: true, ..opts.clone() });
  assert!(!r.ok, "the mismatched store was published");
  assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
  assert_eq!(r.errors[0].code, "qmd_index_error");
  // "… index holds N documents but the manifest accounts for M", M < N (a page's documents).
  let message = &r.errors[0].message;
  let counts: Vec<u64> = message
    .split_once("index holds ")
    .and_then(|(_, rest)| rest.split_once(" documents but the manifest accounts for "))
    .map(|(n, m)| [n, m].iter().filter_map(|x| x.parse().ok()).collect())
    .unwrap_or_default();
  assert!(matches!(counts[..], [n, m] if m < n), "{message}");
  assert_eq!(layout.current().unwrap().name(), published);
  assert_eq!(layout.store_dirs(), vec![published.clone()], "the staged store directory remains");
  let live = crate::store::generation::Generation::open_live(&layout).unwrap();
  assert_eq!(live.generation(), first.generation as u64);
  drop(live);
  let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 5 };
  let answer = recall_wiki(&p, "zstango", &RecallOptions::new(policy, RetrievalMode::Lexical)).unwrap();
  assert_eq!(answer.results.first().map(|x| x.id.as_str()), Some("concepts/s1"));
  let recovered = crate::store::recover::recover_index(&p);
  assert!(recovered.ok, "{:?}", recovered.diagnostics);
  assert_eq!(layout.store_dirs(), vec![published]);
  // The fault fired once: the next forced rebuild publishes.
  let again = reindex_vault(&p, &ReindexOptions { force: true, ..opts });
  assert!(again.ok && again.full_rebuild, "{:?}", again.errors);
}

/// The injected failure of this page's read, if one is pending (taken: it fails once).
pub(super) fn read_fault(file: &PageFile) -> Option<crate::vault::read::PageReadError> {
  let kind = READ_FAULTS.lock().unwrap_or_else(|p| p.into_inner()).remove(&file.id)?;
  Some(crate::vault::read::PageReadError::Io {
    path: file.abs_path.clone(),
    source: std::io::Error::new(kind, "test hook: injected read failure"),
  })
}

/// A folder the walk cannot list, or a page it cannot stat, for another reason than being
/// gone, keeps its indexed pages (a full scan, the watcher's catch-up, takes nothing for
/// deleted that it could not look at); the next scan sees them again. A folder found gone is a
/// deletion.
#[test]
fn pages_the_walk_cannot_read_are_kept_not_removed() {
  use crate::vault::discover::tests::fail_next_walk;
  let (_t, p) = crate::testkit::temp_vault();
  for (i, word) in ["kilo", "lima", "mike"].iter().enumerate() {
    crate::testkit::write_page(
      &p,
      &format!("concepts/walk{i}"),
      &format!("T{i}"),
      &format!("Body zq{word}."),
    );
    crate::testkit::write_page(&p, &format!("topics/walk{i}"), &format!("U{i}"), &format!("Body zt{word}."));
  }
  let opts = ReindexOptions { components: vec![Component::Lexical], threads: 2, ..Default::default() };
  assert!(reindex_vault(&p, &opts).documents.indexed == 6);
  for scope in [Scope::All, Scope::Changed] {
    let scoped = ReindexOptions { scope, ..opts.clone() };
    fail_next_walk(&p.wiki.join("topics"), std::io::ErrorKind::Other);
    fail_next_walk(&p.wiki.join("concepts/walk1.md"), std::io::ErrorKind::PermissionDenied);
    let r = reindex_vault(&p, &scoped);
    assert!(r.ok, "{:?}", r.errors);
    assert_eq!(r.documents.removed, 0, "{scope:?}: {:?} {:?}", r.documents, r.warnings);
    assert!(r.warnings.iter().any(|w| w.code == "page_unreadable"), "{:?}", r.warnings);
    assert_eq!(r.status.total_documents, 6);
    let r = reindex_vault(&p, &scoped);
    assert!(r.ok && r.documents.removed == 0 && r.warnings.iter().all(|w| w.code != "page_unreadable"));
  }
  // A folder that is gone when listed takes its pages with it.
  fail_next_walk(&p.wiki.join("topics"), std::io::ErrorKind::NotFound);
  let r = reindex_vault(&p, &opts);
  assert_eq!(r.documents.removed, 3, "{:?}", r.documents);
}

/// `removals_only` removes pages that are gone or no longer validate and changes nothing
/// else: a new page is not added, a changed valid page keeps its indexed content, no vectors
/// are written, and where nothing is published nothing is built. The next ordinary run
/// indexes what it left.
#[test]
fn removals_only_takes_out_unsafe_pages_and_indexes_nothing() {
  let (_t, p) = crate::testkit::temp_vault();
  let lexical = ReindexOptions { components: vec![Component::Lexical], threads: 2, ..Default::default() };
  let removals = ReindexOptions {
    removals_only: true,
    components: vec![Component::Lexical, Component::Vectors],
    ..lexical.clone()
  };
  for (i, word) in ["oscar", "papa", "quebec", "romeo"].iter().enumerate() {
    crate::testkit::write_page(
      &p,
      &format!("concepts/r{i}"),
      &format!("T{i}"),
      &format!("Body zr{word}old."),
    );
  }
  // Nothing published: nothing is built.
  let r = reindex_vault(&p, &removals);
  assert!(r.ok, "{:?}", r.errors);
  assert!(StoreLayout::new(p.retrieval()).current().is_none(), "a removals-only run built a store");
  assert_eq!(reindex_vault(&p, &lexical).documents.indexed, 4);
  let gen_before = reindex_vault(&p, &lexical).generation;
  std::thread::sleep(std::time::Duration::from_millis(20));
  std::fs::remove_file(p.wiki.join("concepts/r0.md")).unwrap();
  crate::testkit::write_file(&p.wiki.join("concepts/r1.md"), "no frontmatter any more\n");
  crate::testkit::write_page(&p, "concepts/r2", "T2", "Body zrquebecnew, edited and longer.");
  crate::testkit::write_page(&p, "concepts/r9", "T9", "Body zrnewpage.");
  let r = reindex_vault(&p, &removals);
  assert!(r.ok, "{:?}", r.errors);
  assert_eq!(r.documents.removed, 2, "{:?}", r.documents);
  assert_eq!((r.documents.indexed, r.documents.updated), (0, 0), "{:?}", r.documents);
  assert_eq!(r.vectors.generated, 0);
  assert!(!r.full_rebuild);
  assert_eq!(r.generation, gen_before + 1);
  let layout = StoreLayout::new(p.retrieval());
  let gen = open_current(&layout, r.vault_id.as_deref().unwrap()).unwrap();
  let ids: Vec<&str> = gen.manifest.entries.keys().map(|k| k.as_str()).collect();
  assert_eq!(ids, ["concepts/r2", "concepts/r3"]);
  assert!(gen.manifest.excluded.contains_key("concepts/r1"));
  let r2 = &gen.manifest.entries["concepts/r2"];
  assert_eq!(r2.content_hash, gen.manifest.entries["concepts/r2"].content_hash);
  assert_ne!(
    r2.size,
    std::fs::metadata(p.wiki.join("concepts/r2.md")).unwrap().len(),
    "r2 kept its indexed entry"
  );
  drop(gen);
  // Nothing left to remove: a no-op.
  let again = reindex_vault(&p, &removals);
  assert!(
    again.ok && again.documents.removed == 0 && again.generation == gen_before + 1,
    "{:?}",
    again.documents
  );
  // The next ordinary run indexes the rest.
  let r = reindex_vault(&p, &lexical);
  assert_eq!((r.documents.indexed, r.documents.updated, r.documents.removed), (1, 1, 0), "{:?}", r.documents);
}

/// A read that fails with an I/O error (EIO, a network share that dropped, a file locked by
/// another program) is not a verdict on the page: its index entry stays (still recalled, with
/// its last good content), it is not remembered as excluded, and the next `changed` scan
/// reads it again without an edit. A read that finds the file gone removes the page.
#[test]
fn a_transient_read_error_keeps_the_page_and_the_next_scan_retries_it() {
  let (_t, p) = crate::testkit::temp_vault();
  for (i, word) in ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"].iter().enumerate() {
    crate::testkit::write_page(
      &p,
      &format!("concepts/flaky{i}"),
      &format!("T{i}"),
      &format!("Body zq{word}old."),
    );
  }
  let opts = ReindexOptions { components: vec![Component::Lexical], threads: 2, ..Default::default() };
  let first = reindex_vault(&p, &opts);
  assert!(first.ok && first.documents.indexed == 6, "{:?}", first.errors);
  let recall = |q: &str| -> Vec<String> {
    use crate::retrieve::modes::RetrievalMode;
    use crate::retrieve::recall::{recall_wiki, RecallOptions, RecallPolicy};
    let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 5 };
    let hits = recall_wiki(&p, q, &RecallOptions::new(policy, RetrievalMode::Lexical)).unwrap();
    hits.results.into_iter().map(|h| h.id).collect()
  };
  // An edit (new size and mtime), then the read of the edited page fails once.
  std::thread::sleep(std::time::Duration::from_millis(20));
  crate::testkit::write_page(&p, "concepts/flaky2", "T2", "Body zqcharlienew, now longer than before.");
  fail_next_read("concepts/flaky2", std::io::ErrorKind::Other);
  let failed = reindex_vault(&p, &opts);
  assert!(failed.ok, "{:?}", failed.errors);
  let codes: Vec<&str> = failed.warnings.iter().map(|w| w.code.as_str()).collect();
  assert!(codes.contains(&"page_unreadable"), "{codes:?}");
  assert!(!codes.contains(&"frontmatter_parse_error"), "an I/O error is not a parse error: {codes:?}");
  assert_eq!(failed.documents.removed, 0, "{:?}", failed.documents);
  assert_eq!(failed.status.total_documents, 6);
  assert_eq!(recall("zqcharlieold"), vec!["concepts/flaky2".to_string()], "the page left recall");
  // The next incremental scan (the watcher's) reads it again: no edit needed.
  let again = reindex_vault(&p, &opts);
  assert!(again.ok, "{:?}", again.errors);
  assert_eq!(again.documents.updated, 1, "{:?} {:?}", again.documents, again.warnings);
  assert!(again.warnings.iter().all(|w| w.code != "page_unreadable"));
  assert_eq!(recall("zqcharlienew"), vec!["concepts/flaky2".to_string()]);
  // A new page whose first read fails is simply not indexed yet, and is on the next scan.
  crate::testkit::write_page(&p, "concepts/flaky-new", "TN", "Body zqfresh.");
  fail_next_read("concepts/flaky-new", std::io::ErrorKind::PermissionDenied);
  let r = reindex_vault(&p, &opts);
  assert!(r.ok && r.documents.indexed == 0, "{:?}", r.documents);
  let r = reindex_vault(&p, &opts);
  assert!(r.ok && r.documents.indexed == 1, "{:?}", r.documents);
  assert_eq!(recall("zqfresh"), vec!["concepts/flaky-new".to_string()]);
  // A file that is gone when read (deleted after the walk) is a deletion.
  std::thread::sleep(std::time::Duration::from_millis(20));
  crate::testkit::write_page(&p, "concepts/flaky4", "T4", "Body zqechonew edited again.");
  fail_next_read("concepts/flaky4", std::io::ErrorKind::NotFound);
  let r = reindex_vault(&p, &opts);
  assert!(r.ok && r.documents.removed == 1, "{:?}", r.documents);
  assert!(r.warnings.iter().all(|w| w.code != "page_unreadable" && w.code != "frontmatter_parse_error"));
  assert!(recall("zqechoold").is_empty());
  assert!(recall("zqechonew").is_empty());
}

#[test]
fn matching_files_in_id_order_equals_looking_each_up() {
  let map: BTreeMap<String, u32> =
    ["a", "b/c", "b-d", "e", "g"].iter().enumerate().map(|(i, k)| (k.to_string(), i as u32)).collect();
  let file = |id: &str| PageFile {
    id: id.into(),
    rel_path: format!("{id}.md"),
    abs_path: std::path::PathBuf::from(format!("{id}.md")),
    size: 0,
    mtime_ns: 0,
  };
  let files: Vec<PageFile> = ["0", "a", "b-d", "b/c", "f", "g", "h"].map(file).to_vec();
  let (found, gone) = match_by_id(&files, true, &map);
  assert_eq!(found, vec![None, Some(&0), Some(&2), Some(&1), None, Some(&4), None]);
  assert_eq!(gone, vec!["e"]);
  assert_eq!(match_by_id(&files, false, &map), (found, gone));
  let (found, gone) = match_by_id(&[], true, &map);
  assert!(found.is_empty());
  assert_eq!(gone.len(), 5);
}

/// A cold build holds one copy of the vault's manifest: it validates the new store against the
/// manifest it just wrote (the writer's cache) instead of parsing that file back, and the
/// incremental run after it starts from the same copy.
#[test]
fn a_cold_build_never_parses_its_manifest_back_from_disk() {
  let (_t, p) = crate::testkit::temp_vault();
  for i in 0..30 {
    let body = format!("Body {i} links [[concepts/p{}]].", (i + 1) % 30);
    crate::testkit::write_page(&p, &format!("concepts/p{i:02}"), &format!("T{i}"), &body);
  }
  let opts = ReindexOptions { components: vec![Component::Lexical], threads: 2, ..Default::default() };
  let loads = || crate::store::manifest::LOADS.with(|n| n.get());
  let before = loads();
  let r = reindex_vault(&p, &opts);
  assert!(r.ok && r.full_rebuild, "{:?}", r.errors);
  assert_eq!(r.documents.indexed, 30);
  assert_eq!(loads(), before, "the cold build parsed a manifest from disk");
  // The next run (a no-op) starts from the cached copy too.
  let again = reindex_vault(&p, &opts);
  assert!(again.ok && !again.full_rebuild, "{:?}", again.errors);
  assert_eq!(again.documents.unchanged, 30);
  assert_eq!(loads(), before, "the run after a cold build re-read the manifest");
}

/// Validation before publishing checks the manifest's entries as the next process will when it
/// loads the file, although it reads the writer's cached copy: a plain folder's untyped notes once
/// reached a published store that no other process could open.
#[test]
fn validation_checks_the_cached_manifest_as_the_next_process_will() {
  let (_t, p) = crate::testkit::temp_vault();
  crate::testkit::write_page(&p, "concepts/a", "A", "Body a.");
  crate::testkit::write_page(&p, "concepts/b", "B", "Body b.");
  let r = reindex_vault(&p, &ReindexOptions { components: vec![Component::Lexical], ..Default::default() });
  assert!(r.ok, "{:?}", r.errors);
  let dir = StoreLayout::new(p.retrieval()).current().expect("a published store");
  crate::store::generation::validate(&dir).expect("the built store is valid");
  let g = crate::store::generation::Generation::open(dir.clone()).unwrap();
  let counts = crate::store::manifest::counts_of(&g.manifest);
  let mut bad = (*g.manifest).clone();
  let entry = bad.entries.values_mut().next().unwrap();
  let mut e = (**entry).clone();
  (e.meta.page_type, e.role) = (String::new(), crate::vault::Role::Evidence);
  *entry = Arc::new(e);
  crate::store::manifest::remember_committed(&dir, Arc::new(bad), counts);
  match crate::store::generation::validate(&dir) {
    Err(crate::error::Error::ManifestInvalid(msg)) => assert!(msg.contains("empty type"), "{msg}"),
    other => panic!("{other:?}"),
  }
}

/// A full build that keeps its entries in a spill file until the writer has flushed commits
/// the same manifest as one that holds them in memory, leaves no spill file in the published
/// store, and its index answers queries.
#[test]
fn a_spilled_cold_build_commits_the_same_manifest() {
  let (_t, p) = crate::testkit::temp_vault();
  for i in 0..40 {
    let body = format!(
      "Body {i} about lanterns links [[concepts/p{:02}#Claim]] and [up](../concepts/p{:02}.md).\n\n## Claim\n\nText {i}.",
      (i + 1) % 40,
      (i + 7) % 40
    );
    crate::testkit::write_page(&p, &format!("concepts/p{i:02}"), &format!("Lantern {i}"), &body);
  }
  crate::testkit::write_file(&p.wiki.join("concepts/broken.md"), "---\ntitle: [unclosed\n---\nx");
  let build = |spill_from: Option<usize>| {
    SPILL_FROM_OVERRIDE.with(|o| o.set(spill_from));
    let opts =
      ReindexOptions { components: vec![Component::Lexical], threads: 2, force: true, ..Default::default() };
    let r = reindex_vault(&p, &opts);
    SPILL_FROM_OVERRIDE.with(|o| o.set(None));
    assert!(r.ok && r.full_rebuild, "{:?}", r.errors);
    assert_eq!(r.documents.indexed, 40);
    let store = StoreLayout::new(p.retrieval()).current().expect("a published store");
    assert!(!store.dir.join(SPILL_FILE).exists(), "a spill file was left in the store");
    crate::store::manifest::forget_store(&store);
    let m = Manifest::load(&store.manifest_file(r.generation as u64), None).unwrap();
    assert_eq!(m.excluded.len(), 1);
    (m, r)
  };
  let (held, _) = build(None);
  let (spilled, r) = build(Some(1));
  assert_eq!(spilled.entries.len(), 40);
  assert_eq!(spilled.entries, held.entries);
  assert_eq!(spilled.excluded, held.excluded);
  assert_eq!(spilled.entries["concepts/p03"].links.links.len(), 2);
  assert_eq!(r.chunks.total, held.entries.values().map(|e| e.chunks.len() as u32).sum::<u32>());
  use crate::retrieve::modes::RetrievalMode;
  use crate::retrieve::recall::{recall_wiki, RecallOptions, RecallPolicy};
  let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 5 };
  let hits = recall_wiki(&p, "lantern 17", &RecallOptions::new(policy, RetrievalMode::Lexical)).unwrap();
  let ids: Vec<&str> = hits.results.iter().map(|h| h.id.as_str()).collect();
  assert_eq!(ids.first(), Some(&"concepts/p17"), "{ids:?}");
}

/// A process that never committed (a fresh CLI or MCP process) parses the manifest once: its
/// first no-op reindex loads it, and the next no-op and `status` share that copy.
#[test]
fn a_process_that_did_not_commit_parses_the_manifest_once() {
  let (_t, p) = crate::testkit::temp_vault();
  for i in 0..20 {
    crate::testkit::write_page(&p, &format!("concepts/p{i:02}"), &format!("T{i}"), &format!("Body {i}."));
  }
  let opts = ReindexOptions { components: vec![Component::Lexical], threads: 2, ..Default::default() };
  let first = reindex_vault(&p, &opts);
  assert!(first.ok && first.documents.indexed == 20, "{:?} {:?}", first.errors, first.documents);
  let store = StoreLayout::new(p.retrieval()).current().expect("a published store");
  crate::store::manifest::forget_store(&store);
  let loads = || crate::store::manifest::LOADS.with(|n| n.get());
  let before = loads();
  for _ in 0..2 {
    let r = reindex_vault(&p, &opts);
    assert!(r.ok && !r.full_rebuild, "{:?}", r.errors);
    assert_eq!(r.documents.unchanged + r.documents.indexed, 20, "{:?}", r.documents);
  }
  assert_eq!(loads(), before + 1, "each no-op parsed the manifest");
  let status = || crate::store::status::read_index_status(&p);
  assert_eq!(status().total_documents, 20);
  assert_eq!(loads(), before + 1, "status parsed the manifest again");
  // Status does read the manifest: without the shared copy it parses one.
  crate::store::manifest::forget_store(&store);
  assert_eq!(status().total_documents, 20);
  assert_eq!(loads(), before + 2);
}

#[test]
fn a_panicking_page_is_one_diagnostic_and_the_others_are_indexed_as_themselves() {
  let t = tempfile::tempdir().unwrap();
  let p = crate::testkit::init_vault(t.path(), "T");
  std::fs::create_dir_all(p.wiki.join("concepts")).unwrap();
  let mut ids = Vec::new();
  for i in 0..40 {
    // The panicking page sorts first: the pages after it in its batch must keep their ids.
    let id = if i == 3 { PANIC_PAGE.to_string() } else { format!("concepts/p{i:02}") };
    let text = format!("---\ntype: concept\ntitle: T{i}\n---\nBody of {id} with word zxw{i}vor.\n");
    std::fs::write(p.wiki.join(format!("{id}.md")), text).unwrap();
    ids.push(id);
  }
  let opts = ReindexOptions { components: vec![Component::Lexical], threads: 3, ..Default::default() };
  let r = reindex_vault(&p, &opts);
  assert!(r.ok, "{:?}", r.errors);
  let panics: Vec<_> = r.warnings.iter().filter(|w| w.code == "page_index_panic").collect();
  assert_eq!(panics.len(), 1, "{:?}", r.warnings);
  assert_eq!(panics[0].path.as_deref(), Some(format!("{PANIC_PAGE}.md").as_str()));
  assert_eq!(r.documents.indexed, 39);
  // Every other page is indexed under its own id, with its own file's content hash.
  let layout = StoreLayout::new(p.retrieval());
  let gen = open_current(&layout, r.vault_id.as_deref().unwrap()).expect("a committed store");
  assert_eq!(gen.manifest.entries.len(), 39);
  for id in ids.iter().filter(|id| id.as_str() != PANIC_PAGE) {
    let e = &gen.manifest.entries[id];
    assert_eq!(e.rel_path, format!("{id}.md"));
    let bytes = std::fs::read(p.wiki.join(&e.rel_path)).unwrap();
    assert_eq!(e.content_hash, sha256_hex(&bytes), "{id} carries another page's content");
  }
  // Like a malformed page, it is remembered with its diagnostic until it changes.
  assert_eq!(r.status.state, crate::store::IndexState::Ready, "{:?}", r.status.issues);
  for scope in [Scope::Changed, Scope::All] {
    let again = reindex_vault(&p, &ReindexOptions { scope, ..opts.clone() });
    assert!(again.ok, "{:?}", again.errors);
    assert_eq!(again.warnings.iter().filter(|w| w.code == "page_index_panic").count(), 1);
    assert_eq!(again.status.total_documents, 39);
  }
}
