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

pub mod annotate;
pub mod decisions;
pub mod record;
pub mod scan;

use std::path::{Path, PathBuf};

use serde::Serialize;
use unicode_normalization::UnicodeNormalization;

use super::relations::normalize_target;
use crate::error::{Error, Result};
use crate::events_lock::{self, EXPLICIT_WAIT};
use crate::store::{Component, IndexIssue, ReindexOptions, Scope};
use crate::vault::{Page, VaultPaths};
use record::reject;

pub(crate) use annotate::{annotate_bundle, overlay};
pub use decisions::{
  may_supersede, ConflictResolution, Decisions, ResolutionSet, Supersession, UnresolvedConflict,
};
pub use record::{
  clean_scope, normalized_scope, page_id_of, parse_resolution, resolution_id, ResolutionRecord, CATEGORY,
  FOLDER, MAX_RATIONALE_CHARS, MAX_SCOPE_CHARS, RELATIONS,
};
pub use scan::scan_records;

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

// ── Writing a resolution ───────────────────────────────────────────────────────────────────

/// Arguments of `resolveConflict` (the spec's `wiki_resolve_conflict` parameters).
#[cfg_attr(
  feature = "napi",
  napi_derive::napi(object, object_to_js = false, js_name = "ResolveConflictOptions")
)]
#[derive(Debug, Clone, Default)]
pub struct ResolveRequest {
  /// The vault of both pages, relative to the active vault `paths`.
  #[cfg_attr(feature = "napi", napi(ts_type = "'project' | 'personal'"))]
  pub vault: String,
  /// The user-endorsed claim (folder-qualified page id).
  #[cfg_attr(feature = "napi", napi(js_name = "selectedPageId"))]
  pub selected: String,
  /// The competing claim.
  #[cfg_attr(feature = "napi", napi(js_name = "otherPageId"))]
  pub other: String,
  /// Direction selected → other: `supersedes` (other becomes historical), `qualifies` (both
  /// current, selected narrows other), `applies_under` (selected applies within `scope`).
  #[cfg_attr(feature = "napi", napi(ts_type = "'supersedes' | 'qualifies' | 'applies_under'"))]
  pub relation: String,
  /// Required for `applies_under`, rejected for the other relations.
  pub scope: Option<String>,
  /// Why; recorded in the page body.
  pub rationale: Option<String>,
  /// The pair's active resolution id that this decision replaces (required to change a choice).
  pub replaces: Option<String>,
  /// Update the vault's index afterwards (default true).
  pub update_index: Option<bool>,
}

/// Outcome of the index update after a resolution.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DerivedUpdate {
  /// True when the index now contains the resolution page.
  pub updated: bool,
  /// True when derived state (index, relation graph) does not yet reflect the resolution (the
  /// page is committed).
  pub stale: bool,
  /// Generation committed by the update (0 when none); a JavaScript number.
  pub generation: i64,
  /// Why the update failed or was skipped (`qmd_index_busy`, `resolution_index_stale`, ...).
  pub issues: Vec<IndexIssue>,
}

/// Result of `resolveConflict`.
#[cfg_attr(
  feature = "napi",
  napi_derive::napi(object, object_from_js = false, js_name = "ResolveConflictResult")
)]
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
  let bytes = crate::vault::read::read_page_at(&paths.wiki, &file, crate::vault::read::MAX_PAGE_BYTES)?;
  let (page, _) = Page::from_file_bytes(id, file.clone(), &bytes)
    .map_err(|e| reject(codes::PAGE_INVALID, format!("{id} cannot be parsed ({}): {}", e.code, e.message)))?;
  if parse_resolution(&page).0.is_some() {
    return Err(reject(codes::PAGE_INVALID, format!("{id} is a resolution record, not a claim")));
  }
  Ok(page)
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
  let index = if req.update_index.unwrap_or(true) { update_index(&paths) } else { skipped_update() };
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
