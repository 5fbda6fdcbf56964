//! Reindex of one vault and of the contract's vault targets (active / personal / project / all).
//!
//! Incremental updates happen in place: changed pages are deleted and re-added in the tantivy
//! index and the new manifest generation is written *before* the single tantivy commit that
//! publishes it. A full rebuild (forced, first index, format change) is built in a staging
//! directory and swapped in through the journal. Cancellation is checked between batches; a
//! cancelled run commits nothing, so the last good index stays intact.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use super::generation::{self, Generation};
use super::journal::{self, crash_point};
use super::layout::{is_real_dir, GenDir, StoreLayout};
use super::lexical::LexicalIndex;
use super::lock;
use super::manifest::{sha256_hex, ChunkIds, ExcludedEntry, Manifest, ManifestEntry};
use super::state::{StateFile, StateModels};
use super::status::{read_index_status_with, IndexStatus, StatusOptions};
use super::vectors::VectorManifest;
use super::{CancelFlag, Component, IndexIssue, Progress, ProgressSink, Scope};
use crate::chunk::{chunk_page, ChunkConfig, ChunkedPage};
use crate::error::{Error, Result};
use crate::fsutil::{now_iso, now_ms, remove_dir_all_if_exists, write_json, JsonFile};
use crate::vault::config::{ensure_vault_id, read_config};
use crate::vault::paths::{is_personal_vault, personal_vault_paths};
use crate::vault::{discover_pages, Diagnostic, Page, PageFile, VaultPaths};

/// Largest page file that is indexed; bigger files are excluded with `page_too_large`.
pub const MAX_PAGE_BYTES: u64 = 16 * 1024 * 1024;
/// Files modified this close to (or after) the last build are re-hashed even when size and mtime
/// match, because a same-second edit can leave mtime unchanged on coarse filesystems.
const RACY_WINDOW_MS: i64 = 2_000;
/// Pages parsed per batch between cancellation checks and progress events.
const BATCH: usize = 256;

/// Options of a reindex.
#[derive(Clone, Default)]
pub struct ReindexOptions {
  pub scope: Scope,
  pub components: Vec<Component>,
  pub force: bool,
  pub cancel: CancelFlag,
  pub progress: Option<ProgressSink>,
  /// Worker threads for parsing and indexing (0 = available parallelism, at most 4).
  pub threads: usize,
  pub chunking: ChunkConfig,
}

/// Page counts of a reindex (the extension's mirror counts).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DocumentCounts {
  pub indexed: u32,
  pub updated: u32,
  pub unchanged: u32,
  pub removed: u32,
}

/// Chunk documents written and deleted.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ChunkCounts {
  pub total: u32,
  pub added: u32,
  pub removed: u32,
}

/// Vector work of a reindex.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VectorCounts {
  pub generated: u32,
  pub skipped: u32,
  pub errors: u32,
}

/// Outcome of reindexing one vault.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReindexResult {
  pub ok: bool,
  pub vault_id: Option<String>,
  pub scope: Scope,
  pub components: Vec<Component>,
  pub documents: DocumentCounts,
  pub chunks: ChunkCounts,
  pub vectors: VectorCounts,
  pub elapsed_ms: f64,
  /// True when the store was rebuilt from scratch (staging + swap).
  pub full_rebuild: bool,
  /// Generation committed by this run (unchanged when nothing was committed).
  pub generation: u64,
  pub status: IndexStatus,
  pub warnings: Vec<IndexIssue>,
  pub errors: Vec<IndexIssue>,
}

/// One vault's outcome within a multi-vault reindex.
#[derive(Debug, Clone, Serialize)]
pub struct VaultReindexResult {
  pub root: String,
  /// `active`, `personal` or `project`.
  pub label: &'static str,
  pub result: ReindexResult,
}

/// Outcome of `reindexWiki`.
#[derive(Debug, Clone, Serialize)]
pub struct WikiReindexResult {
  pub vault: String,
  pub results: Vec<VaultReindexResult>,
}

/// How one discovered page compares with the previous generation.
enum Loaded {
  Unchanged(ManifestEntry),
  Changed {
    entry: ManifestEntry,
    chunks: ChunkedPage,
    is_new: bool,
    page: Box<Page>,
    warning: Option<Diagnostic>,
  },
  Invalid(Diagnostic),
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
    return opts.threads;
  }
  std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(4)
}

