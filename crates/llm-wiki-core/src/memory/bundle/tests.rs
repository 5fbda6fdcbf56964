//! Unit tests of [`super`] (bundle assembly, claim grouping, packing, rendering).
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
    date: None,
    freshness: None,
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
    related_to: None,
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
  let cands = vec![item("s/a", "source", Some(0), "Same  text"), item("s/b", "source", Some(1), "same text")];
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
    b[0].conflicts.iter().map(|c| (c.page_id.as_str(), c.relation_direction.as_deref())).collect::<Vec<_>>(),
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
  assert!(assemble(&cands, &mut src, &AssemblyOptions { budget_chars: 10, ..Default::default() }).is_empty());
  for bundles in [&full, &b, &tiny] {
    for i in bundles.iter().flat_map(|b| b.items()) {
      assert!(i.excerpt.chars().count() <= MAX_EXCERPT_CHARS);
    }
  }
}

#[test]
fn date_freshness_and_scope_are_carried_and_rendered() {
  let meta = |fm: &str| {
    crate::vault::Page::parse("c/x", "/x.md".into(), &format!("---\ntype: concept\n{fm}---\n")).unwrap().meta
  };
  let day = 86_400;
  let now = crate::util::time::parse_timestamp("2026-06-01").unwrap();
  assert_eq!(Freshness::of(&meta("status: stable\n"), now), None, "nothing declared, nothing carried");
  let m = meta("stale_after: 2026-05-01\nverified:\n  - by: Ada\n    at: 2026-04-01\nupdated: 2026-03-01\n");
  let f = Freshness::of(&m, now).unwrap();
  assert!(f.stale && f.verified);
  assert_eq!((f.stale_after.as_deref(), f.verified_at.as_deref()), (Some("2026-05-01"), Some("2026-04-01")));
  assert!(!Freshness::of(&m, now - 40 * day).unwrap().stale);
  assert_eq!(page_warnings(&m, now), vec!["stale: past stale_after 2026-05-01".to_string()]);
  assert!(page_warnings(&m, now - 40 * day).is_empty());
  let outdated = meta("status: draft\nverified:\n  by: Ada\n  at: 2026-01-01\ngenerated:\n  by: pi-llm-wiki/x\n  at: 2026-02-01\n");
  assert_eq!(page_warnings(&outdated, now).len(), 2);
  assert!(!Freshness::of(&outdated, now).unwrap().verified);

  let mut card = item("c/a", "concept", Some(0), "Claim text");
  card.status = Some("stable".into());
  card.date = m.date().map(str::to_string);
  card.freshness = Freshness::of(&m, now - 40 * day);
  card.scope = Some("Linux hosts".into());
  let text = render_bundles(&[MemoryBundle {
    card: Some(card),
    evidence: vec![],
    conflicts: vec![],
    resolution: None,
    unresolved: vec![],
  }]);
  let head = text.lines().nth(1).unwrap();
  assert_eq!(
    head,
    "Card: C/A [c/a] (concept, stable, date: 2026-03-01, verified: 2026-04-01, fresh until: 2026-05-01, scope: Linux hosts)"
  );
  let json = serde_json::to_value(item("c/b", "concept", None, "x")).unwrap();
  assert!(json.get("date").is_some() && json.get("freshness").is_some(), "fields are part of the shape");
}

fn ids(b: &MemoryBundle) -> Vec<&str> {
  b.items().map(|i| i.page_id.as_str()).collect()
}

