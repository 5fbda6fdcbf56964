//! The agent's graph tools over an indexed vault built here: typed relations, a cycle, a
//! self-loop, a superseded page, a competing claim, a hub. `wikiIndex` orientation from the
//! store alone (page files removed after indexing), `neighbours` token budgets, `graphQuery`
//! (typed relations first, competing claims together, historical pages marked, budgets), and
//! `linkPath` (typed relations win ties, same page, unknown and malformed ids, another vault).

use llm_wiki_core::memory::explore::{self, NeighbourRequest};
use llm_wiki_core::memory::graph_query::{graph_query, GraphQueryOptions};
use llm_wiki_core::memory::orientation::wiki_index;
use llm_wiki_core::retrieve::RetrievalMode;
use llm_wiki_core::store::{reindex_vault, Component, ReindexOptions};
use llm_wiki_core::testkit::{temp_vault, write_file};
use llm_wiki_core::vault::VaultPaths;

fn page(ty: &str, title: &str, rels: &[(&str, &str)], body: &str) -> String {
  let mut fm = format!("---\ntype: {ty}\ntitle: {title}\n");
  if !rels.is_empty() {
    fm.push_str("relations:\n");
    for (t, ty) in rels {
      fm.push_str(&format!("  - target: {t}\n    type: {ty}\n"));
    }
  }
  format!("{fm}---\n{body}\n")
}

/// The test vault, indexed (lexical).
fn vault() -> (tempfile::TempDir, VaultPaths) {
  let (t, p) = temp_vault();
  let pages = [
    (
      "concepts/cache-ttl",
      page(
        "concept",
        "Cache TTL",
        &[("concepts/cache-forever", "contradicts"), ("concepts/eviction", "supports")],
        "Zephyrcache entries expire after ten minutes. See [[concepts/cache-forever]] and [[concepts/eviction]] and [[concepts/plain-note]].",
      ),
    ),
    ("concepts/cache-forever", page("concept", "Cache forever", &[], "Zephyrcache entries are kept forever. Links [[concepts/cache-ttl]].")),
    ("concepts/eviction", page("concept", "Eviction", &[("concepts/cache-ttl", "supports")], "Eviction policy [[concepts/cache-ttl]] and [[concepts/eviction]] itself.")),
    ("concepts/plain-note", page("concept", "Plain note", &[], "A note with a plain link to [[concepts/far]].")),
    ("concepts/far", page("concept", "Far", &[], "Far away; links back [[concepts/plain-note]].")),
    ("concepts/v1", page("concept", "Protocol v1", &[], "The quorvex handshake version one.")),
    ("concepts/v2", page("concept", "Protocol v2", &[("concepts/v1", "supersedes")], "Quorvex handshake version two replaces [[concepts/v1]].")),
    ("sources/bench", page("source", "TTL benchmark", &[("concepts/cache-ttl", "supports")], "Measured expiry: [[concepts/cache-ttl]]. Cites [[concepts/v1]].")),
    ("concepts/a", page("concept", "A", &[], "Start [[concepts/p]] [[concepts/q]].")),
    ("concepts/p", page("concept", "P", &[], "Plain [[concepts/z]].")),
    ("concepts/q", page("concept", "Q", &[("concepts/z", "derived_from")], "Typed [[concepts/z]].")),
    ("concepts/z", page("concept", "Z", &[], "End.")),
  ];
  for (id, text) in &pages {
    write_file(&p.wiki.join(format!("{id}.md")), text);
  }
  let r = reindex_vault(&p, &ReindexOptions { components: vec![Component::Lexical], ..Default::default() });
  assert!(r.ok, "{:?}", r.errors);
  (t, p)
}

fn lexical(budget: Option<u64>, hops: Option<u32>) -> GraphQueryOptions {
  GraphQueryOptions { budget_tokens: budget, hops, mode: RetrievalMode::Lexical, ..Default::default() }
}

