//! Memory bundles (spec "Context Packing" and "Typed-Link Expansion"): retrieved candidates,
//! best first, are grouped under canonical cards; one typed hop admits direct evidence
//! (`supports` into the card, `derived_from` out of it) and competing claims (`contradicts`,
//! `qualifies`, `supersedes`, `applies_under`, either direction). Plain links and `related_to`
//! only group pages that retrieval already found; they never admit one. Bundles are packed
//! under a character budget, lower bundles dropped first.

use std::collections::HashSet;

use serde::Serialize;

use super::graph::LinkGraph;

/// Automatic context budget in characters (spec value).
pub const DEFAULT_BUDGET_CHARS: usize = 8_000;
/// Longest excerpt of one item (spec value: evidence excerpts ≤ 800 characters).
pub const MAX_EXCERPT_CHARS: usize = 800;
/// Evidence items per card (spec value: two excerpts).
pub const MAX_EVIDENCE: usize = 2;
/// Competing claims per card. Not fitted (no benchmark has more than one per card): a bound so
/// that one heavily disputed card cannot fill the budget.
pub const MAX_CONFLICTS: usize = 3;
/// Cards of one `(type, domain)` pair among the packed bundles while alternatives exist (spec
/// value: two of the three automatic slots).
pub const DIVERSITY_CAP: usize = 2;

/// One packed item (the spec's `MemoryCandidate` plus rendering fields).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryItem {
  /// `project` or `personal`.
  pub vault: String,
  /// Id of the vault.
  pub vault_id: String,
  /// Label shown for personal-vault items.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub vault_label: Option<String>,
  /// Folder-qualified page id.
  pub page_id: String,
  /// Absolute path of the page file.
  pub path: String,
  /// Page title.
  pub title: String,
  /// Frontmatter `type`.
  #[serde(rename = "type")]
  pub page_type: String,
  /// `canonical` or `evidence`.
  pub role: String,
  /// Frontmatter `status`.
  pub status: Option<String>,
  /// Frontmatter `domain`.
  pub domain: Option<String>,
  /// Scope of the `applies_under` relation that admitted the item.
  pub scope: Option<String>,
  /// Heading of the excerpt.
  pub heading: Option<String>,
  /// Exact excerpt of the page (≤ [`MAX_EXCERPT_CHARS`]).
  pub excerpt: String,
  /// First line of the excerpt in the page file (1-based).
  pub line_start: u32,
  /// Last line of the excerpt (inclusive).
  pub line_end: u32,
  /// 0-based rank in its vault's retrieval list; `None` for a page admitted by a relation.
  pub qmd_rank: Option<u32>,
  /// Retrieval confidence before the multiplier, when retrieved.
  pub qmd_score: Option<f64>,
  /// Final bounded score (0 for an admitted page).
  pub score: f64,
  /// Why the item is here (retrieval reasons, or `relation:<type>`).
  pub match_reasons: Vec<String>,
  /// Relation to the bundle's card: `card`, `unpromoted`, `linked`, or a relation type.
  pub relation: String,
  /// `outgoing` (card → item) or `incoming` (item → card) for relation-linked items.
  pub relation_direction: Option<String>,
  /// Warnings shown with the item (draft, deprecated, superseded, unpromoted, cites_superseded).
  pub warnings: Vec<String>,
  /// True when the page is superseded (by a user resolution or a declared `supersedes`
  /// relation): shown as a historical claim; its own `status` is untouched.
  #[serde(default)]
  pub historical: bool,
}

/// A bundle: at most one card, its evidence and its competing claims.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryBundle {
  /// The canonical card (absent for an unpromoted-evidence bundle).
  pub card: Option<MemoryItem>,
  /// Supporting evidence (≤ [`MAX_EVIDENCE`]).
  pub evidence: Vec<MemoryItem>,
  /// Qualifiers, superseding and contradicting claims, kept with the card.
  pub conflicts: Vec<MemoryItem>,
  /// The active user resolution between the card and one of its competing claims.
  pub resolution: Option<super::resolve::ConflictResolution>,
  /// Competing pairs without a user resolution: ask the user (exact page ids).
  pub unresolved: Vec<super::resolve::UnresolvedConflict>,
}