/// Read, hash and (when changed) parse + chunk one page file.
fn load_one(file: &PageFile, prior: Option<&Manifest>, trust_stat: bool, cfg: &ChunkConfig) -> Loaded {
  let prev = prior.and_then(|m| m.entries.get(&file.id));
  let racy = prior.is_some_and(|m| file.mtime_ns / 1_000_000 >= m.built_at_ms - RACY_WINDOW_MS);
  if trust_stat && !racy {
    if let Some(p) =
      prev.filter(|p| p.rel_path == file.rel_path && p.size == file.size && p.mtime_ns == file.mtime_ns)
    {
      return Loaded::Unchanged(p.clone());
    }
    let excluded = prior.and_then(|m| m.excluded.get(&file.id));
    if let Some(x) =
      excluded.filter(|x| x.rel_path == file.rel_path && x.size == file.size && x.mtime_ns == file.mtime_ns)
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
  let bytes = match std::fs::read(&file.abs_path) {
    Ok(b) => b,
    Err(e) => {
      return Loaded::Invalid(Diagnostic::error(
        "frontmatter_parse_error",
        &file.rel_path,
        &format!("Failed to read file: {e}"),
      ))
    }
  };
  let hash = sha256_hex(&bytes);
  if let Some(p) = prev {
    if p.content_hash == hash && p.rel_path == file.rel_path {
      return Loaded::Unchanged(ManifestEntry { size: file.size, mtime_ns: file.mtime_ns, ..p.clone() });
    }
  }
  match Page::from_file_bytes(&file.id, file.abs_path.clone(), &bytes) {
    Err(e) => Loaded::Invalid(Diagnostic::from_frontmatter(&file.rel_path, &e)),
    Ok((page, warning)) => {
      let chunks = chunk_page(&page.meta.title, &page.body, page.body_start_line, cfg);
      let entry = ManifestEntry {
        rel_path: file.rel_path.clone(),
        size: file.size,
        mtime_ns: file.mtime_ns,
        content_hash: hash,
        role: page.role,
        meta: page.meta.clone(),
        sections: chunks.sections.len() as u32,
        chunks: ChunkIds::from_ids(chunks.chunks.iter().map(|c| c.id.as_str())),
      };
      let warning = warning.map(|w| Diagnostic::from_frontmatter(&file.rel_path, &w));
      Loaded::Changed { entry, chunks, is_new: prev.is_none(), page: Box::new(page), warning }
    }
  }
}

/// Where a run writes: the lexical index of the target generation, with its writer opened on the
/// first change (a run that changes nothing never takes tantivy's writer lock).
struct Sink<'a> {
  lexical: &'a LexicalIndex,
  writer: Option<tantivy::IndexWriter>,
  threads: usize,
}

impl Sink<'_> {
  /// The index and its writer (opened now if needed).
  fn writer(&mut self) -> Result<(&LexicalIndex, &tantivy::IndexWriter)> {
    if self.writer.is_none() {
      self.writer = Some(self.lexical.writer(self.threads)?);
    }
    Ok((self.lexical, self.writer.as_ref().expect("opened above")))
  }

  /// Drop uncommitted changes (cancel / failure): the last commit stays the visible state.
  fn rollback(&mut self) {
    if let Some(mut w) = self.writer.take() {
      let _ = w.rollback();
    }
  }
}

/// What a scan of the pages decided (page contents are indexed as they stream past).
struct Scan {
  entries: BTreeMap<String, ManifestEntry>,
  excluded: BTreeMap<String, ExcludedEntry>,
  /// Pages added or re-indexed.
  changed: usize,
  removed: usize,
  /// Only sizes/mtimes or the excluded set changed: a new manifest, no index change.
  metadata_only: bool,
}

impl Scan {
  fn nothing(&self) -> bool {
    self.changed == 0 && self.removed == 0 && !self.metadata_only
  }
}

