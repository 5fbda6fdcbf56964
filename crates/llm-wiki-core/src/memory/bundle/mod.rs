//! Memory bundles (spec "Context Packing" and "Typed-Link Expansion"): retrieved candidates,
//! best first, are grouped under canonical cards; one typed hop admits direct evidence
//! (`supports` into the card, `derived_from` out of it) and competing claims (`contradicts`,
//! `qualifies`, `supersedes`, `applies_under`, either direction). Plain links and `related_to`
//! only group pages that retrieval already found; they never admit one. Bundles are packed
//! under a character budget, lower bundles dropped first.

use std::collections::{HashMap, HashSet};

use super::graph::LinkGraph;

pub mod shape;

pub(crate) use shape::{conflict_order, norm_text, Linked, ADMIT_ATTEMPTS_PER_CARD};
pub use shape::{
  page_warnings, truncate_chars, AssemblyOptions, Freshness, MemoryBundle, MemoryItem,
  ALTERNATIVE_SCORE_RATIO, DEFAULT_BUDGET_CHARS, DIVERSITY_CAP, MAX_CONFLICTS, MAX_EVIDENCE,
  MAX_EXCERPT_CHARS,
};

/// What assembly needs from the index: graphs per vault and items for admitted pages.
pub trait MemorySource {
  /// The link graph of a vault (`project` / `personal`).
  fn graph(&self, vault: &str) -> Option<&LinkGraph>;
  /// A packed item for a page admitted by a relation (excerpt chosen by the source).
  fn admit(&mut self, vault: &str, page_id: &str) -> Option<MemoryItem>;
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
    mark_superseded(&mut item, &seed.page_id, l);
  }
  Some(item)
}

/// `item` is superseded by `by` (through `l`, a declared relation or a user resolution): shown as
/// historical with a warning; its own status is untouched.
fn mark_superseded(item: &mut MemoryItem, by: &str, l: &Linked) {
  item.historical = true;
  item.warnings.push(match &l.resolution {
    Some(r) => format!("superseded by {by} (user resolution {r})"),
    None => format!("superseded by {by}"),
  });
}

/// Group `candidates` (best first) into bundles under `opts`.
///
/// Cards are taken in rank order under the diversity cap ([`card_order`]), each with its one-hop
/// typed neighbours; a card no retrieval returned but which retrieved evidence directly supports
/// follows the retrieved cards ([`cards_of_evidence`]). Then competing claims are kept together
/// ([`keep_claims_together`]): every retrieved candidate — card or evidence, shown or not — with
/// a `contradicts`, `supersedes`, `qualifies` or `applies_under` neighbour ends up in one bundle
/// with it, merging two bundles when the claims sit in different ones. Slots freed by a merge go
/// to the next cards.
pub fn assemble(
  candidates: &[MemoryItem],
  source: &mut dyn MemorySource,
  opts: &AssemblyOptions,
) -> Vec<MemoryBundle> {
  let mut used: HashSet<(String, String)> = HashSet::new();
  let mut seen_text: HashSet<String> = HashSet::new();
  let mut bundles: Vec<MemoryBundle> = Vec::new();
  let mut cards: Vec<MemoryItem> = candidates.iter().filter(|c| c.role == "canonical").cloned().collect();
  // Rank (in `candidates`) of the evidence that admitted a card retrieval did not return.
  let mut seed_rank: HashMap<(String, String), usize> = HashMap::new();
  if opts.typed_expansion {
    for (card, seed) in cards_of_evidence(candidates, source, opts.max_bundles) {
      seed_rank.insert(key(&card), seed);
      cards.push(card);
    }
  }
  let order = card_order(cards);
  let mut next = 0;
  loop {
    while bundles.len() < opts.max_bundles && next < order.len() {
      let card = &order[next];
      next += 1;
      if !used.contains(&key(card)) {
        let b = card_bundle(card, candidates, source, opts, &mut used, &mut seen_text);
        bundles.push(b);
      }
    }
    if bundles.is_empty() {
      bundles = unpromoted_bundles(candidates, source, opts, &mut used, &mut seen_text);
    }
    let before = bundles.len();
    if opts.typed_expansion {
      keep_claims_together(&mut bundles, candidates, source, opts.max_bundles, &mut used, &seed_rank);
    }
    if bundles.len() >= before || next >= order.len() {
      break;
    }
  }
  // Decisions (historical pages, the active resolution, unresolved pairs) once grouping is final.
  for b in &mut bundles {
    let vault = b.card.as_ref().or(b.evidence.first()).map(|i| i.vault.clone());
    if let Some(v) = vault {
      super::resolve::annotate_bundle(b, source.graph(&v));
    }
  }
  pack(bundles, opts.budget_chars)
}

