//! The resolution read model: the valid records of a vault and the active one of each pair
//! ([`ResolutionSet`]), and what they and declared `supersedes` relations mean for its pages
//! ([`Decisions`]: historical pages and the pages citing them).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::record::{resolution_id, ResolutionRecord};
use crate::memory::relations::RelationIssue;
use crate::store::manifest::Manifest;

/// The spec's `ConflictResolution` (structured result and `bundle.resolution`).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConflictResolution {
  /// Resolution id.
  pub id: String,
  /// Vault id.
  pub vault_id: String,
  /// The user-endorsed page.
  pub selected_page_id: String,
  /// The other page.
  pub other_page_id: String,
  /// `supersedes`, `qualifies` or `applies_under`.
  #[cfg_attr(feature = "napi", napi(ts_type = "'supersedes' | 'qualifies' | 'applies_under'"))]
  pub relation: String,
  /// Scope of `applies_under`.
  pub scope: Option<String>,
  /// `active`, or `replaced` for a record that a later one replaces.
  #[cfg_attr(feature = "napi", napi(ts_type = "'active' | 'replaced'"))]
  pub status: String,
  /// Always `user`.
  #[cfg_attr(feature = "napi", napi(ts_type = "'user'"))]
  pub decided_by: String,
  /// RFC 3339 time of the decision.
  pub decided_at: String,
  /// The resolution this one replaces.
  pub replaces: Option<String>,
  /// Page id of the resolution page.
  pub page_id: String,
}

impl ConflictResolution {
  pub(crate) fn of(r: &ResolutionRecord, vault_id: &str, page_id: &str, active: bool) -> Self {
    ConflictResolution {
      id: r.id.clone(),
      vault_id: vault_id.to_string(),
      selected_page_id: r.selected.clone(),
      other_page_id: r.other.clone(),
      relation: r.relation.clone(),
      scope: r.scope.clone(),
      status: if active { "active" } else { "replaced" }.into(),
      decided_by: r.decided_by.clone(),
      decided_at: r.decided_at.clone(),
      replaces: r.replaces.clone(),
      page_id: page_id.to_string(),
    }
  }
}

pub(crate) fn pair_key(a: &str, b: &str) -> (String, String) {
  if a <= b {
    (a.to_string(), b.to_string())
  } else {
    (b.to_string(), a.to_string())
  }
}

/// The valid resolution records of one vault and the active one of each pair.
#[derive(Debug, Default, Clone)]
pub struct ResolutionSet {
  vault_id: String,
  /// Valid records by id: (page id, record).
  records: BTreeMap<String, (String, ResolutionRecord)>,
  /// Active record id per unordered pair.
  active: HashMap<(String, String), String>,
  /// Active record ids per claim page.
  by_page: HashMap<String, Vec<String>>,
  /// Findings as (page id, issue).
  pub(crate) issues: Vec<(String, RelationIssue)>,
}