/// Read every page in parallel batches and stream changed ones into the sink, so memory holds
/// one batch of parsed pages at a time (a 100k-page vault never sits in memory at once).
/// Cancellation is checked between batches.
fn scan_pages(
  files: &[PageFile],
  prior: Option<&Manifest>,
  opts: &ReindexOptions,
  sink: &mut Sink,
  res: &mut ReindexResult,
) -> Result<Scan> {
  let trust_stat = opts.scope == Scope::Changed;
  let n_threads = threads(opts);
  let total = files.len() as u64;
  emit(opts, "mirror", "comparing pages with the index", Some(0), Some(total));
  let mut scan = Scan {
    entries: BTreeMap::new(),
    excluded: BTreeMap::new(),
    changed: 0,
    removed: 0,
    metadata_only: false,
  };
  for (b, batch) in files.chunks(BATCH * n_threads).enumerate() {
    opts.cancel.check()?;
    let per = batch.len().div_ceil(n_threads).max(1);
    let loaded: Vec<Loaded> = std::thread::scope(|s| {
      let handles: Vec<_> = batch
        .chunks(per)
        .map(|part| {
          s.spawn(move || {
            part.iter().map(|f| load_one(f, prior, trust_stat, &opts.chunking)).collect::<Vec<_>>()
          })
        })
        .collect();
      handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    });
    for (file, l) in batch.iter().zip(loaded) {
      let prev = prior.and_then(|m| m.entries.get(&file.id));
      match l {
        Loaded::Unchanged(e) => {
          if prev.is_some_and(|p| p.size != e.size || p.mtime_ns != e.mtime_ns) {
            scan.metadata_only = true;
          }
          res.documents.unchanged += 1;
          scan.entries.insert(file.id.clone(), e);
        }
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
          scan.changed += 1;
          scan.entries.insert(file.id.clone(), entry);
        }
        Loaded::Invalid(d) => {
          res.warnings.push(IndexIssue::new(&d.code, d.message.clone()).at(d.path.clone()));
          let x = ExcludedEntry {
            rel_path: file.rel_path.clone(),
            size: file.size,
            mtime_ns: file.mtime_ns,
            diagnostic: d,
          };
          scan.excluded.insert(file.id.clone(), x);
        }
      }
    }
    let done = ((b + 1) * BATCH * n_threads).min(files.len()) as u64;
    emit(opts, "lexical", "indexing pages", Some(done), Some(total));
  }
  if let Some(m) = prior {
    if m.excluded != scan.excluded {
      scan.metadata_only = true;
    }
    let removed: Vec<&String> = m.entries.keys().filter(|k| !scan.entries.contains_key(*k)).collect();
    for id in &removed {
      let (lexical, w) = sink.writer()?;
      lexical.delete_page(w, id);
      res.chunks.removed += m.entries[*id].chunks.len() as u32;
    }
    scan.removed = removed.len();
    res.documents.removed = removed.len() as u32;
  }
  Ok(scan)
}

/// The committed current generation, if it opens cleanly and matches this engine and vault.
fn open_current(layout: &StoreLayout, vault_id: &str) -> Option<Generation> {
  let gen = Generation::open(layout.current()).ok()?;
  let state = gen.state.as_ref()?;
  (state.is_current_format() && gen.manifest.vault_id == vault_id).then_some(gen)
}

/// First generation of a full rebuild: above every generation the store has used, so warm
/// readers in other processes (which cache by generation) never mistake the new store for the
/// old one.
fn next_full_generation(layout: &StoreLayout) -> u64 {
  let mut max = 0;
  for dir in [layout.current(), layout.previous()] {
    if let JsonFile::Valid(s) = StateFile::read(&dir) {
      max = max.max(s.generation);
    }
    max = max.max(dir.manifest_generations().last().copied().unwrap_or(0));
  }
  max + 1
}

/// Identity of the generation a write produces.
struct GenTarget<'a> {
  vault_id: &'a str,
  generation: u64,
  /// Vectors carried into the new generation unchanged.
  vectors: Option<&'a VectorManifest>,
}

