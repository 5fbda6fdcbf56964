//! Recall feedback end to end on a real (lexical) index: the session ledger gates explicit
//! judgments, judgments move the final ranking within the ±0.02 bound, implicit capture can be
//! turned off, a correction is saved before its event and replayed when the event is missing, a
//! corrupt stream disables feedback without losing anything, deleted pages are ignored, and
//! session-aware automatic recall (gate, no re-injection unless changed, shared budget).

use std::fs;

use llm_wiki_core::events_lock::lock_path;
use llm_wiki_core::feedback::events::events_path;
use llm_wiki_core::feedback::projection::{self, projection_path};
use llm_wiki_core::feedback::record::{confirm_shown, rebuild_feedback, record_feedback};
use llm_wiki_core::feedback::{ledger, query_hash, FeedbackAction};
use llm_wiki_core::retrieve::recall::SessionRecall;
use llm_wiki_core::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RecallResponse, RetrievalMode};
use llm_wiki_core::store::{reindex_vault, Component, ReindexOptions};
use llm_wiki_core::testkit::{temp_vault, write_page};
use llm_wiki_core::vault::VaultPaths;

const QUERY: &str = "release pipeline staging rollout";

fn reindex(p: &VaultPaths) {
  let opts = ReindexOptions { components: vec![Component::Lexical], ..Default::default() };
  let r = reindex_vault(p, &opts);
  assert!(r.ok, "{:?}", r.errors);
}

fn vault() -> (tempfile::TempDir, VaultPaths) {
  let (t, p) = temp_vault();
  // Two near-twins for QUERY, so the bounded term decides their order.
  write_page(
    &p,
    "concepts/release-a",
    "Release Pipeline A",
    "The release pipeline promotes builds to staging before the rollout.",
  );
  write_page(
    &p,
    "concepts/release-b",
    "Release Pipeline B",
    "The release pipeline promotes builds to staging before the rollout.",
  );
  write_page(&p, "concepts/sourdough", "Sourdough Starter", "The starter is fed with rye flour twice a day.");
  reindex(&p);
  (t, p)
}

fn explicit(session: Option<&str>, feedback: bool) -> RecallOptions {
  RecallOptions {
    feedback,
    session: session.map(|s| SessionRecall { id: s.into(), budget_chars: None }),
    ..RecallOptions::new(RecallPolicy::explicit(Some(5)), RetrievalMode::Lexical)
  }
}

fn ids(r: &RecallResponse) -> Vec<String> {
  r.results.iter().map(|r| r.id.clone()).collect()
}

fn vault_id(r: &RecallResponse) -> String {
  r.results[0].vault_id.clone()
}

#[test]
fn judgments_need_a_shown_pair_and_move_ranking_within_the_bound() {
  let (_t, p) = vault();
  let s = "fb-judge";
  let before = recall_wiki(&p, QUERY, &explicit(Some(s), true)).unwrap();
  let order = ids(&before);
  assert_eq!(order.len(), 2, "{order:?}");
  let vid = vault_id(&before);
  // Offered but not confirmed: not judgeable yet.
  let e = record_feedback(&p, s, &vid, &order[1], FeedbackAction::Relevant, None, true).unwrap_err();
  assert_eq!(e.code(), "feedback_not_shown");
  assert_eq!(confirm_shown(&p, s, true).unwrap().events, 2);
  // A page never shown, another session, another vault id: refused.
  for (sess, v, page) in [
    (s, vid.as_str(), "concepts/sourdough"),
    ("other", vid.as_str(), order[0].as_str()),
    (s, "nope", order[0].as_str()),
  ] {
    assert!(record_feedback(&p, sess, v, page, FeedbackAction::Irrelevant, None, true).is_err());
  }
  assert!(record_feedback(&p, s, &vid, &order[0], FeedbackAction::Relevant, Some("text"), true).is_err());
  let (top, second) = (&order[0], &order[1]);
  assert_eq!(
    record_feedback(&p, s, &vid, second, FeedbackAction::Relevant, None, true).unwrap().status,
    "recorded"
  );
  assert_eq!(
    record_feedback(&p, s, &vid, top, FeedbackAction::Irrelevant, None, true).unwrap().status,
    "recorded"
  );
  // The stream holds hashes, never the query.
  let stream = fs::read_to_string(events_path(&p.meta)).unwrap();
  assert_eq!(stream.lines().count(), 4);
  assert!(!stream.contains("pipeline") && stream.contains(&query_hash(QUERY)));

  let after = recall_wiki(&p, QUERY, &explicit(None, true)).unwrap();
  assert_eq!(ids(&after), vec![second.clone(), top.clone()]);
  let (a, b) = (&after.results[0], &after.results[1]);
  assert!(a.match_reasons.iter().any(|m| m == "feedback"));
  let base = |r: &llm_wiki_core::retrieve::RecallResult| {
    recall_wiki(&p, QUERY, &explicit(None, false))
      .unwrap()
      .results
      .into_iter()
      .find(|x| x.id == r.id)
      .unwrap()
      .multiplier
  };
  assert!((a.multiplier - base(a) - 0.02).abs() < 1e-9, "{} vs {}", a.multiplier, base(a));
  assert!((b.multiplier - base(b) + 0.02).abs() < 1e-9);
  // The ablation switch restores the unadjusted order.
  assert_eq!(ids(&recall_wiki(&p, QUERY, &explicit(None, false)).unwrap()), order);
  // Another query: judgments count for the query they were made for only (OTHER_QUERY_SHARE).
  let other = recall_wiki(&p, "staging rollout builds", &explicit(None, true)).unwrap();
  for r in &other.results {
    let off = recall_wiki(&p, "staging rollout builds", &explicit(None, false)).unwrap();
    let m0 = off.results.iter().find(|x| x.id == r.id).unwrap().multiplier;
    assert!(
      (r.multiplier - m0).abs() <= 0.02 * llm_wiki_core::feedback::projection::OTHER_QUERY_SHARE + 1e-9
    );
  }
  ledger::end(s);
}