impl ResolutionSet {
  /// Build from `(page id, record)` pairs (page order). Records whose id does not match their
  /// content are reported and ignored; the head of each pair's replacement chain is active (on a
  /// fork or cycle: the latest decision, reported).
  pub fn build(vault_id: &str, items: impl IntoIterator<Item = (String, ResolutionRecord)>) -> Self {
    let mut s = ResolutionSet { vault_id: vault_id.to_string(), ..Default::default() };
    for (page, r) in items {
      let expect = resolution_id(
        vault_id,
        &r.selected,
        &r.other,
        &r.relation,
        r.scope.as_deref(),
        r.replaces.as_deref(),
      );
      if r.id != expect {
        s.issues.push((
          page,
          RelationIssue::new(
            "resolution_invalid",
            format!("resolution.id {} does not match its content (expected {expect}); the record is ignored (resolution pages are immutable: record a new decision instead of editing one)", r.id),
          ),
        ));
        continue;
      }
      if let Some((first, _)) = s.records.get(&r.id) {
        s.issues.push((
          page,
          RelationIssue::new(
            "resolution_duplicate",
            format!("repeats resolution {} of {first}; ignored", r.id),
          ),
        ));
        continue;
      }
      s.records.insert(r.id.clone(), (page, r));
    }
    let mut groups: HashMap<(String, String), Vec<String>> = HashMap::new();
    let mut invalid: HashSet<String> = HashSet::new();
    for (id, (page, r)) in &s.records {
      if let Some(rep) = &r.replaces {
        match s.records.get(rep) {
          Some((_, old)) if pair_key(&old.selected, &old.other) != pair_key(&r.selected, &r.other) => {
            s.issues.push((
              page.clone(),
              RelationIssue::new(
                "resolution_invalid_replaces",
                format!("replaces {rep}, a resolution of another pair; the record is ignored"),
              ),
            ));
            invalid.insert(id.clone());
            continue;
          }
          Some(_) => {}
          None => s.issues.push((
            page.clone(),
            RelationIssue::new(
              "resolution_replaces_missing",
              format!("replaces {rep}, which no page records"),
            ),
          )),
        }
      }
      groups.entry(pair_key(&r.selected, &r.other)).or_default().push(id.clone());
    }
    for (pair, mut ids) in groups {
      ids.retain(|id| !invalid.contains(id));
      if ids.is_empty() {
        continue;
      }
      let replaced: HashSet<&str> = ids.iter().filter_map(|id| s.records[id].1.replaces.as_deref()).collect();
      let heads: Vec<&String> = ids.iter().filter(|id| !replaced.contains(id.as_str())).collect();
      let latest = |c: &[&String]| -> String {
        c.iter()
          .max_by_key(|id| {
            (crate::util::time::parse_timestamp(&s.records[**id].1.decided_at), (**id).clone())
          })
          .map(|id| (*id).clone())
          .expect("non-empty")
      };
      let all: Vec<&String> = ids.iter().collect();
      let head = match heads.len() {
        1 => heads[0].clone(),
        0 => latest(&all),
        _ => latest(&heads),
      };
      if heads.len() != 1 {
        for id in ids.iter().filter(|id| **id != head && (heads.is_empty() || heads.contains(id))) {
          s.issues.push((
            s.records[id].0.clone(),
            RelationIssue::new(
              "resolution_fork",
              format!(
                "{} and {head} both claim to be the current decision for {} / {}; the later one ({head}) is used — record a new decision with replaces: {head}",
                id, pair.0, pair.1
              ),
            ),
          ));
        }
      }
      s.by_page.entry(pair.0.clone()).or_default().push(head.clone());
      s.by_page.entry(pair.1.clone()).or_default().push(head.clone());
      s.active.insert(pair, head);
    }
    for v in s.by_page.values_mut() {
      v.sort();
    }
    s
  }

  /// The active record of the unordered pair `{a, b}`.
  pub fn active_for_pair(&self, a: &str, b: &str) -> Option<&ResolutionRecord> {
    self.active.get(&pair_key(a, b)).map(|id| &self.records[id].1)
  }

  /// Active records involving `page`.
  pub fn active_for(&self, page: &str) -> impl Iterator<Item = &ResolutionRecord> {
    self.by_page.get(page).into_iter().flatten().map(|id| &self.records[id].1)
  }

  /// The record with `id` and its page id.
  pub fn get(&self, id: &str) -> Option<(&str, &ResolutionRecord)> {
    self.records.get(id).map(|(p, r)| (p.as_str(), r))
  }

  /// True when `page_id` is a (valid) resolution page.
  pub fn is_record_page(&self, page_id: &str) -> bool {
    self.records.values().any(|(p, _)| p == page_id)
  }

  /// The structured form of record `id`.
  pub fn describe(&self, id: &str) -> Option<ConflictResolution> {
    let (page, r) = self.records.get(id)?;
    let active = self.active_for_pair(&r.selected, &r.other).is_some_and(|a| a.id == r.id);
    Some(ConflictResolution::of(r, &self.vault_id, page, active))
  }

  /// Number of valid records.
  pub fn len(&self) -> usize {
    self.records.len()
  }

  /// True when there is no valid record.
  pub fn is_empty(&self) -> bool {
    self.records.is_empty()
  }
}

/// Why a page is historical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Supersession {
  /// The superseding page.
  pub by: String,
  /// The user resolution that decided it (`None`: a declared `supersedes` relation).
  pub resolution: Option<String>,
}

impl Supersession {
  /// Warning text on the historical page.
  pub fn warning(&self) -> String {
    match &self.resolution {
      Some(r) => format!("superseded by {} (user resolution {r})", self.by),
      None => format!("superseded by {}", self.by),
    }
  }
}

