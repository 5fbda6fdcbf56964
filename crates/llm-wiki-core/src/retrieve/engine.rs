//! The warm engine: one open reader per vault store, cached across recalls.
//!
//! Every recall reads `CURRENT` (one small file) and uses the cached reader only while it names
//! the same store directory; a full rebuild (in this process or another) publishes a new
//! directory, so the next recall opens that one. Store directories are never renamed, so a reader
//! never finds a half-swapped path; when the directory it just read from `CURRENT` was removed by a
//! newer rebuild in the meantime, the open fails, `CURRENT` has changed, and the recall simply
//! follows it. Within a directory, each recall reloads the tantivy reader (cheap: it re-reads
//! `meta.json`) and takes a searcher snapshot; the commit recorded in that snapshot selects the
//! page manifest and the vector segments, so a recall running while a reindex commits sees either
//! the old or the new generation, never a mix. A reader moves to a later generation of the same
//! base by applying the manifest journal records written since the one it holds (O(change));
//! anything else (a checkpoint's new base, a gap, a record that does not parse) loads the
//! generation's manifest whole.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tantivy::Searcher;

use crate::error::{Error, Result};
use crate::fsutil::JsonFile;
use crate::store::layout::{is_real_dir, Pointer, StoreDir, StoreLayout};
use crate::store::lexical::{CommitInfo, LexicalIndex};
use crate::store::manifest::{JournalPos, Manifest, ManifestDelta};
use crate::store::state::StateFile;
use crate::store::vectors::{chunk_key, VectorIndex};
use crate::util::hash::page_key;
use crate::vault::VaultPaths;

/// An open store directory of one vault.
pub struct VaultReader {
  /// The vault's store layout.
  pub layout: StoreLayout,
  /// The store directory this reader opened.
  pub store: StoreDir,
  /// Its tantivy index.
  pub lexical: LexicalIndex,
  current: Mutex<Option<Arc<GenData>>>,
  manifest_loads: AtomicU64,
  manifest_shares: AtomicU64,
}

/// `page_key` fast-field value → page id, for one manifest generation.
pub type PageKeys = HashMap<u64, String>;

/// Data derived from one page manifest, built lazily and shared by every commit that uses it
/// (vector batches commit without a new manifest).
pub struct PageData {
  /// The page manifest.
  pub manifest: Arc<Manifest>,
  /// `page_key` → page id for this manifest.
  pub keys: Arc<PageKeys>,
  chunk_keys: OnceLock<HashSet<u64>>,
  total_chunks: OnceLock<usize>,
  chunk_pages: OnceLock<HashMap<u64, Vec<(String, String)>>>,
}

impl PageData {
  fn new(manifest: Arc<Manifest>) -> Self {
    let keys: PageKeys = manifest.entries.keys().map(|id| (page_key(id), id.clone())).collect();
    Self::of(manifest, keys)
  }

  fn of(manifest: Arc<Manifest>, keys: PageKeys) -> Self {
    PageData {
      manifest,
      keys: Arc::new(keys),
      chunk_keys: OnceLock::new(),
      total_chunks: OnceLock::new(),
      chunk_pages: OnceLock::new(),
    }
  }

  /// Chunks over every page of the manifest, counted once (it reads every page; dense recall
  /// asks on every query whether vectors are complete).
  pub fn total_chunks(&self) -> usize {
    *self.total_chunks.get_or_init(|| crate::store::manifest::counts_of(&self.manifest).chunks as usize)
  }

  /// The page data of a later generation: `prev`'s manifest with the journal `records` applied
  /// (ending at `pos`), and its page keys updated for the pages they touch. `prev`'s manifest
  /// and keys are taken over when nothing else holds them (no recall in flight, no writer of
  /// this process sharing it), else copied (the map only: entries are shared).
  fn advance(prev: Arc<PageData>, records: &[ManifestDelta], pos: JournalPos) -> Self {
    let (manifest, keys) = match Arc::try_unwrap(prev) {
      Ok(p) => (p.manifest, p.keys),
      Err(shared) => (shared.manifest.clone(), shared.keys.clone()),
    };
    let mut manifest = Arc::unwrap_or_clone(manifest);
    let mut keys = Arc::unwrap_or_clone(keys);
    for d in records {
      manifest.apply(d);
    }
    manifest.journal = pos;
    for id in records.iter().flat_map(|d| d.del.iter().chain(d.set.keys())) {
      if manifest.entries.contains_key(id) {
        keys.insert(page_key(id), id.clone());
      } else {
        keys.remove(&page_key(id));
      }
    }
    Self::of(Arc::new(manifest), keys)
  }
}

/// Per-commit data: the page data of its manifest and its vectors, shared by recalls.
pub struct GenData {
  /// The commit's payload (generation, manifest generation, vector segments).
  pub commit: CommitInfo,
  /// Page data of the commit's manifest.
  pub pages: Arc<PageData>,
  vectors: OnceLock<std::result::Result<Option<Arc<VectorIndex>>, String>>,
  vectors_dir: PathBuf,
}

