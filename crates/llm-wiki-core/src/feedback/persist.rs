//! The session ledger on disk: what recall showed in a session, kept per vault in
//! `<meta>/recall-ledger.jsonl`, so an MCP client (one process per connection) or a restarted
//! host still has its "shown" state and explicit feedback for those pages is accepted. The
//! in-memory ledger ([`super::ledger`]) stays the fast path: this file is written when delivery
//! is confirmed and read only when the in-memory ledger has no entry for a pair.
//!
//! One JSON line per shown pair, `{"v":1,"s":<session hash>,"t":<unix secs>,"e":<ShownEntry>}`:
//! the session id is stored as a hash (the file says which pages were shown, never which host
//! session). Bounded, expiring, crash-safe:
//! - appends are single writes under the advisory lock `<meta>/recall-ledger.lock` (held at most
//!   [`LOCK_WAIT`]; a busy lock skips the write with a diagnostic, never an error);
//! - a line left torn by a crash is closed before the next append, and skipped when read;
//! - when the file passes [`MAX_BYTES`] it is compacted under the same lock: expired lines
//!   ([`TTL_SECS`]) dropped, the newest [`MAX_ENTRIES`] kept, written to a temporary file and
//!   renamed over the ledger (atomic: a reader sees the old or the new file whole);
//! - a reader reads at most the last [`READ_CAP`] bytes (a huge file is a partial ledger and a
//!   diagnostic), skips lines that do not parse (a diagnostic counts them), and never fails.
//!
//! The constants are chosen, not fitted: a week covers a resumed session; 4,096 pairs is the
//! in-memory ledger's per-session cap; 2 MiB holds 4,096 lines of ≈ 400 bytes with room.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::ledger::ShownEntry;
use crate::util::diagnostic::RecallDiagnostic;
use crate::util::file_lock::{lock_within, HeldLock};
use crate::util::hash::hex;

/// File name of the ledger under `meta/`.
pub const LEDGER_FILE: &str = "recall-ledger.jsonl";
/// File name of its advisory lock under `meta/`.
pub const LOCK_FILE: &str = "recall-ledger.lock";
/// Age after which a shown entry is forgotten (7 days).
pub const TTL_SECS: i64 = 7 * 86_400;
/// Entries kept by a compaction (newest first).
pub const MAX_ENTRIES: usize = 4096;
/// Size past which an append compacts the file.
pub const MAX_BYTES: u64 = 2 << 20;
/// Bytes a reader reads at most (the file's tail).
pub const READ_CAP: u64 = 8 << 20;
/// Longest wait for the ledger's lock.
pub const LOCK_WAIT: Duration = Duration::from_millis(250);
/// Format version of a line.
const VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Line {
  v: u32,
  s: String,
  t: i64,
  e: ShownEntry,
}

/// The ledger file of a vault's `meta` directory.
pub fn ledger_path(meta: &Path) -> PathBuf {
  meta.join(LEDGER_FILE)
}

/// The stored form of a session id (sha256, 32 hex characters).
pub fn session_key(session: &str) -> String {
  hex(&Sha256::digest(session.as_bytes()))[..32].to_string()
}

fn diag(code: &str, message: String) -> RecallDiagnostic {
  RecallDiagnostic { code: code.into(), message }
}

fn lock(meta: &Path) -> std::result::Result<HeldLock, String> {
  lock_within(&meta.join(LOCK_FILE), LOCK_WAIT)
}

/// What a read of the ledger found.
#[derive(Debug, Default)]
pub struct Loaded {
  /// Entries not expired at `now`, in file order (oldest first), with their session key and time.
  lines: Vec<Line>,
  /// Corrupt lines, a partial read, an unreadable file.
  pub diagnostics: Vec<RecallDiagnostic>,
}

impl Loaded {
  /// Entries read.
  pub fn len(&self) -> usize {
    self.lines.len()
  }
  /// True when no entry was read.
  pub fn is_empty(&self) -> bool {
    self.lines.is_empty()
  }
}

