//! `readIndexStatus`: the state of a vault's store from its small JSON artifacts plus a stat-only
//! scan of the pages. Never opens the index or loads a model.
//!
//! Precedence (first match wins): a malformed artifact or an unusable store → `error`; no store
//! → `missing` (`stale` when only a format-1 store exists); no valid vault identity → `error`;
//! pages changed, engine/format changed, vault identity changed, embedding model changed or a
//! failed last attempt → `stale`; otherwise `ready`. `recovering` (the contract's state for an
//! interrupted swap journal) is never reported: a swap is one atomic replace of `CURRENT`, so no
//! moment of it needs recovery before the store can be read.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::layout::{
  is_real_dir, Pointer, StoreDir, StoreLayout, ENGINE_NAME, ENGINE_VERSION, INDEX_FORMAT_VERSION,
};
use super::manifest::Manifest;
use super::state::{IndexCounts, StateFile};
use super::{Component, IndexIssue};
use crate::fsutil::{read_json, JsonFile};
use crate::vault::config::{read_config, vault_id_of};
use crate::vault::{discover_pages, VaultPaths};

/// Lifecycle state of a store.
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "lowercase", skip_typescript))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum IndexState {
  /// No index has been built.
  #[default]
  Missing,
  /// The index matches the pages and the configured models.
  Ready,
  /// Pages or models changed since the last index.
  Stale,
  /// A reindex was interrupted; the next one repairs it.
  Recovering,
  /// The index cannot be read.
  Error,
}

impl IndexState {
  /// The state's name.
  pub fn as_str(self) -> &'static str {
    match self {
      IndexState::Missing => "missing",
      IndexState::Ready => "ready",
      IndexState::Stale => "stale",
      IndexState::Recovering => "recovering",
      IndexState::Error => "error",
    }
  }
}

/// Model identities: resolved now (not the indexed ones).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StatusModels {
  /// Embedding model id the vault uses ("" when no dense engine is configured): chosen per
  /// vault from its pages' language, its `retrieval.embedModel` override, or the engine's
  /// `embedModel` ([`crate::models::choice`]).
  pub embed: String,
  /// Why that model (e.g. "140 of 180 identified pages (78%) of a 200-page sample are not
  /// English"; a vault override, the engine setting, or a fallback).
  pub embed_reason: String,
  /// No generative model is used; always "" (kept for the extension's shape).
  pub generate: String,
  /// Cross-encoder recall would use ("" when none).
  pub rerank: String,
}

/// Pages that differ from the indexed manifest (by path, size and mtime).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PendingPages {
  /// Pages on disk not yet indexed.
  pub added: u32,
  /// Indexed pages changed on disk.
  pub changed: u32,
  /// Indexed pages gone from disk.
  pub removed: u32,
}

/// Index status (the contract's `QmdGeneratedStatus`, §4.1, plus neutral extras).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexStatus {
  /// Overall state.
  #[cfg_attr(feature = "napi", napi(ts_type = "'missing' | 'ready' | 'stale' | 'recovering' | 'error'"))]
  pub state: IndexState,
  /// The vault's id, when its config is readable.
  pub vault_id: Option<String>,
  /// Running engine version (the field keeps its QMD-era name).
  pub qmd_version: String,
  /// Running engine version.
  pub engine_version: String,
  /// Index format of the running engine.
  pub format_version: u32,
  /// Models recall would use now.
  pub models: StatusModels,
  // The counts of the indexed generation, as `state.json` records them ([`IndexCounts`], copied
  // by `with_state`); flat here, as the contract has them.
  /// Indexed pages (canonical + evidence).
  pub total_documents: u32,
  /// Indexed canonical pages (the wiki's own notes).
  pub canonical_documents: u32,
  /// Indexed evidence pages (sources and other supporting material).
  pub evidence_documents: u32,
  /// Chunk documents in the lexical index.
  pub total_chunks: u32,
  /// Distinct live chunks (by id) without a vector for the recorded embedding model.
  pub needs_embedding: u32,
  /// Distinct live chunks with a vector.
  pub embedded_chunks: u32,
  /// The commit lists at least one vector segment.
  pub has_vector_index: bool,
  /// Hash of the pages on disk (when compared).
  pub manifest_hash: Option<String>,
  /// Hash of the pages at the last index.
  pub indexed_manifest_hash: Option<String>,
  /// When the last index was committed (RFC 3339).
  pub last_indexed_at: Option<String>,
  /// Phase of an interrupted swap journal (contract field; format 2 has no journal: always unset).
  #[cfg_attr(
    feature = "napi",
    napi(ts_type = "'prepared' | 'previous-moved' | 'current-promoted' | 'validated'")
  )]
  pub swap_phase: Option<String>,
  /// Pages that differ from the index (when compared).
  pub pending_pages: Option<PendingPages>,
  /// Components a repair reindex should target (sorted; empty when ready, missing or recovering).
  #[cfg_attr(feature = "napi", napi(ts_type = "Array<'lexical' | 'vectors'>"))]
  pub repair_components: Vec<Component>,
  /// Why the state is not `ready`; then relation and link lint findings (`relation_*`,
  /// `page_links_truncated`), which never change the state.
  pub issues: Vec<IndexIssue>,
}

