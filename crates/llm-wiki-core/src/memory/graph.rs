//! The per-vault link graph. Each page's outbound links and validated relations are stored in
//! its manifest entry ([`PageLinks`]), so an incremental reindex re-parses only changed pages;
//! the graph (targets resolved, backlinks, relations attached to their body edge) is derived
//! from a manifest in one pass over its edges and cached per manifest generation.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::lint::{capped, lint_list};
use super::relations::RelationIssue;
use super::resolve::Decisions;
use crate::store::manifest::Manifest;

pub use super::link_targets::Edge;
pub(crate) use super::link_targets::{page_edges, Resolver};
pub use super::lint::MAX_LINT_REPORTED;
pub use super::page_links::PageLinks;

/// The resolved graph of one manifest.
#[derive(Debug, Default)]
pub struct LinkGraph {
  /// Edges by linking page, in link order.
  pub outbound: HashMap<String, Vec<Edge>>,
  /// (linking page, index into its outbound list) by linked page.
  pub inbound: HashMap<String, Vec<(String, usize)>>,
  /// Links whose target is no page of the vault: (linking page, target as resolved, line).
  pub dangling: Vec<(String, String, u32)>,
  /// Lint findings by page (page-level and graph-level).
  pub issues: BTreeMap<String, Vec<RelationIssue>>,
  /// User resolutions, historical pages and pages citing them ([`super::resolve::Decisions`]).
  pub decisions: Decisions,
}

impl LinkGraph {
  /// Resolve every page's links and relations of `manifest`.
  pub fn build(manifest: &Manifest) -> LinkGraph {
    Self::build_keeping(manifest, &|_| true)
  }

  /// The graph the lint needs, without the edges that cannot change a finding: its lint (page-
  /// level and relation findings, resolutions, `cites_superseded`) is exactly [`LinkGraph::build`]'s.
  /// Findings of a page come from its own links; the decisions read only edges carrying relations
  /// and the edges into superseded pages. On a 100k-page vault the whole graph (two strings per
  /// edge, millions of edges) took more memory than the rest of a cold build.
  pub fn build_for_lint(manifest: &Manifest) -> LinkGraph {
    let g = Self::build_keeping(manifest, &|e| !e.relations.is_empty());
    if g.decisions.superseded.is_empty() {
      return g;
    }
    let superseded = g.decisions.superseded.keys().cloned().collect::<std::collections::HashSet<String>>();
    Self::build_keeping(manifest, &|e| !e.relations.is_empty() || superseded.contains(&e.to))
  }

  /// [`LinkGraph::build`] keeping only the edges `keep` accepts (page findings use every link).
  fn build_keeping(manifest: &Manifest, keep: &dyn Fn(&Edge) -> bool) -> LinkGraph {
    let r = Resolver::new(manifest);
    let mut g = LinkGraph::default();
    for (id, entry) in &manifest.entries {
      let (mut edges, issues) =
        page_edges(&r, id, &entry.links, |t, line| g.dangling.push((id.clone(), t, line)));
      if !issues.is_empty() {
        g.issues.insert(id.clone(), issues);
      }
      edges.retain(|e| keep(e));
      for (i, e) in edges.iter().enumerate() {
        g.inbound.entry(e.to.clone()).or_default().push((id.clone(), i));
      }
      if !edges.is_empty() {
        g.outbound.insert(id.clone(), edges);
      }
    }
    g.decisions = decisions_of(manifest, &g);
    for (page, issue) in g.decisions.lint() {
      g.issues.entry(page).or_default().push(issue);
    }
    g
  }

  /// Outbound edges of a page.
  pub fn out_edges(&self, id: &str) -> &[Edge] {
    self.outbound.get(id).map_or(&[], |v| v.as_slice())
  }

  /// Inbound edges of a page.
  pub fn in_edges<'a>(&'a self, id: &str) -> impl Iterator<Item = &'a Edge> + 'a {
    self.inbound.get(id).into_iter().flatten().map(move |(from, i)| &self.outbound[from][*i])
  }

  /// Every lint finding as `(page id, issue)`, in page order.
  pub fn lint(&self) -> impl Iterator<Item = (&str, &RelationIssue)> {
    self.issues.iter().flat_map(|(id, v)| v.iter().map(move |i| (id.as_str(), i)))
  }
}

