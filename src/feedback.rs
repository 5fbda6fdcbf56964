//! Feedback exports: `confirmRecallShown`, `recordRecallFeedback`, `rebuildFeedback`, and the
//! session ledger's small synchronous helpers. Shapes are the engine's
//! (`llm_wiki_core::feedback`), converted with `From` only; errors map through `error.rs`.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use llm_wiki_core::feedback::{self as core_feedback, ledger as core_ledger, record as core_record};

use crate::types::{RecallDiagnostic, VaultPaths};
use crate::{core_err, invalid, task};

/// The host session a recall belongs to (`recallWiki` / `recallMemory` option `session`).
#[napi(object)]
pub struct RecallSession {
  /// Host session id (any non-empty string, stable for the session).
  pub id: String,
  /// Characters all automatic injections of the session may take together (default: no cap).
  pub budget_chars: Option<u32>,
}

impl RecallSession {
  pub(crate) fn to_core(&self) -> crate::error::Outcome<llm_wiki_core::retrieve::recall::SessionRecall> {
    if self.id.trim().is_empty() {
      return Err(invalid("session.id must be a non-empty string"));
    }
    Ok(llm_wiki_core::retrieve::recall::SessionRecall {
      id: self.id.clone(),
      budget_chars: self.budget_chars.map(|b| b as usize),
    })
  }
}

/// The host's feedback setting.
#[napi(object, object_to_js = false)]
pub struct FeedbackConfig {
  /// The spec's `recallFeedback` (default true): false turns off `shown`, `opened`, `cited`
  /// and `shown_only` capture only; explicit judgments and conflict choices are still recorded.
  pub recall_feedback: Option<bool>,
}

/// Input of `confirmRecallShown`.
#[napi(object, object_to_js = false)]
pub struct ConfirmShownInput {
  pub session_id: String,
  pub config: Option<FeedbackConfig>,
}

/// Input of `recordRecallFeedback`.
#[napi(object, object_to_js = false)]
pub struct RecallFeedbackInput {
  /// Session whose shown set holds the pair (not needed for `conflict_selected`).
  pub session_id: Option<String>,
  pub vault_id: String,
  pub page_id: String,
  #[napi(
    ts_type = "'opened' | 'cited' | 'shown_only' | 'relevant' | 'irrelevant' | 'corrected' | 'conflict_selected'"
  )]
  pub action: String,
  /// The user's correction; required for `corrected`, refused otherwise.
  pub correction: Option<String>,
  pub config: Option<FeedbackConfig>,
}

/// What happened to a feedback request.
#[napi(object)]
pub struct FeedbackOutcome {
  /// `recorded` | `disabled` (implicit capture off) | `dropped` (implicit event, lock busy
  /// 250 ms) | `correction_saved_feedback_pending` (observation saved, event append failed).
  pub status: String,
  /// Events appended.
  pub events: u32,
  /// Id of the correction observation page.
  pub observation: Option<String>,
  pub diagnostics: Vec<RecallDiagnostic>,
}

impl From<core_record::FeedbackOutcome> for FeedbackOutcome {
  fn from(o: core_record::FeedbackOutcome) -> Self {
    FeedbackOutcome {
      status: o.status,
      events: o.events,
      observation: o.observation,
      diagnostics: o.diagnostics.into_iter().map(Into::into).collect(),
    }
  }
}

/// Result of `rebuildFeedback`.
#[napi(object)]
pub struct FeedbackRebuildResult {
  /// False when the stream is malformed (feedback disabled; last projection kept).
  pub enabled: bool,
  pub events: f64,
  pub pages: u32,
  /// Correction observations replayed because their event was missing.
  pub replayed: Vec<String>,
  pub diagnostics: Vec<RecallDiagnostic>,
}

impl From<core_record::RebuildOutcome> for FeedbackRebuildResult {
  fn from(o: core_record::RebuildOutcome) -> Self {
    FeedbackRebuildResult {
      enabled: o.enabled,
      events: o.events as f64,
      pages: o.pages,
      replayed: o.replayed,
      diagnostics: o.diagnostics.into_iter().map(Into::into).collect(),
    }
  }
}

