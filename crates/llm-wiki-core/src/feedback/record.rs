//! The feedback operations the binding exposes: confirm a session's shown results (`shown`
//! events), record an implicit or explicit action for a shown pair, record a conflict choice,
//! and rebuild the projection (replaying correction observations). Events go to the stream of
//! the vault that holds the page.

use std::collections::HashSet;

use serde::Serialize;

use super::correction::{replayable, write_observation, Correction};
use super::events::{append_events, FeedbackEvent, KIND, SCHEMA};
use super::ledger::{self, ShownEntry};
use super::persist;
use super::projection::{self, Projection};
use super::FeedbackAction;
use crate::error::{Error, Result};
use crate::events_lock::{EXPLICIT_WAIT, IMPLICIT_WAIT};
use crate::fsutil::now_iso;
use crate::retrieve::recall::{corrupt_diagnostic, recall_vaults, RecallDiagnostic, RecallPolicy};
use crate::retrieve::trust::now_secs;
use crate::util::num::{sat_i64, sat_u32};
use crate::vault::config::{read_config, vault_id_of};
use crate::vault::VaultPaths;

/// What happened to a feedback request.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackOutcome {
  /// `recorded`; `disabled` (implicit capture is off: nothing written); `dropped` (an implicit
  /// event found the events lock busy for 250 ms: nothing written, diagnostic says so);
  /// `correction_saved_feedback_pending` (the observation is written, the event append failed:
  /// a rebuild replays it).
  pub status: String,
  /// Events appended.
  pub events: u32,
  /// Id of the correction observation page (`corrected`).
  #[serde(skip_serializing_if = "Option::is_none")]
  pub observation: Option<String>,
  /// Why something was not written.
  pub diagnostics: Vec<RecallDiagnostic>,
}

impl FeedbackOutcome {
  fn status(status: &str, events: u32) -> Self {
    FeedbackOutcome { status: status.into(), events, observation: None, diagnostics: vec![] }
  }
}

/// The vault (of `active`'s explicit recall set) whose id is `vault_id`.
pub fn vault_by_id(active: &VaultPaths, vault_id: &str) -> Result<VaultPaths> {
  for (paths, _) in recall_vaults(active, &RecallPolicy::explicit(None)) {
    if let Ok(cfg) = read_config(&paths) {
      if vault_id_of(&paths, &cfg).ok().flatten().as_deref() == Some(vault_id) {
        return Ok(paths);
      }
    }
  }
  Err(Error::invalid(format!("vault {vault_id} is neither the active vault nor the personal vault")))
}

fn event_of(e: &ShownEntry, action: FeedbackAction) -> FeedbackEvent {
  FeedbackEvent {
    schema: SCHEMA,
    timestamp: now_iso(),
    visibility: "internal".into(),
    kind: KIND.into(),
    vault_id: e.vault_id.clone(),
    page_id: e.page_id.clone(),
    query_hash: e.query_hash.clone(),
    mode: e.mode.clone(),
    index_version: e.index_version.clone(),
    model_version: e.model_version.clone(),
    shown_rank: Some(e.rank),
    action,
    observation: None,
    resolution: None,
  }
}

fn busy_or(e: Error, what: &str) -> Result<FeedbackOutcome> {
  if matches!(e, Error::FeedbackLockBusy(_)) {
    let mut o = FeedbackOutcome::status("dropped", 0);
    o.diagnostics.push(RecallDiagnostic { code: e.code().into(), message: format!("{what} dropped: {e}") });
    Ok(o)
  } else {
    Err(e)
  }
}