impl MemoryBundle {
  fn items(&self) -> impl Iterator<Item = &MemoryItem> {
    self.card.iter().chain(&self.evidence).chain(&self.conflicts)
  }
}

/// Limits of an assembly.
#[derive(Debug, Clone)]
pub struct AssemblyOptions {
  /// Bundles returned at most.
  pub max_bundles: usize,
  /// Rendered context budget in characters.
  pub budget_chars: usize,
  /// Follow typed relations (off = the spec's "without typed-link assembly" ablation).
  pub typed_expansion: bool,
}

impl Default for AssemblyOptions {
  fn default() -> Self {
    AssemblyOptions { max_bundles: 3, budget_chars: DEFAULT_BUDGET_CHARS, typed_expansion: true }
  }
}

/// What assembly needs from the index: graphs per vault and items for admitted pages.
pub trait MemorySource {
  /// The link graph of a vault (`project` / `personal`).
  fn graph(&self, vault: &str) -> Option<&LinkGraph>;
  /// A packed item for a page admitted by a relation (excerpt chosen by the source).
  fn admit(&mut self, vault: &str, page_id: &str) -> Option<MemoryItem>;
}

fn conflict_order(t: &str) -> usize {
  ["contradicts", "supersedes", "qualifies", "applies_under"].iter().position(|x| *x == t).unwrap_or(9)
}

/// Truncate to `n` characters.
pub fn truncate_chars(s: &str, n: usize) -> String {
  match s.char_indices().nth(n) {
    Some((i, _)) => s[..i].to_string(),
    None => s.to_string(),
  }
}

