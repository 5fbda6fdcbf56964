//! The rebuildable aggregate of a vault's feedback events (`meta/recall-feedback.json`) and the
//! bounded feedback term it gives a recalled page.
//!
//! Every signal decays with the spec's 90-day half-life. Sums are kept scaled to a fixed epoch
//! (`S = Σ w · 2^((t − T0)/half-life)`), so appending an event is an addition and the value at any
//! time is `S · 2^(−(now − T0)/half-life)`. Event times in the future (clock skew) are clamped to
//! the time they are folded in. The stream is read incrementally, line by line with a line-length
//! cap, from the byte offset the projection already covers, so memory is bounded by the number of
//! distinct (page, query) keys — capped, the weakest (oldest, smallest) evicted first — never by
//! the size of the stream. A line longer than [`MAX_LINE_BYTES`] is skipped without being held
//! (counted in `skippedLines`, reported as `feedback_events_line_skipped`: no feedback event is
//! that long). A malformed line disables feedback (term 0) with a diagnostic; the stream is never
//! rewritten by the fold and the last projection file is preserved.
//!
//! Lines moved out of the stream by an explicit compaction ([`super::compact`]) are not lost to
//! the projection: every committed archive's manifest carries the scaled sums of the lines it
//! holds, and a fold that starts from scratch starts from their total ([`base`]). The sums are
//! exact (an archived event is older than the compaction, so no clamping applies), so the
//! projection is the same, up to float summation order, with or without a compaction.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use super::archive::{archive_key, committed_shares, needs_recovery};
use super::events::{events_path, FeedbackEvent, KIND};
pub use super::sums::{
  Projection, Sums, MAX_PAGE_KEYS, MAX_QUERY_KEYS, OTHER_QUERY_SHARE, PROJECTION_VERSION,
};
use crate::fsutil::{read_json, write_json, JsonFile};
use crate::util::hash::hex;

/// Longest line of the stream that is read; a longer one is skipped (never buffered).
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// Bytes of the stream's beginning whose hash identifies it (append-only: a prefix never changes).
const PREFIX_BYTES: u64 = 4096;

fn prefix_hash(path: &Path, upto: u64) -> String {
  let mut buf = Vec::new();
  if let Ok(f) = File::open(path) {
    let _ = f.take(upto.min(PREFIX_BYTES)).read_to_end(&mut buf);
  }
  hex(&Sha256::digest(&buf))
}

fn meta_mtime_ns(m: &std::fs::Metadata) -> i64 {
  m.modified()
    .ok()
    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
    .map_or(0, |d| d.as_nanos() as i64)
}

fn mtime_ns(path: &Path) -> i64 {
  std::fs::metadata(path).map_or(0, |m| meta_mtime_ns(&m))
}

/// Read one line (up to `\n`, excluded) into `line`, at most [`MAX_LINE_BYTES`]; returns the
/// bytes consumed, `None` at a final line without a newline (not consumed: a writer may be
/// mid-append), and flags `too_long` (the rest of the line is consumed, not kept).
pub fn read_line(
  r: &mut impl BufRead,
  line: &mut Vec<u8>,
  too_long: &mut bool,
) -> std::io::Result<Option<u64>> {
  line.clear();
  *too_long = false;
  let mut consumed = 0u64;
  loop {
    let buf = r.fill_buf()?;
    if buf.is_empty() {
      return Ok(None);
    }
    let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
      Some(i) => (&buf[..i], Some(i + 1)),
      None => (buf, None),
    };
    if line.len() + chunk.len() <= MAX_LINE_BYTES {
      line.extend_from_slice(chunk);
    } else {
      *too_long = true;
    }
    let n = done.unwrap_or(buf.len());
    r.consume(n);
    consumed += n as u64;
    if done.is_some() {
      return Ok(Some(consumed));
    }
  }
}

/// Fold the stream of `meta` into `proj` from its offset (from 0 when the stream shrank, was
/// rewritten, or the projection is corrupt). `now` clamps future timestamps.
pub fn fold(meta: &Path, proj: &mut Projection, now: i64) {
  fold_with(meta, proj, now, &mut |_, _| {})
}

