//! `recallMemory`: recall candidates (the normal recall pipeline, more candidates than results)
//! → exact excerpts → bundles with one typed hop → packed context.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;

use super::bundle::{
  assemble, page_warnings, render_bundles, render_links, truncate_chars, AssemblyOptions, Freshness,
  MemoryBundle, MemoryItem, MemorySource, MAX_EXCERPT_CHARS,
};
use super::graph::{graph_for, LinkGraph};
use crate::error::Result;
use crate::feedback::ledger::{self, ShownEntry};
use crate::retrieve::engine::{open_snapshot, Snapshot};
use crate::retrieve::lexical::query_terms;
use crate::retrieve::recall::{
  recall_vaults, recall_wiki, RecallDiagnostic, RecallOptions, RecallResult, PERSONAL_LABEL,
};
use crate::retrieve::trust::now_secs;
use crate::retrieve::RetrievalMode;
use crate::util::num::sat_u32;
use crate::vault::{PageMeta, VaultPaths};

/// Candidates asked of recall for grouping (the spec's per-vault candidate count).
pub const MEMORY_CANDIDATES: usize = 10;

/// Options of a memory recall.
#[derive(Debug, Clone)]
pub struct MemoryOptions {
  /// The recall options (policy `max_results` = bundles returned).
  pub recall: RecallOptions,
  /// Context budget in characters (default 8,000).
  pub budget_chars: usize,
  /// Typed-link expansion (off = ablation).
  pub typed_expansion: bool,
}

/// Result of `recallMemory`.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryResponse {
  /// Bundles, best first.
  pub bundles: Vec<MemoryBundle>,
  /// The bundles rendered for injection, or links-first lines when none fits the budget.
  pub context: String,
  /// Fallbacks and failures.
  pub diagnostics: Vec<RecallDiagnostic>,
  /// What ran.
  pub trace: Vec<String>,
  /// Mode used after fallbacks.
  #[cfg_attr(feature = "napi", napi(ts_type = "'lexical' | 'hybrid' | 'adaptive' | 'quality'"))]
  pub mode: RetrievalMode,
}

/// Lines `start..=end` (1-based) of page file `path` under `wiki`, or `None` (also when the file
/// is no longer a regular page file within the indexing cap: [`crate::vault::read`]).
fn file_lines(wiki: &std::path::Path, path: &str, start: u32, end: u32) -> Option<String> {
  let bytes =
    crate::vault::read::read_page_at(wiki, std::path::Path::new(path), crate::vault::read::MAX_PAGE_BYTES)
      .ok()?;
  let text = String::from_utf8(bytes).ok()?.replace("\r\n", "\n");
  let lines: Vec<&str> = text
    .split('\n')
    .skip(start.saturating_sub(1) as usize)
    .take((end.saturating_sub(start) + 1) as usize)
    .collect();
  let s = lines.join("\n").trim().to_string();
  (!s.is_empty()).then_some(s)
}

struct Source {
  vaults: HashMap<&'static str, (VaultPaths, Snapshot, Arc<LinkGraph>)>,
  terms: Vec<String>,
  now: i64,
}

impl MemorySource for Source {
  fn graph(&self, vault: &str) -> Option<&LinkGraph> {
    self.vaults.get(vault).map(|(_, _, g)| g.as_ref())
  }

