//! `graphQuery`: a multi-hop, token-budgeted traversal of the link graph seeded by the best
//! recall hits (seed 004's `graph_query`, "what connects A to B?"). From the seeds it walks up
//! to `hops` hops over links in both directions, best first: a path's cost is the sum of its
//! edges' weights ([`edge_weight`]: a typed relation costs less than `related_to`, which costs
//! less than a plain link), so a page two typed hops away comes before one plain link away; ties
//! go to competing claims and supersessions, then current canonical pages, then nearer pages. A page and its competing claim (a
//! `contradicts` relation, or a pair a user resolution settled) are admitted together or not at
//! all. Every admitted page says why it is there (seed, or the relation / link and the page it
//! was reached from); superseded pages are kept and marked historical. The rendered `text` and
//! everything counted in `tokensUsed` stay within the token budget.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use serde::Serialize;

use super::graph::{Edge, LinkGraph};
use super::graph_input::{budget, cut_at_sentence, tokens};
use crate::error::{Error, Result};
use crate::retrieve::recall::{recall_wiki, RecallOptions, RecallPolicy};
use crate::retrieve::RetrievalMode;
use crate::store::manifest::Manifest;
use crate::store::CancelFlag;
use crate::util::diagnostic::RecallDiagnostic;
use crate::util::num::sat_u32;
use crate::vault::{Role, VaultPaths};

/// Default token budget (seed 004: "token-budgeted traversal, default 2,000").
pub const DEFAULT_GRAPH_TOKENS: usize = 2_000;
/// Largest budget accepted (larger requests are clamped with `budget_clamped`).
pub const MAX_GRAPH_TOKENS: usize = 10_000;
/// Default hops from the seeds.
pub const DEFAULT_HOPS: u32 = 2;
/// Most hops (larger requests are clamped with `hops_clamped`).
pub const MAX_GRAPH_HOPS: u32 = 4;
/// Default seeds taken from recall.
pub const DEFAULT_SEEDS: usize = 3;
/// Most seeds.
pub const MAX_SEEDS: usize = 10;
/// Candidate edges queued by one traversal (not fitted: a bound on work for hub pages with
/// thousands of links; what is left out sets `truncated`).
pub const MAX_CANDIDATES: usize = 50_000;
/// Weight of a typed relation (other than `related_to`) on a path.
pub const TYPED_WEIGHT: u32 = 2;
/// Weight of a `related_to` relation.
pub const RELATED_WEIGHT: u32 = 3;
/// Weight of a plain link. Chosen on the synthetic graph bench (`bench graph`, 2,000 pages):
/// with layer-by-layer order the plain neighbours of the seeds took the whole budget before any
/// page two typed hops away; with 5 against 2, two typed hops (4) come before one plain link,
/// three (6) after it. Not looked at on the pi questions.
pub const LINK_WEIGHT: u32 = 5;
/// Candidates in a row that did not fit before a layer stops (not fitted: bounds work once the
/// budget is spent; smaller pages after a large one still get a chance).
pub const MAX_MISSES: usize = 64;
/// Pages admitted together at most: a page and its competing claims, transitively (not fitted:
/// a bound for a vault where many pages contradict each other).
pub const MAX_GROUP: usize = 8;
/// Tokens of a page's summary or seed preview in the text (not fitted: room for one or two
/// sentences per page keeps 20-30 pages inside the default budget).
pub const SUMMARY_TOKENS: usize = 40;

/// Options of [`graph_query`].
#[derive(Debug, Clone, Default)]
pub struct GraphQueryOptions {
  /// Token budget (default 2,000, at most 10,000; 0 is an `invalid_argument`).
  pub budget_tokens: Option<u64>,
  /// Hops from the seeds (default 2, at most 4; 0 = the seeds alone).
  pub hops: Option<u32>,
  /// Seeds taken from recall (default 3, 1..=10).
  pub seeds: Option<u32>,
  /// Retrieval mode of the seed recall.
  pub mode: RetrievalMode,
  /// Cancellation of the seed recall.
  pub cancel: CancelFlag,
}

