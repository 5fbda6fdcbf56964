//! The agent's orientation and graph exports (issue 42): `wikiIndex` (orientation from the index
//! alone) and `graphQuery` (multi-hop, token-budgeted traversal seeded by recall). `graphQuery`'s
//! result is the engine's (`llm_wiki_core::memory::graph_query`); `wikiIndex`'s is converted
//! here (`u64` generation, `usize` counts, conflict pairs as arrays); `neighbours` and `linkPath` live in `memory.rs`.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use llm_wiki_core::memory::graph_query as core_gq;
use llm_wiki_core::memory::orientation as core_ix;
use llm_wiki_core::retrieve::RetrievalMode;

use crate::error::Outcome;
use crate::types::{RecallDiagnostic, VaultPaths};
use crate::{cancel_flag, core_err, invalid, task};

/// A JS number given as a token budget or count: a non-negative integer (10⁹ and more are
/// accepted and clamped by the engine); NaN, negative or fractional values are `invalid_argument`.
pub(crate) fn whole(name: &str, v: Option<f64>) -> Outcome<Option<u64>> {
  match v {
    None => Ok(None),
    Some(x) if x.is_finite() && x >= 0.0 && x.fract() == 0.0 => Ok(Some(x.min(u64::MAX as f64) as u64)),
    Some(x) if x == f64::INFINITY => Ok(Some(u64::MAX)),
    Some(x) => Err(invalid(format!("{name} must be a whole number of at least 0, got {x}"))),
  }
}

/// Options of `wikiIndex`.
#[napi(object, object_to_js = false)]
pub struct WikiIndexOptions {
  /// Budget of `text` in estimated tokens (default 500, at most 4000; 0 is `invalid_argument`,
  /// more is clamped with a `budget_clamped` diagnostic).
  pub max_tokens: Option<f64>,
}

/// A label (type, folder, domain, tag) with its page count.
#[napi(object)]
pub struct IndexCount {
  pub name: String,
  pub pages: u32,
}

/// A page named by the index.
#[napi(object)]
pub struct IndexPage {
  pub id: String,
  pub title: String,
  #[napi(js_name = "type")]
  pub page_type: String,
  /// Distinct pages linking to it.
  pub inbound: u32,
  /// Frontmatter `updated`, else `created`, as written.
  pub date: Option<String>,
  /// File modification time when indexed (ms since the epoch).
  pub modified_ms: f64,
}

/// Result of `wikiIndex`: orientation from the index alone (no page file is read).
#[napi(object)]
pub struct WikiIndex {
  pub vault_id: String,
  pub generation: f64,
  pub pages: u32,
  pub canonical: u32,
  pub evidence: u32,
  pub by_type: Vec<IndexCount>,
  /// Top-level folders.
  pub by_folder: Vec<IndexCount>,
  /// Frontmatter `domain` (pages without one are not counted).
  pub by_domain: Vec<IndexCount>,
  pub by_tag: Vec<IndexCount>,
  /// Current (not superseded) canonical pages with the most linking pages.
  pub most_linked: Vec<IndexPage>,
  /// Pages changed last.
  pub recent: Vec<IndexPage>,
  /// `contradicts` pairs without an active user resolution.
  pub unresolved_conflicts: u32,
  /// The first of them (exact page ids, the declaring page first).
  pub conflicts: Vec<Vec<String>>,
  /// Superseded pages.
  pub historical: u32,
  /// Compact Markdown within the budget.
  pub text: String,
  pub tokens_used: u32,
  pub budget_tokens: u32,
  /// True when `text` leaves out entries the structured fields hold.
  pub truncated: bool,
  pub diagnostics: Vec<RecallDiagnostic>,
}

fn counts(v: &[core_ix::Count]) -> Vec<IndexCount> {
  v.iter().map(|c| IndexCount { name: c.name.clone(), pages: c.pages as u32 }).collect()
}

fn index_pages(v: &[core_ix::IndexPage]) -> Vec<IndexPage> {
  v.iter()
    .map(|p| IndexPage {
      id: p.id.clone(),
      title: p.title.clone(),
      page_type: p.page_type.clone(),
      inbound: p.inbound as u32,
      date: p.date.clone(),
      modified_ms: p.modified_ms as f64,
    })
    .collect()
}

impl From<core_ix::WikiIndex> for WikiIndex {
  fn from(i: core_ix::WikiIndex) -> Self {
    WikiIndex {
      vault_id: i.vault_id,
      generation: i.generation as f64,
      pages: i.pages as u32,
      canonical: i.canonical as u32,
      evidence: i.evidence as u32,
      by_type: counts(&i.by_type),
      by_folder: counts(&i.by_folder),
      by_domain: counts(&i.by_domain),
      by_tag: counts(&i.by_tag),
      most_linked: index_pages(&i.most_linked),
      recent: index_pages(&i.recent),
      unresolved_conflicts: i.unresolved_conflicts as u32,
      conflicts: i.conflicts.iter().map(|c| c.page_ids.to_vec()).collect(),
      historical: i.historical as u32,
      text: i.text,
      tokens_used: i.tokens_used as u32,
      budget_tokens: i.budget_tokens as u32,
      truncated: i.truncated,
      diagnostics: i.diagnostics,
    }
  }
}

/// Orientation in about 500 tokens: page counts by type, folder, domain and tag, the most linked
/// current canonical pages, recently changed pages and unresolved conflicts — from the index
/// only. An unavailable index is a diagnostic with an empty index.
#[napi(catch_unwind, ts_return_type = "Promise<WikiIndex>")]
pub fn wiki_index<'env>(
  env: &'env Env,
  paths: VaultPaths,
  opts: Option<WikiIndexOptions>,
) -> Result<PromiseRaw<'env, WikiIndex>> {
  let max_tokens = opts.and_then(|o| o.max_tokens);
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    let max_tokens = whole("maxTokens", max_tokens)?;
    Ok(WikiIndex::from(core_ix::wiki_index(&paths, max_tokens).map_err(core_err)?))
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
      hops: whole("hops", hops)?.map(|h| h.min(u32::MAX as u64) as u32),
      seeds: whole("seeds", seeds)?.map(|s| s.min(u32::MAX as u64) as u32),
      mode,
      cancel,
    };
    core_gq::graph_query(&paths, &query, &opts).map_err(core_err)
  })
}
