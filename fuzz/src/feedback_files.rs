//! Feedback files (feedback/projection.rs, feedback/compact.rs): `meta/events.jsonl`, the
//! projection file `meta/recall-feedback.json` and a compaction archive (its manifest
//! `events-archive/recall-feedback-*.json` and the archived lines).
//!
//! Input: four parts separated by the line `#--`: the stream, the projection file, the archive
//! manifest and the archive's lines (written under the name the manifest gives when it is a plain
//! `*.jsonl` name). An empty part leaves that file absent.
//!
//! Invariants beyond "no panic": every stream line classifies (`parse_line`); a fold is
//! deterministic, reaches the stream's end or stops at the last complete line, and gives finite
//! feedback terms within ±0.02; folding the stream in two steps (a prefix, then the rest
//! appended) counts the same events as folding it at once; a projection round-trips through
//! JSON; recovery and the stream status never fail on hostile archives; a compaction of every
//! feedback event, when it runs, keeps the event count and (to rounding) every page's term.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use llm_wiki_core::feedback::compact::{self, CompactOptions, ARCHIVE_DIR};
use llm_wiki_core::feedback::events::events_path;
use llm_wiki_core::feedback::projection::{self, parse_line, projection_path, Projection};

use crate::{put, scratch_dir, split};

/// Seconds of the folds' "now" (2026-12-01): fixed, so runs are reproducible.
const NOW: i64 = 1_796_083_200;

fn meta() -> &'static PathBuf {
  static DIR: OnceLock<PathBuf> = OnceLock::new();
  DIR.get_or_init(|| scratch_dir("feedback"))
}

fn fresh(meta: &Path) -> Projection {
  let mut p = projection::base(meta);
  projection::fold(meta, &mut p, NOW);
  p
}

fn check_terms(p: &Projection) {
  for key in p.pages.keys().chain(p.global.keys()) {
    let (vault, page) = key.split_once('\u{1f}').unwrap_or((key, ""));
    let t = p.term(vault, page, "q", NOW);
    assert!(t.is_finite() && t.abs() <= 0.02 + 1e-12, "term {t} of {key:?}");
  }
}

/// Page terms of a projection (for comparisons across a compaction).
fn terms(p: &Projection) -> Vec<(String, f64)> {
  let mut keys: Vec<&String> = p.pages.keys().chain(p.global.keys()).collect();
  keys.sort();
  keys.dedup();
  keys
    .into_iter()
    .map(|k| {
      let (vault, page) = k.split_once('\u{1f}').unwrap_or((k, ""));
      (k.clone(), p.term(vault, page, "", NOW))
    })
    .collect()
}

/// One input (panics on a violated invariant).
pub fn run(data: &[u8]) {
  let meta = meta();
  let parts = split(data, 4);
  let _ = std::fs::remove_dir_all(meta);
  std::fs::create_dir_all(meta.join(ARCHIVE_DIR)).unwrap();
  let stream = parts[0];
  put(&events_path(meta), stream);
  put(&projection_path(meta), parts[1]);
  let archive_dir = meta.join(ARCHIVE_DIR);
  put(&archive_dir.join("recall-feedback-20260101T000000Z-fuzz.json"), parts[2]);
  let archive_name = serde_json::from_slice::<serde_json::Value>(parts[2])
    .ok()
    .and_then(|v| v.get("archive")?.as_str().map(str::to_string))
    .filter(|n| n.ends_with(".jsonl") && !n.contains(['/', '\\', '\0', ':']) && n != ".jsonl")
    .unwrap_or_else(|| "recall-feedback-20260101T000000Z-fuzz.jsonl".into());
  put(&archive_dir.join(archive_name), parts[3]);

  for line in stream.split(|b| *b == b'\n') {
    let _ = parse_line(line);
  }
  let _ = compact::needs_recovery(meta);
  let _ = compact::archive_key(meta);

  let a = fresh(meta);
  let b = fresh(meta);
  assert_eq!(a.events, b.events, "fold is not deterministic");
  assert_eq!(a.offset, b.offset);
  assert_eq!(a.corrupt, b.corrupt);
  // The fold consumes complete lines: up to the end, or to the start of an unterminated last line.
  if a.corrupt.is_none() {
    let complete = stream.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1) as u64;
    assert_eq!(a.offset, complete, "fold stopped at {} of {complete} complete bytes", a.offset);
  }
  check_terms(&a);
  let json = serde_json::to_string(&a).expect("projection serializes");
  let back: Projection = serde_json::from_str(&json).expect("projection reads back");
  assert_eq!(back.events, a.events);
  // Compared as JSON values: the projection's maps are hash maps (their key order differs from
  // one instance to the next), and a float read back may differ in its last bit.
  let (was, now) = (serde_json::to_value(&a).unwrap(), serde_json::to_value(&back).unwrap());
  assert!(same_json(&was, &now), "projection does not round-trip: {was} != {now}");

  // Two steps: the stream cut at a line boundary, folded, then the rest appended and folded.
  if let Some(cut) = stream.iter().take(stream.len() / 2 + 1).rposition(|b| *b == b'\n') {
    put(&events_path(meta), &stream[..cut + 1]);
    let mut p = fresh(meta);
    put(&events_path(meta), stream);
    projection::fold(meta, &mut p, NOW);
    assert_eq!((p.events, p.offset, p.corrupt.is_some()), (a.events, a.offset, a.corrupt.is_some()));
  }

  // The projection file as a cached state to continue from: never panics, terms stay bounded.
  if let Ok(mut p) = serde_json::from_slice::<Projection>(parts[1]) {
    projection::fold(meta, &mut p, NOW);
    check_terms(&p);
  }

  let _ = compact::stream_status(meta);
  let _ = compact::recover(meta);

  // A compaction of every feedback event keeps what ranking sees.
  let before = fresh(meta);
  if before.corrupt.is_none() && !compact::needs_recovery(meta) {
    let opts = CompactOptions { older_than_days: 0.0, ..Default::default() };
    if let Ok(out) = compact::compact_feedback(meta, &opts, &mut |_, _| {}, &mut || Ok(())) {
      let after = fresh(meta);
      if out.status == "compacted" && after.corrupt.is_none() {
        assert_eq!(after.events, before.events, "a compaction changed the event count");
        let (x, y) = (terms(&before), terms(&after));
        assert_eq!(x.len(), y.len(), "a compaction changed the pages with feedback");
        for ((k, t0), (_, t1)) in x.iter().zip(&y) {
          assert!((t0 - t1).abs() <= 1e-9, "a compaction changed the term of {k:?}: {t0} -> {t1}");
        }
      }
    }
  }
}

/// JSON values equal up to object key order and a relative 1e-12 on numbers.
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
  use serde_json::Value;
  match (a, b) {
    (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
      (Some(x), Some(y)) => x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
      _ => x == y,
    },
    (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y)),
    (Value::Object(x), Value::Object(y)) => {
      x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
    }
    _ => a == b,
  }
}