fn key(i: &MemoryItem) -> (String, String) {
  (i.vault.clone(), i.page_id.clone())
}

/// Cards in packing order: rank order, except that a card past [`DIVERSITY_CAP`] cards of its
/// `(type, domain)` pair gives its slot to the best-ranked *alternative* — a card of a pair under
/// the cap whose score is at least [`ALTERNATIVE_SCORE_RATIO`] of its own. A card without
/// `domain` counts in the pair `(type, none)`. A far weaker card of another type is not an
/// alternative (spec: "if alternatives exist"; packing starts from "the highest final-score
/// applicable canonical card"), so the cap never moves a weak off-topic card above a
/// well-matched one; admitted cards (score 0) follow retrieved ones.
fn card_order(cards: Vec<MemoryItem>) -> Vec<MemoryItem> {
  let pair = |c: &MemoryItem| {
    let domain = c.domain.as_deref().map(|d| d.trim().to_lowercase()).filter(|d| !d.is_empty());
    (c.page_type.trim().to_lowercase(), domain)
  };
  let mut per_pair: HashMap<(String, Option<String>), usize> = HashMap::new();
  let mut rest = cards;
  let mut order = Vec::with_capacity(rest.len());
  while !rest.is_empty() {
    let first = &rest[0];
    let mut pick = 0;
    if per_pair.get(&pair(first)).copied().unwrap_or(0) >= DIVERSITY_CAP {
      let floor = first.score * ALTERNATIVE_SCORE_RATIO;
      if let Some(k) = rest.iter().position(|c| {
        per_pair.get(&pair(c)).copied().unwrap_or(0) < DIVERSITY_CAP && c.score > 0.0 && c.score >= floor
      }) {
        pick = k;
      }
    }
    let c = rest.remove(pick);
    *per_pair.entry(pair(&c)).or_default() += 1;
    order.push(c);
  }
  order
}

