//! `wikiIndex`: orientation in about 500 tokens (seed 004's `wiki_index`, "don't know what's in
//! the wiki yet?"). Everything comes from the index — the manifest's page metadata and stored
//! links of one generation — never from the page files: page counts by type, role, folder,
//! domain and tag, the most linked current canonical pages, the pages changed last, and the
//! competing claims (`contradicts`) no user resolution has settled. The structured fields are
//! bounded lists; `text` renders them within the token budget.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::graph_input::{budget, tokens};
use super::link_targets::Resolver;
use super::resolve::ResolutionSet;
use crate::error::Result;
use crate::retrieve::engine::{open_snapshot, Unavailable};
use crate::store::manifest::Manifest;
use crate::util::diagnostic::RecallDiagnostic;
use crate::util::num::{sat_i64, sat_u32};
use crate::vault::{Role, VaultPaths};

/// Default budget of the rendered index (seed 004: "≈500 tokens").
pub const DEFAULT_INDEX_TOKENS: usize = 500;
/// Largest budget accepted (larger requests are clamped, with a diagnostic).
pub const MAX_INDEX_TOKENS: usize = 4_000;
/// Entries kept per count list and page list (not fitted: a bound on the structured result; the
/// rendered text shows what its budget allows).
pub const MAX_LIST: usize = 12;
/// Competing pairs listed (the count covers all).
pub const MAX_CONFLICTS_LISTED: usize = 5;

/// A label (type, folder, domain, tag) with its page count.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false, js_name = "IndexCount"))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Count {
  /// Type, folder, domain or tag.
  pub name: String,
  /// Pages.
  pub pages: u32,
}

/// A page named by the index.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexPage {
  /// Page id.
  pub id: String,
  /// Title.
  pub title: String,
  /// Frontmatter `type`.
  #[serde(rename = "type")]
  #[cfg_attr(feature = "napi", napi(js_name = "type"))]
  pub page_type: String,
  /// Pages linking to it (distinct linking pages).
  pub inbound: u32,
  /// Frontmatter `updated`, else `created`, as written.
  pub date: Option<String>,
  /// File modification time when indexed (ms since the epoch).
  pub modified_ms: i64,
}

/// Result of `wikiIndex` ([`wiki_index`]): orientation from the index alone.
// Counts are `u32` and the generation `i64`: JavaScript numbers (`crate::util::num`).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WikiIndex {
  /// Vault id.
  pub vault_id: String,
  /// Store generation the index describes.
  pub generation: i64,
  /// Indexed pages.
  pub pages: u32,
  /// Canonical pages.
  pub canonical: u32,
  /// Evidence pages.
  pub evidence: u32,
  /// Pages per frontmatter `type`, most first.
  pub by_type: Vec<Count>,
  /// Pages per top-level folder, most first.
  pub by_folder: Vec<Count>,
  /// Pages per frontmatter `domain` (pages without one are not counted), most first.
  pub by_domain: Vec<Count>,
  /// Pages per tag, most first.
  pub by_tag: Vec<Count>,
  /// Current (not superseded) canonical pages with the most linking pages.
  pub most_linked: Vec<IndexPage>,
  /// Pages changed last (file modification time as indexed).
  pub recent: Vec<IndexPage>,
  /// `contradicts` pairs without an active user resolution.
  pub unresolved_conflicts: u32,
  /// The first of them (at most [`MAX_CONFLICTS_LISTED`]), each as its two page ids, the page
  /// declaring `contradicts` first.
  pub conflicts: Vec<Vec<String>>,
  /// Pages a `supersedes` relation or a user resolution made historical.
  pub historical: u32,
  /// Everything above as compact Markdown within the budget.
  pub text: String,
  /// Estimated tokens of `text`.
  pub tokens_used: u32,
  /// The budget applied.
  pub budget_tokens: u32,
  /// True when `text` leaves out list entries the structured fields hold.
  pub truncated: bool,
  /// `{code, message}` pairs (`budget_clamped`, an unavailable index).
  pub diagnostics: Vec<RecallDiagnostic>,
}