/// Read the ledger (its last [`READ_CAP`] bytes at most), dropping expired and unparsable lines.
/// Never fails: a missing file is empty, anything wrong is a diagnostic.
pub fn load(meta: &Path, now: i64) -> Loaded {
  let mut out = Loaded::default();
  let path = ledger_path(meta);
  let mut f = match File::open(&path) {
    Ok(f) => f,
    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
    Err(e) => {
      out
        .diagnostics
        .push(diag("recall_ledger_unreadable", format!("{}: {e}; no shown state read", path.display())));
      return out;
    }
  };
  let len = f.metadata().map(|m| m.len()).unwrap_or(0);
  let mut partial = false;
  if len > READ_CAP {
    partial = f.seek(SeekFrom::Start(len - READ_CAP)).is_ok();
  }
  let mut buf = Vec::new();
  if let Err(e) = f.take(READ_CAP).read_to_end(&mut buf) {
    out
      .diagnostics
      .push(diag("recall_ledger_unreadable", format!("{}: {e}; no shown state read", path.display())));
    return out;
  }
  let mut text: &[u8] = &buf;
  if partial {
    // Skip the (probably cut) first line of the tail.
    let cut = text.iter().position(|b| *b == b'\n').map_or(text.len(), |i| i + 1);
    text = &text[cut..];
    out.diagnostics.push(diag(
      "recall_ledger_partial",
      format!(
        "{} is {len} bytes (over {READ_CAP}): only its last {READ_CAP} bytes were read; the next append compacts it",
        path.display()
      ),
    ));
  }
  let mut bad = 0usize;
  for raw in text.split(|b| *b == b'\n') {
    if raw.iter().all(u8::is_ascii_whitespace) {
      continue;
    }
    match serde_json::from_slice::<Line>(raw) {
      Ok(l) if l.v == VERSION => {
        if now.saturating_sub(l.t) < TTL_SECS {
          out.lines.push(l);
        }
      }
      _ => bad += 1,
    }
  }
  if bad > 0 {
    out.diagnostics.push(diag(
      "recall_ledger_corrupt",
      format!("{bad} line(s) of {} are not ledger entries and were skipped", path.display()),
    ));
  }
  out
}

/// The newest entry of `session` for `(vault_id, page_id)` in `loaded`.
pub fn find(loaded: &Loaded, session: &str, vault_id: &str, page_id: &str) -> Option<ShownEntry> {
  let key = session_key(session);
  loaded
    .lines
    .iter()
    .rev()
    .find(|l| l.s == key && l.e.vault_id == vault_id && l.e.page_id == page_id)
    .map(|l| l.e.clone())
}

/// The session's entries in `loaded`, the newest per pair, oldest first.
pub fn session_entries(loaded: &Loaded, session: &str) -> Vec<ShownEntry> {
  let key = session_key(session);
  let mut out: Vec<ShownEntry> = Vec::new();
  for l in loaded.lines.iter().filter(|l| l.s == key) {
    out.retain(|e| !(e.vault_id == l.e.vault_id && e.page_id == l.e.page_id));
    out.push(l.e.clone());
  }
  out
}

/// Bring the session's pairs recorded in `meta`'s ledger into this process's in-memory ledger
/// (once per process and session; see [`super::ledger::hydrate_once`]). Read problems are
/// ignored here (the feedback path reports them).
pub fn hydrate(meta: &Path, session: &str, now: i64) {
  super::ledger::hydrate_once(session, || session_entries(&load(meta, now), session));
}

/// Look up a pair the session was shown, as recorded by any process. `(entry, diagnostics)`.
pub fn lookup(
  meta: &Path,
  session: &str,
  vault_id: &str,
  page_id: &str,
  now: i64,
) -> (Option<ShownEntry>, Vec<RecallDiagnostic>) {
  let loaded = load(meta, now);
  (find(&loaded, session, vault_id, page_id), loaded.diagnostics)
}

