//! Reindex of one vault and of the contract's vault targets (active / personal / project / all).
//!
//! Incremental updates happen in place: changed pages are deleted and re-added in the tantivy
//! index and the new manifest generation is written *before* the single tantivy commit that
//! publishes it. A full rebuild (forced, first index, format change) is built in a new store
//! directory and published by replacing `CURRENT` (see `swap.rs`). Cancellation is checked
//! between batches; a cancelled run commits nothing, so the last good index stays intact. Every
//! tantivy writer is closed with `wait_merging_threads` before the run returns: nothing of a
//! reindex writes into the store after it returned.

use std::collections::{BTreeMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use super::generation::{self, Generation};
pub use super::job::{
  ChunkCounts, DocumentCounts, ReindexOptions, ReindexResult, VaultReindexResult, VectorCounts,
  WikiReindexResult,
};
use super::layout::{new_store_name, StoreDir, StoreLayout};
use super::lexical::{CommitInfo, LexicalIndex};
use super::lock;
use super::manifest::{ChunkIds, ExcludedEntry, JournalPos, Manifest, ManifestDelta, ManifestEntry};
use super::spill::{EntrySpill, SPILL_FILE};
use super::state::{remember_tally, tally_of, StateFile, StateModels, StateVectors, Tally};
use super::status::{read_index_status_with, IndexStatus, StatusOptions};
use super::swap::{self, crash_point};
use super::{Component, IndexIssue, Progress, ProgressSink, Scope};
use crate::chunk::{ChunkedPage, Chunker};
use crate::error::{Error, Result};
use crate::fsutil::{now_iso, now_ms, remove_dir_all_if_exists, write_json};
use crate::util::hash::sha256_hex;
use crate::vault::config::{ensure_vault_id, read_config};
use crate::vault::paths::{is_personal_vault, personal_vault_paths};
use crate::vault::{discover_pages, Diagnostic, Page, PageFile, PageModel, VaultPaths};

pub use crate::vault::read::MAX_PAGE_BYTES;
/// Files modified this close to (or after) the last build are re-hashed even when size and mtime
/// match, because a same-second edit can leave mtime unchanged on coarse filesystems.
const RACY_WINDOW_MS: i64 = 2_000;
/// Pages parsed per batch between cancellation checks and progress events.
const BATCH: usize = 256;
/// Pages indexed between two returns of freed memory to the system ([`release_freed_memory`]).
/// Not fitted: each return took 2–12 ms in the 100k-page build, ten of them well under 0.1 % of it.
const RELEASE_EVERY_PAGES: u32 = 10_000;
/// A full build of at least this many pages keeps its manifest entries in a file until its
/// writer has flushed ([`super::spill`]). Not fitted: below it the entries (≈ 2.2 KB per page)
/// are a few tens of MB, less than the spill's write and parse are worth.
const SPILL_FROM_PAGES: usize = 10_000;

#[cfg(test)]
thread_local! {
  /// A lower threshold for the tests of this thread (so small vaults exercise the spill).
  static SPILL_FROM_OVERRIDE: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

fn spill_from_pages() -> usize {
  #[cfg(test)]
  if let Some(n) = SPILL_FROM_OVERRIDE.with(|o| o.get()) {
    return n;
  }
  SPILL_FROM_PAGES
}

/// Return the heap memory this process has freed to the system. glibc keeps what a thread frees
/// in that thread's arena: indexing threads free page texts, parsed pages, chunks and writer
/// arenas by the hundred megabytes, and what a large run leaves there is reused by nothing (the
/// process's next allocations come from other threads' arenas). In the 100k-page cold build,
/// a return every [`RELEASE_EVERY_PAGES`] pages and one after the commit lowered the build's peak
/// RSS by about 60 MiB and what the process holds afterwards by about 125 MiB (docs/DECISIONS.md,
/// "Cold build: one writer budget, no merges"). Other allocators and platforms keep their own
/// policy.
fn release_freed_memory() {
  #[cfg(all(target_os = "linux", target_env = "gnu"))]
  // SAFETY: malloc_trim only hands free pages of the heap back to the kernel; it takes the
  // arenas' locks like any allocation and may be called from any thread.
  unsafe {
    libc::malloc_trim(0);
  }
}

/// How one discovered page compares with the previous generation.
enum Loaded {
  /// Path, size and mtime match the previous entry.
  Same,
  /// Same content, new size/mtime: the entry to record.
  Unchanged(ManifestEntry),
  Changed {
    entry: ManifestEntry,
    chunks: ChunkedPage,
    is_new: bool,
    page: Box<Page>,
    warning: Option<Diagnostic>,
  },
  Invalid(Diagnostic),
  /// The read failed with an I/O error other than "not found" (EIO, a dropped network share, a
  /// file locked by another program): no verdict on the page. Its entry (or exclusion) stays as
  /// it was, so it is still recalled with its last indexed content, and because nothing records
  /// its new size and mtime, the next scan reads it again (`page_unreadable`).
  Unreadable(Diagnostic),
  /// The file was gone when read (deleted after the walk's stat): a deletion.
  Gone,
}

fn emit(
  opts: &ReindexOptions,
  stage: &'static str,
  message: impl Into<String>,
  current: Option<u64>,
  total: Option<u64>,
) {
  if let Some(p) = &opts.progress {
    p(Progress { vault: None, stage, message: message.into(), current, total });
  }
}

fn threads(opts: &ReindexOptions) -> usize {
  if opts.threads > 0 {
    // Every caller (JS, CLI, Rust) gets the same bound: never more threads than cores.
    return crate::models::clamp_threads(opts.threads);
  }
  std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(4)
}

/// What the previous generation recorded for one file, and when it was built.
#[derive(Clone, Copy)]
struct Before<'a> {
  entry: Option<&'a Arc<ManifestEntry>>,
  excluded: Option<&'a ExcludedEntry>,
  /// The previous generation's build time (none for a first build).
  built_at_ms: Option<i64>,
}

/// [`load_one`] with a panic turned into the page's diagnostic (`page_index_panic`): a bug hit
/// by one page must not take the others down or pair them with the wrong results.
fn load_guarded(
  file: &PageFile,
  before: Before,
  trust_stat: bool,
  chunker: &Chunker,
  model: PageModel,
) -> Loaded {
  match std::panic::catch_unwind(AssertUnwindSafe(|| load_one(file, before, trust_stat, chunker, model))) {
    Ok(loaded) => loaded,
    Err(payload) => {
      let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
      Loaded::Invalid(Diagnostic::error(
        "page_index_panic",
        &file.rel_path,
        &format!("Indexing this page failed unexpectedly ({what}); it is skipped until it changes"),
      ))
    }
  }
}

/// Read, hash and (when changed) parse + chunk one page file.
fn load_one(
  file: &PageFile,
  before: Before,
  trust_stat: bool,
  chunker: &Chunker,
  model: PageModel,
) -> Loaded {
  #[cfg(test)]
  tests::panic_hook(&file.id);
  let prev = before.entry;
  let racy = before.built_at_ms.is_some_and(|built| file.mtime_ns / 1_000_000 >= built - RACY_WINDOW_MS);
  if trust_stat && !racy {
    if prev.is_some_and(|p| p.rel_path == file.rel_path && p.size == file.size && p.mtime_ns == file.mtime_ns)
    {
      return Loaded::Same;
    }
    if let Some(x) = before
      .excluded
      .filter(|x| x.rel_path == file.rel_path && x.size == file.size && x.mtime_ns == file.mtime_ns)
    {
      return Loaded::Invalid(x.diagnostic.clone());
    }
  }
  if file.size > MAX_PAGE_BYTES {
    return Loaded::Invalid(Diagnostic::error(
      "page_too_large",
      &file.rel_path,
      &format!("Page is {} bytes; pages over {MAX_PAGE_BYTES} bytes are not indexed", file.size),
    ));
  }
  // The walk's `wiki/` folder: the file's path less as many components as its relative path has.
  let wiki = file.abs_path.ancestors().nth(file.rel_path.split('/').count()).unwrap_or(&file.abs_path);
  let read = || crate::vault::read::read_page_at(wiki, &file.abs_path, MAX_PAGE_BYTES);
  #[cfg(test)]
  let read = || tests::read_fault(file).map_or_else(read, Err);
  let bytes = match read() {
    Ok(b) => b,
    Err(crate::vault::read::PageReadError::Io { source, .. })
      if source.kind() == std::io::ErrorKind::NotFound =>
    {
      return Loaded::Gone
    }
    Err(e @ crate::vault::read::PageReadError::Io { .. }) => {
      return Loaded::Unreadable(Diagnostic::warning(
        "page_unreadable",
        &file.rel_path,
        &format!("{e}; the page keeps its last indexed content and is read again on the next scan"),
      ))
    }
    // Replaced since the walk's stat (a symlink, a FIFO, grown past the cap): refused unread.
    Err(e) => return Loaded::Invalid(Diagnostic::error(e.code(), &file.rel_path, &e.to_string())),
  };
  let hash = sha256_hex(&bytes);
  if let Some(p) = prev {
    if p.content_hash == hash && p.rel_path == file.rel_path {
      return Loaded::Unchanged(ManifestEntry { size: file.size, mtime_ns: file.mtime_ns, ..(**p).clone() });
    }
  }
  match Page::from_file_bytes_as(model, &file.id, file.abs_path.clone(), &bytes) {
    Err(e) => Loaded::Invalid(Diagnostic::from_frontmatter(&file.rel_path, &e)),
    Ok((page, warning)) => {
      // The body's links are read from the chunker's Markdown pass (one parse of the body).
      let mut links = crate::memory::links::LinkCollector::new(&page.body, page.body_start_line);
      let chunks =
        chunker.chunk_observing(&page.meta.title, &page.body, page.body_start_line, &mut |e, r| {
          links.observe(e, r)
        });
      let entry = ManifestEntry {
        rel_path: file.rel_path.clone(),
        size: file.size,
        mtime_ns: file.mtime_ns,
        content_hash: hash,
        role: page.role,
        meta: Box::new(page.meta.clone()),
        sections: chunks.sections.len() as u32,
        chunks: ChunkIds::from_ids(chunks.chunks.iter().map(|c| c.id.as_str())),
        links: crate::memory::graph::PageLinks::of_page_with(&page, links.finish()),
      };
      let warning = warning.map(|w| Diagnostic::from_frontmatter(&file.rel_path, &w));
      Loaded::Changed { entry, chunks, is_new: prev.is_none(), page: Box::new(page), warning }
    }
  }
}

/// Where a run writes: the lexical index of the target store directory, with its writer opened
/// on the first change (a run that changes nothing never takes tantivy's writer lock).
struct Sink<'a> {
  lexical: &'a LexicalIndex,
  writer: Option<tantivy::IndexWriter>,
  threads: usize,
  /// An incremental run over an existing index ([`LexicalIndex::writer`], which merges only small
  /// segments); otherwise a full rebuild ([`LexicalIndex::cold_writer`]).
  incremental: bool,
  /// Where a large full build writes its manifest entries until the commit ([`super::spill`]);
  /// `None`: they are held in the run's delta.
  spill: Option<EntrySpill>,
}