/// A page of the answer.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false, js_name = "GraphQueryPage"))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryPage {
  /// Page id.
  pub id: String,
  /// Title.
  pub title: String,
  /// Frontmatter `type`.
  #[serde(rename = "type")]
  #[cfg_attr(feature = "napi", napi(js_name = "type"))]
  pub page_type: String,
  /// True for a canonical page.
  pub canonical: bool,
  /// Frontmatter `status`.
  pub status: Option<String>,
  /// True when a `supersedes` relation or a user resolution made the page historical.
  pub historical: bool,
  /// The pages superseding it.
  pub superseded_by: Vec<String>,
  /// `seed`, `relation` (a typed relation admitted it), `link` (a plain link) or `competing`
  /// (kept with its competing claim).
  #[cfg_attr(feature = "napi", napi(ts_type = "'seed' | 'relation' | 'link' | 'competing'"))]
  pub why: String,
  /// The page it was reached from (absent for a seed).
  pub via: Option<String>,
  /// The relation type that admitted it (`contradicts`, `supports`, …), `link` for a plain link.
  pub relation: Option<String>,
  /// Hops from the nearest seed.
  pub depth: u32,
  /// 0-based rank among the seeds.
  pub seed_rank: Option<u32>,
  /// Recall preview (seeds) or frontmatter `summary` / `description`, cut at a sentence end.
  pub summary: Option<String>,
}

/// An edge between two admitted pages.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false, js_name = "GraphQueryEdge"))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryEdge {
  /// Linking page.
  pub from: String,
  /// Linked page.
  pub to: String,
  /// Typed relation types the edge carries (empty: a plain link).
  pub relations: Vec<String>,
  /// Set when a user resolution relates the pair (its relation, selected → other).
  pub resolution: Option<String>,
}

/// Result of `graphQuery` ([`graph_query`]).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphQueryResult {
  /// The query as given.
  pub query: String,
  /// Admitted pages: seeds first, then by hop and admission order.
  pub pages: Vec<QueryPage>,
  /// Edges between admitted pages.
  pub edges: Vec<QueryEdge>,
  /// True when the budget or a work bound left reachable pages out.
  pub truncated: bool,
  /// Estimated tokens of `text` (never above `budgetTokens`).
  pub tokens_used: u32,
  /// The budget applied.
  pub budget_tokens: u32,
  /// The hops applied.
  pub hops: u32,
  /// Pages and edges rendered for an agent.
  pub text: String,
  /// `{code, message}` pairs.
  pub diagnostics: Vec<RecallDiagnostic>,
}

/// A seed: page id and its recall preview.
#[derive(Debug, Clone)]
pub struct Seed {
  /// Page id.
  pub id: String,
  /// Recall preview.
  pub preview: Option<String>,
}

/// Path weight of an edge carrying `types` (see [`LINK_WEIGHT`]).
pub fn edge_weight(types: &[String]) -> u32 {
  match class(types) {
    0 | 1 => TYPED_WEIGHT,
    2 => RELATED_WEIGHT,
    _ => LINK_WEIGHT,
  }
}

/// Relation class of an edge for ordering: competing/superseding first, other typed relations,
/// `related_to`, then plain links.
fn class(types: &[String]) -> u8 {
  if types.iter().any(|t| t == "contradicts" || t == "supersedes") {
    0
  } else if types.iter().any(|t| t != "related_to") {
    1
  } else if !types.is_empty() {
    2
  } else {
    3
  }
}

/// A queued edge: ordering key (cost, class, historical, evidence, depth, sequence), then the edge.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Cand {
  key: (u32, u8, bool, bool, u32, usize),
  from: String,
  to: String,
  types: Vec<String>,
}

struct Walk<'a> {
  manifest: &'a Manifest,
  graph: &'a LinkGraph,
  budget: usize,
  used: usize,
  pages: Vec<QueryPage>,
  lines: Vec<String>,
  index: HashMap<String, usize>,
  edges: Vec<QueryEdge>,
  edge_set: HashSet<(String, String, bool)>,
  truncated: bool,
}

impl<'a> Walk<'a> {
  fn historical(&self, id: &str) -> Vec<String> {
    self
      .graph
      .decisions
      .superseded
      .get(id)
      .map(|v| v.iter().map(|s| s.by.clone()).collect())
      .unwrap_or_default()
  }

  fn page(&self, id: &str, why: &str, via: Option<&str>, relation: Option<&str>, depth: u32) -> QueryPage {
    let e = &self.manifest.entries[id];
    let by = self.historical(id);
    let summary = e.meta.summary.as_deref().or(e.meta.description.as_deref()).map(|s| {
      let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
      cut_at_sentence(&flat, SUMMARY_TOKENS).0.to_string()
    });
    QueryPage {
      id: id.to_string(),
      title: e.meta.title.clone(),
      page_type: e.meta.page_type.clone(),
      canonical: e.role == Role::Canonical,
      status: e.meta.status.clone(),
      historical: !by.is_empty(),
      superseded_by: by,
      why: why.to_string(),
      via: via.map(str::to_string),
      relation: relation.map(str::to_string),
      depth,
      seed_rank: None,
      summary: summary.filter(|s| !s.is_empty()),
    }
  }

