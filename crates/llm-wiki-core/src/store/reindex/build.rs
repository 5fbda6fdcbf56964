//! Building: each page read, compared with the previous generation and, when changed, parsed,
//! chunked and written into the lexical index as the scan streams past ([`scan_pages`]); the
//! manifest change the scan decides is what [`super::commit`] publishes.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use rayon::prelude::*;

use super::plan::{emit, match_by_id, threads, Coverage};
use crate::chunk::{ChunkedPage, Chunker};
use crate::error::{Error, Result};
use crate::store::job::{ReindexOptions, ReindexResult};
use crate::store::lexical::LexicalIndex;
use crate::store::manifest::{ChunkIds, ExcludedEntry, Manifest, ManifestDelta, ManifestEntry};
use crate::store::spill::EntrySpill;
use crate::store::swap::crash_point;
use crate::store::{IndexIssue, Scope};
use crate::util::hash::sha256_hex;
use crate::vault::read::MAX_PAGE_BYTES;
use crate::vault::{Diagnostic, Page, PageFile, PageModel};

/// Files modified this close to (or after) the last build are re-hashed even when size and mtime
/// match, because a same-second edit can leave mtime unchanged on coarse filesystems.
const RACY_WINDOW_MS: i64 = 2_000;
/// Pages parsed per batch between cancellation checks and progress events.
const BATCH: usize = 256;
/// Pages indexed between two returns of freed memory to the system ([`release_freed_memory`]).
/// Not fitted: each return took 2–12 ms in the 100k-page build, ten of them well under 0.1 % of it.
pub(super) const RELEASE_EVERY_PAGES: u32 = 10_000;
/// A full build of at least this many pages keeps its manifest entries in a file until its
/// writer has flushed ([`crate::store::spill`]). Not fitted: below it the entries (≈ 2.2 KB per page)
/// are a few tens of MB, less than the spill's write and parse are worth.
pub(super) const SPILL_FROM_PAGES: usize = 10_000;

