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
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphPage {
  /// Page id.
  pub id: String,
  /// Title.
  pub title: String,
  /// Frontmatter `type`.
  #[serde(rename = "type")]
  pub page_type: String,
  /// `canonical` or `evidence`.
  pub role: String,
  /// Frontmatter `status`.
  pub status: Option<String>,
  /// Absolute path of the page file.
  pub path: String,
  /// Hops from the start page.
  pub depth: u32,
}

/// A labelled edge.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphEdge {
  /// Linking page.
  pub from: String,
  /// Linked page.
  pub to: String,
  /// `markdown` or `wiki`.
  pub kind: LinkKind,
  /// Anchors of the body links.
  pub anchors: Vec<String>,
  /// Line of the first body link in `from`.
  pub line: u32,
  /// Typed relations carried by the edge (`type`, `scope`).
  pub relations: Vec<super::relations::TypedRelation>,
}

impl From<&Edge> for GraphEdge {
  fn from(e: &Edge) -> Self {
    GraphEdge {
      from: e.from.clone(),
      to: e.to.clone(),
      kind: e.kind,
      anchors: e.anchors.clone(),
      line: e.line,
      relations: e.relations.clone(),
    }
  }
}

/// Result of [`neighbours`].
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
  /// True when the byte budget or the visit bound cut the answer.
  pub truncated: bool,
  /// `{code, message}` pairs.
  pub diagnostics: Vec<(String, String)>,
}

/// Result of [`link_path`].
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
  pub diagnostics: Vec<(String, String)>,
}

/// One step of a path.
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
  if let Some((k, _)) = manifest.entries.get_key_value(id) {
    return Some(k);
  }
  let lower = id.to_lowercase();
  manifest.entries.keys().find(|k| k.to_lowercase() == lower).map(|k| k.as_str())
}

fn page_of(manifest: &Manifest, paths: &VaultPaths, id: &str, depth: u32) -> GraphPage {
  let e = &manifest.entries[id];
  GraphPage {
    id: id.to_string(),
    title: e.meta.title.clone(),
    page_type: e.meta.page_type.clone(),
    role: e.role.as_str().to_string(),
    status: e.meta.status.clone(),
    path: crate::vault::discover::resolve_page_file(&paths.wiki, &e.rel_path).to_string_lossy().into_owned(),
    depth,
  }
}

fn json_len<T: Serialize>(v: &T) -> usize {
  serde_json::to_string(v).map_or(0, |s| s.len())
}

/// Zoom-out over one manifest's graph (see [`neighbours`]).
pub fn neighbours_in(
  manifest: &Manifest,
  graph: &LinkGraph,
  paths: &VaultPaths,
  page_id: &str,
  depth: u32,
  direction: Direction,
  max_bytes: usize,
) -> Neighbourhood {
  let mut out = Neighbourhood::default();
  let Some(start) = find_id(manifest, page_id) else {
    out.diagnostics.push(("page_not_found".into(), format!("no indexed page '{page_id}' in this vault")));
    return out;
  };
  let depth = depth.clamp(1, MAX_DEPTH);
  let page = page_of(manifest, paths, start, 0);
  let mut used = json_len(&page);
  out.page = Some(page);
  for (_, target, _) in graph.dangling.iter().filter(|(f, _, _)| f == start) {
    let cost = target.len() + 3;
    if used + cost > max_bytes / 4 {
      out.truncated = true; // dangling targets get at most a quarter of the budget
      break;
    }
    used += cost;
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
    for (e, outward) in step {
      let edge = GraphEdge::from(e);
      let other = if outward { e.to.as_str() } else { e.from.as_str() };
      let new_page = !seen.contains(other);
      let p = new_page.then(|| page_of(manifest, paths, other, d + 1));
      let cost = json_len(&edge) + p.as_ref().map_or(0, json_len);
      // Edges and pages take at most three quarters of the budget; the page text gets the rest.
      if used + cost > max_bytes / 4 * 3 || seen.len() >= MAX_VISITED {
        out.truncated = true;
        break 'bfs;
      }
      used += cost;
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
  // The page text gets what the edges left.
  let file = out.page.as_ref().map(|p| p.path.clone()).unwrap_or_default();
  // At most the room left is read (plus a character's bytes), never through a symlink or from a
  // FIFO ([`crate::vault::read`]).
  let room = max_bytes.saturating_sub(used);
  if let Ok((bytes, more)) =
    crate::vault::read::read_prefix_at(&paths.wiki, Path::new(&file), room as u64 + 3)
  {
    let text = String::from_utf8_lossy(&bytes);
    let mut cut = text.len().min(room);
    while !text.is_char_boundary(cut) {
      cut -= 1;
    }
    if cut < text.len() || more {
      out.truncated = true;
    }
    out.content = text[..cut].to_string();
  }
  out
}

/// Shortest link path over one manifest's graph (see [`link_path`]).
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
        out
          .diagnostics
          .push(("page_not_found".into(), format!("{name}: no indexed page '{x}' in this vault")));
      }
    }
    return out;
  };
  let max_hops = max_hops.clamp(1, MAX_HOPS);
  // Breadth-first over links in both directions; `prev` remembers the edge that reached a page.
  let mut prev: HashMap<&str, Option<(&Edge, bool)>> = HashMap::from([(a, None)]);
  let mut frontier = vec![a];
  let mut hops = 0;
  while !prev.contains_key(b) && !frontier.is_empty() && hops < max_hops {
    hops += 1;
    let mut next = Vec::new();
    for id in frontier {
      let steps = graph.out_edges(id).iter().map(|e| (e, false)).chain(graph.in_edges(id).map(|e| (e, true)));
      for (e, reversed) in steps {
        let other = if reversed { e.from.as_str() } else { e.to.as_str() };
        if prev.len() >= MAX_VISITED {
          out
            .diagnostics
            .push(("path_search_bounded".into(), format!("stopped after visiting {MAX_VISITED} pages")));
          return out;
        }
        if let std::collections::hash_map::Entry::Vacant(v) = prev.entry(other) {
          v.insert(Some((e, reversed)));
          next.push(other);
        }
      }
    }
    frontier = next;
  }
  if !prev.contains_key(b) {
    out.diagnostics.push(("path_not_found".into(), format!("no link path of at most {max_hops} hops")));
    return out;
  }
  let mut at = b;
  let mut rev_hops = Vec::new();
  while let Some(Some((e, reversed))) = prev.get(at) {
    rev_hops.push(PathHop { edge: GraphEdge::from(*e), reversed: *reversed });
    at = if *reversed { e.to.as_str() } else { e.from.as_str() };
  }
  rev_hops.reverse();
  out.pages.push(page_of(manifest, paths, a, 0));
  for (i, h) in rev_hops.iter().enumerate() {
    let id = if h.reversed { &h.edge.from } else { &h.edge.to };
    out.pages.push(page_of(manifest, paths, id, i as u32 + 1));
  }
  out.hops = rev_hops;
  out.found = true;
  out
}

