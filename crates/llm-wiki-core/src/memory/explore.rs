//! Zoom-out and path over the link graph (seed 004's `files_neighbors` / `graph_path`, answered
//! from the index instead of re-reading the vault): a page with its outbound and inbound edges
//! up to a depth, and a shortest link path between two pages. Both are bounded in nodes
//! visited and in output size.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;

use serde::Serialize;

use super::graph::{Edge, LinkGraph};
use super::links::LinkKind;
use crate::error::{Error, Result};
use crate::retrieve::engine::{open_snapshot, Unavailable};
use crate::store::manifest::Manifest;
use crate::util::diagnostic::RecallDiagnostic;
use crate::vault::VaultPaths;

/// Deepest zoom-out allowed.
pub const MAX_DEPTH: u32 = 3;
/// Longest path searched.
pub const MAX_HOPS: u32 = 8;
/// Default output budget of `neighbours` in bytes (not fitted: seed 004's "≈2–10K tokens").
pub const DEFAULT_MAX_BYTES: usize = 32 * 1024;
/// Pages visited at most by one traversal (not fitted: a bound on work).
pub const MAX_VISITED: usize = 100_000;

/// Which edges to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
  /// Links from the page.
  Outbound,
  /// Links to the page (backlinks).
  Inbound,
  /// Both.
  Both,
}

impl Direction {
  /// Parse `outbound` | `inbound` | `both`.
  pub fn parse(s: &str) -> Result<Self> {
    match s {
      "outbound" | "out" => Ok(Direction::Outbound),
      "inbound" | "in" => Ok(Direction::Inbound),
      "both" => Ok(Direction::Both),
      o => Err(Error::invalid(format!("direction must be outbound | inbound | both, got {o:?}"))),
    }
  }
}

/// A page reached by a traversal.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphPage {
  /// Page id.
  pub id: String,
  /// Title.
  pub title: String,
  /// Frontmatter `type`.
  #[serde(rename = "type")]
  #[cfg_attr(feature = "napi", napi(js_name = "type"))]
  pub page_type: String,
  /// `canonical` or `evidence`.
  #[cfg_attr(feature = "napi", napi(ts_type = "'canonical' | 'evidence'"))]
  pub role: String,
  /// Frontmatter `status`.
  pub status: Option<String>,
  /// Absolute path of the page file.
  pub path: String,
  /// Hops from the start page.
  pub depth: u32,
  /// True when a `supersedes` relation or a user resolution made the page historical.
  pub historical: bool,
}

/// A labelled edge.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphEdge {
  /// Linking page.
  pub from: String,
  /// Linked page.
  pub to: String,
  /// `markdown` or `wiki`.
  #[cfg_attr(feature = "napi", napi(ts_type = "'markdown' | 'wiki'"))]
  pub kind: LinkKind,
  /// Anchors of the body links.
  pub anchors: Vec<String>,
  /// Line of the first body link in `from`.
  pub line: u32,
  /// Typed relations carried by the edge (their target is `to`).
  pub relations: Vec<EdgeRelation>,
}

/// A typed relation carried by a link edge.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EdgeRelation {
  /// Relation type as written (lowercase).
  #[serde(rename = "type")]
  #[cfg_attr(feature = "napi", napi(js_name = "type"))]
  pub relation_type: String,
  /// Scope of an `applies_under` relation.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub scope: Option<String>,
}

impl From<&Edge> for GraphEdge {
  fn from(e: &Edge) -> Self {
    GraphEdge {
      from: e.from.clone(),
      to: e.to.clone(),
      kind: e.kind,
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

/// Result of `neighbours` ([`neighbours`]).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Neighbourhood {
  /// The start page (absent when it is not in the index).
  pub page: Option<GraphPage>,
  /// Its text (frontmatter and body), cut to fit the byte budget.
  pub content: String,
  /// Edges leaving reached pages.
  pub outbound: Vec<GraphEdge>,
  /// Edges entering reached pages.
  pub inbound: Vec<GraphEdge>,
  /// Every other page reached, nearest first.
  pub pages: Vec<GraphPage>,
  /// Links of the start page to no existing page.
  pub dangling: Vec<String>,
  /// True when the byte or token budget or the visit bound cut the answer.
  pub truncated: bool,
  /// The page, its content and its edges rendered for an agent (within the token budget).
  pub text: String,
  /// Estimated tokens of `text`.
  pub tokens_used: u32,
  /// The token budget applied.
  pub budget_tokens: u32,
  /// `{code, message}` pairs.
  pub diagnostics: Vec<RecallDiagnostic>,
}

/// Result of `linkPath` ([`link_path`]).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkPath {
  /// True when a path within `max_hops` exists.
  pub found: bool,
  /// Pages along the path, `from` first.
  pub pages: Vec<GraphPage>,
  /// The edges, in path order; `reversed` when the path walks a link backwards.
  pub hops: Vec<PathHop>,
  /// `{code, message}` pairs.
  pub diagnostics: Vec<RecallDiagnostic>,
}

/// One step of a path.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PathHop {
  /// The edge (as written in the vault: `from` links to `to`).
  pub edge: GraphEdge,
  /// True when the path goes from `edge.to` to `edge.from`.
  pub reversed: bool,
}