/// The decisions of a manifest read from its resolved graph `g`: its `supersedes` edges and the
/// edges into superseded pages ([`Decisions::derive_direct`] finds the same without the graph).
fn decisions_of(manifest: &Manifest, g: &LinkGraph) -> Decisions {
  let supersedes =
    g.outbound.values().flatten().filter(|e| e.relations.iter().any(|r| r.relation_type == "supersedes"));
  Decisions::assemble(manifest, supersedes.map(|e| (e.from.clone(), e.to.clone())).collect(), |superseded| {
    superseded.keys().flat_map(|s| g.in_edges(s).map(|e| (e.from.clone(), s.clone()))).collect()
  })
}

/// The relation and link lint of a manifest as index issues (path = the page's file under
/// `wiki/`), capped at [`MAX_LINT_REPORTED`] plus a `relation_lint_truncated` summary.
pub fn lint_issues(manifest: &Manifest) -> Vec<crate::store::IndexIssue> {
  if no_page_has_links(manifest) {
    return Vec::new();
  }
  lint_of(manifest, &LinkGraph::build_for_lint(manifest))
}

/// Only pages with stored links or relations can have findings: without any, lint has nothing
/// to build.
fn no_page_has_links(manifest: &Manifest) -> bool {
  manifest.entries.values().all(|e| e.links.is_empty())
}

/// [`lint_issues`] of a store's generation, computed once per process: the findings are a
/// function of the generation's manifest, so a reindex that changes nothing (the generation it
/// keeps) reports them again without recomputing them. Taken from the graph a reader already
/// built for the generation ([`graph_for`]'s cache) when there is one; else read back from the
/// store ([`super::lint::saved_findings`]: a fresh process does not lint again); else computed by
/// a [`super::lint::LintState`] (no graph), which the process keeps so that the next commit's
/// findings ([`lint_issues_after`]) cost what it changed. Findings are small (at most
/// [`MAX_LINT_REPORTED`] + 1) and kept for a few generations; a writer never adds to the
/// *graph* cache: each commit is a new generation, and a long-lived writer (a watcher) would
/// fill it with graphs of whole vaults no reader asked for. Computed findings are saved in the
/// store ([`super::lint::save_findings`]).
pub fn lint_issues_cached(store: &std::path::Path, manifest: &Manifest) -> Vec<crate::store::IndexIssue> {
  let key = cache_key(store, manifest);
  let issues = lint_cache().get_or_insert_with(&key, || {
    if no_page_has_links(manifest) {
      return Vec::new();
    }
    // What this process holds before the store's file: a graph of this generation is in memory.
    let found = match graph_cache().get(&key) {
      Some(g) => lint_of(manifest, &g),
      None => {
        if let Some(saved) = super::lint::saved_findings(store, manifest) {
          return saved;
        }
        let state = super::lint::LintState::build(manifest);
        let found = state.findings();
        super::lint::keep_state(store, state);
        found.as_ref().clone()
      }
    };
    super::lint::save_findings(store, manifest, &found);
    found
  });
  issues.as_ref().clone()
}

/// [`lint_issues`] of `manifest`, which a commit made by applying `delta` to generation `base`
/// of `store`: derived from `base`'s lint state when the process keeps it (the pages the delta
/// changed and the pages depending on them recomputed, not the whole vault), else computed
/// whole by [`lint_issues_cached`].
pub fn lint_issues_after(
  store: &std::path::Path,
  base: u64,
  delta: &crate::store::manifest::ManifestDelta,
  manifest: &Manifest,
) -> Vec<crate::store::IndexIssue> {
  match advance_lint(store, base, delta, manifest, true) {
    Some(found) => found.as_ref().clone(),
    None => lint_issues_cached(store, manifest),
  }
}