/// Confirm that the session's pending recall was delivered: the pairs join the shown set, their
/// characters are charged, and (when `implicit` capture is on) one `shown` event per pair is
/// appended to its vault's stream (dropped with a diagnostic when the lock stays busy 250 ms).
///
/// The pairs are also written to each vault's on-disk ledger ([`persist`], whatever `implicit`
/// says: explicit judgments need them), so another process of the session can judge them; a
/// ledger that cannot be written is a diagnostic, never an error.
pub fn confirm_shown(active: &VaultPaths, session: &str, implicit: bool) -> Result<FeedbackOutcome> {
  let shown = ledger::confirm_shown(session);
  let mut vault_ids: Vec<&str> = shown.iter().map(|e| e.vault_id.as_str()).collect();
  vault_ids.sort_unstable();
  vault_ids.dedup();
  let mut ledger_diagnostics = Vec::new();
  let now = now_secs();
  for vid in &vault_ids {
    let entries: Vec<ShownEntry> = shown.iter().filter(|e| e.vault_id == *vid).cloned().collect();
    match vault_by_id(active, vid) {
      Ok(paths) => ledger_diagnostics.extend(persist::record(&paths.meta, session, &entries, now)),
      Err(e) => ledger_diagnostics.push(RecallDiagnostic {
        code: "recall_ledger_unwritable".into(),
        message: format!("the shown state was not saved for other processes: {e}"),
      }),
    }
  }
  if !implicit {
    let mut out = FeedbackOutcome::status("disabled", 0);
    out.diagnostics = ledger_diagnostics;
    return Ok(out);
  }
  let mut out = FeedbackOutcome::status("recorded", 0);
  out.diagnostics = ledger_diagnostics;
  for vid in vault_ids {
    let events: Vec<FeedbackEvent> =
      shown.iter().filter(|e| e.vault_id == vid).map(|e| event_of(e, FeedbackAction::Shown)).collect();
    let paths = vault_by_id(active, vid)?;
    match append_events(&paths.meta, &events, IMPLICIT_WAIT) {
      Ok(()) => out.events += events.len() as u32,
      Err(e) => {
        let d = busy_or(e, "shown events")?;
        out.status = d.status;
        out.diagnostics.extend(d.diagnostics);
      }
    }
  }
  Ok(out)
}

/// The session's shown entry of a pair: the in-memory ledger first, else the on-disk ledger of
/// the pair's vault (another process of the session, or this one before a restart, recorded
/// it); an entry found on disk joins the in-memory ledger. Ledger read problems come back as
/// diagnostics; a pair in neither is `feedback_not_shown`.
fn shown_pair(
  active: &VaultPaths,
  session: &str,
  vault_id: &str,
  page_id: &str,
) -> Result<(ShownEntry, Vec<RecallDiagnostic>)> {
  if let Some(e) = ledger::shown_entry(session, vault_id, page_id) {
    return Ok((e, vec![]));
  }
  let not_shown = || Error::FeedbackNotShown { vault_id: vault_id.into(), page_id: page_id.into() };
  let paths = vault_by_id(active, vault_id).map_err(|_| not_shown())?;
  let (found, diagnostics) = persist::lookup(&paths.meta, session, vault_id, page_id, now_secs());
  let entry = found.ok_or_else(not_shown)?;
  ledger::remember(session, entry.clone());
  Ok((entry, diagnostics))
}

