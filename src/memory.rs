//! Memory exports: `recallMemory` (bundles), `neighbours` (zoom-out) and `linkPath`. Their
//! results are the engine's shapes (`llm_wiki_core::memory`), declared there only.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use llm_wiki_core::memory::bundle as core_bundle;
use llm_wiki_core::memory::explore::{self as core_explore, NeighbourRequest as NeighboursOptions};
use llm_wiki_core::memory::{self as core_memory};
use llm_wiki_core::retrieve::{self as core_retrieve, RetrievalMode};

use crate::args::cancel_flag;
use crate::error::core_err;
use crate::error::Outcome;
use crate::task;
use crate::types::{RecallConfig, RecallPolicy, VaultPaths};

/// Options of `recallMemory`.
#[napi(object, object_to_js = false)]
pub struct RecallMemoryOptions {
  /// `maxResults` = bundles returned (automatic recall: 3); candidates are taken at 10.
  pub policy: RecallPolicy,
  pub config: Option<RecallConfig>,
  #[napi(ts_type = "'lexical' | 'hybrid' | 'adaptive' | 'quality'")]
  pub mode: Option<String>,
  pub signal: Option<AbortSignal>,
  /// Treat the call as already cancelled (set by the JS wrapper when `signal` was already aborted).
  pub aborted: Option<bool>,
  /// Rendered context budget in characters (default 8000, the spec's automatic budget).
  pub budget_chars: Option<u32>,
  /// Follow typed relations one hop (default true; false = the "without typed-link assembly"
  /// ablation).
  pub typed_expansion: Option<bool>,
  /// Apply the bounded feedback term (default true).
  pub feedback: Option<bool>,
  /// The host session (see `RecallWikiOptions.session`); its budget caps `budgetChars`.
  pub session: Option<crate::session::RecallSession>,
}

/// Recall memory bundles: the highest canonical card with ≤ 2 evidence excerpts and its
/// competing claims (one typed relation hop), more cards under the `(type, domain)` diversity
/// cap while the character budget lasts, unpromoted evidence only when no card matched.
#[napi(catch_unwind, ts_return_type = "Promise<MemoryResponse>")]
pub fn recall_memory<'env>(
  env: &'env Env,
  paths: VaultPaths,
  raw_query: String,
  opts: RecallMemoryOptions,
) -> Result<PromiseRaw<'env, core_memory::MemoryResponse>> {
  let cancel = cancel_flag(opts.signal.as_ref(), opts.aborted.unwrap_or(false));
  let mode: Outcome<RetrievalMode> =
    match (&opts.mode, opts.config.as_ref().and_then(|c| c.retrieval_mode.as_deref())) {
      (Some(m), _) => RetrievalMode::parse(m).map_err(core_err),
      (None, Some(m)) => Ok(RetrievalMode::parse(m).unwrap_or_default()),
      (None, None) => Ok(RetrievalMode::default()),
    };
  let policy = opts.policy.clone();
  let budget = opts.budget_chars.map_or(core_bundle::DEFAULT_BUDGET_CHARS, |b| b as usize);
  let typed_expansion = opts.typed_expansion.unwrap_or(true);
  let feedback = opts.feedback.unwrap_or(true);
  let session = opts.session.clone().map(|s| s.check().map(|()| s)).transpose().map_err(core_err);
  let job_cancel = cancel.clone();
  task::spawn(env, Some(&job_cancel), task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    let recall = core_retrieve::RecallOptions {
      cancel,
      feedback,
      session: session?,
      ..core_retrieve::RecallOptions::new(policy, mode?)
    };
    let opts = core_memory::MemoryOptions { recall, budget_chars: budget, typed_expansion };
    core_memory::recall_memory(&paths, &raw_query, &opts).map_err(core_err)
  })
}

/// Zoom-out: a page with its outbound and inbound link edges (typed relations labelled), up to
/// `depth` hops, within `maxBytes` and `budgetTokens`; typed relations and current canonical
/// pages first, the page text cut at a sentence end. A malformed page id (`..`, absolute) is
/// `invalid_argument`, an id of another vault `graph_cross_vault`; an unknown page or unavailable
/// index is a diagnostic.
#[napi(catch_unwind, ts_return_type = "Promise<Neighbourhood>")]
pub fn neighbours<'env>(
  env: &'env Env,
  paths: VaultPaths,
  page_id: String,
  opts: Option<NeighboursOptions>,
) -> Result<PromiseRaw<'env, core_explore::Neighbourhood>> {
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    core_explore::neighbours(&paths, &page_id, &opts.unwrap_or_default()).map_err(core_err)
  })
}

/// Options of `linkPath`.
#[napi(object, object_to_js = false)]
pub struct LinkPathOptions {
  /// Longest path searched (default 4, at most 8).
  pub max_hops: Option<u32>,
}

/// A shortest path of links (followed in either direction) between two pages of one vault; of
/// paths of equal length the one with more typed relations. Malformed ids are
/// `invalid_argument`, ids of another vault `graph_cross_vault`; `from` = `to` is a found path of
/// no hops (`path_same_page`); unknown pages and no path are diagnostics.
#[napi(catch_unwind, ts_return_type = "Promise<LinkPath>")]
pub fn link_path<'env>(
  env: &'env Env,
  paths: VaultPaths,
  from: String,
  to: String,
  opts: Option<LinkPathOptions>,
) -> Result<PromiseRaw<'env, core_explore::LinkPath>> {
  let max_hops = opts.and_then(|o| o.max_hops).unwrap_or(4);
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    core_explore::link_path(&paths, &from, &to, max_hops).map_err(core_err)
  })
}
