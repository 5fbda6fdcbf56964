//! The vector phase of a reindex: embed the live chunks that have no vector for the current
//! embedding model, committing them in batches so a cancelled or failed run keeps what it
//! finished.
//!
//! Costs are bounded per batch: chunk texts are streamed page by page (one batch of texts in
//! memory, never every missing chunk's), and a batch commit writes one segment file plus one
//! tantivy commit whose commit document lists the segments — the page manifest is not
//! rewritten and no segment is reopened or rescanned. Segments are merged as they accumulate
//! (each kept more than twice the size of the next newer one, so there are O(log n) of them),
//! the segments a run wrote end up merged into one, and a compaction drops superseded and dead
//! rows when they dominate.

use std::collections::btree_map;
use std::collections::{HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;

use super::ann::{self, AnnMode, AnnRef, REBUILD_FRACTION};
use super::generation::Generation;
use super::job::{ReindexOptions, ReindexResult};
use super::layout::{StoreDir, StoreLayout};
use super::lexical::CommitInfo;
use super::manifest::{Manifest, ManifestEntry};
use super::state::{StateFile, StateModels, StateVectors};
use super::swap::crash_point;
use super::vectors::{chunk_key, merge_segments, write_segment, SegmentRef, VectorIndex, VectorManifest};
use super::{Component, IndexIssue, Progress, ReindexProgressEvent};
use crate::chunk::Chunker;
use crate::error::{Error, Result};
use crate::fsutil::sync_dir;
use crate::models::{self, TextKind};
use crate::util::num::{sat_i64, sat_u32};
use crate::vault::{Page, PageModel, VaultPaths};

/// Most chunks embedded per committed batch.
pub const VECTOR_COMMIT_BATCH: usize = 512;
/// Fewest chunks per committed batch (the first batch, and the floor on slow machines).
const MIN_COMMIT_BATCH: usize = 32;
/// Embedding time a batch aims at: what a crash or a cancellation can throw away. At 512 chunks a
/// batch took 45 s on one busy inference thread (the crash harness measured ~11 chunks/s), so a
/// kill lost up to that much work; commits are cheap next to it (one small segment, one tantivy
/// commit of the commit document).
const COMMIT_INTERVAL_SECS: f64 = 8.0;

/// Size of the next committed batch after `rows` chunks took `elapsed`: about
/// [`COMMIT_INTERVAL_SECS`] of work, within [`MIN_COMMIT_BATCH`, `VECTOR_COMMIT_BATCH`].
fn next_commit_batch(rows: usize, elapsed: std::time::Duration) -> usize {
  let rate = rows as f64 / elapsed.as_secs_f64().max(1e-3);
  ((rate * COMMIT_INTERVAL_SECS) as usize).clamp(MIN_COMMIT_BATCH, VECTOR_COMMIT_BATCH)
}

/// A newer segment is merged into the one before it once that one is no more than this many
/// times larger.
const MERGE_RATIO: u32 = 2;

fn emit(opts: &ReindexOptions, message: &str, current: u64, total: u64) {
  if let Some(p) = &opts.progress {
    p(ReindexProgressEvent {
      vault: String::new(),
      progress: Progress {
        stage: "vectors",
        message: message.to_string(),
        current: Some(sat_u32(current)),
        total: Some(sat_u32(total)),
      },
    });
  }
}

/// Give a new store directory the vector segments of the store it replaces (a forced lexical
/// rebuild keeps vectors: they are keyed by chunk content, and so is a rebuild after a change of
/// the index format, which leaves the chunks and their ids as they were). The replaced store's
/// commit is read by field name, so a store of an older format gives its vectors too. Segments
/// are immutable, so they are hard-linked where the filesystem allows and copied otherwise.
/// `commit` is the replaced store's last commit ([`super::lexical::LexicalIndex::commit_in`]),
/// `state` its state file when readable.
pub fn carry_vectors(
  from: &StoreDir,
  commit: CommitInfo,
  state: Option<&super::state::StateFile>,
  to: &StoreDir,
  vault_id: &str,
) -> Option<VectorManifest> {
  // The store's vault, from the state file of that commit; without one, from its manifest
  // (parsed for that field and dropped, not cached while the new store is built).
  let vault = match state {
    Some(s) if s.manifest_generation == commit.manifest_generation => s.vault_id.clone(),
    _ => Manifest::load_generation(from, commit.manifest_generation, None).ok()?.vault_id,
  };
  if vault != vault_id {
    return None;
  }
  let vm = commit.vectors?;
  std::fs::create_dir_all(to.vectors_dir()).ok()?;
  let files = vm.segments.iter().map(|s| &s.file).chain(vm.ann.iter().map(|a| &a.file));
  for file in files {
    let (src, dst) = (from.vectors_dir().join(file), to.vectors_dir().join(file));
    if std::fs::hard_link(&src, &dst).is_err() {
      let copied = std::fs::File::create(&dst).and_then(|mut out| {
        std::io::copy(&mut std::fs::File::open(&src)?, &mut out).and_then(|_| out.sync_all())
      });
      copied.ok()?;
    }
  }
  sync_dir(&to.vectors_dir());
  Some(vm)
}

/// The texts of the chunks that need a vector, read page by page as batches are asked for: memory
/// holds one batch and one page, whatever the vault's size. Pages are re-chunked with the
/// reindex's chunking (chunk ids depend on it) from the vault's own `wiki` directory; a page
/// edited since the lexical phase is left for the next reindex.
pub struct ChunkTexts<'a> {
  pages: btree_map::Iter<'a, String, Arc<ManifestEntry>>,
  wanted: &'a HashSet<u64>,
  wiki: &'a Path,
  chunker: &'a Chunker,
  /// How the pages are read (a plain folder's notes need no frontmatter).
  model: PageModel,
  ready: VecDeque<(u64, String)>,
  seen: HashSet<u64>,
  pages_read: usize,
}

