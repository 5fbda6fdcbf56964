//! `recallWiki`: policy → vaults → per-vault ranked lists with absolute confidence → bounded
//! multiplier and floor → cross-vault rank fusion (project precedence) → results.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::confidence::{bounded_multiplier, final_score, AUTOMATIC_FLOOR, EXPLICIT_FLOOR};
use super::engine::{open_snapshot, Unavailable};
use super::fusion::{fuse_layers, LayerItem, VaultKind};
use super::lexical::query_terms;
use super::modes::{run_mode, ModeContext, RetrievalMode, SubQuery, VaultHit};
use super::query::{normalize_query, normalize_subqueries};
use super::trust::{now_secs, trust_of};
use crate::error::{Error, Result};
use crate::feedback::ledger::{self, ShownEntry};
use crate::feedback::projection::{self, has_stream, Projection};
use crate::feedback::shape::skip_reason;
use crate::util::num::sat_u32;
use crate::util::CancelFlag;
use crate::vault::config::{intent_of, read_config};
use crate::vault::paths::{is_personal_vault, personal_vault_paths};
use crate::vault::{Role, VaultPaths};

/// Label the extension shows next to personal-vault hits.
pub const PERSONAL_LABEL: &str = "📓 personal";

/// Recall policy (the phase-3 plan's `RecallPolicy`): how many results, from which vaults, above
/// which floor.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_to_js = false))]
#[derive(Debug, Clone, PartialEq)]
pub struct RecallPolicy {
  /// Also search the personal vault (explicit recall: true; automatic: false).
  pub include_personal: bool,
  /// Floor on the final bounded score (confidence × multiplier; explicit 0.25, automatic 0.50);
  /// within [0, 1].
  pub min_score: f64,
  /// Candidates per vault before fusion (both policies: 10; 1..=1000).
  pub max_per_vault: u32,
  /// Results returned (explicit: `max_results` ≤ 10, default 5; automatic: 3; 1..=1000).
  pub max_results: u32,
}

impl RecallPolicy {
  /// Explicit recall (`wiki_recall`, MCP): both vaults, floor 0.25, `max_results` default 5, max 10.
  pub fn explicit(max_results: Option<usize>) -> Self {
    RecallPolicy {
      include_personal: true,
      min_score: EXPLICIT_FLOOR,
      max_per_vault: 10,
      max_results: sat_u32(max_results.unwrap_or(5).clamp(1, 10)),
    }
  }

  /// Automatic recall (`before_agent_start`): active vault only, floor 0.50, 3 results.
  pub fn automatic() -> Self {
    RecallPolicy { include_personal: false, min_score: AUTOMATIC_FLOOR, max_per_vault: 10, max_results: 3 }
  }

  fn validate(&self) -> Result<()> {
    if !(0.0..=1.0).contains(&self.min_score) || self.min_score.is_nan() {
      return Err(Error::invalid(format!("minScore must be within [0, 1], got {}", self.min_score)));
    }
    if self.max_results == 0
      || self.max_results > 1000
      || self.max_per_vault == 0
      || self.max_per_vault > 1000
    {
      return Err(Error::invalid("maxResults and maxPerVault must be within 1..=1000"));
    }
    Ok(())
  }
}

/// Which confidence a recall's floor and scores act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scoring {
  /// The pages' confidence ([`VaultHit::confidence`]): explicit recall, rankings.
  Explicit,
  /// Automatic recall: lexical evidence counts by the salient weight the page matched
  /// ([`VaultHit::automatic_confidence`], [`super::confidence::specificity`]), so a prompt of
  /// words common in the vault does not inject a page that happens to contain them. Never above
  /// the explicit confidence.
  Automatic,
}

impl Scoring {
  /// The scoring a policy implies: automatic for the active vault alone with a floor at or
  /// above the automatic floor (what the extension's `before_agent_start` asks for), explicit
  /// otherwise — a caller that lowers the floor (or searches the personal vault) asked on purpose.
  pub fn of_policy(policy: &RecallPolicy) -> Self {
    if !policy.include_personal && policy.min_score >= AUTOMATIC_FLOOR {
      Scoring::Automatic
    } else {
      Scoring::Explicit
    }
  }
}

