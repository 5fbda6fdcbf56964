//! Memory exports: `recallMemory` (bundles), `neighbours` (zoom-out) and `linkPath`. Shapes are
//! the engine's (`llm_wiki_core::memory`), converted with `From` only.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use llm_wiki_core::memory::bundle as core_bundle;
use llm_wiki_core::memory::explore as core_explore;
use llm_wiki_core::memory::{self as core_memory};
use llm_wiki_core::retrieve::{self as core_retrieve, RetrievalMode};

use crate::args::cancel_flag;
use crate::error::core_err;
use crate::error::Outcome;
use crate::task;
use crate::types::{RecallConfig, RecallDiagnostic, RecallPolicy, VaultPaths};

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

/// One packed item: the spec's `MemoryCandidate` plus what rendering needs.
#[napi(object)]
pub struct MemoryCandidate {
  #[napi(ts_type = "'project' | 'personal'")]
  pub vault: String,
  pub vault_id: String,
  pub vault_label: Option<String>,
  pub page_id: String,
  /// Absolute path of the page file.
  pub path: String,
  pub title: String,
  #[napi(js_name = "type")]
  pub page_type: String,
  #[napi(ts_type = "'canonical' | 'evidence'")]
  pub role: String,
  pub status: Option<String>,
  pub domain: Option<String>,
  /// Scope of the `applies_under` relation that admitted the item, else the page's frontmatter
  /// `scope`.
  pub scope: Option<String>,
  /// The page's date: frontmatter `updated`, else `created`, as written.
  pub date: Option<String>,
  /// Present when the page declares `stale_after`, a human `verified` event or `generated.at`.
  pub freshness: Option<MemoryFreshness>,
  pub heading: Option<String>,
  /// Exact text of the page lines `lineStart..=lineEnd` (≤ 800 characters).
  pub excerpt: String,
  pub line_start: u32,
  pub line_end: u32,
  /// 0-based rank in its vault's retrieval list; absent for a page admitted by a relation.
  pub qmd_rank: Option<u32>,
  /// Retrieval confidence before the multiplier, when retrieved.
  pub qmd_score: Option<f64>,
  /// Final bounded score (0 for a page admitted by a relation).
  pub score: f64,
  pub match_reasons: Vec<String>,
  /// `card`, `unpromoted`, `linked` (retrieved and linked with the card) or the relation type
  /// that admitted it (`supports`, `derived_from`, `contradicts`, `qualifies`, `supersedes`,
  /// `applies_under`).
  pub relation: String,
  /// `outgoing` (the card — or the `relatedTo` page — declares the relation) or `incoming` (the
  /// item declares it).
  #[napi(ts_type = "'outgoing' | 'incoming'")]
  pub relation_direction: Option<String>,
  /// The page `relation` links the item to when that page is not the bundle's card (claims kept
  /// together with a partner that is evidence or another competing claim).
  pub related_to: Option<String>,
  /// `superseded by …` (historical), `cites_superseded: …`, draft / deprecated / unpromoted notes.
  pub warnings: Vec<String>,
  /// True when a user resolution or a `supersedes` relation made the page historical (its own
  /// `status` is unchanged).
  pub historical: bool,
}

/// Freshness and verification of a packed item, evaluated when the recall ran.
#[napi(object)]
pub struct MemoryFreshness {
  /// Frontmatter `stale_after`, as written.
  pub stale_after: Option<String>,
  /// Latest human verification date, as written.
  pub verified_at: Option<String>,
  /// `generated.at`, as written.
  pub generated_at: Option<String>,
  /// Past `stale_after`.
  pub stale: bool,
  /// A current human verification (not older than `generated.at`).
  pub verified: bool,
}

impl From<&core_bundle::MemoryItem> for MemoryCandidate {
  fn from(i: &core_bundle::MemoryItem) -> Self {
    MemoryCandidate {
      vault: i.vault.clone(),
      vault_id: i.vault_id.clone(),
      vault_label: i.vault_label.clone(),
      page_id: i.page_id.clone(),
      path: i.path.clone(),
      title: i.title.clone(),
      page_type: i.page_type.clone(),
      role: i.role.clone(),
      status: i.status.clone(),
      domain: i.domain.clone(),
      scope: i.scope.clone(),
      date: i.date.clone(),
      freshness: i.freshness.as_ref().map(|f| MemoryFreshness {
        stale_after: f.stale_after.clone(),
        verified_at: f.verified_at.clone(),
        generated_at: f.generated_at.clone(),
        stale: f.stale,
        verified: f.verified,
      }),
      heading: i.heading.clone(),
      excerpt: i.excerpt.clone(),
      line_start: i.line_start,
      line_end: i.line_end,
      qmd_rank: i.qmd_rank,
      qmd_score: i.qmd_score,
      score: i.score,
      match_reasons: i.match_reasons.clone(),
      relation: i.relation.clone(),
      relation_direction: i.relation_direction.clone(),
      related_to: i.related_to.clone(),
      warnings: i.warnings.clone(),
      historical: i.historical,
    }
  }
}