fn top(counts: HashMap<String, usize>) -> Vec<Count> {
  let mut v: Vec<Count> =
    counts.into_iter().map(|(name, pages)| Count { name, pages: sat_u32(pages) }).collect();
  v.sort_by(|a, b| b.pages.cmp(&a.pages).then_with(|| a.name.cmp(&b.name)));
  v.truncate(MAX_LIST);
  v
}

fn index_page(manifest: &Manifest, id: &str, inbound: usize) -> IndexPage {
  let e = &manifest.entries[id];
  IndexPage {
    id: id.to_string(),
    title: e.meta.title.clone(),
    page_type: e.meta.page_type.clone(),
    inbound: sat_u32(inbound),
    date: e.meta.date().map(str::to_string),
    modified_ms: e.mtime_ns / 1_000_000,
  }
}

/// Distinct linking pages per linked page, and the `contradicts` pairs (declared relation whose
/// target exists and is linked from the body, as expansion requires), from the stored links.
fn link_counts(manifest: &Manifest) -> (HashMap<&str, usize>, Vec<(String, String)>) {
  let r = Resolver::new(manifest);
  let mut inbound: HashMap<&str, usize> = HashMap::new();
  let mut contradicts = Vec::new();
  for (id, e) in &manifest.entries {
    let mut linked: HashSet<&str> = HashSet::new();
    for link in e.links.links.iter() {
      if let Ok(to) = r.resolve(id, link) {
        if to != id && linked.insert(to) {
          let key = manifest.entries.get_key_value(to).map(|(k, _)| k.as_str()).expect("resolved ids exist");
          *inbound.entry(key).or_default() += 1;
        }
      }
    }
    for rel in e.links.relations.iter().filter(|r| r.relation_type == "contradicts") {
      if let Some(t) = r.exact(&rel.target) {
        if linked.contains(t) && t != id {
          contradicts.push((id.clone(), t.to_string()));
        }
      }
    }
  }
  (inbound, contradicts)
}

