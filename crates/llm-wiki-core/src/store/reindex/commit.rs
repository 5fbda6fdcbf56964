//! Committing: a run's manifest change written (one journal record, or a new base) before the
//! single tantivy commit that makes it visible; the state file; and, for a full rebuild, the
//! new store validated and published by the swap.

use std::sync::Arc;

use super::build::{release_freed_memory, Scan, Sink, RELEASE_EVERY_PAGES};
use super::plan::emit;
use crate::error::Result;
use crate::fsutil::now_ms;
use crate::store::generation;
use crate::store::job::{ReindexOptions, ReindexResult};
use crate::store::layout::{StoreDir, StoreLayout};
use crate::store::lexical::{CommitInfo, LexicalIndex};
use crate::store::manifest::{JournalPos, Manifest, ManifestDelta};
use crate::store::state::{remember_tally, tally_of, StateFile, StateModels, StateVectors, Tally};
use crate::store::swap::{self, crash_point};
use crate::util::num::sat_i64;
use crate::vault::VaultPaths;

/// Publish an incremental run's `scan` as the generation after `committed` in `dir`: the
/// previous `manifest` changed in place by the run's record (copied only when a reader of this
/// process shares it), the commit, the lint kept current, the state file, the old manifests
/// collected. A `hinted_run` reports the page-level lint of the pages it changed.
#[allow(clippy::too_many_arguments)]
pub(super) fn commit_update(
  mut sink: Sink,
  mut scan: Scan,
  dir: &StoreDir,
  committed: &CommitInfo,
  manifest: &mut Arc<Manifest>,
  store_id: &str,
  hinted_run: bool,
  opts: &ReindexOptions,
  res: &mut ReindexResult,
) -> Result<()> {
  let next = committed.generation + 1;
  let commit = CommitInfo { generation: next, manifest_generation: next, vectors: committed.vectors.clone() };
  crate::store::manifest::forget_store(dir);
  let empty = Arc::new(Manifest::empty(&manifest.vault_id));
  let prior = std::mem::replace(manifest, empty);
  let mut manifest = Arc::try_unwrap(prior).unwrap_or_else(|shared| (*shared).clone());
  let prior_pos = manifest.journal;
  let base = manifest.generation;
  scan.delta.generation = next;
  scan.delta.built_at_ms = now_ms();
  // Counts and hash of the new generation, from the previous one's and this record.
  let tally = tally_of(dir, &manifest).advance(&manifest, &scan.delta);
  manifest.apply(&scan.delta);
  let delta = Some((prior_pos, &scan.delta));
  commit_generation(&mut sink, dir, &mut manifest, delta, &commit, opts, None::<fn(&Manifest)>)?;
  drop(sink);
  release_after_large_run(res);
  let counts = tally.counts();
  res.chunks.total = counts.chunks;
  // The whole-vault lint follows the commit page by page when this process holds the
  // previous generation's (a hinted run only keeps it current, never builds it).
  if hinted_run {
    res.warnings.extend(crate::memory::graph::page_lint_issues(&scan.delta.set));
    crate::memory::graph::advance_lint(&dir.dir, base, &scan.delta, &manifest, false);
  } else {
    res.warnings.extend(crate::memory::graph::lint_issues_after(&dir.dir, base, &scan.delta, &manifest));
  }
  write_state(dir, &manifest, &tally, &commit, store_id)?;
  remember_tally(dir, tally);
  crash_point("after-state");
  gc_manifests(dir, &[committed.manifest_generation, next]);
  crate::store::manifest::remember_committed(dir, Arc::new(manifest), counts);
  res.generation = sat_i64(next);
  Ok(())
}

/// A run that changed nothing keeps the generation `gen` (its counts and, unless `hinted_run`,
/// its cached whole-vault lint are the run's) and repairs a state file left behind by a crash
/// between commit and state write.
pub(super) fn keep_generation(
  gen: &generation::Generation,
  hinted_run: bool,
  res: &mut ReindexResult,
) -> Result<()> {
  res.generation = sat_i64(gen.generation());
  res.chunks.total = crate::store::manifest::counts_of(&gen.manifest).chunks;
  if !hinted_run {
    res.warnings.extend(crate::memory::graph::lint_issues_cached(&gen.dir.dir, &gen.manifest));
  }
  if gen.state.as_ref().is_none_or(|s| s.generation != gen.generation()) {
    let tally = Tally::of(&gen.manifest);
    write_state(&gen.dir, &gen.manifest, &tally, &gen.commit, &gen.store_id())?;
    remember_tally(&gen.dir, tally);
  }
  Ok(())
}