  fn admit(&mut self, vault: &str, page_id: &str) -> Option<MemoryItem> {
    let (paths, snap, _) = self.vaults.get(vault)?;
    let entry = snap.manifest.entries.get(page_id)?;
    let lex = &snap.reader.lexical;
    let chunk = lex
      .best_chunk(&snap.searcher, page_id, &self.terms)
      .ok()
      .flatten()
      .and_then(|a| lex.chunk_doc(&snap.searcher, a).ok());
    let path =
      crate::vault::discover::resolve_page_file(&paths.wiki, &entry.rel_path).to_string_lossy().into_owned();
    let (heading, start, end, source) = match &chunk {
      Some(c) => (
        c.heading_path.rsplit(" › ").next().filter(|s| !s.is_empty()).map(str::to_string),
        c.line_start,
        c.line_end,
        c.source.clone(),
      ),
      None => (None, 0, 0, entry.meta.description.clone().unwrap_or_default()),
    };
    let excerpt = file_lines(&paths.wiki, &path, start, end).unwrap_or(source);
    Some(MemoryItem {
      vault: vault.to_string(),
      vault_id: snap.manifest.vault_id.clone(),
      vault_label: (vault == "personal").then(|| PERSONAL_LABEL.to_string()),
      page_id: page_id.to_string(),
      path,
      title: entry.meta.title.clone(),
      page_type: entry.meta.page_type.clone(),
      role: entry.role.as_str().to_string(),
      status: entry.meta.status.clone(),
      domain: entry.meta.domain.clone(),
      scope: entry.meta.scope.clone(),
      date: entry.meta.date().map(str::to_string),
      freshness: Freshness::of(&entry.meta, self.now),
      heading,
      excerpt: truncate_chars(&excerpt, MAX_EXCERPT_CHARS),
      line_start: start,
      line_end: end,
      qmd_rank: None,
      qmd_score: None,
      score: 0.0,
      match_reasons: vec![],
      relation: String::new(),
      relation_direction: None,
      related_to: None,
      historical: false,
      warnings: page_warnings(&entry.meta, self.now),
    })
  }
}

/// Recall memory bundles for `raw_query` from the vaults of `active`.
pub fn recall_memory(active: &VaultPaths, raw_query: &str, opts: &MemoryOptions) -> Result<MemoryResponse> {
  let max_bundles = opts.recall.policy.max_results as usize;
  let mut candidate_opts = opts.recall.clone();
  candidate_opts.policy.max_results = sat_u32(MEMORY_CANDIDATES.max(max_bundles));
  // A session budget caps the rendered context (the candidates' own estimate is not what is
  // injected); a spent budget still makes the recall skip.
  let session_automatic = opts.recall.session.as_ref().filter(|_| !opts.recall.policy.include_personal);
  if let Some(s) = session_automatic {
    crate::feedback::persist::hydrate(&active.meta, &s.id, crate::retrieve::trust::now_secs());
  }
  let mut budget_chars = opts.budget_chars;
  if let (Some(s), Some(cs)) = (session_automatic, candidate_opts.session.as_mut()) {
    if let Some(b) = s.budget_chars {
      let left = ledger::remaining_budget(&s.id, b as usize);
      budget_chars = budget_chars.min(left);
      if left > 0 {
        cs.budget_chars = None;
      }
    }
  }
  let response = recall_wiki(active, raw_query, &candidate_opts)?;
  let mut trace = response.trace;
  let mut vaults = HashMap::new();
  for (paths, kind) in recall_vaults(active, &candidate_opts.policy) {
    if !response.results.iter().any(|r| r.vault == kind.as_str()) {
      continue;
    }
    if let Ok(snap) = open_snapshot(&paths) {
      let g = graph_for(&snap.reader.store.dir, &snap.manifest);
      vaults.insert(kind.as_str(), (paths, snap, g));
    }
  }
  let now = now_secs();
  // Resolution records are rendered as `bundle.resolution`, not as cards of their own.
  let is_record = |vault: &str, id: &str| {
    vaults.get(vault).is_some_and(|(_, _, g)| g.decisions.resolutions.is_record_page(id))
  };
  let candidates: Vec<MemoryItem> = response
    .results
    .iter()
    .filter(|r| !is_record(r.vault, &r.id))
    .map(|r| candidate(r, &vaults, now))
    .collect();
  let mut source = Source { vaults, terms: query_terms(raw_query), now };
  let assembly = AssemblyOptions { max_bundles, budget_chars, typed_expansion: opts.typed_expansion };
  let bundles = assemble(&candidates, &mut source, &assembly);
  let admitted = bundles
    .iter()
    .flat_map(|b| b.evidence.iter().chain(&b.conflicts))
    .filter(|i| i.qmd_rank.is_none())
    .count();
  trace.push(format!(
    "memory:{} candidate(s) -> {} bundle(s), {admitted} admitted by relations (typed expansion {})",
    candidates.len(),
    bundles.len(),
    if opts.typed_expansion { "on" } else { "off" }
  ));
  let mut diagnostics = response.diagnostics;
  let context = if bundles.is_empty() && !candidates.is_empty() {
    diagnostics.push(RecallDiagnostic {
      code: "memory_budget_too_small".into(),
      message: format!("no bundle fits {budget_chars} characters; links-first context instead"),
    });
    render_links(&candidates, budget_chars)
  } else {
    render_bundles(&bundles)
  };
  if let Some(s) = &opts.recall.session {
    offer_shown(&s.id, &bundles, &candidates, &context);
  }
  Ok(MemoryResponse { bundles, context, diagnostics, trace, mode: response.mode })
}

