//! Readers of the store's small files: manifest (store/manifest.rs), state (store/state.rs),
//! swap journal (store/journal.rs), last-error, vault config, lock owner (fsutil JSON reading),
//! a vector segment (store/vectors.rs), and the status ladder built on all of them
//! (store/status.rs) plus recall's readiness check.
//!
//! Input: up to seven parts separated by the line `#--`: state.json, the manifest of the state's
//! generation, swap.json, last-error.json, config.json, index.lock/owner.json, and the bytes of
//! the first vector segment the manifest names. An empty part leaves that file absent. The files
//! are written into a scratch vault and read back through the engine's own functions.
//!
//! Invariants: a manifest that loads is safe (ids, paths, hashes, chunk ids) and survives a
//! save/load round trip unchanged; its counts agree; a state or journal that reads is of a known
//! version; a config's vault id is a v4 UUID; an opened vector index only holds live chunks; the
//! status ladder is consistent (recovering exactly when a valid journal exists, ready only without
//! issues, error/stale always with an issue and a repair component, missing only without state).

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use llm_wiki_core::fsutil::{read_json, JsonFile};
use llm_wiki_core::retrieve::engine::readiness;
use llm_wiki_core::store::journal::read_journal;
use llm_wiki_core::store::layout::{is_staging_name, GenDir, StoreLayout};
use llm_wiki_core::store::lock::{held_by_live_owner, LockOwner};
use llm_wiki_core::store::manifest::Manifest;
use llm_wiki_core::store::state::{StateFile, STATE_VERSION};
use llm_wiki_core::store::status::{read_index_status_with, IndexState, StatusOptions};
use llm_wiki_core::store::vectors::VectorIndex;
use llm_wiki_core::vault::config::{is_v4_uuid, read_config, vault_id_of};
use llm_wiki_core::vault::VaultPaths;

const SEPARATOR: &[u8] = b"\n#--\n";

/// Scratch vault (one per fuzzing process) with one page, so the page check has work.
fn scratch() -> &'static (PathBuf, VaultPaths) {
  static DIR: OnceLock<(PathBuf, VaultPaths)> = OnceLock::new();
  DIR.get_or_init(|| {
    let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let root = base.join(format!("llm-wiki-fuzz-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let paths = VaultPaths::new_layout(&root);
    std::fs::create_dir_all(&paths.wiki).unwrap();
    std::fs::write(paths.wiki.join("a.md"), "---\ntype: concept\n---\nalpha\n").unwrap();
    (root, paths)
  })
}

fn split(data: &[u8]) -> Vec<&[u8]> {
  let mut parts = Vec::new();
  let mut rest = data;
  while parts.len() < 6 {
    match rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
      Some(i) => {
        parts.push(&rest[..i]);
        rest = &rest[i + SEPARATOR.len()..];
      }
      None => break,
    }
  }
  parts.push(rest);
  parts.resize(7, &[]);
  parts
}

fn put(path: &Path, bytes: &[u8]) {
  if bytes.is_empty() {
    let _ = std::fs::remove_file(path);
  } else {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
  }
}