#[test]
fn implicit_capture_can_be_turned_off_explicit_cannot() {
  let (_t, p) = vault();
  let s = "fb-implicit";
  let r = recall_wiki(&p, QUERY, &explicit(Some(s), true)).unwrap();
  let vid = vault_id(&r);
  assert_eq!(confirm_shown(&p, s, false).unwrap().status, "disabled");
  for a in [FeedbackAction::Opened, FeedbackAction::Cited, FeedbackAction::ShownOnly] {
    assert_eq!(record_feedback(&p, s, &vid, &r.results[0].id, a, None, false).unwrap().status, "disabled");
  }
  assert!(!events_path(&p.meta).exists());
  assert_eq!(
    record_feedback(&p, s, &vid, &r.results[0].id, FeedbackAction::Relevant, None, false).unwrap().events,
    1
  );
  assert_eq!(fs::read_to_string(events_path(&p.meta)).unwrap().lines().count(), 1);
  ledger::end(s);
}

#[test]
fn correction_is_saved_first_pending_when_the_lock_is_busy_and_replayed() {
  let (_t, p) = vault();
  let s = "fb-correct";
  let r = recall_wiki(&p, QUERY, &explicit(Some(s), true)).unwrap();
  confirm_shown(&p, s, false).unwrap();
  let (vid, page) = (vault_id(&r), r.results[0].id.clone());
  assert!(record_feedback(&p, s, &vid, &page, FeedbackAction::Corrected, None, true).is_err());
  assert!(record_feedback(&p, s, &vid, &page, FeedbackAction::Corrected, Some("   "), true).is_err());
  assert!(!p.wiki.join("sources").exists(), "a refused correction writes nothing");
  // A live holder of the events lock (an OS lock through another handle, as another process
  // holds it): the append times out.
  fs::create_dir_all(&p.meta).unwrap();
  let holder =
    fs::OpenOptions::new().create(true).truncate(false).write(true).open(lock_path(&p.meta)).unwrap();
  holder.lock().unwrap();
  let out = record_feedback(
    &p,
    s,
    &vid,
    &page,
    FeedbackAction::Corrected,
    Some("Staging was removed; we roll out with canaries."),
    true,
  )
  .unwrap();
  assert_eq!(out.status, "correction_saved_feedback_pending");
  assert_eq!(out.diagnostics[0].code, "feedback_lock_busy");
  let obs = out.observation.unwrap();
  let text = fs::read_to_string(p.wiki.join(format!("{obs}.md"))).unwrap();
  assert!(text.contains("category: recall-correction") && text.contains("canaries"));
  assert!(
    !events_path(&p.meta).exists()
      || !fs::read_to_string(events_path(&p.meta)).unwrap().contains("corrected")
  );
  // Explicit relevance also fails while busy (2 s), with the typed error.
  let e = record_feedback(&p, s, &vid, &page, FeedbackAction::Relevant, None, true).unwrap_err();
  assert_eq!(e.code(), "feedback_lock_busy");
  drop(holder);
  // The rebuild replays the observation into the projection.
  let rebuilt = rebuild_feedback(&p).unwrap();
  assert_eq!(rebuilt.replayed, vec![obs.clone()]);
  let now = llm_wiki_core::retrieve::trust::now_secs();
  assert!(projection::current(&p.meta, now).term(&vid, &page, &query_hash(QUERY), now) < 0.0);
  // With the lock free the correction's event lands and names the observation; a rebuild no
  // longer replays that one.
  let ok =
    record_feedback(&p, s, &vid, &page, FeedbackAction::Corrected, Some("Second correction."), true).unwrap();
  assert_eq!(ok.status, "recorded");
  let again = rebuild_feedback(&p).unwrap();
  assert_eq!(again.replayed, vec![obs]);
  ledger::end(s);
}