impl<'a> ChunkTexts<'a> {
  /// Texts of the `wanted` chunks of `manifest`, re-chunked from the pages under `wiki` with `chunker`.
  pub fn new(manifest: &'a Manifest, wanted: &'a HashSet<u64>, wiki: &'a Path, chunker: &'a Chunker) -> Self {
    ChunkTexts {
      pages: manifest.entries.iter(),
      wanted,
      wiki,
      chunker,
      model: PageModel::Wiki,
      ready: VecDeque::new(),
      seen: HashSet::new(),
      pages_read: 0,
    }
  }

  /// Read the pages under `model` (default [`PageModel::Wiki`]).
  pub fn with_model(mut self, model: PageModel) -> Self {
    self.model = model;
    self
  }

  /// Pages read so far.
  pub fn pages_read(&self) -> usize {
    self.pages_read
  }

  /// Up to `max` (chunk key, embedding text) pairs; empty when every wanted chunk was produced.
  pub fn next_batch(&mut self, max: usize) -> Vec<(u64, String)> {
    while self.ready.len() < max {
      let Some((id, entry)) = self.pages.next() else { break };
      if entry.chunks.keys().any(|k| self.wanted.contains(&k)) {
        self.read_page(id, entry);
      }
    }
    let n = self.ready.len().min(max);
    self.ready.drain(..n).collect()
  }

  fn read_page(&mut self, id: &str, entry: &ManifestEntry) {
    self.pages_read += 1;
    let path = crate::vault::discover::resolve_page_file(self.wiki, &entry.rel_path);
    let Ok(bytes) = crate::vault::read::read_page_at(self.wiki, &path, crate::vault::read::MAX_PAGE_BYTES)
    else {
      return;
    };
    if crate::util::hash::sha256_hex(&bytes) != entry.content_hash {
      return;
    }
    let Ok(page) = Page::parse_as(self.model, id, path, &String::from_utf8_lossy(&bytes)) else { return };
    for c in self.chunker.chunk(&page.meta.title, &page.body, page.body_start_line).chunks {
      let key = chunk_key(&c.id);
      if self.wanted.contains(&key) && self.seen.insert(key) {
        self.ready.push_back((key, c.embedding_text()));
      }
    }
  }
}

