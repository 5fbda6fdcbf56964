//! A plain folder of Markdown notes (an Obsidian vault, a `docs/` folder): `init` is the one
//! explicit step (it creates only `.llm-wiki-retrieval/`), then index and recall work on notes
//! without frontmatter; the bad inputs of `init` each get one typed error and write nothing; a
//! pi-llm-wiki vault keeps its strict validation.

use std::fs;
use std::path::Path;

use llm_wiki_core::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RetrievalMode};
use llm_wiki_core::store::{read_index_status, reindex_vault, Component, IndexState, ReindexOptions};
use llm_wiki_core::vault::init::{codes, init_vault};
use llm_wiki_core::vault::VaultPaths;

fn lexical() -> ReindexOptions {
  ReindexOptions { components: vec![Component::Lexical], ..Default::default() }
}

fn recall(p: &VaultPaths, q: &str) -> Vec<String> {
  let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 5 };
  recall_wiki(p, q, &RecallOptions::new(policy, RetrievalMode::Lexical))
    .unwrap()
    .results
    .into_iter()
    .map(|r| r.id)
    .collect()
}

/// The example vault's pages copied flat into `dir` (as an Obsidian vault or a docs/ folder holds them).
fn flat_examples(dir: &Path) {
  let wiki = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/vault/.llm-wiki/wiki");
  for e in walk(&wiki) {
    let name = e.file_name().unwrap();
    if name != "log.md" {
      fs::copy(&e, dir.join(name)).unwrap();
    }
  }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
  let mut out = Vec::new();
  for e in fs::read_dir(dir).unwrap().flatten() {
    if e.file_type().unwrap().is_dir() {
      out.extend(walk(&e.path()));
    } else if e.path().extension().is_some_and(|x| x == "md") {
      out.push(e.path());
    }
  }
  out
}

fn listing(dir: &Path) -> Vec<String> {
  let mut v: Vec<String> =
    walk_all(dir).iter().map(|p| p.strip_prefix(dir).unwrap().display().to_string()).collect();
  v.sort();
  v
}

fn walk_all(dir: &Path) -> Vec<std::path::PathBuf> {
  let mut out = Vec::new();
  for e in fs::read_dir(dir).unwrap().flatten() {
    out.push(e.path());
    if e.file_type().unwrap().is_dir() {
      out.extend(walk_all(&e.path()));
    }
  }
  out
}

#[test]
fn an_uninitialised_folder_names_the_init_command_and_nothing_is_written() {
  let t = tempfile::tempdir().unwrap();
  flat_examples(t.path());
  let before = listing(t.path());
  let r = reindex_vault(&VaultPaths::for_root(t.path()), &lexical());
  assert!(!r.ok);
  let e = &r.errors[0];
  assert_eq!(e.code, "config_invalid");
  assert!(e.message.contains("llm-wiki-retrieval init"), "{}", e.message);
  assert_eq!(listing(t.path()), before, "a failed index writes nothing into the notes folder");
}

#[test]
fn init_then_index_and_recall_a_flat_folder_of_notes() {
  let t = tempfile::tempdir().unwrap();
  let root = t.path();
  flat_examples(root);
  // Obsidian-style notes: no frontmatter, title from the heading, wikilinks, inline tags.
  fs::write(
    root.join("Garden plan.md"),
    "# Raised beds\n\nTomatoes go in [[zfs-snapshots|the bed]] #gardening\n",
  )
  .unwrap();
  fs::write(root.join("index.md"), "A home note that links [[Garden plan#Beds]].\n").unwrap();
  for skipped in [".obsidian", ".trash", ".git", "node_modules"] {
    fs::create_dir(root.join(skipped)).unwrap();
    fs::write(root.join(skipped).join("workspace.md"), "# hidden\nraised beds tomatoes\n").unwrap();
  }
  let notes_before: Vec<String> = listing(root);

  let out = init_vault(root).unwrap();
  assert_eq!(out.layout, "plain");
  assert_eq!(out.pages, 13, "11 example pages + 2 notes; dot folders and node_modules skipped");
  let store = root.join(".llm-wiki-retrieval");
  let created: Vec<String> = [store.clone(), store.join(".gitignore"), store.join("config.json")]
    .iter()
    .map(|p| p.to_string_lossy().into_owned())
    .collect();
  assert_eq!(out.created, created);
  let after: Vec<String> =
    listing(root).into_iter().filter(|p| !p.starts_with(".llm-wiki-retrieval")).collect();
  assert_eq!(after, notes_before, "init writes nothing outside .llm-wiki-retrieval/");
  assert!(init_vault(root).unwrap().created.is_empty(), "init is idempotent");

  let p = VaultPaths::for_root(root);
  assert!(p.is_plain());
  let r = reindex_vault(&p, &lexical());
  assert!(r.ok, "{:?}", r.errors);
  assert_eq!(r.documents.indexed, 13, "{:?}", r.warnings);
  // The example's folder-qualified relation target (`concepts/backup-3-2-1`) names no page once
  // the pages are flat: reported, the relation ignored; nothing else.
  assert!(r.warnings.iter().all(|w| w.code == "relation_missing_target"), "{:?}", r.warnings);
  assert_eq!(
    listing(root).into_iter().filter(|p| !p.starts_with(".llm-wiki-retrieval")).collect::<Vec<_>>(),
    notes_before
  );

  assert_eq!(recall(&p, "how many backup copies should I keep off site?")[0], "backup-3-2-1");
  let garden = recall(&p, "raised beds tomatoes");
  assert_eq!(garden[0], "Garden plan");
  assert!(!garden.iter().any(|id| id.ends_with("workspace")), "hidden folders are not indexed: {garden:?}");
  let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 5 };
  let hit = recall_wiki(&p, "raised beds", &RecallOptions::new(policy, RetrievalMode::Lexical)).unwrap();
  assert_eq!(hit.results[0].title, "Raised beds", "title from the first heading");
  assert_eq!(recall(&p, "home note")[0], "index", "index.md is an ordinary note in a plain folder");
  // The store as the next process reads it: its untyped notes are cards, not a corrupt manifest.
  let status = read_index_status(&p);
  assert_eq!(status.state, IndexState::Ready, "{:?}", status.issues);
  assert!(status.issues.iter().all(|i| i.code == "relation_missing_target"), "{:?}", status.issues);
}