fn norm_text(s: &str) -> String {
  s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// A page linked to a seed by a typed relation or an active user resolution.
pub(crate) struct Linked {
  pub(crate) page: String,
  pub(crate) relation: String,
  pub(crate) direction: &'static str,
  pub(crate) scope: Option<String>,
  /// The user resolution that set relation and direction.
  pub(crate) resolution: Option<String>,
  /// Declared relations to the same page that the resolution overrides (kept for audit).
  pub(crate) declared: Option<String>,
}

/// Typed neighbours of a card: `(evidence, conflicts)`.
fn typed_neighbours(g: &LinkGraph, card: &str) -> (Vec<Linked>, Vec<Linked>) {
  let (mut ev, mut cf) = (Vec::new(), Vec::new());
  for e in g.out_edges(card) {
    for r in e.expanding() {
      let l = Linked {
        page: e.to.clone(),
        relation: r.relation_type.clone(),
        direction: "outgoing",
        scope: r.scope.clone(),
        resolution: None,
        declared: None,
      };
      match r.relation_type.as_str() {
        "derived_from" => ev.push(l),
        "supports" => {}
        _ => cf.push(l),
      }
    }
  }
  for e in g.in_edges(card) {
    for r in e.expanding() {
      let l = Linked {
        page: e.from.clone(),
        relation: r.relation_type.clone(),
        direction: "incoming",
        scope: r.scope.clone(),
        resolution: None,
        declared: None,
      };
      match r.relation_type.as_str() {
        "supports" => ev.push(l),
        "derived_from" => {}
        _ => cf.push(l),
      }
    }
  }
  let cf = super::resolve::overlay(g, card, cf);
  (ev, cf)
}

/// Pages linked to or from a card by any edge (for grouping retrieved evidence).
fn linked_any(g: &LinkGraph, card: &str) -> HashSet<String> {
  g.out_edges(card).iter().map(|e| e.to.clone()).chain(g.in_edges(card).map(|e| e.from.clone())).collect()
}

/// The item for a page linked to `seed` by `l`: the retrieved candidate when there is one (it
/// carries rank, score and the best excerpt), else a fresh admission; labelled with the relation.
fn take_linked(
  candidates: &[MemoryItem],
  source: &mut dyn MemorySource,
  seed: &MemoryItem,
  l: &Linked,
) -> Option<MemoryItem> {
  let mut item = candidates
    .iter()
    .find(|c| c.vault == seed.vault && c.page_id == l.page)
    .cloned()
    .or_else(|| source.admit(&seed.vault, &l.page))?;
  item.relation = l.relation.clone();
  item.relation_direction = Some(l.direction.to_string());
  // A user resolution's scope belongs to its selected page (the other applies outside it).
  match &l.resolution {
    Some(_) if l.direction == "outgoing" => {
      if let Some(s) = &l.scope {
        item.warnings.push(format!("applies outside scope: {s} (user resolution)"));
      }
    }
    _ => item.scope = l.scope.clone().or(item.scope),
  }
  let reason = match &l.resolution {
    Some(r) => format!("resolution:{r}"),
    None => format!("relation:{}", l.relation),
  };
  if !item.match_reasons.contains(&reason) {
    item.match_reasons.push(reason);
  }
  if let (Some(r), Some(d)) = (&l.resolution, &l.declared) {
    item.match_reasons.push(format!("declared:{d}"));
    item.warnings.push(format!("declared relation {d} is overridden by user resolution {r}"));
  }
  if l.relation == "supersedes" && l.direction == "outgoing" {
    item.historical = true;
    item.warnings.push(match &l.resolution {
      Some(r) => format!("superseded by {} (user resolution {r})", seed.page_id),
      None => format!("superseded by {}", seed.page_id),
    });
  }
  Some(item)
}

/// Group `candidates` (best first) into bundles under `opts`.
pub fn assemble(
  candidates: &[MemoryItem],
  source: &mut dyn MemorySource,
  opts: &AssemblyOptions,
) -> Vec<MemoryBundle> {
  let key = |i: &MemoryItem| (i.vault.clone(), i.page_id.clone());
  let mut used: HashSet<(String, String)> = HashSet::new();
  let mut seen_text: HashSet<String> = HashSet::new();
  let mut bundles: Vec<MemoryBundle> = Vec::new();
  let cards: Vec<&MemoryItem> = candidates.iter().filter(|c| c.role == "canonical").collect();
  // Diversity: cards past the (type, domain) cap wait until no alternative remains.
  let mut per_pair: std::collections::HashMap<(String, Option<String>), usize> = Default::default();
  let mut order: Vec<&MemoryItem> = Vec::new();
  let mut deferred: Vec<&MemoryItem> = Vec::new();
  for c in &cards {
    let pair = (c.page_type.trim().to_lowercase(), c.domain.clone());
    let n = per_pair.entry(pair).or_default();
    if *n < DIVERSITY_CAP {
      *n += 1;
      order.push(c);
    } else {
      deferred.push(c);
    }
  }
  order.extend(deferred);
  for card in order {
    if bundles.len() >= opts.max_bundles {
      break;
    }
    if used.contains(&key(card)) {
      continue;
    }
    used.insert(key(card));
    let mut card_item = card.clone();
    card_item.relation = "card".into();
    seen_text.insert(norm_text(&card_item.excerpt));
    let mut evidence: Vec<(usize, MemoryItem)> = Vec::new();
    let mut conflicts: Vec<(usize, MemoryItem)> = Vec::new();
    let (typed_ev, typed_cf, linked) = match source.graph(&card.vault) {
      Some(g) if opts.typed_expansion => {
        let (e, c) = typed_neighbours(g, &card.page_id);
        (e, c, linked_any(g, &card.page_id))
      }
      Some(g) => (vec![], vec![], linked_any(g, &card.page_id)),
      None => (vec![], vec![], HashSet::new()),
    };
    let mut cf_sorted: Vec<&Linked> = typed_cf.iter().collect();
    cf_sorted.sort_by_key(|l| (l.resolution.is_none(), conflict_order(&l.relation), l.page.clone()));
    for l in cf_sorted {
      if conflicts.len() >= MAX_CONFLICTS || used.contains(&(card.vault.clone(), l.page.clone())) {
        continue;
      }
      if let Some(item) = take_linked(candidates, source, card, l) {
        used.insert(key(&item));
        if l.relation == "supersedes" && l.direction == "incoming" {
          card_item.historical = true;
          card_item.warnings.push(match &l.resolution {
            Some(r) => format!("superseded by {} (user resolution {r})", item.page_id),
            None => format!("superseded by {}", item.page_id),
          });
        }
        if let (Some(_), "applies_under", Some(s)) = (&l.resolution, l.relation.as_str(), &l.scope) {
          if l.direction == "outgoing" {
            card_item.scope = Some(s.clone());
          } else {
            card_item.warnings.push(format!("applies outside scope: {s} (user resolution)"));
          }
        }
        conflicts.push((if l.resolution.is_some() { 0 } else { 1 + conflict_order(&l.relation) }, item));
      }
    }
    for l in &typed_ev {
      if evidence.len() >= MAX_EVIDENCE || used.contains(&(card.vault.clone(), l.page.clone())) {
        continue;
      }
      if let Some(item) = take_linked(candidates, source, card, l) {
        if seen_text.insert(norm_text(&item.excerpt)) {
          used.insert(key(&item));
          evidence.push((0, item));
        }
      }
    }
    // Retrieved evidence pages linked with the card, by rank.
    for c in candidates.iter().filter(|c| c.role == "evidence" && c.vault == card.vault) {
      if evidence.len() >= MAX_EVIDENCE {
        break;
      }
      if used.contains(&key(c)) || !linked.contains(&c.page_id) {
        continue;
      }
      if seen_text.insert(norm_text(&c.excerpt)) {
        used.insert(key(c));
        let mut item = c.clone();
        item.relation = "linked".into();
        evidence.push((1, item));
      }
    }
    evidence.sort_by(|a, b| {
      (a.0, a.1.qmd_rank.unwrap_or(u32::MAX), &a.1.page_id).cmp(&(
        b.0,
        b.1.qmd_rank.unwrap_or(u32::MAX),
        &b.1.page_id,
      ))
    });
    conflicts.sort_by(|a, b| {
      (a.0, a.1.qmd_rank.unwrap_or(u32::MAX), &a.1.page_id).cmp(&(
        b.0,
        b.1.qmd_rank.unwrap_or(u32::MAX),
        &b.1.page_id,
      ))
    });
    let mut bundle = MemoryBundle {
      card: Some(card_item),
      evidence: evidence.into_iter().map(|(_, i)| i).collect(),
      conflicts: conflicts.into_iter().map(|(_, i)| i).collect(),
      resolution: None,
      unresolved: vec![],
    };
    super::resolve::annotate_bundle(&mut bundle, source.graph(&card.vault));
    bundles.push(bundle);
  }
  if bundles.is_empty() {
    // No card covers the need: the strongest evidence, labelled as unpromoted, with the claims
    // that compete with it (the same typed hop a card gets).
    for c in candidates.iter().filter(|c| c.role == "evidence") {
      if bundles.len() >= opts.max_bundles {
        break;
      }
      if used.contains(&key(c)) || !seen_text.insert(norm_text(&c.excerpt)) {
        continue;
      }
      used.insert(key(c));
      let mut item = c.clone();
      item.relation = "unpromoted".into();
      item.warnings.push("unpromoted evidence: not an established conclusion".into());
      let mut conflicts = Vec::new();
      let typed_cf = match source.graph(&c.vault) {
        Some(g) if opts.typed_expansion => typed_neighbours(g, &c.page_id).1,
        _ => vec![],
      };
      let mut cf_sorted: Vec<&Linked> = typed_cf.iter().collect();
      cf_sorted.sort_by_key(|l| (l.resolution.is_none(), conflict_order(&l.relation), l.page.clone()));
      for l in cf_sorted {
        if conflicts.len() >= MAX_CONFLICTS || used.contains(&(c.vault.clone(), l.page.clone())) {
          continue;
        }
        if let Some(other) = take_linked(candidates, source, c, l) {
          used.insert(key(&other));
          if l.relation == "supersedes" && l.direction == "incoming" {
            item.historical = true;
            item.warnings.push(match &l.resolution {
              Some(r) => format!("superseded by {} (user resolution {r})", other.page_id),
              None => format!("superseded by {}", other.page_id),
            });
          }
          conflicts.push(other);
        }
      }
      let mut bundle =
        MemoryBundle { card: None, evidence: vec![item], conflicts, resolution: None, unresolved: vec![] };
      super::resolve::annotate_bundle(&mut bundle, source.graph(&c.vault));
      bundles.push(bundle);
    }
  }
  pack(bundles, opts.budget_chars)
}

/// Keep bundles while their rendering fits `budget`: lower bundles go first; the top bundle
/// then loses evidence, then non-contradiction conflicts, then excerpt length.
pub fn pack(mut bundles: Vec<MemoryBundle>, budget: usize) -> Vec<MemoryBundle> {
  while bundles.len() > 1 && render_bundles(&bundles).chars().count() > budget {
    bundles.pop();
  }
  let Some(top) = bundles.first_mut() else {
    return bundles;
  };
  let fits = |b: &MemoryBundle| render_bundles(std::slice::from_ref(b)).chars().count() <= budget;
  while !fits(top) && !top.evidence.is_empty() {
    top.evidence.pop();
  }
  while !fits(top) {
    match top.conflicts.iter().rposition(|c| c.relation != "contradicts") {
      Some(i) => {
        top.conflicts.remove(i);
      }
      None => break,
    }
  }
  let mut limit = MAX_EXCERPT_CHARS;
  while !fits(top) && limit > 0 {
    limit /= 2;
    for item in top.card.iter_mut().chain(top.conflicts.iter_mut()).chain(top.evidence.iter_mut()) {
      item.excerpt = truncate_chars(&item.excerpt, limit);
    }
  }
  if !fits(top) {
    bundles.clear();
  }
  bundles
}

fn render_item(out: &mut String, label: &str, i: &MemoryItem) {
  use std::fmt::Write;
  let mut tags: Vec<String> = vec![i.page_type.clone()];
  tags.extend(i.status.clone());
  if i.historical {
    tags.push("historical".into());
  }
  tags.extend(i.scope.as_ref().map(|s| format!("scope: {s}")));
  tags.extend(i.vault_label.clone());
  let _ = write!(out, "{label} {} [{}] ({})", i.title, i.page_id, tags.join(", "));
  if let Some(d) = &i.relation_direction {
    let _ = write!(out, " — {} {}", i.relation, if d == "outgoing" { "← card" } else { "→ card" });
  }
  let _ = writeln!(out);
  for w in &i.warnings {
    let _ = writeln!(out, "  ⚠ {w}");
  }
  let head = i.heading.as_deref().map(|h| format!(" #{h}")).unwrap_or_default();
  let _ = writeln!(out, "  {}:{}-{}{head}", i.page_id, i.line_start, i.line_end);
  for line in i.excerpt.lines() {
    let _ = writeln!(out, "  > {line}");
  }
}

/// Render bundles as the compact context injected for the agent (the bundle form of the
/// extension's `formatRecallContext`).
pub fn render_bundles(bundles: &[MemoryBundle]) -> String {
  let mut out = String::new();
  for (n, b) in bundles.iter().enumerate() {
    out.push_str(&format!("## Memory {}\n", n + 1));
    if let Some(c) = &b.card {
      render_item(&mut out, "Card:", c);
    }
    for e in &b.evidence {
      render_item(&mut out, if e.relation == "unpromoted" { "Unpromoted evidence:" } else { "Evidence:" }, e);
    }
    for c in &b.conflicts {
      render_item(&mut out, "Competing claim:", c);
    }
    if let Some(r) = &b.resolution {
      let scope = r.scope.as_deref().map(|s| format!(" under \"{s}\"")).unwrap_or_default();
      out.push_str(&format!(
        "  Resolved by the user ({}): {} {} {}{scope}.\n",
        r.id, r.selected_page_id, r.relation, r.other_page_id
      ));
    }
    if !b.unresolved.is_empty() {
      // Unresolved pairs by exact page id, so the answer maps onto wiki_resolve_conflict.
      let pairs: Vec<String> = b.unresolved.iter().map(|u| u.page_ids.join(" vs ")).collect();
      out.push_str(&format!("  These claims compete; ask the user which applies: {}.\n", pairs.join("; ")));
    } else if b.resolution.is_none() && !b.conflicts.is_empty() {
      out.push_str("  These claims compete; ask the user which applies (page ids above).\n");
    }
  }
  out
}

/// Links-first fallback when no bundle fits: one line per page.
pub fn render_links(items: &[MemoryItem], budget: usize) -> String {
  let mut out = String::new();
  for i in items {
    let line = format!("- {} [{}] ({})\n", i.title, i.page_id, i.page_type);
    if out.chars().count() + line.chars().count() > budget {
      break;
    }
    out.push_str(&line);
  }
  out
}

/// True when every item of `bundles` is distinct (page-level deduplication).
pub fn distinct_pages(bundles: &[MemoryBundle]) -> bool {
  let mut seen = HashSet::new();
  bundles.iter().flat_map(|b| b.items()).all(|i| seen.insert((i.vault.clone(), i.page_id.clone())))
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::memory::graph::tests::manifest_of;

  fn item(id: &str, ty: &str, rank: Option<u32>, excerpt: &str) -> MemoryItem {
    let canonical = crate::vault::Role::for_type(ty) == crate::vault::Role::Canonical;
    MemoryItem {
      vault: "project".into(),
      vault_id: "v".into(),
      vault_label: None,
      page_id: id.into(),
      path: format!("/w/{id}.md"),
      title: id.to_uppercase(),
      page_type: ty.into(),
      role: if canonical { "canonical" } else { "evidence" }.into(),
      status: None,
      domain: None,
      scope: None,
      heading: Some("Claim".into()),
      excerpt: excerpt.into(),
      line_start: 5,
      line_end: 6,
      qmd_rank: rank,
      qmd_score: rank.map(|_| 0.9),
      score: 0.9,
      match_reasons: vec!["terms".into()],
      relation: String::new(),
      relation_direction: None,
      warnings: vec![],
      historical: false,
    }
  }

  struct Fake {
    graph: LinkGraph,
    types: std::collections::HashMap<String, String>,
    admitted: Vec<String>,
  }

  impl MemorySource for Fake {
    fn graph(&self, vault: &str) -> Option<&LinkGraph> {
      (vault == "project").then_some(&self.graph)
    }
    fn admit(&mut self, _vault: &str, page_id: &str) -> Option<MemoryItem> {
      self.admitted.push(page_id.to_string());
      let ty = self.types.get(page_id)?;
      Some(item(page_id, ty, None, &format!("text of {page_id}")))
    }
  }

  /// `(id, type, frontmatter extra, body)`.
  fn fake(pages: &[(&str, &str, &str, &str)]) -> Fake {
    let texts: Vec<(String, String)> = pages
      .iter()
      .map(|(id, ty, fm, body)| (id.to_string(), format!("---\ntype: {ty}\n{fm}---\n{body}\n")))
      .collect();
    let refs: Vec<(&str, &str)> = texts.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    Fake {
      graph: LinkGraph::build(&manifest_of(&refs)),
      types: pages.iter().map(|(id, ty, _, _)| (id.to_string(), ty.to_string())).collect(),
      admitted: vec![],
    }
  }

  fn rel(target: &str, ty: &str) -> String {
    format!("relations:\n  - target: {target}\n    type: {ty}\n")
  }

  #[test]
  fn contradiction_neighbour_is_admitted_and_kept_with_its_seed() {
    let mut src = fake(&[
      ("c/a", "concept", &rel("c/b", "contradicts"), "Versus [[c/b]]."),
      ("c/b", "concept", "", "Other claim."),
      ("c/x", "concept", "", "x"),
      ("c/y", "concept", "", "y"),
    ]);
    // b is not retrieved at all; a, x, y are (all concept, no domain: one (type, domain) pair).
    let cands = vec![
      item("c/a", "concept", Some(0), "A"),
      item("c/x", "concept", Some(1), "X"),
      item("c/y", "concept", Some(2), "Y"),
    ];
    let b = assemble(&cands, &mut src, &AssemblyOptions::default());
    assert_eq!(b[0].card.as_ref().unwrap().page_id, "c/a");
    assert_eq!(b[0].conflicts.len(), 1);
    let c = &b[0].conflicts[0];
    assert_eq!(
      (c.page_id.as_str(), c.relation.as_str(), c.relation_direction.as_deref()),
      ("c/b", "contradicts", Some("outgoing"))
    );
    assert!(c.match_reasons.contains(&"relation:contradicts".to_string()));
    assert_eq!(c.qmd_rank, None);
    // Diversity cap 2 per (type, domain): x fills the second slot, y only because no alternative.
    assert_eq!(b.len(), 3);
    assert!(distinct_pages(&b));
    // Ablation: no typed expansion, no admission.
    src.admitted.clear();
    let plain = assemble(&cands, &mut src, &AssemblyOptions { typed_expansion: false, ..Default::default() });
    assert!(plain[0].conflicts.is_empty() && src.admitted.is_empty());
  }

  #[test]
  fn retrieved_competing_card_joins_the_seed_not_its_own_bundle() {
    let mut src = fake(&[
      ("c/new", "concept", &rel("c/old", "supersedes"), "Replaces [old](old.md)."),
      ("c/old", "concept", "", "Old claim."),
    ]);
    let cands = vec![item("c/old", "concept", Some(0), "Old"), item("c/new", "concept", Some(1), "New")];
    let b = assemble(&cands, &mut src, &AssemblyOptions::default());
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].card.as_ref().unwrap().page_id, "c/old");
    assert!(b[0].card.as_ref().unwrap().warnings.iter().any(|w| w.contains("superseded by c/new")));
    assert_eq!(b[0].conflicts[0].page_id, "c/new");
    assert_eq!(b[0].conflicts[0].qmd_rank, Some(1), "the retrieved copy is used");
    assert!(src.admitted.is_empty());
  }

  #[test]
  fn evidence_order_cap_and_only_typed_edges_admit() {
    let mut src = fake(&[
      (
        "c/a",
        "concept",
        &(rel("s/d", "derived_from") + "  - target: c/r\n    type: related_to\n"),
        "[[s/d]] [[c/r]] [[s/plain]] [[s/ret]] [[s/ret2]]",
      ),
      ("s/d", "source", "", "d"),
      ("s/sup", "source", &rel("c/a", "supports"), "[[c/a]]"),
      ("c/r", "concept", "", "r"),
      ("s/plain", "source", "", "p"),
      ("s/ret", "source", "", "ret"),
      ("s/ret2", "source", "", "ret2"),
    ]);
    let cands = vec![item("c/a", "concept", Some(0), "A"), item("s/ret", "source", Some(1), "R")];
    let b = assemble(&cands, &mut src, &AssemblyOptions::default());
    let ev: Vec<(&str, &str)> =
      b[0].evidence.iter().map(|e| (e.page_id.as_str(), e.relation.as_str())).collect();
    assert_eq!(ev, vec![("s/d", "derived_from"), ("s/sup", "supports")], "typed first, capped at 2");
    let mut admitted = src.admitted.clone();
    admitted.sort();
    assert_eq!(admitted, vec!["s/d", "s/sup"], "related_to and plain links never admit");
  }

  #[test]
  fn unpromoted_evidence_only_without_cards_and_duplicates_dropped() {
    let mut src = fake(&[("s/a", "source", "", "a"), ("s/b", "source", "", "b")]);
    let cands =
      vec![item("s/a", "source", Some(0), "Same  text"), item("s/b", "source", Some(1), "same text")];
    let b = assemble(&cands, &mut src, &AssemblyOptions::default());
    assert_eq!(b.len(), 1, "a repeated observation is dropped");
    assert!(b[0].card.is_none());
    assert_eq!(b[0].evidence[0].relation, "unpromoted");
    assert!(render_bundles(&b).contains("Unpromoted evidence:"));
  }

  #[test]
  fn unpromoted_evidence_keeps_its_competing_claim() {
    let mut src = fake(&[
      ("s/new", "source", &rel("s/old", "contradicts"), "Newer measurement than [[s/old]]."),
      ("s/old", "source", "", "old"),
    ]);
    let cands =
      vec![item("s/old", "source", Some(0), "Old claim"), item("s/other", "source", Some(1), "Other")];
    let b = assemble(&cands, &mut src, &AssemblyOptions::default());
    assert_eq!(b[0].evidence[0].page_id, "s/old");
    assert_eq!(
      b[0]
        .conflicts
        .iter()
        .map(|c| (c.page_id.as_str(), c.relation_direction.as_deref()))
        .collect::<Vec<_>>(),
      vec![("s/new", Some("incoming"))]
    );
    assert_eq!(b.len(), 2);
  }

  #[test]
  fn budget_drops_lower_bundles_first_then_trims_the_top() {
    let mut src = fake(&[("c/a", "concept", "", ""), ("c/b", "entity", "", ""), ("c/c", "skill", "", "")]);
    let long = "word ".repeat(160);
    let cands: Vec<MemoryItem> = [("c/a", "concept"), ("c/b", "entity"), ("c/c", "skill")]
      .iter()
      .enumerate()
      .map(|(i, (id, ty))| item(id, ty, Some(i as u32), &long))
      .collect();
    let full = assemble(&cands, &mut src, &AssemblyOptions::default());
    assert_eq!(full.len(), 3);
    let one = render_bundles(&full[..1]).chars().count();
    let budget = one + 50;
    let b = assemble(&cands, &mut src, &AssemblyOptions { budget_chars: budget, ..Default::default() });
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].card.as_ref().unwrap().excerpt.len(), long.len(), "top bundle untouched");
    let tiny = assemble(&cands, &mut src, &AssemblyOptions { budget_chars: 300, ..Default::default() });
    assert_eq!(tiny.len(), 1);
    assert!(render_bundles(&tiny).chars().count() <= 300);
    assert!(
      assemble(&cands, &mut src, &AssemblyOptions { budget_chars: 10, ..Default::default() }).is_empty()
    );
    for bundles in [&full, &b, &tiny] {
      for i in bundles.iter().flat_map(|b| b.items()) {
        assert!(i.excerpt.chars().count() <= MAX_EXCERPT_CHARS);
      }
    }
  }

  #[test]
  fn truncation_is_by_characters() {
    assert_eq!(truncate_chars("héllo", 2), "hé");
    assert_eq!(truncate_chars("ab", 5), "ab");
  }
}