#[cfg(test)]
thread_local! {
  /// A lower threshold for the tests of this thread (so small vaults exercise the spill).
  pub(super) static SPILL_FROM_OVERRIDE: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

pub(super) fn spill_from_pages() -> usize {
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
pub(super) fn release_freed_memory() {
  #[cfg(all(target_os = "linux", target_env = "gnu"))]
  // SAFETY: malloc_trim only hands free pages of the heap back to the kernel; it takes the
  // arenas' locks like any allocation and may be called from any thread.
  unsafe {
    libc::malloc_trim(0);
  }
}

/// How one discovered page compares with the previous generation.
pub(super) enum Loaded {
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

/// What the previous generation recorded for one file, and when it was built.
#[derive(Clone, Copy)]
pub(super) struct Before<'a> {
  entry: Option<&'a Arc<ManifestEntry>>,
  excluded: Option<&'a ExcludedEntry>,
  /// The previous generation's build time (none for a first build).
  built_at_ms: Option<i64>,
}

/// [`load_one`] with a panic turned into the page's diagnostic (`page_index_panic`): a bug hit
/// by one page must not take the others down or pair them with the wrong results.
pub(super) fn load_guarded(
  file: &PageFile,
  before: Before,
  trust_stat: bool,
  chunker: &Chunker,
  model: PageModel,
) -> Loaded {
  match std::panic::catch_unwind(AssertUnwindSafe(|| load_one(file, before, trust_stat, chunker, model))) {
    Ok(loaded) => loaded,
    Err(payload) => {
      let what = crate::error::panic_message(payload.as_ref());
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
  super::tests::panic_hook(&file.id);
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
  let read = || super::tests::read_fault(file).map_or_else(read, Err);
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
pub(super) struct Sink<'a> {
  pub(super) lexical: &'a LexicalIndex,
  writer: Option<tantivy::IndexWriter>,
  threads: usize,
  /// An incremental run over an existing index ([`LexicalIndex::writer`], which merges only small
  /// segments); otherwise a full rebuild ([`LexicalIndex::cold_writer`]).
  incremental: bool,
  /// Where a large full build writes its manifest entries until the commit ([`crate::store::spill`]);
  /// `None`: they are held in the run's delta.
  pub(super) spill: Option<EntrySpill>,
}

impl<'a> Sink<'a> {
  pub(super) fn new(lexical: &'a LexicalIndex, threads: usize, incremental: bool) -> Self {
    Sink { lexical, writer: None, threads, incremental, spill: None }
  }

  /// The index and its writer (opened now if needed).
  pub(super) fn writer(&mut self) -> Result<(&LexicalIndex, &tantivy::IndexWriter)> {
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
  pub(super) fn commit(&mut self, before_commit: impl FnOnce() -> Result<()>) -> Result<()> {
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
  pub(super) fn rollback(&mut self) {
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

/// What a scan of the pages decided (page contents are indexed as they stream past): the change
/// to the previous generation's manifest (for a first index, every page).
pub(super) struct Scan {
  pub(super) delta: ManifestDelta,
}

impl Scan {
  pub(super) fn nothing(&self) -> bool {
    self.delta.is_empty()
  }
}

/// Read every page in parallel batches and stream changed ones into the sink, so memory holds
/// one batch of parsed pages at a time (a 100k-page vault never sits in memory at once). Pages
/// are loaded by an ordered parallel map, so results stay paired with their files whatever a page
/// does. Cancellation is checked between batches.
#[allow(clippy::too_many_arguments)]
pub(super) fn scan_pages(
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
    for ((file, loaded), before) in batch.iter().zip(loaded).zip(before) {
      if record_page(file, loaded, before, opts, sink, &mut scan.delta, res)? {
        indexed_since_release += 1;
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
    remove_unmet(m, &coverage, gone_entries, gone_excluded, sink, &mut scan.delta, res)?;
  }
  // Pages left as they were: those of the previous generation neither updated nor removed.
  let before = prior.map_or(0, |m| m.entries.len()) as u32;
  res.documents.unchanged = before.saturating_sub(res.documents.removed + res.documents.updated);
  Ok(scan)
}

/// Record what loading `file` found: its entry or exclusion in `delta`, its chunks in the sink,
/// its warnings and counts in `res`. True when the page was (re)indexed.
fn record_page(
  file: &PageFile,
  loaded: Loaded,
  before: &Before,
  opts: &ReindexOptions,
  sink: &mut Sink,
  delta: &mut ManifestDelta,
  res: &mut ReindexResult,
) -> Result<bool> {
  let prev = before.entry;
  let was_excluded = before.excluded;
  if was_excluded.is_some() && !matches!(loaded, Loaded::Invalid(_) | Loaded::Unreadable(_)) {
    delta.xdel.push(file.id.clone());
  }
  match loaded {
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
      return Ok(true);
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
        remove_page(sink, &file.id, p.chunks.len(), delta, res)?;
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
        remove_page(sink, &file.id, p.chunks.len(), delta, res)?;
      }
    }
  }
  Ok(false)
}

/// Take the indexed page `id` (of `chunks` chunks) out of the index and the manifest.
fn remove_page(
  sink: &mut Sink,
  id: &str,
  chunks: usize,
  delta: &mut ManifestDelta,
  res: &mut ReindexResult,
) -> Result<()> {
  let (lexical, w) = sink.writer()?;
  lexical.delete_page(w, id);
  res.chunks.removed += chunks as u32;
  res.documents.removed += 1;
  delta.del.push(id.to_string());
  Ok(())
}

/// Remove the pages of `prior` the scan did not meet (`gone_entries`, `gone_excluded`) as far as
/// its `coverage` accounts for them.
fn remove_unmet(
  prior: &Manifest,
  coverage: &Coverage,
  gone_entries: Vec<&String>,
  gone_excluded: Vec<&String>,
  sink: &mut Sink,
  delta: &mut ManifestDelta,
  res: &mut ReindexResult,
) -> Result<()> {
  let (gone_pages, gone_excluded): (Vec<&String>, Vec<&String>) = match coverage {
    // Pages in a place the walk could not read are not gone: they stay as they were.
    Coverage::Walk { unreadable } if !unreadable.is_empty() => (
      gone_entries.into_iter().filter(|k| !unreadable.covers(k)).collect(),
      gone_excluded.into_iter().filter(|k| !unreadable.covers(k)).collect(),
    ),
    Coverage::Walk { .. } => (gone_entries, gone_excluded),
    Coverage::Hinted { gone } => (
      gone.iter().filter(|k| prior.entries.contains_key(*k)).collect(),
      gone.iter().filter(|k| prior.excluded.contains_key(*k)).collect(),
    ),
  };
  for id in gone_pages {
    remove_page(sink, id, prior.entries[id].chunks.len(), delta, res)?;
  }
  delta.xdel.extend(gone_excluded.into_iter().cloned());
  delta.del.sort_unstable();
  delta.del.dedup();
  delta.xdel.sort_unstable();
  delta.xdel.dedup();
  Ok(())
}

/// Frees the scanned files: a vault's worth (a walk's) on the global pool, off this run's path.
pub(super) fn release_files(files: Vec<PageFile>) {
  if files.len() >= 10_000 {
    crate::pool::drop_later(files);
  }
}