/// A plain file name: what the engine itself writes into `vectors/`. (A manifest naming any other
/// path is not opened here: see docs/RELIABILITY.md, "segment names are not validated".)
fn plain_name(name: &str) -> bool {
  !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

fuzz_target!(|data: &[u8]| {
  let (_, paths) = scratch();
  let parts = split(data);
  let layout = StoreLayout::new(paths.retrieval());
  let current = layout.current();
  let _ = std::fs::remove_dir_all(&layout.dir);

  // The manifest file is named after the state's generation when the state says one.
  let generation = serde_json::from_slice::<serde_json::Value>(parts[0])
    .ok()
    .and_then(|v| v.get("generation")?.as_u64())
    .filter(|g| *g < 1 << 40)
    .unwrap_or(1);
  put(&current.state_file(), parts[0]);
  put(&current.manifest_file(generation), parts[1]);
  put(&layout.swap_file(), parts[2]);
  put(&layout.last_error_file(), parts[3]);
  put(&paths.config_file(), parts[4]);
  put(&layout.lock_dir().join("owner.json"), parts[5]);
  std::fs::create_dir_all(current.lexical_dir()).unwrap();

  // Manifest.
  let manifest_path = current.manifest_file(generation);
  let loaded = Manifest::load(&manifest_path, None);
  if let Ok(m) = &loaded {
    check_manifest(m, &current, parts[6]);
    let again = Manifest::load(&manifest_path, Some(&m.vault_id)).expect("loads for its own vault");
    assert_eq!(&again, m);
    assert!(Manifest::load(&manifest_path, Some("another-vault")).is_err() || m.vault_id == "another-vault");
  }

  // State.
  let state = StateFile::read(&current);
  if let JsonFile::Valid(s) = &state {
    assert_eq!(s.version, STATE_VERSION);
    let copy = GenDir::new(layout.dir.join("state-copy"));
    s.write(&copy).expect("state writes");
    match StateFile::read(&copy) {
      JsonFile::Valid(back) => assert_eq!(&back, s, "state does not round-trip"),
      other => panic!("written state does not read back: {other:?}"),
    }
  }

  // Journal.
  let journal = read_journal(&layout);
  if let JsonFile::Valid(j) = &journal {
    assert_eq!(j.version, 1);
    assert!(is_staging_name(&j.staging_name));
  }

  // Config and lock owner.
  if let Ok(config) = read_config(paths) {
    if let Ok(Some(id)) = vault_id_of(paths, &config) {
      assert!(is_v4_uuid(&id));
    }
  }
  let _ = read_json::<LockOwner>(&layout.lock_dir().join("owner.json"));
  let _ = held_by_live_owner(&layout.lock_dir());

  // Status ladder.
  let opts =
    StatusOptions { check_pages: true, embed_model: "fuzz-model".into(), rerank_model: String::new() };
  let st = read_index_status_with(paths, &opts);
  let journal_valid = matches!(journal, JsonFile::Valid(_));
  assert_eq!(st.state == IndexState::Recovering, journal_valid, "{st:?}");
  match st.state {
    IndexState::Ready => assert!(st.issues.is_empty() && matches!(state, JsonFile::Valid(_)), "{st:?}"),
    IndexState::Missing => assert!(matches!(state, JsonFile::Missing), "{st:?}"),
    IndexState::Error | IndexState::Stale => {
      assert!(!st.issues.is_empty(), "{st:?}");
      assert!(!st.repair_components.is_empty(), "{st:?}");
    }
    IndexState::Recovering => assert!(st.swap_phase.is_some()),
  }
  let quick = read_index_status_with(paths, &StatusOptions { check_pages: false, ..opts });
  assert_eq!(quick.state == IndexState::Recovering, journal_valid);
  if readiness(&layout).is_ok() {
    assert!(matches!(state, JsonFile::Valid(_)) && !journal_valid);
  }
});

fn check_manifest(m: &Manifest, current: &GenDir, segment: &[u8]) {
  let mut total = 0u64;
  for (id, e) in &m.entries {
    assert!(!id.is_empty() && !id.starts_with('/') && !id.contains('\\'));
    assert!(!id.split('/').any(|s| s.is_empty() || s == "." || s == ".."), "unsafe id {id:?}");
    assert!(e.rel_path.eq_ignore_ascii_case(&format!("{id}.md")), "rel_path {:?} for {id:?}", e.rel_path);
    assert_eq!(e.content_hash.len(), 64);
    assert!(!e.meta.page_type.trim().is_empty());
    for c in e.chunks.iter() {
      assert_eq!(c.len(), 16);
      assert!(c.bytes().all(|b| b.is_ascii_hexdigit()));
    }
    total += e.chunks.len() as u64;
  }
  assert_eq!(m.total_chunks() as u64, total);
  let (canonical, evidence) = m.count_roles();
  assert_eq!(canonical as usize + evidence as usize, m.entries.len());
  assert_eq!(m.hash(), m.hash());
  let keys = m.chunk_keys();
  assert!(keys.len() as u64 <= total);
  let _ = m.expected_documents();

  // Save/load round trip.
  let copy = current.dir.join("manifest-copy.json");
  m.save(&copy).expect("manifest saves");
  assert_eq!(&Manifest::load(&copy, None).expect("saved manifest loads"), m, "manifest does not round-trip");

  // Vectors.
  if let Some(vm) = &m.vectors {
    if !vm.segments.iter().all(|s| plain_name(&s.file)) {
      return;
    }
    if let Some(first) = vm.segments.first() {
      put(&current.vectors_dir().join(&first.file), segment);
    }
    if let Ok(index) = VectorIndex::open(&current.vectors_dir(), vm, &keys) {
      assert!(index.present().iter().all(|k| keys.contains(k)));
      assert!(index.present().len() <= index.stored_rows());
      if vm.dims > 0 && vm.dims <= 4096 {
        let q = vec![1.0 / (vm.dims as f32).sqrt(); vm.dims];
        let hits = index.search(&q, 5);
        assert!(hits.len() <= 5 && hits.iter().all(|(k, _)| keys.contains(k)));
      }
      let _ = index.vectors(&keys);
    }
  }
}