#[test]
fn corrupt_stream_disables_feedback_and_loses_nothing() {
  let (_t, p) = vault();
  let s = "fb-corrupt";
  let r = recall_wiki(&p, QUERY, &explicit(Some(s), true)).unwrap();
  confirm_shown(&p, s, true).unwrap();
  let vid = vault_id(&r);
  record_feedback(&p, s, &vid, &r.results[1].id, FeedbackAction::Relevant, None, true).unwrap();
  rebuild_feedback(&p).unwrap();
  let projection_before = fs::read(projection_path(&p.meta)).unwrap();
  let mut stream = fs::read(events_path(&p.meta)).unwrap();
  stream.extend_from_slice(b"{\"kind\": \"recall_feedback\", \"schema\": 7}\n");
  fs::write(events_path(&p.meta), &stream).unwrap();
  let out = recall_wiki(&p, QUERY, &explicit(None, true)).unwrap();
  assert!(out.diagnostics.iter().any(|d| d.code == "feedback_events_corrupt"), "{:?}", out.diagnostics);
  assert_eq!(ids(&out), ids(&recall_wiki(&p, QUERY, &explicit(None, false)).unwrap()));
  let rb = rebuild_feedback(&p).unwrap();
  assert!(!rb.enabled && rb.diagnostics[0].code == "feedback_events_corrupt");
  assert_eq!(fs::read(events_path(&p.meta)).unwrap(), stream);
  assert_eq!(fs::read(projection_path(&p.meta)).unwrap(), projection_before);
  ledger::end(s);
}

#[test]
fn deleted_pages_are_ignored() {
  let (_t, p) = vault();
  let s = "fb-deleted";
  let r = recall_wiki(&p, QUERY, &explicit(Some(s), true)).unwrap();
  confirm_shown(&p, s, true).unwrap();
  let vid = vault_id(&r);
  let gone = r.results[0].id.clone();
  record_feedback(&p, s, &vid, &gone, FeedbackAction::Relevant, None, true).unwrap();
  fs::remove_file(p.wiki.join(format!("{gone}.md"))).unwrap();
  reindex(&p);
  let rb = rebuild_feedback(&p).unwrap();
  assert_eq!(rb.pages, 0);
  let after = recall_wiki(&p, QUERY, &explicit(None, true)).unwrap();
  assert!(!ids(&after).contains(&gone));
  ledger::end(s);
}

