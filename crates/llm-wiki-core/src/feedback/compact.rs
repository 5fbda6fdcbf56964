//! Explicit, user-invoked compaction of the event stream (`compactFeedback`). The spec keeps
//! `meta/events.jsonl` authoritative and append-only with "no automatic retention or compaction",
//! and the stream is shared with the client's other event kinds, so nothing here runs by itself
//! and nothing is deleted: `recall_feedback` lines older than a cutoff are *moved* into an
//! append-only archive under `meta/events-archive/`, every other line stays byte-identical and
//! in order.
//!
//! One run, under the events lock (appenders wait or are dropped as usual), in this order:
//!
//! 1. recovery of an interrupted earlier run ([`recover`]);
//! 2. one streaming pass over the stream (lines ≤ [`MAX_LINE_BYTES`] are classified, longer
//!    ones are copied through in pieces, never held): moved lines go to
//!    `recall-feedback-<stamp>-<run>.jsonl` (fsync), kept bytes to `events.jsonl.compact-<run>.tmp`
//!    (fsync); the moved events' scaled sums are folded on the way;
//! 3. the manifest `recall-feedback-<stamp>-<run>.json` is written `pending` (atomic write): line
//!    counts, sha256 and length of the source stream, of the new stream and of the archive, and
//!    the sums;
//! 4. the new stream replaces `events.jsonl` by atomic rename (the commit point) and the
//!    directory is fsynced; bytes a lock-ignoring writer appended to the old file meanwhile are
//!    appended to the new one;
//! 5. the manifest is rewritten `committed`; the projection is rebuilt.
//!
//! A kill at any point leaves the old stream or the new one, and the archive is complete before
//! the stream loses a line. [`recover`] settles what a kill left: a temporary stream or an
//! archive without manifest is removed (the stream still has its lines); a `pending` manifest
//! is `committed` when the stream begins with the new stream's bytes and removed with its
//! archive when the stream still begins with the source's bytes — so a retried run never
//! archives a line twice. Readers count committed manifests only.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::archive::{archive_dir, manifests, write_manifest};
pub use super::archive::{
  archive_key, committed_shares, needs_recovery, ArchiveManifest, ArchiveState, ARCHIVE_DIR, MANIFEST_VERSION,
};
use super::events::events_path;
use super::projection::{self, parse_line, Projection, MAX_LINE_BYTES};
use crate::error::{Error, Result};
use crate::events_lock::{self, EXPLICIT_WAIT};
use crate::fsutil::{iso_from_ms, now_ms, sync_dir};
use crate::util::hash::hex;
use crate::util::num::sat_i64;

/// Default age cutoff: four half-lives (360 days; an event's weight is below 1/16 of its start).
/// The projection keeps archived sums exactly, so the cutoff only decides what leaves the stream.
pub const DEFAULT_OLDER_THAN_DAYS: f64 = 360.0;
/// Stream size from which status suggests a compaction. Not fitted: the size at which a full
/// read of the stream (by this engine or the client's log readers) takes seconds on a laptop.
pub const LARGE_STREAM_BYTES: u64 = 256 << 20;

/// Options of [`compact_feedback`].
#[derive(Debug, Clone)]
pub struct CompactOptions {
  /// Move `recall_feedback` events older than this many days (default [`DEFAULT_OLDER_THAN_DAYS`];
  /// 0 moves every feedback event).
  pub older_than_days: f64,
  /// Count what would move; write nothing.
  pub dry_run: bool,
  /// Wait for the events lock (default 2 s, the explicit wait).
  pub wait: Duration,
}

impl Default for CompactOptions {
  fn default() -> Self {
    CompactOptions { older_than_days: DEFAULT_OLDER_THAN_DAYS, dry_run: false, wait: EXPLICIT_WAIT }
  }
}

