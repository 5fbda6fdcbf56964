//! The whole-vault relation and link lint, kept up to date page by page.
//!
//! [`super::graph::lint_issues`] builds the link graph of the whole vault: seconds at 20k–100k
//! pages, on every reindex that walks the vault even when it finds one changed page. A
//! [`LintState`] holds what the findings are derived from — each page's own findings (stored
//! page-level ones, missing relation targets and body links), the edges carrying `supersedes`,
//! the resolution records, and each page's edges into superseded pages — with a reverse index
//! of which pages depend on which page names. A commit's journal record (the pages it set and
//! deleted) then updates only the pages it changed and the pages whose findings can depend on
//! a page it added or removed; the findings equal the whole-graph lint's exactly (a property
//! test replays random edit sequences against it).
//!
//! Which pages depend on an added or removed page: a link or relation reaches a page only
//! through the page's lowercase last segment ([`name_key`]), so a page is recomputed when an id
//! with one of its keys appears or disappears — the keys of its relation targets and of the
//! links that may reach them (its own findings and `supersedes` edges), and the keys of its
//! links that may reach a superseded page (its citations). When the set of superseded pages
//! changes, every page's citations are recomputed (a scan of the links, no graph).
//!
//! The state lives in the process (one per store and vault, the latest generation): the first
//! walked reindex of a process that *changes* pages (a CLI run) still computes it over the whole
//! vault once. The findings alone are also saved in the store ([`save_findings`]), so a fresh
//! process that reports a generation's lint without changing it (a no-op reindex, status) reads
//! them instead of linting the whole vault.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::link_targets::{link_keys, link_name_key, name_key, page_edges, Resolver};
use super::relations::RelationIssue;
use super::resolve::{Decisions, ResolutionRecord};
use serde::{Deserialize, Serialize};

use crate::store::layout::{StoreDir, ENGINE_NAME, ENGINE_VERSION, INDEX_FORMAT_VERSION};
use crate::store::manifest::{Manifest, ManifestDelta, ManifestEntry};
use crate::store::IndexIssue;

/// Pages filed under the name keys their results depend on, and the keys of each page.
#[derive(Debug, Default)]
struct Deps {
  by_key: HashMap<String, HashSet<String>>,
  of_page: HashMap<String, Vec<String>>,
}

impl Deps {
  fn set(&mut self, page: &str, keys: Vec<String>) {
    self.clear(page);
    if keys.is_empty() {
      return;
    }
    for k in &keys {
      self.by_key.entry(k.clone()).or_default().insert(page.to_string());
    }
    self.of_page.insert(page.to_string(), keys);
  }

  fn clear(&mut self, page: &str) {
    for k in self.of_page.remove(page).unwrap_or_default() {
      if let Some(s) = self.by_key.get_mut(&k) {
        s.remove(page);
        if s.is_empty() {
          self.by_key.remove(&k);
        }
      }
    }
  }

  fn pages<'a>(&'a self, key: &str) -> impl Iterator<Item = &'a String> + 'a {
    self.by_key.get(key).into_iter().flatten()
  }
}

/// What one generation's lint findings are derived from (see the module docs).
#[derive(Debug, Default)]
pub struct LintState {
  vault_id: String,
  generation: u64,
  /// The generation it was computed whole at (then advanced to `generation`).
  built: u64,
  ids: Resolver,
  /// Findings of each page from its own entry and the page ids (pages with findings only).
  local: BTreeMap<String, Vec<RelationIssue>>,
  /// Targets of each page's edges carrying a known `supersedes` relation.
  supersedes: BTreeMap<String, Vec<String>>,
  /// Resolution records by page.
  records: BTreeMap<String, ResolutionRecord>,
  /// The superseded pages `citing` was computed against, and their name keys.
  superseded: BTreeSet<String>,
  superseded_names: HashSet<String>,
  /// Superseded pages each page cites (body edges and relation targets).
  citing: BTreeMap<String, Vec<String>>,
  /// Pages whose `local` and `supersedes` depend on ids of a name key.
  local_deps: Deps,
  /// Pages whose `citing` depends on ids of a name key.
  citing_deps: Deps,
  /// The findings of this generation.
  findings: Arc<Vec<IndexIssue>>,
}

/// How a [`LintState`] reached its generation (what a test checks it exercised).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
  /// Only the changed pages and their dependents were recomputed.
  Incremental,
  /// The superseded pages changed: every page's citations were recomputed.
  Citations,
}