#[test]
fn the_index_comes_from_the_store_alone() {
  let (_t, p) = vault();
  let before = wiki_index(&p, None).unwrap();
  // Every page file gone: the index is the same (nothing is read from the pages).
  std::fs::remove_dir_all(&p.wiki).unwrap();
  let ix = wiki_index(&p, None).unwrap();
  assert_eq!(ix.text, before.text);
  assert_eq!(ix.pages, 12);
  assert_eq!((ix.canonical, ix.evidence, ix.historical), (11, 1, 1));
  assert_eq!(ix.unresolved_conflicts, 1, "{:?}", ix.conflicts);
  assert_eq!(ix.conflicts[0], ["concepts/cache-forever".to_string(), "concepts/cache-ttl".to_string()]);
  assert_eq!(ix.most_linked[0].id, "concepts/cache-ttl", "{:?}", ix.most_linked);
  assert!(!ix.most_linked.iter().any(|x| x.id == "concepts/v1"), "historical pages are not listed");
  assert!(ix.tokens_used <= 500 && ix.text.contains("concepts/cache-ttl"), "{}", ix.text);
  assert!(ix.diagnostics.is_empty());
  let small = wiki_index(&p, Some(40)).unwrap();
  assert!(small.tokens_used <= 40 && small.truncated);
  let huge = wiki_index(&p, Some(1_000_000_000)).unwrap();
  assert_eq!(huge.budget_tokens, 4000);
  assert_eq!(huge.diagnostics[0].code, "budget_clamped");
  assert_eq!(wiki_index(&p, Some(0)).unwrap_err().code(), "invalid_argument");
}

#[test]
fn neighbours_within_a_token_budget() {
  let (_t, p) = vault();
  let n = explore::neighbours(&p, "concepts/cache-ttl", &NeighbourRequest::default()).unwrap();
  assert_eq!(n.budget_tokens, 2000);
  // Typed relations first: the contradicts and supports edges precede the plain link.
  let first: Vec<&str> = n.outbound.iter().map(|e| e.to.as_str()).collect();
  assert_eq!(first.last(), Some(&"concepts/plain-note"), "{first:?}");
  assert!(n.content.contains("expire after ten minutes"));
  let small = explore::neighbours(
    &p,
    "concepts/cache-ttl",
    &NeighbourRequest { budget_tokens: Some(45.0), ..Default::default() },
  )
  .unwrap();
  assert!(small.truncated && small.tokens_used <= 45, "{} {}", small.tokens_used, small.text);
  // Content is cut at a sentence or line end (or left out), never inside a sentence.
  let file = std::fs::read_to_string(p.wiki.join("concepts/cache-ttl.md")).unwrap();
  assert!(file.starts_with(&small.content), "{:?}", small.content);
  let rest = &file[small.content.len()..];
  assert!(
    small.content.is_empty() || small.content.ends_with('.') || rest.starts_with('\n'),
    "{:?}",
    small.content
  );
  let huge = explore::neighbours(
    &p,
    "concepts/cache-ttl",
    &NeighbourRequest { budget_tokens: Some(1e9), ..Default::default() },
  )
  .unwrap();
  assert_eq!(huge.budget_tokens, 10_000);
  assert_eq!(huge.diagnostics[0].code, "budget_clamped");
  let zero = explore::neighbours(
    &p,
    "concepts/cache-ttl",
    &NeighbourRequest { budget_tokens: Some(0.0), ..Default::default() },
  );
  assert_eq!(zero.unwrap_err().code(), "invalid_argument");
  // Both budgets: the smaller binds.
  let bytes = explore::neighbours(
    &p,
    "concepts/cache-ttl",
    &NeighbourRequest { max_bytes: Some(600), ..Default::default() },
  )
  .unwrap();
  assert!(bytes.truncated);
  // Self-loop and cycle: bounded, no edge to itself.
  let e =
    explore::neighbours(&p, "concepts/eviction", &NeighbourRequest { depth: Some(3), ..Default::default() })
      .unwrap();
  assert!(!e.outbound.iter().any(|x| x.from == x.to));
  for bad in ["../etc/passwd", "/etc/passwd", "concepts/../x"] {
    assert_eq!(
      explore::neighbours(&p, bad, &NeighbourRequest::default()).unwrap_err().code(),
      "invalid_argument",
      "{bad}"
    );
  }
  let unknown = explore::neighbours(&p, "concepts/nope", &NeighbourRequest::default()).unwrap();
  assert_eq!(unknown.diagnostics[0].code, "page_not_found");
}

