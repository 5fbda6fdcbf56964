//! `resolveConflict` (the spec's `wiki_resolve_conflict`): records a user's choice between two
//! competing claims as one immutable resolution page. Its options and result are the engine's
//! shapes (`llm_wiki_core::memory::resolve`), declared there only.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use llm_wiki_core::memory::resolve::{self as core_resolve, ResolveRequest as ResolveConflictOptions};

use crate::error::core_err;
use crate::task;
use crate::types::VaultPaths;

/// Record a user-approved conflict resolution as one immutable page under `wiki/analyses/`
/// (temporary file, validation, atomic rename, under the vault's events lock) and, in the same
/// lock hold, append its `conflict_selected` feedback event; then update the vault's index. Repeating a decision returns the existing record (`created: false`); a changed
/// choice must name the pair's active resolution in `replaces`. Rejects with a stable `err.code`:
/// `resolution_relation_invalid`, `resolution_page_id_invalid`, `resolution_same_page`,
/// `resolution_page_missing`, `resolution_cross_vault`, `resolution_page_invalid`,
/// `resolution_scope_invalid`, `resolution_rationale_too_long`, `resolution_replaces_invalid`,
/// `resolution_replaces_required`, `resolution_vault_unavailable`, `events_lock_busy` (nothing
/// written), `invalid_argument` (unknown `vault`). An index failure does not reject: the page
/// stays committed and `index.stale` is true; nor does a failed event append (`warnings`).
#[napi(catch_unwind, ts_return_type = "Promise<ResolveConflictResult>")]
pub fn resolve_conflict<'env>(
  env: &'env Env,
  paths: VaultPaths,
  opts: ResolveConflictOptions,
) -> Result<PromiseRaw<'env, core_resolve::ResolveOutcome>> {
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    core_resolve::resolve_conflict(&paths, &opts).map_err(core_err)
  })
}