/// Case-insensitive id lookup (`.md` tolerated).
fn find_id<'a>(manifest: &'a Manifest, id: &str) -> Option<&'a str> {
  let id = id.trim().trim_end_matches(".md").trim_end_matches(".MD");
  super::graph_input::find_page(manifest, id)
}

fn page_of(manifest: &Manifest, graph: &LinkGraph, paths: &VaultPaths, id: &str, depth: u32) -> GraphPage {
  let e = &manifest.entries[id];
  GraphPage {
    id: id.to_string(),
    title: e.meta.title.clone(),
    page_type: e.meta.page_type.clone(),
    role: e.role.as_str().to_string(),
    status: e.meta.status.clone(),
    path: crate::vault::discover::resolve_page_file(&paths.wiki, &e.rel_path).to_string_lossy().into_owned(),
    depth,
    historical: graph.decisions.superseded.contains_key(id),
  }
}

fn json_len<T: Serialize>(v: &T) -> usize {
  serde_json::to_string(v).map_or(0, |s| s.len())
}

/// Default token budget of `neighbours` (seed 004: "≈2–10K tokens"; issue 42: default 2,000).
pub const DEFAULT_NEIGHBOUR_TOKENS: usize = 2_000;
/// Largest token budget of `neighbours` (larger requests are clamped with `budget_clamped`).
pub const MAX_NEIGHBOUR_TOKENS: usize = 10_000;

/// What [`neighbours_in`] returns and within which limits.
#[derive(Debug, Clone, Copy)]
pub struct NeighbourLimits {
  /// Hops (1..=3).
  pub depth: u32,
  /// Edges followed.
  pub direction: Direction,
  /// Bytes of the structured answer (JSON of pages, edges and content).
  pub max_bytes: usize,
  /// Estimated tokens of `text`; both budgets apply (the smaller one binds).
  pub budget_tokens: usize,
}

impl NeighbourLimits {
  /// `depth` hops in `direction` within the default budgets.
  pub fn new(depth: u32, direction: Direction) -> Self {
    NeighbourLimits {
      depth,
      direction,
      max_bytes: DEFAULT_MAX_BYTES,
      budget_tokens: DEFAULT_NEIGHBOUR_TOKENS,
    }
  }
}

/// The text line of an edge seen from the traversal (`other` is the page it leads to).
fn edge_line(e: &GraphEdge, other: Option<&GraphPage>) -> String {
  let label = if e.relations.is_empty() {
    "link".to_string()
  } else {
    e.relations.iter().map(|r| r.relation_type.as_str()).collect::<Vec<_>>().join(", ")
  };
  let mut s = format!("- {} —{label}→ {}", e.from, e.to);
  if let Some(p) = other {
    s.push_str(&format!(
      " \"{}\" ({}, {}{})",
      p.title,
      p.page_type,
      p.role,
      if p.historical { ", HISTORICAL" } else { "" }
    ));
  }
  s
}

/// Ordering key of a step: typed relations first, then current canonical pages, then the rest
/// (link order within each).
fn step_key(manifest: &Manifest, graph: &LinkGraph, e: &Edge, other: &str) -> (u8, bool, bool) {
  let typed = if e.relations.iter().any(|r| r.relation_type != "related_to") {
    0
  } else if e.relations.is_empty() {
    2
  } else {
    1
  };
  let hist = graph.decisions.superseded.contains_key(other);
  let evidence = manifest.entries.get(other).is_none_or(|x| x.role != crate::vault::Role::Canonical);
  (typed, hist, evidence)
}