/// Options of a recall.
#[derive(Debug, Clone)]
pub struct RecallOptions {
  /// How many results, from which vaults, above which score.
  pub policy: RecallPolicy,
  /// Which confidence the floor and the scores use (default: [`Scoring::of_policy`]).
  pub scoring: Scoring,
  /// Retrieval mode.
  pub mode: RetrievalMode,
  /// Cancellation, checked between stages.
  pub cancel: CancelFlag,
  /// Typed sub-queries (`lex` / `vec`); empty = the query itself for both lists.
  pub subqueries: Vec<SubQuery>,
  /// Time budget of the cross-encoder (the fused ranking is kept when it runs out).
  pub rerank_timeout: Duration,
  /// Quality mode without a cross-encoder: rescore the top of the pool by sentence-window
  /// embeddings. Off by default: it measured below the fused ranking on SciFact and the pi
  /// fixture (docs/DECISIONS.md) and costs ~0.5 s per query on 2 cores.
  pub sentence_rescore: bool,
  /// Apply the feedback term of the vaults' projections (default true; false = the spec's
  /// "without feedback adjustments" ablation).
  pub feedback: bool,
  /// The host session this recall belongs to (see [`SessionRecall`]).
  pub session: Option<SessionRecall>,
}

/// Session-aware recall. Results are offered to the session ledger (explicit judgments need
/// them; [`crate::feedback::record::confirm_shown`] marks them delivered). For automatic recall
/// (no personal vault) also: prompts that are not recall-shaped skip recall
/// ([`crate::feedback::shape`]), a page already injected in the session is not injected again
/// unless its content changed, and `budget_chars` is shared by the session's injections.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_to_js = false, js_name = "RecallSession"))]
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecall {
  /// Host session id (any non-empty string, stable for the session).
  pub id: String,
  /// Characters all automatic injections of the session may take together (default: no cap).
  pub budget_chars: Option<u32>,
}

impl SessionRecall {
  /// `invalid_argument` for a blank session id.
  pub fn check(&self) -> Result<()> {
    if self.id.trim().is_empty() {
      return Err(Error::invalid("session.id must be a non-empty string"));
    }
    Ok(())
  }
}

/// Default cross-encoder time budget.
pub const DEFAULT_RERANK_TIMEOUT: Duration = Duration::from_millis(2_000);

impl RecallOptions {
  /// Options with a policy and mode and defaults for the rest.
  pub fn new(policy: RecallPolicy, mode: RetrievalMode) -> Self {
    RecallOptions {
      scoring: Scoring::of_policy(&policy),
      policy,
      mode,
      cancel: CancelFlag::new(),
      subqueries: Vec::new(),
      rerank_timeout: DEFAULT_RERANK_TIMEOUT,
      sentence_rescore: false,
      feedback: true,
      session: None,
    }
  }
}