#[test]
fn a_claim_held_as_evidence_pulls_its_competing_card_into_the_same_bundle() {
  // s/m supports c/a (so it is c/a's evidence) and contradicts c/c, a card of its own.
  let mut src = fake(&[
    ("c/a", "concept", "", "A"),
    (
      "s/m",
      "source",
      &(rel("c/a", "supports") + "  - target: c/c\n    type: contradicts\n"),
      "[[c/a]] [[c/c]]",
    ),
    ("c/c", "entity", "", "C"),
    ("c/d", "skill", "", "D"),
    ("c/e", "case", "", "E"),
  ]);
  let cands = vec![
    item("c/a", "concept", Some(0), "A"),
    item("c/c", "entity", Some(1), "C"),
    item("c/d", "skill", Some(2), "D"),
    item("c/e", "case", Some(3), "E"),
  ];
  let b = assemble(&cands, &mut src, &AssemblyOptions::default());
  assert_eq!(ids(&b[0]), vec!["c/a", "s/m", "c/c"], "{b:#?}");
  let c = &b[0].conflicts[0];
  assert_eq!(
    (c.relation.as_str(), c.relation_direction.as_deref(), c.related_to.as_deref()),
    ("contradicts", Some("outgoing"), Some("s/m"))
  );
  assert!(render_bundles(&b).contains("— contradicts ← s/m"));
  // The freed slot goes to the next cards.
  assert_eq!(
    b.iter().map(|b| b.card.as_ref().unwrap().page_id.as_str()).collect::<Vec<_>>(),
    ["c/a", "c/d", "c/e"]
  );
  assert!(distinct_pages(&b));
  // Ablation: no typed relations, no grouping.
  let plain = assemble(&cands, &mut src, &AssemblyOptions { typed_expansion: false, ..Default::default() });
  assert_eq!(plain[1].card.as_ref().unwrap().page_id, "c/c");
}

#[test]
fn contradiction_chains_collapse_into_one_bundle() {
  // c/a contradicts c/b; c/c contradicts c/b: c/b is admitted by c/a, then c/c (a card of its
  // own otherwise) joins them.
  let mut src = fake(&[
    ("c/a", "concept", &rel("c/b", "contradicts"), "[[c/b]]"),
    ("c/b", "concept", "", "B"),
    ("c/c", "entity", &rel("c/b", "contradicts"), "[[c/b]]"),
  ]);
  let cands = vec![item("c/a", "concept", Some(0), "A"), item("c/c", "entity", Some(1), "C")];
  let b = assemble(&cands, &mut src, &AssemblyOptions::default());
  assert_eq!(b.len(), 1, "{b:#?}");
  assert_eq!(ids(&b[0]), vec!["c/a", "c/b", "c/c"]);
  let c = &b[0].conflicts[1];
  assert_eq!((c.related_to.as_deref(), c.relation_direction.as_deref()), (Some("c/b"), Some("incoming")));
}

#[test]
fn retrieved_evidence_claims_find_their_partner_or_a_free_slot() {
  let mut src = fake(&[
    ("c/a", "concept", "", "A"),
    ("c/b", "entity", "", "B"),
    ("s/e", "source", &rel("c/b", "contradicts"), "[[c/b]]"),
    ("s/f", "source", &rel("s/g", "supersedes"), "[[s/g]]"),
    ("s/g", "source", "", "G"),
  ]);
  // s/e (not linked to c/a, so no card takes it) contradicts the card c/b: it joins c/b's
  // bundle. s/f supersedes s/g; neither is shown: a bundle of their own while a slot is free.
  let cands = vec![
    item("c/a", "concept", Some(0), "A"),
    item("s/e", "source", Some(1), "E"),
    item("s/f", "source", Some(2), "F"),
    item("c/b", "entity", Some(3), "B"),
  ];
  let b = assemble(&cands, &mut src, &AssemblyOptions::default());
  assert_eq!(b.len(), 3, "{b:#?}");
  assert_eq!(ids(&b[1]), vec!["c/b", "s/e"]);
  assert_eq!(b[1].conflicts[0].relation_direction.as_deref(), Some("incoming"));
  assert_eq!(b[1].conflicts[0].related_to, None, "related to the card itself");
  assert!(b[2].card.is_none());
  assert_eq!(ids(&b[2]), vec!["s/f", "s/g"]);
  assert_eq!(b[2].evidence[0].relation, "unpromoted");
  assert!(b[2].conflicts[0].warnings.iter().any(|w| w == "superseded by s/f"));
  // No free slot: the pair does not displace a bundle that holds a conflict of its own.
  let two = assemble(&cands, &mut src, &AssemblyOptions { max_bundles: 2, ..Default::default() });
  assert_eq!(two.len(), 2);
  assert!(two.iter().all(|b| b.card.is_some()));
  assert!(distinct_pages(&two));
  // It takes the lowest plain bundle's slot when it outranks that bundle's card, and only then.
  let mut src = fake(&[
    ("c/a", "concept", "", "A"),
    ("c/x", "entity", "", "X"),
    ("s/f", "source", &rel("s/g", "supersedes"), "[[s/g]]"),
    ("s/g", "source", "", "G"),
  ]);
  let opts = AssemblyOptions { max_bundles: 2, ..Default::default() };
  let outranks = vec![
    item("c/a", "concept", Some(0), "A"),
    item("s/f", "source", Some(1), "F"),
    item("c/x", "entity", Some(2), "X"),
  ];
  let b = assemble(&outranks, &mut src, &opts);
  assert_eq!(b.iter().map(ids).collect::<Vec<_>>(), vec![vec!["c/a"], vec!["s/f", "s/g"]]);
  let below = vec![
    item("c/a", "concept", Some(0), "A"),
    item("c/x", "entity", Some(1), "X"),
    item("s/f", "source", Some(2), "F"),
  ];
  let b = assemble(&below, &mut src, &opts);
  assert_eq!(b.iter().map(ids).collect::<Vec<_>>(), vec![vec!["c/a"], vec!["c/x"]]);
}