/// Cards retrieval did not return that a retrieved piece of evidence directly supports (the
/// evidence `supports` the card, or the card is `derived_from` it), with the rank of the first
/// such evidence: spec "unpromoted evidence only when no suitable card covers the need" — the
/// card the evidence declares it supports covers it. One typed hop, at most `max` cards, in the
/// rank order of their evidence; a card supported by several retrieved pages gets no boost
/// (high-degree pages receive no popularity preference). The card is labelled with the relation
/// that admitted it (`relation:<type>`, `via:<evidence id>`).
fn cards_of_evidence(
  candidates: &[MemoryItem],
  source: &mut dyn MemorySource,
  max: usize,
) -> Vec<(MemoryItem, usize)> {
  let mut out: Vec<(MemoryItem, usize)> = Vec::new();
  let mut tried: HashSet<(String, String)> = candidates.iter().map(key).collect();
  let mut attempts = 0usize;
  for (rank, e) in candidates.iter().enumerate() {
    if e.role != "evidence" {
      continue;
    }
    let Some(g) = source.graph(&e.vault) else { continue };
    let mut targets: Vec<(String, &'static str)> = Vec::new();
    for edge in g.out_edges(&e.page_id) {
      if edge.expanding().any(|r| r.relation_type == "supports") {
        targets.push((edge.to.clone(), "supports"));
      }
    }
    for edge in g.in_edges(&e.page_id) {
      if edge.expanding().any(|r| r.relation_type == "derived_from") {
        targets.push((edge.from.clone(), "derived_from"));
      }
    }
    targets.sort();
    for (page, relation) in targets {
      if out.len() >= max || attempts >= max * ADMIT_ATTEMPTS_PER_CARD {
        return out;
      }
      if !tried.insert((e.vault.clone(), page.clone())) {
        continue;
      }
      attempts += 1;
      let Some(mut card) = source.admit(&e.vault, &page) else { continue };
      if card.role != "canonical" {
        continue;
      }
      for reason in [format!("relation:{relation}"), format!("via:{}", e.page_id)] {
        if !card.match_reasons.contains(&reason) {
          card.match_reasons.push(reason);
        }
      }
      out.push((card, rank));
    }
  }
  out
}

/// The bundle of one card: its typed conflicts and evidence (one hop), then retrieved evidence
/// linked with it by any edge.
fn card_bundle(
  card: &MemoryItem,
  candidates: &[MemoryItem],
  source: &mut dyn MemorySource,
  opts: &AssemblyOptions,
  used: &mut HashSet<(String, String)>,
  seen_text: &mut HashSet<String>,
) -> MemoryBundle {
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
        mark_superseded(&mut card_item, &item.page_id, l);
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
  let by_rank = |a: &(usize, MemoryItem), b: &(usize, MemoryItem)| {
    (a.0, a.1.qmd_rank.unwrap_or(u32::MAX), &a.1.page_id).cmp(&(
      b.0,
      b.1.qmd_rank.unwrap_or(u32::MAX),
      &b.1.page_id,
    ))
  };
  evidence.sort_by(by_rank);
  conflicts.sort_by(by_rank);
  MemoryBundle {
    card: Some(card_item),
    evidence: evidence.into_iter().map(|(_, i)| i).collect(),
    conflicts: conflicts.into_iter().map(|(_, i)| i).collect(),
    resolution: None,
    unresolved: vec![],
  }
}

/// No card covers the need: the strongest evidence, labelled as unpromoted, with the claims that
/// compete with it (the same typed hop a card gets).
fn unpromoted_bundles(
  candidates: &[MemoryItem],
  source: &mut dyn MemorySource,
  opts: &AssemblyOptions,
  used: &mut HashSet<(String, String)>,
  seen_text: &mut HashSet<String>,
) -> Vec<MemoryBundle> {
  let mut bundles = Vec::new();
  for c in candidates.iter().filter(|c| c.role == "evidence") {
    if bundles.len() >= opts.max_bundles {
      break;
    }
    if used.contains(&key(c)) || !seen_text.insert(norm_text(&c.excerpt)) {
      continue;
    }
    used.insert(key(c));
    let mut item = unpromoted(c);
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
          mark_superseded(&mut item, &other.page_id, l);
        }
        conflicts.push(other);
      }
    }
    bundles.push(MemoryBundle {
      card: None,
      evidence: vec![item],
      conflicts,
      resolution: None,
      unresolved: vec![],
    });
  }
  bundles
}

fn unpromoted(c: &MemoryItem) -> MemoryItem {
  let mut item = c.clone();
  item.relation = "unpromoted".into();
  item.warnings.push("unpromoted evidence: not an established conclusion".into());
  item
}

/// Where an item sits: bundle index and slot.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Slot {
  /// The card, or the unpromoted evidence heading a bundle without a card.
  Anchor,
  Evidence(usize),
  Conflict(usize),
}

fn anchor_id(b: &MemoryBundle) -> Option<&str> {
  b.card.as_ref().or(b.evidence.first().filter(|_| b.card.is_none())).map(|i| i.page_id.as_str())
}

fn locate(bundles: &[MemoryBundle], vault: &str, page: &str) -> Option<(usize, Slot)> {
  let is = |i: &MemoryItem| i.vault == vault && i.page_id == page;
  bundles.iter().enumerate().find_map(|(n, b)| {
    if b.card.as_ref().is_some_and(is) {
      return Some((n, Slot::Anchor));
    }
    if let Some(k) = b.evidence.iter().position(is) {
      return Some((n, if b.card.is_none() && k == 0 { Slot::Anchor } else { Slot::Evidence(k) }));
    }
    b.conflicts.iter().position(is).map(|k| (n, Slot::Conflict(k)))
  })
}

fn flip(direction: &str) -> &'static str {
  if direction == "outgoing" {
    "incoming"
  } else {
    "outgoing"
  }
}

/// Label `item` with its relation to `partner` inside bundle `b` (direction as seen from the
/// partner: `outgoing` = the partner declares the relation).
fn label(item: &mut MemoryItem, b: &MemoryBundle, partner: &str, relation: &str, direction: &str) {
  item.relation = relation.to_string();
  item.relation_direction = Some(direction.to_string());
  item.related_to =
    (b.card.as_ref().map(|c| c.page_id.as_str()) != Some(partner)).then(|| partner.to_string());
  let reason = format!("relation:{relation}");
  if !item.match_reasons.contains(&reason) {
    item.match_reasons.push(reason);
  }
}