/// What resolutions and `supersedes` relations mean for a vault's pages.
#[derive(Debug, Default, Clone)]
pub struct Decisions {
  /// Resolution records and the active one per pair.
  pub resolutions: ResolutionSet,
  /// Historical pages: page → who supersedes it.
  pub superseded: BTreeMap<String, Vec<Supersession>>,
  /// Pages citing a historical page: page → (cited page, its superseder).
  pub cites_superseded: BTreeMap<String, Vec<(String, String)>>,
}

impl Decisions {
  /// The decisions [`crate::memory::graph::LinkGraph::build`] derives from its graph, without building it:
  /// only the links of pages declaring `supersedes` and the links that can reach a superseded
  /// page (their last path segment names it) are resolved. What recall needs per generation
  /// (warnings of the returned pages), at a fraction of the whole graph's cost.
  pub fn derive_direct(manifest: &Manifest) -> Decisions {
    let r = crate::memory::link_targets::Resolver::new(manifest);
    let mut supersedes = Vec::new();
    for (id, e) in &manifest.entries {
      for rel in e.links.relations.iter().filter(|rel| rel.relation_type == "supersedes" && rel.is_known()) {
        // An edge carries the relation when the page also links to the target in its body.
        let Some(target) = r.exact(&rel.target).filter(|t| *t != id) else { continue };
        if e.links.links.iter().any(|l| r.resolve(id, l) == Ok(target)) {
          supersedes.push((id.clone(), target.to_string()));
        }
      }
    }
    Self::assemble(manifest, supersedes, |superseded| {
      // A link resolves to a page only when its name key is the page's (links whose target
      // ends in `/`, `.` or `..` have none: those are resolved anyway).
      let names: HashSet<String> =
        superseded.keys().map(|s| crate::memory::link_targets::name_key(s)).collect();
      let mut citing = Vec::new();
      if names.is_empty() {
        return citing;
      }
      for (id, e) in &manifest.entries {
        for l in e.links.links.iter() {
          if crate::memory::link_targets::link_name_key(l).is_some_and(|k| !names.contains(k.as_ref())) {
            continue;
          }
          if let Ok(to) = r.resolve(id, l) {
            if to != id && superseded.contains_key(to) {
              citing.push((id.clone(), to.to_string()));
            }
          }
        }
      }
      citing
    })
  }

  /// Decisions from the resolution records of `manifest`, the `(from, to)` edges carrying a
  /// `supersedes` relation, and the `(from, to)` edges into superseded pages (`citing`).
  pub(crate) fn assemble(
    manifest: &Manifest,
    supersedes: Vec<(String, String)>,
    citing: impl FnOnce(&BTreeMap<String, Vec<Supersession>>) -> Vec<(String, String)>,
  ) -> Decisions {
    let records = manifest
      .entries
      .iter()
      .filter_map(|(id, e)| e.links.resolution.as_deref().map(|r| (id.clone(), r.clone())));
    let (resolutions, superseded) =
      Self::supersession(&manifest.vault_id, records, |id| manifest.entries.contains_key(id), supersedes);
    let mut cited = citing(&superseded);
    // Typed relations without a body link cite too (lint reports the missing link separately).
    for (id, e) in &manifest.entries {
      for rel in &e.links.relations {
        if superseded.contains_key(&rel.target) {
          cited.push((id.clone(), rel.target.clone()));
        }
      }
    }
    Self::with_citations(resolutions, superseded, cited)
  }