/// Options of a status read.
#[derive(Debug, Clone)]
pub struct StatusOptions {
  /// Compare the pages on disk with the manifest (stat only). Default true.
  pub check_pages: bool,
  /// Embedding model id to compare the vectors with; `None`: the vault's own choice
  /// ([`crate::store::model_choice::current_choice`]).
  pub embed_model: Option<String>,
  /// Reranker model id ("" when none).
  pub rerank_model: String,
}

impl Default for StatusOptions {
  /// Model ids come from the engine's model configuration (manifests only; nothing is loaded).
  fn default() -> Self {
    let c = crate::models::effective_config();
    StatusOptions {
      check_pages: true,
      embed_model: None,
      rerank_model: crate::models::rerank_model_id(&c).unwrap_or_default(),
    }
  }
}

impl IndexStatus {
  fn base(opts: &StatusOptions) -> Self {
    IndexStatus {
      qmd_version: ENGINE_VERSION.to_string(),
      engine_version: ENGINE_VERSION.to_string(),
      format_version: INDEX_FORMAT_VERSION,
      models: StatusModels {
        embed: opts.embed_model.clone().unwrap_or_default(),
        embed_reason: String::new(),
        generate: String::new(),
        rerank: opts.rerank_model.clone(),
      },
      ..Default::default()
    }
  }

  /// Status of a vault that could not be reindexed at all (e.g. no vault).
  pub fn blocked(issue: &IndexIssue) -> Self {
    IndexStatus {
      state: IndexState::Error,
      issues: vec![issue.clone()],
      ..Self::base(&StatusOptions::default())
    }
  }

  fn with_state(mut self, s: &StateFile) -> Self {
    let IndexCounts {
      total_documents,
      canonical_documents,
      evidence_documents,
      total_chunks,
      needs_embedding,
      embedded_chunks,
      has_vector_index,
    } = s.status;
    (self.total_documents, self.canonical_documents, self.evidence_documents) =
      (total_documents, canonical_documents, evidence_documents);
    (self.total_chunks, self.needs_embedding, self.embedded_chunks, self.has_vector_index) =
      (total_chunks, needs_embedding, embedded_chunks, has_vector_index);
    self.indexed_manifest_hash = Some(s.manifest_hash.clone());
    self.last_indexed_at = Some(s.indexed_at.clone());
    self
  }
}