/// Contradiction grouping (spec: "Contradictory claims remain grouped"; "a contradiction
/// neighbor is kept with its seed"). For every retrieved candidate `s` (best first) and each
/// competing-claim neighbour `n` of it (one typed hop):
/// - both in one bundle: nothing to do;
/// - in two bundles: the later bundle joins the earlier one (its card becomes a competing claim
///   labelled with its relation), or — when the later one holds the claim only as evidence —
///   that item moves;
/// - one of them shown: the other joins its bundle as a competing claim (a page not retrieved is
///   admitted only while the bundle has fewer than [`MAX_CONFLICTS`] competing claims);
/// - neither shown (`s` is evidence no card took): a bundle of `s` (unpromoted) and `n`, in a
///   free slot, or in place of the lowest bundle when `s` ranks above that bundle's anchor and
///   the bundle has no competing claims (a plausible conflict recall found outranks a lower
///   card; cards are never reordered, one conflict never displaces another).
///
/// Returns nothing; bundles may be fewer afterwards (merges), never more than `max_bundles`.
fn keep_claims_together(
  bundles: &mut Vec<MemoryBundle>,
  candidates: &[MemoryItem],
  source: &mut dyn MemorySource,
  max_bundles: usize,
  used: &mut HashSet<(String, String)>,
  seed_rank: &HashMap<(String, String), usize>,
) {
  for (si, s) in candidates.iter().enumerate() {
    let Some(g) = source.graph(&s.vault) else { continue };
    let mut links = typed_neighbours(g, &s.page_id).1;
    links.sort_by_key(|l| (l.resolution.is_none(), conflict_order(&l.relation), l.page.clone()));
    for l in links {
      if l.page == s.page_id {
        continue;
      }
      let ls = locate(bundles, &s.vault, &s.page_id);
      let ln = locate(bundles, &s.vault, &l.page);
      match (ls, ln) {
        (Some((a, _)), Some((b, _))) if a == b => {}
        (Some((a, sa)), Some((b, sb))) => {
          // The pair member in the later bundle, and its partner in the earlier one.
          let (keep, drop, moved_slot, moved, partner, dir) = if a < b {
            (a, b, sb, l.page.clone(), s.page_id.clone(), l.direction)
          } else {
            (b, a, sa, s.page_id.clone(), l.page.clone(), flip(l.direction))
          };
          merge_claim(bundles, keep, drop, moved_slot, &moved, &partner, &l.relation, dir, used);
        }
        (Some((a, _)), None) => {
          let retrieved = candidates.iter().any(|c| c.vault == s.vault && c.page_id == l.page);
          if !retrieved && bundles[a].conflicts.len() >= MAX_CONFLICTS {
            continue;
          }
          if let Some(mut item) = take_linked(candidates, source, s, &l) {
            used.insert(key(&item));
            label(&mut item, &bundles[a], &s.page_id, &l.relation, l.direction);
            bundles[a].conflicts.push(item);
          }
        }
        (None, Some((b, _))) => {
          let mut item = s.clone();
          used.insert(key(&item));
          if l.relation == "supersedes" && l.direction == "incoming" {
            mark_superseded(&mut item, &l.page, &l);
          }
          label(&mut item, &bundles[b], &l.page, &l.relation, flip(l.direction));
          bundles[b].conflicts.push(item);
        }
        (None, None) => {
          // Full: the pair takes the lowest bundle's slot only when `s` outranks its anchor and
          // that bundle holds no competing claims of its own.
          let full = bundles.len() >= max_bundles;
          let rank_of = |b: &MemoryBundle| {
            let a = b.card.as_ref().or(b.evidence.first());
            a.and_then(|a| {
              candidates
                .iter()
                .position(|c| c.vault == a.vault && c.page_id == a.page_id)
                .or_else(|| seed_rank.get(&key(a)).copied())
            })
          };
          let displaceable = |b: &MemoryBundle| b.conflicts.is_empty() && rank_of(b).is_some_and(|r| si < r);
          if full && !bundles.last().is_some_and(displaceable) {
            continue;
          }
          let Some(other) = take_linked(candidates, source, s, &l) else { continue };
          if full {
            if let Some(low) = bundles.pop() {
              for i in low.items() {
                used.remove(&key(i));
              }
            }
          }
          let mut head = unpromoted(s);
          if l.relation == "supersedes" && l.direction == "incoming" {
            mark_superseded(&mut head, &other.page_id, &l);
          }
          used.insert(key(&head));
          used.insert(key(&other));
          bundles.push(MemoryBundle {
            card: None,
            evidence: vec![head],
            conflicts: vec![other],
            resolution: None,
            unresolved: vec![],
          });
        }
      }
    }
  }
}