/// One recalled page (the extension's `RecallResult` plus provenance).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecallResult {
  /// Page id (path under `wiki/` without `.md`).
  pub id: String,
  /// Page title.
  pub title: String,
  /// Frontmatter `type`.
  #[serde(rename = "type")]
  #[cfg_attr(feature = "napi", napi(js_name = "type"))]
  pub page_type: String,
  /// Best chunk `#<heading> — <≤180 chars>` (or its text when it has no heading).
  pub preview: String,
  /// Absolute path of the page file.
  pub path: String,
  /// `"📓 personal"` (`PERSONAL_LABEL`) for personal-vault hits.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub vault_label: Option<String>,
  /// Final bounded score: confidence × multiplier, in [0, 1]; the floors act on it.
  pub score: f64,
  /// Id of the vault the page is in.
  pub vault_id: String,
  /// `project` or `personal`.
  #[cfg_attr(feature = "napi", napi(ts_type = "'project' | 'personal'"))]
  pub vault: &'static str,
  /// Canonical or evidence page.
  #[cfg_attr(feature = "napi", napi(ts_type = "'canonical' | 'evidence'"))]
  pub role: Role,
  /// Frontmatter `status`, if any.
  pub status: Option<String>,
  /// Absolute confidence in [0, 1] before the multiplier.
  pub confidence: f64,
  /// Bounded multiplier applied in fusion (role, status, vault, verification), within
  /// `retrieve::confidence`'s clamp.
  pub multiplier: f64,
  /// Reciprocal-rank fusion key used for ordering.
  pub fusion_score: f64,
  /// 0-based rank in its vault's list.
  pub vault_rank: u32,
  /// The mode's raw score (BM25, fused RRF or cross-encoder probability).
  pub engine_score: f64,
  /// Heading of the passage shown.
  pub heading: Option<String>,
  /// Id of the chunk shown.
  pub chunk_id: String,
  /// First line of the passage in the page file (1-based).
  pub line_start: u32,
  /// Last line of the passage (1-based, inclusive).
  pub line_end: u32,
  /// Why the page matched (exact title, terms, vector, ...); `verified` when a current human
  /// verification raised the multiplier.
  pub match_reasons: Vec<String>,
  /// Current human verification (an OKF `verified` event by a person, not older than
  /// `generated.at`): +0.02 inside the multiplier's clamp.
  pub verified: bool,
  /// Trust warnings: `stale` (past `stale_after`), `verification_outdated`, `deprecated`; then
  /// `superseded` (a user resolution or a `supersedes` relation made the page historical) and
  /// `cites_superseded` (the page links to such a page).
  /// A warned page is never dropped for it.
  pub warnings: Vec<String>,
  /// Frontmatter `stale_after`, as written.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub stale_after: Option<String>,
}

/// `{code, message}` diagnostic of a recall (declared on the ground floor: the feedback ledger and
/// the tool audit below recall report with it too).
pub use crate::util::diagnostic::RecallDiagnostic;

/// The mode one vault answered with.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VaultMode {
  /// Id of the vault.
  pub vault_id: String,
  /// `project` or `personal`.
  #[cfg_attr(feature = "napi", napi(ts_type = "'project' | 'personal'"))]
  pub vault: &'static str,
  /// Mode the vault actually ran (after fallbacks).
  #[cfg_attr(feature = "napi", napi(ts_type = "'lexical' | 'hybrid' | 'adaptive' | 'quality'"))]
  pub mode: RetrievalMode,
  /// The requested mode, when the vault fell back from it (adaptive staying hybrid is not a
  /// fallback).
  #[serde(skip_serializing_if = "Option::is_none")]
  #[cfg_attr(feature = "napi", napi(ts_type = "'lexical' | 'hybrid' | 'adaptive' | 'quality'"))]
  pub fallback_from: Option<RetrievalMode>,
  /// Code of the first diagnostic of the fallback (`qmd_vectors_missing`, ...), if any.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub reason: Option<String>,
}

/// Order of modes from least to most capable: lexical < hybrid < adaptive < quality.
fn mode_level(m: RetrievalMode) -> u8 {
  match m {
    RetrievalMode::Lexical => 0,
    RetrievalMode::Hybrid => 1,
    RetrievalMode::Adaptive => 2,
    RetrievalMode::Quality => 3,
  }
}

/// Whether a vault that was asked for `requested` and ran `used` fell back. Adaptive runs as
/// hybrid or quality by design (its escalation rule), so only lexical counts as its fallback.
pub fn is_fallback(requested: RetrievalMode, used: RetrievalMode) -> bool {
  match requested {
    RetrievalMode::Lexical => false,
    RetrievalMode::Hybrid | RetrievalMode::Adaptive => used == RetrievalMode::Lexical,
    RetrievalMode::Quality => used != RetrievalMode::Quality,
  }
}

/// Overall mode of a recall: the least capable mode any answering vault ran (lexical <
/// hybrid < adaptive < quality), so `mode` never claims more than every result had; the
/// requested mode when no vault answered.
pub fn overall_mode(requested: RetrievalMode, vaults: &[VaultMode]) -> RetrievalMode {
  vaults.iter().map(|v| v.mode).min_by_key(|m| mode_level(*m)).unwrap_or(requested)
}