#[test]
fn init_refuses_bad_folders_with_one_typed_error_and_writes_nothing() {
  let t = tempfile::tempdir().unwrap();
  let code = |p: &Path| init_vault(p).unwrap_err().code();
  assert_eq!(code(&t.path().join("missing")), codes::NOT_FOUND);
  fs::write(t.path().join("file.md"), "# a file\n").unwrap();
  assert_eq!(code(&t.path().join("file.md")), codes::NOT_DIRECTORY);
  let empty = t.path().join("empty");
  fs::create_dir_all(empty.join(".obsidian")).unwrap();
  fs::write(empty.join(".obsidian").join("x.md"), "hidden").unwrap();
  fs::write(empty.join("notes.txt"), "not markdown").unwrap();
  assert_eq!(code(&empty), codes::NO_MARKDOWN);
  assert!(!empty.join(".llm-wiki-retrieval").exists());

  // A folder inside an initialised folder belongs to that vault.
  let outer = t.path().join("outer");
  fs::create_dir_all(outer.join("inner")).unwrap();
  fs::write(outer.join("a.md"), "# A\n").unwrap();
  fs::write(outer.join("inner").join("b.md"), "# B\n").unwrap();
  init_vault(&outer).unwrap();
  let e = init_vault(&outer.join("inner")).unwrap_err();
  assert_eq!(e.code(), codes::INSIDE_VAULT);
  assert!(e.to_string().contains("index"), "{e}");
  assert!(!outer.join("inner").join(".llm-wiki-retrieval").exists());

  #[cfg(unix)]
  {
    use std::os::unix::fs::PermissionsExt;
    let locked = t.path().join("locked");
    fs::create_dir(&locked).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    // Root reads any folder: the check is only meaningful for other users.
    if fs::read_dir(&locked).is_err() {
      assert_eq!(code(&locked), codes::UNREADABLE);
    }
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
  }
}

#[test]
fn a_pi_llm_wiki_vault_keeps_strict_validation() {
  let t = tempfile::tempdir().unwrap();
  let p = VaultPaths::new_layout(t.path());
  fs::create_dir_all(&p.wiki).unwrap();
  fs::write(p.config_file(), "{}").unwrap();
  fs::write(p.wiki.join("note.md"), "# No frontmatter\n").unwrap();
  fs::write(p.wiki.join("untyped.md"), "---\ntitle: x\n---\nbody\n").unwrap();
  fs::write(p.wiki.join("ok.md"), "---\ntype: concept\n---\nbody\n").unwrap();
  let out = init_vault(t.path()).unwrap();
  assert_eq!((out.layout.as_str(), out.created.len()), ("llm-wiki", 0), "an existing vault is left alone");
  let r = reindex_vault(&VaultPaths::for_root(t.path()), &lexical());
  assert!(r.ok, "{:?}", r.errors);
  assert_eq!(r.documents.indexed, 1);
  let codes: Vec<&str> = r.warnings.iter().map(|w| w.code.as_str()).collect();
  assert!(codes.contains(&"frontmatter_missing") && codes.contains(&"concept_missing_type"), "{codes:?}");
}
