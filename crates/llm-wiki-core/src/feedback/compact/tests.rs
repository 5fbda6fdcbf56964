use std::collections::HashMap;
use std::io::Write as _;

use super::*;
use crate::feedback::events::{append_events, tests::ev, FeedbackEvent};
use crate::feedback::FeedbackAction;

const DAY: i64 = 86_400;

fn at(e: &mut FeedbackEvent, days_ago: i64) {
  e.timestamp = iso_from_ms((crate::retrieve::trust::now_secs() - days_ago * DAY) * 1000);
}

/// A stream of the client's own lines, old and recent feedback, in a mixed order. Returns the
/// lines (with their newlines) and which of them are old feedback (> 400 days).
fn mixed_stream(meta: &Path) -> (Vec<Vec<u8>>, Vec<bool>) {
  fs::create_dir_all(meta).unwrap();
  let mut lines = Vec::new();
  let mut old = Vec::new();
  let actions = [
    FeedbackAction::Relevant,
    FeedbackAction::Irrelevant,
    FeedbackAction::Cited,
    FeedbackAction::Opened,
    FeedbackAction::ShownOnly,
    FeedbackAction::Shown,
    FeedbackAction::ConflictSelected,
  ];
  for i in 0..140i64 {
    if i % 5 == 0 {
      // Other kinds, spelled as the client spells them (key order, spacing, unicode): kept as is.
      lines.push(
        format!("{{\"kind\": \"observe\",  \"slug\": \"n-{i}\", \"note\": \"caf\u{e9} \u{2014} {i}\"}}\n")
          .into_bytes(),
      );
      old.push(false);
      continue;
    }
    let mut e = ev(&format!("p{}", i % 7), actions[(i % 7) as usize]);
    if e.action == FeedbackAction::ConflictSelected {
      e.query_hash.clear();
      e.resolution = Some(format!("resolution-{i}"));
    }
    let days = if i % 3 == 0 { 10 } else { 400 + i * 3 };
    at(&mut e, days);
    let mut l = serde_json::to_vec(&e).unwrap();
    l.push(b'\n');
    lines.push(l);
    old.push(days > 360);
  }
  let mut f = File::create(events_path(meta)).unwrap();
  for l in &lines {
    f.write_all(l).unwrap();
  }
  (lines, old)
}

fn fresh(meta: &Path) -> Projection {
  let mut p = Projection::default();
  projection::fold(meta, &mut p, crate::retrieve::trust::now_secs());
  p
}

fn assert_same(a: &Projection, b: &Projection) {
  assert_eq!(a.events, b.events);
  assert!(a.corrupt.is_none() && b.corrupt.is_none(), "{:?} {:?}", a.corrupt, b.corrupt);
  for (x, y) in [(&a.pages, &b.pages), (&a.queries, &b.queries), (&a.global, &b.global)] {
    assert_eq!(x.len(), y.len());
    for (k, s) in x {
      let t = y.get(k).unwrap_or_else(|| panic!("key {k:?} missing"));
      for (u, v) in [(s.signal, t.signal), (s.shown_only, t.shown_only)] {
        assert!((u - v).abs() <= 1e-9 * u.abs().max(1.0), "{k:?}: {u} vs {v}");
      }
    }
  }
  let sorted = |v: &Vec<String>| {
    let mut v = v.clone();
    v.sort();
    v
  };
  assert_eq!(sorted(&a.resolutions), sorted(&b.resolutions));
  assert_eq!(sorted(&a.corrections), sorted(&b.corrections));
}

fn run(meta: &Path, opts: &CompactOptions) -> Result<CompactOutcome> {
  let _held = events_lock::acquire(meta, EXPLICIT_WAIT).unwrap();
  compact_with(meta, opts, &mut |_, _| {}, &mut |_| Ok(()))
}