/// Commits of vector batches into one store directory, with the state they need kept across
/// batches: one tantivy writer, the current segment list, the previous commit's files (a reader
/// may still use them) and the vector count.
struct VectorWriter<'g> {
  gen: &'g Generation,
  writer: Option<tantivy::IndexWriter>,
  /// The last commit (its segments are the current list).
  commit: CommitInfo,
  /// Segment files of the commit before `commit`.
  previous_files: HashSet<String>,
  model: String,
  dims: usize,
  store_id: String,
  /// Live chunks with a vector.
  embedded: u32,
  /// Newest segments written by this run (merged into one at the end).
  written: usize,
  live: &'g HashSet<u64>,
  /// The ANN file the next commit lists (kept across batches: it stays valid, see `store::ann`).
  ann: Option<AnnRef>,
}

impl<'g> VectorWriter<'g> {
  fn new(gen: &'g Generation, live: &'g HashSet<u64>, model: (&str, usize), embedded: u32) -> Result<Self> {
    let writer = Some(gen.lexical.writer(1)?);
    let previous_files = files_of(&gen.commit);
    // Files of interrupted runs (written, never committed) go before new ones are written.
    gc_segments(&gen.dir.vectors_dir(), &previous_files);
    let ann = gen
      .commit
      .vectors
      .as_ref()
      .filter(|v| v.model == model.0 && v.dims == model.1)
      .and_then(|v| v.ann.clone());
    Ok(VectorWriter {
      gen,
      writer,
      commit: gen.commit.clone(),
      previous_files,
      model: model.0.to_string(),
      dims: model.1,
      store_id: gen.store_id(),
      embedded,
      written: 0,
      live,
      ann,
    })
  }

  /// Start from no vectors (another model, or a forced rebuild).
  fn reset(&mut self) {
    self.commit.vectors = None;
    self.ann = None;
  }

  fn segments(&self) -> Vec<SegmentRef> {
    match &self.commit.vectors {
      Some(vm) if vm.model == self.model && vm.dims == self.dims => vm.segments.clone(),
      _ => Vec::new(),
    }
  }

  fn dir(&self) -> std::path::PathBuf {
    self.gen.dir.vectors_dir()
  }

  /// Publish `segments` as the next commit: commit document, tantivy commit, state file, then
  /// removal of the segment files neither this commit nor the previous one lists.
  fn publish(&mut self, segments: Vec<SegmentRef>) -> Result<u64> {
    let next = self.commit.generation + 1;
    let vectors =
      VectorManifest { model: self.model.clone(), dims: self.dims, segments, ann: self.ann.clone() };
    let has_vectors = !vectors.segments.is_empty();
    let commit = CommitInfo {
      generation: next,
      manifest_generation: self.commit.manifest_generation,
      vectors: Some(vectors),
    };
    let writer = self.writer.as_mut().expect("open until finish");
    self.gen.lexical.set_commit(writer, &commit)?;
    crash_point("vectors-before-commit");
    if let Err(e) = writer.prepare_commit().and_then(|p| p.commit()) {
      let _ = writer.rollback();
      return Err(e.into());
    }
    let models = StateModels { embed: self.model.clone() };
    let counts = StateVectors {
      embedded: self.embedded,
      missing: self.live.len() as u32 - self.embedded,
      has_index: has_vectors,
    };
    StateFile::describe(&self.gen.manifest, next, &self.store_id, models, counts).write(&self.gen.dir)?;
    self.previous_files = files_of(&self.commit);
    self.commit = commit;
    // A reader may have taken the previous commit a moment ago: its files stay until the next.
    let keep: HashSet<String> = files_of(&self.commit).union(&self.previous_files).cloned().collect();
    gc_segments(&self.dir(), &keep);
    Ok(next)
  }