/// The index of one manifest (see [`wiki_index`]); `historical` = superseded page ids.
pub fn wiki_index_in(manifest: &Manifest, historical: &HashSet<String>, budget_tokens: usize) -> WikiIndex {
  let mut ix = WikiIndex {
    vault_id: manifest.vault_id.clone(),
    generation: sat_i64(manifest.generation),
    pages: sat_u32(manifest.entries.len()),
    budget_tokens: sat_u32(budget_tokens),
    historical: sat_u32(historical.len()),
    ..Default::default()
  };
  let (mut types, mut folders, mut domains, mut tags) =
    (HashMap::new(), HashMap::new(), HashMap::new(), HashMap::<String, usize>::new());
  for (id, e) in &manifest.entries {
    match e.role {
      Role::Canonical => ix.canonical = ix.canonical.saturating_add(1),
      Role::Evidence => ix.evidence = ix.evidence.saturating_add(1),
    }
    let ty = if e.meta.page_type.is_empty() { "(none)" } else { e.meta.page_type.as_str() };
    *types.entry(ty.to_string()).or_insert(0) += 1;
    let folder = id.split_once('/').map_or("(top level)", |(f, _)| f);
    *folders.entry(folder.to_string()).or_insert(0) += 1;
    if let Some(d) = e.meta.domain.as_deref().filter(|d| !d.trim().is_empty()) {
      *domains.entry(d.trim().to_string()).or_insert(0) += 1;
    }
    let mut seen_tags: HashSet<String> = HashSet::new();
    for t in &e.meta.tags {
      let t = t.trim().trim_start_matches('#').to_lowercase();
      if !t.is_empty() && seen_tags.insert(t.clone()) {
        *tags.entry(t).or_insert(0) += 1;
      }
    }
  }
  (ix.by_type, ix.by_folder, ix.by_domain, ix.by_tag) = (top(types), top(folders), top(domains), top(tags));
  let (inbound, contradicts) = link_counts(manifest);
  let mut linked: Vec<(&str, usize)> = inbound
    .iter()
    .filter(|(id, _)| manifest.entries[**id].role == Role::Canonical && !historical.contains(**id))
    .map(|(id, n)| (*id, *n))
    .collect();
  linked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
  ix.most_linked = linked.iter().take(MAX_LIST).map(|(id, n)| index_page(manifest, id, *n)).collect();
  let mut recent: Vec<(&String, i64)> = manifest.entries.iter().map(|(id, e)| (id, e.mtime_ns)).collect();
  let k = MAX_LIST.min(recent.len());
  if k > 0 {
    recent.select_nth_unstable_by(k - 1, |a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    recent.truncate(k);
    recent.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
  }
  ix.recent = recent
    .iter()
    .map(|(id, _)| index_page(manifest, id, inbound.get(id.as_str()).copied().unwrap_or(0)))
    .collect();
  let resolutions = ResolutionSet::build(
    &manifest.vault_id,
    manifest
      .entries
      .iter()
      .filter_map(|(id, e)| e.links.resolution.as_ref().map(|r| (id.clone(), (**r).clone()))),
  );
  let mut pairs: Vec<(String, String)> = contradicts
    .into_iter()
    .filter(|(a, b)| resolutions.active_for_pair(a, b).is_none())
    .map(|(a, b)| if a <= b { (a, b) } else { (b, a) })
    .collect();
  pairs.sort();
  pairs.dedup();
  ix.unresolved_conflicts = sat_u32(pairs.len());
  ix.conflicts = pairs.into_iter().take(MAX_CONFLICTS_LISTED).map(|(a, b)| vec![a, b]).collect();
  render(&mut ix);
  ix
}

fn counts_line(label: &str, v: &[Count], n: usize) -> String {
  let items: Vec<String> = v.iter().take(n).map(|c| format!("{} {}", c.name, c.pages)).collect();
  let more = if v.len() > n { ", …" } else { "" };
  format!("{label}: {}{more}", items.join(", "))
}

/// Render `ix.text` within `ix.budget_tokens`: the summary line first, then the sections in the
/// order an agent needs them (types, conflicts, most linked, recent, folders, domains, tags), each
/// entry added while it fits. Lists are filled round by round so a small budget shows the head of
/// every section rather than one whole section.
fn render(ix: &mut WikiIndex) {
  let budget = ix.budget_tokens as usize;
  let head = format!(
    "# Wiki index ({} pages: {} canonical, {} evidence; {} historical; {} unresolved conflicts)",
    ix.pages, ix.canonical, ix.evidence, ix.historical, ix.unresolved_conflicts
  );
  let linked: Vec<String> = ix
    .most_linked
    .iter()
    .map(|p| format!("- {} — {} ({}, {} in)", p.id, p.title, p.page_type, p.inbound))
    .collect();
  let recent: Vec<String> = ix
    .recent
    .iter()
    .map(|p| match &p.date {
      Some(d) => format!("- {} — {} ({d})", p.id, p.title),
      None => format!("- {} — {}", p.id, p.title),
    })
    .collect();
  let conflicts: Vec<String> = ix.conflicts.iter().map(|c| format!("- {}", c.join(" ⟷ "))).collect();
  // (heading, entries); count sections are one line each, grown entry by entry.
  let count_sections: [(&str, &Vec<Count>); 4] =
    [("Types", &ix.by_type), ("Folders", &ix.by_folder), ("Domains", &ix.by_domain), ("Tags", &ix.by_tag)];
  let list_sections: [(&str, &Vec<String>); 3] = [
    ("## Unresolved conflicts (ask the user; wiki_resolve_conflict)", &conflicts),
    ("## Most linked canonical pages", &linked),
    ("## Recently changed", &recent),
  ];
  let mut shown_counts = [0usize; 4];
  let mut shown_lists = [0usize; 3];
  let compose = |sc: &[usize; 4], sl: &[usize; 3]| -> String {
    let mut out = vec![head.clone()];
    for (i, (label, v)) in count_sections.iter().enumerate() {
      if sc[i] > 0 {
        out.push(counts_line(label, v, sc[i]));
      }
    }
    for (i, (heading, v)) in list_sections.iter().enumerate() {
      if sl[i] > 0 {
        out.push(heading.to_string());
        out.extend(v.iter().take(sl[i]).cloned());
      }
    }
    out.join("\n")
  };
  let mut text = compose(&shown_counts, &shown_lists);
  if tokens(&text) > budget {
    let (cut, _) = super::graph_input::cut_at_sentence(&head, budget);
    text = cut.to_string();
  }
  // Round by round: one more entry per section while anything fits.
  let mut grew = true;
  while grew {
    grew = false;
    for s in 0..7 {
      let (mut sc, mut sl) = (shown_counts, shown_lists);
      let room =
        if s < 4 { count_sections[s].1.len() > sc[s] } else { list_sections[s - 4].1.len() > sl[s - 4] };
      if !room {
        continue;
      }
      if s < 4 {
        sc[s] += 1;
      } else {
        sl[s - 4] += 1;
      }
      let candidate = compose(&sc, &sl);
      if tokens(&candidate) <= budget {
        (shown_counts, shown_lists, text, grew) = (sc, sl, candidate, true);
      }
    }
  }
  ix.truncated = count_sections.iter().zip(shown_counts).any(|((_, v), n)| v.len() > n)
    || list_sections.iter().zip(shown_lists).any(|((_, v), n)| v.len() > n);
  ix.tokens_used = sat_u32(tokens(&text));
  ix.text = text;
}

type Key = (std::path::PathBuf, String, u64, usize);

/// Indexes of recent generations (an agent asks once per session; repeated calls are free).
fn cache() -> &'static Mutex<Vec<(Key, Arc<WikiIndex>)>> {
  static CACHE: Mutex<Vec<(Key, Arc<WikiIndex>)>> = Mutex::new(Vec::new());
  &CACHE
}