/// Result of `compactFeedback` ([`compact_feedback`]).
// Sizes, line counts and the lock time are `i64`, a JavaScript number (`crate::util::num`); no
// count exceeds the stream's size, itself an `i64`, so the plain additions below cannot overflow.
#[cfg_attr(
  feature = "napi",
  napi_derive::napi(object, object_from_js = false, js_name = "CompactFeedbackResult")
)]
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactOutcome {
  /// `compacted`, `nothing_to_move`, `dry_run`, or `no_stream`.
  pub status: String,
  /// Stream size before and after.
  pub bytes_before: i64,
  /// Stream size after (equal to before for a dry run).
  pub bytes_after: i64,
  /// Lines read (a final line without newline counts).
  pub lines: i64,
  /// `recall_feedback` lines moved (or that would move).
  pub moved_lines: i64,
  /// Bytes moved (or that would move).
  pub moved_bytes: i64,
  /// Lines longer than the line cap, kept in place.
  pub long_lines: i64,
  /// Malformed lines, kept in place (feedback stays disabled until they are fixed by hand).
  pub malformed_lines: i64,
  /// Archive file written, relative to `meta/`.
  pub archive: Option<String>,
  /// What recovery of an interrupted run did.
  pub recovered: Vec<String>,
  /// Bytes a writer appended without the lock during the run, carried over to the new stream.
  pub carried_bytes: i64,
  /// Milliseconds the events lock was held.
  pub lock_ms: i64,
}

/// A step of a run, for crash tests ([`compact_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
  /// The archive and the new stream are written (temporary), no manifest yet.
  FilesWritten,
  /// The manifest is written `pending`.
  ManifestPending,
  /// `events.jsonl` is the new stream; the manifest is still `pending`.
  Renamed,
  /// The manifest is `committed`; the projection not rebuilt yet.
  Committed,
}

/// Settle what an interrupted run left (the caller holds the events lock; see
/// [`super::archive::settle`]) and, when that did something, drop the cached projection.
pub fn recover(meta: &Path) -> Result<Vec<String>> {
  let done = super::archive::settle(meta)?;
  if !done.is_empty() {
    projection::invalidate(meta);
  }
  Ok(done)
}

/// A writer that hashes and counts what it writes.
struct Out {
  w: Option<BufWriter<File>>,
  h: Sha256,
  len: u64,
  path: PathBuf,
}

impl Out {
  fn new(path: PathBuf, write: bool) -> Result<Self> {
    let w = if write {
      let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| Error::io("create", &path, e))?;
      Some(BufWriter::with_capacity(1 << 16, f))
    } else {
      None
    };
    Ok(Out { w, h: Sha256::new(), len: 0, path })
  }
  fn put(&mut self, b: &[u8]) -> Result<()> {
    if let Some(w) = &mut self.w {
      w.write_all(b).map_err(|e| Error::io("write", &self.path, e))?;
    }
    self.h.update(b);
    self.len += b.len() as u64;
    Ok(())
  }
  fn finish(self) -> Result<(String, u64)> {
    if let Some(w) = self.w {
      let f = w.into_inner().map_err(|e| Error::io("write", &self.path, e.into_error()))?;
      f.sync_all().map_err(|e| Error::io("fsync", &self.path, e))?;
    }
    Ok((hex(&self.h.finalize()), self.len))
  }
}

/// Compact the stream of `meta` (see the module docs): takes the events lock, recovers, moves
/// `recall_feedback` lines older than the cutoff into a new archive and rebuilds the projection
/// through `rebuild` (called with the lock held). A failure after the temporary files were
/// written is settled by [`recover`] before returning. Errors: `feedback_lock_busy`,
/// `feedback_compaction_failed`, `io_error`.
pub fn compact_feedback(
  meta: &Path,
  opts: &CompactOptions,
  progress: &mut dyn FnMut(u64, u64),
  rebuild: &mut dyn FnMut() -> Result<()>,
) -> Result<CompactOutcome> {
  let held =
    events_lock::acquire(meta, opts.wait).map_err(|e| events_lock::map_busy(e, Error::FeedbackLockBusy))?;
  let res = compact_with(meta, opts, progress, &mut |step| {
    crate::store::swap::crash_point(match step {
      Step::FilesWritten => "compact:files-written",
      Step::ManifestPending => "compact:manifest-pending",
      Step::Renamed => "compact:renamed",
      Step::Committed => "compact:committed",
    });
    Ok(())
  });
  let out = match res {
    Ok(out) => {
      if out.status == "compacted" {
        rebuild()?;
      }
      out
    }
    Err(e) => {
      let _ = recover(meta);
      return Err(e);
    }
  };
  drop(held);
  Ok(out)
}

