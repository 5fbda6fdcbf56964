//! User conflict resolution (spec "Contradictions and User Resolution"): `resolveConflict`
//! writes one immutable resolution page under `wiki/analyses/`; the index reads such pages back
//! as [`ResolutionRecord`]s, and [`Decisions`] derives from them (and from declared `supersedes`
//! relations) what recall and lint need — the active resolution of each pair of claims, which
//! pages are historical, and which pages cite a superseded page (`cites_superseded`).
//!
//! Rules of a record: `selected` is the user-endorsed claim and the relation runs selected →
//! other. `supersedes`: selected is current, other historical (its `status` is never rewritten);
//! `qualifies`: both current, selected narrows other; `applies_under`: selected applies inside
//! `scope` (required), other outside it. `scope` is forbidden for the other two relations (the
//! rule of the `relations` extension). A record's id is a hash of vault id, selected, other,
//! relation, normalized scope and replaced id; a changed choice names the active record of the
//! same unordered pair in `replaces`, and the chain's head is the active resolution.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

use super::bundle::{Linked, MemoryBundle, MemoryItem};
use super::graph::LinkGraph;
use super::relations::{normalize_target, RelationIssue};
use crate::error::{Error, Result};
use crate::events_lock::{self, EXPLICIT_WAIT};
use crate::store::manifest::{sha256_hex, Manifest};
use crate::store::{Component, IndexIssue, ReindexOptions, Scope};
use crate::vault::frontmatter::YamlValue;
use crate::vault::{Page, VaultPaths};

/// Stable error codes of `resolveConflict` (`err.code`).
pub mod codes {
  /// `relation` is not `supersedes`, `qualifies` or `applies_under`.
  pub const RELATION_INVALID: &str = "resolution_relation_invalid";
  /// A page id is empty or not a normalized folder-qualified page id.
  pub const PAGE_ID_INVALID: &str = "resolution_page_id_invalid";
  /// `selectedPageId` and `otherPageId` name the same page.
  pub const SAME_PAGE: &str = "resolution_same_page";
  /// A page does not exist in the chosen vault (nor in the other one).
  pub const PAGE_MISSING: &str = "resolution_page_missing";
  /// A page exists only in the other vault: resolutions never cross vaults.
  pub const CROSS_VAULT: &str = "resolution_cross_vault";
  /// A claim page cannot be parsed (malformed frontmatter, binary) or is itself a resolution.
  pub const PAGE_INVALID: &str = "resolution_page_invalid";
  /// `scope` missing for `applies_under`, given for another relation, or too long.
  pub const SCOPE_INVALID: &str = "resolution_scope_invalid";
  /// `replaces` is not the active resolution of the same unordered pair.
  pub const REPLACES_INVALID: &str = "resolution_replaces_invalid";
  /// The pair already has a different active resolution: a changed choice names it in `replaces`.
  pub const REPLACES_REQUIRED: &str = "resolution_replaces_required";
  /// The chosen vault does not exist (not bootstrapped, or `project` while the personal vault is
  /// active).
  pub const VAULT_UNAVAILABLE: &str = "resolution_vault_unavailable";
  /// `rationale` is longer than [`super::MAX_RATIONALE_CHARS`].
  pub const RATIONALE_TOO_LONG: &str = "resolution_rationale_too_long";
  /// Warning (not an error): the page is committed but its `conflict_selected` feedback event
  /// could not be appended to `meta/events.jsonl`.
  pub const FEEDBACK_NOT_RECORDED: &str = "resolution_feedback_not_recorded";
}

/// The three relations a user may choose.
pub const RELATIONS: &[&str] = &["supersedes", "qualifies", "applies_under"];
/// `category` of a resolution page.
pub const CATEGORY: &str = "conflict-resolution";
/// Folder of resolution pages under `wiki/`.
pub const FOLDER: &str = "analyses";
/// Longest scope in characters. Not fitted: a scope is a short phrase; the bound keeps ids and
/// frontmatter small.
pub const MAX_SCOPE_CHARS: usize = 500;
/// Longest rationale in characters. Not fitted: a bound on the page size.
pub const MAX_RATIONALE_CHARS: usize = 20_000;
/// Hex digits of the hash in a resolution id (128 bits).
const ID_HEX: usize = 32;

fn reject(code: &'static str, message: impl Into<String>) -> Error {
  Error::Resolution { code, message: message.into() }
}