/// Record `entries` as shown in `session` at `now`: one append (closing a torn last line first),
/// then a compaction when the file passed [`MAX_BYTES`]. Never fails: a busy lock or an I/O
/// error is a diagnostic (the in-memory ledger still holds the entries).
pub fn record(meta: &Path, session: &str, entries: &[ShownEntry], now: i64) -> Vec<RecallDiagnostic> {
  if entries.is_empty() {
    return vec![];
  }
  let key = session_key(session);
  let mut text = String::new();
  for e in entries {
    let line = Line { v: VERSION, s: key.clone(), t: now, e: e.clone() };
    if let Ok(s) = serde_json::to_string(&line) {
      text.push_str(&s);
      text.push('\n');
    }
  }
  let _held = match lock(meta) {
    Ok(h) => h,
    Err(e) => {
      return vec![diag(
        "recall_ledger_busy",
        format!("the shown state was not saved for other processes ({e}); this process keeps it"),
      )]
    }
  };
  let path = ledger_path(meta);
  let res = (|| -> std::io::Result<u64> {
    let mut f = OpenOptions::new().create(true).append(true).read(true).open(&path)?;
    let len = f.metadata()?.len();
    if len > 0 {
      let mut last = [0u8; 1];
      f.seek(SeekFrom::Start(len - 1))?;
      f.read_exact(&mut last)?;
      if last[0] != b'\n' {
        text.insert(0, '\n');
      }
    }
    f.write_all(text.as_bytes())?;
    Ok(len + text.len() as u64)
  })();
  match res {
    Ok(size) if size > MAX_BYTES => compact_locked(meta, now),
    Ok(_) => vec![],
    Err(e) => vec![diag(
      "recall_ledger_unwritable",
      format!("{}: {e}; the shown state was not saved for other processes", path.display()),
    )],
  }
}

/// Compact the ledger now (takes the lock): expired and unparsable lines dropped, the newest
/// [`MAX_ENTRIES`] kept, atomically replaced. Returns diagnostics.
pub fn compact(meta: &Path, now: i64) -> Vec<RecallDiagnostic> {
  match lock(meta) {
    Ok(_held) => compact_locked(meta, now),
    Err(e) => vec![diag("recall_ledger_busy", format!("ledger compaction skipped ({e})"))],
  }
}

fn compact_locked(meta: &Path, now: i64) -> Vec<RecallDiagnostic> {
  let mut loaded = load(meta, now);
  let over = loaded.lines.len().saturating_sub(MAX_ENTRIES);
  loaded.lines.drain(..over);
  let mut text = String::new();
  for l in &loaded.lines {
    if let Ok(s) = serde_json::to_string(l) {
      text.push_str(&s);
      text.push('\n');
    }
  }
  let mut diagnostics = loaded.diagnostics;
  if let Err(e) = crate::fsutil::atomic_write(&ledger_path(meta), text.as_bytes()) {
    diagnostics.push(diag("recall_ledger_unwritable", format!("ledger compaction failed: {e}")));
  }
  diagnostics
}

#[cfg(test)]
mod tests {
  use super::*;

  fn entry(page: &str) -> ShownEntry {
    ShownEntry {
      vault_id: "v".into(),
      page_id: page.into(),
      query_hash: "q".into(),
      rank: 1,
      mode: "lexical".into(),
      index_version: "1:1".into(),
      model_version: "estimate".into(),
      content_hash: "h".into(),
      chars: 10,
      automatic: false,
    }
  }

  const NOW: i64 = 1_800_000_000;

  #[test]
  fn a_second_reader_finds_what_the_first_recorded_per_session() {
    let t = tempfile::tempdir().unwrap();
    let meta = t.path().join("meta");
    assert!(record(&meta, "s1", &[entry("a"), entry("b")], NOW).is_empty());
    let (e, d) = lookup(&meta, "s1", "v", "b", NOW + 10);
    assert_eq!(e, Some(entry("b")));
    assert!(d.is_empty());
    assert!(lookup(&meta, "s2", "v", "a", NOW).0.is_none());
    assert!(lookup(&meta, "s1", "w", "a", NOW).0.is_none());
    // The session id is not in the file.
    let text = std::fs::read_to_string(ledger_path(&meta)).unwrap();
    assert!(!text.contains("\"s1\"") && text.contains(&session_key("s1")));
  }

  #[test]
  fn entries_expire() {
    let t = tempfile::tempdir().unwrap();
    let meta = t.path().to_path_buf();
    record(&meta, "s", &[entry("a")], NOW);
    assert!(lookup(&meta, "s", "v", "a", NOW + TTL_SECS - 1).0.is_some());
    assert!(lookup(&meta, "s", "v", "a", NOW + TTL_SECS).0.is_none());
    // A compaction drops them from the file.
    compact(&meta, NOW + TTL_SECS);
    assert_eq!(std::fs::read_to_string(ledger_path(&meta)).unwrap(), "");
  }