fn archived_lines(meta: &Path) -> Vec<Vec<u8>> {
  let mut out = Vec::new();
  for (_, m) in manifests(meta) {
    let m = m.unwrap();
    assert_eq!(m.state, ArchiveState::Committed);
    let bytes = fs::read(archive_dir(meta).join(&m.archive)).unwrap();
    out.extend(bytes.split_inclusive(|&b| b == b'\n').map(<[u8]>::to_vec));
  }
  out
}

#[test]
fn moves_old_feedback_keeps_every_other_line_and_the_projection() {
  let dir = tempfile::tempdir().unwrap();
  let meta = dir.path().join("meta");
  let (lines, old) = mixed_stream(&meta);
  let before = fresh(&meta);
  let out = run(&meta, &CompactOptions::default()).unwrap();
  assert_eq!(out.status, "compacted");
  let moved: Vec<Vec<u8>> = lines.iter().zip(&old).filter(|(_, o)| **o).map(|(l, _)| l.clone()).collect();
  let kept: Vec<u8> = lines.iter().zip(&old).filter(|(_, o)| !**o).flat_map(|(l, _)| l.clone()).collect();
  assert_eq!(out.moved_lines as usize, moved.len());
  assert!(out.moved_lines > 50 && out.lines == 140);
  // Every other line byte-identical and in order; the archive holds exactly the moved lines.
  assert_eq!(fs::read(events_path(&meta)).unwrap(), kept);
  assert_eq!(archived_lines(&meta), moved);
  assert_eq!(out.bytes_after, kept.len() as i64);
  // The projection is the same from the compacted stream (archived sums + stream) …
  assert_same(&fresh(&meta), &before);
  // … through the process cache, and from the rebuilt projection file.
  projection::invalidate(&meta);
  assert_same(&projection::current(&meta, crate::retrieve::trust::now_secs()), &before);
  let rebuilt = projection::rebuild(&meta, &[], None, crate::retrieve::trust::now_secs()).unwrap();
  assert_same(&rebuilt, &before);
  // Terms agree too (what ranking reads).
  let q = crate::feedback::query_hash("q");
  let now = crate::retrieve::trust::now_secs();
  for p in 0..7 {
    let page = format!("p{p}");
    assert!((rebuilt.term("v", &page, &q, now) - before.term("v", &page, &q, now)).abs() < 1e-12);
  }
  // Idempotent: nothing older is left, the stream and the archives stay as they are.
  let again = run(&meta, &CompactOptions::default()).unwrap();
  assert_eq!(again.status, "nothing_to_move");
  assert_eq!(fs::read(events_path(&meta)).unwrap(), kept);
  assert_eq!(manifests(&meta).len(), 1);
  assert!(!needs_recovery(&meta));
  // A second compaction with a shorter cutoff adds a second archive; still the same projection.
  let second = run(&meta, &CompactOptions { older_than_days: 0.0, ..Default::default() }).unwrap();
  assert_eq!(second.status, "compacted");
  assert_eq!(manifests(&meta).len(), 2);
  let left = fs::read_to_string(events_path(&meta)).unwrap();
  assert!(left.lines().all(|l| l.contains("\"observe\"")), "only the client's lines remain");
  assert_same(&fresh(&meta), &before);
}

#[test]
fn dry_run_counts_and_writes_nothing() {
  let dir = tempfile::tempdir().unwrap();
  let meta = dir.path().join("meta");
  let (lines, old) = mixed_stream(&meta);
  let bytes = fs::read(events_path(&meta)).unwrap();
  let out = run(&meta, &CompactOptions { dry_run: true, ..Default::default() }).unwrap();
  assert_eq!(out.status, "dry_run");
  assert_eq!(out.moved_lines as usize, old.iter().filter(|o| **o).count());
  assert_eq!(out.lines as usize, lines.len());
  assert_eq!(fs::read(events_path(&meta)).unwrap(), bytes);
  assert!(!archive_dir(&meta).exists());
  // The events lock's file stays (empty once released): only events.jsonl besides it.
  let names: Vec<_> = fs::read_dir(&meta).unwrap().map(|e| e.unwrap().file_name()).collect();
  assert!(names.iter().all(|n| n == "events.jsonl" || n == "events.lock"), "{names:?}");
  assert_eq!(fs::metadata(crate::events_lock::lock_path(&meta)).map(|m| m.len()).unwrap_or(0), 0);
  assert!(run(&meta, &CompactOptions { older_than_days: -1.0, ..Default::default() }).is_err());
}