/// Zoom-out over one manifest's graph (see [`neighbours`]): edges and pages take at most three
/// quarters of each budget (dangling targets at most a quarter), the page text what they left,
/// cut at a sentence end.
pub fn neighbours_in(
  manifest: &Manifest,
  graph: &LinkGraph,
  paths: &VaultPaths,
  page_id: &str,
  limits: NeighbourLimits,
) -> Neighbourhood {
  let NeighbourLimits { depth, direction, max_bytes, budget_tokens } = limits;
  let mut out =
    Neighbourhood { budget_tokens: super::graph_input::reported(budget_tokens), ..Default::default() };
  let Some(start) = find_id(manifest, page_id) else {
    out
      .diagnostics
      .push(RecallDiagnostic::new("page_not_found", format!("no indexed page '{page_id}' in this vault")));
    return out;
  };
  let depth = depth.clamp(1, MAX_DEPTH);
  let page = page_of(manifest, graph, paths, start, 0);
  let mut used = json_len(&page);
  let head = format!(
    "# {} — {} ({}, {}{})",
    page.id,
    page.title,
    page.page_type,
    page.role,
    if page.historical { ", HISTORICAL" } else { "" }
  );
  let mut used_tokens = super::graph_input::tokens(&head);
  let mut lines: Vec<String> = Vec::new();
  out.page = Some(page);
  for (_, target, _) in graph.dangling.iter().filter(|(f, _, _)| f == start) {
    let cost = target.len() + 3;
    let line = format!("- dangling: {target}");
    let t = super::graph_input::tokens(&line);
    if used + cost > max_bytes / 4 || used_tokens + t > budget_tokens / 4 {
      out.truncated = true; // dangling targets get at most a quarter of the budget
      break;
    }
    used += cost;
    used_tokens += t;
    lines.push(line);
    out.dangling.push(target.clone());
  }
  let mut seen: HashSet<&str> = HashSet::from([start]);
  let mut queue: VecDeque<(&str, u32)> = VecDeque::from([(start, 0)]);
  'bfs: while let Some((id, d)) = queue.pop_front() {
    if d >= depth {
      continue;
    }
    let mut step: Vec<(&Edge, bool)> = Vec::new();
    if direction != Direction::Inbound {
      step.extend(graph.out_edges(id).iter().map(|e| (e, true)));
    }
    if direction != Direction::Outbound {
      step.extend(graph.in_edges(id).map(|e| (e, false)));
    }
    // Typed relations, then current canonical pages first (stable: link order within).
    step.sort_by_key(|(e, outward)| step_key(manifest, graph, e, if *outward { &e.to } else { &e.from }));
    for (e, outward) in step {
      let edge = GraphEdge::from(e);
      let other = if outward { e.to.as_str() } else { e.from.as_str() };
      let new_page = !seen.contains(other);
      let p = new_page.then(|| page_of(manifest, graph, paths, other, d + 1));
      let cost = json_len(&edge) + p.as_ref().map_or(0, json_len);
      let line = edge_line(&edge, p.as_ref());
      let t = super::graph_input::tokens(&line);
      // Edges and pages take at most three quarters of the budgets; the page text gets the rest.
      if used + cost > max_bytes / 4 * 3
        || used_tokens + t > budget_tokens / 4 * 3
        || seen.len() >= MAX_VISITED
      {
        out.truncated = true;
        break 'bfs;
      }
      used += cost;
      used_tokens += t;
      lines.push(line);
      if outward {
        out.outbound.push(edge);
      } else {
        out.inbound.push(edge);
      }
      if let Some(p) = p {
        seen.insert(other);
        out.pages.push(p);
        queue.push_back((other, d + 1));
      }
    }
  }
  // Nearest first; within a hop current canonical pages first.
  out.pages.sort_by_key(|p| (p.depth, p.historical, p.role != "canonical"));
  // The page text gets what the edges left, cut at a sentence end.
  let file = out.page.as_ref().map(|p| p.path.clone()).unwrap_or_default();
  let room_tokens = budget_tokens.saturating_sub(used_tokens);
  if let Some((content, cut)) = page_text(paths, &file, max_bytes.saturating_sub(used), room_tokens) {
    out.truncated |= cut;
    out.content = content;
  }
  let mut text = vec![head];
  if !out.content.is_empty() {
    text.push(out.content.clone());
  }
  if !lines.is_empty() {
    text.push("## Links and relations".into());
    text.extend(lines);
  }
  out.text = text.join("\n");
  if super::graph_input::tokens(&out.text) > budget_tokens {
    // A budget smaller than the heading line: the heading cut.
    out.text = super::graph_input::cut_at_sentence(&out.text, budget_tokens).0.to_string();
  }
  out.tokens_used = super::graph_input::reported(super::graph_input::tokens(&out.text));
  out
}