/// Compare pages on disk with a manifest by path, size and mtime.
pub fn pending_pages(paths: &VaultPaths, manifest: &Manifest) -> PendingPages {
  let discovery = discover_pages(&paths.root, &paths.wiki);
  let mut p = PendingPages::default();
  let mut seen = HashSet::new();
  for f in &discovery.files {
    seen.insert(f.id.as_str());
    let excluded_same = manifest
      .excluded
      .get(&f.id)
      .is_some_and(|x| x.size == f.size && x.mtime_ns == f.mtime_ns && x.rel_path == f.rel_path);
    match manifest.entries.get(&f.id) {
      None if excluded_same => {}
      None => p.added += 1,
      Some(e) if e.size != f.size || e.mtime_ns != f.mtime_ns || e.rel_path != f.rel_path => p.changed += 1,
      Some(_) => {}
    }
  }
  p.removed = manifest.entries.keys().filter(|k| !seen.contains(k.as_str())).count() as u32;
  p
}

#[derive(Deserialize)]
struct LastError {
  #[serde(default)]
  message: Option<String>,
}

/// Read the status of a vault's store.
pub fn read_index_status(paths: &VaultPaths) -> IndexStatus {
  read_index_status_with(paths, &StatusOptions::default())
}

/// [`read_index_status`] with options. The event stream's findings
/// ([`crate::feedback::compact::status_issues`]: two `stat`s and a directory listing) follow the
/// store's and never change the state.
pub fn read_index_status_with(paths: &VaultPaths, opts: &StatusOptions) -> IndexStatus {
  let mut st = store_status(paths, opts);
  st.issues.extend(crate::feedback::compact::status_issues(&paths.meta));
  st
}

/// What the status reads of a vault's store before it decides the state. Every problem met on
/// the way is in `issues`; `malformed` when one of them leaves the store unusable.
struct StoreRead {
  /// The vault's identity from its config (none when the config is missing or malformed).
  vault_id: Option<String>,
  /// No `CURRENT` but a format-1 store directory.
  legacy_store: bool,
  /// The store directory `CURRENT` names.
  current: Option<StoreDir>,
  state: Option<StateFile>,
  /// The manifest of the state's generation (read only when pages are checked).
  manifest: Option<std::sync::Arc<Manifest>>,
  /// Its hash (from the state file when the manifest is not read).
  manifest_hash: Option<String>,
  last_error: Option<LastError>,
  issues: Vec<IndexIssue>,
  malformed: bool,
}

fn store_status(paths: &VaultPaths, opts: &StatusOptions) -> IndexStatus {
  let layout = StoreLayout::new(paths.retrieval());
  let mut st = IndexStatus::base(opts);
  let embed_model = match &opts.embed_model {
    Some(m) => m.clone(),
    None => {
      let choice = super::model_choice::current_choice(paths, &layout);
      st.models.embed_reason = choice.reason;
      choice.model
    }
  };
  st.models.embed = embed_model.clone();
  let read = read_store(paths, &layout, opts);
  st.vault_id = read.vault_id.clone();
  st.manifest_hash = read.manifest_hash.clone();
  decide(st, read, paths, opts, &embed_model)
}