/// The run itself, with the lock already held by the caller; `hook` is called after each
/// [`Step`] (a test's injected failure returns `Err` there and the run stops as if killed:
/// nothing is cleaned up).
pub fn compact_with(
  meta: &Path,
  opts: &CompactOptions,
  progress: &mut dyn FnMut(u64, u64),
  hook: &mut dyn FnMut(Step) -> Result<()>,
) -> Result<CompactOutcome> {
  let started = Instant::now();
  if opts.older_than_days.is_nan() || opts.older_than_days < 0.0 || opts.older_than_days.is_infinite() {
    return Err(Error::invalid("olderThanDays must be a finite number ≥ 0"));
  }
  let mut out = CompactOutcome { recovered: recover(meta)?, ..Default::default() };
  let stream = events_path(meta);
  let Ok(src) = File::open(&stream) else {
    out.status = "no_stream".into();
    return Ok(out);
  };
  let total = src.metadata().map_err(|e| Error::io("stat", &stream, e))?.len();
  out.bytes_before = sat_i64(total);
  out.bytes_after = out.bytes_before;
  let now = crate::retrieve::trust::now_secs();
  let cutoff = now - (opts.older_than_days * 86_400.0) as i64;
  let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
  let ms = now_ms();
  let stamp: String = iso_from_ms(ms).chars().filter(|c| c.is_ascii_alphanumeric()).collect();
  let base = format!("recall-feedback-{stamp}-{run_id}");
  let dir = archive_dir(meta);
  let write = !opts.dry_run;
  if write {
    fs::create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
  }
  let archive_path = dir.join(format!("{base}.jsonl"));
  let tmp_path = meta.join(format!("events.jsonl.compact-{run_id}.tmp"));
  let mut split = Split {
    archive: Out::new(archive_path.clone(), write)?,
    kept: Out::new(tmp_path.clone(), write)?,
    source: Sha256::new(),
    sums: Projection { version: projection::PROJECTION_VERSION, ..Default::default() },
  };
  let mut r = BufReader::with_capacity(1 << 16, src);
  let read = split_lines(&mut r, &stream, total, cutoff, &mut split, &mut out, progress)?;
  progress(read, total);
  let mut source_len = read;
  if out.moved_lines == 0 || opts.dry_run {
    drop(split);
    if write {
      let _ = fs::remove_file(&archive_path);
      let _ = fs::remove_file(&tmp_path);
    }
    out.status = if opts.dry_run { "dry_run" } else { "nothing_to_move" }.into();
    return Ok(out);
  }
  // Bytes appended meanwhile by a writer that ignores the lock: carried over whole.
  let mut src = r.into_inner();
  let grown = src.metadata().map_err(|e| Error::io("stat", &stream, e))?.len();
  if grown > source_len {
    let tail = read_tail(&mut src, &stream, source_len, grown)?;
    split.kept.put(&tail)?;
    split.source.update(&tail);
    source_len = grown;
    out.carried_bytes = out.carried_bytes.saturating_add(sat_i64(tail.len()));
  }
  let Split { archive, kept, source, mut sums } = split;
  let (archive_sha256, bytes) = archive.finish()?;
  let (result_sha256, result_len) = kept.finish()?;
  sync_dir(&dir);
  hook(Step::FilesWritten)?;
  sums.version = projection::PROJECTION_VERSION;
  let manifest = ArchiveManifest {
    version: MANIFEST_VERSION,
    run_id: run_id.clone(),
    state: ArchiveState::Pending,
    created_at: iso_from_ms(ms),
    cutoff: iso_from_ms(cutoff * 1000),
    archive: format!("{base}.jsonl"),
    lines: out.moved_lines.unsigned_abs(),
    bytes,
    archive_sha256,
    source_len,
    source_sha256: hex(&source.finalize()),
    result_len,
    result_sha256,
    sums,
  };
  publish(meta, &dir.join(format!("{base}.json")), manifest, &tmp_path, &mut src, &mut out, hook)?;
  out.status = "compacted".into();
  out.archive = Some(format!("{ARCHIVE_DIR}/{base}.jsonl"));
  out.bytes_after = sat_i64(fs::metadata(&stream).map(|m| m.len()).unwrap_or(result_len));
  out.lock_ms = sat_i64(started.elapsed().as_millis());
  Ok(out)
}

/// Where the streaming pass writes: the archive (moved lines), the new stream (kept bytes), the
/// hash of every byte read, and the moved events' scaled sums.
struct Split {
  archive: Out,
  kept: Out,
  source: Sha256,
  sums: Projection,
}