  /// Merge the newest `n` segments of `segments` into one (dropping dead and superseded rows).
  fn merge_tail(&self, segments: &mut Vec<SegmentRef>, n: usize, tag: &str) -> Result<()> {
    let at = segments.len() - n;
    let name = format!("seg-{}-{tag}.vec", self.commit.generation + 1);
    let live = self.live;
    let merged = merge_segments(&self.dir(), &segments[at..], self.dims, &name, &|id| live.contains(&id))?;
    segments.truncate(at);
    segments.push(merged);
    Ok(())
  }

  /// Keep each segment more than [`MERGE_RATIO`] times the size of the next newer one.
  fn merge_by_size(&mut self, segments: &mut Vec<SegmentRef>) -> Result<()> {
    let mut k = 0;
    while let [.., older, newer] = segments.as_slice() {
      if older.rows > MERGE_RATIO * newer.rows.max(1) {
        break;
      }
      self.merge_tail(segments, 2, &format!("m{k}"))?;
      k += 1;
      // A merge with an older segment keeps one segment of this run at the tail.
      self.written = self.written.saturating_sub(1).max(1);
    }
    Ok(())
  }

  /// Add a segment of freshly embedded rows and commit.
  fn add(&mut self, rows: &[(u64, Vec<f32>)]) -> Result<u64> {
    let mut segments = self.segments();
    let name = format!("seg-{}.vec", self.commit.generation + 1);
    segments.push(write_segment(&self.dir(), &name, self.dims, rows)?);
    self.written += 1;
    self.embedded += rows.len() as u32;
    self.merge_by_size(&mut segments)?;
    self.publish(segments)
  }

  /// Rewrite every segment into one without dead or superseded rows, and commit.
  fn compact(&mut self) -> Result<u64> {
    let mut segments = self.segments();
    let n = segments.len();
    self.merge_tail(&mut segments, n, "compact")?;
    self.publish(segments)
  }

  /// Build (or rebuild, or drop) the ANN index as `mode` wants for the current vectors, and
  /// commit the change. Rebuilt when rows added since its build plus rows no longer live exceed
  /// [`REBUILD_FRACTION`] of it, or when it is missing or unusable (corrupt, another model).
  fn maintain_ann(&mut self, mode: AnnMode) -> Result<()> {
    let segments = self.segments();
    let vm = VectorManifest {
      model: self.model.clone(),
      dims: self.dims,
      segments: segments.clone(),
      ann: self.ann.clone(),
    };
    let idx = VectorIndex::open_with(&self.dir(), &vm, self.live, AnnMode::On)?;
    match ann_action(&idx, self.ann.is_some(), mode) {
      AnnAction::Keep => return Ok(()),
      AnnAction::Drop => self.ann = None,
      AnnAction::Build => {
        let name = format!("ann-{}.ann", self.commit.generation + 1);
        self.ann = Some(ann::build(&self.dir(), &name, &self.model, self.dims, &idx.live_row_data())?);
      }
    }
    drop(idx);
    crash_point("ann-before-commit");
    self.publish(segments)?;
    Ok(())
  }

  /// Merge what this run wrote into one segment, then close the writer once its merges are done.
  /// Returns the generation of the last commit.
  fn finish(mut self) -> Result<u64> {
    if self.written > 1 {
      let mut segments = self.segments();
      let n = self.written.min(segments.len());
      self.merge_tail(&mut segments, n, "run")?;
      self.written = 1;
      self.merge_by_size(&mut segments)?;
      self.publish(segments)?;
    }
    self.maintain_ann(AnnMode::from_env())?;
    if let Some(w) = self.writer.take() {
      w.wait_merging_threads()?;
    }
    // Only the live segments stay on disk; a recall that still opens an older commit's vectors
    // finds them gone and retakes its snapshot (see `recall.rs`).
    gc_segments(&self.dir(), &files_of(&self.commit));
    Ok(self.commit.generation)
  }
}

