//! Where a page's links point: the name keys of pages and links, the resolver of a link's
//! target (relative, rooted, by last segment) and the edges of one page with their relations
//! attached. The link graph ([`super::graph`]), its lint and the resolution decisions are built
//! from these.

use std::collections::HashMap;

use serde::Serialize;

use super::links::{Link, LinkKind};
use super::page_links::PageLinks;
use super::relations::{RelationIssue, TypedRelation};
use crate::store::manifest::Manifest;

/// One resolved page edge (all body links from one page to another collapse into it).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Edge {
  /// Linking page.
  pub from: String,
  /// Linked page (an existing page id).
  pub to: String,
  /// Heading / block anchors of the body links, in order.
  pub anchors: Vec<String>,
  /// How the first body link was written.
  pub kind: LinkKind,
  /// Line of the first body link.
  pub line: u32,
  /// Validated relations from `from` to `to` carried by this edge (known types only).
  pub relations: Vec<TypedRelation>,
}

impl Edge {
  /// Relation types of the edge that may admit a page in expansion.
  pub fn expanding(&self) -> impl Iterator<Item = &TypedRelation> {
    self.relations.iter().filter(|r| r.is_expanding())
  }
}

/// Join `rel` onto folder `dir`, resolving `.` and `..`; `None` when it climbs out of the vault.
fn join(dir: &str, rel: &str) -> Option<String> {
  let mut parts: Vec<&str> =
    if rel.starts_with('/') { Vec::new() } else { dir.split('/').filter(|s| !s.is_empty()).collect() };
  for seg in rel.split('/') {
    match seg {
      "" | "." => {}
      ".." => {
        parts.pop()?;
      }
      s => parts.push(s),
    }
  }
  (!parts.is_empty()).then(|| parts.join("/"))
}

/// Link resolution over a set of page ids (a manifest's, or one kept up to date page by page).
#[derive(Debug, Default)]
pub(crate) struct Resolver {
  /// Ids by lowercase id (several only when ids differ by case: the greatest is the one reached).
  by_lower: HashMap<String, Vec<String>>,
  /// Ids by lowercase last segment.
  by_name: HashMap<String, Vec<String>>,
}

/// The lowercase last segment of a page id: the key under which [`Resolver`] files it. A link
/// can resolve only to ids with one of its [`link_keys`].
pub(crate) fn name_key(id: &str) -> String {
  last_segment_key(id).into_owned()
}

/// The lowercase last segment of a path, borrowed when it is lowercase already.
fn last_segment_key(path: &str) -> std::borrow::Cow<'_, str> {
  let last = path.rsplit('/').next().unwrap_or(path);
  if last.bytes().any(|b| b.is_ascii_uppercase() || !b.is_ascii()) {
    std::borrow::Cow::Owned(last.to_lowercase())
  } else {
    std::borrow::Cow::Borrowed(last)
  }
}

/// The [`name_key`]s of the ids `link` from page `from` may resolve to, whatever the other ids
/// are: the last segment of the path it names (relative and rooted forms end alike whenever both
/// stay inside the vault) and, for a bare wiki name, the name. Adding or removing a page whose
/// key is not among them never changes where the link resolves.
pub(crate) fn link_keys(from: &str, link: Link<'_>) -> Vec<String> {
  let dir = from.rsplit_once('/').map_or("", |(d, _)| d);
  let mut keys: Vec<String> = join(dir, link.target).iter().map(|p| name_key(p)).collect();
  if link.kind == LinkKind::Wiki && !link.target.contains('/') {
    let name = link.target.to_lowercase();
    if !keys.contains(&name) {
      keys.push(name);
    }
  }
  keys
}

/// The one name key every key of [`link_keys`] equals whatever page the link is on, when the
/// target's last segment is a name (not empty, `.` or `..`): a joined path ends with that
/// segment, and a bare wiki name is it. A cheap test before [`link_keys`] (which builds the
/// joined path) for the many links a lint pass looks at: a link whose key is not wanted has no
/// key that is. `None` when the segment is not a name (then ask [`link_keys`]).
pub(crate) fn link_name_key<'a>(link: Link<'a>) -> Option<std::borrow::Cow<'a, str>> {
  let key = last_segment_key(link.target);
  (!matches!(key.as_ref(), "" | "." | "..")).then_some(key)
}

impl Resolver {
  pub(crate) fn new(manifest: &Manifest) -> Self {
    let mut r = Resolver::default();
    for id in manifest.entries.keys() {
      r.insert(id);
    }
    r
  }

  /// Add page `id` (no effect when present).
  pub(crate) fn insert(&mut self, id: &str) {
    let ids = self.by_lower.entry(id.to_lowercase()).or_default();
    if ids.iter().any(|i| i == id) {
      return;
    }
    ids.push(id.to_string());
    self.by_name.entry(name_key(id)).or_default().push(id.to_string());
  }

  /// Remove page `id` (no effect when absent).
  pub(crate) fn remove(&mut self, id: &str) {
    fn drop_from(map: &mut HashMap<String, Vec<String>>, key: String, id: &str) {
      if let Some(v) = map.get_mut(&key) {
        v.retain(|i| i != id);
        if v.is_empty() {
          map.remove(&key);
        }
      }
    }
    drop_from(&mut self.by_lower, id.to_lowercase(), id);
    drop_from(&mut self.by_name, name_key(id), id);
  }

