//! `resolveConflict` (the spec's `wiki_resolve_conflict`): records a user's choice between two
//! competing claims as one immutable resolution page. The result is the
//! engine's shape (`llm_wiki_core::memory::resolve`), declared there only.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use llm_wiki_core::memory::resolve as core_resolve;

use crate::error::core_err;
use crate::task;
use crate::types::VaultPaths;

/// Arguments of `resolveConflict` (the spec's `wiki_resolve_conflict` parameters).
#[napi(object, object_to_js = false)]
pub struct ResolveConflictOptions {
  /// The vault of both pages, relative to the active vault `paths`.
  #[napi(ts_type = "'project' | 'personal'")]
  pub vault: String,
  /// The user-endorsed claim (folder-qualified page id).
  pub selected_page_id: String,
  /// The competing claim.
  pub other_page_id: String,
  /// Direction selected → other: `supersedes` (other becomes historical), `qualifies` (both
  /// current, selected narrows other), `applies_under` (selected applies within `scope`).
  #[napi(ts_type = "'supersedes' | 'qualifies' | 'applies_under'")]
  pub relation: String,
  /// Required for `applies_under`, rejected for the other relations.
  pub scope: Option<String>,
  /// Why; recorded in the page body.
  pub rationale: Option<String>,
  /// The pair's active resolution id that this decision replaces (required to change a choice).
  pub replaces: Option<String>,
  /// Update the vault's index afterwards (default true).
  pub update_index: Option<bool>,
}

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
    let req = core_resolve::ResolveRequest {
      vault: opts.vault,
      selected: opts.selected_page_id,
      other: opts.other_page_id,
      relation: opts.relation,
      scope: opts.scope,
      rationale: opts.rationale,
      replaces: opts.replaces,
      update_index: opts.update_index.unwrap_or(true),
    };
    core_resolve::resolve_conflict(&paths, &req).map_err(core_err)
  })
}