/// Record `action` for a pair the session showed. Implicit actions (`opened`, `cited`,
/// `shown_only`) are skipped when `implicit` is false and dropped when the lock stays busy for
/// 250 ms; explicit judgments wait 2 s and fail with `feedback_lock_busy`. `corrected` writes the
/// observation first (a failure writes nothing) and then the event; a failed append after the
/// observation resolves as `correction_saved_feedback_pending`.
pub fn record_feedback(
  active: &VaultPaths,
  session: &str,
  vault_id: &str,
  page_id: &str,
  action: FeedbackAction,
  correction: Option<&str>,
  implicit: bool,
) -> Result<FeedbackOutcome> {
  if action == FeedbackAction::Shown {
    return Err(Error::invalid("shown is recorded by confirmRecallShown after delivery"));
  }
  // Every target is a page id ('/'-separated, relative to wiki/, no '..', no '.md'), so no
  // feedback call can name (or probe for) a file outside the vault.
  if crate::memory::relations::normalize_target(page_id).as_deref() != Ok(page_id) {
    let why =
      crate::memory::relations::normalize_target(page_id).err().unwrap_or("is not in normalized form");
    return Err(Error::invalid(format!("pageId '{page_id}' {why}")));
  }
  if correction.is_some() && action != FeedbackAction::Corrected {
    return Err(Error::invalid("correction is accepted only with corrected"));
  }
  if action.is_implicit() && !implicit {
    return Ok(FeedbackOutcome::status("disabled", 0));
  }
  let (entry, ledger_diagnostics) = shown_pair(active, session, vault_id, page_id)?;
  let mut out = record_for_entry(active, &entry, vault_id, page_id, action, correction)?;
  out.diagnostics.extend(ledger_diagnostics);
  Ok(out)
}

/// [`record_feedback`] once the session's shown entry of the pair is known.
fn record_for_entry(
  active: &VaultPaths,
  entry: &ShownEntry,
  vault_id: &str,
  page_id: &str,
  action: FeedbackAction,
  correction: Option<&str>,
) -> Result<FeedbackOutcome> {
  if action == FeedbackAction::ConflictSelected {
    // A choice between pages the session was shown, counted for the query it was shown for.
    return record_conflict_selected(active, vault_id, page_id, Some(&entry.query_hash));
  }
  let paths = vault_by_id(active, vault_id)?;
  let mut event = event_of(entry, action);
  if action.is_implicit() {
    return match append_events(&paths.meta, &[event], IMPLICIT_WAIT) {
      Ok(()) => Ok(FeedbackOutcome::status("recorded", 1)),
      Err(e) => busy_or(e, action.as_str()),
    };
  }
  let mut observation = None;
  if action == FeedbackAction::Corrected {
    let text = correction.ok_or_else(|| Error::invalid("correction is required for corrected"))?;
    let title = crate::retrieve::engine::open_snapshot(&paths)
      .ok()
      .and_then(|s| s.manifest.entries.get(page_id).map(|e| e.meta.title.clone()))
      .unwrap_or_else(|| page_id.to_string());
    let c = Correction {
      vault_id: vault_id.into(),
      page_id: page_id.into(),
      page_title: title,
      query_hash: entry.query_hash.clone(),
      text: text.into(),
    };
    let id = write_observation(&paths.wiki, &c)?;
    event.observation = Some(id.clone());
    observation = Some(id);
  }
  match append_events(&paths.meta, &[event], EXPLICIT_WAIT) {
    Ok(()) => Ok(FeedbackOutcome { observation, ..FeedbackOutcome::status("recorded", 1) }),
    Err(e) if observation.is_some() => Ok(FeedbackOutcome {
      status: "correction_saved_feedback_pending".into(),
      events: 0,
      diagnostics: vec![RecallDiagnostic {
        code: e.code().into(),
        message: format!("the correction observation is saved; its feedback event was not appended ({e}); rebuildFeedback replays it"),
      }],
      observation,
    }),
    Err(e) => Err(e),
  }
}

/// Record a `conflict_selected` event for the selected page outside a resolution (the binding's
/// `recordRecallFeedback` with that action, for a page its session was shown; `page_id` must be
/// a normalized page id — [`record_feedback`] checks both). Waits 2 s for the lock.
/// `resolveConflict` does not call this: it appends [`conflict_selected_event`] in its own hold.
pub fn record_conflict_selected(
  active: &VaultPaths,
  vault_id: &str,
  page_id: &str,
  query_hash: Option<&str>,
) -> Result<FeedbackOutcome> {
  let paths = vault_by_id(active, vault_id)?;
  let file = crate::vault::discover::resolve_page_file(&paths.wiki, &format!("{page_id}.md"));
  if crate::vault::read::open_page(&paths.wiki, &file).is_err() {
    return Err(Error::invalid(format!("page {page_id} does not exist in vault {vault_id}")));
  }
  let event = conflict_selected_event(vault_id, page_id, query_hash);
  append_events(&paths.meta, &[event], EXPLICIT_WAIT)?;
  Ok(FeedbackOutcome::status("recorded", 1))
}