/// [`fold`] calling `progress(bytes read, stream bytes)` every 64 MiB and at the end.
pub fn fold_with(meta: &Path, proj: &mut Projection, now: i64, progress: &mut dyn FnMut(u64, u64)) {
  let path = events_path(meta);
  let Ok(file) = File::open(&path) else {
    // No stream (not corruption): what the projection folded from a stream is gone with it;
    // replayed corrections (offset 0) stay.
    let key = archive_key(meta);
    if proj.offset > 0 || proj.version != PROJECTION_VERSION || proj.archive_key != key {
      *proj = base(meta);
    }
    return;
  };
  let len = file.metadata().map(|m| m.len()).unwrap_or(0);
  let mtime = mtime_ns(&path);
  let rewritten = len < proj.offset
    || (len == proj.offset && mtime != proj.mtime_ns && proj.offset > 0)
    || proj.corrupt.is_some()
    || proj.archive_key != archive_key(meta)
    || (proj.offset > 0 && prefix_hash(&path, proj.offset) != proj.prefix);
  if rewritten || proj.version != PROJECTION_VERSION {
    *proj = base(meta);
  }
  if len == proj.offset {
    proj.mtime_ns = mtime;
    return;
  }
  let mut r = BufReader::with_capacity(1 << 16, file);
  if r.seek(SeekFrom::Start(proj.offset)).is_err() {
    proj.corrupt = Some("meta/events.jsonl cannot be read".into());
    return;
  }
  let mut line = Vec::new();
  let mut too_long = false;
  let mut line_no = 0u64;
  let mut next_progress = proj.offset;
  loop {
    if proj.offset >= next_progress {
      progress(proj.offset, len);
      next_progress = proj.offset + (64 << 20);
    }
    match read_line(&mut r, &mut line, &mut too_long) {
      Ok(None) => break,
      Err(e) => {
        proj.corrupt = Some(format!("meta/events.jsonl cannot be read: {e}"));
        return;
      }
      Ok(Some(n)) => {
        line_no += 1;
        let text = line.trim_ascii();
        if !text.is_empty() {
          if too_long {
            proj.skipped_lines += 1;
          } else {
            match fold_line(proj, text, now) {
              Ok(Some(month)) => {
                proj.feedback_bytes += n;
                *proj.bytes_by_month.entry(month).or_default() += n;
              }
              Ok(None) => {}
              Err(why) => {
                proj.corrupt = Some(format!(
                  "meta/events.jsonl is malformed at byte {} (line {line_no} read): {why}",
                  proj.offset
                ));
                return;
              }
            }
          }
        }
        proj.offset += n;
      }
    }
  }
  progress(proj.offset, len);
  proj.prefix = prefix_hash(&path, proj.offset);
  proj.mtime_ns = mtime;
}

/// Fold one line (≤ [`MAX_LINE_BYTES`]); `Some(month)` (`YYYY-MM` of the event) for a
/// `recall_feedback` line.
fn fold_line(proj: &mut Projection, text: &[u8], now: i64) -> Result<Option<String>, String> {
  match parse_line(text)? {
    None => Ok(None),
    Some((e, t)) => {
      proj.add(&e, t.min(now));
      Ok(Some(e.timestamp.get(..7).unwrap_or("").to_string()))
    }
  }
}

/// Classify one line of the stream (without its newline, ≤ [`MAX_LINE_BYTES`]): `None` for a JSON
/// object of another kind, the event and its time (seconds) for a valid `recall_feedback` line,
/// `Err` for a malformed line (not a JSON object, or an invalid feedback event).
pub fn parse_line(text: &[u8]) -> Result<Option<(FeedbackEvent, i64)>, String> {
  // Cheap pre-check: only lines naming our kind are parsed as events; every line must be a JSON object.
  let kind_marker = format!("\"{KIND}\"");
  if !text.windows(kind_marker.len()).any(|w| w == kind_marker.as_bytes()) {
    return match serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(text) {
      Ok(_) => Ok(None),
      Err(e) => Err(format!("not a JSON object: {e}")),
    };
  }
  let v: serde_json::Value = serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
  if v.get("kind").and_then(|k| k.as_str()) != Some(KIND) {
    return if v.is_object() { Ok(None) } else { Err("not a JSON object".into()) };
  }
  let e: FeedbackEvent = serde_json::from_value(v).map_err(|e| format!("invalid {KIND} event: {e}"))?;
  e.validate().map_err(|why| format!("invalid {KIND} event: {why}"))?;
  let t = crate::util::time::parse_timestamp(&e.timestamp)
    .ok_or_else(|| format!("invalid timestamp {:?}", e.timestamp))?;
  Ok(Some((e, t)))
}