/// The start page's text within `room` bytes and `room_tokens` tokens, cut at a sentence end, and
/// whether anything was cut. At most the byte room is read (plus a character's bytes), never
/// through a symlink or from a FIFO ([`crate::vault::read`]); `None` when it cannot be read.
fn page_text(paths: &VaultPaths, file: &str, room: usize, room_tokens: usize) -> Option<(String, bool)> {
  let (bytes, more) =
    crate::vault::read::read_prefix_at(&paths.wiki, Path::new(file), room as u64 + 3).ok()?;
  let text = String::from_utf8_lossy(&bytes);
  let mut cut = text.len().min(room);
  while !text.is_char_boundary(cut) {
    cut -= 1;
  }
  let (content, cut_tokens) = super::graph_input::cut_at_sentence(&text[..cut], room_tokens);
  Some((content.to_string(), cut < text.len() || more || cut_tokens))
}

/// Steps of a path search: typed-relation edges before plain links.
fn path_steps<'g>(graph: &'g LinkGraph, id: &str) -> Vec<(&'g Edge, bool, bool)> {
  let mut steps: Vec<(&Edge, bool, bool)> = graph
    .out_edges(id)
    .iter()
    .map(|e| (e, false))
    .chain(graph.in_edges(id).map(|e| (e, true)))
    .map(|(e, rev)| (e, rev, e.relations.iter().any(|r| r.relation_type != "related_to")))
    .collect();
  steps.sort_by_key(|(_, _, typed)| !typed);
  steps
}

/// Shortest link path over one manifest's graph (see [`link_path`]): fewest hops, and among
/// paths of equal length the one with the most typed-relation hops (then link order).
pub fn link_path_in(
  manifest: &Manifest,
  graph: &LinkGraph,
  paths: &VaultPaths,
  from: &str,
  to: &str,
  max_hops: u32,
) -> LinkPath {
  let mut out = LinkPath { found: false, pages: vec![], hops: vec![], diagnostics: vec![] };
  let (Some(a), Some(b)) = (find_id(manifest, from), find_id(manifest, to)) else {
    for (x, name) in [(from, "from"), (to, "to")] {
      if find_id(manifest, x).is_none() {
        out.diagnostics.push(RecallDiagnostic::new(
          "page_not_found",
          format!("{name}: no indexed page '{x}' in this vault"),
        ));
      }
    }
    return out;
  };
  if a == b {
    out.found = true;
    out.pages.push(page_of(manifest, graph, paths, a, 0));
    out
      .diagnostics
      .push(RecallDiagnostic::new("path_same_page", format!("'{a}' is both ends: a path of no hops")));
    return out;
  }
  let max_hops = max_hops.clamp(1, MAX_HOPS);
  // Layer by layer; a page's best way in is the one with the most typed hops (`typed` = typed
  // hops of the best path to the page). Pages of one layer are all settled before the next.
  let mut prev: HashMap<&str, Option<(&Edge, bool)>> = HashMap::from([(a, None)]);
  let mut typed: HashMap<&str, u32> = HashMap::from([(a, 0)]);
  let mut frontier = vec![a];
  let mut hops = 0;
  while !prev.contains_key(b) && !frontier.is_empty() && hops < max_hops {
    hops += 1;
    let mut next: Vec<&str> = Vec::new();
    let mut layer: HashMap<&str, (u32, &Edge, bool)> = HashMap::new();
    for id in &frontier {
      let base = typed[id];
      for (e, reversed, is_typed) in path_steps(graph, id) {
        let other = if reversed { e.from.as_str() } else { e.to.as_str() };
        if prev.contains_key(other) {
          continue;
        }
        if prev.len() + layer.len() >= MAX_VISITED {
          out.diagnostics.push(RecallDiagnostic::new(
            "path_search_bounded",
            format!("stopped after visiting {MAX_VISITED} pages"),
          ));
          return out;
        }
        let score = base + u32::from(is_typed);
        match layer.get(other) {
          Some((s, _, _)) if *s >= score => {}
          Some(_) => {
            layer.insert(other, (score, e, reversed));
          }
          None => {
            layer.insert(other, (score, e, reversed));
            next.push(other);
          }
        }
      }
    }
    for id in &next {
      let (s, e, reversed) = layer[id];
      prev.insert(id, Some((e, reversed)));
      typed.insert(id, s);
    }
    frontier = next;
  }
  if !prev.contains_key(b) {
    out
      .diagnostics
      .push(RecallDiagnostic::new("path_not_found", format!("no link path of at most {max_hops} hops")));
    return out;
  }
  let mut at = b;
  let mut rev_hops = Vec::new();
  while let Some(Some((e, reversed))) = prev.get(at) {
    rev_hops.push(PathHop { edge: GraphEdge::from(*e), reversed: *reversed });
    at = if *reversed { e.to.as_str() } else { e.from.as_str() };
  }
  rev_hops.reverse();
  out.pages.push(page_of(manifest, graph, paths, a, 0));
  for (i, h) in rev_hops.iter().enumerate() {
    let id = if h.reversed { &h.edge.from } else { &h.edge.to };
    out.pages.push(page_of(manifest, graph, paths, id, i as u32 + 1));
  }
  out.hops = rev_hops;
  out.found = true;
  out
}

