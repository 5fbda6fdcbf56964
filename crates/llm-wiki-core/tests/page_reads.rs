//! Page reads after indexing meet whatever is on disk then (issue 43, item 6): a page turned into
//! a symlink to a file outside the vault must not leak that file through `neighbours` or
//! `recallMemory`, and a FIFO in a page's place must not block either.
#![cfg(unix)]

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use llm_wiki_core::memory::explore::{NeighbourRequest, Neighbourhood, DEFAULT_MAX_BYTES};

/// `neighbours` of `id`, depth 1, both directions, within `max_bytes` (default token budget).
fn neighbours(p: &VaultPaths, id: &str, max_bytes: usize) -> Neighbourhood {
  let req = NeighbourRequest {
    depth: Some(1),
    direction: Some("both".into()),
    max_bytes: Some(u32::try_from(max_bytes).unwrap()),
    budget_tokens: None,
  };
  llm_wiki_core::memory::explore::neighbours(p, id, &req).unwrap()
}
use llm_wiki_core::memory::{recall_memory, MemoryOptions};
use llm_wiki_core::retrieve::{RecallOptions, RecallPolicy, RetrievalMode};
use llm_wiki_core::store::{reindex_vault, Component, ReindexOptions};
use llm_wiki_core::testkit::{temp_vault, write_page};
use llm_wiki_core::vault::VaultPaths;

const SECRET: &str = "TOPSECRETCONTENT";

fn indexed() -> (tempfile::TempDir, VaultPaths) {
  let (t, p) = temp_vault();
  write_page(&p, "concepts/a", "Alpha", "Alpha links to [[concepts/b]] about backups.");
  write_page(&p, "concepts/b", "Backup rule", "The backup rule keeps three copies of backupword data.");
  let opts = ReindexOptions { components: vec![Component::Lexical], ..Default::default() };
  let r = reindex_vault(&p, &opts);
  assert!(r.ok, "{:?}", r.errors);
  (t, p)
}

fn page_b(p: &VaultPaths) -> std::path::PathBuf {
  p.wiki.join("concepts/b.md")
}

fn memory(p: &VaultPaths) -> String {
  let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 5, max_results: 5 };
  let opts = MemoryOptions {
    recall: RecallOptions::new(policy, RetrievalMode::Lexical),
    budget_chars: 8000,
    typed_expansion: true,
  };
  let r = recall_memory(p, "backupword backup rule", &opts).unwrap();
  serde_json::to_string(&r).unwrap()
}

fn mkfifo(path: &Path) {
  let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
  // SAFETY: a valid NUL-terminated path.
  assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// `f` on another thread, failing the test when it does not return within 10 s.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
  let (tx, rx) = mpsc::channel();
  std::thread::spawn(move || {
    let _ = tx.send(f());
  });
  rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("{what} blocked on a FIFO page"))
}

#[test]
fn a_page_swapped_for_a_symlink_does_not_leak_its_target() {
  let (t, p) = indexed();
  let secret = t.path().join("secret.md");
  std::fs::write(&secret, format!("# Secret\n\n{SECRET} backupword backup rule\n")).unwrap();
  std::fs::remove_file(page_b(&p)).unwrap();
  std::os::unix::fs::symlink(&secret, page_b(&p)).unwrap();

  let n = neighbours(&p, "concepts/b", DEFAULT_MAX_BYTES);
  assert!(!n.content.contains(SECRET), "neighbours read through the symlink: {}", n.content);
  let m = memory(&p);
  assert!(!m.contains(SECRET), "recallMemory read through the symlink: {m}");

  // A folder on the way swapped for a link to a folder outside the vault: the same.
  let outside = t.path().join("outside");
  std::fs::create_dir(&outside).unwrap();
  std::fs::rename(&secret, outside.join("b.md")).unwrap();
  std::fs::remove_file(page_b(&p)).unwrap();
  std::fs::rename(p.wiki.join("concepts"), t.path().join("moved")).unwrap();
  std::os::unix::fs::symlink(&outside, p.wiki.join("concepts")).unwrap();
  let n = neighbours(&p, "concepts/b", DEFAULT_MAX_BYTES);
  assert!(!n.content.contains(SECRET), "neighbours read through a symlinked folder: {}", n.content);
  assert!(!memory(&p).contains(SECRET), "recallMemory read through a symlinked folder");
}

#[test]
fn a_fifo_in_place_of_a_page_does_not_block() {
  let (_t, p) = indexed();
  std::fs::remove_file(page_b(&p)).unwrap();
  mkfifo(&page_b(&p));
  let q = p.clone();
  let n = within("neighbours", move || neighbours(&q, "concepts/b", DEFAULT_MAX_BYTES));
  assert!(n.content.is_empty());
  let q = p.clone();
  within("recallMemory", move || memory(&q));
  // A reindex meets the FIFO in the walk and skips it.
  let q = p.clone();
  let r = within("reindex", move || {
    reindex_vault(&q, &ReindexOptions { components: vec![Component::Lexical], ..Default::default() })
  });
  assert!(r.ok, "{:?}", r.errors);
}

#[test]
fn neighbours_reads_no_more_than_its_budget() {
  let (_t, p) = indexed();
  // The page grows to 64 MiB after indexing (over the indexing cap): the read stops at the budget.
  let f = std::fs::OpenOptions::new().append(true).open(page_b(&p)).unwrap();
  f.set_len(64 << 20).unwrap();
  let n = neighbours(&p, "concepts/b", 2000);
  assert!(n.content.len() <= 2000 && n.truncated);
}
