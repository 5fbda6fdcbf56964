//! Issue 43's soak mix (`reliability soak --mixed`): besides the two processes' reindexes and
//! recalls, one process keeps a watcher on the vault (its catch-up reindex and every debounced
//! batch of its own page edits), the other resolves conflicts between known pages and records
//! recall feedback (a recall in a session, the shown pages confirmed, a `relevant` judgment).
//! Every outcome is counted by operation and code; the vault ids seen (config.json before each
//! recall, each reindex's result) must stay one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::soak::{SoakPlan, WorkerReport};
use crate::synth::Rng;
use llm_wiki_core::error::Result;
use llm_wiki_core::feedback::record::{confirm_shown, record_feedback};
use llm_wiki_core::feedback::FeedbackAction;
use llm_wiki_core::memory::resolve::{resolve_conflict, ResolveRequest};
use llm_wiki_core::retrieve::recall::SessionRecall;
use llm_wiki_core::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RetrievalMode};
use llm_wiki_core::store::Component;
use llm_wiki_core::vault::VaultPaths;
use llm_wiki_core::watch::{watch_wiki, WatchEventKind, WatchHandle, WatchOptions, WatchSink};

/// The vault id config.json holds now (none before the first reindex wrote one).
pub fn config_vault_id(paths: &VaultPaths) -> Option<String> {
  let config = llm_wiki_core::vault::config::read_config(paths).ok()?;
  config.get("vault_id")?.as_str().map(str::to_string)
}

/// Start the watcher of the `watcher` role (lexical: its batches race the explicit reindexes
/// of both processes for the writer lock); its `indexed` and `error` events are counted.
pub fn start_watcher(paths: &VaultPaths, report: Arc<Mutex<WorkerReport>>) -> Result<WatchHandle> {
  let sink: WatchSink = Arc::new(move |e| {
    let outcome = match e.kind {
      WatchEventKind::Indexed => "ok".to_string(),
      WatchEventKind::Error => e.code.clone().unwrap_or_else(|| "error".into()),
      WatchEventKind::Overflow | WatchEventKind::VaultGone => e.kind.as_str().to_string(),
      _ => return,
    };
    let message = e.message.clone().unwrap_or_default();
    report.lock().unwrap_or_else(|p| p.into_inner()).op("watch", &outcome, || message);
  });
  let opts = WatchOptions {
    components: vec![Component::Lexical],
    debounce: Duration::from_millis(200),
    ..Default::default()
  };
  watch_wiki(paths, opts, sink)
}

/// One round of the `writer` role's other operations: a conflict resolution between two known
/// pages (relation `qualifies`, which keeps both recalled; a repeat is an idempotent no-op), and
/// a recall whose shown pages are confirmed and the first judged `relevant`.
pub(crate) fn writer_ops(
  paths: &VaultPaths,
  plan: &SoakPlan,
  rng: &mut Rng,
  run: u64,
  report: &Mutex<WorkerReport>,
) {
  let pick = |rng: &mut Rng| plan.queries[rng.below(plan.queries.len())].1.clone();
  let (a, b) = (pick(rng), pick(rng));
  if a != b {
    let req = ResolveRequest {
      vault: "project".into(),
      selected: a.clone(),
      other: b.clone(),
      relation: "qualifies".into(),
      scope: None,
      rationale: Some(format!("soak round {run}")),
      replaces: None,
      update_index: Some(true),
    };
    let r = resolve_conflict(paths, &req);
    let mut rep = report.lock().unwrap_or_else(|p| p.into_inner());
    match r {
      Ok(o) => rep.op("resolve", if o.created { "ok" } else { "ok_repeat" }, String::new),
      Err(e) => rep.op("resolve", e.code(), || format!("{a} / {b}: {e}")),
    }
  }
  let session = format!("soak-{}-{run}", std::process::id());
  let (q, _) = &plan.queries[rng.below(plan.queries.len())];
  let opts = RecallOptions {
    feedback: true,
    session: Some(SessionRecall { id: session.clone(), budget_chars: None }),
    ..RecallOptions::new(RecallPolicy::explicit(Some(5)), RetrievalMode::Lexical)
  };
  let outcome = recall_wiki(paths, q, &opts).and_then(|r| {
    confirm_shown(paths, &session, true)?;
    match r.results.first() {
      Some(top) => {
        record_feedback(paths, &session, &top.vault_id, &top.id, FeedbackAction::Relevant, None, true)
          .map(|o| o.status)
      }
      None => Ok("no_result".to_string()),
    }
  });
  let mut rep = report.lock().unwrap_or_else(|p| p.into_inner());
  match outcome {
    Ok(status) if status == "recorded" => rep.op("feedback", "ok", String::new),
    Ok(status) => rep.op("feedback", &status, || q.clone()),
    Err(e) => rep.op("feedback", e.code(), || format!("{q}: {e}")),
  }
}