pub(crate) fn snapshot_or(
  paths: &VaultPaths,
) -> std::result::Result<crate::retrieve::engine::Snapshot, RecallDiagnostic> {
  open_snapshot(paths).map_err(|u| match u {
    Unavailable::NotReady(nr) => RecallDiagnostic::new(nr.code, nr.message),
    Unavailable::Failed(e) => RecallDiagnostic::new("qmd_index_error", format!("index cannot open: {e}")),
  })
}

/// A caller's page id checked ([`super::graph_input::check_page_id`]) against the vault `paths`
/// whose manifest is `manifest`.
fn checked_id(paths: &VaultPaths, manifest: Option<&Manifest>, raw: &str) -> Result<String> {
  let vault_id = manifest.map_or(String::new(), |m| m.vault_id.clone());
  let kind = if crate::vault::paths::is_personal_vault(paths) { "personal" } else { "project" };
  super::graph_input::check_page_id(raw, &vault_id, Some(kind))
}

/// Options of `neighbours` ([`neighbours`]); an absent option takes its default.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_to_js = false, js_name = "NeighboursOptions"))]
#[derive(Debug, Clone, Default)]
pub struct NeighbourRequest {
  /// Hops from the page (default 1, at most 3; 0 is `invalid_argument`).
  pub depth: Option<u32>,
  /// Edges followed (default `both`; an unknown value is `invalid_argument`).
  #[cfg_attr(feature = "napi", napi(ts_type = "'outbound' | 'inbound' | 'both'"))]
  pub direction: Option<String>,
  /// Output budget in bytes (default 32768).
  pub max_bytes: Option<u32>,
  /// Output budget in estimated tokens of `text` (default 2000, at most 10000 — more is clamped
  /// with a `budget_clamped` diagnostic; 0, negative or fractional is `invalid_argument`). With
  /// `maxBytes` both apply: the smaller one binds.
  // A JavaScript number, checked by [`whole`].
  pub budget_tokens: Option<f64>,
}