impl<'a> Sink<'a> {
  fn new(lexical: &'a LexicalIndex, threads: usize, incremental: bool) -> Self {
    Sink { lexical, writer: None, threads, incremental, spill: None }
  }

  /// The index and its writer (opened now if needed).
  fn writer(&mut self) -> Result<(&LexicalIndex, &tantivy::IndexWriter)> {
    if self.writer.is_none() {
      let w = if self.incremental {
        self.lexical.writer(self.threads)?
      } else {
        self.lexical.cold_writer(self.threads)?
      };
      self.writer = Some(w);
    }
    Ok((self.lexical, self.writer.as_ref().expect("opened above")))
  }

  /// Commit what the writer holds, then close it once its merges are done (an incremental
  /// writer merges only small segments, so the wait is bounded by the change, not the vault).
  /// `before_commit` runs once the writer has flushed its segments (they stay invisible until
  /// the commit) and before the commit that makes them visible; its error rolls back.
  fn commit(&mut self, before_commit: impl FnOnce() -> Result<()>) -> Result<()> {
    let mut w = self.writer.take().ok_or_else(|| Error::Index("nothing to commit".into()))?;
    let committed = match w.prepare_commit() {
      Ok(prepared) => match before_commit() {
        Ok(()) => prepared.commit().map_err(Error::from),
        Err(e) => Err(e),
      },
      Err(e) => Err(e.into()),
    };
    if let Err(e) = committed {
      let _ = w.rollback();
      let _ = w.wait_merging_threads();
      return Err(e);
    }
    crash_point("after-commit");
    w.wait_merging_threads()?;
    Ok(())
  }

  /// Drop uncommitted changes (cancel / failure): the last commit stays the visible state.
  fn rollback(&mut self) {
    if let Some(mut w) = self.writer.take() {
      let _ = w.rollback();
      let _ = w.wait_merging_threads();
    }
  }
}

impl Drop for Sink<'_> {
  fn drop(&mut self) {
    self.rollback();
  }
}