/// Advance the process's lint state of `store` from generation `base` to `manifest` (`delta`
/// applied to `base`) when there is one: its findings, or `None` (no state, or the superseded
/// pages changed and `rescan` is false: then the state is dropped). A hinted commit calls this with
/// `rescan` false, so that a later walk of the vault still finds a current state and the hinted
/// commit never pays a whole-vault pass.
pub fn advance_lint(
  store: &std::path::Path,
  base: u64,
  delta: &crate::store::manifest::ManifestDelta,
  manifest: &Manifest,
  rescan: bool,
) -> Option<Arc<Vec<crate::store::IndexIssue>>> {
  let mut state = super::lint::take_state(store, &manifest.vault_id, base)?;
  state.advance(delta, manifest, rescan)?;
  let found = state.findings();
  lint_cache().insert(&cache_key(store, manifest), found.clone());
  super::lint::save_findings(store, manifest, &found);
  super::lint::keep_state(store, state);
  Some(found)
}

/// The page-level lint findings (stored in each entry, no graph needed) of the pages a hinted
/// reindex changed, in page order and capped like [`lint_issues`]. A hinted commit reports these
/// instead of the whole-vault lint, which needs the link graph of the whole vault (O(vault) per
/// commit); graph-level findings (missing targets, missing body links, resolution decisions) are
/// reported by runs that walk the vault, and by status and the lint tools.
pub fn page_lint_issues<'a>(
  changed: impl IntoIterator<Item = (&'a String, &'a Arc<crate::store::manifest::ManifestEntry>)>,
) -> Vec<crate::store::IndexIssue> {
  use crate::store::IndexIssue;
  let mut all: Vec<_> = changed.into_iter().collect();
  all.sort_by(|a, b| a.0.cmp(b.0));
  capped(
    all.iter().flat_map(|(_, e)| e.links.issues.iter().map(move |i| (e.rel_path.as_str(), i))),
    |(path, i)| IndexIssue::new(&i.code, i.message.clone()).at(path.to_string()),
  )
}

fn lint_of(manifest: &Manifest, g: &LinkGraph) -> Vec<crate::store::IndexIssue> {
  lint_list(manifest, g.lint())
}

type CacheKey = (PathBuf, String, u64);

/// The key of a store's manifest generation in the per-process caches below.
fn cache_key(store: &std::path::Path, manifest: &Manifest) -> CacheKey {
  (store.to_path_buf(), manifest.vault_id.clone(), manifest.generation)
}

/// Values derived once per (store, vault, manifest generation) and shared by the process; the
/// most recent `keep` generations are kept (a reader may still hold the previous one).
struct GenerationCache<T> {
  keep: usize,
  entries: Mutex<Vec<(CacheKey, Arc<T>)>>,
}

impl<T> GenerationCache<T> {
  const fn new(keep: usize) -> Self {
    GenerationCache { keep, entries: Mutex::new(Vec::new()) }
  }

  fn get(&self, key: &CacheKey) -> Option<Arc<T>> {
    let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
    entries.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
  }

  /// Keep `value` as `key`'s.
  fn insert(&self, key: &CacheKey, value: Arc<T>) {
    let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
    entries.retain(|(k, _)| k != key);
    entries.push((key.clone(), value));
    if entries.len() > self.keep {
      entries.remove(0);
    }
  }

  /// The cached value of `key`, or `make`'s (computed without holding the lock), kept.
  fn get_or_insert_with(&self, key: &CacheKey, make: impl FnOnce() -> T) -> Arc<T> {
    if let Some(v) = self.get(key) {
      return v;
    }
    let v = Arc::new(make());
    self.insert(key, v.clone());
    v
  }
}

/// The lint findings of recent generations (see [`lint_issues_cached`]).
fn lint_cache() -> &'static GenerationCache<Vec<crate::store::IndexIssue>> {
  static CACHE: GenerationCache<Vec<crate::store::IndexIssue>> = GenerationCache::new(4);
  &CACHE
}

/// The graphs [`graph_for`] built, most recent last.
fn graph_cache() -> &'static GenerationCache<LinkGraph> {
  static CACHE: GenerationCache<LinkGraph> = GenerationCache::new(8);
  &CACHE
}