/// Publish what the sink holds as generation `target.generation` of `dir`: the manifest is
/// written first, then the single tantivy commit makes it visible.
fn commit_generation(
  sink: &mut Sink,
  dir: &GenDir,
  scan: Scan,
  target: GenTarget,
  opts: &ReindexOptions,
) -> Result<Manifest> {
  let gen = target.generation;
  let result = (|| {
    let (lexical, w) = sink.writer()?;
    lexical.set_generation(w, gen)?;
    let manifest = Manifest {
      version: super::manifest::MANIFEST_VERSION,
      vault_id: target.vault_id.to_string(),
      generation: gen,
      built_at_ms: now_ms(),
      entries: scan.entries,
      excluded: scan.excluded,
      vectors: target.vectors.cloned(),
    };
    manifest.save(&dir.manifest_file(gen))?;
    opts.cancel.check()?;
    crash_point("before-commit");
    let writer = sink.writer.as_mut().expect("opened by set_generation");
    writer.prepare_commit()?.commit()?;
    crash_point("after-commit");
    Ok(manifest)
  })();
  if result.is_err() {
    sink.rollback();
    let _ = std::fs::remove_file(dir.manifest_file(gen));
  }
  result
}

/// Remove manifests older than the previous generation (readers may still hold `gen - 1`).
pub(crate) fn gc_manifests(dir: &GenDir, gen: u64) {
  for g in dir.manifest_generations() {
    if g + 1 < gen || g > gen {
      let _ = std::fs::remove_file(dir.manifest_file(g));
    }
  }
}