/// Read the vault's config, the store `CURRENT` names, its state file, (when pages are checked)
/// its manifest, and the last failed attempt; an index state without a lexical index, or a
/// failed attempt with no usable index, is malformed.
fn read_store(paths: &VaultPaths, layout: &StoreLayout, opts: &StatusOptions) -> StoreRead {
  let mut issues: Vec<IndexIssue> = Vec::new();
  let mut malformed = false;

  // Config and identity.
  let config = read_config(paths);
  let vault_id = match &config {
    Ok(c) => vault_id_of(paths, c).ok().flatten(),
    Err(_) => None,
  };
  if let Err(e) = &config {
    if paths.config_file().exists() {
      issues.push(IndexIssue::new("qmd_config_invalid", e.to_string()));
      malformed = true;
    }
  }

  // The live store directory, its state and manifest.
  let pointer = layout.pointer();
  let legacy_store = pointer == Pointer::Missing && is_real_dir(&layout.dir.join("current"));
  let current = match pointer {
    Pointer::Valid(d) => Some(d),
    Pointer::Missing => None,
    Pointer::Invalid(msg) => {
      issues.push(IndexIssue::new("qmd_index_error", msg));
      malformed = true;
      None
    }
  };
  let state = current.as_ref().and_then(|current| {
    let problem = match StateFile::read(current) {
      JsonFile::Valid(s) => return Some(s),
      JsonFile::Missing => format!("CURRENT names {} but it holds no index state", current.name()),
      JsonFile::Invalid(msg) => format!("Index state file is malformed: {msg}"),
    };
    issues.push(IndexIssue::new("qmd_index_error", problem));
    malformed = true;
    None
  });
  let (manifest, manifest_hash) =
    read_manifest(current.as_ref(), state.as_ref(), opts, &mut issues, &mut malformed);
  let mut read = StoreRead {
    vault_id,
    legacy_store,
    current,
    state,
    manifest,
    manifest_hash,
    last_error: None,
    issues,
    malformed,
  };
  read.last_error = match read_json::<LastError>(&layout.last_error_file()) {
    JsonFile::Valid(e) => Some(e),
    JsonFile::Missing => None,
    JsonFile::Invalid(msg) => {
      read.issues.push(IndexIssue::new("qmd_index_error", msg));
      read.malformed = true;
      None
    }
  };
  if read.state.is_some() && !read.current.as_ref().is_some_and(|c| is_real_dir(&c.lexical_dir())) {
    read
      .issues
      .push(IndexIssue::new("qmd_index_error", "Index state exists but its lexical index is absent"));
    read.malformed = true;
  }
  if read.state.is_none() && read.last_error.is_some() {
    read.issues.push(IndexIssue::new(
      "qmd_index_error",
      read
        .last_error
        .as_ref()
        .and_then(|e| e.message.clone())
        .unwrap_or_else(|| "Last index attempt failed and no usable index exists".into()),
    ));
    read.malformed = true;
  }
  read
}

/// The manifest of the state's generation when pages are checked (the page check needs it);
/// without the check the state file's copy of its hash suffices (the manifest of a large vault
/// is megabytes of JSON), once its base file is known to exist.
fn read_manifest(
  current: Option<&StoreDir>,
  state: Option<&StateFile>,
  opts: &StatusOptions,
  issues: &mut Vec<IndexIssue>,
  malformed: &mut bool,
) -> (Option<std::sync::Arc<Manifest>>, Option<String>) {
  let Some(state) = state else { return (None, None) };
  if !opts.check_pages {
    // A generation's manifest is its base file (the newest at or below it) plus journal records.
    let has_manifest = current
      .is_some_and(|c| c.manifest_generations().first().is_some_and(|b| *b <= state.manifest_generation));
    if has_manifest {
      return (None, Some(state.manifest_hash.clone()));
    }
    issues.push(IndexIssue::new(
      "qmd_manifest_invalid",
      format!("manifest of generation {} is missing", state.manifest_generation),
    ));
    *malformed = true;
    return (None, None);
  }
  // The generation this process's writer committed last is shared, not parsed again.
  let loaded = match current {
    Some(c) => {
      crate::store::manifest::load_generation_cached(c, state.manifest_generation, Some(&state.vault_id))
    }
    None => Err(crate::error::Error::ManifestInvalid("no store".into())),
  };
  match loaded {
    Ok(m) => {
      let hash = m.hash();
      (Some(m), Some(hash))
    }
    Err(e) => {
      issues.push(IndexIssue::new("qmd_manifest_invalid", e.to_string()));
      *malformed = true;
      (None, None)
    }
  }
}