  #[test]
  fn corrupt_and_torn_lines_are_skipped_and_the_next_append_starts_a_new_line() {
    let t = tempfile::tempdir().unwrap();
    let meta = t.path().to_path_buf();
    record(&meta, "s", &[entry("a")], NOW);
    let mut f = OpenOptions::new().append(true).open(ledger_path(&meta)).unwrap();
    f.write_all(b"not json at all\n{\"v\":1,\"s\":\"x\",\"t\":1,\"e\":{\"vaultId\":\"v\"").unwrap();
    drop(f);
    let (e, d) = lookup(&meta, "s", "v", "a", NOW);
    assert!(e.is_some());
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].code, "recall_ledger_corrupt");
    assert!(d[0].message.starts_with("2 line(s)"), "{}", d[0].message);
    // The torn line is closed: the new entry parses.
    assert!(record(&meta, "s", &[entry("b")], NOW).is_empty());
    assert!(lookup(&meta, "s", "v", "b", NOW).0.is_some());
    // Binary garbage is a diagnostic too, never a panic.
    std::fs::write(ledger_path(&meta), [0xffu8, 0, 1, 2, b'\n', 0xfe]).unwrap();
    let (e, d) = lookup(&meta, "s", "v", "a", NOW);
    assert!(e.is_none());
    assert_eq!(d[0].code, "recall_ledger_corrupt");
  }

  #[test]
  fn a_huge_file_is_read_partially_and_compacted_by_the_next_append() {
    let t = tempfile::tempdir().unwrap();
    let meta = t.path().to_path_buf();
    {
      let mut f = File::create(ledger_path(&meta)).unwrap();
      let junk = vec![b'x'; 1 << 20];
      for _ in 0..(READ_CAP >> 20) + 1 {
        f.write_all(&junk).unwrap();
      }
      f.write_all(b"\n").unwrap();
    }
    record(&meta, "s", &[entry("tail")], NOW);
    // The append above compacted the file (it was over MAX_BYTES): small again, entry kept.
    let size = std::fs::metadata(ledger_path(&meta)).unwrap().len();
    assert!(size < 4096, "{size}");
    assert!(lookup(&meta, "s", "v", "tail", NOW).0.is_some());
    // Reading a huge file without compacting: the tail only, with a diagnostic.
    {
      let mut f = OpenOptions::new().append(true).open(ledger_path(&meta)).unwrap();
      let junk = vec![b'y'; 1 << 20];
      for _ in 0..(READ_CAP >> 20) + 1 {
        f.write_all(&junk).unwrap();
      }
      f.write_all(b"\n").unwrap();
      let line = Line { v: VERSION, s: session_key("s"), t: NOW, e: entry("late") };
      f.write_all(format!("{}\n", serde_json::to_string(&line).unwrap()).as_bytes()).unwrap();
    }
    let (e, d) = lookup(&meta, "s", "v", "late", NOW);
    assert!(e.is_some());
    assert!(d.iter().any(|d| d.code == "recall_ledger_partial"), "{d:?}");
  }

  #[test]
  fn compaction_keeps_the_newest_entries_within_the_bound() {
    let t = tempfile::tempdir().unwrap();
    let meta = t.path().to_path_buf();
    let many: Vec<ShownEntry> = (0..MAX_ENTRIES + 10).map(|i| entry(&format!("p{i}"))).collect();
    record(&meta, "s", &many, NOW);
    compact(&meta, NOW);
    let loaded = load(&meta, NOW);
    assert_eq!(loaded.len(), MAX_ENTRIES);
    assert!(find(&loaded, "s", "v", "p0").is_none());
    assert!(find(&loaded, "s", "v", &format!("p{}", MAX_ENTRIES + 9)).is_some());
  }

  #[test]
  fn a_held_lock_skips_the_write_with_a_diagnostic() {
    let t = tempfile::tempdir().unwrap();
    let meta = t.path().to_path_buf();
    let held = lock(&meta).unwrap();
    let d = record(&meta, "s", &[entry("a")], NOW);
    assert_eq!(d[0].code, "recall_ledger_busy");
    drop(held);
    assert!(record(&meta, "s", &[entry("a")], NOW).is_empty());
  }
}