  fn line(p: &QueryPage) -> String {
    let why = match (&p.seed_rank, &p.via, &p.relation) {
      (Some(r), _, _) => format!("seed {}", r + 1),
      (None, Some(v), Some(rel)) if p.why == "competing" => format!("competing claim of {v} ({rel})"),
      (None, Some(v), Some(rel)) => format!("{rel} ↔ {v}"),
      _ => p.why.clone(),
    };
    let mut flags =
      vec![p.page_type.clone(), if p.canonical { "canonical".into() } else { "evidence".into() }];
    if p.historical {
      flags.push(format!("HISTORICAL, superseded by {}", p.superseded_by.join(", ")));
    }
    let mut s = format!("- [{why}] {} — {} ({})", p.id, p.title, flags.join(", "));
    if let Some(sum) = &p.summary {
      s.push_str(": ");
      s.push_str(sum);
    }
    s
  }

  fn edge_line(e: &QueryEdge) -> String {
    let label = match (e.relations.is_empty(), &e.resolution) {
      (_, Some(r)) => format!("{r} (user resolution)"),
      (true, None) => "link".to_string(),
      (false, None) => e.relations.join(", "),
    };
    format!("- {} —{label}→ {}", e.from, e.to)
  }

  /// Competing partners of `id`: `contradicts` either way, and active user resolutions.
  fn partners(&self, id: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let is_c = |e: &Edge| e.relations.iter().any(|r| r.relation_type == "contradicts");
    for e in self.graph.out_edges(id).iter().filter(|e| is_c(e)) {
      out.push((e.to.clone(), "contradicts".into()));
    }
    for e in self.graph.in_edges(id).filter(|e| is_c(e)) {
      out.push((e.from.clone(), "contradicts".into()));
    }
    for r in self.graph.decisions.resolutions.active_for(id) {
      let other = if r.selected == id { &r.other } else { &r.selected };
      out.push((other.clone(), r.relation.clone()));
    }
    out.retain(|(p, _)| p != id && self.manifest.entries.contains_key(p));
    out.dedup_by(|a, b| a.0 == b.0);
    out
  }

  /// The edges between `id` and the pages `inside` accepts (both directions), and the active
  /// user resolutions relating them.
  fn edges_to(&self, id: &str, inside: &dyn Fn(&str) -> bool) -> Vec<QueryEdge> {
    let types = |e: &Edge| e.relations.iter().map(|r| r.relation_type.clone()).collect::<Vec<_>>();
    let mut out: Vec<QueryEdge> = Vec::new();
    for e in self.graph.out_edges(id).iter().filter(|e| inside(&e.to)) {
      out.push(QueryEdge { from: e.from.clone(), to: e.to.clone(), relations: types(e), resolution: None });
    }
    for e in self.graph.in_edges(id).filter(|e| inside(&e.from)) {
      out.push(QueryEdge { from: e.from.clone(), to: e.to.clone(), relations: types(e), resolution: None });
    }
    for r in self.graph.decisions.resolutions.active_for(id) {
      let other = if r.selected == id { &r.other } else { &r.selected };
      if inside(other) {
        out.push(QueryEdge {
          from: r.selected.clone(),
          to: r.other.clone(),
          relations: vec![],
          resolution: Some(r.relation.clone()),
        });
      }
    }
    out
  }