#[test]
fn malformed_long_and_torn_lines_stay_in_place() {
  let dir = tempfile::tempdir().unwrap();
  let meta = dir.path().join("meta");
  let (lines, old) = mixed_stream(&meta);
  let mut f = OpenOptions::new().append(true).open(events_path(&meta)).unwrap();
  let long = format!("{{\"kind\":\"ingest\",\"blob\":\"{}\"}}\n", "x".repeat(MAX_LINE_BYTES + 100));
  let bad = b"{\"kind\": \"recall_feedback\", \"schema\": 9}\n";
  let torn = b"{\"schema\":1,\"kind\":\"recall_feed";
  f.write_all(long.as_bytes()).unwrap();
  f.write_all(bad).unwrap();
  f.write_all(torn).unwrap();
  drop(f);
  let out = run(&meta, &CompactOptions::default()).unwrap();
  assert_eq!(out.status, "compacted");
  assert_eq!((out.long_lines, out.malformed_lines), (1, 2));
  let mut kept: Vec<u8> = lines.iter().zip(&old).filter(|(_, o)| !**o).flat_map(|(l, _)| l.clone()).collect();
  kept.extend_from_slice(long.as_bytes());
  kept.extend_from_slice(bad);
  kept.extend_from_slice(torn);
  assert_eq!(fs::read(events_path(&meta)).unwrap(), kept);
  // The malformed line still disables feedback; the long line alone would only be skipped.
  assert!(fresh(&meta).corrupt.is_some());
}