/// A recalled page as a memory item: its lines read from the page file (the preview when they
/// cannot be read), its metadata from the vault's manifest.
fn candidate(
  r: &RecallResult,
  vaults: &HashMap<&'static str, (VaultPaths, Snapshot, Arc<LinkGraph>)>,
  now: i64,
) -> MemoryItem {
  let excerpt = vaults
    .get(r.vault)
    .and_then(|(paths, _, _)| file_lines(&paths.wiki, &r.path, r.line_start, r.line_end))
    .unwrap_or_else(|| r.preview.clone());
  let meta = vaults.get(r.vault).and_then(|(_, s, _)| s.manifest.entries.get(&r.id)).map(|e| &*e.meta);
  let fallback = PageMeta { status: r.status.clone(), ..PageMeta::default() };
  let meta = meta.unwrap_or(&fallback);
  MemoryItem {
    vault: r.vault.to_string(),
    vault_id: r.vault_id.clone(),
    vault_label: r.vault_label.clone(),
    page_id: r.id.clone(),
    path: r.path.clone(),
    title: r.title.clone(),
    page_type: r.page_type.clone(),
    role: r.role.as_str().to_string(),
    status: r.status.clone(),
    domain: meta.domain.clone(),
    scope: meta.scope.clone(),
    date: meta.date().map(str::to_string),
    freshness: Freshness::of(meta, now),
    heading: r.heading.clone(),
    excerpt: truncate_chars(&excerpt, MAX_EXCERPT_CHARS),
    line_start: r.line_start,
    line_end: r.line_end,
    qmd_rank: Some(r.vault_rank),
    qmd_score: Some(r.confidence),
    score: r.score,
    match_reasons: r.match_reasons.clone(),
    relation: String::new(),
    relation_direction: None,
    related_to: None,
    historical: false,
    warnings: page_warnings(meta, now),
  }
}

/// Offer session `session` delivery of what the context shows: the bundles' retrieved pages
/// (links-first: every candidate), the context's characters shared among them.
fn offer_shown(session: &str, bundles: &[MemoryBundle], candidates: &[MemoryItem], context: &str) {
  let shown: HashSet<(&str, &str)> = if bundles.is_empty() {
    candidates.iter().map(|i| (i.vault_id.as_str(), i.page_id.as_str())).collect()
  } else {
    bundles
      .iter()
      .flat_map(|b| b.card.iter().chain(&b.evidence).chain(&b.conflicts))
      .map(|i| (i.vault_id.as_str(), i.page_id.as_str()))
      .collect()
  };
  let mut entries: Vec<ShownEntry> = ledger::pending(session)
    .into_iter()
    .filter(|e| shown.contains(&(e.vault_id.as_str(), e.page_id.as_str())))
    .collect();
  let total = context.chars().count();
  let n = entries.len().max(1);
  for (i, e) in entries.iter_mut().enumerate() {
    e.rank = i as u32;
    e.chars = total / n + usize::from(i < total % n);
  }
  ledger::offer(session, entries);
}