impl Drop for VectorWriter<'_> {
  /// A failed or cancelled run: its committed batches stay; nothing keeps running.
  fn drop(&mut self) {
    if let Some(mut w) = self.writer.take() {
      let _ = w.rollback();
      let _ = w.wait_merging_threads();
    }
  }
}

/// What the vector phase does with the ANN index of `idx` (opened with [`AnnMode::On`]).
#[derive(Debug, PartialEq, Eq)]
enum AnnAction {
  Keep,
  Build,
  Drop,
}

fn ann_action(idx: &VectorIndex, listed: bool, mode: AnnMode) -> AnnAction {
  if !mode.wanted(idx.live_rows()) {
    return if listed { AnnAction::Drop } else { AnnAction::Keep };
  }
  match idx.ann_staleness() {
    Some((delta, dead, rows)) if (delta + dead) as f64 <= REBUILD_FRACTION * rows as f64 => AnnAction::Keep,
    _ => AnnAction::Build,
  }
}

fn files_of(commit: &CommitInfo) -> HashSet<String> {
  let ann = commit.vectors.iter().flat_map(|v| v.ann.iter().map(|a| a.file.clone()));
  commit.vectors.iter().flat_map(|v| v.segments.iter().map(|s| s.file.clone())).chain(ann).collect()
}

/// Remove segment and ANN files (and temp files of interrupted writes) not in `keep`. A file another
/// process still has mapped may resist removal on Windows; a later collection retries it.
fn gc_segments(dir: &Path, keep: &HashSet<String>) {
  for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
    let name = e.file_name().to_string_lossy().into_owned();
    let ours = name.ends_with(".vec")
      || (name.starts_with(".seg-") && name.contains(".vec.tmp-"))
      || ann::is_ann_name(&name)
      || (name.starts_with(".ann-") && name.contains(".ann.tmp-"));
    if ours && !keep.contains(&name) {
      let _ = std::fs::remove_file(e.path());
    }
  }
}