#[test]
fn truncation_is_by_characters() {
  assert_eq!(truncate_chars("héllo", 2), "hé");
  assert_eq!(truncate_chars("ab", 5), "ab");
}

fn scored(id: &str, ty: &str, rank: u32, score: f64) -> MemoryItem {
  MemoryItem { score, ..item(id, ty, Some(rank), &format!("text of {id}")) }
}

fn card_ids(b: &[MemoryBundle]) -> Vec<&str> {
  b.iter().filter_map(|b| b.card.as_ref().map(|c| c.page_id.as_str())).collect()
}

#[test]
fn diversity_cap_gives_the_slot_only_to_a_comparable_alternative() {
  let mut src = fake(&[]);
  let opts = AssemblyOptions { max_bundles: 5, ..Default::default() };
  // A third concept (no domain: one (concept, none) pair) at 0.30 keeps its place above an
  // entity at 0.06 and an analysis at 0.04: they are no alternative (below half its score).
  let weak = vec![
    scored("c/a", "concept", 0, 0.35),
    scored("c/b", "concept", 1, 0.18),
    scored("c/c", "concept", 2, 0.30),
    scored("e/q", "entity", 3, 0.06),
    scored("n/x", "analysis", 4, 0.04),
  ];
  assert_eq!(card_ids(&assemble(&weak, &mut src, &opts)), vec!["c/a", "c/b", "c/c", "e/q", "n/x"]);
  // A comparable card of another type (0.49 ≥ half of 0.56) takes the third slot.
  let close = vec![
    scored("c/a", "concept", 0, 0.57),
    scored("c/b", "concept", 1, 0.60),
    scored("c/c", "concept", 2, 0.56),
    scored("n/x", "analysis", 3, 0.49),
  ];
  assert_eq!(card_ids(&assemble(&close, &mut src, &opts)), vec!["c/a", "c/b", "n/x", "c/c"]);
  // Declared domains form their own pairs: three concepts of three domains are not capped.
  let mut domains = close.clone();
  for (c, d) in domains.iter_mut().zip(["x", "y", "z"]) {
    c.domain = Some(d.into());
  }
  assert_eq!(card_ids(&assemble(&domains, &mut src, &opts)), vec!["c/a", "c/b", "c/c", "n/x"]);
  // Same declared domain (case and spaces ignored): capped like the undeclared case.
  for (c, d) in domains.iter_mut().zip(["Ops", " ops", "ops "]) {
    c.domain = Some(d.into());
  }
  assert_eq!(card_ids(&assemble(&domains, &mut src, &opts)), vec!["c/a", "c/b", "n/x", "c/c"]);
}

