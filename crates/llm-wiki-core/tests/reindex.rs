//! Reindex lifecycle on a real temp vault: cold build, incremental add/update/delete, no-op,
//! forced rebuild, malformed pages, cancellation and status transitions.

use std::fs;
use std::path::Path;

use llm_wiki_core::store::status::IndexState;
use llm_wiki_core::store::{read_index_status, reindex_vault, CancelFlag, Component, ReindexOptions, Scope};
use llm_wiki_core::vault::VaultPaths;

use llm_wiki_core::testkit::temp_vault as vault;

fn page(p: &VaultPaths, id: &str, ty: &str, body: &str) {
  let f = p.wiki.join(format!("{id}.md"));
  fs::create_dir_all(f.parent().unwrap()).unwrap();
  fs::write(f, format!("---\ntype: {ty}\ntitle: {id}\n---\n{body}\n")).unwrap();
}

fn opts() -> ReindexOptions {
  ReindexOptions { components: vec![Component::Lexical], ..Default::default() }
}

fn touch_later(f: &Path) {
  // Push mtime forward so the size+mtime shortcut sees a change even within one second.
  let t = fs::metadata(f).unwrap().modified().unwrap() + std::time::Duration::from_secs(5);
  fs::File::options().write(true).open(f).unwrap().set_modified(t).unwrap();
}

#[test]
fn lifecycle() {
  let (_t, p) = vault();
  assert_eq!(read_index_status(&p).state, IndexState::Missing);
  page(&p, "concepts/a", "concept", "Alpha text about retrieval.");
  page(&p, "sources/b", "source", "Beta evidence.");
  fs::write(p.wiki.join("bad.md"), "no frontmatter").unwrap();
  fs::write(p.wiki.join("index.md"), "---\ntype: x\n---\n").unwrap();

  let r = reindex_vault(&p, &opts());
  assert!(r.ok, "{:?}", r.errors);
  assert!(r.full_rebuild);
  assert_eq!(
    (r.documents.indexed, r.documents.updated, r.documents.unchanged, r.documents.removed),
    (2, 0, 0, 0)
  );
  assert_eq!(r.warnings.iter().filter(|w| w.code == "frontmatter_missing").count(), 1);
  assert_eq!(r.status.state, IndexState::Ready, "{:?}", r.status.issues);
  assert_eq!(
    (r.status.total_documents, r.status.canonical_documents, r.status.evidence_documents),
    (2, 1, 1)
  );
  assert!(r.vault_id.is_some());

  // No-op.
  let r = reindex_vault(&p, &opts());
  assert!(r.ok);
  assert!(!r.full_rebuild);
  assert_eq!(r.documents.unchanged, 2);
  let gen = r.generation;

  // Update, add, delete.
  page(&p, "concepts/a", "concept", "Alpha text changed substantially.");
  touch_later(&p.wiki.join("concepts/a.md"));
  page(&p, "concepts/c", "concept", "Gamma.");
  fs::remove_file(p.wiki.join("sources/b.md")).unwrap();
  assert_eq!(read_index_status(&p).state, IndexState::Stale);
  let r = reindex_vault(&p, &opts());
  assert!(r.ok, "{:?}", r.errors);
  assert!(!r.full_rebuild);
  assert_eq!(
    (r.documents.indexed, r.documents.updated, r.documents.unchanged, r.documents.removed),
    (1, 1, 0, 1)
  );
  assert_eq!(r.generation, gen + 1);
  assert_eq!(r.status.state, IndexState::Ready);
  assert_eq!(r.status.total_documents, 2);

  // Forced rebuild keeps counts; its generations continue above the replaced store's.
  let r = reindex_vault(&p, &ReindexOptions { force: true, scope: Scope::All, ..opts() });
  assert!(r.ok);
  assert!(r.full_rebuild);
  assert_eq!(r.status.total_documents, 2);
  assert_eq!(r.generation, gen + 2);

  // A page turning malformed is removed with a warning.
  fs::write(p.wiki.join("concepts/c.md"), "---\ntype: concept\ntype: dup\n---\n").unwrap();
  touch_later(&p.wiki.join("concepts/c.md"));
  let r = reindex_vault(&p, &opts());
  assert!(r.ok);
  assert_eq!(r.documents.removed, 1);
  assert!(r
    .warnings
    .iter()
    .any(|w| w.code == "frontmatter_duplicate_key" && w.path.as_deref() == Some("concepts/c.md")));

  // Vectors requested without a dense engine: explicit warning. Dense is switched off explicitly
  // so the outcome does not depend on models the environment may provide (LLM_WIKI_MODELS_DIR).
  llm_wiki_core::models::configure(llm_wiki_core::models::ConfigChange {
    disabled: llm_wiki_core::models::Setting::Set(true),
    ..Default::default()
  });
  let r = reindex_vault(&p, &ReindexOptions { components: vec![Component::Vectors], ..Default::default() });
  assert!(r.warnings.iter().any(|w| w.code == "vectors_unavailable"));
}

#[test]
fn cancel_keeps_last_good_index() {
  let (_t, p) = vault();
  for i in 0..50 {
    page(&p, &format!("p{i}"), "concept", "text");
  }
  assert!(reindex_vault(&p, &opts()).ok);
  let cancel = CancelFlag::new();
  cancel.cancel();
  page(&p, "new", "concept", "new page");
  let r = reindex_vault(&p, &ReindexOptions { cancel, force: true, ..opts() });
  assert!(!r.ok);
  assert!(r.errors.is_empty());
  assert_eq!(r.status.total_documents, 50);
  assert_eq!(r.status.state, IndexState::Stale);
}

/// A rebuild replacing a store whose manifest cannot be read (damaged, or of another format)
/// still numbers its generations above that store's last commit: they never go back, so a
/// reader holding the old store's generation sees the new one as newer.
#[test]
fn a_rebuild_over_a_store_with_an_unreadable_manifest_continues_its_generations() {
  let (_t, p) = vault();
  page(&p, "concepts/a", "concept", "Alpha.");
  assert!(reindex_vault(&p, &opts()).ok);
  page(&p, "concepts/b", "concept", "Beta.");
  let r = reindex_vault(&p, &opts());
  assert!(r.ok, "{:?}", r.errors);
  assert_eq!(r.generation, 2);
  let qmd = p.meta.join("qmd");
  let store = qmd.join(fs::read_to_string(qmd.join("CURRENT")).unwrap().trim());
  for f in fs::read_dir(&store).unwrap() {
    let f = f.unwrap().path();
    if f.file_name().unwrap().to_string_lossy().starts_with("manifest.") {
      fs::write(&f, b"{ not a manifest").unwrap();
    }
  }
  let r = reindex_vault(&p, &ReindexOptions { force: true, scope: Scope::All, ..opts() });
  assert!(r.ok, "{:?}", r.errors);
  assert_eq!(r.generation, 3);
  assert_eq!(r.status.total_documents, 2);
}

#[test]
fn missing_config_is_an_error_result() {
  let t = tempfile::tempdir().unwrap();
  let p = VaultPaths::new_layout(t.path());
  fs::create_dir_all(&p.wiki).unwrap();
  let r = reindex_vault(&p, &opts());
  assert!(!r.ok);
  assert_eq!(r.errors[0].code, "config_invalid");
}