/// Each file's record in `map` (by id) and the ids of `map` no file has. Files come sorted by id
/// (discovery sorts them; a hint's come from an ordered map), so the map is read in one ordered
/// pass beside them: at 100k pages, a tree lookup per page and use plus a hash set of the ids
/// met cost more than the no-op's other work after the walk (docs/DECISIONS.md). Files not
/// `sorted` (strictly, so no id twice) are matched by lookups instead: the same answer.
fn match_by_id<'a, V>(
  files: &[PageFile],
  sorted: bool,
  map: &'a BTreeMap<String, V>,
) -> (Vec<Option<&'a V>>, Vec<&'a String>) {
  if !sorted {
    let met: HashSet<&str> = files.iter().map(|f| f.id.as_str()).collect();
    let gone = map.keys().filter(|k| !met.contains(k.as_str())).collect();
    return (files.iter().map(|f| map.get(&f.id)).collect(), gone);
  }
  let mut found = Vec::with_capacity(files.len());
  let mut gone = Vec::new();
  let mut ids = map.iter();
  // The map's next id not yet passed (one comparison per step: string comparisons of ids with
  // long shared prefixes were most of this pass).
  let mut next = ids.next();
  for f in files {
    let mut hit = None;
    while let Some((id, v)) = next {
      match id.as_str().cmp(&f.id) {
        std::cmp::Ordering::Less => gone.push(id),
        std::cmp::Ordering::Equal => hit = Some(v),
        std::cmp::Ordering::Greater => break,
      }
      next = ids.next();
      if hit.is_some() {
        break;
      }
    }
    found.push(hit);
  }
  gone.extend(next.into_iter().chain(ids).map(|(id, _)| id));
  (found, gone)
}

/// What a scan of the pages decided (page contents are indexed as they stream past): the change
/// to the previous generation's manifest (for a first index, every page).
struct Scan {
  delta: ManifestDelta,
}

impl Scan {
  fn nothing(&self) -> bool {
    self.delta.is_empty()
  }
}

/// Which pages of the previous generation a scan accounts for: every one (a walk of the vault;
/// pages not met are removed, except where the walk could not read), or only those of a
/// changed-paths hint (plus the ids it names as gone).
enum Coverage {
  Walk { unreadable: crate::vault::discover::Unreadable },
  Hinted { gone: Vec<String> },
}

/// Read every page in parallel batches and stream changed ones into the sink, so memory holds
/// one batch of parsed pages at a time (a 100k-page vault never sits in memory at once). Pages
/// are loaded by an ordered parallel map, so results stay paired with their files whatever a page
/// does. Cancellation is checked between batches.
#[allow(clippy::too_many_arguments)]
fn scan_pages(
  files: &[PageFile],
  model: PageModel,
  coverage: Coverage,
  prior: Option<&Manifest>,
  opts: &ReindexOptions,
  chunker: &Chunker,
  sink: &mut Sink,
  res: &mut ReindexResult,
) -> Result<Scan> {
  let trust_stat = opts.scope == Scope::Changed;
  let n_threads = threads(opts);
  let pool = crate::pool::indexing_pool(n_threads)
    .map_err(|e| Error::Index(format!("cannot start indexing threads: {e}")))?;
  let total = files.len() as u64;
  emit(opts, "mirror", "comparing pages with the index", Some(0), Some(total));
  let mut scan = Scan { delta: ManifestDelta::default() };
  let delta = &mut scan.delta;
  let sorted = files.windows(2).all(|w| w[0].id < w[1].id);
  let ((entries, gone_entries), (excluded, gone_excluded)) = match prior {
    Some(m) => (match_by_id(files, sorted, &m.entries), match_by_id(files, sorted, &m.excluded)),
    None => ((vec![None; files.len()], Vec::new()), (vec![None; files.len()], Vec::new())),
  };
  let built_at_ms = prior.map(|m| m.built_at_ms);
  let before: Vec<Before> = entries
    .into_iter()
    .zip(excluded)
    .map(|(entry, excluded)| Before { entry, excluded, built_at_ms })
    .collect();
  let per_batch = BATCH * n_threads;
  let mut indexed_since_release = 0u32;
  for (b, (batch, before)) in files.chunks(per_batch).zip(before.chunks(per_batch)).enumerate() {
    opts.cancel.check()?;
    let loaded: Vec<Loaded> = pool.install(|| {
      batch
        .par_iter()
        .zip(before.par_iter())
        .map(|(f, b)| load_guarded(f, *b, trust_stat, chunker, model))
        .collect()
    });
    debug_assert_eq!(loaded.len(), batch.len());
    for ((file, l), before) in batch.iter().zip(loaded).zip(before) {
      let prev = before.entry;
      let was_excluded = before.excluded;
      if was_excluded.is_some() && !matches!(l, Loaded::Invalid(_) | Loaded::Unreadable(_)) {
        delta.xdel.push(file.id.clone());
      }
      match l {
        Loaded::Same => {}
        Loaded::Unchanged(e) => {
          if prev.map(|p| &**p) != Some(&e) {
            delta.set.insert(file.id.clone(), Arc::new(e));
          }
        }
        // A removals-only run adds and updates nothing: the page keeps its indexed entry (its
        // old size and mtime, so the next ordinary run reads it again).
        Loaded::Changed { .. } if opts.removals_only => {}
        Loaded::Changed { entry, chunks, is_new, page, warning } => {
          if let Some(d) = warning {
            res.warnings.push(IndexIssue::new(&d.code, d.message.clone()).at(d.path.clone()));
          }
          if is_new {
            res.documents.indexed += 1;
          } else {
            res.documents.updated += 1;
          }
          let (lexical, w) = sink.writer()?;
          if let Some(p) = prev {
            lexical.delete_page(w, &file.id);
            res.chunks.removed += p.chunks.len() as u32;
          }
          lexical.add_page(w, &file.id, &page.meta, &chunks)?;
          res.chunks.added += chunks.chunks.len() as u32;
          indexed_since_release += 1;
          match sink.spill.as_mut() {
            Some(spill) => spill.push(&file.id, &entry)?,
            // Kept as a copy made on this thread: the entry is held to the end of the run, and a
            // worker's heap is where page texts and chunks come and go; its copy, allocated here
            // without spare capacity, does not pin the worker's heap pages (20k-page cold build:
            // peak RSS −9 %, docs/DECISIONS.md "Cold build memory").
            None => {
              delta.set.insert(file.id.clone(), Arc::new(entry.clone()));
            }
          }
        }
        Loaded::Invalid(d) => {
          res.warnings.push(IndexIssue::new(&d.code, d.message.clone()).at(d.path.clone()));
          let x = ExcludedEntry {
            rel_path: file.rel_path.clone(),
            size: file.size,
            mtime_ns: file.mtime_ns,
            diagnostic: d,
          };
          // A page that was indexed and is now malformed leaves the index.
          if let Some(p) = prev {
            let (lexical, w) = sink.writer()?;
            lexical.delete_page(w, &file.id);
            res.chunks.removed += p.chunks.len() as u32;
            res.documents.removed += 1;
            delta.del.push(file.id.clone());
          }
          if was_excluded != Some(&x) {
            delta.xset.insert(file.id.clone(), x);
          }
        }
        Loaded::Unreadable(d) => {
          res.warnings.push(IndexIssue::new(&d.code, d.message.clone()).at(d.path.clone()));
        }
        Loaded::Gone => {
          if let Some(p) = prev {
            let (lexical, w) = sink.writer()?;
            lexical.delete_page(w, &file.id);
            res.chunks.removed += p.chunks.len() as u32;
            res.documents.removed += 1;
            delta.del.push(file.id.clone());
          }
        }
      }
    }
    let done = ((b + 1) * BATCH * n_threads).min(files.len()) as u64;
    emit(opts, "lexical", "indexing pages", Some(done), Some(total));
    if indexed_since_release >= RELEASE_EVERY_PAGES {
      release_freed_memory();
      indexed_since_release = 0;
    }
  }
  if let Some(m) = prior {
    let (gone_pages, gone_excluded): (Vec<&String>, Vec<&String>) = match &coverage {
      // Pages in a place the walk could not read are not gone: they stay as they were.
      Coverage::Walk { unreadable } if !unreadable.is_empty() => (
        gone_entries.into_iter().filter(|k| !unreadable.covers(k)).collect(),
        gone_excluded.into_iter().filter(|k| !unreadable.covers(k)).collect(),
      ),
      Coverage::Walk { .. } => (gone_entries, gone_excluded),
      Coverage::Hinted { gone } => (
        gone.iter().filter(|k| m.entries.contains_key(*k)).collect(),
        gone.iter().filter(|k| m.excluded.contains_key(*k)).collect(),
      ),
    };
    for id in gone_pages {
      let (lexical, w) = sink.writer()?;
      lexical.delete_page(w, id);
      res.chunks.removed += m.entries[id].chunks.len() as u32;
      res.documents.removed += 1;
      delta.del.push(id.clone());
    }
    delta.xdel.extend(gone_excluded.into_iter().cloned());
    delta.del.sort_unstable();
    delta.del.dedup();
    delta.xdel.sort_unstable();
    delta.xdel.dedup();
  }
  // Pages left as they were: those of the previous generation neither updated nor removed.
  let before = prior.map_or(0, |m| m.entries.len()) as u32;
  res.documents.unchanged = before.saturating_sub(res.documents.removed + res.documents.updated);
  Ok(scan)
}