/// Embed what is missing in the live store. Unavailable models are a warning (lexical keeps
/// working). `current` is the generation the lexical phase left open when it committed nothing
/// (saves reopening it); otherwise the live one is opened here.
pub fn vector_phase(
  paths: &VaultPaths,
  layout: &StoreLayout,
  opts: &ReindexOptions,
  chunker: &Chunker,
  current: Option<Generation>,
  model_config: &models::ModelConfig,
  res: &mut ReindexResult,
) -> Result<()> {
  // Missing models are a warning: the lexical index is up to date and recall degrades to it.
  let unavailable = |res: &mut ReindexResult, e: &Error| -> Result<()> {
    res.warnings.push(IndexIssue::new(
      "vectors_unavailable",
      format!("vectors were not updated: {e}; recall uses the lexical index"),
    ));
    Ok(())
  };
  // Identify the model from its manifest; it is only loaded when there is something to embed.
  let model = match models::resolve_embed_dir(model_config).map(|d| models::ModelDir::open(&d)) {
    Some(Ok(m)) => m.manifest,
    Some(Err(e)) => return unavailable(res, &e),
    None => return unavailable(res, &Error::ModelUnavailable("no embedding model configured".into())),
  };
  let (model_id, dims) = (model.id.as_str(), model.dims);
  let gen = match current {
    Some(g) => g,
    None => {
      let dir = layout.current().ok_or_else(|| Error::Index("the store has no live directory".into()))?;
      Generation::open(dir)?
    }
  };
  let live = gen.manifest.chunk_keys();
  let force = opts.force && opts.components.contains(&Component::Vectors);
  let compatible: Option<&VectorManifest> =
    gen.commit.vectors.as_ref().filter(|v| v.model == model_id && v.dims == dims && !force);
  let (present, stored, ann_due) = match compatible {
    Some(vm) => {
      let idx = VectorIndex::open_with(&gen.dir.vectors_dir(), vm, &live, AnnMode::On)?;
      let due = ann_action(&idx, vm.ann.is_some(), AnnMode::from_env()) != AnnAction::Keep;
      (idx.present().clone(), idx.stored_rows(), due)
    }
    None => (HashSet::new(), 0, false),
  };
  let missing: HashSet<u64> = live.difference(&present).copied().collect();
  res.vectors.skipped = present.len() as u32;
  let compact = compatible.is_some() && stored > 256 && stored > 2 * present.len();
  let model_changed = compatible.is_none() && gen.commit.vectors.is_some();
  if missing.is_empty() && !compact && !model_changed {
    if ann_due {
      // Only the ANN index needs work: no model load.
      let vw = VectorWriter::new(&gen, &live, (model_id, dims), present.len() as u32)?;
      res.generation = sat_i64(vw.finish()?);
    }
    return Ok(());
  }
  let embedder = match models::document_embedder_with(model_config) {
    Ok(e) => e,
    Err(e @ (Error::ModelUnavailable(_) | Error::RuntimeUnavailable(_))) => return unavailable(res, &e),
    Err(e) => return Err(e),
  };
  let model = (embedder.id(), embedder.dims());
  // A compatible list is continued; anything else (no vectors, another model, forced) starts empty.
  let mut vw = VectorWriter::new(&gen, &live, model, present.len() as u32)?;
  if model_changed {
    vw.reset();
  }
  if compact {
    // Most stored rows are dead or superseded: one rewrite before adding new rows.
    vw.compact()?;
  }
  if missing.is_empty() {
    if model_changed {
      // Nothing is live: publish an empty vector list for the new model.
      vw.publish(Vec::new())?;
    }
    res.generation = sat_i64(vw.finish()?);
    return Ok(());
  }
  let mut texts =
    ChunkTexts::new(&gen.manifest, &missing, &paths.wiki, chunker).with_model(paths.page_model());
  let total = missing.len() as u64;
  emit(opts, "embedding chunks", 0, total);
  let mut done = 0u64;
  let mut batch_size = MIN_COMMIT_BATCH;
  loop {
    opts.cancel.check()?;
    let mut batch = texts.next_batch(batch_size);
    if batch.is_empty() {
      break;
    }
    let started = std::time::Instant::now();
    // Inference pads each batch to its longest text: embedding similar lengths together wastes
    // less compute on padding. Rows are keyed by chunk, so their order in a segment is free.
    batch.sort_by_key(|(_, t)| t.len());
    let (keys, strings): (Vec<u64>, Vec<String>) = batch.into_iter().unzip();
    let base = done;
    let vecs = embedder.embed(&strings, TextKind::Document, &opts.cancel, &mut |n| {
      emit(opts, "embedding chunks", base + n as u64, total)
    })?;
    let rows: Vec<(u64, Vec<f32>)> = keys.into_iter().zip(vecs).collect();
    vw.add(&rows)?;
    batch_size = next_commit_batch(rows.len(), started.elapsed());
    done += rows.len() as u64;
    res.vectors.generated += rows.len() as u32;
  }
  res.generation = sat_i64(vw.finish()?);
  Ok(())
}