/// The `resolution` frontmatter of a resolution page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolutionRecord {
  /// `resolution-<32 hex>`: the semantic hash (also the file name).
  pub id: String,
  /// The user-endorsed page id.
  pub selected: String,
  /// The other page id.
  pub other: String,
  /// `supersedes`, `qualifies` or `applies_under`.
  pub relation: String,
  /// Scope of `applies_under`.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub scope: Option<String>,
  /// Always `user`.
  pub decided_by: String,
  /// RFC 3339 time of the decision.
  pub decided_at: String,
  /// Id of the resolution this one replaces.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub replaces: Option<String>,
}

/// Scope as stored: NFC, whitespace collapsed, trimmed; `None` when empty.
pub fn clean_scope(scope: Option<&str>) -> Option<String> {
  let s: String = scope?.nfc().collect::<String>().split_whitespace().collect::<Vec<_>>().join(" ");
  (!s.is_empty()).then_some(s)
}

/// Scope as hashed: [`clean_scope`] lowercased (so `Offline` and ` offline ` are one decision).
pub fn normalized_scope(scope: Option<&str>) -> String {
  clean_scope(scope).map(|s| s.to_lowercase()).unwrap_or_default()
}

/// The semantic id of a decision: a hash of vault id, selected and other page id (in that order:
/// the relation has a direction), relation, normalized scope and replaced id.
pub fn resolution_id(
  vault_id: &str,
  selected: &str,
  other: &str,
  relation: &str,
  scope: Option<&str>,
  replaces: Option<&str>,
) -> String {
  let key = [
    "llm-wiki-resolution/1",
    vault_id,
    selected,
    other,
    relation,
    &normalized_scope(scope),
    replaces.unwrap_or(""),
  ]
  .join("\u{0}");
  format!("resolution-{}", &sha256_hex(key.as_bytes())[..ID_HEX])
}

/// Page id of the resolution page of `id`.
pub fn page_id_of(id: &str) -> String {
  format!("{FOLDER}/{id}")
}

/// A record's fields, checked against the rules (except the id, which needs the vault id).
fn check_fields(r: &ResolutionRecord) -> std::result::Result<(), String> {
  if !RELATIONS.contains(&r.relation.as_str()) {
    return Err(format!("relation '{}' is not supersedes | qualifies | applies_under", r.relation));
  }
  for (name, v) in [("selected", &r.selected), ("other", &r.other)] {
    if normalize_target(v).as_deref() != Ok(v.as_str()) {
      return Err(format!("{name} '{v}' is not a normalized page id"));
    }
  }
  if r.selected.to_lowercase() == r.other.to_lowercase() {
    return Err("selected and other are the same page".into());
  }
  match (r.relation.as_str(), &r.scope) {
    ("applies_under", None) => return Err("applies_under requires a non-empty scope".into()),
    ("applies_under", Some(_)) | (_, None) => {}
    (rel, Some(_)) => return Err(format!("scope is only allowed with applies_under, not {rel}")),
  }
  if r.decided_by != "user" {
    return Err(format!("decided_by is '{}', expected user", r.decided_by));
  }
  if crate::retrieve::trust::parse_timestamp(&r.decided_at).is_none() {
    return Err(format!("decided_at '{}' is not an ISO timestamp", r.decided_at));
  }
  Ok(())
}

/// The resolution record of a page whose `category` is `conflict-resolution`, with the findings
/// about it (`resolution_invalid`). Other pages: `(None, [])`.
pub fn parse_resolution(page: &Page) -> (Option<ResolutionRecord>, Vec<RelationIssue>) {
  let value = page.extensions.iter().find(|(k, _)| k == "resolution").map(|(_, v)| v);
  if page.meta.category.as_deref() != Some(CATEGORY) {
    return (None, vec![]);
  }
  let bad = |m: String| (None, vec![RelationIssue::new("resolution_invalid", m)]);
  let Some(YamlValue::Map(entries)) = value else {
    return bad("a conflict-resolution page needs a `resolution` mapping".into());
  };
  const KEYS: &[&str] =
    &["id", "selected", "other", "relation", "scope", "decided_by", "decided_at", "replaces"];
  if let Some((k, _)) = entries.iter().find(|(k, _)| !KEYS.contains(&k.as_str())) {
    return bad(format!("resolution has an unexpected key '{k}'"));
  }
  let get = |k: &str| -> std::result::Result<Option<String>, String> {
    match value.and_then(|v| v.get(k)) {
      None | Some(YamlValue::Null) => Ok(None),
      Some(YamlValue::Str(s)) => Ok(Some(s.trim().to_string()).filter(|s| !s.is_empty())),
      Some(_) => Err(format!("resolution.{k} must be a string")),
    }
  };
  let need = |k: &str| -> std::result::Result<String, String> {
    get(k)?.ok_or_else(|| format!("resolution.{k} is missing"))
  };
  let record = (|| -> std::result::Result<ResolutionRecord, String> {
    let scope_raw = get("scope")?;
    let r = ResolutionRecord {
      id: need("id")?,
      selected: need("selected")?,
      other: need("other")?,
      relation: need("relation")?,
      scope: clean_scope(scope_raw.as_deref()),
      decided_by: need("decided_by")?,
      decided_at: need("decided_at")?,
      replaces: get("replaces")?,
    };
    check_fields(&r)?;
    Ok(r)
  })();
  match record {
    Ok(r) => (Some(r), vec![]),
    Err(m) => bad(m),
  }
}