/// The projection of the committed archives alone (their manifests' sums): where a fold from the
/// stream's first byte starts.
pub fn base(meta: &Path) -> Projection {
  let mut p = Projection { version: PROJECTION_VERSION, ..Default::default() };
  let (key, shares) = committed_shares(meta);
  for s in &shares {
    p.merge(s);
  }
  p.archive_key = key;
  p
}

/// `meta/recall-feedback.json`.
pub fn projection_path(meta: &Path) -> PathBuf {
  meta.join("recall-feedback.json")
}

fn cache() -> &'static Mutex<HashMap<PathBuf, Arc<Projection>>> {
  static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<Projection>>>> = OnceLock::new();
  CACHE.get_or_init(Default::default)
}

/// The current projection of `meta` for ranking: this process's cached one (or the projection
/// file, or nothing) brought up to date with the stream's new lines. Never writes the projection
/// file; settles an interrupted compaction first when the events lock is free.
pub fn current(meta: &Path, now: i64) -> Arc<Projection> {
  let key = meta.to_path_buf();
  // A compaction killed after its rename left a pending archive the fold would not count: settle
  // it now when the events lock is free (a running compaction holds it and commits by itself).
  // Before the cache lock: recovery invalidates the cache.
  if needs_recovery(meta) {
    if let Ok(_held) = crate::events_lock::acquire(meta, std::time::Duration::ZERO) {
      if super::archive::settle(meta).is_ok_and(|done| !done.is_empty()) {
        invalidate(meta);
      }
    }
  }
  let mut map = cache().lock();
  let path = events_path(meta);
  let (len, mtime) = std::fs::metadata(&path).map(|m| (m.len(), meta_mtime_ns(&m))).unwrap_or((0, 0));
  if let Some(p) = map.get(&key) {
    if p.offset == len && p.mtime_ns == mtime && p.corrupt.is_none() && p.archive_key == archive_key(meta) {
      return p.clone();
    }
  }
  let mut proj = match map.remove(&key) {
    Some(p) => Arc::try_unwrap(p).unwrap_or_else(|a| (*a).clone()),
    None => match read_json::<Projection>(&projection_path(meta)) {
      JsonFile::Valid(p) if p.corrupt.is_none() => p,
      _ => Projection::default(),
    },
  };
  fold(meta, &mut proj, now);
  let proj = Arc::new(proj);
  map.insert(key, proj.clone());
  proj
}

/// Forget this process's cached projection of `meta` (after a rebuild wrote a new file).
pub fn invalidate(meta: &Path) {
  cache().lock().remove(meta);
}

/// Rebuild from the whole stream: fold everything, then `extra` (replayed correction events),
/// drop pages not in `live`. Writes the projection file unless the stream is malformed (then
/// the last file is preserved and the result says why).
pub fn rebuild(
  meta: &Path,
  extra: &[FeedbackEvent],
  live: Option<&HashSet<String>>,
  now: i64,
) -> crate::error::Result<Projection> {
  let mut proj = base(meta);
  fold(meta, &mut proj, now);
  if proj.corrupt.is_some() {
    return Ok(proj);
  }
  for e in extra {
    let t = crate::util::time::parse_timestamp(&e.timestamp).unwrap_or(now).min(now);
    proj.add(e, t);
    proj.events -= 1;
    if let Some(o) = e.observation.as_ref().or(e.resolution.as_ref()) {
      proj.replayed.push(o.clone());
    }
  }
  if let Some(live) = live {
    proj.retain_pages(live);
  }
  write_json(&projection_path(meta), &proj)?;
  invalidate(meta);
  Ok(proj)
}