/// Give every live chunk of the vault's store that has no vector for `model` (id, dims) the
/// vector `make(chunk key)`, through the same writer as the vector phase: segments of at most
/// `batch` rows, size-ratio merges, one commit per segment, the run's segments merged at the end.
/// Takes the store's writer lock. Benchmarks use it to give a large store its real number of
/// vectors without embedding every chunk (`bench vectors-scale`); vectors stored this way are
/// only as meaningful as `make`. Returns the number of vectors written.
pub fn install_vectors(
  paths: &VaultPaths,
  model: (&str, usize),
  batch: usize,
  make: &mut dyn FnMut(u64) -> Vec<f32>,
) -> Result<u64> {
  let layout = StoreLayout::new(paths.retrieval());
  let _lock = super::lock::acquire(&layout)?;
  let dir = layout.current().ok_or_else(|| Error::Index("the store has no live directory".into()))?;
  let gen = Generation::open(dir)?;
  let live = gen.manifest.chunk_keys();
  let compatible = gen.commit.vectors.as_ref().filter(|v| v.model == model.0 && v.dims == model.1);
  let present = match compatible {
    Some(vm) => VectorIndex::open(&gen.dir.vectors_dir(), vm, &live)?.present().clone(),
    None => HashSet::new(),
  };
  let mut missing: Vec<u64> = live.difference(&present).copied().collect();
  missing.sort_unstable();
  let mut vw = VectorWriter::new(&gen, &live, model, present.len() as u32)?;
  if compatible.is_none() {
    vw.reset();
  }
  for keys in missing.chunks(batch.max(1)) {
    let rows: Vec<(u64, Vec<f32>)> = keys.iter().map(|&k| (k, make(k))).collect();
    vw.add(&rows)?;
  }
  vw.finish()?;
  Ok(missing.len() as u64)
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::chunk::{chunk_page, ChunkConfig};
  use crate::store::manifest::ChunkIds;
  use crate::util::hash::sha256_hex;
  use crate::vault::{PageMeta, Role};

  /// A manifest of `n` pages with `sections` sections each, written under `wiki`.
  fn pages(wiki: &Path, n: usize, sections: usize, chunking: &ChunkConfig) -> Manifest {
    let mut m = Manifest::empty("v");
    for i in 0..n {
      let id = format!("p{i:03}");
      let body: String = (0..sections)
        .map(|s| {
          format!("# H{s}\n\nPage {i} section {s} text. It has a second sentence. And a third one here.\n\n")
        })
        .collect();
      let text = format!("---\ntype: concept\ntitle: P{i}\n---\n{body}");
      std::fs::write(wiki.join(format!("{id}.md")), &text).unwrap();
      let page = Page::parse(&id, wiki.join(format!("{id}.md")), &text).unwrap();
      let chunks = chunk_page(&page.meta.title, &page.body, page.body_start_line, chunking);
      m.entries.insert(
        id.clone(),
        ManifestEntry {
          rel_path: format!("{id}.md"),
          size: text.len() as u64,
          mtime_ns: 0,
          content_hash: sha256_hex(text.as_bytes()),
          role: Role::Canonical,
          meta: Box::new(PageMeta {
            title: format!("P{i}"),
            page_type: "concept".into(),
            ..Default::default()
          }),
          sections: chunks.sections.len() as u32,
          chunks: ChunkIds::from_ids(chunks.chunks.iter().map(|c| c.id.as_str())),
          links: Default::default(),
        }
        .into(),
      );
    }
    m
  }

  #[test]
  fn chunk_texts_are_read_page_by_page_as_batches_are_asked_for() {
    let t = tempfile::tempdir().unwrap();
    let cfg = ChunkConfig::default();
    let m = pages(t.path(), 50, 3, &cfg);
    let wanted = m.chunk_keys();
    assert_eq!(wanted.len(), 150);
    let chunker = Chunker::estimate(cfg);
    let mut texts = ChunkTexts::new(&m, &wanted, t.path(), &chunker);
    let first = texts.next_batch(4);
    assert_eq!(first.len(), 4);
    // Two pages of three chunks fill a batch of four: the other 48 pages are not read yet.
    assert_eq!(texts.pages_read(), 2);
    let mut all: HashSet<u64> = first.iter().map(|(k, _)| *k).collect();
    loop {
      let b = texts.next_batch(4);
      if b.is_empty() {
        break;
      }
      assert!(b.len() <= 4);
      all.extend(b.iter().map(|(k, _)| *k));
    }
    assert_eq!(all, wanted, "every wanted chunk exactly once");
    assert_eq!(texts.pages_read(), 50);
  }

  #[test]
  fn installed_vectors_go_through_the_segment_writer_and_are_searchable() {
    let (_t, paths) = crate::testkit::temp_vault();
    for i in 0..40 {
      let body = format!("Page {i} about topic {i}. Second sentence here.");
      crate::testkit::write_page(&paths, &format!("p{i:02}"), &format!("P{i}"), &body);
    }
    let opts = ReindexOptions { components: vec![Component::Lexical], ..Default::default() };
    assert!(super::super::reindex_vault(&paths, &opts).ok);
    let gen = Generation::open_live(&StoreLayout::new(paths.retrieval())).unwrap();
    let live = gen.manifest.chunk_keys();
    // 64 pseudo-random components per chunk (xorshift from the key): two chunks' vectors are far
    // from parallel (cosine ~ N(0, 1/8)), so each chunk's own vector is its nearest by a wide margin.
    let dims = 64;
    let make = |k: u64| -> Vec<f32> {
      let mut x = k | 1;
      (0..dims)
        .map(|_| {
          x ^= x << 13;
          x ^= x >> 7;
          x ^= x << 17;
          (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
    };
    // Batches of 7 rows: several segments, merged as the writer goes and at the end.
    let n = install_vectors(&paths, ("test-model", dims), 7, &mut |k| make(k)).unwrap();
    assert_eq!(n as usize, live.len());
    let gen = Generation::open_live(&StoreLayout::new(paths.retrieval())).unwrap();
    let vm = gen.commit.vectors.clone().unwrap();
    assert_eq!((vm.model.as_str(), vm.dims), ("test-model", dims));
    assert_eq!(vm.segments.len(), 1, "the run's segments are merged into one: {:?}", vm.segments);
    let idx = VectorIndex::open(&gen.dir.vectors_dir(), &vm, &live).unwrap();
    assert_eq!(idx.present(), &live);
    // Each chunk's own vector finds it first.
    for &k in live.iter().take(5) {
      let q = make(k);
      let norm = q.iter().map(|x| x * x).sum::<f32>().sqrt();
      let q: Vec<f32> = q.iter().map(|x| x / norm).collect();
      assert_eq!(idx.search(&q, 1)[0].0, k);
    }
    // Nothing left to install.
    assert_eq!(install_vectors(&paths, ("test-model", dims), 7, &mut |k| make(k)).unwrap(), 0);
  }

  #[test]
  fn commit_batches_aim_at_a_few_seconds_of_work() {
    use std::time::Duration;
    // 11 chunks/s (one busy inference thread): batches of ~88, not 512.
    assert_eq!(next_commit_batch(32, Duration::from_secs_f64(32.0 / 11.0)), 88);
    assert_eq!(next_commit_batch(512, Duration::from_millis(100)), VECTOR_COMMIT_BATCH);
    assert_eq!(next_commit_batch(32, Duration::from_secs(60)), MIN_COMMIT_BATCH);
    assert_eq!(next_commit_batch(0, Duration::ZERO), MIN_COMMIT_BATCH);
  }

  #[test]
  fn chunk_texts_skip_pages_without_wanted_chunks_and_use_the_given_chunking() {
    let t = tempfile::tempdir().unwrap();
    let small = ChunkConfig { max_tokens: 12, overlap_tokens: 1 };
    let m = pages(t.path(), 10, 2, &small);
    // Only the chunks of one page are missing.
    let wanted: HashSet<u64> = m.entries["p007"].chunks.keys().collect();
    let chunker = Chunker::estimate(small);
    let mut texts = ChunkTexts::new(&m, &wanted, t.path(), &chunker);
    let got: HashSet<u64> = texts.next_batch(100).into_iter().map(|(k, _)| k).collect();
    assert_eq!(got, wanted);
    assert_eq!(texts.pages_read(), 1);
    // With the default chunking the same pages yield other chunk ids: nothing would match.
    let default_chunker = Chunker::estimate(ChunkConfig { max_tokens: 200, overlap_tokens: 32 });
    let mut default = ChunkTexts::new(&m, &wanted, t.path(), &default_chunker);
    assert!(default.next_batch(100).is_empty());
  }
}
