//! Readers of the store's small files (store format 2): the `CURRENT` pointer (store/layout.rs),
//! the state (store/state.rs) and page manifest (store/manifest.rs) of the store directory it
//! names, last-error and vault config (fsutil JSON reading, vault/config.rs), a vector segment list
//! as a commit document carries it and the first segment's bytes (store/vectors.rs), and the
//! status ladder built on all of them (store/status.rs) plus recall's readiness check.
//!
//! Input: up to seven parts separated by the line `#--`: state.json, the manifest the state names
//! (`manifest.<manifestGeneration>.json`), CURRENT, last-error.json, config.json, the vector
//! segment list (JSON) and the bytes of its first segment. An empty part leaves that file absent.
//! The files are written into a scratch vault and read back through the engine's own functions.
//!
//! Invariants: a manifest that loads is safe (ids, paths, hashes, chunk ids) and survives a
//! save/load round trip unchanged; its counts agree; a state that reads is of the current version
//! and round-trips; a config's vault id is a v4 UUID; a segment list that opens names only plain
//! segment files inside `vectors/` and yields only live chunks; the status ladder is consistent
//! (never `recovering`, ready only with a valid pointer and state and without issues, error/stale
//! always with an issue and a repair component, missing only without a valid pointer) and
//! readiness agrees with it.

use std::path::PathBuf;
use std::sync::OnceLock;

use llm_wiki_core::fsutil::JsonFile;
use llm_wiki_core::retrieve::engine::readiness;
use llm_wiki_core::store::layout::{Pointer, StoreDir, StoreLayout};
use llm_wiki_core::store::manifest::Manifest;
use llm_wiki_core::store::state::{StateFile, STATE_VERSION};
use llm_wiki_core::store::status::{read_index_status_with, IndexState, StatusOptions};
use llm_wiki_core::store::vectors::{VectorIndex, VectorManifest};
use llm_wiki_core::vault::config::{is_v4_uuid, read_config, vault_id_of};
use llm_wiki_core::vault::VaultPaths;

use crate::{put, scratch_dir, split};

/// The store directory the seeds' `CURRENT` names (any other valid name points at nothing).
const STORE_NAME: &str = "store-00000000-0000-4000-8000-000000000001";

/// Scratch vault (one per fuzzing process) with two pages, so the page check has work.
fn scratch() -> &'static (PathBuf, VaultPaths) {
  static DIR: OnceLock<(PathBuf, VaultPaths)> = OnceLock::new();
  DIR.get_or_init(|| {
    let root = scratch_dir("store");
    let paths = VaultPaths::new_layout(&root);
    std::fs::create_dir_all(paths.wiki.join("concepts")).unwrap();
    std::fs::write(paths.wiki.join("a.md"), "---\ntype: concept\ntitle: Alpha\n---\nalpha\n").unwrap();
    std::fs::write(paths.wiki.join("concepts/b.md"), "---\ntype: source\n---\nbeta\n").unwrap();
    (root, paths)
  })
}

/// A name that stays inside `vectors/` when joined (the harness must not write elsewhere).
fn plain_name(name: &str) -> bool {
  !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0', ':'])
}

/// One input (panics on a violated invariant).
pub fn run(data: &[u8]) {
  let (_, paths) = scratch();
  let parts = split(data, 7);
  let layout = StoreLayout::new(paths.retrieval());
  let store = StoreDir::new(layout.dir.join(STORE_NAME));
  let _ = std::fs::remove_dir_all(&layout.dir);

  // The manifest file is named after the state's manifest generation when the state says one.
  let manifest_generation = serde_json::from_slice::<serde_json::Value>(parts[0])
    .ok()
    .and_then(|v| v.get("manifestGeneration")?.as_u64())
    .filter(|g| *g < 1 << 40)
    .unwrap_or(1);
  put(&store.state_file(), parts[0]);
  put(&store.manifest_file(manifest_generation), parts[1]);
  put(&layout.pointer_file(), parts[2]);
  put(&layout.last_error_file(), parts[3]);
  put(&paths.config_file(), parts[4]);
  std::fs::create_dir_all(store.lexical_dir()).unwrap();

  // Manifest.
  let manifest_path = store.manifest_file(manifest_generation);
  if let Ok(m) = Manifest::load(&manifest_path, None) {
    check_manifest(&m, &store);
    let again = Manifest::load(&manifest_path, Some(&m.vault_id)).expect("loads for its own vault");
    assert_eq!(again, m);
    assert!(Manifest::load(&manifest_path, Some("another-vault")).is_err() || m.vault_id == "another-vault");
    check_vectors(&m, &store, parts[5], parts[6]);
  }

  // State.
  let state = StateFile::read(&store);
  if let JsonFile::Valid(s) = &state {
    assert_eq!(s.version, STATE_VERSION);
    let copy = StoreDir::new(layout.dir.join("state-copy"));
    s.write(&copy).expect("state writes");
    match StateFile::read(&copy) {
      JsonFile::Valid(back) => assert_eq!(&back, s, "state does not round-trip"),
      other => panic!("written state does not read back: {other:?}"),
    }
  }

  // Config.
  if let Ok(config) = read_config(paths) {
    if let Ok(Some(id)) = vault_id_of(paths, &config) {
      assert!(is_v4_uuid(&id));
    }
  }

  // Status ladder and readiness.
  let pointer = layout.pointer();
  let names_store = pointer == Pointer::Valid(store.clone());
  let opts =
    StatusOptions { check_pages: true, embed_model: Some("fuzz-model".into()), rerank_model: String::new() };
  for st in [
    read_index_status_with(paths, &opts),
    read_index_status_with(paths, &StatusOptions { check_pages: false, ..opts.clone() }),
  ] {
    match st.state {
      IndexState::Recovering => panic!("store format 2 has no recovering state: {st:?}"),
      IndexState::Ready => {
        assert!(st.issues.is_empty() && names_store && matches!(state, JsonFile::Valid(_)), "{st:?}")
      }
      IndexState::Missing => assert!(!matches!(pointer, Pointer::Valid(_)), "{st:?}"),
      IndexState::Error | IndexState::Stale => {
        assert!(!st.issues.is_empty(), "{st:?}");
        assert!(!st.repair_components.is_empty(), "{st:?}");
      }
    }
  }
  if let Ok(dir) = readiness(&layout) {
    assert!(names_store && dir == store && matches!(&state, JsonFile::Valid(s) if s.is_current_format()));
  }
}

/// A segment list as a commit document carries it: opened over the manifest's chunks.
fn check_vectors(m: &Manifest, store: &StoreDir, list: &[u8], segment: &[u8]) {
  let Ok(vm) = serde_json::from_slice::<VectorManifest>(list) else { return };
  let vectors = store.vectors_dir();
  std::fs::create_dir_all(&vectors).unwrap();
  if let Some(first) = vm.segments.first().filter(|s| plain_name(&s.file)) {
    put(&vectors.join(&first.file), segment);
  }
  let keys = m.chunk_keys();
  if let Ok(index) = VectorIndex::open(&vectors, &vm, &keys) {
    assert!(vm.segments.iter().all(|s| plain_name(&s.file) && s.file.ends_with(".vec")), "{vm:?}");
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

fn check_manifest(m: &Manifest, store: &StoreDir) {
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
  let _ = m.counts();

  // Save/load round trip.
  let copy = store.dir.join("manifest-copy.json");
  m.save(&copy).expect("manifest saves");
  assert_eq!(&Manifest::load(&copy, None).expect("saved manifest loads"), m, "manifest does not round-trip");
}