/// Frees the scanned files: a vault's worth (a walk's) on the global pool, off this run's path.
fn release_files(files: Vec<PageFile>) {
  if files.len() >= 10_000 {
    crate::pool::drop_later(files);
  }
}

/// Whether this full rebuild's staged manifest is to lose a page before validation: in unit tests
/// for a vault a test named (`tests::fail_next_staged_validation`), in `test-hooks` builds when
/// `LLM_WIKI_FAULT_AT=staged-manifest-short`.
#[cfg(any(test, feature = "test-hooks"))]
fn staged_manifest_fault(paths: &VaultPaths) -> bool {
  #[cfg(test)]
  if tests::take_staged_fault(&paths.root) {
    return true;
  }
  #[cfg(feature = "test-hooks")]
  if swap::fault_point("staged-manifest-short") {
    return true;
  }
  let _ = paths;
  false
}

/// The live store at its last commit, if it opens cleanly and matches this engine and vault.
fn open_current(layout: &StoreLayout, vault_id: &str) -> Option<Generation> {
  let gen = Generation::open(layout.current()?).ok()?;
  let state = gen.state.as_ref()?;
  (state.is_current_format() && gen.manifest.vault_id == vault_id).then_some(gen)
}

/// Publish what the sink holds as the commit `commit` of `dir`: `manifest` (already at the
/// commit's generation) is written first — one journal record `delta` after `prior`, or a new
/// base —, then the single tantivy commit makes it visible. A build that spilled its entries
/// (`sink.spill`) has the writer flush its segments (invisible until the commit) before they
/// are read back into `manifest` and it is written. `beside`, when given, runs on rayon's pool
/// with the complete manifest while it is written; its result is returned.
fn commit_generation<T: Send>(
  sink: &mut Sink,
  dir: &StoreDir,
  manifest: &mut Manifest,
  prior: Option<(JournalPos, &ManifestDelta)>,
  commit: &CommitInfo,
  opts: &ReindexOptions,
  mut beside: Option<impl FnOnce(&Manifest) -> T + Send>,
) -> Result<Option<T>> {
  let gen = commit.manifest_generation;
  debug_assert_eq!(manifest.generation, gen);
  let mut done = None;
  let result = (|| {
    let (lexical, w) = sink.writer()?;
    lexical.set_commit(w, commit)?;
    let mut write_manifest = |manifest: &mut Manifest| -> Result<()> {
      let m: &Manifest = manifest;
      let write = || m.write_generation(dir, prior.map(|p| p.0), prior.map(|p| p.1));
      let mut found = None;
      let journal = match beside.take() {
        None => write(),
        // On rayon's pool (idle at this point of a build), the write on this thread.
        Some(f) => {
          crate::pool::global();
          rayon::in_place_scope(|s| {
            s.spawn(|_| found = Some(f(m)));
            write()
          })
        }
      };
      manifest.journal = journal?;
      done = found;
      crash_point("after-manifest");
      opts.cancel.check()?;
      crash_point("before-commit");
      Ok(())
    };
    match sink.spill.take() {
      // Written while the indexing threads work through the documents still queued (on a small
      // vault, most of them): the flush then overlaps the write.
      None => {
        write_manifest(manifest)?;
        sink.commit(|| Ok(()))?;
      }
      // The entries come back once the writer's last segments are flushed and its arenas freed
      // (returned to the system first), so the two are never resident together.
      Some(spill) => sink.commit(|| {
        release_freed_memory();
        manifest.entries = spill.read_back()?;
        write_manifest(manifest)
      })?,
    }
    Ok(())
  })();
  if result.is_err() {
    sink.rollback();
    // A base written for this generation is removed; a journal record after the committed
    // generation is ignored by readers and cut off by the next writer.
    if manifest.journal.base == gen {
      let _ = std::fs::remove_file(dir.manifest_file(gen));
    }
  }
  result.map(|()| done)
}

/// What a rebuild reads of the store it replaces, once: its last lexical commit and its state
/// file. Its manifest (hundreds of MB at 100k pages) is neither parsed nor kept in memory while
/// the new store is built.
struct Replaced {
  dir: StoreDir,
  commit: Option<CommitInfo>,
  state: Option<StateFile>,
}

impl Replaced {
  fn read(dir: StoreDir) -> Replaced {
    let commit = LexicalIndex::commit_in(&dir.lexical_dir()).ok().flatten();
    let state = match StateFile::read(&dir) {
      crate::fsutil::JsonFile::Valid(s) => Some(s),
      _ => None,
    };
    Replaced { dir, commit, state }
  }

  /// The last generation it committed or recorded in its state file (0 when neither can be
  /// read): a rebuild numbers its generations above it.
  fn last_generation(&self) -> u64 {
    let committed = self.commit.as_ref().map_or(0, |c| c.generation);
    committed.max(self.state.as_ref().map_or(0, |s| s.generation))
  }
}

/// Remove the page manifests no longer needed: a reader may still hold the previous commit, so
/// the bases (and journals) the last two commits (`keep`) are read from stay.
pub(crate) fn gc_manifests(dir: &StoreDir, keep: &[u64]) {
  super::manifest::gc_generations(dir, keep)
}