/// Result of `recallWiki`. Empty `results` ("no reliable memory") is a valid outcome.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecallResponse {
  /// Results, best first.
  pub results: Vec<RecallResult>,
  /// Fallbacks and failures, per vault.
  pub diagnostics: Vec<RecallDiagnostic>,
  /// Every stage and fallback that ran (the CLI's `--explain`).
  pub trace: Vec<String>,
  /// Overall mode: the least capable mode any answering vault ran (lexical < hybrid <
  /// adaptive < quality); the requested mode when no vault answered. Per vault: `vaultModes`.
  #[cfg_attr(feature = "napi", napi(ts_type = "'lexical' | 'hybrid' | 'adaptive' | 'quality'"))]
  pub mode: RetrievalMode,
  /// Mode of each vault that answered (opened its index and ran), in search order.
  pub vault_modes: Vec<VaultMode>,
}

/// Vaults searched by a policy: the active vault, plus the personal one for explicit recall
/// when it is a different vault with a config.
pub fn recall_vaults(active: &VaultPaths, policy: &RecallPolicy) -> Vec<(VaultPaths, VaultKind)> {
  let active_is_personal = is_personal_vault(active);
  let mut out =
    vec![(active.clone(), if active_is_personal { VaultKind::Personal } else { VaultKind::Project })];
  if policy.include_personal && !active_is_personal {
    let personal = personal_vault_paths();
    if personal.config_file().is_file() && personal.root != active.root {
      out.push((personal, VaultKind::Personal));
    }
  }
  out
}

struct VaultOutcome {
  kind: VaultKind,
  paths: VaultPaths,
  hits: Vec<(VaultHit, f64, f64)>,
  snap: super::engine::Snapshot,
  now: i64,
  mode: RetrievalMode,
  feedback: Vec<f64>,
}

/// Estimated characters a result takes when injected (title, id, preview and a little markup).
pub fn result_chars(r: &RecallResult) -> usize {
  r.title.chars().count() + r.id.chars().count() + r.preview.chars().count() + 16
}

/// The feedback projection recall uses for a vault, or `None` (no stream, or feedback off).
/// A malformed stream yields a disabled projection (term 0) and a diagnostic.
fn feedback_projection(paths: &VaultPaths, enabled: bool, now: i64) -> Option<std::sync::Arc<Projection>> {
  (enabled && has_stream(&paths.meta)).then(|| projection::current(&paths.meta, now))
}

/// What one recall asks of every vault: the checked query, its terms and sub-queries, the
/// options, and whether it is automatic (quiet, session-aware).
struct Ask<'a> {
  query: &'a str,
  terms: &'a [String],
  subqueries: &'a [SubQuery],
  qhash: &'a str,
  now: i64,
  automatic: bool,
  /// The session of an automatic recall (what it already injected is suppressed).
  session_auto: Option<&'a SessionRecall>,
  opts: &'a RecallOptions,
}

/// What a recall reports besides its results: the trace, the diagnostics and each vault's mode.
#[derive(Default)]
struct Report {
  trace: Vec<String>,
  diagnostics: Vec<RecallDiagnostic>,
  vault_modes: Vec<VaultMode>,
}