#[test]
fn a_kill_at_any_step_loses_nothing_and_recovery_settles_it() {
  for step in [Step::FilesWritten, Step::ManifestPending, Step::Renamed, Step::Committed] {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    let (lines, old) = mixed_stream(&meta);
    let original = fs::read(events_path(&meta)).unwrap();
    let before = fresh(&meta);
    {
      let _held = events_lock::acquire(&meta, EXPLICIT_WAIT).unwrap();
      let e = compact_with(&meta, &CompactOptions::default(), &mut |_, _| {}, &mut |s| {
        if s == step {
          Err(Error::invalid("injected kill"))
        } else {
          Ok(())
        }
      })
      .unwrap_err();
      assert_eq!(e.code(), "invalid_argument");
    }
    // Right after the kill: the stream is the old one or the new one, whole; every line is in
    // the stream or in an archive file.
    let stream = fs::read(events_path(&meta)).unwrap();
    let renamed = matches!(step, Step::Renamed | Step::Committed);
    if renamed {
      assert_ne!(stream, original, "{step:?}");
    } else {
      assert_eq!(stream, original, "{step:?}");
    }
    let mut everywhere: HashMap<Vec<u8>, i32> = HashMap::new();
    for l in stream.split_inclusive(|&b| b == b'\n') {
      *everywhere.entry(l.to_vec()).or_default() += 1;
    }
    for p in fs::read_dir(archive_dir(&meta)).unwrap().flatten().map(|e| e.path()) {
      if p.extension().is_some_and(|x| x == "jsonl") {
        for l in fs::read(&p).unwrap().split_inclusive(|&b| b == b'\n') {
          *everywhere.entry(l.to_vec()).or_default() += 1;
        }
      }
    }
    for l in &lines {
      assert!(everywhere.get(l).copied().unwrap_or(0) >= 1, "{step:?}: a line was lost");
    }
    // Readers never count a pending archive twice: before the rename the stream still has its
    // lines and the manifest is not committed.
    if !renamed {
      assert_same(&fresh(&meta), &before);
    }
    assert_eq!(needs_recovery(&meta), step != Step::Committed, "{step:?}");
    if step == Step::Renamed {
      // The ranking path settles it when the lock is free, and counts the archive.
      projection::invalidate(&meta);
      assert_same(&projection::current(&meta, crate::retrieve::trust::now_secs()), &before);
      assert!(!needs_recovery(&meta));
      continue;
    }
    let done = {
      let _held = events_lock::acquire(&meta, EXPLICIT_WAIT).unwrap();
      recover(&meta).unwrap()
    };
    assert_eq!(done.is_empty(), step == Step::Committed, "{step:?}: {done:?}");
    assert!(!needs_recovery(&meta));
    // Settled: each line exactly once across the stream and the committed archives.
    let mut once: Vec<Vec<u8>> = fs::read(events_path(&meta))
      .unwrap()
      .split_inclusive(|&b| b == b'\n')
      .map(<[u8]>::to_vec)
      .chain(archived_lines(&meta))
      .collect();
    let mut want = lines.clone();
    once.sort();
    want.sort();
    assert_eq!(once, want, "{step:?}");
    assert_same(&fresh(&meta), &before);
    // A retry finishes the job (or finds it done) and ends where a clean run ends.
    let retry = run(&meta, &CompactOptions::default()).unwrap();
    assert_eq!(retry.status, if renamed { "nothing_to_move" } else { "compacted" }, "{step:?}");
    let kept: Vec<u8> = lines.iter().zip(&old).filter(|(_, o)| !**o).flat_map(|(l, _)| l.clone()).collect();
    assert_eq!(fs::read(events_path(&meta)).unwrap(), kept, "{step:?}");
    assert_eq!(manifests(&meta).len(), 1, "{step:?}");
    assert_same(&fresh(&meta), &before);
  }
}

#[test]
fn a_stream_rewritten_behind_a_pending_manifest_is_left_alone() {
  let dir = tempfile::tempdir().unwrap();
  let meta = dir.path().join("meta");
  mixed_stream(&meta);
  {
    let _held = events_lock::acquire(&meta, EXPLICIT_WAIT).unwrap();
    let inject = |s: Step| if s == Step::ManifestPending { Err(Error::invalid("kill")) } else { Ok(()) };
    let _ = compact_with(&meta, &CompactOptions::default(), &mut |_, _| {}, &mut { inject });
  }
  fs::write(events_path(&meta), b"{\"kind\":\"observe\"}\n").unwrap();
  let e = {
    let _held = events_lock::acquire(&meta, EXPLICIT_WAIT).unwrap();
    recover(&meta).unwrap_err()
  };
  assert_eq!(e.code(), "feedback_compaction_failed");
  assert_eq!(manifests(&meta).len(), 1, "the archive and its manifest stay");
  assert_eq!(
    compact_feedback(&meta, &CompactOptions::default(), &mut |_, _| {}, &mut || Ok(())).unwrap_err().code(),
    "feedback_compaction_failed"
  );
}