impl LintState {
  /// The state of `manifest`, computed over every page.
  pub fn build(manifest: &Manifest) -> LintState {
    let mut s = LintState {
      vault_id: manifest.vault_id.clone(),
      generation: manifest.generation,
      built: manifest.generation,
      ids: Resolver::new(manifest),
      ..Default::default()
    };
    for (id, e) in &manifest.entries {
      s.refresh_local(id, Some(e));
    }
    let superseded = s.decisions(manifest).superseded;
    s.recite_all(manifest, superseded.keys());
    let decisions = s.decisions(manifest);
    s.finish(manifest, decisions);
    s
  }

  /// The generation whose findings this state holds.
  pub fn generation(&self) -> u64 {
    self.generation
  }

  /// The findings, capped like [`super::graph::lint_issues`] (which they equal).
  pub fn findings(&self) -> Arc<Vec<IndexIssue>> {
    self.findings.clone()
  }

  /// Advance to `manifest`, the result of applying `delta` to this state's manifest. When the
  /// superseded pages change, every page's citations are recomputed (O(links of the vault)) if
  /// `rescan`, else `None` is returned and the state is left unusable (drop it).
  pub fn advance(&mut self, delta: &ManifestDelta, manifest: &Manifest, rescan: bool) -> Option<Step> {
    let touched: BTreeSet<&String> = delta.set.keys().chain(&delta.del).collect();
    // Ids appearing or disappearing change what links and relations elsewhere resolve to.
    let mut keys: BTreeSet<String> = BTreeSet::new();
    for id in &touched {
      match (self.ids.contains(id), manifest.entries.contains_key(*id)) {
        (false, true) => self.ids.insert(id),
        (true, false) => self.ids.remove(id),
        _ => continue,
      }
      keys.insert(name_key(id));
    }
    let mut affected: BTreeSet<String> = touched.iter().map(|id| (*id).clone()).collect();
    for k in &keys {
      affected.extend(self.local_deps.pages(k).cloned());
      affected.extend(self.citing_deps.pages(k).cloned());
    }
    for id in &affected {
      let entry = manifest.entries.get(id).map(|e| &**e);
      self.refresh_local(id, entry);
      self.refresh_citing(id, entry);
    }
    let mut decisions = self.decisions(manifest);
    let step = if decisions.superseded.keys().eq(self.superseded.iter()) {
      Step::Incremental
    } else if rescan {
      self.recite_all(manifest, decisions.superseded.keys());
      decisions = self.decisions(manifest);
      Step::Citations
    } else {
      return None;
    };
    self.generation = manifest.generation;
    self.finish(manifest, decisions);
    Some(step)
  }

  /// Recompute a page's own findings, `supersedes` edges and record (`None`: removed).
  fn refresh_local(&mut self, id: &str, entry: Option<&ManifestEntry>) {
    self.local.remove(id);
    self.supersedes.remove(id);
    self.records.remove(id);
    let Some(e) = entry else {
      self.local_deps.clear(id);
      return;
    };
    let pl = &e.links;
    if let Some(r) = pl.resolution.as_deref() {
      self.records.insert(id.to_string(), r.clone());
    }
    if pl.relations.is_empty() {
      // Without relations the findings are the stored page-level ones: no id can change them.
      self.local_deps.clear(id);
      if !pl.issues.is_empty() {
        self.local.insert(id.to_string(), pl.issues.clone());
      }
      return;
    }
    let (edges, issues) = page_edges(&self.ids, id, pl, |_, _| {});
    let targets: Vec<String> = edges
      .into_iter()
      .filter(|e| e.relations.iter().any(|r| r.relation_type == "supersedes"))
      .map(|e| e.to)
      .collect();
    if !targets.is_empty() {
      self.supersedes.insert(id.to_string(), targets);
    }
    if !issues.is_empty() {
      self.local.insert(id.to_string(), issues);
    }
    // The relations' targets, and every key of a link that may reach one of them.
    let mut keys: Vec<String> = pl.relations.iter().map(|r| name_key(&r.target)).collect();
    keys.sort();
    keys.dedup();
    let mut link_deps: Vec<String> = Vec::new();
    for l in pl.links.iter() {
      if link_name_key(l).is_some_and(|k| keys.binary_search_by(|x| x.as_str().cmp(&k)).is_err()) {
        continue;
      }
      let lk = link_keys(id, l);
      if lk.iter().any(|k| keys.binary_search(k).is_ok()) {
        link_deps.extend(lk);
      }
    }
    keys.extend(link_deps);
    keys.sort();
    keys.dedup();
    self.local_deps.set(id, keys);
  }