/// Recall from the vaults of `active` under `opts`.
pub fn recall_wiki(active: &VaultPaths, raw_query: &str, opts: &RecallOptions) -> Result<RecallResponse> {
  opts.policy.validate()?;
  let (query, subqueries) = match checked_queries(raw_query, opts)? {
    Ok(q) => q,
    Err(rejected) => return Ok(rejected),
  };
  let automatic = !opts.policy.include_personal;
  let session_auto = opts.session.as_ref().filter(|_| automatic);
  if let Some(s) = session_auto {
    if let Some(skipped) = skip_session_recall(active, raw_query, s, opts) {
      return Ok(skipped);
    }
  }
  let mut report = Report::default();
  let qhash = crate::feedback::query_hash(&query);
  let terms = query_terms(&query);
  report.trace.push(format!("query:{} terms", terms.len()));
  if opts.scoring == Scoring::Automatic {
    report.trace.push("scoring:automatic (lexical evidence counts by its specificity)".into());
  }
  let ask = Ask {
    query: &query,
    terms: &terms,
    subqueries: &subqueries,
    qhash: &qhash,
    now: now_secs(),
    automatic,
    session_auto,
    opts,
  };
  let mut outcomes: Vec<VaultOutcome> = Vec::new();
  for (paths, kind) in recall_vaults(active, &opts.policy) {
    opts.cancel.check()?;
    outcomes.extend(recall_vault(paths, kind, &ask, &mut report)?);
  }
  let results = fused_results(&outcomes, &ask, &mut report.trace)?;
  let mode = overall_mode(opts.mode, &report.vault_modes);
  let Report { trace, diagnostics, vault_modes } = report;
  Ok(RecallResponse { results, diagnostics, trace, mode, vault_modes })
}

/// The normalized query and sub-queries, or the response that rejects them (empty, too long).
fn checked_queries(
  raw_query: &str,
  opts: &RecallOptions,
) -> Result<std::result::Result<(String, Vec<SubQuery>), RecallResponse>> {
  let rejected = |e: Error, what: String| RecallResponse {
    results: vec![],
    diagnostics: vec![RecallDiagnostic::new(e.code(), format!("{what}{e}"))],
    trace: vec![format!("query:rejected:{}", e.code())],
    mode: opts.mode,
    vault_modes: vec![],
  };
  let query = match normalize_query(raw_query) {
    Ok(q) => q,
    Err(e @ (Error::QueryEmpty | Error::QueryTooLong { .. })) => return Ok(Err(rejected(e, String::new()))),
    Err(e) => return Err(e),
  };
  // Sub-queries pass the same checks as the query (and a count limit).
  let subqueries = match normalize_subqueries(&opts.subqueries) {
    Ok(s) => s,
    Err((Some(i), e @ (Error::QueryEmpty | Error::QueryTooLong { .. }))) => {
      return Ok(Err(rejected(e, format!("subqueries[{i}]: "))))
    }
    Err((_, e)) => return Err(e),
  };
  Ok(Ok((query, subqueries)))
}

/// An automatic recall of session `s` that is skipped (the prompt is not recall-shaped, or the
/// session's budget is spent): the empty response saying why. What another process of the
/// session (before a restart) injected is loaded first: it counts here too.
fn skip_session_recall(
  active: &VaultPaths,
  raw_query: &str,
  s: &SessionRecall,
  opts: &RecallOptions,
) -> Option<RecallResponse> {
  crate::feedback::persist::hydrate(&active.meta, &s.id, crate::retrieve::trust::now_secs());
  // The raw prompt: normalization folds the lines a pasted trace is recognized by.
  let (code, message) = skip_reason(raw_query)
    .map(|r| (r.code(), "the prompt is not recall-shaped".to_string()))
    .or_else(|| {
      s.budget_chars
        .filter(|b| ledger::remaining_budget(&s.id, *b as usize) == 0)
        .map(|b| ("recall_session_budget_spent", format!("the session's {b}-character budget is spent")))
    })?;
  ledger::offer(&s.id, vec![]);
  Some(RecallResponse {
    results: vec![],
    diagnostics: vec![RecallDiagnostic::new(code, message)],
    trace: vec![format!("session:skipped:{code}")],
    mode: opts.mode,
    vault_modes: vec![],
  })
}