/// What a changed-paths hint resolves to.
enum Hinted {
  /// Look at these page files, and remove these ids (when indexed or excluded).
  Pages { files: Vec<PageFile>, gone: Vec<String> },
  /// The hint cannot be followed page by page: walk the vault.
  Walk(&'static str),
}

/// NFC form of a path string (page ids and manifest paths are NFC).
fn nfc(s: &str) -> String {
  use unicode_normalization::UnicodeNormalization;
  if s.is_ascii() {
    s.to_string()
  } else {
    s.nfc().collect()
  }
}

fn is_page_name(name: &str) -> bool {
  name.len() > 3
    && name.as_bytes()[name.len() - 3..].eq_ignore_ascii_case(b".md")
    && !name.eq_ignore_ascii_case("index.md")
    && !name.eq_ignore_ascii_case("log.md")
}

/// Resolve a changed-paths hint against the previous generation (see
/// [`ReindexOptions::changed_paths`]).
fn resolve_hints(
  paths: &VaultPaths,
  hints: &[std::path::PathBuf],
  prior: &Manifest,
  res: &mut ReindexResult,
) -> Hinted {
  use std::path::Component as C;
  let mut files: BTreeMap<String, PageFile> = BTreeMap::new();
  let mut gone: Vec<String> = Vec::new();
  for hint in hints {
    let rel = if hint.is_absolute() { hint.strip_prefix(&paths.root).ok() } else { Some(hint.as_path()) };
    let rel = rel.filter(|r| r.components().all(|c| matches!(c, C::Normal(_) | C::CurDir)));
    let Some(rel) = rel else {
      res.warnings.push(
        IndexIssue::new(
          "reindex_hint_outside_vault",
          format!("changed path {} is not inside the vault; ignored", hint.display()),
        )
        .at(hint.to_string_lossy().into_owned()),
      );
      continue;
    };
    let abs = paths.root.join(rel);
    // Not under wiki/: names no page (meta files, .obsidian/, editors' files elsewhere).
    let Ok(in_wiki) = abs.strip_prefix(&paths.wiki) else { continue };
    let parts: Vec<&str> = match in_wiki
      .components()
      .filter(|c| !matches!(c, C::CurDir))
      .map(|c| c.as_os_str().to_str())
      .collect()
    {
      Some(p) => p,
      None => return Hinted::Walk("a changed path is not valid UTF-8"),
    };
    if parts.is_empty() {
      return Hinted::Walk("the knowledge directory itself changed");
    }
    // A symlinked folder on the way is never entered by the walk: such a path names no page.
    let mut under_link = false;
    let mut at = paths.wiki.clone();
    for part in &parts[..parts.len() - 1] {
      at.push(part);
      if std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_symlink()) {
        under_link = true;
        break;
      }
    }
    let rel_path = nfc(&parts.join("/"));
    let name = parts[parts.len() - 1];
    let page_id = is_page_name(name).then(|| rel_path[..rel_path.len() - 3].to_string());
    match std::fs::symlink_metadata(&abs) {
      Ok(m) if m.is_dir() && !under_link => return Hinted::Walk("a changed path is a directory"),
      Ok(m) if m.is_file() && !under_link => {
        let Some(id) = page_id else { continue };
        let known = prior.entries.contains_key(&id) || prior.excluded.contains_key(&id);
        if !known {
          let lower = id.to_lowercase();
          let twin = prior
            .entries
            .keys()
            .chain(prior.excluded.keys())
            .any(|k| k.len() == id.len() && k.to_lowercase() == lower);
          if twin {
            return Hinted::Walk("a new page's id collides with an indexed one");
          }
        }
        let file = PageFile {
          id: id.clone(),
          rel_path,
          abs_path: abs.clone(),
          size: m.len(),
          mtime_ns: crate::vault::discover::mtime_ns(&m),
        };
        files.insert(id, file);
      }
      Ok(_) => gone.extend(page_id),
      Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
        gone.extend(page_id);
        // A folder that is gone takes its pages with it.
        let prefix = format!("{rel_path}/");
        for map_keys in [
          prior
            .entries
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&prefix))
            .cloned()
            .collect::<Vec<_>>(),
          prior
            .excluded
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&prefix))
            .cloned()
            .collect(),
        ] {
          gone.extend(map_keys);
        }
      }
      Err(_) => return Hinted::Walk("a changed path cannot be inspected"),
    }
  }
  gone.retain(|id| !files.contains_key(id));
  Hinted::Pages { files: files.into_values().collect(), gone }
}

/// Write `state.json` describing `commit` over `manifest`, whose counts and hash `tally` holds
/// (vector counts from its segments).
pub(crate) fn write_state(
  dir: &StoreDir,
  manifest: &Manifest,
  tally: &Tally,
  commit: &CommitInfo,
  store_id: &str,
) -> Result<()> {
  let distinct = tally.chunk_refs.len() as u32;
  let (models, counts) = match &commit.vectors {
    Some(vm) => {
      let live: std::collections::HashSet<u64> = tally.chunk_refs.keys().copied().collect();
      let present = super::vectors::VectorIndex::open(&dir.vectors_dir(), vm, &live)?.present().len() as u32;
      let counts =
        StateVectors { embedded: present, missing: distinct - present, has_index: !vm.segments.is_empty() };
      (StateModels { embed: vm.model.clone() }, counts)
    }
    None => (StateModels::default(), StateVectors { missing: distinct, ..Default::default() }),
  };
  StateFile::describe_tally(manifest, tally, commit.generation, store_id, models, counts).write(dir)
}

/// After a commit that indexed at least [`RELEASE_EVERY_PAGES`] pages, the writer's freed memory
/// goes back to the system before the lint and the tally allocate theirs.
fn release_after_large_run(res: &ReindexResult) {
  if res.documents.indexed + res.documents.updated >= RELEASE_EVERY_PAGES {
    release_freed_memory();
  }
}

fn base_result(opts: &ReindexOptions, components: &[Component]) -> ReindexResult {
  ReindexResult {
    ok: false,
    vault_id: None,
    scope: opts.scope,
    components: components.to_vec(),
    documents: DocumentCounts::default(),
    chunks: ChunkCounts::default(),
    vectors: VectorCounts::default(),
    elapsed_ms: 0.0,
    full_rebuild: false,
    generation: 0,
    status: IndexStatus::default(),
    warnings: Vec::new(),
    errors: Vec::new(),
  }
}

/// De-duplicated components in input order.
fn dedup_components(c: &[Component]) -> Vec<Component> {
  let mut seen = HashSet::new();
  c.iter().copied().filter(|x| seen.insert(*x)).collect()
}