/// Orientation for the vault `paths` within `max_tokens` (default 500, at most 4,000; 0 is an
/// `invalid_argument`, a larger request is clamped with `budget_clamped`). From the index only:
/// no page file is read. An unavailable index is a diagnostic with an empty index.
pub fn wiki_index(paths: &VaultPaths, max_tokens: Option<u64>) -> Result<WikiIndex> {
  let b = budget("maxTokens", max_tokens, DEFAULT_INDEX_TOKENS, MAX_INDEX_TOKENS)?;
  let clamp = b.diagnostic("maxTokens", MAX_INDEX_TOKENS);
  let snap = match open_snapshot(paths) {
    Ok(s) => s,
    Err(u) => {
      let d = match u {
        Unavailable::NotReady(nr) => RecallDiagnostic::new(nr.code, nr.message),
        Unavailable::Failed(e) => RecallDiagnostic::new("qmd_index_error", format!("index cannot open: {e}")),
      };
      return Ok(WikiIndex {
        budget_tokens: sat_u32(b.tokens),
        diagnostics: clamp.into_iter().chain([d]).collect(),
        ..Default::default()
      });
    }
  };
  let m = &snap.manifest;
  let key: Key = (snap.reader.store.dir.clone(), m.vault_id.clone(), m.generation, b.tokens);
  let cached = {
    let c = cache().lock().unwrap_or_else(|p| p.into_inner());
    c.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone())
  };
  let ix = match cached {
    Some(ix) => ix,
    None => {
      let historical: HashSet<String> = super::graph::supersession_for(&snap.reader.store.dir, m)
        .map(|d| d.superseded.keys().cloned().collect())
        .unwrap_or_default();
      let ix = Arc::new(wiki_index_in(m, &historical, b.tokens));
      let mut c = cache().lock().unwrap_or_else(|p| p.into_inner());
      c.push((key, ix.clone()));
      if c.len() > 8 {
        c.remove(0);
      }
      ix
    }
  };
  let mut out = (*ix).clone();
  out.diagnostics.extend(clamp);
  Ok(out)
}