/// One streaming pass over the stream `r` (of `total` bytes): `recall_feedback` lines older than
/// `cutoff` go to the archive, every other byte to the new stream, counted in `out`. One line at
/// a time: up to [`MAX_LINE_BYTES`] kept in memory; past that the line is copied through to the
/// kept stream piece by piece. Returns the bytes read.
fn split_lines(
  r: &mut BufReader<File>,
  stream: &Path,
  total: u64,
  cutoff: i64,
  split: &mut Split,
  out: &mut CompactOutcome,
  progress: &mut dyn FnMut(u64, u64),
) -> Result<u64> {
  let Split { archive, kept, source, sums } = split;
  let mut line: Vec<u8> = Vec::with_capacity(4096);
  let mut read = 0u64;
  let mut next_progress = 0u64;
  'lines: loop {
    line.clear();
    let mut long = false;
    loop {
      let buf = r.fill_buf().map_err(|e| Error::io("read", stream, e))?;
      if buf.is_empty() {
        if long {
          out.lines += 1;
        } else if !line.is_empty() {
          // A final line without newline (torn by a dead writer): kept as it is.
          out.lines += 1;
          out.malformed_lines += i64::from(parse_line(line.trim_ascii()).is_err());
          kept.put(&line)?;
          source.update(&line);
        }
        break 'lines;
      }
      let (chunk, end) = match buf.iter().position(|&b| b == b'\n') {
        Some(i) => (&buf[..=i], true),
        None => (buf, false),
      };
      let n = chunk.len();
      if long {
        kept.put(chunk)?;
        source.update(chunk);
      } else if line.len() + n > MAX_LINE_BYTES + 1 {
        long = true;
        out.long_lines += 1;
        kept.put(&line)?;
        source.update(&line);
        kept.put(chunk)?;
        source.update(chunk);
        line.clear();
      } else {
        line.extend_from_slice(chunk);
      }
      r.consume(n);
      read += n as u64;
      if end {
        break;
      }
    }
    if read >= next_progress {
      progress(read, total);
      next_progress = read + (64 << 20);
    }
    if long {
      out.lines += 1;
      continue;
    }
    out.lines += 1;
    source.update(&line);
    let text = line.trim_ascii();
    let moved = match parse_line(text) {
      Ok(Some((e, t))) if t < cutoff => {
        sums.add(&e, t);
        true
      }
      Ok(_) => false,
      Err(_) => {
        out.malformed_lines += i64::from(!text.is_empty());
        false
      }
    };
    if moved {
      out.moved_lines += 1;
      out.moved_bytes = out.moved_bytes.saturating_add(sat_i64(line.len()));
      archive.put(&line)?;
    } else {
      kept.put(&line)?;
    }
  }
  Ok(read)
}

/// Bytes `from..to` of the stream file `src` (appended by a writer that ignores the lock).
fn read_tail(src: &mut File, stream: &Path, from: u64, to: u64) -> Result<Vec<u8>> {
  let mut tail = Vec::new();
  src.seek(SeekFrom::Start(from)).map_err(|e| Error::io("seek", stream, e))?;
  src.take(to - from).read_to_end(&mut tail).map_err(|e| Error::io("read", stream, e))?;
  Ok(tail)
}

/// Steps 3–5 of a run (module docs): the manifest written `pending`, the new stream `tmp_path`
/// renamed over the stream (late bytes of the old file `src` appended), the manifest
/// `committed`, the cached projection dropped.
fn publish(
  meta: &Path,
  manifest_path: &Path,
  mut manifest: ArchiveManifest,
  tmp_path: &Path,
  src: &mut File,
  out: &mut CompactOutcome,
  hook: &mut dyn FnMut(Step) -> Result<()>,
) -> Result<()> {
  let stream = events_path(meta);
  let source_len = manifest.source_len;
  write_manifest(manifest_path, &manifest)?;
  hook(Step::ManifestPending)?;
  fs::rename(tmp_path, &stream).map_err(|e| Error::io("rename", &stream, e))?;
  sync_dir(meta);
  // A lock-ignoring writer that still held the old file open: its late bytes follow.
  let late = src.metadata().map(|m| m.len()).unwrap_or(source_len);
  if late > source_len {
    let tail = read_tail(src, &stream, source_len, late)?;
    let mut f = OpenOptions::new().append(true).open(&stream).map_err(|e| Error::io("open", &stream, e))?;
    f.write_all(&tail).and_then(|_| f.sync_data()).map_err(|e| Error::io("append", &stream, e))?;
    out.carried_bytes = out.carried_bytes.saturating_add(sat_i64(tail.len()));
  }
  hook(Step::Renamed)?;
  manifest.state = ArchiveState::Committed;
  write_manifest(manifest_path, &manifest)?;
  projection::invalidate(meta);
  hook(Step::Committed)
}