#[test]
fn session_aware_automatic_recall() {
  let (_t, p) = vault();
  let auto = |s: &str, budget: Option<u32>| RecallOptions {
    session: Some(SessionRecall { id: s.into(), budget_chars: budget }),
    ..RecallOptions::new(RecallPolicy::automatic(), RetrievalMode::Lexical)
  };
  let s = "fb-session";
  let prompt = "Release Pipeline A";
  let first = recall_wiki(&p, prompt, &auto(s, None)).unwrap();
  assert!(ids(&first).contains(&"concepts/release-a".to_string()), "{:?}", first.trace);
  // Not delivered yet: the same prompt still recalls it.
  assert_eq!(ids(&recall_wiki(&p, prompt, &auto(s, None)).unwrap()), ids(&first));
  confirm_shown(&p, s, false).unwrap();
  let second = recall_wiki(&p, prompt, &auto(s, None)).unwrap();
  assert!(!ids(&second).contains(&"concepts/release-a".to_string()), "{:?}", ids(&second));
  assert!(second.trace.iter().any(|t| t.contains("already injected")));
  // Another session is not affected; explicit recall is not filtered.
  assert_eq!(ids(&recall_wiki(&p, prompt, &auto("fb-session-2", None)).unwrap()), ids(&first));
  assert!(ids(&recall_wiki(&p, prompt, &explicit(Some(s), true)).unwrap())
    .contains(&"concepts/release-a".to_string()));
  // The page changes: injected again.
  write_page(
    &p,
    "concepts/release-a",
    "Release Pipeline A",
    "The release pipeline now promotes builds to a canary before the rollout.",
  );
  reindex(&p);
  assert!(ids(&recall_wiki(&p, prompt, &auto(s, None)).unwrap()).contains(&"concepts/release-a".to_string()));
  // Chatter and pasted traces skip recall with a code.
  for (text, code) in [
    ("thanks!", "recall_skipped_chatter"),
    ("run the tests again", "recall_skipped_chatter"),
    (
      "Error: release pipeline\n    at a (/x/a.js:1:2)\n    at b (/x/b.js:3:4)",
      "recall_skipped_machine_output",
    ),
  ] {
    let r = recall_wiki(&p, text, &auto(s, None)).unwrap();
    assert!(r.results.is_empty() && r.diagnostics[0].code == code);
  }
  // A shared budget: once spent, nothing more is recalled in the session.
  let b = "fb-budget";
  let r = recall_wiki(&p, prompt, &auto(b, Some(400))).unwrap();
  assert!(!r.results.is_empty());
  confirm_shown(&p, b, false).unwrap();
  let (_, charged, _) = ledger::stats(b);
  assert!(charged > 0 && charged <= 400);
  let r2 = recall_wiki(&p, "sourdough starter rye flour", &auto(b, Some(charged as u32))).unwrap();
  assert!(r2.results.is_empty());
  assert_eq!(r2.diagnostics[0].code, "recall_session_budget_spent");
  for x in [s, "fb-session-2", b] {
    ledger::end(x);
  }
}

/// Issue 43, item 7: a `conflict_selected` choice names a page id like every other feedback target
/// (absolute, `..` and `.md` ids are `invalid_argument`, never an existence probe of a file
/// outside the vault) and counts only for a page the session was shown.
#[test]
fn conflict_choices_are_validated_and_need_a_shown_page() {
  let (t, p) = vault();
  let s = "fb-conflict";
  let r = recall_wiki(&p, QUERY, &explicit(Some(s), true)).unwrap();
  let vid = vault_id(&r);
  confirm_shown(&p, s, false).unwrap();
  // A Markdown file beside the vault, named relative to wiki/ and absolutely.
  fs::write(t.path().join("outside.md"), "# Outside\n").unwrap();
  let rel_out =
    format!("{}/outside", "../".repeat(p.wiki.strip_prefix(t.path()).unwrap().components().count()));
  let abs_out = t.path().join("outside").to_string_lossy().into_owned();
  for bad in
    [rel_out.as_str(), abs_out.as_str(), "concepts/../concepts/release-a", "concepts/release-a.md", ""]
  {
    let e = record_feedback(&p, s, &vid, bad, FeedbackAction::ConflictSelected, None, true).unwrap_err();
    assert_eq!(e.code(), "invalid_argument", "{bad}: {e}");
  }
  // A real page the session never showed, or no session: not counted.
  for (sess, page) in [(s, "concepts/sourdough"), ("", r.results[0].id.as_str())] {
    let e = record_feedback(&p, sess, &vid, page, FeedbackAction::ConflictSelected, None, true).unwrap_err();
    assert_eq!(e.code(), "feedback_not_shown", "{sess:?} {page}: {e}");
  }
  assert!(!events_path(&p.meta).exists() || fs::read_to_string(events_path(&p.meta)).unwrap().is_empty());
  // A shown page: recorded.
  let out =
    record_feedback(&p, s, &vid, &r.results[0].id, FeedbackAction::ConflictSelected, None, true).unwrap();
  assert_eq!((out.status.as_str(), out.events), ("recorded", 1));
  ledger::end(s);
}