/// The state by the ladder (module doc): error, missing, identity, stale, ready.
fn decide(
  mut st: IndexStatus,
  read: StoreRead,
  paths: &VaultPaths,
  opts: &StatusOptions,
  embed_model: &str,
) -> IndexStatus {
  let StoreRead {
    vault_id, legacy_store, current, state, manifest, last_error, mut issues, malformed, ..
  } = read;
  // 1. Error.
  let had_vectors = state.as_ref().is_some_and(|s| s.status.has_vector_index);
  if malformed {
    if let Some(s) = &state {
      st = st.with_state(s);
    }
    st.state = IndexState::Error;
    st.repair_components = vec![if had_vectors { Component::Vectors } else { Component::Lexical }];
    st.issues = issues;
    return st;
  }

  // 2. Missing (a format-1 store is stale: it needs a rebuild, and recall skips it meanwhile).
  let Some(state) = state else {
    if legacy_store {
      issues.push(IndexIssue::new(
        "qmd_index_stale",
        "Index format or engine changed (a QMD store of the TypeScript release awaits migration); index needs rebuild",
      ));
      st.state = IndexState::Stale;
      st.repair_components = vec![Component::Lexical];
    } else {
      st.state = IndexState::Missing;
    }
    st.issues = issues;
    return st;
  };
  st = st.with_state(&state);

  // 3. Identity.
  let Some(vault_id) = vault_id else {
    st.state = IndexState::Error;
    st.issues.push(IndexIssue::new(
      "qmd_config_invalid",
      "Vault config is missing or malformed; vault identity cannot be confirmed",
    ));
    st.repair_components = vec![if had_vectors { Component::Vectors } else { Component::Lexical }];
    return st;
  };

  // 4. Stale.
  let (embed_changed, other_reason) = stale_issues(
    &mut st,
    &mut issues,
    paths,
    opts,
    &state,
    manifest.as_deref(),
    last_error.as_ref(),
    &vault_id,
    embed_model,
  );
  // Relation / link lint is reported but never changes the state (a reindex cannot fix it).
  // Computed once per generation and process (a reindex of this process may have computed it).
  let lint = match (&manifest, &current) {
    (Some(m), Some(c)) => crate::memory::graph::lint_issues_cached(&c.dir, m),
    _ => Vec::new(),
  };
  if !issues.is_empty() {
    st.state = IndexState::Stale;
    let needs_vectors = embed_changed || (state.status.has_vector_index && other_reason);
    st.repair_components = vec![if needs_vectors { Component::Vectors } else { Component::Lexical }];
    st.issues = issues;
    st.issues.extend(lint);
    return st;
  }
  st.state = IndexState::Ready;
  st.issues = lint;
  st
}

/// The reasons a ready-looking store is stale, pushed to `issues`: a failed last attempt, pages
/// changed since (when checked), the embedding model, the format or engine, the vault identity.
/// Returns (the embedding model changed, another reason holds).
#[allow(clippy::too_many_arguments)]
fn stale_issues(
  st: &mut IndexStatus,
  issues: &mut Vec<IndexIssue>,
  paths: &VaultPaths,
  opts: &StatusOptions,
  state: &StateFile,
  manifest: Option<&Manifest>,
  last_error: Option<&LastError>,
  vault_id: &str,
  embed_model: &str,
) -> (bool, bool) {
  let mut other_reason = false;
  if let Some(e) = last_error {
    issues.push(IndexIssue::new(
      "qmd_index_error",
      e.message.clone().unwrap_or_else(|| "Last index attempt failed".into()),
    ));
    other_reason = true;
  }
  if opts.check_pages {
    if let Some(m) = manifest {
      let p = pending_pages(paths, m);
      if p.added + p.changed + p.removed > 0 {
        issues.push(IndexIssue::new(
          "qmd_index_stale",
          format!(
            "Index is stale: {} added, {} changed, {} removed page(s) since the last index",
            p.added, p.changed, p.removed
          ),
        ));
        other_reason = true;
      }
      st.pending_pages = Some(p);
    }
  }
  let embed_changed =
    state.status.has_vector_index && !embed_model.is_empty() && state.models.embed != embed_model;
  if embed_changed {
    issues.push(IndexIssue::new("qmd_index_stale", "Embedding model changed; vectors are stale"));
  }
  if !state.is_current_format() || state.engine != ENGINE_NAME {
    issues.push(IndexIssue::new("qmd_index_stale", "Index format or engine changed; index needs rebuild"));
    other_reason = true;
  }
  if state.vault_id != vault_id {
    issues.push(IndexIssue::new("qmd_index_stale", "Index vault identity changed"));
    other_reason = true;
  }
  (embed_changed, other_reason)
}