  /// Admit `page` (and its competing partners not yet in) with the edges linking them to pages
  /// already in, if all of it fits; else nothing.
  fn admit(&mut self, page: QueryPage) -> bool {
    if self.index.contains_key(&page.id) {
      return true;
    }
    // The page with its competing claims, theirs in turn (a chain of disagreements is one
    // group), at most MAX_GROUP pages.
    let mut group = vec![page];
    let mut next = 0;
    while next < group.len() && group.len() < MAX_GROUP {
      let (from, d) = (group[next].id.clone(), group[next].depth);
      for (partner, rel) in self.partners(&from) {
        if group.len() < MAX_GROUP
          && !self.index.contains_key(&partner)
          && !group.iter().any(|p| p.id == partner)
        {
          group.push(self.page(&partner, "competing", Some(&from), Some(&rel), d));
        }
      }
      next += 1;
    }
    let ids: Vec<String> = group.iter().map(|p| p.id.clone()).collect();
    let mut new_edges: Vec<QueryEdge> = Vec::new();
    for (i, id) in ids.iter().enumerate() {
      let earlier = &ids[..i];
      let inside = |x: &str| self.index.contains_key(x) || earlier.iter().any(|g| g == x);
      for e in self.edges_to(id, &inside) {
        let key = (e.from.clone(), e.to.clone(), e.resolution.is_some());
        if !self.edge_set.contains(&key)
          && !new_edges
            .iter()
            .any(|n| (n.from.as_str(), n.to.as_str(), n.resolution.is_some()) == (&key.0, &key.1, key.2))
        {
          new_edges.push(e);
        }
      }
    }
    let page_lines: Vec<String> = group.iter().map(Self::line).collect();
    let edge_lines: Vec<String> = new_edges.iter().map(Self::edge_line).collect();
    let cost: usize = page_lines.iter().chain(&edge_lines).map(|l| tokens(l)).sum();
    if self.used + cost > self.budget {
      self.truncated = true;
      return false;
    }
    self.used += cost;
    for p in group {
      self.index.insert(p.id.clone(), self.pages.len());
      self.pages.push(p);
    }
    self.lines.extend(page_lines);
    for e in new_edges {
      self.edge_set.insert((e.from.clone(), e.to.clone(), e.resolution.is_some()));
      self.edges.push(e);
    }
    true
  }
}

/// The answer's text: header, page lines, edges; a budget smaller than the header gets the
/// header cut (nothing else was admitted then).
fn render(header: String, lines: &[String], edges: &[QueryEdge], budget_tokens: usize) -> String {
  let mut text = vec![header];
  text.extend(lines.iter().cloned());
  text.push("## Edges".into());
  text.extend(edges.iter().map(Walk::edge_line));
  let text = text.join("\n");
  if tokens(&text) > budget_tokens {
    cut_at_sentence(&text, budget_tokens).0.to_string()
  } else {
    text
  }
}

/// The traversal over one manifest's graph from `seeds` (see [`graph_query`]).
pub fn graph_query_in(
  manifest: &Manifest,
  graph: &LinkGraph,
  query: &str,
  seeds: &[Seed],
  budget_tokens: usize,
  hops: u32,
) -> GraphQueryResult {
  let header = format!(
    "# Graph for {:?} (pages, then edges; ↔ = reached over)",
    query.chars().take(120).collect::<String>()
  );
  let mut w = Walk {
    manifest,
    graph,
    budget: budget_tokens,
    used: tokens(&header) + tokens("## Edges"),
    pages: vec![],
    lines: vec![],
    index: HashMap::new(),
    edges: vec![],
    edge_set: HashSet::new(),
    truncated: false,
  };
  let mut diagnostics = Vec::new();
  for (rank, s) in seeds.iter().enumerate() {
    let Some(id) = super::graph_input::find_page(manifest, &s.id) else { continue };
    let mut p = w.page(id, "seed", None, None, 0);
    p.seed_rank = Some(rank as u32);
    if let Some(pre) = &s.preview {
      let flat = pre.split_whitespace().collect::<Vec<_>>().join(" ");
      p.summary = Some(cut_at_sentence(&flat, SUMMARY_TOKENS).0.to_string()).filter(|x| !x.is_empty());
    }
    w.admit(p);
  }
  if w.pages.is_empty() {
    diagnostics.push(RecallDiagnostic::new(
      "graph_no_seeds",
      "recall found no page for the query; nothing to traverse",
    ));
  }
  // Best first: (cost, class, historical, evidence, depth, sequence) → (from, to, types).
  let mut queue: BinaryHeap<Reverse<Cand>> = BinaryHeap::new();
  let mut seq = 0usize;
  let mut queued = 0usize;
  let mut bounded = false;
  let mut push_from = |queue: &mut BinaryHeap<Reverse<Cand>>, w: &Walk, id: &str, cost: u32, depth: u32| {
    if depth >= hops {
      return;
    }
    let steps =
      graph.out_edges(id).iter().map(|e| (e, &e.to)).chain(graph.in_edges(id).map(|e| (e, &e.from)));
    for (e, other) in steps {
      if w.index.contains_key(other.as_str()) {
        continue;
      }
      if queued >= MAX_CANDIDATES {
        bounded = true;
        return;
      }
      queued += 1;
      seq += 1;
      let types: Vec<String> = e.relations.iter().map(|r| r.relation_type.clone()).collect();
      let hist = graph.decisions.superseded.contains_key(other.as_str());
      let evidence = manifest.entries.get(other.as_str()).is_none_or(|x| x.role != Role::Canonical);
      let key = (cost + edge_weight(&types), class(&types), hist, evidence, depth + 1, seq);
      queue.push(Reverse(Cand { key, from: id.to_string(), to: other.clone(), types }));
    }
  };
  for p in w.pages.clone() {
    push_from(&mut queue, &w, &p.id, 0, 0);
  }
  let mut misses = 0;
  while let Some(Reverse(c)) = queue.pop() {
    if w.index.contains_key(&c.to) {
      continue;
    }
    let (cost, depth) = (c.key.0, c.key.4);
    let (why, rel) = match c.types.iter().find(|t| t.as_str() != "related_to").or(c.types.first()) {
      Some(t) => ("relation", t.clone()),
      None => ("link", "link".to_string()),
    };
    let before = w.pages.len();
    if w.admit(w.page(&c.to, why, Some(&c.from), Some(&rel), depth)) {
      misses = 0;
      let admitted: Vec<String> = w.pages[before..].iter().map(|p| p.id.clone()).collect();
      for id in admitted {
        push_from(&mut queue, &w, &id, cost, depth);
      }
    } else {
      misses += 1;
      if misses >= MAX_MISSES {
        break;
      }
    }
  }
  if bounded {
    w.truncated = true;
    diagnostics.push(RecallDiagnostic::new(
      "graph_search_bounded",
      format!("more than {MAX_CANDIDATES} candidate edges; the rest were not considered"),
    ));
  }
  let text = render(header, &w.lines, &w.edges, budget_tokens);
  GraphQueryResult {
    query: query.to_string(),
    tokens_used: super::graph_input::reported(tokens(&text)),
    pages: w.pages,
    edges: w.edges,
    truncated: w.truncated,
    budget_tokens: super::graph_input::reported(budget_tokens),
    hops,
    text,
    diagnostics,
  }
}

