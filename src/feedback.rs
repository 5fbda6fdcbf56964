//! Feedback exports: `confirmRecallShown`, `recordRecallFeedback`, `rebuildFeedback`,
//! `compactFeedback`, `feedbackStatus`, and the
//! session ledger's small synchronous helpers. Their results are the engine's shapes
//! (`llm_wiki_core::feedback`), declared there only; errors map through `error.rs`.

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use llm_wiki_core::feedback::{self as core_feedback, ledger as core_ledger, record as core_record};
use llm_wiki_core::util::num::sat_u32;

use crate::error::{core_err, invalid};
use crate::task;
use crate::types::VaultPaths;

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
  /// Session whose shown set holds the pair (required for every action, `conflict_selected`
  /// included; optional in the type for compatibility, a call without it is `invalid_argument`).
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
) -> Result<PromiseRaw<'env, core_record::FeedbackOutcome>> {
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    let on = implicit(&input.config);
    core_record::confirm_shown(&paths, &input.session_id, on).map_err(core_err)
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
) -> Result<PromiseRaw<'env, core_record::FeedbackOutcome>> {
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    let action = core_feedback::FeedbackAction::parse(&input.action).map_err(core_err)?;
    let session = input.session_id.unwrap_or_default();
    if session.is_empty() {
      return Err(invalid("sessionId is required (a feedback target must be a page the session was shown)"));
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
    Ok(out)
  })
}

/// Progress of a pass over `meta/events.jsonl` (`rebuildFeedback`, `compactFeedback`): every
/// 64 MiB and at the end.
#[napi(object)]
#[derive(Clone)]
pub struct FeedbackStreamProgress {
  pub bytes_read: f64,
  pub total_bytes: f64,
}

type StreamProgressFn =
  ThreadsafeFunction<FeedbackStreamProgress, (), FeedbackStreamProgress, Status, false, true>;

/// Options of `rebuildFeedback`.
#[napi(object, object_to_js = false)]
pub struct RebuildFeedbackOptions {
  /// Called on the JS thread as the stream is read.
  // Spelled out (not the alias): the d.ts generator sees the type as written.
  pub on_progress:
    Option<ThreadsafeFunction<FeedbackStreamProgress, (), FeedbackStreamProgress, Status, false, true>>,
}

fn progress_sink(cb: Option<StreamProgressFn>) -> impl FnMut(u64, u64) {
  move |read, total| {
    if let Some(cb) = &cb {
      cb.call(
        FeedbackStreamProgress { bytes_read: read as f64, total_bytes: total as f64 },
        ThreadsafeFunctionCallMode::NonBlocking,
      );
    }
  }
}

/// Rebuild `meta/recall-feedback.json` from the committed archives' sums and the whole event
/// stream (O(stream) time, bounded memory), plus correction observations and resolution records
/// whose event is missing (`replayed`), ignoring deleted pages (part of a metadata rebuild).
/// Settles an interrupted `compactFeedback` first.
#[napi(catch_unwind, ts_return_type = "Promise<FeedbackRebuildResult>")]
pub fn rebuild_feedback<'env>(
  env: &'env Env,
  paths: VaultPaths,
  options: Option<RebuildFeedbackOptions>,
) -> Result<PromiseRaw<'env, core_record::RebuildOutcome>> {
  let mut progress = progress_sink(options.and_then(|o| o.on_progress));
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    core_record::rebuild_feedback_with(&paths, &mut progress).map_err(core_err)
  })
}

/// Options of `compactFeedback`.
#[napi(object, object_to_js = false)]
pub struct CompactFeedbackOptions {
  /// Move `recall_feedback` events older than this many days (default 360 = four half-lives;
  /// 0 moves all of them).
  pub older_than_days: Option<f64>,
  /// Count what would move; write nothing.
  pub dry_run: Option<bool>,
  /// Called on the JS thread as the stream is read.
  // Spelled out (not the alias): the d.ts generator sees the type as written.
  pub on_progress:
    Option<ThreadsafeFunction<FeedbackStreamProgress, (), FeedbackStreamProgress, Status, false, true>>,
}

/// Explicit, user-invoked compaction of the active vault's `meta/events.jsonl`: under the events
/// lock, moves `recall_feedback` lines older than the cutoff into
/// `meta/events-archive/recall-feedback-<time>-<run>.jsonl` (its manifest keeps their sums, so
/// ranking is unchanged), keeps every other line byte-identical and in order, replaces the
/// stream by atomic rename and rebuilds the projection. Never automatic. Rejects with
/// `feedback_lock_busy` (2 s), `feedback_compaction_failed` (an interrupted run cannot be
/// settled: everything left in place), `invalid_argument`, `io_error`.
#[napi(catch_unwind, ts_return_type = "Promise<CompactFeedbackResult>")]
pub fn compact_feedback<'env>(
  env: &'env Env,
  paths: VaultPaths,
  options: Option<CompactFeedbackOptions>,
) -> Result<PromiseRaw<'env, core_feedback::compact::CompactOutcome>> {
  let (older, dry, cb) = match options {
    Some(o) => (o.older_than_days, o.dry_run, o.on_progress),
    None => (None, None, None),
  };
  let mut progress = progress_sink(cb);
  task::spawn(env, None, task::Priority::Background, move || {
    let paths = paths.resolve()?;
    let mut opts = core_feedback::compact::CompactOptions::default();
    if let Some(d) = older {
      opts.older_than_days = d;
    }
    opts.dry_run = dry.unwrap_or(false);
    core_record::compact_feedback(&paths, &opts, &mut progress).map_err(core_err)
  })
}

/// The active vault's event stream: size, feedback bytes, what `compactFeedback` would move,
/// archives, pending recovery. Reads the projection incrementally, never the whole stream.
#[napi(catch_unwind, ts_return_type = "Promise<FeedbackStreamStatus>")]
pub fn feedback_status<'env>(
  env: &'env Env,
  paths: VaultPaths,
) -> Result<PromiseRaw<'env, core_feedback::compact::StreamStatus>> {
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    Ok(core_feedback::compact::stream_status(&paths.meta))
  })
}

/// A session's totals in the ledger (zeros for an unknown session).
#[napi(catch_unwind)]
pub fn recall_session_stats(session_id: String) -> RecallSessionStats {
  let (injections, chars, shown) = core_ledger::stats(&session_id);
  RecallSessionStats { injections, injected_chars: sat_u32(chars), shown_pages: sat_u32(shown) }
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