/// Write `state.json` describing `manifest` (vector counts from the manifest's vectors).
pub(crate) fn write_state(dir: &GenDir, manifest: &Manifest, store_id: &str) -> Result<()> {
  let (models, counts) = match &manifest.vectors {
    Some(vm) => {
      let live = manifest.chunk_keys();
      let present = super::vectors::VectorIndex::open(&dir.vectors_dir(), vm, &live)?.present().len() as u32;
      (StateModels { embed: vm.model.clone() }, (present, !vm.segments.is_empty()))
    }
    None => (StateModels::default(), (0, false)),
  };
  StateFile::describe(manifest, store_id, models, counts).write(dir)
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
  let mutex = lock::vault_mutex(&paths.root);
  let guard = mutex.lock().unwrap_or_else(|p| p.into_inner());
  let outcome = match lock::acquire(&layout.lock_dir()) {
    Err(e) => Err((e, false)),
    Ok(_store_lock) => run_locked(paths, &layout, opts, &components, &mut res),
  };
  drop(guard);
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

fn run_locked(
  paths: &VaultPaths,
  layout: &StoreLayout,
  opts: &ReindexOptions,
  components: &[Component],
  res: &mut ReindexResult,
) -> LockedOutcome {
  let pre = |e: Error| (e, false);
  let post = |e: Error| (e, true);
  res.warnings.extend(journal::recover(layout, &generation::validate).map_err(pre)?);
  opts.cancel.check().map_err(pre)?;
  emit(opts, "mirror", "resolving vault identity", None, None);
  let vault_id = ensure_vault_id(paths).map_err(pre)?;
  res.vault_id = Some(vault_id.clone());

  let discovery = discover_pages(&paths.root, &paths.wiki);
  for d in &discovery.diagnostics {
    res.warnings.push(IndexIssue::new(&d.code, d.message.clone()).at(d.path.clone()));
  }
  let force_lexical = opts.force && components.contains(&Component::Lexical);
  let current = if force_lexical { None } else { open_current(layout, &vault_id) };
  opts.cancel.check().map_err(pre)?;
  // Cancellation is not a failure of the store (no last-error.json); anything else after the
  // scan started is.
  let classify = |e: Error| if matches!(e, Error::Cancelled) { pre(e) } else { post(e) };
  let threads = threads(opts);

  // The generation stays open for the vector phase when this run commits nothing.
  let unchanged: Option<Generation> = match current {
    Some(gen) => {
      let prior = gen.manifest.clone();
      let mut sink = Sink { lexical: &gen.lexical, writer: None, threads };
      let scan = match scan_pages(&discovery.files, Some(&prior), opts, &mut sink, res) {
        Ok(scan) => scan,
        Err(e) => {
          sink.rollback();
          return Err(classify(e));
        }
      };
      if scan.nothing() {
        drop(sink);
        res.generation = gen.generation;
        res.chunks.total = gen.manifest.total_chunks();
        // Repair a state file left behind by a crash between commit and state write.
        if gen.state.as_ref().is_none_or(|s| s.generation != gen.generation) {
          let store_id = gen.state.as_ref().map(|s| s.store_id.clone()).unwrap_or_else(new_store_id);
          write_state(&gen.dir, &gen.manifest, &store_id).map_err(post)?;
        }
        Some(gen)
      } else {
        let next = gen.generation + 1;
        let store_id = gen.state.as_ref().map(|s| s.store_id.clone()).unwrap_or_else(new_store_id);
        let target = GenTarget { vault_id: &vault_id, generation: next, vectors: prior.vectors.as_ref() };
        let manifest = commit_generation(&mut sink, &gen.dir, scan, target, opts).map_err(classify)?;
        drop(sink);
        res.chunks.total = manifest.total_chunks();
        write_state(&gen.dir, &manifest, &store_id).map_err(post)?;
        crash_point("after-state");
        gc_manifests(&gen.dir, next);
        super::bump_epoch(&layout.dir);
        res.generation = next;
        None
      }
    }
    None => {
      res.full_rebuild = true;
      let staging_name = format!("staging-{}", uuid::Uuid::new_v4());
      let staging = layout.staging(&staging_name);
      let mut built = || -> Result<()> {
        emit(opts, "copy", "building a fresh index in staging", None, None);
        let lexical = LexicalIndex::create(&staging.lexical_dir())?;
        let store_id = new_store_id();
        // Vectors are keyed by chunk content: a forced lexical rebuild keeps them unless vectors
        // are forced too.
        let carried = if opts.force && components.contains(&Component::Vectors) {
          None
        } else {
          super::embedding::carry_vectors(layout, &staging, &vault_id)
        };
        let first_gen = next_full_generation(layout);
        let mut sink = Sink { lexical: &lexical, writer: None, threads };
        let scan =
          scan_pages(&discovery.files, None, opts, &mut sink, res).inspect_err(|_| sink.rollback())?;
        let target = GenTarget { vault_id: &vault_id, generation: first_gen, vectors: carried.as_ref() };
        let manifest = commit_generation(&mut sink, &staging, scan, target, opts)?;
        drop(sink);
        res.chunks.total = manifest.total_chunks();
        write_state(&staging, &manifest, &store_id)?;
        drop(lexical);
        emit(opts, "validate", "validating the new index", None, None);
        generation::validate(&staging)?;
        opts.cancel.check()?;
        crash_point("before-swap");
        super::bump_epoch(&layout.dir);
        journal::promote(layout, &staging_name, &generation::validate, &|m| {
          emit(opts, "swap", m, None, None)
        })?;
        super::bump_epoch(&layout.dir);
        Ok(())
      };
      if let Err(e) = built() {
        let _ = remove_dir_all_if_exists(&staging.dir);
        return Err(classify(e));
      }
      res.generation = next_full_generation(layout).saturating_sub(1);
      None
    }
  };
  if components.contains(&Component::Vectors) {
    super::embedding::vector_phase(layout, opts, unchanged, res).map_err(|e| {
      if matches!(e, Error::Cancelled) {
        pre(e)
      } else {
        post(e)
      }
    })?;
  }
  let _ = std::fs::remove_file(layout.last_error_file());
  Ok(())
}

fn new_store_id() -> String {
  uuid::Uuid::new_v4().to_string()
}

/// Which vault a multi-vault reindex targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VaultTarget {
  #[default]
  Active,
  Personal,
  Project,
  All,
}

impl VaultTarget {
  pub fn parse(s: &str) -> Result<Self> {
    match s {
      "active" => Ok(VaultTarget::Active),
      "personal" => Ok(VaultTarget::Personal),
      "project" => Ok(VaultTarget::Project),
      "all" => Ok(VaultTarget::All),
      o => Err(Error::invalid(format!("unknown vault '{o}' (expected active | personal | project | all)"))),
    }
  }
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
    return Err(IndexIssue::new(
      "config_invalid_knowledge_format",
      "Wiki vault not found. Run wiki_bootstrap first.",
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

/// Used by tests and benches: true when `dir` holds a store.
pub fn has_store(paths: &VaultPaths) -> bool {
  is_real_dir(&StoreLayout::new(paths.retrieval()).current().dir)
}