#[test]
fn retrieved_evidence_brings_the_card_it_supports_instead_of_standing_unpromoted() {
  let mut src = fake(&[
    ("c/card", "concept", "", "The established claim."),
    ("s/e1", "source", &rel("c/card", "supports"), "Backs [[c/card]]."),
    ("s/e2", "source", &rel("c/card", "supports"), "Also backs [[c/card]]."),
    ("c/derived", "concept", &rel("s/e3", "derived_from"), "From [[s/e3]]."),
    ("s/e3", "source", "", "e3"),
    ("s/plain", "source", "", "Links [[c/other]] only."),
    ("c/other", "concept", "", "o"),
  ]);
  // A retrieved card ranks first; the evidence of a card retrieval missed follows.
  let cands = vec![
    item("n/top", "analysis", Some(0), "Top"),
    item("s/e1", "source", Some(1), "E1"),
    item("s/e2", "source", Some(2), "E2"),
    item("s/plain", "source", Some(3), "Plain"),
    item("s/e3", "source", Some(4), "E3"),
  ];
  let opts = AssemblyOptions { max_bundles: 5, ..Default::default() };
  let b = assemble(&cands, &mut src, &opts);
  assert_eq!(card_ids(&b), vec!["n/top", "c/card", "c/derived"], "admitted cards follow the retrieved one");
  let card = b[1].card.as_ref().unwrap();
  assert_eq!(card.qmd_rank, None);
  assert!(card.match_reasons.contains(&"relation:supports".to_string()), "{:?}", card.match_reasons);
  assert!(card.match_reasons.contains(&"via:s/e1".to_string()), "{:?}", card.match_reasons);
  let ev: Vec<&str> = b[1].evidence.iter().map(|e| e.page_id.as_str()).collect();
  assert_eq!(ev, vec!["s/e1", "s/e2"], "the evidence that admitted the card is its evidence");
  assert!(b[2].card.as_ref().unwrap().match_reasons.contains(&"relation:derived_from".to_string()));
  assert!(
    !src.admitted.contains(&"c/other".to_string()),
    "a plain link never admits a card: {:?}",
    src.admitted
  );
  assert!(distinct_pages(&b));
  // Evidence alone: the supported card replaces the unpromoted bundle.
  let only = vec![item("s/e1", "source", Some(0), "E1")];
  let b = assemble(&only, &mut src, &opts);
  assert_eq!(card_ids(&b), vec!["c/card"]);
  assert!(b.iter().all(|b| b.evidence.iter().all(|e| e.relation != "unpromoted")));
  // The ablation admits nothing.
  let b = assemble(&only, &mut src, &AssemblyOptions { typed_expansion: false, ..opts.clone() });
  assert_eq!(b[0].evidence[0].relation, "unpromoted");
  // An evidence page that supports another piece of evidence admits no card.
  let mut src = fake(&[("s/a", "source", &rel("s/b", "supports"), "[[s/b]]"), ("s/b", "source", "", "b")]);
  let b = assemble(&[item("s/a", "source", Some(0), "A")], &mut src, &opts);
  assert!(card_ids(&b).is_empty());
}

#[test]
fn evidence_with_many_supported_pages_admits_boundedly() {
  // One retrieved source declares `supports` to 500 sources (not cards) and one card last.
  let mut pages: Vec<(String, String, String, String)> = Vec::new();
  let mut rels = String::from("relations:\n");
  let mut body = String::new();
  for n in 0..500 {
    rels.push_str(&format!("  - target: s/t{n:03}\n    type: supports\n"));
    body.push_str(&format!("[[s/t{n:03}]] "));
    pages.push((format!("s/t{n:03}"), "source".into(), String::new(), "t".into()));
  }
  rels.push_str("  - target: z/card\n    type: supports\n");
  body.push_str("[[z/card]]");
  pages.push(("s/hub".into(), "source".into(), rels, body));
  pages.push(("z/card".into(), "concept".into(), String::new(), "card".into()));
  let refs: Vec<(&str, &str, &str, &str)> =
    pages.iter().map(|(a, b, c, d)| (a.as_str(), b.as_str(), c.as_str(), d.as_str())).collect();
  let mut src = fake(&refs);
  let opts = AssemblyOptions { max_bundles: 3, ..Default::default() };
  let _ = assemble(&[item("s/hub", "source", Some(0), "Hub")], &mut src, &opts);
  let lookups = src.admitted.iter().filter(|p| p.starts_with("s/t")).count();
  assert!(lookups <= 3 * ADMIT_ATTEMPTS_PER_CARD, "{lookups} lookups");
}
