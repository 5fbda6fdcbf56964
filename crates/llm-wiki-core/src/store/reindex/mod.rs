//! Reindex of one vault and of the contract's vault targets (active / personal / project / all).
//!
//! Incremental updates happen in place: changed pages are deleted and re-added in the tantivy
//! index and the new manifest generation is written *before* the single tantivy commit that
//! publishes it. A full rebuild (forced, first index, format change) is built in a new store
//! directory and published by replacing `CURRENT` (see `swap.rs`). Cancellation is checked
//! between batches; a cancelled run commits nothing, so the last good index stays intact. Every
//! tantivy writer is closed with `wait_merging_threads` before the run returns: nothing of a
//! reindex writes into the store after it returned.
//!
//! A run is planned ([`plan`]: the store it updates, the pages it looks at), built ([`build`]:
//! pages read, compared and streamed into the lexical index) and committed ([`commit`]: the
//! manifest change and the tantivy commit, or a new store published).

mod build;
mod commit;
mod plan;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use build::{release_files, scan_pages, spill_from_pages, Sink};
use commit::{commit_new_store, commit_update, keep_generation, publish, Replaced};
use plan::{current_store, emit, pages_to_scan, threads, Coverage};

use super::generation::Generation;
pub use super::job::{
  ChunkCounts, DocumentCounts, ReindexOptions, ReindexResult, VaultReindexResult, VectorCounts,
  WikiReindexResult,
};
use super::layout::{new_store_name, StoreLayout};
use super::lexical::{CommitInfo, LexicalIndex};
use super::lock;
use super::spill::{EntrySpill, SPILL_FILE};
use super::status::{read_index_status_with, IndexStatus, StatusOptions};
use super::swap::{self, crash_point};
use super::{Component, IndexIssue, ProgressSink, ReindexProgressEvent};
use crate::chunk::Chunker;
use crate::error::{Error, Result};
use crate::fsutil::{now_iso, remove_dir_all_if_exists, write_json};
use crate::util::num::sat_i64;
use crate::vault::config::{ensure_vault_id, read_config};
use crate::vault::paths::{is_personal_vault, personal_vault_paths};
use crate::vault::{PageFile, VaultPaths};

pub use crate::vault::read::MAX_PAGE_BYTES;

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

/// A failure before the scan started: the store is as it was (no `last-error.json`).
fn before_scan(e: Error) -> (Error, bool) {
  (e, false)
}

/// A failure once the scan started is one of the store, except cancellation.
fn after_scan(e: Error) -> (Error, bool) {
  let after = !matches!(e, Error::Cancelled);
  (e, after)
}

/// One run with the store lock held: plan, build, commit, then the vector phase.
fn run_locked(
  paths: &VaultPaths,
  layout: &StoreLayout,
  opts: &ReindexOptions,
  components: &[Component],
  res: &mut ReindexResult,
) -> LockedOutcome {
  // Leftovers of an interrupted rebuild (or an old store another process still had mapped).
  swap::collect_garbage(layout);
  opts.cancel.check().map_err(before_scan)?;
  emit(opts, "mirror", "resolving vault identity", None, None);
  let vault_id = ensure_vault_id(paths).map_err(before_scan)?;
  res.vault_id = Some(vault_id.clone());
  let (current, chunker, model_config) = current_store(paths, layout, opts, components, &vault_id, res);
  opts.cancel.check().map_err(before_scan)?;
  if opts.removals_only && current.is_none() {
    // Nothing published (or it would be rebuilt): nothing to remove, and nothing is built.
    emit(opts, "mirror", "removals only: no published index of this format to remove pages from", None, None);
    return Ok(());
  }
  let (files, coverage) = pages_to_scan(paths, opts, current.as_ref(), res);
  // The generation stays open for the vector phase when this run commits nothing.
  let unchanged: Option<Generation> = match current {
    Some(gen) => update_in_place(paths, gen, files, coverage, opts, &chunker, res).map_err(after_scan)?,
    None => {
      rebuild(paths, layout, opts, components, &vault_id, &chunker, files, res).map_err(after_scan)?;
      None
    }
  };
  if components.contains(&Component::Vectors) && !opts.removals_only {
    super::embedding::vector_phase(paths, layout, opts, &chunker, unchanged, &model_config, res)
      .map_err(after_scan)?;
  }
  let _ = std::fs::remove_file(layout.last_error_file());
  Ok(())
}