/// What `feedbackStatus` and the CLI report about a vault's stream.
// Sizes and line counts are `i64`, a JavaScript number (`crate::util::num`).
#[cfg_attr(
  feature = "napi",
  napi_derive::napi(object, object_from_js = false, js_name = "FeedbackStreamStatus")
)]
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamStatus {
  /// Size of `meta/events.jsonl`.
  pub stream_bytes: i64,
  /// Bytes of `recall_feedback` lines in it (from the projection, as of its last fold).
  pub feedback_bytes: i64,
  /// Bytes a compaction at the default cutoff would move (whole months older than it; an
  /// estimate from the projection).
  pub compactable_bytes: i64,
  /// Committed archives and their bytes.
  pub archives: u32,
  /// Bytes in committed archives.
  pub archived_bytes: i64,
  /// An interrupted compaction is waiting for recovery (the next compaction or rebuild does it).
  pub recovery_pending: bool,
  /// Lines longer than the line cap the projection skipped.
  pub skipped_lines: i64,
  /// Status issue codes: `feedback_events_large` (compaction would help),
  /// `feedback_compaction_pending`, `feedback_events_line_skipped`.
  pub issues: Vec<String>,
}

/// Status / lint findings about the stream that need no read of it: `feedback_events_large` (the
/// stream is ≥ [`LARGE_STREAM_BYTES`]: an explicit compaction would help; `feedbackStatus` says
/// how much it would move) and `feedback_compaction_pending` (an interrupted compaction awaits
/// recovery).
pub fn status_issues(meta: &Path) -> Vec<crate::store::IndexIssue> {
  let mut out = Vec::new();
  let len = super::events::events_len(meta);
  if len >= LARGE_STREAM_BYTES {
    out.push(crate::store::IndexIssue::new(
      "feedback_events_large",
      format!(
        "meta/events.jsonl is {} MiB; feedbackStatus shows how much an explicit compactFeedback would move to meta/{ARCHIVE_DIR}/",
        len >> 20
      ),
    ));
  }
  if needs_recovery(meta) {
    out.push(crate::store::IndexIssue::new(
      "feedback_compaction_pending",
      "an interrupted feedback compaction awaits recovery (the next rebuildFeedback, compactFeedback or recall does it)",
    ));
  }
  out
}

/// The stream's size, what compaction could move and whether recovery is pending. Reads the
/// cached projection (brought up to date incrementally), never the whole stream.
pub fn stream_status(meta: &Path) -> StreamStatus {
  let now = crate::retrieve::trust::now_secs();
  let proj = projection::current(meta, now);
  let cutoff = iso_from_ms((now - (DEFAULT_OLDER_THAN_DAYS * 86_400.0) as i64) * 1000);
  let cutoff_month = &cutoff[..7];
  let compactable_bytes: u64 =
    proj.bytes_by_month.iter().filter(|(m, _)| m.as_str() < cutoff_month).map(|(_, b)| *b).sum();
  let stream_bytes = super::events::events_len(meta);
  let mut st = StreamStatus {
    stream_bytes: sat_i64(stream_bytes),
    feedback_bytes: sat_i64(proj.feedback_bytes),
    compactable_bytes: sat_i64(compactable_bytes),
    recovery_pending: needs_recovery(meta),
    skipped_lines: sat_i64(proj.skipped_lines),
    ..Default::default()
  };
  for (_, m) in manifests(meta) {
    if let Some(m) = m.filter(|m| m.state == ArchiveState::Committed) {
      st.archives += 1;
      st.archived_bytes = st.archived_bytes.saturating_add(sat_i64(m.bytes));
    }
  }
  if stream_bytes >= LARGE_STREAM_BYTES {
    st.issues.push("feedback_events_large".into());
  }
  if st.recovery_pending {
    st.issues.push("feedback_compaction_pending".into());
  }
  if st.skipped_lines > 0 {
    st.issues.push("feedback_events_line_skipped".into());
  }
  st
}

#[cfg(test)]
mod tests;