/// A card with its evidence and competing claims (`card` absent: unpromoted evidence).
#[napi(object)]
pub struct MemoryBundle {
  pub card: Option<MemoryCandidate>,
  pub evidence: Vec<MemoryCandidate>,
  pub conflicts: Vec<MemoryCandidate>,
  /// The active user resolution between the card and one of its competing claims.
  pub resolution: Option<crate::resolve::ConflictResolution>,
  /// Competing pairs without a user resolution (ask the user; exact page ids).
  pub unresolved: Vec<crate::resolve::UnresolvedConflict>,
}

/// Result of `recallMemory`. Empty `bundles` ("no reliable memory") is a valid outcome.
#[napi(object)]
pub struct MemoryResponse {
  pub bundles: Vec<MemoryBundle>,
  /// The bundles rendered for injection (within `budgetChars`), or links-first lines when no
  /// bundle fits.
  pub context: String,
  pub diagnostics: Vec<RecallDiagnostic>,
  pub trace: Vec<String>,
  #[napi(ts_type = "'lexical' | 'hybrid' | 'adaptive' | 'quality'")]
  pub mode: String,
}

impl From<core_memory::MemoryResponse> for MemoryResponse {
  fn from(r: core_memory::MemoryResponse) -> Self {
    MemoryResponse {
      bundles: r
        .bundles
        .iter()
        .map(|b| MemoryBundle {
          card: b.card.as_ref().map(MemoryCandidate::from),
          evidence: b.evidence.iter().map(MemoryCandidate::from).collect(),
          conflicts: b.conflicts.iter().map(MemoryCandidate::from).collect(),
          resolution: b.resolution.as_ref().map(crate::resolve::ConflictResolution::from),
          unresolved: b.unresolved.iter().map(crate::resolve::UnresolvedConflict::from).collect(),
        })
        .collect(),
      context: r.context,
      diagnostics: r.diagnostics.into_iter().map(RecallDiagnostic::from).collect(),
      trace: r.trace,
      mode: r.mode.as_str().to_string(),
    }
  }
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
) -> Result<PromiseRaw<'env, MemoryResponse>> {
  let cancel = cancel_flag(opts.signal.as_ref(), opts.aborted.unwrap_or(false));
  let mode: Outcome<RetrievalMode> =
    match (&opts.mode, opts.config.as_ref().and_then(|c| c.retrieval_mode.as_deref())) {
      (Some(m), _) => RetrievalMode::parse(m).map_err(core_err),
      (None, Some(m)) => Ok(RetrievalMode::parse(m).unwrap_or_default()),
      (None, None) => Ok(RetrievalMode::default()),
    };
  let policy = core_retrieve::RecallPolicy {
    include_personal: opts.policy.include_personal,
    min_score: opts.policy.min_score,
    max_per_vault: opts.policy.max_per_vault as usize,
    max_results: opts.policy.max_results as usize,
  };
  let budget = opts.budget_chars.map_or(core_bundle::DEFAULT_BUDGET_CHARS, |b| b as usize);
  let typed_expansion = opts.typed_expansion.unwrap_or(true);
  let feedback = opts.feedback.unwrap_or(true);
  let session = opts.session.as_ref().map(|s| s.to_core()).transpose();
  let job_cancel = cancel.clone();
  task::spawn(env, Some(&job_cancel), task::Priority::Interactive, move || {
    let paths = paths.to_core()?;
    let recall = core_retrieve::RecallOptions {
      cancel,
      feedback,
      session: session?,
      ..core_retrieve::RecallOptions::new(policy, mode?)
    };
    let opts = core_memory::MemoryOptions { recall, budget_chars: budget, typed_expansion };
    Ok(MemoryResponse::from(core_memory::recall_memory(&paths, &raw_query, &opts).map_err(core_err)?))
  })
}

/// Options of `neighbours`.
#[napi(object, object_to_js = false)]
pub struct NeighboursOptions {
  /// Hops from the page (default 1, at most 3).
  pub depth: Option<u32>,
  /// Edges followed (default `both`).
  #[napi(ts_type = "'outbound' | 'inbound' | 'both'")]
  pub direction: Option<String>,
  /// Output budget in bytes (default 32768).
  pub max_bytes: Option<u32>,
  /// Output budget in estimated tokens of `text` (default 2000, at most 10000 — more is clamped
  /// with a `budget_clamped` diagnostic; 0 is `invalid_argument`). With `maxBytes` both apply:
  /// the smaller one binds.
  pub budget_tokens: Option<f64>,
}

/// A page reached over links.
#[napi(object)]
pub struct GraphPage {
  pub id: String,
  pub title: String,
  #[napi(js_name = "type")]
  pub page_type: String,
  #[napi(ts_type = "'canonical' | 'evidence'")]
  pub role: String,
  pub status: Option<String>,
  pub path: String,
  /// Hops from the start page.
  pub depth: u32,
  /// True when a `supersedes` relation or a user resolution made the page historical.
  pub historical: bool,
}