/// Recall from one vault: its snapshot opened (`None` when it is not ready or cannot open), the
/// mode run, and its hits scored and kept above the floor.
fn recall_vault(
  paths: VaultPaths,
  kind: VaultKind,
  ask: &Ask,
  report: &mut Report,
) -> Result<Option<VaultOutcome>> {
  let opts = ask.opts;
  let started = Instant::now();
  let Some(mut snap) = open_vault(&paths, kind, ask.automatic, report) else { return Ok(None) };
  let outcome = run_following_swap(&paths, &mut snap, ask, &mut report.trace)?;
  let reason = outcome.diagnostics.first().map(|(c, _)| c.to_string());
  for (code, message) in outcome.diagnostics {
    // Automatic recall stays quiet; explicit recall explains degraded modes.
    if !ask.automatic {
      report.diagnostics.push(RecallDiagnostic::new(code, format!("{} vault: {message}", kind.as_str())));
    }
  }
  let (hits, mode) = (outcome.hits, outcome.used);
  let fell_back = is_fallback(opts.mode, mode);
  report.vault_modes.push(VaultMode {
    vault_id: snap.manifest.vault_id.clone(),
    vault: kind.as_str(),
    mode,
    fallback_from: fell_back.then_some(opts.mode),
    reason: if fell_back { reason } else { None },
  });
  let total = hits.len();
  let fb = feedback_projection(&paths, opts.feedback, ask.now);
  if let Some(why) = fb.as_ref().and_then(|p| p.corrupt.as_deref()) {
    report.trace.push(format!("feedback:{}:disabled", kind.as_str()));
    if !ask.automatic {
      report.diagnostics.push(corrupt_diagnostic(why));
    }
  }
  let (kept, feedback, suppressed) = score_hits(hits, &snap, fb.as_deref(), ask);
  if suppressed > 0 {
    report.trace.push(format!("session:{}:{suppressed} already injected, unchanged", kind.as_str()));
  }
  report.trace.push(format!(
    "vault:{}:{}:{} candidates, {} above floor {:.2} ({:.1} ms)",
    kind.as_str(),
    mode.as_str(),
    total,
    kept.len(),
    opts.policy.min_score,
    started.elapsed().as_secs_f64() * 1000.0
  ));
  Ok(Some(VaultOutcome { kind, paths, hits: kept, snap, now: ask.now, mode, feedback }))
}

/// The vault's index snapshot, or `None` with the reason traced (and, for explicit recall, a
/// diagnostic).
fn open_vault(
  paths: &VaultPaths,
  kind: VaultKind,
  automatic: bool,
  report: &mut Report,
) -> Option<super::engine::Snapshot> {
  match open_snapshot(paths) {
    Ok(s) => Some(s),
    Err(Unavailable::NotReady(nr)) => {
      report.trace.push(format!("vault:{}:skipped:{}", kind.as_str(), nr.code));
      if !automatic {
        report
          .diagnostics
          .push(RecallDiagnostic::new(nr.code, format!("{} vault: {}", kind.as_str(), nr.message)));
      }
      None
    }
    Err(Unavailable::Failed(e)) => {
      report.trace.push(format!("vault:{}:unavailable:{}", kind.as_str(), e.code()));
      if !automatic {
        report.diagnostics.push(RecallDiagnostic::new(
          "qmd_index_error",
          format!("{} vault index cannot open: {e}", kind.as_str()),
        ));
      }
      None
    }
  }
}

/// Run the mode on `snap`. Vectors are opened on first use: when a newer commit (or a rebuild's
/// new store) removed the snapshot's segment files in between, they cannot open; the newer
/// state (once) answers, and becomes `snap`.
fn run_following_swap(
  paths: &VaultPaths,
  snap: &mut super::engine::Snapshot,
  ask: &Ask,
  trace: &mut Vec<String>,
) -> Result<super::modes::ModeOutcome> {
  let opts = ask.opts;
  let intent = read_config(paths).ok().as_ref().and_then(intent_of);
  let mut followed_swap = false;
  loop {
    let ctx = ModeContext {
      snap,
      query: ask.query,
      terms: ask.terms,
      subqueries: ask.subqueries,
      limit: opts.policy.max_per_vault as usize,
      intent: intent.clone(),
      rerank_timeout: opts.rerank_timeout,
      sentence_rescore: opts.sentence_rescore,
      cancel: &opts.cancel,
    };
    let mut vault_trace = Vec::new();
    let outcome = run_mode(&ctx, opts.mode, &mut vault_trace)?;
    if !followed_swap && outcome.diagnostics.iter().any(|(c, _)| *c == "qmd_index_error") {
      if let Ok(newer) = open_snapshot(paths) {
        if newer.generation != snap.generation || newer.reader.store != snap.reader.store {
          followed_swap = true;
          *snap = newer;
          continue;
        }
      }
    }
    trace.extend(vault_trace);
    return Ok(outcome);
  }
}