/// A page of the vault's index with its outbound and inbound edges up to `depth` (1..=3) hops,
/// within the byte and token budgets (both apply), typed relations and current canonical pages
/// first, the page text cut at a sentence end. A malformed page id (`..`, absolute) or a budget
/// or depth of 0 is `invalid_argument`, an id of another vault `graph_cross_vault`; an unknown
/// page or an unavailable index is a diagnostic (`page_not_found`, the index's code).
pub fn neighbours(paths: &VaultPaths, page_id: &str, req: &NeighbourRequest) -> Result<Neighbourhood> {
  if req.depth == Some(0) {
    return Err(Error::invalid("depth must be at least 1"));
  }
  let direction = req.direction.as_deref().map(Direction::parse).transpose()?;
  let b = super::graph_input::budget(
    "budgetTokens",
    super::graph_input::whole("budgetTokens", req.budget_tokens)?,
    DEFAULT_NEIGHBOUR_TOKENS,
    MAX_NEIGHBOUR_TOKENS,
  )?;
  let limits = NeighbourLimits {
    depth: req.depth.unwrap_or(1),
    direction: direction.unwrap_or(Direction::Both),
    max_bytes: req.max_bytes.map_or(DEFAULT_MAX_BYTES, |b| b as usize),
    budget_tokens: b.tokens,
  };
  let mut n = match snapshot_or(paths) {
    Ok(snap) => {
      let id = checked_id(paths, Some(&snap.manifest), page_id)?;
      let g = super::graph::graph_for(&snap.reader.store.dir, &snap.manifest);
      neighbours_in(&snap.manifest, &g, paths, &id, limits)
    }
    Err(d) => {
      checked_id(paths, None, page_id)?;
      Neighbourhood {
        diagnostics: vec![d],
        budget_tokens: super::graph_input::reported(b.tokens),
        ..Default::default()
      }
    }
  };
  if let Some(d) = b.diagnostic("budgetTokens", MAX_NEIGHBOUR_TOKENS) {
    n.diagnostics.insert(0, d);
  }
  if req.depth.is_some_and(|d| d > MAX_DEPTH) {
    n.diagnostics.insert(
      0,
      RecallDiagnostic::new("depth_clamped", format!("depth is capped at {MAX_DEPTH}; {MAX_DEPTH} used")),
    );
  }
  Ok(n)
}