/// Whether `meta` has feedback to apply: a stream or a projection file (cheap: two stats).
pub fn has_stream(meta: &Path) -> bool {
  super::events::events_path(meta).is_file() || projection_path(meta).is_file()
}

#[cfg(test)]
mod tests {
  use super::super::events::{append_events, tests::ev};
  use super::*;
  use crate::events_lock::EXPLICIT_WAIT;
  use crate::feedback::sums::page_key;
  use crate::feedback::{FeedbackAction, FEEDBACK_BOUND, SHOWN_ONLY_BOUND};
  use std::io::Write;

  fn now() -> i64 {
    crate::retrieve::trust::now_secs()
  }

  #[test]
  fn term_is_bounded_decays_and_prefers_the_query() {
    let mut p = Projection::default();
    let n = now();
    let q = super::super::query_hash("q");
    for _ in 0..10 {
      p.add(&ev("a", FeedbackAction::Relevant), n);
    }
    assert!((p.term("v", "a", &q, n) - FEEDBACK_BOUND).abs() < 1e-12);
    // Another query: the page's signals count at OTHER_QUERY_SHARE (0: not at all).
    let other = super::super::query_hash("other");
    assert!(
      (p.term("v", "a", &other, n) - (10.0 * FEEDBACK_BOUND * OTHER_QUERY_SHARE).min(FEEDBACK_BOUND)).abs()
        < 1e-12
    );
    let mut p1 = Projection::default();
    p1.add(&ev("a", FeedbackAction::Cited), n);
    assert!((p1.term("v", "a", &q, n) - 0.01).abs() < 1e-9);
    assert!((p1.term("v", "a", &other, n) - 0.01 * OTHER_QUERY_SHARE).abs() < 1e-9);
    // A conflict choice (no query) counts for every query.
    let mut c = ev("a", FeedbackAction::ConflictSelected);
    c.query_hash.clear();
    p1.add(&c, n);
    assert!(
      (p1.term("v", "a", &other, n) - (0.01 * OTHER_QUERY_SHARE + FEEDBACK_BOUND).min(FEEDBACK_BOUND)).abs()
        < 1e-9
    );
    // 90 days later: half of (citation 0.01 + conflict choice 0.02).
    assert!((p1.term("v", "a", &q, n + 90 * 86_400) - 0.015).abs() < 1e-9);
    // shown_only never below −0.005, however many.
    let mut p2 = Projection::default();
    for _ in 0..50 {
      p2.add(&ev("b", FeedbackAction::ShownOnly), n);
    }
    assert!((p2.term("v", "b", &q, n) - SHOWN_ONLY_BOUND).abs() < 1e-12);
    assert_eq!(p2.term("v", "unknown", &q, n), 0.0);
  }