/// Reindex one vault. Never returns `Err`: failures are reported in `errors`.
pub fn reindex_vault(paths: &VaultPaths, opts: &ReindexOptions) -> ReindexResult {
  let started = Instant::now();
  let components = dedup_components(&opts.components);
  let mut res = base_result(opts, &components);
  let layout = StoreLayout::new(paths.retrieval());
  // A folder that is no vault at all (no `.llm-wiki/`, `.wiki/`, `.llm-wiki-retrieval/`, no
  // config): report it, naming `init`, before anything (a lock, the store) is written into it.
  let uninitialised = !crate::vault::paths::has_vault(&paths.root) && !paths.config_file().exists();
  let missing = if uninitialised { read_config(paths).err() } else { None };
  // Never waits: a vault being indexed (by this process or another) answers busy at once.
  let acquired = match missing {
    Some(e) => Err(e),
    None => lock::acquire(&layout),
  };
  let outcome = match acquired {
    Err(e) => {
      // A live writer of the TypeScript release: its QMD store migrates on a later run.
      if matches!(e, Error::IndexBusy(_))
        && super::migrate::foreign_writer(&layout).is_some()
        && super::migrate::qmd_store_pending(&layout)
      {
        let d = super::recover::deferred(&layout);
        res.warnings.push(IndexIssue::new(&d.code, d.message).at(d.path));
      }
      Err((e, false))
    }
    Ok(_store_lock) => {
      crash_point("locked");
      run_locked(paths, &layout, opts, &components, &mut res)
    }
  };
  match outcome {
    Ok(()) => res.ok = true,
    Err((Error::Cancelled, _)) => {}
    Err((e, after_mirror)) => {
      if after_mirror {
        let last = serde_json::json!({
          "code": e.code(),
          "message": e.to_string(),
          "manifestHash": res.status.manifest_hash,
          "at": now_iso(),
        });
        let _ = write_json(&layout.last_error_file(), &last);
      }
      res.errors.push(IndexIssue::from_error(&e));
    }
  }
  // A completed run just compared every page with the index: no second scan for its status.
  res.status = read_index_status_with(paths, &StatusOptions { check_pages: !res.ok, ..Default::default() });
  res.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
  res
}

type LockedOutcome = std::result::Result<(), (Error, bool)>;

/// The chunker of a run: the configured embedding model's tokenizer counts chunk sizes (capped to
/// its window), so chunks fit the model by its own count; without a model (lexical only, or dense
/// retrieval off) the estimate does. A tokenizer that cannot be loaded falls back to the estimate
/// with a `tokenizer_unavailable` warning, never an error (the vector phase reports the model).
fn run_chunker(
  opts: &ReindexOptions,
  models: &crate::models::ModelConfig,
  res: &mut ReindexResult,
) -> Chunker {
  match crate::models::tokens::chunk_counter(models) {
    None => Chunker::estimate(opts.chunking),
    Some(Ok(t)) => Chunker { config: t.chunking(&opts.chunking), counter: t },
    Some(Err(e)) => {
      res.warnings.push(IndexIssue::new(
        "tokenizer_unavailable",
        format!("chunk sizes are estimated: the embedding model's tokenizer cannot be loaded ({e})"),
      ));
      Chunker::estimate(opts.chunking)
    }
  }
}