  /// True when `id` is a page (exactly as written).
  pub(crate) fn contains(&self, id: &str) -> bool {
    self.by_lower.get(&id.to_lowercase()).is_some_and(|v| v.iter().any(|i| i == id))
  }

  pub(crate) fn exact(&self, id: &str) -> Option<&str> {
    self.by_lower.get(&id.to_lowercase()).and_then(|v| v.iter().max()).map(String::as_str)
  }

  /// A link's target page id, or `Err(best guess)` for a dangling link.
  pub(crate) fn resolve(&self, from: &str, link: Link<'_>) -> Result<&str, String> {
    let dir = from.rsplit_once('/').map_or("", |(d, _)| d);
    let relative = join(dir, link.target);
    let rooted = join("", link.target);
    let mut tries: Vec<&Option<String>> = match link.kind {
      LinkKind::Markdown => vec![&relative, &rooted],
      LinkKind::Wiki => vec![&rooted, &relative],
    };
    tries.dedup();
    for t in tries.into_iter().flatten() {
      if let Some(id) = self.exact(t) {
        return Ok(id);
      }
    }
    if link.kind == LinkKind::Wiki && !link.target.contains('/') {
      // Obsidian's shortest-path form: a bare name resolves to the unique (or shortest) page.
      if let Some(c) = self.by_name.get(&link.target.to_lowercase()) {
        return Ok(c.iter().min_by_key(|id| (id.len(), id.as_str())).map(String::as_str).expect("non-empty"));
      }
    }
    Err(relative.unwrap_or_else(|| link.target.to_string()))
  }
}

/// The edges of page `id` (one per linked page, in link order, relations attached) and its
/// findings: the stored page-level ones, then its relations' (missing target, missing body
/// link). Dangling links go to `dangling` as (target as resolved, line).
pub(crate) fn page_edges(
  r: &Resolver,
  id: &str,
  pl: &PageLinks,
  mut dangling: impl FnMut(String, u32),
) -> (Vec<Edge>, Vec<RelationIssue>) {
  let mut edges: Vec<Edge> = Vec::new();
  let mut index: HashMap<&str, usize> = HashMap::new();
  for link in pl.links.iter() {
    match r.resolve(id, link) {
      Ok(to) if to == id => {} // a link within the page is navigation, not an edge
      Ok(to) => {
        let i = *index.entry(to).or_insert_with(|| {
          edges.push(Edge {
            from: id.to_string(),
            to: to.to_string(),
            anchors: vec![],
            kind: link.kind,
            line: link.line,
            relations: vec![],
          });
          edges.len() - 1
        });
        if let Some(a) = link.anchor {
          if !edges[i].anchors.iter().any(|x| x == a) {
            edges[i].anchors.push(a.to_string());
          }
        }
      }
      Err(target) => dangling(target, link.line),
    }
  }
  let mut issues = pl.issues.clone();
  for rel in &pl.relations {
    let Some(target) = r.exact(&rel.target) else {
      issues.push(RelationIssue::new(
        "relation_missing_target",
        format!(
          "{} → {}: no such page in this vault (relations never cross vaults); the relation is ignored",
          rel.relation_type, rel.target
        ),
      ));
      continue;
    };
    if !rel.is_known() {
      continue; // preserved in the manifest, inert
    }
    match index.get(target) {
      Some(&i) => {
        let attached = TypedRelation { target: target.to_string(), ..rel.clone() };
        if !edges[i].relations.contains(&attached) {
          edges[i].relations.push(attached);
        }
      }
      None => issues.push(RelationIssue::new(
        "relation_missing_body_link",
        format!(
          "{} → {target} has no Markdown or wiki link to that page in the body; the relation does not take part in expansion",
          rel.relation_type
        ),
      )),
    }
  }
  (edges, issues)
}

#[cfg(test)]
mod tests {
  use super::*;

  /// [`link_name_key`] is the only key [`link_keys`] can give, from any page, whenever it is
  /// `Some`: relative, rooted, climbing, case-mixed and non-ASCII targets, wiki and Markdown.
  #[test]
  fn a_link_name_key_covers_every_key_of_the_link() {
    let targets = [
      "bm25",
      "BM25",
      "concepts/bm25",
      "/concepts/BM25",
      "../a/b",
      "./x",
      "a/./b",
      "a/../b",
      "../../../z",
      "Ünïcode/Éte",
      "a/b/",
      "..",
      ".",
      "a/..",
      "",
      "x//y",
    ];
    let froms = ["top", "concepts/rag", "a/b/c/deep"];
    let mut named = 0;
    for t in targets {
      for kind in [LinkKind::Wiki, LinkKind::Markdown] {
        let l = Link { target: t, anchor: None, kind, line: 1 };
        let Some(k) = link_name_key(l) else {
          assert!(matches!(t.rsplit('/').next().unwrap(), "" | "." | ".."), "{t}");
          continue;
        };
        named += 1;
        for from in froms {
          for key in link_keys(from, l) {
            assert_eq!(key, k.as_ref(), "{from} → {t} ({kind:?})");
          }
        }
      }
    }
    assert!(named >= 20, "{named}");
  }

  #[test]
  fn joins() {
    assert_eq!(join("a/b", "../c").as_deref(), Some("a/c"));
    assert_eq!(join("a", "/x/y").as_deref(), Some("x/y"));
    assert_eq!(join("", "../x"), None);
  }
}