/// Bring the claim `moved` (in bundle `drop`, at `slot`) into bundle `keep` next to `partner`.
#[allow(clippy::too_many_arguments)]
fn merge_claim(
  bundles: &mut Vec<MemoryBundle>,
  keep: usize,
  drop: usize,
  slot: Slot,
  moved: &str,
  partner: &str,
  relation: &str,
  direction: &str,
  used: &mut HashSet<(String, String)>,
) {
  if let Slot::Evidence(k) = slot {
    // Evidence of another card: only the claim moves.
    let mut item = bundles[drop].evidence.remove(k);
    label(&mut item, &bundles[keep], partner, relation, direction);
    bundles[keep].conflicts.push(item);
    return;
  }
  let b = bundles.remove(drop);
  let anchor = anchor_id(&b).map(str::to_string);
  let target = &mut bundles[keep];
  // The later bundle's anchor and competing claims join as competing claims; each is labelled
  // relative to the page it relates to (`moved` to `partner`; the others to their old anchor).
  let mut anchor_item = b.card.clone().or_else(|| b.evidence.first().cloned());
  let mut rest_evidence: Vec<MemoryItem> =
    if b.card.is_some() { b.evidence.clone() } else { b.evidence.iter().skip(1).cloned().collect() };
  let mut conflicts = b.conflicts.clone();
  let old_anchor = anchor.clone().unwrap_or_default();
  let relabel_to_old = |i: &mut MemoryItem| {
    if i.related_to.is_none() {
      i.related_to = Some(old_anchor.clone());
    }
  };
  conflicts.iter_mut().for_each(relabel_to_old);
  rest_evidence.iter_mut().for_each(relabel_to_old);
  if let Some(a) = anchor_item.as_mut() {
    if a.page_id == moved {
      label(a, target, partner, relation, direction);
    } else if let Some(m) = conflicts.iter().find(|c| c.page_id == moved) {
      // The anchor relates to `moved`, which it held as a competing claim.
      let (r, d) = (m.relation.clone(), m.relation_direction.clone().unwrap_or_default());
      label(a, target, moved, &r, flip(&d));
    }
  }
  if let Some(m) = conflicts.iter_mut().find(|c| c.page_id == moved) {
    if anchor_item.as_ref().map(|a| a.page_id.as_str()) != Some(moved) {
      // Keep its label to the old anchor; the pair with `partner` is recorded in the reason.
      let reason = format!("relation:{relation}");
      if !m.match_reasons.contains(&reason) {
        m.match_reasons.push(reason);
      }
    }
  }
  target.conflicts.extend(anchor_item);
  target.conflicts.extend(conflicts);
  for e in rest_evidence {
    if target.evidence.len() < MAX_EVIDENCE {
      target.evidence.push(e);
    } else {
      used.remove(&key(&e));
    }
  }
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
  tags.extend(i.date.as_ref().map(|d| format!("date: {d}")));
  if let Some(f) = &i.freshness {
    if f.verified {
      tags.extend(f.verified_at.as_ref().map(|d| format!("verified: {d}")));
    }
    if !f.stale {
      tags.extend(f.stale_after.as_ref().map(|d| format!("fresh until: {d}")));
    }
  }
  if i.historical {
    tags.push("historical".into());
  }
  tags.extend(i.scope.as_ref().map(|s| format!("scope: {s}")));
  tags.extend(i.vault_label.clone());
  let _ = write!(out, "{label} {} [{}] ({})", i.title, i.page_id, tags.join(", "));
  if let Some(d) = &i.relation_direction {
    let partner = i.related_to.as_deref().unwrap_or("card");
    let arrow = if d == "outgoing" { "←" } else { "→" };
    let _ = write!(out, " — {} {arrow} {partner}", i.relation);
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
mod tests;