/// The supersession decisions recall's result warnings need, `None` when no page of the manifest
/// supersedes another or records a resolution (most vaults). Derived once per (store, vault,
/// manifest generation) and shared: the check reads every page (recall made it per query before:
/// O(vault) on every recall of a vault without supersessions); the decisions are taken from the
/// generation's graph when one is cached, else derived without building the graph
/// ([`super::resolve::Decisions::derive_direct`]), so a new generation does not cost recall a
/// whole-vault graph.
pub fn supersession_for(
  store: &std::path::Path,
  manifest: &Manifest,
) -> Option<Arc<super::resolve::Decisions>> {
  static CACHE: GenerationCache<Option<Arc<super::resolve::Decisions>>> = GenerationCache::new(4);
  let key = cache_key(store, manifest);
  let cached = CACHE.get_or_insert_with(&key, || {
    super::resolve::may_supersede(manifest).then(|| {
      Arc::new(match graph_cache().get(&key) {
        Some(g) => g.decisions.clone(),
        None => super::resolve::Decisions::derive_direct(manifest),
      })
    })
  });
  (*cached).clone()
}

/// Graph of a manifest, built once per (store, vault, manifest generation) and shared. A few
/// recent generations are kept (a reader may still hold the previous one).
pub fn graph_for(store: &std::path::Path, manifest: &Manifest) -> Arc<LinkGraph> {
  graph_cache().get_or_insert_with(&cache_key(store, manifest), || LinkGraph::build(manifest))
}

#[cfg(test)]
pub(crate) mod tests {
  use super::*;
  use crate::memory::links::MAX_LINKS_PER_PAGE;
  use crate::store::manifest::{ChunkIds, ManifestEntry};
  use crate::vault::Page;
  use crate::vault::Role;

  /// A manifest of `(id, type, page text)` pages (links and relations parsed from the text).
  pub(crate) fn manifest_of(pages: &[(&str, &str)]) -> Manifest {
    let mut m = Manifest::empty("v");
    for (id, text) in pages {
      let page = Page::parse(id, PathBuf::from(format!("/w/{id}.md")), text).unwrap();
      m.entries.insert(
        id.to_string(),
        ManifestEntry {
          rel_path: format!("{id}.md"),
          size: text.len() as u64,
          mtime_ns: 0,
          content_hash: "0".repeat(64),
          role: page.role,
          meta: Box::new(page.meta.clone()),
          sections: 1,
          chunks: ChunkIds::default(),
          links: PageLinks::of_page(&page),
        }
        .into(),
      );
    }
    let _ = Role::Canonical;
    m
  }

  fn codes(g: &LinkGraph, id: &str) -> Vec<String> {
    g.issues.get(id).map(|v| v.iter().map(|i| i.code.clone()).collect()).unwrap_or_default()
  }