impl GenData {
  /// Chunk key → (page id, chunk id) of every live chunk.
  pub fn chunk_pages(&self) -> &HashMap<u64, Vec<(String, String)>> {
    self.pages.chunk_pages.get_or_init(|| {
      let mut m: HashMap<u64, Vec<(String, String)>> = HashMap::new();
      for (id, e) in &self.pages.manifest.entries {
        for c in e.chunks.iter() {
          m.entry(chunk_key(c)).or_default().push((id.clone(), c.to_string()));
        }
      }
      m
    })
  }

  /// The commit's vectors (`Ok(None)` when it has none); opened on first use only, so lexical
  /// recall never touches them.
  pub fn vectors(&self) -> Result<Option<Arc<VectorIndex>>> {
    self
      .vectors
      .get_or_init(|| match &self.commit.vectors {
        None => Ok(None),
        Some(vm) => {
          let live = self.pages.chunk_keys.get_or_init(|| self.pages.manifest.chunk_keys());
          VectorIndex::open(&self.vectors_dir, vm, live).map(|v| Some(Arc::new(v))).map_err(|e| e.to_string())
        }
      })
      .clone()
      .map_err(Error::Index)
  }
}

/// A consistent view of one store for the duration of a recall.
pub struct Snapshot {
  /// Searcher pinned to the commit.
  pub searcher: Searcher,
  /// Generation of the commit.
  pub generation: u64,
  /// Page manifest of the commit.
  pub manifest: Arc<Manifest>,
  /// `page_key` → page id.
  pub keys: Arc<PageKeys>,
  /// Per-commit data (vectors loaded on first use).
  pub data: Arc<GenData>,
  /// The reader the snapshot came from.
  pub reader: Arc<VaultReader>,
}

impl VaultReader {
  fn open(layout: StoreLayout, store: StoreDir) -> Result<Self> {
    let lexical = LexicalIndex::open(&store.lexical_dir())?;
    Ok(VaultReader {
      layout,
      store,
      lexical,
      current: Mutex::new(None),
      manifest_loads: AtomicU64::new(0),
      manifest_shares: AtomicU64::new(0),
    })
  }

  /// Whole page manifests this reader has parsed from disk: its first generation, and each later
  /// one it could not reach through the journal records (a checkpoint, a gap), unless this
  /// process's writer had just committed it ([`Self::manifest_shares`]). Diagnostics and tests.
  pub fn manifest_loads(&self) -> u64 {
    self.manifest_loads.load(Ordering::Relaxed)
  }

  /// Whole page manifests this reader took from this process's writer instead of parsing them
  /// (the writer's last commit, shared). Diagnostics and tests.
  pub fn manifest_shares(&self) -> u64 {
    self.manifest_shares.load(Ordering::Relaxed)
  }

  /// Take a snapshot, reloading to the latest commit when the index changed.
  pub fn snapshot(self: &Arc<Self>) -> Result<Snapshot> {
    // A failed reload (e.g. the directory was just replaced) keeps the previous snapshot.
    let _ = self.lexical.reload_if_changed();
    for _ in 0..3 {
      let searcher = self.lexical.reader.searcher();
      let commit = self
        .lexical
        .commit_of(&searcher)?
        .ok_or_else(|| Error::Index(format!("{} has no committed generation", self.store.dir.display())))?;
      let mut cached = self.current.lock().unwrap_or_else(|p| p.into_inner());
      let same_pages = cached.as_ref().filter(|d| d.commit.manifest_generation == commit.manifest_generation);
      let data = match same_pages.map(|d| (d.commit == commit, d.clone())) {
        Some((true, d)) => d,
        // A vector batch: same pages, new segment list.
        Some((false, d)) => self.remember(&mut cached, commit, d.pages.clone()),
        _ => match self.pages_at(&mut cached, commit.manifest_generation) {
          Ok(pages) => self.remember(&mut cached, commit, pages),
          // The manifest of a superseded generation may have been collected: reload and retry.
          Err(_) => {
            drop(cached);
            let _ = self.lexical.reader.reload();
            continue;
          }
        },
      };
      return Ok(Snapshot {
        searcher,
        generation: data.commit.generation,
        manifest: data.pages.manifest.clone(),
        keys: data.pages.keys.clone(),
        data,
        reader: self.clone(),
      });
    }
    Err(Error::Index(format!("no manifest for the committed generation in {}", self.store.dir.display())))
  }

  /// Page data of manifest generation `generation`: the cached generation's advanced by the
  /// journal records written since (O(change)) when that is exact, else the generation loaded
  /// whole ([`Manifest::journal_since`] says when).
  fn pages_at(&self, cached: &mut Option<Arc<GenData>>, generation: u64) -> Result<Arc<PageData>> {
    if let Some(prev) = cached.as_ref() {
      if let Some((records, pos)) = prev.pages.manifest.journal_since(&self.store, generation) {
        // Let go of the cached generation so that its manifest can be taken over.
        let prev = cached.take().map(|g| match Arc::try_unwrap(g) {
          Ok(g) => g.pages,
          Err(shared) => shared.pages.clone(),
        });
        if let Some(prev) = prev {
          return Ok(Arc::new(PageData::advance(prev, &records, pos)));
        }
      }
    }
    // A generation this process already holds (its writer committed it, or a reindex or status
    // loaded it: the addon, a watcher, the bench) is shared rather than parsed into a second
    // copy of the vault's pages.
    let (m, shared) = crate::store::manifest::load_generation_counted(&self.store, generation, None)?;
    let counter = if shared { &self.manifest_shares } else { &self.manifest_loads };
    counter.fetch_add(1, Ordering::Relaxed);
    Ok(Arc::new(PageData::new(m)))
  }