  /// Recompute the superseded pages (of `self.superseded`) page `id` cites.
  fn refresh_citing(&mut self, id: &str, entry: Option<&ManifestEntry>) {
    self.citing.remove(id);
    let Some(e) = entry else {
      self.citing_deps.clear(id);
      return;
    };
    let mut cited: Vec<String> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    if !self.superseded.is_empty() {
      for l in e.links.links.iter() {
        if link_name_key(l).is_some_and(|k| !self.superseded_names.contains(k.as_ref())) {
          continue;
        }
        let lk = link_keys(id, l);
        if !lk.iter().any(|k| self.superseded_names.contains(k)) {
          continue;
        }
        if let Ok(to) = self.ids.resolve(id, l) {
          if to != id && self.superseded.contains(to) {
            cited.push(to.to_string());
          }
        }
        keys.extend(lk);
      }
      cited.extend(
        e.links.relations.iter().filter(|r| self.superseded.contains(&r.target)).map(|r| r.target.clone()),
      );
    }
    cited.sort();
    cited.dedup();
    keys.sort();
    keys.dedup();
    self.citing_deps.set(id, keys);
    if !cited.is_empty() {
      self.citing.insert(id.to_string(), cited);
    }
  }

  /// Every page's citations of the pages in `superseded`.
  fn recite_all<'a>(&mut self, manifest: &Manifest, superseded: impl Iterator<Item = &'a String>) {
    self.superseded = superseded.cloned().collect();
    self.superseded_names = self.superseded.iter().map(|s| name_key(s)).collect();
    self.citing.clear();
    self.citing_deps = Deps::default();
    for (id, e) in &manifest.entries {
      self.refresh_citing(id, Some(e));
    }
  }

  /// The decisions (records, historical pages; citations against `self.superseded`).
  fn decisions(&self, manifest: &Manifest) -> Decisions {
    let records = self.records.iter().map(|(p, r)| (p.clone(), r.clone()));
    let supersedes =
      self.supersedes.iter().flat_map(|(from, tos)| tos.iter().map(move |to| (from.clone(), to.clone())));
    let (resolutions, superseded) =
      Decisions::supersession(&self.vault_id, records, |id| manifest.entries.contains_key(id), supersedes);
    let citing = self.citing.iter().flat_map(|(from, c)| c.iter().map(move |s| (from.clone(), s.clone())));
    Decisions::with_citations(resolutions, superseded, citing)
  }

  /// The findings: each page's own, then its decisions' (the order [`super::graph::LinkGraph`]
  /// lists them in).
  fn finish(&mut self, manifest: &Manifest, decisions: Decisions) {
    let mut decided: BTreeMap<String, Vec<RelationIssue>> = BTreeMap::new();
    for (page, issue) in decisions.lint() {
      decided.entry(page).or_default().push(issue);
    }
    // Both maps in page order, merged.
    let (mut own, mut dec) = (self.local.iter().peekable(), decided.iter().peekable());
    let none: &[RelationIssue] = &[];
    let pages = std::iter::from_fn(|| {
      let take_own = match (own.peek(), dec.peek()) {
        (None, None) => return None,
        (Some(_), None) => true,
        (None, Some(_)) => false,
        (Some((a, _)), Some((b, _))) => a <= b,
      };
      let take_dec = match (own.peek(), dec.peek()) {
        (Some((a, _)), Some((b, _))) => b <= a,
        (_, d) => d.is_some() && !take_own,
      };
      let o = if take_own { own.next() } else { None };
      let d = if take_dec { dec.next() } else { None };
      let page = o.map(|(p, _)| p).or(d.map(|(p, _)| p))?;
      Some((page, o.map_or(none, |(_, v)| v.as_slice()), d.map_or(none, |(_, v)| v.as_slice())))
    });
    let all = pages.flat_map(|(p, a, b)| a.iter().chain(b).map(move |i| (p.as_str(), i)));
    self.findings = Arc::new(lint_list(manifest, all));
  }
}

/// `lint.json` of a store: the findings of one generation of one vault.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SavedFindings {
  /// The engine that computed them (lint rules change between versions).
  engine: String,
  vault_id: String,
  generation: u64,
  findings: Vec<IndexIssue>,
}

fn lint_file(store: &Path) -> PathBuf {
  StoreDir::new(store.to_path_buf()).lint_file()
}

fn engine_label() -> String {
  format!("{ENGINE_NAME} {ENGINE_VERSION} format {INDEX_FORMAT_VERSION}")
}