  /// The resolution records of a vault (`(page id, record)` in page order; their findings
  /// included) and its historical pages, from the records, which pages exist, and the `(from,
  /// to)` edges carrying a `supersedes` relation (any order).
  pub(crate) fn supersession(
    vault_id: &str,
    records: impl IntoIterator<Item = (String, ResolutionRecord)>,
    exists: impl Fn(&str) -> bool,
    supersedes: impl IntoIterator<Item = (String, String)>,
  ) -> (ResolutionSet, BTreeMap<String, Vec<Supersession>>) {
    let mut resolutions = ResolutionSet::build(vault_id, records);
    let mut issues = resolutions.issues.clone();
    for (page, r) in resolutions.records.values() {
      for claim in [&r.selected, &r.other] {
        if !exists(claim) {
          issues.push((
            page.clone(),
            RelationIssue::new(
              "resolution_missing_page",
              format!("{claim} is no page of this vault; the resolution has no effect until it exists"),
            ),
          ));
        }
      }
    }
    let mut superseded: BTreeMap<String, Vec<Supersession>> = BTreeMap::new();
    for id in resolutions.active.values() {
      let r = &resolutions.records[id].1;
      if r.relation == "supersedes" && exists(&r.other) {
        superseded
          .entry(r.other.clone())
          .or_default()
          .push(Supersession { by: r.selected.clone(), resolution: Some(r.id.clone()) });
      }
    }
    for (from, to) in supersedes {
      if resolutions.active_for_pair(&from, &to).is_none() {
        superseded.entry(to).or_default().push(Supersession { by: from, resolution: None });
      }
    }
    for v in superseded.values_mut() {
      v.sort_by(|a, b| (&a.by, &a.resolution).cmp(&(&b.by, &b.resolution)));
      v.dedup_by(|a, b| a.by == b.by);
    }
    resolutions.issues = issues;
    (resolutions, superseded)
  }

  /// The decisions, given the `(citing page, superseded page)` pairs of every body edge into a
  /// superseded page and every relation naming one (any order, repeats allowed): a page does
  /// not cite itself, its own superseder, or anything from a resolution record.
  pub(crate) fn with_citations(
    resolutions: ResolutionSet,
    superseded: BTreeMap<String, Vec<Supersession>>,
    citing: impl IntoIterator<Item = (String, String)>,
  ) -> Decisions {
    let mut cites: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for (from, cited) in citing {
      let Some(sup) = superseded.get(&cited) else { continue };
      if from == cited || sup.iter().any(|s| s.by == from) || resolutions.is_record_page(&from) {
        continue;
      }
      let v = cites.entry(from).or_default();
      if !v.iter().any(|(c, _)| *c == cited) {
        v.push((cited, sup[0].by.clone()));
      }
    }
    for v in cites.values_mut() {
      v.sort();
    }
    Decisions { resolutions, superseded, cites_superseded: cites }
  }

  /// Lint findings: invalid / forked / dangling resolution records and `cites_superseded`.
  pub fn lint(&self) -> Vec<(String, RelationIssue)> {
    let mut out = self.resolutions.issues.clone();
    for (page, cited) in &self.cites_superseded {
      for (c, by) in cited {
        out.push((
          page.clone(),
          RelationIssue::new(
            "cites_superseded",
            format!("cites {c}, which is superseded by {by}; check whether it should cite {by}"),
          ),
        ));
      }
    }
    out
  }

  /// Warning texts of a recalled page: `superseded by …` (historical) and `cites_superseded: …`.
  pub fn warnings(&self, page: &str) -> Vec<String> {
    let mut w: Vec<String> =
      self.superseded.get(page).into_iter().flatten().map(Supersession::warning).collect();
    for (c, by) in self.cites_superseded.get(page).into_iter().flatten() {
      w.push(format!("cites_superseded: cites {c}, superseded by {by}"));
    }
    w
  }

  /// Warning codes of a recalled page for `recallWiki` (`superseded`, `cites_superseded`).
  pub fn warning_codes(&self, page: &str) -> Vec<&'static str> {
    let mut w = Vec::new();
    if self.superseded.contains_key(page) {
      w.push("superseded");
    }
    if self.cites_superseded.contains_key(page) {
      w.push("cites_superseded");
    }
    w
  }
}

/// True when some page of `manifest` records a resolution or declares `supersedes`: only then
/// can a page be historical or cite one (a scan of the entries, no graph build — `recallWiki`
/// skips building the link graph of a vault where this is false).
pub fn may_supersede(manifest: &Manifest) -> bool {
  manifest.entries.values().any(|e| {
    e.links.resolution.is_some() || e.links.relations.iter().any(|r| r.relation_type == "supersedes")
  })
}

/// A competing pair recall found without a user resolution: the agent should ask the user which
/// applies and record the answer with `resolveConflict` (exact page ids here).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnresolvedConflict {
  /// `project` or `personal`.
  #[cfg_attr(feature = "napi", napi(ts_type = "'project' | 'personal'"))]
  pub vault: String,
  /// Vault id.
  pub vault_id: String,
  /// The two page ids (the bundle's seed first).
  pub page_ids: Vec<String>,
  /// The declared relation that makes them compete (`contradicts`).
  pub relation: String,
}