fn snapshot_or(
  paths: &VaultPaths,
) -> std::result::Result<crate::retrieve::engine::Snapshot, (String, String)> {
  open_snapshot(paths).map_err(|u| match u {
    Unavailable::NotReady(nr) => (nr.code.to_string(), nr.message),
    Unavailable::Failed(e) => ("qmd_index_error".to_string(), format!("index cannot open: {e}")),
  })
}

/// A page of the vault's index with its outbound and inbound edges up to `depth` (1..=3) hops,
/// within `max_bytes` of output. An unavailable index or unknown page is a diagnostic.
pub fn neighbours(
  paths: &VaultPaths,
  page_id: &str,
  depth: u32,
  direction: Direction,
  max_bytes: usize,
) -> Neighbourhood {
  match snapshot_or(paths) {
    Ok(snap) => {
      let g = super::graph::graph_for(&snap.reader.store.dir, &snap.manifest);
      neighbours_in(&snap.manifest, &g, paths, page_id, depth, direction, max_bytes)
    }
    Err(d) => Neighbourhood { diagnostics: vec![d], ..Default::default() },
  }
}

/// A shortest path of links (either direction) from `from` to `to` of at most `max_hops` (1..=8).
pub fn link_path(paths: &VaultPaths, from: &str, to: &str, max_hops: u32) -> LinkPath {
  match snapshot_or(paths) {
    Ok(snap) => {
      let g = super::graph::graph_for(&snap.reader.store.dir, &snap.manifest);
      link_path_in(&snap.manifest, &g, paths, from, to, max_hops)
    }
    Err(d) => LinkPath { found: false, pages: vec![], hops: vec![], diagnostics: vec![d] },
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

  #[test]
  fn neighbourhood_depth_direction_and_budget() {
    let m = chain();
    let g = LinkGraph::build(&m);
    let paths = VaultPaths::new_layout("/nowhere");
    let n = neighbours_in(&m, &g, &paths, "B", 1, Direction::Both, DEFAULT_MAX_BYTES);
    assert_eq!(n.page.as_ref().unwrap().id, "b");
    assert_eq!(n.outbound.len(), 2);
    assert_eq!(n.inbound.len(), 1);
    assert_eq!(n.inbound[0].relations[0].relation_type, "supports");
    let n2 = neighbours_in(&m, &g, &paths, "b", 2, Direction::Outbound, DEFAULT_MAX_BYTES);
    let ids: Vec<_> = n2.pages.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, vec!["c", "a", "d"]);
    let tiny = neighbours_in(&m, &g, &paths, "b", 3, Direction::Both, 300);
    assert!(tiny.truncated);
    assert!(serde_json::to_string(&tiny.outbound).unwrap().len() < 300);
    let missing = neighbours_in(&m, &g, &paths, "nope", 1, Direction::Both, 100);
    assert_eq!(missing.diagnostics[0].0, "page_not_found");
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
    assert_eq!(none.diagnostics[0].0, "path_not_found");
    assert_eq!(link_path_in(&m, &g, &paths, "a", "a", 3).hops.len(), 0);
  }
}