/// Commit a full build's `scan` (its entries in the sink's spill or in the scan's record) as the
/// first generation `commit` of the new store `staging` named `name`, with the whole-vault lint
/// and the counts computed while the manifest is written; then its state file. Returns the
/// manifest and its tally for [`publish`].
#[allow(clippy::too_many_arguments)]
pub(super) fn commit_new_store(
  mut sink: Sink,
  scan: Scan,
  staging: &StoreDir,
  name: &str,
  commit: &CommitInfo,
  vault_id: &str,
  chunker: String,
  opts: &ReindexOptions,
  res: &mut ReindexResult,
) -> Result<(Manifest, Tally)> {
  let first = commit.generation;
  let mut manifest = Manifest {
    version: crate::store::manifest::MANIFEST_VERSION,
    vault_id: vault_id.to_string(),
    generation: first,
    built_at_ms: now_ms(),
    entries: scan.delta.set,
    excluded: scan.delta.xset,
    chunker,
    journal: JournalPos::default(),
  };
  // The whole-vault lint and the counts are computed while the manifest is written (the
  // longest serial steps of a large build's end, docs/DECISIONS.md).
  let lint_and_tally =
    |m: &Manifest| rayon::join(|| crate::memory::graph::lint_issues_cached(&staging.dir, m), || Tally::of(m));
  let (lint, tally) =
    commit_generation(&mut sink, staging, &mut manifest, None, commit, opts, Some(lint_and_tally))?
      .expect("a job beside the write gives its result");
  drop(sink);
  release_after_large_run(res);
  res.warnings.extend(lint);
  let store_id = name.strip_prefix("store-").unwrap_or(name);
  res.chunks.total = tally.counts().chunks;
  write_state(staging, &manifest, &tally, commit, store_id)?;
  Ok((manifest, tally))
}

/// Whether this full rebuild's staged manifest is to lose a page before validation: in unit tests
/// for a vault a test named (`tests::fail_next_staged_validation`), in `test-hooks` builds when
/// `LLM_WIKI_FAULT_AT=staged-manifest-short`.
#[cfg(any(test, feature = "test-hooks"))]
fn staged_manifest_fault(paths: &VaultPaths) -> bool {
  #[cfg(test)]
  if super::tests::take_staged_fault(&paths.root) {
    return true;
  }
  #[cfg(feature = "test-hooks")]
  if swap::fault_point("staged-manifest-short") {
    return true;
  }
  let _ = paths;
  false
}

/// Validate the new store `staging` (named `name`, its lexical index closed) and publish it by
/// the swap. Validation opens the manifest through the writer's cache: one copy of a whole
/// vault's manifest in memory, not a second one parsed back from disk.
pub(super) fn publish(
  paths: &VaultPaths,
  layout: &StoreLayout,
  staging: &StoreDir,
  name: &str,
  manifest: Manifest,
  tally: Tally,
  opts: &ReindexOptions,
) -> Result<()> {
  let first = manifest.generation;
  let counts = tally.counts();
  crate::store::manifest::remember_committed(staging, Arc::new(manifest), counts);
  emit(opts, "validate", "validating the new index", None, None);
  // Fault injection of the tests only: the staged manifest loses a page here, so the
  // counts disagree and validation must refuse the store (never compiled in a shipped build).
  #[cfg(any(test, feature = "test-hooks"))]
  if staged_manifest_fault(paths) {
    generation::drop_first_manifest_entry(staging, first)?;
  }
  #[cfg(not(any(test, feature = "test-hooks")))]
  let _ = (paths, first);
  generation::validate(staging)?;
  opts.cancel.check()?;
  crash_point("before-swap");
  emit(opts, "swap", "publishing the new index", None, None);
  swap::promote(layout, name)?;
  remember_tally(staging, tally);
  emit(opts, "swap", "swap: done", None, None);
  Ok(())
}

/// Publish what the sink holds as the commit `commit` of `dir`: `manifest` (already at the
/// commit's generation) is written first — one journal record `delta` after `prior`, or a new
/// base —, then the single tantivy commit makes it visible. A build that spilled its entries
/// (`sink.spill`) has the writer flush its segments (invisible until the commit) before they
/// are read back into `manifest` and it is written. `beside`, when given, runs on rayon's pool
/// with the complete manifest while it is written; its result is returned.
pub(super) fn commit_generation<T: Send>(
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
pub(super) struct Replaced {
  pub(super) dir: StoreDir,
  pub(super) commit: Option<CommitInfo>,
  pub(super) state: Option<StateFile>,
}

impl Replaced {
  pub(super) fn read(dir: StoreDir) -> Replaced {
    let commit = LexicalIndex::commit_in(&dir.lexical_dir()).ok().flatten();
    let state = match StateFile::read(&dir) {
      crate::fsutil::JsonFile::Valid(s) => Some(s),
      _ => None,
    };
    Replaced { dir, commit, state }
  }

  /// The last generation it committed or recorded in its state file (0 when neither can be
  /// read): a rebuild numbers its generations above it.
  pub(super) fn last_generation(&self) -> u64 {
    let committed = self.commit.as_ref().map_or(0, |c| c.generation);
    committed.max(self.state.as_ref().map_or(0, |s| s.generation))
  }
}

/// Remove the page manifests no longer needed: a reader may still hold the previous commit, so
/// the bases (and journals) the last two commits (`keep`) are read from stay.
fn gc_manifests(dir: &StoreDir, keep: &[u64]) {
  crate::store::manifest::gc_generations(dir, keep)
}

/// Write `state.json` describing `commit` over `manifest`, whose counts and hash `tally` holds
/// (vector counts from its segments).
fn write_state(
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
      let present =
        crate::store::vectors::VectorIndex::open(&dir.vectors_dir(), vm, &live)?.present().len() as u32;
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
