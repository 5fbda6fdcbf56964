//! The warm engine: one open reader per vault store, cached across recalls. Each recall reloads
//! the tantivy reader (cheap: it re-reads `meta.json`) and takes a searcher snapshot; the
//! generation recorded in that snapshot selects the manifest, so a recall running while a reindex
//! commits sees either the old or the new generation, never a mix. A swap in this process bumps
//! the store's epoch and the cached reader is reopened.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use tantivy::Searcher;

use crate::error::{Error, Result};
use crate::fsutil::JsonFile;
use crate::store::layout::StoreLayout;
use crate::store::lexical::{page_key, LexicalIndex};
use crate::store::manifest::Manifest;
use crate::store::state::StateFile;
use crate::store::vectors::{chunk_key, VectorIndex};
use crate::store::{epoch, journal};
use crate::vault::VaultPaths;

/// An open store of one vault.
pub struct VaultReader {
  pub layout: StoreLayout,
  pub lexical: LexicalIndex,
  epoch: u64,
  current: Mutex<Option<Arc<GenData>>>,
}

/// `page_key` fast-field value → page id, for one manifest generation.
pub type PageKeys = HashMap<u64, String>;

/// Per-generation data derived from the manifest, built lazily and shared by recalls.
pub struct GenData {
  pub manifest: Arc<Manifest>,
  pub keys: Arc<PageKeys>,
  chunk_pages: OnceLock<HashMap<u64, Vec<(String, String)>>>,
  vectors: OnceLock<std::result::Result<Option<Arc<VectorIndex>>, String>>,
  vectors_dir: PathBuf,
}

impl GenData {
  /// Chunk key → (page id, chunk id) of every live chunk.
  pub fn chunk_pages(&self) -> &HashMap<u64, Vec<(String, String)>> {
    self.chunk_pages.get_or_init(|| {
      let mut m: HashMap<u64, Vec<(String, String)>> = HashMap::new();
      for (id, e) in &self.manifest.entries {
        for c in e.chunks.iter() {
          m.entry(chunk_key(c)).or_default().push((id.clone(), c.to_string()));
        }
      }
      m
    })
  }

  /// The generation's vectors (`Ok(None)` when it has none); opened on first use only, so
  /// lexical recall never touches them.
  pub fn vectors(&self) -> Result<Option<Arc<VectorIndex>>> {
    self
      .vectors
      .get_or_init(|| match &self.manifest.vectors {
        None => Ok(None),
        Some(vm) => VectorIndex::open(&self.vectors_dir, vm, &self.manifest.chunk_keys())
          .map(|v| Some(Arc::new(v)))
          .map_err(|e| e.to_string()),
      })
      .clone()
      .map_err(Error::Index)
  }
}

/// A consistent view of one store for the duration of a recall.
pub struct Snapshot {
  pub searcher: Searcher,
  pub generation: u64,
  pub manifest: Arc<Manifest>,
  pub keys: Arc<PageKeys>,
  pub data: Arc<GenData>,
  pub reader: Arc<VaultReader>,
}

impl VaultReader {
  fn open(layout: StoreLayout) -> Result<Self> {
    let epoch = epoch(&layout.dir);
    let lexical = LexicalIndex::open(&layout.current().lexical_dir())?;
    Ok(VaultReader { layout, lexical, epoch, current: Mutex::new(None) })
  }