#[test]
fn graph_query_follows_typed_relations_and_keeps_claims_together() {
  let (_t, p) = vault();
  let r = graph_query(&p, "zephyrcache expire", &lexical(None, None)).unwrap();
  let ids: Vec<&str> = r.pages.iter().map(|x| x.id.as_str()).collect();
  assert!(ids.contains(&"concepts/cache-ttl") && ids.contains(&"concepts/cache-forever"), "{ids:?}");
  assert_eq!(r.pages[0].why, "seed");
  let ev = r.pages.iter().find(|x| x.id == "concepts/eviction").expect("typed neighbour admitted");
  assert_eq!(ev.relation.as_deref(), Some("supports"));
  // Two hops: far is reached over plain links, after the typed ones.
  let pos = |id: &str| ids.iter().position(|x| *x == id);
  if let (Some(e), Some(pl)) = (pos("concepts/eviction"), pos("concepts/plain-note")) {
    assert!(e < pl, "typed before plain: {ids:?}");
  }
  assert!(r.edges.iter().any(|e| e.relations.contains(&"contradicts".to_string())));
  assert!(r.tokens_used <= r.budget_tokens && r.text.contains("## Edges"), "{}", r.text);
  // Superseded page marked historical.
  let h = graph_query(&p, "quorvex handshake", &lexical(None, Some(1))).unwrap();
  let v1 = h.pages.iter().find(|x| x.id == "concepts/v1").expect("v1");
  assert!(v1.historical && v1.superseded_by == vec!["concepts/v2".to_string()], "{v1:?}");
  assert!(h.text.contains("HISTORICAL"));
  // A budget that has room for one page but not a pair: the competing pair is in whole or not at all.
  for budget in [30, 45, 60, 80, 120] {
    let b = graph_query(&p, "zephyrcache expire", &lexical(Some(budget), None)).unwrap();
    let has = |id: &str| b.pages.iter().any(|x| x.id == id);
    assert_eq!(has("concepts/cache-ttl"), has("concepts/cache-forever"), "budget {budget}: {}", b.text);
    assert!(b.tokens_used as usize <= budget as usize, "budget {budget}: {} > budget", b.tokens_used);
  }
  // Budgets and hops out of range.
  let huge = graph_query(&p, "zephyrcache", &lexical(Some(1_000_000_000), Some(99))).unwrap();
  assert_eq!((huge.budget_tokens, huge.hops), (10_000, 4));
  let codes: Vec<&str> = huge.diagnostics.iter().map(|d| d.code.as_str()).collect();
  assert!(codes.contains(&"budget_clamped") && codes.contains(&"hops_clamped"), "{codes:?}");
  assert_eq!(graph_query(&p, "zephyrcache", &lexical(Some(0), None)).unwrap_err().code(), "invalid_argument");
  let none = graph_query(&p, "nothing matches xylophone", &lexical(None, None)).unwrap();
  assert!(none.pages.is_empty());
  assert_eq!(none.diagnostics[0].code, "graph_no_seeds");
  assert!(graph_query(&p, "   ", &lexical(None, None)).is_err());
}

#[test]
fn paths_prefer_typed_relations_and_reject_bad_ids() {
  let (_t, p) = vault();
  let r = explore::link_path(&p, "concepts/a", "concepts/z", 4).unwrap();
  let ids: Vec<&str> = r.pages.iter().map(|x| x.id.as_str()).collect();
  assert_eq!(ids, ["concepts/a", "concepts/q", "concepts/z"]);
  let same = explore::link_path(&p, "concepts/a", "concepts/a", 4).unwrap();
  assert!(same.found && same.hops.is_empty());
  assert_eq!(same.diagnostics[0].code, "path_same_page");
  let unknown = explore::link_path(&p, "concepts/a", "concepts/nope", 4).unwrap();
  assert!(!unknown.found);
  assert_eq!(unknown.diagnostics[0].code, "page_not_found");
  assert_eq!(explore::link_path(&p, "../x", "concepts/a", 4).unwrap_err().code(), "invalid_argument");
  assert_eq!(explore::link_path(&p, "concepts/a", "/tmp/x.md", 4).unwrap_err().code(), "invalid_argument");
  let other = "11111111-2222-4333-8444-555555555555:concepts/a";
  assert_eq!(explore::link_path(&p, other, "concepts/z", 4).unwrap_err().code(), "graph_cross_vault");
  assert_eq!(
    explore::link_path(&p, "concepts/a", "personal:concepts/z", 4).unwrap_err().code(),
    "graph_cross_vault"
  );
  assert_eq!(explore::link_path(&p, "concepts/a", "concepts/z", 0).unwrap_err().code(), "invalid_argument");
  // A cycle (plain-note ⟷ far) is bounded.
  let c = explore::link_path(&p, "concepts/far", "concepts/cache-ttl", 8).unwrap();
  assert!(c.found && c.hops.len() == 2);
}