/// An incremental run over the published generation `gen`: changed pages are deleted and re-added
/// in its lexical index and committed as its next generation. Returns `gen` when the run changed
/// nothing (it stays open for the vector phase).
fn update_in_place(
  paths: &VaultPaths,
  mut gen: Generation,
  files: Vec<PageFile>,
  coverage: Coverage,
  opts: &ReindexOptions,
  chunker: &Chunker,
  res: &mut ReindexResult,
) -> Result<Option<Generation>> {
  // A hinted run reports the page-level lint of the pages it changed; the whole-vault lint
  // (the link graph of every page, O(vault)) is left to runs that walk the vault.
  let hinted_run = matches!(coverage, Coverage::Hinted { .. });
  // An indexing thread per changed page at most: a one-page commit flushes one writer thread.
  let mut sink = Sink::new(&gen.lexical, threads(opts).min(files.len().max(1)), true);
  let scan =
    scan_pages(&files, paths.page_model(), coverage, Some(&gen.manifest), opts, chunker, &mut sink, res)?;
  release_files(files);
  if scan.nothing() {
    drop(sink);
    keep_generation(&gen, hinted_run, res)?;
    return Ok(Some(gen));
  }
  let store_id = gen.store_id();
  commit_update(sink, scan, &gen.dir, &gen.commit, &mut gen.manifest, &store_id, hinted_run, opts, res)?;
  Ok(None)
}

/// A full rebuild, in a new store directory published by the swap; a failed one leaves nothing
/// behind.
#[allow(clippy::too_many_arguments)]
fn rebuild(
  paths: &VaultPaths,
  layout: &StoreLayout,
  opts: &ReindexOptions,
  components: &[Component],
  vault_id: &str,
  chunker: &Chunker,
  files: Vec<PageFile>,
  res: &mut ReindexResult,
) -> Result<()> {
  res.full_rebuild = true;
  let name = new_store_name();
  let staging = layout.store_dir(&name);
  match build_new_store(paths, layout, opts, components, vault_id, chunker, files, &name, res) {
    Ok(first) => res.generation = sat_i64(first),
    Err(e) => {
      super::manifest::forget_store(&staging);
      let _ = remove_dir_all_if_exists(&staging.dir);
      return Err(e);
    }
  }
  Ok(())
}

/// Build the new store `name` from every page of `files` and publish it; returns its first
/// generation, numbered above the store it replaces.
#[allow(clippy::too_many_arguments)]
fn build_new_store(
  paths: &VaultPaths,
  layout: &StoreLayout,
  opts: &ReindexOptions,
  components: &[Component],
  vault_id: &str,
  chunker: &Chunker,
  mut files: Vec<PageFile>,
  name: &str,
  res: &mut ReindexResult,
) -> Result<u64> {
  let staging = layout.store_dir(name);
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
      super::embedding::carry_vectors(&dir, commit, state.as_ref(), &staging, vault_id)
    }
    _ => None,
  };
  let mut sink = Sink::new(&lexical, threads(opts), false);
  sink.spill = (files.len() >= spill_from_pages())
    .then(|| EntrySpill::create(staging.dir.join(SPILL_FILE)))
    .transpose()?;
  let walk = Coverage::Walk { unreadable: Default::default() };
  let scan = scan_pages(&files, paths.page_model(), walk, None, opts, chunker, &mut sink, res)?;
  // Not needed past the scan: freed before the manifest comes back and the lint runs.
  release_files(std::mem::take(&mut files));
  let commit = CommitInfo { generation: first, manifest_generation: first, vectors: carried };
  let (manifest, tally) =
    commit_new_store(sink, scan, &staging, name, &commit, vault_id, chunker.label(), opts, res)?;
  drop(lexical);
  publish(paths, layout, &staging, name, manifest, tally, opts)?;
  Ok(first)
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
      Arc::new(move |mut ev: ReindexProgressEvent| {
        ev.vault = root.clone();
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