/// Issue 42 item 7: the shown state survives the process. A second process (or the same host
/// after a restart) has an empty in-memory ledger — simulated by `ledger::end` — and still has
/// its judgments accepted for pairs the first confirmed; other sessions still are refused; a
/// corrupt, truncated or huge ledger file is a diagnostic, never a crash.
#[test]
fn shown_state_survives_the_process_and_a_damaged_ledger_file_is_a_diagnostic() {
  use llm_wiki_core::feedback::persist::{self, ledger_path};
  let (_t, p) = vault();
  let s = "fb-persist";
  let r = recall_wiki(&p, QUERY, &explicit(Some(s), true)).unwrap();
  let vid = vault_id(&r);
  let (top, second) = (r.results[0].id.clone(), r.results[1].id.clone());
  assert!(confirm_shown(&p, s, false).unwrap().diagnostics.is_empty());
  assert!(ledger_path(&p.meta).is_file());
  // "Process 2": nothing in memory.
  ledger::end(s);
  let out = record_feedback(&p, s, &vid, &top, FeedbackAction::Relevant, None, true).unwrap();
  assert_eq!((out.status.as_str(), out.events), ("recorded", 1));
  // The event carries the shown entry's query hash and rank, not caller text.
  let stream = fs::read_to_string(events_path(&p.meta)).unwrap();
  assert!(stream.contains(&query_hash(QUERY)) && stream.contains("\"shown_rank\":0"), "{stream}");
  ledger::end(s);
  assert_eq!(
    record_feedback(&p, s, &vid, &second, FeedbackAction::ConflictSelected, None, true).unwrap().events,
    1
  );
  // Another session is still refused.
  ledger::end(s);
  let e =
    record_feedback(&p, "fb-persist-other", &vid, &top, FeedbackAction::Irrelevant, None, true).unwrap_err();
  assert_eq!(e.code(), "feedback_not_shown");

  // Damaged files: torn tail, garbage, a huge file. Never a panic or an error other than
  // feedback_not_shown; a later confirmation still works.
  let file = ledger_path(&p.meta);
  let good = fs::read_to_string(&file).unwrap();
  fs::write(&file, format!("{}\u{0}garbage\n{}", good, &good[..good.len() / 2])).unwrap();
  ledger::end(s);
  let out = record_feedback(&p, s, &vid, &top, FeedbackAction::Irrelevant, None, true).unwrap();
  assert!(out.diagnostics.iter().any(|d| d.code == "recall_ledger_corrupt"), "{:?}", out.diagnostics);
  fs::write(&file, vec![b'x'; (persist::READ_CAP + 1024) as usize]).unwrap();
  ledger::end(s);
  let e = record_feedback(&p, s, &vid, &top, FeedbackAction::Irrelevant, None, true).unwrap_err();
  assert_eq!(e.code(), "feedback_not_shown");
  recall_wiki(&p, QUERY, &explicit(Some(s), true)).unwrap();
  let out = confirm_shown(&p, s, false).unwrap();
  assert!(out.diagnostics.iter().any(|d| d.code == "recall_ledger_partial"), "{:?}", out.diagnostics);
  assert!(fs::metadata(&file).unwrap().len() < persist::MAX_BYTES);
  ledger::end(s);
  assert_eq!(record_feedback(&p, s, &vid, &top, FeedbackAction::Cited, None, true).unwrap().events, 1);
  ledger::end(s);
}

/// Issue 42 item 7, automatic recall: a restarted host (the in-memory ledger forgot the session)
/// still does not re-inject a page the session was shown unchanged, and the session budget it
/// spent stays spent.
#[test]
fn a_restarted_host_keeps_the_sessions_injections_and_budget() {
  let (_t, p) = vault();
  let auto = |s: &str, budget: Option<u32>| RecallOptions {
    session: Some(SessionRecall { id: s.into(), budget_chars: budget }),
    ..RecallOptions::new(RecallPolicy::automatic(), RetrievalMode::Lexical)
  };
  let s = "fb-restart";
  let prompt = "Release Pipeline A";
  let first = recall_wiki(&p, prompt, &auto(s, Some(100_000))).unwrap();
  assert!(ids(&first).contains(&"concepts/release-a".to_string()));
  confirm_shown(&p, s, false).unwrap();
  let (_, charged, _) = ledger::stats(s);
  assert!(charged > 0);
  // Restart.
  ledger::end(s);
  let again = recall_wiki(&p, prompt, &auto(s, Some(100_000))).unwrap();
  assert!(!ids(&again).contains(&"concepts/release-a".to_string()), "{:?}", again.trace);
  assert!(again.trace.iter().any(|t| t.contains("already injected")), "{:?}", again.trace);
  assert_eq!(ledger::stats(s).1, charged);
  // A budget the first process spent is spent after the restart.
  ledger::end(s);
  let r = recall_wiki(&p, "sourdough starter rye flour", &auto(s, Some(charged as u32))).unwrap();
  assert_eq!(r.diagnostics[0].code, "recall_session_budget_spent");
  ledger::end(s);
}
