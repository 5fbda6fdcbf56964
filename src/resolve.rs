//! `resolveConflict` (the spec's `wiki_resolve_conflict`): records a user's choice between two
//! competing claims as one immutable resolution page. Shapes are the engine's
//! (`llm_wiki_core::memory::resolve`), converted with `From` only.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use llm_wiki_core::memory::resolve as core_resolve;

use crate::error::core_err;
use crate::task;
use crate::types::{IndexIssue, VaultPaths};

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

/// The spec's `ConflictResolution`.
#[napi(object)]
pub struct ConflictResolution {
  pub id: String,
  pub vault_id: String,
  pub selected_page_id: String,
  pub other_page_id: String,
  #[napi(ts_type = "'supersedes' | 'qualifies' | 'applies_under'")]
  pub relation: String,
  pub scope: Option<String>,
  /// `active`, or `replaced` once a later decision replaces it.
  #[napi(ts_type = "'active' | 'replaced'")]
  pub status: String,
  #[napi(ts_type = "'user'")]
  pub decided_by: String,
  /// RFC 3339 time of the decision.
  pub decided_at: String,
  pub replaces: Option<String>,
  /// Page id of the resolution page (`analyses/<id>`).
  pub page_id: String,
}

impl From<&core_resolve::ConflictResolution> for ConflictResolution {
  fn from(r: &core_resolve::ConflictResolution) -> Self {
    ConflictResolution {
      id: r.id.clone(),
      vault_id: r.vault_id.clone(),
      selected_page_id: r.selected_page_id.clone(),
      other_page_id: r.other_page_id.clone(),
      relation: r.relation.clone(),
      scope: r.scope.clone(),
      status: r.status.clone(),
      decided_by: r.decided_by.clone(),
      decided_at: r.decided_at.clone(),
      replaces: r.replaces.clone(),
      page_id: r.page_id.clone(),
    }
  }
}

/// A competing pair without a user resolution: ask the user, then call `resolveConflict`.
#[napi(object)]
pub struct UnresolvedConflict {
  #[napi(ts_type = "'project' | 'personal'")]
  pub vault: String,
  pub vault_id: String,
  /// The two page ids (the bundle's card first).
  pub page_ids: Vec<String>,
  /// The declared relation that makes them compete (`contradicts`).
  pub relation: String,
}

impl From<&core_resolve::UnresolvedConflict> for UnresolvedConflict {
  fn from(u: &core_resolve::UnresolvedConflict) -> Self {
    UnresolvedConflict {
      vault: u.vault.clone(),
      vault_id: u.vault_id.clone(),
      page_ids: u.page_ids.clone(),
      relation: u.relation.clone(),
    }
  }
}

/// The index update after a resolution.
#[napi(object)]
pub struct DerivedUpdate {
  /// True when the index now contains the resolution page.
  pub updated: bool,
  /// True when the index does not reflect the resolution yet (the page is committed).
  pub stale: bool,
  /// Generation committed by the update (0 when none).
  pub generation: f64,
  /// Why the update failed or was skipped (`qmd_index_busy`, `resolution_index_stale`, ...).
  pub issues: Vec<IndexIssue>,
}

/// Result of `resolveConflict`.
#[napi(object)]
pub struct ResolveConflictResult {
  pub resolution: ConflictResolution,
  /// False for an idempotent repeat: the existing record is returned, nothing is written.
  pub created: bool,
  /// Absolute path of the resolution page.
  pub path: String,
  pub index: DerivedUpdate,
  /// Non-fatal problems: `resolution_feedback_not_recorded` when the page is committed but its
  /// `conflict_selected` feedback event could not be appended to `meta/events.jsonl`.
  pub warnings: Vec<IndexIssue>,
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
) -> Result<PromiseRaw<'env, ResolveConflictResult>> {
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.to_core()?;
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
    let out = core_resolve::resolve_conflict(&paths, &req).map_err(core_err)?;
    Ok(ResolveConflictResult {
      resolution: ConflictResolution::from(&out.resolution),
      created: out.created,
      path: out.path,
      index: DerivedUpdate {
        updated: out.index.updated,
        stale: out.index.stale,
        generation: out.index.generation as f64,
        issues: out.index.issues.iter().map(IndexIssue::from).collect(),
      },
      warnings: out.warnings.iter().map(IndexIssue::from).collect(),
    })
  })
}
