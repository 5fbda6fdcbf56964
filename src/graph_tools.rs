//! The agent's orientation and graph exports (issue 42): `wikiIndex` (orientation from the index
//! alone) and `graphQuery` (multi-hop, token-budgeted traversal seeded by recall). Their results
//! are the engine's shapes (`llm_wiki_core::memory::{orientation, graph_query}`), declared there
//! only; `neighbours` and `linkPath` live in `memory.rs`.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use llm_wiki_core::memory::graph_query as core_gq;
use llm_wiki_core::memory::orientation as core_ix;
use llm_wiki_core::retrieve::RetrievalMode;
use llm_wiki_core::util::num::sat_u32;

use crate::error::Outcome;
use crate::types::VaultPaths;
use crate::{cancel_flag, core_err, task};

/// [`llm_wiki_core::memory::graph_input::whole`]: a JS number given as a token budget or count.
fn whole(name: &str, v: Option<f64>) -> Outcome<Option<u64>> {
  llm_wiki_core::memory::graph_input::whole(name, v).map_err(core_err)
}

/// Options of `wikiIndex`.
#[napi(object, object_to_js = false)]
pub struct WikiIndexOptions {
  /// Budget of `text` in estimated tokens (default 500, at most 4000; 0 is `invalid_argument`,
  /// more is clamped with a `budget_clamped` diagnostic).
  pub max_tokens: Option<f64>,
}

/// Orientation in about 500 tokens: page counts by type, folder, domain and tag, the most linked
/// current canonical pages, recently changed pages and unresolved conflicts — from the index
/// only. An unavailable index is a diagnostic with an empty index.
#[napi(catch_unwind, ts_return_type = "Promise<WikiIndex>")]
pub fn wiki_index<'env>(
  env: &'env Env,
  paths: VaultPaths,
  opts: Option<WikiIndexOptions>,
) -> Result<PromiseRaw<'env, core_ix::WikiIndex>> {
  let max_tokens = opts.and_then(|o| o.max_tokens);
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    let max_tokens = whole("maxTokens", max_tokens)?;
    core_ix::wiki_index(&paths, max_tokens).map_err(core_err)
  })
}

/// Options of `graphQuery`.
#[napi(object, object_to_js = false)]
pub struct GraphQueryOptions {
  /// Token budget (default 2000, at most 10000; 0 is `invalid_argument`, more is clamped with
  /// `budget_clamped`).
  pub budget_tokens: Option<f64>,
  /// Hops from the seeds (default 2, at most 4 — more is clamped with `hops_clamped`; 0 = the
  /// seeds alone).
  pub hops: Option<f64>,
  /// Seeds taken from recall (default 3, 1..=10).
  pub seeds: Option<f64>,
  /// Retrieval mode of the seed recall (default `adaptive`).
  #[napi(ts_type = "'lexical' | 'hybrid' | 'adaptive' | 'quality'")]
  pub mode: Option<String>,
  pub signal: Option<AbortSignal>,
  /// Treat the call as already cancelled (set by the JS wrapper when `signal` was already aborted).
  pub aborted: Option<bool>,
}

/// "What connects these?": the best recall hits of `query` in this vault as seeds, then up to
/// `hops` hops over links — typed relations first, competing claims kept together, superseded
/// pages marked historical — within a token budget.
#[napi(catch_unwind, ts_return_type = "Promise<GraphQueryResult>")]
pub fn graph_query<'env>(
  env: &'env Env,
  paths: VaultPaths,
  query: String,
  opts: Option<GraphQueryOptions>,
) -> Result<PromiseRaw<'env, core_gq::GraphQueryResult>> {
  let (budget, hops, seeds, mode, signal, aborted) = match opts {
    Some(o) => (o.budget_tokens, o.hops, o.seeds, o.mode, o.signal, o.aborted.unwrap_or(false)),
    None => (None, None, None, None, None, false),
  };
  let cancel = cancel_flag(signal.as_ref(), aborted);
  let job_cancel = cancel.clone();
  task::spawn(env, Some(&job_cancel), task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    let mode = match mode.as_deref() {
      None => RetrievalMode::default(),
      Some(m) => RetrievalMode::parse(m).map_err(core_err)?,
    };
    let opts = core_gq::GraphQueryOptions {
      budget_tokens: whole("budgetTokens", budget)?,
      hops: whole("hops", hops)?.map(sat_u32),
      seeds: whole("seeds", seeds)?.map(sat_u32),
      mode,
      cancel,
    };
    core_gq::graph_query(&paths, &query, &opts).map_err(core_err)
  })
}