/// The hits of one vault with their bounded multiplier and final score, those above the floor,
/// with each one's feedback term; and how many the session had already injected (suppressed).
#[allow(clippy::type_complexity)]
fn score_hits(
  hits: Vec<VaultHit>,
  snap: &super::engine::Snapshot,
  fb: Option<&Projection>,
  ask: &Ask,
) -> (Vec<(VaultHit, f64, f64)>, Vec<f64>, usize) {
  let opts = ask.opts;
  let now = ask.now;
  let vault_id = &snap.manifest.vault_id;
  let mut suppressed = 0usize;
  let mut feedback = Vec::new();
  let kept = hits
    .into_iter()
    .filter_map(|mut h| {
      let entry = snap.manifest.entries.get(&h.page_id)?;
      if opts.scoring == Scoring::Automatic {
        h.confidence = h.automatic_confidence;
      }
      if ask
        .session_auto
        .is_some_and(|s| ledger::already_injected(&s.id, vault_id, &h.page_id, &entry.content_hash))
      {
        suppressed += 1;
        return None;
      }
      let verified = trust_of(&entry.meta, now).verified;
      // The spec's feedback term: bounded ±0.02, after retrieval, candidates only.
      let f = fb.map_or(0.0, |p| p.term(vault_id, &h.page_id, ask.qhash, now));
      let m = bounded_multiplier(h.exact.is_some(), entry.role, entry.meta.status.as_deref(), verified, f);
      let score = final_score(h.confidence, m);
      (score >= opts.policy.min_score).then(|| {
        feedback.push(f);
        (h, m, score)
      })
    })
    .collect();
  (kept, feedback, suppressed)
}

/// The vaults' kept hits fused by rank (project precedence), built into results with their
/// supersession warnings, up to the policy's count and the session's budget; what is returned is
/// offered to the session's ledger.
fn fused_results(outcomes: &[VaultOutcome], ask: &Ask, trace: &mut Vec<String>) -> Result<Vec<RecallResult>> {
  let opts = ask.opts;
  let layers: Vec<Vec<LayerItem<(usize, usize)>>> = outcomes
    .iter()
    .enumerate()
    .map(|(vi, o)| {
      o.hits
        .iter()
        .enumerate()
        .map(|(hi, (h, m, _))| LayerItem {
          page_id: h.page_id.clone(),
          vault: o.kind,
          rank: h.rank,
          multiplier: *m,
          payload: (vi, hi),
        })
        .collect()
    })
    .collect();
  let fused = fuse_layers(layers);
  trace.push(format!(
    "fusion:rrf k=60 over {} vault(s) -> {} result(s)",
    outcomes.len(),
    fused.len().min(opts.policy.max_results as usize)
  ));
  let mut results = Vec::new();
  // Historical pages and pages citing them (user resolutions, `supersedes` relations): the
  // vault's supersession decisions, derived once per generation, only where some page can
  // supersede another.
  let mut decisions: Vec<Option<Option<std::sync::Arc<crate::memory::resolve::Decisions>>>> =
    vec![None; outcomes.len()];
  let mut offered = Vec::new();
  let mut budget_left =
    ask.session_auto.and_then(|s| s.budget_chars.map(|b| ledger::remaining_budget(&s.id, b as usize)));
  for f in fused.into_iter().take(opts.policy.max_results as usize) {
    let (vi, hi) = f.item.payload;
    let o = &outcomes[vi];
    let (h, m, score) = &o.hits[hi];
    let mut r = build_result(o, h, ask.terms, *m, *score, f.key)?;
    let g = decisions[vi].get_or_insert_with(|| {
      crate::memory::graph::supersession_for(&o.snap.reader.store.dir, &o.snap.manifest)
    });
    if let Some(g) = g {
      r.warnings.extend(g.warning_codes(&r.id).into_iter().map(str::to_string));
    }
    if o.feedback[hi] != 0.0 {
      r.match_reasons.push("feedback".to_string());
    }
    let chars = result_chars(&r);
    if let Some(left) = budget_left.as_mut() {
      if chars > *left {
        trace.push(format!("session:budget:{} left, {} stops", *left, r.id));
        break;
      }
      *left -= chars;
    }
    if opts.session.is_some() {
      let entry = &o.snap.manifest.entries[&h.page_id];
      offered.push(ShownEntry {
        vault_id: r.vault_id.clone(),
        page_id: r.id.clone(),
        query_hash: ask.qhash.to_string(),
        rank: results.len() as u32,
        mode: o.mode.as_str().to_string(),
        index_version: format!("{}:{}", o.snap.manifest.version, o.snap.generation),
        model_version: o.snap.manifest.chunker.clone(),
        content_hash: entry.content_hash.clone(),
        chars,
        automatic: ask.automatic,
      });
    }
    results.push(r);
  }
  if let Some(s) = &opts.session {
    ledger::offer(&s.id, offered);
  }
  Ok(results)
}