/// Multi-hop traversal seeded by the best recall hits of `query` in the vault `paths` (its own
/// vault only). Budget, hops and seeds as [`GraphQueryOptions`] documents; an out-of-range hop or
/// budget request is clamped with a diagnostic, 0 budget or seeds is `invalid_argument`. An empty
/// or too long query is the recall's typed error; an unavailable index is a diagnostic.
pub fn graph_query(paths: &VaultPaths, query: &str, opts: &GraphQueryOptions) -> Result<GraphQueryResult> {
  let b = budget("budgetTokens", opts.budget_tokens, DEFAULT_GRAPH_TOKENS, MAX_GRAPH_TOKENS)?;
  let mut diagnostics: Vec<RecallDiagnostic> =
    b.diagnostic("budgetTokens", MAX_GRAPH_TOKENS).into_iter().collect();
  let requested_hops = opts.hops.unwrap_or(DEFAULT_HOPS);
  let hops = requested_hops.min(MAX_GRAPH_HOPS);
  if requested_hops > MAX_GRAPH_HOPS {
    diagnostics.push(RecallDiagnostic::new(
      "hops_clamped",
      format!("hops is capped at {MAX_GRAPH_HOPS}; {MAX_GRAPH_HOPS} used"),
    ));
  }
  let seeds = match opts.seeds {
    None => DEFAULT_SEEDS,
    Some(0) => return Err(Error::invalid(format!("seeds must be within 1..={MAX_SEEDS}"))),
    Some(n) => (n as usize).min(MAX_SEEDS),
  };
  let policy = RecallPolicy {
    include_personal: false,
    min_score: crate::retrieve::confidence::EXPLICIT_FLOOR,
    max_per_vault: 10.max(sat_u32(seeds)),
    max_results: sat_u32(seeds),
  };
  let recall =
    RecallOptions { cancel: opts.cancel.clone(), feedback: false, ..RecallOptions::new(policy, opts.mode) };
  let r = recall_wiki(paths, query, &recall)?;
  match r.diagnostics.iter().find(|d| d.code.starts_with("recall_query_")) {
    Some(d) if d.code == "recall_query_empty" => return Err(Error::QueryEmpty),
    Some(d) => return Err(Error::invalid(d.message.clone())),
    None => {}
  }
  let seeds: Vec<Seed> =
    r.results.iter().map(|x| Seed { id: x.id.clone(), preview: Some(x.preview.clone()) }).collect();
  let mut out = match super::explore::snapshot_or(paths) {
    Ok(snap) => {
      let g = super::graph::graph_for(&snap.reader.store.dir, &snap.manifest);
      graph_query_in(&snap.manifest, &g, query, &seeds, b.tokens, hops)
    }
    Err(d) => GraphQueryResult {
      query: query.to_string(),
      budget_tokens: super::graph_input::reported(b.tokens),
      hops,
      diagnostics: vec![d],
      ..Default::default()
    },
  };
  diagnostics.append(&mut out.diagnostics);
  diagnostics.extend(r.diagnostics.iter().cloned());
  out.diagnostics = diagnostics;
  Ok(out)
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::memory::graph::tests::manifest_of;

  fn seeds(ids: &[&str]) -> Vec<Seed> {
    ids.iter().map(|i| Seed { id: i.to_string(), preview: None }).collect()
  }

  /// `s` links plainly to p1..p3 (listed first) and has a typed relation to `t`; t's competing
  /// claim `c` contradicts it and `c2` contradicts `c` (a chain); `old` is superseded by `t`.
  fn vault() -> Manifest {
    let rel = |t: &str, ty: &str| format!("relations:\n  - target: {t}\n    type: {ty}\n");
    manifest_of(&[
      ("s", &format!("---\ntype: concept\n{}---\n[[p1]] [[p2]] [[p3]] [[t]] [[s]]\n", rel("t", "supports"))),
      ("p1", "---\ntype: concept\n---\n[[s]]\n"),
      ("p2", "---\ntype: source\n---\nx\n"),
      ("p3", "---\ntype: concept\n---\n[[p1]]\n"),
      ("t", &format!("---\ntype: concept\n{}---\n[[old]]\n", rel("old", "supersedes"))),
      ("old", "---\ntype: concept\n---\nx\n"),
      ("c", &format!("---\ntype: concept\n{}---\n[[t]]\n", rel("t", "contradicts"))),
      ("c2", &format!("---\ntype: concept\n{}---\n[[c]]\n", rel("c", "contradicts"))),
    ])
  }

  #[test]
  fn typed_first_competing_chains_together_historical_marked() {
    let m = vault();
    let g = LinkGraph::build(&m);
    let r = graph_query_in(&m, &g, "q", &seeds(&["s"]), DEFAULT_GRAPH_TOKENS, 2);
    let ids: Vec<&str> = r.pages.iter().map(|p| p.id.as_str()).collect();
    // t (typed) first at hop 1, its competing chain c, c2 with it; old two typed hops away before
    // the plain links of the seed; plain links canonical first.
    assert_eq!(ids, ["s", "t", "c", "c2", "old", "p1", "p3", "p2"]);
    assert_eq!(r.pages[2].why, "competing");
    let old = r.pages.iter().find(|p| p.id == "old").expect("hop 2");
    assert!(old.historical && old.superseded_by == ["t".to_string()] && old.depth == 2);
    assert!(r.edges.iter().any(|e| e.from == "c" && e.to == "t" && e.relations == ["contradicts"]));
    assert!(!r.edges.iter().any(|e| e.from == e.to), "no self edge");
    assert!(r.tokens_used as usize <= DEFAULT_GRAPH_TOKENS && !r.truncated);
    // Seeds only.
    let h0 = graph_query_in(&m, &g, "q", &seeds(&["s"]), DEFAULT_GRAPH_TOKENS, 0);
    assert_eq!(h0.pages.len(), 1);
  }

  #[test]
  fn budgets_keep_groups_whole_and_text_within() {
    let m = vault();
    let g = LinkGraph::build(&m);
    for budget in 1..120 {
      let r = graph_query_in(&m, &g, "q", &seeds(&["t", "s"]), budget, 4);
      assert!(r.tokens_used as usize <= budget, "{budget}: {} {}", r.tokens_used, r.text);
      let has = |id: &str| r.pages.iter().any(|p| p.id == id);
      assert!(has("t") == has("c") && has("c") == has("c2"), "{budget}: {:?}", r.pages);
    }
    let none = graph_query_in(&m, &g, "q", &seeds(&["missing"]), 100, 2);
    assert_eq!(none.diagnostics[0].code, "graph_no_seeds");
  }
}