impl From<&core_explore::GraphPage> for GraphPage {
  fn from(p: &core_explore::GraphPage) -> Self {
    GraphPage {
      id: p.id.clone(),
      title: p.title.clone(),
      page_type: p.page_type.clone(),
      role: p.role.clone(),
      status: p.status.clone(),
      path: p.path.clone(),
      depth: p.depth,
      historical: p.historical,
    }
  }
}

/// A typed relation carried by a link edge.
#[napi(object)]
pub struct EdgeRelation {
  #[napi(js_name = "type")]
  pub relation_type: String,
  pub scope: Option<String>,
}

/// A page edge: every body link from `from` to `to`, with the validated relations on it.
#[napi(object)]
pub struct GraphEdge {
  pub from: String,
  pub to: String,
  #[napi(ts_type = "'markdown' | 'wiki'")]
  pub kind: String,
  /// Heading / block anchors of the body links.
  pub anchors: Vec<String>,
  /// Line of the first body link in `from`.
  pub line: u32,
  pub relations: Vec<EdgeRelation>,
}

impl From<&core_explore::GraphEdge> for GraphEdge {
  fn from(e: &core_explore::GraphEdge) -> Self {
    GraphEdge {
      from: e.from.clone(),
      to: e.to.clone(),
      kind: match e.kind {
        llm_wiki_core::memory::links::LinkKind::Markdown => "markdown".into(),
        llm_wiki_core::memory::links::LinkKind::Wiki => "wiki".into(),
      },
      anchors: e.anchors.clone(),
      line: e.line,
      relations: e
        .relations
        .iter()
        .map(|r| EdgeRelation { relation_type: r.relation_type.clone(), scope: r.scope.clone() })
        .collect(),
    }
  }
}

use crate::graph_tools::diagnostics;

/// Result of `neighbours`.
#[napi(object)]
pub struct Neighbourhood {
  /// The page (absent when not indexed: see `diagnostics`).
  pub page: Option<GraphPage>,
  /// Its file text, cut at a sentence end to what the edges left of the budgets.
  pub content: String,
  pub outbound: Vec<GraphEdge>,
  pub inbound: Vec<GraphEdge>,
  /// Other pages reached, nearest first.
  pub pages: Vec<GraphPage>,
  /// Targets of the page's links that are no page of the vault.
  pub dangling: Vec<String>,
  pub truncated: bool,
  /// The page, its content and its edges rendered for an agent (within `budgetTokens`).
  pub text: String,
  /// Estimated tokens of `text`.
  pub tokens_used: u32,
  /// The token budget applied.
  pub budget_tokens: u32,
  pub diagnostics: Vec<RecallDiagnostic>,
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
) -> Result<PromiseRaw<'env, Neighbourhood>> {
  let (depth, direction, max_bytes, budget_tokens) = match opts {
    Some(o) => (o.depth, o.direction, o.max_bytes, o.budget_tokens),
    None => (None, None, None, None),
  };
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.to_core()?;
    let direction = direction.as_deref().map(core_explore::Direction::parse).transpose().map_err(core_err)?;
    let req = core_explore::NeighbourRequest {
      depth,
      direction,
      max_bytes: max_bytes.map(|b| b as usize),
      budget_tokens: crate::graph_tools::whole("budgetTokens", budget_tokens)?,
    };
    let n = core_explore::neighbours(&paths, &page_id, &req).map_err(core_err)?;
    Ok(Neighbourhood {
      page: n.page.as_ref().map(GraphPage::from),
      content: n.content,
      outbound: n.outbound.iter().map(GraphEdge::from).collect(),
      inbound: n.inbound.iter().map(GraphEdge::from).collect(),
      pages: n.pages.iter().map(GraphPage::from).collect(),
      dangling: n.dangling,
      truncated: n.truncated,
      text: n.text,
      tokens_used: n.tokens_used as u32,
      budget_tokens: n.budget_tokens as u32,
      diagnostics: diagnostics(&n.diagnostics),
    })
  })
}

/// Options of `linkPath`.
#[napi(object, object_to_js = false)]
pub struct LinkPathOptions {
  /// Longest path searched (default 4, at most 8).
  pub max_hops: Option<u32>,
}

/// One step of a link path.
#[napi(object)]
pub struct PathHop {
  pub edge: GraphEdge,
  /// True when the path walks the link backwards (from `edge.to` to `edge.from`).
  pub reversed: bool,
}

/// Result of `linkPath`.
#[napi(object)]
pub struct LinkPath {
  pub found: bool,
  /// Pages along the path, `from` first.
  pub pages: Vec<GraphPage>,
  pub hops: Vec<PathHop>,
  pub diagnostics: Vec<RecallDiagnostic>,
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
) -> Result<PromiseRaw<'env, LinkPath>> {
  let max_hops = opts.and_then(|o| o.max_hops).unwrap_or(4);
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.to_core()?;
    let p = core_explore::link_path(&paths, &from, &to, max_hops).map_err(core_err)?;
    Ok(LinkPath {
      found: p.found,
      pages: p.pages.iter().map(GraphPage::from).collect(),
      hops: p.hops.iter().map(|h| PathHop { edge: GraphEdge::from(&h.edge), reversed: h.reversed }).collect(),
      diagnostics: diagnostics(&p.diagnostics),
    })
  })
}