/// The spec's `ConflictResolution` (structured result and `bundle.resolution`).
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
  pub relation: String,
  /// Scope of `applies_under`.
  pub scope: Option<String>,
  /// `active`, or `replaced` for a record that a later one replaces.
  pub status: String,
  /// Always `user`.
  pub decided_by: String,
  /// RFC 3339 time of the decision.
  pub decided_at: String,
  /// The resolution this one replaces.
  pub replaces: Option<String>,
  /// Page id of the resolution page.
  pub page_id: String,
}

impl ConflictResolution {
  fn of(r: &ResolutionRecord, vault_id: &str, page_id: &str, active: bool) -> Self {
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

fn pair_key(a: &str, b: &str) -> (String, String) {
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
  issues: Vec<(String, RelationIssue)>,
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
            (crate::retrieve::trust::parse_timestamp(&s.records[**id].1.decided_at), (**id).clone())
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
  /// Derive from a manifest and its resolved graph (called by [`LinkGraph::build`]).
  pub fn derive(manifest: &Manifest, g: &LinkGraph) -> Decisions {
    let supersedes =
      g.outbound.values().flatten().filter(|e| e.relations.iter().any(|r| r.relation_type == "supersedes"));
    Self::assemble(manifest, supersedes.map(|e| (e.from.clone(), e.to.clone())).collect(), |superseded| {
      superseded.keys().flat_map(|s| g.in_edges(s).map(|e| (e.from.clone(), s.clone()))).collect()
    })
  }

  /// The same as [`Decisions::derive`] over [`LinkGraph::build`]'s graph, without building it:
  /// only the links of pages declaring `supersedes` and the links that can reach a superseded
  /// page (their last path segment names it) are resolved. What recall needs per generation
  /// (warnings of the returned pages), at a fraction of the whole graph's cost.
  pub fn derive_direct(manifest: &Manifest) -> Decisions {
    let r = super::graph::Resolver::new(manifest);
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
      let names: HashSet<String> = superseded.keys().map(|s| super::graph::name_key(s)).collect();
      let mut citing = Vec::new();
      if names.is_empty() {
        return citing;
      }
      for (id, e) in &manifest.entries {
        for l in e.links.links.iter() {
          if super::graph::link_name_key(l).is_some_and(|k| !names.contains(k.as_ref())) {
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
  fn assemble(
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

// ── Memory bundles ─────────────────────────────────────────────────────────────────────────

/// Typed neighbours of `page` with its active resolutions laid over them: each resolution adds
/// (or replaces) the link to its partner with the user's relation and direction; a declared
/// relation it overrides stays visible as `declared` (audit).
pub(crate) fn overlay(g: &LinkGraph, page: &str, mut conflicts: Vec<Linked>) -> Vec<Linked> {
  for r in g.decisions.resolutions.active_for(page) {
    let (partner, direction) =
      if r.selected == page { (&r.other, "outgoing") } else { (&r.selected, "incoming") };
    let mut declared: Vec<String> = Vec::new();
    conflicts.retain(|l| {
      if &l.page == partner {
        declared.push(format!("{} ({})", l.relation, l.direction));
        false
      } else {
        true
      }
    });
    // Evidence-type declared relations to the partner (supports / derived_from) are left alone.
    conflicts.push(Linked {
      page: partner.clone(),
      relation: r.relation.clone(),
      direction,
      scope: r.scope.clone(),
      resolution: Some(r.id.clone()),
      declared: (!declared.is_empty()).then(|| declared.join(", ")),
    });
  }
  conflicts
}

fn push_unique(v: &mut Vec<String>, s: String) {
  if !v.contains(&s) {
    v.push(s);
  }
}

/// Mark a bundle's items from the vault's decisions: historical pages (`historical`, warning),
/// `cites_superseded` warnings, `bundle.resolution` (the active resolution between the seed and
/// one of its competing claims) and `bundle.unresolved` (`contradicts` pairs without one).
pub(crate) fn annotate_bundle(b: &mut MemoryBundle, g: Option<&LinkGraph>) {
  let Some(g) = g else {
    return;
  };
  let d = &g.decisions;
  let mark = |i: &mut MemoryItem| {
    if d.superseded.contains_key(&i.page_id) {
      i.historical = true;
    }
    for w in d.warnings(&i.page_id) {
      push_unique(&mut i.warnings, w);
    }
  };
  b.card.iter_mut().chain(b.evidence.iter_mut()).chain(b.conflicts.iter_mut()).for_each(mark);
  let seed = match (&b.card, b.evidence.first()) {
    (Some(c), _) => c.clone(),
    (None, Some(e)) if e.relation == "unpromoted" => e.clone(),
    _ => return,
  };
  for c in &b.conflicts {
    match d.resolutions.active_for_pair(&seed.page_id, &c.page_id) {
      Some(r) if b.resolution.is_none() => {
        b.resolution = d.resolutions.describe(&r.id).map(|mut cr| {
          cr.vault_id = seed.vault_id.clone();
          cr
        });
      }
      Some(_) => {}
      None if c.relation == "contradicts" => b.unresolved.push(UnresolvedConflict {
        vault: seed.vault.clone(),
        vault_id: seed.vault_id.clone(),
        page_ids: vec![seed.page_id.clone(), c.page_id.clone()],
        relation: c.relation.clone(),
      }),
      None => {}
    }
  }
}

/// A competing pair recall found without a user resolution: the agent should ask the user which
/// applies and record the answer with `resolveConflict` (exact page ids here).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnresolvedConflict {
  /// `project` or `personal`.
  pub vault: String,
  /// Vault id.
  pub vault_id: String,
  /// The two page ids (the bundle's seed first).
  pub page_ids: Vec<String>,
  /// The declared relation that makes them compete (`contradicts`).
  pub relation: String,
}

// ── Writing a resolution ───────────────────────────────────────────────────────────────────

/// A `resolveConflict` request.
#[derive(Debug, Clone, Default)]
pub struct ResolveRequest {
  /// `project` or `personal`.
  pub vault: String,
  /// The user-endorsed page id.
  pub selected: String,
  /// The other page id.
  pub other: String,
  /// `supersedes`, `qualifies` or `applies_under`.
  pub relation: String,
  /// Scope (required for `applies_under`, forbidden otherwise).
  pub scope: Option<String>,
  /// Why (the page body records it).
  pub rationale: Option<String>,
  /// The active resolution of the same pair that this decision replaces.
  pub replaces: Option<String>,
  /// Run the incremental index update afterwards (default true).
  pub update_index: bool,
}

/// Outcome of the index update after a resolution.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DerivedUpdate {
  /// True when the index now contains the resolution page.
  pub updated: bool,
  /// True when derived state (index, relation graph) does not yet reflect the resolution.
  pub stale: bool,
  /// Generation committed by the update (0 when none).
  pub generation: u64,
  /// Why the update failed or was skipped.
  pub issues: Vec<IndexIssue>,
}

/// Result of `resolveConflict`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolveOutcome {
  /// The resolution (new or existing).
  pub resolution: ConflictResolution,
  /// False for an idempotent repeat (nothing written).
  pub created: bool,
  /// Absolute path of the resolution page.
  pub path: String,
  /// The index update.
  pub index: DerivedUpdate,
  /// Non-fatal problems of the write: `resolution_feedback_not_recorded` when the page is
  /// committed but its `conflict_selected` event could not be appended.
  pub warnings: Vec<IndexIssue>,
}

/// The vault named by `vault` (`project` / `personal`) relative to `active`, and the other one.
fn vaults_of(active: &VaultPaths, vault: &str) -> Result<(VaultPaths, Option<VaultPaths>)> {
  use crate::store::reindex::{resolve_targets, VaultTarget};
  let (target, other) = match vault {
    "project" => (VaultTarget::Project, VaultTarget::Personal),
    "personal" => (VaultTarget::Personal, VaultTarget::Project),
    o => return Err(Error::invalid(format!("vault must be 'project' or 'personal', not '{o}'"))),
  };
  let Some((paths, _)) = resolve_targets(active, target).into_iter().next() else {
    return Err(reject(
      codes::VAULT_UNAVAILABLE,
      "the active vault is the personal vault: there is no project vault",
    ));
  };
  Ok((paths, resolve_targets(active, other).into_iter().next().map(|(p, _)| p)))
}

/// The file of page `id` under `wiki`, by exact (NFC) name match of every component, so a
/// case-insensitive filesystem cannot make `Concepts/A` name `concepts/a.md`.
fn page_file(wiki: &Path, id: &str) -> Option<PathBuf> {
  let rel = format!("{id}.md");
  let mut path = wiki.to_path_buf();
  for comp in rel.split('/') {
    let found = std::fs::read_dir(&path).ok()?.flatten().find(|e| {
      e.file_name()
        .to_str()
        .is_some_and(|n| n == comp || (!n.is_ascii() && n.nfc().collect::<String>() == comp))
    })?;
    path = found.path();
  }
  let meta = std::fs::symlink_metadata(&path).ok()?;
  meta.is_file().then_some(path)
}

fn check_page(paths: &VaultPaths, other_vault: Option<&VaultPaths>, vault: &str, id: &str) -> Result<Page> {
  let Some(file) = page_file(&paths.wiki, id) else {
    if other_vault.is_some_and(|o| page_file(&o.wiki, id).is_some()) {
      return Err(reject(
        codes::CROSS_VAULT,
        format!("{id} is a page of the other vault, not of the {vault} vault: a resolution pairs two pages of one vault"),
      ));
    }
    return Err(reject(codes::PAGE_MISSING, format!("{id} is no page of the {vault} vault")));
  };
  let bytes = crate::vault::read::read_page_at(&paths.wiki, &file, crate::store::reindex::MAX_PAGE_BYTES)?;
  let (page, _) = Page::from_file_bytes(id, file.clone(), &bytes)
    .map_err(|e| reject(codes::PAGE_INVALID, format!("{id} cannot be parsed ({}): {}", e.code, e.message)))?;
  if parse_resolution(&page).0.is_some() {
    return Err(reject(codes::PAGE_INVALID, format!("{id} is a resolution record, not a claim")));
  }
  Ok(page)
}

/// Every resolution record on disk under `wiki/analyses/` as (page id, record) (authoritative:
/// the index may lag). `rebuildFeedback` replays a record whose `conflict_selected` is missing.
pub fn scan_records(paths: &VaultPaths) -> Vec<(String, ResolutionRecord)> {
  let dir = paths.wiki.join(FOLDER);
  let mut out = Vec::new();
  for e in walkdir::WalkDir::new(&dir).follow_links(false).sort_by_file_name().into_iter().flatten() {
    let name = e.file_name().to_string_lossy();
    if !e.file_type().is_file() || !name.ends_with(".md") {
      continue;
    }
    let Ok(rel) = e.path().strip_prefix(&paths.wiki) else { continue };
    let rel = rel.to_string_lossy().replace('\\', "/");
    let id = rel[..rel.len() - 3].nfc().collect::<String>();
    let Ok(bytes) =
      crate::vault::read::read_page_at(&paths.wiki, e.path(), crate::store::reindex::MAX_PAGE_BYTES)
    else {
      continue;
    };
    if !bytes.windows(CATEGORY.len()).any(|w| w == CATEGORY.as_bytes()) {
      continue;
    }
    if let Ok((page, _)) = Page::from_file_bytes(&id, e.path().to_path_buf(), &bytes) {
      if let (Some(r), _) = parse_resolution(&page) {
        out.push((id, r));
      }
    }
  }
  out
}

/// A YAML double-quoted scalar (JSON string syntax is valid YAML).
fn q(s: &str) -> String {
  serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A relative Markdown link target from `analyses/` to page `id`.
fn link_to(id: &str) -> String {
  let mut out = String::from("../");
  for ch in format!("{id}.md").chars() {
    match ch {
      ' ' => out.push_str("%20"),
      '(' => out.push_str("%28"),
      ')' => out.push_str("%29"),
      '%' => out.push_str("%25"),
      '<' => out.push_str("%3C"),
      '>' => out.push_str("%3E"),
      c => out.push(c),
    }
  }
  out
}

fn escape_md(s: &str) -> String {
  s.replace('\\', "\\\\").replace('[', "\\[").replace(']', "\\]")
}

/// The text of a resolution page.
pub fn render_page(
  r: &ResolutionRecord,
  selected_title: &str,
  other_title: &str,
  rationale: Option<&str>,
) -> String {
  let null = || "null".to_string();
  let title = format!("Resolution: {} {} {}", r.selected, r.relation.replace('_', " "), r.other);
  let mut s = format!(
    "---\ntype: analysis\ntitle: {}\ncategory: {CATEGORY}\nstatus: stable\nresolution:\n  id: {}\n  selected: {}\n  other: {}\n  relation: {}\n  scope: {}\n  decided_by: user\n  decided_at: {}\n  replaces: {}\n---\n",
    q(&title),
    q(&r.id),
    q(&r.selected),
    q(&r.other),
    r.relation,
    r.scope.as_deref().map(q).unwrap_or_else(null),
    q(&r.decided_at),
    r.replaces.as_deref().map(q).unwrap_or_else(null),
  );
  let meaning = match r.relation.as_str() {
    "supersedes" => "the selected claim is current; the other claim is historical".to_string(),
    "qualifies" => "both claims stay current; the selected claim narrows the other".to_string(),
    _ => format!(
      "the selected claim applies under \"{}\"; the other claim remains applicable outside it",
      r.scope.as_deref().unwrap_or("")
    ),
  };
  s.push_str(&format!("# {}\n\nDecided by the user on {}: {meaning}.\n\n", escape_md(&title), r.decided_at));
  s.push_str(&format!("- Selected: [{}]({})\n", escape_md(selected_title), link_to(&r.selected)));
  s.push_str(&format!("- Other: [{}]({})\n", escape_md(other_title), link_to(&r.other)));
  if let Some(sc) = &r.scope {
    s.push_str(&format!("- Scope: {}\n", escape_md(sc)));
  }
  if let Some(rep) = &r.replaces {
    s.push_str(&format!("- Replaces: [{rep}]({rep}.md)\n"));
  }
  s.push_str("\n## Rationale\n\n");
  match rationale.map(str::trim).filter(|t| !t.is_empty()) {
    Some(t) => s.push_str(t),
    None => s.push_str("No rationale was given."),
  }
  s.push('\n');
  s
}

/// Create `target` with `bytes` (fsynced), failing with `AlreadyExists` when it exists: never
/// replaces a file. A partial file left by a failed write is removed.
fn write_new(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
  use std::io::Write;
  let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(target)?;
  let res = f.write_all(bytes).and_then(|_| f.sync_all());
  if res.is_err() {
    drop(f);
    let _ = std::fs::remove_file(target);
  }
  res
}

/// Write `text` as `target` by temporary file + validation + atomic rename: the temporary file
/// is read back and must parse to `expect`; the rename never replaces an existing file.
fn commit_page(target: &Path, id: &str, text: &str, expect: &ResolutionRecord) -> Result<()> {
  use std::io::Write;
  let dir = target.parent().ok_or_else(|| Error::invalid("resolution page has no folder"))?;
  // Never through a linked `analyses/` (the record would land outside the vault).
  let wiki = dir.parent().ok_or_else(|| Error::invalid("resolution page has no folder"))?;
  crate::vault::read::page_folder(wiki, FOLDER)?;
  let tmp = dir.join(format!(".{id}.md.tmp-{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()));
  let res = (|| {
    let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
    f.write_all(text.as_bytes()).map_err(|e| Error::io("write", &tmp, e))?;
    f.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
    drop(f);
    let back = std::fs::read(&tmp).map_err(|e| Error::io("read", &tmp, e))?;
    let parsed = Page::from_file_bytes(&page_id_of(id), tmp.clone(), &back)
      .ok()
      .and_then(|(p, _)| parse_resolution(&p).0);
    if parsed.as_ref() != Some(expect) {
      return Err(Error::Index(format!(
        "resolution page {id} did not validate after writing; nothing was committed"
      )));
    }
    crate::store::swap::crash_point("resolve:before-rename");
    // hard_link fails when the target exists (never replace a record); rename where links are
    // unsupported (the events lock already excludes a concurrent writer of the same id).
    match std::fs::hard_link(&tmp, target) {
      Ok(()) => {
        let _ = std::fs::remove_file(&tmp);
      }
      Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
        return Err(reject(
          codes::PAGE_INVALID,
          format!("{} already exists but is not a valid resolution record", target.display()),
        ));
      }
      Err(_) => {
        // No hard links on this filesystem: a rename would replace a record written meanwhile,
        // so the page is written in place by an exclusive create (never over an existing file).
        let _ = std::fs::remove_file(&tmp);
        write_new(target, text.as_bytes()).map_err(|e| match e.kind() {
          std::io::ErrorKind::AlreadyExists => reject(
            codes::PAGE_INVALID,
            format!("{} already exists but is not a valid resolution record", target.display()),
          ),
          _ => Error::io("create", target, e),
        })?
      }
    }
    crate::fsutil::sync_dir(dir);
    Ok(())
  })();
  if res.is_err() {
    let _ = std::fs::remove_file(&tmp);
  }
  res
}

/// Check the request's own fields: relation, page ids, scope, rationale.
fn check_request(req: &ResolveRequest) -> Result<(String, String, Option<String>, Option<String>)> {
  if !RELATIONS.contains(&req.relation.as_str()) {
    return Err(reject(
      codes::RELATION_INVALID,
      format!("relation '{}' is not supersedes | qualifies | applies_under", req.relation),
    ));
  }
  let id = |name: &str, v: &str| {
    normalize_target(v).map_err(|why| reject(codes::PAGE_ID_INVALID, format!("{name} '{v}' {why}")))
  };
  let selected = id("selectedPageId", &req.selected)?;
  let other = id("otherPageId", &req.other)?;
  if selected.to_lowercase() == other.to_lowercase() {
    return Err(reject(
      codes::SAME_PAGE,
      format!("selectedPageId and otherPageId are the same page ({selected})"),
    ));
  }
  let scope = clean_scope(req.scope.as_deref());
  match (req.relation.as_str(), &scope) {
    ("applies_under", None) => {
      return Err(reject(codes::SCOPE_INVALID, "applies_under requires a non-empty scope"));
    }
    ("applies_under", Some(s)) if s.chars().count() > MAX_SCOPE_CHARS => {
      return Err(reject(codes::SCOPE_INVALID, format!("scope has more than {MAX_SCOPE_CHARS} characters")));
    }
    ("applies_under", _) | (_, None) => {}
    (rel, Some(_)) => {
      return Err(reject(
        codes::SCOPE_INVALID,
        format!("scope is only allowed with applies_under, not {rel}"),
      ));
    }
  }
  if req.rationale.as_deref().is_some_and(|r| r.chars().count() > MAX_RATIONALE_CHARS) {
    return Err(reject(
      codes::RATIONALE_TOO_LONG,
      format!("rationale has more than {MAX_RATIONALE_CHARS} characters"),
    ));
  }
  let replaces = req
    .replaces
    .as_deref()
    .map(str::trim)
    .filter(|s| !s.is_empty())
    .map(|s| s.strip_prefix(&format!("{FOLDER}/")).unwrap_or(s).to_string());
  Ok((selected, other, scope, replaces))
}

/// Record a user's conflict decision (`resolveConflict`). Validates the request, then — under the
/// vault's events lock (waiting at most [`EXPLICIT_WAIT`]; busy = no page) — returns the existing
/// record for a repeat, or writes one new immutable resolution page and, in the same lock hold,
/// appends its `conflict_selected` feedback event (a failed append keeps the page and is
/// reported in `warnings`; a repeat appends nothing). Afterwards (lock released)
/// the vault's index is updated incrementally; a failure there leaves the page committed and is
/// reported in `index` (`stale: true`).
pub fn resolve_conflict(active: &VaultPaths, req: &ResolveRequest) -> Result<ResolveOutcome> {
  check_request(req)?;
  let (paths, other_vault) = vaults_of(active, &req.vault)?;
  resolve_in(&paths, other_vault.as_ref(), req)
}

/// [`resolve_conflict`] in the vault `paths`, `other_vault` being the vault whose pages are
/// reported as `resolution_cross_vault`.
pub fn resolve_in(
  paths: &VaultPaths,
  other_vault: Option<&VaultPaths>,
  req: &ResolveRequest,
) -> Result<ResolveOutcome> {
  let (selected, other, scope, replaces) = check_request(req)?;
  if !paths.dot_wiki.is_dir() {
    return Err(reject(
      codes::VAULT_UNAVAILABLE,
      format!(
        "the {} vault at {} does not exist (run wiki_bootstrap first)",
        req.vault,
        paths.root.display()
      ),
    ));
  }
  let paths = paths.clone();
  let sel_page = check_page(&paths, other_vault, &req.vault, &selected)?;
  let oth_page = check_page(&paths, other_vault, &req.vault, &other)?;
  let mut warnings = Vec::new();
  let (resolution, created, target) = {
    let lock = events_lock::acquire(&paths.meta, EXPLICIT_WAIT)?;
    // Under the lock: a vault id backfilled by two first resolutions at once would differ.
    let vault_id = crate::vault::config::ensure_vault_id(&paths)?;
    let id =
      resolution_id(&vault_id, &selected, &other, &req.relation, scope.as_deref(), replaces.as_deref());
    let target = paths.wiki.join(FOLDER).join(format!("{id}.md"));
    let set = ResolutionSet::build(&vault_id, scan_records(&paths));
    let active_rec = set.active_for_pair(&selected, &other).cloned();
    let same_choice = |r: &ResolutionRecord| {
      r.selected == selected
        && r.other == other
        && r.relation == req.relation
        && normalized_scope(r.scope.as_deref()) == normalized_scope(scope.as_deref())
    };
    match (&active_rec, &replaces) {
      // A repeat of the active decision (with or without the replaces that produced it).
      (Some(a), _) if a.id == id || (replaces.is_none() && same_choice(a)) => {
        (set.describe(&a.id).expect("active record is described"), false, target)
      }
      (Some(a), Some(rep)) if *rep != a.id => {
        return Err(reject(
          codes::REPLACES_INVALID,
          format!("replaces {rep} is not the active resolution of {selected} / {other}; that is {}", a.id),
        ))
      }
      (Some(a), None) => {
        return Err(reject(
          codes::REPLACES_REQUIRED,
          format!(
            "{selected} / {other} already has the active resolution {} ({} {} {}); a changed choice must pass replaces: {}",
            a.id, a.selected, a.relation, a.other, a.id
          ),
        ))
      }
      (None, Some(rep)) => {
        return Err(reject(
          codes::REPLACES_INVALID,
          format!("replaces {rep} is not the active resolution of {selected} / {other} (the pair has none)"),
        ))
      }
      (Some(_), Some(_)) | (None, None) => {
        if set.get(&id).is_some() {
          // The same decision exists but a later one replaced it: re-choosing it is a new record.
          return Err(reject(
            codes::REPLACES_REQUIRED,
            format!("{id} was replaced; to choose it again pass replaces with the active resolution of the pair"),
          ));
        }
        let record = ResolutionRecord {
          id: id.clone(),
          selected: selected.clone(),
          other: other.clone(),
          relation: req.relation.clone(),
          scope: scope.clone(),
          decided_by: "user".into(),
          decided_at: crate::fsutil::now_iso(),
          replaces: replaces.clone(),
        };
        let text = render_page(&record, &sel_page.meta.title, &oth_page.meta.title, req.rationale.as_deref());
        commit_page(&target, &id, &text, &record)?;
        // Same hold as the page (spec "Feedback"): the event follows the rename. The page is
        // the durable decision, so a failed append is a warning, never an error.
        let mut event = crate::feedback::record::conflict_selected_event(&vault_id, &selected, None);
        event.resolution = Some(id.clone());
        if let Err(e) = crate::feedback::events::append_events_locked(&lock, &[event]) {
          warnings.push(IndexIssue::new(
            codes::FEEDBACK_NOT_RECORDED,
            format!("the resolution page is committed but its conflict_selected event was not appended: {e}"),
          ));
        }
        (ConflictResolution::of(&record, &vault_id, &page_id_of(&id), true), true, target)
      }
    }
  };
  let page_path = page_file(&paths.wiki, &resolution.page_id).unwrap_or(target);
  let index = if req.update_index { update_index(&paths) } else { skipped_update() };
  Ok(ResolveOutcome { resolution, created, path: page_path.to_string_lossy().into_owned(), index, warnings })
}

fn skipped_update() -> DerivedUpdate {
  DerivedUpdate {
    updated: false,
    stale: true,
    generation: 0,
    issues: vec![IndexIssue::new("resolution_index_skipped", "index update not requested; run reindexWiki")],
  }
}

/// Incremental lexical update of the vault after a resolution.
fn update_index(paths: &VaultPaths) -> DerivedUpdate {
  let opts =
    ReindexOptions { scope: Scope::Changed, components: vec![Component::Lexical], ..Default::default() };
  let r = crate::store::reindex_vault(paths, &opts);
  let res = if r.ok {
    Ok(r.generation)
  } else {
    Err(
      r.errors
        .into_iter()
        .next()
        .unwrap_or_else(|| IndexIssue::new("qmd_index_error", "index update failed")),
    )
  };
  match res {
    Ok(generation) => DerivedUpdate { updated: true, stale: false, generation, issues: vec![] },
    Err(issue) => DerivedUpdate {
      updated: false,
      stale: true,
      generation: 0,
      issues: vec![
        issue,
        IndexIssue::new(
          "resolution_index_stale",
          "the resolution page is committed but the index does not contain it yet; run reindexWiki",
        ),
      ],
    },
  }
}

#[cfg(test)]
mod tests;