/// The `conflict_selected` event of a user's choice of `page_id` (no recall: mode, index and
/// model versions and rank are empty). `resolveConflict` appends it under the same events lock
/// hold in which it writes its resolution page.
pub fn conflict_selected_event(vault_id: &str, page_id: &str, query_hash: Option<&str>) -> FeedbackEvent {
  FeedbackEvent {
    schema: SCHEMA,
    timestamp: now_iso(),
    visibility: "internal".into(),
    kind: KIND.into(),
    vault_id: vault_id.into(),
    page_id: page_id.into(),
    query_hash: query_hash.unwrap_or_default().into(),
    mode: String::new(),
    index_version: String::new(),
    model_version: String::new(),
    shown_rank: None,
    action: FeedbackAction::ConflictSelected,
    observation: None,
    resolution: None,
  }
}

/// Result of `rebuildFeedback` ([`rebuild_feedback`]).
#[cfg_attr(
  feature = "napi",
  napi_derive::napi(object, object_from_js = false, js_name = "FeedbackRebuildResult")
)]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RebuildOutcome {
  /// Whether feedback is enabled (the stream is well-formed).
  pub enabled: bool,
  /// Feedback events folded.
  // `i64`, a JavaScript number (`crate::util::num`).
  pub events: i64,
  /// Pages with a signal.
  pub pages: u32,
  /// Correction observations replayed (their event was missing).
  pub replayed: Vec<String>,
  /// `feedback_events_corrupt` when the stream is malformed (the last projection is kept).
  pub diagnostics: Vec<RecallDiagnostic>,
}

/// Rebuild the vault's projection from its whole stream plus correction observations whose event
/// is missing, ignoring deleted pages; writes `meta/recall-feedback.json` unless the stream is
/// malformed.
pub fn rebuild_feedback(paths: &VaultPaths) -> Result<RebuildOutcome> {
  rebuild_feedback_with(paths, &mut |_, _| {})
}

/// [`rebuild_feedback`] reporting `(bytes read, stream bytes)` as the stream is read (a full
/// fold is O(stream) time and bounded memory). First settles an interrupted compaction when one
/// left something (under the events lock; when the lock is busy the rebuild goes on and says so).
pub fn rebuild_feedback_with(
  paths: &VaultPaths,
  progress: &mut dyn FnMut(u64, u64),
) -> Result<RebuildOutcome> {
  let mut diagnostics = Vec::new();
  if super::compact::needs_recovery(&paths.meta) {
    match crate::events_lock::acquire(&paths.meta, EXPLICIT_WAIT) {
      Ok(_held) => {
        for what in super::compact::recover(&paths.meta)? {
          diagnostics.push(RecallDiagnostic { code: "feedback_compaction_recovered".into(), message: what });
        }
      }
      Err(e) => diagnostics.push(RecallDiagnostic {
        code: "feedback_compaction_pending".into(),
        message: format!(
          "an interrupted compaction could not be settled now ({e}); the next rebuild or compaction does it"
        ),
      }),
    }
  }
  let mut out = rebuild_unlocked(paths, progress)?;
  diagnostics.append(&mut out.diagnostics);
  out.diagnostics = diagnostics;
  Ok(out)
}