fn build_result(
  o: &VaultOutcome,
  h: &VaultHit,
  terms: &[String],
  multiplier: f64,
  score: f64,
  key: f64,
) -> Result<RecallResult> {
  let entry = &o.snap.manifest.entries[&h.page_id];
  let trust = trust_of(&entry.meta, o.now);
  let mut match_reasons = h.reasons.clone();
  if trust.verified {
    match_reasons.push("verified".to_string());
  }
  let lex = &o.snap.reader.lexical;
  let addr = match h.chunk {
    Some(a) => a,
    None => lex
      .best_chunk(&o.snap.searcher, &h.page_id, terms)?
      .ok_or_else(|| Error::Index(format!("page {} has no chunk documents", h.page_id)))?,
  };
  let chunk = lex.chunk_doc(&o.snap.searcher, addr)?;
  let heading = chunk.heading_path.rsplit(" › ").next().filter(|s| !s.is_empty()).map(str::to_string);
  let mut content: String = chunk.source.split_whitespace().collect::<Vec<_>>().join(" ");
  if content.is_empty() {
    content = entry.meta.description.clone().or_else(|| entry.meta.summary.clone()).unwrap_or_default();
  }
  let content: String = content.chars().take(180).collect();
  let preview = match &heading {
    Some(hd) if content.is_empty() => format!("#{hd}"),
    Some(hd) => format!("#{hd} — {content}"),
    None => content,
  };
  Ok(RecallResult {
    id: h.page_id.clone(),
    title: entry.meta.title.clone(),
    page_type: entry.meta.page_type.clone(),
    preview,
    path: crate::vault::discover::resolve_page_file(&o.paths.wiki, &entry.rel_path)
      .to_string_lossy()
      .into_owned(),
    vault_label: (o.kind == VaultKind::Personal).then(|| PERSONAL_LABEL.to_string()),
    score,
    vault_id: o.snap.manifest.vault_id.clone(),
    vault: o.kind.as_str(),
    role: entry.role,
    status: entry.meta.status.clone(),
    confidence: h.confidence,
    multiplier,
    fusion_score: key,
    vault_rank: h.rank as u32,
    engine_score: h.engine_score,
    heading,
    chunk_id: chunk.chunk_id,
    line_start: chunk.line_start,
    line_end: chunk.line_end,
    match_reasons,
    verified: trust.verified,
    warnings: trust.warnings.iter().map(|w| w.to_string()).collect(),
    stale_after: entry.meta.stale_after.clone(),
  })
}

/// The diagnostic of a malformed stream.
pub fn corrupt_diagnostic(why: &str) -> RecallDiagnostic {
  RecallDiagnostic {
    code: "feedback_events_corrupt".into(),
    message: format!("feedback adjustments are disabled: {why}; the stream and the last projection are kept"),
  }
}

#[cfg(test)]
mod tests;