/// Totals of a session in the ledger.
#[napi(object)]
pub struct RecallSessionStats {
  /// Confirmed automatic injections.
  pub injections: u32,
  /// Characters charged to the session budget.
  pub injected_chars: u32,
  /// Pairs in the shown set.
  pub shown_pages: u32,
}

fn implicit(config: &Option<FeedbackConfig>) -> bool {
  config.as_ref().and_then(|c| c.recall_feedback).unwrap_or(true)
}

/// Confirm that the session's last recall was delivered: its results join the session's shown
/// set (explicit judgments become possible, automatic recall will not re-inject them unchanged,
/// their characters count against the session budget) and `shown` events are appended unless
/// `config.recallFeedback` is false.
#[napi(catch_unwind, ts_return_type = "Promise<FeedbackOutcome>")]
pub fn confirm_recall_shown<'env>(
  env: &'env Env,
  paths: VaultPaths,
  input: ConfirmShownInput,
) -> Result<PromiseRaw<'env, FeedbackOutcome>> {
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.to_core()?;
    let on = implicit(&input.config);
    Ok(core_record::confirm_shown(&paths, &input.session_id, on).map_err(core_err)?.into())
  })
}

/// Record feedback for a result the session showed (the spec's `wiki_recall_feedback` plus the
/// hooks' `opened` / `cited` / `shown_only`). Rejects with `feedback_not_shown` for a pair the
/// session did not show, `feedback_lock_busy` when an explicit event waits 2 s for the events
/// lock, `invalid_argument` for a bad action or correction.
#[napi(catch_unwind, ts_return_type = "Promise<FeedbackOutcome>")]
pub fn record_recall_feedback<'env>(
  env: &'env Env,
  paths: VaultPaths,
  input: RecallFeedbackInput,
) -> Result<PromiseRaw<'env, FeedbackOutcome>> {
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.to_core()?;
    let action = core_feedback::FeedbackAction::parse(&input.action).map_err(core_err)?;
    let session = input.session_id.unwrap_or_default();
    if session.is_empty() && action != core_feedback::FeedbackAction::ConflictSelected {
      return Err(invalid("sessionId is required for every action but conflict_selected"));
    }
    let on = implicit(&input.config);
    let out = core_record::record_feedback(
      &paths,
      &session,
      &input.vault_id,
      &input.page_id,
      action,
      input.correction.as_deref(),
      on,
    )
    .map_err(core_err)?;
    Ok(out.into())
  })
}

/// Rebuild `meta/recall-feedback.json` from the whole event stream plus correction observations
/// whose event is missing, ignoring deleted pages (part of a metadata rebuild).
#[napi(catch_unwind, ts_return_type = "Promise<FeedbackRebuildResult>")]
pub fn rebuild_feedback<'env>(
  env: &'env Env,
  paths: VaultPaths,
) -> Result<PromiseRaw<'env, FeedbackRebuildResult>> {
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.to_core()?;
    Ok(core_record::rebuild_feedback(&paths).map_err(core_err)?.into())
  })
}

/// A session's totals in the ledger (zeros for an unknown session).
#[napi(catch_unwind)]
pub fn recall_session_stats(session_id: String) -> RecallSessionStats {
  let (injections, chars, shown) = core_ledger::stats(&session_id);
  RecallSessionStats { injections, injected_chars: chars as u32, shown_pages: shown as u32 }
}

/// Forget a session (call when the host session ends); true when it existed.
#[napi(catch_unwind)]
pub fn end_recall_session(session_id: String) -> bool {
  core_ledger::end(&session_id)
}

/// Why automatic recall would skip `prompt` (`recall_skipped_chatter`,
/// `recall_skipped_machine_output`), or null when it is recall-shaped. Cheap: no index access.
#[napi(catch_unwind)]
pub fn recall_skip_reason(prompt: String) -> Option<String> {
  core_feedback::shape::skip_reason(&prompt).map(|r| r.code().to_string())
}