/// Counts by label as a map (for tests and benches).
pub fn counts_map(v: &[Count]) -> BTreeMap<&str, usize> {
  v.iter().map(|c| (c.name.as_str(), c.pages as usize)).collect()
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::memory::graph::tests::manifest_of;

  fn vault() -> Manifest {
    let rel = |t: &str, ty: &str| format!("relations:\n  - target: {t}\n    type: {ty}\n");
    manifest_of(&[
      (
        "concepts/hub",
        "---\ntype: concept\ntitle: Hub\ntags: [core, Memory]\ndomain: retrieval\n---\nHub.\n",
      ),
      (
        "concepts/a",
        &format!(
          "---\ntype: concept\ntitle: A\ntags: [core]\n{}---\n[[hub]] [[b]]\n",
          rel("concepts/b", "contradicts")
        ),
      ),
      ("concepts/b", "---\ntype: concept\ntitle: B\n---\n[[hub]]\n"),
      ("concepts/old", "---\ntype: concept\ntitle: Old\n---\n[[hub]]\n"),
      (
        "concepts/new",
        &format!(
          "---\ntype: concept\ntitle: New\n{}---\n[[old]] [[old]] [[hub]]\n",
          rel("concepts/old", "supersedes")
        ),
      ),
      (
        "sources/s1",
        "---\ntype: source\ntitle: S1\n---\n[[concepts/old]] [[concepts/old]] [[concepts/hub]]\n",
      ),
      (
        "sources/s2",
        &format!("---\ntype: source\ntitle: S2\n{}---\nNo body link.\n", rel("concepts/hub", "contradicts")),
      ),
    ])
  }

  #[test]
  fn counts_links_conflicts_and_budget() {
    let m = vault();
    let hist: HashSet<String> = ["concepts/old".to_string()].into();
    let ix = wiki_index_in(&m, &hist, DEFAULT_INDEX_TOKENS);
    assert_eq!((ix.pages, ix.canonical, ix.evidence, ix.historical), (7, 5, 2, 1));
    assert_eq!(counts_map(&ix.by_type), BTreeMap::from([("concept", 5), ("source", 2)]));
    assert_eq!(counts_map(&ix.by_folder), BTreeMap::from([("concepts", 5), ("sources", 2)]));
    assert_eq!(counts_map(&ix.by_tag), BTreeMap::from([("core", 2), ("memory", 1)]));
    assert_eq!(counts_map(&ix.by_domain), BTreeMap::from([("retrieval", 1)]));
    // The historical page has more links than b but is not listed; links are counted per page.
    let linked: Vec<(&str, u32)> = ix.most_linked.iter().map(|p| (p.id.as_str(), p.inbound)).collect();
    assert_eq!(linked[0], ("concepts/hub", 5));
    assert!(!linked.iter().any(|(id, _)| *id == "concepts/old"), "{linked:?}");
    assert!(linked.contains(&("concepts/b", 1)));
    // a ⟷ b counts (relation + body link); s2 → hub has no body link and does not.
    assert_eq!(ix.unresolved_conflicts, 1);
    assert_eq!(ix.conflicts[0], ["concepts/a".to_string(), "concepts/b".to_string()]);
    assert!(ix.text.contains("concepts/a ⟷ concepts/b"), "{}", ix.text);
    assert!(ix.tokens_used as usize <= DEFAULT_INDEX_TOKENS && !ix.truncated, "{}", ix.text);
    // A small budget shows the head of the sections and says it is truncated.
    let small = wiki_index_in(&m, &hist, 60);
    assert!(small.tokens_used <= 60 && small.truncated, "{}", small.text);
    assert!(small.text.starts_with("# Wiki index (7 pages"));
    let tiny = wiki_index_in(&m, &hist, 3);
    assert!(tiny.tokens_used <= 3, "{}", tiny.text);
  }
}