/// The rebuild proper (no recovery): fold, replay, write.
fn rebuild_unlocked(paths: &VaultPaths, progress: &mut dyn FnMut(u64, u64)) -> Result<RebuildOutcome> {
  let now = now_secs();
  let mut scan = Projection::default();
  projection::fold_with(&paths.meta, &mut scan, now, progress);
  if let Some(why) = scan.corrupt {
    return Ok(RebuildOutcome {
      enabled: false,
      events: sat_i64(scan.events),
      pages: 0,
      replayed: vec![],
      diagnostics: vec![corrupt_diagnostic(&why)],
    });
  }
  let recorded: HashSet<String> = scan.corrections.iter().cloned().collect();
  let mut extra = replayable(&paths.wiki, &recorded);
  let vault_id =
    read_config(paths).ok().and_then(|c| vault_id_of(paths, &c).ok().flatten()).unwrap_or_default();
  extra.extend(replayable_resolutions(paths, &vault_id, &scan));
  let live: HashSet<String> = crate::vault::discover::discover_pages(&paths.root, &paths.wiki)
    .files
    .iter()
    .map(|f| format!("{vault_id}\u{1f}{}", f.id))
    .collect();
  let proj = projection::rebuild(&paths.meta, &extra, Some(&live), now)?;
  let mut diagnostics: Vec<RecallDiagnostic> =
    proj.corrupt.as_deref().map(corrupt_diagnostic).into_iter().collect();
  if proj.skipped_lines > 0 {
    diagnostics.push(skipped_diagnostic(proj.skipped_lines));
  }
  Ok(RebuildOutcome {
    enabled: proj.corrupt.is_none(),
    events: sat_i64(proj.events),
    pages: sat_u32(proj.pages.len() + proj.global.len()),
    replayed: proj.replayed.clone(),
    diagnostics,
  })
}

/// Resolution records of the vault whose `conflict_selected` event is in neither the stream nor
/// an archive (`scan` = the fold of both): a kill between the page rename and the append, or a
/// failed append (`resolution_feedback_not_recorded`). Events that name no record (older
/// streams) count against the records of the same selected page, oldest record first.
fn replayable_resolutions(paths: &VaultPaths, vault_id: &str, scan: &Projection) -> Vec<FeedbackEvent> {
  let named: HashSet<&str> = scan.resolutions.iter().map(String::as_str).collect();
  let mut unnamed = scan.unnamed_choices.clone();
  let mut records = crate::memory::resolve::scan_records(paths);
  records.sort_by(|a, b| a.1.decided_at.cmp(&b.1.decided_at).then_with(|| a.1.id.cmp(&b.1.id)));
  let mut out = Vec::new();
  for (_, r) in records {
    if named.contains(r.id.as_str()) {
      continue;
    }
    if let Some(n) = unnamed.get_mut(&format!("{vault_id}\u{1f}{}", r.selected)).filter(|n| **n > 0) {
      *n -= 1;
      continue;
    }
    let mut e = conflict_selected_event(vault_id, &r.selected, None);
    e.timestamp = r.decided_at.clone();
    e.resolution = Some(r.id.clone());
    out.push(e);
  }
  out
}

/// The diagnostic of lines skipped for their length.
pub fn skipped_diagnostic(n: u64) -> RecallDiagnostic {
  RecallDiagnostic {
    code: "feedback_events_line_skipped".into(),
    message: format!(
      "{n} line(s) of meta/events.jsonl are longer than {} bytes and were skipped (no feedback event is that long; the lines are kept)",
      projection::MAX_LINE_BYTES
    ),
  }
}

/// Compact the vault's stream (see [`super::compact`]): move `recall_feedback` lines older than
/// the cutoff into `meta/events-archive/`, then rebuild the projection (with the lock still
/// held, so no event lands between). `progress` gets `(bytes read, stream bytes)`.
pub fn compact_feedback(
  paths: &VaultPaths,
  opts: &super::compact::CompactOptions,
  progress: &mut dyn FnMut(u64, u64),
) -> Result<super::compact::CompactOutcome> {
  super::compact::compact_feedback(&paths.meta, opts, progress, &mut || {
    rebuild_unlocked(paths, &mut |_, _| {}).map(|_| ())
  })
}