/// Save `findings`, the lint of `manifest`'s generation, in `store` (`lint.json`, replacing the
/// findings of an earlier generation). Best effort: the file is a cache ([`saved_findings`] checks
/// it), so a store that cannot be written (a read-only copy) only loses the shortcut.
pub(crate) fn save_findings(store: &Path, manifest: &Manifest, findings: &[IndexIssue]) {
  let saved = SavedFindings {
    engine: engine_label(),
    vault_id: manifest.vault_id.clone(),
    generation: manifest.generation,
    findings: findings.to_vec(),
  };
  if let Ok(bytes) = serde_json::to_vec(&saved) {
    let _ = crate::fsutil::replace_cache_file(&lint_file(store), &bytes);
  }
}

/// The findings [`save_findings`] saved in `store` for `manifest`'s vault and generation by this
/// engine version, if any. Generations of a store only grow and a generation's manifest never
/// changes once committed, so a file naming it holds its findings; anything else (another
/// generation, vault or engine, a file that does not parse) is `None`: lint it.
pub(crate) fn saved_findings(store: &Path, manifest: &Manifest) -> Option<Vec<IndexIssue>> {
  match crate::fsutil::read_json::<SavedFindings>(&lint_file(store)) {
    crate::fsutil::JsonFile::Valid(s)
      if s.generation == manifest.generation
        && s.vault_id == manifest.vault_id
        && s.engine == engine_label() =>
    {
      Some(s.findings)
    }
    _ => None,
  }
}

type StateKey = (PathBuf, String);

/// The latest lint state per (store directory, vault), at most [`KEEP_STATES`].
static STATES: Mutex<Vec<(StateKey, LintState)>> = Mutex::new(Vec::new());

/// Lint states kept per process (not fitted: one per store a process indexes, and a store being
/// replaced by a forced rebuild).
const KEEP_STATES: usize = 2;

/// Take the state of `store`/`vault` out of the process's keeping when it is at `generation`.
pub(crate) fn take_state(store: &Path, vault: &str, generation: u64) -> Option<LintState> {
  let mut states = STATES.lock().unwrap_or_else(|p| p.into_inner());
  let i = states.iter().position(|((s, v), st)| s == store && v == vault && st.generation == generation)?;
  Some(states.remove(i).1)
}

/// The generation of the state the process keeps for `store`/`vault`, and the generation it was
/// computed whole at (equal unless commits advanced it page by page).
pub fn kept_state(store: &Path, vault: &str) -> Option<(u64, u64)> {
  let states = STATES.lock().unwrap_or_else(|p| p.into_inner());
  states.iter().find(|((s, v), _)| s == store && v == vault).map(|(_, st)| (st.generation, st.built))
}

/// Keep `state` as the state of `store` (unless one of a later generation is kept).
pub(crate) fn keep_state(store: &Path, state: LintState) {
  let mut states = STATES.lock().unwrap_or_else(|p| p.into_inner());
  let key = (store.to_path_buf(), state.vault_id.clone());
  if let Some(i) = states.iter().position(|(k, _)| *k == key) {
    if states[i].1.generation > state.generation {
      return;
    }
    states.remove(i);
  }
  states.push((key, state));
  if states.len() > KEEP_STATES {
    states.remove(0);
  }
}

/// Lint findings reported at most per reindex or status (not fitted: keeps results small on a
/// vault with thousands of broken relations; the rest are counted in one summary issue).
pub const MAX_LINT_REPORTED: usize = 200;

/// The first [`MAX_LINT_REPORTED`] findings plus one `relation_lint_truncated` summary counting
/// the rest (shared by the whole-vault and the changed-pages lint).
pub(crate) fn capped<T>(
  mut found: impl Iterator<Item = T>,
  issue: impl Fn(T) -> crate::store::IndexIssue,
) -> Vec<crate::store::IndexIssue> {
  let mut out: Vec<crate::store::IndexIssue> = found.by_ref().take(MAX_LINT_REPORTED).map(issue).collect();
  let extra = found.count();
  if extra > 0 {
    out.push(crate::store::IndexIssue::new(
      "relation_lint_truncated",
      format!("{extra} more relation/link findings not listed"),
    ));
  }
  out
}

/// `(page id, finding)` pairs as index issues (path = the page's file), capped.
pub(crate) fn lint_list<'a>(
  manifest: &Manifest,
  found: impl Iterator<Item = (&'a str, &'a RelationIssue)>,
) -> Vec<crate::store::IndexIssue> {
  capped(found, |(id, i)| {
    let path = manifest.entries.get(id).map_or_else(|| format!("{id}.md"), |e| e.rel_path.clone());
    crate::store::IndexIssue::new(&i.code, i.message.clone()).at(path)
  })
}

#[cfg(test)]
mod tests;