  fn remember(
    &self,
    cached: &mut Option<Arc<GenData>>,
    commit: CommitInfo,
    pages: Arc<PageData>,
  ) -> Arc<GenData> {
    let d =
      Arc::new(GenData { commit, pages, vectors: OnceLock::new(), vectors_dir: self.store.vectors_dir() });
    *cached = Some(d.clone());
    d
  }
}

fn cache() -> &'static Mutex<HashMap<PathBuf, Arc<VaultReader>>> {
  static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<VaultReader>>>> = OnceLock::new();
  CACHE.get_or_init(Default::default)
}

/// Why a store cannot serve recall right now.
#[derive(Debug, Clone)]
pub struct NotReady {
  /// Stable diagnostic code (`index_missing`, `index_recovering`, ...).
  pub code: &'static str,
  /// Human-readable explanation.
  pub message: String,
}

impl NotReady {
  fn missing() -> Self {
    NotReady {
      code: "qmd_index_missing",
      message: "vault has no retrieval index yet; run wiki_reindex".into(),
    }
  }
  fn stale() -> Self {
    NotReady {
      code: "qmd_index_stale",
      message: "index was built by an incompatible engine version; run wiki_reindex".into(),
    }
  }
}

/// Readiness of the store `CURRENT` names, from small files only: a state file of this format.
pub fn readiness(layout: &StoreLayout) -> std::result::Result<StoreDir, NotReady> {
  let store = match layout.pointer() {
    // A format-1 store (`current/`) cannot be read by this engine.
    Pointer::Missing if is_real_dir(&layout.dir.join("current")) => return Err(NotReady::stale()),
    Pointer::Missing => return Err(NotReady::missing()),
    Pointer::Invalid(m) => return Err(NotReady { code: "qmd_index_error", message: m }),
    Pointer::Valid(d) => d,
  };
  match StateFile::read(&store) {
    JsonFile::Missing => Err(NotReady {
      code: "qmd_index_error",
      message: format!("{} names {} but it holds no index", layout.pointer_file().display(), store.name()),
    }),
    JsonFile::Invalid(m) => Err(NotReady { code: "qmd_index_error", message: m }),
    JsonFile::Valid(s) if !s.is_current_format() => Err(NotReady::stale()),
    JsonFile::Valid(_) => Ok(store),
  }
}

/// Why [`open_snapshot`] could not serve a recall.
pub enum Unavailable {
  /// The store is not ready (missing, stale, malformed).
  NotReady(NotReady),
  /// The store is ready but cannot be opened.
  Failed(Error),
}

/// Times a recall follows `CURRENT` when the store it named was replaced while being opened.
const FOLLOW_SWAPS: usize = 5;

/// A snapshot of the live store of a vault. When a rebuild replaces the store directory while
/// this runs (its files vanish under it), `CURRENT` has moved on and the snapshot is taken from
/// the new directory instead: a recall never reports a store that is merely being swapped.
pub fn open_snapshot(paths: &VaultPaths) -> std::result::Result<Snapshot, Unavailable> {
  let layout = StoreLayout::new(paths.retrieval());
  let mut attempts = 0;
  loop {
    // A removed store directory is always an old one: `CURRENT` has named a newer one before the
    // removal (names are never reused), so a changed pointer tells a swap from a broken store.
    let before = layout.pointer();
    let outcome = readiness(&layout)
      .map_err(Unavailable::NotReady)
      .and_then(|store| reader_for(&layout, &store).and_then(|r| r.snapshot()).map_err(Unavailable::Failed));
    match outcome {
      Err(_) if attempts < FOLLOW_SWAPS && layout.pointer() != before => attempts += 1,
      other => return other,
    }
  }
}

/// The cached reader of a store directory, (re)opened when the vault's live directory changed.
pub fn reader_for(layout: &StoreLayout, store: &StoreDir) -> Result<Arc<VaultReader>> {
  let key = layout.dir.clone();
  let mut map = cache().lock().unwrap_or_else(|p| p.into_inner());
  if let Some(r) = map.get(&key).filter(|r| r.store == *store) {
    return Ok(r.clone());
  }
  let r = Arc::new(VaultReader::open(layout.clone(), store.clone())?);
  map.insert(key, r.clone());
  Ok(r)
}

/// Drop the cached reader of a store (e.g. before removing it).
pub fn evict(dir: &Path) {
  cache().lock().unwrap_or_else(|p| p.into_inner()).remove(dir);
}