fn run_locked(
  paths: &VaultPaths,
  layout: &StoreLayout,
  opts: &ReindexOptions,
  components: &[Component],
  res: &mut ReindexResult,
) -> LockedOutcome {
  let pre = |e: Error| (e, false);
  let post = |e: Error| (e, true);
  // Leftovers of an interrupted rebuild (or an old store another process still had mapped).
  swap::collect_garbage(layout);
  opts.cancel.check().map_err(pre)?;
  emit(opts, "mirror", "resolving vault identity", None, None);
  let vault_id = ensure_vault_id(paths).map_err(pre)?;
  res.vault_id = Some(vault_id.clone());

  let force_lexical = opts.force && !opts.removals_only && components.contains(&Component::Lexical);
  let opened = if force_lexical { None } else { open_current(layout, &vault_id) };
  // The vault's embedding model (per-vault choice) decides how chunks are counted.
  let choice = super::model_choice::choose_at_reindex(paths, layout, opened.as_ref().map(|g| &*g.manifest));
  let model_config = super::model_choice::config_of(&choice);
  let chunker = run_chunker(opts, &model_config, res);
  let label = chunker.label();
  let current = match opened {
    // Chunks counted by another counter: rebuilt once, as a new store (vectors carried over, keyed
    // by chunk content); the new manifest records this counter, so the next run is incremental.
    Some(gen) if gen.manifest.chunker != label => {
      emit(opts, "mirror", format!("chunk sizes now counted by {label}: rebuilding"), None, None);
      // Not kept in the process's cache while the new store is built.
      super::manifest::forget_store(&gen.dir);
      None
    }
    other => other,
  };
  opts.cancel.check().map_err(pre)?;
  if opts.removals_only && current.is_none() {
    // Nothing published (or it would be rebuilt): nothing to remove, and nothing is built.
    emit(opts, "mirror", "removals only: no published index of this format to remove pages from", None, None);
    return Ok(());
  }
  // Cancellation is not a failure of the store (no last-error.json); anything else after the
  // scan started is.
  let classify = |e: Error| if matches!(e, Error::Cancelled) { pre(e) } else { post(e) };
  let threads = threads(opts);
  // The pages to look at: a changed-paths hint's (incremental runs trusting stat only), else a
  // walk of the whole vault.
  let hinted = match (&current, &opts.changed_paths) {
    (Some(gen), Some(hints)) if opts.scope == Scope::Changed => {
      match resolve_hints(paths, hints, &gen.manifest, res) {
        Hinted::Pages { files, gone } => Some((files, gone)),
        Hinted::Walk(why) => {
          emit(opts, "mirror", format!("walking the vault: {why}"), None, None);
          None
        }
      }
    }
    _ => None,
  };
  let (mut files, coverage) = match hinted {
    Some((files, gone)) => (files, Coverage::Hinted { gone }),
    None => {
      let discovery = discover_pages(&paths.root, &paths.wiki);
      for d in &discovery.diagnostics {
        res.warnings.push(IndexIssue::new(&d.code, d.message.clone()).at(d.path.clone()));
      }
      (discovery.files, Coverage::Walk { unreadable: discovery.unreadable })
    }
  };

  // A hinted run reports the page-level lint of the pages it changed; the whole-vault lint
  // (the link graph of every page, O(vault)) is left to runs that walk the vault.
  let hinted_run = matches!(coverage, Coverage::Hinted { .. });
  // The generation stays open for the vector phase when this run commits nothing.
  let unchanged: Option<Generation> = match current {
    Some(mut gen) => {
      // An indexing thread per changed page at most: a one-page commit flushes one writer thread.
      let mut sink = Sink::new(&gen.lexical, threads.min(files.len().max(1)), true);
      let mut scan =
        scan_pages(&files, paths.page_model(), coverage, Some(&gen.manifest), opts, &chunker, &mut sink, res)
          .map_err(classify)?;
      release_files(files);
      if scan.nothing() {
        drop(sink);
        res.generation = gen.generation();
        res.chunks.total = super::manifest::counts_of(&gen.manifest).chunks;
        if !hinted_run {
          res.warnings.extend(crate::memory::graph::lint_issues_cached(&gen.dir.dir, &gen.manifest));
        }
        // Repair a state file left behind by a crash between commit and state write.
        if gen.state.as_ref().is_none_or(|s| s.generation != gen.generation()) {
          let tally = Tally::of(&gen.manifest);
          write_state(&gen.dir, &gen.manifest, &tally, &gen.commit, &gen.store_id()).map_err(post)?;
          remember_tally(&gen.dir, tally);
        }
        Some(gen)
      } else {
        let next = gen.generation() + 1;
        let commit =
          CommitInfo { generation: next, manifest_generation: next, vectors: gen.commit.vectors.clone() };
        // The previous generation's manifest, changed in place by this run's record (copied
        // only when a reader of this process shares it).
        super::manifest::forget_store(&gen.dir);
        let prior = std::mem::replace(&mut gen.manifest, Arc::new(Manifest::empty(&vault_id)));
        let mut manifest = Arc::try_unwrap(prior).unwrap_or_else(|shared| (*shared).clone());
        let prior_pos = manifest.journal;
        let base = manifest.generation;
        scan.delta.generation = next;
        scan.delta.built_at_ms = now_ms();
        // Counts and hash of the new generation, from the previous one's and this record.
        let tally = tally_of(&gen.dir, &manifest).advance(&manifest, &scan.delta);
        manifest.apply(&scan.delta);
        let delta = Some((prior_pos, &scan.delta));
        commit_generation(&mut sink, &gen.dir, &mut manifest, delta, &commit, opts, None::<fn(&Manifest)>)
          .map_err(classify)?;
        drop(sink);
        release_after_large_run(res);
        let counts = tally.counts();
        res.chunks.total = counts.chunks;
        // The whole-vault lint follows the commit page by page when this process holds the
        // previous generation's (a hinted run only keeps it current, never builds it).
        if hinted_run {
          res.warnings.extend(crate::memory::graph::page_lint_issues(&scan.delta.set));
          crate::memory::graph::advance_lint(&gen.dir.dir, base, &scan.delta, &manifest, false);
        } else {
          res.warnings.extend(crate::memory::graph::lint_issues_after(
            &gen.dir.dir,
            base,
            &scan.delta,
            &manifest,
          ));
        }
        write_state(&gen.dir, &manifest, &tally, &commit, &gen.store_id()).map_err(post)?;
        remember_tally(&gen.dir, tally);
        crash_point("after-state");
        gc_manifests(&gen.dir, &[gen.commit.manifest_generation, next]);
        super::manifest::remember_committed(&gen.dir, Arc::new(manifest), counts);
        res.generation = next;
        None
      }
    }
    None => {
      res.full_rebuild = true;
      let name = new_store_name();
      let staging = layout.store_dir(&name);
      let mut built = || -> Result<u64> {
        emit(opts, "copy", "building a fresh index in a new store directory", None, None);
        // The store being replaced: its vectors are keyed by chunk content, so a forced lexical
        // rebuild keeps them unless vectors are forced too; generations continue above it.
        let replaced = layout.current().map(Replaced::read);
        let first = replaced.as_ref().map_or(0, Replaced::last_generation) + 1;
        let lexical = LexicalIndex::create(&staging.lexical_dir())?;
        let carried = match replaced {
          Some(Replaced { dir, commit: Some(commit), state })
            if !(opts.force && components.contains(&Component::Vectors)) =>
          {
            super::embedding::carry_vectors(&dir, commit, state.as_ref(), &staging, &vault_id)
          }
          _ => None,
        };
        let mut sink = Sink::new(&lexical, threads, false);
        sink.spill = (files.len() >= spill_from_pages())
          .then(|| EntrySpill::create(staging.dir.join(SPILL_FILE)))
          .transpose()?;
        let scan = scan_pages(
          &files,
          paths.page_model(),
          Coverage::Walk { unreadable: Default::default() },
          None,
          opts,
          &chunker,
          &mut sink,
          res,
        )?;
        // Not needed past the scan: freed before the manifest comes back and the lint runs.
        release_files(std::mem::take(&mut files));
        let commit = CommitInfo { generation: first, manifest_generation: first, vectors: carried };
        let mut manifest = Manifest {
          version: super::manifest::MANIFEST_VERSION,
          vault_id: vault_id.clone(),
          generation: first,
          built_at_ms: now_ms(),
          entries: scan.delta.set,
          excluded: scan.delta.xset,
          chunker: label.clone(),
          journal: JournalPos::default(),
        };
        // The whole-vault lint and the counts are computed while the manifest is written (the
        // longest serial steps of a large build's end, docs/DECISIONS.md).
        let lint_and_tally = |m: &Manifest| {
          rayon::join(|| crate::memory::graph::lint_issues_cached(&staging.dir, m), || Tally::of(m))
        };
        let (lint, tally) =
          commit_generation(&mut sink, &staging, &mut manifest, None, &commit, opts, Some(lint_and_tally))?
            .expect("a job beside the write gives its result");
        drop(sink);
        release_after_large_run(res);
        res.warnings.extend(lint);
        let store_id = name.strip_prefix("store-").unwrap_or(&name);
        let counts = tally.counts();
        res.chunks.total = counts.chunks;
        write_state(&staging, &manifest, &tally, &commit, store_id)?;
        drop(lexical);
        // Validation opens the manifest through the writer's cache: one copy of a whole vault's
        // manifest in memory, not a second one parsed back from disk.
        super::manifest::remember_committed(&staging, Arc::new(manifest), counts);
        emit(opts, "validate", "validating the new index", None, None);
        // Fault injection of the tests only: the staged manifest loses a page here, so the
        // counts disagree and validation must refuse the store (never compiled in a shipped build).
        #[cfg(any(test, feature = "test-hooks"))]
        if staged_manifest_fault(paths) {
          generation::drop_first_manifest_entry(&staging, first)?;
        }
        generation::validate(&staging)?;
        opts.cancel.check()?;
        crash_point("before-swap");
        emit(opts, "swap", "publishing the new index", None, None);
        swap::promote(layout, &name)?;
        remember_tally(&staging, tally);
        emit(opts, "swap", "swap: done", None, None);
        Ok(first)
      };
      match built() {
        Ok(first) => res.generation = first,
        Err(e) => {
          super::manifest::forget_store(&staging);
          let _ = remove_dir_all_if_exists(&staging.dir);
          return Err(classify(e));
        }
      }
      None
    }
  };
  if components.contains(&Component::Vectors) && !opts.removals_only {
    super::embedding::vector_phase(paths, layout, opts, &chunker, unchanged, &model_config, res)
      .map_err(classify)?;
  }
  let _ = std::fs::remove_file(layout.last_error_file());
  Ok(())
}

/// Which vault a multi-vault reindex targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VaultTarget {
  /// The vault given.
  #[default]
  Active,
  /// The user's personal vault.
  Personal,
  /// The project vault (the given one unless it is the personal vault).
  Project,
  /// Every distinct vault of the above.
  All,
}