#[test]
fn appenders_wait_for_the_lock_and_land_in_the_new_stream() {
  let dir = tempfile::tempdir().unwrap();
  let meta = dir.path().join("meta");
  mixed_stream(&meta);
  let started = std::sync::Arc::new(std::sync::Barrier::new(2));
  let s2 = started.clone();
  let m2 = meta.clone();
  let compactor = std::thread::spawn(move || {
    let mut first = true;
    compact_feedback(
      &m2,
      &CompactOptions::default(),
      &mut |_, _| {
        if std::mem::take(&mut first) {
          s2.wait();
          std::thread::sleep(Duration::from_millis(600));
        }
      },
      &mut || Ok(()),
    )
    .unwrap()
  });
  started.wait();
  // While the run holds the lock: an implicit append is dropped after 250 ms …
  let mut fresh_event = ev("new", FeedbackAction::Relevant);
  fresh_event.page_id = "appended-during-compaction".into();
  let e = append_events(&meta, &[fresh_event.clone()], events_lock::IMPLICIT_WAIT).unwrap_err();
  assert_eq!(e.code(), "feedback_lock_busy");
  // … and a patient one lands after it, in the new stream.
  append_events(&meta, &[fresh_event], Duration::from_secs(30)).unwrap();
  let out = compactor.join().unwrap();
  assert_eq!(out.status, "compacted");
  let stream = fs::read_to_string(events_path(&meta)).unwrap();
  assert!(stream.lines().last().unwrap().contains("appended-during-compaction"));
  assert_eq!(stream.matches("appended-during-compaction").count(), 1);
  assert!(!archived_lines(&meta).iter().any(|l| String::from_utf8_lossy(l).contains("appended-during")));
}

#[test]
fn bytes_of_a_writer_ignoring_the_lock_are_carried_over() {
  let dir = tempfile::tempdir().unwrap();
  let meta = dir.path().join("meta");
  mixed_stream(&meta);
  let rogue = b"{\"kind\":\"observe\",\"slug\":\"rogue\"}\n";
  let _held = events_lock::acquire(&meta, EXPLICIT_WAIT).unwrap();
  let path = events_path(&meta);
  let out = compact_with(&meta, &CompactOptions::default(), &mut |_, _| {}, &mut |s| {
    if s == Step::ManifestPending {
      // Appends to the old file just before the rename, as an unlocked writer would.
      OpenOptions::new().append(true).open(&path).unwrap().write_all(rogue).unwrap();
    }
    Ok(())
  })
  .unwrap();
  assert_eq!(out.carried_bytes, rogue.len() as i64);
  assert!(fs::read(&path).unwrap().ends_with(rogue));
}

#[test]
fn status_reports_size_compactable_bytes_and_pending_recovery() {
  let dir = tempfile::tempdir().unwrap();
  let meta = dir.path().join("meta");
  mixed_stream(&meta);
  projection::invalidate(&meta);
  let st = stream_status(&meta);
  assert_eq!(st.stream_bytes, events_len_of(&meta) as i64);
  assert!(st.feedback_bytes > 0 && st.compactable_bytes > 0 && st.compactable_bytes < st.feedback_bytes);
  assert!(st.issues.is_empty(), "{:?}", st.issues);
  {
    let _held = events_lock::acquire(&meta, EXPLICIT_WAIT).unwrap();
    let _ = compact_with(&meta, &CompactOptions::default(), &mut |_, _| {}, &mut |s| {
      if s == Step::Renamed {
        Err(Error::invalid("kill"))
      } else {
        Ok(())
      }
    });
    // While someone holds the lock, status reports the pending recovery …
    let st = stream_status(&meta);
    assert!(st.recovery_pending && st.issues.contains(&"feedback_compaction_pending".to_string()));
  }
  // … and once it is free, the next read settles it.
  let st = stream_status(&meta);
  assert!(!st.recovery_pending && st.archives == 1 && st.archived_bytes > 0);
  assert!(st.compactable_bytes < st.archived_bytes);
}

fn events_len_of(meta: &Path) -> u64 {
  crate::feedback::events::events_len(meta)
}

#[test]
fn status_issues_name_a_pending_recovery_without_reading_the_stream() {
  let dir = tempfile::tempdir().unwrap();
  let meta = dir.path().join("meta");
  mixed_stream(&meta);
  assert!(status_issues(&meta).is_empty(), "a small stream with no pending run has no finding");
  fs::write(meta.join("events.jsonl.compact-deadbeef.tmp"), b"x").unwrap();
  let codes: Vec<String> = status_issues(&meta).into_iter().map(|i| i.code).collect();
  assert_eq!(codes, vec!["feedback_compaction_pending".to_string()]);
}
