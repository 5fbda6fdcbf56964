//! The process's shared manifests: the one a store's last commit or load left, per store
//! directory, trusted while its files are unchanged, and the counts that go with it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{base_generation, JournalPos, Manifest, ManifestCounts};
use crate::error::Result;
use crate::store::layout::StoreDir;

/// The manifest a store's last commit or load left, shared by everything in the process that
/// needs that generation: the writer's next reindex (a watcher, the CLI's loops, the bench),
/// `status`, and readers. Without it a process that never committed (a fresh CLI or MCP
/// process, the addon before its first change) parsed the whole manifest on every no-op
/// reindex and status: 2–3 s at 100k pages. One entry per store directory, for the two most
/// recently used vaults (a project and a personal vault); an entry is trusted only while the
/// base file's length and mtime and the journal's length are what its commit or load saw (a file
/// changed behind our back is read again).
struct CachedManifest {
  dir: PathBuf,
  stamp: (u64, i64, u64),
  manifest: Arc<Manifest>,
  /// Its counts, once known (from the writer's tally, or one pass on first use, counted outside
  /// the cache's lock: a pass over a large manifest does not hold up other vaults).
  counts: Arc<std::sync::OnceLock<ManifestCounts>>,
}

/// The counts of `manifest`: the cached copy's when it is the one this process shares, computed
/// once; else a pass over it.
pub fn counts_of(manifest: &Arc<Manifest>) -> ManifestCounts {
  let known = || {
    let cache = MANIFEST_CACHE.lock().unwrap_or_else(|p| p.into_inner());
    cache.iter().find(|c| Arc::ptr_eq(&c.manifest, manifest)).map(|c| c.counts.clone())
  };
  match known() {
    Some(counts) => *counts.get_or_init(|| manifest.counts()),
    None => manifest.counts(),
  }
}

/// Vaults whose manifest is kept (most recently used first). Unit tests run many vaults on
/// parallel threads of one process and count parses: there, room for all of them.
const CACHED_STORES: usize = if cfg!(test) { 64 } else { 2 };

static MANIFEST_CACHE: Mutex<Vec<CachedManifest>> = Mutex::new(Vec::new());

fn stamp(dir: &StoreDir, pos: &JournalPos) -> Option<(u64, i64, u64)> {
  stamp_of(dir, pos.base, pos.len > 0)
}

/// The stamp of the files `generation` of `dir` is read from, before reading them.
fn stamp_before_load(dir: &StoreDir, generation: u64) -> Option<(u64, i64, u64)> {
  let base = base_generation(dir, generation)?;
  stamp_of(dir, base, base < generation)
}

fn stamp_of(dir: &StoreDir, base: u64, with_journal: bool) -> Option<(u64, i64, u64)> {
  let meta = std::fs::metadata(dir.manifest_file(base)).ok()?;
  let journal = if with_journal { std::fs::metadata(dir.journal_file(base)).ok()?.len() } else { 0 };
  Some((meta.len(), crate::vault::discover::mtime_ns(&meta), journal))
}

/// [`Manifest::load_generation`] through the process's manifest cache (a cached copy of another
/// vault than `expected_vault` is not taken; the load then reports the mismatch).
pub fn load_generation_cached(
  dir: &StoreDir,
  generation: u64,
  expected_vault: Option<&str>,
) -> Result<Arc<Manifest>> {
  load_generation_counted(dir, generation, expected_vault).map(|(m, _)| m)
}

/// [`load_generation_cached`], also saying whether a cached copy was taken (`true`) or the
/// generation parsed from disk (readers count the two). A parsed generation is cached.
pub fn load_generation_counted(
  dir: &StoreDir,
  generation: u64,
  expected_vault: Option<&str>,
) -> Result<(Arc<Manifest>, bool)> {
  match committed(dir, generation).filter(|m| expected_vault.is_none_or(|v| m.vault_id == v)) {
    Some(m) => Ok((m, true)),
    None => {
      // The stamp is taken before the parse: a commit of another process in between makes it
      // stale (the entry is then read again), never wrongly fresh.
      let before = stamp_before_load(dir, generation);
      let m = Arc::new(Manifest::load_generation(dir, generation, expected_vault)?);
      if before.is_some() && before == stamp(dir, &m.journal) {
        remember(dir, m.clone(), before, None);
      }
      Ok((m, false))
    }
  }
}

/// The cached manifest of `generation` of `dir` when its files are as its commit or load left
/// them: shared, not parsed again.
pub fn committed(dir: &StoreDir, generation: u64) -> Option<Arc<Manifest>> {
  let mut cache = MANIFEST_CACHE.lock().unwrap_or_else(|p| p.into_inner());
  let at = cache.iter().position(|c| c.dir == dir.dir && c.manifest.generation == generation)?;
  if stamp(dir, &cache[at].manifest.journal) != Some(cache[at].stamp) {
    return None;
  }
  let entry = cache.remove(at);
  let manifest = entry.manifest.clone();
  cache.insert(0, entry);
  Some(manifest)
}

/// Keep `manifest` (just committed in `dir`, with its `counts` from the writer's tally) as the
/// store's cached copy.
pub fn remember_committed(dir: &StoreDir, manifest: Arc<Manifest>, counts: ManifestCounts) {
  let now = stamp(dir, &manifest.journal);
  remember(dir, manifest, now, Some(counts));
}

/// Whether two store directories belong to one vault (siblings under its `meta/qmd`): a rebuild's
/// new store replaces the old one's entry instead of pinning a manifest nobody reads any more.
fn same_vault(a: &Path, b: &Path) -> bool {
  a.parent() == b.parent()
}

fn remember(
  dir: &StoreDir,
  manifest: Arc<Manifest>,
  stamp: Option<(u64, i64, u64)>,
  counts: Option<ManifestCounts>,
) {
  let counts = Arc::new(counts.map_or_else(std::sync::OnceLock::new, std::sync::OnceLock::from));
  let mut cache = MANIFEST_CACHE.lock().unwrap_or_else(|p| p.into_inner());
  cache.retain(|c| !same_vault(&c.dir, &dir.dir));
  if let Some(stamp) = stamp {
    cache.insert(0, CachedManifest { dir: dir.dir.clone(), stamp, manifest, counts });
    cache.truncate(CACHED_STORES);
  }
}

/// Drop the cached manifest of `dir`'s vault (before the writer changes it in place, or when a
/// rebuild of the store failed).
pub fn forget_store(dir: &StoreDir) {
  MANIFEST_CACHE.lock().unwrap_or_else(|p| p.into_inner()).retain(|c| !same_vault(&c.dir, &dir.dir));
}

/// Drop every cached manifest (as in a fresh process).
pub fn forget_committed() {
  MANIFEST_CACHE.lock().unwrap_or_else(|p| p.into_inner()).clear();
}