  #[test]
  fn future_timestamps_are_clamped() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    let mut e = ev("a", FeedbackAction::Cited);
    e.timestamp = "2999-01-01T00:00:00Z".into();
    append_events(&meta, &[e], EXPLICIT_WAIT).unwrap();
    let mut p = Projection::default();
    fold(&meta, &mut p, now());
    let q = super::super::query_hash("q");
    // Clamped to now: worth exactly a fresh citation, not 2^(900/0.25) of one.
    assert!((p.term("v", "a", &q, now()) - 0.01).abs() < 1e-6);
  }

  #[test]
  fn corrupt_stream_disables_and_preserves() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    append_events(&meta, &[ev("a", FeedbackAction::Relevant)], EXPLICIT_WAIT).unwrap();
    let good = rebuild(&meta, &[], None, now()).unwrap();
    assert!(good.corrupt.is_none());
    let before_file = std::fs::read(projection_path(&meta)).unwrap();
    std::fs::OpenOptions::new()
      .append(true)
      .open(events_path(&meta))
      .unwrap()
      .write_all(b"{not json\n")
      .unwrap();
    let bytes_before = std::fs::read(events_path(&meta)).unwrap();
    let p = current(&meta, now());
    assert!(p.is_disabled());
    assert_eq!(p.term("v", "a", &super::super::query_hash("q"), now()), 0.0);
    let r = rebuild(&meta, &[], None, now()).unwrap();
    assert!(r.corrupt.as_deref().unwrap().contains("malformed"));
    // Nothing rewritten: the stream and the last projection are as they were.
    assert_eq!(std::fs::read(events_path(&meta)).unwrap(), bytes_before);
    assert_eq!(std::fs::read(projection_path(&meta)).unwrap(), before_file);
  }

  #[test]
  fn incremental_fold_matches_full_and_ignores_other_kinds_and_partial_tail() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    std::fs::create_dir_all(&meta).unwrap();
    std::fs::write(events_path(&meta), "{\"kind\":\"observe\",\"slug\":\"x\"}\n").unwrap();
    append_events(&meta, &[ev("a", FeedbackAction::Opened)], EXPLICIT_WAIT).unwrap();
    let n = now();
    let mut inc = Projection::default();
    fold(&meta, &mut inc, n);
    assert_eq!(inc.events, 1);
    append_events(
      &meta,
      &[ev("a", FeedbackAction::Cited), ev("b", FeedbackAction::Irrelevant)],
      EXPLICIT_WAIT,
    )
    .unwrap();
    // A writer mid-line: not consumed yet.
    std::fs::OpenOptions::new()
      .append(true)
      .open(events_path(&meta))
      .unwrap()
      .write_all(b"{\"kind\":")
      .unwrap();
    fold(&meta, &mut inc, n);
    let mut full = Projection::default();
    fold(&meta, &mut full, n);
    assert_eq!(inc.events, 3);
    assert_eq!(full.events, 3);
    assert!(inc.corrupt.is_none());
    let q = super::super::query_hash("q");
    assert!((inc.term("v", "a", &q, n) - full.term("v", "a", &q, n)).abs() < 1e-12);
    assert!((inc.term("v", "b", &q, n) + 0.02).abs() < 1e-12);
  }

  #[test]
  fn deleted_pages_are_dropped_on_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    append_events(
      &meta,
      &[ev("a", FeedbackAction::Relevant), ev("gone", FeedbackAction::Relevant)],
      EXPLICIT_WAIT,
    )
    .unwrap();
    let live: HashSet<String> = [page_key("v", "a")].into_iter().collect();
    let p = rebuild(&meta, &[], Some(&live), now()).unwrap();
    let q = super::super::query_hash("q");
    assert!(p.term("v", "a", &q, now()) > 0.0);
    assert_eq!(p.term("v", "gone", &q, now()), 0.0);
    assert!(p.queries.keys().all(|k| !k.ends_with("gone")));
  }

  #[test]
  fn large_stream_bounded_keys_and_long_line() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("meta");
    std::fs::create_dir_all(&meta).unwrap();
    let mut f = std::io::BufWriter::new(File::create(events_path(&meta)).unwrap());
    let base = ev("p", FeedbackAction::Opened);
    for i in 0..(MAX_QUERY_KEYS + 5_000) {
      let mut e = base.clone();
      e.query_hash = format!("{i:064x}");
      e.page_id = format!("p{}", i % 50);
      serde_json::to_writer(&mut f, &e).unwrap();
      f.write_all(b"\n").unwrap();
    }
    drop(f);
    let mut p = Projection::default();
    fold(&meta, &mut p, now());
    assert!(p.corrupt.is_none());
    assert_eq!(p.events as usize, MAX_QUERY_KEYS + 5_000);
    assert!(p.queries.len() <= MAX_QUERY_KEYS);
    assert_eq!(p.pages.len(), 50);
    // A line over the cap is skipped (counted), read without holding it; the next line counts.
    let big = vec![b'x'; MAX_LINE_BYTES + 10];
    let mut g = std::fs::OpenOptions::new().append(true).open(events_path(&meta)).unwrap();
    g.write_all(&big).unwrap();
    g.write_all(b"\n").unwrap();
    drop(g);
    append_events(&meta, &[ev("after-the-long-line", FeedbackAction::Cited)], EXPLICIT_WAIT).unwrap();
    fold(&meta, &mut p, now());
    assert!(p.corrupt.is_none());
    assert_eq!(p.skipped_lines, 1);
    assert_eq!(p.events as usize, MAX_QUERY_KEYS + 5_001);
    assert!(p.term("v", "after-the-long-line", &super::super::query_hash("q"), now()) > 0.0);
  }
}