impl VaultTarget {
  /// Parse `active`, `personal`, `project` or `all`.
  pub fn parse(s: &str) -> Result<Self> {
    match s {
      "active" => Ok(VaultTarget::Active),
      "personal" => Ok(VaultTarget::Personal),
      "project" => Ok(VaultTarget::Project),
      "all" => Ok(VaultTarget::All),
      o => Err(Error::invalid(format!("unknown vault '{o}' (expected active | personal | project | all)"))),
    }
  }
  /// The target's name.
  pub fn as_str(self) -> &'static str {
    match self {
      VaultTarget::Active => "active",
      VaultTarget::Personal => "personal",
      VaultTarget::Project => "project",
      VaultTarget::All => "all",
    }
  }
}

/// Vaults a target resolves to, with their labels, de-duplicated by root.
pub fn resolve_targets(active: &VaultPaths, target: VaultTarget) -> Vec<(VaultPaths, &'static str)> {
  let active_is_personal = is_personal_vault(active);
  let personal = personal_vault_paths();
  let mut out: Vec<(VaultPaths, &'static str)> = Vec::new();
  match target {
    VaultTarget::Active => out.push((active.clone(), if active_is_personal { "personal" } else { "active" })),
    VaultTarget::Personal => out.push((personal, "personal")),
    VaultTarget::Project => {
      if !active_is_personal {
        out.push((active.clone(), "project"))
      }
    }
    VaultTarget::All => {
      if !active_is_personal {
        out.push((active.clone(), "project"));
      }
      out.push((personal, "personal"));
    }
  }
  let mut seen = HashSet::new();
  out.retain(|(p, _)| seen.insert(p.root.clone()));
  out
}

/// Check that a vault exists and has a usable knowledge format before writing to it.
fn inspect_writable(paths: &VaultPaths) -> std::result::Result<(), IndexIssue> {
  if !paths.dot_wiki.is_dir() {
    // The client's code and wording (its tests match them), then what a plain folder needs.
    return Err(IndexIssue::new(
      "config_invalid_knowledge_format",
      format!(
        "Wiki vault not found. Run wiki_bootstrap first (a pi-llm-wiki vault), or `llm-wiki-retrieval init {}` (JS: initVault) for a plain folder of notes.",
        paths.root.display()
      ),
    ));
  }
  if let Ok(config) = read_config(paths) {
    if let Some(f) = config.get("knowledge_format") {
      if !matches!(f.as_str(), Some("legacy") | Some("okf-0.2")) {
        return Err(IndexIssue::new(
          "config_invalid_knowledge_format",
          format!("Unsupported knowledge_format {f}; expected \"legacy\" or \"okf-0.2\""),
        ));
      }
    }
  }
  Ok(())
}

/// Reindex the vaults selected by `target`, sequentially; one failure does not stop the others.
pub fn reindex_wiki(active: &VaultPaths, target: VaultTarget, opts: &ReindexOptions) -> WikiReindexResult {
  let mut results = Vec::new();
  for (paths, label) in resolve_targets(active, target) {
    let root = paths.root.to_string_lossy().into_owned();
    let progress: Option<ProgressSink> = opts.progress.clone().map(|p| {
      let root = root.clone();
      Arc::new(move |mut ev: Progress| {
        ev.vault = Some(root.clone());
        p(ev)
      }) as ProgressSink
    });
    let scoped = ReindexOptions { progress, ..opts.clone() };
    let result = match inspect_writable(&paths) {
      Err(issue) => {
        let mut r = base_result(opts, &dedup_components(&opts.components));
        r.status = IndexStatus::blocked(&issue);
        r.errors.push(issue);
        r
      }
      Ok(()) => reindex_vault(&paths, &scoped),
    };
    results.push(VaultReindexResult { root, label, result });
  }
  WikiReindexResult { vault: target.as_str().to_string(), results }
}

#[cfg(test)]
mod tests {
  use super::*;

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
    let live = generation::Generation::open_live(&layout).unwrap();
    assert_eq!(live.generation(), first.generation);
    drop(live);
    let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 5 };
    let answer = recall_wiki(&p, "zstango", &RecallOptions::new(policy, RetrievalMode::Lexical)).unwrap();
    assert_eq!(answer.results.first().map(|x| x.id.as_str()), Some("concepts/s1"));
    let recovered = super::super::recover::recover_index(&p);
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
      crate::testkit::write_page(
        &p,
        &format!("topics/walk{i}"),
        &format!("U{i}"),
        &format!("Body zt{word}."),
      );
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
      assert_eq!(r.status.counts.total_documents, 6);
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
    assert_eq!(
      (r.documents.indexed, r.documents.updated, r.documents.removed),
      (1, 1, 0),
      "{:?}",
      r.documents
    );
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
      let policy =
        RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 5 };
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
    assert_eq!(failed.status.counts.total_documents, 6);
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
    let loads = || super::super::manifest::LOADS.with(|n| n.get());
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
      let opts = ReindexOptions {
        components: vec![Component::Lexical],
        threads: 2,
        force: true,
        ..Default::default()
      };
      let r = reindex_vault(&p, &opts);
      SPILL_FROM_OVERRIDE.with(|o| o.set(None));
      assert!(r.ok && r.full_rebuild, "{:?}", r.errors);
      assert_eq!(r.documents.indexed, 40);
      let store = StoreLayout::new(p.retrieval()).current().expect("a published store");
      assert!(!store.dir.join(SPILL_FILE).exists(), "a spill file was left in the store");
      super::super::manifest::forget_store(&store);
      let m = Manifest::load(&store.manifest_file(r.generation), None).unwrap();
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
    super::super::manifest::forget_store(&store);
    let loads = || super::super::manifest::LOADS.with(|n| n.get());
    let before = loads();
    for _ in 0..2 {
      let r = reindex_vault(&p, &opts);
      assert!(r.ok && !r.full_rebuild, "{:?}", r.errors);
      assert_eq!(r.documents.unchanged + r.documents.indexed, 20, "{:?}", r.documents);
    }
    assert_eq!(loads(), before + 1, "each no-op parsed the manifest");
    let status = || crate::store::status::read_index_status(&p);
    assert_eq!(status().counts.total_documents, 20);
    assert_eq!(loads(), before + 1, "status parsed the manifest again");
    // Status does read the manifest: without the shared copy it parses one.
    super::super::manifest::forget_store(&store);
    assert_eq!(status().counts.total_documents, 20);
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
    assert_eq!(r.status.state, super::super::IndexState::Ready, "{:?}", r.status.issues);
    for scope in [Scope::Changed, Scope::All] {
      let again = reindex_vault(&p, &ReindexOptions { scope, ..opts.clone() });
      assert!(again.ok, "{:?}", again.errors);
      assert_eq!(again.warnings.iter().filter(|w| w.code == "page_index_panic").count(), 1);
      assert_eq!(again.status.counts.total_documents, 39);
    }
  }
}