/// A shortest path of links (either direction) from `from` to `to` of at most `max_hops` (1..=8),
/// typed relations preferred among paths of equal length. Malformed ids are `invalid_argument`,
/// ids of another vault `graph_cross_vault`; unknown pages, no path and an unavailable index are
/// diagnostics; `from` = `to` is a found path of no hops (`path_same_page`).
pub fn link_path(paths: &VaultPaths, from: &str, to: &str, max_hops: u32) -> Result<LinkPath> {
  if max_hops == 0 {
    return Err(Error::invalid("maxHops must be at least 1"));
  }
  match snapshot_or(paths) {
    Ok(snap) => {
      let (a, b) =
        (checked_id(paths, Some(&snap.manifest), from)?, checked_id(paths, Some(&snap.manifest), to)?);
      let g = super::graph::graph_for(&snap.reader.store.dir, &snap.manifest);
      Ok(link_path_in(&snap.manifest, &g, paths, &a, &b, max_hops))
    }
    Err(d) => {
      checked_id(paths, None, from)?;
      checked_id(paths, None, to)?;
      Ok(LinkPath { found: false, pages: vec![], hops: vec![], diagnostics: vec![d] })
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::memory::graph::tests::manifest_of;

  fn chain() -> Manifest {
    manifest_of(&[
      ("a", "---\ntype: concept\nrelations:\n  - target: b\n    type: supports\n---\n[[b]]\n"),
      ("b", "---\ntype: concept\n---\n[[c]] [[a]]\n"),
      ("c", "---\ntype: concept\n---\n[[d]]\n"),
      ("d", "---\ntype: source\n---\nend\n"),
      ("x", "---\ntype: concept\n---\n[[c]]\n"),
      ("island", "---\ntype: concept\n---\nnone\n"),
    ])
  }

  fn lim(depth: u32, direction: Direction, max_bytes: usize) -> NeighbourLimits {
    NeighbourLimits { max_bytes, ..NeighbourLimits::new(depth, direction) }
  }

  #[test]
  fn neighbourhood_depth_direction_and_budget() {
    let m = chain();
    let g = LinkGraph::build(&m);
    let paths = VaultPaths::new_layout("/nowhere");
    let n = neighbours_in(&m, &g, &paths, "B", lim(1, Direction::Both, DEFAULT_MAX_BYTES));
    assert_eq!(n.page.as_ref().unwrap().id, "b");
    assert_eq!(n.outbound.len(), 2);
    assert_eq!(n.inbound.len(), 1);
    assert_eq!(n.inbound[0].relations[0].relation_type, "supports");
    assert!(n.text.contains("- a —supports→ b"), "{}", n.text);
    assert!(n.tokens_used as usize <= DEFAULT_NEIGHBOUR_TOKENS);
    let n2 = neighbours_in(&m, &g, &paths, "b", lim(2, Direction::Outbound, DEFAULT_MAX_BYTES));
    let ids: Vec<_> = n2.pages.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, vec!["c", "a", "d"]);
    let tiny = neighbours_in(&m, &g, &paths, "b", lim(3, Direction::Both, 300));
    assert!(tiny.truncated);
    assert!(serde_json::to_string(&tiny.outbound).unwrap().len() < 300);
    // A token budget binds alone too.
    let few = neighbours_in(
      &m,
      &g,
      &paths,
      "b",
      NeighbourLimits { budget_tokens: 30, ..lim(3, Direction::Both, 1 << 20) },
    );
    assert!(few.truncated && few.tokens_used <= 30, "{} {}", few.tokens_used, few.text);
    let missing = neighbours_in(&m, &g, &paths, "nope", lim(1, Direction::Both, 100));
    assert_eq!(missing.diagnostics[0].code, "page_not_found");
  }

  /// Typed relations and current canonical pages come first, whatever the link order.
  #[test]
  fn typed_and_canonical_first() {
    let m = manifest_of(&[
      ("hub", "---\ntype: concept\nrelations:\n  - target: t\n    type: supports\n---\n[[s]] [[e]] [[old]] [[c]] [[t]]\n"),
      ("s", "---\ntype: source\n---\nx\n"),
      ("e", "---\ntype: source\n---\nx\n"),
      ("old", "---\ntype: concept\n---\nx\n"),
      ("c", "---\ntype: concept\n---\nx\n"),
      ("t", "---\ntype: source\n---\nx\n"),
      ("new", "---\ntype: concept\nrelations:\n  - target: old\n    type: supersedes\n---\n[[old]]\n"),
    ]);
    let g = LinkGraph::build(&m);
    let paths = VaultPaths::new_layout("/nowhere");
    let n = neighbours_in(&m, &g, &paths, "hub", lim(1, Direction::Outbound, DEFAULT_MAX_BYTES));
    let order: Vec<_> = n.outbound.iter().map(|e| e.to.as_str()).collect();
    assert_eq!(order, vec!["t", "c", "s", "e", "old"]);
    let pages: Vec<_> = n.pages.iter().map(|p| (p.id.as_str(), p.historical)).collect();
    assert_eq!(pages, vec![("c", false), ("t", false), ("s", false), ("e", false), ("old", true)]);
  }

  #[test]
  fn shortest_paths() {
    let m = chain();
    let g = LinkGraph::build(&m);
    let paths = VaultPaths::new_layout("/nowhere");
    let p = link_path_in(&m, &g, &paths, "a", "d", 4);
    assert!(p.found);
    assert_eq!(p.pages.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), vec!["a", "b", "c", "d"]);
    let back = link_path_in(&m, &g, &paths, "d", "x", 4);
    assert_eq!(back.hops.len(), 2);
    assert!(back.hops.iter().all(|h| h.reversed || h.edge.from == "x" || h.edge.to == "x"));
    assert!(!link_path_in(&m, &g, &paths, "a", "d", 2).found);
    let none = link_path_in(&m, &g, &paths, "a", "island", 8);
    assert_eq!(none.diagnostics[0].code, "path_not_found");
    let same = link_path_in(&m, &g, &paths, "a", "a", 3);
    assert!(same.found && same.hops.is_empty());
    assert_eq!(same.diagnostics[0].code, "path_same_page");
  }

  /// Of two paths of equal length the one over typed relations wins, whichever link comes first.
  #[test]
  fn typed_paths_win_ties() {
    let m = manifest_of(&[
      ("a", "---\ntype: concept\n---\n[[p]] [[q]]\n"),
      ("p", "---\ntype: concept\n---\n[[z]]\n"),
      ("q", "---\ntype: concept\nrelations:\n  - target: z\n    type: supports\n---\n[[z]]\n"),
      ("z", "---\ntype: concept\n---\nend\n"),
    ]);
    let g = LinkGraph::build(&m);
    let paths = VaultPaths::new_layout("/nowhere");
    let p = link_path_in(&m, &g, &paths, "a", "z", 4);
    assert_eq!(p.pages.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), vec!["a", "q", "z"]);
    assert_eq!(p.hops[1].edge.relations[0].relation_type, "supports");
    let back = link_path_in(&m, &g, &paths, "z", "a", 4);
    assert_eq!(back.pages.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), vec!["z", "q", "a"]);
  }
}