  /// Take a snapshot, reloading to the latest commit when the index changed.
  pub fn snapshot(self: &Arc<Self>) -> Result<Snapshot> {
    // A failed reload (e.g. mid-swap in another process) keeps the previous snapshot.
    let _ = self.lexical.reader.reload();
    for _ in 0..3 {
      let searcher = self.lexical.reader.searcher();
      let generation = self.lexical.generation_of(&searcher)?;
      let mut cached = self.current.lock().unwrap_or_else(|p| p.into_inner());
      let data = match cached.as_ref().filter(|d| d.manifest.generation == generation) {
        Some(d) => d.clone(),
        None => match Manifest::load(&self.layout.current().manifest_file(generation), None) {
          Ok(m) => {
            let keys: PageKeys = m.entries.keys().map(|id| (page_key(id), id.clone())).collect();
            let d = Arc::new(GenData {
              manifest: Arc::new(m),
              keys: Arc::new(keys),
              chunk_pages: OnceLock::new(),
              vectors: OnceLock::new(),
              vectors_dir: self.layout.current().vectors_dir(),
            });
            *cached = Some(d.clone());
            d
          }
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
        generation,
        manifest: data.manifest.clone(),
        keys: data.keys.clone(),
        data,
        reader: self.clone(),
      });
    }
    Err(Error::Index(format!("no manifest for the committed generation in {}", self.layout.dir.display())))
  }
}

fn cache() -> &'static Mutex<HashMap<PathBuf, Arc<VaultReader>>> {
  static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<VaultReader>>>> = OnceLock::new();
  CACHE.get_or_init(Default::default)
}

/// Why a store cannot serve recall right now.
#[derive(Debug, Clone)]
pub struct NotReady {
  pub code: &'static str,
  pub message: String,
}

/// Cheap readiness check from small files only: no journal, a state file of this format.
pub fn readiness(layout: &StoreLayout) -> std::result::Result<(), NotReady> {
  if !matches!(journal::read_journal(layout), JsonFile::Missing) {
    return Err(NotReady {
      code: "qmd_swap_interrupted",
      message: "index swap in progress or interrupted".into(),
    });
  }
  match StateFile::read(&layout.current()) {
    JsonFile::Missing => Err(NotReady {
      code: "qmd_index_missing",
      message: "vault has no retrieval index yet; run wiki_reindex".into(),
    }),
    JsonFile::Invalid(m) => Err(NotReady { code: "qmd_index_error", message: m }),
    JsonFile::Valid(s) if !s.is_current_format() => Err(NotReady {
      code: "qmd_index_stale",
      message: "index was built by an incompatible engine version; run wiki_reindex".into(),
    }),
    JsonFile::Valid(_) => Ok(()),
  }
}

/// Longest a recall waits for a live swap (a rebuild promoting its new generation) to finish.
pub const SWAP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// When a swap journal exists because a live process is swapping right now (not a crash), wait
/// for it to finish (the rename phase takes milliseconds) instead of reporting the vault as not
/// ready. Returns the readiness afterwards.
pub fn readiness_waiting_for_swap(layout: &StoreLayout) -> std::result::Result<(), NotReady> {
  let started = std::time::Instant::now();
  loop {
    match readiness(layout) {
      Err(nr)
        if nr.code == "qmd_swap_interrupted"
          && crate::store::lock::held_by_live_owner(&layout.lock_dir())
          && started.elapsed() < SWAP_WAIT =>
      {
        std::thread::sleep(std::time::Duration::from_millis(5));
      }
      other => return other,
    }
  }
}

/// The cached reader of a vault's store, (re)opened when missing or when this process swapped it.
pub fn reader_for(paths: &VaultPaths) -> Result<Arc<VaultReader>> {
  let layout = StoreLayout::new(paths.retrieval());
  let key = layout.dir.clone();
  let mut map = cache().lock().unwrap_or_else(|p| p.into_inner());
  if let Some(r) = map.get(&key) {
    if r.epoch == epoch(&key) {
      return Ok(r.clone());
    }
  }
  let r = Arc::new(VaultReader::open(layout)?);
  map.insert(key, r.clone());
  Ok(r)
}

/// Drop the cached reader of a store (e.g. before removing it).
pub fn evict(dir: &Path) {
  cache().lock().unwrap_or_else(|p| p.into_inner()).remove(dir);
}

/// Number of cached readers (diagnostics).
pub fn cached_readers() -> usize {
  cache().lock().map(|m| m.len()).unwrap_or(0)
}