  /// [`super::super::resolve::Decisions::derive_direct`] agrees with the graph's decisions on a
  /// vault of every link form, with each page removed in turn (a removed or renamed page
  /// changes what links resolve to).
  #[test]
  fn decisions_without_the_graph_equal_the_graphs() {
    let rid =
      crate::memory::resolve::resolution_id("v", "concepts/new2", "concepts/old2", "supersedes", None, None);
    let resolution = format!(
      "---\ntype: analysis\ntitle: R\ncategory: conflict-resolution\nstatus: stable\nresolution:\n  id: \"{rid}\"\n  selected: \"concepts/new2\"\n  other: \"concepts/old2\"\n  relation: supersedes\n  scope: null\n  decided_by: user\n  decided_at: \"2026-01-01T00:00:00Z\"\n  replaces: null\n---\nSee [[concepts/old2]].\n"
    );
    let sup = |target: &str, body: &str| {
      format!("---\ntype: concept\nrelations:\n  - target: {target}\n    type: supersedes\n---\n{body}\n")
    };
    let pages: Vec<(String, String)> = vec![
      ("concepts/new".into(), sup("concepts/old", "Replaces [old](old.md).")),
      ("concepts/newer".into(), sup("concepts/old", "Also replaces [[Old]].")),
      ("concepts/nolink".into(), sup("notes/deep/gone", "No body link.")),
      ("notes/deep/x".into(), sup("notes/deep/gone", "Replaces [g](../deep/./gone.md).")),
      ("notes/deep/gone".into(), "---\ntype: concept\n---\nHistorical; links [[concepts/new]].\n".into()),
      ("concepts/self".into(), sup("concepts/self", "Itself [[self]].")),
      ("concepts/old".into(), "---\ntype: concept\n---\nOld, links [[old]] (itself).\n".into()),
      ("concepts/new2".into(), "---\ntype: concept\n---\nNew two.\n".into()),
      ("concepts/old2".into(), "---\ntype: concept\n---\nOld two.\n".into()),
      ("resolutions/r1".into(), resolution),
      ("notes/cite1".into(), "---\ntype: source\n---\nCites [[OLD]] and [x](../concepts/old.md#a).\n".into()),
      ("notes/cite2".into(), "---\ntype: source\n---\nCites [[concepts/old2]] and [g](deep/gone.md) and [t](deep/x/..).\n".into()),
      (
        "notes/cite3".into(),
        "---\ntype: source\nrelations:\n  - target: concepts/old\n    type: supports\n---\nNo body link, [d](deep/).\n".into(),
      ),
      ("notes/old".into(), "---\ntype: source\n---\nSame name elsewhere: [[old]].\n".into()),
    ];
    for skip in 0..=pages.len() {
      let kept: Vec<(&str, &str)> = pages
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != skip)
        .map(|(_, (a, b))| (a.as_str(), b.as_str()))
        .collect();
      let m = manifest_of(&kept);
      let (graph, direct) =
        (LinkGraph::build(&m).decisions, crate::memory::resolve::Decisions::derive_direct(&m));
      assert_eq!(graph.superseded, direct.superseded, "without page {skip}");
      assert_eq!(graph.cites_superseded, direct.cites_superseded, "without page {skip}");
      assert_eq!(format!("{:?}", graph.lint()), format!("{:?}", direct.lint()));
      if skip == pages.len() {
        // The vault exercises what it should: declared and resolved supersessions, citations.
        assert_eq!(
          graph.superseded.keys().collect::<Vec<_>>(),
          ["concepts/old", "concepts/old2", "notes/deep/gone"],
          "{:?}",
          graph.superseded
        );
        assert!(graph.cites_superseded.contains_key("notes/cite1"), "{:?}", graph.cites_superseded);
        assert!(graph.cites_superseded.contains_key("notes/cite2"));
        assert!(graph.cites_superseded.contains_key("notes/cite3"));
      }
    }
  }

  #[test]
  fn edges_backlinks_and_attached_relations() {
    let m = manifest_of(&[
      (
        "concepts/a",
        "---\ntype: concept\nrelations:\n  - target: concepts/b\n    type: contradicts\n  - target: concepts/c\n    type: supports\n  - target: concepts/gone\n    type: supports\n  - target: concepts/b\n    type: refutes\n---\nSee [B](b.md#claim) and [[concepts/b^blk]] and [[d]] and [x](missing.md).\n",
      ),
      ("concepts/b", "---\ntype: concept\n---\nBack to [[a]] and [[concepts/a]].\n"),
      ("concepts/c", "---\ntype: concept\n---\nNo links.\n"),
      ("notes/d", "---\ntype: source\n---\nx\n"),
    ]);
    let g = LinkGraph::build(&m);
    let out = g.out_edges("concepts/a");
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[0].to, "concepts/b");
    assert_eq!(out[0].anchors, vec!["claim".to_string(), "^blk".to_string()]);
    assert_eq!(out[0].relations.len(), 1, "one edge, relation attached, unknown type inert");
    assert_eq!(out[0].relations[0].relation_type, "contradicts");
    assert_eq!(out[1].to, "notes/d");
    assert_eq!(g.out_edges("concepts/b").len(), 1, "two links to one page are one edge");
    assert_eq!(g.in_edges("concepts/b").count(), 1);
    assert_eq!(g.in_edges("concepts/a").map(|e| e.from.as_str()).collect::<Vec<_>>(), vec!["concepts/b"]);
    assert_eq!(g.dangling, vec![("concepts/a".to_string(), "concepts/missing".to_string(), 13)]);
    let mut c = codes(&g, "concepts/a");
    c.sort();
    assert_eq!(c, vec!["relation_missing_body_link", "relation_missing_target", "relation_unknown_type"],);
    // The lint-only graph keeps the one edge carrying a relation and finds the same.
    let lean = LinkGraph::build_for_lint(&m);
    assert_eq!(lean.outbound.values().map(Vec::len).sum::<usize>(), 1);
    assert_eq!(lean.out_edges("concepts/a")[0].to, "concepts/b");
    let findings = |g: &LinkGraph| g.lint().map(|(p, i)| (p.to_string(), i.code.clone())).collect::<Vec<_>>();
    assert_eq!(findings(&lean), findings(&g));
  }

  #[test]
  fn cycles_and_self_links_are_bounded() {
    let m = manifest_of(&[
      (
        "a",
        "---\ntype: concept\nrelations:\n  - target: b\n    type: supersedes\n  - target: a\n    type: supports\n---\n[[b]] [[a]] [self](a.md)\n",
      ),
      ("b", "---\ntype: concept\nrelations:\n  - target: a\n    type: supersedes\n---\n[[a]]\n"),
    ]);
    let g = LinkGraph::build(&m);
    assert_eq!(g.out_edges("a").len(), 1);
    assert_eq!(codes(&g, "a"), vec!["relation_self_link"]);
    assert_eq!(g.out_edges("b")[0].relations[0].relation_type, "supersedes");
  }

  #[test]
  fn ten_thousand_links() {
    let body: String = (0..10_000).map(|i| format!("[[p{i}]] ")).collect();
    let m = manifest_of(&[("hub", &format!("---\ntype: concept\n---\n{body}\n"))]);
    let g = LinkGraph::build(&m);
    assert_eq!(g.dangling.len(), MAX_LINKS_PER_PAGE);
    assert_eq!(codes(&g, "hub"), vec!["page_links_truncated"]);
  }

  /// A generation's findings are saved in its store and read back by a process that does not
  /// hold them (another store path is another cache key: what a fresh process sees). The test
  /// edits a saved copy to tell a read from a recomputation; another generation, vault or engine,
  /// or a damaged file, is linted again.
  #[test]
  fn lint_findings_are_saved_and_read_back_for_the_same_generation() {
    use crate::store::layout::StoreDir;
    let dirs: Vec<tempfile::TempDir> = (0..5).map(|_| tempfile::tempdir().unwrap()).collect();
    let file = |i: usize| StoreDir::new(dirs[i].path().to_path_buf()).lint_file();
    let mut m = manifest_of(&[
      ("a", "---\ntype: concept\nrelations:\n  - target: missing\n    type: supports\n---\nSee [[gone]].\n"),
      ("b", "---\ntype: concept\n---\nSee [[a]].\n"),
    ]);
    m.generation = 7;
    let first = lint_issues_cached(dirs[0].path(), &m);
    assert!(!first.is_empty());
    assert_eq!(first, lint_issues(&m));
    assert_eq!(super::super::lint::saved_findings(dirs[0].path(), &m).as_ref(), Some(&first));

    let saved = std::fs::read_to_string(file(0)).unwrap();
    let edited = saved.replace(&first[0].message, "read from the saved file");
    assert_ne!(edited, saved);
    for i in 1..4 {
      std::fs::write(file(i), &edited).unwrap();
    }
    // Same generation and vault: read, not recomputed.
    assert_eq!(lint_issues_cached(dirs[1].path(), &m)[0].message, "read from the saved file");
    // Another generation or vault: linted again, and the file replaced by the new findings.
    let mut next = m.clone();
    next.generation = 8;
    assert_eq!(lint_issues_cached(dirs[2].path(), &next), first);
    assert_eq!(super::super::lint::saved_findings(dirs[2].path(), &next).as_ref(), Some(&first));
    let mut other = m.clone();
    other.vault_id = "w".into();
    assert_eq!(lint_issues_cached(dirs[3].path(), &other), first);
    // Another engine version, a damaged file: linted again.
    std::fs::write(file(4), edited.replace("llm-wiki-retrieval", "other-engine")).unwrap();
    assert_eq!(super::super::lint::saved_findings(dirs[4].path(), &m), None);
    std::fs::write(file(4), &saved[..saved.len() / 2]).unwrap();
    assert_eq!(lint_issues_cached(dirs[4].path(), &m), first);
  }
}
